/* purchase_check.h - the checks of a purchase request, each answering its
 * own refusal (400, 409 sold out, 429) and returning 1 when it did, 0 to
 * go on (like Redis's ...OrReply). */
#ifndef SK_PURCHASE_CHECK_H
#define SK_PURCHASE_CHECK_H
#include <stddef.h>
#include <stdint.h>

#include "http/app.h"

/* Idempotency-Key: 1..SK_IDEM_MAX visible ASCII bytes (absent: *key NULL). */
int sk_purchase_idem_or_reply(struct sk_app *app, h2o_req_t *req, const char **key, size_t *len);
/* X-Queue-Pass, when given, must look like a pass (*exp_ms its expiry). */
int sk_purchase_pass_or_reply(struct sk_app *app, h2o_req_t *req, const char **pass, size_t *len,
                              int64_t *exp_ms);
/* The body's quantity. */
int sk_purchase_quantity_or_reply(struct sk_app *app, h2o_req_t *req, int64_t *qty);
/* The local sold-out fast path: 409 without asking Redis (not for a keyed
 * retry, which must get its first answer). */
int sk_purchase_soldout_or_reply(struct sk_app *app, h2o_req_t *req, const struct sk_act_cache *c,
                                 const char *idem);
/* Bounded waiting (admit_limit.h): while purchases wait past the
 * target and those in flight would keep one waiting longer, 503 overloaded with Retry-After at once
 * (before any Redis work); returns 1 then. */
int sk_purchase_admit_or_reply(struct sk_app *app, h2o_req_t *req, uint64_t activity_id);
/* The admission cap (max_inflight): 429 now rather than a wait behind a
 * slow Redis. *ic: the entry to count the purchase in (NULL without a
 * cap); creating it may move the cache array, so *c is looked up again. */
int sk_purchase_inflight_or_reply(struct sk_app *app, h2o_req_t *req, uint64_t activity_id,
                                  struct sk_act_cache **c, struct sk_act_cache **ic);

#endif
