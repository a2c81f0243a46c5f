/* bench_mysql.c - the benchmarks' admin session to MySQL / MariaDB
 * (bench_mysql.h). */
#include "bench/bench_mysql.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mysql.h>

#include "store/mysql_url.h"

struct st_mysql *sk_bench_my_connect(const char *url, char *err, size_t cap)
{
    struct sk_mysql_url u;
    if (sk_mysql_url_parse(&u, url, strlen(url), err, cap) < 0) return NULL;
    MYSQL *m = mysql_init(NULL);
    if (!m) {
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    unsigned t = (unsigned)u.timeout_s * 6,
             proto = u.socket[0] ? MYSQL_PROTOCOL_SOCKET : MYSQL_PROTOCOL_TCP;
    mysql_options(m, MYSQL_OPT_CONNECT_TIMEOUT, &t);
    mysql_options(m, MYSQL_OPT_PROTOCOL, &proto);
    mysql_options(m, MYSQL_SET_CHARSET_NAME, "utf8mb4");
    if (!mysql_real_connect(m, u.socket[0] ? "localhost" : u.host, u.user[0] ? u.user : NULL,
                            u.password, u.dbname, u.socket[0] ? 0 : (unsigned)u.port,
                            u.socket[0] ? u.socket : NULL, CLIENT_MULTI_STATEMENTS)) {
        snprintf(err, cap, "mysql: cannot connect: %s", mysql_error(m));
        mysql_close(m);
        return NULL;
    }
    return m;
}

void sk_bench_my_close(struct st_mysql *m)
{
    if (m) mysql_close(m);
}

int sk_bench_my_exec(struct st_mysql *m, const char *sql, char *err, size_t cap)
{
    if (mysql_query(m, sql) != 0) goto bad;
    for (;;) {
        MYSQL_RES *r = mysql_store_result(m);
        if (r) mysql_free_result(r);
        int next = mysql_next_result(m);
        if (next < 0) return 0;
        if (next > 0) goto bad;
    }
bad:
    snprintf(err, cap, "mysql: %.80s: %s", sql, mysql_error(m));
    return -1;
}

long long sk_bench_my_int(struct st_mysql *m, const char *sql)
{
    long long v = -1;
    if (mysql_query(m, sql) != 0) return -1;
    MYSQL_RES *r = mysql_store_result(m);
    MYSQL_ROW row = r ? mysql_fetch_row(r) : NULL;
    if (row && row[0]) v = strtoll(row[0], NULL, 10);
    if (r) mysql_free_result(r);
    return v;
}

void sk_bench_my_describe(struct st_mysql *m, char *out, size_t cap)
{
    snprintf(out, cap, "?");
    if (mysql_query(m, "SELECT @@version, @@innodb_flush_log_at_trx_commit,"
                       " @@innodb_doublewrite, @@log_bin, @@sync_binlog,"
                       " @@innodb_buffer_pool_size DIV 1048576, @@innodb_flush_method") != 0)
        return;
    MYSQL_RES *r = mysql_store_result(m);
    MYSQL_ROW w = r ? mysql_fetch_row(r) : NULL;
    if (w)
        snprintf(out, cap,
                 "%s: innodb_flush_log_at_trx_commit=%s, innodb_doublewrite=%s, log_bin=%s "
                 "(sync_binlog=%s), innodb_buffer_pool_size=%sM, innodb_flush_method=%s",
                 w[0], w[1], w[2], w[3], w[4], w[5], w[6] ? w[6] : "?");
    if (r) mysql_free_result(r);
}

int sk_bench_my_url_with_db(const char *url, const char *db, char *out, size_t cap)
{
    const char *scheme = strstr(url, "://");
    const char *slash = scheme ? strchr(scheme + 3, '/') : NULL;
    if (!slash) return -1;
    const char *q = strchr(slash, '?');
    int n = snprintf(out, cap, "%.*s/%s%s", (int)(slash - url), url, db, q ? q : "");
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}
