/* bench_http_mixed.c - the mixed phase of `seckill-bench http`
 * (bench_http_mixed.h).
 *
 * Per store (SQLite file, or a private PostgreSQL or MariaDB server
 * started here):
 * one `seckill serve --role all --processes 1` (an HTTP process and the
 * order worker, so polled orders are in the database), an activity no
 * run can drain, and N orders bought and persisted first: the polled and
 * paid ones, each asked for by its own buyer. Then, each for --duration:
 *   1 purchases alone, open loop at the purchase rate
 *   2 the same purchases while buyers poll GET /api/v1/orders/{id} and pay
 *     POST /api/v1/orders/{id}/pay, each open loop at its own rate; a poll
 *     the database cannot take in time may be refused (503 busy with
 *     Retry-After), and how fast those refusals come is reported
 *   3 order reads alone, closed loop: the reads/s this store serves
 *   4 (PostgreSQL, MariaDB) purchases and polls while every process of
 *     the database server is stopped (SIGSTOP): purchases must not
 *     notice, polls answer 503 at --db-timeout-ms
 * Open loop: latency counts from the intended send time, so a stalled
 * server cannot hide its stall (load.h). All load runs of a phase run in
 * this process at once, each in its own thread. */
#include "bench/bench_http_mixed.h"

#include <dirent.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench_child.h"
#include "bench/bench_util.h"
#include "core/clock.h"
#include "core/histogram.h"
#include "load/load.h"
#include "spawn/netutil.h"
#include "tests/support/spawn/mysql_spawn.h"
#include "tests/support/spawn/pg_spawn.h"

#define ADMIN_TOKEN "bench-http-mixed-admin-token"
#define BIG_STOCK 100000000
#define N_ORDERS 2000 /* polled and paid: each by its buyer */
#define PURCHASE_CONNS 200
#define POLL_CONNS 1000 /* enough that polls the server refuses at once never queue here */
#define PAY_CONNS 10
#define READ_CONNS 50
#define DB_TIMEOUT_MS "1000"

/* One load run's figures. */
struct mres {
    int ran, ok;
    double rps;
    uint64_t p50, p99, p999, completed, backlog, s200, s503;
    uint64_t p99_busy; /* of the 429 and 503 answers (refusals), from their send; 0: none */
    double ok_rps;     /* 200 answers per second */
    char note[200];
};

enum { M_ALONE, M_MIX_BUY, M_MIX_POLL, M_MIX_PAY, M_READS, M_FROZEN_BUY, M_FROZEN_POLL, M_N };
static const char *const m_ids[M_N] = {
    "purchases_alone", "purchases_with_polls", "polls",          "pays",
    "order_reads_max", "purchases_db_frozen",  "polls_db_frozen"};
static const char *const m_labels[M_N] = {"purchases alone",
                                          "purchases, with polls and pays",
                                          "  polls GET /orders/{id}",
                                          "  pays POST /orders/{id}/pay",
                                          "order reads alone, closed loop",
                                          "purchases, database frozen",
                                          "  polls, database frozen"};

/* CPU in cores (CPU seconds / wall seconds) during a phase: who is busy
 * tells what limits it, and "other" shows a disturbed machine. */
enum { C_SERVE, C_REDIS, C_PG, C_LOAD, C_ALL, C_N };
static const char *const c_names[C_N] = {"serve", "redis", "database", "load", "machine"};
enum { P_ALONE, P_MIXED, P_READS, P_FROZEN, P_N };
static const char *const p_labels[P_N] = {"purchases alone", "purchases + polls + pays",
                                          "order reads alone", "database frozen"};

struct store_run {
    const char *name;
    uint64_t aid;
    struct mres m[M_N];
    int cpu_ran[P_N];
    double cpu[P_N][C_N];
    char note[300];
};

struct cpu_mark {
    double c[C_N];
    int64_t us;
};

/* db: the database server's process (its children too), 0 for SQLite. */
static void cpu_mark(struct cpu_mark *m, pid_t serve, pid_t redis, pid_t db)
{
    m->c[C_SERVE] = sk_bench_tree_cpu_seconds(serve);
    m->c[C_REDIS] = sk_bench_tree_cpu_seconds(redis);
    m->c[C_PG] = db ? sk_bench_tree_cpu_seconds(db) : 0;
    m->c[C_LOAD] = sk_bench_self_cpu_seconds();
    m->c[C_ALL] = sk_bench_machine_cpu_seconds();
    m->us = sk_mono_us();
}

static void cpu_phase(struct store_run *s, int ph, const struct cpu_mark *a,
                      const struct cpu_mark *b)
{
    double wall = (double)(b->us - a->us) / 1e6;
    s->cpu_ran[ph] = 1;
    for (int i = 0; i < C_N; i++)
        s->cpu[ph][i] = wall > 0 ? (b->c[i] - a->c[i]) / wall : 0;
}

/* ---- load runs in threads ---- */

struct load_job {
    struct sk_load_opts lo;
    struct mres *m;
    int allow_503; /* the database is frozen: 503s are the expected answer */
    pthread_t t;
    int started;
};

static void *load_main(void *arg)
{
    struct load_job *j = arg;
    struct sk_load_result r;
    char err[300];
    struct mres *m = j->m;
    m->ran = 1;
    if (sk_load_run(&j->lo, &r, err, sizeof err) < 0) {
        snprintf(m->note, sizeof m->note, "load did not run: %.150s", err);
        return NULL;
    }
    m->rps = r.rps;
    m->ok_rps = r.elapsed_s > 0 ? (double)r.status[200] / r.elapsed_s : 0;
    m->p50 = sk_hist_percentile(&r.latency, 50);
    m->p99 = sk_hist_percentile(&r.latency, 99);
    m->p999 = sk_hist_percentile(&r.latency, 99.9);
    m->completed = r.completed;
    m->backlog = r.backlog_at_end;
    m->s200 = r.status[200];
    m->s503 = r.status[503];
    m->p99_busy = r.latency_busy.total ? sk_hist_percentile(&r.latency_busy, 99) : 0;
    /* while frozen, 503 (and only 503) is what polls must get */
    uint64_t expected = m->s200 + (j->allow_503 ? m->s503 : 0);
    m->ok = r.completed > 0 && expected == r.completed &&
            (r.ok || (j->allow_503 && r.err_connect + r.err_closed + r.err_timeout == 0));
    if (!m->ok)
        snprintf(m->note, sizeof m->note, "%.190s",
                 !r.ok && r.n_violations ? r.violations[0] : "unexpected answers");
    sk_load_result_free(&r);
    return NULL;
}

static void job_start(struct load_job *j)
{
    j->started = pthread_create(&j->t, NULL, load_main, j) == 0;
    if (!j->started) snprintf(j->m->note, sizeof j->m->note, "cannot start a thread");
}

static void job_join(struct load_job *j)
{
    if (j->started) pthread_join(j->t, NULL);
    j->started = 0;
}

/* Runs jobs j[0..n) together, with the CPU of every process measured
 * around them into phase ph of s. */
static void run_jobs(struct store_run *s, int ph, struct load_job *j, int n, pid_t serve,
                     pid_t redis, pid_t db)
{
    struct cpu_mark c0, c1;
    cpu_mark(&c0, serve, redis, db);
    for (int i = 0; i < n; i++)
        job_start(&j[i]);
    for (int i = 0; i < n; i++)
        job_join(&j[i]);
    cpu_mark(&c1, serve, redis, db);
    cpu_phase(s, ph, &c0, &c1);
}

static void base_opts(struct sk_load_opts *lo, const struct sk_bench_mixed_opts *o, int port,
                      uint64_t aid)
{
    sk_load_opts_defaults(lo);
    lo->port = port;
    snprintf(lo->host, sizeof lo->host, "127.0.0.1");
    snprintf(lo->url, sizeof lo->url, "http://127.0.0.1:%d", port);
    lo->activity = aid;
    lo->threads = 1;
    lo->duration_ms = (int64_t)(o->duration_s * 1000);
    lo->timeout_ms = 10000;
    lo->progress = 0;
}

/* Purchases at the purchase rate, every one a new buyer (admitted). */
static void purchase_job(struct load_job *j, const struct sk_bench_mixed_opts *o, int port,
                         uint64_t aid, uint64_t user_base, struct mres *m)
{
    memset(j, 0, sizeof *j);
    base_opts(&j->lo, o, port, aid);
    j->lo.rate = o->purchase_rate;
    j->lo.connections = PURCHASE_CONNS;
    j->lo.users = 1000000000;
    j->lo.user_base = user_base;
    j->lo.limit = 1;
    j->m = m;
}

/* Requests over targets (polls or pays); rate 0: closed loop. */
static void target_job(struct load_job *j, const struct sk_bench_mixed_opts *o, int port,
                       const struct sk_load_target *t, size_t n, const char *method, double rate,
                       int64_t conns, struct mres *m)
{
    memset(j, 0, sizeof *j);
    base_opts(&j->lo, o, port, 0);
    snprintf(j->lo.method, sizeof j->lo.method, "%s", method);
    snprintf(j->lo.path, sizeof j->lo.path, "/"); /* each target has its own */
    j->lo.targets = t;
    j->lo.n_targets = n;
    j->lo.order_check = 0;
    j->lo.rate = rate;
    j->lo.connections = conns;
    j->m = m;
}

/* ---- set-up ---- */

static int start_serve(struct sk_bench_child *c, const struct sk_bench_mixed_opts *o,
                       const char *tag, const char *db, char *err, size_t cap)
{
    char listen[64], log[400];
    c->port = sk_net_free_port();
    snprintf(listen, sizeof listen, "127.0.0.1:%d", c->port);
    snprintf(log, sizeof log, "%s/serve-%s.log", o->dir, tag);
    char *argv[] = {(char *)sk_bench_seckill_bin(),
                    "serve",
                    "--listen",
                    listen,
                    "--redis",
                    (char *)o->redis_url,
                    "--db",
                    (char *)db,
                    "--admin-token",
                    ADMIN_TOKEN,
                    "--processes",
                    "1",
                    "--role",
                    "all",
                    "--log-level",
                    "warn",
                    "--db-timeout-ms",
                    DB_TIMEOUT_MS,
                    NULL};
    c->pid = sk_bench_spawn(argv, log);
    if (c->pid < 0 || sk_bench_child_wait_ready(c, "/readyz", o->interrupted) < 0) {
        snprintf(err, cap, "seckill serve did not start (see %.300s)", log);
        return -1;
    }
    return 0;
}

static int make_activity(int port, uint64_t aid, char *err, size_t cap)
{
    char body[400], out[1024], path[128];
    const char *admin = "Authorization: Bearer " ADMIN_TOKEN "\r\n";
    snprintf(body, sizeof body,
             "{\"id\":%" PRIu64 ",\"name\":\"bench mixed\",\"stock\":%d,\"per_user_limit\":1,"
             "\"start\":\"2020-01-01T00:00:00Z\",\"end\":\"2099-01-01T00:00:00Z\","
             "\"pay_timeout_s\":86400}",
             aid, BIG_STOCK);
    int st = sk_bench_http_call(port, "POST", "/api/v1/activities", admin, body, out, sizeof out);
    const char *steps[] = {"preheat", "open"};
    for (int k = 0; st == 201 && k < 2; k++) {
        snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/%s", aid, steps[k]);
        if (sk_bench_http_call(port, "POST", path, admin, NULL, out, sizeof out) != 200) st = -2;
    }
    if (st == 201) return 0;
    snprintf(err, cap, "activity %" PRIu64 " set-up failed: %.300s", aid, out);
    return -1;
}

/* Buys N_ORDERS orders (users 1..N) and fills the poll and pay targets;
 * then waits until the last one is in the database (the worker persists
 * a stream in order). */
static int buy_orders(int port, uint64_t aid, struct sk_load_target *polls,
                      struct sk_load_target *pays, const atomic_int *interrupted, char *err,
                      size_t cap)
{
    char path[128], out[1024], hdr[64], oid[96] = "";
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", aid);
    for (int i = 0; i < N_ORDERS && !atomic_load(interrupted); i++) {
        uint64_t user = (uint64_t)i + 1;
        snprintf(hdr, sizeof hdr, "X-User-Id: %" PRIu64 "\r\n", user);
        int st = sk_bench_http_call(port, "POST", path, hdr, "{\"quantity\":1}", out, sizeof out);
        const char *p = strstr(out, "\"order_id\":\"");
        if (st != 200 || !p || sscanf(p + 12, "%63[^\"]", oid) != 1) {
            snprintf(err, cap, "purchase %d failed: %d %.200s", i, st, out);
            return -1;
        }
        snprintf(polls[i].path, sizeof polls[i].path, "/api/v1/orders/%s", oid);
        snprintf(pays[i].path, sizeof pays[i].path, "/api/v1/orders/%s/pay", oid);
        polls[i].user = pays[i].user = user;
    }
    int64_t until = sk_mono_ms() + 60000;
    snprintf(hdr, sizeof hdr, "X-User-Id: %d\r\n", N_ORDERS);
    while (!atomic_load(interrupted)) {
        int st =
            sk_bench_http_call(port, "GET", polls[N_ORDERS - 1].path, hdr, NULL, out, sizeof out);
        if (st == 200 && strstr(out, "\"status\":\"created\"")) return 0;
        if (sk_mono_ms() > until) break;
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    snprintf(err, cap, "the orders did not reach the database in 60 s: %.200s", out);
    return -1;
}

/* ---- freezing the database server ---- */

/* SIGSTOP (or SIGCONT) to the server and every process it started (the
 * postmaster's backends; mariadbd is one process). */
static void db_signal_all(pid_t root, int sig)
{
    pid_t ps[64];
    int n = sk_bench_with_children(root, ps, 64);
    for (int i = 0; i < n; i++)
        kill(ps[i], sig);
}

/* ---- one store ---- */

static int run_phases(struct store_run *s, const struct sk_bench_mixed_opts *o,
                      const struct sk_bench_child *serve, const struct sk_load_target *polls,
                      const struct sk_load_target *pays, pid_t db)
{
    struct load_job j[3];
    int port = serve->port;
#define RUN(ph, n) run_jobs(s, (ph), j, (n), serve->pid, o->redis_pid, db)
    /* 1: purchases alone */
    purchase_job(&j[0], o, port, s->aid, 1000000000, &s->m[M_ALONE]);
    RUN(P_ALONE, 1);
    if (atomic_load(o->interrupted)) return -1;
    /* 2: the same with polls and pays */
    purchase_job(&j[0], o, port, s->aid, 2000000000, &s->m[M_MIX_BUY]);
    target_job(&j[1], o, port, polls, N_ORDERS, "GET", o->poll_rate, POLL_CONNS, &s->m[M_MIX_POLL]);
    j[1].allow_503 = 1; /* polls beyond what the database takes in time: refused at once */
    target_job(&j[2], o, port, pays, N_ORDERS, "POST", o->pay_rate, PAY_CONNS, &s->m[M_MIX_PAY]);
    RUN(P_MIXED, 3);
    if (atomic_load(o->interrupted)) return -1;
    /* 3: order reads alone, as many as the store serves (and refusals of
     * what it would not serve within the poll bound) */
    target_job(&j[0], o, port, polls, N_ORDERS, "GET", 0, READ_CONNS, &s->m[M_READS]);
    j[0].allow_503 = 1;
    RUN(P_READS, 1);
    if (!db || atomic_load(o->interrupted)) return 0;
    /* 4: the database server frozen */
    db_signal_all(db, SIGSTOP);
    purchase_job(&j[0], o, port, s->aid, 3000000000, &s->m[M_FROZEN_BUY]);
    target_job(&j[1], o, port, polls, N_ORDERS, "GET", o->poll_rate, POLL_CONNS,
               &s->m[M_FROZEN_POLL]);
    j[1].allow_503 = 1;
    RUN(P_FROZEN, 2);
    db_signal_all(db, SIGCONT);
#undef RUN
    return 0;
}

/* kind: 0 SQLite, 1 PostgreSQL, 2 MariaDB (a private server each). */
static int run_store(struct store_run *s, const struct sk_bench_mixed_opts *o, int kind)
{
    struct sk_pg_spawn pgs = {0};
    struct sk_mysql_spawn mys = {0};
    struct sk_bench_child serve = {0};
    struct sk_load_target *polls = calloc(N_ORDERS, sizeof *polls);
    struct sk_load_target *pays = calloc(N_ORDERS, sizeof *pays);
    char db[400], err[400] = "";
    int rc = -1;
    if (!polls || !pays) {
        snprintf(err, sizeof err, "out of memory");
        goto done;
    }
    if (kind == 1) {
        if (sk_pg_spawn_start(&pgs, NULL) < 0) {
            snprintf(err, sizeof err, "PostgreSQL: %.300s", pgs.errstr);
            goto done;
        }
        snprintf(db, sizeof db, "%s", pgs.url);
    } else if (kind == 2) {
        if (sk_mysql_spawn_start(&mys, NULL) < 0) {
            snprintf(err, sizeof err, "MariaDB: %.300s", mys.errstr);
            goto done;
        }
        snprintf(db, sizeof db, "%s", mys.url);
    } else {
        snprintf(db, sizeof db, "sqlite:%s/mixed.db", o->dir);
    }
    if (start_serve(&serve, o, s->name, db, err, sizeof err) < 0 ||
        make_activity(serve.port, s->aid, err, sizeof err) < 0 ||
        buy_orders(serve.port, s->aid, polls, pays, o->interrupted, err, sizeof err) < 0)
        goto done;
    if (!o->json)
        fprintf(stderr, "seckill: bench http: mixed phase on %s, %.0f s per phase...\n", s->name,
                o->duration_s);
    pid_t dbpid = kind == 1 ? pgs.pid : kind == 2 ? mys.pid : 0;
    rc = run_phases(s, o, &serve, polls, pays, dbpid);
    if (dbpid && rc == 0) {
        /* after the thaw the node must recover on its own */
        if (sk_bench_child_wait_ready(&serve, "/readyz", o->interrupted) < 0) {
            snprintf(err, sizeof err, "serve did not become ready after the thaw");
            rc = -1;
        }
    }
done:
    if (err[0]) snprintf(s->note, sizeof s->note, "%.290s", err);
    sk_bench_child_stop(&serve);
    if (pgs.pid && sk_pg_spawn_stop(&pgs) < 0) fprintf(stderr, "seckill: %s\n", pgs.errstr);
    if (mys.pid && sk_mysql_spawn_stop(&mys) < 0) fprintf(stderr, "seckill: %s\n", mys.errstr);
    free(polls);
    free(pays);
    return rc;
}

/* ---- report ---- */

static double p99_ratio(const struct store_run *s)
{
    const struct mres *a = &s->m[M_ALONE], *b = &s->m[M_MIX_BUY];
    return a->ran && b->ran && a->p99 > 0 ? (double)b->p99 / (double)a->p99 : 0;
}

static void print_table(const struct sk_bench_mixed_opts *o, const struct store_run *runs, int n)
{
    printf("\nmixed phase: serve --role all --processes 1 (--db-pool 2, --db-timeout-ms %s); "
           "open loop: purchases %.0f/s (%d connections), polls of %d orders %.0f/s (%d), "
           "pays %.0f/s (%d); %.0f s per phase\n",
           DB_TIMEOUT_MS, o->purchase_rate, PURCHASE_CONNS, N_ORDERS, o->poll_rate, POLL_CONNS,
           o->pay_rate, PAY_CONNS, o->duration_s);
    printf("%-9s %-34s %10s %8s %9s %9s %9s %9s %7s %11s\n", "store", "phase", "req/s", "200/s",
           "p50 ms", "p99 ms", "p99.9 ms", "backlog", "503s", "503 p99 ms");
    for (int r = 0; r < n; r++) {
        const struct store_run *s = &runs[r];
        for (int i = 0; i < M_N; i++) {
            const struct mres *m = &s->m[i];
            if (!m->ran) continue;
            char busy[16] = "-";
            if (m->s503) snprintf(busy, sizeof busy, "%.2f", (double)m->p99_busy / 1e3);
            printf("%-9s %-34s %10.0f %8.0f %9.2f %9.2f %9.2f %9" PRIu64 " %7" PRIu64 " %11s%s%s\n",
                   s->name, m_labels[i], m->rps, m->ok_rps, (double)m->p50 / 1e3,
                   (double)m->p99 / 1e3, (double)m->p999 / 1e3, m->backlog, m->s503, busy,
                   m->ok ? "" : "  FAILED: ", m->ok ? "" : m->note);
        }
        if (s->note[0]) printf("%-9s %s\n", s->name, s->note);
    }
    printf("CPU during each phase, in cores ('load' is this process, 'machine' everything, "
           "'other' the rest of the machine):\n");
    printf("%-9s %-26s", "store", "phase");
    for (int k = 0; k < C_N; k++)
        printf(" %8s", c_names[k]);
    printf(" %8s\n", "other");
    int disturbed = 0;
    for (int r = 0; r < n; r++)
        for (int ph = 0; ph < P_N; ph++) {
            const double *c = runs[r].cpu[ph];
            if (!runs[r].cpu_ran[ph]) continue;
            double other = c[C_ALL] - c[C_SERVE] - c[C_REDIS] - c[C_PG] - c[C_LOAD];
            if (other < 0) other = 0;
            disturbed |= other > 0.15;
            printf("%-9s %-26s", runs[r].name, p_labels[ph]);
            for (int k = 0; k < C_N; k++)
                printf(" %8.2f", c[k]);
            printf(" %8.2f\n", other);
        }
    if (disturbed)
        printf("WARNING: other processes used more than 0.15 cores during a phase: its figures "
               "are disturbed; run again on a quiet machine\n");
    printf("targets:\n");
    for (int r = 0; r < n; r++) {
        double x = p99_ratio(&runs[r]);
        printf("  %-9s purchase p99 with polls <= 2 x without: %.2f x  %s\n", runs[r].name, x,
               x > 0 && x <= 2 ? "met" : "NOT met");
        const struct mres *pm = &runs[r].m[M_MIX_POLL];
        if (pm->ran)
            printf("  %-9s polls refused within 10 ms (p99 of the %" PRIu64 " 503s): %.2f ms  %s\n",
                   runs[r].name, pm->s503, (double)pm->p99_busy / 1e3,
                   pm->p99_busy <= 10000 ? "met" : "NOT met");
    }
}

static json_t *mres_json(const struct mres *m)
{
    json_t *x = json_object();
    json_object_set_new(x, "ok", json_boolean(m->ok));
    json_object_set_new(x, "rps", json_real(m->rps));
    json_object_set_new(x, "p50_us", json_integer((json_int_t)m->p50));
    json_object_set_new(x, "p99_us", json_integer((json_int_t)m->p99));
    json_object_set_new(x, "p999_us", json_integer((json_int_t)m->p999));
    json_object_set_new(x, "completed", json_integer((json_int_t)m->completed));
    json_object_set_new(x, "backlog_at_end", json_integer((json_int_t)m->backlog));
    json_object_set_new(x, "status_503", json_integer((json_int_t)m->s503));
    json_object_set_new(x, "status_200", json_integer((json_int_t)m->s200));
    json_object_set_new(x, "ok_rps", json_real(m->ok_rps));
    if (m->s503) json_object_set_new(x, "p99_503_us", json_integer((json_int_t)m->p99_busy));
    if (m->note[0]) json_object_set_new(x, "note", json_string(m->note));
    return x;
}

static json_t *to_json(const struct sk_bench_mixed_opts *o, const struct store_run *runs, int n)
{
    json_t *j = json_object();
    json_object_set_new(j, "purchase_rate", json_real(o->purchase_rate));
    json_object_set_new(j, "poll_rate", json_real(o->poll_rate));
    json_object_set_new(j, "pay_rate", json_real(o->pay_rate));
    json_object_set_new(j, "orders_polled", json_integer(N_ORDERS));
    json_object_set_new(j, "duration_s", json_real(o->duration_s));
    for (int r = 0; r < n; r++) {
        json_t *s = json_object();
        for (int i = 0; i < M_N; i++)
            if (runs[r].m[i].ran) json_object_set_new(s, m_ids[i], mres_json(&runs[r].m[i]));
        json_object_set_new(s, "purchase_p99_with_polls_x_alone", json_real(p99_ratio(&runs[r])));
        json_t *cpu = json_object();
        for (int ph = 0; ph < P_N; ph++) {
            if (!runs[r].cpu_ran[ph]) continue;
            json_t *c = json_object();
            for (int k = 0; k < C_N; k++)
                json_object_set_new(c, c_names[k], json_real(runs[r].cpu[ph][k]));
            json_object_set_new(cpu, p_labels[ph], c);
        }
        json_object_set_new(s, "cpu_cores", cpu);
        if (runs[r].note[0]) json_object_set_new(s, "note", json_string(runs[r].note));
        json_object_set_new(j, runs[r].name, s);
    }
    return j;
}

int sk_bench_http_mixed(const struct sk_bench_mixed_opts *o, json_t **out)
{
    struct store_run runs[3];
    int kinds[3], n = 0, failed = 0;
    memset(runs, 0, sizeof runs);
    if (o->sqlite) kinds[n] = 0, runs[n++] = (struct store_run){.name = "sqlite", .aid = 1001};
    if (o->pg) kinds[n] = 1, runs[n++] = (struct store_run){.name = "postgres", .aid = 1002};
    if (o->mysql) kinds[n] = 2, runs[n++] = (struct store_run){.name = "mariadb", .aid = 1003};
    for (int r = 0; r < n && !atomic_load(o->interrupted); r++) {
        if (run_store(&runs[r], o, kinds[r]) < 0) {
            failed = 1;
            fprintf(stderr, "seckill: bench http: mixed phase on %s: %s\n", runs[r].name,
                    runs[r].note[0] ? runs[r].note : "interrupted");
        }
        for (int i = 0; i < M_N; i++)
            if (runs[r].m[i].ran && !runs[r].m[i].ok) failed = 1;
    }
    if (!o->json) print_table(o, runs, n);
    *out = to_json(o, runs, n);
    return failed ? -1 : 0;
}
