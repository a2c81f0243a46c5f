/* redis_async.c - pipelined Redis client over h2o sockets + hiredis reader
 * (redis_async.h). A cluster client is a front over one such client per
 * master (redis_async_cluster.c, redis_async_int.h): every call below
 * hands it over when ar->cl is set. */
#include "redis/redis_async.h"

#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/vec.h"
#include "redis/redis_async_int.h"
#include "redis/redis_url.h"
#include "redis/script.h"

#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 2000

/* One command waiting for its answer. */
struct ar_entry {
    sk_aredis_cb cb;
    void *data;
    int64_t sent_us;
    char *evalsha; /* retained EVALSHA bytes, to resend as EVAL on NOSCRIPT */
    size_t evalsha_len;
    int script; /* script id for evalsha, -1 otherwise */
};

static int buf_reserve(struct ar_buf *b, size_t more)
{
    return SK_VEC_RESERVE(b->p, b->cap, b->len + more, 4096) ? SK_ENOMEM : 0;
}

static int buf_append(struct ar_buf *b, const char *s, size_t n)
{
    if (buf_reserve(b, n) < 0) return SK_ENOMEM;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    return 0;
}

/* RESP array of bulk strings. */
static int encode(struct ar_buf *b, int argc, const char *const *argv, const size_t *lens)
{
    char hdr[32];
    size_t start = b->len;
    int n = snprintf(hdr, sizeof hdr, "*%d\r\n", argc);
    if (buf_append(b, hdr, (size_t)n) < 0) goto oom;
    for (int i = 0; i < argc; i++) {
        size_t l = lens ? lens[i] : strlen(argv[i]);
        n = snprintf(hdr, sizeof hdr, "$%zu\r\n", l);
        if (buf_append(b, hdr, (size_t)n) < 0 || buf_append(b, argv[i], l) < 0 ||
            buf_append(b, "\r\n", 2) < 0)
            goto oom;
    }
    return 0;
oom:
    b->len = start;
    return SK_ENOMEM;
}

static int fifo_push(sk_aredis *ar, const struct ar_entry *e)
{
    if (ar->count == ar->cap) {
        size_t old = ar->cap;
        if (SK_VEC_RESERVE(ar->fifo, ar->cap, old + 1, 256)) return SK_ENOMEM;
        /* The full ring wrapped at old: its start, [0, head), moves to
         * [old, old + head) so the entries run on from head unbroken (the
         * new capacity is at least twice old). */
        if (ar->head) memcpy(ar->fifo + old, ar->fifo, ar->head * sizeof *ar->fifo);
    }
    ar->fifo[(ar->head + ar->count) % ar->cap] = *e;
    ar->count++;
    return 0;
}

static struct ar_entry fifo_pop(sk_aredis *ar)
{
    struct ar_entry e = ar->fifo[ar->head];
    ar->head = (ar->head + 1) % ar->cap;
    ar->count--;
    return e;
}

static void set_state(sk_aredis *ar, enum ar_state s)
{
    ar->state = s;
    ar->state_since_ms = sk_mono_ms();
}

/* Drops the connection: every waiting command fails (NULL reply). */
static void connection_lost(sk_aredis *ar, const char *why)
{
    snprintf(ar->errstr, sizeof ar->errstr, "redis %.64s:%d: %.80s", ar->url.host, ar->url.port,
             why);
    if (ar->sock) {
        ar->sock->data = NULL;
        h2o_socket_close(ar->sock);
        ar->sock = NULL;
    }
    redisReaderFree(ar->reader);
    ar->reader = redisReaderCreate();
    ar->out.len = 0;
    ar->write_busy = 0; /* the old socket's write callback will not reach us */
    ar->backoff_ms = ar->backoff_ms ? ar->backoff_ms * 2 : BACKOFF_MIN_MS;
    if (ar->backoff_ms > BACKOFF_MAX_MS) ar->backoff_ms = BACKOFF_MAX_MS;
    set_state(ar, AR_DOWN);
    ar->next_try_ms = sk_mono_ms() + ar->backoff_ms;
    /* Fail waiters after the state is DOWN, so callbacks that try to send
     * again are refused instead of queueing on a dead socket. */
    while (ar->count) {
        struct ar_entry e = fifo_pop(ar);
        free(e.evalsha);
        if (e.cb) e.cb(e.data, NULL);
    }
}

int sk_aredis_enqueue(sk_aredis *ar, sk_aredis_cb cb, void *data, int argc, const char *const *argv,
                      const size_t *lens, int script)
{
    size_t start = ar->out.len;
    if (encode(&ar->out, argc, argv, lens) < 0) return SK_ENOMEM;
    struct ar_entry e = {cb, data, sk_mono_us(), NULL, 0, script};
    if (script >= 0) {
        e.evalsha_len = ar->out.len - start;
        e.evalsha = malloc(e.evalsha_len);
        if (!e.evalsha) goto oom;
        memcpy(e.evalsha, ar->out.p + start, e.evalsha_len);
    }
    if (fifo_push(ar, &e) < 0) goto oom;
    return 0;
oom:
    free(e.evalsha);
    ar->out.len = start;
    return SK_ENOMEM;
}

/* Rewrites retained "*N $7 EVALSHA $40 <sha> rest" as "*N $4 EVAL $len <text> rest". */
static int resend_as_eval(sk_aredis *ar, struct ar_entry *e)
{
    const char *p = e->evalsha, *end = p + e->evalsha_len;
    const char *nl = memchr(p, '\n', (size_t)(end - p)); /* after *N */
    const char *marker = "$7\r\nEVALSHA\r\n$40\r\n";
    size_t ml = strlen(marker);
    if (!nl || (size_t)(end - nl - 1) < ml + 42 || memcmp(nl + 1, marker, ml) != 0)
        return SK_EPROTO;
    const char *rest = nl + 1 + ml + 42; /* sha + CRLF */
    const char *text = sk_script_text((enum sk_script_id)e->script);
    char hdr[48];
    int hl = snprintf(hdr, sizeof hdr, "$4\r\nEVAL\r\n$%zu\r\n", strlen(text));
    if (buf_append(&ar->out, p, (size_t)(nl + 1 - p)) < 0 ||
        buf_append(&ar->out, hdr, (size_t)hl) < 0 || buf_append(&ar->out, text, strlen(text)) < 0 ||
        buf_append(&ar->out, "\r\n", 2) < 0 || buf_append(&ar->out, rest, (size_t)(end - rest)) < 0)
        return SK_ENOMEM;
    struct ar_entry again = {e->cb, e->data, sk_mono_us(), NULL, 0, -1};
    return fifo_push(ar, &again);
}

static void on_read(h2o_socket_t *sock, const char *err)
{
    sk_aredis *ar = sock->data;
    if (!ar) return;
    if (err) {
        connection_lost(ar, err);
        return;
    }
    if (redisReaderFeed(ar->reader, sock->input->bytes, sock->input->size) != REDIS_OK) {
        connection_lost(ar, "reader failed");
        return;
    }
    h2o_buffer_consume(&sock->input, sock->input->size);
    for (;;) {
        void *rep = NULL;
        if (redisReaderGetReply(ar->reader, &rep) != REDIS_OK) {
            connection_lost(ar, "protocol error in reply");
            return;
        }
        if (!rep) break;
        if (!ar->count) {
            freeReplyObject(rep);
            connection_lost(ar, "reply without a command");
            return;
        }
        struct ar_entry e = fifo_pop(ar);
        redisReply *r = rep;
        if (e.evalsha && sk_script_is_noscript(r) && resend_as_eval(ar, &e) == 0) {
            free(e.evalsha);
            freeReplyObject(r);
            continue;
        }
        free(e.evalsha);
        ar->rtt_us = sk_mono_us() - e.sent_us;
        if (e.cb) e.cb(e.data, r);
        freeReplyObject(r);
        if (ar->state == AR_DOWN) return; /* a callback hit a failure path */
    }
    /* NOSCRIPT resends (and commands issued by callbacks) go out now */
    sk_aredis_flush(ar);
}

static void on_write(h2o_socket_t *sock, const char *err)
{
    sk_aredis *ar = sock->data;
    if (!ar) return;
    ar->write_busy = 0;
    ar->writing.len = 0;
    if (err) {
        connection_lost(ar, err);
        return;
    }
    sk_aredis_flush(ar);
}

void sk_aredis_flush(sk_aredis *ar)
{
    if (ar->cl) {
        sk_aredis_cl_flush(ar);
        return;
    }
    if (!ar->sock || ar->write_busy || ar->out.len == 0 || ar->state < AR_HANDSHAKE) return;
    struct ar_buf t = ar->writing;
    ar->writing = ar->out;
    ar->out = t;
    ar->out.len = 0;
    ar->write_busy = 1;
    h2o_iovec_t iov = h2o_iovec_init(ar->writing.p, ar->writing.len);
    h2o_socket_write(ar->sock, &iov, 1, on_write);
}

/* Handshake replies: any error aborts the connection; the last one opens it. */
static void on_handshake(void *data, redisReply *rep)
{
    sk_aredis *ar = data;
    if (!rep) return; /* connection already lost */
    if (rep->type == REDIS_REPLY_ERROR) {
        char why[128];
        snprintf(why, sizeof why, "handshake refused: %.100s", rep->str);
        connection_lost(ar, why);
    }
}

static void on_handshake_done(void *data, redisReply *rep)
{
    sk_aredis *ar = data;
    if (!rep || ar->state != AR_HANDSHAKE) return;
    set_state(ar, AR_READY);
    ar->backoff_ms = 0;
    ar->errstr[0] = 0;
    ar->connects++;
}

static void on_connect(h2o_socket_t *sock, const char *err)
{
    sk_aredis *ar = sock->data;
    if (!ar) return;
    if (err) {
        connection_lost(ar, err);
        return;
    }
    set_state(ar, AR_HANDSHAKE);
    h2o_socket_read_start(sock, on_read);
    if (ar->url.pass[0]) {
        const char *a3[] = {"AUTH", ar->url.user, ar->url.pass};
        if (ar->url.user[0])
            sk_aredis_enqueue(ar, on_handshake, ar, 3, a3, NULL, -1);
        else
            sk_aredis_enqueue(ar, on_handshake, ar, 2, (const char *const[]){"AUTH", ar->url.pass},
                              NULL, -1);
    }
    if (ar->url.db) {
        char db[16];
        snprintf(db, sizeof db, "%d", ar->url.db);
        sk_aredis_enqueue(ar, on_handshake, ar, 2, (const char *const[]){"SELECT", db}, NULL, -1);
    }
    for (int i = 0; i < SK_SCRIPT_COUNT; i++) {
        const char *a[] = {"SCRIPT", "LOAD", sk_script_text((enum sk_script_id)i)};
        sk_aredis_enqueue(ar, on_handshake, ar, 3, a, NULL, -1);
    }
    sk_aredis_enqueue(ar, on_handshake_done, ar, 1, (const char *const[]){"PING"}, NULL, -1);
    sk_aredis_flush(ar);
}

static void start_connect(sk_aredis *ar)
{
    set_state(ar, AR_CONNECTING);
    ar->sock = h2o_socket_connect(ar->loop, (struct sockaddr *)&ar->addr, ar->addrlen, on_connect);
    if (!ar->sock) {
        connection_lost(ar, "connect failed");
        return;
    }
    ar->sock->data = ar;
}

/* One single-node client for an already parsed URL (also a cluster's node). */
int sk_aredis_node_new(sk_aredis **out, h2o_loop_t *loop, const struct sk_redis_url *u,
                       int timeout_ms, char *err, size_t cap)
{
    *out = NULL;
    sk_aredis *ar = calloc(1, sizeof *ar);
    if (!ar) return SK_ENOMEM;
    ar->url = *u;
    char port[8];
    snprintf(port, sizeof port, "%d", ar->url.port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
    int gai = getaddrinfo(ar->url.host, port, &hints, &res);
    if (gai) {
        snprintf(err, cap, "cannot resolve %s: %s", ar->url.host, gai_strerror(gai));
        free(ar);
        return SK_EINVAL;
    }
    memcpy(&ar->addr, res->ai_addr, res->ai_addrlen);
    ar->addrlen = res->ai_addrlen;
    freeaddrinfo(res);
    ar->loop = loop;
    ar->timeout_ms = timeout_ms > 0 ? timeout_ms : 1000;
    ar->reader = redisReaderCreate();
    if (!ar->reader) {
        free(ar);
        return SK_ENOMEM;
    }
    snprintf(ar->errstr, sizeof ar->errstr, "connecting");
    start_connect(ar);
    *out = ar;
    return 0;
}

int sk_aredis_new(sk_aredis **out, h2o_loop_t *loop, const char *url, int timeout_ms, char *err,
                  size_t cap)
{
    *out = NULL;
    struct sk_redis_url u;
    if (sk_redis_url_parse(&u, url, strlen(url), err, cap) < 0) return SK_EINVAL;
    if (!u.cluster) return sk_aredis_node_new(out, loop, &u, timeout_ms, err, cap);
    sk_aredis *ar = calloc(1, sizeof *ar);
    if (!ar) return SK_ENOMEM;
    ar->url = u;
    ar->loop = loop;
    ar->timeout_ms = timeout_ms > 0 ? timeout_ms : 1000;
    int rc = sk_aredis_cl_new(ar);
    if (rc < 0) {
        free(ar);
        return rc;
    }
    *out = ar;
    return 0;
}

void sk_aredis_free(sk_aredis *ar)
{
    if (!ar) return;
    if (ar->cl) {
        sk_aredis_cl_free(ar);
        return;
    }
    connection_lost(ar, "closed");
    redisReaderFree(ar->reader);
    free(ar->out.p);
    free(ar->writing.p);
    free(ar->fifo);
    free(ar);
}

int sk_aredis_ready(const sk_aredis *ar)
{
    return ar->cl ? sk_aredis_cl_ready(ar) : ar->state == AR_READY;
}
size_t sk_aredis_pending(const sk_aredis *ar)
{
    return ar->cl ? sk_aredis_cl_pending(ar) : ar->count;
}
const char *sk_aredis_errstr(const sk_aredis *ar)
{
    if (ar->cl) return sk_aredis_cl_errstr(ar);
    return ar->errstr[0] ? ar->errstr : "ready";
}
int64_t sk_aredis_rtt_us(const sk_aredis *ar)
{
    return ar->rtt_us;
}
unsigned sk_aredis_connects(const sk_aredis *ar)
{
    return ar->cl ? sk_aredis_cl_connects(ar) : ar->connects;
}

int sk_aredis_command(sk_aredis *ar, sk_aredis_cb cb, void *data, int argc, const char *const *argv,
                      const size_t *lens)
{
    if (ar->cl) return sk_aredis_cl_submit(ar, argc, argv, lens, -1, cb, data);
    if (ar->state != AR_READY) return SK_EIO;
    return sk_aredis_enqueue(ar, cb, data, argc, argv, lens, -1);
}

int sk_aredis_eval(sk_aredis *ar, enum sk_script_id id, int nkeys, const char *const *keys,
                   int nargs, const char *const *args, const size_t *arglens, sk_aredis_cb cb,
                   void *data)
{
    if (!ar->cl && ar->state != AR_READY) return SK_EIO;
    if (nkeys < 0 || nargs < 0 || nkeys > 16) return SK_EINVAL;
    int argc = 3 + nkeys + nargs;
    const char *sv[64];
    size_t sl[64];
    const char **argv = argc <= 64 ? sv : malloc(sizeof *argv * (size_t)argc);
    size_t *lens = argc <= 64 ? sl : malloc(sizeof *lens * (size_t)argc);
    int rc = SK_ENOMEM;
    if (argv && lens) {
        char nk[16];
        sk_script_fill_argv(id, nkeys, keys, nargs, args, arglens, argv, lens, nk);
        rc = ar->cl ? sk_aredis_cl_submit(ar, argc, argv, lens, (int)id, cb, data)
                    : sk_aredis_enqueue(ar, cb, data, argc, argv, lens, (int)id);
    }
    if (argv != sv) free(argv);
    if (lens != sl) free(lens);
    return rc;
}

void sk_aredis_tick(sk_aredis *ar)
{
    if (ar->cl) {
        sk_aredis_cl_tick(ar);
        return;
    }
    int64_t now = sk_mono_ms();
    switch (ar->state) {
    case AR_DOWN:
        if (now >= ar->next_try_ms) start_connect(ar);
        break;
    case AR_CONNECTING:
    case AR_HANDSHAKE:
        if (now - ar->state_since_ms > ar->timeout_ms) connection_lost(ar, "connect timed out");
        break;
    case AR_READY:
        if (ar->count && (sk_mono_us() - ar->fifo[ar->head].sent_us) / 1000 > ar->timeout_ms)
            connection_lost(ar, "reply timed out");
        break;
    }
}
