/* strategies_report.c - the results of `seckill-bench strategies`
 * (strategies_int.h): the run as one JSON object (machine, software,
 * config, reference lines, strategies, targets), the one source of the
 * table's ratios and of the chart, and the readable table. */
#include <inttypes.h>
#include <stdio.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include "bench/strategies_int.h"

/* ---- results as JSON (the one source of the table's ratios and the chart) ---- */

static double ratio(double a, double b)
{
    return a > 0 && b > 0 ? a / b : 0;
}

static double rps_of(const struct sk_bench_strat *s)
{
    return s->status == ST_RAN && s->secs > 0 ? (double)s->answered / s->secs : 0;
}

/* Sales per second: admitted units over the time to the last sale. */
static double sales_rate(const struct sk_bench_strat *s)
{
    return s->status == ST_RAN && s->sellout_secs > 0 ? (double)s->admitted / s->sellout_secs : 0;
}

static const char *status_name(enum sk_bench_status st)
{
    switch (st) {
    case ST_RAN: return "ran";
    case ST_SKIPPED: return "skipped";
    default: return "pending";
    }
}

/* One strategy as a new JSON object (the caller owns the reference). */
static json_t *strat_json(const struct sk_bench_sctx *c, enum sk_bench_sid sid, double limit)
{
    const struct sk_bench_strat *s = &c->s[sid];
    json_t *j = json_object();
    json_object_set_new(j, "id", json_string(sk_bench_sdef[sid].id));
    json_object_set_new(j, "label", json_string(sk_bench_sdef[sid].label));
    json_object_set_new(j, "store", json_string(sk_bench_sdef[sid].store));
    json_object_set_new(j, "status", json_string(status_name(s->status)));
    if (s->note[0]) json_object_set_new(j, "note", json_string(s->note));
    if (s->status != ST_RAN) return j;
    double rps = rps_of(s);
    json_object_set_new(j, "requests", json_integer(s->answered));
    json_object_set_new(j, "secs", json_real(s->secs));
    json_object_set_new(j, "rps", json_real(rps));
    json_object_set_new(j, "x_redis_limit", json_real(ratio(rps, limit)));
    json_object_set_new(j, "sellout_secs", json_real(s->sellout_secs));
    json_object_set_new(j, "admitted_per_s", json_real(sales_rate(s)));
    json_object_set_new(j, "admitted", json_integer(s->admitted));
    json_object_set_new(j, "refused_sold_out", json_integer(s->sold_out));
    json_object_set_new(j, "refused_limit", json_integer(s->limit));
    json_object_set_new(j, "gave_up", json_integer(s->gave_up));
    json_object_set_new(j, "errors", json_integer(s->errors));
    json_object_set_new(j, "retries", json_integer(s->retries));
    json_object_set_new(j, "lock_timeouts", json_integer(s->lock_timeouts));
    json_object_set_new(j, "lock_lost", json_integer(s->lock_lost));
    json_t *lat = json_object();
    json_object_set_new(lat, "p50", json_real((double)sk_hist_percentile(&s->hist, 50) / 1e3));
    json_object_set_new(lat, "p99", json_real((double)sk_hist_percentile(&s->hist, 99) / 1e3));
    json_object_set_new(lat, "p999", json_real((double)sk_hist_percentile(&s->hist, 99.9) / 1e3));
    json_object_set_new(lat, "max", json_real((double)sk_hist_percentile(&s->hist, 100) / 1e3));
    json_object_set_new(lat, "mean", json_real(sk_hist_mean(&s->hist) / 1e3));
    json_object_set_new(j, "latency_ms", lat);
    json_object_set_new(j, "verified", json_boolean(s->verified));
    json_object_set_new(j, "sold", json_integer(s->sold));
    json_object_set_new(j, "stock_left", json_integer(s->stock_left));
    json_object_set_new(j, "oversold", json_integer(s->oversold));
    json_object_set_new(j, "undersold",
                        s->undersold >= 0 ? json_integer(s->undersold) : json_null());
    json_object_set_new(j, "limit_violations", json_integer(s->limit_violations));
    json_object_set_new(j, "server",
                        json_string(sid == SID_PG       ? "postgres (all processes)"
                                    : sid == SID_MYSQL  ? "mariadbd"
                                    : sid == SID_SQLITE ? "this process (SQLite in-process)"
                                                        : "redis-server"));
    json_object_set_new(j, "server_cpu_s", json_real(s->server_cpu_s));
    json_object_set_new(j, "server_cpu_pct",
                        json_real(s->secs > 0 ? 100.0 * s->server_cpu_s / s->secs : 0));
    json_object_set_new(j, "client_cpu_pct",
                        json_real(s->secs > 0 ? 100.0 * s->client_cpu_s / s->secs : 0));
    /* Cores taken by other processes of the machine during the phase. */
    double other = s->machine_cpu_s - s->client_cpu_s - (sid == SID_SQLITE ? 0 : s->server_cpu_s);
    json_object_set_new(j, "other_cores",
                        json_real(s->secs > 0 && other > 0 ? other / s->secs : 0));
    json_object_set_new(j, "cut", json_boolean(s->cut));
    json_object_set_new(j, "check", json_string(s->check));
    json_object_set_new(j, "ok", json_boolean(s->ok));
    return j;
}

/* A target a/b >= want, judged on requests/s (the whole sale); the same
 * ratio on sales/s (admitted units per second until the last sale) is
 * reported beside it. A new object; the caller owns it. */
static json_t *target_json(const struct sk_bench_strat *a, const struct sk_bench_strat *b,
                           double want)
{
    json_t *t = json_object();
    double r = ratio(rps_of(a), rps_of(b));
    json_object_set_new(t, "ratio", json_real(r));
    json_object_set_new(t, "target", json_real(want));
    json_object_set_new(t, "met", json_boolean(r >= want));
    double rs = ratio(sales_rate(a), sales_rate(b));
    json_object_set_new(t, "ratio_sales", json_real(rs));
    json_object_set_new(t, "met_sales", json_boolean(rs >= want));
    return t;
}

/* The whole run as one JSON object (caller json_decref's it). */
json_t *sk_bench_strat_json(const struct sk_bench_sctx *c, int ok)
{
    const struct sk_bench_sopts *o = &c->o;
    json_t *root = json_object();
    json_object_set_new(root, "benchmark", json_string("strategies"));
    char model[160];
    char kernel[200];
    sk_bench_machine(model, sizeof model, kernel, sizeof kernel);
    json_t *m = json_object();
    json_object_set_new(m, "cpus", json_integer(sysconf(_SC_NPROCESSORS_ONLN)));
    json_object_set_new(m, "cpu_model", json_string(model));
    json_object_set_new(m, "kernel", json_string(kernel));
    json_object_set_new(root, "machine", m);
    json_t *sw = json_object();
    json_object_set_new(sw, "redis", json_string(c->redis_version));
    json_object_set_new(sw, "redis_persistence", json_string("none"));
    json_object_set_new(sw, "postgresql", json_string(c->pg_version));
    json_object_set_new(sw, "postgresql_durability", json_string(c->pg_durability));
    json_object_set_new(sw, "mariadb", json_string(c->my_version));
    json_object_set_new(sw, "mariadb_durability", json_string(c->my_durability));
    json_object_set_new(sw, "sqlite", json_string(sqlite3_libversion()));
    json_object_set_new(sw, "sqlite_mode", json_string("WAL, synchronous=FULL"));
    json_object_set_new(root, "software", sw);
    json_t *cf = json_object();
    json_object_set_new(cf, "quick", json_boolean(o->quick));
    json_object_set_new(cf, "stock", json_integer(o->stock));
    json_object_set_new(cf, "requests", json_integer(o->requests));
    json_object_set_new(cf, "users", json_integer(o->users));
    json_object_set_new(cf, "per_user_limit", json_integer(1));
    json_object_set_new(cf, "conns", json_integer(o->conns));
    json_object_set_new(cf, "batch", json_integer(o->batch));
    json_object_set_new(cf, "duration_s", json_integer(o->duration_s));
    json_object_set_new(cf, "watch_max_tries", json_integer(SK_BENCH_WATCH_TRIES));
    json_object_set_new(cf, "lock_ttl_ms", json_integer(SK_BENCH_LOCK_TTL_MS));
    json_object_set_new(cf, "lock_max_wait_ms", json_integer(SK_BENCH_LOCK_WAIT_US / 1000));
    json_object_set_new(cf, "sqlite_busy_timeout_ms", json_integer(SK_BENCH_SQLITE_BUSY_MS));
    json_object_set_new(cf, "redis_benchmark",
                        json_string("-c " SK_BENCH_RB_CLIENTS " -P " SK_BENCH_RB_PIPELINE));
    json_object_set_new(root, "config", cf);
    double limit = c->ref[REF_SAME].ran ? c->ref[REF_SAME].rps : 0;
    json_t *refs = json_array();
    for (int i = 0; i < REF_COUNT; i++) {
        const struct sk_bench_ref *r = &c->ref[i];
        json_t *j = json_object();
        json_object_set_new(j, "id", json_string(r->id));
        json_object_set_new(j, "label", json_string(r->label));
        json_object_set_new(j, "ran", json_boolean(r->ran));
        json_object_set_new(j, "requests", json_integer(r->n));
        if (r->ran) {
            json_object_set_new(j, "rps", json_real(r->rps));
            json_object_set_new(j, "server_cpu_pct",
                                json_real(r->secs > 0 ? 100.0 * r->cpu_s / r->secs : 0));
        }
        if (r->note[0]) json_object_set_new(j, "note", json_string(r->note));
        json_array_append_new(refs, j);
    }
    json_object_set_new(root, "references", refs);
    json_object_set_new(root, "redis_limit_rps", json_real(limit));
    json_t *arr = json_array();
    for (int i = 0; i < SID_COUNT; i++)
        json_array_append_new(arr, strat_json(c, (enum sk_bench_sid)i, limit));
    json_object_set_new(root, "strategies", arr);
    json_t *t = json_object();
    json_object_set_new(t, "lua_vs_pg",
                        target_json(&c->s[SID_LUA], &c->s[SID_PG], SK_BENCH_TARGET_LUA_VS_DB));
    json_object_set_new(t, "lua_vs_sqlite",
                        target_json(&c->s[SID_LUA], &c->s[SID_SQLITE], SK_BENCH_TARGET_LUA_VS_DB));
    json_object_set_new(
        t, "batch_vs_lua",
        target_json(&c->s[SID_LUA_BATCH], &c->s[SID_LUA], SK_BENCH_TARGET_BATCH_VS_LUA));
    json_object_set_new(root, "targets", t);
    json_object_set_new(root, "ok", json_boolean(ok));
    return root;
}

/* ---- the table ---- */

void sk_bench_strat_print(const struct sk_bench_sctx *c, const json_t *root)
{
    const struct sk_bench_sopts *o = &c->o;
    const json_t *m = json_object_get(root, "machine");
    printf("seckill-bench strategies: stock %" PRId64 ", %" PRId64 " requests from %" PRId64
           " distinct users (limit 1 each), %" PRId64 " client threads with a connection each\n",
           o->stock, o->requests, o->users, o->conns);
    printf("  machine: %lld cpus, %s, %s\n",
           (long long)json_integer_value(json_object_get(m, "cpus")),
           json_string_value(json_object_get(m, "cpu_model")),
           json_string_value(json_object_get(m, "kernel")));
    printf("  redis-server %s (private, no persistence); PostgreSQL %s (private, %s); MariaDB %s "
           "(private, %s); SQLite %s (WAL, synchronous=FULL)\n\n",
           c->redis_version, c->pg_version[0] ? c->pg_version : "-", c->pg_durability,
           c->my_version[0] ? c->my_version : "-", c->my_durability, sqlite3_libversion());
    double limit = c->ref[REF_SAME].ran ? c->ref[REF_SAME].rps : 0;
    printf("  %-36s %9s %7s %9s %7s %7s %7s %8s %6s %8s %9s %7s %7s\n", "strategy", "req/s",
           "x limit", "sales/s", "sold in", "p50 ms", "p99 ms", "p99.9 ms", "sold", "oversold",
           "undersold", "retries", "srv CPU");
    for (int i = 0; i < SID_COUNT; i++) {
        const struct sk_bench_strat *s = &c->s[i];
        if (s->status != ST_RAN) {
            printf("  %-36s %s\n", sk_bench_sdef[i].label, s->note);
            continue;
        }
        char under[24];
        if (s->undersold >= 0)
            snprintf(under, sizeof under, "%" PRId64, s->undersold);
        else
            snprintf(under, sizeof under, "n/a");
        double rps = rps_of(s);
        printf("  %-36s %9.0f %7.3f %9.0f %6.2fs %7.3f %7.3f %8.3f %6" PRId64 " %8" PRId64
               " %9s %7" PRId64 " %6.0f%%%s\n",
               sk_bench_sdef[i].label, rps, ratio(rps, limit), sales_rate(s), s->sellout_secs,
               (double)sk_hist_percentile(&s->hist, 50) / 1e3,
               (double)sk_hist_percentile(&s->hist, 99) / 1e3,
               (double)sk_hist_percentile(&s->hist, 99.9) / 1e3, s->sold, s->oversold, under,
               s->retries, s->secs > 0 ? 100.0 * s->server_cpu_s / s->secs : 0,
               s->cut ? "  (cut)" : "");
    }
    printf("\n  references (redis-benchmark -c %s -P %s, same run):\n", SK_BENCH_RB_CLIENTS,
           SK_BENCH_RB_PIPELINE);
    for (int i = 0; i < REF_COUNT; i++) {
        const struct sk_bench_ref *r = &c->ref[i];
        if (r->ran)
            printf("  %-76s %10.0f req/s  x limit %.3f%s%s%s\n", r->label, r->rps,
                   ratio(r->rps, limit), r->note[0] ? "  (" : "", r->note, r->note[0] ? ")" : "");
        else
            printf("  %-52s not run: %s\n", r->label, r->note);
    }
    printf("\n  checks:\n");
    for (int i = 0; i < SID_COUNT; i++) {
        const struct sk_bench_strat *s = &c->s[i];
        if (s->status != ST_RAN) continue;
        printf("  %-36s %s; refused: sold out %" PRId64 ", limit %" PRId64 ", gave up %" PRId64
               "; errors %" PRId64 "%s%s\n",
               sk_bench_sdef[i].label, s->check, s->sold_out, s->limit, s->gave_up, s->errors,
               s->errors && s->note[0] ? ": " : "", s->errors ? s->note : "");
    }
    const json_t *t = json_object_get(root, "targets");
    const char *names[][2] = {{"lua_vs_pg", "Redis+Lua / DB conditional update (PostgreSQL)"},
                              {"lua_vs_sqlite", "Redis+Lua / DB conditional update (SQLite)"},
                              {"batch_vs_lua", "Lua batched / Lua per request"}};
    printf("\n  targets:\n");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const json_t *x = json_object_get(t, names[i][0]);
        printf("  %-48s %6.2f x on requests/s (target >= %.1f): %s; %.2f x on sales/s\n",
               names[i][1], json_real_value(json_object_get(x, "ratio")),
               json_real_value(json_object_get(x, "target")),
               json_is_true(json_object_get(x, "met")) ? "met" : "NOT met",
               json_real_value(json_object_get(x, "ratio_sales")));
    }
}
