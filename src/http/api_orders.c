/* api_orders.c - the buyer's order routes: GET /api/v1/orders/{id},
 * POST .../pay, POST .../cancel. An order lives in the database once the
 * order worker persisted it; before that it is "queued" and known only to
 * Redis (the ledger). A buyer sees only their own orders: anyone else's
 * answer is the same 404 as for an order that does not exist.
 *
 * A poll (GET) of an order the worker has not persisted yet is answered
 * from Redis alone (order_marks.h: its ledger entry and the worker's
 * progress, in one script); one that needs the database waits for it at most
 * --db-poll-wait-ms, and is refused at once (503, Retry-After) when
 * the database could not answer that soon: polls never queue behind each
 * other for seconds, and never crowd out pays and cancels. While
 * purchases press (admit_limit.h: some were refused, or the loop is
 * saturated while they come), beyond --poll-rate-max polls per second the
 * process refuses a poll at once (503 busy, Retry-After), before any Redis
 * or database work: buyers polling cannot take the CPU the purchases
 * need; otherwise every poll is answered. */
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
#include "engine/order_id.h"
#include "engine/stock.h"
#include "http/act_defs.h"
#include "http/app.h"
#include "http/order_marks.h"
#include "http/store_call.h"
#include "orders/order_cancel.h"
#include "orders/order_worker.h"

/* One order request, from the route to its answer: the store step on the
 * pool (store_call.h), then, when the database does not have the order,
 * the ledger in Redis, or after a cancel this request won, the release in
 * Redis and the mark in the store (after the answer). */
struct order_op {
    struct sk_async_req a; /* the Redis steps */
    struct sk_app *app;
    enum sk_route route;
    uint64_t uid;
    struct sk_order id;         /* from the path: order_id, activity_id, created_ms */
    struct sk_order o;          /* the database's row */
    struct sk_cancel_result cr; /* cancel: the order and what the DB step did */
    int foreign;                /* the row is another buyer's */
    int deleted;                /* pay: its activity was deleted (nothing paid) */
    int ledger_released;        /* the ledger marks it released: cancelled */
    int waiting;                /* a is begun: a Redis step holds the request */
    struct sk_oid oid;          /* the id's parts: its stream entry, its branch */
    int release_rc;             /* cancel: the release script's answer */
    int64_t given, now_ms;
    char pay_ref[SK_STORE_PAY_REF_MAX]; /* pay: the Payment-Reference header, "" none */
    char err[256];                      /* the store's failure, for the log line on the loop */
};

/* An order id (engine/order_id.h: "<label>-<ms>-<seq>[-<branch>[-<i>]]", digits,
 * one optional dot in the label, a hex branch), so it is safe as a key and
 * in JSON. Anything else is the caller's mistake (400). */
static int parse_order_id(const struct sk_route_match *m, struct sk_order *o, struct sk_oid *oid)
{
    memset(o, 0, sizeof *o);
    if (m->param_len == 0 || m->param_len >= sizeof o->order_id) return SK_EINVAL;
    struct sk_oid id;
    if (sk_oid_parse(m->param, m->param_len, &id) < 0 || id.seg >= SK_ACTIVITY_SEGMENTS_MAX)
        return SK_EINVAL;
    memcpy(o->order_id, m->param, m->param_len);
    o->order_id[m->param_len] = 0;
    o->activity_id = id.activity_id;
    o->created_ms = id.sid.ms > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)id.sid.ms;
    *oid = id;
    return 0;
}

/* The key set of an order (its segment's, if any). */
static void keys_of(const struct order_op *op, struct sk_keys *k)
{
    if (sk_keys_for_order(k, op->id.order_id) < 0) sk_keys_for(k, op->id.activity_id);
}

static void db_get(struct sk_app *app, h2o_req_t *req, struct order_op *op);

static void reply_order(struct sk_app *app, h2o_req_t *req, enum sk_route route,
                        const struct sk_order *o, const char *status)
{
    char created[SK_TIME_RFC3339_MAX], deadline[SK_TIME_RFC3339_MAX], body[512];
    sk_time_format_rfc3339(o->created_ms, created, sizeof created);
    sk_time_format_rfc3339(o->pay_deadline_ms, deadline, sizeof deadline);
    int n =
        snprintf(body, sizeof body,
                 "{\"order_id\":\"%s\",\"activity_id\":%" PRIu64 ",\"user_id\":%" PRIu64
                 ",\"quantity\":%" PRId64 ",\"status\":\"%s\",\"created_at\":\"%s\","
                 "\"pay_deadline\":\"%s\"}",
                 o->order_id, o->activity_id, o->user_id, o->quantity, status, created, deadline);
    sk_http_reply(app, req, route, 200, "application/json", body, (size_t)n);
}

static void not_found(struct sk_app *app, h2o_req_t *req, enum sk_route route)
{
    sk_http_error(app, req, route, 404, "unknown_order", "no such order");
}

static void queued_conflict(struct sk_app *app, h2o_req_t *req, enum sk_route route)
{
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_RETRY_AFTER, NULL, H2O_STRLIT("1"));
    sk_http_error(app, req, route, 409, "order_queued",
                  "the order is still being recorded; retry in a moment");
}

/* The store's failure text, kept for the log line on the loop. */
static int keep_err(struct order_op *op, sk_store *st, int rc)
{
    if (rc < 0 && rc != SK_ENOTFOUND && rc != SK_ESTATE)
        snprintf(op->err, sizeof op->err, "%s", sk_store_errstr(st));
    return rc;
}

/* A queued order: its pay deadline needs the activity's timeout, which
 * the definitions cache knows (or reads off the loop). */
static void on_ledger_activity(struct sk_app *app, void *arg, int rc, const struct sk_activity *a)
{
    struct order_op *op = arg;
    if (rc == 0) op->id.pay_deadline_ms = op->id.created_ms + a->pay_timeout_s * 1000;
    h2o_req_t *req = sk_async_end(app, &op->a);
    if (req)
        reply_order(app, req, op->route, &op->id, op->ledger_released ? "cancelled" : "queued");
    free(op);
}

/* The ledger entry led (a string, or NULL/nil: none) of an order the
 * database does not have, or, for a poll, cannot have yet (order_marks.h).
 * The request is still op's (begun); takes op. */
static void ledger_answer(struct sk_app *app, struct order_op *op, const redisReply *led)
{
    uint64_t user = 0;
    long long qty = 0;
    char mark[16] = "";
    int ok = led && led->type == REDIS_REPLY_STRING &&
             sscanf(led->str, "%" SCNu64 ":%lld%15s", &user, &qty, mark) >= 2;
    if (ok && user == op->uid && op->route == SK_ROUTE_order_get && op->a.req) {
        op->id.user_id = user;
        op->id.quantity = qty;
        op->ledger_released = mark[0] != 0; /* released in Redis: cancelled */
        sk_act_defs_lookup(app, op->id.activity_id, on_ledger_activity, op);
        return;
    }
    h2o_req_t *req = sk_async_end(app, &op->a);
    if (req) {
        if (!ok || user != op->uid)
            not_found(app, req, op->route);
        else
            queued_conflict(app, req, op->route);
    }
    free(op);
}

static void on_ledger(void *data, redisReply *rep)
{
    struct order_op *op = data;
    if (rep) {
        ledger_answer(op->app, op, rep);
        return;
    }
    h2o_req_t *req = sk_async_end(op->app, &op->a);
    if (req) sk_http_error(op->app, req, op->route, 503, "unavailable", "redis is unreachable");
    free(op);
}

/* Not in the database: queued in the stream, or no such order. Takes op. */
static void ask_ledger(struct sk_app *app, h2o_req_t *req, struct order_op *op)
{
    if (sk_http_redis_or_reply(app, req, op->route)) {
        free(op);
        return;
    }
    sk_async_begin(app, &op->a, req, op->route);
    /* the ledger of the order's own key set (its segment, if any) */
    struct sk_keys k;
    if (sk_keys_for_order(&k, op->id.order_id) < 0) sk_keys_for(&k, op->id.activity_id);
    const char *argv[] = {"HGET", k.ledger, op->id.order_id};
    if (sk_aredis_command(app->redis, on_ledger, op, 3, argv, NULL) < 0) on_ledger(op, NULL);
}

/* Validates the buyer and the id; a new op for them, or NULL when the
 * request was answered. */
static struct order_op *order_op_or_reply(struct sk_app *app, h2o_req_t *req,
                                          const struct sk_route_match *m)
{
    uint64_t uid;
    if (sk_http_user_or_reply(app, req, m->route, &uid)) return NULL;
    /* pay and cancel take no fields: a body that names one is refused */
    if (m->route != SK_ROUTE_order_get && sk_http_options_or_reply(app, req, m->route, 0, NULL))
        return NULL;
    struct sk_order id;
    struct sk_oid oid;
    if (parse_order_id(m, &id, &oid) < 0) {
        sk_http_error(app, req, m->route, 400, "bad_request",
                      "order id must look like <activity>[.<segment>]-<ms>-<seq>");
        return NULL;
    }
    struct order_op *op = calloc(1, sizeof *op);
    if (!op) {
        sk_http_error(app, req, m->route, 503, "unavailable", "out of memory");
        return NULL;
    }
    op->app = app;
    op->route = m->route;
    op->uid = uid;
    op->id = id;
    op->oid = oid;
    return op;
}

/* The end of the store step common to GET and pay: an absent order goes
 * to the ledger, a failure is a 503, another buyer's order a 404. 1 when
 * that answered (op taken), 0 when the row is the buyer's. */
static int row_or_reply(struct sk_app *app, h2o_req_t *req, struct order_op *op, int rc)
{
    if (!req) {
        free(op);
        return 1;
    }
    if (rc == SK_ENOTFOUND) {
        ask_ledger(app, req, op);
        return 1;
    }
    if (rc < 0 && rc != SK_ESTATE) {
        sk_http_db_error(app, req, op->route, rc, op->err);
        free(op);
        return 1;
    }
    if (op->foreign) {
        not_found(app, req, op->route);
        free(op);
        return 1;
    }
    return 0;
}

static int order_get_run(sk_store *st, void *ctx)
{
    struct order_op *op = ctx;
    int rc = keep_err(op, st, sk_store_order_get(st, op->id.order_id, &op->o));
    if (rc == 0) op->foreign = op->o.user_id != op->uid;
    return rc;
}

static void order_get_done(struct sk_app *app, h2o_req_t *req, void *ctx, int rc)
{
    struct order_op *op = ctx;
    if (row_or_reply(app, req, op, rc)) return;
    reply_order(app, req, op->route, &op->o, sk_order_status_name(op->o.status));
    free(op);
}

/* The database's answer for a poll, if it can give one soon enough. */
static void db_get(struct sk_app *app, h2o_req_t *req, struct order_op *op)
{
    if (!req) {
        free(op);
        return;
    }
    sk_store_call_within(app, req, op->route, app->cfg.db_poll_wait_ms, order_get_run,
                         order_get_done, op);
}

/* What Redis knows of a polled order (lua/order_state.lua): queued there,
 * it is answered from its ledger entry; anything else is the database's
 * (an order persisted or maybe so, one its ledger lacks: a key set
 * rebuilt since, Redis away). */
static void on_state(void *data, redisReply *rep)
{
    struct order_op *op = data;
    struct sk_app *app = op->app;
    struct sk_keys k;
    keys_of(op, &k);
    if (sk_order_marks_note(app, &k, rep, &op->oid.sid) == SK_ORDER_QUEUED &&
        rep->element[0]->type == REDIS_REPLY_STRING) {
        ledger_answer(app, op, rep->element[0]);
        return;
    }
    db_get(app, sk_async_end(app, &op->a), op);
}

/* 1 when the budget of --poll-rate-max polls per second has room for one
 * more now (and takes it), or when purchases do not press; 0: refuse. A token bucket holding at
 * most a tenth of a second's worth (at least one poll), so the polls of a burst spread over the
 * second instead of taking the CPU all at once. */
static int poll_budget_take(struct sk_app *app)
{
    long long rate = app->cfg.poll_rate_max;
    /* the budget binds only while purchases press (admit_limit.h): an
     * idle process answers every poll */
    if (rate <= 0 || !sk_admit_pressed(&app->admit)) return 1;
    struct sk_poll_budget *b = &app->poll_budget;
    const int64_t one = 1000000;
    int64_t full = (rate >= 10 ? rate / 10 : 1) * one;
    int64_t now = sk_mono_us();
    int64_t dt = b->at_us && now - b->at_us < one ? now - b->at_us : one;
    b->at_us = now;
    b->tokens += dt * rate; /* at most 10^6 us x 10^6 polls/s */
    if (b->tokens > full) b->tokens = full;
    if (b->tokens < one) return 0;
    b->tokens -= one;
    return 1;
}

int sk_api_order_get(struct sk_app *app, h2o_req_t *req, const struct sk_route_match *m)
{
    if (!poll_budget_take(app)) {
        sk_metrics_refusal(app->metrics, "busy");
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_RETRY_AFTER, NULL, H2O_STRLIT("1"));
        sk_http_error(app, req, m->route, 503, "busy",
                      "too many order polls on this server; try again");
        return 0;
    }
    struct order_op *op = order_op_or_reply(app, req, m);
    if (!op) return 0;
    struct sk_keys k;
    keys_of(op, &k);
    /* known persisted (the figures of an earlier poll): the database's */
    if (!sk_aredis_ready(app->redis) || sk_order_marks_persisted(app, &k, &op->oid.sid)) {
        db_get(app, req, op);
        return 0;
    }
    sk_async_begin(app, &op->a, req, op->route);
    const char *keys[] = {SK_K_ORDER_STATE_EACH(SK_KEY_OF, &k)};
    char entry[48], index[16] = "";
    snprintf(entry, sizeof entry, "%" PRIu64 "-%" PRIu64, op->oid.sid.ms, op->oid.sid.seq);
    if (op->oid.index != SK_OID_NO_INDEX) snprintf(index, sizeof index, "%d", op->oid.index);
    const char *args[SK_A_ORDER_STATE_N] = {[SK_A_ORDER_STATE_OID] = op->id.order_id,
                                            [SK_A_ORDER_STATE_GROUP] = SK_WORKER_GROUP,
                                            [SK_A_ORDER_STATE_ENTRY] = entry,
                                            [SK_A_ORDER_STATE_BRANCH] = op->oid.branch,
                                            [SK_A_ORDER_STATE_INDEX] = index};
    if (sk_aredis_eval(app->redis, SK_SCRIPT_ORDER_STATE, SK_K_ORDER_STATE_N, keys,
                       SK_A_ORDER_STATE_N, args, NULL, on_state, op) < 0)
        on_state(op, NULL);
    return 0;
}

/* Reads the order, pays it when it is the buyer's, reads it again: one
 * trip to the pool. */
static int order_pay_run(sk_store *st, void *ctx)
{
    struct order_op *op = ctx;
    int rc = keep_err(op, st, sk_store_order_get(st, op->id.order_id, &op->o));
    if (rc) return rc;
    op->foreign = op->o.user_id != op->uid;
    if (op->foreign) return 0;
    /* an unpaid order of a deleted sale is not paid (docs/activity.md) */
    if (op->o.status == SK_ORDER_CREATED) {
        struct sk_activity a;
        rc = keep_err(op, st, sk_store_activity_get(st, op->o.activity_id, &a));
        if (rc == SK_ENOTFOUND) {
            op->deleted = 1;
            return 0;
        }
        if (rc) return rc;
    }
    int status;
    rc = keep_err(op, st,
                  sk_store_order_pay_ref(st, op->id.order_id, sk_wall_ms(), op->pay_ref, &status));
    if (rc == SK_ENOTFOUND) rc = SK_EDB;        /* it was there a moment ago */
    if (rc == SK_ESTATE) op->o.status = status; /* which refusal */
    if (rc) return rc;
    return keep_err(op, st, sk_store_order_get(st, op->id.order_id, &op->o));
}

static void order_pay_done(struct sk_app *app, h2o_req_t *req, void *ctx, int rc)
{
    struct order_op *op = ctx;
    if (row_or_reply(app, req, op, rc)) return;
    if (op->deleted)
        sk_http_error(app, req, op->route, 409, "activity_deleted",
                      "the sale of this order was deleted; it cannot be paid");
    else if (rc == SK_ESTATE && op->o.status == SK_ORDER_PAID) /* a second payment */
        sk_http_error(app, req, op->route, 409, "order_paid",
                      "the order is paid by another payment; this one is refused (refund it)");
    else if (rc == SK_ESTATE) /* a late payment must not revive stock that was given back */
        sk_http_error(app, req, op->route, 409, "order_cancelled",
                      "the order was cancelled (payment timeout or buyer); it cannot be paid");
    else
        reply_order(app, req, op->route, &op->o, sk_order_status_name(op->o.status));
    free(op);
}

/* The payment provider's reference of this payment (docs/integration.md):
 * one Payment-Reference header of printable ASCII, at most 127 bytes, or
 * none. 0, or -1 when the request was answered (400). */
static int pay_ref_or_reply(struct sk_app *app, h2o_req_t *req, const struct sk_route_match *m,
                            char *out, size_t cap)
{
    static const char name[] = "payment-reference";
    out[0] = 0;
    ssize_t i = h2o_find_header_by_str(&req->headers, name, sizeof name - 1, -1);
    if (i < 0) return 0;
    const h2o_iovec_t *v = &req->headers.entries[i].value;
    int bad = v->len == 0 || v->len >= cap ||
              h2o_find_header_by_str(&req->headers, name, sizeof name - 1, i) >= 0;
    for (size_t k = 0; !bad && k < v->len; k++)
        bad = v->base[k] < 0x21 || v->base[k] > 0x7e;
    if (bad) {
        sk_http_error(app, req, m->route, 400, "bad_request",
                      "Payment-Reference: one header of 1 to 127 visible ASCII characters");
        return -1;
    }
    memcpy(out, v->base, v->len);
    out[v->len] = 0;
    return 0;
}

int sk_api_order_pay(struct sk_app *app, h2o_req_t *req, const struct sk_route_match *m)
{
    char ref[SK_STORE_PAY_REF_MAX];
    if (pay_ref_or_reply(app, req, m, ref, sizeof ref)) return 0;
    struct order_op *op = order_op_or_reply(app, req, m);
    if (!op) return 0;
    memcpy(op->pay_ref, ref, sizeof ref);
    sk_store_call(app, req, m->route, order_pay_run, order_pay_done, op);
    return 0;
}

/* The release is done (or owed): the database learns it off the loop,
 * after the answer. A mark that does not happen only costs the sweeper a
 * release that answers ALREADY_RELEASED. */
static int mark_run(sk_store *st, void *arg)
{
    struct order_op *op = arg;
    return keep_err(op, st,
                    sk_order_release_done(st, &op->cr, op->release_rc, op->given, op->now_ms));
}

static void mark_done(void *arg, int rc)
{
    struct order_op *op = arg;
    if (rc < 0)
        sk_log(SK_LOG_WARN, "cancel %s: released, not marked in the DB (the sweeper will): %s",
               op->cr.order.order_id, op->err[0] ? op->err : sk_strerror(rc));
    free(op);
}

/* The release after a cancel this request won. The cancellation is already
 * durable in the database; if Redis cannot take the units back now, the
 * order stays owed and the sweeper releases it on a later pass. */
static void on_release(void *data, redisReply *rep)
{
    struct order_op *op = data;
    struct sk_app *app = op->app;
    int rc = -1;
    int64_t given = 0;
    if (sk_stock_release_parse(rep, &rc, &given) < 0) {
        rc = -1;
        given = 0;
    }
    int released = rc == SK_RC_RELEASED || rc == SK_RC_ALREADY_RELEASED;
    if (!released)
        sk_log(SK_LOG_WARN, "release of cancelled order %s: %s; the sweeper will retry",
               op->cr.order.order_id, rep ? sk_rc_name(rc) : "redis unreachable");
    /* released stock sells again: forget the local sold-out mark */
    struct sk_keyset *c = sk_app_act(app, op->cr.order.activity_id, SK_ACT_FIND);
    if (c && given > 0) c->sold_out = 0;
    h2o_req_t *req = op->waiting ? sk_async_end(app, &op->a) : NULL;
    if (req) {
        op->cr.order.status = SK_ORDER_CANCELLED;
        reply_order(app, req, op->route, &op->cr.order, "cancelled");
    }
    op->release_rc = rc;
    op->given = given;
    op->now_ms = sk_wall_ms();
    op->err[0] = 0;
    if (!released || sk_store_bg(app, 0, mark_run, mark_done, op) < 0) free(op);
}

/* The Redis release owed by the cancel this request won (req NULL: the
 * client left; the units still go back). Takes op. */
static void release(struct sk_app *app, h2o_req_t *req, struct order_op *op)
{
    struct sk_cancel_result *cr = &op->cr;
    if (req) {
        sk_async_begin(app, &op->a, req, op->route);
        op->waiting = 1;
    }
    struct sk_release_call c;
    sk_stock_release_call(&c, cr->order.activity_id, cr->order.order_id, cr->order.user_id,
                          cr->order.quantity);
    if (sk_aredis_eval(app->redis, SK_SCRIPT_RELEASE, SK_RELEASE_NKEYS, c.keys, SK_A_RELEASE_N,
                       c.args, NULL, on_release, op) < 0)
        on_release(op, NULL);
}

static int order_cancel_run(sk_store *st, void *ctx)
{
    struct order_op *op = ctx;
    return keep_err(op, st,
                    sk_order_cancel_db(st, op->id.order_id, op->uid, sk_wall_ms(), &op->cr));
}

static void order_cancel_done(struct sk_app *app, h2o_req_t *req, void *ctx, int rc)
{
    struct order_op *op = ctx;
    struct sk_cancel_result *cr = &op->cr;
    if (rc == 0 && cr->must_release) { /* this call cancelled it: release, client or not */
        release(app, req, op);
        return;
    }
    if (rc == SK_ENOTFOUND || !req) { /* not persisted yet (queued), or not this buyer's */
        row_or_reply(app, req, op, SK_ENOTFOUND);
        return;
    }
    if (rc == SK_ESTATE) {
        sk_http_error(app, req, op->route, 409, "order_paid",
                      "the order is paid; it cannot be cancelled");
        free(op);
        return;
    }
    if (rc < 0) {
        sk_http_db_error(app, req, op->route, rc, op->err);
        free(op);
        return;
    }
    /* cancelled before: released then, not again */
    cr->order.status = SK_ORDER_CANCELLED;
    reply_order(app, req, op->route, &cr->order, "cancelled");
    free(op);
}

int sk_api_order_cancel(struct sk_app *app, h2o_req_t *req, const struct sk_route_match *m)
{
    struct order_op *op = order_op_or_reply(app, req, m);
    if (op) sk_store_call(app, req, m->route, order_cancel_run, order_cancel_done, op);
    return 0;
}
