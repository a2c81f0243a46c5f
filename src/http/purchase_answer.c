/* purchase_answer.c - the answers of a purchase (purchase_answer.h). */
#include "http/purchase_answer.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/codes.h"
#include "core/log.h"

void sk_purchase_reply_429(struct sk_app *app, h2o_req_t *req, int rc, int64_t retry_ms)
{
    if (retry_ms < 1) retry_ms = 1;
    char secs[24], body[320];
    int sl = snprintf(secs, sizeof secs, "%" PRId64, (retry_ms + 999) / 1000);
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_RETRY_AFTER, NULL,
                   h2o_strdup(&req->pool, secs, (size_t)sl).base, (size_t)sl);
    int n = snprintf(body, sizeof body,
                     "{\"error\":\"%s\",\"message\":\"%s\",\"retry_after_ms\":%" PRId64 "}",
                     sk_rc_wire(rc), sk_rc_message(rc), retry_ms);
    sk_http_reply(app, req, SK_ROUTE_purchase, 429, "application/json", body, (size_t)n);
}

/* One purchase of the activity less in flight (max_inflight). */
static void inflight_done(struct sk_app *app, uint64_t aid)
{
    if (app->cfg.max_inflight <= 0) return;
    struct sk_act_cache *c = sk_app_act(app, aid, 0);
    if (c && c->inflight > 0) c->inflight--;
}

/* A 503 that passes: recovering (the key set is fenced while its stock is
 * rebuilt from the database; a retry in a second usually finds the sale
 * going again), redis_full (memory comes back as the worker persists and
 * trims), redis_unsafe (until the operator fixes a setting). */
static void reply_paused(struct sk_app *app, h2o_req_t *req, int rc)
{
    if (rc == SK_RC_REDIS_UNSAFE)
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_RETRY_AFTER, NULL, H2O_STRLIT("5"));
    else
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_RETRY_AFTER, NULL, H2O_STRLIT("1"));
    sk_http_error(app, req, SK_ROUTE_purchase, sk_rc_http_status(rc), sk_rc_wire(rc),
                  sk_rc_message(rc));
}

/* An activity preheated from another store: logged once per activity and
 * process (what a purchase of it is answered says the same), remembered
 * for /readyz (sk_purchase_foreign). */
static void note_foreign(struct sk_app *app, uint64_t aid)
{
    int64_t now = sk_wall_ms();
    struct sk_foreign *f = NULL, *oldest = &app->foreign[0];
    for (int i = 0; i < SK_FOREIGN_MAX && !f; i++) {
        if (app->foreign[i].id == aid) f = &app->foreign[i];
        if (app->foreign[i].last_ms < oldest->last_ms) oldest = &app->foreign[i];
    }
    if (!f) {
        f = oldest;
        app->n_foreign += f->id == 0;
        *f = (struct sk_foreign){.id = aid, .first_ms = now};
        sk_log(SK_LOG_ERROR,
               "activity %" PRIu64 " was preheated from another database than this node's "
               "(store %s): its purchases are refused here (503 %s), since this node's order "
               "worker would never persist them. `seckill reconcile` names the fix: preheat "
               "it from this node's database, or point this node at the one that holds it",
               aid, app->db.store_id, sk_rc_wire(SK_RC_OTHER_STORE));
    }
    f->last_ms = now;
    f->refused++;
}

/* The activity sells here now (preheated again from this store). */
static void forget_foreign(struct sk_app *app, uint64_t aid)
{
    for (int i = 0; i < SK_FOREIGN_MAX; i++)
        if (app->foreign[i].id == aid) {
            app->foreign[i] = (struct sk_foreign){0};
            app->n_foreign--;
        }
}

static void reply_admission(struct sk_app *app, h2o_req_t *req, uint64_t aid,
                            const struct sk_admission *ad)
{
    if (ad->rc == SK_RC_RATE_LIMITED) {
        sk_purchase_reply_429(app, req, ad->rc, ad->retry_after_ms);
        return;
    }
    if (ad->rc == SK_RC_RECOVERING || ad->rc == SK_RC_REDIS_FULL || ad->rc == SK_RC_REDIS_UNSAFE) {
        reply_paused(app, req, ad->rc);
        return;
    }
    if (ad->rc == SK_RC_OK) {
        char body[256];
        int n = snprintf(body, sizeof body,
                         "{\"status\":\"accepted\",\"order_id\":\"%s\",\"activity_id\":%" PRIu64
                         ",\"quantity\":%" PRId64 "}",
                         ad->order_id, aid, ad->quantity);
        sk_http_reply(app, req, SK_ROUTE_purchase, 200, "application/json", body, (size_t)n);
        return;
    }
    sk_http_error(app, req, SK_ROUTE_purchase, sk_rc_http_status(ad->rc), sk_rc_wire(ad->rc),
                  sk_rc_message(ad->rc));
}

void sk_purchase_answer(struct sk_app *app, uint64_t aid, struct sk_pending *p,
                        const struct sk_admission *ad, const char *why)
{
    inflight_done(app, aid);
    /* a client that left still has its order: the admission stands */
    h2o_req_t *req = sk_async_end(app, &p->a);
    if (why) {
        sk_metrics_refusal(app->metrics, "unavailable");
        sk_metrics_act_refusal_extra(app->metrics, aid, SK_MEXTRA_UNAVAILABLE);
        if (req) sk_http_error(app, req, SK_ROUTE_purchase, 503, "unavailable", why);
    } else {
        if (ad->rc != SK_RC_OK) sk_metrics_refusal_rc(app->metrics, ad->rc);
        if (ad->rc == SK_RC_OTHER_STORE) note_foreign(app, aid);
        if (ad->rc == SK_RC_OK && app->n_foreign) forget_foreign(app, aid);
        if (ad->rc == SK_RC_OK && ad->replay) {
            sk_metrics_act_replayed(app->metrics, aid);
        } else if (ad->rc == SK_RC_OK) {
            sk_metrics_act_admitted(app->metrics, aid, ad->quantity);
            /* a pass that bought: the waiting room's record says so too */
            if (p->p.pass) sk_queue_spent(app, aid, p->p.user_id, p->pass_exp_ms);
        } else {
            sk_metrics_act_refusal_rc(app->metrics, aid, ad->rc);
        }
        if (req) reply_admission(app, req, aid, ad);
    }
    free(p);
}

void sk_purchase_unconfirmed(struct sk_app *app, uint64_t aid, struct sk_pending *p)
{
    /* a failover could take it back, so it is no promise yet */
    inflight_done(app, aid);
    h2o_req_t *req = sk_async_end(app, &p->a);
    sk_metrics_refusal_extra(app->metrics, SK_MEXTRA_UNCONFIRMED);
    sk_metrics_act_refusal_extra(app->metrics, aid, SK_MEXTRA_UNCONFIRMED);
    if (req) {
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_RETRY_AFTER, NULL, H2O_STRLIT("1"));
        sk_http_error(app, req, SK_ROUTE_purchase, 503, "unconfirmed",
                      "admitted, but not yet acknowledged by enough replicas to survive a "
                      "failover; retry with the same Idempotency-Key to learn the outcome");
    }
    free(p);
}

int sk_purchase_unsure(struct sk_app *app)
{
    return app->cfg.sync_replicas > 0 && sk_aredis_acked(app->redis) < app->cfg.sync_replicas;
}

void sk_purchase_fail(struct sk_app *app, uint64_t aid, struct sk_pending **items, size_t n,
                      const char *why)
{
    for (size_t i = 0; i < n; i++)
        sk_purchase_answer(app, aid, items[i], NULL, why);
}

void sk_purchase_refuse_all(struct sk_app *app, uint64_t aid, struct sk_pending **items, size_t n,
                            int rc)
{
    struct sk_admission ad;
    memset(&ad, 0, sizeof ad);
    ad.rc = rc;
    for (size_t i = 0; i < n; i++)
        sk_purchase_answer(app, aid, items[i], &ad, NULL);
}
