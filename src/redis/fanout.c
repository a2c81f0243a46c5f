/* fanout.c - answers awaited together (fanout.h). */
#include "redis/fanout.h"

void sk_fanout_begin(struct sk_fanout *f, void (*done)(struct sk_fanout *f))
{
    f->pending = 1; /* held until sk_fanout_end: no early done while sending */
    f->failed = 0;
    f->done = done;
}

void sk_fanout_sent(struct sk_fanout *f, int send_rc)
{
    if (send_rc < 0)
        f->failed = 1;
    else
        f->pending++;
}

void sk_fanout_answered(struct sk_fanout *f)
{
    if (--f->pending == 0) f->done(f);
}

void sk_fanout_end(struct sk_fanout *f)
{
    sk_fanout_answered(f);
}
