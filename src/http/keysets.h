/* keysets.h - what an HTTP process holds per key set, in one hash map
 * keyed by (activity, segment): for an activity (segment SK_SEG_NONE) what
 * it knows without asking Redis (sold out, purchases in flight, its
 * segment count, the waiting room's watch) and its definition as the
 * store gave it (act_defs.h), and for every key set its batch window
 * (calls out to Redis) and this loop turn's open purchase and queue
 * batches.
 *
 * Records are stable: a lookup never moves one. Only an idle record (no
 * purchase counted in it, no read, call or batch of it under way) is ever
 * freed, and only by sk_keysets_tick, at the end of a loop turn: a pointer
 * taken during a turn is good for the rest of it, and beyond while the
 * record is busy (a batch holds its key set's record). */
#ifndef SK_HTTP_KEYSETS_H
#define SK_HTTP_KEYSETS_H
#include <stdint.h>

struct sk_app;
struct sk_batch;
struct sk_qbatch;
struct sk_activity;
struct sk_act_fill;

/* The lists of records with a batch open this turn. */
enum { SK_OPEN_PURCHASE, SK_OPEN_QUEUE, SK_OPEN_LISTS };

struct sk_keyset {
    uint64_t aid;
    int seg; /* SK_SEG_NONE: the activity's own keys; its record holds the activity's state */
    /* the activity (seg SK_SEG_NONE) */
    int sold_out;             /* Redis said stock 0: refuse locally */
    int rechecking;           /* a stock read is in flight */
    int64_t checked_ms;       /* last sold-out check */
    int64_t inflight;         /* purchases queued or waiting for Redis (max_inflight) */
    int segments;             /* 0: not known yet (the first call tells), 1, or S > 1 */
    int watch;                /* a segmented waiting room: its stock is re-read every 250 ms even
                                 while not sold out, so waiting buyers learn it (its queue's slot
                                 holds no stock; docs/waiting-room.md) */
    int suspect;              /* a borrow saw every segment empty: sold out once a read
                                 made a moment later agrees (a unit lent to another
                                 process may have been in transit, invisible to it) */
    int confirmed;            /* Redis answered for it as an existing activity, or the store
                                 defined it (a segment's record is made for a known activity
                                 only: confirmed) */
    struct sk_activity *def;  /* its definition as the store gave it (heap; NULL: none) */
    int64_t def_ms;           /* when it was read */
    int64_t unknown_until_ms; /* the store had no such activity: believed until then */
    struct sk_act_fill *fill; /* the store read of it in flight (act_defs.c), or NULL */
    /* the key set */
    int flights;              /* purchase_batch calls out to Redis (--batches-in-flight) */
    struct sk_batch *batch;   /* this turn's open purchase batch, or NULL */
    struct sk_qbatch *qbatch; /* this turn's open queue batch (the activity's), or NULL */
    /* the table's */
    struct sk_keyset *hnext;                    /* hash chain */
    struct sk_keyset *older, *newer;            /* use order, in its list (confirmed or not) */
    struct sk_keyset *open_next[SK_OPEN_LISTS]; /* the turn's open batches, by list */
    struct sk_keyset *watch_prev, *watch_next;  /* re-read by the tick */
    int listed; /* bit 1: in the open list, 2: queue list, 4: watched */
};

/* At most this many activities are kept per process once a loop turn
 * ends (segments' records count as theirs); of them at most
 * SK_ACTS_UNCONFIRMED_MAX not yet confirmed by Redis (ids a client sent
 * that may not exist): those never push a confirmed one out. Within a turn
 * the table may pass the bound, by at most as many again. */
#define SK_ACTS_MAX 4096
#define SK_ACTS_UNCONFIRMED_MAX 512

struct sk_keysets;
/* A new empty table (NULL when out of memory); freed with sk_keysets_free
 * (the records too; the batches they name are their owners'). */
struct sk_keysets *sk_keysets_new(void);
void sk_keysets_free(struct sk_keysets *t);

/* The record of an activity. create: SK_ACT_FIND looks only; SK_ACT_MAKE
 * creates it unconfirmed when absent (the id may not exist); SK_ACT_KNOWN
 * creates or marks it confirmed (Redis answered for it). NULL when absent,
 * or when out of memory or room. */
enum { SK_ACT_FIND = 0, SK_ACT_MAKE = 1, SK_ACT_KNOWN = 2 };
struct sk_keyset *sk_app_act(struct sk_app *app, uint64_t id, int create);
/* The record of a key set (seg: a segment, or SK_SEG_NONE for the
 * activity's own); create as above (a segment's is made confirmed). */
struct sk_keyset *sk_app_keyset(struct sk_app *app, uint64_t aid, int seg, int create);

/* ks->batch (SK_OPEN_PURCHASE) or ks->qbatch (SK_OPEN_QUEUE) was just
 * set: the turn's flush sends it. */
void sk_keyset_opened(struct sk_app *app, struct sk_keyset *ks, int list);
/* The records with an open batch of list, taken off it: walk them by
 * open_next[list]; one whose batch stays open goes back with
 * sk_keyset_opened. */
struct sk_keyset *sk_keysets_take_open(struct sk_app *app, int list);
/* 1 when a purchase or queue batch is open. */
int sk_keysets_open(const struct sk_app *app);

/* ks (an activity's) is sold out, suspect or watched: the tick reads its
 * stock again (sk_keysets_watched walks them by watch_next; a record that
 * needs it no more is dropped with sk_keyset_unwatch). */
void sk_keyset_watch(struct sk_app *app, struct sk_keyset *ks);
void sk_keyset_unwatch(struct sk_app *app, struct sk_keyset *ks);
struct sk_keyset *sk_keysets_watched(const struct sk_app *app);

/* End of a loop turn: idle records go until the bounds above hold
 * (unconfirmed ones first, then the confirmed used longest ago). */
void sk_keysets_tick(struct sk_app *app);

#endif
