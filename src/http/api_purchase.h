/* api_purchase.h - the purchase route of `seckill serve` (api_purchase.c):
 * a purchase waiting for Redis and its answers, for the batch that carries
 * it (purchase_batch.h) and the borrow that takes it over
 * (purchase_borrow.h); the activity's local sold-out verdict. */
#ifndef SK_API_PURCHASE_H
#define SK_API_PURCHASE_H
#include <stddef.h>
#include <stdint.h>

#include "engine/challenge.h"
#include "engine/queue.h"
#include "engine/stock.h"
#include "http/app.h"

/* One purchase waiting for an answer (heap; owned by whoever answers it:
 * its batch, a borrow, or an idempotency probe). */
struct sk_pending {
    struct sk_async_req a;
    struct sk_purchase p;
    struct sk_keyset *counted; /* its activity's record, which counts it in flight (NULL:
                                  no --max-inflight); the record stays while it does */
    char idem[SK_IDEM_MAX];
    char ip[SK_IP_TEXT];
    char pass[SK_QUEUE_PASS_MAX]; /* X-Queue-Pass (docs/waiting-room.md) */
    int64_t pass_exp_ms;
    char ch[SK_CH_TICKET_MAX];    /* a checked X-Challenge's ticket (docs/challenges.md) */
    char ch_id[SK_CH_ID_HEX + 1]; /* and its id */
};

/* An activity whose admissions Redis refused because it was preheated from
 * another store (SK_RC_OTHER_STORE): logged once, named by /readyz. */
#define SK_FOREIGN_MAX 16
struct sk_foreign {
    uint64_t id;
    int64_t first_ms, last_ms; /* wall clock */
    uint64_t refused;          /* purchases refused */
};

/* The purchase route's state in a process (the activities refused as
 * another store's): made once (NULL when out of memory), freed at exit. */
struct sk_purchases *sk_purchases_new(void);
void sk_purchases_free(struct sk_purchases *ps);
/* The foreign activities this process refused, at most SK_FOREIGN_MAX,
 * into out; their count. */
int sk_purchase_foreign(const struct sk_app *app, struct sk_foreign *out);

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

/* 429 with Retry-After in whole seconds, rounded up, so a client that
 * waits that long is admitted by the limiter (a purchase's, or another
 * route's: registration's rate limit). */
void sk_http_reply_429(struct sk_app *app, h2o_req_t *req, enum sk_route route, int rc,
                       int64_t retry_ms);

/* The local sold-out verdict: an activity Redis said is empty (every
 * segment, for a segmented one) is refused here without a round trip, and
 * its stock re-read every 250 ms so released units sell again. Marks an
 * activity sold out in this process. */
void sk_purchase_mark_sold_out(struct sk_app *app, uint64_t activity_id);
/* A segmented activity a borrow saw empty everywhere: sold out once a
 * stock read made SUSPECT_CONFIRM_MS later agrees (the units of a transfer
 * between another process's lend and its re-admission are in no segment's
 * stock; a verdict from that moment stranded them unsold). */
void sk_purchase_suspect_sold_out(struct sk_app *app, uint64_t activity_id);
/* Once a loop turn: re-reads the stock of the activities watched (sold
 * out, suspect, a segmented waiting room) so released stock sells again. */
void sk_purchase_tick(struct sk_app *app);

#endif
