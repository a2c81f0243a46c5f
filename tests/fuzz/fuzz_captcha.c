/* fuzz_captcha.c - a siteverify answer (http/captcha.h) on any bytes: one
 * of the three verdicts, a terminated reason, and a pass only for an
 * answer that says "success": true. */
#include <string.h>

#include "fuzz.h"
#include "http/captcha.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_copy(data, size);
    struct sk_captcha_expect e = {.hostname = size & 1 ? "shop.example" : NULL,
                                  .action = size & 2 ? "join" : NULL};
    char why[64];
    memset(why, 'x', sizeof why);
    enum sk_captcha_verdict v = sk_captcha_verdict(200, buf, size, &e, why, sizeof why);
    FUZZ_CHECK(v == SK_CAPTCHA_PASS || v == SK_CAPTCHA_REFUSED || v == SK_CAPTCHA_ERROR);
    FUZZ_CHECK(memchr(why, 0, sizeof why) != NULL);
    if (v == SK_CAPTCHA_PASS) FUZZ_CHECK(memmem(buf, size, "true", 4) != NULL);
    FUZZ_CHECK(sk_captcha_verdict(500, buf, size, &e, why, sizeof why) == SK_CAPTCHA_ERROR);
    free(buf);
    return 0;
}
