/* store_persist.c - persisting a batch of orders (store.h
 * sk_store_orders_persist) on every driver (store_int.h), in one
 * transaction:
 *   1. the pay timeouts of the batch's activities (the default for one
 *      not in the DB);
 *   2. rounds after the first: which of the batch's ids are present, and
 *      whose admission each holds;
 *   3. the orders not present, each id once, in id order (two batches
 *      then lock shared ids in one order), by multi-row INSERTs (SQLite:
 *      statements of 128, 64, ..., 1 rows kept prepared; PostgreSQL: one
 *      statement of arrays; MariaDB: one bulk execution). A plain INSERT:
 *      the usual batch holds no present id, and ON CONFLICT / IGNORE /
 *      RETURNING cost on every row (and MySQL's IGNORE would also skip a
 *      row that fails a CHECK, counting it a duplicate). When it meets a
 *      present id (a re-delivered entry, or another persister's of the
 *      same ids) the transaction is rolled back and run again from 1,
 *      reading the present ids first; a few rounds, then SK_ETIMEDOUT
 *      (the worker retries);
 *   4. each order not inserted: a re-delivery (a duplicate) when the row
 *      holding its id - in the table, or the batch's first order of that
 *      id - has its activity, user and quantity, else a conflict,
 *      recorded in order_conflicts (store.h);
 *   5. per activity, one conditional UPDATE of the summed quantities of
 *      its inserted orders (stock >= sum), in activity order. Only where
 *      that fails (DB stock drift, or no activity row) its orders go one
 *      by one in batch order, stock >= q, each failure recorded with the
 *      DB stock seen then: the sum fits exactly when each update in turn
 *      would, so the result is the order-by-order one;
 *   6. the marks of the batch's key sets (store.h, migrations 6 and 8),
 *      one upsert;
 *   7. COMMIT.
 * The outbox (migrations 12, 14): with 3, the order.created events of
 * the inserted orders, one row per activity for up to
 * SK_STORE_BATCH_ROW_MAX of them (store.h); after 5, an activity.sold_out
 * event for an activity whose DB stock the batch took to 0. */
#include "store/store_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/order_id.h"
#include "store/event_batch.h"

/* Rounds of a persist whose ids another persister is inserting too. */
#define PERSIST_ROUNDS 5

int sk_store_check_order(sk_store *st, const struct sk_order *o, size_t i)
{
    size_t il = strnlen(o->order_id, sizeof o->order_id);
    size_t sl = strnlen(o->stream_id, sizeof o->stream_id);
    if (il == 0 || il >= sizeof o->order_id)
        return sk_store_set_err(st, SK_EINVAL, "order %zu: empty or unterminated order id", i);
    if (sl == 0 || sl >= sizeof o->stream_id)
        return sk_store_set_err(st, SK_EINVAL, "order %s: empty or unterminated stream id",
                                o->order_id);
    if (o->activity_id == 0 || o->activity_id > SK_ACTIVITY_ID_MAX)
        return sk_store_set_err(st, SK_EINVAL, "order %s: bad activity id", o->order_id);
    if (o->quantity < 1)
        return sk_store_set_err(st, SK_EINVAL, "order %s: quantity %" PRId64 " < 1", o->order_id,
                                o->quantity);
    if (o->created_ms < 0 || o->created_ms > SK_TIME_MAX_MS)
        return sk_store_set_err(st, SK_EINVAL, "order %s: bad created time", o->order_id);
    size_t kl = strnlen(o->idem_key, sizeof o->idem_key);
    if (kl >= sizeof o->idem_key)
        return sk_store_set_err(st, SK_EINVAL, "order %s: unterminated idempotency key",
                                o->order_id);
    for (size_t k = 0; k < kl; k++)
        if (o->idem_key[k] < 0x21 || o->idem_key[k] > 0x7e)
            return sk_store_set_err(st, SK_EINVAL, "order %s: idempotency key not visible ASCII",
                                    o->order_id);
    return 0;
}

/* Per activity of the batch: its pay timeout, the summed units of its
 * inserted orders, and whether the summed update matched. */
struct take {
    uint64_t aid;
    int64_t pay_timeout_s;
    int64_t units;
    int ok;
    int took; /* some of its units taken: the sale may be sold out now */
};

/* The admission an id present in the table holds. */
struct holder {
    uint64_t aid, uid;
    int64_t qty;
};

/* The first failed conditional stock update of the batch, for the log. */
struct first_failure {
    char order_id[SK_STORE_ORDER_ID_MAX];
    uint64_t aid;
    int64_t qty, db_stock;
    int has_row; /* 0: the activity row is missing */
};

/* One persist call; the arrays have n entries. */
struct batch {
    const struct sk_order *o;
    size_t n;
    size_t *by_id; /* indices in id order (ties: batch order) */
    size_t *head;  /* the index of the first order of its id in the batch */
    size_t *rows;  /* this round's rows to insert (indices), in id order */
    size_t nrows;
    char *exists;        /* present in the table (read in rounds after the first) */
    struct holder *held; /* what a present id holds */
    struct take *takes;  /* by activity id */
    size_t nt;
    struct sk_mark *marks;
    size_t nm;
    int64_t now;
    struct sk_persist_result res;
    struct first_failure first;
};

static int cmp_idx(const void *a, const void *b, void *arg)
{
    const struct sk_order *o = arg;
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    int c = strcmp(o[i].order_id, o[j].order_id);
    return c ? c : (i > j) - (i < j);
}

static int cmp_take(const void *a, const void *b)
{
    uint64_t x = ((const struct take *)a)->aid, y = ((const struct take *)b)->aid;
    return x < y ? -1 : x > y;
}

static struct take *take_of(struct batch *bt, uint64_t aid)
{
    struct take key = {.aid = aid};
    return bsearch(&key, bt->takes, bt->nt, sizeof key, cmp_take);
}

/* The marks the batch raises: per key set label and branch, the highest
 * adm_seq and its order id (orders without adm_seq are left out). */
static void batch_marks(struct batch *bt)
{
    for (size_t i = 0; i < bt->n; i++) {
        const struct sk_order *o = &bt->o[i];
        struct sk_oid id;
        if (o->adm_seq <= 0 ||
            sk_oid_parse(o->order_id, strnlen(o->order_id, sizeof o->order_id), &id) < 0)
            continue;
        size_t ll = id.label_len, k = 0;
        struct sk_mark *m = bt->marks;
        while (k < bt->nm && (strncmp(m[k].label, o->order_id, ll) || m[k].label[ll] ||
                              strcmp(m[k].branch, id.branch)))
            k++;
        if (k == bt->nm) {
            m[k] = (struct sk_mark){.activity_id = id.activity_id};
            memcpy(m[k].label, o->order_id, ll);
            m[k].label[ll] = 0;
            snprintf(m[k].branch, sizeof m[k].branch, "%s", id.branch);
            bt->nm++;
        }
        if (o->adm_seq > m[k].adm) {
            m[k].adm = o->adm_seq;
            snprintf(m[k].order_id, sizeof m[k].order_id, "%s", o->order_id);
        }
    }
}

static void batch_free(struct batch *bt)
{
    free(bt->by_id);
    free(bt->head);
    free(bt->rows);
    free(bt->exists);
    free(bt->held);
    free(bt->takes);
    free(bt->marks);
}

/* The batch's order by id, its distinct activities and its marks. */
static int batch_init(sk_store *st, struct batch *bt, const struct sk_order *orders, size_t n)
{
    memset(bt, 0, sizeof *bt);
    bt->o = orders;
    bt->n = n;
    bt->by_id = malloc(n * sizeof *bt->by_id);
    bt->head = malloc(n * sizeof *bt->head);
    bt->rows = malloc(n * sizeof *bt->rows);
    bt->exists = calloc(n, 1);
    bt->held = calloc(n, sizeof *bt->held);
    bt->takes = calloc(n, sizeof *bt->takes);
    bt->marks = calloc(n, sizeof *bt->marks);
    if (!bt->by_id || !bt->head || !bt->rows || !bt->exists || !bt->held || !bt->takes ||
        !bt->marks)
        return sk_store_set_err(st, SK_ENOMEM, "out of memory persisting %zu orders", n);
    for (size_t i = 0; i < n; i++)
        bt->by_id[i] = i;
    qsort_r(bt->by_id, n, sizeof *bt->by_id, cmp_idx, (void *)orders);
    for (size_t k = 0; k < n; k++) {
        size_t i = bt->by_id[k], prev = k ? bt->by_id[k - 1] : i;
        bt->head[i] = k && !strcmp(orders[prev].order_id, orders[i].order_id) ? bt->head[prev] : i;
        uint64_t aid = orders[i].activity_id;
        size_t t = 0;
        while (t < bt->nt && bt->takes[t].aid != aid)
            t++;
        if (t == bt->nt) bt->takes[bt->nt++].aid = aid;
    }
    /* sorted: two batches lock shared activity rows in one order */
    qsort(bt->takes, bt->nt, sizeof *bt->takes, cmp_take);
    batch_marks(bt);
    return 0;
}

/* ---- the statements of a round ---- */

static void bind_take(void *ctx, size_t row, struct sk_val *v)
{
    const struct batch *bt = ctx;
    v[0] = SK_I(bt->takes[row].aid);
}

/* A row (id, pay_timeout_s) into its activity's take. */
static void pay_timeout_row(sk_store *st, sk_stmt *s, void *ctx)
{
    struct take *t = take_of(ctx, (uint64_t)st->drv->col_i64(s, 0));
    if (t) t->pay_timeout_s = st->drv->col_i64(s, 1);
}

static void bind_present(void *ctx, size_t row, struct sk_val *v)
{
    const struct batch *bt = ctx;
    v[0] = SK_T(bt->o[bt->rows[row]].order_id);
}

/* A row (order_id, activity_id, user_id, quantity) of a present id: the
 * batch's first order of that id (found in bt->rows, in id order) holds
 * its admission. */
static void present_row(sk_store *st, sk_stmt *s, void *ctx)
{
    struct batch *bt = ctx;
    char id[SK_STORE_ORDER_ID_MAX];
    st->drv->col_text(s, 0, id, sizeof id);
    size_t lo = 0, hi = bt->nrows;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(bt->o[bt->rows[mid]].order_id, id);
        if (c == 0) {
            size_t i = bt->rows[mid];
            bt->exists[i] = 1;
            bt->held[i] = (struct holder){(uint64_t)st->drv->col_i64(s, 1),
                                          (uint64_t)st->drv->col_i64(s, 2), st->drv->col_i64(s, 3)};
            return;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
}

static void bind_order(void *ctx, size_t row, struct sk_val *v)
{
    struct batch *bt = ctx;
    const struct sk_order *o = &bt->o[bt->rows[row]];
    int64_t timeout_s = take_of(bt, o->activity_id)->pay_timeout_s;
    v[0] = SK_T(o->order_id);
    v[1] = SK_T(o->stream_id);
    v[2] = SK_I(o->activity_id);
    v[3] = SK_I(o->user_id); /* same bits, see store.h */
    v[4] = SK_I(o->quantity);
    v[5] = SK_I(o->created_ms);
    v[6] = SK_I(o->created_ms + timeout_s * 1000);
    v[7] = o->idem_key[0] ? SK_T(o->idem_key) : SK_NULL;
}

/* One row of the order.created events of m orders (ids: their list). */
static int created_row(sk_store *st, struct batch *bt, uint64_t aid, const char *first,
                       const char *ids, size_t m)
{
    return sk_q_run(
        st, Q_EVENTS_CREATED,
        SK_ARGS(SK_T(first), SK_I(aid), SK_T(first), SK_I(bt->now), m > 1 ? SK_T(ids) : SK_NULL),
        NULL);
}

/* Step 3b: the order.created events of the inserted orders (each the
 * first of its order, seq 1, its payload the order row's): per activity
 * one outbox row for up to SK_STORE_BATCH_ROW_MAX of them in id order,
 * its batch listing their ids (store.h; a row per order cost MariaDB
 * nearly twice the work of the order alone). */
static int created_events(sk_store *st, struct batch *bt)
{
    char ids[SK_STORE_BATCH_ROW_MAX * SK_STORE_ORDER_ID_MAX];
    for (size_t k = 0; k < bt->nt; k++) {
        uint64_t aid = bt->takes[k].aid;
        size_t r = 0;
        for (;;) {
            size_t len = 0, m = 0;
            const char *first = NULL;
            for (; r < bt->nrows && m < SK_STORE_BATCH_ROW_MAX; r++) {
                const char *id = bt->o[bt->rows[r]].order_id;
                if (bt->o[bt->rows[r]].activity_id != aid) continue;
                /* (ids < SK_STORE_ORDER_ID_MAX bytes, checked: room for each) */
                if (!sk_event_batch_id_ok(id) || sk_event_batch_add(ids, sizeof ids, &len, id)) {
                    int rc = created_row(st, bt, aid, id, NULL, 1); /* a row of its own */
                    if (rc) return rc;
                    continue;
                }
                if (m++ == 0) first = id;
            }
            if (m == 0) break;
            int rc = created_row(st, bt, aid, first, ids, m);
            if (rc) return rc;
        }
    }
    return 0;
}

/* Step 5b: an activity.sold_out event for each activity whose DB stock
 * this batch took to 0 (its row is locked by the batch's update). */
static int sold_out_events(sk_store *st, struct batch *bt)
{
    for (size_t k = 0; k < bt->nt; k++) {
        if (!bt->takes[k].took) continue;
        uint64_t aid = bt->takes[k].aid;
        char subject[SK_STORE_SUBJECT_MAX], json[96];
        sk_store_activity_subject(subject, sizeof subject, aid);
        snprintf(json, sizeof json, "{\"v\":%d,\"activity_id\":%" PRIu64 ",\"stock\":0}",
                 SK_EVENT_SCHEMA, aid);
        int rc = sk_q_run(
            st, Q_EVENT_SOLD_OUT,
            SK_ARGS(SK_T(subject), SK_I(bt->now), SK_T(json), SK_T(subject), SK_I(aid)), NULL);
        if (rc) return rc;
    }
    return 0;
}

static void bind_mark(void *ctx, size_t row, struct sk_val *v)
{
    const struct batch *bt = ctx;
    const struct sk_mark *m = &bt->marks[row];
    v[0] = SK_T(m->label);
    v[1] = SK_T(m->branch);
    v[2] = SK_I(m->activity_id);
    v[3] = SK_I(m->adm);
    v[4] = SK_I(bt->now);
    v[5] = SK_T(m->order_id);
}

/* The ids of the batch, each once, that are not known to be present,
 * into bt->rows in id order. */
static void rows_to_insert(struct batch *bt)
{
    bt->nrows = 0;
    for (size_t k = 0; k < bt->n; k++) {
        size_t i = bt->by_id[k];
        if (bt->head[i] == i && !bt->exists[i]) bt->rows[bt->nrows++] = i;
    }
}

/* Step 4: the orders not inserted, counted and the conflicts recorded;
 * the inserted ones counted and summed per activity. */
static int sort_orders(sk_store *st, struct batch *bt)
{
    for (size_t i = 0; i < bt->n; i++) {
        const struct sk_order *o = &bt->o[i];
        size_t h = bt->head[i];
        if (h == i && !bt->exists[i]) {
            bt->res.inserted++;
            bt->res.units += o->quantity;
            struct take *t = take_of(bt, o->activity_id);
            /* saturating: above any DB stock, so the summed condition
             * fails and the orders go one by one, as they must */
            t->units = t->units > INT64_MAX - o->quantity ? INT64_MAX : t->units + o->quantity;
            continue;
        }
        struct holder w = bt->exists[h] ? bt->held[h]
                                        : (struct holder){bt->o[h].activity_id, bt->o[h].user_id,
                                                          bt->o[h].quantity};
        if (o->activity_id == w.aid && o->user_id == w.uid && o->quantity == w.qty) {
            bt->res.duplicates++; /* re-delivered: its stock was taken the first time */
            continue;
        }
        bt->res.conflicts++;
        int rc = sk_q_run(st, Q_CONFLICT,
                          SK_ARGS(SK_I(bt->now), SK_I(o->activity_id), SK_T(o->order_id),
                                  SK_I(o->user_id), SK_I(o->quantity), SK_T(o->stream_id)),
                          NULL);
        if (rc) return rc;
    }
    return 0;
}

/* The conditional update of q units of activity aid: 1 it matched, 0 it
 * did not, or a code. */
static int take_stock(sk_store *st, uint64_t aid, int64_t q)
{
    int64_t hit = 0;
    int rc = sk_q_run(st, Q_TAKE_STOCK, SK_ARGS(SK_I(q), SK_I(aid), SK_I(q)), &hit);
    return rc ? rc : hit == 1;
}

/* A failed conditional update of order o, recorded with the DB stock
 * seen now (NULL when there is no activity row). */
static int stock_failure(sk_store *st, struct batch *bt, const struct sk_order *o)
{
    int64_t db_stock = 0;
    int has_row =
        sk_q_one(st, Q_READ_STOCK, SK_ARGS(SK_I(o->activity_id)), sk_store_read_i64, &db_stock);
    if (has_row < 0) return has_row;
    if (bt->res.stock_failures++ == 0) {
        struct first_failure *f = &bt->first;
        snprintf(f->order_id, sizeof f->order_id, "%s", o->order_id);
        f->aid = o->activity_id;
        f->qty = o->quantity;
        f->db_stock = db_stock;
        f->has_row = has_row;
    }
    bt->res.units_unstocked += o->quantity;
    return sk_q_run(st, Q_STOCK_FAILURE,
                    SK_ARGS(SK_I(bt->now), SK_I(o->activity_id), SK_T(o->order_id),
                            SK_I(o->quantity), has_row ? SK_I(db_stock) : SK_NULL),
                    NULL);
}

/* Step 5: the summed update per activity; where it fails, order by order
 * in batch order. */
static int take_batch_stock(sk_store *st, struct batch *bt)
{
    for (size_t k = 0; k < bt->nt; k++) {
        struct take *t = &bt->takes[k];
        if (!t->units) continue; /* nothing of it inserted */
        int hit = take_stock(st, t->aid, t->units);
        if (hit < 0) return hit;
        t->ok = t->took = hit;
    }
    for (size_t i = 0; i < bt->n; i++) {
        const struct sk_order *o = &bt->o[i];
        if (bt->head[i] != i || bt->exists[i] || take_of(bt, o->activity_id)->ok) continue;
        int hit = take_stock(st, o->activity_id, o->quantity);
        if (hit < 0) return hit;
        if (hit) take_of(bt, o->activity_id)->took = 1;
        int rc = hit ? 0 : stock_failure(st, bt, o);
        if (rc) return rc;
    }
    return 0;
}

/* One round, from BEGIN up to (not including) COMMIT. */
static int round_tx(sk_store *st, struct batch *bt, int round)
{
    bt->res = (struct sk_persist_result){0};
    bt->first = (struct first_failure){0};
    bt->now = sk_wall_ms();
    for (size_t k = 0; k < bt->nt; k++) {
        bt->takes[k].pay_timeout_s = SK_ACTIVITY_PAY_TIMEOUT_DEFAULT;
        bt->takes[k].units = 0;
        bt->takes[k].ok = 0;
        bt->takes[k].took = 0;
    }
    memset(bt->exists, 0, bt->n);
    int rc = sk_q_rows(st, Q_PAY_TIMEOUTS, bt->nt, bind_take, pay_timeout_row, bt, NULL);
    rows_to_insert(bt);
    if (rc == 0 && round > 0) {
        rc = sk_q_rows(st, Q_ORDERS_PRESENT, bt->nrows, bind_present, present_row, bt, NULL);
        rows_to_insert(bt);
    }
    if (rc == 0) rc = sk_q_rows(st, Q_ORDERS_INSERT, bt->nrows, bind_order, NULL, bt, NULL);
    if (rc == 0) rc = created_events(st, bt);
    if (rc == 0) rc = sort_orders(st, bt);
    if (rc == 0) rc = take_batch_stock(st, bt);
    if (rc == 0) rc = sold_out_events(st, bt);
    if (rc == 0) rc = sk_q_rows(st, Q_MARKS_UPSERT, bt->nm, bind_mark, NULL, bt, NULL);
    return rc;
}

/* One warning line per batch for its failed conditional updates. */
static void log_stock_failures(size_t n, const struct first_failure *ff)
{
    if (ff->has_row)
        sk_log(SK_LOG_WARN,
               "store: %zu order(s) persisted without their DB stock (conditional update "
               "failed); first: order %s activity %" PRIu64 " qty %" PRId64 " > DB stock %" PRId64
               "; run reconcile",
               n, ff->order_id, ff->aid, ff->qty, ff->db_stock);
    else
        sk_log(SK_LOG_WARN,
               "store: %zu order(s) persisted without their DB stock; first: order %s: activity "
               "%" PRIu64 " is not in the database; run reconcile",
               n, ff->order_id, ff->aid);
}

int sk_store_orders_persist(sk_store *st, const struct sk_order *orders, size_t n,
                            struct sk_persist_result *res)
{
    if (res) *res = (struct sk_persist_result){0};
    st->errstr[0] = 0;
    if (n == 0) return 0;
    for (size_t i = 0; i < n; i++) {
        int rc = sk_store_check_order(st, &orders[i], i);
        if (rc) return rc;
    }
    int rc = sk_store_enter(st);
    if (rc) return rc;
    struct batch bt;
    rc = batch_init(st, &bt, orders, n);
    for (int round = 0; rc == 0; round++) {
        if ((rc = sk_tx_begin(st)) != 0) break;
        rc = round_tx(st, &bt, round);
        if (rc == SK_EEXIST && round + 1 < PERSIST_ROUNDS) {
            /* an id is present after all (rare): again, reading which */
            sk_tx_end(st, rc);
            rc = 0;
            continue;
        }
        if (rc == SK_EEXIST)
            rc = sk_store_fail(st, SK_ETIMEDOUT, "persist",
                               "other writers kept inserting the same orders");
        rc = sk_tx_end(st, rc);
        break;
    }
    struct sk_persist_result r = bt.res;
    struct first_failure first = bt.first;
    batch_free(&bt);
    if (rc) {
        char why[sizeof st->errstr];
        snprintf(why, sizeof why, "%s", st->errstr);
        return sk_store_set_err(st, rc, "%.400s (batch of %zu rolled back)", why, n);
    }
    st->errstr[0] = 0; /* a round that met a present id said so */
    if (r.stock_failures) log_stock_failures(r.stock_failures, &first);
    if (r.conflicts)
        sk_log(SK_LOG_ERROR,
               "store: %zu order id(s) of the batch already held by another admission (two "
               "histories that diverged): not inserted, recorded in order_conflicts; run "
               "reconcile",
               r.conflicts);
    if (res) *res = r;
    return 0;
}
