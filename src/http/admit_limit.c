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
    if (!l->target_us || sojourn_us < l->target_us) {
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
    /* purchases out and nothing back for longer than the target: the
     * oldest has waited at least that long (a stalled Redis) */
    int64_t silent = now_us - l->last_progress_us;
    if (l->inflight > 0 && l->target_us && silent >= l->target_us) sojourn_seen(l, silent, now_us);
    int64_t elapsed = now_us - l->since_us;
    if (elapsed < SK_ADMIT_INTERVAL_US) return;
    /* Little's law: what the last interval answered per second, times the
     * target; nothing answered while purchases waited: the floor; idle:
     * nothing learnt */
    if (l->done > 0 || l->inflight > 0) {
        double next = (double)l->done * (double)l->target_us / (double)elapsed;
        if (next < SK_ADMIT_FLOOR) next = SK_ADMIT_FLOOR;
        if (next > SK_ADMIT_CEIL) next = SK_ADMIT_CEIL;
        l->limit = next;
    }
    /* dropping ends with an interval whose answers were all in time, or
     * an idle one */
    int idle = l->done == 0 && l->inflight == 0;
    if (l->dropping && (idle || (l->done > 0 && l->max_sojourn < l->target_us))) {
        l->dropping = 0;
        l->first_above_us = 0;
        l->left_us = idle ? 0 : now_us;
    } else if (idle) {
        l->left_us = 0; /* the burst is over: the next one waits an interval */
    }
    /* saturated: the loop worked for most of the interval while purchases
     * came (an idle node answers every poll) */
    int busy = l->busy_us * 1000 >= elapsed * SK_ADMIT_BUSY_PERMILLE;
    l->pressed = l->target_us > 0 &&
                 (l->dropping || l->refused > 0 || (busy && (l->done > 0 || l->inflight > 0)));
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
