/* store_pg.c - the PostgreSQL backend of store.h (libpq), the production
 * store: its schema, the activities, and the table of its functions. Same
 * tables, constraints and semantics as store_sqlite.c. The other files of
 * the backend (store_pg_int.h): pg_conn.c, the libpq session (connecting,
 * bounded statements, prepared reads, the reset after a failure);
 * store_pg_persist.c, the persist batch; store_pg_orders.c, the orders'
 * reads and status changes, audit rows, marks and repairs.
 *
 * Schema: migrations applied in order at open, each in its own transaction
 * holding a transaction-level advisory lock, so concurrent openers apply
 * each step once; schema_migrations has one row per applied step. The
 * migration list is kept in step with store_sqlite.c (same count, same
 * meaning), so schema versions compare across backends. order_id is
 * COLLATE "C": byte order, like SQLite, whatever the database's locale, so
 * the "<activity>-" prefix range scan and paging order hold. */
#include "store/store_pg_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "core/clock.h"
#include "core/error.h"

#include "core/vec.h"

/* Key of the transaction-level advisory lock that serializes migrations:
 * an arbitrary constant (not "seckill" in ASCII, which would be
 * 32481099999964268), never changed, so every release takes the same lock. */
#define MIGRATION_LOCK_KEY "32199442939538540"

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
    /* 9: pre-registration, the draw, the waiting room's controls (see the
     * SQLite migration 9). */
    "ALTER TABLE activities ADD COLUMN wr_control BIGINT NOT NULL DEFAULT 0"
    " CHECK (wr_control BETWEEN 0 AND 7),"
    " ADD COLUMN reg_start_ms BIGINT NOT NULL DEFAULT 0 CHECK (reg_start_ms >= 0),"
    " ADD COLUMN reg_end_ms BIGINT NOT NULL DEFAULT 0 CHECK (reg_end_ms >= 0),"
    " ADD COLUMN draw_box_s BIGINT NOT NULL DEFAULT 0 CHECK (draw_box_s >= 0),"
    " ADD COLUMN draw_seed TEXT NOT NULL DEFAULT '' CHECK (octet_length(draw_seed) IN (0, 64)),"
    " ADD COLUMN drawn_ms BIGINT NOT NULL DEFAULT 0 CHECK (drawn_ms >= 0),"
    " ADD COLUMN draw_n BIGINT NOT NULL DEFAULT 0 CHECK (draw_n >= 0),"
    " ADD COLUMN draw_state TEXT NOT NULL DEFAULT '' CHECK (octet_length(draw_state) < 96);"
    "CREATE TABLE registrations ("
    " activity_id BIGINT NOT NULL CHECK (activity_id >= 1),"
    " user_id BIGINT NOT NULL,"
    " created_ms BIGINT NOT NULL,"
    " draw_rank BIGINT CHECK (draw_rank IS NULL OR draw_rank >= 1),"
    " PRIMARY KEY (activity_id, user_id)"
    ");",
};
#define N_MIGRATIONS ((int)(sizeof migrations / sizeof migrations[0]))

/* ---- schema ---------------------------------------------------------- */

static int read_version(sk_store *st, int *v, const char *sql)
{
    PGresult *r;
    int rc = sk_pg_run(st, &r, "read schema version", sql, 0, NULL);
    if (rc) return rc;
    if (PQntuples(r) != 1)
        rc = sk_store_set_err(st, SK_EDB, "postgres %s: no schema version", st->pg_where);
    else
        *v = (int)sk_pg_i64(r, 0, 0);
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

int sk_pg_schema_version(sk_store *st, int *version)
{
    int rc = sk_pg_enter(st);
    if (rc) return rc;
    return read_version(st, version, "SELECT coalesce(max(version), 0) FROM schema_migrations");
}

/* ---- activities ------------------------------------------------------ */

int sk_pg_activity_insert(sk_store *st, const struct sk_activity *v)
{
    int rc = sk_pg_enter(st);
    if (rc) return rc;
    struct sk_store_value val[SK_STORE_ACTIVITY_NCOLS];
    sk_store_activity_values(v, val);
    struct sk_pg_num num[SK_STORE_ACTIVITY_NCOLS];
    const char *p[SK_STORE_ACTIVITY_NCOLS];
    for (int i = 0; i < SK_STORE_ACTIVITY_NCOLS; i++) {
        num[i] = sk_pg_num_i64(val[i].num);
        p[i] = val[i].text ? val[i].text : num[i].s;
    }
    rc = sk_pg_run(st, NULL, "insert activity",
                   "INSERT INTO activities (" SK_STORE_ACTIVITY_COLUMNS ") VALUES ($1, $2, $3, $4,"
                   " $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20,"
                   " $21, $22, $23, $24, $25)",
                   SK_STORE_ACTIVITY_NCOLS, p);
    if (rc == SK_EEXIST)
        sk_store_set_err(st, SK_EEXIST, "activity %" PRIu64 " already exists", v->id);
    return rc;
}

int sk_pg_activity_get(sk_store *st, uint64_t id, struct sk_activity *out)
{
    struct sk_pg_num n = sk_pg_num_u64(id);
    int rc =
        sk_pg_read_one(st, "read activity", PGQ_ACTIVITY_GET, n.s, sk_store_read_activity, out);
    return rc == 0 ? sk_store_no_activity(st, id) : rc < 0 ? rc : 0;
}

int sk_pg_activity_list(sk_store *st, struct sk_activity **out, size_t *n)
{
    int rc = sk_pg_enter(st);
    if (rc) return rc;
    void *arr = NULL;
    rc = sk_pg_read_all(st, "list activities",
                        "SELECT " SK_STORE_ACTIVITY_COLUMNS " FROM activities ORDER BY id", 0, NULL,
                        sizeof **out, sk_store_read_activity, &arr, n);
    *out = arr;
    return rc;
}

/* Runs a one-row UPDATE/DELETE; SK_ENOTFOUND when no row matched. */
static int change_one(sk_store *st, const char *sql, int np, const char *const *p, uint64_t id,
                      const char *what)
{
    PGresult *r;
    int rc = sk_pg_run(st, &r, what, sql, np, p);
    if (rc) return rc;
    if (sk_pg_changed(r) == 0) rc = sk_store_no_activity(st, id);
    PQclear(r);
    return rc;
}

int sk_pg_activity_set_state(sk_store *st, uint64_t id, const char *state)
{
    int rc = sk_pg_enter(st);
    if (rc) return rc;
    struct sk_pg_num n = sk_pg_num_u64(id);
    const char *p[] = {state, n.s};
    return change_one(st, "UPDATE activities SET state = $1 WHERE id = $2", 2, p, id,
                      "update activity state");
}

int sk_pg_activity_delete(sk_store *st, uint64_t id)
{
    int rc = sk_pg_enter(st);
    if (rc) return rc;
    struct sk_pg_num n = sk_pg_num_u64(id);
    const char *p[] = {n.s};
    rc = change_one(st, "DELETE FROM activities WHERE id = $1", 1, p, id, "delete activity");
    if (rc) return rc;
    /* a re-created id starts a new history: its old watermark would read as
     * a Redis that went back in time */
    PGresult *r;
    rc = sk_pg_run(st, &r, "delete marks", "DELETE FROM redis_marks WHERE activity_id = $1", 1, p);
    if (rc == 0) PQclear(r);
    if (rc == 0)
        rc = sk_pg_run(st, &r, "delete registrations",
                       "DELETE FROM registrations WHERE activity_id = $1", 1, p);
    if (rc == 0) PQclear(r);
    return rc;
}

int sk_pg_exec_tx(sk_store *st, const char *const *sql, size_t n, const int64_t *expect,
                  int64_t *affected)
{
    int rc = sk_pg_enter(st);
    if (rc) return rc;
    if ((rc = sk_pg_cmd(st, "BEGIN", "begin")) != 0) return rc;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        PGresult *r;
        if ((rc = sk_pg_run(st, &r, "statement", sql[i], 0, NULL)) != 0) break;
        affected[i] = sk_pg_changed(r);
        PQclear(r);
        if (expect && expect[i] >= 0 && affected[i] != expect[i])
            rc = sk_store_set_err(st, SK_ESTATE, "postgres %s: statement %zu matched %" PRId64
                                                 " rows, not %" PRId64,
                                  st->pg_where, i + 1, affected[i], expect[i]);
    }
    return sk_pg_finish_tx(st, rc, "commit");
}

int sk_pg_activity_set_db_stock(sk_store *st, uint64_t id, int64_t stock)
{
    int rc = sk_pg_enter(st);
    if (rc) return rc;
    struct sk_pg_num s = sk_pg_num_i64(stock), n = sk_pg_num_u64(id);
    const char *p[] = {s.s, n.s};
    /* a CHECK failure: store.c says which */
    return change_one(st, "UPDATE activities SET stock = $1 WHERE id = $2", 2, p, id,
                      "set DB stock");
}

int sk_pg_activity_set_pass_rate(sk_store *st, uint64_t id, int64_t rate)
{
    int rc = sk_pg_enter(st);
    if (rc) return rc;
    struct sk_pg_num r = sk_pg_num_i64(rate), n = sk_pg_num_u64(id);
    const char *p[] = {r.s, n.s};
    return change_one(st,
                      "UPDATE activities SET wr_passes_per_s = $1 WHERE id = $2 AND"
                      " wr_passes_per_s > 0",
                      2, p, id, "set pass rate");
}

int sk_pg_activity_ids(sk_store *st, uint64_t **out, size_t *n)
{
    int rc = sk_pg_enter(st);
    if (rc) return rc;
    void *arr = NULL;
    rc = sk_pg_read_all(st, "list activity ids", "SELECT id FROM activities ORDER BY id", 0, NULL,
                        sizeof **out, sk_store_read_id, &arr, n);
    *out = arr;
    return rc;
}

/* ---- table and open -------------------------------------------------- */

void sk_pg_close(sk_store *st)
{
    if (st->pg) PQfinish(st->pg);
    st->pg = NULL;
}

static const struct sk_store_ops pg_ops = SK_STORE_OPS_TABLE("postgres", sk_pg);

int sk_store_pg_open(sk_store *st, const char *url, int waiting)
{
    st->ops = &pg_ops;
    int rc = sk_pg_connect(st, url, waiting != SK_STORE_LATER);
    if (rc == SK_EDB && waiting != SK_STORE_CONNECT && st->pg) {
        /* the session exists, unconnected: the next call resets it */
        st->pg_broken = 1;
        st->owed = migrate;
        return SK_STORE_UNCONNECTED;
    }
    if (rc == 0) rc = migrate(st);
    return rc;
}
