/* webhook_rx.c - the tests' webhook receiver (webhook_rx.h). */
#include "support/webhook_rx.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "core/clock.h"
#include "support/fixtures.h"
#include "support/harness.h"

#define RX_BUF (1 << 16)
#define RX_CONNS 256

struct rx_key {
    unsigned char k[64];
    int len;
};

struct sk_th_rx {
    int fd, port, keep;
    atomic_int stop, pct, ra, hold, held, live;
    pthread_t th;
    pthread_mutex_t mu;
    uint64_t rng;
    struct rx_key keys[2];
    int nkeys;
    struct sk_th_rx_req *req;
    size_t n, cap;
    long answers[5];
    int conns[RX_CONNS]; /* open connections (-1: free slot), cut at the stop */
};

static int draw(struct sk_th_rx *rx, int n)
{
    pthread_mutex_lock(&rx->mu);
    uint64_t x = rx->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    rx->rng = x;
    pthread_mutex_unlock(&rx->mu);
    return (int)(x % (uint64_t)n);
}

/* The value of header name ("webhook-id:") in head, into out. */
static void header(const char *head, size_t hlen, const char *name, char *out, size_t cap)
{
    out[0] = 0;
    size_t nl = strlen(name);
    for (const char *p = head; p + nl < head + hlen; p++) {
        if ((p != head && p[-1] != '\n') || strncasecmp(p, name, nl)) continue;
        p += nl;
        while (*p == ' ')
            p++;
        size_t n = strcspn(p, "\r\n");
        if (n >= cap) n = cap - 1;
        memcpy(out, p, n);
        out[n] = 0;
        return;
    }
}

/* Is sigs (space-separated "v1,<base64>") signed under one of the keys? */
static int verify(const struct sk_th_rx *rx, const char *id, const char *ts, const char *body,
                  size_t blen, const char *sigs)
{
    for (int k = 0; k < rx->nkeys; k++) {
        size_t hl = strlen(id) + strlen(ts) + 2;
        unsigned char *msg = malloc(hl + blen + 1);
        CHECK(msg != NULL);
        snprintf((char *)msg, hl + 1, "%s.%s.", id, ts);
        memcpy(msg + hl, body, blen);
        unsigned char mac[EVP_MAX_MD_SIZE];
        unsigned int ml = 0;
        HMAC(EVP_sha256(), rx->keys[k].k, rx->keys[k].len, msg, hl + blen, mac, &ml);
        free(msg);
        char want[80] = "v1,";
        EVP_EncodeBlock((unsigned char *)want + 3, mac, (int)ml);
        size_t wl = strlen(want);
        for (const char *p = sigs; *p;) {
            size_t n = strcspn(p, " ");
            if (n == wl && !memcmp(p, want, wl)) return 1;
            p += n;
            while (*p == ' ')
                p++;
        }
    }
    return 0;
}

/* The body's id, subject, seq and type against the webhook-id. */
static int parse_body(const char *id, const char *body, size_t blen, char *type, size_t cap)
{
    json_t *j = json_loadb(body, blen, 0, NULL);
    const char *bid = json_string_value(json_object_get(j, "id"));
    const char *subject = json_string_value(json_object_get(j, "subject"));
    const char *t = json_string_value(json_object_get(j, "type"));
    json_int_t seq = json_integer_value(json_object_get(j, "seq"));
    char made[160] = "";
    if (subject) snprintf(made, sizeof made, "%s:%lld", subject, (long long)seq);
    snprintf(type, cap, "%s", t ? t : "");
    int ok = bid && !strcmp(bid, id) && !strcmp(made, id);
    json_decref(j);
    return ok;
}

/* Reserves the record of a request read whole: its index. */
static size_t record(struct sk_th_rx *rx, const struct sk_th_rx_req *q)
{
    pthread_mutex_lock(&rx->mu);
    if (rx->n == rx->cap) {
        rx->cap = rx->cap ? rx->cap * 2 : 1024;
        rx->req = realloc(rx->req, rx->cap * sizeof *rx->req);
        CHECK(rx->req != NULL);
    }
    size_t i = rx->n++;
    rx->req[i] = *q;
    rx->req[i].at = (int64_t)i;
    pthread_mutex_unlock(&rx->mu);
    return i;
}

static void answered(struct sk_th_rx *rx, size_t i, int status, int slow)
{
    pthread_mutex_lock(&rx->mu);
    rx->req[i].status = status;
    rx->answers[status == 200 ? 0 : status == 500 ? 1 : status == 429 ? 2 : 3]++;
    rx->answers[4] += slow;
    pthread_mutex_unlock(&rx->mu);
}

/* Waits until the peer closes or the receiver stops (or, when held, a
 * release): 1 when released with the peer still there. */
static int wait_peer(struct sk_th_rx *rx, int fd, int held)
{
    for (;;) {
        if (atomic_load(&rx->stop)) return 0;
        if (held && !atomic_load(&rx->hold)) return 1;
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 20) > 0) {
            char b[256];
            if (read(fd, b, sizeof b) <= 0) return 0; /* gone (or a pipelined byte: cut) */
        }
    }
}

struct conn {
    struct sk_th_rx *rx;
    int fd, slot;
};

/* One request of the connection answered; 0 to go on, -1 to close. */
static int one(struct sk_th_rx *rx, int fd, char *buf, size_t *got)
{
    char *end;
    long clen = -1;
    for (;;) {
        buf[*got] = 0;
        if ((end = strstr(buf, "\r\n\r\n")) != NULL) {
            char v[32];
            header(buf, (size_t)(end - buf), "content-length:", v, sizeof v);
            clen = v[0] ? strtol(v, NULL, 10) : 0;
            if (clen < 0 || clen > RX_BUF / 2) return -1;
            if ((long)(*got - (size_t)(end + 4 - buf)) >= clen) break;
        }
        if (*got >= RX_BUF - 1) return -1;
        struct pollfd p = {fd, POLLIN, 0};
        int pr = poll(&p, 1, 100);
        if (atomic_load(&rx->stop)) return -1;
        if (pr <= 0) continue;
        ssize_t r = read(fd, buf + *got, RX_BUF - 1 - *got);
        if (r <= 0) return -1;
        *got += (size_t)r;
    }
    size_t hlen = (size_t)(end - buf), blen = (size_t)clen;
    const char *body = end + 4;
    struct sk_th_rx_req q;
    memset(&q, 0, sizeof q);
    char sig[400];
    header(buf, hlen, "webhook-id:", q.id, sizeof q.id);
    header(buf, hlen, "webhook-timestamp:", q.ts, sizeof q.ts);
    header(buf, hlen, "webhook-signature:", sig, sizeof sig);
    q.sig_ok = verify(rx, q.id, q.ts, body, blen, sig);
    q.id_ok = parse_body(q.id, body, blen, q.type, sizeof q.type);
    q.wall_ms = sk_wall_ms();
    if (rx->keep) {
        q.body = strndup(body, blen);
        q.sig = strdup(sig);
    }
    size_t i = record(rx, &q);
    /* what is left of the buffer: the next request's first bytes */
    size_t used = hlen + 4 + blen;
    memmove(buf, buf + used, *got - used);
    *got -= used;

    if (atomic_load(&rx->hold)) {
        atomic_fetch_add(&rx->held, 1);
        int alive = wait_peer(rx, fd, 1);
        atomic_fetch_sub(&rx->held, 1);
        if (!alive) {
            answered(rx, i, 0, 0);
            return -1;
        }
    }
    int pct = atomic_load(&rx->pct), fault = pct > 0 && draw(rx, 100) < pct ? draw(rx, 5) : -1;
    if (fault == 2) { /* a hang: until the client gives up */
        answered(rx, i, 0, 0);
        wait_peer(rx, fd, 0);
        return -1;
    }
    if (fault == 3) { /* a reset */
        answered(rx, i, 0, 0);
        struct linger l = {1, 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
        return -1;
    }
    if (fault == 4) sk_th_nap_ms(50 + draw(rx, 251));
    int status = fault == 0 ? 500 : fault == 1 ? 429 : 200;
    char resp[160], ra[40] = "";
    if (status == 429) snprintf(ra, sizeof ra, "Retry-After: %d\r\n", rx->ra + draw(rx, 2));
    int n = snprintf(resp, sizeof resp, "HTTP/1.1 %d X\r\nContent-Length: 0\r\n%s\r\n", status, ra);
    answered(rx, i, status, fault == 4);
    return send(fd, resp, (size_t)n, MSG_NOSIGNAL) == n ? 0 : -1;
}

static void *conn_run(void *arg)
{
    struct conn *c = arg;
    struct sk_th_rx *rx = c->rx;
    char *buf = malloc(RX_BUF);
    size_t got = 0;
    while (buf && one(rx, c->fd, buf, &got) == 0) {
    }
    free(buf);
    pthread_mutex_lock(&rx->mu);
    if (c->slot >= 0) rx->conns[c->slot] = -1;
    pthread_mutex_unlock(&rx->mu);
    close(c->fd);
    free(c);
    atomic_fetch_sub(&rx->live, 1);
    return NULL;
}

static void *accept_run(void *arg)
{
    struct sk_th_rx *rx = arg;
    while (!atomic_load(&rx->stop)) {
        struct pollfd p = {rx->fd, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0) continue;
        int fd = accept(rx->fd, NULL, NULL);
        if (fd < 0) continue;
        struct conn *c = malloc(sizeof *c);
        CHECK(c != NULL);
        *c = (struct conn){rx, fd, -1};
        pthread_mutex_lock(&rx->mu);
        for (int i = 0; i < RX_CONNS && c->slot < 0; i++)
            if (rx->conns[i] < 0) {
                rx->conns[i] = fd;
                c->slot = i;
            }
        pthread_mutex_unlock(&rx->mu);
        atomic_fetch_add(&rx->live, 1);
        pthread_t t;
        CHECK(pthread_create(&t, NULL, conn_run, c) == 0);
        pthread_detach(t);
    }
    return NULL;
}

struct sk_th_rx *sk_th_rx_start(uint64_t seed, const char *const *secrets, int keep_bodies)
{
    struct sk_th_rx *rx = calloc(1, sizeof *rx);
    CHECK(rx != NULL);
    rx->rng = seed | 1;
    rx->keep = keep_bodies;
    pthread_mutex_init(&rx->mu, NULL);
    for (int i = 0; i < RX_CONNS; i++)
        rx->conns[i] = -1;
    for (int i = 0; secrets && secrets[i] && i < 2; i++) {
        const char *b = secrets[i] + 6; /* past "whsec_" */
        unsigned char out[128];
        size_t bl = strlen(b);
        CHECK(bl < 160);
        int len = EVP_DecodeBlock(out, (const unsigned char *)b, (int)bl);
        CHECK(len > 0);
        len -= (bl > 0 && b[bl - 1] == '=') + (bl > 1 && b[bl - 2] == '=');
        CHECK(len > 0 && len <= 64);
        memcpy(rx->keys[i].k, out, (size_t)len);
        rx->keys[i].len = len;
        rx->nkeys++;
    }
    rx->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK_EQ(bind(rx->fd, (struct sockaddr *)&a, sizeof a), 0);
    CHECK_EQ(listen(rx->fd, 128), 0);
    socklen_t l = sizeof a;
    CHECK_EQ(getsockname(rx->fd, (struct sockaddr *)&a, &l), 0);
    rx->port = ntohs(a.sin_port);
    CHECK(pthread_create(&rx->th, NULL, accept_run, rx) == 0);
    return rx;
}

int sk_th_rx_port(const struct sk_th_rx *rx)
{
    return rx->port;
}

void sk_th_rx_faults(struct sk_th_rx *rx, int pct, int r)
{
    atomic_store(&rx->ra, r);
    atomic_store(&rx->pct, pct);
}

void sk_th_rx_hold(struct sk_th_rx *rx, int on)
{
    atomic_store(&rx->hold, on);
}

int sk_th_rx_held(struct sk_th_rx *rx)
{
    return atomic_load(&rx->held);
}

size_t sk_th_rx_count(struct sk_th_rx *rx)
{
    pthread_mutex_lock(&rx->mu);
    size_t n = rx->n;
    pthread_mutex_unlock(&rx->mu);
    return n;
}

void sk_th_rx_get(struct sk_th_rx *rx, size_t i, struct sk_th_rx_req *out)
{
    pthread_mutex_lock(&rx->mu);
    CHECK(i < rx->n);
    *out = rx->req[i];
    pthread_mutex_unlock(&rx->mu);
}

void sk_th_rx_answers(struct sk_th_rx *rx, long out[5])
{
    pthread_mutex_lock(&rx->mu);
    memcpy(out, rx->answers, sizeof rx->answers);
    pthread_mutex_unlock(&rx->mu);
}

void sk_th_rx_stop(struct sk_th_rx *rx)
{
    atomic_store(&rx->stop, 1);
    pthread_join(rx->th, NULL);
    close(rx->fd);
    pthread_mutex_lock(&rx->mu);
    for (int i = 0; i < RX_CONNS; i++)
        if (rx->conns[i] >= 0) shutdown(rx->conns[i], SHUT_RDWR);
    pthread_mutex_unlock(&rx->mu);
    int64_t by = sk_mono_ms() + 5000; /* each sees the stop within 100 ms */
    while (atomic_load(&rx->live) > 0 && sk_mono_ms() < by)
        sk_th_nap_ms(5);
    CHECK_MSG(atomic_load(&rx->live) == 0, "webhook receiver: %d connection(s) never ended",
              atomic_load(&rx->live));
    for (size_t i = 0; i < rx->n; i++) {
        free(rx->req[i].body);
        free(rx->req[i].sig);
    }
    free(rx->req);
    pthread_mutex_destroy(&rx->mu);
    free(rx);
}
