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
#include "support/buyer_http.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/http_client.h"
#include "support/sale_env.h"

#define MAX_PENDING 600

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
    int fd = sk_th_buy_send(s.port, aid, 1);
    CHECK_EQ(sk_th_http_answer(fd, 10000, raw, sizeof raw), 200);
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
        fd = sk_th_buy_send(s.port, aid, uid);
        int st = sk_th_http_answer(fd, 50, raw, sizeof raw);
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
        fd = sk_th_buy_send(s.port, aid, uid);
        CHECK_EQ(sk_th_http_answer(fd, 10000, raw, sizeof raw), 503);
        expect_overloaded(raw);
        refused[nrefused++] = uid++;
        close(fd);
        if (!busy_poll && npolls < 64) {
            int pf = sk_th_poll_send(s.port, first_order, 1);
            int st = sk_th_http_answer(pf, 50, raw, sizeof raw);
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
        int st = sk_th_http_answer(pending[i], 30000, raw, sizeof raw);
        CHECK_MSG(st == 200, "held purchase %d: %.200s", i, raw);
        admitted++;
        close(pending[i]);
    }
    for (int i = 0; i < npolls; i++) {
        sk_th_http_answer(polls[i], 30000, raw, sizeof raw);
        close(polls[i]);
    }
    /* the limit recovers: a new buyer is admitted again */
    deadline = sk_mono_ms() + 20000;
    for (;;) {
        fd = sk_th_buy_send(s.port, aid, uid++);
        int st = sk_th_http_answer(fd, 20000, raw, sizeof raw);
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
