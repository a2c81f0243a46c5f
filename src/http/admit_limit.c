/* admit_limit.c - the adaptive limit of purchases in flight (admit_limit.h). */
#include "http/admit_limit.h"

static void window_reset(struct sk_admit_limit *l, int64_t now_us)
{
    l->since_us = now_us;
    l->done = 0;
    l->refused = 0;
    l->min_sojourn = -1;
    l->max_pass_us = 0;
    l->busy_us = 0;
}

void sk_admit_init(struct sk_admit_limit *l, int64_t target_ms, int64_t now_us)
{
    *l = (struct sk_admit_limit){0};
    l->limit = SK_ADMIT_START;
    sk_admit_set_target(l, target_ms);
    window_reset(l, now_us);
}

void sk_admit_set_target(struct sk_admit_limit *l, int64_t target_ms)
{
    l->target_us = target_ms > 0 ? target_ms * 1000 : 0;
}

int sk_admit_room(struct sk_admit_limit *l)
{
    if (l->target_us <= 0 || (double)l->inflight < l->limit) return 1;
    l->refused++;
    l->refused_total++;
    return 0;
}

void sk_admit_begin(struct sk_admit_limit *l)
{
    l->inflight++;
    l->admitted_total++;
}

void sk_admit_done(struct sk_admit_limit *l, int64_t sojourn_us)
{
    if (l->inflight > 0) l->inflight--;
    l->done++;
    /* the loop's own passes (the one that read it, the one that answers
     * it) are no queue a limit can shorten: refusals take them too */
    sojourn_us -= 2 * l->last_pass_us;
    if (sojourn_us < 0) sojourn_us = 0;
    if (l->min_sojourn < 0 || sojourn_us < l->min_sojourn) l->min_sojourn = sojourn_us;
}

/* The limit the interval just measured asks for, when something was
 * answered in it. busy: the loop worked for most of the interval. */
static double measured(const struct sk_admit_limit *l, int64_t elapsed, int busy)
{
    /* the time a purchase may spend in the process: the target less the
     * longest time a request sat unread behind a loop pass (at least a
     * quarter of the target, so one long pass cannot close the door) */
    int64_t budget = l->target_us - l->max_pass_us;
    if (budget < l->target_us / 4) budget = l->target_us / 4;
    double little = (double)l->done * (double)budget / (double)elapsed;
    /* CoDel: even the quickest one waited past its budget: a standing
     * queue; shrink in proportion */
    if (l->min_sojourn > budget) {
        double shrunk = l->limit * (double)budget / (double)l->min_sojourn;
        return shrunk < little ? shrunk : little;
    }
    /* Little's law only raises it: below saturation the rate measured is
     * the demand's (a quiet minute must not shut the door on the next
     * burst), and at saturation a long loop pass is no queue a lower limit
     * would shorten (refusals cost the loop a read and a write too) */
    (void)busy;
    return little > l->limit ? little : l->limit;
}

void sk_admit_pass(struct sk_admit_limit *l, int64_t pass_us, int64_t now_us)
{
    if (pass_us < 0) pass_us = 0;
    l->last_pass_us = pass_us;
    if (pass_us > l->max_pass_us) l->max_pass_us = pass_us;
    l->busy_us += pass_us;
    int64_t elapsed = now_us - l->since_us;
    if (elapsed < SK_ADMIT_INTERVAL_US) return;
    /* saturated: the loop worked for most of the interval while purchases
     * came (an idle node answers every poll) */
    int busy = l->busy_us * 1000 >= elapsed * SK_ADMIT_BUSY_PERMILLE;
    l->pressed = l->target_us > 0 && (l->refused > 0 || (busy && (l->done > 0 || l->inflight > 0)));
    /* nothing came back while purchases waited (Redis stalled, or slower
     * than the interval): half at once; not when the loop itself did not
     * run for that long (a starved process); idle: nothing learnt */
    int stalled = l->done == 0 && l->inflight > 0 && elapsed < 2 * SK_ADMIT_INTERVAL_US;
    if (l->target_us > 0 && (l->done > 0 || stalled)) {
        double next = l->done > 0 ? (l->limit + measured(l, elapsed, busy)) / 2 : l->limit / 2;
        if (next < SK_ADMIT_FLOOR) next = SK_ADMIT_FLOOR;
        if (next > SK_ADMIT_CEIL) next = SK_ADMIT_CEIL;
        l->limit = next;
    }
    window_reset(l, now_us);
}

int sk_admit_pressed(const struct sk_admit_limit *l)
{
    return l->pressed;
}

int64_t sk_admit_current(const struct sk_admit_limit *l)
{
    return (int64_t)l->limit;
}
