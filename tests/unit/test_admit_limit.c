/* test_admit_limit.c - the adaptive limit of purchases in flight
 * (http/admit_limit.h), driven with made-up times: off admits everything;
 * past the limit a purchase is refused and counted; a stalled Redis halves
 * the limit down to the floor; a standing queue above the target shrinks
 * it; fast answers grow it again (recovery); a quiet node never lowers it;
 * "pressed" only when purchases were refused or the loop was saturated
 * while they came. */
#include "http/admit_limit.h"
#include "support/harness.h"

#define MS 1000
#define IV SK_ADMIT_INTERVAL_US

/* One interval of passes of pass_us each, answering done purchases with
 * sojourn_us each first. */
static void interval(struct sk_admit_limit *l, int64_t *now, int done, int64_t sojourn_us,
                     int64_t pass_us)
{
    for (int i = 0; i < done; i++) {
        sk_admit_begin(l);
        sk_admit_done(l, sojourn_us);
    }
    int64_t end = *now + IV;
    while (*now < end) {
        *now += pass_us > 0 ? pass_us : IV;
        sk_admit_pass(l, pass_us, *now);
    }
}

SK_TEST(admit_off_admits_everything)
{
    struct sk_admit_limit l;
    sk_admit_init(&l, 0, 0);
    for (int i = 0; i < 3 * SK_ADMIT_START; i++) {
        CHECK_EQ(sk_admit_room(&l), 1);
        sk_admit_begin(&l);
    }
    CHECK_EQ(l.refused_total, 0u);
    int64_t now = 0;
    interval(&l, &now, 0, 0, 1 * MS);
    CHECK_EQ(sk_admit_pressed(&l), 0);
}

SK_TEST(admit_stalled_redis_halves_to_the_floor_and_refuses_past_it)
{
    struct sk_admit_limit l;
    int64_t now = 0;
    sk_admit_init(&l, 50, now);
    CHECK_EQ(sk_admit_current(&l), SK_ADMIT_START);
    /* 40 purchases out, none comes back */
    for (int i = 0; i < 40; i++) {
        CHECK_EQ(sk_admit_room(&l), 1);
        sk_admit_begin(&l);
    }
    for (int k = 0; k < 12; k++)
        interval(&l, &now, 0, 0, 0);
    CHECK_EQ(sk_admit_current(&l), SK_ADMIT_FLOOR);
    CHECK_EQ(sk_admit_room(&l), 0);
    CHECK_EQ(l.refused_total, 1u);
    /* the refusal of the interval makes it pressed at its end */
    interval(&l, &now, 0, 0, 0);
    CHECK_EQ(sk_admit_pressed(&l), 1);
}

SK_TEST(admit_standing_queue_shrinks_and_fast_answers_recover)
{
    struct sk_admit_limit l;
    int64_t now = 0;
    sk_admit_init(&l, 50, now);
    /* saturated loop (1 ms passes back to back), every purchase 200 ms */
    for (int k = 0; k < 10; k++)
        interval(&l, &now, 1000, 200 * MS, 1 * MS);
    int64_t low = sk_admit_current(&l);
    CHECK_MSG(low < SK_ADMIT_START / 4, "limit %lld", (long long)low);
    CHECK_EQ(sk_admit_pressed(&l), 1);
    /* the burst is over: quick answers, a quiet loop */
    for (int k = 0; k < 10; k++)
        interval(&l, &now, 2000, 1 * MS, 0);
    CHECK_MSG(sk_admit_current(&l) > low, "limit %lld after recovery (was %lld)",
              (long long)sk_admit_current(&l), (long long)low);
    CHECK_EQ(sk_admit_pressed(&l), 0);
}

SK_TEST(admit_quiet_node_keeps_its_limit_and_is_not_pressed)
{
    struct sk_admit_limit l;
    int64_t now = 0;
    sk_admit_init(&l, 50, now);
    /* a trickle: one purchase an interval, idle loop */
    for (int k = 0; k < 50; k++)
        interval(&l, &now, 1, 1 * MS, 0);
    CHECK_EQ(sk_admit_current(&l), SK_ADMIT_START);
    CHECK_EQ(sk_admit_pressed(&l), 0);
    /* a saturated loop with no purchase at all (polls): not pressed */
    interval(&l, &now, 0, 0, 1 * MS);
    CHECK_EQ(sk_admit_pressed(&l), 0);
}

SK_TEST(admit_little_law_raises_a_low_limit_to_what_the_rate_allows)
{
    struct sk_admit_limit l;
    int64_t now = 0;
    sk_admit_init(&l, 50, now);
    /* a stall brings it to the floor */
    for (int i = 0; i < 40; i++)
        sk_admit_begin(&l);
    for (int k = 0; k < 12; k++)
        interval(&l, &now, 0, 0, 0);
    for (int i = 0; i < 40; i++)
        sk_admit_done(&l, 1 * MS);
    CHECK_EQ(sk_admit_current(&l), SK_ADMIT_FLOOR);
    /* then 5000 answered per 100 ms (50,000/s), each in 5 ms, 2 ms
     * passes: budget 48 ms, so 50,000/s x 48 ms = 2400 */
    for (int k = 0; k < 30; k++)
        interval(&l, &now, 5000, 5 * MS, 2 * MS);
    int64_t got = sk_admit_current(&l);
    CHECK_MSG(got >= 2300 && got <= 2400, "limit %lld", (long long)got);
}

SK_TEST(admit_a_busy_loop_alone_does_not_lower_the_limit)
{
    struct sk_admit_limit l;
    int64_t now = 0;
    sk_admit_init(&l, 50, now);
    /* 20 ms passes back to back, each purchase answered two passes later:
     * slow, but no queue a lower limit would shorten */
    sk_admit_pass(&l, 20 * MS, now);
    for (int k = 0; k < 20; k++)
        interval(&l, &now, 300, 41 * MS, 20 * MS);
    CHECK_EQ(sk_admit_current(&l), SK_ADMIT_START);
}
