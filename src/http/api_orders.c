/* api_orders.c - the buyer's order routes: GET /api/v1/orders/{id},
 * POST .../pay, POST .../cancel. An order lives in the database once the
 * order worker persisted it; before that it is "queued" and known only to
 * Redis (the ledger). A buyer sees only their own orders: anyone else's
 * answer is the same 404 as for an order that does not exist. */
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
#include "http/app.h"
#include "orders/order_cancel.h"

/* A request waiting on Redis (ledger lookup or release). */
struct order_op {
    struct sk_async_req a;
    struct sk_app *app;
    uint64_t uid;
    struct sk_order o;          /* queued: order_id, activity_id, created_ms from the id */
    struct sk_cancel_result cr; /* cancel: the order and what the DB step did */
};

/* "<activity>-<ms>-<seq>", or "<activity>.<seg>-<ms>-<seq>" for an order of
 * segment seg of a segmented activity (docs/segments.md): digits, one
 * optional dot in the label, two dashes, so it is safe as a key and in
 * JSON. Anything else is the caller's mistake (400). */
static int parse_order_id(const struct sk_route_match *m, struct sk_order *o)
{
    memset(o, 0, sizeof *o);
    if (m->param_len == 0 || m->param_len >= sizeof o->order_id) return SK_EINVAL;
    uint64_t aid;
    int seg;
    int ll = sk_keys_parse_label(m->param, m->param_len, &aid, &seg);
    if (ll < 0 || seg >= SK_ACTIVITY_SEGMENTS_MAX) return SK_EINVAL;
    /* the stream id after the label: "-<ms>-<seq>" */
    int dashes = 0;
    size_t run = 0;
    for (size_t i = (size_t)ll; i < m->param_len; i++) {
        char c = m->param[i];
        if (c == '-') {
            if (i > (size_t)ll && run == 0) return SK_EINVAL;
            dashes++;
            run = 0;
        } else if (c >= '0' && c <= '9' && run < 20) {
            run++;
        } else {
            return SK_EINVAL;
        }
    }
    if (dashes != 2 || run == 0) return SK_EINVAL;
    memcpy(o->order_id, m->param, m->param_len);
    o->order_id[m->param_len] = 0;
    o->activity_id = aid;
    o->created_ms = strtoll(o->order_id + ll + 1, NULL, 10);
    return 0;
}

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

/* The ledger answer for an order the database does not have (yet). */
static void on_ledger(void *data, redisReply *rep)
{
    struct order_op *op = data;
    struct sk_app *app = op->app;
    h2o_req_t *req = sk_async_end(app, &op->a);
    if (req) {
        uint64_t user = 0;
        long long qty = 0;
        char mark[16] = "";
        int ok = rep && rep->type == REDIS_REPLY_STRING &&
                 sscanf(rep->str, "%" SCNu64 ":%lld%15s", &user, &qty, mark) >= 2;
        if (!rep) {
            sk_http_error(app, req, op->a.route, 503, "unavailable", "redis is unreachable");
        } else if (!ok || user != op->uid) {
            not_found(app, req, op->a.route);
        } else if (op->a.route != SK_ROUTE_order_get) {
            queued_conflict(app, req, op->a.route);
        } else {
            op->o.user_id = user;
            op->o.quantity = qty;
            struct sk_activity a;
            if (sk_store_activity_get(app->store, op->o.activity_id, &a) == 0)
                op->o.pay_deadline_ms = op->o.created_ms + a.pay_timeout_s * 1000;
            reply_order(app, req, op->a.route, &op->o, mark[0] ? "cancelled" : "queued");
        }
    }
    free(op);
}

static void ask_ledger(struct sk_app *app, h2o_req_t *req, enum sk_route route, uint64_t uid,
                       const struct sk_order *o)
{
    if (sk_http_redis_or_reply(app, req, route)) return;
    struct order_op *op = calloc(1, sizeof *op);
    if (!op) {
        sk_http_error(app, req, route, 503, "unavailable", "out of memory");
        return;
    }
    op->app = app;
    op->uid = uid;
    op->o = *o;
    sk_async_begin(app, &op->a, req, route);
    /* the ledger of the order's own key set (its segment, if any) */
    struct sk_keys k;
    if (sk_keys_for_order(&k, o->order_id) < 0) sk_keys_for(&k, o->activity_id);
    const char *argv[] = {"HGET", k.ledger, o->order_id};
    if (sk_aredis_command(app->redis, on_ledger, op, 3, argv, NULL) < 0) on_ledger(op, NULL);
}

/* Validates the id and the buyer and reads the order: 1 when the request
 * was answered (or handed to Redis), 0 with *o filled from the database. */
static int order_or_reply(struct sk_app *app, h2o_req_t *req, const struct sk_route_match *m,
                          uint64_t *uid, struct sk_order *o)
{
    if (sk_http_user_or_reply(app, req, m->route, uid)) return 1;
    struct sk_order id;
    if (parse_order_id(m, &id) < 0) {
        sk_http_error(app, req, m->route, 400, "bad_request",
                      "order id must look like <activity>[.<segment>]-<ms>-<seq>");
        return 1;
    }
    int rc = sk_store_order_get(app->store, id.order_id, o);
    if (rc == SK_ENOTFOUND) {
        ask_ledger(app, req, m->route, *uid, &id);
        return 1;
    }
    if (rc < 0) {
        sk_log(SK_LOG_ERROR, "store: %s", sk_store_errstr(app->store));
        sk_http_error(app, req, m->route, 503, "unavailable", "database unavailable");
        return 1;
    }
    if (o->user_id != *uid) {
        not_found(app, req, m->route);
        return 1;
    }
    return 0;
}

int sk_api_order_get(struct sk_app *app, h2o_req_t *req, const struct sk_route_match *m)
{
    uint64_t uid;
    struct sk_order o;
    if (order_or_reply(app, req, m, &uid, &o)) return 0;
    reply_order(app, req, m->route, &o, sk_order_status_name(o.status));
    return 0;
}

int sk_api_order_pay(struct sk_app *app, h2o_req_t *req, const struct sk_route_match *m)
{
    uint64_t uid;
    struct sk_order o;
    if (order_or_reply(app, req, m, &uid, &o)) return 0;
    int status = o.status;
    int rc = sk_store_order_pay(app->store, o.order_id, sk_wall_ms(), &status);
    if (rc == SK_ESTATE) {
        /* a late payment must not revive stock that was given back */
        sk_http_error(app, req, m->route, 409, "order_cancelled",
                      "the order was cancelled (payment timeout or buyer); it cannot be paid");
        return 0;
    }
    if (rc < 0 || sk_store_order_get(app->store, o.order_id, &o) < 0) {
        sk_log(SK_LOG_ERROR, "store: %s", sk_store_errstr(app->store));
        sk_http_error(app, req, m->route, 503, "unavailable", "database unavailable");
        return 0;
    }
    reply_order(app, req, m->route, &o, sk_order_status_name(o.status));
    return 0;
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
    if (rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
        rep->element[0]->type == REDIS_REPLY_INTEGER &&
        rep->element[1]->type == REDIS_REPLY_INTEGER) {
        rc = (int)rep->element[0]->integer;
        given = rep->element[1]->integer;
    }
    if (sk_order_release_done(app->store, &op->cr, rc, given, sk_wall_ms()) < 0)
        sk_log(SK_LOG_WARN, "store: %s", sk_store_errstr(app->store));
    if (op->cr.release_pending)
        sk_log(SK_LOG_WARN, "release of cancelled order %s: %s; the sweeper will retry",
               op->cr.order.order_id, rep ? sk_rc_name(rc) : "redis unreachable");
    /* released stock sells again: forget the local sold-out mark */
    struct sk_act_cache *c = sk_app_act(app, op->cr.order.activity_id, 0);
    if (c && given > 0) c->sold_out = 0;
    h2o_req_t *req = sk_async_end(app, &op->a);
    if (req) {
        op->cr.order.status = SK_ORDER_CANCELLED;
        reply_order(app, req, op->a.route, &op->cr.order, "cancelled");
    }
    free(op);
}

int sk_api_order_cancel(struct sk_app *app, h2o_req_t *req, const struct sk_route_match *m)
{
    uint64_t uid;
    struct sk_order id;
    if (sk_http_user_or_reply(app, req, m->route, &uid)) return 0;
    if (parse_order_id(m, &id) < 0) {
        sk_http_error(app, req, m->route, 400, "bad_request",
                      "order id must look like <activity>[.<segment>]-<ms>-<seq>");
        return 0;
    }
    struct sk_cancel_result cr;
    int rc = sk_order_cancel_db(app->store, id.order_id, uid, sk_wall_ms(), &cr);
    if (rc == SK_ENOTFOUND) { /* not persisted yet (queued), or not this buyer's */
        ask_ledger(app, req, m->route, uid, &id);
        return 0;
    }
    if (rc == SK_ESTATE) {
        sk_http_error(app, req, m->route, 409, "order_paid",
                      "the order is paid; it cannot be cancelled");
        return 0;
    }
    if (rc < 0) {
        sk_log(SK_LOG_ERROR, "store: %s", sk_store_errstr(app->store));
        sk_http_error(app, req, m->route, 503, "unavailable", "database unavailable");
        return 0;
    }
    cr.order.status = SK_ORDER_CANCELLED;
    if (!cr.must_release) { /* cancelled before: released then, not again */
        reply_order(app, req, m->route, &cr.order, "cancelled");
        return 0;
    }
    struct order_op *op = calloc(1, sizeof *op);
    if (!op) { /* the sweeper owes the release */
        reply_order(app, req, m->route, &cr.order, "cancelled");
        return 0;
    }
    op->app = app;
    op->uid = uid;
    op->cr = cr;
    sk_async_begin(app, &op->a, req, m->route);
    /* released where it was admitted: the key set its id names (release.lua
     * refuses an id that does not start with the label) */
    struct sk_keys k;
    if (sk_keys_for_order(&k, cr.order.order_id) < 0 || k.activity_id != cr.order.activity_id)
        sk_keys_for(&k, cr.order.activity_id);
    char user[24], qty[24];
    snprintf(user, sizeof user, "%" PRIu64, cr.order.user_id);
    snprintf(qty, sizeof qty, "%" PRId64, cr.order.quantity);
    const char *keys[] = {k.meta, k.stock, k.buyers, k.released, k.ledger};
    const char *args[] = {k.label, cr.order.order_id, user, qty};
    if (sk_aredis_eval(app->redis, SK_SCRIPT_RELEASE, 5, keys, 4, args, NULL, on_release, op) < 0)
        on_release(op, NULL);
    return 0;
}
