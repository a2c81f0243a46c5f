/* auth.h - buyer identity and admin credentials (bytes in, no I/O).
 *
 * Two buyer modes (README, HTTP API): `trusted-header` reads X-User-Id, `hmac` reads
 * "Authorization: Bearer [<key id>:]<user_id>.<expiry_unix>.<hex HMAC-SHA256>",
 * where the MAC covers the exact bytes before the last '.'
 * ("[<key id>:]<user_id>.<expiry_unix>") and is 64 lowercase hex digits. The
 * key id names the secret that signed the token, so two secrets can be
 * accepted at once while a new one replaces an old one. Nothing here
 * allocates; every parser reads at most len bytes and needs no
 * terminator. */
#ifndef SK_AUTH_H
#define SK_AUTH_H
#include <stddef.h>
#include <stdint.h>

/* Longest token sk_auth_make_token writes, without the terminator:
 * 20-digit uid, '.', 19-digit expiry, '.', 64 hex digits. */
#define SK_AUTH_TOKEN_MAX 105

/* Longest key id: letters, digits, '_' and '-'. */
#define SK_AUTH_KID_MAX 32
/* Longest token with a key id ("<kid>:" and a token without one). */
#define SK_AUTH_KID_TOKEN_MAX (SK_AUTH_KID_MAX + 1 + SK_AUTH_TOKEN_MAX)

/* One secret a server accepts: id "" (or NULL) checks tokens without a
 * key id. Not owned. */
struct sk_auth_key {
    const char *id;
    const char *secret;
    size_t secret_len;
};

/* X-User-Id value: canonical decimal in 1..UINT64_MAX (no sign, no spaces,
 * no leading zeros, nothing after the digits). Returns 0 or SK_EINVAL. */
int sk_auth_parse_user_id(const char *s, size_t len, uint64_t *uid);

/* Checks a token: format (canonical decimals, uid >= 1, expiry >= 1,
 * lowercase hex), signature (compared in constant time), then expiry (the
 * token is valid while now_unix < expiry). An empty secret refuses every
 * token. Returns 0 with *uid set, or SK_EAUTH (*uid untouched): the caller
 * answers 401 without telling which check failed. */
int sk_auth_verify_token(const char *secret, size_t secret_len, const char *tok, size_t len,
                         int64_t now_unix, uint64_t *uid);

/* Checks "[<kid>:]<uid>.<expiry>.<mac>" with the one of the n keys whose
 * id is kid ("" when the token has none): format, signature, expiry as
 * sk_auth_verify_token, and, when max_ttl_s > 0, an expiry no later than
 * now_unix + max_ttl_s (a token for INT64_MAX never expires otherwise).
 * An unknown key id is refused. Returns 0 with *uid set, or SK_EAUTH. */
int sk_auth_verify_token_keys(const struct sk_auth_key *keys, size_t n, const char *tok, size_t len,
                              int64_t now_unix, int64_t max_ttl_s, uint64_t *uid);

/* Writes "<kid>:<uid>.<expiry>.<hex mac>" (kid NULL or "": the form
 * without a key id, as sk_auth_make_token) into out; SK_AUTH_KID_TOKEN_MAX
 * + 1 bytes always suffice. Returns the length, or SK_EINVAL (as below, or
 * a kid over SK_AUTH_KID_MAX bytes or with other characters) or SK_ENOMEM
 * (cap too small; out then holds "" when cap > 0). */
int sk_auth_make_token_kid(const char *kid, const char *secret, size_t secret_len, uint64_t uid,
                           int64_t expiry, char *out, size_t cap);

/* Writes "<uid>.<expiry>.<hex mac>" and a terminator into out (cap bytes;
 * SK_AUTH_TOKEN_MAX + 1 always suffices). For tests and the load generator.
 * Returns the token length (> 0), SK_EINVAL (uid 0, expiry < 1, empty
 * secret) or SK_ENOMEM (cap too small; out then holds "" when cap > 0). */
int sk_auth_make_token(const char *secret, size_t secret_len, uint64_t uid, int64_t expiry,
                       char *out, size_t cap);

/* Token out of an Authorization value "Bearer <tok>": scheme matched
 * case-insensitively, then one or more spaces/tabs, then a token without
 * whitespace; trailing spaces/tabs are ignored. *tok points into hdr.
 * Returns 0, or SK_EAUTH (other scheme, no token, inner whitespace). */
int sk_auth_bearer(const char *hdr, size_t len, const char **tok, size_t *toklen);

/* Predicate, NOT an error code: 1 when the two byte strings are equal, else
 * 0. Time depends only on the lengths (the length of the expected token is
 * not a secret worth hiding), never on where the bytes differ. Fails
 * closed: an empty string on either side never matches, so an unset admin
 * token refuses everyone. */
int sk_auth_equal(const char *a, size_t alen, const char *b, size_t blen);

#endif
