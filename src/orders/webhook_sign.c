/* webhook_sign.c - Standard Webhooks signatures (webhook_sign.h). */
#include "orders/webhook_sign.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include "core/error.h"

#define PREFIX "whsec_"

int sk_wh_key_parse(const char *secret, struct sk_wh_key *key, char *why, size_t cap)
{
    memset(key, 0, sizeof *key);
    size_t pl = sizeof PREFIX - 1;
    if (!secret || strncmp(secret, PREFIX, pl)) {
        snprintf(why, cap, "a webhook secret starts with \"" PREFIX "\"");
        return SK_EINVAL;
    }
    const char *b = secret + pl;
    size_t n = strlen(b);
    if (n == 0 || n % 4 || n > 4 * ((SK_WH_KEY_MAX + 2) / 3)) {
        snprintf(why, cap, "a webhook secret is " PREFIX " and the base64 of 24 to %d bytes",
                 SK_WH_KEY_MAX);
        return SK_EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        char c = b[i];
        int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                 c == '+' || c == '/' || (c == '=' && i >= n - 2);
        if (!ok || (c != '=' && i > 0 && b[i - 1] == '=')) {
            snprintf(why, cap, "a webhook secret's base64 has a character out of place");
            return SK_EINVAL;
        }
    }
    unsigned char out[4 * ((SK_WH_KEY_MAX + 2) / 3)];
    int len = EVP_DecodeBlock(out, (const unsigned char *)b, (int)n);
    if (len < 0) {
        snprintf(why, cap, "a webhook secret's base64 does not decode");
        return SK_EINVAL;
    }
    len -= (b[n - 1] == '=') + (b[n - 2] == '='); /* EVP_DecodeBlock counts the padding */
    if (len < 24 || len > SK_WH_KEY_MAX) {
        snprintf(why, cap, "a webhook secret holds 24 to %d bytes (this one %d)", SK_WH_KEY_MAX,
                 len);
        return SK_EINVAL;
    }
    memcpy(key->k, out, (size_t)len);
    key->len = (size_t)len;
    return 0;
}

int sk_wh_sign(const struct sk_wh_key *key, const char *id, int64_t ts, const char *body,
               size_t body_len, char *out, size_t cap)
{
    if (cap < SK_WH_SIG_MAX) return SK_EINVAL;
    char head[200];
    int hl = snprintf(head, sizeof head, "%s.%" PRId64 ".", id, ts);
    if (hl < 0 || (size_t)hl >= sizeof head) return SK_EINVAL;
    unsigned char mac[32];
    EVP_MAC *m = EVP_MAC_fetch(NULL, "HMAC", NULL);
    EVP_MAC_CTX *ctx = m ? EVP_MAC_CTX_new(m) : NULL;
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("digest", digest, 0),
                           OSSL_PARAM_construct_end()};
    size_t got = 0;
    int ok = ctx && EVP_MAC_init(ctx, key->k, key->len, params) > 0 &&
             EVP_MAC_update(ctx, (const unsigned char *)head, (size_t)hl) > 0 &&
             EVP_MAC_update(ctx, (const unsigned char *)body, body_len) > 0 &&
             EVP_MAC_final(ctx, mac, &got, sizeof mac) > 0 && got == sizeof mac;
    EVP_MAC_CTX_free(ctx);
    EVP_MAC_free(m);
    if (!ok) return SK_EINVAL;
    memcpy(out, "v1,", 3);
    EVP_EncodeBlock((unsigned char *)out + 3, mac, (int)sizeof mac); /* 44 chars + NUL */
    return 0;
}

int sk_wh_signature_header(const struct sk_wh_key *keys, int n, const char *id, int64_t ts,
                           const char *body, size_t body_len, char *out, size_t cap)
{
    size_t at = 0;
    if (cap) out[0] = 0;
    for (int i = 0; i < n; i++) {
        if (at + (i > 0) + SK_WH_SIG_MAX > cap) return SK_EINVAL;
        if (i > 0) out[at++] = ' ';
        int rc = sk_wh_sign(&keys[i], id, ts, body, body_len, out + at, cap - at);
        if (rc) return rc;
        at += strlen(out + at);
    }
    return 0;
}

int sk_wh_secret_new(char *out, size_t cap)
{
    unsigned char k[32];
    if (cap < sizeof PREFIX + 44 || RAND_bytes(k, (int)sizeof k) != 1) return SK_EINVAL;
    memcpy(out, PREFIX, sizeof PREFIX - 1);
    EVP_EncodeBlock((unsigned char *)out + sizeof PREFIX - 1, k, (int)sizeof k); /* 44 + NUL */
    return 0;
}
