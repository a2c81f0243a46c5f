/* store_orders.c - the orders once persisted (store.h), on every driver
 * (store_int.h): reading them, the status changes (pay, cancel) and the
 * release marks, the lists of the sweeper and of reconcile, the counts,
 * and the reconcile's DB stock check, repair and order restore.
 *
 * A status change is one transaction: the order's row locked and read
 * (SQLite: BEGIN IMMEDIATE holds the write lock already; the servers:
 * SELECT ... FOR UPDATE, which waits for a racing change and reads the
 * newest committed version), the decision on the status read, the update
 * (and a cancel's DB stock credit), COMMIT. Deciding on the locked row
 * matters: a miss of a conditional update followed by a second read would
 * report an order inserted in between (the worker persisting it) as
 * changed by this call. Anything written with a change (an event of the
 * order's, say) goes in change_tx, in the same transaction. */
#include "store/store_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

/* An id no table holds: longer than any stored one. */
static int id_too_long(const char *order_id)
{
    return strnlen(order_id, SK_STORE_ORDER_ID_MAX) >= SK_STORE_ORDER_ID_MAX;
}

int sk_store_order_get(sk_store *st, const char *order_id, struct sk_order *out)
{
    int rc = sk_store_enter(st);
    if (rc) return rc;
    if (id_too_long(order_id)) return sk_store_no_order(st, order_id);
    rc = sk_q_one(st, Q_ORDER_GET, SK_ARGS(SK_T(order_id)), sk_store_read_order, out);
    return rc == 0 ? sk_store_no_order(st, order_id) : rc < 0 ? rc : 0;
}

/* ---- status changes ---- */

/* The locked row of a status change: the order as it was. */
static void read_locked(sk_store *st, sk_stmt *s, void *dst)
{
    struct sk_order *o = dst;
    char status[16];
    st->drv->col_text(s, 0, status, sizeof status);
    o->status = sk_store_status_from_text(status);
    o->activity_id = (uint64_t)st->drv->col_i64(s, 1);
    o->quantity = st->drv->col_i64(s, 2);
    o->user_id = (uint64_t)st->drv->col_i64(s, 3);
    o->created_ms = st->drv->col_i64(s, 4);
    o->pay_deadline_ms = st->drv->col_i64(s, 5);
}

struct change {
    const char *order_id;
    int64_t now;
    int cancel;
    const char *pay_ref; /* a payment's reference, NULL none */
    int before;          /* the status the order had */
    int other_payment;   /* paid before by a payment of another reference */
};

/* A payment of a cancelled order: its refusal's event, once per order
 * and reference (the shop refunds what the provider took). */
static int refused_tx(sk_store *st, struct change *c, const struct sk_order *o)
{
    int64_t seen = 0;
    int rc = sk_q_one(st, Q_EVENT_REFUSED,
                      SK_ARGS(SK_T(c->order_id), SK_T(c->pay_ref ? c->pay_ref : "")),
                      sk_store_read_i64, &seen);
    if (rc < 0 || seen > 0) return rc < 0 ? rc : 0;
    return sk_store_event(st, "order.payment_refused", o->activity_id, o, c->now, c->pay_ref, NULL);
}

/* The body of a status change (created -> paid or cancelled) and its
 * event. */
static int change_tx(sk_store *st, void *arg)
{
    struct change *c = arg;
    struct sk_order o = {0};
    int rc = sk_q_one(st, Q_ORDER_LOCK, SK_ARGS(SK_T(c->order_id)), read_locked, &o);
    if (rc <= 0) return rc ? rc : sk_store_no_order(st, c->order_id);
    snprintf(o.order_id, sizeof o.order_id, "%s", c->order_id);
    c->before = o.status;
    if (o.status == SK_ORDER_CANCELLED && !c->cancel) return refused_tx(st, c, &o);
    if (o.status == SK_ORDER_PAID && !c->cancel && c->pay_ref) {
        /* a second payment, not a retry of the first: refused too */
        int64_t same = 0;
        rc = sk_q_one(st, Q_EVENT_PAID_BY, SK_ARGS(SK_T(c->order_id), SK_T(c->pay_ref)),
                      sk_store_read_i64, &same);
        if (rc < 0 || same > 0) return rc < 0 ? rc : 0;
        c->other_payment = 1;
        return refused_tx(st, c, &o);
    }
    if (o.status != SK_ORDER_CREATED) return 0;
    rc = sk_q_run(st, c->cancel ? Q_ORDER_CANCEL : Q_ORDER_PAY,
                  SK_ARGS(SK_I(c->now), SK_T(c->order_id)), NULL);
    /* the units go back with the winning cancel, exactly once */
    if (rc == 0 && c->cancel)
        rc = sk_q_run(st, Q_STOCK_CREDIT, SK_ARGS(SK_I(o.quantity), SK_I(o.activity_id)), NULL);
    if (rc) return rc;
    o.status = c->cancel ? SK_ORDER_CANCELLED : SK_ORDER_PAID;
    *(c->cancel ? &o.cancelled_ms : &o.paid_ms) = c->now;
    /* a cancel at or past the pay deadline is the deadline's release */
    const char *type = !c->cancel                    ? "order.paid"
                       : c->now >= o.pay_deadline_ms ? "order.released"
                                                     : "order.cancelled";
    return sk_store_event(st, type, o.activity_id, &o, c->now, c->pay_ref, NULL);
}

/* created -> paid / cancelled at now; *before: the status it had. */
static int change(sk_store *st, const char *order_id, int64_t now, int cancel, const char *pay_ref,
                  int *before, int *other_payment)
{
    int rc = sk_store_enter(st);
    if (rc) return rc;
    if (id_too_long(order_id)) return sk_store_no_order(st, order_id);
    struct change c = {order_id, now, cancel, pay_ref && *pay_ref ? pay_ref : NULL, -1, 0};
    rc = sk_tx(st, change_tx, &c);
    *before = c.before;
    if (other_payment) *other_payment = c.other_payment;
    return rc;
}

/* A payment reference: printable ASCII that fits its column. */
static int bad_pay_ref(const char *ref)
{
    size_t n = ref ? strnlen(ref, SK_STORE_PAY_REF_MAX) : 0;
    if (n >= SK_STORE_PAY_REF_MAX) return 1;
    for (size_t i = 0; i < n; i++)
        if (ref[i] < 0x20 || ref[i] > 0x7e) return 1;
    return 0;
}

int sk_store_order_pay_ref(sk_store *st, const char *order_id, int64_t now_ms, const char *pay_ref,
                           int *status_out)
{
    if (bad_pay_ref(pay_ref))
        return sk_store_set_err(st, SK_EINVAL,
                                "payment reference: printable ASCII of at most %d bytes",
                                SK_STORE_PAY_REF_MAX - 1);
    int before = -1, other = 0;
    int rc = change(st, order_id, now_ms, 0, pay_ref, &before, &other);
    if (rc) return rc;
    if (status_out) *status_out = before == SK_ORDER_CREATED ? SK_ORDER_PAID : before;
    if (other)
        return sk_store_set_err(
            st, SK_ESTATE, "order %.80s is paid by another payment: this one refused", order_id);
    if (before == SK_ORDER_CANCELLED)
        return sk_store_set_err(st, SK_ESTATE, "order %.80s is cancelled: payment refused",
                                order_id);
    if (before != SK_ORDER_CREATED && before != SK_ORDER_PAID)
        return sk_store_set_err(st, SK_EDB, "order %.80s has an unknown status", order_id);
    return 0;
}

int sk_store_order_pay(sk_store *st, const char *order_id, int64_t now_ms, int *status_out)
{
    return sk_store_order_pay_ref(st, order_id, now_ms, NULL, status_out);
}

int sk_store_order_cancel(sk_store *st, const char *order_id, int64_t now_ms, int *prev_status)
{
    int before = -1;
    int rc = change(st, order_id, now_ms, 1, NULL, &before, NULL);
    if (rc) return rc;
    if (prev_status) *prev_status = before;
    if (before == SK_ORDER_PAID)
        return sk_store_set_err(st, SK_ESTATE, "order %.80s is paid: cannot cancel", order_id);
    if (before != SK_ORDER_CREATED && before != SK_ORDER_CANCELLED)
        return sk_store_set_err(st, SK_EDB, "order %.80s has an unknown status", order_id);
    return 0;
}

int sk_store_order_mark_released(sk_store *st, const char *order_id, int64_t now_ms)
{
    int rc = sk_store_enter(st);
    if (rc) return rc;
    if (id_too_long(order_id)) return sk_store_no_order(st, order_id);
    int64_t hit = 0;
    rc = sk_q_run(st, Q_ORDER_RELEASED, SK_ARGS(SK_I(now_ms), SK_T(order_id)), &hit);
    if (rc || hit) return rc;
    /* marked before, not cancelled, or absent */
    struct sk_order o;
    if ((rc = sk_store_order_get(st, order_id, &o)) != 0 || o.status == SK_ORDER_CANCELLED)
        return rc;
    return sk_store_set_err(st, SK_ESTATE, "order %.80s is not cancelled: nothing to release",
                            order_id);
}

/* ---- lists ---- */

/* The orders of q (parameters v[0..n), the limit last) into out. */
static int list(sk_store *st, int q, const struct sk_val *v, int n, size_t limit,
                struct sk_order *out, size_t *got)
{
    *got = 0;
    st->errstr[0] = 0;
    if (limit == 0) return 0;
    int rc = sk_store_enter(st);
    return rc ? rc : sk_q_fill(st, q, v, n, sk_store_read_order, sizeof *out, out, limit, got);
}

static int64_t limit_arg(size_t limit)
{
    return limit > INT64_MAX ? INT64_MAX : (int64_t)limit;
}

int sk_store_orders_expired(sk_store *st, int64_t now_ms, size_t limit, struct sk_order *out,
                            size_t *n)
{
    return list(st, Q_ORDERS_EXPIRED, SK_ARGS(SK_I(now_ms), SK_I(limit_arg(limit))), limit, out, n);
}

int sk_store_orders_list(sk_store *st, uint64_t activity_id, const char *after, size_t limit,
                         struct sk_order *out, size_t *n)
{
    if (sk_store_id_beyond_sql(activity_id)) limit = 0;
    /* The ids of one activity all start "<id>-", or "<id>.<seg>-" for a
     * segmented one (docs/segments.md): a primary-key range scan between
     * "<id>-" and "<id>/" ('-' < '.' < '/' < digits, so "<id><digit>..."
     * of another activity sorts after it; the stores compare bytes). */
    char lo[32], hi[32];
    snprintf(lo, sizeof lo, "%" PRIu64 "-", activity_id);
    snprintf(hi, sizeof hi, "%" PRIu64 "/", activity_id);
    const char *from = after && *after && strcmp(after, lo) > 0 ? after : lo;
    return list(st, Q_ORDERS_LIST,
                SK_ARGS(SK_T(from), SK_T(hi), SK_I(activity_id), SK_I(limit_arg(limit))), limit,
                out, n);
}

int sk_store_orders_unreleased(sk_store *st, const char *after, size_t limit, struct sk_order *out,
                               size_t *n)
{
    return list(st, Q_ORDERS_UNRELEASED, SK_ARGS(SK_T(after ? after : ""), SK_I(limit_arg(limit))),
                limit, out, n);
}

/* A row of Q_ORDERS_COUNT into the counts. */
static void read_count(sk_store *st, sk_stmt *s, void *dst)
{
    struct sk_order_counts *out = dst;
    char what[32];
    st->drv->col_text(s, 0, what, sizeof what);
    int64_t n = st->drv->col_i64(s, 1), units = st->drv->col_i64(s, 2);
    if (!strcmp(what, "stock_failures")) {
        out->stock_failures = n;
        out->stock_failure_units = units;
    } else if (!strcmp(what, "conflicts")) {
        out->conflicts = n;
    } else {
        int k = sk_store_status_from_text(what);
        if (k < 0) return; /* the CHECK makes this impossible */
        out->orders[k] = n;
        out->units[k] = units;
    }
}

int sk_store_orders_count(sk_store *st, uint64_t activity_id, struct sk_order_counts *out)
{
    memset(out, 0, sizeof *out);
    st->errstr[0] = 0;
    if (sk_store_id_beyond_sql(activity_id)) return 0;
    int rc = sk_store_enter(st);
    return rc ? rc
              : sk_q_each(st, Q_ORDERS_COUNT,
                          SK_ARGS(SK_I(activity_id), SK_I(activity_id), SK_I(activity_id)),
                          read_count, out);
}

/* ---- reconcile: DB stock, restore ---- */

/* An activity's row of Q_STOCK_CHECK: its DB stock, the DB stock its
 * orders say it should have, and its initial stock. */
struct stock {
    int64_t stock, expected, initial;
};

static void read_stock(sk_store *st, sk_stmt *s, void *dst)
{
    struct stock *k = dst;
    k->stock = st->drv->col_i64(s, 0);
    k->expected = st->drv->col_i64(s, 1);
    k->initial = st->drv->col_i64(s, 2);
}

static int stock_check(sk_store *st, uint64_t id, struct stock *k)
{
    int rc = sk_q_one(st, Q_STOCK_CHECK, SK_ARGS(SK_I(id)), read_stock, k);
    return rc == 0 ? sk_store_no_activity(st, id) : rc < 0 ? rc : 0;
}

int sk_store_db_stock_check(sk_store *st, uint64_t id, int64_t *stock, int64_t *expected)
{
    if (sk_store_id_beyond_sql(id)) return sk_store_no_activity(st, id);
    struct stock k;
    int rc = sk_store_enter(st);
    if (rc == 0) rc = stock_check(st, id, &k);
    if (rc) return rc;
    if (stock) *stock = k.stock;
    if (expected) *expected = k.expected;
    return 0;
}

struct repair {
    uint64_t id;
    int64_t now;
    struct stock k;
};

/* The body of the repair: the activity's row lock first (a persist or
 * cancel that changes the stock waits for this transaction, and the sum
 * read after it, a statement of its own, sees every one that committed
 * before), the check, the new stock and its audit row. */
static int repair_tx(sk_store *st, void *arg)
{
    struct repair *r = arg;
    int64_t locked;
    int rc = sk_q_one(st, Q_ACTIVITY_LOCK, SK_ARGS(SK_I(r->id)), sk_store_read_i64, &locked);
    if (rc <= 0) return rc ? rc : sk_store_no_activity(st, r->id);
    if ((rc = stock_check(st, r->id, &r->k)) != 0) return rc;
    const struct stock *k = &r->k;
    if (k->expected < 0 || k->expected > k->initial)
        return sk_store_set_err(st, SK_ESTATE,
                                "activity %" PRIu64 ": computed DB stock %" PRId64
                                " is outside 0..%" PRId64
                                " (the DB holds more units than the initial stock)",
                                r->id, k->expected, k->initial);
    if (k->stock == k->expected) return 0;
    char detail[SK_STORE_AUDIT_DETAIL_MAX];
    snprintf(detail, sizeof detail,
             "DB stock %" PRId64 " -> %" PRId64 " (initial %" PRId64
             " - units of orders not cancelled %" PRId64 ")",
             k->stock, k->expected, k->initial, k->initial - k->expected);
    rc = sk_q_run(st, Q_ACTIVITY_SET_STOCK, SK_ARGS(SK_I(k->expected), SK_I(r->id)), NULL);
    return rc ? rc : sk_store_audit_row(st, r->now, r->id, "repair_db_stock", detail);
}

int sk_store_db_stock_repair(sk_store *st, uint64_t id, int64_t now_ms, int64_t *before,
                             int64_t *after)
{
    if (sk_store_id_beyond_sql(id)) return sk_store_no_activity(st, id);
    struct repair r = {.id = id, .now = now_ms};
    int rc = sk_tx(st, repair_tx, &r);
    if (rc) return rc;
    if (before) *before = r.k.stock;
    if (after) *after = r.k.expected;
    return 0;
}

struct restore {
    const struct sk_order *o;
    int64_t now;
    const char *detail;
};

/* The pay timeout of a row of Q_PAY_TIMEOUTS (id, pay_timeout_s). */
static void read_timeout(sk_store *st, sk_stmt *s, void *dst)
{
    *(int64_t *)dst = st->drv->col_i64(s, 1);
}

static int restore_tx(sk_store *st, void *arg)
{
    const struct restore *r = arg;
    const struct sk_order *o = r->o;
    /* the pay deadline as persist sets it: the activity's timeout, or the
     * default when it is not in the DB */
    int64_t timeout_s = SK_ACTIVITY_PAY_TIMEOUT_DEFAULT;
    int rc = sk_q_one(st, Q_PAY_TIMEOUTS, SK_ARGS(SK_I(o->activity_id)), read_timeout, &timeout_s);
    if (rc < 0) return rc;
    int cancelled = o->status == SK_ORDER_CANCELLED;
    struct sk_val when = cancelled ? SK_I(r->now) : SK_NULL;
    rc = sk_q_run(st, Q_ORDER_RESTORE,
                  SK_ARGS(SK_T(o->order_id), SK_I(o->activity_id), SK_I(o->user_id),
                          SK_I(o->quantity), SK_T(sk_order_status_name(o->status)),
                          SK_I(o->created_ms), SK_I(o->created_ms + timeout_s * 1000),
                          SK_T(o->stream_id), when, when),
                  NULL);
    if (rc == SK_EEXIST) return sk_store_set_err(st, rc, "order %s already exists", o->order_id);
    /* its events as if it had been persisted (and cancelled) */
    struct sk_order e = *o;
    e.status = SK_ORDER_CREATED;
    e.pay_deadline_ms = o->created_ms + timeout_s * 1000;
    e.paid_ms = e.cancelled_ms = 0;
    if (rc == 0) rc = sk_store_event(st, "order.created", o->activity_id, &e, r->now, NULL, NULL);
    e.status = SK_ORDER_CANCELLED;
    e.cancelled_ms = r->now;
    if (rc == 0 && cancelled)
        rc = sk_store_event(st, "order.cancelled", o->activity_id, &e, r->now, NULL, NULL);
    return rc ? rc
              : sk_store_audit_row(st, r->now, o->activity_id, "repair_restore_order", r->detail);
}

int sk_store_order_restore(sk_store *st, const struct sk_order *o, int64_t now_ms,
                           const char *audit_detail)
{
    int rc = sk_store_check_order(st, o, 0);
    if (rc) return rc;
    if (o->status != SK_ORDER_CREATED && o->status != SK_ORDER_CANCELLED)
        return sk_store_set_err(st, SK_EINVAL, "order %s: restored as created or cancelled only",
                                o->order_id);
    struct restore r = {o, now_ms, audit_detail ? audit_detail : o->order_id};
    return sk_tx(st, restore_tx, &r);
}
