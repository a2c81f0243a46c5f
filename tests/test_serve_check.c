/* test_serve_check.c - `seckill serve --check` against real servers: exit 0
 * when Redis and the database are there, 1 when one is unreachable or
 * unfit (a wrong password, a database that does not answer, an evicting
 * maxmemory-policy, a replica), 2 when the configuration is wrong; the
 * settings it cannot read said as unknown. And the start: the banner, and
 * a wrong Redis password as an error line that /readyz repeats. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store.h"
#include "support/harness.h"
#include "support/http_client.h"

#define HAS(out, s) CHECK_MSG(strstr(out, s) != NULL, "no \"%s\" in:\n%s", s, out)
#define HAS_NOT(out, s) CHECK_MSG(strstr(out, s) == NULL, "\"%s\" in:\n%s", s, out)

static void read_text(const char *path, char *out, size_t cap)
{
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "%s: %s", path, strerror(errno));
    size_t n = fread(out, 1, cap - 1, f);
    fclose(f);
    out[n] = 0;
}

/* `seckill serve --check --redis R --db D` and more flags (NULL-ended). */
static int check(char *out, size_t cap, const char *redis, const char *db, const char *const *more)
{
    const char *args[24] = {"serve", "--check", "--redis", redis, "--db", db};
    int n = 6;
    for (; more && *more && n < 23; more++)
        args[n++] = *more;
    args[n] = NULL;
    return sk_th_run_seckill(out, cap, NULL, args);
}

/* A SQLite database that exists (made by the store, as serve makes it). */
static void make_db(char *spec, size_t cap)
{
    snprintf(spec, cap, "sqlite:%s/check.db", sk_th_tmpdir());
    sk_store *st;
    char err[256];
    CHECK_MSG(sk_store_open(&st, spec, err, sizeof err) == 0, "%s", err);
    sk_store_close(st);
}

SK_TEST(serve_check_exit_0_when_redis_and_the_database_are_there)
{
    char out[8192], db[400];
    make_db(db, sizeof db);
    int rc = check(out, sizeof out, sk_th_redis_url(), db, NULL);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out);
    HAS(out, "config     /dev/null: ok"); /* the runner's SECKILL_CONFIG */
    HAS(out, "reached, single node, master 127.0.0.1:");
    HAS(out, "persistence       AOF");
    HAS(out, "maxmemory-policy  noeviction");
    HAS(out, "SQLite, schema ");
    HAS(out, ", identity ");
    HAS(out, "result     ready (exit 0)");
    /* a file that is not there yet, in a directory that is: fine, and
     * --check does not make it */
    char fresh[400];
    snprintf(fresh, sizeof fresh, "sqlite:%s/fresh.db", sk_th_tmpdir());
    rc = check(out, sizeof out, sk_th_redis_url(), fresh, NULL);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out);
    HAS(out, "no file yet: serve makes");
    CHECK_MSG(access(fresh + 7, F_OK) < 0, "--check made %s", fresh + 7);
}

SK_TEST(serve_check_exit_1_on_a_wrong_redis_password)
{
    struct sk_th_redis srv;
    sk_th_redis_start(&srv, (const char *const[]){"--requirepass", "the-right-one-42", NULL});
    char out[8192], db[400], url[200];
    make_db(db, sizeof db);
    snprintf(url, sizeof url, "redis://:a-wrong-one-17@127.0.0.1:%d", srv.port);
    int rc = check(out, sizeof out, url, db, NULL);
    CHECK_MSG(rc == 1, "exit %d: %s", rc, out);
    HAS(out, "NOT REACHED");
    HAS(out, "AUTH refused: WRONGPASS invalid username-password pair");
    HAS(out, "result     NOT READY");
    HAS_NOT(out, "a-wrong-one-17");
    snprintf(url, sizeof url, "redis://:the-right-one-42@127.0.0.1:%d", srv.port);
    rc = check(out, sizeof out, url, db, NULL);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out);
    HAS_NOT(out, "the-right-one-42");
    sk_th_redis_stop(&srv, 1);
}

SK_TEST(serve_check_exit_1_when_redis_or_the_database_is_unreachable)
{
    char out[8192], db[400], url[200];
    make_db(db, sizeof db);
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", sk_th_free_port());
    int rc = check(out, sizeof out, url, db, NULL);
    CHECK_MSG(rc == 1, "exit %d: %s", rc, out);
    HAS(out, "NOT REACHED: cannot connect to redis");
    /* a database server that does not answer */
    char pg[200];
    snprintf(pg, sizeof pg, "postgres://seckill:pw-not-shown@127.0.0.1:%d/sale", sk_th_free_port());
    rc = check(out, sizeof out, sk_th_redis_url(), pg, NULL);
    CHECK_MSG(rc == 1, "exit %d: %s", rc, out);
    HAS(out, "store      postgres://seckill:***@127.0.0.1:");
    HAS(out, "NOT REACHED");
    HAS_NOT(out, "pw-not-shown");
    /* a SQLite file in a directory that is not there */
    char nodir[400];
    snprintf(nodir, sizeof nodir, "sqlite:%s/nodir/x.db", sk_th_tmpdir());
    rc = check(out, sizeof out, sk_th_redis_url(), nodir, NULL);
    CHECK_MSG(rc == 1, "exit %d: %s", rc, out);
    HAS(out, "no such directory: ");
    CHECK(access(nodir + 7, F_OK) < 0);
}

SK_TEST(serve_check_judges_the_redis_settings_a_sale_needs)
{
    char out[8192], db[400];
    make_db(db, sizeof db);
    /* an evicting policy: unfit */
    struct sk_th_redis lru;
    sk_th_redis_start(&lru, (const char *const[]){"--maxmemory", "64mb", "--maxmemory-policy",
                                                  "allkeys-lru", NULL});
    int rc = check(out, sizeof out, lru.url, db, NULL);
    CHECK_MSG(rc == 1, "exit %d: %s", rc, out);
    HAS(out, "maxmemory-policy  allkeys-lru");
    HAS(out, "UNSAFE");
    sk_th_redis_stop(&lru, 1);
    /* CONFIG refused (renamed, as managed offerings do): what INFO says is
     * said, the rest is unknown, with the reason */
    struct sk_th_redis hidden;
    sk_th_redis_start(&hidden, (const char *const[]){"--appendonly", "yes", "--rename-command",
                                                     "CONFIG", "", NULL});
    rc = check(out, sizeof out, hidden.url, db, NULL);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out);
    HAS(out, "persistence       AOF on, appendfsync unknown (CONFIG GET refused: ");
    HAS(out, "maxmemory-policy  noeviction");
    sk_th_redis_stop(&hidden, 1);
    /* a replica refuses writes: unfit */
    struct sk_th_redis master, replica;
    sk_th_redis_start_pair(&master, &replica);
    rc = check(out, sizeof out, replica.url, db, NULL);
    CHECK_MSG(rc == 1, "exit %d: %s", rc, out);
    HAS(out, "a replica: it refuses writes");
    sk_th_redis_stop(&replica, 1);
    sk_th_redis_stop(&master, 1);
}

/* The fit rule (redis_settings.h): a preheated sale whose stock cannot fit
 * in what the Redis it is checked against has free is a warning naming
 * maxmemory and how much it needs; still ready (exit 0). With room it is
 * not said. */
SK_TEST(serve_check_warns_when_the_preheated_stock_cannot_fit_in_redis_memory)
{
    char out[8192], db[400];
    make_db(db, sizeof db);
    const char *create[] = {
        "activity", "create", "--redis", sk_th_redis_url(), "--db",    db,  "--id", "7301",
        "--name",   "fit",    "--stock", "2000000",         "--limit", "1", NULL};
    int rc = sk_th_run_seckill(out, sizeof out, NULL, create);
    CHECK_MSG(rc == 0, "create: exit %d: %s", rc, out);
    const char *preheat[] = {"activity", "preheat", "--redis", sk_th_redis_url(), "--db", db,
                             "--id",     "7301",    NULL};
    rc = sk_th_run_seckill(out, sizeof out, NULL, preheat);
    CHECK_MSG(rc == 0, "preheat: exit %d: %s", rc, out);
    rc = check(out, sizeof out, sk_th_redis_url(), db, NULL);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out);
    HAS_NOT(out, "needs up to");
    struct sk_th_redis small;
    sk_th_redis_start(&small, (const char *const[]){"--maxmemory", "8mb", NULL});
    rc = check(out, sizeof out, small.url, db, NULL);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out);
    HAS(out, "a stock of 2000000 orders needs up to");
    HAS(out, "raise maxmemory to at least");
    HAS(out, "result     ready (exit 0)");
    sk_th_redis_stop(&small, 1);
}

SK_TEST(serve_check_exit_2_when_the_configuration_is_wrong)
{
    char out[8192], db[400], conf[400], dead[100];
    make_db(db, sizeof db);
    /* Redis down too: the configuration is judged first, nothing is reached */
    snprintf(dead, sizeof dead, "redis://127.0.0.1:%d", sk_th_free_port());
    struct {
        const char *more[5];
        const char *want;
    } cases[] = {
        {{"--processes", "0"}, "processes: must be a number between 1 and 64"},
        {{"--auth", "hmac"}, "auth=hmac needs hmac_secret"},
        {{"--admin-token-file", "/nonexistent/admin.token"},
         "cannot read admin_token_file /nonexistent/admin.token"},
        {{"--ops-listen", "127.0.0.1:8080"}, "ops_listen must differ from listen"},
        {{"--listen", "8080"}, "listen: must be HOST:PORT"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = check(out, sizeof out, dead, db, cases[i].more);
        CHECK_MSG(rc == 2, "%s: exit %d: %s", cases[i].more[0], rc, out);
        HAS(out, cases[i].want);
        HAS_NOT(out, "redis      ");
    }
    snprintf(conf, sizeof conf, "%s/bad.conf", sk_th_tmpdir());
    sk_th_write_file(conf, "listen = 127.0.0.1:9000\nprocesess = 2\n");
    int rc = check(out, sizeof out, dead, db, (const char *const[]){"--config", conf, NULL});
    CHECK_MSG(rc == 2, "exit %d: %s", rc, out);
    HAS(out, "bad.conf: line 2: unknown option \"procesess\"");
}

static int version_of(char *out, size_t cap)
{
    char cmd[500];
    snprintf(cmd, sizeof cmd, "cat %s/VERSION", sk_th_source_root());
    int rc = sk_th_sh(cmd, out, cap);
    out[strcspn(out, "\n")] = 0;
    return rc;
}

SK_TEST(serve_banner_names_version_addresses_admin_api_redis_store_auth_processes)
{
    struct sk_th_serve s;
    int ops = sk_th_free_port();
    char ops_listen[40];
    snprintf(ops_listen, sizeof ops_listen, "127.0.0.1:%d", ops);
    sk_th_serve_start(&s, sk_th_redis_url(),
                      (const char *const[]){"--ops-listen", ops_listen, "--processes", "2", NULL});
    static char log[1 << 16];
    char want[600], ver[64];
    read_text(s.log, log, sizeof log);
    version_of(ver, sizeof ver);
    snprintf(want, sizeof want, "seckill %s: serve starting; config /dev/null", ver);
    HAS(log, want);
    snprintf(want, sizeof want, "buyers:     http://127.0.0.1:%d (purchase", s.port);
    HAS(log, want);
    snprintf(want, sizeof want,
             "admin API:  http://127.0.0.1:%d/api/v1/activities (on the buyers' port; admin token "
             "set)",
             s.port);
    HAS(log, want);
    snprintf(want, sizeof want, "ops:        http://%s (/metrics", ops_listen);
    HAS(log, want);
    snprintf(want, sizeof want, "redis:      %s: single node, master 127.0.0.1:%s, Redis ",
             sk_th_redis_url(), strrchr(sk_th_redis_url(), ':') + 1);
    HAS(log, want);
    /* the store's identity, as the store itself says */
    sk_store *st;
    char err[256], id[SK_STORE_IDENTITY_MAX];
    CHECK_MSG(sk_store_open(&st, s.db, err, sizeof err) == 0, "%s", err);
    CHECK_EQ(sk_store_identity(st, id, sizeof id), 0);
    sk_store_close(st);
    snprintf(want, sizeof want, "store:      %s: SQLite, identity %s", s.db, id);
    HAS(log, want);
    HAS(log, "auth:       trusted-header");
    HAS(log, "processes:  2 HTTP + 1 order worker (role all)");
    /* one block, before any process says it listens */
    CHECK(strstr(log, "serve starting") < strstr(log, "processes:  2 HTTP"));
    CHECK_MSG(strstr(log, "listening on") &&
                  strstr(log, "processes:  2 HTTP") < strstr(log, "listening on"),
              "%s", log);
    HAS_NOT(log, SK_TH_ADMIN_TOKEN);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
    /* without a token: the admin API is off, and the banner says so */
    sk_th_serve_start(&s, sk_th_redis_url(), (const char *const[]){"--admin-token", "", NULL});
    read_text(s.log, log, sizeof log);
    HAS(log, "admin API:  off: no admin token");
    HAS(log, "ops:        on the buyers' port");
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
}

SK_TEST(serve_wrong_redis_password_is_an_error_line_and_readyz_says_it)
{
    struct sk_th_redis srv;
    sk_th_redis_start(&srv, (const char *const[]){"--requirepass", "the-right-one-42", NULL});
    char url[200];
    snprintf(url, sizeof url, "redis://:not-the-one-99@127.0.0.1:%d", srv.port);
    struct sk_th_serve s;
    sk_th_serve_start(&s, url, NULL);
    static char log[1 << 16];
    read_text(s.log, log, sizeof log);
    char want[600];
    snprintf(want, sizeof want,
             "error redis redis://:***@127.0.0.1:%d refused this node: redis 127.0.0.1:%d: AUTH "
             "refused: WRONGPASS invalid username-password pair or user is disabled. Nothing can "
             "be sold",
             srv.port, srv.port);
    HAS(log, want);
    HAS(log, "REFUSED this node (the error above)");
    HAS_NOT(log, "not-the-one-99");
    struct sk_th_http h;
    struct sk_th_resp *r = sk_th_resp_new();
    sk_th_http_open(&h, s.port);
    CHECK_EQ(sk_th_http_req(&h, "GET", "/readyz", NULL, NULL, r), 503);
    CHECK_MSG(strstr(r->body, "AUTH refused: WRONGPASS") != NULL, "%s", r->body);
    sk_th_http_close(&h);
    free(r);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
    sk_th_redis_stop(&srv, 1);
}
