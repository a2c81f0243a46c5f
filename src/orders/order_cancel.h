/* order_cancel.h - the one cancel path, shared by the HTTP cancel route,
 * the CLI and the payment-timeout sweeper (sweeper.h).
 *
 * Cancelling an order is two writes in two systems, in this order:
 *   1. the DB, conditional on status created (sk_store_order_cancel): of a
 *      racing payment and cancel exactly one wins, and the winning cancel
 *      gives the units back to the DB stock in the same transaction;
 *   2. Redis, the release script (sk_stock_release), run only by the call
 *      that won step 1; it is once per order in Redis too (the ledger entry
 *      is marked), so a repeated release answers ALREADY_RELEASED;
 *   3. the DB again: released_ms is set (sk_store_order_mark_released).
 * The DB goes first because it decides the race with a payment: releasing
 * first would hand back units that a payment arriving in between then
 * keeps. A crash (or Redis outage) between 1 and 3 leaves a cancelled order
 * whose release is owed; every sweeper pass finds those
 * (sk_store_orders_unreleased, a partial index) and runs their release, so
 * the gap closes on the next pass. */
#ifndef SK_ORDER_CANCEL_H
#define SK_ORDER_CANCEL_H
#include <stddef.h>
#include <stdint.h>

#include "redis/redis_conn.h"
#include "store/store.h"

struct sk_cancel_result {
    struct sk_order order; /* the order as read before the cancel */
    int prev_status;       /* enum sk_order_status before the call, -1 unknown */
    int status;            /* after the call */
    int cancelled;         /* 1: THIS call moved it from created to cancelled */
    int must_release;      /* 1: the caller owes the Redis release (== cancelled) */
    int released;          /* 1: the release ran and its units are back in Redis
                              (by this call, or ALREADY_RELEASED by a racing one) */
    int release_pending;   /* 1: cancelled but the release failed (Redis down, or
                              the ledger refused it); a sweeper pass retries it */
    int release_rc;        /* SK_RC_* of the release script, -1 when not run */
    int64_t units_given;   /* units the release added back to Redis stock */
};

/* Step 1 (the DB part, reusable by an asynchronous caller): reads the order
 * and cancels it conditionally at now_ms. user_id != 0 restricts it to that
 * buyer's own order (another buyer's order is SK_ENOTFOUND: its existence is
 * not revealed); 0 is an operator, any order. Returns 0 when the order is
 * cancelled (by this call: res->must_release, or before); SK_ESTATE when it
 * is paid (res->status says so; nothing changed); SK_ENOTFOUND (absent: it
 * may still be queued in the stream); SK_EINVAL for an empty or overlong
 * id; store errors (detail: sk_store_errstr). res is filled in every case. */
int sk_order_cancel_db(sk_store *st, const char *order_id, uint64_t user_id, int64_t now_ms,
                       struct sk_cancel_result *res);

/* Step 3: records the outcome of the release the caller ran for
 * res->order (release_rc an SK_RC_*, given its units): RELEASED and
 * ALREADY_RELEASED mark the order released in the DB; anything else leaves
 * it owed (res->release_pending) for the sweeper. Updates res. Returns 0 or
 * a store error (the release itself stands; the sweeper marks it later). */
int sk_order_release_done(sk_store *st, struct sk_cancel_result *res, int release_rc, int64_t given,
                          int64_t now_ms);

/* The whole cancel, blocking: step 1, then (when this call cancelled it)
 * sk_stock_release with the order's user and quantity, then step 3.
 * Returns as sk_order_cancel_db: 0 means the order is cancelled; when the
 * Redis release failed it is still 0, with res->release_pending set (the
 * cancellation stands; the sweeper's next pass releases the units). */
int sk_order_cancel(sk_store *st, sk_redis *r, const char *order_id, uint64_t user_id,
                    int64_t now_ms, struct sk_cancel_result *res);

#endif
