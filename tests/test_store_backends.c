/* test_store_backends.c - the store (store.h) against every backend.
 *
 * Every behaviour below is written once, against the interface, and runs
 * three times: store_sqlite_<name> on a fresh SQLite file, store_pg_<name>
 * on a fresh database of the run's PostgreSQL cluster, store_mysql_<name>
 * on a fresh database of the run's MariaDB server. Checks that need to
 * look under the interface (constraints, schema version rows) go through
 * raw SQL of the backend (be_sql). Then PostgreSQL-only tests: open
 * errors, the CLI end to end with --db postgres://, and faults (server
 * stopped, server frozen) on a private cluster; the MariaDB ones are in
 * test_store_mysql.c. */
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <libpq-fe.h>
#include <sqlite3.h>

#include "core/clock.h"
#include "core/error.h"
#include "engine/activity.h"
#include "store/store.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/mysql_harness.h"
#include "support/pg_harness.h"
#include "support/sql_backend_checks.h"
#include "support/store_faults.h"

SK_TH_PG_USED
SK_TH_MY_USED

/* ---- backends ---- */

/* A fresh, empty database of one backend. */
struct be {
    int pg;         /* a server backend (PostgreSQL or MariaDB): schema_migrations */
    int my;         /* MariaDB */
    char path[400]; /* SQLite file */
    char spec[420]; /* what sk_store_open takes */
};

enum { BE_SQLITE, BE_PG, BE_MYSQL };

static void be_fresh(struct be *b, int kind)
{
    memset(b, 0, sizeof *b);
    b->pg = kind != BE_SQLITE;
    b->my = kind == BE_MYSQL;
    if (b->my) {
        sk_th_my_fresh_db(b->spec, sizeof b->spec);
    } else if (b->pg) {
        sk_th_pg_fresh_db(b->spec, sizeof b->spec);
    } else {
        snprintf(b->path, sizeof b->path, "%s/s.db", sk_th_tmpdir());
        snprintf(b->spec, sizeof b->spec, "sqlite:%s", b->path);
    }
}

static sk_store *be_open(const struct be *b)
{
    sk_store *st;
    char err[512];
    CHECK_MSG(sk_store_open(&st, b->spec, err, sizeof err) == 0, "open %s: %s", b->spec, err);
    return st;
}

/* Raw SQL under the store: 0 done, 1 refused by a constraint, -1 other
 * failure. */
static int be_sql(const struct be *b, const char *sql)
{
    if (b->my) return sk_th_my_sql(b->spec, sql);
    if (!b->pg) {
        sqlite3 *db;
        CHECK_EQ(sqlite3_open(b->path, &db), SQLITE_OK);
        int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
        sqlite3_close(db);
        return rc == SQLITE_OK ? 0 : rc == SQLITE_CONSTRAINT ? 1 : -1;
    }
    PGconn *c = PQconnectdb(b->spec);
    CHECK_MSG(PQstatus(c) == CONNECTION_OK, "connect: %s", PQerrorMessage(c));
    PGresult *r = PQexec(c, sql);
    int st = PQresultStatus(r);
    const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    int rc = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK ? 0
             : state && !strncmp(state, "23", 2)             ? 1
                                                             : -1;
    PQclear(r);
    PQfinish(c);
    return rc;
}

/* One integer from raw SQL. */
static long long be_int(const struct be *b, const char *sql)
{
    long long v = -1;
    if (b->my) return sk_th_my_int(b->spec, sql);
    if (!b->pg) {
        sqlite3 *db;
        sqlite3_stmt *s;
        CHECK_EQ(sqlite3_open(b->path, &db), SQLITE_OK);
        CHECK_MSG(sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK, "%s", sql);
        CHECK_EQ(sqlite3_step(s), SQLITE_ROW);
        v = sqlite3_column_int64(s, 0);
        sqlite3_finalize(s);
        sqlite3_close(db);
        return v;
    }
    PGconn *c = PQconnectdb(b->spec);
    CHECK_MSG(PQstatus(c) == CONNECTION_OK, "connect: %s", PQerrorMessage(c));
    PGresult *r = PQexec(c, sql);
    CHECK_MSG(PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1, "%s: %s", sql,
              PQresultErrorMessage(r));
    v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    PQfinish(c);
    return v;
}

/* Runs behaviour fn on a fresh database of one backend. */
static void be_run(int kind, void (*fn)(const struct be *))
{
    struct be b;
    be_fresh(&b, kind);
    fn(&b);
}

/* A behaviour written once, registered for each backend. */
#define BACKEND_TEST(name)                                                                         \
    static void name(const struct be *b);                                                          \
    SK_TEST(store_sqlite_##name)                                                                   \
    {                                                                                              \
        be_run(BE_SQLITE, name);                                                                   \
    }                                                                                              \
    SK_TEST(store_pg_##name)                                                                       \
    {                                                                                              \
        be_run(BE_PG, name);                                                                       \
    }                                                                                              \
    SK_TEST(store_mysql_##name)                                                                    \
    {                                                                                              \
        be_run(BE_MYSQL, name);                                                                    \
    }                                                                                              \
    static void name(const struct be *b)

/* ---- helpers ---- */

/* The activity columns of the older schemas, for raw rows written in
 * them (later migrations add columns with defaults). */
#define COLS_V4                                                                                    \
    "id, name, stock_initial, stock, per_user_limit, max_per_order, start_ms, end_ms, "            \
    "pay_timeout_s, state, created_ms, rl_per_user_per_s, rl_burst"
#define COLS_V7 COLS_V4 ", segments, wr_passes_per_s, wr_pass_ttl_s, wr_seed"
#define COLS_V10 COLS_V7 ", ch_pow_min, ch_pow_max, ch_pow_step, ch_captcha"
#define N_MIGRATIONS 14 /* what this binary applies; every backend agrees */
#define KEY16 "0123456789abcdef"
#define KEY64 KEY16 KEY16 KEY16 KEY16 /* the longest idempotency key */

static void add_activity(sk_store *st, uint64_t id, int64_t stock, int64_t pay_timeout_s)
{
    struct sk_activity a;
    sk_th_activity_valid(&a, id);
    a.stock = stock;
    a.pay_timeout_s = pay_timeout_s;
    CHECK_MSG(sk_store_activity_insert(st, &a) == 0, "insert: %s", sk_store_errstr(st));
}

/* The store of b, opened, holding one activity (add_activity). */
static sk_store *be_open_sale(const struct be *b, uint64_t id, int64_t stock, int64_t pay_timeout_s)
{
    sk_store *st = be_open(b);
    add_activity(st, id, stock, pay_timeout_s);
    return st;
}

/* The store of b, opened, checked to be at this binary's schema. */
static sk_store *be_open_current(const struct be *b)
{
    sk_store *st = be_open(b);
    int v = -1;
    CHECK_EQ(sk_store_schema_version(st, &v), 0);
    CHECK_EQ(v, N_MIGRATIONS);
    return st;
}

/* Forks n children running fn(b, i), released together by closing a
 * pipe; codes[i] (may be NULL) gets child i's exit code (-1: killed).
 * Returns how many exited 0. */
static int fork_codes(const struct be *b, int n, int (*fn)(const struct be *, int), int *codes)
{
    int gate[2];
    CHECK_EQ(pipe(gate), 0);
    pid_t pids[32];
    CHECK(n <= 32);
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        CHECK(pids[i] >= 0);
        if (pids[i] == 0) {
            close(gate[1]);
            char c;
            while (read(gate[0], &c, 1) > 0) {
            }
            _exit(fn(b, i));
        }
    }
    close(gate[0]);
    close(gate[1]); /* go */
    int ok = 0;
    for (int i = 0; i < n; i++) {
        int st;
        waitpid(pids[i], &st, 0);
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        if (codes) codes[i] = code;
        ok += code == 0;
    }
    return ok;
}

static int fork_all(const struct be *b, int n, int (*fn)(const struct be *, int))
{
    return fork_codes(b, n, fn, NULL);
}

/* ---- schema ---- */

BACKEND_TEST(open_migrates_schema_and_reopen_keeps_data)
{
    sk_store *st = be_open_current(b);
    struct sk_activity a, got;
    sk_th_activity_valid(&a, 11);
    CHECK_EQ(sk_store_activity_insert(st, &a), 0);
    sk_store_close(st);

    /* Checked from outside. */
    if (b->pg) {
        CHECK_EQ(be_int(b, "SELECT count(*) FROM schema_migrations"), N_MIGRATIONS);
        CHECK_EQ(be_int(b, "SELECT max(version) FROM schema_migrations"), N_MIGRATIONS);
    } else {
        CHECK_EQ(be_int(b, "PRAGMA user_version"), N_MIGRATIONS);
        sqlite3 *db;
        sqlite3_stmt *s;
        CHECK_EQ(sqlite3_open(b->path, &db), SQLITE_OK);
        CHECK_EQ(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &s, NULL), SQLITE_OK);
        CHECK_EQ(sqlite3_step(s), SQLITE_ROW);
        CHECK_STR((const char *)sqlite3_column_text(s, 0), "wal");
        sqlite3_finalize(s);
        sqlite3_close(db);
    }

    /* Reopening applies nothing twice and sees the row. */
    for (int i = 0; i < 3; i++) {
        st = be_open_current(b); /* the version of the first open */
        CHECK_EQ(sk_store_activity_get(st, 11, &got), 0);
        CHECK_STR(got.name, a.name);
        sk_store_close(st);
    }
    if (b->pg) CHECK_EQ(be_int(b, "SELECT count(*) FROM schema_migrations"), N_MIGRATIONS);
}

/* The identity of migration 9 (store.h): 16 hex digits, one row, drawn
 * once per database: every handle of one database reads the same, another
 * database has another, a second row is refused. */
BACKEND_TEST(identity_is_drawn_once_per_database_and_every_handle_reads_it)
{
    char id1[SK_STORE_IDENTITY_MAX], id2[SK_STORE_IDENTITY_MAX], small[8];
    sk_store *st = be_open(b);
    CHECK_EQ(sk_store_identity(st, id1, sizeof id1), 0);
    CHECK_EQ(strlen(id1), SK_STORE_IDENTITY_LEN);
    CHECK_MSG(id1[strspn(id1, "0123456789abcdef")] == 0, "identity '%s'", id1);
    CHECK_EQ(sk_store_identity(st, small, sizeof small), SK_EINVAL);
    sk_store_close(st);
    for (int i = 0; i < 2; i++) {
        st = be_open(b);
        CHECK_EQ(sk_store_identity(st, id2, sizeof id2), 0);
        CHECK_STR(id2, id1);
        sk_store_close(st);
    }
    CHECK_EQ(be_int(b, "SELECT count(*) FROM store_identity"), 1);
    CHECK_EQ(be_sql(b, "INSERT INTO store_identity (one, store_id, created_ms)"
                       " VALUES (2, '0123456789abcdef', 0)"),
             1);
    struct be other;
    be_fresh(&other, b->my ? BE_MYSQL : b->pg ? BE_PG : BE_SQLITE);
    if (!b->pg) snprintf(other.spec, sizeof other.spec, "sqlite:%s/other.db", sk_th_tmpdir());
    st = be_open(&other);
    CHECK_EQ(sk_store_identity(st, id2, sizeof id2), 0);
    CHECK_MSG(strcmp(id1, id2) != 0, "two databases drew one identity %s", id1);
    sk_store_close(st);
}

BACKEND_TEST(refuses_a_schema_newer_than_the_binary)
{
    sk_store_close(be_open(b));
    CHECK_EQ(be_sql(b, b->pg ? "INSERT INTO schema_migrations VALUES (999, 0)"
                             : "PRAGMA user_version = 999"),
             0);
    sk_store *st = (sk_store *)1;
    char err[512] = "";
    CHECK_EQ(sk_store_open(&st, b->spec, err, sizeof err), SK_EDB);
    CHECK(st == NULL);
    CHECK_MSG(strstr(err, "newer") != NULL, "reason: %s", err);
}

static int open_and_check(const struct be *b, int i)
{
    (void)i;
    sk_store *st;
    char err[512];
    if (sk_store_open(&st, b->spec, err, sizeof err) != 0) {
        fprintf(stderr, "    concurrent open: %s\n", err);
        return 1;
    }
    int v = -1;
    int rc = sk_store_schema_version(st, &v);
    sk_store_close(st);
    return rc == 0 && v == N_MIGRATIONS ? 0 : 2;
}

BACKEND_TEST(concurrent_first_opens_migrate_once)
{
    /* Eight processes open the empty database at the same instant: each
     * migration step is applied once, every opener succeeds. */
    CHECK_EQ(fork_all(b, 8, open_and_check), 8);
    if (b->pg) CHECK_EQ(be_int(b, "SELECT count(*) FROM schema_migrations"), N_MIGRATIONS);
    CHECK_EQ(be_int(b, "SELECT count(*) FROM store_identity"), 1);
    sk_store *st = be_open_current(b);
    sk_store_close(st);
}

BACKEND_TEST(upgrades_a_version_1_database_in_place_keeping_its_rows)
{
    /* What a binary that knew only migration 1 left behind. */
    CHECK_EQ(be_sql(b, "CREATE TABLE activities (id BIGINT PRIMARY KEY CHECK (id >= 1),"
                       " name TEXT NOT NULL, stock_initial BIGINT NOT NULL,"
                       " stock BIGINT NOT NULL CHECK (stock >= 0 AND stock <= stock_initial),"
                       " per_user_limit BIGINT NOT NULL, max_per_order BIGINT NOT NULL,"
                       " start_ms BIGINT NOT NULL, end_ms BIGINT NOT NULL,"
                       " pay_timeout_s BIGINT NOT NULL, state TEXT NOT NULL DEFAULT 'created',"
                       " created_ms BIGINT NOT NULL);"
                       "INSERT INTO activities VALUES (5, 'old', 10, 10, 1, 1, 0, 1000, 30,"
                       " 'created', 0)"),
             0);
    CHECK_EQ(be_sql(b, b->pg ? "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY,"
                               " applied_ms BIGINT NOT NULL);"
                               "INSERT INTO schema_migrations VALUES (1, 0)"
                             : "PRAGMA user_version = 1"),
             0);
    sk_store *st = be_open_current(b);
    struct sk_order o;
    sk_th_order(&o, 5, 100, 0, 1, 4);
    struct sk_persist_result r = sk_th_persist_ok(st, &o, 1);
    CHECK_EQ(r.inserted, 1);
    CHECK_EQ(sk_th_db_stock(st, 5), 6);
    struct sk_order got;
    CHECK_EQ(sk_store_order_get(st, o.order_id, &got), 0);
    CHECK_EQ(got.pay_deadline_ms, 100 + 30 * 1000);
    struct sk_activity old;
    CHECK_EQ(sk_store_activity_get(st, 5, &old), 0);
    CHECK_EQ(old.segments, 1); /* migration 5's default */
    CHECK_EQ(old.rl_per_user_per_s, 0);
    sk_store_close(st);
    if (b->pg) CHECK_EQ(be_int(b, "SELECT count(*) FROM schema_migrations"), N_MIGRATIONS);
}

/* An older schema, made from this binary's (undo_sql: the later
 * migrations undone), checked to lack column gone of activities, holding
 * one activity row of that shape (insert_sql); then the store opened
 * (which upgrades it to this binary's schema) and that activity id read
 * back into got. The open store is the caller's. */
static sk_store *be_upgrade(const struct be *b, const char *undo_sql, const char *gone,
                            const char *insert_sql, uint64_t id, struct sk_activity *got)
{
    sk_store_close(be_open(b));
    CHECK_EQ(be_sql(b, undo_sql), 0);
    char sql[300];
    snprintf(sql, sizeof sql,
             b->my   ? "SELECT count(*) FROM information_schema.columns"
                       " WHERE table_schema = DATABASE() AND table_name = 'activities'"
                       " AND column_name = '%s'"
             : b->pg ? "SELECT count(*) FROM information_schema.columns"
                       " WHERE table_name = 'activities' AND column_name = '%s'"
                     : "SELECT count(*) FROM pragma_table_info('activities') WHERE name = '%s'",
             gone);
    CHECK_MSG(be_int(b, sql) == 0, "activities.%s is still there", gone);
    CHECK_EQ(be_sql(b, insert_sql), 0);
    sk_store *st = be_open_current(b);
    CHECK_EQ(sk_store_activity_get(st, id, got), 0);
    return st;
}

/* Migrations 10 (the challenge), 9 (the store's identity) and 8 undone
 * (idempotency keys, order conflicts; the marks' branch only when the marks
 * stay), and migration 7's columns (the waiting room), for the tests that
 * rebuild an older schema. */
#define UNDO_10                                                                                    \
    "ALTER TABLE activities DROP COLUMN ch_pow_min; ALTER TABLE activities DROP COLUMN "           \
    "ch_pow_max;"                                                                                  \
    "ALTER TABLE activities DROP COLUMN ch_pow_step; ALTER TABLE activities DROP COLUMN "          \
    "ch_captcha;"
#define UNDO_8_SQLITE                                                                              \
    UNDO_10 "DROP TABLE store_identity;"                                                           \
            "ALTER TABLE orders DROP COLUMN idem_key; DROP TABLE order_conflicts;"
#define UNDO_8_PG UNDO_8_SQLITE
#define UNDO_8_MY UNDO_8_SQLITE
#define UNDO_8_BRANCH_SQLITE                                                                       \
    "DROP TABLE redis_marks; CREATE TABLE redis_marks (label TEXT PRIMARY KEY,"                    \
    " activity_id INTEGER NOT NULL, adm INTEGER NOT NULL, updated_ms INTEGER NOT NULL,"            \
    " order_id TEXT NOT NULL) WITHOUT ROWID;"
#define UNDO_8_BRANCH_PG                                                                           \
    "ALTER TABLE redis_marks DROP CONSTRAINT redis_marks_pkey;"                                    \
    "ALTER TABLE redis_marks DROP COLUMN branch; ALTER TABLE redis_marks ADD PRIMARY KEY (label);"
#define UNDO_8_BRANCH_MY                                                                           \
    "ALTER TABLE redis_marks DROP PRIMARY KEY, DROP COLUMN branch, ADD PRIMARY KEY (label);"
#define DROP_WR                                                                                    \
    "ALTER TABLE activities DROP COLUMN wr_passes_per_s;"                                          \
    "ALTER TABLE activities DROP COLUMN wr_pass_ttl_s;"                                            \
    "ALTER TABLE activities DROP COLUMN wr_seed;"

BACKEND_TEST(upgrades_a_version_4_database_giving_its_activities_one_segment)
{
    /* What a binary that knew migrations 1..4 left behind: this binary's
     * schema without migration 5's column (nor migration 6's table, nor
     * migration 7's columns), and rows written in that shape (13 columns:
     * no segments). */
    struct sk_activity got;
    sk_store *st =
        be_upgrade(b,
                   b->my ? UNDO_8_MY "ALTER TABLE activities DROP COLUMN segments;" DROP_WR
                                     "DROP TABLE redis_marks;"
                                     "DELETE FROM schema_migrations WHERE version >= 5"
                   : b->pg ? UNDO_8_PG "ALTER TABLE activities DROP COLUMN segments;" DROP_WR
                                       "DROP TABLE redis_marks;"
                                       "DELETE FROM schema_migrations WHERE version >= 5"
                           : UNDO_8_SQLITE "ALTER TABLE activities DROP COLUMN segments;" DROP_WR
                                           "DROP TABLE redis_marks;"
                                           "PRAGMA user_version = 4",
                   "segments",
                   "INSERT INTO activities (" COLS_V4
                   ") VALUES (41,'v4 sale',10,7,1,1,0,1000,30,'open',0,5,2)",
                   41, &got);
    CHECK_EQ(got.segments, 1);
    CHECK_STR(got.name, "v4 sale");
    CHECK_EQ(got.stock_db, 7);
    CHECK_EQ(got.rl_per_user_per_s, 5);
    CHECK_EQ(got.rl_burst, 2);
    CHECK_STR(got.state, "open");
    /* The upgraded table takes segmented activities, and still refuses 0. */
    struct sk_activity a;
    sk_th_activity_valid(&a, 42);
    a.segments = 9;
    CHECK_EQ(sk_store_activity_insert(st, &a), 0);
    CHECK_EQ(sk_store_activity_get(st, 42, &got), 0);
    CHECK_EQ(got.segments, 9);
    sk_store_close(st);
    CHECK_EQ(be_sql(b, "UPDATE activities SET segments = 0 WHERE id = 41"), 1);
    if (b->pg)
        CHECK_EQ(be_int(b, "SELECT count(*) FROM schema_migrations"), N_MIGRATIONS);
    else
        CHECK_EQ(be_int(b, "PRAGMA user_version"), N_MIGRATIONS);
}

BACKEND_TEST(upgrades_a_version_6_database_giving_its_activities_no_waiting_room)
{
    /* What a binary that knew migrations 1..6 left behind: no waiting room
     * columns, rows of 14 values. */
    struct sk_activity got;
    sk_store *st =
        be_upgrade(b,
                   b->my ? UNDO_8_MY UNDO_8_BRANCH_MY DROP_WR
                       "DELETE FROM schema_migrations WHERE version >= 7"
                   : b->pg ? UNDO_8_PG UNDO_8_BRANCH_PG DROP_WR
                       "DELETE FROM schema_migrations WHERE version >= 7"
                           : UNDO_8_SQLITE UNDO_8_BRANCH_SQLITE DROP_WR "PRAGMA user_version = 6",
                   "wr_seed",
                   "INSERT INTO activities (" COLS_V4
                   ", segments) VALUES (51,'v5 sale',10,10,1,1,0,1000,30,'open',0,0,0,2)",
                   51, &got);
    CHECK_EQ(got.segments, 2);
    CHECK_EQ(got.wr_passes_per_s, 0);
    CHECK_EQ(got.wr_pass_ttl_s, 0);
    CHECK_STR(got.wr_seed, "");
    /* no waiting room: no pace to set */
    CHECK_EQ(sk_store_activity_set_pass_rate(st, 51, 10), SK_ENOTFOUND);
    sk_store_close(st);
}

BACKEND_TEST(upgrades_a_version_7_database_keeping_its_orders_and_marks)
{
    /* What a binary that knew migrations 1..7 left behind: orders without
     * an idempotency key, one mark per label (no branch), no conflicts
     * table. */
    sk_store *st = be_open_sale(b, 71, 100, 1800);
    struct sk_order o;
    sk_th_order(&o, 71, 1000, 0, 5, 1);
    o.adm_seq = 3;
    sk_th_persist_ok(st, &o, 1);
    sk_store_close(st);
    CHECK_EQ(be_sql(b, b->my ? UNDO_8_MY UNDO_8_BRANCH_MY
                           "DELETE FROM schema_migrations WHERE version >= 8"
                       : b->pg ? UNDO_8_PG UNDO_8_BRANCH_PG
                           "DELETE FROM schema_migrations WHERE version >= 8"
                               : UNDO_8_SQLITE UNDO_8_BRANCH_SQLITE
                           "INSERT INTO redis_marks VALUES ('71', 71, 3, 0, '71-1000-0');"
                           "PRAGMA user_version = 7"),
             0);
    st = be_open_current(b);
    struct sk_order got;
    CHECK_EQ(sk_store_order_get(st, o.order_id, &got), 0);
    CHECK_STR(got.idem_key, "");
    CHECK_EQ(got.user_id, 5);
    struct sk_mark *m = sk_th_marks_n(st, 71, 1);
    CHECK_STR(m[0].label, "71");
    CHECK_STR(m[0].branch, "");
    CHECK_EQ(m[0].adm, 3);
    CHECK_STR(m[0].order_id, "71-1000-0");
    free(m);
    /* an older database gets its identity with the upgrade */
    char id[SK_STORE_IDENTITY_MAX];
    CHECK_EQ(sk_store_identity(st, id, sizeof id), 0);
    CHECK_EQ(strlen(id), SK_STORE_IDENTITY_LEN);
    sk_store_close(st);
}

/* ---- activities ---- */

BACKEND_TEST(activity_round_trips_every_field)
{
    sk_store *st = be_open(b);
    struct sk_activity a, got;
    sk_th_activity_valid(&a, SK_ACTIVITY_ID_MAX);
    snprintf(a.name, sizeof a.name, "秒杀 'quoted' \"name\" \\ {x,y}");
    a.stock = SK_ACTIVITY_STOCK_MAX;
    a.per_user_limit = 3;
    a.max_per_order = 2;
    a.pay_timeout_s = 60;
    a.segments = SK_ACTIVITY_SEGMENTS_MAX;
    a.stock_db = 5; /* ignored: DB stock starts at the initial stock */
    CHECK_EQ(sk_store_activity_insert(st, &a), 0);
    CHECK_EQ(sk_store_activity_get(st, a.id, &got), 0);
    CHECK_EQ(got.id, a.id);
    CHECK_STR(got.name, a.name);
    CHECK_EQ(got.stock, a.stock);
    CHECK_EQ(got.stock_db, a.stock);
    CHECK_EQ(got.per_user_limit, 3);
    CHECK_EQ(got.max_per_order, 2);
    CHECK_EQ(got.start_ms, a.start_ms);
    CHECK_EQ(got.end_ms, a.end_ms);
    CHECK_EQ(got.pay_timeout_s, 60);
    CHECK_EQ(got.segments, SK_ACTIVITY_SEGMENTS_MAX);
    CHECK_EQ(got.created_ms, a.created_ms);
    CHECK_STR(got.state, "created");
    /* The longest name (127 bytes) fits. */
    sk_th_activity_valid(&a, 2);
    memset(a.name, 'n', SK_ACTIVITY_NAME_MAX - 1);
    a.name[SK_ACTIVITY_NAME_MAX - 1] = 0;
    CHECK_EQ(sk_store_activity_insert(st, &a), 0);
    CHECK_EQ(sk_store_activity_get(st, 2, &got), 0);
    CHECK_STR(got.name, a.name);
    sk_store_close(st);
}

BACKEND_TEST(activity_segments_round_trip_through_get_and_list_and_bad_ones_are_refused)
{
    sk_store *st = be_open(b);
    struct sk_activity a, got;
    static const int64_t segs[] = {1, 2, 64, SK_ACTIVITY_SEGMENTS_MAX};
    for (int i = 0; i < 4; i++) {
        sk_th_activity_valid(&a, 100 + (uint64_t)i);
        a.stock = 1000;
        a.segments = segs[i];
        CHECK_MSG(sk_store_activity_insert(st, &a) == 0, "insert: %s", sk_store_errstr(st));
    }
    sk_th_activity_valid(&a, 110); /* no segments given: the default, 1 */
    CHECK_EQ(sk_store_activity_insert(st, &a), 0);
    CHECK_EQ(sk_store_activity_get(st, 110, &got), 0);
    CHECK_EQ(got.segments, 1);
    CHECK_EQ(be_int(b, "SELECT segments FROM activities WHERE id = 103"), SK_ACTIVITY_SEGMENTS_MAX);
    struct sk_activity *all;
    size_t n;
    CHECK_EQ(sk_store_activity_list(st, &all, &n), 0);
    CHECK_EQ(n, 5);
    for (int i = 0; i < 4; i++) {
        CHECK_EQ(all[i].id, 100 + (uint64_t)i);
        CHECK_EQ(all[i].segments, segs[i]);
    }
    CHECK_EQ(all[4].segments, 1);
    free(all);
    /* The store validates again: nothing of these is written. */
    static const struct {
        int64_t stock, segments;
        const char *want;
    } bad[] = {
        {100, 0, "segments must be between 1 and 256"},
        {1000, SK_ACTIVITY_SEGMENTS_MAX + 1, "segments must be between 1 and 256"},
        {3, 4, "must not exceed the stock"},
    };
    for (int i = 0; i < 3; i++) {
        sk_th_activity_valid(&a, 120);
        a.stock = bad[i].stock;
        a.segments = bad[i].segments;
        CHECK_EQ(sk_store_activity_insert(st, &a), SK_EINVAL);
        CHECK_MSG(strstr(sk_store_errstr(st), bad[i].want) != NULL, "reason: %s",
                  sk_store_errstr(st));
        CHECK_EQ(sk_store_activity_get(st, 120, &got), SK_ENOTFOUND);
    }
    sk_store_close(st);
}

/* An id beyond what SQL's bigint holds is a valid uint64 but no activity:
 * "not found" (an HTTP 404), never a database error (PostgreSQL refuses to
 * cast the parameter). */
BACKEND_TEST(activity_ids_beyond_bigint_are_not_found_not_errors)
{
    sk_store *st = be_open_sale(b, 7, 100, 1800);
    const uint64_t ids[] = {(uint64_t)INT64_MAX + 1, 12345678901234567890ULL, UINT64_MAX};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        struct sk_activity a;
        int64_t s1, s2;
        CHECK_EQ(sk_store_activity_get(st, ids[i], &a), SK_ENOTFOUND);
        CHECK_MSG(strstr(sk_store_errstr(st), "not found") != NULL, "%s", sk_store_errstr(st));
        CHECK_EQ(sk_store_activity_set_state(st, ids[i], "open"), SK_ENOTFOUND);
        CHECK_EQ(sk_store_activity_set_db_stock(st, ids[i], 1), SK_ENOTFOUND);
        CHECK_EQ(sk_store_db_stock_check(st, ids[i], &s1, &s2), SK_ENOTFOUND);
        CHECK_EQ(sk_store_db_stock_repair(st, ids[i], 1, &s1, &s2), SK_ENOTFOUND);
        CHECK_EQ(sk_store_activity_delete(st, ids[i]), SK_ENOTFOUND);
        struct sk_order_counts c;
        c.orders[0] = 99;
        CHECK_EQ(sk_store_orders_count(st, ids[i], &c), 0);
        CHECK_EQ(c.orders[SK_ORDER_CREATED], 0);
        struct sk_order o[2];
        size_t n = 9;
        CHECK_EQ(sk_store_orders_list(st, ids[i], NULL, 2, o, &n), 0);
        CHECK_EQ(n, 0);
        struct sk_audit *au;
        CHECK_EQ(sk_store_audit_list(st, ids[i], &au, &n), 0);
        CHECK_EQ(n, 0);
    }
    /* the real one is untouched and the handle still works */
    CHECK_EQ(sk_th_db_stock(st, 7), 100);
    sk_store_close(st);
}

BACKEND_TEST(activity_duplicate_id_is_eexist_and_keeps_the_first)
{
    sk_store *st = be_open(b);
    struct sk_activity a, x, got;
    sk_th_activity_valid(&a, 21);
    sk_th_activity_valid(&x, 21);
    x.stock = 999;
    CHECK_EQ(sk_store_activity_insert(st, &a), 0);
    CHECK_EQ(sk_store_activity_insert(st, &x), SK_EEXIST);
    CHECK(strstr(sk_store_errstr(st), "already exists") != NULL);
    CHECK_EQ(sk_store_activity_get(st, 21, &got), 0);
    CHECK_EQ(got.stock, 100);
    /* The handle stays usable after the refusal. */
    sk_th_activity_valid(&x, 22);
    CHECK_EQ(sk_store_activity_insert(st, &x), 0);
    CHECK_STR(sk_store_errstr(st), "");
    sk_store_close(st);
}

BACKEND_TEST(activity_insert_refuses_invalid_definitions)
{
    sk_store *st = be_open(b);
    struct sk_activity a, got;
    sk_th_activity_valid(&a, 22);
    a.end_ms = a.start_ms;
    CHECK_EQ(sk_store_activity_insert(st, &a), SK_EINVAL);
    CHECK(strstr(sk_store_errstr(st), "end must be after start") != NULL);
    CHECK_EQ(sk_store_activity_get(st, 22, &got), SK_ENOTFOUND);
    sk_store_close(st);
}

BACKEND_TEST(check_constraints_hold_below_the_c_validation)
{
    /* Hand-written SQL cannot store what the engine would refuse either. */
    sk_store_close(be_open(b));
    static const char *const bad[] = {
        /* stock < 0 */
        "INSERT INTO activities (" COLS_V7
        ") VALUES (1,'x',10,-1,1,1,0,10,1,'created',0,0,0,1,0,0,'')",
        /* stock above the initial stock */
        "INSERT INTO activities (" COLS_V7
        ") VALUES (1,'x',10,11,1,1,0,10,1,'created',0,0,0,1,0,0,'')",
        /* initial 0 */
        "INSERT INTO activities (" COLS_V7
        ") VALUES (1,'x',0,0,1,1,0,10,1,'created',0,0,0,1,0,0,'')",
        /* limit 0 */
        "INSERT INTO activities (" COLS_V7
        ") VALUES (1,'x',10,10,0,1,0,10,1,'created',0,0,0,1,0,0,'')",
        /* end = start */
        "INSERT INTO activities (" COLS_V7
        ") VALUES (1,'x',10,10,1,1,10,10,1,'created',0,0,0,1,0,0,'')",
        /* state */
        "INSERT INTO activities (" COLS_V7
        ") VALUES (1,'x',10,10,1,1,0,10,1,'running',0,0,0,1,0,0,'')",
        /* name */
        "INSERT INTO activities (" COLS_V7
        ") VALUES (1,'',10,10,1,1,0,10,1,'created',0,0,0,1,0,0,'')",
        /* id 0 */
        "INSERT INTO activities (" COLS_V7
        ") VALUES (0,'x',10,10,1,1,0,10,1,'created',0,0,0,1,0,0,'')",
        /* rate < 0 */
        "INSERT INTO activities (" COLS_V7
        ") VALUES (1,'x',10,10,1,1,0,10,1,'created',0,-1,0,1,0,0,'')",
        /* burst < 0 */
        "INSERT INTO activities (" COLS_V7
        ") VALUES (1,'x',10,10,1,1,0,10,1,'created',0,1,-1,1,0,0,'')",
        /* segments 0 */
        "INSERT INTO activities (" COLS_V7
        ") VALUES (1,'x',10,10,1,1,0,10,1,'created',0,0,0,0,0,0,'')",
        /* segments < 0 */
        "INSERT INTO activities (" COLS_V7
        ") VALUES (1,'x',10,10,1,1,0,10,1,'created',0,0,0,-1,0,0,'')",
        /* segments NULL */
        "INSERT INTO activities (" COLS_V7
        ") VALUES (1,'x',10,10,1,1,0,10,1,'created',0,0,0,NULL,0,0,'')",
        /* passes per second < 0 */
        "INSERT INTO activities (" COLS_V7
        ") VALUES (1,'x',10,10,1,1,0,10,1,'created',0,0,0,1,-1,0,'')",
        /* pass TTL < 0 */
        "INSERT INTO activities (" COLS_V7
        ") VALUES (1,'x',10,10,1,1,0,10,1,'created',0,0,0,1,0,-1,'')",
        /* a seed of 65 digits */
        "INSERT INTO activities (" COLS_V7
        ") VALUES (1,'x',10,10,1,1,0,10,1,'created',0,0,0,1,5,60,'"
        "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff0')",
        /* seed NULL */
        "INSERT INTO activities (" COLS_V7
        ") VALUES (1,'x',10,10,1,1,0,10,1,'created',0,0,0,1,5,60,NULL)",
        /* challenge bits < 0, a CAPTCHA name too long (docs/challenges.md) */
        "INSERT INTO activities (" COLS_V10
        ") VALUES (1,'x',10,10,1,1,0,10,1,'created',0,0,0,1,0,0,'',-1,0,0,'')",
        "INSERT INTO activities (" COLS_V10
        ") VALUES (1,'x',10,10,1,1,0,10,1,'created',0,0,0,1,0,0,'',0,0,-1,'')",
        "INSERT INTO activities (" COLS_V10
        ") VALUES (1,'x',10,10,1,1,0,10,1,'created',0,0,0,1,0,0,'',0,0,0,'turnstile-turnstile')",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_MSG(be_sql(b, bad[i]) == 1, "accepted: %s", bad[i]);
    CHECK_EQ(be_sql(b, "INSERT INTO activities (" COLS_V7
                       ") VALUES (1,'x',10,10,1,1,0,10,1,'created',0,0,0,1,0,0,'')"),
             0);
    CHECK_EQ(be_sql(b, "UPDATE activities SET stock = stock - 11 WHERE id = 1"), 1);
    /* Orders: quantity >= 1, known statuses, one row per order id. */
    CHECK_EQ(be_sql(b, "INSERT INTO orders (order_id, activity_id, user_id, quantity, status,"
                       " created_ms, pay_deadline_ms, stream_id)"
                       " VALUES ('1-1-0', 1, 1, 0, 'created', 0, 0, '1-0')"),
             1);
    CHECK_EQ(be_sql(b, "INSERT INTO orders (order_id, activity_id, user_id, quantity, status,"
                       " created_ms, pay_deadline_ms, stream_id)"
                       " VALUES ('1-1-0', 1, 1, 1, 'shipped', 0, 0, '1-0')"),
             1);
    const char *ok = "INSERT INTO orders (order_id, activity_id, user_id, quantity, status,"
                     " created_ms, pay_deadline_ms, stream_id)"
                     " VALUES ('1-1-0', 1, 1, 1, 'created', 0, 0, '1-0')";
    CHECK_EQ(be_sql(b, ok), 0);
    CHECK_EQ(be_sql(b, ok), 1);
    /* An idempotency key: NULL or 1..64 bytes, never "". */
    static const char *const bad_key[] = {"''", "'" KEY64 "k'"};
    for (size_t i = 0; i < 2; i++) {
        char sql[400];
        snprintf(sql, sizeof sql,
                 "INSERT INTO orders (order_id, activity_id, user_id, quantity, status,"
                 " created_ms, pay_deadline_ms, stream_id, idem_key)"
                 " VALUES ('1-2-0', 1, 1, 1, 'created', 0, 0, '2-0', %s)",
                 bad_key[i]);
        CHECK_MSG(be_sql(b, sql) == 1, "accepted: %s", sql);
    }
    CHECK_EQ(be_sql(b, "INSERT INTO orders (order_id, activity_id, user_id, quantity, status,"
                       " created_ms, pay_deadline_ms, stream_id, idem_key)"
                       " VALUES ('1-2-0', 1, 1, 1, 'created', 0, 0, '2-0', '" KEY64 "')"),
             0);
    /* A mark's branch: at most 15 bytes; one row per label and branch. */
    const char *mark = "INSERT INTO redis_marks (label, branch, activity_id, adm, updated_ms,"
                       " order_id) VALUES ('1', 'ffee0011', 1, 1, 0, '1-1-0-ffee0011')";
    CHECK_EQ(be_sql(b, mark), 0);
    CHECK_EQ(be_sql(b, mark), 1);
    CHECK_EQ(be_sql(b, "INSERT INTO redis_marks (label, branch, activity_id, adm, updated_ms,"
                       " order_id) VALUES ('1', '', 1, 1, 0, '1-1-0')"),
             0);
    CHECK_EQ(be_sql(b, "INSERT INTO redis_marks (label, branch, activity_id, adm, updated_ms,"
                       " order_id) VALUES ('1', '" KEY16 "', 1, 1, 0, '1-1-0')"),
             1);
}

BACKEND_TEST(activity_list_ids_set_state_set_db_stock_and_delete)
{
    sk_store *st = be_open(b);
    struct sk_activity *all = (struct sk_activity *)1;
    size_t n = 99;
    CHECK_EQ(sk_store_activity_list(st, &all, &n), 0);
    CHECK_EQ(n, 0);
    CHECK(all == NULL);
    uint64_t *ids = (uint64_t *)1;
    CHECK_EQ(sk_store_activity_ids(st, &ids, &n), 0);
    CHECK_EQ(n, 0);
    CHECK(ids == NULL);
    uint64_t want[] = {30, 10, 20};
    for (int i = 0; i < 3; i++)
        add_activity(st, want[i], 100, 1800);
    CHECK_EQ(sk_store_activity_list(st, &all, &n), 0);
    CHECK_EQ(n, 3);
    CHECK_EQ(all[0].id, 10);
    CHECK_EQ(all[1].id, 20);
    CHECK_EQ(all[2].id, 30);
    CHECK_STR(all[2].name, "flash sale 30");
    free(all);
    CHECK_EQ(sk_store_activity_ids(st, &ids, &n), 0);
    CHECK_EQ(n, 3);
    CHECK_EQ(ids[0], 10);
    CHECK_EQ(ids[2], 30);
    free(ids);

    struct sk_activity got;
    CHECK_EQ(sk_store_activity_set_state(st, 20, "open"), 0);
    CHECK_EQ(sk_store_activity_get(st, 20, &got), 0);
    CHECK_STR(got.state, "open");
    CHECK_EQ(sk_store_activity_set_state(st, 20, "running"), SK_EINVAL);
    CHECK_EQ(sk_store_activity_get(st, 20, &got), 0);
    CHECK_STR(got.state, "open");
    CHECK_EQ(sk_store_activity_set_state(st, 99, "open"), SK_ENOTFOUND);
    CHECK_EQ(sk_store_activity_get(st, 99, &got), SK_ENOTFOUND);
    CHECK(strstr(sk_store_errstr(st), "not found") != NULL);

    CHECK_EQ(sk_store_activity_set_db_stock(st, 20, 7), 0);
    CHECK_EQ(sk_th_db_stock(st, 20), 7);
    CHECK_EQ(sk_store_activity_set_db_stock(st, 20, -1), SK_EINVAL);
    CHECK_EQ(sk_store_activity_set_db_stock(st, 20, 101), SK_EINVAL);
    CHECK(strstr(sk_store_errstr(st), "above the initial") != NULL);
    CHECK_EQ(sk_store_activity_set_db_stock(st, 99, 1), SK_ENOTFOUND);
    CHECK_EQ(sk_th_db_stock(st, 20), 7);

    CHECK_EQ(sk_store_activity_delete(st, 20), 0);
    CHECK_EQ(sk_store_activity_get(st, 20, &got), SK_ENOTFOUND);
    CHECK_EQ(sk_store_activity_delete(st, 20), SK_ENOTFOUND);
    CHECK_EQ(sk_store_activity_list(st, &all, &n), 0);
    CHECK_EQ(n, 2);
    free(all);

    /* An id is taken again once deleted, unless its orders are still in
     * the database: a sale under it would meet them. */
    add_activity(st, 20, 100, 1800);
    struct sk_order o;
    sk_th_order(&o, 30, sk_wall_ms(), 0, 5, 1);
    sk_th_persist_ok(st, &o, 1);
    sk_th_order(&o, 30, sk_wall_ms(), 1, 6, 1);
    sk_th_persist_ok(st, &o, 1);
    CHECK_EQ(sk_store_activity_delete(st, 30), 0);
    struct sk_activity again;
    sk_th_activity_valid(&again, 30);
    CHECK_EQ(sk_store_activity_insert(st, &again), SK_EEXIST);
    CHECK_MSG(strstr(sk_store_errstr(st), "its 2 orders are still in the database"), "%s",
              sk_store_errstr(st));
    CHECK_EQ(sk_store_activity_get(st, 30, &got), SK_ENOTFOUND); /* nothing written */
    CHECK_EQ(sk_store_activity_insert(st, &again), SK_EEXIST);   /* nor the second time */
    CHECK_EQ(sk_store_activity_list(st, &all, &n), 0);
    CHECK_EQ(n, 2); /* 10 and 20 again; not 30 */
    free(all);
    sk_store_close(st);
}

/* ---- orders ---- */

BACKEND_TEST(orders_persist_inserts_takes_stock_and_redelivery_is_a_noop)
{
    sk_store *st = be_open_sale(b, 5, 100, 600);
    add_activity(st, 6, 10, 60);
    struct sk_order o[6];
    sk_th_order(&o[0], 5, 1795946400000, 0, 1, 2);
    sk_th_order(&o[1], 5, 1795946400000, 1, 2, 1);
    sk_th_order(&o[2], 6, 1795946400001, 0, 3, 3);
    sk_th_order(&o[3], 5, 1795946400002, 0, UINT64_MAX, 1); /* the top user id survives */
    struct sk_persist_result r = sk_th_persist_ok(st, o, 4);
    CHECK_EQ(r.inserted, 4);
    CHECK_EQ(r.duplicates, 0);
    CHECK_EQ(r.stock_failures, 0);
    CHECK_EQ(r.units, 7);
    CHECK_EQ(sk_th_db_stock(st, 5), 96);
    CHECK_EQ(sk_th_db_stock(st, 6), 7);

    struct sk_order got;
    CHECK_EQ(sk_store_order_get(st, o[0].order_id, &got), 0);
    CHECK_STR(got.order_id, o[0].order_id);
    CHECK_STR(got.stream_id, o[0].stream_id);
    CHECK_EQ(got.activity_id, 5);
    CHECK_EQ(got.user_id, 1);
    CHECK_EQ(got.quantity, 2);
    CHECK_EQ(got.status, SK_ORDER_CREATED);
    CHECK_EQ(got.created_ms, 1795946400000);
    CHECK_EQ(got.pay_deadline_ms, 1795946400000 + 600 * 1000);
    CHECK_EQ(got.paid_ms, 0);
    CHECK_EQ(got.cancelled_ms, 0);
    CHECK_EQ(sk_store_order_get(st, o[2].order_id, &got), 0);
    CHECK_EQ(got.pay_deadline_ms, 1795946400001 + 60 * 1000);
    CHECK_EQ(sk_store_order_get(st, o[3].order_id, &got), 0);
    CHECK(got.user_id == UINT64_MAX);
    CHECK_EQ(sk_store_order_get(st, "5-0-0", &got), SK_ENOTFOUND);

    /* The same entries delivered again, with one new one: only the new
     * one is written and takes stock. */
    sk_th_order(&o[4], 5, 1795946400003, 0, 4, 2);
    r = sk_th_persist_ok(st, o, 5);
    CHECK_EQ(r.inserted, 1);
    CHECK_EQ(r.duplicates, 4);
    CHECK_EQ(r.units, 2);
    CHECK_EQ(sk_th_db_stock(st, 5), 94);
    CHECK_EQ(sk_th_db_stock(st, 6), 7);
    /* One id twice in one batch: one row. */
    sk_th_order(&o[5], 6, 1795946400004, 0, 5, 1);
    struct sk_order twice[2] = {o[5], o[5]};
    r = sk_th_persist_ok(st, twice, 2);
    CHECK_EQ(r.inserted, 1);
    CHECK_EQ(r.duplicates, 1);
    CHECK_EQ(sk_th_db_stock(st, 6), 6);
    /* An empty batch is fine. */
    r = sk_th_persist_ok(st, o, 0);
    CHECK_EQ(r.inserted, 0);
    struct sk_order_counts c;
    CHECK_EQ(sk_store_orders_count(st, 5, &c), 0);
    CHECK_EQ(c.orders[SK_ORDER_CREATED], 4);
    CHECK_EQ(c.units[SK_ORDER_CREATED], 6);
    CHECK_EQ(c.stock_failures, 0);
    sk_store_close(st);
}

BACKEND_TEST(orders_persist_records_failed_stock_conditions_never_drops_them)
{
    sk_store *st = be_open_sale(b, 7, 5, 1800);
    /* 3 + 3 > 5: the first takes its stock, the second's condition fails;
     * both orders are kept (Redis admitted them), the failure is counted
     * and recorded. An order of an activity absent from the DB: kept, its
     * failure recorded, the default pay timeout. */
    struct sk_order o[4];
    sk_th_order(&o[0], 7, 1000, 0, 1, 3);
    sk_th_order(&o[1], 7, 1000, 1, 2, 3);
    sk_th_order(&o[2], 7, 1000, 2, 3, 2);
    sk_th_order(&o[3], 8, 1000, 0, 4, 1);
    struct sk_persist_result r = sk_th_persist_ok(st, o, 4);
    CHECK_EQ(r.inserted, 4);
    CHECK_EQ(r.stock_failures, 2);
    CHECK_EQ(r.units_unstocked, 4);
    CHECK_EQ(r.units, 9);
    CHECK_EQ(sk_th_db_stock(st, 7), 0); /* 5 - 3 - 2: in batch order, greedy */
    struct sk_order got;
    CHECK_EQ(sk_store_order_get(st, o[1].order_id, &got), 0);
    CHECK_EQ(sk_store_order_get(st, o[3].order_id, &got), 0);
    CHECK_EQ(got.pay_deadline_ms, 1000 + SK_ACTIVITY_PAY_TIMEOUT_DEFAULT * 1000LL);
    struct sk_order_counts c;
    CHECK_EQ(sk_store_orders_count(st, 7, &c), 0);
    CHECK_EQ(c.orders[SK_ORDER_CREATED], 3);
    CHECK_EQ(c.stock_failures, 1);
    CHECK_EQ(c.stock_failure_units, 3);
    CHECK_EQ(sk_store_orders_count(st, 8, &c), 0);
    CHECK_EQ(c.stock_failures, 1);
    CHECK_EQ(be_int(b, "SELECT count(*) FROM stock_failures WHERE db_stock IS NULL"), 1);
    CHECK_EQ(be_int(b, "SELECT db_stock FROM stock_failures WHERE activity_id = 7"), 2);
    sk_store_close(st);
}

BACKEND_TEST(orders_persist_keeps_the_highest_admission_number_per_key_set_label)
{
    /* the rollback guard's watermark (docs/recovery.md, migration 6) */
    sk_store *st = be_open(b);
    struct sk_activity a;
    sk_th_activity_valid(&a, 61);
    a.stock = 100;
    CHECK_EQ(sk_store_activity_insert(st, &a), 0);
    sk_th_activity_valid(&a, 62);
    CHECK_EQ(sk_store_activity_insert(st, &a), 0);
    struct sk_order o[5];
    sk_th_order(&o[0], 61, 1000, 0, 1, 1);
    o[0].adm_seq = 7;
    sk_th_order(&o[1], 61, 1000, 1, 2, 1);
    o[1].adm_seq = 9;
    sk_th_order(&o[2], 61, 1000, 2, 3, 1); /* written before n existed: no number */
    sk_th_order(&o[3], 62, 1000, 0, 1, 1);
    o[3].adm_seq = 4;
    sk_th_order(&o[4], 61, 1000, 3, 4, 1); /* segment 3 of activity 61 */
    snprintf(o[4].order_id, sizeof o[4].order_id, "61.3-1000-3");
    o[4].adm_seq = 2;
    sk_th_persist_ok(st, o, 5);
    struct sk_mark *m = sk_th_marks_n(st, 61, 2);
    CHECK_STR(m[0].label, "61");
    CHECK_EQ(m[0].adm, 9);
    CHECK_EQ(m[0].activity_id, 61);
    CHECK_STR(m[0].order_id, "61-1000-1"); /* the order of that number */
    CHECK_STR(m[1].label, "61.3");
    CHECK_EQ(m[1].adm, 2);
    free(m);
    /* a re-delivered or older batch never lowers it; a newer one raises it */
    sk_th_order(&o[0], 61, 1000, 9, 9, 1);
    o[0].adm_seq = 3;
    sk_th_persist_ok(st, o, 1);
    sk_th_order(&o[1], 61, 1001, 0, 9, 1);
    o[1].adm_seq = 12;
    sk_th_persist_ok(st, &o[1], 1);
    m = sk_th_marks_n(st, 0, 3);
    CHECK_STR(m[0].label, "61");
    CHECK_EQ(m[0].adm, 12);
    CHECK_STR(m[0].order_id, "61-1001-0");
    CHECK_STR(m[2].label, "62");
    CHECK_EQ(m[2].adm, 4);
    free(m);
    /* an order's released_ms reads back (0 until marked) */
    struct sk_order got;
    CHECK_EQ(sk_store_order_get(st, o[1].order_id, &got), 0);
    CHECK_EQ(got.released_ms, 0);
    int prev;
    CHECK_EQ(sk_store_order_cancel(st, o[1].order_id, 5000, &prev), 0);
    CHECK_EQ(sk_store_order_mark_released(st, o[1].order_id, 6000), 0);
    CHECK_EQ(sk_store_order_get(st, o[1].order_id, &got), 0);
    CHECK_EQ(got.released_ms, 6000);
    /* the activity's marks go with it */
    CHECK_EQ(sk_store_activity_delete(st, 61), 0);
    m = sk_th_marks_n(st, 0, 1);
    CHECK_STR(m[0].label, "62");
    free(m);
    sk_store_close(st);
}

BACKEND_TEST(orders_keep_their_idempotency_key_and_a_reused_id_is_a_recorded_conflict)
{
    sk_store *st = be_open_sale(b, 81, 100, 1800);
    struct sk_order o[4];
    sk_th_order(&o[0], 81, 1000, 0, 1, 1);
    snprintf(o[0].idem_key, sizeof o[0].idem_key, "k-'\"\\{x,y}");
    sk_th_order(&o[1], 81, 1000, 1, 2, 2); /* no key */
    struct sk_persist_result r = sk_th_persist_ok(st, o, 2);
    CHECK_EQ(r.inserted, 2);
    struct sk_order got;
    CHECK_EQ(sk_store_order_get(st, o[0].order_id, &got), 0);
    CHECK_STR(got.idem_key, "k-'\"\\{x,y}");
    CHECK_EQ(sk_store_order_get(st, o[1].order_id, &got), 0);
    CHECK_STR(got.idem_key, "");
    size_t n;
    struct sk_order page[4];
    CHECK_EQ(sk_store_orders_list(st, 81, NULL, 4, page, &n), 0);
    CHECK_EQ(n, 2);
    CHECK_STR(page[0].idem_key, "k-'\"\\{x,y}");
    /* the same id again, the same admission: a re-delivery; the same id for
     * another user or quantity (two histories that diverged): a conflict,
     * counted and recorded, never a silent duplicate, nothing changed */
    o[2] = o[0];
    o[3] = o[1];
    o[3].user_id = 9;
    r = sk_th_persist_ok(st, &o[2], 2);
    CHECK_EQ(r.inserted, 0);
    CHECK_EQ(r.duplicates, 1);
    CHECK_EQ(r.conflicts, 1);
    CHECK_EQ(sk_store_order_get(st, o[1].order_id, &got), 0);
    CHECK_EQ(got.user_id, 2);
    CHECK_EQ(sk_th_db_stock(st, 81), 97);
    o[3].user_id = 2;
    o[3].quantity = 1;
    r = sk_th_persist_ok(st, &o[3], 1);
    CHECK_EQ(r.conflicts, 1);
    struct sk_order_counts c;
    CHECK_EQ(sk_store_orders_count(st, 81, &c), 0);
    CHECK_EQ(c.conflicts, 2);
    CHECK_EQ(c.orders[SK_ORDER_CREATED], 2);
    /* a key that is not visible ASCII is refused, nothing written */
    sk_th_order(&o[0], 81, 1000, 5, 3, 1);
    snprintf(o[0].idem_key, sizeof o[0].idem_key, "a b");
    CHECK_EQ(sk_store_orders_persist(st, o, 1, &r), SK_EINVAL);
    CHECK_EQ(sk_store_order_get(st, o[0].order_id, &got), SK_ENOTFOUND);
    sk_store_close(st);
}

BACKEND_TEST(marks_are_kept_per_label_and_branch)
{
    sk_store *st = be_open_sale(b, 82, 100, 1800);
    struct sk_order o[4];
    sk_th_order(&o[0], 82, 1000, 0, 1, 1); /* before branches */
    o[0].adm_seq = 5;
    sk_th_order(&o[1], 82, 1000, 1, 2, 1);
    snprintf(o[1].order_id, sizeof o[1].order_id, "82-1000-1-0a1b2c3d");
    o[1].adm_seq = 7;
    sk_th_order(&o[2], 82, 1000, 1, 3, 1); /* the same entry id on another branch */
    snprintf(o[2].order_id, sizeof o[2].order_id, "82-1000-1-ffee0011");
    o[2].adm_seq = 6;
    sk_th_order(&o[3], 82, 1000, 2, 4, 1);
    snprintf(o[3].order_id, sizeof o[3].order_id, "82-1000-2-0a1b2c3d");
    o[3].adm_seq = 8;
    struct sk_persist_result r = sk_th_persist_ok(st, o, 4);
    CHECK_EQ(r.inserted, 4);
    struct sk_mark *m = sk_th_marks_n(st, 82, 3);
    CHECK_STR(m[0].branch, "");
    CHECK_EQ(m[0].adm, 5);
    CHECK_STR(m[1].branch, "0a1b2c3d");
    CHECK_EQ(m[1].adm, 8);
    CHECK_STR(m[1].order_id, "82-1000-2-0a1b2c3d");
    CHECK_STR(m[2].branch, "ffee0011");
    CHECK_EQ(m[2].adm, 6);
    CHECK_STR(m[2].order_id, "82-1000-1-ffee0011");
    for (size_t i = 0; i < 3; i++)
        CHECK_STR(m[i].label, "82");
    free(m);
    sk_store_close(st);
}

BACKEND_TEST(orders_persist_refuses_a_malformed_batch_and_writes_nothing)
{
    sk_store *st = be_open_sale(b, 9, 100, 1800);
    /* three good orders but for one flaw of the middle one */
    static const char *const flaws[] = {"quantity 0", "activity 0", "no order id"};
    for (int k = 0; k < 3; k++) {
        struct sk_order o[3];
        for (int i = 0; i < 3; i++)
            sk_th_order(&o[i], 9, 1000, i, 1, 1);
        if (k == 0) o[1].quantity = 0;
        if (k == 1) o[1].activity_id = 0;
        if (k == 2) o[1].order_id[0] = 0;
        CHECK_MSG(sk_store_orders_persist(st, o, 3, NULL) == SK_EINVAL, "accepted: %s", flaws[k]);
    }
    struct sk_order_counts c;
    CHECK_EQ(sk_store_orders_count(st, 9, &c), 0);
    CHECK_EQ(c.orders[SK_ORDER_CREATED], 0);
    CHECK_EQ(sk_th_db_stock(st, 9), 100);
    sk_store_close(st);
}

/* The backends persist a batch in multi-row statements cut into row
 * counts (SQLite: 128, 32, 8, 1) and take stock once per activity with the
 * summed quantities, going order by order only when that fails. These
 * three pin the results to what an order-by-order persist yields. */

/* One query's number, the query built printf-style. */
static long long be_intf(const struct be *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static long long be_intf(const struct be *b, const char *fmt, ...)
{
    char sql[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sql, sizeof sql, fmt, ap);
    va_end(ap);
    return be_int(b, sql);
}

BACKEND_TEST(orders_persist_past_the_db_stock_records_each_failed_order_as_one_by_one)
{
    /* Activity 31 has 20 units for 40 orders of 1..3 (the summed update
     * fails): in batch order each takes its units while they last, a
     * later smaller one still fits, each failure is recorded with the
     * stock seen then. 32 has enough (its sum passes in the same batch),
     * 33 is not in the DB. 150 orders: past the largest bucket. */
    sk_store *st = be_open_sale(b, 31, 20, 1800);
    add_activity(st, 32, 1000, 60);
    enum { N = 150 };
    static struct sk_order o[N];
    int64_t left31 = 20, want_units = 0, want_unstocked = 0, seen[N];
    size_t want_fail = 0, n32 = 0;
    for (int i = 0; i < N; i++) {
        uint64_t aid = i % 15 == 14 ? 33 : i % 3 == 0 && i < 120 ? 31 : 32;
        int64_t q = aid == 31 ? 1 + (i * 7 % 5 == 0 ? 2 : i % 2) : 1;
        sk_th_order(&o[i], aid, 4000, i, (uint64_t)i + 1, q);
        want_units += q;
        seen[i] = -1;
        if (aid == 32) n32++;
        if (aid == 31 && left31 >= q) {
            left31 -= q;
        } else if (aid != 32) {
            seen[i] = aid == 31 ? left31 : -2; /* -2: no activity row */
            want_fail++;
            want_unstocked += q;
        }
    }
    CHECK(left31 < 3 && want_fail > 10); /* the condition failed part-way */
    struct sk_persist_result r = sk_th_persist_ok(st, o, N);
    CHECK_EQ(r.inserted, N);
    CHECK_EQ(r.duplicates, 0);
    CHECK_EQ(r.stock_failures, want_fail);
    CHECK_EQ(r.units, want_units);
    CHECK_EQ(r.units_unstocked, want_unstocked);
    CHECK_EQ(sk_th_db_stock(st, 31), left31);
    CHECK_EQ(sk_th_db_stock(st, 32), 1000 - (int64_t)n32);
    CHECK_EQ(be_int(b, "SELECT count(*) FROM stock_failures"), (long long)want_fail);
    for (int i = 0; i < N; i++) {
        if (seen[i] == -1) continue;
        if (seen[i] == -2)
            CHECK_EQ(be_intf(b,
                             "SELECT count(*) FROM stock_failures WHERE order_id = '%s'"
                             " AND db_stock IS NULL AND quantity = %" PRId64,
                             o[i].order_id, o[i].quantity),
                     1);
        else
            CHECK_MSG(be_intf(b,
                              "SELECT db_stock FROM stock_failures WHERE order_id = '%s'"
                              " AND quantity = %" PRId64,
                              o[i].order_id, o[i].quantity) == seen[i],
                      "order %s: DB stock seen", o[i].order_id);
    }
    struct sk_order got;
    CHECK_EQ(sk_store_order_get(st, o[14].order_id, &got), 0);
    CHECK_EQ(got.pay_deadline_ms, 4000 + SK_ACTIVITY_PAY_TIMEOUT_DEFAULT * 1000LL);
    CHECK_EQ(sk_store_order_get(st, o[N - 2].order_id, &got), 0); /* of 32 */
    CHECK_EQ(got.pay_deadline_ms, 4000 + 60 * 1000);
    /* Delivered again: nothing taken, nothing recorded twice. */
    r = sk_th_persist_ok(st, o, N);
    CHECK_EQ(r.duplicates, N);
    CHECK_EQ(r.stock_failures, 0);
    CHECK_EQ(sk_th_db_stock(st, 31), left31);
    CHECK_EQ(be_int(b, "SELECT count(*) FROM stock_failures"), (long long)want_fail);
    sk_store_close(st);
}

BACKEND_TEST(orders_persist_mixes_new_redelivered_and_conflicting_ids_across_row_buckets)
{
    sk_store *st = be_open_sale(b, 41, 100000, 1800);
    enum { OLD = 100, N = 300 };
    static struct sk_order old[OLD], o[N];
    for (int i = 0; i < OLD; i++)
        sk_th_order(&old[i], 41, 5000, i, (uint64_t)i + 1, 1 + i % 2);
    CHECK_EQ(sk_th_persist_ok(st, old, OLD).inserted, OLD);
    int64_t stock = 100000 - 150;
    /* Every third a re-delivery, 20 conflicts (another user or quantity
     * under a known id), the rest new; one new id twice across the
     * 128-row boundary (the second a re-delivery of the first), one new
     * id again with another quantity (a conflict with this batch's row). */
    size_t want_new = 0, want_dup = 0, want_conf = 0;
    int64_t want_units = 0;
    for (int j = 0; j < N; j++) {
        if (j % 3 == 0) {
            o[j] = old[j / 3];
            want_dup++;
        } else if (j % 3 == 1 && j < 60) {
            o[j] = old[j / 3];
            if (j % 2)
                o[j].user_id += 1000;
            else
                o[j].quantity += 1;
            want_conf++;
        } else if (j == 128) {
            o[j] = o[127];
            want_dup++;
        } else if (j == 131) {
            o[j] = o[130];
            o[j].quantity += 5;
            want_conf++;
        } else {
            sk_th_order(&o[j], 41, 6000, j, (uint64_t)j + 500, 1 + j % 3);
            if (j % 5 == 0) snprintf(o[j].idem_key, sizeof o[j].idem_key, "key-%d", j);
            want_new++;
            want_units += o[j].quantity;
        }
    }
    CHECK(o[127].order_id[0] && !strcmp(o[127].order_id, "41-6000-127"));
    struct sk_persist_result r = sk_th_persist_ok(st, o, N);
    CHECK_EQ(r.inserted, want_new);
    CHECK_EQ(r.duplicates, want_dup);
    CHECK_EQ(r.conflicts, want_conf);
    CHECK_EQ(r.units, want_units);
    CHECK_EQ(r.stock_failures, 0);
    CHECK_EQ(sk_th_db_stock(st, 41), stock - want_units);
    struct sk_order_counts c;
    CHECK_EQ(sk_store_orders_count(st, 41, &c), 0);
    CHECK_EQ(c.orders[SK_ORDER_CREATED], (int64_t)(OLD + want_new));
    CHECK_EQ(c.conflicts, (int64_t)want_conf);
    /* A conflicting id keeps its first admission; the conflict records
     * the other one. */
    struct sk_order got;
    CHECK_EQ(sk_store_order_get(st, o[1].order_id, &got), 0);
    CHECK_EQ(got.user_id, old[0].user_id);
    CHECK_EQ(be_intf(b, "SELECT user_id FROM order_conflicts WHERE order_id = '%s'", o[1].order_id),
             (long long)old[0].user_id + 1000);
    CHECK_EQ(sk_store_order_get(st, o[130].order_id, &got), 0);
    CHECK_EQ(got.quantity, o[130].quantity);
    CHECK_EQ(
        be_intf(b, "SELECT quantity FROM order_conflicts WHERE order_id = '%s'", o[131].order_id),
        (long long)o[130].quantity + 5);
    CHECK_EQ(sk_store_order_get(st, o[295].order_id, &got), 0);
    CHECK_STR(got.idem_key, "key-295");
    CHECK_EQ(got.user_id, 795);
    /* All of it again: every id present, the conflicts recorded again. */
    r = sk_th_persist_ok(st, o, N);
    CHECK_EQ(r.inserted, 0);
    CHECK_EQ(r.duplicates, N - want_conf);
    CHECK_EQ(r.conflicts, want_conf);
    CHECK_EQ(sk_th_db_stock(st, 41), stock - want_units);
    sk_store_close(st);
}

BACKEND_TEST(orders_persist_batches_at_and_across_row_bucket_boundaries)
{
    static const int sizes[] = {1, 2, 7, 8, 9, 31, 32, 33, 40, 127, 128, 129, 161, 300};
    enum { NS = sizeof sizes / sizeof sizes[0], MAXN = 300 };
    sk_store *st = be_open_sale(b, 51, 100000, 900);
    static struct sk_order o[MAXN];
    int64_t stock = 100000, rows = 0;
    for (int k = 0; k < NS; k++) {
        int n = sizes[k];
        int64_t units = 0;
        for (int i = 0; i < n; i++) {
            sk_th_order(&o[i], 51, 7000 + k, i, (uint64_t)(k * 1000 + i + 1), 1 + (i == n - 1));
            if (i % 4 == 1) snprintf(o[i].idem_key, sizeof o[i].idem_key, "b%d-%d", k, i);
            units += o[i].quantity;
        }
        struct sk_persist_result r = sk_th_persist_ok(st, o, (size_t)n);
        CHECK_MSG(r.inserted == (size_t)n && r.duplicates == 0 && r.units == units,
                  "batch of %d: %zu inserted, %zu duplicates", n, r.inserted, r.duplicates);
        stock -= units;
        rows += n;
        CHECK_EQ(sk_th_db_stock(st, 51), stock);
        struct sk_order got;
        for (int i = 0; i<n; i += n> 8 ? n / 8 : 1) { /* a sample, and the last */
            CHECK_EQ(sk_store_order_get(st, o[i].order_id, &got), 0);
            CHECK_EQ(got.user_id, o[i].user_id);
            CHECK_EQ(got.quantity, o[i].quantity);
            CHECK_STR(got.stream_id, o[i].stream_id);
            CHECK_STR(got.idem_key, o[i].idem_key);
            CHECK_EQ(got.pay_deadline_ms, 7000 + k + 900 * 1000);
        }
        CHECK_EQ(sk_store_order_get(st, o[n - 1].order_id, &got), 0);
        CHECK_EQ(got.quantity, 2);
    }
    struct sk_order_counts c;
    CHECK_EQ(sk_store_orders_count(st, 51, &c), 0);
    CHECK_EQ(c.orders[SK_ORDER_CREATED], rows);
    /* The last batch (300) again: all duplicates, nothing taken. */
    struct sk_persist_result r = sk_th_persist_ok(st, o, MAXN);
    CHECK_EQ(r.inserted, 0);
    CHECK_EQ(r.duplicates, MAXN);
    CHECK_EQ(sk_th_db_stock(st, 51), stock);
    sk_store_close(st);
}

BACKEND_TEST(orders_pay_and_cancel_move_only_from_created)
{
    sk_store *st = be_open_sale(b, 3, 100, 1800);
    struct sk_order o[3];
    for (int i = 0; i < 3; i++)
        sk_th_order(&o[i], 3, 5000, i, (uint64_t)i + 1, 1);
    sk_th_persist_ok(st, o, 3);
    int s = -1;
    CHECK_EQ(sk_store_order_pay(st, o[0].order_id, 6000, &s), 0);
    CHECK_EQ(s, SK_ORDER_PAID);
    CHECK_EQ(sk_store_order_pay(st, o[0].order_id, 7000, &s), 0); /* idempotent */
    CHECK_EQ(s, SK_ORDER_PAID);
    struct sk_order got;
    CHECK_EQ(sk_store_order_get(st, o[0].order_id, &got), 0);
    CHECK_EQ(got.paid_ms, 6000); /* the first payment time */
    CHECK_EQ(sk_store_order_cancel(st, o[0].order_id, 8000, &s), SK_ESTATE);
    CHECK_EQ(s, SK_ORDER_PAID);

    CHECK_EQ(sk_store_order_cancel(st, o[1].order_id, 6000, &s), 0);
    CHECK_EQ(s, SK_ORDER_CREATED); /* this call cancelled it */
    CHECK_EQ(sk_store_order_cancel(st, o[1].order_id, 6500, &s), 0);
    CHECK_EQ(s, SK_ORDER_CANCELLED); /* already: nothing changed */
    CHECK_EQ(sk_store_order_get(st, o[1].order_id, &got), 0);
    CHECK_EQ(got.cancelled_ms, 6000);
    CHECK_EQ(sk_store_order_pay(st, o[1].order_id, 7000, &s), SK_ESTATE);
    CHECK_EQ(s, SK_ORDER_CANCELLED);
    CHECK(strstr(sk_store_errstr(st), "cancelled") != NULL);

    CHECK_EQ(sk_store_order_pay(st, "3-9-9", 1, &s), SK_ENOTFOUND);
    CHECK_EQ(sk_store_order_cancel(st, "3-9-9", 1, &s), SK_ENOTFOUND);

    struct sk_order_counts c;
    CHECK_EQ(sk_store_orders_count(st, 3, &c), 0);
    CHECK_EQ(c.orders[SK_ORDER_CREATED], 1);
    CHECK_EQ(c.orders[SK_ORDER_PAID], 1);
    CHECK_EQ(c.orders[SK_ORDER_CANCELLED], 1);
    CHECK_EQ(c.units[SK_ORDER_PAID], 1);
    sk_store_close(st);
}

/* A constraint added under the store (SQLite cannot add a CHECK to a
 * table: a trigger that refuses the same rows). name is the constraint's,
 * table its table, check what the rows must hold; sqlite_when the rows a
 * trigger refuses, before op (INSERT or UPDATE). */
static void be_refuse(const struct be *b, const char *name, const char *table, const char *check,
                      const char *op, const char *sqlite_when)
{
    char sql[600];
    if (b->pg)
        snprintf(sql, sizeof sql, "ALTER TABLE %s ADD CONSTRAINT %s CHECK (%s)", table, name,
                 check);
    else
        snprintf(sql, sizeof sql,
                 "CREATE TRIGGER %s BEFORE %s ON %s WHEN %s BEGIN SELECT RAISE(ABORT, '%s');"
                 " END",
                 name, op, table, sqlite_when, name);
    CHECK_EQ(be_sql(b, sql), 0);
}

static void be_allow(const struct be *b, const char *name, const char *table)
{
    char sql[200];
    if (b->pg)
        snprintf(sql, sizeof sql, "ALTER TABLE %s DROP CONSTRAINT %s", table, name);
    else
        snprintf(sql, sizeof sql, "DROP TRIGGER %s", name);
    CHECK_EQ(be_sql(b, sql), 0);
}

/* The writes a server may send with the COMMIT instead of at once (a
 * status change, a cancel's stock credit, the marks, an audit row:
 * SK_SQL_DEFER in store_sql.c) are still all or nothing: the database
 * refusing one (here a constraint added under the store) fails the call,
 * names the statement, and leaves nothing of the change behind. */
BACKEND_TEST(orders_a_write_refused_at_the_commit_undoes_the_whole_change)
{
    sk_store *st = be_open_sale(b, 8, 100, 1800);
    struct sk_order o[2];
    for (int i = 0; i < 2; i++)
        sk_th_order(&o[i], 8, 5000, i, (uint64_t)i + 1, 2);
    sk_th_persist_ok(st, o, 2);
    CHECK_EQ(sk_th_db_stock(st, 8), 96);

    /* the cancel's stock credit refused: the order is not cancelled either */
    be_refuse(b, "t_cap", "activities", "stock <= 97", "UPDATE", "NEW.stock > 97");
    int s = -1;
    CHECK_EQ(sk_store_order_cancel(st, o[0].order_id, 6000, &s), SK_EINVAL);
    CHECK_MSG(strstr(sk_store_errstr(st), "give back DB stock") != NULL, "%s", sk_store_errstr(st));
    struct sk_order got;
    CHECK_EQ(sk_store_order_get(st, o[0].order_id, &got), 0);
    CHECK_EQ(got.status, SK_ORDER_CREATED);
    CHECK_EQ(got.cancelled_ms, 0);
    CHECK_EQ(sk_th_db_stock(st, 8), 96);
    be_allow(b, "t_cap", "activities");
    CHECK_EQ(sk_store_order_cancel(st, o[0].order_id, 6100, &s), 0);
    CHECK_EQ(s, SK_ORDER_CREATED);
    CHECK_EQ(sk_th_db_stock(st, 8), 98);

    /* the status change itself refused */
    be_refuse(b, "t_late", "orders", "status <> 'paid' OR paid_ms < 7000", "UPDATE",
              "NEW.status = 'paid' AND NEW.paid_ms >= 7000");
    CHECK_EQ(sk_store_order_pay(st, o[1].order_id, 8000, &s), SK_EINVAL);
    CHECK_MSG(strstr(sk_store_errstr(st), "update order status") != NULL, "%s",
              sk_store_errstr(st));
    CHECK_EQ(sk_store_order_get(st, o[1].order_id, &got), 0);
    CHECK_EQ(got.status, SK_ORDER_CREATED);
    CHECK_EQ(sk_store_order_pay(st, o[1].order_id, 6500, &s), 0);
    CHECK_EQ(s, SK_ORDER_PAID);
    be_allow(b, "t_late", "orders");

    /* a batch whose marks are refused: none of its orders, no stock taken */
    be_refuse(b, "t_adm", "redis_marks", "adm < 1000", "INSERT", "NEW.adm >= 1000");
    struct sk_order big;
    sk_th_order(&big, 8, 5000, 7, 9, 1);
    big.adm_seq = 5000;
    struct sk_persist_result r;
    CHECK_EQ(sk_store_orders_persist(st, &big, 1, &r), SK_EINVAL);
    CHECK_MSG(strstr(sk_store_errstr(st), "raise marks") != NULL, "%s", sk_store_errstr(st));
    CHECK_EQ(sk_store_order_get(st, big.order_id, &got), SK_ENOTFOUND);
    CHECK_EQ(sk_th_db_stock(st, 8), 98);
    CHECK(sk_th_marks_n(st, 8, 0) == NULL);
    be_allow(b, "t_adm", "redis_marks");
    CHECK_EQ(sk_th_persist_ok(st, &big, 1).inserted, 1);
    CHECK_EQ(sk_th_db_stock(st, 8), 97);

    /* a restore whose audit row is refused: the order is not restored */
    be_refuse(b, "t_audit", "audit", "kind <> 'repair_restore_order'", "INSERT",
              "NEW.kind = 'repair_restore_order'");
    struct sk_order lost;
    sk_th_order(&lost, 8, 5000, 8, 10, 1);
    CHECK_EQ(sk_store_order_restore(st, &lost, 9000, "lost"), SK_EINVAL);
    CHECK_EQ(sk_store_order_get(st, lost.order_id, &got), SK_ENOTFOUND);
    be_allow(b, "t_audit", "audit");
    CHECK_EQ(sk_store_order_restore(st, &lost, 9000, "lost"), 0);
    CHECK_EQ(sk_store_order_get(st, lost.order_id, &got), 0);
    sk_store_close(st);
}

#define RACE_ORDERS 40

/* Child i: even ones pay every order, odd ones cancel every order. Exit
 * code: how many transitions this child won (<= RACE_ORDERS), or 200+ on
 * an unexpected failure. */
static int race_child(const struct be *b, int i)
{
    sk_store *st;
    char err[512];
    if (sk_store_open(&st, b->spec, err, sizeof err) != 0) return 200;
    int won = 0;
    for (int k = 0; k < RACE_ORDERS; k++) {
        char id[64];
        snprintf(id, sizeof id, "4-100-%d", k);
        int s = -1, rc;
        if (i % 2 == 0) {
            rc = sk_store_order_pay(st, id, 1000 + i, &s);
            /* Paid now or before: ours only if the row has our time. */
            struct sk_order got;
            if (rc == 0 && sk_store_order_get(st, id, &got) == 0 && got.paid_ms == 1000 + i) won++;
        } else {
            rc = sk_store_order_cancel(st, id, 2000 + i, &s);
            if (rc == 0 && s == SK_ORDER_CREATED) won++;
        }
        if (rc != 0 && rc != SK_ESTATE && rc != SK_ETIMEDOUT) return 201;
        if (rc == SK_ETIMEDOUT) k--; /* a lock wait cut short: retry */
    }
    sk_store_close(st);
    return won;
}

BACKEND_TEST(orders_racing_pay_and_cancel_have_exactly_one_winner)
{
    sk_store *st = be_open_sale(b, 4, 1000, 1800);
    struct sk_order o[RACE_ORDERS];
    for (int k = 0; k < RACE_ORDERS; k++)
        sk_th_order(&o[k], 4, 100, k, (uint64_t)k + 1, 1);
    sk_th_persist_ok(st, o, RACE_ORDERS);
    int codes[4];
    fork_codes(b, 4, race_child, codes);
    int pays = 0, cancels = 0;
    for (int i = 0; i < 4; i++) {
        CHECK_MSG(codes[i] >= 0 && codes[i] <= RACE_ORDERS, "child %d exit %d", i, codes[i]);
        if (i % 2 == 0)
            pays += codes[i];
        else
            cancels += codes[i];
    }
    /* Every order: exactly one winning call, and the row agrees. */
    CHECK_EQ(pays + cancels, RACE_ORDERS);
    struct sk_order_counts c;
    CHECK_EQ(sk_store_orders_count(st, 4, &c), 0);
    CHECK_EQ(c.orders[SK_ORDER_CREATED], 0);
    CHECK_EQ(c.orders[SK_ORDER_PAID], pays);
    CHECK_EQ(c.orders[SK_ORDER_CANCELLED], cancels);
    sk_store_close(st);
}

#define HOG_HOLD_US 200000 /* one worker transaction: a large batch and its fsync */
#define HOG_GAP_US 1000    /* between two: the worker's read of the next batch */

/* The order worker's shape on the write lock, in a process of its own:
 * take it, hold it HOG_HOLD_US, give it back for HOG_GAP_US, again, until
 * the test closes its pipe. The hold and the gap are the load's shape (a real
 * worker's commit and round trip), not a wait for an outcome. */
static void lock_hog(const char *path, int stop_fd)
{
    sqlite3 *db;
    if (sqlite3_open(path, &db) != SQLITE_OK) _exit(3);
    sqlite3_busy_timeout(db, 5000);
    struct timespec hold = {0, HOG_HOLD_US * 1000L}, gap = {0, HOG_GAP_US * 1000L};
    for (;;) {
        char c;
        if (read(stop_fd, &c, 1) == 0) break; /* the test closed its end */
        if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) continue;
        nanosleep(&hold, NULL);
        if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) _exit(4);
        nanosleep(&gap, NULL);
    }
    sqlite3_close(db);
    _exit(0);
}

/* A pay while another process takes the write lock back to back (the order
 * worker in a busy sale, on the same file as serve's pool): it must get the
 * lock in a gap, not time out. SQLite's own busy handler tried every 100 ms
 * after the first quarter second, so it met a 1 ms gap in 201 ms about once
 * in 200 tries, and half the pays ran out of the 5 s bound (4 of 8 here,
 * in each of two runs); the store tries every millisecond (store_sqlite.c,
 * busy_try). */
SK_TEST(store_sqlite_a_pay_finds_the_write_lock_between_another_writers_transactions)
{
    struct be b;
    be_fresh(&b, BE_SQLITE);
    sk_store *st = be_open_sale(&b, 6, 100, 1800);
    enum { PAYS = 8 };
    struct sk_order o[PAYS];
    for (int i = 0; i < PAYS; i++)
        sk_th_order(&o[i], 6, 5000, i, (uint64_t)i + 1, 1);
    sk_th_persist_ok(st, o, PAYS);
    int stop[2];
    CHECK_EQ(pipe(stop), 0);
    CHECK_EQ(fcntl(stop[0], F_SETFL, O_NONBLOCK), 0);
    pid_t hog = fork();
    CHECK(hog >= 0);
    if (hog == 0) {
        close(stop[1]);
        lock_hog(b.path, stop[0]);
    }
    close(stop[0]);
    int paid = 0;
    for (int i = 0; i < PAYS; i++) {
        /* each pay asks while the hog holds the lock (at whatever point of
         * its hold), as a pay in a busy sale does */
        int64_t until = sk_mono_ms() + 5000;
        while (be_sql(&b, "BEGIN IMMEDIATE; ROLLBACK") == 0)
            CHECK_MSG(sk_mono_ms() < until, "the lock hog does not take the lock");
        int s = -1, rc = sk_store_order_pay(st, o[i].order_id, 6000 + i, &s);
        if (rc != 0) printf("    # pay %d: %s\n", i, sk_store_errstr(st));
        paid += rc == 0 && s == SK_ORDER_PAID;
    }
    close(stop[1]);
    int ws;
    CHECK_EQ(waitpid(hog, &ws, 0), hog);
    CHECK_MSG(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "lock hog: status %d", ws);
    CHECK_EQ(paid, PAYS);
    /* the rows say so, read under the store */
    CHECK_EQ(be_int(&b, "SELECT COUNT(*) FROM orders WHERE activity_id = 6 AND status = 'paid'"),
             PAYS);
    sk_store_close(st);
}

/* A pay or cancel that arrives while the order worker is inserting the
 * order: the call either finds no order (SK_ENOTFOUND: nothing changed) or
 * decides on the row it changed. Before the status decision was one step
 * with the update, a miss (no row yet) followed by a separate read (the row
 * inserted meanwhile, still created) reported "paid" / "this call
 * cancelled it" although nothing had changed. */
#define INSERT_RACES 150

struct insert_race {
    const struct be *b;
    int cancel;             /* 0 pay, 1 cancel */
    atomic_int round;       /* the order the caller should hammer; -1 stop */
    atomic_int calling;     /* the caller reached round r (it is calling) */
    int rc[INSERT_RACES];   /* the caller's first answer other than SK_ENOTFOUND */
    int prev[INSERT_RACES]; /* its status out */
};

static void insert_race_id(char *id, size_t cap, int k)
{
    snprintf(id, cap, "6-200-%d", k);
}

/* The caller: for each round, pays (or cancels) the order of that round in
 * a tight loop until the answer is something other than "not found". */
static void *insert_race_caller(void *arg)
{
    struct insert_race *x = arg;
    char err[512];
    sk_store *st;
    if (sk_store_open(&st, x->b->spec, err, sizeof err) != 0) return NULL;
    for (int k = 0; k < INSERT_RACES; k++) {
        while (atomic_load(&x->round) < k) {
        }
        char id[64];
        insert_race_id(id, sizeof id, k);
        int rc, s = -1;
        int64_t until = sk_mono_ms() + 10000;
        for (;;) {
            atomic_store(&x->calling, k);
            rc = x->cancel ? sk_store_order_cancel(st, id, 9000, &s)
                           : sk_store_order_pay(st, id, 9000, &s);
            if ((rc != SK_ENOTFOUND && rc != SK_ETIMEDOUT) || sk_mono_ms() >= until) break;
            /* SQLite has one writer at a time and its busy handler backs
             * off in milliseconds: leave the persister a gap now and then,
             * or it starves behind this loop */
            if (!x->b->pg) {
                struct timespec ts = {0, 100 * 1000};
                nanosleep(&ts, NULL);
            }
        }
        x->rc[k] = rc;
        x->prev[k] = s;
    }
    sk_store_close(st);
    return NULL;
}

static void insert_race(const struct be *b, int cancel)
{
    sk_store *st = be_open_sale(b, 6, 1000, 1800);
    struct insert_race *x = calloc(1, sizeof *x);
    CHECK(x != NULL);
    x->b = b;
    x->cancel = cancel;
    atomic_init(&x->round, -1);
    atomic_init(&x->calling, -1);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, insert_race_caller, x), 0);
    for (int k = 0; k < INSERT_RACES; k++) {
        atomic_store(&x->round, k);
        int64_t until = sk_mono_ms() + 10000;
        while (atomic_load(&x->calling) < k)
            CHECK_MSG(sk_mono_ms() < until, "the caller did not start round %d", k);
        struct sk_order o;
        sk_th_order(&o, 6, 200, k, (uint64_t)k + 1, 1);
        sk_th_persist_ok(st, &o, 1); /* lands somewhere in the caller's loop */
    }
    CHECK_EQ(pthread_join(t, NULL), 0);
    int changed = 0;
    for (int k = 0; k < INSERT_RACES; k++) {
        char id[64];
        insert_race_id(id, sizeof id, k);
        struct sk_order got;
        CHECK_EQ(sk_store_order_get(st, id, &got), 0);
        CHECK_MSG(x->rc[k] == 0, "round %d: %d %s", k, x->rc[k], sk_strerror(x->rc[k]));
        /* It answered after the row existed: the row is what it said. */
        int want = cancel ? SK_ORDER_CANCELLED : SK_ORDER_PAID;
        CHECK_MSG(got.status == want, "round %d: the call said %s (before: %s) but the order is %s",
                  k, cancel ? "cancelled" : "paid", sk_order_status_name(x->prev[k]),
                  sk_order_status_name(got.status));
        if (cancel) CHECK_EQ(x->prev[k], SK_ORDER_CREATED); /* the only caller: it won */
        changed++;
    }
    CHECK_EQ(changed, INSERT_RACES);
    /* Every cancel gave its unit back once; pays take nothing back. */
    CHECK_EQ(sk_th_db_stock(st, 6), cancel ? 1000 : 1000 - INSERT_RACES);
    free(x);
    sk_store_close(st);
}

BACKEND_TEST(orders_pay_racing_the_insert_reports_only_what_it_changed)
{
    insert_race(b, 0);
}

BACKEND_TEST(orders_cancel_racing_the_insert_reports_only_what_it_changed)
{
    insert_race(b, 1);
}

BACKEND_TEST(orders_expired_lists_unpaid_past_their_deadline_oldest_first)
{
    sk_store *st = be_open_sale(b, 12, 100, 10); /* 10 s to pay */
    struct sk_order o[5];
    for (int i = 0; i < 5; i++)
        sk_th_order(&o[i], 12, 100000 + 1000 * (4 - i), i, 1, 1);
    sk_th_persist_ok(st, o, 5); /* deadlines 114000, 113000, ..., 110000 */
    CHECK_EQ(sk_store_order_pay(st, o[4].order_id, 1, NULL), 0); /* 110000: paid */
    struct sk_order out[5];
    size_t n = 99;
    CHECK_EQ(sk_store_orders_expired(st, 110000, 5, out, &n), 0);
    CHECK_EQ(n, 0);
    CHECK_EQ(sk_store_orders_expired(st, 113500, 5, out, &n), 0);
    CHECK_EQ(n, 3); /* 111000, 112000, 113000; 110000 is paid */
    CHECK_STR(out[0].order_id, o[3].order_id);
    CHECK_STR(out[1].order_id, o[2].order_id);
    CHECK_STR(out[2].order_id, o[1].order_id);
    CHECK_EQ(sk_store_orders_expired(st, 999999, 2, out, &n), 0);
    CHECK_EQ(n, 2);
    CHECK_STR(out[0].order_id, o[3].order_id);
    CHECK_EQ(sk_store_orders_expired(st, 999999, 0, out, &n), 0);
    CHECK_EQ(n, 0);
    sk_store_close(st);
}

BACKEND_TEST(orders_list_pages_one_activity_in_id_order)
{
    sk_store *st = be_open(b);
    /* Activities 1, 10 and 11: "1-..." must not pick up "10-..." ids. */
    struct sk_order o[7];
    sk_th_order(&o[0], 1, 200, 0, 1, 1);
    sk_th_order(&o[1], 10, 200, 0, 1, 1);
    sk_th_order(&o[2], 1, 100, 0, 1, 1);
    sk_th_order(&o[3], 11, 100, 0, 1, 1);
    sk_th_order(&o[4], 1, 300, 5, 1, 1);
    sk_th_order(&o[5], 1, 300, 10, 1, 1);
    sk_th_order(&o[6], 1, 1000, 0, 1, 1);
    sk_th_persist_ok(st, o, 7);
    /* Byte order of the ids: 1-100-0, 1-1000-0, 1-200-0, 1-300-10, 1-300-5 */
    static const char *const want[] = {"1-100-0", "1-1000-0", "1-200-0", "1-300-10", "1-300-5"};
    struct sk_order out[2];
    size_t n, seen = 0;
    char after[SK_STORE_ORDER_ID_MAX] = "";
    do {
        CHECK_EQ(sk_store_orders_list(st, 1, after, 2, out, &n), 0);
        for (size_t i = 0; i < n; i++) {
            CHECK(seen < 5);
            CHECK_STR(out[i].order_id, want[seen]);
            CHECK_EQ(out[i].activity_id, 1);
            seen++;
        }
        if (n) snprintf(after, sizeof after, "%s", out[n - 1].order_id);
    } while (n == 2);
    CHECK_EQ(seen, 5);
    CHECK_EQ(sk_store_orders_list(st, 10, NULL, 2, out, &n), 0);
    CHECK_EQ(n, 1);
    CHECK_STR(out[0].order_id, "10-200-0");
    CHECK_EQ(sk_store_orders_list(st, 12, "", 2, out, &n), 0);
    CHECK_EQ(n, 0);
    sk_store_close(st);
}

static int persist_child(const struct be *b, int i)
{
    /* The same 200 orders, cut into batches differently per child. */
    sk_store *st;
    char err[512];
    if (sk_store_open(&st, b->spec, err, sizeof err) != 0) return 100;
    struct sk_order o[200];
    for (int k = 0; k < 200; k++)
        sk_th_order(&o[k], 13, 5000, k, (uint64_t)k + 1, 1 + k % 3);
    size_t step = (size_t)(7 + 13 * i);
    for (size_t k = 0; k < 200; k += step) {
        size_t m = 200 - k < step ? 200 - k : step;
        int rc;
        /* A lock wait cut short is a retry, as the worker does. */
        while ((rc = sk_store_orders_persist(st, o + k, m, NULL)) == SK_ETIMEDOUT) {
        }
        if (rc) {
            fprintf(stderr, "    persist: %s\n", sk_store_errstr(st));
            return 101;
        }
    }
    sk_store_close(st);
    return 0;
}

/* The order.created events of the store (read as the dispatcher reads
 * them: a batch row is one event per order): each seq 1, each subject
 * once; how many. */
static size_t created_events_once(sk_store *st)
{
    static struct sk_event ev[4096];
    size_t n = 0, k = 0;
    CHECK_MSG(sk_store_events_list(st, 0, 4096, ev, &n) == 0, "events: %s", sk_store_errstr(st));
    CHECK(n < 4096);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(ev[i].type, "order.created")) continue;
        CHECK_EQ(ev[i].seq, 1);
        CHECK_STR(ev[i].subject, ev[i].order_id);
        for (size_t j = 0; j < i; j++)
            CHECK_MSG(strcmp(ev[j].subject, ev[i].subject), "%s twice", ev[i].subject);
        k++;
    }
    return k;
}

BACKEND_TEST(orders_concurrent_persisters_store_each_order_once)
{
    sk_store *st = be_open_sale(b, 13, 1000, 1800);
    CHECK_EQ(fork_all(b, 4, persist_child), 4);
    struct sk_order_counts c;
    CHECK_EQ(sk_store_orders_count(st, 13, &c), 0);
    CHECK_EQ(c.orders[SK_ORDER_CREATED], 200);
    int64_t units = 0;
    for (int k = 0; k < 200; k++)
        units += 1 + k % 3;
    CHECK_EQ(c.units[SK_ORDER_CREATED], units);
    CHECK_EQ(sk_th_db_stock(st, 13), 1000 - units); /* stock taken once per order */
    CHECK_EQ(c.stock_failures, 0);
    /* one order.created per order, however the batches raced */
    CHECK_EQ(created_events_once(st), 200);
    CHECK_EQ(be_int(b, "SELECT count(*) FROM events WHERE type <> 'order.created'"), 0);
    sk_store_close(st);
}

BACKEND_TEST(audit_rows_append_and_list_by_activity)
{
    sk_store *st = be_open(b);
    CHECK_EQ(sk_store_audit_add(st, 100, 1, "repair_db_stock", "db 5 -> 7"), 0);
    CHECK_EQ(sk_store_audit_add(st, 200, 2, "repair_order", NULL), 0);
    char big[700];
    memset(big, 'd', sizeof big - 1);
    big[sizeof big - 1] = 0;
    CHECK_EQ(sk_store_audit_add(st, 300, 1, "note", big), 0);
    CHECK_EQ(sk_store_audit_add(st, 1, 1, "", "x"), SK_EINVAL);
    char kind[SK_STORE_AUDIT_KIND_MAX + 1];
    memset(kind, 'k', sizeof kind - 1);
    kind[sizeof kind - 1] = 0;
    CHECK_EQ(sk_store_audit_add(st, 1, 1, kind, "x"), SK_EINVAL);
    struct sk_audit *rows;
    size_t n;
    CHECK_EQ(sk_store_audit_list(st, 1, &rows, &n), 0);
    CHECK_EQ(n, 2);
    CHECK(rows[0].id < rows[1].id);
    CHECK_EQ(rows[0].at_ms, 100);
    CHECK_EQ(rows[0].activity_id, 1);
    CHECK_STR(rows[0].kind, "repair_db_stock");
    CHECK_STR(rows[0].detail, "db 5 -> 7");
    CHECK_EQ(strlen(rows[1].detail), SK_STORE_AUDIT_DETAIL_MAX - 1);
    free(rows);
    CHECK_EQ(sk_store_audit_list(st, 0, &rows, &n), 0);
    CHECK_EQ(n, 3);
    CHECK_STR(rows[1].detail, "");
    free(rows);
    CHECK_EQ(sk_store_audit_list(st, 77, &rows, &n), 0);
    CHECK_EQ(n, 0);
    CHECK(rows == NULL);
    sk_store_close(st);
}

/* ---- PostgreSQL only ---- */

SK_TEST(store_pg_open_errors_are_clear_bounded_and_never_echo_the_password)
{
    int port = sk_th_free_port(); /* nothing listens there */
    char url[200], err[512];
    sk_store *st = (sk_store *)1;
    snprintf(url, sizeof url, "postgres://u:s3cr3t@127.0.0.1:%d/db", port);
    sk_th_open_unreachable(url, "s3cr3t");
    /* Malformed URLs are usage errors; libpq's quote of the bad token
     * (which may be the password) is not repeated. */
    snprintf(url, sizeof url, "postgresql://u:s3cr3t%%zz@127.0.0.1:%d/db", port);
    CHECK_EQ(sk_store_open(&st, url, err, sizeof err), SK_EINVAL);
    CHECK_MSG(!strstr(err, "s3cr3t"), "password echoed: %s", err);
    CHECK_EQ(sk_store_open(&st, "postgres://h/db?nosuchoption=1", err, sizeof err), SK_EINVAL);
    /* A wrong user: refused by the server, a database error. */
    char good[256];
    sk_th_pg_fresh_db(good, sizeof good);
    CHECK_EQ(sk_store_open(&st, good, err, sizeof err), 0);
    sk_store_close(st);
    /* postgresql:// is the same backend. */
    char alt[300];
    snprintf(alt, sizeof alt, "postgresql://%s", good + strlen("postgres://"));
    CHECK_EQ(sk_store_open(&st, alt, err, sizeof err), 0);
    sk_store_close(st);
}

SK_TEST(store_pg_order_ids_sort_bytewise_in_a_database_with_a_linguistic_collation)
{
    /* Under ICU's en-US collation punctuation is nearly ignored, so "1-"
     * and "1." would not bracket activity 1's ids; the column is "C". */
    PGconn *c = PQconnectdb(sk_th_pg_url());
    CHECK(PQstatus(c) == CONNECTION_OK);
    char name[40];
    snprintf(name, sizeof name, "icu%llu", (unsigned long long)sk_th_unique_id());
    char sql[200];
    snprintf(sql, sizeof sql,
             "CREATE DATABASE %s TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US'"
             " LOCALE 'C'",
             name);
    PGresult *r = PQexec(c, sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok)
        printf("    # no ICU here (%s): checked with the C locale only\n", PQresultErrorMessage(r));
    PQclear(r);
    PQfinish(c);
    if (!ok) return;
    struct be b = {.pg = 1};
    const char *base = sk_th_pg_url();
    snprintf(b.spec, sizeof b.spec, "%.*s/%s", (int)(strrchr(base, '/') - base), base, name);
    sk_store *st = be_open(&b);
    struct sk_order o[4];
    sk_th_order(&o[0], 1, 100, 0, 1, 1);
    sk_th_order(&o[1], 1, 100, 1, 1, 1);
    sk_th_order(&o[2], 10, 100, 0, 1, 1);
    sk_th_order(&o[3], 1, 99, 0, 1, 1);
    sk_th_persist_ok(st, o, 4);
    struct sk_order out[8];
    size_t n;
    CHECK_EQ(sk_store_orders_list(st, 1, NULL, 8, out, &n), 0);
    CHECK_EQ(n, 3);
    CHECK_STR(out[0].order_id, "1-100-0");
    CHECK_STR(out[1].order_id, "1-100-1");
    CHECK_STR(out[2].order_id, "1-99-0");
    sk_store_close(st);
}

/* `seckill activity ...` with --db postgres:// against the run's Redis. */
#define CLI(db, out, ...) SK_TH_DB_CLI(db, "activity", out, __VA_ARGS__)

SK_TEST(store_pg_activity_cli_works_end_to_end)
{
    char db[256], out[8192], id[24];
    sk_th_pg_fresh_db(db, sizeof db);
    uint64_t aid = sk_th_unique_id();
    snprintf(id, sizeof id, "%" PRIu64, aid);
    int rc = CLI(db, out, "create", "--id", id, "--name", "PG sale", "--stock", "30", "--limit",
                 "2", "--start", "now", "--end", "+1h", "--json");
    CHECK_MSG(rc == 0, "create exit %d: %s", rc, out);
    CHECK_EQ(CLI(db, out, "create", "--id", id, "--name", "again", "--stock", "1", "--limit", "1",
                 "--start", "now", "--end", "+1h"),
             2); /* duplicate */
    rc = CLI(db, out, "preheat", "--id", id);
    CHECK_MSG(rc == 0, "preheat exit %d: %s", rc, out);
    rc = CLI(db, out, "open", "--id", id);
    CHECK_MSG(rc == 0, "open exit %d: %s", rc, out);

    sk_store *st;
    char err[512];
    CHECK_EQ(sk_store_open(&st, db, err, sizeof err), 0);
    struct sk_activity a;
    CHECK_EQ(sk_store_activity_get(st, aid, &a), 0);
    CHECK_STR(a.name, "PG sale");
    CHECK_EQ(a.stock, 30);
    CHECK_STR(a.state, "open");
    sk_store_close(st);

    rc = CLI(db, out, "show", "--id", id, "--json");
    CHECK_MSG(rc == 0, "show exit %d: %s", rc, out);
    json_t *o = json_loads(out, 0, NULL);
    CHECK_MSG(json_is_object(o), "show --json: %s", out);
    CHECK_STR(json_string_value(json_object_get(o, "state")), "open");
    CHECK_EQ(json_integer_value(json_object_get(o, "stock_remaining")), 30);
    json_decref(o);
    rc = CLI(db, out, "list", "--json");
    CHECK_MSG(rc == 0, "list exit %d: %s", rc, out);
    o = json_loads(out, 0, NULL);
    CHECK_MSG(json_is_array(o) && json_array_size(o) == 1, "list --json: %s", out);
    json_decref(o);

    rc = CLI(db, out, "close", "--id", id);
    CHECK_MSG(rc == 0, "close exit %d: %s", rc, out);
    rc = CLI(db, out, "delete", "--id", id);
    CHECK_MSG(rc == 0, "delete exit %d: %s", rc, out);
    CHECK_EQ(CLI(db, out, "show", "--id", id), 2); /* gone */

    /* An unreachable server is a runtime failure (exit 1), quickly, and
     * the password stays out of the message. */
    char dead[200];
    snprintf(dead, sizeof dead, "postgres://u:pw5ecret@127.0.0.1:%d/x", sk_th_free_port());
    CHECK_EQ(CLI(dead, out, "list"), 1);
    CHECK_MSG(strstr(out, "cannot connect") && !strstr(out, "pw5ecret"), "output: %s", out);
}

/* ---- faults ---- */

static void pg_create_db(void *pg, const char *name, char *url, size_t cap)
{
    sk_th_pg_create_db(pg, name, url, cap);
}
static void pg_halt(void *pg, int hard)
{
    CHECK(!hard); /* fast shutdown: sessions are told and closed */
    sk_th_pg_stop(pg);
}
static void pg_restart(void *pg)
{
    sk_th_pg_restart(pg);
}
static void pg_freeze(void *pg, int frozen)
{
    sk_th_pg_freeze(pg, frozen); /* postmaster and backends */
}

/* The run's outage (frozen, or else stopped) on a cluster of its own. */
static void pg_fault(int frozen)
{
    struct sk_th_pg pg;
    sk_th_pg_start(&pg);
    struct sk_th_db_server d = {"postgres", &pg, pg_halt, pg_restart, pg_freeze};
    sk_th_store_fault_on(&d, pg_create_db, frozen ? 2 : 0);
    sk_th_pg_stop(&pg);
}

SK_TEST(store_pg_fault_stopped_server_fails_fast_then_reconnects_after_restart)
{
    pg_fault(0);
}

SK_TEST(store_pg_fault_frozen_server_times_out_then_reconnects_after_thaw)
{
    pg_fault(1);
}

BACKEND_TEST(activity_waiting_room_round_trips_and_its_pace_changes_alone)
{
    sk_store *st = be_open(b);
    struct sk_activity a, got;
    sk_th_activity_valid(&a, 61);
    a.wr_passes_per_s = SK_ACTIVITY_PASS_RATE_MAX;
    a.wr_pass_ttl_s = SK_ACTIVITY_PASS_TTL_MAX;
    memset(a.wr_seed, 'f', SK_ACTIVITY_SEED_MAX);
    a.wr_seed[SK_ACTIVITY_SEED_MAX] = 0;
    CHECK_EQ(sk_store_activity_insert(st, &a), 0);
    CHECK_EQ(sk_store_activity_get(st, 61, &got), 0);
    CHECK_EQ(got.wr_passes_per_s, SK_ACTIVITY_PASS_RATE_MAX);
    CHECK_EQ(got.wr_pass_ttl_s, SK_ACTIVITY_PASS_TTL_MAX);
    CHECK_STR(got.wr_seed, a.wr_seed);
    CHECK_EQ(sk_store_activity_set_pass_rate(st, 61, 7), 0);
    CHECK_EQ(sk_store_activity_get(st, 61, &got), 0);
    CHECK_EQ(got.wr_passes_per_s, 7);
    CHECK_EQ(got.wr_pass_ttl_s, SK_ACTIVITY_PASS_TTL_MAX); /* nothing else moves */
    CHECK_STR(got.wr_seed, a.wr_seed);
    CHECK_EQ(sk_store_activity_set_pass_rate(st, 61, 0), SK_EINVAL);
    CHECK_EQ(sk_store_activity_set_pass_rate(st, 61, SK_ACTIVITY_PASS_RATE_MAX + 1), SK_EINVAL);
    CHECK_EQ(sk_store_activity_set_pass_rate(st, 999, 5), SK_ENOTFOUND);
    CHECK_EQ(sk_store_activity_get(st, 61, &got), 0);
    CHECK_EQ(got.wr_passes_per_s, 7);
    /* half a waiting room is refused */
    sk_th_activity_valid(&a, 62);
    a.wr_passes_per_s = 5;
    CHECK_EQ(sk_store_activity_insert(st, &a), SK_EINVAL); /* no seed, no TTL */
    CHECK_EQ(sk_store_activity_get(st, 62, &got), SK_ENOTFOUND);
    sk_store_close(st);
}

/* Pre-registration and the draw (docs/fairness.md): the fields round
 * trip; registering again adds nothing; the draw is recorded once (a
 * second is SK_EEXIST, an order naming a buyer who did not register is
 * SK_ESTATE and writes nothing); the controls and the wave change alone;
 * deleting the sale forgets its registrants. */
BACKEND_TEST(registrations_and_the_draw_are_recorded_once)
{
    sk_store *st = be_open(b);
    struct sk_activity a, got;
    sk_th_activity_valid(&a, 71);
    a.reg_start_ms = a.start_ms - 7200000;
    a.reg_end_ms = a.start_ms - 60000;
    a.draw_box_s = 90;
    memset(a.draw_seed, 'a', SK_ACTIVITY_DRAW_SEED_HEX);
    a.draw_seed[SK_ACTIVITY_DRAW_SEED_HEX] = 0;
    snprintf(a.wr_seed, sizeof a.wr_seed, "0123456789abcdef");
    CHECK_MSG(sk_store_activity_insert(st, &a) == 0, "insert: %s", sk_store_errstr(st));
    CHECK_EQ(sk_store_activity_get(st, 71, &got), 0);
    CHECK_EQ(got.reg_start_ms, a.reg_start_ms);
    CHECK_EQ(got.reg_end_ms, a.reg_end_ms);
    CHECK_EQ(got.draw_box_s, 90);
    CHECK_STR(got.draw_seed, a.draw_seed);
    CHECK_EQ(got.drawn_ms, 0);
    CHECK_STR(got.draw_state, "");

    /* a user id above 2^63 keeps its bits */
    const uint64_t users[] = {5, 3, UINT64_C(18446744073709551000), 5, 9};
    size_t added = 0;
    CHECK_EQ(sk_store_registrations_add(st, 71, users, 5, 1000, &added), 0);
    CHECK_EQ(added, 4); /* 5 twice */
    CHECK_EQ(sk_store_registrations_add(st, 71, users, 3, 2000, &added), 0);
    CHECK_EQ(added, 0);
    int64_t count = -1;
    CHECK_EQ(sk_store_registrations_count(st, 71, &count), 0);
    CHECK_EQ(count, 4);
    CHECK_EQ(sk_store_registrations_count(st, 72, &count), 0);
    CHECK_EQ(count, 0);
    struct sk_registration *r = NULL;
    size_t n = 0;
    CHECK_EQ(sk_store_registrations_list(st, 71, &r, &n), 0);
    CHECK_EQ(n, 4);
    CHECK_EQ(r[0].user_id, 3);
    CHECK_EQ(r[3].user_id, UINT64_C(18446744073709551000));
    CHECK_EQ(r[0].created_ms, 1000); /* the first registration's time stays */
    CHECK_EQ(r[0].draw_place, 0);
    free(r);

    /* a buyer who did not register: nothing written */
    const uint64_t bad[] = {9, 3, 4};
    CHECK_EQ(sk_store_draw_record(st, 71, bad, 3, 5000), SK_ESTATE);
    CHECK_EQ(sk_store_activity_get(st, 71, &got), 0);
    CHECK_EQ(got.drawn_ms, 0);
    CHECK_EQ(be_int(b, "SELECT count(*) FROM registrations WHERE draw_rank IS NOT NULL"), 0);

    const uint64_t order[] = {9, UINT64_C(18446744073709551000), 3, 5};
    CHECK_MSG(sk_store_draw_record(st, 71, order, 4, 5000) == 0, "%s", sk_store_errstr(st));
    CHECK_EQ(sk_store_draw_record(st, 71, order, 4, 6000), SK_EEXIST);
    CHECK_EQ(sk_store_draw_record(st, 999, order, 4, 6000), SK_ENOTFOUND);
    CHECK_EQ(sk_store_activity_get(st, 71, &got), 0);
    CHECK_EQ(got.drawn_ms, 5000);
    CHECK_EQ(got.draw_n, 4);
    CHECK_EQ(sk_store_registrations_list(st, 71, &r, &n), 0);
    CHECK_EQ(n, 4);
    CHECK_EQ(r[0].draw_place, 3); /* user 3 */
    CHECK_EQ(r[1].draw_place, 4); /* user 5 */
    CHECK_EQ(r[2].draw_place, 1); /* user 9 */
    CHECK_EQ(r[3].draw_place, 2);
    free(r);

    /* the controls and the wave, alone */
    CHECK_EQ(sk_store_activity_set_fair(st, 71, SK_WR_PAUSE | SK_WR_NO_JOINS, "1:1:2:100:200"), 0);
    CHECK_EQ(sk_store_activity_get(st, 71, &got), 0);
    CHECK_EQ(got.wr_control, SK_WR_PAUSE | SK_WR_NO_JOINS);
    CHECK_STR(got.draw_state, "1:1:2:100:200");
    CHECK_EQ(got.drawn_ms, 5000);
    CHECK_EQ(sk_store_activity_set_fair(st, 71, 8, ""), SK_EINVAL);
    CHECK_EQ(sk_store_activity_set_fair(st, 71, 0, "1'; --"), SK_EINVAL);
    CHECK_EQ(sk_store_activity_set_fair(st, 999, 0, ""), SK_ENOTFOUND);
    CHECK_EQ(sk_store_activity_get(st, 71, &got), 0);
    CHECK_EQ(got.wr_control, SK_WR_PAUSE | SK_WR_NO_JOINS);

    CHECK_EQ(sk_store_activity_delete(st, 71), 0);
    CHECK_EQ(be_int(b, "SELECT count(*) FROM registrations"), 0);
    sk_store_close(st);
}

/* ---- opened while the server is down (sk_store_open_waiting) ---- */

/* A server store opened while its server is down (what serve does at
 * start) comes back unconnected with the reason; its calls fail like a
 * lost connection's, within the connect bound; the first call after the
 * server is back connects, brings the never-opened database's schema up
 * to date, and does its work. SQLite is not waited for: a file that
 * cannot be opened still fails the open. */
static void opened_while_down(int my)
{
    struct sk_th_pg pg;
    struct sk_th_my m;
    char url[420], err[512];
    if (my) {
        sk_th_my_start(&m);
        sk_th_my_create_db(&m, "opened_down", url, sizeof url);
        sk_th_my_stop(&m);
    } else {
        sk_th_pg_start(&pg);
        sk_th_pg_create_db(&pg, "opened_down", url, sizeof url);
        sk_th_pg_stop(&pg);
    }
    sk_store *st = NULL;
    CHECK_EQ(sk_store_open(&st, url, err, sizeof err) < 0, 1); /* the plain open fails */
    CHECK(st == NULL);
    CHECK_EQ(sk_store_open_waiting(&st, url, err, sizeof err), 0);
    CHECK(st != NULL);
    CHECK_MSG(strstr(err, "cannot connect") != NULL, "%s", err);
    int version = -1;
    int64_t t0 = sk_mono_ms();
    CHECK_EQ(sk_store_schema_version(st, &version), SK_EDB);
    CHECK_MSG(sk_mono_ms() - t0 < 10000, "a call took %lld ms", (long long)(sk_mono_ms() - t0));
    if (my)
        sk_th_my_restart(&m);
    else
        sk_th_pg_restart(&pg);
    CHECK_EQ(sk_store_schema_version(st, &version), 0);
    CHECK(version > 0);
    struct sk_activity *list = NULL;
    size_t n = 99;
    CHECK_EQ(sk_store_activity_list(st, &list, &n), 0); /* the tables are there */
    CHECK_EQ(n, 0);
    free(list);
    sk_store_close(st);
    /* a second handle finds the schema done */
    CHECK_MSG(sk_store_open(&st, url, err, sizeof err) == 0, "%s", err);
    sk_store_close(st);
    if (my)
        sk_th_my_stop(&m);
    else
        sk_th_pg_stop(&pg);
}

SK_TEST_T(store_pg_opened_while_its_server_is_down_connects_and_migrates_on_a_later_call, 120)
{
    opened_while_down(0);
}

SK_TEST_T(store_mysql_opened_while_its_server_is_down_connects_and_migrates_on_a_later_call, 120)
{
    opened_while_down(1);
}

SK_TEST(store_sqlite_that_cannot_be_opened_fails_the_waiting_open_too)
{
    sk_store *st = NULL;
    char err[512];
    CHECK(sk_store_open_waiting(&st, "sqlite:/nonexistent-dir/x.db", err, sizeof err) < 0);
    CHECK(st == NULL);
    CHECK(err[0] != 0);
}

/* ---- the outbox (migration 11) ---- */

/* The events of the store, oldest first: at most cap. */
static size_t events_all(sk_store *st, struct sk_event *ev, size_t cap)
{
    size_t n = 0;
    CHECK_MSG(sk_store_events_list(st, 0, cap, ev, &n) == 0, "events: %s", sk_store_errstr(st));
    return n;
}

/* Event k is (subject, seq, type), and its payload is JSON of schema 1
 * naming its activity (and order). */
static void event_is(const struct sk_event *e, const char *subject, int64_t seq, const char *type)
{
    CHECK_MSG(!strcmp(e->subject, subject) && e->seq == seq && !strcmp(e->type, type),
              "event %lld: %s:%lld %s, want %s:%lld %s", (long long)e->id, e->subject,
              (long long)e->seq, e->type, subject, (long long)seq, type);
    json_error_t jerr;
    json_t *j = json_loads(e->payload, 0, &jerr);
    CHECK_MSG(j != NULL, "payload %s: %s", e->payload, jerr.text);
    CHECK_EQ(json_integer_value(json_object_get(j, "v")), 1);
    CHECK_EQ((uint64_t)json_integer_value(json_object_get(j, "activity_id")), e->activity_id);
    if (e->order_id[0]) {
        CHECK_STR(json_string_value(json_object_get(j, "order_id")), e->order_id);
        CHECK_STR(e->order_id, e->subject);
    }
    json_decref(j);
}

/* The JSON field key of event e's payload: a string ("" when absent). */
static void event_field_is(const struct sk_event *e, const char *key, const char *want)
{
    json_t *j = json_loads(e->payload, 0, NULL);
    CHECK(j != NULL);
    const char *got = json_string_value(json_object_get(j, key));
    CHECK_MSG(!strcmp(got ? got : "", want), "%s of %s: %s, want %s", key, e->payload,
              got ? got : "(none)", want);
    json_decref(j);
}

/* Every change that commits writes exactly its event, in the change's
 * transaction: a sale opened, orders persisted (a re-delivery writes
 * none), sold out, paid (twice: one event), cancelled before the
 * deadline, released at it, refused payments (once per reference),
 * sold out again after a cancel gave a unit back, closed. Each subject's
 * seq counts 1, 2, ... */
BACKEND_TEST(outbox_every_committed_change_writes_exactly_its_event)
{
    sk_store *st = be_open_sale(b, 21, 4, 60);
    CHECK_EQ(sk_store_activity_set_state(st, 21, "open"), 0);
    CHECK_EQ(sk_store_activity_set_state(st, 21, "open"), 0); /* no move: no event */
    struct sk_order o[5];
    for (int i = 0; i < 5; i++)
        sk_th_order(&o[i], 21, 5000, i, (uint64_t)i + 1, i == 4 ? 2 : 1);
    sk_th_persist_ok(st, o, 4);
    CHECK_EQ(sk_th_persist_ok(st, o, 4).duplicates, 4); /* re-delivered */
    int s;
    CHECK_EQ(sk_store_order_pay(st, o[0].order_id, 6000, &s), 0);
    CHECK_EQ(sk_store_order_pay(st, o[0].order_id, 6100, &s), 0);
    CHECK_EQ(sk_store_order_cancel(st, o[0].order_id, 6200, &s), SK_ESTATE);
    CHECK_EQ(sk_store_order_cancel(st, o[1].order_id, 7000, &s), 0);  /* before 65000 */
    CHECK_EQ(sk_store_order_cancel(st, o[2].order_id, 65000, &s), 0); /* its deadline */
    CHECK_EQ(sk_store_order_cancel(st, o[2].order_id, 65100, &s), 0);
    CHECK_EQ(sk_store_order_pay_ref(st, o[1].order_id, 8000, "psp-1", &s), SK_ESTATE);
    CHECK_EQ(sk_store_order_pay_ref(st, o[1].order_id, 8100, "psp-1", &s), SK_ESTATE);
    CHECK_EQ(sk_store_order_pay_ref(st, o[1].order_id, 8200, "psp-2", &s), SK_ESTATE);
    CHECK_EQ(sk_store_order_pay(st, o[2].order_id, 70000, &s), SK_ESTATE);
    CHECK_EQ(sk_store_order_pay(st, o[2].order_id, 70100, &s), SK_ESTATE);
    CHECK_EQ(sk_store_order_pay_ref(st, o[3].order_id, 9000, "bad\nref", &s), SK_EINVAL);
    sk_th_persist_ok(st, &o[4], 1); /* takes the units the cancels gave back: sold out again */
    CHECK_EQ(sk_store_activity_set_state(st, 21, "closed"), 0);

    struct sk_event ev[40];
    size_t n = events_all(st, ev, 40);
    CHECK_EQ(n, 15);
    const char *a = "activity-21";
    event_is(&ev[0], a, 1, "activity.opened");
    for (int i = 0; i < 4; i++)
        event_is(&ev[1 + i], o[i].order_id, 1, "order.created");
    event_is(&ev[5], a, 2, "activity.sold_out");
    event_is(&ev[6], o[0].order_id, 2, "order.paid");
    event_is(&ev[7], o[1].order_id, 2, "order.cancelled");
    event_is(&ev[8], o[2].order_id, 2, "order.released");
    event_is(&ev[9], o[1].order_id, 3, "order.payment_refused");
    event_field_is(&ev[9], "payment_ref", "psp-1");
    event_field_is(&ev[9], "status", "cancelled");
    event_is(&ev[10], o[1].order_id, 4, "order.payment_refused");
    event_field_is(&ev[10], "payment_ref", "psp-2");
    event_is(&ev[11], o[2].order_id, 3, "order.payment_refused");
    event_field_is(&ev[11], "payment_ref", "");
    event_is(&ev[12], o[4].order_id, 1, "order.created");
    event_is(&ev[13], a, 3, "activity.sold_out");
    event_is(&ev[14], a, 4, "activity.closed");
    event_field_is(&ev[1], "status", "created");
    event_field_is(&ev[6], "status", "paid");
    event_field_is(&ev[8], "status", "cancelled");
    /* the list pages from an id, and the table agrees */
    size_t m = 0;
    CHECK_EQ(sk_store_events_list(st, ev[13].id, 40, ev, &m), 0);
    CHECK_EQ(m, 1);
    event_is(&ev[0], a, 4, "activity.closed");
    /* the table: the 4 orders of one persist are one batch row (in id
     * order), the lone order's row has none */
    CHECK_EQ(be_int(b, "SELECT count(*) FROM events"), 12);
    CHECK_EQ(be_intf(b,
                     "SELECT count(*) FROM events WHERE subject = '%s' AND order_id = '%s'"
                     " AND batch = '%s %s %s %s' AND seq = 1",
                     o[0].order_id, o[0].order_id, o[0].order_id, o[1].order_id, o[2].order_id,
                     o[3].order_id),
             1);
    CHECK_EQ(be_intf(b, "SELECT count(*) FROM events WHERE subject = '%s' AND batch IS NULL",
                     o[4].order_id),
             1);
    sk_store_close(st);
}

/* A change the database refuses (a constraint added under the store, on
 * the change or on its event) commits neither: no event without its
 * change, no change without its event. */
BACKEND_TEST(outbox_a_change_that_does_not_commit_writes_no_event)
{
    sk_store *st = be_open_sale(b, 22, 100, 1800);
    struct sk_order o[3], late;
    for (int i = 0; i < 3; i++)
        sk_th_order(&o[i], 22, 5000, i, (uint64_t)i + 1, 1);
    sk_th_order(&late, 22, 5000, 9, 9, 1);
    sk_th_persist_ok(st, o, 3);
    struct sk_event ev[16];
    CHECK_EQ(events_all(st, ev, 16), 3);
    int s;
    /* the event refused: the payment is not made either */
    be_refuse(b, "t_ev", "events", "type <> 'order.paid'", "INSERT", "NEW.type = 'order.paid'");
    CHECK_EQ(sk_store_order_pay(st, o[0].order_id, 6000, &s), SK_EINVAL);
    CHECK_MSG(strstr(sk_store_errstr(st), "insert event") != NULL, "%s", sk_store_errstr(st));
    struct sk_order got;
    CHECK_EQ(sk_store_order_get(st, o[0].order_id, &got), 0);
    CHECK_EQ(got.status, SK_ORDER_CREATED);
    be_allow(b, "t_ev", "events");
    /* the change refused: no event */
    be_refuse(b, "t_cap", "activities", "stock <= 97", "UPDATE", "NEW.stock > 97");
    CHECK_EQ(sk_store_order_cancel(st, o[1].order_id, 6000, &s), SK_EINVAL);
    be_allow(b, "t_cap", "activities");
    /* a batch whose created event is refused: no order, no stock, no event */
    char when[200];
    snprintf(when, sizeof when, "order_id <> '%s'", late.order_id);
    char trig[200];
    snprintf(trig, sizeof trig, "NEW.order_id = '%s'", late.order_id);
    be_refuse(b, "t_new", "events", when, "INSERT", trig);
    CHECK_EQ(sk_store_orders_persist(st, &late, 1, NULL), SK_EINVAL);
    CHECK_EQ(sk_store_order_get(st, late.order_id, &got), SK_ENOTFOUND);
    CHECK_EQ(sk_th_db_stock(st, 22), 97);
    /* an activity state whose event is refused stays as it was */
    be_refuse(b, "t_open", "events", "type <> 'activity.opened'", "INSERT",
              "NEW.type = 'activity.opened'");
    CHECK_EQ(sk_store_activity_set_state(st, 22, "open"), SK_EINVAL);
    struct sk_activity a;
    CHECK_EQ(sk_store_activity_get(st, 22, &a), 0);
    CHECK_STR(a.state, "created");
    CHECK_EQ(events_all(st, ev, 16), 3); /* only the first batch's */
    be_allow(b, "t_new", "events");
    be_allow(b, "t_open", "events");
    /* allowed again: each change and its event */
    CHECK_EQ(sk_store_order_pay(st, o[0].order_id, 6000, &s), 0);
    CHECK_EQ(sk_store_order_cancel(st, o[1].order_id, 6000, &s), 0);
    sk_th_persist_ok(st, &late, 1);
    CHECK_EQ(sk_store_activity_set_state(st, 22, "open"), 0);
    CHECK_EQ(events_all(st, ev, 16), 7);
    event_is(&ev[3], o[0].order_id, 2, "order.paid");
    event_is(&ev[4], o[1].order_id, 2, "order.cancelled");
    event_is(&ev[5], late.order_id, 1, "order.created");
    event_is(&ev[6], "activity-22", 1, "activity.opened");
    sk_store_close(st);
}

/* Racing payers and cancellers (real processes): every order has its
 * created event, exactly one of paid / cancelled, as its row says, at
 * seq 2, and at most one refusal (no reference) after a cancel won. */
BACKEND_TEST(outbox_racing_pay_and_cancel_write_one_event_per_winner)
{
    sk_store *st = be_open_sale(b, 4, 1000, 1800);
    struct sk_order o[RACE_ORDERS];
    for (int k = 0; k < RACE_ORDERS; k++)
        sk_th_order(&o[k], 4, 100, k, (uint64_t)k + 1, 1);
    sk_th_persist_ok(st, o, RACE_ORDERS);
    fork_codes(b, 4, race_child, NULL);
    CHECK_EQ(created_events_once(st), RACE_ORDERS);
    CHECK_EQ(be_int(b, "SELECT count(*) FROM events e JOIN orders o ON o.order_id = e.subject"
                       " WHERE e.seq = 2 AND ((e.type = 'order.paid' AND o.status = 'paid') OR"
                       " (e.type = 'order.cancelled' AND o.status = 'cancelled'))"),
             RACE_ORDERS);
    CHECK_EQ(be_int(b, "SELECT count(*) FROM events WHERE type = 'order.payment_refused'"),
             be_int(b, "SELECT count(*) FROM events e JOIN orders o ON o.order_id = e.subject"
                       " WHERE e.type = 'order.payment_refused' AND e.seq = 3"
                       " AND o.status = 'cancelled'"));
    CHECK(be_int(b, "SELECT count(*) FROM events") <= 3 * RACE_ORDERS);
    sk_store_close(st);
}

/* The event's payload field key is the number want. */
static void event_num_is(const struct sk_event *e, const char *key, int64_t want)
{
    json_t *j = json_loads(e->payload, 0, NULL);
    CHECK(j != NULL);
    json_t *v = json_object_get(j, key);
    CHECK_MSG(json_is_integer(v) && json_integer_value(v) == want, "%s of %s, want %lld", key,
              e->payload, (long long)want);
    json_decref(j);
}

/* Walks the outbox from the start limit events at a time, each page
 * after the position of the last event read: the events into got (at
 * most cap); how many. */
static size_t events_paged(sk_store *st, size_t limit, struct sk_event *got, size_t cap)
{
    static struct sk_event page[256];
    CHECK(limit <= 256);
    int64_t row = 0;
    int32_t sub = SK_EVENT_ROW_END;
    size_t k = 0, m;
    do {
        CHECK_EQ(sk_store_events_list_at(st, row, sub, limit, page, &m), 0);
        for (size_t j = 0; j < m; j++) {
            CHECK(k < cap);
            got[k++] = page[j];
            row = page[j].id;
            sub = page[j].sub;
        }
    } while (m == limit);
    return k;
}

/* A persist's order.created events are one outbox row per activity for
 * up to SK_STORE_BATCH_ROW_MAX orders (migration 14), read back as one
 * event per order: seq 1, its order's payload, in id order, the same
 * events whatever the page size and from any position inside a row. An
 * order's later events count on from 2 whether it heads its row or not;
 * a replay counts a batch row's events; a dead letter inside a row
 * leaves the cursor before the row; a batch row the database refuses
 * takes its orders and their stock with it. */
BACKEND_TEST(outbox_batch_rows_read_back_as_one_event_per_order)
{
    enum { N = 300, M = 5, R = SK_STORE_BATCH_ROW_MAX };
    sk_store *st = be_open_sale(b, 23, 1000, 60);
    add_activity(st, 24, 100, 90);
    static struct sk_order o[N + M + 3];
    for (int i = 0; i < N; i++) /* ids in i's order */
        sk_th_order(&o[i], 23, 5000 + i, i, (uint64_t)i + 1, 1 + i % 3);
    for (int i = 0; i < M; i++)
        sk_th_order(&o[N + i], 24, 5000, i, (uint64_t)i + 100, 1);
    sk_th_persist_ok(st, o, N + M);
    /* rows: 128 + 128 + 44 orders of sale 23, 5 of sale 24 */
    CHECK_EQ(be_int(b, "SELECT count(*) FROM events"), 4);
    CHECK_EQ(be_int(b, "SELECT count(*) FROM events WHERE batch IS NULL"), 0);
    static struct sk_event all[N + M + 8], again[N + M + 8];
    size_t n = events_all(st, all, N + M + 8);
    CHECK_EQ(n, N + M);
    for (int i = 0; i < N + M; i++) {
        const struct sk_event *e = &all[i];
        event_is(e, o[i].order_id, 1, "order.created");
        CHECK_STR(e->order_id, o[i].order_id);
        CHECK_EQ(e->activity_id, o[i].activity_id);
        CHECK_EQ(e->sub, i < N ? i % R : i - N);
        CHECK_EQ(e->last, i == R - 1 || i == 2 * R - 1 || i == N - 1 || i == N + M - 1);
        if (i) CHECK_EQ(e->id == all[i - 1].id, e->sub > 0); /* a row's events together */
        event_num_is(e, "user_id", (int64_t)o[i].user_id);
        event_num_is(e, "quantity", o[i].quantity);
        event_num_is(e, "created_ms", o[i].created_ms);
        event_num_is(e, "pay_deadline_ms", o[i].created_ms + (i < N ? 60000 : 90000));
        event_field_is(e, "status", "created");
    }
    /* any page size, each page after the last event read */
    const size_t sizes[] = {1, 7, 64, 129, 256};
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
        CHECK_EQ(events_paged(st, sizes[z], again, N + M + 8), n);
        for (size_t i = 0; i < n; i++)
            CHECK_MSG(again[i].id == all[i].id && again[i].sub == all[i].sub &&
                          !strcmp(again[i].subject, all[i].subject) &&
                          !strcmp(again[i].payload, all[i].payload),
                      "page size %zu, event %zu: %s, want %s", sizes[z], i, again[i].subject,
                      all[i].subject);
    }
    size_t m = 0;
    CHECK_EQ(sk_store_events_list_at(st, all[200].id, all[200].sub, 2, again, &m), 0);
    CHECK_EQ(m, 2);
    CHECK_STR(again[0].subject, o[201].order_id);
    CHECK_EQ(sk_store_events_list_at(st, all[N - 1].id, all[N - 1].sub, 8, again, &m), 0);
    CHECK_EQ(m, M); /* the row's last read: the next row */
    CHECK_STR(again[0].subject, o[N].order_id);
    CHECK_EQ(sk_store_events_list_at(st, all[N + M - 1].id, all[N + M - 1].sub, 8, again, &m), 0);
    CHECK_EQ(m, 0);

    /* later events: seq 2 for a row's head and for an order inside one */
    int s;
    CHECK_EQ(sk_store_order_pay(st, o[0].order_id, 6000, &s), 0);
    CHECK_EQ(sk_store_order_pay(st, o[200].order_id, 6000, &s), 0);
    CHECK_EQ(sk_store_order_cancel(st, o[N + 2].order_id, 6000, &s), 0);
    CHECK_EQ(sk_store_order_pay_ref(st, o[N + 2].order_id, 6100, "psp-9", &s), SK_ESTATE);
    CHECK_EQ(sk_store_events_list(st, all[N + M - 1].id, 8, again, &m), 0);
    CHECK_EQ(m, 4);
    event_is(&again[0], o[0].order_id, 2, "order.paid");
    event_is(&again[1], o[200].order_id, 2, "order.paid");
    event_is(&again[2], o[N + 2].order_id, 2, "order.cancelled");
    event_is(&again[3], o[N + 2].order_id, 3, "order.payment_refused");
    CHECK(again[0].last && again[0].sub == 0);

    /* a replay counts the events, not the rows */
    int64_t cur = -1, row = -1, count = -1;
    CHECK_EQ(sk_store_webhook_cursor(st, "erp", 7000, &cur, NULL), 0);
    CHECK_EQ(sk_store_webhook_advance(st, "erp", again[3].id, 0, 7000), 0);
    CHECK_EQ(sk_store_webhook_rewind(st, "erp", 0, 7100, &row, &count), 0);
    CHECK_EQ(count, N + M + 4);
    /* a dead letter inside a row: recorded with its place, the cursor
     * stays before the row; at the row's last event it passes the row */
    CHECK_EQ(sk_store_webhook_cursor(st, "crm", 7000, &cur, NULL), 0);
    CHECK_EQ(sk_store_webhook_dead(st, "crm", &all[5], 0, 7200, 3, 500), 0);
    CHECK_EQ(sk_store_webhook_cursor(st, "crm", 7000, &cur, NULL), 0);
    CHECK_EQ(cur, 0);
    CHECK_EQ(be_intf(b,
                     "SELECT count(*) FROM webhook_dead WHERE event_row = %lld AND event_sub = 5",
                     (long long)all[5].id),
             1);
    CHECK_EQ(sk_store_webhook_dead(st, "crm", &all[R - 1], 0, 7300, 3, 500), 0);
    CHECK_EQ(sk_store_webhook_cursor(st, "crm", 7000, &cur, NULL), 0);
    CHECK_EQ(cur, all[R - 1].id);

    /* a batch row refused: its orders, their stock and their events are
     * not written; allowed again, they are */
    for (int i = 0; i < 3; i++)
        sk_th_order(&o[N + M + i], 23, 9000, i, (uint64_t)i + 900, 1);
    int64_t stock = sk_th_db_stock(st, 23), rows = be_int(b, "SELECT count(*) FROM events");
    be_refuse(b, "t_batch", "events", "batch IS NULL OR subject <> '23-9000-0'", "INSERT",
              "NEW.batch IS NOT NULL AND NEW.subject = '23-9000-0'");
    CHECK_EQ(sk_store_orders_persist(st, o + N + M, 3, NULL), SK_EINVAL);
    struct sk_order got;
    for (int i = 0; i < 3; i++)
        CHECK_EQ(sk_store_order_get(st, o[N + M + i].order_id, &got), SK_ENOTFOUND);
    CHECK_EQ(sk_th_db_stock(st, 23), stock);
    CHECK_EQ(be_int(b, "SELECT count(*) FROM events"), rows);
    be_allow(b, "t_batch", "events");
    sk_th_persist_ok(st, o + N + M, 3);
    CHECK_EQ(sk_th_db_stock(st, 23), stock - 3);
    CHECK_EQ(sk_store_events_list(st, again[3].id, 8, again, &m), 0);
    CHECK_EQ(m, 3);
    for (int i = 0; i < 3; i++)
        event_is(&again[i], o[N + M + i].order_id, 1, "order.created");
    sk_store_close(st);
}

/* A payment's reference: the same again is the same payment; another
 * for a paid order is a second payment, refused once per reference; a
 * payment without one cannot be told apart from the first. */
BACKEND_TEST(outbox_a_second_payment_of_a_paid_order_is_refused_once_per_reference)
{
    sk_store *st = be_open_sale(b, 23, 10, 1800);
    struct sk_order o[2];
    for (int i = 0; i < 2; i++)
        sk_th_order(&o[i], 23, 5000, i, (uint64_t)i + 1, 1);
    sk_th_persist_ok(st, o, 2);
    int s = -1;
    CHECK_EQ(sk_store_order_pay_ref(st, o[0].order_id, 6000, "r1", &s), 0);
    CHECK_EQ(sk_store_order_pay_ref(st, o[0].order_id, 6100, "r1", &s), 0);
    CHECK_EQ(sk_store_order_pay(st, o[0].order_id, 6200, &s), 0);
    CHECK_EQ(sk_store_order_pay_ref(st, o[0].order_id, 6300, "r2", &s), SK_ESTATE);
    CHECK_EQ(s, SK_ORDER_PAID);
    CHECK_EQ(sk_store_order_pay_ref(st, o[0].order_id, 6400, "r2", &s), SK_ESTATE);
    CHECK_EQ(sk_store_order_pay(st, o[1].order_id, 6000, &s), 0); /* no reference kept */
    CHECK_EQ(sk_store_order_pay_ref(st, o[1].order_id, 6100, "r3", &s), 0);
    struct sk_order got;
    CHECK_EQ(sk_store_order_get(st, o[0].order_id, &got), 0);
    CHECK_EQ(got.paid_ms, 6000);
    struct sk_event ev[16];
    CHECK_EQ(events_all(st, ev, 16), 5);
    event_is(&ev[2], o[0].order_id, 2, "order.paid");
    event_field_is(&ev[2], "payment_ref", "r1");
    event_is(&ev[3], o[0].order_id, 3, "order.payment_refused");
    event_field_is(&ev[3], "payment_ref", "r2");
    event_field_is(&ev[3], "status", "paid");
    event_is(&ev[4], o[1].order_id, 2, "order.paid");
    sk_store_close(st);
}
