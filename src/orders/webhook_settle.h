/* webhook_settle.h - when an outbox row may be delivered: the settle of
 * the webhook dispatcher (webhooks.h) on the dispatcher's own monotonic
 * clock. The outbox's row ids grow in insert order but a server store
 * commits them in any order, so a row is taken only settle_ms after a
 * read of the outbox's highest row id returned one at or above it (the
 * row was inserted before that read, so by settle_ms later every row
 * below it has committed or rolled back: no transaction lasts that
 * long). The highest id, not the last row of the page read: rows past a
 * page would only be seen when their page came, each page waiting
 * settle_ms. Counted from the
 * event's created_ms instead, a wall clock that jumped ahead and back
 * held the endpoint for the jump's length (events "from the future"), and
 * one that jumped back (or an event written on a host whose clock lags)
 * let a young gap through. The price: a dispatcher (re)started waits
 * settle_ms before its first delivery. Pure: no I/O, no clock of its own
 * (the caller passes its monotonic milliseconds). */
#ifndef SK_WEBHOOK_SETTLE_H
#define SK_WEBHOOK_SETTLE_H
#include <stdint.h>

#define SK_WH_SETTLE_READS 64

struct sk_wh_settle {
    /* reads that returned rows above every earlier read: rows up to
     * row[i] were inserted before at[i]; oldest first */
    int64_t row[SK_WH_SETTLE_READS], at[SK_WH_SETTLE_READS];
    int n;
};

/* The outbox's highest row id was hi (0: empty) at mono_ms (taken after
 * the read). */
void sk_wh_settle_saw(struct sk_wh_settle *s, int64_t hi, int64_t mono_ms);
/* 1 when a read settle_ms or longer before mono_ms covered row. */
int sk_wh_settle_ready(const struct sk_wh_settle *s, int64_t row, int64_t mono_ms,
                       int64_t settle_ms);
/* Rows up to cursor are done: their reads are forgotten. */
void sk_wh_settle_done(struct sk_wh_settle *s, int64_t cursor);

#endif
