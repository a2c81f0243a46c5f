/* store_pg.c - the PostgreSQL backend of store.h (libpq), the production
 * store. Same tables, constraints and semantics as store_sqlite.c.
 *
 * Connection: the URL goes through PQconninfoParse, then PQconnectdbParams
 * with defaults for what the URL leaves out: connect_timeout 5 s, TCP
 * keepalives (idle 5 s, 2 s x 3 probes), tcp_user_timeout, and a server
 * statement_timeout just under the client bound. connect_timeout (T s)
 * bounds everything: connecting, and every statement's wait for an answer
 * (client side, T s: a stopped or frozen server never answers, so only the
 * client can give up). After a lost connection, a timeout, or a server
 * restart, the next call resets the connection (PQreset, bounded by T);
 * a call never reconnects in the middle of a transaction.
 *
 * Statements are sent with PQsendQueryParams (text parameters, one
 * statement) or PQsendQuery (several statements, migrations), the socket in
 * non-blocking mode, and the answer awaited with poll() against a deadline.
 * The two reads the HTTP processes make most (an order, an activity) are
 * prepared once per session instead: the server parses and plans them
 * once (measured: half of PostgreSQL's CPU per order poll).
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
#include "core/vec.h"

#define CONNECT_TIMEOUT_DEFAULT_S 5
#define CONNECT_TIMEOUT_MIN_S 2 /* libpq raises smaller values to 2 */
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

/* ---- errors ---------------------------------------------------------- */

/* libpq messages end with a newline and may span lines: keep the first. */
static void first_line(char *dst, size_t cap, const char *msg)
{
    if (!msg) msg = "";
    size_t n = strcspn(msg, "\n");
    snprintf(dst, cap, "%.*s", (int)n, msg);
}

/* SQLSTATE -> SK code. Unique violation is EEXIST; the other integrity and
 * data errors are the caller's (EINVAL, like SQLite's CHECK); waits cut
 * short (statement/lock timeout, deadlock, serialization) are ETIMEDOUT:
 * worth a retry; the rest, and no SQLSTATE (connection lost), EDB. */
static int code_of(const char *state)
{
    if (!state) return SK_EDB;
    if (!strcmp(state, "23505")) return SK_EEXIST;
    if (!strncmp(state, "23", 2) || !strncmp(state, "22", 2)) return SK_EINVAL;
    if (!strcmp(state, "57014") || !strcmp(state, "55P03") || !strcmp(state, "40P01") ||
        !strcmp(state, "40001"))
        return SK_ETIMEDOUT;
    return SK_EDB;
}

/* A failed result -> SK code, with the server's message. */
static int res_err(sk_store *st, PGresult *r, const char *what)
{
    const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    char line[320];
    first_line(line, sizeof line, msg ? msg : PQerrorMessage(st->pg));
    if (PQstatus(st->pg) != CONNECTION_OK) st->pg_broken = 1;
    return sk_store_set_err(st, code_of(state), "postgres %s: %s: %s", st->pg_where, what, line);
}

/* The connection failed under us: the next call resets it. */
static int conn_err(sk_store *st, const char *what)
{
    char line[320];
    first_line(line, sizeof line, PQerrorMessage(st->pg));
    st->pg_broken = 1;
    return sk_store_set_err(st, SK_EDB, "postgres %s: %s: %s", st->pg_where, what,
                            line[0] ? line : "connection lost");
}

/* ---- connection ------------------------------------------------------ */

/* Server notices (e.g. "relation already exists, skipping") are not errors
 * and must not reach the operator's terminal from inside a library. */
static void ignore_notice(void *arg, const char *msg)
{
    (void)arg;
    (void)msg;
}

static void describe(sk_store *st)
{
    const char *h = PQhost(st->pg), *p = PQport(st->pg), *d = PQdb(st->pg);
    snprintf(st->pg_where, sizeof st->pg_where, "%.80s:%.8s/%.63s", h && *h ? h : "?",
             p && *p ? p : "5432", d && *d ? d : "?");
}

/* Polls the socket for ev until deadline: 1 ready, 0 timed out, -1 error. */
static int wait_fd(sk_store *st, short ev, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - sk_mono_ms();
        if (left <= 0) return 0;
        struct pollfd p = {.fd = PQsocket(st->pg), .events = ev};
        if (p.fd < 0) return -1;
        int n = poll(&p, 1, (int)(left > 1000000 ? 1000000 : left));
        if (n > 0) return 1;
        if (n < 0 && errno != EINTR) return -1;
    }
}

/* Statements prepared once per session (the hot reads of the HTTP
 * processes: an order poll, an activity read): the server parses and
 * plans them once instead of on every call. */
enum { PGQ_ORDER_GET, PGQ_ACTIVITY_GET, PGQ_COUNT };
static const char *const pgq_name[PGQ_COUNT] = {"sk_order_get", "sk_activity_get"};
static const char *const pgq_sql[PGQ_COUNT] = {
    [PGQ_ORDER_GET] = "SELECT " SK_STORE_ORDER_COLUMNS " FROM orders WHERE order_id = $1",
    [PGQ_ACTIVITY_GET] = "SELECT " SK_STORE_ACTIVITY_COLUMNS " FROM activities WHERE id = $1",
};

static int await_result(sk_store *st, PGresult **out, const char *what);

/* Runs one command string and returns its last result (caller PQclears it;
 * out may be NULL). nparams == 0 sends it by the simple protocol, so it may
 * hold several statements; otherwise one statement with text parameters.
 * The whole exchange is bounded by pg_timeout_ms: a server that does not
 * answer (stopped, frozen, unreachable) leaves the connection marked broken
 * and the call failing with SK_EDB. */
static int run(sk_store *st, PGresult **out, const char *what, const char *sql, int nparams,
               const char *const *params)
{
    if (out) *out = NULL;
    PGconn *c = st->pg;
    if (st->pg_broken)
        return sk_store_set_err(st, SK_EDB, "postgres %s: %s: connection lost", st->pg_where, what);
    int sent = nparams ? PQsendQueryParams(c, sql, nparams, NULL, params, NULL, NULL, 0)
                       : PQsendQuery(c, sql);
    if (!sent) return conn_err(st, what);
    return await_result(st, out, what);
}

/* Runs prepared statement q (one text parameter set), preparing it on
 * this session first when needed; as run otherwise. */
static int run_prepared(sk_store *st, PGresult **out, const char *what, int q, int nparams,
                        const char *const *params)
{
    if (out) *out = NULL;
    if (st->pg_broken)
        return sk_store_set_err(st, SK_EDB, "postgres %s: %s: connection lost", st->pg_where, what);
    if (!(st->pg_prepared & (1u << q))) {
        if (!PQsendPrepare(st->pg, pgq_name[q], pgq_sql[q], nparams, NULL))
            return conn_err(st, what);
        int rc = await_result(st, NULL, what);
        if (rc) return rc;
        st->pg_prepared |= 1u << q;
    }
    if (!PQsendQueryPrepared(st->pg, pgq_name[q], nparams, params, NULL, NULL, 0))
        return conn_err(st, what);
    int rc = await_result(st, out, what);
    /* A failed read by key is the session's trouble (a timeout, or a plan
     * the schema changed under): start the next call on a fresh one. */
    if (rc) st->pg_broken = 1;
    return rc;
}

/* The rest of run: flushes what was sent and collects the results. */
static int await_result(sk_store *st, PGresult **out, const char *what)
{
    PGconn *c = st->pg;
    int64_t deadline = sk_mono_ms() + st->pg_timeout_ms;
    int f;
    while ((f = PQflush(c)) == 1) {
        int w = wait_fd(st, POLLOUT | POLLIN, deadline);
        if (w <= 0) goto timeout;
        if (!PQconsumeInput(c)) return conn_err(st, what);
    }
    if (f < 0) return conn_err(st, what);
    PGresult *last = NULL, *failed = NULL;
    for (;;) {
        if (!PQconsumeInput(c)) {
            PQclear(last);
            PQclear(failed);
            return conn_err(st, what);
        }
        while (!PQisBusy(c)) {
            PGresult *r = PQgetResult(c);
            if (!r) goto done;
            ExecStatusType s = PQresultStatus(r);
            if ((s == PGRES_FATAL_ERROR || s == PGRES_BAD_RESPONSE) && !failed) {
                failed = r; /* the first error is the cause; keep draining */
            } else {
                PQclear(last);
                last = r;
            }
        }
        int w = wait_fd(st, POLLIN, deadline);
        if (w <= 0) {
            PQclear(last);
            PQclear(failed);
            goto timeout;
        }
    }
done:
    if (failed) {
        int rc = res_err(st, failed, what);
        PQclear(failed);
        PQclear(last);
        return rc;
    }
    if (!last) return conn_err(st, what);
    ExecStatusType s = PQresultStatus(last);
    if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) {
        int rc = res_err(st, last, what);
        PQclear(last);
        return rc;
    }
    if (out)
        *out = last;
    else
        PQclear(last);
    return 0;
timeout:
    /* The answer may still come; the connection is in an unknown state and
     * is reset by the next call. */
    st->pg_broken = 1;
    return sk_store_set_err(st, SK_EDB,
                            "postgres %s: %s: no answer within %d ms (server down or frozen)",
                            st->pg_where, what, st->pg_timeout_ms);
}

static int cmd(sk_store *st, const char *sql, const char *what)
{
    return run(st, NULL, what, sql, 0, NULL);
}

/* Resets the connection; bounded by connect_timeout. */
static int reconnect(sk_store *st)
{
    PQsetnonblocking(st->pg, 0);
    PQreset(st->pg);
    if (PQstatus(st->pg) != CONNECTION_OK) {
        char line[320];
        first_line(line, sizeof line, PQerrorMessage(st->pg));
        st->pg_broken = 1;
        return sk_store_set_err(st, SK_EDB, "postgres %s: connection lost and reconnect failed: %s",
                                st->pg_where, line);
    }
    PQsetnonblocking(st->pg, 1);
    st->pg_broken = 0;
    st->pg_prepared = 0; /* a new session: nothing prepared on it */
    return 0;
}

/* Start of every call (store.c cleared the error): makes sure the
 * connection is usable: after a failure, or when the idle socket became
 * readable (the server sent its goodbye: shutdown or restart), it is reset
 * first. */
static int enter(sk_store *st)
{
    int bad = st->pg_broken || PQstatus(st->pg) != CONNECTION_OK ||
              PQtransactionStatus(st->pg) != PQTRANS_IDLE;
    if (!bad) {
        struct pollfd p = {.fd = PQsocket(st->pg), .events = POLLIN};
        /* Idle and readable: a FATAL or EOF; nothing else arrives unasked
         * (no LISTEN here). Resetting costs one reconnect; using a dead
         * connection would fail this call. */
        if (p.fd < 0 || poll(&p, 1, 0) != 0) bad = 1;
    }
    return bad ? reconnect(st) : 0;
}

static int connect_url(sk_store *st, const char *url)
{
    char *perr = NULL;
    PQconninfoOption *opts = PQconninfoParse(url, &perr);
    if (!opts) {
        /* libpq quotes the offending token, which may be the password. */
        int rc = sk_store_set_err(st, perr ? SK_EINVAL : SK_ENOMEM, "%s",
                                  perr ? "malformed postgres URL" : "out of memory");
        PQfreemem(perr);
        return rc;
    }
    enum { MAXP = 64 };
    const char *kw[MAXP], *val[MAXP];
    int n = 0, timeout_s = CONNECT_TIMEOUT_DEFAULT_S;
    const char *user_options = NULL;
    static const char *const defaults[][2] = {
        {"keepalives", "1"},       {"keepalives_idle", "5"},        {"keepalives_interval", "2"},
        {"keepalives_count", "3"}, {"application_name", "seckill"}, {"client_encoding", "UTF8"},
    };
    for (PQconninfoOption *o = opts; o->keyword && n < MAXP - 12; o++) {
        if (!o->val || !*o->val) continue;
        if (!strcmp(o->keyword, "options")) {
            user_options = o->val;
            continue;
        }
        if (!strcmp(o->keyword, "connect_timeout")) {
            timeout_s = atoi(o->val); /* re-added below, normalized */
            continue;
        }
        kw[n] = o->keyword;
        val[n++] = o->val;
    }
    if (timeout_s <= 0) timeout_s = CONNECT_TIMEOUT_DEFAULT_S; /* 0 means forever */
    if (timeout_s < CONNECT_TIMEOUT_MIN_S) timeout_s = CONNECT_TIMEOUT_MIN_S;
    char tbuf[16], ubuf[24], obuf[1200];
    snprintf(tbuf, sizeof tbuf, "%d", timeout_s);
    kw[n] = "connect_timeout";
    val[n++] = tbuf;
    for (size_t d = 0; d < sizeof defaults / sizeof defaults[0]; d++) {
        int seen = 0;
        for (int i = 0; i < n; i++)
            seen |= !strcmp(kw[i], defaults[d][0]);
        if (!seen) {
            kw[n] = defaults[d][0];
            val[n++] = defaults[d][1];
        }
    }
    int seen_tcp = 0;
    for (int i = 0; i < n; i++)
        seen_tcp |= !strcmp(kw[i], "tcp_user_timeout");
    if (!seen_tcp) {
        /* Unacknowledged data to a vanished host fails after T, not ~15 min. */
        snprintf(ubuf, sizeof ubuf, "%d", timeout_s * 1000);
        kw[n] = "tcp_user_timeout";
        val[n++] = ubuf;
    }
    /* The server gives up half a second before the client does, so a slow
     * statement ends with a clean error and a usable connection; the
     * client bound is only for a server that cannot answer at all. The
     * URL's own options come after ours: theirs win. */
    st->pg_timeout_ms = timeout_s * 1000;
    snprintf(obuf, sizeof obuf, "-c statement_timeout=%d%s%.1000s", timeout_s * 1000 - 500,
             user_options ? " " : "", user_options ? user_options : "");
    kw[n] = "options";
    val[n++] = obuf;
    kw[n] = NULL;
    val[n] = NULL;
    st->pg = PQconnectdbParams(kw, val, 0);
    PQconninfoFree(opts);
    if (!st->pg) return sk_store_set_err(st, SK_ENOMEM, "postgres: out of memory");
    describe(st);
    PQsetNoticeProcessor(st->pg, ignore_notice, NULL);
    if (PQstatus(st->pg) != CONNECTION_OK) {
        char line[320];
        first_line(line, sizeof line, PQerrorMessage(st->pg));
        return sk_store_set_err(st, SK_EDB, "postgres %s: cannot connect: %s", st->pg_where, line);
    }
    if (PQsetnonblocking(st->pg, 1) != 0)
        return sk_store_set_err(st, SK_EDB, "postgres %s: cannot set non-blocking mode",
                                st->pg_where);
    return 0;
}

/* ---- schema ---------------------------------------------------------- */

static int64_t i64_at(const PGresult *r, int row, int col)
{
    if (PQgetisnull(r, row, col)) return 0;
    return strtoll(PQgetvalue(r, row, col), NULL, 10);
}

static int read_version(sk_store *st, int *v, const char *sql)
{
    PGresult *r;
    int rc = run(st, &r, "read schema version", sql, 0, NULL);
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
        if (rc == 0 && v == N_MIGRATIONS) return cmd(st, "COMMIT", "commit migration check");
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
            rc = cmd(st, migrations[v], "migration");
            if (rc == 0)
                rc = run(st, NULL, "record migration",
                         "INSERT INTO schema_migrations (version, applied_ms) VALUES ($1, $2)", 2,
                         p);
            if (rc == 0) rc = cmd(st, "COMMIT", "commit migration");
            if (rc) {
                char why[sizeof st->errstr]; /* the message is rewritten in place */
                snprintf(why, sizeof why, "%s", st->errstr);
                sk_store_set_err(st, rc, "%.400s (schema migration %d failed)", why, v + 1);
            }
        }
        if (rc) {
            char why[sizeof st->errstr];
            snprintf(why, sizeof why, "%s", st->errstr);
            if (!st->pg_broken) cmd(st, "ROLLBACK", "rollback migration");
            return sk_store_set_err(st, rc == SK_ENOMEM ? rc : SK_EDB, "%s", why);
        }
    }
}

static int pg_schema_version(sk_store *st, int *version)
{
    int rc = enter(st);
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
    return strtol(PQcmdTuples(r), NULL, 10);
}

static int pg_activity_insert(sk_store *st, const struct sk_activity *v)
{
    int rc = enter(st);
    if (rc) return rc;
    struct num id = num_u64(v->id), stock = num_i64(v->stock), lim = num_i64(v->per_user_limit),
               mpo = num_i64(v->max_per_order), s = num_i64(v->start_ms), e = num_i64(v->end_ms),
               pay = num_i64(v->pay_timeout_s), cr = num_i64(v->created_ms),
               rlr = num_i64(v->rl_per_user_per_s), rlb = num_i64(v->rl_burst),
               seg = num_i64(v->segments), wrr = num_i64(v->wr_passes_per_s),
               wrt = num_i64(v->wr_pass_ttl_s);
    const char *p[] = {id.s,     v->name, stock.s, lim.s, mpo.s, s.s,   e.s,   pay.s,
                       v->state, cr.s,    rlr.s,   rlb.s, seg.s, wrr.s, wrt.s, v->wr_seed};
    rc = run(st, NULL, "insert activity",
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
    int rc = enter(st);
    if (rc) return rc;
    struct num n = num_u64(id);
    const char *p[] = {n.s};
    PGresult *r;
    if ((rc = run_prepared(st, &r, "read activity", PGQ_ACTIVITY_GET, 1, p)) != 0) return rc;
    if (PQntuples(r) == 1)
        read_row(r, 0, out);
    else
        rc = sk_store_no_activity(st, id);
    PQclear(r);
    return rc;
}

static int pg_activity_list(sk_store *st, struct sk_activity **out, size_t *n)
{
    int rc = enter(st);
    if (rc) return rc;
    PGresult *r;
    if ((rc = run(st, &r, "list activities",
                  "SELECT " SK_STORE_ACTIVITY_COLUMNS " FROM activities ORDER BY id", 0, NULL)) !=
        0)
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
    int rc = run(st, &r, what, sql, np, p);
    if (rc) return rc;
    if (changed(r) == 0) rc = sk_store_no_activity(st, id);
    PQclear(r);
    return rc;
}

static int pg_activity_set_state(sk_store *st, uint64_t id, const char *state)
{
    int rc = enter(st);
    if (rc) return rc;
    struct num n = num_u64(id);
    const char *p[] = {state, n.s};
    return change_one(st, "UPDATE activities SET state = $1 WHERE id = $2", 2, p, id,
                      "update activity state");
}

static int pg_activity_delete(sk_store *st, uint64_t id)
{
    int rc = enter(st);
    if (rc) return rc;
    struct num n = num_u64(id);
    const char *p[] = {n.s};
    rc = change_one(st, "DELETE FROM activities WHERE id = $1", 1, p, id, "delete activity");
    if (rc) return rc;
    /* a re-created id starts a new history: its old watermark would read as
     * a Redis that went back in time */
    PGresult *r;
    rc = run(st, &r, "delete marks", "DELETE FROM redis_marks WHERE activity_id = $1", 1, p);
    if (rc == 0) PQclear(r);
    return rc;
}

static int pg_activity_set_db_stock(sk_store *st, uint64_t id, int64_t stock)
{
    int rc = enter(st);
    if (rc) return rc;
    struct num s = num_i64(stock), n = num_u64(id);
    const char *p[] = {s.s, n.s};
    /* a CHECK failure: store.c says which */
    return change_one(st, "UPDATE activities SET stock = $1 WHERE id = $2", 2, p, id,
                      "set DB stock");
}

static int pg_activity_set_pass_rate(sk_store *st, uint64_t id, int64_t rate)
{
    int rc = enter(st);
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
    int rc = enter(st);
    if (rc) return rc;
    PGresult *r;
    if ((rc = run(st, &r, "list activity ids", "SELECT id FROM activities ORDER BY id", 0, NULL)) !=
        0)
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
        rc = run(
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
        rc = run(st, &r, "take stock",
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
    int rc = run(st, &r, "take stock",
                 "UPDATE activities SET stock = stock - $1 WHERE id = $2 AND stock >= $1", 2, p);
    if (rc) return rc;
    long hit = changed(r);
    PQclear(r);
    if (hit) return 0;
    struct num t = num_i64(now);
    const char *fp[] = {t.s, a.s, o->order_id, q.s};
    rc = run(st, &r, "record stock failure",
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
    if (rc == 0) rc = cmd(st, "COMMIT", what);
    if (rc) {
        char why[sizeof st->errstr];
        snprintf(why, sizeof why, "%s", st->errstr);
        if (!st->pg_broken) cmd(st, "ROLLBACK", "rollback");
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
        rc = run(st, &r, "raise mark", SK_STORE_MARK_UPSERT("$1", "$2", "$3", "$4", "$5", "$6"), 6,
                 p);
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
    int rc = run(st, &r, "read present orders",
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
        rc = run(st, NULL, "record order conflict",
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
    int rc = enter(st);
    if (rc) return rc;
    char *inserted = malloc(n);
    struct take *takes = malloc(n * sizeof *takes);
    if (!inserted || !takes) {
        free(inserted);
        free(takes);
        return sk_store_set_err(st, SK_ENOMEM, "out of memory persisting %zu orders", n);
    }
    rc = cmd(st, "BEGIN", "begin persist");
    if (rc == 0) rc = persist_tx(st, orders, n, inserted, takes, res, first);
    rc = finish_tx(st, rc, "commit persist");
    free(inserted);
    free(takes);
    return rc ? sk_store_batch_rolled_back(st, rc, n) : 0;
}

static int pg_order_get(sk_store *st, const char *order_id, struct sk_order *out)
{
    int rc = enter(st);
    if (rc) return rc;
    const char *p[] = {order_id};
    PGresult *r;
    if ((rc = run_prepared(st, &r, "read order", PGQ_ORDER_GET, 1, p)) != 0) return rc;
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
    int rc =
        run(st, &r, "read order status", "SELECT status FROM orders WHERE order_id = $1", 1, p);
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
    int rc = run(st, &r, what, sql, 2, p);
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
    int rc = run(st, &r, "update order status", sql, 2, p);
    if (rc) return rc;
    if (PQntuples(r) != 1) {
        PQclear(r);
        return sk_store_no_order(st, order_id);
    }
    int found = status_at(r, 0, 0);
    long hit = strtol(PQgetvalue(r, 0, 1), NULL, 10);
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
    int rc = enter(st);
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
    int rc = enter(st);
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
    int rc = enter(st);
    if (rc) return rc;
    PGresult *r;
    if ((rc = run(st, &r, "read orders", sql, np, p)) != 0) return rc;
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
    int rc = enter(st);
    if (rc) return rc;
    struct num a = num_u64(activity_id);
    const char *p[] = {a.s};
    PGresult *r;
    /* One statement: the status rows, then one 'stock_failures' row. */
    rc = run(st, &r, "count orders",
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
    return run(st, NULL, "insert audit row",
               "INSERT INTO audit (at_ms, activity_id, kind, detail) VALUES ($1, $2, $3, $4)", 4,
               p);
}

static int pg_audit_add(sk_store *st, int64_t at_ms, uint64_t activity_id, const char *kind,
                        const char *detail)
{
    int rc = enter(st);
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
    int rc = enter(st);
    if (rc) return rc;
    struct num a = num_u64(activity_id);
    const char *p[] = {a.s};
    PGresult *r;
    if ((rc = run(st, &r, "list audit rows",
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
    int rc = enter(st);
    if (rc) return rc;
    struct num a = num_u64(activity_id);
    const char *p[] = {a.s};
    PGresult *r;
    if ((rc = run(st, &r, "list marks",
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
    int rc = enter(st);
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
    int rc = run(st, &r, "check DB stock",
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
    int rc = enter(st);
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
    int rc =
        run(st, &r, "lock activity", "SELECT stock FROM activities WHERE id = $1 FOR UPDATE", 1, p);
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
    if ((rc = run(st, NULL, "set DB stock", "UPDATE activities SET stock = $1 WHERE id = $2", 2,
                  up)) != 0)
        return rc;
    char detail[SK_STORE_AUDIT_DETAIL_MAX];
    sk_store_repair_detail(detail, sizeof detail, *stock, *expected, initial);
    return audit_insert(st, now_ms, id, "repair_db_stock", detail);
}

static int pg_db_stock_repair(sk_store *st, uint64_t id, int64_t now_ms, int64_t *before,
                              int64_t *after)
{
    int rc = enter(st);
    if (rc) return rc;
    if ((rc = cmd(st, "BEGIN", "begin DB stock repair")) != 0) return rc;
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
    int rc = enter(st);
    if (rc) return rc;
    if ((rc = cmd(st, "BEGIN", "begin order restore")) != 0) return rc;
    int cancelled = o->status == SK_ORDER_CANCELLED;
    struct num a = num_u64(o->activity_id), u = num_i64((int64_t)o->user_id), /* same bits */
        q = num_i64(o->quantity), c = num_i64(o->created_ms), t = num_i64(now_ms);
    const char *p[] = {
        o->order_id,           a.s, u.s, q.s, sk_order_status_name(o->status), c.s, o->stream_id,
        cancelled ? t.s : NULL};
    /* The pay deadline as persist sets it: the activity's timeout, or the
     * default when the activity is not in the DB. */
    rc = run(st, NULL, "restore order",
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
    int rc = connect_url(st, url);
    if (rc == 0) rc = migrate(st);
    return rc;
}
