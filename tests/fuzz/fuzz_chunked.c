/* fuzz_chunked.c - the strict chunked decoder (http/chunked.h) against an
 * independent reading of RFC 9112 section 7.1, written here: a
 * recursive-descent pass over the whole input, the grammar's rules one
 * after the other, where the decoder is a byte-at-a-time state machine fed
 * in pieces. On every input both must give the same verdict (the end, more
 * needed, malformed, over the size limit), the same body (so far), and
 * at the end the same count of bytes consumed, the rest left in place.
 *
 * Input: byte 0 picks the size limit, byte 1 seeds the split into pieces,
 * the rest is the encoded body. */
#include <string.h>

#include "core/error.h"
#include "fuzz.h"
#include "http/chunked.h"

enum { R_DONE, R_MORE, R_BAD, R_BIG };

/* ---- the reference ------------------------------------------------------ */

struct ref {
    const unsigned char *p;
    size_t n, i;
    unsigned char *body;
    size_t blen;
};

static int hexdig(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static unsigned hexval(unsigned char c)
{
    return c <= '9' ? (unsigned)(c - '0') : (unsigned)((c | 0x20) - 'a' + 10);
}

/* RFC 9110 section 5.6.2: tchar */
static int tchar(unsigned char c)
{
    static const char extra[] = "!#$%&'*+-.^_`|~";
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return 1;
    for (size_t k = 0; k < sizeof extra - 1; k++)
        if (c == (unsigned char)extra[k]) return 1;
    return 0;
}

/* OWS / BWS */
static void ows(struct ref *r)
{
    while (r->i < r->n && (r->p[r->i] == ' ' || r->p[r->i] == '\t'))
        r->i++;
}

/* 1*tchar: R_DONE, R_MORE (input ended inside or before), R_BAD */
static int token(struct ref *r)
{
    size_t s = r->i;
    while (r->i < r->n && tchar(r->p[r->i]))
        r->i++;
    if (r->i == r->n) return R_MORE;
    return r->i > s ? R_DONE : R_BAD;
}

/* quoted-string = DQUOTE *( qdtext / quoted-pair ) DQUOTE (section 5.6.4) */
static int quoted_string(struct ref *r)
{
    r->i++; /* the opening DQUOTE */
    for (;;) {
        if (r->i == r->n) return R_MORE;
        unsigned char c = r->p[r->i];
        if (c == '"') {
            r->i++;
            return R_DONE;
        }
        if (c == '\\') {
            if (r->i + 1 == r->n) return R_MORE;
            unsigned char q = r->p[r->i + 1];
            if (!(q == '\t' || q == ' ' || (q >= 0x21 && q <= 0x7e) || q >= 0x80)) return R_BAD;
            r->i += 2;
            continue;
        }
        if (!(c == '\t' || c == ' ' || c == 0x21 || (c >= 0x23 && c <= 0x5b) ||
              (c >= 0x5d && c <= 0x7e) || c >= 0x80))
            return R_BAD;
        r->i++;
    }
}

/* chunk-ext = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] ) */
static int chunk_ext(struct ref *r)
{
    for (;;) {
        size_t before = r->i;
        ows(r);
        if (r->i == r->n) return R_MORE;
        if (r->p[r->i] != ';') {
            if (r->i != before) return R_BAD; /* BWS only before ';' */
            return R_DONE;
        }
        r->i++;
        ows(r);
        int t = token(r); /* chunk-ext-name */
        if (t != R_DONE) return t;
        size_t after_name = r->i;
        ows(r);
        if (r->i == r->n) return R_MORE;
        if (r->p[r->i] != '=') {
            r->i = after_name; /* the BWS belongs to the next ';' */
            continue;
        }
        r->i++;
        ows(r);
        if (r->i == r->n) return R_MORE;
        t = r->p[r->i] == '"' ? quoted_string(r) : token(r); /* chunk-ext-val */
        if (t != R_DONE) return t;
    }
}

/* CRLF */
static int crlf(struct ref *r)
{
    if (r->i == r->n) return R_MORE;
    if (r->p[r->i] != '\r') return R_BAD;
    if (r->i + 1 == r->n) return R_MORE;
    if (r->p[r->i + 1] != '\n') return R_BAD;
    r->i += 2;
    return R_DONE;
}

/* chunked-body = *chunk last-chunk trailer-section CRLF, with an empty
 * trailer section (trailers refused), a size of 1 to 16 digits, extensions
 * of at most SK_CHUNKED_EXT_MAX bytes, a body of at most max bytes. */
static int ref_decode(struct ref *r, uint64_t max)
{
    uint64_t total = 0;
    for (;;) {
        size_t s = r->i;
        uint64_t size = 0;
        while (r->i < r->n && hexdig(r->p[r->i])) {
            if (r->i - s == SK_CHUNKED_DIGITS_MAX) return R_BAD;
            size = size * 16 + hexval(r->p[r->i]);
            r->i++;
        }
        if (r->i == r->n) return R_MORE;
        if (r->i == s) return R_BAD;
        size_t ext_start = r->i;
        int t = chunk_ext(r);
        /* the bound holds whatever the extension's fate */
        size_t ext_end = t == R_DONE ? r->i : t == R_MORE ? r->n : r->i;
        if (ext_end - ext_start > SK_CHUNKED_EXT_MAX && t != R_BAD) return R_BAD;
        if (t == R_BAD) return R_BAD;
        if (t == R_MORE) return R_MORE;
        t = crlf(r);
        if (t != R_DONE) return t;
        if (size > max - total) return R_BIG;
        total += size;
        if (size == 0) return crlf(r); /* no trailer: the final CRLF */
        size_t avail = r->n - r->i;
        size_t take = avail < size ? avail : (size_t)size;
        memcpy(r->body + r->blen, r->p + r->i, take);
        r->blen += take;
        r->i += take;
        if (take < size) return R_MORE;
        t = crlf(r);
        if (t != R_DONE) return t;
    }
}

/* ---- the decoder, fed in pieces ---------------------------------------- */

static uint32_t next_rand(uint32_t *s)
{
    *s = *s * 1103515245u + 12345u;
    return *s >> 16;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    static const uint64_t maxes[4] = {UINT64_MAX, 64, 4096, 0};
    uint64_t max = maxes[data[0] & 3];
    uint32_t seed = data[1];
    const uint8_t *msg = data + 2;
    size_t n = size - 2;

    struct ref r = {.p = msg, .n = n, .body = malloc(n + 1)};
    FUZZ_CHECK(r.body != NULL);
    int want = ref_decode(&r, max);

    char *buf = malloc(n + 1);
    FUZZ_CHECK(buf != NULL);
    struct sk_chunked d;
    sk_chunked_init(&d, max);
    size_t done = 0, fed = 0, tail = 0;
    int rc = SK_CHUNKED_MORE;
    while (rc == SK_CHUNKED_MORE && fed < n) {
        size_t k = seed ? 1 + next_rand(&seed) % 24 : n - fed;
        if (k > n - fed) k = n - fed;
        memcpy(buf + done, msg + fed, k);
        fed += k;
        size_t len = k;
        const char *why = NULL;
        rc = sk_chunked_decode(&d, buf + done, &len, &tail, &why);
        FUZZ_CHECK(rc == SK_CHUNKED_MORE || rc == SK_CHUNKED_DONE || rc == SK_EINVAL);
        FUZZ_CHECK(rc != SK_EINVAL || (why && why[0]));
        FUZZ_CHECK(len <= k && tail <= k - len);
        done += len;
    }
    int got = rc == SK_CHUNKED_DONE   ? R_DONE
              : rc == SK_CHUNKED_MORE ? R_MORE
              : d.too_large           ? R_BIG
                                      : R_BAD;
    FUZZ_CHECK(got == want);
    FUZZ_CHECK(d.body <= max);
    if (got == R_DONE || got == R_MORE) {
        FUZZ_CHECK(done == r.blen && memcmp(buf, r.body, done) == 0);
        FUZZ_CHECK(d.body == done);
    }
    if (got == R_DONE) {
        /* consumed what the reference consumed; the rest of the last piece
         * follows the body, untouched */
        FUZZ_CHECK(fed - tail == r.i);
        FUZZ_CHECK(memcmp(buf + done, msg + r.i, tail) == 0);
    }
    free(buf);
    free(r.body);
    return 0;
}
