/* store_pg_orders.c - the orders of the PostgreSQL backend once
 * persisted (store_pg_int.h): reading them, the status changes (pay,
 * cancel) and the release marks, the counts, the audit rows, the rollback
 * guard's marks, and the reconcile's DB stock check, repair and order
 * restore. */
#include "store/store_pg_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "core/error.h"

/* ---- orders ---------------------------------------------------------- */

/* The status column of row `row` as enum sk_order_status (-1: another
 * text). */
static int status_at(const PGresult *r, int row, int col)
{
    return sk_store_status_from_text(PQgetvalue(r, row, col));
}

int sk_pg_order_get(sk_store *st, const char *order_id, struct sk_order *out)
{
    int rc = sk_pg_read_one(st, "read order", PGQ_ORDER_GET, order_id, sk_store_read_order, out);
    return rc == 0 ? sk_store_no_order(st, order_id) : rc < 0 ? rc : 0;
}

/* The status of an order into *status; SK_ENOTFOUND when absent. */
static int read_status(sk_store *st, const char *order_id, int *status)
{
    const char *p[] = {order_id};
    PGresult *r;
    int rc = sk_pg_run(st, &r, "read order status", "SELECT status FROM orders WHERE order_id = $1",
                       1, p);
    if (rc) return rc;
    if (PQntuples(r) == 1)
        *status = status_at(r, 0, 0);
    else
        rc = sk_store_no_order(st, order_id);
    PQclear(r);
    return rc;
}

/* Runs a conditional UPDATE with ($1 now, $2 order_id): 1 when it changed
 * a row, 0 when none, or a negative code. */
static int update_order(sk_store *st, const char *sql, int64_t now, const char *order_id,
                        const char *what)
{
    struct sk_pg_num t = sk_pg_num_i64(now);
    const char *p[] = {t.s, order_id};
    PGresult *r;
    int rc = sk_pg_run(st, &r, what, sql, 2, p);
    if (rc) return rc;
    long hit = sk_pg_changed(r);
    PQclear(r);
    return hit != 0;
}

/* created -> another status at now, in one statement that decides and
 * reports together. sql locks the order's row first (SELECT ... FOR
 * UPDATE: in READ COMMITTED it waits for a racing transition and then
 * reads the row's newest version), changes it only when that status is
 * created, and returns one row (the locked status, the rows changed) or
 * none when there is no order. *before: created when this call changed it,
 * else the status it found. A miss followed by a second read would not do:
 * an order inserted between the two (the worker persisting it) would read
 * as created although this call changed nothing. */
static int transition(sk_store *st, const char *order_id, const char *sql, int64_t now, int *before)
{
    struct sk_pg_num t = sk_pg_num_i64(now);
    const char *p[] = {t.s, order_id};
    PGresult *r;
    int rc = sk_pg_run(st, &r, "update order status", sql, 2, p);
    if (rc) return rc;
    if (PQntuples(r) != 1) {
        PQclear(r);
        return sk_store_no_order(st, order_id);
    }
    int found = status_at(r, 0, 0);
    long hit = (long)sk_pg_i64(r, 0, 1);
    PQclear(r);
    if (hit == 1 && found == SK_ORDER_CREATED) {
        *before = SK_ORDER_CREATED;
        return 0;
    }
    if (hit != 0 || found == SK_ORDER_CREATED) /* the lock makes this impossible */
        return sk_store_set_err(st, SK_EDB, "postgres %s: order %.80s: inconsistent status change",
                                st->pg_where, order_id);
    *before = found;
    return 0;
}

/* The row lock and the status found, shared by pay and cancel ($2 the
 * order id); cur is read twice, so it is evaluated once. */
#define LOCK_ORDER                                                                                 \
    "WITH cur AS (SELECT order_id, status FROM orders WHERE order_id = $2 FOR UPDATE)"

int sk_pg_order_pay(sk_store *st, const char *order_id, int64_t now_ms, int *before)
{
    int rc = sk_pg_enter(st);
    if (rc) return rc;
    return transition(st, order_id,
                      LOCK_ORDER ", u AS (UPDATE orders o SET status = 'paid', paid_ms = $1"
                                 " FROM cur WHERE o.order_id = cur.order_id"
                                 " AND cur.status = 'created' RETURNING 1)"
                                 " SELECT cur.status, (SELECT count(*) FROM u) FROM cur",
                      now_ms, before);
}

int sk_pg_order_cancel(sk_store *st, const char *order_id, int64_t now_ms, int *before)
{
    int rc = sk_pg_enter(st);
    if (rc) return rc;
    /* One statement: the status change and the DB stock credit (capped at
     * the initial stock) commit together (store.h), so the units go back
     * exactly once, with the winning cancel. */
    return transition(st, order_id,
                      LOCK_ORDER
                      ", c AS (UPDATE orders o SET status = 'cancelled', cancelled_ms = $1"
                      " FROM cur WHERE o.order_id = cur.order_id"
                      " AND cur.status = 'created' RETURNING o.activity_id, o.quantity),"
                      " s AS (UPDATE activities a"
                      " SET stock = LEAST(a.stock_initial, a.stock + c.quantity)"
                      " FROM c WHERE a.id = c.activity_id RETURNING a.id)"
                      " SELECT cur.status, (SELECT count(*) FROM c) FROM cur",
                      now_ms, before);
}

/* Runs sql and reads up to limit orders into out. */
static int read_orders(sk_store *st, const char *sql, int np, const char *const *p, size_t limit,
                       struct sk_order *out, size_t *n)
{
    int rc = sk_pg_enter(st);
    if (rc) return rc;
    PGresult *r;
    if ((rc = sk_pg_run(st, &r, "read orders", sql, np, p)) != 0) return rc;
    for (int i = 0; i < PQntuples(r) && *n < limit; i++)
        sk_pg_read_row(r, i, sk_store_read_order, &out[(*n)++]);
    PQclear(r);
    return 0;
}

static struct sk_pg_num limit_arg(size_t limit)
{
    return sk_pg_num_u64(limit > INT64_MAX ? INT64_MAX : limit);
}

int sk_pg_orders_expired(sk_store *st, int64_t now_ms, size_t limit, struct sk_order *out,
                         size_t *n)
{
    struct sk_pg_num t = sk_pg_num_i64(now_ms), l = limit_arg(limit);
    const char *p[] = {t.s, l.s};
    return read_orders(st,
                       "SELECT " SK_STORE_ORDER_COLUMNS " FROM orders"
                       " WHERE status = 'created' AND pay_deadline_ms < $1"
                       " ORDER BY pay_deadline_ms LIMIT $2",
                       2, p, limit, out, n);
}

int sk_pg_orders_list(sk_store *st, uint64_t activity_id, const char *lo, const char *hi,
                      size_t limit, struct sk_order *out, size_t *n)
{
    /* order_id is COLLATE "C": the range compares bytes, as store.c wants;
     * activity_id + 0: the primary-key range is the plan (on a freshly
     * filled table the planner otherwise takes orders_activity_status and
     * sorts the whole activity for every page) */
    struct sk_pg_num a = sk_pg_num_u64(activity_id), l = limit_arg(limit);
    const char *p[] = {lo, hi, a.s, l.s};
    return read_orders(st,
                       "SELECT " SK_STORE_ORDER_COLUMNS " FROM orders"
                       " WHERE order_id > $1 AND order_id < $2 AND activity_id + 0 = $3"
                       " ORDER BY order_id LIMIT $4",
                       4, p, limit, out, n);
}

int sk_pg_orders_count(sk_store *st, uint64_t activity_id, struct sk_order_counts *out)
{
    int rc = sk_pg_enter(st);
    if (rc) return rc;
    struct sk_pg_num a = sk_pg_num_u64(activity_id);
    const char *p[] = {a.s};
    PGresult *r;
    /* One statement: the status rows, then one 'stock_failures' row. */
    rc = sk_pg_run(st, &r, "count orders",
                   "SELECT status, count(*), coalesce(sum(quantity), 0) FROM orders"
                   " WHERE activity_id = $1 GROUP BY status"
                   " UNION ALL SELECT 'stock_failures', count(*), coalesce(sum(quantity), 0)"
                   " FROM stock_failures WHERE activity_id = $1"
                   " UNION ALL SELECT 'conflicts', count(*), 0 FROM order_conflicts"
                   " WHERE activity_id = $1",
                   1, p);
    if (rc) return rc;
    for (int i = 0; i < PQntuples(r); i++) {
        if (!strcmp(PQgetvalue(r, i, 0), "stock_failures")) {
            out->stock_failures = sk_pg_i64(r, i, 1);
            out->stock_failure_units = sk_pg_i64(r, i, 2);
            continue;
        }
        if (!strcmp(PQgetvalue(r, i, 0), "conflicts")) {
            out->conflicts = sk_pg_i64(r, i, 1);
            continue;
        }
        int k = status_at(r, i, 0);
        if (k < 0) continue; /* the CHECK makes this impossible */
        out->orders[k] = sk_pg_i64(r, i, 1);
        out->units[k] = sk_pg_i64(r, i, 2);
    }
    PQclear(r);
    return 0;
}

/* The audit insert, inside the caller's transaction or alone. */
static int audit_insert(sk_store *st, int64_t at_ms, uint64_t activity_id, const char *kind,
                        const char *detail)
{
    struct sk_pg_num t = sk_pg_num_i64(at_ms), a = sk_pg_num_u64(activity_id);
    const char *p[] = {t.s, a.s, kind, detail};
    return sk_pg_run(st, NULL, "insert audit row",
                     "INSERT INTO audit (at_ms, activity_id, kind, detail) VALUES ($1, $2, $3, $4)",
                     4, p);
}

int sk_pg_audit_add(sk_store *st, int64_t at_ms, uint64_t activity_id, const char *kind,
                    const char *detail)
{
    int rc = sk_pg_enter(st);
    if (rc) return rc;
    char d[SK_STORE_AUDIT_DETAIL_MAX];
    size_t dl = strnlen(detail, SK_STORE_AUDIT_DETAIL_MAX - 1);
    /* Cut on a character boundary: the server refuses broken UTF-8. */
    if (dl == SK_STORE_AUDIT_DETAIL_MAX - 1)
        while (dl > 0 && ((unsigned char)detail[dl] & 0xC0) == 0x80)
            dl--;
    memcpy(d, detail, dl);
    d[dl] = 0;
    return audit_insert(st, at_ms, activity_id, kind, d);
}

int sk_pg_activity_rows(sk_store *st, const struct sk_store_rows *q, uint64_t activity_id,
                        void **out, size_t *n)
{
    int rc = sk_pg_enter(st);
    if (rc) return rc;
    char sql[512];
    snprintf(sql, sizeof sql, "%s WHERE $1::bigint = 0 OR activity_id = $1 ORDER BY %s", q->select,
             q->order_by);
    struct sk_pg_num a = sk_pg_num_u64(activity_id);
    const char *p[] = {a.s};
    return sk_pg_read_all(st, q->what, sql, 1, p, q->size, q->read, out, n);
}

/* ---- payment timeout and reconciliation (store.h, migration 3) ------- */

int sk_pg_order_mark_released(sk_store *st, const char *order_id, int64_t now_ms)
{
    int rc = sk_pg_enter(st);
    if (rc) return rc;
    int hit = update_order(st, SK_STORE_MARK_RELEASED("$1", "$2"), now_ms, order_id,
                           "mark order released");
    return sk_store_release_end(st, hit, order_id, read_status);
}

int sk_pg_orders_unreleased(sk_store *st, const char *after, size_t limit, struct sk_order *out,
                            size_t *n)
{
    struct sk_pg_num l = limit_arg(limit);
    const char *p[] = {after, l.s};
    /* The WHERE repeats the partial index's condition, so the index is used. */
    return read_orders(st,
                       "SELECT " SK_STORE_ORDER_COLUMNS " FROM orders"
                       " WHERE status = 'cancelled' AND released_ms IS NULL"
                       " AND order_id > $1 ORDER BY order_id LIMIT $2",
                       2, p, limit, out, n);
}

/* SK_STORE_STOCK_CHECK of activity id into *out. */
static int stock_check(sk_store *st, uint64_t id, struct sk_store_stock *out)
{
    struct sk_pg_num a = sk_pg_num_u64(id);
    const char *p[] = {a.s};
    PGresult *r;
    int rc = sk_pg_run(st, &r, "check DB stock", SK_STORE_STOCK_CHECK("$1"), 1, p);
    if (rc) return rc;
    if (PQntuples(r) == 1)
        sk_pg_read_row(r, 0, sk_store_read_stock, out);
    else
        rc = sk_store_no_activity(st, id);
    PQclear(r);
    return rc;
}

int sk_pg_db_stock_check(sk_store *st, uint64_t id, struct sk_store_stock *out)
{
    int rc = sk_pg_enter(st);
    return rc ? rc : stock_check(st, id, out);
}

/* The body of the repair transaction (between BEGIN and COMMIT). */
static int stock_repair_tx(sk_store *st, uint64_t id, int64_t now_ms, struct sk_store_stock *s)
{
    struct sk_pg_num a = sk_pg_num_u64(id);
    const char *p[] = {a.s};
    PGresult *r;
    /* The row lock first: a persist or cancel that changes the stock waits
     * for this transaction, and the sum below (a new snapshot, READ
     * COMMITTED) sees every one that committed before. */
    int rc = sk_pg_run(st, &r, "lock activity",
                       "SELECT stock FROM activities WHERE id = $1 FOR UPDATE", 1, p);
    if (rc) return rc;
    int rows = PQntuples(r);
    PQclear(r);
    if (rows != 1) return sk_store_no_activity(st, id);
    char detail[SK_STORE_AUDIT_DETAIL_MAX];
    if ((rc = sk_store_repair_plan(st, id, stock_check, s, detail)) <= 0) return rc;
    struct sk_pg_num e = sk_pg_num_i64(s->expected);
    const char *up[] = {e.s, a.s};
    if ((rc = sk_pg_run(st, NULL, "set DB stock", "UPDATE activities SET stock = $1 WHERE id = $2",
                        2, up)) != 0)
        return rc;
    return audit_insert(st, now_ms, id, "repair_db_stock", detail);
}

int sk_pg_db_stock_repair(sk_store *st, uint64_t id, int64_t now_ms, struct sk_store_stock *out)
{
    int rc = sk_pg_enter(st);
    if (rc) return rc;
    if ((rc = sk_pg_cmd(st, "BEGIN", "begin DB stock repair")) != 0) return rc;
    rc = stock_repair_tx(st, id, now_ms, out);
    return sk_pg_finish_tx(st, rc, "commit DB stock repair");
}

int sk_pg_order_restore(sk_store *st, const struct sk_order *o, int64_t now_ms,
                        const char *audit_detail)
{
    int rc = sk_pg_enter(st);
    if (rc) return rc;
    if ((rc = sk_pg_cmd(st, "BEGIN", "begin order restore")) != 0) return rc;
    int cancelled = o->status == SK_ORDER_CANCELLED;
    struct sk_pg_num a = sk_pg_num_u64(o->activity_id),
                     u = sk_pg_num_i64((int64_t)o->user_id), /* same bits */
        q = sk_pg_num_i64(o->quantity), c = sk_pg_num_i64(o->created_ms), t = sk_pg_num_i64(now_ms);
    const char *p[] = {
        o->order_id,           a.s, u.s, q.s, sk_order_status_name(o->status), c.s, o->stream_id,
        cancelled ? t.s : NULL};
    /* The pay deadline as persist sets it: the activity's timeout, or the
     * default when the activity is not in the DB. */
    rc = sk_pg_run(
        st, NULL, "restore order",
        "INSERT INTO orders (order_id, activity_id, user_id, quantity, status, created_ms,"
        " pay_deadline_ms, stream_id, cancelled_ms, released_ms)"
        " VALUES ($1, $2::bigint, $3, $4, $5, $6::bigint, $6::bigint + 1000 * coalesce("
        "(SELECT pay_timeout_s FROM activities WHERE id = "
        "$2::bigint), " SK_STORE_PAY_TIMEOUT_DEFAULT_SQL "), $7, $8::bigint, $8::bigint)",
        8, p);
    if (rc == SK_EEXIST) sk_store_set_err(st, rc, "order %s already exists", o->order_id);
    if (rc == 0)
        rc = audit_insert(st, now_ms, o->activity_id, "repair_restore_order", audit_detail);
    return sk_pg_finish_tx(st, rc, "commit order restore");
}
