/* sweeper.h - the payment-timeout sweeper: cancels orders still unpaid
 * after their activity's pay_timeout_s with the one cancel path
 * (order_cancel.h), and finishes releases a crash or a Redis outage left
 * owed (a cancelled order not yet marked released).
 *
 * A sweeper is one thread's object (its own Redis connection and store
 * handle); sk_sweeper_stop and sk_sweeper_stats may be called from any
 * thread, and sk_sweeper_stop from a signal handler. */
#ifndef SK_SWEEPER_H
#define SK_SWEEPER_H
#include <stddef.h>
#include <stdint.h>

#include "core/node_stats.h"
#include "orders/order_cancel.h"
#include "redis/redis_conn.h"
#include "store/store.h"

struct sk_sweeper_opts {
    const char *redis_url;       /* required; copied */
    const char *db_spec;         /* required; copied */
    int interval_ms;             /* between passes, default 1000 */
    int batch;                   /* orders read per query (1..10000), default 500 */
    struct sk_node_worker *node; /* NULL, or the node's worker slot (core/node_stats.h): the
                                    counters of sk_sweeper_stats are added there too; not
                                    owned */
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
    size_t foreign;           /* orders left alone: their activity's live state in Redis
                                 belongs to another store (docs/design.md) */
};

/* Cumulative counters since sk_sweeper_new (for metrics); read one by one.
 * One field per SK_WC_SWEEP row of core/worker_counters.def. */
struct sk_sweeper_stats {
#define SK_WC(field, kind, name, help)
#define SK_WC_WORKER(field, kind, name, help)
#define SK_WC_SWEEP(field, kind, name, help) uint64_t field;
#include "core/worker_counters.def"
#undef SK_WC
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
