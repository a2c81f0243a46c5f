/* pg_conn.c - the libpq session of the PostgreSQL store (pg_conn_int.h).
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
 * once (measured: half of PostgreSQL's CPU per order poll). */
#include "store/pg_conn_int.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/num.h"

#define CONNECT_TIMEOUT_DEFAULT_S 5
#define CONNECT_TIMEOUT_MIN_S 2 /* libpq raises smaller values to 2 */

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

/* The statements prepared once per session (pg_conn_int.h: PGQ_*). */
static const char *const pgq_name[PGQ_COUNT] = {"sk_order_get", "sk_activity_get", "sk_persist_new",
                                                "sk_persist_some", "sk_take_stock"};
static const char *const pgq_sql[PGQ_COUNT] = {
    [PGQ_ORDER_GET] = "SELECT " SK_STORE_ORDER_COLUMNS " FROM orders WHERE order_id = $1",
    [PGQ_ACTIVITY_GET] = "SELECT " SK_STORE_ACTIVITY_COLUMNS " FROM activities WHERE id = $1",
};
_Static_assert(PGQ_COUNT <= 8 * sizeof((struct sk_store *)0)->pg_prepared, "pg_prepared bits");

static int await_result(sk_store *st, PGresult **out, const char *what);

/* Runs one command string and returns its last result (caller PQclears it;
 * out may be NULL). nparams == 0 sends it by the simple protocol, so it may
 * hold several statements; otherwise one statement with text parameters.
 * The whole exchange is bounded by pg_timeout_ms: a server that does not
 * answer (stopped, frozen, unreachable) leaves the connection marked broken
 * and the call failing with SK_EDB. */
int sk_pg_run(sk_store *st, PGresult **out, const char *what, const char *sql, int nparams,
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
int sk_pg_run_prepared(sk_store *st, PGresult **out, const char *what, int q, int nparams,
                       const char *const *params)
{
    if (out) *out = NULL;
    if (st->pg_broken)
        return sk_store_set_err(st, SK_EDB, "postgres %s: %s: connection lost", st->pg_where, what);
    if (!(st->pg_prepared & (1u << q))) {
        const char *sql = pgq_sql[q] ? pgq_sql[q] : sk_pg_persist_sql[q];
        if (!PQsendPrepare(st->pg, pgq_name[q], sql, nparams, NULL)) return conn_err(st, what);
        int rc = await_result(st, NULL, what);
        if (rc) return rc;
        st->pg_prepared |= 1u << q;
    }
    if (!PQsendQueryPrepared(st->pg, pgq_name[q], nparams, params, NULL, NULL, 0))
        return conn_err(st, what);
    int rc = await_result(st, out, what);
    /* Unless a value was refused, a failure is the session's trouble (a
     * timeout, or a plan the schema changed under): start the next call on
     * a fresh one. */
    if (rc && rc != SK_EINVAL && rc != SK_EEXIST) st->pg_broken = 1;
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

int sk_pg_cmd(sk_store *st, const char *sql, const char *what)
{
    return sk_pg_run(st, NULL, what, sql, 0, NULL);
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
int sk_pg_enter(sk_store *st)
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
    int rc = bad ? reconnect(st) : 0;
    /* an open made without a connection owes its migrations */
    return rc == 0 && st->owed ? sk_store_pay_owed(st) : rc;
}

int sk_pg_connect(sk_store *st, const char *url, int now)
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
            int64_t t = 0; /* not a number: the default, as 0 is */
            sk_num_i64_range(o->val, strlen(o->val), 0, 86400, &t);
            timeout_s = (int)t; /* re-added below, normalized */
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
    st->pg = now ? PQconnectdbParams(kw, val, 0) : PQconnectStartParams(kw, val, 0);
    PQconninfoFree(opts);
    if (!st->pg) return sk_store_set_err(st, SK_ENOMEM, "postgres: out of memory");
    describe(st);
    PQsetNoticeProcessor(st->pg, ignore_notice, NULL);
    if (!now && PQstatus(st->pg) != CONNECTION_BAD)
        return sk_store_set_err(st, SK_EDB, "postgres %s: not connected yet", st->pg_where);
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

/* ---- parameters and results ------------------------------------------ */

struct sk_pg_num sk_pg_num_i64(int64_t v)
{
    struct sk_pg_num n;
    snprintf(n.s, sizeof n.s, "%" PRId64, v);
    return n;
}

struct sk_pg_num sk_pg_num_u64(uint64_t v)
{
    struct sk_pg_num n;
    snprintf(n.s, sizeof n.s, "%" PRIu64, v);
    return n;
}

int64_t sk_pg_i64(const PGresult *r, int row, int col)
{
    if (PQgetisnull(r, row, col)) return 0;
    const char *v = PQgetvalue(r, row, col);
    int64_t x = 0; /* a column we declared BIGINT: always a number */
    sk_num_i64(v, strlen(v), &x);
    return x;
}

long sk_pg_changed(PGresult *r)
{
    const char *n = PQcmdTuples(r); /* "" for a command that counts nothing */
    uint64_t x = 0;
    sk_num_u64(n, strlen(n), &x);
    return (long)x;
}

static int commit(sk_store *st, const char *what)
{
    return sk_pg_cmd(st, "COMMIT", what);
}

/* A broken connection rolls back on the server by itself. */
static void rollback(sk_store *st)
{
    if (!st->pg_broken) sk_pg_cmd(st, "ROLLBACK", "rollback");
}

int sk_pg_finish_tx(sk_store *st, int rc, const char *what)
{
    return sk_store_finish_tx(st, rc, what, commit, rollback);
}

static int64_t row_i64(const struct sk_store_row *r, int col)
{
    return sk_pg_i64(r->res, r->row, col);
}

/* NULL reads "": PQgetvalue gives "" for it. */
static void row_text(const struct sk_store_row *r, int col, char *dst, size_t cap)
{
    snprintf(dst, cap, "%s", PQgetvalue(r->res, r->row, col));
}

void sk_pg_read_row(const PGresult *r, int row, sk_store_row_reader *read, void *dst)
{
    read(&(struct sk_store_row){.res = r, .row = row, .i64 = row_i64, .text = row_text}, dst);
}

int sk_pg_read_one(sk_store *st, const char *what, int q, const char *key,
                   sk_store_row_reader *read, void *out)
{
    int rc = sk_pg_enter(st);
    PGresult *r;
    if (rc || (rc = sk_pg_run_prepared(st, &r, what, q, 1, &key)) != 0) return rc;
    int found = PQntuples(r) == 1;
    if (found) sk_pg_read_row(r, 0, read, out);
    PQclear(r);
    return found;
}

int sk_pg_read_all(sk_store *st, const char *what, const char *sql, int nparams,
                   const char *const *params, size_t size, sk_store_row_reader *read, void **out,
                   size_t *n)
{
    PGresult *r;
    int rc = sk_pg_run(st, &r, what, sql, nparams, params);
    if (rc) return rc;
    int rows = PQntuples(r);
    char *arr = rows ? calloc((size_t)rows, size) : NULL;
    if (rows && !arr) {
        PQclear(r);
        return sk_store_set_err(st, SK_ENOMEM, "out of memory: %s", what);
    }
    for (int i = 0; i < rows; i++)
        sk_pg_read_row(r, i, read, arr + (size_t)i * size);
    PQclear(r);
    *out = arr;
    *n = (size_t)rows;
    return 0;
}
