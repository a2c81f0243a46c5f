/* chaos_buyers.h - buyers for a sale under faults: threads that buy over
 * keep-alive HTTP connections from several serve processes, each purchase
 * with an Idempotency-Key of its own, retried with the same key (on any
 * serve, after a pause) while the answer says nothing definite (503, or no
 * answer), and every attempt recorded in a ledger (chaos_check.h) for the
 * checker. What they choose (serve, activity, user, quantity, pauses)
 * comes from a seed. The HTTP client never resends on its own
 * (http_load_env.h), so the ledger holds every request that left. */
#ifndef SK_TEST_CHAOS_BUYERS_H
#define SK_TEST_CHAOS_BUYERS_H
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "support/chaos_check.h"

#define CHAOS_MAX_BUYERS 64

struct chaos_buyers_opts {
    const int *ports; /* the serve processes' HTTP ports (nports <= CHAOS_MAX_SERVES) */
    int nports;
    const struct chaos_activity *acts;
    size_t nacts;
    int threads;    /* <= CHAOS_MAX_BUYERS */
    uint32_t users; /* buyers are users 1..users */
    int max_qty;    /* each purchase asks 1..max_qty units */
    uint64_t seed;
    int think_us;     /* pause between purchases */
    int max_attempts; /* tries per key */
    int backoff_ms;   /* before a retry (times the attempt number) */
    struct chaos_ledger *ledger;
};

struct chaos_buyers {
    struct chaos_buyers_opts o;
    pthread_t th[CHAOS_MAX_BUYERS];
    int nth;
    atomic_int stop;
    atomic_long ok, answered; /* progress, for the nemesis's log */
};

/* Copies o (the arrays must outlive the buyers) and starts the threads. */
void chaos_buyers_start(struct chaos_buyers *b, const struct chaos_buyers_opts *o);
/* Stops them (each finishes the request in hand) and joins them. */
void chaos_buyers_stop(struct chaos_buyers *b);

#endif
