/* challenge_http.h - the challenges of an HTTP process (docs/challenges.md):
 * the key they are signed with, the route that hands one out
 * (GET /api/v1/activities/{id}/challenge), the check of a solution
 * (X-Challenge, and X-Captcha-Token through the provider's siteverify off
 * the loop: outbound.h, captcha.h) before a queue join or a purchase, and
 * what reads of an activity show of its challenge.
 *
 * The key: challenge_secret from the configuration when set (every node
 * that serves a sale must share it: a challenge is handed out by one
 * process and used at another, maybe on another host); otherwise 32 random
 * bytes drawn once per node before its processes are forked, so they all
 * share it and a restarted process keeps it (a single node needs nothing
 * configured, and a key nobody wrote down cannot leak from a file). A
 * node's restart draws a new one: challenges handed out before are
 * refused (challenge_invalid) and the pages fetch new ones.
 *
 * The bits a challenge asks (engine/challenge.h: sk_challenge_bits) follow
 * the load this process sees, never a Redis or database call: with a
 * waiting room the queue's length as this process's last queue answer
 * showed it (a buyer who joins waits behind them all); without one the
 * challenges this process handed out for the activity in the last second,
 * times the node's processes (each attempt to buy asks one). */
#ifndef SK_CHALLENGE_HTTP_H
#define SK_CHALLENGE_HTTP_H
#include <stddef.h>
#include <stdint.h>

#include "engine/activity.h"
#include "engine/challenge.h"
#include "http/app.h"

/* Draws the node's key when challenge_secret is not configured; once per
 * process tree, before the fork (the supervisor), or at a lone process's
 * start. 0, or SK_EIO when the kernel gives no randomness. */
int sk_challenge_node_key_init(const struct sk_config *cfg);

/* The process's part: the outbound thread when a CAPTCHA provider is
 * configured (watched on the loop). 0 or a negative code (logged). */
int sk_challenge_http_init(struct sk_app *app);
void sk_challenge_http_free(struct sk_app *app);

/* A checked solution, to go with a join or a purchase. */
struct sk_ch_pass {
    int present; /* 0: no X-Challenge came (the script refuses it if the sale asks one) */
    char ticket[SK_CH_TICKET_MAX];
    char id[SK_CH_ID_HEX + 1];
};

/* Where a join or purchase goes on after its CAPTCHA token passed: req is
 * alive, ctx the caller's copy (freed after the call), ch the solution. */
typedef void (*sk_ch_resume)(struct sk_app *app, h2o_req_t *req, void *ctx,
                             const struct sk_ch_pass *ch);

/* The X-Challenge (and X-Captcha-Token) of req, on route, for activity aid
 * and buyer uid. Returns 1 when it answered (400 malformed, 403 refused
 * with the code of codes.def, 503): return; 0 with *ch filled (present 0
 * without the header): go on; 2 when a CAPTCHA token is being checked:
 * resume(app, req, copy of ctx_len bytes of ctx, ch) runs later, on the
 * loop, if the token passed (or the provider failed open) and the client
 * is still there; otherwise the request is answered here (403
 * captcha_failed, 503 captcha_unavailable) and resume never runs. */
int sk_challenge_or_reply(struct sk_app *app, h2o_req_t *req, enum sk_route route, uint64_t aid,
                          uint64_t uid, struct sk_ch_pass *ch, sk_ch_resume resume, const void *ctx,
                          size_t ctx_len);

/* GET /api/v1/activities/{id}/challenge: a challenge for the buyer. */
sk_route_handler sk_api_challenge;

/* An activity's challenge as reads show it, JSON into out (cap bytes):
 * null, or {"pow_bits_min","pow_bits_max","pow_load_step","captcha"
 * (null or {"provider","site_key","script"})}; the site key and script
 * from cfg (public, for the page's widget). Returns the length or
 * SK_ENOMEM. */
#define SK_CH_JSON_MAX 1024
int sk_challenge_json(const struct sk_activity *a, const struct sk_config *cfg, char *out,
                      size_t cap);

#endif
