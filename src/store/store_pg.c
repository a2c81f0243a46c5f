/* store_pg.c - the PostgreSQL driver of the store (store_int.h), over
 * libpq.
 *
 * Connection: the URL goes through PQconninfoParse, then
 * PQconnectdbParams with defaults for what the URL leaves out:
 * connect_timeout 5 s, TCP keepalives (idle 5 s, 2 s x 3 probes),
 * tcp_user_timeout, and a server statement_timeout just under the client
 * bound. connect_timeout (T s) bounds everything: connecting, and every
 * statement's wait for an answer (client side, T s: a stopped or frozen
 * server never answers, so only the client can give up). After a lost
 * connection, a timeout, or a server restart, the next call resets the
 * connection (PQreset, bounded by T); a call never reconnects in the
 * middle of a transaction. An open that must not wait for a server that is
 * down starts the connection with libpq's non-blocking PQconnectStartParams
 * and never waits for it: the next call connects.
 *
 * Statements go with their parameters as text, in libpq's pipeline mode,
 * the socket non-blocking and the answer awaited with poll() against a
 * deadline: one round trip carries a transaction's BEGIN (sent with its
 * first statement), the writes deferred to it (SK_SQL_DEFER: the status
 * updates, the marks, audit rows) and the statement whose answer is
 * needed. The hot statements (SK_SQL_KEEP: an order poll, an activity
 * read, the persist batch's, the status changes) are prepared once per
 * session, in the round trip of their first use: the server parses and
 * plans them once (measured: half of PostgreSQL's CPU per order poll). A
 * multi-row statement takes one array per column, so one statement
 * carries a whole batch. Scripts (the migrations) go by the simple
 * protocol. */
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
#include "core/num.h"
#include "core/vec.h"

#define CONNECT_TIMEOUT_DEFAULT_S 5
#define CONNECT_TIMEOUT_MIN_S 2 /* libpq raises smaller values to 2 */

struct pg {
    PGconn *c;
    int timeout_ms;   /* client-side bound of one statement */
    struct req *pend; /* st->deferred writes (SK_SQL_DEFER) for the next round trip */
    size_t pend_cap;
    char *text[Q_COUNT];             /* each statement's text, expanded once */
    unsigned char prepared[Q_COUNT]; /* prepared on the current session */
};

struct sk_stmt {
    struct sk_srv_stmt b;
    PGresult *r; /* NULL: deferred */
    int row, nrows;
};

#define PG(st) ((struct pg *)(st)->conn)

/* ---- errors ---- */

/* libpq messages end with a newline and may span lines: the first, cut at
 * MSG_LINE_MAX bytes. */
#define MSG_LINE_MAX 319

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
    if (PQstatus(PG(st)->c) != CONNECTION_OK) st->broken = 1;
    return sk_srv_fail_line(st, code_of(state), what, msg ? msg : PQerrorMessage(PG(st)->c),
                            MSG_LINE_MAX, 0);
}

/* The connection failed under us: the next call resets it. */
static int conn_err(sk_store *st, const char *what)
{
    st->broken = 1;
    return sk_srv_fail_line(st, SK_EDB, what, PQerrorMessage(PG(st)->c), MSG_LINE_MAX, 1);
}

/* ---- round trips ---- */

/* One request of a round trip: statement q with its parameters as text
 * (NULL: SQL NULL), or a command (q -1: BEGIN, COMMIT). A deferred one
 * owns copies of its parameters (block). */
struct req {
    int q;
    const char *cmd;
    int np;
    const char *p[SK_SRV_PARAMS];
    char *block;
};

/* Polls the socket for ev until deadline: 1 ready, 0 timed out, -1 error. */
static int wait_fd(PGconn *c, short ev, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - sk_mono_ms();
        if (left <= 0) return 0;
        struct pollfd p = {.fd = PQsocket(c), .events = ev};
        if (p.fd < 0) return -1;
        int n = poll(&p, 1, (int)(left > 1000000 ? 1000000 : left));
        if (n > 0) return 1;
        if (n < 0 && errno != EINTR) return -1;
    }
}

/* The answer did not come: the connection is in an unknown state and is
 * reset by the next call. */
static int timed_out(sk_store *st, const char *what)
{
    st->broken = 1;
    return sk_store_fail(st, SK_EDB, what, "no answer within %d ms (server down or frozen)",
                         PG(st)->timeout_ms);
}

/* Sends what was queued, until deadline. */
static int flush_out(sk_store *st, int64_t deadline, const char *what)
{
    PGconn *c = PG(st)->c;
    int f;
    while ((f = PQflush(c)) == 1) {
        if (wait_fd(c, POLLOUT | POLLIN, deadline) <= 0) return timed_out(st, what);
        if (!PQconsumeInput(c)) return conn_err(st, what);
    }
    return f < 0 ? conn_err(st, what) : 0;
}

/* The next result into *r (NULL: the end of a query's results), waiting
 * for it until deadline. */
static int next_result(sk_store *st, int64_t deadline, const char *what, PGresult **r)
{
    PGconn *c = PG(st)->c;
    for (;;) {
        if (!PQconsumeInput(c)) return conn_err(st, what);
        if (!PQisBusy(c)) {
            *r = PQgetResult(c);
            return 0;
        }
        if (wait_fd(c, POLLIN, deadline) <= 0) return timed_out(st, what);
    }
}

/* The results of one query up to its end: the last into *out (the caller
 * PQclears it; out may be NULL), the first failure as the code. */
static int query_results(sk_store *st, int64_t deadline, const char *what, PGresult **out)
{
    PGresult *last = NULL, *failed = NULL, *r;
    int rc;
    while ((rc = next_result(st, deadline, what, &r)) == 0 && r) {
        ExecStatusType s = PQresultStatus(r);
        if ((s == PGRES_FATAL_ERROR || s == PGRES_BAD_RESPONSE) && !failed) {
            failed = r; /* the first error is the cause; keep draining */
        } else {
            PQclear(last);
            last = r;
        }
    }
    if (rc == 0 && failed) rc = res_err(st, failed, what);
    ExecStatusType s = last ? PQresultStatus(last) : PGRES_FATAL_ERROR;
    if (rc == 0 && s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK && s != PGRES_PIPELINE_ABORTED)
        rc = last ? res_err(st, last, what) : conn_err(st, what);
    PQclear(failed);
    if (rc == 0 && out)
        *out = last;
    else
        PQclear(last);
    return rc;
}

/* Sends one query and awaits its answer (*out as query_results),
 * bounded by timeout_ms: a server that does not answer (stopped, frozen,
 * unreachable) leaves the connection marked broken and the call failing
 * with SK_EDB. */
static int await_result(sk_store *st, PGresult **out, const char *what)
{
    int64_t deadline = sk_mono_ms() + PG(st)->timeout_ms;
    int rc = flush_out(st, deadline, what);
    return rc ? rc : query_results(st, deadline, what, out);
}

static const char *req_what(const struct req *r)
{
    return r->q >= 0 ? sk_sql_what(r->q) : r->cmd;
}

/* Queues request r on the connection (a statement kept per session is
 * prepared first when it is not yet); *prep 1 when a prepare went too. */
static int send_req(sk_store *st, const struct req *r, int *prep)
{
    struct pg *c = PG(st);
    *prep = 0;
    if (r->q < 0) return PQsendQueryParams(c->c, r->cmd, 0, NULL, NULL, NULL, NULL, 0) ? 0 : -1;
    char name[16];
    snprintf(name, sizeof name, "sk_%d", r->q);
    if (!(sk_sql_flags(r->q) & SK_SQL_KEEP))
        return PQsendQueryParams(c->c, c->text[r->q], r->np, NULL, r->p, NULL, NULL, 0) ? 0 : -1;
    if (!c->prepared[r->q]) {
        if (!PQsendPrepare(c->c, name, c->text[r->q], r->np, NULL)) return -1;
        *prep = 1;
    }
    return PQsendQueryPrepared(c->c, name, r->np, r->p, NULL, NULL, 0) ? 0 : -1;
}

/* A statement kept per session failed: unless a value was refused, the
 * session's trouble (a timeout, or a plan the schema changed under):
 * the next call starts on a fresh one. */
static void kept_failed(sk_store *st, const struct req *r, int rc)
{
    if (r->q >= 0 && (sk_sql_flags(r->q) & SK_SQL_KEEP) && rc != SK_EINVAL && rc != SK_EEXIST)
        st->broken = 1;
}

static void drop(sk_store *st)
{
    for (size_t i = 0; i < st->deferred; i++)
        free(PG(st)->pend[i].block);
    st->deferred = 0;
}

/* One round trip in pipeline mode: the waiting BEGIN, the deferred
 * statements, then cur (may be NULL); *out cur's result. A statement kept
 * per session is prepared in the same round trip the first time. The
 * first failure is the code; the queries after it were skipped by the
 * server. */
static int pipeline(sk_store *st, const struct req *cur, PGresult **out)
{
    struct pg *c = PG(st);
    const char *what = cur ? req_what(cur) : "send";
    size_t n = st->deferred + 2, k = 0;
    struct slot {
        const struct req *r;
        int prepare;
    } *slots = calloc(2 * n, sizeof *slots);
    static const struct req begin = {.q = -1, .cmd = "begin"};
    if (!slots) return sk_store_set_err(st, SK_ENOMEM, "out of memory: %s", what);
    int rc = PQenterPipelineMode(c->c) ? 0 : conn_err(st, what);
    if (rc == 0 && st->tx_begin) {
        slots[k++].r = &begin;
        if (PQsendQueryParams(c->c, "BEGIN", 0, NULL, NULL, NULL, NULL, 0) == 0) rc = -1;
    }
    for (size_t i = 0; rc == 0 && i <= st->deferred; i++) {
        const struct req *r = i < st->deferred ? &c->pend[i] : cur;
        if (!r) break;
        int prep;
        if (send_req(st, r, &prep) < 0) rc = -1;
        if (prep) {
            /* prepared once even when it comes twice in this pipeline;
             * undone below when the prepare fails */
            c->prepared[r->q] = 1;
            slots[k++] = (struct slot){r, 1};
        }
        slots[k++] = (struct slot){r, 0};
    }
    if (rc == -1 || (rc == 0 && !PQpipelineSync(c->c))) rc = conn_err(st, what);
    int64_t deadline = sk_mono_ms() + c->timeout_ms;
    if (rc == 0) rc = flush_out(st, deadline, what);
    int failed = 0;
    for (size_t i = 0; rc == 0 && i < k; i++) {
        const struct req *r = slots[i].r;
        int last = r == cur && !slots[i].prepare;
        int q = query_results(st, deadline, req_what(r), last ? out : NULL);
        if (q == SK_EDB && st->broken) rc = q; /* the connection, not the query */
        if (q && !failed) {
            failed = q;
            kept_failed(st, r, q);
        }
        if (slots[i].prepare && (q || failed)) c->prepared[r->q] = 0; /* failed or skipped */
        if (q && last && out) *out = NULL;
    }
    PGresult *sync = NULL;
    if (rc == 0 && next_result(st, deadline, what, &sync) == 0 &&
        PQresultStatus(sync) != PGRES_PIPELINE_SYNC)
        rc = conn_err(st, what);
    PQclear(sync);
    if (!PQexitPipelineMode(c->c)) st->broken = 1;
    free(slots);
    drop(st);
    st->tx_begin = 0;
    if (rc == 0 && failed && out) {
        PQclear(*out);
        *out = NULL;
    }
    return rc ? rc : failed;
}

/* One round trip for r and what waits (a BEGIN, deferred statements):
 * *out its result (the caller PQclears it). */
static int roundtrip(sk_store *st, const struct req *r, PGresult **out)
{
    *out = NULL;
    return st->broken ? sk_srv_lost(st, req_what(r)) : pipeline(st, r, out);
}

/* A script (several statements, no parameters): what waits goes first. */
static int exec(sk_store *st, const char *script, const char *what)
{
    struct pg *c = PG(st);
    if (st->broken) return sk_srv_lost(st, what);
    if (st->tx_begin || st->deferred) {
        int rc = pipeline(st, NULL, NULL); /* what waits goes first */
        if (rc) return rc;
    }
    if (!PQsendQuery(c->c, script)) return conn_err(st, what);
    return await_result(st, NULL, what);
}

static int end(sk_store *st, int commit)
{
    if (!commit) return exec(st, "ROLLBACK", "rollback");
    static const struct req commit_ = {.q = -1, .cmd = "COMMIT"};
    PGresult *r;
    int rc = roundtrip(st, &commit_, &r);
    PQclear(r);
    return rc;
}

/* ---- statements ---- */

static int prepare(sk_store *st, int q, size_t rows, size_t *got, struct sk_stmt **out)
{
    return sk_srv_prepare(st, PG(st)->text, q, rows, SIZE_MAX, sizeof **out, got, out);
}

/* One element of an array literal "{a,b}": text quoted with " and \
 * escaped, numbers bare, NULL. */
static void arr_add(struct sk_text *b, struct sk_val v)
{
    if (b->len > 1) sk_text_add(b, ",", 1);
    if (v.kind == SK_V_NULL) {
        sk_text_add(b, "NULL", 4);
    } else if (v.kind == SK_V_INT) {
        char n[24];
        sk_text_add(b, n, (size_t)snprintf(n, sizeof n, "%" PRId64, v.i));
    } else {
        sk_text_add(b, "\"", 1);
        for (const char *q = v.t; *q;) {
            size_t run = strcspn(q, "\"\\"); /* copied at once: ids rarely hold either */
            sk_text_add(b, q, run);
            if (!q[run]) break;
            sk_text_add(b, "\\", 1);
            sk_text_add(b, q + run, 1);
            q += run + 1;
        }
        sk_text_add(b, "\"", 1);
    }
}

/* A deferred request keeps copies of its parameters. */
static int defer(sk_store *st, const struct req *r)
{
    struct pg *c = PG(st);
    size_t len = 0;
    for (int i = 0; i < r->np; i++)
        len += r->p[i] ? strlen(r->p[i]) + 1 : 0;
    struct req d = *r;
    d.block = malloc(len ? len : 1);
    if (!d.block || SK_VEC_RESERVE(c->pend, c->pend_cap, st->deferred + 1, 8)) {
        free(d.block);
        return sk_store_set_err(st, SK_ENOMEM, "out of memory: %s", req_what(r));
    }
    char *at = d.block;
    for (int i = 0; i < r->np; i++) {
        if (!r->p[i]) continue;
        size_t n = strlen(r->p[i]) + 1;
        memcpy(at, r->p[i], n);
        d.p[i] = at;
        at += n;
    }
    c->pend[st->deferred++] = d;
    return 0;
}

/* Sends s with its parameters (text; a multi-row statement's as one array
 * per column) and awaits the answer; a deferred write waits for the next
 * round trip instead. */
static int send_stmt(struct sk_stmt *s)
{
    sk_store *st = s->b.st;
    struct pg *c = PG(st);
    const char *what = sk_sql_what(s->b.q);
    char num[SK_SRV_PARAMS][24];
    struct sk_text arr[SK_SRV_PARAMS] = {{0}};
    struct req r = {.q = s->b.q};
    int rc = 0;
    if (s->b.ncols) {
        for (r.np = 0; r.np < s->b.ncols; r.np++) {
            sk_text_add(&arr[r.np], "{", 1);
            for (size_t k = 0; k < s->b.rows; k++)
                arr_add(&arr[r.np], s->b.vals[k * (size_t)s->b.ncols + (size_t)r.np]);
            sk_text_add(&arr[r.np], "}", 1);
            if (arr[r.np].oom) rc = sk_store_set_err(st, SK_ENOMEM, "out of memory: %s", what);
            r.p[r.np] = arr[r.np].p;
        }
    } else {
        /* the parameters the text has: $1 .. $np */
        for (const char *d = c->text[s->b.q]; (d = strchr(d, '$')) != NULL; d++) {
            int k = atoi(d + 1);
            if (k > r.np) r.np = k;
        }
        if (r.np > SK_SRV_PARAMS) /* a statement of store_sql.c beyond the driver's room */
            return sk_store_set_err(st, SK_EINVAL, "postgres: %s: %d parameters", what, r.np);
        for (int i = 0; i < r.np; i++) {
            const struct sk_val *v = &s->b.vals[i];
            if (v->kind == SK_V_INT) snprintf(num[i], sizeof num[i], "%" PRId64, v->i);
            r.p[i] = v->kind == SK_V_TEXT ? v->t : v->kind == SK_V_INT ? num[i] : NULL;
        }
    }
    if (rc == 0 && st->in_tx && (sk_sql_flags(s->b.q) & SK_SQL_DEFER))
        rc = st->broken ? sk_srv_lost(st, what) : defer(st, &r);
    else if (rc == 0 && (rc = roundtrip(st, &r, &s->r)) == 0)
        s->nrows = PQntuples(s->r);
    for (int i = 0; i < s->b.ncols; i++)
        free(arr[i].p);
    if (rc || !s->r) return rc;
    const char *n = PQcmdTuples(s->r); /* "" for a command that counts nothing */
    uint64_t x = 0;
    sk_num_u64(n, strlen(n), &x);
    s->b.changes = (int64_t)x;
    return 0;
}

static int step(struct sk_stmt *s)
{
    if (!s->b.sent) {
        s->b.sent = 1;
        s->row = -1;
        int rc = send_stmt(s);
        if (rc) return rc;
    }
    return ++s->row < s->nrows;
}

static int64_t col_i64(struct sk_stmt *s, int c)
{
    if (PQgetisnull(s->r, s->row, c)) return 0;
    const char *v = PQgetvalue(s->r, s->row, c);
    int64_t x = 0; /* a column we declared BIGINT: always a number */
    sk_num_i64(v, strlen(v), &x);
    return x;
}

/* NULL reads "": PQgetvalue gives "" for it. */
static void col_text(struct sk_stmt *s, int c, char *dst, size_t cap)
{
    snprintf(dst, cap, "%s", PQgetvalue(s->r, s->row, c));
}

static void finish(struct sk_stmt *s)
{
    PQclear(s->r);
    sk_srv_free(s);
}

/* ---- connection ---- */

/* Server notices (e.g. "relation already exists, skipping") are not errors
 * and must not reach the operator's terminal from inside a library. */
static void ignore_notice(void *arg, const char *msg)
{
    (void)arg;
    (void)msg;
}

/* Resets the connection; bounded by connect_timeout. */
static int reconnect(sk_store *st)
{
    struct pg *c = PG(st);
    drop(st);
    st->in_tx = st->tx_begin = 0;
    PQexitPipelineMode(c->c); /* a pipeline cut short */
    PQsetnonblocking(c->c, 0);
    PQreset(c->c);
    PQexitPipelineMode(c->c);
    if (PQstatus(c->c) != CONNECTION_OK) {
        st->broken = 1;
        return sk_srv_fail_line(st, SK_EDB, "connection lost and reconnect failed",
                                PQerrorMessage(c->c), MSG_LINE_MAX, 0);
    }
    PQsetnonblocking(c->c, 1);
    st->broken = 0;
    memset(c->prepared, 0, sizeof c->prepared); /* a new session: nothing prepared on it */
    return 0;
}

/* A usable connection: after a failure, or when the idle socket became
 * readable (the server sent its goodbye: shutdown or restart), it is reset
 * first. */
static int enter(sk_store *st)
{
    PGconn *c = PG(st)->c;
    int bad = st->broken || PQstatus(c) != CONNECTION_OK || PQtransactionStatus(c) != PQTRANS_IDLE;
    /* Idle and readable: a FATAL or EOF (no LISTEN here). Resetting
     * costs one reconnect; using a dead connection would fail this call. */
    return bad || sk_srv_idle_closed(PQsocket(c)) ? reconnect(st) : 0;
}

/* Connects to url (libpq's URL or key=value form) with the store's
 * defaults, non-blocking. The URL's password never reaches an error
 * message. now 0: only sets the session up (libpq's non-blocking start,
 * never waited for) and fails with SK_EDB "not connected yet". */
static int connect_(sk_store *st, const char *url, int now)
{
    struct pg *c = PG(st);
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
    c->timeout_ms = timeout_s * 1000;
    st->timeout_s = timeout_s;
    snprintf(obuf, sizeof obuf, "-c statement_timeout=%d%s%.1000s", timeout_s * 1000 - 500,
             user_options ? " " : "", user_options ? user_options : "");
    kw[n] = "options";
    val[n++] = obuf;
    kw[n] = NULL;
    val[n] = NULL;
    c->c = now ? PQconnectdbParams(kw, val, 0) : PQconnectStartParams(kw, val, 0);
    PQconninfoFree(opts);
    if (!c->c) return sk_store_set_err(st, SK_ENOMEM, "postgres: out of memory");
    const char *h = PQhost(c->c), *p = PQport(c->c), *d = PQdb(c->c);
    snprintf(st->where, sizeof st->where, "%.80s:%.8s/%.63s", h && *h ? h : "?",
             p && *p ? p : "5432", d && *d ? d : "?");
    PQsetNoticeProcessor(c->c, ignore_notice, NULL);
    if (!now && PQstatus(c->c) != CONNECTION_BAD)
        return sk_store_fail(st, SK_EDB, "open", "not connected yet");
    if (PQstatus(c->c) != CONNECTION_OK)
        return sk_srv_fail_line(st, SK_EDB, "cannot connect", PQerrorMessage(c->c), MSG_LINE_MAX,
                                0);
    if (PQsetnonblocking(c->c, 1) != 0)
        return sk_store_fail(st, SK_EDB, "open", "cannot set non-blocking mode");
    return 0;
}

static int open_(sk_store *st, const char *url, int waiting)
{
    if (strlen(url) > 4096) return sk_store_set_err(st, SK_EINVAL, "postgres URL too long");
    struct pg *c = calloc(1, sizeof *c);
    if (!c) return sk_store_set_err(st, SK_ENOMEM, "out of memory");
    st->conn = c;
    return connect_(st, url, waiting != SK_STORE_LATER);
}

static void close_(sk_store *st)
{
    struct pg *c = PG(st);
    if (!c) return;
    if (c->c) PQfinish(c->c);
    drop(st);
    free(c->pend);
    for (int q = 0; q < Q_COUNT; q++)
        free(c->text[q]);
    free(c);
    st->conn = NULL;
}

const struct sk_store_driver sk_store_pg =
    SK_STORE_DRIVER("postgres", SK_PG, NULL, drop, sk_srv_bind, sk_srv_changes);
