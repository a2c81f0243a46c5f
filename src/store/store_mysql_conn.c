/* store_mysql_conn.c - the session of the MySQL / MariaDB backend: connect
 * from the URL (mysql_url.h), set the session up, run statements with
 * every wait bounded, map errors, reconnect on the next call.
 *
 * Client: MariaDB Connector/C, blocking API. Every call of this backend
 * runs on a thread that may block (a store pool thread, the order worker,
 * a CLI), never on an event loop, so the blocking calls with the
 * library's own timeouts bound every wait as tightly as a poll loop
 * would: connect_timeout (T s, default 5) for connecting, the same T as
 * read and write timeout of every statement (a stopped or frozen server
 * never answers, so only the client can give up), TCP keepalives and
 * TCP_USER_TIMEOUT so a vanished host is noticed in T too. The
 * non-blocking API (mysql_real_query_start/_cont) would only pay for
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
 * changes and the stock repair rely on every statement reading the newest
 * committed rows), strict SQL mode (a value out of range or too long is
 * an error, never truncated), utf8mb4, CLIENT_FOUND_ROWS (an UPDATE
 * reports the rows it matched, as PostgreSQL does, not only those it
 * changed), CLIENT_MULTI_STATEMENTS (a transaction's fixed steps go in
 * one round trip). */
#include "store/store_mysql_int.h"

#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <errmsg.h>
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

/* The library's message on one line, at most cap bytes. */
static void message(MYSQL *m, char *dst, size_t cap)
{
    const char *msg = m ? mysql_error(m) : "";
    size_t n = strcspn(msg, "\n");
    snprintf(dst, cap, "%.*s", (int)n, msg);
}

/* The failure e (SQLSTATE sqlstate, message msg) of the last call on the
 * session -> SK code; t0 is when the statement was sent (a lost
 * connection after the whole read timeout is a server that did not
 * answer). */
static int fail_of(sk_store *st, const char *what, int64_t t0, unsigned e, const char *sqlstate,
                   const char *msg)
{
    char line[320];
    if (!msg) msg = "";
    snprintf(line, sizeof line, "%.*s", (int)strcspn(msg, "\n"), msg);
    int code = code_of(e, sqlstate);
    if (e >= CR_MIN_ERROR && e <= CR_MAX_ERROR) st->my_broken = 1;
    int timeout_ms = st->my_url->timeout_s * 1000;
    if ((e == CR_SERVER_LOST || e == CR_SERVER_GONE_ERROR) && sk_mono_ms() - t0 >= timeout_ms - 100)
        return sk_store_set_err(st, SK_EDB,
                                "mysql %s: %s: no answer within %d ms (server down or frozen)",
                                st->my_where, what, timeout_ms);
    return sk_store_set_err(st, code, "mysql %s: %s: %s", st->my_where, what,
                            line[0] ? line : "connection lost");
}

/* The failure of the last call on the session (fail_of). */
static int fail(sk_store *st, const char *what, int64_t t0)
{
    return fail_of(st, what, t0, mysql_errno(st->my), mysql_sqlstate(st->my), mysql_error(st->my));
}

/* Closes the session's prepared statement, if any. */
static void close_bulk(sk_store *st)
{
    if (st->my_bulk) mysql_stmt_close(st->my_bulk);
    st->my_bulk = NULL;
}

/* ---- connecting ---- */

static pthread_once_t lib_once = PTHREAD_ONCE_INIT;
static void lib_init(void)
{
    mysql_library_init(0, NULL, NULL); /* not thread-safe: once, before any mysql_init */
}

/* Keepalives and TCP_USER_TIMEOUT on the session's TCP socket: a host that
 * vanished (no RST) is given up in about T, not the kernel's 15 minutes. */
static void tune_socket(sk_store *st)
{
    if (st->my_url->socket[0]) return;
    int fd = (int)mysql_get_socket(st->my);
    if (fd < 0) return;
    int on = 1, idle = 5, intvl = 2, cnt = 3;
    unsigned tmo = (unsigned)st->my_url->timeout_s * 1000;
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
    int t = st->my_url->timeout_s;
    char sql[512];
    snprintf(sql, sizeof sql,
             "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED;"
             "SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,"
             "ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION';"
             "SET SESSION innodb_lock_wait_timeout = %d;"
             "SET SESSION %s",
             t > 1 ? t - 1 : 1, st->my_mariadb ? "max_statement_time = " : "max_execution_time = ");
    size_t n = strlen(sql);
    if (st->my_mariadb)
        snprintf(sql + n, sizeof sql - n, "%d.5", t - 1);
    else
        snprintf(sql + n, sizeof sql - n, "%d", t * 1000 - 500);
    return sk_my_cmd(st, "set up the session", sql);
}

/* One connection attempt with st->my_url. */
static int open_session(sk_store *st, const char *what)
{
    const struct sk_mysql_url *u = st->my_url;
    close_bulk(st);
    if (st->my) mysql_close(st->my);
    st->my = mysql_init(NULL);
    if (!st->my) return sk_store_set_err(st, SK_ENOMEM, "mysql: out of memory");
    set_options(st->my, u);
    unsigned long flags = CLIENT_FOUND_ROWS | CLIENT_MULTI_STATEMENTS;
    if (!mysql_real_connect(st->my, u->socket[0] ? "localhost" : u->host,
                            u->user[0] ? u->user : NULL, u->password, u->dbname,
                            u->socket[0] ? 0 : (unsigned)u->port, u->socket[0] ? u->socket : NULL,
                            flags)) {
        char line[320];
        message(st->my, line, sizeof line);
        st->my_broken = 1;
        return sk_store_set_err(st, SK_EDB, "mysql %s: %s: %s", st->my_where, what, line);
    }
    const char *info = mysql_get_server_info(st->my);
    st->my_mariadb = info && strstr(info, "MariaDB") != NULL;
    st->my_version = mysql_get_server_version(st->my);
    if (st->my_version < (st->my_mariadb ? MARIADB_MIN : MYSQL_MIN)) {
        st->my_broken = 1;
        return sk_store_set_err(st, SK_EDB,
                                "mysql %s: server %.60s is too old: seckill needs MariaDB >= "
                                "10.2.1 or MySQL >= 8.0.16 (enforced CHECK constraints)",
                                st->my_where, info ? info : "?");
    }
    tune_socket(st);
    st->my_broken = 0;
    int rc = setup_session(st);
    if (rc) st->my_broken = 1;
    return rc;
}

int sk_my_connect(sk_store *st, const char *url, int now)
{
    pthread_once(&lib_once, lib_init);
    st->my_url = calloc(1, sizeof *st->my_url);
    if (!st->my_url) return sk_store_set_err(st, SK_ENOMEM, "mysql: out of memory");
    char err[200];
    if (sk_mysql_url_parse(st->my_url, url, strlen(url), err, sizeof err) < 0)
        return sk_store_set_err(st, SK_EINVAL, "%s", err);
    sk_mysql_url_where(st->my_url, st->my_where, sizeof st->my_where);
    if (!now) {
        st->my_broken = 1; /* the next call opens the session */
        return sk_store_set_err(st, SK_EDB, "mysql %s: not connected yet", st->my_where);
    }
    return open_session(st, "cannot connect");
}

void sk_my_disconnect(sk_store *st)
{
    close_bulk(st);
    if (st->my) mysql_close(st->my);
    st->my = NULL;
    if (st->my_url) {
        explicit_bzero(st->my_url, sizeof *st->my_url);
        free(st->my_url);
    }
    st->my_url = NULL;
}

int sk_my_enter(sk_store *st)
{
    int bad = st->my_broken || !st->my;
    if (!bad && st->my_url->ssl_mode == SK_MYSQL_SSL_DISABLED) {
        /* Idle and readable: the server closed the session (a shutdown, a
         * restart, a kill); nothing else arrives unasked. Reconnecting
         * costs one connect; using a dead session would fail this call.
         * (Not under TLS: a record such as a session ticket may wait
         * unread; a dead TLS session fails one call and is replaced.) */
        struct pollfd p = {.fd = (int)mysql_get_socket(st->my), .events = POLLIN};
        if (p.fd < 0 || poll(&p, 1, 0) != 0) bad = 1;
    }
    int rc = bad ? open_session(st, "connection lost and reconnect failed") : 0;
    /* an open made without a connection owes its migrations */
    return rc == 0 && st->owed ? sk_store_pay_owed(st) : rc;
}

/* ---- statements ---- */

int sk_my_run(sk_store *st, const char *what, const char *sql, size_t len, MYSQL_RES **res,
              long long *affected, size_t naff)
{
    if (res) *res = NULL;
    if (st->my_broken || !st->my)
        return sk_store_set_err(st, SK_EDB, "mysql %s: %s: connection lost", st->my_where, what);
    int64_t t0 = sk_mono_ms();
    if (mysql_real_query(st->my, sql, (unsigned long)len) != 0) return fail(st, what, t0);
    MYSQL_RES *last = NULL;
    for (size_t i = 0;; i++) {
        MYSQL_RES *r = mysql_store_result(st->my);
        if (r) {
            if (last) mysql_free_result(last);
            last = r;
            if (i < naff) affected[i] = -1;
        } else if (mysql_field_count(st->my) != 0) {
            if (last) mysql_free_result(last);
            return fail(st, what, t0); /* rows announced, not read */
        } else if (i < naff) {
            affected[i] = (long long)mysql_affected_rows(st->my);
        }
        int next = mysql_next_result(st->my);
        if (next < 0) break;
        if (next > 0) {
            if (last) mysql_free_result(last);
            return fail(st, what, t0);
        }
    }
    if (res)
        *res = last;
    else if (last)
        mysql_free_result(last);
    return 0;
}

int sk_my_bulk(sk_store *st, const char *what, const char *sql, MYSQL_BIND *b, unsigned rows)
{
    if (st->my_broken || !st->my)
        return sk_store_set_err(st, SK_EDB, "mysql %s: %s: connection lost", st->my_where, what);
    int64_t t0 = sk_mono_ms();
    if (!st->my_bulk) {
        if (!(st->my_bulk = mysql_stmt_init(st->my)))
            return sk_store_set_err(st, SK_ENOMEM, "mysql: out of memory");
        if (mysql_stmt_prepare(st->my_bulk, sql, (unsigned long)strlen(sql)) != 0) {
            int rc = fail_of(st, what, t0, mysql_stmt_errno(st->my_bulk),
                             mysql_stmt_sqlstate(st->my_bulk), mysql_stmt_error(st->my_bulk));
            close_bulk(st);
            return rc;
        }
    }
    MYSQL_STMT *s = st->my_bulk;
    if (mysql_stmt_attr_set(s, STMT_ATTR_ARRAY_SIZE, &rows) != 0 ||
        mysql_stmt_bind_param(s, b) != 0 || mysql_stmt_execute(s) != 0)
        return fail_of(st, what, t0, mysql_stmt_errno(s), mysql_stmt_sqlstate(s),
                       mysql_stmt_error(s));
    return 0;
}

int sk_my_cmd(sk_store *st, const char *what, const char *sql)
{
    return sk_my_run(st, what, sql, strlen(sql), NULL, NULL, 0);
}

static int commit(sk_store *st, const char *what)
{
    return sk_my_cmd(st, what, "COMMIT");
}

static void rollback(sk_store *st)
{
    if (!st->my_broken && sk_my_cmd(st, "rollback", "ROLLBACK") != 0) st->my_broken = 1;
}

int sk_my_finish_tx(sk_store *st, int rc, const char *what)
{
    return sk_store_finish_tx(st, rc, what, commit, rollback);
}

uint64_t sk_my_insert_id(sk_store *st)
{
    return (uint64_t)mysql_insert_id(st->my);
}

/* ---- statement text ---- */

static void reserve(struct sk_my_sql *b, size_t more)
{
    if (!b->oom && SK_VEC_RESERVE(b->p, b->cap, b->len + more + 1, 1024)) b->oom = 1;
}

void sk_my_sql_add(struct sk_my_sql *b, const char *s)
{
    size_t n = strlen(s);
    reserve(b, n);
    if (b->oom) return;
    memcpy(b->p + b->len, s, n + 1);
    b->len += n;
}

void sk_my_sql_addf(struct sk_my_sql *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = 1;
        return;
    }
    reserve(b, (size_t)n);
    if (b->oom) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void sk_my_sql_str(sk_store *st, struct sk_my_sql *b, const char *s, size_t n)
{
    reserve(b, 2 * n + 2);
    if (b->oom) return;
    b->p[b->len++] = '\'';
    b->len += mysql_real_escape_string(st->my, b->p + b->len, s, (unsigned long)n);
    b->p[b->len++] = '\'';
    b->p[b->len] = 0;
}

void sk_my_sql_strz(sk_store *st, struct sk_my_sql *b, const char *s)
{
    sk_my_sql_str(st, b, s, strlen(s));
}

void sk_my_sql_free(struct sk_my_sql *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

int sk_my_run_sql(sk_store *st, const char *what, struct sk_my_sql *b, MYSQL_RES **res,
                  long long *affected, size_t naff)
{
    if (res) *res = NULL;
    if (b->oom || !b->p)
        return sk_store_set_err(st, SK_ENOMEM, "mysql %s: %s: out of memory", st->my_where, what);
    return sk_my_run(st, what, b->p, b->len, res, affected, naff);
}

/* ---- rows ---- */

int64_t sk_my_i64(MYSQL_ROW r, int c)
{
    int64_t x = 0; /* NULL, or a column we declared BIGINT: a number */
    if (r[c]) sk_num_i64(r[c], strlen(r[c]), &x);
    return x;
}

void sk_my_text(MYSQL_RES *res, MYSQL_ROW r, int c, char *dst, size_t cap)
{
    unsigned long *len = mysql_fetch_lengths(res);
    size_t n = r[c] && len ? len[c] : 0;
    if (n >= cap) n = cap - 1;
    if (n) memcpy(dst, r[c], n);
    dst[n] = 0;
}

static int64_t row_i64(const struct sk_store_row *r, int col)
{
    return sk_my_i64(r->aux, col);
}

static void row_text(const struct sk_store_row *r, int col, char *dst, size_t cap)
{
    sk_my_text((MYSQL_RES *)r->res, r->aux, col, dst, cap);
}

void sk_my_read_row(MYSQL_RES *res, MYSQL_ROW row, sk_store_row_reader *read, void *dst)
{
    read(&(struct sk_store_row){.res = res, .aux = row, .i64 = row_i64, .text = row_text}, dst);
}

int sk_my_query(sk_store *st, const char *what, struct sk_my_sql *b, MYSQL_RES **r)
{
    int rc = sk_my_run_sql(st, what, b, r, NULL, 0);
    sk_my_sql_free(b);
    return rc;
}

int sk_my_each_row(sk_store *st, const char *what, struct sk_my_sql *b,
                   void (*fn)(MYSQL_RES *res, MYSQL_ROW row, void *arg), void *arg)
{
    MYSQL_RES *r;
    int rc = sk_my_query(st, what, b, &r);
    if (rc || !r) return rc;
    for (MYSQL_ROW row; (row = mysql_fetch_row(r)) != NULL;)
        fn(r, row, arg);
    mysql_free_result(r);
    return 0;
}

int sk_my_read_all(sk_store *st, const char *what, struct sk_my_sql *b, size_t size,
                   sk_store_row_reader *read, void **out, size_t *n)
{
    MYSQL_RES *r;
    int rc = sk_my_query(st, what, b, &r);
    if (rc) return rc;
    size_t rows = r ? (size_t)mysql_num_rows(r) : 0;
    char *arr = rows ? calloc(rows, size) : NULL;
    if (rows && !arr) {
        mysql_free_result(r);
        return sk_store_set_err(st, SK_ENOMEM, "out of memory: %s", what);
    }
    size_t k = 0;
    for (MYSQL_ROW row; k < rows && (row = mysql_fetch_row(r)) != NULL; k++)
        sk_my_read_row(r, row, read, arr + k * size);
    if (r) mysql_free_result(r);
    *out = arr;
    *n = k;
    return 0;
}
