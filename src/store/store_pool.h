/* store_pool.h - store calls off the caller's thread: a small pool of
 * threads, each with its own store handle (store.h), a bounded queue of
 * jobs, and completions handed back to the caller's thread.
 *
 * `seckill serve` runs one pool per HTTP process so that its event loop
 * never waits for the database (docs/design.md, "The database off the
 * event loop"); the pool knows nothing of HTTP or of h2o.
 *
 * Model: sk_store_pool_submit queues a job (at most queue_max wait; beyond
 * that SK_EBUSY at once). A pool thread takes the oldest and runs
 * run(store, arg) with its own handle. The completion goes on a list and
 * the pool's eventfd (sk_store_pool_fd) becomes readable; the owner, who
 * watches that fd in its own loop, calls sk_store_pool_drain, which runs
 * done(arg, rc) for every completed job on the owner's thread, in
 * completion order. done runs exactly once for every job submit accepted.
 *
 * Deadlines: a job is never started after its deadline. A thread that
 * takes a job whose deadline passed while it waited does not run it,
 * sk_store_pool_cancel takes a job out of the queue, and a submit that
 * finds the queue full first drops the jobs whose deadline passed (so
 * late jobs do not hold places while every thread is stuck); either way
 * done gets SK_ETIMEDOUT without run having been called, so nothing
 * changed in the store. A job already running is never interrupted: it completes (the
 * store bounds its own calls) and done gets what run returned.
 *
 * Threads: submit, cancel, drain, stats and free are the owner's (one
 * thread); run is called on a pool thread, one job at a time per handle.
 * Pool threads run SK_STORE_POOL_NICE nice levels below the process: when
 * the CPU is short, the owner's thread goes first. The owner never waits
 * for a lock a pool thread holds (jobs and completions change hands by
 * atomic operations: store_pool.c), so a niced thread kept off the CPU
 * never holds up the owner's loop; only free waits, for the running
 * jobs. */
#ifndef SK_STORE_POOL_H
#define SK_STORE_POOL_H
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

typedef struct sk_store_pool sk_store_pool;
/* A submitted job; the pool owns it; valid until its done has run. */
typedef struct sk_store_job sk_store_job;

/* On a pool thread: the store work, with that thread's handle. Returns 0
 * or an SK_E* code, passed to done. arg is the caller's. */
typedef int (*sk_store_run_fn)(sk_store *st, void *arg);
/* On the owner's thread (sk_store_pool_drain): rc is what run returned,
 * or SK_ETIMEDOUT when run never ran (deadline, or the pool stopping). */
typedef void (*sk_store_done_fn)(void *arg, int rc);

#define SK_STORE_POOL_THREADS_MAX 64
#define SK_STORE_POOL_NICE 10

/* Opens `threads` (1..SK_STORE_POOL_THREADS_MAX) handles on spec, one per
 * thread, and starts the threads; queue_max >= 1 jobs may wait. Opening
 * happens here, on the caller's thread, so a store that cannot be opened
 * fails the call (err, cap bytes, says why; the SK_E* code of
 * sk_store_open, or SK_EINVAL / SK_ENOMEM / SK_EIO for the pool itself).
 * The caller owns *out and releases it with sk_store_pool_free. Call it in
 * the process that will use it (after any fork). */
int sk_store_pool_new(sk_store_pool **out, const char *spec, int threads, int queue_max, char *err,
                      size_t cap);
/* The same with handles opened by sk_store_open_waiting (store.h): a
 * server that cannot be reached now does not fail the call; each handle
 * connects (and the first brings the schema up to date) on its first job
 * that finds the server. Once one handle found the server down the
 * others are set up without trying; down (NULL: not known) says why the
 * caller found it down a moment ago, and then none tries: against a host
 * that answers nothing each try costs the connect timeout. Returns 0 with
 * err empty when every handle is connected, 0 with err saying why when
 * they are not (yet), or as sk_store_pool_new. */
int sk_store_pool_new_waiting(sk_store_pool **out, const char *spec, int threads, int queue_max,
                              const char *down, char *err, size_t cap);

/* Stops taking jobs, gives the queued ones SK_ETIMEDOUT, waits for the
 * running ones, runs every done not yet run (on the caller's thread; a
 * submit from those fails with SK_ESTATE), closes the handles and frees
 * everything. NULL is fine. */
void sk_store_pool_free(sk_store_pool *p);

/* The eventfd that is readable while completions wait for
 * sk_store_pool_drain (spurious wake-ups are possible: drain then runs
 * nothing). Owned by the pool. */
int sk_store_pool_fd(const sk_store_pool *p);

/* Queues run(store, arg) to start before deadline_ms (sk_mono_ms() time;
 * 0: no deadline); done(arg, rc) follows through sk_store_pool_drain.
 * *job (job may be NULL) is its handle for sk_store_pool_cancel. Returns 0,
 * SK_EBUSY when queue_max jobs already wait, SK_ENOMEM, or SK_ESTATE once
 * sk_store_pool_free began; on failure done is never called. */
int sk_store_pool_submit(sk_store_pool *p, int64_t deadline_ms, sk_store_run_fn run,
                         sk_store_done_fn done, void *arg, sk_store_job **job);

/* Takes job out of the queue if no thread took it yet: returns 1 and the
 * job will never run (its done gets SK_ETIMEDOUT at a drain); 0 when it is
 * running or done (its done gets run's answer). Only before its done ran. */
int sk_store_pool_cancel(sk_store_pool *p, sk_store_job *job);

/* Runs done for every completed job, on the caller's thread; returns how
 * many. A done may submit new jobs. */
size_t sk_store_pool_drain(sk_store_pool *p);

struct sk_store_pool_stats {
    uint64_t submitted;       /* accepted by submit */
    uint64_t rejected;        /* refused with SK_EBUSY */
    uint64_t ran;             /* run called */
    uint64_t expired;         /* never ran: deadline passed in the queue, or cancelled */
    size_t queued;            /* waiting now */
    int64_t oldest_queued_ms; /* when the oldest of them was submitted (sk_mono_ms); 0: none */
    size_t running;           /* in a thread now */
    int threads;
};
void sk_store_pool_stats(sk_store_pool *p, struct sk_store_pool_stats *out);

#endif
