/* http1.c - one HTTP/1.1 connection (http1.h): reading and parsing,
 * handing requests to the handler, serialising their answers, writing,
 * keep-alive, pipelining, 100-continue and the lingering close. */
#include "http/http1.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/num.h"
#include "http/conns.h"

/* Answers buffered beyond this: the next pipelined request waits until the
 * client has read some (its requests stay in the input buffer). */
#define OUT_HIGH (64 * 1024)
/* After the last answer of a closing connection: how long what the client
 * still sends is read and dropped before the close. */
#define LINGER_MS 2000

static void on_read(h2o_socket_t *sock, const char *err);
static void on_writable(h2o_socket_t *sock, const char *err);
static void on_send(h2o_ostream_t *self, h2o_req_t *req, h2o_iovec_t *bufs, size_t bufcnt,
                    h2o_send_state_t state);

static struct sk_h1conn *of(h2o_conn_t *conn)
{
    return (struct sk_h1conn *)conn;
}

static socklen_t get_sockname(h2o_conn_t *conn, struct sockaddr *sa)
{
    return h2o_socket_getsockname(of(conn)->sock, sa);
}

/* From accept(2): no system call per request. */
static socklen_t get_peername(h2o_conn_t *conn, struct sockaddr *sa)
{
    struct sk_h1conn *c = of(conn);
    memcpy(sa, &c->peer, c->peer_len);
    return c->peer_len;
}

static h2o_socket_t *get_socket(h2o_conn_t *conn)
{
    return of(conn)->sock;
}

static const h2o_conn_callbacks_t callbacks = {
    .get_sockname = get_sockname, .get_peername = get_peername, .get_socket = get_socket};

static int64_t now_ms(const struct sk_h1conn *c)
{
    return (int64_t)h2o_now(c->cs->loop);
}

struct sk_h1conn *sk_h1_open(struct sk_conns *cs, h2o_socket_t *sock, const struct sockaddr *peer,
                             socklen_t peer_len)
{
    struct sk_h1conn *c = calloc(1, sizeof *c);
    if (!c) {
        h2o_socket_close(sock);
        return NULL;
    }
    c->super.ctx = cs->app.ctx;
    c->super.hosts = cs->app.hosts;
    c->super.callbacks = &callbacks;
    gettimeofday(&c->super.connected_at, NULL);
    c->cs = cs;
    c->sock = sock;
    sock->data = c;
    if (peer_len > sizeof c->peer) peer_len = sizeof c->peer;
    memcpy(&c->peer, peer, peer_len);
    c->peer_len = peer_len;
    c->state = SK_H1_HEAD;
    c->keep_alive = 1;
    c->outq = -1;
    h2o_buffer_init(&c->out, &h2o_socket_buffer_prototype);
    c->wait_since_ms = c->progress_ms = c->out_ms = now_ms(c);
    h2o_socket_read_start(sock, on_read);
    return c;
}

/* A fresh request object bound to the listener's first path (whose
 * handlers are never run by h2o: the handler is called directly). */
static h2o_req_t *req_init(struct sk_h1conn *c)
{
    h2o_req_t *req = &c->req;
    if (c->req_live) return req;
    h2o_init_request(req, &c->super, NULL);
    c->ostr = (h2o_ostream_t){.do_send = on_send};
    req->_ostr_top = &c->ostr;
    h2o_hostconf_t *host = c->cs->app.hosts[0];
    h2o_req_bind_conf(req, host, host->paths.size ? &host->paths.entries[0] : &host->fallback_path);
    req->input.scheme = req->scheme = &H2O_URL_SCHEME_HTTP;
    req->input.authority = req->authority = host->authority.hostport;
    req->version = 0x101;
    req->timestamps.request_begin_at = c->begin;
    c->req_live = 1;
    c->more_to_pull = 0;
    return req;
}

/* Frees the request (its pool: a handler's guard learns it is gone). */
static void req_free(struct sk_h1conn *c)
{
    if (!c->req_live) return;
    c->req_live = 0;
    c->req_bytes = 0;
    h2o_dispose_request(&c->req);
}

void sk_h1_close(struct sk_h1conn *c, int reset)
{
    req_free(c);
    sk_conns_mem_note(c->cs, c->mem_held, 0);
    if (h2o_linklist_is_linked(&c->ready)) h2o_linklist_unlink(&c->ready);
    int fd = h2o_socket_get_fd(c->sock);
    if (reset) {
        struct linger lg = {1, 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    }
    h2o_buffer_dispose(&c->out);
    sk_conns_forget(c->cs, c);
    c->sock->data = NULL;
    h2o_socket_close(c->sock);
    free(c);
}

/* ---- answers ---------------------------------------------------------- */

static char *put(char *p, const char *s, size_t n)
{
    memcpy(p, s, n);
    return p + n;
}
#define PUT_LIT(p, lit) put((p), (lit), sizeof(lit) - 1)

static int is_connection(const h2o_header_t *h)
{
    return h->name == &H2O_TOKEN_CONNECTION->buf;
}

/* The status line and headers, as h2o's HTTP/1 wrote them (its essential
 * headers capitalised first, then the handler's, names as given). The
 * connection stays open only when the request, the handler and a known
 * length (or a chunked one) allow it. -1 when out of memory. */
static int put_head(struct sk_h1conn *c, h2o_req_t *req)
{
    const h2o_headers_t *hs = &req->res.headers;
    const h2o_iovec_t *server = &c->cs->app.ctx->globalconf->server_name;
    int keep = c->keep_alive && req->http1_is_persistent && !c->cs->draining;
    const char *reason = req->res.reason ? req->res.reason : "";
    size_t est = 160 + strlen(reason) + server->len;
    for (size_t i = 0; i < hs->size; i++) {
        const h2o_header_t *h = &hs->entries[i];
        if (is_connection(h) &&
            h2o_contains_token(h->value.base, h->value.len, H2O_STRLIT("close"), ','))
            keep = 0;
        est += h->name->len + h->value.len + 4;
    }
    if (req->res.content_length == SIZE_MAX &&
        h2o_find_header(hs, H2O_TOKEN_TRANSFER_ENCODING, -1) < 0)
        keep = 0; /* the end of the body is the close */
    c->keep_alive = keep;
    h2o_iovec_t w = h2o_buffer_reserve(&c->out, est);
    if (!w.base) return -1;
    char *p = PUT_LIT(w.base, "HTTP/1.1 ");
    int st = req->res.status >= 100 && req->res.status <= 999 ? req->res.status : 500;
    p = sk_num_u64_put(p, (uint64_t)st);
    *p++ = ' ';
    p = put(p, reason, strlen(reason));
    p = PUT_LIT(p, "\r\nDate: ");
    const char *date = sk_conns_date(c->cs);
    p = put(p, date, strlen(date));
    p = keep ? PUT_LIT(p, "\r\nConnection: keep-alive") : PUT_LIT(p, "\r\nConnection: close");
    if (req->res.content_length != SIZE_MAX) {
        p = PUT_LIT(p, "\r\nContent-Length: ");
        p = sk_num_u64_put(p, req->res.content_length);
    }
    p = PUT_LIT(p, "\r\n");
    if (server->len) {
        p = PUT_LIT(p, "Server: ");
        p = put(p, server->base, server->len);
        p = PUT_LIT(p, "\r\n");
    }
    for (size_t i = 0; i < hs->size; i++) {
        const h2o_header_t *h = &hs->entries[i];
        if (is_connection(h)) continue; /* said above */
        p = put(p, h->orig_name ? h->orig_name : h->name->base, h->name->len);
        p = PUT_LIT(p, ": ");
        p = put(p, h->value.base, h->value.len);
        p = PUT_LIT(p, "\r\n");
    }
    p = PUT_LIT(p, "\r\n");
    c->out->size += (size_t)(p - w.base);
    return 0;
}

static int out_append(struct sk_h1conn *c, const char *p, size_t n)
{
    if (!n) return 0;
    h2o_iovec_t w = h2o_buffer_reserve(&c->out, n);
    if (!w.base) return -1;
    memcpy(w.base, p, n);
    c->out->size += n;
    return 0;
}

/* The request's final output stream: the answer is copied into the
 * connection's output buffer, written when the connection steps. */
static void on_send(h2o_ostream_t *self, h2o_req_t *req, h2o_iovec_t *bufs, size_t bufcnt,
                    h2o_send_state_t state)
{
    struct sk_h1conn *c = H2O_STRUCT_FROM_MEMBER(struct sk_h1conn, ostr, self);
    int failed = 0;
    if (!c->more_to_pull) failed = put_head(c, req) < 0; /* the first part of the answer */
    for (size_t i = 0; !failed && i < bufcnt; i++)
        failed = out_append(c, bufs[i].base, bufs[i].len) < 0;
    if (failed || state == H2O_SEND_STATE_ERROR) c->keep_alive = 0;
    if (h2o_send_state_is_in_progress(state) && !failed) {
        c->more_to_pull = 1; /* h2o_proceed_response once these bytes are out */
    } else {
        c->more_to_pull = 0;
        c->state = SK_H1_ANSWERED;
    }
    if (!c->in_step) sk_conns_ready(c->cs, c);
}

/* ---- requests --------------------------------------------------------- */

/* Hands the parsed head (h, pointing into the input) and body_len bytes of
 * body after it to the handler, on a copy in the request's pool; the input
 * moves past them. */
static void dispatch(struct sk_h1conn *c, const struct sk_h1_head *h, size_t body_len)
{
    h2o_buffer_t **in = &c->sock->input;
    h2o_req_t *req = req_init(c);
    size_t total = h->len + body_len;
    char *copy = h2o_mem_alloc_pool(&req->pool, total);
    c->req_bytes = total;
    const char *base = (*in)->bytes;
    memcpy(copy, base, total);
#define AT(ptr) (copy + ((ptr)-base))
    req->input.method = req->method = h2o_iovec_init(AT(h->method), h->method_len);
    req->input.path = req->path = h2o_iovec_init(AT(h->path), h->path_len);
    req->version = 0x100 | (h->minor_version != 0);
    if (h->host) req->input.authority = req->authority = h2o_iovec_init(AT(h->host), h->host_len);
    h2o_vector_reserve(&req->pool, &req->headers, h->n_fields);
    for (size_t i = 0; i < h->n_fields; i++) {
        const struct sk_h1_field *f = &h->fields[i];
        if (!f->name) continue;
        char *name = AT(f->name);
        h2o_strtolower(name, f->name_len);
        const h2o_token_t *t = h2o_lookup_token(name, f->name_len);
        /* as h2o: the framing headers, Host, Expect and Upgrade are the
         * layer's, not the handler's */
        if (t && t->is_init_header_special) continue;
        if (t)
            h2o_add_header(&req->pool, &req->headers, t, NULL, AT(f->value), f->value_len);
        else
            h2o_add_header_by_str(&req->pool, &req->headers, name, f->name_len, 0, NULL,
                                  AT(f->value), f->value_len);
    }
    if (h->body != SK_H1_NO_BODY) req->entity = h2o_iovec_init(copy + h->len, body_len);
#undef AT
    c->keep_alive = h->keep_alive && !c->cs->draining;
    req->http1_is_persistent = c->keep_alive;
    h2o_buffer_consume(in, total);
    c->state = SK_H1_BUSY;
    c->has_begin = 0;
    h2o_handler_t *hd = c->cs->app.handler;
    hd->on_req(hd, req);
}

/* A request the layer refuses: answered by the listener's refuse hook,
 * then the connection closes; nothing that followed it is read as a
 * request. */
static void refused(struct sk_h1conn *c, const struct sk_h1_refusal *r)
{
    h2o_req_t *req = req_init(c);
    char msg[96];
    const char *m = r->message;
    if (r->status == 413) {
        snprintf(msg, sizeof msg, "request body over %llu bytes",
                 (unsigned long long)c->cs->max_body);
        m = msg;
    }
    if (r->status == 413 || r->status == 431) c->cs->too_large++;
    c->keep_alive = 0;
    req->http1_is_persistent = 0;
    h2o_buffer_consume(&c->sock->input, c->sock->input->size);
    c->state = SK_H1_BUSY;
    c->has_begin = 0;
    c->cs->app.refuse(c->cs->app.handler, req, r->status, r->code, m);
}

static int head_or_refuse(struct sk_h1conn *c, size_t len, size_t last, struct sk_h1_head *h)
{
    struct sk_h1_refusal r;
    int rc = sk_h1_parse_head(c->sock->input->bytes, len, last, c->cs->max_body, h, &r);
    if (rc == SK_EINVAL) refused(c, &r);
    return rc;
}

/* The client waits for "100 Continue" before it sends the body. */
static void maybe_continue(struct sk_h1conn *c)
{
    static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
    if (!c->continue_due) return;
    c->continue_due = 0;
    out_append(c, cont, sizeof cont - 1);
}

/* The request bytes this connection holds: its input buffer, a
 * Content-Length body it was let wait for (counted whole from its head
 * on), the copy its handler has. */
static size_t held_now(const struct sk_h1conn *c)
{
    const h2o_buffer_t *in = c->sock->input;
    size_t n = in->bytes ? in->capacity : 0;
    if (c->state == SK_H1_BODY && c->body == SK_H1_LENGTH && c->head_len + c->content_length > n)
        n = c->head_len + (size_t)c->content_length;
    return n + c->req_bytes;
}

static void mem_note(struct sk_h1conn *c)
{
    size_t now = held_now(c);
    sk_conns_mem_note(c->cs, c->mem_held, now);
    c->mem_held = now;
}

/* A body that must be waited for is let wait while the process's request
 * bytes, this one counted whole, fit under the cap; else 503 at once
 * (and the connection closes): the bytes go to requests already under
 * way and to buyers whose body came with the head. 1 when admitted. */
static int mem_admits(struct sk_h1conn *c)
{
    struct sk_conns_mem *m = c->cs->mem;
    if (!m || m->used - c->mem_held + held_now(c) <= m->max) return 1;
    c->cs->mem_refused++;
    struct sk_h1_refusal r = {503, "busy",
                              "the server holds too many unfinished request bodies; retry"};
    refused(c, &r);
    return 0;
}

/* Bytes of body the input holds complete, or -1 while more are needed
 * (or when the body was refused: c->state says). */
static int64_t body_ready(struct sk_h1conn *c)
{
    h2o_buffer_t *in = c->sock->input;
    if (c->body == SK_H1_LENGTH)
        return in->size - c->head_len >= c->content_length ? (int64_t)c->content_length : -1;
    if (in->size <= c->body_done) return -1;
    size_t n = in->size - c->body_done, tail;
    const char *why;
    int rc = sk_chunked_decode(&c->chunked, in->bytes + c->body_done, &n, &tail, &why);
    c->body_done += n;
    in->size = c->body_done + tail;
    if (rc == SK_EINVAL) {
        struct sk_h1_refusal r = {400, "bad_request", why};
        if (c->chunked.too_large) r = (struct sk_h1_refusal){413, "payload_too_large", NULL};
        refused(c, &r);
        return -1;
    }
    return rc == SK_CHUNKED_DONE ? (int64_t)(c->body_done - c->head_len) : -1;
}

/* Takes the next request from the input: 1 when one went to the handler
 * (or was refused), 0 when more bytes are needed. */
static int take(struct sk_h1conn *c)
{
    h2o_buffer_t *in = c->sock->input;
    struct sk_h1_head h;
    int fresh = 0; /* h parsed in this call: it still points into the input */
    if (c->state == SK_H1_HEAD) {
        if (in->size == 0) return 0;
        if (!c->has_begin) {
            gettimeofday(&c->begin, NULL);
            c->has_begin = 1;
            c->request_ms = now_ms(c);
        }
        int rc = head_or_refuse(c, in->size, c->last_len, &h);
        c->last_len = rc == SK_H1_INCOMPLETE ? in->size : 0;
        if (rc != SK_H1_OK) return rc == SK_EINVAL;
        if (h.body == SK_H1_NO_BODY) {
            dispatch(c, &h, 0);
            return 1;
        }
        c->state = SK_H1_BODY;
        c->head_len = h.len;
        c->body = h.body;
        c->content_length = h.content_length;
        c->body_done = h.len;
        sk_chunked_init(&c->chunked, c->cs->max_body);
        c->continue_due = h.expect_continue; /* armed: sent if the body is not all here */
        fresh = 1;
    }
    int64_t body = body_ready(c);
    if (body < 0) {
        if (c->state == SK_H1_BODY) {
            if (fresh && !mem_admits(c)) return 1;
            maybe_continue(c);
        }
        return c->state != SK_H1_BODY;
    }
    c->continue_due = 0;
    /* a body that came with its head (the common case) needs no second
     * parse: only a read since (which may move the input) does; the
     * decoding of a chunked body never touches the head's bytes */
    if (!fresh && head_or_refuse(c, c->head_len, 0, &h) != SK_H1_OK) return 1;
    dispatch(c, &h, (size_t)body);
    return 1;
}

/* The answer is out of the handler's hands: the request is freed and the
 * connection waits for the next one, or closes. 0 when it closes. */
static int finish(struct sk_h1conn *c)
{
    req_free(c);
    if (c->keep_alive && !c->cs->draining) {
        c->state = SK_H1_HEAD;
        c->wait_since_ms = now_ms(c);
        return 1;
    }
    c->state = SK_H1_LINGER;
    return 0;
}

/* Writes what the output buffer holds (one write; a partial one waits for
 * the socket to be writable). -1 when the connection broke and was
 * closed. */
static int flush(struct sk_h1conn *c)
{
    while (c->out->size > 0 && !c->write_wait) {
        /* write(2), not send(2): counted in /proc/PID/io like every
         * server's writes (the process ignores SIGPIPE) */
        ssize_t n = write(h2o_socket_get_fd(c->sock), c->out->bytes, c->out->size);
        if (n > 0) {
            int all = (size_t)n == c->out->size;
            c->bytes_out += (uint64_t)n;
            h2o_buffer_consume(&c->out, (size_t)n);
            if (all) break;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            sk_h1_close(c, 1);
            return -1;
        }
        /* the kernel took less than all: wait until it takes more */
        c->write_wait = 1;
        h2o_socket_notify_write(c->sock, on_writable);
    }
    return 0;
}

/* Read on while the client is not too far ahead of its answers. */
static void update_reading(struct sk_h1conn *c)
{
    int want = !c->peer_eof && c->sock->input->size < c->cs->max_input;
    if (want && c->read_paused) {
        c->read_paused = 0;
        h2o_socket_read_start(c->sock, on_read);
    } else if (!want && !c->read_paused && !c->peer_eof) {
        c->read_paused = 1;
        h2o_socket_read_stop(c->sock);
    }
}

/* After a step: a closing connection shuts its write side once its last
 * answer is out and closes at the client's EOF; a client that left with
 * half a request is closed. May free c. */
static void after_step(struct sk_h1conn *c)
{
    if (c->peer_eof && (c->state == SK_H1_HEAD || c->state == SK_H1_BODY))
        c->state = SK_H1_LINGER; /* nothing complete is left to answer */
    if (c->state != SK_H1_LINGER) {
        update_reading(c);
        mem_note(c);
        return;
    }
    h2o_buffer_consume(&c->sock->input, c->sock->input->size);
    mem_note(c);
    if (c->out->size > 0) return;
    if (c->peer_eof) {
        sk_h1_close(c, 0);
        return;
    }
    if (!c->linger_until_ms) {
        shutdown(h2o_socket_get_fd(c->sock), SHUT_WR);
        c->linger_until_ms = now_ms(c) + LINGER_MS;
    }
    if (c->read_paused) {
        c->read_paused = 0;
        h2o_socket_read_start(c->sock, on_read);
    }
}

/* Serves what the input holds until a request waits for its handler or
 * more bytes, or the answers pile up (1: go on once they are written). */
static int serve_input(struct sk_h1conn *c)
{
    for (;;) {
        if (c->state == SK_H1_ANSWERED && !finish(c)) return 0;
        if (c->state == SK_H1_BUSY || c->state == SK_H1_LINGER) {
            if (c->more_to_pull && c->out->size == 0 && c->state == SK_H1_BUSY) {
                c->more_to_pull = 0;
                h2o_proceed_response(&c->req);
                continue;
            }
            return 0;
        }
        if (c->out->size > OUT_HIGH) return 1;
        if (!take(c)) return 0;
    }
}

void sk_h1_step(struct sk_h1conn *c)
{
    if (c->in_step) return;
    c->in_step = 1;
    int more;
    do {
        more = serve_input(c);
        if (flush(c) < 0) return; /* closed (and freed) */
        /* all written at once: nothing else would wake this connection */
    } while (more && !c->write_wait);
    c->in_step = 0;
    after_step(c);
}

static void on_read(h2o_socket_t *sock, const char *err)
{
    struct sk_h1conn *c = sock->data;
    if (!c) return;
    if (err) {
        if (err != h2o_socket_error_closed) {
            sk_h1_close(c, 0);
            return;
        }
        /* EOF: what is complete is still answered (a client may shut its
         * side after its requests), then the connection closes */
        c->peer_eof = 1;
        h2o_socket_read_stop(sock);
    } else {
        c->bytes_in += sock->bytes_read;
    }
    sk_h1_step(c);
}

static void on_writable(h2o_socket_t *sock, const char *err)
{
    struct sk_h1conn *c = sock->data;
    if (!c) return;
    c->write_wait = 0;
    if (err) {
        sk_h1_close(c, 1);
        return;
    }
    sk_h1_step(c);
}

int sk_h1_idle(const struct sk_h1conn *c)
{
    return c->state == SK_H1_HEAD && !c->req_live && c->sock->input->size == 0 &&
           c->out->size == 0 && !c->write_wait;
}

void sk_h1_drain(struct sk_h1conn *c)
{
    if (c->state != SK_H1_HEAD) return; /* closes after its answer (cs->draining) */
    if (c->out->size == 0) {
        sk_h1_close(c, 0);
        return;
    }
    c->state = SK_H1_LINGER;
    after_step(c);
}
