/* test_queue.c - the waiting room's pure parts (docs/waiting-room.md): what
 * a buyer is told (position, estimate, when to poll again), which pass
 * texts may travel to the admission call, the queue call's arguments and
 * reply decoding, the definition's rules and the create and pace bodies. */
#include <stdlib.h>
#include <string.h>

#include "core/codes.h"
#include "core/error.h"
#include "engine/activity.h"
#include "engine/queue.h"
#include "http/http_body.h"
#include "support/harness.h"

static struct sk_queue_answer waiting(int64_t place)
{
    return (struct sk_queue_answer){.rc = SK_RC_Q_WAITING, .place = place};
}

SK_TEST(queue_position_and_estimate_follow_the_place_and_the_pace)
{
    struct sk_queue_head h = {.rc = SK_RC_OK, .length = 500, .issued = 100, .rate = 50};
    struct sk_queue_answer a = waiting(101);
    CHECK_EQ(sk_queue_position(&h, &a), 1);
    CHECK_EQ(sk_queue_eta_ms(&h, &a), 20); /* one pass at 50/s */
    a = waiting(400);
    CHECK_EQ(sk_queue_position(&h, &a), 300);
    CHECK_EQ(sk_queue_eta_ms(&h, &a), 6000);
    /* rounded up: 7 places at 3/s is 2.334 s */
    h.rate = 3;
    a = waiting(107);
    CHECK_EQ(sk_queue_eta_ms(&h, &a), 2334);
    /* before the start nobody has a position; the estimate is the start */
    struct sk_queue_head pre = {.rc = SK_RC_OK, .length = 9, .rate = 5, .starts_in_ms = 4200};
    a = waiting(0);
    CHECK_EQ(sk_queue_position(&pre, &a), 0);
    CHECK_EQ(sk_queue_eta_ms(&pre, &a), 4200);
    /* not waiting: nothing */
    struct sk_queue_answer adm = {.rc = SK_RC_Q_ADMITTED, .place = 3};
    CHECK_EQ(sk_queue_position(&h, &adm), 0);
    CHECK_EQ(sk_queue_eta_ms(&h, &adm), 0);
    CHECK_EQ(sk_queue_poll_after_ms(&h, &adm, 7), 0);
}

SK_TEST(queue_poll_after_grows_with_the_distance_within_bounds)
{
    struct sk_queue_head h = {.rc = SK_RC_OK, .length = 100000, .issued = 0, .rate = 100};
    int64_t prev = 0;
    const int64_t places[] = {1, 10, 100, 1000, 3000, 100000};
    for (size_t i = 0; i < sizeof places / sizeof places[0]; i++) {
        struct sk_queue_answer a = waiting(places[i]);
        int64_t ms = sk_queue_poll_after_ms(&h, &a, 42);
        CHECK_MSG(ms >= 250 && ms <= 20000, "place %lld: %lld ms", (long long)places[i],
                  (long long)ms);
        CHECK_MSG(ms >= prev, "place %lld polls sooner (%lld ms) than a nearer one (%lld ms)",
                  (long long)places[i], (long long)ms, (long long)prev);
        prev = ms;
    }
    CHECK_EQ(prev, 20000);
    /* buyers at one place are spread (a tenth), not all at one instant */
    struct sk_queue_answer a = waiting(1000);
    int64_t lo = 1 << 30, hi = 0;
    for (uint64_t u = 1; u <= 200; u++) {
        int64_t ms = sk_queue_poll_after_ms(&h, &a, u);
        lo = ms < lo ? ms : lo;
        hi = ms > hi ? ms : hi;
        CHECK_EQ(ms, sk_queue_poll_after_ms(&h, &a, u)); /* fixed per buyer */
    }
    CHECK(hi > lo && hi - lo < 5000 / 10 + 1);
    /* before the start: at the start, spread over a second */
    struct sk_queue_head pre = {.rc = SK_RC_OK, .rate = 5, .starts_in_ms = 3000};
    struct sk_queue_answer w = waiting(0);
    lo = 1 << 30;
    hi = 0;
    for (uint64_t u = 1; u <= 200; u++) {
        int64_t ms = sk_queue_poll_after_ms(&pre, &w, u);
        lo = ms < lo ? ms : lo;
        hi = ms > hi ? ms : hi;
    }
    CHECK(lo >= 3000 && hi < 4000 && hi - lo > 500);
    pre.starts_in_ms = 3600 * 1000; /* an hour away: every 20 s */
    CHECK_EQ(sk_queue_poll_after_ms(&pre, &w, 1), 20000);
}

SK_TEST(queue_pass_wellformed_takes_what_the_queue_hands_out)
{
    int64_t exp = 0;
    const char *ok = "1796067481624.3ae0b02806cd1e28dfa130dd2007def8";
    CHECK(sk_queue_pass_wellformed(ok, strlen(ok), &exp));
    CHECK_EQ(exp, 1796067481624LL);
    const char *bad[] = {"",
                         "1796067481624",
                         "1796067481624.",
                         ".3ae0",
                         "1796067481624.3AE0",
                         "1796067481624.3ae0 ",
                         "17960674816241234.3ae0",
                         "1796067481624.3ae0.1",
                         "-1.3ae0",
                         "1796067481624.3ae0b02806cd1e28dfa130dd2007def83ae0b02806cd1e28dfa130dd"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_MSG(!sk_queue_pass_wellformed(bad[i], strlen(bad[i]), NULL), "accepted '%s'", bad[i]);
    CHECK(!sk_queue_pass_wellformed(NULL, 0, NULL));
    CHECK(!sk_queue_pass_wellformed("12\0.ab", 6, NULL));
}

SK_TEST(queue_args_and_reply_round_trip)
{
    char buf[SK_QUEUE_ARG_BYTES(3)];
    const char *args[SK_QUEUE_ARGC(3)];
    size_t lens[SK_QUEUE_ARGC(3)];
    const uint64_t users[] = {1, 18446744073709551615ULL, 42};
    CHECK_EQ(sk_queue_args(77, "jpj", users, 3, buf, sizeof buf, args, lens), 0);
    CHECK_STR(args[0], "77");
    CHECK_STR(args[1], "j");
    CHECK_STR(args[2], "1");
    CHECK_STR(args[3], ""); /* no challenge ticket */
    CHECK_STR(args[4], "p");
    CHECK_STR(args[5], "18446744073709551615");
    CHECK_EQ(lens[5], 20);
    CHECK_STR(args[7], "j");
    CHECK_STR(args[8], "42");
    CHECK_EQ(sk_queue_args(77, "jx", users, 2, buf, sizeof buf, args, lens), SK_EINVAL);
    CHECK_EQ(sk_queue_args(77, "j", users, 0, buf, sizeof buf, args, lens), SK_EINVAL);
    CHECK_EQ(sk_queue_args(77, "jpj", users, 3, buf, 10, args, lens), SK_EINVAL);

    /* a reply: head (nine), then one buyer admitted */
    enum { N = 14, P = 9 };
    redisReply e[N], *pe[N];
    for (int i = 0; i < N; i++) {
        memset(&e[i], 0, sizeof e[i]);
        e[i].type = REDIS_REPLY_INTEGER;
        pe[i] = &e[i];
    }
    long long vals[N] = {SK_RC_OK,        9, 3, 50, 0, 1, 2, 1, SK_WR_NO_JOINS, SK_RC_Q_ADMITTED, 2,
                         1796067481624LL, 0, 1};
    for (int i = 0; i < N; i++)
        e[i].integer = vals[i];
    e[P + 3].type = REDIS_REPLY_STRING;
    e[P + 3].str = "1796067481624.3ae0";
    e[P + 3].len = strlen(e[P + 3].str);
    redisReply rep = {.type = REDIS_REPLY_ARRAY, .elements = N, .element = pe};
    struct sk_queue_head h;
    struct sk_queue_answer a;
    CHECK_EQ(sk_queue_parse(&rep, 1, &h, &a), 0);
    CHECK_EQ(h.length, 9);
    CHECK_EQ(h.issued, 3);
    CHECK_EQ(h.rate, 50);
    CHECK_EQ(h.returned, 2);
    CHECK_EQ(h.expired, 1);
    CHECK_EQ(h.control, SK_WR_NO_JOINS);
    CHECK_EQ(a.rc, SK_RC_Q_ADMITTED);
    CHECK_EQ(a.place, 2);
    CHECK_EQ(a.pass_exp_ms, 1796067481624LL);
    CHECK_STR(a.pass, "1796067481624.3ae0");
    CHECK_EQ(a.events, SK_QUEUE_EV_ISSUED);
    /* wrong count, wrong types: a protocol error, not an answer */
    CHECK_EQ(sk_queue_parse(&rep, 2, &h, &a), SK_EPROTO);
    e[P + 3].type = REDIS_REPLY_INTEGER;
    CHECK_EQ(sk_queue_parse(&rep, 1, &h, &a), SK_EPROTO);
    e[P + 3].type = REDIS_REPLY_STRING;
    e[2].type = REDIS_REPLY_NIL;
    CHECK_EQ(sk_queue_parse(&rep, 1, &h, &a), SK_EPROTO);
    CHECK_EQ(sk_queue_parse(NULL, 1, &h, &a), SK_EPROTO);
}

SK_TEST(queue_definition_needs_rate_ttl_and_seed_together)
{
    struct sk_activity a;
    sk_activity_init(&a);
    a.id = 1;
    snprintf(a.name, sizeof a.name, "x");
    a.stock = 10;
    a.per_user_limit = 1;
    a.start_ms = 0;
    a.end_ms = 1000;
    sk_activity_apply_defaults(&a);
    char err[200];
    CHECK_EQ(a.wr_pass_ttl_s, 0);
    CHECK_EQ(sk_activity_validate(&a, err, sizeof err), 0);
    a.wr_pass_ttl_s = SK_ACTIVITY_UNSET;
    a.wr_passes_per_s = 5;
    snprintf(a.wr_seed, sizeof a.wr_seed, "00112233445566778899aabbccddeeff");
    sk_activity_apply_defaults(&a);
    CHECK_EQ(a.wr_pass_ttl_s, SK_ACTIVITY_PASS_TTL_DEFAULT);
    CHECK_EQ(sk_activity_validate(&a, err, sizeof err), 0);
    struct {
        int64_t rate, ttl;
        const char *seed, *want;
    } bad[] = {
        {-1, 300, "00112233445566778899aabbccddeeff", "passes per second"},
        {1000001, 300, "00112233445566778899aabbccddeeff", "passes per second"},
        {5, 0, "00112233445566778899aabbccddeeff", "pass TTL"},
        {5, 86401, "00112233445566778899aabbccddeeff", "pass TTL"},
        {5, 300, "", "queue seed"},
        {5, 300, "001122334455667", "queue seed"}, /* 15 digits */
        {5, 300, "00112233445566778899AABBCCDDEEFF", "queue seed"},
        {0, 300, "", "needs passes per second"},
        {0, 0, "00112233445566778899aabbccddeeff", "needs passes per second"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        a.wr_passes_per_s = bad[i].rate;
        a.wr_pass_ttl_s = bad[i].ttl;
        snprintf(a.wr_seed, sizeof a.wr_seed, "%s", bad[i].seed);
        CHECK_MSG(sk_activity_validate(&a, err, sizeof err) == SK_EINVAL, "#%zu accepted", i);
        CHECK_MSG(strstr(err, bad[i].want) != NULL, "#%zu: '%s'", i, err);
    }
}

SK_TEST(queue_create_and_pace_bodies)
{
    const char *base = "{\"id\":1,\"name\":\"x\",\"stock\":5,\"per_user_limit\":1,"
                       "\"start\":\"2030-01-01T00:00:00Z\",\"end\":\"2030-01-02T00:00:00Z\"";
    char body[600], err[200];
    struct sk_activity b;
    snprintf(body, sizeof body, "%s}", base);
    CHECK_EQ(sk_body_activity_create(body, strlen(body), &b, err, sizeof err), 0);
    CHECK_EQ(b.wr_passes_per_s, 0);
    CHECK_STR(b.wr_seed, "");
    snprintf(body, sizeof body,
             "%s,\"waiting_room\":{\"passes_per_s\":40,\"pass_ttl_s\":90,"
             "\"seed\":\"ABCDEF0123456789abcdef0123456789\"}}",
             base);
    CHECK_EQ(sk_body_activity_create(body, strlen(body), &b, err, sizeof err), 0);
    CHECK_EQ(b.wr_passes_per_s, 40);
    CHECK_EQ(b.wr_pass_ttl_s, 90);
    CHECK_STR(b.wr_seed, "abcdef0123456789abcdef0123456789");
    snprintf(body, sizeof body, "%s,\"waiting_room\":{\"passes_per_s\":40}}", base);
    CHECK_EQ(sk_body_activity_create(body, strlen(body), &b, err, sizeof err), 0);
    CHECK_EQ(b.wr_pass_ttl_s, SK_ACTIVITY_PASS_TTL_DEFAULT);
    CHECK_STR(b.wr_seed, "");
    snprintf(body, sizeof body, "%s,\"waiting_room\":{\"pass_ttl_s\":40}}", base);
    CHECK_EQ(sk_body_activity_create(body, strlen(body), &b, err, sizeof err), SK_EINVAL);
    CHECK_MSG(strstr(err, "waiting_room: missing field passes_per_s"), "'%s'", err);
    CHECK_EQ(b.wr_passes_per_s, 0); /* a refused body leaves nothing behind */

    int64_t rate = 0;
    CHECK_EQ(sk_body_queue_pace("{\"passes_per_s\":12}", 19, &rate, err, sizeof err), 0);
    CHECK_EQ(rate, 12);
    const char *bad[] = {"",
                         "{}",
                         "{\"passes_per_s\":0}",
                         "{\"passes_per_s\":-3}",
                         "{\"passes_per_s\":1e3}",
                         "{\"passes_per_s\":true}",
                         "nope"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rate = 99;
        CHECK_EQ(sk_body_queue_pace(bad[i], strlen(bad[i]), &rate, err, sizeof err), SK_EINVAL);
        CHECK_EQ(rate, 99);
    }
}
