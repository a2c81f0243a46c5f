/* seg_settle.h - rolling forward the stock transfers in transit of a
 * segmented activity (docs/segments.md), written once without I/O: the
 * protocol says which command to send next and reads its reply; the
 * blocking client drives it in sk_seg_settle, the async one inside the
 * segmented preheat of serve (seg_preheat.h).
 *
 * For each segment: HGETALL its lending record (xout: transfer id ->
 * "<to>:<units>[:<ms>]"); for each entry that parses, xfer_in.lua at the
 * receiver (applies it at most once per id), then HDEL of the entry. An
 * entry with a receiver out of range or no units is left for an operator;
 * one whose receiver is fenced is left in transit unless `recovering`
 * (the recovery of that segment settles first, docs/recovery.md). */
#ifndef SK_SEG_SETTLE_H
#define SK_SEG_SETTLE_H
#include <stddef.h>
#include <stdint.h>

#include <hiredis.h>

#include "engine/seg_cmd.h"
#include "engine/stock.h"

struct sk_seg_xfer {
    char id[SK_XFER_ID_MAX];
    int to;
    int64_t units;
};

enum sk_seg_settle_step {
    SK_SETTLE_LIST,
    SK_SETTLE_APPLY,
    SK_SETTLE_FORGET,
    SK_SETTLE_DONE,
    SK_SETTLE_FAILED
};

struct sk_seg_settle {
    uint64_t aid;
    int segments, recovering;
    enum sk_seg_settle_step step;
    int seg;               /* the segment whose record is walked */
    struct sk_seg_xfer *x; /* its entries (heap) */
    size_t n, i;           /* how many, and the one at hand */
    int64_t units;         /* units applied now */
    char errstr[96];
};

void sk_seg_settle_init(struct sk_seg_settle *s, uint64_t activity_id, int segments,
                        int recovering);
void sk_seg_settle_free(struct sk_seg_settle *s);
/* The command the step needs (not for DONE or FAILED). */
void sk_seg_settle_cmd(const struct sk_seg_settle *s, struct sk_seg_cmd *c);
/* Its reply (NULL: none came); returns the next step. */
enum sk_seg_settle_step sk_seg_settle_feed(struct sk_seg_settle *s, const redisReply *rep);

/* The receiving half of a transfer: xfer_in.lua at segment to for transfer
 * id (units qty; recovering: let it into a fenced segment). c keeps
 * pointers to id. */
void sk_seg_xfer_in_cmd(struct sk_seg_cmd *c, uint64_t activity_id, int to, const char *id,
                        int64_t qty, int recovering);
/* Its reply: *applied 1 applied now, 0 before, -1 refused because the
 * receiver is fenced. Returns 0, SK_EPROTO (not its reply) or SK_ESTATE
 * (refused otherwise). */
int sk_seg_xfer_in_read(const redisReply *rep, int *applied);

/* Parses an xout entry's value "<to>:<units>[...]". Returns 0 or SK_EINVAL. */
int sk_seg_xout_parse(const char *value, int *to, int64_t *units);

#endif
