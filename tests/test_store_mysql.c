/* test_store_mysql.c - what only the MySQL / MariaDB store has, on real
 * mariadbd servers (the behaviours every backend shares are in
 * test_store_backends.c): the URL forms (mariadb://, ?socket=), open errors
 * (unreachable, wrong password, unknown database, malformed URL) that are
 * clear, bounded and never print the password, from the library and from
 * the CLI with their exit codes; the store under a server stopped, frozen
 * and killed -9; a user holding only the grants the README names; an
 * end-to-end sale through `seckill serve --db mysql://...` with pay,
 * cancel, a late pay and the sweeper's release, reconcile consistent; and
 * the rollback guard replaying from MariaDB after Redis lost its data. */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "core/clock.h"
#include "core/error.h"
#include "engine/activity.h"
#include "engine/stock.h"
#include "store/store.h"
#include "support/buyer_http.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/http_client.h"
#include "support/mysql_harness.h"
#include "support/sale_env.h"
#include "support/sql_backend_checks.h"
#include "support/store_faults.h"

#include <stdatomic.h>

#define N_MIGRATIONS 14 /* what this binary applies */

SK_TH_MY_USED

#define ADMIN "Authorization: Bearer " SK_TH_ADMIN_TOKEN "\r\n"

static sk_store *open_ok(const char *url)
{
    sk_store *st;
    char err[512];
    CHECK_MSG(sk_store_open(&st, url, err, sizeof err) == 0, "open %s: %s", url, err);
    return st;
}

static void add_activity(sk_store *st, uint64_t id, int64_t stock)
{
    struct sk_activity a;
    sk_activity_init(&a);
    a.id = id;
    snprintf(a.name, sizeof a.name, "mysql sale %" PRIu64, id);
    a.stock = stock;
    a.per_user_limit = 5;
    a.start_ms = 1795946400000;
    a.end_ms = a.start_ms + 3600 * 1000;
    a.created_ms = 1795940000000;
    sk_activity_apply_defaults(&a);
    CHECK_MSG(sk_store_activity_insert(st, &a) == 0, "insert: %s", sk_store_errstr(st));
}

/* The database name of a URL made by the harness ("...:<port>/<name>"). */
static const char *db_name(const char *url)
{
    return strrchr(url, '/') + 1;
}

/* A user with a password and exactly the grants the README names, on the
 * database of url; its URL into out. */
static void grant_user(const char *url, const char *user, const char *pw, char *out, size_t cap)
{
    char sql[600];
    snprintf(sql, sizeof sql,
             "CREATE USER '%s'@'127.0.0.1' IDENTIFIED BY '%s';"
             "CREATE USER '%s'@'localhost' IDENTIFIED BY '%s';"
             "GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER, INDEX ON `%s`.*"
             " TO '%s'@'127.0.0.1', '%s'@'localhost'",
             user, pw, user, pw, db_name(url), user, user);
    CHECK_EQ(sk_th_my_sql(url, sql), 0);
    int port = atoi(strrchr(url, ':') + 1);
    snprintf(out, cap, "mysql://%s:%s@127.0.0.1:%d/%s", user, pw, port, db_name(url));
}

SK_TEST(store_mysql_open_errors_are_clear_bounded_and_never_echo_the_password)
{
    char good[300], url[400], err[512];
    sk_th_my_fresh_db(good, sizeof good);
    int port = atoi(strrchr(good, ':') + 1);
    sk_store *st = (sk_store *)1;

    /* nothing listens there: refused at once */
    snprintf(url, sizeof url, "mysql://u:s3cr3t@127.0.0.1:%d/db", sk_th_free_port());
    sk_th_open_unreachable(url, "s3cr3t");

    /* a wrong password and an unknown database: the server's refusal */
    char user[300];
    grant_user(good, "sk_errs", "r1ght-pw", user, sizeof user);
    snprintf(url, sizeof url, "mysql://sk_errs:wr0ng-pw@127.0.0.1:%d/%s", port, db_name(good));
    CHECK_EQ(sk_store_open(&st, url, err, sizeof err), SK_EDB);
    CHECK_MSG(strstr(err, "Access denied") != NULL, "reason: %s", err);
    CHECK_MSG(!strstr(err, "wr0ng-pw") && !strstr(err, "r1ght-pw"), "password echoed: %s", err);
    snprintf(url, sizeof url, "mysql://root@127.0.0.1:%d/no_such_db", port);
    CHECK_EQ(sk_store_open(&st, url, err, sizeof err), SK_EDB);
    CHECK_MSG(strstr(err, "Unknown database") != NULL, "reason: %s", err);

    /* malformed: usage errors, the URL not repeated */
    static const char *const bad[] = {
        "mysql://u:s3cr3t@127.0.0.1:3306",                    /* no database */
        "mysql://u:s3cr3t@127.0.0.1:99999/db",                /* port */
        "mysql://u:s3cr3t%zz@127.0.0.1/db",                   /* escape */
        "mysql://u:s3cr3t@127.0.0.1/db?nosuchoption=1",       /* parameter */
        "mysql://u:s3cr3t@127.0.0.1/db?connect_timeout=0",    /* range */
        "mysql://u:s3cr3t@127.0.0.1/db?ssl-mode=sometimes",   /* word */
        "mysql://u:s3cr3t@/db",                               /* no host, no socket */
        "mysql://u:s3cr3t@127.0.0.1/db?socket=relative/path", /* socket */
        "mariadb://u:s3cr3t@127.0.0.1/d`b",                   /* name */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_MSG(sk_store_open(&st, bad[i], err, sizeof err) == SK_EINVAL, "%s", bad[i]);
        CHECK_MSG(strstr(err, "malformed mysql URL") && !strstr(err, "s3cr3t"), "%s: %s", bad[i],
                  err);
    }

    /* mariadb:// is the same backend; ?socket= goes over the unix socket
     * (the host is then not needed) */
    snprintf(url, sizeof url, "mariadb://%s", good + strlen("mysql://"));
    sk_store_close(open_ok(url));
    snprintf(url, sizeof url, "mysql://root@/%s?socket=%s&connect_timeout=3", db_name(good),
             sk_th_my_socket());
    st = open_ok(url);
    add_activity(st, 3, 10);
    sk_store_close(st);
    st = open_ok(good);
    struct sk_activity a;
    CHECK_EQ(sk_store_activity_get(st, 3, &a), 0); /* the same database */
    sk_store_close(st);
}

/* `seckill <args> --redis <run's> --db db`; output into out. */
#define CLI(db, out, ...) SK_TH_DB_CLI(db, NULL, out, __VA_ARGS__)

SK_TEST(store_mysql_cli_works_end_to_end_and_refuses_bad_servers_with_clear_exit_codes)
{
    char db[300], out[8192], id[24];
    sk_th_my_fresh_db(db, sizeof db);
    uint64_t aid = sk_th_unique_id();
    snprintf(id, sizeof id, "%" PRIu64, aid);
    int rc = CLI(db, out, "activity", "create", "--id", id, "--name", "MySQL sale", "--stock", "30",
                 "--limit", "2", "--start", "now", "--end", "+1h");
    CHECK_MSG(rc == 0, "create exit %d: %s", rc, out);
    CHECK_EQ(CLI(db, out, "activity", "create", "--id", id, "--name", "again", "--stock", "1",
                 "--limit", "1", "--start", "now", "--end", "+1h"),
             2); /* duplicate */
    CHECK_EQ(CLI(db, out, "activity", "preheat", "--id", id), 0);
    CHECK_EQ(CLI(db, out, "activity", "open", "--id", id), 0);
    rc = CLI(db, out, "activity", "show", "--id", id, "--json");
    CHECK_MSG(rc == 0, "show exit %d: %s", rc, out);
    json_t *o = json_loads(out, 0, NULL);
    CHECK_MSG(json_is_object(o), "show --json: %s", out);
    CHECK_STR(json_string_value(json_object_get(o, "state")), "open");
    json_decref(o);
    /* the worker drains nothing and exits; reconcile finds the sale clean */
    rc = CLI(db, out, "worker", "--once");
    CHECK_MSG(rc == 0, "worker exit %d: %s", rc, out);
    rc = CLI(db, out, "reconcile", "--activity", id);
    CHECK_MSG(rc == 0, "reconcile exit %d: %s", rc, out);

    /* The database refusing us, or not there: a runtime failure (exit 1),
     * the reason, never the password; a malformed URL: exit 2. The same
     * from SECKILL_DB. */
    int port = atoi(strrchr(db, ':') + 1);
    char user[300], wrong_pw[300], wrong_db[300], dead[300];
    grant_user(db, "sk_cli", "g00d-pass", user, sizeof user);
    snprintf(wrong_pw, sizeof wrong_pw, "mysql://sk_cli:pw5ecret@127.0.0.1:%d/%s", port,
             db_name(db));
    snprintf(wrong_db, sizeof wrong_db, "mysql://sk_cli:g00d-pass@127.0.0.1:%d/absent_db", port);
    snprintf(dead, sizeof dead, "mysql://u:pw5ecret@127.0.0.1:%d/x", sk_th_free_port());
    const struct {
        const char *db, *want;
    } cases[] = {{wrong_pw, "Access denied"}, {wrong_db, "absent_db"}, {dead, "cannot connect"}};
    for (size_t i = 0; i < 3; i++) {
        int64_t t0 = sk_mono_ms();
        static const char *const cmds[][3] = {
            {"activity", "list", NULL}, {"worker", "--once", NULL}, {"reconcile", NULL, NULL}};
        for (size_t k = 0; k < 3; k++) {
            const char *args[6] = {cmds[k][0], cmds[k][1], cmds[k][2]};
            rc = sk_th_db_cli(cases[i].db, NULL, out, sizeof out,
                              args[1] ? args : (const char *const[]){args[0], NULL});
            CHECK_MSG(rc == 1, "%s %s: exit %d: %s", cmds[k][0], cases[i].db, rc, out);
            CHECK_MSG(strstr(out, cases[i].want), "%s: %s", cmds[k][0], out);
            CHECK_MSG(!strstr(out, "pw5ecret") && !strstr(out, "g00d-pass"), "password printed: %s",
                      out);
        }
        CHECK_MSG(sk_mono_ms() - t0 < 15000, "%s took %lld ms", cases[i].db,
                  (long long)(sk_mono_ms() - t0));
    }
    char env[320];
    snprintf(env, sizeof env, "SECKILL_DB=%s", wrong_pw);
    const char *envs[] = {env, NULL};
    const char *list[] = {"activity", "list", "--redis", sk_th_redis_url(), NULL};
    CHECK_EQ(sk_th_run_seckill(out, sizeof out, envs, list), 1);
    CHECK_MSG(strstr(out, "Access denied") && !strstr(out, "pw5ecret"), "%s", out);
    CHECK_EQ(CLI("mysql://u:pw5ecret@127.0.0.1:1/db?bogus=1", out, "activity", "list"), 2);
    CHECK_MSG(!strstr(out, "pw5ecret"), "password printed: %s", out);
    /* the user holding the README's grants runs the sale's CLI */
    rc = CLI(user, out, "activity", "list");
    CHECK_MSG(rc == 0, "list with the granted user: exit %d: %s", rc, out);
}

/* ---- faults ---- */

static void my_create_db(void *m, const char *name, char *url, size_t cap)
{
    sk_th_my_create_db(m, name, url, cap);
}
static void my_halt(void *m, int hard)
{
    if (hard)
        sk_th_my_kill(m);
    else
        sk_th_my_stop(m);
}
static void my_restart(void *m)
{
    sk_th_my_restart(m);
}
static void my_freeze(void *m, int frozen)
{
    sk_th_my_freeze(m, frozen);
}

/* The run's outage (fault: 0 stopped, 1 killed -9, 2 frozen) on a server
 * of its own. */
static void mysql_fault(int fault)
{
    struct sk_th_my m;
    sk_th_my_start(&m);
    struct sk_th_db_server d = {"mysql", &m, my_halt, my_restart, my_freeze};
    sk_th_store_fault_on(&d, my_create_db, fault);
    sk_mysql_spawn_stop(&m.srv);
}

SK_TEST(store_mysql_fault_stopped_server_fails_fast_then_reconnects_after_restart)
{
    mysql_fault(0);
}

SK_TEST(store_mysql_fault_killed_server_fails_fast_then_recovers_its_commits_after_restart)
{
    mysql_fault(1);
}

SK_TEST(store_mysql_fault_frozen_server_times_out_then_reconnects_after_thaw)
{
    mysql_fault(2);
}

/* A column of the database of url exists? */
static long long has_column(const char *url, const char *table, const char *column)
{
    char sql[300];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM information_schema.columns WHERE table_schema = DATABASE()"
             " AND table_name = '%s' AND column_name = '%s'",
             table, column);
    return sk_th_my_int(url, sql);
}

/* MySQL's DDL commits statement by statement: a migration cut short after
 * a step committed (here a real lock wait: another session's open
 * transaction on redis_marks holds migration 8's ALTER of it until the
 * statement bound ends it) leaves the step's column without the version
 * row. The next open finishes the migration instead of failing on a
 * duplicate column; so does an open after every ALTER committed and no
 * version row was written (a client that gave up while the server went
 * on). */
SK_TEST_T(store_mysql_a_migration_cut_short_after_a_step_committed_is_finished_by_the_next_open, 60)
{
    char db[300], url[340], err[512];
    sk_th_my_fresh_db(db, sizeof db);
    snprintf(url, sizeof url, "%s?connect_timeout=2", db);
    sk_store *st = open_ok(url);
    add_activity(st, 5, 100);
    struct sk_order o;
    sk_th_order(&o, 5, 1000, 0, (uint64_t)0 + 1, 1);
    o.adm_seq = 3;
    sk_th_persist_ok(st, &o, 1);
    sk_store_close(st);
    /* back to version 7, the mark as it kept it */
    CHECK_EQ(sk_th_my_sql(db, "ALTER TABLE orders DROP COLUMN idem_key; DROP TABLE order_conflicts;"
                              "ALTER TABLE redis_marks DROP PRIMARY KEY, DROP COLUMN branch,"
                              " ADD PRIMARY KEY (label); DROP TABLE store_identity;"
                              "DELETE FROM schema_migrations WHERE version >= 8"),
             0);
    struct sk_th_my_held *h =
        sk_th_my_hold(db, "START TRANSACTION; SELECT count(*) FROM redis_marks");
    int64_t t0 = sk_mono_ms();
    st = (sk_store *)1;
    CHECK_EQ(sk_store_open(&st, url, err, sizeof err), SK_EDB);
    CHECK(st == NULL);
    CHECK_MSG(strstr(err, "schema migration 8 failed") != NULL, "reason: %s", err);
    CHECK_MSG(sk_mono_ms() - t0 < 10000, "open took %lld ms", (long long)(sk_mono_ms() - t0));
    CHECK_EQ(has_column(db, "orders", "idem_key"), 1); /* the first step stayed */
    CHECK_EQ(has_column(db, "redis_marks", "branch"), 0);
    CHECK_EQ(sk_th_my_int(db, "SELECT max(version) FROM schema_migrations"), 7);
    sk_th_my_release(h);

    st = open_ok(url);
    int v = 0;
    CHECK_EQ(sk_store_schema_version(st, &v), 0);
    CHECK_EQ(v, N_MIGRATIONS);
    struct sk_mark *m = sk_th_marks_n(st, 5, 1);
    CHECK_STR(m[0].branch, "");
    CHECK_EQ(m[0].adm, 3);
    free(m);
    struct sk_order again = o;
    again.user_id = 9;
    CHECK_EQ(sk_th_persist_ok(st, &again, 1).conflicts, 1); /* order_conflicts is there */
    sk_store_close(st);

    /* every ALTER committed, no version row after the second: opened again,
     * each is found done and recorded */
    CHECK_EQ(sk_th_my_sql(db, "DELETE FROM schema_migrations WHERE version >= 3"), 0);
    st = open_ok(url);
    CHECK_EQ(sk_store_schema_version(st, &v), 0);
    CHECK_EQ(v, N_MIGRATIONS);
    struct sk_order got;
    CHECK_EQ(sk_store_order_get(st, o.order_id, &got), 0);
    CHECK_EQ(got.user_id, 1);
    sk_store_close(st);
    CHECK_EQ(sk_th_my_int(db, "SELECT count(*) FROM schema_migrations"), N_MIGRATIONS);
}

/* The grants the README names are enough for everything the service does:
 * migrations at the first open, persist, pay, cancel, release, repair,
 * restore, audit, delete. */
SK_TEST(store_mysql_a_user_with_only_the_documented_grants_runs_every_store_call)
{
    char db[300], url[300];
    sk_th_my_fresh_db(db, sizeof db);
    grant_user(db, "sk_app", "app-pw", url, sizeof url);
    sk_store *st = open_ok(url); /* migrates: CREATE, ALTER, INDEX */
    int v = 0;
    CHECK_EQ(sk_store_schema_version(st, &v), 0);
    CHECK_EQ(v, N_MIGRATIONS);
    add_activity(st, 9, 100);
    struct sk_order o[3];
    for (int i = 0; i < 3; i++)
        sk_th_order(&o[i], 9, 1000, i, (uint64_t)i + 1, 1);
    o[0].adm_seq = 3;
    snprintf(o[0].idem_key, sizeof o[0].idem_key, "key-1");
    sk_th_persist_ok(st, o, 3);
    struct sk_order taken = o[2]; /* its id for another buyer: a recorded conflict */
    taken.user_id = 77;
    CHECK_EQ(sk_th_persist_ok(st, &taken, 1).conflicts, 1);
    CHECK_EQ(sk_store_order_pay(st, o[0].order_id, 2000, NULL), 0);
    int prev;
    CHECK_EQ(sk_store_order_cancel(st, o[1].order_id, 2000, &prev), 0);
    CHECK_EQ(sk_store_order_mark_released(st, o[1].order_id, 2100), 0);
    CHECK_EQ(sk_store_activity_set_db_stock(st, 9, 50), 0);
    int64_t before, after;
    CHECK_EQ(sk_store_db_stock_repair(st, 9, 3000, &before, &after), 0);
    CHECK_EQ(after, 98);
    struct sk_order lost;
    sk_th_order(&lost, 9, 1000, 7, (uint64_t)7 + 1, 1);
    CHECK_EQ(sk_store_order_restore(st, &lost, 4000, "restored"), 0);
    struct sk_audit *au;
    size_t n;
    CHECK_EQ(sk_store_audit_list(st, 9, &au, &n), 0);
    CHECK_EQ(n, 2);
    free(au);
    CHECK_EQ(sk_store_activity_delete(st, 9), 0);
    sk_store_close(st);
}

/* ---- a sale through `seckill serve --db mysql://...` ---- */

struct srv {
    struct sk_th_serve s;
    struct sk_th_http c;
};

static uint64_t http_activity(struct srv *v, int stock, int pay_timeout_s)
{
    return sk_th_http_activity(&v->c, "mysql sale", stock, pay_timeout_s);
}

static int buy(struct srv *v, uint64_t aid, uint64_t uid, char *oid, size_t cap)
{
    return sk_th_buy_one(&v->c, aid, uid, oid, cap);
}

static void wait_status(struct srv *v, const char *oid, uint64_t uid, const char *want)
{
    struct sk_th_resp r;
    sk_th_order_wait(&v->c, oid, uid, want, 20000, &r);
}

static int order_op(struct srv *v, const char *oid, const char *op, uint64_t uid,
                    struct sk_th_resp *r)
{
    return sk_th_order_op(&v->c, oid, op, uid, r);
}

/* `seckill reconcile` of activity aid: its exit code, its output in out. */
static int reconcile(const char *redis_url, const char *db, uint64_t aid, char *out, size_t cap)
{
    char id[24];
    snprintf(id, sizeof id, "%" PRIu64, aid);
    const char *args[] = {"reconcile", "--redis", redis_url, "--db", db, "--activity", id, NULL};
    return sk_th_run_seckill(out, cap, NULL, args);
}

static void reconcile_clean(const char *redis_url, const char *db, uint64_t aid)
{
    char out[16384];
    int rc = reconcile(redis_url, db, aid, out, sizeof out);
    CHECK_MSG(rc == 0 && strstr(out, "consistent"), "reconcile exit %d:\n%s", rc, out);
}

SK_TEST_T(store_mysql_sale_through_serve_with_pay_cancel_late_pay_and_release_reconciles, 120)
{
    char db[300];
    sk_th_my_fresh_db(db, sizeof db);
    struct srv v;
    const char *extra[] = {"--db", db, "--role", "all", NULL};
    sk_th_serve_start(&v.s, sk_th_redis_url(), extra);
    sk_th_http_open(&v.c, v.s.port);
    struct sk_th_resp r;
    int64_t until = sk_mono_ms() + 15000;
    while (sk_th_http_req(&v.c, "GET", "/readyz", NULL, NULL, &r) != 200)
        CHECK_MSG(sk_mono_ms() < until, "not ready: %s", r.body);

    /* three units: pay one, cancel one (a late pay refused), the freed unit
     * sells again */
    uint64_t a = http_activity(&v, 3, 1800);
    char oid[4][64], val[64];
    for (int i = 0; i < 3; i++)
        CHECK_EQ(buy(&v, a, 101 + (uint64_t)i, oid[i], sizeof oid[i]), 200);
    CHECK_EQ(buy(&v, a, 104, NULL, 0), 409);
    for (int i = 0; i < 3; i++)
        wait_status(&v, oid[i], 101 + (uint64_t)i, "created"); /* persisted in MariaDB */
    CHECK_EQ(order_op(&v, oid[0], "pay", 101, &r), 200);
    sk_th_resp_field(&r, "status", val, sizeof val);
    CHECK_STR(val, "paid");
    CHECK_EQ(order_op(&v, oid[0], "pay", 101, &r), 200); /* idempotent */
    CHECK_EQ(order_op(&v, oid[0], "cancel", 101, &r), 409);
    CHECK_EQ(order_op(&v, oid[1], "cancel", 102, &r), 200);
    CHECK_EQ(order_op(&v, oid[1], "pay", 102, &r), 409); /* late: the cancel won */
    sk_th_resp_field(&r, "error", val, sizeof val);
    CHECK_STR(val, "order_cancelled");
    CHECK_EQ(buy(&v, a, 104, oid[3], sizeof oid[3]), 200);
    wait_status(&v, oid[3], 104, "created");

    /* one unit, one second to pay: the sweeper cancels and releases it,
     * the next buyer gets it, the late pay is refused */
    uint64_t b = http_activity(&v, 1, 1);
    char late[64], next[64];
    CHECK_EQ(buy(&v, b, 201, late, sizeof late), 200);
    wait_status(&v, late, 201, "cancelled");
    until = sk_mono_ms() + 10000;
    int st;
    while ((st = buy(&v, b, 202, next, sizeof next)) != 200)
        CHECK_MSG(st == 409 && sk_mono_ms() < until, "second buyer got %d", st);
    CHECK_EQ(order_op(&v, late, "pay", 201, &r), 409);
    wait_status(&v, next, 202, "created");

    /* MariaDB holds exactly that */
    sk_store *s = open_ok(db);
    struct sk_order_counts c;
    CHECK_EQ(sk_store_orders_count(s, a, &c), 0);
    CHECK_EQ(c.orders[SK_ORDER_PAID], 1);
    CHECK_EQ(c.orders[SK_ORDER_CANCELLED], 1);
    CHECK_EQ(c.orders[SK_ORDER_CREATED], 2);
    CHECK_EQ(c.stock_failures, 0);
    CHECK_EQ(sk_th_db_stock(s, a), 0);
    struct sk_order o;
    until = sk_mono_ms() + 10000;
    do { /* the cancel's release is marked right after it */
        CHECK_EQ(sk_store_order_get(s, oid[1], &o), 0);
        CHECK(sk_mono_ms() < until);
    } while (o.released_ms == 0);
    CHECK_EQ(sk_store_order_get(s, late, &o), 0);
    CHECK_EQ(o.status, SK_ORDER_CANCELLED);
    CHECK(o.released_ms > 0);
    CHECK_EQ(sk_store_orders_count(s, b, &c), 0);
    CHECK_EQ(c.orders[SK_ORDER_CANCELLED], 1);
    CHECK_EQ(c.orders[SK_ORDER_CREATED], 1);
    sk_store_close(s);
    reconcile_clean(sk_th_redis_url(), db, a);
    reconcile_clean(sk_th_redis_url(), db, b);

    /* an admission under an order id MariaDB holds for another buyer (two
     * histories that diverged): recorded, never inserted, and reconcile
     * reports it for the operator */
    s = open_ok(db);
    CHECK_EQ(sk_store_order_get(s, oid[2], &o), 0);
    o.user_id = 999;
    struct sk_persist_result pr = sk_th_persist_ok(s, &o, 1);
    CHECK_EQ(pr.conflicts, 1);
    CHECK_EQ(pr.inserted + pr.duplicates, 0);
    CHECK_EQ(sk_store_order_get(s, oid[2], &o), 0);
    CHECK_EQ(o.user_id, 103);
    CHECK_EQ(sk_store_orders_count(s, a, &c), 0);
    CHECK_EQ(c.conflicts, 1);
    sk_store_close(s);
    char out[16384];
    int rrc = reconcile(sk_th_redis_url(), db, a, out, sizeof out);
    CHECK_MSG(rrc == 1 && strstr(out, "order_conflict"), "reconcile exit %d:\n%s", rrc, out);
    sk_th_http_close(&v.c);
    CHECK_EQ(sk_th_serve_stop(&v.s, SIGTERM), 0);
}

static int sold_out(void *arg)
{
    return atomic_load(&((struct sale *)arg)->sold_out_seen);
}

/* Redis restarted empty mid-sale: the worker's rollback guard sees Redis
 * below MariaDB's watermark, fences the activity, rebuilds it from the
 * orders MariaDB holds and the sale goes on; sold out with every
 * invariant and reconcile consistent. */
SK_TEST_T(store_mysql_rollback_guard_replays_from_mariadb_after_redis_lost_its_data, 240)
{
    char db[300];
    sk_th_my_fresh_db(db, sizeof db);
    struct sk_th_redis rs;
    sk_th_redis_start(&rs, NULL);
    struct sk_th_serve v;
    const char *extra[] = {"--db", db, "--role", "all", "--processes", "2", NULL};
    setenv("LSAN_OPTIONS", "exitcode=0", 1);
    sk_th_serve_start(&v, rs.url, extra);
    sale_log_on_failure(v.log, v.port);
    sale_wait_ready(v.port);
    const int64_t stock = 30000, limit = 3;
    uint64_t aid = sale_activity(v.port, 0, stock, limit, 1);
    sk_store *st = open_ok(db);
    sk_redis *r = sk_th_redis_new(rs.url, 2000, 5000);
    struct sale s;
    sale_start(&s, v.port, aid, 20000, limit, SALE_THREADS);
    sale_log_sale(&s);
    /* early in the sale: most of the stock still to sell (the buyers hold
     * at 8000 so a slow persist cannot let the sale sell out first) */
    sale_hold_at(&s, 8000);
    struct sale_db_want want = {st, aid, 4000};
    sale_wait(sale_db_has, &want, 60000, "4000 orders in MariaDB");
    sk_th_redis_stop(&rs, 1); /* no persistence: it comes back empty */
    sk_th_redis_restart(&rs, NULL);
    sale_hold_at(&s, 0);
    struct sale_ok_want again = {&s, atomic_load(&s.ok)};
    sale_wait(sale_ok_above, &again, 30000, "a 200 after the recovery");
    sale_wait(sold_out, &s, 120000, "the sale to sell out");
    sale_stop(&s);
    sale_print(&s, "mariadb, redis restarted empty");
    sale_wait_drained(r, aid, 30000);
    int64_t sold = sale_check_invariants(st, r, rs.url, db, aid, stock, limit);
    CHECK_EQ(sold, stock);
    CHECK(atomic_load(&s.recovering) > 0);
    CHECK_EQ(sale_audit_count(st, aid, "recover_rebuild"), 1);
    CHECK(sale_audit_count(st, aid, "recover_replay") >= 1);
    CHECK_EQ(sk_th_serve_stop(&v, SIGTERM), 0);
    sale_log_passed();
    sk_redis_free(r);
    sk_store_close(st);
    sk_th_redis_stop(&rs, 1);
}
