/* fanout.h - commands whose answers are awaited together (every segment
 * of an activity, say), whatever client sends them. Pure bookkeeping: no
 * I/O, no allocation.
 *
 * The owner embeds one (first member, so done can cast back), calls
 * sk_fanout_begin, passes each send's return code to sk_fanout_sent and
 * calls sk_fanout_answered from each callback, then sk_fanout_end when all
 * are sent. done(f) runs exactly once, after the last answer, possibly
 * inside sk_fanout_end; f->failed is set when a send failed (its callback
 * never runs), and callbacks may set it for a bad answer. The memory is
 * the owner's, freed by done if it likes. */
#ifndef SK_FANOUT_H
#define SK_FANOUT_H

struct sk_fanout {
    int pending, failed;
    void (*done)(struct sk_fanout *f);
};

void sk_fanout_begin(struct sk_fanout *f, void (*done)(struct sk_fanout *f));
void sk_fanout_sent(struct sk_fanout *f, int send_rc);
void sk_fanout_answered(struct sk_fanout *f);
void sk_fanout_end(struct sk_fanout *f);

#endif
