/* purchase_answer.h - a purchase waiting for Redis, and its answer: the
 * HTTP reply (200, a refusal, 429 with Retry-After, 503 recovering or
 * unconfirmed), the metrics it counts and the in-flight count it leaves.
 * Shared by the purchase route's parts (api_purchase.c, purchase_*.c). */
#ifndef SK_PURCHASE_ANSWER_H
#define SK_PURCHASE_ANSWER_H
#include <stddef.h>
#include <stdint.h>

#include "engine/queue.h"
#include "engine/stock.h"
#include "http/app.h"

/* One purchase waiting for an answer (heap; owned by whoever answers it:
 * its batch, a borrow, or an idempotency probe). */
struct sk_pending {
    struct sk_async_req a;
    struct sk_purchase p;
    char idem[SK_IDEM_MAX];
    char ip[SK_IP_TEXT];
    char pass[SK_QUEUE_PASS_MAX]; /* X-Queue-Pass (docs/waiting-room.md) */
    int64_t pass_exp_ms;
};

/* 429 with Retry-After in whole seconds, rounded up, so a client that
 * waits that long is admitted by the limiter. */
void sk_purchase_reply_429(struct sk_app *app, h2o_req_t *req, int rc, int64_t retry_ms);

/* Answers a purchase that leaves the engine with ad, or 503 when why is
 * set; frees p. */
void sk_purchase_answer(struct sk_app *app, uint64_t activity_id, struct sk_pending *p,
                        const struct sk_admission *ad, const char *why);
/* Answers n purchases 503 why; frees them. */
void sk_purchase_fail(struct sk_app *app, uint64_t activity_id, struct sk_pending **items, size_t n,
                      const char *why);
/* Answers n purchases with the refusal rc (codes.def: REDIS_UNSAFE,
 * REDIS_FULL, with their Retry-After) as if Redis had; frees them. */
void sk_purchase_refuse_all(struct sk_app *app, uint64_t activity_id, struct sk_pending **items,
                            size_t n, int rc);
/* Admitted, but fewer replicas than --sync-replicas acknowledged it: 503
 * unconfirmed (a retry with the same Idempotency-Key learns the truth);
 * frees p. */
void sk_purchase_unconfirmed(struct sk_app *app, uint64_t activity_id, struct sk_pending *p);
/* 1 when the answer being delivered needs replicas it did not get (valid
 * inside a callback of sk_aredis_eval_wait). */
int sk_purchase_unsure(struct sk_app *app);

#endif
