/* sweeper.h - the payment-timeout sweeper, and the one cancel path shared
 * with the HTTP cancel route and the CLI.
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
 * the gap closes on the next pass.
 *
 * A sweeper is one thread's object (its own Redis connection and store
 * handle); sk_sweeper_stop and sk_sweeper_stats may be called from any
 * thread, and sk_sweeper_stop from a signal handler. */
#ifndef SK_SWEEPER_H
#define SK_SWEEPER_H
#include <stddef.h>
#include <stdint.h>

#include "redis_conn.h"
#include "store.h"

/* ---- One cancel (HTTP route, CLI, sweeper) ------------------------------ */

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

/* ---- The sweeper -------------------------------------------------------- */

struct sk_sweeper_opts {
    const char *redis_url; /* required; copied */
    const char *db_spec;   /* required; copied */
    int interval_ms;       /* between passes, default 1000 */
    int batch;             /* orders read per query (1..10000), default 500 */
};

/* Fills o with the defaults (redis_url and db_spec NULL). */
void sk_sweeper_opts_init(struct sk_sweeper_opts *o);

/* What one pass did. */
struct sk_sweep_result {
    size_t expired;           /* unpaid orders found past their deadline */
    size_t cancelled;         /* of those, cancelled by this pass */
    size_t lost_to_payment;   /* paid before this pass's cancel (a race lost) */
    size_t already_cancelled; /* cancelled by someone else first */
    size_t released;          /* releases run by this pass that gave units back */
    size_t already_released;  /* releases answered ALREADY_RELEASED */
    int64_t units_released;   /* units added back to Redis stock */
    size_t repaired;          /* owed releases (crash gap) done by this pass */
    size_t unreleasable;      /* releases Redis refused (order not in the ledger, or
                                 activity gone): left owed, reconcile reports them */
    size_t errors;            /* per-order failures (store or Redis) */
};

/* Cumulative counters since sk_sweeper_new (for metrics); read one by one. */
struct sk_sweeper_stats {
    uint64_t passes, failed_passes;
    uint64_t cancelled, lost_to_payment, released, units_released, repaired, unreleasable, errors;
};

typedef struct sk_sweeper sk_sweeper;

/* Creates a sweeper: copies o, opens the store (migrations run) and
 * prepares the Redis connection (connected lazily). On failure *out is NULL
 * and err (cap bytes) says why: SK_EINVAL (bad option, URL or spec),
 * SK_EDB, SK_ENOMEM. The caller owns *out: sk_sweeper_free. */
int sk_sweeper_new(sk_sweeper **out, const struct sk_sweeper_opts *o, char *err, size_t cap);

/* Frees everything; NULL is fine. Not while sk_sweeper_run runs. */
void sk_sweeper_free(sk_sweeper *sw);

/* One pass at now_ms (wall-clock ms; tests pass a future time instead of
 * waiting): cancels every order still created whose pay deadline is before
 * now_ms and releases its units, then runs the owed releases (crash gap).
 * res (may be NULL) is zeroed and filled. Returns 0 when the pass ran
 * (per-order failures are counted in res->errors and retried next pass),
 * or the SK_E* error that stopped it (store or Redis unreachable; detail in
 * sk_sweeper_errstr); what it did up to then is in res. */
int sk_sweeper_pass(sk_sweeper *sw, int64_t now_ms, struct sk_sweep_result *res);

/* Runs passes every interval_ms (wall clock) until sk_sweeper_stop; a
 * failed pass is retried after a backoff doubling from 100 ms to 5 s.
 * Returns 0. */
int sk_sweeper_run(sk_sweeper *sw);

/* Asks sk_sweeper_run to return (within 50 ms, or after the pass in hand).
 * Async-signal-safe. */
void sk_sweeper_stop(sk_sweeper *sw);

void sk_sweeper_stats(const sk_sweeper *sw, struct sk_sweeper_stats *out);

/* Detail of the last failure. Owned by sw. */
const char *sk_sweeper_errstr(const sk_sweeper *sw);

#endif
