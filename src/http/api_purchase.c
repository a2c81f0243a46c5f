/* api_purchase.c - POST /api/v1/activities/{id}/purchase: the checks
 * (purchase_check.h), the local sold-out fast path (purchase_soldout.h),
 * bounded waiting (admit_limit.h: past what the process can answer in
 * time, 503 overloaded), the challenge when one came (challenge_http.h: a
 * CAPTCHA token waits for its provider off the loop), the admission cap
 * (max_inflight), then the purchase waits in this loop turn's batch for
 * its key set (purchase_batch.h), or, keyed on an activity sold out here,
 * behind an idempotency probe (purchase_idem.h). What a home segment
 * cannot serve borrows (purchase_borrow.h). */
#include <stdlib.h>
#include <string.h>

#include "engine/segment.h"
#include "http/app.h"
#include "http/challenge_http.h"
#include "http/client_ip.h"
#include "http/purchase_answer.h"
#include "http/purchase_batch.h"
#include "http/purchase_check.h"
#include "http/purchase_idem.h"

/* A purchase waiting for Redis (heap, owned by whoever answers it),
 * counted in flight and guarded; NULL (answered 503) when out of memory. */
static struct sk_pending *pending_new(struct sk_app *app, h2o_req_t *req, struct sk_act_cache *ic,
                                      const struct sk_purchase *pu, int64_t pass_exp_ms,
                                      const struct sk_ch_pass *ch)
{
    struct sk_pending *p = malloc(sizeof *p);
    if (!p) {
        sk_http_error(app, req, SK_ROUTE_purchase, 503, "unavailable", "out of memory");
        return NULL;
    }
    p->p = *pu;
    p->p.idem = pu->idem ? p->idem : NULL;
    if (pu->idem) memcpy(p->idem, pu->idem, pu->idem_len);
    p->p.pass = pu->pass ? p->pass : NULL;
    if (pu->pass) memcpy(p->pass, pu->pass, pu->pass_len);
    p->pass_exp_ms = pass_exp_ms;
    p->p.ch = p->p.ch_id = NULL;
    if (ch->present) {
        memcpy(p->ch, ch->ticket, sizeof p->ch);
        memcpy(p->ch_id, ch->id, sizeof p->ch_id);
        p->p.ch = p->ch;
        p->p.ch_id = p->ch_id;
    }
    /* the client IP only matters (and costs) when the per-IP limit is on */
    p->p.ip =
        app->cfg.rate_per_ip_per_s > 0 && sk_http_client_ip_key(app, req, p->ip) ? p->ip : NULL;
    if (ic) ic->inflight++;
    sk_async_begin(app, &p->a, req, SK_ROUTE_purchase);
    return p;
}

/* The home key set of a buyer: a segment of a segmented activity, else
 * the activity's own. */
static int home_of(const struct sk_act_cache *c, uint64_t user_id)
{
    return c && c->segments > 1 ? sk_seg_home(user_id, c->segments) : SK_SEG_NONE;
}

/* Queues the purchase in this pass's batch for its key set; 503 when out
 * of memory. */
static void queue_purchase(struct sk_app *app, h2o_req_t *req, uint64_t aid,
                           const struct sk_act_cache *c, struct sk_act_cache *ic,
                           const struct sk_purchase *pu, int64_t pass_exp_ms,
                           const struct sk_ch_pass *ch)
{
    struct sk_batch *b = sk_batch_for(app, aid, home_of(c, pu->user_id));
    if (!b) {
        sk_http_error(app, req, SK_ROUTE_purchase, 503, "unavailable", "out of memory");
        return;
    }
    struct sk_pending *p = pending_new(app, req, ic, pu, pass_exp_ms, ch);
    if (p) b->items[b->n++] = p;
}

/* A purchase past its checks and its challenge (idem and pass point into
 * the request's headers). */
struct purchase_ctx {
    struct sk_purchase pu;
    uint64_t aid;
    int64_t pass_exp_ms;
};

/* The purchase goes on: Redis, the admission cap, its batch (or a probe). */
static void purchase_go(struct sk_app *app, h2o_req_t *req, void *ctx, const struct sk_ch_pass *ch)
{
    const struct purchase_ctx *pc = ctx;
    const struct sk_purchase *pu = &pc->pu;
    struct sk_act_cache *c = sk_app_act(app, pc->aid, 0), *ic;
    if (sk_http_redis_or_reply(app, req, SK_ROUTE_purchase)) return;
    if (sk_purchase_inflight_or_reply(app, req, pc->aid, &c, &ic)) return;
    if (!(pu->idem && c && c->sold_out)) {
        queue_purchase(app, req, pc->aid, c, ic, pu, pc->pass_exp_ms, ch);
        return;
    }
    struct sk_pending *p = pending_new(app, req, ic, pu, pc->pass_exp_ms, ch);
    if (p) sk_purchase_idem_probe(app, pc->aid, home_of(c, pu->user_id), p);
}

int sk_api_purchase(struct sk_app *app, h2o_req_t *req, const struct sk_route_match *m)
{
    struct sk_purchase pu = {0};
    const char *idem;
    size_t idem_len;
    int64_t pass_exp_ms = 0;
    if (sk_http_user_or_reply(app, req, SK_ROUTE_purchase, &pu.user_id)) return 0;
    if (sk_purchase_quantity_or_reply(app, req, &pu.quantity)) return 0;
    if (sk_purchase_idem_or_reply(app, req, &idem, &idem_len)) return 0;
    if (sk_purchase_pass_or_reply(app, req, &pu.pass, &pu.pass_len, &pass_exp_ms)) return 0;
    if (sk_purchase_soldout_or_reply(app, req, sk_app_act(app, m->id, 0), idem)) return 0;
    if (sk_purchase_admit_or_reply(app, req, m->id)) return 0;
    pu.idem = idem;
    pu.idem_len = idem ? idem_len : 0;
    struct purchase_ctx pc = {.pu = pu, .aid = m->id, .pass_exp_ms = pass_exp_ms};
    struct sk_ch_pass ch;
    if (sk_challenge_or_reply(app, req, SK_ROUTE_purchase, m->id, pu.user_id, &ch, purchase_go, &pc,
                              sizeof pc) == 0)
        purchase_go(app, req, &pc, &ch);
    return 0;
}
