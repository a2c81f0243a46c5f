/* act_cache.h - what an HTTP process knows about each activity without
 * asking Redis (sold out, in-flight purchases, segments, the waiting
 * room's watch): a bounded table in struct sk_app, looked up per request. */
#ifndef SK_HTTP_ACT_CACHE_H
#define SK_HTTP_ACT_CACHE_H
#include <stdint.h>

struct sk_app;

/* What this process knows about one activity without asking Redis. */
struct sk_act_cache {
    uint64_t id;
    int sold_out;       /* Redis said stock 0: refuse locally */
    int rechecking;     /* a GET stock is in flight */
    int64_t checked_ms; /* last sold-out check */
    int64_t inflight;   /* purchases queued or waiting for Redis (max_inflight) */
    int segments;       /* 0: not known yet (the first call tells), 1, or S > 1 */
    int watch;          /* a segmented waiting room: its stock is re-read every 250 ms even
                           while not sold out, so waiting buyers learn it (its queue's slot
                           holds no stock; docs/waiting-room.md) */
    int suspect;        /* a borrow saw every segment empty: sold out once a read
                           made a moment later agrees (a unit lent to another
                           process may have been in transit, invisible to it) */
    int confirmed;      /* Redis answered for it as an existing activity */
    int64_t used_ms;    /* last lookup: the idle one used longest ago is evicted */
};

/* At most this many activities are tracked per process; of them at most
 * SK_ACTS_UNCONFIRMED_MAX not yet confirmed by Redis (ids a client sent
 * that may not exist): those never push a confirmed one out. */
#define SK_ACTS_MAX 4096
#define SK_ACTS_UNCONFIRMED_MAX 512

/* The cache entry of an activity. create: SK_ACT_FIND looks only;
 * SK_ACT_MAKE creates it unconfirmed when absent (the id may not exist);
 * SK_ACT_KNOWN creates or marks it confirmed (Redis answered for it). When
 * the table is full an idle entry is evicted: an unconfirmed one first; a
 * confirmed one (the one used longest ago) only to make room for another
 * confirmed one. NULL when absent, or when no room can be made. Creating
 * may move the entries: pointers from before are stale. */
enum { SK_ACT_FIND = 0, SK_ACT_MAKE = 1, SK_ACT_KNOWN = 2 };
struct sk_act_cache *sk_app_act(struct sk_app *app, uint64_t id, int create);

#endif
