/* test_functions.c - the scripts as one Redis Functions library (FCALL) in
 * `seckill serve`, and Redis over a unix socket, on real servers: purchases
 * go as FCALL; FUNCTION FLUSH in a loop during a sale and a Redis restart
 * (with its data kept, or lost and preheated again) cost no purchase; with
 * --redis-functions off they go as EVALSHA; serve, the CLI and the order
 * worker reach Redis over redis+unix://. */
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "engine/keys.h"
#include "engine/stock.h"
#include "redis/redis_conn.h"
#include "redis/script.h"
#include "support/harness.h"
#include "support/http_client.h"
#include "support/http_load_env.h"
#include "support/proc_watch.h"

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A stream of n purchases (unique users from base) over 8 connections
 * (a client process, forked before during(arg) starts any thread: a fork
 * of a threaded process must not start threads), and during(arg), when
 * given, once the load runs; then the tally. */
static struct tally sell_during(int port, uint64_t aid, uint32_t base, size_t n,
                                void (*during)(void *arg), void *arg)
{
    struct load *L = load_new(port, aid);
    L->stream = 1;
    L->user_base = base;
    L->n = n;
    pid_t pid;
    load_start(L, 1, 8, &pid);
    if (during) during(arg);
    load_wait(L, 1, &pid);
    check_no_client_failures(L);
    struct tally t;
    tally_load(L, n, &t);
    load_free(L);
    return t;
}

static struct tally sell(int port, uint64_t aid, uint32_t base, size_t n)
{
    return sell_during(port, aid, base, n, NULL, NULL);
}

/* 1 when the server has our library (FUNCTION LIST LIBRARYNAME). */
static int has_library(sk_redis *r)
{
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(r, &rep, "FUNCTION LIST LIBRARYNAME %s", sk_script_library_name), 0);
    int has = rep->type == REDIS_REPLY_ARRAY && rep->elements == 1;
    freeReplyObject(rep);
    return has;
}

struct flusher {
    const char *url;
    atomic_int stop; /* set by the test, read by the flusher thread */
    int flushes;
};

static void *flush_loop(void *arg)
{
    struct flusher *f = arg;
    sk_redis *r = redis_to(f->url);
    while (!atomic_load(&f->stop)) {
        redisReply *rep;
        CHECK_EQ(sk_redis_cmd(r, &rep, "FUNCTION FLUSH"), 0);
        freeReplyObject(rep);
        f->flushes++;
        pause_ms(2);
    }
    sk_redis_free(r);
    return NULL;
}

struct flush_run {
    struct flusher *f;
    pthread_t *th;
};

static void start_flusher(void *arg)
{
    struct flush_run *fr = arg;
    CHECK_EQ(pthread_create(fr->th, NULL, flush_loop, fr->f), 0);
}

SK_TEST_T(functions_serve_calls_fcall_and_a_function_flush_loop_loses_no_purchase, 120)
{
    alarm(TEST_ALARM_S);
    struct sk_th_redis srv;
    sk_th_redis_start(&srv, NULL);
    sk_redis *r = redis_to(srv.url);
    r->fn = SK_FN_OFF; /* this client must not load the library: serve has to */
    uint64_t aid = sk_th_unique_id();
    open_activity(r, aid, 100000, 1, 1);
    CHECK(!has_library(r));
    int64_t evalsha = cmd_calls(r, "evalsha"); /* the preheat's */
    struct sk_th_serve s;
    serve_start(&s, srv.url, NULL);
    CHECK(has_library(r)); /* loaded by serve's handshake */

    struct tally t = sell(s.port, aid, 1, 1000);
    CHECK_EQ(t.ok, 1000);
    CHECK_MSG(cmd_calls(r, "fcall") >= 1, "no FCALL");
    CHECK_EQ(cmd_calls(r, "evalsha"), evalsha);

    /* FUNCTION FLUSH from another connection while 4,000 purchases run:
     * each FCALL that finds no function is resent as EVAL (it never ran),
     * and the library goes back */
    struct flusher f = {srv.url, 0, 0};
    pthread_t th;
    t = sell_during(s.port, aid, 10001, 4000, start_flusher, &(struct flush_run){&f, &th});
    atomic_store(&f.stop, 1);
    pthread_join(th, NULL);
    print_tally("4,000 purchases, FUNCTION FLUSH in a loop", &t);
    printf("    # %d flushes; Redis saw fcall %" PRId64 ", eval %" PRId64 ", function|load %" PRId64
           "\n",
           f.flushes, cmd_calls(r, "fcall"), cmd_calls(r, "eval"), cmd_calls(r, "function|load"));
    CHECK_EQ(t.ok, 4000);
    CHECK_MSG(f.flushes > 20, "only %d flushes", f.flushes);
    CHECK_MSG(cmd_calls(r, "eval") >= 1, "no purchase met a flushed library");
    /* the next purchases bring the library back (if the last flush took it) */
    t = sell(s.port, aid, 20001, 100);
    CHECK_EQ(t.ok, 100);
    CHECK(has_library(r));
    struct view v;
    view_load(r, aid, &v);
    check_invariants(&v, 100000, 1);
    CHECK_EQ(v.nlg, 5100);
    view_free(&v);
    stop_server(&s);
    sk_redis_free(r);
    sk_th_redis_stop(&srv, 1);
}

/* POSTs purchases (fresh users from *user) until one is 200, bounded. */
static void until_200(int port, uint64_t aid, uint32_t *user, int ms)
{
    struct sk_th_http c = {-1, port};
    struct sk_th_resp *rp = sk_th_resp_new();
    char path[96], h[64];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", aid);
    int64_t deadline = sk_mono_ms() + ms;
    int st = 0;
    while (st != 200) {
        CHECK_MSG(sk_mono_ms() < deadline, "no 200 within %d ms: %d %s", ms, st, rp->body);
        if (c.fd < 0 && sk_th_http_try_open(&c, port) < 0) continue;
        snprintf(h, sizeof h, "X-User-Id: %u\r\n", (*user)++);
        st = sk_th_http_req(&c, "POST", path, h, "{\"quantity\":1}", rp);
        CHECK_MSG(st == 200 || st == 503, "%d %s", st, rp->body);
        if (st != 200) pause_ms(20);
    }
    sk_th_http_close(&c);
    free(rp);
}

SK_TEST_T(functions_purchases_succeed_after_a_restart_that_kept_or_lost_the_library, 120)
{
    alarm(TEST_ALARM_S);
    const char *aof[] = {"--appendonly", "yes", "--appendfsync", "always", NULL};
    struct sk_th_redis srv;
    sk_redis *r;
    uint64_t aid = private_sale(&srv, aof, &r, 1000, 1);
    struct sk_th_serve s;
    serve_start(&s, srv.url, NULL);
    uint32_t user = 1;
    until_200(s.port, aid, &user, 5000);

    /* kill -9 and back with its AOF: data and library reload */
    sk_th_redis_stop(&srv, 1);
    sk_th_redis_restart(&srv, aof);
    sk_redis_disconnect(r);
    CHECK(has_library(r));
    until_200(s.port, aid, &user, 10000);
    int64_t fcalls = cmd_calls(r, "fcall");
    CHECK_MSG(fcalls >= 1, "no FCALL after the restart");

    /* back without its files: nothing survives, the library neither;
     * preheated again, the next purchase loads it (serve's reconnect) */
    /* serve is held while Redis comes back, or its reconnect could load
     * the library before we see it gone */
    pid_t kids[8];
    int nk = sk_th_proc_children(s.pid, NULL, kids, 8);
    if (nk == 0) kids[nk++] = s.pid; /* one process, no supervisor */
    for (int i = 0; i < nk; i++)
        kill(kids[i], SIGSTOP);
    sk_th_redis_stop(&srv, 1);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "rm -rf %s/*.aof %s/appendonlydir/* %s/*.rdb", srv.dir, srv.dir,
             srv.dir);
    CHECK_EQ(system(cmd), 0);
    sk_th_redis_restart(&srv, NULL);
    sk_redis_disconnect(r);
    r->fn = SK_FN_OFF; /* this client must not load it: serve has to */
    CHECK(!has_library(r));
    for (int i = 0; i < nk; i++)
        kill(kids[i], SIGCONT);
    open_activity(r, aid, 1000, 1, 1);
    until_200(s.port, aid, &user, 10000);
    CHECK(has_library(r));
    CHECK_MSG(cmd_calls(r, "fcall") >= 1, "serve did not go back to FCALL");
    stop_server(&s);
    sk_redis_free(r);
    sk_th_redis_stop(&srv, 1);
}

SK_TEST(functions_off_makes_serve_call_evalsha)
{
    struct sk_th_redis srv;
    sk_th_redis_start(&srv, NULL);
    sk_redis *r = redis_to(srv.url);
    r->fn = SK_FN_OFF;
    uint64_t aid = sk_th_unique_id();
    open_activity(r, aid, 1000, 1, 1);
    struct sk_th_serve s;
    const char *extra[] = {"--redis-functions", "off", NULL};
    serve_start(&s, srv.url, extra);
    struct tally t = sell(s.port, aid, 1, 200);
    CHECK_EQ(t.ok, 200);
    CHECK_MSG(cmd_calls(r, "evalsha") >= 1, "no EVALSHA");
    CHECK_EQ(cmd_calls(r, "fcall"), 0);
    CHECK(!has_library(r)); /* never loaded */
    stop_server(&s);
    sk_redis_free(r);
    sk_th_redis_stop(&srv, 1);
}

/* ---- unix sockets ---------------------------------------------------------- */

/* Clients connected over the socket: INFO clients' count of "addr=/"
 * lines is not there, so the server's own view: CLIENT LIST with the
 * socket's laddr. */
static int unix_clients(sk_redis *r)
{
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(r, &rep, "CLIENT LIST"), 0);
    int n = 0;
    for (const char *p = rep->str; (p = strstr(p, "addr=/")) != NULL; p++)
        n++;
    freeReplyObject(rep);
    return n;
}

SK_TEST_T(unix_socket_serves_serve_the_cli_and_the_order_worker, 120)
{
    alarm(TEST_ALARM_S);
    struct sk_th_redis srv;
    sk_th_redis_start(&srv, NULL);
    CHECK_MSG(srv.unix_url[0], "the spawner gave no unix socket");
    const char *dir = sk_th_tmpdir();
    char db[400], id[32];
    snprintf(db, sizeof db, "sqlite:%s/unix.db", dir);
    uint64_t aid = sk_th_unique_id();
    snprintf(id, sizeof id, "%" PRIu64, aid);
    char out[4096];
    /* the CLI over the socket */
    const char *create[] = {"activity", "create", "--redis", srv.unix_url, "--db",
                            db,         "--id",   id,        "--name",     "unix",
                            "--stock",  "300",    "--limit", "1",          NULL};
    CHECK_MSG(sk_th_run_seckill(out, sizeof out, NULL, create) == 0, "%s", out);
    const char *pre[] = {"activity", "preheat", "--redis", srv.unix_url, "--db",
                         db,         "--id",    id,        NULL};
    CHECK_MSG(sk_th_run_seckill(out, sizeof out, NULL, pre) == 0, "%s", out);
    const char *open[] = {"activity", "open", "--redis", srv.unix_url, "--db",
                          db,         "--id", id,        NULL};
    CHECK_MSG(sk_th_run_seckill(out, sizeof out, NULL, open) == 0, "%s", out);

    /* serve (HTTP processes and the order worker) over the socket */
    struct sk_th_serve s;
    const char *same_db[] = {"--db", db, NULL}; /* the last --db wins */
    sk_th_serve_start(&s, srv.unix_url, same_db);
    sk_redis *r = redis_to(srv.unix_url);
    CHECK_MSG(POLL_UNTIL(readyz(s.port) == 200, 10000), "not ready (log %s)", s.log);
    struct tally t = sell(s.port, aid, 1, 400);
    CHECK_EQ(t.ok, 300);
    CHECK_EQ(t.sold_out, 100);
    CHECK_MSG(unix_clients(r) >= 2, "serve is not on the socket");
    /* the worker persisted every order: the CLI says so */
    const char *show[] = {"activity", "show", "--redis", srv.unix_url, "--db",
                          db,         "--id", id,        "--json",     NULL};
    int64_t deadline = sk_mono_ms() + 15000;
    for (;;) {
        CHECK_EQ(sk_th_run_seckill(out, sizeof out, NULL, show), 0);
        if (strstr(out, "\"db_stock\":0") || strstr(out, "\"db_stock\": 0")) break;
        CHECK_MSG(sk_mono_ms() < deadline, "orders not persisted: %s", out);
        pause_ms(50);
    }
    sk_redis_free(r);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
    sk_th_redis_stop(&srv, 1);
}
