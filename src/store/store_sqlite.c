/* store_sqlite.c - the SQLite backend of store.h, the zero-setup default:
 * opening the file, the schema, the statements kept prepared, the
 * activities, and the table of the backend's functions. The other files
 * (store_sqlite_int.h): store_sqlite_persist.c, the persist batch;
 * store_sqlite_orders.c, the orders' reads and status changes, audit rows,
 * marks and repairs.
 *
 * WAL so readers (the dashboard, `activity show`) never block the order
 * worker's writes; a busy timeout so two processes on one file wait for each
 * other instead of failing. The schema is a list of migrations applied at
 * open, tracked by PRAGMA user_version.
 *
 * Orders: the hot path is sk_store_orders_persist (the order worker, one
 * transaction per batch), so its statements are prepared once per handle
 * and reused; everything else prepares per call. */
#include "store/store_sqlite_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/vec.h"

#define BUSY_TIMEOUT_MS 5000

static const char *const cached_sql[Q_COUNT] = {
    [Q_PAY_TIMEOUT] = "SELECT pay_timeout_s FROM activities WHERE id = ?",
    [Q_TAKE_STOCK] = "UPDATE activities SET stock = stock - ?1 WHERE id = ?2 AND stock >= ?1",
    [Q_READ_STOCK] = "SELECT stock FROM activities WHERE id = ?",
    [Q_INSERT_FAILURE] = "INSERT INTO stock_failures (at_ms, activity_id, order_id, quantity,"
                         " db_stock) VALUES (?, ?, ?, ?, ?)",
    [Q_UPSERT_MARK] = SK_STORE_MARK_UPSERT("?", "?", "?", "?", "?", "?"),
    /* an order id found present: whose admission it holds */
    [Q_READ_HOLDER] = "SELECT activity_id, user_id, quantity FROM orders WHERE order_id = ?",
    /* the HTTP processes' hot reads: an order poll, an activity read */
    [Q_ORDER_GET] = "SELECT " SK_STORE_ORDER_COLUMNS " FROM orders WHERE order_id = ?",
    [Q_ACTIVITY_GET] = "SELECT " SK_STORE_ACTIVITY_COLUMNS " FROM activities WHERE id = ?",
};
_Static_assert(Q_COUNT <= sizeof((struct sk_store *)0)->sq / sizeof(sqlite3_stmt *),
               "store_int.h: sq[] too small");

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
    /* 2: orders. order_id is "<activity>-<stream id>": the primary
     * key makes persisting a re-delivered stream entry a no-op. WITHOUT
     * ROWID: the rows live in the primary-key b-tree, one b-tree write per
     * insert instead of two. No foreign key to activities: an order Redis
     * admitted is kept even if its activity row is gone (reconcile reports
     * it). paid_ms / cancelled_ms are NULL until then. stock_failures
     * records each failed conditional DB stock update (never silently
     * ignored); audit records reconcile repairs. */
    "CREATE TABLE orders ("
    " order_id TEXT PRIMARY KEY CHECK (length(order_id) BETWEEN 1 AND 63),"
    " activity_id INTEGER NOT NULL CHECK (activity_id >= 1),"
    " user_id INTEGER NOT NULL,"
    " quantity INTEGER NOT NULL CHECK (quantity >= 1),"
    " status TEXT NOT NULL DEFAULT 'created'"
    "  CHECK (status IN ('created', 'paid', 'cancelled')),"
    " created_ms INTEGER NOT NULL,"
    " pay_deadline_ms INTEGER NOT NULL,"
    " paid_ms INTEGER,"
    " cancelled_ms INTEGER,"
    " stream_id TEXT NOT NULL"
    ") WITHOUT ROWID;"
    "CREATE INDEX orders_status_deadline ON orders (status, pay_deadline_ms);"
    "CREATE INDEX orders_activity_status ON orders (activity_id, status);"
    "CREATE TABLE stock_failures ("
    " id INTEGER PRIMARY KEY,"
    " at_ms INTEGER NOT NULL,"
    " activity_id INTEGER NOT NULL,"
    " order_id TEXT NOT NULL,"
    " quantity INTEGER NOT NULL,"
    " db_stock INTEGER" /* DB stock seen at the failure; NULL: no activity row */
    ");"
    "CREATE INDEX stock_failures_activity ON stock_failures (activity_id);"
    "CREATE TABLE audit ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " at_ms INTEGER NOT NULL,"
    " activity_id INTEGER NOT NULL,"
    " kind TEXT NOT NULL,"
    " detail TEXT NOT NULL"
    ");"
    "CREATE INDEX audit_activity ON audit (activity_id, id);",
    /* 3: released_ms (store.h, sweeper.h): set once the Redis release of a
     * cancelled order is known to be done. A cancelled order with NULL owes
     * its release (the process died between the DB cancel and the release,
     * or Redis was unreachable then). The partial index holds exactly those
     * orders, so the sweeper finds them without scanning every cancelled
     * order. Orders cancelled before this migration start unmarked: the
     * sweeper's next pass runs their release (once per order in Redis, so
     * an earlier one answers "already released") and marks them. */
    "ALTER TABLE orders ADD COLUMN released_ms INTEGER;"
    "CREATE INDEX orders_unreleased ON orders (order_id)"
    " WHERE status = 'cancelled' AND released_ms IS NULL;",
    /* 4: the activity's own per-user rate limit (docs/rate-limit.md);
     * 0 = none, the global one applies. Existing rows get 0. */
    "ALTER TABLE activities ADD COLUMN rl_per_user_per_s INTEGER NOT NULL DEFAULT 0"
    " CHECK (rl_per_user_per_s >= 0);"
    "ALTER TABLE activities ADD COLUMN rl_burst INTEGER NOT NULL DEFAULT 0"
    " CHECK (rl_burst >= 0);",
    /* 5: stock segments (docs/segments.md): the stock is split over this
     * many Redis hash tags; 1 = not segmented. Existing rows get 1. The
     * upper bound (256) and segments <= stock are the C validation's. */
    "ALTER TABLE activities ADD COLUMN segments INTEGER NOT NULL DEFAULT 1"
    " CHECK (segments >= 1);",
    /* 6: the rollback guard's watermark (docs/recovery.md): per key set
     * label ("<id>" or "<id>.<segment>"), the highest admission number of
     * a persisted order and that order's id, raised in the persist
     * transaction. A Redis whose admission count is below it, or whose
     * ledger lacks that order, has lost writes the database holds. */
    "CREATE TABLE redis_marks ("
    " label TEXT PRIMARY KEY CHECK (length(label) BETWEEN 1 AND 31),"
    " activity_id INTEGER NOT NULL CHECK (activity_id >= 1),"
    " adm INTEGER NOT NULL CHECK (adm >= 0),"
    " updated_ms INTEGER NOT NULL,"
    " order_id TEXT NOT NULL"
    ") WITHOUT ROWID;"
    "CREATE INDEX redis_marks_activity ON redis_marks (activity_id);",
    /* 7: the waiting room (docs/waiting-room.md): passes per second (0 =
     * none), a pass's lifetime, the draw's secret seed (hex, '' = none).
     * Existing rows get no waiting room. */
    "ALTER TABLE activities ADD COLUMN wr_passes_per_s INTEGER NOT NULL DEFAULT 0"
    " CHECK (wr_passes_per_s >= 0);"
    "ALTER TABLE activities ADD COLUMN wr_pass_ttl_s INTEGER NOT NULL DEFAULT 0"
    " CHECK (wr_pass_ttl_s >= 0);"
    "ALTER TABLE activities ADD COLUMN wr_seed TEXT NOT NULL DEFAULT ''"
    " CHECK (length(wr_seed) <= 64);",
    /* 8: histories that diverge (docs/failover.md, docs/recovery.md).
     * The purchase's Idempotency-Key (NULL: none), so a recovery puts its
     * record back with the order. The marks per label and branch (the
     * order id's suffix, '' for ids without one: every mark so far): two
     * masters of one split number their admissions alike, so one mark per
     * label could not tell their histories apart. order_conflicts: an
     * admission whose order id the database already holds for another
     * activity, user or quantity (kept for the operator, never inserted,
     * never silently dropped). */
    "ALTER TABLE orders ADD COLUMN idem_key TEXT"
    " CHECK (idem_key IS NULL OR length(idem_key) BETWEEN 1 AND 64);"
    "CREATE TABLE redis_marks_b ("
    " label TEXT NOT NULL CHECK (length(label) BETWEEN 1 AND 31),"
    " branch TEXT NOT NULL DEFAULT '' CHECK (length(branch) <= 15),"
    " activity_id INTEGER NOT NULL CHECK (activity_id >= 1),"
    " adm INTEGER NOT NULL CHECK (adm >= 0),"
    " updated_ms INTEGER NOT NULL,"
    " order_id TEXT NOT NULL,"
    " PRIMARY KEY (label, branch)"
    ") WITHOUT ROWID;"
    "INSERT INTO redis_marks_b (label, branch, activity_id, adm, updated_ms, order_id)"
    " SELECT label, '', activity_id, adm, updated_ms, order_id FROM redis_marks;"
    "DROP TABLE redis_marks;"
    "ALTER TABLE redis_marks_b RENAME TO redis_marks;"
    "CREATE INDEX redis_marks_activity ON redis_marks (activity_id);"
    "CREATE TABLE order_conflicts ("
    " id INTEGER PRIMARY KEY,"
    " at_ms INTEGER NOT NULL,"
    " activity_id INTEGER NOT NULL,"
    " order_id TEXT NOT NULL,"
    " user_id INTEGER NOT NULL,"
    " quantity INTEGER NOT NULL,"
    " stream_id TEXT NOT NULL"
    ");"
    "CREATE INDEX order_conflicts_activity ON order_conflicts (activity_id);",
    /* 9: pre-registration, the draw and the waiting room's emergency
     * controls (docs/fairness-registration.md, docs/waiting-room.md). The
     * registration window (0 0 = none), a draw winner's box (0 = no draw),
     * the draw's seed (secret until drawn_ms), the draw as made (when, how
     * many, the waves so far), the controls (bits). registrations: who
     * registered, and their place in the draw (NULL before it); user ids
     * as the int64 of the same bits, like orders. */
    "ALTER TABLE activities ADD COLUMN wr_control INTEGER NOT NULL DEFAULT 0"
    " CHECK (wr_control BETWEEN 0 AND 7);"
    "ALTER TABLE activities ADD COLUMN reg_start_ms INTEGER NOT NULL DEFAULT 0"
    " CHECK (reg_start_ms >= 0);"
    "ALTER TABLE activities ADD COLUMN reg_end_ms INTEGER NOT NULL DEFAULT 0"
    " CHECK (reg_end_ms >= 0);"
    "ALTER TABLE activities ADD COLUMN draw_box_s INTEGER NOT NULL DEFAULT 0"
    " CHECK (draw_box_s >= 0);"
    "ALTER TABLE activities ADD COLUMN draw_seed TEXT NOT NULL DEFAULT ''"
    " CHECK (length(draw_seed) IN (0, 64));"
    "ALTER TABLE activities ADD COLUMN drawn_ms INTEGER NOT NULL DEFAULT 0"
    " CHECK (drawn_ms >= 0);"
    "ALTER TABLE activities ADD COLUMN draw_n INTEGER NOT NULL DEFAULT 0 CHECK (draw_n >= 0);"
    "ALTER TABLE activities ADD COLUMN draw_state TEXT NOT NULL DEFAULT ''"
    " CHECK (length(draw_state) < 96);"
    "CREATE TABLE registrations ("
    " activity_id INTEGER NOT NULL CHECK (activity_id >= 1),"
    " user_id INTEGER NOT NULL,"
    " created_ms INTEGER NOT NULL,"
    " draw_rank INTEGER CHECK (draw_rank IS NULL OR draw_rank >= 1),"
    " PRIMARY KEY (activity_id, user_id)"
    ") WITHOUT ROWID;",
};
#define N_MIGRATIONS ((int)(sizeof migrations / sizeof migrations[0]))

/* SQLite failure -> SK code, with the database's own message. */
int sk_sq_err(sk_store *st, const char *what)
{
    int ext = sqlite3_extended_errcode(st->db);
    int code = SK_EDB;
    if (ext == SQLITE_CONSTRAINT_PRIMARYKEY || ext == SQLITE_CONSTRAINT_UNIQUE)
        code = SK_EEXIST;
    else if ((ext & 0xff) == SQLITE_BUSY || (ext & 0xff) == SQLITE_LOCKED)
        code = SK_ETIMEDOUT; /* locked past the busy timeout: worth a retry */
    else if ((ext & 0xff) == SQLITE_CONSTRAINT)
        code = SK_EINVAL;
    return sk_store_set_err(st, code, "sqlite %s: %s: %s", st->path, what, sqlite3_errmsg(st->db));
}

int sk_sq_exec(sk_store *st, const char *sql, const char *what)
{
    if (sqlite3_exec(st->db, sql, NULL, NULL, NULL) != SQLITE_OK) return sk_sq_err(st, what);
    return 0;
}

int sk_sq_prepare(sk_store *st, sqlite3_stmt **stmt, const char *sql)
{
    if (sqlite3_prepare_v2(st->db, sql, -1, stmt, NULL) != SQLITE_OK) {
        *stmt = NULL;
        return sk_sq_err(st, "prepare");
    }
    return 0;
}

int sk_sq_prepare_args(sk_store *st, sqlite3_stmt **stmt, const char *sql,
                       const struct sk_sq_arg *args, int n)
{
    int rc = sk_sq_prepare(st, stmt, sql);
    for (int i = 0; rc == 0 && i < n; i++) {
        if (args[i].text)
            sqlite3_bind_text(*stmt, i + 1, args[i].text, -1, SQLITE_TRANSIENT);
        else
            sqlite3_bind_int64(*stmt, i + 1, args[i].num);
    }
    return rc;
}

int sk_sq_run(sk_store *st, const char *sql, const struct sk_sq_arg *args, int n, const char *what)
{
    sqlite3_stmt *s;
    int rc = sk_sq_prepare_args(st, &s, sql, args, n);
    if (rc) return rc;
    if (sqlite3_step(s) != SQLITE_DONE) rc = sk_sq_err(st, what);
    sqlite3_finalize(s);
    return rc;
}

/* A kept statement, reset and unbound, ready to bind. */
int sk_sq_cached(sk_store *st, int which, sqlite3_stmt **out)
{
    if (!st->sq[which]) {
        int rc = sk_sq_prepare(st, &st->sq[which], cached_sql[which]);
        if (rc) return rc;
    }
    sqlite3_reset(st->sq[which]);
    sqlite3_clear_bindings(st->sq[which]);
    *out = st->sq[which];
    return 0;
}

static int commit(sk_store *st, const char *what)
{
    return sk_sq_exec(st, "COMMIT", what);
}

static void rollback(sk_store *st)
{
    sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
}

int sk_sq_finish_tx(sk_store *st, int rc, const char *what)
{
    return sk_store_finish_tx(st, rc, what, commit, rollback);
}

static int64_t row_i64(const struct sk_store_row *r, int col)
{
    return sqlite3_column_int64((sqlite3_stmt *)r->aux, col);
}

/* Text by its length (a NUL inside stops the copy, never overruns). */
static void row_text(const struct sk_store_row *r, int col, char *dst, size_t cap)
{
    const unsigned char *t = sqlite3_column_text((sqlite3_stmt *)r->aux, col);
    int len = sqlite3_column_bytes((sqlite3_stmt *)r->aux, col);
    snprintf(dst, cap, "%.*s", t ? len : 0, t ? (const char *)t : "");
}

void sk_sq_read_row(sqlite3_stmt *s, sk_store_row_reader *read, void *dst)
{
    read(&(struct sk_store_row){.aux = s, .i64 = row_i64, .text = row_text}, dst);
}

/* Steps s (prepared and bound) once: its row into out by read; 1 found,
 * 0 none, or a negative code. */
static int step_one(sk_store *st, sqlite3_stmt *s, const char *what, sk_store_row_reader *read,
                    void *out)
{
    int step = sqlite3_step(s);
    if (step == SQLITE_ROW) sk_sq_read_row(s, read, out);
    return step == SQLITE_ROW ? 1 : step == SQLITE_DONE ? 0 : sk_sq_err(st, what);
}

int sk_sq_read_one(sk_store *st, int q, const char *what, const char *text_key, int64_t int_key,
                   sk_store_row_reader *read, void *out)
{
    sqlite3_stmt *s;
    int rc = sk_sq_cached(st, q, &s);
    if (rc) return rc;
    if (text_key)
        sqlite3_bind_text(s, 1, text_key, -1, SQLITE_STATIC);
    else
        sqlite3_bind_int64(s, 1, int_key);
    rc = step_one(st, s, what, read, out);
    sqlite3_reset(s); /* a stepped statement would hold its read snapshot */
    return rc;
}

int sk_sq_query_one(sk_store *st, const char *sql, const struct sk_sq_arg *args, int n,
                    const char *what, sk_store_row_reader *read, void *out)
{
    sqlite3_stmt *s;
    int rc = sk_sq_prepare_args(st, &s, sql, args, n);
    if (rc) return rc;
    rc = step_one(st, s, what, read, out);
    sqlite3_finalize(s);
    return rc;
}

int sk_sq_read_all(sk_store *st, sqlite3_stmt *s, const char *what, size_t size,
                   sk_store_row_reader *read, void **out, size_t *n)
{
    char *arr = NULL;
    size_t len = 0, cap = 0;
    int rc = 0, step;
    while ((step = sqlite3_step(s)) == SQLITE_ROW) {
        if (sk_vec_reserve(&arr, &cap, len + 1, size, 16)) {
            rc = sk_store_set_err(st, SK_ENOMEM, "out of memory: %s", what);
            break;
        }
        sk_sq_read_row(s, read, arr + len++ * size);
    }
    if (rc == 0 && step != SQLITE_DONE) rc = sk_sq_err(st, what);
    sqlite3_finalize(s);
    if (rc || len == 0) {
        free(arr);
        return rc;
    }
    *out = arr;
    *n = len;
    return 0;
}

/* The activity's pay timeout in seconds into *secs; *found 0 (and the
 * default timeout) when the activity row is absent. */
int sk_sq_pay_timeout(sk_store *st, uint64_t aid, int64_t *secs, int *found)
{
    sqlite3_stmt *s;
    int rc = sk_sq_cached(st, Q_PAY_TIMEOUT, &s);
    if (rc) return rc;
    sqlite3_bind_int64(s, 1, (sqlite3_int64)aid);
    int step = sqlite3_step(s);
    *found = step == SQLITE_ROW;
    *secs = *found ? sqlite3_column_int64(s, 0) : SK_ACTIVITY_PAY_TIMEOUT_DEFAULT;
    if (step != SQLITE_ROW && step != SQLITE_DONE) rc = sk_sq_err(st, "read pay timeout");
    sqlite3_reset(s);
    return rc;
}

static int read_version(sk_store *st, int *v)
{
    sqlite3_stmt *s;
    int rc = sk_sq_prepare(st, &s, "PRAGMA user_version");
    if (rc) return rc;
    if (sqlite3_step(s) == SQLITE_ROW) {
        *v = sqlite3_column_int(s, 0);
        rc = 0;
    } else {
        rc = sk_sq_err(st, "read user_version");
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
        if ((rc = sk_sq_exec(st, "BEGIN IMMEDIATE", "begin migration")) != 0) break;
        if ((rc = read_version(st, &v)) == 0 && v < N_MIGRATIONS) {
            char bump[64];
            snprintf(bump, sizeof bump, "PRAGMA user_version = %d", v + 1);
            if ((rc = sk_sq_exec(st, migrations[v], "migration")) == 0)
                rc = sk_sq_exec(st, bump, "set user_version");
        }
        if (rc == 0) rc = sk_sq_exec(st, "COMMIT", "commit migration");
        if (rc != 0) {
            char why[sizeof st->errstr];
            snprintf(why, sizeof why, "%s", st->errstr);
            sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
            return sk_store_set_err(st, SK_EDB, "%s (schema migration %d failed)", why, v + 1);
        }
        rc = read_version(st, &v);
    }
    if (rc == 0 && v > N_MIGRATIONS)
        rc = sk_store_set_err(
            st, SK_EDB,
            "sqlite %s: schema version %d is newer than this binary (%d); upgrade seckill",
            st->path, v, N_MIGRATIONS);
    return rc;
}

/* SQLite's own busy handler sleeps up to 100 ms between tries. The order
 * worker takes the write lock again right after each commit, so a pay or a
 * sweep waiting behind it tried ~20 times a second, found the lock taken
 * each time, and timed out (bench http's mixed phase: pays answered 503 at
 * --db-timeout-ms). A try every millisecond meets the gaps between the
 * worker's transactions; a try is a lock probe, a few microseconds. */
static int busy_try(void *arg, int tries)
{
    sk_store *st = arg;
    int64_t now = sk_mono_ms();
    if (tries == 0) st->sq_busy_since = now;
    if (now - st->sq_busy_since >= BUSY_TIMEOUT_MS) return 0;
    sqlite3_sleep(1);
    return 1;
}

static int open_sqlite(sk_store *st, const char *path)
{
    snprintf(st->path, sizeof st->path, "%s", path);
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
    if (sqlite3_open_v2(path, &st->db, flags, NULL) != SQLITE_OK) {
        int rc = sk_store_set_err(st, SK_EDB, "sqlite %s: cannot open: %s", path,
                                  st->db ? sqlite3_errmsg(st->db) : "out of memory");
        return rc;
    }
    sqlite3_extended_result_codes(st->db, 1);
    sqlite3_busy_handler(st->db, busy_try, st);
    /* synchronous stays at its FULL default: an order the worker committed
     * must survive a power cut (exactly-once persistence). */
    /* Several processes opening a new file at once: the switch to WAL can
     * fail busy without the busy handler being called; retry within the
     * busy timeout. */
    int64_t until = sk_mono_ms() + BUSY_TIMEOUT_MS;
    int rc;
    while ((rc = sk_sq_exec(st, "PRAGMA journal_mode=WAL", "enable WAL")) == SK_ETIMEDOUT &&
           sk_mono_ms() < until)
        sqlite3_sleep(5);
    if (rc == 0) rc = sk_sq_exec(st, "PRAGMA foreign_keys=ON", "enable foreign keys");
    /* The persist's multi-row inserts keep a statement journal; on disk it
     * was a temporary file created, written and deleted per transaction
     * once a statement touched more than 64 KiB of pages. In memory it is
     * bounded by the pages one statement of 128 rows touches. */
    if (rc == 0) rc = sk_sq_exec(st, "PRAGMA temp_store=MEMORY", "keep temporary files in memory");
    if (rc == 0) rc = migrate(st);
    return rc;
}

void sk_sq_close(sk_store *st)
{
    for (size_t i = 0; i < sizeof st->sq / sizeof st->sq[0]; i++) {
        sqlite3_finalize(st->sq[i]); /* NULL is a no-op */
        st->sq[i] = NULL;
    }
    for (size_t i = 0; i < SK_STORE_SQ_INSERTS; i++) {
        sqlite3_finalize(st->sq_ins[i]);
        st->sq_ins[i] = NULL;
    }
    if (st->db) sqlite3_close_v2(st->db);
    st->db = NULL;
}

int sk_sq_schema_version(sk_store *st, int *version)
{
    return read_version(st, version);
}

/* ---- activities ------------------------------------------------------ */

int sk_sq_activity_insert(sk_store *st, const struct sk_activity *v)
{
    sqlite3_stmt *s;
    int rc = sk_sq_prepare(st, &s,
                           "INSERT INTO activities (" SK_STORE_ACTIVITY_COLUMNS ")"
                           " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
                           " ?, ?, ?, ?, ?)");
    if (rc) return rc;
    struct sk_store_value val[SK_STORE_ACTIVITY_NCOLS];
    sk_store_activity_values(v, val);
    for (int i = 0; i < SK_STORE_ACTIVITY_NCOLS; i++) {
        if (val[i].text)
            sqlite3_bind_text(s, i + 1, val[i].text, -1, SQLITE_TRANSIENT);
        else
            sqlite3_bind_int64(s, i + 1, val[i].num);
    }
    if (sqlite3_step(s) != SQLITE_DONE) {
        rc = sk_sq_err(st, "insert activity");
        if (rc == SK_EEXIST)
            sk_store_set_err(st, SK_EEXIST, "activity %" PRIu64 " already exists", v->id);
    }
    sqlite3_finalize(s);
    return rc;
}

int sk_sq_activity_get(sk_store *st, uint64_t id, struct sk_activity *out)
{
    int rc = sk_sq_read_one(st, Q_ACTIVITY_GET, "read activity", NULL, (sqlite3_int64)id,
                            sk_store_read_activity, out);
    return rc == 0 ? sk_store_no_activity(st, id) : rc < 0 ? rc : 0;
}

int sk_sq_activity_list(sk_store *st, struct sk_activity **out, size_t *n)
{
    sqlite3_stmt *s;
    int rc =
        sk_sq_prepare(st, &s, "SELECT " SK_STORE_ACTIVITY_COLUMNS " FROM activities ORDER BY id");
    if (rc) return rc;
    void *arr = NULL;
    rc = sk_sq_read_all(st, s, "list activities", sizeof **out, sk_store_read_activity, &arr, n);
    *out = arr;
    return rc;
}

/* Runs a one-row UPDATE/DELETE bound to (text or *num when given, id);
 * SK_ENOTFOUND when no row matched. */
static int change_one(sk_store *st, const char *sql, const char *text, const int64_t *num,
                      uint64_t id, const char *what)
{
    sqlite3_stmt *s;
    int rc = sk_sq_prepare(st, &s, sql);
    if (rc) return rc;
    int i = 1;
    if (text) sqlite3_bind_text(s, i++, text, -1, SQLITE_TRANSIENT);
    if (num) sqlite3_bind_int64(s, i++, *num);
    sqlite3_bind_int64(s, i, (sqlite3_int64)id);
    if (sqlite3_step(s) != SQLITE_DONE)
        rc = sk_sq_err(st, what);
    else if (sqlite3_changes(st->db) == 0)
        rc = sk_store_no_activity(st, id);
    sqlite3_finalize(s);
    return rc;
}

int sk_sq_activity_set_state(sk_store *st, uint64_t id, const char *state)
{
    return change_one(st, "UPDATE activities SET state = ? WHERE id = ?", state, NULL, id,
                      "update activity state");
}

int sk_sq_activity_delete(sk_store *st, uint64_t id)
{
    int rc =
        change_one(st, "DELETE FROM activities WHERE id = ?", NULL, NULL, id, "delete activity");
    if (rc) return rc;
    /* a re-created id starts a new history: its old watermark would read as
     * a Redis that went back in time, its registrations as its buyers' */
    static const char *const gone[] = {"DELETE FROM redis_marks WHERE activity_id = ?",
                                       "DELETE FROM registrations WHERE activity_id = ?"};
    for (size_t i = 0; rc == 0 && i < sizeof gone / sizeof gone[0]; i++) {
        sqlite3_stmt *s;
        if ((rc = sk_sq_prepare(st, &s, gone[i])) != 0) return rc;
        sqlite3_bind_int64(s, 1, (sqlite3_int64)id);
        if (sqlite3_step(s) != SQLITE_DONE) rc = sk_sq_err(st, "delete marks and registrations");
        sqlite3_finalize(s);
    }
    return rc;
}

int sk_sq_activity_set_db_stock(sk_store *st, uint64_t id, int64_t stock)
{
    /* a CHECK failure: store.c says which */
    return change_one(st, "UPDATE activities SET stock = ? WHERE id = ?", NULL, &stock, id,
                      "set DB stock");
}

int sk_sq_activity_set_pass_rate(sk_store *st, uint64_t id, int64_t rate)
{
    return change_one(st,
                      "UPDATE activities SET wr_passes_per_s = ? WHERE id = ? AND"
                      " wr_passes_per_s > 0",
                      NULL, &rate, id, "set pass rate");
}

int sk_sq_activity_ids(sk_store *st, uint64_t **out, size_t *n)
{
    sqlite3_stmt *s;
    int rc = sk_sq_prepare(st, &s, "SELECT id FROM activities ORDER BY id");
    if (rc) return rc;
    void *arr = NULL;
    rc = sk_sq_read_all(st, s, "list activity ids", sizeof **out, sk_store_read_id, &arr, n);
    *out = arr;
    return rc;
}

int sk_sq_exec_tx(sk_store *st, const char *const *sql, size_t n, const int64_t *expect,
                  int64_t *affected)
{
    int rc = sk_sq_exec(st, "BEGIN IMMEDIATE", "begin");
    if (rc) return rc;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if ((rc = sk_sq_exec(st, sql[i], "statement")) != 0) break;
        affected[i] = sqlite3_changes(st->db);
        if (expect && expect[i] >= 0 && affected[i] != expect[i])
            rc = sk_store_set_err(st, SK_ESTATE, "sqlite %s: statement %zu matched %" PRId64
                                                 " rows, not %" PRId64,
                                  st->path, i + 1, affected[i], expect[i]);
    }
    return sk_sq_finish_tx(st, rc, "commit");
}

/* The backend table (store_int.h); store.c dispatches through it. */
static const struct sk_store_ops sqlite_ops = SK_STORE_OPS_TABLE("sqlite", sk_sq);

int sk_store_sqlite_open(sk_store *st, const char *path)
{
    st->ops = &sqlite_ops;
    return open_sqlite(st, path);
}
