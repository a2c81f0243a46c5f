/* fuzz_challenge.c - the X-Challenge header (engine/challenge.h) on any
 * bytes: what parses lies within the header, and its check under a key
 * this target never signed with answers a refusal, never OK. */
#include <string.h>

#include "core/codes.h"
#include "core/error.h"
#include "engine/challenge.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_copy(data, size);
    struct sk_ch_parsed p;
    int rc = sk_challenge_parse(buf, size, &p);
    FUZZ_CHECK(rc == 0 || rc == SK_EINVAL);
    if (rc == 0) {
        FUZZ_CHECK(p.text == buf && p.text_len < size);
        FUZZ_CHECK(p.nonce > buf && p.nonce + p.nonce_len == buf + size && p.nonce_len >= 1);
        FUZZ_CHECK(p.bits >= 0 && p.bits <= 30 && p.activity_id >= 1);
        static const char key[] = "fuzz-key-never-signed-anything";
        struct sk_ch_ok ok;
        int c = sk_challenge_check(key, sizeof key - 1, &p, p.activity_id, 1, 0, &ok);
        FUZZ_CHECK(c != SK_RC_OK);
    }
    free(buf);
    return 0;
}
