/* cli_worker.c - `seckill worker`: the order pipeline alone (order_worker.c),
 * with its flags, signals and exit report. */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cmd/commands.h"
#include "cmd/db_file.h"
#include "cmd/settings.h"
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
            "usage: seckill worker [--config FILE] [options]\n"
            "  Persists admitted orders from the Redis streams into the database\n"
            "  (consumer group \"" SK_WORKER_GROUP "\", exactly once). It opens an existing\n"
            "  database only: `seckill serve` or `seckill activity create` makes it.\n\n"
            "  --config FILE          the config file (default $SECKILL_CONFIG, else\n"
            "                         /etc/seckill/seckill.conf when it exists); its redis,\n"
            "                         db and log_level keys are read, the others ignored\n"
            "  --redis URL            default redis://127.0.0.1:6379 (also redis+unix://,\n"
            "                         redis+sentinel://, redis+cluster://)\n"
            "  --db SPEC              sqlite:PATH, postgres://... or mysql://... (default\n"
            "                         sqlite:seckill.db)\n"
            "  --log-level LEVEL      debug, info (default), warn or error\n"
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
            "Flags win over SECKILL_REDIS, SECKILL_DB, SECKILL_LOG_LEVEL, which win over the\n"
            "config file (docs/configuration.md).\n"
            "Every second (and after every reconnection) it also checks each activity\n"
            "against the database: a Redis that lost writes the database holds is\n"
            "fenced, rebuilt from the orders and resumed (docs/recovery.md).\n"
            "SIGTERM/SIGINT: finish the current batch, exit 0.\n");
    return f == stdout ? SK_EXIT_OK : SK_EXIT_USAGE;
}

enum { F_CONSUMER, F_BATCH, F_BLOCK, F_LINGER, F_CLAIM, F_MAXDEL, F_STALL, F_NO_TRIM, F_ONCE };
static const struct sk_flag flags[] = {
    [F_CONSUMER] = {"--consumer", 1},   [F_BATCH] = {"--batch", 1},
    [F_BLOCK] = {"--block-ms", 1},      [F_LINGER] = {"--linger-ms", 1},
    [F_CLAIM] = {"--claim-idle-ms", 1}, [F_MAXDEL] = {"--max-deliveries", 1},
    [F_STALL] = {"--stall-warn-s", 1},  [F_NO_TRIM] = {"--no-trim", 0},
    [F_ONCE] = {"--once", 0},
};

/* The worker's own flags into o; 0 or an exit code. */
static int worker_flags(const struct sk_settings *s, struct sk_worker_opts *o)
{
    static const struct {
        int flag;
        int64_t lo, hi;
    } nums[] = {{F_BATCH, 1, 10000},    {F_BLOCK, 0, 86400000},  {F_LINGER, 0, 1000},
                {F_CLAIM, 0, 86400000}, {F_MAXDEL, 1, 86400000}, {F_STALL, 0, 86400}};
    int *target[] = {&o->batch,         &o->block_ms,       &o->linger_ms,
                     &o->claim_idle_ms, &o->max_deliveries, &o->stall_warn_ms};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        const char *v = s->val[nums[i].flag];
        int64_t n;
        if (!v) continue;
        if (sk_cli_parse_i64(v, nums[i].lo, nums[i].hi, &n) != 0)
            return sk_cli_usage_error("worker: %s: expected a number in %" PRId64 "..%" PRId64
                                      ", got '%s'",
                                      flags[nums[i].flag].name, nums[i].lo, nums[i].hi, v);
        *target[i] = nums[i].flag == F_STALL ? (int)n * 1000 : (int)n;
    }
    const char *c = s->val[F_CONSUMER];
    if (c && (!*c || strlen(c) >= SK_WORKER_CONSUMER_MAX))
        return sk_cli_usage_error("worker: --consumer: 1..%d bytes", SK_WORKER_CONSUMER_MAX - 1);
    if (c) o->consumer = c;
    if (s->val[F_NO_TRIM]) o->trim = 0;
    if (s->val[F_ONCE]) o->once = 1;
    return 0;
}

/* The worker made from o, run until a signal (or --once). */
static int run(const struct sk_worker_opts *o)
{
    sk_worker *w;
    char err[512];
    int rc = sk_worker_new(&w, o, err, sizeof err);
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

int sk_cli_worker(int argc, char **argv)
{
    struct sk_worker_opts o;
    sk_worker_opts_init(&o);
    struct sk_settings *s =
        sk_settings_new("worker", SK_USE_WORKER, flags, sizeof flags / sizeof flags[0], 0);
    if (!s) return sk_cli_runtime_error("worker: out of memory");
    int rc = sk_settings_load(s, argc, argv);
    if (rc == 0 && s->help)
        rc = usage(stdout);
    else if (rc == 0)
        rc = worker_flags(s, &o);
    char err[512];
    if (rc == 0 && !s->help && sk_db_file_check(s->cfg.db, 0, err, sizeof err) < 0)
        rc = sk_cli_runtime_error("worker: %s", err);
    if (rc || s->help) {
        sk_settings_free(s);
        return rc;
    }
    o.redis_url = s->cfg.redis;
    o.db_spec = s->cfg.db;
    struct sk_wh_endpoint ep;
    o.n_webhooks = sk_settings_webhook(&s->cfg, &ep, &o.webhook_opts);
    o.webhooks = &ep;
    rc = run(&o);
    sk_settings_free(s);
    return rc;
}
