/* test_ops_view.c - the operator's view of a node: /metrics sums every
 * process of `seckill serve` (HTTP processes and the order worker) and never
 * goes backwards when a process is killed and replaced; --ops-listen keeps
 * the operations routes off the buyers' port; the dashboard, loaded by a
 * real headless Chromium during a sale, shows what the engine reports. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <sqlite3.h>

#include "core/clock.h"
#include "engine/keys.h"
#include "redis/redis_conn.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/http_client.h"
#include "support/proc_watch.h"

/* Value of the sample `series` (exact name and labels) in Prometheus text;
 * -1 when absent. */
static long long sample(const char *text, const char *series)
{
    size_t n = strlen(series);
    for (const char *p = text; (p = strstr(p, series)) != NULL; p++)
        if ((p == text || p[-1] == '\n') && p[n] == ' ') return strtoll(p + n + 1, NULL, 10);
    return -1;
}

/* Every counter sample of a scrape (counter families, histogram buckets
 * and counts) as "series value" lines, for comparing two scrapes. */
struct samples {
    char name[512][400];
    double v[512];
    int n;
};
static void counters_of(const char *text, struct samples *s)
{
    s->n = 0;
    char type[32] = "";
    for (const char *line = text; *line;) {
        const char *nl = strchr(line, '\n');
        if (!nl) break;
        char l[400];
        size_t len = (size_t)(nl - line) < sizeof l - 1 ? (size_t)(nl - line) : sizeof l - 1;
        memcpy(l, line, len);
        l[len] = 0;
        line = nl + 1;
        if (!strncmp(l, "# TYPE ", 7)) {
            sscanf(l + 7, "%*s %31s", type);
            continue;
        }
        if (l[0] == '#' || !l[0]) continue;
        int counter = !strcmp(type, "counter") || (!strcmp(type, "histogram") &&
                                                   (strstr(l, "_bucket{") || strstr(l, "_count ")));
        char *sp = strrchr(l, ' ');
        if (!counter || !sp || s->n >= 512) continue;
        *sp = 0;
        snprintf(s->name[s->n], sizeof s->name[0], "%s", l);
        s->v[s->n++] = strtod(sp + 1, NULL);
    }
}

/* Every counter of before is in after with a value at least as high. */
static void check_not_lower(const struct samples *before, const struct samples *after)
{
    for (int i = 0; i < before->n; i++) {
        int found = 0;
        for (int j = 0; j < after->n && !found; j++)
            if (!strcmp(before->name[i], after->name[j])) {
                found = 1;
                CHECK_MSG(after->v[j] >= before->v[i], "%s went back from %.0f to %.0f",
                          before->name[i], before->v[i], after->v[j]);
            }
        CHECK_MSG(found, "%s vanished", before->name[i]);
    }
    CHECK(before->n > 20);
}

static int admin_post(int port, const char *path, const char *body, struct sk_th_resp *r)
{
    struct sk_th_http c;
    sk_th_http_open(&c, port);
    int st = sk_th_http_req(&c, "POST", path, "Authorization: Bearer " SK_TH_ADMIN_TOKEN "\r\n",
                            body, r);
    sk_th_http_close(&c);
    return st;
}

/* Creates activity id from its JSON definition, preheats and opens it. */
static void create_and_open(int port, uint64_t id, const char *def)
{
    char path[96];
    struct sk_th_resp r;
    CHECK_EQ(admin_post(port, "/api/v1/activities", def, &r), 201);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/preheat", id);
    CHECK_EQ(admin_post(port, path, NULL, &r), 200);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/open", id);
    CHECK_EQ(admin_post(port, path, NULL, &r), 200);
}

/* Creates, preheats and opens a new activity (window: 2020 .. 2099) of
 * `stock` units, one per buyer. Returns its id. */
static uint64_t open_sale(int port, long long stock)
{
    uint64_t id = sk_th_unique_id();
    char body[400];
    snprintf(body, sizeof body,
             "{\"id\":%" PRIu64 ",\"name\":\"ops sale %" PRIu64 "\",\"stock\":%lld,"
             "\"per_user_limit\":1,\"start\":\"2020-01-01T00:00:00Z\","
             "\"end\":\"2099-01-01T00:00:00Z\"}",
             id, id, stock);
    create_and_open(port, id, body);
    return id;
}

/* Purchases by users base+1..base+n over `conns` connections, each opened
 * anew so the kernel spreads them over the processes sharing the port.
 * Returns how many were accepted; every answer is a 200 or a 409. */
static int buy_many(int port, uint64_t aid, uint64_t base, int n, int conns)
{
    int accepted = 0, per = (n + conns - 1) / conns;
    char path[96];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", aid);
    for (int c = 0; c < conns; c++) {
        struct sk_th_http h;
        sk_th_http_open(&h, port);
        for (int i = c * per; i < (c + 1) * per && i < n; i++) {
            char hdr[64];
            struct sk_th_resp r;
            snprintf(hdr, sizeof hdr, "X-User-Id: %" PRIu64 "\r\n", base + (uint64_t)i + 1);
            int st = sk_th_http_req(&h, "POST", path, hdr, "{\"quantity\":1}", &r);
            CHECK_MSG(st == 200 || st == 409, "purchase answered %d: %s", st, r.body);
            accepted += st == 200;
        }
        sk_th_http_close(&h);
    }
    return accepted;
}

/* Children of pid, from /proc. */
static int children(pid_t pid, pid_t *out, int cap)
{
    return sk_th_proc_children(pid, NULL, out, cap);
}

/* Kills child `victim` of the supervisor with SIGKILL and waits until a new
 * process has taken its place. */
static void kill_and_wait_replacement(pid_t supervisor, pid_t victim, int want)
{
    CHECK_EQ(kill(victim, SIGKILL), 0);
    int64_t deadline = sk_mono_ms() + 10000;
    for (;;) {
        pid_t now[8];
        int m = children(supervisor, now, 8), gone = 1;
        for (int i = 0; i < m; i++)
            if (now[i] == victim) gone = 0;
        if (m == want && gone) return;
        CHECK_MSG(sk_mono_ms() < deadline, "no replacement for %d", (int)victim);
        sk_th_nap_ms(10);
    }
}

/* Starts serve (two processes) with an ops listener on a free port:
 * returns that port; its address ("127.0.0.1:port") into addr. */
static int serve_with_ops(struct sk_th_serve *s, char *addr, size_t cap)
{
    int ops = sk_th_free_port();
    snprintf(addr, cap, "127.0.0.1:%d", ops);
    const char *extra[] = {"--ops-listen", addr, "--processes", "2", NULL};
    sk_th_serve_start(s, sk_th_redis_url(), extra);
    return ops;
}

/* The metric text of the node until cond(text) holds (bounded). */
static const char *scrape_until(int port, int (*cond)(const char *, void *), void *arg)
{
    static char text[1 << 20];
    int64_t deadline = sk_mono_ms() + 15000;
    for (;;) {
        CHECK_EQ(sk_th_http_get_big(port, "/metrics", text, sizeof text), 200);
        if (cond(text, arg)) return text;
        CHECK_MSG(sk_mono_ms() < deadline, "metrics never got there:\n%.3000s", text);
        sk_th_nap_ms(50);
    }
}

struct want {
    const char *series;
    long long value;
};
static int has_value(const char *text, void *arg)
{
    const struct want *w = arg;
    for (; w->series; w++)
        if (sample(text, w->series) != w->value) return 0;
    return 1;
}

SK_TEST(ops_metrics_report_the_node_and_never_go_back_when_processes_restart)
{
    struct sk_th_serve s;
    const char *extra[] = {"--processes", "2", NULL};
    sk_th_serve_start(&s, sk_th_redis_url(), extra);
    uint64_t aid = open_sale(s.port, 1000);
    int accepted = buy_many(s.port, aid, 0, 400, 16);
    CHECK_EQ(accepted, 400);
    /* every scrape, whichever process answers it, reports the node */
    char act[96];
    snprintf(act, sizeof act, "seckill_activity_admitted_units_total{activity=\"%" PRIu64 "\"}",
             aid);
    static char text[1 << 20];
    for (int i = 0; i < 12; i++) {
        CHECK_EQ(sk_th_http_get_big(s.port, "/metrics", text, sizeof text), 200);
        CHECK_EQ(sample(text, "seckill_admissions_total"), accepted);
        CHECK_EQ(sample(text, act), accepted);
        CHECK_EQ(sample(text, "seckill_node_processes{kind=\"api\"}"), 2);
    }
    /* the worker's counters: every admitted order persisted */
    struct want persisted[] = {{"seckill_orders_persisted_total", accepted}, {NULL, 0}};
    struct samples before, after;
    counters_of(scrape_until(s.port, has_value, persisted), &before);

    /* kill each process in turn (two HTTP processes, then the worker): no
     * counter of any scrape afterwards is lower than before */
    pid_t kids[8];
    CHECK_EQ(children(s.pid, kids, 8), 3);
    for (int victim = 0; victim < 3; victim++) {
        kill_and_wait_replacement(s.pid, kids[victim], 3); /* the first generation, each once */
        int more = buy_many(s.port, aid, 1000 + (uint64_t)victim * 100, 20, 4);
        CHECK_EQ(more, 20);
        accepted += more;
        for (int i = 0; i < 6; i++) {
            CHECK_EQ(sk_th_http_get_big(s.port, "/metrics", text, sizeof text), 200);
            CHECK_EQ(sample(text, "seckill_admissions_total"), accepted);
            counters_of(text, &after);
            check_not_lower(&before, &after);
        }
        struct want all[] = {{"seckill_orders_persisted_total", accepted},
                             {"seckill_node_processes{kind=\"api\"}", 2},
                             {"seckill_node_processes{kind=\"worker\"}", 1},
                             {NULL, 0}};
        counters_of(scrape_until(s.port, has_value, all), &after);
        check_not_lower(&before, &after);
        before = after;
    }
    CHECK_EQ(sk_th_http_get_big(s.port, "/metrics", text, sizeof text), 200);
    CHECK_EQ(sample(text, "seckill_node_process_starts_total{kind=\"api\"}"), 4);
    CHECK_EQ(sample(text, "seckill_node_process_starts_total{kind=\"worker\"}"), 2);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
}

SK_TEST(ops_worker_figures_appear_on_the_node_metrics)
{
    struct sk_th_serve s;
    sk_th_serve_start(&s, sk_th_redis_url(), NULL);
    uint64_t aid = open_sale(s.port, 50);
    CHECK_EQ(buy_many(s.port, aid, 0, 80, 4), 50); /* 30 refused: sold out */
    char rem[128], orders[128], backlog[128], dlq[128], sold[128];
    snprintf(rem, sizeof rem, "seckill_activity_stock_remaining{activity=\"%" PRIu64 "\"}", aid);
    snprintf(orders, sizeof orders,
             "seckill_activity_orders{activity=\"%" PRIu64 "\",status=\"created\"}", aid);
    snprintf(backlog, sizeof backlog, "seckill_activity_stream_backlog{activity=\"%" PRIu64 "\"}",
             aid);
    snprintf(dlq, sizeof dlq, "seckill_activity_dead_letters{activity=\"%" PRIu64 "\"}", aid);
    snprintf(sold, sizeof sold,
             "seckill_activity_refusals_total{activity=\"%" PRIu64 "\",reason=\"sold_out\"}", aid);
    struct want w[] = {{"seckill_orders_persisted_total", 50},
                       {"seckill_worker_batches_total", -2}, /* replaced below */
                       {NULL, 0}};
    w[1] = (struct want){rem, 0};
    struct want w2[] = {{orders, 50}, {backlog, 0}, {dlq, 0}, {sold, 30}, {NULL, 0}};
    const char *t = scrape_until(s.port, has_value, w);
    t = scrape_until(s.port, has_value, w2);
    CHECK(sample(t, "seckill_worker_batches_total") >= 1);
    CHECK(sample(t, "seckill_worker_acked_total") == 50);
    CHECK(sample(t, "seckill_sweeper_passes_total") >= 1);
    CHECK_EQ(sample(t, "seckill_orders_dead_lettered_total"), 0);
    CHECK(strstr(t, "# TYPE seckill_reconcile_runs_total counter\n") != NULL);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
}

/* The age of the oldest order not yet persisted, per activity: it grows
 * while the database refuses the worker's writes (another writer holds
 * SQLite's lock; readers go on, so the sampler still lists the
 * activities), and it is 0 once the worker drained. */
static double age_of(const char *text, uint64_t aid)
{
    char series[128];
    snprintf(series, sizeof series,
             "seckill_activity_oldest_unpersisted_seconds{activity=\"%" PRIu64 "\"} ", aid);
    const char *p = strstr(text, series);
    return p ? strtod(p + strlen(series), NULL) : -2;
}
struct age_want {
    uint64_t aid;
    double at_least, at_most;
};
static int age_between(const char *text, void *arg)
{
    const struct age_want *w = arg;
    double a = age_of(text, w->aid);
    return a >= w->at_least && a <= w->at_most;
}

SK_TEST(ops_metrics_show_the_age_of_the_oldest_unpersisted_order)
{
    struct sk_th_serve s;
    sk_th_serve_start(&s, sk_th_redis_url(), NULL);
    uint64_t aid = open_sale(s.port, 50);
    struct age_want idle = {aid, 0, 0};
    scrape_until(s.port, age_between, &idle);
    sqlite3 *db;
    CHECK_EQ(sqlite3_open(s.db + strlen("sqlite:"), &db), SQLITE_OK);
    CHECK_EQ(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    int64_t t0 = sk_mono_ms();
    CHECK_EQ(buy_many(s.port, aid, 0, 10, 2), 10);
    struct age_want stuck = {aid, 1.5, 60};
    const char *t = scrape_until(s.port, age_between, &stuck);
    /* the age is the oldest order's, not more than the time since it was bought */
    CHECK(age_of(t, aid) <= (double)(sk_mono_ms() - t0) / 1000 + 0.5);
    char backlog[128];
    snprintf(backlog, sizeof backlog, "seckill_activity_stream_backlog{activity=\"%" PRIu64 "\"}",
             aid);
    CHECK_EQ(sample(t, backlog), 10);
    CHECK_EQ(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    scrape_until(s.port, age_between, &idle);
    char orders[128];
    snprintf(orders, sizeof orders,
             "seckill_activity_orders{activity=\"%" PRIu64 "\",status=\"created\"}", aid);
    struct want w[] = {{orders, 10}, {backlog, 0}, {NULL, 0}};
    scrape_until(s.port, has_value, w);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
}

SK_TEST(ops_listen_serves_the_operations_routes_there_only)
{
    struct sk_th_serve s;
    char addr[64];
    int ops = serve_with_ops(&s, addr, sizeof addr);
    uint64_t aid = open_sale(s.port, 10);
    static char body[1 << 20];
    const char *ops_routes[] = {"/metrics", "/healthz", "/readyz", "/", "/dashboard.json"};
    for (size_t i = 0; i < sizeof ops_routes / sizeof ops_routes[0]; i++) {
        for (int k = 0; k < 4; k++) { /* fresh connections: both processes */
            CHECK_MSG(sk_th_http_get_big(s.port, ops_routes[i], body, sizeof body) == 404,
                      "%s answered on the buyers' port", ops_routes[i]);
            CHECK_MSG(strstr(body, "\"not_found\"") != NULL, "%s", body);
            CHECK_MSG(sk_th_http_get_big(ops, ops_routes[i], body, sizeof body) == 200,
                      "%s not on the ops port", ops_routes[i]);
        }
    }
    /* the buyers' routes stay on the buyers' port only */
    char path[96];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64, aid);
    CHECK_EQ(sk_th_http_get_big(s.port, path, body, sizeof body), 200);
    CHECK_EQ(sk_th_http_get_big(ops, path, body, sizeof body), 404);
    CHECK_EQ(buy_many(s.port, aid, 0, 3, 1), 3);
    struct sk_th_http h;
    struct sk_th_resp r;
    sk_th_http_open(&h, ops);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", aid);
    CHECK_EQ(sk_th_http_req(&h, "POST", path, "X-User-Id: 99\r\n", "{}", &r), 404);
    sk_th_http_close(&h);
    /* what the buyers' port did shows on the ops port */
    CHECK_EQ(sk_th_http_get_big(ops, "/metrics", body, sizeof body), 200);
    CHECK_EQ(sample(body, "seckill_admissions_total"), 3);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);

    /* the same from the environment; a busy ops port fails the start */
    char out[2048];
    char env[96];
    snprintf(env, sizeof env, "SECKILL_OPS_LISTEN=127.0.0.1:%d", s.port);
    int busy = sk_th_free_port();
    struct sk_th_serve s2;
    const char *extra2[] = {"--ops-listen", addr, NULL};
    sk_th_serve_start(&s2, sk_th_redis_url(), extra2);
    char listen[64], db[400];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", busy);
    snprintf(db, sizeof db, "sqlite:%s/busy.db", sk_th_tmpdir());
    const char *args[] = {
        "serve", "--listen", listen, "--ops-listen", addr, "--redis", sk_th_redis_url(),
        "--db",  db,         NULL};
    int rc = sk_th_run_seckill(out, sizeof out, NULL, args);
    CHECK_MSG(rc == 1 && strstr(out, "ops listener") != NULL, "rc %d: %s", rc, out);
    const char *const envs[] = {env, NULL};
    const char *args2[] = {"serve",           "--listen", addr, "--redis",
                           sk_th_redis_url(), "--db",     db,   NULL};
    rc = sk_th_run_seckill(out, sizeof out, envs, args2); /* ops = listen's port: refused */
    CHECK_MSG(rc != 0, "rc %d: %s", rc, out);
    CHECK_EQ(sk_th_serve_stop(&s2, SIGTERM), 0);
}

/* ---- the dashboard in a real browser ------------------------------------ */

/* Runs headless Chromium on url with --dump-dom; the DOM into out. */
static void chromium_dump(const char *url, char *out, size_t cap)
{
    char dir[300], file[320], profile[340];
    snprintf(dir, sizeof dir, "%s", sk_th_tmpdir());
    snprintf(file, sizeof file, "%s/dom.html", dir);
    snprintf(profile, sizeof profile, "--user-data-dir=%s/chromium-profile", dir);
    pid_t pid = sk_th_fork();
    if (pid == 0) {
        int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int devnull = open("/dev/null", O_RDWR);
        dup2(fd, 1);
        dup2(devnull, 2);
        setenv("HOME", dir, 1);
        execlp("chromium", "chromium", "--headless", "--no-sandbox", "--disable-gpu",
               "--disable-quic", "--no-first-run", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", profile,
               "--virtual-time-budget=5000", "--dump-dom", url, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    int64_t deadline = sk_mono_ms() + 90000;
    while (waitpid(pid, &st, WNOHANG) != pid) {
        if (sk_mono_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            CHECK_MSG(0, "chromium did not finish in 90 s");
        }
        sk_th_nap_ms(50);
    }
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "chromium failed (exit %d; is the Debian package chromium installed? "
              "scripts/deps.sh installs it)",
              WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    FILE *f = fopen(file, "r");
    CHECK(f != NULL);
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = 0;
    fclose(f);
}

/* The text of the element with id `id` in a DOM dump, digits only
 * (thousands separators dropped); -1 when absent. */
static long long dom_number(const char *dom, const char *id)
{
    char pat[128];
    snprintf(pat, sizeof pat, "id=\"%s\">", id);
    const char *p = strstr(dom, pat);
    if (!p) return -1;
    p += strlen(pat);
    long long v = 0;
    int digits = 0;
    for (; *p && *p != '<'; p++)
        if (*p >= '0' && *p <= '9') {
            v = v * 10 + (*p - '0');
            digits++;
        } else if (*p != ',') {
            return -1;
        }
    return digits ? v : -1;
}

/* An open sale with a waiting room (1,000 passes/s) whose buyers
 * base+1..base+n joined the queue; returns once the last of them has its
 * pass (bounded). */
static void open_queue(int port, uint64_t id, uint64_t base, int n)
{
    char body[400], path[96];
    struct sk_th_resp r;
    snprintf(body, sizeof body,
             "{\"id\":%" PRIu64 ",\"name\":\"ops queue %" PRIu64 "\",\"stock\":100,"
             "\"per_user_limit\":1,\"start\":\"2020-01-01T00:00:00Z\","
             "\"end\":\"2099-01-01T00:00:00Z\",\"waiting_room\":{\"passes_per_s\":1000}}",
             id, id);
    create_and_open(port, id, body);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/queue", id);
    struct sk_th_http h;
    sk_th_http_open(&h, port);
    char hdr[64];
    for (int i = 1; i <= n; i++) {
        snprintf(hdr, sizeof hdr, "X-User-Id: %" PRIu64 "\r\n", base + (uint64_t)i);
        CHECK_EQ(sk_th_http_req(&h, "POST", path, hdr, NULL, &r), 200);
    }
    int64_t deadline = sk_mono_ms() + 10000;
    while (!strstr(r.body, "\"admitted\"")) {
        CHECK_MSG(sk_mono_ms() < deadline, "the last buyer got no pass: %s", r.body);
        sk_th_nap_ms(5);
        CHECK_EQ(sk_th_http_req(&h, "GET", path, hdr, NULL, &r), 200);
    }
    sk_th_http_close(&h);
}

/* 1 when dashboard.json shows activity aid's figure `name` (inside its
 * object `within` when not NULL) at value. */
static int dashboard_figure_is(int ops, uint64_t aid, const char *within, const char *name,
                               long long value)
{
    static char body[1 << 20];
    if (sk_th_http_get_big(ops, "/dashboard.json", body, sizeof body) != 200) return 0;
    json_error_t e;
    json_t *d = json_loads(body, 0, &e), *acts = json_object_get(d, "activities");
    int ok = 0;
    for (size_t i = 0; i < json_array_size(acts); i++) {
        json_t *a = json_array_get(acts, i);
        json_t *o = within ? json_object_get(a, within) : a;
        if ((uint64_t)json_integer_value(json_object_get(a, "id")) == aid)
            ok = json_integer_value(json_object_get(o, name)) == value;
    }
    json_decref(d);
    return ok;
}

/* 1 when dashboard.json shows activity aid's waiting room with that many
 * buyers in its queue. */
static int dashboard_queue_is(int ops, uint64_t aid, long long length)
{
    return dashboard_figure_is(ops, aid, "waiting_room", "queue_length", length);
}

static int dashboard_caught_up(int ops, uint64_t aid, long long admitted)
{
    return dashboard_figure_is(ops, aid, NULL, "admitted", admitted);
}

SK_TEST_T(ops_dashboard_in_chromium_shows_the_sale_as_the_engine_reports_it, 240)
{
    struct sk_th_serve s;
    char addr[64];
    int ops = serve_with_ops(&s, addr, sizeof addr);
    uint64_t aid = open_sale(s.port, 2500);
    int accepted = buy_many(s.port, aid, 0, 1234, 8);
    CHECK_EQ(accepted, 1234);
    /* and a sale with a waiting room: 37 buyers in its queue */
    uint64_t qid = sk_th_unique_id();
    open_queue(s.port, qid, 7000, 37);
    /* the sale goes on; the worker's sampler catches up within a second */
    int64_t deadline = sk_mono_ms() + 15000;
    while (!dashboard_caught_up(ops, aid, accepted) || !dashboard_queue_is(ops, qid, 37)) {
        CHECK_MSG(sk_mono_ms() < deadline, "dashboard.json never showed %d admitted", accepted);
        sk_th_nap_ms(100);
    }
    /* what the engine reports: the admin stats route */
    struct sk_th_http h;
    struct sk_th_resp r;
    char path[96];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/stats", aid);
    sk_th_http_open(&h, s.port);
    CHECK_EQ(sk_th_http_req(&h, "GET", path, "Authorization: Bearer " SK_TH_ADMIN_TOKEN "\r\n",
                            NULL, &r),
             200);
    sk_th_http_close(&h);
    json_error_t e;
    json_t *st = json_loads(r.body, 0, &e);
    CHECK(st != NULL);
    long long remaining = json_integer_value(json_object_get(st, "remaining"));
    long long admitted = json_integer_value(json_object_get(st, "admitted"));
    json_decref(st);
    CHECK_EQ(admitted, accepted);
    CHECK_EQ(remaining, 2500 - accepted);

    static char dom[1 << 20];
    char url[96], id[96];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", ops);
    chromium_dump(url, dom, sizeof dom);
    snprintf(id, sizeof id, "id=\"act-%" PRIu64 "-id\">#%" PRIu64 "<", aid, aid);
    CHECK_MSG(strstr(dom, id) != NULL, "the page does not show activity %" PRIu64 ":\n%.2000s", aid,
              dom);
    snprintf(id, sizeof id, "act-%" PRIu64 "-remaining", aid);
    CHECK_EQ(dom_number(dom, id), remaining);
    snprintf(id, sizeof id, "act-%" PRIu64 "-admitted", aid);
    CHECK_EQ(dom_number(dom, id), admitted);
    /* thousands separators, as an operator reads them */
    char shown[96];
    snprintf(shown, sizeof shown, "id=\"act-%" PRIu64 "-admitted\">1,234<", aid);
    CHECK_MSG(strstr(dom, shown) != NULL, "admitted not shown as 1,234");
    /* the waiting room's line, only for the activity that has one */
    snprintf(id, sizeof id, "act-%" PRIu64 "-wr-queue", qid);
    CHECK_EQ(dom_number(dom, id), 37);
    snprintf(id, sizeof id, "act-%" PRIu64 "-wr-queue", aid);
    CHECK_EQ(dom_number(dom, id), -1);
    /* the node's health and its processes are on the page */
    CHECK(strstr(dom, "HTTP processes 2/2") != NULL);
    CHECK(strstr(dom, "Order worker") != NULL);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
}

/* Pre-registration's count (docs/fairness.md): dashboard.json, the page
 * in Chromium and /metrics give the number of registrants Redis's set and
 * the database hold; a sale without registration shows none. */
SK_TEST_T(ops_registrants_on_the_dashboard_and_in_metrics_equal_redis_and_the_store, 240)
{
    struct sk_th_serve s;
    char addr[64];
    int ops = serve_with_ops(&s, addr, sizeof addr);
    uint64_t rid = sk_th_unique_id(), plain = open_sale(s.port, 10);
    char body[600], path[96], hdr[64];
    snprintf(body, sizeof body,
             "{\"id\":%" PRIu64 ",\"name\":\"ops reg\",\"stock\":10,\"per_user_limit\":1,"
             "\"start\":\"2099-01-01T00:00:00Z\",\"end\":\"2099-01-02T00:00:00Z\","
             "\"registration\":{\"start\":\"2020-01-01T00:00:00Z\","
             "\"end\":\"2099-01-01T00:00:00Z\"}}",
             rid);
    create_and_open(s.port, rid, body);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/register", rid);
    struct sk_th_http h;
    struct sk_th_resp r;
    sk_th_http_open(&h, s.port);
    for (int i = 1; i <= 29; i++) {
        /* a buyer registering twice is one registrant */
        snprintf(hdr, sizeof hdr, "X-User-Id: %d\r\n", 500 + i);
        for (int k = 0; k < 1 + (i % 3 == 0); k++)
            CHECK_EQ(sk_th_http_req(&h, "POST", path, hdr, NULL, &r), 200);
    }
    sk_th_http_close(&h);
    int64_t deadline = sk_mono_ms() + 15000;
    while (!dashboard_figure_is(ops, rid, NULL, "registered", 29)) {
        CHECK_MSG(sk_mono_ms() < deadline, "dashboard.json never showed 29 registrants");
        sk_th_nap_ms(100);
    }
    /* what Redis and the database hold */
    sk_redis *rd = sk_th_redis_new(sk_th_redis_url(), 2000, 2000);
    struct sk_keys k;
    sk_keys_for(&k, rid);
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(rd, &rep, "SCARD %s", k.reg), 0);
    CHECK_EQ(rep->integer, 29);
    freeReplyObject(rep);
    sk_redis_free(rd);
    sqlite3 *db;
    sqlite3_stmt *q;
    CHECK_EQ(sqlite3_open(s.db + strlen("sqlite:"), &db), SQLITE_OK);
    CHECK_EQ(sqlite3_prepare_v2(db, "SELECT count(*) FROM registrations WHERE activity_id = ?", -1,
                                &q, NULL),
             SQLITE_OK);
    sqlite3_bind_int64(q, 1, (sqlite3_int64)rid);
    long long stored = -1;
    deadline = sk_mono_ms() + 10000;
    while (stored != 29 && sk_mono_ms() < deadline) {
        sqlite3_reset(q);
        if (sqlite3_step(q) == SQLITE_ROW) stored = sqlite3_column_int64(q, 0);
        if (stored != 29) sk_th_nap_ms(50);
    }
    sqlite3_finalize(q);
    sqlite3_close(db);
    CHECK_EQ(stored, 29);
    /* /metrics: the registered sale only */
    char series[96];
    snprintf(series, sizeof series, "seckill_activity_registered{activity=\"%" PRIu64 "\"}", rid);
    struct want w[] = {{series, 29}, {NULL, 0}};
    const char *text = scrape_until(ops, has_value, w);
    snprintf(series, sizeof series, "seckill_activity_registered{activity=\"%" PRIu64 "\"}", plain);
    CHECK_MSG(strstr(text, series) == NULL, "a sale without registration has a count");
    CHECK(strstr(text, "# TYPE seckill_activity_registered gauge") != NULL);
    /* the page in Chromium */
    static char dom[1 << 20];
    char url[96], id[96];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", ops);
    chromium_dump(url, dom, sizeof dom);
    snprintf(id, sizeof id, "act-%" PRIu64 "-registered", rid);
    CHECK_EQ(dom_number(dom, id), 29);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
}

/* One "admitted" figure (docs/design.md): units admitted over the sale's
 * life, each order once, releases not taken back, Idempotency-Key replays
 * apart. The same number in `activity show`, the stats route, the
 * dashboard and /metrics, after replays and a cancel. */
SK_TEST_T(ops_one_admitted_figure_in_the_cli_the_stats_the_dashboard_and_metrics, 120)
{
    struct sk_th_serve s;
    char addr[64];
    int ops = serve_with_ops(&s, addr, sizeof addr);
    uint64_t aid = sk_th_unique_id();
    char body[400], path[96], oid[96] = "";
    snprintf(body, sizeof body,
             "{\"id\":%" PRIu64 ",\"name\":\"one figure\",\"stock\":20,\"per_user_limit\":3,"
             "\"start\":\"2020-01-01T00:00:00Z\",\"end\":\"2099-01-01T00:00:00Z\"}",
             aid);
    create_and_open(s.port, aid, body);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", aid);
    static const struct {
        uint64_t user;
        const char *body, *hdr;
    } buys[] = {
        {1, "{\"quantity\":2}", ""},
        {2, "{\"quantity\":1}", ""},
        {3, "{\"quantity\":3}", "Idempotency-Key: k3\r\n"},
        {3, "{\"quantity\":3}", "Idempotency-Key: k3\r\n"}, /* a replay: nothing admitted */
        {4, NULL, ""},
    };
    struct sk_th_http h;
    struct sk_th_resp *r = sk_th_resp_new();
    sk_th_http_open(&h, s.port);
    for (size_t i = 0; i < sizeof buys / sizeof buys[0]; i++) {
        char hdr[128];
        snprintf(hdr, sizeof hdr, "X-User-Id: %" PRIu64 "\r\n%s", buys[i].user, buys[i].hdr);
        CHECK_EQ(sk_th_http_req(&h, "POST", path, hdr, buys[i].body, r), 200);
        if (buys[i].user == 2) sk_th_resp_field(r, "order_id", oid, sizeof oid);
    }
    /* user 2 cancels (once persisted): 1 unit back on the shelf */
    char opath[160];
    snprintf(opath, sizeof opath, "/api/v1/orders/%s/cancel", oid);
    int64_t deadline = sk_mono_ms() + 15000;
    while (sk_th_http_req(&h, "POST", opath, "X-User-Id: 2\r\n", NULL, r) != 200) {
        CHECK_MSG(sk_mono_ms() < deadline, "cancel: %s", r->body);
        sk_th_nap_ms(50);
    }
    snprintf(opath, sizeof opath, "/api/v1/activities/%" PRIu64 "/stats", aid);
    CHECK_EQ(sk_th_http_req(&h, "GET", opath, "Authorization: Bearer " SK_TH_ADMIN_TOKEN "\r\n",
                            NULL, r),
             200);
    char v[32];
    sk_th_resp_field(r, "admitted", v, sizeof v);
    CHECK_STR(v, "7");
    sk_th_resp_field(r, "remaining", v, sizeof v);
    CHECK_STR(v, "14");
    sk_th_http_close(&h);
    free(r);
    char id[32], out[8192];
    snprintf(id, sizeof id, "%" PRIu64, aid);
    CHECK_EQ(sk_th_run_with_db(out, sizeof out, "activity",
                               (const char *const[]){"show", "--id", id, "--json", NULL},
                               sk_th_redis_url(), s.db),
             0);
    CHECK_MSG(strstr(out, "\"admitted\": 7,"), "%s", out);
    deadline = sk_mono_ms() + 15000;
    while (!dashboard_figure_is(ops, aid, NULL, "admitted", 7)) {
        CHECK_MSG(sk_mono_ms() < deadline, "dashboard.json never showed 7 admitted");
        sk_th_nap_ms(50);
    }
    CHECK(dashboard_figure_is(ops, aid, NULL, "replays_total", 1));
    char s1[128], s2[128], s3[128];
    snprintf(s1, sizeof s1, "seckill_activity_admitted_units{activity=\"%s\"}", id);
    snprintf(s2, sizeof s2, "seckill_activity_admitted_units_total{activity=\"%s\"}", id);
    snprintf(s3, sizeof s3, "seckill_activity_replays_total{activity=\"%s\"}", id);
    struct want w[] = {{s1, 7},
                       {s2, 7},
                       {s3, 1},
                       {"seckill_admissions_total", 4},
                       {"seckill_idempotent_replays_total", 1},
                       {NULL, 0}};
    scrape_until(ops, has_value, w);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
}

/* A sale preheated from another database (the CLI on store A) and served
 * by a node on store B: the dashboard, in a real browser, names it, says
 * why and shows the command that fixes it. */
SK_TEST_T(ops_dashboard_in_chromium_names_a_sale_preheated_from_another_store, 240)
{
    struct sk_th_redis rs;
    sk_th_redis_start(&rs, NULL);
    char spec_a[400], id[32], out[4096];
    snprintf(spec_a, sizeof spec_a, "sqlite:%s/a.db", sk_th_tmpdir());
    uint64_t aid = sk_th_unique_id();
    snprintf(id, sizeof id, "%" PRIu64, aid);
    CHECK_EQ(sk_th_run_with_db(out, sizeof out, "activity",
                               (const char *const[]){"create", "--id", id, "--name", "stray",
                                                     "--stock", "10", "--limit", "1", NULL},
                               rs.url, spec_a),
             0);
    CHECK_EQ(sk_th_run_with_db(out, sizeof out, "activity",
                               (const char *const[]){"preheat", "--id", id, NULL}, rs.url, spec_a),
             0);
    struct sk_th_serve s;
    char addr[64];
    int ops = sk_th_free_port();
    snprintf(addr, sizeof addr, "127.0.0.1:%d", ops);
    sk_th_serve_start(&s, rs.url, (const char *const[]){"--ops-listen", addr, NULL});
    static char body[1 << 20];
    char want[128];
    snprintf(want, sizeof want, "\"id\":%s,\"reason\":\"unknown_to_database\"", id);
    int64_t deadline = sk_mono_ms() + 20000;
    while (sk_th_http_get_big(ops, "/dashboard.json", body, sizeof body) != 200 ||
           !strstr(body, want)) {
        CHECK_MSG(sk_mono_ms() < deadline, "dashboard.json never named %s", id);
        sk_th_nap_ms(100);
    }
    /* the node's own store is named by its identity: 16 hex digits */
    json_error_t e;
    json_t *d = json_loads(body, 0, &e);
    const char *sid = json_string_value(json_object_get(d, "store_id"));
    CHECK_MSG(sid && strlen(sid) == 16 && strspn(sid, "0123456789abcdef") == 16, "store_id %s",
              sid ? sid : "(not a string)");
    json_decref(d);
    static char dom[1 << 20];
    char url[96], card[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", ops);
    chromium_dump(url, dom, sizeof dom);
    snprintf(card, sizeof card, "id=\"orphan-%s\"", id);
    CHECK_MSG(strstr(dom, card), "no card for activity %s:\n%.3000s", id, dom);
    CHECK_MSG(strstr(dom, "its orders would never be persisted here"), "%.3000s", dom);
    CHECK_MSG(strstr(dom, "--redis-only"), "no fix shown:\n%.3000s", dom);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
    sk_th_redis_stop(&rs, 1);
}

/* `activity show --watch`: a frame every second until SIGINT, then exit 0. */
SK_TEST(ops_activity_show_watch_refreshes_until_interrupted)
{
    struct sk_th_serve s;
    sk_th_serve_start(&s, sk_th_redis_url(), NULL);
    uint64_t aid = open_sale(s.port, 100);
    CHECK_EQ(buy_many(s.port, aid, 0, 7, 1), 7);
    char id[32];
    snprintf(id, sizeof id, "%" PRIu64, aid);
    int fds[2];
    CHECK_EQ(pipe(fds), 0);
    pid_t pid = sk_th_fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        execl(sk_th_seckill_bin(), "seckill", "activity", "show", "--redis", sk_th_redis_url(),
              "--db", s.db, "--id", id, "--watch", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    static char out[65536];
    size_t n = 0;
    int64_t deadline = sk_mono_ms() + 15000;
    /* two frames: the second one carries a rate */
    while (!strstr(out, "admitted_per_s")) {
        ssize_t got = read(fds[0], out + n, sizeof out - 1 - n);
        if (got > 0) n += (size_t)got;
        out[n] = 0;
        CHECK_MSG(sk_mono_ms() < deadline, "no second frame:\n%s", out);
        if (got <= 0) sk_th_nap_ms(20);
    }
    CHECK_EQ(kill(pid, SIGINT), 0);
    int st;
    CHECK_EQ(waitpid(pid, &st, 0), pid);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
    close(fds[0]);
    CHECK(strstr(out, "stock_remaining  93\n") != NULL);
    CHECK(strstr(out, "admitted         7\n") != NULL);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
}

/* The dashboard remembers: opened in the middle of a sale, the page draws
 * the seconds before it was opened (the node's history, sent with its
 * first answer), not only what it polled itself. Chromium's virtual time
 * budget (5 s) lets the page poll a few times at most: a line that spans
 * ten seconds or more came from the server. */
SK_TEST_T(ops_dashboard_opened_mid_sale_draws_the_minutes_before_it_was_opened, 240)
{
    struct sk_th_serve s;
    char addr[64];
    int ops = serve_with_ops(&s, addr, sizeof addr);
    uint64_t aid = open_sale(s.port, 1000000);
    /* the sale: a buyer process, 50 new buyers every 100 ms, until stopped */
    pid_t buyer = sk_th_fork();
    if (buyer == 0) {
        for (uint64_t base = 0;; base += 50) {
            buy_many(s.port, aid, base, 50, 2);
            sk_th_nap_ms(100);
        }
    }
    /* the node's history has twelve seconds of the sale */
    static char body[1 << 20];
    int64_t deadline = sk_mono_ms() + 60000;
    json_t *h = NULL;
    for (;;) {
        CHECK_MSG(sk_mono_ms() < deadline, "no 12 s of history: %.500s", body);
        sk_th_nap_ms(250);
        if (sk_th_http_get_big(ops, "/dashboard.json?history=1", body, sizeof body) != 200)
            continue;
        json_error_t e;
        json_t *d = json_loads(body, 0, &e);
        json_t *acts = json_object_get(json_object_get(d, "history"), "activities");
        json_t *u = NULL;
        for (size_t i = 0; i < json_array_size(acts); i++)
            if ((uint64_t)json_integer_value(json_object_get(json_array_get(acts, i), "id")) == aid)
                u = json_object_get(json_array_get(acts, i), "admitted_units_total");
        size_t n = json_array_size(u);
        if (n >= 12 && json_integer_value(json_array_get(u, n - 1)) -
                               json_integer_value(json_array_get(u, n - 12)) >
                           0) {
            h = d;
            break;
        }
        json_decref(d);
    }
    /* a sample a second, oldest first, counters that never go back */
    json_t *hist = json_object_get(h, "history");
    json_t *t = json_object_get(hist, "t_ms"), *adm = json_object_get(hist, "admissions");
    CHECK_EQ(json_array_size(t), json_array_size(adm));
    for (size_t i = 1; i < json_array_size(t); i++) {
        long long dt =
            json_integer_value(json_array_get(t, i)) - json_integer_value(json_array_get(t, i - 1));
        CHECK_MSG(dt >= 900 && dt <= 2000, "samples %lld ms apart", dt);
        CHECK(json_integer_value(json_array_get(adm, i)) >=
              json_integer_value(json_array_get(adm, i - 1)));
    }
    json_decref(h);
    /* a plain poll carries no history */
    CHECK_EQ(sk_th_http_get_big(ops, "/dashboard.json", body, sizeof body), 200);
    CHECK(strstr(body, "\"history\"") == NULL);

    static char dom[1 << 20];
    char url[96], id[96];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", ops);
    chromium_dump(url, dom, sizeof dom); /* the sale goes on meanwhile */
    kill(buyer, SIGKILL);
    waitpid(buyer, NULL, 0);
    snprintf(id, sizeof id, "id=\"act-%" PRIu64 "-adm-chart\"", aid);
    const char *cv = strstr(dom, id);
    CHECK_MSG(cv != NULL, "no admissions chart for %" PRIu64 ":\n%.2000s", aid, dom);
    const char *end = strchr(cv, '>');
    char tag[400];
    snprintf(tag, sizeof tag, "%.*s", (int)(end - cv), cv);
    const char *pts = strstr(tag, "data-points=\""), *span = strstr(tag, "data-span=\""),
               *max = strstr(tag, "data-max=\"");
    CHECK_MSG(pts && span && max, "%s", tag);
    int npts = atoi(pts + 13), nspan = atoi(span + 11), vmax = atoi(max + 10);
    CHECK_MSG(npts >= 10 && nspan >= 10, "the line has %d points over %d s: %s", npts, nspan, tag);
    CHECK_MSG(vmax > 0, "a flat line although the sale sold: %s", tag);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
}
