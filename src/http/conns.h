/* conns.h - the client connections of one listener of an event-loop
 * process of `seckill serve` (http1.h is one connection): the accept loop,
 * the connection cap with idle keep-alive reuse, the I/O timeouts, and the
 * step of answered connections at the end of each loop pass (README,
 * "HTTP hardening").
 *
 *   - accepting loops until the backlog is empty; at the cap the longest
 *     idle keep-alive connection (waiting for a request, nothing buffered)
 *     is closed to make room, as nginx does with its reusable connections;
 *     with no idle one the listener pauses until a connection closes. Out
 *     of file descriptors (EMFILE/ENFILE), it closes a few idle connections
 *     and pauses the listener briefly instead of spinning.
 *   - reading a request (a keep-alive wait, a head, a body) is bounded by
 *     the I/O timeout plus one second from the moment the connection began
 *     waiting for it; writing: a connection whose answer has not moved (no
 *     byte taken by the kernel, no byte acknowledged by the client) for the
 *     I/O timeout is reset, which frees its kernel buffers, and so is a
 *     connection closed for idleness while the kernel still holds answers
 *     the client never read.
 * The timeouts are checked every 100 ms over all connections: a few
 * comparisons each, and a system call (SIOCOUTQ) only for a connection
 * whose pending output did not move since the last look.
 *
 * The request bytes a process holds (sk_conns_mem) are bounded for all
 * its listeners together: each connection's share (its input buffer, a
 * Content-Length body it was let wait for, the copy its handler has) is
 * kept current after each of its steps; a body that would have to be
 * waited for past the cap is refused 503 at once, and at the end of a loop
 * pass that ended over the cap the unfinished requests are closed, oldest
 * first, until the bytes fit again. Idle keep-alive connections hold
 * nothing (their buffer is freed once read). */
#ifndef SK_CONNS_H
#define SK_CONNS_H
#include <stddef.h>
#include <stdint.h>

#include <h2o.h>

#include "http/http1.h"

/* Where a listener's requests go. */
struct sk_conns_app {
    h2o_context_t *ctx;     /* the requests' context (loop, clock) */
    h2o_hostconf_t **hosts; /* its hosts; the first one's first path binds every request */
    h2o_handler_t *handler; /* handler->on_req(handler, req) answers a request */
    /* answers a request the HTTP layer refuses (the connection closes
     * after it): status, a JSON error code, a one-line message */
    void (*refuse)(h2o_handler_t *handler, h2o_req_t *req, int status, const char *code,
                   const char *message);
};

/* The request bytes of one process (--max-request-bytes). */
struct sk_conns_mem {
    size_t used; /* held by the connections now */
    size_t max;  /* the cap */
};

/* The default cap of one of n HTTP processes: an eighth of the machine's
 * memory shared among them, but room for at least 16 MiB and four whole
 * requests of max_body. */
size_t sk_conns_mem_default(int processes, uint64_t max_body);

struct sk_conns {
    h2o_evloop_t *loop;
    struct sk_conns_app app;
    h2o_socket_t *listener; /* NULL before listen and after unlisten */
    int listen_fd;
    /* Limits. A reload may change max at any time (the cap applies to the
     * next accept; connections above it are not closed). */
    long long max;            /* connections at once */
    int64_t io_timeout_ms;    /* no progress for this long: reset */
    uint64_t max_body;        /* a larger request body: 413 */
    size_t max_input;         /* bytes read ahead of the answers before reading pauses */
    int draining;             /* no keep-alive; idle connections closed */
    struct sk_conns_mem *mem; /* the process's request bytes (shared by its listeners;
                                 NULL: not counted) */
    struct sk_h1conn **v;     /* open connections (heap, owned) */
    size_t n, cap;
    h2o_linklist_t ready; /* answered outside their own read: step at the end of the pass */
    int paused;           /* 0, PAUSED_CAP or PAUSED_FDS (conns.c) */
    int64_t resume_ms;    /* PAUSED_FDS: when to try accepting again */
    int64_t next_sweep_ms;
    size_t cursor;     /* where the next search for an idle connection starts */
    int64_t logged_ms; /* last summary log line */
    uint64_t evicted, timed_out, too_large, out_of_fds; /* counts, for the log */
    uint64_t mem_refused, mem_shed; /* bodies refused, unfinished requests closed (mem) */
    uint64_t accepted;              /* connections accepted, all told */
    uint64_t logged[6];             /* the counts at the last summary */
    int64_t date_s;                 /* second of date[] */
    char date[40];                  /* the Date header's value */
};

/* Sets cs up for the listening socket listen_fd (not yet polled).
 * First raises the soft file-descriptor limit (RLIMIT_NOFILE) to the hard
 * one, at most 65536. max_connections 0 means the default: what that
 * limit leaves after a reserve for Redis, the store and logs. */
void sk_conns_init(struct sk_conns *cs, h2o_evloop_t *loop, const struct sk_conns_app *app,
                   int listen_fd, long long max_connections, int io_timeout_s, uint64_t max_body);

/* A new cap (a reload): open connections stay, even above it; accepting
 * resumes when the cap paused it and there is room now. */
void sk_conns_set_max(struct sk_conns *cs, long long max_connections);

/* Starts accepting (creates the listener socket on the loop). */
void sk_conns_listen(struct sk_conns *cs);
/* A drain: stops accepting, closes idle connections, and every other one
 * after its current answer. */
void sk_conns_drain(struct sk_conns *cs);
/* Connections that are not idle (a request in progress, answers unwritten). */
size_t sk_conns_busy(const struct sk_conns *cs);

/* After each loop pass's events: steps every connection answered outside
 * its own read (http1.h: the answer goes out, pipelined requests go on). */
void sk_conns_flush(struct sk_conns *cs);
/* 1 when connections wait for sk_conns_flush (answered after the pass's
 * last flush): the next pass must not sleep. */
int sk_conns_has_ready(struct sk_conns *cs);

/* Once per loop pass: resumes accepting after an fd shortage, and every
 * 100 ms checks every connection's timeouts. */
void sk_conns_tick(struct sk_conns *cs);

/* ---- for http1.c ---- */

/* A connection's share of the request bytes changed from was to now. */
void sk_conns_mem_note(struct sk_conns *cs, size_t was, size_t now);

/* A connection was answered outside its own step: step it at the end of
 * the pass. */
void sk_conns_ready(struct sk_conns *cs, struct sk_h1conn *c);
/* The connection is closing: forget it (before it is freed). */
void sk_conns_forget(struct sk_conns *cs, struct sk_h1conn *c);
/* The Date header's value for now (cached per second). */
const char *sk_conns_date(struct sk_conns *cs);

#endif
