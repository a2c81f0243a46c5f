/* store_mysql.c - the MySQL / MariaDB backend of store.h: the schema, the
 * activities, the ops table and the open. Same tables, constraints and
 * meaning as store_pg.c; the session is store_mysql_conn.c's, the orders
 * store_mysql_orders.c's.
 *
 * Schema: migrations applied in order at open, numbered as in the other
 * backends (same count, same meaning: schema versions compare across
 * backends); schema_migrations has one row per applied migration. MySQL's
 * DDL is not transactional (each statement commits), so concurrent
 * openers are serialized by a named lock (GET_LOCK, per database) held
 * for the whole check-and-apply, and a migration is a list of steps that
 * can each be run again: one ALTER TABLE (atomic in InnoDB) skipped when
 * the column it adds is there already, or CREATE TABLE IF NOT EXISTS. The
 * version row is written after the last step, so a migration whose steps
 * committed on the server while the client gave up (a read timeout, a
 * lost connection before the row) is finished by the next open, never
 * failed by a "duplicate column".
 *
 * Types: ids (order, stream, label) are VARBINARY: compared and sorted as
 * bytes, like SQLite and PostgreSQL's COLLATE "C", so the "<activity>-"
 * prefix range scan and paging order hold, and no PAD SPACE collation can
 * make "1-2" equal "1-2 ". Text is utf8mb4 with its binary collation.
 * CHECK constraints repeat the C validation (enforced since MariaDB 10.2.1
 * and MySQL 8.0.16). PostgreSQL's partial index of the orders owing a
 * Redis release becomes an indexed virtual column that is NULL for every
 * other order, so the scan after the NULLs touches only those. */
#include "store/store_mysql_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "store/mysql_url.h"

#define TABLE_OPTS " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"

/* Schema migrations as steps, applied in order; the steps of version v
 * take the schema from v - 1 to v. Append only, and in step with
 * store_sqlite.c and store_pg.c. A step with a column (table.column) is
 * done when that column exists: its ALTER is skipped (it committed in an
 * earlier run that never wrote the version row); a step without one can
 * run again as it is. Checks that name only their own column are column
 * checks (dropped with the column); the others are named table checks. */
struct step {
    int version;
    const char *table, *column; /* the column the step adds, NULL: rerunnable */
    const char *sql;
};

static const struct step steps[] = {
    /* 1: activity definitions. */
    {1, NULL, NULL,
     "CREATE TABLE IF NOT EXISTS activities ("
     " id BIGINT NOT NULL PRIMARY KEY CHECK (id >= 1),"
     " name VARCHAR(127) NOT NULL CHECK (octet_length(name) BETWEEN 1 AND 127),"
     " stock_initial BIGINT NOT NULL CHECK (stock_initial >= 1),"
     " stock BIGINT NOT NULL,"
     " per_user_limit BIGINT NOT NULL CHECK (per_user_limit >= 1),"
     " max_per_order BIGINT NOT NULL CHECK (max_per_order >= 1),"
     " start_ms BIGINT NOT NULL CHECK (start_ms >= 0),"
     " end_ms BIGINT NOT NULL,"
     " pay_timeout_s BIGINT NOT NULL CHECK (pay_timeout_s >= 1),"
     " state VARCHAR(16) NOT NULL DEFAULT 'created'"
     "  CHECK (state IN ('created', 'preheated', 'open', 'closed')),"
     " created_ms BIGINT NOT NULL,"
     " CONSTRAINT activities_stock CHECK (stock >= 0 AND stock <= stock_initial),"
     " CONSTRAINT activities_window CHECK (end_ms > start_ms)"
     ")" TABLE_OPTS},
    /* 2: orders, failed conditional stock updates, audit (see the SQLite
     * migration 2 for the why of each). */
    {2, NULL, NULL,
     "CREATE TABLE IF NOT EXISTS orders ("
     " order_id VARBINARY(63) NOT NULL PRIMARY KEY CHECK (octet_length(order_id) >= 1),"
     " activity_id BIGINT NOT NULL CHECK (activity_id >= 1),"
     " user_id BIGINT NOT NULL,"
     " quantity BIGINT NOT NULL CHECK (quantity >= 1),"
     " status VARCHAR(16) NOT NULL DEFAULT 'created'"
     "  CHECK (status IN ('created', 'paid', 'cancelled')),"
     " created_ms BIGINT NOT NULL,"
     " pay_deadline_ms BIGINT NOT NULL,"
     " paid_ms BIGINT NULL,"
     " cancelled_ms BIGINT NULL,"
     " stream_id VARBINARY(47) NOT NULL,"
     " INDEX orders_status_deadline (status, pay_deadline_ms),"
     " INDEX orders_activity_status (activity_id, status)"
     ")" TABLE_OPTS ";"
     "CREATE TABLE IF NOT EXISTS stock_failures ("
     " id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,"
     " at_ms BIGINT NOT NULL,"
     " activity_id BIGINT NOT NULL,"
     " order_id VARBINARY(63) NOT NULL,"
     " quantity BIGINT NOT NULL,"
     " db_stock BIGINT NULL,"
     " INDEX stock_failures_activity (activity_id)"
     ")" TABLE_OPTS ";"
     "CREATE TABLE IF NOT EXISTS audit ("
     " id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,"
     " at_ms BIGINT NOT NULL,"
     " activity_id BIGINT NOT NULL,"
     " kind VARCHAR(63) NOT NULL,"
     " detail TEXT NOT NULL,"
     " INDEX audit_activity (activity_id, id)"
     ")" TABLE_OPTS},
    /* 3: released_ms (see the SQLite migration 3); release_due is the
     * order id of a cancelled order still owing its release, else NULL:
     * its index plays the partial index's part. */
    {3, "orders", "released_ms",
     "ALTER TABLE orders ADD COLUMN released_ms BIGINT NULL,"
     " ADD COLUMN release_due VARBINARY(63) AS"
     "  (CASE WHEN status = 'cancelled' AND released_ms IS NULL THEN order_id END) VIRTUAL,"
     " ADD INDEX orders_unreleased (release_due)"},
    /* 4: the activity's own per-user rate limit (see the SQLite migration 4). */
    {4, "activities", "rl_per_user_per_s",
     "ALTER TABLE activities"
     " ADD COLUMN rl_per_user_per_s BIGINT NOT NULL DEFAULT 0 CHECK (rl_per_user_per_s >= 0),"
     " ADD COLUMN rl_burst BIGINT NOT NULL DEFAULT 0 CHECK (rl_burst >= 0)"},
    /* 5: stock segments (see the SQLite migration 5). */
    {5, "activities", "segments",
     "ALTER TABLE activities ADD COLUMN segments INT NOT NULL DEFAULT 1 CHECK (segments >= 1)"},
    /* 6: the rollback guard's watermark (see the SQLite migration 6). */
    {6, NULL, NULL,
     "CREATE TABLE IF NOT EXISTS redis_marks ("
     " label VARBINARY(31) NOT NULL PRIMARY KEY CHECK (octet_length(label) >= 1),"
     " activity_id BIGINT NOT NULL CHECK (activity_id >= 1),"
     " adm BIGINT NOT NULL CHECK (adm >= 0),"
     " updated_ms BIGINT NOT NULL,"
     " order_id VARBINARY(63) NOT NULL,"
     " INDEX redis_marks_activity (activity_id)"
     ")" TABLE_OPTS},
    /* 7: the waiting room (see the SQLite migration 7). */
    {7, "activities", "wr_passes_per_s",
     "ALTER TABLE activities"
     " ADD COLUMN wr_passes_per_s BIGINT NOT NULL DEFAULT 0 CHECK (wr_passes_per_s >= 0),"
     " ADD COLUMN wr_pass_ttl_s BIGINT NOT NULL DEFAULT 0 CHECK (wr_pass_ttl_s >= 0),"
     " ADD COLUMN wr_seed VARCHAR(255) NOT NULL DEFAULT '' CHECK (octet_length(wr_seed) <= 64)"},
    /* 8: histories that diverge (see the SQLite migration 8): the
     * purchase's Idempotency-Key, the marks per label and branch (one
     * ALTER: the new column and the new key commit together), the order
     * id conflicts. */
    {8, "orders", "idem_key",
     "ALTER TABLE orders ADD COLUMN idem_key VARBINARY(64) NULL"
     " CHECK (idem_key IS NULL OR octet_length(idem_key) BETWEEN 1 AND 64)"},
    {8, "redis_marks", "branch",
     "ALTER TABLE redis_marks"
     " ADD COLUMN branch VARBINARY(15) NOT NULL DEFAULT '' AFTER label,"
     " DROP PRIMARY KEY, ADD PRIMARY KEY (label, branch)"},
    {8, NULL, NULL,
     "CREATE TABLE IF NOT EXISTS order_conflicts ("
     " id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,"
     " at_ms BIGINT NOT NULL,"
     " activity_id BIGINT NOT NULL,"
     " order_id VARBINARY(63) NOT NULL,"
     " user_id BIGINT NOT NULL,"
     " quantity BIGINT NOT NULL,"
     " stream_id VARBINARY(47) NOT NULL,"
     " INDEX order_conflicts_activity (activity_id)"
     ")" TABLE_OPTS},
    /* 9: pre-registration, the draw, the waiting room's controls (see the
     * SQLite migration 9). */
    {9, "activities", "wr_control",
     "ALTER TABLE activities"
     " ADD COLUMN wr_control BIGINT NOT NULL DEFAULT 0 CHECK (wr_control BETWEEN 0 AND 7),"
     " ADD COLUMN reg_start_ms BIGINT NOT NULL DEFAULT 0 CHECK (reg_start_ms >= 0),"
     " ADD COLUMN reg_end_ms BIGINT NOT NULL DEFAULT 0 CHECK (reg_end_ms >= 0),"
     " ADD COLUMN draw_box_s BIGINT NOT NULL DEFAULT 0 CHECK (draw_box_s >= 0),"
     " ADD COLUMN draw_seed VARCHAR(64) NOT NULL DEFAULT ''"
     "  CHECK (octet_length(draw_seed) IN (0, 64)),"
     " ADD COLUMN drawn_ms BIGINT NOT NULL DEFAULT 0 CHECK (drawn_ms >= 0),"
     " ADD COLUMN draw_n BIGINT NOT NULL DEFAULT 0 CHECK (draw_n >= 0),"
     " ADD COLUMN draw_state VARCHAR(95) NOT NULL DEFAULT ''"},
    {9, NULL, NULL,
     "CREATE TABLE IF NOT EXISTS registrations ("
     " activity_id BIGINT NOT NULL CHECK (activity_id >= 1),"
     " user_id BIGINT NOT NULL,"
     " created_ms BIGINT NOT NULL,"
     " draw_rank BIGINT NULL CHECK (draw_rank IS NULL OR draw_rank >= 1),"
     " PRIMARY KEY (activity_id, user_id)"
     ")" TABLE_OPTS},
};
#define N_STEPS (sizeof steps / sizeof steps[0])
#define N_MIGRATIONS (steps[N_STEPS - 1].version)

/* ---- schema ---- */

/* One integer from the first row of sql; *found 0 when there is no row
 * (found may be NULL: then no row is an error). */
static int read_int(sk_store *st, const char *what, const char *sql, int64_t *v, int *found)
{
    MYSQL_RES *r;
    int rc = sk_my_run(st, what, sql, strlen(sql), &r, NULL, 0);
    if (rc) return rc;
    MYSQL_ROW row = r ? mysql_fetch_row(r) : NULL;
    if (found) *found = row != NULL;
    if (row)
        *v = sk_my_i64(row, 0);
    else if (!found)
        rc = sk_store_set_err(st, SK_EDB, "mysql %s: %s: no row", st->my_where, what);
    if (r) mysql_free_result(r);
    return rc;
}

static int read_version(sk_store *st, int *version)
{
    int64_t v = 0;
    int rc = read_int(st, "read schema version",
                      "SELECT COALESCE(MAX(version), 0) FROM schema_migrations", &v, NULL);
    if (rc == 0) *version = (int)v;
    return rc;
}

/* The lock of this database's migrations: its name holds the database's
 * hash so other databases on the server migrate at the same time. */
#define MIGRATION_LOCK "CONCAT('seckill.migrate.', SHA1(DATABASE()))"

/* Step s already done (its column exists)? *done 1 or 0. */
static int step_done(sk_store *st, const struct step *s, int *done)
{
    *done = 0;
    if (!s->column) return 0;
    char sql[300];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM information_schema.columns WHERE table_schema = DATABASE()"
             " AND table_name = '%s' AND column_name = '%s'",
             s->table, s->column);
    int64_t n = 0;
    int rc = read_int(st, "read the schema", sql, &n, NULL);
    *done = n > 0;
    return rc;
}

/* Runs step s unless it is done already. */
static int apply_step(sk_store *st, const struct step *s)
{
    int done;
    int rc = step_done(st, s, &done);
    if (rc == 0 && !done) rc = sk_my_cmd(st, "migration", s->sql);
    return rc;
}

/* With the lock held: applies the missing migrations, each version's row
 * after its last step. */
static int migrate_locked(sk_store *st)
{
    int rc = sk_my_cmd(st, "create schema_migrations",
                       "CREATE TABLE IF NOT EXISTS schema_migrations ("
                       " version INT NOT NULL PRIMARY KEY, applied_ms BIGINT NOT NULL)" TABLE_OPTS);
    int v = 0;
    if (rc == 0) rc = read_version(st, &v);
    if (rc == 0 && v > N_MIGRATIONS)
        return sk_store_set_err(
            st, SK_EDB,
            "mysql %s: schema version %d is newer than this binary (%d); upgrade seckill",
            st->my_where, v, N_MIGRATIONS);
    for (size_t i = 0; rc == 0 && i < N_STEPS; i++) {
        int ver = steps[i].version;
        if (ver <= v) continue;
        rc = apply_step(st, &steps[i]);
        if (rc == 0 && (i + 1 == N_STEPS || steps[i + 1].version != ver)) {
            char rec[160];
            snprintf(rec, sizeof rec,
                     "INSERT INTO schema_migrations (version, applied_ms) VALUES (%d, %" PRId64 ")",
                     ver, sk_wall_ms());
            rc = sk_my_cmd(st, "record migration", rec);
        }
        if (rc) {
            char why[sizeof st->errstr];
            snprintf(why, sizeof why, "%s", st->errstr);
            return sk_store_set_err(st, SK_EDB, "%.400s (schema migration %d failed)", why, ver);
        }
    }
    return rc;
}

static int migrate(sk_store *st)
{
    /* wait for another opener at most just under the read timeout */
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT GET_LOCK(" MIGRATION_LOCK ", %d)",
             st->my_url->timeout_s > 1 ? st->my_url->timeout_s - 1 : 1);
    int64_t got = 0;
    int rc = read_int(st, "take the migration lock", sql, &got, NULL);
    if (rc == 0 && got != 1)
        return sk_store_set_err(st, SK_ETIMEDOUT,
                                "mysql %s: another process holds the migration lock", st->my_where);
    if (rc) return rc;
    rc = migrate_locked(st);
    if (!st->my_broken) {
        char keep[sizeof st->errstr];
        memcpy(keep, st->errstr, sizeof keep);
        sk_my_cmd(st, "release the migration lock", "DO RELEASE_LOCK(" MIGRATION_LOCK ")");
        memcpy(st->errstr, keep, sizeof keep);
    }
    return rc;
}

int sk_my_schema_version(sk_store *st, int *version)
{
    int rc = sk_my_enter(st);
    if (rc) return rc;
    return read_version(st, version);
}

/* ---- activities ---- */

int sk_my_activity_insert(sk_store *st, const struct sk_activity *v)
{
    int rc = sk_my_enter(st);
    if (rc) return rc;
    struct sk_store_value val[SK_STORE_ACTIVITY_NCOLS];
    sk_store_activity_values(v, val);
    struct sk_my_sql b = {0};
    sk_my_sql_add(&b, "INSERT INTO activities (" SK_STORE_ACTIVITY_COLUMNS ") VALUES (");
    for (int i = 0; i < SK_STORE_ACTIVITY_NCOLS; i++) {
        if (i) sk_my_sql_add(&b, ", ");
        if (val[i].text)
            sk_my_sql_strz(st, &b, val[i].text);
        else
            sk_my_sql_addf(&b, "%" PRId64, val[i].num);
    }
    sk_my_sql_add(&b, ")");
    rc = sk_my_run_sql(st, "insert activity", &b, NULL, NULL, 0);
    sk_my_sql_free(&b);
    if (rc == SK_EEXIST)
        sk_store_set_err(st, SK_EEXIST, "activity %" PRIu64 " already exists", v->id);
    return rc;
}

/* Runs sql and reads its activity rows into a new array (*out, *n; the
 * caller frees it; NULL when none). */
static int read_activities(sk_store *st, const char *what, const char *sql,
                           struct sk_activity **out, size_t *n)
{
    struct sk_my_sql b = {0};
    sk_my_sql_add(&b, sql);
    void *arr = NULL;
    int rc = sk_my_read_all(st, what, &b, sizeof **out, sk_store_read_activity, &arr, n);
    *out = arr;
    return rc;
}

int sk_my_activity_get(sk_store *st, uint64_t id, struct sk_activity *out)
{
    int rc = sk_my_enter(st);
    if (rc) return rc;
    char sql[400];
    snprintf(sql, sizeof sql,
             "SELECT " SK_STORE_ACTIVITY_COLUMNS " FROM activities WHERE id = %" PRIu64, id);
    struct sk_activity *a;
    size_t n;
    if ((rc = read_activities(st, "read activity", sql, &a, &n)) != 0) return rc;
    if (n == 1)
        *out = a[0];
    else
        rc = sk_store_no_activity(st, id);
    free(a);
    return rc;
}

int sk_my_activity_list(sk_store *st, struct sk_activity **out, size_t *n)
{
    int rc = sk_my_enter(st);
    if (rc) return rc;
    return read_activities(st, "list activities",
                           "SELECT " SK_STORE_ACTIVITY_COLUMNS " FROM activities ORDER BY id", out,
                           n);
}

/* Runs a one-row UPDATE/DELETE; SK_ENOTFOUND when no row matched. */
static int change_one(sk_store *st, struct sk_my_sql *b, uint64_t id, const char *what)
{
    long long hit = 0;
    int rc = sk_my_run_sql(st, what, b, NULL, &hit, 1);
    sk_my_sql_free(b);
    if (rc == 0 && hit == 0) rc = sk_store_no_activity(st, id);
    return rc;
}

int sk_my_activity_set_state(sk_store *st, uint64_t id, const char *state)
{
    int rc = sk_my_enter(st);
    if (rc) return rc;
    struct sk_my_sql b = {0};
    sk_my_sql_add(&b, "UPDATE activities SET state = ");
    sk_my_sql_str(st, &b, state, strlen(state));
    sk_my_sql_addf(&b, " WHERE id = %" PRIu64, id);
    return change_one(st, &b, id, "update activity state");
}

int sk_my_activity_delete(sk_store *st, uint64_t id)
{
    int rc = sk_my_enter(st);
    if (rc) return rc;
    struct sk_my_sql b = {0};
    sk_my_sql_addf(&b, "DELETE FROM activities WHERE id = %" PRIu64, id);
    if ((rc = change_one(st, &b, id, "delete activity")) != 0) return rc;
    /* a re-created id starts a new history: its old watermark would read as
     * a Redis that went back in time */
    sk_my_sql_addf(&b,
                   "DELETE FROM redis_marks WHERE activity_id = %" PRIu64
                   "; DELETE FROM registrations WHERE activity_id = %" PRIu64,
                   id, id);
    rc = sk_my_run_sql(st, "delete marks and registrations", &b, NULL, NULL, 0);
    sk_my_sql_free(&b);
    return rc;
}

int sk_my_exec_tx(sk_store *st, const char *const *sql, size_t n, const int64_t *expect,
                  int64_t *affected)
{
    int rc = sk_my_enter(st);
    if (rc) return rc;
    if ((rc = sk_my_cmd(st, "begin", "START TRANSACTION")) != 0) return rc;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        long long hit = 0;
        if ((rc = sk_my_run(st, "statement", sql[i], strlen(sql[i]), NULL, &hit, 1)) != 0) break;
        affected[i] = hit;
        if (expect && expect[i] >= 0 && affected[i] != expect[i])
            rc = sk_store_set_err(st, SK_ESTATE, "mysql %s: statement %zu matched %" PRId64
                                                 " rows, not %" PRId64,
                                  st->my_where, i + 1, affected[i], expect[i]);
    }
    return sk_my_finish_tx(st, rc, "commit");
}

int sk_my_activity_set_db_stock(sk_store *st, uint64_t id, int64_t stock)
{
    int rc = sk_my_enter(st);
    if (rc) return rc;
    struct sk_my_sql b = {0};
    /* a CHECK failure: store.c says which */
    sk_my_sql_addf(&b, "UPDATE activities SET stock = %" PRId64 " WHERE id = %" PRIu64, stock, id);
    return change_one(st, &b, id, "set DB stock");
}

int sk_my_activity_set_pass_rate(sk_store *st, uint64_t id, int64_t rate)
{
    int rc = sk_my_enter(st);
    if (rc) return rc;
    struct sk_my_sql b = {0};
    sk_my_sql_addf(&b,
                   "UPDATE activities SET wr_passes_per_s = %" PRId64 " WHERE id = %" PRIu64
                   " AND wr_passes_per_s > 0",
                   rate, id);
    return change_one(st, &b, id, "set pass rate");
}

int sk_my_activity_ids(sk_store *st, uint64_t **out, size_t *n)
{
    int rc = sk_my_enter(st);
    if (rc) return rc;
    struct sk_my_sql b = {0};
    sk_my_sql_add(&b, "SELECT id FROM activities ORDER BY id");
    void *arr = NULL;
    rc = sk_my_read_all(st, "list activity ids", &b, sizeof **out, sk_store_read_id, &arr, n);
    *out = arr;
    return rc;
}

/* ---- table and open ---- */

void sk_my_close(sk_store *st)
{
    sk_my_disconnect(st);
}

static const struct sk_store_ops my_ops = SK_STORE_OPS_TABLE("mysql", sk_my);

int sk_store_mysql_open(sk_store *st, const char *url, int waiting)
{
    st->ops = &my_ops;
    int rc = sk_my_connect(st, url, waiting != SK_STORE_LATER);
    if (rc == SK_EDB && waiting != SK_STORE_CONNECT && st->my_url) {
        /* unconnected: the next call opens a session */
        st->my_broken = 1;
        st->owed = migrate;
        return SK_STORE_UNCONNECTED;
    }
    if (rc == 0) rc = migrate(st);
    return rc;
}
