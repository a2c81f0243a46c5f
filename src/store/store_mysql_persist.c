/* store_mysql_persist.c - persisting a batch of orders in MySQL / MariaDB
 * (store.h sk_store_orders_persist, store_mysql_int.h). Same meaning as
 * store_pg_persist.c, step for step.
 *
 * Persisting a batch, one transaction (READ COMMITTED):
 *   1. START TRANSACTION and the pay timeouts of the batch's activities;
 *   2. one INSERT of the batch (each id once, in id order so two batches
 *      lock shared ids in one order): on MariaDB one bulk execution of a
 *      prepared 1-row INSERT (an array of values per column, prepared once
 *      per session), on MySQL a multi-row INSERT;
 *   3. one conditional UPDATE per activity of the summed quantities
 *      (stock >= sum), the marks' upsert and the conflicts found, in one
 *      round trip;
 *   4. only where that condition failed (DB stock drift): the orders of
 *      that activity one by one, UPDATE activities SET stock = stock - q
 *      WHERE id = ? AND stock >= q, in batch order, each failure recorded
 *      - what the per-order SQLite path yields;
 *   5. COMMIT.
 * Exactly once without RETURNING: MySQL 8 has no INSERT ... RETURNING, and
 * INSERT IGNORE (with or without MariaDB's RETURNING) also turns a CHECK
 * or a too-long value into a skipped row, counted as a duplicate, so a bad
 * order would vanish; ON DUPLICATE KEY UPDATE cannot say which rows were
 * new. So the INSERT is a plain one: the usual batch (no re-delivery)
 * costs nothing extra. When it meets an id that exists (error 1062, a
 * re-delivered entry) the transaction is rolled back and run again with a
 * read of which ids exist first and whose admission each holds (committed
 * rows: READ COMMITTED), and only the others inserted. A racing persister
 * of the same ids makes the second INSERT wait for its commit and fail
 * again: the next round sees its rows; a few rounds, then SK_ETIMEDOUT
 * (the worker retries). An id not inserted is a re-delivery (a duplicate)
 * when the row holding it - in the table, or earlier in the batch - has
 * the order's activity, user and quantity, else a conflict (store.h),
 * recorded in order_conflicts in the same transaction. */
#include "store/store_mysql_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"

/* Rows of one INSERT statement (a batch can be larger than is wise to
 * send as one statement). */
#define INSERT_CHUNK 1000
/* Rounds of a persist whose ids another persister is inserting too. */
#define PERSIST_ROUNDS 5

/* An idempotency key: NULL when there is none (store.h). */
static void add_key(sk_store *st, struct sk_my_sql *b, const char *key)
{
    if (key[0])
        sk_my_sql_strz(st, b, key);
    else
        sk_my_sql_add(b, "NULL");
}

/* Before each statement of a list but the first. */
static void add_sep(struct sk_my_sql *b)
{
    if (b->len) sk_my_sql_add(b, "; ");
}

/* ---- persist ---- */

/* The batch in id order (ties: batch order, so the first of an id that
 * appears twice comes first); arg is the batch. */
static int cmp_idx(const void *a, const void *b, void *arg)
{
    const struct sk_order *o = arg;
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    int c = strcmp(o[i].order_id, o[j].order_id);
    return c ? c : (i > j) - (i < j);
}

/* The admission an order id holds in the table. */
struct holder {
    uint64_t aid, uid;
    int64_t qty;
};

/* What one persist works with; the arrays have n entries. */
struct batch {
    const struct sk_order *o;
    size_t n;
    size_t *by_id;       /* indices in id order */
    size_t *head;        /* the index of the first occurrence of its id in the batch */
    char *exists;        /* found in the table before inserting (rounds after the first) */
    struct holder *held; /* what an existing id holds (where exists) */
    char *inserted;      /* inserted by this round */
    char *conflict;      /* not inserted: its id holds another admission */
    struct sk_store_take *takes;
    size_t nt;
};

/* A row (id, pay_timeout_s) into the batch's take of that activity. */
static void take_timeout(MYSQL_RES *res, MYSQL_ROW row, void *arg)
{
    struct batch *bt = arg;
    (void)res;
    struct sk_store_take *t = sk_store_take_find(bt->takes, bt->nt, (uint64_t)sk_my_i64(row, 0));
    if (t) t->pay_timeout_s = sk_my_i64(row, 1);
}

/* Step 1: START TRANSACTION and the pay timeouts (the default for an
 * activity not in the DB). */
static int begin_and_read_timeouts(sk_store *st, struct batch *bt)
{
    struct sk_my_sql b = {0};
    sk_my_sql_add(&b, "START TRANSACTION; SELECT id, pay_timeout_s FROM activities WHERE id IN (");
    for (size_t k = 0; k < bt->nt; k++) {
        bt->takes[k].pay_timeout_s = SK_ACTIVITY_PAY_TIMEOUT_DEFAULT;
        bt->takes[k].units = 0;
        bt->takes[k].ok = 0;
        sk_my_sql_addf(&b, "%s%" PRIu64, k ? "," : "", bt->takes[k].aid);
    }
    sk_my_sql_add(&b, ")");
    return sk_my_each_row(st, "begin persist", &b, take_timeout, bt);
}

/* A row (order_id, activity_id, user_id, quantity) of an order that
 * exists: the batch's orders of that id hold its admission. */
static void existing_row(MYSQL_RES *res, MYSQL_ROW row, void *arg)
{
    struct batch *bt = arg;
    char id[SK_STORE_ORDER_ID_MAX];
    sk_my_text(res, row, 0, id, sizeof id);
    for (size_t i = 0; i < bt->n; i++)
        if (bt->head[i] == i && !strcmp(bt->o[i].order_id, id)) {
            bt->exists[i] = 1;
            bt->held[i] = (struct holder){(uint64_t)sk_my_i64(row, 1), (uint64_t)sk_my_i64(row, 2),
                                          sk_my_i64(row, 3)};
        }
}

/* Rounds after the first: which of the batch's ids are in the table, and
 * whose admission each holds. */
static int read_existing(sk_store *st, struct batch *bt)
{
    struct sk_my_sql b = {0};
    sk_my_sql_add(&b, "SELECT order_id, activity_id, user_id, quantity FROM orders"
                      " WHERE order_id IN (");
    int any = 0;
    for (size_t i = 0; i < bt->n; i++) {
        if (bt->head[i] != i) continue;
        if (any++) sk_my_sql_add(&b, ",");
        sk_my_sql_strz(st, &b, bt->o[i].order_id);
    }
    sk_my_sql_add(&b, ")");
    return sk_my_each_row(st, "read existing orders", &b, existing_row, bt);
}

/* The insert of one order, bulk-executed by MariaDB for a column of
 * values per parameter (bulk_batch). */
#define BULK_INSERT                                                                                \
    "INSERT INTO orders (order_id, stream_id, activity_id, user_id, quantity, created_ms,"         \
    " pay_deadline_ms, idem_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
#define BULK_COLS 8

/* Step 2 on MariaDB: the rows of insert_batch as one bulk execution of a
 * prepared 1-row insert per INSERT_CHUNK rows: no statement text to build
 * or parse per row (measured: 12-15 % of the server's CPU per order, half
 * the client's). */
static int bulk_batch(sk_store *st, struct batch *bt)
{
    size_t n = bt->n;
    const char **ids = malloc(n * sizeof *ids), **sids = malloc(n * sizeof *sids),
               **keys = malloc(n * sizeof *keys);
    unsigned long *lens = malloc(3 * n * sizeof *lens);
    long long *nums = malloc(5 * n * sizeof *nums);
    char *key_ind = malloc(n);
    int rc = 0;
    if (!ids || !sids || !keys || !lens || !nums || !key_ind)
        rc = sk_store_set_err(st, SK_ENOMEM, "out of memory persisting %zu orders", n);
    size_t rows = 0;
    for (size_t k = 0; k < n && rc == 0; k++) {
        size_t i = bt->by_id[k];
        bt->inserted[i] = 0;
        if (bt->head[i] != i || bt->exists[i]) continue;
        const struct sk_order *o = &bt->o[i];
        const struct sk_store_take *t = sk_store_take_find(bt->takes, bt->nt, o->activity_id);
        ids[rows] = o->order_id;
        sids[rows] = o->stream_id;
        keys[rows] = o->idem_key;
        lens[rows] = (unsigned long)strlen(o->order_id);
        lens[n + rows] = (unsigned long)strlen(o->stream_id);
        lens[2 * n + rows] = (unsigned long)strlen(o->idem_key);
        key_ind[rows] = o->idem_key[0] ? STMT_INDICATOR_NONE : STMT_INDICATOR_NULL;
        long long v[5] = {(long long)o->activity_id, (long long)o->user_id /* same bits */,
                          o->quantity, o->created_ms, o->created_ms + t->pay_timeout_s * 1000};
        for (int c = 0; c < 5; c++)
            nums[(size_t)c * n + rows] = v[c];
        bt->inserted[i] = 1;
        rows++;
    }
    for (size_t from = 0; from < rows && rc == 0; from += INSERT_CHUNK) {
        unsigned m = (unsigned)(rows - from < INSERT_CHUNK ? rows - from : INSERT_CHUNK);
        MYSQL_BIND b[BULK_COLS];
        memset(b, 0, sizeof b);
        const char **text[3] = {ids, sids, keys};
        int text_col[3] = {0, 1, 7};
        for (int c = 0; c < 3; c++) {
            MYSQL_BIND *x = &b[text_col[c]];
            x->buffer_type = MYSQL_TYPE_STRING;
            x->buffer = (void *)(text[c] + from); /* column-wise: a pointer per row */
            x->length = lens + (size_t)c * n + from;
        }
        b[7].u.indicator = key_ind + from;
        for (int c = 0; c < 5; c++) {
            b[2 + c].buffer_type = MYSQL_TYPE_LONGLONG;
            b[2 + c].buffer = nums + (size_t)c * n + from;
        }
        rc = sk_my_bulk(st, "insert orders", BULK_INSERT, b, m);
    }
    free(ids);
    free(sids);
    free(keys);
    free(lens);
    free(nums);
    free(key_ind);
    return rc;
}

/* Step 2: inserts the batch's new ids, in id order, INSERT_CHUNK rows per
 * statement; marks bt->inserted. SK_EEXIST: an id exists after all. */
static int insert_batch(sk_store *st, struct batch *bt)
{
    if (st->my_mariadb) return bulk_batch(st, bt);
    struct sk_my_sql b = {0};
    size_t rows = 0;
    for (size_t k = 0; k < bt->n; k++) {
        size_t i = bt->by_id[k];
        bt->inserted[i] = 0;
        if (bt->head[i] != i || bt->exists[i]) continue;
        const struct sk_order *o = &bt->o[i];
        const struct sk_store_take *t = sk_store_take_find(bt->takes, bt->nt, o->activity_id);
        if (rows % INSERT_CHUNK == 0)
            sk_my_sql_add(&b, rows ? "; INSERT INTO orders (order_id, stream_id, activity_id,"
                                     " user_id, quantity, created_ms, pay_deadline_ms, idem_key)"
                                     " VALUES "
                                   : "INSERT INTO orders (order_id, stream_id, activity_id,"
                                     " user_id, quantity, created_ms, pay_deadline_ms, idem_key)"
                                     " VALUES ");
        else
            sk_my_sql_add(&b, ",");
        sk_my_sql_add(&b, "(");
        sk_my_sql_strz(st, &b, o->order_id);
        sk_my_sql_add(&b, ",");
        sk_my_sql_strz(st, &b, o->stream_id);
        sk_my_sql_addf(&b, ",%" PRIu64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",",
                       o->activity_id, (int64_t)o->user_id /* same bits */, o->quantity,
                       o->created_ms, o->created_ms + t->pay_timeout_s * 1000);
        add_key(st, &b, o->idem_key);
        sk_my_sql_add(&b, ")");
        bt->inserted[i] = 1;
        rows++;
    }
    int rc = rows ? sk_my_run_sql(st, "insert orders", &b, NULL, NULL, 0) : 0;
    sk_my_sql_free(&b);
    return rc;
}

/* The marks' upsert (store.h, migrations 6 and 8) appended to b, per
 * label and branch (the primary key): the mark only ever grows (the
 * assignments run left to right, so adm goes last). */
static int add_marks(sk_store *st, struct sk_my_sql *b, const struct sk_order *orders, size_t n,
                     int64_t now)
{
    struct sk_mark *m;
    size_t nm;
    if (sk_store_batch_marks(st, orders, n, &m, &nm) != 0) return SK_ENOMEM;
    for (size_t i = 0; i < nm; i++) {
        if (i == 0) add_sep(b);
        sk_my_sql_add(b, i ? ",("
                           : "INSERT INTO redis_marks (label, branch, activity_id, adm,"
                             " updated_ms, order_id) VALUES (");
        sk_my_sql_strz(st, b, m[i].label);
        sk_my_sql_add(b, ",");
        sk_my_sql_strz(st, b, m[i].branch);
        sk_my_sql_addf(b, ",%" PRIu64 ",%" PRId64 ",%" PRId64 ",", m[i].activity_id, m[i].adm, now);
        sk_my_sql_strz(st, b, m[i].order_id);
        sk_my_sql_add(b, ")");
    }
    if (nm)
        sk_my_sql_add(b, " ON DUPLICATE KEY UPDATE"
                         " updated_ms = IF(VALUES(adm) > adm, VALUES(updated_ms), updated_ms),"
                         " order_id = IF(VALUES(adm) > adm, VALUES(order_id), order_id),"
                         " adm = GREATEST(adm, VALUES(adm))");
    free(m);
    return 0;
}

/* The order id conflicts of the batch (bt->conflict) appended to b: what
 * each admission was, for the operator (store.h). */
static void add_conflicts(sk_store *st, struct sk_my_sql *b, const struct batch *bt, int64_t now)
{
    int any = 0;
    for (size_t i = 0; i < bt->n; i++) {
        if (!bt->conflict[i]) continue;
        const struct sk_order *o = &bt->o[i];
        if (!any++) {
            add_sep(b);
            sk_my_sql_add(b, "INSERT INTO order_conflicts (at_ms, activity_id, order_id, user_id,"
                             " quantity, stream_id) VALUES ");
        } else {
            sk_my_sql_add(b, ",");
        }
        sk_my_sql_addf(b, "(%" PRId64 ",%" PRIu64 ",", now, o->activity_id);
        sk_my_sql_strz(st, b, o->order_id);
        sk_my_sql_addf(b, ",%" PRId64 ",%" PRId64 ",", (int64_t)o->user_id /* same bits */,
                       o->quantity);
        sk_my_sql_strz(st, b, o->stream_id);
        sk_my_sql_add(b, ")");
    }
}

/* Step 3: the summed conditional update per activity, the marks and the
 * conflicts, one round trip; takes[k].ok says which activities had
 * enough DB stock. */
static int take_stock_and_mark(sk_store *st, struct batch *bt, int64_t now)
{
    struct sk_my_sql b = {0};
    size_t nu = 0;
    for (size_t k = 0; k < bt->nt; k++) {
        const struct sk_store_take *t = &bt->takes[k];
        if (t->units == 0) continue; /* nothing of it inserted */
        add_sep(&b);
        sk_my_sql_addf(&b,
                       "UPDATE activities SET stock = stock - %" PRId64 " WHERE id = %" PRIu64
                       " AND stock >= %" PRId64,
                       t->units, t->aid, t->units);
        nu++;
    }
    int rc = add_marks(st, &b, bt->o, bt->n, now);
    if (rc == 0) add_conflicts(st, &b, bt, now);
    if (rc || !b.p) {
        sk_my_sql_free(&b);
        return rc;
    }
    long long *hit = calloc(nu + 1, sizeof *hit);
    if (!hit) {
        sk_my_sql_free(&b);
        return sk_store_set_err(st, SK_ENOMEM, "out of memory taking stock");
    }
    rc = sk_my_run_sql(st, "take stock", &b, NULL, hit, nu);
    sk_my_sql_free(&b);
    for (size_t k = 0, j = 0; rc == 0 && k < bt->nt; k++)
        if (bt->takes[k].units) bt->takes[k].ok = hit[j++] == 1;
    free(hit);
    return rc;
}

/* Step 4, for an activity whose summed update failed: the conditional
 * update of order o alone; a failure is recorded with the DB stock seen
 * then (NULL when the activity row is absent). */
static int take_stock_one(sk_store *st, const struct sk_order *o, int64_t now,
                          struct sk_persist_result *res, struct sk_stock_failure *first)
{
    struct sk_my_sql b = {0};
    sk_my_sql_addf(&b,
                   "UPDATE activities SET stock = stock - %" PRId64 " WHERE id = %" PRIu64
                   " AND stock >= %" PRId64,
                   o->quantity, o->activity_id, o->quantity);
    long long hit = 0;
    int rc = sk_my_run_sql(st, "take stock", &b, NULL, &hit, 1);
    sk_my_sql_free(&b);
    if (rc || hit) return rc;
    sk_my_sql_addf(&b,
                   "INSERT INTO stock_failures (at_ms, activity_id, order_id, quantity, db_stock)"
                   " VALUES (%" PRId64 ", %" PRIu64 ", ",
                   now, o->activity_id);
    sk_my_sql_strz(st, &b, o->order_id);
    sk_my_sql_addf(&b,
                   ", %" PRId64 ", (SELECT stock FROM activities WHERE id = %" PRIu64 "));"
                   " SELECT db_stock FROM stock_failures WHERE id = LAST_INSERT_ID()",
                   o->quantity, o->activity_id);
    MYSQL_RES *r;
    rc = sk_my_run_sql(st, "record stock failure", &b, &r, NULL, 0);
    sk_my_sql_free(&b);
    if (rc) return rc;
    MYSQL_ROW row = r ? mysql_fetch_row(r) : NULL;
    int has_row = row && row[0];
    sk_store_count_stock_failure(res, first, o, has_row, has_row ? sk_my_i64(row, 0) : 0);
    if (r) mysql_free_result(r);
    return 0;
}

/* One round of the persist transaction, from START TRANSACTION up to (not
 * including) COMMIT. */
static int persist_round(sk_store *st, struct batch *bt, int round, struct sk_persist_result *res,
                         struct sk_stock_failure *first)
{
    *res = (struct sk_persist_result){0};
    *first = (struct sk_stock_failure){0};
    memset(bt->exists, 0, bt->n);
    int rc = begin_and_read_timeouts(st, bt);
    if (rc == 0 && round > 0) rc = read_existing(st, bt);
    if (rc == 0) rc = insert_batch(st, bt);
    if (rc) return rc;
    for (size_t i = 0; i < bt->n; i++) {
        const struct sk_order *o = &bt->o[i];
        bt->conflict[i] = 0;
        if (!bt->inserted[i]) {
            /* re-delivered (its stock was taken the first time), unless
             * the id holds another admission: the table's row, or the
             * batch's first order of that id, inserted now */
            size_t h = bt->head[i];
            struct holder w = bt->exists[h] ? bt->held[h]
                                            : (struct holder){bt->o[h].activity_id,
                                                              bt->o[h].user_id, bt->o[h].quantity};
            bt->conflict[i] = (char)sk_store_is_conflict(o, w.aid, w.uid, w.qty);
            if (bt->conflict[i])
                res->conflicts++;
            else
                res->duplicates++;
            continue;
        }
        res->inserted++;
        res->units += o->quantity;
        sk_store_take_find(bt->takes, bt->nt, o->activity_id)->units += o->quantity;
    }
    int64_t now = sk_wall_ms();
    if ((rc = take_stock_and_mark(st, bt, now)) != 0) return rc;
    for (size_t i = 0; i < bt->n && rc == 0; i++) {
        if (!bt->inserted[i]) continue;
        if (!sk_store_take_find(bt->takes, bt->nt, bt->o[i].activity_id)->ok)
            rc = take_stock_one(st, &bt->o[i], now, res, first);
    }
    return rc;
}

/* The batch's index arrays and distinct activities. */
static int batch_init(sk_store *st, struct batch *bt, const struct sk_order *orders, size_t n)
{
    memset(bt, 0, sizeof *bt);
    bt->o = orders;
    bt->n = n;
    bt->by_id = malloc(n * sizeof *bt->by_id);
    bt->head = malloc(n * sizeof *bt->head);
    bt->exists = calloc(n, 1);
    bt->held = calloc(n, sizeof *bt->held);
    bt->inserted = calloc(n, 1);
    bt->conflict = calloc(n, 1);
    bt->takes = calloc(n, sizeof *bt->takes);
    if (!bt->by_id || !bt->head || !bt->exists || !bt->held || !bt->inserted || !bt->conflict ||
        !bt->takes)
        return sk_store_set_err(st, SK_ENOMEM, "out of memory persisting %zu orders", n);
    for (size_t i = 0; i < n; i++)
        bt->by_id[i] = i;
    qsort_r(bt->by_id, n, sizeof *bt->by_id, cmp_idx, (void *)orders);
    for (size_t k = 0; k < n; k++) {
        size_t i = bt->by_id[k], prev = k ? bt->by_id[k - 1] : i;
        bt->head[i] = k && !strcmp(orders[prev].order_id, orders[i].order_id) ? bt->head[prev] : i;
        sk_store_take_add(bt->takes, &bt->nt, orders[i].activity_id);
    }
    sk_store_takes_sort(bt->takes, bt->nt);
    return 0;
}

static void batch_free(struct batch *bt)
{
    free(bt->by_id);
    free(bt->head);
    free(bt->exists);
    free(bt->held);
    free(bt->inserted);
    free(bt->conflict);
    free(bt->takes);
}

int sk_my_orders_persist(sk_store *st, const struct sk_order *orders, size_t n,
                         struct sk_persist_result *res, struct sk_stock_failure *first)
{
    int rc = sk_my_enter(st);
    if (rc) return rc;
    struct batch bt;
    rc = batch_init(st, &bt, orders, n);
    for (int round = 0; rc == 0; round++) {
        rc = persist_round(st, &bt, round, res, first);
        if (rc == SK_EEXIST && round + 1 < PERSIST_ROUNDS) {
            /* an id exists after all: roll back, and again, reading which
             * ids exist first */
            sk_my_finish_tx(st, rc, "rollback persist");
            rc = st->my_broken ? SK_EDB : 0;
            continue;
        }
        if (rc == SK_EEXIST)
            sk_store_set_err(st, rc = SK_ETIMEDOUT,
                             "mysql %s: persist: other writers kept inserting the same orders",
                             st->my_where);
        rc = sk_my_finish_tx(st, rc, "commit persist");
        break;
    }
    batch_free(&bt);
    return rc ? sk_store_batch_rolled_back(st, rc, n) : 0;
}
