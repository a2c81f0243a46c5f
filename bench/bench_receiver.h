/* bench_receiver.h - a webhook receiver for `seckill-bench persist
 * --webhooks`: a loopback HTTP/1.1 server on a thread of its own that
 * answers every POST 200 at once and records, per event, how long after
 * the event was written it arrived (the body's top-level "created_ms").
 * Bench only: no signature check (the tests do that), one connection at a
 * time (the dispatcher keeps one per endpoint). */
#ifndef SK_BENCH_RECEIVER_H
#define SK_BENCH_RECEIVER_H
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct sk_bench_rx {
    int lfd, port;
    pthread_t th;
    int started;
    atomic_int stop;
    pthread_mutex_t mu;
    int64_t *lag_ms; /* one per event received, in arrival order (owned) */
    size_t n, cap;
    int64_t first_us, last_us; /* arrivals, sk_mono_us */
};

/* Listens on 127.0.0.1 (a free port in rx->port) and starts the thread.
 * 0, or SK_EIO with errno. rx owns its memory until sk_bench_rx_stop. */
int sk_bench_rx_start(struct sk_bench_rx *rx);
/* Events received so far. */
size_t sk_bench_rx_count(struct sk_bench_rx *rx);
/* Stops the thread, closes the sockets; the figures stay readable until
 * sk_bench_rx_free. */
void sk_bench_rx_stop(struct sk_bench_rx *rx);
void sk_bench_rx_free(struct sk_bench_rx *rx);

#endif
