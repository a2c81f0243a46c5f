/* cluster_spawn.c - start and stop a private Redis Cluster of N masters and
 * their replicas (see cluster_spawn.h). The process plumbing (temporary
 * directory, fork with a parent-death signal, bounded waits, stopping and
 * reaping) is spawn.c's, as for redis_spawn.c. */
#include "tests/support/spawn/cluster_spawn.h"

#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <hiredis.h>

#include "core/clock.h"
#include "core/error.h"
#include "redis/redis_cluster.h"
#include "spawn/spawn.h"

#define SK_CSPAWN_MAX_EXTRA 32
/* a restarted node loads its AOF first: on a loaded machine that took over 10 s */
#define SK_CSPAWN_PING_MS 30000
#define SK_CSPAWN_READY_MS 30000
#define SK_CSPAWN_STOP_MS 5000
/* A port that was free when probed can be taken before redis binds it. */
#define SK_CSPAWN_TRIES 5
#define SK_CSPAWN_PORT_LO 20000
#define SK_CSPAWN_PORT_SPAN 10000
#define SK_CSPAWN_BUS_OFFSET 10000
#define SK_CSPAWN_NODE_TIMEOUT_MS 5000

#define fail(s, ...) sk_spawn_fail((s)->errstr, sizeof(s)->errstr, __VA_ARGS__)

static int port_free(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 0;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

static uint64_t next_rand(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* A port in 20000-30000 whose bus port is free too, distinct from (and not
 * the bus port of) the ports already taken. */
static int pick_port(uint64_t *rng, const int *taken, int ntaken)
{
    for (int tries = 0; tries < 2000; tries++) {
        int p = SK_CSPAWN_PORT_LO + (int)(next_rand(rng) % SK_CSPAWN_PORT_SPAN);
        int dup = 0;
        for (int i = 0; i < ntaken; i++)
            dup |= taken[i] == p || taken[i] + SK_CSPAWN_BUS_OFFSET == p ||
                   taken[i] == p + SK_CSPAWN_BUS_OFFSET;
        if (!dup && port_free(p) && port_free(p + SK_CSPAWN_BUS_OFFSET)) return p;
    }
    return -1;
}

/* One command on the node at port, over a fresh connection; NULL on an
 * I/O error. Caller frees the reply. */
static redisReply *node_cmd(int port, int argc, const char **argv)
{
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (!c || c->err) {
        if (c) redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    redisReply *r = redisCommandArgv(c, argc, argv, NULL);
    redisFree(c);
    return r;
}

static int node_ok(int port, int argc, const char **argv, char *err, size_t cap)
{
    redisReply *r = node_cmd(port, argc, argv);
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (!ok)
        snprintf(err, cap, "%s %s on node %d: %s", argv[0], argc > 1 ? argv[1] : "", port,
                 r && r->str ? r->str : "no reply");
    if (r) freeReplyObject(r);
    return ok;
}

/* Readiness of a node process: the node at port *arg answers PING. */
static int pings(void *arg)
{
    const char *argv[] = {"PING"};
    redisReply *r = node_cmd(*(const int *)arg, 1, argv);
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    return ok;
}

struct node_ref {
    const struct sk_cluster_spawn *s;
    int i;
};

/* 1 when the node at port knows want replicas and, being a replica
 * itself, has its link to its master up. */
static int replicas_ok(int port, int want)
{
    const char *nodes[] = {"CLUSTER", "NODES"};
    redisReply *r = node_cmd(port, 2, nodes);
    int seen = 0, mine = 0;
    if (r && r->type == REDIS_REPLY_STRING) {
        /* flags: "slave" or "myself,slave", then a space */
        for (const char *p = r->str; (p = strstr(p, "slave ")) != NULL; p++)
            seen++;
        mine = strstr(r->str, "myself,slave") != NULL;
    }
    if (r) freeReplyObject(r);
    if (seen != want) return 0;
    if (!mine) return 1;
    const char *info[] = {"INFO", "replication"};
    r = node_cmd(port, 2, info);
    int up = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "master_link_status:up");
    if (r) freeReplyObject(r);
    return up;
}

/* Readiness of the cluster at node ((struct node_ref *)arg)->i: it sees a
 * healthy cluster of s->nodes nodes with every slot served and every
 * replica in place. */
static int node_ready(void *arg)
{
    const struct node_ref *ref = arg;
    const struct sk_cluster_spawn *s = ref->s;
    const char *argv[] = {"CLUSTER", "INFO"};
    redisReply *r = node_cmd(s->port[ref->i], 2, argv);
    char known[48];
    snprintf(known, sizeof known, "cluster_known_nodes:%d\r", s->nodes);
    int ok = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "cluster_state:ok") &&
             strstr(r->str, known) && strstr(r->str, "cluster_slots_ok:16384");
    if (r) freeReplyObject(r);
    return ok && replicas_ok(s->port[ref->i], s->nodes - s->n);
}

/* The directory of node i, its log and stderr files, its port as text,
 * its name in messages. */
struct node_files {
    char dir[300], log[340], err[340], port[16], name[80];
};

static void node_files(const struct sk_cluster_spawn *s, int i, struct node_files *f)
{
    snprintf(f->dir, sizeof f->dir, "%.250s/n%d", s->dir, i);
    snprintf(f->log, sizeof f->log, "%s/redis.log", f->dir);
    snprintf(f->err, sizeof f->err, "%s/redis.stderr", f->dir);
    snprintf(f->port, sizeof f->port, "%d", s->port[i]);
    snprintf(f->name, sizeof f->name, "redis-server (cluster node %d, port %d)", i, s->port[i]);
}

/* Starts redis-server with argv for node i on s->port[i] (argv points into
 * f, filled in here) and waits until it answers PING: 0, SK_EEXIST when it
 * exited because its port was taken (try another), another negative code
 * otherwise; nothing runs on failure. */
static int start_node(struct sk_cluster_spawn *s, int i, const char *const *argv,
                      struct node_files *f)
{
    node_files(s, i, f);
    if (mkdir(f->dir, 0700) < 0 && errno != EEXIST)
        return fail(s, SK_EIO, "mkdir %s: %s", f->dir, strerror(errno));
    struct sk_spawn_cmd cmd = {.argv = argv,
                               .err = f->err,
                               .flags = SK_SPAWN_PDEATHSIG,
                               .name = f->name,
                               .log = f->log,
                               .ready = pings,
                               .arg = &s->port[i],
                               .ready_ms = SK_CSPAWN_PING_MS,
                               .poll_ms = 10,
                               .stop_sig = SIGTERM,
                               .stop_ms = SK_CSPAWN_STOP_MS};
    return sk_spawn_start(&cmd, &s->pid[i], s->errstr, sizeof s->errstr);
}

/* Replica node r replicates master m, once it has heard of m by gossip
 * (before, REPLICATE says "Unknown node"). */
static int attach(struct sk_cluster_spawn *s, int r, int m, int64_t deadline, char *err, size_t cap)
{
    const char *myid[] = {"CLUSTER", "MYID"};
    redisReply *id = node_cmd(s->port[m], 2, myid);
    if (!id || id->type != REDIS_REPLY_STRING) {
        snprintf(err, cap, "CLUSTER MYID on node %d: %s", s->port[m],
                 id && id->str ? id->str : "no reply");
        if (id) freeReplyObject(id);
        return 0;
    }
    const char *rep[] = {"CLUSTER", "REPLICATE", id->str};
    int ok;
    while (!(ok = node_ok(s->port[r], 3, rep, err, cap)) && sk_mono_ms() < deadline)
        nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
    freeReplyObject(id);
    return ok;
}

/* Slots, epochs, MEET, replicas, then wait for every node to see the
 * whole cluster. */
static int form(struct sk_cluster_spawn *s)
{
    char err[200] = "";
    char *slots = malloc((size_t)SK_CLUSTER_SLOTS * 8);
    const char **argv = malloc(sizeof *argv * (SK_CLUSTER_SLOTS + 2));
    if (!slots || !argv) {
        free(slots);
        free(argv);
        return fail(s, SK_EIO, "out of memory");
    }
    int ok = 1;
    for (int i = 0; i < s->n && ok; i++) {
        int lo = SK_CLUSTER_SLOTS * i / s->n, hi = SK_CLUSTER_SLOTS * (i + 1) / s->n;
        argv[0] = "CLUSTER";
        argv[1] = "ADDSLOTS";
        int a = 2;
        for (int slot = lo; slot < hi; slot++) {
            char *p = slots + (size_t)(slot - lo) * 8;
            snprintf(p, 8, "%d", slot & 0x3fff);
            argv[a++] = p;
        }
        ok = node_ok(s->port[i], a, argv, err, sizeof err);
    }
    /* distinct epochs, as redis-cli --cluster create gives: no collision
     * to resolve before the cluster is stable */
    for (int i = 0; i < s->nodes && ok; i++) {
        char epoch[16];
        snprintf(epoch, sizeof epoch, "%d", i + 1);
        const char *ep[] = {"CLUSTER", "SET-CONFIG-EPOCH", epoch};
        ok = node_ok(s->port[i], 3, ep, err, sizeof err);
    }
    for (int i = 1; i < s->nodes && ok; i++) {
        char port[16];
        snprintf(port, sizeof port, "%d", s->port[i]);
        const char *meet[] = {"CLUSTER", "MEET", "127.0.0.1", port};
        ok = node_ok(s->port[0], 4, meet, err, sizeof err);
    }
    free(slots);
    free(argv);
    int64_t deadline = sk_mono_ms() + SK_CSPAWN_READY_MS;
    for (int r = s->n; r < s->nodes && ok; r++)
        ok = attach(s, r, (r - s->n) % s->n, deadline, err, sizeof err);
    if (!ok) return fail(s, SK_EIO, "cannot form the cluster: %s", err);
    for (int i = 0; i < s->nodes; i++) {
        struct node_ref ref = {s, i};
        int st, left = (int)(deadline - sk_mono_ms());
        int rc = sk_spawn_wait(&s->pid[i], node_ready, &ref, left > 0 ? left : 0, 20, &st);
        if (rc == SK_ETIMEDOUT)
            return fail(s, SK_EIO,
                        "cluster node %d (port %d) never reported cluster_state:ok with %d "
                        "nodes (%d replicas in sync) within %d ms",
                        i, s->port[i], s->nodes, s->nodes - s->n, SK_CSPAWN_READY_MS);
        if (rc < 0) { /* the node exited */
            struct node_files f;
            node_files(s, i, &f);
            const char *logs[] = {f.err, f.log};
            sk_spawn_exited(f.name, st, logs, 2, s->errstr, sizeof s->errstr);
            return SK_EIO;
        }
    }
    return 0;
}

/* A node's command line into argv (32 + SK_CSPAWN_MAX_EXTRA entries),
 * pointing into f (filled in by start_node) and timeout. */
static int node_argv(struct sk_cluster_spawn *s, int node_timeout_ms, const char *const *extra,
                     struct node_files *f, char timeout[16], const char **argv)
{
    snprintf(timeout, 16, "%d", node_timeout_ms ? node_timeout_ms : SK_CSPAWN_NODE_TIMEOUT_MS);
    const char *base[] = {"redis-server", "--port", f->port, "--bind", "127.0.0.1", "--dir", f->dir,
                          "--save", "", "--appendonly", "no", "--cluster-enabled", "yes",
                          "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", timeout,
                          /* a replica's first sync at once, not
                           * after 5 s of waiting for more */
                          "--repl-diskless-sync-delay", "0", "--logfile", f->log, "--daemonize",
                          "no"};
    memcpy(argv, base, sizeof base);
    return sk_spawn_args(argv, sizeof base / sizeof *base, 32 + SK_CSPAWN_MAX_EXTRA, NULL, extra,
                         "redis-server arguments", s->errstr, sizeof s->errstr);
}

int sk_cluster_spawn_restart_node(struct sk_cluster_spawn *s, int i, int node_timeout_ms,
                                  const char *const *extra_args)
{
    if (i < 0 || i >= s->nodes || !s->dir[0])
        return fail(s, SK_EINVAL, "no node %d in this cluster", i);
    if (s->pid[i] > 0) {
        sk_spawn_stop(s->pid[i], SIGTERM, SK_CSPAWN_STOP_MS);
        s->pid[i] = 0;
    }
    struct node_files f;
    char timeout[16];
    const char *argv[32 + SK_CSPAWN_MAX_EXTRA];
    int rc = node_argv(s, node_timeout_ms, extra_args, &f, timeout, argv);
    if (rc == 0) rc = start_node(s, i, argv, &f);
    return rc == SK_EEXIST ? fail(s, SK_EIO, "port %d of node %d was taken", s->port[i], i) : rc;
}

static void kill_nodes(struct sk_cluster_spawn *s)
{
    /* All told at once, so they stop side by side, not one after another;
     * then each is waited for (and killed when it takes too long). */
    for (int i = 0; i < SK_CLUSTER_SPAWN_MAX; i++)
        if (s->pid[i] > 0) kill(s->pid[i], SIGTERM);
    for (int i = 0; i < SK_CLUSTER_SPAWN_MAX; i++)
        if (s->pid[i] > 0) {
            sk_spawn_stop(s->pid[i], SIGTERM, SK_CSPAWN_STOP_MS);
            s->pid[i] = 0;
        }
}

int sk_cluster_spawn_start_opts(struct sk_cluster_spawn *s, const struct sk_cluster_spawn_opts *o)
{
    memset(s, 0, sizeof *s);
    if (o->masters < 1 || o->replicas < 0 ||
        o->masters * (1 + o->replicas) > SK_CLUSTER_SPAWN_MAX || o->node_timeout_ms < 0)
        return fail(s, SK_EINVAL, "cluster of %d masters with %d replicas each: at most %d nodes",
                    o->masters, o->replicas, SK_CLUSTER_SPAWN_MAX);
    struct node_files f; /* filled in for each node by start_node */
    char timeout[16];
    const char *argv[32 + SK_CSPAWN_MAX_EXTRA];
    int rc = node_argv(s, o->node_timeout_ms, o->extra_args, &f, timeout, argv);
    if (rc == 0)
        rc = sk_spawn_tmpdir(s->dir, sizeof s->dir, "seckill-cluster", 16, s->errstr,
                             sizeof s->errstr);
    if (rc < 0) return rc;
    s->n = o->masters;
    s->nodes = o->masters * (1 + o->replicas);
    uint64_t rng = (uint64_t)getpid() * 0x100000001b3ULL ^ (uint64_t)sk_mono_us();
    for (int i = 0; i < s->nodes && rc == 0; i++) {
        rc = SK_EEXIST;
        for (int t = 0; t < SK_CSPAWN_TRIES && rc == SK_EEXIST; t++) {
            s->port[i] = pick_port(&rng, s->port, i);
            if (s->port[i] < 0) {
                rc = fail(s, SK_EIO, "no free port pair (P, P+10000) in 20000-30000");
                break;
            }
            rc = start_node(s, i, argv, &f);
        }
        if (rc == SK_EEXIST) rc = SK_EIO; /* errstr set by the last try */
    }
    if (rc == 0) rc = form(s);
    if (rc != 0) {
        kill_nodes(s);
        sk_spawn_rmtree(s->dir, NULL, 0);
        s->dir[0] = 0;
        s->n = s->nodes = 0;
        return rc;
    }
    int off = snprintf(s->url, sizeof s->url, "redis+cluster://");
    for (int i = 0; i < s->n; i++)
        off += snprintf(s->url + off, sizeof s->url - (size_t)off, "%s127.0.0.1:%d", i ? "," : "",
                        s->port[i]);
    return 0;
}

int sk_cluster_spawn_start(struct sk_cluster_spawn *s, int n, const char *const *extra_args)
{
    struct sk_cluster_spawn_opts o = {.masters = n, .extra_args = extra_args};
    return sk_cluster_spawn_start_opts(s, &o);
}

void sk_cluster_spawn_node_url(const struct sk_cluster_spawn *s, int i, char *out, size_t cap)
{
    snprintf(out, cap, "redis://127.0.0.1:%d", i >= 0 && i < s->nodes ? s->port[i] : 0);
}

int sk_cluster_spawn_stop(struct sk_cluster_spawn *s)
{
    kill_nodes(s);
    int rc = sk_spawn_rmtree(s->dir, s->errstr, sizeof s->errstr);
    s->dir[0] = 0;
    s->url[0] = 0;
    s->n = s->nodes = 0;
    return rc;
}
