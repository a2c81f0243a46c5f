/* chaos_buyers.h - buyers for a sale under faults: threads that buy over
 * keep-alive HTTP connections from several serve processes, each purchase
 * with an Idempotency-Key of its own, retried with the same key (on any
 * serve, after a pause) while the answer says nothing definite (503, or no
 * answer), and every attempt recorded in a ledger (chaos_check.h) for the
 * checker. What they choose (serve, activity, user, quantity, pauses)
 * comes from a seed. The HTTP client never resends on its own
 * (http_load_env.h), so the ledger holds every request that left.
 * A serve process may live in a network namespace of its own (the
 * partition tests' hosts): its connections are then opened from inside
 * it, on its loopback, as a gateway beside it would. */
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
    /* the network namespace of each serve process (a setns descriptor
     * before its connections are opened; NULL: the caller's for all) */
    const int *netns_fds;
    /* 1: buyer thread i sends a purchase's first attempt to serve
     * i % nports and only retries go to any (each serve has buyers of its
     * own, so its time without a 200 is its own, not its neighbour's
     * stalls); 0: every attempt to any serve */
    int home;
    struct chaos_ledger *ledger;
};

struct chaos_buyers {
    struct chaos_buyers_opts o;
    pthread_t th[CHAOS_MAX_BUYERS];
    int nth;
    atomic_int stop;
    atomic_long ok, answered;            /* progress, for the nemesis's log */
    atomic_long ok_on[CHAOS_MAX_SERVES]; /* 200s per serve (is it selling?) */
};

/* Copies o (the arrays must outlive the buyers) and starts the threads. */
void chaos_buyers_start(struct chaos_buyers *b, const struct chaos_buyers_opts *o);
/* Stops them (each finishes the request in hand) and joins them. */
void chaos_buyers_stop(struct chaos_buyers *b);

#endif
