/* test_http_hardening.c - the HTTP hardening of `seckill serve` (README,
 * "HTTP hardening") over real sockets against a real server: refused
 * framings, HTTP/2 off, identity headers only from trusted proxies, slow
 * readers cut off, the connection cap and the fd shortage, the head size
 * bound, secrets kept out of logs and `ps`, the token policy, keyed
 * purchases after the sell-out, IPv6 rate-limit prefixes. Each test ends
 * with the server still selling exactly its stock. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "core/clock.h"
#include "http/auth.h"
#include "redis/redis_conn.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/http_client.h"
#include "support/proc_watch.h"

#define ADMIN_HDR "Authorization: Bearer " SK_TH_ADMIN_TOKEN "\r\n"

static void pause_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A connected, blocking TCP socket to 127.0.0.1:port (fails the test). */
static int dial(int port)
{
    struct sk_th_http c;
    sk_th_http_open(&c, port);
    return c.fd;
}

/* Everything the server sends on fd until it closes (*closed = 1) or
 * nothing comes for timeout_ms (*closed = 0). Never half-closes: a close
 * seen here is the server's own. */
static size_t read_until_close(int fd, char *out, size_t cap, int timeout_ms, int *closed)
{
    size_t got = 0;
    *closed = 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (got + 1 < cap && poll(&p, 1, timeout_ms) > 0) {
        ssize_t n = recv(fd, out + got, cap - got - 1, 0);
        if (n <= 0) {
            *closed = 1;
            break;
        }
        got += (size_t)n;
    }
    out[got] = 0;
    return got;
}

/* Status lines in a byte stream ("HTTP/1.x NNN"). */
static int count_responses(const char *buf, size_t len)
{
    int n = 0;
    for (const char *p = buf; (p = memmem(p, len - (size_t)(p - buf), "HTTP/1.", 7)) != NULL;
         p += 7)
        n++;
    return n;
}

/* 1 when the peer has closed or reset fd (without reading its data). */
static int peer_gone(int fd, int wait_ms)
{
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, wait_ms) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* ---- a server with one open activity ---- */

struct srv {
    struct sk_th_serve s;
    struct sk_th_http admin;
};

static void srv_start(struct srv *v, const char *redis_url, const char *const *extra)
{
    sk_th_serve_start(&v->s, redis_url ? redis_url : sk_th_redis_url(), extra);
    sk_th_http_open(&v->admin, v->s.port);
}

static void srv_stop(struct srv *v)
{
    sk_th_http_close(&v->admin);
    sk_th_serve_stop(&v->s, SIGTERM);
}

static long long jfield(const struct sk_th_resp *r, const char *key)
{
    json_error_t e;
    json_t *j = json_loadb(r->body, r->body_len, 0, &e);
    json_t *f = j ? json_object_get(j, key) : NULL;
    CHECK_MSG(json_is_integer(f), "no integer \"%s\" in %s", key, r->body);
    long long x = (long long)json_integer_value(f);
    json_decref(j);
    return x;
}

static uint64_t open_activity(struct srv *v, int stock, int limit)
{
    uint64_t id = sk_th_unique_id();
    char body[400];
    snprintf(body, sizeof body,
             "{\"id\":%" PRIu64 ",\"name\":\"hardening\",\"stock\":%d,\"per_user_limit\":%d,"
             "\"start\":\"2020-01-01T00:00:00Z\",\"end\":\"2099-01-01T00:00:00Z\"}",
             id, stock, limit);
    sk_th_http_activity_open(&v->admin, id, body);
    return id;
}

static long long stat_of(struct srv *v, uint64_t id, const char *key)
{
    struct sk_th_resp r;
    char path[100];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/stats", id);
    CHECK_EQ(sk_th_http_req(&v->admin, "GET", path, ADMIN_HDR, NULL, &r), 200);
    return jfield(&r, key);
}

/* One purchase on its own connection with the given header lines. */
static int buy(struct srv *v, uint64_t id, const char *headers, struct sk_th_resp *r)
{
    struct sk_th_http c;
    char path[100];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", id);
    sk_th_http_open(&c, v->s.port);
    int st = sk_th_http_req(&c, "POST", path, headers, NULL, r);
    sk_th_http_close(&c);
    return st;
}

/* A real sale against the server: `seckill load`, 16 connections, 600
 * purchases by 300 users with limit 1 on `stock` units; its own checks
 * (unique order ids, nobody over the limit, exactly the stock sold) must
 * pass, and Redis must agree. Then stops the server (srv_stop): the tests
 * that end with this sale end with the server. */
static void sells_exactly_its_stock_then_stop(struct srv *v, int stock,
                                              const char *const *load_extra)
{
    uint64_t id = open_activity(v, stock, 1);
    char url[64], aid[32], st[32], out[16384];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", v->s.port);
    snprintf(aid, sizeof aid, "%" PRIu64, id);
    snprintf(st, sizeof st, "%d", stock);
    const char *args[32] = {"load",   "--url",          url,   "--activity", aid,   "--connections",
                            "16",     "--requests",     "600", "--users",    "300", "--user-base",
                            "700000", "--expect-stock", st,    "--limit",    "1",   "--duration",
                            "60",     "--quiet"};
    int n = 19;
    for (int i = 0; load_extra && load_extra[i]; i++)
        args[n++] = load_extra[i];
    args[n] = NULL;
    int rc = sk_th_run_seckill(out, sizeof out, NULL, args);
    CHECK_MSG(rc == 0, "load exit %d: %s", rc, out);
    CHECK_EQ(stat_of(v, id, "remaining"), 0);
    CHECK_EQ(stat_of(v, id, "admitted"), stock);
    srv_stop(v);
}

/* ---------------------------------------------------------------- framing */

SK_TEST(refused_framings_get_one_400_and_a_close_and_smuggled_bytes_no_answer)
{
    struct srv v;
    srv_start(&v, NULL, NULL);
    uint64_t id = open_activity(&v, 50, 1);
    char path[100];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", id);
    /* Each input is a purchase by a fresh user whose framing or identity
     * is ambiguous, followed by a second, valid purchase (the smuggled
     * request): neither may buy, and only one answer may come back. */
    static const char *const heads[] = {
        "Content-Length: 0\r\nContent-Length: %d\r\nX-User-Id: %d\r\n\r\n",
        "Content-Length: %d\r\nTransfer-Encoding: chunked\r\nX-User-Id: %d\r\n\r\n0\r\n\r\n",
        "X-Note: a\r\n folded: %d\r\nX-User-Id: %d\r\nContent-Length: 0\r\n\r\n",
        "X-User-Id: %d\r\nX-User-Id: %d\r\nContent-Length: 0\r\n\r\n",
        "Authorization: Bearer %d\r\nAuthorization: Bearer x\r\nX-User-Id: %d\r\n"
        "Content-Length: 0\r\n\r\n",
        "Idempotency-Key: k%d\r\nIdempotency-Key: j\r\nX-User-Id: %d\r\nContent-Length: 0\r\n\r\n",
        "Host: y%d\r\nX-User-Id: %d\r\nContent-Length: 0\r\n\r\n",
        /* framings h2o's HTTP/1 used to refuse itself in plain text: a
         * Content-Length that is not a number, a chunk size that is not hex */
        "Content-Length: 1x%d\r\nX-User-Id: %d\r\n\r\n",
        "Transfer-Encoding: chunked\r\nX-Pad: %d\r\nX-User-Id: %d\r\n\r\nzz\r\n",
    };
    for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++) {
        char smuggled[256], head[512], req[1024], out[8192];
        int sl = snprintf(smuggled, sizeof smuggled,
                          "POST %s HTTP/1.1\r\nHost: x\r\nX-User-Id: %zu\r\n"
                          "Content-Length: 0\r\n\r\n",
                          path, 900 + i);
        snprintf(head, sizeof head, heads[i], sl, (int)(100 + i));
        int n =
            snprintf(req, sizeof req, "POST %s HTTP/1.1\r\nHost: x\r\n%s%s", path, head, smuggled);
        int fd = dial(v.s.port), closed;
        sk_th_send_all(fd, req, (size_t)n);
        size_t got = read_until_close(fd, out, sizeof out, 5000, &closed);
        close(fd);
        CHECK_MSG(count_responses(out, got) == 1, "input %zu: %d answers: %s", i,
                  count_responses(out, got), out);
        CHECK_MSG(strncmp(out, "HTTP/1.1 400 ", 13) == 0, "input %zu: %s", i, out);
        CHECK_MSG(strstr(out, "Connection: close") && strstr(out, "\"bad_request\""),
                  "input %zu: %s", i, out);
        const char *body = strstr(out, "\r\n\r\n");
        CHECK_MSG(strcasestr(out, "content-type: application/json") && body &&
                      strncmp(body + 4, "{\"error\":\"bad_request\",", 23) == 0,
                  "input %zu: not a JSON refusal: %s", i, out);
        CHECK_MSG(closed, "input %zu: the server kept the connection open", i);
    }
    /* The same purchase, once, framed plainly: bought. */
    struct sk_th_resp r;
    CHECK_EQ(buy(&v, id, "X-User-Id: 100\r\n", &r), 200);
    CHECK_EQ(stat_of(&v, id, "admitted"), 1);
    CHECK_EQ(stat_of(&v, id, "remaining"), 49);
    sells_exactly_its_stock_then_stop(&v, 40, NULL);
}

/* Sends raw bytes on a fresh connection and reads until the server
 * closes (5 s at most): the answers in out; 1 when the server closed. */
static int exchange(struct srv *v, const char *bytes, size_t len, char *out, size_t cap,
                    size_t *got)
{
    int fd = dial(v->s.port), closed;
    sk_th_send_all(fd, bytes, len);
    *got = read_until_close(fd, out, cap, 5000, &closed);
    close(fd);
    return closed;
}

/* A raw request that must buy: 200, and the activity's admissions are
 * then admitted. */
static void raw_buys(struct srv *v, uint64_t id, const char *req, int n, long long admitted)
{
    char out[8192];
    size_t got;
    exchange(v, req, (size_t)n, out, sizeof out, &got);
    CHECK_MSG(strncmp(out, "HTTP/1.1 200 ", 13) == 0, "%s", out);
    CHECK_EQ(stat_of(v, id, "admitted"), admitted);
}

/* The reproduction, first: a chunk line "0x2f", which a lenient
 * decoder reads as size 0 with an extension "x2f" and a front end as 47,
 * so that the front end forwards what follows as body and the server ran
 * it as the next request, with the X-User-Id the front end vouched for. */
SK_TEST(a_request_smuggled_behind_a_0x2f_chunk_line_is_never_executed)
{
    struct srv v;
    srv_start(&v, NULL, NULL);
    uint64_t id = open_activity(&v, 50, 1);
    char path[100], req[1024], out[8192];
    size_t got;
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", id);
    /* as the issue wrote it: the hidden request reads the clock */
    int n = snprintf(req, sizeof req,
                     "POST %s HTTP/1.1\r\nHost: x\r\nX-User-Id: 14001\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n0x2f\r\n\r\n"
                     "GET /api/v1/time HTTP/1.1\r\nHost: x\r\n\r\n\r\n0\r\n\r\n",
                     path);
    int closed = exchange(&v, req, (size_t)n, out, sizeof out, &got);
    CHECK_MSG(count_responses(out, got) == 1, "%d answers: %s", count_responses(out, got), out);
    CHECK_MSG(strncmp(out, "HTTP/1.1 400 ", 13) == 0 && strstr(out, "chunk"), "%s", out);
    CHECK_MSG(!strstr(out, "now_ms"), "the hidden request was answered: %s", out);
    CHECK_MSG(closed && strstr(out, "Connection: close"), "kept open: %s", out);
    /* as an attacker would: the hidden request buys as someone else */
    char hidden[256];
    int hl = snprintf(hidden, sizeof hidden,
                      "POST %s HTTP/1.1\r\nHost: x\r\nX-User-Id: 14002\r\n"
                      "Content-Length: 0\r\n\r\n",
                      path);
    n = snprintf(req, sizeof req,
                 "POST %s HTTP/1.1\r\nHost: x\r\nX-User-Id: 14001\r\n"
                 "Transfer-Encoding: chunked\r\n\r\n0x%x\r\n%s\r\n0\r\n\r\n",
                 path, hl, hidden);
    closed = exchange(&v, req, (size_t)n, out, sizeof out, &got);
    CHECK_MSG(count_responses(out, got) == 1 && strncmp(out, "HTTP/1.1 400 ", 13) == 0 && closed,
              "%s", out);
    CHECK_EQ(stat_of(&v, id, "admitted"), 0);
    CHECK_EQ(stat_of(&v, id, "remaining"), 50);
    sells_exactly_its_stock_then_stop(&v, 40, NULL);
}

/* Every lenient chunk line a proxy may read otherwise, each hiding a
 * purchase by another user: one 400, the close, nothing bought; a chunked
 * purchase by the grammar (extensions, leading zeros) still buys. */
SK_TEST(every_lenient_chunk_line_is_a_400_and_a_close_and_buys_nothing)
{
    struct srv v;
    srv_start(&v, NULL, NULL);
    uint64_t id = open_activity(&v, 50, 1);
    char path[100];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", id);
    /* %s: the hidden purchase, as the "data" a lenient reading skips or
     * the request it reads next */
    static const char *const bodies[] = {
        "2zz\r\n{}\r\n0\r\n\r\n%s",               /* digits then garbage: read as 2 */
        "-2\r\n{}\r\n0\r\n\r\n%s",                /* a sign */
        "+2\r\n{}\r\n0\r\n\r\n%s",                /* a sign */
        " 2\r\n{}\r\n0\r\n\r\n%s",                /* a space before the size */
        "2 \r\n{}\r\n0\r\n\r\n%s",                /* a space after it, no extension */
        "2\n{}\r\n0\r\n\r\n%s",                   /* a bare LF ends the size line */
        "2\r\n{}\n0\r\n\r\n%s",                   /* a bare LF after the data */
        "2\r\n{}\r\n0\n\n%s",                     /* bare LFs at the end */
        "2\r\n{}\r\n0\r\nX-User-Id: 9\r\n\r\n%s", /* a trailer */
        "2\r\n{}\r\n0\r\nX-Trailer\r\n\r\n%s",    /* a trailer line without ':' */
        "00000000000000002\r\n{}\r\n0\r\n\r\n%s", /* 17 digits */
        "2\r\n{}xx0\r\n\r\n%s",                   /* data longer than its size */
        "2;a b\r\n{}\r\n0\r\n\r\n%s",             /* not an extension */
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        char hidden[256], body[512], req[1024], out[8192];
        snprintf(hidden, sizeof hidden,
                 "POST %s HTTP/1.1\r\nHost: x\r\nX-User-Id: %zu\r\nContent-Length: 0\r\n\r\n", path,
                 5000 + i);
        snprintf(body, sizeof body, bodies[i], hidden);
        int n = snprintf(req, sizeof req,
                         "POST %s HTTP/1.1\r\nHost: x\r\nX-User-Id: %zu\r\n"
                         "Transfer-Encoding: chunked\r\n\r\n%s",
                         path, 4000 + i, body);
        size_t got;
        int closed = exchange(&v, req, (size_t)n, out, sizeof out, &got);
        CHECK_MSG(count_responses(out, got) == 1, "body %zu: %d answers: %s", i,
                  count_responses(out, got), out);
        CHECK_MSG(strncmp(out, "HTTP/1.1 400 ", 13) == 0 && strstr(out, "\"bad_request\""),
                  "body %zu: %s", i, out);
        CHECK_MSG(closed, "body %zu: the server kept the connection open", i);
    }
    CHECK_EQ(stat_of(&v, id, "admitted"), 0);
    /* by the grammar: leading zeros, extensions with whitespace, a quoted
     * value, an extension on the last chunk */
    char req[1024];
    int n = snprintf(req, sizeof req,
                     "POST %s HTTP/1.1\r\nHost: x\r\nX-User-Id: 4100\r\n"
                     "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                     "0002 ; a = \"b;c\"\r\n{}\r\n0;z\r\n\r\n",
                     path);
    raw_buys(&v, id, req, n, 1);
    sells_exactly_its_stock_then_stop(&v, 40, NULL);
}

/* RFC 9112 section 6.1: an HTTP/1.0 message with Transfer-Encoding has
 * faulty framing; it used to be decoded and the connection kept on
 * Connection: keep-alive. */
SK_TEST(http_1_0_with_transfer_encoding_is_refused_and_the_connection_closed)
{
    struct srv v;
    srv_start(&v, NULL, NULL);
    uint64_t id = open_activity(&v, 50, 1);
    char path[100], req[1024], out[8192];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", id);
    int n = snprintf(req, sizeof req,
                     "POST %s HTTP/1.0\r\nHost: x\r\nX-User-Id: 6001\r\nConnection: keep-alive\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
                     "POST %s HTTP/1.1\r\nHost: x\r\nX-User-Id: 6002\r\nContent-Length: 0\r\n\r\n",
                     path, path);
    size_t got;
    int closed = exchange(&v, req, (size_t)n, out, sizeof out, &got);
    /* one answer: no second status line (the message names HTTP/1.0) */
    CHECK_MSG(got > 0 && !strstr(out + 1, "HTTP/1.1 ") && strncmp(out, "HTTP/1.1 400 ", 13) == 0 &&
                  strstr(out, "in an HTTP/1.0 request"),
              "%s", out);
    CHECK_MSG(closed, "the connection stayed open");
    CHECK_EQ(stat_of(&v, id, "admitted"), 0);
    /* HTTP/1.0 with a Content-Length still buys */
    n = snprintf(req, sizeof req,
                 "POST %s HTTP/1.0\r\nHost: x\r\nX-User-Id: 6003\r\nContent-Length: 2\r\n\r\n{}",
                 path);
    raw_buys(&v, id, req, n, 1);
    sells_exactly_its_stock_then_stop(&v, 40, NULL);
}

/* One spelling per id: a gateway rule on the literal path
 * /api/v1/activities/1001/... cannot be sidestepped with 01001 or +1001. */
SK_TEST(activity_ids_with_leading_zeros_or_signs_are_a_400_and_buy_nothing)
{
    struct srv v;
    srv_start(&v, NULL, NULL);
    uint64_t id = open_activity(&v, 50, 1);
    static const char *const spellings[] = {"0%" PRIu64, "00%" PRIu64, "+%" PRIu64, "-%" PRIu64};
    static const char *const routes[] = {
        "POST /api/v1/activities/%s/purchase", "GET /api/v1/activities/%s", "GET /sale/%s",
        "GET /api/v1/activities/%s/live", "POST /api/v1/activities/%s/queue"};
    for (size_t i = 0; i < sizeof spellings / sizeof spellings[0]; i++)
        for (size_t k = 0; k < sizeof routes / sizeof routes[0]; k++) {
            char sid[40], line[200], req[512], out[8192];
            snprintf(sid, sizeof sid, spellings[i], id);
            snprintf(line, sizeof line, routes[k], sid);
            int n = snprintf(req, sizeof req,
                             "%s HTTP/1.1\r\nHost: x\r\nX-User-Id: 7001\r\nContent-Length: 0\r\n"
                             "Connection: close\r\n\r\n",
                             line);
            size_t got;
            exchange(&v, req, (size_t)n, out, sizeof out, &got);
            CHECK_MSG(strncmp(out, "HTTP/1.1 400 ", 13) == 0, "%s: %s", line, out);
        }
    CHECK_EQ(stat_of(&v, id, "admitted"), 0);
    struct sk_th_resp r;
    CHECK_EQ(buy(&v, id, "X-User-Id: 7001\r\n", &r), 200);
    sells_exactly_its_stock_then_stop(&v, 40, NULL);
}

SK_TEST(http2_preface_and_h2c_upgrade_are_not_answered_as_http2)
{
    struct srv v;
    srv_start(&v, NULL, NULL);
    /* Prior knowledge: the preface and a SETTINGS frame. An HTTP/2 server
     * answers with its own SETTINGS frame (9-byte header, type 4). */
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
                                  "\x00\x00\x00\x04\x00\x00\x00\x00\x00";
    char out[4096];
    int fd = dial(v.s.port), closed;
    sk_th_send_all(fd, preface, sizeof preface - 1);
    size_t got = read_until_close(fd, out, sizeof out, 3000, &closed);
    close(fd);
    CHECK_MSG(closed, "the connection stayed open after the HTTP/2 preface");
    CHECK_MSG(got == 0 || strncmp(out, "HTTP/1.1 4", 10) == 0, "answer to the preface: %.*s",
              (int)got, out);
    CHECK(!(got >= 9 && out[3] == 0x04));
    /* Upgrade: h2c is ignored: an HTTP/1.1 answer, never 101. */
    static const char upgrade[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n"
                                  "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
                                  "HTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n";
    fd = dial(v.s.port);
    sk_th_send_all(fd, upgrade, sizeof upgrade - 1);
    got = read_until_close(fd, out, sizeof out, 3000, &closed);
    close(fd);
    CHECK_MSG(strncmp(out, "HTTP/1.1 200 ", 13) == 0 && !strstr(out, " 101 ") &&
                  !strstr(out, "Upgrade"),
              "answer to Upgrade: h2c: %s", out);
    sells_exactly_its_stock_then_stop(&v, 30, NULL);
}

/* --------------------------------------------------------------- identity */

static int log_has(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    char line[2048];
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f))
        found = strstr(line, needle) != NULL;
    if (f) fclose(f);
    return found;
}

SK_TEST(with_trusted_proxies_x_user_id_from_any_other_peer_is_a_401)
{
    struct srv v;
    const char *elsewhere[] = {"--trusted-proxies", "10.0.0.0/8", NULL};
    srv_start(&v, NULL, elsewhere);
    uint64_t id = open_activity(&v, 10, 1);
    struct sk_th_resp r;
    CHECK_EQ(buy(&v, id, "X-User-Id: 7\r\n", &r), 401);
    CHECK_MSG(strstr(r.body, "trusted proxy") != NULL, "%s", r.body);
    CHECK_EQ(buy(&v, id, "X-User-Id: 7\r\nX-Forwarded-For: 10.1.2.3\r\n", &r), 401);
    CHECK_EQ(stat_of(&v, id, "remaining"), 10);
    srv_stop(&v);

    /* the same from a trusted peer: the gateway names the buyer */
    const char *here[] = {"--trusted-proxies", "10.0.0.0/8, 127.0.0.1", NULL};
    srv_start(&v, NULL, here);
    id = open_activity(&v, 10, 1);
    CHECK_EQ(buy(&v, id, "X-User-Id: 7\r\n", &r), 200);
    CHECK_EQ(stat_of(&v, id, "remaining"), 9);
    sells_exactly_its_stock_then_stop(&v, 30, NULL);
    CHECK(!log_has(v.s.log, "anyone who can connect"));

    /* Trusted-header mode on every address without a proxy list is warned
     * about at start (a store that cannot open ends each run right after) */
    char any[64], local[64], out[4096];
    snprintf(any, sizeof any, "0.0.0.0:%d", sk_th_free_port());
    snprintf(local, sizeof local, "127.0.0.1:%d", sk_th_free_port());
    static const char dead_db[] = "sqlite:/nonexistent-dir/x.db"; /* a server's is waited for */
    const struct {
        const char *listen, *flag, *value;
        int warned;
    } starts[] = {
        {any, NULL, NULL, 1},
        {any, "--trusted-proxies", "10.0.0.2", 0},
        {local, NULL, NULL, 0},
    };
    for (size_t i = 0; i < sizeof starts / sizeof starts[0]; i++) {
        const char *args[12] = {"serve",  "--listen", starts[i].listen, "--db",          dead_db,
                                "--role", "api",      starts[i].flag,   starts[i].value, NULL};
        CHECK_EQ(sk_th_run_seckill(out, sizeof out, NULL, args), 1);
        CHECK_MSG(!!strstr(out, "anyone who can connect") == starts[i].warned, "start %zu: %s", i,
                  out);
    }
}

/* ------------------------------------------------------------ slow readers */

SK_TEST(a_client_that_stops_reading_its_answers_is_cut_off_after_the_io_timeout)
{
    struct srv v;
    const char *extra[] = {"--io-timeout-s", "2", NULL};
    srv_start(&v, NULL, extra);
    /* Pipelines 3,000 requests (81 KB) with a tiny receive buffer and
     * never reads: about 2 MB of answers pile up at the server. */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)v.s.port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
    static const char one[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    size_t total = 3000 * (sizeof one - 1), sent = 0;
    char *reqs = malloc(total);
    CHECK(reqs != NULL);
    for (int i = 0; i < 3000; i++)
        memcpy(reqs + (size_t)i * (sizeof one - 1), one, sizeof one - 1);
    fcntl(fd, F_SETFL, O_NONBLOCK);
    int64_t deadline = sk_mono_ms() + 10000;
    while (sent < total && sk_mono_ms() < deadline) {
        ssize_t w = send(fd, reqs + sent, total - sent, MSG_NOSIGNAL);
        if (w > 0) sent += (size_t)w;
        if (w < 0) pause_ms(5);
    }
    free(reqs);
    CHECK_EQ(sent, total);
    int64_t t0 = sk_mono_ms();
    /* meanwhile the server serves everyone else */
    struct sk_th_http c;
    struct sk_th_resp r;
    sk_th_http_open(&c, v.s.port);
    for (int i = 0; i < 5; i++) {
        CHECK_EQ(sk_th_http_req(&c, "GET", "/healthz", NULL, NULL, &r), 200);
        pause_ms(200);
    }
    sk_th_http_close(&c);
    int gone = peer_gone(fd, 20000);
    int64_t waited = sk_mono_ms() - t0;
    close(fd);
    CHECK_MSG(gone, "the server held a connection whose answers were not read for 20 s");
    CHECK_MSG(waited >= 1500, "cut off after %lld ms: before the 2 s timeout", (long long)waited);
    sells_exactly_its_stock_then_stop(&v, 30, NULL);
}

SK_TEST(a_slow_but_reading_client_is_not_cut_off)
{
    struct srv v;
    const char *extra[] = {"--io-timeout-s", "1", NULL};
    srv_start(&v, NULL, extra);
    /* requests 0.4 s apart for 3 s on one keep-alive connection: every
     * gap is below the timeout, the whole is three times it */
    struct sk_th_http c;
    struct sk_th_resp r;
    sk_th_http_open(&c, v.s.port);
    int fd = c.fd;
    for (int i = 0; i < 8; i++) {
        CHECK_EQ(sk_th_http_req(&c, "GET", "/healthz", NULL, NULL, &r), 200);
        CHECK_MSG(c.fd == fd, "request %d needed a new connection", i);
        pause_ms(400);
    }
    sk_th_http_close(&c);
    srv_stop(&v);
}

/* ----------------------------------------------------- connections, memory */

/* n keep-alive connections, each having made one request (now idle). */
static void open_idle(int port, int *fds, int n)
{
    static const char req[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    for (int i = 0; i < n; i++) {
        fds[i] = dial(port);
        sk_th_send_all(fds[i], req, sizeof req - 1);
        char buf[1024];
        ssize_t got = recv(fds[i], buf, sizeof buf - 1, 0);
        CHECK_MSG(got > 12 && strncmp(buf, "HTTP/1.1 200", 12) == 0, "idle connection %d", i);
    }
}

SK_TEST(at_the_cap_new_buyers_are_served_and_idle_connections_make_room)
{
    struct srv v;
    const char *extra[] = {"--max-connections", "20", NULL};
    srv_start(&v, NULL, extra);
    uint64_t id = open_activity(&v, 100, 1);
    sk_th_http_close(&v.admin); /* the cap counts it too */
    pause_ms(200);
    /* 20 idle keep-alive connections, oldest first (the server looks at
     * connections every 100 ms: 150 ms apart, their ages differ) */
    int idle[20];
    for (int i = 0; i < 20; i++) {
        open_idle(v.s.port, &idle[i], 1);
        pause_ms(150);
    }
    /* 15 new buyers, each keeping its connection: each is served, and
     * takes the place of the connection idle the longest */
    int buyers[15];
    char path[100];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", id);
    for (int i = 0; i < 15; i++) {
        char req[256], out[1024];
        int n = snprintf(req, sizeof req,
                         "POST %s HTTP/1.1\r\nHost: x\r\nX-User-Id: %d\r\nContent-Length: 0"
                         "\r\n\r\n",
                         path, 500 + i);
        buyers[i] = dial(v.s.port);
        sk_th_send_all(buyers[i], req, (size_t)n);
        ssize_t got = recv(buyers[i], out, sizeof out - 1, 0);
        CHECK_MSG(got > 12 && strncmp(out, "HTTP/1.1 200", 12) == 0, "buyer %d", i);
        CHECK_MSG(peer_gone(idle[i], 2000), "buyer %d: idle connection %d still open", i, i);
    }
    for (int i = 15; i < 20; i++)
        CHECK_MSG(!peer_gone(idle[i], 0), "idle connection %d closed before older ones", i);
    for (int i = 0; i < 20; i++)
        close(idle[i]);
    for (int i = 0; i < 15; i++)
        close(buyers[i]);
    pause_ms(200);
    sk_th_http_open(&v.admin, v.s.port);
    CHECK_EQ(stat_of(&v, id, "admitted"), 15);
    sells_exactly_its_stock_then_stop(&v, 30, NULL);
}

/* CPU seconds (user + system) a process has used. */
static double cpu_s(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')');
    CHECK(p != NULL);
    unsigned long ut = 0, st = 0;
    /* after the name: state, then 10 fields, then utime and stime */
    CHECK(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) == 2);
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

SK_TEST(at_the_cap_with_every_connection_busy_new_ones_wait_without_spinning)
{
    /* a private Redis, stopped: purchases hang, so their connections are
     * busy (not idle) and cannot make room */
    struct sk_th_redis rs;
    sk_th_redis_start(&rs, NULL);
    struct srv v;
    const char *extra[] = {
        "--max-connections", "6", "--redis-timeout-ms", "60000", "--role", "api", NULL};
    srv_start(&v, rs.url, extra);
    uint64_t id = open_activity(&v, 100, 1);
    sk_th_http_close(&v.admin);
    kill(rs.pid, SIGSTOP);
    int busy[6];
    char path[100], req[256];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", id);
    for (int i = 0; i < 6; i++) {
        busy[i] = dial(v.s.port);
        int n =
            snprintf(req, sizeof req,
                     "POST %s HTTP/1.1\r\nHost: x\r\nX-User-Id: %d\r\nContent-Length: 0\r\n\r\n",
                     path, 700 + i);
        sk_th_send_all(busy[i], req, (size_t)n);
    }
    /* the 7th waits in the backlog; the server neither spins nor drops it */
    int late = dial(v.s.port);
    sk_th_send_all(late, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 35);
    pause_ms(300);
    double c0 = cpu_s(v.s.pid);
    pause_ms(1500);
    double used = cpu_s(v.s.pid) - c0;
    CHECK_MSG(used < 0.3, "the server used %.2f s of CPU in 1.5 s while at the cap", used);
    struct pollfd p = {.fd = late, .events = POLLIN};
    CHECK_MSG(poll(&p, 1, 0) == 0, "answered beyond the cap while every connection was busy");
    /* Redis back: the six are answered, become idle, and make room */
    kill(rs.pid, SIGCONT);
    char out[2048];
    int closed;
    read_until_close(late, out, sizeof out, 10000, &closed);
    CHECK_MSG(strncmp(out, "HTTP/1.1 200", 12) == 0, "the waiting client got: '%s'", out);
    for (int i = 0; i < 6; i++) {
        read_until_close(busy[i], out, sizeof out, 300, &closed);
        CHECK_MSG(strncmp(out, "HTTP/1.1 200", 12) == 0, "purchase %d: '%s'", i, out);
        close(busy[i]);
    }
    close(late);
    sk_th_http_open(&v.admin, v.s.port);
    CHECK_EQ(stat_of(&v, id, "admitted"), 6);
    srv_stop(&v);
    sk_th_redis_stop(&rs, 1);
}

SK_TEST(out_of_file_descriptors_the_server_neither_spins_nor_stops_serving)
{
    struct srv v;
    /* a cap far above what the fd limit set below allows */
    const char *extra[] = {"--max-connections", "1000", "--role", "api", NULL};
    srv_start(&v, NULL, extra);
    uint64_t id = open_activity(&v, 100, 1);
    struct rlimit lim = {48, 48};
    CHECK_MSG(prlimit(v.s.pid, RLIMIT_NOFILE, &lim, NULL) == 0, "prlimit: %s", strerror(errno));
    /* 100 connections that never send anything: more than the fds left */
    int fds[100];
    for (int i = 0; i < 100; i++)
        fds[i] = dial(v.s.port);
    pause_ms(500);
    double c0 = cpu_s(v.s.pid);
    pause_ms(1500);
    double used = cpu_s(v.s.pid) - c0;
    CHECK_MSG(used < 0.3, "the server used %.2f s of CPU in 1.5 s out of fds", used);
    /* a buyer still gets in: idle connections make room */
    struct sk_th_resp r;
    CHECK_EQ(buy(&v, id, "X-User-Id: 42\r\n", &r), 200);
    for (int i = 0; i < 100; i++)
        close(fds[i]);
    sells_exactly_its_stock_then_stop(&v, 30, NULL);
}

SK_TEST(request_heads_over_16_kib_get_431_and_memory_stays_bounded)
{
    struct srv v;
    const char *extra[] = {"--role", "api", NULL};
    srv_start(&v, NULL, extra);
    long before = sk_th_proc_rss_kib(v.s.pid);
    /* 300 connections, each sending 100 KB of one header, never ending
     * the head (h2o alone would hold up to ~400 KB each) */
    enum { N = 300, BIG = 100 * 1024 };
    static int fds[N];
    char *junk = malloc(BIG + 64);
    CHECK(junk != NULL);
    int hl = snprintf(junk, 64, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ");
    memset(junk + hl, 'A', BIG);
    for (int i = 0; i < N; i++) {
        fds[i] = dial(v.s.port);
        fcntl(fds[i], F_SETFL, O_NONBLOCK);
        (void)!send(fds[i], junk, (size_t)hl + BIG, MSG_NOSIGNAL); /* as much as fits */
    }
    free(junk);
    int refused = 0;
    for (int i = 0; i < N; i++) {
        char out[1024];
        int closed;
        fcntl(fds[i], F_SETFL, 0);
        read_until_close(fds[i], out, sizeof out, 5000, &closed);
        refused += strncmp(out, "HTTP/1.1 431 ", 13) == 0;
        CHECK_MSG(closed, "connection %d still open", i);
        close(fds[i]);
    }
    long after = sk_th_proc_rss_kib(v.s.pid);
    CHECK_MSG(refused == N, "%d of %d heads answered 431", refused, N);
#ifndef __SANITIZE_ADDRESS__
    /* (under AddressSanitizer freed memory stays in its quarantine) */
    CHECK_MSG(after - before < 10 * 1024, "RSS grew from %ld to %ld KiB", before, after);
#else
    (void)before;
    (void)after;
#endif
    /* a head just under the limit is still served */
    char *ok = malloc(16000);
    CHECK(ok != NULL);
    int n = snprintf(ok, 64, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ");
    memset(ok + n, 'B', 15000);
    memcpy(ok + n + 15000, "\r\nConnection: close\r\n\r\n", 23);
    int fd = dial(v.s.port), closed;
    sk_th_send_all(fd, ok, (size_t)n + 15000 + 23);
    free(ok);
    char out[1024];
    read_until_close(fd, out, sizeof out, 5000, &closed);
    close(fd);
    CHECK_MSG(strncmp(out, "HTTP/1.1 200 ", 13) == 0, "%s", out);
    sells_exactly_its_stock_then_stop(&v, 30, NULL);
}

/* The first bytes the server sends on fd within ms (terminated in out);
 * 0 when none came, -1 when it closed. */
static int first_bytes(int fd, char *out, size_t cap, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    out[0] = 0;
    if (poll(&p, 1, ms) <= 0) return 0;
    ssize_t n = recv(fd, out, cap - 1, 0);
    if (n <= 0) return -1;
    out[n] = 0;
    return 1;
}

/* Many connections each holding an unfinished 64 KiB body: the process's
 * request bytes stay under --max-request-bytes (bodies past it are refused
 * 503 at once, and once the bodies grow past it the oldest unfinished
 * requests are closed first), its RSS grows by about the cap, not by the
 * bodies, and a buyer whose body comes with the head is still served. */
SK_TEST_T(buffered_request_bytes_stay_under_the_cap_oldest_unfinished_closed_first, 120)
{
    enum { N = 400, BODY = 65536, SENT = BODY - 1, CAP = 4 << 20 };
    struct srv v;
    const char *extra[] = {"--role", "api", "--max-request-bytes", "4194304", NULL};
    srv_start(&v, NULL, extra);
    uint64_t id = open_activity(&v, 50, 1);
    long before = sk_th_proc_rss_kib(v.s.pid);
    static int fds[N];
    static char state[N]; /* 'c': 100 Continue (let wait), 'r': 503, else nothing */
    char head[512], out[1024];
    int hl = 0, admitted = 0, refused = 0;
    /* the heads: each says how large its body is and waits for 100-continue,
     * so the server's verdict on each is known before the next */
    for (int i = 0; i < N; i++) {
        hl = snprintf(head, sizeof head,
                      "POST /api/v1/activities/%" PRIu64 "/purchase HTTP/1.1\r\nHost: x\r\n"
                      "X-User-Id: %d\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n",
                      id, 80000 + i, BODY);
        fds[i] = dial(v.s.port);
        sk_th_send_all(fds[i], head, (size_t)hl);
        int got = first_bytes(fds[i], out, sizeof out, 10000);
        CHECK_MSG(got == 1, "connection %d: no answer to its head (%d)", i, got);
        if (strncmp(out, "HTTP/1.1 100 ", 13) == 0) {
            state[i] = 'c';
            admitted++;
        } else {
            CHECK_MSG(strncmp(out, "HTTP/1.1 503 ", 13) == 0 && strstr(out, "\"busy\"") &&
                          strcasestr(out, "retry-after: 1"),
                      "connection %d: %s", i, out);
            state[i] = 'r';
            refused++;
        }
    }
    /* every reservation of a whole body fits the cap, and no more */
    CHECK_MSG(admitted > 0 && (long)admitted * BODY <= CAP && refused > 0,
              "%d let wait, %d refused", admitted, refused);
    /* the bodies, all but their end: each grows its buffer past its
     * reservation, the bytes pass the cap, the oldest are closed */
    char *body = malloc(SENT);
    CHECK(body != NULL);
    memset(body, 'x', SENT);
    for (int i = 0; i < N; i++)
        if (state[i] == 'c') (void)!send(fds[i], body, SENT, MSG_NOSIGNAL);
    free(body);
    /* a buyer whose body comes with its head is served meanwhile */
    struct sk_th_resp r;
    CHECK_EQ(buy(&v, id, "X-User-Id: 7\r\n", &r), 200);
    long after = sk_th_proc_rss_kib(v.s.pid);
    int closed = 0, open_ = 0, newest_closed = -1, oldest_open = N;
    for (int i = 0; i < N; i++) {
        if (state[i] != 'c') continue;
        if (peer_gone(fds[i], 50)) {
            closed++;
            newest_closed = i;
        } else {
            open_++;
            if (i < oldest_open) oldest_open = i;
        }
    }
    CHECK_MSG(closed > 0 && open_ > 0, "%d closed, %d open", closed, open_);
    CHECK_MSG(newest_closed < oldest_open, "connection %d was closed before %d, an older one",
              newest_closed, oldest_open);
#ifndef __SANITIZE_ADDRESS__
    /* unbounded, the bodies alone would be about N * 64 KiB (25 MiB) */
    CHECK_MSG(after - before < 3 * (CAP >> 10), "RSS grew from %ld to %ld KiB", before, after);
#else
    (void)before;
    (void)after;
#endif
    for (int i = 0; i < N; i++)
        close(fds[i]);
    CHECK_EQ(stat_of(&v, id, "admitted"), 1);
    sells_exactly_its_stock_then_stop(&v, 30, NULL);
}

/* ----------------------------------------------------------------- secrets */

SK_TEST(a_failed_start_logs_no_password)
{
    char out[8192], listen[64];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", sk_th_free_port());
    /* a URL libpq refuses (an unknown parameter): the start fails */
    const char *pg[] = {
        "serve",
        "--listen",
        listen,
        "--db",
        "postgres://app:PgPassw0rdXyz@127.0.0.1:1/shop?password=PgParamS3cret&nosuch=1",
        "--redis",
        "redis://:R3disPassw0rdXyz@127.0.0.1:1",
        NULL};
    int rc = sk_th_run_seckill(out, sizeof out, NULL, pg);
    CHECK_MSG(rc == 1, "exit %d: %s", rc, out);
    CHECK_MSG(strstr(out, "postgres://app:***@127.0.0.1:1/shop?password=***"), "%s", out);
    CHECK_MSG(!strstr(out, "PgPassw0rdXyz") && !strstr(out, "PgParamS3cret") &&
                  !strstr(out, "R3disPassw0rdXyz"),
              "a password in the log: %s", out);

    /* a database server that cannot be reached: serve starts without it
     * (purchases need Redis only) and says so, without the password */
    struct sk_th_serve d;
    const char *dead_pg[] = {
        "--db", "postgres://app:PgPassw0rdXyz@127.0.0.1:1/shop?password=PgParamS3cret", NULL};
    sk_th_serve_start(&d, sk_th_redis_url(), dead_pg);
    CHECK_EQ(sk_th_serve_stop(&d, SIGTERM), 0);
    FILE *df = fopen(d.log, "r");
    CHECK(df != NULL);
    char dline[2048];
    int told = 0;
    while (fgets(dline, sizeof dline, df)) {
        told += strstr(dline, "postgres://app:***@127.0.0.1:1/shop?password=***") != NULL &&
                strstr(dline, "not reachable") != NULL;
        CHECK_MSG(!strstr(dline, "PgPassw0rdXyz") && !strstr(dline, "PgParamS3cret"), "%s: %s",
                  d.log, dline);
    }
    fclose(df);
    CHECK_MSG(told > 0, "no line saying the database is not reachable (log %s)", d.log);

    /* a server whose Redis is unreachable starts anyway and says so:
     * without the password */
    struct sk_th_serve s;
    sk_th_serve_start(&s, "redis://:R3disPassw0rdXyz@127.0.0.1:1", NULL);
    struct sk_th_http c;
    struct sk_th_resp r;
    sk_th_http_open(&c, s.port);
    CHECK_EQ(sk_th_http_req(&c, "GET", "/readyz", NULL, NULL, &r), 503);
    sk_th_http_close(&c);
    sk_th_serve_stop(&s, SIGTERM);
    FILE *f = fopen(s.log, "r");
    CHECK(f != NULL);
    char line[2048];
    int lines = 0;
    while (fgets(line, sizeof line, f)) {
        lines++;
        CHECK_MSG(!strstr(line, "R3disPassw0rdXyz"), "%s: %s", s.log, line);
    }
    fclose(f);
    CHECK(lines > 0);
}

static void write_secret(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fputs(text, f);
    fclose(f);
    chmod(path, mode);
}

static int cmdline_has(pid_t pid, const char *needle)
{
    char path[64], buf[8192];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    return memmem(buf, n, needle, strlen(needle)) != NULL;
}

SK_TEST(secrets_from_files_and_the_environment_stay_out_of_ps)
{
    static char out[16384]; /* the whole of serve --help */
    const char *help[] = {"serve", "--help", NULL};
    CHECK_EQ(sk_th_run_seckill(out, sizeof out, NULL, help), 0);
    CHECK_MSG(strstr(out, "`ps`") && strstr(out, "--admin-token-file") &&
                  strstr(out, "SECKILL_HMAC_SECRET") && strstr(out, "--trusted-proxies"),
              "%s", out);

    char admin_file[320], hmac_file[320];
    snprintf(admin_file, sizeof admin_file, "%s/admin.token", sk_th_tmpdir());
    snprintf(hmac_file, sizeof hmac_file, "%s/hmac.secret", sk_th_tmpdir());
    write_secret(admin_file, "admin-from-a-file-77\n", 0600);
    write_secret(hmac_file, "hmac-secret-from-a-file-0123\r\n", 0600);
    /* the file's token replaces the harness's --admin-token (it comes later) */
    const char *extra[] = {"--admin-token-file", admin_file, "--auth", "hmac",
                           "--hmac-secret-file", hmac_file,  NULL};
    struct srv v;
    srv_start(&v, NULL, extra);
    CHECK(!cmdline_has(v.s.pid, "admin-from-a-file-77"));
    CHECK(!cmdline_has(v.s.pid, "hmac-secret-from-a-file"));
    struct sk_th_resp r;
    CHECK_EQ(sk_th_http_req(&v.admin, "GET", "/api/v1/activities/1/stats", ADMIN_HDR, NULL, &r),
             401);
    uint64_t id = sk_th_unique_id();
    char body[400];
    snprintf(body, sizeof body,
             "{\"id\":%" PRIu64 ",\"name\":\"f\",\"stock\":5,\"per_user_limit\":1,"
             "\"start\":\"2020-01-01T00:00:00Z\",\"end\":\"2099-01-01T00:00:00Z\"}",
             id);
    CHECK_EQ(sk_th_http_req(&v.admin, "POST", "/api/v1/activities",
                            "Authorization: Bearer admin-from-a-file-77\r\n", body, &r),
             201);
    srv_stop(&v);

    /* the HMAC secret from the environment (inherited by the server) */
    setenv("SECKILL_HMAC_SECRET", "hmac-secret-from-the-env-42", 1);
    const char *env_extra[] = {"--auth", "hmac", NULL};
    srv_start(&v, NULL, env_extra);
    unsetenv("SECKILL_HMAC_SECRET");
    CHECK(!cmdline_has(v.s.pid, "hmac-secret-from-the-env"));
    id = open_activity(&v, 5, 1);
    char tok[SK_AUTH_TOKEN_MAX + 1], h[200];
    const char *sec = "hmac-secret-from-the-env-42";
    CHECK(sk_auth_make_token(sec, strlen(sec), 9, sk_wall_ms() / 1000 + 600, tok, sizeof tok) > 0);
    snprintf(h, sizeof h, "Authorization: Bearer %s\r\n", tok);
    CHECK_EQ(buy(&v, id, h, &r), 200);
    const char *load[] = {"--auth", "hmac", "--hmac-secret", sec, NULL};
    sells_exactly_its_stock_then_stop(&v, 30, load);

    /* a file others may read: a warning; an empty or missing one: exit 2 */
    char listen[64], db[320];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", sk_th_free_port());
    snprintf(db, sizeof db, "sqlite:%s/x.db", sk_th_tmpdir());
    write_secret(hmac_file, "", 0600);
    const char *empty[] = {"serve", "--listen",           listen,    "--db", db, "--auth",
                           "hmac",  "--hmac-secret-file", hmac_file, NULL};
    CHECK_EQ(sk_th_run_seckill(out, sizeof out, NULL, empty), 2);
    CHECK_MSG(strstr(out, "one line"), "%s", out);
    const char *missing[] = {
        "serve", "--listen", listen, "--db", db, "--admin-token-file", "/nonexistent/admin.token",
        NULL};
    CHECK_EQ(sk_th_run_seckill(out, sizeof out, NULL, missing), 2);
    CHECK_MSG(strstr(out, "cannot read") && strstr(out, "/nonexistent/admin.token"), "%s", out);
}

/* A start that gets past the configuration ends at the store that cannot
 * open (exit 1); one refused for its configuration exits 2. */
static int start_exit(const char *const *args, char *out, size_t cap)
{
    return sk_th_run_seckill(out, cap, NULL, args);
}

SK_TEST(short_admin_tokens_and_secrets_others_may_read_are_refused_at_start)
{
    char out[8192], listen[64], conf[320], tok[320];
    static const char dead_db[] = "sqlite:/nonexistent-dir/x.db";
    snprintf(listen, sizeof listen, "127.0.0.1:%d", sk_th_free_port());
    snprintf(conf, sizeof conf, "%s/seckill.conf", sk_th_tmpdir());
    snprintf(tok, sizeof tok, "%s/admin_token", sk_th_tmpdir());
    /* an admin token of a few bytes: as an HMAC secret, refused, unechoed */
    const char *short_tok[] = {"serve", "--listen",      listen, "--db",
                               dead_db, "--admin-token", "s3cr", NULL};
    CHECK_EQ(start_exit(short_tok, out, sizeof out), 2);
    CHECK_MSG(strstr(out, "admin_token must be at least 16 bytes") && !strstr(out, "s3cr"), "%s",
              out);
    write_secret(tok, "s3cr\n", 0600);
    const char *short_file[] = {"serve", "--listen",           listen, "--db",
                                dead_db, "--admin-token-file", tok,    NULL};
    CHECK_EQ(start_exit(short_file, out, sizeof out), 2);
    CHECK_MSG(strstr(out, "at least 16 bytes") && !strstr(out, "s3cr\n"), "%s", out);

    /* a config file holding a secret that others may read: refused, the
     * secret never shown; group-readable (0640 root:seckill) is fine */
    const char *with_conf[] = {"serve", "--config", conf,    "--listen",
                               listen,  "--db",     dead_db, NULL};
    static const struct {
        const char *text, *holds;
        mode_t mode;
        int exit;
    } confs[] = {
        {"admin_token = admin-token-in-the-file-0123\n", "admin_token", 0644, 2},
        {"admin_token = admin-token-in-the-file-0123\n", NULL, 0640, 1},
        {"admin_token = admin-token-in-the-file-0123\n", NULL, 0600, 1},
        {"hmac_secret = hmac-secret-in-the-file-0123\n", "hmac_secret", 0604, 2},
        {"redis = redis://:R3disPassw0rdXyz@127.0.0.1:1\n", "redis password", 0644, 2},
        {"db = postgres://app:PgPassw0rdXyz@127.0.0.1:1/shop\n", "db password", 0644, 2},
        {"log_level = warn\n", NULL, 0644, 1},        /* nothing secret: fine */
        {"log_level = warn\n", "may write", 0646, 2}, /* others could add a token */
        {"admin_token_file = /x\n", NULL, 0644, 2},   /* a path is no secret (the file
                                                          is missing: exit 2) */
    };
    for (size_t i = 0; i < sizeof confs / sizeof confs[0]; i++) {
        write_secret(conf, confs[i].text, confs[i].mode);
        int rc = start_exit(with_conf, out, sizeof out);
        CHECK_MSG(rc == confs[i].exit, "config %zu: exit %d: %s", i, rc, out);
        if (confs[i].exit == 2 && confs[i].holds)
            CHECK_MSG(strstr(out, confs[i].holds) && strstr(out, "chmod o-rwx"), "config %zu: %s",
                      i, out);
        if (confs[i].exit == 1) CHECK_MSG(!strstr(out, "chmod"), "config %zu: %s", i, out);
        CHECK_MSG(!strstr(out, "in-the-file") && !strstr(out, "Passw0rd"), "config %zu: %s", i,
                  out);
    }
    /* a secret file others may read: refused too (it was a warning) */
    write_secret(tok, "admin-token-in-a-file-0123\n", 0644);
    const char *world[] = {"serve", "--listen",           listen, "--db",
                           dead_db, "--admin-token-file", tok,    NULL};
    CHECK_EQ(start_exit(world, out, sizeof out), 2);
    CHECK_MSG(strstr(out, "admin_token_file") && strstr(out, "chmod o-rwx"), "%s", out);
    chmod(tok, 0640);
    CHECK_EQ(start_exit(world, out, sizeof out), 1);
}

/* Under systemd the unit's LoadCredential= puts the secrets in
 * $CREDENTIALS_DIRECTORY; serve reads them there, below every other
 * source, and an empty one (the unit's default) is no secret. */
SK_TEST(secrets_from_systemd_credentials_at_the_lowest_precedence)
{
    char dir[320], path[400], out[8192], listen[64];
    snprintf(dir, sizeof dir, "%s/credentials", sk_th_tmpdir());
    CHECK_EQ(mkdir(dir, 0700), 0);
    snprintf(path, sizeof path, "%s/hmac_secret", dir);
    write_secret(path, "hmac-secret-from-a-credential-42", 0400);
    /* what the unit's SetCredential= gives when no file was made */
    snprintf(path, sizeof path, "%s/hmac_secret_prev", dir);
    write_secret(path, "\n", 0400);
    snprintf(path, sizeof path, "%s/admin_token", dir);
    write_secret(path, "", 0400);
    setenv("CREDENTIALS_DIRECTORY", dir, 1);
    const char *extra[] = {"--auth", "hmac", NULL};
    struct srv v;
    srv_start(&v, NULL, extra);
    unsetenv("CREDENTIALS_DIRECTORY");
    uint64_t id = open_activity(&v, 5, 1); /* the harness's --admin-token wins */
    char tk[SK_AUTH_TOKEN_MAX + 1], h[200];
    const char *sec = "hmac-secret-from-a-credential-42";
    CHECK(sk_auth_make_token(sec, strlen(sec), 9, sk_wall_ms() / 1000 + 600, tk, sizeof tk) > 0);
    snprintf(h, sizeof h, "Authorization: Bearer %s\r\n", tk);
    struct sk_th_resp r;
    CHECK_EQ(buy(&v, id, h, &r), 200);
    srv_stop(&v);
    /* the environment wins over the credential */
    snprintf(listen, sizeof listen, "127.0.0.1:%d", sk_th_free_port());
    char env_dir[400];
    snprintf(env_dir, sizeof env_dir, "CREDENTIALS_DIRECTORY=%s", dir);
    const char *env[] = {env_dir, "SECKILL_HMAC_SECRET=short", NULL};
    const char *args[] = {"serve",  "--listen", listen, "--db", "sqlite:/nonexistent-dir/x.db",
                          "--auth", "hmac",     NULL};
    CHECK_EQ(sk_th_run_seckill(out, sizeof out, env, args), 2);
    CHECK_MSG(strstr(out, "hmac_secret must be at least 16 bytes"), "%s", out);
    const char *env_cred_only[] = {env_dir, NULL};
    CHECK_EQ(sk_th_run_seckill(out, sizeof out, env_cred_only, args), 1);
}

/* ------------------------------------------------------------ token policy */

SK_TEST(hmac_secret_length_token_lifetime_and_key_rotation_over_http)
{
    char out[4096], listen[64], db[320];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", sk_th_free_port());
    snprintf(db, sizeof db, "sqlite:%s/x.db", sk_th_tmpdir());
    const char *shortsec[] = {
        "serve",         "--listen",        listen, "--db", db, "--auth", "hmac",
        "--hmac-secret", "fifteen-bytes!!", NULL};
    CHECK_EQ(sk_th_run_seckill(out, sizeof out, NULL, shortsec), 2);
    CHECK_MSG(strstr(out, "at least 16 bytes") && !strstr(out, "fifteen-bytes"), "%s", out);

    const char *cur = "current-secret-0002", *old = "previous-secret-0001";
    const char *extra[] = {"--auth",
                           "hmac",
                           "--hmac-secret",
                           cur,
                           "--hmac-key-id",
                           "2",
                           "--hmac-secret-prev",
                           old,
                           "--hmac-max-ttl-s",
                           "3600",
                           NULL};
    struct srv v;
    srv_start(&v, NULL, extra);
    uint64_t id = open_activity(&v, 20, 1);
    int64_t now = sk_wall_ms() / 1000;
    static const struct {
        const char *kid;
        int which; /* 0: current secret, 1: previous */
        int64_t ttl;
        int status;
    } cases[] = {
        {"2", 0, 600, 200},        /* the new key, by its id */
        {NULL, 1, 600, 200},       /* an old token: no id, the previous secret */
        {"2", 0, 3000, 200},       /* within the max TTL */
        {"2", 0, 3600 + 120, 401}, /* beyond it */
        {"2", 0, INT64_MAX, 401},  /* never expires: refused */
        {NULL, 1, INT64_MAX, 401}, {"2", 1, 600, 401}, /* the id names the other secret */
        {NULL, 0, 600, 401},                           /* no id: the previous secret checks it */
        {"7", 0, 600, 401},                            /* an unknown id */
        {"2", 0, -5, 401},                             /* expired */
    };
    int bought = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char tok[SK_AUTH_KID_TOKEN_MAX + 1], h[256];
        const char *sec = cases[i].which ? old : cur;
        int64_t exp = cases[i].ttl == INT64_MAX ? INT64_MAX : now + cases[i].ttl;
        CHECK(sk_auth_make_token_kid(cases[i].kid, sec, strlen(sec), 300 + i, exp, tok,
                                     sizeof tok) > 0);
        snprintf(h, sizeof h, "Authorization: Bearer %s\r\n", tok);
        struct sk_th_resp r;
        int st = buy(&v, id, h, &r);
        CHECK_MSG(st == cases[i].status, "case %zu: %d, want %d: %s", i, st, cases[i].status,
                  r.body);
        bought += st == 200;
    }
    CHECK_EQ(stat_of(&v, id, "admitted"), bought);
    /* the load generator signs without an id: the previous secret */
    const char *load[] = {"--auth", "hmac", "--hmac-secret", old, NULL};
    sells_exactly_its_stock_then_stop(&v, 30, load);
}

/* ---------------------------------------------- keyed purchases, sold out */

SK_TEST(keyed_purchases_after_the_sell_out_skip_the_admission_call_but_keep_replays)
{
    struct sk_th_redis rs;
    sk_th_redis_start(&rs, NULL);
    struct srv v;
    srv_start(&v, rs.url, NULL);
    uint64_t id = open_activity(&v, 3, 1);
    struct sk_th_resp r;
    CHECK_EQ(buy(&v, id, "X-User-Id: 1\r\nIdempotency-Key: first-try\r\n", &r), 200);
    char order[sizeof r.body];
    snprintf(order, sizeof order, "%s", r.body);
    CHECK_EQ(buy(&v, id, "X-User-Id: 2\r\n", &r), 200);
    CHECK_EQ(buy(&v, id, "X-User-Id: 3\r\nIdempotency-Key: k3\r\n", &r), 200);
    CHECK_EQ(buy(&v, id, "X-User-Id: 4\r\n", &r), 409); /* sold out, seen by the server */
    long long eval0 = sk_th_redis_calls(rs.port, "evalsha") + sk_th_redis_calls(rs.port, "eval");
    long long hget0 = sk_th_redis_calls(rs.port, "hget");
    /* 200 purchases with keys nobody used before: sold out, no admission */
    for (int i = 0; i < 200; i++) {
        char h[128];
        snprintf(h, sizeof h, "X-User-Id: %d\r\nIdempotency-Key: fresh-%d\r\n", 1000 + i, i);
        CHECK_EQ(buy(&v, id, h, &r), 409);
        CHECK_MSG(strstr(r.body, "\"sold_out\"") != NULL, "%s", r.body);
    }
    CHECK_EQ(sk_th_redis_calls(rs.port, "evalsha") + sk_th_redis_calls(rs.port, "eval"), eval0);
    CHECK_EQ(sk_th_redis_calls(rs.port, "hget") - hget0, 200);
    /* a retry of an accepted purchase still gets its first answer */
    CHECK_EQ(buy(&v, id, "X-User-Id: 1\r\nIdempotency-Key: first-try\r\n", &r), 200);
    CHECK_STR(r.body, order);
    /* a key of another user is not theirs: sold out */
    CHECK_EQ(buy(&v, id, "X-User-Id: 2\r\nIdempotency-Key: first-try\r\n", &r), 409);
    CHECK_EQ(stat_of(&v, id, "admitted"), 3);
    CHECK_EQ(stat_of(&v, id, "remaining"), 0);
    srv_stop(&v);
    sk_th_redis_stop(&rs, 1);
}

/* ------------------------------------------------------- IPv6 rate limits */

SK_TEST(ipv6_clients_of_one_64_share_the_per_ip_rate_limit)
{
    /* the gateway on 127.0.0.1 passes the client address on */
    const char *extra[] = {"--rate-per-ip-per-s", "1", "--rate-ip-burst", "1", "--trusted-proxies",
                           "127.0.0.1",           NULL};
    struct srv v;
    srv_start(&v, NULL, extra);
    uint64_t id = open_activity(&v, 100, 1);
    static const struct {
        const char *ip;
        int status;
    } cases[] = {
        {"2001:db8:1:2::a", 200}, {"2001:db8:1:2:ffff:ffff:ffff:ffff", 429}, /* the same /64 */
        {"2001:db8:1:3::a", 200},                                            /* the next /64 */
        {"203.0.113.7", 200},     {"203.0.113.8", 200}, /* IPv4: each address its own */
        {"203.0.113.7", 429},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char h[160];
        struct sk_th_resp r;
        snprintf(h, sizeof h, "X-User-Id: %zu\r\nX-Forwarded-For: %s\r\n", 60 + i, cases[i].ip);
        int st = buy(&v, id, h, &r);
        CHECK_MSG(st == cases[i].status, "%s: %d, want %d: %s", cases[i].ip, st, cases[i].status,
                  r.body);
    }
    CHECK_EQ(stat_of(&v, id, "admitted"), 4);
    srv_stop(&v);
}
