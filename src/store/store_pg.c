/* store_pg.c - the PostgreSQL backend of store.h (libpq), the production
 * store. Same tables, constraints and semantics as store_sqlite.c.
 *
 * The libpq session (connecting, bounded statements, prepared reads, the
 * reset after a failure) is pg_conn.c's.
 *
 * Schema: migrations applied in order at open, each in its own transaction
 * holding a transaction-level advisory lock, so concurrent openers apply
 * each step once; schema_migrations has one row per applied step. The
 * migration list is kept in step with store_sqlite.c (same count, same
 * meaning), so schema versions compare across backends. order_id is
 * COLLATE "C": byte order, like SQLite, whatever the database's locale, so
 * the "<activity>-" prefix range scan and paging order hold.
 *
 * Persisting a batch: one transaction with a multi-row INSERT ... SELECT
 * FROM unnest(arrays) ON CONFLICT (order_id) DO NOTHING RETURNING order_id
 * (one statement for the batch), then one multi-row conditional UPDATE of
 * the summed quantities per activity (stock >= sum). Only when that
 * condition fails for an activity (DB stock drift) are its orders replayed
 * one by one with UPDATE activities SET stock = stock - $1 WHERE id = $2
 * AND stock >= $1, in batch order, each failure recorded - exactly what
 * the per-order SQLite path yields. */
#include "store/pg_conn_int.h"
#include "store/store_int.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/num.h"
#include "core/vec.h"

/* Key of the transaction-level advisory lock that serializes migrations:
 * an arbitrary constant (not "seckill" in ASCII, which would be
 * 32481099999964268), never changed, so every release takes the same lock. */
#define MIGRATION_LOCK_KEY "32199442939538540"
#define STR_(x) #x
#define STR(x) STR_(x)

/* Schema migrations, applied in order; entry i takes the version from i to
 * i + 1. Append only, and in step with store_sqlite.c. */
static const char *const migrations[] = {
    /* 1: activity definitions. */
    "CREATE TABLE activities ("
    " id BIGINT PRIMARY KEY CHECK (id >= 1),"
    " name TEXT NOT NULL CHECK (octet_length(name) BETWEEN 1 AND 127),"
    " stock_initial BIGINT NOT NULL CHECK (stock_initial >= 1),"
    " stock BIGINT NOT NULL CHECK (stock >= 0 AND stock <= stock_initial),"
    " per_user_limit BIGINT NOT NULL CHECK (per_user_limit >= 1),"
    " max_per_order BIGINT NOT NULL CHECK (max_per_order >= 1),"
    " start_ms BIGINT NOT NULL CHECK (start_ms >= 0),"
    " end_ms BIGINT NOT NULL CHECK (end_ms > start_ms),"
    " pay_timeout_s BIGINT NOT NULL CHECK (pay_timeout_s >= 1),"
    " state TEXT NOT NULL DEFAULT 'created'"
    "  CHECK (state IN ('created', 'preheated', 'open', 'closed')),"
    " created_ms BIGINT NOT NULL"
    ");",
    /* 2: orders, failed conditional stock updates, audit (see the SQLite
     * migration 2 for the why of each). */
    "CREATE TABLE orders ("
    " order_id TEXT COLLATE \"C\" PRIMARY KEY CHECK (octet_length(order_id) BETWEEN 1 AND 63),"
    " activity_id BIGINT NOT NULL CHECK (activity_id >= 1),"
    " user_id BIGINT NOT NULL,"
    " quantity BIGINT NOT NULL CHECK (quantity >= 1),"
    " status TEXT NOT NULL DEFAULT 'created'"
    "  CHECK (status IN ('created', 'paid', 'cancelled')),"
    " created_ms BIGINT NOT NULL,"
    " pay_deadline_ms BIGINT NOT NULL,"
    " paid_ms BIGINT,"
    " cancelled_ms BIGINT,"
    " stream_id TEXT NOT NULL"
    ");"
    "CREATE INDEX orders_status_deadline ON orders (status, pay_deadline_ms);"
    "CREATE INDEX orders_activity_status ON orders (activity_id, status);"
    "CREATE TABLE stock_failures ("
    " id BIGSERIAL PRIMARY KEY,"
    " at_ms BIGINT NOT NULL,"
    " activity_id BIGINT NOT NULL,"
    " order_id TEXT NOT NULL,"
    " quantity BIGINT NOT NULL,"
    " db_stock BIGINT"
    ");"
    "CREATE INDEX stock_failures_activity ON stock_failures (activity_id);"
    "CREATE TABLE audit ("
    " id BIGSERIAL PRIMARY KEY,"
    " at_ms BIGINT NOT NULL,"
    " activity_id BIGINT NOT NULL,"
    " kind TEXT NOT NULL,"
    " detail TEXT NOT NULL"
    ");"
    "CREATE INDEX audit_activity ON audit (activity_id, id);",
    /* 3: released_ms: set once the Redis release of a cancelled order is
     * known to be done; the partial index holds exactly the cancelled
     * orders still owing their release (see the SQLite migration 3). */
    "ALTER TABLE orders ADD COLUMN released_ms BIGINT;"
    "CREATE INDEX orders_unreleased ON orders (order_id)"
    " WHERE status = 'cancelled' AND released_ms IS NULL;",
    /* 4: the activity's own per-user rate limit (see the SQLite migration 4). */
    "ALTER TABLE activities ADD COLUMN rl_per_user_per_s BIGINT NOT NULL DEFAULT 0"
    " CHECK (rl_per_user_per_s >= 0);"
    "ALTER TABLE activities ADD COLUMN rl_burst BIGINT NOT NULL DEFAULT 0"
    " CHECK (rl_burst >= 0);",
    /* 5: stock segments (see the SQLite migration 5). */
    "ALTER TABLE activities ADD COLUMN segments INTEGER NOT NULL DEFAULT 1"
    " CHECK (segments >= 1);",
    /* 6: the rollback guard's watermark (see the SQLite migration 6). */
    "CREATE TABLE redis_marks ("
    " label TEXT COLLATE \"C\" PRIMARY KEY CHECK (octet_length(label) BETWEEN 1 AND 31),"
    " activity_id BIGINT NOT NULL CHECK (activity_id >= 1),"
    " adm BIGINT NOT NULL CHECK (adm >= 0),"
    " updated_ms BIGINT NOT NULL,"
    " order_id TEXT NOT NULL"
    ");"
    "CREATE INDEX redis_marks_activity ON redis_marks (activity_id);",
    /* 7: the waiting room (see the SQLite migration 7). */
    "ALTER TABLE activities ADD COLUMN wr_passes_per_s BIGINT NOT NULL DEFAULT 0"
    " CHECK (wr_passes_per_s >= 0);"
    "ALTER TABLE activities ADD COLUMN wr_pass_ttl_s BIGINT NOT NULL DEFAULT 0"
    " CHECK (wr_pass_ttl_s >= 0);"
    "ALTER TABLE activities ADD COLUMN wr_seed TEXT NOT NULL DEFAULT ''"
    " CHECK (octet_length(wr_seed) <= 64);",
    /* 8: histories that diverge (see the SQLite migration 8). */
    "ALTER TABLE orders ADD COLUMN idem_key TEXT"
    " CHECK (idem_key IS NULL OR octet_length(idem_key) BETWEEN 1 AND 64);"
    "ALTER TABLE redis_marks ADD COLUMN branch TEXT COLLATE \"C\" NOT NULL DEFAULT ''"
    " CHECK (octet_length(branch) <= 15);"
    "ALTER TABLE redis_marks DROP CONSTRAINT redis_marks_pkey;"
    "ALTER TABLE redis_marks ADD PRIMARY KEY (label, branch);"
    "CREATE TABLE order_conflicts ("
    " id BIGSERIAL PRIMARY KEY,"
    " at_ms BIGINT NOT NULL,"
    " activity_id BIGINT NOT NULL,"
    " order_id TEXT NOT NULL,"
    " user_id BIGINT NOT NULL,"
    " quantity BIGINT NOT NULL,"
    " stream_id TEXT NOT NULL"
    ");"
    "CREATE INDEX order_conflicts_activity ON order_conflicts (activity_id);",
};
#define N_MIGRATIONS ((int)(sizeof migrations / sizeof migrations[0]))

/* ---- schema ---------------------------------------------------------- */

static int64_t i64_at(const PGresult *r, int row, int col)
{
    if (PQgetisnull(r, row, col)) return 0;
    const char *v = PQgetvalue(r, row, col);
    int64_t x = 0; /* a column we declared BIGINT: always a number */
    sk_num_i64(v, strlen(v), &x);
    return x;
}

static int read_version(sk_store *st, int *v, const char *sql)
{
    PGresult *r;
    int rc = sk_pg_run(st, &r, "read schema version", sql, 0, NULL);
    if (rc) return rc;
    if (PQntuples(r) != 1)
        rc = sk_store_set_err(st, SK_EDB, "postgres %s: no schema version", st->pg_where);
    else
        *v = (int)i64_at(r, 0, 0);
    PQclear(r);
    return rc;
}

static int migrate(sk_store *st)
{
    /* Each pass: one transaction that takes the lock (waiting while another
     * opener applies a step), reads the version, applies one step. */
    static const char lock_and_read[] = "BEGIN;"
                                        "SELECT pg_advisory_xact_lock(" MIGRATION_LOCK_KEY ");"
                                        "CREATE TABLE IF NOT EXISTS schema_migrations ("
                                        " version INTEGER PRIMARY KEY, applied_ms BIGINT NOT NULL);"
                                        "SELECT coalesce(max(version), 0) FROM schema_migrations";
    for (;;) {
        int v = 0;
        int rc = read_version(st, &v, lock_and_read);
        if (rc == 0 && v == N_MIGRATIONS) return sk_pg_cmd(st, "COMMIT", "commit migration check");
        if (rc == 0 && v > N_MIGRATIONS)
            rc = sk_store_set_err(
                st, SK_EDB,
                "postgres %s: schema version %d is newer than this binary (%d); upgrade "
                "seckill",
                st->pg_where, v, N_MIGRATIONS);
        else if (rc == 0) {
            char ver[16], ms[24];
            snprintf(ver, sizeof ver, "%d", v + 1);
            snprintf(ms, sizeof ms, "%" PRId64, sk_wall_ms());
            const char *p[] = {ver, ms};
            rc = sk_pg_cmd(st, migrations[v], "migration");
            if (rc == 0)
                rc = sk_pg_run(
                    st, NULL, "record migration",
                    "INSERT INTO schema_migrations (version, applied_ms) VALUES ($1, $2)", 2, p);
            if (rc == 0) rc = sk_pg_cmd(st, "COMMIT", "commit migration");
            if (rc) {
                char why[sizeof st->errstr]; /* the message is rewritten in place */
                snprintf(why, sizeof why, "%s", st->errstr);
                sk_store_set_err(st, rc, "%.400s (schema migration %d failed)", why, v + 1);
            }
        }
        if (rc) {
            char why[sizeof st->errstr];
            snprintf(why, sizeof why, "%s", st->errstr);
            if (!st->pg_broken) sk_pg_cmd(st, "ROLLBACK", "rollback migration");
            return sk_store_set_err(st, rc == SK_ENOMEM ? rc : SK_EDB, "%s", why);
        }
    }
}

static int pg_schema_version(sk_store *st, int *version)
{
    int rc = sk_pg_enter(st);
    if (rc) return rc;
    return read_version(st, version, "SELECT coalesce(max(version), 0) FROM schema_migrations");
}

/* ---- activities ------------------------------------------------------ */

static void read_row(const PGresult *r, int row, struct sk_activity *a)
{
    memset(a, 0, sizeof *a);
    a->id = (uint64_t)i64_at(r, row, 0);
    snprintf(a->name, sizeof a->name, "%s", PQgetvalue(r, row, 1));
    a->stock = i64_at(r, row, 2);
    a->stock_db = i64_at(r, row, 3);
    a->per_user_limit = i64_at(r, row, 4);
    a->max_per_order = i64_at(r, row, 5);
    a->start_ms = i64_at(r, row, 6);
    a->end_ms = i64_at(r, row, 7);
    a->pay_timeout_s = i64_at(r, row, 8);
    snprintf(a->state, sizeof a->state, "%s", PQgetvalue(r, row, 9));
    a->created_ms = i64_at(r, row, 10);
    a->rl_per_user_per_s = i64_at(r, row, 11);
    a->rl_burst = i64_at(r, row, 12);
    a->segments = i64_at(r, row, 13);
    a->wr_passes_per_s = i64_at(r, row, 14);
    a->wr_pass_ttl_s = i64_at(r, row, 15);
    snprintf(a->wr_seed, sizeof a->wr_seed, "%s", PQgetvalue(r, row, 16));
}

/* Decimal text of a number, for a text parameter. */
struct num {
    char s[24];
};
static struct num num_i64(int64_t v)
{
    struct num n;
    snprintf(n.s, sizeof n.s, "%" PRId64, v);
    return n;
}
static struct num num_u64(uint64_t v)
{
    struct num n;
    snprintf(n.s, sizeof n.s, "%" PRIu64, v);
    return n;
}

/* Rows changed by the last command (PQcmdTuples). */
static long changed(PGresult *r)
{
    const char *n = PQcmdTuples(r); /* "" for a command that counts nothing */
    uint64_t x = 0;
    sk_num_u64(n, strlen(n), &x);
    return (long)x;
}

static int pg_activity_insert(sk_store *st, const struct sk_activity *v)
{
    int rc = sk_pg_enter(st);
    if (rc) return rc;
    struct num id = num_u64(v->id), stock = num_i64(v->stock), lim = num_i64(v->per_user_limit),
               mpo = num_i64(v->max_per_order), s = num_i64(v->start_ms), e = num_i64(v->end_ms),
               pay = num_i64(v->pay_timeout_s), cr = num_i64(v->created_ms),
               rlr = num_i64(v->rl_per_user_per_s), rlb = num_i64(v->rl_burst),
               seg = num_i64(v->segments), wrr = num_i64(v->wr_passes_per_s),
               wrt = num_i64(v->wr_pass_ttl_s);
    const char *p[] = {id.s,     v->name, stock.s, lim.s, mpo.s, s.s,   e.s,   pay.s,
                       v->state, cr.s,    rlr.s,   rlb.s, seg.s, wrr.s, wrt.s, v->wr_seed};
    rc = sk_pg_run(
        st, NULL, "insert activity",
        "INSERT INTO activities (id, name, stock_initial, stock, per_user_limit,"
        " max_per_order, start_ms, end_ms, pay_timeout_s, state, created_ms,"
        " rl_per_user_per_s, rl_burst, segments, wr_passes_per_s, wr_pass_ttl_s, wr_seed)"
        " VALUES ($1, $2, $3, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)",
        16, p);
    if (rc == SK_EEXIST)
        sk_store_set_err(st, SK_EEXIST, "activity %" PRIu64 " already exists", v->id);
    return rc;
}

static int pg_activity_get(sk_store *st, uint64_t id, struct sk_activity *out)
{
    int rc = sk_pg_enter(st);
    if (rc) return rc;
    struct num n = num_u64(id);
    const char *p[] = {n.s};
    PGresult *r;
    if ((rc = sk_pg_run_prepared(st, &r, "read activity", PGQ_ACTIVITY_GET, 1, p)) != 0) return rc;
    if (PQntuples(r) == 1)
        read_row(r, 0, out);
    else
        rc = sk_store_no_activity(st, id);
    PQclear(r);
    return rc;
}

static int pg_activity_list(sk_store *st, struct sk_activity **out, size_t *n)
{
    int rc = sk_pg_enter(st);
    if (rc) return rc;
    PGresult *r;
    if ((rc = sk_pg_run(st, &r, "list activities",
                        "SELECT " SK_STORE_ACTIVITY_COLUMNS " FROM activities ORDER BY id", 0,
                        NULL)) != 0)
        return rc;
    int rows = PQntuples(r);
    struct sk_activity *arr = rows ? calloc((size_t)rows, sizeof *arr) : NULL;
    if (rows && !arr) {
        PQclear(r);
        return sk_store_set_err(st, SK_ENOMEM, "out of memory listing activities");
    }
    for (int i = 0; i < rows; i++)
        read_row(r, i, &arr[i]);
    PQclear(r);
    *out = arr;
    *n = (size_t)rows;
    return 0;
}

/* Runs a one-row UPDATE/DELETE; SK_ENOTFOUND when no row matched. */
static int change_one(sk_store *st, const char *sql, int np, const char *const *p, uint64_t id,
                      const char *what)
{
    PGresult *r;
    int rc = sk_pg_run(st, &r, what, sql, np, p);
    if (rc) return rc;
    if (changed(r) == 0) rc = sk_store_no_activity(st, id);
    PQclear(r);
    return rc;
}

static int pg_activity_set_state(sk_store *st, uint64_t id, const char *state)
{
    int rc = sk_pg_enter(st);
    if (rc) return rc;
    struct num n = num_u64(id);
    const char *p[] = {state, n.s};
    return change_one(st, "UPDATE activities SET state = $1 WHERE id = $2", 2, p, id,
                      "update activity state");
}

static int pg_activity_delete(sk_store *st, uint64_t id)
{
    int rc = sk_pg_enter(st);
    if (rc) return rc;
    struct num n = num_u64(id);
    const char *p[] = {n.s};
    rc = change_one(st, "DELETE FROM activities WHERE id = $1", 1, p, id, "delete activity");
    if (rc) return rc;
    /* a re-created id starts a new history: its old watermark would read as
     * a Redis that went back in time */
    PGresult *r;
    rc = sk_pg_run(st, &r, "delete marks", "DELETE FROM redis_marks WHERE activity_id = $1", 1, p);
    if (rc == 0) PQclear(r);
    return rc;
}

static int pg_activity_set_db_stock(sk_store *st, uint64_t id, int64_t stock)
{
    int rc = sk_pg_enter(st);
    if (rc) return rc;
    struct num s = num_i64(stock), n = num_u64(id);
    const char *p[] = {s.s, n.s};
    /* a CHECK failure: store.c says which */
    return change_one(st, "UPDATE activities SET stock = $1 WHERE id = $2", 2, p, id,
                      "set DB stock");
}

static int pg_activity_set_pass_rate(sk_store *st, uint64_t id, int64_t rate)
{
    int rc = sk_pg_enter(st);
    if (rc) return rc;
    struct num r = num_i64(rate), n = num_u64(id);
    const char *p[] = {r.s, n.s};
    return change_one(st,
                      "UPDATE activities SET wr_passes_per_s = $1 WHERE id = $2 AND"
                      " wr_passes_per_s > 0",
                      2, p, id, "set pass rate");
}

static int pg_activity_ids(sk_store *st, uint64_t **out, size_t *n)
{
    int rc = sk_pg_enter(st);
    if (rc) return rc;
    PGresult *r;
    if ((rc = sk_pg_run(st, &r, "list activity ids", "SELECT id FROM activities ORDER BY id", 0,
                        NULL)) != 0)
        return rc;
    int rows = PQntuples(r);
    uint64_t *arr = rows ? malloc((size_t)rows * sizeof *arr) : NULL;
    if (rows && !arr) {
        PQclear(r);
        return sk_store_set_err(st, SK_ENOMEM, "out of memory listing activity ids");
    }
    for (int i = 0; i < rows; i++)
        arr[i] = (uint64_t)i64_at(r, i, 0);
    PQclear(r);
    *out = arr;
    *n = (size_t)rows;
    return 0;
}

/* ---- orders ---------------------------------------------------------- */

/* The status column of row `row` as enum sk_order_status (-1: another
 * text). */
static int status_at(const PGresult *r, int row, int col)
{
    return sk_store_status_from_text(PQgetvalue(r, row, col));
}

static void read_order(const PGresult *r, int row, struct sk_order *o)
{
    memset(o, 0, sizeof *o);
    snprintf(o->order_id, sizeof o->order_id, "%s", PQgetvalue(r, row, 0));
    snprintf(o->stream_id, sizeof o->stream_id, "%s", PQgetvalue(r, row, 1));
    o->activity_id = (uint64_t)i64_at(r, row, 2);
    o->user_id = (uint64_t)i64_at(r, row, 3); /* same bits, see store.h */
    o->quantity = i64_at(r, row, 4);
    o->status = status_at(r, row, 5);
    o->created_ms = i64_at(r, row, 6);
    o->pay_deadline_ms = i64_at(r, row, 7);
    o->paid_ms = i64_at(r, row, 8); /* NULL reads as 0 */
    o->cancelled_ms = i64_at(r, row, 9);
    o->released_ms = i64_at(r, row, 10);
    snprintf(o->idem_key, sizeof o->idem_key, "%s", PQgetvalue(r, row, 11)); /* NULL reads "" */
}

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
    for (const char *q = s; *q; q++) {
        if (*q == '"' || *q == '\\') buf_add(b, "\\", 1);
        buf_add(b, q, 1);
    }
    buf_add(b, "\"", 1);
}
static void arr_num(struct buf *b, struct num n)
{
    if (b->len > 1) buf_add(b, ",", 1);
    buf_add(b, n.s, strlen(n.s));
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Per-activity sum of the units of the inserted orders. */
struct take {
    uint64_t aid;
    int64_t units;
    int ok; /* the aggregated conditional update matched */
};

static int cmp_take(const void *a, const void *b)
{
    uint64_t x = ((const struct take *)a)->aid, y = ((const struct take *)b)->aid;
    return x < y ? -1 : x > y;
}

/* Step 1: inserts the batch, marks inserted[i] for the rows really added. */
static int insert_batch(sk_store *st, const struct sk_order *orders, size_t n, char *inserted)
{
    struct buf ids = {0}, sids = {0}, aids = {0}, uids = {0}, qtys = {0}, cms = {0}, keys = {0};
    struct buf *all[] = {&ids, &sids, &aids, &uids, &qtys, &cms, &keys};
    for (size_t k = 0; k < 7; k++)
        buf_add(all[k], "{", 1);
    for (size_t i = 0; i < n; i++) {
        const struct sk_order *o = &orders[i];
        arr_text(&ids, o->order_id);
        arr_text(&sids, o->stream_id);
        arr_num(&aids, num_u64(o->activity_id));
        arr_num(&uids, num_i64((int64_t)o->user_id)); /* same bits */
        arr_num(&qtys, num_i64(o->quantity));
        arr_num(&cms, num_i64(o->created_ms));
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
        /* ORDER BY ord: a batch holding one id twice keeps the first. The
         * pay deadline uses the activity's timeout, or the default when the
         * activity is not in the DB. */
        rc = sk_pg_run(
            st, &r, "insert orders",
            "INSERT INTO orders (order_id, stream_id, activity_id, user_id, quantity,"
            " status, created_ms, pay_deadline_ms, idem_key)"
            " SELECT i.order_id, i.stream_id, i.activity_id, i.user_id, i.quantity,"
            " 'created', i.created_ms,"
            " i.created_ms + coalesce(a.pay_timeout_s, " STR(
                SK_ACTIVITY_PAY_TIMEOUT_DEFAULT) ") * 1000, nullif(i.idem_key, '')"
                                                 " FROM unnest($1::text[], $2::text[], "
                                                 "$3::bigint[], $4::bigint[],"
                                                 " $5::bigint[], $6::bigint[], $7::text[])"
                                                 " WITH ORDINALITY"
                                                 " AS i(order_id, stream_id, activity_id, user_id, "
                                                 "quantity, created_ms, idem_key, ord)"
                                                 " LEFT JOIN activities a ON a.id = i.activity_id"
                                                 " ORDER BY i.ord"
                                                 " ON CONFLICT (order_id) DO NOTHING RETURNING "
                                                 "order_id",
            7, p);
    }
    for (size_t k = 0; k < 7; k++)
        free(all[k]->p);
    if (rc) return rc;
    /* Which of the batch were inserted: the first occurrence of each
     * returned id. */
    int rows = PQntuples(r);
    const char **got = rows ? malloc((size_t)rows * sizeof *got) : NULL;
    char *used = rows ? calloc((size_t)rows, 1) : NULL;
    if (rows && (!got || !used)) {
        free(got);
        free(used);
        PQclear(r);
        return sk_store_set_err(st, SK_ENOMEM, "out of memory reading inserted orders");
    }
    for (int i = 0; i < rows; i++)
        got[i] = PQgetvalue(r, i, 0);
    if (rows) qsort(got, (size_t)rows, sizeof *got, cmp_str); /* qsort(NULL, 0) is UB */
    for (size_t i = 0; i < n; i++) {
        const char *key = orders[i].order_id;
        const char **hit = rows ? bsearch(&key, got, (size_t)rows, sizeof *got, cmp_str) : NULL;
        inserted[i] = 0;
        if (hit && !used[hit - got]) {
            used[hit - got] = 1;
            inserted[i] = 1;
        }
    }
    free(got);
    free(used);
    PQclear(r);
    return 0;
}

/* Step 2: takes the summed units of each activity in one statement;
 * takes[k].ok says which activities had enough DB stock. Sorted by id so
 * two batches lock shared activity rows in one order. */
static int take_stock_batch(sk_store *st, struct take *takes, size_t nt)
{
    if (nt == 0) return 0;
    qsort(takes, nt, sizeof *takes, cmp_take);
    struct buf ids = {0}, units = {0};
    buf_add(&ids, "{", 1);
    buf_add(&units, "{", 1);
    for (size_t k = 0; k < nt; k++) {
        arr_num(&ids, num_u64(takes[k].aid));
        arr_num(&units, num_i64(takes[k].units));
    }
    buf_add(&ids, "}", 1);
    buf_add(&units, "}", 1);
    int rc = 0;
    PGresult *r = NULL;
    if (ids.oom || units.oom) {
        rc = sk_store_set_err(st, SK_ENOMEM, "out of memory taking stock");
    } else {
        const char *p[] = {ids.p, units.p};
        rc = sk_pg_run(st, &r, "take stock",
                       "UPDATE activities a SET stock = a.stock - d.q"
                       " FROM unnest($1::bigint[], $2::bigint[]) AS d(id, q)"
                       " WHERE a.id = d.id AND a.stock >= d.q RETURNING a.id",
                       2, p);
    }
    free(ids.p);
    free(units.p);
    if (rc) return rc;
    for (int i = 0; i < PQntuples(r); i++) {
        struct take key = {.aid = (uint64_t)i64_at(r, i, 0)};
        struct take *t = bsearch(&key, takes, nt, sizeof *takes, cmp_take);
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
    struct num q = num_i64(o->quantity), a = num_u64(o->activity_id);
    const char *p[] = {q.s, a.s};
    PGresult *r;
    int rc =
        sk_pg_run(st, &r, "take stock",
                  "UPDATE activities SET stock = stock - $1 WHERE id = $2 AND stock >= $1", 2, p);
    if (rc) return rc;
    long hit = changed(r);
    PQclear(r);
    if (hit) return 0;
    struct num t = num_i64(now);
    const char *fp[] = {t.s, a.s, o->order_id, q.s};
    rc = sk_pg_run(st, &r, "record stock failure",
                   "INSERT INTO stock_failures (at_ms, activity_id, order_id, quantity, db_stock)"
                   " VALUES ($1, $2, $3, $4, (SELECT stock FROM activities WHERE id = $2))"
                   " RETURNING db_stock",
                   4, fp);
    if (rc) return rc;
    int has_row = PQntuples(r) == 1 && !PQgetisnull(r, 0, 0);
    sk_store_count_stock_failure(res, first, o, has_row, has_row ? i64_at(r, 0, 0) : 0);
    PQclear(r);
    return 0;
}

/* Ends a transaction: COMMIT when rc is 0, else ROLLBACK keeping the error
 * of rc (a broken connection rolls back on the server by itself). */
static int finish_tx(sk_store *st, int rc, const char *what)
{
    if (rc == 0) rc = sk_pg_cmd(st, "COMMIT", what);
    if (rc) {
        char why[sizeof st->errstr];
        snprintf(why, sizeof why, "%s", st->errstr);
        if (!st->pg_broken) sk_pg_cmd(st, "ROLLBACK", "rollback");
        sk_store_set_err(st, rc, "%s", why);
    }
    return rc;
}

/* Raises the marks of the batch's key sets (store.h, migration 6): one
 * statement per key set of the batch (usually one). */
static int upsert_marks(sk_store *st, const struct sk_order *orders, size_t n, int64_t now)
{
    struct sk_mark *m = malloc(n * sizeof *m);
    if (!m) return sk_store_set_err(st, SK_ENOMEM, "out of memory raising marks");
    size_t nm = sk_store_batch_marks(orders, n, m);
    int rc = 0;
    for (size_t i = 0; i < nm && rc == 0; i++) {
        struct num a = num_u64(m[i].activity_id), v = num_i64(m[i].adm), t = num_i64(now);
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
                conflict = sk_store_is_conflict(o, (uint64_t)i64_at(r, row, 1),
                                                (uint64_t)i64_at(r, row, 2), i64_at(r, row, 3));
        if (!conflict) {
            res->duplicates++;
            continue;
        }
        res->conflicts++;
        struct num t = num_i64(now), a = num_u64(o->activity_id), u = num_i64((int64_t)o->user_id),
                   q = num_i64(o->quantity);
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
static int persist_tx(sk_store *st, const struct sk_order *orders, size_t n, char *inserted,
                      struct take *takes, struct sk_persist_result *res,
                      struct sk_stock_failure *first)
{
    int rc = insert_batch(st, orders, n, inserted);
    if (rc == 0) rc = sort_present(st, orders, n, inserted, res);
    if (rc) return rc;
    size_t nt = 0;
    for (size_t i = 0; i < n; i++) {
        if (!inserted[i]) continue; /* re-delivered (its stock was taken) or a conflict */
        res->inserted++;
        res->units += orders[i].quantity;
        size_t k = 0;
        while (k < nt && takes[k].aid != orders[i].activity_id)
            k++;
        if (k == nt) takes[nt++] = (struct take){.aid = orders[i].activity_id};
        takes[k].units += orders[i].quantity;
    }
    if ((rc = take_stock_batch(st, takes, nt)) != 0) return rc;
    int64_t now = sk_wall_ms();
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (!inserted[i]) continue;
        struct take key = {.aid = orders[i].activity_id};
        struct take *t = bsearch(&key, takes, nt, sizeof *takes, cmp_take);
        if (t && !t->ok) rc = take_stock_one(st, &orders[i], now, res, first);
    }
    return rc ? rc : upsert_marks(st, orders, n, now);
}

static int pg_orders_persist(sk_store *st, const struct sk_order *orders, size_t n,
                             struct sk_persist_result *res, struct sk_stock_failure *first)
{
    int rc = sk_pg_enter(st);
    if (rc) return rc;
    char *inserted = malloc(n);
    struct take *takes = malloc(n * sizeof *takes);
    if (!inserted || !takes) {
        free(inserted);
        free(takes);
        return sk_store_set_err(st, SK_ENOMEM, "out of memory persisting %zu orders", n);
    }
    rc = sk_pg_cmd(st, "BEGIN", "begin persist");
    if (rc == 0) rc = persist_tx(st, orders, n, inserted, takes, res, first);
    rc = finish_tx(st, rc, "commit persist");
    free(inserted);
    free(takes);
    return rc ? sk_store_batch_rolled_back(st, rc, n) : 0;
}

static int pg_order_get(sk_store *st, const char *order_id, struct sk_order *out)
{
    int rc = sk_pg_enter(st);
    if (rc) return rc;
    const char *p[] = {order_id};
    PGresult *r;
    if ((rc = sk_pg_run_prepared(st, &r, "read order", PGQ_ORDER_GET, 1, p)) != 0) return rc;
    if (PQntuples(r) == 1)
        read_order(r, 0, out);
    else
        rc = sk_store_no_order(st, order_id);
    PQclear(r);
    return rc;
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
    struct num t = num_i64(now);
    const char *p[] = {t.s, order_id};
    PGresult *r;
    int rc = sk_pg_run(st, &r, what, sql, 2, p);
    if (rc) return rc;
    long hit = changed(r);
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
    struct num t = num_i64(now);
    const char *p[] = {t.s, order_id};
    PGresult *r;
    int rc = sk_pg_run(st, &r, "update order status", sql, 2, p);
    if (rc) return rc;
    if (PQntuples(r) != 1) {
        PQclear(r);
        return sk_store_no_order(st, order_id);
    }
    int found = status_at(r, 0, 0);
    long hit = (long)i64_at(r, 0, 1);
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

static int pg_order_pay(sk_store *st, const char *order_id, int64_t now_ms, int *before)
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

static int pg_order_cancel(sk_store *st, const char *order_id, int64_t now_ms, int *before)
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
        read_order(r, i, &out[(*n)++]);
    PQclear(r);
    return 0;
}

static struct num limit_arg(size_t limit)
{
    return num_u64(limit > INT64_MAX ? INT64_MAX : limit);
}

static int pg_orders_expired(sk_store *st, int64_t now_ms, size_t limit, struct sk_order *out,
                             size_t *n)
{
    struct num t = num_i64(now_ms), l = limit_arg(limit);
    const char *p[] = {t.s, l.s};
    return read_orders(st,
                       "SELECT " SK_STORE_ORDER_COLUMNS " FROM orders"
                       " WHERE status = 'created' AND pay_deadline_ms < $1"
                       " ORDER BY pay_deadline_ms LIMIT $2",
                       2, p, limit, out, n);
}

static int pg_orders_list(sk_store *st, uint64_t activity_id, const char *lo, const char *hi,
                          size_t limit, struct sk_order *out, size_t *n)
{
    /* order_id is COLLATE "C": the range compares bytes, as store.c wants;
     * activity_id + 0: the primary-key range is the plan (on a freshly
     * filled table the planner otherwise takes orders_activity_status and
     * sorts the whole activity for every page) */
    struct num a = num_u64(activity_id), l = limit_arg(limit);
    const char *p[] = {lo, hi, a.s, l.s};
    return read_orders(st,
                       "SELECT " SK_STORE_ORDER_COLUMNS " FROM orders"
                       " WHERE order_id > $1 AND order_id < $2 AND activity_id + 0 = $3"
                       " ORDER BY order_id LIMIT $4",
                       4, p, limit, out, n);
}

static int pg_orders_count(sk_store *st, uint64_t activity_id, struct sk_order_counts *out)
{
    int rc = sk_pg_enter(st);
    if (rc) return rc;
    struct num a = num_u64(activity_id);
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
            out->stock_failures = i64_at(r, i, 1);
            out->stock_failure_units = i64_at(r, i, 2);
            continue;
        }
        if (!strcmp(PQgetvalue(r, i, 0), "conflicts")) {
            out->conflicts = i64_at(r, i, 1);
            continue;
        }
        int k = status_at(r, i, 0);
        if (k < 0) continue; /* the CHECK makes this impossible */
        out->orders[k] = i64_at(r, i, 1);
        out->units[k] = i64_at(r, i, 2);
    }
    PQclear(r);
    return 0;
}

/* The audit insert, inside the caller's transaction or alone. */
static int audit_insert(sk_store *st, int64_t at_ms, uint64_t activity_id, const char *kind,
                        const char *detail)
{
    struct num t = num_i64(at_ms), a = num_u64(activity_id);
    const char *p[] = {t.s, a.s, kind, detail};
    return sk_pg_run(st, NULL, "insert audit row",
                     "INSERT INTO audit (at_ms, activity_id, kind, detail) VALUES ($1, $2, $3, $4)",
                     4, p);
}

static int pg_audit_add(sk_store *st, int64_t at_ms, uint64_t activity_id, const char *kind,
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

static int pg_audit_list(sk_store *st, uint64_t activity_id, struct sk_audit **out, size_t *n)
{
    int rc = sk_pg_enter(st);
    if (rc) return rc;
    struct num a = num_u64(activity_id);
    const char *p[] = {a.s};
    PGresult *r;
    if ((rc = sk_pg_run(st, &r, "list audit rows",
                        "SELECT id, at_ms, activity_id, kind, detail FROM audit"
                        " WHERE $1::bigint = 0 OR activity_id = $1 ORDER BY id",
                        1, p)) != 0)
        return rc;
    int rows = PQntuples(r);
    struct sk_audit *arr = rows ? calloc((size_t)rows, sizeof *arr) : NULL;
    if (rows && !arr) {
        PQclear(r);
        return sk_store_set_err(st, SK_ENOMEM, "out of memory listing audit rows");
    }
    for (int i = 0; i < rows; i++) {
        arr[i].id = i64_at(r, i, 0);
        arr[i].at_ms = i64_at(r, i, 1);
        arr[i].activity_id = (uint64_t)i64_at(r, i, 2);
        snprintf(arr[i].kind, sizeof arr[i].kind, "%s", PQgetvalue(r, i, 3));
        snprintf(arr[i].detail, sizeof arr[i].detail, "%s", PQgetvalue(r, i, 4));
    }
    PQclear(r);
    *out = arr;
    *n = (size_t)rows;
    return 0;
}

static int pg_marks_list(sk_store *st, uint64_t activity_id, struct sk_mark **out, size_t *n)
{
    int rc = sk_pg_enter(st);
    if (rc) return rc;
    struct num a = num_u64(activity_id);
    const char *p[] = {a.s};
    PGresult *r;
    if ((rc = sk_pg_run(
             st, &r, "list marks",
             "SELECT label, activity_id, adm, updated_ms, order_id, branch FROM redis_marks"
             " WHERE $1::bigint = 0 OR activity_id = $1 ORDER BY label, branch",
             1, p)) != 0)
        return rc;
    int rows = PQntuples(r);
    struct sk_mark *arr = rows ? calloc((size_t)rows, sizeof *arr) : NULL;
    if (rows && !arr) {
        PQclear(r);
        return sk_store_set_err(st, SK_ENOMEM, "out of memory listing marks");
    }
    for (int i = 0; i < rows; i++) {
        snprintf(arr[i].label, sizeof arr[i].label, "%s", PQgetvalue(r, i, 0));
        arr[i].activity_id = (uint64_t)i64_at(r, i, 1);
        arr[i].adm = i64_at(r, i, 2);
        arr[i].updated_ms = i64_at(r, i, 3);
        snprintf(arr[i].order_id, sizeof arr[i].order_id, "%s", PQgetvalue(r, i, 4));
        snprintf(arr[i].branch, sizeof arr[i].branch, "%s", PQgetvalue(r, i, 5));
    }
    PQclear(r);
    *out = arr;
    *n = (size_t)rows;
    return 0;
}

/* ---- payment timeout and reconciliation (store.h, migration 3) ------- */

static int pg_order_mark_released(sk_store *st, const char *order_id, int64_t now_ms)
{
    int rc = sk_pg_enter(st);
    if (rc) return rc;
    int hit = update_order(st,
                           "UPDATE orders SET released_ms = $1 WHERE order_id = $2"
                           " AND status = 'cancelled' AND released_ms IS NULL",
                           now_ms, order_id, "mark order released");
    return sk_store_release_end(st, hit, order_id, read_status);
}

static int pg_orders_unreleased(sk_store *st, const char *after, size_t limit, struct sk_order *out,
                                size_t *n)
{
    struct num l = limit_arg(limit);
    const char *p[] = {after, l.s};
    /* The WHERE repeats the partial index's condition, so the index is used. */
    return read_orders(st,
                       "SELECT " SK_STORE_ORDER_COLUMNS " FROM orders"
                       " WHERE status = 'cancelled' AND released_ms IS NULL"
                       " AND order_id > $1 ORDER BY order_id LIMIT $2",
                       2, p, limit, out, n);
}

/* DB stock, expected DB stock and initial stock of an activity, in one
 * statement (one snapshot). */
static int stock_check(sk_store *st, uint64_t id, int64_t *stock, int64_t *expected,
                       int64_t *initial)
{
    struct num a = num_u64(id);
    const char *p[] = {a.s};
    PGresult *r;
    int rc = sk_pg_run(st, &r, "check DB stock",
                       "SELECT a.stock, a.stock_initial - coalesce((SELECT sum(o.quantity)"
                       " FROM orders o WHERE o.activity_id = a.id AND o.status <> 'cancelled'), 0),"
                       " a.stock_initial FROM activities a WHERE a.id = $1",
                       1, p);
    if (rc) return rc;
    if (PQntuples(r) != 1) {
        rc = sk_store_no_activity(st, id);
    } else {
        *stock = i64_at(r, 0, 0);
        *expected = i64_at(r, 0, 1);
        if (initial) *initial = i64_at(r, 0, 2);
    }
    PQclear(r);
    return rc;
}

static int pg_db_stock_check(sk_store *st, uint64_t id, int64_t *stock, int64_t *expected)
{
    int rc = sk_pg_enter(st);
    if (rc) return rc;
    return stock_check(st, id, stock, expected, NULL);
}

/* The body of the repair transaction (between BEGIN and COMMIT). */
static int stock_repair_tx(sk_store *st, uint64_t id, int64_t now_ms, int64_t *stock,
                           int64_t *expected)
{
    struct num a = num_u64(id);
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
    int64_t initial = 0;
    if ((rc = stock_check(st, id, stock, expected, &initial)) != 0) return rc;
    if ((rc = sk_store_repair_check(st, id, *expected, initial)) != 0) return rc;
    if (*stock == *expected) return 0;
    struct num e = num_i64(*expected);
    const char *up[] = {e.s, a.s};
    if ((rc = sk_pg_run(st, NULL, "set DB stock", "UPDATE activities SET stock = $1 WHERE id = $2",
                        2, up)) != 0)
        return rc;
    char detail[SK_STORE_AUDIT_DETAIL_MAX];
    sk_store_repair_detail(detail, sizeof detail, *stock, *expected, initial);
    return audit_insert(st, now_ms, id, "repair_db_stock", detail);
}

static int pg_db_stock_repair(sk_store *st, uint64_t id, int64_t now_ms, int64_t *before,
                              int64_t *after)
{
    int rc = sk_pg_enter(st);
    if (rc) return rc;
    if ((rc = sk_pg_cmd(st, "BEGIN", "begin DB stock repair")) != 0) return rc;
    int64_t stock = 0, expected = 0;
    rc = stock_repair_tx(st, id, now_ms, &stock, &expected);
    if ((rc = finish_tx(st, rc, "commit DB stock repair")) != 0) return rc;
    *before = stock;
    *after = expected;
    return 0;
}

static int pg_order_restore(sk_store *st, const struct sk_order *o, int64_t now_ms,
                            const char *audit_detail)
{
    int rc = sk_pg_enter(st);
    if (rc) return rc;
    if ((rc = sk_pg_cmd(st, "BEGIN", "begin order restore")) != 0) return rc;
    int cancelled = o->status == SK_ORDER_CANCELLED;
    struct num a = num_u64(o->activity_id), u = num_i64((int64_t)o->user_id), /* same bits */
        q = num_i64(o->quantity), c = num_i64(o->created_ms), t = num_i64(now_ms);
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
        "(SELECT pay_timeout_s FROM activities WHERE id = $2::bigint), " STR(
            SK_ACTIVITY_PAY_TIMEOUT_DEFAULT) "), $7, $8::bigint, $8::bigint)",
        8, p);
    if (rc == SK_EEXIST) sk_store_set_err(st, rc, "order %s already exists", o->order_id);
    if (rc == 0)
        rc = audit_insert(st, now_ms, o->activity_id, "repair_restore_order", audit_detail);
    return finish_tx(st, rc, "commit order restore");
}

/* ---- table and open -------------------------------------------------- */

static void pg_close(sk_store *st)
{
    if (st->pg) PQfinish(st->pg);
    st->pg = NULL;
}

static const struct sk_store_ops pg_ops = {
    .name = "postgres",
    .close = pg_close,
    .schema_version = pg_schema_version,
    .activity_insert = pg_activity_insert,
    .activity_get = pg_activity_get,
    .activity_list = pg_activity_list,
    .activity_set_state = pg_activity_set_state,
    .activity_delete = pg_activity_delete,
    .orders_persist = pg_orders_persist,
    .order_get = pg_order_get,
    .order_pay = pg_order_pay,
    .order_cancel = pg_order_cancel,
    .orders_expired = pg_orders_expired,
    .orders_list = pg_orders_list,
    .orders_count = pg_orders_count,
    .audit_add = pg_audit_add,
    .audit_list = pg_audit_list,
    .activity_set_db_stock = pg_activity_set_db_stock,
    .activity_set_pass_rate = pg_activity_set_pass_rate,
    .activity_ids = pg_activity_ids,
    .order_mark_released = pg_order_mark_released,
    .orders_unreleased = pg_orders_unreleased,
    .db_stock_check = pg_db_stock_check,
    .db_stock_repair = pg_db_stock_repair,
    .order_restore = pg_order_restore,
    .marks_list = pg_marks_list,
};

int sk_store_pg_open(sk_store *st, const char *url)
{
    st->ops = &pg_ops;
    int rc = sk_pg_connect(st, url);
    if (rc == 0) rc = migrate(st);
    return rc;
}
