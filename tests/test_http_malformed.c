/* test_http_malformed.c - the malformed-request corpus (README, HTTP API: "a
 * request never returns 5xx because of its input"): raw bytes on a real
 * socket of a real `seckill serve`.
 *
 * One server per test. Each corpus entry is sent on its own connection
 * (then half-closed, so a truncated request ends in EOF instead of a wait);
 * whatever comes back must carry no 5xx status line, and the server must
 * still answer /healthz 200 on a kept-alive connection opened before the
 * corpus. At the end a valid purchase still works and the activity's stock
 * and admitted count are exactly what the valid purchases made them: the
 * garbage changed no state. The random part uses a fixed seed, printed on
 * failure, so a failing input can be replayed. */
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <jansson.h>

#include "core/clock.h"
#include "engine/activity.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/http_client.h"

#define ADMIN_HDR "Authorization: Bearer " SK_TH_ADMIN_TOKEN "\r\n"
#define FUZZ_SEED 0x5eC1C0FFEEULL
#define FUZZ_COUNT 1000

struct target {
    struct sk_th_serve s;
    struct sk_th_http c; /* kept alive across the whole corpus */
    uint64_t aid;        /* the activity garbage must not touch */
    uint64_t ghost;      /* an id only garbage tries to create */
    long long stock;
    long long bought; /* units the valid purchases took */
    long long stray;  /* units garbage took (a failure) */
};

/* Printable excerpt of an input for failure messages. */
static const char *excerpt(const char *p, size_t len)
{
    static char out[200];
    size_t o = 0;
    for (size_t i = 0; i < len && o + 5 < sizeof out; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (ch >= 0x20 && ch < 0x7f)
            out[o++] = (char)ch;
        else
            o += (size_t)snprintf(out + o, sizeof out - o, "\\x%02x", ch);
    }
    out[o] = 0;
    return out;
}

/* Problems with one input are reported and counted, and the corpus goes
 * on, so one run lists every bad input; a dead server ends the test. */
static int soft_failures;

static void soft_fail(int line, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void soft_fail(int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sk_th_report(__FILE__, line, fmt, ap);
    va_end(ap);
    soft_failures++;
}

static int status_of(int st, const struct sk_th_resp *r, int want, const char *what)
{
    if (st != want)
        sk_th_fail(__FILE__, __LINE__, "%s: status %d, want %d: %s", what, st, want, r->body);
    return st;
}

static long long field(const struct sk_th_resp *r, const char *key)
{
    json_error_t e;
    json_t *j = json_loadb(r->body, r->body_len, 0, &e);
    json_t *f = j ? json_object_get(j, key) : NULL;
    if (!json_is_integer(f))
        sk_th_fail(__FILE__, __LINE__, "no integer \"%s\" in %s", key, r->body);
    long long x = (long long)json_integer_value(f);
    json_decref(j);
    return x;
}

/* Server up and ready, one open activity with stock for 100 buyers. */
static void target_start(struct target *t)
{
    struct sk_th_resp r;
    char body[512], s[40], e[40], path[128];
    int64_t now = sk_wall_ms();
    now -= now % 1000;
    setenv("LSAN_OPTIONS", "exitcode=0", 1); /* see target_stop */
    sk_th_serve_start(&t->s, sk_th_redis_url(), NULL);
    sk_th_http_open(&t->c, t->s.port);
    int64_t deadline = sk_mono_ms() + 10000;
    while (sk_th_http_req(&t->c, "GET", "/readyz", NULL, NULL, &r) != 200) {
        CHECK_MSG(sk_mono_ms() < deadline, "/readyz not 200: %d %s", r.status, r.body);
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    t->aid = sk_th_unique_id();
    t->ghost = sk_th_unique_id();
    t->stock = 100;
    t->bought = t->stray = 0;
    CHECK(sk_time_format_rfc3339(now - 3600000, s, sizeof s) == 0);
    CHECK(sk_time_format_rfc3339(now + 3600000, e, sizeof e) == 0);
    snprintf(body, sizeof body,
             "{\"id\":%" PRIu64 ",\"name\":\"fuzz\",\"stock\":%lld,\"per_user_limit\":1,"
             "\"start\":\"%s\",\"end\":\"%s\"}",
             t->aid, t->stock, s, e);
    status_of(sk_th_http_req(&t->c, "POST", "/api/v1/activities", ADMIN_HDR, body, &r), &r, 201,
              "create");
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/preheat", t->aid);
    status_of(sk_th_http_req(&t->c, "POST", path, ADMIN_HDR, NULL, &r), &r, 200, "preheat");
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/open", t->aid);
    status_of(sk_th_http_req(&t->c, "POST", path, ADMIN_HDR, NULL, &r), &r, 200, "open");
}

/* A valid purchase by uid, expected to be accepted. */
static void target_buy(struct target *t, uint64_t uid)
{
    struct sk_th_resp r;
    char path[128], h[64];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", t->aid);
    snprintf(h, sizeof h, "X-User-Id: %" PRIu64 "\r\n", uid);
    status_of(sk_th_http_req(&t->c, "POST", path, h, NULL, &r), &r, 200, "valid purchase");
    t->bought++;
}

/* Stock and admitted units are exactly what the valid purchases made. */
static void target_check_state(struct target *t)
{
    struct sk_th_resp r;
    char path[128];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/stats", t->aid);
    status_of(sk_th_http_req(&t->c, "GET", path, ADMIN_HDR, NULL, &r), &r, 200, "stats");
    CHECK_MSG(soft_failures == 0, "%d inputs failed (see above)", soft_failures);
    CHECK_EQ(field(&r, "remaining"), t->stock - t->bought);
    CHECK_EQ(field(&r, "admitted"), t->bought);
    CHECK_EQ(field(&r, "buyers"), t->bought);
    /* the order worker (role all) trims what it persisted every second, so
     * the stream may hold fewer entries, never more */
    CHECK(field(&r, "stream_length") <= t->bought);
}

/* stock_remaining of the public activity read. */
static long long remaining_now(struct target *t)
{
    struct sk_th_resp r;
    char path[128];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64, t->aid);
    status_of(sk_th_http_req(&t->c, "GET", path, NULL, NULL, &r), &r, 200, "activity");
    return field(&r, "stock_remaining");
}

/* Checked after every input, so a failure names the culprit; a stray
 * purchase is then counted, so it is reported once, not by every later
 * input. */
static void expect_stock(struct target *t, const char *what, const char *bytes, size_t len)
{
    long long left = remaining_now(t), want = t->stock - t->bought - t->stray;
    if (left == want) return;
    soft_fail(__LINE__, "%s changed the stock: %lld left, want %lld (input '%s')", what, left, want,
              excerpt(bytes, len));
    t->stray += want - left;
}

/* A clean exit after the corpus. Sanitized build: LeakSanitizer is told
 * to keep exit code 0 (process-lifetime objects, h2o config and context
 * and struct sk_app, are never freed and show as "Indirect leak"); the log
 * is judged instead: an ASan error, UBSan report or "Direct leak" fails. */
static void target_stop(struct target *t)
{
    sk_th_http_close(&t->c);
    int rc = sk_th_serve_stop(&t->s, SIGTERM);
    FILE *f = fopen(t->s.log, "r");
    char line[1024];
    while (f && fgets(line, sizeof line, f))
        CHECK_MSG(!strstr(line, "ERROR: AddressSanitizer") && !strstr(line, "Direct leak") &&
                      !strstr(line, "runtime error:"),
                  "server log %s: %s", t->s.log, line);
    if (f) fclose(f);
    CHECK_MSG(rc == 0, "seckill serve exited %d on SIGTERM after the corpus (log %s)", rc,
              t->s.log);
}

/* Sends one input on a fresh connection: a 5xx status line anywhere in the
 * answer is a (reported) failure, a dead server ends the test. Returns how
 * many responses came back; *n_200 gets how many of them were 200. */
static int send_one(struct target *t, const char *what, const char *bytes, size_t len, int *n_200)
{
    static char out[65536];
    size_t got = sk_th_http_raw(t->s.port, bytes, len, out, sizeof out, 5000);
    int lines = 0;
    if (n_200) *n_200 = 0;
    /* Any 5xx status line anywhere in the answer (bodies never echo input). */
    for (const char *p = out; (p = memmem(p, got - (size_t)(p - out), "HTTP/1.", 7)) != NULL;
         p += 7) {
        int st = 0;
        if (sscanf(p, "HTTP/1.%*1d %3d", &st) == 1 && st >= 500)
            soft_fail(__LINE__, "%s: input '%s' got %d: '%.200s'", what, excerpt(bytes, len), st,
                      p);
    }
    /* Walk the responses (pipelined ones follow each other's bodies). */
    for (const char *p = out; p + 12 <= out + got && strncmp(p, "HTTP/1.", 7) == 0;) {
        int st = 0;
        const char *hend = memmem(p, got - (size_t)(p - out), "\r\n\r\n", 4);
        if (sscanf(p, "HTTP/1.%*1d %3d", &st) != 1 || !hend) break;
        lines++;
        if (st == 200 && n_200) (*n_200)++;
        long clen = 0;
        for (const char *h = p; h < hend; h++)
            if (strncasecmp(h, "\ncontent-length:", 16) == 0) clen = strtol(h + 16, NULL, 10);
        p = hend + 4 + (clen > 0 ? clen : 0);
    }
    struct sk_th_resp r;
    int st = sk_th_http_req(&t->c, "GET", "/healthz", NULL, NULL, &r);
    if (st != 200)
        sk_th_fail(__FILE__, __LINE__, "%s: server not healthy after input '%s' (%d; log %s)", what,
                   excerpt(bytes, len), st, t->s.log);
    return lines;
}

/* ------------------------------------------------------------------ corpus */

struct input {
    const char *name;
    char *bytes;
    size_t len;
    int buys;     /* valid purchases inside (counted into the stock) */
    int want_200; /* at least this many 200 answers expected */
};

static char *dup_bytes(const char *p, size_t n)
{
    char *b = malloc(n ? n : 1);
    CHECK(b != NULL);
    memcpy(b, p, n);
    return b;
}

static void add(struct input *in, int *n, const char *name, const char *p, size_t len, int buys,
                int want_200)
{
    in[*n] = (struct input){name, dup_bytes(p, len), len, buys, want_200};
    (*n)++;
}
#define ADD(name, lit) add(in, &n, (name), (lit), sizeof(lit) - 1, 0, 0)

/* POST path with header lines (may hold NULs: hlen counts up to the last
 * "\r\n") and a body of blen bytes, Content-Length = blen, then close. */
static void add_post(struct input *in, int *n, const char *name, const char *path, const char *hdrs,
                     const char *body, size_t blen)
{
    size_t hlen = 0;
    while (!(hdrs[hlen] == '\r' && hdrs[hlen + 1] == '\n' && hdrs[hlen + 2] == 0))
        hlen++;
    hlen += 2;
    char head[512];
    int a = snprintf(head, sizeof head, "POST %s HTTP/1.1\r\nHost: x\r\n", path);
    char tail[128];
    int c = snprintf(tail, sizeof tail, "Content-Length: %zu\r\nConnection: close\r\n\r\n", blen);
    size_t len = (size_t)a + hlen + (size_t)c + blen;
    char *b = malloc(len);
    CHECK(b != NULL);
    memcpy(b, head, (size_t)a);
    memcpy(b + a, hdrs, hlen);
    memcpy(b + a + hlen, tail, (size_t)c);
    memcpy(b + a + hlen + c, body, blen);
    in[*n] = (struct input){name, b, len, 0, 0};
    (*n)++;
}

/* A request line, a Host, extra header lines, and a filler run of ch. */
static void add_filled(struct input *in, int *n, const char *name, const char *pre, size_t fill,
                       char ch, const char *post)
{
    size_t a = strlen(pre), c = strlen(post);
    char *b = malloc(a + fill + c);
    CHECK(b != NULL);
    memcpy(b, pre, a);
    memset(b + a, ch, fill);
    memcpy(b + a + fill, post, c);
    in[*n] = (struct input){name, b, a + fill + c, 0, 0};
    (*n)++;
}

static int build_corpus(struct input *in, const struct target *t)
{
    int n = 0;
    char buf[2048], path[128];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", t->aid);

    ADD("binary garbage", "\x00\xff\xfe\x01\x80\x90garbage\x00\x00\r\n\r\n");
    ADD("text garbage", "hello there, this is not HTTP at all\r\n\r\n");
    ADD("empty lines", "\r\n\r\n\r\n\r\n");
    ADD("truncated request line", "GET /heal");
    ADD("request line, no CRLF", "GET /healthz HTTP/1.1");
    ADD("headers not terminated", "GET /healthz HTTP/1.1\r\nHost: x\r\n");
    ADD("HTTP/0.9", "GET /\r\n");
    ADD("HTTP/0.9 with blank", "GET /healthz\r\n\r\n");
    ADD("HTTP/2 preface on HTTP/1 port",
        "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x12\x04\x00\x00\x00\x00\x00\x00\x03\x00\x00"
        "\x00\x64\x00\x04\x00\x10\x00\x00\x00\x06\x00\x00\x40\x00");
    ADD("HTTP/3.0 version", "GET /healthz HTTP/3.0\r\nHost: x\r\n\r\n");
    ADD("bad version", "GET /healthz HTTP/1.x\r\nHost: x\r\n\r\n");
    ADD("lowercase method", "get /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    ADD("unknown method", "BREW /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    ADD("absolute URI", "GET http://x/healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    ADD("asterisk target", "OPTIONS * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    ADD("CONNECT", "CONNECT 127.0.0.1:6379 HTTP/1.1\r\nHost: x\r\n\r\n");
    ADD("no Host", "GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n");
    ADD("header without colon", "GET /healthz HTTP/1.1\r\nHost x\r\n\r\n");
    ADD("header name with space", "GET /healthz HTTP/1.1\r\nHo st: x\r\n\r\n");
    ADD("obs-fold", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n");
    ADD("bare CR in header", "GET /healthz HTTP/1.1\r\nHost: x\rX-A: 1\r\n\r\n");
    ADD("bare LF lines", "GET /healthz HTTP/1.1\nHost: x\nConnection: close\n\n");
    ADD("NUL in path", "GET /heal\0thz HTTP/1.1\r\nHost: x\r\n\r\n");
    ADD("NUL in header", "GET /healthz HTTP/1.1\r\nHost: x\0y\r\n\r\n");
    ADD("path traversal",
        "GET /../../../../etc/passwd HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    ADD("path traversal in API",
        "GET /api/v1/activities/../../../healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    ADD("encoded traversal",
        "GET /%2e%2e/%2e%2e/etc/passwd HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    ADD("percent garbage", "GET /%zz%00%ff HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    ADD("id overflow",
        "POST /api/v1/activities/999999999999999999999999999/purchase HTTP/1.1\r\nHost: x\r\n"
        "X-User-Id: 1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    ADD("invalid Content-Length", "POST /api/v1/activities HTTP/1.1\r\nHost: x\r\n"
                                  "Content-Length: abc\r\n\r\n{}");
    ADD("negative Content-Length", "POST /api/v1/activities HTTP/1.1\r\nHost: x\r\n"
                                   "Content-Length: -5\r\n\r\n{}");
    ADD("huge Content-Length", "POST /api/v1/activities HTTP/1.1\r\nHost: x\r\n"
                               "Content-Length: 99999999999999999999999\r\n\r\n{}");
    ADD("Content-Length with sign", "POST /api/v1/activities HTTP/1.1\r\nHost: x\r\n"
                                    "Content-Length: +2\r\n\r\n{}");
    ADD("two Content-Lengths", "POST /api/v1/activities HTTP/1.1\r\nHost: x\r\n"
                               "Content-Length: 2\r\nContent-Length: 40\r\n\r\n{}");
    ADD("Content-Length longer than body", "POST /api/v1/activities HTTP/1.1\r\nHost: x\r\n"
                                           "Content-Length: 1000\r\n\r\n{}");
    ADD("chunked, bad size", "POST /api/v1/activities HTTP/1.1\r\nHost: x\r\n"
                             "Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n");
    ADD("chunked, negative size", "POST /api/v1/activities HTTP/1.1\r\nHost: x\r\n"
                                  "Transfer-Encoding: chunked\r\n\r\n-1\r\nabc\r\n0\r\n\r\n");
    ADD("chunked, huge size", "POST /api/v1/activities HTTP/1.1\r\nHost: x\r\n"
                              "Transfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFFFFF\r\nab\r\n");
    ADD("chunked, size beyond data", "POST /api/v1/activities HTTP/1.1\r\nHost: x\r\n"
                                     "Transfer-Encoding: chunked\r\n\r\n10\r\nab\r\n0\r\n\r\n");
    ADD("chunked, no terminator", "POST /api/v1/activities HTTP/1.1\r\nHost: x\r\n"
                                  "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n");
    ADD("chunked plus Content-Length", "POST /api/v1/activities HTTP/1.1\r\nHost: x\r\n"
                                       "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
                                       "2\r\n{}\r\n0\r\n\r\n");
    ADD("unknown transfer coding", "POST /api/v1/activities HTTP/1.1\r\nHost: x\r\n"
                                   "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n");
    ADD("TLS ClientHello", "\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\x5b\x90\x9d\x9b\x72"
                           "\x0b\xbc\x0c\xbc\x2b\x92\xa8\x48\x97\xcf\xbd\x39\x04\xcc\x16\x0a"
                           "\x85\x03\x90\x9f\x77\x04\x33\xd4\xde\x00\x00\x20\xcc\xa8\xcc\xa9");
    ADD("a response, not a request", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    ADD("Redis protocol", "*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$1\r\nx\r\n");
    ADD("websocket upgrade", "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                             "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZQ==\r\n"
                             "Sec-WebSocket-Version: 13\r\n\r\n");
    ADD("h2c upgrade", "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\n"
                       "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n");
    /* Purchases whose bodies or identities are bad: none may buy. */
    add_post(in, &n, "NUL inside purchase body", path, "X-User-Id: 900\r\n", "{\"quantity\":1\0}",
             15);
    add_post(in, &n, "invalid UTF-8 in purchase body", path, "X-User-Id: 901\r\n",
             "{\"quantity\":\"\xff\xfe\"}", 17);
    add_post(in, &n, "two user ids, bad quantity", path, "X-User-Id: 902\r\nX-User-Id: 903\r\n",
             "{\"quantity\":-1}", 15);
    {
        /* An admin create (valid token) whose body hides a NUL: must not
         * create t->ghost. */
        char body[256];
        int bl =
            snprintf(body, sizeof body,
                     "{\"id\":%" PRIu64 ",\"name\":\"ghost\",\"start\":\"2030-01-01T00:00:00Z\","
                     "\"end\":\"2031-01-01T00:00:00Z\",\"stock\":5,\"per_user_limit\":1",
                     t->ghost);
        memcpy(body + bl, "\0}", 2);
        add_post(in, &n, "NUL inside admin create body", "/api/v1/activities", ADMIN_HDR, body,
                 (size_t)bl + 2);
    }
    add_post(in, &n, "control byte in user id", path, "X-User-Id: 904\x01\r\n", "", 0);
    add_post(in, &n, "user id with NUL", path,
             "X-User-Id: 9\0"
             "05\r\n",
             "", 0);
    {
        char nest[5000];
        memset(nest, '[', sizeof nest);
        add_post(in, &n, "5000 nested arrays as body", path, "X-User-Id: 906\r\n", nest,
                 sizeof nest);
    }
    /* A body longer than declared: the declared part is a valid purchase
     * (it counts), the rest is parsed as a next request (garbage). */
    snprintf(buf, sizeof buf,
             "POST %s HTTP/1.1\r\nHost: x\r\nX-User-Id: 910\r\nContent-Length: 14\r\n\r\n"
             "{\"quantity\":1}GARBAGE AFTER THE BODY\r\n\r\n",
             path);
    add(in, &n, "body longer than declared", buf, strlen(buf), 1, 1);
    /* Pipelining: three GETs in one write, all answered 200, in order. */
    snprintf(buf, sizeof buf,
             "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /api/v1/activities/%" PRIu64
             " HTTP/1.1\r\nHost: x\r\n\r\nGET /readyz HTTP/1.1\r\nHost: x\r\nConnection: "
             "close\r\n\r\n",
             t->aid);
    add(in, &n, "pipelined GETs", buf, strlen(buf), 0, 3);
    /* Pipelined purchases by two users: both valid, both count. */
    snprintf(buf, sizeof buf,
             "POST %s HTTP/1.1\r\nHost: x\r\nX-User-Id: 920\r\nContent-Length: 0\r\n\r\n"
             "POST %s HTTP/1.1\r\nHost: x\r\nX-User-Id: 921\r\nContent-Length: 2\r\n"
             "Connection: close\r\n\r\n{}",
             path, path);
    add(in, &n, "pipelined purchases", buf, strlen(buf), 2, 2);
    /* Pipelined: valid GET, then garbage. */
    ADD("pipelined GET then garbage",
        "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n\x01\x02\x03 nope\r\n\r\n");

    /* Big ones. */
    add_filled(in, &n, "100 KB header value",
               "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ", 100 * 1024, 'A', "\r\n\r\n");
    add_filled(in, &n, "100 KB of CRLF before a request", "", 100 * 1024, '\n',
               "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    add_filled(in, &n, "10 KB path", "GET /", 10 * 1024, 'p',
               " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    add_filled(in, &n, "10 KB path under the API", "GET /api/v1/activities/", 10 * 1024, '7',
               " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    add_filled(in, &n, "5 KB method", "", 5 * 1024, 'M',
               " /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    {
        /* 2000 small headers */
        size_t cap = 2000 * 16 + 128, o = 0;
        char *b = malloc(cap);
        CHECK(b != NULL);
        o += (size_t)snprintf(b + o, cap - o, "GET /healthz HTTP/1.1\r\nHost: x\r\n");
        for (int i = 0; i < 2000; i++)
            o += (size_t)snprintf(b + o, cap - o, "X-%d: v\r\n", i);
        o += (size_t)snprintf(b + o, cap - o, "\r\n");
        in[n++] = (struct input){"2000 headers", b, o, 0, 0};
    }
    return n;
}

SK_TEST(malformed_corpus_never_gets_5xx_and_changes_no_state)
{
    static struct input in[128];
    struct target t;
    target_start(&t);
    target_buy(&t, 1); /* state before the corpus: one valid purchase */
    int n = build_corpus(in, &t);
    CHECK(n <= (int)(sizeof in / sizeof in[0]));
    for (int i = 0; i < n; i++) {
        int n200;
        send_one(&t, in[i].name, in[i].bytes, in[i].len, &n200);
        if (n200 < in[i].want_200)
            soft_fail(__LINE__, "%s: %d answers 200, want %d", in[i].name, n200, in[i].want_200);
        t.bought += in[i].buys;
        expect_stock(&t, in[i].name, in[i].bytes, in[i].len);
        free(in[i].bytes);
    }
    struct sk_th_resp r;
    char path[128];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64, t.ghost);
    if (sk_th_http_req(&t.c, "GET", path, NULL, NULL, &r) != 404)
        soft_fail(__LINE__, "garbage created activity %" PRIu64 ": %d %s", t.ghost, r.status,
                  r.body);
    /* Still sells, and the stock is exactly the valid purchases. */
    target_buy(&t, 2);
    target_check_state(&t);
    target_stop(&t);
}

/* ------------------------------------------------------------------- fuzz */

/* xorshift64*: deterministic for a seed, good enough for fuzz bytes */
static uint64_t rng_state;
#define rnd() sk_th_xorshift(&rng_state)

static size_t rnd_below(size_t n)
{
    return (size_t)(rnd() % n);
}

/* One fuzz input into buf (cap >= 4096); returns its length. Three
 * shapes: random bytes; a request template with random mutations; a
 * sequence of HTTP-ish tokens. None can carry a valid identity or admin
 * token (no template has one, and no token is "X-User-Id"), so none can
 * buy or change an activity. */
static size_t fuzz_input(char *buf, size_t cap, const char *path)
{
    const char *const tokens[] = {
        "GET ",
        "POST ",
        "PUT ",
        "HEAD ",
        "/",
        path,
        "/api/v1/activities/",
        "/healthz",
        "/metrics",
        " HTTP/1.1",
        " HTTP/1.0",
        " HTTP/2.0",
        "\r\n",
        "\n",
        "\r",
        "\r\n\r\n",
        "Host: x",
        "Content-Length: ",
        "Transfer-Encoding: chunked",
        "Connection: close",
        "Expect: 100-continue",
        ": ",
        "0",
        "1",
        "-1",
        "99999999999999999999",
        "ffffffff",
        "{\"quantity\":",
        "}",
        "{",
        "\"",
        "\\",
        "%00",
        "%",
        "?",
        "#",
        "\t",
        " ",
        "\x00",
        "\xff",
        "\x80",
        "Idempotency-Key: ",
        "Authorization: Bearer ",
        "..",
        "//",
        "*",
    };
    size_t len = 0, kind = rnd_below(3);
    if (kind == 0) {
        len = 1 + rnd_below(2048);
        for (size_t i = 0; i < len; i++)
            buf[i] = (char)rnd();
        return len;
    }
    if (kind == 1) {
        char tmpl[512];
        int k = (int)rnd_below(3);
        if (k == 0)
            snprintf(tmpl, sizeof tmpl,
                     "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     "Content-Length: 14\r\n\r\n{\"quantity\":1}",
                     path);
        else if (k == 1)
            snprintf(tmpl, sizeof tmpl,
                     "POST /api/v1/activities HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nope\r\n"
                     "Content-Length: 20\r\n\r\n{\"id\":1,\"name\":\"x\"}");
        else
            snprintf(tmpl, sizeof tmpl,
                     "GET /api/v1/activities/1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        len = strlen(tmpl);
        memcpy(buf, tmpl, len);
        int muts = 1 + (int)rnd_below(8);
        for (int m = 0; m < muts; m++) {
            size_t at = rnd_below(len);
            switch (rnd_below(4)) {
            case 0: buf[at] = (char)rnd(); break;                 /* flip */
            case 1: buf[at] ^= (char)(1u << rnd_below(8)); break; /* bit */
            case 2: len = at + 1; break;                          /* truncate */
            default:                                              /* insert */
                if (len + 1 < cap) {
                    memmove(buf + at + 1, buf + at, len - at);
                    buf[at] = (char)rnd();
                    len++;
                }
            }
        }
        return len;
    }
    int parts = 1 + (int)rnd_below(40);
    for (int i = 0; i < parts; i++) {
        const char *tk = tokens[rnd_below(sizeof tokens / sizeof tokens[0])];
        size_t tl = tk[0] ? strlen(tk) : 1; /* "\x00" is one NUL byte */
        if (len + tl >= cap) break;
        memcpy(buf + len, tk, tl);
        len += tl;
    }
    return len;
}

SK_TEST(random_inputs_from_a_seeded_prng_never_get_5xx_or_change_state)
{
    static char buf[8192];
    char path[128], what[64];
    struct target t;
    target_start(&t);
    target_buy(&t, 1);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", t.aid);
    rng_state = FUZZ_SEED;
    int answered = 0;
    for (int i = 0; i < FUZZ_COUNT; i++) {
        size_t len = fuzz_input(buf, sizeof buf, path);
        snprintf(what, sizeof what, "fuzz #%d (seed %#llx)", i, (unsigned long long)FUZZ_SEED);
        answered += send_one(&t, what, buf, len, NULL) > 0;
        expect_stock(&t, what, buf, len);
    }
    /* Sanity: the inputs reach the HTTP parser (most get a 4xx back). */
    CHECK_MSG(answered > FUZZ_COUNT / 4, "only %d of %d inputs got an HTTP answer", answered,
              FUZZ_COUNT);
    target_buy(&t, 2);
    target_check_state(&t);
    target_stop(&t);
}
