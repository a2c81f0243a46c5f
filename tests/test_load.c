/* test_load.c - `seckill load`: its response parser and JSON lookup, its
 * flags, a run against a real `seckill serve` (exactly the stock accepted,
 * exit 0), and planted faults it must catch: a test-only responder that
 * oversells (every purchase 200 with a fresh order id), one that repeats
 * order ids, one that answers 503, one that hangs up mid-answer.
 *
 * The responder is a forked process with one poll() loop over its
 * connections; it dies with the test (PR_SET_PDEATHSIG) and is killed and
 * reaped at the end of each test. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "core/error.h"
#include "load/load.h"
#include "support/harness.h"
#include "support/http_client.h"

/* ---- parser ---- */

static int parse(const char *text, int eof, int head, struct sk_http_resp *r, char *buf, size_t cap)
{
    size_t n = strlen(text);
    CHECK(n < cap);
    memcpy(buf, text, n + 1);
    return sk_http_resp_parse(buf, n, eof, head, r);
}

/* text (no EOF, not a HEAD) parses as one whole response: returned. */
static struct sk_http_resp parse_whole(const char *text, char *buf, size_t cap)
{
    struct sk_http_resp r;
    CHECK_MSG(parse(text, 0, 0, &r, buf, cap) == 1, "not one whole response: %s", text);
    return r;
}

SK_TEST(load_parser_content_length_split_across_reads)
{
    const char *full = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nCONTENT-LENGTH: 13\r\n"
                       "\r\n{\"a\":\"hello\"}";
    char buf[512];
    struct sk_http_resp r;
    size_t n = strlen(full);
    /* every prefix is "need more", the whole is one response */
    for (size_t k = 0; k < n; k++) {
        memcpy(buf, full, k);
        CHECK_EQ(sk_http_resp_parse(buf, k, 0, 0, &r), 0);
    }
    memcpy(buf, full, n);
    CHECK_EQ(sk_http_resp_parse(buf, n, 0, 0, &r), 1);
    CHECK_EQ(r.status, 200);
    CHECK_EQ(r.keep_alive, 1);
    CHECK_EQ(r.body_len, 13);
    CHECK_EQ(r.consumed, n);
    CHECK(memcmp(r.body, "{\"a\":\"hello\"}", 13) == 0);
    /* the peer closing mid-body is a protocol error, not a response */
    memcpy(buf, full, n - 3);
    CHECK_EQ(sk_http_resp_parse(buf, n - 3, 1, 0, &r), SK_EPROTO);
}

SK_TEST(http_resp_status_line_alone_and_the_head_of_the_final_answer)
{
    /* the status line alone: every prefix of a good one is "more" */
    const char *line = "HTTP/1.1 503 Service Unavailable\r\n";
    for (size_t k = 0; k < 13; k++)
        CHECK_EQ(sk_http_resp_status(line, k), 0);
    CHECK_EQ(sk_http_resp_status(line, strlen(line)), 503);
    CHECK_EQ(sk_http_resp_status("HTTP/1.0 200\r\n", 14), 200);
    CHECK_EQ(sk_http_resp_status("HTTP/2 200 OK\r\n", 15), SK_EPROTO);
    CHECK_EQ(sk_http_resp_status("HTTP/1.1 20x OK", 15), SK_EPROTO);
    CHECK_EQ(sk_http_resp_status("HTTP/1.1 099 X", 14), SK_EPROTO);
    CHECK_EQ(sk_http_resp_status("HTTP/1.1 2000 ", 14), SK_EPROTO);
    CHECK_EQ(sk_http_resp_status("SSH-2.0", 7), SK_EPROTO); /* refused before it is whole */
    /* the head is the final answer's, after a 100 Continue */
    char buf[512];
    struct sk_http_resp r =
        parse_whole("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nX-A: b\r\n"
                    "Content-Length: 2\r\n\r\nok",
                    buf, sizeof buf);
    CHECK_EQ(r.status, 201);
    const char want[] = "HTTP/1.1 201 Created\r\nX-A: b\r\nContent-Length: 2\r\n\r\n";
    CHECK_EQ(r.head_len, sizeof want - 1);
    CHECK(memcmp(r.head, want, sizeof want - 1) == 0);
    CHECK(r.body == r.head + r.head_len);
}

SK_TEST(load_parser_chunked_interim_close_and_head)
{
    char buf[1024];
    struct sk_http_resp r;
    /* chunked with an extension and a trailer, decoded in place */
    r = parse_whole("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
                    "5;x=y\r\n{\"ord\r\n7\r\ner_id\":\r\n6\r\n\"z1\"}\n\r\n0\r\nX-T: 1\r\n\r\n",
                    buf, sizeof buf);
    CHECK_EQ(r.body_len, 18);
    CHECK(memcmp(r.body, "{\"order_id\":\"z1\"}\n", 18) == 0);
    /* incomplete chunked: need more; and the raw bytes are not touched */
    const char *part = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcde\r\n";
    CHECK_EQ(parse(part, 0, 0, &r, buf, sizeof buf), 0);
    CHECK(strcmp(buf, part) == 0);
    CHECK_EQ(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 0, 0, &r, buf,
                   sizeof buf),
             SK_EPROTO);
    /* 100 Continue is skipped */
    r = parse_whole(
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 409 Conflict\r\nContent-Length: 2\r\n\r\n{}", buf,
        sizeof buf);
    CHECK_EQ(r.status, 409);
    CHECK_EQ(r.consumed, strlen(buf));
    /* Connection: close, and HTTP/1.0 without keep-alive */
    r = parse_whole("HTTP/1.1 200 OK\r\nConnection: Close\r\nContent-Length: 0\r\n\r\n", buf,
                    sizeof buf);
    CHECK_EQ(r.keep_alive, 0);
    r = parse_whole("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", buf, sizeof buf);
    CHECK_EQ(r.keep_alive, 0);
    r = parse_whole("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", buf,
                    sizeof buf);
    CHECK_EQ(r.keep_alive, 1);
    /* no length: the body runs to the close */
    CHECK_EQ(parse("HTTP/1.1 200 OK\r\n\r\nabc", 0, 0, &r, buf, sizeof buf), 0);
    CHECK_EQ(parse("HTTP/1.1 200 OK\r\n\r\nabc", 1, 0, &r, buf, sizeof buf), 1);
    CHECK_EQ(r.body_len, 3);
    CHECK_EQ(r.keep_alive, 0);
    /* HEAD and 204 carry no body whatever Content-Length says */
    CHECK_EQ(parse("HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n", 0, 1, &r, buf, sizeof buf), 1);
    CHECK_EQ(r.body_len, 0);
    r = parse_whole("HTTP/1.1 204 No Content\r\n\r\n", buf, sizeof buf);
}

SK_TEST(load_parser_rejects_garbage)
{
    char buf[1024];
    struct sk_http_resp r;
    const char *bad[] = {
        "HTTP/2 200 OK\r\n\r\n",
        "SSH-2.0-OpenSSH\r\n\r\n",
        "HTTP/1.1 2x0 OK\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
        "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        "HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        "HTTP/1.1 200 OK\r\n folded: x\r\n\r\n",
        "HTTP/1.1 101 Switching Protocols\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_MSG(parse(bad[i], 0, 0, &r, buf, sizeof buf) == SK_EPROTO, "accepted: %s", bad[i]);
    /* a close in the middle of the headers */
    CHECK_EQ(parse("HTTP/1.1 200 OK\r\nContent-", 1, 0, &r, buf, sizeof buf), SK_EPROTO);
}

SK_TEST(load_json_field_lookup)
{
    const char *j = " { \"nested\": {\"order_id\": \"no\", \"a\": [1, {\"b\": \"]}\"}]},"
                    " \"s\": \"q\\\"x\", \"order_id\" : \"42-1700000000000-0\", \"quantity\": 3 } ";
    const char *v;
    size_t n;
    int str;
    CHECK_EQ(sk_load_json_field(j, strlen(j), "order_id", &v, &n, &str), 0);
    CHECK(str && n == 18 && memcmp(v, "42-1700000000000-0", 18) == 0);
    CHECK_EQ(sk_load_json_field(j, strlen(j), "quantity", &v, &n, &str), 0);
    CHECK(!str && n == 1 && *v == '3');
    CHECK_EQ(sk_load_json_field(j, strlen(j), "s", &v, &n, &str), 0);
    CHECK(str && n == 4);
    CHECK_EQ(sk_load_json_field(j, strlen(j), "b", &v, &n, &str), SK_ENOTFOUND);
    CHECK_EQ(sk_load_json_field("{}", 2, "a", &v, &n, &str), SK_ENOTFOUND);
    CHECK_EQ(sk_load_json_field("[1]", 3, "a", &v, &n, &str), SK_EPROTO);
    CHECK_EQ(sk_load_json_field("{\"a\":\"x", 7, "a", &v, &n, &str), SK_EPROTO);
    CHECK_EQ(sk_load_json_field("{\"x\" 1}", 7, "a", &v, &n, &str), SK_EPROTO);
}

/* ---- flags ---- */

SK_TEST(load_bad_flags_exit_2_and_help_exits_0)
{
    char out[8192];
    const char *help[] = {"load", "--help", NULL};
    CHECK_EQ(sk_th_run_seckill(out, sizeof out, NULL, help), 0);
    CHECK(strstr(out, "--expect-stock") != NULL);
    const char *const bad[][8] = {
        {"load", NULL},                                                    /* no --url */
        {"load", "--url", "https://127.0.0.1:1", "--activity", "1", NULL}, /* https */
        {"load", "--url", "http://example.com:80", "--activity", "1", NULL},
        {"load", "--url", "http://127.0.0.1:99999", "--activity", "1", NULL},
        {"load", "--url", "http://127.0.0.1:1", NULL}, /* purchase path needs an activity */
        {"load", "--url", "http://127.0.0.1:1", "--activity", "1", "--connections", "0", NULL},
        {"load", "--url", "http://127.0.0.1:1", "--activity", "1", "--connections", "10001", NULL},
        {"load", "--url", "http://127.0.0.1:1", "--activity", "1", "--retry-ratio", "1.5", NULL},
        {"load", "--url", "http://127.0.0.1:1", "--activity", "1", "--auth", "hmac", NULL},
        {"load", "--url", "http://127.0.0.1:1", "--activity", "1", "--duration", "0", NULL},
        {"load", "--url", "http://127.0.0.1:1", "--activity", "1", "--bogus", "1", NULL},
        {"load", "--url", "http://127.0.0.1:1", "--activity", "x", NULL},
        {"load", "--url", "http://127.0.0.1:1", "--activity", "1", "--requests", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = sk_th_run_seckill(out, sizeof out, NULL, bad[i]);
        CHECK_MSG(rc == 2, "case %zu: exit %d: %s", i, rc, out);
        CHECK_MSG(strstr(out, "seckill: load: ") != NULL, "case %zu: %s", i, out);
    }
}

/* ---- helpers for runs ---- */

/* The JSON object printed by `seckill load --json` (a new reference). */
static json_t *result_json(const char *out)
{
    const char *p = strchr(out, '{');
    CHECK_MSG(p != NULL, "no JSON in: %s", out);
    json_error_t je;
    json_t *j = json_loadb(p, strcspn(p, "\n"), 0, &je);
    CHECK_MSG(j != NULL, "bad JSON (%s): %s", je.text, p);
    return j;
}

static long long jint(json_t *j, const char *path1, const char *path2)
{
    json_t *v = json_object_get(j, path1);
    if (path2) v = json_object_get(v, path2);
    return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

static void admin(struct sk_th_http *c, const char *path, const char *body, int want)
{
    struct sk_th_resp r;
    int st = sk_th_http_req(c, "POST", path, "Authorization: Bearer " SK_TH_ADMIN_TOKEN "\r\n",
                            body, &r);
    CHECK_MSG(st == want, "POST %s: %d %.*s", path, st, (int)r.body_len, r.body);
}

static void create_open(int port, uint64_t id, int stock, int limit)
{
    struct sk_th_http c;
    sk_th_http_open(&c, port);
    char body[400], path[100];
    snprintf(body, sizeof body,
             "{\"id\":%llu,\"name\":\"load test\",\"stock\":%d,\"per_user_limit\":%d,"
             "\"start\":\"2020-01-01T00:00:00Z\",\"end\":\"2099-01-01T00:00:00Z\"}",
             (unsigned long long)id, stock, limit);
    admin(&c, "/api/v1/activities", body, 201);
    snprintf(path, sizeof path, "/api/v1/activities/%llu/preheat", (unsigned long long)id);
    admin(&c, path, NULL, 200);
    snprintf(path, sizeof path, "/api/v1/activities/%llu/open", (unsigned long long)id);
    admin(&c, path, NULL, 200);
    sk_th_http_close(&c);
}

/* `seckill load --url http://127.0.0.1:<port> --activity <id> extra...`
 * (extra NULL-terminated, at most 34); the output into out, the exit code
 * returned. */
static int run_load(int port, uint64_t id, const char *const *extra, char *out, size_t cap)
{
    char url[64], aid[32];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    snprintf(aid, sizeof aid, "%llu", (unsigned long long)id);
    const char *args[40] = {"load", "--url", url, "--activity", aid};
    int n = 5;
    for (int i = 0; extra && extra[i]; i++) {
        CHECK(n < 39);
        args[n++] = extra[i];
    }
    args[n] = NULL;
    return sk_th_run_seckill(out, cap, NULL, args);
}

/* ---- against the real service ---- */

/* `seckill load` for a sale of `stock` units on activity id: 3,000
 * purchases from 1,000 users, 30% repeat buyers, over 64 connections and 2
 * threads, so demand (1,000 units) is above the stock. */
static int sale(int port, uint64_t id, int stock, int json, const char *const *extra, char *out,
                size_t cap)
{
    char st[32];
    snprintf(st, sizeof st, "%d", stock);
    const char *args[34] = {"--connections",  "64",   "--threads",     "2",
                            "--requests",     "3000", "--users",       "1000",
                            "--user-base",    "5000", "--retry-ratio", "0.3",
                            "--expect-stock", st,     "--limit",       "1",
                            "--duration",     "60",   "--quiet"};
    int n = 19;
    if (json) args[n++] = "--json";
    for (int i = 0; extra && extra[i]; i++) {
        CHECK(n < 33);
        args[n++] = extra[i];
    }
    args[n] = NULL;
    return run_load(port, id, args, out, cap);
}

static void real_sale(const char *const *serve_extra, const char *const *load_extra)
{
    struct sk_th_serve s;
    sk_th_serve_start(&s, sk_th_redis_url(), serve_extra);
    uint64_t id = sk_th_unique_id();
    create_open(s.port, id, 300, 1);
    char out[16384];
    int rc = sale(s.port, id, 300, 1, load_extra, out, sizeof out);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out);
    json_t *j = result_json(out);
    CHECK_EQ(jint(j, "accepted_units", NULL), 300);
    CHECK_EQ(jint(j, "statuses", "200"), 300);
    CHECK_EQ(jint(j, "completed", NULL), 3000);
    CHECK_EQ(jint(j, "verification", "unique_orders"), 300);
    CHECK_EQ(jint(j, "verification", "max_units_one_user"), 1);
    CHECK(json_is_true(json_object_get(json_object_get(j, "verification"), "ok")));
    CHECK_EQ(jint(j, "refusals", "sold_out") + jint(j, "refusals", "limit_exceeded"), 2700);
    json_decref(j);
    /* the human summary says the same */
    uint64_t again = sk_th_unique_id();
    create_open(s.port, again, 50, 1);
    rc = sale(s.port, again, 50, 0, load_extra, out, sizeof out);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out);
    CHECK_MSG(strstr(out, "verification  OK") && strstr(out, "50 of stock 50 accepted (sold out)"),
              "%s", out);
    /* told a smaller stock than the server has, it reports an oversell */
    uint64_t third = sk_th_unique_id();
    create_open(s.port, third, 40, 1);
    rc = sale(s.port, third, 39, 0, load_extra, out, sizeof out);
    CHECK_MSG(rc == 1 && strstr(out, "oversold: 40 units accepted, stock is 39"), "exit %d: %s", rc,
              out);
    /* serve's own exit status on SIGTERM is its tests' business */
    sk_th_serve_stop(&s, SIGTERM);
}

SK_TEST(load_against_serve_accepts_exactly_the_stock)
{
    real_sale(NULL, NULL);
}

SK_TEST(load_against_serve_with_hmac_tokens)
{
    const char *serve[] = {"--auth", "hmac", "--hmac-secret", "load-test-secret", NULL};
    const char *load[] = {"--auth", "hmac", "--hmac-secret", "load-test-secret", NULL};
    real_sale(serve, load);
}

SK_TEST(load_against_serve_with_a_wrong_secret_fails)
{
    /* every request is a 401: the run measured nothing, and says so */
    struct sk_th_serve s;
    const char *serve[] = {"--auth", "hmac", "--hmac-secret", "the-right-secret-16", NULL};
    sk_th_serve_start(&s, sk_th_redis_url(), serve);
    uint64_t id = sk_th_unique_id();
    create_open(s.port, id, 5, 1);
    char out[8192];
    const char *args[] = {"--connections", "4",     "--requests",     "40", "--auth",  "hmac",
                          "--hmac-secret", "wrong", "--expect-stock", "5",  "--quiet", NULL};
    int rc = run_load(s.port, id, args, out, sizeof out);
    CHECK_MSG(rc == 1, "exit %d: %s", rc, out);
    CHECK_MSG(strstr(out, "401: 40") && strstr(out, "unauthorized: 40") &&
                  strstr(out, "40 requests were refused as malformed"),
              "%s", out);
    sk_th_serve_stop(&s, SIGTERM);
}

/* ---- planted faults: a test-only responder ---- */

enum fake_mode {
    FAKE_OVERSELL, /* every purchase 200 with a fresh order id */
    FAKE_DUP,      /* 200s whose order ids repeat */
    FAKE_503,      /* 503 unavailable */
    FAKE_HANGUP,   /* half an answer, then close */
    FAKE_CHUNKED   /* honest-looking 200s, chunked, fresh ids, Connection: close every 7th */
};

struct fake {
    pid_t pid;
    int port;
};

#define FAKE_MAX_CONNS 128

static void fake_answer(int fd, enum fake_mode mode, unsigned long long n)
{
    char body[200], out[600];
    int bl, ol;
    switch (mode) {
    case FAKE_503:
        bl = snprintf(body, sizeof body, "{\"error\":\"unavailable\",\"message\":\"planted\"}");
        ol = snprintf(out, sizeof out,
                      "HTTP/1.1 503 Service Unavailable\r\nContent-Length: %d\r\n\r\n%s", bl, body);
        break;
    case FAKE_HANGUP:
        ol = snprintf(out, sizeof out, "HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{\"status\"");
        break;
    case FAKE_CHUNKED:
        bl = snprintf(body, sizeof body,
                      "{\"status\":\"accepted\",\"order_id\":\"c-%llu\",\"quantity\":1}", n);
        ol =
            snprintf(out, sizeof out,
                     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n",
                     n % 7 == 6 ? "Connection: close\r\n" : "", (unsigned)bl, body);
        break;
    default:
        /* FAKE_DUP: two answers share each id */
        bl = snprintf(body, sizeof body,
                      "{\"status\":\"accepted\",\"order_id\":\"o-%llu\",\"activity_id\":1,"
                      "\"quantity\":1}",
                      mode == FAKE_DUP ? n / 2 : n);
        ol = snprintf(out, sizeof out,
                      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                      "%d\r\n\r\n%s",
                      bl, body);
    }
    if (send(fd, out, (size_t)ol, MSG_NOSIGNAL) < 0) {
        /* the client left: nothing to do */
    }
}

/* The responder's loop (child process): accept, read requests (headers +
 * Content-Length), answer each per mode. */
static void fake_serve(int lfd, enum fake_mode mode)
{
    struct pollfd p[FAKE_MAX_CONNS + 1];
    char buf[FAKE_MAX_CONNS + 1][4096];
    size_t len[FAKE_MAX_CONNS + 1];
    int n = 1;
    unsigned long long served = 0;
    p[0] = (struct pollfd){.fd = lfd, .events = POLLIN};
    for (;;) {
        if (poll(p, (nfds_t)n, -1) < 0) continue;
        if ((p[0].revents & POLLIN) && n <= FAKE_MAX_CONNS) {
            int fd = accept(lfd, NULL, NULL);
            if (fd >= 0) {
                p[n] = (struct pollfd){.fd = fd, .events = POLLIN};
                len[n++] = 0;
            }
        }
        for (int i = 1; i < n; i++) {
            if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            ssize_t got = read(p[i].fd, buf[i] + len[i], sizeof buf[i] - 1 - len[i]);
            int drop = got <= 0;
            if (got > 0) len[i] += (size_t)got;
            for (;;) {
                buf[i][len[i]] = 0;
                char *he = strstr(buf[i], "\r\n\r\n");
                if (!he) break;
                size_t cl = 0;
                const char *c = strcasestr(buf[i], "content-length:");
                if (c && c < he) cl = (size_t)strtoul(c + 15, NULL, 10);
                size_t need = (size_t)(he + 4 - buf[i]) + cl;
                if (len[i] < need) break;
                fake_answer(p[i].fd, mode, served);
                int close_now = mode == FAKE_HANGUP || (mode == FAKE_CHUNKED && served % 7 == 6);
                served++;
                memmove(buf[i], buf[i] + need, len[i] - need);
                len[i] -= need;
                if (close_now) {
                    drop = 1;
                    break;
                }
            }
            if (drop) {
                close(p[i].fd);
                p[i] = p[n - 1];
                memcpy(buf[i], buf[n - 1], len[n - 1]);
                len[i] = len[n - 1];
                n--;
                i--;
            }
        }
    }
}

static void fake_start(struct fake *f, enum fake_mode mode)
{
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    CHECK(lfd >= 0 && bind(lfd, (struct sockaddr *)&a, sizeof a) == 0 && listen(lfd, 256) == 0 &&
          getsockname(lfd, (struct sockaddr *)&a, &al) == 0);
    f->port = ntohs(a.sin_port);
    f->pid = sk_th_fork();
    if (f->pid == 0) {
        fake_serve(lfd, mode);
        _exit(0);
    }
    close(lfd); /* the listening socket lives on in the child */
}

static void fake_stop(struct fake *f)
{
    if (f->pid > 0) {
        kill(f->pid, SIGKILL);
        waitpid(f->pid, NULL, 0);
        f->pid = 0;
    }
}

/* Runs `seckill load` against a responder of mode of its own, started
 * for the run and stopped after; returns the exit code. */
static int run_fake(enum fake_mode mode, char *out, size_t cap, const char *const *extra)
{
    struct fake f;
    fake_start(&f, mode);
    const char *args[34] = {"--connections", "8",   "--requests", "400", "--users",   "100",
                            "--retry-ratio", "0.5", "--duration", "30",  "--timeout", "5",
                            "--quiet"};
    int n = 13;
    for (int i = 0; extra && extra[i]; i++) {
        CHECK(n < 33);
        args[n++] = extra[i];
    }
    args[n] = NULL;
    int rc = run_load(f.port, 9, args, out, cap);
    fake_stop(&f);
    return rc;
}

/* run_fake with --json: the exit code must be want_rc and every one of
 * the 400 answers a 200. The parsed result is the caller's
 * (json_decref). */
static json_t *run_fake_json(enum fake_mode mode, int want_rc, char *out, size_t cap)
{
    const char *extra[] = {"--json", NULL};
    int rc = run_fake(mode, out, cap, extra);
    CHECK_MSG(rc == want_rc, "exit %d: %s", rc, out);
    json_t *j = result_json(out);
    CHECK_EQ(jint(j, "statuses", "200"), 400);
    return j;
}

SK_TEST(load_detects_an_overselling_server)
{
    char out[16384];
    const char *extra[] = {"--expect-stock", "10", "--limit", "1", NULL};
    int rc = run_fake(FAKE_OVERSELL, out, sizeof out, extra);
    CHECK_MSG(rc == 1, "exit %d: %s", rc, out);
    CHECK_MSG(strstr(out, "verification  FAILED"), "%s", out);
    CHECK_MSG(strstr(out, "oversold: 400 units accepted, stock is 10"), "%s", out);
    CHECK_MSG(strstr(out, "users got more than the limit of 1"), "%s", out);
}

SK_TEST(load_detects_duplicate_order_ids)
{
    char out[16384];
    json_t *j = run_fake_json(FAKE_DUP, 1, out, sizeof out);
    CHECK_EQ(jint(j, "verification", "duplicate_orders"), 200);
    CHECK_EQ(jint(j, "verification", "unique_orders"), 200);
    CHECK(json_is_false(json_object_get(json_object_get(j, "verification"), "ok")));
    const char *v = json_string_value(
        json_array_get(json_object_get(json_object_get(j, "verification"), "violations"), 0));
    CHECK_MSG(v && strstr(v, "duplicate order ids"), "%s", out);
    json_decref(j);
}

SK_TEST(load_detects_5xx_answers)
{
    char out[16384];
    int rc = run_fake(FAKE_503, out, sizeof out, NULL);
    CHECK_MSG(rc == 1, "exit %d: %s", rc, out);
    CHECK_MSG(strstr(out, "400 responses were 5xx") && strstr(out, "unavailable: 400"), "%s", out);
}

SK_TEST(load_detects_a_server_that_hangs_up_mid_answer)
{
    char out[16384];
    int rc = run_fake(FAKE_HANGUP, out, sizeof out, NULL);
    CHECK_MSG(rc == 1, "exit %d: %s", rc, out);
    CHECK_MSG(strstr(out, "transport errors"), "%s", out);
}

SK_TEST(load_accepts_chunked_answers_and_server_closes)
{
    /* an honest-looking server (fresh ids, no stock claim) that answers
     * chunked and closes every 7th connection: no violation, reconnects */
    char out[16384];
    json_t *j = run_fake_json(FAKE_CHUNKED, 0, out, sizeof out);
    CHECK_EQ(jint(j, "verification", "unique_orders"), 400);
    CHECK(jint(j, "reconnects", NULL) >= 40);
    json_decref(j);
}

SK_TEST(load_open_loop_keeps_its_rate)
{
    /* 1,000 req/s for 1 s against a fast responder: about 1,000 sent, and
     * latency measured from the intended times stays small */
    char out[16384];
    const char *extra[] = {"--rate", "1000",          "--duration", "1",      "--requests",
                           "100000", "--order-check", "no",         "--json", NULL};
    int rc = run_fake(FAKE_CHUNKED, out, sizeof out, extra);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out);
    json_t *j = result_json(out);
    long long sent = jint(j, "sent", NULL);
    CHECK_MSG(sent >= 950 && sent <= 1010, "sent %lld: %s", sent, out);
    CHECK_STR(json_string_value(json_object_get(j, "mode")), "open");
    CHECK_STR(json_string_value(json_object_get(j, "stopped_by")), "duration");
    json_decref(j);
}

SK_TEST(load_in_process_run_reports_connection_failures)
{
    /* nothing listens on the port: every connection fails, the run ends
     * early and fails its checks (the bench relies on this API) */
    struct sk_load_opts o;
    sk_load_opts_defaults(&o);
    o.port = sk_th_free_port();
    o.activity = 1;
    o.connections = 3;
    o.requests = 10;
    o.duration_ms = 5000;
    struct sk_load_result r;
    char err[256];
    CHECK_EQ(sk_load_run(&o, &r, err, sizeof err), 0);
    CHECK(!r.ok);
    CHECK(r.err_connect >= 3);
    CHECK_EQ(r.completed, 0);
    CHECK_STR(r.stopped_by, "connections");
    sk_load_result_free(&r);
}

/* ---- --db: every accepted order reached the database ---- */

SK_TEST(load_db_check_finds_every_accepted_order_in_the_database)
{
    struct sk_th_serve s; /* --role all: the order worker persists into s.db */
    sk_th_serve_start(&s, sk_th_redis_url(), NULL);
    uint64_t id = sk_th_unique_id();
    create_open(s.port, id, 30, 1);
    char out[16384];
    const char *args[] = {"--connections",  "8",  "--requests", "200",    "--users", "150",
                          "--expect-stock", "30", "--limit",    "1",      "--db",    s.db,
                          "--db-wait",      "20", "--quiet",    "--json", NULL};
    int rc = run_load(s.port, id, args, out, sizeof out);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out);
    json_t *j = result_json(out);
    CHECK_EQ(jint(j, "verification", "db_found"), 30);
    CHECK_EQ(jint(j, "verification", "db_missing"), 0);
    json_decref(j);

    /* the same orders checked against a database that never saw them */
    char other[400], out2[16384];
    snprintf(other, sizeof other, "sqlite:%s/empty.db", sk_th_tmpdir());
    uint64_t id2 = sk_th_unique_id();
    create_open(s.port, id2, 5, 1);
    const char *args2[] = {"--connections", "4",   "--requests", "40", "--expect-stock", "5",
                           "--db",          other, "--db-wait",  "1",  "--quiet",        NULL};
    rc = run_load(s.port, id2, args2, out2, sizeof out2);
    CHECK_MSG(rc == 1, "exit %d: %s", rc, out2);
    CHECK_MSG(strstr(out2, "is not in the DB") != NULL, "%s", out2);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
}
