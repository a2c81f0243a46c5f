/* conns.c - accept loop, connection cap, idle reuse, timeouts and the
 * end-of-pass step for one listener (conns.h). */
#include "http/conns.h"

#include <errno.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "core/vec.h"
#include "http/framing.h"

enum { PAUSED_CAP = 1, PAUSED_FDS = 2 };

#define SWEEP_EVERY_MS 100
/* Accepts per listener event: the backlog drains without starving the
 * connections already open. */
#define ACCEPT_BATCH 256
/* Out of file descriptors: idle connections closed to free some, and how
 * long accepting pauses (shorter when something was freed). */
#define FDS_EVICT 4
#define FDS_PAUSE_MS 20
#define FDS_PAUSE_NONE_FREED_MS 100
/* File descriptors kept for everything but client connections (Redis,
 * the store, logs, the listener, the event loop). */
#define FD_RESERVE 64
#define FD_RAISE_TO 65536
/* Connections looked at per search for an idle one (an approximate
 * least-recently-used choice, as Redis samples keys to evict). */
#define IDLE_SAMPLE 32
#define SUMMARY_EVERY_MS 10000
/* Reading a request may take the I/O timeout and this much more: a
 * connection that stopped reading its answers is reset (output check)
 * before it is closed for idleness. */
#define READ_GRACE_MS 1000

/* The loop's clock (ms): what the connections' own stamps use. */
static int64_t loop_ms(const struct sk_conns *cs)
{
    return (int64_t)h2o_now(cs->loop);
}

size_t sk_conns_mem_default(int processes, uint64_t max_body)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t total = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
    uint64_t cap = total / 8 / (uint64_t)(processes > 0 ? processes : 1);
    uint64_t floor = 4 * (max_body + SK_FRAMING_MAX_HEAD);
    if (floor < 16u << 20) floor = 16u << 20;
    if (cap < floor) cap = floor;
    return cap > SIZE_MAX ? SIZE_MAX : (size_t)cap;
}

void sk_conns_mem_note(struct sk_conns *cs, size_t was, size_t now)
{
    if (!cs->mem) return;
    cs->mem->used = cs->mem->used - was + now;
}

/* The default of max_connections for a file-descriptor limit. */
static long long default_max(long long fd_limit)
{
    if (fd_limit <= 0) return FD_RAISE_TO - FD_RESERVE; /* no limit */
    long long n = fd_limit > 2 * FD_RESERVE ? fd_limit - FD_RESERVE : fd_limit / 2;
    return n < 1 ? 1 : n;
}

/* The cap for a configured max_connections (0: from the fd limit). */
static long long cap_for(long long max_connections)
{
    struct rlimit rl;
    long long fds = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                        ? (long long)rl.rlim_cur
                        : 0;
    long long fit = default_max(fds);
    if (max_connections > fit)
        sk_log(SK_LOG_WARN,
               "max_connections %lld is more than the file-descriptor limit (%lld) leaves room "
               "for (%lld): past that, accepting pauses briefly and idle connections are closed",
               max_connections, fds, fit);
    return max_connections > 0 ? max_connections : fit;
}

void sk_conns_init(struct sk_conns *cs, h2o_evloop_t *loop, const struct sk_conns_app *app,
                   int listen_fd, long long max_connections, int io_timeout_s, uint64_t max_body)
{
    memset(cs, 0, sizeof *cs);
    cs->loop = loop;
    cs->app = *app;
    cs->listen_fd = listen_fd;
    h2o_linklist_init_anchor(&cs->ready);
    /* The soft fd limit up to the hard one (at most FD_RAISE_TO), as
     * servers do: a shell's default 1024 would cap connections at 960. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur < FD_RAISE_TO && rl.rlim_max > rl.rlim_cur) {
        rl.rlim_cur =
            rl.rlim_max == RLIM_INFINITY || rl.rlim_max > FD_RAISE_TO ? FD_RAISE_TO : rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    cs->max = cap_for(max_connections);
    cs->io_timeout_ms = (int64_t)io_timeout_s * 1000;
    cs->max_body = max_body;
    /* a whole request (head and the largest body, twice over) and the next head */
    cs->max_input = 2 * SK_FRAMING_MAX_HEAD + 2 * (size_t)max_body;
    cs->next_sweep_ms = loop_ms(cs) + SWEEP_EVERY_MS;
}

static void on_accept(h2o_socket_t *listener, const char *err);

static void pause_accepting(struct sk_conns *cs, int why, int64_t resume_ms)
{
    if (!cs->listener) return;
    if (!cs->paused) h2o_socket_read_stop(cs->listener);
    cs->paused = why;
    cs->resume_ms = resume_ms;
}

static void resume_accepting(struct sk_conns *cs)
{
    if (!cs->paused) return;
    cs->paused = 0;
    if (cs->listener) h2o_socket_read_start(cs->listener, on_accept);
}

void sk_conns_set_max(struct sk_conns *cs, long long max_connections)
{
    cs->max = cap_for(max_connections);
    if (cs->paused == PAUSED_CAP && cs->n < (size_t)cs->max) resume_accepting(cs);
}

void sk_conns_forget(struct sk_conns *cs, struct sk_h1conn *c)
{
    if (c->idx >= cs->n || cs->v[c->idx] != c) return;
    cs->v[c->idx] = cs->v[--cs->n];
    cs->v[c->idx]->idx = c->idx;
    if (cs->paused == PAUSED_CAP && cs->n < (size_t)cs->max) resume_accepting(cs);
}

void sk_conns_ready(struct sk_conns *cs, struct sk_h1conn *c)
{
    if (!h2o_linklist_is_linked(&c->ready)) h2o_linklist_insert(&cs->ready, &c->ready);
}

void sk_conns_flush(struct sk_conns *cs)
{
    while (!h2o_linklist_is_empty(&cs->ready)) {
        struct sk_h1conn *c = H2O_STRUCT_FROM_MEMBER(struct sk_h1conn, ready, cs->ready.next);
        h2o_linklist_unlink(&c->ready);
        sk_h1_step(c);
    }
}

int sk_conns_has_ready(struct sk_conns *cs)
{
    return !h2o_linklist_is_empty(&cs->ready);
}

const char *sk_conns_date(struct sk_conns *cs)
{
    int64_t s = (int64_t)(h2o_now(cs->loop) / 1000);
    if (s != cs->date_s || !cs->date[0]) {
        time_t t = (time_t)s;
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(cs->date, sizeof cs->date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
        cs->date_s = s;
    }
    return cs->date;
}

/* Bytes moved since the last look count as progress. */
static void note_progress(struct sk_h1conn *c, int64_t now)
{
    if (c->bytes_in != c->seen_in || c->bytes_out != c->seen_out) {
        c->seen_in = c->bytes_in;
        c->seen_out = c->bytes_out;
        c->progress_ms = now;
    }
}

/* Bytes the kernel holds for c, or -1: FIONREAD a request that reached
 * the kernel but not this process yet (busy, not idle), SIOCOUTQ answers
 * the client has not acknowledged. */
static int kernel_bytes(const struct sk_h1conn *c, unsigned long what)
{
    int n = 0;
    return ioctl(h2o_socket_get_fd(c->sock), what, &n) == 0 ? n : -1;
}

/* The connection idle the longest among a sample (all when the sample
 * holds none), or NULL. Bytes moved since the last sweep make a
 * connection recent. */
static struct sk_h1conn *pick_idle(struct sk_conns *cs, int64_t now)
{
    for (int tries = 0; tries < 4; tries++) {
        struct sk_h1conn *best = NULL;
        for (size_t seen = 0; seen < cs->n && (seen < IDLE_SAMPLE || !best); seen++) {
            struct sk_h1conn *c = cs->v[(cs->cursor + seen) % cs->n];
            if (!sk_h1_idle(c)) continue;
            note_progress(c, now);
            if (!best || c->progress_ms < best->progress_ms) best = c;
        }
        if (!best || kernel_bytes(best, FIONREAD) <= 0) return best;
        best->progress_ms = now; /* busy after all: look again */
    }
    return NULL;
}

static void evict(struct sk_conns *cs, struct sk_h1conn *c)
{
    cs->cursor = c->idx + 1;
    cs->evicted++;
    sk_h1_close(c, 0);
}

static int evict_idle(struct sk_conns *cs, int64_t now)
{
    struct sk_h1conn *c = pick_idle(cs, now);
    if (c) evict(cs, c);
    return c != NULL;
}

/* EMFILE/ENFILE: make room by closing a few idle connections and pause
 * accepting briefly (the listener stays readable, so accepting again at
 * once would only spin). */
static void out_of_fds(struct sk_conns *cs, int err, int64_t now)
{
    int freed = 0;
    while (freed < FDS_EVICT && evict_idle(cs, now))
        freed++;
    cs->out_of_fds++;
    pause_accepting(cs, PAUSED_FDS, now + (freed ? FDS_PAUSE_MS : FDS_PAUSE_NONE_FREED_MS));
    if (now - cs->logged_ms >= SUMMARY_EVERY_MS) {
        cs->logged_ms = now;
        sk_log(SK_LOG_WARN,
               "accept: %s with %zu connections open; closed %d idle ones and paused "
               "accepting (raise the file-descriptor limit or lower max_connections)",
               strerror(err), cs->n, freed);
    }
}

static void on_accept(h2o_socket_t *listener, const char *err)
{
    struct sk_conns *cs = listener->data;
    if (err) return;
    int64_t now = loop_ms(cs);
    for (int i = 0; i < ACCEPT_BATCH; i++) {
        /* at the cap, an idle connection makes room, once one is waiting */
        struct sk_h1conn *room = NULL;
        if (cs->n >= (size_t)cs->max && !(room = pick_idle(cs, now))) {
            pause_accepting(cs, PAUSED_CAP, 0); /* until a connection closes */
            return;
        }
        struct sockaddr_storage peer;
        socklen_t plen = sizeof peer;
        int fd =
            accept4(cs->listen_fd, (struct sockaddr *)&peer, &plen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                out_of_fds(cs, errno, now);
            return; /* EAGAIN: the backlog is empty */
        }
        if (room) evict(cs, room);
        if (SK_VEC_RESERVE(cs->v, cs->cap, cs->n + 1, 64)) {
            close(fd);
            continue;
        }
        int on = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
        h2o_socket_t *sock =
            h2o_evloop_socket_create(cs->loop, fd, H2O_SOCKET_FLAG_IS_ACCEPTED_CONNECTION);
        struct sk_h1conn *c = sk_h1_open(cs, sock, (struct sockaddr *)&peer, plen);
        if (!c) continue;
        c->seq = ++cs->accepted;
        c->idx = cs->n;
        cs->v[cs->n++] = c;
    }
}

void sk_conns_listen(struct sk_conns *cs)
{
    cs->listener = h2o_evloop_socket_create(cs->loop, cs->listen_fd, H2O_SOCKET_FLAG_DONT_READ);
    cs->listener->data = cs;
    cs->paused = 0;
    h2o_socket_read_start(cs->listener, on_accept);
}

/* Stops accepting for good and closes the listening socket. */
static void unlisten(struct sk_conns *cs)
{
    if (!cs->listener) return;
    if (!cs->paused) h2o_socket_read_stop(cs->listener);
    h2o_socket_close(cs->listener);
    cs->listener = NULL;
    cs->paused = 0;
}

void sk_conns_drain(struct sk_conns *cs)
{
    unlisten(cs);
    cs->draining = 1;
    /* backwards: a close moves the last connection into the freed place */
    for (size_t i = cs->n; i-- > 0;)
        if (i < cs->n) sk_h1_drain(cs->v[i]);
}

size_t sk_conns_busy(const struct sk_conns *cs)
{
    size_t busy = 0;
    for (size_t i = 0; i < cs->n; i++)
        busy += !sk_h1_idle(cs->v[i]) && cs->v[i]->state != SK_H1_LINGER;
    return busy;
}

/* Answers the client does not read: bytes the kernel will not take (a
 * client whose receive window is full acknowledges nothing) that have not
 * moved for the I/O timeout. Only a connection whose pending output did
 * not move since the last look costs a system call. Returns 1 when the
 * connection was reset. */
static int check_output(struct sk_conns *cs, struct sk_h1conn *c, int64_t now)
{
    if (c->out->size == 0) {
        c->outq = -1;
        return 0;
    }
    if (now - c->out_ms < SWEEP_EVERY_MS) return 0;
    int q = kernel_bytes(c, SIOCOUTQ);
    if (q < 0) return 0;
    if (q != c->outq) { /* the client took some: the kernel's queue moved */
        c->outq = q;
        c->out_ms = now;
        return 0;
    }
    if (now - c->out_ms < cs->io_timeout_ms) return 0;
    cs->timed_out++;
    sk_h1_close(c, 1); /* RST: the kernel drops what the client never took */
    return 1;
}

static void check_one(struct sk_conns *cs, struct sk_h1conn *c, int64_t now)
{
    if (c->bytes_out != c->seen_out) c->out_ms = now; /* output moved */
    note_progress(c, now);
    if (check_output(cs, c, now)) return;
    if (c->state == SK_H1_LINGER) {
        if (c->linger_until_ms && now >= c->linger_until_ms) sk_h1_close(c, 0);
        return;
    }
    if ((c->state == SK_H1_HEAD || c->state == SK_H1_BODY) &&
        now - c->wait_since_ms > cs->io_timeout_ms + READ_GRACE_MS)
        /* waited too long for a request; answers the client never read
         * are dropped with a reset rather than left to the kernel */
        sk_h1_close(c, kernel_bytes(c, SIOCOUTQ) > 0);
}

/* Unfinished requests first by when they began (oldest first). */
static int older_first(const void *a, const void *b)
{
    const struct sk_h1conn *x = *(struct sk_h1conn *const *)a, *y = *(struct sk_h1conn *const *)b;
    if (x->request_ms != y->request_ms) return x->request_ms > y->request_ms ? 1 : -1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

/* Over the request-bytes cap: closes unfinished requests (a head or a body
 * still coming), oldest first, until the bytes fit again. Answers a
 * handler has, and idle connections, are never touched. */
static void shed(struct sk_conns *cs)
{
    struct sk_h1conn **v = malloc(cs->n * sizeof *v);
    size_t k = 0;
    for (size_t i = 0; v && i < cs->n; i++) {
        struct sk_h1conn *c = cs->v[i];
        if ((c->state == SK_H1_HEAD && c->sock->input->size > 0) || c->state == SK_H1_BODY)
            v[k++] = c;
    }
    if (k) qsort(v, k, sizeof *v, older_first);
    for (size_t i = 0; i < k && cs->mem->used > cs->mem->max; i++) {
        cs->mem_shed++;
        sk_h1_close(v[i], 1); /* what it still sends is not read: a reset */
    }
    free(v);
}

/* One info line every 10 s at most, when something was closed here. */
static void summary(struct sk_conns *cs, int64_t now)
{
    uint64_t cur[6] = {cs->evicted,    cs->timed_out,   cs->too_large,
                       cs->out_of_fds, cs->mem_refused, cs->mem_shed};
    if (!memcmp(cur, cs->logged, sizeof cur) || now - cs->logged_ms < SUMMARY_EVERY_MS) return;
    sk_log(SK_LOG_INFO,
           "connections: %zu open; closed so far: %llu idle ones to make room, %llu whose "
           "answers were not read for %lld s, %llu over the size limits; %llu fd shortages; "
           "over the request memory cap (%zu bytes): %llu bodies refused, %llu unfinished "
           "requests closed",
           cs->n, (unsigned long long)cur[0], (unsigned long long)cur[1],
           (long long)(cs->io_timeout_ms / 1000), (unsigned long long)cur[2],
           (unsigned long long)cur[3], cs->mem ? cs->mem->max : 0, (unsigned long long)cur[4],
           (unsigned long long)cur[5]);
    memcpy(cs->logged, cur, sizeof cur);
    cs->logged_ms = now;
}

void sk_conns_tick(struct sk_conns *cs)
{
    int64_t now = loop_ms(cs);
    if (cs->paused == PAUSED_FDS && now >= cs->resume_ms) resume_accepting(cs);
    if (cs->mem && cs->mem->used > cs->mem->max) shed(cs);
    if (now < cs->next_sweep_ms) return;
    cs->next_sweep_ms = now + SWEEP_EVERY_MS;
    /* backwards: a close moves the last connection into the freed place */
    for (size_t i = cs->n; i-- > 0;)
        if (i < cs->n) check_one(cs, cs->v[i], now);
    /* at the cap with nobody idle before: someone may be idle now */
    if (cs->paused == PAUSED_CAP && evict_idle(cs, now)) resume_accepting(cs);
    summary(cs, now);
}
