/* test_bench_strategies.c - `seckill-bench strategies` (bench/bench_strategies.c)
 * run as a person runs it: the binary with --quick --json, its own
 * redis-server and PostgreSQL. Every strategy must run; the naive
 * check-then-act must oversell and every other strategy must neither
 * oversell nor break the per-user limit nor (when not cut by the time cap)
 * leave stock unsold, as read back from the store of truth. The chart is
 * redrawn from the saved JSON; bad flags and a bad JSON file are refused.
 * The quick run takes a few seconds (about 4 s on the 2-core machine). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/clock.h"
#include "support/harness.h"

#define OUT_CAP (256 * 1024)

/* The JSON object in out: the run prints nothing else on stdout with
 * --json, but stderr is mixed in by the runner (a warning would come first). */
static json_t *parse_run(const char *out)
{
    const char *p = strstr(out, "{\n");
    CHECK_MSG(p != NULL, "no JSON in the output:\n%.2000s", out);
    json_error_t je;
    json_t *root = json_loads(p, JSON_DISABLE_EOF_CHECK, &je);
    CHECK_MSG(root != NULL, "bad JSON (%s, line %d):\n%.2000s", je.text, je.line, p);
    return root;
}

static long long jint(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    CHECK_MSG(json_is_integer(v), "field %s missing or not an integer", k);
    return (long long)json_integer_value(v);
}

static double jreal(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    CHECK_MSG(json_is_number(v), "field %s missing or not a number", k);
    return json_number_value(v);
}

static const char *jstr(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    CHECK_MSG(s != NULL, "field %s missing or not a string", k);
    return s;
}

SK_TEST(bench_strategies_quick_every_strategy_only_naive_oversells)
{
    char *out = malloc(OUT_CAP);
    CHECK(out != NULL);
    int64_t t0 = sk_mono_ms();
    const char *args[] = {"strategies", "--quick", "--json", NULL};
    int rc = sk_th_run_bench(out, OUT_CAP, NULL, args);
    int64_t ms = sk_mono_ms() - t0;
    printf("# bench strategies --quick --json took %lld ms\n", (long long)ms);
    CHECK_MSG(rc == 0, "exit %d:\n%.4000s", rc, out);
    json_t *root = parse_run(out);
    CHECK(json_is_true(json_object_get(root, "ok")));
    const json_t *cf = json_object_get(root, "config");
    long long stock = jint(cf, "stock"), requests = jint(cf, "requests");
    CHECK(json_is_true(json_object_get(cf, "quick")));
    CHECK(jint(cf, "users") > stock); /* demand exceeds stock: undersold is defined */

    const char *want[] = {"naive", "pg", "mysql", "sqlite", "watch", "lock", "lua", "lua_batch"};
    const json_t *arr = json_object_get(root, "strategies");
    CHECK_EQ(json_array_size(arr), sizeof want / sizeof want[0]);
    for (size_t i = 0; i < json_array_size(arr); i++) {
        const json_t *s = json_array_get(arr, i);
        const char *id = jstr(s, "id");
        CHECK_STR(id, want[i]);
        CHECK_MSG(!strcmp(jstr(s, "status"), "ran"), "%s did not run: %s", id,
                  json_string_value(json_object_get(s, "note")));
        CHECK_MSG(json_is_true(json_object_get(s, "verified")), "%s not verified", id);
        CHECK_EQ(jint(s, "errors"), 0);
        int cut = json_is_true(json_object_get(s, "cut"));
        if (!cut) CHECK_EQ(jint(s, "requests"), requests);
        CHECK(jreal(s, "rps") > 0);
        const json_t *lat = json_object_get(s, "latency_ms");
        CHECK(jreal(lat, "p50") <= jreal(lat, "p99"));
        CHECK(jreal(lat, "p99") <= jreal(lat, "p999"));
        /* what the clients were told matches the store */
        CHECK_EQ(jint(s, "admitted"), jint(s, "sold"));
        printf("# %-10s %9.0f req/s  p99 %7.3f ms  sold %lld  oversold %lld%s\n", id,
               jreal(s, "rps"), jreal(lat, "p99"), jint(s, "sold"), jint(s, "oversold"),
               cut ? "  (cut)" : "");
        if (!strcmp(id, "naive")) {
            /* The lost update: many clients read the same stock and write
             * stock-1, so far more is sold than there was. */
            CHECK_MSG(jint(s, "oversold") > 0, "naive did not oversell: %s", jstr(s, "check"));
            CHECK_EQ(jint(s, "sold"), stock + jint(s, "oversold"));
            continue;
        }
        CHECK_MSG(jint(s, "oversold") == 0, "%s oversold: %s", id, jstr(s, "check"));
        CHECK_MSG(jint(s, "limit_violations") == 0, "%s broke the limit: %s", id, jstr(s, "check"));
        CHECK(jint(s, "stock_left") >= 0);
        CHECK(json_is_true(json_object_get(s, "ok")));
        if (!cut) {
            CHECK_MSG(jint(s, "undersold") == 0, "%s undersold: %s", id, jstr(s, "check"));
            CHECK_EQ(jint(s, "sold"), stock);
        }
    }
    /* reference lines from the same run */
    CHECK(jreal(root, "redis_limit_rps") > 0);
    const json_t *refs = json_object_get(root, "references");
    CHECK_EQ(json_array_size(refs), 3);
    for (size_t i = 0; i < json_array_size(refs); i++)
        CHECK_MSG(json_is_true(json_object_get(json_array_get(refs, i), "ran")), "%s: %s",
                  jstr(json_array_get(refs, i), "id"),
                  json_string_value(json_object_get(json_array_get(refs, i), "note")));
    const json_t *t = json_object_get(root, "targets");
    CHECK(json_is_object(json_object_get(t, "lua_vs_pg")));
    CHECK(json_is_object(json_object_get(t, "batch_vs_lua")));

    /* The chart, redrawn from the saved JSON without running anything. */
    char jpath[400], svg[400];
    snprintf(jpath, sizeof jpath, "%s/run.json", sk_th_tmpdir());
    snprintf(svg, sizeof svg, "%s/chart.svg", sk_th_tmpdir());
    CHECK(json_dump_file(root, jpath, JSON_INDENT(2)) == 0);
    const char *cargs[] = {"strategies", "--chart-from", jpath, "--chart", svg, NULL};
    rc = sk_th_run_bench(out, OUT_CAP, NULL, cargs);
    CHECK_MSG(rc == 0, "chart-from exit %d: %s", rc, out);
    FILE *f = fopen(svg, "r");
    CHECK(f != NULL);
    size_t n = fread(out, 1, OUT_CAP - 1, f);
    fclose(f);
    out[n] = 0;
    CHECK(strstr(out, "<svg") != NULL && strstr(out, "</svg>") != NULL);
    CHECK(strstr(out, "Redis+Lua batched") != NULL);
    CHECK(strstr(out, "OVERSOLD") != NULL);
    json_decref(root);
    free(out);
}

SK_TEST(bench_strategies_refuses_bad_flags_and_bad_json)
{
    char out[4096];
    const char *a1[] = {"strategies", "--requests", "10", "--users", "20", NULL};
    CHECK_EQ(sk_th_run_bench(out, sizeof out, NULL, a1), 2);
    CHECK(strstr(out, "--users") != NULL);
    const char *a2[] = {"strategies", "--conns", "0", NULL};
    CHECK_EQ(sk_th_run_bench(out, sizeof out, NULL, a2), 2);
    const char *a3[] = {"strategies", "--frobnicate", NULL};
    CHECK_EQ(sk_th_run_bench(out, sizeof out, NULL, a3), 2);
    const char *a4[] = {"strategies", "--chart-from", "x.json", NULL};
    CHECK_EQ(sk_th_run_bench(out, sizeof out, NULL, a4), 2); /* needs --chart */

    char bad[400], svg[400];
    snprintf(bad, sizeof bad, "%s/bad.json", sk_th_tmpdir());
    snprintf(svg, sizeof svg, "%s/bad.svg", sk_th_tmpdir());
    FILE *f = fopen(bad, "w");
    CHECK(f != NULL);
    fputs("{\"benchmark\": \"admission\"}", f);
    fclose(f);
    const char *a5[] = {"strategies", "--chart-from", bad, "--chart", svg, NULL};
    CHECK_EQ(sk_th_run_bench(out, sizeof out, NULL, a5), 1);
    CHECK(strstr(out, "not a `seckill-bench strategies --json` output") != NULL);
    const char *a6[] = {"strategies", "--help", NULL};
    CHECK_EQ(sk_th_run_bench(out, sizeof out, NULL, a6), 0);
    CHECK(strstr(out, "--chart-from") != NULL);
}
