/* cluster_harness.c - a private 6-node Redis Cluster for the tests. */
#include "support/cluster_harness.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "redis/redis_cluster.h"
#include "support/harness.h"

#define N SK_TH_CLUSTER_NODES

static struct {
    pid_t pid[N];
    int port[N];
    char dir[256];
    char url[256];
} cl;
static int state; /* 0 not started, 1 up, -1 failed */
static char start_err[256];
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

static int port_free(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 0;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

/* A port in 20000-30000 whose bus port (+10000) is free too. */
static int pick_port(const int *taken, int ntaken)
{
    for (int tries = 0; tries < 2000; tries++) {
        int p = 20000 + (int)((unsigned)rand() % 10000u);
        int dup = 0;
        for (int i = 0; i < ntaken; i++)
            dup |= taken[i] == p || taken[i] + 10000 == p || taken[i] == p + 10000;
        if (!dup && port_free(p) && port_free(p + 10000)) return p;
    }
    return -1;
}

redisReply *sk_th_cluster_cmd(int port, const char *fmt, ...)
{
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (!c || c->err) {
        if (c) redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    redisFree(c);
    return r;
}

static pid_t spawn(const char *const *argv, const char *out)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(1);
        int fd = open(out ? out : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    return pid;
}

static int info_ok(int port)
{
    redisReply *r = sk_th_cluster_cmd(port, "CLUSTER INFO");
    int ok = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "cluster_state:ok") &&
             strstr(r->str, "cluster_known_nodes:6") && strstr(r->str, "cluster_slots_ok:16384");
    if (r) freeReplyObject(r);
    return ok;
}

/* Every node knows 3 replicas and every replica's link to its master is up
 * (a manual failover needs a replica in sync). */
static int replicas_ok(int port)
{
    redisReply *r = sk_th_cluster_cmd(port, "CLUSTER NODES");
    int slaves = 0;
    const char *text = r && r->type == REDIS_REPLY_STRING ? r->str : NULL;
    for (const char *p = text; p && (p = strstr(p, "slave ")); p++)
        slaves++;
    int mine = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "myself,slave");
    if (r) freeReplyObject(r);
    if (slaves != 3) return 0;
    if (!mine) return 1;
    r = sk_th_cluster_cmd(port, "INFO replication");
    int up = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "master_link_status:up");
    if (r) freeReplyObject(r);
    return up;
}

static int start(char *err, size_t cap)
{
    srand((unsigned)getpid() ^ (unsigned)sk_mono_ms());
    snprintf(cl.dir, sizeof cl.dir, "/tmp/seckill-cluster-XXXXXX");
    if (!mkdtemp(cl.dir)) return snprintf(err, cap, "mkdtemp: %s", strerror(errno)), -1;
    for (int i = 0; i < N; i++) {
        cl.port[i] = pick_port(cl.port, i);
        if (cl.port[i] < 0) return snprintf(err, cap, "no free port pair in 20000-30000"), -1;
        char d[300], port[16], log[340];
        snprintf(d, sizeof d, "%s/n%d", cl.dir, i);
        mkdir(d, 0777);
        snprintf(port, sizeof port, "%d", cl.port[i]);
        snprintf(log, sizeof log, "%s/redis.log", d);
        const char *argv[] = {"redis-server",
                              "--port",
                              port,
                              "--bind",
                              "127.0.0.1",
                              "--dir",
                              d,
                              "--save",
                              "",
                              "--appendonly",
                              "no",
                              "--cluster-enabled",
                              "yes",
                              "--cluster-config-file",
                              "nodes.conf",
                              "--cluster-node-timeout",
                              "3000",
                              "--logfile",
                              log,
                              "--daemonize",
                              "no",
                              NULL};
        cl.pid[i] = spawn(argv, NULL);
    }
    int64_t deadline = sk_mono_ms() + 10000;
    for (int i = 0; i < N; i++)
        for (;;) {
            redisReply *r = sk_th_cluster_cmd(cl.port[i], "PING");
            int ok = r && r->type == REDIS_REPLY_STATUS;
            if (r) freeReplyObject(r);
            if (ok) break;
            if (sk_mono_ms() > deadline)
                return snprintf(err, cap, "node %d (port %d) did not start", i, cl.port[i]), -1;
            pause_ms(10);
        }
    char addr[N][32], out[300];
    const char *argv[16] = {"redis-cli", "--cluster", "create"};
    int n = 3;
    for (int i = 0; i < N; i++) {
        snprintf(addr[i], sizeof addr[i], "127.0.0.1:%d", cl.port[i]);
        argv[n++] = addr[i];
    }
    argv[n++] = "--cluster-replicas";
    argv[n++] = "1";
    argv[n++] = "--cluster-yes";
    argv[n] = NULL;
    snprintf(out, sizeof out, "%.200s/create.log", cl.dir);
    pid_t p = spawn(argv, out);
    int st = 0;
    waitpid(p, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return snprintf(err, cap, "redis-cli --cluster create failed (see %.150s)", out), -1;
    deadline = sk_mono_ms() + 30000;
    for (int i = 0; i < N; i++)
        while (!info_ok(cl.port[i]) || !replicas_ok(cl.port[i])) {
            if (sk_mono_ms() > deadline)
                return snprintf(err, cap, "node %d never reported cluster_state:ok", i), -1;
            pause_ms(20);
        }
    n = snprintf(cl.url, sizeof cl.url, "redis+cluster://127.0.0.1:%d", cl.port[0]);
    for (int i = 1; i < 3; i++)
        n += snprintf(cl.url + n, sizeof cl.url - (size_t)n, ",127.0.0.1:%d", cl.port[i]);
    return 0;
}

static void stop_all(void)
{
    for (int i = 0; i < N; i++)
        if (cl.pid[i] > 0) {
            kill(cl.pid[i], SIGKILL);
            waitpid(cl.pid[i], NULL, 0);
            cl.pid[i] = 0;
        }
    if (cl.dir[0]) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%.200s'", cl.dir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", cl.dir);
    }
}

static void before_test(const char *name, const char *file)
{
    (void)name;
    int used = 0;
    for (int i = 0; i < nused; i++)
        used |= !strcmp(used_files[i], file);
    if (state != 0 || !used) return;
    int64_t t0 = sk_mono_ms();
    if (start(start_err, sizeof start_err) < 0) {
        state = -1;
        printf("# Redis Cluster failed to start: %s\n", start_err);
        return;
    }
    state = 1;
    printf("# Redis Cluster (3 masters + 3 replicas) on %s ready in %lld ms\n", cl.url,
           (long long)(sk_mono_ms() - t0));
}

static void at_exit(void)
{
    if (state != 0) stop_all();
}

__attribute__((constructor)) static void register_hooks(void)
{
    sk_th_add_hooks(before_test, at_exit);
}

const char *sk_th_cluster_url(void)
{
    if (state != 1)
        sk_th_fail(__FILE__, __LINE__, "no Redis Cluster: %s",
                   state ? start_err : "file does not say SK_TH_CLUSTER_USED");
    return cl.url;
}

int sk_th_cluster_port(int i)
{
    return cl.port[i];
}

/* Port of the master of slot in the CLUSTER SLOTS answer of node port. */
static int owner_seen_by(int port, int slot)
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
        int o = owner_seen_by(cl.port[i], slot);
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

/* Port of a replica of the master at port, from its CLUSTER REPLICAS. */
static int replica_of(int port)
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
        if (owner_seen_by(cl.port[i], slot) != port) return 0;
    return 1;
}

int sk_th_cluster_failover(int slot)
{
    int master = sk_th_cluster_master_of(slot);
    CHECK_MSG(master > 0, "no master for slot %d", slot);
    int rp = replica_of(master);
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
