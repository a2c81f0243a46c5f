/* api_purchase.c - POST /api/v1/activities/{id}/purchase: validation,
 * the local sold-out fast path, the admission cap (max_inflight), and
 * batching: purchases that arrive in one event-loop pass go to Redis as one
 * purchase_batch call per activity, sent at the end of that pass (no timer,
 * so batching adds no delay). Rate limits travel inside that call
 * (docs/rate-limit.md): no extra round trip. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "activity.h"
#include "app.h"
#include "clock.h"
#include "codes.h"
#include "error.h"
#include "http_body.h"
#include "keys.h"
#include "log.h"
#include "stock.h"

/* How often a sold-out activity is re-checked, so released stock sells. */
#define SOLDOUT_RECHECK_MS 250

/* One purchase waiting for its batch's answer (heap; owned by the batch). */
struct pending {
    struct sk_async_req a;
    struct sk_purchase p;
    char idem[SK_IDEM_MAX];
    char ip[SK_IP_TEXT];
};

struct sk_batch {
    struct sk_app *app;
    uint64_t aid;
    size_t n;
    int64_t sent_us;
    struct pending *items[SK_BATCH_MAX];
};

/* 429 with Retry-After in whole seconds, rounded up, so a client that
 * waits that long is admitted by the limiter. */
static void reply_429(struct sk_app *app, h2o_req_t *req, int rc, int64_t retry_ms)
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

static void reply_admission(struct sk_app *app, h2o_req_t *req, uint64_t aid,
                            const struct sk_admission *ad)
{
    if (ad->rc == SK_RC_RATE_LIMITED) {
        reply_429(app, req, ad->rc, ad->retry_after_ms);
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

static void fail_batch(struct sk_batch *b, const char *why)
{
    struct sk_app *app = b->app;
    for (size_t i = 0; i < b->n; i++) {
        inflight_done(app, b->aid);
        h2o_req_t *req = sk_async_end(app, &b->items[i]->a);
        if (req) {
            sk_metrics_refusal(app->metrics, "unavailable");
            sk_http_error(app, req, SK_ROUTE_purchase, 503, "unavailable", why);
        }
        free(b->items[i]);
    }
    free(b);
}

static void on_batch_reply(void *data, redisReply *rep)
{
    struct sk_batch *b = data;
    struct sk_app *app = b->app;
    struct sk_admission res[SK_BATCH_MAX];
    int64_t remaining = -1;
    if (!rep) {
        fail_batch(b, "redis is unreachable; try again");
        return;
    }
    if (sk_stock_batch_parse(rep, b->n, res, &remaining) < 0) {
        sk_log(SK_LOG_ERROR, "purchase_batch: unexpected reply%s%.200s",
               rep->type == REDIS_REPLY_ERROR ? ": " : "",
               rep->type == REDIS_REPLY_ERROR ? rep->str : "");
        fail_batch(b, "admission failed; try again");
        return;
    }
    sk_metrics_redis_rtt(app->metrics, (double)sk_aredis_rtt_us(app->redis) / 1e6);
    sk_metrics_batch(app->metrics, b->n);
    /* Unknown to Redis but defined in the store: created, not preheated.
     * A buyer sees it as closed, as GET /activities/{id} says. Only ids
     * Redis does not know pay for this lookup. */
    if (res[0].rc == SK_RC_UNKNOWN_ACTIVITY) {
        struct sk_activity a;
        if (sk_store_activity_get(app->store, b->aid, &a) == 0)
            for (size_t i = 0; i < b->n; i++)
                if (res[i].rc == SK_RC_UNKNOWN_ACTIVITY) res[i].rc = SK_RC_CLOSED;
    }
    size_t admitted = 0;
    for (size_t i = 0; i < b->n; i++) {
        struct pending *p = b->items[i];
        inflight_done(app, b->aid);
        if (res[i].rc == SK_RC_OK) admitted++;
        else sk_metrics_refusal_rc(app->metrics, res[i].rc);
        /* a client that left still has its order: the admission stands */
        h2o_req_t *req = sk_async_end(app, &p->a);
        if (req) reply_admission(app, req, b->aid, &res[i]);
        free(p);
    }
    sk_metrics_admission(app->metrics, admitted);
    if (remaining == 0) {
        struct sk_act_cache *c = sk_app_act(app, b->aid, 1);
        if (c && !c->sold_out) {
            c->sold_out = 1;
            c->checked_ms = sk_mono_ms();
        }
    }
    free(b);
}

static void send_batch(struct sk_app *app, struct sk_batch *b)
{
    struct sk_keys k;
    sk_keys_for(&k, b->aid);
    const char *keys[SK_PURCHASE_NKEYS];
    sk_keys_purchase(&k, keys);
    size_t argc = SK_BATCH_ARGC(b->n), cap = SK_BATCH_ARG_BYTES(b->n);
    struct sk_purchase ps[SK_BATCH_MAX];
    for (size_t i = 0; i < b->n; i++) ps[i] = b->items[i]->p;
    char *buf = malloc(cap);
    const char **args = malloc(argc * sizeof *args);
    size_t *lens = malloc(argc * sizeof *lens);
    int rc = SK_ENOMEM;
    const struct sk_config *cf = &app->cfg;
    struct sk_rate_limits rl = {cf->rate_per_user_per_s, cf->rate_burst, cf->rate_per_ip_per_s,
                                cf->rate_ip_burst};
    if (buf && args && lens &&
        sk_stock_batch_args_rl(b->aid, &rl, ps, b->n, buf, cap, args, lens) == 0)
        rc = sk_aredis_eval(app->redis, SK_SCRIPT_PURCHASE_BATCH, SK_PURCHASE_NKEYS, keys, (int)argc, args, lens,
                            on_batch_reply, b);
    free(buf);
    free(args);
    free(lens);
    if (rc < 0) fail_batch(b, "redis is unreachable; try again");
}

void sk_purchase_flush(struct sk_app *app)
{
    for (size_t i = 0; i < app->n_open; i++) send_batch(app, app->open_batches[i]);
    app->n_open = 0;
}

/* The open batch of this pass for an activity; a full one is sent first. */
static struct sk_batch *batch_for(struct sk_app *app, uint64_t aid)
{
    for (size_t i = 0; i < app->n_open; i++) {
        struct sk_batch *b = app->open_batches[i];
        if (b->aid != aid) continue;
        if (b->n < SK_BATCH_MAX) return b;
        send_batch(app, b);
        app->open_batches[i] = app->open_batches[--app->n_open];
        break;
    }
    if (app->n_open == app->cap_open) {
        size_t cap = app->cap_open ? app->cap_open * 2 : 8;
        struct sk_batch **nb = realloc(app->open_batches, cap * sizeof *nb);
        if (!nb) return NULL;
        app->open_batches = nb;
        app->cap_open = cap;
    }
    struct sk_batch *b = malloc(sizeof *b);
    if (!b) return NULL;
    b->app = app;
    b->aid = aid;
    b->n = 0;
    app->open_batches[app->n_open++] = b;
    return b;
}

/* Idempotency-Key: 1..SK_IDEM_MAX visible ASCII bytes. */
static int idem_or_reply(struct sk_app *app, h2o_req_t *req, const char **key, size_t *len)
{
    *key = sk_http_header(req, "idempotency-key", len);
    if (!*key) return 0;
    int ok = *len >= 1 && *len <= SK_IDEM_MAX;
    for (size_t i = 0; ok && i < *len; i++) ok = (*key)[i] > 0x20 && (*key)[i] < 0x7f;
    if (ok) return 0;
    sk_metrics_refusal(app->metrics, "bad_request");
    sk_http_error(app, req, SK_ROUTE_purchase, 400, "bad_request",
                  "Idempotency-Key must be 1-64 visible ASCII characters");
    return 1;
}

int sk_api_purchase(struct sk_app *app, h2o_req_t *req, const struct sk_route_match *m)
{
    uint64_t uid;
    int64_t qty;
    const char *idem;
    size_t idem_len;
    char err[160];
    if (sk_http_user_or_reply(app, req, SK_ROUTE_purchase, &uid)) return 0;
    if (sk_body_purchase(req->entity.base, req->entity.base ? req->entity.len : 0, &qty, err,
                         sizeof err) < 0) {
        sk_metrics_refusal(app->metrics, "bad_request");
        sk_http_error(app, req, SK_ROUTE_purchase, 400, "bad_request", err);
        return 0;
    }
    if (idem_or_reply(app, req, &idem, &idem_len)) return 0;
    /* A retry with an Idempotency-Key must get its first answer, which
     * only Redis knows: it skips the local fast path. */
    struct sk_act_cache *c = sk_app_act(app, m->id, 0);
    if (c && c->sold_out && !idem) {
        sk_metrics_soldout_fastpath(app->metrics);
        sk_metrics_refusal_rc(app->metrics, SK_RC_SOLD_OUT);
        sk_http_error(app, req, SK_ROUTE_purchase, 409, "sold_out", sk_rc_message(SK_RC_SOLD_OUT));
        return 0;
    }
    if (sk_http_redis_or_reply(app, req, SK_ROUTE_purchase)) return 0;
    /* Admission cap: a purchase that would queue behind max_inflight others
     * of this activity is refused now, not left waiting on a slow Redis. */
    struct sk_act_cache *ic = NULL;
    if (app->cfg.max_inflight > 0) {
        ic = sk_app_act(app, m->id, 1);
        if (ic && ic->inflight >= app->cfg.max_inflight) {
            sk_metrics_refusal_rc(app->metrics, SK_RC_BUSY);
            reply_429(app, req, SK_RC_BUSY, 1000);
            return 0;
        }
    }
    struct sk_batch *b = batch_for(app, m->id);
    struct pending *p = b ? malloc(sizeof *p) : NULL;
    if (!p) {
        sk_http_error(app, req, SK_ROUTE_purchase, 503, "unavailable", "out of memory");
        return 0;
    }
    p->p.user_id = uid;
    p->p.quantity = qty;
    p->p.idem = idem ? p->idem : NULL;
    p->p.idem_len = idem ? idem_len : 0;
    if (idem) memcpy(p->idem, idem, idem_len);
    /* the client IP only matters (and costs) when the per-IP limit is on */
    p->p.ip = app->cfg.rate_per_ip_per_s > 0 && sk_http_client_ip(app, req, p->ip) ? p->ip : NULL;
    if (ic) ic->inflight++;
    sk_async_begin(app, &p->a, req, SK_ROUTE_purchase);
    b->items[b->n++] = p;
    return 0;
}

/* The cache array may move while a check is in flight: carry the id. */
struct stock_check {
    struct sk_app *app;
    uint64_t id;
};

static void on_stock_check(void *data, redisReply *rep)
{
    struct stock_check *chk = data;
    struct sk_act_cache *c = sk_app_act(chk->app, chk->id, 0);
    free(chk);
    if (!c) return;
    c->rechecking = 0;
    c->checked_ms = sk_mono_ms();
    /* Stock back above zero (a release), or the activity is gone: stop
     * answering locally. */
    if (rep && (rep->type == REDIS_REPLY_NIL ||
                (rep->type == REDIS_REPLY_STRING && strtoll(rep->str, NULL, 10) > 0)))
        c->sold_out = 0;
}

void sk_purchase_tick(struct sk_app *app)
{
    int64_t now = sk_mono_ms();
    for (size_t i = 0; i < app->n_acts; i++) {
        struct sk_act_cache *c = &app->acts[i];
        if (!c->sold_out || c->rechecking || now - c->checked_ms < SOLDOUT_RECHECK_MS) continue;
        struct sk_keys k;
        sk_keys_for(&k, c->id);
        const char *argv[] = {"GET", k.stock};
        struct stock_check *chk = malloc(sizeof *chk);
        if (!chk) return;
        chk->app = app;
        chk->id = c->id;
        if (sk_aredis_command(app->redis, on_stock_check, chk, 2, argv, NULL) == 0)
            c->rechecking = 1;
        else
            free(chk);
    }
}
