/* conns.h - the client connections of one event-loop process of `seckill
 * serve`: the accept loop, the connection cap with idle keep-alive reuse,
 * the I/O timeout for clients that stop reading their answers, and the
 * bound on what one connection may buffer (README, "HTTP hardening").
 *
 * h2o 2.2 accepts one connection per listener event and ignores EMFILE
 * (the listener stays readable: the loop spins), never times out a write,
 * and lets a request head grow to ~400 KB. Here:
 *   - accepting loops until the backlog is empty; at the cap the longest
 *     idle keep-alive connection (reading, nothing buffered) is closed to
 *     make room, as nginx does with its reusable connections; with no idle
 *     one the listener pauses until a connection closes. Out of file
 *     descriptors (EMFILE/ENFILE), it closes a few idle connections and
 *     pauses the listener briefly instead of spinning.
 *   - reading is bounded in time by h2o's request timeout (set to the I/O
 *     timeout); writing is checked here: a connection whose answer has not
 *     moved (no byte taken by the kernel, no byte acknowledged by the
 *     client) for the I/O timeout is reset, which frees its kernel buffers.
 *   - a request head that does not end within SK_FRAMING_MAX_HEAD bytes
 *     gets a 431 and a close; a connection holding more than a whole
 *     request (head, largest body) plus the next head is reset. This is
 *     checked right after each read, before h2o parses: h2o's read
 *     callback is wrapped (h2o sets it again for every request; the
 *     wrapper goes back on at the end of the loop pass in which h2o took
 *     it off, before the next read), and again every 100 ms.
 * The timeouts are checked every 100 ms over all connections (a pointer
 * test each; a system call only for those with unacknowledged output).
 * Connections are tracked through the socket's on_close hook, which h2o
 * calls when it frees the socket; to close one, the socket is shut down
 * (shutdown(2)) so that h2o itself sees the end and frees its state, or,
 * inside a read, h2o's own read callback is told of an error. */
#ifndef SK_CONNS_H
#define SK_CONNS_H
#include <stddef.h>
#include <stdint.h>

#include <h2o.h>

struct sk_conn;

struct sk_conns {
    h2o_evloop_t *loop;
    h2o_accept_ctx_t *accept_ctx;
    h2o_socket_t *listener; /* NULL before listen and after unlisten */
    int listen_fd;
    long long max;         /* connections at once */
    int64_t io_timeout_ms; /* no progress writing for this long: reset */
    size_t max_input;      /* bytes a connection may hold unprocessed */
    struct sk_conn **v;    /* open connections (heap, owned) */
    size_t n, cap;
    size_t closing;          /* shut down here, not yet freed by h2o */
    struct sk_conn **rewrap; /* connections whose read callback h2o took over */
    size_t n_rewrap, cap_rewrap;
    struct sk_conn *in_read; /* the connection whose read is being handled */
    int paused;              /* 0, PAUSED_CAP or PAUSED_FDS (conns.c) */
    int64_t resume_ms;       /* PAUSED_FDS: when to try accepting again */
    int64_t next_sweep_ms;
    size_t cursor;     /* where the next search for an idle connection starts */
    int64_t logged_ms; /* last summary log line */
    uint64_t evicted, timed_out, too_large, out_of_fds; /* counts, for the log */
    uint64_t logged[4];                                 /* the counts at the last summary */
};

/* Sets cs up for the listening socket listen_fd (not yet polled).
 * First raises the soft file-descriptor limit (RLIMIT_NOFILE) to the hard
 * one, at most 65536. max_connections 0 means the default: what that
 * limit leaves after a reserve for Redis, the store and logs.
 * max_entity: the largest request body h2o reads. */
void sk_conns_init(struct sk_conns *cs, h2o_evloop_t *loop, h2o_accept_ctx_t *accept_ctx,
                   int listen_fd, long long max_connections, int io_timeout_s, size_t max_entity);

/* A new cap (a reload): open connections stay, even above it; accepting
 * resumes when the cap paused it and there is room now. */
void sk_conns_set_max(struct sk_conns *cs, long long max_connections);
/* The default of max_connections for a file-descriptor limit. */
long long sk_conns_default_max(long long fd_limit);

/* Starts accepting (creates the listener socket on the loop). */
void sk_conns_listen(struct sk_conns *cs);
/* Stops accepting for good and closes the listening socket (a drain). */
void sk_conns_unlisten(struct sk_conns *cs);

/* Once per loop pass: resumes accepting after an fd shortage, and every
 * 100 ms checks every connection (progress, buffered bytes). */
void sk_conns_tick(struct sk_conns *cs);

#endif
