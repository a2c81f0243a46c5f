/* test_chaos.c - the nemesis (`make chaos`): a flash sale under a seeded,
 * random mix of faults, and afterwards the checker (support/chaos_check.h)
 * on the database and Redis, read directly.
 *
 * Topologies: Redis Sentinel (a master, two replicas, three Sentinels) and
 * Redis Cluster (three masters, three replicas), every data node with
 * `appendonly yes`, `appendfsync always`. The database is a parameter
 * (CHAOS_STORE: postgres, the default, sqlite or mariadb;
 * support/chaos_store.h).
 * Two serve nodes under `--sync-replicas` of every replica (2 on Sentinel, 1 on
 * Cluster: WAIT N below the replicas cannot promise, docs/failover.md), each a supervisor with two
 * HTTP processes: A is `--role all` (its third child is the order worker,
 * with the sweeper, the periodic reconcile and the sampler of /metrics), B
 * is `--role api`, so the two nodes share neither the rollback guard's
 * memory nor anything else, as two hosts would not.
 *
 * The schedule comes from the seed (CHAOS_SEED=N repeats it; a fresh one
 * is drawn and printed otherwise): a fault every 4-8 s for CHAOS_S seconds
 * (default 120): SIGKILL or SIGSTOP+SIGCONT of a master, of a replica, of
 * an HTTP process, of the order worker; the database stopped and started
 * again, or frozen (SIGSTOP of every process of it) and thawed; a failover
 * to a lagging replica (the replicas frozen 1-2 s while the master admits,
 * unconfirmed, then the master killed); and the newer kinds (see their
 * table): a master's maxmemory below its use, a wall clock jumped (a serve
 * host's, the worker's, a master's), a full disk (the database's, a
 * master's AOF), the worker held until the streams hold 50 times their
 * backlog, Sentinels that drift (one killed and back stale, a quorum
 * changed), and the shop's webhook endpoint: serve A's worker posts the
 * outbox's events to a receiver of the test's own (support/webhook_rx.h)
 * that fails half of them for a while (500, 429, hangs, resets, slow
 * answers), or holds one while the worker is killed. Killed
 * Redis nodes come back on their port and data; killed serve processes
 * are replaced by their supervisor. At most one Redis fault at a time (a
 * second one while one lasts is skipped and logged), so the topology can
 * always fail over. Who is hit is decided when the fault is due (the
 * masters of that moment). Twelve buyers record every answer; they retry
 * with the same Idempotency-Key after a 503 or no answer.
 *
 * After the last fault heals, the sale goes on for 10 s (it must sell
 * again), the buyers stop, the worker drains, and the checker rules; then
 * every event of the outbox must reach the receiver (support/chaos_hooks.h
 * compares what it got with the database's events and orders). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "engine/backlog.h"
#include "engine/keys.h"
#include "orders/order_worker.h"
#include "redis/redis_cluster.h"
#include "spawn/redis_spawn.h"
#include "spawn/spawn.h"
#include "support/chaos_buyers.h"
#include "support/chaos_check.h"
#include "support/chaos_hooks.h"
#include "support/chaos_store.h"
#include "support/cluster_harness.h"
#include "support/fault_plan.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/http_client.h"
#include "support/proc_watch.h"
#include "support/sale_env.h"
#include "support/sentinel_harness.h"
#include "support/soak_chart.h"
#include "support/webhook_rx.h"
#include "tests/support/spawn/cluster_spawn.h"

#define CHAOS_DEFAULT_S 120
#define POST_HEAL_S 10
/* After the heal the buyers go on at least POST_HEAL_S, and until every
 * activity answered a 200 or sold_out since the heal, at most this long:
 * two failovers of one Sentinel master name within 2 x failover-timeout
 * (20 s) wait for it, and --sync-replicas N for a replica's resync. The
 * checker then judges whether the sale resumed. */
#define POST_HEAL_MAX_S 60
#define NODE_TIMEOUT_MS 2000
#define MAX_FAULTS 512
#define BUYERS 12
#define USERS 200000
#define LIMIT 2

/* protected configs: the nemesis moves a node's directory onto a small
 * filesystem (CONFIG SET dir) for disk_full */
static const char *const redis_extra[] = {
    "--appendonly", "yes", "--appendfsync", "always", "--hz", "100", "--enable-protected-configs",
    "yes",          NULL};

/* ---- the schedule ------------------------------------------------------------ */

enum fault_kind {
    F_MASTER_KILL,
    F_MASTER_STOP,
    F_REPLICA_KILL,
    F_REPLICA_STOP,
    F_API_KILL,
    F_API_STOP,
    F_WORKER_KILL,
    F_WORKER_STOP,
    F_DB_STOP,
    F_DB_FREEZE,
    F_LAG_FAILOVER,
    F_REDIS_OOM,
    F_CLOCK_JUMP,
    F_DISK_FULL,
    F_BACKLOG_CAP,
    F_SENTINEL_DRIFT,
    F_HOOK_FAULTS,
    F_HOOK_KILL,
    F_KINDS
};

static struct sk_th_fault_kind kinds[F_KINDS] = {
    [F_MASTER_KILL] = {"master_kill", "SIGKILL of a Redis master", 3, 3000, 8000},
    [F_MASTER_STOP] = {"master_stop", "SIGSTOP of a Redis master", 2, 500, 5000},
    [F_REPLICA_KILL] = {"replica_kill", "SIGKILL of a Redis replica", 1, 1000, 5000},
    [F_REPLICA_STOP] = {"replica_stop", "SIGSTOP of a Redis replica", 1, 500, 4000},
    [F_API_KILL] = {"api_kill", "SIGKILL of an HTTP process", 2, 0, 0},
    [F_API_STOP] = {"api_stop", "SIGSTOP of an HTTP process", 1, 500, 3000},
    [F_WORKER_KILL] = {"worker_kill", "SIGKILL of the order worker", 2, 0, 0},
    [F_WORKER_STOP] = {"worker_stop", "SIGSTOP of the order worker", 1, 500, 5000},
    [F_DB_STOP] = {"db_stop", "database stopped", 1, 1000, 5000},
    [F_DB_FREEZE] = {"db_freeze", "database frozen", 1, 500, 5000},
    /* the replicas frozen and their links cut for 1-2 s (the master goes on
     * admitting, unconfirmed), then the master killed and the replicas
     * continued: a failover to a replica that lacks the last writes (the
     * rollback guard's case) */
    [F_LAG_FAILOVER] = {"lag_failover", "failover to a lagging replica", 2, 3000, 8000},
    /* maxmemory of a master set to 3/4 of what it uses (noeviction), then
     * back to none */
    [F_REDIS_OOM] = {"redis_oom", "a master's maxmemory below its use", 2, 2000, 6000},
    /* the wall clock of serve B's host, of serve A's (the worker's) or of
     * a master: 3 h ahead (past every window's end and the payment
     * timeout) or 2 h behind (before every window's start), then back */
    [F_CLOCK_JUMP] = {"clock_jump", "a clock jumped (serve host, worker or master)", 2, 2000, 6000},
    /* the database's filesystem, or a master's AOF directory, filled, then
     * freed */
    [F_DISK_FULL] = {"disk_full", "a full disk (the database's or a master's AOF)", 2, 3000, 8000},
    /* the worker stopped until the streams hold BACKLOG_FACTOR times the
     * backlog they held (at most max_ms), then its catch-up timed */
    [F_BACKLOG_CAP] = {"backlog_cap", "the worker stopped until the backlog is 50x", 1, 4000,
                       20000},
    /* Sentinel topology: a Sentinel killed while another one's quorum is 1
     * or 3, then started again from the configuration it had at the start */
    [F_SENTINEL_DRIFT] = {"sentinel_drift", "Sentinels drift (one killed, back stale; quorum)", 2,
                          3000, 8000},
    /* the shop's webhook endpoint (the test's receiver): half of its
     * requests answered 500, 429 + Retry-After, never (a hang until the
     * dispatcher's 2 s timeout), with a reset, or slowly */
    [F_HOOK_FAULTS] = {"webhook_faults", "the webhook receiver fails (500, 429, hang, reset, slow)",
                       2, 2000, 8000},
    /* the receiver holds the next delivery unanswered, and the worker (its
     * dispatcher) is killed while it waits: the event must come again */
    [F_HOOK_KILL] = {"webhook_kill", "the worker killed mid-delivery of a webhook", 1, 0, 0},
};

/* The webhook endpoint's secret (serve A's --webhook-secret). */
#define HOOK_SECRET "whsec_Y2hhb3MtbmVtZXNpcy13ZWJob29rLXNlY3JldC0wMQ=="
/* After the drain, every event of the outbox must be acknowledged within
 * this (the dispatcher's settle of 10 s on a server store, retries of the
 * last faults, a worker restarted). */
#define HOOK_WAIT_MS 180000

#define BACKLOG_FACTOR 50
#define BACKLOG_FLOOR 100 /* entries: the usual backlog counted as at least this */
/* the documented bound (docs/failover.md): while the worker is stopped,
 * Redis memory grows by at most this per admission (its stream entry, its
 * ledger and idempotency records, its buyer's count), plus the slack */
#define BACKLOG_BYTES_PER_ADMISSION 1024
#define BACKLOG_MEM_SLACK (8 << 20)
#define FS_DB_MB 768  /* the database's filesystem */
#define FS_AOF_MB 384 /* each data node's AOF directory */

/* CHAOS_KINDS=id,id...: only those kinds (to chase one finding); the
 * weights of the others become 0. */
static void restrict_kinds(const char *list)
{
    if (!list || !*list) return;
    int any = 0;
    for (int k = 0; k < F_KINDS; k++) {
        const char *p = strstr(list, kinds[k].id);
        size_t l = strlen(kinds[k].id);
        int on = p && (p == list || p[-1] == ',') && (p[l] == 0 || p[l] == ',');
        if (!on) kinds[k].weight = 0;
        any |= on;
    }
    CHECK_MSG(any, "CHAOS_KINDS=%s names no fault kind", list);
}

static int weight(int k)
{
    return kinds[k].weight;
}

static size_t plan(uint64_t seed, int duration_s, int gap_min_ms, int gap_max_ms,
                   struct sk_th_fault *f, size_t cap)
{
    int total = 0;
    for (int k = 0; k < F_KINDS; k++)
        total += kinds[k].weight;
    CHECK_MSG(total > 0, "no fault kind left for this topology (CHAOS_KINDS)");
    return sk_th_fault_plan(seed, duration_s, kinds, F_KINDS, gap_min_ms, gap_max_ms, f, cap);
}

/* ---- the system under test ---------------------------------------------------- */

struct serve_proc {
    const char *name, *role;
    pid_t pid;
    int port, ops;
    char log[400];
    char clock[400]; /* its host's libfaketime timestamp file ("" none) */
};

/* What a run is: the nemesis (`make chaos`) or the soak (`make soak`). */
struct run_opts {
    int duration_s;
    int gap_min_ms, gap_max_ms; /* between faults */
    int threads, think_us;      /* buyers */
    uint32_t users;
    int64_t stocks[3];
    int soak; /* sample every process each minute, judge growth, draw the chart */
};

struct chaos {
    int cluster;
    uint64_t seed;
    int duration_s;
    struct sk_sentinel_spawn ss;
    struct sk_cluster_spawn cl;
    const char *url;
    struct chaos_store db;
    struct serve_proc sv[2];
    struct chaos_activity acts[3];
    size_t nacts;
    int64_t t0, t0_mono;
    /* what is broken now, to heal */
    struct active {
        int kind, node;
        pid_t pid;
        int64_t heal_at;
        int log; /* its entry in done[] */
        int aux; /* the newer kinds: which clock, which Sentinel, ... */
    } act[16];
    /* every fault applied: its kind (as planned) and when it began and healed (wall) */
    struct done_fault {
        int kind;
        int64_t from, to;
    } done[MAX_FAULTS];
    int ndone;
    int nact;
    int redis_busy, db_busy; /* a Redis fault, a database fault lasts */
    size_t applied, skipped;
    double max_age_s; /* the oldest unpersisted order, as /metrics showed it */
    int age_told;
    const struct run_opts *ro;
    sk_redis *r; /* the test's own blocking client (short timeouts) */
    sk_store *st;
    /* the new kinds' machinery */
    char dbfs[300]; /* the database's own small filesystem ("": none) */
    int aof_fs;     /* each data node's AOF directory on a small filesystem */
    char shim[400]; /* the clock shift library preloaded into redis-server ("": none) */
    int sentinel_busy, worker_busy;
    struct chaos_clock_jump jumps[64]; /* the masters' clock jumps, for the checker */
    size_t njumps;
    int clock_jumped;
    struct backlog_cap {
        int phase; /* 0 none, 1 stopped, 2 catching up */
        pid_t pid;
        int log;
        int64_t usual, target, stop_at, deadline, resume_at, adm0, mem0, persisted0;
        int64_t peak_entries, peak_mem, peak_adm;
        unsigned masters; /* the master nodes when it stopped */
    } bl;
    double rates[32]; /* backlog catch-up rates, orders/s */
    int nrates;
    long db_errors0;    /* the worker's database errors at a full disk's start */
    int64_t db_adm0;    /* the orders admitted then (-1: unknown) */
    int open_s;         /* the activities' window, from the start (a jump ahead passes it) */
    char extra[8][400]; /* findings of the new kinds outside the checker */
    int nextra;
    /* the shop's webhook endpoint: a receiver of the test's own */
    struct sk_th_rx *rx;
    int hook_busy; /* webhook_faults lasts */
    struct hook_hold {
        int phase; /* 1: holding deliveries until one waits, then the kill */
        int64_t deadline;
    } hk;
};

static void extra_finding(struct chaos *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void extra_finding(struct chaos *c, const char *fmt, ...)
{
    if (c->nextra >= 8) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->extra[c->nextra++], sizeof c->extra[0], fmt, ap);
    va_end(ap);
}

static double rel_s(const struct chaos *c)
{
    return (double)(sk_mono_ms() - c->t0_mono) / 1000;
}

#define SAY(c, ...)                                                                                \
    do {                                                                                           \
        printf("    # t=%+6.1fs ", rel_s(c));                                                      \
        printf(__VA_ARGS__);                                                                       \
        printf("\n");                                                                              \
        fflush(stdout);                                                                            \
    } while (0)

static int nnodes(const struct chaos *c)
{
    return c->cluster ? c->cl.nodes : c->ss.nodes;
}

static pid_t *node_pid(struct chaos *c, int i)
{
    return c->cluster ? &c->cl.pid[i] : &c->ss.node[i].pid;
}

static int node_port(const struct chaos *c, int i)
{
    return c->cluster ? c->cl.port[i] : c->ss.node[i].port;
}

/* "master", "slave", or "" (down, frozen, or no answer within 300 ms). */
static void node_role(const struct chaos *c, int i, char *out, size_t cap)
{
    out[0] = 0;
    redisReply *r = sk_redis_spawn_cmd(node_port(c, i), 300, "ROLE");
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements &&
        r->element[0]->type == REDIS_REPLY_STRING)
        snprintf(out, cap, "%s", r->element[0]->str);
    if (r) freeReplyObject(r);
}

static void redis_clock_env(const struct chaos *c, int on);

static void node_restart(struct chaos *c, int i)
{
    redis_clock_env(c, 1);
    if (c->cluster) {
        CHECK_MSG(sk_cluster_spawn_restart_node(&c->cl, i, NODE_TIMEOUT_MS, redis_extra) == 0,
                  "restart of node %d: %s", i, c->cl.errstr);
    } else {
        sk_th_sentinel_restart_node(&c->ss, i, redis_extra);
    }
    redis_clock_env(c, 0);
}

/* ---- the machinery of the newer kinds ------------------------------------------- */

/* Debian's libfaketime (package libfaketime), the thread-safe build. */
static const char *faketime_lib(void)
{
    static char path[400];
    if (path[0]) return path;
    glob_t g;
    if (glob("/usr/lib/*/faketime/libfaketimeMT.so.1", 0, NULL, &g) == 0 && g.gl_pathc)
        snprintf(path, sizeof path, "%s", g.gl_pathv[0]);
    globfree(&g);
    CHECK_MSG(path[0], "clock_jump needs libfaketime (apt-get install libfaketime faketime: "
                       "scripts/deps.sh)");
    return path;
}

/* libfaketime makes a shared memory segment and a semaphore per process
 * (/dev/shm/faketime_shm_<pid>, sem.faketime_sem_<pid>) and removes them
 * at its exit: the processes the nemesis killed leave theirs. Removed here
 * when no process of that pid runs with libfaketime loaded. */
static void faketime_leftovers(void)
{
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        const char *p = NULL;
        if (!strncmp(e->d_name, "faketime_shm_", 13)) p = e->d_name + 13;
        if (!strncmp(e->d_name, "sem.faketime_sem_", 17)) p = e->d_name + 17;
        if (!p) continue;
        char maps[64], line[512], path[300];
        snprintf(maps, sizeof maps, "/proc/%s/maps", p);
        FILE *f = fopen(maps, "r");
        int live = 0;
        while (f && !live && fgets(line, sizeof line, f))
            live = strstr(line, "libfaketime") != NULL;
        if (f) fclose(f);
        snprintf(path, sizeof path, "/dev/shm/%s", e->d_name);
        if (!live) unlink(path);
    }
    if (d) closedir(d);
}

/* Writes text into path whole (a reader sees the old text or the new). */
static void write_file(const char *path, const char *text)
{
    char tmp[480];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    CHECK_MSG(f, "cannot write %s: %s", tmp, strerror(errno));
    fputs(text, f);
    CHECK(fclose(f) == 0);
    CHECK_MSG(rename(tmp, path) == 0, "rename %s: %s", tmp, strerror(errno));
}

/* The data node i's directory. */
static void node_dir(const struct chaos *c, int i, char *out, size_t cap)
{
    if (c->cluster)
        snprintf(out, cap, "%s/n%d", c->cl.dir, i);
    else
        snprintf(out, cap, "%s", c->ss.node[i].dir);
}

/* redis-server preloaded with the clock shift library while it starts
 * (nodes started or restarted inside): each node reads its offset from
 * clock-shift in its own directory. */
static void redis_clock_env(const struct chaos *c, int on)
{
    if (c->shim[0]) sk_th_clock_shift_env(on ? "clock-shift" : NULL);
}

/* A size-limited tmpfs of the test's own at dir (created). The test runs
 * in a mount namespace of its own, so the mounts end with it. */
static void mount_small_fs(const char *dir, int mb)
{
    if (mkdir(dir, 0755) < 0) CHECK_MSG(errno == EEXIST, "mkdir %s: %s", dir, strerror(errno));
    char opts[64];
    snprintf(opts, sizeof opts, "size=%dm,mode=0777", mb);
    CHECK_MSG(mount("seckill-chaos", dir, "tmpfs", 0, opts) == 0, "mount tmpfs on %s: %s", dir,
              strerror(errno));
}

/* Fills the filesystem holding dir (a file "filler" there) until it is
 * full; returns the bytes written. */
static long long fill_fs(const char *dir)
{
    char path[400];
    snprintf(path, sizeof path, "%s/filler", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK_MSG(fd >= 0, "open %s: %s", path, strerror(errno));
    static char zero[1 << 20];
    long long n = 0;
    for (;;) {
        ssize_t w = write(fd, zero, sizeof zero);
        if (w <= 0) break;
        n += w;
    }
    for (;;) { /* the last pages */
        ssize_t w = write(fd, zero, 4096);
        if (w <= 0) break;
        n += w;
    }
    close(fd);
    return n;
}

static void free_fs(const char *dir)
{
    char path[400];
    snprintf(path, sizeof path, "%s/filler", dir);
    unlink(path);
}

/* Every data node's directory moved onto a small filesystem of its own
 * before the sale: AOF off, the node's files copied aside, the tmpfs
 * mounted over the directory, the files back, `CONFIG SET dir` (Redis
 * changes into the mounted directory: its AOF rewrite renames within it),
 * AOF on (Redis rewrites the whole AOF there from memory). Nothing is
 * admitted yet, so the move loses nothing. */
static void aof_on_small_fs(struct chaos *c)
{
    for (int i = 0; i < nnodes(c); i++) {
        char dir[300], cmd[1000];
        node_dir(c, i, dir, sizeof dir);
        redisReply *r = sk_redis_spawn_cmd(node_port(c, i), 5000, "CONFIG SET appendonly no");
        CHECK_MSG(r && r->type == REDIS_REPLY_STATUS, "node %d: CONFIG SET appendonly no", i);
        freeReplyObject(r);
        snprintf(cmd, sizeof cmd,
                 "mkdir -p '%s.aside' && find '%s' -maxdepth 1 -type f -exec cp -p {} '%s.aside/' "
                 "';'",
                 dir, dir, dir);
        CHECK_MSG(system(cmd) == 0, "%s", cmd);
        mount_small_fs(dir, FS_AOF_MB);
        snprintf(cmd, sizeof cmd, "cp -p '%s.aside/.' -r '%s/' && rm -rf '%s.aside'", dir, dir,
                 dir);
        CHECK_MSG(system(cmd) == 0, "%s", cmd);
        r = sk_redis_spawn_cmd(node_port(c, i), 5000, "CONFIG SET dir %s", dir);
        CHECK_MSG(r && r->type == REDIS_REPLY_STATUS, "node %d: CONFIG SET dir: %s", i,
                  r && r->type == REDIS_REPLY_ERROR ? r->str : "no answer");
        freeReplyObject(r);
        r = sk_redis_spawn_cmd(node_port(c, i), 5000, "CONFIG SET appendonly yes");
        CHECK_MSG(r && r->type == REDIS_REPLY_STATUS, "node %d: CONFIG SET appendonly yes", i);
        freeReplyObject(r);
        int64_t by = sk_mono_ms() + 30000;
        for (;;) {
            r = sk_redis_spawn_cmd(node_port(c, i), 1000, "INFO persistence");
            int done = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "aof_enabled:1") &&
                       strstr(r->str, "aof_rewrite_in_progress:0") &&
                       strstr(r->str, "aof_rewrite_scheduled:0") &&
                       strstr(r->str, "aof_last_bgrewrite_status:ok");
            if (r) freeReplyObject(r);
            if (done) break;
            CHECK_MSG(sk_mono_ms() < by, "node %d: the AOF never came back on the tmpfs (%s)", i,
                      dir);
            sk_th_nap_ms(20);
        }
    }
    c->aof_fs = 1;
}

/* The first 8 hex digits of node i's replication id (the branch of the
 * order ids it hands out as a master), "" when it does not answer. */
static void node_branch(const struct chaos *c, int i, char *out, size_t cap)
{
    out[0] = 0;
    redisReply *r = sk_redis_spawn_cmd(node_port(c, i), 500, "INFO replication");
    const char *p = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, "master_replid:") : NULL;
    if (p) snprintf(out, cap, "%.8s", p + 14);
    if (r) freeReplyObject(r);
}

static long long info_field(int port, const char *section, const char *field)
{
    redisReply *r = sk_redis_spawn_cmd(port, 500, "INFO %s", section);
    long long v = -1;
    char key[64];
    snprintf(key, sizeof key, "\n%s:", field);
    const char *p = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, key) : NULL;
    if (p) v = atoll(p + strlen(key));
    if (r) freeReplyObject(r);
    return v;
}

/* Is the node's process gone (exited: reaped here)? */
static int node_died(struct chaos *c, int i)
{
    pid_t pid = *node_pid(c, i);
    if (pid <= 0) return 1;
    if (waitpid(pid, NULL, WNOHANG) == pid) {
        *node_pid(c, i) = 0;
        return 1;
    }
    return 0;
}

/* A metric's value summed over its series in serve A's /metrics (-1: no
 * answer). */
static double metric_sum(const struct chaos *c, const char *name)
{
    static const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    static char text[1 << 20];
    size_t n = sk_th_http_raw(c->sv[0].ops, req, sizeof req - 1, text, sizeof text - 1, 1000);
    text[n] = 0;
    if (n < 12 || strncmp(text, "HTTP/1.1 200", 12)) return -1;
    double sum = 0;
    size_t l = strlen(name);
    for (const char *p = text; (p = strstr(p, name)) != NULL; p += l) {
        if (p[-1] != '\n' || (p[l] != ' ' && p[l] != '{')) continue;
        const char *v = strchr(p, ' ');
        if (v) sum += strtod(v + 1, NULL);
    }
    return sum;
}

static void serve_start(struct chaos *c, struct serve_proc *p)
{
    p->port = sk_th_free_port();
    p->ops = sk_th_free_port();
    snprintf(p->log, sizeof p->log, "%s/%s.log", sk_th_tmpdir(), p->name);
    char listen[32], ops[32];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", p->port);
    snprintf(ops, sizeof ops, "127.0.0.1:%d", p->ops);
    const char *argv[] = {sk_th_seckill_bin(),
                          "serve",
                          "--listen",
                          listen,
                          "--ops-listen",
                          ops,
                          "--redis",
                          c->url,
                          "--db",
                          c->db.spec,
                          "--admin-token",
                          SK_TH_ADMIN_TOKEN,
                          "--role",
                          p->role,
                          "--processes",
                          "2",
                          "--sync-replicas",
                          c->cluster ? "1" : "2",
                          "--redis-timeout-ms",
                          "1000",
                          NULL,
                          NULL,
                          NULL,
                          NULL,
                          NULL,
                          NULL,
                          NULL};
    if (c->rx && !strcmp(p->role, "all")) { /* the worker's node posts the webhooks */
        static char url[64];
        snprintf(url, sizeof url, "http://127.0.0.1:%d/hook", sk_th_rx_port(c->rx));
        const char *hook[] = {"--webhook-url",        url,   "--webhook-secret", HOOK_SECRET,
                              "--webhook-timeout-ms", "2000"};
        size_t at = 0;
        while (argv[at])
            at++;
        for (size_t i = 0; i < 6; i++)
            argv[at + i] = hook[i];
    }
    struct sk_spawn_cmd cmd = {
        .argv = argv, .out = p->log, .err = p->log, .flags = SK_SPAWN_PDEATHSIG};
    /* a host whose clock can jump: libfaketime (Debian's) preloaded, an
     * offset in a file read again each second, the monotonic clocks left
     * alone (a clock step moves only the wall clock). Its "monotonic fix"
     * off: with it on, libfaketime 0.9.10's pthread_cond_timedwait makes a
     * wait on a CLOCK_MONOTONIC condition variable (the webhook
     * dispatcher's naps) time out at once, a busy loop */
    static char envbuf[2][5][460];
    static const char *envp[2][512];
    if (p->clock[0]) {
        extern char **environ;
        int e = 0, slot = p == &c->sv[0] ? 0 : 1;
        for (char **v = environ; *v && e < 500; v++)
            if (strncmp(*v, "LD_PRELOAD=", 11) && strncmp(*v, "FAKETIME", 8)) envp[slot][e++] = *v;
        snprintf(envbuf[slot][0], sizeof envbuf[0][0], "LD_PRELOAD=%s", faketime_lib());
        snprintf(envbuf[slot][1], sizeof envbuf[0][0], "FAKETIME_TIMESTAMP_FILE=%s", p->clock);
        snprintf(envbuf[slot][2], sizeof envbuf[0][0], "FAKETIME_CACHE_DURATION=1");
        snprintf(envbuf[slot][3], sizeof envbuf[0][0], "FAKETIME_DONT_FAKE_MONOTONIC=1");
        snprintf(envbuf[slot][4], sizeof envbuf[0][0], "FAKETIME_FORCE_MONOTONIC_FIX=0");
        for (int i = 0; i < 5; i++)
            envp[slot][e++] = envbuf[slot][i];
        envp[slot][e] = NULL;
        cmd.envp = envp[slot];
    }
    char err[256];
    CHECK_MSG(sk_spawn_exec(&cmd, &p->pid, err, sizeof err) == 0, "serve: %s", err);
    static const char req[] = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    int64_t by = sk_mono_ms() + 30000;
    for (;;) {
        char out[256];
        size_t n = sk_th_http_raw(p->ops, req, sizeof req - 1, out, sizeof out - 1, 1000);
        out[n] = 0;
        if (n > 12 && !strncmp(out, "HTTP/1.1 200", 12)) break;
        CHECK_MSG(sk_mono_ms() < by, "%s never answered /healthz (log %s)", p->name, p->log);
        sk_th_nap_ms(20);
    }
}

/* Children of serve p whose name (comm) is want ("seckill-api", ...). */
static int children(const struct serve_proc *p, const char *want, pid_t *out, int cap)
{
    return sk_th_proc_children(p->pid, want, out, cap);
}

/* ---- faults -------------------------------------------------------------------- */

/* A fault that began now, of planned kind: its entry in c->done. */
static int log_fault(struct chaos *c, int kind)
{
    CHECK(c->ndone < MAX_FAULTS);
    c->done[c->ndone] = (struct done_fault){kind, sk_wall_ms(), sk_wall_ms()};
    c->applied++;
    return c->ndone++;
}

static void remember(struct chaos *c, int kind, int node, pid_t pid, int dur_ms, int log)
{
    CHECK(c->nact < 16);
    c->act[c->nact++] = (struct active){kind, node, pid, sk_mono_ms() + dur_ms, log, 0};
}

static void remember_aux(struct chaos *c, int kind, int node, int dur_ms, int log, int aux)
{
    remember(c, kind, node, 0, dur_ms, log);
    c->act[c->nact - 1].aux = aux;
}

/* Candidates: running data nodes of role (masters or replicas) that answer. */
static int redis_candidates(struct chaos *c, const char *role, int *out)
{
    int n = 0;
    for (int i = 0; i < nnodes(c); i++) {
        if (*node_pid(c, i) <= 0) continue;
        char r[16];
        node_role(c, i, r, sizeof r);
        if (!strcmp(r, role)) out[n++] = i;
    }
    return n;
}

static int node_of_port(const struct chaos *c, int port)
{
    for (int i = 0; i < nnodes(c); i++)
        if (node_port(c, i) == port) return i;
    return -1;
}

/* The master's replicas (running) into out. */
static int replicas_of(struct chaos *c, int m, int *out)
{
    int n = 0;
    if (c->cluster) {
        int rp = sk_th_cluster_replica_of(node_port(c, m));
        int r = rp > 0 ? node_of_port(c, rp) : -1;
        if (r >= 0 && *node_pid(c, r) > 0) out[n++] = r;
        return n;
    }
    for (int i = 0; i < nnodes(c); i++)
        if (i != m && *node_pid(c, i) > 0) out[n++] = i;
    return n;
}

static void lag_failover(struct chaos *c, const struct sk_th_fault *f)
{
    int cand[16], reps[16];
    int n = redis_candidates(c, "master", cand);
    int m = n ? cand[f->pick % (uint64_t)n] : -1;
    int nr = m >= 0 ? replicas_of(c, m, reps) : 0;
    if (!nr) {
        SAY(c, "skipped: %s (no master with a running replica)", kinds[F_LAG_FAILOVER].name);
        c->skipped++;
        return;
    }
    int lag_ms = 1000 + (int)((f->pick >> 16) % 1001);
    int li = log_fault(c, F_LAG_FAILOVER);
    for (int i = 0; i < nr; i++)
        kill(*node_pid(c, reps[i]), SIGSTOP);
    /* a frozen replica's kernel buffer would take the stream in and hand it
     * over when continued: the link is cut, so what follows is missing */
    redisReply *r = sk_redis_spawn_cmd(node_port(c, m), 1000, "CLIENT KILL TYPE replica");
    if (r) freeReplyObject(r);
    SAY(c, "%s: replicas of node %d (port %d) frozen and cut off for %.1f s",
        kinds[F_LAG_FAILOVER].name, m, node_port(c, m), lag_ms / 1000.0);
    sk_th_nap_ms(lag_ms);
    pid_t pid = *node_pid(c, m);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    *node_pid(c, m) = 0;
    for (int i = 0; i < nr; i++)
        kill(*node_pid(c, reps[i]), SIGCONT);
    c->redis_busy = 1;
    remember(c, F_MASTER_KILL, m, pid, f->dur_ms, li);
    SAY(c, "  node %d killed, its replicas continued; back in %.1f s", m, f->dur_ms / 1000.0);
}

/* ---- the newer kinds ------------------------------------------------------------- */

static void skip(struct chaos *c, int k, const char *why)
{
    SAY(c, "skipped: %s (%s)", kinds[k].name, why);
    c->skipped++;
}

static void redis_oom(struct chaos *c, const struct sk_th_fault *f)
{
    int cand[16];
    int n = redis_candidates(c, "master", cand);
    if (!n) {
        skip(c, F_REDIS_OOM, "no master answers");
        return;
    }
    int m = cand[f->pick % (uint64_t)n];
    long long used = info_field(node_port(c, m), "memory", "used_memory");
    if (used <= 0) {
        skip(c, F_REDIS_OOM, "no INFO memory");
        return;
    }
    long long max = used / 4 * 3;
    redisReply *r = sk_redis_spawn_cmd(node_port(c, m), 1000, "CONFIG SET maxmemory %lld", max);
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    if (!ok) {
        skip(c, F_REDIS_OOM, "CONFIG SET refused");
        return;
    }
    int li = log_fault(c, F_REDIS_OOM);
    c->redis_busy = 1;
    remember(c, F_REDIS_OOM, m, 0, f->dur_ms, li);
    SAY(c, "%s: node %d (port %d) maxmemory %lld bytes, it uses %lld; for %.1f s",
        kinds[F_REDIS_OOM].name, m, node_port(c, m), max, used, f->dur_ms / 1000.0);
}

/* The clock of: a master (aux >= 0: its node), serve A's host (the
 * worker's, aux -1), serve B's host (aux -2). */
static void clock_path(const struct chaos *c, int aux, char *out, size_t cap)
{
    if (aux >= 0) {
        char dir[300];
        node_dir(c, aux, dir, sizeof dir);
        snprintf(out, cap, "%s/clock-shift", dir);
    } else {
        snprintf(out, cap, "%s", c->sv[aux == -1 ? 0 : 1].clock);
    }
}

static void clock_jump(struct chaos *c, const struct sk_th_fault *f)
{
    int target = (int)(f->pick % 3), ahead = (int)((f->pick >> 8) & 1), aux;
    char off[24] = "-2h"; /* before every window's start */
    if (ahead)            /* past every window's end (3 h for the nemesis's 2 h window) */
        snprintf(off, sizeof off, "+%d", c->open_s + 3600);
    if (target == 2) {
        if (c->redis_busy) {
            skip(c, F_CLOCK_JUMP, "a Redis fault lasts");
            return;
        }
        int cand[16];
        int n = redis_candidates(c, "master", cand);
        if (!n) {
            skip(c, F_CLOCK_JUMP, "no master answers");
            return;
        }
        aux = cand[(f->pick >> 16) % (uint64_t)n];
        CHECK(c->njumps < sizeof c->jumps / sizeof *c->jumps);
        struct chaos_clock_jump *j = &c->jumps[c->njumps];
        node_branch(c, aux, j->branch, sizeof j->branch);
        /* the library reads the file again within 100 ms */
        j->from_ms = sk_wall_ms() + 150;
        j->to_ms = INT64_MAX;
        c->redis_busy = 1;
    } else {
        aux = target == 0 ? -1 : -2;
    }
    char path[400];
    clock_path(c, aux, path, sizeof path);
    write_file(path, off);
    int li = log_fault(c, F_CLOCK_JUMP);
    c->clock_jumped = 1;
    remember_aux(c, F_CLOCK_JUMP, target == 2 ? aux : -1, f->dur_ms, li,
                 target == 2 ? (int)c->njumps++ : aux);
    if (target == 2)
        SAY(c, "%s: node %d (port %d, branch %s) %s for %.1f s", kinds[F_CLOCK_JUMP].name, aux,
            node_port(c, aux), c->jumps[c->njumps - 1].branch, off, f->dur_ms / 1000.0);
    else
        SAY(c, "%s: the host of %s %s for %.1f s", kinds[F_CLOCK_JUMP].name,
            c->sv[aux == -1 ? 0 : 1].name, off, f->dur_ms / 1000.0);
}

static int streams_now(struct chaos *c, int64_t *backlog, int64_t *len, int64_t *adm);

static void disk_full(struct chaos *c, const struct sk_th_fault *f)
{
    int aof = (int)(f->pick % 2);
    char dir[340];
    int m = -1;
    if (aof) {
        if (c->redis_busy) {
            skip(c, F_DISK_FULL, "a Redis fault lasts");
            return;
        }
        int cand[16];
        int n = redis_candidates(c, "master", cand);
        if (!n) {
            skip(c, F_DISK_FULL, "no master answers");
            return;
        }
        m = cand[(f->pick >> 8) % (uint64_t)n];
        node_dir(c, m, dir, sizeof dir);
        c->redis_busy = 1;
    } else {
        if (c->db_busy) {
            skip(c, F_DISK_FULL, "a database fault lasts");
            return;
        }
        snprintf(dir, sizeof dir, "%s", c->dbfs);
        c->db_busy = 1;
        c->db_errors0 = (long)metric_sum(c, "seckill_worker_db_errors_total");
        int64_t backlog, len;
        if (streams_now(c, &backlog, &len, &c->db_adm0) < 0) c->db_adm0 = -1;
    }
    int li = log_fault(c, F_DISK_FULL);
    long long n = fill_fs(dir);
    remember_aux(c, F_DISK_FULL, m, f->dur_ms, li, aof);
    if (aof)
        SAY(c, "%s: the directory (AOF) of node %d (port %d) filled (%lld MB) for %.1f s",
            kinds[F_DISK_FULL].name, m, node_port(c, m), n >> 20, f->dur_ms / 1000.0);
    else
        SAY(c, "%s: the database's filesystem filled (%lld MB) for %.1f s", kinds[F_DISK_FULL].name,
            n >> 20, f->dur_ms / 1000.0);
}

/* The activities' streams now: entries waiting for the worker, entries
 * held, orders ever admitted; 0, or -1 when Redis did not answer. */
static int streams_now(struct chaos *c, int64_t *backlog, int64_t *len, int64_t *adm)
{
    *backlog = *len = *adm = 0;
    for (size_t i = 0; i < c->nacts; i++) {
        struct sk_stock_state st;
        if (sk_stock_state(c->r, c->acts[i].id, &st) < 0 || st.backlog < 0) return -1;
        *backlog += st.backlog;
        *len += st.stream_len;
        *adm += st.adm;
    }
    return 0;
}

/* used_memory_dataset (the keys, without client buffers: a reconcile's
 * HGETALL of the ledger holds its whole reply there a moment) summed over
 * the masters (-1: one did not answer); which nodes they are into *mask. */
static int64_t masters_memory(struct chaos *c, unsigned *mask)
{
    int cand[16];
    int n = redis_candidates(c, "master", cand);
    int64_t sum = 0;
    *mask = 0;
    for (int i = 0; i < n; i++)
        *mask |= 1u << cand[i];
    for (int i = 0; i < n; i++) {
        long long u = info_field(node_port(c, cand[i]), "memory", "used_memory_dataset");
        if (u < 0) return -1;
        sum += u;
    }
    return n ? sum : -1;
}

static int64_t persisted_now(struct chaos *c)
{
    int64_t sum = 0;
    for (size_t i = 0; i < c->nacts; i++) {
        struct sk_order_counts k;
        if (sk_store_orders_count(c->st, c->acts[i].id, &k) < 0) return -1;
        for (int s = 0; s < SK_ORDER_NSTATUS; s++)
            sum += k.orders[s];
    }
    return sum;
}

static void backlog_cap(struct chaos *c, const struct sk_th_fault *f)
{
    if (c->worker_busy || c->bl.phase) {
        skip(c, F_BACKLOG_CAP, "a worker fault lasts");
        return;
    }
    pid_t ch[8];
    int n = children(&c->sv[0], "seckill-worker", ch, 8);
    if (!n) {
        skip(c, F_BACKLOG_CAP, "no worker now");
        return;
    }
    int64_t backlog, len, adm;
    if (streams_now(c, &backlog, &len, &adm) < 0) {
        skip(c, F_BACKLOG_CAP, "no stream state");
        return;
    }
    unsigned masters;
    int64_t mem = masters_memory(c, &masters);
    if (mem < 0) {
        skip(c, F_BACKLOG_CAP, "a master does not answer");
        return;
    }
    struct backlog_cap *b = &c->bl;
    *b = (struct backlog_cap){.phase = 1, .pid = ch[0], .log = log_fault(c, F_BACKLOG_CAP)};
    b->usual = backlog > BACKLOG_FLOOR ? backlog : BACKLOG_FLOOR;
    b->target = b->usual * BACKLOG_FACTOR;
    b->stop_at = sk_mono_ms();
    b->deadline = b->stop_at + f->dur_ms;
    b->adm0 = adm;
    b->mem0 = mem;
    b->masters = masters;
    kill(b->pid, SIGSTOP);
    c->worker_busy = 1;
    SAY(c,
        "%s: worker pid %d stopped: backlog %" PRId64 " entries (stream %" PRId64
        "), until %" PRId64 " or %.1f s",
        kinds[F_BACKLOG_CAP].name, (int)b->pid, backlog, len, b->target, f->dur_ms / 1000.0);
}

/* 1 when the database holds an order of stream entry `sid` of activity
 * `act` (its ids begin "<act>-<sid>-": the chaos masters always name their
 * branch), 0 when it holds none, -1 when the store did not answer. */
static int entry_persisted(struct chaos *c, uint64_t act, const char *sid)
{
    char after[64];
    snprintf(after, sizeof after, "%" PRIu64 "-%s", act, sid);
    struct sk_order o;
    size_t n = 0;
    if (sk_store_orders_list(c->st, act, after, 1, &o, &n) < 0) return -1;
    size_t l = strlen(after);
    return n == 1 && !strncmp(o.order_id, after, l) && o.order_id[l] == '-';
}

/* Nothing unpersisted was trimmed: a pending entry below the stream's
 * first entry (XPENDING still lists it, XRANGE no longer does) must have
 * its orders in the database. Called while the stopped worker cannot ack
 * or trim between the reads. Such an entry with its orders persisted is
 * harmless and can be right: a trim whose bound was read on a master that
 * was then replaced by a lagging replica removes there entries acked on
 * the old master (persisted before the ack) that the replica still lists
 * as pending; the worker acks them as deleted. */
static void unacked_kept(struct chaos *c)
{
    for (size_t i = 0; i < c->nacts; i++) {
        struct sk_keys k;
        sk_keys_for(&k, c->acts[i].id);
        redisReply *r;
        if (sk_redis_cmd(c->r, &r, "XRANGE %s - + COUNT 1", k.orders) < 0) continue;
        char upto[48] = "+"; /* an empty stream: every pending entry is gone */
        if (r->type == REDIS_REPLY_ARRAY && r->elements &&
            r->element[0]->type == REDIS_REPLY_ARRAY && r->element[0]->elements &&
            r->element[0]->element[0]->type == REDIS_REPLY_STRING)
            snprintf(upto, sizeof upto, "(%s", r->element[0]->element[0]->str);
        freeReplyObject(r);
        if (sk_redis_cmd(c->r, &r, "XPENDING %s %s - %s 16", k.orders, SK_WORKER_GROUP, upto) < 0)
            continue;
        size_t gone = 0, lost = 0;
        char first_lost[48] = "";
        for (size_t j = 0; r->type == REDIS_REPLY_ARRAY && j < r->elements; j++) {
            const redisReply *e = r->element[j];
            if (e->type != REDIS_REPLY_ARRAY || !e->elements ||
                e->element[0]->type != REDIS_REPLY_STRING)
                continue;
            gone++;
            if (entry_persisted(c, c->acts[i].id, e->element[0]->str) == 0 && !lost++)
                snprintf(first_lost, sizeof first_lost, "%s", e->element[0]->str);
        }
        freeReplyObject(r);
        if (lost)
            extra_finding(c,
                          "backlog_cap: activity %" PRIu64 ": %zu pending entr%s below the "
                          "stream's first entry (%s) with no order in the database, e.g. %s: "
                          "unpersisted entries were trimmed",
                          c->acts[i].id, lost, lost == 1 ? "y" : "ies", upto, first_lost);
        else if (gone)
            SAY(c,
                "  activity %" PRIu64 ": %zu pending entr%s below the stream's first (%s), "
                "their orders persisted",
                c->acts[i].id, gone, gone == 1 ? "y" : "ies", upto);
    }
}

/* The backlog fault's steps, each pass of the nemesis's loop (every 200
 * ms): the worker continued once the backlog reached its target (memory
 * judged then), and its catch-up timed until the backlog is back to
 * usual. */
static void backlog_tick(struct chaos *c, int all)
{
    struct backlog_cap *b = &c->bl;
    static int64_t next;
    if (!b->phase || (!all && sk_mono_ms() < next)) return;
    next = sk_mono_ms() + 200;
    int64_t backlog, len, adm;
    int ok = streams_now(c, &backlog, &len, &adm) == 0;
    if (b->phase == 1) {
        if (!all && (!ok || backlog < b->target) && sk_mono_ms() < b->deadline) return;
        unsigned masters;
        int64_t mem = masters_memory(c, &masters);
        /* the same masters, or the sums compare nothing */
        if (masters != b->masters) mem = -1;
        b->peak_entries = ok ? backlog : -1;
        b->peak_mem = mem;
        b->peak_adm = ok ? adm - b->adm0 : -1;
        b->persisted0 = c->db_busy ? -1 : persisted_now(c);
        unacked_kept(c); /* while the worker cannot ack or trim */
        kill(b->pid, SIGCONT);
        c->done[b->log].to = sk_wall_ms();
        b->resume_at = sk_mono_ms();
        b->phase = 2;
        c->worker_busy = 0;
        SAY(c,
            "worker continued after %.1f s: backlog %" PRId64 " entries (stream %" PRId64
            "), %" PRId64 " admitted meanwhile, masters' memory %+.1f MB",
            (double)(b->resume_at - b->stop_at) / 1000, backlog, len, b->peak_adm,
            mem >= 0 ? (double)(mem - b->mem0) / 1048576 : 0.0);
        if (mem >= 0 && b->peak_adm > 0 &&
            mem - b->mem0 > b->peak_adm * BACKLOG_BYTES_PER_ADMISSION + BACKLOG_MEM_SLACK)
            extra_finding(c,
                          "backlog_cap: the masters' memory grew %" PRId64 " bytes for %" PRId64
                          " admissions (bound %d bytes each + %d)",
                          mem - b->mem0, b->peak_adm, BACKLOG_BYTES_PER_ADMISSION,
                          BACKLOG_MEM_SLACK);
        else if (mem >= 0 && b->peak_adm > 0)
            SAY(c, "  %.0f bytes of Redis memory per admission while the worker was stopped",
                (double)(mem - b->mem0) / (double)b->peak_adm);
        return;
    }
    /* catching up */
    int64_t waited = sk_mono_ms() - b->resume_at;
    if (ok && backlog <= b->usual) {
        int64_t p = b->persisted0 >= 0 && !c->db_busy ? persisted_now(c) : -1;
        /* a rate only when the worker had a real backlog to catch up on
         * (another fault may have stalled the sale meanwhile) */
        if (p >= 0 && waited > 0 && b->peak_entries >= 10 * BACKLOG_FLOOR && c->nrates < 32) {
            double rate = (double)(p - b->persisted0) * 1000.0 / (double)waited;
            c->rates[c->nrates++] = rate;
            SAY(c, "worker caught up in %.1f s: %" PRId64 " orders persisted, %.0f orders/s",
                (double)waited / 1000, p - b->persisted0, rate);
        } else {
            SAY(c,
                "worker caught up in %.1f s (rate not measured: the backlog was %" PRId64
                " entries, or the database was faulty)",
                (double)waited / 1000, b->peak_entries);
        }
        b->phase = 0;
    } else if (waited > 120000 || all) {
        SAY(c, "worker still behind %.1f s after it continued (backlog %" PRId64 ")",
            (double)waited / 1000, backlog);
        b->phase = 0;
    }
}

static void sentinel_drift(struct chaos *c, const struct sk_th_fault *f)
{
    if (c->sentinel_busy) {
        skip(c, F_SENTINEL_DRIFT, "one lasts already");
        return;
    }
    int j = (int)(f->pick % 3), q = (j + 1 + (int)((f->pick >> 8) % 2)) % 3;
    int quorum = (f->pick >> 16) & 1 ? 1 : 3;
    pid_t pid = c->ss.spid[j];
    if (pid <= 0) {
        skip(c, F_SENTINEL_DRIFT, "the Sentinel is down");
        return;
    }
    int li = log_fault(c, F_SENTINEL_DRIFT);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    c->ss.spid[j] = 0;
    redisReply *r =
        sk_redis_spawn_cmd(c->ss.sport[q], 1000, "SENTINEL SET %s quorum %d", c->ss.name, quorum);
    if (r) freeReplyObject(r);
    c->sentinel_busy = 1;
    remember_aux(c, F_SENTINEL_DRIFT, j, f->dur_ms, li, q);
    SAY(c,
        "%s: Sentinel %d killed, Sentinel %d's quorum %d; back with its first configuration "
        "in %.1f s",
        kinds[F_SENTINEL_DRIFT].name, j, q, quorum, f->dur_ms / 1000.0);
}

static void hook_faults(struct chaos *c, const struct sk_th_fault *f)
{
    if (c->hook_busy) {
        skip(c, F_HOOK_FAULTS, "one lasts already");
        return;
    }
    int li = log_fault(c, F_HOOK_FAULTS);
    sk_th_rx_faults(c->rx, 50, 1);
    c->hook_busy = 1;
    remember(c, F_HOOK_FAULTS, -1, 0, f->dur_ms, li);
    SAY(c, "%s: half of the deliveries fail for %.1f s", kinds[F_HOOK_FAULTS].name,
        f->dur_ms / 1000.0);
}

/* The receiver holds deliveries; hook_tick kills the worker once one
 * waits (or after 5 s: nothing was being delivered). */
static void hook_kill(struct chaos *c)
{
    if (c->worker_busy || c->hk.phase) {
        skip(c, F_HOOK_KILL, "a worker fault lasts");
        return;
    }
    log_fault(c, F_HOOK_KILL);
    sk_th_rx_hold(c->rx, 1);
    c->hk = (struct hook_hold){1, sk_mono_ms() + 5000};
    SAY(c, "%s: the webhook receiver holds the next delivery", kinds[F_HOOK_KILL].name);
}

static void hook_tick(struct chaos *c, int all)
{
    if (c->hk.phase != 1) return;
    int held = sk_th_rx_held(c->rx);
    if (!held && !all && sk_mono_ms() < c->hk.deadline) return;
    pid_t ch[8];
    int n = all ? 0 : children(&c->sv[0], "seckill-worker", ch, 8);
    if (n) kill(ch[0], SIGKILL);
    sk_th_rx_hold(c->rx, 0);
    c->hk.phase = 0;
    SAY(c, "%s: %s%s", kinds[F_HOOK_KILL].name, n ? "worker killed" : "no worker to kill",
        held ? " while a delivery waited for its answer" : " (no delivery was in flight)");
}

static void apply_newer(struct chaos *c, const struct sk_th_fault *f)
{
    switch (f->kind) {
    case F_REDIS_OOM:
        if (c->redis_busy) {
            skip(c, f->kind, "one lasts already");
            return;
        }
        redis_oom(c, f);
        break;
    case F_CLOCK_JUMP: clock_jump(c, f); break;
    case F_DISK_FULL: disk_full(c, f); break;
    case F_BACKLOG_CAP: backlog_cap(c, f); break;
    case F_SENTINEL_DRIFT: sentinel_drift(c, f); break;
    case F_HOOK_FAULTS: hook_faults(c, f); break;
    case F_HOOK_KILL: hook_kill(c); break;
    default: CHECK_MSG(0, "kind %d", f->kind);
    }
}

static void heal_newer(struct chaos *c, const struct active *a)
{
    switch (a->kind) {
    case F_REDIS_OOM: {
        redisReply *r = sk_redis_spawn_cmd(node_port(c, a->node), 1000, "CONFIG SET maxmemory 0");
        if (r) freeReplyObject(r);
        c->redis_busy = 0;
        SAY(c, "node %d: maxmemory none again%s", a->node, r ? "" : " (it did not answer)");
        break;
    }
    case F_CLOCK_JUMP: {
        char path[400];
        clock_path(c, a->node >= 0 ? a->node : a->aux, path, sizeof path);
        write_file(path, "+0");
        if (a->node >= 0) {
            c->jumps[a->aux].to_ms = sk_wall_ms();
            c->redis_busy = 0;
            SAY(c, "node %d: its clock back", a->node);
        } else {
            SAY(c, "the host of %s: its clock back", c->sv[a->aux == -1 ? 0 : 1].name);
        }
        break;
    }
    case F_DISK_FULL:
        if (a->aux) {
            char dir[300];
            node_dir(c, a->node, dir, sizeof dir);
            free_fs(dir);
            c->redis_busy = 0;
            if (node_died(c, a->node)) {
                SAY(c,
                    "AOF space freed; node %d had exited (a write error under appendfsync "
                    "always): started again",
                    a->node);
                node_restart(c, a->node);
            } else {
                SAY(c, "AOF space of node %d freed", a->node);
            }
        } else {
            free_fs(c->dbfs);
            c->db_busy = 0;
            int revived = chaos_store_revive(&c->db);
            double errs = metric_sum(c, "seckill_worker_db_errors_total");
            double told = errs >= 0 && c->db_errors0 >= 0 ? errs - c->db_errors0 : -1.0;
            SAY(c,
                "database space freed%s; the worker's database errors %+.0f (the rule "
                "SeckillWorkerDatabaseErrors watches them)",
                revived ? " (the server had exited: started again)" : "", told);
            /* PostgreSQL and SQLite need new pages for a thousand orders
             * (MariaDB may still have room in the extents it holds); when
             * the sale stalled meanwhile (another fault) nothing needed
             * writing, and nothing is to be told */
            int64_t backlog, len, adm;
            int64_t admitted = c->db_adm0 >= 0 && streams_now(c, &backlog, &len, &adm) == 0
                                   ? adm - c->db_adm0
                                   : -1;
            if (told == 0 && admitted >= 1000 && c->db.kind != CHAOS_STORE_MARIADB)
                extra_finding(c,
                              "disk_full: the database's disk was full %.1f s while %" PRId64
                              " orders were admitted, and the worker's database errors did "
                              "not move: no alert",
                              (double)(c->done[a->log].to - c->done[a->log].from) / 1000, admitted);
        }
        break;
    case F_HOOK_FAULTS:
        sk_th_rx_faults(c->rx, 0, 1);
        c->hook_busy = 0;
        SAY(c, "the webhook receiver answers 200 again");
        break;
    case F_SENTINEL_DRIFT: {
        int j = a->node, q = a->aux;
        char conf[400], stale[420];
        snprintf(conf, sizeof conf, "%s/s%d/sentinel.conf", c->ss.dir, j);
        snprintf(stale, sizeof stale, "%s.first", conf);
        char cmd[900];
        snprintf(cmd, sizeof cmd, "cp '%s' '%s'", stale, conf);
        CHECK_MSG(system(cmd) == 0, "%s", cmd);
        CHECK_MSG(sk_sentinel_spawn_restart_sentinel(&c->ss, j) == 0, "Sentinel %d: %s", j,
                  c->ss.errstr);
        redisReply *r =
            sk_redis_spawn_cmd(c->ss.sport[q], 1000, "SENTINEL SET %s quorum 2", c->ss.name);
        if (r) freeReplyObject(r);
        c->sentinel_busy = 0;
        SAY(c, "Sentinel %d back from its first configuration; Sentinel %d's quorum 2", j, q);
        break;
    }
    default: break;
    }
}

static void apply(struct chaos *c, const struct sk_th_fault *f)
{
    int k = f->kind;
    if (k >= F_REDIS_OOM) {
        apply_newer(c, f);
        return;
    }
    int redis = k <= F_REPLICA_STOP || k == F_LAG_FAILOVER,
        dbf = k == F_DB_STOP || k == F_DB_FREEZE;
    if ((redis && c->redis_busy) || (dbf && c->db_busy)) {
        SAY(c, "skipped: %s (one lasts already)", kinds[k].name);
        c->skipped++;
        return;
    }
    if (k == F_LAG_FAILOVER) {
        lag_failover(c, f);
        return;
    }
    if (redis) {
        int cand[16];
        int n = redis_candidates(c, k <= F_MASTER_STOP ? "master" : "slave", cand);
        if (!n) {
            SAY(c, "skipped: %s (none answers)", kinds[k].name);
            c->skipped++;
            return;
        }
        int i = cand[f->pick % (uint64_t)n];
        pid_t pid = *node_pid(c, i);
        int li = log_fault(c, k);
        if (k == F_MASTER_KILL || k == F_REPLICA_KILL) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            *node_pid(c, i) = 0;
        } else {
            kill(pid, SIGSTOP);
        }
        c->redis_busy = 1;
        remember(c, k, i, pid, f->dur_ms, li);
        SAY(c, "%s: node %d (port %d) for %.1f s", kinds[k].name, i, node_port(c, i),
            f->dur_ms / 1000.0);
    } else if (k == F_DB_STOP || k == F_DB_FREEZE) {
        int stop = k == F_DB_STOP && chaos_store_can_stop(&c->db);
        int li = log_fault(c, stop ? F_DB_STOP : F_DB_FREEZE);
        if (stop)
            chaos_store_stop(&c->db);
        else
            chaos_store_freeze(&c->db, 1);
        c->db_busy = 1;
        remember(c, stop ? F_DB_STOP : F_DB_FREEZE, -1, 0, f->dur_ms, li);
        SAY(c, "%s (%s) for %.1f s", kinds[stop ? F_DB_STOP : F_DB_FREEZE].name,
            chaos_store_name(c->db.kind), f->dur_ms / 1000.0);
    } else {
        int worker = k == F_WORKER_KILL || k == F_WORKER_STOP;
        if (worker && c->worker_busy) {
            skip(c, k, "the worker is held for a backlog");
            return;
        }
        const struct serve_proc *p = worker ? &c->sv[0] : &c->sv[f->pick % 2];
        pid_t ch[8];
        int n = children(p, worker ? "seckill-worker" : "seckill-api", ch, 8);
        if (!n) {
            SAY(c, "skipped: %s (no such process of %s now)", kinds[k].name, p->name);
            c->skipped++;
            return;
        }
        pid_t pid = ch[(f->pick >> 8) % (uint64_t)n];
        int li = log_fault(c, k);
        if (k == F_API_KILL || k == F_WORKER_KILL) {
            kill(pid, SIGKILL);
            SAY(c, "%s: pid %d of %s (its supervisor starts another)", kinds[k].name, (int)pid,
                p->name);
        } else {
            kill(pid, SIGSTOP);
            remember(c, k, -1, pid, f->dur_ms, li);
            SAY(c, "%s: pid %d of %s for %.1f s", kinds[k].name, (int)pid, p->name,
                f->dur_ms / 1000.0);
        }
    }
}

static void heal_one(struct chaos *c, const struct active *a)
{
    c->done[a->log].to = sk_wall_ms();
    if (a->kind >= F_REDIS_OOM) {
        heal_newer(c, a);
        return;
    }
    switch (a->kind) {
    case F_MASTER_KILL:
    case F_REPLICA_KILL:
        node_restart(c, a->node);
        c->redis_busy = 0;
        SAY(c, "node %d back (port %d)", a->node, node_port(c, a->node));
        break;
    case F_MASTER_STOP:
    case F_REPLICA_STOP:
        kill(a->pid, SIGCONT);
        c->redis_busy = 0;
        SAY(c, "node %d continued", a->node);
        break;
    case F_DB_STOP:
        chaos_store_restart(&c->db);
        c->db_busy = 0;
        SAY(c, "database started again");
        break;
    case F_DB_FREEZE:
        chaos_store_freeze(&c->db, 0);
        c->db_busy = 0;
        SAY(c, "database thawed");
        break;
    default: kill(a->pid, SIGCONT); SAY(c, "pid %d continued", (int)a->pid);
    }
}

static void heal_due(struct chaos *c, int all)
{
    int64_t now = sk_mono_ms();
    for (int i = 0; i < c->nact;) {
        if (all || c->act[i].heal_at <= now) {
            struct active a = c->act[i];
            c->act[i] = c->act[--c->nact];
            heal_one(c, &a);
        } else {
            i++;
        }
    }
}

/* The largest age of an unpersisted order that serve A's /metrics shows now. */
static void sample_age(struct chaos *c)
{
    static const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    static char text[1 << 20];
    size_t n = sk_th_http_raw(c->sv[0].ops, req, sizeof req - 1, text, sizeof text - 1, 500);
    text[n] = 0;
    const char *key = "seckill_activity_oldest_unpersisted_seconds{";
    double now_max = 0;
    for (const char *p = text; (p = strstr(p, key)) != NULL; p++) {
        const char *v = strchr(p, ' ');
        if (!v) break;
        double a = strtod(v + 1, NULL);
        if (a > now_max) now_max = a;
    }
    if (now_max > c->max_age_s) c->max_age_s = now_max;
    /* a long wait is told when it begins and when it ends, to set it
     * against the faults */
    if (now_max >= 10 && !c->age_told) {
        SAY(c, "orders wait: the oldest unpersisted order is %.1f s old", now_max);
        c->age_told = 1;
    } else if (now_max < 2 && c->age_told) {
        SAY(c, "orders persisted again (oldest unpersisted %.1f s)", now_max);
        c->age_told = 0;
    }
}

/* The worker's and the recovery's warnings and errors from serve A's log
 * (the last 60, retries of one database outage counted as one): what the
 * run looked like from the pipeline's side. */
static void worker_story(const struct chaos *c)
{
    FILE *f = fopen(c->sv[0].log, "r");
    if (!f) return;
    static char keep[60][512];
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        if ((!strstr(line, " warn ") && !strstr(line, " error ")) ||
            (!strstr(line, "worker") && !strstr(line, "recover")))
            continue;
        if (strstr(line, "not persisted (attempt") && !strstr(line, "attempt 1/")) continue;
        if (strstr(line, "list activities:")) continue;
        snprintf(keep[n % 60], sizeof keep[0], "%.500s", line);
        n++;
    }
    fclose(f);
    for (int i = n > 60 ? n - 60 : 0; i < n; i++)
        printf("    | %s", keep[i % 60]);
}

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return a < b ? -1 : a > b;
}

/* What buyers saw in each kind of fault: the longest time without a 200
 * around it (from its start to a second after it healed), for the
 * activity hit hardest and for the one hit least, and the answers given
 * meanwhile that were not definite. */
/* 1 when every activity answered a 200 or sold_out to an attempt that
 * ended after since (wall ms). The buyers append while this reads: an
 * entry still being filled reads as no answer, which only waits longer. */
static int resumed(const struct chaos *c, struct chaos_ledger *L, int64_t since)
{
    size_t n = atomic_load(&L->n);
    if (n > L->cap) n = L->cap;
    int seen[CHAOS_MAX_ACTS] = {0}, left = (int)c->nacts;
    for (size_t i = n; i-- > 0 && left > 0;) {
        const struct chaos_answer *a = &L->a[i];
        if (a->t_done_ms < since) continue;
        if (a->status != 200 && !(a->status == 409 && !strcmp(a->err, "sold_out"))) continue;
        for (size_t k = 0; k < c->nacts; k++)
            if (c->acts[k].id == a->aid && !seen[k]) {
                seen[k] = 1;
                left--;
            }
    }
    return left == 0;
}

static void fault_table(const struct chaos *c, const struct chaos_ledger *L)
{
    size_t n = atomic_load(&((struct chaos_ledger *)L)->n);
    if (n > L->cap) n = L->cap;
    int64_t *t[3];
    size_t m[3] = {0, 0, 0};
    for (size_t a = 0; a < c->nacts; a++) {
        t[a] = malloc((n ? n : 1) * sizeof *t[a]);
        CHECK(t[a]);
        for (size_t i = 0; i < n; i++)
            if (L->a[i].status == 200 && L->a[i].aid == c->acts[a].id)
                t[a][m[a]++] = L->a[i].t_done_ms;
        qsort(t[a], m[a], sizeof *t[a], cmp_i64);
    }
    printf("    # per fault kind: times, longest without a 200 around it (worst activity / best "
           "activity), answers meanwhile: 503 unavailable / unconfirmed / recovering, none\n");
    for (int k = 0; k < F_KINDS; k++) {
        int times = 0;
        int64_t worst = 0, best = 0;
        long un = 0, uc = 0, rec = 0, none = 0;
        for (int d = 0; d < c->ndone; d++) {
            if (c->done[d].kind != k) continue;
            times++;
            int64_t from = c->done[d].from, to = c->done[d].to + 1000;
            int64_t lo = -1, hi = 0;
            for (size_t a = 0; a < c->nacts; a++) {
                int64_t g = 0;
                for (size_t i = 1; i < m[a]; i++)
                    if (t[a][i] > from && t[a][i - 1] < to && t[a][i] - t[a][i - 1] > g)
                        g = t[a][i] - t[a][i - 1];
                if (g > hi) hi = g;
                if (lo < 0 || g < lo) lo = g;
            }
            if (hi > worst) worst = hi;
            if (lo > best) best = lo;
            for (size_t i = 0; i < n; i++) {
                const struct chaos_answer *x = &L->a[i];
                if (x->t_done_ms < from || x->t_done_ms > to) continue;
                un += x->status == 503 && !strcmp(x->err, "unavailable");
                uc += x->status == 503 && !strcmp(x->err, "unconfirmed");
                rec += x->status == 503 && !strcmp(x->err, "recovering");
                none += x->status == 0;
            }
        }
        if (times)
            printf("    #   %-30s %2d x  %5.2f s / %5.2f s   %ld / %ld / %ld, %ld\n", kinds[k].name,
                   times, (double)worst / 1000, (double)best / 1000, un, uc, rec, none);
    }
    for (size_t a = 0; a < c->nacts; a++)
        free(t[a]);
}

/* Until every stream is acknowledged and nothing is fenced (bounded): 1;
 * 0 with what is left printed (the checker still runs: it says what the
 * database lacks). */
static int drain(struct chaos *c, sk_redis *r, int ms)
{
    int64_t by = sk_mono_ms() + ms;
    for (;;) {
        int left = 0;
        for (size_t i = 0; i < c->nacts; i++) {
            struct sk_stock_state st;
            if (sk_stock_state(r, c->acts[i].id, &st) < 0 || st.backlog != 0 || st.fenced) left++;
        }
        if (!left) {
            SAY(c, "drained");
            return 1;
        }
        if (sk_mono_ms() > by) break;
        sk_th_nap_ms(50);
    }
    for (size_t i = 0; i < c->nacts; i++) {
        struct sk_stock_state st;
        int rc = sk_stock_state(r, c->acts[i].id, &st);
        struct sk_keys k;
        sk_keys_for(&k, c->acts[i].id);
        struct sk_backlog b;
        int brc = sk_backlog_read(r, k.orders, SK_WORKER_GROUP, &b);
        SAY(c,
            "NOT DRAINED: activity %" PRIu64 ": state rc %d backlog %lld fenced %lld (%s %s); "
            "backlog script rc %d: %lld waiting, %lld pending, oldest %lld ms",
            c->acts[i].id, rc, (long long)st.backlog, (long long)st.fenced, st.fence, st.fence_why,
            brc, (long long)b.entries, (long long)b.pending, (long long)b.age_ms);
        redisReply *g;
        if (sk_redis_cmd(r, &g, "XINFO GROUPS %s", k.orders) == 0) {
            for (size_t j = 0; g->type == REDIS_REPLY_ARRAY && j < g->elements; j++) {
                const redisReply *x = g->element[j];
                char line[512] = "";
                size_t o = 0;
                for (size_t f = 0; f + 1 < x->elements && o < sizeof line - 64; f += 2) {
                    const redisReply *v = x->element[f + 1];
                    o += (size_t)snprintf(line + o, sizeof line - o, "%s=", x->element[f]->str);
                    o += v->type == REDIS_REPLY_INTEGER
                             ? (size_t)snprintf(line + o, sizeof line - o, "%lld ", v->integer)
                             : (size_t)snprintf(line + o, sizeof line - o, "%s ",
                                                v->type == REDIS_REPLY_STRING ? v->str : "nil");
                }
                SAY(c, "  group: %s", line);
            }
            freeReplyObject(g);
        }
    }
    return 0;
}

/* ---- the soak: every process, every minute ------------------------------------------ */

#define SOAK_PROCS 7 /* serve A: supervisor, 2 HTTP, worker; serve B: supervisor, 2 HTTP */
/* The bounds (docs/failover.md, "Soak"): after the warm-up a process's
 * resident memory stays within SOAK_RSS_PCT % + SOAK_RSS_SLACK_MB of its
 * largest warm-up value and its open descriptors within SOAK_FD_SLACK of
 * theirs; a Redis node's used memory grows by at most
 * BACKLOG_BYTES_PER_ADMISSION per order admitted since (the sale's own
 * records), plus SOAK_MEM_SLACK_MB. */
#define SOAK_RSS_PCT 20
#define SOAK_RSS_SLACK_MB 16
#define SOAK_FD_SLACK 16
#define SOAK_MEM_SLACK_MB 16

struct soak {
    size_t points, warmup;
    int nredis;
    struct soak_series rss[SOAK_PROCS + 8], fds[SOAK_PROCS + 8], mem[8], p99[2];
    double adm[SOAK_MAX_POINTS];
    size_t cursor; /* the ledger read so far */
};

static long open_fds(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (!d) return -1;
    long n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* When pid started (clock ticks after boot; -1 when it is gone). */
static long long started(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')'); /* the name may hold spaces */
    long long v = -1;
    for (int field = 2; p && *p; p++)
        if (*p == ' ' && ++field == 22) {
            v = atoll(p + 1);
            break;
        }
    return v;
}

static long long g_start[8];

static int cmp_age(const void *x, const void *y)
{
    long long a = g_start[*(const int *)x], b = g_start[*(const int *)y];
    return a < b ? -1 : a > b;
}

/* The process of slot i (SOAK_PROCS serve processes, then the data
 * nodes), 0 when none. A role's processes in the order they started (pids
 * wrap on a busy machine), the oldest first. */
static pid_t soak_pid(struct chaos *c, int i)
{
    if (i >= SOAK_PROCS) return *node_pid(c, i - SOAK_PROCS);
    const struct serve_proc *p = &c->sv[i < 4 ? 0 : 1];
    int j = i < 4 ? i : i - 4;
    if (j == 0) return p->pid;
    pid_t ch[8];
    int n = children(p, j == 3 ? "seckill-worker" : "seckill-api", ch, 8), ord[8];
    for (int k = 0; k < n; k++) {
        g_start[k] = started(ch[k]);
        ord[k] = k;
    }
    qsort(ord, (size_t)n, sizeof *ord, cmp_age);
    if (j == 3) return n ? ch[ord[0]] : 0;
    return j - 1 < n ? ch[ord[j - 1]] : 0;
}

static void soak_names(struct chaos *c, struct soak *k)
{
    static const char *const names[SOAK_PROCS] = {
        "A supervisor", "A http 1", "A http 2", "A worker", "B supervisor", "B http 1", "B http 2"};
    k->nredis = nnodes(c) < 8 ? nnodes(c) : 8;
    for (int i = 0; i < SOAK_PROCS + k->nredis; i++) {
        char n[32];
        if (i < SOAK_PROCS)
            snprintf(n, sizeof n, "%s", names[i]);
        else
            snprintf(n, sizeof n, "redis node %d", i - SOAK_PROCS);
        snprintf(k->rss[i].name, sizeof n, "%s", n);
        snprintf(k->fds[i].name, sizeof n, "%s", n);
        if (i >= SOAK_PROCS) snprintf(k->mem[i - SOAK_PROCS].name, sizeof n, "%s", n);
    }
    snprintf(k->p99[0].name, sizeof k->p99[0].name, "serve A");
    snprintf(k->p99[1].name, sizeof k->p99[1].name, "serve B");
}

static int cmp_i64(const void *x, const void *y);

/* One minute's samples: every process, every data node, the answers of
 * the minute. */
static void soak_sample(struct chaos *c, struct soak *k, struct chaos_ledger *L)
{
    if (k->points >= SOAK_MAX_POINTS) return;
    size_t m = k->points;
    char line[2048];
    size_t o = (size_t)snprintf(line, sizeof line, "minute %zu:", m + 1);
    for (int i = 0; i < SOAK_PROCS + k->nredis; i++) {
        pid_t pid = soak_pid(c, i);
        long r = pid > 0 ? sk_th_proc_rss_kib_or(pid) : -1, fd = pid > 0 ? open_fds(pid) : -1;
        k->rss[i].v[m] = r >= 0 ? (double)r / 1024 : -1;
        k->fds[i].v[m] = (double)fd;
        if (i >= SOAK_PROCS) {
            long long u = info_field(node_port(c, i - SOAK_PROCS), "memory", "used_memory");
            k->mem[i - SOAK_PROCS].v[m] = u >= 0 ? (double)u / 1048576 : -1;
        }
        if (o < sizeof line - 80)
            o += (size_t)snprintf(line + o, sizeof line - o, " %s %.1fM/%ldfd%s", k->rss[i].name,
                                  k->rss[i].v[m], fd, i == SOAK_PROCS + k->nredis - 1 ? "" : ",");
    }
    size_t n = atomic_load(&L->n);
    if (n > L->cap) n = L->cap;
    static int64_t lat[2][1 << 20];
    size_t nl[2] = {0, 0};
    for (size_t i = k->cursor; i < n; i++) {
        const struct chaos_answer *a = &L->a[i];
        if (!a->status || !a->t_done_ms || a->serve > 1 || nl[a->serve] >= (1 << 20)) continue;
        lat[a->serve][nl[a->serve]++] = a->t_done_ms - a->t_send_ms;
    }
    k->cursor = n;
    for (int s = 0; s < 2; s++) {
        qsort(lat[s], nl[s], sizeof lat[s][0], cmp_i64);
        k->p99[s].v[m] = nl[s] ? (double)lat[s][nl[s] * 99 / 100] : -1;
    }
    int64_t backlog, len, adm;
    k->adm[m] = streams_now(c, &backlog, &len, &adm) == 0 ? (double)adm : -1;
    SAY(c, "%s", line);
    o = 0;
    for (int i = 0; i < k->nredis && o < sizeof line - 40; i++)
        o += (size_t)snprintf(line + o, sizeof line - o, " %.1fM", k->mem[i].v[m]);
    SAY(c,
        "  Redis used memory:%s; p99 serve A %.0f ms (%zu answers), serve B %.0f ms (%zu); "
        "admitted %.0f",
        line, k->p99[0].v[m], nl[0], k->p99[1].v[m], nl[1], k->adm[m]);
    k->points++;
}

/* The bounds after the warm-up (see SOAK_RSS_PCT); each broken one is an
 * extra finding. */
static void soak_judge(struct chaos *c, struct soak *k)
{
    size_t w = k->warmup;
    if (k->points <= w) {
        extra_finding(c, "soak: %zu minute(s) sampled, none after the %zu-minute warm-up",
                      k->points, w);
        return;
    }
    for (int i = 0; i < SOAK_PROCS; i++) {
        double r0 = 0, f0 = 0;
        for (size_t m = 0; m < w; m++) {
            if (k->rss[i].v[m] > r0) r0 = k->rss[i].v[m];
            if (k->fds[i].v[m] > f0) f0 = k->fds[i].v[m];
        }
        double rb = r0 * (100 + SOAK_RSS_PCT) / 100 + SOAK_RSS_SLACK_MB, fb = f0 + SOAK_FD_SLACK;
        for (size_t m = w; m < k->points; m++) {
            if (k->rss[i].v[m] > rb)
                extra_finding(c, "soak: %s held %.1f MiB at minute %zu (bound %.1f MiB)",
                              k->rss[i].name, k->rss[i].v[m], m + 1, rb);
            if (k->fds[i].v[m] > fb)
                extra_finding(c, "soak: %s had %.0f open descriptors at minute %zu (bound %.0f)",
                              k->fds[i].name, k->fds[i].v[m], m + 1, fb);
        }
    }
    for (int i = 0; i < k->nredis; i++) {
        double m0 = k->mem[i].v[w - 1], a0 = k->adm[w - 1];
        for (size_t m = w; m < k->points && m0 >= 0 && a0 >= 0; m++) {
            if (k->mem[i].v[m] < 0 || k->adm[m] < 0) continue;
            double bound =
                m0 + (k->adm[m] - a0) * BACKLOG_BYTES_PER_ADMISSION / 1048576 + SOAK_MEM_SLACK_MB;
            if (k->mem[i].v[m] > bound)
                extra_finding(c,
                              "soak: %s used %.1f MiB at minute %zu (bound %.1f MiB: %.0f "
                              "orders admitted since the warm-up)",
                              k->mem[i].name, k->mem[i].v[m], m + 1, bound, k->adm[m] - a0);
        }
    }
}

static void soak_chart(struct chaos *c, struct soak *k, const char *path, long ok)
{
    char caption[400];
    snprintf(caption, sizeof caption,
             "%zu minutes, %s, %s, %d buyers (think %d us), a fault every %d-%d s; %ld answered "
             "200; seed %" PRIu64,
             k->points, c->cluster ? "Redis Cluster" : "Redis Sentinel",
             chaos_store_name(c->db.kind), c->ro->threads, c->ro->think_us,
             c->ro->gap_min_ms / 1000, c->ro->gap_max_ms / 1000, ok, c->seed);
    struct soak_panel p[4] = {
        {"resident memory of each process", "MiB", k->rss, (size_t)(SOAK_PROCS + k->nredis)},
        {"open descriptors of each process", "count", k->fds, (size_t)(SOAK_PROCS + k->nredis)},
        {"Redis used memory per data node", "MiB", k->mem, (size_t)k->nredis},
        {"p99 of the buyers' answers per serve node, each minute", "ms", k->p99, 2},
    };
    CHECK_MSG(soak_chart_write(path, caption, p, 4, k->points, k->warmup) == 0, "cannot write %s",
              path);
    printf("    # chart: %s\n", path);
}

/* ---- the run ---------------------------------------------------------------------- */

static uint64_t env_u64(const char *name, uint64_t dflt)
{
    const char *v = getenv(name);
    return v && *v ? strtoull(v, NULL, 10) : dflt;
}

static uint64_t fresh_seed(void)
{
    uint64_t s = (uint64_t)sk_wall_ms() * 1000003u ^ (uint64_t)getpid() << 32;
    FILE *f = fopen("/dev/urandom", "r");
    if (f) {
        if (fread(&s, sizeof s, 1, f) != 1) s ^= 0x5eed;
        fclose(f);
    }
    return s % 1000000000000ULL;
}

static void check_logs(const struct chaos *c)
{
    for (int s = 0; s < 2; s++) {
        FILE *f = fopen(c->sv[s].log, "r");
        CHECK(f);
        char line[2048];
        while (fgets(line, sizeof line, f)) {
            /* the nemesis kills with SIGKILL (9) and stops with SIGSTOP: any
             * other death is the code's */
            const char *d = strstr(line, " died (signal ");
            CHECK_MSG(!d || atoi(d + 14) == 9, "%s: %s", c->sv[s].name, line);
            CHECK_MSG(!strstr(line, "Sanitizer") && !strstr(line, "runtime error"), "%s: %s",
                      c->sv[s].name, line);
        }
        fclose(f);
    }
}

/* What the newer kinds need before anything starts: a mount namespace of
 * the test's own for the small filesystems (they end with it), the clock
 * files and the preload library. */
static void prepare_newer(struct chaos *c)
{
    if (weight(F_DISK_FULL)) {
        CHECK_MSG(unshare(CLONE_NEWNS) == 0, "disk_full: a mount namespace: %s (root only)",
                  strerror(errno));
        CHECK_MSG(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0,
                  "disk_full: private mounts: %s", strerror(errno));
    }
    if (weight(F_CLOCK_JUMP)) {
        snprintf(c->shim, sizeof c->shim, "%s", sk_th_clock_shift_lib());
        (void)faketime_lib();
        for (int i = 0; i < 2; i++) {
            snprintf(c->sv[i].clock, sizeof c->sv[i].clock, "%s/clock-%c", sk_th_tmpdir(), 'A' + i);
            write_file(c->sv[i].clock, "+0");
        }
    }
}

static void chaos_run(int cluster, const struct run_opts *ro)
{
    struct chaos *c = calloc(1, sizeof *c);
    CHECK(c);
    c->cluster = cluster;
    c->ro = ro;
    c->seed = env_u64("CHAOS_SEED", 0);
    if (!c->seed) c->seed = fresh_seed();
    c->duration_s = ro->duration_s;
    /* open past the end of the run (a soak is long), and a payment timeout
     * twice that: nobody cancels during the run, so a cancelled 200 is one a
     * recovery refused */
    c->open_s = c->duration_s + POST_HEAL_MAX_S + 1800 > 7200
                    ? c->duration_s + POST_HEAL_MAX_S + 1800
                    : 7200;
    const char *store = getenv("CHAOS_STORE");
    int kind = chaos_store_kind_of(store && *store ? store : "postgres");
    CHECK_MSG(kind >= 0, "CHAOS_STORE=%s: postgres, sqlite or mariadb", store);
    printf("    # CHAOS_SEED=%" PRIu64 " CHAOS_TOPO=%s CHAOS_S=%d CHAOS_STORE=%s (make %s "
           "CHAOS_SEED=%" PRIu64 " CHAOS_TOPO=%s repeats this schedule)\n",
           c->seed, cluster ? "cluster" : "sentinel", c->duration_s, chaos_store_name(kind),
           ro->soak ? "soak" : "chaos", c->seed, cluster ? "cluster" : "sentinel");
    static struct sk_th_fault f[MAX_FAULTS];
    if (cluster) kinds[F_SENTINEL_DRIFT].weight = 0; /* no Sentinels there */
    if (ro->soak) kinds[F_HOOK_FAULTS].weight = kinds[F_HOOK_KILL].weight = 0; /* no webhooks */
    restrict_kinds(getenv("CHAOS_KINDS"));
    size_t nf = plan(c->seed, c->duration_s, ro->gap_min_ms, ro->gap_max_ms, f, MAX_FAULTS);
    prepare_newer(c);
    redis_clock_env(c, 1);

    if (cluster) {
        struct sk_cluster_spawn_opts o = {.masters = 3,
                                          .replicas = 1,
                                          .node_timeout_ms = NODE_TIMEOUT_MS,
                                          .extra_args = redis_extra};
        CHECK_MSG(sk_cluster_spawn_start_opts(&c->cl, &o) == 0, "cluster: %s", c->cl.errstr);
        c->url = c->cl.url;
    } else {
        sk_th_sentinel_start(&c->ss, 2, redis_extra);
        c->url = c->ss.url;
        /* what a Sentinel restarted with a stale view reads (sentinel_drift) */
        for (int i = 0; i < SK_SENTINEL_SPAWN_SENTINELS && weight(F_SENTINEL_DRIFT); i++) {
            char cmd[900];
            snprintf(cmd, sizeof cmd, "cp '%s/s%d/sentinel.conf' '%s/s%d/sentinel.conf.first'",
                     c->ss.dir, i, c->ss.dir, i);
            CHECK_MSG(system(cmd) == 0, "%s", cmd);
        }
    }
    redis_clock_env(c, 0);
    if (weight(F_DISK_FULL)) {
        aof_on_small_fs(c);
        snprintf(c->dbfs, sizeof c->dbfs, "%s/dbfs", sk_th_tmpdir());
        mount_small_fs(c->dbfs, FS_DB_MB);
        printf("    # the database and every data node's AOF on a small filesystem of their own "
               "(tmpfs: %d MB, %d MB each)\n",
               FS_DB_MB, FS_AOF_MB);
    }
    chaos_store_start_in(&c->db, (enum chaos_store_kind)kind, c->dbfs[0] ? c->dbfs : NULL);
    char err0[256];
    CHECK_MSG(sk_redis_new(&c->r, c->url, 500, 1000, err0, sizeof err0) == 0, "redis: %s", err0);
    CHECK_MSG(sk_store_open(&c->st, c->db.spec, err0, sizeof err0) == 0, "store: %s", err0);
    if (!ro->soak) {
        const char *secrets[] = {HOOK_SECRET, NULL};
        c->rx = sk_th_rx_start(c->seed, secrets, 0);
        printf("    # the shop's webhook endpoint: a receiver on port %d\n", sk_th_rx_port(c->rx));
    }
    c->sv[0].name = "serve A (--role all)";
    c->sv[0].role = "all";
    c->sv[1].name = "serve B (--role api)";
    c->sv[1].role = "api";
    serve_start(c, &c->sv[0]);
    serve_start(c, &c->sv[1]);
    sale_log_on_failure(c->sv[0].log, c->sv[0].ops);
    sale_wait_ready(c->sv[0].ops);
    sale_wait_ready(c->sv[1].ops);
    /* the nemesis: one activity that sells out during the run, two that do not */
    const int64_t *stocks = ro->stocks;
    for (size_t i = 0; i < 3; i++) {
        c->acts[i] = (struct chaos_activity){
            sale_activity_for(c->sv[0].port, 0, stocks[i], LIMIT, 1, c->open_s, c->open_s * 2),
            stocks[i], LIMIT};
        char tag[32];
        int tl = snprintf(tag, sizeof tag, "a%" PRIu64, c->acts[i].id);
        if (cluster)
            printf(
                "    # activity %" PRIu64 " (stock %" PRId64 ") on the master of slot %d, port "
                "%d\n",
                c->acts[i].id, stocks[i], sk_cluster_key_slot(tag, (size_t)tl),
                sk_th_cluster_owner_seen_by(c->cl.port[0], sk_cluster_key_slot(tag, (size_t)tl)));
    }
    c->nacts = 3;
    printf("    # %zu faults planned over %d s\n", nf, c->duration_s);

    static struct chaos_ledger L;
    size_t cap = (size_t)c->duration_s * 1500;
    chaos_ledger_init(&L, cap > 1500000 ? cap : 1500000);
    int ports[2] = {c->sv[0].port, c->sv[1].port};
    struct chaos_buyers_opts bo = {.ports = ports,
                                   .nports = 2,
                                   .acts = c->acts,
                                   .nacts = c->nacts,
                                   .threads = ro->threads,
                                   .users = ro->users,
                                   .max_qty = LIMIT,
                                   .seed = c->seed,
                                   .think_us = ro->think_us,
                                   .max_attempts = 8,
                                   .backoff_ms = 100,
                                   .ledger = &L};
    static struct chaos_buyers b;
    c->t0 = sk_wall_ms();
    c->t0_mono = sk_mono_ms();
    chaos_buyers_start(&b, &bo);

    static struct soak k;
    memset(&k, 0, sizeof k);
    soak_names(c, &k);
    k.warmup = (size_t)(c->duration_s / 60 / 6);
    if (k.warmup < 1) k.warmup = 1;
    if (k.warmup > 5) k.warmup = 5;
    size_t next = 0;
    int64_t end = c->t0_mono + (int64_t)c->duration_s * 1000, next_say = c->t0_mono + 10000,
            next_sample = c->t0_mono, next_minute = c->t0_mono + 60000;
    while (sk_mono_ms() < end) {
        heal_due(c, 0);
        backlog_tick(c, 0);
        hook_tick(c, 0);
        if (next < nf && sk_mono_ms() - c->t0_mono >= f[next].at_ms) apply(c, &f[next++]);
        if (ro->soak && sk_mono_ms() >= next_minute) {
            soak_sample(c, &k, &L);
            next_minute += 60000;
        }
        if (sk_mono_ms() >= next_sample) {
            sample_age(c);
            next_sample = sk_mono_ms() + 1000;
        }
        if (sk_mono_ms() >= next_say) {
            SAY(c, "%ld answers, %ld of them 200", atomic_load(&b.answered), atomic_load(&b.ok));
            next_say += 10000;
        }
        sk_th_nap_ms(10);
    }
    if (ro->soak && k.points < (size_t)(c->duration_s / 60))
        soak_sample(c, &k, &L); /* the last minute */
    heal_due(c, 1);
    if (c->bl.phase == 1) backlog_tick(c, 1); /* a held worker continues with the rest */
    hook_tick(c, 1);
    int64_t healed = sk_wall_ms();
    SAY(c, "every fault healed (%zu applied, %zu skipped); buying on for %d s", c->applied,
        c->skipped, POST_HEAL_S);
    int64_t post_min = sk_mono_ms() + POST_HEAL_S * 1000,
            post_max = sk_mono_ms() + POST_HEAL_MAX_S * 1000;
    while (sk_mono_ms() < post_max && (sk_mono_ms() < post_min || !resumed(c, &L, healed))) {
        sample_age(c);
        backlog_tick(c, 0);
        sk_th_nap_ms(200);
    }
    SAY(c, "buying went on %.1f s after the heal", (double)(sk_wall_ms() - healed) / 1000.0);
    chaos_buyers_stop(&b);
    SAY(c, "buyers stopped: %ld answers, %ld of them 200; draining", atomic_load(&b.answered),
        atomic_load(&b.ok));

    /* the drain: every stream acknowledged, nothing fenced */
    sk_redis *r;
    char err[256];
    CHECK_EQ(sk_redis_new(&r, c->url, 2000, 5000, err, sizeof err), 0);
    int drained = drain(c, r, 120000);
    while (c->bl.phase) /* a catch-up still timed: as far as it got */
        backlog_tick(c, 1);
    sk_store *st = c->st;
    const char *names[2] = {"serve A", "serve B"};
    struct chaos_input in = {.ledger = &L,
                             .acts = c->acts,
                             .nacts = c->nacts,
                             .nserves = 2,
                             .serve_names = names,
                             .st = st,
                             .r = r,
                             .redis_url = c->url,
                             .db_spec = c->db.spec,
                             .start_ms = c->t0,
                             .healed_ms = healed,
                             .stale_after_s = 30,
                             .jumps = c->jumps,
                             .njumps = c->njumps,
                             .clock_jumped = c->clock_jumped};
    static struct chaos_report rep;
    CHECK_MSG(chaos_check(&in, &rep) == 0, "the check could not read: %s", rep.example[0]);
    chaos_report_print(stdout, &rep);
    static struct chaos_hooks_report hooks;
    if (c->rx) {
        uint64_t aids[CHAOS_MAX_ACTS];
        for (size_t i = 0; i < c->nacts; i++)
            aids[i] = c->acts[i].id;
        CHECK_MSG(chaos_hooks_check(st, c->rx, aids, c->nacts, HOOK_WAIT_MS, &hooks) == 0,
                  "the webhook check could not read: %s", hooks.example[0]);
        chaos_hooks_print(stdout, &hooks);
    }
    printf("    # oldest unpersisted order seen on /metrics during the run: %.1f s\n",
           c->max_age_s);
    fault_table(c, &L);
    for (int i = 0; i < c->nrates; i++)
        printf("    # the worker's catch-up after a backlog: %.0f orders/s\n", c->rates[i]);
    if (ro->soak) {
        soak_judge(c, &k);
        const char *svg = getenv("SOAK_SVG");
        if (svg && *svg) soak_chart(c, &k, svg, atomic_load(&b.ok));
    }
    for (int i = 0; i < c->nextra; i++)
        printf("    # FOUND %s\n", c->extra[i]);
    worker_story(c);
    const char *keep = getenv("CHAOS_KEEP"); /* a directory: the serve logs are copied there */
    for (int sv = 0; keep && *keep && sv < 2; sv++) {
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "cp '%s' '%s/serve-%c.log'", c->sv[sv].log, keep, 'A' + sv);
        if (system(cmd) != 0) printf("    # could not keep %s\n", c->sv[sv].log);
    }
    if (keep && *keep && !cluster) {
        /* the Sentinels' and the data nodes' logs: who was promoted when */
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "cp -r '%s' '%s/sentinel'", c->ss.dir, keep);
        if (system(cmd) != 0) printf("    # could not keep %s\n", c->ss.dir);
    }
    check_logs(c);
    CHECK_MSG(drained, "the worker did not drain (CHAOS_SEED=%" PRIu64 ")", c->seed);
    CHECK_MSG(chaos_report_ok(&rep),
              "the nemesis found broken promises (CHAOS_SEED=%" PRIu64 "): %s", c->seed,
              chaos_report_first(&rep));
    CHECK_MSG(!c->nextra, "%s (CHAOS_SEED=%" PRIu64 ")", c->extra[0], c->seed);
    CHECK_MSG(!c->rx || chaos_hooks_ok(&hooks),
              "the nemesis found broken webhook promises (CHAOS_SEED=%" PRIu64 "): %s", c->seed,
              chaos_hooks_first(&hooks));
    sale_log_passed();

    sk_store_close(st);
    sk_redis_free(r);
    sk_redis_free(c->r);
    chaos_ledger_free(&L);
    for (int s = 1; s >= 0; s--) {
        kill(c->sv[s].pid, SIGTERM);
        int wst;
        waitpid(c->sv[s].pid, &wst, 0);
    }
    if (c->rx) sk_th_rx_stop(c->rx);
    chaos_store_done(&c->db);
    if (c->sv[0].clock[0]) faketime_leftovers();
    /* the small filesystems go (lazily: a server may still hold a file) */
    if (c->dbfs[0]) umount2(c->dbfs, MNT_DETACH);
    for (int i = 0; c->aof_fs && i < nnodes(c); i++) {
        char dir[300];
        node_dir(c, i, dir, sizeof dir);
        umount2(dir, MNT_DETACH);
    }
    if (cluster)
        sk_cluster_spawn_stop(&c->cl);
    else
        sk_th_sentinel_stop(&c->ss);
    free(c);
}

static struct run_opts nemesis_opts(void)
{
    return (struct run_opts){.duration_s = (int)env_u64("CHAOS_S", CHAOS_DEFAULT_S),
                             .gap_min_ms = 4000,
                             .gap_max_ms = 8000,
                             .threads = BUYERS,
                             .think_us = 2000,
                             .users = USERS,
                             .stocks = {40000, 1000000, 1000000}};
}

SK_TEST_ON_REQUEST(chaos_nemesis_sentinel)
{
    struct run_opts o = nemesis_opts();
    chaos_run(0, &o);
}

SK_TEST_ON_REQUEST(chaos_nemesis_cluster)
{
    struct run_opts o = nemesis_opts();
    chaos_run(1, &o);
}

/* The soak (`make soak SOAK_MIN=N`): a steady sale for N minutes (default
 * 30) with the nemesis at a low rate, every process sampled each minute
 * (resident memory, open descriptors; Redis's used memory; the p99 of the
 * answers), judged by the bounds above after the warm-up and by the
 * checker at the end; SOAK_SVG=path draws the chart. SOAK_TOPO=cluster
 * for Redis Cluster (Sentinel by default). */
SK_TEST_ON_REQUEST(chaos_soak)
{
    struct run_opts o = {.duration_s = (int)env_u64("SOAK_MIN", 30) * 60,
                         .gap_min_ms = 40000,
                         .gap_max_ms = 80000,
                         .threads = 4,
                         .think_us = 5000,
                         .users = 5000000,
                         .stocks = {3000000, 3000000, 3000000},
                         .soak = 1};
    const char *topo = getenv("SOAK_TOPO");
    chaos_run(topo && !strcmp(topo, "cluster"), &o);
}
