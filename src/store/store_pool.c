/* store_pool.c - the store thread pool (store_pool.h): one mutex guards
 * the job queue, the completion list and the counters; a condition wakes
 * idle threads; an eventfd wakes the owner. The eventfd is written only
 * when the completion list goes from empty to not empty, so a burst of
 * completions costs one write and one wake-up. */
#include "store/store_pool.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/error.h"

enum job_state { J_QUEUED, J_RUNNING, J_DONE };

struct sk_store_job {
    sk_store_run_fn run;
    sk_store_done_fn done;
    void *arg;
    int64_t deadline_ms;
    enum job_state state;
    int rc;
    struct sk_store_job *prev, *next; /* in the queue, then in the completions */
};

/* A doubly linked list of jobs (the queue needs cancel from the middle). */
struct job_list {
    struct sk_store_job *head, *tail;
    size_t n;
};

struct sk_store_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct job_list queue, completed;
    int signalled; /* the eventfd was written since the last drain */
    int stopping;
    int efd;
    int queue_max;
    int nthreads, started;
    pthread_t *tids;
    sk_store **stores;
    struct sk_store_pool_stats stats;
};

/* One thread's start argument. */
struct worker_arg {
    sk_store_pool *p;
    sk_store *st;
};

static void list_push(struct job_list *l, struct sk_store_job *j)
{
    j->next = NULL;
    j->prev = l->tail;
    if (l->tail)
        l->tail->next = j;
    else
        l->head = j;
    l->tail = j;
    l->n++;
}

static void list_unlink(struct job_list *l, struct sk_store_job *j)
{
    if (j->prev)
        j->prev->next = j->next;
    else
        l->head = j->next;
    if (j->next)
        j->next->prev = j->prev;
    else
        l->tail = j->prev;
    j->prev = j->next = NULL;
    l->n--;
}

/* Under mu: j is finished (ran or expired); returns 1 when the eventfd
 * must be written (after unlocking). */
static int complete_locked(sk_store_pool *p, struct sk_store_job *j, int rc)
{
    j->state = J_DONE;
    j->rc = rc;
    list_push(&p->completed, j);
    if (p->signalled) return 0;
    p->signalled = 1;
    return 1;
}

static void wake_owner(sk_store_pool *p)
{
    uint64_t one = 1;
    /* EAGAIN: the counter is full, so it is readable anyway */
    while (write(p->efd, &one, sizeof one) < 0 && errno == EINTR) {
    }
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
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->queue.head && !p->stopping)
            pthread_cond_wait(&p->cv, &p->mu);
        if (!p->queue.head) break; /* stopping, nothing left */
        struct sk_store_job *j = p->queue.head;
        list_unlink(&p->queue, j);
        int wake;
        if (j->deadline_ms && sk_mono_ms() >= j->deadline_ms) {
            /* waited too long: whoever asked has been answered already */
            p->stats.expired++;
            wake = complete_locked(p, j, SK_ETIMEDOUT);
        } else {
            j->state = J_RUNNING;
            p->stats.ran++;
            p->stats.running++;
            pthread_mutex_unlock(&p->mu);
            int rc = j->run(wa.st, j->arg);
            pthread_mutex_lock(&p->mu);
            p->stats.running--;
            wake = complete_locked(p, j, rc);
        }
        if (wake) {
            pthread_mutex_unlock(&p->mu);
            wake_owner(p);
            pthread_mutex_lock(&p->mu);
        }
    }
    pthread_mutex_unlock(&p->mu);
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

int sk_store_pool_new(sk_store_pool **out, const char *spec, int threads, int queue_max, char *err,
                      size_t cap)
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
    p->stats.threads = threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
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
    for (int i = 0; i < threads; i++) {
        int rc = sk_store_open(&p->stores[i], spec, err, cap);
        if (rc < 0) {
            sk_store_pool_free(p);
            return rc;
        }
    }
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

void sk_store_pool_free(sk_store_pool *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stopping = 1;
    /* nobody is waiting for these any more: they never run */
    while (p->queue.head) {
        struct sk_store_job *j = p->queue.head;
        list_unlink(&p->queue, j);
        p->stats.expired++;
        complete_locked(p, j, SK_ETIMEDOUT);
    }
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->started; i++)
        pthread_join(p->tids[i], NULL);
    p->started = 0;
    sk_store_pool_drain(p); /* every done runs once, even now */
    for (int i = 0; p->stores && i < p->nthreads; i++)
        sk_store_close(p->stores[i]);
    if (p->efd >= 0) close(p->efd);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p->stores);
    free(p->tids);
    free(p);
}

int sk_store_pool_fd(const sk_store_pool *p)
{
    return p->efd;
}

/* Under mu, with the queue full: the jobs whose deadline passed while
 * they waited leave it now (their done gets SK_ETIMEDOUT) instead of
 * holding places until a thread comes by: with every thread stuck (a
 * frozen database) they would otherwise fill the queue for good. Returns
 * 1 when the eventfd must be written. */
static int expire_waiting_locked(sk_store_pool *p)
{
    int64_t now = sk_mono_ms();
    int wake = 0;
    for (struct sk_store_job *j = p->queue.head, *next; j; j = next) {
        next = j->next;
        if (!j->deadline_ms || now < j->deadline_ms) continue;
        list_unlink(&p->queue, j);
        p->stats.expired++;
        wake |= complete_locked(p, j, SK_ETIMEDOUT);
    }
    return wake;
}

int sk_store_pool_submit(sk_store_pool *p, int64_t deadline_ms, sk_store_run_fn run,
                         sk_store_done_fn done, void *arg, sk_store_job **job)
{
    if (job) *job = NULL;
    struct sk_store_job *j = malloc(sizeof *j);
    if (!j) return SK_ENOMEM;
    *j = (struct sk_store_job){
        .run = run, .done = done, .arg = arg, .deadline_ms = deadline_ms, .state = J_QUEUED};
    pthread_mutex_lock(&p->mu);
    int rc = 0, wake = 0;
    if (!p->stopping && p->queue.n >= (size_t)p->queue_max) wake = expire_waiting_locked(p);
    if (p->stopping) {
        rc = SK_ESTATE;
    } else if (p->queue.n >= (size_t)p->queue_max) {
        p->stats.rejected++;
        rc = SK_EBUSY;
    } else {
        list_push(&p->queue, j);
        p->stats.submitted++;
        pthread_cond_signal(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    if (wake) wake_owner(p);
    if (rc) {
        free(j);
        return rc;
    }
    if (job) *job = j;
    return 0;
}

int sk_store_pool_cancel(sk_store_pool *p, sk_store_job *job)
{
    pthread_mutex_lock(&p->mu);
    int taken = job->state == J_QUEUED;
    int wake = 0;
    if (taken) {
        list_unlink(&p->queue, job);
        p->stats.expired++;
        wake = complete_locked(p, job, SK_ETIMEDOUT);
    }
    pthread_mutex_unlock(&p->mu);
    if (wake) wake_owner(p);
    return taken;
}

size_t sk_store_pool_drain(sk_store_pool *p)
{
    uint64_t v;
    while (read(p->efd, &v, sizeof v) < 0 && errno == EINTR) {
    }
    /* One take: what completes from now on writes the eventfd again (the
     * flag is cleared), so the owner comes back for it; a drain never
     * holds the owner's loop for longer than what was there. */
    pthread_mutex_lock(&p->mu);
    struct job_list done = p->completed;
    p->completed = (struct job_list){0};
    p->signalled = 0;
    pthread_mutex_unlock(&p->mu);
    size_t ran = 0;
    /* a done may submit or cancel: the list is ours, the lock free */
    for (struct sk_store_job *j = done.head, *next; j; j = next) {
        next = j->next;
        j->done(j->arg, j->rc);
        free(j);
        ran++;
    }
    return ran;
}

void sk_store_pool_stats(sk_store_pool *p, struct sk_store_pool_stats *out)
{
    pthread_mutex_lock(&p->mu);
    *out = p->stats;
    out->queued = p->queue.n;
    pthread_mutex_unlock(&p->mu);
}
