/* bench_receiver.c - the webhook receiver of `seckill-bench persist
 * --webhooks` (bench_receiver.h). */
#include "bench/bench_receiver.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>

#include "core/clock.h"
#include "core/error.h"

#define RX_BUF (256 * 1024)

static void record(struct sk_bench_rx *rx, const char *body, size_t len)
{
    json_t *j = json_loadb(body, len, 0, NULL);
    int64_t created = j ? (int64_t)json_integer_value(json_object_get(j, "created_ms")) : 0;
    json_decref(j);
    int64_t now_us = sk_mono_us(), lag = created > 0 ? sk_wall_ms() - created : -1;
    pthread_mutex_lock(&rx->mu);
    if (rx->n == rx->cap) {
        size_t cap = rx->cap ? rx->cap * 2 : 4096;
        int64_t *p = realloc(rx->lag_ms, cap * sizeof *p);
        if (p) rx->lag_ms = p, rx->cap = cap;
    }
    if (rx->n < rx->cap) rx->lag_ms[rx->n++] = lag;
    if (!rx->first_us) rx->first_us = now_us;
    rx->last_us = now_us;
    pthread_mutex_unlock(&rx->mu);
}

/* Waits up to 100 ms for fd to be readable: 1, 0 (not yet), -1 (stop). */
static int wait_in(struct sk_bench_rx *rx, int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int rc = poll(&p, 1, 100);
    if (rx->stop) return -1;
    return rc > 0 ? 1 : 0;
}

/* Serves one keep-alive connection until it closes or the receiver stops. */
static void serve_conn(struct sk_bench_rx *rx, int fd, char *buf)
{
    static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    size_t have = 0;
    for (;;) {
        char *eoh = have ? memmem(buf, have, "\r\n\r\n", 4) : NULL;
        if (eoh) {
            size_t hlen = (size_t)(eoh - buf) + 4, clen = 0;
            for (char *l = strstr(buf, "\r\n"); l && l < eoh; l = strstr(l + 2, "\r\n"))
                if (!strncasecmp(l + 2, "content-length:", 15)) clen = strtoul(l + 17, NULL, 10);
            if (hlen + clen > RX_BUF - 1) return;
            if (have >= hlen + clen) {
                record(rx, buf + hlen, clen);
                if (write(fd, ok, sizeof ok - 1) != (ssize_t)(sizeof ok - 1)) return;
                memmove(buf, buf + hlen + clen, have - hlen - clen);
                have -= hlen + clen;
                buf[have] = 0;
                continue;
            }
        }
        int w = wait_in(rx, fd);
        if (w < 0) return;
        if (w == 0) continue;
        ssize_t got = read(fd, buf + have, RX_BUF - 1 - have);
        if (got <= 0) return;
        have += (size_t)got;
        buf[have] = 0;
    }
}

static void *rx_main(void *arg)
{
    struct sk_bench_rx *rx = arg;
    char *buf = malloc(RX_BUF);
    while (buf && !rx->stop) {
        if (wait_in(rx, rx->lfd) <= 0) continue;
        int fd = accept(rx->lfd, NULL, NULL);
        if (fd < 0) continue;
        serve_conn(rx, fd, buf);
        close(fd);
    }
    free(buf);
    return NULL;
}

int sk_bench_rx_start(struct sk_bench_rx *rx)
{
    memset(rx, 0, sizeof *rx);
    pthread_mutex_init(&rx->mu, NULL);
    rx->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (rx->lfd < 0) return SK_EIO;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (bind(rx->lfd, (struct sockaddr *)&a, sizeof a) || listen(rx->lfd, 16) ||
        getsockname(rx->lfd, (struct sockaddr *)&a, &al))
        goto fail;
    rx->port = ntohs(a.sin_port);
    if (pthread_create(&rx->th, NULL, rx_main, rx)) goto fail;
    rx->started = 1;
    return 0;
fail:
    close(rx->lfd);
    rx->lfd = -1;
    return SK_EIO;
}

size_t sk_bench_rx_count(struct sk_bench_rx *rx)
{
    pthread_mutex_lock(&rx->mu);
    size_t n = rx->n;
    pthread_mutex_unlock(&rx->mu);
    return n;
}

void sk_bench_rx_stop(struct sk_bench_rx *rx)
{
    rx->stop = 1;
    if (rx->started) pthread_join(rx->th, NULL);
    rx->started = 0;
    if (rx->lfd >= 0) close(rx->lfd);
    rx->lfd = -1;
}

void sk_bench_rx_free(struct sk_bench_rx *rx)
{
    free(rx->lag_ms);
    rx->lag_ms = NULL;
    rx->n = rx->cap = 0;
    pthread_mutex_destroy(&rx->mu);
}
