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
 * unconfirmed, then the master killed). Killed
 * Redis nodes come back on their port and data; killed serve processes
 * are replaced by their supervisor. At most one Redis fault at a time (a
 * second one while one lasts is skipped and logged), so the topology can
 * always fail over. Who is hit is decided when the fault is due (the
 * masters of that moment). Twelve buyers record every answer; they retry
 * with the same Idempotency-Key after a 503 or no answer.
 *
 * After the last fault heals, the sale goes on for 10 s (it must sell
 * again), the buyers stop, the worker drains, and the checker rules. */
#include <dirent.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "engine/backlog.h"
#include "engine/keys.h"
#include "redis/redis_cluster.h"
#include "spawn/redis_spawn.h"
#include "spawn/spawn.h"
#include "support/chaos_buyers.h"
#include "support/chaos_check.h"
#include "support/chaos_store.h"
#include "support/cluster_harness.h"
#include "support/fault_plan.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/http_client.h"
#include "support/proc_watch.h"
#include "support/sale_env.h"
#include "support/sentinel_harness.h"
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

static const char *const redis_extra[] = {"--appendonly", "yes", "--appendfsync", "always", "--hz",
                                          "100",          NULL};

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
};

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

static size_t plan(uint64_t seed, int duration_s, struct sk_th_fault *f, size_t cap)
{
    return sk_th_fault_plan(seed, duration_s, kinds, F_KINDS, 4000, 8000, f, cap);
}

/* ---- the system under test ---------------------------------------------------- */

struct serve_proc {
    const char *name, *role;
    pid_t pid;
    int port, ops;
    char log[400];
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
};

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

static void node_restart(struct chaos *c, int i)
{
    if (c->cluster) {
        CHECK_MSG(sk_cluster_spawn_restart_node(&c->cl, i, NODE_TIMEOUT_MS, redis_extra) == 0,
                  "restart of node %d: %s", i, c->cl.errstr);
    } else {
        sk_th_sentinel_restart_node(&c->ss, i, redis_extra);
    }
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
                          NULL};
    struct sk_spawn_cmd cmd = {
        .argv = argv, .out = p->log, .err = p->log, .flags = SK_SPAWN_PDEATHSIG};
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
    c->act[c->nact++] = (struct active){kind, node, pid, sk_mono_ms() + dur_ms, log};
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

static void apply(struct chaos *c, const struct sk_th_fault *f)
{
    int k = f->kind;
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
        int brc = sk_backlog_read(r, k.orders, "seckill", &b);
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

static void chaos_run(int cluster)
{
    struct chaos *c = calloc(1, sizeof *c);
    CHECK(c);
    c->cluster = cluster;
    c->seed = env_u64("CHAOS_SEED", 0);
    if (!c->seed) c->seed = fresh_seed();
    c->duration_s = (int)env_u64("CHAOS_S", CHAOS_DEFAULT_S);
    const char *store = getenv("CHAOS_STORE");
    int kind = chaos_store_kind_of(store && *store ? store : "postgres");
    CHECK_MSG(kind >= 0, "CHAOS_STORE=%s: postgres, sqlite or mariadb", store);
    printf("    # CHAOS_SEED=%" PRIu64 " CHAOS_TOPO=%s CHAOS_S=%d CHAOS_STORE=%s (make chaos "
           "CHAOS_SEED=%" PRIu64 " CHAOS_TOPO=%s repeats this schedule)\n",
           c->seed, cluster ? "cluster" : "sentinel", c->duration_s, chaos_store_name(kind),
           c->seed, cluster ? "cluster" : "sentinel");
    static struct sk_th_fault f[MAX_FAULTS];
    restrict_kinds(getenv("CHAOS_KINDS"));
    size_t nf = plan(c->seed, c->duration_s, f, MAX_FAULTS);

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
    }
    chaos_store_start(&c->db, (enum chaos_store_kind)kind);
    c->sv[0] = (struct serve_proc){.name = "serve A (--role all)", .role = "all"};
    c->sv[1] = (struct serve_proc){.name = "serve B (--role api)", .role = "api"};
    serve_start(c, &c->sv[0]);
    serve_start(c, &c->sv[1]);
    sale_log_on_failure(c->sv[0].log, c->sv[0].ops);
    sale_wait_ready(c->sv[0].ops);
    sale_wait_ready(c->sv[1].ops);
    /* one activity that sells out during the run, two that do not */
    const int64_t stocks[3] = {40000, 1000000, 1000000};
    for (size_t i = 0; i < 3; i++) {
        c->acts[i] = (struct chaos_activity){sale_activity(c->sv[0].port, 0, stocks[i], LIMIT, 1),
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
    chaos_ledger_init(&L, 1500000);
    int ports[2] = {c->sv[0].port, c->sv[1].port};
    struct chaos_buyers_opts bo = {.ports = ports,
                                   .nports = 2,
                                   .acts = c->acts,
                                   .nacts = c->nacts,
                                   .threads = BUYERS,
                                   .users = USERS,
                                   .max_qty = LIMIT,
                                   .seed = c->seed,
                                   .think_us = 2000,
                                   .max_attempts = 8,
                                   .backoff_ms = 100,
                                   .ledger = &L};
    static struct chaos_buyers b;
    c->t0 = sk_wall_ms();
    c->t0_mono = sk_mono_ms();
    chaos_buyers_start(&b, &bo);

    size_t next = 0;
    int64_t end = c->t0_mono + (int64_t)c->duration_s * 1000, next_say = c->t0_mono + 10000,
            next_sample = c->t0_mono;
    while (sk_mono_ms() < end) {
        heal_due(c, 0);
        if (next < nf && sk_mono_ms() - c->t0_mono >= f[next].at_ms) apply(c, &f[next++]);
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
    heal_due(c, 1);
    int64_t healed = sk_wall_ms();
    SAY(c, "every fault healed (%zu applied, %zu skipped); buying on for %d s", c->applied,
        c->skipped, POST_HEAL_S);
    int64_t post_min = sk_mono_ms() + POST_HEAL_S * 1000,
            post_max = sk_mono_ms() + POST_HEAL_MAX_S * 1000;
    while (sk_mono_ms() < post_max && (sk_mono_ms() < post_min || !resumed(c, &L, healed))) {
        sample_age(c);
        sk_th_nap_ms(500);
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
    sk_store *st;
    CHECK_MSG(sk_store_open(&st, c->db.spec, err, sizeof err) == 0, "store: %s", err);
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
                             .stale_after_s = 30};
    static struct chaos_report rep;
    CHECK_MSG(chaos_check(&in, &rep) == 0, "the check could not read: %s", rep.example[0]);
    chaos_report_print(stdout, &rep);
    printf("    # oldest unpersisted order seen on /metrics during the run: %.1f s\n",
           c->max_age_s);
    fault_table(c, &L);
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
    CHECK_MSG(chaos_report_ok(&rep), "the nemesis found broken promises (CHAOS_SEED=%" PRIu64 ")",
              c->seed);
    sale_log_passed();

    sk_store_close(st);
    sk_redis_free(r);
    chaos_ledger_free(&L);
    for (int s = 1; s >= 0; s--) {
        kill(c->sv[s].pid, SIGTERM);
        int wst;
        waitpid(c->sv[s].pid, &wst, 0);
    }
    chaos_store_done(&c->db);
    if (cluster)
        sk_cluster_spawn_stop(&c->cl);
    else
        sk_th_sentinel_stop(&c->ss);
    free(c);
}

SK_TEST_ON_REQUEST(chaos_nemesis_sentinel)
{
    chaos_run(0);
}

SK_TEST_ON_REQUEST(chaos_nemesis_cluster)
{
    chaos_run(1);
}
