/* bench_scrape.c - `seckill-bench scrape`: does watching a sale slow it?
 *
 * One private redis-server and one `seckill serve --processes 2
 * --ops-listen` node; purchases at a fixed arrival rate (open loop, so a
 * stall shows in the latency) against one activity that never sells out.
 * Rounds alternate: without any scrape, then with a scraper that fetches
 * /metrics and /dashboard.json from the ops port every second (what
 * Prometheus and an open dashboard do). Reports the admission p50 / p99 /
 * p99.9 of each kind of round (the median over rounds), the ratio, and what
 * one scrape costs. Nothing is asserted about speed: the numbers go to
 * BENCHMARKS.md. Exit 1 only when a load's correctness checks fail. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench_child.h"
#include "bench/bench_int.h"
#include "bench/bench_util.h"
#include "core/cli.h"
#include "core/clock.h"
#include "core/histogram.h"
#include "load/load.h"
#include "spawn/netutil.h"
#include "spawn/redis_spawn.h"

#define ADMIN "bench-scrape-admin"

struct opts {
    double rate;
    int duration_s, rounds, connections;
};

static int usage(FILE *f)
{
    fprintf(f, "usage: seckill-bench scrape [--rate R] [--duration S] [--rounds K] "
               "[--connections N]\n"
               "Admission latency of a 2-process node at R purchases/s (default 3000), in\n"
               "rounds of S seconds (default 10) without, then with, a scrape of /metrics\n"
               "and /dashboard.json every second; K rounds of each (default 3), N keep-alive\n"
               "connections (default 50).\n");
    return f == stdout ? SK_EXIT_OK : SK_EXIT_USAGE;
}

/* One request on a fresh connection as the admin; the status, or -1. The
 * answer's body is read and dropped; *bytes gets its length. */
static int http_get(int port, const char *method, const char *path, const char *body, size_t *bytes)
{
    return sk_bench_http_fetch(port, method, path, "Authorization: Bearer " ADMIN "\r\n", body,
                               NULL, 0, bytes);
}

struct scraper {
    int port;
    atomic_int stop;
    uint64_t scrapes, failures;
    struct sk_hist took_us; /* one scrape: /metrics then /dashboard.json */
    size_t metrics_bytes, json_bytes;
};

static void *scrape_loop(void *arg)
{
    struct scraper *s = arg;
    while (!atomic_load(&s->stop)) {
        int64_t t0 = sk_mono_us();
        int a = http_get(s->port, "GET", "/metrics", NULL, &s->metrics_bytes);
        int b = http_get(s->port, "GET", "/dashboard.json", NULL, &s->json_bytes);
        sk_hist_record(&s->took_us, (uint64_t)(sk_mono_us() - t0));
        s->scrapes++;
        s->failures += (a != 200) + (b != 200);
        for (int i = 0; i < 20 && !atomic_load(&s->stop); i++) {
            struct timespec ts = {0, 50 * 1000 * 1000}; /* every second */
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

static pid_t start_serve(const char *dir, const char *redis_url, int port, int ops)
{
    char listen[64], opsl[64], db[400], log[400];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    snprintf(opsl, sizeof opsl, "127.0.0.1:%d", ops);
    snprintf(db, sizeof db, "sqlite:%s/serve.db", dir);
    snprintf(log, sizeof log, "%s/serve.log", dir);
    const char *bin = sk_bench_seckill_bin(); /* before the fork: it may look things up */
    pid_t parent = getpid(), pid = fork();
    if (pid != 0) return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
    }
    execlp(bin, "seckill", "serve", "--listen", listen, "--ops-listen", opsl, "--redis", redis_url,
           "--db", db, "--admin-token", ADMIN, "--processes", "2", "--log-level", "warn",
           (char *)NULL);
    _exit(127);
}

struct round {
    double p50, p99, p999, rps;
};

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const struct round *r, int n, size_t off)
{
    double v[64];
    for (int i = 0; i < n; i++)
        v[i] = *(const double *)((const char *)&r[i] + off);
    qsort(v, (size_t)n, sizeof v[0], cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int sk_bench_scrape(int argc, char **argv)
{
    struct opts o = {3000, 10, 3, 50};
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) return usage(stdout);
        if (i + 1 >= argc) return usage(stderr);
        const char *v = argv[++i];
        char *end;
        if (!strcmp(f, "--rate"))
            o.rate = strtod(v, &end);
        else if (!strcmp(f, "--duration"))
            o.duration_s = (int)strtol(v, &end, 10);
        else if (!strcmp(f, "--rounds"))
            o.rounds = (int)strtol(v, &end, 10);
        else if (!strcmp(f, "--connections"))
            o.connections = (int)strtol(v, &end, 10);
        else
            return usage(stderr);
        if (*end || o.rate <= 0 || o.duration_s < 1 || o.rounds < 1 || o.rounds > 32 ||
            o.connections < 1 || o.connections > 10000)
            return usage(stderr);
    }
    signal(SIGPIPE, SIG_IGN);
    char dir[256];
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/seckill-bench-scrape-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) return sk_cli_runtime_error("bench scrape: mkdtemp: %s", strerror(errno));
    struct sk_redis_spawn redis = {0};
    if (sk_redis_spawn_start(&redis, NULL) < 0)
        return sk_cli_runtime_error("bench scrape: redis-server: %s", redis.errstr);
    int port = sk_net_free_port(), ops = sk_net_free_port(), rc = SK_EXIT_FAIL;
    pid_t serve = start_serve(dir, redis.url, port, ops);
    int64_t deadline = sk_mono_ms() + 15000;
    while (http_get(ops, "GET", "/healthz", NULL, NULL) != 200 && sk_mono_ms() < deadline) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    long long stock = (long long)(o.rate * o.duration_s * o.rounds * 2 * 1.5) + 1000;
    char body[512];
    snprintf(body, sizeof body,
             "{\"id\":1,\"name\":\"bench scrape\",\"stock\":%lld,\"per_user_limit\":1,"
             "\"start\":\"2020-01-01T00:00:00Z\",\"end\":\"2099-01-01T00:00:00Z\"}",
             stock);
    if (http_get(port, "POST", "/api/v1/activities", body, NULL) != 201 ||
        http_get(port, "POST", "/api/v1/activities/1/preheat", "{}", NULL) != 200 ||
        http_get(port, "POST", "/api/v1/activities/1/open", NULL, NULL) != 200) {
        fprintf(stderr, "seckill: bench scrape: the node did not start (see %s/serve.log)\n", dir);
        goto done;
    }
    struct round r[2][32];
    static struct scraper sc;
    uint64_t users = 0;
    for (int k = 0; k < o.rounds * 2; k++) {
        int with = k % 2;
        memset(&sc, 0, sizeof sc);
        sk_hist_init(&sc.took_us);
        sc.port = ops;
        pthread_t th;
        if (with && pthread_create(&th, NULL, scrape_loop, &sc) != 0) goto done;
        struct sk_load_opts lo;
        sk_load_opts_defaults(&lo);
        lo.port = port;
        snprintf(lo.host, sizeof lo.host, "127.0.0.1");
        snprintf(lo.url, sizeof lo.url, "http://127.0.0.1:%d", port);
        lo.activity = 1;
        lo.connections = o.connections;
        lo.duration_ms = (int64_t)o.duration_s * 1000;
        lo.rate = o.rate;
        lo.users = (uint64_t)(o.rate * o.duration_s * 1.5) + 100;
        lo.user_base = users; /* fresh buyers every round: every purchase is admitted */
        users += lo.users;
        lo.progress = 0;
        struct sk_load_result res;
        char err[300];
        int lrc = sk_load_run(&lo, &res, err, sizeof err);
        if (with) {
            atomic_store(&sc.stop, 1);
            pthread_join(th, NULL);
        }
        if (lrc < 0 || !res.ok || res.status[200] != res.completed) {
            fprintf(stderr, "seckill: bench scrape: round %d failed: %s\n", k + 1,
                    lrc < 0            ? err
                    : res.n_violations ? res.violations[0]
                                       : "not all 200");
            sk_load_result_free(&res);
            goto done;
        }
        struct round *x = &r[with][k / 2];
        x->p50 = (double)sk_hist_percentile(&res.latency, 50) / 1000.0;
        x->p99 = (double)sk_hist_percentile(&res.latency, 99) / 1000.0;
        x->p999 = (double)sk_hist_percentile(&res.latency, 99.9) / 1000.0;
        x->rps = res.rps;
        fprintf(stderr, "round %d %-13s %8.0f req/s  p50 %.3f ms  p99 %.3f ms  p99.9 %.3f ms%s\n",
                k + 1, with ? "with scrapes" : "no scrape", x->rps, x->p50, x->p99, x->p999, "");
        if (with)
            fprintf(stderr,
                    "        %" PRIu64 " scrapes (%" PRIu64 " failed), one scrape %.2f ms p50 "
                    "%.2f ms max, /metrics %zu bytes, /dashboard.json %zu bytes\n",
                    sc.scrapes, sc.failures, (double)sk_hist_percentile(&sc.took_us, 50) / 1000.0,
                    (double)sc.took_us.max / 1000.0, sc.metrics_bytes, sc.json_bytes);
        sk_load_result_free(&res);
    }
    char cpu[128], kernel[200];
    sk_bench_machine(cpu, sizeof cpu, kernel, sizeof kernel);
    double a99 = median(r[0], o.rounds, offsetof(struct round, p99)),
           b99 = median(r[1], o.rounds, offsetof(struct round, p99));
    printf("seckill-bench scrape: %s, %ld CPUs (%s); 2 HTTP processes + worker, %.0f "
           "purchases/s, %d connections, %d x %d s rounds each\n",
           kernel, sysconf(_SC_NPROCESSORS_ONLN), cpu, o.rate, o.connections, o.rounds,
           o.duration_s);
    printf("%-34s %10s %10s %10s %10s\n", "admission latency (median of rounds)", "req/s", "p50 ms",
           "p99 ms", "p99.9 ms");
    for (int w = 0; w < 2; w++)
        printf("%-34s %10.0f %10.3f %10.3f %10.3f\n",
               w ? "with /metrics + dashboard.json 1/s" : "no scrape (reference)",
               median(r[w], o.rounds, offsetof(struct round, rps)),
               median(r[w], o.rounds, offsetof(struct round, p50)), w ? b99 : a99,
               median(r[w], o.rounds, offsetof(struct round, p999)));
    printf("p99 with scrapes / without: %.2f\n", a99 > 0 ? b99 / a99 : 0);
    rc = SK_EXIT_OK;
done:
    if (serve > 0) {
        kill(serve, SIGTERM);
        waitpid(serve, NULL, 0);
    }
    sk_redis_spawn_stop(&redis);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "seckill: bench scrape: could not remove %s\n", dir);
    return rc;
}
