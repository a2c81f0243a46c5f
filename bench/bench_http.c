/* bench_http.c - `seckill-bench http`: the HTTP service against a static
 * reference responder, in one run on this machine.
 *
 * Starts a private redis-server, one `seckill serve` process (this binary,
 * SQLite in a temporary directory) and, when nginx is installed, nginx with
 * one worker answering `return 200` as the HTTP limit of the machine. Then
 * drives each with the in-process load generator (src/load.h), closed loop,
 * same connections and duration, same request bytes (POST to the purchase
 * path with a JSON body and X-User-Id):
 *   1 static reference (nginx)
 *   2 purchase admission path (an activity with a stock no run can drain)
 *   3 sold-out refusal path (an activity whose single unit is sold first)
 *   3b the same with a fresh Idempotency-Key on every request (what a
 *      client does to get past the local sold-out answer)
 *   4 serve's RSS (VmRSS) idle and its peak with 1,000 connections busy
 *   5 the admission path again with serve reaching Redis over loopback TCP
 *     (the phases above use Redis's unix socket), and over the socket with
 *     --sync-replicas 1 and one replica on this machine (a restart of serve
 *     each; --no-variants skips them)
 *   6 with --waiting-room, the waiting room's routes in the same run
 *     (docs/waiting-room.md): joins before the start (the draw), joins after
 * it, polls of the joined buyers, polls of a sold-out waiting room (from
 * memory), each with the Redis CPU and the script time per request,
 * and, when wrk is installed, wrk and `seckill load` on nginx with GET /,
 * to show whether the load generator is the limit. Quotes the service as
 * ratios to the static reference and checks the targets.
 *
 * Everything it starts dies with it: child processes get PR_SET_PDEATHSIG
 * and are stopped on every exit path, Ctrl-C included; the temporary
 * directory is removed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "bench/bench_child.h"
#include "bench/bench_http_burst.h"
#include "bench/bench_http_mixed.h"
#include "bench/bench_int.h"
#include "bench/bench_opts.h"
#include "bench/bench_syscalls.h"
#include "bench/bench_util.h"
#include "core/cli.h"
#include "core/clock.h"
#include "core/error.h"
#include "load/load.h"
#include "redis/redis_conn.h"
#include "spawn/exe_path.h"
#include "spawn/netutil.h"
#include "spawn/redis_spawn.h"

/* The targets (2-core machine, load generator on it): admission as a
 * fraction of the static reference (--serve-role api; a full node's is
 * lower, its order worker shares the cores), the sold-out path, system
 * calls per admitted request (nginx makes 2 per request). */
#define TARGET_ADMIT_RATIO 0.7
#define TARGET_ADMIT_RATIO_ALL 0.5
#define TARGET_ADMIT_P99_US 10000
#define TARGET_SOLDOUT_RATIO 0.95
#define TARGET_SYSCALLS 2.5
#define TARGET_RSS_KIB (64 * 1024)

#define ADMIN_TOKEN "bench-http-admin-token"
#define BIG_STOCK 10000000
#define ACT_ADMIT 1
#define ACT_SOLDOUT 2
#define ACT_Q_DRAW 3 /* a waiting room whose sale starts in 2098: every join is drawn */
#define ACT_Q 4      /* a waiting room open since 2020 at 1 pass/s: joins queue, polls wait */
#define ACT_Q_SOLD 5 /* a waiting room whose single unit is sold */
#define RSS_CONNS 1000

struct opts {
    double duration_s;
    int64_t duration, connections, threads; /* duration: --duration, whole seconds */
    int json, no_wrk, no_variants, waiting_room, no_syscalls;
    const char *role; /* serve --role: api (one process) or all (+ order worker) */
    int mixed;        /* 0 none, 1 after the phases above, 2 only the mixed phase */
    int mixed_only, no_mixed;
    const char *stores; /* --mixed-stores */
    int mixed_sqlite, mixed_pg, mixed_mysql;
    int64_t purchase_rate, poll_rate, pay_rate;
    /* --open-loop: only the burst (bench_http_burst.h) */
    int open_loop;
    int64_t admit_target_ms, open_loop_connections, step;
};

/* Processes whose CPU time each phase reports. */
enum { CPU_SERVE, CPU_REDIS, CPU_REPLICA, CPU_NGINX, CPU_LOAD, CPU_ALL, CPU_N };
static const char *const cpu_names[CPU_N] = {"serve", "redis", "replica",
                                             "nginx", "load",  "machine"};

struct phase {
    const char *id, *label;
    int ran, ok;
    double rps;
    uint64_t p50, p99, p999, completed, expected_status_n;
    int expected_status;
    char note[300];
    json_t *detail; /* sk_load_json of the run, owned */
    /* CPU used during the phase, in cores (CPU seconds / wall seconds):
     * who is busy tells what limits the phase */
    double cpu[CPU_N];
    double script_us; /* Redis script time per request (INFO commandstats); -1: not read */
    pid_t count_pid;  /* the server whose system calls the phase counts (0: none) */
    int sysc_ok;      /* sysc holds the phase's counts */
    uint64_t sysc[SK_SYSC_N];
};

/* CPU_LOAD: this process (getrusage); CPU_ALL: every CPU (/proc/stat), so
 * that other work on the machine during a phase shows */
static pid_t cpu_pids[CPU_N];
/* How system calls are counted in this run, and where perf writes. */
static enum sk_bench_sysc_method sysc_method;
static const char *sysc_dir;

enum {
    PH_STATIC,
    PH_ADMIT,
    PH_SOLDOUT,
    PH_SOLDOUT_KEYED,
    PH_ADMIT_TCP,
    PH_ADMIT_SYNC,
    PH_Q_DRAW, /* --waiting-room: POST .../queue before the start */
    PH_Q_JOIN, /* POST .../queue after the start */
    PH_Q_POLL, /* GET .../queue of the buyers PH_Q_JOIN queued */
    PH_Q_SOLD, /* GET .../queue of a sold-out waiting room */
    PH_STATIC_GET,
    PH_WRK,
    PH_COUNT
};

/* The purchase phases: quoted against the static reference, with CPU per
 * request. */
static int is_purchase_phase(int i)
{
    return i == PH_ADMIT || i == PH_SOLDOUT || i == PH_SOLDOUT_KEYED || i == PH_ADMIT_TCP ||
           i == PH_ADMIT_SYNC;
}

static int is_queue_phase(int i)
{
    return i >= PH_Q_DRAW && i <= PH_Q_SOLD;
}

static int usage(FILE *f)
{
    fprintf(f,
            "usage: seckill-bench http [options]\n"
            "\n"
            "Measures `seckill serve` (purchase admission and sold-out refusal paths, the\n"
            "latter also with a fresh Idempotency-Key per request) against\n"
            "a static reference (nginx, one worker, `return 200`) in the same run, with the\n"
            "in-process load generator, plus serve's RSS idle and with %d connections. Starts\n"
            "and stops its own redis-server, serve and nginx (all on free loopback ports).\n"
            "\n"
            "options:\n"
            "  --duration S      seconds per measured phase, 1..60 (default 8)\n"
            "  --connections N   keep-alive connections per phase, 1..%d (default 200)\n"
            "  --threads N       load generator threads, 1..4 (default 1: the server needs\n"
            "                    the other core)\n"
            "  --serve-role R    api (default): serve is one HTTP process, no order worker\n"
            "                    (orders stay in the Redis stream); all: serve as a full node\n"
            "                    (HTTP process + order worker); CPU and RSS add both up\n"
            "  --no-wrk          skip the wrk comparison on the static route\n"
            "  --no-variants     skip the admission phases over loopback TCP and with\n"
            "                    --sync-replicas 1 (serve reaches Redis over its unix socket)\n"
            "  --waiting-room    also the waiting room's routes: joins before and after the\n"
            "                    start, polls, polls of a sold-out room, with the Redis CPU\n"
            "                    and script time per request (docs/waiting-room.md)\n"
            "  --no-syscalls     do not count the servers' system calls per request (perf\n"
            "                    stat on serve and nginx during each phase; without perf,\n"
            "                    /proc/PID/io's reads and writes)\n"
            "  --json            print one JSON object instead of the table\n"
            "\n"
            "mixed phase (after the phases above): purchases at a fixed rate alone, then while\n"
            "buyers poll GET /api/v1/orders/{id} and pay, all open loop; the order reads/s of\n"
            "each store; on PostgreSQL also purchases and polls while the database is frozen\n"
            "(SIGSTOP). serve runs with --role all, SQLite and a private PostgreSQL server.\n"
            "  --mixed-only      run only the mixed phase\n"
            "  --no-mixed        skip the mixed phase\n"
            "  --mixed-stores S  a comma list of sqlite, postgres, mariadb (default:\n"
            "                    sqlite,postgres,mariadb)\n"
            "  --purchase-rate R purchases/s (default %d)\n"
            "  --poll-rate R     order polls/s (default %d)\n"
            "  --pay-rate R      payments/s (default %d)\n"
            "\n"
            "open-loop phase (the first second of a sale; alone, the phases above skipped):\n"
            "serve --role api's closed-loop admission capacity with --connections, then the\n"
            "purchase route open loop at 0.5, 1, 1.5, 2, 3 and 5 x that capacity, /healthz\n"
            "probed meanwhile, and the same rates against nginx (the generator's limit).\n"
            "  --open-loop       run only the open-loop phase\n"
            "  --admit-target-ms N  serve's --admit-target-ms, 0..60000 (default 50; 0: off,\n"
            "                    no load shed: the figures before it)\n"
            "  --open-loop-connections N  the open-loop generator's connections (default 1000)\n"
            "  --step S          seconds per step, 1..60 (default 3)\n"
            "\n"
            "exit status: 0 every phase ran and its answers checked out (targets are\n"
            "reported, not enforced), 1 a phase failed, 2 bad usage\n",
            RSS_CONNS, SK_LOAD_MAX_CONNS, SK_BENCH_MIXED_PURCHASE_RATE, SK_BENCH_MIXED_POLL_RATE,
            SK_BENCH_MIXED_PAY_RATE);
    return f == stdout ? SK_EXIT_OK : SK_EXIT_USAGE;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR && !sk_bench_interrupted) {
    }
}

/* Full path of an executable on PATH (or in /usr/sbin, where Debian puts
 * nginx and root's PATH has it but others' may not); 0 or SK_ENOTFOUND. */
static int find_exe(const char *name, char *out, size_t cap)
{
    return sk_exe_path(name, out, cap);
}

static int admin(int port, const char *path, const char *body, char *out, size_t cap)
{
    return sk_bench_http_call(port, "POST", path, "Authorization: Bearer " ADMIN_TOKEN "\r\n", body,
                              out, cap);
}

static int start_serve(struct sk_bench_child *c, const char *dir, const char *redis_url,
                       const char *role, int sync_replicas, char *err, size_t cap)
{
    char sync[16];
    snprintf(sync, sizeof sync, "%d", sync_replicas);
    char listen[64], db[400], log[400];
    c->port = sk_net_free_port();
    snprintf(listen, sizeof listen, "127.0.0.1:%d", c->port);
    snprintf(db, sizeof db, "sqlite:%s/serve.db", dir);
    snprintf(log, sizeof log, "%s/serve.log", dir);
    char *argv[] = {(char *)sk_bench_seckill_bin(), "serve", "--listen", listen, "--redis",
                    (char *)redis_url, "--db", db, "--admin-token", ADMIN_TOKEN, "--processes", "1",
                    "--role", (char *)role, "--log-level", "warn", "--sync-replicas", sync,
                    /* healthy, WAIT answers at the replica's ack; a generous
                     * timeout keeps a busy machine from failing the phase */
                    "--sync-timeout-ms", "1000", NULL};
    c->pid = sk_bench_spawn(argv, log);
    if (c->pid < 0 || sk_bench_child_wait_ready(c, "/healthz", &sk_bench_interrupted) < 0) {
        snprintf(err, cap, "seckill serve did not start (see %.300s)", log);
        return -1;
    }
    return 0;
}

static int start_nginx(struct sk_bench_child *c, const char *exe, const char *dir, char *err,
                       size_t cap)
{
    char conf[400], log[400], elog[400];
    snprintf(conf, sizeof conf, "%s/nginx.conf", dir);
    snprintf(log, sizeof log, "%s/nginx.out", dir);
    snprintf(elog, sizeof elog, "%s/nginx-error.log", dir);
    c->port = sk_net_free_port();
    FILE *f = fopen(conf, "w");
    if (!f) {
        snprintf(err, cap, "cannot write %.250s: %.60s", conf, strerror(errno));
        return -1;
    }
    /* one process, one worker, no logging: the HTTP limit of this machine,
     * answering a JSON body of the size our refusals have */
    fprintf(f,
            "daemon off;\nmaster_process off;\nworker_processes 1;\n"
            "pid %s/nginx.pid;\nerror_log %s warn;\n"
            "events { worker_connections 12000; }\n"
            "http {\n  access_log off;\n  keepalive_requests 100000000;\n"
            "  keepalive_timeout 300s;\n"
            "  client_body_temp_path %s/body;\n  proxy_temp_path %s/proxy;\n"
            "  fastcgi_temp_path %s/fastcgi;\n  uwsgi_temp_path %s/uwsgi;\n"
            "  scgi_temp_path %s/scgi;\n"
            "  server {\n    listen 127.0.0.1:%d;\n    default_type application/json;\n"
            "    location / { return 200 '{\"status\":\"static\",\"message\":\"ok\"}'; }\n"
            "  }\n}\n",
            dir, elog, dir, dir, dir, dir, dir, c->port);
    fclose(f);
    char *argv[] = {(char *)exe, "-p", (char *)dir, "-e", elog, "-c", conf, NULL};
    c->pid = sk_bench_spawn(argv, log);
    if (c->pid < 0 || sk_bench_child_wait_ready(c, "/", &sk_bench_interrupted) < 0) {
        snprintf(err, cap, "nginx did not start (see %.150s and %.150s)", log, elog);
        return -1;
    }
    return 0;
}

/* ---- measurements ---- */

static void cpu_snapshot(double out[CPU_N])
{
    for (int i = 0; i < CPU_N; i++)
        out[i] = i == CPU_LOAD  ? sk_bench_self_cpu_seconds()
                 : i == CPU_ALL ? sk_bench_machine_cpu_seconds()
                                : sk_bench_tree_cpu_seconds(cpu_pids[i]);
}

static long rss_kib(pid_t pid);

/* RSS of serve: its processes added up (one with --role api). */
static long tree_rss_kib(pid_t root)
{
    pid_t ps[16];
    int n = sk_bench_with_children(root, ps, 16);
    long t = 0;
    for (int i = 0; i < n; i++) {
        long k = rss_kib(ps[i]);
        if (k > 0) t += k;
    }
    return n ? t : -1;
}

static long rss_kib(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) kib = strtol(line + 6, NULL, 10);
    fclose(f);
    return kib;
}

struct sampler {
    pid_t pid;
    atomic_int stop;
    long peak;
};

static void *sample_rss(void *arg)
{
    struct sampler *s = arg;
    while (!atomic_load(&s->stop)) {
        long k = tree_rss_kib(s->pid);
        if (k > s->peak) s->peak = k;
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static void load_opts(struct sk_load_opts *lo, const struct opts *o, int port, uint64_t aid)
{
    sk_load_opts_defaults(lo);
    lo->port = port;
    snprintf(lo->host, sizeof lo->host, "127.0.0.1");
    snprintf(lo->url, sizeof lo->url, "http://127.0.0.1:%d", port);
    lo->activity = aid;
    lo->connections = o->connections;
    lo->threads = o->threads;
    lo->duration_ms = (int64_t)(o->duration_s * 1000);
    lo->timeout_ms = 10000;
    lo->progress = 0;
}

/* Every request of the load a new user (ids from base on): each one is
 * admitted while the stock lasts. */
static void fresh_users(struct sk_load_opts *lo, uint64_t base)
{
    lo->users = 100000000;
    lo->user_base = base;
}

/* With --waiting-room: a connection to the run's Redis, for the script
 * time of each phase (INFO commandstats). */
static sk_redis *info_redis;

/* Microseconds Redis spent in scripts so far (EVALSHA and EVAL); -1 when
 * unknown. */
static double script_usec(void)
{
    if (!info_redis) return -1;
    const char *cmds[] = {"cmdstat_evalsha", "cmdstat_eval"};
    double t = 0;
    for (int i = 0; i < 2; i++) {
        char v[256];
        const char *u;
        if (sk_bench_info_field(info_redis, "commandstats", cmds[i], v, sizeof v) < 0) continue;
        if ((u = strstr(v, "usec=")) != NULL) t += strtod(u + 5, NULL);
    }
    return t;
}

/* Runs one load phase; fills p. Returns 0 when it ran and checked out. */
static int run_phase(struct phase *p, const struct sk_load_opts *lo, int expected_status)
{
    struct sk_load_result r;
    char err[300];
    p->ran = 1;
    p->expected_status = expected_status;
    double c0[CPU_N], c1[CPU_N];
    struct sk_bench_sysc sc;
    int counting = p->count_pid > 0 &&
                   sk_bench_sysc_start(&sc, sysc_method, p->count_pid, sysc_dir, p->id) == 0;
    double s0 = script_usec();
    cpu_snapshot(c0);
    int64_t t0 = sk_mono_us();
    if (sk_load_run(lo, &r, err, sizeof err) < 0) {
        if (counting) sk_bench_sysc_stop(&sc);
        snprintf(p->note, sizeof p->note, "load did not run: %.250s", err);
        return -1;
    }
    double wall = (double)(sk_mono_us() - t0) / 1e6;
    cpu_snapshot(c1);
    if (counting && sk_bench_sysc_stop(&sc) == 0) {
        p->sysc_ok = 1;
        memcpy(p->sysc, sc.count, sizeof p->sysc);
    }
    double s1 = script_usec();
    p->script_us = s0 >= 0 && s1 >= 0 && r.completed ? (s1 - s0) / (double)r.completed : -1;
    for (int i = 0; i < CPU_N; i++)
        p->cpu[i] = wall > 0 ? (c1[i] - c0[i]) / wall : 0;
    p->rps = r.rps;
    p->p50 = sk_hist_percentile(&r.latency, 50);
    p->p99 = sk_hist_percentile(&r.latency, 99);
    p->p999 = sk_hist_percentile(&r.latency, 99.9);
    p->completed = r.completed;
    p->expected_status_n =
        expected_status > 0 && expected_status < 600 ? r.status[expected_status] : 0;
    p->detail = sk_load_json(lo, &r);
    p->ok = r.ok && r.completed > 0 && p->expected_status_n == r.completed;
    if (!r.ok)
        snprintf(p->note, sizeof p->note, "check failed: %s",
                 r.n_violations ? r.violations[0] : "?");
    else if (p->expected_status_n != r.completed)
        snprintf(p->note, sizeof p->note, "%" PRIu64 " of %" PRIu64 " answers were not %d",
                 r.completed - p->expected_status_n, r.completed, expected_status);
    sk_load_result_free(&r);
    return p->ok ? 0 : -1;
}

/* wrk -t1 -cN -dS --latency on GET /; fills p from its report. */
static int run_wrk(struct phase *p, const char *wrk, const struct opts *o, int port,
                   const char *dir)
{
    char conns[16], dur[16], url[64], log[400], threads[16];
    snprintf(conns, sizeof conns, "%" PRId64, o->connections);
    snprintf(threads, sizeof threads, "%" PRId64, o->threads);
    snprintf(dur, sizeof dur, "%ds", (int)(o->duration_s + 0.5));
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", port);
    snprintf(log, sizeof log, "%s/wrk.out", dir);
    char *argv[] = {(char *)wrk, "-t", threads, "-c", conns, "-d", dur, "--latency", url, NULL};
    struct sk_bench_child c = {sk_bench_spawn(argv, log), 0};
    p->ran = 1;
    int st = 0;
    int64_t deadline = sk_mono_ms() + (int64_t)(o->duration_s * 1000) + 15000;
    for (;;) {
        pid_t r = waitpid(c.pid, &st, WNOHANG);
        if (r == c.pid) break;
        if (sk_bench_interrupted || sk_mono_ms() > deadline) {
            sk_bench_child_stop(&c);
            snprintf(p->note, sizeof p->note, "wrk %s",
                     sk_bench_interrupted ? "interrupted" : "timed out");
            return -1;
        }
        sleep_ms(50);
    }
    FILE *f = fopen(log, "r");
    char line[512];
    double rps = 0, p50 = 0, p99 = 0;
    while (f && fgets(line, sizeof line, f)) {
        double v;
        char unit[8];
        if (sscanf(line, "Requests/sec: %lf", &v) == 1) rps = v;
        /* latency distribution lines: "     50%    1.23ms" */
        if (sscanf(line, " 50%% %lf%7s", &v, unit) == 2)
            p50 = v * (!strcmp(unit, "s") ? 1e6 : !strcmp(unit, "ms") ? 1e3 : 1);
        if (sscanf(line, " 99%% %lf%7s", &v, unit) == 2)
            p99 = v * (!strcmp(unit, "s") ? 1e6 : !strcmp(unit, "ms") ? 1e3 : 1);
    }
    if (f) fclose(f);
    p->rps = rps;
    p->p50 = (uint64_t)p50;
    p->p99 = (uint64_t)p99;
    p->ok = rps > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    if (!p->ok) snprintf(p->note, sizeof p->note, "wrk failed (see %.250s)", log);
    return p->ok ? 0 : -1;
}

/* ---- report ---- */

static double ratio(const struct phase *a, const struct phase *ref)
{
    return a->ran && ref->ran && ref->rps > 0 ? a->rps / ref->rps : 0;
}

/* Cores used by the phase's own processes: servers, Redis, the load
 * generator (not other processes, not the hypervisor's steal). */
static double ours_cpu(const struct phase *p)
{
    return p->cpu[CPU_SERVE] + p->cpu[CPU_REDIS] + p->cpu[CPU_REPLICA] + p->cpu[CPU_NGINX] +
           p->cpu[CPU_LOAD];
}

/* Cores used by processes other than ours during a phase. */
static double other_cpu(const struct phase *p)
{
    double o = p->cpu[CPU_ALL] - ours_cpu(p);
    return o > 0 ? o : 0;
}

/* CPU per request of the phase's own processes, in µs; 0 when the phase
 * did not run. */
static double work_us(const struct phase *p)
{
    return p->ran && p->rps > 0 ? ours_cpu(p) / p->rps * 1e6 : 0;
}

/* What a phase's ratio to the static one would be if both kept the
 * machine equally busy: the static phase's CPU per request over this
 * one's. It separates what a request costs from how well the phase keeps
 * the cores busy (a closed loop of three processes on two cores idles
 * where nginx's two do not: BENCHMARKS.md, session 9). */
static double equal_cpu_ratio(const struct phase *p, const struct phase *ref)
{
    double w = work_us(p), r = work_us(ref);
    return w > 0 && r > 0 ? r / w : 0;
}

/* The phase's ratio to the static one on a machine with a core each for
 * the server and for Redis, the load generated elsewhere: each phase then
 * runs until its busiest server process fills its core (static: nginx;
 * a purchase phase: serve's processes, or Redis when it costs more per
 * request). An estimate from the phases' CPU per request on this machine,
 * not a measurement (BENCHMARKS.md, "Busy polling the event loop"). */
static double core_each_ratio(const struct phase *p, const struct phase *ref)
{
    if (!p->ran || !ref->ran || p->rps <= 0 || ref->rps <= 0) return 0;
    double ref_us = ref->cpu[CPU_NGINX] / ref->rps;
    double us = p->cpu[CPU_SERVE] / p->rps, redis_us = p->cpu[CPU_REDIS] / p->rps;
    if (redis_us > us) us = redis_us;
    return us > 0 && ref_us > 0 ? ref_us / us : 0;
}

static const char *met(int ok)
{
    return ok ? "met" : "NOT met";
}

/* System calls of the phase's server per completed request (-1: not counted). */
static double sysc_per_req(const struct phase *p, int k)
{
    return p->sysc_ok && p->completed ? (double)p->sysc[k] / (double)p->completed : -1;
}

struct report {
    const struct opts *o;
    struct phase ph[PH_COUNT];
    long rss_start, rss_idle, rss_peak;
    int have_nginx, have_wrk, rss_ran;
    char nginx_note[200];
    char machine[256];
    double admit_ratio, soldout_ratio, load_vs_wrk, target_admit;
    double admit_sysc, static_sysc;
    int t_admit, t_admit_p99, t_soldout, t_rss, t_sysc;
    json_t *mixed; /* the mixed phase's figures (bench_http_mixed.h), owned */
};

static void evaluate(struct report *R)
{
    struct phase *ph = R->ph;
    R->admit_ratio = ratio(&ph[PH_ADMIT], &ph[PH_STATIC]);
    R->soldout_ratio = ratio(&ph[PH_SOLDOUT], &ph[PH_STATIC]);
    R->load_vs_wrk = ratio(&ph[PH_STATIC_GET], &ph[PH_WRK]);
    R->target_admit = !strcmp(R->o->role, "all") ? TARGET_ADMIT_RATIO_ALL : TARGET_ADMIT_RATIO;
    R->t_admit = R->admit_ratio >= R->target_admit;
    R->admit_sysc = sysc_per_req(&ph[PH_ADMIT], SK_SYSC_ALL);
    R->static_sysc = sysc_per_req(&ph[PH_STATIC], SK_SYSC_ALL);
    R->t_sysc = R->admit_sysc >= 0 && R->admit_sysc <= TARGET_SYSCALLS;
    R->t_admit_p99 = ph[PH_ADMIT].ran && ph[PH_ADMIT].p99 <= TARGET_ADMIT_P99_US;
    R->t_soldout = R->soldout_ratio >= TARGET_SOLDOUT_RATIO;
    R->t_rss = R->rss_ran && R->rss_peak > 0 && R->rss_peak <= TARGET_RSS_KIB;
}

/* The waiting room's routes against the purchase path of the same run. */
static void print_queue_table(const struct phase *ph)
{
    printf("\nwaiting room (docs/waiting-room.md), against the purchase path of this run:\n");
    printf("%-44s %12s %8s %14s %14s %14s\n", "phase", "req/s", "x admit", "redis us/req",
           "script us/req", "serve us/req");
    const int rows[] = {PH_ADMIT, PH_Q_DRAW, PH_Q_JOIN, PH_Q_POLL, PH_Q_SOLD};
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        const struct phase *p = &ph[rows[k]];
        if (!p->ran || p->rps <= 0) continue;
        char script[16] = "-";
        if (p->script_us >= 0) snprintf(script, sizeof script, "%.2f", p->script_us);
        printf("%-44s %12.0f %8.2f %14.2f %14s %14.1f\n", p->label, p->rps, ratio(p, &ph[PH_ADMIT]),
               p->cpu[CPU_REDIS] / p->rps * 1e6, script, p->cpu[CPU_SERVE] / p->rps * 1e6);
    }
}

/* CPU per request of each phase's processes, and the throughput it
 * allows: the phase's ceiling on this machine. */
static void print_work_table(const struct report *R)
{
    const struct phase *ph = R->ph;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    printf("\nwork per request (the phase's processes: server, Redis, load generator; not "
           "steal):\n");
    printf("%-44s %12s %10s %18s %16s\n", "phase", "CPU us/req", "cores", "req/s at all cores",
           "x static at =CPU");
    for (int i = 0; i < PH_COUNT; i++) {
        const struct phase *p = &ph[i];
        double w = work_us(p);
        if (!p->ran || i == PH_WRK || w <= 0) continue;
        char eq[16] = "";
        if (i != PH_STATIC && i != PH_STATIC_GET && ph[PH_STATIC].ran)
            snprintf(eq, sizeof eq, "%.2f", equal_cpu_ratio(p, &ph[PH_STATIC]));
        printf("%-44s %12.1f %10.2f %18.0f %16s\n", p->label, w, ours_cpu(p),
               (double)ncpu * 1e6 / w, eq);
    }
}

/* System calls per request of the server each phase drives. */
static void print_sysc_table(const struct report *R)
{
    const struct phase *ph = R->ph;
    printf("\nsystem calls per request of the server driven (%s; serve: its processes, nginx: its "
           "worker):\n",
           sysc_method == SK_SYSC_PERF
               ? "perf stat, raw_syscalls:sys_enter and per-call tracepoints"
               : "/proc/PID/io syscr+syscw: reads and writes only");
    printf("%-44s %8s %8s %8s %8s %8s %8s %8s\n", "phase", "all", "reads", "writes", "ep_wait",
           "ep_ctl", "ioctl", "x nginx");
    for (int i = 0; i < PH_COUNT; i++) {
        const struct phase *p = &ph[i];
        if (!p->ran || !p->sysc_ok) continue;
        printf("%-44s", p->label);
        for (int k = 0; k < SK_SYSC_N; k++)
            if (sysc_method == SK_SYSC_PERF || k == SK_SYSC_ALL)
                printf(" %8.3f", sysc_per_req(p, k));
            else
                printf(" %8s", "-");
        double ref = R->static_sysc;
        if (ref > 0 && i != PH_STATIC && i != PH_STATIC_GET)
            printf(" %8.2f", sysc_per_req(p, SK_SYSC_ALL) / ref);
        printf("\n");
    }
}

static void print_table(const struct report *R)
{
    const struct phase *ph = R->ph;
    printf("seckill-bench http: %s\n", R->machine);
    printf("load: seckill load in-process, closed loop, %" PRId64 " connections, %" PRId64
           " thread(s), %.0f s per phase; POST purchase-shaped requests with X-User-Id\n",
           R->o->connections, R->o->threads, R->o->duration_s);
    printf("serve: --role %s --processes 1\n\n", R->o->role);
    printf("%-44s %12s %10s %10s %10s %8s\n", "phase", "req/s", "p50 ms", "p99 ms", "p99.9 ms",
           "x static");
    for (int i = 0; i < PH_COUNT; i++) {
        const struct phase *p = &ph[i];
        if (is_queue_phase(i) && !R->o->waiting_room) continue;
        if (!p->ran) {
            printf("%-44s %12s   %s\n", p->label, "-", p->note[0] ? p->note : "not run");
            continue;
        }
        char rt[16] = "", p999[16] = "-";
        if (is_purchase_phase(i) && ph[PH_STATIC].ran)
            snprintf(rt, sizeof rt, "%.2f", ratio(p, &ph[PH_STATIC]));
        if (i != PH_WRK) snprintf(p999, sizeof p999, "%.2f", (double)p->p999 / 1e3);
        printf("%-44s %12.0f %10.2f %10.2f %10s %8s%s%s\n", p->label, p->rps, (double)p->p50 / 1e3,
               (double)p->p99 / 1e3, p999, rt, p->ok ? "" : "  FAILED: ", p->ok ? "" : p->note);
    }
    printf("\nCPU during each phase, in cores (%ld on this machine; 'load' is this process, "
           "'machine' everything):\n",
           sysconf(_SC_NPROCESSORS_ONLN));
    printf("%-44s", "phase");
    for (int k = 0; k < CPU_N; k++)
        printf(" %7s", cpu_names[k]);
    printf(" %7s %14s %14s\n", "other", "serve us/req", "redis us/req");
    int disturbed = 0;
    for (int i = 0; i < PH_COUNT; i++) {
        const struct phase *p = &ph[i];
        if (!p->ran || i == PH_WRK) continue;
        printf("%-44s", p->label);
        for (int k = 0; k < CPU_N; k++)
            printf(" %7.2f", p->cpu[k]);
        double other = other_cpu(p);
        printf(" %7.2f", other);
        if (other > 0.15) disturbed = 1;
        if (is_purchase_phase(i) || is_queue_phase(i))
            printf(" %14.1f %14.2f", p->rps > 0 ? p->cpu[CPU_SERVE] / p->rps * 1e6 : 0,
                   p->rps > 0 ? p->cpu[CPU_REDIS] / p->rps * 1e6 : 0);
        printf("\n");
    }
    print_work_table(R);
    if (sysc_method != SK_SYSC_NONE) print_sysc_table(R);
    if (R->o->waiting_room) print_queue_table(ph);
    if (disturbed)
        printf("WARNING: other processes used more than 0.15 cores during a phase: its figures "
               "are disturbed; run again on a quiet machine\n");
    if (!R->have_nginx) printf("\nstatic reference missing: %s\n", R->nginx_note);
    if (ph[PH_ADMIT_TCP].ran || ph[PH_ADMIT_SYNC].ran) {
        printf("\nadmission by Redis link, ratios to the admission phase (unix socket, no "
               "--sync-replicas):\n");
        for (int i = PH_ADMIT_TCP; i <= PH_ADMIT_SYNC; i++)
            if (ph[i].ran)
                printf("  %-56s x%.2f req/s, p99 %.2f ms (%.2f ms)\n", ph[i].label,
                       ratio(&ph[i], &ph[PH_ADMIT]), (double)ph[i].p99 / 1e3,
                       (double)ph[PH_ADMIT].p99 / 1e3);
    }
    printf("\nserve RSS: %ld KiB at start, %ld KiB idle after the phases, %ld KiB peak with %d "
           "connections busy\n",
           R->rss_start, R->rss_idle, R->rss_peak, RSS_CONNS);
    if (ph[PH_WRK].ran && ph[PH_STATIC_GET].ran)
        printf("load generator vs wrk on nginx GET /: %.2f x wrk's req/s\n", R->load_vs_wrk);
    printf("\ntargets:\n");
    if (R->have_nginx) {
        printf("  admission >= %.1f x static:        %.2f  %s\n", R->target_admit, R->admit_ratio,
               met(R->t_admit));
        printf("    (at equal CPU use: %.2f; cores busy %.2f against static's %.2f)\n",
               equal_cpu_ratio(&ph[PH_ADMIT], &ph[PH_STATIC]), ours_cpu(&ph[PH_ADMIT]),
               ours_cpu(&ph[PH_STATIC]));
        printf("    (with a core each for serve and Redis, load elsewhere, estimated from CPU "
               "per request: %.2f)\n",
               core_each_ratio(&ph[PH_ADMIT], &ph[PH_STATIC]));
        printf("  admission p99 <= %d ms:           %.2f ms  %s\n", TARGET_ADMIT_P99_US / 1000,
               (double)ph[PH_ADMIT].p99 / 1e3, met(R->t_admit_p99));
        printf("  sold-out >= %.2f x static:        %.2f  %s\n", TARGET_SOLDOUT_RATIO,
               R->soldout_ratio, met(R->t_soldout));
    } else {
        printf("  ratios: not measured (no static reference)\n");
        printf("  admission p99 <= %d ms:           %.2f ms  %s\n", TARGET_ADMIT_P99_US / 1000,
               (double)ph[PH_ADMIT].p99 / 1e3, met(R->t_admit_p99));
    }
    if (R->admit_sysc >= 0 && R->static_sysc >= 0)
        printf("  syscalls per admission <= %.1f:    %.2f (nginx %.2f per request)  %s\n",
               TARGET_SYSCALLS, R->admit_sysc, R->static_sysc, met(R->t_sysc));
    else if (R->admit_sysc >= 0)
        printf("  syscalls per admission <= %.1f:    %.2f  %s\n", TARGET_SYSCALLS, R->admit_sysc,
               met(R->t_sysc));
    printf("  RSS <= 64 MiB at %d connections:  %.1f MiB  %s\n", RSS_CONNS,
           (double)R->rss_peak / 1024.0, met(R->t_rss));
}

static void print_json(const struct report *R)
{
    json_t *j = json_object(), *phs = json_object(), *t = json_object(), *rss = json_object();
    json_object_set_new(j, "benchmark", json_string("http"));
    json_object_set_new(j, "machine", json_string(R->machine));
    json_object_set_new(j, "connections", json_integer(R->o->connections));
    json_object_set_new(j, "load_threads", json_integer(R->o->threads));
    json_object_set_new(j, "duration_s", json_real(R->o->duration_s));
    json_object_set_new(j, "serve_role", json_string(R->o->role));
    for (int i = 0; i < PH_COUNT; i++) {
        const struct phase *p = &R->ph[i];
        json_t *x = json_object();
        if (is_queue_phase(i) && !R->o->waiting_room) {
            json_decref(x);
            continue;
        }
        json_object_set_new(x, "ran", json_boolean(p->ran));
        if (p->ran && p->script_us >= 0)
            json_object_set_new(x, "redis_script_us_per_req", json_real(p->script_us));
        if (p->ran) {
            json_object_set_new(x, "ok", json_boolean(p->ok));
            json_object_set_new(x, "rps", json_real(p->rps));
            json_object_set_new(x, "p50_us", json_integer((json_int_t)p->p50));
            json_object_set_new(x, "p99_us", json_integer((json_int_t)p->p99));
            if (i != PH_WRK) json_object_set_new(x, "p999_us", json_integer((json_int_t)p->p999));
        }
        if (p->note[0]) json_object_set_new(x, "note", json_string(p->note));
        if (p->ran && i != PH_WRK) {
            json_t *c = json_object();
            for (int k = 0; k < CPU_N; k++)
                json_object_set_new(c, cpu_names[k], json_real(p->cpu[k]));
            json_object_set_new(c, "other", json_real(other_cpu(p)));
            json_object_set_new(x, "cpu_us_per_req_ours", json_real(work_us(p)));
            json_object_set_new(x, "cpu_cores", c);
        }
        if (p->sysc_ok) {
            static const char *const names[SK_SYSC_N] = {"all",        "reads",     "writes",
                                                         "epoll_wait", "epoll_ctl", "ioctl"};
            json_t *sc = json_object();
            for (int k = 0; k < SK_SYSC_N; k++)
                if (sysc_method == SK_SYSC_PERF || k == SK_SYSC_ALL)
                    json_object_set_new(sc, names[k], json_real(sysc_per_req(p, k)));
            json_object_set_new(x, "syscalls_per_req", sc);
        }
        if (p->detail) json_object_set(x, "load", p->detail);
        json_object_set_new(phs, p->id, x);
    }
    json_object_set_new(j, "phases", phs);
    json_object_set_new(rss, "start_kib", json_integer(R->rss_start));
    json_object_set_new(rss, "idle_kib", json_integer(R->rss_idle));
    json_object_set_new(rss, "peak_kib", json_integer(R->rss_peak));
    json_object_set_new(rss, "connections", json_integer(RSS_CONNS));
    json_object_set_new(j, "serve_rss", rss);
    json_object_set_new(j, "syscalls_counted_by",
                        json_string(sk_bench_sysc_method_name(sysc_method)));
    if (R->have_nginx) {
        json_object_set_new(j, "admission_x_static", json_real(R->admit_ratio));
        json_object_set_new(j, "soldout_x_static", json_real(R->soldout_ratio));
        json_object_set_new(j, "admission_x_static_equal_cpu",
                            json_real(equal_cpu_ratio(&R->ph[PH_ADMIT], &R->ph[PH_STATIC])));
        json_object_set_new(j, "admission_x_static_core_each",
                            json_real(core_each_ratio(&R->ph[PH_ADMIT], &R->ph[PH_STATIC])));
    } else {
        json_object_set_new(j, "static_reference_missing", json_string(R->nginx_note));
    }
    if (R->ph[PH_WRK].ran) json_object_set_new(j, "load_x_wrk", json_real(R->load_vs_wrk));
    if (R->ph[PH_ADMIT_TCP].ran)
        json_object_set_new(j, "admission_tcp_x_unix",
                            json_real(ratio(&R->ph[PH_ADMIT_TCP], &R->ph[PH_ADMIT])));
    if (R->ph[PH_ADMIT_SYNC].ran)
        json_object_set_new(j, "admission_sync1_x_unix",
                            json_real(ratio(&R->ph[PH_ADMIT_SYNC], &R->ph[PH_ADMIT])));
    json_object_set_new(t, "admission_ratio_met",
                        R->have_nginx ? json_boolean(R->t_admit) : json_null());
    json_object_set_new(t, "admission_p99_met", json_boolean(R->t_admit_p99));
    json_object_set_new(t, "soldout_ratio_met",
                        R->have_nginx ? json_boolean(R->t_soldout) : json_null());
    json_object_set_new(t, "rss_met", json_boolean(R->t_rss));
    json_object_set_new(t, "syscalls_met",
                        R->admit_sysc >= 0 ? json_boolean(R->t_sysc) : json_null());
    json_object_set_new(j, "targets", t);
    if (R->mixed) json_object_set(j, "mixed", R->mixed);
    char *s = json_dumps(j, JSON_INDENT(2));
    if (s) printf("%s\n", s);
    free(s);
    json_decref(j);
}

/* ---- admission by Redis link ---- */

/* A replica of redis on this machine, in sync and counted by WAIT; 0 or -1
 * (why in note). */
static int start_replica(struct sk_redis_spawn *replica, const struct sk_redis_spawn *redis,
                         char *note, size_t cap)
{
    char port[16], err[160];
    snprintf(port, sizeof port, "%d", redis->port);
    const char *args[] = {"--replicaof", "127.0.0.1", port, NULL};
    if (sk_redis_spawn_start(replica, args) < 0) {
        snprintf(note, cap, "replica: %.200s", replica->errstr);
        return -1;
    }
    sk_redis *r;
    if (sk_redis_new(&r, redis->url, 2000, 2000, err, sizeof err) < 0) {
        snprintf(note, cap, "%.200s", err);
        return -1;
    }
    /* the master streams to a fresh replica from its first acknowledgement
     * (up to a second after the sync): until WAIT counts it */
    int ok = 0;
    for (int64_t end = sk_mono_ms() + 15000; !ok && sk_mono_ms() < end && !sk_bench_interrupted;) {
        redisReply *rep;
        if (sk_redis_cmd(r, &rep, "SET seckill:bench:probe 1") == 0) freeReplyObject(rep);
        if (sk_redis_cmd(r, &rep, "WAIT 1 100") == 0) {
            ok = rep->type == REDIS_REPLY_INTEGER && rep->integer == 1;
            freeReplyObject(rep);
        } else {
            sleep_ms(100);
        }
    }
    sk_redis_free(r);
    if (!ok) snprintf(note, cap, "the replica never acknowledged a write");
    return ok ? 0 : -1;
}

/* Restarts serve on url with --sync-replicas sync and runs the admission
 * phase into p (users from user_base). */
static int admission_variant(struct phase *p, const struct opts *o, struct sk_bench_child *serve,
                             const char *dir, const char *url, int sync, uint32_t user_base)
{
    char err[400];
    sk_bench_child_stop(serve);
    if (start_serve(serve, dir, url, o->role, sync, err, sizeof err) < 0) {
        snprintf(p->note, sizeof p->note, "%.290s", err);
        return -1;
    }
    cpu_pids[CPU_SERVE] = serve->pid;
    p->count_pid = serve->pid;
    struct sk_load_opts lo;
    load_opts(&lo, o, serve->port, ACT_ADMIT);
    fresh_users(&lo, user_base);
    lo.limit = 1;
    return run_phase(p, &lo, 200);
}

/* ---- the waiting room ---- */

/* The three waiting rooms (ACT_Q_*), the last one sold out: its one unit
 * bought with its buyer's pass. 0, or -1 with err set. */
static int setup_queues(int port, char *err, size_t cap)
{
    const struct {
        int id;
        long stock;
        const char *start;
        int rate;
    } acts[] = {{ACT_Q_DRAW, BIG_STOCK, "2098-01-01T00:00:00Z", 1},
                {ACT_Q, BIG_STOCK, "2020-01-01T00:00:00Z", 1},
                {ACT_Q_SOLD, 1, "2020-01-01T00:00:00Z", 1000}};
    char body[512], out[2048], path[128];
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) {
        snprintf(body, sizeof body,
                 "{\"id\":%d,\"name\":\"bench queue\",\"stock\":%ld,\"per_user_limit\":1,"
                 "\"start\":\"%s\",\"end\":\"2099-01-01T00:00:00Z\","
                 "\"waiting_room\":{\"passes_per_s\":%d,\"pass_ttl_s\":3600}}",
                 acts[i].id, acts[i].stock, acts[i].start, acts[i].rate);
        int st = admin(port, "/api/v1/activities", body, out, sizeof out);
        const char *steps[] = {"preheat", "open"};
        for (int k = 0; st == 201 && k < 2; k++) {
            snprintf(path, sizeof path, "/api/v1/activities/%d/%s", acts[i].id, steps[k]);
            if (admin(port, path, NULL, out, sizeof out) != 200) st = -2;
        }
        if (st != 201) {
            snprintf(err, cap, "waiting room %d set-up failed: %.300s", acts[i].id, out);
            return -1;
        }
    }
    /* the sold-out room: its first buyer gets a pass at once (an idle room)
     * and buys the unit with it */
    snprintf(path, sizeof path, "/api/v1/activities/%d/queue", ACT_Q_SOLD);
    json_t *j = NULL;
    char hdr[160];
    int ok =
        sk_bench_http_call(port, "POST", path, "X-User-Id: 1\r\n", NULL, out, sizeof out) == 200 &&
        (j = json_loads(out, 0, NULL)) != NULL && json_is_string(json_object_get(j, "pass"));
    if (ok) {
        snprintf(hdr, sizeof hdr, "X-User-Id: 1\r\nX-Queue-Pass: %s\r\n",
                 json_string_value(json_object_get(j, "pass")));
        char buy[128];
        snprintf(buy, sizeof buy, "/api/v1/activities/%d/purchase", ACT_Q_SOLD);
        ok = sk_bench_http_call(port, "POST", buy, hdr, "{\"quantity\":1}", out, sizeof out) ==
                 200 &&
             sk_bench_http_call(port, "GET", path, "X-User-Id: 2\r\n", NULL, out, sizeof out) ==
                 200 &&
             strstr(out, "sold_out") != NULL;
    }
    json_decref(j);
    if (!ok) snprintf(err, cap, "could not sell out waiting room %d: %.300s", ACT_Q_SOLD, out);
    return ok ? 0 : -1;
}

/* The waiting room's phases; returns nonzero when one failed. */
static int queue_phases(struct report *R, const struct opts *o, int port)
{
    struct sk_load_opts lo;
    int failed = 0;
    const struct {
        int ph, act;
        const char *method;
        uint64_t base;
    } runs[] = {{PH_Q_DRAW, ACT_Q_DRAW, "POST", 300000000},
                {PH_Q_JOIN, ACT_Q, "POST", 400000000},
                {PH_Q_POLL, ACT_Q, "GET", 400000000},
                {PH_Q_SOLD, ACT_Q_SOLD, "GET", 500000000}};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0] && !sk_bench_interrupted; i++) {
        load_opts(&lo, o, port, (uint64_t)runs[i].act);
        snprintf(lo.path, sizeof lo.path, "/api/v1/activities/{id}/queue");
        snprintf(lo.method, sizeof lo.method, "%s", runs[i].method);
        lo.user_base = runs[i].base;
        /* polls ask for the buyers the join phase queued, each in turn and
         * then at random; the others are new buyers every time */
        lo.users = runs[i].ph == PH_Q_POLL ? R->ph[PH_Q_JOIN].completed : 100000000;
        if (lo.users == 0) {
            snprintf(R->ph[runs[i].ph].note, sizeof R->ph[runs[i].ph].note, "nobody joined");
            failed = 1;
            continue;
        }
        failed |= run_phase(&R->ph[runs[i].ph], &lo, 200) < 0;
    }
    return failed;
}

/* ---- the command ---- */

/* A --mixed-stores list: comma-separated sqlite, postgres, mariadb (or
 * mysql), at least one. */
static int stores_ok(const char *v)
{
    if (!*v) return 0;
    for (const char *p = v; *p;) {
        size_t n = strcspn(p, ",");
        if (!((n == 6 && !strncmp(p, "sqlite", 6)) || (n == 8 && !strncmp(p, "postgres", 8)) ||
              (n == 7 && !strncmp(p, "mariadb", 7)) || (n == 5 && !strncmp(p, "mysql", 5))))
            return 0;
        p += n;
        if (*p == ',' && *++p == 0) return 0;
    }
    return 1;
}

static int parse(struct opts *o, int argc, char **argv, int *help)
{
    static const struct sk_bench_opt opts[] = {
        {"--duration", SK_BENCH_OPT_INT, offsetof(struct opts, duration), 1, 60, NULL},
        {"--connections", SK_BENCH_OPT_INT, offsetof(struct opts, connections), 1,
         SK_LOAD_MAX_CONNS, NULL},
        {"--threads", SK_BENCH_OPT_INT, offsetof(struct opts, threads), 1, 4, NULL},
        {"--purchase-rate", SK_BENCH_OPT_INT, offsetof(struct opts, purchase_rate), 1, 1000000,
         NULL},
        {"--poll-rate", SK_BENCH_OPT_INT, offsetof(struct opts, poll_rate), 1, 1000000, NULL},
        {"--pay-rate", SK_BENCH_OPT_INT, offsetof(struct opts, pay_rate), 1, 1000000, NULL},
        {"--json", SK_BENCH_OPT_FLAG, offsetof(struct opts, json), 0, 0, NULL},
        {"--no-wrk", SK_BENCH_OPT_FLAG, offsetof(struct opts, no_wrk), 0, 0, NULL},
        {"--no-variants", SK_BENCH_OPT_FLAG, offsetof(struct opts, no_variants), 0, 0, NULL},
        {"--waiting-room", SK_BENCH_OPT_FLAG, offsetof(struct opts, waiting_room), 0, 0, NULL},
        {"--no-syscalls", SK_BENCH_OPT_FLAG, offsetof(struct opts, no_syscalls), 0, 0, NULL},
        {"--mixed-only", SK_BENCH_OPT_FLAG, offsetof(struct opts, mixed_only), 0, 0, NULL},
        {"--no-mixed", SK_BENCH_OPT_FLAG, offsetof(struct opts, no_mixed), 0, 0, NULL},
        {"--mixed-stores", SK_BENCH_OPT_STR, offsetof(struct opts, stores), 0, 0,
         "a list of stores"},
        {"--serve-role", SK_BENCH_OPT_STR, offsetof(struct opts, role), 0, 0, "api or all"},
        {"--open-loop", SK_BENCH_OPT_FLAG, offsetof(struct opts, open_loop), 0, 0, NULL},
        {"--admit-target-ms", SK_BENCH_OPT_INT, offsetof(struct opts, admit_target_ms), 0, 60000,
         NULL},
        {"--open-loop-connections", SK_BENCH_OPT_INT, offsetof(struct opts, open_loop_connections),
         1, SK_LOAD_MAX_CONNS, NULL},
        {"--step", SK_BENCH_OPT_INT, offsetof(struct opts, step), 1, 60, NULL},
    };
    o->duration = 8;
    o->connections = 200;
    o->threads = 1;
    o->role = "api";
    o->stores = "sqlite,postgres,mariadb";
    o->purchase_rate = SK_BENCH_MIXED_PURCHASE_RATE;
    o->poll_rate = SK_BENCH_MIXED_POLL_RATE;
    o->pay_rate = SK_BENCH_MIXED_PAY_RATE;
    o->admit_target_ms = 50;
    o->open_loop_connections = 1000;
    o->step = 3;
    int rc = sk_bench_opts_parse("http", opts, sizeof opts / sizeof opts[0], argc, argv, o, help);
    if (rc || *help) return rc;
    if (strcmp(o->role, "api") != 0 && strcmp(o->role, "all") != 0)
        return sk_cli_usage_error("bench http: --serve-role must be api or all, got '%s'", o->role);
    if (!stores_ok(o->stores))
        return sk_cli_usage_error("bench http: --mixed-stores: a comma-separated list of sqlite, "
                                  "postgres and mariadb, got '%s'",
                                  o->stores);
    if (o->mixed_only && o->no_mixed)
        return sk_cli_usage_error("bench http: --mixed-only and --no-mixed exclude each other");
    o->mixed = o->no_mixed ? 0 : o->mixed_only ? 2 : 1;
    o->mixed_sqlite = strstr(o->stores, "sqlite") != NULL;
    o->mixed_pg = strstr(o->stores, "postgres") != NULL;
    o->mixed_mysql = strstr(o->stores, "mariadb") || strstr(o->stores, "mysql");
    o->duration_s = (double)o->duration;
    return 0;
}

static int rm_rf(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

int sk_bench_http(int argc, char **argv)
{
    struct opts o = {0};
    int help = 0;
    int rc = parse(&o, argc - 1, argv + 1, &help);
    if (rc) return rc;
    if (help) return usage(stdout);

    static struct report R; /* phases hold JSON; static keeps the stack small */
    memset(&R, 0, sizeof R);
    R.o = &o;
    const struct {
        const char *id, *label;
    } names[PH_COUNT] = {
        [PH_STATIC] = {"static", "static reference (nginx return 200)"},
        [PH_ADMIT] = {"admission", "purchase, admitted (serve + Redis)"},
        [PH_ADMIT_TCP] = {"admission_tcp", "purchase, admitted, Redis over loopback TCP"},
        [PH_ADMIT_SYNC] = {"admission_sync_replicas_1",
                           "purchase, admitted, --sync-replicas 1 (a local replica)"},
        [PH_SOLDOUT] = {"sold_out", "purchase, sold out (local fast path)"},
        [PH_SOLDOUT_KEYED] = {"sold_out_keyed", "purchase, sold out, fresh Idempotency-Key"},
        [PH_Q_DRAW] = {"queue_join_draw", "queue join before the start (the draw)"},
        [PH_Q_JOIN] = {"queue_join", "queue join after the start (arrival order)"},
        [PH_Q_POLL] = {"queue_poll", "queue poll, waiting (ZRANK)"},
        [PH_Q_SOLD] = {"queue_poll_sold_out", "queue poll, sold out (from memory)"},
        [PH_STATIC_GET] = {"static_get_seckill_load", "nginx GET /, seckill load"},
        [PH_WRK] = {"static_get_wrk", "nginx GET /, wrk"},
    };
    for (int i = 0; i < PH_COUNT; i++) {
        R.ph[i].id = names[i].id;
        R.ph[i].label = names[i].label;
    }
    struct utsname u;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (uname(&u) == 0)
        snprintf(R.machine, sizeof R.machine, "%s %s %s, %ld CPUs", u.sysname, u.release, u.machine,
                 cpus);

    sk_bench_catch_signals(sk_load_interrupt);

    struct sk_redis_spawn redis = {0}, replica = {0};
    struct sk_bench_child serve = {0}, nginx = {0};
    char dir[256] = "", err[400] = "", nginx_exe[512], wrk_exe[512];
    int exit_code = SK_EXIT_FAIL;
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/seckill-bench-http-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        dir[0] = 0;
        snprintf(err, sizeof err, "mkdtemp: %s", strerror(errno));
        goto done;
    }
    if (!o.json)
        fprintf(stderr, "seckill: bench http: starting redis-server, serve, nginx in %s\n", dir);
    /* a replica's first sync at once (the --sync-replicas phase) */
    const char *rargs[] = {"--repl-diskless-sync-delay", "0", NULL};
    if (sk_redis_spawn_start(&redis, rargs) < 0) {
        snprintf(err, sizeof err, "redis-server: %s", redis.errstr);
        goto done;
    }
    int failed = 0;
    if (o.open_loop) goto open_loop;
    if (o.mixed == 2) goto mixed;
    /* Redis on this machine: serve reaches it over its unix socket */
    const char *link = redis.unix_url[0] ? redis.unix_url : redis.url;
    if (start_serve(&serve, dir, link, o.role, 0, err, sizeof err) < 0) goto done;
    R.rss_start = tree_rss_kib(serve.pid);
    cpu_pids[CPU_SERVE] = serve.pid;
    cpu_pids[CPU_REDIS] = redis.pid;
    if (o.waiting_room && sk_redis_new(&info_redis, redis.url, 2000, 2000, err, sizeof err) < 0) {
        info_redis = NULL;
        goto done;
    }

    /* the activities: one no run can drain, one sold out before it starts */
    char body[512], out[2048], path[128];
    const struct {
        int id;
        long stock;
    } acts[] = {{ACT_ADMIT, BIG_STOCK}, {ACT_SOLDOUT, 1}};
    for (size_t i = 0; i < 2; i++) {
        snprintf(body, sizeof body,
                 "{\"id\":%d,\"name\":\"bench http\",\"stock\":%ld,\"per_user_limit\":1,"
                 "\"start\":\"2020-01-01T00:00:00Z\",\"end\":\"2099-01-01T00:00:00Z\"}",
                 acts[i].id, acts[i].stock);
        int st = admin(serve.port, "/api/v1/activities", body, out, sizeof out);
        const char *steps[] = {"preheat", "open"};
        for (int k = 0; st == 201 && k < 2; k++) {
            snprintf(path, sizeof path, "/api/v1/activities/%d/%s", acts[i].id, steps[k]);
            if (admin(serve.port, path, NULL, out, sizeof out) != 200) st = -2;
        }
        if (st != 201) {
            snprintf(err, sizeof err, "activity %d set-up failed: %.300s", acts[i].id, out);
            goto done;
        }
    }
    if (o.waiting_room && setup_queues(serve.port, err, sizeof err) < 0) goto done;
    snprintf(path, sizeof path, "/api/v1/activities/%d/purchase", ACT_SOLDOUT);
    if (sk_bench_http_call(serve.port, "POST", path, "X-User-Id: 1\r\n", "{\"quantity\":1}", out,
                           sizeof out) != 200 ||
        sk_bench_http_call(serve.port, "POST", path, "X-User-Id: 2\r\n", "{\"quantity\":1}", out,
                           sizeof out) != 409) {
        snprintf(err, sizeof err, "could not sell out activity %d: %.300s", ACT_SOLDOUT, out);
        goto done;
    }

    R.have_nginx = find_exe("nginx", nginx_exe, sizeof nginx_exe) == 0;
    if (!R.have_nginx)
        snprintf(R.nginx_note, sizeof R.nginx_note,
                 "nginx not installed (Debian: apt-get install nginx-light)");
    else if (start_nginx(&nginx, nginx_exe, dir, err, sizeof err) < 0) {
        R.have_nginx = 0;
        snprintf(R.nginx_note, sizeof R.nginx_note, "%.190s", err);
        err[0] = 0;
    }
    cpu_pids[CPU_NGINX] = nginx.pid;
    sysc_dir = dir;
    sysc_method = o.no_syscalls ? SK_SYSC_NONE : sk_bench_sysc_probe();
    for (int i = 0; i < PH_COUNT; i++)
        R.ph[i].count_pid = i == PH_STATIC || i == PH_STATIC_GET ? nginx.pid
                            : i == PH_WRK                        ? 0
                                                                 : serve.pid;
    R.have_wrk = !o.no_wrk && R.have_nginx && find_exe("wrk", wrk_exe, sizeof wrk_exe) == 0;

    struct sk_load_opts lo;
    if (!o.json)
        fprintf(stderr, "seckill: bench http: measuring, %.0f s per phase...\n", o.duration_s);
    /* 1: static reference, same request bytes as a purchase */
    if (R.have_nginx && !sk_bench_interrupted) {
        load_opts(&lo, &o, nginx.port, ACT_ADMIT);
        lo.order_check = 0;
        failed |= run_phase(&R.ph[PH_STATIC], &lo, 200) < 0;
    } else {
        snprintf(R.ph[PH_STATIC].note, sizeof R.ph[PH_STATIC].note, "%s", R.nginx_note);
    }
    /* 2: admission; every request a new user, so every one is admitted */
    if (!sk_bench_interrupted) {
        load_opts(&lo, &o, serve.port, ACT_ADMIT);
        fresh_users(&lo, 1000);
        lo.limit = 1;
        failed |= run_phase(&R.ph[PH_ADMIT], &lo, 200) < 0;
    }
    /* 3: sold-out refusals */
    if (!sk_bench_interrupted) {
        load_opts(&lo, &o, serve.port, ACT_SOLDOUT);
        fresh_users(&lo, 1000);
        /* every answer must be 409: run_phase checks the status of each */
        failed |= run_phase(&R.ph[PH_SOLDOUT], &lo, 409) < 0;
    }
    /* 3b: sold-out refusals of requests that each carry a key never used */
    if (!sk_bench_interrupted) {
        load_opts(&lo, &o, serve.port, ACT_SOLDOUT);
        fresh_users(&lo, 1000);
        lo.idem_keys = 1;
        failed |= run_phase(&R.ph[PH_SOLDOUT_KEYED], &lo, 409) < 0;
    }
    if (o.waiting_room && !sk_bench_interrupted) failed |= queue_phases(&R, &o, serve.port);
    /* 4: RSS idle, then peak with RSS_CONNS connections busy on admission */
    if (!sk_bench_interrupted) {
        sleep_ms(500);
        R.rss_idle = tree_rss_kib(serve.pid);
        struct sampler s = {.pid = serve.pid, .peak = R.rss_idle};
        atomic_init(&s.stop, 0);
        pthread_t t;
        int have_t = pthread_create(&t, NULL, sample_rss, &s) == 0;
        load_opts(&lo, &o, serve.port, ACT_ADMIT);
        lo.connections = RSS_CONNS;
        lo.duration_ms = (int64_t)(o.duration_s * 1000) / 2 + 1000;
        fresh_users(&lo, 200000000);
        lo.limit = 1;
        struct phase rssp = {.id = "rss", .label = "rss"};
        if (run_phase(&rssp, &lo, 200) < 0) {
            failed = 1;
            fprintf(stderr, "seckill: bench http: %d-connection phase: %s\n", RSS_CONNS, rssp.note);
        }
        json_decref(rssp.detail);
        long now_k = tree_rss_kib(serve.pid);
        if (have_t) {
            atomic_store(&s.stop, 1);
            pthread_join(t, NULL);
        }
        R.rss_peak = s.peak > now_k ? s.peak : now_k;
        R.rss_ran = 1;
    }
    /* 5: admission with serve on loopback TCP, then over the socket with
     * --sync-replicas 1 and a replica on this machine */
    if (!o.no_variants && !sk_bench_interrupted) {
        failed |=
            admission_variant(&R.ph[PH_ADMIT_TCP], &o, &serve, dir, redis.url, 0, 300000000) < 0;
        if (!sk_bench_interrupted && start_replica(&replica, &redis, R.ph[PH_ADMIT_SYNC].note,
                                                   sizeof R.ph[PH_ADMIT_SYNC].note) == 0) {
            cpu_pids[CPU_REPLICA] = replica.pid;
            failed |=
                admission_variant(&R.ph[PH_ADMIT_SYNC], &o, &serve, dir, link, 1, 400000000) < 0;
        } else {
            failed = 1;
        }
    }
    /* 7: is the load generator the limit? wrk and seckill load, GET / on nginx */
    if (R.have_wrk && !sk_bench_interrupted) {
        load_opts(&lo, &o, nginx.port, 0);
        snprintf(lo.path, sizeof lo.path, "/");
        snprintf(lo.method, sizeof lo.method, "GET");
        lo.order_check = 0;
        failed |= run_phase(&R.ph[PH_STATIC_GET], &lo, 200) < 0;
        if (!sk_bench_interrupted)
            failed |= run_wrk(&R.ph[PH_WRK], wrk_exe, &o, nginx.port, dir) < 0;
    } else if (!o.no_wrk) {
        snprintf(R.ph[PH_WRK].note, sizeof R.ph[PH_WRK].note, "%s",
                 R.have_nginx ? "wrk not installed (Debian: wrk)" : "no static responder");
    }
    if (sk_bench_interrupted) {
        snprintf(err, sizeof err, "interrupted");
        goto done;
    }
    if (serve.pid > 0 && waitpid(serve.pid, NULL, WNOHANG) == serve.pid) {
        serve.pid = 0;
        snprintf(err, sizeof err, "seckill serve died during the run (see %s/serve.log)", dir);
        goto done;
    }
    evaluate(&R);
    if (!o.json) print_table(&R);
    sk_bench_child_stop(&nginx);
    sk_bench_child_stop(&serve);
mixed:
    if (o.mixed && !sk_bench_interrupted) {
        struct sk_bench_mixed_opts mo = {.duration_s = o.duration_s,
                                         .purchase_rate = (double)o.purchase_rate,
                                         .poll_rate = (double)o.poll_rate,
                                         .pay_rate = (double)o.pay_rate,
                                         .sqlite = o.mixed_sqlite,
                                         .pg = o.mixed_pg,
                                         .mysql = o.mixed_mysql,
                                         .json = o.json,
                                         .dir = dir,
                                         .redis_url = redis.url,
                                         .redis_pid = redis.pid,
                                         .interrupted = &sk_bench_interrupted};
        failed |= sk_bench_http_mixed(&mo, &R.mixed) < 0;
    }
    if (sk_bench_interrupted) {
        snprintf(err, sizeof err, "interrupted");
        goto done;
    }
    if (0) {
    open_loop:
        R.have_nginx = find_exe("nginx", nginx_exe, sizeof nginx_exe) == 0 &&
                       start_nginx(&nginx, nginx_exe, dir, err, sizeof err) == 0;
        if (!R.have_nginx) {
            fprintf(stderr, "seckill: bench http: no static reference: %s\n",
                    err[0] ? err : "nginx not installed (Debian: apt-get install nginx-light)");
            err[0] = 0;
        }
        struct sk_bench_burst_opts bo = {.step_s = (double)o.step,
                                         .connections = o.open_loop_connections,
                                         .cl_connections = o.connections,
                                         .threads = o.threads,
                                         .admit_target_ms = o.admit_target_ms,
                                         .json = o.json,
                                         .dir = dir,
                                         .redis_url =
                                             redis.unix_url[0] ? redis.unix_url : redis.url,
                                         .nginx_port = R.have_nginx ? nginx.port : 0,
                                         .interrupted = &sk_bench_interrupted};
        json_t *bj = NULL;
        failed |= sk_bench_http_burst(&bo, &bj) < 0;
        if (o.json && bj) {
            char *js = json_dumps(bj, JSON_INDENT(2));
            if (js) printf("%s\n", js);
            free(js);
        }
        json_decref(bj);
        if (sk_bench_interrupted) {
            snprintf(err, sizeof err, "interrupted");
            goto done;
        }
        exit_code = failed ? SK_EXIT_FAIL : SK_EXIT_OK;
        goto done;
    }
    if (o.json && o.mixed == 2) {
        char *js = R.mixed ? json_dumps(R.mixed, JSON_INDENT(2)) : NULL;
        if (js) printf("%s\n", js);
        free(js);
    } else if (o.json) {
        print_json(&R);
    }
    exit_code = failed ? SK_EXIT_FAIL : SK_EXIT_OK;

done:
    if (err[0]) fprintf(stderr, "seckill: bench http: %s\n", err);
    sk_bench_child_stop(&nginx);
    sk_bench_child_stop(&serve);
    if (replica.pid > 0 && sk_redis_spawn_stop(&replica) < 0)
        fprintf(stderr, "seckill: bench http: %s\n", replica.errstr);
    if (info_redis) sk_redis_free(info_redis);
    info_redis = NULL;
    if (redis.pid > 0 && sk_redis_spawn_stop(&redis) < 0)
        fprintf(stderr, "seckill: bench http: %s\n", redis.errstr);
    for (int i = 0; i < PH_COUNT; i++)
        json_decref(R.ph[i].detail);
    json_decref(R.mixed);
    /* keep the logs when something failed, so there is something to read */
    if (dir[0] && (exit_code == SK_EXIT_OK || sk_bench_interrupted))
        rm_rf(dir);
    else if (dir[0])
        fprintf(stderr, "seckill: bench http: logs kept in %s\n", dir);
    return exit_code;
}
