/* test_bench_cluster.c - `seckill-bench cluster` (bench/bench_cluster.c) run
 * as a person runs it, short: the binary starts its own redis-server and
 * its own 3-master Redis Cluster, measures the four configurations (single
 * redis-server, cluster with 1, 3 and 8 segments), checks each activity
 * (stock + held == initial, held == admitted as counted) and stops its
 * servers. No speed is asserted: only that every configuration ran and
 * admitted, that the JSON agrees with the table, and that its own
 * correctness check ran and passed. Bad flags exit 2. About 10 s. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/clock.h"
#include "support/harness.h"

#define OUT_CAP (64 * 1024)

/* The number after the configuration's label on its table line. */
static double table_rate(const char *out, const char *label)
{
    const char *p = out;
    size_t n = strlen(label);
    while ((p = strstr(p, label)) != NULL) {
        /* a table line starts with the label (at the start of a line) */
        if (p == out || p[-1] == '\n') {
            int segs, masters;
            double rate;
            if (sscanf(p + n, " %d %d %lf", &segs, &masters, &rate) == 3) return rate;
        }
        p += n;
    }
    return -1;
}

SK_TEST(bench_cluster_short_run_measures_four_configs_and_checks_them)
{
    char *out = malloc(OUT_CAP);
    CHECK(out != NULL);
    char json[400];
    snprintf(json, sizeof json, "%s/cluster.json", sk_th_tmpdir());
    int64_t t0 = sk_mono_ms();
    const char *args[] = {"cluster",     "--seconds", "1",      "--threads", "2",
                          "--warmup-ms", "200",       "--json", json,        NULL};
    int rc = sk_th_run_bench(out, OUT_CAP, NULL, args);
    printf("# bench cluster --seconds 1 --threads 2 took %lld ms\n",
           (long long)(sk_mono_ms() - t0));
    CHECK_MSG(rc == 0, "exit %d:\n%.6000s", rc, out);

    /* the header names the command and the machine */
    CHECK_MSG(strstr(out, "command: ") && strstr(out, "bench cluster --seconds 1 --threads 2"),
              "no command line:\n%.3000s", out);
    CHECK(strstr(out, "machine: ") != NULL);
    CHECK(strstr(out, "redis-server ") != NULL);

    const char *labels[] = {"single redis", "cluster S=1", "cluster S=3", "cluster S=8"};
    for (size_t i = 0; i < 4; i++) {
        double r = table_rate(out, labels[i]);
        CHECK_MSG(r > 0, "%s: no admissions/s on its table line:\n%.6000s", labels[i], out);
        printf("# %-12s %10.0f admissions/s\n", labels[i], r);
    }
    /* its own correctness check ran, for every configuration */
    CHECK_MSG(strstr(out, "correctness check: 4 of 4 configurations ok") != NULL,
              "correctness line missing:\n%.6000s", out);
    CHECK(strstr(out, "FAILED") == NULL);
    CHECK(strstr(out, "scaling vs single redis-server") != NULL);
    CHECK(strstr(out, "prediction: ") != NULL);
    CHECK(strstr(out, "result: ok") != NULL);

    /* the JSON file says the same */
    json_error_t je;
    json_t *root = json_load_file(json, 0, &je);
    CHECK_MSG(root != NULL, "bad JSON %s: %s", json, je.text);
    CHECK(json_is_true(json_object_get(root, "ok")));
    const json_t *cfs = json_object_get(root, "configs");
    CHECK_EQ(json_array_size(cfs), 4);
    const char *ids[] = {"single", "cluster_s1", "cluster_s3", "cluster_s8"};
    const int segs[] = {1, 1, 3, 8}, masters[] = {1, 1, 3, 3};
    for (size_t i = 0; i < 4; i++) {
        const json_t *c = json_array_get(cfs, i);
        CHECK_STR(json_string_value(json_object_get(c, "id")), ids[i]);
        CHECK(json_is_true(json_object_get(c, "ran")));
        CHECK(json_is_true(json_object_get(c, "check_ok")));
        CHECK_EQ(json_integer_value(json_object_get(c, "segments")), segs[i]);
        CHECK_EQ(json_integer_value(json_object_get(c, "masters_used")), masters[i]);
        CHECK(json_integer_value(json_object_get(c, "admitted_measured")) > 0);
        CHECK(json_integer_value(json_object_get(c, "admitted_total")) >=
              json_integer_value(json_object_get(c, "admitted_measured")));
        CHECK(json_number_value(json_object_get(c, "admissions_per_s")) > 0);
        CHECK(json_number_value(json_object_get(c, "redis_cpu_us_per_admission")) > 0);
    }
    json_decref(root);
    free(out);
}

SK_TEST(bench_cluster_refuses_bad_flags)
{
    char out[4096];
    const char *a1[] = {"cluster", "--threads", "0", NULL};
    CHECK_EQ(sk_th_run_bench(out, sizeof out, NULL, a1), 2);
    CHECK_MSG(strstr(out, "--threads needs an integer in 1..256") != NULL, "%s", out);
    const char *a2[] = {"cluster", "--batch", "x", NULL};
    CHECK_EQ(sk_th_run_bench(out, sizeof out, NULL, a2), 2);
    CHECK(strstr(out, "--batch") != NULL);
    const char *a3[] = {"cluster", "--frobnicate", NULL};
    CHECK_EQ(sk_th_run_bench(out, sizeof out, NULL, a3), 2);
    CHECK(strstr(out, "unknown option '--frobnicate'") != NULL);
    const char *a4[] = {"cluster", "--seconds", NULL};
    CHECK_EQ(sk_th_run_bench(out, sizeof out, NULL, a4), 2);
    const char *a5[] = {"cluster", "--help", NULL};
    CHECK_EQ(sk_th_run_bench(out, sizeof out, NULL, a5), 0);
    CHECK(strstr(out, "--depth") != NULL);
}

/* 1 when the file at path holds the bytes of s (a symbol's name in its
 * symbol table: the build keeps them, -g and unstripped). */
static int file_holds(const char *path, const char *s)
{
    FILE *f = fopen(path, "rb");
    CHECK_MSG(f != NULL, "cannot open %s", path);
    size_t n = strlen(s), cap = 1 << 20, have = 0;
    char *buf = malloc(cap + n);
    CHECK(buf != NULL);
    int found = 0;
    size_t got;
    while (!found && (got = fread(buf + have, 1, cap, f)) > 0) {
        found = memmem(buf, have + got, s, n) != NULL;
        /* keep the last n bytes: a name across two reads */
        size_t keep = have + got < n ? have + got : n;
        memmove(buf, buf + have + got - keep, keep);
        have = keep;
    }
    fclose(f);
    free(buf);
    return found;
}

SK_TEST(seckill_holds_no_benchmark_and_points_at_seckill_bench)
{
    char out[4096];
    const char *args[] = {"bench", "cluster", "--seconds", "1", NULL};
    CHECK_EQ(sk_th_run_seckill(out, sizeof out, NULL, args), 2);
    CHECK_MSG(strstr(out, "seckill-bench cluster") != NULL, "%s", out);
    /* the benchmarks' code is in seckill-bench only */
    CHECK(file_holds(sk_th_bench_bin(), "sk_cli_bench"));
    CHECK(file_holds(sk_th_bench_bin(), "sk_bench_cluster"));
    CHECK(!file_holds(sk_th_seckill_bin(), "sk_cli_bench"));
    CHECK(!file_holds(sk_th_seckill_bin(), "sk_bench_"));
    /* nor the test spawners: the demo's redis-server is the product's own */
    CHECK(!file_holds(sk_th_seckill_bin(), "sk_pg_spawn_"));
    CHECK(!file_holds(sk_th_seckill_bin(), "sk_cluster_spawn_"));
    CHECK(file_holds(sk_th_seckill_bin(), "sk_redis_spawn_start"));
}
