/* fuzz_captcha.c - a siteverify answer (http/captcha.h) on any bytes: one
 * of the three verdicts, a terminated reason, and a pass only for an
 * answer that says "success": true; and the same bytes as a widget script
 * URL (captcha_script_url): refused, or an origin that is its prefix and a
 * policy naming that origin and nothing a policy would split on. */
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
    buf = fuzz_string(data, size); /* the URL is text: terminated */
    char origin[SK_CAPTCHA_SCRIPT_MAX], csp[SK_CAPTCHA_CSP_MAX];
    const char *script = NULL;
    if (sk_captcha_script_check(buf, origin, sizeof origin, why, sizeof why) == 0) {
        size_t ol = strlen(origin);
        FUZZ_CHECK(ol > 0 && !strncmp(buf, origin, ol) && strlen(buf) < SK_CAPTCHA_SCRIPT_MAX);
        FUZZ_CHECK(!strncmp(origin, "https://", 8) || !strncmp(origin, "http://", 7));
        FUZZ_CHECK(!strpbrk(buf, " ;,\"'<>\\`"));
        int n = sk_captcha_widget(sk_captcha_find("hcaptcha"), buf, &script, csp, sizeof csp);
        FUZZ_CHECK(n > 0 && script == buf && strstr(csp, origin) && !strstr(csp, "*.hcaptcha.com"));
    } else {
        FUZZ_CHECK(memchr(why, 0, sizeof why) != NULL && why[0]);
    }
    free(buf);
    return 0;
}
