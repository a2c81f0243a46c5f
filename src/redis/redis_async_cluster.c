/* redis_async_cluster.c - the async client's Redis Cluster front
 * (redis+cluster://, see sk_aredis_new and docs/cluster.md), and the
 * process-wide counts of the redirections it met (sk_aredis_redirects). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "redis/redis_async.h"
#include "redis/redis_async_int.h"
#include "redis/redis_cluster.h"

/* A cluster client is a front: one ordinary single-node client per master
 * (connect, handshake with SCRIPT LOAD, NOSCRIPT resend, timeouts and
 * reconnects are theirs), a slot map, and a wrapper per command that keeps
 * a copy of argv so a MOVED/ASK/TRYAGAIN answer can be resent with the same
 * callback. The map is read with CLUSTER SLOTS sent like any command, on the
 * loop (nothing here blocks): at start through a client of a seed of the URL,
 * later through a ready master's client, at the next tick after a topology
 * hint (MOVED, TRYAGAIN, a lost node). A node that does not answer costs
 * that read its reply timeout, and the next read asks another node. */

#define CL_REFRESH_MIN_MS 100  /* between two CLUSTER SLOTS reads */
#define CL_REFRESH_FAIL_MS 500 /* after a failed read: the loop must not spin on it */
#define CL_RETRY_MIN_MS 10
#define CL_RETRY_MAX_MS 200

struct cl_cmd {
    sk_aredis *front;
    sk_aredis *node; /* where it was last sent (for rtt) */
    sk_aredis_cb cb;
    void *data;
    int script, confirm, slot, hops, retries;
    int ask_node;   /* >= 0: ASKING + the command go there next */
    int64_t due_ms; /* parked: not before */
    struct cl_cmd *next;
    struct sk_aredis_args args; /* the command, in the same block as this */
};

struct ar_cluster {
    struct sk_cluster_map map;
    sk_aredis *node[SK_CLUSTER_MAX_NODES];   /* by map node index, created on first need */
    sk_aredis *seed[SK_REDIS_URL_MAX_SEEDS]; /* the URL's seeds, while no map is loaded */
    int reading;                             /* a CLUSTER SLOTS is in flight */
    int reading_seed;                        /* ... on a seed's client */
    unsigned ask_next, ask_i;                /* where the next read starts looking */
    char reading_host[64];                   /* the node asked (for an empty host) */
    struct cl_cmd *parked;                   /* waiting for a tick */
    size_t nparked;
    int stale, prefer, closing;
    int64_t next_refresh_ms;
    struct sk_cluster_stats stats;
    char errstr[256];
    char masters_seen[256]; /* the masters of the last map read, as logged */
    int gap_logged;         /* the map's slots without a master were logged */
    int started;            /* sk_aredis_cl_ready said 1 once */
    unsigned fails;         /* map reads failed in a row */
};

/* The client of node i, created (connecting) when missing; NULL on failure. */
static sk_aredis *cl_node(sk_aredis *ar, int i)
{
    struct ar_cluster *cl = ar->cl;
    if (i < 0 || i >= cl->map.nnodes) return NULL;
    if (cl->node[i]) return cl->node[i];
    struct sk_redis_url u; /* credentials of the cluster URL */
    sk_redis_url_node(&u, &ar->url, cl->map.nodes[i].host, cl->map.nodes[i].port, 0);
    char err[128];
    if (sk_aredis_node_new(&cl->node[i], ar->loop, &u, &ar->opts, AR_DATA, err, sizeof err) < 0) {
        snprintf(cl->errstr, sizeof cl->errstr, "redis cluster node %.64s:%d: %.80s", u.host,
                 u.port, err);
        cl->stats.node_errors++;
        return NULL;
    }
    return cl->node[i];
}

static void cl_map_read(sk_aredis *ar);

/* A client that can be asked for the map now: ready, and not sitting on a
 * command older than a refresh period (a stopped node answers nothing). */
static int cl_askable(const sk_aredis *n)
{
    return n && n->state == AR_READY && sk_aredis_oldest_ms(n) < CL_REFRESH_MIN_MS;
}

/* The answer to CLUSTER SLOTS: applied, or the next read asks another node. */
static void cl_on_slots(void *data, redisReply *rep)
{
    sk_aredis *ar = data;
    struct ar_cluster *cl = ar->cl;
    cl->reading = 0;
    if (cl->closing) return;
    if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements == 0 ||
        sk_cluster_map_apply(&cl->map, rep, cl->reading_host) < 0) {
        snprintf(cl->errstr, sizeof cl->errstr, "redis cluster %.64s: CLUSTER SLOTS: %.64s",
                 cl->reading_host,
                 !rep                             ? "no answer"
                 : rep->type == REDIS_REPLY_ERROR ? rep->str
                                                  : "no map");
        cl->ask_next = cl->ask_i + 1; /* the next read starts past it */
        /* the next node at once; after a round of failures, not in a loop */
        cl->fails++;
        cl->next_refresh_ms = sk_mono_ms() + (cl->fails % 3 ? CL_RETRY_MIN_MS : CL_REFRESH_FAIL_MS);
        return;
    }
    cl_map_read(ar);
}

/* Sends CLUSTER SLOTS to n (host: its address); 0 or SK_ENOMEM. */
static int cl_ask(sk_aredis *ar, sk_aredis *n, const char *host, int i, int seed)
{
    struct ar_cluster *cl = ar->cl;
    const char *argv[] = {"CLUSTER", "SLOTS"};
    if (sk_aredis_enqueue(n, cl_on_slots, ar, 2, argv, NULL, -1, 0) < 0) return SK_ENOMEM;
    snprintf(cl->reading_host, sizeof cl->reading_host, "%s", host);
    cl->reading = 1;
    cl->reading_seed = seed;
    cl->ask_i = (unsigned)i;
    sk_aredis_flush(n);
    return 0;
}

/* Opens a client to each seed of the URL that has none (they connect side
 * by side; a later read asks the first that is ready). */
static void cl_open_seeds(sk_aredis *ar, int ns)
{
    struct ar_cluster *cl = ar->cl;
    for (int i = 0; i < ns; i++) {
        if (cl->seed[i]) continue;
        struct sk_redis_url u;
        sk_redis_url_node(&u, &ar->url, ar->url.seeds[i].host, ar->url.seeds[i].port, 0);
        char err[128];
        if (sk_aredis_node_new(&cl->seed[i], ar->loop, &u, &ar->opts, AR_PROBE, err, sizeof err) <
            0)
            snprintf(cl->errstr, sizeof cl->errstr, "redis cluster seed %.64s:%d: %.80s", u.host,
                     u.port, err);
    }
}

/* Starts a read of the map: the node that sent the last MOVED first (it has
 * the new view), then the ready masters in turn, then the seeds of the URL.
 * Only asks: the answer comes to cl_on_slots. */
static void cl_refresh(sk_aredis *ar)
{
    struct ar_cluster *cl = ar->cl;
    if (cl->reading) return;
    int nn = cl->map.nnodes;
    if (cl->prefer >= 0 && cl->prefer < nn && cl_askable(cl->node[cl->prefer])) {
        int i = cl->prefer;
        cl->prefer = -1;
        if (cl_ask(ar, cl->node[i], cl->map.nodes[i].host, i, 0) == 0) return;
    }
    for (int k = 0; k < nn; k++) {
        int i = (int)((cl->ask_next + (unsigned)k) % (unsigned)nn);
        if (sk_cluster_map_is_master(&cl->map, i) && cl_askable(cl->node[i]) &&
            cl_ask(ar, cl->node[i], cl->map.nodes[i].host, i, 0) == 0)
            return;
    }
    int ns = ar->url.nseeds < SK_REDIS_URL_MAX_SEEDS ? ar->url.nseeds : SK_REDIS_URL_MAX_SEEDS;
    cl_open_seeds(ar, ns);
    for (int k = 0; k < ns; k++) {
        int i = (int)((cl->ask_next + (unsigned)k) % (unsigned)ns);
        if (cl_askable(cl->seed[i]) && cl_ask(ar, cl->seed[i], ar->url.seeds[i].host, i, 1) == 0)
            return;
    }
    /* nothing to ask yet (seeds connecting, or none reachable): soon again */
    cl->next_refresh_ms = sk_mono_ms() + CL_RETRY_MAX_MS;
    if (!cl->map.loaded && cl->seed[0])
        snprintf(cl->errstr, sizeof cl->errstr, "redis cluster: no seed ready (%.200s)",
                 sk_aredis_errstr(cl->seed[0]));
}

/* A map was applied: clients for new masters, the gap check, the log. */
static void cl_map_read(sk_aredis *ar)
{
    struct ar_cluster *cl = ar->cl;
    cl->next_refresh_ms = sk_mono_ms() + CL_REFRESH_MIN_MS;
    cl->fails = 0;
    cl->prefer = -1;
    cl->stats.refreshes++;
    /* A map with slots nobody serves is a view caught mid-failover (the
     * old master's slots dropped, the new one not yet known) or a cluster
     * missing masters: read it again until it is whole. Nothing else would
     * trigger the read: no command is sent for a slot without a master,
     * so no MOVED or lost reply ever comes back for it. */
    int uncovered = cl->map.uncovered;
    if (uncovered && !cl->gap_logged)
        sk_log(SK_LOG_WARN, "redis cluster: %d slots have no master in the map; reading it again",
               uncovered);
    cl->gap_logged = uncovered > 0;
    cl->stale = uncovered > 0;
    if (uncovered) {
        cl->next_refresh_ms = sk_mono_ms() + CL_REFRESH_FAIL_MS;
        snprintf(cl->errstr, sizeof cl->errstr, "redis cluster: %d slots have no master",
                 uncovered);
    }
    char masters[256];
    size_t n = 0;
    masters[0] = 0;
    for (int i = 0; i < cl->map.nnodes; i++) {
        if (!sk_cluster_map_is_master(&cl->map, i)) continue;
        cl_node(ar, i);
        int w = snprintf(masters + n, sizeof masters - n, "%s%.64s:%d", n ? " " : "",
                         cl->map.nodes[i].host, cl->map.nodes[i].port);
        if (w > 0 && (size_t)w < sizeof masters - n) n += (size_t)w;
    }
    /* a failover or reshard shows in the log once, not at every re-read */
    if (strcmp(masters, cl->masters_seen) != 0) {
        sk_log(SK_LOG_INFO, "redis cluster: masters %s", masters);
        memcpy(cl->masters_seen, masters, sizeof masters);
    }
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
        sk_aredis_enqueue(n, NULL, NULL, 1, (const char *const[]){"ASKING"}, NULL, -1, 0) < 0)
        return SK_ENOMEM;
    int rc = sk_aredis_enqueue(n, cl_on_reply, c, c->args.argc, c->args.argv, c->args.lens,
                               c->script, c->confirm);
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
    /* the node's WAIT count for this answer (NULL answers: none) */
    ar->acked = rep && c->node ? c->node->acked : -1;
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

int sk_aredis_cl_submit(sk_aredis *ar, int argc, const char *const *argv, const size_t *lens,
                        int script, int confirm, sk_aredis_cb cb, void *data)
{
    struct ar_cluster *cl = ar->cl;
    if (cl->closing || argc <= 0) return SK_EIO;
    struct cl_cmd probe = {
        .front = ar, .slot = sk_cluster_command_slot(argc, argv, lens), .ask_node = -1};
    if (!cl_target(ar, &probe)) return SK_EIO; /* cb will not run, as for one node */
    struct sk_aredis_args a;
    struct cl_cmd *c = sk_aredis_args_copy(sizeof *c, argc, argv, lens, &a);
    if (!c) return SK_ENOMEM;
    *c = probe;
    c->cb = cb;
    c->data = data;
    c->args = a;
    c->script = script;
    c->confirm = confirm;
    int rc = cl_send(c);
    if (rc < 0) free(c);
    return rc;
}

int sk_aredis_cl_new(sk_aredis *ar)
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

void sk_aredis_cl_free(sk_aredis *ar)
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
    for (int i = 0; i < SK_REDIS_URL_MAX_SEEDS; i++)
        sk_aredis_free(cl->seed[i]);
    free(cl);
    free(ar);
}

/* Ready when the map is loaded and one master's client is: a slot whose
 * master is not ready is refused alone (cl_target), and sk_aredis_unserved
 * says which. Until the client was ready once, a master still making its
 * first connection holds readiness back (serve starts with every master
 * it can reach; one that failed its first attempt does not hold it). */
static int cl_master_ready(const struct ar_cluster *cl)
{
    for (int i = 0; i < cl->map.nnodes; i++)
        if (sk_cluster_map_is_master(&cl->map, i) && cl->node[i] && cl->node[i]->state == AR_READY)
            return 1;
    return 0;
}

int sk_aredis_cl_ready(const sk_aredis *ar)
{
    const struct ar_cluster *cl = ar->cl;
    if (!cl->map.loaded || !cl_master_ready(cl)) return 0;
    for (int i = 0; !cl->started && i < cl->map.nnodes; i++) {
        const sk_aredis *n = cl->node[i];
        if (sk_cluster_map_is_master(&cl->map, i) &&
            (!n || (n->state != AR_READY && n->state != AR_DOWN && n->connects == 0)))
            return 0;
    }
    return 1;
}

/* Whether slot's commands are refused now, and the node (-1: no master). */
static int cl_slot_unserved(const struct ar_cluster *cl, int slot, int *owner)
{
    int o = sk_cluster_map_owner(&cl->map, slot);
    *owner = o;
    return o < 0 || !cl->node[o] || cl->node[o]->state != AR_READY;
}

int sk_aredis_cl_unserved(const sk_aredis *ar, char *buf, size_t cap)
{
    const struct ar_cluster *cl = ar->cl;
    size_t len = 0;
    if (buf && cap) buf[0] = 0;
    if (!cl->map.loaded) {
        if (buf) snprintf(buf, cap, "0-%d (%.200s)", SK_CLUSTER_SLOTS - 1, cl->errstr);
        return SK_CLUSTER_SLOTS;
    }
    int n = 0;
    for (int s = 0; s < SK_CLUSTER_SLOTS;) {
        int o;
        if (!cl_slot_unserved(cl, s, &o)) {
            s++;
            continue;
        }
        int e = s, o2;
        while (e + 1 < SK_CLUSTER_SLOTS && cl_slot_unserved(cl, e + 1, &o2) && o2 == o)
            e++;
        n += e - s + 1;
        if (buf && len < cap) {
            char why[200];
            if (o < 0)
                snprintf(why, sizeof why, "no master");
            else
                snprintf(why, sizeof why, "%.64s:%d: %.100s", cl->map.nodes[o].host,
                         cl->map.nodes[o].port,
                         cl->node[o] ? sk_aredis_errstr(cl->node[o]) : "not connected");
            int w =
                s == e ? snprintf(buf + len, cap - len, "%s%d (%s)", len ? ", " : "", s, why)
                       : snprintf(buf + len, cap - len, "%s%d-%d (%s)", len ? ", " : "", s, e, why);
            if (w > 0) len += (size_t)w < cap - len ? (size_t)w : cap - len;
        }
        s = e + 1;
    }
    return n;
}

size_t sk_aredis_cl_pending(const sk_aredis *ar)
{
    const struct ar_cluster *cl = ar->cl;
    size_t n = cl->nparked;
    for (int i = 0; i < SK_CLUSTER_MAX_NODES; i++)
        if (cl->node[i]) n += cl->node[i]->count;
    return n;
}

const char *sk_aredis_cl_errstr(const sk_aredis *ar)
{
    const struct ar_cluster *cl = ar->cl;
    if (!cl->map.loaded || cl->map.uncovered) return cl->errstr;
    for (int i = 0; i < cl->map.nnodes; i++) {
        if (!sk_cluster_map_is_master(&cl->map, i)) continue;
        if (!cl->node[i]) return cl->errstr;
        if (cl->node[i]->state != AR_READY) return sk_aredis_errstr(cl->node[i]);
    }
    return "ready";
}

int sk_aredis_cl_functions(const sk_aredis *ar)
{
    const struct ar_cluster *cl = ar->cl;
    int masters = 0;
    for (int i = 0; i < cl->map.nnodes; i++) {
        if (!sk_cluster_map_is_master(&cl->map, i)) continue;
        if (!cl->node[i] || cl->node[i]->state != AR_READY || !cl->node[i]->fn) return 0;
        masters++;
    }
    return masters > 0;
}

unsigned sk_aredis_cl_connects(const sk_aredis *ar)
{
    const struct ar_cluster *cl = ar->cl;
    unsigned n = 0;
    for (int i = 0; i < SK_CLUSTER_MAX_NODES; i++)
        if (cl->node[i]) n += cl->node[i]->connects;
    return n;
}

const sk_aredis *sk_aredis_cl_master_of(const sk_aredis *ar, const char *key, size_t len)
{
    const struct ar_cluster *cl = ar->cl;
    int o = sk_cluster_map_owner(&cl->map, sk_cluster_key_slot(key, len));
    return o >= 0 ? cl->node[o] : NULL;
}

void sk_aredis_cl_each(const sk_aredis *ar, void (*fn)(void *data, const sk_aredis *node),
                       void *data)
{
    const struct ar_cluster *cl = ar->cl;
    for (int i = 0; i < cl->map.nnodes; i++)
        if (sk_cluster_map_is_master(&cl->map, i) && cl->node[i]) fn(data, cl->node[i]);
}

void sk_aredis_cl_flush(sk_aredis *ar)
{
    for (int i = 0; i < SK_CLUSTER_MAX_NODES; i++)
        if (ar->cl->node[i]) sk_aredis_flush(ar->cl->node[i]);
}

void sk_aredis_cl_tick(sk_aredis *ar)
{
    struct ar_cluster *cl = ar->cl;
    for (int i = 0; i < SK_CLUSTER_MAX_NODES; i++) {
        if (!cl->node[i]) continue;
        sk_aredis_tick(cl->node[i]);
        /* a master that is down may have been replaced */
        if (cl->node[i]->state == AR_DOWN && sk_cluster_map_is_master(&cl->map, i)) cl->stale = 1;
    }
    /* the seeds serve until a map is loaded and a master is ready (then
     * the masters' clients are asked; with none ready they serve again) */
    int master_ready = 0;
    for (int i = 0; i < cl->map.nnodes && !master_ready; i++)
        master_ready =
            sk_cluster_map_is_master(&cl->map, i) && cl->node[i] && cl->node[i]->state == AR_READY;
    for (int i = 0; i < SK_REDIS_URL_MAX_SEEDS; i++) {
        if (!cl->seed[i]) continue;
        if (cl->map.loaded && master_ready && !(cl->reading && cl->reading_seed)) {
            sk_aredis_free(cl->seed[i]);
            cl->seed[i] = NULL;
        } else {
            sk_aredis_tick(cl->seed[i]);
        }
    }
    int64_t now = sk_mono_ms();
    if (cl->stale && !cl->reading && now >= cl->next_refresh_ms) cl_refresh(ar);
    if (!cl->started && sk_aredis_cl_ready(ar)) cl->started = 1;
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
