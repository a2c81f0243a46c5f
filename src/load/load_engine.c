/* load_engine.c - the engine of `seckill load` (see load.h for the model):
 * worker threads, each with its own epoll loop over non-blocking keep-alive
 * connections, closed or open loop (load_run.c starts them and merges
 * what they counted). Worker threads share nothing but a few atomics
 * (request budget, next fresh user id, progress, stop flag); each keeps its
 * own counters, histogram and accepted-order records. */
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "core/cli.h"
#include "core/error.h"
#include "core/http_resp.h"
#include "core/num.h"
#include "core/vec.h"
#include "http/auth.h"
#include "load/json_field.h"
#include "load/load_int.h"

#define RBUF_INITIAL 2048
#define MAX_EVENTS 1024
#define SCAN_NS (100 * 1000000LL) /* how often in-flight requests are checked for timeout */
#define MAX_CONSECUTIVE_FAILS 3   /* a connection that fails this often in a row is given up */

/* ---- small helpers ---- */

static atomic_int load_interrupted;

void sk_load_interrupt(void)
{
    atomic_store(&load_interrupted, 1);
}

int sk_load_interrupted(void)
{
    return atomic_load_explicit(&load_interrupted, memory_order_relaxed);
}

int64_t sk_load_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* ---- connection handling ---- */

static void ep_mod(struct conn *c, int out)
{
    if (c->want_out == out) return;
    struct epoll_event ev = {.events = EPOLLIN | (out ? EPOLLOUT : 0u), .data.ptr = c};
    epoll_ctl(c->w->ep, EPOLL_CTL_MOD, c->fd, &ev);
    c->want_out = out;
}

static int issuing(const struct worker *w, int64_t now)
{
    const struct run *run = w->run;
    if (sk_load_interrupted() || now >= run->deadline_ns) return 0;
    if (run->o->rate > 0) return w->next_idx < w->share;
    return run->o->requests == 0 ||
           atomic_load_explicit(&((struct run *)run)->budget, memory_order_relaxed) > 0;
}

static void close_conn(struct conn *c, enum cstate to)
{
    struct worker *w = c->w;
    if (c->fd >= 0) {
        close(c->fd); /* also leaves the epoll set */
        c->fd = -1;
    }
    if (c->state == C_BUSY) w->inflight--;
    if (c->state == C_IDLE && w->run->o->rate > 0) {
        for (size_t i = 0; i < w->nidle; i++)
            if (w->idle[i] == c) {
                w->idle[i] = w->idle[--w->nidle];
                break;
            }
    }
    if (to == C_DEAD && c->state != C_DEAD) w->live--;
    c->state = to;
    c->rlen = 0;
    c->want_out = 0;
}

static void on_idle(struct conn *c);

static void start_connect(struct conn *c)
{
    struct worker *w = c->w;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        w->res.err_connect++;
        close_conn(c, C_DEAD);
        return;
    }
    int one = 1;
    /* one write per request: never wait for Nagle */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->fd = fd;
    c->sent_ns = sk_load_now_ns();
    c->state = C_CONNECTING;
    c->want_out = 1;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
    if (epoll_ctl(w->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
        w->res.err_connect++;
        close_conn(c, C_DEAD);
        return;
    }
    if (connect(fd, (const struct sockaddr *)&w->run->addr, sizeof w->run->addr) < 0 &&
        errno != EINPROGRESS) {
        w->res.err_connect++;
        close_conn(c, ++c->fails >= MAX_CONSECUTIVE_FAILS ? C_DEAD : C_CLOSED);
    }
    /* completion (or failure) arrives as EPOLLOUT */
}

/* After a failure or a server-side close: reconnect while there is work. */
static void reconnect(struct conn *c, int64_t now)
{
    struct worker *w = c->w;
    if (c->state != C_DEAD) close_conn(c, C_CLOSED);
    if (c->state == C_CLOSED && issuing(w, now)) {
        w->res.reconnects++;
        start_connect(c);
    }
}

static void fail_conn(struct conn *c, uint64_t *counter, int64_t now)
{
    (*counter)++;
    if (++c->fails >= MAX_CONSECUTIVE_FAILS) {
        close_conn(c, C_DEAD);
        return;
    }
    reconnect(c, now);
}

static uint64_t pick_user(struct worker *w, int *fresh)
{
    struct run *run = w->run;
    const struct sk_load_opts *o = run->o;
    uint64_t used = atomic_load_explicit(&run->next_fresh, memory_order_relaxed);
    if (used > o->users) used = o->users;
    if (used > 0 && o->retry_ratio > 0 &&
        (double)(xorshift(&w->rng) >> 11) / 9007199254740992.0 < o->retry_ratio) {
        *fresh = 0;
        return o->user_base + 1 + xorshift(&w->rng) % used;
    }
    uint64_t k = atomic_fetch_add_explicit(&run->next_fresh, 1, memory_order_relaxed);
    if (k < o->users) {
        *fresh = 1;
        return o->user_base + 1 + k;
    }
    /* every id used once: the rest are repeat buyers */
    *fresh = 0;
    return o->user_base + 1 + xorshift(&w->rng) % o->users;
}

/* The request line and fixed headers for a target: its own path. */
static size_t target_prefix(const struct run *run, const struct sk_load_target *t, char *out)
{
    const struct sk_load_opts *o = run->o;
    int n = run->body_len
                ? snprintf(out, WBUF_CAP,
                           "%s %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
                           "Content-Length: %zu\r\n",
                           o->method, t->path, o->host, o->port, run->body_len)
                : snprintf(out, WBUF_CAP, "%s %s HTTP/1.1\r\nHost: %s:%d\r\n", o->method, t->path,
                           o->host, o->port);
    return n > 0 ? (size_t)n : 0;
}

static void send_request(struct conn *c, int64_t origin, int64_t now)
{
    struct worker *w = c->w;
    struct run *run = w->run;
    char *p = c->wbuf;
    if (run->o->n_targets) {
        uint64_t k = atomic_fetch_add_explicit(&run->next_target, 1, memory_order_relaxed);
        const struct sk_load_target *t = &run->o->targets[k % run->o->n_targets];
        c->uid = t->user;
        c->fresh = 0;
        p += target_prefix(run, t, p);
    } else {
        c->uid = pick_user(w, &c->fresh);
        memcpy(p, run->prefix, run->prefix_len);
        p += run->prefix_len;
    }
    if (run->o->auth == SK_LOAD_AUTH_HMAC) {
        memcpy(p, "Authorization: Bearer ", 22);
        p += 22;
        int n = sk_auth_make_token(run->o->hmac_secret, strlen(run->o->hmac_secret), c->uid,
                                   run->expiry, p, SK_AUTH_TOKEN_MAX + 1);
        p += n > 0 ? n : 0;
    } else {
        memcpy(p, "X-User-Id: ", 11);
        p += 11;
        p = sk_num_u64_put(p, c->uid);
    }
    if (run->o->idem_keys) /* "<thread>-<n>": unique in this run */
        p += sprintf(p, "\r\nIdempotency-Key: %d-%" PRIu64, w->idx, ++w->idem_seq);
    memcpy(p, "\r\n\r\n", 4);
    p += 4;
    memcpy(p, run->body, run->body_len);
    p += run->body_len;
    c->wlen = (size_t)(p - c->wbuf);
    c->woff = 0;
    c->origin_ns = origin;
    c->sent_ns = now;
    c->state = C_BUSY;
    w->inflight++;
    w->res.sent++;
    ssize_t n = send(c->fd, c->wbuf, c->wlen, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
        fail_conn(c, &w->res.err_closed, now);
        return;
    }
    c->woff = n > 0 ? (size_t)n : 0;
    ep_mod(c, c->woff < c->wlen);
}

static void on_idle(struct conn *c)
{
    struct worker *w = c->w;
    struct run *run = w->run;
    c->state = C_IDLE;
    if (w->warming) return;
    if (run->o->rate > 0) {
        w->idle[w->nidle++] = c; /* dispatch_due hands it the next due request */
        return;
    }
    int64_t now = sk_load_now_ns();
    if (!issuing(w, now)) return;
    if (run->o->requests > 0 &&
        atomic_fetch_sub_explicit(&run->budget, 1, memory_order_relaxed) <= 0)
        return;
    send_request(c, now, now);
}

static void on_response(struct conn *c, const struct sk_http_resp *r, int64_t now)
{
    struct worker *w = c->w;
    struct sk_load_result *res = &w->res;
    const struct sk_load_opts *o = w->run->o;
    int64_t lat = now - c->origin_ns;
    uint64_t lat_us = lat > 0 ? (uint64_t)(lat / 1000) : 0;
    sk_hist_record(&res->latency, lat_us);
    if (r->status >= 200 && r->status < 300) sk_hist_record(&res->latency_ok, lat_us);
    if (r->status == 429 || r->status == 503) { /* how fast the server refused, from the send */
        int64_t sent = now - c->sent_ns;
        sk_hist_record(&res->latency_busy, sent > 0 ? (uint64_t)(sent / 1000) : 0);
        sk_hist_record(&res->latency_refused, lat_us);
    }
    res->completed++;
    atomic_fetch_add_explicit(&w->run->progress, 1, memory_order_relaxed);
    if (r->status < 600)
        res->status[r->status]++;
    else
        res->status_other++;
    w->inflight--;
    c->fails = 0;
    int contending = 0;
    if (r->status >= 200 && r->status < 300) {
        if (r->status == 200) {
            res->accepted++;
            int64_t qty = o->quantity;
            const char *v;
            size_t vl;
            int str;
            if (sk_load_json_field(r->body, r->body_len, "quantity", &v, &vl, &str) == 0 && !str &&
                vl > 0 && vl < 20) {
                char tmp[24];
                memcpy(tmp, v, vl);
                tmp[vl] = 0;
                int64_t q;
                if (sk_cli_parse_i64(tmp, 1, INT64_MAX, &q) == 0) qty = q;
            }
            res->accepted_units += (uint64_t)qty;
            contending = 1;
            if (w->run->order_check) {
                if (sk_load_json_field(r->body, r->body_len, "order_id", &v, &vl, &str) == 0 &&
                    str && vl > 0) {
                    if (!w->oom && sk_load_rec_add(&w->rec, c->uid, qty, v, vl) < 0) w->oom = 1;
                } else {
                    res->missing_orders++;
                }
            }
        }
    } else if (r->status >= 300) {
        const char *v;
        size_t vl;
        int str;
        if (sk_load_json_field(r->body, r->body_len, "error", &v, &vl, &str) == 0 && str) {
            sk_load_count_code(res, v, vl, 1);
            if (vl == 8 && !memcmp(v, "sold_out", 8)) contending = 1;
        } else {
            res->refusals_other++;
        }
    }
    if (c->fresh) {
        res->distinct_users++;
        if (contending) w->fresh_contending++;
    }
}

static void on_readable(struct conn *c, int64_t now)
{
    struct worker *w = c->w;
    if (c->rlen == c->rcap) {
        if (c->rcap >= SK_HTTP_RESP_MAX_BODY + SK_HTTP_RESP_MAX_HEAD) {
            fail_conn(c, &w->res.err_protocol, now);
            return;
        }
        if (SK_VEC_RESERVE(c->rbuf, c->rcap, c->rlen + 1, RBUF_INITIAL) < 0) {
            w->oom = 1;
            fail_conn(c, &w->res.err_protocol, now);
            return;
        }
    }
    ssize_t n = recv(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen, 0);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
        if (c->state == C_BUSY)
            fail_conn(c, &w->res.err_closed, now);
        else
            reconnect(c, now);
        return;
    }
    int eof = n == 0;
    c->rlen += (size_t)n;
    if (c->state != C_BUSY) {
        /* idle keep-alive closed by the server: normal; bytes nobody asked for: not */
        if (c->rlen > 0)
            fail_conn(c, &w->res.err_protocol, now);
        else
            reconnect(c, now);
        return;
    }
    struct sk_http_resp r;
    int rc = sk_http_resp_parse(c->rbuf, c->rlen, eof, w->run->head, &r);
    if (rc == 0) {
        if (eof) fail_conn(c, &w->res.err_closed, now);
        return;
    }
    if (rc < 0 || r.consumed != c->rlen) {
        /* garbage, or bytes after the answer to a request never pipelined */
        fail_conn(c, &w->res.err_protocol, now);
        return;
    }
    on_response(c, &r, now);
    c->rlen = 0;
    if (!r.keep_alive || eof) {
        c->state = C_IDLE; /* answered: no longer in flight */
        reconnect(c, now);
        return;
    }
    on_idle(c);
}

static void on_event(struct conn *c, uint32_t ev, int64_t now)
{
    struct worker *w = c->w;
    if (c->state == C_CONNECTING) {
        if (!(ev & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr) {
            w->res.err_connect++;
            close_conn(c, ++c->fails >= MAX_CONSECUTIVE_FAILS ? C_DEAD : C_CLOSED);
            if (c->state == C_CLOSED && issuing(w, now)) start_connect(c);
            return;
        }
        ep_mod(c, 0);
        on_idle(c);
        return;
    }
    if (c->state == C_BUSY && (ev & EPOLLOUT) && c->woff < c->wlen) {
        ssize_t n = send(c->fd, c->wbuf + c->woff, c->wlen - c->woff, MSG_NOSIGNAL);
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            fail_conn(c, &w->res.err_closed, now);
            return;
        }
        if (n > 0) c->woff += (size_t)n;
        if (c->woff == c->wlen) ep_mod(c, 0);
    }
    if ((c->state == C_BUSY || c->state == C_IDLE) && (ev & (EPOLLIN | EPOLLHUP | EPOLLERR)))
        on_readable(c, now);
}

/* ---- open loop ---- */

static int64_t intended_ns(const struct worker *w, uint64_t idx)
{
    return w->run->start_ns + (int64_t)((double)idx * 1e9 / w->rate);
}

static void dispatch_due(struct worker *w, int64_t now)
{
    while (w->next_idx < w->share && w->nidle > 0 && issuing(w, now)) {
        int64_t t = intended_ns(w, w->next_idx);
        if (t > now) break;
        struct conn *c = w->idle[--w->nidle];
        w->next_idx++;
        send_request(c, t, now);
    }
    /* wake up for the next intended send only when a connection could take it;
     * otherwise the next answer frees one */
    int64_t want = 0;
    if (w->next_idx < w->share && w->nidle > 0) want = intended_ns(w, w->next_idx);
    if (want > now && want != w->armed_ns) {
        struct itimerspec its = {
            .it_value = {.tv_sec = want / 1000000000LL, .tv_nsec = want % 1000000000LL}};
        timerfd_settime(w->tfd, TFD_TIMER_ABSTIME, &its, NULL);
        w->armed_ns = want;
    }
}

/* ---- worker thread ---- */

static void scan_timeouts(struct worker *w, int64_t now)
{
    int64_t limit = w->run->o->timeout_ms * 1000000LL;
    for (size_t i = 0; i < w->nconns; i++) {
        struct conn *c = &w->conns[i];
        if ((c->state == C_BUSY && now - c->sent_ns > limit))
            fail_conn(c, &w->res.err_timeout, now);
        else if (c->state == C_CONNECTING && now - c->sent_ns > limit) {
            /* a connect that never completes (SYN backlog full) */
            w->res.err_connect++;
            close_conn(c, ++c->fails >= MAX_CONSECUTIVE_FAILS ? C_DEAD : C_CLOSED);
        } else if (c->state == C_CLOSED && issuing(w, now)) {
            start_connect(c);
        }
    }
}

void *sk_load_worker_main(void *arg)
{
    struct worker *w = arg;
    struct run *run = w->run;
    const struct sk_load_opts *o = run->o;
    struct epoll_event evs[MAX_EVENTS];
    w->warming = 1;
    for (size_t i = 0; i < w->nconns; i++)
        start_connect(&w->conns[i]);
    int64_t now = sk_load_now_ns(), warm_end = now + o->timeout_ms * 1000000LL;
    for (;;) {
        size_t connecting = 0;
        for (size_t i = 0; i < w->nconns; i++)
            connecting += w->conns[i].state == C_CONNECTING;
        if (!connecting || sk_load_interrupted() || now >= warm_end) break;
        int n = epoll_wait(w->ep, evs, MAX_EVENTS, 50);
        now = sk_load_now_ns();
        for (int i = 0; i < n; i++)
            if (evs[i].data.ptr) on_event(evs[i].data.ptr, evs[i].events, now);
    }
    pthread_mutex_lock(&run->mu);
    run->n_connected++;
    pthread_cond_broadcast(&run->cv);
    while (!run->go)
        pthread_cond_wait(&run->cv, &run->mu);
    pthread_mutex_unlock(&run->mu);
    w->warming = 0;
    for (size_t i = 0; i < w->nconns; i++)
        if (w->conns[i].state == C_IDLE) on_idle(&w->conns[i]);
    now = sk_load_now_ns();
    int64_t next_scan = now + SCAN_NS;
    for (;;) {
        now = sk_load_now_ns();
        int more = issuing(w, now);
        if (o->rate > 0) dispatch_due(w, now);
        if (!more) {
            /* nothing more to send: drop connections that carry nothing */
            for (size_t i = 0; i < w->nconns; i++)
                if (w->conns[i].state == C_CONNECTING || w->conns[i].state == C_IDLE ||
                    w->conns[i].state == C_CLOSED)
                    close_conn(&w->conns[i], C_CLOSED);
            if (w->inflight == 0) break;
        }
        if (w->live == 0) break;
        if (now >= next_scan) {
            scan_timeouts(w, now);
            next_scan = now + SCAN_NS;
        }
        int64_t wait = next_scan - now;
        if (more && run->deadline_ns - now < wait) wait = run->deadline_ns - now;
        int timeout_ms = wait <= 0 ? 0 : (int)((wait + 999999) / 1000000);
        int n = epoll_wait(w->ep, evs, MAX_EVENTS, timeout_ms);
        if (n < 0 && errno != EINTR) break;
        now = sk_load_now_ns();
        for (int i = 0; i < n; i++) {
            if (evs[i].data.ptr == NULL) {
                uint64_t ticks;
                if (read(w->tfd, &ticks, sizeof ticks) < 0) {
                    /* spurious wake-up: dispatch_due re-arms */
                }
                w->armed_ns = 0;
                continue;
            }
            on_event(evs[i].data.ptr, evs[i].events, now);
        }
    }
    now = sk_load_now_ns();
    if (o->rate > 0) {
        /* due sends that never found a free connection before the end */
        /* the last millisecond is left out: a send due just before the
         * deadline may miss it by the wake-up latency alone */
        int64_t stop = (now < run->deadline_ns ? now : run->deadline_ns) - 1000000LL;
        uint64_t due = stop <= run->start_ns
                           ? 0
                           : (uint64_t)((double)(stop - run->start_ns) * w->rate / 1e9) + 1;
        if (due > w->share) due = w->share;
        if (due > w->next_idx && !sk_load_interrupted()) w->res.backlog_at_end = due - w->next_idx;
    }
    for (size_t i = 0; i < w->nconns; i++)
        if (w->conns[i].state == C_BUSY) {
            w->res.err_timeout++;
            close_conn(&w->conns[i], C_CLOSED);
        } else if (w->conns[i].fd >= 0) {
            close_conn(&w->conns[i], w->conns[i].state == C_DEAD ? C_DEAD : C_CLOSED);
        }
    w->end_ns = now;
    atomic_fetch_sub(&run->running, 1);
    return NULL;
}
void sk_load_worker_free(struct worker *w)
{
    if (w->conns) {
        for (size_t i = 0; i < w->nconns; i++) {
            if (w->conns[i].fd >= 0) close(w->conns[i].fd);
            free(w->conns[i].rbuf);
        }
        free(w->conns);
    }
    free(w->idle);
    if (w->ep >= 0) close(w->ep);
    if (w->tfd >= 0) close(w->tfd);
    sk_load_rec_free(&w->rec);
}

int sk_load_worker_init(struct worker *w, struct run *run, int idx, size_t nconns, char *err,
                        size_t cap)
{
    memset(w, 0, sizeof *w);
    w->run = run;
    w->idx = idx;
    w->ep = w->tfd = -1;
    sk_hist_init(&w->res.latency);
    sk_hist_init(&w->res.latency_busy);
    sk_hist_init(&w->res.latency_ok);
    sk_hist_init(&w->res.latency_refused);
    w->rng = 0x9E3779B97F4A7C15ull ^ ((uint64_t)idx * 0xBF58476D1CE4E5B9ull) ^
             (uint64_t)sk_load_now_ns();
    if (!w->rng) w->rng = 1;
    w->ep = epoll_create1(EPOLL_CLOEXEC);
    w->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    w->conns = calloc(nconns, sizeof *w->conns);
    w->idle = calloc(nconns, sizeof *w->idle);
    if (w->ep < 0 || w->tfd < 0 || !w->conns || !w->idle) {
        sk_load_set_err(err, cap, "cannot set up worker %d: %s", idx, strerror(errno));
        return SK_ENOMEM;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(w->ep, EPOLL_CTL_ADD, w->tfd, &ev);
    w->nconns = w->live = nconns;
    for (size_t i = 0; i < nconns; i++) {
        w->conns[i].fd = -1;
        w->conns[i].w = w;
        w->conns[i].state = C_CLOSED;
    }
    return 0;
}
