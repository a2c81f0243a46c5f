/* store_sqlite.c - the SQLite backend of store.h, the zero-setup default.
 *
 * WAL so readers (the dashboard, `activity show`) never block the order
 * worker's writes; a busy timeout so two processes on one file wait for each
 * other instead of failing. The schema is a list of migrations applied at
 * open, tracked by PRAGMA user_version. */
#include "store.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "error.h"

#define BUSY_TIMEOUT_MS 5000

struct sk_store {
    sqlite3 *db;
    char path[512];
    char errstr[512];
};

/* Schema migrations, applied in order; entry i takes user_version from i to
 * i + 1. Append only: a released migration never changes. The CHECKs repeat
 * the C validation so a bug or a hand edit cannot store what the engine
 * would refuse (DB stock never negative, never above initial). */
static const char *const migrations[] = {
    /* 1: activity definitions. */
    "CREATE TABLE activities ("
    " id INTEGER PRIMARY KEY CHECK (id >= 1),"
    " name TEXT NOT NULL CHECK (length(CAST(name AS BLOB)) BETWEEN 1 AND 127),"
    " stock_initial INTEGER NOT NULL CHECK (stock_initial >= 1),"
    " stock INTEGER NOT NULL CHECK (stock >= 0 AND stock <= stock_initial),"
    " per_user_limit INTEGER NOT NULL CHECK (per_user_limit >= 1),"
    " max_per_order INTEGER NOT NULL CHECK (max_per_order >= 1),"
    " start_ms INTEGER NOT NULL CHECK (start_ms >= 0),"
    " end_ms INTEGER NOT NULL CHECK (end_ms > start_ms),"
    " pay_timeout_s INTEGER NOT NULL CHECK (pay_timeout_s >= 1),"
    " state TEXT NOT NULL DEFAULT 'created'"
    "  CHECK (state IN ('created', 'preheated', 'open', 'closed')),"
    " created_ms INTEGER NOT NULL"
    ");",
};
#define N_MIGRATIONS ((int)(sizeof migrations / sizeof migrations[0]))

static int set_err(sk_store *st, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int set_err(sk_store *st, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->errstr, sizeof st->errstr, fmt, ap);
    va_end(ap);
    return code;
}

/* SQLite failure -> SK code, with the database's own message. */
static int db_err(sk_store *st, const char *what)
{
    int ext = sqlite3_extended_errcode(st->db);
    int code = SK_EDB;
    if (ext == SQLITE_CONSTRAINT_PRIMARYKEY || ext == SQLITE_CONSTRAINT_UNIQUE)
        code = SK_EEXIST;
    else if ((ext & 0xff) == SQLITE_CONSTRAINT)
        code = SK_EINVAL;
    return set_err(st, code, "sqlite %s: %s: %s", st->path, what, sqlite3_errmsg(st->db));
}

static int exec(sk_store *st, const char *sql, const char *what)
{
    if (sqlite3_exec(st->db, sql, NULL, NULL, NULL) != SQLITE_OK) return db_err(st, what);
    return 0;
}

static int prepare(sk_store *st, sqlite3_stmt **stmt, const char *sql)
{
    if (sqlite3_prepare_v2(st->db, sql, -1, stmt, NULL) != SQLITE_OK) {
        *stmt = NULL;
        return db_err(st, "prepare");
    }
    return 0;
}

static int read_version(sk_store *st, int *v)
{
    sqlite3_stmt *s;
    int rc = prepare(st, &s, "PRAGMA user_version");
    if (rc) return rc;
    if (sqlite3_step(s) == SQLITE_ROW) {
        *v = sqlite3_column_int(s, 0);
        rc = 0;
    } else {
        rc = db_err(st, "read user_version");
    }
    sqlite3_finalize(s);
    return rc;
}

static int migrate(sk_store *st)
{
    int v;
    int rc = read_version(st, &v);
    while (rc == 0 && v < N_MIGRATIONS) {
        /* IMMEDIATE takes the write lock first, then re-reads the version:
         * two processes starting at once must not both apply one step. */
        if ((rc = exec(st, "BEGIN IMMEDIATE", "begin migration")) != 0) break;
        if ((rc = read_version(st, &v)) == 0 && v < N_MIGRATIONS) {
            char bump[64];
            snprintf(bump, sizeof bump, "PRAGMA user_version = %d", v + 1);
            if ((rc = exec(st, migrations[v], "migration")) == 0)
                rc = exec(st, bump, "set user_version");
        }
        if (rc == 0) rc = exec(st, "COMMIT", "commit migration");
        if (rc != 0) {
            char why[sizeof st->errstr];
            snprintf(why, sizeof why, "%s", st->errstr);
            sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
            return set_err(st, SK_EDB, "%s (schema migration %d failed)", why, v + 1);
        }
        rc = read_version(st, &v);
    }
    if (rc == 0 && v > N_MIGRATIONS)
        rc = set_err(st, SK_EDB,
                     "sqlite %s: schema version %d is newer than this binary (%d); upgrade seckill",
                     st->path, v, N_MIGRATIONS);
    return rc;
}

static int open_sqlite(sk_store *st, const char *path)
{
    snprintf(st->path, sizeof st->path, "%s", path);
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
    if (sqlite3_open_v2(path, &st->db, flags, NULL) != SQLITE_OK) {
        int rc = set_err(st, SK_EDB, "sqlite %s: cannot open: %s", path,
                         st->db ? sqlite3_errmsg(st->db) : "out of memory");
        return rc;
    }
    sqlite3_extended_result_codes(st->db, 1);
    sqlite3_busy_timeout(st->db, BUSY_TIMEOUT_MS);
    /* synchronous stays at its FULL default: an order the worker committed
     * must survive a power cut (exactly-once persistence). */
    int rc = exec(st, "PRAGMA journal_mode=WAL", "enable WAL");
    if (rc == 0) rc = exec(st, "PRAGMA foreign_keys=ON", "enable foreign keys");
    if (rc == 0) rc = migrate(st);
    return rc;
}

int sk_store_open(sk_store **out, const char *spec, char *err, size_t cap)
{
    *out = NULL;
    if (err && cap) err[0] = 0;
    const char *path = NULL;
    int rc = 0;
    if (!spec || !*spec) {
        rc = SK_EINVAL;
        if (err) snprintf(err, cap, "empty database spec (expected sqlite:PATH)");
    } else if (!strncmp(spec, "postgres://", 11) || !strncmp(spec, "postgresql://", 13)) {
        rc = SK_EINVAL;
        /* The spec is not echoed: it may hold a password. */
        if (err) snprintf(err, cap, "postgres databases are not supported yet (use sqlite:PATH)");
    } else if (strncmp(spec, "sqlite:", 7) != 0) {
        rc = SK_EINVAL;
        if (err) snprintf(err, cap, "unknown database spec '%.200s' (expected sqlite:PATH)", spec);
    } else if (!spec[7]) {
        rc = SK_EINVAL;
        if (err) snprintf(err, cap, "database spec 'sqlite:' has no path");
    } else if (strlen(spec + 7) >= sizeof((struct sk_store *)0)->path) {
        rc = SK_EINVAL;
        if (err) snprintf(err, cap, "database path too long");
    } else {
        path = spec + 7;
    }
    if (rc) return rc;
    sk_store *st = calloc(1, sizeof *st);
    if (!st) {
        if (err) snprintf(err, cap, "out of memory");
        return SK_ENOMEM;
    }
    rc = open_sqlite(st, path);
    if (rc) {
        if (err) snprintf(err, cap, "%s", st->errstr);
        sk_store_close(st);
        return rc;
    }
    *out = st;
    return 0;
}

void sk_store_close(sk_store *st)
{
    if (!st) return;
    if (st->db) sqlite3_close_v2(st->db);
    free(st);
}

const char *sk_store_errstr(const sk_store *st)
{
    return st ? st->errstr : "no store";
}

int sk_store_schema_version(sk_store *st, int *version)
{
    st->errstr[0] = 0;
    return read_version(st, version);
}

static const char COLUMNS[] = "id, name, stock_initial, stock, per_user_limit, max_per_order, "
                              "start_ms, end_ms, pay_timeout_s, state, created_ms";

static void read_row(sqlite3_stmt *s, struct sk_activity *a)
{
    memset(a, 0, sizeof *a);
    a->id = (uint64_t)sqlite3_column_int64(s, 0);
    const unsigned char *name = sqlite3_column_text(s, 1);
    int nl = sqlite3_column_bytes(s, 1);
    if (name) snprintf(a->name, sizeof a->name, "%.*s", nl, (const char *)name);
    a->stock = sqlite3_column_int64(s, 2);
    a->stock_db = sqlite3_column_int64(s, 3);
    a->per_user_limit = sqlite3_column_int64(s, 4);
    a->max_per_order = sqlite3_column_int64(s, 5);
    a->start_ms = sqlite3_column_int64(s, 6);
    a->end_ms = sqlite3_column_int64(s, 7);
    a->pay_timeout_s = sqlite3_column_int64(s, 8);
    const unsigned char *state = sqlite3_column_text(s, 9);
    if (state) snprintf(a->state, sizeof a->state, "%s", (const char *)state);
    a->created_ms = sqlite3_column_int64(s, 10);
}

int sk_store_activity_insert(sk_store *st, const struct sk_activity *a)
{
    st->errstr[0] = 0;
    struct sk_activity v = *a;
    if (!v.state[0]) snprintf(v.state, sizeof v.state, "created");
    char why[256];
    if (sk_activity_validate(&v, why, sizeof why) < 0)
        return set_err(st, SK_EINVAL, "activity %" PRIu64 ": %s", v.id, why);
    sqlite3_stmt *s;
    int rc = prepare(st, &s,
                     "INSERT INTO activities (id, name, stock_initial, stock, per_user_limit,"
                     " max_per_order, start_ms, end_ms, pay_timeout_s, state, created_ms)"
                     " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    if (rc) return rc;
    sqlite3_bind_int64(s, 1, (sqlite3_int64)v.id);
    sqlite3_bind_text(s, 2, v.name, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(s, 3, v.stock);
    sqlite3_bind_int64(s, 4, v.stock);
    sqlite3_bind_int64(s, 5, v.per_user_limit);
    sqlite3_bind_int64(s, 6, v.max_per_order);
    sqlite3_bind_int64(s, 7, v.start_ms);
    sqlite3_bind_int64(s, 8, v.end_ms);
    sqlite3_bind_int64(s, 9, v.pay_timeout_s);
    sqlite3_bind_text(s, 10, v.state, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(s, 11, v.created_ms);
    if (sqlite3_step(s) != SQLITE_DONE) {
        rc = db_err(st, "insert activity");
        if (rc == SK_EEXIST) set_err(st, SK_EEXIST, "activity %" PRIu64 " already exists", v.id);
    }
    sqlite3_finalize(s);
    return rc;
}

int sk_store_activity_get(sk_store *st, uint64_t id, struct sk_activity *out)
{
    st->errstr[0] = 0;
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT %s FROM activities WHERE id = ?", COLUMNS);
    sqlite3_stmt *s;
    int rc = prepare(st, &s, sql);
    if (rc) return rc;
    sqlite3_bind_int64(s, 1, (sqlite3_int64)id);
    int step = sqlite3_step(s);
    if (step == SQLITE_ROW)
        read_row(s, out);
    else if (step == SQLITE_DONE)
        rc = set_err(st, SK_ENOTFOUND, "activity %" PRIu64 " not found", id);
    else
        rc = db_err(st, "read activity");
    sqlite3_finalize(s);
    return rc;
}

int sk_store_activity_list(sk_store *st, struct sk_activity **out, size_t *n)
{
    st->errstr[0] = 0;
    *out = NULL;
    *n = 0;
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT %s FROM activities ORDER BY id", COLUMNS);
    sqlite3_stmt *s;
    int rc = prepare(st, &s, sql);
    if (rc) return rc;
    struct sk_activity *arr = NULL;
    size_t len = 0, cap = 0;
    int step;
    while ((step = sqlite3_step(s)) == SQLITE_ROW) {
        if (len == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            struct sk_activity *na = realloc(arr, ncap * sizeof *na);
            if (!na) {
                rc = set_err(st, SK_ENOMEM, "out of memory listing activities");
                break;
            }
            arr = na;
            cap = ncap;
        }
        read_row(s, &arr[len++]);
    }
    if (rc == 0 && step != SQLITE_DONE) rc = db_err(st, "list activities");
    sqlite3_finalize(s);
    if (rc) {
        free(arr);
        return rc;
    }
    if (len == 0) {
        free(arr);
        arr = NULL;
    }
    *out = arr;
    *n = len;
    return 0;
}

/* Runs a one-row UPDATE/DELETE bound to (text?, id); SK_ENOTFOUND when no
 * row matched. */
static int change_one(sk_store *st, const char *sql, const char *text, uint64_t id,
                      const char *what)
{
    sqlite3_stmt *s;
    int rc = prepare(st, &s, sql);
    if (rc) return rc;
    int i = 1;
    if (text) sqlite3_bind_text(s, i++, text, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(s, i, (sqlite3_int64)id);
    if (sqlite3_step(s) != SQLITE_DONE)
        rc = db_err(st, what);
    else if (sqlite3_changes(st->db) == 0)
        rc = set_err(st, SK_ENOTFOUND, "activity %" PRIu64 " not found", id);
    sqlite3_finalize(s);
    return rc;
}

int sk_store_activity_set_state(sk_store *st, uint64_t id, const char *state)
{
    st->errstr[0] = 0;
    if (!state || !sk_activity_state_valid(state))
        return set_err(st, SK_EINVAL, "invalid activity state '%s'", state ? state : "(null)");
    return change_one(st, "UPDATE activities SET state = ? WHERE id = ?", state, id,
                      "update activity state");
}

int sk_store_activity_delete(sk_store *st, uint64_t id)
{
    st->errstr[0] = 0;
    return change_one(st, "DELETE FROM activities WHERE id = ?", NULL, id, "delete activity");
}
