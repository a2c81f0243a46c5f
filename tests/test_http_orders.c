/* test_http_orders.c - the buyer's order routes over real HTTP, with the
 * order pipeline running inside `seckill serve` (--role all: the worker
 * persists to SQLite, the sweeper cancels unpaid orders): queued ->
 * created -> paid, cancel with exactly one release, a late payment refused,
 * the payment timeout giving stock back to the next buyer, and the
 * refusals (another buyer's order, bad ids, not persisted yet), and a poll
 * of an order put back from the database after its key set vanished;
 * polls budgeted (--poll-rate-max) only while purchases press, refused at
 * once then, and the budget changed by a reload. */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "core/clock.h"
#include "engine/activity.h"
#include "engine/stock.h"
#include "orders/order_worker.h"
#include "redis/redis_conn.h"
#include "store/store.h"
#include "support/buyer_http.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/http_client.h"

#define ADMIN "Authorization: Bearer " SK_TH_ADMIN_TOKEN "\r\n"

struct srv {
    struct sk_th_serve s;
    struct sk_th_http c;
};

static void start(struct srv *v, const char *role)
{
    const char *extra[] = {"--role", role, NULL};
    sk_th_serve_start(&v->s, sk_th_redis_url(), extra);
    sk_th_http_open(&v->c, v->s.port);
    /* /healthz answers before Redis is ready; wait for /readyz */
    int64_t deadline = sk_mono_ms() + 10000;
    struct sk_th_resp r;
    while (sk_th_http_req(&v->c, "GET", "/readyz", NULL, NULL, &r) != 200) {
        CHECK_MSG(sk_mono_ms() < deadline, "not ready: %s", r.body);
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

static void stop(struct srv *v)
{
    sk_th_http_close(&v->c);
    CHECK_EQ(sk_th_serve_stop(&v->s, SIGTERM), 0);
}

static int call(struct srv *v, const char *method, const char *path, uint64_t uid, const char *body,
                struct sk_th_resp *r)
{
    return sk_th_as_user(&v->c, method, path, uid, body, r);
}

/* Creates, preheats and opens an activity through the admin API. */
static uint64_t activity(struct srv *v, int stock, int pay_timeout_s)
{
    return sk_th_http_activity(&v->c, "orders", stock, pay_timeout_s);
}

static int buy(struct srv *v, uint64_t aid, uint64_t uid, char *oid, size_t cap)
{
    return sk_th_buy_one(&v->c, aid, uid, oid, cap);
}

static long long remaining(struct srv *v, uint64_t aid)
{
    char path[96], val[32];
    struct sk_th_resp r;
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64, aid);
    CHECK_EQ(sk_th_http_req(&v->c, "GET", path, NULL, NULL, &r), 200);
    sk_th_resp_field(&r, "stock_remaining", val, sizeof val);
    return atoll(val);
}

/* GET the order until its status is want (bounded: the pipeline and the
 * sweeper run on their own clocks). */
static void wait_status(struct srv *v, const char *oid, uint64_t uid, const char *want,
                        struct sk_th_resp *r)
{
    sk_th_order_wait(&v->c, oid, uid, want, 15000, r);
}

static int order_op(struct srv *v, const char *oid, const char *op, uint64_t uid,
                    struct sk_th_resp *r)
{
    return sk_th_order_op(&v->c, oid, op, uid, r);
}

SK_TEST(order_goes_from_queued_to_created_to_paid_and_only_its_buyer_sees_it)
{
    struct srv v;
    start(&v, "all");
    uint64_t aid = activity(&v, 5, 1800);
    char oid[64], val[64], path[128];
    CHECK_EQ(buy(&v, aid, 41, oid, sizeof oid), 200);
    struct sk_th_resp r;
    wait_status(&v, oid, 41, "created", &r);
    sk_th_resp_field(&r, "order_id", val, sizeof val);
    CHECK_STR(val, oid);
    sk_th_resp_field(&r, "user_id", val, sizeof val);
    CHECK_STR(val, "41");
    sk_th_resp_field(&r, "quantity", val, sizeof val);
    CHECK_STR(val, "1");
    sk_th_resp_field(&r, "activity_id", val, sizeof val);
    CHECK_EQ(strtoull(val, NULL, 10), aid);
    sk_th_resp_field(&r, "pay_deadline", val, sizeof val);
    int64_t deadline_ms, created_ms;
    CHECK_EQ(sk_time_parse_rfc3339(val, strlen(val), &deadline_ms), 0);
    sk_th_resp_field(&r, "created_at", val, sizeof val);
    CHECK_EQ(sk_time_parse_rfc3339(val, strlen(val), &created_ms), 0);
    CHECK_EQ(deadline_ms - created_ms, 1800 * 1000);

    /* another buyer: the same answer as for an order that does not exist */
    snprintf(path, sizeof path, "/api/v1/orders/%s", oid);
    CHECK_EQ(call(&v, "GET", path, 42, NULL, &r), 404);
    CHECK_EQ(order_op(&v, oid, "pay", 42, &r), 404);
    CHECK_EQ(order_op(&v, oid, "cancel", 42, &r), 404);

    CHECK_EQ(order_op(&v, oid, "pay", 41, &r), 200);
    sk_th_resp_field(&r, "status", val, sizeof val);
    CHECK_STR(val, "paid");
    CHECK_EQ(order_op(&v, oid, "pay", 41, &r), 200); /* idempotent */
    CHECK_EQ(order_op(&v, oid, "cancel", 41, &r), 409);
    sk_th_resp_field(&r, "error", val, sizeof val);
    CHECK_STR(val, "order_paid");
    CHECK_EQ(remaining(&v, aid), 4);
    stop(&v);
}

SK_TEST(cancel_gives_the_units_back_once_and_a_late_payment_is_refused)
{
    struct srv v;
    start(&v, "all");
    uint64_t aid = activity(&v, 1, 1800);
    char oid[64], val[64];
    CHECK_EQ(buy(&v, aid, 51, oid, sizeof oid), 200);
    CHECK_EQ(buy(&v, aid, 52, NULL, 0), 409); /* sold out, now known locally */
    struct sk_th_resp r;
    wait_status(&v, oid, 51, "created", &r);
    CHECK_EQ(order_op(&v, oid, "cancel", 51, &r), 200);
    sk_th_resp_field(&r, "status", val, sizeof val);
    CHECK_STR(val, "cancelled");
    CHECK_EQ(remaining(&v, aid), 1);
    CHECK_EQ(order_op(&v, oid, "cancel", 51, &r), 200); /* again: no second release */
    CHECK_EQ(remaining(&v, aid), 1);
    CHECK_EQ(order_op(&v, oid, "pay", 51, &r), 409);
    sk_th_resp_field(&r, "error", val, sizeof val);
    CHECK_STR(val, "order_cancelled");
    /* the unit sells again, to someone else, at once */
    CHECK_EQ(buy(&v, aid, 52, NULL, 0), 200);
    CHECK_EQ(remaining(&v, aid), 0);
    stop(&v);
}

SK_TEST(unpaid_order_is_cancelled_after_the_pay_timeout_and_its_unit_sells_again)
{
    struct srv v;
    start(&v, "all");
    uint64_t aid = activity(&v, 1, 1); /* one second to pay */
    char oid[64];
    CHECK_EQ(buy(&v, aid, 61, oid, sizeof oid), 200);
    struct sk_th_resp r;
    wait_status(&v, oid, 61, "cancelled", &r); /* the sweeper in serve's worker process */
    int64_t deadline = sk_mono_ms() + 5000;
    int st;
    while ((st = buy(&v, aid, 62, NULL, 0)) != 200) { /* the released unit */
        CHECK_MSG(st == 409 && sk_mono_ms() < deadline, "second buyer got %d", st);
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    CHECK_EQ(remaining(&v, aid), 0);
    CHECK_EQ(order_op(&v, oid, "pay", 61, &r), 409); /* too late */
    stop(&v);
}

SK_TEST(order_not_yet_persisted_is_queued_and_cannot_be_paid_yet)
{
    struct srv v;
    start(&v, "api"); /* no order worker: the order stays in the stream */
    uint64_t aid = activity(&v, 3, 1800);
    char oid[64], val[64], path[128];
    CHECK_EQ(buy(&v, aid, 71, oid, sizeof oid), 200);
    struct sk_th_resp r;
    snprintf(path, sizeof path, "/api/v1/orders/%s", oid);
    CHECK_EQ(call(&v, "GET", path, 71, NULL, &r), 200);
    sk_th_resp_field(&r, "status", val, sizeof val);
    CHECK_STR(val, "queued");
    CHECK_EQ(call(&v, "GET", path, 72, NULL, &r), 404);
    CHECK_EQ(order_op(&v, oid, "pay", 71, &r), 409);
    sk_th_resp_field(&r, "error", val, sizeof val);
    CHECK_STR(val, "order_queued");
    CHECK_EQ(sk_th_http_header(&r, "retry-after", val, sizeof val), 0);
    CHECK_EQ(order_op(&v, oid, "cancel", 71, &r), 409);
    CHECK_EQ(remaining(&v, aid), 2);
    stop(&v);
}

SK_TEST(order_routes_refuse_bad_ids_unknown_orders_and_missing_users)
{
    struct srv v;
    start(&v, "api");
    struct sk_th_resp r;
    const char *bad[] = {"/api/v1/orders/abc",     "/api/v1/orders/1-2",
                         "/api/v1/orders/1-2-3-4", "/api/v1/orders/1--3",
                         "/api/v1/orders/0-1-1",   "/api/v1/orders/1-123456789012345678901-1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_MSG(call(&v, "GET", bad[i], 5, NULL, &r) == 400, "%s: %d", bad[i], r.status);
    CHECK_EQ(call(&v, "GET", "/api/v1/orders/999999-1-0", 5, NULL, &r), 404);
    CHECK_EQ(call(&v, "POST", "/api/v1/orders/999999-1-0/pay", 5, NULL, &r), 404);
    CHECK_EQ(call(&v, "POST", "/api/v1/orders/999999-1-0/cancel", 5, NULL, &r), 404);
    CHECK_EQ(call(&v, "GET", "/api/v1/orders/999999-1-0", 0, NULL, &r), 401);
    CHECK_EQ(call(&v, "DELETE", "/api/v1/orders/999999-1-0", 5, NULL, &r), 405);
    stop(&v);
}

/* The key set vanished and was rebuilt from the database: its ledger knows
 * the paid order again, but its stream is a new one that never held it,
 * and no worker read that stream yet. A poll must not take the ledger
 * entry for a queued order: the database says paid. */
SK_TEST(poll_of_an_order_put_back_after_its_key_set_was_rebuilt_is_the_databases)
{
    struct srv v;
    start(&v, "api"); /* the test runs the worker itself */
    uint64_t aid = activity(&v, 5, 1800);
    char oid[64], val[64], path[128], ids[24], out[4096];
    CHECK_EQ(buy(&v, aid, 81, oid, sizeof oid), 200);
    struct sk_worker_opts o;
    sk_worker_opts_init(&o);
    o.redis_url = sk_th_redis_url();
    o.db_spec = v.s.db;
    o.once = 1;
    o.block_ms = 100;
    sk_th_worker_run(&o);
    struct sk_th_resp r;
    /* paid straight away: no poll before the rebuild (a poll would leave
     * this process the stream's figures, which send the next one to the
     * database anyway) */
    CHECK_EQ(order_op(&v, oid, "pay", 81, &r), 200);
    sk_redis *rc = sk_th_redis_new(sk_th_redis_url(), 2000, 5000);
    CHECK_EQ(sk_stock_drop(rc, aid), 0);
    sk_redis_free(rc);
    snprintf(ids, sizeof ids, "%" PRIu64, aid);
    const char *args[] = {"activity", "preheat", "--redis", sk_th_redis_url(), "--db", v.s.db,
                          "--id",     ids,       NULL};
    CHECK_MSG(sk_th_run_seckill(out, sizeof out, NULL, args) == 0, "%s", out);
    CHECK_MSG(strstr(out, "rebuilt"), "%s", out);
    /* a new stream: another buyer's order is in it, the paid one is not */
    int64_t deadline = sk_mono_ms() + 10000;
    int st;
    while ((st = buy(&v, aid, 82, NULL, 0)) != 200) {
        CHECK_MSG(st == 503 && sk_mono_ms() < deadline, "buyer 82 got %d", st);
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    snprintf(path, sizeof path, "/api/v1/orders/%s", oid);
    CHECK_EQ(call(&v, "GET", path, 81, NULL, &r), 200);
    sk_th_resp_field(&r, "status", val, sizeof val);
    CHECK_STR(val, "paid");
    stop(&v);
}

static void write_conf(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fputs(text, f);
    fclose(f);
}

/* n polls of oid by uid one after another on one connection: how many
 * were answered 200 before the first refusal (which must be the budget's:
 * 503 busy). */
static int polls_answered(struct srv *v, const char *oid, uint64_t uid, int n)
{
    char path[128];
    snprintf(path, sizeof path, "/api/v1/orders/%s", oid);
    struct sk_th_resp r;
    for (int i = 0; i < n; i++) {
        int st = call(v, "GET", path, uid, NULL, &r);
        if (st == 200) continue;
        CHECK_MSG(st == 503 && strstr(r.body, "\"busy\""), "poll %d of %d: %d %s", i, n, st,
                  r.body);
        return i;
    }
    return n;
}

#define MAX_HELD 256

/* The budget's refusal: 503 busy with Retry-After (raw answer). */
static void expect_busy(const char *raw)
{
    CHECK_MSG(strncmp(raw, "HTTP/1.1 503", 12) == 0 && strstr(raw, "\"error\":\"busy\"") &&
                  strcasestr(raw, "\r\nretry-after:"),
              "not the poll budget's refusal: %.300s", raw);
}

/* Polls are budgeted only while purchases press (admit_limit.h). An idle
 * process answers 40 polls back to back though --poll-rate-max is 10 (a
 * fixed budget would refuse all but about one). Then the test's own Redis
 * is stopped (SIGSTOP): purchases stay in flight until the process refuses
 * the next one (503 overloaded): purchases press, and polls beyond the
 * budget are refused at once, 503 busy with Retry-After, with Redis still
 * stopped (so before any Redis work). A reload (SIGHUP) turning the budget
 * off lifts those refusals on the same process, Redis still stopped.
 * Redis back: every held purchase is a 200, every held poll answered, and
 * the idle process answers polls back to back again. */
SK_TEST_T(polls_are_budgeted_only_while_purchases_press_and_a_reload_changes_the_budget, 120)
{
    struct sk_th_redis rs;
    sk_th_redis_start(&rs, NULL);
    char conf[400];
    snprintf(conf, sizeof conf, "%s/poll-budget.conf", sk_th_tmpdir());
    /* a burst of one poll, then ten a second; a Redis call may wait 30 s */
    const char *pressed_conf = "poll_rate_max = 10\nredis_timeout_ms = 30000\n";
    write_conf(conf, pressed_conf);
    struct srv v;
    const char *extra[] = {"--role", "all", "--config", conf, NULL};
    sk_th_serve_start(&v.s, rs.url, extra);
    sk_th_http_open(&v.c, v.s.port);
    int64_t deadline = sk_mono_ms() + 10000;
    struct sk_th_resp r;
    while (sk_th_http_req(&v.c, "GET", "/readyz", NULL, NULL, &r) != 200) {
        CHECK_MSG(sk_mono_ms() < deadline, "not ready: %s", r.body);
        sk_th_nap_ms(10);
    }
    uint64_t aid = activity(&v, 1000, 1800);
    char oid[64], raw[4096];
    CHECK_EQ(buy(&v, aid, 71, oid, sizeof oid), 200);
    CHECK_EQ(polls_answered(&v, oid, 71, 40), 40);

    /* Redis stalls: purchases wait until the process refuses one */
    CHECK_EQ(kill(rs.pid, SIGSTOP), 0);
    static int held_buys[MAX_HELD], held_polls[MAX_HELD];
    int nbuys = 0, npolls = 0;
    uint64_t uid = 100;
    deadline = sk_mono_ms() + 30000;
    for (;;) {
        CHECK_MSG(nbuys < MAX_HELD && sk_mono_ms() < deadline,
                  "%d purchases held and none refused overloaded", nbuys);
        int fd = sk_th_buy_send(v.s.port, aid, uid++);
        /* a refusal comes at once; on a slow machine (a sanitizer build)
         * "at once" may outlast a short wait: see the check of the held
         * purchases below */
        int st = sk_th_http_answer(fd, 100, raw, sizeof raw);
        if (st == 0) {
            held_buys[nbuys++] = fd;
            continue;
        }
        CHECK_MSG(st == 503 && strstr(raw, "\"error\":\"overloaded\""), "purchase: %.300s", raw);
        close(fd);
        break;
    }
    /* pressed: 20 polls at once, each on its own connection. The budget
     * (a burst of one, ten a second) lets about one through, to wait for
     * Redis; the others are refused busy with Redis stopped, so before
     * any Redis work. Answers are collected for 3 s: a poll let through
     * has none by then. */
    int fds[20], busy = 0;
    for (int i = 0; i < 20; i++)
        fds[i] = sk_th_poll_send(v.s.port, oid, 71);
    int64_t collect_end = sk_mono_ms() + 3000;
    for (int i = 0; i < 20; i++) {
        int64_t left = collect_end - sk_mono_ms();
        int st = sk_th_http_answer(fds[i], left > 0 ? (int)left : 0, raw, sizeof raw);
        if (st == 0) {
            CHECK(npolls < MAX_HELD);
            held_polls[npolls++] = fds[i];
            continue;
        }
        close(fds[i]);
        if (st == 200) continue; /* answered from the database */
        expect_busy(raw);
        busy++;
    }
    /* one of the burst, and one let through before the press was noticed
     * (the verdict is kept per 100 ms interval) or by the refill */
    CHECK_MSG(busy >= 16, "only %d of 20 polls refused busy while purchases pressed", busy);

    /* SIGHUP with the budget off: polls are let through again, Redis
     * still stopped (one not refused within 2 s was let through) */
    write_conf(conf, "poll_rate_max = 0\nredis_timeout_ms = 30000\n");
    CHECK_EQ(kill(v.s.pid, SIGHUP), 0);
    deadline = sk_mono_ms() + 15000;
    for (;;) {
        CHECK_MSG(sk_mono_ms() < deadline, "polls still refused 15 s after the reload");
        int fd = sk_th_poll_send(v.s.port, oid, 71);
        int st = sk_th_http_answer(fd, 2000, raw, sizeof raw);
        if (st == 0 || st == 200) {
            CHECK(npolls < MAX_HELD);
            if (st == 0) held_polls[npolls++] = fd;
            if (st == 200) close(fd);
            break;
        }
        expect_busy(raw);
        close(fd);
        sk_th_nap_ms(50);
    }
    for (int i = 0; i < 10; i++)
        fds[i] = sk_th_poll_send(v.s.port, oid, 71);
    collect_end = sk_mono_ms() + 2000;
    for (int i = 0; i < 10; i++) {
        int64_t left = collect_end - sk_mono_ms();
        int st = sk_th_http_answer(fds[i], left > 0 ? (int)left : 0, raw, sizeof raw);
        CHECK_MSG(st == 0 || st == 200, "poll %d after the reload: %.300s", i, raw);
        if (st == 0) held_polls[npolls++] = fds[i];
        if (st == 200) close(fds[i]);
    }

    /* Redis back: the held purchases are admitted, the held polls answered */
    CHECK_EQ(kill(rs.pid, SIGCONT), 0);
    /* the first, sent at the stall, cannot have been refused (that takes
     * the target and an interval of silence): it is admitted now; a later
     * one may be a refusal that came after the wait above gave up */
    for (int i = 0; i < nbuys; i++) {
        int st = sk_th_http_answer(held_buys[i], 30000, raw, sizeof raw);
        CHECK_MSG(st == 200 || (i > 0 && st == 503 && strstr(raw, "\"error\":\"overloaded\"")),
                  "held purchase %d: %.300s", i, raw);
        close(held_buys[i]);
    }
    for (int i = 0; i < npolls; i++) {
        int st = sk_th_http_answer(held_polls[i], 30000, raw, sizeof raw);
        CHECK_MSG(st == 200, "held poll %d: %.300s", i, raw);
        close(held_polls[i]);
    }
    /* the budget back on: once the late answers' interval is over (the
     * process idle), 40 polls back to back are answered again */
    write_conf(conf, pressed_conf);
    CHECK_EQ(kill(v.s.pid, SIGHUP), 0);
    deadline = sk_mono_ms() + 10000;
    while (polls_answered(&v, oid, 71, 40) < 40) {
        CHECK_MSG(sk_mono_ms() < deadline, "polls of an idle process still refused after 10 s");
        sk_th_nap_ms(100);
    }
    stop(&v);
    sk_th_redis_stop(&rs, 1);
}

/* One payment request with a Payment-Reference header (NULL: none). */
static int pay_ref(struct srv *v, const char *oid, uint64_t uid, const char *ref,
                   struct sk_th_resp *r)
{
    char path[128], hdr[400];
    snprintf(path, sizeof path, "/api/v1/orders/%s/pay", oid);
    snprintf(hdr, sizeof hdr, "X-User-Id: %" PRIu64 "\r\n%s%s%s", uid,
             ref ? "Payment-Reference: " : "", ref ? ref : "", ref ? "\r\n" : "");
    return sk_th_http_req(&v->c, "POST", path, hdr, NULL, r);
}

/* The payment contract (docs/integration.md): a payment is idempotent by
 * order and by the provider's reference; a second payment (another
 * reference) and a payment of a cancelled order are refused with 409, and
 * the outbox holds one order.payment_refused per order and reference
 * (read from the database), the paid event the first payment's reference.
 * A malformed reference is a 400 and pays nothing. */
SK_TEST(pay_is_idempotent_by_reference_and_refusals_reach_the_outbox)
{
    struct srv v;
    start(&v, "all");
    uint64_t aid = activity(&v, 5, 1800);
    char a[64], b[64], val[64];
    CHECK_EQ(buy(&v, aid, 61, a, sizeof a), 200);
    CHECK_EQ(buy(&v, aid, 62, b, sizeof b), 200);
    struct sk_th_resp r;
    wait_status(&v, a, 61, "created", &r);
    wait_status(&v, b, 62, "created", &r);
    CHECK_EQ(pay_ref(&v, a, 61, "psp bad", &r), 400);
    CHECK_EQ(pay_ref(&v, a, 61, "", &r), 400);
    CHECK_EQ(pay_ref(&v, a, 61, "psp_1", &r), 200);
    CHECK_EQ(pay_ref(&v, a, 61, "psp_1", &r), 200); /* the provider retried */
    CHECK_EQ(pay_ref(&v, a, 61, NULL, &r), 200);    /* no reference: the same order */
    CHECK_EQ(pay_ref(&v, a, 61, "psp_2", &r), 409); /* charged twice: refund psp_2 */
    sk_th_resp_field(&r, "error", val, sizeof val);
    CHECK_STR(val, "order_paid");
    CHECK_EQ(pay_ref(&v, a, 61, "psp_2", &r), 409);
    CHECK_EQ(order_op(&v, b, "cancel", 62, &r), 200);
    CHECK_EQ(pay_ref(&v, b, 62, "psp_3", &r), 409);
    sk_th_resp_field(&r, "error", val, sizeof val);
    CHECK_STR(val, "order_cancelled");
    stop(&v);

    sk_store *st;
    char err[300];
    CHECK_EQ(sk_store_open(&st, v.s.db, err, sizeof err), 0);
    struct sk_event ev[16];
    size_t n = 0;
    CHECK_EQ(sk_store_events_list(st, 0, 16, ev, &n), 0);
    const char *want[][3] = {{a, "order.paid", "psp_1"},
                             {a, "order.payment_refused", "psp_2"},
                             {b, "order.cancelled", NULL},
                             {b, "order.payment_refused", "psp_3"}};
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(ev[i].type, "order.created") || !strncmp(ev[i].type, "activity.", 9)) continue;
        CHECK_MSG(k < 4, "extra event %s %s", ev[i].subject, ev[i].type);
        CHECK_STR(ev[i].subject, want[k][0]);
        CHECK_STR(ev[i].type, want[k][1]);
        if (want[k][2]) CHECK_MSG(strstr(ev[i].payload, want[k][2]) != NULL, "%s", ev[i].payload);
        k++;
    }
    CHECK_EQ(k, 4);
    sk_store_close(st);
}
