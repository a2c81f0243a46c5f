/* purchase_batch.h - batching of purchases: those that arrive in one
 * event-loop pass go to Redis as one purchase_batch call per key set (an
 * activity's own, or one home segment), sent at the end of that pass (no
 * timer), unless the key set has --batches-in-flight calls out already:
 * then the batch stays open until one of them is answered (the batch
 * window, purchase_batch.c). Rate limits travel inside that call
 * (docs/rate-limit.md), and so does what this host saw last of the key set
 * (the rollback guard, http/label_mem.h). The reply is answered here; a
 * segment's stock refusals go to a borrow (purchase_borrow.h). */
#ifndef SK_PURCHASE_BATCH_H
#define SK_PURCHASE_BATCH_H
#include <stddef.h>
#include <stdint.h>

#include "engine/stock.h"
#include "http/api_purchase.h"
#include "http/app.h"

struct sk_purchase_borrow;

struct sk_batch {
    struct sk_app *app;
    uint64_t aid;
    int seg;                           /* SK_SEG_NONE: the activity's own (base) keys */
    struct sk_keyset *ks;              /* its key set's record, held while open or out */
    struct sk_purchase_borrow *borrow; /* set on a re-admission after a transfer */
    char xfer_id[SK_XFER_ID_MAX];
    int64_t xfer_qty;
    size_t n;
    struct sk_pending *items[SK_BATCH_MAX];
};

/* An empty batch for an activity's key set (heap, owned by the caller
 * until sent; NULL when out of memory). */
struct sk_batch *sk_batch_new(struct sk_app *app, uint64_t activity_id, int seg);
/* The open batch of this pass for a key set (seg: the home segment, or
 * SK_SEG_NONE), owned by the pass; a full one is sent first. NULL when out
 * of memory. */
struct sk_batch *sk_batch_for(struct sk_app *app, uint64_t activity_id, int seg);
/* Sends b; its reply answers its purchases, and frees it. */
void sk_batch_send(struct sk_app *app, struct sk_batch *b);
/* End of a loop pass: send the batches collected in it, except those of
 * key sets whose batch window is full (they stay open). */
void sk_purchase_flush(struct sk_app *app);

#endif
