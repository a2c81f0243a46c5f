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

/* Checks "<uid>.<exp>.<mac>" at tok + pre (pre bytes of "<kid>:" before
 * it, covered by the MAC too): format, signature, expiry, and, when
 * max_ttl_s > 0, an expiry at most max_ttl_s ahead of now. */
static int check_token(const char *secret, size_t secret_len, const char *tok, size_t len,
                       size_t pre, int64_t now_unix, int64_t max_ttl_s, uint64_t *uid)
{
    if (!secret || secret_len == 0 || !tok || pre > len) return SK_EAUTH;
    const char *body = tok + pre;
    size_t blen = len - pre;
    /* shortest: "1.1." + 64 hex */
    if (blen < 4 + SIG_HEX || blen > SK_AUTH_TOKEN_MAX) return SK_EAUTH;
    const char *d1 = memchr(body, '.', blen);
    if (!d1) return SK_EAUTH;
    size_t uid_len = (size_t)(d1 - body);
    const char *d2 = memchr(d1 + 1, '.', blen - uid_len - 1);
    if (!d2) return SK_EAUTH;
    size_t exp_len = (size_t)(d2 - d1 - 1);
    size_t signed_len = (size_t)(d2 - tok);
    if (len - signed_len - 1 != SIG_HEX) return SK_EAUTH;
    const char *sig = d2 + 1;

    uint64_t u, e;
    if (sk_num_u64_canonical(body, uid_len, &u) < 0) return SK_EAUTH;
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
    /* a token that lives longer than the policy allows never expires in
     * practice: refused (no overflow: e <= INT64_MAX, now and ttl small) */
    if (max_ttl_s > 0 && (int64_t)e - now_unix > max_ttl_s) return SK_EAUTH;
    *uid = u;
    return 0;
}

int sk_auth_verify_token(const char *secret, size_t secret_len, const char *tok, size_t len,
                         int64_t now_unix, uint64_t *uid)
{
    return check_token(secret, secret_len, tok, len, 0, now_unix, 0, uid);
}

static int is_kid_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
}

int sk_auth_verify_token_keys(const struct sk_auth_key *keys, size_t n, const char *tok, size_t len,
                              int64_t now_unix, int64_t max_ttl_s, uint64_t *uid)
{
    if (!keys || !tok || len > SK_AUTH_KID_TOKEN_MAX) return SK_EAUTH;
    /* "<kid>:" in front, or no key id at all (no ':' can follow a uid) */
    size_t kl = 0;
    while (kl < len && kl <= SK_AUTH_KID_MAX && is_kid_char(tok[kl]))
        kl++;
    size_t pre = 0;
    if (kl < len && tok[kl] == ':') {
        if (kl == 0 || kl > SK_AUTH_KID_MAX) return SK_EAUTH;
        pre = kl + 1;
    } else {
        kl = 0;
    }
    for (size_t i = 0; i < n; i++) {
        const char *id = keys[i].id ? keys[i].id : "";
        if (strlen(id) != kl || memcmp(id, tok, kl) != 0) continue;
        return check_token(keys[i].secret, keys[i].secret_len, tok, len, pre, now_unix, max_ttl_s,
                           uid);
    }
    return SK_EAUTH; /* no key with that id */
}

int sk_auth_make_token(const char *secret, size_t secret_len, uint64_t uid, int64_t expiry,
                       char *out, size_t cap)
{
    return sk_auth_make_token_kid(NULL, secret, secret_len, uid, expiry, out, cap);
}

int sk_auth_make_token_kid(const char *kid, const char *secret, size_t secret_len, uint64_t uid,
                           int64_t expiry, char *out, size_t cap)
{
    if (cap > 0) out[0] = 0;
    if (!secret || secret_len == 0 || uid == 0 || expiry < 1) return SK_EINVAL;
    size_t kl = kid ? strlen(kid) : 0;
    if (kl > SK_AUTH_KID_MAX) return SK_EINVAL;
    for (size_t i = 0; i < kl; i++)
        if (!is_kid_char(kid[i])) return SK_EINVAL;
    char buf[SK_AUTH_KID_TOKEN_MAX + 1];
    int n = snprintf(buf, sizeof buf, "%s%s%llu.%lld.", kl ? kid : "", kl ? ":" : "",
                     (unsigned long long)uid, (long long)expiry);
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
