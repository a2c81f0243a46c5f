/* store_mysql_orders.c - orders once persisted, audit rows, the rollback
 * guard's marks and the reconcile repairs of the MySQL / MariaDB backend
 * (store.h, store_mysql_int.h). Same meaning as store_pg_orders.c, step
 * for step.
 *
 * Status changes (pay, cancel): one transaction that locks the order's
 * row with SELECT ... FOR UPDATE (it waits for a racing change or for the
 * persist inserting the row, then reads its newest committed version),
 * decides on that status, and updates the order (and, for a cancel, gives
 * the units back to the DB stock) before COMMIT: MariaDB has no
 * data-modifying CTE and no UPDATE ... RETURNING. */
#include "store/store_mysql_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"

/* ---- rows ---- */

/* Runs b and reads up to limit orders into out (*n of them). */
static int read_orders(sk_store *st, struct sk_my_sql *b, size_t limit, struct sk_order *out,
                       size_t *n)
{
    MYSQL_RES *r;
    int rc = sk_my_run_sql(st, "read orders", b, &r, NULL, 0);
    sk_my_sql_free(b);
    if (rc) return rc;
    for (MYSQL_ROW row; r && *n < limit && (row = mysql_fetch_row(r)) != NULL;)
        sk_my_read_row(r, row, sk_store_read_order, &out[(*n)++]);
    if (r) mysql_free_result(r);
    return 0;
}

/* An id that cannot be in the table: longer than any stored one. */
static int id_too_long(const char *order_id)
{
    return strnlen(order_id, SK_STORE_ORDER_ID_MAX) >= SK_STORE_ORDER_ID_MAX;
}

/* ---- reads and status changes ---- */

int sk_my_order_get(sk_store *st, const char *order_id, struct sk_order *out)
{
    int rc = sk_my_enter(st);
    if (rc) return rc;
    if (id_too_long(order_id)) return sk_store_no_order(st, order_id);
    struct sk_my_sql b = {0};
    sk_my_sql_add(&b, "SELECT " SK_STORE_ORDER_COLUMNS " FROM orders WHERE order_id = ");
    sk_my_sql_strz(st, &b, order_id);
    size_t n = 0;
    if ((rc = read_orders(st, &b, 1, out, &n)) != 0) return rc;
    return n == 1 ? 0 : sk_store_no_order(st, order_id);
}

/* The status of an order into *status; SK_ENOTFOUND when absent. */
static int read_status(sk_store *st, const char *order_id, int *status)
{
    struct sk_order o;
    int rc = sk_my_order_get(st, order_id, &o);
    if (rc == 0) *status = o.status;
    return rc;
}

/* created -> paid or cancelled at now, in one transaction: the row lock
 * first (FOR UPDATE: it waits for a racing change, or for the insert of
 * the row, and then reads the newest committed version), the decision on
 * the status it read, the update, COMMIT. *before: created when this call
 * changed it, else the status it found. A miss followed by a second read
 * would not do: an order inserted between the two (the worker persisting
 * it) would read as created although this call changed nothing. */
static int transition(sk_store *st, const char *order_id, int64_t now, int cancel, int *before)
{
    int rc = sk_my_enter(st);
    if (rc) return rc;
    if (id_too_long(order_id)) return sk_store_no_order(st, order_id);
    struct sk_my_sql b = {0};
    sk_my_sql_add(&b, "START TRANSACTION; SELECT status, activity_id, quantity FROM orders"
                      " WHERE order_id = ");
    sk_my_sql_strz(st, &b, order_id);
    sk_my_sql_add(&b, " FOR UPDATE");
    MYSQL_RES *r;
    rc = sk_my_run_sql(st, "lock order", &b, &r, NULL, 0);
    sk_my_sql_free(&b);
    if (rc) return sk_my_finish_tx(st, rc, "rollback");
    MYSQL_ROW row = r ? mysql_fetch_row(r) : NULL;
    int found = row ? sk_store_status_from_text(row[0]) : -1;
    uint64_t aid = row ? (uint64_t)sk_my_i64(row, 1) : 0;
    int64_t qty = row ? sk_my_i64(row, 2) : 0;
    if (r) mysql_free_result(r);
    if (!row) return sk_my_finish_tx(st, sk_store_no_order(st, order_id), "rollback");
    if (found != SK_ORDER_CREATED) {
        *before = found;
        return sk_my_finish_tx(st, 0, "commit order status");
    }
    sk_my_sql_addf(&b, "UPDATE orders SET status = '%s', %s = %" PRId64 " WHERE order_id = ",
                   cancel ? "cancelled" : "paid", cancel ? "cancelled_ms" : "paid_ms", now);
    sk_my_sql_strz(st, &b, order_id);
    /* The cancel's DB stock credit (capped at the initial stock) commits
     * with the status change, so the units go back exactly once, with the
     * winning cancel. */
    if (cancel)
        sk_my_sql_addf(&b,
                       "; UPDATE activities SET stock = LEAST(stock_initial, stock + %" PRId64
                       ") WHERE id = %" PRIu64,
                       qty, aid);
    sk_my_sql_add(&b, "; COMMIT");
    rc = sk_my_run_sql(st, "update order status", &b, NULL, NULL, 0);
    sk_my_sql_free(&b);
    if (rc) return sk_my_finish_tx(st, rc, "rollback");
    *before = SK_ORDER_CREATED;
    return 0;
}

int sk_my_order_pay(sk_store *st, const char *order_id, int64_t now_ms, int *before)
{
    return transition(st, order_id, now_ms, 0, before);
}

int sk_my_order_cancel(sk_store *st, const char *order_id, int64_t now_ms, int *before)
{
    return transition(st, order_id, now_ms, 1, before);
}

static size_t limit_arg(size_t limit)
{
    return limit > INT64_MAX ? INT64_MAX : limit;
}

int sk_my_orders_expired(sk_store *st, int64_t now_ms, size_t limit, struct sk_order *out,
                         size_t *n)
{
    int rc = sk_my_enter(st);
    if (rc) return rc;
    struct sk_my_sql b = {0};
    sk_my_sql_addf(&b,
                   "SELECT " SK_STORE_ORDER_COLUMNS " FROM orders"
                   " WHERE status = 'created' AND pay_deadline_ms < %" PRId64
                   " ORDER BY pay_deadline_ms LIMIT %zu",
                   now_ms, limit_arg(limit));
    return read_orders(st, &b, limit, out, n);
}

int sk_my_orders_list(sk_store *st, uint64_t activity_id, const char *lo, const char *hi,
                      size_t limit, struct sk_order *out, size_t *n)
{
    int rc = sk_my_enter(st);
    if (rc) return rc;
    /* order_id is VARBINARY: the range compares bytes, as store.c wants;
     * the primary-key range is the plan (not orders_activity_status and a
     * sort of the whole activity for every page) */
    struct sk_my_sql b = {0};
    sk_my_sql_add(&b, "SELECT " SK_STORE_ORDER_COLUMNS " FROM orders FORCE INDEX (PRIMARY)"
                      " WHERE order_id > ");
    sk_my_sql_strz(st, &b, lo);
    sk_my_sql_add(&b, " AND order_id < ");
    sk_my_sql_strz(st, &b, hi);
    sk_my_sql_addf(&b, " AND activity_id = %" PRIu64 " ORDER BY order_id LIMIT %zu", activity_id,
                   limit_arg(limit));
    return read_orders(st, &b, limit, out, n);
}

int sk_my_orders_count(sk_store *st, uint64_t activity_id, struct sk_order_counts *out)
{
    int rc = sk_my_enter(st);
    if (rc) return rc;
    struct sk_my_sql b = {0};
    /* One statement: the status rows, then one 'stock_failures' row and
     * one 'conflicts' row. */
    sk_my_sql_addf(&b,
                   "SELECT status, count(*), COALESCE(SUM(quantity), 0) FROM orders"
                   " WHERE activity_id = %" PRIu64 " GROUP BY status"
                   " UNION ALL SELECT 'stock_failures', count(*), COALESCE(SUM(quantity), 0)"
                   " FROM stock_failures WHERE activity_id = %" PRIu64
                   " UNION ALL SELECT 'conflicts', count(*), 0"
                   " FROM order_conflicts WHERE activity_id = %" PRIu64,
                   activity_id, activity_id, activity_id);
    MYSQL_RES *r;
    rc = sk_my_run_sql(st, "count orders", &b, &r, NULL, 0);
    sk_my_sql_free(&b);
    if (rc) return rc;
    for (MYSQL_ROW row; r && (row = mysql_fetch_row(r)) != NULL;) {
        if (row[0] && !strcmp(row[0], "stock_failures")) {
            out->stock_failures = sk_my_i64(row, 1);
            out->stock_failure_units = sk_my_i64(row, 2);
            continue;
        }
        if (row[0] && !strcmp(row[0], "conflicts")) {
            out->conflicts = sk_my_i64(row, 1);
            continue;
        }
        int k = sk_store_status_from_text(row[0]);
        if (k < 0) continue; /* the CHECK makes this impossible */
        out->orders[k] = sk_my_i64(row, 1);
        out->units[k] = sk_my_i64(row, 2);
    }
    if (r) mysql_free_result(r);
    return 0;
}

/* ---- audit and marks ---- */

/* The audit insert appended to b (inside the caller's transaction or
 * alone); detail cut to the column's size on a character boundary (the
 * server refuses broken UTF-8). */
static void add_audit(sk_store *st, struct sk_my_sql *b, int64_t at_ms, uint64_t activity_id,
                      const char *kind, const char *detail)
{
    size_t dl = strnlen(detail, SK_STORE_AUDIT_DETAIL_MAX - 1);
    if (dl == SK_STORE_AUDIT_DETAIL_MAX - 1)
        while (dl > 0 && ((unsigned char)detail[dl] & 0xC0) == 0x80)
            dl--;
    sk_my_sql_addf(b,
                   "INSERT INTO audit (at_ms, activity_id, kind, detail) VALUES (%" PRId64
                   ", %" PRIu64 ", ",
                   at_ms, activity_id);
    sk_my_sql_str(st, b, kind, strlen(kind));
    sk_my_sql_add(b, ", ");
    sk_my_sql_str(st, b, detail, dl);
    sk_my_sql_add(b, ")");
}

int sk_my_audit_add(sk_store *st, int64_t at_ms, uint64_t activity_id, const char *kind,
                    const char *detail)
{
    int rc = sk_my_enter(st);
    if (rc) return rc;
    struct sk_my_sql b = {0};
    add_audit(st, &b, at_ms, activity_id, kind, detail);
    rc = sk_my_run_sql(st, "insert audit row", &b, NULL, NULL, 0);
    sk_my_sql_free(&b);
    return rc;
}

/* Runs b and returns its result rows (*rows of them) in *r. */
static int read_rows(sk_store *st, const char *what, struct sk_my_sql *b, MYSQL_RES **r,
                     size_t *rows)
{
    int rc = sk_my_query(st, what, b, r);
    *rows = rc == 0 && *r ? (size_t)mysql_num_rows(*r) : 0;
    return rc;
}

int sk_my_activity_rows(sk_store *st, const struct sk_store_rows *q, uint64_t activity_id,
                        void **out, size_t *n)
{
    int rc = sk_my_enter(st);
    if (rc) return rc;
    struct sk_my_sql b = {0};
    sk_my_sql_add(&b, q->select);
    if (activity_id) sk_my_sql_addf(&b, " WHERE activity_id = %" PRIu64, activity_id);
    sk_my_sql_addf(&b, " ORDER BY %s", q->order_by);
    return sk_my_read_all(st, q->what, &b, q->size, q->read, out, n);
}

/* ---- payment timeout and reconciliation (store.h, migration 3) ------- */

int sk_my_order_mark_released(sk_store *st, const char *order_id, int64_t now_ms)
{
    int rc = sk_my_enter(st);
    if (rc) return rc;
    if (id_too_long(order_id)) return sk_store_no_order(st, order_id);
    struct sk_my_sql b = {0};
    sk_my_sql_addf(&b, "UPDATE orders SET released_ms = %" PRId64 " WHERE order_id = ", now_ms);
    sk_my_sql_strz(st, &b, order_id);
    sk_my_sql_add(&b, " AND status = 'cancelled' AND released_ms IS NULL");
    long long hit = 0;
    rc = sk_my_run_sql(st, "mark order released", &b, NULL, &hit, 1);
    sk_my_sql_free(&b);
    return sk_store_release_end(st, rc ? rc : hit != 0, order_id, read_status);
}

int sk_my_orders_unreleased(sk_store *st, const char *after, size_t limit, struct sk_order *out,
                            size_t *n)
{
    int rc = sk_my_enter(st);
    if (rc) return rc;
    /* release_due is NULL but for the orders owing a release: the range
     * on its index skips every other order */
    struct sk_my_sql b = {0};
    sk_my_sql_add(&b, "SELECT " SK_STORE_ORDER_COLUMNS " FROM orders WHERE release_due > ");
    sk_my_sql_strz(st, &b, after);
    sk_my_sql_addf(&b, " ORDER BY release_due LIMIT %zu", limit_arg(limit));
    return read_orders(st, &b, limit, out, n);
}

/* SK_STORE_STOCK_CHECK of activity id into *out. */
static int stock_check(sk_store *st, uint64_t id, struct sk_store_stock *out)
{
    struct sk_my_sql b = {0};
    sk_my_sql_addf(&b, SK_STORE_STOCK_CHECK("%" PRIu64), id);
    MYSQL_RES *r;
    size_t rows;
    int rc = read_rows(st, "check DB stock", &b, &r, &rows);
    if (rc) return rc;
    MYSQL_ROW row = rows == 1 ? mysql_fetch_row(r) : NULL;
    if (row)
        sk_my_read_row(r, row, sk_store_read_stock, out);
    else
        rc = sk_store_no_activity(st, id);
    if (r) mysql_free_result(r);
    return rc;
}

int sk_my_db_stock_check(sk_store *st, uint64_t id, struct sk_store_stock *out)
{
    int rc = sk_my_enter(st);
    return rc ? rc : stock_check(st, id, out);
}

/* The body of the repair transaction (after its START TRANSACTION). */
static int stock_repair_tx(sk_store *st, uint64_t id, int64_t now_ms, struct sk_store_stock *s)
{
    /* The row lock first: a persist or cancel that changes the stock waits
     * for this transaction, and the sum below (a statement of its own:
     * READ COMMITTED reads the newest committed rows) sees every one that
     * committed before. */
    struct sk_my_sql b = {0};
    sk_my_sql_addf(
        &b, "START TRANSACTION; SELECT stock FROM activities WHERE id = %" PRIu64 " FOR UPDATE",
        id);
    MYSQL_RES *r;
    size_t rows;
    int rc = read_rows(st, "lock activity", &b, &r, &rows);
    if (r) mysql_free_result(r);
    if (rc) return rc;
    if (rows != 1) return sk_store_no_activity(st, id);
    char detail[SK_STORE_AUDIT_DETAIL_MAX];
    if ((rc = sk_store_repair_plan(st, id, stock_check, s, detail)) <= 0) return rc;
    sk_my_sql_addf(&b, "UPDATE activities SET stock = %" PRId64 " WHERE id = %" PRIu64 "; ",
                   s->expected, id);
    add_audit(st, &b, now_ms, id, "repair_db_stock", detail);
    rc = sk_my_run_sql(st, "set DB stock", &b, NULL, NULL, 0);
    sk_my_sql_free(&b);
    return rc;
}

int sk_my_db_stock_repair(sk_store *st, uint64_t id, int64_t now_ms, struct sk_store_stock *out)
{
    int rc = sk_my_enter(st);
    if (rc) return rc;
    rc = stock_repair_tx(st, id, now_ms, out);
    return sk_my_finish_tx(st, rc, "commit DB stock repair");
}

int sk_my_order_restore(sk_store *st, const struct sk_order *o, int64_t now_ms,
                        const char *audit_detail)
{
    int rc = sk_my_enter(st);
    if (rc) return rc;
    int cancelled = o->status == SK_ORDER_CANCELLED;
    char t[24];
    snprintf(t, sizeof t, "%" PRId64, now_ms);
    /* The pay deadline as persist sets it: the activity's timeout, or the
     * default when the activity is not in the DB. One round trip: a
     * failing INSERT stops the rest, and the transaction is rolled back. */
    struct sk_my_sql b = {0};
    sk_my_sql_add(&b, "START TRANSACTION; INSERT INTO orders (order_id, activity_id, user_id,"
                      " quantity, status, created_ms, pay_deadline_ms, stream_id, cancelled_ms,"
                      " released_ms) VALUES (");
    sk_my_sql_strz(st, &b, o->order_id);
    sk_my_sql_addf(&b,
                   ", %" PRIu64 ", %" PRId64 ", %" PRId64 ", '%s', %" PRId64 ", %" PRId64
                   " + 1000 * COALESCE((SELECT pay_timeout_s FROM activities WHERE id = %" PRIu64
                   "), " SK_STORE_PAY_TIMEOUT_DEFAULT_SQL "), ",
                   o->activity_id, (int64_t)o->user_id /* same bits */, o->quantity,
                   sk_order_status_name(o->status), o->created_ms, o->created_ms, o->activity_id);
    sk_my_sql_strz(st, &b, o->stream_id);
    sk_my_sql_addf(&b, ", %s, %s); ", cancelled ? t : "NULL", cancelled ? t : "NULL");
    add_audit(st, &b, now_ms, o->activity_id, "repair_restore_order", audit_detail);
    sk_my_sql_add(&b, "; COMMIT");
    rc = sk_my_run_sql(st, "restore order", &b, NULL, NULL, 0);
    sk_my_sql_free(&b);
    if (rc == SK_EEXIST) sk_store_set_err(st, rc, "order %s already exists", o->order_id);
    return rc ? sk_my_finish_tx(st, rc, "rollback") : 0;
}
