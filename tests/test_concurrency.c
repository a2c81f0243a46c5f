/* test_concurrency.c - the invariants (docs/design.md) under real concurrency,
 * against the run's real redis-server:
 *   1  no oversell: admitted units == stock exactly, stock never < 0;
 *   3  the per-user limit holds across connections, retries and processes;
 *   6  a release never lifts stock above initial and happens once per order.
 * Load = several forked processes x threads, every thread with its own
 * connection, all released at once by a process-shared barrier. Every
 * result is recorded in MAP_SHARED memory and cross-checked against what
 * Redis holds (stock, buyers hash, order stream, released set), while a
 * monitor process polls the stock during the load.
 * Also keeps the naive check-then-act implementation (GET, then SET) that
 * oversells under the same load: the demonstration of why admission is one
 * Lua script. (Invariant 4, nothing sold while closed, is tested elsewhere.)
 *
 * Worker and monitor processes never use CHECK (an exit() from one thread
 * would end its process mid-load and tell the test process nothing): they
 * record failures in shared memory and _exit; the test process checks
 * after every child is reaped. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/codes.h"
#include "core/error.h"
#include "engine/keys.h"
#include "engine/stock.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/http_load_env.h"

/* Bounded waits: a stuck worker is killed by its alarm, a stuck test by its
 * own, so a deadlock fails the test instead of hanging the run. */
#define WORKER_ALARM_S 120
#define CONC_ALARM_S 200
#define CONNECT_MS 2000
#define COMMAND_MS 5000

#define MAX_PROCS 8
#define MAX_THREADS 50
#define MAX_ATTEMPTS 20000
#define MAX_ORDERS 4096
#define MAX_BATCH 16
#define RC_UNSET (-1000) /* an attempt no worker answered */

/* The seeds' load: 8 processes x 50 connections, 20,000 attempts, 5,000 users. */
#define BIG_PROCS 8
#define BIG_THREADS 50
#define BIG_ATTEMPTS 20000
#define BIG_USERS 5000
#define BIG_STOCK 1000
#define LIMIT 2
#define MAX_QTY 3 /* above LIMIT on purpose: quantity 3 must come back LIMIT_EXCEEDED */

struct attempt {
    uint32_t user;
    int32_t qty;
    int32_t rc; /* SK_RC_*, a negative SK_E* on transport failure, or RC_UNSET */
    char order_id[SK_ORDER_ID_MAX];
};

/* An accepted order published for the releasers (test 2). */
struct order {
    atomic_int ready; /* set last, after the fields below are written */
    uint32_t user;
    int32_t qty;
    char id[SK_ORDER_ID_MAX];
    atomic_int n_released, n_already, n_other;
    atomic_llong given;
};

enum mode { ENGINE, NAIVE };

struct arena;
typedef void (*load_fn)(struct arena *A, int proc, int thr, sk_redis *r);

/* Everything shared by the test process, its workers and its monitor:
 * one MAP_SHARED|MAP_ANONYMOUS mapping made before any fork. */
struct arena {
    pthread_barrier_t start;
    atomic_int errors; /* transport, setup or protocol failures anywhere */
    atomic_int msg_claimed;
    char msg[320]; /* the first failure, for the report */

    /* the load */
    int nproc, nthr;
    load_fn fn;
    enum mode mode;
    uint64_t aid;
    int64_t initial;
    char naive_key[64];
    atomic_llong naive_sold; /* units the naive code believes it sold */
    size_t nattempts, per_thread;
    struct attempt att[MAX_ATTEMPTS];

    /* releases (test 2) */
    int releasers_per_proc, npurchasers;
    atomic_int purchasers_done;
    atomic_int norders;
    struct order orders[MAX_ORDERS];

    /* monitor: written by the monitor process only, read after it is reaped */
    atomic_int monitor_ready, monitor_stop;
    int64_t mon_min, mon_max, mon_samples, mon_snapshots, mon_bad_snapshots;
    char mon_msg[256];
};

static void note_failure(struct arena *A, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void note_failure(struct arena *A, const char *fmt, ...)
{
    atomic_fetch_add(&A->errors, 1);
    int expected = 0;
    if (atomic_compare_exchange_strong(&A->msg_claimed, &expected, 1)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(A->msg, sizeof A->msg, fmt, ap);
        va_end(ap);
    }
}

static struct arena *arena_new(void)
{
    struct arena *A =
        mmap(NULL, sizeof *A, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK_MSG(A != MAP_FAILED, "mmap: %s", strerror(errno));
    /* Anonymous mappings are zeroed: every counter starts at 0. */
    for (size_t i = 0; i < MAX_ATTEMPTS; i++)
        A->att[i].rc = RC_UNSET;
    return A;
}

static void arena_free(struct arena *A)
{
    munmap(A, sizeof *A);
}

/* n attempts from users 1..nusers: users nhot+1.. appear at least once,
 * users 1..nhot (the retriers) hot_reps times each, the rest uniformly at
 * random; shuffled; quantity 1..3. */
static void build_workload(struct arena *A, size_t n, uint32_t nusers, uint32_t nhot,
                           uint32_t hot_reps, uint64_t seed)
{
    CHECK(n <= MAX_ATTEMPTS);
    uint64_t s = seed;
    static uint32_t users[MAX_ATTEMPTS];
    sk_th_buyers(users, n, nusers, nhot, hot_reps, &s);
    for (size_t i = 0; i < n; i++)
        A->att[i].user = users[i];
    for (size_t i = 0; i < n; i++)
        A->att[i].qty = 1 + (int32_t)(sk_th_rng(&s) % 3);
    A->nattempts = n;
}

/* ---- the load: processes x threads, one connection each ---- */

struct targ {
    struct arena *A;
    int proc, thr;
};

static void *load_thread(void *arg)
{
    struct targ *t = arg;
    struct arena *A = t->A;
    char err[256] = "";
    sk_redis *r = NULL;
    int rc = sk_redis_new(&r, sk_th_redis_url(), CONNECT_MS, COMMAND_MS, err, sizeof err);
    if (rc == 0 && (rc = sk_redis_connect(r)) < 0) snprintf(err, sizeof err, "%s", r->errstr);
    if (rc < 0) {
        note_failure(A, "proc %d thread %d: connect: %s", t->proc, t->thr, err);
        sk_redis_free(r);
        r = NULL;
    }
    /* Connect first, then everyone starts at once: maximal contention. */
    pthread_barrier_wait(&A->start);
    A->fn(A, t->proc, t->thr, r); /* called even without r, so counters it keeps stay right */
    sk_redis_free(r);
    return NULL;
}

static void worker_process(struct arena *A, int proc) __attribute__((noreturn));
static void worker_process(struct arena *A, int proc)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    alarm(WORKER_ALARM_S);
    pthread_t th[MAX_THREADS];
    struct targ ta[MAX_THREADS];
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 512 * 1024); /* 50 threads x 8 MB default is wasteful */
    for (int t = 0; t < A->nthr; t++) {
        ta[t] = (struct targ){A, proc, t};
        int e = pthread_create(&th[t], &attr, load_thread, &ta[t]);
        if (e) {
            /* The barrier can no longer fill: the alarms end the load. */
            note_failure(A, "proc %d: pthread_create: %s", proc, strerror(e));
            _exit(1);
        }
    }
    for (int t = 0; t < A->nthr; t++)
        pthread_join(th[t], NULL);
    _exit(0); /* not exit(): no atexit handlers, no stdio buffers inherited from the test */
}

static void wait_child(struct arena *A, pid_t pid, const char *what)
{
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) {
            note_failure(A, "waitpid %s: %s", what, strerror(errno));
            return;
        }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        note_failure(A, "%s pid %d %s %d", what, (int)pid,
                     WIFSIGNALED(st) ? "killed by signal" : "exited with",
                     WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
}

/* Runs A->fn on nproc x nthr connections and returns when all are done. */
static void run_load(struct arena *A, int nproc, int nthr, load_fn fn)
{
    CHECK(nproc <= MAX_PROCS && nthr <= MAX_THREADS);
    A->nproc = nproc;
    A->nthr = nthr;
    A->fn = fn;
    pthread_barrierattr_t ba;
    pthread_barrierattr_init(&ba);
    pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
    CHECK_EQ(pthread_barrier_init(&A->start, &ba, (unsigned)(nproc * nthr)), 0);
    pthread_barrierattr_destroy(&ba);
    fflush(NULL);
    pid_t pids[MAX_PROCS];
    for (int p = 0; p < nproc; p++) {
        pids[p] = fork();
        if (pids[p] == 0) worker_process(A, p);
        if (pids[p] < 0) {
            /* Those already forked die by their alarm or with this process. */
            CHECK_MSG(0, "fork: %s", strerror(errno));
        }
    }
    for (int p = 0; p < nproc; p++)
        wait_child(A, pids[p], "worker");
    pthread_barrier_destroy(&A->start);
}

/* ---- the monitor: polls GET stock while the load runs ---- */

static int64_t reply_int(const redisReply *rep, int *ok)
{
    *ok = 0;
    if (!rep) return 0;
    if (rep->type == REDIS_REPLY_INTEGER) {
        *ok = 1;
        return rep->integer;
    }
    if (rep->type == REDIS_REPLY_STRING) {
        char *end;
        errno = 0;
        long long v = strtoll(rep->str, &end, 10);
        *ok = errno == 0 && end != rep->str && *end == 0;
        return v;
    }
    return 0;
}

static void monitor_process(struct arena *A) __attribute__((noreturn));
static void monitor_process(struct arena *A)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    alarm(WORKER_ALARM_S);
    char err[256];
    sk_redis *r = NULL;
    if (sk_redis_new(&r, sk_th_redis_url(), CONNECT_MS, COMMAND_MS, err, sizeof err) < 0) {
        note_failure(A, "monitor: %s", err);
        atomic_store(&A->monitor_ready, 1);
        _exit(1);
    }
    struct sk_keys k;
    sk_keys_for(&k, A->aid);
    A->mon_min = INT64_MAX;
    A->mon_max = INT64_MIN;
    for (int64_t n = 0;; n++) {
        int stop = atomic_load(&A->monitor_stop); /* read before the sample: one more after */
        redisReply *rep;
        if (sk_redis_cmd(r, &rep, "GET %s", k.stock) < 0) {
            note_failure(A, "monitor GET: %s", r->errstr);
            break;
        }
        int ok;
        int64_t v = reply_int(rep, &ok);
        freeReplyObject(rep);
        if (!ok) {
            note_failure(A, "monitor: stock is not an integer");
            break;
        }
        if (v < A->mon_min) A->mon_min = v;
        if (v > A->mon_max) A->mon_max = v;
        A->mon_samples++;
        if (n == 0) atomic_store(&A->monitor_ready, 1);
        /* Now and then a whole snapshot (one script, one instant): the
         * engine's invariant stock + units held == initial at every instant. */
        if (n % 16 == 0) {
            struct sk_stock_state st;
            if (sk_stock_state(r, A->aid, &st) < 0) {
                note_failure(A, "monitor state: %s", r->errstr);
                break;
            }
            A->mon_snapshots++;
            if (st.remaining + st.held != A->initial || st.remaining < 0 ||
                st.remaining > A->initial) {
                if (A->mon_bad_snapshots++ == 0)
                    snprintf(A->mon_msg, sizeof A->mon_msg,
                             "snapshot: remaining %" PRId64 " + held %" PRId64
                             " != initial %" PRId64,
                             st.remaining, st.held, A->initial);
            }
        }
        if (stop) break;
    }
    sk_redis_free(r);
    atomic_store(&A->monitor_ready, 1);
    _exit(0);
}

static pid_t monitor_start(struct arena *A)
{
    fflush(NULL);
    pid_t pid = fork();
    CHECK_MSG(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) monitor_process(A);
    /* Wait for its first sample so it observes the whole load (bounded). */
    int64_t deadline = sk_mono_ms() + 10000;
    while (!atomic_load(&A->monitor_ready)) {
        if (sk_mono_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            CHECK_MSG(0, "monitor did not start");
        }
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return pid;
}

static void monitor_stop(struct arena *A, pid_t pid)
{
    atomic_store(&A->monitor_stop, 1);
    wait_child(A, pid, "monitor");
}

/* ---- workers ---- */

static void publish_order(struct arena *A, const struct attempt *a)
{
    int j = atomic_fetch_add(&A->norders, 1);
    if (j >= MAX_ORDERS) {
        note_failure(A, "more than %d orders", MAX_ORDERS);
        return;
    }
    struct order *o = &A->orders[j];
    o->user = a->user;
    o->qty = a->qty;
    memcpy(o->id, a->order_id, sizeof o->id);
    atomic_store_explicit(&o->ready, 1, memory_order_release);
}

static void record(struct arena *A, size_t i, int rc, const struct sk_admission *res, sk_redis *r)
{
    struct attempt *a = &A->att[i];
    if (rc < 0) {
        a->rc = rc;
        note_failure(A, "purchase of user %" PRIu32 ": %s (%s)", a->user, sk_strerror(rc),
                     r->errstr);
        return;
    }
    a->rc = res->rc;
    if (res->rc == SK_RC_OK) {
        memcpy(a->order_id, res->order_id, sizeof a->order_id);
        if (A->releasers_per_proc) publish_order(A, a);
    }
}

/* The naive admission: read, decide in the client, write back. Between
 * this GET and the SET below, other clients run their own GET/SET; several
 * read the same stock, each "sells" and each writes stock - qty, so the
 * last SET wins and units are counted as sold that were never subtracted
 * (a lost update). GET then DECRBY loses differently: stock goes negative.
 * Either way the check and the act must be one atomic step (our script). */
static int naive_purchase(sk_redis *r, const char *key, int32_t qty)
{
    redisReply *rep;
    int rc = sk_redis_cmd(r, &rep, "GET %s", key);
    if (rc < 0) return rc;
    int ok;
    int64_t stock = reply_int(rep, &ok);
    freeReplyObject(rep);
    if (!ok) return SK_EPROTO;
    if (stock < qty) return stock <= 0 ? SK_RC_SOLD_OUT : SK_RC_INSUFFICIENT;
    rc = sk_redis_cmd(r, &rep, "SET %s %lld", key, (long long)(stock - qty));
    if (rc < 0) return rc;
    freeReplyObject(rep);
    return SK_RC_OK;
}

/* Attempts [begin, end): one call each, or batches of 1..MAX_BATCH. */
static void buy_range(struct arena *A, sk_redis *r, size_t begin, size_t end, int batched,
                      uint64_t seed)
{
    uint64_t s = seed;
    size_t i = begin;
    while (i < end) {
        if (A->mode == NAIVE) {
            int rc = naive_purchase(r, A->naive_key, A->att[i].qty);
            if (rc < 0) note_failure(A, "naive: %s (%s)", sk_strerror(rc), r->errstr);
            if (rc == SK_RC_OK) atomic_fetch_add(&A->naive_sold, A->att[i].qty);
            A->att[i++].rc = rc;
        } else if (!batched) {
            struct sk_admission res;
            int rc = sk_th_buy(r, A->aid, A->att[i].user, A->att[i].qty, &res, NULL);
            record(A, i++, rc, &res, r);
        } else {
            size_t n = 1 + (size_t)(sk_th_rng(&s) % MAX_BATCH);
            if (n > end - i) n = end - i;
            struct sk_purchase p[MAX_BATCH];
            struct sk_admission res[MAX_BATCH];
            for (size_t j = 0; j < n; j++)
                p[j] = (struct sk_purchase){.user_id = A->att[i + j].user,
                                            .quantity = A->att[i + j].qty};
            int rc = sk_stock_buy(r, A->aid, NULL, p, n, res, NULL);
            for (size_t j = 0; j < n; j++)
                record(A, i + j, rc, &res[j], r);
            i += n;
        }
    }
}

/* Thread g of the load takes attempts [g * per_thread, (g + 1) * per_thread);
 * even threads call purchase, odd ones purchase_batch. */
static void buy_fn(struct arena *A, int proc, int thr, sk_redis *r)
{
    size_t g = (size_t)(proc * A->nthr + thr);
    size_t begin = g * A->per_thread, end = begin + A->per_thread;
    if (end > A->nattempts) end = A->nattempts;
    if (r && begin < end) buy_range(A, r, begin, end, (int)(g % 2), 1000 + g);
}

/* Test 2: threads 0..releasers_per_proc-1 of every process release; the
 * others buy and publish their accepted orders. */
static void release_orders(struct arena *A, int group, sk_redis *r)
{
    /* Releaser `group` of every process walks the same orders in the same
     * sequence (even slots j with (j / 2) % groups == group), so nproc
     * connections race to release each of them: odd slots are kept. */
    int groups = A->releasers_per_proc;
    for (int m = 0;;) {
        int done = atomic_load(&A->purchasers_done) == A->npurchasers; /* before norders */
        int n = atomic_load(&A->norders);
        int j = 2 * (group + m * groups);
        if (j < n && j < MAX_ORDERS) {
            struct order *o = &A->orders[j];
            while (!atomic_load_explicit(&o->ready, memory_order_acquire))
                sched_yield();
            int rc;
            int64_t given = 0;
            int e = sk_stock_release(r, A->aid, o->id, o->user, o->qty, &rc, &given);
            if (e < 0) {
                note_failure(A, "release %s: %s (%s)", o->id, sk_strerror(e), r->errstr);
            } else if (rc == SK_RC_RELEASED) {
                atomic_fetch_add(&o->n_released, 1);
                atomic_fetch_add(&o->given, given);
            } else if (rc == SK_RC_ALREADY_RELEASED) {
                atomic_fetch_add(&o->n_already, 1);
            } else {
                atomic_fetch_add(&o->n_other, 1);
            }
            m++;
            continue;
        }
        if (done) return;
        /* Polling for the next published order, not timing anything. */
        struct timespec ts = {0, 100 * 1000};
        nanosleep(&ts, NULL);
    }
}

static void mixed_fn(struct arena *A, int proc, int thr, sk_redis *r)
{
    if (thr < A->releasers_per_proc) {
        if (r) release_orders(A, thr, r);
        return;
    }
    int per_proc = A->nthr - A->releasers_per_proc;
    size_t g = (size_t)(proc * per_proc + (thr - A->releasers_per_proc));
    size_t begin = g * A->per_thread, end = begin + A->per_thread;
    if (r) buy_range(A, r, begin, end, (int)(g % 2), 2000 + g);
    atomic_fetch_add(&A->purchasers_done, 1);
}

/* ---- checks against Redis ---- */

static sk_redis *connect_or_fail(void)
{
    char err[256];
    sk_redis *r;
    CHECK_MSG(sk_redis_new(&r, sk_th_redis_url(), CONNECT_MS, COMMAND_MS, err, sizeof err) == 0,
              "sk_redis_new: %s", err);
    return r;
}

static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 1024 && rl.rlim_max > rl.rlim_cur) {
        rl.rlim_cur = rl.rlim_max < 1024 ? rl.rlim_max : 1024;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static int64_t get_int(sk_redis *r, const char *key)
{
    redisReply *rep;
    CHECK_MSG(sk_redis_cmd(r, &rep, "GET %s", key) == 0, "GET %s: %s", key, r->errstr);
    int ok;
    int64_t v = reply_int(rep, &ok);
    freeReplyObject(rep);
    CHECK_MSG(ok, "GET %s: not an integer", key);
    return v;
}

static int64_t int_cmd(sk_redis *r, const char *cmd, const char *key)
{
    redisReply *rep;
    CHECK_MSG(sk_redis_cmd(r, &rep, "%s %s", cmd, key) == 0, "%s %s: %s", cmd, key, r->errstr);
    CHECK_MSG(rep->type == REDIS_REPLY_INTEGER, "%s %s: not an integer", cmd, key);
    int64_t v = rep->integer;
    freeReplyObject(rep);
    return v;
}

/* HGETALL buyers into held[user] (users 1..maxuser, others fail the test);
 * returns the sum of units held. */
static int64_t buyers_hash(sk_redis *r, uint64_t aid, int64_t *held, uint32_t maxuser)
{
    struct sk_keys k;
    sk_keys_for(&k, aid);
    redisReply *rep;
    CHECK_MSG(sk_redis_cmd(r, &rep, "HGETALL %s", k.buyers) == 0, "HGETALL: %s", r->errstr);
    CHECK(rep->type == REDIS_REPLY_ARRAY && rep->elements % 2 == 0);
    memset(held, 0, sizeof *held * (maxuser + 1));
    int64_t sum = 0;
    for (size_t i = 0; i < rep->elements; i += 2) {
        int ok1, ok2;
        int64_t u = reply_int(rep->element[i], &ok1), v = reply_int(rep->element[i + 1], &ok2);
        CHECK_MSG(ok1 && ok2 && u >= 1 && u <= (int64_t)maxuser,
                  "buyers hash has an unexpected entry %s", rep->element[i]->str);
        held[u] = v;
        sum += v;
    }
    freeReplyObject(rep);
    return sum;
}

/* An attempt looked for among its entry's orders (sk_th_entry_orders). */
struct lookup {
    const struct attempt *a;
    int seen;
};

static void match_order(void *arg, const struct sk_order *o)
{
    struct lookup *l = arg;
    const struct attempt *a = l->a;
    if (strcmp(o->order_id, a->order_id) != 0) return;
    CHECK_MSG(o->user_id == a->user && o->quantity == a->qty,
              "order %s: stream says uid %" PRIu64 " qty %" PRId64 ", caller saw user %" PRIu32
              " qty %" PRId32,
              a->order_id, o->user_id, o->quantity, a->user, a->qty);
    l->seen = 1;
}

/* The stream entry behind an order id ("<aid>-<stream id>-<branch>[-<i>]")
 * holds the order, with its uid and qty, under the id the caller got. */
static void check_stream_entry(sk_redis *r, uint64_t aid, const struct attempt *a)
{
    struct sk_keys k;
    sk_keys_for(&k, aid);
    char prefix[32];
    snprintf(prefix, sizeof prefix, "%" PRIu64 "-", aid);
    size_t pl = strlen(prefix);
    CHECK_MSG(strncmp(a->order_id, prefix, pl) == 0, "order id %s lacks prefix %s", a->order_id,
              prefix);
    char sid[64];
    sk_th_order_sid(a->order_id, sid, sizeof sid);
    redisReply *rep;
    CHECK_MSG(sk_redis_cmd(r, &rep, "XRANGE %s %s %s", k.orders, sid, sid) == 0, "XRANGE: %s",
              r->errstr);
    CHECK_MSG(rep->type == REDIS_REPLY_ARRAY && rep->elements == 1, "order %s: no stream entry",
              a->order_id);
    struct lookup l = {a, 0};
    sk_th_entry_orders(rep->element[0], k.label, match_order, &l);
    freeReplyObject(rep);
    CHECK_MSG(l.seen, "order %s: its stream entry does not hold it", a->order_id);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Accepted order ids are pairwise distinct. */
static void check_unique_ids(const char **ids, size_t n)
{
    qsort(ids, n, sizeof *ids, cmp_str);
    for (size_t i = 1; i < n; i++)
        CHECK_MSG(strcmp(ids[i - 1], ids[i]) != 0, "order id %s issued twice", ids[i]);
}

static void check_no_failures(struct arena *A)
{
    CHECK_MSG(atomic_load(&A->errors) == 0, "%d failures in workers, first: %s",
              atomic_load(&A->errors), A->msg);
}

static void check_monitor(struct arena *A)
{
    CHECK_MSG(A->mon_samples > 0, "monitor took no sample");
    CHECK_MSG(A->mon_min >= 0, "stock seen at %" PRId64, A->mon_min);
    CHECK_MSG(A->mon_max <= A->initial, "stock seen at %" PRId64 " above initial %" PRId64,
              A->mon_max, A->initial);
    CHECK_MSG(A->mon_bad_snapshots == 0, "%" PRId64 " bad snapshots, first: %s",
              A->mon_bad_snapshots, A->mon_msg);
}

/* A refusal the load may legitimately get: stock or per-user limit. */
static int expected_refusal(int rc)
{
    return rc == SK_RC_SOLD_OUT || rc == SK_RC_INSUFFICIENT || rc == SK_RC_LIMIT_EXCEEDED;
}

/* Every accepted order id is distinct and its stream entry matches the
 * caller's user and quantity. Returns the number of accepted orders. */
static int64_t check_accepted_orders(sk_redis *r, struct arena *A)
{
    static const char *ids[MAX_ATTEMPTS];
    size_t n = 0;
    for (size_t i = 0; i < A->nattempts; i++) {
        if (A->att[i].rc != SK_RC_OK) continue;
        check_stream_entry(r, A->aid, &A->att[i]);
        ids[n++] = A->att[i].order_id;
    }
    check_unique_ids(ids, n);
    return (int64_t)n;
}

/* Every attempt was answered with an acceptance or an expected refusal. */
static void check_answers(struct arena *A, int64_t *units, int64_t refused[SK_RC_COUNT_])
{
    *units = 0;
    for (size_t i = 0; i < A->nattempts; i++) {
        const struct attempt *a = &A->att[i];
        CHECK_MSG(a->rc != RC_UNSET, "attempt %zu never answered", i);
        CHECK_MSG(a->rc == SK_RC_OK || expected_refusal(a->rc), "attempt %zu: unexpected %s (%d)",
                  i, sk_rc_name(a->rc), a->rc);
        if (a->rc != SK_RC_OK) {
            refused[a->rc]++;
            continue;
        }
        /* quantity 3 > per-user limit 2 can never be admitted */
        CHECK_MSG(a->qty <= LIMIT, "quantity %" PRId32 " admitted over the limit", a->qty);
        *units += a->qty;
    }
}

struct big_figures {
    int64_t units, orders, ms, refused[SK_RC_COUNT_], mon_samples, mon_min;
};

/* The seeds' load (8 processes x 50 connections, 20,000 attempts from 5,000
 * users, stock 1,000, limit 2) through the engine, with every invariant 1
 * and 3 check. */
static void engine_big_load(struct big_figures *f)
{
    memset(f, 0, sizeof *f);
    struct arena *A = arena_new();
    sk_redis *r = connect_or_fail();
    struct sk_keys k;
    A->aid = sk_th_unique_id();
    sk_keys_for(&k, A->aid);
    A->initial = BIG_STOCK;
    A->mode = ENGINE;
    open_activity(r, A->aid, BIG_STOCK, LIMIT, MAX_QTY);
    /* 200 hot users retry 25 times each; the other 4,800 come at least once. */
    build_workload(A, BIG_ATTEMPTS, BIG_USERS, 200, 25, 42);
    A->per_thread = BIG_ATTEMPTS / (BIG_PROCS * BIG_THREADS);

    pid_t mon = monitor_start(A);
    int64_t t0 = sk_mono_ms();
    run_load(A, BIG_PROCS, BIG_THREADS, buy_fn);
    f->ms = sk_mono_ms() - t0;
    monitor_stop(A, mon);
    check_no_failures(A);
    check_monitor(A);
    f->mon_samples = A->mon_samples;
    f->mon_min = A->mon_min;

    check_answers(A, &f->units, f->refused);
    CHECK_EQ(f->units, BIG_STOCK); /* demand far exceeds stock: sold exactly out */
    CHECK_EQ(get_int(r, k.stock), 0);

    /* Per user: our record and the buyers hash agree, and nobody is over. */
    static int64_t mine[BIG_USERS + 1], held[BIG_USERS + 1];
    memset(mine, 0, sizeof mine);
    for (size_t i = 0; i < A->nattempts; i++)
        if (A->att[i].rc == SK_RC_OK) mine[A->att[i].user] += A->att[i].qty;
    CHECK_EQ(buyers_hash(r, A->aid, held, BIG_USERS), BIG_STOCK);
    for (uint32_t u = 1; u <= BIG_USERS; u++) {
        CHECK_MSG(mine[u] <= LIMIT && held[u] <= LIMIT, "user %u holds %" PRId64 "/%" PRId64, u,
                  mine[u], held[u]);
        CHECK_MSG(mine[u] == held[u], "user %u: admitted %" PRId64 ", buyers hash %" PRId64, u,
                  mine[u], held[u]);
    }

    f->orders = check_accepted_orders(r, A);
    CHECK_EQ(sk_th_stream_orders(r, k.orders, k.label, NULL, NULL, NULL), f->orders);
    struct sk_stock_state st;
    CHECK_MSG(sk_stock_state(r, A->aid, &st) == 0, "state: %s", r->errstr);
    CHECK_EQ(st.remaining, 0);
    CHECK_EQ(st.held, BIG_STOCK);
    CHECK(st.stream_len >= 1 && st.stream_len <= f->orders); /* entries: one per call */

    sk_stock_drop(r, A->aid);
    sk_redis_free(r);
    arena_free(A);
}

SK_TEST(purchases_from_400_connections_admit_exactly_the_stock)
{
    alarm(CONC_ALARM_S);
    raise_fd_limit();
    struct big_figures f;
    engine_big_load(&f);
    printf("    %d connections, %d attempts in %" PRId64 " ms: %" PRId64 " orders, %" PRId64
           " units; refused sold_out %" PRId64 " insufficient %" PRId64 " limit %" PRId64
           "; monitor %" PRId64 " samples, min %" PRId64 "\n",
           BIG_PROCS * BIG_THREADS, BIG_ATTEMPTS, f.ms, f.orders, f.units,
           f.refused[SK_RC_SOLD_OUT], f.refused[SK_RC_INSUFFICIENT],
           f.refused[SK_RC_LIMIT_EXCEEDED], f.mon_samples, f.mon_min);
}

/* With the alarm armed and the fd limit raised: a new ENGINE arena over a
 * fresh activity id of `initial` units (its keys in *k), and *r connected.
 * The activity is not opened yet. */
static struct arena *engine_arena(sk_redis **r, struct sk_keys *k, int64_t initial)
{
    alarm(CONC_ALARM_S);
    raise_fd_limit();
    struct arena *A = arena_new();
    *r = connect_or_fail();
    A->aid = sk_th_unique_id();
    sk_keys_for(k, A->aid);
    A->initial = initial;
    A->mode = ENGINE;
    return A;
}

SK_TEST(releases_interleaved_with_purchases_never_exceed_initial_nor_repeat)
{
    enum { PROCS = 4, THREADS = 25, RELEASERS = 6, STOCK = 500, USERS = 1500, PER = 50 };
    struct sk_keys k;
    sk_redis *r;
    struct arena *A = engine_arena(&r, &k, STOCK);
    A->releasers_per_proc = RELEASERS;
    A->npurchasers = PROCS * (THREADS - RELEASERS);
    A->per_thread = PER;
    open_activity(r, A->aid, STOCK, LIMIT, MAX_QTY);
    build_workload(A, (size_t)A->npurchasers * PER, USERS, 50, 20, 7);

    pid_t mon = monitor_start(A);
    run_load(A, PROCS, THREADS, mixed_fn);
    monitor_stop(A, mon);
    check_no_failures(A);
    check_monitor(A);

    int64_t units = 0, refused[SK_RC_COUNT_] = {0};
    check_answers(A, &units, refused);
    int norders = atomic_load(&A->norders);
    CHECK(norders <= MAX_ORDERS);
    int64_t orders = check_accepted_orders(r, A);
    CHECK_EQ(orders, norders); /* every acceptance was published to the releasers */

    /* Each targeted order: released exactly once although PROCS connections
     * tried; the others answered ALREADY_RELEASED; the kept ones untouched. */
    static int64_t mine[USERS + 1], held[USERS + 1];
    memset(mine, 0, sizeof mine);
    int64_t given = 0, released_orders = 0;
    for (int j = 0; j < norders; j++) {
        struct order *o = &A->orders[j];
        int nrel = atomic_load(&o->n_released), nal = atomic_load(&o->n_already);
        int noth = atomic_load(&o->n_other);
        CHECK_MSG(o->user >= 1 && o->user <= USERS, "order %s: user %u", o->id, o->user);
        mine[o->user] += o->qty;
        if (j % 2) {
            CHECK_MSG(nrel + nal + noth == 0, "kept order %s was released", o->id);
            continue;
        }
        CHECK_MSG(nrel == 1 && nal == PROCS - 1 && noth == 0,
                  "order %s: released %d, already_released %d, other %d", o->id, nrel, nal, noth);
        /* stock + held == initial, so the whole quantity always fits back */
        CHECK_EQ(atomic_load(&o->given), o->qty);
        given += o->qty;
        mine[o->user] -= o->qty;
        released_orders++;
    }

    struct sk_stock_state st;
    CHECK_MSG(sk_stock_state(r, A->aid, &st) == 0, "state: %s", r->errstr);
    int64_t remaining = st.remaining;
    CHECK_MSG(remaining >= 0 && remaining <= STOCK, "remaining %" PRId64, remaining);
    CHECK_EQ(remaining + st.held, STOCK);       /* the engine's invariant */
    CHECK_EQ(units - given, STOCK - remaining); /* admitted - released = initial - remaining */
    CHECK_EQ(st.released, given);
    CHECK_EQ(sk_th_stream_orders(r, k.orders, k.label, NULL, NULL, NULL), orders);
    CHECK_EQ(int_cmd(r, "SCARD", k.released), released_orders);
    CHECK_EQ(buyers_hash(r, A->aid, held, USERS), st.held);
    for (uint32_t u = 1; u <= USERS; u++) {
        CHECK_MSG(held[u] <= LIMIT, "user %u holds %" PRId64, u, held[u]);
        CHECK_MSG(mine[u] == held[u],
                  "user %u: admitted - released %" PRId64 ", buyers hash %" PRId64, u, mine[u],
                  held[u]);
    }

    /* Released stock is sold again: fresh users buy what is left, exactly. */
    int64_t bought = 0;
    for (uint64_t u = 1000001;; u++) {
        struct sk_admission res;
        CHECK_MSG(sk_th_buy(r, A->aid, u, 1, &res, NULL) == 0, "buyout: %s", r->errstr);
        if (res.rc != SK_RC_OK) {
            CHECK_EQ(res.rc, SK_RC_SOLD_OUT);
            break;
        }
        bought++;
        CHECK_MSG(bought <= STOCK, "buyout never sells out");
    }
    CHECK_EQ(bought, remaining);
    CHECK_EQ(get_int(r, k.stock), 0);
    CHECK_MSG(sk_stock_state(r, A->aid, &st) == 0, "state: %s", r->errstr);
    CHECK_EQ(st.held, STOCK);
    CHECK_EQ(sk_th_stream_orders(r, k.orders, k.label, NULL, NULL, NULL), orders + bought);

    printf("    %d purchasers + %d releasers: %" PRId64 " orders (%" PRId64 " units), %" PRId64
           " released (%" PRId64 " units, each raced by %d connections), "
           "%" PRId64 " left after the load and bought out; monitor min %" PRId64 " max %" PRId64
           "\n",
           A->npurchasers, PROCS * RELEASERS, orders, units, released_orders, given, PROCS,
           remaining, A->mon_min, A->mon_max);
    sk_stock_drop(r, A->aid);
    sk_redis_free(r);
    arena_free(A);
}

/* The same load through the naive GET-then-SET code; returns units it
 * counted as sold. */
static int64_t naive_big_load(int64_t *final_stock)
{
    struct arena *A = arena_new();
    sk_redis *r = connect_or_fail();
    A->mode = NAIVE;
    A->initial = BIG_STOCK;
    snprintf(A->naive_key, sizeof A->naive_key, "sk:naive:{n%" PRIu64 "}:stock", sk_th_unique_id());
    redisReply *rep;
    CHECK_MSG(sk_redis_cmd(r, &rep, "SET %s %d", A->naive_key, BIG_STOCK) == 0, "SET: %s",
              r->errstr);
    freeReplyObject(rep);
    build_workload(A, BIG_ATTEMPTS, BIG_USERS, 200, 25, 42);
    A->per_thread = BIG_ATTEMPTS / (BIG_PROCS * BIG_THREADS);
    run_load(A, BIG_PROCS, BIG_THREADS, buy_fn);
    check_no_failures(A);
    for (size_t i = 0; i < A->nattempts; i++)
        CHECK_MSG(A->att[i].rc == SK_RC_OK || A->att[i].rc == SK_RC_SOLD_OUT ||
                      A->att[i].rc == SK_RC_INSUFFICIENT,
                  "naive attempt %zu: %d", i, A->att[i].rc);
    int64_t sold = atomic_load(&A->naive_sold);
    *final_stock = get_int(r, A->naive_key);
    CHECK_MSG(sk_redis_cmd(r, &rep, "DEL %s", A->naive_key) == 0, "DEL: %s", r->errstr);
    freeReplyObject(rep);
    sk_redis_free(r);
    arena_free(A);
    return sold;
}

SK_TEST(naive_check_then_act_oversells_under_the_same_load)
{
    alarm(CONC_ALARM_S);
    raise_fd_limit();
    int64_t naive_left;
    int64_t naive_sold = naive_big_load(&naive_left);
    struct big_figures f;
    engine_big_load(&f);
    printf("    naive GET-then-SET sold %" PRId64 " of %d units (oversold %" PRId64 ", %" PRId64
           " still in stock); engine sold %" PRId64 " (oversold %" PRId64 ")\n",
           naive_sold, BIG_STOCK, naive_sold - BIG_STOCK, naive_left, f.units, f.units - BIG_STOCK);
    /* The demonstration: lost updates sell units that were never there. */
    CHECK_MSG(naive_sold > BIG_STOCK, "naive code sold only %" PRId64, naive_sold);
    CHECK_EQ(f.units, BIG_STOCK);
}

SK_TEST(per_user_limit_holds_when_one_user_hammers_from_many_connections)
{
    enum { HOT_USER = 4242 };
    struct sk_keys k;
    sk_redis *r;
    struct arena *A = engine_arena(&r, &k, BIG_STOCK);
    open_activity(r, A->aid, BIG_STOCK, LIMIT, MAX_QTY);
    /* One attempt per connection, all released by the barrier at once; odd
     * threads go through purchase_batch (a batch of one). */
    A->nattempts = BIG_PROCS * BIG_THREADS;
    A->per_thread = 1;
    for (size_t i = 0; i < A->nattempts; i++)
        A->att[i] = (struct attempt){HOT_USER, 1, RC_UNSET, ""};
    run_load(A, BIG_PROCS, BIG_THREADS, buy_fn);
    check_no_failures(A);

    int64_t units = 0, refused[SK_RC_COUNT_] = {0};
    check_answers(A, &units, refused);
    CHECK_EQ(units, LIMIT);
    CHECK_EQ(refused[SK_RC_LIMIT_EXCEEDED], (int64_t)A->nattempts - LIMIT);
    CHECK_EQ(check_accepted_orders(r, A), LIMIT);
    redisReply *rep;
    CHECK_MSG(sk_redis_cmd(r, &rep, "HGET %s %d", k.buyers, HOT_USER) == 0, "HGET: %s", r->errstr);
    int ok;
    CHECK_EQ(reply_int(rep, &ok), LIMIT);
    CHECK(ok);
    freeReplyObject(rep);
    CHECK_EQ(get_int(r, k.stock), BIG_STOCK - LIMIT);
    CHECK_EQ(sk_th_stream_orders(r, k.orders, k.label, NULL, NULL, NULL), LIMIT);
    sk_stock_drop(r, A->aid);
    sk_redis_free(r);
    arena_free(A);
}
