/* segment.h - segmented stock (docs/segments.md): one activity's stock split
 * over S key sets with their own hash tags {a<ID>.s<i>}, so a Redis Cluster
 * spreads one hot activity over its masters.
 *
 * A buyer belongs to a home segment (sk_seg_home), which holds the buyer's
 * count, idempotency keys, ledger and orders: the per-user limit is checked
 * in one script on one slot, exactly as without segments. When the home
 * segment cannot serve a purchase, stock is moved to it from the fullest
 * other segment (transfer.lua: units leave the lender, recorded under a
 * transfer id; the home applies the id once, with the re-admission), so no
 * purchase ever spans two slots and no step needs compensation: a transfer
 * that was taken but never applied is rolled forward (sk_seg_settle).
 *
 * The multi-step exchanges are written once without I/O (the borrow in
 * seg_borrow.h, the preheat in seg_preheat.h, the settle in seg_settle.h).
 * The borrow has one driver, serve's (src/http/purchase_borrow.c); the
 * calls here drive the preheat and the settle on the blocking client, as
 * serve drives the preheat on the async one. They follow stock.h's convention: 0 when Redis
 * answered, a negative SK_E* code (details in r->errstr) when it did not. */
#ifndef SK_SEGMENT_H
#define SK_SEGMENT_H
#include <stddef.h>
#include <stdint.h>

#include "engine/keys.h"
#include "engine/seg_borrow.h" /* the borrow protocol, SK_SEG_MAX */
#include "engine/stock.h"
#include "redis/redis_conn.h"

/* ---- pure ---------------------------------------------------------------- */

/* The home segment of a user: a fixed mix of the id, mod segments, so
 * sequential ids spread evenly and every process agrees. */
int sk_seg_home(uint64_t user_id, int segments);
/* Segment seg's share of initial units (the first initial % S get one more). */
int64_t sk_seg_share(int64_t initial, int segments, int seg);
/* Adds one segment's state into *sum (first: sum starts as a copy). */
void sk_seg_state_add(struct sk_stock_state *sum, const struct sk_stock_state *one, int first);

/* ---- blocking ------------------------------------------------------------ */

/* Number of segments of an activity: the base meta's "segments" field, 1
 * when it has none (unsegmented, or unknown). */
int sk_seg_count(sk_redis *r, uint64_t activity_id, int *segments);

/* The lending half of a transfer alone (transfer.lua on segment from, for
 * segment to): *taken units left `from` under transfer id (SK_XFER_ID_MAX
 * bytes), 0 when it had none or the sale is closed; *rc (may be NULL) is
 * the script's code (TRANSFERRED, SOLD_OUT, CLOSED, ...). The receiving
 * half is a purchase_batch call carrying the id, or sk_seg_settle. */
int sk_seg_lend(sk_redis *r, uint64_t activity_id, int from, int to, int64_t want, int64_t *taken,
                char *id, int *rc);
/* Moves units from segment `from` to segment `to`: the lending half
 * (transfer.lua), then the receiving half (xfer_in.lua). *taken: units
 * moved (0 when the lender had none or the sale is closed). */
int sk_seg_move(sk_redis *r, uint64_t activity_id, int from, int to, int64_t want, int64_t *taken);

/* Preheat of every segment (shares of d->initial; a forced preheat keeps
 * what each segment's buyers hold and spreads the rest), then the base
 * meta: the walk of seg_preheat.h. */
int sk_seg_preheat(sk_redis *r, const struct sk_stock_def *d, int force, int *rc, int64_t *stock);
int sk_seg_set_open(sk_redis *r, uint64_t activity_id, int segments, int open, int *rc);
int sk_seg_state(sk_redis *r, uint64_t activity_id, int segments, struct sk_stock_state *st);

/* Every entry of segment seg's lending record (xout: transfer id ->
 * "<to>:<units>") that parses, in turn: fn answers 1 to delete it (HDEL),
 * 0 to keep it, or a negative code to stop. Returns 0 or the first
 * failure (fn's, Redis's, or SK_EPROTO for a reply that is not a hash). */
typedef int (*sk_seg_xout_fn)(sk_redis *r, uint64_t activity_id, const char *id, int to,
                              int64_t units, void *arg);
int sk_seg_xout_each(sk_redis *r, uint64_t activity_id, int seg, sk_seg_xout_fn fn, void *arg);
/* Rolls forward every transfer that left a lender and was never applied
 * at its receiver (a borrower died between the two calls), and forgets
 * settled ones (the walk of seg_settle.h). *units: units it applied now.
 * Safe at any time: applying is idempotent per transfer id. */
int sk_seg_settle(sk_redis *r, uint64_t activity_id, int segments, int64_t *units);
/* The same; a transfer to a fenced segment (docs/recovery.md) is left in
 * transit unless `recovering` (the recovery of that segment settles first). */
int sk_seg_settle_opt(sk_redis *r, uint64_t activity_id, int segments, int recovering,
                      int64_t *units);

#endif
