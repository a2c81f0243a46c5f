/* api_purchase.c - POST /api/v1/activities/{id}/purchase: validation,
 * the local sold-out fast path, the admission cap (max_inflight), and
 * batching: purchases that arrive in one event-loop pass go to Redis as one
 * purchase_batch call per activity, sent at the end of that pass (no timer,
 * so batching adds no delay). Rate limits travel inside that call
 * (docs/rate-limit.md): no extra round trip.
 *
 * Segmented activities (docs/segments.md): a purchase goes to its buyer's
 * home segment (the first batch of an activity goes to its base keys,
 * which answer SEGMENTED with the count; the process remembers it). What a
 * home cannot serve borrows: one read of every segment's stock in
 * parallel, a transfer from the fullest, and a re-admission at home with
 * the transfer applied, at most S rounds. Only when every segment was seen
 * empty is the activity sold out here.
 *
 * Rollback guard (docs/recovery.md): every call carries what this host saw
 * last of the key set (its epoch and admission count, http/label_mem.h);
 * a Redis behind that fences the key set in the same call, and a fenced
 * key set answers 503 `recovering` with Retry-After until the order worker
 * has rebuilt it from the database.
 *
 * Synchronous replicas (--sync-replicas N, docs/failover.md): admission
 * calls and stock transfers go with sk_aredis_eval_wait, so the client
 * sends WAIT after them and the answer comes with the replicas that
 * acknowledged; an admission fewer than N acknowledged is answered 503
 * unconfirmed (Retry-After), not 200. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/codes.h"
#include "core/error.h"
#include "core/log.h"
#include "core/vec.h"
#include "engine/activity.h"
#include "engine/keys.h"
#include "engine/queue.h"
#include "engine/segment.h"
#include "engine/stock.h"
#include "http/act_defs.h"
#include "http/app.h"
#include "http/http_body.h"
#include "http/label_mem.h"

/* How often a sold-out activity is re-checked, so released stock sells. */
#define SOLDOUT_RECHECK_MS 250

/* One purchase waiting for its batch's answer (heap; owned by the batch). */
struct pending {
    struct sk_async_req a;
    struct sk_purchase p;
    char idem[SK_IDEM_MAX];
    char ip[SK_IP_TEXT];
    char pass[SK_QUEUE_PASS_MAX]; /* X-Queue-Pass (docs/waiting-room.md) */
    int64_t pass_exp_ms;
};

struct borrow;

struct sk_batch {
    struct sk_app *app;
    uint64_t aid;
    int seg;               /* SK_SEG_NONE: the activity's own (base) keys */
    struct borrow *borrow; /* set on a re-admission after a transfer */
    char xfer_id[SK_XFER_ID_MAX];
    int64_t xfer_qty;
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

/* 503 recovering: the key set is fenced while its stock is rebuilt from the
 * database; a retry in a second usually finds the sale going again. */
static void reply_recovering(struct sk_app *app, h2o_req_t *req)
{
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_RETRY_AFTER, NULL, H2O_STRLIT("1"));
    sk_http_error(app, req, SK_ROUTE_purchase, sk_rc_http_status(SK_RC_RECOVERING),
                  sk_rc_wire(SK_RC_RECOVERING), sk_rc_message(SK_RC_RECOVERING));
}

static void reply_admission(struct sk_app *app, h2o_req_t *req, uint64_t aid,
                            const struct sk_admission *ad)
{
    if (ad->rc == SK_RC_RATE_LIMITED) {
        reply_429(app, req, ad->rc, ad->retry_after_ms);
        return;
    }
    if (ad->rc == SK_RC_RECOVERING) {
        reply_recovering(app, req);
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

/* Answers one purchase that leaves the engine: 503 when why is set. */
static void finish_one(struct sk_app *app, uint64_t aid, struct pending *p,
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
        if (ad->rc == SK_RC_OK) {
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

/* Admitted, but fewer replicas than --sync-replicas acknowledged it in
 * time: a failover could take it back, so it is no promise yet. A retry
 * with the same Idempotency-Key learns the truth (the same order once a
 * WAIT confirms it, or a fresh attempt if the admission was lost). */
static void finish_unconfirmed(struct sk_app *app, uint64_t aid, struct pending *p)
{
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

/* 1 when the answer being delivered needs replicas it did not get
 * (valid inside a callback of sk_aredis_eval_wait). */
static int unconfirmed(struct sk_app *app)
{
    return app->cfg.sync_replicas > 0 && sk_aredis_acked(app->redis) < app->cfg.sync_replicas;
}

static void fail_items(struct sk_app *app, uint64_t aid, struct pending **items, size_t n,
                       const char *why)
{
    for (size_t i = 0; i < n; i++)
        finish_one(app, aid, items[i], NULL, why);
}

static void fail_batch(struct sk_batch *b, const char *why);
static void send_batch(struct sk_app *app, struct sk_batch *b);
static struct sk_batch *batch_for(struct sk_app *app, uint64_t aid, int seg);

/* An empty batch for an activity's key set (heap; NULL when out of
 * memory). */
static struct sk_batch *batch_new(struct sk_app *app, uint64_t aid, int seg)
{
    struct sk_batch *b = malloc(sizeof *b);
    if (!b) return NULL;
    b->app = app;
    b->aid = aid;
    b->seg = seg;
    b->borrow = NULL;
    b->xfer_id[0] = 0;
    b->xfer_qty = 0;
    b->n = 0;
    return b;
}

static void mark_sold_out(struct sk_app *app, uint64_t aid)
{
    struct sk_act_cache *c = sk_app_act(app, aid, SK_ACT_KNOWN);
    if (c && !c->sold_out) {
        c->sold_out = 1;
        c->checked_ms = sk_mono_ms();
    }
}

void sk_purchase_mark_sold_out(struct sk_app *app, uint64_t aid)
{
    mark_sold_out(app, aid);
}

/* ---- segments: reading every segment's stock at once ------------------- */

struct seg_scan;
typedef void (*seg_scan_done)(struct seg_scan *sc);

struct seg_slot {
    struct seg_scan *sc;
    int seg;
};

struct seg_scan {
    struct sk_fanout f; /* first: its done casts back */
    struct sk_app *app;
    uint64_t aid;
    int segments;
    seg_scan_done done;
    int64_t stocks[SK_SEG_MAX]; /* -1: no stock key */
    struct seg_slot slot[SK_SEG_MAX];
};

static void on_scan_get(void *data, redisReply *rep)
{
    struct seg_slot *sl = data;
    struct seg_scan *sc = sl->sc;
    if (!rep || (rep->type != REDIS_REPLY_STRING && rep->type != REDIS_REPLY_NIL))
        sc->f.failed = 1;
    else
        sc->stocks[sl->seg] = rep->type == REDIS_REPLY_NIL ? -1 : strtoll(rep->str, NULL, 10);
    sk_fanout_answered(&sc->f);
}

static void on_scan_done(struct sk_fanout *f)
{
    struct seg_scan *sc = (struct seg_scan *)f;
    sc->done(sc);
}

/* One GET per segment; sc->done runs once, when every GET answered (one
 * that could not be sent marks the scan failed), possibly before this
 * returns. */
static void scan_start(struct seg_scan *sc)
{
    sk_fanout_begin(&sc->f, on_scan_done);
    for (int i = 0; i < sc->segments; i++) {
        struct sk_keys k;
        sk_keys_seg(&k, sc->aid, i);
        const char *argv[] = {"GET", k.stock};
        sc->slot[i] = (struct seg_slot){sc, i};
        sk_fanout_sent(&sc->f,
                       sk_aredis_command(sc->app->redis, on_scan_get, &sc->slot[i], 2, argv, NULL));
    }
    sk_fanout_end(&sc->f);
}

/* ---- segments: borrowing for purchases a home segment could not serve -- */

struct borrow {
    struct seg_scan sc; /* first: the scan's done callback casts back */
    int home, round;
    int lender; /* the segment asked last */
    size_t n;
    struct pending **items;
    struct sk_admission *res; /* the last answer of each (a stock refusal) */
};

static void borrow_free(struct borrow *bo)
{
    free(bo->items);
    free(bo->res);
    free(bo);
}

/* No lender left: the stock refusals stand; every segment empty (home
 * included) makes the activity sold out in this process. */
static void borrow_finish(struct borrow *bo)
{
    struct sk_app *app = bo->sc.app;
    for (size_t i = 0; i < bo->n; i++)
        finish_one(app, bo->sc.aid, bo->items[i], &bo->res[i], NULL);
    int empty = !bo->sc.f.failed;
    for (int i = 0; empty && i < bo->sc.segments; i++)
        empty = bo->sc.stocks[i] == 0;
    if (empty) mark_sold_out(app, bo->sc.aid);
    borrow_free(bo);
}

static void borrow_fail(struct borrow *bo, const char *why)
{
    fail_items(bo->sc.app, bo->sc.aid, bo->items, bo->n, why);
    borrow_free(bo);
}

static void on_transfer(void *data, redisReply *rep)
{
    struct borrow *bo = data;
    struct sk_app *app = bo->sc.app;
    int trc;
    int64_t taken = 0, left;
    char id[SK_XFER_ID_MAX];
    if (!rep || sk_seg_transfer_parse(rep, &trc, &taken, id, &left) < 0) {
        borrow_fail(bo, "redis is unreachable; try again");
        return;
    }
    if (trc == SK_RC_TRANSFERRED && taken > 0 && unconfirmed(app)) {
        /* stock lent on a master whose replicas did not confirm: a
         * failover could give it back to the lender, so it is not used
         * (reconcile rolls a surviving transfer forward) */
        borrow_fail(bo, "replicas did not confirm a stock transfer; try again");
        return;
    }
    if (sk_seg_lend_refusal_final(trc)) {
        /* closed (or gone, or fenced) since: that is the answer, not sold out */
        if (trc == SK_RC_RECOVERING) sk_labelmem_forget(sk_labelmem_host(), bo->sc.aid, bo->lender);
        for (size_t i = 0; i < bo->n; i++)
            bo->res[i].rc = trc;
        bo->sc.f.failed = 1; /* not a sold-out verdict */
        borrow_finish(bo);
        return;
    }
    if (trc != SK_RC_TRANSFERRED || taken <= 0) {
        /* the lender drained (or closed) meanwhile: look again */
        if (++bo->round >= bo->sc.segments)
            borrow_finish(bo);
        else
            scan_start(&bo->sc);
        return;
    }
    struct sk_batch *b = batch_new(app, bo->sc.aid, bo->home);
    if (!b) {
        borrow_fail(bo, "out of memory");
        return;
    }
    b->borrow = bo;
    snprintf(b->xfer_id, sizeof b->xfer_id, "%s", id);
    b->xfer_qty = taken;
    b->n = bo->n;
    memcpy(b->items, bo->items, bo->n * sizeof *bo->items);
    send_batch(app, b);
}

static void on_borrow_scanned(struct seg_scan *sc)
{
    struct borrow *bo = (struct borrow *)sc;
    if (sc->f.failed) {
        borrow_fail(bo, "redis is unreachable; try again");
        return;
    }
    int from = sk_seg_pick_lender(sc->stocks, sc->segments, bo->home);
    if (from < 0) {
        borrow_finish(bo);
        return;
    }
    int64_t want = 0;
    for (size_t i = 0; i < bo->n; i++)
        want += bo->items[i]->p.quantity;
    struct sk_keys k;
    sk_keys_seg(&k, sc->aid, from);
    char a[4][24];
    const char *args[4];
    /* the lender is checked against this host's memory of it, like a home */
    int64_t epoch, adm;
    sk_labelmem_get(sk_labelmem_host(), sc->aid, from, &epoch, &adm);
    int nargs = sk_seg_lend_args(bo->home, want, epoch, adm, a, args);
    bo->lender = from;
    const char *keys[] = {k.meta, k.stock, k.xout};
    if (sk_aredis_eval_wait(sc->app->redis, SK_SCRIPT_TRANSFER, 3, keys, nargs, args, NULL,
                            on_transfer, bo) < 0)
        borrow_fail(bo, "redis is unreachable; try again");
}

/* Takes over n purchases of a home segment that it could not serve. */
static void borrow_start(struct sk_app *app, uint64_t aid, int segments, int home,
                         struct pending **items, const struct sk_admission *res, size_t n)
{
    struct borrow *bo = calloc(1, sizeof *bo);
    if (bo) {
        bo->items = malloc(n * sizeof *bo->items);
        bo->res = malloc(n * sizeof *bo->res);
    }
    if (!bo || !bo->items || !bo->res) {
        if (bo) borrow_free(bo);
        fail_items(app, aid, items, n, "out of memory");
        return;
    }
    bo->sc =
        (struct seg_scan){.app = app, .aid = aid, .segments = segments, .done = on_borrow_scanned};
    bo->home = home;
    bo->n = n;
    memcpy(bo->items, items, n * sizeof *items);
    memcpy(bo->res, res, n * sizeof *res);
    scan_start(&bo->sc);
}

static int refused_by_stock(int rc)
{
    return rc == SK_RC_SOLD_OUT || rc == SK_RC_INSUFFICIENT;
}

/* ---- batches ------------------------------------------------------------- */

static void fail_batch(struct sk_batch *b, const char *why)
{
    fail_items(b->app, b->aid, b->items, b->n, why);
    if (b->borrow) borrow_free(b->borrow);
    free(b);
}

/* A purchase_batch reply into res and *remaining; a missing or malformed
 * one fails the whole batch (freed) and returns 1. */
static int parse_or_fail(struct sk_batch *b, redisReply *rep, struct sk_admission *res,
                         int64_t *remaining)
{
    if (!rep) {
        fail_batch(b, "redis is unreachable; try again");
        return 1;
    }
    if (sk_stock_batch_parse(rep, b->n, res, remaining) < 0) {
        sk_log(SK_LOG_ERROR, "purchase_batch: unexpected reply%s%.200s",
               rep->type == REDIS_REPLY_ERROR ? ": " : "",
               rep->type == REDIS_REPLY_ERROR ? rep->str : "");
        fail_batch(b, "admission failed; try again");
        return 1;
    }
    return 0;
}

/* When the base keys said the activity is segmented (with the count):
 * remembers the count, sends every purchase of the batch to its home
 * segment, frees b and returns 1. */
static int reroute_if_segmented(struct sk_batch *b, const struct sk_admission *res)
{
    if (res[0].rc != SK_RC_SEGMENTED || b->seg != SK_SEG_NONE || res[0].quantity <= 1 ||
        res[0].quantity > SK_SEG_MAX)
        return 0;
    int segments = (int)res[0].quantity;
    struct sk_app *app = b->app;
    struct sk_act_cache *c = sk_app_act(app, b->aid, SK_ACT_KNOWN);
    if (c) c->segments = segments;
    for (size_t i = 0; i < b->n; i++) {
        struct pending *p = b->items[i];
        struct sk_batch *hb = batch_for(app, b->aid, sk_seg_home(p->p.user_id, segments));
        if (!hb)
            fail_items(app, b->aid, &p, 1, "out of memory");
        else
            hb->items[hb->n++] = p;
    }
    free(b);
    return 1;
}

static void finish_batch(struct sk_batch *b, const struct sk_admission *res, int64_t remaining);

/* A batch Redis answered UNKNOWN_ACTIVITY, waiting for the definitions
 * cache (heap; owns nothing but itself). */
struct unknown_wait {
    struct sk_batch *b;
    int64_t remaining;
    struct sk_admission res[]; /* b->n */
};

static void on_unknown_definition(struct sk_app *app, void *arg, int rc,
                                  const struct sk_activity *a)
{
    (void)app;
    (void)a;
    struct unknown_wait *w = arg;
    /* defined in the store: created, not preheated; anything else (not
     * defined, or the store did not answer in time) stays unknown */
    if (rc == 0)
        for (size_t i = 0; i < w->b->n; i++)
            if (w->res[i].rc == SK_RC_UNKNOWN_ACTIVITY) w->res[i].rc = SK_RC_CLOSED;
    finish_batch(w->b, w->res, w->remaining);
    free(w);
}

/* Unknown to Redis but defined in the store: created, not preheated. A
 * buyer sees it as closed, as GET /activities/{id} says. Only ids Redis
 * does not know pay for this lookup, and it goes through this process's
 * definitions cache (act_defs.h): the answer waits for the store, off the
 * loop, only on a miss. Returns 1 when the batch finishes later. */
static int unknown_as_closed(struct sk_batch *b, const struct sk_admission *res, int64_t remaining)
{
    if (res[0].rc != SK_RC_UNKNOWN_ACTIVITY) return 0;
    struct unknown_wait *w = malloc(sizeof *w + b->n * sizeof *res);
    if (!w) return 0; /* answered as unknown */
    w->b = b;
    w->remaining = remaining;
    memcpy(w->res, res, b->n * sizeof *res);
    sk_act_defs_lookup(b->app, b->aid, on_unknown_definition, w);
    return 1;
}

/* Answers the purchases of the batch, except a segment's stock refusals
 * (segments > 1): those are not final, they go to more/more_res, in
 * arrival order, to borrow. Returns how many went there. */
static size_t answer_batch(struct sk_batch *b, const struct sk_admission *res, int segments,
                           struct pending **more, struct sk_admission *more_res)
{
    /* Counted before any answer leaves: a scrape made by a buyer who
     * already has the 200 must see it. */
    size_t nmore = 0, admitted = 0;
    int unsure = unconfirmed(b->app);
    for (size_t i = 0; i < b->n; i++)
        admitted += res[i].rc == SK_RC_OK && !unsure;
    sk_metrics_admission(b->app->metrics, admitted);
    for (size_t i = 0; i < b->n; i++) {
        if (b->seg >= 0 && segments > 1 && refused_by_stock(res[i].rc)) {
            more_res[nmore] = res[i];
            more[nmore++] = b->items[i];
            continue;
        }
        if (res[i].rc == SK_RC_OK && unsure) {
            finish_unconfirmed(b->app, b->aid, b->items[i]);
            continue;
        }
        finish_one(b->app, b->aid, b->items[i], &res[i], NULL);
    }
    return nmore;
}

/* After the answers: a re-admission keeps its borrow going with what is
 * still refused (or ends it); a first refusal at home starts one; a base
 * key set that reported no stock left marks the activity sold out. */
static void borrow_next(struct sk_batch *b, int segments, struct pending **more,
                        const struct sk_admission *more_res, size_t nmore, int64_t remaining)
{
    struct borrow *bo = b->borrow;
    if (bo) {
        bo->n = nmore;
        memcpy(bo->items, more, nmore * sizeof *more);
        memcpy(bo->res, more_res, nmore * sizeof *more_res);
        if (nmore == 0)
            borrow_free(bo);
        else if (++bo->round >= bo->sc.segments)
            borrow_finish(bo);
        else
            scan_start(&bo->sc);
    } else if (nmore > 0) {
        borrow_start(b->app, b->aid, segments, b->seg, more, more_res, nmore);
    } else if (remaining == 0 && b->seg == SK_SEG_NONE) {
        mark_sold_out(b->app, b->aid);
    }
}

/* The rollback guard's memory of the key set: raised by the reply; a
 * fenced key set is forgotten, and the activity's sold-out mark dropped
 * (its stock is about to be rebuilt). */
static void note_key_set(struct sk_batch *b, const redisReply *rep, const struct sk_admission *res)
{
    int fenced = 0;
    for (size_t i = 0; i < b->n && !fenced; i++)
        fenced = res[i].rc == SK_RC_RECOVERING;
    if (fenced) {
        sk_labelmem_forget(sk_labelmem_host(), b->aid, b->seg);
        struct sk_act_cache *c = sk_app_act(b->app, b->aid, 0);
        if (c) c->sold_out = 0;
        return;
    }
    int64_t epoch, adm;
    sk_stock_batch_seen(rep, b->n, &epoch, &adm);
    sk_labelmem_seen(sk_labelmem_host(), b->aid, b->seg, epoch, adm);
}

static void on_batch_reply(void *data, redisReply *rep)
{
    struct sk_batch *b = data;
    struct sk_app *app = b->app;
    struct sk_admission res[SK_BATCH_MAX];
    int64_t remaining = -1;
    if (parse_or_fail(b, rep, res, &remaining)) return;
    sk_metrics_redis_rtt(app->metrics, (double)sk_aredis_rtt_us(app->redis) / 1e6);
    sk_metrics_batch(app->metrics, b->n);
    note_key_set(b, rep, res);
    if (reroute_if_segmented(b, res)) return;
    /* Redis vouched for the activity: its entry is kept when ids a client
     * made up crowd the table */
    struct sk_act_cache *c = sk_app_act(app, b->aid, SK_ACT_FIND);
    if (c && !c->confirmed && res[0].rc != SK_RC_UNKNOWN_ACTIVITY)
        sk_app_act(app, b->aid, SK_ACT_KNOWN);
    if (unknown_as_closed(b, res, remaining)) return;
    finish_batch(b, res, remaining);
}

/* Answers the batch (and starts or continues its borrowing); frees b. */
static void finish_batch(struct sk_batch *b, const struct sk_admission *res, int64_t remaining)
{
    struct sk_app *app = b->app;
    struct sk_act_cache *c = b->seg >= 0 ? sk_app_act(app, b->aid, 0) : NULL;
    int segments = b->borrow ? b->borrow->sc.segments : c ? c->segments : 0;
    struct pending *more[SK_BATCH_MAX];
    struct sk_admission more_res[SK_BATCH_MAX];
    size_t nmore = answer_batch(b, res, segments, more, more_res);
    borrow_next(b, segments, more, more_res, nmore, remaining);
    free(b);
}

static void send_batch(struct sk_app *app, struct sk_batch *b)
{
    struct sk_keys k;
    sk_keys_seg(&k, b->aid, b->seg);
    const char *keys[SK_PURCHASE_NKEYS];
    sk_keys_purchase(&k, keys);
    size_t argc = SK_BATCH_ARGC(b->n), cap = SK_BATCH_ARG_BYTES(b->n);
    struct sk_purchase ps[SK_BATCH_MAX];
    for (size_t i = 0; i < b->n; i++)
        ps[i] = b->items[i]->p;
    char *buf = malloc(cap);
    const char **args = malloc(argc * sizeof *args);
    size_t *lens = malloc(argc * sizeof *lens);
    int rc = SK_ENOMEM;
    const struct sk_config *cf = &app->cfg;
    struct sk_rate_limits rl = {cf->rate_per_user_per_s, cf->rate_burst, cf->rate_per_ip_per_s,
                                cf->rate_ip_burst};
    struct sk_batch_head h = {.label = k.label,
                              .rl = &rl,
                              .xfer_id = b->borrow ? b->xfer_id : NULL,
                              .xfer_qty = b->borrow ? b->xfer_qty : 0};
    sk_labelmem_get(sk_labelmem_host(), b->aid, b->seg, &h.epoch, &h.adm);
    if (buf && args && lens && sk_stock_batch_args_head(&h, ps, b->n, buf, cap, args, lens) == 0)
        rc = sk_aredis_eval_wait(app->redis, SK_SCRIPT_PURCHASE_BATCH, SK_PURCHASE_NKEYS, keys,
                                 (int)argc, args, lens, on_batch_reply, b);
    free(buf);
    free(args);
    free(lens);
    if (rc < 0) fail_batch(b, "redis is unreachable; try again");
}

void sk_purchase_flush(struct sk_app *app)
{
    for (size_t i = 0; i < app->n_open; i++)
        send_batch(app, app->open_batches[i]);
    app->n_open = 0;
}

/* The open batch of this pass for an activity's key set (seg: the home
 * segment, or SK_SEG_NONE); a full one is sent first. */
static struct sk_batch *batch_for(struct sk_app *app, uint64_t aid, int seg)
{
    for (size_t i = 0; i < app->n_open; i++) {
        struct sk_batch *b = app->open_batches[i];
        if (b->aid != aid || b->seg != seg) continue;
        if (b->n < SK_BATCH_MAX) return b;
        send_batch(app, b);
        app->open_batches[i] = app->open_batches[--app->n_open];
        break;
    }
    if (SK_VEC_RESERVE(app->open_batches, app->cap_open, app->n_open + 1, 8)) return NULL;
    struct sk_batch *b = batch_new(app, aid, seg);
    if (b) app->open_batches[app->n_open++] = b;
    return b;
}

/* Idempotency-Key: 1..SK_IDEM_MAX visible ASCII bytes. */
static int idem_or_reply(struct sk_app *app, h2o_req_t *req, const char **key, size_t *len)
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
static int pass_or_reply(struct sk_app *app, h2o_req_t *req, const char **pass, size_t *len,
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
static int quantity_or_reply(struct sk_app *app, h2o_req_t *req, int64_t *qty)
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
static int soldout_or_reply(struct sk_app *app, h2o_req_t *req, const struct sk_act_cache *c,
                            const char *idem)
{
    if (!c || !c->sold_out || idem) return 0;
    sk_metrics_soldout_fastpath(app->metrics);
    sk_metrics_refusal_rc(app->metrics, SK_RC_SOLD_OUT);
    sk_metrics_act_refusal_rc(app->metrics, c->id, SK_RC_SOLD_OUT);
    sk_http_error(app, req, SK_ROUTE_purchase, 409, "sold_out", sk_rc_message(SK_RC_SOLD_OUT));
    return 1;
}

/* Admission cap: a purchase that would queue behind max_inflight others
 * of this activity is refused now (429), not left waiting on a slow Redis.
 * *ic: the entry to count the purchase in (NULL without a cap); creating
 * it may move the cache array, so *c is looked up again. */
static int inflight_or_reply(struct sk_app *app, h2o_req_t *req, uint64_t aid,
                             struct sk_act_cache **c, struct sk_act_cache **ic)
{
    *ic = NULL;
    if (app->cfg.max_inflight <= 0) return 0;
    *c = *ic = sk_app_act(app, aid, SK_ACT_MAKE);
    if (!*ic || (*ic)->inflight < app->cfg.max_inflight) return 0;
    sk_metrics_refusal_rc(app->metrics, SK_RC_BUSY);
    sk_metrics_act_refusal_rc(app->metrics, aid, SK_RC_BUSY);
    reply_429(app, req, SK_RC_BUSY, 1000);
    return 1;
}

/* A purchase waiting for Redis (heap, owned by whoever answers it),
 * counted in flight and guarded; NULL (answered 503) when out of memory. */
static struct pending *pending_new(struct sk_app *app, h2o_req_t *req, struct sk_act_cache *ic,
                                   const struct sk_purchase *pu, int64_t pass_exp_ms)
{
    struct pending *p = malloc(sizeof *p);
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
                           const struct sk_purchase *pu, int64_t pass_exp_ms)
{
    struct sk_batch *b = batch_for(app, aid, home_of(c, pu->user_id));
    if (!b) {
        sk_http_error(app, req, SK_ROUTE_purchase, 503, "unavailable", "out of memory");
        return;
    }
    struct pending *p = pending_new(app, req, ic, pu, pass_exp_ms);
    if (p) b->items[b->n++] = p;
}

/* A purchase with an Idempotency-Key on an activity sold out here. Only a
 * key that Redis accepted before may get another answer than sold_out
 * (its first answer, which the admission call replays), and the buyer's
 * home key set records every accepted key (idem: "user:key"). One HGET
 * tells: no entry, sold out, answered here; an entry, the admission call
 * as usual. A batch holding a key cannot take the admission script's
 * one-GET sold-out exit, so without this every random key would cost a
 * full admission (BENCHMARKS.md, "Keyed purchases after the sell-out"). */
struct idem_probe {
    struct sk_app *app;
    uint64_t aid;
    int seg;
    struct pending *p;
};

static void on_idem_probe(void *data, redisReply *rep)
{
    struct idem_probe *pr = data;
    struct sk_app *app = pr->app;
    if (!rep || (rep->type != REDIS_REPLY_NIL && rep->type != REDIS_REPLY_STRING)) {
        finish_one(app, pr->aid, pr->p, NULL, "redis is unreachable; try again");
    } else if (rep->type == REDIS_REPLY_NIL) {
        struct sk_admission ad = {.rc = SK_RC_SOLD_OUT};
        sk_metrics_soldout_fastpath(app->metrics);
        finish_one(app, pr->aid, pr->p, &ad, NULL);
    } else {
        /* a replay: sent with this pass's batches */
        struct sk_batch *b = batch_for(app, pr->aid, pr->seg);
        if (b)
            b->items[b->n++] = pr->p;
        else
            finish_one(app, pr->aid, pr->p, NULL, "out of memory");
    }
    free(pr);
}

static void probe_idem(struct sk_app *app, h2o_req_t *req, uint64_t aid,
                       const struct sk_act_cache *c, struct sk_act_cache *ic,
                       const struct sk_purchase *pu, int64_t pass_exp_ms)
{
    struct idem_probe *pr = malloc(sizeof *pr);
    struct pending *p = pr ? pending_new(app, req, ic, pu, pass_exp_ms) : NULL;
    if (!p) {
        if (!pr) sk_http_error(app, req, SK_ROUTE_purchase, 503, "unavailable", "out of memory");
        free(pr);
        return;
    }
    *pr = (struct idem_probe){app, aid, home_of(c, pu->user_id), p};
    struct sk_keys k;
    sk_keys_seg(&k, aid, pr->seg);
    char field[24 + SK_IDEM_MAX];
    snprintf(field, sizeof field, "%" PRIu64 ":%.*s", pu->user_id, (int)pu->idem_len, pu->idem);
    const char *argv[] = {"HGET", k.idem, field};
    if (sk_aredis_command(app->redis, on_idem_probe, pr, 3, argv, NULL) < 0) {
        finish_one(app, aid, p, NULL, "redis is unreachable; try again");
        free(pr);
    }
}

int sk_api_purchase(struct sk_app *app, h2o_req_t *req, const struct sk_route_match *m)
{
    struct sk_purchase pu = {0};
    const char *idem;
    size_t idem_len;
    int64_t pass_exp_ms = 0;
    if (sk_http_user_or_reply(app, req, SK_ROUTE_purchase, &pu.user_id)) return 0;
    if (quantity_or_reply(app, req, &pu.quantity)) return 0;
    if (idem_or_reply(app, req, &idem, &idem_len)) return 0;
    if (pass_or_reply(app, req, &pu.pass, &pu.pass_len, &pass_exp_ms)) return 0;
    struct sk_act_cache *c = sk_app_act(app, m->id, 0), *ic;
    if (soldout_or_reply(app, req, c, idem)) return 0;
    if (sk_http_redis_or_reply(app, req, SK_ROUTE_purchase)) return 0;
    if (inflight_or_reply(app, req, m->id, &c, &ic)) return 0;
    pu.idem = idem;
    pu.idem_len = idem ? idem_len : 0;
    if (idem && c && c->sold_out)
        probe_idem(app, req, m->id, c, ic, &pu, pass_exp_ms);
    else
        queue_purchase(app, req, m->id, c, ic, &pu, pass_exp_ms);
    return 0;
}

/* The cache array may move while a check is in flight: carry the id. */
struct stock_check {
    struct seg_scan sc; /* segmented activities: every segment's stock */
    struct sk_app *app;
    uint64_t id;
};

/* Stock back above zero (a release), or the activity is gone: stop
 * answering locally. A watched activity (a segmented waiting room) that a
 * read saw empty everywhere is sold out here from now on (empty: 1 when
 * the read saw every unit gone, 0 otherwise or when it failed). */
static void recheck_done(struct sk_app *app, uint64_t id, int back, int empty)
{
    struct sk_act_cache *c = sk_app_act(app, id, 0);
    if (!c) return;
    c->rechecking = 0;
    c->checked_ms = sk_mono_ms();
    if (back) c->sold_out = 0;
    if (empty && c->watch) c->sold_out = 1;
}

static void on_stock_check(void *data, redisReply *rep)
{
    struct stock_check *chk = data;
    recheck_done(chk->app, chk->id,
                 rep && (rep->type == REDIS_REPLY_NIL ||
                         (rep->type == REDIS_REPLY_STRING && strtoll(rep->str, NULL, 10) > 0)),
                 0);
    free(chk);
}

static void on_segments_checked(struct seg_scan *sc)
{
    struct stock_check *chk = (struct stock_check *)sc;
    int back = 0;
    for (int i = 0; !sc->f.failed && i < sc->segments; i++)
        back |= sc->stocks[i] != 0;
    recheck_done(chk->app, chk->id, back, !sc->f.failed && !back);
    free(chk);
}

void sk_purchase_tick(struct sk_app *app)
{
    int64_t now = sk_mono_ms();
    for (size_t i = 0; i < app->n_acts; i++) {
        struct sk_act_cache *c = &app->acts[i];
        if (!(c->sold_out || (c->watch && c->segments > 1)) || c->rechecking ||
            now - c->checked_ms < SOLDOUT_RECHECK_MS)
            continue;
        struct stock_check *chk = calloc(1, sizeof *chk);
        if (!chk) return;
        chk->app = app;
        chk->id = c->id;
        c->rechecking = 1;
        if (c->segments > 1) {
            chk->sc = (struct seg_scan){
                .app = app, .aid = c->id, .segments = c->segments, .done = on_segments_checked};
            scan_start(&chk->sc); /* may finish (and free chk) at once */
            continue;
        }
        struct sk_keys k;
        sk_keys_for(&k, c->id);
        const char *argv[] = {"GET", k.stock};
        if (sk_aredis_command(app->redis, on_stock_check, chk, 2, argv, NULL) < 0) {
            c->rechecking = 0;
            free(chk);
        }
    }
}
