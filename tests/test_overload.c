/* test_overload.c - bounded waiting and the adaptive poll budget
 * (docs/overload.md), from outside, over real sockets against real
 * `seckill serve` processes, a real redis-server and the SQLite store.
 *
 * Overload is made for real: the run's own redis-server is stopped
 * (SIGSTOP), so purchases stay in flight, nothing comes back, and the
 * process's limit falls until it refuses; or a burst from `seckill load`
 * (open loop, many connections) against a tiny target. Every wait is a
 * poll for a condition with a deadline; no figure of speed is asserted. */
#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "engine/keys.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/http_client.h"
#include "support/sale_env.h"

#define MAX_PENDING 600

/* A connection with one request written (fails the test on error). */
static int send_raw(int port, const char *req, size_t len)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK_EQ(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    CHECK_EQ(write(fd, req, len), (ssize_t)len);
    return fd;
}

static int send_purchase(int port, uint64_t aid, uint64_t uid)
{
    char req[512];
    int n = snprintf(req, sizeof req,
                     "POST /api/v1/activities/%" PRIu64 "/purchase HTTP/1.1\r\nHost: x\r\n"
                     "X-User-Id: %" PRIu64 "\r\nContent-Type: application/json\r\n"
                     "Content-Length: 14\r\n\r\n{\"quantity\":1}",
                     aid, uid);
    return send_raw(port, req, (size_t)n);
}

static int send_poll(int port, const char *order_id, uint64_t uid)
{
    char req[512];
    int n = snprintf(req, sizeof req,
                     "GET /api/v1/orders/%s HTTP/1.1\r\nHost: x\r\nX-User-Id: %" PRIu64 "\r\n\r\n",
                     order_id, uid);
    return send_raw(port, req, (size_t)n);
}

/* The answer on fd within timeout_ms into buf (terminated): its status,
 * or 0 when nothing came. */
static int answer(int fd, int timeout_ms, char *buf, size_t cap)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, timeout_ms) <= 0) return 0;
    ssize_t n = read(fd, buf, cap - 1);
    if (n <= 12) return 0;
    buf[n] = 0;
    return sk_th_http_status(buf, (size_t)n);
}

/* A 503 of the admission limit: Retry-After and the reason code. */
static void expect_overloaded(const char *raw)
{
    CHECK_MSG(strncmp(raw, "HTTP/1.1 503", 12) == 0, "not 503: %.80s", raw);
    CHECK_MSG(strcasestr(raw, "\r\nretry-after: 1\r\n") != NULL, "no Retry-After: %.300s", raw);
    CHECK_MSG(strstr(raw, "\"error\":\"overloaded\"") != NULL, "no overloaded code: %.400s", raw);
}

static void start(struct sk_th_redis *rs, struct sk_th_serve *s, const char *const *extra)
{
    setenv("LSAN_OPTIONS", "exitcode=0", 1);
    sk_th_redis_start(rs, NULL);
    sk_th_serve_start(s, rs->url, extra);
    sale_wait_ready(s->port);
}

/* The order id of a 200's body (raw answer). */
static void order_id_of(const char *raw, char *out, size_t cap)
{
    const char *p = strstr(raw, "\"order_id\":\"");
    CHECK_MSG(p != NULL, "no order id: %.300s", raw);
    p += 12;
    size_t n = strcspn(p, "\"");
    CHECK(n > 0 && n < cap);
    memcpy(out, p, n);
    out[n] = 0;
}

/* Redis stalls: purchases pile up in flight until the process's limit
 * refuses the next ones at once, 503 overloaded with Retry-After, before
 * any Redis work; while it refuses, order polls are held to their budget;
 * once Redis answers again the held purchases are admitted and persisted,
 * the limit recovers (a new purchase is admitted), and the refused buyers
 * left no trace in Redis or the database. */
SK_TEST_T(overload_refuses_at_once_changes_nothing_and_recovers, 180)
{
    struct sk_th_redis rs;
    struct sk_th_serve s;
    const char *extra[] = {"--admit-target-ms",
                           "50",
                           "--redis-timeout-ms",
                           "30000",
                           "--poll-rate-max",
                           "10",
                           "--log-level",
                           "warn",
                           NULL};
    start(&rs, &s, extra);
    const int64_t stock = 1000;
    uint64_t aid = sale_activity(s.port, 0, stock, 1, 1);
    char raw[4096], first_order[96];
    int fd = send_purchase(s.port, aid, 1);
    CHECK_EQ(answer(fd, 10000, raw, sizeof raw), 200);
    order_id_of(raw, first_order, sizeof first_order);
    close(fd);
    int64_t admitted = 1;

    kill(rs.pid, SIGSTOP);
    static int pending[MAX_PENDING];
    int npending = 0;
    uint64_t uid = 100, refused[8];
    int nrefused = 0;
    int64_t deadline = sk_mono_ms() + 30000;
    while (nrefused == 0) {
        CHECK_MSG(sk_mono_ms() < deadline, "no purchase refused within 30 s (%d in flight)",
                  npending);
        CHECK_MSG(npending < MAX_PENDING, "%d purchases in flight and none refused", npending);
        fd = send_purchase(s.port, aid, uid);
        int st = answer(fd, 50, raw, sizeof raw);
        if (st == 0) {
            pending[npending++] = fd; /* admitted: waits for Redis */
        } else {
            expect_overloaded(raw);
            refused[nrefused++] = uid;
            close(fd);
        }
        uid++;
    }
    /* more are refused while Redis stays stalled; polls meanwhile meet
     * their budget (10/s, a burst of one) because purchases press */
    int busy_poll = 0;
    static int polls[64];
    int npolls = 0;
    while (nrefused < 8) {
        fd = send_purchase(s.port, aid, uid);
        CHECK_EQ(answer(fd, 10000, raw, sizeof raw), 503);
        expect_overloaded(raw);
        refused[nrefused++] = uid++;
        close(fd);
        if (!busy_poll && npolls < 64) {
            int pf = send_poll(s.port, first_order, 1);
            int st = answer(pf, 50, raw, sizeof raw);
            if (st == 503) {
                CHECK_MSG(strstr(raw, "\"error\":\"busy\"") != NULL, "poll: %.300s", raw);
                busy_poll = 1;
                close(pf);
            } else {
                CHECK_MSG(st == 0, "poll while Redis is stalled: %.200s", raw);
                polls[npolls++] = pf;
            }
        }
    }
    CHECK_MSG(busy_poll, "no poll refused busy while purchases were refused");

    kill(rs.pid, SIGCONT);
    for (int i = 0; i < npending; i++) {
        int st = answer(pending[i], 30000, raw, sizeof raw);
        CHECK_MSG(st == 200, "held purchase %d: %.200s", i, raw);
        admitted++;
        close(pending[i]);
    }
    for (int i = 0; i < npolls; i++) {
        answer(polls[i], 30000, raw, sizeof raw);
        close(polls[i]);
    }
    /* the limit recovers: a new buyer is admitted again */
    deadline = sk_mono_ms() + 20000;
    for (;;) {
        fd = send_purchase(s.port, aid, uid++);
        int st = answer(fd, 20000, raw, sizeof raw);
        close(fd);
        if (st == 200) break;
        CHECK_MSG(st == 503, "after the stall: %.200s", raw);
        expect_overloaded(raw);
        CHECK_MSG(sk_mono_ms() < deadline, "purchases still refused 20 s after the stall");
        sk_th_nap_ms(20);
    }
    admitted++;

    /* read directly: the refused buyers hold nothing in Redis; the
     * database has exactly the admitted orders; SPEC section 7 holds */
    sk_redis *r = sk_th_redis_new(rs.url, 2000, 5000);
    struct sk_keys k;
    sk_keys_for(&k, aid);
    for (int i = 0; i < nrefused; i++) {
        redisReply *rep;
        CHECK_EQ(sk_redis_cmd(r, &rep, "HGET %s %" PRIu64, k.buyers, refused[i]), 0);
        CHECK_MSG(rep->type == REDIS_REPLY_NIL, "refused buyer %" PRIu64 " holds units",
                  refused[i]);
        freeReplyObject(rep);
    }
    sale_wait_drained(r, aid, 60000);
    sk_store *st = sk_th_store_open(s.db);
    struct sale_db_want want = {st, aid, admitted};
    sale_wait(sale_db_has, &want, 60000, "the admitted orders in the database");
    CHECK_EQ(sale_db_orders(st, aid), admitted);
    CHECK_EQ(sale_check_invariants(st, r, rs.url, s.db, aid, stock, 1), admitted);
    sk_store_close(st);
    sk_redis_free(r);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
    sk_th_redis_stop(&rs, 1);
}

/* A real burst far above what a tiny target lets the process hold: every
 * purchase admitted (200) is in the database with its buyer and quantity
 * (`seckill load --db` checks each), no order id twice, no buyer over the
 * limit, and the SPEC section 7 invariants hold afterwards. Refusals are
 * allowed, not required (how many depends on the machine). */
SK_TEST_T(overload_burst_admitted_purchases_are_persisted, 240)
{
    struct sk_th_redis rs;
    struct sk_th_serve s;
    const char *extra[] = {"--admit-target-ms", "1", "--log-level", "warn", NULL};
    start(&rs, &s, extra);
    const int64_t stock = 5000;
    uint64_t id = sale_activity(s.port, 0, stock, 1, 1);
    char url[64], aid[32], out[16384];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", s.port);
    snprintf(aid, sizeof aid, "%" PRIu64, id);
    const char *args[] = {
        "load",          "--url",   url,         "--activity", aid,          "--rate", "20000",
        "--connections", "500",     "--threads", "2",          "--duration", "3",      "--users",
        "10000000",      "--limit", "1",         "--db",       s.db,         NULL};
    int rc = sk_th_run_seckill(out, sizeof out, NULL, args);
    CHECK_MSG(rc == 0, "seckill load exit %d:\n%s", rc, out);
    sk_redis *r = sk_th_redis_new(rs.url, 2000, 5000);
    sale_wait_drained(r, id, 60000);
    sk_store *st = sk_th_store_open(s.db);
    int64_t sold = sale_check_invariants(st, r, rs.url, s.db, id, stock, 1);
    CHECK(sold > 0);
    CHECK_EQ(sale_db_orders(st, id), sold);
    sk_store_close(st);
    sk_redis_free(r);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
    sk_th_redis_stop(&rs, 1);
}

/* An idle node answers every poll: one buyer polling its order one poll
 * after another, far faster than --poll-rate-max 10, is never refused. */
SK_TEST(overload_idle_node_answers_every_sequential_poll)
{
    struct sk_th_redis rs;
    struct sk_th_serve s;
    /* the database's own bound (--db-poll-wait-ms) is not what this tests:
     * generous, so a busy machine cannot trip it */
    const char *extra[] = {
        "--poll-rate-max", "10", "--db-poll-wait-ms", "30000", "--log-level", "warn", NULL};
    start(&rs, &s, extra);
    uint64_t aid = sale_activity(s.port, 0, 10, 1, 1);
    char raw[4096], oid[96], path[160];
    int fd = send_purchase(s.port, aid, 7);
    CHECK_EQ(answer(fd, 10000, raw, sizeof raw), 200);
    order_id_of(raw, oid, sizeof oid);
    close(fd);
    struct sk_th_http c;
    sk_th_http_open(&c, s.port);
    struct sk_th_resp *resp = sk_th_resp_new();
    snprintf(path, sizeof path, "/api/v1/orders/%s", oid);
    for (int i = 0; i < 300; i++) {
        int st = sk_th_http_req(&c, "GET", path, "X-User-Id: 7\r\n", NULL, resp);
        CHECK_MSG(st == 200, "poll %d: %d %.200s", i, st, resp->body);
    }
    free(resp);
    sk_th_http_close(&c);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
    sk_th_redis_stop(&rs, 1);
}
