/* store_mysql_orders.c - orders, audit rows, the rollback guard's marks
 * and the reconcile repairs of the MySQL / MariaDB backend (store.h,
 * store_mysql.c). Same meaning as store_pg.c, step for step.
 *
 * Persisting a batch, one transaction (READ COMMITTED):
 *   1. START TRANSACTION and the pay timeouts of the batch's activities;
 *   2. one multi-row INSERT of the batch (each id once, in id order so two
 *      batches lock shared ids in one order);
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
 * recorded in order_conflicts in the same transaction.
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

#define STR_(x) #x
#define STR(x) STR_(x)

/* Rows of one INSERT statement (a batch can be larger than is wise to
 * send as one statement). */
#define INSERT_CHUNK 1000
/* Rounds of a persist whose ids another persister is inserting too. */
#define PERSIST_ROUNDS 5

/* ---- rows ---- */

static void read_order(MYSQL_RES *res, MYSQL_ROW r, struct sk_order *o)
{
    memset(o, 0, sizeof *o);
    sk_my_text(res, r, 0, o->order_id, sizeof o->order_id);
    sk_my_text(res, r, 1, o->stream_id, sizeof o->stream_id);
    o->activity_id = (uint64_t)sk_my_i64(r, 2);
    o->user_id = (uint64_t)sk_my_i64(r, 3); /* same bits, see store.h */
    o->quantity = sk_my_i64(r, 4);
    o->status = sk_store_status_from_text(r[5]);
    o->created_ms = sk_my_i64(r, 6);
    o->pay_deadline_ms = sk_my_i64(r, 7);
    o->paid_ms = sk_my_i64(r, 8); /* NULL reads as 0 */
    o->cancelled_ms = sk_my_i64(r, 9);
    o->released_ms = sk_my_i64(r, 10);
    sk_my_text(res, r, 11, o->idem_key, sizeof o->idem_key); /* NULL reads "" */
}

/* Runs b and reads up to limit orders into out (*n of them). */
static int read_orders(sk_store *st, struct sk_my_sql *b, size_t limit, struct sk_order *out,
                       size_t *n)
{
    MYSQL_RES *r;
    int rc = sk_my_run_sql(st, "read orders", b, &r, NULL, 0);
    sk_my_sql_free(b);
    if (rc) return rc;
    for (MYSQL_ROW row; r && *n < limit && (row = mysql_fetch_row(r)) != NULL;)
        read_order(r, row, &out[(*n)++]);
    if (r) mysql_free_result(r);
    return 0;
}

/* An id that cannot be in the table: longer than any stored one. */
static int id_too_long(const char *order_id)
{
    return strnlen(order_id, SK_STORE_ORDER_ID_MAX) >= SK_STORE_ORDER_ID_MAX;
}

static void add_id(sk_store *st, struct sk_my_sql *b, const char *id)
{
    sk_my_sql_str(st, b, id, strlen(id));
}

/* An idempotency key: NULL when there is none (store.h). */
static void add_key(sk_store *st, struct sk_my_sql *b, const char *key)
{
    if (key[0])
        add_id(st, b, key);
    else
        sk_my_sql_add(b, "NULL");
}

/* Before each statement of a list but the first. */
static void add_sep(struct sk_my_sql *b)
{
    if (b->len) sk_my_sql_add(b, "; ");
}

/* ---- persist ---- */

/* Per-activity: the pay timeout, and the summed units of the inserted
 * orders. */
struct take {
    uint64_t aid;
    int64_t pay_timeout_s;
    int64_t units;
    int ok; /* the summed conditional update matched */
};

static int cmp_take(const void *a, const void *b)
{
    uint64_t x = ((const struct take *)a)->aid, y = ((const struct take *)b)->aid;
    return x < y ? -1 : x > y;
}

static struct take *find_take(struct take *t, size_t nt, uint64_t aid)
{
    struct take key = {.aid = aid};
    return bsearch(&key, t, nt, sizeof *t, cmp_take);
}

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
    struct take *takes;
    size_t nt;
};

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
    MYSQL_RES *r;
    int rc = sk_my_run_sql(st, "begin persist", &b, &r, NULL, 0);
    sk_my_sql_free(&b);
    if (rc) return rc;
    for (MYSQL_ROW row; r && (row = mysql_fetch_row(r)) != NULL;) {
        struct take *t = find_take(bt->takes, bt->nt, (uint64_t)sk_my_i64(row, 0));
        if (t) t->pay_timeout_s = sk_my_i64(row, 1);
    }
    if (r) mysql_free_result(r);
    return 0;
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
        add_id(st, &b, bt->o[i].order_id);
    }
    sk_my_sql_add(&b, ")");
    MYSQL_RES *r;
    int rc = sk_my_run_sql(st, "read existing orders", &b, &r, NULL, 0);
    sk_my_sql_free(&b);
    if (rc) return rc;
    for (MYSQL_ROW row; r && (row = mysql_fetch_row(r)) != NULL;) {
        char id[SK_STORE_ORDER_ID_MAX];
        sk_my_text(r, row, 0, id, sizeof id);
        for (size_t i = 0; i < bt->n; i++)
            if (bt->head[i] == i && !strcmp(bt->o[i].order_id, id)) {
                bt->exists[i] = 1;
                bt->held[i] = (struct holder){(uint64_t)sk_my_i64(row, 1),
                                              (uint64_t)sk_my_i64(row, 2), sk_my_i64(row, 3)};
            }
    }
    if (r) mysql_free_result(r);
    return 0;
}

/* Step 2: inserts the batch's new ids, in id order, INSERT_CHUNK rows per
 * statement; marks bt->inserted. SK_EEXIST: an id exists after all. */
static int insert_batch(sk_store *st, struct batch *bt)
{
    struct sk_my_sql b = {0};
    size_t rows = 0;
    for (size_t k = 0; k < bt->n; k++) {
        size_t i = bt->by_id[k];
        bt->inserted[i] = 0;
        if (bt->head[i] != i || bt->exists[i]) continue;
        const struct sk_order *o = &bt->o[i];
        const struct take *t = find_take(bt->takes, bt->nt, o->activity_id);
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
        add_id(st, &b, o->order_id);
        sk_my_sql_add(&b, ",");
        add_id(st, &b, o->stream_id);
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
    struct sk_mark *m = malloc(n * sizeof *m);
    if (!m) return sk_store_set_err(st, SK_ENOMEM, "out of memory raising marks");
    size_t nm = sk_store_batch_marks(orders, n, m);
    for (size_t i = 0; i < nm; i++) {
        if (i == 0) add_sep(b);
        sk_my_sql_add(b, i ? ",("
                           : "INSERT INTO redis_marks (label, branch, activity_id, adm,"
                             " updated_ms, order_id) VALUES (");
        add_id(st, b, m[i].label);
        sk_my_sql_add(b, ",");
        add_id(st, b, m[i].branch);
        sk_my_sql_addf(b, ",%" PRIu64 ",%" PRId64 ",%" PRId64 ",", m[i].activity_id, m[i].adm, now);
        add_id(st, b, m[i].order_id);
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
        add_id(st, b, o->order_id);
        sk_my_sql_addf(b, ",%" PRId64 ",%" PRId64 ",", (int64_t)o->user_id /* same bits */,
                       o->quantity);
        add_id(st, b, o->stream_id);
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
        const struct take *t = &bt->takes[k];
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
    add_id(st, &b, o->order_id);
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
        find_take(bt->takes, bt->nt, o->activity_id)->units += o->quantity;
    }
    int64_t now = sk_wall_ms();
    if ((rc = take_stock_and_mark(st, bt, now)) != 0) return rc;
    for (size_t i = 0; i < bt->n && rc == 0; i++) {
        if (!bt->inserted[i]) continue;
        if (!find_take(bt->takes, bt->nt, bt->o[i].activity_id)->ok)
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
        size_t t = 0;
        while (t < bt->nt && bt->takes[t].aid != orders[i].activity_id)
            t++;
        if (t == bt->nt) bt->takes[bt->nt++].aid = orders[i].activity_id;
    }
    /* by id, so two batches lock shared activity rows in one order */
    qsort(bt->takes, bt->nt, sizeof *bt->takes, cmp_take);
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

/* ---- reads and status changes ---- */

int sk_my_order_get(sk_store *st, const char *order_id, struct sk_order *out)
{
    int rc = sk_my_enter(st);
    if (rc) return rc;
    if (id_too_long(order_id)) return sk_store_no_order(st, order_id);
    struct sk_my_sql b = {0};
    sk_my_sql_add(&b, "SELECT " SK_STORE_ORDER_COLUMNS " FROM orders WHERE order_id = ");
    add_id(st, &b, order_id);
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
    add_id(st, &b, order_id);
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
    add_id(st, &b, order_id);
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
    add_id(st, &b, lo);
    sk_my_sql_add(&b, " AND order_id < ");
    add_id(st, &b, hi);
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
    int rc = sk_my_run_sql(st, what, b, r, NULL, 0);
    sk_my_sql_free(b);
    *rows = rc == 0 && *r ? (size_t)mysql_num_rows(*r) : 0;
    return rc;
}

int sk_my_audit_list(sk_store *st, uint64_t activity_id, struct sk_audit **out, size_t *n)
{
    int rc = sk_my_enter(st);
    if (rc) return rc;
    struct sk_my_sql b = {0};
    sk_my_sql_add(&b, "SELECT id, at_ms, activity_id, kind, detail FROM audit");
    if (activity_id) sk_my_sql_addf(&b, " WHERE activity_id = %" PRIu64, activity_id);
    sk_my_sql_add(&b, " ORDER BY id");
    MYSQL_RES *r;
    size_t rows;
    if ((rc = read_rows(st, "list audit rows", &b, &r, &rows)) != 0) return rc;
    struct sk_audit *arr = rows ? calloc(rows, sizeof *arr) : NULL;
    if (rows && !arr) {
        mysql_free_result(r);
        return sk_store_set_err(st, SK_ENOMEM, "out of memory listing audit rows");
    }
    size_t k = 0;
    for (MYSQL_ROW row; k < rows && (row = mysql_fetch_row(r)) != NULL; k++) {
        arr[k].id = sk_my_i64(row, 0);
        arr[k].at_ms = sk_my_i64(row, 1);
        arr[k].activity_id = (uint64_t)sk_my_i64(row, 2);
        sk_my_text(r, row, 3, arr[k].kind, sizeof arr[k].kind);
        sk_my_text(r, row, 4, arr[k].detail, sizeof arr[k].detail);
    }
    if (r) mysql_free_result(r);
    *out = arr;
    *n = k;
    return 0;
}

int sk_my_marks_list(sk_store *st, uint64_t activity_id, struct sk_mark **out, size_t *n)
{
    int rc = sk_my_enter(st);
    if (rc) return rc;
    struct sk_my_sql b = {0};
    sk_my_sql_add(&b,
                  "SELECT label, activity_id, adm, updated_ms, order_id, branch FROM redis_marks");
    if (activity_id) sk_my_sql_addf(&b, " WHERE activity_id = %" PRIu64, activity_id);
    sk_my_sql_add(&b, " ORDER BY label, branch");
    MYSQL_RES *r;
    size_t rows;
    if ((rc = read_rows(st, "list marks", &b, &r, &rows)) != 0) return rc;
    struct sk_mark *arr = rows ? calloc(rows, sizeof *arr) : NULL;
    if (rows && !arr) {
        mysql_free_result(r);
        return sk_store_set_err(st, SK_ENOMEM, "out of memory listing marks");
    }
    size_t k = 0;
    for (MYSQL_ROW row; k < rows && (row = mysql_fetch_row(r)) != NULL; k++) {
        sk_my_text(r, row, 0, arr[k].label, sizeof arr[k].label);
        arr[k].activity_id = (uint64_t)sk_my_i64(row, 1);
        arr[k].adm = sk_my_i64(row, 2);
        arr[k].updated_ms = sk_my_i64(row, 3);
        sk_my_text(r, row, 4, arr[k].order_id, sizeof arr[k].order_id);
        sk_my_text(r, row, 5, arr[k].branch, sizeof arr[k].branch);
    }
    if (r) mysql_free_result(r);
    *out = arr;
    *n = k;
    return 0;
}

/* ---- payment timeout and reconciliation (store.h, migration 3) ------- */

int sk_my_order_mark_released(sk_store *st, const char *order_id, int64_t now_ms)
{
    int rc = sk_my_enter(st);
    if (rc) return rc;
    if (id_too_long(order_id)) return sk_store_no_order(st, order_id);
    struct sk_my_sql b = {0};
    sk_my_sql_addf(&b, "UPDATE orders SET released_ms = %" PRId64 " WHERE order_id = ", now_ms);
    add_id(st, &b, order_id);
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
    add_id(st, &b, after);
    sk_my_sql_addf(&b, " ORDER BY release_due LIMIT %zu", limit_arg(limit));
    return read_orders(st, &b, limit, out, n);
}

/* DB stock, expected DB stock and initial stock of an activity, in one
 * statement (one snapshot). */
static int stock_check(sk_store *st, uint64_t id, int64_t *stock, int64_t *expected,
                       int64_t *initial)
{
    struct sk_my_sql b = {0};
    sk_my_sql_addf(&b,
                   "SELECT a.stock, a.stock_initial - COALESCE((SELECT SUM(o.quantity)"
                   " FROM orders o WHERE o.activity_id = a.id AND o.status <> 'cancelled'), 0),"
                   " a.stock_initial FROM activities a WHERE a.id = %" PRIu64,
                   id);
    MYSQL_RES *r;
    size_t rows;
    int rc = read_rows(st, "check DB stock", &b, &r, &rows);
    if (rc) return rc;
    MYSQL_ROW row = rows == 1 ? mysql_fetch_row(r) : NULL;
    if (!row) {
        rc = sk_store_no_activity(st, id);
    } else {
        *stock = sk_my_i64(row, 0);
        *expected = sk_my_i64(row, 1);
        if (initial) *initial = sk_my_i64(row, 2);
    }
    if (r) mysql_free_result(r);
    return rc;
}

int sk_my_db_stock_check(sk_store *st, uint64_t id, int64_t *stock, int64_t *expected)
{
    int rc = sk_my_enter(st);
    if (rc) return rc;
    return stock_check(st, id, stock, expected, NULL);
}

/* The body of the repair transaction (after its START TRANSACTION). */
static int stock_repair_tx(sk_store *st, uint64_t id, int64_t now_ms, int64_t *stock,
                           int64_t *expected)
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
    int64_t initial = 0;
    if ((rc = stock_check(st, id, stock, expected, &initial)) != 0) return rc;
    if ((rc = sk_store_repair_check(st, id, *expected, initial)) != 0) return rc;
    if (*stock == *expected) return 0;
    char detail[SK_STORE_AUDIT_DETAIL_MAX];
    sk_store_repair_detail(detail, sizeof detail, *stock, *expected, initial);
    sk_my_sql_addf(&b, "UPDATE activities SET stock = %" PRId64 " WHERE id = %" PRIu64 "; ",
                   *expected, id);
    add_audit(st, &b, now_ms, id, "repair_db_stock", detail);
    rc = sk_my_run_sql(st, "set DB stock", &b, NULL, NULL, 0);
    sk_my_sql_free(&b);
    return rc;
}

int sk_my_db_stock_repair(sk_store *st, uint64_t id, int64_t now_ms, int64_t *before,
                          int64_t *after)
{
    int rc = sk_my_enter(st);
    if (rc) return rc;
    int64_t stock = 0, expected = 0;
    rc = stock_repair_tx(st, id, now_ms, &stock, &expected);
    if ((rc = sk_my_finish_tx(st, rc, "commit DB stock repair")) != 0) return rc;
    *before = stock;
    *after = expected;
    return 0;
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
    add_id(st, &b, o->order_id);
    sk_my_sql_addf(&b,
                   ", %" PRIu64 ", %" PRId64 ", %" PRId64 ", '%s', %" PRId64 ", %" PRId64
                   " + 1000 * COALESCE((SELECT pay_timeout_s FROM activities WHERE id = %" PRIu64
                   "), " STR(SK_ACTIVITY_PAY_TIMEOUT_DEFAULT) "), ",
                   o->activity_id, (int64_t)o->user_id /* same bits */, o->quantity,
                   sk_order_status_name(o->status), o->created_ms, o->created_ms, o->activity_id);
    add_id(st, &b, o->stream_id);
    sk_my_sql_addf(&b, ", %s, %s); ", cancelled ? t : "NULL", cancelled ? t : "NULL");
    add_audit(st, &b, now_ms, o->activity_id, "repair_restore_order", audit_detail);
    sk_my_sql_add(&b, "; COMMIT");
    rc = sk_my_run_sql(st, "restore order", &b, NULL, NULL, 0);
    sk_my_sql_free(&b);
    if (rc == SK_EEXIST) sk_store_set_err(st, rc, "order %s already exists", o->order_id);
    return rc ? sk_my_finish_tx(st, rc, "rollback") : 0;
}
