/* store_sqlite_persist.c - persisting a batch of orders in SQLite
 * (store.h sk_store_orders_persist, store_sqlite_int.h): one IMMEDIATE
 * transaction, order by order with the statements kept prepared: the
 * insert (ON CONFLICT DO NOTHING: a re-delivered id is skipped), the
 * conditional stock update (stock >= quantity), a failed one recorded with
 * the DB stock seen then; an id present already is a re-delivery or a
 * conflict (store.h); then the marks of the batch's key sets. */
#include "store/store_sqlite_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "core/clock.h"
#include "core/error.h"

/* Records a failed conditional stock update of an inserted order: the DB
 * stock seen now (NULL when there is no activity row) goes with it. */
static int record_stock_failure(sk_store *st, const struct sk_order *o, int64_t now,
                                struct sk_persist_result *res, struct sk_stock_failure *first)
{
    sqlite3_stmt *s;
    int rc = sk_sq_cached(st, Q_READ_STOCK, &s);
    if (rc) return rc;
    sqlite3_bind_int64(s, 1, (sqlite3_int64)o->activity_id);
    int step = sqlite3_step(s);
    int has_row = step == SQLITE_ROW;
    int64_t db_stock = has_row ? sqlite3_column_int64(s, 0) : 0;
    if (step != SQLITE_ROW && step != SQLITE_DONE) rc = sk_sq_err(st, "read stock");
    sqlite3_reset(s);
    if (rc) return rc;
    sk_store_count_stock_failure(res, first, o, has_row, db_stock);
    if ((rc = sk_sq_cached(st, Q_INSERT_FAILURE, &s)) != 0) return rc;
    sqlite3_bind_int64(s, 1, now);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)o->activity_id);
    sqlite3_bind_text(s, 3, o->order_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 4, o->quantity);
    if (has_row)
        sqlite3_bind_int64(s, 5, db_stock);
    else
        sqlite3_bind_null(s, 5);
    if (sqlite3_step(s) != SQLITE_DONE) rc = sk_sq_err(st, "record stock failure");
    sqlite3_reset(s);
    return rc;
}

/* An order id that is present already: a re-delivery (its stock was taken
 * the first time), or a conflict, recorded (store.h). */
static int present(sk_store *st, const struct sk_order *o, int64_t now,
                   struct sk_persist_result *res)
{
    sqlite3_stmt *s;
    int rc = sk_sq_cached(st, Q_READ_HOLDER, &s);
    if (rc) return rc;
    sqlite3_bind_text(s, 1, o->order_id, -1, SQLITE_STATIC);
    int step = sqlite3_step(s), conflict = 0;
    if (step == SQLITE_ROW)
        conflict =
            sk_store_is_conflict(o, (uint64_t)sqlite3_column_int64(s, 0),
                                 (uint64_t)sqlite3_column_int64(s, 1), sqlite3_column_int64(s, 2));
    else
        rc = sk_sq_err(st, "read present order");
    sqlite3_reset(s);
    if (rc) return rc;
    if (!conflict) {
        res->duplicates++;
        return 0;
    }
    res->conflicts++;
    if ((rc = sk_sq_prepare(st, &s,
                            "INSERT INTO order_conflicts (at_ms, activity_id, order_id, user_id,"
                            " quantity, stream_id) VALUES (?, ?, ?, ?, ?, ?)")) != 0)
        return rc;
    sqlite3_bind_int64(s, 1, now);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)o->activity_id);
    sqlite3_bind_text(s, 3, o->order_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 4, (sqlite3_int64)o->user_id);
    sqlite3_bind_int64(s, 5, o->quantity);
    sqlite3_bind_text(s, 6, o->stream_id, -1, SQLITE_STATIC);
    if (sqlite3_step(s) != SQLITE_DONE) rc = sk_sq_err(st, "record order conflict");
    sqlite3_finalize(s);
    return rc;
}

/* Inserts one order and takes its stock; updates *res. */
static int persist_one(sk_store *st, const struct sk_order *o, int64_t timeout_s, int64_t now,
                       struct sk_persist_result *res, struct sk_stock_failure *first)
{
    sqlite3_stmt *s;
    int rc = sk_sq_cached(st, Q_INSERT_ORDER, &s);
    if (rc) return rc;
    sqlite3_bind_text(s, 1, o->order_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)o->activity_id);
    sqlite3_bind_int64(s, 3, (sqlite3_int64)o->user_id); /* same bits, see store.h */
    sqlite3_bind_int64(s, 4, o->quantity);
    sqlite3_bind_int64(s, 5, o->created_ms);
    sqlite3_bind_int64(s, 6, o->created_ms + timeout_s * 1000);
    sqlite3_bind_text(s, 7, o->stream_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 8, o->idem_key, -1, SQLITE_STATIC);
    if (sqlite3_step(s) != SQLITE_DONE) {
        rc = sk_sq_err(st, "insert order");
        sk_store_set_err(st, rc, "order %s: %s", o->order_id, sqlite3_errmsg(st->db));
    }
    sqlite3_reset(s);
    if (rc) return rc;
    if (sqlite3_changes(st->db) == 0) return present(st, o, now, res);
    res->inserted++;
    res->units += o->quantity;
    if ((rc = sk_sq_cached(st, Q_TAKE_STOCK, &s)) != 0) return rc;
    sqlite3_bind_int64(s, 1, o->quantity);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)o->activity_id);
    if (sqlite3_step(s) != SQLITE_DONE) rc = sk_sq_err(st, "take stock");
    sqlite3_reset(s);
    if (rc) return rc;
    if (sqlite3_changes(st->db) == 0) rc = record_stock_failure(st, o, now, res, first);
    return rc;
}

/* Raises the marks of the batch's key sets (store.h, migration 6). */
static int upsert_marks(sk_store *st, const struct sk_order *orders, size_t n, int64_t now)
{
    struct sk_mark *m;
    size_t nm;
    int rc = sk_store_batch_marks(st, orders, n, &m, &nm);
    for (size_t i = 0; i < nm && rc == 0; i++) {
        sqlite3_stmt *s;
        if ((rc = sk_sq_cached(st, Q_UPSERT_MARK, &s)) != 0) break;
        sqlite3_bind_text(s, 1, m[i].label, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 2, m[i].branch, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 3, (sqlite3_int64)m[i].activity_id);
        sqlite3_bind_int64(s, 4, m[i].adm);
        sqlite3_bind_int64(s, 5, now);
        sqlite3_bind_text(s, 6, m[i].order_id, -1, SQLITE_STATIC);
        if (sqlite3_step(s) != SQLITE_DONE) rc = sk_sq_err(st, "raise mark");
        sqlite3_reset(s);
    }
    free(m);
    return rc;
}

int sk_sq_orders_persist(sk_store *st, const struct sk_order *orders, size_t n,
                         struct sk_persist_result *res, struct sk_stock_failure *first)
{
    /* IMMEDIATE: take the write lock now (waiting up to the busy timeout)
     * rather than fail mid-batch when a read lock cannot be upgraded. */
    int rc = sk_sq_exec(st, "BEGIN IMMEDIATE", "begin persist");
    if (rc) return rc;
    int64_t now = sk_wall_ms();
    uint64_t last_aid = 0;
    int64_t timeout_s = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const struct sk_order *o = &orders[i];
        if (o->activity_id != last_aid) {
            int found;
            rc = sk_sq_pay_timeout(st, o->activity_id, &timeout_s, &found);
            if (rc) break;
            last_aid = o->activity_id;
        }
        rc = persist_one(st, o, timeout_s, now, res, first);
    }
    if (rc == 0) rc = upsert_marks(st, orders, n, now);
    rc = sk_sq_finish_tx(st, rc, "commit persist");
    return rc ? sk_store_batch_rolled_back(st, rc, n) : 0;
}
