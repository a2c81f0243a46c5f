/* http1.h - one HTTP/1.1 client connection of `seckill serve`, on h2o's
 * socket layer and h2o's request object, without h2o's HTTP/1 protocol.
 *
 * Why (docs/design.md, "The HTTP/1.1 layer"): h2o 2.2's HTTP/1 stops
 * reading a connection for every request and starts again after the
 * answer, and its epoll backend turns each change into epoll_ctl calls:
 * two to four per admitted request. Here a connection is registered for
 * reading once and stays so: bytes that arrive while a request waits for
 * Redis are buffered (pipelining), each answer is written with one
 * write(2) straight from the connection's output buffer, and epoll is
 * touched again only when the kernel refuses bytes (a slow reader) or a
 * client sends far ahead of its answers (reading pauses; backpressure).
 *
 * A request is parsed by http1_parse.h, copied with its body into an
 * h2o_req_t's pool (so the handlers and h2o_send_inline work as before,
 * and the connection's buffer may grow meanwhile), and handed to the
 * listener's handler. Its answer comes through the request's final output
 * stream, at once or later; answers go out in request order, one request
 * at a time per connection. Every request the layer refuses (framing,
 * limits) goes to the listener's refuse hook for a JSON answer, and the
 * connection closes after it: the answer is written, the write side shut,
 * and what the client still sends is read and dropped for a moment so
 * that the kernel does not reset the connection before the client read
 * the answer (a lingering close, as nginx does). */
#ifndef SK_HTTP1_H
#define SK_HTTP1_H
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <h2o.h>

#include "http/chunked.h"
#include "http/http1_parse.h"

struct sk_conns;

enum sk_h1_state {
    SK_H1_HEAD,     /* waiting for (the rest of) a request head */
    SK_H1_BODY,     /* the head is in; waiting for the body */
    SK_H1_BUSY,     /* the handler has the request */
    SK_H1_ANSWERED, /* answered; the request is freed on the next step */
    SK_H1_LINGER    /* closing: write side shut, input dropped until EOF or a deadline */
};

struct sk_h1conn {
    h2o_conn_t super; /* first: the request's conn casts back */
    struct sk_conns *cs;
    h2o_socket_t *sock;
    size_t idx; /* in cs->v */
    enum sk_h1_state state;
    unsigned keep_alive : 1;   /* the connection may go on after the current answer */
    unsigned peer_eof : 1;     /* the client shut its side (or left) */
    unsigned read_paused : 1;  /* reading stopped: the client is too far ahead */
    unsigned write_wait : 1;   /* the kernel refused bytes: waiting until writable */
    unsigned req_live : 1;     /* req is initialised */
    unsigned in_step : 1;      /* step() is running for this connection */
    unsigned more_to_pull : 1; /* a streamed answer is not complete yet */
    unsigned continue_due : 1; /* Expect: 100-continue, not answered yet */
    struct sockaddr_storage peer;
    socklen_t peer_len;
    /* the request being read */
    size_t last_len;  /* input size at the last incomplete head */
    size_t head_len;  /* SK_H1_BODY: bytes of the head */
    size_t body_done; /* SK_H1_BODY, chunked: input bytes decoded (head included) */
    enum sk_h1_body body;
    uint64_t content_length;
    struct sk_chunked chunked;
    struct timeval begin; /* when the request's first bytes were looked at */
    int has_begin;
    int64_t request_ms; /* the same, on the loop's clock (the oldest are shed first) */
    uint64_t seq;       /* the order of accepts (ties of request_ms) */
    size_t req_bytes;   /* the request's head and body copied for the handler */
    size_t mem_held;    /* this connection's share of cs->mem, as last noted */
    h2o_buffer_t *out;  /* answer bytes the kernel has not taken */
    uint64_t bytes_in;  /* read from the client, all told */
    uint64_t bytes_out; /* taken by the kernel, all told */
    /* the sweep's (conns.c) bookkeeping */
    int64_t wait_since_ms;   /* when it began waiting for the client (HEAD, BODY) */
    int64_t linger_until_ms; /* SK_H1_LINGER: close at the latest then */
    uint64_t seen_in, seen_out;
    int64_t progress_ms;  /* when bytes last moved either way */
    int64_t out_ms;       /* when pending output last moved */
    int outq;             /* the kernel's send queue at the last look (-1: not looked) */
    h2o_linklist_t ready; /* in cs->ready: answered, to step on */
    h2o_ostream_t ostr;   /* req's final output stream */
    h2o_req_t req;        /* last: large */
};

/* Makes a connection for an accepted socket (peer: its address) and starts
 * reading. NULL when out of memory (the socket is closed then). */
struct sk_h1conn *sk_h1_open(struct sk_conns *cs, h2o_socket_t *sock, const struct sockaddr *peer,
                             socklen_t peer_len);

/* Closes now (reset: with RST, dropping what the kernel still holds for
 * the client). A request the handler still has is freed: its guard tells
 * the handler (app.h, sk_async_req). Frees c. */
void sk_h1_close(struct sk_h1conn *c, int reset);

/* Moves a connection on after its answer came from outside its own read
 * (cs->ready): frees the request, serves what the client pipelined, writes
 * the answers. May close (and free) c. */
void sk_h1_step(struct sk_h1conn *c);

/* Waiting for a request with nothing read, owed or written pending: a
 * keep-alive connection that may be closed to make room. */
int sk_h1_idle(const struct sk_h1conn *c);

/* Draining: no keep-alive after the current answer; an idle connection
 * (or one with half a head) is closed at once. May free c. */
void sk_h1_drain(struct sk_h1conn *c);

#endif
