/* store_schema.c - the schema of every store: one list of migrations, with
 * the dialect tokens of store_sql.c, and the algorithm that applies them
 * at open (store_int.h).
 *
 * A migration is a list of steps. A step that adds a column or an index
 * names it, and is skipped when the database has it already: MySQL's DDL
 * commits statement by statement, so a migration cut short after a step
 * committed (the client's read timeout while the server went on, a lost
 * connection before the version row, the statement bound ending a later
 * step that waited on a lock) is finished by the next open instead of
 * failing on "duplicate column"; a step without a name can run again as
 * it is (CREATE TABLE IF NOT EXISTS). On SQLite and PostgreSQL a
 * migration's steps and its version row commit together anyway.
 *
 * Applying: the version is read first; when it is behind, each migration
 * runs in a transaction of its own that takes the migration lock (SQLite:
 * BEGIN IMMEDIATE; PostgreSQL: an advisory transaction lock; MySQL: a
 * named lock per database), reads the version again (another opener may
 * have applied it meanwhile), applies the steps and records the version
 * (SQLite: PRAGMA user_version; the servers: a row of schema_migrations
 * per migration). So concurrent openers apply each migration once. A
 * schema newer than this binary is refused.
 *
 * The list is append only: a released migration never changes (the CHECKs
 * repeat the C validation, so a bug or a hand edit cannot store what the
 * engine would refuse). The next migration goes at the end of steps[]. */
#include "store/store_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"

struct step {
    int version;
    const char *table;
    const char *column, *index;    /* what the step adds: done when present */
    const char *sql;               /* every dialect's, tokens of store_sql.c */
    const char *own[SK_NDIALECTS]; /* a dialect's own instead; "": nothing to do */
};

/* the fields every step has (designated: .own may follow) */
#define STEP(v, t, col, idx, text)                                                                 \
    .version = v, .table = t, .column = col, .index = idx, .sql = text
/* a step that adds column col of table t (decl: its type and checks) */
#define ADD_COLUMN(v, t, col, decl)                                                                \
    STEP(v, t, col, NULL, "ALTER TABLE " t " ADD COLUMN " col " " decl)

static const struct step steps[] = {
    /* 1: activity definitions. */
    {STEP(1, "activities", NULL, NULL,
          "CREATE TABLE IF NOT EXISTS activities ("
          " id {INT} PRIMARY KEY CHECK (id >= 1),"
          " name {VARCHAR 127} NOT NULL CHECK ({LEN name} BETWEEN 1 AND 127),"
          " stock_initial {INT} NOT NULL CHECK (stock_initial >= 1),"
          " stock {INT} NOT NULL,"
          " per_user_limit {INT} NOT NULL CHECK (per_user_limit >= 1),"
          " max_per_order {INT} NOT NULL CHECK (max_per_order >= 1),"
          " start_ms {INT} NOT NULL CHECK (start_ms >= 0),"
          " end_ms {INT} NOT NULL,"
          " pay_timeout_s {INT} NOT NULL CHECK (pay_timeout_s >= 1),"
          " state {VARCHAR 16} NOT NULL DEFAULT 'created'"
          "  CHECK (state IN ('created', 'preheated', 'open', 'closed')),"
          " created_ms {INT} NOT NULL,"
          " CONSTRAINT activities_stock CHECK (stock >= 0 AND stock <= stock_initial),"
          " CONSTRAINT activities_window CHECK (end_ms > start_ms)"
          "{END}")},
    /* 2: orders. order_id is "<activity>-<stream id>": the primary key
     * makes persisting a re-delivered stream entry a no-op. No foreign key
     * to activities: an order Redis admitted is kept even if its activity
     * row is gone (reconcile reports it). paid_ms / cancelled_ms are NULL
     * until then. stock_failures records each failed conditional DB stock
     * update (never silently ignored); audit records reconcile repairs. */
    {STEP(2, "orders", NULL, NULL,
          "CREATE TABLE IF NOT EXISTS orders ("
          " order_id {BYTES 63} PRIMARY KEY CHECK ({LEN order_id} BETWEEN 1 AND 63),"
          " activity_id {INT} NOT NULL CHECK (activity_id >= 1),"
          " user_id {INT} NOT NULL,"
          " quantity {INT} NOT NULL CHECK (quantity >= 1),"
          " status {VARCHAR 16} NOT NULL DEFAULT 'created'"
          "  CHECK (status IN ('created', 'paid', 'cancelled')),"
          " created_ms {INT} NOT NULL,"
          " pay_deadline_ms {INT} NOT NULL,"
          " paid_ms {INT},"
          " cancelled_ms {INT},"
          " stream_id {BYTES 47} NOT NULL"
          "{END_KEYED}")},
    {STEP(2, "orders", NULL, "orders_status_deadline",
          "CREATE INDEX orders_status_deadline ON orders (status, pay_deadline_ms)")},
    {STEP(2, "orders", NULL, "orders_activity_status",
          "CREATE INDEX orders_activity_status ON orders (activity_id, status)")},
    {STEP(2, "stock_failures", NULL, NULL,
          "CREATE TABLE IF NOT EXISTS stock_failures ("
          " id {ROWID},"
          " at_ms {INT} NOT NULL,"
          " activity_id {INT} NOT NULL,"
          " order_id {BYTES 63} NOT NULL,"
          " quantity {INT} NOT NULL,"
          " db_stock {INT}" /* the DB stock seen at the failure; NULL: no activity row */
          "{END}")},
    {STEP(2, "stock_failures", NULL, "stock_failures_activity",
          "CREATE INDEX stock_failures_activity ON stock_failures (activity_id)")},
    {STEP(2, "audit", NULL, NULL,
          "CREATE TABLE IF NOT EXISTS audit ("
          " id {ROWID}{AUTOINC},"
          " at_ms {INT} NOT NULL,"
          " activity_id {INT} NOT NULL,"
          " kind {VARCHAR 63} NOT NULL,"
          " detail TEXT NOT NULL"
          "{END}")},
    {STEP(2, "audit", NULL, "audit_activity",
          "CREATE INDEX audit_activity ON audit (activity_id, id)")},
    /* 3: released_ms (store.h, sweeper.h): set once the Redis release of a
     * cancelled order is known to be done. A cancelled order with NULL owes
     * its release (the process died between the DB cancel and the release,
     * or Redis was unreachable then). The partial index holds exactly those
     * orders, so the sweeper finds them without scanning every cancelled
     * order; MySQL has no partial index: release_due is the order id of an
     * order owing its release, else NULL, and its index plays the part.
     * Orders cancelled before this migration start unmarked: the sweeper's
     * next pass runs their release (once per order in Redis, so an earlier
     * one answers "already released") and marks them. */
    {STEP(3, "orders", "released_ms", NULL, "ALTER TABLE orders ADD COLUMN released_ms {INT}"),
     .own = {[SK_MYSQL] =
                 "ALTER TABLE orders ADD COLUMN released_ms BIGINT NULL,"
                 " ADD COLUMN release_due VARBINARY(63) AS"
                 "  (CASE WHEN status = 'cancelled' AND released_ms IS NULL THEN order_id END)"
                 " VIRTUAL,"
                 " ADD INDEX orders_unreleased (release_due)"}},
    {STEP(3, "orders", NULL, "orders_unreleased",
          "CREATE INDEX orders_unreleased ON orders (order_id)"
          " WHERE status = 'cancelled' AND released_ms IS NULL"),
     .own = {[SK_MYSQL] = ""}},
    /* 4: the activity's own per-user rate limit (docs/rate-limit.md);
     * 0 = none, the global one applies. Existing rows get 0. */
    {ADD_COLUMN(4, "activities", "rl_per_user_per_s",
                "{INT} NOT NULL DEFAULT 0 CHECK (rl_per_user_per_s >= 0)")},
    {ADD_COLUMN(4, "activities", "rl_burst", "{INT} NOT NULL DEFAULT 0 CHECK (rl_burst >= 0)")},
    /* 5: stock segments (docs/segments.md): the stock is split over this
     * many Redis hash tags; 1 = not segmented. Existing rows get 1. The
     * upper bound (256) and segments <= stock are the C validation's. */
    {ADD_COLUMN(5, "activities", "segments", "INTEGER NOT NULL DEFAULT 1 CHECK (segments >= 1)")},
    /* 6: the rollback guard's watermark (docs/recovery.md): per key set
     * label ("<id>" or "<id>.<segment>"), the highest admission number of
     * a persisted order and that order's id, raised in the persist
     * transaction. A Redis whose admission count is below it, or whose
     * ledger lacks that order, has lost writes the database holds. */
    {STEP(6, "redis_marks", NULL, NULL,
          "CREATE TABLE IF NOT EXISTS redis_marks ("
          " label {BYTES 31} PRIMARY KEY CHECK ({LEN label} BETWEEN 1 AND 31),"
          " activity_id {INT} NOT NULL CHECK (activity_id >= 1),"
          " adm {INT} NOT NULL CHECK (adm >= 0),"
          " updated_ms {INT} NOT NULL,"
          " order_id {BYTES 63} NOT NULL"
          "{END_KEYED}")},
    {STEP(6, "redis_marks", NULL, "redis_marks_activity",
          "CREATE INDEX redis_marks_activity ON redis_marks (activity_id)")},
    /* 7: the waiting room (docs/waiting-room.md): passes per second (0 =
     * none), a pass's lifetime, the draw's secret seed (hex, '' = none).
     * Existing rows get no waiting room. */
    {ADD_COLUMN(7, "activities", "wr_passes_per_s",
                "{INT} NOT NULL DEFAULT 0 CHECK (wr_passes_per_s >= 0)")},
    {ADD_COLUMN(7, "activities", "wr_pass_ttl_s",
                "{INT} NOT NULL DEFAULT 0 CHECK (wr_pass_ttl_s >= 0)")},
    {ADD_COLUMN(7, "activities", "wr_seed",
                "{VARCHAR 255} NOT NULL DEFAULT '' CHECK ({LEN wr_seed} <= 64)")},
    /* 8: histories that diverge (docs/failover.md, docs/recovery.md).
     * The purchase's Idempotency-Key (NULL: none), so a recovery puts its
     * record back with the order. The marks per label and branch (the
     * order id's suffix, '' for ids without one: every mark so far): two
     * masters of one split number their admissions alike, so one mark per
     * label could not tell their histories apart (SQLite cannot change a
     * primary key: the table is copied; MySQL: one ALTER, so the new
     * column and the new key commit together). order_conflicts: an
     * admission whose order id the database already holds for another
     * activity, user or quantity (kept for the operator, never inserted,
     * never silently dropped). */
    {ADD_COLUMN(8, "orders", "idem_key",
                "{BYTES 64} CHECK (idem_key IS NULL OR {LEN idem_key} BETWEEN 1 AND 64)")},
    {STEP(8, "redis_marks", "branch", NULL, ""),
     .own = {[SK_SQLITE] = "CREATE TABLE redis_marks_b ("
                           " label TEXT NOT NULL CHECK (length(label) BETWEEN 1 AND 31),"
                           " branch TEXT NOT NULL DEFAULT '' CHECK (length(branch) <= 15),"
                           " activity_id INTEGER NOT NULL CHECK (activity_id >= 1),"
                           " adm INTEGER NOT NULL CHECK (adm >= 0),"
                           " updated_ms INTEGER NOT NULL,"
                           " order_id TEXT NOT NULL,"
                           " PRIMARY KEY (label, branch)"
                           ") WITHOUT ROWID;"
                           "INSERT INTO redis_marks_b (label, branch, activity_id, adm, updated_ms,"
                           " order_id) SELECT label, '', activity_id, adm, updated_ms, order_id"
                           " FROM redis_marks;"
                           "DROP TABLE redis_marks;"
                           "ALTER TABLE redis_marks_b RENAME TO redis_marks;"
                           "CREATE INDEX redis_marks_activity ON redis_marks (activity_id);",
             [SK_PG] =
                 "ALTER TABLE redis_marks ADD COLUMN branch TEXT COLLATE \"C\" NOT NULL DEFAULT ''"
                 " CHECK (octet_length(branch) <= 15);"
                 "ALTER TABLE redis_marks DROP CONSTRAINT redis_marks_pkey;"
                 "ALTER TABLE redis_marks ADD PRIMARY KEY (label, branch);",
             [SK_MYSQL] = "ALTER TABLE redis_marks"
                          " ADD COLUMN branch VARBINARY(15) NOT NULL DEFAULT '' AFTER label,"
                          " DROP PRIMARY KEY, ADD PRIMARY KEY (label, branch)"}},
    {STEP(8, "order_conflicts", NULL, NULL,
          "CREATE TABLE IF NOT EXISTS order_conflicts ("
          " id {ROWID},"
          " at_ms {INT} NOT NULL,"
          " activity_id {INT} NOT NULL,"
          " order_id {BYTES 63} NOT NULL,"
          " user_id {INT} NOT NULL,"
          " quantity {INT} NOT NULL,"
          " stream_id {BYTES 47} NOT NULL"
          "{END}")},
    {STEP(8, "order_conflicts", NULL, "order_conflicts_activity",
          "CREATE INDEX order_conflicts_activity ON order_conflicts (activity_id)")},
    /* 9: the store's identity (store.h, sk_store_identity): 16 random hex
     * digits drawn once, here, for this database. Preheat stamps it into
     * an activity's Redis meta; an admission, the order worker and the
     * sweeper of a node whose store has another identity refuse that
     * activity (docs/design.md, "The store's identity"): a sale preheated
     * from one database is never sold into a stream another one's worker
     * does not read. One row, ever: both steps may run again (MySQL, a
     * crash before the version row), the row is drawn once. */
    {STEP(9, "store_identity", NULL, NULL,
          "CREATE TABLE IF NOT EXISTS store_identity ("
          " one {INT} NOT NULL PRIMARY KEY CHECK (one = 1),"
          " store_id {BYTES 16} NOT NULL CHECK ({LEN store_id} = 16),"
          " created_ms {INT} NOT NULL"
          "{END}")},
    {STEP(9, "store_identity", NULL, NULL, ""),
     .own = {[SK_SQLITE] = "INSERT OR IGNORE INTO store_identity (one, store_id, created_ms)"
                           " VALUES (1, lower(hex(randomblob(8))),"
                           " CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER))",
             [SK_PG] = "INSERT INTO store_identity (one, store_id, created_ms) VALUES (1,"
                       " substr(md5(gen_random_uuid()::text), 1, 16),"
                       " (extract(epoch from clock_timestamp()) * 1000)::bigint)"
                       " ON CONFLICT (one) DO NOTHING",
             [SK_MYSQL] = "INSERT IGNORE INTO store_identity (one, store_id, created_ms) VALUES (1,"
                          " LOWER(HEX(RANDOM_BYTES(8))), ROUND(UNIX_TIMESTAMP(NOW(3)) * 1000))"}},
    /* 10: the challenge of the queue join or the purchase (docs/challenges.md):
     * proof-of-work bits (0 = none) rising from min to max with the load
     * (a step per bit, 0 = fixed), and a CAPTCHA provider ('' = none).
     * Existing rows get no challenge. */
    {ADD_COLUMN(10, "activities", "ch_pow_min",
                "{INT} NOT NULL DEFAULT 0 CHECK (ch_pow_min >= 0)")},
    {ADD_COLUMN(10, "activities", "ch_pow_max",
                "{INT} NOT NULL DEFAULT 0 CHECK (ch_pow_max >= 0)")},
    {ADD_COLUMN(10, "activities", "ch_pow_step",
                "{INT} NOT NULL DEFAULT 0 CHECK (ch_pow_step >= 0)")},
    {ADD_COLUMN(10, "activities", "ch_captcha",
                "{VARCHAR 16} NOT NULL DEFAULT '' CHECK ({LEN ch_captcha} <= 15)")},
    /* 11: pre-registration, the draw and the waiting room's emergency
     * controls (docs/fairness.md, docs/waiting-room.md): the controls
     * (SK_WR_* bits), the registration window (0 0 = none), a draw
     * winner's box (0 = no draw), the draw's seed (secret until drawn_ms),
     * the draw as made (when, how many, the wave so far). registrations:
     * who registered, and their place in the draw (NULL before it); user
     * ids as the int64 of the same bits, like orders. */
    {ADD_COLUMN(11, "activities", "wr_control",
                "{INT} NOT NULL DEFAULT 0 CHECK (wr_control BETWEEN 0 AND 7)")},
    {ADD_COLUMN(11, "activities", "reg_start_ms",
                "{INT} NOT NULL DEFAULT 0 CHECK (reg_start_ms >= 0)")},
    {ADD_COLUMN(11, "activities", "reg_end_ms",
                "{INT} NOT NULL DEFAULT 0 CHECK (reg_end_ms >= 0)")},
    {ADD_COLUMN(11, "activities", "draw_box_s",
                "{INT} NOT NULL DEFAULT 0 CHECK (draw_box_s >= 0)")},
    {ADD_COLUMN(11, "activities", "draw_seed",
                "{VARCHAR 64} NOT NULL DEFAULT '' CHECK ({LEN draw_seed} IN (0, 64))")},
    {ADD_COLUMN(11, "activities", "drawn_ms", "{INT} NOT NULL DEFAULT 0 CHECK (drawn_ms >= 0)")},
    {ADD_COLUMN(11, "activities", "draw_n", "{INT} NOT NULL DEFAULT 0 CHECK (draw_n >= 0)")},
    {ADD_COLUMN(11, "activities", "draw_state",
                "{VARCHAR 95} NOT NULL DEFAULT '' CHECK ({LEN draw_state} < 96)")},
    {STEP(11, "registrations", NULL, NULL,
          "CREATE TABLE IF NOT EXISTS registrations ("
          " activity_id {INT} NOT NULL CHECK (activity_id >= 1),"
          " user_id {INT} NOT NULL,"
          " created_ms {INT} NOT NULL,"
          " draw_rank {INT} CHECK (draw_rank IS NULL OR draw_rank >= 1),"
          " PRIMARY KEY (activity_id, user_id)"
          "{END_KEYED}")},
    /* 12: the outbox (store.h, docs/integration.md): every change of an
     * order or a sale writes its event in the change's transaction.
     * (subject, seq) is the event's stable id: the order id or
     * "activity-<id>", and the subject's count of events. pay_ref: the
     * payment reference a refusal answers (one refusal per reference).
     * An order.created has no payload of its own: what it would say is the
     * order row's, which never changes (a persist writes 6 numbers and ids
     * per order here, not a JSON text). */
    {STEP(12, "events", NULL, NULL,
          "CREATE TABLE IF NOT EXISTS events ("
          " id {ROWID}{AUTOINC},"
          " subject {BYTES 63} NOT NULL CHECK ({LEN subject} BETWEEN 1 AND 63),"
          " seq {INT} NOT NULL CHECK (seq >= 1),"
          " type {VARCHAR 31} NOT NULL,"
          " activity_id {INT} NOT NULL,"
          " order_id {BYTES 63},"
          " created_ms {INT} NOT NULL,"
          " pay_ref {VARCHAR 127},"
          " payload {VARCHAR 1023}" /* NULL: an order.created, rendered from its order */
          "{END}")},
    {STEP(12, "events", NULL, "events_subject_seq",
          "CREATE UNIQUE INDEX events_subject_seq ON events (subject, seq)")},
    /* the webhook dispatcher's state: per endpoint the row id up to which
     * every event was delivered (or dead-lettered), and the dead letters */
    {STEP(12, "webhook_cursors", NULL, NULL,
          "CREATE TABLE IF NOT EXISTS webhook_cursors ("
          " endpoint {BYTES 63} PRIMARY KEY,"
          " last_row {INT} NOT NULL,"
          " updated_ms {INT} NOT NULL"
          "{END_KEYED}")},
    {STEP(12, "webhook_dead", NULL, NULL,
          "CREATE TABLE IF NOT EXISTS webhook_dead ("
          " id {ROWID},"
          " endpoint {BYTES 63} NOT NULL,"
          " event_row {INT} NOT NULL,"
          " at_ms {INT} NOT NULL,"
          " attempts {INT} NOT NULL,"
          " last_status {INT} NOT NULL"
          "{END}")},
    /* 13: webhook endpoints per activity (docs/integration.md), added by
     * the admin API beside the node's configured one. Its cursor's key is
     * "<activity>/<name>" (a configured name holds no '/'). The secret
     * stays here in clear: the dispatcher signs with it (HMAC needs the
     * key itself); the API never shows it after it answered its create or
     * rotate. secret_prev signs too until prev_until_ms (a rotation). A
     * cursor's epoch counts its rewinds (a replay): the dispatcher moves a
     * cursor only within the epoch it read, so a delivery in flight
     * cannot undo a rewind. */
    {STEP(13, "webhook_endpoints", NULL, NULL,
          "CREATE TABLE IF NOT EXISTS webhook_endpoints ("
          " id {ROWID}{AUTOINC},"
          " activity_id {INT} NOT NULL CHECK (activity_id >= 1),"
          " name {VARCHAR 32} NOT NULL CHECK ({LEN name} BETWEEN 1 AND 32),"
          " url {VARCHAR 511} NOT NULL CHECK ({LEN url} BETWEEN 8 AND 511),"
          " events {VARCHAR 255} NOT NULL DEFAULT '',"
          " secret {VARCHAR 99} NOT NULL,"
          " secret_prev {VARCHAR 99} NOT NULL DEFAULT '',"
          " prev_until_ms {INT} NOT NULL DEFAULT 0,"
          " paused {INT} NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),"
          " created_ms {INT} NOT NULL,"
          " updated_ms {INT} NOT NULL"
          "{END}")},
    {STEP(13, "webhook_endpoints", NULL, "webhook_endpoints_name",
          "CREATE UNIQUE INDEX webhook_endpoints_name ON webhook_endpoints (activity_id, name)")},
    {ADD_COLUMN(13, "webhook_cursors", "epoch", "{INT} NOT NULL DEFAULT 0")},
    /* 14: a persist's order.created events as one row per batch and
     * activity: a row per order (its unique index entry, its id) nearly
     * doubled InnoDB's work per order. batch: the ids of the row's orders
     * (up to SK_STORE_BATCH_ROW_MAX, in id order, separated by one space;
     * the first is its subject and order_id); NULL: a row of one event. A
     * dead letter names its event within a batch row by event_sub. */
    {ADD_COLUMN(14, "events", "batch",
                "{BYTES 8191} CHECK (batch IS NULL OR {LEN batch} BETWEEN 1 AND 8191)")},
    {ADD_COLUMN(14, "webhook_dead", "event_sub", "{INT} NOT NULL DEFAULT 0")},
};
#define N_STEPS (sizeof steps / sizeof steps[0])
#define N_MIGRATIONS (steps[N_STEPS - 1].version)

int sk_store_read_version(sk_store *st, int *v)
{
    int64_t x = 0;
    int rc = sk_q_one(st, Q_VERSION, NULL, 0, sk_store_read_i64, &x);
    if (rc == 0) rc = sk_store_fail(st, SK_EDB, sk_sql_what(Q_VERSION), "no schema version");
    if (rc < 0) return rc;
    *v = (int)x;
    return 0;
}

/* Step s done already (its column or index is there)? 1, 0, or a code. */
static int step_done(sk_store *st, const struct step *s)
{
    if (!s->column && !s->index) return 0;
    int64_t n = 0;
    int rc = sk_q_one(st, s->column ? Q_HAS_COLUMN : Q_HAS_INDEX,
                      SK_ARGS(SK_T(s->table), SK_T(s->column ? s->column : s->index)),
                      sk_store_read_i64, &n);
    return rc < 0 ? rc : n > 0;
}

/* Runs step s unless it is done already. */
static int apply_step(sk_store *st, const struct step *s)
{
    const char *text = s->own[st->drv->dialect] ? s->own[st->drv->dialect] : s->sql;
    if (!*text) return 0;
    int rc = step_done(st, s);
    if (rc) return rc < 0 ? rc : 0;
    char *script = sk_sql_script(st, text, "migration");
    if (!script) return SK_ENOMEM;
    rc = st->drv->exec(st, script, "migration");
    free(script);
    return rc;
}

/* Migration v's steps and its version record (the lock held). */
static int apply(sk_store *st, int v)
{
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < N_STEPS; i++)
        if (steps[i].version == v) rc = apply_step(st, &steps[i]);
    if (rc) return rc;
    int none;
    char *fmt = sk_sql_text(st, Q_VERSION_SET, 1, &none), rec[200];
    if (!fmt) return SK_ENOMEM;
    snprintf(rec, sizeof rec, fmt, v, (long long)sk_wall_ms()); /* SQLite's takes only v */
    free(fmt);
    return st->drv->exec(st, rec, sk_sql_what(Q_VERSION_SET));
}

static int newer(sk_store *st, int v)
{
    return sk_store_fail(st, SK_EDB, "open",
                         "schema version %d is newer than this binary (%d); upgrade seckill", v,
                         N_MIGRATIONS);
}

/* One pass under the lock: the version read again, the next migration
 * applied. *v the version after. */
static int locked_pass(sk_store *st, int *v)
{
    int64_t got = 1;
    int rc = sk_q_one(st, Q_MIGRATE_LOCK, SK_ARGS(SK_I(st->timeout_s > 1 ? st->timeout_s - 1 : 1)),
                      sk_store_read_i64, &got);
    if (rc >= 0 && got != 1)
        return sk_store_fail(st, SK_ETIMEDOUT, sk_sql_what(Q_MIGRATE_LOCK),
                             "another process holds the migration lock");
    if (rc < 0 || (rc = sk_q_run(st, Q_VERSION_TABLE, NULL, 0, NULL)) != 0 ||
        (rc = sk_store_read_version(st, v)) != 0)
        return rc;
    if (*v > N_MIGRATIONS) return newer(st, *v);
    if (*v == N_MIGRATIONS) return 0;
    rc = apply(st, *v + 1);
    if (rc) {
        char why[sizeof st->errstr];
        snprintf(why, sizeof why, "%.400s", st->errstr);
        return sk_store_set_err(st, rc == SK_ENOMEM ? rc : SK_EDB,
                                "%s (schema migration %d failed)", why, *v + 1);
    }
    ++*v;
    return 0;
}

int sk_store_migrate(sk_store *st)
{
    /* up to date (the usual open): no lock taken; a database without
     * its version table yet reads as behind */
    int v = -1;
    if (sk_store_read_version(st, &v) == 0 && v >= N_MIGRATIONS)
        return v > N_MIGRATIONS ? newer(st, v) : 0;
    st->errstr[0] = 0;
    for (;;) {
        int rc = sk_tx_begin(st);
        if (rc == 0) rc = locked_pass(st, &v);
        rc = sk_tx_end(st, rc);
        /* the lock of a server that keeps it past the transaction */
        char keep[sizeof st->errstr];
        memcpy(keep, st->errstr, sizeof keep);
        sk_q_run(st, Q_MIGRATE_UNLOCK, NULL, 0, NULL);
        memcpy(st->errstr, keep, sizeof keep);
        if (rc) return rc == SK_ENOMEM || rc == SK_ETIMEDOUT ? rc : SK_EDB;
        if (v >= N_MIGRATIONS) return 0;
    }
}
