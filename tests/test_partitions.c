/* test_partitions.c - network partitions between hosts (`make partitions`,
 * run by .ci/run; not in `make test`: they need root and take minutes).
 *
 * The hosts are network namespaces the test makes itself
 * (support/netlab.h: veth links into a bridge in a namespace of its own,
 * 10.77.0.0/24, nothing linked outside; nft rules inside a host cut it off):
 *
 *   a   10.77.0.1  Redis master + Sentinel 1
 *   b   10.77.0.2  Redis replica + Sentinel 2
 *   c   10.77.0.3  Redis replica + Sentinel 3
 *   v1  10.77.0.4  seckill serve --role api --sync-replicas 2 (every replica)
 *   v2  10.77.0.5  the same
 *   db  10.77.0.6  PostgreSQL
 *   w   10.77.0.7  seckill worker
 *   ops 10.77.0.8  this test's own reads (the database, Redis, reconcile)
 *
 * Every client of a namespaced host runs in a namespace: the buyers'
 * connections to a serve host are opened inside that host (on its
 * loopback, as a gateway beside it would), the checks run in ops. The
 * servers die with the test, and the namespaces with them (nothing is
 * left behind when a test fails or is killed).
 *
 * The cases, each on a fresh lab, each partition held for 12 s and healed:
 *   split brain: the master cut off from the Sentinels, the replicas and
 *     v2, but not from v1 (nor the worker): the majority promotes a
 *     replica while the old master goes on for v1;
 *   a serve host (v1) cut off from everything;
 *   the database cut off from the worker;
 *   the worker cut off from the master only.
 * And, on a lab of two hosts, a command the client gave up on inside a cut
 * (its reply timed out) does not run on the server once the cut heals.
 * Then the partition nemesis (at the end of this file): the same lab
 * through a seeded mix of cuts, kills and freezes.
 * The buyers are the nemesis's (support/chaos_buyers.h): each purchase
 * with an Idempotency-Key of its own, first sent to the buyer's own serve
 * host, retried with the same key on either host while the answer is 503
 * or none, every attempt in a ledger. After healing and the worker's
 * drain, the nemesis's checker judges the ledger against the database and
 * Redis (support/chaos_check.h): no acknowledged order missing or held for
 * someone else, no order id or key twice, no order nobody was told of, no
 * oversell, no user over the limit, stock conserved, nothing fenced, the
 * sale resumed, `seckill reconcile` consistent, every answer within the
 * contract. Each case prints what it cost: the longest time without a 200
 * on each serve host (the checker's per-serve gap). */
#include <arpa/inet.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <hiredis.h>

#include "core/clock.h"
#include "core/error.h"
#include "redis/redis_conn.h"
#include "spawn/spawn.h"
#include "store/store.h"
#include "support/chaos_buyers.h"
#include "support/chaos_check.h"
#include "support/fault_plan.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/http_client.h"
#include "support/http_load_env.h"
#include "support/netlab.h"
#include "support/sale_env.h"
#include "support/server_spawn.h"
#include "tests/support/spawn/pg_spawn.h"

enum { H_A, H_B, H_C, H_V1, H_V2, H_DB, H_W, H_OPS, NHOSTS };
static const char *const host_names[NHOSTS] = {"a", "b", "c", "v1", "v2", "db", "w", "ops"};

#define REDIS_PORT 6379
#define SENTINEL_PORT 26379
#define SERVE_PORT 8080
#define CUT_MS 12000
#define STOCK 1000000 /* never sold out: the sale must resume after the heal */
#define LIMIT 2
#define USERS 200000 /* enough that they are not all at the limit by the end */
#define BUYERS 4     /* two of each serve host's own */
#define MAX_ANSWERS 2000000

/* A lab and everything running in it. */
struct site {
    struct sk_th_netlab lab;
    pid_t redis[3], sentinel[3], serve[2], worker;
    int serve_lives[2], worker_lives, redis_lives[3]; /* incarnations (a kill starts another) */
    int aof; /* Redis with appendonly yes, appendfsync always (the nemesis) */
    struct sk_pg_spawn pg;
    char dir[256];
    char redis_url[256]; /* the Sentinels' URL */
    char db_url[256];
    struct chaos_activity act;
    int ports[2], netns[2]; /* each serve host's port and namespace, for the buyers */
    struct chaos_ledger ledger;
    struct chaos_buyers buyers;
    uint64_t aid;
    sk_store *st;
    sk_redis *r;
};

/* ready(): a TCP service answers at addr:port (from the calling thread's
 * namespace). */
struct endpoint {
    const char *addr;
    int port;
};

static int redis_ready(void *arg)
{
    const struct endpoint *e = arg;
    struct timeval tv = {0, 300000};
    redisContext *c = redisConnectWithTimeout(e->addr, e->port, tv);
    int ok = c && !c->err;
    if (ok) {
        redisReply *r = redisCommand(c, "PING");
        ok = r && (r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_STRING);
        if (r) freeReplyObject(r);
    }
    if (c) redisFree(c);
    return ok;
}

static int http_ready(void *arg)
{
    const struct endpoint *e = arg;
    static const char req[] = "GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    char out[256];
    (void)e;
    size_t n = sk_th_http_raw(SERVE_PORT, req, sizeof req - 1, out, sizeof out - 1, 500);
    out[n] = 0;
    return strstr(out, " 200 ") != NULL;
}

/* Starts argv in host h (the calling thread goes there for the fork, then
 * back to ops), its output into dir/<name>.log. */
static pid_t start_in(struct site *s, int h, const char *name, const char *const *argv,
                      int (*ready)(void *), void *arg)
{
    char log[400], err[512];
    snprintf(log, sizeof log, "%s/%s.log", s->dir, name);
    struct sk_spawn_cmd c;
    sk_th_server_cmd(&c, name, argv, log, ready, arg, 30000);
    pid_t pid = 0;
    sk_th_netlab_enter(&s->lab, h);
    int rc = ready ? sk_spawn_start(&c, &pid, err, sizeof err)
                   : sk_spawn_exec(&c, &pid, err, sizeof err);
    sk_th_netlab_enter(&s->lab, H_OPS);
    CHECK_MSG(rc == 0, "%s in %s: %s", name, host_names[h], err);
    return pid;
}

static const char *addr(const struct site *s, int h)
{
    return s->lab.host[h].addr;
}

/* A redis command on addr:port from ops (NULL on an I/O error). */
static redisReply *cmd_at(const char *host, int port, const char *fmt, ...)
{
    struct timeval tv = {1, 0};
    redisContext *c = redisConnectWithTimeout(host, port, tv);
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

/* An integer field of SENTINEL MASTER seckill on Sentinel i, -1 when not had. */
static long long sentinel_field(const struct site *s, int i, const char *name)
{
    redisReply *r = cmd_at(addr(s, H_A + i), SENTINEL_PORT, "SENTINEL MASTER seckill");
    long long v = -1;
    for (size_t k = 0; r && r->type == REDIS_REPLY_ARRAY && k + 1 < r->elements; k += 2)
        if (!strcmp(r->element[k]->str, name)) v = strtoll(r->element[k + 1]->str, NULL, 10);
    if (r) freeReplyObject(r);
    return v;
}

/* The log name of a process's incarnation: base, then base.1, base.2 ...
 * (a restarted process writes a log of its own). */
static void life_name(char *out, size_t cap, const char *base, int life)
{
    if (life)
        snprintf(out, cap, "%s.%d", base, life);
    else
        snprintf(out, cap, "%s", base);
}

/* Redis node i on its host, a replica of host master (-1: none); again
 * after a kill, on its directory (with s->aof its data comes back). */
static void start_redis_node(struct site *s, int i, int master)
{
    char d[300], base[16], name[32];
    snprintf(d, sizeof d, "%s/redis%d", s->dir, i);
    if (!s->redis_lives[i]) CHECK_EQ(mkdir(d, 0700), 0);
    snprintf(base, sizeof base, "redis-%s", host_names[H_A + i]);
    life_name(name, sizeof name, base, s->redis_lives[i]++);
    const char *argv[26] = {"redis-server",
                            "--port",
                            "6379",
                            "--bind",
                            addr(s, H_A + i),
                            "127.0.0.1",
                            "--dir",
                            d,
                            "--save",
                            "",
                            "--appendonly",
                            s->aof ? "yes" : "no",
                            "--appendfsync",
                            "always",
                            "--protected-mode",
                            "no",
                            "--repl-diskless-sync",
                            "yes",
                            "--repl-diskless-sync-delay",
                            "0",
                            "--hz",
                            "100",
                            NULL};
    if (master >= 0) {
        argv[22] = "--replicaof";
        argv[23] = addr(s, master);
        argv[24] = "6379";
        argv[25] = NULL;
    }
    struct endpoint e = {addr(s, H_A + i), REDIS_PORT};
    s->redis[i] = start_in(s, H_A + i, name, argv, redis_ready, &e);
}

/* The redis nodes, in sync, and the Sentinels, each knowing the others. */
static void start_redis(struct site *s)
{
    for (int i = 0; i < 3; i++)
        start_redis_node(s, i, i > 0 ? H_A : -1);
    int64_t by = sk_mono_ms() + 20000;
    for (;;) {
        redisReply *r = cmd_at(addr(s, H_A), REDIS_PORT, "WAIT 2 200");
        int n = r && r->type == REDIS_REPLY_INTEGER ? (int)r->integer : -1;
        if (r) freeReplyObject(r);
        if (n == 2) break;
        CHECK_MSG(sk_mono_ms() < by, "the replicas are not in sync (WAIT 2: %d)", n);
    }
    for (int i = 0; i < 3; i++) {
        char conf[400], d[300], name[16];
        snprintf(d, sizeof d, "%s/sentinel%d", s->dir, i);
        CHECK_EQ(mkdir(d, 0700), 0);
        snprintf(conf, sizeof conf, "%s/sentinel.conf", d);
        FILE *f = fopen(conf, "w");
        CHECK(f);
        fprintf(f,
                "port %d\nbind %s 127.0.0.1\nprotected-mode no\ndir %s\n"
                "sentinel monitor seckill %s %d 2\n"
                "sentinel down-after-milliseconds seckill 1000\n"
                "sentinel failover-timeout seckill 5000\n"
                "sentinel parallel-syncs seckill 2\n",
                SENTINEL_PORT, addr(s, H_A + i), d, addr(s, H_A), REDIS_PORT);
        fclose(f);
        snprintf(name, sizeof name, "sentinel-%s", host_names[H_A + i]);
        const char *argv[] = {"redis-server", conf, "--sentinel", NULL};
        struct endpoint e = {addr(s, H_A + i), SENTINEL_PORT};
        s->sentinel[i] = start_in(s, H_A + i, name, argv, redis_ready, &e);
    }
    by = sk_mono_ms() + 30000;
    for (int i = 0; i < 3;) {
        if (sentinel_field(s, i, "num-other-sentinels") == 2 &&
            sentinel_field(s, i, "num-slaves") == 2) {
            i++;
            continue;
        }
        CHECK_MSG(sk_mono_ms() < by, "sentinel %d does not know the others", i + 1);
        sk_th_nap_ms(50);
    }
    snprintf(s->redis_url, sizeof s->redis_url, "redis+sentinel://%s:%d,%s:%d,%s:%d/seckill",
             addr(s, H_A), SENTINEL_PORT, addr(s, H_B), SENTINEL_PORT, addr(s, H_C), SENTINEL_PORT);
}

/* PostgreSQL in db, reachable over the lab's network (trust from it). */
static void start_pg(struct site *s)
{
    CHECK_MSG(sk_pg_spawn_init(&s->pg) == 0, "initdb: %s", s->pg.errstr);
    char hba[400];
    snprintf(hba, sizeof hba, "%s/data/pg_hba.conf", s->pg.dir);
    FILE *f = fopen(hba, "a");
    CHECK(f);
    fprintf(f, "host all all 10.77.0.0/24 trust\n");
    fclose(f);
    char listen[64];
    snprintf(listen, sizeof listen, "listen_addresses=127.0.0.1,%s", addr(s, H_DB));
    const char *settings[] = {listen, "fsync=off", "full_page_writes=off", NULL};
    sk_th_netlab_enter(&s->lab, H_DB);
    int rc = sk_pg_spawn_launch(&s->pg, settings);
    sk_th_netlab_enter(&s->lab, H_OPS);
    CHECK_MSG(rc == 0, "postgres: %s", s->pg.errstr);
    snprintf(s->db_url, sizeof s->db_url, "postgres://postgres@%s:%d/postgres", addr(s, H_DB),
             s->pg.port);
}

/* serve host v's serve (again after a kill: same host, same options). */
static void start_serve_on(struct site *s, int v)
{
    const char *bin = getenv("SECKILL_BIN");
    CHECK_MSG(bin && *bin, "SECKILL_BIN is not set (run through make)");
    char base[16], name[32];
    snprintf(base, sizeof base, "serve-%s", host_names[H_V1 + v]);
    life_name(name, sizeof name, base, s->serve_lives[v]++);
    /* WAIT of every replica: under fewer, a master killed twice in a row
     * loses 200s (docs/failover.md) */
    const char *argv[] = {bin,
                          "serve",
                          "--listen",
                          "0.0.0.0:8080",
                          "--redis",
                          s->redis_url,
                          "--db",
                          s->db_url,
                          "--role",
                          "api",
                          "--processes",
                          "1",
                          "--sync-replicas",
                          "2",
                          "--sync-timeout-ms",
                          "50",
                          "--redis-timeout-ms",
                          "500",
                          "--admin-token",
                          SK_TH_ADMIN_TOKEN,
                          NULL};
    struct endpoint e = {addr(s, H_V1 + v), SERVE_PORT};
    s->serve[v] = start_in(s, H_V1 + v, name, argv, http_ready, &e);
}

/* The order worker in w (again after a kill). */
static void start_worker_on(struct site *s)
{
    const char *bin = getenv("SECKILL_BIN");
    const char *wargv[] = {bin, "worker", "--redis", s->redis_url, "--db", s->db_url, NULL};
    char name[32];
    life_name(name, sizeof name, "worker", s->worker_lives++);
    s->worker = start_in(s, H_W, name, wargv, NULL, NULL);
}

static void start_seckill(struct site *s)
{
    setenv("LSAN_OPTIONS", "exitcode=0", 1);
    for (int v = 0; v < 2; v++)
        start_serve_on(s, v);
    start_worker_on(s);
}

static void site_start(struct site *s, int aof)
{
    char why[160];
    CHECK_MSG(sk_th_netlab_possible(why, sizeof why), "partitions cannot run here: %s", why);
    memset(s, 0, sizeof *s);
    s->aof = aof;
    snprintf(s->dir, sizeof s->dir, "%s", sk_th_tmpdir());
    sk_th_netlab_start(&s->lab, host_names, NHOSTS);
    sk_th_netlab_enter(&s->lab, H_OPS);
    start_pg(s);
    start_redis(s);
    start_seckill(s);
    /* the activity, over v1's admin API (from v1: its loopback) */
    sk_th_netlab_enter(&s->lab, H_V1);
    sale_wait_ready(SERVE_PORT);
    s->aid = sale_activity(SERVE_PORT, 0, STOCK, LIMIT, 1);
    sk_th_netlab_enter(&s->lab, H_V2);
    sale_wait_ready(SERVE_PORT);
    sk_th_netlab_enter(&s->lab, H_OPS);
    char err[512];
    CHECK_MSG(sk_store_open(&s->st, s->db_url, err, sizeof err) == 0, "%s", err);
    CHECK_MSG(sk_redis_new(&s->r, s->redis_url, 2000, 5000, err, sizeof err) == 0, "%s", err);
    s->act = (struct chaos_activity){s->aid, STOCK, LIMIT};
    for (int v = 0; v < 2; v++) {
        s->ports[v] = SERVE_PORT;
        s->netns[v] = sk_th_netlab_fd(&s->lab, H_V1 + v);
    }
    chaos_ledger_init(&s->ledger, MAX_ANSWERS);
    uint64_t seed = (uint64_t)sk_wall_ms();
    printf("    # buyers' seed %" PRIu64 "\n", seed);
    struct chaos_buyers_opts bo = {.ports = s->ports,
                                   .nports = 2,
                                   .acts = &s->act,
                                   .nacts = 1,
                                   .threads = BUYERS,
                                   .users = USERS,
                                   .max_qty = LIMIT,
                                   .seed = seed,
                                   .max_attempts = 8,
                                   /* short: a buyer's pause is part of the
                                    * gap measured after a 503 */
                                   .backoff_ms = 20,
                                   .netns_fds = s->netns,
                                   .home = 1,
                                   .ledger = &s->ledger};
    chaos_buyers_start(&s->buyers, &bo);
}

/* 200s answered by serve host v so far. */
static long ok_on(struct site *s, int v)
{
    return atomic_load(&s->buyers.ok_on[v]);
}

/* Both serve hosts answered a 200 since their counts were at[]. */
static int both_selling(struct site *s, const long at[2])
{
    return ok_on(s, 0) > at[0] && ok_on(s, 1) > at[1];
}

static void wait_both_selling(struct site *s, int ms, const char *what)
{
    long at[2] = {ok_on(s, 0), ok_on(s, 1)};
    int64_t by = sk_mono_ms() + ms;
    while (!both_selling(s, at)) {
        CHECK_MSG(sk_mono_ms() < by, "%s: v1 %ld 200s, v2 %ld (logs in %s)", what,
                  ok_on(s, 0) - at[0], ok_on(s, 1) - at[1], s->dir);
        sk_th_nap_ms(20);
    }
}

/* The lines of dir/<name>.log that hold word (at most 6). */
static void print_log_lines(const struct site *s, const char *name, const char *word)
{
    char path[400], line[600];
    snprintf(path, sizeof path, "%s/%s.log", s->dir, name);
    FILE *f = fopen(path, "r");
    for (int n = 0; f && n < 6 && fgets(line, sizeof line, f);)
        if (strstr(line, word)) {
            printf("      %s: %s", name, line);
            n++;
        }
    if (f) fclose(f);
}

/* The end of a case: selling on both after the heal, the buyers stopped,
 * the worker drained, the ledger judged. t_cut and t_heal are wall-clock
 * times; the report's times are relative to the cut. */
static void site_finish(struct site *s, const char *label, int64_t t_cut, int64_t t_heal)
{
    wait_both_selling(s, 60000, "selling again after the heal");
    int64_t t_back = sk_wall_ms();
    sk_th_nap_ms(2000);
    chaos_buyers_stop(&s->buyers);
    printf("    # %s: cut at 0 s, healed at %.1f s, both hosts selling again at %.1f s\n", label,
           (t_heal - t_cut) / 1000.0, (t_back - t_cut) / 1000.0);
    sale_wait_drained(s->r, s->aid, 90000);
    printf("    # %s: every order persisted %.1f s after the heal\n", label,
           (sk_wall_ms() - t_heal) / 1000.0);
    for (int i = 0; i < s->worker_lives; i++) {
        char name[32];
        life_name(name, sizeof name, "worker", i);
        print_log_lines(s, name, "recover");
    }
    print_log_lines(s, "serve-v1", "sentinel");
    const char *names[2] = {host_names[H_V1], host_names[H_V2]};
    struct chaos_input in = {.ledger = &s->ledger,
                             .acts = &s->act,
                             .nacts = 1,
                             .nserves = 2,
                             .serve_names = names,
                             .st = s->st,
                             .r = s->r,
                             .redis_url = s->redis_url,
                             .db_spec = s->db_url,
                             .start_ms = t_cut,
                             .healed_ms = t_heal,
                             .stale_after_s = 30};
    static struct chaos_report rep;
    CHECK_MSG(chaos_check(&in, &rep) == 0, "%s: the check could not read: %s", label,
              rep.example[0]);
    chaos_report_print(stdout, &rep);
    for (int v = 0; v < 2; v++)
        printf("    # %s: longest time without a 200 on %s: %.1f s (from %.1f s)\n", label,
               names[v], rep.serve_gap_ms[v] / 1000.0, rep.serve_gap_at_ms[v] / 1000.0);
    fflush(stdout);
    CHECK_MSG(chaos_report_ok(&rep), "%s: broken promises (logs in %s)", label, s->dir);
}

/* A seckill log holds no sanitizer report and no crash (check_server_log). */
static void clean_log(const struct site *s, const char *name)
{
    struct sk_th_serve logged;
    memset(&logged, 0, sizeof logged);
    snprintf(logged.log, sizeof logged.log, "%s/%s.log", s->dir, name);
    check_server_log(&logged);
}

static void site_stop(struct site *s)
{
    chaos_ledger_free(&s->ledger);
    for (int v = 0; v < 2; v++)
        sk_spawn_stop(s->serve[v], SIGTERM, 5000);
    sk_spawn_stop(s->worker, SIGTERM, 5000);
    char base[16], name[32];
    for (int v = 0; v < 2; v++)
        for (int i = 0; i < s->serve_lives[v]; i++) {
            snprintf(base, sizeof base, "serve-%s", host_names[H_V1 + v]);
            life_name(name, sizeof name, base, i);
            clean_log(s, name);
        }
    for (int i = 0; i < s->worker_lives; i++) {
        life_name(name, sizeof name, "worker", i);
        clean_log(s, name);
    }
    for (int i = 0; i < 3; i++) {
        sk_spawn_stop(s->sentinel[i], SIGTERM, 2000);
        sk_spawn_stop(s->redis[i], SIGTERM, 2000);
    }
    sk_store_close(s->st);
    sk_redis_free(s->r);
    sk_pg_spawn_stop(&s->pg);
    sk_th_netlab_stop(&s->lab);
}

/* Runs one case: a baseline, then cut(), held CUT_MS, then heal(). */
static void run_case(const char *label, void (*cut)(struct site *), void (*heal)(struct site *))
{
    static struct site s;
    site_start(&s, 0);
    wait_both_selling(&s, 30000, "the sale before the cut");
    sk_th_nap_ms(1500);
    int64_t t_cut = sk_wall_ms();
    cut(&s);
    sk_th_nap_ms(CUT_MS);
    heal(&s);
    int64_t t_heal = sk_wall_ms();
    site_finish(&s, label, t_cut, t_heal);
    site_stop(&s);
}

/* ---- the cases ---------------------------------------------------------- */

static void cut_split_brain(struct site *s)
{
    const int peers[] = {H_B, H_C, H_V2};
    sk_th_netlab_cut(&s->lab, H_A, peers, 3);
}

static void heal_a(struct site *s)
{
    sk_th_netlab_heal(&s->lab, H_A);
}

static void cut_serve_host(struct site *s)
{
    const int peers[] = {H_A, H_B, H_C, H_V2, H_DB, H_W, H_OPS};
    sk_th_netlab_cut(&s->lab, H_V1, peers, 7);
}

static void heal_v1(struct site *s)
{
    sk_th_netlab_heal(&s->lab, H_V1);
}

static void cut_db_from_worker(struct site *s)
{
    const int peers[] = {H_W};
    sk_th_netlab_cut(&s->lab, H_DB, peers, 1);
}

static void heal_db(struct site *s)
{
    sk_th_netlab_heal(&s->lab, H_DB);
}

static void cut_worker_from_master(struct site *s)
{
    const int peers[] = {H_A};
    sk_th_netlab_cut(&s->lab, H_W, peers, 1);
}

static void heal_w(struct site *s)
{
    sk_th_netlab_heal(&s->lab, H_W);
}

SK_TEST_T(partition_split_brain_the_master_cut_off_but_from_one_serve_host, 300)
{
    run_case("split brain", cut_split_brain, heal_a);
}

SK_TEST_T(partition_a_serve_host_cut_off_from_everything, 300)
{
    run_case("serve host cut off", cut_serve_host, heal_v1);
}

SK_TEST_T(partition_the_database_cut_off_from_the_worker, 300)
{
    run_case("database cut off from the worker", cut_db_from_worker, heal_db);
}

SK_TEST_T(partition_the_worker_cut_off_from_the_master_only, 300)
{
    run_case("worker cut off from the master", cut_worker_from_master, heal_w);
}

/* ---- a command given up on inside a cut ----------------------------------- */

/* Sockets of the calling thread's namespace to addr:port whose sent bytes
 * the peer has not acknowledged (tx_queue of /proc's tcp table). */
static int unacked_to(const char *addr, int port)
{
    struct in_addr a;
    CHECK_EQ(inet_pton(AF_INET, addr, &a), 1);
    FILE *f = fopen("/proc/thread-self/net/tcp", "r");
    CHECK(f);
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned ra, rp, tx;
        if (sscanf(line, " %*d: %*x:%*x %x:%x %*x %x:%*x", &ra, &rp, &tx) == 3 && ra == a.s_addr &&
            rp == (unsigned)port && tx > 0)
            n++;
    }
    fclose(f);
    return n;
}

SK_TEST_T(partition_a_command_given_up_on_inside_a_cut_does_not_run_after_the_heal, 120)
{
    enum { L_R, L_C, L_N };
    static const char *const names[L_N] = {"r", "c"};
    char why[160];
    CHECK_MSG(sk_th_netlab_possible(why, sizeof why), "partitions cannot run here: %s", why);
    static struct sk_th_netlab lab;
    sk_th_netlab_start(&lab, names, L_N);
    const char *dir = sk_th_tmpdir(), *ra = lab.host[L_R].addr;
    char log[400], url[64], err[256];
    snprintf(log, sizeof log, "%s/redis.log", dir);
    const char *argv[] = {"redis-server",
                          "--port",
                          "6379",
                          "--bind",
                          ra,
                          "127.0.0.1",
                          "--dir",
                          dir,
                          "--save",
                          "",
                          "--appendonly",
                          "no",
                          "--protected-mode",
                          "no",
                          NULL};
    struct endpoint e = {ra, REDIS_PORT};
    sk_th_netlab_enter(&lab, L_R);
    pid_t redis = sk_th_server_start("redis-r", argv, log, redis_ready, &e, 10000);
    /* the client in c, its sockets in c's namespace */
    sk_th_netlab_enter(&lab, L_C);
    snprintf(url, sizeof url, "redis://%s:%d", ra, REDIS_PORT);
    sk_redis *r;
    CHECK_MSG(sk_redis_new(&r, url, 1000, 300, err, sizeof err) == 0, "%s", err);
    redisReply *rep;
    CHECK_MSG(sk_redis_cmd(r, &rep, "SET k 0") == 0, "%s", r->errstr);
    freeReplyObject(rep);
    const int peer = L_R;
    sk_th_netlab_cut(&lab, L_C, &peer, 1);
    /* written into the cut: no answer, the client gives up (a failure its
     * caller sees, as serve's 503 or the worker's retried read) */
    CHECK(sk_redis_cmd(r, &rep, "INCR k") < 0);
    int held = unacked_to(ra, REDIS_PORT);
    sk_th_netlab_heal(&lab, L_C);
    /* whatever c's kernel still held for r is delivered (or dropped) */
    int64_t by = sk_mono_ms() + 60000;
    while (unacked_to(ra, REDIS_PORT) > 0) {
        CHECK_MSG(sk_mono_ms() < by, "a socket to redis still holds unacknowledged bytes");
        sk_th_nap_ms(50);
    }
    sk_th_netlab_enter(&lab, L_R);
    rep = cmd_at("127.0.0.1", REDIS_PORT, "GET k");
    CHECK(rep && rep->type == REDIS_REPLY_STRING);
    CHECK_MSG(!strcmp(rep->str, "0"),
              "the INCR given up on ran after the heal (k = %s; %d socket(s) held it after the "
              "give-up)",
              rep->str, held);
    freeReplyObject(rep);
    sk_redis_free(r);
    sk_spawn_stop(redis, SIGTERM, 2000);
    sk_th_netlab_stop(&lab);
}

/* ---- the partition nemesis ----------------------------------------------- */

/* A seeded mix on the same lab: every 3-6 s a fault, for PARTITION_S
 * seconds (default 60): a partition (at most one at a time: the master
 * cut off from everyone, a split brain, a serve host cut off from
 * everyone or from the master only, the worker from the master, the
 * database from the worker or from everyone, a replica cut off), a SIGKILL
 * of a serve process or of the worker (started again on its host after
 * 0-2 s) or of the master (back on its data after 1-6 s: the nemesis's
 * Redis runs with appendonly yes, appendfsync always, and comes back as
 * the replica of the master of that moment, as a configuration Sentinel
 * rewrote would), or a SIGSTOP of the master, the worker or the database
 * (0.5-4 s). At most one Redis node is down or frozen at a time.
 * Kills and freezes land during partitions too: that is the mix. The
 * master is the one the Sentinels name when the fault is due.
 * PARTITION_SEED=N repeats a schedule (a fresh seed is printed). */

enum nem_kind {
    N_MASTER_CUT,
    N_SPLIT_BRAIN,
    N_SERVE_CUT,
    N_SERVE_FROM_MASTER,
    N_WORKER_FROM_MASTER,
    N_DB_FROM_WORKER,
    N_DB_CUT,
    N_REPLICA_CUT,
    N_SERVE_KILL,
    N_WORKER_KILL,
    N_MASTER_KILL,
    N_MASTER_FREEZE,
    N_WORKER_FREEZE,
    N_DB_FREEZE,
    N_KINDS
};

static const struct sk_th_fault_kind nem_kinds[N_KINDS] = {
    [N_MASTER_CUT] = {"master_cut", "the master cut off from everyone", 2, 2000, 8000},
    [N_SPLIT_BRAIN] = {"split_brain", "split brain (the master keeps one serve host)", 2, 2000,
                       8000},
    [N_SERVE_CUT] = {"serve_cut", "a serve host cut off from everyone", 2, 1000, 6000},
    [N_SERVE_FROM_MASTER] = {"serve_from_master", "a serve host cut off from the master", 2, 1000,
                             6000},
    [N_WORKER_FROM_MASTER] = {"worker_from_master", "the worker cut off from the master", 1, 1000,
                              6000},
    [N_DB_FROM_WORKER] = {"db_from_worker", "the database cut off from the worker", 1, 1000, 6000},
    [N_DB_CUT] = {"db_cut", "the database cut off from everyone", 1, 1000, 6000},
    [N_REPLICA_CUT] = {"replica_cut", "a replica cut off from everyone", 1, 1000, 6000},
    [N_SERVE_KILL] = {"serve_kill", "SIGKILL of a serve process", 2, 0, 2000},
    [N_WORKER_KILL] = {"worker_kill", "SIGKILL of the worker", 2, 0, 2000},
    [N_MASTER_KILL] = {"master_kill", "SIGKILL of the master", 2, 1000, 6000},
    [N_MASTER_FREEZE] = {"master_stop", "SIGSTOP of the master", 1, 500, 4000},
    [N_WORKER_FREEZE] = {"worker_stop", "SIGSTOP of the worker", 1, 500, 4000},
    [N_DB_FREEZE] = {"db_freeze", "SIGSTOP of the database", 1, 500, 4000},
};

#define NEM_MAX 256

/* What is broken now; 0 (or -1) when nothing. Times on sk_mono_ms. */
struct nem_state {
    int cut_host;          /* the host whose rules cut it off, -1 none */
    int64_t heal_at;       /* of that partition */
    int64_t serve_back[2]; /* a killed serve starts again then */
    int64_t worker_back;
    int64_t redis_back[3]; /* a killed Redis node starts again then (on its data) */
    pid_t frozen_redis;
    int64_t thaw_redis, thaw_worker, thaw_db;
    int applied[N_KINDS], skipped[N_KINDS];
};

/* The Redis host the Sentinels name as master (most of the three that
 * answer), -1 when none answers. */
static int master_host(const struct site *s)
{
    int votes[3] = {0, 0, 0}, best = -1;
    for (int i = 0; i < 3; i++) {
        redisReply *r =
            cmd_at(addr(s, H_A + i), SENTINEL_PORT, "SENTINEL get-master-addr-by-name seckill");
        if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
            r->element[0]->type == REDIS_REPLY_STRING)
            for (int h = 0; h < 3; h++)
                if (!strcmp(r->element[0]->str, addr(s, H_A + h))) votes[h]++;
        if (r) freeReplyObject(r);
    }
    for (int h = 0; h < 3; h++)
        if (votes[h] && (best < 0 || votes[h] > votes[best])) best = h;
    return best < 0 ? -1 : H_A + best;
}

/* Host h cut off from every other host of the lab. */
static void cut_from_all(struct site *s, int h)
{
    int peers[NHOSTS], n = 0;
    for (int i = 0; i < NHOSTS; i++)
        if (i != h) peers[n++] = i;
    sk_th_netlab_cut(&s->lab, h, peers, n);
}

static void kill_reap(pid_t pid)
{
    if (pid <= 0) return;
    kill(pid, SIGCONT);
    sk_spawn_stop(pid, SIGKILL, 5000);
}

#define SAY(t0, ...)                                                                               \
    do {                                                                                           \
        printf("    # %6.1f s  ", (sk_mono_ms() - (t0)) / 1000.0);                                 \
        printf(__VA_ARGS__);                                                                       \
        printf("\n");                                                                              \
        fflush(stdout);                                                                            \
    } while (0)

/* Applies fault f (now, mono); a fault that cannot land now (a partition
 * lasts, the process is down, no master is named) is skipped and said. */
static void nem_apply(struct site *s, struct nem_state *ns, const struct sk_th_fault *f, int64_t t0)
{
    int64_t now = sk_mono_ms(), until = now + f->dur_ms;
    int k = f->kind, v = (int)(f->pick % 2), m = -1, h = -1;
    const char *what = nem_kinds[k].name;
    if (k <= N_REPLICA_CUT && ns->cut_host >= 0) {
        SAY(t0, "skipped: %s (a partition lasts)", what);
        ns->skipped[k]++;
        return;
    }
    if (k == N_MASTER_CUT || k == N_SPLIT_BRAIN || k == N_SERVE_FROM_MASTER ||
        k == N_WORKER_FROM_MASTER || k == N_REPLICA_CUT || k == N_MASTER_KILL ||
        k == N_MASTER_FREEZE) {
        m = master_host(s);
        if (m < 0) {
            SAY(t0, "skipped: %s (no Sentinel names a master)", what);
            ns->skipped[k]++;
            return;
        }
    }
    switch (k) {
    case N_MASTER_CUT: cut_from_all(s, h = m); break;
    case N_SPLIT_BRAIN: {
        /* the master keeps serve host v (and the worker); the Sentinels,
         * the replicas and the other serve host lose it */
        int peers[3], n = 0;
        for (int i = H_A; i <= H_C; i++)
            if (i != m) peers[n++] = i;
        peers[n++] = H_V1 + (1 - v);
        sk_th_netlab_cut(&s->lab, h = m, peers, n);
        break;
    }
    case N_SERVE_CUT: cut_from_all(s, h = H_V1 + v); break;
    case N_SERVE_FROM_MASTER: sk_th_netlab_cut(&s->lab, h = H_V1 + v, &m, 1); break;
    case N_WORKER_FROM_MASTER: sk_th_netlab_cut(&s->lab, h = H_W, &m, 1); break;
    case N_DB_FROM_WORKER: {
        const int w = H_W;
        sk_th_netlab_cut(&s->lab, h = H_DB, &w, 1);
        break;
    }
    case N_DB_CUT: cut_from_all(s, h = H_DB); break;
    case N_REPLICA_CUT: {
        int reps[2], n = 0;
        for (int i = H_A; i <= H_C; i++)
            if (i != m) reps[n++] = i;
        cut_from_all(s, h = reps[v]);
        break;
    }
    case N_SERVE_KILL:
        if (ns->serve_back[v]) {
            SAY(t0, "skipped: %s (serve-%s is down)", what, host_names[H_V1 + v]);
            ns->skipped[k]++;
            return;
        }
        kill_reap(s->serve[v]);
        s->serve[v] = 0;
        ns->serve_back[v] = until;
        SAY(t0, "%s: serve-%s, started again in %.1f s", what, host_names[H_V1 + v],
            f->dur_ms / 1000.0);
        ns->applied[k]++;
        return;
    case N_WORKER_KILL:
    case N_WORKER_FREEZE:
        if (ns->worker_back || ns->thaw_worker) {
            SAY(t0, "skipped: %s (the worker is down or frozen)", what);
            ns->skipped[k]++;
            return;
        }
        if (k == N_WORKER_KILL) {
            kill_reap(s->worker);
            s->worker = 0;
            ns->worker_back = until;
        } else {
            kill(s->worker, SIGSTOP);
            ns->thaw_worker = until;
        }
        SAY(t0, "%s for %.1f s", what, f->dur_ms / 1000.0);
        ns->applied[k]++;
        return;
    case N_MASTER_KILL:
    case N_MASTER_FREEZE:
        if (ns->frozen_redis || ns->redis_back[0] || ns->redis_back[1] || ns->redis_back[2]) {
            SAY(t0, "skipped: %s (a Redis server is frozen or down)", what);
            ns->skipped[k]++;
            return;
        }
        if (k == N_MASTER_KILL) {
            kill_reap(s->redis[m - H_A]);
            s->redis[m - H_A] = 0;
            ns->redis_back[m - H_A] = until;
            SAY(t0, "%s (redis-%s), back on its data in %.1f s", what, host_names[m],
                f->dur_ms / 1000.0);
            ns->applied[k]++;
            return;
        }
        ns->frozen_redis = s->redis[m - H_A];
        kill(ns->frozen_redis, SIGSTOP);
        ns->thaw_redis = until;
        SAY(t0, "%s (redis-%s) for %.1f s", what, host_names[m], f->dur_ms / 1000.0);
        ns->applied[k]++;
        return;
    case N_DB_FREEZE:
        if (ns->thaw_db) {
            SAY(t0, "skipped: %s (it is frozen)", what);
            ns->skipped[k]++;
            return;
        }
        sk_pg_spawn_freeze(&s->pg, 1);
        ns->thaw_db = until;
        SAY(t0, "%s for %.1f s", what, f->dur_ms / 1000.0);
        ns->applied[k]++;
        return;
    }
    ns->cut_host = h;
    ns->heal_at = until;
    SAY(t0, "%s: rules in %s%s%s for %.1f s", what, host_names[h], m >= 0 ? ", master " : "",
        m >= 0 ? host_names[m] : "", f->dur_ms / 1000.0);
    ns->applied[k]++;
}

/* Heals what is due (all: everything, now). */
static void nem_heal(struct site *s, struct nem_state *ns, int all, int64_t t0)
{
    int64_t now = sk_mono_ms();
#define DUE(t) ((t) && (all || now >= (t)))
    if (ns->cut_host >= 0 && (all || now >= ns->heal_at)) {
        sk_th_netlab_heal(&s->lab, ns->cut_host);
        SAY(t0, "healed: %s", host_names[ns->cut_host]);
        ns->cut_host = -1;
    }
    for (int v = 0; v < 2; v++)
        if (DUE(ns->serve_back[v])) {
            start_serve_on(s, v);
            ns->serve_back[v] = 0;
            SAY(t0, "serve-%s started again", host_names[H_V1 + v]);
        }
    for (int i = 0; i < 3; i++)
        if (DUE(ns->redis_back[i])) {
            /* as a config Sentinel rewrote would: the master's replica,
             * unless it is still the master itself */
            int m = master_host(s);
            start_redis_node(s, i, m >= 0 && m != H_A + i ? m : -1);
            ns->redis_back[i] = 0;
            SAY(t0, "redis-%s started again%s%s", host_names[H_A + i],
                m >= 0 && m != H_A + i ? " as a replica of " : " as a master",
                m >= 0 && m != H_A + i ? host_names[m] : "");
        }
    if (DUE(ns->worker_back)) {
        start_worker_on(s);
        ns->worker_back = 0;
        SAY(t0, "the worker started again");
    }
    if (DUE(ns->thaw_worker)) {
        kill(s->worker, SIGCONT);
        ns->thaw_worker = 0;
        SAY(t0, "the worker thawed");
    }
    if (DUE(ns->thaw_redis)) {
        kill(ns->frozen_redis, SIGCONT);
        ns->frozen_redis = 0;
        ns->thaw_redis = 0;
        SAY(t0, "the frozen Redis thawed");
    }
    if (DUE(ns->thaw_db)) {
        sk_pg_spawn_freeze(&s->pg, 0);
        ns->thaw_db = 0;
        SAY(t0, "the database thawed");
    }
#undef DUE
}

static uint64_t env_num(const char *name, uint64_t dflt)
{
    const char *v = getenv(name);
    return v && *v ? strtoull(v, NULL, 10) : dflt;
}

SK_TEST_T(partition_nemesis_a_seeded_mix_of_cuts_kills_and_freezes, 900)
{
    uint64_t seed = env_num("PARTITION_SEED", 0);
    if (!seed) seed = (uint64_t)sk_wall_ms() * 1000003u ^ (uint64_t)getpid() << 32;
    int duration_s = (int)env_num("PARTITION_S", 60);
    CHECK_MSG(duration_s >= 10 && duration_s <= 600, "PARTITION_S=%d: 10..600", duration_s);
    printf("    # PARTITION_SEED=%" PRIu64
           " PARTITION_S=%d (make partitions PARTITION_SEED=%" PRIu64
           " T=nemesis repeats this schedule)\n",
           seed, duration_s, seed);
    static struct sk_th_fault f[NEM_MAX];
    size_t nf = sk_th_fault_plan(seed, duration_s, nem_kinds, N_KINDS, 3000, 6000, f, NEM_MAX);
    static struct site s;
    site_start(&s, 1);
    wait_both_selling(&s, 30000, "the sale before the faults");
    struct nem_state ns = {.cut_host = -1};
    int64_t t0 = sk_mono_ms(), t_start = sk_wall_ms();
    for (size_t i = 0; i < nf;) {
        nem_heal(&s, &ns, 0, t0);
        if (sk_mono_ms() - t0 >= f[i].at_ms)
            nem_apply(&s, &ns, &f[i++], t0);
        else
            sk_th_nap_ms(20);
    }
    while (sk_mono_ms() - t0 < (int64_t)duration_s * 1000) {
        nem_heal(&s, &ns, 0, t0);
        sk_th_nap_ms(20);
    }
    nem_heal(&s, &ns, 1, t0);
    int64_t t_heal = sk_wall_ms();
    printf("    # faults applied (skipped):");
    for (int k = 0, any = 0; k < N_KINDS; k++)
        if (ns.applied[k] || ns.skipped[k])
            printf("%s %s %d (%d)", any++ ? ";" : "", nem_kinds[k].name, ns.applied[k],
                   ns.skipped[k]);
    printf("\n");
    site_finish(&s, "nemesis", t_start, t_heal);
    site_stop(&s);
}
