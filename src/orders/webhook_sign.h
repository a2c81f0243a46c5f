/* webhook_sign.h - signatures of outgoing webhooks as the Standard Webhooks
 * convention has them (docs/integration.md): a secret "whsec_<base64>",
 * the signed content "<webhook-id>.<webhook-timestamp>.<body>", the
 * header "v1,<base64 HMAC-SHA256>", several space-separated while a
 * secret is rotated. Pure: no I/O; OpenSSL's HMAC and base64. */
#ifndef SK_WEBHOOK_SIGN_H
#define SK_WEBHOOK_SIGN_H
#include <stddef.h>
#include <stdint.h>

#define SK_WH_KEY_MAX 64     /* decoded secret bytes (24..64 accepted) */
#define SK_WH_SECRET_MAX 100 /* "whsec_" + base64 of SK_WH_KEY_MAX bytes + NUL */
#define SK_WH_SIG_MAX 50     /* "v1," + base64 of 32 bytes + NUL */

struct sk_wh_key {
    unsigned char k[SK_WH_KEY_MAX];
    size_t len;
};

/* Parses "whsec_<base64>" (standard alphabet, padded) into *key. 0, or
 * SK_EINVAL with why (cap bytes; never the secret) said. */
int sk_wh_key_parse(const char *secret, struct sk_wh_key *key, char *why, size_t cap);

/* "v1,<base64(HMAC-SHA256(key, id "." ts "." body))>" into out (cap >=
 * SK_WH_SIG_MAX). 0, or SK_EINVAL when out is too small. */
int sk_wh_sign(const struct sk_wh_key *key, const char *id, int64_t ts, const char *body,
               size_t body_len, char *out, size_t cap);

/* The webhook-signature header for n keys (the new one first during a
 * rotation): their signatures separated by a space. 0, or SK_EINVAL. */
int sk_wh_signature_header(const struct sk_wh_key *keys, int n, const char *id, int64_t ts,
                           const char *body, size_t body_len, char *out, size_t cap);

/* A new secret: "whsec_" and the base64 of 32 random bytes (OpenSSL's
 * RAND_bytes) into out (cap >= 51). 0, or SK_EINVAL (cap too small, or
 * no randomness). */
int sk_wh_secret_new(char *out, size_t cap);

#endif
