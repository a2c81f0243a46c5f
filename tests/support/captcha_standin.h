/* captcha_standin.h - a stand-in CAPTCHA provider of the tests' own: the
 * real providers (Cloudflare Turnstile, hCaptcha, reCAPTCHA) cannot be
 * reached from the test machine, so a thread listens on 127.0.0.1 and
 * speaks their documented APIs:
 *
 *   POST /siteverify   the siteverify API (Turnstile's shape: JSON
 *                      "success", "error-codes", "hostname", "action"),
 *                      passing, refusing or never answering the token as
 *                      the test sets it;
 *   GET  /api.js       a stand-in widget script: a global `turnstile` with
 *                      render(el, {sitekey, action, callback, ...}) ->
 *                      widget id, reset(id), remove(id), getResponse(id),
 *                      as Turnstile's api.js with ?render=explicit has. It
 *                      draws a box into el and, a moment later, calls
 *                      callback with a token "standin.<action>.<n>"; the
 *                      siteverify above reports that action back, as the
 *                      real one reports the widget's.
 *
 * seckill talks to it with the code it uses for the real provider
 * (captcha_verify_url, captcha_script_url point there). One request per
 * connection, one at a time: a test that needs the widget and siteverify
 * at once (a browser and seckill serve) runs two. */
#ifndef SK_TEST_CAPTCHA_STANDIN_H
#define SK_TEST_CAPTCHA_STANDIN_H

#include <pthread.h>
#include <stdatomic.h>

enum sk_th_sv_mode { SK_TH_SV_PASS, SK_TH_SV_REFUSE, SK_TH_SV_HANG };

struct sk_th_captcha {
    int fd, port;
    pthread_t th;
    atomic_int stop, mode; /* mode: enum sk_th_sv_mode, for siteverify */
    atomic_int requests;   /* siteverify requests answered (or held) */
    atomic_int scripts;    /* widget scripts served */
    pthread_mutex_t mu;
    char last[2048]; /* the last siteverify form received (under mu) */
    int hung[64];
    int nhung;
};

/* Starts one on a free port of 127.0.0.1 (fails the test on error). */
void sk_th_captcha_start(struct sk_th_captcha *s);
/* Stops its thread and closes every socket it held. */
void sk_th_captcha_stop(struct sk_th_captcha *s);

#endif
