/* mysql_harness.c - private MariaDB servers for the tests
 * (mysql_harness.h): the servers are mysql_spawn.c's; here are the
 * template, the shared server the runner starts through its hooks, the
 * test-failing wrappers and raw SQL. */
#include "support/mysql_harness.h"
#include "support/proc_watch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mysql.h>

#include "core/clock.h"
#include "store/mysql_url.h"
#include "support/harness.h"

/* Speed for tests: a commit is written to the OS, fsynced once a second. */
static const char *const settings[] = {"innodb-flush-log-at-trx-commit=2", "innodb-doublewrite=0",
                                       "innodb-buffer-pool-size=64M", NULL};

static struct sk_mysql_spawn tmpl; /* installed data/, never running */

static char used_files[32][200];
static int nused;

static struct sk_th_my shared;
static int shared_state; /* 0 not started, 1 up, -1 failed (shared_err) */
static char shared_err[600];

void sk_th_my_use_file(const char *file)
{
    if (nused < 32) snprintf(used_files[nused++], sizeof used_files[0], "%s", file);
}

static int make_template(char *err, size_t cap)
{
    if (tmpl.dir[0]) return 0;
    int64_t t0 = sk_mono_ms();
    if (sk_mysql_spawn_init(&tmpl) < 0) {
        snprintf(err, cap, "%s", tmpl.errstr);
        return -1;
    }
    printf("# MariaDB: mariadb-install-db of the template took %lld ms\n",
           (long long)(sk_mono_ms() - t0));
    return 0;
}

static int start(struct sk_th_my *m, char *err, size_t cap)
{
    memset(m, 0, sizeof *m);
    if (make_template(err, cap) < 0) return -1;
    if (sk_mysql_spawn_clone(&m->srv, &tmpl) < 0 || sk_mysql_spawn_launch(&m->srv, settings) < 0) {
        snprintf(err, cap, "%s", m->srv.errstr);
        sk_mysql_spawn_stop(&m->srv);
        return -1;
    }
    return 0;
}

static int file_uses_my(const char *file)
{
    for (int i = 0; i < nused; i++)
        if (!strcmp(used_files[i], file)) return 1;
    return 0;
}

static void before_test(const char *name, const char *file)
{
    (void)name;
    if (shared_state != 0 || !file_uses_my(file)) return;
    int64_t t0 = sk_mono_ms();
    if (start(&shared, shared_err, sizeof shared_err) < 0) {
        shared_state = -1;
        printf("# MariaDB: shared server failed to start: %s\n", shared_err);
        return;
    }
    shared_state = 1;
    printf("# MariaDB: shared server on port %d ready %lld ms after the start request\n",
           shared.srv.port, (long long)(sk_mono_ms() - t0));
}

static void at_exit(void)
{
    if (shared_state == 1) sk_mysql_spawn_stop(&shared.srv);
    sk_mysql_spawn_stop(&tmpl);
}

__attribute__((constructor)) static void register_hooks(void)
{
    sk_th_add_hooks(before_test, at_exit);
}

const char *sk_th_my_url(void)
{
    if (shared_state == 0) {
        fprintf(stderr, "    note: add SK_TH_MY_USED to this test file to share one server\n");
        shared_state = start(&shared, shared_err, sizeof shared_err) < 0 ? -1 : 1;
    }
    if (shared_state < 0) sk_th_fail(__FILE__, __LINE__, "MariaDB test server: %s", shared_err);
    return shared.srv.url;
}

const char *sk_th_my_socket(void)
{
    sk_th_my_url();
    return shared.srv.sock;
}

/* A connection to the database of url (multi-statements on). */
static MYSQL *connect_url(const char *url)
{
    struct sk_mysql_url u;
    char err[200];
    if (sk_mysql_url_parse(&u, url, strlen(url), err, sizeof err) < 0)
        sk_th_fail(__FILE__, __LINE__, "%s", err);
    MYSQL *m = mysql_init(NULL);
    unsigned t = 5, proto = MYSQL_PROTOCOL_TCP;
    mysql_options(m, MYSQL_OPT_CONNECT_TIMEOUT, &t);
    mysql_options(m, MYSQL_OPT_PROTOCOL, &proto);
    mysql_options(m, MYSQL_SET_CHARSET_NAME, "utf8mb4");
    if (!mysql_real_connect(m, u.host, u.user, u.password, u.dbname, (unsigned)u.port, NULL,
                            CLIENT_MULTI_STATEMENTS))
        sk_th_fail(__FILE__, __LINE__, "connect %s: %s", url, mysql_error(m));
    return m;
}

void sk_th_my_create_db(const struct sk_th_my *m, const char *name, char *url_out, size_t cap)
{
    MYSQL *c = connect_url(m->srv.url);
    char sql[160];
    snprintf(sql, sizeof sql, "CREATE DATABASE `%s`", name);
    if (mysql_query(c, sql) != 0) sk_th_fail(__FILE__, __LINE__, "%s: %s", sql, mysql_error(c));
    mysql_close(c);
    snprintf(url_out, cap, "mysql://root@127.0.0.1:%d/%s", m->srv.port, name);
}

void sk_th_my_fresh_db(char *url_out, size_t cap)
{
    sk_th_my_url();
    char name[40];
    snprintf(name, sizeof name, "t%llu", (unsigned long long)sk_th_unique_id());
    sk_th_my_create_db(&shared, name, url_out, cap);
}

/* The URL without its parameters (the raw helpers take no timeout). */
static void base_url(const char *url, char *out, size_t cap)
{
    snprintf(out, cap, "%.*s", (int)strcspn(url, "?"), url);
}

int sk_th_my_sql(const char *url, const char *sql)
{
    char b[400];
    base_url(url, b, sizeof b);
    MYSQL *c = connect_url(b);
    int rc = 0;
    if (mysql_query(c, sql) == 0) {
        for (;;) {
            MYSQL_RES *r = mysql_store_result(c);
            if (r) mysql_free_result(r);
            int next = mysql_next_result(c);
            if (next < 0) break;
            if (next > 0) {
                rc = -2;
                break;
            }
        }
    } else {
        rc = -2;
    }
    if (rc == -2) {
        const char *state = mysql_sqlstate(c);
        rc = !strncmp(state, "23", 2) || !strncmp(state, "22", 2) ? 1 : -1;
        if (rc < 0) fprintf(stderr, "    raw SQL failed: %s\n", mysql_error(c));
    }
    mysql_close(c);
    return rc;
}

long long sk_th_my_int(const char *url, const char *sql)
{
    char b[400];
    base_url(url, b, sizeof b);
    MYSQL *c = connect_url(b);
    long long v = -1;
    MYSQL_RES *r = NULL;
    MYSQL_ROW row;
    if (mysql_query(c, sql) != 0 || !(r = mysql_store_result(c)) || !(row = mysql_fetch_row(r)))
        sk_th_fail(__FILE__, __LINE__, "%s: %s", sql, mysql_error(c));
    v = row[0] ? strtoll(row[0], NULL, 10) : 0;
    mysql_free_result(r);
    mysql_close(c);
    return v;
}

struct sk_th_my_held {
    MYSQL *c;
};

struct sk_th_my_held *sk_th_my_hold(const char *url, const char *sql)
{
    char b[400];
    base_url(url, b, sizeof b);
    struct sk_th_my_held *h = calloc(1, sizeof *h);
    if (!h) sk_th_fail(__FILE__, __LINE__, "out of memory");
    h->c = connect_url(b);
    if (mysql_query(h->c, sql) != 0)
        sk_th_fail(__FILE__, __LINE__, "%s: %s", sql, mysql_error(h->c));
    for (int next = 0; next == 0; next = mysql_next_result(h->c)) {
        MYSQL_RES *r = mysql_store_result(h->c);
        if (r) mysql_free_result(r);
    }
    if (mysql_errno(h->c)) sk_th_fail(__FILE__, __LINE__, "%s: %s", sql, mysql_error(h->c));
    return h;
}

void sk_th_my_release(struct sk_th_my_held *h)
{
    mysql_close(h->c);
    free(h);
}

void sk_th_my_start(struct sk_th_my *m)
{
    char err[600];
    if (start(m, err, sizeof err) < 0)
        sk_th_fail(__FILE__, __LINE__, "MariaDB test server: %s", err);
}

void sk_th_my_stop(struct sk_th_my *m)
{
    sk_mysql_spawn_halt(&m->srv, 0);
}

void sk_th_my_kill(struct sk_th_my *m)
{
    sk_mysql_spawn_halt(&m->srv, 1);
}

void sk_th_my_restart(struct sk_th_my *m)
{
    sk_mysql_spawn_halt(&m->srv, 0);
    if (sk_mysql_spawn_launch(&m->srv, settings) < 0)
        sk_th_fail(__FILE__, __LINE__, "MariaDB restart: %s", m->srv.errstr);
}

void sk_th_my_freeze(struct sk_th_my *m, int frozen)
{
    sk_mysql_spawn_freeze(&m->srv, frozen);
    /* a stop signal lands asynchronously: on a loaded machine a thread of
     * the server could still answer a request sent right after kill() */
    if (frozen)
        CHECK_MSG(sk_th_proc_wait_stopped(m->srv.pid, 5000), "mariadbd %d did not stop",
                  (int)m->srv.pid);
}
