/* admit_limit.c - bounded waiting for purchases: CoDel's rule decides when
 * to refuse, Little's law how many to keep (admit_limit.h). */
#include "http/admit_limit.h"

static void window_reset(struct sk_admit_limit *l, int64_t now_us)
{
    l->since_us = now_us;
    l->done = 0;
    l->refused = 0;
    l->max_sojourn = 0;
    l->busy_us = 0;
    l->pass_max = 0;
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
    if (!l->target_us) l->dropping = 0;
}

int sk_admit_room(struct sk_admit_limit *l)
{
    if (!l->dropping || (double)l->inflight < l->limit) return 1;
    l->refused++;
    l->refused_total++;
    return 0;
}

void sk_admit_begin(struct sk_admit_limit *l, int64_t now_us)
{
    if (l->inflight == 0) l->last_progress_us = now_us;
    l->inflight++;
    l->admitted_total++;
}

/* CoDel's clock: one sojourn seen at now_us. */
static void sojourn_seen(struct sk_admit_limit *l, int64_t sojourn_us, int64_t now_us)
{
    if (!l->target_us || sojourn_us < l->target_us + l->slack_us || l->loop_bound) {
        l->first_above_us = 0;
        return;
    }
    if (l->left_us && now_us - l->left_us < SK_ADMIT_REENTER_US)
        l->dropping = 1; /* carry-over: the same overload, back */
    else if (!l->first_above_us)
        l->first_above_us = now_us + SK_ADMIT_INTERVAL_US;
    else if (now_us >= l->first_above_us)
        l->dropping = 1;
}

void sk_admit_done(struct sk_admit_limit *l, int64_t sojourn_us, int64_t now_us)
{
    if (l->inflight > 0) l->inflight--;
    l->done++;
    l->last_progress_us = now_us;
    if (sojourn_us > l->max_sojourn) l->max_sojourn = sojourn_us;
    sojourn_seen(l, sojourn_us, now_us);
}

void sk_admit_pass(struct sk_admit_limit *l, int64_t pass_us, int64_t now_us)
{
    if (pass_us < 0) pass_us = 0;
    l->busy_us += pass_us;
    if (pass_us > l->pass_max) l->pass_max = pass_us;
    /* purchases out and nothing back for longer than the target: the
     * oldest has waited at least that long (a stalled Redis) */
    int64_t silent = now_us - l->last_progress_us;
    if (l->inflight > 0 && l->target_us && silent >= l->target_us) sojourn_seen(l, silent, now_us);
    int64_t elapsed = now_us - l->since_us;
    if (elapsed < SK_ADMIT_INTERVAL_US) return;
    /* Little's law: the best of the recent intervals' answers per second,
     * times the target; nothing answered while purchases waited: the past
     * is forgotten, the floor; idle: nothing learnt */
    if (l->done > 0 || l->inflight > 0) {
        if (l->done == 0)
            for (int i = 0; i < SK_ADMIT_RATES; i++)
                l->rates[i] = 0;
        l->rates[l->rate_at] = (double)l->done * 1e6 / (double)elapsed;
        l->rate_at = (l->rate_at + 1) % SK_ADMIT_RATES;
        double best = 0;
        for (int i = 0; i < SK_ADMIT_RATES; i++)
            if (l->rates[i] > best) best = l->rates[i];
        double next = best * (double)l->target_us / 1e6;
        if (next < SK_ADMIT_FLOOR) next = SK_ADMIT_FLOOR;
        if (next > SK_ADMIT_CEIL) next = SK_ADMIT_CEIL;
        l->limit = next;
    }
    /* saturated: the loop worked for most of the interval while purchases
     * came (an idle node answers every poll) */
    int idle = l->done == 0 && l->inflight == 0;
    int busy = l->busy_us * 1000 >= elapsed * SK_ADMIT_BUSY_PERMILLE;
    /* dropping ends with an interval whose answers were all in time, or
     * an idle one, or one in which the loop itself was the queue */
    l->loop_bound = busy && !idle;
    if (l->dropping &&
        (idle || l->loop_bound || (l->done > 0 && l->max_sojourn < l->target_us + l->slack_us))) {
        l->dropping = 0;
        l->first_above_us = 0;
        l->left_us = idle || l->loop_bound ? 0 : now_us;
    } else if (idle || l->loop_bound) {
        l->left_us = 0; /* the next overload waits its interval */
    }
    l->pressed = l->target_us > 0 && (l->dropping || l->refused > 0 || l->loop_bound);
    /* a purchase waits for up to two passes of the loop (its request's,
     * its reply's) whatever is in flight: late is later than that */
    l->slack_us = 2 * l->pass_max;
    window_reset(l, now_us);
}

int sk_admit_pressed(const struct sk_admit_limit *l)
{
    return l->pressed;
}

int sk_admit_dropping(const struct sk_admit_limit *l)
{
    return l->dropping;
}

int64_t sk_admit_current(const struct sk_admit_limit *l)
{
    return (int64_t)l->limit;
}
