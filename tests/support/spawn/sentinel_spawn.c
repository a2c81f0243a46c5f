/* sentinel_spawn.c - start and stop a private master, its replicas and three
 * Sentinels (see sentinel_spawn.h). The data nodes are redis_spawn.c's,
 * the process plumbing spawn.c's. */
#include "tests/support/spawn/sentinel_spawn.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <hiredis.h>

#include "core/clock.h"
#include "core/error.h"
#include "spawn/netutil.h"
#include "spawn/redis_spawn.h"
#include "spawn/spawn.h"

#define SK_SSPAWN_READY_MS 30000
#define SK_SSPAWN_STOP_MS 5000
#define SK_SSPAWN_MAX_EXTRA 32
#define SK_SSPAWN_TRIES 5

#define fail(s, ...) sk_spawn_fail((s)->errstr, sizeof(s)->errstr, __VA_ARGS__)

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* One command on 127.0.0.1:port over a fresh connection; NULL on an I/O
 * error. Caller frees the reply. */
static redisReply *cmd_at(int port, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = sk_redis_spawn_vcmd(port, 1000, fmt, ap);
    va_end(ap);
    return r;
}

/* The value of field in a flat field/value array reply, or NULL. */
static const char *field(const redisReply *r, const char *name)
{
    if (!r || r->type != REDIS_REPLY_ARRAY) return NULL;
    for (size_t i = 0; i + 1 < r->elements; i += 2)
        if (r->element[i]->type == REDIS_REPLY_STRING && !strcmp(r->element[i]->str, name) &&
            r->element[i + 1]->type == REDIS_REPLY_STRING)
            return r->element[i + 1]->str;
    return NULL;
}

/* 1 when node i is a replica of the master on port mport with its link up,
 * and the master counts it online (it has acknowledged since its sync:
 * WAIT counts it from then on). */
static int replica_up(const struct sk_sentinel_spawn *s, int i, int mport)
{
    redisReply *r = cmd_at(s->node[i].port, "INFO replication");
    char want[64];
    snprintf(want, sizeof want, "master_port:%d\r", mport);
    int ok = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "role:slave") &&
             strstr(r->str, want) && strstr(r->str, "master_link_status:up");
    if (r) freeReplyObject(r);
    if (!ok) return 0;
    r = cmd_at(mport, "INFO replication");
    snprintf(want, sizeof want, "port=%d,state=online", s->node[i].port);
    ok = r && r->type == REDIS_REPLY_STRING && strstr(r->str, want);
    if (r) freeReplyObject(r);
    return ok;
}

/* Readiness of Sentinel *arg (an index into s, see struct ready_ref). */
struct ready_ref {
    struct sk_sentinel_spawn *s;
    int i;
};

static int sentinel_ready(void *arg)
{
    const struct ready_ref *ref = arg;
    const struct sk_sentinel_spawn *s = ref->s;
    redisReply *r = cmd_at(s->sport[ref->i], "SENTINEL master %s", s->name);
    const char *flags = field(r, "flags"), *slaves = field(r, "num-slaves"),
               *others = field(r, "num-other-sentinels");
    int ok = flags && !strcmp(flags, "master") && slaves && atoi(slaves) == s->nodes - 1 &&
             others && atoi(others) == SK_SENTINEL_SPAWN_SENTINELS - 1;
    if (r) freeReplyObject(r);
    return ok;
}

static int pings(void *arg)
{
    redisReply *r = cmd_at(*(const int *)arg, "PING");
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    return ok;
}

static int launch_sentinel(struct sk_sentinel_spawn *s, int i);

/* Writes Sentinel i's configuration and starts it (not yet waiting for it
 * to know the others). */
static int start_sentinel(struct sk_sentinel_spawn *s, int i,
                          const struct sk_sentinel_spawn_opts *o)
{
    char sdir[300], conf[340], log[340];
    snprintf(sdir, sizeof sdir, "%.250s/s%d", s->dir, i);
    snprintf(conf, sizeof conf, "%s/sentinel.conf", sdir);
    snprintf(log, sizeof log, "%s/sentinel.log", sdir);
    if (mkdir(sdir, 0700) < 0 && errno != EEXIST)
        return fail(s, SK_EIO, "mkdir %s: %s", sdir, strerror(errno));
    int rc = SK_EEXIST;
    for (int t = 0; t < SK_SSPAWN_TRIES && rc == SK_EEXIST; t++) {
        s->sport[i] = sk_net_free_port();
        if (s->sport[i] <= 0) return fail(s, SK_EIO, "no free loopback port");
        FILE *f = fopen(conf, "w");
        if (!f) return fail(s, SK_EIO, "cannot write %s: %s", conf, strerror(errno));
        /* The Sentinels rewrite this file as they learn (it must be theirs). */
        fprintf(f,
                "port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\ndaemonize no\n"
                "sentinel resolve-hostnames no\n"
                "sentinel monitor %s 127.0.0.1 %d 2\n"
                "sentinel down-after-milliseconds %s %d\n"
                "sentinel failover-timeout %s %d\n"
                "sentinel parallel-syncs %s 1\n",
                s->sport[i], sdir, log, s->name, s->node[0].port, s->name,
                o->down_after_ms > 0 ? o->down_after_ms : 1000, s->name,
                o->failover_timeout_ms > 0 ? o->failover_timeout_ms : 10000, s->name);
        if (fclose(f) != 0) return fail(s, SK_EIO, "cannot write %s", conf);
        rc = launch_sentinel(s, i);
    }
    return rc == SK_EEXIST ? SK_EIO : rc;
}

/* Starts Sentinel i from its sentinel.conf. */
static int launch_sentinel(struct sk_sentinel_spawn *s, int i)
{
    char sdir[300], conf[340], log[340], err[340], name[64];
    snprintf(sdir, sizeof sdir, "%.250s/s%d", s->dir, i);
    snprintf(conf, sizeof conf, "%s/sentinel.conf", sdir);
    snprintf(log, sizeof log, "%s/sentinel.log", sdir);
    snprintf(err, sizeof err, "%s/sentinel.stderr", sdir);
    snprintf(name, sizeof name, "redis sentinel %d", i);
    const char *argv[] = {"redis-server", conf, "--sentinel", NULL};
    struct sk_spawn_cmd cmd = {.argv = argv,
                               .err = err,
                               .flags = SK_SPAWN_PDEATHSIG,
                               .name = name,
                               .log = log,
                               .ready = pings,
                               .arg = &s->sport[i],
                               .ready_ms = 10000,
                               .poll_ms = 10,
                               .stop_sig = SIGTERM,
                               .stop_ms = SK_SSPAWN_STOP_MS};
    return sk_spawn_start(&cmd, &s->spid[i], s->errstr, sizeof s->errstr);
}

int sk_sentinel_spawn_restart_sentinel(struct sk_sentinel_spawn *s, int i)
{
    if (i < 0 || i >= SK_SENTINEL_SPAWN_SENTINELS || s->spid[i] > 0)
        return fail(s, SK_EINVAL, "Sentinel %d: no such Sentinel, or it runs", i);
    return launch_sentinel(s, i);
}

/* Until WAIT on the master counts every replica: after a full sync the
 * master streams to a replica only from its first acknowledgement (up to a
 * second later), though INFO already says online. A write, WAIT, the key
 * deleted again. */
static int wait_counts(struct sk_sentinel_spawn *s, int ms)
{
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", s->node[0].port, tv);
    if (!c || c->err) {
        if (c) redisFree(c);
        return fail(s, SK_EIO, "master unreachable");
    }
    redisSetTimeout(c, tv);
    int64_t deadline = sk_mono_ms() + ms;
    int ok = 0;
    while (!ok && sk_mono_ms() < deadline) {
        redisReply *r = redisCommand(c, "SET seckill:spawn:probe 1");
        if (r) freeReplyObject(r);
        r = redisCommand(c, "WAIT %d 100", s->nodes - 1);
        ok = r && r->type == REDIS_REPLY_INTEGER && r->integer == s->nodes - 1;
        if (r) freeReplyObject(r);
    }
    redisReply *r = redisCommand(c, "DEL seckill:spawn:probe");
    if (r) freeReplyObject(r);
    redisFree(c);
    return ok ? 0 : fail(s, SK_EIO, "WAIT never counted the %d replicas", s->nodes - 1);
}

static int start_nodes(struct sk_sentinel_spawn *s, const struct sk_sentinel_spawn_opts *o)
{
    const char *args[8 + SK_SSPAWN_MAX_EXTRA] = {"--repl-diskless-sync-delay", "0"};
    char mport[16];
    int rc = sk_spawn_args(args, 2, sizeof args / sizeof *args, NULL, o->extra_args,
                           "redis-server arguments", s->errstr, sizeof s->errstr);
    if (rc < 0) return rc;
    if ((rc = sk_redis_spawn_start(&s->node[0], args)) < 0)
        return fail(s, rc, "master: %s", s->node[0].errstr);
    snprintf(mport, sizeof mport, "%d", s->node[0].port);
    const char *rargs[12 + SK_SSPAWN_MAX_EXTRA] = {"--replicaof", "127.0.0.1", mport,
                                                   "--repl-diskless-sync-delay", "0"};
    if ((rc = sk_spawn_args(rargs, 5, sizeof rargs / sizeof *rargs, NULL, o->extra_args,
                            "redis-server arguments", s->errstr, sizeof s->errstr)) < 0)
        return rc;
    for (int i = 1; i < s->nodes; i++) {
        if ((rc = sk_redis_spawn_start(&s->node[i], rargs)) < 0)
            return fail(s, rc, "replica %d: %s", i, s->node[i].errstr);
    }
    for (int i = 1; i < s->nodes; i++)
        if (sk_sentinel_spawn_wait_replica(s, i, SK_SSPAWN_READY_MS) < 0) return SK_EIO;
    return wait_counts(s, SK_SSPAWN_READY_MS);
}

int sk_sentinel_spawn_start(struct sk_sentinel_spawn *s, const struct sk_sentinel_spawn_opts *o)
{
    memset(s, 0, sizeof *s);
    if (o->replicas < 1 || o->replicas > SK_SENTINEL_SPAWN_MAX_NODES - 1)
        return fail(s, SK_EINVAL, "%d replicas: 1..%d", o->replicas,
                    SK_SENTINEL_SPAWN_MAX_NODES - 1);
    s->nodes = 1 + o->replicas;
    snprintf(s->name, sizeof s->name, "seckill");
    int rc =
        sk_spawn_tmpdir(s->dir, sizeof s->dir, "seckill-sentinel", 40, s->errstr, sizeof s->errstr);
    if (rc == 0) rc = start_nodes(s, o);
    for (int i = 0; i < SK_SENTINEL_SPAWN_SENTINELS && rc == 0; i++)
        rc = start_sentinel(s, i, o);
    for (int i = 0; i < SK_SENTINEL_SPAWN_SENTINELS && rc == 0; i++) {
        struct ready_ref ref = {s, i};
        int st;
        rc = sk_spawn_wait(&s->spid[i], sentinel_ready, &ref, SK_SSPAWN_READY_MS, 20, &st);
        if (rc == SK_ETIMEDOUT)
            rc = fail(s, SK_EIO,
                      "sentinel %d (port %d) did not see master %s with %d replicas and %d other "
                      "sentinels within %d ms",
                      i, s->sport[i], s->name, s->nodes - 1, SK_SENTINEL_SPAWN_SENTINELS - 1,
                      SK_SSPAWN_READY_MS);
        else if (rc < 0)
            rc = fail(s, SK_EIO, "sentinel %d exited", i);
    }
    if (rc < 0) {
        char keep[256];
        snprintf(keep, sizeof keep, "%s", s->errstr);
        sk_sentinel_spawn_stop(s);
        snprintf(s->errstr, sizeof s->errstr, "%s", keep);
        return rc;
    }
    int off = snprintf(s->url, sizeof s->url, "redis+sentinel://");
    for (int i = 0; i < SK_SENTINEL_SPAWN_SENTINELS; i++)
        off += snprintf(s->url + off, sizeof s->url - (size_t)off, "%s127.0.0.1:%d", i ? "," : "",
                        s->sport[i]);
    snprintf(s->url + off, sizeof s->url - (size_t)off, "/%s", s->name);
    return 0;
}

/* The port Sentinel i names master, or -1. */
static int named_by(const struct sk_sentinel_spawn *s, int i)
{
    redisReply *r = cmd_at(s->sport[i], "SENTINEL get-master-addr-by-name %s", s->name);
    int port = -1;
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[1]->type == REDIS_REPLY_STRING)
        port = atoi(r->element[1]->str);
    if (r) freeReplyObject(r);
    return port;
}

static int node_of_port(const struct sk_sentinel_spawn *s, int port)
{
    for (int i = 0; i < s->nodes; i++)
        if (s->node[i].port == port) return i;
    return -1;
}

int sk_sentinel_spawn_master(struct sk_sentinel_spawn *s)
{
    for (int i = 0; i < SK_SENTINEL_SPAWN_SENTINELS; i++) {
        if (s->spid[i] <= 0) continue;
        int port = named_by(s, i);
        if (port > 0) return node_of_port(s, port);
    }
    return -1;
}

static int says_master(const struct sk_sentinel_spawn *s, int i)
{
    redisReply *r = cmd_at(s->node[i].port, "ROLE");
    int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
             r->element[0]->type == REDIS_REPLY_STRING && !strcmp(r->element[0]->str, "master");
    if (r) freeReplyObject(r);
    return ok;
}

int sk_sentinel_spawn_wait_failover(struct sk_sentinel_spawn *s, int old, int ms)
{
    int64_t deadline = sk_mono_ms() + ms;
    for (;;) {
        int agreed = -2;
        for (int i = 0; i < SK_SENTINEL_SPAWN_SENTINELS && agreed != -1; i++) {
            if (s->spid[i] <= 0) continue;
            int n = node_of_port(s, named_by(s, i));
            agreed = n < 0 || n == old || (agreed >= 0 && agreed != n) ? -1 : n;
        }
        if (agreed >= 0 && says_master(s, agreed)) return agreed;
        if (sk_mono_ms() > deadline) {
            fail(s, SK_ETIMEDOUT, "no failover away from node %d within %d ms", old, ms);
            return -1;
        }
        pause_ms(20);
    }
}

int sk_sentinel_spawn_wait_replica(struct sk_sentinel_spawn *s, int i, int ms)
{
    int64_t deadline = sk_mono_ms() + ms;
    for (;;) {
        int m = sk_sentinel_spawn_master(s);
        if (m < 0 && s->spid[0] <= 0) m = 0; /* before the Sentinels run: node 0 */
        if (m >= 0 && m != i && replica_up(s, i, s->node[m].port)) return 0;
        if (sk_mono_ms() > deadline)
            return fail(s, SK_ETIMEDOUT, "node %d (port %d) not a replica in sync within %d ms", i,
                        s->node[i].port, ms);
        pause_ms(20);
    }
}

int sk_sentinel_spawn_stop(struct sk_sentinel_spawn *s)
{
    int rc = 0;
    for (int i = 0; i < SK_SENTINEL_SPAWN_SENTINELS; i++)
        if (s->spid[i] > 0) kill(s->spid[i], SIGTERM);
    for (int i = 0; i < SK_SENTINEL_SPAWN_SENTINELS; i++) {
        sk_spawn_stop(s->spid[i], SIGTERM, SK_SSPAWN_STOP_MS);
        s->spid[i] = 0;
    }
    for (int i = 0; i < SK_SENTINEL_SPAWN_MAX_NODES; i++)
        if (s->node[i].dir[0] && sk_redis_spawn_stop(&s->node[i]) < 0) {
            rc = fail(s, SK_EIO, "%s", s->node[i].errstr);
        }
    if (sk_spawn_rmtree(s->dir, s->errstr, sizeof s->errstr) < 0) rc = SK_EIO;
    s->dir[0] = 0;
    s->url[0] = 0;
    return rc;
}
