/* auth.c - X-User-Id parsing, HMAC-SHA256 buyer tokens, constant-time
 * admin token comparison. Pure: no I/O, no allocation of our own (OpenSSL's
 * one-shot HMAC() may allocate internally and frees before returning). */
#include "http/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/num.h"

#define SIG_HEX 64 /* hex digits of a SHA-256 MAC */

int sk_auth_parse_user_id(const char *s, size_t len, uint64_t *uid)
{
    if (!s) return SK_EINVAL;
    return sk_num_u64_canonical(s, len, uid);
}

static void hex_lower(const unsigned char *in, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
}

/* Lowercase hex HMAC-SHA256(secret, msg) into out[64]. HMAC() (the one-shot)
 * is not deprecated in OpenSSL 3, unlike HMAC_CTX; it costs ~1 us here. */
static int mac_hex(const char *secret, size_t secret_len, const char *msg, size_t len,
                   char out[SIG_HEX])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (secret_len > (size_t)0x7fffffff) return SK_EINVAL; /* HMAC() takes an int */
    if (!HMAC(EVP_sha256(), secret, (int)secret_len, (const unsigned char *)msg, len, md, &mdlen) ||
        mdlen != SIG_HEX / 2)
        return SK_EAUTH;
    hex_lower(md, mdlen, out);
    OPENSSL_cleanse(md, sizeof md);
    return 0;
}

int sk_auth_verify_token(const char *secret, size_t secret_len, const char *tok, size_t len,
                         int64_t now_unix, uint64_t *uid)
{
    if (!secret || secret_len == 0 || !tok) return SK_EAUTH;
    /* shortest: "1.1." + 64 hex */
    if (len < 4 + SIG_HEX || len > SK_AUTH_TOKEN_MAX) return SK_EAUTH;
    const char *d1 = memchr(tok, '.', len);
    if (!d1) return SK_EAUTH;
    size_t uid_len = (size_t)(d1 - tok);
    const char *d2 = memchr(d1 + 1, '.', len - uid_len - 1);
    if (!d2) return SK_EAUTH;
    size_t exp_len = (size_t)(d2 - d1 - 1);
    size_t signed_len = (size_t)(d2 - tok);
    if (len - signed_len - 1 != SIG_HEX) return SK_EAUTH;
    const char *sig = d2 + 1;

    uint64_t u, e;
    if (sk_num_u64_canonical(tok, uid_len, &u) < 0) return SK_EAUTH;
    if (sk_num_u64_canonical(d1 + 1, exp_len, &e) < 0 || e > (uint64_t)INT64_MAX) return SK_EAUTH;
    for (size_t i = 0; i < SIG_HEX; i++) {
        char c = sig[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return SK_EAUTH;
    }

    char want[SIG_HEX];
    if (mac_hex(secret, secret_len, tok, signed_len, want) < 0) return SK_EAUTH;
    /* constant time: no early exit on the first differing byte */
    int diff = CRYPTO_memcmp(want, sig, SIG_HEX);
    OPENSSL_cleanse(want, sizeof want);
    if (diff != 0) return SK_EAUTH;
    if (now_unix >= (int64_t)e) return SK_EAUTH; /* expired */
    *uid = u;
    return 0;
}

int sk_auth_make_token(const char *secret, size_t secret_len, uint64_t uid, int64_t expiry,
                       char *out, size_t cap)
{
    if (cap > 0) out[0] = 0;
    if (!secret || secret_len == 0 || uid == 0 || expiry < 1) return SK_EINVAL;
    char buf[SK_AUTH_TOKEN_MAX + 1];
    int n = snprintf(buf, sizeof buf, "%llu.%lld.", (unsigned long long)uid, (long long)expiry);
    if (n < 0 || (size_t)n + SIG_HEX >= sizeof buf) return SK_EINVAL;
    int rc = mac_hex(secret, secret_len, buf, (size_t)n - 1, buf + n);
    if (rc < 0) return rc;
    size_t total = (size_t)n + SIG_HEX;
    buf[total] = 0;
    if (total + 1 > cap) return SK_ENOMEM;
    memcpy(out, buf, total + 1);
    return (int)total;
}

static int is_ows(char c)
{
    return c == ' ' || c == '\t';
}

int sk_auth_bearer(const char *hdr, size_t len, const char **tok, size_t *toklen)
{
    static const char scheme[] = "bearer";
    const size_t sl = sizeof scheme - 1;
    if (!hdr || len <= sl) return SK_EAUTH;
    for (size_t i = 0; i < sl; i++) {
        char c = hdr[i];
        if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
        if (c != scheme[i]) return SK_EAUTH;
    }
    size_t p = sl;
    if (!is_ows(hdr[p])) return SK_EAUTH; /* "Bearerx..." is another scheme */
    while (p < len && is_ows(hdr[p]))
        p++;
    size_t end = len;
    while (end > p && is_ows(hdr[end - 1]))
        end--;
    if (end == p) return SK_EAUTH;
    for (size_t i = p; i < end; i++) {
        unsigned char c = (unsigned char)hdr[i];
        if (c <= ' ' || c == 127) return SK_EAUTH; /* inner whitespace or control bytes */
    }
    *tok = hdr + p;
    *toklen = end - p;
    return 0;
}

int sk_auth_equal(const char *a, size_t alen, const char *b, size_t blen)
{
    /* Lengths are allowed to leak; contents are not. */
    if (!a || !b || alen == 0 || alen != blen) return 0;
    return CRYPTO_memcmp(a, b, alen) == 0;
}
