/* bench_http_burst.c - the open-loop phase of `seckill-bench http`
 * (bench_http_burst.h): a burst far above capacity, step by step. */
#include "bench/bench_http_burst.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "bench/bench_child.h"
#include "bench/bench_util.h"
#include "core/clock.h"
#include "load/load.h"
#include "spawn/netutil.h"

#define ADMIN_TOKEN "bench-http-burst-admin-token"
#define ACT 11
#define BIG_STOCK 100000000
#define HEALTH_RATE 100 /* /healthz probes per second during a step */
#define HEALTH_CONNS 4

static const double mults[] = {0.5, 1, 1.5, 2, 3, 5};
#define N_STEPS (sizeof mults / sizeof mults[0])

/* What one run of the generator measured. */
struct run {
    double elapsed, answered, admitted, refused, overloaded, busy, other;
    uint64_t ok_p50, ok_p99, ok_p999, ref_p50, ref_p99, ref_p999, ref_send_p99, all_p99;
    uint64_t errors, backlog, duplicates, over_limit;
};

struct step {
    double mult, offered;
    struct run serve, nginx;
    uint64_t health_p99, health_n;
    int ran, nginx_ran;
};

static void base_opts(struct sk_load_opts *lo, const struct sk_bench_burst_opts *o, int port)
{
    sk_load_opts_defaults(lo);
    lo->port = port;
    snprintf(lo->host, sizeof lo->host, "127.0.0.1");
    snprintf(lo->url, sizeof lo->url, "http://127.0.0.1:%d", port);
    lo->activity = ACT;
    lo->connections = o->connections;
    lo->threads = o->threads;
    lo->duration_ms = (int64_t)(o->step_s * 1000);
    lo->timeout_ms = 10000;
    lo->progress = 0;
    lo->users = 1000000000;
    lo->limit = 1;
}

static double code_n(const struct sk_load_result *r, const char *code)
{
    for (size_t i = 0; i < r->n_refusals; i++)
        if (strcmp(r->refusals[i].code, code) == 0) return (double)r->refusals[i].n;
    return 0;
}

/* One generator run into out; 0, or -1 (err) when it could not run. */
static int measure(const struct sk_load_opts *lo, struct run *out, char *err, size_t cap)
{
    struct sk_load_result r;
    if (sk_load_run(lo, &r, err, cap) < 0) return -1;
    double t = r.elapsed_s > 0 ? r.elapsed_s : 1;
    double refused = 0;
    for (size_t i = 0; i < r.n_refusals; i++)
        refused += (double)r.refusals[i].n;
    refused += (double)r.refusals_other;
    double ov = code_n(&r, "overloaded"), busy = code_n(&r, "busy");
    *out = (struct run){
        .elapsed = t,
        .answered = (double)r.completed / t,
        .admitted = (double)r.status[200] / t,
        .refused = refused / t,
        .overloaded = ov / t,
        .busy = busy / t,
        .other = (refused - ov - busy) / t,
        .ok_p50 = sk_hist_percentile(&r.latency_ok, 50),
        .ok_p99 = sk_hist_percentile(&r.latency_ok, 99),
        .ok_p999 = sk_hist_percentile(&r.latency_ok, 99.9),
        .ref_p50 = sk_hist_percentile(&r.latency_refused, 50),
        .ref_p99 = sk_hist_percentile(&r.latency_refused, 99),
        .ref_p999 = sk_hist_percentile(&r.latency_refused, 99.9),
        .ref_send_p99 = sk_hist_percentile(&r.latency_busy, 99),
        .all_p99 = sk_hist_percentile(&r.latency, 99),
        .errors = r.err_connect + r.err_closed + r.err_timeout + r.err_protocol,
        .backlog = r.backlog_at_end,
        .duplicates = r.duplicate_orders,
        .over_limit = r.users_over_limit,
    };
    sk_load_result_free(&r);
    return 0;
}

/* /healthz probed open loop while a step runs (a thread of its own). */
struct health {
    struct sk_load_opts lo;
    uint64_t p99, n;
    int rc;
};

static void *health_main(void *arg)
{
    struct health *h = arg;
    struct sk_load_result r;
    char err[200];
    h->rc = sk_load_run(&h->lo, &r, err, sizeof err);
    if (h->rc == 0) {
        h->p99 = sk_hist_percentile(&r.latency, 99);
        h->n = r.completed;
        sk_load_result_free(&r);
    }
    return NULL;
}

static int start_serve(struct sk_bench_child *c, const struct sk_bench_burst_opts *o, char *err,
                       size_t cap)
{
    char listen[64], log[400], db[400], target[24];
    c->port = sk_net_free_port();
    snprintf(listen, sizeof listen, "127.0.0.1:%d", c->port);
    snprintf(log, sizeof log, "%s/serve-burst.log", o->dir);
    snprintf(db, sizeof db, "sqlite:%s/burst.db", o->dir);
    snprintf(target, sizeof target, "%" PRId64, o->admit_target_ms);
    char *argv[] = {(char *)sk_bench_seckill_bin(),
                    "serve",
                    "--listen",
                    listen,
                    "--redis",
                    (char *)o->redis_url,
                    "--db",
                    db,
                    "--admin-token",
                    ADMIN_TOKEN,
                    "--processes",
                    "1",
                    "--role",
                    "api",
                    "--log-level",
                    "warn",
                    "--admit-target-ms",
                    target,
                    NULL};
    c->pid = sk_bench_spawn(argv, log);
    if (c->pid < 0 || sk_bench_child_wait_ready(c, "/healthz", o->interrupted) < 0) {
        snprintf(err, cap, "seckill serve did not start (see %.300s)", log);
        return -1;
    }
    char body[400], out[1024], path[128];
    const char *admin = "Authorization: Bearer " ADMIN_TOKEN "\r\n";
    snprintf(body, sizeof body,
             "{\"id\":%d,\"name\":\"bench burst\",\"stock\":%d,\"per_user_limit\":1,"
             "\"start\":\"2020-01-01T00:00:00Z\",\"end\":\"2099-01-01T00:00:00Z\"}",
             ACT, BIG_STOCK);
    int st =
        sk_bench_http_call(c->port, "POST", "/api/v1/activities", admin, body, out, sizeof out);
    const char *steps[] = {"preheat", "open"};
    for (int k = 0; st == 201 && k < 2; k++) {
        snprintf(path, sizeof path, "/api/v1/activities/%d/%s", ACT, steps[k]);
        if (sk_bench_http_call(c->port, "POST", path, admin, NULL, out, sizeof out) != 200) st = -2;
    }
    if (st == 201) return 0;
    snprintf(err, cap, "activity set-up failed: %.300s", out);
    return -1;
}

static void ms(char *buf, size_t cap, uint64_t us)
{
    if (us >= 10000)
        snprintf(buf, cap, "%.0f", (double)us / 1000);
    else
        snprintf(buf, cap, "%.1f", (double)us / 1000);
}

static void print_table(const struct sk_bench_burst_opts *o, double cap_rps, const struct step *s,
                        size_t n)
{
    printf("\nopen loop, POST /api/v1/activities/{id}/purchase, serve --role api "
           "--admit-target-ms %" PRId64 "%s, %" PRId64 " connections, %.0f s a step;\n"
           "closed-loop capacity %.0f/s (%" PRId64 " connections); latencies in ms from the "
           "intended send time\n",
           o->admit_target_ms, o->admit_target_ms ? "" : " (off)", o->connections, o->step_s,
           cap_rps, o->cl_connections);
    printf("%4s %9s %10s %10s %10s %10s %8s %19s %19s %8s %7s | %10s %8s\n", "x", "offered/s",
           "answered/s", "admitted/s", "overload/s", "busy/s", "other/s", "admit p50/p99/p99.9",
           "refuse p50/p99/p99.9", "hz p99", "errors", "nginx ans/s", "p99");
    for (size_t i = 0; i < n; i++) {
        const struct step *t = &s[i];
        if (!t->ran) continue;
        char a[16], b[16], b9[16], c[16], d[16], d9[16], h[16], np[16];
        ms(a, sizeof a, t->serve.ok_p50);
        ms(b, sizeof b, t->serve.ok_p99);
        ms(b9, sizeof b9, t->serve.ok_p999);
        ms(c, sizeof c, t->serve.ref_p50);
        ms(d, sizeof d, t->serve.ref_p99);
        ms(d9, sizeof d9, t->serve.ref_p999);
        ms(h, sizeof h, t->health_p99);
        ms(np, sizeof np, t->nginx.all_p99);
        char ap[48], rp[48], na[16];
        snprintf(ap, sizeof ap, "%s/%s/%s", a, b, b9);
        snprintf(rp, sizeof rp, t->serve.refused > 0 ? "%s/%s/%s" : "-", c, d, d9);
        snprintf(na, sizeof na, "%.0f", t->nginx.answered);
        printf("%4.1f %9.0f %10.0f %10.0f %10.0f %10.0f %8.0f %19s %19s %8s %7" PRIu64
               " | %10s %8s\n",
               t->mult, t->offered, t->serve.answered, t->serve.admitted, t->serve.overloaded,
               t->serve.busy, t->serve.other, ap, rp, h, t->serve.errors, t->nginx_ran ? na : "-",
               t->nginx_ran ? np : "-");
    }
    printf("targets (issue): at 2x and 3x admitted/s >= 90 %% of capacity, admitted p99 <= 50 ms, "
           "refusals p99 <= 5 ms, no errors; at 5x /healthz p99 <= 50 ms, admitted >= 80 %%\n");
    for (size_t i = 0; i < n; i++) {
        const struct step *t = &s[i];
        if (!t->ran || t->mult < 2) continue;
        double share = cap_rps > 0 ? t->serve.admitted / cap_rps : 0;
        if (t->mult < 4)
            printf("  %.0fx: admitted %.0f %% of capacity (%s), admitted p99 %.1f ms (%s), "
                   "refusals p99 %.1f ms (%s), errors %" PRIu64 " (%s)\n",
                   t->mult, share * 100, share >= 0.9 ? "met" : "missed",
                   (double)t->serve.ok_p99 / 1000, t->serve.ok_p99 <= 50000 ? "met" : "missed",
                   (double)t->serve.ref_p99 / 1000,
                   t->serve.refused == 0 || t->serve.ref_p99 <= 5000 ? "met" : "missed",
                   t->serve.errors, t->serve.errors == 0 ? "met" : "missed");
        else
            printf("  %.0fx: /healthz p99 %.1f ms (%s), admitted %.0f %% of capacity (%s)\n",
                   t->mult, (double)t->health_p99 / 1000, t->health_p99 <= 50000 ? "met" : "missed",
                   share * 100, share >= 0.8 ? "met" : "missed");
    }
}

static json_t *run_json(const struct run *r)
{
    return json_pack(
        "{s:f,s:f,s:f,s:f,s:f,s:f,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "answered_per_s",
        r->answered, "admitted_per_s", r->admitted, "refused_per_s", r->refused, "overloaded_per_s",
        r->overloaded, "busy_per_s", r->busy, "other_per_s", r->other, "admitted_p50_us",
        (json_int_t)r->ok_p50, "admitted_p99_us", (json_int_t)r->ok_p99, "admitted_p999_us",
        (json_int_t)r->ok_p999, "refused_p50_us", (json_int_t)r->ref_p50, "refused_p99_us",
        (json_int_t)r->ref_p99, "refused_p999_us", (json_int_t)r->ref_p999,
        "refused_p99_from_send_us", (json_int_t)r->ref_send_p99, "p99_us", (json_int_t)r->all_p99,
        "errors", (json_int_t)r->errors, "backlog_at_end", (json_int_t)r->backlog);
}

int sk_bench_http_burst(const struct sk_bench_burst_opts *o, json_t **out)
{
    *out = NULL;
    struct sk_bench_child serve = {0};
    char err[400] = "";
    struct step steps[N_STEPS];
    memset(steps, 0, sizeof steps);
    int failed = 0;
    double cap_rps = 0;
    if (start_serve(&serve, o, err, sizeof err) < 0) {
        failed = 1;
        goto done;
    }
    struct sk_load_opts lo;
    /* closed-loop capacity: every request a new buyer, admitted */
    base_opts(&lo, o, serve.port);
    lo.connections = o->cl_connections;
    lo.user_base = 1;
    struct run cl;
    if (measure(&lo, &cl, err, sizeof err) < 0) {
        failed = 1;
        goto done;
    }
    cap_rps = cl.admitted;
    if (cap_rps < 100) {
        snprintf(err, sizeof err, "closed-loop capacity %.0f/s: serve admitted next to nothing",
                 cap_rps);
        failed = 1;
        goto done;
    }
    for (size_t i = 0; i < N_STEPS && !atomic_load(o->interrupted); i++) {
        struct step *t = &steps[i];
        t->mult = mults[i];
        t->offered = mults[i] * cap_rps;
        base_opts(&lo, o, serve.port);
        lo.rate = t->offered;
        lo.user_base = (uint64_t)(i + 1) * 100000000;
        struct health h = {.rc = -1};
        base_opts(&h.lo, o, serve.port);
        snprintf(h.lo.path, sizeof h.lo.path, "/healthz");
        snprintf(h.lo.method, sizeof h.lo.method, "GET");
        h.lo.order_check = 0;
        h.lo.rate = HEALTH_RATE;
        h.lo.connections = HEALTH_CONNS;
        h.lo.threads = 1;
        pthread_t ht;
        int have_h = pthread_create(&ht, NULL, health_main, &h) == 0;
        int rc = measure(&lo, &t->serve, err, sizeof err);
        if (have_h) pthread_join(ht, NULL);
        if (rc < 0) {
            failed = 1;
            break;
        }
        t->ran = 1;
        t->health_p99 = h.rc == 0 ? h.p99 : 0;
        t->health_n = h.rc == 0 ? h.n : 0;
        if (t->serve.duplicates || t->serve.over_limit) {
            fprintf(stderr,
                    "seckill: bench http: %.1fx: %" PRIu64 " duplicate order ids, %" PRIu64
                    " buyers over the limit\n",
                    t->mult, t->serve.duplicates, t->serve.over_limit);
            failed = 1;
        }
        if (o->nginx_port > 0 && !atomic_load(o->interrupted)) {
            base_opts(&lo, o, o->nginx_port);
            lo.rate = t->offered;
            lo.order_check = 0;
            t->nginx_ran = measure(&lo, &t->nginx, err, sizeof err) == 0;
            err[0] = 0;
        }
    }
    if (serve.pid > 0 && waitpid(serve.pid, NULL, WNOHANG) == serve.pid) {
        serve.pid = 0;
        snprintf(err, sizeof err, "seckill serve died during the run (see %s/serve-burst.log)",
                 o->dir);
        failed = 1;
    }
    if (!o->json) print_table(o, cap_rps, steps, N_STEPS);
    json_t *j = json_object(), *arr = json_array();
    if (j && arr) {
        json_object_set_new(j, "admit_target_ms", json_integer((json_int_t)o->admit_target_ms));
        json_object_set_new(j, "connections", json_integer((json_int_t)o->connections));
        json_object_set_new(j, "step_s", json_real(o->step_s));
        json_object_set_new(j, "closed_loop_capacity_per_s", json_real(cap_rps));
        for (size_t i = 0; i < N_STEPS; i++) {
            if (!steps[i].ran) continue;
            json_t *s = json_pack("{s:f,s:f,s:o,s:I}", "multiple", steps[i].mult, "offered_per_s",
                                  steps[i].offered, "serve", run_json(&steps[i].serve),
                                  "healthz_p99_us", (json_int_t)steps[i].health_p99);
            if (s && steps[i].nginx_ran)
                json_object_set_new(s, "static_reference", run_json(&steps[i].nginx));
            if (s) json_array_append_new(arr, s);
        }
        json_object_set_new(j, "steps", arr);
        *out = j;
    } else {
        json_decref(j);
        json_decref(arr);
    }
done:
    if (err[0]) fprintf(stderr, "seckill: bench http: open loop: %s\n", err);
    sk_bench_child_stop(&serve);
    return failed ? -1 : 0;
}
