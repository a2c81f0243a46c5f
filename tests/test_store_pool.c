/* test_store_pool.c - the store thread pool (store_pool.h) on both
 * backends: jobs run on the pool's own handles, concurrently, and their
 * completions come back once each on the owner's thread through the
 * eventfd; a job whose deadline passed while it waited never runs (the
 * store shows it); a queued job can be cancelled, a running one cannot;
 * the queue is bounded (SK_EBUSY); free waits for the running job and
 * completes the rest; the pool's threads run at a lower priority; a cancel
 * racing a thread decides once. A "gate" job that holds a pool
 * thread until the test opens it stands in for a slow database: real threads, real stores. */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/error.h"
#include "engine/activity.h"
#include "store/store.h"
#include "store/store_pool.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/pg_harness.h"

SK_TH_PG_USED

/* A fresh database of one backend: what sk_store_open takes. */
static void fresh_spec(int pg, char *spec, size_t cap)
{
    if (pg) {
        sk_th_pg_fresh_db(spec, cap);
    } else {
        static int n;
        snprintf(spec, cap, "sqlite:%s/pool%d.db", sk_th_tmpdir(), n++);
    }
}

/* Runs behaviour fn on a fresh store spec (PostgreSQL when pg). */
static void pool_run(int pg, void (*fn)(const char *spec))
{
    char spec[400];
    fresh_spec(pg, spec, sizeof spec);
    fn(spec);
}

#define POOL_TEST(name)                                                                            \
    static void name(const char *spec);                                                            \
    SK_TEST(store_pool_sqlite_##name)                                                              \
    {                                                                                              \
        pool_run(0, name);                                                                         \
    }                                                                                              \
    SK_TEST(store_pool_pg_##name)                                                                  \
    {                                                                                              \
        pool_run(1, name);                                                                         \
    }                                                                                              \
    static void name(const char *spec)

static sk_store_pool *pool_new(const char *spec, int threads, int queue_max)
{
    sk_store_pool *p;
    char err[512];
    int rc = sk_store_pool_new(&p, spec, threads, queue_max, err, sizeof err);
    CHECK_MSG(rc == 0, "pool: %d %s", rc, err);
    return p;
}

/* Waits on the pool's fd and drains until *count reaches want (bounded). */
static void drain_until(sk_store_pool *p, atomic_int *count, int want)
{
    int64_t until = sk_mono_ms() + 20000;
    while (atomic_load(count) < want) {
        int64_t left = until - sk_mono_ms();
        CHECK_MSG(left > 0, "only %d of %d completions came back", atomic_load(count), want);
        struct pollfd pf = {.fd = sk_store_pool_fd(p), .events = POLLIN};
        poll(&pf, 1, (int)(left > 1000 ? 1000 : left));
        sk_store_pool_drain(p);
    }
}

/* ---- jobs ---- */

/* Inserts activity id and reads it back. */
struct insert_job {
    uint64_t id;
    atomic_int *done_count;
    pthread_t owner;
    int ran, rc, done_calls, done_on_owner;
};

static int insert_run(sk_store *st, void *arg)
{
    struct insert_job *j = arg;
    j->ran++;
    struct sk_activity a, got;
    sk_th_activity_fixed(&a, j->id, "pool", 10, 1);
    int rc = sk_store_activity_insert(st, &a);
    if (rc == 0) rc = sk_store_activity_get(st, j->id, &got);
    if (rc == 0 && got.id != j->id) rc = SK_EPROTO;
    return rc;
}

static void insert_done(void *arg, int rc)
{
    struct insert_job *j = arg;
    j->rc = rc;
    j->done_calls++;
    j->done_on_owner = pthread_equal(pthread_self(), j->owner);
    atomic_fetch_add(j->done_count, 1);
}

/* Holds its pool thread until the test writes to the pipe (at most 20 s);
 * `inside` says it started; several gates meeting prove threads run at
 * once. */
struct gate {
    int fds[2];
    atomic_int inside;
    atomic_int *done_count;
    int rc;
    atomic_int nice; /* the pool thread's nice level, seen from inside */
};

static void gate_init(struct gate *g, atomic_int *done_count)
{
    CHECK_EQ(pipe(g->fds), 0);
    atomic_init(&g->inside, 0);
    g->done_count = done_count;
    g->rc = 1;
}

static int gate_run(sk_store *st, void *arg)
{
    (void)st;
    struct gate *g = arg;
    atomic_store(&g->nice, getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid)));
    atomic_fetch_add(&g->inside, 1);
    struct pollfd pf = {.fd = g->fds[0], .events = POLLIN};
    return poll(&pf, 1, 20000) == 1 ? 0 : SK_ETIMEDOUT;
}

static void gate_done(void *arg, int rc)
{
    struct gate *g = arg;
    g->rc = rc;
    atomic_fetch_add(g->done_count, 1);
}

static void gate_open(struct gate *g)
{
    CHECK_EQ(write(g->fds[1], "x", 1), 1);
}

static void gate_close(struct gate *g)
{
    close(g->fds[0]);
    close(g->fds[1]);
}

static void wait_inside(atomic_int *inside, int want)
{
    int64_t until = sk_mono_ms() + 10000;
    while (atomic_load(inside) < want) {
        CHECK_MSG(sk_mono_ms() < until, "%d of %d gates entered", atomic_load(inside), want);
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* An insert of activity id, counted in done, owned by this thread. */
static struct insert_job job_of(uint64_t id, atomic_int *done)
{
    return (struct insert_job){.id = id, .done_count = done, .owner = pthread_self()};
}

/* g, counted in done, submitted to p (its job into *job when not NULL)
 * and running. */
static void gate_start(sk_store_pool *p, struct gate *g, atomic_int *done, sk_store_job **job)
{
    gate_init(g, done);
    CHECK_EQ(sk_store_pool_submit(p, 0, gate_run, gate_done, g, job), 0);
    wait_inside(&g->inside, 1);
}

/* A pool of one thread on spec, that thread held by a gate (its job
 * into *gate_job when not NULL); every job's done counts into done. */
struct gated_pool {
    sk_store_pool *p;
    atomic_int done;
    struct gate g;
};

static void gated_pool_start(struct gated_pool *t, const char *spec, int queue_max,
                             sk_store_job **gate_job)
{
    t->p = pool_new(spec, 1, queue_max);
    atomic_init(&t->done, 0);
    gate_start(t->p, &t->g, &t->done, gate_job);
}

/* Lets ms of wall time pass: deadlines of queued jobs expire. */
static void let_ms_pass(int ms)
{
    int64_t until = sk_mono_ms() + ms;
    while (sk_mono_ms() < until) {
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

static int stored(const char *spec, uint64_t id)
{
    sk_store *st;
    char err[512];
    CHECK_MSG(sk_store_open(&st, spec, err, sizeof err) == 0, "open: %s", err);
    struct sk_activity a;
    int rc = sk_store_activity_get(st, id, &a);
    sk_store_close(st);
    CHECK_MSG(rc == 0 || rc == SK_ENOTFOUND, "get %" PRIu64 ": %d", id, rc);
    return rc == 0;
}

/* ---- tests ---- */

#define MANY 300

POOL_TEST(runs_every_job_once_concurrently_and_completes_on_the_owner_thread)
{
    sk_store_pool *p = pool_new(spec, 3, 1000);
    atomic_int done = 0;
    /* three gates at once: only three threads can hold them together */
    struct gate g;
    gate_init(&g, &done);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(sk_store_pool_submit(p, 0, gate_run, gate_done, &g, NULL), 0);
    wait_inside(&g.inside, 3);
    /* the pool threads run behind the owner */
    int base = getpriority(PRIO_PROCESS, 0);
    CHECK_EQ(atomic_load(&g.nice), base + SK_STORE_POOL_NICE > 19 ? 19 : base + SK_STORE_POOL_NICE);
    for (int i = 0; i < 3; i++)
        gate_open(&g);
    drain_until(p, &done, 3);
    CHECK_EQ(g.rc, 0);
    gate_close(&g);

    atomic_store(&done, 0);
    struct insert_job *jobs = calloc(MANY, sizeof *jobs);
    CHECK(jobs != NULL);
    for (int i = 0; i < MANY; i++) {
        jobs[i] = job_of(1000 + (uint64_t)i, &done);
        CHECK_EQ(sk_store_pool_submit(p, 0, insert_run, insert_done, &jobs[i], NULL), 0);
    }
    drain_until(p, &done, MANY);
    for (int i = 0; i < MANY; i++) {
        CHECK_EQ(jobs[i].ran, 1);
        CHECK_EQ(jobs[i].done_calls, 1);
        CHECK_MSG(jobs[i].rc == 0, "job %d: %d", i, jobs[i].rc);
        CHECK(jobs[i].done_on_owner);
    }
    struct sk_store_pool_stats s;
    sk_store_pool_stats(p, &s);
    CHECK_EQ(s.submitted, MANY + 3);
    CHECK_EQ(s.ran, MANY + 3);
    CHECK_EQ(s.expired, 0);
    CHECK_EQ(s.queued, 0);
    CHECK_EQ(s.threads, 3);
    sk_store_pool_free(p);
    /* the rows are in the database, seen from another connection */
    CHECK(stored(spec, 1000));
    CHECK(stored(spec, 1000 + MANY - 1));
    free(jobs);
}

POOL_TEST(a_job_whose_deadline_passes_in_the_queue_never_runs)
{
    struct gated_pool t;
    gated_pool_start(&t, spec, 10, NULL);
    /* queued behind the gate with a deadline 50 ms away, and one without */
    struct insert_job late = job_of(2001, &t.done);
    struct insert_job patient = job_of(2002, &t.done);
    CHECK_EQ(sk_store_pool_submit(t.p, sk_mono_ms() + 50, insert_run, insert_done, &late, NULL), 0);
    CHECK_EQ(sk_store_pool_submit(t.p, 0, insert_run, insert_done, &patient, NULL), 0);
    let_ms_pass(60);
    gate_open(&t.g);
    drain_until(t.p, &t.done, 3);
    CHECK_EQ(t.g.rc, 0);
    CHECK_EQ(late.ran, 0);
    CHECK_EQ(late.done_calls, 1);
    CHECK_EQ(late.rc, SK_ETIMEDOUT);
    CHECK_EQ(patient.ran, 1);
    CHECK_EQ(patient.rc, 0);
    struct sk_store_pool_stats s;
    sk_store_pool_stats(t.p, &s);
    CHECK_EQ(s.expired, 1);
    sk_store_pool_free(t.p);
    gate_close(&t.g);
    CHECK(!stored(spec, 2001)); /* nothing changed for the late one */
    CHECK(stored(spec, 2002));
}

POOL_TEST(cancel_takes_a_queued_job_out_and_leaves_a_running_one_alone)
{
    sk_store_job *running, *queued;
    struct gated_pool t;
    gated_pool_start(&t, spec, 10, &running);
    struct insert_job j = job_of(3001, &t.done);
    CHECK_EQ(sk_store_pool_submit(t.p, 0, insert_run, insert_done, &j, &queued), 0);
    CHECK_EQ(sk_store_pool_cancel(t.p, queued), 1);
    CHECK_EQ(sk_store_pool_cancel(t.p, running), 0);
    drain_until(t.p, &t.done, 1); /* the cancelled one completes at once */
    CHECK_EQ(j.done_calls, 1);
    CHECK_EQ(j.rc, SK_ETIMEDOUT);
    CHECK_EQ(t.g.rc, 1); /* the gate is still running */
    gate_open(&t.g);
    drain_until(t.p, &t.done, 2);
    CHECK_EQ(t.g.rc, 0);
    CHECK_EQ(j.ran, 0);
    sk_store_pool_free(t.p);
    gate_close(&t.g);
    CHECK(!stored(spec, 3001));
}

POOL_TEST(the_queue_is_bounded_and_free_completes_what_waits)
{
    struct gated_pool t;
    gated_pool_start(&t, spec, 3, NULL);
    struct insert_job j[4];
    for (int i = 0; i < 4; i++)
        j[i] = job_of(4001 + (uint64_t)i, &t.done);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(sk_store_pool_submit(t.p, 0, insert_run, insert_done, &j[i], NULL), 0);
    CHECK_EQ(sk_store_pool_submit(t.p, 0, insert_run, insert_done, &j[3], NULL), SK_EBUSY);
    struct sk_store_pool_stats s;
    sk_store_pool_stats(t.p, &s);
    CHECK_EQ(s.queued, 3);
    CHECK_EQ(s.running, 1);
    CHECK_EQ(s.rejected, 1);
    /* free while the gate runs and three wait: it waits for the gate, the
     * three never run, every done runs once */
    gate_open(&t.g);
    sk_store_pool_free(t.p);
    CHECK_EQ(t.g.rc, 0);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(j[i].done_calls, 1);
        CHECK(j[i].ran == 0 ? j[i].rc == SK_ETIMEDOUT : j[i].rc == 0);
    }
    CHECK_EQ(j[3].done_calls, 0); /* refused: never its done */
    gate_close(&t.g);
    CHECK(!stored(spec, 4004));
}

POOL_TEST(a_full_queue_first_drops_the_jobs_whose_deadline_passed)
{
    struct gated_pool t;
    gated_pool_start(&t, spec, 2, NULL);
    struct insert_job late[2], fresh = job_of(5003, &t.done);
    for (int i = 0; i < 2; i++) {
        late[i] = job_of(5001 + (uint64_t)i, &t.done);
        CHECK_EQ(
            sk_store_pool_submit(t.p, sk_mono_ms() + 30, insert_run, insert_done, &late[i], NULL),
            0);
    }
    let_ms_pass(40);
    /* full, but both waiting jobs are past their deadline: they make room */
    CHECK_EQ(sk_store_pool_submit(t.p, 0, insert_run, insert_done, &fresh, NULL), 0);
    drain_until(t.p, &t.done, 2);
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(late[i].done_calls, 1);
        CHECK_EQ(late[i].rc, SK_ETIMEDOUT);
    }
    gate_open(&t.g);
    drain_until(t.p, &t.done, 4);
    CHECK_EQ(fresh.rc, 0);
    CHECK_EQ(late[0].ran + late[1].ran, 0);
    sk_store_pool_free(t.p);
    gate_close(&t.g);
    CHECK(!stored(spec, 5001));
    CHECK(stored(spec, 5003));
}

/* A job that only counts: cancel races a thread taking it. */
struct tick {
    atomic_int ran;
    int done_calls, rc, cancelled;
    atomic_int *done_count;
};

static int tick_run(sk_store *st, void *arg)
{
    (void)st;
    struct tick *t = arg;
    atomic_fetch_add(&t->ran, 1);
    return 0;
}

static void tick_done(void *arg, int rc)
{
    struct tick *t = arg;
    t->rc = rc;
    t->done_calls++;
    atomic_fetch_add(t->done_count, 1);
}

#define RACES 20000

/* The owner hands jobs over without a lock the threads hold (store_pool.c):
 * a cancel racing the thread that takes the job decides once: either the
 * job never runs and its done gets SK_ETIMEDOUT, or it runs and its done
 * gets run's answer; every done runs once, on the owner's thread, and
 * the counts add up (under the sanitizers, no job is used after it was
 * freed). */
SK_TEST(store_pool_a_cancel_racing_the_threads_decides_once)
{
    char spec[400];
    fresh_spec(0, spec, sizeof spec);
    sk_store_pool *p = pool_new(spec, 3, RACES);
    atomic_int done = 0;
    struct tick *t = calloc(RACES, sizeof *t);
    CHECK(t != NULL);
    int cancelled = 0;
    for (int i = 0; i < RACES; i++) {
        t[i].done_count = &done;
        sk_store_job *job;
        CHECK_EQ(sk_store_pool_submit(p, 0, tick_run, tick_done, &t[i], &job), 0);
        if (i % 2 == 0) {
            t[i].cancelled = sk_store_pool_cancel(p, job);
            cancelled += t[i].cancelled;
        }
        if (i % 64 == 0) sk_store_pool_drain(p);
    }
    drain_until(p, &done, RACES);
    for (int i = 0; i < RACES; i++) {
        CHECK_EQ(t[i].done_calls, 1);
        if (t[i].cancelled) {
            CHECK_EQ(atomic_load(&t[i].ran), 0);
            CHECK_EQ(t[i].rc, SK_ETIMEDOUT);
        } else {
            CHECK_EQ(atomic_load(&t[i].ran), 1);
            CHECK_EQ(t[i].rc, 0);
        }
    }
    struct sk_store_pool_stats s;
    sk_store_pool_stats(p, &s);
    CHECK_EQ(s.submitted, RACES);
    CHECK_EQ(s.expired, (uint64_t)cancelled);
    CHECK_EQ(s.ran, (uint64_t)(RACES - cancelled));
    CHECK_EQ(s.queued, 0);
    CHECK_EQ(s.running, 0);
    sk_store_pool_free(p);
    free(t);
}

SK_TEST(store_pool_refuses_bad_sizes_and_an_unopenable_store)
{
    sk_store_pool *p;
    char err[512], spec[400];
    fresh_spec(0, spec, sizeof spec);
    CHECK_EQ(sk_store_pool_new(&p, spec, 0, 10, err, sizeof err), SK_EINVAL);
    CHECK(p == NULL);
    CHECK_EQ(sk_store_pool_new(&p, spec, 1, 0, err, sizeof err), SK_EINVAL);
    CHECK_EQ(sk_store_pool_new(&p, spec, SK_STORE_POOL_THREADS_MAX + 1, 1, err, sizeof err),
             SK_EINVAL);
    char dead[200];
    snprintf(dead, sizeof dead, "postgres://u:pw@127.0.0.1:%d/x?connect_timeout=2",
             sk_th_free_port());
    CHECK_EQ(sk_store_pool_new(&p, dead, 2, 10, err, sizeof err), SK_EDB);
    CHECK(p == NULL);
    CHECK_MSG(strstr(err, "cannot connect") != NULL, "%s", err);
    CHECK_EQ(sk_store_pool_new(&p, "mysql://x", 2, 10, err, sizeof err), SK_EINVAL);
}

/* A database server whose host answers nothing (here: a listening socket
 * that never accepts, so a connect completes and then hears nothing,
 * as from a host cut off behind a firewall that lets the handshake
 * through) costs a waiting pool one connect timeout, not one per
 * thread: once the first handle found the server down the others are
 * set up without trying (they connect on their first call, as the
 * serve_started_* tests of test_serve_supervisor.c show). */
static void waiting_pool_tries_once(const char *scheme)
{
    int port, fd = sk_th_blackhole(&port);
    char spec[200], err[512];
    snprintf(spec, sizeof spec, "%s://u@127.0.0.1:%d/x?connect_timeout=2", scheme, port);
    sk_store_pool *p = NULL;
    int64_t t0 = sk_mono_ms();
    CHECK_EQ(sk_store_pool_new_waiting(&p, spec, 3, 8, NULL, err, sizeof err), 0);
    int64_t took = sk_mono_ms() - t0;
    CHECK_MSG(err[0] != 0, "no reason given");
    /* one 2 s connect timeout; three would be 6 s */
    CHECK_MSG(took < 4000, "%s: the pool took %lld ms to open", scheme, (long long)took);
    sk_store_pool_free(p);
    /* told the server was found down a moment ago (serve's supervisor,
     * before it forks the HTTP processes), no handle tries: no timeout */
    char why[512], err2[512];
    snprintf(why, sizeof why, "%s", err);
    t0 = sk_mono_ms();
    CHECK_EQ(sk_store_pool_new_waiting(&p, spec, 3, 8, why, err2, sizeof err2), 0);
    took = sk_mono_ms() - t0;
    CHECK_STR(err2, why);
    CHECK_MSG(took < 1500, "%s: told it is down, the pool took %lld ms to open", scheme,
              (long long)took);
    sk_store_pool_free(p);
    close(fd);
}

SK_TEST_T(store_pool_waiting_on_an_unanswering_pg_host_pays_one_connect_timeout, 60)
{
    waiting_pool_tries_once("postgres");
}

SK_TEST_T(store_pool_waiting_on_an_unanswering_mysql_host_pays_one_connect_timeout, 60)
{
    waiting_pool_tries_once("mysql");
}
