/* store_sql.c - every statement of the store, once (store_int.h): its text
 * with dialect tokens where SQLite, PostgreSQL and MySQL / MariaDB differ
 * in a word, and a dialect's own text where they differ in shape; the
 * expansion of the tokens and the placeholders for one dialect. The
 * migrations' statements are in store_schema.c, with the same tokens.
 *
 * Tokens: {NAME} or {NAME arg} (the arg replaces %s in the dialect's
 * word). Two are computed from a multi-row statement's row types:
 * {VALUES} (SQLite, MySQL: "VALUES (?, ?), (?, ?)..." for the rows asked;
 * PostgreSQL: "SELECT * FROM unnest($1::text[], $2::bigint[])", one array
 * per column, so one prepared statement takes any number of rows) and
 * {IN} (an IN list, or "= ANY($1::bigint[])"). Placeholders are '?';
 * PostgreSQL's become $1, $2, ... in order. */
#include "store/store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

#define MY_TABLE ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
#define MARK_ON_CONFLICT                                                                           \
    " ON CONFLICT (label, branch) DO UPDATE SET adm = excluded.adm,"                               \
    " updated_ms = excluded.updated_ms, order_id = excluded.order_id"                              \
    " WHERE excluded.adm > redis_marks.adm"

/* A word per dialect (SQLite, PostgreSQL, MySQL). */
static const struct token {
    const char *name;
    const char *word[SK_NDIALECTS];
} tokens[] = {
    /* types; SQLite's INTEGER PRIMARY KEY is the rowid */
    {"INT", {"INTEGER", "BIGINT", "BIGINT"}},
    {"ROWID",
     {"INTEGER PRIMARY KEY", "BIGSERIAL PRIMARY KEY",
      "BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY"}},
    {"AUTOINC", {" AUTOINCREMENT", "", ""}}, /* ids never reused after a delete */
    {"VARCHAR", {"TEXT", "TEXT", "VARCHAR(%s)"}},
    /* ids compared and sorted as bytes, whatever the locale */
    {"BYTES", {"TEXT", "TEXT COLLATE \"C\"", "VARBINARY(%s)"}},
    {"LEN", {"length(CAST(%s AS BLOB))", "octet_length(%s)", "octet_length(%s)"}},
    {"END", {")", ")", MY_TABLE}},
    /* a table read by its key only: the rows in the key's b-tree */
    {"END_KEYED", {") WITHOUT ROWID", ")", MY_TABLE}},
    {"SCHEMA", {"", "current_schema()", "DATABASE()"}},
    /* expressions and locks */
    {"LEAST", {"min", "LEAST", "LEAST"}},
    /* SQLite's write transactions (BEGIN IMMEDIATE) hold the lock already */
    {"FOR_UPDATE", {"", " FOR UPDATE", " FOR UPDATE"}},
    {"FORCE_PK", {"", "", " FORCE INDEX (PRIMARY)"}},
    /* the marks' upsert: a mark only ever grows (MySQL assigns left to
     * right, so adm goes last) */
    {"MARK_UPSERT",
     {MARK_ON_CONFLICT, MARK_ON_CONFLICT,
      " ON DUPLICATE KEY UPDATE"
      " updated_ms = IF(VALUES(adm) > adm, VALUES(updated_ms), updated_ms),"
      " order_id = IF(VALUES(adm) > adm, VALUES(order_id), order_id),"
      " adm = GREATEST(adm, VALUES(adm))"}},
};

struct sql {
    const char *what;
    const char *text;              /* every dialect's */
    const char *own[SK_NDIALECTS]; /* a dialect's own instead; "": it has none */
    const char *types;             /* a multi-row statement's row */
    unsigned flags;
};

#define ORDERS_FROM " FROM orders"
#define MIGRATE_LOCK_NAME "CONCAT('seckill.migrate.', SHA1(DATABASE()))"

static const struct sql sql[Q_COUNT] = {
    /* ---- schema ---- */
    [Q_VERSION] = {.what = "read schema version",
                   .text = "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
                   .own = {[SK_SQLITE] = "PRAGMA user_version"}},
    [Q_VERSION_SET] = {.what = "record migration",
                       .text =
                           "INSERT INTO schema_migrations (version, applied_ms) VALUES (%d, %lld)",
                       .own = {[SK_SQLITE] = "PRAGMA user_version = %d"}},
    [Q_VERSION_TABLE] = {.what = "create schema_migrations",
                         .text =
                             "CREATE TABLE IF NOT EXISTS schema_migrations ("
                             "version INTEGER NOT NULL PRIMARY KEY, applied_ms {INT} NOT NULL{END}",
                         .own = {[SK_SQLITE] = ""}},
    /* PostgreSQL: a transaction-level advisory lock on an arbitrary key,
     * never changed; MySQL: a named lock of this database, waited for
     * just under the session's statement bound. */
    [Q_MIGRATE_LOCK] = {.what = "take the migration lock",
                        .text = "",
                        .own = {[SK_PG] = "SELECT 1 FROM pg_advisory_xact_lock(32199442939538540)",
                                [SK_MYSQL] = "SELECT GET_LOCK(" MIGRATE_LOCK_NAME ", ?)"}},
    [Q_MIGRATE_UNLOCK] = {.what = "release the migration lock",
                          .text = "",
                          .own = {[SK_MYSQL] = "DO RELEASE_LOCK(" MIGRATE_LOCK_NAME ")"}},
    [Q_HAS_COLUMN] =
        {.what = "read the schema",
         .text = "SELECT count(*) FROM information_schema.columns WHERE table_schema = {SCHEMA}"
                 " AND table_name = ? AND column_name = ?",
         .own = {[SK_SQLITE] = "SELECT count(*) FROM pragma_table_info(?) WHERE name = ?"}},
    [Q_HAS_INDEX] = {.what = "read the schema",
                     .text =
                         "SELECT count(*) FROM information_schema.statistics WHERE table_schema ="
                         " {SCHEMA} AND table_name = ? AND index_name = ?",
                     .own = {[SK_SQLITE] = "SELECT count(*) FROM sqlite_master WHERE type = 'index'"
                                           " AND tbl_name = ? AND name = ?",
                             [SK_PG] = "SELECT count(*) FROM pg_indexes WHERE schemaname ="
                                       " current_schema() AND tablename = ? AND indexname = ?"}},

    [Q_IDENTITY] = {.what = "read the store identity",
                    .text = "SELECT store_id FROM store_identity WHERE one = 1"},

    /* ---- activities, audit, marks ---- */
    [Q_ACTIVITY_INSERT] =
        {.what = "insert activity",
         .text =
             "INSERT INTO activities (" SK_STORE_ACTIVITY_COLUMNS ") VALUES"
             " (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
             " ?)"},
    [Q_ACTIVITY_ORDERS] = {.what = "count an id's orders",
                           .text = "SELECT count(*)" ORDERS_FROM " WHERE activity_id = ?"},
    [Q_ACTIVITY_GET] = {.what = "read activity",
                        .text = "SELECT " SK_STORE_ACTIVITY_COLUMNS " FROM activities WHERE id = ?",
                        .flags = SK_SQL_KEEP},
    [Q_ACTIVITY_LIST] = {.what = "list activities",
                         .text =
                             "SELECT " SK_STORE_ACTIVITY_COLUMNS " FROM activities ORDER BY id"},
    [Q_ACTIVITY_IDS] = {.what = "list activity ids",
                        .text = "SELECT id FROM activities ORDER BY id"},
    [Q_ACTIVITY_SET_STATE] = {.what = "update activity state",
                              .text = "UPDATE activities SET state = ? WHERE id = ?"},
    [Q_ACTIVITY_DELETE] = {.what = "delete activity",
                           .text = "DELETE FROM activities WHERE id = ?"},
    [Q_ACTIVITY_SET_STOCK] = {.what = "set DB stock",
                              .text = "UPDATE activities SET stock = ? WHERE id = ?"},
    [Q_ACTIVITY_SET_PASS_RATE] = {.what = "set pass rate",
                                  .text = "UPDATE activities SET wr_passes_per_s = ? WHERE id = ?"
                                          " AND wr_passes_per_s > 0"},
    [Q_MARKS_DELETE] = {.what = "delete marks",
                        .text = "DELETE FROM redis_marks WHERE activity_id = ?"},
    [Q_AUDIT_INSERT] =
        {.what = "insert audit row",
         .text = "INSERT INTO audit (at_ms, activity_id, kind, detail) VALUES (?, ?, ?, ?)",
         .flags = SK_SQL_DEFER},
    /* (lo, hi): one activity, or 0..max for all of them */
    [Q_AUDIT_LIST] = {.what = "list audit rows",
                      .text = "SELECT " SK_STORE_AUDIT_COLUMNS " FROM audit"
                              " WHERE activity_id BETWEEN ? AND ? ORDER BY id"},
    [Q_MARKS_LIST] = {.what = "list marks",
                      .text = "SELECT " SK_STORE_MARK_COLUMNS " FROM redis_marks"
                              " WHERE activity_id BETWEEN ? AND ? ORDER BY label, branch"},

    /* ---- registrations and the draw ---- */
    /* (activity, user, at) rows; a buyer registered already is left as
     * they are (MySQL: INSERT IGNORE; the values are the engine's numbers,
     * checked before, so it ignores nothing but the repeat) */
    [Q_REG_ADD] = {.what = "insert registrations",
                   .text = "INSERT INTO registrations (activity_id, user_id, created_ms) {VALUES}"
                           " ON CONFLICT DO NOTHING",
                   .own = {[SK_MYSQL] = "INSERT IGNORE INTO registrations (activity_id, user_id,"
                                        " created_ms) {VALUES}"},
                   .types = "iii"},
    [Q_REG_COUNT] = {.what = "count registrations",
                     .text = "SELECT count(*) FROM registrations WHERE activity_id = ?"},
    [Q_REG_LIST] = {.what = "list registrations",
                    .text = "SELECT user_id, draw_rank, created_ms FROM registrations"
                            " WHERE activity_id = ?"},
    [Q_REG_DELETE] = {.what = "delete registrations",
                      .text = "DELETE FROM registrations WHERE activity_id = ?"},
    /* (drawn, n, id): matches only an activity not drawn yet */
    [Q_DRAW_MARK] = {.what = "record the draw",
                     .text = "UPDATE activities SET drawn_ms = ?, draw_n = ? WHERE id = ?"
                             " AND drawn_ms = 0"},
    /* (place, activity, user) */
    [Q_DRAW_PLACE] = {.what = "record a place of the draw",
                      .text = "UPDATE registrations SET draw_rank = ? WHERE activity_id = ?"
                              " AND user_id = ?",
                      .flags = SK_SQL_KEEP},
    [Q_ACTIVITY_SET_FAIR] = {.what = "set controls and draw state",
                             .text = "UPDATE activities SET wr_control = ?, draw_state = ?"
                                     " WHERE id = ?"},

    /* ---- orders ---- */
    [Q_ORDER_GET] = {.what = "read order",
                     .text = "SELECT " SK_STORE_ORDER_COLUMNS ORDERS_FROM " WHERE order_id = ?",
                     .flags = SK_SQL_KEEP},
    /* the row lock of a status change: it waits for a racing change (or,
     * on MySQL, the insert of the row) and reads the newest version */
    [Q_ORDER_LOCK] = {.what = "lock order",
                      .text = "SELECT status, activity_id, quantity, user_id, created_ms,"
                              " pay_deadline_ms" ORDERS_FROM " WHERE order_id = ?{FOR_UPDATE}",
                      .flags = SK_SQL_KEEP},
    [Q_ORDER_PAY] = {.what = "update order status",
                     .text = "UPDATE orders SET status = 'paid', paid_ms = ? WHERE order_id = ?",
                     .flags = SK_SQL_KEEP | SK_SQL_DEFER},
    [Q_ORDER_CANCEL] =
        {.what = "update order status",
         .text = "UPDATE orders SET status = 'cancelled', cancelled_ms = ? WHERE order_id = ?",
         .flags = SK_SQL_KEEP | SK_SQL_DEFER},
    /* a cancelled order's units back, capped at the initial stock */
    [Q_STOCK_CREDIT] = {.what = "give back DB stock",
                        .text = "UPDATE activities SET stock = {LEAST}(stock_initial, stock + ?)"
                                " WHERE id = ?",
                        .flags = SK_SQL_KEEP | SK_SQL_DEFER},
    /* matches only a cancelled order not marked yet */
    [Q_ORDER_RELEASED] = {.what = "mark order released",
                          .text = "UPDATE orders SET released_ms = ? WHERE order_id = ?"
                                  " AND status = 'cancelled' AND released_ms IS NULL"},
    [Q_ORDERS_EXPIRED] = {.what = "read orders",
                          .text = "SELECT " SK_STORE_ORDER_COLUMNS ORDERS_FROM
                                  " WHERE status = 'created' AND pay_deadline_ms < ?"
                                  " ORDER BY pay_deadline_ms LIMIT ?"},
    /* (lo, hi, activity, limit): the primary-key range is the plan;
     * activity_id + 0 keeps the planners off orders_activity_status (a
     * sort of the whole activity for every page) */
    [Q_ORDERS_LIST] = {.what = "read orders",
                       .text =
                           "SELECT " SK_STORE_ORDER_COLUMNS ORDERS_FROM
                           "{FORCE_PK} WHERE order_id > ? AND order_id < ? AND activity_id + 0 = ?"
                           " ORDER BY order_id LIMIT ?"},
    /* (after, limit): the WHERE repeats the partial index's condition, so
     * the index is used; MySQL's release_due is NULL but for the orders
     * owing a release, so the range on its index skips every other order */
    [Q_ORDERS_UNRELEASED] = {.what = "read orders",
                             .text = "SELECT " SK_STORE_ORDER_COLUMNS ORDERS_FROM
                                     " WHERE status = 'cancelled' AND released_ms IS NULL"
                                     " AND order_id > ? ORDER BY order_id LIMIT ?",
                             .own = {[SK_MYSQL] =
                                         "SELECT " SK_STORE_ORDER_COLUMNS ORDERS_FROM
                                         " WHERE release_due > ? ORDER BY release_due LIMIT ?"}},
    /* (activity x3): the status rows, then one row of each record */
    [Q_ORDERS_COUNT] =
        {.what = "count orders",
         .text = "SELECT status, count(*), COALESCE(SUM(quantity), 0)" ORDERS_FROM
                 " WHERE activity_id = ? GROUP BY status"
                 " UNION ALL SELECT 'stock_failures', count(*), COALESCE(SUM(quantity), 0)"
                 " FROM stock_failures WHERE activity_id = ?"
                 " UNION ALL SELECT 'conflicts', count(*), 0 FROM order_conflicts"
                 " WHERE activity_id = ?"},
    /* an activity's DB stock, what its orders say it should be, and its
     * initial stock, in one statement (one snapshot) */
    [Q_STOCK_CHECK] =
        {.what = "check DB stock",
         .text = "SELECT a.stock, a.stock_initial - COALESCE((SELECT SUM(o.quantity)"
                 " FROM orders o WHERE o.activity_id = a.id AND o.status <> 'cancelled'), 0),"
                 " a.stock_initial FROM activities a WHERE a.id = ?"},
    [Q_ACTIVITY_LOCK] = {.what = "lock activity",
                         .text = "SELECT stock FROM activities WHERE id = ?{FOR_UPDATE}"},
    [Q_ORDER_RESTORE] = {.what = "restore order",
                         .text =
                             "INSERT INTO orders (order_id, activity_id, user_id, quantity, status,"
                             " created_ms, pay_deadline_ms, stream_id, cancelled_ms, released_ms)"
                             " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"},

    /* ---- the persist batch ---- */
    [Q_PAY_TIMEOUTS] = {.what = "read pay timeouts",
                        .text = "SELECT id, pay_timeout_s FROM activities WHERE id {IN}",
                        .types = "i",
                        .flags = SK_SQL_KEEP},
    [Q_ORDERS_PRESENT] = {.what = "read present orders",
                          .text = "SELECT order_id, activity_id, user_id, quantity" ORDERS_FROM
                                  " WHERE order_id {IN}",
                          .types = "t"},
    /* a plain INSERT: a present id fails it (SK_EEXIST); status is its
     * default, created */
    [Q_ORDERS_INSERT] =
        {.what = "insert orders",
         .text = "INSERT INTO orders (order_id, stream_id, activity_id, user_id, quantity,"
                 " created_ms, pay_deadline_ms, idem_key) {VALUES}",
         .types = "ttiiiiit",
         .flags = SK_SQL_KEEP | SK_SQL_BULK},
    /* (q, activity, q) */
    [Q_TAKE_STOCK] = {.what = "take stock",
                      .text = "UPDATE activities SET stock = stock - ? WHERE id = ? AND stock >= ?",
                      .flags = SK_SQL_KEEP},
    [Q_READ_STOCK] = {.what = "read stock", .text = "SELECT stock FROM activities WHERE id = ?"},
    [Q_STOCK_FAILURE] = {.what = "record stock failure",
                         .text =
                             "INSERT INTO stock_failures (at_ms, activity_id, order_id, quantity,"
                             " db_stock) VALUES (?, ?, ?, ?, ?)",
                         .flags = SK_SQL_DEFER},
    [Q_CONFLICT] =
        {.what = "record order conflict",
         .text = "INSERT INTO order_conflicts (at_ms, activity_id, order_id, user_id, quantity,"
                 " stream_id) VALUES (?, ?, ?, ?, ?, ?)",
         .flags = SK_SQL_DEFER},
    [Q_MARKS_UPSERT] = {.what = "raise marks",
                        .text =
                            "INSERT INTO redis_marks (label, branch, activity_id, adm, updated_ms,"
                            " order_id) {VALUES}{MARK_UPSERT}",
                        .types = "ttiiit",
                        .flags = SK_SQL_KEEP | SK_SQL_DEFER},

    /* ---- the outbox ---- */
    /* (subject, base, type, activity, order or NULL, now, pay_ref or
     * NULL, payload, subject): the subject's next seq (base: the seq
     * before its first row: 1 for an order's later events, whose
     * order.created may be a batch row of another subject). Its order's
     * row (or its activity's) is locked by the change, so no other
     * transaction takes the same seq; the unique (subject, seq) would
     * refuse it anyway. */
    [Q_EVENT_ADD] = {.what = "insert event",
                     .text = "INSERT INTO events (subject, seq, type, activity_id, order_id,"
                             " created_ms, pay_ref, payload) SELECT ?, COALESCE(MAX(seq), ?) + 1,"
                             " ?, ?, ?, ?, ?, ? FROM events WHERE subject = ?",
                     .flags = SK_SQL_DEFER},
    /* (first order, activity, first order, now, batch or NULL): the
     * order.created events of a persist's new orders of one activity,
     * seq 1 each, their payloads the order rows' (read by
     * Q_EVENTS_LIST, Q_EVENT_ORDERS) */
    [Q_EVENTS_CREATED] = {.what = "insert events",
                          .text = "INSERT INTO events (subject, seq, type, activity_id, order_id,"
                                  " created_ms, batch)"
                                  " VALUES (?, 1, 'order.created', ?, ?, ?, ?)",
                          .flags = SK_SQL_KEEP | SK_SQL_DEFER},
    /* (subject, now, payload, subject, activity): only when the persist
     * (which holds the activity's row) left its DB stock at 0 */
    [Q_EVENT_SOLD_OUT] = {.what = "insert event",
                          .text = "INSERT INTO events (subject, seq, type, activity_id, order_id,"
                                  " created_ms, pay_ref, payload)"
                                  " SELECT ?, COALESCE(MAX(e.seq), 0) + 1, 'activity.sold_out',"
                                  " a.id, NULL, ?, NULL, ? FROM activities a"
                                  " LEFT JOIN events e ON e.subject = ?"
                                  " WHERE a.id = ? AND a.stock = 0 GROUP BY a.id",
                          .flags = SK_SQL_DEFER},
    /* (subject, pay_ref or ''): refusals already written */
    [Q_EVENT_REFUSED] = {.what = "read events",
                         .text =
                             "SELECT count(*) FROM events WHERE subject = ?"
                             " AND type = 'order.payment_refused' AND COALESCE(pay_ref, '') = ?"},
    /* (subject, pay_ref): the payment that paid the order had this reference,
     * or none (then another cannot be told from it) */
    [Q_EVENT_PAID_BY] = {.what = "read events",
                         .text = "SELECT count(*) FROM events WHERE subject = ?"
                                 " AND type = 'order.paid' AND (pay_ref IS NULL OR pay_ref = ?)"},
    /* (first row, rows) */
    [Q_EVENTS_LIST] = {.what = "read events",
                       .text = "SELECT " SK_STORE_EVENT_COLUMNS
                               " FROM events e LEFT JOIN orders o ON e.payload IS NULL"
                               " AND e.batch IS NULL AND o.order_id = e.order_id"
                               " WHERE e.id >= ? ORDER BY e.id LIMIT ?"},
    /* (row): a batch row's ids, read only for the row's events listed */
    [Q_EVENT_BATCH] = {.what = "read events", .text = "SELECT batch FROM events WHERE id = ?"},
    /* the orders of a batch row's events */
    [Q_EVENT_ORDERS] =
        {.what = "read events",
         .text = "SELECT order_id, user_id, quantity, created_ms, pay_deadline_ms" ORDERS_FROM
                 " WHERE order_id {IN}",
         .types = "t"},
    /* (subject, type): the subject's latest event of the type (a sale's
     * conditional event: sk_store_event_if) */
    [Q_EVENTS_MAX] = {.what = "read events", .text = "SELECT COALESCE(MAX(id), 0) FROM events"},
    [Q_EVENT_LAST] = {.what = "read events",
                      .text = "SELECT payload, created_ms FROM events WHERE subject = ?"
                              " AND type = ? ORDER BY seq DESC LIMIT 1"},
    [Q_WH_CURSOR_GET] = {.what = "read webhook cursor",
                         .text = "SELECT last_row, epoch FROM webhook_cursors WHERE endpoint = ?"},
    [Q_WH_CURSOR_INIT] = {.what = "insert webhook cursor",
                          .text = "INSERT INTO webhook_cursors (endpoint, last_row, updated_ms)"
                                  " VALUES (?, 0, ?)"},
    /* only forward, and only within the epoch read (a rewind wins) */
    [Q_WH_CURSOR_SET] = {.what = "move webhook cursor",
                         .text = "UPDATE webhook_cursors SET last_row = ?, updated_ms = ?"
                                 " WHERE endpoint = ? AND last_row < ? AND epoch = ?"},
    [Q_WH_CURSOR_DELETE] = {.what = "delete webhook cursor",
                            .text = "DELETE FROM webhook_cursors WHERE endpoint = ?"},
    /* (endpoint, now): a new endpoint starts at the outbox's end */
    [Q_WH_CURSOR_AT_END] = {.what = "insert webhook cursor",
                            .text = "INSERT INTO webhook_cursors (endpoint, last_row, updated_ms,"
                                    " epoch) SELECT ?, COALESCE(MAX(id), 0), ?, 0 FROM events"},
    /* (since): the row before the first event written at or after since
     * (row ids follow insert order, near enough to time for a replay; no
     * index on the time: an operator's rare command) */
    [Q_WH_REPLAY_FROM] = {.what = "read events",
                          .text = "SELECT COALESCE(MIN(id), 0) - 1 FROM events"
                                  " WHERE created_ms >= ?"},
    /* (row, now, endpoint, row): only back */
    [Q_WH_CURSOR_REWIND] = {.what = "rewind webhook cursor",
                            .text = "UPDATE webhook_cursors SET last_row = ?, updated_ms = ?,"
                                    " epoch = epoch + 1 WHERE endpoint = ? AND last_row > ?"},
    /* (from, to): events in (from, to] (a batch row's: its ids) */
    [Q_WH_EVENTS_AFTER] = {.what = "read events",
                           .text = "SELECT COALESCE(SUM(CASE WHEN batch IS NULL THEN 1 ELSE"
                                   " {LEN batch} - {LEN REPLACE(batch, ' ', '')} + 1 END), 0)"
                                   " FROM events WHERE id > ? AND id <= ?"},
    [Q_WHE_INSERT] = {.what = "insert webhook endpoint",
                      .text = "INSERT INTO webhook_endpoints (activity_id, name, url, events,"
                              " secret, secret_prev, prev_until_ms, paused, created_ms,"
                              " updated_ms) VALUES (?, ?, ?, ?, ?, '', 0, ?, ?, ?)"},
    [Q_WHE_COUNT] = {.what = "count webhook endpoints",
                     .text = "SELECT count(*) FROM webhook_endpoints WHERE activity_id = ?"},
    [Q_WHE_LIST] = {.what = "list webhook endpoints",
                    .text = "SELECT " SK_STORE_WEBHOOK_COLUMNS " FROM webhook_endpoints"
                            " WHERE activity_id = ? ORDER BY name"},
    [Q_WHE_LIST_ALL] = {.what = "list webhook endpoints",
                        .text = "SELECT " SK_STORE_WEBHOOK_COLUMNS " FROM webhook_endpoints"
                                " ORDER BY activity_id, name"},
    [Q_WHE_GET] = {.what = "read webhook endpoint",
                   .text = "SELECT " SK_STORE_WEBHOOK_COLUMNS " FROM webhook_endpoints"
                           " WHERE activity_id = ? AND name = ?"},
    [Q_WHE_DELETE] = {.what = "delete webhook endpoint",
                      .text = "DELETE FROM webhook_endpoints WHERE activity_id = ? AND name = ?"},
    [Q_WHE_ROTATE] = {.what = "rotate webhook secret",
                      .text = "UPDATE webhook_endpoints SET secret_prev = secret, secret = ?,"
                              " prev_until_ms = ?, updated_ms = ? WHERE activity_id = ?"
                              " AND name = ?"},
    [Q_WHE_PAUSE] = {.what = "pause webhook endpoint",
                     .text = "UPDATE webhook_endpoints SET paused = ?, updated_ms = ?"
                             " WHERE activity_id = ? AND name = ?"},
    [Q_WH_DEAD] = {.what = "dead-letter webhook",
                   .text = "INSERT INTO webhook_dead (endpoint, event_row, event_sub, at_ms,"
                           " attempts, last_status) VALUES (?, ?, ?, ?, ?, ?)"},
    [Q_ACTIVITY_STATE_LOCK] = {.what = "lock activity",
                               .text = "SELECT state FROM activities WHERE id = ?{FOR_UPDATE}"},
};

const char *sk_sql_what(int q)
{
    return sql[q].what;
}

unsigned sk_sql_flags(int q)
{
    return sql[q].flags;
}

const char *sk_sql_types(int q)
{
    return sql[q].types;
}

/* ---- expansion ---- */

struct out {
    struct sk_text t;
    int d;     /* the dialect */
    int param; /* PostgreSQL: the last $n */
};

static void put(struct out *o, const char *s, size_t n)
{
    sk_text_add(&o->t, s, n);
}

static void puts_(struct out *o, const char *s)
{
    put(o, s, strlen(s));
}

/* One placeholder: '?', or PostgreSQL's next $n with its cast (cast
 * may be ""). */
static void placeholder(struct out *o, const char *cast)
{
    if (o->d != SK_PG) {
        put(o, "?", 1);
        return;
    }
    char n[40];
    snprintf(n, sizeof n, "$%d%s", ++o->param, cast);
    puts_(o, n);
}

/* {VALUES} / {IN} of a row of types for rows rows. */
static void rows_token(struct out *o, int in, const char *types, size_t rows)
{
    size_t nc = strlen(types);
    if (o->d == SK_PG) {
        /* one array per column: unnest for VALUES, ANY for IN */
        puts_(o, in ? "= ANY(" : "SELECT * FROM unnest(");
        for (size_t c = 0; c < nc; c++) {
            if (c) put(o, ", ", 2);
            placeholder(o, types[c] == SK_SQL_TEXT ? "::text[]" : "::bigint[]");
        }
        put(o, ")", 1);
        return;
    }
    puts_(o, in ? "IN (" : "VALUES ");
    for (size_t r = 0; r < rows; r++) {
        if (r) put(o, ", ", 2);
        if (!in) put(o, "(", 1);
        for (size_t c = 0; c < nc; c++) {
            if (c) put(o, ", ", 2);
            placeholder(o, "");
        }
        if (!in) put(o, ")", 1);
    }
    if (in) put(o, ")", 1);
}

/* The word of token name[0..n) (with its argument after a space, if
 * any) into o; 0, or -1 for an unknown token. */
static int token(struct out *o, const char *name, size_t n, const char *types, size_t rows)
{
    const char *sp = memchr(name, ' ', n);
    size_t nl = sp ? (size_t)(sp - name) : n;
    if ((nl == 6 && !memcmp(name, "VALUES", 6)) || (nl == 2 && !memcmp(name, "IN", 2))) {
        if (!types) return -1;
        rows_token(o, nl == 2, types, rows);
        return 0;
    }
    for (size_t i = 0; i < sizeof tokens / sizeof tokens[0]; i++) {
        if (strlen(tokens[i].name) != nl || memcmp(tokens[i].name, name, nl)) continue;
        const char *w = tokens[i].word[o->d], *pc = strstr(w, "%s");
        if (!pc) {
            puts_(o, w);
            return 0;
        }
        put(o, w, (size_t)(pc - w));
        if (sp) put(o, sp + 1, n - nl - 1);
        puts_(o, pc + 2);
        return 0;
    }
    return -1;
}

/* text expanded for dialect d (types, rows: a multi-row statement's);
 * new memory, NULL when out of memory or (*bad 1) for an unknown token. */
static char *expand(const char *text, int d, const char *types, size_t rows, int *bad)
{
    *bad = 0;
    struct out o = {.d = d};
    put(&o, "", 0);
    for (const char *p = text; *p && !o.t.oom;) {
        size_t run = strcspn(p, "{?");
        put(&o, p, run);
        p += run;
        if (*p == '?') {
            placeholder(&o, "");
            p++;
        } else if (*p == '{') {
            const char *end = strchr(p, '}');
            if (!end || token(&o, p + 1, (size_t)(end - p - 1), types, rows) < 0) {
                free(o.t.p);
                *bad = 1; /* a mistake in the tables: every statement is run by the tests */
                return NULL;
            }
            p = end + 1;
        }
    }
    if (o.t.oom) {
        free(o.t.p);
        return NULL;
    }
    return o.t.p;
}

/* text expanded for st's dialect; NULL with the failure on st (what
 * names the statement). */
static char *expand_st(sk_store *st, const char *text, const char *types, size_t rows,
                       const char *what)
{
    int bad;
    char *s = expand(text, st->drv->dialect, types, rows, &bad);
    if (!s)
        sk_store_set_err(st, bad ? SK_EINVAL : SK_ENOMEM, "%s %s: %s",
                         bad ? "bad SQL" : "out of memory preparing", st->drv->name, what);
    return s;
}

char *sk_sql_text(sk_store *st, int q, size_t rows, int *none)
{
    *none = 0;
    int d = st->drv->dialect;
    const char *text = sql[q].own[d] ? sql[q].own[d] : sql[q].text;
    if (!text || !*text) {
        *none = 1;
        return NULL;
    }
    return expand_st(st, text, sql[q].types, rows ? rows : 1, sql[q].what);
}

char *sk_sql_script(sk_store *st, const char *text, const char *what)
{
    return expand_st(st, text, NULL, 1, what);
}
