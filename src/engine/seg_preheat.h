/* seg_preheat.h - the preheat of a segmented activity (docs/segments.md),
 * written once without I/O: the protocol says which command to send next
 * and reads its reply. The blocking client drives it in sk_seg_preheat
 * (the CLI, the tests), the async one in serve's admin route.
 *
 * The walk: the base meta's segment count (a changed count is refused: it
 * would strand stock) and store identity (another store's is refused); a forced preheat then
 * settles the transfers in transit (seg_settle.h: it restarts the transfer counters); every
 * segment's state (a fenced segment, or one gone while the database holds
 * orders, answers RECOVERING before anything is written; an open one
 * refuses a forced preheat); each segment's share written in order (a
 * forced one keeps what each segment's buyers hold and shares the rest);
 * and the base meta last, with the segment count that routes purchases. */
#ifndef SK_SEG_PREHEAT_H
#define SK_SEG_PREHEAT_H
#include <stdint.h>

#include <hiredis.h>

#include "engine/seg_borrow.h"
#include "engine/seg_cmd.h"
#include "engine/seg_settle.h"
#include "engine/stock.h"

enum sk_seg_preheat_step {
    SK_SPH_COUNT,   /* HMGET of the base meta's segment count and store identity */
    SK_SPH_SETTLE,  /* the settle walk (p->settle) */
    SK_SPH_STATE,   /* state.lua of segment p->seg */
    SK_SPH_WRITE,   /* preheat.lua of segment p->seg */
    SK_SPH_BASE,    /* HSET of the base meta */
    SK_SPH_BASE_WR, /* the waiting room's fields of the base meta */
    SK_SPH_STAMP,   /* nothing written (live stock everywhere): HSETNX of the base
                       meta's store identity (one preheated before identities) */
    SK_SPH_DONE,    /* p->rc answers (p->stock: the stock now, -1 unknown) */
    SK_SPH_FAILED,  /* a reply that was not one: p->errstr */
};

struct sk_seg_preheat {
    struct sk_stock_def d;
    int force;
    enum sk_seg_preheat_step step;
    int seg;
    struct sk_seg_settle settle;
    int64_t held[SK_SEG_MAX], total_held, sum;
    int any_new;
    int rc;        /* DONE: PREHEATED, STOCK_LIVE, IS_OPEN, BELOW_SOLD, BAD_ARGUMENT, RECOVERING,
                      OTHER_STORE (the base meta, or a segment's, holds another store's
                      identity: nothing written) */
    int64_t stock; /* DONE: the stock now in Redis, -1 when not known */
    int has_stock; /* DONE: stock says something (not for a refused definition) */
    char errstr[96];
};

/* Starts the walk for d (d->segments > 1; copied). */
void sk_seg_preheat_init(struct sk_seg_preheat *p, const struct sk_stock_def *d, int force);
void sk_seg_preheat_free(struct sk_seg_preheat *p);
/* The command the step needs (not for DONE or FAILED). */
void sk_seg_preheat_cmd(const struct sk_seg_preheat *p, struct sk_seg_cmd *c);
/* Its reply (NULL: none came); returns the next step. */
enum sk_seg_preheat_step sk_seg_preheat_feed(struct sk_seg_preheat *p, const redisReply *rep);

#endif
