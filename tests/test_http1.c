/* test_http1.c - the HTTP/1.1 layer (http/http1.h, http/conns.h) over
 * real sockets against a real `seckill serve`: pipelined requests answered
 * in order whatever waits for Redis, answers larger than the socket
 * buffers written in pieces to a slow reader, clients that leave in the
 * middle of a request, 64 KiB bodies in many small writes (plain, chunked,
 * after 100-continue), keep-alive by version and Connection header, and a
 * head that trickles in past the timeout. Every test ends with the stock
 * and the admissions exactly what the valid purchases made them. */
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
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "support/harness.h"
#include "support/http_api.h"
#include "support/http_client.h"

static void pause_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A connected blocking socket to the server; rcvbuf > 0 shrinks its
 * receive buffer first (before the window is announced). */
static int dial_buf(int port, int rcvbuf)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0);
    if (rcvbuf > 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    int on = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK_MSG(connect(fd, (struct sockaddr *)&a, sizeof a) == 0, "connect: %s", strerror(errno));
    return fd;
}

static int dial(int port)
{
    return dial_buf(port, 0);
}

/* Everything until the server closes (*closed = 1) or nothing comes for
 * timeout_ms; at most step bytes per recv. Heap buffer of *len bytes
 * (caller frees). */
static char *read_all(int fd, size_t step, int timeout_ms, size_t *len, int *closed)
{
    size_t cap = 1 << 16, got = 0;
    char *buf = malloc(cap + 1);
    CHECK(buf != NULL);
    *closed = 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (poll(&p, 1, timeout_ms) > 0) {
        if (got + step + 1 > cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
            CHECK(buf != NULL);
        }
        ssize_t n = recv(fd, buf + got, step, 0);
        if (n <= 0) {
            *closed = 1;
            break;
        }
        got += (size_t)n;
    }
    buf[got] = 0;
    *len = got;
    return buf;
}

/* One response of a byte stream: status, where its body starts and how
 * long it is (Content-Length); returns the offset of the next one, or 0
 * when none is complete at off. */
struct one {
    int status;
    const char *body;
    size_t body_len;
};

static size_t next_response(const char *buf, size_t len, size_t off, struct one *o)
{
    if (len - off < 12 || strncmp(buf + off, "HTTP/1.1 ", 9) != 0) return 0;
    const char *hend = memmem(buf + off, len - off, "\r\n\r\n", 4);
    if (!hend) return 0;
    o->status = atoi(buf + off + 9);
    long clen = 0;
    for (const char *h = buf + off; h < hend; h++)
        if (strncasecmp(h, "\ncontent-length:", 16) == 0) clen = strtol(h + 16, NULL, 10);
    o->body = hend + 4;
    o->body_len = (size_t)clen;
    size_t next = (size_t)(hend + 4 - buf) + (size_t)clen;
    return next <= len ? next : 0;
}

static const char *purchase_path(uint64_t id)
{
    static char p[100];
    snprintf(p, sizeof p, "/api/v1/activities/%" PRIu64 "/purchase", id);
    return p;
}

/* A purchase request by uid with body (NULL: none), as bytes. */
static int purchase_req(char *out, size_t cap, uint64_t id, uint64_t uid, const char *body,
                        const char *extra)
{
    size_t bl = body ? strlen(body) : 0;
    return snprintf(out, cap,
                    "POST %s HTTP/1.1\r\nHost: x\r\nX-User-Id: %" PRIu64
                    "\r\nContent-Length: %zu\r\n%s\r\n%s",
                    purchase_path(id), uid, bl, extra ? extra : "", body ? body : "");
}

/* ------------------------------------------------------------- pipelining */

SK_TEST(pipelined_requests_are_answered_in_order_whatever_waits_for_redis)
{
    struct srv v;
    srv_start(&v, NULL);
    uint64_t id = sk_th_unique_id(), sold = sk_th_unique_id();
    ready_act(&v, id, 1000, 1, 1, W_NOW);
    ready_act(&v, sold, 1, 1, 1, W_NOW);
    struct sk_th_resp r;
    EXPECT_STATUS(buy(&v, sold, 1, NULL, &r), &r, 200);
    EXPECT_ERROR(buy(&v, sold, 2, NULL, &r), &r, 409, "sold_out"); /* now answered locally */
    /* purchases (answered after Redis) between answers made at once */
    static char reqs[65536];
    size_t n = 0;
    const int want[] = {200, 200, 400, 409, 200, 404, 409, 200, 200};
    n += (size_t)purchase_req(reqs + n, sizeof reqs - n, id, 501, NULL, NULL);
    n += (size_t)snprintf(reqs + n, sizeof reqs - n, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    n += (size_t)purchase_req(reqs + n, sizeof reqs - n, id, 502, "{\"quantity\":0}", NULL);
    n += (size_t)purchase_req(reqs + n, sizeof reqs - n, sold, 503, NULL, NULL);
    n += (size_t)purchase_req(reqs + n, sizeof reqs - n, id, 504, "{\"quantity\":1}", NULL);
    n += (size_t)snprintf(reqs + n, sizeof reqs - n, "GET /api/v1/nothing HTTP/1.1\r\n\r\n");
    n += (size_t)purchase_req(reqs + n, sizeof reqs - n, id, 501, NULL, NULL); /* over its limit */
    n += (size_t)snprintf(reqs + n, sizeof reqs - n,
                          "GET /api/v1/activities/%" PRIu64 " HTTP/1.1\r\n\r\n", id);
    n += (size_t)purchase_req(reqs + n, sizeof reqs - n, id, 505, NULL, "Connection: close\r\n");
    int fd = dial(v.s.port), closed;
    sk_th_send_all(fd, reqs, n);
    size_t len;
    char *out = read_all(fd, 65536, 10000, &len, &closed);
    close(fd);
    CHECK_MSG(closed, "the connection stayed open after Connection: close");
    size_t off = 0;
    struct one o;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        size_t next = next_response(out, len, off, &o);
        CHECK_MSG(next, "answer %zu missing: %.300s", i, out + off);
        CHECK_MSG(o.status == want[i], "answer %zu: %d, want %d: %.200s", i, o.status, want[i],
                  o.body);
        off = next;
    }
    CHECK_MSG(off == len, "%zu bytes after the last answer: %.100s", len - off, out + off);
    free(out);
    /* 50 purchases in one write: answered in order, so their order ids
     * (stream ids, in the order of admission) only grow */
    n = 0;
    for (int i = 0; i < 50; i++)
        n += (size_t)purchase_req(reqs + n, sizeof reqs - n, id, 600 + (uint64_t)i, NULL,
                                  i == 49 ? "Connection: close\r\n" : NULL);
    fd = dial(v.s.port);
    sk_th_send_all(fd, reqs, n);
    out = read_all(fd, 65536, 10000, &len, &closed);
    close(fd);
    off = 0;
    char prev[64] = "";
    for (int i = 0; i < 50; i++) {
        size_t next = next_response(out, len, off, &o);
        CHECK_MSG(next && o.status == 200, "answer %d: %.200s", i, out + off);
        const char *oid = strstr(o.body, "\"order_id\":\"");
        CHECK(oid != NULL);
        char cur[64];
        CHECK(sscanf(oid + 12, "%63[^\"]", cur) == 1);
        /* "<aid>-<ms>-<seq>": compare ms, then seq */
        unsigned long long pm = 0, ps = 0, cm = 0, cq = 0;
        if (prev[0]) {
            CHECK(sscanf(strchr(prev, '-') + 1, "%llu-%llu", &pm, &ps) == 2);
            CHECK(sscanf(strchr(cur, '-') + 1, "%llu-%llu", &cm, &cq) == 2);
            CHECK_MSG(cm > pm || (cm == pm && cq > ps), "answer %d: order %s after %s", i, cur,
                      prev);
        }
        snprintf(prev, sizeof prev, "%s", cur);
        off = next;
    }
    free(out);
    expect_stats(&v, id, 1000 - 53, 53, 53);
    srv_stop(&v);
}

/* ------------------------------------------------- partial writes, slow reader */

SK_TEST_T(answers_larger_than_the_socket_buffers_reach_a_slow_reader_whole_and_in_order, 60)
{
    struct srv v;
    srv_start(&v, NULL);
    uint64_t id = sk_th_unique_id();
    ready_act(&v, id, 100, 1, 1, W_NOW);
    /* the reference: the dashboard page read by a plain client */
    static const char page_req[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    int fd = dial(v.s.port), closed;
    sk_th_send_all(fd, page_req, sizeof page_req - 1);
    size_t len;
    char *ref = NULL;
    struct one page = {0};
    for (int tries = 0; tries < 50 && !page.status; tries++) {
        free(ref);
        ref = read_all(fd, 65536, 200, &len, &closed);
        next_response(ref, len, 0, &page);
    }
    close(fd);
    CHECK_MSG(page.status == 200 && page.body_len > 4096, "dashboard: %d, %zu bytes", page.status,
              page.body_len);
    /* 300 pages (6 MB, more than the kernel buffers of both ends hold)
     * pipelined with a purchase in the middle, to a client with a 4 KiB
     * receive buffer that reads 1 KiB at a time: the server's writes stop
     * at the kernel's limit and go on when it takes more */
    enum { PAGES = 300 };
    static char reqs[PAGES * 40 + 512];
    size_t n = 0;
    for (int i = 0; i < PAGES; i++) {
        n += (size_t)snprintf(reqs + n, sizeof reqs - n, "%s", page_req);
        if (i == PAGES / 2) n += (size_t)purchase_req(reqs + n, sizeof reqs - n, id, 7, NULL, NULL);
    }
    n += (size_t)snprintf(reqs + n, sizeof reqs - n,
                          "GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n");
    fd = dial_buf(v.s.port, 4096);
    sk_th_send_all(fd, reqs, n);
    /* meanwhile everyone else is served */
    struct sk_th_resp r;
    for (int i = 0; i < 3; i++)
        EXPECT_STATUS(req(&v, "GET", "/healthz", NULL, NULL, &r), &r, 200);
    char *out = read_all(fd, 1024, 10000, &len, &closed);
    close(fd);
    CHECK_MSG(closed, "not closed after Connection: close (%zu bytes read)", len);
    size_t off = 0;
    struct one o;
    for (int i = 0; i <= PAGES + 1; i++) {
        size_t next = next_response(out, len, off, &o);
        CHECK_MSG(next, "answer %d missing at byte %zu of %zu", i, off, len);
        if (i == PAGES / 2 + 1) {
            CHECK_MSG(o.status == 200 && memmem(o.body, o.body_len, "accepted", 8),
                      "the purchase: %.200s", o.body);
        } else if (i == PAGES + 1) {
            CHECK_EQ(o.status, 200);
            CHECK(memmem(o.body, o.body_len, "\"ok\"", 4) != NULL);
        } else {
            CHECK_MSG(o.status == 200 && o.body_len == page.body_len &&
                          memcmp(o.body, page.body, page.body_len) == 0,
                      "page %d differs (%zu bytes)", i, o.body_len);
        }
        off = next;
    }
    CHECK_EQ(off, len);
    free(out);
    free(ref);
    expect_stats(&v, id, 99, 1, 1);
    srv_stop(&v);
}

/* ---------------------------------------------------- clients that leave */

SK_TEST_T(clients_that_leave_mid_request_change_nothing_and_sent_purchases_stand, 60)
{
    struct sk_th_redis rs;
    sk_th_redis_start(&rs, NULL);
    struct srv v;
    const char *extra[] = {"--role", "api", "--redis-timeout-ms", "30000", NULL};
    sanitizer_exit_code_0();
    sk_th_serve_start(&v.s, rs.url, extra);
    sk_th_http_open(&v.c, v.s.port);
    uint64_t id = sk_th_unique_id();
    ready_act(&v, id, 1000, 1, 1, W_NOW);
    char buf[512];
    /* half a head, half a body: closed, nothing bought */
    for (int i = 0; i < 40; i++) {
        int fd = dial(v.s.port);
        int n = purchase_req(buf, sizeof buf, id, 100 + (uint64_t)i, "{\"quantity\":1}", NULL);
        sk_th_send_all(fd, buf, i % 2 ? (size_t)n - 9 : (size_t)n / 3);
        close(fd);
    }
    /* a whole purchase, then gone at once: it was sent, so it stands */
    for (int i = 0; i < 40; i++) {
        int fd = dial(v.s.port);
        int n = purchase_req(buf, sizeof buf, id, 200 + (uint64_t)i, NULL, NULL);
        sk_th_send_all(fd, buf, (size_t)n);
        close(fd);
    }
    /* purchases waiting for a stopped Redis when their clients reset the
     * connection: the server frees them, and their late answers go nowhere */
    struct sk_th_resp r;
    EXPECT_STATUS(req(&v, "GET", "/healthz", NULL, NULL, &r), &r, 200);
    kill(rs.pid, SIGSTOP);
    int fds[40];
    for (int i = 0; i < 40; i++) {
        fds[i] = dial(v.s.port);
        int n = purchase_req(buf, sizeof buf, id, 300 + (uint64_t)i, NULL, NULL);
        sk_th_send_all(fds[i], buf, (size_t)n);
    }
    /* the server has read them all when it answers a request sent after
     * them on a connection of its own (it reads in arrival order) */
    EXPECT_STATUS(req(&v, "GET", "/healthz", NULL, NULL, &r), &r, 200);
    for (int i = 0; i < 40; i++) {
        struct linger lg = {1, 0};
        setsockopt(fds[i], SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        close(fds[i]);
    }
    EXPECT_STATUS(req(&v, "GET", "/healthz", NULL, NULL, &r), &r, 200);
    kill(rs.pid, SIGCONT);
    /* the 80 sent purchases are admitted, once each; the 40 halves never */
    int64_t deadline = sk_mono_ms() + 10000;
    long long admitted = 0;
    for (;;) {
        EXPECT_STATUS(admin_op(&v, id, "stats", NULL, &r), &r, 200);
        admitted = JINT(&r, "admitted");
        if (admitted >= 80 || sk_mono_ms() > deadline) break;
        pause_ms(20);
    }
    expect_stats(&v, id, 1000 - 80, 80, 80);
    /* and it still sells */
    EXPECT_STATUS(buy(&v, id, 900, NULL, &r), &r, 200);
    expect_stats(&v, id, 1000 - 81, 81, 81);
    srv_stop(&v);
    sk_th_redis_stop(&rs, 1);
}

/* ------------------------------------------------------------------ bodies */

/* A 64 KiB purchase body: valid JSON padded with spaces. */
static char *big_body(size_t n)
{
    char *b = malloc(n + 1);
    CHECK(b != NULL);
    memset(b, ' ', n);
    memcpy(b, "{\"quantity\":1}", 14);
    b[n] = 0;
    return b;
}

/* Sends p in pieces of step bytes, yielding the CPU now and then so that
 * the server sees many reads. */
static void send_pieces(int fd, const char *p, size_t n, size_t step)
{
    for (size_t off = 0, k = 0; off < n; off += step, k++) {
        sk_th_send_all(fd, p + off, n - off < step ? n - off : step);
        if (k % 32 == 31) pause_ms(1);
    }
}

/* The status of the answer read from fd (its text into tail, cap bytes);
 * closes fd. */
static int answer_status_and_close(int fd, char *tail, size_t cap)
{
    size_t len;
    int closed;
    char *out = read_all(fd, 65536, 5000, &len, &closed);
    struct one o = {0};
    next_response(out, len, 0, &o);
    snprintf(tail, cap, "%s", out);
    free(out);
    close(fd);
    return o.status;
}

SK_TEST_T(bodies_of_64_kib_in_many_small_writes_buy_once_each, 60)
{
    struct srv v;
    srv_start(&v, NULL);
    uint64_t id = sk_th_unique_id();
    ready_act(&v, id, 100, 1, 1, W_NOW);
    enum { MAX = 65536 };
    char *body = big_body(MAX), head[512], out[4096];
    /* Content-Length, in 100-byte writes */
    int fd = dial(v.s.port);
    int hn = snprintf(head, sizeof head,
                      "POST %s HTTP/1.1\r\nHost: x\r\nX-User-Id: 1\r\nContent-Length: %d\r\n"
                      "Connection: close\r\n\r\n",
                      purchase_path(id), MAX);
    send_pieces(fd, head, (size_t)hn, 7);
    send_pieces(fd, body, MAX, 100);
    CHECK_MSG(answer_status_and_close(fd, out, sizeof out) == 200, "%s", out);
    /* chunked: 64 KiB in chunks of 100 bytes, each chunk in two writes */
    fd = dial(v.s.port);
    hn = snprintf(head, sizeof head,
                  "POST %s HTTP/1.1\r\nHost: x\r\nX-User-Id: 2\r\nTransfer-Encoding: chunked\r\n"
                  "Connection: close\r\n\r\n",
                  purchase_path(id));
    sk_th_send_all(fd, head, (size_t)hn);
    for (size_t off = 0, k = 0; off < MAX; off += 100, k++) {
        size_t c = MAX - off < 100 ? MAX - off : 100;
        char sz[16];
        int sl = snprintf(sz, sizeof sz, "%zx\r\n", c);
        sk_th_send_all(fd, sz, (size_t)sl);
        sk_th_send_all(fd, body + off, c);
        sk_th_send_all(fd, "\r\n", 2);
        if (k % 32 == 31) pause_ms(1);
    }
    sk_th_send_all(fd, "0\r\n\r\n", 5);
    CHECK_MSG(answer_status_and_close(fd, out, sizeof out) == 200, "%s", out);
    /* Expect: 100-continue: the body only after the interim answer */
    fd = dial(v.s.port);
    hn = snprintf(head, sizeof head,
                  "POST %s HTTP/1.1\r\nHost: x\r\nX-User-Id: 3\r\nContent-Length: %d\r\n"
                  "Expect: 100-continue\r\nConnection: close\r\n\r\n",
                  purchase_path(id), MAX);
    sk_th_send_all(fd, head, (size_t)hn);
    char cont[64] = "";
    ssize_t got = recv(fd, cont, sizeof cont - 1, 0);
    CHECK_MSG(got == 25 && !strncmp(cont, "HTTP/1.1 100 Continue\r\n\r\n", 25), "got '%s'", cont);
    send_pieces(fd, body, MAX, 1000);
    CHECK_MSG(answer_status_and_close(fd, out, sizeof out) == 200, "%s", out);
    /* one byte over, chunked (no length to refuse it early): 413, nothing bought */
    fd = dial(v.s.port);
    hn =
        snprintf(head, sizeof head,
                 "POST %s HTTP/1.1\r\nHost: x\r\nX-User-Id: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
                 "%x\r\n",
                 purchase_path(id), MAX + 1);
    sk_th_send_all(fd, head, (size_t)hn);
    char *over = big_body(MAX + 1);
    send_pieces(fd, over, MAX + 1, 1000);
    (void)!send(fd, "\r\n0\r\n\r\n", 7, MSG_NOSIGNAL);
    CHECK_MSG(answer_status_and_close(fd, out, sizeof out) == 413 &&
                  strstr(out, "payload_too_large"),
              "%s", out);
    free(over);
    free(body);
    expect_stats(&v, id, 97, 3, 3);
    srv_stop(&v);
}

/* -------------------------------------------------------------- keep-alive */

/* 1 when the server closed fd within wait_ms (after its answers). */
static int closed_by_server(int fd, int wait_ms)
{
    size_t len;
    int closed;
    free(read_all(fd, 65536, wait_ms, &len, &closed));
    return closed;
}

/* A request and whether the connection stays open after its answer. */
struct keep_alive_case {
    const char *req;
    int stays;
};

SK_TEST(keep_alive_follows_the_version_and_the_connection_header)
{
    struct srv v;
    srv_start(&v, NULL);
    static const struct keep_alive_case cases[] = {
        {"GET /healthz HTTP/1.0\r\n\r\n", 0},
        {"GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", 1},
        {"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 1},
        {"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int fd = dial(v.s.port);
        sk_th_send_all(fd, cases[i].req, strlen(cases[i].req));
        char out[2048];
        ssize_t got = recv(fd, out, sizeof out - 1, 0);
        CHECK(got > 0);
        out[got] = 0;
        CHECK_MSG(strncmp(out, "HTTP/1.1 200 ", 13) == 0, "case %zu: %s", i, out);
        CHECK_MSG(strstr(out, cases[i].stays ? "Connection: keep-alive" : "Connection: close"),
                  "case %zu: %s", i, out);
        if (cases[i].stays) {
            /* a second request on the same connection */
            sk_th_send_all(fd, cases[i].req, strlen(cases[i].req));
            got = recv(fd, out, sizeof out - 1, 0);
            CHECK_MSG(got > 12 && strncmp(out, "HTTP/1.1 200 ", 13) == 0, "case %zu again", i);
        } else {
            CHECK_MSG(closed_by_server(fd, 3000), "case %zu: still open", i);
        }
        close(fd);
    }
    /* HEAD: the head of the answer without its body; the next answer
     * follows it directly */
    static const char head2[] = "HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
                                "GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n";
    int fd = dial(v.s.port), closed;
    sk_th_send_all(fd, head2, sizeof head2 - 1);
    size_t len;
    char *out = read_all(fd, 65536, 3000, &len, &closed);
    close(fd);
    const char *second = strstr(out + 1, "HTTP/1.1 ");
    CHECK_MSG(second && strncmp(out, "HTTP/1.1 ", 9) == 0, "%s", out);
    const char *hend = strstr(out, "\r\n\r\n");
    CHECK_MSG(hend && hend + 4 == second, "a body after the HEAD answer: %s", out);
    CHECK(strstr(second, "{\"status\":\"ok\"}") != NULL);
    free(out);
    srv_stop(&v);
}

SK_TEST(a_head_that_trickles_in_is_closed_after_the_read_timeout)
{
    struct srv v;
    const char *extra[] = {"--io-timeout-s", "1", NULL};
    srv_start(&v, extra);
    int fd = dial(v.s.port);
    static const char start[] = "GET /healthz HTTP/1.1\r\nX-Slow: ";
    sk_th_send_all(fd, start, sizeof start - 1);
    int64_t t0 = sk_mono_ms();
    int gone = 0;
    /* a byte every 100 ms: each gap far below the timeout, the whole not */
    while (!gone && sk_mono_ms() - t0 < 10000) {
        if (send(fd, "a", 1, MSG_NOSIGNAL) != 1) break;
        struct pollfd p = {.fd = fd, .events = POLLRDHUP};
        gone = poll(&p, 1, 100) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
    }
    int64_t waited = sk_mono_ms() - t0;
    close(fd);
    CHECK_MSG(gone || waited < 10000, "a trickling head kept its connection for 10 s");
    CHECK_MSG(waited >= 1500, "closed after %lld ms, before the 1 s timeout and its grace",
              (long long)waited);
    struct sk_th_resp r;
    EXPECT_STATUS(req(&v, "GET", "/healthz", NULL, NULL, &r), &r, 200);
    srv_stop(&v);
}
