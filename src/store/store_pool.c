/* store_pool.c - the store thread pool (store_pool.h).
 *
 * The owner (an event loop) never waits for a lock a pool thread can hold:
 * the pool threads run SK_STORE_POOL_NICE levels below it, and a niced
 * thread preempted inside a critical section would hold the loop for as
 * long as the busy machine keeps it off the CPU (measured with mutex and
 * condition variable: the loop blocked in futex waits up to 6 ms, 405
 * times in 5 s of the mixed benchmark). So every hand-over between the
 * owner and the threads is an atomic operation:
 *   - submit pushes the job on the `inbox` stack (compare-and-swap) and
 *     posts the `work` semaphore (sem_post never blocks);
 *   - a thread, woken by the semaphore, takes the whole inbox (one
 *     exchange) into the FIFO `queue` that only the pool threads share
 *     under `mu`, and starts the oldest job by moving its state from
 *     queued to running (compare-and-swap: a cancel may have won);
 *   - a finished job goes on the `done` stack (compare-and-swap); the
 *     push onto an empty stack writes the eventfd, so a burst of
 *     completions costs one write and one wake-up;
 *   - drain takes the whole done stack (one exchange) and runs the
 *     completions in order;
 *   - cancel moves a queued job to cancelled (compare-and-swap) and
 *     completes it itself; the job stays in the threads' queue until one
 *     of them drops it, so a cancelled job has two references.
 * Counters the owner reads (stats, the queue bound) are atomics. The
 * owner also keeps every job whose done has not run in a list of its own
 * (the oldest first), to expire the late ones when the queue is full. */
#include "store/store_pool.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/error.h"
#include "store/store_int.h"

enum job_state { J_QUEUED, J_RUNNING, J_CANCELLED, J_DONE };

struct sk_store_job {
    sk_store_run_fn run;
    sk_store_done_fn done;
    void *arg;
    int64_t deadline_ms;
    int64_t queued_ms; /* when it was submitted (sk_mono_ms) */
    _Atomic int state; /* enum job_state */
    _Atomic int refs;  /* the threads' queue or the done stack; both for a cancelled job */
    int rc;
    struct sk_store_job *qnext;         /* the inbox, then the threads' queue */
    struct sk_store_job *dnext;         /* the done stack, then the drain's list */
    struct sk_store_job *oprev, *onext; /* the owner's list of jobs not yet done */
};

struct sk_store_pool {
    _Atomic(struct sk_store_job *) inbox; /* pushed by the owner, newest first */
    _Atomic(struct sk_store_job *) done;  /* pushed by anyone, newest first */
    sem_t work;                           /* one post per job pushed (and per thread to stop) */
    pthread_mutex_t mu;                   /* the pool threads' queue: never the owner's */
    struct sk_store_job *qhead, *qtail;
    _Atomic int stopping;
    int efd;
    int queue_max;
    int nthreads, started;
    pthread_t *tids;
    sk_store **stores;
    struct sk_store_job *ohead, *otail; /* the owner's: submitted, done not run yet */
    _Atomic uint64_t submitted, rejected, ran, expired;
    _Atomic size_t waiting, running; /* queued (not started, not cancelled); running */
};

/* One thread's start argument. */
struct worker_arg {
    sk_store_pool *p;
    sk_store *st;
};

static void wake_owner(sk_store_pool *p)
{
    uint64_t one = 1;
    /* EAGAIN: the counter is full, so it is readable anyway */
    while (write(p->efd, &one, sizeof one) < 0 && errno == EINTR) {
    }
}

/* j is finished (ran, expired or cancelled) with rc: onto the done stack;
 * the push that makes the stack non-empty wakes the owner. Any thread. */
static void complete(sk_store_pool *p, struct sk_store_job *j, int rc)
{
    j->rc = rc;
    struct sk_store_job *old = atomic_load(&p->done);
    do {
        j->dnext = old;
    } while (!atomic_compare_exchange_weak(&p->done, &old, j));
    if (!old) wake_owner(p);
}

static void unref(struct sk_store_job *j)
{
    if (atomic_fetch_sub(&j->refs, 1) == 1) free(j);
}

/* A stack (newest first) in push order; at: the offset of its link (qnext
 * or dnext). */
static struct sk_store_job *reversed(struct sk_store_job *j, size_t at)
{
    struct sk_store_job *rev = NULL;
    for (struct sk_store_job *next; j; rev = j, j = next) {
        struct sk_store_job **link = (struct sk_store_job **)((char *)j + at);
        next = *link;
        *link = rev;
    }
    return rev;
}

/* Under mu: the inbox (newest first) appended to the queue, oldest first. */
static void take_inbox_locked(sk_store_pool *p)
{
    struct sk_store_job *j = atomic_exchange(&p->inbox, NULL);
    for (j = reversed(j, offsetof(struct sk_store_job, qnext)); j; j = j->qnext) {
        if (p->qtail)
            p->qtail->qnext = j;
        else
            p->qhead = j;
        p->qtail = j;
    }
}

/* A pool thread's next job (the oldest), or NULL. */
static struct sk_store_job *next_job(sk_store_pool *p)
{
    pthread_mutex_lock(&p->mu);
    if (!p->qhead) take_inbox_locked(p);
    struct sk_store_job *j = p->qhead;
    if (j) {
        p->qhead = j->qnext;
        if (!p->qhead) p->qtail = NULL;
        j->qnext = NULL;
    }
    pthread_mutex_unlock(&p->mu);
    return j;
}

/* Pool threads run behind their owner: under contention for the CPU the
 * owner's thread (an event loop answering purchases) goes first, and the
 * store calls, which wait for a database anyway, take what is left. Only
 * ever lowers the priority (no privilege needed); best effort. */
static void lower_priority(void)
{
    id_t tid = (id_t)syscall(SYS_gettid);
    errno = 0;
    int cur = getpriority(PRIO_PROCESS, tid);
    if (cur == -1 && errno) return;
    int want = cur + SK_STORE_POOL_NICE > 19 ? 19 : cur + SK_STORE_POOL_NICE;
    setpriority(PRIO_PROCESS, tid, want); /* Linux: per thread */
}

static void *worker_main(void *argp)
{
    struct worker_arg wa = *(struct worker_arg *)argp;
    free(argp);
    sk_store_pool *p = wa.p;
    lower_priority();
    for (;;) {
        while (sem_wait(&p->work) < 0 && errno == EINTR) {
        }
        if (atomic_load(&p->stopping)) break; /* free completes what is left */
        /* one post per job pushed: there is one for this wake-up */
        struct sk_store_job *j = next_job(p);
        if (!j) continue;
        int st = J_QUEUED;
        if (!atomic_compare_exchange_strong(&j->state, &st, J_RUNNING)) {
            unref(j); /* cancelled: the owner completed it already */
            continue;
        }
        atomic_fetch_sub(&p->waiting, 1);
        if (j->deadline_ms && sk_mono_ms() >= j->deadline_ms) {
            /* waited too long: whoever asked has been answered already */
            atomic_fetch_add(&p->expired, 1);
            atomic_store(&j->state, J_DONE);
            complete(p, j, SK_ETIMEDOUT);
            continue;
        }
        atomic_fetch_add(&p->ran, 1);
        atomic_fetch_add(&p->running, 1);
        int rc = j->run(wa.st, j->arg);
        atomic_fetch_sub(&p->running, 1);
        atomic_store(&j->state, J_DONE);
        complete(p, j, rc);
    }
    return NULL;
}

/* Starts thread i with handle st; pool threads take no signals (the
 * owner's loop handles SIGTERM; a signal in a thread would only cut its
 * poll() short). 0 or -1. */
static int start_thread(sk_store_pool *p, int i)
{
    struct worker_arg *wa = malloc(sizeof *wa);
    if (!wa) return -1;
    wa->p = p;
    wa->st = p->stores[i];
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&p->tids[i], NULL, worker_main, wa);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        free(wa);
        return -1;
    }
    return 0;
}

/* sk_store_pool_new and sk_store_pool_new_waiting (store_pool.h). */
static int pool_new(sk_store_pool **out, const char *spec, int threads, int queue_max, int waiting,
                    const char *down, char *err, size_t cap)
{
    *out = NULL;
    if (err && cap) err[0] = 0;
    if (threads < 1 || threads > SK_STORE_POOL_THREADS_MAX || queue_max < 1)
        return sk_einval(err, cap, "store pool: threads must be 1..%d and the queue at least 1",
                         SK_STORE_POOL_THREADS_MAX);
    sk_store_pool *p = calloc(1, sizeof *p);
    if (!p) goto oom;
    p->efd = -1;
    p->queue_max = queue_max;
    pthread_mutex_init(&p->mu, NULL);
    sem_init(&p->work, 0, 0);
    p->tids = calloc((size_t)threads, sizeof *p->tids);
    p->stores = calloc((size_t)threads, sizeof *p->stores);
    if (!p->tids || !p->stores) goto oom;
    p->nthreads = threads;
    p->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (p->efd < 0) {
        if (err && cap) snprintf(err, cap, "store pool: eventfd: %s", strerror(errno));
        sk_store_pool_free(p);
        return SK_EIO;
    }
    char why[256] = "";
    if (waiting && down && down[0]) snprintf(why, sizeof why, "%s", down);
    for (int i = 0; i < threads; i++) {
        /* once one handle found the server down the others do not try:
         * an unreachable host would cost each the connect timeout */
        int mode = !waiting ? SK_STORE_CONNECT : why[0] ? SK_STORE_LATER : SK_STORE_TRY;
        int rc = sk_store_open_mode(&p->stores[i], spec, mode, err, cap);
        if (rc < 0) {
            sk_store_pool_free(p);
            return rc;
        }
        if (waiting && err && cap && err[0] && !why[0]) snprintf(why, sizeof why, "%s", err);
    }
    if (err && cap) snprintf(err, cap, "%s", why);
    for (int i = 0; i < threads; i++) {
        if (start_thread(p, i) < 0) {
            if (err && cap) snprintf(err, cap, "store pool: cannot start thread %d", i);
            sk_store_pool_free(p);
            return SK_ENOMEM;
        }
        p->started++;
    }
    *out = p;
    return 0;
oom:
    if (err && cap) snprintf(err, cap, "store pool: out of memory");
    sk_store_pool_free(p);
    return SK_ENOMEM;
}

int sk_store_pool_new(sk_store_pool **out, const char *spec, int threads, int queue_max, char *err,
                      size_t cap)
{
    return pool_new(out, spec, threads, queue_max, 0, NULL, err, cap);
}

int sk_store_pool_new_waiting(sk_store_pool **out, const char *spec, int threads, int queue_max,
                              const char *down, char *err, size_t cap)
{
    return pool_new(out, spec, threads, queue_max, 1, down, err, cap);
}

void sk_store_pool_free(sk_store_pool *p)
{
    if (!p) return;
    atomic_store(&p->stopping, 1);
    for (int i = 0; i < p->started; i++)
        sem_post(&p->work);
    for (int i = 0; i < p->started; i++)
        pthread_join(p->tids[i], NULL);
    p->started = 0;
    /* alone now: nobody is waiting for the queued jobs any more, they
     * never run */
    take_inbox_locked(p);
    while (p->qhead) {
        struct sk_store_job *j = p->qhead;
        p->qhead = j->qnext;
        int st = J_QUEUED;
        if (!atomic_compare_exchange_strong(&j->state, &st, J_DONE)) {
            unref(j); /* cancelled: completed already */
            continue;
        }
        atomic_fetch_sub(&p->waiting, 1);
        atomic_fetch_add(&p->expired, 1);
        complete(p, j, SK_ETIMEDOUT);
    }
    p->qtail = NULL;
    sk_store_pool_drain(p); /* every done runs once, even now */
    for (int i = 0; p->stores && i < p->nthreads; i++)
        sk_store_close(p->stores[i]);
    if (p->efd >= 0) close(p->efd);
    sem_destroy(&p->work);
    pthread_mutex_destroy(&p->mu);
    free(p->stores);
    free(p->tids);
    free(p);
}

int sk_store_pool_fd(const sk_store_pool *p)
{
    return p->efd;
}

/* Owner: a queued job leaves the queue without running (its done gets
 * SK_ETIMEDOUT at a drain); 1, or 0 when a thread took it first. The
 * threads' queue keeps its reference until a thread drops it. */
static int take_back(sk_store_pool *p, struct sk_store_job *j)
{
    atomic_fetch_add(&j->refs, 1); /* the done stack's, before a thread can drop the queue's */
    int st = J_QUEUED;
    if (!atomic_compare_exchange_strong(&j->state, &st, J_CANCELLED)) {
        atomic_fetch_sub(&j->refs, 1); /* running or done: the owner still holds it alive */
        return 0;
    }
    atomic_fetch_sub(&p->waiting, 1);
    atomic_fetch_add(&p->expired, 1);
    complete(p, j, SK_ETIMEDOUT);
    return 1;
}

/* With the queue full: the jobs whose deadline passed while they waited
 * leave it now (their done gets SK_ETIMEDOUT) instead of holding places
 * until a thread comes by: with every thread stuck (a frozen database)
 * they would otherwise fill the queue for good. */
static void expire_waiting(sk_store_pool *p)
{
    int64_t now = sk_mono_ms();
    for (struct sk_store_job *j = p->ohead; j; j = j->onext)
        if (j->deadline_ms && now >= j->deadline_ms && atomic_load(&j->state) == J_QUEUED)
            take_back(p, j);
}

int sk_store_pool_submit(sk_store_pool *p, int64_t deadline_ms, sk_store_run_fn run,
                         sk_store_done_fn done, void *arg, sk_store_job **job)
{
    if (job) *job = NULL;
    if (atomic_load(&p->stopping)) return SK_ESTATE;
    if (atomic_load(&p->waiting) >= (size_t)p->queue_max) expire_waiting(p);
    if (atomic_load(&p->waiting) >= (size_t)p->queue_max) {
        atomic_fetch_add(&p->rejected, 1);
        return SK_EBUSY;
    }
    struct sk_store_job *j = malloc(sizeof *j);
    if (!j) return SK_ENOMEM;
    *j = (struct sk_store_job){.run = run,
                               .done = done,
                               .arg = arg,
                               .deadline_ms = deadline_ms,
                               .queued_ms = sk_mono_ms()};
    atomic_init(&j->state, J_QUEUED);
    atomic_init(&j->refs, 1);
    j->oprev = p->otail;
    if (p->otail)
        p->otail->onext = j;
    else
        p->ohead = j;
    p->otail = j;
    atomic_fetch_add(&p->waiting, 1);
    atomic_fetch_add(&p->submitted, 1);
    struct sk_store_job *old = atomic_load(&p->inbox);
    do {
        j->qnext = old;
    } while (!atomic_compare_exchange_weak(&p->inbox, &old, j));
    sem_post(&p->work);
    if (job) *job = j;
    return 0;
}

int sk_store_pool_cancel(sk_store_pool *p, sk_store_job *job)
{
    return take_back(p, job);
}

size_t sk_store_pool_drain(sk_store_pool *p)
{
    uint64_t v;
    while (read(p->efd, &v, sizeof v) < 0 && errno == EINTR) {
    }
    /* One take: what completes from now on writes the eventfd again (it
     * finds the stack empty), so the owner comes back for it; a drain
     * never holds the owner's loop for longer than what was there. */
    struct sk_store_job *j = atomic_exchange(&p->done, NULL);
    size_t ran = 0;
    /* in completion order; a done may submit or cancel: the list is ours */
    for (j = reversed(j, offsetof(struct sk_store_job, dnext)); j;) {
        struct sk_store_job *next = j->dnext;
        if (j->oprev)
            j->oprev->onext = j->onext;
        else
            p->ohead = j->onext;
        if (j->onext)
            j->onext->oprev = j->oprev;
        else
            p->otail = j->oprev;
        j->done(j->arg, j->rc);
        unref(j);
        ran++;
        j = next;
    }
    return ran;
}

void sk_store_pool_stats(sk_store_pool *p, struct sk_store_pool_stats *out)
{
    /* the owner's list is in submit order; before the oldest queued job
     * come only running ones and completions not drained yet */
    int64_t oldest = 0;
    for (struct sk_store_job *j = p->ohead; j && !oldest; j = j->onext)
        if (atomic_load(&j->state) == J_QUEUED) oldest = j->queued_ms;
    *out = (struct sk_store_pool_stats){.oldest_queued_ms = oldest,
                                        .submitted = atomic_load(&p->submitted),
                                        .rejected = atomic_load(&p->rejected),
                                        .ran = atomic_load(&p->ran),
                                        .expired = atomic_load(&p->expired),
                                        .queued = atomic_load(&p->waiting),
                                        .running = atomic_load(&p->running),
                                        .threads = p->nthreads};
}
