/* seg_stocks.h - every segment's stock of an activity read at once on the
 * async client (one GET per segment, each master answering its own): the
 * SCAN step of the borrow protocol (engine/seg_borrow.h) and the sold-out
 * re-read of a segmented activity. */
#ifndef SK_SEG_STOCKS_H
#define SK_SEG_STOCKS_H
#include <stdint.h>

#include "engine/seg_borrow.h"
#include "redis/fanout.h"
#include "redis/redis_async.h"

struct sk_seg_read;
struct sk_seg_read_slot {
    struct sk_seg_read *rd;
    int seg;
};

/* A read in flight; the owner embeds it and keeps it alive until done. */
struct sk_seg_read {
    struct sk_fanout f; /* first: its done casts back */
    struct sk_seg_stocks *st;
    void (*done)(void *data);
    void *data;
    struct sk_seg_read_slot slot[SK_SEG_MAX];
};

/* Reads st->segments stocks of activity_id into st (reset first); done
 * runs once when every GET answered (st->failed when one could not be
 * sent or got a strange answer), possibly before this returns. */
void sk_seg_read_start(struct sk_seg_read *rd, sk_aredis *ar, uint64_t activity_id,
                       struct sk_seg_stocks *st, void (*done)(void *data), void *data);

#endif
