/* api_purchase.c - POST /api/v1/activities/{id}/purchase, in one place:
 * the handler and its checks (each answering its own refusal, like Redis's
 * ...OrReply: quantity, Idempotency-Key, X-Queue-Pass, bounded waiting
 * (admit_limit.h: 503 overloaded), the challenge (challenge_http.h), the
 * admission cap), the local sold-out verdict and its re-reads, the
 * idempotency probe of a keyed purchase on an activity sold out here, and
 * the answers (200, a refusal, 429 with Retry-After, 503 recovering or
 * unconfirmed) with the metrics they count. The purchase waits in its key
 * set's batch (purchase_batch.h); what a home segment cannot serve
 * borrows (purchase_borrow.h). */
#include "http/api_purchase.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/codes.h"
#include "core/log.h"
#include "engine/keys.h"
#include "engine/segment.h"
#include "http/challenge_http.h"
#include "http/client_ip.h"
#include "http/http_body.h"
#include "http/purchase_batch.h"
#include "http/seg_stocks.h"

/* The route's state in a process. */
struct sk_purchases {
    struct sk_foreign foreign[SK_FOREIGN_MAX]; /* id 0: free */
    int n_foreign;                             /* entries in use */
};

struct sk_purchases *sk_purchases_new(void)
{
    return calloc(1, sizeof(struct sk_purchases));
}

void sk_purchases_free(struct sk_purchases *ps)
{
    free(ps);
}

int sk_purchase_foreign(const struct sk_app *app, struct sk_foreign *out)
{
    int n = 0;
    for (int i = 0; i < SK_FOREIGN_MAX; i++)
        if (app->purchases->foreign[i].id) out[n++] = app->purchases->foreign[i];
    return n;
}

/* ---- the answers --------------------------------------------------------- */

void sk_http_reply_429(struct sk_app *app, h2o_req_t *req, enum sk_route route, int rc,
                       int64_t retry_ms)
{
    if (retry_ms < 1) retry_ms = 1;
    char secs[24], body[320];
    int sl = snprintf(secs, sizeof secs, "%" PRId64, (retry_ms + 999) / 1000);
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_RETRY_AFTER, NULL,
                   h2o_strdup(&req->pool, secs, (size_t)sl).base, (size_t)sl);
    int n = snprintf(body, sizeof body,
                     "{\"error\":\"%s\",\"message\":\"%s\",\"retry_after_ms\":%" PRId64 "}",
                     sk_rc_wire(rc), sk_rc_message(rc), retry_ms);
    sk_http_reply(app, req, route, 429, "application/json", body, (size_t)n);
}

/* One purchase of its activity less in flight (max_inflight). */
static void inflight_done(struct sk_pending *p)
{
    if (p->counted && p->counted->inflight > 0) p->counted->inflight--;
    p->counted = NULL;
}

/* A 503 that passes: recovering (the key set is fenced while its stock is
 * rebuilt from the database; a retry in a second usually finds the sale
 * going again), redis_full (memory comes back as the worker persists and
 * trims), redis_unsafe (until the operator fixes a setting). */
static void reply_paused(struct sk_app *app, h2o_req_t *req, int rc)
{
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_RETRY_AFTER, NULL,
                   rc == SK_RC_REDIS_UNSAFE ? "5" : "1", 1);
    sk_http_error(app, req, SK_ROUTE_purchase, sk_rc_http_status(rc), sk_rc_wire(rc),
                  sk_rc_message(rc));
}

/* An activity preheated from another store: logged once per activity and
 * process (what a purchase of it is answered says the same), remembered
 * for /readyz (sk_purchase_foreign). */
static void note_foreign(struct sk_app *app, uint64_t aid)
{
    int64_t now = sk_wall_ms();
    struct sk_purchases *ps = app->purchases;
    struct sk_foreign *f = NULL, *oldest = &ps->foreign[0];
    for (int i = 0; i < SK_FOREIGN_MAX && !f; i++) {
        if (ps->foreign[i].id == aid) f = &ps->foreign[i];
        if (ps->foreign[i].last_ms < oldest->last_ms) oldest = &ps->foreign[i];
    }
    if (!f) {
        f = oldest;
        ps->n_foreign += f->id == 0;
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
    struct sk_purchases *ps = app->purchases;
    for (int i = 0; i < SK_FOREIGN_MAX; i++)
        if (ps->foreign[i].id == aid) {
            ps->foreign[i] = (struct sk_foreign){0};
            ps->n_foreign--;
        }
}

static void reply_admission(struct sk_app *app, h2o_req_t *req, uint64_t aid,
                            const struct sk_admission *ad)
{
    if (ad->rc == SK_RC_RATE_LIMITED) {
        sk_http_reply_429(app, req, SK_ROUTE_purchase, ad->rc, ad->retry_after_ms);
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
    inflight_done(p);
    /* a client that left still has its order: the admission stands */
    h2o_req_t *req = sk_async_end(app, &p->a);
    if (why) {
        sk_metrics_refusal(app->metrics, "unavailable");
        sk_metrics_act_refusal_extra(app->metrics, aid, SK_MEXTRA_UNAVAILABLE);
        if (req) sk_http_error(app, req, SK_ROUTE_purchase, 503, "unavailable", why);
    } else {
        if (ad->rc != SK_RC_OK) sk_metrics_refusal_rc(app->metrics, ad->rc);
        if (ad->rc == SK_RC_OTHER_STORE) note_foreign(app, aid);
        if (ad->rc == SK_RC_OK && app->purchases->n_foreign) forget_foreign(app, aid);
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
    inflight_done(p);
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

/* ---- sold out here ------------------------------------------------------- */

/* How often a sold-out activity is re-checked, so released stock sells. */
#define SOLDOUT_RECHECK_MS 250
#define SUSPECT_CONFIRM_MS 20 /* far longer than a transfer's lend-to-readmit round trip */

void sk_purchase_mark_sold_out(struct sk_app *app, uint64_t aid)
{
    struct sk_keyset *c = sk_app_act(app, aid, SK_ACT_KNOWN);
    if (c && !c->sold_out) {
        c->sold_out = 1;
        c->checked_ms = sk_mono_ms();
        sk_keyset_watch(app, c);
    }
}

void sk_purchase_suspect_sold_out(struct sk_app *app, uint64_t aid)
{
    struct sk_keyset *c = sk_app_act(app, aid, SK_ACT_KNOWN);
    if (!c || c->sold_out || c->suspect) return;
    c->suspect = 1;
    /* the tick re-reads it SUSPECT_CONFIRM_MS from now */
    c->checked_ms = sk_mono_ms() - SOLDOUT_RECHECK_MS + SUSPECT_CONFIRM_MS;
    sk_keyset_watch(app, c);
}

/* A check in flight (its record stays: rechecking holds it). */
struct stock_check {
    struct sk_keyset *c;
    struct sk_seg_stocks st; /* segmented activities: every segment's stock */
    struct sk_seg_read rd;
};

/* Stock back above zero (a release), or the activity is gone: stop
 * answering locally. A watched activity (a segmented waiting room) that a
 * read saw empty everywhere is sold out here from now on (empty: 1 when
 * the read saw every unit gone, 0 otherwise or when it failed). */
static void recheck_done(struct sk_keyset *c, int back, int empty)
{
    c->rechecking = 0;
    c->checked_ms = sk_mono_ms();
    if (back) c->sold_out = 0;
    /* sold out on two empty reads SUSPECT_CONFIRM_MS apart (or a borrow's
     * and a read): one read may fall between another process's lend and
     * its re-admission, when the units it moves are in no stock */
    if (empty && !c->sold_out && (c->watch || c->suspect)) {
        if (c->suspect) {
            c->sold_out = 1;
            c->suspect = 0;
        } else {
            c->suspect = 1;
            c->checked_ms = c->checked_ms - SOLDOUT_RECHECK_MS + SUSPECT_CONFIRM_MS;
        }
    } else {
        c->suspect = 0;
    }
}

static void on_stock_check(void *data, redisReply *rep)
{
    struct stock_check *chk = data;
    recheck_done(chk->c,
                 rep && (rep->type == REDIS_REPLY_NIL ||
                         (rep->type == REDIS_REPLY_STRING && strtoll(rep->str, NULL, 10) > 0)),
                 0);
    free(chk);
}

static void on_segments_checked(void *data)
{
    struct stock_check *chk = data;
    int back = 0;
    /* a segment without stock key counts as back: the activity is gone */
    for (int i = 0; !chk->st.failed && i < chk->st.segments; i++)
        back |= chk->st.v[i] != 0;
    recheck_done(chk->c, back, sk_seg_stocks_empty(&chk->st));
    free(chk);
}

void sk_purchase_tick(struct sk_app *app)
{
    int64_t now = sk_mono_ms();
    for (struct sk_keyset *c = sk_keysets_watched(app), *next; c; c = next) {
        next = c->watch_next;
        if (!(c->sold_out || c->suspect || (c->watch && c->segments > 1))) {
            sk_keyset_unwatch(app, c); /* back on sale here: nothing to re-read */
            continue;
        }
        if (c->rechecking || now - c->checked_ms < SOLDOUT_RECHECK_MS) continue;
        struct stock_check *chk = calloc(1, sizeof *chk);
        if (!chk) return;
        chk->c = c;
        c->rechecking = 1;
        if (c->segments > 1) {
            chk->st.segments = c->segments;
            /* may finish (and free chk) at once */
            sk_seg_read_start(&chk->rd, app->redis, c->aid, &chk->st, on_segments_checked, chk);
            continue;
        }
        struct sk_keys k;
        sk_keys_for(&k, c->aid);
        const char *argv[] = {"GET", k.stock};
        if (sk_aredis_command(app->redis, on_stock_check, chk, 2, argv, NULL) < 0) {
            c->rechecking = 0;
            free(chk);
        }
    }
}

/* ---- the checks ---------------------------------------------------------- */

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
static int soldout_or_reply(struct sk_app *app, h2o_req_t *req, const struct sk_keyset *c,
                            const char *idem)
{
    if (!c || !c->sold_out || idem) return 0;
    sk_metrics_soldout_fastpath(app->metrics);
    sk_metrics_refusal_rc(app->metrics, SK_RC_SOLD_OUT);
    sk_metrics_act_refusal_rc(app->metrics, c->aid, SK_RC_SOLD_OUT);
    sk_http_error(app, req, SK_ROUTE_purchase, 409, "sold_out", sk_rc_message(SK_RC_SOLD_OUT));
    return 1;
}

/* Bounded waiting (admit_limit.h): 503 overloaded with Retry-After, before
 * any Redis work. */
static int admit_or_reply(struct sk_app *app, h2o_req_t *req, uint64_t aid)
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
 * c: the activity's record (NULL: none, no room for one). */
static int inflight_or_reply(struct sk_app *app, h2o_req_t *req, uint64_t aid,
                             const struct sk_keyset *c)
{
    if (app->cfg.max_inflight <= 0 || !c || c->inflight < app->cfg.max_inflight) return 0;
    sk_metrics_refusal_rc(app->metrics, SK_RC_BUSY);
    sk_metrics_act_refusal_rc(app->metrics, aid, SK_RC_BUSY);
    sk_http_reply_429(app, req, SK_ROUTE_purchase, SK_RC_BUSY, 1000);
    return 1;
}

/* ---- the idempotency probe ----------------------------------------------- */

struct idem_probe {
    struct sk_app *app;
    uint64_t aid;
    int seg;
    struct sk_pending *p;
};

static void on_idem_probe(void *data, redisReply *rep)
{
    struct idem_probe *pr = data;
    struct sk_app *app = pr->app;
    if (!rep || (rep->type != REDIS_REPLY_NIL && rep->type != REDIS_REPLY_STRING)) {
        sk_purchase_answer(app, pr->aid, pr->p, NULL, "redis is unreachable; try again");
    } else if (rep->type == REDIS_REPLY_NIL) {
        struct sk_admission ad = {.rc = SK_RC_SOLD_OUT};
        sk_metrics_soldout_fastpath(app->metrics);
        sk_purchase_answer(app, pr->aid, pr->p, &ad, NULL);
    } else {
        /* a replay: sent with this pass's batches */
        struct sk_batch *b = sk_batch_for(app, pr->aid, pr->seg);
        if (b)
            b->items[b->n++] = pr->p;
        else
            sk_purchase_answer(app, pr->aid, pr->p, NULL, "out of memory");
    }
    free(pr);
}

static void idem_probe(struct sk_app *app, uint64_t aid, int seg, struct sk_pending *p)
{
    struct idem_probe *pr = malloc(sizeof *pr);
    if (!pr) {
        sk_purchase_answer(app, aid, p, NULL, "out of memory");
        return;
    }
    *pr = (struct idem_probe){app, aid, seg, p};
    struct sk_keys k;
    sk_keys_seg(&k, aid, seg);
    char field[24 + SK_IDEM_MAX];
    snprintf(field, sizeof field, "%" PRIu64 ":%.*s", p->p.user_id, (int)p->p.idem_len, p->p.idem);
    const char *argv[] = {"HGET", k.idem, field};
    if (sk_aredis_command(app->redis, on_idem_probe, pr, 3, argv, NULL) < 0) {
        sk_purchase_answer(app, aid, p, NULL, "redis is unreachable; try again");
        free(pr);
    }
}

/* ---- the handler --------------------------------------------------------- */

/* A purchase waiting for Redis (heap, owned by whoever answers it),
 * counted in flight and guarded; NULL (answered 503) when out of memory. */
static struct sk_pending *pending_new(struct sk_app *app, h2o_req_t *req, struct sk_keyset *ic,
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
    p->counted = ic; /* held: a record is kept while it counts purchases */
    if (ic) ic->inflight++;
    sk_async_begin(app, &p->a, req, SK_ROUTE_purchase);
    return p;
}

/* The home key set of a buyer: a segment of a segmented activity, else
 * the activity's own. */
static int home_of(const struct sk_keyset *c, uint64_t user_id)
{
    return c && c->segments > 1 ? sk_seg_home(user_id, c->segments) : SK_SEG_NONE;
}

/* Queues the purchase in this pass's batch for its key set; 503 when out
 * of memory. */
static void queue_purchase(struct sk_app *app, h2o_req_t *req, uint64_t aid,
                           const struct sk_keyset *c, struct sk_keyset *ic,
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
    if (sk_http_redis_or_reply(app, req, SK_ROUTE_purchase)) return;
    /* with a cap every purchase is counted in its activity's record */
    int cap = app->cfg.max_inflight > 0;
    struct sk_keyset *c = sk_app_act(app, pc->aid, cap ? SK_ACT_MAKE : SK_ACT_FIND);
    struct sk_keyset *ic = cap ? c : NULL;
    if (inflight_or_reply(app, req, pc->aid, c)) return;
    if (!(pu->idem && c && c->sold_out)) {
        queue_purchase(app, req, pc->aid, c, ic, pu, pc->pass_exp_ms, ch);
        return;
    }
    struct sk_pending *p = pending_new(app, req, ic, pu, pc->pass_exp_ms, ch);
    if (p) idem_probe(app, pc->aid, home_of(c, pu->user_id), p);
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
    if (soldout_or_reply(app, req, sk_app_act(app, m->id, 0), idem)) return 0;
    if (admit_or_reply(app, req, m->id)) return 0;
    pu.idem = idem;
    pu.idem_len = idem ? idem_len : 0;
    struct purchase_ctx pc = {.pu = pu, .aid = m->id, .pass_exp_ms = pass_exp_ms};
    struct sk_ch_pass ch;
    if (sk_challenge_or_reply(app, req, SK_ROUTE_purchase, m->id, pu.user_id, &ch, purchase_go, &pc,
                              sizeof pc) == 0)
        purchase_go(app, req, &pc, &ch);
    return 0;
}
