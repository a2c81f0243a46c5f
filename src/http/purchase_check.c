/* purchase_check.c - the checks of a purchase request that answer a
 * refusal themselves (purchase_check.h). */
#include "http/purchase_check.h"

#include "core/codes.h"
#include "engine/queue.h"
#include "engine/stock.h"
#include "http/http_body.h"
#include "http/purchase_answer.h"

/* Idempotency-Key: 1..SK_IDEM_MAX visible ASCII bytes. */
int sk_purchase_idem_or_reply(struct sk_app *app, h2o_req_t *req, const char **key, size_t *len)
{
    *key = sk_http_header(req, "idempotency-key", len);
    if (!*key) return 0;
    int ok = *len >= 1 && *len <= SK_IDEM_MAX;
    for (size_t i = 0; ok && i < *len; i++)
        ok = (*key)[i] > 0x20 && (*key)[i] < 0x7f;
    if (ok) return 0;
    sk_metrics_refusal(app->metrics, "bad_request");
    sk_http_error(app, req, SK_ROUTE_purchase, 400, "bad_request",
                  "Idempotency-Key must be 1-64 visible ASCII characters");
    return 1;
}

/* X-Queue-Pass, when given: it must look like a pass (the admission call
 * says whether it is this buyer's valid one); anything else is a 400. */
int sk_purchase_pass_or_reply(struct sk_app *app, h2o_req_t *req, const char **pass, size_t *len,
                              int64_t *exp_ms)
{
    *pass = sk_http_header(req, "x-queue-pass", len);
    if (!*pass || sk_queue_pass_wellformed(*pass, *len, exp_ms)) return 0;
    sk_metrics_refusal(app->metrics, "bad_request");
    sk_http_error(app, req, SK_ROUTE_purchase, 400, "bad_request",
                  "X-Queue-Pass must be a pass as the queue handed it out");
    return 1;
}

/* The body's quantity; a malformed body is answered 400. */
int sk_purchase_quantity_or_reply(struct sk_app *app, h2o_req_t *req, int64_t *qty)
{
    char err[160];
    if (sk_body_purchase(req->entity.base, req->entity.base ? req->entity.len : 0, qty, err,
                         sizeof err) == 0)
        return 0;
    sk_metrics_refusal(app->metrics, "bad_request");
    sk_http_error(app, req, SK_ROUTE_purchase, 400, "bad_request", err);
    return 1;
}

/* The local sold-out fast path: 409 without asking Redis. A retry with an
 * Idempotency-Key must get its first answer, which only Redis knows: it
 * takes the keyed path below (probe_idem). */
int sk_purchase_soldout_or_reply(struct sk_app *app, h2o_req_t *req, const struct sk_act_cache *c,
                                 const char *idem)
{
    if (!c || !c->sold_out || idem) return 0;
    sk_metrics_soldout_fastpath(app->metrics);
    sk_metrics_refusal_rc(app->metrics, SK_RC_SOLD_OUT);
    sk_metrics_act_refusal_rc(app->metrics, c->id, SK_RC_SOLD_OUT);
    sk_http_error(app, req, SK_ROUTE_purchase, 409, "sold_out", sk_rc_message(SK_RC_SOLD_OUT));
    return 1;
}

/* Bounded waiting (admit_limit.h): 503 overloaded with Retry-After, before
 * any Redis work. */
int sk_purchase_admit_or_reply(struct sk_app *app, h2o_req_t *req, uint64_t aid)
{
    if (sk_admit_room(&app->admit)) return 0;
    sk_metrics_refusal_rc(app->metrics, SK_RC_OVERLOADED);
    sk_metrics_act_refusal_rc(app->metrics, aid, SK_RC_OVERLOADED);
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_RETRY_AFTER, NULL, H2O_STRLIT("1"));
    sk_http_error(app, req, SK_ROUTE_purchase, sk_rc_http_status(SK_RC_OVERLOADED),
                  sk_rc_wire(SK_RC_OVERLOADED), sk_rc_message(SK_RC_OVERLOADED));
    return 1;
}

/* Admission cap: a purchase that would queue behind max_inflight others
 * of this activity is refused now (429), not left waiting on a slow Redis.
 * *ic: the entry to count the purchase in (NULL without a cap); creating
 * it may move the cache array, so *c is looked up again. */
int sk_purchase_inflight_or_reply(struct sk_app *app, h2o_req_t *req, uint64_t aid,
                                  struct sk_act_cache **c, struct sk_act_cache **ic)
{
    *ic = NULL;
    if (app->cfg.max_inflight <= 0) return 0;
    *c = *ic = sk_app_act(app, aid, SK_ACT_MAKE);
    if (!*ic || (*ic)->inflight < app->cfg.max_inflight) return 0;
    sk_metrics_refusal_rc(app->metrics, SK_RC_BUSY);
    sk_metrics_act_refusal_rc(app->metrics, aid, SK_RC_BUSY);
    sk_purchase_reply_429(app, req, SK_RC_BUSY, 1000);
    return 1;
}
