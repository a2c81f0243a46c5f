/* redis_conn_cluster.c - the blocking client's Redis Cluster half
 * (redis+cluster://, see redis_conn.h and docs/cluster.md): the slot map,
 * one connection per master, routing by the slot of the first key,
 * MOVED/ASK/TRYAGAIN/CLUSTERDOWN followed, pipelines queued and sent to
 * their nodes at the first read, and XREAD split across nodes. Everything
 * here runs only when r->cl is set (redis_conn_int.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/vec.h"
#include "redis/redis_conn.h"
#include "redis/redis_conn_int.h"

enum cl_kind { K_KEYED, K_ANY, K_ALL, K_STICKY, K_NODE };

/* One command queued by sk_redis_append, or one part of a split XREAD. */
struct cl_item {
    char *cmd; /* RESP bytes (redisFormatCommandArgv), freed when read */
    size_t len;
    int slot; /* of its first key, -1 keyless */
    int kind;
    int unit; /* index of the first item of its unit (a MULTI...EXEC run) */
    redisReply *rep;
    int err; /* SK_E* when no reply will come */
};

struct sk_rcluster {
    struct sk_cluster_map map;
    redisContext *node[SK_CLUSTER_MAX_NODES]; /* by map node index */
    int stale;                                /* re-read the map before the next command */
    int sticky;        /* node of the last keyed command: MULTI/EXEC/UNWATCH go there */
    struct cl_item *q; /* pipeline: [0, sent) sent and answered, [sent, nq) queued */
    size_t nq, cap, sent, rd;
    int in_multi;
    struct sk_cluster_stats st;
};

int sk_redis_cl_new(sk_redis *r)
{
    struct sk_rcluster *cl = calloc(1, sizeof *cl);
    if (!cl) return SK_ENOMEM;
    sk_cluster_map_init(&cl->map);
    for (int i = 0; i < r->url.nseeds; i++)
        if (sk_cluster_map_node(&cl->map, r->url.seeds[i].host, r->url.seeds[i].port) < 0) {
            free(cl);
            return SK_ENOMEM;
        }
    cl->sticky = -1;
    r->cl = cl;
    return 0;
}

static void node_drop(sk_redis *r, int i)
{
    struct sk_rcluster *cl = r->cl;
    if (!cl->node[i]) return;
    if (r->c == cl->node[i]) r->c = NULL;
    redisFree(cl->node[i]);
    cl->node[i] = NULL;
}

static void q_reset(struct sk_rcluster *cl)
{
    for (size_t i = cl->rd; i < cl->nq; i++) {
        free(cl->q[i].cmd);
        if (cl->q[i].rep) freeReplyObject(cl->q[i].rep);
    }
    cl->nq = cl->sent = cl->rd = 0;
    cl->in_multi = 0;
}

void sk_redis_cl_drop_all(sk_redis *r)
{
    for (int i = 0; i < SK_CLUSTER_MAX_NODES; i++)
        node_drop(r, i);
    q_reset(r->cl); /* a half-read pipeline must not answer a later read */
    r->c = NULL;
}

void sk_redis_cl_free(sk_redis *r)
{
    if (!r->cl) return;
    free(r->cl->q);
    free(r->cl);
    r->cl = NULL;
}

static int node_get(sk_redis *r, int i, redisContext **out)
{
    struct sk_rcluster *cl = r->cl;
    if (!cl->node[i]) {
        int rc = sk_redis_open_ctx(r, cl->map.nodes[i].host, cl->map.nodes[i].port, &cl->node[i]);
        if (rc < 0) {
            cl->st.node_errors++;
            return rc;
        }
    }
    *out = cl->node[i];
    return 0;
}

/* Reads the slot map from the first node that answers CLUSTER SLOTS:
 * masters first, then every other known node (seeds included). */
static int cl_refresh(sk_redis *r)
{
    struct sk_rcluster *cl = r->cl;
    int rc = SK_EIO;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < cl->map.nnodes; i++) {
            if (sk_cluster_map_is_master(&cl->map, i) != (pass == 0)) continue;
            redisContext *c;
            if ((rc = node_get(r, i, &c)) < 0) continue;
            redisReply *rep = redisCommand(c, "CLUSTER SLOTS");
            if (!rep) {
                node_drop(r, i);
                rc = sk_redis_set_err(r, SK_EIO, "redis %s:%d: CLUSTER SLOTS: connection lost",
                                      cl->map.nodes[i].host, cl->map.nodes[i].port);
                continue;
            }
            char host[64];
            snprintf(host, sizeof host, "%s", cl->map.nodes[i].host);
            rc = rep->type == REDIS_REPLY_ARRAY && rep->elements
                     ? sk_cluster_map_apply(&cl->map, rep, host)
                     : SK_EPROTO;
            if (rc < 0)
                sk_redis_set_err(r, rc, "redis %s:%d: CLUSTER SLOTS: %s", host,
                                 cl->map.nodes[i].port,
                                 rep->type == REDIS_REPLY_ERROR ? rep->str : "no slot map");
            freeReplyObject(rep);
            if (rc == 0) {
                cl->stale = 0;
                cl->st.refreshes++;
                return 0;
            }
        }
    return rc;
}

static int first_master(const struct sk_rcluster *cl)
{
    for (int i = 0; i < cl->map.nnodes; i++)
        if (sk_cluster_map_is_master(&cl->map, i)) return i;
    return -1;
}

static int cl_pick(const struct sk_rcluster *cl, int slot, int kind)
{
    switch (kind) {
    case K_KEYED: return sk_cluster_map_owner(&cl->map, slot);
    case K_NODE: return slot;
    case K_STICKY:
        if (cl->sticky >= 0) return cl->sticky;
        return first_master(cl);
    default: return first_master(cl);
    }
}

/* Backoff between retries of one command: bounded (SK_CLUSTER_MAX_RETRIES
 * waits of 10..200 ms, ~2 s in all), which covers a failover or a slot
 * migration on a healthy cluster. 1 to retry, 0 when out of tries. */
static int wait_more(struct sk_rcluster *cl, int *waits)
{
    if (++*waits > SK_CLUSTER_MAX_RETRIES) return 0;
    cl->st.retries++;
    int ms = *waits * 10 > 200 ? 200 : *waits * 10;
    struct timespec ts = {0, (long)ms * 1000000L};
    nanosleep(&ts, NULL);
    return 1;
}

static int cl_kind_of(int argc, const char **argv, const size_t *lens, int slot)
{
    if (slot >= 0) return K_KEYED;
    if (argc < 1) return K_ANY;
    static const char *const all[] = {"SCRIPT", "CONFIG", "FLUSHALL", "FLUSHDB", "FUNCTION"};
    static const char *const sticky[] = {"MULTI", "EXEC", "DISCARD", "UNWATCH"};
    size_t l = lens ? lens[0] : strlen(argv[0]);
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (l == strlen(all[i]) && strncasecmp(argv[0], all[i], l) == 0) return K_ALL;
    for (size_t i = 0; i < sizeof sticky / sizeof sticky[0]; i++)
        if (l == strlen(sticky[i]) && strncasecmp(argv[0], sticky[i], l) == 0) return K_STICKY;
    return K_ANY;
}

/* Runs n formatted commands on the node of (slot, kind) as one unit (one
 * command, or a MULTI...EXEC run), following MOVED/ASK and waiting out
 * TRYAGAIN/CLUSTERDOWN. Fills reps[0..n) and returns 0; when redirections
 * run out, the last error replies are returned as replies. An I/O error
 * after sending is a failure (SK_EIO/SK_ETIMEDOUT) and nothing is resent:
 * the command may have run. A redirected command never ran, so following
 * the redirection cannot act twice. */
static int cl_exec_unit(sk_redis *r, struct cl_item *it, int n, int slot, int kind,
                        redisReply **reps)
{
    struct sk_rcluster *cl = r->cl;
    int redirects = 0, waits = 0, asking = 0, node = -1;
    for (;;) {
        for (int i = 0; i < n; i++)
            reps[i] = NULL;
        if (node < 0) {
            if ((cl->stale || !cl->map.loaded) && cl_refresh(r) < 0 && !cl->map.loaded)
                return r->err;
            node = cl_pick(cl, slot, kind);
            if (node < 0) {
                if (wait_more(cl, &waits)) {
                    cl->stale = 1;
                    continue;
                }
                return sk_redis_set_err(r, SK_EIO, "redis cluster: slot %d is not served", slot);
            }
        }
        redisContext *c;
        int rc = node_get(r, node, &c);
        if (rc < 0) {
            /* refused before anything was sent: safe to retry elsewhere */
            cl->stale = 1;
            node = -1;
            asking = 0;
            if (kind != K_NODE && wait_more(cl, &waits)) continue;
            return rc;
        }
        if (asking) redisAppendCommand(c, "ASKING");
        for (int i = 0; i < n; i++)
            redisAppendFormattedCommand(c, it[i].cmd, it[i].len);
        int io = 0;
        if (asking) {
            void *a = NULL;
            if (redisGetReply(c, &a) != REDIS_OK || !a)
                io = 1;
            else
                freeReplyObject(a);
        }
        for (int i = 0; i < n && !io; i++)
            if (redisGetReply(c, (void **)&reps[i]) != REDIS_OK || !reps[i]) io = 1;
        if (io) {
            int timeout = c->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK);
            sk_redis_set_err(r, timeout ? SK_ETIMEDOUT : SK_EIO, "redis %s:%d: %s",
                             cl->map.nodes[node].host, cl->map.nodes[node].port,
                             timeout ? "timed out"
                                     : (c->errstr[0] ? c->errstr : "connection lost"));
            for (int i = 0; i < n; i++)
                if (reps[i]) freeReplyObject(reps[i]);
            node_drop(r, node);
            cl->stale = 1;
            cl->st.node_errors++;
            return r->err;
        }
        int act = 0, rslot = -1, port = 0;
        char host[64];
        for (int i = 0; i < n && !act; i++)
            if (reps[i]->type == REDIS_REPLY_ERROR) {
                act = sk_cluster_parse_redirect(reps[i]->str, &rslot, host, sizeof host, &port);
                if (!act && sk_cluster_is_transient(reps[i]->str)) act = 3;
            }
        if (!act) {
            if (kind == K_KEYED) cl->sticky = node;
            r->err = 0;
            return 0;
        }
        int again = 0;
        if (act == SK_CLUSTER_MOVED && ++redirects <= SK_CLUSTER_MAX_REDIRECTS) {
            cl->st.moved++;
            int nn = sk_cluster_map_node(&cl->map, host, port);
            if (nn >= 0) sk_cluster_map_set(&cl->map, rslot, nn);
            cl->stale = 1; /* one slot moved: others may have too */
            node = kind == K_KEYED ? nn : -1;
            asking = 0;
            again = 1;
        } else if (act == SK_CLUSTER_ASK && n == 1 && ++redirects <= SK_CLUSTER_MAX_REDIRECTS) {
            cl->st.ask++;
            node = sk_cluster_map_node(&cl->map, host, port);
            asking = node >= 0;
            again = 1;
        } else if (kind != K_NODE) {
            /* TRYAGAIN, CLUSTERDOWN, or ASK inside MULTI (an ASKING flag does
             * not survive queueing): the migration or election ends soon */
            if (act == SK_CLUSTER_ASK) cl->st.ask++;
            cl->stale = 1;
            node = -1;
            asking = 0;
            again = wait_more(cl, &waits);
        }
        if (!again) {
            r->err = 0;
            return 0; /* out of tries: the caller sees the error replies */
        }
        for (int i = 0; i < n; i++)
            freeReplyObject(reps[i]);
    }
}

int sk_redis_cl_ensure(sk_redis *r)
{
    struct sk_rcluster *cl = r->cl;
    if (r->c && cl->map.loaded && !cl->stale) return 0;
    int64_t now = sk_mono_ms();
    if (r->backoff_ms && now < r->next_try_ms)
        return r->err ? r->err
                      : sk_redis_set_err(r, SK_EIO, "redis unreachable (reconnect backoff)");
    int rc = cl_refresh(r);
    int m = first_master(cl);
    if (rc == 0 && m < 0)
        rc = sk_redis_set_err(r, SK_EIO, "redis cluster: no master serves a slot");
    redisContext *c = NULL;
    if (rc == 0) rc = node_get(r, m, &c);
    if (rc < 0) {
        sk_redis_backoff(r, now);
        return rc;
    }
    if (!r->c) r->connects++;
    r->c = c; /* borrowed alias, see redis_conn.h */
    r->backoff_ms = 0;
    return 0;
}

int sk_redis_cl_connect(sk_redis *r)
{
    r->backoff_ms = 0;
    r->cl->stale = 1;
    int rc = sk_redis_cl_ensure(r);
    if (rc == 0) r->connects--; /* sk_redis_connect counts it */
    return rc;
}

/* Same command on every master (SCRIPT LOAD, CONFIG SET, FLUSHALL): the
 * first error reply wins, else the first master's reply. */
static int cl_exec_all(sk_redis *r, struct cl_item *it, redisReply **out)
{
    struct sk_rcluster *cl = r->cl;
    *out = NULL;
    if ((cl->stale || !cl->map.loaded) && cl_refresh(r) < 0 && !cl->map.loaded) return r->err;
    for (int i = 0; i < cl->map.nnodes; i++) {
        if (!sk_cluster_map_is_master(&cl->map, i)) continue;
        redisReply *rep;
        int rc = cl_exec_unit(r, it, 1, i, K_NODE, &rep);
        if (rc < 0) {
            if (*out) freeReplyObject(*out);
            *out = NULL;
            return rc;
        }
        if (!*out || (rep->type == REDIS_REPLY_ERROR && (*out)->type != REDIS_REPLY_ERROR)) {
            if (*out) freeReplyObject(*out);
            *out = rep;
        } else {
            freeReplyObject(rep);
        }
    }
    if (!*out) return sk_redis_set_err(r, SK_EIO, "redis cluster: no master");
    return 0;
}

static int item_init(struct cl_item *it, int argc, const char **argv, const size_t *lens)
{
    memset(it, 0, sizeof *it);
    char *cmd = NULL;
    int len = redisFormatCommandArgv(&cmd, argc, argv, lens);
    if (len < 0 || !cmd) return SK_ENOMEM;
    it->cmd = cmd;
    it->len = (size_t)len;
    it->slot = sk_cluster_command_slot(argc, (const char *const *)argv, lens);
    it->kind = cl_kind_of(argc, argv, lens, it->slot);
    return 0;
}

int sk_redis_cl_master_command(sk_redis *r, int k, redisReply **out, int argc, const char **argv,
                               const size_t *lens)
{
    struct sk_rcluster *cl = r->cl;
    int rc = sk_redis_cl_ensure(r);
    if (rc < 0) return rc;
    if ((cl->stale || !cl->map.loaded) && cl_refresh(r) < 0 && !cl->map.loaded) return r->err;
    int node = -1;
    for (int i = 0, seen = 0; i < cl->map.nnodes && node < 0; i++)
        if (sk_cluster_map_is_master(&cl->map, i) && seen++ == k) node = i;
    if (node < 0) return SK_ENOTFOUND;
    struct cl_item it;
    if ((rc = item_init(&it, argc, argv, lens)) < 0)
        return sk_redis_set_err(r, rc, "out of memory");
    rc = cl_exec_unit(r, &it, 1, node, K_NODE, out);
    free(it.cmd);
    return rc;
}

static int cl_split_xread(sk_redis *r, redisReply **out, int argc, const char **argv,
                          const size_t *lens, int first, int count);

int sk_redis_cl_command(sk_redis *r, redisReply **out, int argc, const char **argv,
                        const size_t *lens)
{
    int rc = sk_redis_cl_ensure(r);
    if (rc < 0) return rc;
    int first, count;
    if (sk_cluster_streams(argc, (const char *const *)argv, lens, &first, &count) && count > 1) {
        /* by slot, not by node: a node refuses keys of two slots in one
         * command (CROSSSLOT), though it owns both */
        int o = -2;
        for (int i = 0; i < count && o != -3; i++) {
            size_t l = lens ? lens[first + i] : strlen(argv[first + i]);
            int n = sk_cluster_key_slot(argv[first + i], l);
            o = o == -2 || o == n ? n : -3;
        }
        if (o == -3) return cl_split_xread(r, out, argc, argv, lens, first, count);
    }
    struct cl_item it;
    if ((rc = item_init(&it, argc, argv, lens)) < 0)
        return sk_redis_set_err(r, rc, "out of memory");
    rc = it.kind == K_ALL ? cl_exec_all(r, &it, out)
                          : cl_exec_unit(r, &it, 1, it.slot, it.kind, out);
    free(it.cmd);
    return rc;
}

/* argv view of hiredis's own RESP encoding (*N $L bytes ...), no copies. */
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

int sk_redis_cl_vcmd(sk_redis *r, redisReply **out, const char *fmt, va_list ap)
{
    char *buf = NULL;
    int len = redisvFormatCommand(&buf, fmt, ap);
    if (len < 0 || !buf) return sk_redis_set_err(r, SK_ENOMEM, "cannot format command");
    const char **argv = NULL;
    size_t *lens = NULL;
    int argc = resp_argv(buf, (size_t)len, &argv, &lens);
    int rc = argc < 0 ? sk_redis_set_err(r, argc, "cannot parse formatted command")
                      : sk_redis_cl_command(r, out, argc, argv, lens);
    free(argv);
    free(lens);
    free(buf);
    return rc;
}

static int q_push(sk_redis *r, int argc, const char **argv, const size_t *lens)
{
    struct sk_rcluster *cl = r->cl;
    if (SK_VEC_RESERVE(cl->q, cl->cap, cl->nq + 1, 64))
        return sk_redis_set_err(r, SK_ENOMEM, "out of memory");
    struct cl_item *it = &cl->q[cl->nq];
    if (item_init(it, argc, argv, lens) < 0) return sk_redis_set_err(r, SK_ENOMEM, "out of memory");
    /* a MULTI...EXEC run is one unit: it must reach one node as a whole */
    int is_multi = argc >= 1 && strncasecmp(argv[0], "MULTI", 6) == 0;
    int ends = argc >= 1 &&
               (strncasecmp(argv[0], "EXEC", 5) == 0 || strncasecmp(argv[0], "DISCARD", 8) == 0);
    if (is_multi) {
        it->unit = (int)cl->nq;
        cl->in_multi = 1;
    } else if (cl->in_multi) {
        it->unit = cl->q[cl->nq - 1].unit;
        if (ends) cl->in_multi = 0;
    } else {
        it->unit = (int)cl->nq;
    }
    cl->nq++;
    return 0;
}

int sk_redis_cl_append(sk_redis *r, int argc, const char **argv, const size_t *lens)
{
    /* queued only: routing waits for the first read, so a pipeline under
     * way needs no map and no connection yet */
    int rc = r->cl->nq ? 0 : sk_redis_cl_ensure(r);
    if (rc < 0) return rc;
    return q_push(r, argc, argv, lens);
}

void sk_redis_cl_pipe_drop(sk_redis *r)
{
    q_reset(r->cl);
}

/* Unit [b, e) of the queue: its slot (first keyed command) and kind. */
static void unit_route(const struct cl_item *q, size_t b, size_t e, int *slot, int *kind)
{
    *slot = -1;
    *kind = q[b].kind;
    for (size_t i = b; i < e; i++)
        if (q[i].slot >= 0) {
            *slot = q[i].slot;
            *kind = K_KEYED;
            return;
        }
}

static size_t unit_end(const struct sk_rcluster *cl, size_t b)
{
    size_t e = b + 1;
    while (e < cl->nq && cl->q[e].unit == (int)b)
        e++;
    return e;
}

/* Sends the queued units [sent, nq): first every keyed unit to its node,
 * all nodes written before any is read (so nodes work in parallel), then
 * the replies are collected; units that were redirected, could not be
 * sent, or are keyless then run one by one through cl_exec_unit. */
static void q_flush(sk_redis *r)
{
    struct sk_rcluster *cl = r->cl;
    size_t b0 = cl->sent;
    r->errstr[0] = 0; /* what a failure below writes is what its reads report */
    int sent_to[SK_CLUSTER_MAX_NODES] = {0};
    int *node_of = malloc(sizeof *node_of * (cl->nq - b0));
    if (!node_of) {
        for (size_t i = b0; i < cl->nq; i++)
            cl->q[i].err = SK_ENOMEM;
        cl->sent = cl->nq;
        return;
    }
    if ((cl->stale || !cl->map.loaded)) cl_refresh(r);
    /* 1: write */
    for (size_t b = b0, e; b < cl->nq; b = e) {
        e = unit_end(cl, b);
        int slot, kind;
        unit_route(cl->q, b, e, &slot, &kind);
        int node = kind == K_KEYED ? sk_cluster_map_owner(&cl->map, slot) : -1;
        redisContext *c;
        if (node >= 0 && node_get(r, node, &c) < 0) node = -1;
        for (size_t i = b; i < e; i++) {
            node_of[i - b0] = node;
            if (node >= 0) redisAppendFormattedCommand(c, cl->q[i].cmd, cl->q[i].len);
        }
        if (node >= 0) sent_to[node] = 1;
    }
    for (int n = 0; n < cl->map.nnodes; n++) {
        int done = 0;
        while (sent_to[n] && cl->node[n] && !done)
            if (redisBufferWrite(cl->node[n], &done) != REDIS_OK) break; /* read reports it */
    }
    /* 2: read, in order (each node answers its own commands in order) */
    for (size_t b = b0, e; b < cl->nq; b = e) {
        e = unit_end(cl, b);
        int node = node_of[b - b0];
        if (node < 0) continue;
        int redo = 0;
        for (size_t i = b; i < e; i++) {
            void *rep = NULL;
            if (!cl->node[node] || redisGetReply(cl->node[node], &rep) != REDIS_OK || !rep) {
                if (cl->node[node])
                    sk_redis_set_err(r, SK_EIO, "redis %s:%d: %s", cl->map.nodes[node].host,
                                     cl->map.nodes[node].port,
                                     cl->node[node]->errstr[0] ? cl->node[node]->errstr
                                                               : "connection lost");
                node_drop(r, node);
                cl->stale = 1;
                cl->st.node_errors++;
                cl->q[i].err = r->err ? r->err : SK_EIO;
                continue;
            }
            cl->q[i].rep = rep;
            const redisReply *x = rep;
            if (x->type == REDIS_REPLY_ERROR) {
                int s, p;
                char h[64];
                if (sk_cluster_parse_redirect(x->str, &s, h, sizeof h, &p) ||
                    sk_cluster_is_transient(x->str))
                    redo = 1;
            }
        }
        int failed = 0;
        for (size_t i = b; i < e; i++)
            failed |= cl->q[i].err != 0;
        if (redo && !failed) {
            for (size_t i = b; i < e; i++) {
                freeReplyObject(cl->q[i].rep);
                cl->q[i].rep = NULL;
            }
            node_of[b - b0] = -1; /* run again below; it never ran */
            if (cl->q[b].rep == NULL) cl->stale = 1;
        } else if (failed) {
            /* part of a unit is lost: the whole unit fails (it may have run) */
            for (size_t i = b; i < e; i++) {
                if (cl->q[i].rep) freeReplyObject(cl->q[i].rep);
                cl->q[i].rep = NULL;
                if (!cl->q[i].err) cl->q[i].err = SK_EIO;
            }
        }
    }
    /* 3: the rest, one unit at a time, with redirections followed */
    for (size_t b = b0, e; b < cl->nq; b = e) {
        e = unit_end(cl, b);
        if (node_of[b - b0] >= 0) continue;
        if (cl->q[b].err) continue;
        int slot, kind;
        unit_route(cl->q, b, e, &slot, &kind);
        size_t n = e - b;
        redisReply *one, **reps = n == 1 ? &one : calloc(n, sizeof *reps);
        int rc = !reps                     ? SK_ENOMEM
                 : kind == K_ALL && n == 1 ? cl_exec_all(r, &cl->q[b], reps)
                                           : cl_exec_unit(r, &cl->q[b], (int)n, slot, kind, reps);
        for (size_t i = b; i < e; i++) {
            if (rc < 0)
                cl->q[i].err = rc;
            else
                cl->q[i].rep = reps[i - b];
        }
        if (reps != &one) free(reps);
    }
    free(node_of);
    cl->sent = cl->nq;
}

int sk_redis_cl_read(sk_redis *r, redisReply **out)
{
    struct sk_rcluster *cl = r->cl;
    if (cl->rd >= cl->nq) return sk_redis_set_err(r, SK_EIO, "redis connection lost");
    if (cl->rd >= cl->sent) q_flush(r);
    struct cl_item *it = &cl->q[cl->rd++];
    free(it->cmd);
    it->cmd = NULL;
    int rc = it->err;
    *out = it->rep;
    it->rep = NULL;
    if (cl->rd == cl->nq) cl->nq = cl->sent = cl->rd = 0;
    if (rc < 0) {
        /* the node's failure, as q_flush or cl_exec_unit wrote it */
        if (!r->errstr[0]) sk_redis_set_err(r, rc, "redis cluster: command lost");
        r->err = rc;
        return rc;
    }
    r->err = 0;
    return 0;
}

/* XREAD/XREADGROUP over streams of several slots: one call per slot (a
 * node refuses two slots in one command), sent together through the
 * pipeline (the calls to one node on its connection, every node written
 * before any is read), replies merged into one array. */
static int cl_split_xread(sk_redis *r, redisReply **out, int argc, const char **argv,
                          const size_t *lens, int first, int count)
{
    struct sk_rcluster *cl = r->cl;
    if (cl->nq) return sk_redis_set_err(r, SK_ESTATE, "XREAD split inside a pipeline");
    const char **a = malloc(sizeof *a * (size_t)argc);
    size_t *l = malloc(sizeof *l * (size_t)argc);
    int *owner = malloc(sizeof *owner * (size_t)count);
    int rc = 0, parts = 0;
    if (!a || !l || !owner) rc = sk_redis_set_err(r, SK_ENOMEM, "out of memory");
    for (int i = 0; i < count && !rc; i++) {
        size_t kl = lens ? lens[first + i] : strlen(argv[first + i]);
        owner[i] = sk_cluster_key_slot(argv[first + i], kl);
    }
    for (int i = 0; i < count && !rc; i++) {
        if (owner[i] == -2) continue; /* already in a part */
        int o = owner[i], k = 0;
        for (int j = 0; j < first; j++) {
            size_t lj = lens ? lens[j] : strlen(argv[j]);
            /* only the first part blocks: the others answer at once, so a
             * BLOCK waits its time once, not once per part of a node */
            if (parts > 0 && lj == 5 && !strncasecmp(argv[j], "BLOCK", 5) && j + 2 < first) {
                j++;
                continue;
            }
            a[k] = argv[j];
            l[k++] = lj;
        }
        for (int j = i; j < count; j++)
            if (owner[j] == o) {
                a[k] = argv[first + j];
                l[k++] = lens ? lens[first + j] : strlen(argv[first + j]);
            }
        for (int j = i; j < count; j++)
            if (owner[j] == o) {
                a[k] = argv[first + count + j];
                l[k++] = lens ? lens[first + count + j] : strlen(argv[first + count + j]);
                owner[j] = -2;
            }
        rc = q_push(r, k, a, l);
        parts++;
    }
    free(a);
    free(l);
    free(owner);
    if (rc) {
        q_reset(cl);
        return rc;
    }
    redisReply *merged = calloc(1, sizeof *merged), *err_rep = NULL;
    size_t total = 0;
    redisReply **reps = calloc((size_t)parts, sizeof *reps);
    if (!merged || !reps) rc = sk_redis_set_err(r, SK_ENOMEM, "out of memory");
    for (int i = 0; i < parts; i++) {
        int e = sk_redis_cl_read(r, &reps[i]); /* every part, failed or not: the queue empties */
        if (e < 0 && !rc) rc = e;
        if (reps[i] && reps[i]->type == REDIS_REPLY_ARRAY)
            total += reps[i]->elements;
        else if (reps[i] && reps[i]->type == REDIS_REPLY_ERROR && !err_rep)
            err_rep = reps[i];
    }
    if (!rc && err_rep) {
        *out = err_rep; /* NOGROUP and the like: the caller reacts to it */
    } else if (!rc && total == 0) {
        merged->type = REDIS_REPLY_NIL;
        *out = merged;
        merged = NULL;
    } else if (!rc) {
        merged->type = REDIS_REPLY_ARRAY;
        merged->element = calloc(total, sizeof *merged->element);
        if (!merged->element) {
            rc = sk_redis_set_err(r, SK_ENOMEM, "out of memory");
        } else {
            for (int i = 0; i < parts; i++) {
                if (!reps[i] || reps[i]->type != REDIS_REPLY_ARRAY) continue;
                for (size_t j = 0; j < reps[i]->elements; j++)
                    merged->element[merged->elements++] = reps[i]->element[j];
                reps[i]->elements = 0; /* moved */
            }
            *out = merged;
            merged = NULL;
        }
    }
    for (int i = 0; i < parts; i++)
        if (reps && reps[i] && (rc || reps[i] != err_rep)) freeReplyObject(reps[i]);
    free(reps);
    free(merged);
    return rc;
}

int sk_redis_cluster_stats(const sk_redis *r, struct sk_cluster_stats *out)
{
    if (!r->cl) return SK_EINVAL;
    *out = r->cl->st;
    return 0;
}

const struct sk_cluster_map *sk_redis_cluster_map(const sk_redis *r)
{
    return r->cl ? &r->cl->map : NULL;
}
