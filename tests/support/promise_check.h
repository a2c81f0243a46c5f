/* promise_check.h - after a fault and its healing, what the buyers were
 * promised against what the database and Redis hold: the ledger of every
 * 200 in, a verdict out (no I/O of its own but the reads of st and r).
 *
 *   lost:        a 200 whose order the database does not hold, holds
 *                cancelled, or holds for another user or quantity
 *   twice:       one order id answered to two purchases
 *   over_limit:  users whose orders (not cancelled) hold more than limit
 *   oversold:    units the database holds beyond the stock
 *   Redis:       stock + held == initial, stock >= 0, no fence, and Redis
 *                holds what the database holds (the worker has drained)
 *
 * Used by the partition tests (test_partitions.c); a nemesis checker can
 * take the same ledger. */
#ifndef SK_TEST_PROMISE_CHECK_H
#define SK_TEST_PROMISE_CHECK_H
#include <stddef.h>
#include <stdint.h>

#include "redis/redis_conn.h"
#include "store/store.h"

/* One 200: what its buyer holds. */
struct pcheck_ack {
    const char *order_id;
    uint64_t user;
    int64_t qty;
};

struct pcheck_verdict {
    long acks, lost, twice, over_limit;
    int64_t db_units, db_orders, db_cancelled, oversold;
    int64_t redis_remaining, redis_held, redis_initial;
    int redis_ok;
    char first[320]; /* the first problem, in words ("" when ok) */
    int ok;
};

/* Checks activity aid (stock units, limit per user) against acks[0..n).
 * Fails the test only when st or r cannot be read; a broken promise is in
 * the verdict. */
void pcheck_run(sk_store *st, sk_redis *r, uint64_t aid, int64_t stock, int64_t limit,
                const struct pcheck_ack *acks, size_t n, struct pcheck_verdict *v);

/* One line of the verdict's figures. */
void pcheck_print(const struct pcheck_verdict *v, const char *label);

#endif
