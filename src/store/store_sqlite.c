/* store_sqlite.c - the SQLite driver of the store (store_int.h), the
 * zero-setup default: the primitives over one sqlite3 handle.
 *
 * WAL so readers (the dashboard, `activity show`) never block the order
 * worker's writes; a busy handler so two processes on one file wait for
 * each other instead of failing; write transactions BEGIN IMMEDIATE, so
 * a transaction takes the write lock before it reads (waiting up to the
 * busy timeout) rather than fail mid-way when its read lock cannot be
 * upgraded, and no writer comes between its read and its write.
 *
 * Every statement is prepared once per handle and kept; a multi-row one
 * once per row count of 128, 64, ..., 2, 1 (a batch's tail takes at most
 * one of each; 128 rows of 8 parameters are far below SQLite's limit, and
 * past 32 rows a larger statement saved little CPU per row). */
#include "store/store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "core/clock.h"
#include "core/error.h"

#define BUSY_TIMEOUT_MS 5000
#define PATH_MAX_ 512

static const size_t bucket_rows[] = {128, 64, 32, 16, 8, 4, 2, 1};
#define NBUCKETS (sizeof bucket_rows / sizeof bucket_rows[0])

struct sk_stmt {
    sqlite3_stmt *s;
    sk_store *st;
    int q;
    int64_t changes;
};

struct sq {
    sqlite3 *db;
    int64_t busy_since; /* monotonic ms of this wait's first busy try */
    struct sk_stmt *kept[Q_COUNT][NBUCKETS];
};

#define SQ(st) ((struct sq *)(st)->conn)

/* SQLite failure -> SK code (a unique key EEXIST, busy ETIMEDOUT, a CHECK
 * EINVAL, the rest EDB), with the database's own message. */
static int fail(sk_store *st, const char *what)
{
    sqlite3 *db = SQ(st)->db;
    int ext = sqlite3_extended_errcode(db), code = SK_EDB;
    if (ext == SQLITE_CONSTRAINT_PRIMARYKEY || ext == SQLITE_CONSTRAINT_UNIQUE)
        code = SK_EEXIST;
    else if ((ext & 0xff) == SQLITE_BUSY || (ext & 0xff) == SQLITE_LOCKED)
        code = SK_ETIMEDOUT; /* locked past the busy timeout: worth a retry */
    else if ((ext & 0xff) == SQLITE_CONSTRAINT)
        code = SK_EINVAL;
    return sk_store_fail(st, code, what, "%s", sqlite3_errmsg(db));
}

static int exec(sk_store *st, const char *script, const char *what)
{
    return sqlite3_exec(SQ(st)->db, script, NULL, NULL, NULL) == SQLITE_OK ? 0 : fail(st, what);
}

static int end(sk_store *st, int commit)
{
    return commit ? exec(st, "COMMIT", "commit") : exec(st, "ROLLBACK", "rollback");
}

static int prepare(sk_store *st, int q, size_t rows, size_t *got, struct sk_stmt **out)
{
    size_t b = 0;
    if (sk_sql_types(q))
        while (bucket_rows[b] > rows)
            b++;
    *got = sk_sql_types(q) ? bucket_rows[b] : 1;
    struct sk_stmt **k = &SQ(st)->kept[q][b];
    if (!*k) {
        int none;
        char *sql = sk_sql_text(st, q, *got, &none);
        if (!sql) return none ? SK_STORE_NONE : SK_ENOMEM;
        struct sk_stmt *s = calloc(1, sizeof *s);
        int rc = !s ? sk_store_set_err(st, SK_ENOMEM, "out of memory preparing a statement")
                 : sqlite3_prepare_v2(SQ(st)->db, sql, -1, &s->s, NULL) != SQLITE_OK
                     ? fail(st, sk_sql_what(q))
                     : 0;
        free(sql);
        if (rc) {
            free(s);
            return rc;
        }
        s->st = st;
        s->q = q;
        *k = s;
    }
    *out = *k;
    return 0;
}

static void bind_(struct sk_stmt *s, int i, struct sk_val v)
{
    /* the text stays the caller's until the statement is stepped */
    if (v.kind == SK_V_TEXT)
        sqlite3_bind_text(s->s, i + 1, v.t, -1, SQLITE_STATIC);
    else if (v.kind == SK_V_INT)
        sqlite3_bind_int64(s->s, i + 1, v.i);
    else
        sqlite3_bind_null(s->s, i + 1);
}

static int step(struct sk_stmt *s)
{
    int rc = sqlite3_step(s->s);
    if (rc == SQLITE_ROW) return 1;
    if (rc != SQLITE_DONE) return fail(s->st, sk_sql_what(s->q));
    s->changes = sqlite3_changes(SQ(s->st)->db);
    return 0;
}

static int64_t col_i64(struct sk_stmt *s, int c)
{
    return sqlite3_column_int64(s->s, c);
}

/* Text by its length (a NUL inside stops the copy, never overruns). */
static void col_text(struct sk_stmt *s, int c, char *dst, size_t cap)
{
    const unsigned char *t = sqlite3_column_text(s->s, c);
    int len = sqlite3_column_bytes(s->s, c);
    snprintf(dst, cap, "%.*s", t ? len : 0, t ? (const char *)t : "");
}

static int64_t changes(struct sk_stmt *s)
{
    return s->changes;
}

/* Kept: reset (a stepped statement would hold its read snapshot) and
 * unbound. */
static void finish(struct sk_stmt *s)
{
    sqlite3_reset(s->s);
    sqlite3_clear_bindings(s->s);
}

/* SQLite's own busy handler sleeps up to 100 ms between tries. The order
 * worker takes the write lock again right after each commit, so a pay or a
 * sweep waiting behind it tried ~20 times a second, found the lock taken
 * each time, and timed out (bench http's mixed phase: pays answered 503 at
 * --db-timeout-ms). A try every millisecond meets the gaps between the
 * worker's transactions; a try is a lock probe, a few microseconds. */
static int busy_try(void *arg, int tries)
{
    struct sq *c = arg;
    int64_t now = sk_mono_ms();
    if (tries == 0) c->busy_since = now;
    if (now - c->busy_since >= BUSY_TIMEOUT_MS) return 0;
    sqlite3_sleep(1);
    return 1;
}

static int open_(sk_store *st, const char *path, int waiting)
{
    (void)waiting; /* a file opens or not */
    if (!*path) return sk_store_set_err(st, SK_EINVAL, "database spec 'sqlite:' has no path");
    if (strlen(path) >= PATH_MAX_) return sk_store_set_err(st, SK_EINVAL, "database path too long");
    snprintf(st->where, sizeof st->where, "%s", path);
    struct sq *c = calloc(1, sizeof *c);
    if (!c) return sk_store_set_err(st, SK_ENOMEM, "out of memory");
    st->conn = c;
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
    if (sqlite3_open_v2(path, &c->db, flags, NULL) != SQLITE_OK)
        return sk_store_fail(st, SK_EDB, "cannot open", "%s",
                             c->db ? sqlite3_errmsg(c->db) : "out of memory");
    sqlite3_extended_result_codes(c->db, 1);
    sqlite3_busy_handler(c->db, busy_try, c);
    /* synchronous stays at its FULL default: an order the worker committed
     * must survive a power cut (exactly-once persistence). */
    /* Several processes opening a new file at once: the switch to WAL can
     * fail busy without the busy handler being called; retry within the
     * busy timeout. */
    int64_t until = sk_mono_ms() + BUSY_TIMEOUT_MS;
    int rc;
    while ((rc = exec(st, "PRAGMA journal_mode=WAL", "enable WAL")) == SK_ETIMEDOUT &&
           sk_mono_ms() < until)
        sqlite3_sleep(5);
    if (rc == 0) rc = exec(st, "PRAGMA foreign_keys=ON", "enable foreign keys");
    /* The multi-row inserts keep a statement journal; on disk it was a
     * temporary file created, written and deleted per transaction once a
     * statement touched more than 64 KiB of pages. In memory it is bounded
     * by the pages one statement of 128 rows touches. */
    if (rc == 0) rc = exec(st, "PRAGMA temp_store=MEMORY", "keep temporary files in memory");
    return rc;
}

/* A file has no session to lose. */
static int enter(sk_store *st)
{
    (void)st;
    return 0;
}

static void close_(sk_store *st)
{
    struct sq *c = SQ(st);
    if (!c) return;
    for (size_t q = 0; q < Q_COUNT; q++)
        for (size_t b = 0; b < NBUCKETS; b++)
            if (c->kept[q][b]) {
                sqlite3_finalize(c->kept[q][b]->s);
                free(c->kept[q][b]);
            }
    if (c->db) sqlite3_close_v2(c->db);
    free(c);
    st->conn = NULL;
}

const struct sk_store_driver sk_store_sqlite =
    SK_STORE_DRIVER("sqlite", SK_SQLITE, "BEGIN IMMEDIATE", NULL, bind_, changes);
