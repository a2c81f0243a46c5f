/* redis_async.c - pipelined Redis client over h2o sockets + hiredis reader
 * (redis_async.h): TCP or a unix socket, scripts as FCALL of the library or
 * EVALSHA, WAIT after confirmed writes. A cluster client is a front over
 * one such client per master (redis_async_cluster.c), a Sentinel client a
 * front over the master's (redis_async_sentinel.c; redis_async_int.h):
 * every call below hands it over when ar->cl or ar->sn is set. */
#include "redis/redis_async.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "core/resolve.h"
#include "core/vec.h"
#include "redis/handshake.h"
#include "redis/redis_async_int.h"
#include "redis/redis_url.h"
#include "redis/resp.h"
#include "redis/script.h"

#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 2000
#define SYNC_TIMEOUT_MS 100

/* One command waiting for its answer. */
struct ar_entry {
    sk_aredis_cb cb;
    void *data;
    int64_t sent_us;
    int64_t wait_from_us;       /* its answer is due from here (a blocking read ahead ended) */
    int64_t due_us;             /* ... and late after this: the connection is failed */
    void *kept;                 /* a script call's copy (kept.argv): resent as EVAL when missing */
    struct sk_aredis_args args; /* its arguments, EVALSHA <sha> numkeys ... */
    int script;                 /* script id for kept, -1 otherwise */
    int confirm;                /* the answer waits for the next WAIT */
};

/* An answer of a confirmed command, held until the WAIT after it answers. */
struct ar_held {
    sk_aredis_cb cb;
    void *data;
    redisReply *rep;
    int64_t rtt_us;
};

static int buf_reserve(struct ar_buf *b, size_t more)
{
    return SK_VEC_RESERVE(b->p, b->cap, b->len + more, 4096) ? SK_ENOMEM : 0;
}

/* RESP array of bulk strings, written in place (resp.h). */
static int encode(struct ar_buf *b, int argc, const char *const *argv, const size_t *lens)
{
    size_t n = sk_resp_cmd_len(argc, argv, lens);
    if (buf_reserve(b, n) < 0) return SK_ENOMEM;
    b->len = (size_t)(sk_resp_cmd_put(b->p + b->len, argc, argv, lens) - b->p);
    return 0;
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

/* The single-node client behind ar: a Sentinel front's master while it
 * is ready (else NULL), or ar itself (a cluster front too: the answer it
 * delivers sets its rtt_us and acked). */
static sk_aredis *node_of(const sk_aredis *ar)
{
    return ar->sn ? sk_aredis_sn_master(ar) : (sk_aredis *)ar;
}

/* Closes *s, whose callbacks will not reach the client any more. */
static void sock_drop(h2o_socket_t **s)
{
    if (!*s) return;
    (*s)->data = NULL;
    h2o_socket_close(*s);
    *s = NULL;
}

/* Hands every answer held for a WAIT over: with WAIT's count acked, or
 * (acked < 0: the connection is lost) as none. */
static void release_held(sk_aredis *ar, int acked)
{
    size_t n = ar->nheld;
    struct ar_held *h = ar->held;
    /* taken out first: a callback may send, or even lose the connection */
    ar->held = NULL;
    ar->nheld = ar->capheld = 0;
    for (size_t i = 0; i < n; i++) {
        ar->acked = acked;
        if (acked >= 0) ar->rtt_us = h[i].rtt_us;
        if (h[i].cb) h[i].cb(h[i].data, acked >= 0 ? h[i].rep : NULL);
        freeReplyObject(h[i].rep);
    }
    ar->acked = -1;
    free(h);
}

/* Drops the connection: every waiting command fails (NULL reply, rc for
 * sk_aredis_failed). A working connection lost is made again at the next
 * tick; a failed attempt waits a backoff that doubles. */
static void connection_failed(sk_aredis *ar, const char *why, int rc)
{
    snprintf(ar->errstr, sizeof ar->errstr, "redis %.64s:%d: %.80s", ar->url.host, ar->url.port,
             why);
    int was_ready = ar->state == AR_READY;
    /* an operator sees each loss of a working connection once, not every
     * failed attempt after it */
    if (was_ready) sk_log(SK_LOG_WARN, "%s; reconnecting", ar->errstr);
    ar->fail_rc = rc;
    if (ar->sock && ar->addr.ss_family != AF_UNIX) {
        /* Closed with a reset: what the kernel holds unsent (commands
         * written into a partition) is discarded. After a plain close the
         * orphaned socket would deliver it when the path heals, and
         * commands already failed to their callers would run seconds
         * later (a purchase answered 503, the worker's read). */
        struct linger lg = {.l_onoff = 1, .l_linger = 0};
        if (setsockopt(h2o_socket_get_fd(ar->sock), SOL_SOCKET, SO_LINGER, &lg, sizeof lg))
            sk_log(SK_LOG_WARN,
                   "redis %.64s:%d: cannot close with a reset (%s): commands written "
                   "before this failure may still reach Redis",
                   ar->url.host, ar->url.port, strerror(errno));
    }
    sock_drop(&ar->sock);
    sock_drop(&ar->rsock); /* a name being resolved: its thread's answer is dropped */
    redisReaderFree(ar->reader);
    ar->reader = redisReaderCreate();
    ar->out.len = 0;
    ar->woff = 0;
    ar->write_busy = 0; /* the old socket's write callback will not reach us */
    if (was_ready) {
        ar->backoff_ms = 0;
    } else {
        ar->backoff_ms = ar->backoff_ms ? ar->backoff_ms * 2 : BACKOFF_MIN_MS;
        if (ar->backoff_ms > BACKOFF_MAX_MS) ar->backoff_ms = BACKOFF_MAX_MS;
    }
    set_state(ar, AR_DOWN);
    ar->next_try_ms = sk_mono_ms() + ar->backoff_ms;
    ar->block_until_us = 0;
    ar->unwaited = 0;
    ar->wait_inflight = 0;
    ar->fn_reloading = 0;
    ar->acked = -1;
    /* Fail waiters after the state is DOWN, so callbacks that try to send
     * again are refused instead of queueing on a dead socket. Held answers
     * first: their commands ran, but no WAIT vouched for them. */
    release_held(ar, -1);
    while (ar->count) {
        struct ar_entry e = fifo_pop(ar);
        free(e.kept);
        if (e.cb) e.cb(e.data, NULL);
    }
}

static void connection_lost(sk_aredis *ar, const char *why)
{
    connection_failed(ar, why, SK_EIO);
}

redisReply *sk_aredis_take(redisReply *rep)
{
    if (!rep) return NULL;
    redisReply *mine = malloc(sizeof *mine);
    if (!mine) return NULL;
    *mine = *rep;
    /* the shell: a nil without contents, which freeReplyObject frees alone */
    memset(rep, 0, sizeof *rep);
    rep->type = REDIS_REPLY_NIL;
    return mine;
}

/* How long an XREAD/XREADGROUP may block (its BLOCK argument, before
 * STREAMS), 0 for any other command: its answer may come that much later. */
static int64_t block_ms(int argc, const char *const *argv, const size_t *lens)
{
    if (argc < 4 || (argv[0][0] != 'X' && argv[0][0] != 'x')) return 0;
    size_t l0 = lens ? lens[0] : strlen(argv[0]);
    if (!((l0 == 5 && !strncasecmp(argv[0], "XREAD", 5)) ||
          (l0 == 10 && !strncasecmp(argv[0], "XREADGROUP", 10))))
        return 0;
    for (int i = 1; i + 1 < argc; i++) {
        size_t l = lens ? lens[i] : strlen(argv[i]);
        if (l == 7 && !strncasecmp(argv[i], "STREAMS", 7)) break;
        if (l == 5 && !strncasecmp(argv[i], "BLOCK", 5)) {
            char n[24];
            size_t nl = lens ? lens[i + 1] : strlen(argv[i + 1]);
            if (nl == 0 || nl >= sizeof n) return 0;
            memcpy(n, argv[i + 1], nl);
            n[nl] = 0;
            long long v = strtoll(n, NULL, 10);
            /* BLOCK 0 waits for ever: as long as a day, for the bookkeeping */
            return v == 0 ? 86400000 : v > 0 ? v : 0;
        }
    }
    return 0;
}

/* When e, sent now, is due: behind any blocking read ahead of it on this
 * connection (the server answers in order), plus the reply timeout (and
 * the WAITs it may wait behind). */
static void set_due(sk_aredis *ar, struct ar_entry *e, int64_t blocks_ms)
{
    int64_t now = e->sent_us;
    if (blocks_ms > 0 && now + blocks_ms * 1000 > ar->block_until_us)
        ar->block_until_us = now + blocks_ms * 1000;
    e->wait_from_us = ar->block_until_us > now ? ar->block_until_us : now;
    int64_t allow =
        ar->timeout_ms + (ar->opts.sync_replicas > 0 ? 2 * ar->opts.sync_timeout_ms : 0);
    e->due_us = e->wait_from_us + allow * 1000;
}

void *sk_aredis_args_copy(size_t head, int argc, const char *const *argv, const size_t *lens,
                          struct sk_aredis_args *a)
{
    size_t bytes = 0;
    for (int i = 0; i < argc; i++)
        bytes += lens ? lens[i] : strlen(argv[i]);
    /* head rounded up so the pointers that follow it are aligned */
    head = (head + sizeof(void *) - 1) / sizeof(void *) * sizeof(void *);
    char *blk = malloc(head + (size_t)argc * (sizeof(char *) + sizeof(size_t)) + bytes);
    if (!blk) return NULL;
    a->argc = argc;
    a->argv = (const char **)(blk + head);
    a->lens = (size_t *)(a->argv + argc);
    char *p = (char *)(a->lens + argc);
    for (int i = 0; i < argc; i++) {
        size_t l = lens ? lens[i] : strlen(argv[i]);
        memcpy(p, argv[i], l);
        a->argv[i] = p;
        a->lens[i] = l;
        p += l;
    }
    return blk;
}

/* Makes the kept script call cmd <name> numkeys keys... args...
 * (EVALSHA sha, FCALL fname or EVAL text: the same layout). */
static void script_head(struct sk_aredis_args *a, const char *cmd, const char *name)
{
    a->argv[0] = cmd;
    a->lens[0] = strlen(cmd);
    a->argv[1] = name;
    a->lens[1] = strlen(name);
}

int sk_aredis_enqueue(sk_aredis *ar, sk_aredis_cb cb, void *data, int argc, const char *const *argv,
                      const size_t *lens, int script, int confirm)
{
    struct ar_entry e = {cb, data, sk_mono_us(), 0, 0, NULL, {0}, script, confirm};
    set_due(ar, &e, block_ms(argc, argv, lens));
    size_t start = ar->out.len;
    int rc;
    if (script >= 0 && argc >= 2) {
        /* kept for a resend as EVAL after a NOSCRIPT (which never ran) */
        e.kept = sk_aredis_args_copy(0, argc, argv, lens, &e.args);
        if (!e.kept) return SK_ENOMEM;
        if (ar->fn) script_head(&e.args, "FCALL", sk_script_fname((enum sk_script_id)script));
        rc = encode(&ar->out, argc, e.args.argv, e.args.lens);
    } else {
        e.script = -1;
        rc = encode(&ar->out, argc, argv, lens);
    }
    if (rc == 0 && fifo_push(ar, &e) < 0) rc = SK_ENOMEM;
    if (rc < 0) {
        /* a command formatted and not queued would answer another's callback */
        ar->out.len = start;
        free(e.kept);
        return SK_ENOMEM;
    }
    if (confirm) ar->unwaited++;
    return 0;
}

/* Sends the kept script call again as EVAL <text> ... */
static int resend_as_eval(sk_aredis *ar, struct ar_entry *e)
{
    script_head(&e->args, "EVAL", sk_script_text((enum sk_script_id)e->script));
    return sk_aredis_enqueue(ar, e->cb, e->data, e->args.argc, e->args.argv, e->args.lens, -1,
                             e->confirm);
}

static void enqueue_scripts(sk_aredis *ar);
static void enqueue_done(sk_aredis *ar);
static void on_fn_list(void *data, redisReply *rep);

/* FUNCTION LOAD answered: the library is there (a string, or "already
 * exists": the name carries a hash of its text), or the server cannot
 * take it and scripts go as EVALSHA. */
/* A server still loading its data (a restart reading its AOF) answers
 * LOADING: not yet, which says nothing about Functions. */
static int is_loading(const redisReply *rep)
{
    return rep && rep->type == REDIS_REPLY_ERROR && !strncmp(rep->str, "LOADING", 7);
}

static void on_fn_load(void *data, redisReply *rep)
{
    sk_aredis *ar = data;
    if (!rep) return;
    if (is_loading(rep) && ar->state == AR_HANDSHAKE) {
        connection_lost(ar, "server loading its data");
        return;
    }
    int was = ar->fn, reload = ar->fn_reloading;
    ar->fn_reloading = 0;
    ar->fn = rep->type == REDIS_REPLY_STRING ||
             (rep->type == REDIS_REPLY_ERROR && strstr(rep->str, "already exists"));
    if (!ar->fn && !reload) {
        if (rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "ERR unknown command", 19) != 0)
            sk_log(SK_LOG_WARN, "redis %.64s:%d: FUNCTION LOAD refused (%.120s); using EVALSHA",
                   ar->url.host, ar->url.port, rep->str);
        enqueue_scripts(ar);
    } else if (!ar->fn && was) {
        sk_log(SK_LOG_WARN,
               "redis %.64s:%d: library lost and not loaded again (%.120s); using "
               "EVALSHA",
               ar->url.host, ar->url.port, rep->type == REDIS_REPLY_ERROR ? rep->str : "?");
    }
}

static void load_library(sk_aredis *ar)
{
    const char *a[] = {"FUNCTION", "LOAD", sk_script_library};
    sk_aredis_enqueue(ar, on_fn_load, ar, 3, a, NULL, -1, 0);
}

/* The WAIT after confirmed commands answered: every answer held before it
 * is delivered with its count (0 when WAIT failed, e.g. on a replica). */
static void on_wait(void *data, redisReply *rep)
{
    sk_aredis *ar = data;
    ar->wait_inflight = 0;
    if (!rep) return; /* connection lost: connection_lost fails the held ones */
    release_held(ar, rep->type == REDIS_REPLY_INTEGER ? (int)rep->integer : 0);
}

/* Keeps the answer of a confirmed command for the next WAIT; when that
 * cannot be, it is delivered at once as not acknowledged. */
static void hold(sk_aredis *ar, const struct ar_entry *e, redisReply *r, int64_t rtt)
{
    if (SK_VEC_RESERVE(ar->held, ar->capheld, ar->nheld + 1, 64)) {
        ar->acked = 0;
        if (e->cb) e->cb(e->data, r);
        ar->acked = -1;
        freeReplyObject(r);
        return;
    }
    ar->held[ar->nheld++] = (struct ar_held){e->cb, e->data, r, rtt};
}

/* The client a socket callback is for: NULL when the socket has none any
 * more, or when the callback reports a failure (the connection is then
 * lost). */
static sk_aredis *live_client(h2o_socket_t *sock, const char *err)
{
    sk_aredis *ar = sock->data;
    if (ar && err) {
        connection_lost(ar, err);
        return NULL;
    }
    return ar;
}

static void on_read(h2o_socket_t *sock, const char *err)
{
    sk_aredis *ar = live_client(sock, err);
    if (!ar) return;
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
        if (!ar->count && ar->push_cb) {
            /* a message of a subscription: no command asked for it */
            ar->push_cb(ar->push_data, rep);
            freeReplyObject(rep);
            if (ar->state == AR_DOWN) return;
            continue;
        }
        if (!ar->count) {
            freeReplyObject(rep);
            connection_lost(ar, "reply without a command");
            return;
        }
        struct ar_entry e = fifo_pop(ar);
        redisReply *r = rep;
        if (e.kept && sk_script_is_noscript(r) && resend_as_eval(ar, &e) == 0) {
            /* never ran: EVAL with the text runs it; the library goes
             * back for the next calls (FUNCTION FLUSH, a restart) */
            if (ar->fn && strncmp(r->str, "ERR unknown command", 19) == 0) {
                ar->fn = 0;
            } else if (ar->fn && !ar->fn_reloading) {
                ar->fn_reloading = 1;
                load_library(ar);
            }
            free(e.kept);
            freeReplyObject(r);
            continue;
        }
        free(e.kept);
        int64_t rtt = sk_mono_us() - e.sent_us;
        if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "READONLY", 8) == 0) ar->readonly++;
        if (e.confirm && ar->opts.sync_replicas > 0) {
            hold(ar, &e, r, rtt);
            if (ar->state == AR_DOWN) return; /* delivered at once, and it failed */
            continue;
        }
        ar->rtt_us = rtt;
        ar->acked = -1;
        if (e.cb) e.cb(e.data, r);
        freeReplyObject(r);
        if (ar->state == AR_DOWN) return; /* a callback hit a failure path */
    }
    /* NOSCRIPT resends (and commands issued by callbacks) go out now */
    sk_aredis_flush(ar);
}

/* Writes what out holds after woff, as far as the kernel takes it; a
 * partial write waits for the socket to be writable (on_writable). The
 * write is ours, not h2o_socket_write: an h2o write that completes at once
 * schedules its callback in h2o's pending list, and this runs after the
 * loop pass (outside h2o's callbacks), so a connection lost before the
 * next pass (a reply timeout in sk_aredis_tick) closed a socket h2o still
 * had in that list: the next pass freed it, then walked it (a SIGSEGV in
 * h2o's run_pending under the Sentinel nemesis). Written here, nothing of
 * ours waits in that list outside a pass, and a close is always safe. */
static void on_writable(h2o_socket_t *sock, const char *err);

static void write_out(sk_aredis *ar)
{
    while (ar->woff < ar->out.len) {
        /* MSG_NOSIGNAL: a library in any process, SIGPIPE ignored or not */
        ssize_t n = send(h2o_socket_get_fd(ar->sock), ar->out.p + ar->woff, ar->out.len - ar->woff,
                         MSG_NOSIGNAL);
        if (n > 0) {
            ar->woff += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            connection_lost(ar, strerror(errno));
            return;
        }
        ar->write_busy = 1;
        h2o_socket_notify_write(ar->sock, on_writable);
        return;
    }
    ar->out.len = ar->woff = 0;
}

static void on_writable(h2o_socket_t *sock, const char *err)
{
    if (sock->data) ((sk_aredis *)sock->data)->write_busy = 0;
    sk_aredis *ar = live_client(sock, err);
    if (ar) sk_aredis_flush(ar);
}

void sk_aredis_flush(sk_aredis *ar)
{
    if (ar->cl) {
        sk_aredis_cl_flush(ar);
        return;
    }
    if (ar->sn && !(ar = node_of(ar))) return;
    if (!ar->sock || ar->state < AR_HANDSHAKE) return;
    if (ar->unwaited && !ar->wait_inflight && ar->state == AR_READY) {
        /* One WAIT covers every write of this connection before it; while
         * it waits, the next commands queue behind it and the next WAIT
         * covers them all: at most one in flight. */
        char n[16], ms[16];
        snprintf(n, sizeof n, "%d", ar->opts.sync_replicas);
        snprintf(ms, sizeof ms, "%d", ar->opts.sync_timeout_ms);
        if (sk_aredis_enqueue(ar, on_wait, ar, 3, (const char *const[]){"WAIT", n, ms}, NULL, -1,
                              0) == 0) {
            ar->unwaited = 0;
            ar->wait_inflight = 1;
        }
    }
    if (ar->write_busy || ar->out.len == 0) return;
    write_out(ar);
}

/* A new verdict on the server's settings: said in the log when its level
 * changes (a refusal and its end at once, a warning at most once a
 * minute), never per purchase. */
static void judge_settings(sk_aredis *ar)
{
    sk_rsettings_judge(&ar->rset, 0, &ar->verdict);
    const struct sk_rset_finding *f = sk_rsettings_worst(&ar->verdict, SK_RSET_WARN);
    int lvl = ar->verdict.level >= SK_RSET_WARN ? ar->verdict.level : SK_RSET_OK;
    if (lvl == ar->rset_logged) return;
    int64_t now = sk_mono_ms();
    if (lvl == SK_RSET_UNSAFE) {
        sk_log(SK_LOG_ERROR,
               "redis %.64s:%d: %s; purchases are refused (503 redis_unsafe) until it is",
               ar->url.host, ar->url.port, f->why);
    } else if (lvl == SK_RSET_WARN) {
        if (ar->rset_logged != SK_RSET_UNSAFE && ar->rset_warned_ms &&
            now - ar->rset_warned_ms < 60000)
            return; /* said lately: a figure going up and down around a bound */
        ar->rset_warned_ms = now;
        sk_log(SK_LOG_WARN, "redis %.64s:%d: %s", ar->url.host, ar->url.port, f->why);
    } else if (ar->rset_logged == SK_RSET_UNSAFE) {
        sk_log(SK_LOG_WARN,
               "redis %.64s:%d: maxmemory-policy is %s now: purchases are accepted again",
               ar->url.host, ar->url.port, ar->rset.policy);
    }
    ar->rset_logged = lvl;
}

/* The answer to the periodic INFO memory. */
static void on_settings(void *data, redisReply *rep)
{
    sk_aredis *ar = data;
    ar->rset_inflight = 0;
    if (!rep || (rep->type != REDIS_REPLY_STRING && rep->type != REDIS_REPLY_STATUS)) return;
    sk_rsettings_info(&ar->rset, rep->str, rep->len);
    judge_settings(ar);
}

/* A handshake answer (handshake.h) that does not pass ends the connection. */
static void on_handshake_step(void *data, redisReply *rep)
{
    sk_aredis *ar = data;
    int i = ar->hs_next++;
    if (!rep || ar->state != AR_HANDSHAKE) return; /* connection already lost */
    char why[160];
    int rc = sk_handshake_check(&ar->hs, i, rep, why, sizeof why);
    if (rc < 0) {
        connection_failed(ar, why, rc); /* SK_EAUTH: the password refused */
        return;
    }
    if (sk_handshake_settings(&ar->hs, i, rep, &ar->rset)) {
        judge_settings(ar);
        ar->rset_next_ms = sk_mono_ms() + SK_RSET_REREAD_MS;
        return;
    }
    /* WAIT N below the master's replicas promises nothing across a
     * failover: the promoted replica may be one that did not acknowledge,
     * and after a live master's failover its other replicas acknowledge
     * its writes until the Sentinels move them (docs/failover.md) */
    size_t nrep = strcmp(ar->hs.argv[i][0], "ROLE") ? 0 : sk_handshake_replicas(rep);
    if (ar->opts.sync_replicas > 0 && nrep > (size_t)ar->opts.sync_replicas && !ar->sync_warned) {
        ar->sync_warned = 1;
        sk_log(SK_LOG_WARN,
               "redis %.64s:%d: --sync-replicas %d but the master has %zu replicas: a failover "
               "can lose purchases answered 200; set it to the number of replicas "
               "(docs/failover.md)",
               ar->url.host, ar->url.port, ar->opts.sync_replicas, nrep);
    }
}

/* The answer to SCRIPT LOAD: an error aborts the connection. */
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
    /* LOADING, or anything else: not ready (a bare client takes the server
     * as it is) */
    if (rep->type == REDIS_REPLY_ERROR && ar->role != AR_BARE) {
        char why[128];
        snprintf(why, sizeof why, "handshake refused: %.100s", rep->str);
        connection_lost(ar, why);
        return;
    }
    set_state(ar, AR_READY);
    ar->backoff_ms = 0;
    if (ar->connects > 0)
        sk_log(SK_LOG_INFO, "redis %.64s:%d: ready again", ar->url.host, ar->url.port);
    ar->errstr[0] = 0;
    ar->connects++;
}

/* The last command of the handshake: its answer makes the client ready. */
static void enqueue_done(sk_aredis *ar)
{
    sk_aredis_enqueue(ar, on_handshake_done, ar, 1, (const char *const[]){"PING"}, NULL, -1, 0);
}

/* FUNCTION LIST of our library answered: there (FCALL at once), not there
 * (FUNCTION LOAD), or no Functions on this server (the scripts); then the
 * end of the handshake. */
static void on_fn_list(void *data, redisReply *rep)
{
    sk_aredis *ar = data;
    if (!rep || ar->state != AR_HANDSHAKE) return;
    if (is_loading(rep)) {
        connection_lost(ar, "server loading its data");
        return;
    }
    if (rep->type == REDIS_REPLY_ERROR && !strncmp(rep->str, "NOAUTH", 6)) {
        /* a password the URL does not give */
        connection_failed(ar, "NOAUTH: the server wants a password", SK_EAUTH);
        return;
    }
    if (rep->type == REDIS_REPLY_ARRAY && rep->elements > 0) {
        ar->fn = 1;
    } else if (rep->type == REDIS_REPLY_ARRAY) {
        load_library(ar); /* its answer loads the scripts when it fails */
    } else {
        on_fn_load(ar, rep); /* FUNCTION refused: as a refused load */
    }
    enqueue_done(ar);
}

/* SCRIPT LOAD of every embedded script (EVALSHA finds them at once; a miss
 * would be resent as EVAL anyway). */
static void enqueue_scripts(sk_aredis *ar)
{
    for (int i = 0; i < SK_SCRIPT_COUNT; i++) {
        const char *a[] = {"SCRIPT", "LOAD", sk_script_text((enum sk_script_id)i)};
        sk_aredis_enqueue(ar, on_handshake, ar, 3, a, NULL, -1, 0);
    }
}

/* The socket became writable: connected, or the connect failed (its
 * SO_ERROR says why). */
static void on_connect(h2o_socket_t *sock, const char *err)
{
    sk_aredis *ar = live_client(sock, err);
    if (!ar) return;
    int so_err = 0;
    socklen_t len = sizeof so_err;
    if (getsockopt(h2o_socket_get_fd(sock), SOL_SOCKET, SO_ERROR, &so_err, &len) != 0)
        so_err = errno;
    if (so_err) {
        connection_lost(ar, strerror(so_err));
        return;
    }
    set_state(ar, AR_HANDSHAKE);
    h2o_socket_read_start(sock, on_read);
    ar->fn = 0;
    /* A Sentinel is asked without the data's credentials; a Sentinel's
     * master must say ROLE master (a stale answer, a failover under way, or
     * a demoted master is left at once). */
    static const unsigned flags[] = {[AR_DATA] = SK_HS_AUTH | SK_HS_SELECT | SK_HS_INFO,
                                     [AR_MASTER] =
                                         SK_HS_AUTH | SK_HS_SELECT | SK_HS_ROLE | SK_HS_INFO,
                                     [AR_SENTINEL] = 0,
                                     [AR_PROBE] = SK_HS_AUTH,
                                     [AR_BARE] = SK_HS_AUTH | SK_HS_SELECT};
    sk_handshake_init(&ar->hs, &ar->url, flags[ar->role]);
    ar->hs_next = 0;
    for (int i = 0; i < ar->hs.n; i++)
        sk_aredis_enqueue(ar, on_handshake_step, ar, ar->hs.argc[i], ar->hs.argv[i], NULL, -1, 0);
    if ((ar->role == AR_DATA || ar->role == AR_MASTER) && !ar->opts.no_functions) {
        /* the library is asked for first: loading it compiles every script
         * (tens of ms of the server's one thread) even when it is there */
        const char *a[] = {"FUNCTION", "LIST", "LIBRARYNAME", sk_script_library_name};
        sk_aredis_enqueue(ar, on_fn_list, ar, 4, a, NULL, -1, 0);
    } else {
        if (ar->role == AR_DATA || ar->role == AR_MASTER) enqueue_scripts(ar);
        enqueue_done(ar);
    }
    sk_aredis_flush(ar);
}

static void start_resolve(sk_aredis *ar);

static void start_connect(sk_aredis *ar)
{
    if (!ar->addrlen) { /* a name: resolved off the loop first */
        start_resolve(ar);
        return;
    }
    set_state(ar, AR_CONNECTING);
    /* connect(2) here, not h2o_socket_connect: a connect that completes at
     * once (a unix socket) would put its callback in h2o's pending list
     * outside a pass (see write_out); "writable" reports it in the pass */
    int fd = socket(ar->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        connection_lost(ar, strerror(errno));
        return;
    }
    if (ar->addr.ss_family != AF_UNIX) {
        int on = 1; /* as h2o_socket_connect did: no Nagle delay on a pipeline */
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    }
    if (connect(fd, (struct sockaddr *)&ar->addr, ar->addrlen) != 0 && errno != EINPROGRESS) {
        int e = errno;
        close(fd);
        connection_lost(ar, strerror(e));
        return;
    }
    ar->sock = h2o_evloop_socket_create(ar->loop, fd, 0);
    h2o_buffer_init(&ar->sock->input, &ar->inproto); /* nothing allocated yet */
    ar->sock->data = ar;
    h2o_socket_notify_write(ar->sock, on_connect);
}

/* The resolver's answer (core/resolve.h): the address to connect to, or
 * a failure that is retried like a failed connect (backoff, a new
 * resolution). */
static void on_resolved(h2o_socket_t *sock, const char *err)
{
    sk_aredis *ar = sock->data;
    if (!ar) return;
    struct sk_resolved r;
    int whole = sock->input->size >= sizeof r;
    if (!whole && !err) return; /* the rest is on its way */
    if (whole) memcpy(&r, sock->input->bytes, sizeof r);
    sock_drop(&ar->rsock); /* sock itself: answered, or ended */
    char why[160];
    if (!whole || r.gai || r.len > sizeof ar->addr) {
        snprintf(why, sizeof why, "cannot resolve %.64s: %.64s", ar->url.host,
                 !whole  ? "the resolver ended without an answer"
                 : r.gai ? gai_strerror(r.gai)
                         : "address too long");
        /* a name that does not resolve is said once per client, not at
         * every retry */
        if (!ar->resolve_warned)
            sk_log(SK_LOG_WARN, "redis %.64s:%d: %s", ar->url.host, ar->url.port, why);
        ar->resolve_warned = 1;
        connection_lost(ar, why);
        return;
    }
    memcpy(&ar->addr, &r.addr, r.len);
    ar->addrlen = r.len;
    start_connect(ar);
}

/* Hands the name to a resolver thread; its answer arrives on the loop
 * (on_resolved) like any socket's bytes, so nothing here waits for DNS. */
static void start_resolve(sk_aredis *ar)
{
    set_state(ar, AR_RESOLVING);
    snprintf(ar->errstr, sizeof ar->errstr, "resolving %.64s", ar->url.host);
    int fd;
    if (sk_resolve_start(ar->url.host, ar->url.port, &fd) < 0) {
        connection_lost(ar, "cannot start resolving the name");
        return;
    }
    ar->rsock = h2o_evloop_socket_create(ar->loop, fd, 0);
    if (!ar->rsock) {
        close(fd);
        connection_lost(ar, "cannot watch the resolver");
        return;
    }
    h2o_buffer_init(&ar->rsock->input, &ar->inproto);
    ar->rsock->data = ar;
    h2o_socket_read_start(ar->rsock, on_resolved);
}

/* The address to connect to: the unix socket's path (port 0), a numeric
 * address at once, or none yet for a name (start_connect resolves it off
 * the loop, once: reconnects reuse the address). */
static int node_addr(sk_aredis *ar, char *err, size_t cap)
{
    if (ar->url.port == 0) {
        struct sockaddr_un *sun = (struct sockaddr_un *)&ar->addr;
        size_t n = strlen(ar->url.host);
        if (n >= sizeof sun->sun_path) return sk_einval(err, cap, "socket path too long");
        sun->sun_family = AF_UNIX;
        memcpy(sun->sun_path, ar->url.host, n + 1);
        ar->addrlen = sizeof *sun;
        return 0;
    }
    if (sk_resolve_numeric(ar->url.host, ar->url.port, &ar->addr, &ar->addrlen) < 0)
        ar->addrlen = 0;
    return 0;
}

/* A client of u on loop with the options o (NULL: the defaults) filled
 * in, not connecting yet; the caller frees it. NULL: out of memory. */
static sk_aredis *client_alloc(h2o_loop_t *loop, const struct sk_redis_url *u,
                               const struct sk_aredis_opts *o)
{
    sk_aredis *ar = calloc(1, sizeof *ar);
    if (!ar) return NULL;
    ar->url = *u;
    ar->loop = loop;
    if (o) ar->opts = *o;
    if (ar->opts.timeout_ms <= 0) ar->opts.timeout_ms = 1000;
    if (ar->opts.connect_timeout_ms <= 0) ar->opts.connect_timeout_ms = ar->opts.timeout_ms;
    if (ar->opts.sync_replicas < 0) ar->opts.sync_replicas = 0;
    if (ar->opts.sync_timeout_ms <= 0) ar->opts.sync_timeout_ms = SYNC_TIMEOUT_MS;
    ar->timeout_ms = ar->opts.timeout_ms;
    ar->acked = -1;
    ar->fail_rc = SK_EIO;
    return ar;
}

int sk_aredis_node_new(sk_aredis **out, h2o_loop_t *loop, const struct sk_redis_url *u,
                       const struct sk_aredis_opts *o, enum ar_role role, char *err, size_t cap)
{
    *out = NULL;
    sk_aredis *ar = client_alloc(loop, u, o);
    if (!ar) return SK_ENOMEM;
    ar->role = role;
    ar->inproto.allocator.max = 0; /* no recycling: freed at once, by its own thread */
    ar->inproto._initial_buf.capacity = H2O_SOCKET_INITIAL_INPUT_BUFFER_SIZE * 2;
    if (role == AR_SENTINEL) ar->opts.sync_replicas = 0;
    sk_rsettings_init(&ar->rset);
    if (node_addr(ar, err, cap) < 0) {
        free(ar);
        return SK_EINVAL;
    }
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

int sk_aredis_new_url(sk_aredis **out, h2o_loop_t *loop, const struct sk_redis_url *u,
                      const struct sk_aredis_opts *o, char *err, size_t cap)
{
    *out = NULL;
    if (!u->cluster && !u->sentinel)
        return sk_aredis_node_new(out, loop, u, o, o && o->bare ? AR_BARE : AR_DATA, err, cap);
    sk_aredis *ar = client_alloc(loop, u, o);
    if (!ar) return SK_ENOMEM;
    int rc = u->cluster ? sk_aredis_cl_new(ar) : sk_aredis_sn_new(ar);
    if (rc < 0) {
        free(ar);
        return rc;
    }
    *out = ar;
    return 0;
}

int sk_aredis_new_opts(sk_aredis **out, h2o_loop_t *loop, const char *url,
                       const struct sk_aredis_opts *o, char *err, size_t cap)
{
    *out = NULL;
    struct sk_redis_url u;
    if (sk_redis_url_parse(&u, url, strlen(url), err, cap) < 0) return SK_EINVAL;
    return sk_aredis_new_url(out, loop, &u, o, err, cap);
}

int sk_aredis_new(sk_aredis **out, h2o_loop_t *loop, const char *url, int timeout_ms, char *err,
                  size_t cap)
{
    struct sk_aredis_opts o = {.timeout_ms = timeout_ms};
    return sk_aredis_new_opts(out, loop, url, &o, err, cap);
}

/* Hands a call over to the cluster (cl) or Sentinel (sn) client behind
 * ar: 1 when it did (the caller is done), 0 for a plain client. */
static int handed_over(sk_aredis *ar, void (*cl)(sk_aredis *), void (*sn)(sk_aredis *))
{
    void (*fn)(sk_aredis *) = ar->cl ? cl : ar->sn ? sn : NULL;
    if (fn) fn(ar);
    return fn != NULL;
}

void sk_aredis_free(sk_aredis *ar)
{
    if (!ar) return;
    if (handed_over(ar, sk_aredis_cl_free, sk_aredis_sn_free)) return;
    set_state(ar, AR_DOWN); /* closed on purpose: not logged as a loss */
    connection_lost(ar, "closed");
    redisReaderFree(ar->reader);
    free(ar->out.p);
    free(ar->fifo);
    free(ar->held);
    free(ar);
}

int64_t sk_aredis_oldest_ms(const sk_aredis *ar)
{
    int64_t w = ar->count ? sk_mono_us() - ar->fifo[ar->head].wait_from_us : 0;
    return w > 0 ? w / 1000 : 0;
}

int sk_aredis_ready(const sk_aredis *ar)
{
    if (ar->cl) return sk_aredis_cl_ready(ar);
    const sk_aredis *m = node_of(ar);
    return m && m->state == AR_READY;
}
int sk_aredis_node_stalled(const sk_aredis *ar)
{
    return ar->state == AR_DOWN && sk_mono_ms() < ar->next_try_ms;
}

int sk_aredis_stalled(const sk_aredis *ar)
{
    if (sk_aredis_ready(ar)) return 0;
    if (ar->cl) return sk_aredis_cl_stalled(ar);
    if (ar->sn) return sk_aredis_sn_stalled(ar);
    return sk_aredis_node_stalled(ar);
}

int sk_aredis_failed(const sk_aredis *ar, const char **why)
{
    if (ar->sn) ar = sk_aredis_sn_failed(ar);
    *why = ar->errstr[0] ? ar->errstr : "redis: no answer";
    return ar->fail_rc ? ar->fail_rc : SK_EIO;
}

int sk_aredis_unserved(const sk_aredis *ar, char *buf, size_t cap)
{
    if (ar->cl) return sk_aredis_cl_unserved(ar, buf, cap);
    if (buf && cap) buf[0] = 0;
    return 0;
}

size_t sk_aredis_pending(const sk_aredis *ar)
{
    if (ar->cl) return sk_aredis_cl_pending(ar);
    const sk_aredis *m = node_of(ar);
    return m ? m->count + m->nheld : 0;
}
const char *sk_aredis_errstr(const sk_aredis *ar)
{
    if (ar->cl) return sk_aredis_cl_errstr(ar);
    if (ar->sn) return sk_aredis_sn_errstr(ar);
    return ar->errstr[0] ? ar->errstr : "ready";
}
int64_t sk_aredis_rtt_us(const sk_aredis *ar)
{
    const sk_aredis *m = node_of(ar);
    return m ? m->rtt_us : 0;
}
int sk_aredis_acked(const sk_aredis *ar)
{
    const sk_aredis *m = node_of(ar);
    return m ? m->acked : -1;
}
unsigned sk_aredis_connects(const sk_aredis *ar)
{
    if (ar->cl) return sk_aredis_cl_connects(ar);
    if (ar->sn) return sk_aredis_sn_connects(ar);
    return ar->connects;
}

/* A command (script >= 0: a call of that script) to the client that takes
 * ar's commands now: SK_EIO when none is ready. */
static int submit(sk_aredis *ar, sk_aredis_cb cb, void *data, int argc, const char *const *argv,
                  const size_t *lens, int script, int confirm)
{
    if (ar->cl) return sk_aredis_cl_submit(ar, argc, argv, lens, script, confirm, cb, data);
    sk_aredis *m = node_of(ar);
    if (!m || m->state != AR_READY) return SK_EIO;
    return sk_aredis_enqueue(m, cb, data, argc, argv, lens, script, confirm);
}

int sk_aredis_command(sk_aredis *ar, sk_aredis_cb cb, void *data, int argc, const char *const *argv,
                      const size_t *lens)
{
    return submit(ar, cb, data, argc, argv, lens, -1, 0);
}

static int eval_common(sk_aredis *ar, enum sk_script_id id, int nkeys, const char *const *keys,
                       int nargs, const char *const *args, const size_t *arglens, sk_aredis_cb cb,
                       void *data, int confirm)
{
    if (!ar->cl && !sk_aredis_ready(ar)) return SK_EIO;
    if (nkeys < 0 || nargs < 0 || nkeys + nargs > SK_SCRIPT_MAX_ARGS) return SK_EINVAL;
    int argc = 3 + nkeys + nargs;
    const char *sv[64];
    size_t sl[64];
    const char **argv = argc <= 64 ? sv : malloc(sizeof *argv * (size_t)argc);
    size_t *lens = argc <= 64 ? sl : malloc(sizeof *lens * (size_t)argc);
    int rc = SK_ENOMEM;
    if (argv && lens) {
        char nk[16];
        sk_script_fill_argv(id, nkeys, keys, nargs, args, arglens, argv, lens, nk);
        rc = submit(ar, cb, data, argc, argv, lens, (int)id, confirm);
    }
    if (argv != sv) free(argv);
    if (lens != sl) free(lens);
    return rc;
}

int sk_aredis_eval(sk_aredis *ar, enum sk_script_id id, int nkeys, const char *const *keys,
                   int nargs, const char *const *args, const size_t *arglens, sk_aredis_cb cb,
                   void *data)
{
    return eval_common(ar, id, nkeys, keys, nargs, args, arglens, cb, data, 0);
}

int sk_aredis_eval_wait(sk_aredis *ar, enum sk_script_id id, int nkeys, const char *const *keys,
                        int nargs, const char *const *args, const size_t *arglens, sk_aredis_cb cb,
                        void *data)
{
    return eval_common(ar, id, nkeys, keys, nargs, args, arglens, cb, data,
                       ar->opts.sync_replicas > 0);
}

void sk_aredis_tick(sk_aredis *ar)
{
    if (handed_over(ar, sk_aredis_cl_tick, sk_aredis_sn_tick)) return;
    int64_t now = sk_mono_ms();
    switch (ar->state) {
    case AR_DOWN:
        if (now >= ar->next_try_ms) start_connect(ar);
        break;
    case AR_RESOLVING:
        /* not timed out: the resolver's own timeouts end it, and one
         * resolution at a time keeps a dead DNS from piling up threads */
        break;
    case AR_CONNECTING:
    case AR_HANDSHAKE:
        if (now - ar->state_since_ms > ar->opts.connect_timeout_ms)
            connection_failed(ar, "connect timed out", SK_ETIMEDOUT);
        break;
    case AR_READY:
        /* a command may wait behind a WAIT that waits its timeout, and then
         * for its own WAIT, or behind a blocking read (set_due) */
        if (ar->count && sk_mono_us() > ar->fifo[ar->head].due_us) {
            connection_failed(ar, "reply timed out", SK_ETIMEDOUT);
            break;
        }
        /* the settings again (a CONFIG SET at run time), behind whatever
         * the pass sends */
        if ((ar->role == AR_DATA || ar->role == AR_MASTER) && !ar->rset_inflight &&
            now >= ar->rset_next_ms &&
            sk_aredis_enqueue(ar, on_settings, ar, 2, (const char *const[]){"INFO", "memory"}, NULL,
                              -1, 0) == 0) {
            ar->rset_inflight = 1;
            ar->rset_next_ms = now + SK_RSET_REREAD_MS;
        }
        break;
    }
}

/* Master k of any client (a cluster's k-th, else the one master at 0):
 * NULL when it has no client; *n the number of masters. */
static sk_aredis *master_k(const sk_aredis *ar, int k, int *n)
{
    if (ar->cl) return sk_aredis_cl_master_k(ar, k, n);
    *n = 1;
    return k ? NULL : node_of(ar);
}

/* every master ready with the library (a cluster without masters: no) */
int sk_aredis_uses_functions(const sk_aredis *ar)
{
    int n = 1;
    for (int k = 0; k < n; k++) {
        const sk_aredis *m = master_k(ar, k, &n);
        if (!m || m->state != AR_READY || !m->fn) return 0;
    }
    return n > 0;
}

void sk_aredis_each_master(const sk_aredis *ar,
                           void (*fn)(void *data, const struct sk_aredis_master *m), void *data)
{
    int n = 1;
    for (int k = 0; k < n; k++) {
        const sk_aredis *node = master_k(ar, k, &n);
        if (!node) continue;
        struct sk_aredis_master m;
        if (node->url.port)
            snprintf(m.addr, sizeof m.addr, "%.64s:%d", node->url.host, node->url.port);
        else
            snprintf(m.addr, sizeof m.addr, "%.79s", node->url.host);
        m.ready = node->state == AR_READY;
        m.settings = &node->rset;
        m.verdict = &node->verdict;
        fn(data, &m);
    }
}

int sk_aredis_settings_pending(sk_aredis *ar, int reread)
{
    int n = 1, left = 0;
    for (int k = 0; k < n; k++) {
        sk_aredis *m = master_k(ar, k, &n);
        /* a ready data connection, which reads its server's settings */
        if (!m || m->state != AR_READY || (m->role != AR_DATA && m->role != AR_MASTER)) continue;
        if (reread && !m->rset_inflight) m->rset_next_ms = 0;
        left += m->rset_inflight || m->rset_next_ms == 0;
    }
    return left;
}

const struct sk_rset_finding *sk_aredis_unsafe(const sk_aredis *ar, const char *key)
{
    if (ar->cl && key) {
        ar = sk_aredis_cl_master_of(ar, key, strlen(key));
        return ar ? sk_rsettings_worst(&ar->verdict, SK_RSET_UNSAFE) : NULL;
    }
    /* any master's (the one master's, or a cluster's first unsafe one) */
    const struct sk_rset_finding *f = NULL;
    int n = 1;
    for (int k = 0; k < n && !f; k++) {
        const sk_aredis *m = master_k(ar, k, &n);
        if (m) f = sk_rsettings_worst(&m->verdict, SK_RSET_UNSAFE);
    }
    return f;
}
