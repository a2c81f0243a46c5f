/* draw.c - the verifiable draw (draw.h; the algorithm in
 * docs/fairness.md). SHA-256 from OpenSSL's EVP. */
#include "engine/draw.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "core/error.h"

#define SEED_BYTES 32

static int unhex(const char *hex, unsigned char out[SEED_BYTES])
{
    if (!hex || strlen(hex) != 2 * SEED_BYTES) return SK_EINVAL;
    for (int i = 0; i < 2 * SEED_BYTES; i++) {
        char c = hex[i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (v < 0) return SK_EINVAL;
        if (i % 2 == 0)
            out[i / 2] = (unsigned char)(v << 4);
        else
            out[i / 2] |= (unsigned char)v;
    }
    return 0;
}

static void tohex(const unsigned char *b, size_t n, char *out)
{
    static const char hx[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hx[b[i] >> 4];
        out[2 * i + 1] = hx[b[i] & 15];
    }
    out[2 * n] = 0;
}

static void sha256(const void *p, size_t n, unsigned char md[32])
{
    unsigned int len = 0;
    if (!EVP_Digest(p, n, md, &len, EVP_sha256(), NULL) || len != 32) abort();
}

int sk_draw_commit(const char *seed_hex, char out[SK_DRAW_HEX])
{
    unsigned char s[SEED_BYTES], md[32];
    out[0] = 0;
    if (unhex(seed_hex, s) < 0) return SK_EINVAL;
    sha256(s, sizeof s, md);
    tohex(md, sizeof md, out);
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

size_t sk_draw_sort_unique(uint64_t *u, size_t n)
{
    if (n == 0) return 0;
    qsort(u, n, sizeof *u, cmp_u64);
    size_t k = 1;
    for (size_t i = 1; i < n; i++)
        if (u[i] != u[k - 1]) u[k++] = u[i];
    return k;
}

/* The word stream: block c = SHA-256(seed || c, 8 bytes big-endian), four
 * big-endian words per block. */
struct stream {
    unsigned char in[SEED_BYTES + 8];
    unsigned char block[32];
    uint64_t counter; /* the next block's */
    int used;         /* words of block taken (4: take a new block) */
};

static void stream_init(struct stream *s, const unsigned char seed[SEED_BYTES])
{
    memcpy(s->in, seed, SEED_BYTES);
    s->counter = 0;
    s->used = 4;
}

static uint64_t be64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

static uint64_t next_word(struct stream *s)
{
    if (s->used == 4) {
        for (int i = 0; i < 8; i++)
            s->in[SEED_BYTES + i] = (unsigned char)(s->counter >> (56 - 8 * i));
        sha256(s->in, sizeof s->in, s->block);
        s->counter++;
        s->used = 0;
    }
    return be64(s->block + 8 * s->used++);
}

/* A uniform number in [0, m), m >= 1, by rejection: words at or above the
 * largest multiple of m below 2^64 are drawn again. */
static uint64_t uniform(struct stream *s, uint64_t m)
{
    uint64_t limit = UINT64_MAX - (UINT64_MAX % m + 1) % m; /* 2^64 - (2^64 mod m), less one */
    for (;;) {
        uint64_t w = next_word(s);
        if (w <= limit) return w % m;
    }
}

int sk_draw_order(const char *seed_hex, uint64_t *a, size_t n)
{
    unsigned char seed[SEED_BYTES];
    if (unhex(seed_hex, seed) < 0) return SK_EINVAL;
    for (size_t i = 1; i < n; i++)
        if (a[i] <= a[i - 1]) return SK_EINVAL;
    struct stream s;
    stream_init(&s, seed);
    for (size_t i = 0; i + 1 < n; i++) {
        size_t j = i + (size_t)uniform(&s, (uint64_t)(n - i));
        uint64_t t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
    return 0;
}

void sk_draw_list_hash(const uint64_t *u, size_t n, char out[SK_DRAW_HEX])
{
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    unsigned char md[32];
    unsigned int len = 0;
    if (!c || !EVP_DigestInit_ex(c, EVP_sha256(), NULL)) abort();
    char line[24];
    for (size_t i = 0; i < n; i++) {
        int k = snprintf(line, sizeof line, "%llu\n", (unsigned long long)u[i]);
        if (!EVP_DigestUpdate(c, line, (size_t)k)) abort();
    }
    if (!EVP_DigestFinal_ex(c, md, &len) || len != 32) abort();
    EVP_MD_CTX_free(c);
    tohex(md, sizeof md, out);
}
