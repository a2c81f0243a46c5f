/* redis_conn.c - the blocking facade over the async client (redis_conn.h):
 * commands are queued on the transport with a callback that keeps the
 * answer, and the handle's own loop runs until that answer is in. */
#include "redis/redis_conn.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <h2o.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/vec.h"
#include "redis/redis_async.h"
#include "redis/redis_async_int.h"
#include "redis/script.h"

#define PUMP_MS 20         /* the longest the loop sleeps before the next tick */
#define IDLE_LOOK_MS 1000  /* a handle idle this long hears its sockets before sending */
#define READY_SLACK_MS 500 /* beyond two connect timeouts (a Sentinel round, a map read) */

/* A command awaiting its answer. */
struct sk_rcall {
    sk_redis *r;
    struct sk_rcall *next;
    redisReply *rep; /* the answer, the handle's */
    int done, rc;
    int dropped; /* nobody reads it any more: the answer is freed when it comes */
};

static int set_err(sk_redis *r, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int set_err(sk_redis *r, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->errstr, sizeof r->errstr, fmt, ap);
    va_end(ap);
    r->err = err;
    return err;
}

/* ---- the loops: one per handle, kept for the next handle when it goes ------ */

/* h2o cannot free a loop without leaking its epoll descriptor, so a loop
 * outlives its handle here and serves the next one; never two at once,
 * and never one a fork's parent made (the child would share its epoll). */
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static h2o_loop_t **pool;
static size_t npool, cappool;
static size_t nforeign; /* pool[0..nforeign): a fork's parent's, kept unused */
static pid_t pool_pid;

static h2o_loop_t *loop_take(void)
{
    h2o_loop_t *l = NULL;
    pthread_mutex_lock(&pool_mu);
    if (pool_pid != getpid()) {
        /* a fork's child: the parent's loops are not ours; they stay
         * listed (not leaked) below the ones the child makes */
        nforeign = npool;
        pool_pid = getpid();
    }
    if (npool > nforeign) l = pool[--npool];
    pthread_mutex_unlock(&pool_mu);
    return l ? l : h2o_evloop_create();
}

static void loop_give(h2o_loop_t *l, int pid)
{
    if (!l) return;
    h2o_evloop_run(l, 0); /* frees the sockets closed on it */
    pthread_mutex_lock(&pool_mu);
    if (pool_pid == pid && pid == getpid() && !SK_VEC_RESERVE(pool, cappool, npool + 1, 16))
        pool[npool++] = l;
    pthread_mutex_unlock(&pool_mu);
}

/* ---- the calls ------------------------------------------------------------------ */

static struct sk_rcall *call_new(sk_redis *r)
{
    struct sk_rcall *c = r->spare;
    if (c)
        r->spare = c->next;
    else if (!(c = malloc(sizeof *c)))
        return NULL;
    *c = (struct sk_rcall){.r = r};
    return c;
}

static void call_free(sk_redis *r, struct sk_rcall *c)
{
    if (c->rep) freeReplyObject(c->rep);
    c->rep = NULL;
    c->next = r->spare;
    r->spare = c;
}

/* The transport's callback: keeps the answer, or why none comes. */
static void on_answer(void *data, redisReply *rep)
{
    struct sk_rcall *c = data;
    sk_redis *r = c->r;
    c->done = 1;
    if (c->dropped) {
        call_free(r, c);
        return;
    }
    if (!rep) {
        const char *why;
        c->rc = sk_aredis_failed(r->a, &why);
        set_err(r, c->rc, "%s", why);
    } else if (!(c->rep = sk_aredis_take(rep))) {
        c->rc = set_err(r, SK_ENOMEM, "out of memory");
    }
}

/* Every call of the pipeline is left: answered ones freed now, the others
 * when their answer comes. */
static void calls_drop(sk_redis *r)
{
    for (struct sk_rcall *c = r->head, *next; c; c = next) {
        next = c->next;
        if (c->done)
            call_free(r, c);
        else
            c->dropped = 1;
    }
    r->head = r->tail = NULL;
}

static void pipe_reset(sk_redis *r)
{
    r->pipe_n = 0;
    r->pipe_read = 0;
    r->pipe_broken = 0;
}

/* ---- the transport -------------------------------------------------------------- */

/* What the handle shows of its transport: connects, how scripts go, the
 * Sentinels' master. */
static void note_transport(sk_redis *r)
{
    r->connects = r->connects_before + sk_aredis_connects(r->a);
    if (r->fn != SK_FN_OFF && sk_aredis_ready(r->a))
        r->fn = sk_aredis_uses_functions(r->a) ? SK_FN_ON : SK_FN_OFF;
    if (r->url.sentinel) {
        int port;
        const char *h = sk_aredis_sn_master_addr(r->a, &port);
        if (h[0]) {
            snprintf(r->sn_host, sizeof r->sn_host, "%s", h);
            r->sn_port = port;
        }
    }
}

/* A cluster transport's redirection counts added to *to. */
static void stats_add(struct sk_cluster_stats *to, const struct sk_aredis *a)
{
    struct sk_cluster_stats s;
    sk_aredis_cl_stats(a, &s);
    to->moved += s.moved;
    to->ask += s.ask;
    to->retries += s.retries;
    to->refreshes += s.refreshes;
    to->node_errors += s.node_errors;
}

static void transport_drop(sk_redis *r)
{
    if (!r->a) return;
    note_transport(r);
    r->connects_before = r->connects;
    if (r->url.cluster) stats_add(&r->cl_before, r->a);
    sk_aredis *a = r->a;
    r->a = NULL;
    sk_aredis_free(a); /* what was in flight fails: dropped calls go */
}

static int transport_make(sk_redis *r)
{
    if (!r->loop) {
        r->loop = loop_take();
        r->loop_pid = getpid();
    }
    struct sk_aredis_opts o = {.timeout_ms = r->command_timeout_ms,
                               .connect_timeout_ms = r->connect_timeout_ms,
                               .no_functions = r->fn == SK_FN_OFF,
                               .patient = 1,
                               .bare = r->bare};
    char err[200];
    int rc = sk_aredis_new_url(&r->a, r->loop, &r->url, &o, err, sizeof err);
    if (rc < 0) return set_err(r, rc, "redis: %s", rc == SK_ENOMEM ? "out of memory" : err);
    return 0;
}

/* One pass of the loop (waiting at most ms for a socket), the transport's
 * housekeeping (timeouts, reconnects, Sentinels, the slot map) and what it
 * queued meanwhile sent. */
static void pump(sk_redis *r, int ms)
{
    sk_aredis_flush(r->a);
    h2o_evloop_run(r->loop, ms);
    sk_aredis_tick(r->a);
    sk_aredis_flush(r->a);
    r->pumped_ms = sk_mono_ms();
}

/* The transport ready, made or waited for: until it is, its connect
 * failed (the backoff window of a failed connect fails at once), or two
 * connect timeouts passed. */
static int ready(sk_redis *r)
{
    if (!r->a && transport_make(r) < 0) return r->err;
    if (r->pipe_n == 0 && sk_mono_ms() - r->pumped_ms > IDLE_LOOK_MS) pump(r, 0);
    int64_t by = sk_mono_ms() + 2 * r->connect_timeout_ms + READY_SLACK_MS;
    for (int first = 1;; first = 0) {
        if (sk_aredis_ready(r->a)) return 0;
        if (!first && sk_aredis_stalled(r->a)) break;
        int64_t left = by - sk_mono_ms();
        if (left <= 0) break;
        pump(r, first ? 0 : left < PUMP_MS ? (int)left : PUMP_MS);
    }
    const char *why = sk_aredis_errstr(r->a);
    int rc = SK_EIO;
    if (!r->url.cluster) {
        const char *w;
        if (sk_aredis_failed(r->a, &w) == SK_EAUTH) rc = SK_EAUTH;
    }
    note_transport(r);
    /* credentials refused: the server was reached, and said so */
    return set_err(r, rc, "%s%s%.200s", rc == SK_EAUTH ? "" : "cannot connect to ",
                   strncmp(why, "redis", 5) ? "redis: " : "", why);
}

/* ---- the pipeline ----------------------------------------------------------------- */

/* A read failed (rc): the rest of the pipeline is gone. */
static int pipe_fail(sk_redis *r, int rc)
{
    calls_drop(r);
    pipe_reset(r);
    r->pipe_broken = 1;
    return r->err = rc;
}

/* The caller starts anew while replies are owed: they are dropped, so that
 * nothing reads them later. Before a read nothing was sent (the loop has
 * not run): the transport goes with it, so those commands never run. */
static void pipe_abandon(sk_redis *r)
{
    if (r->pipe_n && !r->pipe_broken) {
        r->pipe_dropped += r->pipe_n;
        if (!r->pipe_read) {
            calls_drop(r);
            transport_drop(r);
        }
    }
    calls_drop(r);
    pipe_reset(r);
}

/* How a command is handed to the transport. */
struct queued {
    int argc;
    const char *const *argv;
    const size_t *lens;
    int script; /* >= 0: an embedded script, argc keys in argv, then nargs args */
    int nargs;
    const char *const *args;
    const size_t *arglens;
    struct sk_aredis *node; /* NULL: the front routes it; else this node's client */
};

static int enqueue(sk_redis *r, const struct queued *q)
{
    struct sk_rcall *c = call_new(r);
    if (!c) return set_err(r, SK_ENOMEM, "out of memory");
    int rc = q->script >= 0 ? sk_aredis_eval(r->a, (enum sk_script_id)q->script, q->argc, q->argv,
                                             q->nargs, q->args, q->arglens, on_answer, c)
                            : sk_aredis_command(q->node ? q->node : r->a, on_answer, c, q->argc,
                                                q->argv, q->lens);
    if (rc < 0) {
        call_free(r, c);
        return set_err(r, rc, "%s",
                       rc == SK_ENOMEM   ? "out of memory"
                       : rc == SK_EINVAL ? "too many arguments"
                                         : sk_aredis_errstr(r->a));
    }
    if (r->tail)
        r->tail->next = c;
    else
        r->head = c;
    r->tail = c;
    r->pipe_n++;
    return 0;
}

static int append_q(sk_redis *r, const struct queued *q)
{
    if (r->pipe_broken || (r->pipe_read && !r->pipe_window)) pipe_abandon(r);
    unsigned owed = r->pipe_n;
    /* a pipeline runs on one connection: only its first command may wait
     * for one to be made */
    int rc = owed ? (r->a ? 0 : set_err(r, SK_EIO, "redis connection lost inside a pipeline"))
                  : ready(r);
    if (rc == 0) rc = enqueue(r, q);
    if (rc < 0 && owed) pipe_fail(r, rc); /* nothing is owed for it; what was, is gone */
    return rc;
}

int sk_redis_read(sk_redis *r, redisReply **out)
{
    *out = NULL;
    if (r->pipe_broken) return r->err ? r->err : set_err(r, SK_EIO, "redis pipeline broken");
    if (!r->pipe_n) return r->err ? r->err : set_err(r, SK_ESTATE, "no pipelined reply to read");
    r->pipe_read = 1;
    struct sk_rcall *c = r->head;
    if (!c->done) {
        sk_aredis_flush(r->a);
        while (!c->done)
            pump(r, PUMP_MS);
    }
    r->head = c->next;
    if (!r->head) r->tail = NULL;
    if (c->rc) {
        int rc = c->rc;
        call_free(r, c);
        return pipe_fail(r, rc);
    }
    *out = c->rep;
    c->rep = NULL;
    call_free(r, c);
    if (--r->pipe_n == 0) {
        pipe_reset(r);
        note_transport(r);
    }
    r->err = 0;
    return 0;
}

int sk_redis_append(sk_redis *r, int argc, const char **argv, const size_t *lens)
{
    struct queued q = {argc, argv, lens, -1, 0, NULL, NULL, NULL};
    return append_q(r, &q);
}

/* One exchange: queued, answered. A redis+sentinel:// master that answers
 * READONLY was demoted and refused it (it never ran): it goes once more,
 * to the master the Sentinels name now. */
static int exchange(sk_redis *r, const struct queued *q, redisReply **out)
{
    *out = NULL;
    if (r->pipe_n || r->pipe_broken) pipe_abandon(r);
    for (int tries = 0;; tries++) {
        int rc = append_q(r, q);
        if (rc == 0) rc = sk_redis_read(r, out);
        if (rc < 0) return rc;
        const redisReply *x = *out;
        if (!r->url.sentinel || tries || x->type != REDIS_REPLY_ERROR ||
            strncmp(x->str, "READONLY", 8) != 0)
            return 0;
        freeReplyObject(*out);
        *out = NULL;
        sk_aredis_tick(r->a); /* the front leaves it and asks the Sentinels */
    }
}

/* ---- the API ------------------------------------------------------------------------ */

/* The process's choice (sk_redis_functions_default): 1 = never Functions. */
static int fn_off_default;

void sk_redis_functions_default(int on)
{
    fn_off_default = !on;
}

int sk_redis_new(sk_redis **out, const char *url, int connect_timeout_ms, int command_timeout_ms,
                 char *errbuf, size_t errcap)
{
    *out = NULL;
    sk_redis *r = calloc(1, sizeof *r);
    if (!r) return SK_ENOMEM;
    if (sk_redis_url_parse(&r->url, url, strlen(url), errbuf, errcap) < 0) {
        free(r);
        return SK_EINVAL;
    }
    r->connect_timeout_ms = connect_timeout_ms > 0 ? connect_timeout_ms : 1000;
    r->command_timeout_ms = command_timeout_ms > 0 ? command_timeout_ms : 1000;
    if (fn_off_default) r->fn = SK_FN_OFF;
    *out = r;
    return 0;
}

void sk_redis_disconnect(sk_redis *r)
{
    if (!r) return;
    calls_drop(r);
    pipe_reset(r);
    transport_drop(r);
}

void sk_redis_free(sk_redis *r)
{
    if (!r) return;
    sk_redis_disconnect(r);
    loop_give(r->loop, r->loop_pid);
    while (r->spare) {
        struct sk_rcall *c = r->spare;
        r->spare = c->next;
        free(c);
    }
    free(r);
}

int sk_redis_connect(sk_redis *r)
{
    sk_redis_disconnect(r);
    int rc = ready(r);
    if (rc < 0) return rc;
    note_transport(r);
    r->err = 0;
    r->errstr[0] = 0;
    return 0;
}

int sk_redis_ensure(sk_redis *r)
{
    /* what came since the loop last ran first (a lost connection, a
     * Sentinel's news); a caller between two commands has just heard it */
    if (r->a && !r->pipe_n && sk_mono_ms() - r->pumped_ms > PUMP_MS) pump(r, 0);
    int rc = ready(r);
    if (rc == 0) note_transport(r);
    return rc;
}

int sk_redis_command(sk_redis *r, redisReply **out, int argc, const char **argv, const size_t *lens)
{
    struct queued q = {argc, argv, lens, -1, 0, NULL, NULL, NULL};
    return exchange(r, &q, out);
}

/* argv view of hiredis's RESP encoding of a formatted command (*N $L
 * bytes ...), no copies; the arrays are the caller's to free. */
static int resp_argv(char *buf, size_t len, const char ***argv, size_t **lens)
{
    char *p = buf, *end = buf + len;
    if (len < 4 || *p != '*') return SK_EPROTO;
    long n = strtol(p + 1, &p, 10);
    if (n < 1 || n > 1 << 20) return SK_EPROTO;
    *argv = malloc(sizeof **argv * (size_t)n);
    *lens = malloc(sizeof **lens * (size_t)n);
    if (!*argv || !*lens) return SK_ENOMEM;
    p += 2;
    for (long i = 0; i < n; i++) {
        if (p >= end || *p != '$') return SK_EPROTO;
        long l = strtol(p + 1, &p, 10);
        p += 2;
        if (l < 0 || p + l + 2 > end) return SK_EPROTO;
        (*argv)[i] = p;
        (*lens)[i] = (size_t)l;
        p += l + 2;
    }
    return (int)n;
}

int sk_redis_vcmd(sk_redis *r, redisReply **out, const char *fmt, va_list ap)
{
    *out = NULL;
    char *buf = NULL;
    int len = redisvFormatCommand(&buf, fmt, ap);
    if (len < 0 || !buf) return set_err(r, SK_ENOMEM, "cannot format command");
    const char **argv = NULL;
    size_t *lens = NULL;
    int argc = resp_argv(buf, (size_t)len, &argv, &lens);
    int rc = argc < 0 ? set_err(r, argc, "cannot parse formatted command")
                      : sk_redis_command(r, out, argc, argv, lens);
    free(argv);
    free(lens);
    redisFreeCommand(buf);
    return rc;
}

int sk_redis_cmd(sk_redis *r, redisReply **out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = sk_redis_vcmd(r, out, fmt, ap);
    va_end(ap);
    return rc;
}

int sk_redis_master_command(sk_redis *r, int k, redisReply **out, int argc, const char **argv,
                            const size_t *lens)
{
    *out = NULL;
    if (!r->url.cluster) return k == 0 ? sk_redis_command(r, out, argc, argv, lens) : SK_ENOTFOUND;
    if (r->pipe_n || r->pipe_broken) pipe_abandon(r);
    int rc = ready(r);
    if (rc < 0) return rc;
    /* the front is ready when one master is: this one may still connect */
    int64_t by = sk_mono_ms() + 2 * r->connect_timeout_ms + READY_SLACK_MS;
    struct sk_aredis *node;
    int n;
    while (!((node = sk_aredis_cl_master_k(r->a, k, &n)) && sk_aredis_ready(node)) && k < n &&
           sk_mono_ms() < by)
        pump(r, PUMP_MS);
    if (k >= n) return set_err(r, SK_ENOTFOUND, "redis cluster: no master %d", k);
    if (!node || !sk_aredis_ready(node))
        return set_err(r, SK_EIO, "redis cluster: master %d of the map not ready: %.200s", k,
                       node ? sk_aredis_errstr(node) : "no connection");
    struct queued q = {argc, argv, lens, -1, 0, NULL, NULL, node};
    rc = enqueue(r, &q);
    if (rc == 0) rc = sk_redis_read(r, out);
    return rc;
}

int sk_redis_cluster_stats(const sk_redis *r, struct sk_cluster_stats *out)
{
    if (!r->url.cluster) return SK_EINVAL;
    *out = r->cl_before;
    if (r->a) stats_add(out, r->a);
    return 0;
}

const struct sk_cluster_map *sk_redis_cluster_map(const sk_redis *r)
{
    return r->url.cluster && r->a ? sk_aredis_cl_map(r->a) : NULL;
}

/* ---- the servers' settings (redis_settings.h) ------------------------------------ */

struct each_settings {
    void (*fn)(void *data, const char *addr, const struct sk_rsettings *s);
    void *data;
};

static void settings_of(void *data, const struct sk_aredis_master *m)
{
    const struct each_settings *e = data;
    if (m->settings->nfields > 0) e->fn(e->data, m->addr, m->settings);
}

void sk_redis_each_settings(const sk_redis *r,
                            void (*fn)(void *data, const char *addr, const struct sk_rsettings *s),
                            void *data)
{
    struct each_settings e = {fn, data};
    if (r->a) sk_aredis_each_master(r->a, settings_of, &e);
}

void sk_redis_refresh_settings(sk_redis *r)
{
    if (!r->a) return;
    sk_aredis_settings_pending(r->a, 1);
    int64_t by = sk_mono_ms() + r->command_timeout_ms;
    do
        pump(r, sk_mono_ms() + PUMP_MS < by ? PUMP_MS : 0);
    while (sk_aredis_settings_pending(r->a, 0) && sk_mono_ms() < by);
}

int sk_redis_probe_settings(sk_redis *r, const char *host, int port, struct sk_rsettings *s)
{
    sk_rsettings_init(s);
    sk_redis *p = calloc(1, sizeof *p);
    if (!p) return set_err(r, SK_ENOMEM, "out of memory");
    sk_redis_url_node(&p->url, &r->url, host, port, 1);
    p->connect_timeout_ms = r->connect_timeout_ms;
    p->command_timeout_ms = r->command_timeout_ms;
    p->bare = 1; /* a replica: no scripts, and the handshake's AUTH and SELECT only */
    redisReply *rep;
    int rc = sk_redis_command(p, &rep, 1, (const char *[]){"INFO"}, NULL);
    if (rc < 0) {
        set_err(r, rc, "%s", p->errstr);
    } else {
        if (rep->type == REDIS_REPLY_STRING || rep->type == REDIS_REPLY_STATUS)
            (void)sk_rsettings_info(s, rep->str, rep->len); /* a bad field stays unknown */
        freeReplyObject(rep);
    }
    sk_redis_free(p);
    return rc;
}

/* ---- scripts (script.h): the transport's FCALL / EVALSHA, NOSCRIPT resent -------- */

/* A script call queued as it is: the transport builds its argv. */
static int with_script(sk_redis *r, enum sk_script_id id, int nkeys, const char *const *keys,
                       int nargs, const char *const *args, const size_t *arglens, redisReply **out)
{
    if (nkeys < 0 || nargs < 0 || nkeys + nargs > SK_SCRIPT_MAX_ARGS)
        return set_err(r, SK_EINVAL, "script %s: too many arguments", sk_script_name(id));
    struct queued q = {nkeys, keys, NULL, (int)id, nargs, args, arglens, NULL};
    return out ? exchange(r, &q, out) : append_q(r, &q);
}

int sk_script_append(sk_redis *r, enum sk_script_id id, int nkeys, const char *const *keys,
                     int nargs, const char *const *args, const size_t *arglens)
{
    return with_script(r, id, nkeys, keys, nargs, args, arglens, NULL);
}

int sk_script_eval(sk_redis *r, enum sk_script_id id, int nkeys, const char *const *keys, int nargs,
                   const char *const *args, const size_t *arglens, redisReply **out)
{
    *out = NULL;
    int rc = with_script(r, id, nkeys, keys, nargs, args, arglens, out);
    if (rc < 0) return rc;
    if ((*out)->type == REDIS_REPLY_ERROR)
        return set_err(r, SK_ESCRIPT, "script %s: %s", sk_script_name(id), (*out)->str);
    return 0;
}
