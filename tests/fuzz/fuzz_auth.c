/* fuzz_auth.c - identities from request headers (http/auth.h): X-User-Id,
 * Authorization: Bearer, HMAC tokens with and without key ids, on any
 * bytes; and the round trip of tokens built from the input. */
#include <string.h>

#include "core/error.h"
#include "fuzz.h"
#include "http/auth.h"

static const char secret[] = "fuzz-secret-0123456789";
static const char prev[] = "fuzz-previous-secret-01";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_copy(data, size);
    uint64_t u = 77;
    int rc = sk_auth_parse_user_id(buf, size, &u);
    FUZZ_CHECK(rc == 0 ? u >= 1 : (rc == SK_EINVAL && u == 77));

    const char *tok = NULL;
    size_t tl = 0;
    if (sk_auth_bearer(buf, size, &tok, &tl) == 0)
        FUZZ_CHECK(tok >= buf && tl >= 1 && tok + tl <= buf + size);

    /* random bytes never pass as a token (the MAC cannot be guessed) */
    struct sk_auth_key keys[2] = {{"k1", secret, sizeof secret - 1}, {"", prev, sizeof prev - 1}};
    u = 77;
    FUZZ_CHECK(sk_auth_verify_token(secret, sizeof secret - 1, buf, size, 0, &u) == SK_EAUTH);
    FUZZ_CHECK(sk_auth_verify_token_keys(keys, 2, buf, size, 0, 86400, &u) == SK_EAUTH);
    FUZZ_CHECK(u == 77);
    FUZZ_CHECK(sk_auth_equal(buf, size, secret, sizeof secret - 1) ==
               (size == sizeof secret - 1 && memcmp(buf, secret, size) == 0));

    /* tokens made from the input verify, for the key they name only */
    if (size >= 17) {
        uint64_t uid = 0;
        int64_t ttl = 0;
        memcpy(&uid, data, 8);
        memcpy(&ttl, data + 8, 8);
        if (uid == 0) uid = 1;
        ttl = ttl < 0 ? -(ttl % 100000) : ttl % 100000;
        int64_t now = 1800000000, exp = now + ttl;
        size_t kl = data[16] % 40;
        char kid[48];
        for (size_t i = 0; i < kl && 17 + i < size; i++)
            kid[i] = (char)data[17 + i];
        kid[kl < size - 17 ? kl : size - 17] = 0;
        char out[SK_AUTH_KID_TOKEN_MAX + 1];
        int n = sk_auth_make_token_kid(kid, secret, sizeof secret - 1, uid, exp, out, sizeof out);
        if (n > 0) {
            FUZZ_CHECK((size_t)n == strlen(out) && n <= SK_AUTH_KID_TOKEN_MAX);
            struct sk_auth_key mine[1] = {{kid, secret, sizeof secret - 1}};
            uint64_t got = 0;
            int want = exp > now && ttl <= 86400 ? 0 : SK_EAUTH;
            FUZZ_CHECK(sk_auth_verify_token_keys(mine, 1, out, (size_t)n, now, 86400, &got) ==
                       want);
            if (want == 0) FUZZ_CHECK(got == uid);
            /* another key with the same id never accepts it */
            struct sk_auth_key other[1] = {{kid, prev, sizeof prev - 1}};
            FUZZ_CHECK(sk_auth_verify_token_keys(other, 1, out, (size_t)n, now, 0, &got) ==
                       SK_EAUTH);
        } else {
            FUZZ_CHECK(n == SK_EINVAL);
        }
    }
    free(buf);
    return 0;
}
