/* test_waiting_room.c - the waiting room's scripts against the run's real
 * redis-server, on its real clock (docs/waiting-room.md): the draw before
 * the start, arrival order after it, passes in place order, a pass that
 * expires and buys a place at the back, and the admission call refusing a
 * purchase without this buyer's valid unspent pass (unsegmented and
 * segmented, and on a Redis Cluster). The HTTP side, two serve processes
 * and the pace are in test_waiting_room_http.c. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/codes.h"
#include "core/error.h"
#include "engine/keys.h"
#include "engine/queue.h"
#include "engine/stock.h"
#include "redis/script.h"
#include "support/cluster_harness.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/queue_env.h"
#include "support/serve_buy.h"

SK_TH_CLUSTER_USED

#define SEED_A "0123456789abcdef0123456789abcdef"
#define SEED_B "fedcba9876543210fedcba9876543210"

/* A preheated, open activity with a waiting room: window [start, start+3h),
 * rate passes/s, passes living ttl_s, the seed given. */
static uint64_t wr_activity(sk_redis *r, int64_t stock, int64_t limit, int64_t start_ms,
                            int64_t rate, int64_t ttl_s, const char *seed, int segments)
{
    struct sk_stock_def d = {.id = sk_th_unique_id(),
                             .initial = stock,
                             .per_user_limit = limit,
                             .max_per_order = limit,
                             .start_ms = start_ms,
                             .end_ms = start_ms + 3 * 3600 * 1000,
                             .segments = segments,
                             .wr_rate = rate,
                             .wr_ttl_s = ttl_s};
    snprintf(d.wr_seed, sizeof d.wr_seed, "%s", seed);
    sk_th_stock_open(r, &d);
    return d.id;
}

/* n buyers users[0..n) join (or poll) in that order, 500 to a call. */
static void q_many(sk_redis *r, uint64_t aid, char op, const uint64_t *users, size_t n,
                   struct sk_queue_answer *out, struct sk_queue_head *last)
{
    char ops[500];
    memset(ops, op, sizeof ops);
    for (size_t i = 0; i < n; i += 500) {
        size_t m = n - i < 500 ? n - i : 500;
        int rc = sk_queue_call(r, aid, ops, users + i, m, last, out + i);
        CHECK_MSG(rc == 0, "queue call: %s (%s)", sk_strerror(rc), r->errstr);
    }
}

/* n buyers first, first + 1, ... (into users) join in that order. */
static void join_from(sk_redis *r, uint64_t aid, uint64_t first, size_t n, uint64_t *users,
                      struct sk_queue_answer *ans, struct sk_queue_head *h)
{
    for (size_t i = 0; i < n; i++)
        users[i] = first + i;
    q_many(r, aid, SK_QUEUE_JOIN, users, n, ans, h);
}

/* Waits (bounded) until Redis's clock passes ms. */
static void wait_redis_past(sk_redis *r, int64_t ms)
{
    int64_t deadline = sk_mono_ms() + 15000;
    for (;;) {
        redisReply *rep;
        CHECK_EQ(sk_redis_cmd(r, &rep, "TIME"), 0);
        int64_t now = strtoll(rep->element[0]->str, NULL, 10) * 1000 +
                      strtoll(rep->element[1]->str, NULL, 10) / 1000;
        freeReplyObject(rep);
        if (now > ms) return;
        CHECK_MSG(sk_mono_ms() < deadline, "Redis's clock did not reach %" PRId64, ms);
        sk_th_nap_ms(now + 5 < ms ? 5 : 1);
    }
}

static int buy_with(sk_redis *r, uint64_t aid, uint64_t uid, const char *pass, const char *idem,
                    struct sk_admission *a)
{
    struct sk_purchase p = {.user_id = uid,
                            .quantity = 1,
                            .pass = pass,
                            .pass_len = pass ? strlen(pass) : 0,
                            .idem = idem,
                            .idem_len = idem ? strlen(idem) : 0};
    struct sk_admission tmp;
    if (!a) a = &tmp;
    int rc = sk_th_stock_buy(r, aid, NULL, &p, 1, a, NULL);
    CHECK_MSG(rc == 0, "purchase: %s (%s)", sk_strerror(rc), r->errstr);
    return a->rc;
}

/* Spearman's rank correlation of x[i] (a permutation of 1..n) with i. */
static double rank_correlation(const int64_t *x, size_t n)
{
    double d2 = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)(x[i] - 1) - (double)i;
        d2 += d * d;
    }
    double nn = (double)n;
    return 1.0 - 6.0 * d2 / (nn * (nn * nn - 1.0));
}

#define EARLY 3000
#define LATE 200

/* Everyone who joins before the start gets a random place (a permutation
 * with no trace of the join order), the same seed gives the same places, a
 * different seed others, and whoever joins after the start is behind all
 * of them, in arrival order. Real clock: the joins happen before Redis's
 * TIME passes the start, the polls after. */
SK_TEST_T(wr_draw_at_start_is_a_random_permutation_fixed_by_the_seed, 120)
{
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 2000, 2000);
    int64_t start = sk_wall_ms() + 3000;
    uint64_t a1 = wr_activity(r, 100, 1, start, 1, 60, SEED_A, 1);
    uint64_t a2 = wr_activity(r, 100, 1, start, 1, 60, SEED_A, 1);
    uint64_t a3 = wr_activity(r, 100, 1, start, 1, 60, SEED_B, 1);
    static uint64_t users[EARLY + LATE];
    for (size_t i = 0; i < EARLY + LATE; i++)
        users[i] = 1000 + i; /* joined in this known order */
    static struct sk_queue_answer ans[EARLY + LATE];
    struct sk_queue_head h;
    const uint64_t acts[] = {a1, a2, a3};
    for (int k = 0; k < 3; k++) {
        q_many(r, acts[k], SK_QUEUE_JOIN, users, EARLY, ans, &h);
        CHECK_MSG(h.starts_in_ms > 0, "the joins took past the start: the test needs them before");
        for (size_t i = 0; i < EARLY; i++) {
            CHECK_EQ(ans[i].rc, SK_RC_Q_WAITING);
            CHECK_EQ(ans[i].place, 0); /* nothing drawn yet: nobody knows a place */
        }
        CHECK_EQ(h.length, EARLY);
        /* joining again changes nothing */
        q_many(r, acts[k], SK_QUEUE_JOIN, users, 10, ans, &h);
        CHECK_EQ(h.length, EARLY);
    }
    wait_redis_past(r, start);
    static int64_t place[3][EARLY + LATE];
    for (int k = 0; k < 3; k++) {
        q_many(r, acts[k], SK_QUEUE_JOIN, users + EARLY, LATE, ans + EARLY, &h);
        CHECK_EQ(h.starts_in_ms, 0);
        q_many(r, acts[k], SK_QUEUE_POLL, users, EARLY + LATE, ans, &h);
        CHECK_EQ(h.length, EARLY + LATE);
        static char seen[EARLY + LATE + 1];
        memset(seen, 0, sizeof seen);
        for (size_t i = 0; i < EARLY + LATE; i++) {
            CHECK_MSG(ans[i].rc == SK_RC_Q_WAITING || ans[i].rc == SK_RC_Q_ADMITTED, "rc %d",
                      ans[i].rc);
            place[k][i] = ans[i].place;
            CHECK(place[k][i] >= 1 && place[k][i] <= EARLY + LATE);
            CHECK_MSG(!seen[place[k][i]], "place %" PRId64 " given twice", place[k][i]);
            seen[place[k][i]] = 1;
            /* the early ones hold places 1..EARLY; the late ones follow in
             * the order they came */
            if (i < EARLY)
                CHECK(place[k][i] <= EARLY);
            else
                CHECK_EQ(place[k][i], (int64_t)i + 1);
        }
    }
    /* no trace of the join order: for 3,000 buyers a random permutation's
     * rank correlation has a standard deviation of ~0.018 */
    double rho = rank_correlation(place[0], EARLY);
    CHECK_MSG(fabs(rho) < 0.08, "rank correlation of join order and place: %.4f", rho);
    /* the seed fixes the draw */
    CHECK(memcmp(place[0], place[1], sizeof place[0]) == 0);
    size_t same = 0;
    double d2 = 0;
    for (size_t i = 0; i < EARLY; i++) {
        same += place[0][i] == place[2][i];
        double d = (double)(place[0][i] - place[2][i]);
        d2 += d * d;
    }
    double rho_seeds = 1.0 - 6.0 * d2 / ((double)EARLY * ((double)EARLY * EARLY - 1.0));
    CHECK_MSG(same < 20, "%zu buyers got the same place under another seed", same);
    CHECK_MSG(fabs(rho_seeds) < 0.08, "two seeds' draws correlate: %.4f", rho_seeds);
    sk_redis_free(r);
}

/* A poll of someone who never joined is refused; an activity without a
 * waiting room has no queue; a closed one refuses joins. */
SK_TEST(wr_queue_refusals_change_nothing)
{
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 2000, 2000);
    uint64_t aid = wr_activity(r, 10, 1, sk_wall_ms() - 1000, 5, 60, SEED_A, 1);
    struct sk_queue_head h;
    CHECK_EQ(queue_one(r, aid, SK_QUEUE_POLL, 7, &h).rc, SK_RC_NOT_IN_QUEUE);
    CHECK_EQ(h.length, 0);
    /* no waiting room */
    struct sk_stock_def d = {.id = sk_th_unique_id(),
                             .initial = 5,
                             .per_user_limit = 1,
                             .max_per_order = 1,
                             .start_ms = sk_wall_ms() - 1000,
                             .end_ms = sk_wall_ms() + 3600000,
                             .segments = 1};
    int rc;
    CHECK_EQ(sk_stock_preheat(r, &d, 0, &rc, NULL), 0);
    CHECK_EQ(queue_one(r, d.id, SK_QUEUE_JOIN, 7, &h).rc, SK_RC_NO_WAITING_ROOM);
    CHECK_EQ(h.rc, SK_RC_NO_WAITING_ROOM);
    /* never preheated */
    CHECK_EQ(queue_one(r, sk_th_unique_id(), SK_QUEUE_JOIN, 7, &h).rc, SK_RC_UNKNOWN_ACTIVITY);
    /* closed */
    CHECK_EQ(sk_stock_set_open(r, aid, 0, &rc), 0);
    CHECK_EQ(queue_one(r, aid, SK_QUEUE_JOIN, 7, &h).rc, SK_RC_CLOSED);
    CHECK_EQ(sk_stock_set_open(r, aid, 1, &rc), 0);
    CHECK_EQ(queue_one(r, aid, SK_QUEUE_POLL, 7, &h).rc, SK_RC_NOT_IN_QUEUE);
    /* a malformed call is refused whole (lua/lib/args.lua: the head alone,
     * BAD_ARGUMENT), which the decoder reports as a script error, as the
     * Lua error was */
    const char *keys[SK_QUEUE_NKEYS];
    struct sk_keys k;
    sk_keys_for(&k, aid);
    sk_keys_queue(&k, keys);
    const char *bad[] = {"x", "j", "1"};
    redisReply *rep;
    CHECK_EQ(sk_script_eval(r, SK_SCRIPT_QUEUE, SK_QUEUE_NKEYS, keys, 3, bad, NULL, &rep), 0);
    CHECK_EQ(rep->element[0]->integer, SK_RC_BAD_ARGUMENT);
    struct sk_queue_answer qa;
    CHECK_EQ(sk_queue_parse(rep, 1, &h, &qa), SK_ESCRIPT);
    freeReplyObject(rep);
    const char *bad_user[] = {"1", "j", "01", ""}; /* aid, then op, user, ticket */
    CHECK_EQ(sk_script_eval(r, SK_SCRIPT_QUEUE, SK_QUEUE_NKEYS, keys, 4, bad_user, NULL, &rep), 0);
    CHECK_EQ(rep->element[9]->integer, SK_RC_BAD_ARGUMENT); /* the first buyer's, after the head */
    freeReplyObject(rep);
    CHECK_EQ(queue_one(r, aid, SK_QUEUE_POLL, 7, &h).rc, SK_RC_NOT_IN_QUEUE);
    CHECK_EQ(h.length, 0);
    sk_redis_free(r);
}

/* Passes go to the front of the queue at the pace, never ahead of the
 * queue (an idle room banks nothing for a burst), and the answers a buyer
 * sees agree: waiting buyers' position is place - issued. */
SK_TEST(wr_passes_follow_places_and_the_pace_banks_nothing)
{
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 2000, 2000);
    /* started an hour ago at 1 pass/s: 3,600 passes' worth of idle time */
    uint64_t aid = wr_activity(r, 1000, 1, sk_wall_ms() - 3600 * 1000, 1, 60, SEED_A, 1);
    uint64_t users[50];
    struct sk_queue_answer ans[50];
    struct sk_queue_head h;
    join_from(r, aid, 500, 50, users, ans, &h);
    /* the first joiner found the room idle and got a pass; the rest queue */
    CHECK_EQ(ans[0].rc, SK_RC_Q_ADMITTED);
    CHECK(ans[0].pass[0] != 0);
    int admitted = 0;
    for (int i = 0; i < 50; i++) {
        CHECK_EQ(ans[i].place, i + 1);
        admitted += ans[i].rc == SK_RC_Q_ADMITTED;
    }
    CHECK_MSG(admitted <= 2, "%d passes at once: the idle time was banked", admitted);
    CHECK_EQ(h.issued, admitted);
    /* a waiting buyer's position and estimate follow from the head */
    struct sk_queue_answer last = queue_one(r, aid, SK_QUEUE_POLL, users[49], &h);
    CHECK_EQ(last.rc, SK_RC_Q_WAITING);
    CHECK_EQ(sk_queue_position(&h, &last), 50 - h.issued);
    CHECK_EQ(sk_queue_eta_ms(&h, &last), (50 - h.issued) * 1000);
    /* ~49 s away: ask again in 20 s, the longest wait */
    CHECK_EQ(sk_queue_poll_after_ms(&h, &last, users[49]), 20000);
    /* at 1/s the second place gets its pass within about a second, and
     * never after the third: whenever the third has one, so has the second */
    int64_t deadline = sk_mono_ms() + 5000;
    for (;;) {
        int third = queue_one(r, aid, SK_QUEUE_POLL, users[2], NULL).rc == SK_RC_Q_ADMITTED;
        int second = queue_one(r, aid, SK_QUEUE_POLL, users[1], &h).rc == SK_RC_Q_ADMITTED;
        CHECK_MSG(!third || second, "the third place had a pass before the second");
        if (second) break;
        CHECK_MSG(sk_mono_ms() < deadline, "the second place got no pass within 5 s");
        sk_th_nap_ms(20);
    }
    /* the pass a buyer sees again is the same one */
    struct sk_queue_answer again = queue_one(r, aid, SK_QUEUE_JOIN, users[0], NULL);
    CHECK_EQ(again.rc, SK_RC_Q_ADMITTED);
    CHECK_STR(again.pass, ans[0].pass);
    CHECK_EQ(again.pass_exp_ms, ans[0].pass_exp_ms);
    struct sk_queue_stats st;
    CHECK_EQ(sk_queue_pace(r, aid, 0, &st), 0);
    CHECK_EQ(st.rc, SK_RC_OK);
    CHECK_EQ(st.length, 50);
    CHECK(st.handed_out >= 2 && st.handed_out <= st.issued);
    CHECK(st.issued >= 2 && st.issued <= 4);
    sk_redis_free(r);
}

/* A pass is this buyer's, for this activity, until it expires or buys:
 * without one, with another's, an expired or a spent one the admission call
 * refuses and changes nothing; an Idempotency-Key retry of the accepted
 * purchase still gets its first answer. */
static void pass_rules(int segments)
{
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 2000, 2000);
    uint64_t aid = wr_activity(r, 10, 2, sk_wall_ms() - 1000, 1000, 2, SEED_A, segments);
    uint64_t other = wr_activity(r, 10, 2, sk_wall_ms() - 1000, 1000, 2, SEED_A, segments);
    struct sk_queue_answer a = queue_admitted(r, aid, 11);
    struct sk_queue_answer b = queue_admitted(r, aid, 12);
    struct sk_queue_answer o = queue_admitted(r, other, 11);
    struct sk_stock_state st0, st;
    CHECK_EQ(sk_stock_state(r, aid, &st0), 0);
    char forged[SK_QUEUE_PASS_MAX];
    snprintf(forged, sizeof forged, "%s", a.pass);
    forged[strlen(forged) - 1] = forged[strlen(forged) - 1] == '0' ? '1' : '0';
    char later[SK_QUEUE_PASS_MAX]; /* the same tag with a later expiry */
    snprintf(later, sizeof later, "%" PRId64 "%s", a.pass_exp_ms + 60000, strchr(a.pass, '.'));
    /* a segmented sale's purchases are serve's (serve_buy.h), which
     * refuses a malformed pass at its door (400) before any script */
    int malformed = segments > 1 ? SK_RC_BAD_ARGUMENT : SK_RC_NO_PASS;
    const struct {
        const char *pass;
        int rc;
    } refused[] = {{NULL, SK_RC_NO_PASS},    {"", malformed},         {b.pass, SK_RC_NO_PASS},
                   {o.pass, SK_RC_NO_PASS},  {forged, SK_RC_NO_PASS}, {later, SK_RC_NO_PASS},
                   {"12.ab", SK_RC_NO_PASS}, {"x", malformed}};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        CHECK_MSG(buy_with(r, aid, 11, refused[i].pass, NULL, NULL) == refused[i].rc,
                  "pass #%zu not refused", i);
    CHECK_EQ(sk_stock_state(r, aid, &st), 0);
    CHECK_EQ(st.remaining, st0.remaining);
    CHECK_EQ(st.held, 0);
    CHECK_EQ(st.stream_len, 0);
    /* its own pass buys, once */
    struct sk_admission ad, ad2;
    CHECK_EQ(buy_with(r, aid, 11, a.pass, "k1", &ad), SK_RC_OK);
    CHECK_EQ(buy_with(r, aid, 11, a.pass, NULL, NULL), SK_RC_PASS_USED);
    CHECK_EQ(buy_with(r, aid, 11, a.pass, "k2", NULL), SK_RC_PASS_USED);
    /* the retry of the accepted purchase is its first answer */
    CHECK_EQ(buy_with(r, aid, 11, a.pass, "k1", &ad2), SK_RC_OK);
    CHECK_STR(ad2.order_id, ad.order_id);
    CHECK_EQ(sk_stock_state(r, aid, &st), 0);
    CHECK_EQ(st.remaining, st0.remaining - 1);
    CHECK_EQ(st.held, 1);
    /* an expired pass: b's lives 2 s */
    wait_redis_past(r, b.pass_exp_ms);
    CHECK_EQ(buy_with(r, aid, 12, b.pass, NULL, NULL), SK_RC_PASS_EXPIRED);
    CHECK_EQ(sk_stock_state(r, aid, &st), 0);
    CHECK_EQ(st.remaining, st0.remaining - 1);
    CHECK_EQ(st.held, 1);
    /* two purchases of one pass in one call: one buys */
    struct sk_queue_answer c = queue_admitted(r, aid, 13);
    struct sk_purchase two[2] = {
        {.user_id = 13, .quantity = 1, .pass = c.pass, .pass_len = strlen(c.pass)},
        {.user_id = 13, .quantity = 1, .pass = c.pass, .pass_len = strlen(c.pass)}};
    struct sk_admission res[2];
    CHECK_EQ(sk_th_stock_buy(r, aid, NULL, two, 2, res, NULL), 0);
    CHECK_EQ((res[0].rc == SK_RC_OK) + (res[1].rc == SK_RC_OK), 1);
    CHECK_EQ((res[0].rc == SK_RC_PASS_USED) + (res[1].rc == SK_RC_PASS_USED), 1);
    CHECK_EQ(sk_stock_state(r, aid, &st), 0);
    CHECK_EQ(st.remaining + st.held + st.in_transit, st.initial);
    CHECK_EQ(st.held, 2);
    sk_redis_free(r);
}

SK_TEST(wr_purchase_needs_the_buyers_own_valid_unspent_pass)
{
    pass_rules(1);
}

SK_TEST(wr_purchase_needs_the_pass_in_a_segmented_activity_too)
{
    pass_rules(3);
}

/* An expired pass buys a place at the back, and the place it leaves does
 * not become a pass for the next buyer: the pace stays the pace. */
SK_TEST(wr_expired_pass_rejoins_at_the_back_without_a_free_pass)
{
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 2000, 2000);
    uint64_t aid = wr_activity(r, 100, 1, sk_wall_ms() - 1000, 1, 1, SEED_A, 1);
    struct sk_queue_head h;
    struct sk_queue_answer a = queue_one(r, aid, SK_QUEUE_JOIN, 21, &h);
    CHECK_EQ(a.rc, SK_RC_Q_ADMITTED);
    CHECK_EQ(a.events, SK_QUEUE_EV_ISSUED);
    for (uint64_t u = 22; u <= 24; u++)
        CHECK_EQ(queue_one(r, aid, SK_QUEUE_JOIN, u, NULL).rc, SK_RC_Q_WAITING);
    /* wait for the pass to expire (1 s), then see it so */
    wait_redis_past(r, a.pass_exp_ms);
    struct sk_queue_answer e = queue_one(r, aid, SK_QUEUE_POLL, 21, &h);
    CHECK_EQ(e.rc, SK_RC_Q_EXPIRED);
    /* the first call after the deadline settled it: its seat went back */
    CHECK_EQ(h.expired, 1);
    CHECK_EQ(h.returned, 1);
    CHECK_EQ(queue_one(r, aid, SK_QUEUE_POLL, 21, &h).rc, SK_RC_Q_EXPIRED);
    CHECK_EQ(h.expired, 0); /* counted once */
    /* join again: the back of the queue, the others keep their order */
    struct sk_queue_answer back = queue_one(r, aid, SK_QUEUE_JOIN, 21, &h);
    CHECK_EQ(h.length, 4);
    CHECK_EQ(back.place, 4);
    struct sk_queue_answer b24 = queue_one(r, aid, SK_QUEUE_POLL, 24, NULL);
    struct sk_queue_answer b23 = queue_one(r, aid, SK_QUEUE_POLL, 23, NULL);
    struct sk_queue_answer b22 = queue_one(r, aid, SK_QUEUE_POLL, 22, NULL);
    CHECK_EQ(b22.place, 1);
    CHECK_EQ(b23.place, 2);
    CHECK_EQ(b24.place, 3);
    if (b24.rc == SK_RC_Q_ADMITTED) CHECK_EQ(b23.rc, SK_RC_Q_ADMITTED);
    if (b23.rc == SK_RC_Q_ADMITTED) CHECK_EQ(b22.rc, SK_RC_Q_ADMITTED);
    /* nobody got a pass for the place the expired one left: every pass
     * handed out (the expired one included) is one the pace allowed since
     * the first, at 1/s (the first pass was handed out at its expiry - 1 s),
     * or the seat the expired one gave back to the pace */
    struct sk_queue_stats st;
    CHECK_EQ(sk_queue_pace(r, aid, 0, &st), 0);
    CHECK_EQ(st.returned, 1);
    int64_t allowed = 1 + (sk_wall_ms() - (a.pass_exp_ms - 1000)) / 1000 + st.returned;
    CHECK_MSG(st.handed_out <= allowed, "%" PRId64 " passes handed out, the pace allows %" PRId64,
              st.handed_out, allowed);
    CHECK_EQ(st.expired, 1);
    sk_redis_free(r);
}

/* A new pace keeps the passes issued so far and counts on from now. */
SK_TEST(wr_pace_change_keeps_issued_passes_and_counts_on)
{
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 2000, 2000);
    uint64_t aid = wr_activity(r, 100, 1, sk_wall_ms() - 1000, 1, 60, SEED_A, 1);
    uint64_t users[200];
    struct sk_queue_answer ans[200];
    struct sk_queue_head h;
    join_from(r, aid, 3000, 200, users, ans, &h);
    struct sk_queue_stats st;
    CHECK_EQ(sk_queue_pace(r, aid, 0, &st), 0);
    int64_t before = st.issued;
    CHECK(before >= 1 && before <= 2);
    CHECK_EQ(sk_queue_pace(r, aid, 100, &st), 0);
    CHECK_EQ(st.rc, SK_RC_OK);
    CHECK_EQ(st.rate, 100);
    CHECK(st.issued >= before);
    int64_t t0 = sk_mono_ms(), n0 = st.issued;
    /* 100/s from now: about 50 more in half a second */
    while (sk_mono_ms() - t0 < 500)
        sk_th_nap_ms(10);
    CHECK_EQ(sk_queue_pace(r, aid, 0, &st), 0);
    int64_t dt = sk_mono_ms() - t0;
    CHECK_MSG(st.issued - n0 >= 40 && st.issued - n0 <= dt / 10 + 2,
              "%" PRId64 " passes in %" PRId64 " ms at 100/s", st.issued - n0, dt);
    /* bad paces change nothing */
    struct sk_keys k;
    sk_keys_for(&k, aid);
    const char *keys[] = {k.meta, k.wr_q};
    const char *bad[] = {"0", "-1", "1000001", "1.5", "x"};
    for (size_t i = 0; i < 5; i++) {
        redisReply *rep;
        CHECK_EQ(sk_script_eval(r, SK_SCRIPT_QUEUE_PACE, 2, keys, 1, &bad[i], NULL, &rep), 0);
        CHECK_EQ(rep->element[0]->integer, SK_RC_BAD_ARGUMENT);
        freeReplyObject(rep);
    }
    CHECK_EQ(sk_queue_pace(r, aid, 0, &st), 0);
    CHECK_EQ(st.rate, 100);
    sk_redis_free(r);
}

/* On a Redis Cluster, with the stock in three segments spread over the
 * masters: the queue lives in the base slot, each pass is checked and spent
 * in its buyer's home segment's slot, and exactly the stock sells. */
SK_TEST(wr_cluster_segmented_sale_sells_exactly_with_passes)
{
    sk_redis *r = sk_th_redis_new(sk_th_cluster_url(), 2000, 5000);
    CHECK_MSG(sk_redis_connect(r) == 0, "connect: %s", r->errstr);
    uint64_t aid = wr_activity(r, 20, 1, sk_wall_ms() - 1000, 100000, 60, SEED_A, 3);
    int sold = 0;
    for (uint64_t u = 1; u <= 40; u++) {
        struct sk_queue_answer a = queue_admitted(r, aid, u);
        /* without a pass: refused (sold out first once every unit is gone) */
        int rc = buy_with(r, aid, u, NULL, NULL, NULL);
        CHECK_MSG(rc == SK_RC_NO_PASS || (rc == SK_RC_SOLD_OUT && sold == 20), "rc %d", rc);
        rc = buy_with(r, aid, u, a.pass, NULL, NULL);
        CHECK_MSG(rc == SK_RC_OK || rc == SK_RC_SOLD_OUT, "user %" PRIu64 ": rc %d", u, rc);
        if (rc == SK_RC_OK) {
            sold++;
            /* spent (or, once every unit is gone, sold out first) */
            rc = buy_with(r, aid, u, a.pass, NULL, NULL);
            CHECK_MSG(rc == SK_RC_PASS_USED || (rc == SK_RC_SOLD_OUT && sold == 20),
                      "spent pass: rc %d", rc);
        }
    }
    CHECK_EQ(sold, 20);
    struct sk_stock_state st;
    CHECK_EQ(sk_stock_state(r, aid, &st), 0);
    CHECK_EQ(st.segments, 3);
    CHECK_EQ(st.remaining, 0);
    CHECK_EQ(st.held, 20);
    CHECK_EQ(st.remaining + st.held + st.in_transit, st.initial);
    struct sk_queue_stats qs;
    CHECK_EQ(sk_queue_pace(r, aid, 0, &qs), 0);
    CHECK_EQ(qs.length, 40);
    CHECK_EQ(qs.handed_out, 40);
    CHECK_EQ(sk_stock_drop(r, aid), 0);
    sk_redis_free(r);
}
