/* demo.c - `seckill demo`: the main job on the embedded defaults. Starts a
 * private redis-server and a `seckill serve` on free loopback ports in a
 * temporary directory (SQLite store), creates, preheats and opens an
 * activity, fires a flash sale over real HTTP with `seckill load`, waits
 * for the order pipeline to persist every order, checks the outcome
 * (oversold, undersold, one DB row per 200, DB stock) and reconciles Redis
 * with the database, and prints a summary. Everything it started is stopped, also on Ctrl-C. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cmd/commands.h"
#include "cmd/settings.h"
#include "core/cli.h"
#include "core/clock.h"
#include "core/codes.h"
#include "core/error.h"
#include "engine/activity.h"
#include "engine/stock.h"
#include "load/load.h"
#include "orders/reconcile.h"
#include "redis/redis_conn.h"
#include "spawn/netutil.h"
#include "spawn/redis_spawn.h"
#include "spawn/spawn.h"
#include "store/store.h"

struct demo_opts {
    int64_t stock, buyers, requests, connections, limit, processes;
    double retry_ratio;
    int64_t duration_s;
};

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
    sk_load_interrupt();
}

static int usage(FILE *f)
{
    fprintf(f, "usage: seckill demo [--stock N] [--buyers N] [--requests N] [--connections N]\n"
               "                    [--limit N] [--retry-ratio F] [--processes N] [--duration S]\n"
               "Runs a complete flash sale on this machine: private redis-server, SQLite,\n"
               "`seckill serve`, and a load of buyers over HTTP; prints what happened.\n"
               "Defaults: 5000 units, 50000 buyers, 60000 requests (repeat buyers retry),\n"
               "1000 connections, limit 1 per buyer, 1 serve process, at most 60 s of load.\n"
               "It reads no configuration: no config file, no SECKILL_* variable.\n");
    return f == stdout ? SK_EXIT_OK : SK_EXIT_USAGE;
}

enum { F_STOCK, F_BUYERS, F_REQUESTS, F_CONNS, F_LIMIT, F_PROCS, F_DURATION, F_RETRY };
static const struct sk_flag flags[] = {
    [F_STOCK] = {"--stock", 1},       [F_BUYERS] = {"--buyers", 1},
    [F_REQUESTS] = {"--requests", 1}, [F_CONNS] = {"--connections", 1},
    [F_LIMIT] = {"--limit", 1},       [F_PROCS] = {"--processes", 1},
    [F_DURATION] = {"--duration", 1}, [F_RETRY] = {"--retry-ratio", 1},
};

/* The demo reads no configuration: its Redis, store and serve are its
 * own. Returns 0, an exit code, or 100 + exit code after --help. */
static int parse(int argc, char **argv, struct demo_opts *o)
{
    *o = (struct demo_opts){5000, 50000, 60000, 1000, 1, 1, 0.2, 60};
    struct sk_settings *s = sk_settings_new("demo", 0, flags, sizeof flags / sizeof flags[0], 0);
    if (!s) return sk_cli_runtime_error("demo: out of memory");
    int rc = sk_settings_load(s, argc, argv);
    if (rc == 0 && s->help) rc = usage(stdout) + 100;
    int64_t *dst[] = {
        [F_STOCK] = &o->stock,        [F_BUYERS] = &o->buyers, [F_REQUESTS] = &o->requests,
        [F_CONNS] = &o->connections,  [F_LIMIT] = &o->limit,   [F_PROCS] = &o->processes,
        [F_DURATION] = &o->duration_s};
    for (int f = 0; rc == 0 && f < F_RETRY; f++) {
        const char *v = s->val[f];
        if (!v) continue;
        int64_t hi = f == F_PROCS ? 8 : f == F_CONNS ? SK_LOAD_MAX_CONNS : 100000000;
        if (sk_cli_parse_i64(v, 1, hi, dst[f]) < 0)
            rc = sk_cli_usage_error("demo: %s must be a number 1..%" PRId64, flags[f].name, hi);
    }
    const char *v = s->val[F_RETRY];
    if (rc == 0 && v) {
        char *end;
        o->retry_ratio = strtod(v, &end);
        if (*end || end == v || o->retry_ratio < 0 || o->retry_ratio > 0.95)
            rc = sk_cli_usage_error("demo: --retry-ratio must be 0..0.95");
    }
    sk_settings_free(s);
    return rc;
}

static pid_t start_serve(const char *dir, int port, const char *redis_url, int64_t processes)
{
    char listen[64], db[400], log[400], procs[16];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    snprintf(db, sizeof db, "sqlite:%s/seckill.db", dir);
    snprintf(log, sizeof log, "%s/serve.log", dir);
    snprintf(procs, sizeof procs, "%" PRId64, processes);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* the demo died: stop gracefully */
        if (getppid() != parent) _exit(1);
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) dup2(fd, 2);
        int devnull = open("/dev/null", O_RDWR);
        if (devnull >= 0) dup2(devnull, 1);
        signal(SIGINT, SIG_IGN); /* Ctrl-C goes to the demo, which stops us */
        /* the demo's serve is the demo's alone: no config file, and no
         * SECKILL_* setting of this shell (an auth = hmac meant for a real
         * node would refuse the demo's buyers) */
        for (int k = 0; k < SK_CONFIG_NKEYS; k++) {
            char env[80];
            unsetenv(sk_config_env_name(k, env, sizeof env));
        }
        execl("/proc/self/exe", "seckill", "serve", "--config", "/dev/null", "--listen", listen,
              "--redis", redis_url, "--db", db, "--processes", procs, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static int stop_child(pid_t pid)
{
    if (pid <= 0) return -1;
    kill(pid, SIGTERM);
    int st = 0;
    for (int i = 0; i < 1000; i++) { /* at most 20 s */
        if (waitpid(pid, &st, WNOHANG) == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return 128 + SIGKILL;
}

/* Creates, preheats and opens the activity: the same calls as
 * `seckill activity create|preheat|open`. */
static int setup_activity(sk_store *st, sk_redis *r, const struct demo_opts *o, uint64_t id,
                          char *err, size_t cap)
{
    struct sk_activity a;
    sk_activity_init(&a);
    a.id = id;
    snprintf(a.name, sizeof a.name, "demo flash sale");
    a.stock = o->stock;
    a.per_user_limit = o->limit;
    a.start_ms = sk_wall_ms() - 1000;
    a.end_ms = a.start_ms + 3600 * 1000;
    a.created_ms = sk_wall_ms();
    sk_activity_apply_defaults(&a);
    int rc = sk_activity_validate(&a, err, cap);
    if (rc == 0) rc = sk_store_activity_insert(st, &a);
    if (rc < 0 && !err[0]) snprintf(err, cap, "store: %s", sk_store_errstr(st));
    struct sk_stock_def d;
    int code = 0;
    if (rc == 0) {
        sk_activity_stock_def(&a, &d);
        rc = sk_store_identity(st, d.store_id, sizeof d.store_id);
        if (rc == 0) rc = sk_stock_preheat(r, &d, 0, &code, NULL);
        if (rc == 0 && code != SK_RC_PREHEATED) rc = SK_ESTATE;
    }
    if (rc == 0) rc = sk_stock_set_open(r, id, 1, &code);
    if (rc == 0) rc = sk_store_activity_set_state(st, id, "open");
    if (rc < 0 && !err[0]) snprintf(err, cap, "preheat/open: %.200s", r->errstr);
    return rc;
}

int sk_cli_demo(int argc, char **argv)
{
    struct demo_opts o;
    int rc = parse(argc, argv, &o);
    if (rc >= 100) return SK_EXIT_OK;
    if (rc) return rc;
    struct sigaction sa = {.sa_handler = on_sigint};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    /* Under $TMPDIR when set (the test runner points it at its own
     * temporary root, so a test's demo leaves nothing behind), else /tmp;
     * kept afterwards: the summary says where the logs are. */
    char dir[256], derr[256];
    if (sk_spawn_tmpdir(dir, sizeof dir, "seckill-demo", 64, derr, sizeof derr) < 0)
        return sk_cli_runtime_error("demo: %s", derr);
    printf("seckill demo: %" PRId64 " units, %" PRId64 " buyers, %" PRId64 " requests over %" PRId64
           " connections, limit %" PRId64 " per buyer\n",
           o.stock, o.buyers, o.requests, o.connections, o.limit);
    printf("  working directory and logs: %s\n", dir);

    struct sk_redis_spawn redis = {0};
    pid_t serve = 0;
    sk_redis *r = NULL;
    sk_store *db = NULL;
    int exit_code = SK_EXIT_FAIL;
    char err[512] = "";
    uint64_t aid = 1001;
    struct sk_load_result res;
    memset(&res, 0, sizeof res);

    printf("  starting redis-server ...\n");
    if (sk_redis_spawn_start(&redis, NULL) < 0) {
        fprintf(stderr, "seckill: demo: redis-server: %s\n", redis.errstr);
        goto out;
    }
    /* Redis is on this machine: its unix socket costs fewer cycles per
     * call than loopback TCP (BENCHMARKS.md) */
    const char *url = redis.unix_url[0] ? redis.unix_url : redis.url;
    if (sk_redis_new(&r, url, 2000, 5000, err, sizeof err) < 0) goto fail;
    int port = sk_net_free_port();
    printf("  starting seckill serve on 127.0.0.1:%d (redis %s) ...\n", port, url);
    serve = start_serve(dir, port, url, o.processes);
    int64_t deadline = sk_mono_ms() + 15000;
    while (!sk_net_http_ok(port, "/readyz", 1000)) {
        int st;
        if (interrupted || sk_mono_ms() > deadline || waitpid(serve, &st, WNOHANG) == serve) {
            snprintf(err, sizeof err, "seckill serve did not become ready (see %s/serve.log)", dir);
            if (waitpid(serve, &st, WNOHANG) == serve) serve = 0;
            goto fail;
        }
        struct timespec ts = {0, 20 * 1000 * 1000}; /* polling for readiness */
        nanosleep(&ts, NULL);
    }
    printf("  creating, preheating and opening activity %" PRIu64 " ...\n", aid);
    char spec[400];
    snprintf(spec, sizeof spec, "sqlite:%s/seckill.db", dir);
    if (sk_store_open(&db, spec, err, sizeof err) < 0 ||
        setup_activity(db, r, &o, aid, err, sizeof err) < 0)
        goto fail;

    struct sk_load_opts lo;
    sk_load_opts_defaults(&lo);
    snprintf(lo.host, sizeof lo.host, "127.0.0.1");
    lo.port = port;
    snprintf(lo.url, sizeof lo.url, "http://127.0.0.1:%d", port);
    lo.activity = aid;
    lo.connections = o.connections;
    lo.requests = o.requests;
    lo.duration_ms = o.duration_s * 1000;
    lo.users = (uint64_t)o.buyers;
    lo.retry_ratio = o.retry_ratio;
    lo.expect_stock = o.stock;
    lo.limit = o.limit;
    lo.progress = 1;
    if (sk_load_opts_check(&lo, err, sizeof err) < 0) goto fail;
    printf("  flash sale: %" PRId64 " requests ...\n", o.requests);
    fflush(stdout);
    if (sk_load_run(&lo, &res, err, sizeof err) < 0) goto fail;

    /* Wait for the order worker (inside serve) to persist every order. */
    struct sk_order_counts oc;
    struct sk_activity dba;
    int64_t in_db = -1;
    memset(&oc, 0, sizeof oc);
    printf("  waiting for the order pipeline to persist %" PRIu64 " orders ...\n", res.accepted);
    int64_t drain_by = sk_mono_ms() + 30000;
    for (;;) {
        if (sk_store_orders_count(db, aid, &oc) == 0) {
            in_db = 0;
            for (int i = 0; i < SK_ORDER_NSTATUS; i++)
                in_db += oc.orders[i];
        }
        if (in_db >= (int64_t)res.accepted || interrupted || sk_mono_ms() > drain_by) break;
        struct timespec ts = {0, 20 * 1000 * 1000}; /* polling for the pipeline */
        nanosleep(&ts, NULL);
    }
    int64_t db_stock = sk_store_activity_get(db, aid, &dba) == 0 ? dba.stock_db : -1;
    /* Reconcile Redis with the database, as `seckill reconcile` does. */
    struct sk_reconcile_report rec;
    int rec_rc = sk_reconcile_activity(db, r, aid, NULL, &rec);
    int consistent = rec_rc == 0 && rec.consistent;
    size_t drift = rec_rc == 0 ? rec.total : 0;
    if (rec_rc == 0 && !consistent) sk_reconcile_print(stdout, &rec, 5);
    sk_reconcile_report_free(&rec);

    struct sk_stock_state stt;
    if (sk_stock_state(r, aid, &stt) < 0) {
        snprintf(err, sizeof err, "reading the outcome from redis: %.200s", r->errstr);
        goto fail;
    }
    /* Oversold: units admitted beyond the stock. Undersold: stock left
     * while buyers who could still buy were refused as sold out. */
    int64_t sold = stt.initial - stt.remaining;
    int64_t oversold = sold > stt.initial ? sold - stt.initial : 0;
    oversold += stt.remaining < 0 ? -stt.remaining : 0;
    int64_t undersold =
        (res.demand_units >= (uint64_t)stt.initial && stt.remaining > 0) ? stt.remaining : 0;
    /* the worker trims persisted entries: the ledger holds every order */
    int events_match = stt.held == sold && (int64_t)res.accepted_units == sold;
    int db_match = in_db == (int64_t)res.accepted && db_stock == stt.initial - sold;

    printf("\n");
    sk_load_print(stdout, &lo, &res);
    printf("\nsummary\n");
    printf("  accepted        %" PRIu64 " orders, %" PRIu64 " units (stock %" PRId64 ")\n",
           res.accepted, res.accepted_units, stt.initial);
    printf("  refused         ");
    for (size_t i = 0; i < res.n_refusals; i++)
        printf("%s%s %" PRIu64, i ? ", " : "", res.refusals[i].code, res.refusals[i].n);
    printf("%s\n", res.n_refusals ? "" : "none");
    printf("  oversold        %" PRId64 "\n", oversold);
    printf("  undersold       %" PRId64 "\n", undersold);
    printf("  Redis           %" PRId64 " units held by buyers, %" PRId64 " left (%s the 200s)\n",
           stt.held, stt.remaining, events_match ? "matches" : "DOES NOT MATCH");
    printf("  orders in DB    %" PRId64 " (SQLite), DB stock %" PRId64 " (%s)\n", in_db, db_stock,
           db_match ? "one row per 200, stock = initial - sold" : "MISMATCH");
    printf("  reconcile       %s\n", consistent   ? "consistent (Redis and the database agree)"
                                     : rec_rc < 0 ? "could not run"
                                                  : "DRIFT (see above)");
    if (!consistent && drift) printf("                  %zu differences\n", drift);
    printf("  throughput      %.0f requests/s\n", res.rps);
    printf("  latency         p50 %.2f ms, p99 %.2f ms, p999 %.2f ms\n",
           (double)sk_hist_percentile(&res.latency, 50.0) / 1000.0,
           (double)sk_hist_percentile(&res.latency, 99.0) / 1000.0,
           (double)sk_hist_percentile(&res.latency, 99.9) / 1000.0);
    printf("  logs            %s/serve.log, %s/redis.log\n", dir, dir);
    int ok = res.ok && oversold == 0 && undersold == 0 && events_match && db_match && consistent &&
             !interrupted;
    printf("  result          %s\n", ok ? "OK" : interrupted ? "INTERRUPTED" : "FAILED");
    exit_code = ok ? SK_EXIT_OK : SK_EXIT_FAIL;
    goto out;
fail:
    fprintf(stderr, "seckill: demo: %s\n", err[0] ? err : "failed");
out:
    if (serve > 0) {
        int code = stop_child(serve);
        if (code != 0) fprintf(stderr, "seckill: demo: seckill serve exited %d\n", code);
    }
    sk_store_close(db);
    sk_redis_free(r);
    /* keep the redis log next to the serve log before its directory goes */
    if (redis.pid > 0) {
        char cmd[700];
        snprintf(cmd, sizeof cmd, "cp '%s/redis.log' '%s/redis.log' 2>/dev/null", redis.dir, dir);
        if (system(cmd) != 0) { /* the log is a convenience */
        }
        sk_redis_spawn_stop(&redis);
    }
    sk_load_result_free(&res);
    return exit_code;
}
