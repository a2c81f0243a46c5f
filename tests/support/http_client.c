/* http_client.c - blocking HTTP/1.1 test client; answers are read with the
 * parser the product ships (core/http_resp.h). */
#include "support/http_client.h"

#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>

#include "core/http_resp.h"
#include "support/harness.h"

int sk_th_http_try_open(struct sk_th_http *c, int port)
{
    c->port = port;
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct timeval tv = {10, 0}; /* a hung server fails the test, not hangs it */
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(c->fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(c->fd);
        c->fd = -1;
        return -1;
    }
    return 0;
}

struct sk_th_resp *sk_th_resp_new(void)
{
    struct sk_th_resp *r = malloc(sizeof *r);
    CHECK(r != NULL);
    return r;
}

void sk_th_http_open(struct sk_th_http *c, int port)
{
    if (sk_th_http_try_open(c, port) < 0)
        sk_th_fail(__FILE__, __LINE__, "connect to %d: %s", port, strerror(errno));
}

void sk_th_http_close(struct sk_th_http *c)
{
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Reads one response with the project's parser (core/http_resp.h); 0 on
 * success, -1 when the connection closed first, the answer is not HTTP or
 * it does not fit r. */
static int read_response(int fd, struct sk_th_resp *r)
{
    static _Thread_local char buf[32768];
    size_t len = 0;
    struct sk_http_resp p;
    int rc = 0, eof = 0;
    while ((rc = sk_http_resp_parse(buf, len, eof, 0, &p)) == 0) {
        if (eof || len == sizeof buf) return -1;
        ssize_t n = recv(fd, buf + len, sizeof buf - len, 0);
        if (n < 0) return -1;
        if (n == 0) eof = 1;
        len += (size_t)n;
    }
    if (rc < 0 || p.body_len >= sizeof r->body) return -1;
    r->status = p.status;
    size_t copy = p.head_len < sizeof r->headers ? p.head_len : sizeof r->headers - 1;
    for (size_t i = 0; i < copy; i++)
        r->headers[i] = (char)tolower((unsigned char)p.head[i]);
    r->headers[copy] = 0;
    memcpy(r->body, p.body, p.body_len); /* no pipelining in tests: the rest is dropped */
    r->body_len = p.body_len;
    r->body[p.body_len] = 0;
    return 0;
}

int sk_th_http_req(struct sk_th_http *c, const char *method, const char *path,
                   const char *extra_headers, const char *body, struct sk_th_resp *r)
{
    char req[16384];
    size_t blen = body ? strlen(body) : 0;
    int n = snprintf(req, sizeof req,
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%sContent-Length: %zu\r\n\r\n", method,
                     path, extra_headers ? extra_headers : "", blen);
    if (n < 0 || (size_t)n + blen >= sizeof req) sk_th_fail(__FILE__, __LINE__, "request too big");
    memcpy(req + n, body ? body : "", blen);
    memset(r, 0, sizeof *r);
    for (int attempt = 0; attempt < 2; attempt++) {
        if (c->fd < 0 && sk_th_http_try_open(c, c->port) < 0) return 0;
        if (write_all(c->fd, req, (size_t)n + blen) == 0 && read_response(c->fd, r) == 0)
            return r->status;
        sk_th_http_close(c);
        memset(r, 0, sizeof *r);
    }
    return 0;
}

void sk_th_send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        CHECK_MSG(w > 0, "send: %s", strerror(errno));
        p += w;
        n -= (size_t)w;
    }
}

size_t sk_th_http_raw(int port, const char *bytes, size_t len, char *out, size_t cap,
                      int timeout_ms)
{
    struct sk_th_http c;
    if (sk_th_http_try_open(&c, port) < 0) return 0;
    write_all(c.fd, bytes, len);
    shutdown(c.fd, SHUT_WR);
    size_t got = 0;
    struct pollfd p = {.fd = c.fd, .events = POLLIN};
    while (got + 1 < cap && poll(&p, 1, timeout_ms) > 0) {
        ssize_t n = recv(c.fd, out + got, cap - got - 1, 0);
        if (n <= 0) break;
        got += (size_t)n;
    }
    if (cap) out[got] = 0;
    sk_th_http_close(&c);
    return got;
}

int sk_th_http_get_big(int port, const char *path, char *body, size_t cap)
{
    char reqb[256];
    int n = snprintf(reqb, sizeof reqb, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                     path);
    size_t rcap = 1 << 20;
    char *raw = malloc(rcap);
    if (!raw) sk_th_fail(__FILE__, __LINE__, "out of memory");
    size_t got = sk_th_http_raw(port, reqb, (size_t)n, raw, rcap, 5000);
    body[0] = 0;
    int status = 0;
    if (got >= 12 && strncmp(raw, "HTTP/1.1 ", 9) == 0) {
        const char *b = strstr(raw, "\r\n\r\n");
        if (b) snprintf(body, cap, "%s", b + 4);
        status = atoi(raw + 9);
    }
    free(raw);
    return status;
}

int sk_th_http_status(const char *raw, size_t len)
{
    int st = sk_http_resp_status(raw, len);
    return st > 0 ? st : 0;
}

int sk_th_http_header(const struct sk_th_resp *r, const char *name, char *out, size_t cap)
{
    char pat[128];
    snprintf(pat, sizeof pat, "\n%s:", name);
    const char *h = strstr(r->headers, pat);
    if (!h) return -1;
    h += strlen(pat);
    while (*h == ' ')
        h++;
    size_t n = strcspn(h, "\r\n");
    if (n >= cap) n = cap - 1;
    memcpy(out, h, n);
    out[n] = 0;
    return 0;
}

void sk_th_resp_field(const struct sk_th_resp *r, const char *key, char *out, size_t cap)
{
    json_t *j = json_loadb(r->body, r->body_len, 0, NULL);
    CHECK_MSG(j && json_is_object(j), "not a JSON object: %s", r->body);
    json_t *f = json_object_get(j, key);
    CHECK_MSG(f != NULL, "no %s in %s", key, r->body);
    if (json_is_string(f))
        snprintf(out, cap, "%s", json_string_value(f));
    else
        snprintf(out, cap, "%" JSON_INTEGER_FORMAT, json_integer_value(f));
    json_decref(j);
}

int sk_th_http_once(int port, const char *method, const char *path, const char *hdrs,
                    const char *body, struct sk_th_resp *r)
{
    struct sk_th_http c;
    sk_th_http_open(&c, port);
    int st = sk_th_http_req(&c, method, path, hdrs, body, r);
    sk_th_http_close(&c);
    return st;
}
