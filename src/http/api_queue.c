/* api_queue.c - the waiting room's routes (docs/waiting-room.md):
 * POST /api/v1/activities/{id}/queue (join) and GET (poll) for buyers, and
 * the admin pace routes (GET and POST .../queue/pace).
 *
 * Joins and polls of one activity that arrive in one event-loop pass go
 * to Redis as one queue.lua call, sent at the end of the pass like the
 * purchase batches (no timer). A poll costs Redis one ZRANK (O(log n)) and
 * a few O(1) reads; once an activity is sold out this process answers its
 * polls from memory (the purchase path's sold-out verdict, re-checked every
 * 250 ms), so waiting buyers learn it at once and cost Redis nothing. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/codes.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/activity.h"
#include "engine/keys.h"
#include "engine/queue.h"
#include "http/act_defs.h"
#include "http/api_purchase.h"
#include "http/app.h"
#include "http/challenge_http.h"
#include "http/http_body.h"
#include "http/store_call.h"

/* One join or poll waiting for its batch's answer (heap; owned by the
 * batch). */
struct qitem {
    struct sk_async_req a;
    uint64_t user;
    char op;
    struct sk_ch_pass ch; /* a join's challenge (docs/challenges.md) */
};

struct sk_qbatch {
    struct sk_app *app;
    uint64_t aid;
    size_t n;
    struct qitem *items[SK_QUEUE_BATCH_MAX];
};

/* ---- answers ------------------------------------------------------------- */

static int is_join(const struct qitem *it)
{
    return it->op == SK_QUEUE_JOIN;
}

static void reply_json(struct sk_app *app, h2o_req_t *req, enum sk_route route, const char *body,
                       int n)
{
    sk_http_reply(app, req, route, 200, "application/json", body,
                  n > 0 && (size_t)n < 512 ? (size_t)n : 0);
}

/* A waiting buyer: where, how long, when to ask again. Before the start
 * the place is not drawn yet: position and place are null. */
static void reply_waiting(struct sk_app *app, h2o_req_t *req, const struct qitem *it,
                          const struct sk_queue_head *h, const struct sk_queue_answer *a)
{
    char body[512], pos[64];
    int64_t eta = sk_queue_eta_ms(h, a);
    if (h->starts_in_ms > 0)
        snprintf(pos, sizeof pos, "\"position\":null,\"place\":null");
    else
        snprintf(pos, sizeof pos, "\"position\":%" PRId64 ",\"place\":%" PRId64,
                 sk_queue_position(h, a), a->place);
    int n = snprintf(body, sizeof body,
                     "{\"state\":\"waiting\",%s,\"eta_s\":%" PRId64 ",\"poll_after_ms\":%" PRId64
                     ",\"queue_length\":%" PRId64 ",\"starts_in_ms\":%" PRId64 "}",
                     pos, (eta + 999) / 1000, sk_queue_poll_after_ms(h, a, it->user), h->length,
                     h->starts_in_ms);
    reply_json(app, req, it->a.route, body, n);
}

static void reply_answer(struct sk_app *app, h2o_req_t *req, const struct qitem *it,
                         const struct sk_queue_head *h, const struct sk_queue_answer *a)
{
    char body[512], at[SK_TIME_RFC3339_MAX];
    int n;
    switch (a->rc) {
    case SK_RC_Q_WAITING: reply_waiting(app, req, it, h, a); return;
    case SK_RC_Q_ADMITTED:
        sk_time_format_rfc3339(a->pass_exp_ms, at, sizeof at);
        n = snprintf(body, sizeof body,
                     "{\"state\":\"admitted\",\"pass\":\"%s\",\"pass_expires_at\":\"%s\","
                     "\"place\":%" PRId64 "}",
                     a->pass, at, a->place);
        reply_json(app, req, it->a.route, body, n);
        return;
    case SK_RC_Q_USED:
    case SK_RC_Q_EXPIRED:
        n = snprintf(body, sizeof body,
                     "{\"state\":\"%s\",\"place\":%" PRId64 ",\"message\":\"%s\"}",
                     sk_rc_wire(a->rc), a->place, sk_rc_message(a->rc));
        reply_json(app, req, it->a.route, body, n);
        return;
    case SK_RC_SOLD_OUT:
        /* a poll learns it as a state; a join is refused as a purchase is */
        if (!is_join(it)) {
            static const char sold[] = "{\"state\":\"sold_out\"}";
            reply_json(app, req, it->a.route, sold, (int)sizeof sold - 1);
            return;
        }
        /* fall through */
    default:
        sk_metrics_refusal_rc(app->metrics, a->rc);
        /* a key set being rebuilt (docs/recovery.md): a retry in a second
         * usually finds the queue going again */
        if (a->rc == SK_RC_RECOVERING)
            h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_RETRY_AFTER, NULL,
                           H2O_STRLIT("1"));
        sk_http_error(app, req, it->a.route, sk_rc_http_status(a->rc), sk_rc_wire(a->rc),
                      sk_rc_message(a->rc));
    }
}

/* ---- batches ------------------------------------------------------------- */

static void finish(struct sk_app *app, struct qitem *it, const struct sk_queue_head *h,
                   const struct sk_queue_answer *a, const char *why)
{
    h2o_req_t *req = sk_async_end(app, &it->a);
    if (req && why) {
        sk_metrics_refusal(app->metrics, "unavailable");
        sk_http_error(app, req, it->a.route, 503, "unavailable", why);
    } else if (req) {
        reply_answer(app, req, it, h, a);
    }
    free(it);
}

static void fail_qbatch(struct sk_qbatch *b, const char *why)
{
    for (size_t i = 0; i < b->n; i++)
        finish(b->app, b->items[i], NULL, NULL, why);
    free(b);
}

/* Unknown to Redis but defined in the store: created, not preheated, and a
 * buyer sees it as closed, as for purchases; or preheated (its keys
 * vanished: Redis restarted empty, the order worker rebuilds them,
 * docs/recovery.md), and the queue is back in a moment: recovering. Only
 * ids Redis does not know pay for this lookup, and it goes through this
 * process's definitions cache (act_defs.h): off the loop on a miss. */
static int unknown_rc(int rc, const struct sk_activity *a)
{
    if (rc != 0) return SK_RC_UNKNOWN_ACTIVITY;
    return !strcmp(a->state, "open") || !strcmp(a->state, "preheated") ? SK_RC_RECOVERING
                                                                       : SK_RC_CLOSED;
}

/* What the process keeps from a reply: the sold-out verdict (answered
 * from memory from now on), the segment count (a segmented waiting room's
 * stock is watched so its buyers learn a sell-out), the figures. */
static void learn(struct sk_qbatch *b, const struct sk_queue_head *h,
                  const struct sk_queue_answer *a)
{
    struct sk_app *app = b->app;
    if (h->rc == SK_RC_SOLD_OUT) sk_purchase_mark_sold_out(app, b->aid);
    if (h->rc == SK_RC_ENDED) {
        /* nothing sells any more: stop reading its stock */
        struct sk_keyset *c = sk_app_act(app, b->aid, 0);
        if (c) c->watch = 0;
    }
    if (h->rc == SK_RC_OK && h->segments > 1) {
        struct sk_keyset *c = sk_app_act(app, b->aid, SK_ACT_MAKE);
        if (c) {
            c->segments = (int)h->segments;
            c->watch = 1;
            sk_keyset_watch(app, c);
        }
    }
    if (h->rc != SK_RC_OK) return;
    uint64_t issued = 0;
    for (size_t i = 0; i < b->n; i++)
        issued += (a[i].events & SK_QUEUE_EV_ISSUED) != 0;
    /* expiries: the passes handed out whose seats this call gave back to
     * the pace, whoever's call found them (each is found once) */
    sk_metrics_queue_passes(app->metrics, b->aid, issued, 0,
                            h->expired > 0 ? (uint64_t)h->expired : 0);
    sk_metrics_queue_seen(app->metrics, b->aid, h->length, h->issued, h->rate, sk_wall_ms());
}

/* The answers of a batch, once known. Takes b and a. */
static void finish_qbatch(struct sk_qbatch *b, const struct sk_queue_head *h,
                          struct sk_queue_answer *a)
{
    learn(b, h, a);
    for (size_t i = 0; i < b->n; i++)
        finish(b->app, b->items[i], h, &a[i], NULL);
    free(a);
    free(b);
}

/* A batch Redis answered UNKNOWN_ACTIVITY, waiting for the definition
 * (heap; owns b and a). */
struct qunknown {
    struct sk_qbatch *b;
    struct sk_queue_head h;
    struct sk_queue_answer *a;
};

static void on_unknown_definition(struct sk_app *app, void *arg, int rc,
                                  const struct sk_activity *def)
{
    (void)app;
    struct qunknown *w = arg;
    int code = unknown_rc(rc, def);
    for (size_t i = 0; i < w->b->n; i++)
        w->a[i].rc = code;
    finish_qbatch(w->b, &w->h, w->a);
    free(w);
}

static void on_queue_reply(void *data, redisReply *rep)
{
    struct sk_qbatch *b = data;
    struct sk_app *app = b->app;
    struct sk_queue_head h;
    struct sk_queue_answer *a = malloc(b->n * sizeof *a);
    int prc = rep && a ? sk_queue_parse(rep, b->n, &h, a) : SK_EPROTO;
    if (prc < 0) {
        if (rep && rep->type == REDIS_REPLY_ERROR) sk_log(SK_LOG_ERROR, "queue: %.200s", rep->str);
        if (prc == SK_ESCRIPT) sk_log(SK_LOG_ERROR, "queue: malformed call (BAD_ARGUMENT)");
        free(a);
        fail_qbatch(b, rep ? "queue call failed; try again" : "redis is unreachable; try again");
        return;
    }
    sk_metrics_redis_rtt(app->metrics, (double)sk_aredis_rtt_us(app->redis) / 1e6);
    struct qunknown *w = h.rc == SK_RC_UNKNOWN_ACTIVITY ? malloc(sizeof *w) : NULL;
    if (w) {
        w->b = b;
        w->h = h;
        w->a = a;
        sk_act_defs_lookup(app, b->aid, on_unknown_definition, w);
        return;
    }
    finish_qbatch(b, &h, a); /* out of memory for the wait: answered as unknown */
}

static void send_qbatch(struct sk_app *app, struct sk_qbatch *b)
{
    size_t argc = SK_QUEUE_ARGC(b->n), cap = SK_QUEUE_ARG_BYTES(b->n);
    char ops[SK_QUEUE_BATCH_MAX];
    uint64_t users[SK_QUEUE_BATCH_MAX];
    const char *tickets[SK_QUEUE_BATCH_MAX], *ids[SK_QUEUE_BATCH_MAX];
    int any_ch = 0;
    for (size_t i = 0; i < b->n; i++) {
        ops[i] = b->items[i]->op;
        users[i] = b->items[i]->user;
        tickets[i] = b->items[i]->ch.present ? b->items[i]->ch.ticket : NULL;
        ids[i] = b->items[i]->ch.present ? b->items[i]->ch.id : NULL;
        any_ch |= b->items[i]->ch.present;
    }
    size_t kcap = SK_QUEUE_KEY_BYTES(b->n);
    char *buf = malloc(cap + kcap);
    const char **args = malloc(argc * sizeof *args);
    const char **keys = malloc(SK_QUEUE_KEYC(b->n) * sizeof *keys);
    size_t *lens = malloc(argc * sizeof *lens);
    int rc = SK_ENOMEM, nk = 0;
    struct sk_keys k;
    sk_keys_for(&k, b->aid);
    if (buf && args && lens && keys &&
        sk_queue_args_ch(b->aid, ops, users, tickets, b->n, buf, cap, args, lens) == 0 &&
        (nk = sk_queue_keys(&k, any_ch ? ids : NULL, b->n, buf + cap, kcap, keys)) > 0)
        rc = sk_aredis_eval(app->redis, SK_SCRIPT_QUEUE, nk, keys, (int)argc, args, lens,
                            on_queue_reply, b);
    free(buf);
    free(args);
    free(keys);
    free(lens);
    if (rc < 0) fail_qbatch(b, "redis is unreachable; try again");
}

void sk_queue_flush(struct sk_app *app)
{
    for (struct sk_keyset *ks = sk_keysets_take_open(app, SK_OPEN_QUEUE), *next; ks; ks = next) {
        next = ks->open_next[SK_OPEN_QUEUE];
        struct sk_qbatch *b = ks->qbatch;
        ks->qbatch = NULL;
        if (b) send_qbatch(app, b);
    }
}

/* The open batch of this pass for an activity (in its record); a full one
 * is sent first. */
static struct sk_qbatch *qbatch_for(struct sk_app *app, uint64_t aid)
{
    struct sk_keyset *ks = sk_app_act(app, aid, SK_ACT_MAKE);
    if (!ks) return NULL;
    if (ks->qbatch && ks->qbatch->n < SK_QUEUE_BATCH_MAX) return ks->qbatch;
    if (ks->qbatch) {
        struct sk_qbatch *full = ks->qbatch;
        ks->qbatch = NULL;
        send_qbatch(app, full);
    }
    struct sk_qbatch *b = malloc(sizeof *b);
    if (!b) return NULL;
    b->app = app;
    b->aid = aid;
    b->n = 0;
    ks->qbatch = b;
    sk_keyset_opened(app, ks, SK_OPEN_QUEUE);
    return b;
}

/* ---- buyer routes -------------------------------------------------------- */

/* Sold out, known here: a poll says so at once, a join is refused, and
 * neither asks Redis. */
static int sold_out_or_reply(struct sk_app *app, h2o_req_t *req, const struct sk_route_match *m)
{
    const struct sk_keyset *c = sk_app_act(app, m->id, 0);
    if (!c || !c->sold_out) return 0;
    if (m->route == SK_ROUTE_queue_poll) {
        sk_http_reply(app, req, m->route, 200, "application/json",
                      H2O_STRLIT("{\"state\":\"sold_out\"}"));
    } else {
        sk_metrics_refusal_rc(app->metrics, SK_RC_SOLD_OUT);
        sk_http_error(app, req, m->route, 409, "sold_out", sk_rc_message(SK_RC_SOLD_OUT));
    }
    return 1;
}

/* A join or poll past its checks (and a join past its challenge). */
struct queue_ctx {
    uint64_t aid, uid;
    enum sk_route route;
};

static void queue_go(struct sk_app *app, h2o_req_t *req, void *ctx, const struct sk_ch_pass *ch)
{
    const struct queue_ctx *qc = ctx;
    if (sk_http_redis_or_reply(app, req, qc->route)) return;
    struct sk_qbatch *b = qbatch_for(app, qc->aid);
    struct qitem *it = b ? malloc(sizeof *it) : NULL;
    if (!it) {
        sk_http_error(app, req, qc->route, 503, "unavailable", "out of memory");
        return;
    }
    it->user = qc->uid;
    it->op = qc->route == SK_ROUTE_queue_join ? SK_QUEUE_JOIN : SK_QUEUE_POLL;
    it->ch = *ch;
    sk_async_begin(app, &it->a, req, qc->route);
    b->items[b->n++] = it;
}

int sk_api_queue(struct sk_app *app, h2o_req_t *req, const struct sk_route_match *m)
{
    uint64_t uid;
    if (sk_http_user_or_reply(app, req, m->route, &uid)) return 0;
    if (m->route == SK_ROUTE_queue_join && sk_http_options_or_reply(app, req, m->route, 0, NULL))
        return 0;
    if (sold_out_or_reply(app, req, m)) return 0;
    struct queue_ctx qc = {.aid = m->id, .uid = uid, .route = m->route};
    struct sk_ch_pass ch = {0};
    /* a join may enter the queue: the challenge goes with it (docs/challenges.md) */
    if (m->route == SK_ROUTE_queue_join &&
        sk_challenge_or_reply(app, req, m->route, m->id, uid, &ch, queue_go, &qc, sizeof qc) != 0)
        return 0;
    queue_go(app, req, &qc, &ch);
    return 0;
}

/* ---- the spent note ------------------------------------------------------ */

struct spent_note {
    struct sk_app *app;
    uint64_t aid;
};

static void on_spent(void *data, redisReply *rep)
{
    struct spent_note *sn = data;
    if (rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 1 &&
        rep->element[0]->type == REDIS_REPLY_INTEGER && rep->element[0]->integer == 1)
        sk_metrics_queue_passes(sn->app->metrics, sn->aid, 0, 1, 0);
    free(sn);
}

void sk_queue_spent(struct sk_app *app, uint64_t aid, uint64_t uid, int64_t exp_ms)
{
    struct spent_note *sn = malloc(sizeof *sn);
    if (!sn) return;
    sn->app = app;
    sn->aid = aid;
    struct sk_queue_spent_call c;
    sk_queue_spent_call(&c, aid, uid, exp_ms);
    if (sk_aredis_eval(app->redis, SK_SCRIPT_QUEUE_SPENT, SK_K_QUEUE_SPENT_N, c.keys,
                       SK_A_QUEUE_SPENT_N, c.args, NULL, on_spent, sn) < 0)
        free(sn);
}

/* ---- admin: the pace, and what every waiting-room admin request shares -- */

static int qadmin_store_run(sk_store *st, void *ctx)
{
    struct sk_qadmin *q = ctx;
    int rc = q->store(st, q);
    if (rc < 0) snprintf(q->err, sizeof q->err, "%s", sk_store_errstr(st));
    return rc;
}

static void qadmin_store_done(struct sk_app *app, h2o_req_t *req, void *ctx, int rc)
{
    struct sk_qadmin *q = ctx;
    if (rc == 0) {
        sk_act_defs_forget(app, q->id); /* the next read sees the change */
        if (req) q->reply(app, req, q);
    } else if (req) {
        /* Redis acts on it already; the definition did not follow */
        sk_http_error(app, req, q->a.route, 503, "unavailable", q->unstored);
    }
    if (rc < 0) sk_log(SK_LOG_ERROR, "store: %s of %" PRIu64 ": %s", q->what, q->id, q->err);
    free(q);
}

/* A client that left still gets its change stored. */
static void qadmin_store_bg_done(void *arg, int rc)
{
    qadmin_store_done(((struct sk_qadmin *)arg)->app, NULL, arg, rc);
}

void sk_qadmin_answer(struct sk_qadmin *q, int rc)
{
    struct sk_app *app = q->app;
    h2o_req_t *req = sk_async_end(app, &q->a);
    enum sk_route route = q->a.route;
    if (rc == SK_RC_OK && q->store) {
        /* the store follows Redis, off the loop */
        if (req)
            sk_store_call(app, req, route, qadmin_store_run, qadmin_store_done, q);
        else if (sk_store_bg(app, 0, qadmin_store_run, qadmin_store_bg_done, q) < 0)
            free(q);
        return;
    }
    if (!req) {
        /* the client left */
    } else if (rc == SK_RC_OK) {
        q->reply(app, req, q);
    } else if (rc < 0) {
        sk_http_error(app, req, route, 503, "unavailable", "redis is unreachable");
    } else if (rc == SK_RC_UNKNOWN_ACTIVITY) {
        sk_http_error(app, req, route, 409, "not_preheated", "preheat the activity first");
    } else {
        sk_http_error(app, req, route, sk_rc_http_status(rc), sk_rc_wire(rc), sk_rc_message(rc));
    }
    free(q);
}

int sk_qadmin_def_ok(struct sk_qadmin *q, int rc, const struct sk_activity *a)
{
    struct sk_app *app = q->app;
    if (rc == 0 && a->wr_passes_per_s > 0 && q->a.req && sk_aredis_ready(app->redis)) return 1;
    h2o_req_t *req = sk_async_end(app, &q->a);
    enum sk_route route = q->a.route;
    if (!req) {
        /* the client left */
    } else if (sk_http_activity_read_or_reply(app, req, route, rc)) {
        /* answered */
    } else if (a->wr_passes_per_s <= 0) {
        sk_http_error(app, req, route, 404, "no_waiting_room",
                      sk_rc_message(SK_RC_NO_WAITING_ROOM));
    } else {
        sk_http_redis_or_reply(app, req, route);
    }
    free(q);
    return 0;
}

/* A pace request: the new rate (0: read only) and the queue's figures. */
struct pace_op {
    struct sk_qadmin q;
    int64_t new_rate;
    struct sk_queue_stats st;
};

static void reply_stats(struct sk_app *app, h2o_req_t *req, struct sk_qadmin *q)
{
    const struct sk_queue_stats *st = &((struct pace_op *)q)->st;
    char body[512];
    int n = snprintf(body, sizeof body,
                     "{\"id\":%" PRIu64 ",\"passes_per_s\":%" PRId64 ",\"pass_ttl_s\":%" PRId64
                     ",\"queue_length\":%" PRId64 ",\"passes_issued\":%" PRId64
                     ",\"passes_handed_out\":%" PRId64 ",\"passes_spent\":%" PRId64
                     ",\"passes_expired\":%" PRId64 ",\"starts_in_ms\":%" PRId64 "}",
                     q->id, st->rate, st->ttl_s, st->length, st->issued, st->handed_out, st->spent,
                     st->expired, st->starts_in_ms);
    sk_http_reply(app, req, q->a.route, 200, "application/json", body,
                  n > 0 && (size_t)n < sizeof body ? (size_t)n : 0);
}

static int pace_store(sk_store *st, struct sk_qadmin *q)
{
    return sk_store_activity_set_pass_rate(st, q->id, ((struct pace_op *)q)->new_rate);
}

static void on_pace(void *data, redisReply *rep)
{
    struct pace_op *o = data;
    int rc = rep && sk_queue_stats_parse(rep, &o->st) == 0 ? (int)o->st.rc : -1;
    if (rc == SK_RC_OK)
        sk_metrics_queue_seen(o->q.app->metrics, o->q.id, o->st.length, o->st.issued, o->st.rate,
                              sk_wall_ms());
    sk_qadmin_answer(&o->q, rc);
}

/* The definition (act_defs.h: from memory, or read off the loop): only an
 * activity with a waiting room has a pace; then Redis. */
static void on_pace_definition(struct sk_app *app, void *arg, int rc, const struct sk_activity *a)
{
    struct pace_op *o = arg;
    if (!sk_qadmin_def_ok(&o->q, rc, a)) return;
    struct sk_keys k;
    sk_keys_for(&k, o->q.id);
    char r[24] = "";
    if (o->new_rate > 0) snprintf(r, sizeof r, "%" PRId64, o->new_rate);
    const char *keys[] = {SK_K_QUEUE_PACE_EACH(SK_KEY_OF, &k)};
    const char *args[SK_A_QUEUE_PACE_N] = {[SK_A_QUEUE_PACE_RATE] = r};
    if (sk_aredis_eval(app->redis, SK_SCRIPT_QUEUE_PACE, SK_K_QUEUE_PACE_N, keys, SK_A_QUEUE_PACE_N,
                       args, NULL, on_pace, o) < 0)
        on_pace(o, NULL);
}

int sk_api_queue_pace(struct sk_app *app, h2o_req_t *req, const struct sk_route_match *m)
{
    if (sk_http_admin_or_reply(app, req, m->route)) return 0;
    int64_t rate = 0;
    char err[200];
    if (m->route == SK_ROUTE_admin_pace_set &&
        sk_body_queue_pace(req->entity.base, req->entity.base ? req->entity.len : 0, &rate, err,
                           sizeof err) < 0)
        return sk_http_error(app, req, m->route, 400, "bad_request", err);
    struct pace_op *o = calloc(1, sizeof *o);
    if (!o) return sk_http_error(app, req, m->route, 503, "unavailable", "out of memory");
    o->q.app = app;
    o->q.id = m->id;
    o->q.what = "pace";
    o->q.unstored = "the new pace is live but the database did not store it; send it again";
    o->q.store = rate > 0 ? pace_store : NULL;
    o->q.reply = reply_stats;
    o->new_rate = rate;
    sk_async_begin(app, &o->q.a, req, m->route);
    sk_act_defs_lookup(app, m->id, on_pace_definition, o);
    return 0;
}
