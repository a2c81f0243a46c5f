/* test_http_faults.c - the HTTP service under faults, tested from outside:
 * a real `seckill serve` process, real sockets, a real redis-server (a
 * private one wherever a fault is involved). The numbering goes on from
 * test_http_load.c (tests 1-3, the service under load); the machinery both
 * use is support/http_load_env.h's.
 *
 *  4    Redis SIGSTOPped, or killed -9 and restarted (AOF appendfsync
 *       always): 503 within a bounded time, /readyz 503, no 200 that Redis
 *       did not admit, no crash, recovery afterwards.
 *  5    SIGTERM under load (1 and 2 processes): every order in Redis was
 *       answered with a 200, no unanswered request was admitted, exit 0.
 *  6    clients that close before their answer (HTTP/1.1 with a FIN or an
 *       RST, and HTTP/2 connections the server drops while their requests
 *       wait on a stopped Redis): no crash (ASan), the admission stands,
 *       stock accounting holds.
 *  7    the batch window (--batches-in-flight): with Redis stopped and the
 *       window's batches out, purchases of later passes wait in one
 *       batch; once Redis is back every purchase is answered 200 and the
 *       calls are counted (and without a window, one call per pass).
 * After each: the invariants (docs/design.md) on Redis (no oversell, per-user limit,
 * stream length == orders, stock + sum(buyers) == initial), the server's
 * log holds no sanitizer report and no restarted worker, and it exits 0 on
 * SIGTERM. Servers run with --role api, so the stream keeps every order.
 *
 * Client processes record every request in MAP_SHARED memory and never
 * call CHECK (an exit from one thread would end its process mid-load and
 * tell the test nothing): the test process checks after reaping them.
 * Every wait is bounded: alarm() in each child and test, socket timeouts,
 * deadlines on polling loops. No test sleeps to let time pass: loops poll
 * for a condition (the fault tests hold a fault for a stated duration). */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "redis/redis_conn.h"
#include "support/harness.h"
#include "support/http_load_env.h"

/* ---- 4: Redis stopped or killed mid-run ---- */

#define FAULT_TIMEOUT_MS "300"
#define FAULT_HOLD_MS 1500 /* long enough for several reconnect attempts (backoff 50..800 ms) */
#define FAULT_STOCK 1000000

/* Index of the first record sent after t_us with this status, or -1. */
static long first_after(const struct load *L, int64_t t_us, int status)
{
    size_t n = atomic_load(&L->next);
    if (n > L->n) n = L->n;
    long best = -1;
    for (size_t i = 0; i < n; i++) {
        const struct rec *q = &L->recs[i];
        if (q->outcome != OUT_ANSWERED || q->status != status || q->t_send_us < t_us) continue;
        if (best < 0 || q->t_done_us < L->recs[best].t_done_us) best = (long)i;
    }
    return best;
}

static int count_after(const struct load *L, int64_t t_us, int status)
{
    size_t n = atomic_load(&L->next);
    if (n > L->n) n = L->n;
    int k = 0;
    for (size_t i = 0; i < n; i++)
        k += L->recs[i].outcome == OUT_ANSWERED && L->recs[i].status == status &&
             L->recs[i].t_send_us >= t_us;
    return k;
}

/* Runs a steady purchase load (unique users, 1 unit each), breaks Redis
 * mid-run (kill_it: SIGKILL, then a restart on the same port with AOF
 * appendfsync always; else SIGSTOP, then SIGCONT), and checks what every
 * client got against what Redis holds afterwards. */
static void redis_fault_under_load(int kill_it)
{
    alarm(TEST_ALARM_S);
    const char *aof[] = {"--appendonly", "yes", "--appendfsync", "always", NULL};
    struct sk_th_redis rs;
    sk_redis *r;
    uint64_t aid = private_sale(&rs, kill_it ? aof : NULL, &r, FAULT_STOCK, 1);
    struct sk_th_serve s;
    const char *extra[] = {"--redis-timeout-ms", FAULT_TIMEOUT_MS, NULL};
    serve_start(&s, rs.url, extra);
    CHECK_EQ(readyz(s.port), 200);

    struct load *L = load_new(s.port, aid);
    L->stream = 1;
    L->user_base = 1;
    L->n = MAX_RECS;
    L->think_us = 1000; /* 8 connections x ~1 request/ms: bounded records */
    pid_t pids[2];
    load_start(L, 2, 4, pids);
    CHECK_MSG(POLL_UNTIL(atomic_load(&L->accepted) >= 300, 10000), "no load");

    /* The fault. */
    int64_t t_fault = sk_mono_us();
    if (kill_it) {
        kill(rs.pid, SIGKILL);
        waitpid(rs.pid, NULL, 0);
        rs.pid = 0;
    } else {
        kill(rs.pid, SIGSTOP);
    }
    CHECK_MSG(POLL_UNTIL(first_after(L, t_fault, 503) >= 0, 5000), "no 503 within 5 s");
    long f = first_after(L, t_fault, 503);
    int64_t to_503 = (L->recs[f].t_done_us - t_fault) / 1000;
    CHECK_MSG(POLL_UNTIL(readyz(s.port) == 503, 3000), "/readyz stayed %d", readyz(s.port));
    /* Hold the fault: every request meanwhile must be answered 503 quickly. */
    CHECK(POLL_UNTIL(sk_mono_us() - t_fault >= FAULT_HOLD_MS * 1000, FAULT_HOLD_MS + 1000));
    CHECK_MSG(alive(s.pid), "the server died while Redis was down (log %s)", s.log);
    CHECK_EQ(readyz(s.port), 503);

    /* Heal. */
    int64_t t_heal = sk_mono_us();
    if (kill_it) {
        sk_th_redis_restart(&rs, aof); /* same port and directory: the AOF reloads */
        sk_redis_disconnect(r);        /* the test's own connection died with it */
    } else {
        kill(rs.pid, SIGCONT);
    }
    int64_t t_back = sk_mono_us();
    CHECK_MSG(POLL_UNTIL(first_after(L, t_back, 200) >= 0, 8000),
              "no purchase accepted within 8 s of Redis coming back");
    long b = first_after(L, t_back, 200);
    int64_t recover_ms = (L->recs[b].t_done_us - t_back) / 1000;
    CHECK_MSG(POLL_UNTIL(readyz(s.port) == 200, 5000), "/readyz stayed %d", readyz(s.port));
    int base = atomic_load(&L->accepted);
    CHECK_MSG(POLL_UNTIL(atomic_load(&L->accepted) >= base + 300, 10000), "load did not resume");
    atomic_store(&L->stop, 1);
    load_wait(L, 2, pids);
    check_no_client_failures(L);
    CHECK_MSG(alive(s.pid), "the server died (log %s)", s.log);

    size_t n = atomic_load(&L->next);
    if (n > L->n) n = L->n;
    struct tally t;
    tally_load(L, n, &t);
    print_tally(kill_it ? "redis killed -9 and restarted" : "redis SIGSTOPped", &t);
    printf("    # fault -> first 503: %" PRId64 " ms; 503s while down: %d; back -> first 200: "
           "%" PRId64 " ms (healing took %" PRId64 " ms)\n",
           to_503, count_after(L, t_fault, 503), recover_ms, (t_back - t_heal) / 1000);
    CHECK_MSG(to_503 < 2000, "first 503 only %" PRId64 " ms after the fault", to_503);
    CHECK_MSG(t.max_lat_us < 2000000, "a request waited %" PRId64 " ms", t.max_lat_us / 1000);
    CHECK_MSG(t.answered == t.attempted, "%d requests unanswered (%d closed, %d timeouts)",
              t.attempted - t.answered, t.unanswered, t.timeouts);
    CHECK_MSG(t.other == 0 && t.sold_out == 0 && t.limit == 0, "unexpected answer: %s",
              t.other_example);
    CHECK_EQ(t.bad_body, 0);

    /* Redis afterwards: every 200 is an order (with AOF always, even across
     * kill -9). An order nobody got a 200 for is allowed only for a request
     * answered 503: its purchase reached Redis before the timeout or the
     * kill and ran there (a 503 means "maybe"; the call is never resent). */
    struct view v;
    view_load(r, aid, &v);
    check_invariants(&v, FAULT_STOCK, 1);
    const struct lentry **ex;
    size_t nex = check_accepted_in_redis(L, n, &v, &ex);
    for (size_t i = 0; i < nex; i++) {
        uint32_t u = ex[i]->user;
        CHECK_MSG(u >= 1 && u - 1 < n, "order %s of unknown user %" PRIu32, ex[i]->oid, u);
        const struct rec *q = &L->recs[u - 1];
        CHECK_MSG(q->outcome == OUT_ANSWERED && q->status == 503,
                  "order %s of user %" PRIu32 " exists, but that request got %d", ex[i]->oid, u,
                  q->status);
    }
    printf("    # orders in Redis %zu = 200s %d + admitted behind a 503 %zu\n", v.nlg, t.ok, nex);
    CHECK_EQ(v.nlg, (size_t)t.ok + nex);
    free(ex);
    view_free(&v);
    stop_server(&s);
    load_free(L);
    sk_redis_free(r);
    sk_th_redis_stop(&rs, 1);
}

SK_TEST(redis_stopped_mid_run_gives_503_then_recovers)
{
    redis_fault_under_load(0);
}

SK_TEST(redis_killed_and_restarted_mid_run_gives_503_then_recovers)
{
    redis_fault_under_load(1);
}

/* ---- 5: SIGTERM under load ---- */

/* What is asserted, and why. HTTP/1.1 lets a server close an idle
 * keep-alive connection at any time; a request the client writes as the
 * server closes it (or into the accept queue of a listener being closed)
 * gets no answer and was never read, so it cannot have been admitted: a
 * client may retry it. So "every request sent before SIGTERM got an
 * answer" is not a property any server can promise. What must hold:
 *  - every order in Redis reached its client as a 200 (ledger == 200s),
 *  - no request without an answer bought anything,
 *  - requests in flight at the signal were answered (there are such
 *    requests: 64 busy connections), and the exit code is 0. */
static void sigterm_under_load(const char *nprocs)
{
    alarm(TEST_ALARM_S);
    uint64_t aid = sk_th_unique_id();
    sk_redis *r = redis_to(sk_th_redis_url());
    open_activity(r, aid, FAULT_STOCK, 1, 1);
    struct sk_th_serve s;
    const char *extra[] = {"--processes", nprocs, NULL};
    serve_start(&s, sk_th_redis_url(), extra);

    struct load *L = load_new(s.port, aid);
    L->stream = 1;
    L->user_base = 1;
    L->n = MAX_RECS;
    pid_t pids[4];
    load_start(L, 4, 16, pids); /* 64 busy connections, no pause */
    CHECK_MSG(POLL_UNTIL(atomic_load(&L->answered) >= 2000, 20000), "no load");

    atomic_store(&L->term_sent, 1); /* refused reconnects are expected from now on */
    int64_t t_term = sk_mono_us();
    kill(s.pid, SIGTERM);
    int st = 0, exited = 0;
    int64_t deadline = sk_mono_ms() + 20000;
    while (!(exited = waitpid(s.pid, &st, WNOHANG) == s.pid) && sk_mono_ms() < deadline) {
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    int64_t drain_ms = (sk_mono_us() - t_term) / 1000;
    if (!exited) {
        kill(s.pid, SIGKILL);
        waitpid(s.pid, &st, 0);
    }
    s.pid = 0;
    atomic_store(&L->stop, 1);
    load_wait(L, 4, pids);
    CHECK_MSG(exited, "seckill serve still running 20 s after SIGTERM");
    check_server_log(&s);
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    check_no_client_failures(L);

    size_t n = atomic_load(&L->next);
    if (n > L->n) n = L->n;
    struct tally t;
    tally_load(L, n, &t);
    int after = 0, in_flight = 0, unanswered_before = 0;
    for (size_t i = 0; i < n; i++) {
        const struct rec *q = &L->recs[i];
        if (q->outcome == OUT_ANSWERED && q->status == 200 && q->t_done_us > t_term) {
            after++;
            in_flight += q->t_send_us < t_term;
        }
        if (q->outcome == OUT_UNANSWERED && q->t_send_us < t_term) unanswered_before++;
    }
    print_tally(atoi(nprocs) > 1 ? "SIGTERM, 2 processes" : "SIGTERM, 1 process", &t);
    printf("    # exit %d after %" PRId64 " ms; 200s after the signal %d (%d of them in flight "
           "at the signal); unanswered %d (%d of them sent before the signal)\n",
           code, drain_ms, after, in_flight, t.unanswered, unanswered_before);
    CHECK_MSG(code == 0, "exit code %d after SIGTERM (log %s)", code, s.log);
    CHECK_MSG(t.other == 0 && t.s503 == 0 && t.sold_out == 0 && t.limit == 0,
              "unexpected answer: %s (%d 503: %s)", t.other_example, t.s503, t.example_503);
    CHECK_EQ(t.timeouts + t.bad, 0);
    CHECK_MSG(in_flight > 0, "no request in flight at SIGTERM was answered");

    struct view v;
    view_load(r, aid, &v);
    check_invariants(&v, FAULT_STOCK, 1);
    const struct lentry **ex;
    size_t nex = check_accepted_in_redis(L, n, &v, &ex);
    CHECK_MSG(nex == 0,
              "%zu orders admitted but never answered with a 200, e.g. %s of user %" PRIu32, nex,
              ex[0]->oid, ex[0]->user);
    free(ex);
    CHECK_EQ(v.nlg, (size_t)t.ok);
    for (size_t i = 0; i < n; i++) {
        const struct rec *q = &L->recs[i];
        if (q->outcome == OUT_UNANSWERED || q->outcome == OUT_SEND_FAILED)
            CHECK_MSG(v.held[q->user] == 0, "user %" PRIu32 " got no answer but holds %" PRId64,
                      q->user, v.held[q->user]);
    }
    view_free(&v);
    load_free(L);
    sk_redis_free(r);
}

SK_TEST(sigterm_during_load_answers_every_admitted_request_and_exits_0)
{
    sigterm_under_load("1");
}

SK_TEST(sigterm_during_load_with_two_processes_answers_every_admitted_request_and_exits_0)
{
    sigterm_under_load("2");
}

/* ---- 6: clients that leave before their answer ---- */

/* Open sockets of a process (from /proc/PID/fd), -1 if unknown. */
static int socket_fds(pid_t pid)
{
    char dir[64], path[320], target[64];
    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
    int n = 0;
    for (int fd = 0; fd < 4096; fd++) {
        snprintf(path, sizeof path, "%s/%d", dir, fd);
        ssize_t l = readlink(path, target, sizeof target - 1);
        if (l < 0) continue;
        target[l] = 0;
        n += strncmp(target, "socket:", 7) == 0;
    }
    return n;
}

static void send_purchase_raw(struct hconn *c, uint64_t aid, uint32_t user)
{
    char req[256];
    int n = snprintf(req, sizeof req,
                     "POST /api/v1/activities/%" PRIu64 "/purchase HTTP/1.1\r\n"
                     "Host: 127.0.0.1\r\nX-User-Id: %" PRIu32 "\r\n"
                     "Content-Length: 14\r\n\r\n{\"quantity\":1}",
                     aid, user);
    CHECK_MSG(write_all(c->fd, req, (size_t)n) == 0, "send: %s", strerror(errno));
}

/* HTTP/2 with prior knowledge. The server speaks HTTP/1.1 only (README,
 * "HTTP hardening"): the preface is refused, so none of these purchases
 * may reach the engine. (With HTTP/2 on, h2o read such connections all the
 * time and freed their requests while they waited on Redis, the path the
 * request guard of http_server.c is for; HTTP/1.1 in h2o 2.2 stops reading
 * while a request is in progress and finds a gone client only when it
 * writes the answer.) */
static void h2_frame(char *buf, size_t *len, uint8_t type, uint8_t flags, uint32_t sid,
                     const char *payload, size_t plen)
{
    unsigned char *p = (unsigned char *)buf + *len;
    p[0] = (unsigned char)(plen >> 16);
    p[1] = (unsigned char)(plen >> 8);
    p[2] = (unsigned char)plen;
    p[3] = type;
    p[4] = flags;
    p[5] = (unsigned char)((sid >> 24) & 0x7f);
    p[6] = (unsigned char)(sid >> 16);
    p[7] = (unsigned char)(sid >> 8);
    p[8] = (unsigned char)sid;
    memcpy(p + 9, payload, plen);
    *len += 9 + plen;
}

/* HPACK "literal header field without indexing, new name", no Huffman;
 * name and value shorter than 127 bytes. */
static size_t hpack_literal(char *out, const char *name, const char *value)
{
    size_t nl = strlen(name), vl = strlen(value);
    out[0] = 0;
    out[1] = (char)nl;
    memcpy(out + 2, name, nl);
    out[2 + nl] = (char)vl;
    memcpy(out + 3 + nl, value, vl);
    return 3 + nl + vl;
}

/* Opens an HTTP/2 connection and sends n purchases on streams 1, 3, ...
 * for users first_user.., without reading anything back. */
static void h2_send_purchases(struct hconn *c, int port, uint64_t aid, uint32_t first_user, int n)
{
    static char buf[65536];
    size_t len = 0;
    CHECK_MSG(hc_open(c, port) == 0, "connect: %s", strerror(errno));
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    memcpy(buf, preface, sizeof preface - 1);
    len = sizeof preface - 1;
    h2_frame(buf, &len, 0x4 /* SETTINGS */, 0, 0, "", 0);
    static const char body[] = "{\"quantity\":1}";
    for (int i = 0; i < n; i++) {
        char hb[512], path[96], user[24];
        snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", aid);
        snprintf(user, sizeof user, "%" PRIu32, first_user + (uint32_t)i);
        size_t hl = 0;
        hl += hpack_literal(hb + hl, ":method", "POST");
        hl += hpack_literal(hb + hl, ":scheme", "http");
        hl += hpack_literal(hb + hl, ":authority", "127.0.0.1");
        hl += hpack_literal(hb + hl, ":path", path);
        hl += hpack_literal(hb + hl, "x-user-id", user);
        hl += hpack_literal(hb + hl, "content-type", "application/json");
        hl += hpack_literal(hb + hl, "content-length", "14");
        CHECK(len + 2 * 9 + hl + sizeof body < sizeof buf);
        uint32_t sid = 1 + 2 * (uint32_t)i;
        h2_frame(buf, &len, 0x1 /* HEADERS */, 0x4 /* END_HEADERS */, sid, hb, hl);
        h2_frame(buf, &len, 0x0 /* DATA */, 0x1 /* END_STREAM */, sid, body, sizeof body - 1);
    }
    CHECK_MSG(write_all(c->fd, buf, len) == 0, "send: %s", strerror(errno));
}

SK_TEST(client_disconnect_before_answer_keeps_its_admission)
{
    alarm(TEST_ALARM_S);
    struct sk_th_redis rs;
    sk_th_redis_start(&rs, NULL);
    sk_redis *r = redis_to(rs.url);
    uint64_t aid = sk_th_unique_id();
    enum { STOCK = 10000, STORM = 400, HELD = 200, H2_CONNS = 4, H2_STREAMS = 50 };
    enum { HELD_USER = 10000, H2_USER = 20000, LAST_USER = 50000 };
    open_activity(r, aid, STOCK, 1, 1);
    struct sk_th_serve s;
    /* long enough that the stopped Redis below is waited for, not timed out */
    const char *extra[] = {"--redis-timeout-ms", "15000", NULL};
    serve_start(&s, rs.url, extra);

    /* A: a storm of send-and-close, half with a FIN, half with an RST.
     * Whether each is admitted depends on when the close is seen, so only
     * consistency is checked: each order is one of these users'. */
    for (uint32_t u = 1; u <= STORM; u++) {
        struct hconn c;
        CHECK_MSG(hc_open(&c, s.port) == 0, "connect: %s", strerror(errno));
        send_purchase_raw(&c, aid, u);
        if (u % 2)
            hc_reset(&c);
        else
            hc_close(&c);
    }
    CHECK_MSG(POLL_UNTIL(metric(s.port, "seckill_inflight_requests") == 0, 5000),
              "requests of gone clients still in flight: %" PRId64,
              metric(s.port, "seckill_inflight_requests"));
    CHECK_MSG(alive(s.pid), "the server died (log %s)", s.log);

    /* B: deterministic. Redis is stopped, so every purchase is surely read
     * and waiting on Redis when its client leaves (FIN or RST); the answers
     * then come back for clients that are gone. 200 over HTTP/1.1; 200 as
     * streams of 4 HTTP/2 connections, which must all be refused. */
    int fds_before = socket_fds(s.pid);
    kill(rs.pid, SIGSTOP);
    static struct hconn held[HELD];
    for (int i = 0; i < HELD; i++) {
        CHECK_MSG(hc_open(&held[i], s.port) == 0, "connect: %s", strerror(errno));
        send_purchase_raw(&held[i], aid, HELD_USER + (uint32_t)i);
    }
    struct hconn h2[H2_CONNS];
    for (int i = 0; i < H2_CONNS; i++)
        h2_send_purchases(&h2[i], s.port, aid, H2_USER + (uint32_t)(i * H2_STREAMS), H2_STREAMS);
    const int waiting = HELD; /* the HTTP/2 purchases never reach the engine */
    CHECK_MSG(POLL_UNTIL(metric(s.port, "seckill_inflight_requests") == waiting, 5000),
              "in flight %" PRId64 ", want %d", metric(s.port, "seckill_inflight_requests"),
              waiting);
    for (int i = 0; i < HELD; i++) {
        if (i % 2)
            hc_reset(&held[i]);
        else
            hc_close(&held[i]);
    }
    for (int i = 0; i < H2_CONNS; i++) {
        if (i % 2)
            hc_reset(&h2[i]);
        else
            hc_close(&h2[i]);
    }
    /* The HTTP/2 connections are closed by the server (it refused them). */
    CHECK_MSG(POLL_UNTIL(socket_fds(s.pid) <= fds_before + HELD, 3000),
              "server still holds %d sockets (%d before): it did not drop the HTTP/2 "
              "connections",
              socket_fds(s.pid), fds_before);
    int fds_left = socket_fds(s.pid); /* informational: HTTP/1.1 connections noticed? */
    kill(rs.pid, SIGCONT);
    CHECK_MSG(POLL_UNTIL(metric(s.port, "seckill_inflight_requests") == 0, 10000),
              "in flight after Redis answered: %" PRId64,
              metric(s.port, "seckill_inflight_requests"));
    CHECK_MSG(alive(s.pid), "the server died (log %s)", s.log);

    /* Still serving, and correctly. */
    struct hconn c = {-1, s.port};
    struct rec q = buy_one(&c, aid, LAST_USER, 1);
    CHECK_MSG(q.status == 200, "after the disconnects: %d %s", q.status, q.err);
    hc_close(&c);

    struct view v;
    view_load(r, aid, &v);
    check_invariants(&v, STOCK, 1);
    int storm_admitted = 0;
    for (size_t i = 0; i < v.nlg; i++) {
        uint32_t u = v.lg[i].user;
        CHECK_MSG((u >= 1 && u <= STORM) || (u >= HELD_USER && u < HELD_USER + HELD) ||
                      (u >= H2_USER && u < H2_USER + H2_CONNS * H2_STREAMS) || u == LAST_USER,
                  "order %s of a user nobody sent: %" PRIu32, v.lg[i].oid, u);
        storm_admitted += u <= STORM;
    }
    for (int i = 0; i < HELD; i++)
        CHECK_MSG(v.held[HELD_USER + i] == 1, "user %d left before the answer; order lost",
                  HELD_USER + i);
    for (int i = 0; i < H2_CONNS * H2_STREAMS; i++)
        CHECK_MSG(v.held[H2_USER + i] == 0, "HTTP/2 user %d bought: HTTP/2 must be off",
                  H2_USER + i);
    CHECK_EQ(v.held[LAST_USER], 1);
    CHECK_EQ(v.nlg, (size_t)(storm_admitted + waiting + 1));
    printf("    # storm: %d of %d send-and-close purchases admitted; held: %d of %d admitted; "
           "when Redis answered, the server had closed %d of %d HTTP/1.1 and all %d (refused) "
           "HTTP/2 connections (server sockets %d before, %d then)\n",
           storm_admitted, STORM, waiting, waiting, HELD - (fds_left - fds_before), HELD, H2_CONNS,
           fds_before, fds_left);
    view_free(&v);
    stop_server(&s);
    sk_redis_free(r);
    sk_th_redis_stop(&rs, 1);
}

/* ---- 7: the batch window ---- */

enum { WINDOW_BUYERS = 24 };

/* WINDOW_BUYERS purchases, each read in a pass of its own (the next is
 * sent only once /metrics, answered in a later pass, counts the previous
 * one as waiting) while Redis is stopped; then Redis goes on. Returns how
 * many purchase_batch calls carried them (serve's batch histogram). */
static int64_t batches_for_stopped_redis(const char *window)
{
    alarm(TEST_ALARM_S);
    struct sk_th_redis rs;
    sk_redis *r;
    uint64_t aid = private_sale(&rs, NULL, &r, 1000, 1);
    struct sk_th_serve s;
    /* Redis stays stopped for a moment: waited for, not timed out */
    const char *extra[] = {"--redis-timeout-ms", "20000", "--batches-in-flight", window, NULL};
    serve_start(&s, rs.url, extra);
    int64_t calls0 = metric(s.port, "seckill_batch_size_count");
    int64_t sum0 = metric(s.port, "seckill_batch_size_sum");
    CHECK(calls0 >= 0 && sum0 >= 0);

    kill(rs.pid, SIGSTOP);
    static struct hconn c[WINDOW_BUYERS];
    static struct rec q[WINDOW_BUYERS];
    for (int i = 0; i < WINDOW_BUYERS; i++) {
        CHECK_MSG(hc_open(&c[i], s.port) == 0, "connect: %s", strerror(errno));
        q[i] = (struct rec){.user = (uint32_t)(i + 1), .qty = 1};
        CHECK_EQ(send_purchase(&c[i], aid, NULL, &q[i]), 0);
        CHECK_MSG(POLL_UNTIL(metric(s.port, "seckill_inflight_requests") == i + 1, 5000),
                  "purchase %d not waiting: in flight %" PRId64, i + 1,
                  metric(s.port, "seckill_inflight_requests"));
    }
    /* one more pass: the last purchase's batch is sent, or held */
    CHECK_EQ(metric(s.port, "seckill_inflight_requests"), WINDOW_BUYERS);
    kill(rs.pid, SIGCONT);

    for (int i = 0; i < WINDOW_BUYERS; i++) {
        read_purchase(&c[i], aid, &q[i]);
        CHECK_MSG(q[i].outcome == OUT_ANSWERED && q[i].status == 200 && !q[i].bad_body,
                  "buyer %d: outcome %d status %d %s", i + 1, q[i].outcome, q[i].status, q[i].err);
        hc_close(&c[i]);
    }
    int64_t calls = metric(s.port, "seckill_batch_size_count") - calls0;
    CHECK_EQ(metric(s.port, "seckill_batch_size_sum") - sum0, WINDOW_BUYERS);

    struct view v;
    view_load(r, aid, &v);
    check_invariants(&v, 1000, 1);
    CHECK_EQ(v.nlg, (size_t)WINDOW_BUYERS);
    for (int i = 0; i < WINDOW_BUYERS; i++) {
        const struct lentry *e = ledger_find(&v, q[i].oid);
        CHECK_MSG(e && e->user == q[i].user, "buyer %d's order %s is not in the ledger", i + 1,
                  q[i].oid);
    }
    view_free(&v);
    stop_server(&s);
    sk_redis_free(r);
    sk_th_redis_stop(&rs, 1);
    return calls;
}

SK_TEST(purchases_behind_a_full_batch_window_go_in_one_call)
{
    /* two calls out (the first two buyers), the 22 others in the third */
    int64_t calls = batches_for_stopped_redis("2");
    printf("    # %d purchases, window 2: %" PRId64 " calls\n", WINDOW_BUYERS, calls);
    CHECK_EQ(calls, 3);
}

SK_TEST(without_a_batch_window_every_pass_sends_its_call)
{
    int64_t calls = batches_for_stopped_redis("0");
    printf("    # %d purchases, no window: %" PRId64 " calls\n", WINDOW_BUYERS, calls);
    CHECK_EQ(calls, WINDOW_BUYERS);
}
