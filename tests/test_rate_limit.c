/* test_rate_limit.c - rate limiting and the admission cap (docs/rate-limit.md).
 *
 * The limiter lives in the purchase scripts, so most of it is proved
 * through the blocking API against the run's real redis-server: GCRA burst
 * and retry-after, per-IP limits across users, the activity's own limit in
 * meta winning over the global one, TTLs (limiter keys expire, stock keys
 * never), and a limited purchase changing nothing. Then from outside, with
 * real `seckill serve` processes: 429 + an honest Retry-After, other users
 * unaffected, the limit holding across --processes 2, X-Forwarded-For
 * believed only from a trusted proxy, bad "rate_limit" bodies refused, and
 * max_inflight answering 429 busy while Redis is stopped. Waits are
 * polls with deadlines; the only waiting for time is for a Retry-After to
 * pass, and it is bounded. */
#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "core/clock.h"
#include "core/codes.h"
#include "core/error.h"
#include "engine/activity.h"
#include "engine/keys.h"
#include "engine/stock.h"
#include "http/config.h"
#include "http/http_body.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/http_client.h"

#define ADMIN_HDR "Authorization: Bearer " SK_TH_ADMIN_TOKEN "\r\n"

/* ------------------------------------------------------------ helpers */

/* Waits (polling the clock) until the monotonic clock reaches t_ms. */
static void wait_until(int64_t t_ms)
{
    while (sk_mono_ms() < t_ms)
        sk_th_nap_ms(5);
}

/* An open activity with plenty of stock and a high per-user limit, so only
 * the rate limiter refuses; rl_rate/rl_burst: its own limit (0 = none). */
static uint64_t open_activity(sk_redis *r, int64_t stock, int64_t rl_rate, int64_t rl_burst)
{
    int64_t now = sk_wall_ms();
    struct sk_stock_def d = {.id = sk_th_unique_id(),
                             .initial = stock,
                             .per_user_limit = 1000,
                             .max_per_order = 10,
                             .start_ms = now - 1000,
                             .end_ms = now + 3600000,
                             .rl_per_user_per_s = rl_rate,
                             .rl_burst = rl_burst,
                             .segments = 1};
    sk_th_stock_open(r, &d);
    return d.id;
}

static long long redis_int(sk_redis *r, const char *fmt, const char *key)
{
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(r, &rep, fmt, key), 0);
    long long v = rep->type == REDIS_REPLY_INTEGER  ? rep->integer
                  : rep->type == REDIS_REPLY_STRING ? strtoll(rep->str, NULL, 10)
                                                    : -999;
    freeReplyObject(rep);
    return v;
}

static int64_t stock_of(sk_redis *r, uint64_t aid)
{
    struct sk_keys k;
    sk_keys_for(&k, aid);
    return redis_int(r, "GET %s", k.stock);
}

#define PU(u) ((struct sk_purchase){.user_id = (u), .quantity = 1})
#define PI(u, addr) ((struct sk_purchase){.user_id = (u), .quantity = 1, .ip = (addr)})

/* ------------------------------------------------ the script, blocking API */

SK_TEST(rl_script_burst_then_rate_limited_with_retry_after_others_unaffected)
{
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 1000, 1000);
    uint64_t aid = open_activity(r, 100, 0, 0);
    struct sk_rate_limits rl = {.user_per_s = 10, .user_burst = 3};
    struct sk_purchase p[] = {PU(1), PU(1), PU(1), PU(1), PU(2), PU(1)};
    struct sk_admission res[6];
    int64_t left;
    CHECK_EQ(sk_stock_buy(r, aid, &rl, p, 6, res, &left), 0);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(res[i].rc, SK_RC_OK);
    CHECK_EQ(res[3].rc, SK_RC_RATE_LIMITED);
    CHECK_EQ(res[3].quantity, 0);
    /* 10/s: the next slot is at most one period (100 ms) away */
    CHECK_MSG(res[3].retry_after_ms >= 1 && res[3].retry_after_ms <= 100, "retry %lld",
              (long long)res[3].retry_after_ms);
    CHECK_EQ(res[4].rc, SK_RC_OK); /* another user is not affected */
    CHECK_EQ(res[5].rc, SK_RC_RATE_LIMITED);
    CHECK_EQ(left, 96);
    CHECK_EQ(stock_of(r, aid), 96);
    sk_redis_free(r);
}

SK_TEST(rl_script_retry_after_is_honest)
{
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 1000, 1000);
    uint64_t aid = open_activity(r, 100, 0, 0);
    struct sk_rate_limits rl = {.user_per_s = 4, .user_burst = 1};
    struct sk_purchase p = PU(9);
    struct sk_admission a;
    for (int round = 0; round < 3; round++) {
        CHECK_EQ(sk_stock_buy(r, aid, &rl, &p, 1, &a, NULL), 0);
        CHECK_EQ(a.rc, SK_RC_OK);
        CHECK_EQ(sk_stock_buy(r, aid, &rl, &p, 1, &a, NULL), 0);
        int64_t t0 = sk_mono_ms(); /* the wait counts from the answer, as a client's does */
        CHECK_EQ(a.rc, SK_RC_RATE_LIMITED);
        CHECK_MSG(a.retry_after_ms >= 150 && a.retry_after_ms <= 250, "retry %lld",
                  (long long)a.retry_after_ms);
        /* waiting what was said is enough. 10 ms of slack: the script's
         * clock is Redis's TIME (wall clock, read once per script call),
         * ours is CLOCK_MONOTONIC; the two disagree by a few ms now and
         * then (seen: 1 run in 3 failed with no slack). The HTTP
         * Retry-After is whole seconds, rounded up, so buyers never see it. */
        wait_until(t0 + a.retry_after_ms + 10);
        CHECK_EQ(sk_stock_buy(r, aid, &rl, &p, 1, &a, NULL), 0);
        CHECK_MSG(a.rc == SK_RC_OK, "round %d: still %d after the retry-after", round, a.rc);
        wait_until(sk_mono_ms() + 260); /* bucket full again for the next round */
    }
    sk_redis_free(r);
}

SK_TEST(rl_script_limiter_keys_expire_and_stock_keys_never)
{
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 1000, 1000);
    uint64_t aid = open_activity(r, 100, 0, 0);
    struct sk_rate_limits rl = {.user_per_s = 2, .user_burst = 2, .ip_per_s = 5, .ip_burst = 5};
    struct sk_purchase p[] = {PI(5, "192.0.2.1"), PI(5, "192.0.2.1"), PI(5, "192.0.2.1")};
    struct sk_admission res[3];
    CHECK_EQ(sk_stock_buy(r, aid, &rl, p, 3, res, NULL), 0);
    CHECK_EQ(res[0].rc, SK_RC_OK);
    CHECK_EQ(res[2].rc, SK_RC_RATE_LIMITED);
    char ukey[96], ikey[96];
    snprintf(ukey, sizeof ukey, "sk:{a%" PRIu64 "}:rl:u:5", aid);
    snprintf(ikey, sizeof ikey, "sk:{a%" PRIu64 "}:rl:ip:192.0.2.1", aid);
    long long ut = redis_int(r, "PTTL %s", ukey), it = redis_int(r, "PTTL %s", ikey);
    /* a full bucket: burst * period = 1 s (user), 2 * 200 ms (IP) */
    CHECK_MSG(ut > 0 && ut <= 1001, "user key PTTL %lld", ut);
    CHECK_MSG(it > 0 && it <= 401, "ip key PTTL %lld", it);
    struct sk_keys k;
    sk_keys_for(&k, aid);
    const char *never[] = {k.stock, k.meta, k.buyers, k.orders, k.ledger};
    for (size_t i = 0; i < sizeof never / sizeof never[0]; i++)
        CHECK_MSG(redis_int(r, "PTTL %s", never[i]) == -1, "%s has a TTL", never[i]);
    sk_redis_free(r);
}

SK_TEST(rl_script_rate_limited_purchase_changes_nothing)
{
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 1000, 1000);
    uint64_t aid = open_activity(r, 10, 1, 1); /* the activity's own limit: 1/s, burst 1 */
    struct sk_keys k;
    sk_keys_for(&k, aid);
    struct sk_admission a;
    CHECK_EQ(sk_th_buy(r, aid, 3, 1, &a, NULL), 0);
    CHECK_EQ(a.rc, SK_RC_OK);
    long long stock = stock_of(r, aid), xlen = redis_int(r, "XLEN %s", k.orders);
    long long held = redis_int(r, "HLEN %s", k.buyers), ledger = redis_int(r, "HLEN %s", k.ledger);
    for (int i = 0; i < 20; i++) {
        /* with an Idempotency-Key too: a limited retry stores no answer */
        struct sk_purchase p = {.user_id = 3, .quantity = 1, .idem = "k", .idem_len = 1};
        CHECK_EQ(sk_stock_buy(r, aid, NULL, &p, 1, &a, NULL), 0);
        CHECK_EQ(a.rc, SK_RC_RATE_LIMITED);
        CHECK(a.retry_after_ms > 0 && a.retry_after_ms <= 1000);
    }
    CHECK_EQ(stock_of(r, aid), stock);
    CHECK_EQ(redis_int(r, "XLEN %s", k.orders), xlen);
    CHECK_EQ(redis_int(r, "HLEN %s", k.buyers), held);
    CHECK_EQ(redis_int(r, "HLEN %s", k.ledger), ledger);
    CHECK_EQ(redis_int(r, "EXISTS %s", k.idem), 0);
    CHECK_EQ(stock + held, 10); /* stock + sum(buyers) == initial */
    sk_redis_free(r);
}

SK_TEST(rl_script_per_ip_limit_spans_users_and_ips_are_separate)
{
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 1000, 1000);
    uint64_t aid = open_activity(r, 100, 0, 0);
    struct sk_rate_limits rl = {.ip_per_s = 1, .ip_burst = 2};
    struct sk_purchase p[] = {PI(1, "198.51.100.7"), PI(2, "198.51.100.7"), PI(3, "198.51.100.7"),
                              PI(4, "2001:db8::1"), PU(5)};
    struct sk_admission res[5];
    CHECK_EQ(sk_stock_buy(r, aid, &rl, p, 5, res, NULL), 0);
    CHECK_EQ(res[0].rc, SK_RC_OK);
    CHECK_EQ(res[1].rc, SK_RC_OK);
    CHECK_EQ(res[2].rc, SK_RC_RATE_LIMITED); /* third user behind the same IP */
    CHECK_EQ(res[3].rc, SK_RC_OK);
    CHECK_EQ(res[4].rc, SK_RC_OK); /* no IP known: only the user limit applies */
    /* an IP that is not an address is a bad argument, never a key */
    struct sk_purchase bad = PI(6, "1.2.3.4}:stock");
    CHECK_EQ(sk_stock_buy(r, aid, &rl, &bad, 1, res, NULL), 0);
    CHECK_EQ(res[0].rc, SK_RC_BAD_ARGUMENT);
    CHECK_EQ(stock_of(r, aid), 96);
    sk_redis_free(r);
}

SK_TEST(rl_script_activity_limit_wins_and_off_writes_no_keys)
{
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 1000, 1000);
    struct sk_rate_limits generous = {.user_per_s = 1000, .user_burst = 1000};
    uint64_t strict = open_activity(r, 100, 1, 1);
    struct sk_purchase p[] = {PU(1), PU(1)};
    struct sk_admission res[2];
    CHECK_EQ(sk_stock_buy(r, strict, &generous, p, 2, res, NULL), 0);
    CHECK_EQ(res[0].rc, SK_RC_OK);
    CHECK_EQ(res[1].rc, SK_RC_RATE_LIMITED);

    /* no limit anywhere: no limiter key is written at all */
    uint64_t off = open_activity(r, 100, 0, 0);
    CHECK_EQ(sk_stock_buy(r, off, NULL, p, 2, res, NULL), 0);
    CHECK_EQ(res[0].rc, SK_RC_OK);
    CHECK_EQ(res[1].rc, SK_RC_OK);
    char key[96];
    snprintf(key, sizeof key, "sk:{a%" PRIu64 "}:rl:u:1", off);
    CHECK_EQ(redis_int(r, "EXISTS %s", key), 0);
    sk_redis_free(r);
}

SK_TEST(rl_script_closed_sale_writes_no_limiter_key)
{
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 1000, 1000);
    uint64_t aid = open_activity(r, 100, 1, 1);
    int rc;
    CHECK_EQ(sk_stock_set_open(r, aid, 0, &rc), 0);
    struct sk_admission a;
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(sk_th_buy(r, aid, 4, 1, &a, NULL), 0);
        CHECK_EQ(a.rc, SK_RC_CLOSED);
    }
    char key[96];
    snprintf(key, sizeof key, "sk:{a%" PRIu64 "}:rl:u:4", aid);
    CHECK_EQ(redis_int(r, "EXISTS %s", key), 0);
    sk_redis_free(r);
}

/* ------------------------------------------------------ config and body */

SK_TEST(rl_config_trusted_proxies_and_rates)
{
    struct sk_config c;
    char err[256];
    sk_config_defaults(&c);
    CHECK_EQ(c.rate_per_user_per_s, 0);
    CHECK_EQ(c.n_trusted_proxies, 0);
    CHECK_EQ(sk_config_set(&c, "trusted_proxies", "10.0.0.0/8, 127.0.0.1,::1,2001:db8::/32", err,
                           sizeof err),
             0);
    CHECK_EQ(c.n_trusted_proxies, 4);
    const char *yes[] = {"10.1.2.3", "127.0.0.1", "::1", "::ffff:10.9.9.9", "2001:db8:1::5"};
    const char *no[] = {"11.0.0.1", "127.0.0.2", "::2", "2001:db9::1"};
    struct sk_ip ip;
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        CHECK_EQ(sk_ip_parse(yes[i], strlen(yes[i]), &ip), 0);
        CHECK_MSG(sk_config_is_trusted_proxy(&c, &ip), "%s should be trusted", yes[i]);
    }
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        CHECK_EQ(sk_ip_parse(no[i], strlen(no[i]), &ip), 0);
        CHECK_MSG(!sk_config_is_trusted_proxy(&c, &ip), "%s should not be trusted", no[i]);
    }
    char text[SK_IP_TEXT];
    CHECK_EQ(sk_ip_parse("::ffff:1.2.3.4", 14, &ip), 0);
    sk_ip_format(&ip, text);
    CHECK_STR(text, "1.2.3.4");
    const char *bad[] = {"10.0.0.0/33", "nonsense", "1.2.3.4/", "::1/129", "1.2.3.4/x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_MSG(sk_config_set(&c, "trusted_proxies", bad[i], err, sizeof err) == SK_EINVAL,
                  "%s accepted", bad[i]);
    CHECK_EQ(c.n_trusted_proxies, 4); /* a refused value leaves the old one */
    CHECK_EQ(sk_config_set_flag(&c, "rate-per-user-per-s", "5", err, sizeof err), 0);
    CHECK_EQ(c.rate_per_user_per_s, 5);
    CHECK_EQ(sk_config_set(&c, "rate_burst", "-1", err, sizeof err), SK_EINVAL);
    CHECK_EQ(sk_config_set(&c, "max_inflight", "1000001", err, sizeof err), SK_EINVAL);
    char *env[] = {"SECKILL_RATE_PER_IP_PER_S=7", NULL};
    CHECK_EQ(sk_config_apply_env(&c, env, err, sizeof err), 0);
    CHECK_EQ(c.rate_per_ip_per_s, 7);
}

#define BODY_HEAD                                                                                  \
    "{\"id\":7,\"name\":\"n\",\"stock\":5,\"per_user_limit\":1,"                                   \
    "\"start\":\"2030-01-01T00:00:00Z\",\"end\":\"2030-01-02T00:00:00Z\""

SK_TEST(rl_body_rate_limit_field)
{
    struct sk_activity a;
    char err[200];
    CHECK_EQ(sk_body_activity_create(BODY_HEAD "}", strlen(BODY_HEAD "}"), &a, err, sizeof err), 0);
    CHECK_EQ(a.rl_per_user_per_s, 0);
    const char *ok = BODY_HEAD ",\"rate_limit\":{\"per_user_per_s\":5,\"burst\":20}}";
    CHECK_EQ(sk_body_activity_create(ok, strlen(ok), &a, err, sizeof err), 0);
    CHECK_EQ(a.rl_per_user_per_s, 5);
    CHECK_EQ(a.rl_burst, 20);
    const char *dflt = BODY_HEAD ",\"rate_limit\":{\"per_user_per_s\":3}}";
    CHECK_EQ(sk_body_activity_create(dflt, strlen(dflt), &a, err, sizeof err), 0);
    CHECK_EQ(a.rl_burst, 3);
    const char *bad[] = {
        BODY_HEAD ",\"rate_limit\":5}",
        BODY_HEAD ",\"rate_limit\":null}",
        BODY_HEAD ",\"rate_limit\":{}}",
        BODY_HEAD ",\"rate_limit\":{\"burst\":3}}",
        BODY_HEAD ",\"rate_limit\":{\"per_user_per_s\":0}}",
        BODY_HEAD ",\"rate_limit\":{\"per_user_per_s\":-1}}",
        BODY_HEAD ",\"rate_limit\":{\"per_user_per_s\":\"5\"}}",
        BODY_HEAD ",\"rate_limit\":{\"per_user_per_s\":1.5}}",
        BODY_HEAD ",\"rate_limit\":{\"per_user_per_s\":1000001}}",
        BODY_HEAD ",\"rate_limit\":{\"per_user_per_s\":5,\"burst\":0}}",
        BODY_HEAD ",\"rate_limit\":{\"per_user_per_s\":5,\"burst\":true}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_MSG(sk_body_activity_create(bad[i], strlen(bad[i]), &a, err, sizeof err) == SK_EINVAL,
                  "accepted: %s", bad[i]);
        CHECK_MSG(strstr(err, "rate_limit") != NULL, "message %s", err);
    }
}

/* ------------------------------------------------------------ over HTTP */

struct srv {
    struct sk_th_serve s;
    struct sk_th_http c;
};

static void srv_start(struct srv *v, const char *redis_url, const char *const *extra)
{
    setenv("LSAN_OPTIONS", "exitcode=0", 1);
    sk_th_serve_start(&v->s, redis_url, extra);
    sk_th_http_open(&v->c, v->s.port);
    struct sk_th_resp r;
    int64_t deadline = sk_mono_ms() + 10000;
    while (sk_th_http_req(&v->c, "GET", "/readyz", NULL, NULL, &r) != 200) {
        CHECK_MSG(sk_mono_ms() < deadline, "/readyz not 200 within 10 s");
        sk_th_nap_ms(5);
    }
}

static void srv_stop(struct srv *v)
{
    sk_th_http_close(&v->c);
    CHECK_EQ(sk_th_serve_stop(&v->s, SIGTERM), 0);
}

/* Creates, preheats and opens an activity (rate_limit: JSON or NULL). */
static uint64_t http_activity(struct srv *v, int64_t stock, const char *rate_limit)
{
    uint64_t id = sk_th_unique_id();
    char start[SK_TIME_RFC3339_MAX], end[SK_TIME_RFC3339_MAX], body[512], path[96];
    sk_time_format_rfc3339(sk_wall_ms() / 1000 * 1000 - 60000, start, sizeof start);
    sk_time_format_rfc3339(sk_wall_ms() / 1000 * 1000 + 3600000, end, sizeof end);
    snprintf(body, sizeof body,
             "{\"id\":%" PRIu64 ",\"name\":\"rl\",\"stock\":%" PRId64 ",\"per_user_limit\":1000,"
             "\"max_per_order\":1,\"start\":\"%s\",\"end\":\"%s\"%s%s}",
             id, stock, start, end, rate_limit ? ",\"rate_limit\":" : "",
             rate_limit ? rate_limit : "");
    struct sk_th_resp r;
    CHECK_MSG(sk_th_http_req(&v->c, "POST", "/api/v1/activities", ADMIN_HDR, body, &r) == 201,
              "create: %d %s", r.status, r.body);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/preheat", id);
    CHECK_EQ(sk_th_http_req(&v->c, "POST", path, ADMIN_HDR, "{}", &r), 200);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/open", id);
    CHECK_EQ(sk_th_http_req(&v->c, "POST", path, ADMIN_HDR, "{}", &r), 200);
    return id;
}

/* One purchase on connection c; extra: more header lines or NULL. */
static int buy(struct sk_th_http *c, uint64_t aid, uint64_t uid, const char *extra,
               struct sk_th_resp *r)
{
    char h[512], path[96];
    snprintf(h, sizeof h, "X-User-Id: %" PRIu64 "\r\n%s", uid, extra ? extra : "");
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", aid);
    return sk_th_http_req(c, "POST", path, h, "{\"quantity\":1}", r);
}

static long long stock_remaining(struct srv *v, uint64_t aid)
{
    char path[96];
    struct sk_th_resp r;
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64, aid);
    CHECK_EQ(sk_th_http_req(&v->c, "GET", path, NULL, NULL, &r), 200);
    json_t *j = json_loads(r.body, 0, NULL);
    CHECK(j);
    long long v2 = json_integer_value(json_object_get(j, "stock_remaining"));
    json_decref(j);
    return v2;
}

/* A 429 rate_limited with a Retry-After: returns its seconds. */
static int expect_rate_limited(const struct sk_th_resp *r, const char *code)
{
    CHECK_MSG(r->status == 429, "status %d body %s", r->status, r->body);
    json_t *j = json_loads(r->body, 0, NULL);
    CHECK_MSG(j, "body %s", r->body);
    CHECK_STR(json_string_value(json_object_get(j, "error")), code);
    CHECK(json_is_string(json_object_get(j, "message")));
    CHECK(json_integer_value(json_object_get(j, "retry_after_ms")) >= 1);
    json_decref(j);
    char ra[32];
    CHECK_MSG(sk_th_http_header(r, "retry-after", ra, sizeof ra) == 0, "no Retry-After");
    int secs = atoi(ra);
    CHECK_MSG(secs >= 1, "Retry-After %s", ra);
    return secs;
}

SK_TEST(rl_http_user_over_limit_gets_429_with_honest_retry_after)
{
    struct srv v;
    srv_start(&v, sk_th_redis_url(), NULL);
    uint64_t aid = http_activity(&v, 50, "{\"per_user_per_s\":1,\"burst\":2}");
    struct sk_th_resp r;
    CHECK_EQ(buy(&v.c, aid, 1, NULL, &r), 200);
    CHECK_EQ(buy(&v.c, aid, 1, NULL, &r), 200);
    CHECK_EQ(buy(&v.c, aid, 1, NULL, &r), 429);
    int64_t t429 = sk_mono_ms();
    int secs = expect_rate_limited(&r, "rate_limited");
    CHECK_EQ(secs, 1);                      /* 1 per second: the next slot is within a second */
    CHECK_EQ(stock_remaining(&v, aid), 48); /* the 429 took nothing */
    /* other users are not affected */
    for (uint64_t u = 2; u < 6; u++)
        CHECK_EQ(buy(&v.c, aid, u, NULL, &r), 200);
    /* honest: after waiting Retry-After, the next request is admitted */
    wait_until(t429 + secs * 1000);
    CHECK_MSG(buy(&v.c, aid, 1, NULL, &r) == 200, "after Retry-After: %d %s", r.status, r.body);
    CHECK_EQ(stock_remaining(&v, aid), 43);
    srv_stop(&v);
}

SK_TEST(rl_http_limit_holds_across_two_processes)
{
    struct srv v;
    const char *extra[] = {"--processes", "2", "--rate-per-user-per-s", "1", "--rate-burst",
                           "3",           NULL};
    srv_start(&v, sk_th_redis_url(), extra);
    uint64_t aid = http_activity(&v, 100, NULL); /* the global limit applies */
    int ok = 0, limited = 0;
    int64_t t0 = sk_mono_ms();
    for (int i = 0; i < 16; i++) {
        /* a new connection each time: SO_REUSEPORT spreads them over both processes */
        struct sk_th_http c;
        struct sk_th_resp r;
        sk_th_http_open(&c, v.s.port);
        int st = buy(&c, aid, 77, NULL, &r);
        sk_th_http_close(&c);
        if (st == 200)
            ok++;
        else if (st == 429)
            limited++, expect_rate_limited(&r, "rate_limited");
        else
            sk_th_fail(__FILE__, __LINE__, "status %d %s", st, r.body);
    }
    int64_t secs = (sk_mono_ms() - t0) / 1000;
    /* burst 3, then one per second of the run: per-process limits would admit twice as many */
    CHECK_MSG(ok >= 3 && ok <= 3 + secs + 1, "%d admitted in %lld s", ok, (long long)secs);
    CHECK_EQ(ok + limited, 16);
    CHECK_EQ(stock_remaining(&v, aid), 100 - ok);
    srv_stop(&v);
}

SK_TEST(rl_http_x_forwarded_for_believed_only_from_trusted_proxy)
{
    struct sk_th_resp r;
    const char *a = "X-Forwarded-For: 203.0.113.5\r\n", *b = "X-Forwarded-For: 203.0.113.6\r\n";
    /* behind a trusted proxy (127.0.0.1): one request per client IP */
    struct srv v;
    const char *trusted[] = {
        "--rate-per-ip-per-s", "1", "--rate-ip-burst", "1", "--trusted-proxies",
        "127.0.0.0/8",         NULL};
    srv_start(&v, sk_th_redis_url(), trusted);
    uint64_t aid = http_activity(&v, 100, NULL);
    CHECK_EQ(buy(&v.c, aid, 1, a, &r), 200);
    CHECK_EQ(buy(&v.c, aid, 2, a, &r), 429); /* another user, same client IP */
    expect_rate_limited(&r, "rate_limited");
    CHECK_EQ(buy(&v.c, aid, 3, b, &r), 200); /* another client IP */
    /* a client cannot escape by prepending addresses: the right-most
     * untrusted one counts */
    CHECK_EQ(buy(&v.c, aid, 4, "X-Forwarded-For: 9.9.9.9, 203.0.113.5\r\n", &r), 429);
    /* trusted hops on the right are skipped, in one header or several */
    CHECK_EQ(buy(&v.c, aid, 5, "X-Forwarded-For: 203.0.113.6, 127.0.0.9\r\n", &r), 429);
    CHECK_EQ(
        buy(&v.c, aid, 6, "X-Forwarded-For: 203.0.113.7\r\nX-Forwarded-For: 127.0.0.3\r\n", &r),
        200);
    CHECK_EQ(stock_remaining(&v, aid), 97);
    srv_stop(&v);

    /* no trusted proxy: the header is ignored, the peer (127.0.0.1) counts */
    const char *plain[] = {"--rate-per-ip-per-s", "1", "--rate-ip-burst", "1", NULL};
    srv_start(&v, sk_th_redis_url(), plain);
    aid = http_activity(&v, 100, NULL);
    CHECK_EQ(buy(&v.c, aid, 1, a, &r), 200);
    CHECK_EQ(buy(&v.c, aid, 2, b, &r), 429);
    expect_rate_limited(&r, "rate_limited");
    srv_stop(&v);
}

SK_TEST(rl_http_bad_rate_limit_fields_are_400_and_create_nothing)
{
    struct srv v;
    srv_start(&v, sk_th_redis_url(), NULL);
    const char *bad[] = {"5",
                         "null",
                         "{}",
                         "{\"per_user_per_s\":0}",
                         "{\"per_user_per_s\":-3}",
                         "{\"per_user_per_s\":\"2\"}",
                         "{\"per_user_per_s\":2.5}",
                         "{\"per_user_per_s\":99999999}",
                         "{\"per_user_per_s\":2,\"burst\":0}",
                         "{\"per_user_per_s\":2,\"burst\":[1]}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t id = sk_th_unique_id();
        char body[512], path[96];
        snprintf(body, sizeof body,
                 "{\"id\":%" PRIu64 ",\"name\":\"x\",\"stock\":5,\"per_user_limit\":1,"
                 "\"start\":\"2030-01-01T00:00:00Z\",\"end\":\"2030-01-02T00:00:00Z\","
                 "\"rate_limit\":%s}",
                 id, bad[i]);
        struct sk_th_resp r;
        CHECK_MSG(sk_th_http_req(&v.c, "POST", "/api/v1/activities", ADMIN_HDR, body, &r) == 400,
                  "%s: %d %s", bad[i], r.status, r.body);
        CHECK(strstr(r.body, "\"bad_request\"") && strstr(r.body, "rate_limit"));
        snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64, id);
        CHECK_EQ(sk_th_http_req(&v.c, "GET", path, NULL, NULL, &r), 404);
    }
    /* a good one is stored and shown */
    uint64_t aid = http_activity(&v, 5, "{\"per_user_per_s\":4,\"burst\":9}");
    char path[96];
    struct sk_th_resp r;
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64, aid);
    CHECK_EQ(sk_th_http_req(&v.c, "GET", path, NULL, NULL, &r), 200);
    CHECK_MSG(strstr(r.body, "\"rate_limit\":{\"per_user_per_s\":4,\"burst\":9}"), "%s", r.body);
    srv_stop(&v);
}

/* Writes a purchase on a fresh socket and leaves it unanswered. */
static int send_purchase_raw(int port, uint64_t aid, uint64_t uid)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    char req[256];
    int n = snprintf(req, sizeof req,
                     "POST /api/v1/activities/%" PRIu64 "/purchase HTTP/1.1\r\nHost: x\r\n"
                     "X-User-Id: %" PRIu64 "\r\nContent-Length: 0\r\n\r\n",
                     aid, uid);
    CHECK_EQ(write(fd, req, (size_t)n), n);
    return fd;
}

SK_TEST(rl_http_max_inflight_refuses_busy_at_once_while_redis_is_stuck)
{
    struct sk_th_redis rs;
    sk_th_redis_start(&rs, NULL);
    struct srv v;
    const char *extra[] = {"--max-inflight", "2", "--redis-timeout-ms", "4000", NULL};
    srv_start(&v, rs.url, extra);
    uint64_t aid = http_activity(&v, 100, NULL);
    struct sk_th_resp r;
    CHECK_EQ(buy(&v.c, aid, 1, NULL, &r), 200);
    kill(rs.pid, SIGSTOP);
    int fds[2] = {send_purchase_raw(v.s.port, aid, 2), send_purchase_raw(v.s.port, aid, 3)};
    /* poll until both wait on Redis (the gauge counts waiting requests) */
    int64_t deadline = sk_mono_ms() + 3000;
    for (;;) {
        /* the node's text outgrows the client's body buffer: read it raw */
        static char raw[1 << 18];
        static const char mreq[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
        size_t got = sk_th_http_raw(v.s.port, mreq, sizeof mreq - 1, raw, sizeof raw, 5000);
        CHECK(got > 12 && strncmp(raw, "HTTP/1.1 200", 12) == 0);
        const char *g = strstr(raw, "\nseckill_inflight_requests ");
        if (g && atoi(g + 27) >= 2) break;
        CHECK_MSG(sk_mono_ms() < deadline, "purchases not in flight within 3 s");
        sk_th_nap_ms(5);
    }
    /* the next is refused at once, not queued behind a stuck Redis */
    int64_t t = sk_mono_ms();
    CHECK_EQ(buy(&v.c, aid, 4, NULL, &r), 429);
    CHECK_MSG(sk_mono_ms() - t < 1000, "busy took %lld ms", (long long)(sk_mono_ms() - t));
    CHECK_EQ(expect_rate_limited(&r, "busy"), 1);
    kill(rs.pid, SIGCONT);
    for (int i = 0; i < 2; i++) {
        char buf[2048];
        ssize_t n = read(fds[i], buf, sizeof buf - 1);
        CHECK(n > 12);
        buf[n] = 0;
        CHECK_MSG(strncmp(buf, "HTTP/1.1 200", 12) == 0, "held purchase: %.40s", buf);
        close(fds[i]);
    }
    /* the cap frees up: purchases flow again */
    CHECK_EQ(buy(&v.c, aid, 4, NULL, &r), 200);
    srv_stop(&v);
    sk_th_redis_stop(&rs, 1);
}
