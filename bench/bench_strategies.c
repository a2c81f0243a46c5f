/* bench_strategies.c - `seckill-bench strategies`: the seeds' comparison of
 * stock-deduction strategies, on this machine, in one run (BENCHMARKS.md).
 *
 * Every strategy gets the same demand (the same list of purchase requests,
 * distinct users with some repeats, per-user limit 1, quantity 1), the same
 * stock and the same concurrency: --conns client threads, each with its own
 * connection, closed loop (send one purchase, wait for its answer, take the
 * next request from the shared list). Strategies:
 *   naive      GET stock, SISMEMBER buyer, then SET stock-1 from the client
 *   pg         UPDATE ... WHERE stock >= 1 + INSERT order (unique user), one
 *              transaction per purchase, on a private PostgreSQL
 *   sqlite     the same on SQLite (WAL, busy timeout: writers serialise)
 *   watch      WATCH/MULTI/EXEC with bounded immediate retries
 *   lock       SET lock NX PX + token-checked release (Lua compare-and-del),
 *              bounded waiting with exponential backoff
 *   lua        the engine, one purchase script call per request
 *   lua_batch  the engine, purchase_batch: each client thread takes --batch
 *              requests from the list at once and sends them in one call
 * After each strategy the store of truth is read back (Redis keys and order
 * list or stream, database rows): units sold, oversold (beyond stock),
 * undersold (stock left although more distinct buyers asked than there was
 * stock), users holding more than the limit. Latency per request goes into
 * an sk_hist; the server's CPU is read before and after (INFO cpu for
 * Redis, /proc for the PostgreSQL processes, getrusage for in-process
 * SQLite). Reference lines from the same run: redis-benchmark on the
 * purchase script (same stock and request count: the Redis limit), on the
 * script with every call admitted, and on DECR.
 *
 * Starts its own redis-server (no persistence) and PostgreSQL (defaults:
 * fsync and synchronous_commit on), SQLite in a temporary directory, all
 * on free loopback ports, and stops and removes them on every exit path,
 * Ctrl-C included. Every strategy is capped by --duration.
 *
 * `--chart FILE.svg` writes a bar chart (throughput and p99 per strategy)
 * as hand-written SVG from the run's JSON (chart.c); `--chart-from
 * RUN.json` redraws it from a saved `--json` output without running
 * anything.
 *
 * This file: the flags, the demand, the servers and the run's order. The
 * rest is in strategies_client.c, strategies_run.c, strategies_report.c
 * (see strategies_int.h). */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <libpq-fe.h>

#include "bench/bench_int.h"
#include "bench/bench_mysql.h"
#include "bench/bench_opts.h"
#include "bench/bench_util.h"
#include "bench/chart.h"
#include "bench/strategies_int.h"
#include "core/cli.h"
#include "core/error.h"
#include "redis/redis_conn.h"
#include "redis/script.h"

/* The lock strategy's release: delete the lock only while it holds our
 * token (a compare-and-del). */
static const char sk_bench_release_lua[] =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end "
    "return 0";

/* The strategies in the order they run (strategies_int.h). */
const struct sk_bench_sdesc sk_bench_sdef[SID_COUNT] = {
    [SID_NAIVE] = {"naive", "naive GET/SET (Redis)", "redis"},
    [SID_PG] = {"pg", "DB conditional UPDATE (PostgreSQL)", "postgresql"},
    [SID_MYSQL] = {"mysql", "DB conditional UPDATE (MariaDB)", "mariadb"},
    [SID_SQLITE] = {"sqlite", "DB conditional UPDATE (SQLite)", "sqlite"},
    [SID_WATCH] = {"watch", "Redis WATCH/MULTI/EXEC + retry", "redis"},
    [SID_LOCK] = {"lock", "Redis lock SET NX PX + release", "redis"},
    [SID_LUA] = {"lua", "Redis+Lua per request", "redis"},
    [SID_LUA_BATCH] = {"lua_batch", "Redis+Lua batched", "redis"},
};

static int usage(FILE *f)
{
    fprintf(f,
            "usage: seckill-bench strategies [options]\n"
            "\n"
            "The seeds' comparison on this machine in one run: naive GET/SET, DB conditional\n"
            "UPDATE (PostgreSQL and SQLite), Redis WATCH/MULTI, Redis lock, Redis+Lua per\n"
            "request and batched, with the same stock, demand and concurrency; throughput,\n"
            "p50/p99/p99.9, oversold, undersold, retries and server CPU per strategy, next\n"
            "to redis-benchmark on the purchase script (the Redis limit) and on DECR.\n"
            "Starts its own redis-server and PostgreSQL (temporary directories, free ports).\n"
            "\n"
            "options:\n"
            "  --quick         small sizes (stock 500, 5000 requests, 16 conns, 4 s cap)\n"
            "  --stock N       units for sale (default 5000)\n"
            "  --requests N    purchase requests, the same list for every strategy\n"
            "                  (default 100000: 5,000 units for 100,000 buyers, the seeds' sale)\n"
            "  --users N       distinct users among them, N <= requests; the rest are\n"
            "                  repeats of random users (default 90%% of requests)\n"
            "  --conns N       client threads, each with its own connection, 1..128\n"
            "                  (default 32)\n"
            "  --batch N       requests per purchase_batch call, 1..%d (default 16)\n"
            "  --duration S    cap on each strategy in seconds, 1..600 (default 30)\n"
            "  --json          print one JSON object instead of the table\n"
            "  --chart FILE    write an SVG chart (throughput and p99 per strategy)\n"
            "  --chart-from J  with --chart: redraw the chart from a saved --json output\n"
            "                  and run nothing\n"
            "\n"
            "exit status: 0 every strategy ran and the correct ones neither oversold nor\n"
            "broke the limit, 1 otherwise, 2 bad usage\n",
            SK_BATCH_MAX);
    return f == stdout ? SK_EXIT_OK : SK_EXIT_USAGE;
}

/* ---- command line ---- */

static int parse_opts(int argc, char **argv, struct sk_bench_sopts *o, int *help)
{
    static const struct sk_bench_opt opts[] = {
        {"--quick", SK_BENCH_OPT_FLAG, offsetof(struct sk_bench_sopts, quick), 0, 0, NULL},
        {"--stock", SK_BENCH_OPT_INT, offsetof(struct sk_bench_sopts, stock), 1, 10000000, NULL},
        {"--requests", SK_BENCH_OPT_INT, offsetof(struct sk_bench_sopts, requests), 1, 5000000,
         NULL},
        {"--users", SK_BENCH_OPT_INT, offsetof(struct sk_bench_sopts, users), 1, 5000000, NULL},
        {"--conns", SK_BENCH_OPT_INT, offsetof(struct sk_bench_sopts, conns), 1, 128, NULL},
        {"--batch", SK_BENCH_OPT_INT, offsetof(struct sk_bench_sopts, batch), 1, SK_BATCH_MAX,
         NULL},
        {"--duration", SK_BENCH_OPT_INT, offsetof(struct sk_bench_sopts, duration_s), 1, 600, NULL},
        {"--json", SK_BENCH_OPT_FLAG, offsetof(struct sk_bench_sopts, json), 0, 0, NULL},
        {"--chart", SK_BENCH_OPT_STR, offsetof(struct sk_bench_sopts, chart), 0, 0, "a file name"},
        {"--chart-from", SK_BENCH_OPT_STR, offsetof(struct sk_bench_sopts, chart_from), 0, 0,
         "a file name"},
    };
    /* --quick first: explicit sizes given with it override its defaults. */
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--quick")) {
            o->stock = 500;
            o->requests = 5000;
            o->conns = 16;
            o->duration_s = 4;
        }
    int rc =
        sk_bench_opts_parse("strategies", opts, sizeof opts / sizeof opts[0], argc, argv, o, help);
    if (rc || *help) return rc;
    if (o->users <= 0) o->users = o->requests - o->requests / 10; /* 10% repeats */
    if (o->users > o->requests)
        return sk_cli_usage_error("bench strategies: --users (%" PRId64
                                  ") cannot exceed --requests (%" PRId64 ")",
                                  o->users, o->requests);
    if (o->chart_from && !o->chart)
        return sk_cli_usage_error("bench strategies: --chart-from needs --chart FILE.svg");
    return 0;
}

/* The demand, allocated here (caller frees): every one of the users
 * 1..users asks once, the remaining requests are repeats of random users,
 * all in a seeded random order, so each strategy sees the same list. */
static uint64_t *make_demand(const struct sk_bench_sopts *o)
{
    uint64_t *u = malloc((size_t)o->requests * sizeof *u);
    if (!u) return NULL;
    uint64_t seed = 0x5ECC111ULL;
    for (int64_t i = 0; i < o->requests; i++)
        u[i] = SK_BENCH_USER_BASE + 1 +
               (i < o->users ? (uint64_t)i : sk_bench_strat_rng(&seed) % (uint64_t)o->users);
    for (int64_t i = o->requests - 1; i > 0; i--) {
        int64_t j = (int64_t)(sk_bench_strat_rng(&seed) % (uint64_t)(i + 1));
        uint64_t t = u[i];
        u[i] = u[j];
        u[j] = t;
    }
    return u;
}

static int chart_from_file(const struct sk_bench_sopts *o)
{
    json_error_t je;
    json_t *root = json_load_file(o->chart_from, 0, &je);
    if (!root) {
        fprintf(stderr, "seckill: bench strategies: %s: %s (line %d)\n", o->chart_from, je.text,
                je.line);
        return SK_EXIT_FAIL;
    }
    char err[300];
    int rc = sk_chart_write(root, o->chart, err, sizeof err);
    json_decref(root);
    if (rc < 0) {
        fprintf(stderr, "seckill: bench strategies: %s\n", err);
        return SK_EXIT_FAIL;
    }
    return SK_EXIT_OK;
}

/* Starts the servers: redis-server (required) and PostgreSQL (its
 * strategy is skipped, with the reason, when it cannot start). */
static int start_servers(struct sk_bench_sctx *c)
{
    if (sk_redis_spawn_start(&c->rs, NULL) < 0) {
        fprintf(stderr, "seckill: bench strategies: cannot start redis-server: %s\n", c->rs.errstr);
        return SK_EIO;
    }
    c->have_redis = 1;
    char eb[200] = "";
    if (sk_redis_new(&c->ctl, c->rs.url, 2000, 30000, eb, sizeof eb) < 0 ||
        sk_redis_connect(c->ctl) < 0 || sk_bench_load_scripts(c->ctl) < 0) {
        fprintf(stderr, "seckill: bench strategies: redis: %s\n", c->ctl ? c->ctl->errstr : eb);
        return SK_EIO;
    }
    sk_bench_info_field(c->ctl, "server", "redis_version", c->redis_version,
                        sizeof c->redis_version);
    redisReply *rep;
    if (sk_redis_cmd(c->ctl, &rep, "SCRIPT LOAD %s", sk_bench_release_lua) < 0) {
        fprintf(stderr, "seckill: bench strategies: SCRIPT LOAD: %s\n", c->ctl->errstr);
        return SK_EIO;
    }
    if (rep->type == REDIS_REPLY_STRING) snprintf(c->lock_sha, sizeof c->lock_sha, "%s", rep->str);
    freeReplyObject(rep);

    snprintf(c->my_durability, sizeof c->my_durability, "-");
    if (sk_mysql_spawn_start(&c->my, NULL) < 0) {
        snprintf(c->my_err, sizeof c->my_err, "%.290s", c->my.errstr);
    } else {
        c->have_my = 1;
        char err[256], what[512];
        struct st_mysql *m = sk_bench_my_connect(c->my.url, err, sizeof err);
        if (m) {
            sk_bench_my_describe(m, what, sizeof what);
            snprintf(c->my_version, sizeof c->my_version, "%.*s", (int)strcspn(what, "-:"), what);
            long long f = sk_bench_my_int(m, "SELECT @@innodb_flush_log_at_trx_commit");
            snprintf(c->my_durability, sizeof c->my_durability,
                     "innodb_flush_log_at_trx_commit=%lld, no binlog", f);
            sk_bench_my_close(m);
        }
    }
    snprintf(c->pg_durability, sizeof c->pg_durability, "-");
    if (sk_pg_spawn_start(&c->pg, NULL) < 0) {
        snprintf(c->pg_err, sizeof c->pg_err, "%.290s", c->pg.errstr);
        return 0;
    }
    c->have_pg = 1;
    PGconn *pg = PQconnectdb(c->pg.conninfo);
    if (PQstatus(pg) == CONNECTION_OK) {
        int v = PQserverVersion(pg);
        snprintf(c->pg_version, sizeof c->pg_version, "%d.%d", v / 10000, v % 10000);
        PGresult *r = PQexec(pg, "SELECT current_setting('fsync'), "
                                 "current_setting('synchronous_commit')");
        if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
            snprintf(c->pg_durability, sizeof c->pg_durability, "fsync=%s, synchronous_commit=%s",
                     PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1));
        PQclear(r);
    }
    PQfinish(pg);
    return 0;
}

static void stop_servers(struct sk_bench_sctx *c)
{
    sk_redis_free(c->ctl);
    c->ctl = NULL;
    if (c->have_my && sk_mysql_spawn_stop(&c->my) < 0)
        fprintf(stderr, "seckill: bench strategies: %s\n", c->my.errstr);
    if (c->have_pg && sk_pg_spawn_stop(&c->pg) < 0)
        fprintf(stderr, "seckill: bench strategies: %s\n", c->pg.errstr);
    if (c->have_redis && sk_redis_spawn_stop(&c->rs) < 0)
        fprintf(stderr, "seckill: bench strategies: %s\n", c->rs.errstr);
    if (c->tmpdir[0]) {
        char p[400];
        static const char *sfx[] = {"", "-wal", "-shm"};
        for (size_t i = 0; i < 3; i++) {
            snprintf(p, sizeof p, "%s%s", c->sqlite_path, sfx[i]);
            if (c->sqlite_path[0]) unlink(p);
        }
        rmdir(c->tmpdir);
    }
}

/* Entry point (argv[0] is "strategies"). Everything it allocates and
 * starts (context, demand, servers, temporary directory) is released
 * before it returns. */
int sk_bench_strategies(int argc, char **argv)
{
    struct sk_bench_sctx *c = calloc(1, sizeof *c);
    if (!c) return SK_EXIT_FAIL;
    c->o = (struct sk_bench_sopts){
        .stock = 5000, .requests = 100000, .conns = 32, .batch = 16, .duration_s = 30};
    int help = 0;
    int urc = parse_opts(argc - 1, argv + 1, &c->o, &help);
    if (urc || help) {
        free(c);
        return urc ? urc : usage(stdout);
    }
    if (c->o.chart_from) {
        int rc = chart_from_file(&c->o);
        free(c);
        return rc;
    }
    const struct sk_bench_sopts *o = &c->o;

    sk_bench_catch_signals(NULL);

    c->ref[REF_SAME] = (struct sk_bench_ref){
        .id = "redis_benchmark_purchase",
        .label = "redis-benchmark EVALSHA purchase, same stock and requests (the Redis limit)",
        .n = o->requests};
    c->ref[REF_ADMIT] =
        (struct sk_bench_ref){.id = "redis_benchmark_purchase_admitted",
                              .label = "redis-benchmark EVALSHA purchase, every call admitted",
                              .n = o->quick ? 10000 : 100000};
    c->ref[REF_DECR] = (struct sk_bench_ref){.id = "redis_benchmark_decr",
                                             .label = "redis-benchmark DECR",
                                             .n = o->quick ? 50000 : 300000};
    int exit_code = SK_EXIT_FAIL;
    c->users = make_demand(o);
    const char *tmp = getenv("TMPDIR");
    snprintf(c->tmpdir, sizeof c->tmpdir, "%s/seckill-strategies-XXXXXX",
             tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(c->tmpdir)) {
        fprintf(stderr, "seckill: bench strategies: mkdtemp %s: %s\n", c->tmpdir, strerror(errno));
        c->tmpdir[0] = 0;
        goto done;
    }
    if (!c->users || start_servers(c) < 0) goto done;

    for (int i = 0; i < SID_COUNT && !sk_bench_interrupted; i++) {
        if (!o->json) fprintf(stderr, "seckill: bench strategies: %s...\n", sk_bench_sdef[i].label);
        sk_bench_strat_run(c, (enum sk_bench_sid)i);
    }
    for (int i = 0; i < REF_COUNT && !sk_bench_interrupted; i++) {
        if (!o->json) fprintf(stderr, "seckill: bench strategies: %s...\n", c->ref[i].label);
        sk_bench_strat_reference(c, i);
    }
    int ok = !sk_bench_interrupted;
    for (int i = 0; i < SID_COUNT; i++)
        if (c->s[i].status != ST_RAN || !c->s[i].ok) ok = 0;
    json_t *root = sk_bench_strat_json(c, ok);
    if (o->json) {
        char *txt = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
        if (txt) printf("%s\n", txt);
        free(txt);
    } else {
        sk_bench_strat_print(c, root);
        if (c->s[SID_NAIVE].status == ST_RAN && c->s[SID_NAIVE].oversold == 0)
            printf("\n  note: the naive strategy did not oversell this time (fewer clients or\n"
                   "  less interleaving); it is still wrong, only lucky.\n");
    }
    if (o->chart) {
        char err[300];
        if (sk_chart_write(root, o->chart, err, sizeof err) < 0) {
            fprintf(stderr, "seckill: bench strategies: %s\n", err);
            ok = 0;
        } else if (!o->json) {
            printf("\n  chart: %s\n", o->chart);
        }
    }
    json_decref(root);
    if (sk_bench_interrupted) fprintf(stderr, "seckill: bench strategies: interrupted\n");
    exit_code = ok ? SK_EXIT_OK : SK_EXIT_FAIL;
done:
    stop_servers(c);
    free(c->users);
    free(c);
    return exit_code;
}
