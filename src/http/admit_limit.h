/* admit_limit.h - bounded waiting for purchases in one HTTP process: when
 * purchases stop being answered within the admission target
 * (--admit-target-ms), refuse at once what would wait longer. No I/O: the
 * caller passes the times (docs/overload.md, docs/design.md "Shedding
 * load").
 *
 * Two rules, both needed for a refusal:
 *
 * 0. The queue must be one a refusal shortens. A refusal costs the loop
 *    42-81 % of what an admission costs it (the request's read, parse and
 *    write; the admission adds its share of a pipelined Redis call),
 *    so when the loop itself was busy for most of the last interval
 *    (SK_ADMIT_BUSY_PERMILLE: the purchases wait for the loop, in the
 *    kernel's socket buffers and the loop's own queue) refusing would only
 *    trade admissions for refusals at the same rate and leave the wait as
 *    it is: nothing is refused in the next interval. What bounded waiting
 *    sheds is a wait behind the loop: Redis slow, stalled or far, the
 *    batch pipeline full.
 *
 *    For the same reason "late" means later than the target plus two of
 *    the last interval's longest loop passes: a purchase waits for the
 *    pass that reads it and the pass that reads its reply, however few
 *    are in flight.
 *
 * 1. CoDel's (Nichols and Jacobson, "Controlling Queue Delay", 2012): the
 *    process is "dropping" only once the sojourn of its purchases (from the
 *    handler to the answer) has stayed above the target for a whole
 *    interval (SK_ADMIT_INTERVAL_US): the first answer above the target
 *    starts the clock, any answer below it stops it. A passing burst, a
 *    slow loop pass or a process starved of the CPU for a moment is no
 *    standing queue and refuses nothing. Purchases out while nothing comes
 *    back count as answers of the age of that silence (a stalled Redis is
 *    a standing queue though nothing is answered). Dropping ends at the end
 *    of an interval whose answers were all within the target, or that was
 *    idle. CoDel's carry-over: an answer above the target within
 *    SK_ADMIT_REENTER_US of a drop state that ended with answers in time
 *    (not idle) starts dropping at once: the refusals had emptied the
 *    queue, not the burst, and waiting a whole interval again would let
 *    the queue grow back every other interval at sustained overload.
 *
 * 2. Little's law (L = rate x wait): while dropping, a purchase is refused
 *    only when those already in flight would keep it waiting longer than
 *    the target, i.e. when in flight >= limit = rate x target, where rate
 *    is the most purchases answered per second in one of the last
 *    SK_ADMIT_RATES intervals (the process's capacity, at least
 *    SK_ADMIT_FLOOR, so a stalled process still lets a few probe it). The
 *    best recent interval, not the last one: refusals cost the loop time
 *    too, so while refusing the process answers fewer purchases, and a
 *    limit that followed them down would refuse more and more of what it
 *    could have answered. An interval in which purchases waited and none
 *    was answered forgets the past ones (a stalled Redis has no capacity).
 *
 * A purchase refused costs the request's read and write (503 overloaded,
 * reason code OVERLOADED of codes.def) and no Redis work; admitted, a Redis
 * call as well.
 *
 * "Pressed" (sk_admit_pressed) says whether work that is not a purchase
 * (an order poll) would slow purchases now: the last interval ended
 * dropping or with purchases refused, or the loop was busy for most of it
 * while purchases came. */
#ifndef SK_ADMIT_LIMIT_H
#define SK_ADMIT_LIMIT_H
#include <stdint.h>

#define SK_ADMIT_INTERVAL_US 100000
#define SK_ADMIT_FLOOR 16
#define SK_ADMIT_CEIL 1000000
/* The limit before anything was measured (it binds only while dropping,
 * and dropping needs an interval of answers: by then it is measured). */
#define SK_ADMIT_START 4096
/* The loop is saturated when it was busy this share (per mille) of an
 * interval. */
#define SK_ADMIT_BUSY_PERMILLE 900
/* Intervals whose best rate sets the limit (1 s). */
#define SK_ADMIT_RATES 10
/* How long after dropping ended a late answer resumes it at once (RFC
 * 8289's "recently dropping": 16 intervals). */
#define SK_ADMIT_REENTER_US (16 * SK_ADMIT_INTERVAL_US)

struct sk_admit_limit {
    int64_t target_us;            /* 0: off (everything is admitted) */
    double limit;                 /* purchases in flight allowed while dropping */
    double rates[SK_ADMIT_RATES]; /* purchases answered per second, recent
                                     intervals (a ring; 0: none measured) */
    int rate_at;                  /* the ring's next slot */
    int64_t inflight;             /* purchases admitted, not answered yet */
    /* CoDel's state */
    int dropping;             /* refusals allowed (rule 1) */
    int64_t first_above_us;   /* 0: the last answer was within the target;
                                 else when dropping starts if none is */
    int64_t last_progress_us; /* the last answer, or the first purchase out
                                 after none was */
    int64_t left_us;          /* when dropping last ended with answers in
                                 time (0: never, or an idle interval since) */
    /* the interval being measured */
    int64_t since_us;    /* its start (sk_mono_us) */
    uint64_t done;       /* purchases answered in it */
    uint64_t refused;    /* purchases refused in it */
    int64_t max_sojourn; /* slowest answered purchase in it (us) */
    int64_t busy_us;     /* loop time spent working in it */
    int64_t pass_max;    /* its longest loop pass (us) */
    int64_t slack_us;    /* two of the last interval's longest passes: the
                            wait of a purchase that no refusal shortens */
    /* the last interval's verdicts: other work would slow purchases
     * (sk_admit_pressed); the loop was busy all along (its own queue) */
    int pressed, loop_bound;
    /* counts since the start, for tests and the log */
    uint64_t refused_total, admitted_total;
};

/* Sets l up (everything zero but the limit); target_ms 0 turns it off. */
void sk_admit_init(struct sk_admit_limit *l, int64_t target_ms, int64_t now_us);
/* A new target (a reload); what was measured so far stays. */
void sk_admit_set_target(struct sk_admit_limit *l, int64_t target_ms);

/* A purchase asks to wait: 1 when it may (the caller then counts it with
 * sk_admit_begin), 0 when it must be refused now (counted). */
int sk_admit_room(struct sk_admit_limit *l);
/* An admitted purchase is in flight from now_us until sk_admit_done. */
void sk_admit_begin(struct sk_admit_limit *l, int64_t now_us);
/* An admitted purchase was answered at now_us, sojourn_us after its
 * handler ran. */
void sk_admit_done(struct sk_admit_limit *l, int64_t sojourn_us, int64_t now_us);
/* One loop pass ended at now_us: pass_us is how long the loop worked in it
 * (not counting its sleep). Every SK_ADMIT_INTERVAL_US the limit is set
 * anew. */
void sk_admit_pass(struct sk_admit_limit *l, int64_t pass_us, int64_t now_us);

/* 1 when other work would slow purchases now (see above). */
int sk_admit_pressed(const struct sk_admit_limit *l);
/* 1 while refusals are allowed (rule 1). */
int sk_admit_dropping(const struct sk_admit_limit *l);
/* The limit as a whole number of purchases. */
int64_t sk_admit_current(const struct sk_admit_limit *l);

#endif
