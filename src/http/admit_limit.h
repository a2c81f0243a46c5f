/* admit_limit.h - bounded waiting for purchases in one HTTP process: how
 * many purchases may be in flight (read, waiting in a batch or for Redis)
 * so that each is answered within the admission target (--admit-target-ms),
 * adapted every interval from what the process measured. No I/O: the
 * caller passes the times (docs/overload.md, docs/design.md "Shedding
 * load").
 *
 * The limit is raised by Little's law on the measured service: L = rate x
 * budget, where rate is the purchases answered per second in the last
 * interval (100 ms) and budget is the target less the longest loop pass of
 * that interval (a request may sit in the kernel for one pass before the
 * loop reads it). It is lowered by CoDel's signal: when even the quickest
 * purchase of an interval spent longer than that budget in the admission
 * pipeline (from its handler to its answer, less the two loop passes it
 * spans: a standing queue, not a passing burst, nor a busy loop that a
 * lower limit would not make faster), the limit shrinks in proportion
 * (budget / that time). Each new figure is averaged with the old one (half
 * each). An interval in which nothing finished while purchases waited
 * halves it (Redis stalled); an idle one leaves it alone. The limit stays
 * within [SK_ADMIT_FLOOR, SK_ADMIT_CEIL].
 *
 * A purchase past the limit is refused at once (503 overloaded, reason code
 * OVERLOADED of codes.def), before any Redis work: refusing costs the
 * request's read and write, admitting a Redis call as well.
 *
 * "Pressed" (sk_admit_pressed) says whether work that is not a purchase
 * (an order poll) would slow purchases now: a purchase was refused in the
 * last interval, or the loop was busy for most of it while purchases came. */
#ifndef SK_ADMIT_LIMIT_H
#define SK_ADMIT_LIMIT_H
#include <stdint.h>

#define SK_ADMIT_INTERVAL_US 100000
#define SK_ADMIT_FLOOR 16
#define SK_ADMIT_CEIL 1000000
/* Where the limit starts: a sale's first burst is admitted up to this,
 * then the first intervals measure what the process can really do. */
#define SK_ADMIT_START 4096
/* The loop is saturated when it was busy this share (per mille) of an
 * interval. */
#define SK_ADMIT_BUSY_PERMILLE 900

struct sk_admit_limit {
    int64_t target_us; /* 0: off (everything is admitted) */
    double limit;      /* purchases in flight allowed now */
    int64_t inflight;  /* purchases admitted, not answered yet */
    /* the interval being measured */
    int64_t since_us;     /* its start (sk_mono_us) */
    uint64_t done;        /* purchases answered in it */
    uint64_t refused;     /* purchases refused in it */
    int64_t min_sojourn;  /* quickest answered purchase in it (us; -1: none) */
    int64_t max_pass_us;  /* longest loop pass in it */
    int64_t busy_us;      /* loop time spent working in it */
    int64_t last_pass_us; /* the last loop pass's work */
    /* the last interval's verdict (sk_admit_pressed) */
    int pressed;
    /* counts since the start, for tests and the log */
    uint64_t refused_total, admitted_total;
};

/* Sets l up (everything zero but the limit); target_ms 0 turns it off. */
void sk_admit_init(struct sk_admit_limit *l, int64_t target_ms, int64_t now_us);
/* A new target (a reload); the limit measured so far stays. */
void sk_admit_set_target(struct sk_admit_limit *l, int64_t target_ms);

/* A purchase asks to wait: 1 when there is room (the caller then counts
 * it with sk_admit_begin), 0 when it must be refused now (counted). */
int sk_admit_room(struct sk_admit_limit *l);
/* An admitted purchase is in flight until sk_admit_done. */
void sk_admit_begin(struct sk_admit_limit *l);
/* An admitted purchase was answered sojourn_us after its handler ran. */
void sk_admit_done(struct sk_admit_limit *l, int64_t sojourn_us);
/* One loop pass ended: pass_us is how long the loop worked in it (not
 * counting its sleep). Every SK_ADMIT_INTERVAL_US the limit is set anew. */
void sk_admit_pass(struct sk_admit_limit *l, int64_t pass_us, int64_t now_us);

/* 1 when other work would slow purchases now (see above). */
int sk_admit_pressed(const struct sk_admit_limit *l);
/* The limit as a whole number of purchases. */
int64_t sk_admit_current(const struct sk_admit_limit *l);

#endif
