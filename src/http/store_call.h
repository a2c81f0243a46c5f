/* store_call.h - how an HTTP process of `seckill serve` uses its database:
 * never on the event loop. Every route that needs the store hands its
 * store work to the process's pool (store/store_pool.h: --db-pool threads,
 * each with its own handle, --db-queue-max calls waiting) and continues on
 * the loop when the work is done. The pool's eventfd is one more fd of
 * h2o's loop; completions run in the loop pass that sees it readable.
 *
 * Bounds (docs/design.md, "The database off the event loop"): a request
 * waits for the database at most --db-timeout-ms, then answers
 * 503 unavailable with Retry-After; a call that cannot even be queued
 * answers 503 busy at once. A call still waiting in the queue at its
 * deadline is taken out and never runs, so no state changes after the
 * buyer got the 503; one already running completes and its answer is
 * dropped (pay, cancel and the admin routes are idempotent: a retry tells
 * the truth).
 *
 * /readyz never waits either: a probe (sk_store_schema_version) runs on
 * the pool every second and readyz reports the last known answer
 * (sk_store_health). */
#ifndef SK_STORE_CALL_H
#define SK_STORE_CALL_H
#include <stddef.h>
#include <stdint.h>

#include "http/app.h"
#include "store/store_pool.h"

/* Starts the pool (opening its handles), watches its fd on the app's
 * loop and sets up the deadline; logs and returns the pool's SK_E* code
 * when the store cannot be opened (SK_EIO when its fd cannot be watched). */
int sk_store_calls_init(struct sk_app *app);
/* The database was found unreachable a moment ago (why: the reason;
 * NULL or "" clears it): the HTTP processes started after this call, in
 * this process or forked from it, set their handles up without trying
 * (each try against a host that answers nothing costs the connect
 * timeout: `seckill serve`'s supervisor tried before the fork). */
void sk_store_calls_db_down_at_start(const char *why);
/* The store's identity serve read before the fork (store.h,
 * sk_store_identity; NULL or "" when it could not): the HTTP processes
 * started after this call pass it with every admission from their first
 * purchase on; without it a process passes none (nothing checked) until
 * its health probe reads it. */
void sk_store_calls_identity(const char *store_id);
/* Stops watching, waits for running calls, completes the rest (their
 * requests, if still there, get 503), frees the pool. */
void sk_store_calls_free(struct sk_app *app);

/* The store work of a request, on a pool thread, with that thread's
 * handle; ctx is the caller's object. Returns 0 or an SK_E* code. */
typedef int (*sk_call_run_fn)(sk_store *st, void *ctx);
/* Back on the loop, always exactly once: rc is what run returned
 * (SK_ETIMEDOUT when it never ran). req is NULL when there is nobody to
 * answer: the client left, or the deadline answered 503 already (then
 * done still finishes what run started, e.g. the Redis release of a
 * cancel that won). done owns ctx from here: it frees it, or keeps it for
 * a next step. */
typedef void (*sk_call_done_fn)(struct sk_app *app, h2o_req_t *req, void *ctx, int rc);

/* Runs run(ctx) for req off the loop, then done. ctx: heap memory the
 * caller allocated with malloc; ownership passes to the call. When the
 * call cannot start (queue full, no memory) the request is answered 503
 * here, ctx freed with free(), and its SK_E* code returned (SK_ENOMEM,
 * SK_EBUSY, ...); else 0. */
int sk_store_call(struct sk_app *app, h2o_req_t *req, enum sk_route route, sk_call_run_fn run,
                  sk_call_done_fn done, void *ctx);

/* sk_store_call for a request that is better refused than kept waiting
 * (an order poll: the buyer polls again): when the pool would not finish
 * it within max_wait_ms (the calls ahead of it, the recent time per call,
 * the threads), a call has waited in the queue for a quarter of
 * max_wait_ms without a thread taking it, another such request has
 * waited longer than that already,
 * or a call missed its deadline and nothing has come back from the
 * database since (the database is stuck: until a call or the health
 * probe answers), it answers 503 busy with Retry-After at once, frees ctx
 * and returns SK_EBUSY; else as sk_store_call, but answered 503 unavailable
 * once it waited longer than max_wait_ms (sk_store_calls_tick). */
int sk_store_call_within(struct sk_app *app, h2o_req_t *req, enum sk_route route,
                         int64_t max_wait_ms, sk_call_run_fn run, sk_call_done_fn done, void *ctx);

/* The answer for a store code that is not the route's own business:
 * SK_EBUSY -> 503 busy, anything else -> 503 unavailable with Retry-After: 1
 * (logged; detail may be NULL). */
void sk_http_db_error(struct sk_app *app, h2o_req_t *req, enum sk_route route, int rc,
                      const char *detail);

/* The answer for a failed read of the route's activity (an ...OrReply):
 * 1 when rc < 0 and req was answered (SK_ENOTFOUND -> 404
 * unknown_activity, else sk_http_db_error), 0 when rc >= 0. */
int sk_http_activity_read_or_reply(struct sk_app *app, h2o_req_t *req, enum sk_route route, int rc);

/* Store work that answers no request (a cache fill, the health probe, a
 * mark after an answer): run(arg) on a pool thread, then done(arg, rc) on
 * the loop; deadline_ms as store_pool.h (0: none). Returns 0, or the
 * pool's refusal (done is not called then). */
int sk_store_bg(struct sk_app *app, int64_t deadline_ms, sk_store_run_fn run, sk_store_done_fn done,
                void *arg);

/* The deadline of a store call starting now (sk_mono_ms time). */
int64_t sk_store_deadline(const struct sk_app *app);

/* Once per loop pass, after the pass's purchases went to Redis: runs the
 * completions of the store calls the pool's eventfd announced in this
 * pass (their answers, and any Redis command they queue, follow); returns
 * how many ran. The eventfd's callback only notes it, so a pass that reads
 * both purchases and completed polls sends the purchases first. */
size_t sk_store_calls_drain(struct sk_app *app);

/* Periodic (every loop pass): answers the polls waiting past
 * --db-poll-wait-ms (503 unavailable; a queued one never runs) and starts
 * the health probe when it is due. */
void sk_store_calls_tick(struct sk_app *app);
/* 1 when the database answered the last probe and no probe has been
 * waiting longer than --db-timeout-ms; else 0 with the reason in why (cap
 * bytes). Never touches the database. */
int sk_store_health(struct sk_app *app, char *why, size_t cap);

#endif
