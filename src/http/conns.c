/* conns.c - accept loop, connection cap, idle reuse, write timeout and
 * buffer bounds for one event-loop process (conns.h). */
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
#include <unistd.h>

#include "core/clock.h"
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

struct sk_conn {
    struct sk_conns *cs;
    h2o_socket_t *sock;
    size_t idx;          /* in cs->v */
    size_t rd, wr;       /* the socket's byte counters at the last look */
    int64_t progress_ms; /* when bytes last moved either way */
    /* Output: bytes written that the client has not acknowledged (the
     * kernel's send queue, SIOCOUTQ) or h2o still holds. */
    size_t acked_wr;        /* bytes_written when the send queue was last seen empty */
    size_t out_wr;          /* bytes_written at the last look */
    int outq;               /* send queue at the last look (-1: not looked) */
    int64_t out_ms;         /* when the output last moved */
    int closing;            /* shut down here; h2o frees it on its next pass */
    h2o_socket_cb h2o_read; /* h2o's read callback, which guarded_read wraps */
    size_t rewrap_idx;      /* in cs->rewrap, when listed (+1; 0: not listed) */
};

long long sk_conns_default_max(long long fd_limit)
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
    long long fit = sk_conns_default_max(fds);
    if (max_connections > fit)
        sk_log(SK_LOG_WARN,
               "max_connections %lld is more than the file-descriptor limit (%lld) leaves room "
               "for (%lld): past that, accepting pauses briefly and idle connections are closed",
               max_connections, fds, fit);
    return max_connections > 0 ? max_connections : fit;
}

void sk_conns_init(struct sk_conns *cs, h2o_evloop_t *loop, h2o_accept_ctx_t *accept_ctx,
                   int listen_fd, long long max_connections, int io_timeout_s, size_t max_entity)
{
    memset(cs, 0, sizeof *cs);
    cs->loop = loop;
    cs->accept_ctx = accept_ctx;
    cs->listen_fd = listen_fd;
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
    /* a whole request (head and the largest body) and the next head */
    cs->max_input = 2 * SK_FRAMING_MAX_HEAD + max_entity;
    cs->next_sweep_ms = sk_mono_ms() + SWEEP_EVERY_MS;
}

static size_t live(const struct sk_conns *cs)
{
    return cs->n - cs->closing;
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
    if (cs->paused == PAUSED_CAP && live(cs) < (size_t)cs->max) resume_accepting(cs);
}

static void unlist_rewrap(struct sk_conns *cs, struct sk_conn *c)
{
    if (!c->rewrap_idx) return;
    size_t i = c->rewrap_idx - 1;
    cs->rewrap[i] = cs->rewrap[--cs->n_rewrap];
    cs->rewrap[i]->rewrap_idx = i + 1;
    c->rewrap_idx = 0;
}

/* h2o frees the socket: forget the connection. */
static void on_conn_close(void *data)
{
    struct sk_conn *c = data;
    struct sk_conns *cs = c->cs;
    cs->v[c->idx] = cs->v[--cs->n];
    cs->v[c->idx]->idx = c->idx;
    if (c->closing) cs->closing--;
    unlist_rewrap(cs, c);
    if (cs->in_read == c) cs->in_read = NULL; /* closed inside its read */
    free(c);
    if (cs->paused == PAUSED_CAP && live(cs) < (size_t)cs->max) resume_accepting(cs);
}

/* Bytes moved since the last look count as progress. */
static void note_progress(struct sk_conn *c, int64_t now)
{
    h2o_socket_t *s = c->sock;
    if (s->bytes_read != c->rd || s->bytes_written != c->wr) {
        c->rd = s->bytes_read;
        c->wr = s->bytes_written;
        c->progress_ms = now;
    }
}

/* Ends a connection through h2o: the shut-down socket reads EOF (or fails
 * its write), and h2o closes and frees it on its next pass. reset: close
 * with RST, dropping what the kernel still holds for the client. */
static void shut(struct sk_conns *cs, struct sk_conn *c, int reset)
{
    int fd = h2o_socket_get_fd(c->sock);
    if (reset) {
        struct linger lg = {1, 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    }
    shutdown(fd, SHUT_RDWR);
    c->closing = 1;
    cs->closing++;
}

/* Reading, nothing buffered, nothing to write: waiting for a request. */
static int is_idle(const struct sk_conn *c)
{
    const h2o_socket_t *s = c->sock;
    return !c->closing && s->_cb.read != NULL && s->_cb.write == NULL &&
           (!s->input || s->input->size == 0);
}

/* A request that reached the kernel but not h2o yet makes a connection
 * busy, not idle. */
static int kernel_has_input(const struct sk_conn *c)
{
    int n = 0;
    return ioctl(h2o_socket_get_fd(c->sock), FIONREAD, &n) == 0 && n > 0;
}

/* The connection idle the longest among a sample (all when the sample
 * holds none), or NULL. Bytes moved since the last sweep make a
 * connection recent. */
static struct sk_conn *pick_idle(struct sk_conns *cs, int64_t now)
{
    for (int tries = 0; tries < 4; tries++) {
        struct sk_conn *best = NULL;
        for (size_t seen = 0; seen < cs->n && (seen < IDLE_SAMPLE || !best); seen++) {
            struct sk_conn *c = cs->v[(cs->cursor + seen) % cs->n];
            if (!is_idle(c)) continue;
            note_progress(c, now);
            if (!best || c->progress_ms < best->progress_ms) best = c;
        }
        if (!best || !kernel_has_input(best)) return best;
        best->progress_ms = now; /* busy after all: look again */
    }
    return NULL;
}

static void evict(struct sk_conns *cs, struct sk_conn *c)
{
    cs->cursor = c->idx + 1;
    shut(cs, c, 0);
    cs->evicted++;
}

static int evict_idle(struct sk_conns *cs, int64_t now)
{
    struct sk_conn *c = pick_idle(cs, now);
    if (c) evict(cs, c);
    return c != NULL;
}

/* What a connection holds beyond the limits, checked after each read:
 * 0 fine, 1 a head that will not end within SK_FRAMING_MAX_HEAD bytes,
 * 2 more than a whole request and the next head. */
static int over_limits(const struct sk_conns *cs, const h2o_socket_t *s)
{
    size_t have = s->input ? s->input->size : 0;
    if (have <= SK_FRAMING_MAX_HEAD) return 0;
    if (sk_framing_head_len(s->input->bytes, SK_FRAMING_MAX_HEAD) == 0) return 1;
    return have > cs->max_input ? 2 : 0;
}

static void send_431(h2o_socket_t *sock);

/* h2o's read callback, wrapped: bytes over the limits never reach h2o's
 * parser; the connection is refused and h2o closes it (told of an error
 * by its own callback) before this returns. */
static void guarded_read(h2o_socket_t *sock, const char *err)
{
    struct sk_conn *c = sock->on_close.data;
    struct sk_conns *cs = c->cs;
    h2o_socket_cb h2o_read = c->h2o_read;
    int over = err ? 0 : over_limits(cs, sock);
    if (over) {
        if (over == 1) send_431(sock);
        cs->too_large++;
        if (over == 2) {
            struct linger lg = {1, 0};
            setsockopt(h2o_socket_get_fd(sock), SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        }
        h2o_read(sock, h2o_socket_error_io); /* frees sock and c */
        return;
    }
    cs->in_read = c;
    h2o_read(sock, err);
    if (cs->in_read != c) return; /* closed meanwhile */
    cs->in_read = NULL;
    /* h2o stopped reading (a request to answer): it will set its own
     * callback again for the next one; listed to wrap it then */
    if (sock->_cb.read != guarded_read && !c->rewrap_idx &&
        !SK_VEC_RESERVE(cs->rewrap, cs->cap_rewrap, cs->n_rewrap + 1, 64)) {
        cs->rewrap[cs->n_rewrap++] = c;
        c->rewrap_idx = cs->n_rewrap;
    }
}

/* Puts guarded_read in front of h2o's read callback (when h2o reads). */
static void wrap(struct sk_conn *c)
{
    h2o_socket_t *s = c->sock;
    if (!s->_cb.read || s->_cb.read == guarded_read) return;
    c->h2o_read = s->_cb.read;
    s->_cb.read = guarded_read;
}

/* End of a loop pass: connections whose answer went out read again
 * through h2o's own callback; wrap it before their next read. */
static void rewrap_all(struct sk_conns *cs)
{
    for (size_t i = 0; i < cs->n_rewrap;) {
        struct sk_conn *c = cs->rewrap[i];
        if (!c->sock->_cb.read) { /* still answering */
            i++;
            continue;
        }
        wrap(c);
        unlist_rewrap(cs, c);
    }
}

static int track(struct sk_conns *cs, h2o_socket_t *sock)
{
    struct sk_conn *c = calloc(1, sizeof *c);
    if (!c || SK_VEC_RESERVE(cs->v, cs->cap, cs->n + 1, 64)) {
        free(c);
        return -1;
    }
    c->cs = cs;
    c->sock = sock;
    c->idx = cs->n;
    c->outq = -1;
    c->progress_ms = c->out_ms = sk_mono_ms();
    cs->v[cs->n++] = c;
    sock->on_close.cb = on_conn_close;
    sock->on_close.data = c;
    return 0;
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
    int64_t now = sk_mono_ms();
    for (int i = 0; i < ACCEPT_BATCH; i++) {
        /* at the cap, an idle connection makes room, once one is waiting */
        struct sk_conn *room = NULL;
        if (live(cs) >= (size_t)cs->max && !(room = pick_idle(cs, now))) {
            pause_accepting(cs, PAUSED_CAP, 0); /* until a connection closes */
            return;
        }
        int fd = accept4(cs->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                out_of_fds(cs, errno, now);
            return; /* EAGAIN: the backlog is empty */
        }
        if (room) evict(cs, room);
        int on = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
        h2o_socket_t *sock =
            h2o_evloop_socket_create(cs->loop, fd, H2O_SOCKET_FLAG_IS_ACCEPTED_CONNECTION);
        if (track(cs, sock) < 0) {
            h2o_socket_close(sock);
            continue;
        }
        h2o_accept(cs->accept_ctx, sock); /* h2o starts reading */
        wrap(sock->on_close.data);
    }
}

void sk_conns_listen(struct sk_conns *cs)
{
    cs->listener = h2o_evloop_socket_create(cs->loop, cs->listen_fd, H2O_SOCKET_FLAG_DONT_READ);
    cs->listener->data = cs;
    cs->paused = 0;
    h2o_socket_read_start(cs->listener, on_accept);
}

void sk_conns_unlisten(struct sk_conns *cs)
{
    if (!cs->listener) return;
    if (!cs->paused) h2o_socket_read_stop(cs->listener);
    h2o_socket_close(cs->listener);
    cs->listener = NULL;
    cs->paused = 0;
}

/* A head that will not end within the limit: 431, best effort, straight
 * to the socket (h2o is still reading the head: it has nothing to write). */
static void send_431(h2o_socket_t *sock)
{
    static const char body[] = "{\"error\":\"headers_too_large\",\"message\":\"the request line "
                               "and headers are over 16384 bytes\"}";
    char msg[320];
    int n = snprintf(msg, sizeof msg,
                     "HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                     sizeof body - 1, body);
    if (n > 0 && (size_t)n < sizeof msg && !h2o_socket_is_writing(sock))
        (void)!send(h2o_socket_get_fd(sock), msg, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* Answers the client does not read: the send queue stuck (a client whose
 * receive window is full acknowledges nothing), whether h2o still holds
 * more (a pipelining client) or not (h2o waits for the next request, and
 * its own close would leave the kernel holding the bytes). Only
 * connections with unacknowledged bytes cost a system call. Returns 1
 * when the connection was reset. */
static int check_output(struct sk_conns *cs, struct sk_conn *c, int64_t now)
{
    h2o_socket_t *s = c->sock;
    int writing = h2o_socket_is_writing(s);
    if (!writing && s->bytes_written == c->acked_wr) return 0; /* all acknowledged */
    int q = 0;
    if (ioctl(h2o_socket_get_fd(s), SIOCOUTQ, &q) != 0) return 0;
    if (q == 0 && !writing) {
        c->acked_wr = s->bytes_written;
        c->outq = 0;
        return 0;
    }
    if (q != c->outq || s->bytes_written != c->out_wr) {
        c->outq = q;
        c->out_wr = s->bytes_written;
        c->out_ms = now;
        return 0;
    }
    if (now - c->out_ms < cs->io_timeout_ms) return 0;
    cs->timed_out++;
    shut(cs, c, 1); /* RST: the kernel drops what the client never took */
    return 1;
}

static void check_one(struct sk_conns *cs, struct sk_conn *c, int64_t now)
{
    h2o_socket_t *s = c->sock;
    note_progress(c, now);
    if (check_output(cs, c, now) || h2o_socket_is_writing(s)) return;
    /* what a read outside the wrapper let in (h2o's 100-continue path
     * sets its callback again mid-request) */
    int over = h2o_socket_is_reading(s) ? over_limits(cs, s) : 0;
    if (!over) {
        wrap(c);
        return;
    }
    if (over == 1) send_431(s);
    cs->too_large++;
    shut(cs, c, over == 2);
}

/* One info line every 10 s at most, when something was closed here. */
static void summary(struct sk_conns *cs, int64_t now)
{
    uint64_t cur[4] = {cs->evicted, cs->timed_out, cs->too_large, cs->out_of_fds};
    if (!memcmp(cur, cs->logged, sizeof cur) || now - cs->logged_ms < SUMMARY_EVERY_MS) return;
    sk_log(SK_LOG_INFO,
           "connections: %zu open; closed so far: %llu idle ones to make room, %llu whose "
           "answers were not read for %lld s, %llu over the size limits; %llu fd shortages",
           cs->n, (unsigned long long)cur[0], (unsigned long long)cur[1],
           (long long)(cs->io_timeout_ms / 1000), (unsigned long long)cur[2],
           (unsigned long long)cur[3]);
    memcpy(cs->logged, cur, sizeof cur);
    cs->logged_ms = now;
}

void sk_conns_tick(struct sk_conns *cs)
{
    rewrap_all(cs);
    int64_t now = sk_mono_ms();
    if (cs->paused == PAUSED_FDS && now >= cs->resume_ms) resume_accepting(cs);
    if (now < cs->next_sweep_ms) return;
    cs->next_sweep_ms = now + SWEEP_EVERY_MS;
    for (size_t i = 0; i < cs->n; i++)
        if (!cs->v[i]->closing) check_one(cs, cs->v[i], now);
    /* at the cap with nobody idle before: someone may be idle now */
    if (cs->paused == PAUSED_CAP && evict_idle(cs, now)) resume_accepting(cs);
    summary(cs, now);
}
