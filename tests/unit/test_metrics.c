/* test_metrics.c - the metrics registry and its Prometheus text (no server). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/codes.h"
#include "core/error.h"
#include "http/metrics.h"
#include "support/harness.h"

/* Rendered text of m (static buffer, valid until the next call). */
static const char *render(const sk_metrics *m)
{
    static char buf[1 << 20];
    int n = sk_metrics_render(m, buf, sizeof buf);
    CHECK(n > 0 && (size_t)n == strlen(buf));
    return buf;
}

/* 1 when the exact line "series value" is in text. */
static int has_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)) != NULL; p++)
        if ((p == text || p[-1] == '\n') && p[n] == '\n') return 1;
    return 0;
}
#define CHECK_LINE(text, line) CHECK_MSG(has_line(text, line), "missing line: %s", line)

/* A refusal reason and the count m should hold for it. */
struct reason_count {
    const char *reason;
    uint64_t n;
};

static void check_refusals(const sk_metrics *m, const struct reason_count *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        CHECK_MSG(sk_metrics_refusals(m, want[i].reason) == want[i].n,
                  "refusals %s: %llu, not %llu", want[i].reason,
                  (unsigned long long)sk_metrics_refusals(m, want[i].reason),
                  (unsigned long long)want[i].n);
}

SK_TEST(metrics_route_of_maps_every_router_route_and_404s_to_other)
{
    CHECK_EQ(sk_metrics_route_of(SK_ROUTE_purchase), SK_MROUTE_purchase);
    CHECK_EQ(sk_metrics_route_of(SK_ROUTE_admin_close), SK_MROUTE_admin_close);
    CHECK_EQ(sk_metrics_route_of(SK_ROUTE_order_get), SK_MROUTE_orders);
    CHECK_EQ(sk_metrics_route_of(SK_ROUTE_order_pay), SK_MROUTE_orders);
    CHECK_EQ(sk_metrics_route_of(SK_ROUTE_order_cancel), SK_MROUTE_orders);
    CHECK_EQ(sk_metrics_route_of(SK_ROUTE_dashboard), SK_MROUTE_dashboard);
    CHECK_EQ(sk_metrics_route_of(SK_ROUTE_COUNT), SK_MROUTE_other);
    /* every router route has a label other than "other", named after it
     * (order routes aside) */
    for (int r = 0; r < SK_ROUTE_COUNT; r++) {
        enum sk_metrics_route mr = sk_metrics_route_of((enum sk_route)r);
        CHECK_MSG(mr != SK_MROUTE_other, "router route %s has no metrics label",
                  sk_route_name((enum sk_route)r));
        if (mr != SK_MROUTE_orders)
            CHECK_STR(sk_metrics_route_name(mr), sk_route_name((enum sk_route)r));
    }
    CHECK_STR(sk_metrics_route_name(SK_MROUTE_COUNT), "other");
    CHECK_STR(sk_metrics_route_name((enum sk_metrics_route) - 1), "other");
}

SK_TEST(metrics_count_requests_by_route_and_status)
{
    sk_metrics *m = sk_metrics_new();
    CHECK(m != NULL);
    sk_metrics_request(m, SK_MROUTE_purchase, 200);
    sk_metrics_request(m, SK_MROUTE_purchase, 200);
    sk_metrics_request(m, SK_MROUTE_purchase, 409);
    sk_metrics_request(m, SK_MROUTE_healthz, 200);
    sk_metrics_request(m, SK_MROUTE_other, 404);
    sk_metrics_request(m, (enum sk_metrics_route)99, 404); /* bad route: other */
    sk_metrics_request(m, SK_MROUTE_orders, 0);            /* bad status: other */
    sk_metrics_request(m, SK_MROUTE_orders, 600);
    sk_metrics_request(m, SK_MROUTE_orders, -5);
    CHECK_EQ(sk_metrics_requests(m, SK_MROUTE_purchase, 200), 2);
    CHECK_EQ(sk_metrics_requests(m, SK_MROUTE_other, 404), 2);
    const char *t = render(m);
    CHECK_LINE(t, "seckill_http_requests_total{route=\"purchase\",status=\"200\"} 2");
    CHECK_LINE(t, "seckill_http_requests_total{route=\"purchase\",status=\"409\"} 1");
    CHECK_LINE(t, "seckill_http_requests_total{route=\"healthz\",status=\"200\"} 1");
    CHECK_LINE(t, "seckill_http_requests_total{route=\"other\",status=\"404\"} 2");
    CHECK_LINE(t, "seckill_http_requests_total{route=\"orders\",status=\"other\"} 3");
    CHECK(strstr(t, "status=\"201\"") == NULL); /* zero pairs are not rendered */
    sk_metrics_free(m);
    sk_metrics_free(NULL);
}

SK_TEST(metrics_refusals_by_code_share_wire_names_and_skip_non_refusals)
{
    sk_metrics *m = sk_metrics_new();
    sk_metrics_refusal_rc(m, SK_RC_SOLD_OUT);
    sk_metrics_refusal_rc(m, SK_RC_INSUFFICIENT); /* also "sold_out" */
    sk_metrics_refusal_rc(m, SK_RC_LIMIT_EXCEEDED);
    sk_metrics_refusal_rc(m, SK_RC_BAD_QUANTITY); /* "bad_request" */
    sk_metrics_refusal_rc(m, SK_RC_OK);           /* not a refusal: ignored */
    sk_metrics_refusal_rc(m, SK_RC_RELEASED);
    sk_metrics_refusal_rc(m, 999); /* unknown code: other */
    sk_metrics_refusal_rc(m, -1);
    static const struct reason_count want[] = {
        {"sold_out", 2}, {"limit_exceeded", 1}, {"bad_request", 1}, {"other", 2}, {"accepted", 0},
    };
    check_refusals(m, want, sizeof want / sizeof want[0]);
    const char *t = render(m);
    CHECK_LINE(t, "seckill_refusals_total{reason=\"sold_out\"} 2");
    CHECK_LINE(t, "seckill_refusals_total{reason=\"not_started\"} 0"); /* all reasons, 0 too */
    CHECK(strstr(t, "reason=\"accepted\"") == NULL);
    CHECK(strstr(t, "reason=\"released\"") == NULL);
    /* each reason label appears once */
    const char *p = strstr(t, "reason=\"sold_out\"");
    CHECK(p && !strstr(p + 1, "reason=\"sold_out\""));
    p = strstr(t, "reason=\"bad_request\"");
    CHECK(p && !strstr(p + 1, "reason=\"bad_request\""));
    sk_metrics_free(m);
}

SK_TEST(metrics_refusals_by_name_and_extras)
{
    sk_metrics *m = sk_metrics_new();
    sk_metrics_refusal(m, "rate_limited");
    sk_metrics_refusal_extra(m, SK_MEXTRA_RATE_LIMITED);
    sk_metrics_refusal(m, "unauthorized");
    sk_metrics_refusal_extra(m, SK_MEXTRA_UNAVAILABLE);
    sk_metrics_refusal(m, "unavailable");
    sk_metrics_refusal(m, "bad_request");
    sk_metrics_refusal_extra(m, SK_MEXTRA_BAD_REQUEST);
    sk_metrics_refusal(m, "sold_out");
    sk_metrics_refusal(m, "no such reason\"\n");
    sk_metrics_refusal(m, NULL);
    sk_metrics_refusal_extra(m, (enum sk_metrics_extra)42);
    static const struct reason_count want[] = {
        {"rate_limited", 2}, {"unauthorized", 1}, {"unavailable", 2},
        {"bad_request", 2},  {"sold_out", 1},     {"other", 3},
    };
    check_refusals(m, want, sizeof want / sizeof want[0]);
    const char *t = render(m);
    CHECK_LINE(t, "seckill_refusals_total{reason=\"rate_limited\"} 2");
    CHECK_LINE(t, "seckill_refusals_total{reason=\"other\"} 3");
    CHECK(strstr(t, "no such reason") == NULL); /* unknown names never become labels */
    sk_metrics_free(m);
}

SK_TEST(metrics_redis_rtt_histogram_is_cumulative_with_inclusive_bounds)
{
    sk_metrics *m = sk_metrics_new();
    sk_metrics_redis_rtt(m, 0.00003);
    sk_metrics_redis_rtt(m, 0.00005); /* on the bound: counted in le=0.00005 */
    sk_metrics_redis_rtt(m, 0.0002);
    sk_metrics_redis_rtt(m, 0.7);
    sk_metrics_redis_rtt(m, 3.0); /* over 1 s: only +Inf */
    sk_metrics_redis_rtt(m, -1);  /* clamped to 0 */
    sk_metrics_redis_rtt(m, NAN);
    sk_metrics_redis_rtt(m, INFINITY); /* clamped to a day */
    const char *t = render(m);
    CHECK_LINE(t, "seckill_redis_roundtrip_seconds_bucket{le=\"0.00005\"} 4");
    CHECK_LINE(t, "seckill_redis_roundtrip_seconds_bucket{le=\"0.0001\"} 4");
    CHECK_LINE(t, "seckill_redis_roundtrip_seconds_bucket{le=\"0.00025\"} 5");
    CHECK_LINE(t, "seckill_redis_roundtrip_seconds_bucket{le=\"0.5\"} 5");
    CHECK_LINE(t, "seckill_redis_roundtrip_seconds_bucket{le=\"1\"} 6");
    CHECK_LINE(t, "seckill_redis_roundtrip_seconds_bucket{le=\"+Inf\"} 8");
    CHECK_LINE(t, "seckill_redis_roundtrip_seconds_count 8");
    const char *s = strstr(t, "seckill_redis_roundtrip_seconds_sum ");
    CHECK(s != NULL);
    double sum = strtod(s + strlen("seckill_redis_roundtrip_seconds_sum "), NULL);
    CHECK_MSG(fabs(sum - (0.00003 + 0.00005 + 0.0002 + 0.7 + 3.0 + 86400)) < 1e-9, "sum %g", sum);
    sk_metrics_free(m);
}

SK_TEST(metrics_batch_histogram_uses_powers_of_two)
{
    sk_metrics *m = sk_metrics_new();
    size_t sizes[] = {0, 1, 2, 3, 4, 5, 1024, 1025, 100000};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        sk_metrics_batch(m, sizes[i]);
    const char *t = render(m);
    CHECK_LINE(t, "seckill_batch_size_bucket{le=\"1\"} 2");
    CHECK_LINE(t, "seckill_batch_size_bucket{le=\"2\"} 3");
    CHECK_LINE(t, "seckill_batch_size_bucket{le=\"4\"} 5");
    CHECK_LINE(t, "seckill_batch_size_bucket{le=\"8\"} 6");
    CHECK_LINE(t, "seckill_batch_size_bucket{le=\"512\"} 6");
    CHECK_LINE(t, "seckill_batch_size_bucket{le=\"1024\"} 7");
    CHECK_LINE(t, "seckill_batch_size_bucket{le=\"+Inf\"} 9");
    CHECK_LINE(t, "seckill_batch_size_sum 102064");
    CHECK_LINE(t, "seckill_batch_size_count 9");
    sk_metrics_free(m);
}

SK_TEST(metrics_gauge_counters_and_admissions_render)
{
    sk_metrics *m = sk_metrics_new();
    sk_metrics_inflight(m, 1);
    sk_metrics_inflight(m, 1);
    sk_metrics_inflight(m, -1);
    sk_metrics_admission(m, 5);
    sk_metrics_admission(m, 0);
    sk_metrics_soldout_fastpath(m);
    CHECK_EQ(sk_metrics_inflight_now(m), 1);
    CHECK_EQ(sk_metrics_admissions(m), 5);
    const char *t = render(m);
    CHECK_LINE(t, "seckill_inflight_requests 1");
    CHECK_LINE(t, "seckill_admissions_total 5");
    CHECK_LINE(t, "seckill_soldout_fastpath_total 1");
    sk_metrics_inflight(m, -3);
    CHECK_LINE(render(m), "seckill_inflight_requests -2"); /* a gauge may dip: shown as is */
    sk_metrics_free(m);
}

/* Checks the exposition format 0.0.4 line by line: HELP/TYPE comments
 * before each family, then samples "name{label=\"v\",...} value" whose name
 * belongs to the announced family, label values without raw quotes or
 * newlines, values that parse as numbers, and a final newline. */
static void check_exposition(const char *t)
{
    CHECK(t[0] && t[strlen(t) - 1] == '\n');
    char family[128] = "", type[32] = "";
    int families = 0;
    const char *line = t;
    while (*line) {
        const char *nl = strchr(line, '\n');
        CHECK(nl != NULL);
        char l[512];
        size_t n = (size_t)(nl - line);
        CHECK(n < sizeof l);
        memcpy(l, line, n);
        l[n] = 0;
        if (strncmp(l, "# HELP ", 7) == 0) {
            CHECK(sscanf(l + 7, "%127s", family) == 1);
        } else if (strncmp(l, "# TYPE ", 7) == 0) {
            char f[128];
            CHECK(sscanf(l + 7, "%127s %31s", f, type) == 2);
            CHECK_STR(f, family);
            CHECK(!strcmp(type, "counter") || !strcmp(type, "gauge") || !strcmp(type, "histogram"));
            families++;
        } else {
            CHECK_MSG(l[0] != '#' && family[0], "stray line: %s", l);
            size_t fl = strlen(family);
            CHECK_MSG(strncmp(l, family, fl) == 0, "%s outside family %s", l, family);
            const char *rest = l + fl;
            if (!strcmp(type, "histogram")) {
                if (!strncmp(rest, "_bucket", 7))
                    rest += 7;
                else if (!strncmp(rest, "_sum", 4))
                    rest += 4;
                else if (!strncmp(rest, "_count", 6))
                    rest += 6;
                else
                    CHECK_MSG(0, "bad histogram sample %s", l);
            }
            if (*rest == '{') {
                const char *close = strchr(rest, '}');
                CHECK(close != NULL);
                for (const char *p = rest + 1; p < close;) {
                    while (*p >= 'a' && *p <= 'z')
                        p++;
                    CHECK_MSG(p[0] == '=' && p[1] == '"', "bad label in %s", l);
                    const char *q = strchr(p + 2, '"');
                    CHECK(q && q < close);
                    p = q + 1;
                    if (*p == ',') p++;
                }
                rest = close + 1;
            }
            CHECK_MSG(*rest == ' ', "no value in %s", l);
            char *end;
            strtod(rest + 1, &end);
            CHECK_MSG(*end == 0 && end > rest + 1, "bad value in %s", l);
        }
        line = nl + 1;
    }
    CHECK_EQ(families, 9); /* 8, and the purchase latency histogram */
}

SK_TEST(metrics_render_is_valid_prometheus_text)
{
    sk_metrics *m = sk_metrics_new();
    check_exposition(render(m)); /* empty registry too */
    for (int r = 0; r <= SK_MROUTE_COUNT; r++)
        for (int s = 0; s < 700; s += 7)
            sk_metrics_request(m, (enum sk_metrics_route)r, s);
    for (int rc = -2; rc < SK_RC_COUNT_ + 2; rc++)
        sk_metrics_refusal_rc(m, rc);
    sk_metrics_redis_rtt(m, 0.001);
    sk_metrics_batch(m, 16);
    sk_metrics_inflight(m, 3);
    check_exposition(render(m));
    sk_metrics_free(m);
}

SK_TEST(metrics_render_reports_a_small_buffer_and_alloc_grows)
{
    sk_metrics *m = sk_metrics_new();
    for (int s = 100; s < 600; s++)
        for (int r = 0; r < SK_MROUTE_COUNT; r++)
            sk_metrics_request(m, (enum sk_metrics_route)r, s);
    size_t len = 0;
    char *text = sk_metrics_render_alloc(m, &len);
    CHECK(text != NULL);
    CHECK(len > 16384); /* forced at least one regrowth */
    CHECK_EQ(len, strlen(text));
    check_exposition(text);
    char *small = malloc(len);
    memset(small, 'x', len);
    CHECK_EQ(sk_metrics_render(m, small, len), SK_ENOMEM); /* no room for the terminator */
    CHECK_STR(small, "");
    char *exact = malloc(len + 1);
    CHECK_EQ(sk_metrics_render(m, exact, len + 1), (long long)len);
    CHECK_STR(exact, text);
    CHECK_EQ(sk_metrics_render(m, NULL, 0), SK_ENOMEM);
    free(small);
    free(exact);
    free(text);
    sk_metrics_free(m);
}

SK_TEST(metrics_merge_sums_two_registries)
{
    sk_metrics *a = sk_metrics_new(), *b = sk_metrics_new();
    sk_metrics_request(a, SK_MROUTE_purchase, 200);
    sk_metrics_request(b, SK_MROUTE_purchase, 200);
    sk_metrics_request(b, SK_MROUTE_readyz, 503);
    sk_metrics_admission(a, 3);
    sk_metrics_admission(b, 4);
    sk_metrics_act_replayed(a, 9); /* an Idempotency-Key replay: apart from admissions */
    sk_metrics_act_replayed(b, 9);
    sk_metrics_refusal_rc(a, SK_RC_SOLD_OUT);
    sk_metrics_refusal(b, "sold_out");
    sk_metrics_soldout_fastpath(b);
    sk_metrics_redis_rtt(a, 0.001);
    sk_metrics_redis_rtt(b, 0.002);
    sk_metrics_batch(a, 8);
    sk_metrics_batch(b, 8);
    sk_metrics_inflight(a, 2);
    sk_metrics_inflight(b, 1);
    CHECK_EQ(sk_metrics_merge(a, b), 0);
    CHECK_EQ(sk_metrics_requests(a, SK_MROUTE_purchase, 200), 2);
    CHECK_EQ(sk_metrics_requests(a, SK_MROUTE_readyz, 503), 1);
    CHECK_EQ(sk_metrics_admissions(a), 7);
    CHECK_EQ(sk_metrics_refusals(a, "sold_out"), 2);
    CHECK_EQ(sk_metrics_inflight_now(a), 3);
    const char *t = render(a);
    CHECK_LINE(t, "seckill_soldout_fastpath_total 1");
    CHECK_LINE(t, "seckill_idempotent_replays_total 2");
    CHECK_LINE(t, "seckill_activity_replays_total{activity=\"9\"} 2");
    CHECK_LINE(t, "seckill_redis_roundtrip_seconds_count 2");
    CHECK_LINE(t, "seckill_redis_roundtrip_seconds_bucket{le=\"0.001\"} 1");
    CHECK_LINE(t, "seckill_batch_size_bucket{le=\"8\"} 2");
    CHECK_LINE(t, "seckill_batch_size_sum 16");
    /* b is unchanged */
    CHECK_EQ(sk_metrics_admissions(b), 4);
    sk_metrics_free(a);
    sk_metrics_free(b);
}

SK_TEST(metrics_hot_path_updates_cost_nanoseconds)
{
    sk_metrics *m = sk_metrics_new();
    const int iters = 1000000;
    int64_t t0 = sk_mono_us();
    for (int i = 0; i < iters; i++) {
        sk_metrics_request(m, SK_MROUTE_purchase, 200 + (i & 1) * 209);
        sk_metrics_refusal_rc(m, SK_RC_SOLD_OUT);
        sk_metrics_redis_rtt(m, 0.0003);
        sk_metrics_batch(m, (size_t)(i & 63));
        sk_metrics_inflight(m, 1);
    }
    double per = (double)(sk_mono_us() - t0) * 1000.0 / iters / 5;
    fprintf(stderr, "# metrics update: %.1f ns per call\n", per);
    CHECK_EQ(sk_metrics_refusals(m, "sold_out"), iters);
    CHECK_MSG(per < 1000, "%.1f ns per update", per);
    sk_metrics_free(m);
}

/* Random updates, including out-of-range arguments: counts stay
 * consistent with the calls made and the text stays well-formed. */
SK_TEST(metrics_survive_100000_random_updates)
{
    sk_metrics *m = sk_metrics_new();
    unsigned long long x = 88172645463325252ULL;
    uint64_t requests = 0;
    for (int i = 0; i < 100000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        int v = (int)(x >> 33);
        switch (x % 6) {
        case 0:
            sk_metrics_request(m, (enum sk_metrics_route)(v % 20 - 3), v % 800 - 50);
            requests++;
            break;
        case 1: sk_metrics_refusal_rc(m, v % 40 - 10); break;
        case 2: sk_metrics_redis_rtt(m, (double)(v % 3000000) / 1e6 - 0.5); break;
        case 3: sk_metrics_batch(m, (size_t)v % 5000); break;
        case 4: sk_metrics_inflight(m, v % 3 - 1); break;
        default: sk_metrics_refusal_extra(m, (enum sk_metrics_extra)(v % 8 - 2)); break;
        }
    }
    size_t len;
    char *t = sk_metrics_render_alloc(m, &len);
    CHECK(t != NULL);
    check_exposition(t);
    /* the request samples add up to the calls made */
    uint64_t sum = 0;
    for (const char *p = t; (p = strstr(p, "\nseckill_http_requests_total{")) != NULL; p++)
        sum += strtoull(strchr(p, '}') + 2, NULL, 10);
    CHECK_EQ(sum, requests);
    free(t);
    sk_metrics_free(m);
}

SK_TEST(metrics_refusals_json_lists_every_reason)
{
    sk_metrics *m = sk_metrics_new();
    sk_metrics_refusal_rc(m, SK_RC_SOLD_OUT);
    sk_metrics_refusal(m, "rate_limited");
    char buf[1024];
    int n = sk_metrics_refusals_json(m, buf, sizeof buf);
    CHECK(n > 0 && (size_t)n == strlen(buf));
    CHECK(buf[0] == '{' && buf[n - 1] == '}');
    CHECK(strstr(buf, "\"sold_out\":1") != NULL);
    CHECK(strstr(buf, "\"rate_limited\":1") != NULL);
    CHECK(strstr(buf, "\"limit_exceeded\":0") != NULL);
    CHECK(strstr(buf, "\"other\":0") != NULL);
    for (size_t cap = 0; cap <= (size_t)n; cap++) {
        char small[1024];
        memset(small, 'x', sizeof small);
        CHECK_EQ(sk_metrics_refusals_json(m, small, cap), SK_ENOMEM);
        if (cap) CHECK_STR(small, "");
    }
    sk_metrics_free(m);
}

SK_TEST(metrics_attach_keeps_a_previous_process_counters_and_resets_inflight)
{
    /* a slot of a node: what a restarted process finds */
    void *slot = calloc(1, sk_metrics_bytes());
    sk_metrics *m = sk_metrics_attach(slot);
    CHECK(m != NULL);
    sk_metrics_admission(m, 7);
    sk_metrics_act_admitted(m, 1001, 3);
    sk_metrics_act_refusal_rc(m, 1001, SK_RC_SOLD_OUT);
    sk_metrics_purchase_latency(m, 0.0003);
    sk_metrics_inflight(m, 5);
    sk_metrics_free(m); /* not owned: a no-op */
    sk_metrics *again = sk_metrics_attach(slot);
    CHECK_EQ(sk_metrics_admissions(again), 7);
    CHECK_EQ(sk_metrics_act_admitted_units(again, 1001), 3);
    CHECK_EQ(sk_metrics_act_refusals(again, 1001, "sold_out"), 1);
    CHECK_EQ(sk_metrics_inflight_now(again), 0);
    const char *t = render(again);
    CHECK_LINE(t, "seckill_purchase_duration_seconds_bucket{le=\"0.0005\"} 1");
    CHECK_LINE(t, "seckill_activity_admitted_units_total{activity=\"1001\"} 3");
    CHECK_LINE(t, "seckill_activity_refusals_total{activity=\"1001\",reason=\"sold_out\"} 1");
    free(slot);
    /* memory that never held a registry is laid out afresh */
    void *junk = malloc(sk_metrics_bytes());
    memset(junk, 0x5a, sk_metrics_bytes());
    m = sk_metrics_attach(junk);
    CHECK_EQ(sk_metrics_admissions(m), 0);
    check_exposition(render(m));
    free(junk);
}

SK_TEST(metrics_per_activity_rows_count_only_known_activities_and_stay_bounded)
{
    sk_metrics *m = sk_metrics_new();
    /* unknown_activity and busy prove nothing about the id: no row */
    sk_metrics_act_refusal_rc(m, 42, SK_RC_UNKNOWN_ACTIVITY);
    sk_metrics_act_refusal_rc(m, 43, SK_RC_BUSY);
    sk_metrics_act_refusal_extra(m, 44, SK_MEXTRA_UNAVAILABLE);
    CHECK(strstr(render(m), "seckill_activity_") == NULL);
    /* a known one counts every reason, extras too */
    sk_metrics_act_admitted(m, 42, 2);
    sk_metrics_act_refusal_rc(m, 42, SK_RC_BUSY);
    sk_metrics_act_refusal_extra(m, 42, SK_MEXTRA_UNAVAILABLE);
    CHECK_EQ(sk_metrics_act_refusals(m, 42, "busy"), 1);
    CHECK_EQ(sk_metrics_act_refusals(m, 42, "unavailable"), 1);
    /* at most SK_METRICS_ACTS rows, the least recently used reused */
    for (uint64_t id = 100; id < 100 + 2 * SK_METRICS_ACTS; id++)
        sk_metrics_act_admitted(m, id, 1);
    int rows = 0;
    for (const char *p = render(m); (p = strstr(p, "seckill_activity_admitted_units_total{")); p++)
        rows++;
    CHECK_EQ(rows, SK_METRICS_ACTS);
    CHECK_EQ(sk_metrics_act_admitted_units(m, 100 + 2 * SK_METRICS_ACTS - 1), 1);
    CHECK_EQ(sk_metrics_act_admitted_units(m, 42), 0); /* the oldest went */
    /* merge adds rows by id */
    sk_metrics *b = sk_metrics_new();
    sk_metrics_act_admitted(b, 100 + 2 * SK_METRICS_ACTS - 1, 4);
    CHECK_EQ(sk_metrics_merge(b, m), 0);
    CHECK_EQ(sk_metrics_act_admitted_units(b, 100 + 2 * SK_METRICS_ACTS - 1), 5);
    sk_metrics_free(b);
    sk_metrics_free(m);
}

/* The waiting room's series (docs/waiting-room.md) in the node-wide scheme:
 * pass counters are summed over the processes' registries, per activity and
 * in total; the queue's gauges (length, places holding a pass, pace) are
 * Redis's figures as some process last saw them, so merge keeps the newest
 * observation and never adds them up. Without a waiting room nothing of it
 * is rendered. */
SK_TEST(metrics_waiting_room_passes_sum_and_queue_gauges_keep_the_newest)
{
    sk_metrics *a = sk_metrics_new(), *b = sk_metrics_new(), *none = sk_metrics_new();
    sk_metrics_act_admitted(none, 7, 1);
    const char *t0 = render(none);
    CHECK(strstr(t0, "seckill_queue") == NULL && strstr(t0, "_queue_passes") == NULL);
    sk_metrics_queue_passes(a, 7, 3, 0, 1);
    sk_metrics_queue_passes(b, 7, 2, 1, 0);
    sk_metrics_queue_passes(b, 8, 5, 0, 0);
    sk_metrics_queue_seen(a, 7, 100, 10, 5, 2000);
    sk_metrics_queue_seen(a, 7, 1, 1, 1, 1999); /* older news: ignored */
    sk_metrics_queue_seen(b, 7, 90, 8, 5, 1000);
    sk_metrics_queue_seen(b, 8, 40, 5, 50, 1500);
    CHECK_EQ(sk_metrics_queue_length(a, 7), 100);
    CHECK_EQ(sk_metrics_merge(a, b), 0);
    CHECK_EQ(sk_metrics_queue_passes_n(a, 0, "issued"), 10);
    CHECK_EQ(sk_metrics_queue_passes_n(a, 0, "spent"), 1);
    CHECK_EQ(sk_metrics_queue_passes_n(a, 0, "expired"), 1);
    CHECK_EQ(sk_metrics_queue_passes_n(a, 7, "issued"), 5);
    CHECK_EQ(sk_metrics_queue_passes_n(a, 8, "issued"), 5);
    CHECK_EQ(sk_metrics_queue_passes_n(a, 7, "bought"), 0);
    CHECK_EQ(sk_metrics_queue_length(a, 7), 100); /* the newest, not 190 */
    CHECK_EQ(sk_metrics_queue_length(a, 8), 40);
    CHECK_EQ(sk_metrics_queue_length(a, 9), -1);
    const char *t = render(a);
    CHECK_LINE(t, "seckill_queue_passes_total{event=\"issued\"} 10");
    CHECK_LINE(t, "seckill_queue_passes_total{event=\"expired\"} 1");
    CHECK_LINE(t, "seckill_activity_queue_passes_total{activity=\"7\",event=\"spent\"} 1");
    CHECK_LINE(t, "seckill_activity_queue_passes_total{activity=\"8\",event=\"issued\"} 5");
    CHECK_LINE(t, "seckill_queue_length{activity=\"7\"} 100");
    CHECK_LINE(t, "seckill_queue_passes_issued{activity=\"7\"} 10");
    CHECK_LINE(t, "seckill_queue_pace{activity=\"8\"} 50");
    /* the other way round: still the newest */
    sk_metrics *c = sk_metrics_new();
    sk_metrics_queue_seen(c, 7, 90, 8, 5, 1000);
    CHECK_EQ(sk_metrics_merge(c, a), 0);
    CHECK_EQ(sk_metrics_queue_length(c, 7), 100);
    CHECK_EQ(sk_metrics_queue_passes_n(c, 0, "issued"), 10);
    sk_metrics_free(a);
    sk_metrics_free(b);
    sk_metrics_free(c);
    sk_metrics_free(none);
}
