/* fuzz_jwt.c - JSON Web Tokens and key sets (http/auth_jwt.h) on any
 * bytes: a token check against a fixed key set (EC P-256 and Ed25519; the
 * seeds are tokens those keys signed, so mutations reach the claims) and
 * the input parsed as a key set. Properties: no crash, no leak, a refusal
 * leaves the user id alone, an acceptance names a user >= 1, and a key
 * set that parses has at least one key. */
#include <string.h>

#include "core/error.h"
#include "fuzz.h"
#include "http/auth_jwt.h"

static const char jwks[] =
    "{\"keys\":[{\"kty\":\"EC\",\"kid\":\"ec-1\",\"crv\":\"P-256\",\"alg\":\"ES256\",\"x\":"
    "\"EmqbVk4svn4XACXsZzTO-NtKVrSMKi0u5MQ_a7Qt4tQ\",\"y\":\"M77MGG9xEIH0dY6WjZc4y-"
    "h2wGaWXEESbfwiPu2z1WU\"},{\"kty\":\"OKP\",\"kid\":\"ed-1\",\"crv\":\"Ed25519\",\"alg\":"
    "\"EdDSA\",\"x\":\"j79coicX_X7xg69ntp2qteFvxW19NOI1pvzwwX6B2Vs\"}]}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static sk_jwt_keys *keys;
    char err[256];
    if (!keys && sk_jwt_keys_parse(&keys, jwks, sizeof jwks - 1, err, sizeof err) < 0) abort();
    char *buf = fuzz_copy(data, size);
    struct sk_jwt_policy p = {NULL, NULL, "sub", 30, 0};
    uint64_t uid = 77;
    const char *why = NULL;
    int rc = sk_jwt_verify(keys, &p, buf, size, 1700000000, &uid, &why);
    FUZZ_CHECK(why != NULL);
    FUZZ_CHECK(rc == 0 ? uid >= 1 : (rc == SK_EAUTH && uid == 77));
    /* the audience, when asked for, must be there; a lifetime bound only
     * refuses more */
    struct sk_jwt_policy pa = {"https://id.test", "seckill", "sub", 0, 86400};
    uint64_t u2 = 77;
    if (sk_jwt_verify(keys, &pa, buf, size, 1700000000, &u2, &why) == 0) FUZZ_CHECK(rc == 0);
    /* clocks and claims at the ends of int64_t: no overflow (UBSan) */
    struct sk_jwt_policy pe = {NULL, "*", "sub", 300, 1};
    sk_jwt_verify(keys, &pe, buf, size, INT64_MAX - 100, &u2, &why);
    sk_jwt_verify(keys, &pe, buf, size, INT64_MIN + 100, &u2, &why);
    sk_jwt_keys *k = NULL;
    if (sk_jwt_keys_parse(&k, buf, size, err, sizeof err) == 0)
        FUZZ_CHECK(sk_jwt_keys_count(k) >= 1);
    else
        FUZZ_CHECK(k == NULL && err[0]);
    sk_jwt_keys_free(k);
    unsigned char out[64];
    int n = sk_b64url_decode(buf, size < 80 ? size : 80, out, sizeof out);
    FUZZ_CHECK(n == SK_EINVAL || (n >= 0 && (size_t)n <= sizeof out));
    free(buf);
    return 0;
}
