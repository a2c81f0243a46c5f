/* test_buyer_page.c - the buyer's page (web/buyer/, docs/buyer-page.md):
 * how seckill serve sends it (cacheable, self-contained) and its clock
 * and live routes, CORS for named origins, the CDN export; then the page
 * itself in a real headless Chromium against a real seckill serve and
 * Redis: the countdown on the server's clock with no purchase before the
 * start, a waiting room in place order, a sell-out reaching every open
 * page, a 503 mid-purchase retried with the same Idempotency-Key to
 * exactly one order in the database, and a CAPTCHA widget (a stand-in
 * provider of the test's own) rendered and its token bought with.
 *
 * With SECKILL_SHOTS=DIR (make buyer-shots) the browser tests also write
 * a screenshot of each state at phone (360 px) and desktop width there. */
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <sqlite3.h>

#include "core/clock.h"
#include "support/captcha_standin.h"
#include "support/cdp.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/http_client.h"

static int req(int port, const char *method, const char *path, const char *hdrs, const char *body,
               struct sk_th_resp *r)
{
    return sk_th_http_once(port, method, path, hdrs, body, r);
}

static int admin(int port, const char *path, const char *body)
{
    struct sk_th_resp r;
    return req(port, "POST", path, "Authorization: Bearer " SK_TH_ADMIN_TOKEN "\r\n", body, &r);
}

/* Buyers 1..n each buy one unit of activity aid through the API, every
 * purchase accepted. */
static void api_buy(int port, uint64_t aid, int n)
{
    char path[96], h[48];
    struct sk_th_resp r;
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", aid);
    for (int u = 1; u <= n; u++) {
        snprintf(h, sizeof h, "X-User-Id: %d\r\n", u);
        CHECK_EQ(req(port, "POST", path, h, "{}", &r), 200);
    }
}

/* RFC 3339 of a unix second. */
static void rfc3339(time_t s, char *out, size_t cap)
{
    struct tm tm;
    gmtime_r(&s, &tm);
    strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* Creates, preheats and opens activity id: stock, limit 1, the window
 * [start, start + 1 h), an optional waiting room at `pace` passes/s. */
static void sale_with(int port, uint64_t id, const char *name, long long stock, time_t start,
                      int pace, const char *more);
static void sale(int port, uint64_t id, const char *name, long long stock, time_t start, int pace)
{
    sale_with(port, id, name, stock, start, pace, "");
}

/* The same with more fields of the create body (",\"challenge\":..."). */
static void sale_with(int port, uint64_t id, const char *name, long long stock, time_t start,
                      int pace, const char *more)
{
    char body[800], s[32], e[32], path[96], wr[80] = "";
    rfc3339(start, s, sizeof s);
    rfc3339(start + 3600, e, sizeof e);
    if (pace > 0) snprintf(wr, sizeof wr, ",\"waiting_room\":{\"passes_per_s\":%d}", pace);
    snprintf(body, sizeof body,
             "{\"id\":%" PRIu64 ",\"name\":\"%s\",\"stock\":%lld,\"per_user_limit\":1,"
             "\"start\":\"%s\",\"end\":\"%s\",\"pay_timeout_s\":900%s%s}",
             id, name, stock, s, e, wr, more);
    struct sk_th_resp r;
    int st = req(port, "POST", "/api/v1/activities",
                 "Authorization: Bearer " SK_TH_ADMIN_TOKEN "\r\n", body, &r);
    CHECK_MSG(st == 201, "create: %d %s", st, r.body); /* the body says why */
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/preheat", id);
    CHECK_EQ(admin(port, path, NULL), 200);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/open", id);
    CHECK_EQ(admin(port, path, NULL), 200);
}

/* ",\"registration\":{...}" for the window [rs, re), then more. */
static void reg_fields(char *out, size_t cap, time_t rs, time_t re, const char *more)
{
    char a[32], z[32];
    rfc3339(rs, a, sizeof a);
    rfc3339(re, z, sizeof z);
    snprintf(out, cap, ",\"registration\":{\"start\":\"%s\",\"end\":\"%s\"}%s", a, z, more);
}

/* Requests the node counted on a route (every status), from /metrics. */
static long long route_count(int port, const char *route)
{
    static char raw[1 << 20];
    const char get[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    size_t n = sk_th_http_raw(port, get, sizeof get - 1, raw, sizeof raw - 1, 5000);
    raw[n] = 0;
    char pat[96];
    int pl = snprintf(pat, sizeof pat, "seckill_http_requests_total{route=\"%s\",", route);
    long long sum = 0;
    for (const char *p = raw; (p = strstr(p, pat)) != NULL; p += pl) {
        const char *sp = strchr(p, ' ');
        if (sp) sum += strtoll(sp + 1, NULL, 10);
    }
    return sum;
}

/* Orders of a buyer in serve's SQLite database: the count, and their
 * statuses joined by commas into st. */
static int db_orders(const struct sk_th_serve *s, uint64_t aid, uint64_t uid, char *st, size_t cap)
{
    sqlite3 *db;
    CHECK(sqlite3_open_v2(s->db + 7, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    sqlite3_stmt *q;
    CHECK(sqlite3_prepare_v2(db,
                             "SELECT count(*), coalesce(group_concat(status), '') FROM orders "
                             "WHERE activity_id = ? AND user_id = ?",
                             -1, &q, NULL) == SQLITE_OK);
    sqlite3_bind_int64(q, 1, (sqlite3_int64)aid);
    sqlite3_bind_int64(q, 2, (sqlite3_int64)uid);
    CHECK(sqlite3_step(q) == SQLITE_ROW);
    int n = sqlite3_column_int(q, 0);
    snprintf(st, cap, "%s", (const char *)sqlite3_column_text(q, 1));
    sqlite3_finalize(q);
    sqlite3_close(db);
    return n;
}

/* The same count once the order worker wrote the buyer's first order (or
 * 10 s passed): purchases reach the database off the request path. */
static int db_orders_soon(const struct sk_th_serve *s, uint64_t aid, uint64_t uid)
{
    char st[64];
    int64_t deadline = sk_mono_ms() + 10000;
    while (db_orders(s, aid, uid, st, sizeof st) < 1 && sk_mono_ms() < deadline)
        sk_th_nap_ms(50);
    return db_orders(s, aid, uid, st, sizeof st);
}

/* ---- the routes, without a browser ----------------------------------- */

/* GET path with extra header lines (may be ""), over a fresh connection:
 * the status; the raw answer in raw (cap bytes, terminated), *body its
 * body, *blen the body's length. */
static int raw_get(int port, const char *path, const char *hdrs, char *raw, size_t cap,
                   const char **body, size_t *blen)
{
    char rq[512];
    int n = snprintf(rq, sizeof rq, "GET %s HTTP/1.1\r\nHost: x\r\n%sConnection: close\r\n\r\n",
                     path, hdrs);
    size_t got = sk_th_http_raw(port, rq, (size_t)n, raw, cap - 1, 5000);
    raw[got] = 0;
    const char *b = strstr(raw, "\r\n\r\n");
    *body = b ? b + 4 : raw + got;
    *blen = got - (size_t)(*body - raw);
    return sk_th_http_status(raw, got);
}

/* The value of header name (any case) in a raw answer, into out. */
static int raw_header(const char *raw, const char *name, char *out, size_t cap)
{
    size_t nl = strlen(name);
    for (const char *p = strstr(raw, "\r\n"); p && p[2] != '\r'; p = strstr(p + 2, "\r\n"))
        if (!strncasecmp(p + 2, name, nl) && p[2 + nl] == ':') {
            const char *v = p + 3 + nl, *e = strstr(v, "\r\n");
            while (*v == ' ')
                v++;
            snprintf(out, cap, "%.*s", (int)(e - v), v);
            return 0;
        }
    out[0] = 0;
    return -1;
}

/* Script calls Redis served so far (FCALL and EVALSHA). */
static long long script_calls(int redis_port)
{
    return sk_th_redis_calls(redis_port, "fcall") + sk_th_redis_calls(redis_port, "evalsha");
}

SK_TEST(buyer_page_is_served_cacheable_and_self_contained_with_clock_and_live_reads)
{
    struct sk_th_redis rd;
    sk_th_redis_start(&rd, NULL);
    struct sk_th_serve s;
    sk_th_serve_start(&s, rd.url, NULL);
    /* the page: the same bytes for every id, an ETag, a 304 for it */
    static char raw[1 << 18];
    const char *body;
    size_t blen;
    char etag[96], cc[96], ct[96], hdr[160];
    CHECK_EQ(raw_get(s.port, "/sale/1", "", raw, sizeof raw, &body, &blen), 200);
    CHECK_EQ(raw_header(raw, "etag", etag, sizeof etag), 0);
    CHECK_EQ(raw_header(raw, "cache-control", cc, sizeof cc), 0);
    CHECK_EQ(raw_header(raw, "content-type", ct, sizeof ct), 0);
    CHECK(strstr(cc, "public") && strstr(cc, "max-age="));
    CHECK_STR(ct, "text/html; charset=utf-8");
    CHECK(etag[0] == '"' && strlen(etag) > 8);
    /* self-contained: no other host named anywhere, nothing to load */
    CHECK_MSG(strstr(body, "://") == NULL, "the page names another host");
    CHECK(strstr(body, "<script src") == NULL && strstr(body, "<link") == NULL);
    CHECK(strstr(body, "connect-src 'self'") != NULL);
    CHECK(strstr(body, "id=\"sk-brand\"") && strstr(body, "--sk-accent"));
    CHECK_MSG(blen > 10000 && blen < 65536, "page of %zu bytes", blen);
    printf("# the page: %zu bytes\n", blen);
    size_t first = blen;
    CHECK_EQ(raw_get(s.port, "/sale/99", "", raw, sizeof raw, &body, &blen), 200);
    CHECK_EQ(blen, first);
    snprintf(hdr, sizeof hdr, "If-None-Match: %s\r\n", etag);
    CHECK_EQ(raw_get(s.port, "/sale/1", hdr, raw, sizeof raw, &body, &blen), 304);
    CHECK_EQ(blen, 0);
    CHECK_EQ(
        raw_get(s.port, "/sale/1", "If-None-Match: \"other\"\r\n", raw, sizeof raw, &body, &blen),
        200);
    struct sk_th_resp r;
    CHECK_EQ(req(s.port, "GET", "/sale/0", NULL, NULL, &r), 400);
    CHECK_EQ(req(s.port, "GET", "/sale/x1", NULL, NULL, &r), 400);

    /* the clock: this server's, never cached */
    int64_t before = sk_wall_ms();
    CHECK_EQ(req(s.port, "GET", "/api/v1/time", NULL, NULL, &r), 200);
    int64_t after = sk_wall_ms();
    long long now = strtoll(strstr(r.body, "\"now_ms\":") + 9, NULL, 10);
    CHECK(now >= before && now <= after);
    CHECK_EQ(sk_th_http_header(&r, "cache-control", cc, sizeof cc), 0);
    CHECK_STR(cc, "no-store");

    /* the live read: what the page shows, and the pace it should ask at */
    uint64_t open_id = sk_th_unique_id(), soon_id = sk_th_unique_id();
    sale(s.port, open_id, "Open \\\"sale\\\" 秒杀", 3, time(NULL) - 60, 0);
    sale(s.port, soon_id, "Soon", 3, time(NULL) + 600, 5);
    char path[96];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/live", open_id);
    CHECK_EQ(req(s.port, "GET", path, NULL, NULL, &r), 200);
    json_error_t je;
    json_t *v = json_loads(r.body, 0, &je);
    CHECK_MSG(v != NULL, "%s", r.body);
    CHECK_STR(json_string_value(json_object_get(v, "name")), "Open \"sale\" 秒杀");
    CHECK_STR(json_string_value(json_object_get(v, "state")), "open");
    CHECK(json_is_false(json_object_get(v, "sold_out")));
    CHECK_EQ(json_integer_value(json_object_get(v, "stock_remaining")), 3);
    CHECK_EQ(json_integer_value(json_object_get(v, "poll_after_ms")), 4000);
    CHECK(json_is_null(json_object_get(v, "waiting_room")));
    json_decref(v);
    CHECK_EQ(sk_th_http_header(&r, "cache-control", cc, sizeof cc), 0);
    CHECK_STR(cc, "public, max-age=1");
    /* bought out through the API: within a fresh read the live view says so */
    api_buy(s.port, open_id, 3);
    int64_t deadline = sk_mono_ms() + 3000;
    for (;;) {
        CHECK_EQ(req(s.port, "GET", path, NULL, NULL, &r), 200);
        if (strstr(r.body, "\"sold_out\":true")) break;
        CHECK_MSG(sk_mono_ms() < deadline, "live never said sold out: %s", r.body);
        sk_th_nap_ms(20);
    }
    CHECK(strstr(r.body, "\"stock_remaining\":0") && strstr(r.body, "\"poll_after_ms\":15000"));
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/live", soon_id);
    CHECK_EQ(req(s.port, "GET", path, NULL, NULL, &r), 200);
    CHECK(strstr(r.body, "\"state\":\"scheduled\"") &&
          strstr(r.body, "\"waiting_room\":{\"passes_per_s\":5,\"pass_ttl_s\":300}"));
    CHECK(strstr(r.body, "seed") == NULL);
    CHECK_EQ(req(s.port, "GET", "/api/v1/activities/987654321/live", NULL, NULL, &r), 404);
    CHECK(strstr(r.body, "unknown_activity") != NULL);

    /* a thousand reads of an open page cost Redis a few: the view is shared */
    long long live_before = route_count(s.port, "sale_live"), calls = script_calls(rd.port);
    int64_t t0 = sk_mono_ms();
    struct sk_th_http c;
    sk_th_http_open(&c, s.port);
    for (int i = 0; i < 1000; i++)
        CHECK_EQ(sk_th_http_req(&c, "GET", path, NULL, NULL, &r), 200);
    sk_th_http_close(&c);
    long long spent = sk_mono_ms() - t0;
    calls = script_calls(rd.port) - calls;
    CHECK_EQ(route_count(s.port, "sale_live") - live_before, 1000);
    /* a read per 250 ms, and the worker's own calls meanwhile */
    printf("# 1000 live reads in %lld ms: %lld script calls in Redis\n", spent, calls);
    CHECK_MSG(calls < 100 + spent / 25, "%lld script calls", calls);
    CHECK(script_calls(rd.port) > 0); /* the counter is the right one: the sale's calls are in it */
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
    sk_th_redis_stop(&rd, 1);
}

/* The CORS headers of one request; out: Access-Control-Allow-Origin ("" when absent). */
static int cors_req(int port, const char *method, const char *path, const char *hdrs,
                    struct sk_th_resp *r, char *acao, size_t cap)
{
    int st = req(port, method, path, hdrs, NULL, r);
    if (sk_th_http_header(r, "access-control-allow-origin", acao, cap) < 0) acao[0] = 0;
    return st;
}

SK_TEST(buyer_api_cors_answers_named_origins_only_and_is_off_by_default)
{
    struct sk_th_resp r;
    char acao[200], v[300];
    /* off by default: no CORS header, OPTIONS is an unknown method */
    struct sk_th_serve s;
    sk_th_serve_start(&s, sk_th_redis_url(), NULL);
    CHECK_EQ(cors_req(s.port, "GET", "/api/v1/time", "Origin: https://shop.example\r\n", &r, acao,
                      sizeof acao),
             200);
    CHECK_STR(acao, "");
    CHECK(sk_th_http_header(&r, "vary", v, sizeof v) < 0);
    CHECK_EQ(req(s.port, "OPTIONS", "/api/v1/time", "Origin: https://shop.example\r\n", NULL, &r),
             405);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);

    /* a bad list is a usage error: nothing starts */
    char out[2048];
    const char *bad[][2] = {{"*", "not allowed"},
                            {"https://shop.example/", "no path"},
                            {"ftp://x", "http:// or https://"},
                            {"https://a.example:70000", "port"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *args[] = {"serve",    "--cors-origins", bad[i][0],
                              "--listen", "127.0.0.1:1",    NULL};
        int rc = sk_th_run_seckill(out, sizeof out, NULL, args);
        CHECK_MSG(rc == 2 && strstr(out, "cors_origins") && strstr(out, bad[i][1]), "%s: rc %d: %s",
                  bad[i][0], rc, out);
    }

    const char *extra[] = {"--cors-origins", "https://Shop.Example, http://127.0.0.1:8000", NULL};
    sk_th_serve_start(&s, sk_th_redis_url(), extra);
    /* a named origin (any case) is echoed, with what a page needs to read */
    CHECK_EQ(cors_req(s.port, "GET", "/api/v1/time", "Origin: https://shop.example\r\n", &r, acao,
                      sizeof acao),
             200);
    CHECK_STR(acao, "https://shop.example");
    CHECK_EQ(sk_th_http_header(&r, "access-control-expose-headers", v, sizeof v), 0);
    CHECK(strcasestr(v, "Retry-After") != NULL);
    CHECK_EQ(sk_th_http_header(&r, "vary", v, sizeof v), 0);
    CHECK(!strcasecmp(v, "Origin"));
    CHECK_EQ(cors_req(s.port, "POST", "/api/v1/activities/1/purchase",
                      "Origin: http://127.0.0.1:8000\r\n", &r, acao, sizeof acao),
             401);
    CHECK_STR(acao, "http://127.0.0.1:8000"); /* refusals are readable too */
    /* another origin gets no CORS header at all (but the Vary) */
    const char *others[] = {"Origin: https://evil.example\r\n",
                            "Origin: https://shop.example.evil\r\n",
                            "Origin: http://shop.example\r\n", "Origin: null\r\n", ""};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        CHECK_EQ(cors_req(s.port, "GET", "/api/v1/time", others[i], &r, acao, sizeof acao), 200);
        CHECK_MSG(!acao[0], "%s got %s", others[i], acao);
        CHECK(sk_th_http_header(&r, "access-control-allow-credentials", v, sizeof v) < 0);
    }
    /* not the page itself, not the operations routes */
    static char raw[1 << 18];
    const char *body;
    size_t blen;
    CHECK_EQ(raw_get(s.port, "/sale/1", "Origin: https://shop.example\r\n", raw, sizeof raw, &body,
                     &blen),
             200);
    CHECK(raw_header(raw, "access-control-allow-origin", acao, sizeof acao) < 0);
    /* preflights */
    CHECK_EQ(cors_req(s.port, "OPTIONS", "/api/v1/activities/1/purchase",
                      "Origin: https://shop.example\r\nAccess-Control-Request-Method: POST\r\n"
                      "Access-Control-Request-Headers: content-type,idempotency-key,x-queue-pass,"
                      "x-user-id\r\n",
                      &r, acao, sizeof acao),
             204);
    CHECK_STR(acao, "https://shop.example");
    CHECK_EQ(sk_th_http_header(&r, "access-control-allow-methods", v, sizeof v), 0);
    CHECK(!strcasecmp(v, "GET, POST"));
    CHECK_EQ(sk_th_http_header(&r, "access-control-allow-headers", v, sizeof v), 0);
    CHECK(strcasestr(v, "Idempotency-Key") && strcasestr(v, "X-Queue-Pass"));
    CHECK_EQ(sk_th_http_header(&r, "access-control-max-age", v, sizeof v), 0);
    struct {
        const char *hdrs, *why;
    } refused[] = {
        {"Origin: https://evil.example\r\nAccess-Control-Request-Method: POST\r\n", "origin"},
        {"Access-Control-Request-Method: POST\r\n", "origin"},
        {"Origin: https://shop.example\r\nAccess-Control-Request-Method: DELETE\r\n",
         "GET and POST"},
        {"Origin: https://shop.example\r\nAccess-Control-Request-Method: POST\r\n"
         "Access-Control-Request-Headers: x-admin\r\n",
         "header"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        CHECK_EQ(cors_req(s.port, "OPTIONS", "/api/v1/activities/1/purchase", refused[i].hdrs, &r,
                          acao, sizeof acao),
                 403);
        CHECK_MSG(strstr(r.body, "cors_refused") && strstr(r.body, refused[i].why), "%s", r.body);
        if (strcmp(refused[i].why, "origin") == 0) CHECK_STR(acao, "");
    }
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
}

SK_TEST(buyer_page_export_writes_one_file_calling_the_named_api)
{
    char out[4096], dir[400], file[460];
    const char *tmp = sk_th_tmpdir();
    snprintf(dir, sizeof dir, "%s/cdn/sale", tmp);
    char parent[420];
    snprintf(parent, sizeof parent, "%s/cdn", tmp);
    CHECK(mkdir(parent, 0755) == 0);
    const char *args[] = {"activity", "page", "--id",       "4242",
                          "--out",    dir,    "--api-base", "https://API.shop.example:8443/",
                          NULL};
    int rc = sk_th_run_seckill(out, sizeof out, NULL, args);
    CHECK_MSG(rc == 0 && strstr(out, "index.html"), "rc %d: %s", rc, out);
    snprintf(file, sizeof file, "%s/index.html", dir);
    FILE *f = fopen(file, "r");
    CHECK(f != NULL);
    static char page[1 << 17];
    size_t n = fread(page, 1, sizeof page - 1, f);
    page[n] = 0;
    fclose(f);
    CHECK(strstr(page, "id=\"sk-config\">{\"activity\":4242,"
                       "\"api_base\":\"https://API.shop.example:8443\"}</script>") != NULL);
    /* the browser lets it call that origin, and no other */
    CHECK(strstr(page, "connect-src https://api.shop.example:8443;") != NULL);
    CHECK(strstr(page, "connect-src 'self'") == NULL);
    CHECK(strstr(page, "<script src") == NULL);
    /* bad input: exit 2, nothing written */
    snprintf(dir, sizeof dir, "%s/cdn/never", tmp);
    const char *bases[] = {"javascript:alert(1)", "https://x.example/\"><script>", "http://",
                           "https://a b", "https://x.example;connect-src *"};
    for (size_t i = 0; i < sizeof bases / sizeof bases[0]; i++) {
        const char *a2[] = {"activity", "page",       "--id",   "1", "--out",
                            dir,        "--api-base", bases[i], NULL};
        rc = sk_th_run_seckill(out, sizeof out, NULL, a2);
        CHECK_MSG(rc == 2 && strstr(out, "--api-base"), "%s: rc %d: %s", bases[i], rc, out);
        CHECK(access(dir, F_OK) != 0);
    }
    const char *a3[] = {"activity", "page", "--id", "1", NULL};
    CHECK_EQ(sk_th_run_seckill(out, sizeof out, NULL, a3), 2);
    CHECK(strstr(out, "--out") != NULL);
    const char *a4[] = {"activity", "page", "--id", "0", "--out", dir, NULL};
    CHECK_EQ(sk_th_run_seckill(out, sizeof out, NULL, a4), 2);
    /* without --api-base: its own origin */
    snprintf(dir, sizeof dir, "%s/cdn/same", tmp);
    const char *a5[] = {"activity", "page", "--id", "7", "--out", dir, NULL};
    CHECK_EQ(sk_th_run_seckill(out, sizeof out, NULL, a5), 0);
    snprintf(file, sizeof file, "%s/index.html", dir);
    f = fopen(file, "r");
    CHECK(f != NULL);
    n = fread(page, 1, sizeof page - 1, f);
    page[n] = 0;
    fclose(f);
    CHECK(strstr(page, "{\"activity\":7,\"api_base\":\"\"}") && strstr(page, "connect-src 'self'"));
}

/* ---- in the browser ---------------------------------------------------- */

/* Screenshots of the page's state at phone and desktop width into
 * $SECKILL_SHOTS (nothing without it); the page keeps its size. */
static void shot(struct sk_cdp *b, const struct sk_cdp_page *p, const char *name, int w, int h,
                 int mobile)
{
    const char *dir = getenv("SECKILL_SHOTS");
    if (!dir || !dir[0]) return;
    char path[600];
    sk_cdp_resize(b, p, 360, 740, 1);
    sk_cdp_pump(b, 300);
    snprintf(path, sizeof path, "%s/%s-phone.png", dir, name);
    sk_cdp_screenshot(b, p, path);
    sk_cdp_resize(b, p, 1024, 700, 0);
    sk_cdp_pump(b, 300);
    snprintf(path, sizeof path, "%s/%s-desktop.png", dir, name);
    sk_cdp_screenshot(b, p, path);
    sk_cdp_resize(b, p, w, h, mobile);
}

/* Opens the buyer page of activity aid, as user, in a new phone-sized
 * page (360 x 740) with language lang; script (NULL: none) runs before the
 * page's own. */
static void open_page(struct sk_cdp *b, struct sk_cdp_page *p, int port, uint64_t aid,
                      uint64_t user, const char *lang, const char *script)
{
    char url[200];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/sale/%" PRIu64 "?user=%" PRIu64, port, aid,
             user);
    sk_cdp_page_open(b, p, url, 360, 740, 1, lang, script);
}

/* The network events of a page for requests whose URL contains part:
 * the requests (Network.requestWillBeSent params) into out. */
static int requests_of(const struct sk_cdp *b, const struct sk_cdp_page *p, const char *part,
                       const char *method, json_t **out, int cap)
{
    int n = 0;
    size_t i;
    json_t *ev;
    json_array_foreach(b->events, i, ev)
    {
        const char *m = json_string_value(json_object_get(ev, "method"));
        const char *sess = json_string_value(json_object_get(ev, "sessionId"));
        if (!m || strcmp(m, "Network.requestWillBeSent") || !sess || strcmp(sess, p->session))
            continue;
        json_t *rq = json_object_get(json_object_get(ev, "params"), "request");
        const char *url = json_string_value(json_object_get(rq, "url"));
        const char *mt = json_string_value(json_object_get(rq, "method"));
        if (url && strstr(url, part) && mt && !strcmp(mt, method) && n < cap)
            out[n++] = json_object_get(ev, "params");
    }
    return n;
}

/* The params of the first event `method` of the page about requestId. */
static json_t *event_for(const struct sk_cdp *b, const struct sk_cdp_page *p, const char *method,
                         const char *request_id)
{
    size_t i;
    json_t *ev;
    json_array_foreach(b->events, i, ev)
    {
        const char *m = json_string_value(json_object_get(ev, "method"));
        const char *sess = json_string_value(json_object_get(ev, "sessionId"));
        json_t *params = json_object_get(ev, "params");
        const char *rid = json_string_value(json_object_get(params, "requestId"));
        if (m && !strcmp(m, method) && sess && !strcmp(sess, p->session) && rid &&
            !strcmp(rid, request_id))
            return params;
    }
    return NULL;
}

static const char *header_of(json_t *request_params, const char *name)
{
    json_t *h = json_object_get(json_object_get(request_params, "request"), "headers");
    const char *k;
    json_t *v;
    json_object_foreach(h, k, v) if (!strcasecmp(k, name)) return json_string_value(v);
    return NULL;
}

/* Tabs (at most six times) until the element with id has the focus. */
static void tab_to(struct sk_cdp *b, const struct sk_cdp_page *p, const char *id)
{
    char text[64];
    for (int i = 0; i < 6; i++) {
        sk_cdp_eval_text(b, p, "document.activeElement && document.activeElement.id", text,
                         sizeof text);
        if (!strcmp(text, id)) return;
        sk_cdp_key(b, p, "Tab");
    }
    CHECK_MSG(0, "Tab never reached #%s (the focus is on #%s)", id, text);
}

/* The phone's clock 37 minutes fast: the page must not care. */
static const char skewed_clock[] =
    "(() => { const D = Date, skew = 37 * 60 * 1000;"
    " function F(...a) { return a.length ? new D(...a) : new D(D.now() + skew); }"
    " F.prototype = D.prototype; F.now = () => D.now() + skew; F.parse = D.parse; F.UTC = D.UTC;"
    " window.Date = F; })();";

SK_TEST_T(buyer_page_counts_down_on_the_servers_clock_and_sends_no_purchase_before_the_start, 180)
{
    struct sk_th_serve s;
    sk_th_serve_start(&s, sk_th_redis_url(), NULL);
    uint64_t aid = sk_th_unique_id(), user = 5150;
    time_t start = time(NULL) + 30; /* room for Chromium's start on a loaded machine (beside
                                     * the strategies bench, 20 s were not enough once) */
    sale(s.port, aid, "Phone X 12GB+256GB 星光色", 100, start, 0);
    struct sk_cdp b;
    sk_cdp_start(&b);
    struct sk_cdp_page p;
    char text[400];
    open_page(&b, &p, s.port, aid, user, "zh-CN,zh", skewed_clock);
    /* Chinese for a Chinese browser; the countdown from the server's clock */
    CHECK_MSG(sk_cdp_wait(&b, &p, "!document.getElementById('countdown').hidden", 28000),
              "no countdown");
    sk_cdp_eval_text(&b, &p, "document.getElementById('status').textContent", text, sizeof text);
    CHECK_STR(text, "距开始还有");
    sk_cdp_eval_text(&b, &p, "document.documentElement.lang", text, sizeof text);
    CHECK_STR(text, "zh-CN");
    sk_cdp_eval_text(&b, &p, "document.getElementById('countdown').getAttribute('datetime')", text,
                     sizeof text);
    long long shown = strtoll(text + 2, NULL, 10);
    long long want = ((long long)start * 1000 - sk_wall_ms() + 999) / 1000;
    CHECK_MSG(shown >= want - 1 && shown <= want + 1,
              "countdown %s, %lld s to the start on the server's clock", text, want);
    /* the button is disabled: clicks and keys send nothing */
    CHECK(sk_cdp_wait(&b, &p, "document.getElementById('buy').disabled", 1000));
    sk_cdp_click(&b, &p, "'#buy'");
    sk_cdp_key(&b, &p, "Enter");
    shot(&b, &p, "1-countdown-zh", 360, 740, 1);
    /* the language switch, by keyboard: Tab to it, Enter */
    tab_to(&b, &p, "lang");
    sk_cdp_key(&b, &p, "Enter");
    CHECK(
        sk_cdp_wait(&b, &p, "document.getElementById('status').textContent === 'Starts in'", 3000));
    shot(&b, &p, "1-countdown-en", 360, 740, 1);

    /* the button lights up at the start, not before; nothing was sent */
    CHECK_MSG(sk_cdp_wait(&b, &p, "!document.getElementById('buy').disabled", 40000),
              "the button never lit up");
    int64_t lit = sk_wall_ms();
    CHECK_EQ(route_count(s.port, "purchase"), 0);
    CHECK_MSG(lit >= (int64_t)start * 1000 && lit <= (int64_t)start * 1000 + 1500,
              "lit %lld ms after the start", (long long)(lit - (int64_t)start * 1000));
    json_t *sent[8];
    CHECK_EQ(requests_of(&b, &p, "/purchase", "POST", sent, 8), 0);

    /* keyboard only: Tab reaches the lit button (the focus stayed on the
     * language switch: the page does not take it away), Enter buys */
    tab_to(&b, &p, "buy");
    sk_cdp_key(&b, &p, "Enter");
    if (sk_cdp_wait(&b, &p, "/processed/.test(document.getElementById('status').textContent)",
                    2000))
        shot(&b, &p, "2-processing-en", 360, 740, 1);
    CHECK_MSG(sk_cdp_wait(&b, &p, "document.getElementById('pay').offsetParent !== null", 20000),
              "no pay button");
    CHECK_EQ(requests_of(&b, &p, "/purchase", "POST", sent, 8), 1);
    const char *key = header_of(sent[0], "Idempotency-Key");
    CHECK_MSG(key && strlen(key) == 32, "Idempotency-Key %s", key ? key : "(none)");
    CHECK_EQ(route_count(s.port, "purchase"), 1);
    sk_cdp_eval_text(&b, &p, "document.getElementById('status').textContent", text, sizeof text);
    CHECK_STR(text, "Order created: please pay");
    /* the pay deadline counts down: 15 minutes */
    sk_cdp_eval_text(&b, &p, "document.getElementById('countdown').getAttribute('datetime')", text,
                     sizeof text);
    long long left = strtoll(text + 2, NULL, 10);
    CHECK_MSG(left > 880 && left <= 900, "pay deadline in %s", text);
    shot(&b, &p, "3-order-created-en", 360, 740, 1);
    /* the focus moved to pay: Enter pays */
    CHECK(sk_cdp_wait(&b, &p, "document.activeElement === document.getElementById('pay')", 3000));
    sk_cdp_key(&b, &p, "Enter");
    CHECK(sk_cdp_wait(
        &b, &p, "document.getElementById('status').textContent === 'Paid. Thank you!'", 10000));
    char st[64];
    CHECK_EQ(db_orders(&s, aid, user, st, sizeof st), 1);
    CHECK_STR(st, "paid");
    shot(&b, &p, "4-paid-en", 360, 740, 1);
    /* the announcements went to the live region */
    sk_cdp_eval_text(&b, &p, "document.getElementById('announce').getAttribute('aria-live')", text,
                     sizeof text);
    CHECK_STR(text, "polite");
    sk_cdp_eval_text(&b, &p, "document.getElementById('announce').textContent", text, sizeof text);
    CHECK_STR(text, "Paid. Thank you!");
    /* nothing but this server was asked for anything */
    size_t i;
    json_t *ev;
    json_array_foreach(b.events, i, ev)
    {
        if (strcmp(json_string_value(json_object_get(ev, "method")), "Network.requestWillBeSent"))
            continue;
        const char *u = json_string_value(
            json_object_get(json_object_get(json_object_get(ev, "params"), "request"), "url"));
        char origin[64];
        snprintf(origin, sizeof origin, "http://127.0.0.1:%d/", s.port);
        CHECK_MSG(!strncmp(u, origin, strlen(origin)), "the page asked %s", u);
    }
    sk_cdp_stop(&b);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
}

/* The number in an element's text (digits only; -1 when none). */
static long long dom_int(struct sk_cdp *b, const struct sk_cdp_page *p, const char *id)
{
    char expr[160], text[120];
    snprintf(expr, sizeof expr, "document.getElementById('%s').textContent", id);
    sk_cdp_eval_text(b, p, expr, text, sizeof text);
    long long v = 0;
    int digits = 0;
    for (const char *c = text; *c; c++)
        if (*c >= '0' && *c <= '9') {
            v = v * 10 + (*c - '0');
            digits++;
        }
    return digits ? v : -1;
}

static const char waiting_js[] = "!document.getElementById('queue').hidden";
static const char admitted_js[] =
    "document.getElementById('status').textContent === 'It is your turn!'";

/* Buyers 1..n join the line of activity aid through the API (and never
 * come back). */
static void api_join(int port, uint64_t aid, uint64_t n)
{
    char path[96], h[48];
    struct sk_th_resp r;
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/queue", aid);
    for (uint64_t user = 1; user <= n; user++) {
        snprintf(h, sizeof h, "X-User-Id: %" PRIu64 "\r\n", user);
        CHECK_EQ(req(port, "POST", path, h, NULL, &r), 200);
    }
}

/* Every GET of the queue by the page came no sooner than the answer
 * before it said (poll_after_ms), and not much later: the page paces
 * itself by the server. Returns how many gaps were checked. */
static int by_time(const void *a, const void *b)
{
    double x = json_number_value(json_object_get(*(json_t *const *)a, "timestamp")),
           y = json_number_value(json_object_get(*(json_t *const *)b, "timestamp"));
    return x < y ? -1 : x > y;
}

static int check_queue_pace(struct sk_cdp *b, const struct sk_cdp_page *p)
{
    /* the join's answer paces the first poll as a poll's paces the next */
    json_t *polls[256];
    int n = requests_of(b, p, "/queue", "POST", polls, 128), checked = 0;
    n += requests_of(b, p, "/queue", "GET", polls + n, 128);
    qsort(polls, (size_t)n, sizeof polls[0], by_time);
    for (int i = 0; i + 1 < n; i++) {
        const char *rid = json_string_value(json_object_get(polls[i], "requestId"));
        json_t *done = event_for(b, p, "Network.loadingFinished", rid);
        if (!done) continue;
        json_t *body =
            sk_cdp_call(b, p, "Network.getResponseBody", json_pack("{s:s}", "requestId", rid));
        json_error_t e;
        json_t *ans = json_loads(json_string_value(json_object_get(body, "body")), 0, &e);
        json_decref(body);
        json_t *pa = json_object_get(ans, "poll_after_ms");
        if (json_is_integer(pa)) {
            double gap_ms = (json_number_value(json_object_get(polls[i + 1], "timestamp")) -
                             json_number_value(json_object_get(done, "timestamp"))) *
                            1000.0;
            double want = (double)json_integer_value(pa);
            CHECK_MSG(gap_ms >= want - 5, "polled %.0f ms after an answer that said %.0f", gap_ms,
                      want);
            CHECK_MSG(gap_ms <= want * 1.1 + 500, "polled %.0f ms after an answer that said %.0f",
                      gap_ms, want);
            checked++;
        }
        json_decref(ans);
    }
    return checked;
}

SK_TEST_T(buyer_page_waiting_room_gives_passes_in_place_order_at_the_servers_pace, 240)
{
    struct sk_th_serve s;
    sk_th_serve_start(&s, sk_th_redis_url(), NULL);
    uint64_t aid = sk_th_unique_id();
    sale(s.port, aid, "Console", 50, time(NULL), 1);
    /* buyers ahead, who never come back for their passes: at 1 pass/s
     * since the start, the pages are in line (not admitted at once) as
     * long as they join within 24 s, however slowly Chromium starts */
    api_join(s.port, aid, 24);
    struct sk_cdp b;
    sk_cdp_start(&b);
    struct sk_cdp_page pg[3];
    uint64_t users[3] = {901, 902, 903};
    long long place[3];
    for (int i = 0; i < 3; i++) {
        open_page(&b, &pg[i], s.port, aid, users[i], "en-US,en", NULL);
        CHECK_MSG(sk_cdp_wait(&b, &pg[i], waiting_js, 30000), "page %d not in line", i);
        place[i] = dom_int(&b, &pg[i], "q-place");
        if (i) CHECK_MSG(place[i] > place[i - 1], "places %lld then %lld", place[i - 1], place[i]);
    }
    shot(&b, &pg[2], "5-waiting-room-en", 360, 740, 1);
    /* a reload keeps the place */
    if (!sk_cdp_wait(&b, &pg[1], admitted_js, 0)) {
        sk_cdp_reload(&b, &pg[1]);
        CHECK(sk_cdp_wait(&b, &pg[1], waiting_js, 10000) ||
              sk_cdp_wait(&b, &pg[1], admitted_js, 100));
        if (sk_cdp_wait(&b, &pg[1], waiting_js, 0))
            CHECK_EQ(dom_int(&b, &pg[1], "q-place"), place[1]);
    }
    /* positions fall; passes come in place order */
    int64_t admitted_at[3] = {0, 0, 0};
    long long last_pos[3] = {-1, -1, -1};
    int falls = 0, left = 3;
    int64_t deadline = sk_mono_ms() + 60000;
    while (left > 0) {
        CHECK_MSG(sk_mono_ms() < deadline, "not every page got a pass in 60 s");
        for (int i = 0; i < 3; i++) {
            if (admitted_at[i]) continue;
            if (sk_cdp_wait(&b, &pg[i], admitted_js, 0)) {
                admitted_at[i] = sk_mono_ms();
                left--;
                continue;
            }
            long long pos = dom_int(&b, &pg[i], "q-pos");
            if (pos < 0) continue;
            CHECK_MSG(last_pos[i] < 0 || pos <= last_pos[i], "page %d went back from %lld to %lld",
                      i, last_pos[i], pos);
            falls += last_pos[i] >= 0 && pos < last_pos[i];
            last_pos[i] = pos;
        }
        sk_cdp_pump(&b, 30);
    }
    CHECK_MSG(falls >= 3, "positions fell %d times", falls);
    CHECK_MSG(admitted_at[0] < admitted_at[1] && admitted_at[1] < admitted_at[2],
              "passes out of place order: %lld %lld %lld", (long long)admitted_at[0],
              (long long)admitted_at[1], (long long)admitted_at[2]);
    shot(&b, &pg[2], "6-your-turn-en", 360, 740, 1);
    /* each buys with its pass */
    for (int i = 0; i < 3; i++) {
        sk_cdp_click(&b, &pg[i], "'#buy'");
        CHECK_MSG(sk_cdp_wait(&b, &pg[i], "document.getElementById('order-id').textContent !== ''",
                              15000),
                  "page %d did not buy", i);
        json_t *sent[4];
        CHECK_EQ(requests_of(&b, &pg[i], "/purchase", "POST", sent, 4), 1);
        CHECK(header_of(sent[0], "X-Queue-Pass") != NULL);
    }
    /* at the server's pace, exactly, never sooner */
    /* (not the reloaded page: a reload asks at once, by design) */
    int gaps = check_queue_pace(&b, &pg[0]) + check_queue_pace(&b, &pg[2]);
    CHECK_MSG(gaps >= 4, "only %d polls to check", gaps);
    sk_cdp_stop(&b);
    char st[64];
    int64_t until = sk_mono_ms() + 10000;
    for (int i = 0; i < 3; i++) {
        while (db_orders(&s, aid, users[i], st, sizeof st) < 1 && sk_mono_ms() < until)
            sk_th_nap_ms(50);
        CHECK_EQ(db_orders(&s, aid, users[i], st, sizeof st), 1);
    }
    CHECK_EQ(route_count(s.port, "purchase"), 3);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
}

/* A buyer with a pass buys through the API. */
static void api_buy_with_pass(int port, uint64_t aid, uint64_t user)
{
    char path[96], h[300];
    struct sk_th_resp r;
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/queue", aid);
    snprintf(h, sizeof h, "X-User-Id: %" PRIu64 "\r\n", user);
    int64_t deadline = sk_mono_ms() + 15000;
    for (;;) {
        CHECK_EQ(req(port, "GET", path, h, NULL, &r), 200);
        if (strstr(r.body, "\"admitted\"")) break;
        CHECK_MSG(sk_mono_ms() < deadline, "no pass for %" PRIu64 ": %s", user, r.body);
        sk_th_nap_ms(100);
    }
    char *pass = strstr(r.body, "\"pass\":\"") + 8;
    *strchr(pass, '"') = 0;
    snprintf(h, sizeof h, "X-User-Id: %" PRIu64 "\r\nX-Queue-Pass: %s\r\n", user, pass);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", aid);
    CHECK_EQ(req(port, "POST", path, h, "{}", &r), 200);
}

SK_TEST_T(buyer_page_sold_out_reaches_every_open_page_within_seconds, 240)
{
    struct sk_th_serve s;
    sk_th_serve_start(&s, sk_th_redis_url(), NULL);
    uint64_t plain = sk_th_unique_id(), room = sk_th_unique_id();
    sale(s.port, plain, "Sneakers", 4, time(NULL) - 5, 0);
    sale(s.port, room, "Sneakers (line)", 2, time(NULL) - 5, 1);
    /* the line: two buyers who will buy it out, thirty more, then the pages */
    api_join(s.port, room, 32);
    struct sk_cdp b;
    sk_cdp_start(&b);
    struct sk_cdp_page pg[5];
    for (int i = 0; i < 5; i++) {
        open_page(&b, &pg[i], s.port, i < 3 ? plain : room, 960 + (uint64_t)i,
                  i % 2 ? "zh-CN,zh" : "en-US,en", NULL);
        CHECK_MSG(sk_cdp_wait(&b, &pg[i],
                              i < 3 ? "!document.getElementById('buy').disabled" : waiting_js,
                              10000),
                  "page %d not ready", i);
    }
    shot(&b, &pg[0], "0-on-sale-en", 360, 740, 1);
    /* both sales sell out through the API */
    api_buy(s.port, plain, 4);
    int64_t sold_plain = sk_mono_ms();
    api_buy_with_pass(s.port, room, 1);
    api_buy_with_pass(s.port, room, 2);
    int64_t sold_room = sk_mono_ms();
    /* every page says so within a few seconds, none asked the purchase route */
    const char *sold_js = "['Sold out', '已售罄'].includes(document.getElementById('status')"
                          ".textContent) && document.getElementById('buy').disabled";
    int64_t seen[5] = {0};
    int left = 5;
    while (left > 0) {
        for (int i = 0; i < 5; i++)
            if (!seen[i] && sk_cdp_wait(&b, &pg[i], sold_js, 0)) {
                seen[i] = sk_mono_ms() - (i < 3 ? sold_plain : sold_room);
                left--;
            }
        CHECK_MSG(sk_mono_ms() - sold_room < 15000, "a page still does not say sold out");
        sk_cdp_pump(&b, 50);
    }
    for (int i = 0; i < 5; i++) {
        printf("# page %d learned the sell-out after %lld ms\n", i, (long long)seen[i]);
        CHECK_MSG(seen[i] <= 6000, "page %d learned it after %lld ms", i, (long long)seen[i]);
        json_t *sent[2];
        CHECK_EQ(requests_of(&b, &pg[i], "/purchase", "POST", sent, 2), 0);
    }
    /* the pages far back in the line learned it from the live read, not the queue */
    json_t *polls[64];
    CHECK(requests_of(&b, &pg[3], "/live", "GET", polls, 64) >= 2);
    CHECK_EQ(route_count(s.port, "purchase"), 6);
    shot(&b, &pg[1], "7-sold-out-zh", 360, 740, 1);
    shot(&b, &pg[0], "7-sold-out-en", 360, 740, 1);
    sk_cdp_stop(&b);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
}

SK_TEST_T(buyer_page_retries_a_503_with_the_same_key_and_buys_exactly_once, 240)
{
    struct sk_th_redis rd;
    sk_th_redis_start(&rd, NULL);
    struct sk_th_serve s;
    const char *extra[] = {"--redis-timeout-ms", "500", NULL};
    sk_th_serve_start(&s, rd.url, extra);
    uint64_t aid = sk_th_unique_id(), user = 777;
    sale(s.port, aid, "Limited edition", 10, time(NULL) - 5, 0);
    struct sk_cdp b;
    sk_cdp_start(&b);
    struct sk_cdp_page p;
    open_page(&b, &p, s.port, aid, user, "en-US,en", NULL);
    CHECK(sk_cdp_wait(&b, &p, "!document.getElementById('buy').disabled", 10000));
    /* Redis stops answering; the buyer clicks once */
    CHECK_EQ(kill(rd.pid, SIGSTOP), 0);
    sk_cdp_click(&b, &p, "'#buy'");
    CHECK_MSG(sk_cdp_wait(&b, &p,
                          "['The service is busy', 'Connection lost', 'The sale is recovering']"
                          ".includes(document.getElementById('status').textContent)",
                          10000),
              "the page shows no retry");
    shot(&b, &p, "8-retrying-en", 360, 740, 1);
    json_t *sent[32];
    int64_t deadline = sk_mono_ms() + 15000;
    while (requests_of(&b, &p, "/purchase", "POST", sent, 32) < 2) {
        CHECK_MSG(sk_mono_ms() < deadline, "no second attempt");
        sk_cdp_pump(&b, 50);
    }
    CHECK_EQ(kill(rd.pid, SIGCONT), 0);
    CHECK_MSG(sk_cdp_wait(&b, &p, "document.getElementById('pay').offsetParent !== null", 40000),
              "no order after Redis came back");
    int n = requests_of(&b, &p, "/purchase", "POST", sent, 32);
    CHECK(n >= 2);
    const char *key = header_of(sent[0], "Idempotency-Key");
    CHECK(key && strlen(key) == 32);
    int answered_503 = 0;
    for (int i = 0; i < n; i++) {
        CHECK_MSG(!strcmp(header_of(sent[i], "Idempotency-Key"), key),
                  "attempt %d used another key", i);
        json_t *resp = event_for(&b, &p, "Network.responseReceived",
                                 json_string_value(json_object_get(sent[i], "requestId")));
        long long st =
            resp ? json_integer_value(json_object_get(json_object_get(resp, "response"), "status"))
                 : 0;
        answered_503 += st == 503;
        if (i == n - 1) CHECK_EQ(st, 200);
    }
    CHECK_MSG(answered_503 >= 1, "no attempt was answered 503");
    printf("# %d attempts with one key, %d answered 503\n", n, answered_503);
    sk_cdp_stop(&b);
    /* exactly one order, in the database */
    char st[64];
    deadline = sk_mono_ms() + 10000;
    while (db_orders(&s, aid, user, st, sizeof st) < 1 && sk_mono_ms() < deadline)
        sk_th_nap_ms(50);
    CHECK_EQ(db_orders(&s, aid, user, st, sizeof st), 1);
    CHECK_STR(st, "created");
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
    sk_th_redis_stop(&rd, 1);
}

/* Requests a page sent between two instants (Network timestamps, s). */
static int sent_between(const struct sk_cdp *b, const struct sk_cdp_page *p, double t0, double t1)
{
    json_t *all[512];
    int n = requests_of(b, p, "/api/", "GET", all, 512), k = 0;
    for (int i = 0; i < n; i++) {
        double t = json_number_value(json_object_get(all[i], "timestamp"));
        k += t >= t0 && t < t1;
    }
    json_t *posts[64];
    int m = requests_of(b, p, "/api/", "POST", posts, 64);
    for (int i = 0; i < m; i++) {
        double t = json_number_value(json_object_get(posts[i], "timestamp"));
        k += t >= t0 && t < t1;
    }
    return k;
}

/* What a waiting page costs the servers: its requests per second before
 * the start, on an open sale and far back in a line, over 40 s each (the
 * figure BENCHMARKS.md quotes). A page must stay well under one. */
SK_TEST_T(buyer_page_a_waiting_page_sends_well_under_one_request_a_second, 240)
{
    struct sk_th_serve s;
    sk_th_serve_start(&s, sk_th_redis_url(), NULL);
    uint64_t soon = sk_th_unique_id(), open = sk_th_unique_id(), room = sk_th_unique_id();
    sale(s.port, soon, "Before the start", 10, time(NULL) + 900, 0);
    sale(s.port, open, "On sale", 10, time(NULL) - 5, 0);
    sale(s.port, room, "In line", 10, time(NULL) - 5, 1);
    api_join(s.port, room, 200);
    struct sk_cdp b;
    sk_cdp_start(&b);
    const uint64_t ids[3] = {soon, open, room};
    const char *names[3] = {"before the start", "open sale", "far back in a line"};
    struct sk_cdp_page pg[6];
    for (int i = 0; i < 6; i++)
        open_page(&b, &pg[i], s.port, ids[i / 2], 3000 + (uint64_t)i, "en-US,en", NULL);
    CHECK(sk_cdp_wait(&b, &pg[5], waiting_js, 10000) && sk_cdp_wait(&b, &pg[4], waiting_js, 10000));
    /* the window starts after the loads (the clock samples, the first
     * reads): at the newest event's time */
    sk_cdp_pump(&b, 1000);
    double t0 = 0;
    size_t i;
    json_t *ev;
    json_array_foreach(b.events, i, ev)
    {
        double t = json_number_value(json_object_get(json_object_get(ev, "params"), "timestamp"));
        if (t > t0) t0 = t;
    }
    const int window_s = 40;
    sk_cdp_pump(&b, window_s * 1000);
    for (int k = 0; k < 3; k++) {
        int n = sent_between(&b, &pg[2 * k], t0, t0 + window_s) +
                sent_between(&b, &pg[2 * k + 1], t0, t0 + window_s);
        double per_s = (double)n / 2.0 / window_s;
        printf("# a page %s: %.3f requests/s (%d requests by 2 pages in %d s)\n", names[k], per_s,
               n, window_s);
        CHECK_MSG(per_s > 0 && per_s < 0.5, "%s: %.3f requests/s per page", names[k], per_s);
    }
    sk_cdp_stop(&b);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
}

/* ---- the proof of work (docs/challenges.md) ------------------------------ */

/* Counts the Workers the page makes and every time the progress bar shows,
 * before the page's own script runs. */
static const char pow_watch[] =
    "window.__workers = 0; window.__powShown = 0;"
    "(() => { const W = window.Worker;"
    " window.Worker = function (u, o) { window.__workers++; return new W(u, o); };"
    " document.addEventListener('DOMContentLoaded', () => {"
    "  const e = document.getElementById('pow');"
    "  new MutationObserver(() => { if (!e.hidden) window.__powShown++; })"
    "   .observe(e, {attributes: true}); }); })();";

/* The page of a sale asking `bits` of proof of work, opened and its buy
 * button clicked as soon as it may be: the purchase goes out with the
 * challenge its Web Workers solved and is admitted. Returns the solve's
 * time as the page measured it (ms from the challenge's answer to the
 * nonce found). */
static double pow_buy(struct sk_cdp *b, const struct sk_th_serve *s, int bits, uint64_t user)
{
    uint64_t aid = sk_th_unique_id();
    char more[64];
    snprintf(more, sizeof more, ",\"challenge\":{\"pow_bits\":%d}", bits);
    sale_with(s->port, aid, "Proof of work", 10, time(NULL) - 5, 0, more);
    struct sk_cdp_page p;
    open_page(b, &p, s->port, aid, user, "en-US,en", pow_watch);
    CHECK(sk_cdp_wait(b, &p, "!document.getElementById('buy').disabled", 20000));
    sk_cdp_click(b, &p, "'#buy'");
    CHECK_MSG(sk_cdp_wait(b, &p, "document.getElementById('pay').offsetParent !== null", 120000),
              "no order at %d bits", bits);
    json_t *ch[4], *buy[4];
    CHECK_EQ(requests_of(b, &p, "/challenge", "GET", ch, 4), 1);
    CHECK_EQ(requests_of(b, &p, "/purchase", "POST", buy, 4), 1);
    /* what it sent is "<the challenge handed out>.<nonce>" */
    const char *x = header_of(buy[0], "X-Challenge");
    CHECK_MSG(x && strlen(x) > 60, "purchase without X-Challenge");
    json_t *resp = event_for(b, &p, "Network.responseReceived",
                             json_string_value(json_object_get(buy[0], "requestId")));
    CHECK(resp);
    CHECK_EQ(json_integer_value(json_object_get(json_object_get(resp, "response"), "status")), 200);
    /* the page's own record of its last solve (performance.now) */
    char ms[32];
    sk_cdp_eval_text(b, &p, "document.getElementById('pow').dataset.ms || ''", ms, sizeof ms);
    CHECK_MSG(ms[0], "the page recorded no solve");
    char w[32];
    sk_cdp_eval_text(b, &p, "String(window.__workers)", w, sizeof w);
    CHECK_MSG(atoi(w) >= 1, "solved without a Web Worker (%s)", w);
    return atof(ms);
}

static const char status_js[] = "document.getElementById('status').textContent";

/* Whether user is registered for aid, as the API answers it. */
static int api_registered(int port, uint64_t aid, uint64_t user)
{
    char path[96], h[48];
    struct sk_th_resp r;
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/register", aid);
    snprintf(h, sizeof h, "X-User-Id: %" PRIu64 "\r\n", user);
    int st = req(port, "GET", path, h, NULL, &r);
    CHECK_MSG(st == 200 || (st == 403 && strstr(r.body, "not_registered")), "%d %s", st, r.body);
    return st == 200 && strstr(r.body, "\"registered\":true") != NULL;
}

/* A sale that takes registrations (docs/fairness.md): the page counts down
 * to the registration's opening, then offers to register and counts down to
 * its end; registered, it says so and counts down to the sale, and buys at
 * the start; a buyer who did not register is told so and cannot buy. */
SK_TEST_T(buyer_page_shows_the_registration_state_registers_and_buys_registered_only, 240)
{
    struct sk_th_serve s;
    sk_th_serve_start(&s, sk_th_redis_url(), NULL);
    struct sk_cdp b;
    sk_cdp_start(&b);
    uint64_t aid = sk_th_unique_id(), user = 6161, other = 6162;
    time_t now = time(NULL), rs = now + 10, re = now + 22;
    char more[160], text[400];
    reg_fields(more, sizeof more, rs, re, "");
    sale_with(s.port, aid, "Registered buyers only", 10, re, 0, more);
    struct sk_cdp_page p, q;
    open_page(&b, &p, s.port, aid, user, "en-US,en", NULL);
    /* before the window: when it opens, with a countdown; nothing to click */
    CHECK_MSG(sk_cdp_wait(&b, &p,
                          "/^Registration opens at/.test(document.getElementById('status')"
                          ".textContent)",
                          9000),
              "no 'registration opens' state");
    CHECK(sk_cdp_wait(&b, &p, "!document.getElementById('countdown').hidden", 2000));
    CHECK(sk_cdp_wait(&b, &p, "document.getElementById('buy').disabled", 1000));
    shot(&b, &p, "10-registration-opens-en", 360, 740, 1);
    /* the window opens: register, counting down to its end */
    CHECK_MSG(sk_cdp_wait(&b, &p,
                          "document.getElementById('buy').dataset.action === 'register'"
                          " && !document.getElementById('buy').disabled",
                          15000),
              "no register button");
    sk_cdp_eval_text(&b, &p, status_js, text, sizeof text);
    CHECK_MSG(!strncmp(text, "Registration is open until", 26), "status: %s", text);
    shot(&b, &p, "10-registration-open-en", 360, 740, 1);
    CHECK_EQ(api_registered(s.port, aid, user), 0);
    sk_cdp_click(&b, &p, "'#buy'");
    CHECK_MSG(sk_cdp_wait(&b, &p,
                          "document.getElementById('status').textContent === "
                          "'You are registered'",
                          10000),
              "not shown registered");
    sk_cdp_eval_text(&b, &p, "document.getElementById('detail').textContent", text, sizeof text);
    CHECK_MSG(!strncmp(text, "The sale starts at", 18), "detail: %s", text);
    CHECK(sk_cdp_wait(&b, &p, "!document.getElementById('countdown').hidden", 1000));
    CHECK_EQ(api_registered(s.port, aid, user), 1);
    shot(&b, &p, "10-registered-en", 360, 740, 1);
    /* a buyer who never registers: told at the start, never able to buy */
    open_page(&b, &q, s.port, aid, other, "en-US,en", NULL);
    /* the start: the registered buyer buys */
    CHECK_MSG(sk_cdp_wait(&b, &p,
                          "!document.getElementById('buy').disabled && "
                          "document.getElementById('buy').dataset.action === 'buy'",
                          30000),
              "the buy button never lit up");
    sk_cdp_click(&b, &p, "'#buy'");
    int ordered =
        sk_cdp_wait(&b, &p, "document.getElementById('pay').offsetParent !== null", 30000);
    sk_cdp_eval_text(&b, &p, status_js, text, sizeof text);
    CHECK_MSG(ordered, "no order; the page says: %s", text);
    CHECK_MSG(sk_cdp_wait(&b, &q,
                          "document.getElementById('status').textContent === "
                          "'You did not register'",
                          20000),
              "the unregistered buyer was not told");
    CHECK(sk_cdp_wait(&b, &q, "document.getElementById('buy').disabled", 1000));
    shot(&b, &q, "10-not-registered-en", 360, 740, 1);
    json_t *buy[2];
    CHECK_EQ(requests_of(&b, &q, "/purchase", "POST", buy, 2), 0);
    char st[64];
    CHECK_EQ(db_orders_soon(&s, aid, user), 1);
    CHECK_EQ(db_orders(&s, aid, other, st, sizeof st), 0);
    sk_cdp_stop(&b);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
}

/* The page solves the sale's proof of work in Web Workers, showing its
 * progress, and buys with it: one order in the database. */
SK_TEST_T(buyer_page_solves_the_proof_of_work_in_a_web_worker_and_buys, 240)
{
    struct sk_th_serve s;
    sk_th_serve_start(&s, sk_th_redis_url(), NULL);
    struct sk_cdp b;
    sk_cdp_start(&b);
    uint64_t aid = sk_th_unique_id(), user = 4242;
    sale_with(s.port, aid, "Proof of work", 10, time(NULL) - 5, 0,
              ",\"challenge\":{\"pow_bits\":18}");
    struct sk_cdp_page p;
    open_page(&b, &p, s.port, aid, user, "en-US,en", pow_watch);
    CHECK(sk_cdp_wait(&b, &p, "!document.getElementById('buy').disabled", 20000));
    /* the page starts solving before the click (a sale without a waiting
     * room), with its progress bar shown meanwhile */
    CHECK_MSG(sk_cdp_wait(&b, &p, "window.__powShown > 0 && window.__workers > 0", 20000),
              "no worker or no progress shown");
    shot(&b, &p, "9-proof-of-work-en", 360, 740, 1);
    sk_cdp_click(&b, &p, "'#buy'");
    CHECK_MSG(sk_cdp_wait(&b, &p, "document.getElementById('pay').offsetParent !== null", 60000),
              "no order");
    CHECK(sk_cdp_wait(&b, &p, "document.getElementById('pow').hidden", 1000));
    json_t *buy[4];
    CHECK_EQ(requests_of(&b, &p, "/purchase", "POST", buy, 4), 1);
    CHECK(header_of(buy[0], "X-Challenge"));
    CHECK_EQ(db_orders_soon(&s, aid, user), 1);
    /* and at a few difficulties, each bought with its own solution */
    for (int bits = 8; bits <= 12; bits += 4)
        pow_buy(&b, &s, bits, user + (uint64_t)bits);
    sk_cdp_stop(&b);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
}

/* The cost for a human (docs/challenges.md): SECKILL_POW_BENCH=N solves N
 * challenges in Chromium at each of 12..20 bits (even), printing the median
 * and the mean solve time. Without it, nothing runs. */
SK_TEST_T(buyer_page_pow_solve_times, 3000)
{
    const char *n_env = getenv("SECKILL_POW_BENCH");
    int n = n_env ? atoi(n_env) : 0;
    if (n <= 0) return;
    if (n > 20) n = 20;
    struct sk_th_serve s;
    sk_th_serve_start(&s, sk_th_redis_url(), NULL);
    struct sk_cdp b;
    sk_cdp_start(&b);
    char hc[16];
    struct sk_cdp_page p0;
    open_page(&b, &p0, s.port, 1, 1, "en-US,en", NULL);
    sk_cdp_eval_text(&b, &p0, "String(navigator.hardwareConcurrency)", hc, sizeof hc);
    printf("# chromium: hardwareConcurrency %s (workers min(4, that))\n", hc);
    for (int bits = 12; bits <= 20; bits += 2) {
        double t[20], sum = 0;
        for (int i = 0; i < n; i++) {
            t[i] = pow_buy(&b, &s, bits, 10000 + (uint64_t)(bits * 100 + i));
            sum += t[i];
        }
        for (int i = 1; i < n; i++)
            for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
                double x = t[j];
                t[j] = t[j - 1];
                t[j - 1] = x;
            }
        printf("# pow %d bits: median %.0f ms, mean %.0f ms, min %.0f, max %.0f (%d solves)\n",
               bits, t[n / 2], sum / n, t[0], t[n - 1], n);
    }
    sk_cdp_stop(&b);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
}

/* Rows of the registrations table for aid in serve's SQLite database: the
 * buyer's (uid) or, with uid 0, all of them. */
static int db_registrations(const struct sk_th_serve *s, uint64_t aid, uint64_t uid)
{
    sqlite3 *db;
    CHECK(sqlite3_open_v2(s->db + 7, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    sqlite3_stmt *q;
    CHECK(sqlite3_prepare_v2(db,
                             "SELECT count(*) FROM registrations WHERE activity_id = ?1 "
                             "AND (?2 = 0 OR user_id = ?2)",
                             -1, &q, NULL) == SQLITE_OK);
    sqlite3_bind_int64(q, 1, (sqlite3_int64)aid);
    sqlite3_bind_int64(q, 2, (sqlite3_int64)uid);
    CHECK(sqlite3_step(q) == SQLITE_ROW);
    int n = sqlite3_column_int(q, 0);
    sqlite3_finalize(q);
    sqlite3_close(db);
    return n;
}

/* The page's Register button, on an open registration window: clicked, and
 * the page shown registered (the status answer it got). */
static void page_registers(struct sk_cdp *b, struct sk_cdp_page *p)
{
    CHECK_MSG(sk_cdp_wait(b, p,
                          "document.getElementById('buy').dataset.action === 'register'"
                          " && !document.getElementById('buy').disabled",
                          20000),
              "no register button");
    sk_cdp_click(b, p, "'#buy'");
    char text[400];
    int ok = sk_cdp_wait(b, p,
                         "document.getElementById('status').textContent === "
                         "'You are registered'",
                         60000);
    sk_cdp_eval_text(b, p, status_js, text, sizeof text);
    CHECK_MSG(ok, "not shown registered; the page says: %s", text);
}

/* A sale that takes registrations and asks a proof of work: the page's
 * Register button solves the challenge in its Web Workers and sends it with
 * the registration (the server refuses one without: challenge_required), so
 * the buyer is registered once in the database. */
SK_TEST_T(buyer_page_registers_with_the_sales_proof_of_work, 240)
{
    struct sk_th_serve s;
    sk_th_serve_start(&s, sk_th_redis_url(), NULL);
    struct sk_cdp b;
    sk_cdp_start(&b);
    uint64_t aid = sk_th_unique_id(), user = 7171;
    time_t now = time(NULL), re = now + 300;
    char more[200];
    reg_fields(more, sizeof more, now - 5, re, ",\"challenge\":{\"pow_bits\":12}");
    sale_with(s.port, aid, "Registered buyers, proof of work", 10, re, 0, more);
    struct sk_cdp_page p;
    open_page(&b, &p, s.port, aid, user, "en-US,en", pow_watch);
    page_registers(&b, &p);
    json_t *reg[4], *ch[4];
    CHECK_EQ(requests_of(&b, &p, "/register", "POST", reg, 4), 1);
    CHECK_MSG(requests_of(&b, &p, "/challenge", "GET", ch, 4) >= 1, "no challenge asked");
    const char *x = header_of(reg[0], "X-Challenge");
    CHECK_MSG(x && strlen(x) > 60, "registration without X-Challenge");
    json_t *resp = event_for(&b, &p, "Network.responseReceived",
                             json_string_value(json_object_get(reg[0], "requestId")));
    CHECK(resp);
    CHECK_EQ(json_integer_value(json_object_get(json_object_get(resp, "response"), "status")), 200);
    char w[32];
    sk_cdp_eval_text(&b, &p, "String(window.__workers)", w, sizeof w);
    CHECK_MSG(atoi(w) >= 1, "solved without a Web Worker (%s)", w);
    CHECK_EQ(api_registered(s.port, aid, user), 1);
    /* the store's copy is written off the loop, after Redis took it */
    int64_t deadline = sk_mono_ms() + 10000;
    while (db_registrations(&s, aid, user) < 1 && sk_mono_ms() < deadline)
        sk_th_nap_ms(50);
    CHECK_EQ(db_registrations(&s, aid, user), 1);
    CHECK_EQ(db_registrations(&s, aid, 0), 1);
    sk_cdp_stop(&b);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
}

/* The draw through the page: two buyers register on their pages for one
 * unit; after `seckill activity draw` the winner's page says it won and
 * buys with the right it was handed (one order in the database), the
 * other's page shows its place, keeps its buy button off and sends no
 * purchase. */
SK_TEST_T(buyer_page_the_draw_winner_buys_and_the_other_sees_its_place, 240)
{
    struct sk_th_serve s;
    sk_th_serve_start(&s, sk_th_redis_url(), NULL);
    struct sk_cdp b;
    sk_cdp_start(&b);
    uint64_t aid = sk_th_unique_id(), users[2] = {8181, 8182};
    time_t now = time(NULL), re = now + 25;
    char more[240], text[400];
    reg_fields(more, sizeof more, now - 5, re, ",\"allocation\":\"draw\",\"draw\":{\"box_s\":600}");
    sale_with(s.port, aid, "One unit, drawn", 1, re, 0, more);
    struct sk_cdp_page p[2];
    for (int i = 0; i < 2; i++) {
        open_page(&b, &p[i], s.port, aid, users[i], "en-US,en", NULL);
        page_registers(&b, &p[i]);
    }
    CHECK_MSG(time(NULL) < re, "registration closed before both pages registered");
    /* registration over, no draw yet: the pages wait for it, nothing to buy */
    for (int i = 0; i < 2; i++) {
        int waits = sk_cdp_wait(&b, &p[i],
                                "document.getElementById('status').textContent === "
                                "'Waiting for the draw' && document.getElementById('buy').disabled",
                                30000);
        sk_cdp_eval_text(&b, &p[i], status_js, text, sizeof text);
        CHECK_MSG(waits, "before the draw, page %d says: %s", i, text);
    }
    shot(&b, &p[0], "11-draw-pending-en", 360, 740, 1);
    /* the draw, once registration has closed (the CLI refuses it before) */
    while (time(NULL) <= re)
        sk_th_nap_ms(100);
    char out[4096], id[24];
    snprintf(id, sizeof id, "%" PRIu64, aid);
    const char *args[] = {"draw", "--id", id, NULL};
    int rc = sk_th_run_with_db(out, sizeof out, "activity", args, sk_th_redis_url(), s.db);
    CHECK_MSG(rc == 0, "draw: %d %s", rc, out);
    /* who won, from the API (place 1 holds the right) */
    int w = -1;
    for (int i = 0; i < 2; i++) {
        char path[96], h[48];
        struct sk_th_resp r;
        snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/register", aid);
        snprintf(h, sizeof h, "X-User-Id: %" PRIu64 "\r\n", users[i]);
        CHECK_EQ(req(s.port, "GET", path, h, NULL, &r), 200);
        if (strstr(r.body, "\"place\":1,") || strstr(r.body, "\"place\":1}")) w = i;
    }
    CHECK_MSG(w >= 0, "nobody has place 1");
    int l = 1 - w;
    /* the winner's page: it won, the button lights up, it buys */
    int won = sk_cdp_wait(&b, &p[w],
                          "document.getElementById('status').textContent === 'You won the draw!'"
                          " && !document.getElementById('buy').disabled",
                          30000);
    sk_cdp_eval_text(&b, &p[w], status_js, text, sizeof text);
    CHECK_MSG(won, "the winner's page says: %s", text);
    shot(&b, &p[w], "11-draw-won-en", 360, 740, 1);
    /* the other's page: its place, nothing to click */
    int placed = sk_cdp_wait(&b, &p[l],
                             "document.getElementById('status').textContent === "
                             "'Your place in the draw: 2'",
                             30000);
    sk_cdp_eval_text(&b, &p[l], status_js, text, sizeof text);
    CHECK_MSG(placed, "the other page says: %s", text);
    CHECK(sk_cdp_wait(&b, &p[l], "document.getElementById('buy').disabled", 1000));
    shot(&b, &p[l], "11-draw-place-en", 360, 740, 1);
    sk_cdp_click(&b, &p[l], "'#buy'"); /* a click on the disabled button sends nothing */
    sk_cdp_click(&b, &p[w], "'#buy'");
    int ordered =
        sk_cdp_wait(&b, &p[w], "document.getElementById('pay').offsetParent !== null", 30000);
    sk_cdp_eval_text(&b, &p[w], status_js, text, sizeof text);
    CHECK_MSG(ordered, "no order; the winner's page says: %s", text);
    json_t *buy[4];
    CHECK_EQ(requests_of(&b, &p[w], "/purchase", "POST", buy, 4), 1);
    CHECK(header_of(buy[0], "X-Queue-Pass"));
    CHECK_EQ(requests_of(&b, &p[l], "/purchase", "POST", buy, 4), 0);
    char st[64];
    CHECK_EQ(db_orders_soon(&s, aid, users[w]), 1);
    CHECK_EQ(db_orders(&s, aid, users[l], st, sizeof st), 0);
    CHECK_EQ(db_registrations(&s, aid, 0), 2);
    sk_cdp_stop(&b);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
}

/* ---- the CAPTCHA widget ------------------------------------------------- */

/* A sale asking a CAPTCHA (Turnstile) with its proof of work: the page
 * loads the widget's script, renders the widget, takes its token and buys
 * with it; a token siteverify refuses is shown to the buyer as refused.
 *
 * The provider is a stand-in (support/captcha_standin.c): Cloudflare's
 * api.js and siteverify cannot be reached from the test machine, and a
 * real widget would not hand a headless browser a token anyway. Ours
 * offers the page what Turnstile's explicit rendering offers (a global
 * `turnstile` with render/reset/remove/getResponse, the callback given the
 * token) and its siteverify answers in the documented shape. seckill is
 * pointed at it by its own configuration, captcha_script_url (the page's
 * policy allows that origin, and only that one) and captcha_verify_url. */
SK_TEST_T(buyer_page_renders_the_captcha_widget_and_buys_with_its_token, 240)
{
    struct sk_th_captcha widget, verify;
    sk_th_captcha_start(&widget); /* the browser's: the script */
    sk_th_captcha_start(&verify); /* serve's: siteverify */
    char script[128], vurl[96], origin[64];
    snprintf(origin, sizeof origin, "http://127.0.0.1:%d", widget.port);
    snprintf(script, sizeof script, "%s/api.js?render=explicit", origin);
    snprintf(vurl, sizeof vurl, "http://127.0.0.1:%d/siteverify", verify.port);
    const char *extra[] = {"--captcha-provider",
                           "turnstile",
                           "--captcha-site-key",
                           "0x4AAAAAAAstandin",
                           "--captcha-secret",
                           "standin-secret",
                           "--captcha-script-url",
                           script,
                           "--captcha-verify-url",
                           vurl,
                           "--captcha-timeout-ms",
                           "5000",
                           "--captcha-hostname",
                           "shop.example",
                           NULL};
    struct sk_th_serve s;
    sk_th_serve_start(&s, sk_th_redis_url(), extra);
    /* the page's policy: the stand-in's origin for script and frame, none
     * of the provider's own */
    static char raw[1 << 18];
    const char *body;
    size_t blen;
    CHECK_EQ(raw_get(s.port, "/sale/1", "", raw, sizeof raw, &body, &blen), 200);
    char want[160];
    snprintf(want, sizeof want, "script-src 'unsafe-inline' %s;", origin);
    CHECK_MSG(strstr(body, want), "the policy lacks %s", want);
    snprintf(want, sizeof want, "frame-src %s\"", origin);
    CHECK_MSG(strstr(body, want), "the policy lacks %s", want);
    CHECK(!strstr(body, "challenges.cloudflare.com"));

    uint64_t aid = sk_th_unique_id(), buyer = 5151, refused = 5152;
    sale_with(s.port, aid, "Human check", 10, time(NULL) - 5, 0,
              ",\"challenge\":{\"pow_bits\":8,\"captcha\":\"turnstile\"}");
    struct sk_cdp b;
    sk_cdp_start(&b);
    struct sk_cdp_page p;
    open_page(&b, &p, s.port, aid, buyer, "en-US,en", NULL);
    /* the widget is rendered from the configured script, with the site key,
     * and solved (the stand-in solves itself) */
    CHECK_MSG(sk_cdp_wait(&b, &p,
                          "(() => { const w = document.querySelector('#captcha .standin-widget');"
                          " return !!w && w.dataset.solved === '1'"
                          " && !document.getElementById('captcha').hidden; })()",
                          20000),
              "no widget rendered");
    CHECK_EQ(atomic_load(&widget.scripts), 1);
    char text[400];
    sk_cdp_eval_text(&b, &p, "document.getElementById('captcha').textContent", text, sizeof text);
    CHECK_MSG(strstr(text, "0x4AAAAAAAstandin"), "widget: %s", text);
    /* the policy holds in the browser: a script of another origin (the
     * same server under another name) is not loaded */
    char other[400], got[32] = "";
    snprintf(other, sizeof other,
             "window.__other = ''; (() => { const x = document.createElement('script');"
             " x.src = 'http://localhost:%d/api.js'; x.onload = () => window.__other = 'loaded';"
             " x.onerror = () => window.__other = 'blocked'; document.head.appendChild(x); })()",
             widget.port);
    sk_cdp_eval_text(&b, &p, other, text, sizeof text);
    CHECK(sk_cdp_wait(&b, &p, "window.__other !== ''", 10000));
    sk_cdp_eval_text(&b, &p, "window.__other", got, sizeof got);
    CHECK_STR(got, "blocked");
    CHECK_EQ(atomic_load(&widget.scripts), 1);
    shot(&b, &p, "12-captcha-widget-en", 360, 740, 1);
    /* the buyer buys: the purchase carries the widget's token, siteverify is
     * asked once with it and says yes: 200, one order in the database */
    CHECK(sk_cdp_wait(&b, &p, "!document.getElementById('buy').disabled", 20000));
    sk_cdp_click(&b, &p, "'#buy'");
    int ordered =
        sk_cdp_wait(&b, &p, "document.getElementById('pay').offsetParent !== null", 60000);
    sk_cdp_eval_text(&b, &p, status_js, text, sizeof text);
    CHECK_MSG(ordered, "no order; the page says: %s", text);
    json_t *buy[4];
    CHECK_EQ(requests_of(&b, &p, "/purchase", "POST", buy, 4), 1);
    const char *tok = header_of(buy[0], "X-Captcha-Token");
    CHECK_MSG(tok && !strncmp(tok, "standin.purchase.", 17), "token: %s", tok ? tok : "none");
    CHECK(header_of(buy[0], "X-Challenge"));
    json_t *resp = event_for(&b, &p, "Network.responseReceived",
                             json_string_value(json_object_get(buy[0], "requestId")));
    CHECK(resp);
    CHECK_EQ(json_integer_value(json_object_get(json_object_get(resp, "response"), "status")), 200);
    CHECK_EQ(atomic_load(&verify.requests), 1);
    pthread_mutex_lock(&verify.mu);
    CHECK_MSG(strstr(verify.last, "secret=standin-secret") &&
                  strstr(verify.last, "response=standin.purchase."),
              "siteverify got: %s", verify.last);
    pthread_mutex_unlock(&verify.mu);
    CHECK_EQ(db_orders_soon(&s, aid, buyer), 1);
    shot(&b, &p, "12-captcha-bought-en", 360, 740, 1);

    /* siteverify says no: the page shows the refusal, nothing is bought */
    atomic_store(&verify.mode, SK_TH_SV_REFUSE);
    struct sk_cdp_page q;
    open_page(&b, &q, s.port, aid, refused, "en-US,en", NULL);
    CHECK(sk_cdp_wait(&b, &q,
                      "(() => { const w = document.querySelector('#captcha .standin-widget');"
                      " return !!w && w.dataset.solved === '1'; })()",
                      20000));
    CHECK(sk_cdp_wait(&b, &q, "!document.getElementById('buy').disabled", 20000));
    sk_cdp_click(&b, &q, "'#buy'");
    int told = sk_cdp_wait(&b, &q,
                           "document.getElementById('status').textContent === "
                           "'The human check did not pass'",
                           60000);
    sk_cdp_eval_text(&b, &q, status_js, text, sizeof text);
    CHECK_MSG(told, "the refused buyer's page says: %s", text);
    CHECK_EQ(requests_of(&b, &q, "/purchase", "POST", buy, 4), 1);
    resp = event_for(&b, &q, "Network.responseReceived",
                     json_string_value(json_object_get(buy[0], "requestId")));
    CHECK(resp);
    CHECK_EQ(json_integer_value(json_object_get(json_object_get(resp, "response"), "status")), 403);
    CHECK_EQ(atomic_load(&verify.requests), 2);
    shot(&b, &q, "12-captcha-refused-en", 360, 740, 1);
    char st[64];
    CHECK_EQ(db_orders(&s, aid, refused, st, sizeof st), 0);
    CHECK_EQ(db_orders(&s, aid, buyer, st, sizeof st), 1);
    sk_cdp_stop(&b);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
    sk_th_captcha_stop(&widget);
    sk_th_captcha_stop(&verify);
}
