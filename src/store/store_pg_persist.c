/* store_pg_persist.c - persisting a batch of orders in PostgreSQL
 * (store.h sk_store_orders_persist, store_pg_int.h).
 *
 * One transaction with a multi-row INSERT ... SELECT FROM unnest(arrays)
 * (one statement for the batch), then one multi-row conditional UPDATE of
 * the summed quantities per activity (stock >= sum). Only when that
 * condition fails for an activity (DB stock drift) are its orders replayed
 * one by one with UPDATE activities SET stock = stock - $1 WHERE id = $2
 * AND stock >= $1, in batch order, each failure recorded - exactly what
 * the per-order SQLite path yields.
 *
 * The INSERT is a plain one first (PGQ_PERSIST_NEW): the usual batch holds
 * no id that is present, and ON CONFLICT's speculative insertion,
 * RETURNING and the sort that keeps the first of a repeated id cost the
 * server CPU on every row. When it meets a present id (unique violation:
 * a re-delivered entry, or an id twice in the batch) the transaction is
 * rolled back and run again with ON CONFLICT (order_id) DO NOTHING
 * RETURNING order_id (PGQ_PERSIST_SOME), whose ids say which orders were
 * new. The statements are prepared once per session. */
#include "store/store_pg_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/vec.h"

/* A growing text buffer for array literals. */
struct buf {
    char *p;
    size_t len, cap;
    int oom;
};

static void buf_add(struct buf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (SK_VEC_RESERVE(b->p, b->cap, b->len + n + 1, 4096)) {
        b->oom = 1;
        return;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

/* Appends one element to an array literal "{a,b}" (the caller adds the
 * braces): text quoted with " and \ escaped, numbers bare. */
static void arr_text(struct buf *b, const char *s)
{
    buf_add(b, b->len > 1 ? ",\"" : "\"", b->len > 1 ? 2 : 1);
    for (const char *q = s; *q;) {
        size_t run = strcspn(q, "\"\\"); /* copied at once: ids rarely hold either */
        buf_add(b, q, run);
        if (!q[run]) break;
        buf_add(b, "\\", 1);
        buf_add(b, q + run, 1);
        q += run + 1;
    }
    buf_add(b, "\"", 1);
}
static void arr_num(struct buf *b, struct sk_pg_num n)
{
    if (b->len > 1) buf_add(b, ",", 1);
    buf_add(b, n.s, strlen(n.s));
}

/* The batch's orders from unnest of the arrays $1..$7 (ord: the position),
 * each with its pay deadline: the activity's timeout, or the default when
 * the activity is not in the DB. */
#define INSERT_ORDERS                                                                              \
    "INSERT INTO orders (order_id, stream_id, activity_id, user_id, quantity, status,"             \
    " created_ms, pay_deadline_ms, idem_key)"                                                      \
    " SELECT i.order_id, i.stream_id, i.activity_id, i.user_id, i.quantity, 'created',"            \
    " i.created_ms, i.created_ms + coalesce(a.pay_timeout_s, " SK_STORE_PAY_TIMEOUT_DEFAULT_SQL    \
    ") * 1000, nullif(i.idem_key, '')"                                                             \
    " FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[],"               \
    " $6::bigint[], $7::text[]) WITH ORDINALITY"                                                   \
    " AS i(order_id, stream_id, activity_id, user_id, quantity, created_ms, idem_key, ord)"        \
    " LEFT JOIN activities a ON a.id = i.activity_id"

const char *const sk_pg_persist_sql[PGQ_COUNT] = {
    [PGQ_PERSIST_NEW] = INSERT_ORDERS,
    /* ORDER BY ord: a batch holding one id twice keeps the first. */
    [PGQ_PERSIST_SOME] = INSERT_ORDERS " ORDER BY i.ord ON CONFLICT (order_id) DO NOTHING"
                                       " RETURNING order_id",
    [PGQ_TAKE_STOCK] = "UPDATE activities a SET stock = a.stock - d.q"
                       " FROM unnest($1::bigint[], $2::bigint[]) AS d(id, q)"
                       " WHERE a.id = d.id AND a.stock >= d.q RETURNING a.id",
};

/* Step 1: inserts the batch, marks inserted[i] for the rows really added:
 * with PGQ_PERSIST_NEW (some == 0: SK_EEXIST when an id is present) or
 * PGQ_PERSIST_SOME. */
static int insert_batch(sk_store *st, const struct sk_order *orders, size_t n, int some,
                        char *inserted)
{
    struct buf ids = {0}, sids = {0}, aids = {0}, uids = {0}, qtys = {0}, cms = {0}, keys = {0};
    struct buf *all[] = {&ids, &sids, &aids, &uids, &qtys, &cms, &keys};
    for (size_t k = 0; k < 7; k++)
        buf_add(all[k], "{", 1);
    for (size_t i = 0; i < n; i++) {
        const struct sk_order *o = &orders[i];
        arr_text(&ids, o->order_id);
        arr_text(&sids, o->stream_id);
        arr_num(&aids, sk_pg_num_u64(o->activity_id));
        arr_num(&uids, sk_pg_num_i64((int64_t)o->user_id)); /* same bits */
        arr_num(&qtys, sk_pg_num_i64(o->quantity));
        arr_num(&cms, sk_pg_num_i64(o->created_ms));
        arr_text(&keys, o->idem_key);
    }
    int oom = 0;
    for (size_t k = 0; k < 7; k++) {
        buf_add(all[k], "}", 1);
        oom |= all[k]->oom;
    }
    int rc = 0;
    PGresult *r = NULL;
    if (oom) {
        rc = sk_store_set_err(st, SK_ENOMEM, "out of memory building a batch of %zu orders", n);
    } else {
        const char *p[] = {ids.p, sids.p, aids.p, uids.p, qtys.p, cms.p, keys.p};
        rc = sk_pg_run_prepared(st, &r, "insert orders", some ? PGQ_PERSIST_SOME : PGQ_PERSIST_NEW,
                                7, p);
    }
    for (size_t k = 0; k < 7; k++)
        free(all[k]->p);
    if (rc) return rc;
    if (!some) {
        memset(inserted, 1, n);
        PQclear(r);
        return 0;
    }
    /* Which of the batch were inserted: the first occurrence of each
     * returned id. */
    size_t rows = (size_t)PQntuples(r);
    const char **got = rows ? malloc(rows * sizeof *got) : NULL;
    if (rows && !got) {
        PQclear(r);
        return sk_store_set_err(st, SK_ENOMEM, "out of memory reading inserted orders");
    }
    for (size_t i = 0; i < rows; i++)
        got[i] = PQgetvalue(r, (int)i, 0);
    rc = sk_store_mark_inserted(st, orders, n, got, rows, inserted);
    free(got);
    PQclear(r);
    return rc;
}

/* Step 2: takes the summed units of each activity in one statement;
 * takes[k].ok says which activities had enough DB stock. Sorted by id so
 * two batches lock shared activity rows in one order. */
static int take_stock_batch(sk_store *st, struct sk_store_take *takes, size_t nt)
{
    if (nt == 0) return 0;
    sk_store_takes_sort(takes, nt);
    struct buf ids = {0}, units = {0};
    buf_add(&ids, "{", 1);
    buf_add(&units, "{", 1);
    for (size_t k = 0; k < nt; k++) {
        arr_num(&ids, sk_pg_num_u64(takes[k].aid));
        arr_num(&units, sk_pg_num_i64(takes[k].units));
    }
    buf_add(&ids, "}", 1);
    buf_add(&units, "}", 1);
    int rc = 0;
    PGresult *r = NULL;
    if (ids.oom || units.oom) {
        rc = sk_store_set_err(st, SK_ENOMEM, "out of memory taking stock");
    } else {
        const char *p[] = {ids.p, units.p};
        rc = sk_pg_run_prepared(st, &r, "take stock", PGQ_TAKE_STOCK, 2, p);
    }
    free(ids.p);
    free(units.p);
    if (rc) return rc;
    for (int i = 0; i < PQntuples(r); i++) {
        struct sk_store_take *t = sk_store_take_find(takes, nt, (uint64_t)sk_pg_i64(r, i, 0));
        if (t) t->ok = 1;
    }
    PQclear(r);
    return 0;
}

/* Step 3, for an activity whose summed update failed: order by order, the
 * conditional update; a failure is recorded with the DB stock seen then
 * (NULL when the activity row is absent). */
static int take_stock_one(sk_store *st, const struct sk_order *o, int64_t now,
                          struct sk_persist_result *res, struct sk_stock_failure *first)
{
    struct sk_pg_num q = sk_pg_num_i64(o->quantity), a = sk_pg_num_u64(o->activity_id);
    const char *p[] = {q.s, a.s};
    PGresult *r;
    int rc =
        sk_pg_run(st, &r, "take stock",
                  "UPDATE activities SET stock = stock - $1 WHERE id = $2 AND stock >= $1", 2, p);
    if (rc) return rc;
    long hit = sk_pg_changed(r);
    PQclear(r);
    if (hit) return 0;
    struct sk_pg_num t = sk_pg_num_i64(now);
    const char *fp[] = {t.s, a.s, o->order_id, q.s};
    rc = sk_pg_run(st, &r, "record stock failure",
                   "INSERT INTO stock_failures (at_ms, activity_id, order_id, quantity, db_stock)"
                   " VALUES ($1, $2, $3, $4, (SELECT stock FROM activities WHERE id = $2))"
                   " RETURNING db_stock",
                   4, fp);
    if (rc) return rc;
    int has_row = PQntuples(r) == 1 && !PQgetisnull(r, 0, 0);
    sk_store_count_stock_failure(res, first, o, has_row, has_row ? sk_pg_i64(r, 0, 0) : 0);
    PQclear(r);
    return 0;
}

/* Raises the marks of the batch's key sets (store.h, migration 6): one
 * statement per key set of the batch (usually one). */
static int upsert_marks(sk_store *st, const struct sk_order *orders, size_t n, int64_t now)
{
    struct sk_mark *m;
    size_t nm;
    int rc = sk_store_batch_marks(st, orders, n, &m, &nm);
    for (size_t i = 0; i < nm && rc == 0; i++) {
        struct sk_pg_num a = sk_pg_num_u64(m[i].activity_id), v = sk_pg_num_i64(m[i].adm),
                         t = sk_pg_num_i64(now);
        const char *p[] = {m[i].label, m[i].branch, a.s, v.s, t.s, m[i].order_id};
        PGresult *r;
        rc = sk_pg_run(st, &r, "raise mark",
                       SK_STORE_MARK_UPSERT("$1", "$2", "$3", "$4", "$5", "$6"), 6, p);
        if (rc == 0) PQclear(r);
    }
    free(m);
    return rc;
}

/* The orders of the batch that were not inserted: each a re-delivery
 * (counted a duplicate) or a conflict (store.h: counted and recorded in
 * order_conflicts), one read of the rows present for all of them. */
static int sort_present(sk_store *st, const struct sk_order *orders, size_t n, const char *inserted,
                        struct sk_persist_result *res)
{
    struct buf ids = {0};
    buf_add(&ids, "{", 1);
    size_t np = 0;
    for (size_t i = 0; i < n; i++)
        if (!inserted[i]) {
            arr_text(&ids, orders[i].order_id);
            np++;
        }
    buf_add(&ids, "}", 1);
    if (np == 0 || ids.oom) {
        free(ids.p);
        return np ? sk_store_set_err(st, SK_ENOMEM, "out of memory reading present orders") : 0;
    }
    PGresult *r;
    const char *p[] = {ids.p};
    int rc = sk_pg_run(st, &r, "read present orders",
                       "SELECT order_id, activity_id, user_id, quantity FROM orders"
                       " WHERE order_id = ANY($1::text[])",
                       1, p);
    free(ids.p);
    if (rc) return rc;
    int64_t now = sk_wall_ms();
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (inserted[i]) continue;
        const struct sk_order *o = &orders[i];
        int conflict = 0;
        for (int row = 0; row < PQntuples(r); row++)
            if (!strcmp(PQgetvalue(r, row, 0), o->order_id))
                conflict =
                    sk_store_is_conflict(o, (uint64_t)sk_pg_i64(r, row, 1),
                                         (uint64_t)sk_pg_i64(r, row, 2), sk_pg_i64(r, row, 3));
        if (!conflict) {
            res->duplicates++;
            continue;
        }
        res->conflicts++;
        struct sk_pg_num t = sk_pg_num_i64(now), a = sk_pg_num_u64(o->activity_id),
                         u = sk_pg_num_i64((int64_t)o->user_id), q = sk_pg_num_i64(o->quantity);
        const char *cp[] = {t.s, a.s, o->order_id, u.s, q.s, o->stream_id};
        rc = sk_pg_run(
            st, NULL, "record order conflict",
            "INSERT INTO order_conflicts (at_ms, activity_id, order_id, user_id, quantity,"
            " stream_id) VALUES ($1, $2, $3, $4, $5, $6)",
            6, cp);
    }
    PQclear(r);
    return rc;
}

/* The body of the persist transaction (between BEGIN and COMMIT). */
static int persist_tx(sk_store *st, const struct sk_order *orders, size_t n, int some,
                      char *inserted, struct sk_store_take *takes, struct sk_persist_result *res,
                      struct sk_stock_failure *first)
{
    int rc = insert_batch(st, orders, n, some, inserted);
    if (rc == 0) rc = sort_present(st, orders, n, inserted, res);
    if (rc) return rc;
    size_t nt = 0;
    for (size_t i = 0; i < n; i++) {
        if (!inserted[i]) continue; /* re-delivered (its stock was taken) or a conflict */
        res->inserted++;
        res->units += orders[i].quantity;
        sk_store_take_units(sk_store_take_add(takes, &nt, orders[i].activity_id),
                            orders[i].quantity);
    }
    if ((rc = take_stock_batch(st, takes, nt)) != 0) return rc;
    int64_t now = sk_wall_ms();
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (!inserted[i]) continue;
        struct sk_store_take *t = sk_store_take_find(takes, nt, orders[i].activity_id);
        if (t && !t->ok) rc = take_stock_one(st, &orders[i], now, res, first);
    }
    return rc ? rc : upsert_marks(st, orders, n, now);
}

int sk_pg_orders_persist(sk_store *st, const struct sk_order *orders, size_t n,
                         struct sk_persist_result *res, struct sk_stock_failure *first)
{
    int rc = sk_pg_enter(st);
    if (rc) return rc;
    char *inserted;
    struct sk_store_take *takes;
    if (sk_store_persist_scratch(st, n, &inserted, &takes) < 0) return SK_ENOMEM;
    for (int some = 0; some < 2; some++) {
        *res = (struct sk_persist_result){0};
        *first = (struct sk_stock_failure){0};
        rc = sk_pg_cmd(st, "BEGIN", "begin persist");
        if (rc == 0) rc = persist_tx(st, orders, n, some, inserted, takes, res, first);
        if (rc == SK_EEXIST && !some && (rc = sk_pg_cmd(st, "ROLLBACK", "rollback")) == 0)
            continue; /* an id is present (rare): again, learning which */
        rc = sk_pg_finish_tx(st, rc, "commit persist");
        break;
    }
    sk_store_persist_scratch_free(inserted, takes);
    return rc ? sk_store_batch_rolled_back(st, rc, n) : 0;
}
