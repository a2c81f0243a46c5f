/* test_admit_limit.c - the decisions of bounded waiting (http/admit_limit.h),
 * the code serve runs, driven with made-up times instead of a clock: off
 * admits everything; answers within the target never lead to a refusal,
 * however many are in flight and however starved the loop; a burst above
 * the target for less than an interval refuses nothing (CoDel's rule);
 * a standing queue for an interval refuses exactly past rate x target
 * (Little's law); a stalled Redis refuses past the floor; the end of the
 * burst ends the refusals; an overload that returns soon is refused at
 * once (carry-over); "pressed" only when purchases press. */
#include "http/admit_limit.h"
#include "support/harness.h"

#define MS 1000
#define IV SK_ADMIT_INTERVAL_US

/* One interval: n purchases begun and answered sojourn_us later, spread
 * evenly over it, with a loop pass of pass_us every 100 answers and at its
 * end (0: one idle pass at its end). Answers only: the count in flight
 * does not change. */
static void answers(struct sk_admit_limit *l, int64_t *now, int n, int64_t sojourn_us,
                    int64_t pass_us)
{
    int64_t end = *now + IV, step = n > 0 ? IV / n : IV;
    for (int i = 0; i < n; i++) {
        *now += step;
        sk_admit_begin(l, *now - sojourn_us);
        sk_admit_done(l, sojourn_us, *now);
        if (pass_us > 0 && i % 100 == 99) sk_admit_pass(l, pass_us, *now);
    }
    *now = end;
    sk_admit_pass(l, pass_us, *now);
}

/* Asks for room k times; returns how many were refused (the admitted are
 * counted in flight). */
static int ask(struct sk_admit_limit *l, int64_t now, int k)
{
    int refused = 0;
    for (int i = 0; i < k; i++) {
        if (sk_admit_room(l))
            sk_admit_begin(l, now);
        else
            refused++;
    }
    return refused;
}

SK_TEST(admit_off_admits_everything)
{
    struct sk_admit_limit l;
    int64_t now = 0;
    sk_admit_init(&l, 0, now);
    CHECK_EQ(ask(&l, now, 3 * SK_ADMIT_START), 0);
    for (int k = 0; k < 20; k++)
        answers(&l, &now, 1000, 500 * MS, 1 * MS);
    CHECK_EQ(sk_admit_dropping(&l), 0);
    CHECK_EQ(ask(&l, now, 3 * SK_ADMIT_START), 0);
    CHECK_EQ(l.refused_total, 0u);
    CHECK_EQ(sk_admit_pressed(&l), 0);
}

/* Below the target nothing is refused: not with 100,000 in flight (far
 * past any rate x target), not on a loop starved of the CPU (passes of
 * 150 ms, answers at 49 ms), not for a minute of it. */
SK_TEST(admit_never_refuses_while_answers_are_within_the_target)
{
    struct sk_admit_limit l;
    int64_t now = 0;
    sk_admit_init(&l, 50, now);
    CHECK_EQ(ask(&l, now, 100000), 0);
    for (int k = 0; k < 600; k++) {
        answers(&l, &now, 50, 49 * MS, 150 * MS);
        CHECK_EQ(ask(&l, now, 10), 0);
    }
    CHECK_EQ(sk_admit_dropping(&l), 0);
    CHECK_EQ(l.refused_total, 0u);
}

/* CoDel's rule: answers above the target for less than an interval, then
 * one within it, start no refusal; so does an alternation of slow and
 * quick answers (no standing queue: the quickest is in time). */
SK_TEST(admit_a_passing_burst_above_the_target_refuses_nothing)
{
    struct sk_admit_limit l;
    int64_t now = 0;
    sk_admit_init(&l, 50, now);
    CHECK_EQ(ask(&l, now, 50000), 0);
    for (int round = 0; round < 50; round++) {
        /* 90 ms of answers at 200 ms, then one at 10 ms */
        for (int i = 0; i < 90; i++) {
            now += 1 * MS;
            sk_admit_done(&l, 200 * MS, now);
            sk_admit_pass(&l, 1 * MS, now);
            CHECK_EQ(ask(&l, now, 1), 0);
        }
        now += 1 * MS;
        sk_admit_done(&l, 10 * MS, now);
        sk_admit_pass(&l, 1 * MS, now);
    }
    CHECK_EQ(sk_admit_dropping(&l), 0);
    CHECK_EQ(l.refused_total, 0u);
}

/* A standing queue: every answer above the target for an interval. Then,
 * and only then, a purchase is refused, and only past rate x target: the
 * process answered 2,000 per 100 ms (20,000/s), so with a 50 ms target
 * 1,000 may be in flight and the 1,001st is refused. */
SK_TEST(admit_standing_queue_refuses_past_rate_times_target)
{
    struct sk_admit_limit l;
    int64_t now = 0;
    sk_admit_init(&l, 50, now);
    /* the interval that starts the clock: not dropping yet at its end
     * (the first answer above the target came at its first step) */
    answers(&l, &now, 2000, 80 * MS, 1 * MS);
    CHECK_EQ(sk_admit_current(&l), 1000);
    /* its last answer came within the interval of the first: no refusal */
    CHECK_EQ(sk_admit_dropping(&l), 0);
    CHECK_EQ(sk_admit_room(&l), 1);
    answers(&l, &now, 2000, 80 * MS, 1 * MS);
    CHECK_EQ(sk_admit_dropping(&l), 1);
    CHECK_EQ(sk_admit_current(&l), 1000);
    CHECK_EQ(ask(&l, now, 1000), 0);
    CHECK_EQ(ask(&l, now, 7), 7);
    CHECK_EQ(l.refused_total, 7u);
    /* one answered: room for exactly one more */
    now += 1 * MS;
    sk_admit_done(&l, 80 * MS, now);
    CHECK_EQ(ask(&l, now, 2), 1);
    CHECK_EQ(sk_admit_pressed(&l), 1);
}

/* The burst is over: an interval whose answers were all within the target
 * ends the refusals, whatever is in flight; an idle interval does too. */
SK_TEST(admit_answers_in_time_end_the_refusals)
{
    struct sk_admit_limit l;
    int64_t now = 0;
    sk_admit_init(&l, 50, now);
    for (int k = 0; k < 3; k++)
        answers(&l, &now, 2000, 300 * MS, 1 * MS);
    CHECK_EQ(sk_admit_dropping(&l), 1);
    CHECK_EQ(ask(&l, now, 1000), 0);
    CHECK(ask(&l, now, 10) == 10);
    /* still slow: still refusing */
    answers(&l, &now, 2000, 60 * MS, 1 * MS);
    CHECK_EQ(sk_admit_dropping(&l), 1);
    /* all in time for an interval: refusals stop, even past the limit */
    answers(&l, &now, 2000, 20 * MS, 1 * MS);
    CHECK_EQ(sk_admit_dropping(&l), 0);
    CHECK_EQ(ask(&l, now, 10000), 0);
    /* again a standing queue, the 11,000 in flight answered late, then an
     * idle interval (nothing in flight, nothing answered) */
    for (int k = 0; k < 3; k++)
        answers(&l, &now, 2000, 300 * MS, 1 * MS);
    CHECK_EQ(sk_admit_dropping(&l), 1);
    while (l.inflight > 0)
        sk_admit_done(&l, 300 * MS, now);
    CHECK_EQ(sk_admit_dropping(&l), 1);
    answers(&l, &now, 0, 0, 0); /* the interval of those late answers */
    CHECK_EQ(sk_admit_dropping(&l), 1);
    answers(&l, &now, 0, 0, 0);
    CHECK_EQ(sk_admit_dropping(&l), 0);
    CHECK_EQ(sk_admit_pressed(&l), 0);
}

/* A loop busy all along is its own queue: the purchases wait for the
 * loop, and a refusal would cost it about what an admission does. However
 * late the answers, nothing is refused while the loop is saturated; once
 * it has room again and the wait is behind it, the rules apply. */
SK_TEST(admit_a_saturated_loop_refuses_nothing)
{
    struct sk_admit_limit l;
    int64_t now = 0;
    sk_admit_init(&l, 50, now);
    CHECK_EQ(ask(&l, now, 20000), 0);
    for (int k = 0; k < 20; k++) {
        /* 2,000 answers at 300 ms, the loop working 99 of every 100 ms */
        answers(&l, &now, 2000, 300 * MS, 99 * MS / 21);
        CHECK_EQ(sk_admit_dropping(&l), 0);
        CHECK_EQ(ask(&l, now, 100), 0);
        CHECK_EQ(sk_admit_pressed(&l), 1); /* polls wait meanwhile */
    }
    CHECK_EQ(l.refused_total, 0u);
    /* the same late answers with the loop mostly idle: a queue behind it */
    for (int k = 0; k < 3; k++)
        answers(&l, &now, 2000, 300 * MS, 1 * MS);
    CHECK_EQ(sk_admit_dropping(&l), 1);
    CHECK(ask(&l, now, 100) > 0);
    /* and saturated again: the refusals stop */
    answers(&l, &now, 2000, 300 * MS, 99 * MS / 21);
    answers(&l, &now, 2000, 300 * MS, 99 * MS / 21);
    CHECK_EQ(sk_admit_dropping(&l), 0);
}

/* The limit follows the process's capacity, not what it answered while
 * refusing: refusals take the loop's time too, so an interval in which it
 * answered only 500 purchases (20,000/s before) keeps the limit at the
 * best recent rate x target (1,000), not 250, for a second; then it
 * follows. A stall (nothing answered while purchases wait) forgets the
 * past at once. */
SK_TEST(admit_the_limit_is_the_best_recent_rate_not_the_last)
{
    struct sk_admit_limit l;
    int64_t now = 0;
    sk_admit_init(&l, 50, now);
    for (int k = 0; k < 3; k++)
        answers(&l, &now, 2000, 80 * MS, 1 * MS);
    CHECK_EQ(sk_admit_dropping(&l), 1);
    CHECK_EQ(sk_admit_current(&l), 1000);
    answers(&l, &now, 500, 80 * MS, 1 * MS);
    CHECK_EQ(sk_admit_current(&l), 1000);
    CHECK_EQ(ask(&l, now, 1000), 0);
    CHECK_EQ(ask(&l, now, 5), 5);
    /* a second of intervals at 500: the limit comes down to 250 */
    for (int k = 0; k < SK_ADMIT_RATES; k++)
        answers(&l, &now, 500, 80 * MS, 1 * MS);
    CHECK_EQ(sk_admit_current(&l), 250);
    /* back up at once when the process answers more */
    answers(&l, &now, 3000, 80 * MS, 1 * MS);
    CHECK_EQ(sk_admit_current(&l), 1500);
    /* a stall: an interval with purchases out and none answered (two
     * passes: the first closes the interval answers() left open) */
    for (int k = 0; k < 2; k++) {
        now += IV;
        sk_admit_pass(&l, 0, now);
    }
    CHECK_EQ(sk_admit_current(&l), SK_ADMIT_FLOOR);
}

/* CoDel's carry-over at a sustained overload: the refusals empty the
 * queue, an interval of answers in time ends dropping, and the queue grows
 * back. The first late answer after that resumes refusing at once (not a
 * whole interval later); long after, or after an idle interval (the burst
 * over), a late answer needs its interval again. */
SK_TEST(admit_an_overload_that_returns_is_refused_at_once)
{
    struct sk_admit_limit l;
    int64_t now = 0;
    sk_admit_init(&l, 50, now);
    for (int k = 0; k < 3; k++)
        answers(&l, &now, 2000, 300 * MS, 1 * MS);
    CHECK_EQ(sk_admit_dropping(&l), 1);
    answers(&l, &now, 2000, 20 * MS, 1 * MS);
    CHECK_EQ(sk_admit_dropping(&l), 0);
    /* back within 16 intervals: one late answer and it drops */
    answers(&l, &now, 2000, 20 * MS, 1 * MS);
    now += 1 * MS;
    sk_admit_done(&l, 60 * MS, now);
    CHECK_EQ(sk_admit_dropping(&l), 1);
    CHECK_EQ(ask(&l, now, 1000), 0);
    CHECK_EQ(ask(&l, now, 3), 3);
    while (l.inflight > 0)
        sk_admit_done(&l, 20 * MS, now);
    /* the interval with the late answer closes dropping, the next ends it */
    answers(&l, &now, 2000, 20 * MS, 1 * MS);
    CHECK_EQ(sk_admit_dropping(&l), 1);
    answers(&l, &now, 2000, 20 * MS, 1 * MS);
    CHECK_EQ(sk_admit_dropping(&l), 0);
    /* 16 intervals of answers in time: the next late one starts the clock */
    for (int k = 0; k < 16; k++)
        answers(&l, &now, 2000, 20 * MS, 1 * MS);
    now += 1 * MS;
    sk_admit_done(&l, 60 * MS, now);
    CHECK_EQ(sk_admit_dropping(&l), 0);
    /* dropping again, ended by answers in time, then an idle interval */
    for (int k = 0; k < 3; k++)
        answers(&l, &now, 2000, 300 * MS, 1 * MS);
    CHECK_EQ(sk_admit_dropping(&l), 1);
    /* (the intervals no longer start where answers() starts: two calls
     * make sure one whole interval held only what the second brought) */
    answers(&l, &now, 2000, 20 * MS, 1 * MS);
    answers(&l, &now, 2000, 20 * MS, 1 * MS);
    CHECK_EQ(sk_admit_dropping(&l), 0);
    answers(&l, &now, 0, 0, 0);
    answers(&l, &now, 0, 0, 0);
    now += 1 * MS;
    sk_admit_done(&l, 60 * MS, now);
    CHECK_EQ(sk_admit_dropping(&l), 0);
}

/* Redis stalls: 40 purchases out, nothing comes back. Within the target
 * nothing is refused; once the silence has outlasted the target by an
 * interval, the limit is the floor and the 17th in flight is refused. The
 * first answers (slow ones, the stall's) keep it refusing; answers in time
 * end it. */
SK_TEST(admit_stalled_redis_refuses_past_the_floor)
{
    struct sk_admit_limit l;
    int64_t now = 0;
    sk_admit_init(&l, 50, now);
    answers(&l, &now, 100, 1 * MS, 0);
    int64_t stalled_at = now;
    for (int i = 0; i < 40; i++) {
        CHECK_EQ(sk_admit_room(&l), 1);
        sk_admit_begin(&l, now);
    }
    /* 140 ms of silence (target 50 + interval 100, less one pass) */
    for (int t = 0; t < 14; t++) {
        now += 10 * MS;
        sk_admit_pass(&l, 0, now);
        CHECK_EQ(sk_admit_room(&l), 1); /* asked, not taken */
    }
    for (int t = 0; t < 30; t++) {
        now += 10 * MS;
        sk_admit_pass(&l, 0, now);
    }
    CHECK_EQ(sk_admit_dropping(&l), 1);
    CHECK_EQ(sk_admit_current(&l), SK_ADMIT_FLOOR);
    CHECK_EQ(sk_admit_room(&l), 0);
    CHECK_EQ(sk_admit_pressed(&l), 1);
    /* Redis answers again: the 40 come back late (still dropping), then
     * new ones in time */
    for (int i = 0; i < 40; i++)
        sk_admit_done(&l, now - stalled_at, now);
    CHECK_EQ(sk_admit_dropping(&l), 1);
    answers(&l, &now, 500, 2 * MS, 0);
    answers(&l, &now, 500, 2 * MS, 0);
    CHECK_EQ(sk_admit_dropping(&l), 0);
    CHECK_EQ(ask(&l, now, 5000), 0);
}

/* "Pressed" (the poll budget binds): refusals, or a saturated loop while
 * purchases come; never on a quiet node, nor for a loop busy with no
 * purchase at all. */
SK_TEST(admit_pressed_only_while_purchases_press)
{
    struct sk_admit_limit l;
    int64_t now = 0;
    sk_admit_init(&l, 50, now);
    for (int k = 0; k < 50; k++)
        answers(&l, &now, 1, 1 * MS, 0);
    CHECK_EQ(sk_admit_pressed(&l), 0);
    /* a loop working all the time, no purchase (polls): not pressed */
    for (int t = 0; t < 20; t++) {
        now += 5 * MS;
        sk_admit_pass(&l, 5 * MS, now);
    }
    CHECK_EQ(sk_admit_pressed(&l), 0);
    /* the same loop while purchases come, quickly answered: pressed */
    for (int t = 0; t < 20; t++) {
        now += 5 * MS;
        sk_admit_begin(&l, now - 2 * MS);
        sk_admit_done(&l, 2 * MS, now);
        sk_admit_pass(&l, 5 * MS, now);
    }
    CHECK_EQ(sk_admit_pressed(&l), 1);
    CHECK_EQ(sk_admit_dropping(&l), 0);
    /* quiet again */
    answers(&l, &now, 1, 1 * MS, 0);
    CHECK_EQ(sk_admit_pressed(&l), 0);
}
