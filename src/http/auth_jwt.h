/* auth_jwt.h - buyer identity from standard JSON Web Tokens (`--auth jwt`):
 * compact JWS tokens (RFC 7515/7519) signed by the identity provider with
 * RS256 (RSA PKCS#1 v1.5, SHA-256, keys of 2048 bits or more), ES256
 * (ECDSA P-256, SHA-256) or EdDSA (Ed25519), checked against the public
 * keys of a JSON Web Key Set (RFC 7517). Bytes in, no I/O; OpenSSL does
 * the cryptography, jansson the JSON.
 *
 * Refused, always: alg "none", any HMAC algorithm (HS256...: a public key
 * is never used as an HMAC secret, so the HS/RS confusion cannot happen),
 * an alg that does not fit the key type, a "crit" header, a kid that
 * names no key, a token without exp, an expired one (exp <= now -
 * leeway), one not valid yet (nbf > now + leeway), one issued in the
 * future (iat > now + leeway), one living longer than the policy's
 * max_ttl_s (exp - iat, or exp - now without iat: a year-9999 exp), a
 * wrong iss or aud when the policy names one, a user claim that is not a
 * positive integer (below). The time arithmetic saturates: no claim value
 * overflows it.
 *
 * ES256 signatures are accepted with a high S as with a low one: OpenSSL,
 * Go, Java and most identity providers do not normalise S, so requiring
 * low S would refuse about half of their tokens; the other S of a token
 * is the same claims and the same buyer (nothing here keys on a token's
 * bytes: no replay list, no cache), so its malleability gives nothing.
 *
 * The buyer: the policy's user claim (default "sub") as a JSON integer
 * 1..2^63-1, or a string holding a canonical decimal 1..2^64-1 ("42",
 * not "042", "+42" or "user-42"): the id the rest of the service uses.
 * Non-numeric subject strings are refused, not hashed: map them to ids
 * in the identity provider (a custom numeric claim, --jwt-user-claim). */
#ifndef SK_AUTH_JWT_H
#define SK_AUTH_JWT_H
#include <stddef.h>
#include <stdint.h>

/* Longest token looked at (longer: refused before any parsing). */
#define SK_JWT_TOKEN_MAX 8192
/* Largest key set document, and most keys in one. */
#define SK_JWKS_MAX (64 * 1024)
#define SK_JWKS_KEYS_MAX 32

typedef struct sk_jwt_keys sk_jwt_keys;

/* Parses a JWK Set ({"keys":[...]}, len bytes, no terminator needed).
 * Keys: kty RSA (n, e), EC with crv P-256 (x, y), OKP with crv Ed25519
 * (x); "alg", when present, must fit the type (RS256, ES256, EdDSA);
 * keys whose "use" is not "sig" are skipped; private parts are ignored.
 * Returns 0 with *out (the caller's: sk_jwt_keys_free), or SK_EINVAL with
 * the reason in err (no usable key, a malformed key, an RSA key under 2048
 * bits, a point not on the curve, two keys with one kid). */
int sk_jwt_keys_parse(sk_jwt_keys **out, const char *text, size_t len, char *err, size_t cap);
void sk_jwt_keys_free(sk_jwt_keys *k);
/* Usable keys in the set. */
size_t sk_jwt_keys_count(const sk_jwt_keys *k);

struct sk_jwt_policy {
    const char *issuer;     /* NULL or "": any */
    const char *audience;   /* NULL, "" or "*": any */
    const char *user_claim; /* NULL or "": "sub" */
    int64_t leeway_s;       /* allowed clock skew */
    int64_t max_ttl_s;      /* the longest lifetime: exp - iat, or exp - now without iat
                               (0: no bound) */
};

/* Checks a compact token (the Bearer value) at now_unix. Returns 0 with
 * *uid set, or SK_EAUTH (*uid untouched) with *why (a static string for
 * the debug log; never the token) when why is not NULL. A key without a
 * kid matches tokens without one; a token without a kid is tried against
 * every key of its algorithm's type. */
int sk_jwt_verify(const sk_jwt_keys *k, const struct sk_jwt_policy *p, const char *tok, size_t len,
                  int64_t now_unix, uint64_t *uid, const char **why);

/* base64url without padding (RFC 4648 section 5), strictly: only the
 * alphabet, no '=', unused bits zero. Writes at most len * 3 / 4 bytes to
 * out (cap bytes); returns the byte count or SK_EINVAL. */
int sk_b64url_decode(const char *in, size_t len, unsigned char *out, size_t cap);

#endif
