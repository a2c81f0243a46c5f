/* cluster_harness.c - the tests' shared 6-node Redis Cluster: started by
 * cluster_spawn.c through the runner's hooks; here are the helpers that
 * fail over and move slots. */
#include "support/cluster_harness.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "redis/redis_cluster.h"
#include "spawn/redis_spawn.h"
#include "support/harness.h"
#include "tests/support/spawn/cluster_spawn.h"

#define N SK_TH_CLUSTER_NODES

static struct sk_cluster_spawn cl;
static int state; /* 0 not started, 1 up, -1 failed (cl.errstr says why) */
static const char *used_files[8];
static int nused;

void sk_th_cluster_use_file(const char *file)
{
    if (nused < 8) used_files[nused++] = file;
}

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

redisReply *sk_th_cluster_cmd(int port, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = sk_redis_spawn_vcmd(port, 2000, fmt, ap);
    va_end(ap);
    return r;
}

static void before_test(const char *name, const char *file)
{
    (void)name;
    int used = 0;
    for (int i = 0; i < nused; i++)
        used |= !strcmp(used_files[i], file);
    if (state != 0 || !used) return;
    int64_t t0 = sk_mono_ms();
    struct sk_cluster_spawn_opts o = {.masters = 3, .replicas = 1, .node_timeout_ms = 3000};
    if (sk_cluster_spawn_start_opts(&cl, &o) < 0) {
        state = -1;
        printf("# Redis Cluster failed to start: %s\n", cl.errstr);
        return;
    }
    state = 1;
    printf("# Redis Cluster (3 masters + 3 replicas) on %s ready in %lld ms\n", cl.url,
           (long long)(sk_mono_ms() - t0));
}

static void at_exit(void)
{
    if (state == 1) sk_cluster_spawn_stop(&cl);
}

__attribute__((constructor)) static void register_hooks(void)
{
    sk_th_add_hooks(before_test, at_exit);
}

const char *sk_th_cluster_url(void)
{
    if (state != 1)
        sk_th_fail(__FILE__, __LINE__, "no Redis Cluster: %s",
                   state ? cl.errstr : "file does not say SK_TH_CLUSTER_USED");
    return cl.url;
}

int sk_th_cluster_port(int i)
{
    return cl.port[i];
}

int sk_th_cluster_owner_seen_by(int port, int slot)
{
    redisReply *r = sk_th_cluster_cmd(port, "CLUSTER SLOTS");
    int owner = -1;
    for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->elements >= 3 && slot >= e->element[0]->integer && slot <= e->element[1]->integer)
            owner = (int)e->element[2]->element[1]->integer;
    }
    if (r) freeReplyObject(r);
    return owner;
}

int sk_th_cluster_master_of(int slot)
{
    for (int i = 0; i < N; i++) {
        int o = sk_th_cluster_owner_seen_by(cl.port[i], slot);
        if (o > 0) return o;
    }
    return -1;
}

static void node_id(int port, char *id, size_t cap)
{
    redisReply *r = sk_th_cluster_cmd(port, "CLUSTER MYID");
    CHECK_MSG(r && r->type == REDIS_REPLY_STRING, "CLUSTER MYID on %d failed", port);
    snprintf(id, cap, "%s", r->str);
    freeReplyObject(r);
}

int sk_th_cluster_replica_of(int port)
{
    char id[64];
    node_id(port, id, sizeof id);
    redisReply *r = sk_th_cluster_cmd(port, "CLUSTER REPLICAS %s", id);
    int rp = -1;
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
        r->element[0]->type == REDIS_REPLY_STRING) {
        /* "<id> 127.0.0.1:PORT@BUS slave ..." */
        const char *colon = strchr(r->element[0]->str, ':');
        if (colon) rp = atoi(colon + 1);
    }
    if (r) freeReplyObject(r);
    return rp;
}

static int everyone_sees(int slot, int port)
{
    for (int i = 0; i < N; i++)
        if (sk_th_cluster_owner_seen_by(cl.port[i], slot) != port) return 0;
    return 1;
}

int sk_th_cluster_failover(int slot)
{
    int master = sk_th_cluster_master_of(slot);
    CHECK_MSG(master > 0, "no master for slot %d", slot);
    int rp = sk_th_cluster_replica_of(master);
    CHECK_MSG(rp > 0, "master %d has no replica", master);
    redisReply *r = sk_th_cluster_cmd(rp, "CLUSTER FAILOVER");
    CHECK_MSG(r && r->type == REDIS_REPLY_STATUS, "CLUSTER FAILOVER on %d: %s", rp,
              r && r->str ? r->str : "no reply");
    freeReplyObject(r);
    int64_t deadline = sk_mono_ms() + 20000;
    while (!everyone_sees(slot, rp)) {
        CHECK_MSG(sk_mono_ms() < deadline, "failover of slot %d to %d not seen everywhere", slot,
                  rp);
        pause_ms(20);
    }
    return rp;
}

static void expect_ok(redisReply *r, const char *what)
{
    CHECK_MSG(r && r->type == REDIS_REPLY_STATUS, "%s: %s", what,
              r && r->str ? r->str : "no reply");
    freeReplyObject(r);
}

int sk_th_cluster_migrate_slot(int slot, void (*between)(void *), void *arg)
{
    int src = sk_th_cluster_master_of(slot), dst = -1;
    CHECK_MSG(src > 0, "no master for slot %d", slot);
    /* another master: the owner of a slot far away */
    for (int s = 0; s < SK_CLUSTER_SLOTS && dst < 0; s += 1000) {
        int o = sk_th_cluster_master_of(s);
        if (o > 0 && o != src) dst = o;
    }
    CHECK_MSG(dst > 0, "no other master");
    char sid[64], did[64];
    node_id(src, sid, sizeof sid);
    node_id(dst, did, sizeof did);
    expect_ok(sk_th_cluster_cmd(dst, "CLUSTER SETSLOT %d IMPORTING %s", slot, sid), "IMPORTING");
    expect_ok(sk_th_cluster_cmd(src, "CLUSTER SETSLOT %d MIGRATING %s", slot, did), "MIGRATING");
    for (;;) {
        redisReply *keys = sk_th_cluster_cmd(src, "CLUSTER GETKEYSINSLOT %d 100", slot);
        CHECK_MSG(keys && keys->type == REDIS_REPLY_ARRAY, "GETKEYSINSLOT failed");
        size_t nk = keys->elements;
        for (size_t i = 0; i < nk; i++) {
            redisReply *m = sk_th_cluster_cmd(src, "MIGRATE 127.0.0.1 %d %s 0 5000 REPLACE", dst,
                                              keys->element[i]->str);
            CHECK_MSG(m && (m->type == REDIS_REPLY_STATUS), "MIGRATE %s: %s", keys->element[i]->str,
                      m && m->str ? m->str : "no reply");
            freeReplyObject(m);
        }
        freeReplyObject(keys);
        if (!nk) break;
    }
    if (between) between(arg);
    /* hand over: the target first (so it stops answering ASK-only), then
     * the source, then every other master, as redis-cli does */
    expect_ok(sk_th_cluster_cmd(dst, "CLUSTER SETSLOT %d NODE %s", slot, did), "SETSLOT dst");
    expect_ok(sk_th_cluster_cmd(src, "CLUSTER SETSLOT %d NODE %s", slot, did), "SETSLOT src");
    for (int i = 0; i < N; i++) {
        if (cl.port[i] == src || cl.port[i] == dst) continue;
        redisReply *r = sk_th_cluster_cmd(cl.port[i], "CLUSTER SETSLOT %d NODE %s", slot, did);
        if (r) freeReplyObject(r); /* replicas refuse: fine, they learn by gossip */
    }
    int64_t deadline = sk_mono_ms() + 20000;
    while (!everyone_sees(slot, dst)) {
        CHECK_MSG(sk_mono_ms() < deadline, "slot %d move to %d not seen everywhere", slot, dst);
        pause_ms(20);
    }
    return dst;
}
