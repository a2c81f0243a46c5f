/* cli_worker.c - `seckill worker`: the order pipeline alone (order_worker.c),
 * with its flags, signals and exit report. */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cmd/commands.h"
#include "core/cli.h"
#include "core/error.h"
#include "core/log.h"
#include "orders/order_worker.h"

static sk_worker *volatile g_worker;

static void on_signal(int sig)
{
    (void)sig;
    if (g_worker) sk_worker_stop(g_worker);
}

static int usage(FILE *f)
{
    fprintf(f,
            "usage: seckill worker [options]\n"
            "  Persists admitted orders from the Redis streams into the database\n"
            "  (consumer group \"" SK_WORKER_GROUP "\", exactly once).\n\n"
            "  --redis URL            default $SECKILL_REDIS or redis://127.0.0.1:6379 (also\n"
            "                         redis+unix://, redis+sentinel://, redis+cluster://)\n"
            "  --db SPEC              default $SECKILL_DB or sqlite:seckill.db\n"
            "  --consumer NAME        consumer name (default worker-<hostname>; give each\n"
            "                         worker on one host its own)\n"
            "  --batch N              entries per stream per fetch (default 500; an entry\n"
            "                         holds the orders of one admission call, a\n"
            "                         transaction at most 8192 orders)\n"
            "  --block-ms N           XREADGROUP BLOCK when idle (default 1000)\n"
            "  --linger-ms N          after a short fetch, read again only N ms after it\n"
            "                         began, so a trickle shares transactions (0..1000,\n"
            "                         default 20, 0 = at once)\n"
            "  --claim-idle-ms N      take over entries idle this long (default 30000)\n"
            "  --max-deliveries K     dead-letter a poison entry after K deliveries (default 5)\n"
            "  --stall-warn-s S       warn when no order was acknowledged for S seconds while\n"
            "                         orders wait (default 10, 0 = off)\n"
            "  --no-trim              keep acknowledged entries in the streams\n"
            "  --once                 drain what is there, then exit\n"
            "Every second (and after every reconnection) it also checks each activity\n"
            "against the database: a Redis that lost writes the database holds is\n"
            "fenced, rebuilt from the orders and resumed (docs/recovery.md).\n"
            "SIGTERM/SIGINT: finish the current batch, exit 0.\n");
    return f == stdout ? SK_EXIT_OK : SK_EXIT_USAGE;
}

int sk_cli_worker(int argc, char **argv)
{
    struct sk_worker_opts o;
    sk_worker_opts_init(&o);
    const char *redis = NULL, *db = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(stdout);
        if (!strcmp(a, "--once")) {
            o.once = 1;
            continue;
        }
        if (!strcmp(a, "--no-trim")) {
            o.trim = 0;
            continue;
        }
        if (i + 1 >= argc)
            return sk_cli_usage_error("worker: unknown option or missing value: %s", a);
        const char *v = argv[++i];
        int64_t n;
        if (!strcmp(a, "--stall-warn-s")) {
            if (sk_cli_parse_i64(v, 0, 86400, &n) != 0)
                return sk_cli_usage_error("worker: %s: expected a number in 0..86400", a);
            o.stall_warn_ms = (int)n * 1000;
            continue;
        }
        int *target = !strcmp(a, "--batch")            ? &o.batch
                      : !strcmp(a, "--block-ms")       ? &o.block_ms
                      : !strcmp(a, "--linger-ms")      ? &o.linger_ms
                      : !strcmp(a, "--claim-idle-ms")  ? &o.claim_idle_ms
                      : !strcmp(a, "--max-deliveries") ? &o.max_deliveries
                                                       : NULL;
        if (target) {
            int64_t lo = target == &o.batch || target == &o.max_deliveries ? 1 : 0;
            int64_t hi = target == &o.batch ? 10000 : target == &o.linger_ms ? 1000 : 86400000;
            if (sk_cli_parse_i64(v, lo, hi, &n) != 0)
                return sk_cli_usage_error("worker: %s: expected a number in %" PRId64 "..%" PRId64,
                                          a, lo, hi);
            *target = (int)n;
        } else if (!strcmp(a, "--redis")) {
            redis = v;
        } else if (!strcmp(a, "--db")) {
            db = v;
        } else if (!strcmp(a, "--consumer")) {
            if (!*v || strlen(v) >= SK_WORKER_CONSUMER_MAX)
                return sk_cli_usage_error("worker: --consumer: 1..%d bytes",
                                          SK_WORKER_CONSUMER_MAX - 1);
            o.consumer = v;
        } else {
            return sk_cli_usage_error("worker: unknown option %s", a);
        }
    }
    o.redis_url = sk_cli_redis_url(redis);
    o.db_spec = sk_cli_db_spec(db);
    sk_worker *w;
    char err[512];
    int rc = sk_worker_new(&w, &o, err, sizeof err);
    if (rc == SK_EINVAL) return sk_cli_usage_error("worker: %s", err);
    if (rc) return sk_cli_runtime_error("worker: %s", err);
    g_worker = w;
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    rc = sk_worker_run(w);
    struct sk_worker_stats s;
    sk_worker_stats(w, &s);
    sk_log(SK_LOG_INFO,
           "worker: exiting: persisted %" PRIu64 ", duplicates %" PRIu64 ", conflicts %" PRIu64
           ", stock failures %" PRIu64 ", dead-lettered %" PRIu64 ", claimed %" PRIu64
           ", trimmed %" PRIu64,
           s.persisted, s.duplicates, s.conflicts, s.stock_failures, s.dead_lettered, s.claimed,
           s.trimmed);
    if (s.recoveries || s.recover_failures)
        sk_log(SK_LOG_WARN,
               "worker: rollback guard: %" PRIu64 " key set(s) fenced, %" PRIu64
               " recoveries (%" PRIu64 " failed, retried), %" PRIu64 " orders replayed, %" PRIu64
               " refused, %" PRIu64 " units oversold, %" PRIu64 " acknowledged admissions lost",
               s.fences, s.recoveries, s.recover_failures, s.orders_replayed, s.orders_refused,
               s.units_oversold, s.admissions_lost);
    if (rc) {
        int ret = sk_cli_runtime_error("worker: giving up: %s", sk_worker_errstr(w));
        g_worker = NULL;
        sk_worker_free(w);
        return ret;
    }
    g_worker = NULL;
    sk_worker_free(w);
    return SK_EXIT_OK;
}
