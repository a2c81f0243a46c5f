/* redis_async_cluster.c - the async client's Redis Cluster front
 * (redis+cluster://, see sk_aredis_new and docs/cluster.md), and the
 * process-wide counts of the redirections it met (sk_aredis_redirects). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "core/vec.h"
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
 * that read its reply timeout, and the next read asks another node.
 *
 * Beyond one command to one slot: a MULTI...EXEC run goes to one node as a
 * unit (a unit), a read of streams of several slots (XREAD, XREADGROUP) is
 * one call per slot with the answers merged, and SCRIPT, FUNCTION, CONFIG
 * and FLUSH* go to every master (a group). */

#define CL_REFRESH_MIN_MS 100  /* between two CLUSTER SLOTS reads */
#define CL_REFRESH_FAIL_MS 500 /* after a failed read: the loop must not spin on it */
#define CL_RETRY_MIN_MS 10
#define CL_RETRY_MAX_MS 200

struct cl_unit;

/* What a command or a unit spends on redirections and waits, and its
 * place among those waiting for a tick (parked). First in both. */
struct cl_wait {
    int hops, retries;
    int is_unit;
    int64_t due_ms; /* parked: not before */
    struct cl_wait *next;
};

struct cl_cmd {
    struct cl_wait w;
    sk_aredis *front;
    sk_aredis *node; /* where it was last sent (for rtt) */
    sk_aredis_cb cb;
    void *data;
    int script, confirm, slot;
    int ask_node;               /* >= 0: ASKING + the command go there next */
    int to_node;                /* >= 0: that node's, whatever the slot (every master's) */
    struct cl_unit *unit;       /* the MULTI...EXEC run it is part of, or NULL */
    redisReply *rep;            /* its answer, held until its unit's last is in */
    struct sk_aredis_args args; /* the command, in the same block as this */
};

/* A MULTI...EXEC run: its commands reach one node, in order. One closed
 * (EXEC or DISCARD queued) before anything was sent holds its answers
 * until the last: redirected or told to wait, it is sent again whole (its
 * commands never ran: EXEC answered EXECABORT or was never queued). One
 * the caller waits on before closing it (MULTI's answer awaited alone) is
 * sent as far as it goes to the node of its first key, or of the last
 * keyed command, and the rest follows it there, answered as it comes. */
struct cl_unit {
    struct cl_wait w;
    struct cl_cmd **cmd;
    size_t cap;
    int n, closed, held, tried;
    int node;      /* the node index it went to, -1 before */
    int answered;  /* held answers in */
    int delivered; /* answers handed to the callers */
    int lost;      /* a held answer was NULL */
};

struct ar_cluster {
    struct sk_cluster_map map;
    sk_aredis *node[SK_CLUSTER_MAX_NODES];   /* by map node index, created on first need */
    sk_aredis *seed[SK_REDIS_URL_MAX_SEEDS]; /* the URL's seeds, while no map is loaded */
    int reading;                             /* a CLUSTER SLOTS is in flight */
    int reading_seed;                        /* ... on a seed's client */
    unsigned ask_next, ask_i;                /* where the next read starts looking */
    char reading_host[64];                   /* the node asked (for an empty host) */
    struct cl_wait *parked;                  /* commands and held units waiting for a tick */
    struct cl_unit *open;                    /* a MULTI not closed yet */
    int sticky; /* node of the last keyed command: a keyless MULTI goes there */
    int stale, prefer, closing;
    int64_t next_refresh_ms;
    struct sk_cluster_stats stats;
    char errstr[256];
    char masters_seen[256]; /* the masters of the last map read, as logged */
    int gap_logged;         /* the map's slots without a master were logged */
    int started;            /* sk_aredis_cl_ready said 1 once */
    unsigned fails;         /* map reads failed in a row */
};

/* The client in *slot, for host:port (what: "node", "seed"), made
 * (connecting) when missing; NULL on failure (cl->errstr says why). */
static sk_aredis *cl_client(sk_aredis *ar, sk_aredis **slot, const char *host, int port,
                            enum ar_role role, const char *what)
{
    if (*slot) return *slot;
    struct sk_redis_url u; /* credentials of the cluster URL */
    sk_redis_url_node(&u, &ar->url, host, port, 0);
    char err[128];
    if (sk_aredis_node_new(slot, ar->loop, &u, &ar->opts, role, err, sizeof err) < 0)
        snprintf(ar->cl->errstr, sizeof ar->cl->errstr, "redis cluster %s %.64s:%d: %.80s", what,
                 u.host, u.port, err);
    return *slot;
}

/* The client of node i, created (connecting) when missing; NULL on failure. */
static sk_aredis *cl_node(sk_aredis *ar, int i)
{
    struct ar_cluster *cl = ar->cl;
    if (i < 0 || i >= cl->map.nnodes) return NULL;
    if (cl->node[i]) return cl->node[i];
    const struct sk_cluster_node *m = &cl->map.nodes[i];
    if (!cl_client(ar, &cl->node[i], m->host, m->port, AR_DATA, "node")) cl->stats.node_errors++;
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
    /* a client to each seed of the URL that has none (they connect side
     * by side; a later read asks the first that is ready) */
    for (int i = 0; i < ns; i++)
        cl_client(ar, &cl->seed[i], ar->url.seeds[i].host, ar->url.seeds[i].port, AR_PROBE, "seed");
    for (int k = 0; k < ns; k++) {
        int i = (int)((cl->ask_next + (unsigned)k) % (unsigned)ns);
        if (cl_askable(cl->seed[i]) && cl_ask(ar, cl->seed[i], ar->url.seeds[i].host, i, 1) == 0)
            return;
    }
    /* nothing to ask yet: again as soon as a seed is connected, or soon
     * when none is on its way */
    int coming = 0;
    for (int k = 0; k < ns; k++)
        coming |= cl->seed[k] && cl->seed[k]->state != AR_DOWN;
    cl->next_refresh_ms = sk_mono_ms() + (coming ? CL_RETRY_MIN_MS : CL_RETRY_MAX_MS);
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

/* The index of a ready master (the first), or -1. */
static int cl_ready_master(const struct ar_cluster *cl)
{
    for (int i = 0; i < cl->map.nnodes; i++)
        if (sk_cluster_map_is_master(&cl->map, i) && cl->node[i] && cl->node[i]->state == AR_READY)
            return i;
    return -1;
}

/* The ready node c goes to (its ASK target, its slot's master, or any
 * ready master when keyless), or NULL. */
static sk_aredis *cl_target(sk_aredis *ar, const struct cl_cmd *c)
{
    struct ar_cluster *cl = ar->cl;
    int i = c->ask_node >= 0  ? c->ask_node
            : c->to_node >= 0 ? c->to_node
            : c->slot >= 0    ? sk_cluster_map_owner(&cl->map, c->slot)
                              : cl_ready_master(cl);
    sk_aredis *n = cl_node(ar, i);
    return n && n->state == AR_READY ? n : NULL;
}

static void cl_on_reply(void *data, redisReply *rep);

/* Queues c on node n (ASKING first after an ASK); 0 or SK_ENOMEM. */
static int cl_enqueue(struct cl_cmd *c, sk_aredis *n)
{
    if (c->ask_node >= 0 &&
        sk_aredis_enqueue(n, NULL, NULL, 1, (const char *const[]){"ASKING"}, NULL, -1, 0) < 0)
        return SK_ENOMEM;
    int rc = sk_aredis_enqueue(n, cl_on_reply, c, c->args.argc, c->args.argv, c->args.lens,
                               c->script, c->confirm);
    if (rc < 0) return rc; /* a lone ASKING is harmless: its answer is ignored */
    c->ask_node = -1;
    c->node = n;
    return 0;
}

/* Hands c to its node; SK_EIO when that node is not ready. A resend (now:
 * from an answer or a tick) is written at once; a first send leaves with
 * the caller's flush, at the end of its pass. */
static int cl_send(struct cl_cmd *c, int now)
{
    sk_aredis *n = cl_target(c->front, c);
    if (!n) return SK_EIO;
    int rc = cl_enqueue(c, n);
    if (rc < 0) return rc;
    if (c->slot >= 0) c->front->cl->sticky = sk_cluster_map_owner(&c->front->cl->map, c->slot);
    if (now) sk_aredis_flush(n);
    return 0;
}

/* Why c gets no answer, on the front (sk_aredis_failed). */
static void cl_note_failure(const struct cl_cmd *c)
{
    sk_aredis *ar = c->front;
    const sk_aredis *n = c->node;
    if (n && n->state != AR_READY) {
        ar->fail_rc = n->fail_rc;
        snprintf(ar->errstr, sizeof ar->errstr, "%s", n->errstr);
    } else {
        ar->fail_rc = SK_EIO;
        snprintf(ar->errstr, sizeof ar->errstr, "redis cluster: slot %d not served: %.100s",
                 c->slot, sk_aredis_cl_errstr(ar));
    }
}

static void cl_deliver(struct cl_cmd *c, redisReply *rep)
{
    sk_aredis *ar = c->front;
    if (rep && c->node) ar->rtt_us = c->node->rtt_us;
    if (!rep) cl_note_failure(c);
    /* the node's WAIT count for this answer (NULL answers: none) */
    ar->acked = rep && c->node ? c->node->acked : -1;
    sk_aredis_cb cb = c->cb;
    void *data = c->data;
    free(c);
    if (cb) cb(data, rep);
}

/* The next wait of a command (or unit) told to wait: parked until it is
 * due, 10 to 200 ms on; -1 when it is out of waits (or the front is
 * closing). */
static int cl_wait(struct ar_cluster *cl, struct cl_wait *w)
{
    if (cl->closing || w->retries >= SK_CLUSTER_MAX_RETRIES) return -1;
    int wait = CL_RETRY_MIN_MS << (w->retries < 5 ? w->retries : 5);
    if (wait > CL_RETRY_MAX_MS) wait = CL_RETRY_MAX_MS;
    w->retries++;
    cl->stats.retries++;
    /* A wait ends a run of hops: MAX_REDIRECTS bounds redirections in a row
     * (a loop), MAX_RETRIES bounds the waits. Without the reset a slot in
     * migration (ASK, then TRYAGAIN on the target: a key of the script, e.g.
     * the idempotency hash, exists nowhere; wait; ASK ...) spent a hop per
     * wait and handed the 6th ASK to the caller after five rounds (~0.3 s
     * at the shortest), long before the retry budget ran out (purchases
     * answered 503). */
    w->hops = 0;
    w->due_ms = sk_mono_ms() + wait;
    w->next = cl->parked;
    cl->parked = w;
    return 0;
}

/* Waits for a tick (bounded); out of waits: fails with NULL. */
static void cl_park(struct cl_cmd *c)
{
    if (cl_wait(c->front->cl, &c->w) < 0) cl_deliver(c, NULL);
}

/* Every MOVED/ASK/TRYAGAIN/CLUSTERDOWN met, followed or not, for /metrics
 * (the only window an operator has on a reshard or failover as serve sees it). */
static atomic_int cluster_used;
static atomic_ullong redirects[SK_AREDIS_REDIRECT_COUNT];

#define CL_WAIT 3 /* TRYAGAIN, CLUSTERDOWN: wait, then send again */

/* What an error answer asks for, counted for /metrics: SK_CLUSTER_MOVED
 * or SK_CLUSTER_ASK (slot, host and port filled in), CL_WAIT, or 0. */
static int cl_redirect(const char *err, int *slot, char *host, size_t cap, int *port)
{
    int act = sk_cluster_parse_redirect(err, slot, host, cap, port);
    if (!act && !sk_cluster_is_transient(err)) return 0;
    enum sk_aredis_redirect k = act == SK_CLUSTER_MOVED ? SK_AREDIS_MOVED
                                : act == SK_CLUSTER_ASK ? SK_AREDIS_ASK
                                : err[0] == 'T'         ? SK_AREDIS_TRYAGAIN
                                                        : SK_AREDIS_CLUSTERDOWN;
    atomic_fetch_add_explicit(&redirects[k], 1, memory_order_relaxed);
    return act ? act : CL_WAIT;
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

/* A MOVED to node i for slot: the map learns it now, and is read again
 * whole at the next tick. */
static void cl_moved(struct ar_cluster *cl, int slot, int i)
{
    sk_cluster_map_set(&cl->map, slot, i);
    cl->stale = 1;
    cl->prefer = i;
    cl->stats.moved++;
}

/* ---- MULTI...EXEC units ---------------------------------------------------- */

/* u goes (its commands are delivered, and freed, by then) */
static void unit_free(struct ar_cluster *cl, struct cl_unit *u)
{
    if (cl->open == u) cl->open = NULL;
    free(u->cmd);
    free(u);
}

/* Every command of u that was not answered fails (NULL), and u goes. */
static void unit_fail(sk_aredis *ar, struct cl_unit *u)
{
    struct ar_cluster *cl = ar->cl;
    if (cl->open == u) cl->open = NULL;
    for (int i = u->delivered; i < u->n; i++) {
        struct cl_cmd *c = u->cmd[i];
        c->node = NULL;
        cl_deliver(c, NULL);
    }
    u->n = 0;
    unit_free(cl, u);
}

static void unit_send(sk_aredis *ar, struct cl_unit *u, int now);
static void unit_answer(struct cl_cmd *c, redisReply *rep);

static void unit_park(sk_aredis *ar, struct cl_unit *u)
{
    if (cl_wait(ar->cl, &u->w) < 0) unit_fail(ar, u);
}

/* Sends u's commands to one node: the master of its first key, else the
 * node of the last keyed command, else a ready master; a node not ready
 * parks it. */
static void unit_send(sk_aredis *ar, struct cl_unit *u, int now)
{
    struct ar_cluster *cl = ar->cl;
    u->tried = 1;
    int i = -1;
    for (int k = 0; k < u->n && i < 0; k++)
        if (u->cmd[k]->slot >= 0) i = sk_cluster_map_owner(&cl->map, u->cmd[k]->slot);
    if (i < 0 && sk_cluster_map_is_master(&cl->map, cl->sticky)) i = cl->sticky;
    if (i < 0) i = cl_ready_master(cl);
    sk_aredis *n = cl_node(ar, i);
    if (!n || n->state != AR_READY) {
        unit_park(ar, u);
        return;
    }
    u->node = i;
    u->answered = u->lost = 0;
    int k = 0, all = u->n;
    while (k < all && cl_enqueue(u->cmd[k], n) == 0)
        k++;
    if (now) sk_aredis_flush(n);
    /* out of memory: what was queued answers, the rest is lost (the last
     * of these may end u) */
    for (int j = k; j < all; j++) {
        u->cmd[j]->node = NULL;
        unit_answer(u->cmd[j], NULL);
    }
}

/* The held answers of u are all in: delivered, or u sent again whole. */
static void unit_done(sk_aredis *ar, struct cl_unit *u)
{
    struct ar_cluster *cl = ar->cl;
    if (u->lost) { /* part of it may have run: the whole unit fails */
        for (int i = 0; i < u->n; i++) {
            freeReplyObject(u->cmd[i]->rep);
            u->delivered++;
            cl_deliver(u->cmd[i], NULL);
        }
        unit_free(cl, u);
        return;
    }
    int act = 0, slot = -1, port = 0, node = -1;
    char host[64];
    for (int i = 0; i < u->n && !act; i++) {
        const redisReply *x = u->cmd[i]->rep;
        if (x->type == REDIS_REPLY_ERROR && x->str)
            act = cl_redirect(x->str, &slot, host, sizeof host, &port);
    }
    if (act == SK_CLUSTER_MOVED) node = sk_cluster_map_node(&cl->map, host, port);
    int again = (act == SK_CLUSTER_MOVED && node >= 0 && u->w.hops < SK_CLUSTER_MAX_REDIRECTS) ||
                (act && act != SK_CLUSTER_MOVED && u->w.retries < SK_CLUSTER_MAX_RETRIES);
    if (again && !cl->closing) {
        /* nothing of it ran (EXECABORT): all of it again, or after a wait
         * (ASK inside MULTI: an ASKING does not survive the queueing) */
        for (int i = 0; i < u->n; i++) {
            freeReplyObject(u->cmd[i]->rep);
            u->cmd[i]->rep = NULL;
        }
        u->node = -1;
        if (act == SK_CLUSTER_MOVED) {
            u->w.hops++;
            cl_moved(cl, slot, node);
            unit_send(ar, u, 1);
        } else {
            if (act == SK_CLUSTER_ASK) cl->stats.ask++;
            cl->stale = 1;
            unit_park(ar, u);
        }
        return;
    }
    for (int i = 0; i < u->n; i++) {
        struct cl_cmd *x = u->cmd[i];
        redisReply *r = x->rep;
        u->delivered++;
        cl_deliver(x, r);
        freeReplyObject(r);
    }
    unit_free(cl, u);
}

/* An answer to a command of a unit. */
static void unit_answer(struct cl_cmd *c, redisReply *rep)
{
    sk_aredis *ar = c->front;
    struct ar_cluster *cl = ar->cl;
    struct cl_unit *u = c->unit;
    if (!rep) cl->stale = 1;
    if (!u->held) { /* answered as it comes */
        cl_deliver(c, rep);
        if (++u->delivered == u->n && u->closed) unit_free(cl, u);
        return;
    }
    if (!(c->rep = sk_aredis_take(rep))) u->lost = 1;
    if (++u->answered == u->n) unit_done(ar, u);
}

/* MULTI, EXEC, DISCARD: where a unit begins and ends. */
static int is_word(const struct cl_cmd *c, const char *w)
{
    size_t n = strlen(w);
    return c->args.lens[0] == n && strncasecmp(c->args.argv[0], w, n) == 0;
}

/* c joins the open unit (or begins one with MULTI). */
static int unit_add(sk_aredis *ar, struct cl_cmd *c)
{
    struct ar_cluster *cl = ar->cl;
    struct cl_unit *u = cl->open;
    if (!u) {
        if (!(u = calloc(1, sizeof *u))) return SK_ENOMEM;
        u->w.is_unit = 1;
        u->node = -1;
        cl->open = u;
    }
    if (SK_VEC_RESERVE(u->cmd, u->cap, (size_t)u->n + 1, 8)) {
        if (!u->n) unit_free(cl, u);
        return SK_ENOMEM;
    }
    int ends = is_word(c, "EXEC") || is_word(c, "DISCARD");
    c->unit = u;
    if (ends) {
        u->closed = 1;
        cl->open = NULL;
    }
    if (u->node >= 0) {
        /* sent before it was closed: the rest follows it there */
        sk_aredis *n = cl->node[u->node];
        if (!n || n->state != AR_READY || cl_enqueue(c, n) < 0) {
            if (u->closed && u->delivered == u->n) unit_free(cl, u);
            return SK_EIO;
        }
    }
    u->cmd[u->n++] = c;
    /* whole before anything went: sent as one, its answers held */
    if (ends && !u->tried) {
        u->held = 1;
        unit_send(ar, u, 0);
    }
    return 0;
}

/* ---- one call, several commands (a read of several slots, every master) -- */

enum { GR_STREAMS, GR_ALL };

struct cl_part {
    struct cl_group *g;
    int i;
};

struct cl_group {
    sk_aredis *front;
    sk_aredis_cb cb;
    void *data;
    int n, left, mode, fail_rc;
    char why[160];
    redisReply **rep;
    struct cl_part *part;
};

/* The answers as one: the first error as it is; for a read, the streams of
 * every part in one array (nil when none has any); for every master, the
 * first one's. NULL: out of memory. */
static redisReply *group_merge(struct cl_group *g)
{
    /* an answer as it is: the first error, else (every master) the first */
    int k = g->mode == GR_ALL ? 0 : -1;
    for (int i = g->n - 1; i >= 0; i--)
        if (g->rep[i]->type == REDIS_REPLY_ERROR) k = i;
    if (k >= 0) {
        redisReply *r = g->rep[k];
        g->rep[k] = NULL;
        return r;
    }
    size_t total = 0;
    for (int i = 0; i < g->n; i++)
        if (g->rep[i]->type == REDIS_REPLY_ARRAY) total += g->rep[i]->elements;
    redisReply *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->type = total ? REDIS_REPLY_ARRAY : REDIS_REPLY_NIL;
    if (!total) return m;
    if (!(m->element = calloc(total, sizeof *m->element))) {
        free(m);
        return NULL;
    }
    for (int i = 0; i < g->n; i++) {
        redisReply *r = g->rep[i];
        if (r->type != REDIS_REPLY_ARRAY) continue;
        for (size_t j = 0; j < r->elements; j++)
            m->element[m->elements++] = r->element[j];
        r->elements = 0; /* moved */
    }
    return m;
}

static void group_part_answer(void *data, redisReply *rep)
{
    struct cl_part *p = data;
    struct cl_group *g = p->g;
    sk_aredis *ar = g->front;
    if (!rep && !g->fail_rc) {
        const char *why;
        g->fail_rc = sk_aredis_failed(ar, &why);
        snprintf(g->why, sizeof g->why, "%s", why);
    } else if (rep && !(g->rep[p->i] = sk_aredis_take(rep)) && !g->fail_rc) {
        g->fail_rc = SK_ENOMEM;
        snprintf(g->why, sizeof g->why, "out of memory");
    }
    if (--g->left) return;
    redisReply *m = g->fail_rc ? NULL : group_merge(g);
    if (!m && !g->fail_rc) {
        g->fail_rc = SK_ENOMEM;
        snprintf(g->why, sizeof g->why, "out of memory");
    }
    for (int i = 0; i < g->n; i++)
        if (g->rep[i]) freeReplyObject(g->rep[i]);
    if (!m) {
        ar->fail_rc = g->fail_rc;
        snprintf(ar->errstr, sizeof ar->errstr, "%s", g->why);
    }
    ar->acked = -1;
    sk_aredis_cb cb = g->cb;
    void *cbdata = g->data;
    free(g);
    if (cb) cb(cbdata, m);
    if (m) freeReplyObject(m);
}

static struct cl_group *group_new(sk_aredis *ar, int n, int mode, sk_aredis_cb cb, void *data)
{
    struct cl_group *g = calloc(1, sizeof *g + (size_t)n * (sizeof *g->rep + sizeof *g->part));
    if (!g) return NULL;
    g->rep = (redisReply **)(g + 1);
    g->part = (struct cl_part *)(g->rep + n);
    g->front = ar;
    g->cb = cb;
    g->data = data;
    g->n = g->left = n;
    g->mode = mode;
    for (int i = 0; i < n; i++)
        g->part[i] = (struct cl_part){g, i};
    return g;
}

static int cl_submit_one(sk_aredis *ar, int argc, const char *const *argv, const size_t *lens,
                         int script, int confirm, int to_node, sk_aredis_cb cb, void *data);

/* A part of g failed to go: it answers nothing, so it counts as failed now. */
static void group_part_lost(struct cl_group *g, int i, int rc)
{
    if (!g->fail_rc) {
        g->fail_rc = rc;
        snprintf(g->why, sizeof g->why, "redis cluster: %s", sk_aredis_cl_errstr(g->front));
    }
    group_part_answer(&g->part[i], NULL);
}

/* XREAD/XREADGROUP naming streams of several slots: one call per slot (a
 * node refuses two slots in one command, CROSSSLOT, though it owns both),
 * sent together; only the first blocks (the others answer at once, so a
 * BLOCK waits its time once, not once per call on a node). */
static int cl_submit_streams(sk_aredis *ar, int argc, const char *const *argv, const size_t *lens,
                             int first, int count, sk_aredis_cb cb, void *data)
{
    int *slot = malloc(sizeof *slot * (size_t)count);
    const char **a = malloc(sizeof *a * (size_t)argc);
    size_t *l = malloc(sizeof *l * (size_t)argc);
    int parts = 0, rc = 0;
    for (int i = 0; slot && i < count; i++) {
        slot[i] = sk_cluster_key_slot(argv[first + i], lens[first + i]);
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = slot[j] == slot[i];
        parts += !seen;
    }
    struct cl_group *g = slot && a && l ? group_new(ar, parts, GR_STREAMS, cb, data) : NULL;
    if (!g) rc = SK_ENOMEM;
    for (int i = 0, p = 0; !rc && i < count; i++) {
        if (slot[i] < 0) continue; /* in an earlier part */
        int s = slot[i], k = 0;
        for (int j = 0; j < first; j++) {
            if (p > 0 && lens[j] == 5 && !strncasecmp(argv[j], "BLOCK", 5) && j + 2 < first) {
                j++;
                continue;
            }
            a[k] = argv[j];
            l[k++] = lens[j];
        }
        for (int j = i; j < count; j++)
            if (slot[j] == s) {
                a[k] = argv[first + j];
                l[k++] = lens[first + j];
            }
        for (int j = i; j < count; j++)
            if (slot[j] == s) {
                a[k] = argv[first + count + j];
                l[k++] = lens[first + count + j];
                slot[j] = -1;
            }
        int prc = cl_submit_one(ar, k, a, l, -1, 0, -1, group_part_answer, &g->part[p]);
        if (prc < 0) group_part_lost(g, p, prc);
        p++;
    }
    free(slot);
    free(a);
    free(l);
    return rc;
}

/* SCRIPT, FUNCTION, CONFIG, FLUSH*: the same on every master; the first
 * error answers, else the first master's answer. */
static int cl_submit_all(sk_aredis *ar, int argc, const char *const *argv, const size_t *lens,
                         sk_aredis_cb cb, void *data)
{
    struct ar_cluster *cl = ar->cl;
    int masters = 0;
    for (int i = 0; i < cl->map.nnodes; i++)
        masters += sk_cluster_map_is_master(&cl->map, i);
    if (!masters) return SK_EIO;
    struct cl_group *g = group_new(ar, masters, GR_ALL, cb, data);
    if (!g) return SK_ENOMEM;
    for (int i = 0, p = 0; i < cl->map.nnodes; i++) {
        if (!sk_cluster_map_is_master(&cl->map, i)) continue;
        int prc = cl_submit_one(ar, argc, argv, lens, -1, 0, i, group_part_answer, &g->part[p]);
        if (prc < 0) group_part_lost(g, p, prc);
        p++;
    }
    return 0;
}

static void cl_on_reply(void *data, redisReply *rep)
{
    struct cl_cmd *c = data;
    struct ar_cluster *cl = c->front->cl;
    if (c->unit) {
        unit_answer(c, rep);
        return;
    }
    if (!rep) {
        cl->stale = 1; /* a lost node may mean a failover */
        cl_deliver(c, NULL);
        return;
    }
    if (rep->type == REDIS_REPLY_ERROR && rep->str && !cl->closing && c->slot >= 0) {
        int slot, port, i = -1;
        char host[64];
        int act = cl_redirect(rep->str, &slot, host, sizeof host, &port);
        if (act == CL_WAIT && c->w.retries < SK_CLUSTER_MAX_RETRIES) {
            cl->stale = 1;
            cl_park(c);
            return;
        }
        if (act && act != CL_WAIT && c->w.hops < SK_CLUSTER_MAX_REDIRECTS)
            i = sk_cluster_map_node(&cl->map, host, port);
        if (i >= 0) {
            c->w.hops++;
            if (act == SK_CLUSTER_MOVED) {
                /* never ran: resend; re-read the whole map at the next
                 * tick. The server's slot is the key's (XGROUP CREATE
                 * names its key second). */
                cl_moved(cl, slot, i);
                c->slot = slot;
            } else {
                c->ask_node = i;
                cl->stats.ask++;
            }
            if (cl_send(c, 1) < 0) cl_park(c); /* e.g. a new master still connecting */
            return;
        }
    }
    cl_deliver(c, rep); /* out of hops or waits: the caller sees the error */
}

/* 1 when the streams of a read are all of one slot. */
static int one_slot(const char *const *argv, const size_t *lens, int first, int count)
{
    int s = sk_cluster_key_slot(argv[first], lens[first]);
    for (int i = 1; i < count; i++)
        if (sk_cluster_key_slot(argv[first + i], lens[first + i]) != s) return 0;
    return 1;
}

/* Which commands go to every master, and which keyless ones follow the
 * last keyed command (WATCH ... UNWATCH, EXEC or DISCARD outside a unit). */
static int kind_of(int argc, const char *const *argv, const size_t *lens, int *sticky)
{
    static const char *const all[] = {"SCRIPT", "CONFIG", "FLUSHALL", "FLUSHDB", "FUNCTION"};
    static const char *const follow[] = {"EXEC", "DISCARD", "UNWATCH"};
    *sticky = 0;
    if (argc < 1) return 0;
    /* a read of the settings asks one ready master: one that never
     * answers must not hold it (sk_redis_each_settings judges each) */
    if (argc >= 2 && lens[0] == 6 && !strncasecmp(argv[0], "CONFIG", 6) && lens[1] == 3 &&
        !strncasecmp(argv[1], "GET", 3))
        return 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (lens[0] == strlen(all[i]) && !strncasecmp(argv[0], all[i], lens[0])) return 1;
    for (size_t i = 0; i < sizeof follow / sizeof follow[0]; i++)
        if (lens[0] == strlen(follow[i]) && !strncasecmp(argv[0], follow[i], lens[0])) *sticky = 1;
    return 0;
}

/* One command to one node (to_node >= 0: that one, whatever the slot). */
static int cl_submit_one(sk_aredis *ar, int argc, const char *const *argv, const size_t *lens,
                         int script, int confirm, int to_node, sk_aredis_cb cb, void *data)
{
    struct ar_cluster *cl = ar->cl;
    struct cl_cmd probe = {.front = ar,
                           .slot = sk_cluster_command_slot(argc, argv, lens),
                           .ask_node = -1,
                           .to_node = to_node};
    if (!ar->opts.patient && !cl->open && !cl_target(ar, &probe))
        return SK_EIO; /* cb will not run, as for one node */
    struct sk_aredis_args a;
    struct cl_cmd *c = sk_aredis_args_copy(sizeof *c, argc, argv, lens, &a);
    if (!c) return SK_ENOMEM;
    *c = probe;
    c->cb = cb;
    c->data = data;
    c->args = a;
    c->script = script;
    c->confirm = confirm;
    int unit = cl->open || is_word(c, "MULTI");
    int rc = unit ? unit_add(ar, c) : cl_send(c, 0);
    if (rc == SK_EIO && !unit && ar->opts.patient) {
        cl_park(c);
        rc = 0;
    }
    if (rc < 0) free(c);
    return rc;
}

int sk_aredis_cl_submit(sk_aredis *ar, int argc, const char *const *argv, const size_t *lens,
                        int script, int confirm, sk_aredis_cb cb, void *data)
{
    struct ar_cluster *cl = ar->cl;
    if (cl->closing || argc <= 0) return SK_EIO;
    size_t lv[16];
    size_t *own = NULL;
    if (!lens) { /* lengths below are looked at more than once */
        own = argc <= 16 ? lv : malloc(sizeof *own * (size_t)argc);
        if (!own) return SK_ENOMEM;
        for (int i = 0; i < argc; i++)
            own[i] = strlen(argv[i]);
        lens = own;
    }
    int rc, sticky, first, count;
    if (cl->open) {
        rc = cl_submit_one(ar, argc, argv, lens, script, confirm, -1, cb, data);
    } else if (kind_of(argc, argv, lens, &sticky)) {
        rc = cl_submit_all(ar, argc, argv, lens, cb, data);
    } else if (sk_cluster_streams(argc, argv, lens, &first, &count) && count > 1 &&
               !one_slot(argv, lens, first, count)) {
        rc = cl_submit_streams(ar, argc, argv, lens, first, count, cb, data);
    } else {
        int to = sticky && sk_cluster_map_is_master(&cl->map, cl->sticky) ? cl->sticky : -1;
        rc = cl_submit_one(ar, argc, argv, lens, script, confirm, to, cb, data);
    }
    if (own != lv) free(own);
    return rc;
}
int sk_aredis_cl_new(sk_aredis *ar)
{
    struct ar_cluster *cl = calloc(1, sizeof *cl);
    if (!cl) return SK_ENOMEM;
    sk_cluster_map_init(&cl->map);
    cl->prefer = -1;
    cl->sticky = -1;
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
        struct cl_wait *w = cl->parked;
        cl->parked = w->next;
        if (w->is_unit)
            unit_fail(ar, (struct cl_unit *)w);
        else
            cl_deliver((struct cl_cmd *)w, NULL);
    }
    if (cl->open && !cl->open->tried) {
        unit_fail(ar, cl->open);
    } else if (cl->open) { /* sent, not closed: it ends with its last answer */
        struct cl_unit *u = cl->open;
        u->closed = 1;
        cl->open = NULL;
        if (u->delivered == u->n) unit_free(cl, u);
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
int sk_aredis_cl_ready(const sk_aredis *ar)
{
    const struct ar_cluster *cl = ar->cl;
    if (!cl->map.loaded || cl_ready_master(cl) < 0) return 0;
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
    size_t n = 0;
    for (const struct cl_wait *w = cl->parked; w; w = w->next)
        n += !w->is_unit;
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

unsigned sk_aredis_cl_connects(const sk_aredis *ar)
{
    const struct ar_cluster *cl = ar->cl;
    unsigned n = 0;
    for (int i = 0; i < SK_CLUSTER_MAX_NODES; i++)
        if (cl->node[i]) n += cl->node[i]->connects;
    return n;
}

int sk_aredis_cl_stalled(const sk_aredis *ar)
{
    const struct ar_cluster *cl = ar->cl;
    if (cl->reading) return 0;
    for (int i = 0; i < SK_CLUSTER_MAX_NODES; i++)
        if (cl->node[i] && sk_cluster_map_is_master(&cl->map, i) &&
            !sk_aredis_node_stalled(cl->node[i]))
            return 0;
    for (int i = 0; i < SK_REDIS_URL_MAX_SEEDS; i++)
        if (cl->seed[i] && !sk_aredis_node_stalled(cl->seed[i])) return 0;
    return 1;
}

const struct sk_cluster_map *sk_aredis_cl_map(const sk_aredis *ar)
{
    return &ar->cl->map;
}

void sk_aredis_cl_stats(const sk_aredis *ar, struct sk_cluster_stats *out)
{
    *out = ar->cl->stats;
}

const sk_aredis *sk_aredis_cl_master_of(const sk_aredis *ar, const char *key, size_t len)
{
    const struct ar_cluster *cl = ar->cl;
    int o = sk_cluster_map_owner(&cl->map, sk_cluster_key_slot(key, len));
    return o >= 0 ? cl->node[o] : NULL;
}

sk_aredis *sk_aredis_cl_master_k(const sk_aredis *ar, int k, int *nmasters)
{
    const struct ar_cluster *cl = ar->cl;
    sk_aredis *m = NULL;
    int seen = 0;
    for (int i = 0; i < cl->map.nnodes; i++)
        if (sk_cluster_map_is_master(&cl->map, i) && seen++ == k) m = cl->node[i];
    if (nmasters) *nmasters = seen;
    return m;
}

void sk_aredis_cl_flush(sk_aredis *ar)
{
    struct ar_cluster *cl = ar->cl;
    /* a MULTI whose answer is awaited before its EXEC was queued */
    if (cl->open && !cl->open->tried) unit_send(ar, cl->open, 0);
    for (int i = 0; i < SK_CLUSTER_MAX_NODES; i++)
        if (cl->node[i]) sk_aredis_flush(cl->node[i]);
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
    int master_ready = cl_ready_master(cl) >= 0;
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
    struct cl_wait *list = cl->parked;
    cl->parked = NULL;
    while (list) {
        struct cl_wait *w = list;
        list = w->next;
        if (w->due_ms > now) {
            w->next = cl->parked;
            cl->parked = w;
        } else if (w->is_unit) {
            unit_send(ar, (struct cl_unit *)w, 1);
        } else if (cl_send((struct cl_cmd *)w, 1) < 0) {
            cl_park((struct cl_cmd *)w);
        }
    }
}
