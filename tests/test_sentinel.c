/* test_sentinel.c - Redis Sentinel (redis+sentinel://), tested on real
 * servers: a master, replicas and three Sentinels on loopback
 * (support/sentinel_harness.h), the master killed with SIGKILL or moved
 * with SENTINEL FAILOVER. The blocking client (CLI, order worker, sweeper,
 * reconcile) follows the promoted replica; `seckill serve` follows it over
 * HTTP, and with --sync-replicas 1 no purchase answered 200 is lost by the
 * failover (without it, the figure of lost ones is printed). The async
 * client leaves a master that answers READONLY, and no other error. A master
 * stopped past its failover and continued is never admitted on again
 * (redis/sentinels.h's bound), by serve nor by the blocking client. */
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>

#include <h2o.h>

#include "core/clock.h"
#include "core/error.h"
#include "engine/keys.h"
#include "engine/order_id.h"
#include "engine/stock.h"
#include "orders/order_worker.h"
#include "orders/reconcile.h"
#include "orders/sweeper.h"
#include "redis/redis_async.h"
#include "redis/redis_conn.h"
#include "redis/sentinels.h"
#include "store/store.h"
#include "support/backend_env.h"
#include "support/failover_sale.h"
#include "support/harness.h"
#include "support/http_load_env.h"
#include "support/sentinel_harness.h"

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* SET key value through r, retried (bounded) while the client finds the
 * master: 0, or the last error. */
static int set_until(sk_redis *r, const char *key, const char *value, int ms)
{
    int64_t deadline = sk_mono_ms() + ms;
    for (;;) {
        redisReply *rep;
        int rc = sk_redis_cmd(r, &rep, "SET %s %s", key, value);
        if (rc == 0) {
            int ok = rep->type == REDIS_REPLY_STATUS;
            freeReplyObject(rep);
            if (ok) return 0;
            rc = SK_EPROTO;
        }
        if (sk_mono_ms() > deadline) return rc;
        pause_ms(20);
    }
}

/* GET key on node i directly: the value, or "" when absent. */
static void get_on(struct sk_sentinel_spawn *s, int i, const char *key, char *out, size_t cap)
{
    redisReply *rep = sk_th_sentinel_cmd(s, i, "GET %s", key);
    CHECK_MSG(rep, "node %d unreachable", i);
    snprintf(out, cap, "%s", rep->type == REDIS_REPLY_STRING ? rep->str : "");
    freeReplyObject(rep);
}

/* SENTINEL FAILOVER (a planned move: the master lives on as a replica),
 * asked again while the Sentinel is not ready for it (bounded). */
static void sentinel_failover(struct sk_sentinel_spawn *ss)
{
    int64_t deadline = sk_mono_ms() + 30000;
    for (;;) {
        struct timeval tv = {2, 0};
        redisContext *sc = redisConnectWithTimeout("127.0.0.1", ss->sport[0], tv);
        CHECK(sc && !sc->err);
        redisReply *rep = redisCommand(sc, "SENTINEL FAILOVER %s", ss->name);
        int ok = rep && rep->type == REDIS_REPLY_STATUS;
        /* the last failover still being finished, or the replica not yet
         * seen as a replica of the new master: ask again */
        int inprog = rep && rep->type == REDIS_REPLY_ERROR &&
                     (!strncmp(rep->str, "INPROG", 6) || !strncmp(rep->str, "NOGOODSLAVE", 11));
        CHECK_MSG(ok || (inprog && sk_mono_ms() < deadline), "SENTINEL FAILOVER: %s",
                  rep && rep->str ? rep->str : "no reply");
        if (rep) freeReplyObject(rep);
        redisFree(sc);
        if (ok) return;
        pause_ms(100);
    }
}

SK_TEST_T(sentinel_blocking_client_follows_a_killed_and_a_moved_master, 120)
{
    struct sk_sentinel_spawn ss;
    sk_th_sentinel_start(&ss, 2, NULL);
    sk_redis *r = redis_to(ss.url);
    CHECK_EQ(set_until(r, "k", "1", 5000), 0);
    int m0 = sk_th_sentinel_master(&ss);
    CHECK_EQ(r->sn_port, ss.node[m0].port);

    /* a crash: the connection breaks, the Sentinels promote a replica, and
     * the client asks them again until it is there */
    int old = sk_th_sentinel_kill_master(&ss);
    int64_t t0 = sk_mono_ms();
    int m1 = sk_th_sentinel_await_failover(&ss, old);
    CHECK_EQ(set_until(r, "k", "2", 15000), 0);
    printf("    # master %d killed; node %d promoted; the client wrote to it %lld ms later\n", old,
           m1, (long long)(sk_mono_ms() - t0));
    CHECK_EQ(r->sn_port, ss.node[m1].port);
    char v[32];
    get_on(&ss, m1, "k", v, sizeof v);
    CHECK_STR(v, "2");

    /* a planned move: the old master lives on as a replica; the client,
     * still connected to it, must leave it (ROLE/READONLY, or the Sentinels
     * asked again within a second) and write to the new one */
    int other = -1;
    for (int i = 0; i < ss.nodes; i++)
        if (i != old && i != m1) other = i;
    CHECK_EQ(sk_sentinel_spawn_wait_replica(&ss, other, 20000), 0);
    sentinel_failover(&ss);
    int m2 = sk_th_sentinel_await_failover(&ss, m1);
    CHECK(m2 == other);
    CHECK_EQ(set_until(r, "k", "3", 15000), 0);
    get_on(&ss, m2, "k", v, sizeof v);
    CHECK_STR(v, "3");
    CHECK_EQ(r->sn_port, ss.node[m2].port);
    sk_redis_free(r);
    sk_th_sentinel_stop(&ss);
}

/* ---- READONLY, and no other error, leaves the master -------------------- */

struct taken {
    int n;
    redisReply *rep; /* the caller's, NULL for no answer */
};

static void on_taken(void *data, redisReply *rep)
{
    struct taken *t = data;
    t->n++;
    t->rep = sk_aredis_take(rep);
}

/* One command through ar, its answer awaited with the loop alone: no tick,
 * so no Sentinel round and no ROLE is asked meanwhile. */
static redisReply *ask(h2o_loop_t *loop, sk_aredis *ar, int argc, const char *const *argv)
{
    struct taken t = {0};
    CHECK_MSG(sk_aredis_command(ar, on_taken, &t, argc, argv, NULL) == 0, "%s refused: %s", argv[0],
              sk_aredis_errstr(ar));
    sk_aredis_flush(ar);
    int64_t deadline = sk_mono_ms() + 5000;
    while (!t.n && sk_mono_ms() < deadline)
        h2o_evloop_run(loop, 10);
    CHECK_MSG(t.n == 1 && t.rep, "%s: no answer: %s", argv[0], sk_aredis_errstr(ar));
    return t.rep;
}

static long long client_id(h2o_loop_t *loop, sk_aredis *ar)
{
    redisReply *rep = ask(loop, ar, 2, (const char *const[]){"CLIENT", "ID"});
    CHECK(rep->type == REDIS_REPLY_INTEGER);
    long long id = rep->integer;
    freeReplyObject(rep);
    return id;
}

static void on_master(void *data, const struct sk_aredis_master *m)
{
    snprintf(data, 80, "%s", m->addr);
}

/* The address of the master ar holds a connection for ("" for none). */
static void master_addr(const sk_aredis *ar, char out[80])
{
    out[0] = 0;
    sk_aredis_each_master(ar, on_master, out);
}

/* Node i no longer holds connection id (it was closed). */
static int connection_gone(struct sk_sentinel_spawn *s, int i, long long id)
{
    redisReply *rep = sk_th_sentinel_cmd(s, i, "CLIENT LIST ID %lld", id);
    CHECK(rep && rep->type != REDIS_REPLY_ERROR);
    int gone = rep->len == 0;
    freeReplyObject(rep);
    return gone;
}

SK_TEST_T(sentinel_async_client_leaves_a_master_on_readonly_and_on_no_other_error, 90)
{
    struct sk_sentinel_spawn ss;
    sk_th_sentinel_start(&ss, 1, NULL);
    int m0 = sk_th_sentinel_master(&ss), other = 1 - m0;
    h2o_loop_t *loop = h2o_evloop_create();
    sk_aredis *ar;
    char err[128];
    CHECK_MSG(sk_aredis_new(&ar, loop, ss.url, 1000, err, sizeof err) == 0, "%s", err);
    int64_t deadline = sk_mono_ms() + 10000;
    while (!sk_aredis_ready(ar) && sk_mono_ms() < deadline) {
        h2o_evloop_run(loop, 10);
        sk_aredis_flush(ar);
        sk_aredis_tick(ar);
    }
    CHECK_MSG(sk_aredis_ready(ar), "no master: %s", sk_aredis_errstr(ar));
    char m0_addr[80], addr[80];
    snprintf(m0_addr, sizeof m0_addr, "127.0.0.1:%d", ss.node[m0].port);
    master_addr(ar, addr);
    CHECK_STR(addr, m0_addr);
    redisReply *rep = ask(loop, ar, 3, (const char *const[]){"SET", "k", "1"});
    CHECK(rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    long long id0 = client_id(loop, ar);
    unsigned connects = sk_aredis_connects(ar);

    /* errors of the master's own (a script's, a wrong type, an unknown
     * command, one naming READONLY past its start): answers to the caller,
     * and the tick after each keeps the master and its connection */
    const char *const errs[][3] = {
        {"EVAL", "return redis.error_reply('ERR nope')", "0"},
        {"LPUSH", "k", "x"},
        {"NOSUCHCOMMAND", "a", "b"},
        {"EVAL", "return redis.error_reply('ERR not READONLY')", "0"},
    };
    const char *const starts[] = {"ERR nope", "WRONGTYPE", "ERR unknown command",
                                  "ERR not READONLY"};
    for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++) {
        rep = ask(loop, ar, 3, errs[i]);
        CHECK_MSG(rep->type == REDIS_REPLY_ERROR &&
                      !strncmp(rep->str, starts[i], strlen(starts[i])),
                  "%s: %s", errs[i][0], rep->str ? rep->str : "(not an error)");
        freeReplyObject(rep);
        sk_aredis_tick(ar);
        CHECK_MSG(sk_aredis_ready(ar), "left the master after -%s: %s", starts[i],
                  sk_aredis_errstr(ar));
    }
    rep = ask(loop, ar, 3, (const char *const[]){"SET", "k", "2"});
    CHECK(rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    CHECK_EQ(client_id(loop, ar), id0); /* the same connection */
    CHECK_EQ(sk_aredis_connects(ar), connects);
    master_addr(ar, addr);
    CHECK_STR(addr, m0_addr);
    CHECK(!connection_gone(&ss, m0, id0));

    /* the master made a replica under the client (of the other node, as a
     * failover makes it; the Sentinels still name it, and nothing is in
     * flight, so no ROLE will say it): the write answers READONLY, and the
     * tick after it leaves the master and closes the connection */
    CHECK_EQ(sk_aredis_pending(ar), 0);
    rep = sk_th_sentinel_cmd(&ss, m0, "REPLICAOF 127.0.0.1 %d", ss.node[other].port);
    CHECK(rep && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    rep = ask(loop, ar, 3, (const char *const[]){"SET", "k", "3"});
    CHECK_MSG(rep->type == REDIS_REPLY_ERROR && !strncmp(rep->str, "READONLY", 8), "SET: %s",
              rep->str ? rep->str : "(not an error)");
    freeReplyObject(rep);
    CHECK(sk_aredis_ready(ar)); /* nothing left before the tick */
    sk_aredis_tick(ar);
    CHECK(!sk_aredis_ready(ar));
    CHECK_MSG(strstr(sk_aredis_errstr(ar), "answered READONLY"), "%s", sk_aredis_errstr(ar));
    CHECK_MSG(POLL_UNTIL(connection_gone(&ss, m0, id0), 5000), "connection %lld still open", id0);
    sk_aredis_free(ar);
    h2o_evloop_destroy(loop);
    sk_th_sentinel_stop(&ss);
}

/* ---- the order pipeline through a failover ------------------------------ */

static void *worker_thread(void *arg)
{
    sk_worker_run(arg);
    return NULL;
}

static void *sweeper_thread(void *arg)
{
    sk_sweeper_run(arg);
    return NULL;
}

/* PING through r until it answers (the client found a master), bounded. */
static void until_master(sk_redis *r, int ms)
{
    int64_t deadline = sk_mono_ms() + ms;
    for (;;) {
        redisReply *rep;
        int rc = sk_redis_cmd(r, &rep, "PING");
        if (rc == 0) {
            freeReplyObject(rep);
            return;
        }
        CHECK_MSG(sk_mono_ms() < deadline, "no master within %d ms: %s", ms, r->errstr);
        pause_ms(20);
    }
}

/* WAIT for every replica through r: what r wrote is on the replicas. */
static void wait_replicas(sk_redis *r, int n)
{
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(r, &rep, "WAIT %d 5000", n), 0);
    CHECK_MSG(rep->type == REDIS_REPLY_INTEGER && rep->integer >= n, "WAIT %d: %lld", n,
              rep->type == REDIS_REPLY_INTEGER ? rep->integer : -1LL);
    freeReplyObject(rep);
}

/* Orders of aid in the store: all of them, and the cancelled ones. */
static void db_orders(struct sk_th_env *e, uint64_t aid, int64_t *all, int64_t *cancelled)
{
    struct sk_order_counts c;
    CHECK_EQ(sk_store_orders_count(e->st, aid, &c), 0);
    *all = 0;
    for (int i = 0; i < SK_ORDER_NSTATUS; i++)
        *all += c.orders[i];
    *cancelled = c.orders[SK_ORDER_CANCELLED];
}

/* Polls until every one of want orders is in the store and cancelled, and
 * Redis (through r) has every unit back. */
static int all_swept(struct sk_th_env *e, uint64_t aid, int64_t want, int64_t stock)
{
    int64_t all, cancelled;
    db_orders(e, aid, &all, &cancelled);
    if (all != want || cancelled != want) return 0;
    struct sk_stock_state st;
    return sk_stock_state(e->r, aid, &st) == 0 && st.remaining == stock && st.held == 0;
}

SK_TEST_T(sentinel_worker_sweeper_and_reconcile_follow_a_failover, 150)
{
    struct sk_sentinel_spawn ss;
    sk_th_sentinel_start(&ss, 2, NULL);
    struct sk_th_env env, *e = &env;
    sk_th_env_init(e, 0, "sentinel.db", ss.url);
    /* 1 s to pay: the sweeper cancels every order and gives its unit back */
    const int64_t stock = 200;
    uint64_t aid = sk_th_env_activity(e, stock, 1, 1, 1);

    struct sk_worker_opts wo;
    sk_worker_opts_init(&wo);
    wo.redis_url = ss.url;
    wo.db_spec = e->spec;
    wo.consumer = "failover";
    wo.block_ms = 50;
    struct sk_sweeper_opts so;
    sk_sweeper_opts_init(&so);
    so.redis_url = ss.url;
    so.db_spec = e->spec;
    so.interval_ms = 100;
    sk_worker *w;
    sk_sweeper *sw;
    char err[512];
    CHECK_MSG(sk_worker_new(&w, &wo, err, sizeof err) == 0, "worker: %s", err);
    CHECK_MSG(sk_sweeper_new(&sw, &so, err, sizeof err) == 0, "sweeper: %s", err);
    pthread_t wt, st;
    CHECK_EQ(pthread_create(&wt, NULL, worker_thread, w), 0);
    CHECK_EQ(pthread_create(&st, NULL, sweeper_thread, sw), 0);

    /* before: 50 orders persisted, cancelled and released on the master,
     * and on both replicas */
    struct sk_th_bought b[100];
    CHECK_EQ(sk_th_env_buy_users(e, aid, 1, 50, 1, 10, b), 50);
    CHECK_MSG(POLL_UNTIL(all_swept(e, aid, 50, stock), 20000), "first 50 not swept");
    wait_replicas(e->r, 2);

    int old = sk_th_sentinel_kill_master(&ss);
    int now = sk_th_sentinel_await_failover(&ss, old);
    until_master(e->r, 15000);
    CHECK_EQ(e->r->sn_port, ss.node[now].port);

    /* after: 50 more on the promoted master; the worker and the sweeper,
     * whose connections broke with the old master, find the new one */
    CHECK_EQ(sk_th_env_buy_users(e, aid, 51, 50, 1, 10, b + 50), 50);
    CHECK_MSG(POLL_UNTIL(all_swept(e, aid, 100, stock), 20000),
              "the orders bought after the failover were not persisted and swept");
    sk_worker_stop(w);
    sk_sweeper_stop(sw);
    CHECK_EQ(pthread_join(wt, NULL), 0);
    CHECK_EQ(pthread_join(st, NULL), 0);
    struct sk_worker_stats ws;
    sk_worker_stats(w, &ws);
    struct sk_sweeper_stats sws;
    sk_sweeper_stats(sw, &sws);
    printf("    # worker persisted %llu (redis errors %llu), sweeper cancelled %llu and released "
           "%llu across the failover\n",
           (unsigned long long)ws.persisted, (unsigned long long)ws.redis_errors,
           (unsigned long long)sws.cancelled, (unsigned long long)sws.released);
    CHECK_EQ(ws.persisted, 100);
    CHECK_EQ(sws.cancelled, 100);
    sk_worker_free(w);
    sk_sweeper_free(sw);

    /* reconcile through the client that lived through the failover, then
     * the CLI (a fresh client: it asks the Sentinels) */
    struct sk_reconcile_report rep;
    CHECK_EQ(sk_reconcile_activity(e->st, e->r, aid, NULL, &rep), 0);
    CHECK_MSG(rep.consistent, "reconcile found drift after the failover");
    sk_reconcile_report_free(&rep);
    char out[4096], id[32];
    snprintf(id, sizeof id, "%" PRIu64, aid);
    const char *rargs[] = {"reconcile", "--redis", ss.url, "--db", e->spec, "--activity", id, NULL};
    int code = sk_th_run_seckill(out, sizeof out, NULL, rargs);
    CHECK_MSG(code == 0, "seckill reconcile exited %d: %s", code, out);
    const char *sargs[] = {"activity", "show", "--redis", ss.url, "--db",
                           e->spec,    "--id", id,        NULL};
    code = sk_th_run_seckill(out, sizeof out, NULL, sargs);
    CHECK_MSG(code == 0, "seckill activity show exited %d: %s", code, out);
    sk_th_env_done(e);
    sk_th_sentinel_stop(&ss);
}

/* ---- `seckill serve` over HTTP through a failover ----------------------- */

struct kill_ctx {
    struct sk_sentinel_spawn *ss;
    int old, now;
};

/* The fault of the sale: SIGKILL of the master, back when the Sentinels
 * agree on a promoted replica. */
static void kill_master(void *arg)
{
    struct kill_ctx *k = arg;
    k->old = sk_th_sentinel_kill_master(k->ss);
    k->now = sk_th_sentinel_await_failover(k->ss, k->old);
}

static void sentinel_sale(int sync, struct fo_sale_result *res)
{
    struct sk_sentinel_spawn ss;
    sk_th_sentinel_start(&ss, 2, NULL);
    struct kill_ctx k = {&ss, -1, -1};
    fo_sale(ss.url, 0, sync, kill_master, &k, res);
    CHECK_EQ(res->master_port, ss.node[k.now].port); /* the checks read the promoted master */
    sk_th_sentinel_stop(&ss);
}

SK_TEST_T(sentinel_sale_with_sync_replicas_keeps_every_200_through_a_master_kill, 150)
{
    struct fo_sale_result res;
    sentinel_sale(1, &res);
    fo_sale_print("Sentinel, --sync-replicas 1", &res);
}

SK_TEST_T(sentinel_sale_without_sync_replicas_reports_the_200s_a_failover_lost, 150)
{
    struct fo_sale_result res;
    sentinel_sale(0, &res);
    /* a figure, not an assertion: asynchronous replication may lose the
     * last writes before the kill, or none */
    fo_sale_print("Sentinel, no --sync-replicas", &res);
}

/* ---- a master stopped past its failover, then continued ----------------- */

/* The branch of node i (engine/order_id.h: the first hex digits of its
 * replication id), into out. */
static void branch_of(struct sk_sentinel_spawn *ss, int i, char *out, size_t cap)
{
    redisReply *rep = sk_th_sentinel_cmd(ss, i, "INFO replication");
    CHECK(rep && rep->type == REDIS_REPLY_STRING);
    const char *p = strstr(rep->str, "master_replid:");
    CHECK(p);
    snprintf(out, cap, "%.*s", SK_OID_BRANCH_LEN, p + 14);
    freeReplyObject(rep);
}

/* A blocking client writing in a loop, in a process of its own (the test
 * forks load clients later: no thread of its own may run then): every
 * write that succeeded, with when and on which master, in shared memory. */
struct writer {
    const char *url;
    atomic_int stop;
    int old_port;
    _Atomic int64_t after_us; /* writes to old_port sent after this are late */
    atomic_long ok, late, to_old;
};

static void writer_run(struct writer *w)
{
    sk_redis *r;
    char err[256];
    if (sk_redis_new(&r, w->url, 300, 300, err, sizeof err) < 0) return;
    while (!atomic_load(&w->stop)) {
        int64_t t = sk_mono_us();
        redisReply *rep;
        if (sk_redis_cmd(r, &rep, "INCR seckill:test:writer") == 0) {
            if (rep->type == REDIS_REPLY_INTEGER) {
                atomic_fetch_add(&w->ok, 1);
                if (r->sn_port == w->old_port) {
                    atomic_fetch_add(&w->to_old, 1);
                    if (t > atomic_load(&w->after_us)) atomic_fetch_add(&w->late, 1);
                }
            }
            freeReplyObject(rep);
        } else {
            pause_ms(5);
        }
    }
    sk_redis_free(r);
}

SK_TEST_T(sentinel_serve_never_admits_on_a_master_stopped_past_its_failover, 150)
{
    struct sk_sentinel_spawn ss;
    sk_th_sentinel_start(&ss, 2, NULL);
    sk_redis *r = redis_to(ss.url);
    uint64_t aid = sk_th_unique_id();
    open_activity(r, aid, 150000, 1, 1);
    const char *extra[] = {"--redis-timeout-ms", "500", NULL};
    struct sk_th_serve s;
    serve_start(&s, ss.url, extra);
    struct load *L = load_new(s.port, aid);
    L->n = MAX_RECS;
    for (size_t i = 0; i < L->n; i++)
        L->recs[i] = (struct rec){.user = 1 + (uint32_t)i, .qty = 1};
    L->think_us = 2000;
    pid_t pids[2];
    load_start(L, 2, 4, pids);
    CHECK_MSG(POLL_UNTIL(atomic_load(&L->accepted) >= 300, 15000), "no load (log %s)", s.log);
    int old = sk_th_sentinel_master(&ss);
    char old_branch[16];
    branch_of(&ss, old, old_branch, sizeof old_branch);
    struct writer *wp =
        mmap(NULL, sizeof *wp, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(wp != MAP_FAILED); /* zero-filled */
    wp->url = ss.url;
    wp->old_port = ss.node[old].port;
    atomic_store(&wp->after_us, INT64_MAX);
    pid_t wpid = sk_th_fork();
    if (wpid == 0) {
        writer_run(wp);
        _exit(0);
    }
    CHECK(POLL_UNTIL(atomic_load(&wp->ok) > 10, 5000));

    /* stopped, and with it the first Sentinel of the URL: its clients'
     * commands time out, the other two Sentinels promote a replica; both
     * stay stopped two seconds past that, then go on, the master still
     * believing it is one and the Sentinel still naming it (an epoch
     * behind) until the others' news reaches them */
    int64_t t_stop = sk_mono_us();
    CHECK_EQ(kill(ss.node[old].pid, SIGSTOP), 0);
    CHECK_EQ(kill(ss.spid[0], SIGSTOP), 0);
    pid_t s0 = ss.spid[0];
    ss.spid[0] = 0; /* the promotion as the two others see it */
    int now = sk_th_sentinel_await_failover(&ss, old);
    ss.spid[0] = s0;
    int64_t t_promoted = sk_mono_us();
    /* the bound (redis/sentinels.h): a majority names the new master */
    const int64_t bound_us = (SK_SENTINELS_POLL_MS + SK_SENTINELS_TIMEOUT_MS) * 1000LL;
    atomic_store(&wp->after_us, t_promoted + bound_us);
    pause_ms(2000);
    CHECK_EQ(kill(ss.node[old].pid, SIGCONT), 0);
    CHECK_EQ(kill(ss.spid[0], SIGCONT), 0);
    int64_t t_cont = sk_mono_us();
    /* a serve process that starts now asks the Sentinels afresh: the first
     * of the URL names the old master */
    struct sk_th_serve s2;
    sk_th_serve_start(
        &s2, ss.url,
        (const char *const[]){"--role", "api", "--redis-timeout-ms", "500", "--db", s.db, NULL});
    struct load *L2 = load_new(s2.port, aid);
    L2->n = MAX_RECS;
    for (size_t i = 0; i < L2->n; i++)
        L2->recs[i] = (struct rec){.user = MAX_RECS + 1 + (uint32_t)i, .qty = 1};
    L2->think_us = 2000;
    pid_t pids2[1];
    load_start(L2, 1, 4, pids2);
    int base = atomic_load(&L->accepted);
    if (!POLL_UNTIL(atomic_load(&L->accepted) >= base + 300, 30000)) {
        /* a rare flake under load (docs/notes/open-questions.md): its log */
        char cmd[600];
        snprintf(cmd, sizeof cmd, "grep -v ' info worker' %s | tail -40", s.log);
        if (system(cmd) != 0) printf("    (no log)\n");
        printf("    # /metrics: in flight %" PRId64 ", batches %" PRId64 ", 503s %d\n",
               metric(s.port, "seckill_inflight_requests"),
               metric(s.port, "seckill_batch_size_count"), atomic_load(&L->n503));
        /* the 503s by kind, the last one, and the key set's fence as Redis
         * holds it: a `recovering` with a fence "behind" means the promoted
         * replica lacked acknowledged admissions, and this test has no
         * worker to rebuild it (docs/notes/open-questions.md) */
        size_t n = atomic_load(&L->next), last = SIZE_MAX;
        char kinds[4][24] = {{0}};
        int counts[4] = {0};
        for (size_t i = 0; i < (n < L->n ? n : L->n); i++) {
            if (L->recs[i].outcome != OUT_ANSWERED || L->recs[i].status != 503) continue;
            last = i;
            int k = 0;
            while (k < 4 && kinds[k][0] && strcmp(kinds[k], L->recs[i].err))
                k++;
            if (k == 4) continue;
            if (!kinds[k][0]) snprintf(kinds[k], sizeof kinds[k], "%s", L->recs[i].err);
            counts[k]++;
        }
        for (int k = 0; k < 4 && kinds[k][0]; k++)
            printf("    # 503 %s: %d\n", kinds[k], counts[k]);
        if (last != SIZE_MAX)
            printf("    # the last 503: %s (%s)\n", L->recs[last].err, L->recs[last].msg);
        struct sk_stock_state st;
        if (sk_redis_connect(r) == 0 && sk_stock_state(r, aid, &st) == 0)
            printf("    # in Redis: fenced %" PRId64 ", fence %s (%s)\n", st.fenced, st.fence,
                   st.fence_why);
        CHECK_MSG(0, "serve did not admit after the old master came back: %d 200s since (log %s)",
                  atomic_load(&L->accepted) - base, s.log);
    }
    if (!POLL_UNTIL(atomic_load(&L2->accepted) >= 300, 30000)) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "grep -v ' info worker' %s | tail -25", s2.log);
        if (system(cmd) != 0) printf("    (no log)\n");
        CHECK_MSG(0, "the second serve did not admit: %d 200s (log %s)", atomic_load(&L2->accepted),
                  s2.log);
    }
    pause_ms(3000); /* the old master meanwhile: demoted by the Sentinels */
    atomic_store(&L->stop, 1);
    atomic_store(&L2->stop, 1);
    load_wait(L, 2, pids);
    load_wait(L2, 1, pids2);
    check_no_client_failures(L2);
    atomic_store(&wp->stop, 1);
    waitpid(wpid, NULL, 0);
    check_no_client_failures(L);

    /* every 200 names the branch of the master that admitted it */
    long old_before = 0, old_after_promotion = 0, late = 0, new_after = 0;
    int64_t last_old_us = 0;
    for (size_t k = 0; k < 2 * (size_t)MAX_RECS; k++) {
        const struct load *LL = k < MAX_RECS ? L : L2;
        size_t i = k % MAX_RECS, n = atomic_load(&((struct load *)LL)->next);
        if (i >= n || i >= LL->n) continue;
        const struct rec *q = &LL->recs[i];
        if (q->outcome != OUT_ANSWERED || q->status != 200) continue;
        struct sk_oid id;
        CHECK_MSG(sk_oid_parse(q->oid, strlen(q->oid), &id) == 0, "order id %s", q->oid);
        if (!strcmp(id.branch, old_branch)) {
            if (q->t_send_us < t_stop) old_before++;
            if (q->t_send_us >= t_promoted) old_after_promotion++;
            if (q->t_send_us > t_promoted + bound_us) late++;
            if (q->t_done_us > last_old_us) last_old_us = q->t_done_us;
        } else if (q->t_send_us >= t_promoted) {
            new_after++;
        }
    }
    printf("    # master %d stopped; node %d promoted %" PRId64 " ms later, continued %" PRId64
           " ms after that; 200s on the old master: %ld before the stop, %ld sent after the "
           "promotion, %ld past the bound of %" PRId64 " ms (the last answered %" PRId64
           " ms after the stop); %ld 200s on the new one; blocking client: %ld writes, %ld to "
           "the old master, %ld late\n",
           old, now, (t_promoted - t_stop) / 1000, (t_cont - t_promoted) / 1000, old_before,
           old_after_promotion, late, bound_us / 1000, (last_old_us - t_stop) / 1000, new_after,
           atomic_load(&wp->ok), atomic_load(&wp->to_old), atomic_load(&wp->late));
    long w_late = atomic_load(&wp->late);
    munmap(wp, sizeof *wp);
    CHECK(old_before > 0); /* the branch names the old master: the check sees it */
    CHECK(new_after > 0);
    CHECK_EQ(late, 0);
    CHECK_EQ(w_late, 0);
    /* what the promoted master holds is consistent */
    CHECK_MSG(sk_redis_connect(r) == 0, "redis: %s", r->errstr);
    CHECK_EQ(r->sn_port, ss.node[now].port);
    struct view v;
    view_load(r, aid, &v);
    check_invariants(&v, 150000, 1);
    view_free(&v);
    stop_server(&s2);
    stop_server(&s);
    load_free(L2);
    load_free(L);
    sk_redis_free(r);
    sk_th_sentinel_stop(&ss);
}
