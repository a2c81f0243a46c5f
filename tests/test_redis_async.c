/* test_redis_async.c - the pipelined Redis client on h2o's event loop,
 * driven directly (no HTTP): answers come back in order, a SCRIPT FLUSH is
 * survived by the EVAL fallback, a stopped server fails the commands in
 * flight within the reply timeout, and the client reconnects (reloading
 * its scripts) when the server comes back. A real private redis-server. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <h2o.h>

#include "core/clock.h"
#include "core/error.h"
#include "engine/keys.h"
#include "engine/stock.h"
#include "redis/redis_async.h"
#include "redis/redis_conn.h"
#include "redis/script.h"
#include "support/fixtures.h"
#include "support/harness.h"

/* Runs loop passes (flushing and ticking like the server does) until
 * *done or the deadline; returns whether *done became true. */
static int run_until(h2o_loop_t *loop, sk_aredis *ar, const int *done, int64_t ms)
{
    int64_t deadline = sk_mono_ms() + ms;
    while (!*done && sk_mono_ms() < deadline) {
        h2o_evloop_run(loop, 10);
        sk_aredis_flush(ar);
        sk_aredis_tick(ar);
    }
    return *done;
}

static sk_aredis *connect_async_opts(h2o_loop_t *loop, const char *url,
                                     const struct sk_aredis_opts *o)
{
    sk_aredis *ar;
    char err[128];
    CHECK_MSG(sk_aredis_new_opts(&ar, loop, url, o, err, sizeof err) == 0, "%s", err);
    int ready = 0;
    int64_t deadline = sk_mono_ms() + 5000;
    while (!(ready = sk_aredis_ready(ar)) && sk_mono_ms() < deadline) {
        h2o_evloop_run(loop, 10);
        sk_aredis_flush(ar);
        sk_aredis_tick(ar);
    }
    CHECK_MSG(ready, "not ready: %s", sk_aredis_errstr(ar));
    return ar;
}

static sk_aredis *connect_async(h2o_loop_t *loop, const char *url, int timeout_ms)
{
    struct sk_aredis_opts o = {.timeout_ms = timeout_ms};
    return connect_async_opts(loop, url, &o);
}

/* A private redis-server started into srv, and an event loop for a
 * client of it. */
static h2o_loop_t *private_redis(struct sk_th_redis *srv)
{
    sk_th_redis_start(srv, NULL);
    return h2o_evloop_create();
}

/* The client freed, then its private server stopped (hard: SIGKILL). */
static void async_end(sk_aredis *ar, struct sk_th_redis *srv, int hard)
{
    sk_aredis_free(ar);
    sk_th_redis_stop(srv, hard);
}

SK_TEST(async_client_answers_pipelined_commands_in_order)
{
    h2o_loop_t *loop = h2o_evloop_create();
    sk_aredis *ar = connect_async(loop, sk_th_redis_url(), 1000);
    char key[64];
    snprintf(key, sizeof key, "t:async:%llu", (unsigned long long)sk_th_unique_id());
    struct sk_th_answers a[200];
    memset(a, 0, sizeof a);
    for (int i = 0; i < 200; i++) {
        const char *argv[] = {"INCR", key};
        CHECK_EQ(sk_aredis_command(ar, sk_th_on_reply, &a[i], 2, argv, NULL), 0);
    }
    CHECK_EQ(sk_aredis_pending(ar), 200);
    int done = 0;
    int64_t deadline = sk_mono_ms() + 5000;
    while (!(done = a[199].n == 1) && sk_mono_ms() < deadline)
        run_until(loop, ar, &done, 10);
    CHECK(done);
    for (int i = 0; i < 200; i++)
        CHECK_EQ(a[i].last_int, i + 1); /* in order */
    CHECK_EQ(sk_aredis_pending(ar), 0);
    sk_aredis_free(ar);
}

SK_TEST(async_eval_survives_a_script_flush_without_an_error)
{
    struct sk_th_redis srv;
    h2o_loop_t *loop = private_redis(&srv);
    /* EVALSHA (the Functions library would make a script flush harmless) */
    struct sk_aredis_opts o = {.timeout_ms = 1000, .no_functions = 1};
    sk_aredis *ar = connect_async_opts(loop, srv.url, &o);
    CHECK(!sk_aredis_uses_functions(ar));
    sk_redis *r = sk_th_redis_new(srv.url, 1000, 1000);
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(r, &rep, "SCRIPT FLUSH"), 0);
    freeReplyObject(rep);
    struct sk_keys k;
    sk_keys_for(&k, 4242);
    const char *keys[] = {k.meta, k.stock, k.buyers, k.orders, k.dlq};
    struct sk_th_answers a = {0};
    CHECK_EQ(sk_aredis_eval(ar, SK_SCRIPT_STATE, 5, keys, 0, NULL, NULL, sk_th_on_reply, &a), 0);
    int done = 0;
    int64_t deadline = sk_mono_ms() + 5000;
    while (!(done = a.n == 1) && sk_mono_ms() < deadline)
        run_until(loop, ar, &done, 10);
    CHECK(done);
    CHECK_EQ(a.errors, 0); /* NOSCRIPT was resent as EVAL, never seen by the caller */
    CHECK_EQ(a.nulls, 0);
    /* and the script is cached again */
    const char *argv[] = {"SCRIPT", "EXISTS", sk_script_sha(SK_SCRIPT_STATE)};
    CHECK_EQ(sk_redis_command(r, &rep, 3, argv, NULL), 0);
    CHECK_EQ(rep->element[0]->integer, 1);
    freeReplyObject(rep);
    sk_redis_free(r);
    async_end(ar, &srv, 0);
}

SK_TEST(async_commands_fail_within_the_timeout_when_redis_stops_then_it_reconnects)
{
    struct sk_th_redis srv;
    h2o_loop_t *loop = private_redis(&srv);
    sk_aredis *ar = connect_async(loop, srv.url, 300);
    unsigned connects = sk_aredis_connects(ar);
    kill(srv.pid, SIGSTOP);
    struct sk_th_answers a = {0};
    const char *argv[] = {"PING"};
    CHECK_EQ(sk_aredis_command(ar, sk_th_on_reply, &a, 1, argv, NULL), 0);
    int64_t t0 = sk_mono_ms();
    int done = 0;
    while (!(done = a.n == 1) && sk_mono_ms() - t0 < 3000)
        run_until(loop, ar, &done, 10);
    CHECK(done);
    CHECK_EQ(a.nulls, 1); /* failed, not answered */
    CHECK_MSG(sk_mono_ms() - t0 < 1500, "took %lld ms", (long long)(sk_mono_ms() - t0));
    CHECK(!sk_aredis_ready(ar));
    /* while down, new commands are refused at once */
    CHECK_EQ(sk_aredis_command(ar, sk_th_on_reply, &a, 1, argv, NULL), SK_EIO);
    kill(srv.pid, SIGCONT);
    int ready = 0;
    int64_t deadline = sk_mono_ms() + 5000;
    while (!(ready = sk_aredis_ready(ar)) && sk_mono_ms() < deadline)
        run_until(loop, ar, &ready, 10);
    CHECK_MSG(ready, "no reconnect: %s", sk_aredis_errstr(ar));
    CHECK(sk_aredis_connects(ar) > connects);
    async_end(ar, &srv, 1);
}

/* serve's pass writes to Redis after h2o's callbacks (flush_redis), then
 * ticks: a reply timeout there loses the connection and closes its socket
 * before the next pass. An h2o write that completed at once had put the
 * socket in h2o's pending list: the next pass freed the closed socket,
 * then walked it (a SIGSEGV seen under the Sentinel nemesis). Freed memory
 * is only filled under SANITIZE=1 (ASAN_OPTIONS max_free_fill_size, set by
 * the Makefile), where the walk dies at once; elsewhere it passes either
 * way. Same for a connect that completes at once (a unix socket) and is
 * lost in the same tick. */
SK_TEST(async_client_lost_right_after_a_write_outside_the_pass_leaves_the_loop_sound)
{
    struct sk_th_redis srv;
    h2o_loop_t *loop = private_redis(&srv);
    const char *urls[] = {srv.url, srv.unix_url}; /* TCP, and a unix socket */
    for (int u = 0; u < 2; u++) {
        sk_aredis *ar = connect_async(loop, urls[u], 50);
        for (int round = 0; round < 2; round++) {
            kill(srv.pid, SIGSTOP);
            struct sk_th_answers a = {0};
            const char *argv[] = {"PING"};
            CHECK_EQ(sk_aredis_command(ar, sk_th_on_reply, &a, 1, argv, NULL), 0);
            sk_aredis_flush(ar); /* written outside a pass, as serve does */
            int64_t sent = sk_mono_ms();
            while (sk_mono_ms() - sent <= 60) { /* past the reply's deadline (50 ms) */
                struct timespec ts = {0, 2 * 1000 * 1000};
                nanosleep(&ts, NULL);
            }
            sk_aredis_tick(ar); /* timed out: lost, its socket closed outside a pass */
            CHECK_EQ(a.nulls, 1);
            CHECK(!sk_aredis_ready(ar));
            for (int i = 0; i < 3; i++)
                h2o_evloop_run(loop, 0); /* the passes after: nothing freed is walked */
            kill(srv.pid, SIGCONT);
            int ready = 0;
            int64_t deadline = sk_mono_ms() + 5000;
            while (!(ready = sk_aredis_ready(ar)) && sk_mono_ms() < deadline)
                run_until(loop, ar, &ready, 10);
            CHECK_MSG(ready, "no reconnect to %s: %s", urls[u], sk_aredis_errstr(ar));
        }
        /* and it answers */
        struct sk_th_answers a = {0};
        const char *argv[] = {"PING"};
        CHECK_EQ(sk_aredis_command(ar, sk_th_on_reply, &a, 1, argv, NULL), 0);
        int done = 0;
        int64_t deadline = sk_mono_ms() + 5000;
        while (!(done = a.n == 1) && sk_mono_ms() < deadline)
            run_until(loop, ar, &done, 10);
        CHECK(done);
        CHECK_EQ(a.nulls, 0);
        sk_aredis_free(ar);
    }
    sk_th_redis_stop(&srv, 1);
}

SK_TEST(async_client_reconnects_after_redis_is_killed_and_restarted)
{
    struct sk_th_redis srv;
    h2o_loop_t *loop = private_redis(&srv);
    sk_aredis *ar = connect_async(loop, srv.url, 500);
    sk_th_redis_stop(&srv, 1); /* kill -9 */
    int down = 0;
    int64_t deadline = sk_mono_ms() + 3000;
    while (!(down = !sk_aredis_ready(ar)) && sk_mono_ms() < deadline) {
        /* a command notices the broken connection */
        struct sk_th_answers a = {0};
        const char *argv[] = {"PING"};
        sk_aredis_command(ar, sk_th_on_reply, &a, 1, argv, NULL);
        run_until(loop, ar, &down, 20);
    }
    CHECK(down);
    /* the attempts while it is down fail with the kernel's reason (a TCP
     * connect reports it once writable, through SO_ERROR) */
    int refused = 0;
    deadline = sk_mono_ms() + 3000;
    while (!(refused = strstr(sk_aredis_errstr(ar), "Connection refused") != NULL) &&
           sk_mono_ms() < deadline)
        run_until(loop, ar, &refused, 20);
    CHECK_MSG(refused, "while down: %s", sk_aredis_errstr(ar));
    sk_th_redis_restart(&srv, NULL);
    int ready = 0;
    deadline = sk_mono_ms() + 5000;
    while (!(ready = sk_aredis_ready(ar)) && sk_mono_ms() < deadline)
        run_until(loop, ar, &ready, 10);
    CHECK_MSG(ready, "no reconnect: %s", sk_aredis_errstr(ar));
    struct sk_th_answers a = {0};
    const char *argv[] = {"PING"};
    CHECK_EQ(sk_aredis_command(ar, sk_th_on_reply, &a, 1, argv, NULL), 0);
    int done = 0;
    deadline = sk_mono_ms() + 3000;
    while (!(done = a.n == 1) && sk_mono_ms() < deadline)
        run_until(loop, ar, &done, 10);
    CHECK(done);
    CHECK_STR(a.last, "PONG");
    async_end(ar, &srv, 1);
}

/* Stops and continues a redis-server over and over until told to stop:
 * a server that reads in fits and starts. */
struct stutter {
    pid_t pid;
    atomic_int stop;
};

static void *stutter_main(void *arg)
{
    struct stutter *st = arg;
    for (unsigned k = 0; !atomic_load(&st->stop); k++) {
        kill(st->pid, SIGSTOP);
        struct timespec ts = {0, (long)(1 + k % 3) * 1000000L};
        nanosleep(&ts, NULL);
        kill(st->pid, SIGCONT);
        ts.tv_nsec = (long)(1 + (k / 3) % 2) * 1000000L;
        nanosleep(&ts, NULL);
    }
    kill(st->pid, SIGCONT);
    return NULL;
}

/* A Redis that reads in fits and starts while commands keep coming,
 * flushed after each loop pass as serve does: the client's writes fill the
 * socket, go on when Redis reads, and complete at once in between. h2o 2.2
 * leaves a socket polled for writing after a write that completed at once
 * outside its callbacks; the next "writable" then found no writer and
 * aborted the process (an assertion in h2o's write_pending). Every command
 * must be answered, none lost. */
SK_TEST_T(async_client_survives_writes_that_fill_the_socket_while_redis_reads_slowly, 60)
{
    struct sk_th_redis srv;
    h2o_loop_t *loop = private_redis(&srv);
    /* the unix socket: its buffers are small and do not grow (TCP's do) */
    sk_aredis *ar = connect_async(loop, srv.unix_url[0] ? srv.unix_url : srv.url, 20000);
    static char big[40 * 1024];
    memset(big, 'v', sizeof big);
    struct sk_th_answers a = {0};
    int sent = 0;
    struct stutter st = {.pid = srv.pid};
    atomic_init(&st.stop, 0);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, stutter_main, &st), 0);
    int pass = 0;
    for (int64_t end = sk_mono_ms() + 3000; sk_mono_ms() < end;) {
        h2o_evloop_run(loop, 1);
        /* a pass's commands, then the flush (serve's order): now and then
         * more than the socket holds, else a small one that fits at once,
         * or none (a pass that only read answers) */
        int kind = pass++ % 6;
        if (kind >= 3) {
            /* nothing to send this pass */
        } else if (kind == 0) {
            for (int i = 0; i < 6; i++) {
                const char *argv[] = {"SET", "sk:test:slowreader", big};
                size_t lens[] = {3, 18, sizeof big - (size_t)(sent * 997) % 20000};
                CHECK_EQ(sk_aredis_command(ar, sk_th_on_reply, &a, 3, argv, lens), 0);
                sent++;
            }
        } else {
            const char *argv[] = {"PING"};
            CHECK_EQ(sk_aredis_command(ar, sk_th_on_reply, &a, 1, argv, NULL), 0);
            sent++;
        }
        sk_aredis_flush(ar);
        sk_aredis_tick(ar);
    }
    atomic_store(&st.stop, 1);
    pthread_join(t, NULL);
    int done = 0;
    int64_t deadline = sk_mono_ms() + 20000;
    while (!(done = a.n == sent) && sk_mono_ms() < deadline)
        run_until(loop, ar, &done, 10);
    CHECK_MSG(done, "%d of %d commands answered", a.n, sent);
    CHECK_EQ(a.nulls, 0);
    CHECK_EQ(a.errors, 0);
    async_end(ar, &srv, 1);
}

/* ---- fan-out (no server: the counting alone) ----------------------------- */

static int fanout_done_calls;
static void count_done(struct sk_fanout *f)
{
    (void)f;
    fanout_done_calls++;
}

SK_TEST(fanout_runs_done_once_after_the_last_answer_and_marks_failed_sends)
{
    struct sk_fanout f;
    fanout_done_calls = 0;
    sk_fanout_begin(&f, count_done);
    sk_fanout_sent(&f, 0);
    sk_fanout_sent(&f, SK_EIO); /* never answers */
    sk_fanout_sent(&f, 0);
    sk_fanout_answered(&f); /* an answer before the sending ended */
    sk_fanout_end(&f);
    CHECK_EQ(fanout_done_calls, 0); /* one answer still out */
    CHECK_EQ(f.failed, 1);
    sk_fanout_answered(&f);
    CHECK_EQ(fanout_done_calls, 1);
    /* nothing sent: done at the end of sending, not failed */
    sk_fanout_begin(&f, count_done);
    sk_fanout_end(&f);
    CHECK_EQ(fanout_done_calls, 2);
    CHECK_EQ(f.failed, 0);
    /* every send failed: done at the end, failed */
    sk_fanout_begin(&f, count_done);
    sk_fanout_sent(&f, SK_EIO);
    sk_fanout_end(&f);
    CHECK_EQ(fanout_done_calls, 3);
    CHECK_EQ(f.failed, 1);
}

/* ---- a server still loading its data --------------------------------------- */

struct loading_watch {
    const char *url;
    atomic_int stop, ready_seen;
    atomic_int loading_errors, sent, functions_after;
};

/* An event loop of its own (the main thread is busy restarting Redis): a
 * script call every few ms while the client is ready. */
static void *loading_loop(void *arg)
{
    struct loading_watch *w = arg;
    h2o_loop_t *loop = h2o_evloop_create();
    sk_aredis *ar = connect_async(loop, w->url, 500);
    atomic_store(&w->ready_seen, 1);
    struct sk_th_answers a = {0};
    while (!atomic_load(&w->stop)) {
        if (sk_aredis_ready(ar)) {
            struct sk_keys k;
            sk_keys_for(&k, 424242);
            const char *keys[] = {k.meta, k.stock};
            if (sk_aredis_eval(ar, SK_SCRIPT_PEEK, 2, keys, 0, NULL, NULL, sk_th_on_reply, &a) == 0)
                atomic_fetch_add(&w->sent, 1);
        }
        int never = 0;
        run_until(loop, ar, &never, 5);
        atomic_store(&w->loading_errors, a.errors);
    }
    atomic_store(&w->functions_after, sk_aredis_uses_functions(ar));
    sk_aredis_free(ar);
    return NULL;
}

/* A restarted server reads its data for a while (LOADING): the client is
 * not ready meanwhile (callers answer 503), no command meets LOADING, and
 * the server's Functions are used once it is up (LOADING is no reason to
 * fall back to EVALSHA for good). */
SK_TEST(async_client_waits_for_a_server_loading_its_data)
{
    struct sk_th_redis srv;
    sk_th_redis_start(&srv, NULL);
    sk_redis *r = sk_th_redis_new(srv.url, 1000, 5000);
    for (int i = 0; i < 2000; i++) {
        char key[32];
        snprintf(key, sizeof key, "load:%d", i);
        const char *a[] = {"SET", key, "x"};
        CHECK_EQ(sk_redis_append(r, 3, a, NULL), 0);
        if (i % 1000 == 999)
            for (int j = 0; j < 1000; j++) {
                redisReply *rep;
                CHECK_EQ(sk_redis_read(r, &rep), 0);
                freeReplyObject(rep);
            }
    }
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(r, &rep, "SAVE"), 0);
    freeReplyObject(rep);
    sk_redis_free(r);
    static struct loading_watch w;
    w.url = srv.url;
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, loading_loop, &w), 0);
    int64_t by = sk_mono_ms() + 10000;
    while (!atomic_load(&w.ready_seen) && sk_mono_ms() < by)
        nanosleep(&(struct timespec){0, 2000000}, NULL);
    CHECK(atomic_load(&w.ready_seen));
    sk_th_redis_stop(&srv, 1);
    /* 2,000 keys at 500 us each: a second of LOADING (few long naps rather
     * than many short ones, whose oversleeping on a loaded machine made it
     * last past the harness's 10 s restart bound) */
    const char *slow[] = {"--key-load-delay", "500", NULL};
    int64_t t0 = sk_mono_ms();
    sk_th_redis_restart(&srv, slow);
    int64_t loaded_ms = sk_mono_ms() - t0;
    int base = atomic_load(&w.sent);
    by = sk_mono_ms() + 10000;
    while (atomic_load(&w.sent) < base + 20 && sk_mono_ms() < by)
        nanosleep(&(struct timespec){0, 2000000}, NULL);
    atomic_store(&w.stop, 1);
    pthread_join(th, NULL);
    printf("    # the server loaded for %lld ms; %d calls, %d error replies\n",
           (long long)loaded_ms, atomic_load(&w.sent), atomic_load(&w.loading_errors));
    CHECK(loaded_ms > 500);
    CHECK(atomic_load(&w.sent) >= base + 20); /* ready again afterwards */
    CHECK_EQ(atomic_load(&w.loading_errors), 0);
    CHECK_EQ(atomic_load(&w.functions_after), 1);
    sk_th_redis_stop(&srv, 1);
}

/* ---- the blocking facade (redis_conn.h): the same client on a loop per handle ---- */

/* Calls of one INFO commandstats line ("calls=N,..."), 0 when absent. */
static long long stat_calls(sk_redis *r, const char *cmd)
{
    char field[64];
    snprintf(field, sizeof field, "\ncmdstat_%s:calls=", cmd);
    redisReply *info;
    if (sk_redis_cmd(r, &info, "INFO commandstats") != 0) return 0;
    const char *v = info->str ? strstr(info->str, field) : NULL;
    long long n = v ? strtoll(v + strlen(field), NULL, 10) : 0;
    freeReplyObject(info);
    return n;
}

/* A handle's handshake asks for the library and loads it only where it is
 * missing: FUNCTION LOAD compiles every script (tens of ms of the server's
 * one thread), and the blocking callers open many short-lived handles. */
SK_TEST(blocking_handles_load_the_library_only_where_it_is_missing)
{
    struct sk_th_redis srv;
    sk_th_redis_start(&srv, NULL);
    sk_redis *a = sk_th_redis_new(srv.url, 1000, 1000);
    CHECK_EQ(sk_redis_connect(a), 0);
    CHECK_EQ(a->fn, SK_FN_ON); /* a fresh server: loaded by the first handle */
    long long loads = stat_calls(a, "function|load");
    CHECK_EQ(loads, 1);
    for (int i = 0; i < 5; i++) {
        sk_redis *b = sk_th_redis_new(srv.url, 1000, 1000);
        struct sk_stock_state st;
        sk_stock_state(b, sk_th_unique_id(), &st); /* a script call: FCALL */
        CHECK_EQ(b->fn, SK_FN_ON);
        sk_redis_free(b);
    }
    CHECK_EQ(stat_calls(a, "function|load"), loads);
    CHECK(stat_calls(a, "fcall") >= 5);
    /* gone (FUNCTION FLUSH): the next handle loads it again */
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(a, &rep, "FUNCTION FLUSH"), 0);
    freeReplyObject(rep);
    sk_redis *c = sk_th_redis_new(srv.url, 1000, 1000);
    CHECK_EQ(sk_redis_connect(c), 0);
    CHECK_EQ(stat_calls(a, "function|load"), loads + 1);
    sk_redis_free(c);
    sk_redis_free(a);
    sk_th_redis_stop(&srv, 0);
}

/* XREADGROUP BLOCK longer than the reply timeout waits its BLOCK (it is not
 * a late answer), and so does a command pipelined behind it; the
 * connection stays. */
SK_TEST(blocking_read_waits_its_block_beyond_the_reply_timeout)
{
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 1000, 300);
    char s[64];
    snprintf(s, sizeof s, "t:block:%llu", (unsigned long long)sk_th_unique_id());
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(r, &rep, "XGROUP CREATE %s g $ MKSTREAM", s), 0);
    freeReplyObject(rep);
    unsigned connects = r->connects;
    const char *xr[] = {"XREADGROUP", "GROUP", "g", "c", "BLOCK", "900", "STREAMS", s, ">"};
    const char *ping[] = {"PING"};
    int64_t t0 = sk_mono_ms();
    CHECK_EQ(sk_redis_append(r, 9, xr, NULL), 0);
    CHECK_EQ(sk_redis_append(r, 1, ping, NULL), 0);
    CHECK_MSG(sk_redis_read(r, &rep) == 0, "XREADGROUP: %s", r->errstr);
    int64_t took = sk_mono_ms() - t0;
    CHECK_EQ(rep->type, REDIS_REPLY_NIL);
    freeReplyObject(rep);
    CHECK_MSG(took >= 850, "answered after %lld ms, before its BLOCK", (long long)took);
    CHECK_MSG(sk_redis_read(r, &rep) == 0, "PING: %s", r->errstr);
    CHECK_STR(rep->str, "PONG");
    freeReplyObject(rep);
    CHECK_EQ(r->connects, connects);
    /* any other command that waits still times out at 300 ms */
    CHECK_EQ(sk_redis_cmd(r, &rep, "BLPOP %s:list 1", s), SK_ETIMEDOUT);
    sk_redis_free(r);
}

#define FT_THREADS 8

struct facade_thread {
    pthread_t t;
    int i;
    const char *url;
    sk_redis *given; /* made by the main thread, used only by this one */
    atomic_int *stop;
    long ok, failed, wrong;
};

/* One thread's handles: pipelines of ECHO, each reply its own command's
 * (a handle that read another's reply, or another thread's, says so). A
 * new handle every round but on thread 0, which keeps the one it was
 * given: loops are reused from handle to handle and thread to thread. */
static void *facade_thread(void *arg)
{
    struct facade_thread *ft = arg;
    for (int round = 0; !atomic_load(ft->stop); round++) {
        sk_redis *r = ft->given ? ft->given : sk_th_redis_new(ft->url, 1000, 1000);
        char words[16][32];
        int n = 0, rc = 0;
        for (; n < 16 && rc == 0; n++) {
            snprintf(words[n], sizeof words[n], "w%d-%d-%d", ft->i, round, n);
            const char *a[] = {"ECHO", words[n]};
            rc = sk_redis_append(r, 2, a, NULL);
        }
        for (int k = 0; k < n && rc == 0; k++) {
            redisReply *rep;
            rc = sk_redis_read(r, &rep);
            if (rc) break;
            if (rep->type != REDIS_REPLY_STRING || strcmp(rep->str, words[k]))
                ft->wrong++;
            else
                ft->ok++;
            freeReplyObject(rep);
        }
        ft->failed += rc != 0;
        if (!ft->given) sk_redis_free(r);
    }
    return NULL;
}

/* Threads each with a blocking handle (the worker process's sweeper,
 * sampler, reconcile and worker), while every client connection is killed
 * again and again: each handle reconnects on its own and never hears
 * another's answer. `make test TSAN=1 T=redis_async` runs it under
 * ThreadSanitizer. */
SK_TEST(blocking_handles_on_threads_each_run_their_own_client)
{
    struct sk_th_redis srv;
    sk_th_redis_start(&srv, NULL);
    atomic_int stop = 0;
    struct facade_thread ft[FT_THREADS];
    memset(ft, 0, sizeof ft);
    sk_redis *given = sk_th_redis_new(srv.url, 1000, 1000);
    for (int i = 0; i < FT_THREADS; i++) {
        ft[i] = (struct facade_thread){.i = i, .url = srv.url, .stop = &stop};
        if (i == 0) ft[i].given = given;
        CHECK_EQ(pthread_create(&ft[i].t, NULL, facade_thread, &ft[i]), 0);
    }
    sk_redis *killer = sk_th_redis_new(srv.url, 1000, 1000);
    int64_t until = sk_mono_ms() + 1500;
    while (sk_mono_ms() < until) {
        redisReply *rep;
        if (sk_redis_cmd(killer, &rep, "CLIENT KILL TYPE normal") == 0) freeReplyObject(rep);
        sk_th_nap_ms(50);
    }
    atomic_store(&stop, 1);
    long ok = 0, failed = 0, wrong = 0;
    for (int i = 0; i < FT_THREADS; i++) {
        pthread_join(ft[i].t, NULL);
        ok += ft[i].ok;
        failed += ft[i].failed;
        wrong += ft[i].wrong;
        CHECK_MSG(ft[i].ok > 0, "thread %d never had an answer", i);
    }
    CHECK_EQ(wrong, 0);
    CHECK_MSG(failed > 0, "no pipeline met a killed connection (%ld answers)", ok);
    printf("    %ld answers, %ld pipelines cut by a kill, none crossed\n", ok, failed);
    /* thread 0's handle, after every kill, still works */
    redisReply *rep;
    int rc = sk_redis_cmd(given, &rep, "PING");
    if (rc) rc = sk_redis_cmd(given, &rep, "PING"); /* its connection may be the killed one */
    CHECK_MSG(rc == 0, "given handle: %s", given->errstr);
    freeReplyObject(rep);
    sk_redis_free(given);
    sk_redis_free(killer);
    sk_th_redis_stop(&srv, 0);
}
