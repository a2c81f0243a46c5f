/* purchase_borrow.h - the async driver of the segment borrow protocol
 * (engine/seg_borrow.h) in serve: the purchases a home segment refused for
 * want of stock read every segment's stock (http/seg_stocks.h), take a
 * transfer from the fullest other segment, and are re-admitted at home
 * with it in a batch of their own (purchase_batch.h), at most S rounds.
 * Only when every segment was seen empty is the activity sold out here.
 *
 * A lender is checked against this host's memory of it, like a home (the
 * rollback guard, http/label_mem.h); a transfer fewer replicas than
 * --sync-replicas acknowledged is not used (503, try again). */
#ifndef SK_PURCHASE_BORROW_H
#define SK_PURCHASE_BORROW_H
#include <stddef.h>
#include <stdint.h>

#include "engine/stock.h"
#include "http/api_purchase.h"
#include "http/app.h"

struct sk_purchase_borrow;

/* Takes over n purchases of segment home (res: their stock refusals) and
 * answers each of them in the end. */
void sk_purchase_borrow_start(struct sk_app *app, uint64_t activity_id, int segments, int home,
                              struct sk_pending **items, const struct sk_admission *res, size_t n);
int sk_purchase_borrow_segments(const struct sk_purchase_borrow *bo);
/* The answers of the borrow's re-admission batch (n purchases, in the
 * order it sent them; the batch answered all but the stock refusals):
 * the borrow goes on, or answers what is left and ends (frees bo). */
void sk_purchase_borrow_readmitted(struct sk_purchase_borrow *bo, const struct sk_admission *res,
                                   size_t n, int64_t remaining);
/* The re-admission batch failed and answered every purchase the borrow
 * had left: frees bo. */
void sk_purchase_borrow_drop(struct sk_purchase_borrow *bo);

#endif
