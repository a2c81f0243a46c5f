/* store_sqlite_persist.c - persisting a batch of orders in SQLite
 * (store.h sk_store_orders_persist, store_sqlite_int.h), in one IMMEDIATE
 * transaction:
 *   1. the pay timeout of each activity of the batch;
 *   2. the orders, by multi-row INSERT ... ON CONFLICT (order_id) DO
 *      NOTHING: the batch cut greedily into row counts of 128, 64, ..., 2,
 *      1, each statement prepared once per handle. When a statement adds
 *      fewer rows than it has (an id is present: a re-delivered entry, or
 *      one id twice in the batch) the transaction is rolled back and run
 *      again with 1-row inserts, each telling whether it added its row;
 *   3. each order not inserted, in batch order: a re-delivery, or a
 *      conflict, recorded (store.h);
 *   4. per activity, one conditional UPDATE of the summed quantities of
 *      its inserted orders (stock >= sum). Only where that fails (DB stock
 *      drift, or no activity row) its orders go one by one in batch order,
 *      stock >= q, each failure recorded with the DB stock seen then: the
 *      sum fits exactly when each update in turn would, so the result is
 *      the order-by-order one;
 *   5. the marks of the batch's key sets.
 * Two statements per order (the insert and the stock update) were most of
 * a batch's CPU; a batch of 500 now runs about a dozen. */
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

/* The kept multi-row insert (parameters per row: INS_COLS). ON CONFLICT
 * names the key: only a re-delivered order id is skipped; a CHECK
 * violation still fails the batch (never silently dropped). No RETURNING:
 * it cost a 1-row insert 70% more and a 128-row one 15%, and the usual
 * batch holds no id that is present already. */
#define INS_COLS 8
#define INS_HEAD                                                                                   \
    "INSERT INTO orders (order_id, activity_id, user_id, quantity, status, created_ms,"            \
    " pay_deadline_ms, stream_id, idem_key) VALUES "
#define INS_ROW "(?, ?, ?, ?, 'created', ?, ?, ?, nullif(?, ''))"
#define INS_TAIL " ON CONFLICT (order_id) DO NOTHING"

/* Rows of the kept inserts, largest first (st->sq_ins[b] has
 * bucket_rows[b]): a batch's tail takes at most one statement of each.
 * 128 rows bind 1,024 parameters, far below SQLite's limit; past 32 rows
 * a larger statement saved little CPU per row. */
static const size_t bucket_rows[SK_STORE_SQ_INSERTS] = {128, 64, 32, 16, 8, 4, 2, 1};

/* A multi-row insert added fewer rows than it had: an id was present. */
#define PRESENT 1

/* The kept insert of bucket b, prepared on first use. */
static int insert_stmt(sk_store *st, int b, sqlite3_stmt **out)
{
    if (!st->sq_ins[b]) {
        size_t rows = bucket_rows[b], len = 0;
        char *sql = malloc(sizeof INS_HEAD + rows * sizeof INS_ROW + sizeof INS_TAIL);
        if (!sql)
            return sk_store_set_err(st, SK_ENOMEM, "out of memory preparing an insert of %zu rows",
                                    rows);
        memcpy(sql, INS_HEAD, sizeof INS_HEAD - 1);
        len += sizeof INS_HEAD - 1;
        for (size_t r = 0; r < rows; r++) {
            if (r) sql[len++] = ',';
            memcpy(sql + len, INS_ROW, sizeof INS_ROW - 1);
            len += sizeof INS_ROW - 1;
        }
        memcpy(sql + len, INS_TAIL, sizeof INS_TAIL); /* with its NUL */
        int rc = sk_sq_prepare(st, &st->sq_ins[b], sql);
        free(sql);
        if (rc) return rc;
    }
    *out = st->sq_ins[b];
    return 0;
}

/* Inserts the bucket_rows[b] orders o[0..) with the kept insert of bucket
 * b (takes: the batch's activities, their pay timeouts). One row:
 * *inserted says whether it was added. More: PRESENT when fewer were added
 * (which ones, the statement cannot say), else all were. */
static int insert_chunk(sk_store *st, int b, const struct sk_order *o, struct sk_store_take *takes,
                        size_t nt, char *inserted)
{
    size_t k = bucket_rows[b];
    sqlite3_stmt *s = NULL;
    int rc = insert_stmt(st, b, &s);
    if (rc) return rc;
    for (size_t i = 0; i < k; i++) {
        const struct sk_order *x = &o[i];
        int p = (int)i * INS_COLS;
        int64_t timeout_s = sk_store_take_find(takes, nt, x->activity_id)->pay_timeout_s;
        sqlite3_bind_text(s, p + 1, x->order_id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, p + 2, (sqlite3_int64)x->activity_id);
        sqlite3_bind_int64(s, p + 3, (sqlite3_int64)x->user_id); /* same bits, see store.h */
        sqlite3_bind_int64(s, p + 4, x->quantity);
        sqlite3_bind_int64(s, p + 5, x->created_ms);
        sqlite3_bind_int64(s, p + 6, x->created_ms + timeout_s * 1000);
        sqlite3_bind_text(s, p + 7, x->stream_id, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, p + 8, x->idem_key, -1, SQLITE_STATIC);
    }
    if (sqlite3_step(s) != SQLITE_DONE) {
        rc = sk_sq_err(st, "insert orders");
        if (k == 1)
            sk_store_set_err(st, rc, "order %s: %s", o->order_id, sqlite3_errmsg(st->db));
        else
            sk_store_set_err(st, rc, "orders %s .. %s: %s", o[0].order_id, o[k - 1].order_id,
                             sqlite3_errmsg(st->db));
    }
    sqlite3_reset(s);
    if (rc) return rc;
    size_t added = (size_t)sqlite3_changes(st->db);
    if (k > 1 && added < k) return PRESENT;
    memset(inserted, 1, k);
    if (k == 1) *inserted = added == 1;
    return 0;
}

/* Inserts the batch (step 2), marking inserted[i]; one by one: with
 * 1-row statements only (never PRESENT). */
static int insert_batch(sk_store *st, const struct sk_order *orders, size_t n,
                        struct sk_store_take *takes, size_t nt, char *inserted, int one_by_one)
{
    int rc = 0;
    size_t b = one_by_one ? SK_STORE_SQ_INSERTS - 1 : 0;
    for (size_t i = 0; i < n && rc == 0;) {
        while (bucket_rows[b] > n - i)
            b++;
        rc = insert_chunk(st, (int)b, orders + i, takes, nt, inserted + i);
        i += bucket_rows[b];
    }
    return rc;
}

/* The conditional stock update of q units of activity aid: 1 it matched,
 * 0 it did not (stock < q, or no activity row), or a negative code. */
static int take_stock(sk_store *st, uint64_t aid, int64_t q)
{
    sqlite3_stmt *s;
    int rc = sk_sq_cached(st, Q_TAKE_STOCK, &s);
    if (rc) return rc;
    sqlite3_bind_int64(s, 1, q);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)aid);
    if (sqlite3_step(s) != SQLITE_DONE) rc = sk_sq_err(st, "take stock");
    sqlite3_reset(s);
    return rc ? rc : sqlite3_changes(st->db) == 1;
}

/* Step 4: the summed update per activity of the inserted orders; where it
 * fails, order by order in batch order, each failure recorded. */
static int take_batch_stock(sk_store *st, const struct sk_order *orders, size_t n,
                            const char *inserted, struct sk_store_take *takes, size_t nt,
                            int64_t now, struct sk_persist_result *res,
                            struct sk_stock_failure *first)
{
    for (size_t k = 0; k < nt; k++) {
        if (!takes[k].units) continue; /* nothing of it inserted */
        int hit = take_stock(st, takes[k].aid, takes[k].units);
        if (hit < 0) return hit;
        takes[k].ok = hit;
    }
    for (size_t i = 0; i < n; i++) {
        const struct sk_order *o = &orders[i];
        if (!inserted[i] || sk_store_take_find(takes, nt, o->activity_id)->ok) continue;
        int hit = take_stock(st, o->activity_id, o->quantity);
        if (hit < 0) return hit;
        int rc = hit ? 0 : record_stock_failure(st, o, now, res, first);
        if (rc) return rc;
    }
    return 0;
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

/* The body of the persist transaction (between BEGIN and COMMIT);
 * inserted and takes have room for n. */
static int persist_tx(sk_store *st, const struct sk_order *orders, size_t n, int one_by_one,
                      char *inserted, struct sk_store_take *takes, int64_t now,
                      struct sk_persist_result *res, struct sk_stock_failure *first)
{
    size_t nt = 0;
    for (size_t i = 0; i < n; i++)
        sk_store_take_add(takes, &nt, orders[i].activity_id);
    sk_store_takes_sort(takes, nt);
    int rc = 0;
    for (size_t k = 0; k < nt && rc == 0; k++) {
        int found;
        rc = sk_sq_pay_timeout(st, takes[k].aid, &takes[k].pay_timeout_s, &found);
    }
    if (rc == 0) rc = insert_batch(st, orders, n, takes, nt, inserted, one_by_one);
    if (rc) return rc; /* PRESENT too: the caller starts again one by one */
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (!inserted[i]) {
            /* re-delivered (its stock was taken the first time), or a conflict */
            rc = present(st, &orders[i], now, res);
            continue;
        }
        res->inserted++;
        res->units += orders[i].quantity;
        sk_store_take_units(sk_store_take_find(takes, nt, orders[i].activity_id),
                            orders[i].quantity);
    }
    if (rc == 0) rc = take_batch_stock(st, orders, n, inserted, takes, nt, now, res, first);
    return rc ? rc : upsert_marks(st, orders, n, now);
}

int sk_sq_orders_persist(sk_store *st, const struct sk_order *orders, size_t n,
                         struct sk_persist_result *res, struct sk_stock_failure *first)
{
    char *inserted;
    struct sk_store_take *takes;
    if (sk_store_persist_scratch(st, n, &inserted, &takes) < 0) return SK_ENOMEM;
    int rc = 0;
    for (int one_by_one = 0; one_by_one < 2; one_by_one++) {
        /* IMMEDIATE: take the write lock now (waiting up to the busy
         * timeout) rather than fail mid-batch when a read lock cannot be
         * upgraded. */
        if ((rc = sk_sq_exec(st, "BEGIN IMMEDIATE", "begin persist")) != 0) break;
        *res = (struct sk_persist_result){0};
        *first = (struct sk_stock_failure){0};
        rc = persist_tx(st, orders, n, one_by_one, inserted, takes, sk_wall_ms(), res, first);
        if (rc == PRESENT && (rc = sk_sq_exec(st, "ROLLBACK", "roll back persist")) == 0)
            continue; /* a re-delivery (rare): again, order by order */
        rc = sk_sq_finish_tx(st, rc, "commit persist");
        if (rc) rc = sk_store_batch_rolled_back(st, rc, n);
        break;
    }
    sk_store_persist_scratch_free(inserted, takes);
    return rc;
}
