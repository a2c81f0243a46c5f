/* captcha.h - the CAPTCHA providers an activity may name (docs/challenges.md):
 * where the page loads each one's widget from (and what its
 * Content-Security-Policy must allow then), where the server asks the
 * provider about a token (siteverify), the request it sends and how it
 * reads the answer. Bytes in, values out, no I/O: the request goes out on
 * the outbound thread (outbound.h), the verdict is read here on the loop.
 *
 * The three siteverify APIs as their providers document them: a POST of
 * application/x-www-form-urlencoded fields secret, response (the token),
 * remoteip (optional) and, for hCaptcha, sitekey (a token minted for
 * another site key is refused); the answer is JSON with a boolean
 * "success", "error-codes" (a list), "hostname" (where the widget was
 * solved) and, for Turnstile and reCAPTCHA v3, "action" (what the page
 * said it was for). */
#ifndef SK_CAPTCHA_H
#define SK_CAPTCHA_H
#include <stddef.h>

struct sk_captcha_provider {
    const char *name;       /* as an activity names it (activity.h) */
    const char *verify_url; /* siteverify, as documented */
    const char *script_url; /* the widget's script, loaded by the page */
    const char *csp;        /* what the page's Content-Security-Policy adds for it */
    int sends_sitekey;      /* siteverify takes the site key too (hCaptcha) */
};

/* The provider of that name, or NULL. */
const struct sk_captcha_provider *sk_captcha_find(const char *name);

/* Longest widget script URL (captcha_script_url), with its terminator. */
#define SK_CAPTCHA_SCRIPT_MAX 256
/* Room for what the page's policy adds for a widget (sk_captcha_widget). */
#define SK_CAPTCHA_CSP_MAX 1536

/* A widget script URL of the operator's (captcha_script_url: a mirror, a
 * proxy, a test's stand-in): https://host[:port][/path], or http:// on a
 * loopback host only (127.0.0.0/8, localhost, [::1]: a test's own server),
 * with no character a policy or JSON takes for a delimiter (space, quotes,
 * ; , < > \ `). Its origin (scheme://host[:port]) into origin (cap
 * bytes). 0, or SK_EINVAL with why (wcap bytes) saying what is wrong. */
int sk_captcha_script_check(const char *url, char *origin, size_t cap, char *why, size_t wcap);

/* What the page needs for provider p when the operator set script_url
 * (NULL or "": the provider's documented script): *script, the URL the
 * page loads (the provider's, or script_url itself: not copied), and into
 * csp (cap bytes) what its Content-Security-Policy adds: the provider's
 * documented directives, or for a script of the operator's the same
 * directives naming that script's origin and nothing else. Returns the
 * policy's length, SK_EINVAL (a script_url sk_captcha_script_check
 * refuses) or SK_ENOMEM. */
int sk_captcha_widget(const struct sk_captcha_provider *p, const char *script_url,
                      const char **script, char *csp, size_t cap);

/* Longest token accepted (X-Captcha-Token): printable ASCII. */
#define SK_CAPTCHA_TOKEN_MAX 4096
/* 1 when len bytes of s may be a token: 1..SK_CAPTCHA_TOKEN_MAX of
 * [0-9A-Za-z_.:*+/=-] (what the three providers hand out). */
int sk_captcha_token_ok(const char *s, size_t len);

/* The siteverify body: secret, response=token, remoteip (when not NULL or
 * ""), sitekey (when the provider takes it), each form-encoded. Into out
 * (cap bytes, terminated; 3 * (the fields' lengths) + 64 is enough).
 * Returns the length or SK_ENOMEM. */
int sk_captcha_form(const struct sk_captcha_provider *p, const char *secret, const char *token,
                    size_t token_len, const char *remoteip, const char *site_key, char *out,
                    size_t cap);

/* What the answer must say besides success. */
struct sk_captcha_expect {
    const char *hostname; /* "" or NULL: any */
    const char *action;   /* "" or NULL: any; else an "action" in the answer must be this */
};

/* The verdict on a siteverify answer. */
enum sk_captcha_verdict {
    SK_CAPTCHA_PASS,    /* success, and the hostname and action fit */
    SK_CAPTCHA_REFUSED, /* the provider said no, or the token was for another host or action */
    SK_CAPTCHA_ERROR    /* no usable answer (HTTP status, not JSON, the provider's own
                           failure, our secret refused): captcha_fail decides */
};

/* Reads an answer: http_status (200 expected) and len bytes of body (any
 * bytes: tests/fuzz/fuzz_captcha.c). why (cap bytes) says what decided,
 * for the log. */
enum sk_captcha_verdict sk_captcha_verdict(int http_status, const char *body, size_t len,
                                           const struct sk_captcha_expect *e, char *why,
                                           size_t cap);

#endif
