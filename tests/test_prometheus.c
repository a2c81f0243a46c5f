/* test_prometheus.c - the alert rules (contrib/prometheus/seckill-rules.yml)
 * with the real promtool (Debian's prometheus package): `check rules`, and
 * `test rules` with input series for each alert firing and not firing
 * (seckill-rules.test.yml); and a real Prometheus server that scrapes a
 * live node's --ops-listen every second, loads the rules, and whose query
 * API returns seckill's series with the values the node reports. */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "core/clock.h"
#include "spawn/spawn.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/http_client.h"
#include "support/server_spawn.h"

#define RULES 14 /* the alerts of contrib/prometheus/seckill-rules.yml */

/* contrib/prometheus/ of the tree. */
static const char *rules_dir(void)
{
    static char path[600];
    snprintf(path, sizeof path, "%s/contrib/prometheus", sk_th_source_root());
    return path;
}

SK_TEST(prometheus_rules_pass_promtool_check_and_unit_tests)
{
    char cmd[1200], out[16384];
    snprintf(cmd, sizeof cmd, "promtool check rules %s/seckill-rules.yml 2>&1", rules_dir());
    CHECK_MSG(sk_th_sh(cmd, out, sizeof out) == 0, "%s", out);
    char found[64];
    snprintf(found, sizeof found, "SUCCESS: %d rules found", RULES);
    CHECK_MSG(strstr(out, found) != NULL, "%s", out);
    snprintf(cmd, sizeof cmd, "promtool test rules %s/seckill-rules.test.yml 2>&1", rules_dir());
    CHECK_MSG(sk_th_sh(cmd, out, sizeof out) == 0, "%s", out);
    CHECK_MSG(strstr(out, "SUCCESS") != NULL, "%s", out);
    /* every alert of the rules file has a test */
    static char rules[65536], tests[65536];
    snprintf(cmd, sizeof cmd, "cat %s/seckill-rules.yml", rules_dir());
    sk_th_sh(cmd, rules, sizeof rules);
    snprintf(cmd, sizeof cmd, "cat %s/seckill-rules.test.yml", rules_dir());
    sk_th_sh(cmd, tests, sizeof tests);
    int n = 0;
    for (const char *p = rules; (p = strstr(p, "- alert: ")) != NULL; n++) {
        p += 9;
        char name[64], want[96];
        snprintf(name, sizeof name, "%.*s", (int)strcspn(p, "\n "), p);
        snprintf(want, sizeof want, "alertname: %s\n", name);
        CHECK_MSG(strstr(tests, want) != NULL, "alert %s has no test", name);
    }
    CHECK_EQ(n, RULES);
}

/* GET path on port: the body parsed (NULL on failure). */
static json_t *get_json(int port, const char *path)
{
    struct sk_th_http h;
    if (sk_th_http_try_open(&h, port) < 0) return NULL;
    struct sk_th_resp r;
    int st = sk_th_http_req(&h, "GET", path, NULL, NULL, &r);
    sk_th_http_close(&h);
    if (st != 200) return NULL;
    json_error_t e;
    return json_loads(r.body, 0, &e);
}

static int prom_ready(void *arg)
{
    return sk_th_http_200(*(int *)arg, "/-/ready");
}

/* The value of an instant query's first sample, or -1 when it has none. */
static double query(int port, const char *q)
{
    char path[512];
    snprintf(path, sizeof path, "/api/v1/query?query=%s", q);
    json_t *d = get_json(port, path);
    json_t *res = json_object_get(json_object_get(d, "data"), "result");
    double v = -1;
    if (json_array_size(res) > 0) {
        const char *s =
            json_string_value(json_array_get(json_object_get(json_array_get(res, 0), "value"), 1));
        if (s) v = atof(s);
    }
    json_decref(d);
    return v;
}

SK_TEST_T(prometheus_server_scrapes_a_live_node_and_loads_the_rules, 180)
{
    struct sk_th_serve s;
    int ops = sk_th_free_port(), pport = sk_th_free_port();
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", ops);
    const char *extra[] = {"--ops-listen", addr, NULL};
    sk_th_serve_start(&s, sk_th_redis_url(), extra);
    /* a sale with a few admissions to count */
    uint64_t aid = sk_th_unique_id();
    char body[400], path[96], hdr[64];
    snprintf(body, sizeof body,
             "{\"id\":%" PRIu64 ",\"name\":\"prom\",\"stock\":100,\"per_user_limit\":1,"
             "\"start\":\"2020-01-01T00:00:00Z\",\"end\":\"2099-01-01T00:00:00Z\"}",
             aid);
    struct sk_th_http h;
    struct sk_th_resp r;
    sk_th_http_open(&h, s.port);
    const char *adm = "Authorization: Bearer " SK_TH_ADMIN_TOKEN "\r\n";
    CHECK_EQ(sk_th_http_req(&h, "POST", "/api/v1/activities", adm, body, &r), 201);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/preheat", aid);
    CHECK_EQ(sk_th_http_req(&h, "POST", path, adm, "{}", &r), 200);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/open", aid);
    CHECK_EQ(sk_th_http_req(&h, "POST", path, adm, NULL, &r), 200);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", aid);
    for (int u = 1; u <= 7; u++) {
        snprintf(hdr, sizeof hdr, "X-User-Id: %d\r\n", u);
        CHECK_EQ(sk_th_http_req(&h, "POST", path, hdr, NULL, &r), 200);
    }
    sk_th_http_close(&h);

    char dir[320], conf[400], data[400], rules[600], log[400], text[1600];
    snprintf(dir, sizeof dir, "%s", sk_th_tmpdir());
    snprintf(conf, sizeof conf, "%s/prometheus.yml", dir);
    snprintf(data, sizeof data, "--storage.tsdb.path=%s/tsdb", dir);
    snprintf(log, sizeof log, "%s/prometheus.log", dir);
    char *abs_rules = realpath(rules_dir(), NULL);
    CHECK(abs_rules != NULL);
    snprintf(rules, sizeof rules, "%s/seckill-rules.yml", abs_rules);
    free(abs_rules);
    snprintf(text, sizeof text,
             "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
             "rule_files:\n  - %s\n"
             "scrape_configs:\n  - job_name: seckill\n    static_configs:\n"
             "      - targets: ['127.0.0.1:%d']\n"
             "  - job_name: prometheus\n    static_configs:\n"
             "      - targets: ['127.0.0.1:%d']\n",
             rules, ops, pport);
    FILE *f = fopen(conf, "w");
    CHECK(f != NULL);
    fputs(text, f);
    fclose(f);
    char cfgarg[420], listen[64];
    snprintf(cfgarg, sizeof cfgarg, "--config.file=%s", conf);
    snprintf(listen, sizeof listen, "--web.listen-address=127.0.0.1:%d", pport);
    const char *argv[] = {"prometheus", cfgarg, data, listen, "--storage.tsdb.retention.time=1h",
                          NULL};
    pid_t pid = sk_th_server_start("prometheus", argv, log, prom_ready, &pport, 30000);
    /* the node's series, as Prometheus stored them from its scrapes */
    int64_t deadline = sk_mono_ms() + 30000;
    double up = -1, admitted = -1, redis_up = -1;
    char q[160];
    snprintf(q, sizeof q,
             "seckill_activity_admitted_units_total%%7Bactivity%%3D%%22%" PRIu64 "%%22%%7D", aid);
    while (up != 1 || admitted != 7 || redis_up != 1) {
        CHECK_MSG(sk_mono_ms() < deadline,
                  "Prometheus did not get the node's series: up %g, admitted %g, redis_up %g "
                  "(log %s)",
                  up, admitted, redis_up, log);
        struct timespec ts = {0, 200 * 1000 * 1000};
        nanosleep(&ts, NULL);
        up = query(pport, "up%7Bjob%3D%22seckill%22%7D");
        admitted = query(pport, q);
        redis_up = query(pport, "seckill_redis_up");
    }
    CHECK(query(pport, "seckill_admissions_total") >= 7);
    /* the Redis master's memory and settings, as its client read them:
     * the suite's Redis has no maxmemory and evicts nothing */
    deadline = sk_mono_ms() + 20000;
    while (query(pport, "seckill_redis_memory_used_bytes") <= 0) {
        CHECK_MSG(sk_mono_ms() < deadline, "no seckill_redis_memory_used_bytes (log %s)", log);
        struct timespec ts = {0, 200 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    CHECK_EQ(query(pport, "seckill_redis_memory_max_bytes"), 0);
    CHECK_EQ(query(pport, "seckill_redis_settings_unsafe"), 0);
    /* the rules loaded (Prometheus's own series say so), evaluated without
     * failures, and none fires on a healthy node */
    deadline = sk_mono_ms() + 20000;
    while (query(pport, "sum(prometheus_rule_group_rules)") != RULES ||
           query(pport, "sum(prometheus_rule_evaluations_total)") < 20) {
        CHECK_MSG(sk_mono_ms() < deadline, "the rules were not loaded and evaluated (log %s)", log);
        struct timespec ts = {0, 200 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    CHECK_EQ(query(pport, "sum(prometheus_rule_evaluation_failures_total)"), 0);
    CHECK_EQ(query(pport, "ALERTS"), -1);
    sk_spawn_stop(pid, SIGTERM, 5000);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
}
