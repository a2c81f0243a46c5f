/* store_sqlite_orders.c - the orders of the SQLite backend once persisted
 * (store_sqlite_int.h): reading them, the status changes (pay, cancel) and
 * the release marks, the counts, the audit rows, the rollback guard's
 * marks, and the reconcile's DB stock check, repair and order restore.
 * Every change is one IMMEDIATE transaction: no writer comes between its
 * read and its write. */
#include "store/store_sqlite_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "core/error.h"

/* The status column of row s as enum sk_order_status (-1: another text). */
static int status_at(sqlite3_stmt *s, int col)
{
    return sk_store_status_from_text((const char *)sqlite3_column_text(s, col));
}

/* A row of one status column into the int at dst, as status_at. */
static void read_status_row(const struct sk_store_row *r, void *dst)
{
    *(int *)dst = status_at((sqlite3_stmt *)r->aux, 0);
}

int sk_sq_order_get(sk_store *st, const char *order_id, struct sk_order *out)
{
    int rc = sk_sq_read_one(st, Q_ORDER_GET, "read order", order_id, 0, sk_store_read_order, out);
    return rc == 0 ? sk_store_no_order(st, order_id) : rc < 0 ? rc : 0;
}

/* The status of an order into *status; SK_ENOTFOUND when absent. */
static int read_status(sk_store *st, const char *order_id, int *status)
{
    const struct sk_sq_arg a[] = {{.text = order_id}};
    int rc = sk_sq_query_one(st, "SELECT status FROM orders WHERE order_id = ?", a, 1,
                             "read order status", read_status_row, status);
    return rc == 0 ? sk_store_no_order(st, order_id) : rc < 0 ? rc : 0;
}

/* Runs a conditional UPDATE bound to (now, order_id): 1 when it changed
 * one row, 0 when none, or a negative code. */
static int update_order(sk_store *st, const char *sql, int64_t now, const char *order_id,
                        const char *what)
{
    const struct sk_sq_arg a[] = {{.num = now}, {.text = order_id}};
    int rc = sk_sq_run(st, sql, a, 2, what);
    return rc ? rc : sqlite3_changes(st->db) == 1;
}

/* created -> to_status at now; *before is the status the order had (the
 * conditional update decides, so of two racing transitions one wins). The
 * caller holds the write lock (BEGIN IMMEDIATE) from before the update to
 * after the read of a miss, so no writer (the worker inserting the order)
 * comes in between: a miss read as created would report a change that did
 * not happen. */
static int transition(sk_store *st, const char *order_id, const char *sql, int64_t now, int *before)
{
    int hit = update_order(st, sql, now, order_id, "update order status");
    return sk_store_transition_end(st, hit, order_id, before, read_status);
}

/* Gives the units of a cancelled order back to its activity's DB stock,
 * capped at the initial stock (an activity row that is gone: nothing). */
static int credit_stock(sk_store *st, const char *order_id)
{
    const struct sk_sq_arg a[] = {{.text = order_id}};
    return sk_sq_run(st,
                     "UPDATE activities SET stock = min(stock_initial, stock +"
                     " (SELECT quantity FROM orders WHERE order_id = ?1))"
                     " WHERE id = (SELECT activity_id FROM orders WHERE order_id = ?1)",
                     a, 1, "give back DB stock");
}

/* A status change of a created order (pay, cancel: sql) in its own
 * IMMEDIATE transaction; with credit, the winning change gives the units
 * back to the DB stock in the same transaction (store.h), so they go back
 * exactly once. */
static int status_tx(sk_store *st, const char *order_id, const char *sql, int64_t now, int *before,
                     int credit)
{
    int rc = sk_sq_exec(st, "BEGIN IMMEDIATE", "begin order status change");
    if (rc) return rc;
    rc = transition(st, order_id, sql, now, before);
    if (rc == 0 && credit && *before == SK_ORDER_CREATED) rc = credit_stock(st, order_id);
    return sk_sq_finish_tx(st, rc, "commit order status change");
}

int sk_sq_order_pay(sk_store *st, const char *order_id, int64_t now_ms, int *before)
{
    return status_tx(st, order_id,
                     "UPDATE orders SET status = 'paid', paid_ms = ?"
                     " WHERE order_id = ? AND status = 'created'",
                     now_ms, before, 0);
}

int sk_sq_order_cancel(sk_store *st, const char *order_id, int64_t now_ms, int *before)
{
    return status_tx(st, order_id,
                     "UPDATE orders SET status = 'cancelled', cancelled_ms = ?"
                     " WHERE order_id = ? AND status = 'created'",
                     now_ms, before, 1);
}

/* Reads up to limit orders into out: the orders matching where (a WHERE
 * condition and its ORDER BY) with its parameters args[0..nargs). */
static int read_orders(sk_store *st, const char *where, const struct sk_sq_arg *args, int nargs,
                       size_t limit, struct sk_order *out, size_t *n)
{
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT " SK_STORE_ORDER_COLUMNS " FROM orders WHERE %s LIMIT ?",
             where);
    sqlite3_stmt *s;
    *n = 0;
    int step = SQLITE_DONE, rc = sk_sq_prepare_args(st, &s, sql, args, nargs);
    if (rc) return rc;
    sqlite3_bind_int64(s, nargs + 1, (sqlite3_int64)(limit > INT64_MAX ? INT64_MAX : limit));
    while (*n < limit && (step = sqlite3_step(s)) == SQLITE_ROW)
        sk_sq_read_row(s, sk_store_read_order, &out[(*n)++]);
    if (*n < limit && step != SQLITE_DONE) rc = sk_sq_err(st, "read orders");
    sqlite3_finalize(s);
    return rc;
}

int sk_sq_orders_expired(sk_store *st, int64_t now_ms, size_t limit, struct sk_order *out,
                         size_t *n)
{
    const struct sk_sq_arg a[] = {{.num = now_ms}};
    return read_orders(st, "status = 'created' AND pay_deadline_ms < ? ORDER BY pay_deadline_ms", a,
                       1, limit, out, n);
}

int sk_sq_orders_list(sk_store *st, uint64_t activity_id, const char *lo, const char *hi,
                      size_t limit, struct sk_order *out, size_t *n)
{
    const struct sk_sq_arg a[] = {{.text = lo}, {.text = hi}, {.num = (int64_t)activity_id}};
    /* +activity_id: the primary-key range is the plan; left to itself the
     * planner picks orders_activity_status and sorts every row of the
     * activity for each page (quadratic over a paged read of 100,000) */
    return read_orders(st, "order_id > ? AND order_id < ? AND +activity_id = ? ORDER BY order_id",
                       a, 3, limit, out, n);
}

int sk_sq_orders_count(sk_store *st, uint64_t activity_id, struct sk_order_counts *out)
{
    sqlite3_stmt *s;
    int rc = sk_sq_prepare(st, &s,
                           "SELECT status, count(*), coalesce(sum(quantity), 0) FROM orders"
                           " WHERE activity_id = ? GROUP BY status");
    if (rc) return rc;
    sqlite3_bind_int64(s, 1, (sqlite3_int64)activity_id);
    int step;
    while ((step = sqlite3_step(s)) == SQLITE_ROW) {
        int k = status_at(s, 0);
        if (k < 0) continue; /* the CHECK makes this impossible */
        out->orders[k] = sqlite3_column_int64(s, 1);
        out->units[k] = sqlite3_column_int64(s, 2);
    }
    if (step != SQLITE_DONE) rc = sk_sq_err(st, "count orders");
    sqlite3_finalize(s);
    if (rc) return rc;
    if ((rc = sk_sq_prepare(st, &s,
                            "SELECT count(*), coalesce(sum(quantity), 0) FROM stock_failures"
                            " WHERE activity_id = ?")) != 0)
        return rc;
    sqlite3_bind_int64(s, 1, (sqlite3_int64)activity_id);
    if (sqlite3_step(s) == SQLITE_ROW) {
        out->stock_failures = sqlite3_column_int64(s, 0);
        out->stock_failure_units = sqlite3_column_int64(s, 1);
    } else {
        rc = sk_sq_err(st, "count stock failures");
    }
    sqlite3_finalize(s);
    if (rc) return rc;
    if ((rc = sk_sq_prepare(st, &s,
                            "SELECT count(*) FROM order_conflicts WHERE activity_id = ?")) != 0)
        return rc;
    sqlite3_bind_int64(s, 1, (sqlite3_int64)activity_id);
    if (sqlite3_step(s) == SQLITE_ROW)
        out->conflicts = sqlite3_column_int64(s, 0);
    else
        rc = sk_sq_err(st, "count order conflicts");
    sqlite3_finalize(s);
    return rc;
}

int sk_sq_audit_add(sk_store *st, int64_t at_ms, uint64_t activity_id, const char *kind,
                    const char *detail)
{
    sqlite3_stmt *s;
    int rc = sk_sq_prepare(
        st, &s, "INSERT INTO audit (at_ms, activity_id, kind, detail) VALUES (?, ?, ?, ?)");
    if (rc) return rc;
    size_t dl = strnlen(detail, SK_STORE_AUDIT_DETAIL_MAX - 1);
    sqlite3_bind_int64(s, 1, at_ms);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)activity_id);
    sqlite3_bind_text(s, 3, kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, detail, (int)dl, SQLITE_STATIC);
    if (sqlite3_step(s) != SQLITE_DONE) rc = sk_sq_err(st, "insert audit row");
    sqlite3_finalize(s);
    return rc;
}

int sk_sq_activity_rows(sk_store *st, const struct sk_store_rows *q, uint64_t activity_id,
                        void **out, size_t *n)
{
    char sql[512];
    snprintf(sql, sizeof sql, "%s WHERE ?1 = 0 OR activity_id = ?1 ORDER BY %s", q->select,
             q->order_by);
    sqlite3_stmt *s;
    int rc = sk_sq_prepare(st, &s, sql);
    if (rc) return rc;
    sqlite3_bind_int64(s, 1, (sqlite3_int64)activity_id);
    return sk_sq_read_all(st, s, q->what, q->size, q->read, out, n);
}

int sk_sq_order_mark_released(sk_store *st, const char *order_id, int64_t now_ms)
{
    int hit =
        update_order(st, SK_STORE_MARK_RELEASED("?", "?"), now_ms, order_id, "mark order released");
    return sk_store_release_end(st, hit, order_id, read_status);
}

int sk_sq_orders_unreleased(sk_store *st, const char *after, size_t limit, struct sk_order *out,
                            size_t *n)
{
    const struct sk_sq_arg a[] = {{.text = after}};
    /* The WHERE repeats the partial index's condition, so the index is used. */
    return read_orders(st,
                       "status = 'cancelled' AND released_ms IS NULL AND order_id > ?"
                       " ORDER BY order_id",
                       a, 1, limit, out, n);
}

/* SK_STORE_STOCK_CHECK of activity id into *out (also the repair's read). */
int sk_sq_db_stock_check(sk_store *st, uint64_t id, struct sk_store_stock *out)
{
    const struct sk_sq_arg a[] = {{.num = (int64_t)id}};
    int rc = sk_sq_query_one(st, SK_STORE_STOCK_CHECK("?"), a, 1, "check DB stock",
                             sk_store_read_stock, out);
    return rc == 0 ? sk_store_no_activity(st, id) : rc < 0 ? rc : 0;
}

/* The body of the repair transaction (between BEGIN and COMMIT). */
static int stock_repair_tx(sk_store *st, uint64_t id, int64_t now_ms, struct sk_store_stock *s)
{
    char detail[SK_STORE_AUDIT_DETAIL_MAX];
    int rc = sk_store_repair_plan(st, id, sk_sq_db_stock_check, s, detail);
    if (rc <= 0) return rc;
    const struct sk_sq_arg a[] = {{.num = s->expected}, {.num = (int64_t)id}};
    if ((rc = sk_sq_run(st, "UPDATE activities SET stock = ? WHERE id = ?", a, 2,
                        "set DB stock")) != 0)
        return rc;
    return sk_sq_audit_add(st, now_ms, id, "repair_db_stock", detail);
}

int sk_sq_db_stock_repair(sk_store *st, uint64_t id, int64_t now_ms, struct sk_store_stock *out)
{
    /* IMMEDIATE: no persist or cancel can commit between the read of the
     * orders and the write of the stock. */
    int rc = sk_sq_exec(st, "BEGIN IMMEDIATE", "begin DB stock repair");
    if (rc) return rc;
    rc = stock_repair_tx(st, id, now_ms, out);
    return sk_sq_finish_tx(st, rc, "commit DB stock repair");
}

/* Inserts the restored order (the body of the restore transaction). */
static int restore_insert(sk_store *st, const struct sk_order *o, int64_t now_ms)
{
    int64_t timeout_s = 0;
    int found;
    int rc = sk_sq_pay_timeout(st, o->activity_id, &timeout_s, &found);
    sqlite3_stmt *s = NULL;
    if (rc == 0)
        rc = sk_sq_prepare(st, &s,
                           "INSERT INTO orders (order_id, activity_id, user_id, quantity, status,"
                           " created_ms, pay_deadline_ms, stream_id, cancelled_ms, released_ms)"
                           " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    if (rc) return rc;
    sqlite3_bind_text(s, 1, o->order_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)o->activity_id);
    sqlite3_bind_int64(s, 3, (sqlite3_int64)o->user_id); /* same bits, see store.h */
    sqlite3_bind_int64(s, 4, o->quantity);
    sqlite3_bind_text(s, 5, sk_order_status_name(o->status), -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 6, o->created_ms);
    sqlite3_bind_int64(s, 7, o->created_ms + timeout_s * 1000);
    sqlite3_bind_text(s, 8, o->stream_id, -1, SQLITE_STATIC);
    if (o->status == SK_ORDER_CANCELLED) {
        sqlite3_bind_int64(s, 9, now_ms);
        sqlite3_bind_int64(s, 10, now_ms);
    } else {
        sqlite3_bind_null(s, 9);
        sqlite3_bind_null(s, 10);
    }
    if (sqlite3_step(s) != SQLITE_DONE) {
        rc = sk_sq_err(st, "restore order");
        if (rc == SK_EEXIST) sk_store_set_err(st, rc, "order %s already exists", o->order_id);
    }
    sqlite3_finalize(s);
    return rc;
}

int sk_sq_order_restore(sk_store *st, const struct sk_order *o, int64_t now_ms,
                        const char *audit_detail)
{
    int rc = sk_sq_exec(st, "BEGIN IMMEDIATE", "begin order restore");
    if (rc) return rc;
    rc = restore_insert(st, o, now_ms);
    if (rc == 0)
        rc = sk_sq_audit_add(st, now_ms, o->activity_id, "repair_restore_order", audit_detail);
    return sk_sq_finish_tx(st, rc, "commit order restore");
}
