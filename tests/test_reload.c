/* test_reload.c - SIGHUP re-reads the config file: on a node of two HTTP
 * processes and the order worker, a new admin token (from a file the
 * config names), a per-user rate limit and the log level apply at once on
 * every process, on a connection opened before the reload (the same
 * socket: nothing is dropped); settings that need a restart are named in
 * the log and keep their old value; a config that does not load changes
 * nothing. */
#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "spawn/spawn.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/http_client.h"
#include "support/server_spawn.h"

static int local_port(int fd)
{
    struct sockaddr_in sa;
    socklen_t l = sizeof sa;
    CHECK_EQ(getsockname(fd, (struct sockaddr *)&sa, &l), 0);
    return ntohs(sa.sin_port);
}

static int healthy(void *arg)
{
    return sk_th_http_200(*(int *)arg, "/healthz");
}

/* The log's text (the whole file) into a static buffer. */
static const char *log_text(const char *path)
{
    static char buf[1 << 20];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n] = 0;
    if (f) fclose(f);
    return buf;
}

/* Waits (bounded) for the n-th occurrence of needle in the log. */
static void wait_log(const char *path, const char *needle, int nth)
{
    int64_t deadline = sk_mono_ms() + 15000;
    for (;;) {
        const char *t = log_text(path);
        int k = 0;
        for (const char *p = t; (p = strstr(p, needle)) != NULL; p++)
            k++;
        if (k >= nth) return;
        CHECK_MSG(sk_mono_ms() < deadline, "no \"%s\" (#%d) in the log:\n%s", needle, nth, t);
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* serve with argv (its stderr to log) until /healthz answers on port. */
static pid_t start_serve(const char *const *argv, const char *log, int *port)
{
    return sk_th_server_start("seckill serve", argv, log, healthy, port, 15000);
}

/* SIGTERM: a graceful stop, exit 0. */
static void stop_serve(pid_t pid)
{
    kill(pid, SIGTERM);
    int st;
    CHECK_EQ(sk_spawn_wait(&pid, NULL, NULL, 20000, 5, &st), 0);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "serve exited with status %d", st);
}

/* A node's files in the test's directory (name.conf, name.log and the
 * database name.db) and a free port to listen on. */
struct node {
    char dir[320], conf[400], log[400], db[400], listen[64];
    int port;
};

static void node_files(struct node *n, const char *name)
{
    snprintf(n->dir, sizeof n->dir, "%s", sk_th_tmpdir());
    snprintf(n->conf, sizeof n->conf, "%s/%s.conf", n->dir, name);
    snprintf(n->log, sizeof n->log, "%s/%s.log", n->dir, name);
    snprintf(n->db, sizeof n->db, "sqlite:%s/%s.db", n->dir, name);
    n->port = sk_th_free_port();
    snprintf(n->listen, sizeof n->listen, "127.0.0.1:%d", n->port);
}

static int admin(struct sk_th_http *h, const char *token, const char *method, const char *path,
                 const char *body, struct sk_th_resp *r)
{
    char hdr[160];
    snprintf(hdr, sizeof hdr, "Authorization: Bearer %s\r\n", token);
    return sk_th_http_req(h, method, path, hdr, body, r);
}

SK_TEST_T(reload_sighup_applies_live_settings_keeps_connections_names_the_rest, 120)
{
    struct node n;
    node_files(&n, "reload");
    const char *conf = n.conf, *log = n.log;
    int port = n.port;
    char tok[400], body[400], path[128];
    snprintf(tok, sizeof tok, "%s/admin.token", n.dir);
    sk_th_write_file(tok, "admin-token-one-0123456789\n");
    char text[1024];
    snprintf(text, sizeof text,
             "# the first configuration\n"
             "admin_token_file = %s\n"
             "log_level = info\n"
             "rate_per_user_per_s = 0\n"
             "io_timeout_s = 30\n",
             tok);
    sk_th_write_file(conf, text);
    const char *argv[] = {sk_th_seckill_bin(), "serve", "--listen", n.listen,   "--redis",
                          sk_th_redis_url(),   "--db",  n.db,       "--config", conf,
                          "--processes",       "2",     NULL};
    pid_t pid = start_serve(argv, log, &port);

    /* a sale, made with the first token, on a connection that stays open */
    struct sk_th_http c;
    struct sk_th_resp r;
    sk_th_http_open(&c, port);
    int before = local_port(c.fd);
    uint64_t aid = sk_th_unique_id();
    snprintf(body, sizeof body,
             "{\"id\":%" PRIu64 ",\"name\":\"reload\",\"stock\":1000,\"per_user_limit\":100,"
             "\"start\":\"2020-01-01T00:00:00Z\",\"end\":\"2099-01-01T00:00:00Z\"}",
             aid);
    CHECK_EQ(admin(&c, "admin-token-one-0123456789", "POST", "/api/v1/activities", body, &r), 201);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/preheat", aid);
    CHECK_EQ(admin(&c, "admin-token-one-0123456789", "POST", path, "{}", &r), 200);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/open", aid);
    CHECK_EQ(admin(&c, "admin-token-one-0123456789", "POST", path, NULL, &r), 200);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", aid);
    /* no rate limit yet: one user buys five times in a row */
    for (int i = 0; i < 5; i++)
        CHECK_EQ(sk_th_http_req(&c, "POST", path, "X-User-Id: 7\r\n", NULL, &r), 200);

    /* the second configuration: a new token, a rate limit, a log level, and
     * two settings that need a restart */
    sk_th_write_file(tok, "admin-token-two-0123456789\n");
    snprintf(text, sizeof text,
             "admin_token_file = %s\n"
             "log_level = debug\n"
             "rate_per_user_per_s = 1\n"
             "rate_burst = 1\n"
             "io_timeout_s = 10\n"
             "processes = 3\n" /* the flag wins: no change */
             "max_body = 2048\n",
             tok);
    sk_th_write_file(conf, text);
    CHECK_EQ(kill(pid, SIGHUP), 0);
    wait_log(log, "reload: every process runs the new settings", 1);
    const char *t = log_text(log);
    const char *line = strstr(t, "reload: applied: ");
    CHECK(line != NULL);
    char first[600];
    snprintf(first, sizeof first, "%.*s", (int)strcspn(line, "\n"), line);
    CHECK_MSG(strstr(first, "admin_token") && strstr(first, "log_level") &&
                  strstr(first, "rate_per_user_per_s") && strstr(first, "rate_burst"),
              "%s", first);
    const char *fixed = strstr(first, "not applied (needs a restart): ");
    CHECK_MSG(fixed && strstr(fixed, "io_timeout_s") && strstr(fixed, "max_body") &&
                  !strstr(fixed, "processes"),
              "%s", first);
    CHECK_MSG(!strstr(first, "admin-token-two"), "a secret in the log: %s", first);

    /* the same connection: old token refused, new one accepted */
    CHECK_EQ(admin(&c, "admin-token-one-0123456789", "GET", "/api/v1/activities/1/stats", NULL, &r),
             401);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/stats", aid);
    CHECK_EQ(admin(&c, "admin-token-two-0123456789", "GET", path, NULL, &r), 200);
    /* and every process has it: fresh connections land on either */
    for (int i = 0; i < 20; i++) {
        struct sk_th_http f;
        sk_th_http_open(&f, port);
        CHECK_EQ(admin(&f, "admin-token-two-0123456789", "GET", path, NULL, &r), 200);
        CHECK_EQ(admin(&f, "admin-token-one-0123456789", "GET", path, NULL, &r), 401);
        sk_th_http_close(&f);
    }
    /* the rate limit: a user's second purchase within the second is 429 */
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", aid);
    int got429 = 0;
    for (int i = 0; i < 4; i++) {
        int st = sk_th_http_req(&c, "POST", path, "X-User-Id: 8\r\n", NULL, &r);
        CHECK_MSG(st == 200 || st == 429, "status %d: %s", st, r.body);
        if (st == 429) {
            CHECK(strstr(r.body, "rate_limited") != NULL);
            got429++;
        }
    }
    CHECK_MSG(got429 >= 2, "only %d of 4 back-to-back purchases limited", got429);
    CHECK_EQ(local_port(c.fd), before); /* never reconnected */

    /* a configuration that does not load changes nothing */
    sk_th_write_file(conf, "rate_burst = lots\n");
    CHECK_EQ(kill(pid, SIGHUP), 0);
    wait_log(log, "reload: the new configuration was refused", 1);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/stats", aid);
    CHECK_EQ(admin(&c, "admin-token-two-0123456789", "GET", path, NULL, &r), 200);
    CHECK_EQ(local_port(c.fd), before);
    sk_th_http_close(&c);

    stop_serve(pid);
}

/* A lone process (--role api, one process, no systemd): no supervisor, so
 * a thread of its own takes SIGHUP and reads the file; the event loop
 * applies it. */
SK_TEST_T(reload_in_a_lone_process_through_its_reload_thread, 60)
{
    struct node n;
    node_files(&n, "lone");
    const char *conf = n.conf, *log = n.log;
    int port = n.port;
    char text[400];
    sk_th_write_file(conf, "admin_token = lone-token-one-0123\n");
    const char *argv[] = {sk_th_seckill_bin(),
                          "serve",
                          "--listen",
                          n.listen,
                          "--redis",
                          sk_th_redis_url(),
                          "--db",
                          n.db,
                          "--config",
                          conf,
                          "--role",
                          "api",
                          NULL};
    pid_t pid = start_serve(argv, log, &port);
    struct sk_th_http c;
    struct sk_th_resp r;
    sk_th_http_open(&c, port);
    int before = local_port(c.fd);
    CHECK_EQ(admin(&c, "lone-token-one-0123", "GET", "/api/v1/activities/1/stats", NULL, &r) != 401,
             1);
    snprintf(text, sizeof text, "admin_token = lone-token-two-0123\nlisten = 127.0.0.1:1\n");
    sk_th_write_file(conf, text);
    CHECK_EQ(kill(pid, SIGHUP), 0);
    wait_log(log, "reload: applied: admin_token", 1);
    /* listen came from the flag: the file's is overridden, not a change */
    CHECK(strstr(log_text(log), "needs a restart") == NULL);
    int64_t deadline = sk_mono_ms() + 5000;
    while (admin(&c, "lone-token-two-0123", "GET", "/api/v1/activities/1/stats", NULL, &r) == 401)
        CHECK_MSG(sk_mono_ms() < deadline, "the new token never applied");
    CHECK_EQ(admin(&c, "lone-token-one-0123", "GET", "/api/v1/activities/1/stats", NULL, &r), 401);
    CHECK_EQ(local_port(c.fd), before);
    sk_th_http_close(&c);
    stop_serve(pid);
}
