/* redis_async.c - pipelined Redis client over h2o sockets + hiredis reader,
 * and its Redis Cluster front (one such client per master). */
#include "redis/redis_async.h"

#include <netdb.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core/clock.h"
#include "core/error.h"
#include "redis/redis_cluster.h"
#include "redis/redis_url.h"
#include "redis/script.h"

#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 2000

enum ar_state { AR_DOWN, AR_CONNECTING, AR_HANDSHAKE, AR_READY };

struct ar_buf {
    char *p;
    size_t len, cap;
};

/* One command waiting for its answer. */
struct ar_entry {
    sk_aredis_cb cb;
    void *data;
    int64_t sent_us;
    char *evalsha; /* retained EVALSHA bytes, to resend as EVAL on NOSCRIPT */
    size_t evalsha_len;
    int script; /* script id for evalsha, -1 otherwise */
};

struct sk_aredis {
    h2o_loop_t *loop;
    h2o_socket_t *sock;
    enum ar_state state;
    struct sk_redis_url url;
    struct sockaddr_storage addr;
    socklen_t addrlen;
    int timeout_ms;
    redisReader *reader;
    struct ar_buf out, writing; /* queued / handed to h2o (must live until on_write) */
    int write_busy;
    struct ar_entry *fifo; /* ring buffer */
    size_t head, count, cap;
    int64_t state_since_ms, next_try_ms;
    int backoff_ms;
    int64_t rtt_us;
    unsigned connects;
    char errstr[160];
    struct ar_cluster *cl; /* non-NULL: a cluster front, the fields above unused */
};

static int cl_new(sk_aredis *ar);
static void cl_free(sk_aredis *ar);
static int cl_submit(sk_aredis *ar, int argc, const char *const *argv, const size_t *lens,
                     int script, sk_aredis_cb cb, void *data);
static int cl_ready(const sk_aredis *ar);
static size_t cl_pending(const sk_aredis *ar);
static const char *cl_errstr(const sk_aredis *ar);
static unsigned cl_connects(const sk_aredis *ar);
static void cl_flush(sk_aredis *ar);
static void cl_tick(sk_aredis *ar);

static int buf_reserve(struct ar_buf *b, size_t more)
{
    if (b->len + more <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return SK_ENOMEM;
    b->p = p;
    b->cap = cap;
    return 0;
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
        size_t cap = ar->cap ? ar->cap * 2 : 256;
        struct ar_entry *f = malloc(cap * sizeof *f);
        if (!f) return SK_ENOMEM;
        for (size_t i = 0; i < ar->count; i++)
            f[i] = ar->fifo[(ar->head + i) % ar->cap];
        free(ar->fifo);
        ar->fifo = f;
        ar->head = 0;
        ar->cap = cap;
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

static int enqueue(sk_aredis *ar, sk_aredis_cb cb, void *data, int argc, const char *const *argv,
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
        cl_flush(ar);
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
            enqueue(ar, on_handshake, ar, 3, a3, NULL, -1);
        else
            enqueue(ar, on_handshake, ar, 2, (const char *const[]){"AUTH", ar->url.pass}, NULL, -1);
    }
    if (ar->url.db) {
        char db[16];
        snprintf(db, sizeof db, "%d", ar->url.db);
        enqueue(ar, on_handshake, ar, 2, (const char *const[]){"SELECT", db}, NULL, -1);
    }
    for (int i = 0; i < SK_SCRIPT_COUNT; i++) {
        const char *a[] = {"SCRIPT", "LOAD", sk_script_text((enum sk_script_id)i)};
        enqueue(ar, on_handshake, ar, 3, a, NULL, -1);
    }
    enqueue(ar, on_handshake_done, ar, 1, (const char *const[]){"PING"}, NULL, -1);
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
static int node_new(sk_aredis **out, h2o_loop_t *loop, const struct sk_redis_url *u, int timeout_ms,
                    char *err, size_t cap)
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
    if (!u.cluster) return node_new(out, loop, &u, timeout_ms, err, cap);
    sk_aredis *ar = calloc(1, sizeof *ar);
    if (!ar) return SK_ENOMEM;
    ar->url = u;
    ar->loop = loop;
    ar->timeout_ms = timeout_ms > 0 ? timeout_ms : 1000;
    int rc = cl_new(ar);
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
        cl_free(ar);
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
    return ar->cl ? cl_ready(ar) : ar->state == AR_READY;
}
size_t sk_aredis_pending(const sk_aredis *ar)
{
    return ar->cl ? cl_pending(ar) : ar->count;
}
const char *sk_aredis_errstr(const sk_aredis *ar)
{
    if (ar->cl) return cl_errstr(ar);
    return ar->errstr[0] ? ar->errstr : "ready";
}
int64_t sk_aredis_rtt_us(const sk_aredis *ar)
{
    return ar->rtt_us;
}
unsigned sk_aredis_connects(const sk_aredis *ar)
{
    return ar->cl ? cl_connects(ar) : ar->connects;
}

int sk_aredis_command(sk_aredis *ar, sk_aredis_cb cb, void *data, int argc, const char *const *argv,
                      const size_t *lens)
{
    if (ar->cl) return cl_submit(ar, argc, argv, lens, -1, cb, data);
    if (ar->state != AR_READY) return SK_EIO;
    return enqueue(ar, cb, data, argc, argv, lens, -1);
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
        rc = ar->cl ? cl_submit(ar, argc, argv, lens, (int)id, cb, data)
                    : enqueue(ar, cb, data, argc, argv, lens, (int)id);
    }
    if (argv != sv) free(argv);
    if (lens != sl) free(lens);
    return rc;
}

void sk_aredis_tick(sk_aredis *ar)
{
    if (ar->cl) {
        cl_tick(ar);
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

/* ---- Redis Cluster --------------------------------------------------------
 * A cluster client is a front: one ordinary single-node client per master
 * (connect, handshake with SCRIPT LOAD, NOSCRIPT resend, timeouts and
 * reconnects are theirs), a slot map, and a wrapper per command that keeps
 * a copy of argv so a MOVED/ASK/TRYAGAIN answer can be resent with the same
 * callback. The map is read with a short blocking CLUSTER SLOTS at start and
 * on the next tick after a topology hint (MOVED, TRYAGAIN, a lost node). */

#define CL_REFRESH_MIN_MS 100  /* between two CLUSTER SLOTS reads */
#define CL_REFRESH_FAIL_MS 500 /* after a failed read: the loop must not spin on it */
#define CL_RETRY_MIN_MS 10
#define CL_RETRY_MAX_MS 200

struct cl_cmd {
    sk_aredis *front;
    sk_aredis *node; /* where it was last sent (for rtt) */
    sk_aredis_cb cb;
    void *data;
    int argc, script, slot, hops, retries;
    int ask_node;   /* >= 0: ASKING + the command go there next */
    int64_t due_ms; /* parked: not before */
    struct cl_cmd *next;
    const char **argv;
    size_t *lens;
};

struct ar_cluster {
    struct sk_cluster_map map;
    sk_aredis *node[SK_CLUSTER_MAX_NODES]; /* by map node index, created on first need */
    struct cl_cmd *parked;                 /* waiting for a tick */
    size_t nparked;
    int stale, prefer, closing;
    int64_t next_refresh_ms;
    struct sk_cluster_stats stats;
    char errstr[256];
};

/* The client of node i, created (connecting) when missing; NULL on failure. */
static sk_aredis *cl_node(sk_aredis *ar, int i)
{
    struct ar_cluster *cl = ar->cl;
    if (i < 0 || i >= cl->map.nnodes) return NULL;
    if (cl->node[i]) return cl->node[i];
    struct sk_redis_url u = ar->url; /* credentials of the cluster URL */
    snprintf(u.host, sizeof u.host, "%s", cl->map.nodes[i].host);
    u.port = cl->map.nodes[i].port;
    u.cluster = 0;
    u.db = 0;
    u.nseeds = 1;
    char err[128];
    if (node_new(&cl->node[i], ar->loop, &u, ar->timeout_ms, err, sizeof err) < 0) {
        snprintf(cl->errstr, sizeof cl->errstr, "redis cluster node %.64s:%d: %.80s", u.host,
                 u.port, err);
        cl->stats.node_errors++;
        return NULL;
    }
    return cl->node[i];
}

/* CLUSTER SLOTS of one node applied to the map; 0 or -1 (reason in errstr). */
static int cl_fetch(sk_aredis *ar, const char *host, int port)
{
    struct ar_cluster *cl = ar->cl;
    int ms = ar->timeout_ms < 1000 ? ar->timeout_ms : 1000;
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    redisContext *c = redisConnectWithTimeout(host, port, tv);
    redisReply *r = NULL;
    int rc = -1;
    if (!c || c->err) {
        snprintf(cl->errstr, sizeof cl->errstr, "redis cluster %.64s:%d: %.80s", host, port,
                 c ? c->errstr : "out of memory");
        goto out;
    }
    redisSetTimeout(c, tv);
    if (ar->url.pass[0]) {
        r = ar->url.user[0] ? redisCommand(c, "AUTH %s %s", ar->url.user, ar->url.pass)
                            : redisCommand(c, "AUTH %s", ar->url.pass);
        if (!r || r->type == REDIS_REPLY_ERROR) {
            snprintf(cl->errstr, sizeof cl->errstr, "redis cluster %.64s:%d: AUTH refused", host,
                     port);
            goto out;
        }
        freeReplyObject(r);
    }
    r = redisCommand(c, "CLUSTER SLOTS");
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
        sk_cluster_map_apply(&cl->map, r, host) == 0) {
        rc = 0;
    } else {
        snprintf(cl->errstr, sizeof cl->errstr, "redis cluster %.64s:%d: CLUSTER SLOTS: %.64s",
                 host, port, r && r->type == REDIS_REPLY_ERROR ? r->str : "no map");
    }
out:
    if (r) freeReplyObject(r);
    if (c) redisFree(c);
    return rc;
}

/* Re-reads the map: the node that sent the last MOVED first (it has the new
 * view), then known masters, then the seeds. Opens clients for new masters. */
static void cl_refresh(sk_aredis *ar)
{
    struct ar_cluster *cl = ar->cl;
    int ok = 0;
    if (cl->prefer >= 0 && cl->prefer < cl->map.nnodes)
        ok = cl_fetch(ar, cl->map.nodes[cl->prefer].host, cl->map.nodes[cl->prefer].port) == 0;
    for (int i = 0; !ok && i < cl->map.nnodes; i++)
        if (i != cl->prefer && sk_cluster_map_is_master(&cl->map, i))
            ok = cl_fetch(ar, cl->map.nodes[i].host, cl->map.nodes[i].port) == 0;
    for (int i = 0; !ok && i < ar->url.nseeds; i++)
        ok = cl_fetch(ar, ar->url.seeds[i].host, ar->url.seeds[i].port) == 0;
    cl->next_refresh_ms = sk_mono_ms() + (ok ? CL_REFRESH_MIN_MS : CL_REFRESH_FAIL_MS);
    if (!ok) return;
    cl->stale = 0;
    cl->prefer = -1;
    cl->stats.refreshes++;
    for (int i = 0; i < cl->map.nnodes; i++)
        if (sk_cluster_map_is_master(&cl->map, i)) cl_node(ar, i);
}

/* The ready node c goes to (its ASK target, its slot's master, or any
 * ready master when keyless), or NULL. */
static sk_aredis *cl_target(sk_aredis *ar, const struct cl_cmd *c)
{
    struct ar_cluster *cl = ar->cl;
    sk_aredis *n = NULL;
    if (c->ask_node >= 0) {
        n = cl_node(ar, c->ask_node);
    } else if (c->slot >= 0) {
        n = cl_node(ar, sk_cluster_map_owner(&cl->map, c->slot));
    } else {
        for (int i = 0; i < cl->map.nnodes; i++)
            if (sk_cluster_map_is_master(&cl->map, i) && cl->node[i] &&
                cl->node[i]->state == AR_READY)
                return cl->node[i];
    }
    return n && n->state == AR_READY ? n : NULL;
}

static void cl_on_reply(void *data, redisReply *rep);

/* Hands c to its node (ASKING first after an ASK); SK_EIO when that node
 * is not ready. */
static int cl_send(struct cl_cmd *c)
{
    sk_aredis *n = cl_target(c->front, c);
    if (!n) return SK_EIO;
    if (c->ask_node >= 0 &&
        enqueue(n, NULL, NULL, 1, (const char *const[]){"ASKING"}, NULL, -1) < 0)
        return SK_ENOMEM;
    int rc = enqueue(n, cl_on_reply, c, c->argc, c->argv, c->lens, c->script);
    if (rc < 0) return rc; /* a lone ASKING is harmless: its answer is ignored */
    c->ask_node = -1;
    c->node = n;
    sk_aredis_flush(n);
    return 0;
}

static void cl_deliver(struct cl_cmd *c, redisReply *rep)
{
    sk_aredis *ar = c->front;
    if (rep && c->node) ar->rtt_us = c->node->rtt_us;
    sk_aredis_cb cb = c->cb;
    void *data = c->data;
    free(c);
    if (cb) cb(data, rep);
}

/* Waits for a tick (bounded); out of waits: fails with NULL. */
static void cl_park(struct cl_cmd *c)
{
    struct ar_cluster *cl = c->front->cl;
    if (cl->closing || c->retries >= SK_CLUSTER_MAX_RETRIES) {
        cl_deliver(c, NULL);
        return;
    }
    int wait = CL_RETRY_MIN_MS << (c->retries < 5 ? c->retries : 5);
    if (wait > CL_RETRY_MAX_MS) wait = CL_RETRY_MAX_MS;
    c->retries++;
    cl->stats.retries++;
    /* A wait ends a run of hops: MAX_REDIRECTS bounds redirections in a row
     * (a loop), MAX_RETRIES bounds the waits. Without the reset a slot in
     * migration (ASK, then TRYAGAIN on the target: a key of the script, e.g.
     * the idempotency hash, exists nowhere; wait; ASK ...) spent a hop per
     * wait and handed the 6th ASK to the caller after five rounds (~0.3 s
     * at the shortest), long before the retry budget ran out (purchases
     * answered 503). */
    c->hops = 0;
    c->due_ms = sk_mono_ms() + wait;
    c->next = cl->parked;
    cl->parked = c;
    cl->nparked++;
}

/* Every MOVED/ASK/TRYAGAIN/CLUSTERDOWN met, followed or not, for /metrics
 * (the only window an operator has on a reshard or failover as serve sees it). */
static atomic_int cluster_used;
static atomic_ullong redirects[SK_AREDIS_REDIRECT_COUNT];

static void count_redirect(enum sk_aredis_redirect k)
{
    atomic_fetch_add_explicit(&redirects[k], 1, memory_order_relaxed);
}

static void count_answer(int kind, const char *err)
{
    if (kind == SK_CLUSTER_MOVED)
        count_redirect(SK_AREDIS_MOVED);
    else if (kind == SK_CLUSTER_ASK)
        count_redirect(SK_AREDIS_ASK);
    else if (!strncmp(err, "TRYAGAIN", 8))
        count_redirect(SK_AREDIS_TRYAGAIN);
    else if (!strncmp(err, "CLUSTERDOWN", 11))
        count_redirect(SK_AREDIS_CLUSTERDOWN);
}

int sk_aredis_cluster_used(void)
{
    return atomic_load_explicit(&cluster_used, memory_order_relaxed);
}

uint64_t sk_aredis_redirects(enum sk_aredis_redirect kind)
{
    if ((unsigned)kind >= SK_AREDIS_REDIRECT_COUNT) return 0;
    return atomic_load_explicit(&redirects[kind], memory_order_relaxed);
}

static void cl_on_reply(void *data, redisReply *rep)
{
    struct cl_cmd *c = data;
    struct ar_cluster *cl = c->front->cl;
    if (!rep) {
        cl->stale = 1; /* a lost node may mean a failover */
        cl_deliver(c, NULL);
        return;
    }
    if (rep->type == REDIS_REPLY_ERROR && rep->str && !cl->closing) {
        int slot, port;
        char host[64];
        int kind = sk_cluster_parse_redirect(rep->str, &slot, host, sizeof host, &port);
        count_answer(kind, rep->str);
        if (kind && c->hops < SK_CLUSTER_MAX_REDIRECTS) {
            int i = sk_cluster_map_node(&cl->map, host, port);
            if (i >= 0) {
                c->hops++;
                if (kind == SK_CLUSTER_MOVED) {
                    /* never ran: resend; re-read the whole map at the next tick */
                    sk_cluster_map_set(&cl->map, slot, i);
                    cl->stale = 1;
                    cl->prefer = i;
                    cl->stats.moved++;
                } else {
                    c->ask_node = i;
                    cl->stats.ask++;
                }
                if (cl_send(c) < 0) cl_park(c); /* e.g. a new master still connecting */
                return;
            }
        } else if (!kind && sk_cluster_is_transient(rep->str) &&
                   c->retries < SK_CLUSTER_MAX_RETRIES) {
            cl->stale = 1;
            cl_park(c);
            return;
        }
    }
    cl_deliver(c, rep); /* out of hops or waits: the caller sees the error */
}

static int cl_submit(sk_aredis *ar, int argc, const char *const *argv, const size_t *lens,
                     int script, sk_aredis_cb cb, void *data)
{
    struct ar_cluster *cl = ar->cl;
    if (cl->closing || argc <= 0) return SK_EIO;
    struct cl_cmd probe = {
        .front = ar, .slot = sk_cluster_command_slot(argc, argv, lens), .ask_node = -1};
    if (!cl_target(ar, &probe)) return SK_EIO; /* cb will not run, as for one node */
    size_t bytes = 0;
    for (int i = 0; i < argc; i++)
        bytes += lens ? lens[i] : strlen(argv[i]);
    struct cl_cmd *c = malloc(sizeof *c + (size_t)argc * (sizeof(char *) + sizeof(size_t)) + bytes);
    if (!c) return SK_ENOMEM;
    *c = probe;
    c->cb = cb;
    c->data = data;
    c->argc = argc;
    c->script = script;
    c->argv = (const char **)(c + 1);
    c->lens = (size_t *)(c->argv + argc);
    char *p = (char *)(c->lens + argc);
    for (int i = 0; i < argc; i++) {
        size_t l = lens ? lens[i] : strlen(argv[i]);
        memcpy(p, argv[i], l);
        c->argv[i] = p;
        c->lens[i] = l;
        p += l;
    }
    int rc = cl_send(c);
    if (rc < 0) free(c);
    return rc;
}

static int cl_new(sk_aredis *ar)
{
    struct ar_cluster *cl = calloc(1, sizeof *cl);
    if (!cl) return SK_ENOMEM;
    sk_cluster_map_init(&cl->map);
    cl->prefer = -1;
    ar->cl = cl;
    atomic_store_explicit(&cluster_used, 1, memory_order_relaxed); /* /metrics shows them */
    snprintf(cl->errstr, sizeof cl->errstr, "connecting");
    /* an unreachable cluster is not fatal: serve answers 503 and ticks retry */
    cl_refresh(ar);
    if (!cl->map.loaded) cl->stale = 1;
    return 0;
}

static void cl_free(sk_aredis *ar)
{
    struct ar_cluster *cl = ar->cl;
    cl->closing = 1;
    while (cl->parked) {
        struct cl_cmd *c = cl->parked;
        cl->parked = c->next;
        cl->nparked--;
        cl_deliver(c, NULL);
    }
    for (int i = 0; i < SK_CLUSTER_MAX_NODES; i++)
        sk_aredis_free(cl->node[i]); /* fails its waiters: their callbacks run */
    free(cl);
    free(ar);
}

static int cl_ready(const sk_aredis *ar)
{
    const struct ar_cluster *cl = ar->cl;
    if (!cl->map.loaded) return 0;
    int masters = 0;
    for (int i = 0; i < cl->map.nnodes; i++) {
        if (!sk_cluster_map_is_master(&cl->map, i)) continue;
        if (!cl->node[i] || cl->node[i]->state != AR_READY) return 0;
        masters++;
    }
    return masters > 0;
}

static size_t cl_pending(const sk_aredis *ar)
{
    const struct ar_cluster *cl = ar->cl;
    size_t n = cl->nparked;
    for (int i = 0; i < SK_CLUSTER_MAX_NODES; i++)
        if (cl->node[i]) n += cl->node[i]->count;
    return n;
}

static const char *cl_errstr(const sk_aredis *ar)
{
    const struct ar_cluster *cl = ar->cl;
    if (!cl->map.loaded) return cl->errstr;
    for (int i = 0; i < cl->map.nnodes; i++) {
        if (!sk_cluster_map_is_master(&cl->map, i)) continue;
        if (!cl->node[i]) return cl->errstr;
        if (cl->node[i]->state != AR_READY) return sk_aredis_errstr(cl->node[i]);
    }
    return "ready";
}

static unsigned cl_connects(const sk_aredis *ar)
{
    const struct ar_cluster *cl = ar->cl;
    unsigned n = 0;
    for (int i = 0; i < SK_CLUSTER_MAX_NODES; i++)
        if (cl->node[i]) n += cl->node[i]->connects;
    return n;
}

static void cl_flush(sk_aredis *ar)
{
    for (int i = 0; i < SK_CLUSTER_MAX_NODES; i++)
        if (ar->cl->node[i]) sk_aredis_flush(ar->cl->node[i]);
}

static void cl_tick(sk_aredis *ar)
{
    struct ar_cluster *cl = ar->cl;
    for (int i = 0; i < SK_CLUSTER_MAX_NODES; i++) {
        if (!cl->node[i]) continue;
        sk_aredis_tick(cl->node[i]);
        /* a master that is down may have been replaced */
        if (cl->node[i]->state == AR_DOWN && sk_cluster_map_is_master(&cl->map, i)) cl->stale = 1;
    }
    int64_t now = sk_mono_ms();
    if (cl->stale && now >= cl->next_refresh_ms) cl_refresh(ar);
    struct cl_cmd *list = cl->parked;
    cl->parked = NULL;
    cl->nparked = 0;
    while (list) {
        struct cl_cmd *c = list;
        list = c->next;
        if (c->due_ms > now) {
            c->next = cl->parked;
            cl->parked = c;
            cl->nparked++;
        } else if (cl_send(c) < 0) {
            cl_park(c);
        }
    }
}

/* ---- fan-out ------------------------------------------------------------- */

void sk_fanout_begin(struct sk_fanout *f, void (*done)(struct sk_fanout *f))
{
    f->pending = 1; /* held until sk_fanout_end: no early done while sending */
    f->failed = 0;
    f->done = done;
}

void sk_fanout_sent(struct sk_fanout *f, int send_rc)
{
    if (send_rc < 0)
        f->failed = 1;
    else
        f->pending++;
}

void sk_fanout_answered(struct sk_fanout *f)
{
    if (--f->pending == 0) f->done(f);
}

void sk_fanout_end(struct sk_fanout *f)
{
    sk_fanout_answered(f);
}
