/* store_mysql.c - the MySQL / MariaDB driver of the store (store_int.h),
 * over MariaDB Connector/C: connect from the URL (mysql_url.h), set the
 * session up, run statements with every wait bounded, map errors,
 * reconnect on the next call.
 *
 * Client: the blocking API. Every call of the store runs on a thread that
 * may block (a store pool thread, the order worker, a CLI), never on an
 * event loop, so the blocking calls with the library's own timeouts bound
 * every wait as tightly as a poll loop would: connect_timeout (T s,
 * default 5) for connecting, the same T as read and write timeout of
 * every statement (a stopped or frozen server never answers, so only the
 * client can give up), TCP keepalives and TCP_USER_TIMEOUT so a vanished
 * host is noticed in T too. The non-blocking API would only pay for
 * itself on a thread that multiplexes several sessions; none does.
 *
 * The server gives up first: innodb_lock_wait_timeout is T-1 s and, on
 * MariaDB, max_statement_time T-0.5 s (MySQL: max_execution_time, which
 * bounds SELECTs only), so a slow statement ends with a clean error and a
 * usable session; the client bound is for a server that cannot answer.
 *
 * After a lost connection or a timeout the session is marked broken and
 * the next call connects anew (bounded by T). A call never reconnects in
 * the middle of a transaction: the transaction is gone with the session
 * and the call fails; its caller retries the whole of it. The library's
 * own auto-reconnect stays off for that reason.
 *
 * Session: READ COMMITTED (InnoDB defaults to REPEATABLE READ; the status
 * changes, the persist's read of present ids and the stock repair rely on
 * every statement reading the newest committed rows), strict SQL mode (a
 * value out of range or too long is an error, never truncated), utf8mb4,
 * CLIENT_FOUND_ROWS (an UPDATE reports the rows it matched, as PostgreSQL
 * does, not only those it changed), CLIENT_MULTI_STATEMENTS.
 *
 * Statements go as text, their parameters escaped into it; a BEGIN waits
 * and goes in the round trip of the transaction's first statement. On
 * MariaDB the persist's INSERT (SK_SQL_BULK) is one bulk execution of a
 * prepared 1-row statement, values bound column-wise: no statement text
 * to build or parse per row (measured: 12-15 % of the server's CPU per
 * order, half the client's). */
#include "store/store_int.h"

#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <errmsg.h>
#include <mysql.h>
#include <mysqld_error.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/num.h"
#include "core/vec.h"
#include "store/mysql_url.h"

/* The oldest servers with what the schema needs: enforced CHECK
 * constraints (MariaDB 10.2.1, MySQL 8.0.16) and indexed generated
 * columns. */
#define MARIADB_MIN 100201UL
#define MYSQL_MIN 80016UL
/* Rows of one statement (a batch can be larger than is wise to send as
 * one statement). */
#define ROWS_MAX 1000

struct my {
    MYSQL *m;
    struct sk_mysql_url *url; /* kept for reconnects (holds the password) */
    int mariadb;              /* the server is MariaDB (else MySQL) */
    struct sk_text pend;      /* st->deferred writes (SK_SQL_DEFER) for the next round trip */
    int *pend_q;              /* their statements */
    size_t pend_cap;
    MYSQL_STMT *bulk;    /* MariaDB: the bulk statement, prepared on this session */
    char *text[Q_COUNT]; /* each statement's text for one row, expanded once */
};

struct sk_stmt {
    struct sk_srv_stmt b;
    MYSQL_RES *res;
    MYSQL_ROW row;
    unsigned long *lens;
};

#define MY(st) ((struct my *)(st)->conn)

/* ---- errors ---- */

/* Server or client error number -> SK code. A duplicate key is EEXIST;
 * a refused value (CHECK, NOT NULL, out of range, too long, bad text) is
 * the caller's (EINVAL, like SQLite's CHECK); waits cut short (lock wait,
 * deadlock, statement time) are ETIMEDOUT: worth a retry; the rest, and
 * every client-side error (the connection), EDB. */
static int code_of(unsigned e, const char *sqlstate)
{
    switch (e) {
    case ER_DUP_ENTRY: return SK_EEXIST;
    case ER_LOCK_WAIT_TIMEOUT:
    case ER_LOCK_DEADLOCK:
    case ER_STATEMENT_TIMEOUT:
    case 3024: /* MySQL's ER_QUERY_TIMEOUT (max_execution_time) */ return SK_ETIMEDOUT;
    default: break;
    }
    if (e >= CR_MIN_ERROR && e <= CR_MAX_ERROR) return SK_EDB;
    if (sqlstate && (!strncmp(sqlstate, "23", 2) || !strncmp(sqlstate, "22", 2)))
        return SK_EINVAL; /* 4025 (MariaDB) / 3819 (MySQL) CHECK failed: 23000 */
    return SK_EDB;
}

/* The failure e (SQLSTATE sqlstate, message msg) of a call on the session
 * -> SK code; t0 is when the statement was sent (a lost connection after
 * the whole read timeout is a server that did not answer). */
static int fail_of(sk_store *st, const char *what, int64_t t0, unsigned e, const char *sqlstate,
                   const char *msg)
{
    struct my *c = MY(st);
    int code = code_of(e, sqlstate);
    if (e >= CR_MIN_ERROR && e <= CR_MAX_ERROR) st->broken = 1;
    int timeout_ms = c->url->timeout_s * 1000;
    if ((e == CR_SERVER_LOST || e == CR_SERVER_GONE_ERROR) && sk_mono_ms() - t0 >= timeout_ms - 100)
        return sk_store_fail(st, SK_EDB, what, "no answer within %d ms (server down or frozen)",
                             timeout_ms);
    return sk_srv_fail_line(st, code, what, msg, SK_STORE_ERR_MAX, 1);
}

static int fail(sk_store *st, const char *what, int64_t t0)
{
    MYSQL *m = MY(st)->m;
    return fail_of(st, what, t0, mysql_errno(m), mysql_sqlstate(m), mysql_error(m));
}

static void close_bulk(struct my *c)
{
    if (c->bulk) mysql_stmt_close(c->bulk);
    c->bulk = NULL;
}

/* ---- running text ---- */

static void drop(sk_store *st)
{
    st->tx_begin = 0;
    st->deferred = 0;
    MY(st)->pend.len = 0;
    MY(st)->pend.oom = 0;
}

/* Runs text (one statement or several) to its end, after what waits (a
 * BEGIN, deferred writes) in the same round trip: *res (res may be NULL)
 * the result set of the last statement that returned rows (the caller
 * frees it), *changes the rows the last one matched. Statements after a
 * failing one are not run; the failure names the statement it was. */
static int run(sk_store *st, const char *what, const char *text, size_t len, MYSQL_RES **res,
               int64_t *changes)
{
    struct my *c = MY(st);
    if (res) *res = NULL;
    if (st->broken || !c->m) {
        drop(st);
        return sk_srv_lost(st, what);
    }
    /* the statements of this round trip, for the name of a failure */
    const char *whats[64];
    size_t nw = 0;
    struct sk_text all = {0};
    if (st->tx_begin) {
        sk_text_add(&all, "START TRANSACTION; ", 19);
        whats[nw++] = "begin";
    }
    for (size_t i = 0; i < st->deferred && nw < 63; i++)
        whats[nw++] = sk_sql_what(c->pend_q[i]);
    if (st->deferred) sk_text_add(&all, c->pend.p, c->pend.len);
    if (st->deferred && len) sk_text_add(&all, "; ", 2);
    sk_text_add(&all, text, len);
    whats[nw++] = what;
    int oom = all.oom || c->pend.oom;
    drop(st);
    if (oom) {
        free(all.p);
        return sk_store_set_err(st, SK_ENOMEM, "out of memory: %s", what);
    }
    int64_t t0 = sk_mono_ms();
    int rc = mysql_real_query(c->m, all.p, (unsigned long)all.len);
    free(all.p);
    if (rc != 0) return fail(st, whats[0], t0);
    MYSQL_RES *last = NULL;
    for (size_t i = 0;; i++) {
        MYSQL_RES *r = mysql_store_result(c->m);
        if (r) {
            if (last) mysql_free_result(last);
            last = r;
        } else if (mysql_field_count(c->m) != 0) {
            if (last) mysql_free_result(last);
            return fail(st, what, t0); /* rows announced, not read */
        } else if (changes) {
            *changes = (int64_t)mysql_affected_rows(c->m);
        }
        int next = mysql_next_result(c->m);
        if (next < 0) break;
        if (next > 0) {
            if (last) mysql_free_result(last);
            return fail(st, i + 1 < nw ? whats[i + 1] : what, t0);
        }
    }
    if (res)
        *res = last;
    else if (last)
        mysql_free_result(last);
    return 0;
}

static int exec(sk_store *st, const char *script, const char *what)
{
    return run(st, what, script, strlen(script), NULL, NULL);
}

/* Sends what waits (a BEGIN, deferred writes) alone. */
static int flush_waiting(sk_store *st, const char *what)
{
    if (!st->tx_begin && !st->deferred) return 0;
    if (!st->deferred) return exec(st, "START TRANSACTION", "begin");
    return run(st, what, "", 0, NULL, NULL);
}

static int end(sk_store *st, int commit)
{
    if (commit) return exec(st, "COMMIT", "commit");
    int rc = exec(st, "ROLLBACK", "rollback");
    if (rc) st->broken = 1;
    return rc;
}

/* ---- statements ---- */

static int prepare(sk_store *st, int q, size_t rows, size_t *got, struct sk_stmt **out)
{
    return sk_srv_prepare(st, MY(st)->text, q, rows, ROWS_MAX, sizeof **out, got, out);
}

/* A parameter as a literal: a number, NULL, or a quoted escaped string. */
static void add_val(MYSQL *m, struct sk_text *b, const struct sk_val *v)
{
    if (v->kind == SK_V_NULL) {
        sk_text_add(b, "NULL", 4);
    } else if (v->kind == SK_V_INT) {
        char n[24];
        sk_text_add(b, n, (size_t)snprintf(n, sizeof n, "%" PRId64, v->i));
    } else {
        size_t n = strlen(v->t);
        if (sk_text_room(b, 2 * n + 2) < 0) return;
        b->p[b->len++] = '\'';
        b->len += mysql_real_escape_string(m, b->p + b->len, v->t, (unsigned long)n);
        b->p[b->len++] = '\'';
        b->p[b->len] = 0;
    }
}

/* MariaDB's bulk execution of s: its 1-row statement prepared once per
 * session, run for s->rows parameter sets, bound column-wise. */
static int send_bulk(struct sk_stmt *s)
{
    sk_store *st = s->b.st;
    struct my *c = MY(st);
    const char *what = sk_sql_what(s->b.q);
    int64_t t0 = sk_mono_ms();
    int rc0 = flush_waiting(st, what);
    if (rc0) return rc0;
    if (!c->bulk) {
        const char *sql = c->text[s->b.q]; /* its 1-row text (prepare) */
        if (!(c->bulk = mysql_stmt_init(c->m)))
            return sk_store_set_err(st, SK_ENOMEM, "mysql: out of memory");
        if (mysql_stmt_prepare(c->bulk, sql, (unsigned long)strlen(sql)) != 0) {
            int rc = fail_of(st, what, t0, mysql_stmt_errno(c->bulk), mysql_stmt_sqlstate(c->bulk),
                             mysql_stmt_error(c->bulk));
            close_bulk(c);
            return rc;
        }
    }
    size_t n = s->b.rows, nc = (size_t)s->b.ncols;
    const char *types = sk_sql_types(s->b.q);
    MYSQL_BIND b[16];
    memset(b, 0, sizeof b);
    /* per column: the values (a pointer per row for text), lengths,
     * NULL indicators */
    void **vals = calloc(nc * n, sizeof(void *));
    long long *nums = calloc(nc * n, sizeof *nums);
    unsigned long *lens = calloc(nc * n, sizeof *lens);
    char *ind = calloc(nc * n, 1);
    int rc = 0;
    if (!vals || !nums || !lens || !ind || nc > 16)
        rc = sk_store_set_err(st, SK_ENOMEM, "out of memory: %s", what);
    for (size_t col = 0; rc == 0 && col < nc; col++) {
        for (size_t r = 0; r < n; r++) {
            const struct sk_val *v = &s->b.vals[r * nc + col];
            size_t k = col * n + r;
            ind[k] = v->kind == SK_V_NULL ? STMT_INDICATOR_NULL : STMT_INDICATOR_NONE;
            if (v->kind == SK_V_TEXT) {
                vals[k] = (void *)v->t;
                lens[k] = (unsigned long)strlen(v->t);
            } else {
                vals[k] = (void *)"";
                nums[k] = v->i;
            }
        }
        int text = types[col] == SK_SQL_TEXT;
        b[col].buffer_type = text ? MYSQL_TYPE_STRING : MYSQL_TYPE_LONGLONG;
        b[col].buffer = text ? (void *)(vals + col * n) : (void *)(nums + col * n);
        if (text) b[col].length = lens + col * n;
        b[col].u.indicator = ind + col * n;
    }
    unsigned rows = (unsigned)n;
    if (rc == 0 && (mysql_stmt_attr_set(c->bulk, STMT_ATTR_ARRAY_SIZE, &rows) != 0 ||
                    mysql_stmt_bind_param(c->bulk, b) != 0 || mysql_stmt_execute(c->bulk) != 0))
        rc = fail_of(st, what, t0, mysql_stmt_errno(c->bulk), mysql_stmt_sqlstate(c->bulk),
                     mysql_stmt_error(c->bulk));
    if (rc == 0) s->b.changes = (int64_t)mysql_stmt_affected_rows(c->bulk);
    free(vals);
    free(nums);
    free(lens);
    free(ind);
    return rc;
}

/* Sends s as text, its parameters escaped into it. */
static int send_text(struct sk_stmt *s)
{
    sk_store *st = s->b.st;
    struct my *c = MY(st);
    const char *what = sk_sql_what(s->b.q);
    if (st->broken || !c->m) return sk_srv_lost(st, what);
    int none;
    char *multi = s->b.ncols ? sk_sql_text(st, s->b.q, s->b.rows, &none) : NULL;
    const char *tmpl = s->b.ncols ? multi : c->text[s->b.q];
    if (!tmpl) return SK_ENOMEM;
    struct sk_text b = {0};
    size_t i = 0;
    for (const char *p = tmpl; *p;) {
        size_t run_ = strcspn(p, "?");
        sk_text_add(&b, p, run_);
        p += run_;
        if (*p != '?') break;
        static const struct sk_val null = {.kind = SK_V_NULL};
        add_val(c->m, &b, i < s->b.nvals ? &s->b.vals[i] : &null);
        i++;
        p++;
    }
    free(multi);
    int rc = 0;
    if (b.oom || !b.p)
        rc = sk_store_set_err(st, SK_ENOMEM, "out of memory: %s", what);
    else if (st->in_tx && (sk_sql_flags(s->b.q) & SK_SQL_DEFER)) {
        /* with the next round trip */
        if (SK_VEC_RESERVE(c->pend_q, c->pend_cap, st->deferred + 1, 8))
            rc = sk_store_set_err(st, SK_ENOMEM, "out of memory: %s", what);
        else {
            if (st->deferred) sk_text_add(&c->pend, "; ", 2);
            sk_text_add(&c->pend, b.p, b.len);
            c->pend_q[st->deferred++] = s->b.q;
        }
    } else
        rc = run(st, what, b.p, b.len, &s->res, &s->b.changes);
    free(b.p);
    return rc;
}

static int step(struct sk_stmt *s)
{
    if (!s->b.sent) {
        s->b.sent = 1;
        int bulk = (sk_sql_flags(s->b.q) & SK_SQL_BULK) && MY(s->b.st)->mariadb;
        if (bulk && (s->b.st->broken || !MY(s->b.st)->m))
            return sk_srv_lost(s->b.st, sk_sql_what(s->b.q));
        int rc = bulk ? send_bulk(s) : send_text(s);
        if (rc) return rc;
    }
    if (!s->res) return 0;
    s->row = mysql_fetch_row(s->res);
    s->lens = s->row ? mysql_fetch_lengths(s->res) : NULL;
    return s->row != NULL;
}

static int64_t col_i64(struct sk_stmt *s, int c)
{
    int64_t x = 0; /* NULL, or a column we declared BIGINT: a number */
    if (s->row[c]) sk_num_i64(s->row[c], s->lens ? s->lens[c] : strlen(s->row[c]), &x);
    return x;
}

static void col_text(struct sk_stmt *s, int c, char *dst, size_t cap)
{
    size_t n = s->row[c] && s->lens ? s->lens[c] : 0;
    if (n >= cap) n = cap - 1;
    if (n) memcpy(dst, s->row[c], n);
    dst[n] = 0;
}

static void finish(struct sk_stmt *s)
{
    if (s->res) mysql_free_result(s->res);
    sk_srv_free(s);
}

/* ---- connecting ---- */

static pthread_once_t lib_once = PTHREAD_ONCE_INIT;
static void lib_init(void)
{
    mysql_library_init(0, NULL, NULL); /* not thread-safe: once, before any mysql_init */
}

/* Keepalives and TCP_USER_TIMEOUT on the session's TCP socket: a host that
 * vanished (no RST) is given up in about T, not the kernel's 15 minutes. */
static void tune_socket(struct my *c)
{
    if (c->url->socket[0]) return;
    int fd = (int)mysql_get_socket(c->m);
    if (fd < 0) return;
    int on = 1, idle = 5, intvl = 2, cnt = 3;
    unsigned tmo = (unsigned)c->url->timeout_s * 1000;
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &tmo, sizeof tmo);
}

/* Library options from the URL (before mysql_real_connect). */
static void set_options(MYSQL *m, const struct sk_mysql_url *u)
{
    unsigned t = (unsigned)u->timeout_s,
             proto = u->socket[0] ? MYSQL_PROTOCOL_SOCKET : MYSQL_PROTOCOL_TCP;
    my_bool off = 0, on = 1;
    unsigned infile = 0;
    mysql_options(m, MYSQL_OPT_CONNECT_TIMEOUT, &t);
    mysql_options(m, MYSQL_OPT_READ_TIMEOUT, &t);
    mysql_options(m, MYSQL_OPT_WRITE_TIMEOUT, &t);
    mysql_options(m, MYSQL_OPT_RECONNECT, &off);
    mysql_options(m, MYSQL_OPT_LOCAL_INFILE, &infile);
    /* TCP unless a socket is named: "localhost" means TCP here too */
    mysql_options(m, MYSQL_OPT_PROTOCOL, &proto);
    mysql_options(m, MYSQL_SET_CHARSET_NAME, "utf8mb4");
    if (u->ssl_mode != SK_MYSQL_SSL_DISABLED)
        mysql_ssl_set(m, NULL, NULL, u->ssl_ca[0] ? u->ssl_ca : NULL, NULL, NULL);
    if (u->ssl_mode >= SK_MYSQL_SSL_REQUIRED) mysql_options(m, MYSQL_OPT_SSL_ENFORCE, &on);
    if (u->ssl_mode == SK_MYSQL_SSL_VERIFY_IDENTITY)
        mysql_options(m, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &on);
}

/* The session settings, one round trip. */
static int setup_session(sk_store *st)
{
    struct my *c = MY(st);
    int t = c->url->timeout_s;
    char sql[512];
    snprintf(sql, sizeof sql,
             "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED;"
             "SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,"
             "ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION';"
             "SET SESSION innodb_lock_wait_timeout = %d;"
             "SET SESSION %s",
             t > 1 ? t - 1 : 1, c->mariadb ? "max_statement_time = " : "max_execution_time = ");
    size_t n = strlen(sql);
    if (c->mariadb)
        snprintf(sql + n, sizeof sql - n, "%d.5", t - 1);
    else
        snprintf(sql + n, sizeof sql - n, "%d", t * 1000 - 500);
    return exec(st, sql, "set up the session");
}

/* One connection attempt with c->url. */
static int open_session(sk_store *st, const char *what)
{
    struct my *c = MY(st);
    const struct sk_mysql_url *u = c->url;
    close_bulk(c);
    drop(st);
    st->in_tx = 0;
    if (c->m) mysql_close(c->m);
    c->m = mysql_init(NULL);
    if (!c->m) return sk_store_set_err(st, SK_ENOMEM, "mysql: out of memory");
    set_options(c->m, u);
    unsigned long flags = CLIENT_FOUND_ROWS | CLIENT_MULTI_STATEMENTS;
    if (!mysql_real_connect(c->m, u->socket[0] ? "localhost" : u->host, u->user[0] ? u->user : NULL,
                            u->password, u->dbname, u->socket[0] ? 0 : (unsigned)u->port,
                            u->socket[0] ? u->socket : NULL, flags)) {
        st->broken = 1;
        return sk_srv_fail_line(st, SK_EDB, what, mysql_error(c->m), SK_STORE_ERR_MAX, 0);
    }
    const char *info = mysql_get_server_info(c->m);
    c->mariadb = info && strstr(info, "MariaDB") != NULL;
    if (mysql_get_server_version(c->m) < (c->mariadb ? MARIADB_MIN : MYSQL_MIN)) {
        st->broken = 1;
        return sk_store_fail(st, SK_EDB, what,
                             "server %.60s is too old: seckill needs MariaDB >= 10.2.1 or MySQL"
                             " >= 8.0.16 (enforced CHECK constraints)",
                             info ? info : "?");
    }
    tune_socket(c);
    st->broken = 0;
    int rc = setup_session(st);
    if (rc) st->broken = 1;
    return rc;
}

/* A session marked broken, or one whose idle socket became readable (the
 * server said goodbye), is replaced first. */
static int enter(sk_store *st)
{
    struct my *c = MY(st);
    int bad = st->broken || !c->m;
    /* Idle and readable: the server closed the session (a shutdown, a
     * restart, a kill). Reconnecting costs one connect; using a dead
     * session would fail this call. (Not under TLS: a record such as a
     * session ticket may wait unread; a dead TLS session fails one call
     * and is replaced.) */
    if (!bad && c->url->ssl_mode == SK_MYSQL_SSL_DISABLED)
        bad = sk_srv_idle_closed((int)mysql_get_socket(c->m));
    return bad ? open_session(st, "connection lost and reconnect failed") : 0;
}

static int open_(sk_store *st, const char *url, int waiting)
{
    if (strlen(url) > SK_MYSQL_URL_MAX)
        return sk_store_set_err(st, SK_EINVAL, "mysql URL too long");
    pthread_once(&lib_once, lib_init);
    struct my *c = calloc(1, sizeof *c);
    if (c) c->url = calloc(1, sizeof *c->url);
    if (!c || !c->url) {
        free(c);
        return sk_store_set_err(st, SK_ENOMEM, "mysql: out of memory");
    }
    st->conn = c;
    char err[200];
    if (sk_mysql_url_parse(c->url, url, strlen(url), err, sizeof err) < 0)
        return sk_store_set_err(st, SK_EINVAL, "%s", err);
    sk_mysql_url_where(c->url, st->where, sizeof st->where);
    st->timeout_s = c->url->timeout_s;
    if (waiting == SK_STORE_LATER) return sk_store_fail(st, SK_EDB, "open", "not connected yet");
    return open_session(st, "cannot connect");
}

static void close_(sk_store *st)
{
    struct my *c = MY(st);
    if (!c) return;
    close_bulk(c);
    if (c->m) mysql_close(c->m);
    if (c->url) {
        explicit_bzero(c->url, sizeof *c->url);
        free(c->url);
    }
    for (int q = 0; q < Q_COUNT; q++)
        free(c->text[q]);
    free(c->pend.p);
    free(c->pend_q);
    free(c);
    st->conn = NULL;
}

const struct sk_store_driver sk_store_mysql =
    SK_STORE_DRIVER("mysql", SK_MYSQL, NULL, drop, sk_srv_bind, sk_srv_changes);
