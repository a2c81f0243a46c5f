/* test_pipeline_faults.c - a pipeline whose connection fails is read to the
 * end or dropped as a whole, and no caller can leave replies behind: the
 * blocking client on its own (one node, a cluster), and the order worker's
 * and the rollback guard's multi-command steps with a Redis Cluster master
 * SIGKILLed while the step's commands wait in its socket, unread.
 *
 * How the kill lands inside a step, every time: the worker (a real `seckill
 * worker` process) runs with SECKILL_TEST_PAUSE_AT=<step> and stops itself
 * (SIGSTOP) just before the step's first command; the test freezes the
 * master (SIGSTOP), continues the worker, waits until the worker's bytes
 * sit unread in that master's socket (/proc/net/tcp), and SIGKILLs the
 * master. The pause point only pauses: every reply the worker gets is
 * real. Then the cluster fails over, the killed node comes back as a
 * replica, more orders are bought, and every order bought, before and
 * after, must be in the database (read directly), with nothing left
 * pending, well within the worker's claim-idle time (60 s here), so no
 * order waited for another consumer's claim. */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/codes.h"
#include "core/error.h"
#include "engine/backlog.h"
#include "engine/keys.h"
#include "engine/stock.h"
#include "orders/order_worker.h"
#include "redis/redis_cluster.h"
#include "spawn/redis_spawn.h"
#include "spawn/spawn.h"
#include "store/store.h"
#include "support/backend_env.h"
#include "support/cluster_harness.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/proc_watch.h"
#include "tests/support/spawn/cluster_spawn.h"

#define NODE_TIMEOUT_MS 2000
#define CLAIM_IDLE_MS 60000
#define BUY_EACH 40 /* orders per activity before the fault, and again after it */

#define WAIT_FOR(cond, ms, ...)                                                                    \
    do {                                                                                           \
        int64_t by_ = sk_mono_ms() + (ms);                                                         \
        while (!(cond)) {                                                                          \
            CHECK_MSG(sk_mono_ms() < by_, __VA_ARGS__);                                            \
            sk_th_nap_ms(5);                                                                       \
        }                                                                                          \
    } while (0)

/* ---- the client alone ------------------------------------------------------ */

static redisReply *echo_cmd(sk_redis *r, const char *word)
{
    redisReply *rep;
    CHECK_MSG(sk_redis_cmd(r, &rep, "ECHO %s", word) == 0, "ECHO: %s", r->errstr);
    return rep;
}

static void append_echo(sk_redis *r, const char *word)
{
    const char *a[] = {"ECHO", word};
    CHECK_MSG(sk_redis_append(r, 2, a, NULL) == 0, "append: %s", r->errstr);
}

static void read_is(sk_redis *r, const char *want)
{
    redisReply *rep;
    CHECK_MSG(sk_redis_read(r, &rep) == 0, "read: %s", r->errstr);
    CHECK_MSG(rep->type == REDIS_REPLY_STRING && !strcmp(rep->str, want), "read %s, expected %s",
              rep->type == REDIS_REPLY_STRING ? rep->str : "(not a string)", want);
    freeReplyObject(rep);
}

/* A caller that stops reading, on one node or a cluster: whatever comes
 * next (a command, a new pipeline) reads its own replies. */
static void left_replies_are_dropped(sk_redis *r)
{
    append_echo(r, "a");
    append_echo(r, "b");
    append_echo(r, "c");
    read_is(r, "a");
    uint64_t dropped = r->pipe_dropped;
    redisReply *rep = echo_cmd(r, "z"); /* not "b" */
    CHECK_STR(rep->str, "z");
    freeReplyObject(rep);
    CHECK_EQ(r->pipe_dropped - dropped, 2);
    /* a new pipeline after a read of the last one: its own replies */
    append_echo(r, "1");
    append_echo(r, "2");
    read_is(r, "1");
    append_echo(r, "3");
    read_is(r, "3");
    /* a read with nothing owed fails at once, without waiting for a reply */
    int64_t t0 = sk_mono_ms();
    CHECK(sk_redis_read(r, &rep) < 0);
    CHECK(sk_mono_ms() - t0 < 500);
    /* a sliding window (the admission benchmark's) keeps its pipeline */
    r->pipe_window = 1;
    append_echo(r, "w1");
    append_echo(r, "w2");
    read_is(r, "w1");
    append_echo(r, "w3");
    read_is(r, "w2");
    read_is(r, "w3");
    r->pipe_window = 0;
}

SK_TEST(pipeline_client_drops_replies_a_caller_left_on_one_node)
{
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 1000, 1000);
    left_replies_are_dropped(r);
    sk_redis_free(r);
}

/* The server freezes with a pipeline in flight: the read that times out
 * ends it; the replies behind it fail at once (never read later), and the
 * next command, on a new connection, reads its own reply. */
SK_TEST(pipeline_client_a_failed_read_fails_the_rest_of_the_pipeline_at_once)
{
    struct sk_th_redis s;
    sk_th_redis_start(&s, NULL);
    sk_redis *r = sk_th_redis_new(s.url, 1000, 300);
    redisReply *rep = echo_cmd(r, "up");
    freeReplyObject(rep);
    append_echo(r, "x");
    append_echo(r, "y");
    append_echo(r, "z");
    kill(s.pid, SIGSTOP);
    CHECK(sk_redis_read(r, &rep) == SK_ETIMEDOUT);
    int64_t t0 = sk_mono_ms();
    CHECK(sk_redis_read(r, &rep) < 0);
    CHECK(sk_redis_read(r, &rep) < 0);
    CHECK(sk_mono_ms() - t0 < 100); /* no I/O: the pipeline is gone */
    kill(s.pid, SIGCONT);
    rep = echo_cmd(r, "after");
    CHECK_STR(rep->str, "after");
    freeReplyObject(rep);
    left_replies_are_dropped(r);
    sk_redis_free(r);
    sk_th_redis_stop(&s, 1);
}

/* The same on a cluster, with keys on different masters: one master
 * freezes mid-pipeline; its reply fails, so do the ones behind it, and
 * the next command gets its own reply. */
SK_TEST(pipeline_cluster_client_a_frozen_master_ends_the_pipeline_and_nothing_is_left)
{
    struct sk_cluster_spawn cl;
    struct sk_cluster_spawn_opts o = {.masters = 3, .replicas = 0, .node_timeout_ms = 5000};
    CHECK_MSG(sk_cluster_spawn_start_opts(&cl, &o) == 0, "cluster: %s", cl.errstr);
    sk_redis *r = sk_th_redis_new(cl.url, 1000, 300);
    left_replies_are_dropped(r);
    /* two keys on two masters */
    char k1[32] = "", k2[32] = "";
    int n1 = -1, n2 = -1;
    for (int i = 0; i < 1000 && n2 < 0; i++) {
        char k[32];
        snprintf(k, sizeof k, "pf:%d", i);
        int owner =
            sk_cluster_map_owner(sk_redis_cluster_map(r), sk_cluster_key_slot(k, strlen(k)));
        if (n1 < 0) {
            snprintf(k1, sizeof k1, "%s", k);
            n1 = owner;
        } else if (owner != n1) {
            snprintf(k2, sizeof k2, "%s", k);
            n2 = owner;
        }
    }
    CHECK(n2 >= 0);
    const struct sk_cluster_map *m = sk_redis_cluster_map(r);
    int port2 = m->nodes[n2].port, node2 = -1;
    for (int i = 0; i < cl.nodes; i++)
        if (cl.port[i] == port2) node2 = i;
    CHECK(node2 >= 0);
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(r, &rep, "SET %s one", k1), 0);
    freeReplyObject(rep);
    CHECK_EQ(sk_redis_cmd(r, &rep, "SET %s two", k2), 0);
    freeReplyObject(rep);
    const char *g1[] = {"GET", k1}, *g2[] = {"GET", k2};
    CHECK_EQ(sk_redis_append(r, 2, g2, NULL), 0);
    CHECK_EQ(sk_redis_append(r, 2, g1, NULL), 0);
    CHECK_EQ(sk_redis_append(r, 2, g1, NULL), 0);
    kill(cl.pid[node2], SIGSTOP);
    CHECK(sk_redis_read(r, &rep) < 0); /* k2's master does not answer */
    int64_t t0 = sk_mono_ms();
    CHECK(sk_redis_read(r, &rep) < 0); /* k1's replies were there: dropped with the pipeline */
    CHECK(sk_redis_read(r, &rep) < 0);
    CHECK(sk_mono_ms() - t0 < 100);
    kill(cl.pid[node2], SIGCONT);
    CHECK_EQ(sk_redis_cmd(r, &rep, "GET %s", k1), 0);
    CHECK_STR(rep->str, "one");
    freeReplyObject(rep);
    WAIT_FOR(sk_redis_cmd(r, &rep, "GET %s", k2) == 0, 5000, "GET %s: %s", k2, r->errstr);
    CHECK_STR(rep->str, "two");
    freeReplyObject(rep);
    sk_redis_free(r);
    sk_cluster_spawn_stop(&cl);
}

/* XREADGROUP over two streams of two slots that one master owns: a node
 * refuses two slots in one command (CROSSSLOT), so the client sends one
 * call per slot; with BLOCK an idle read waits once, not once per call.
 * (Before, it sent them as one command: every read of the worker failed,
 * and those orders were never persisted.) */
SK_TEST(pipeline_cluster_client_splits_a_read_of_two_slots_on_one_master)
{
    struct sk_cluster_spawn cl;
    struct sk_cluster_spawn_opts o = {.masters = 3, .replicas = 0, .node_timeout_ms = 5000};
    CHECK_MSG(sk_cluster_spawn_start_opts(&cl, &o) == 0, "cluster: %s", cl.errstr);
    sk_redis *r = sk_th_redis_new(cl.url, 1000, 2000);
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(r, &rep, "PING"), 0);
    freeReplyObject(rep);
    char s1[32] = "", s2[32] = "";
    int owner = -1, slot1 = -1;
    for (int i = 0; i < 10000 && !s2[0]; i++) {
        char k[32];
        snprintf(k, sizeof k, "{pf%d}:orders", i);
        int slot = sk_cluster_key_slot(k, strlen(k));
        int n = sk_cluster_map_owner(sk_redis_cluster_map(r), slot);
        if (!s1[0]) {
            snprintf(s1, sizeof s1, "%s", k);
            owner = n;
            slot1 = slot;
        } else if (n == owner && slot != slot1) {
            snprintf(s2, sizeof s2, "%s", k);
        }
    }
    CHECK(s2[0]);
    const char *streams[] = {s1, s2};
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(sk_redis_cmd(r, &rep, "XADD %s * a %d", streams[i], i), 0);
        freeReplyObject(rep);
        CHECK_EQ(sk_redis_cmd(r, &rep, "XGROUP CREATE %s g 0", streams[i]), 0);
        freeReplyObject(rep);
    }
    const char *two[] = {"XREADGROUP", "GROUP", "g", "c", "BLOCK", "300",
                         "STREAMS",    s1,      s2,  ">", ">"};
    CHECK_EQ(sk_redis_command(r, &rep, 11, two, NULL), 0);
    CHECK_MSG(rep->type == REDIS_REPLY_ARRAY, "XREADGROUP: %s", rep->str ? rep->str : "?");
    CHECK_EQ(rep->elements, 2);
    freeReplyObject(rep);
    int64_t t0 = sk_mono_ms();
    CHECK_EQ(sk_redis_command(r, &rep, 11, two, NULL), 0);
    CHECK_EQ(rep->type, REDIS_REPLY_NIL);
    freeReplyObject(rep);
    CHECK(sk_mono_ms() - t0 < 550); /* one BLOCK of 300 ms, not two */
    sk_redis_free(r);
    sk_cluster_spawn_stop(&cl);
}

/* ---- the worker's steps under a master kill --------------------------------- */

struct pf_run {
    struct sk_cluster_spawn cl;
    struct sk_th_env e;
    uint64_t aid[2]; /* aid[0] lives on the master that is killed, aid[1] elsewhere */
    int victim;      /* node index of aid[0]'s master */
    struct sk_th_bought bought[2][2 * BUY_EACH];
    size_t nb[2];
    pid_t worker;
    char log[400];
};

/* Node index of the master of aid's slot in node `seen_by`'s view, or -1. */
static int master_node(const struct pf_run *u, uint64_t aid, int seen_by)
{
    char tag[32];
    int tl = snprintf(tag, sizeof tag, "a%" PRIu64, aid);
    int port =
        sk_th_cluster_owner_seen_by(u->cl.port[seen_by], sk_cluster_key_slot(tag, (size_t)tl));
    for (int i = 0; i < u->cl.nodes; i++)
        if (u->cl.port[i] == port) return i;
    return -1;
}

/* A master other than the victim serves aid[0] in the view of every node alive. */
static int failed_over(const struct pf_run *u)
{
    int agreed = -1;
    for (int i = 0; i < u->cl.nodes; i++) {
        if (u->cl.pid[i] <= 0) continue;
        int o = master_node(u, u->aid[0], i);
        if (o < 0 || o == u->victim || (agreed >= 0 && o != agreed)) return 0;
        agreed = o;
    }
    return agreed >= 0;
}

static long long port_int(int port, const char *fmt, const char *key)
{
    redisReply *r = sk_th_cluster_cmd(port, fmt, key);
    long long v = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (r) freeReplyObject(r);
    return v;
}

/* A field of INFO replication on the node at port, -1 when absent. */
static long long repl_field(int port, const char *field)
{
    redisReply *r = sk_th_cluster_cmd(port, "INFO replication");
    long long v = -1;
    const char *p = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, field) : NULL;
    if (p && p[strlen(field)] == ':') v = strtoll(p + strlen(field) + 1, NULL, 10);
    if (r) freeReplyObject(r);
    return v;
}

/* The replica at rport has applied everything the master at mport wrote. */
static int caught_up(int mport, int rport)
{
    long long m = repl_field(mport, "master_repl_offset");
    return m >= 0 && repl_field(rport, "slave_repl_offset") >= m;
}

static int link_up(int port)
{
    redisReply *r = sk_th_cluster_cmd(port, "INFO replication");
    int up = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "master_link_status:up");
    if (r) freeReplyObject(r);
    return up;
}

static void buy(struct pf_run *u, int which, uint64_t first)
{
    struct sk_th_bought *out = &u->bought[which][u->nb[which]];
    size_t got = sk_th_env_buy_users(&u->e, u->aid[which], first, BUY_EACH, 1, 10, out);
    CHECK_EQ(got, BUY_EACH);
    u->nb[which] += got;
}

/* The cluster, a fresh SQLite store, two activities on two masters, and
 * BUY_EACH orders in each, on the replicas too. */
static void pf_setup(struct pf_run *u)
{
    memset(u, 0, sizeof *u);
    struct sk_cluster_spawn_opts o = {
        .masters = 3, .replicas = 1, .node_timeout_ms = NODE_TIMEOUT_MS};
    CHECK_MSG(sk_cluster_spawn_start_opts(&u->cl, &o) == 0, "cluster: %s", u->cl.errstr);
    sk_th_env_init(&u->e, 0, "pf.db", u->cl.url);
    u->aid[0] = sk_th_env_activity(&u->e, 1000, 1, 1, 3600);
    u->victim = master_node(u, u->aid[0], 0);
    CHECK(u->victim >= 0);
    for (int tries = 0; tries < 50 && !u->aid[1]; tries++) {
        uint64_t a = sk_th_env_activity(&u->e, 1000, 1, 1, 3600);
        if (master_node(u, a, 0) != u->victim) u->aid[1] = a;
    }
    CHECK_MSG(u->aid[1], "no activity on another master");
    buy(u, 0, 1);
    buy(u, 1, 1);
    /* what was bought is on the replicas before anything breaks: only the
     * pipeline is under test, not asynchronous replication */
    for (int w = 0; w < 2; w++) {
        int mport = u->cl.port[master_node(u, u->aid[w], 0)];
        /* a new cluster's replicas may not be attached yet */
        WAIT_FOR(sk_th_cluster_replica_of(mport) > 0, 10000, "master %d has no replica", mport);
        int rport = sk_th_cluster_replica_of(mport);
        WAIT_FOR(caught_up(mport, rport), 10000, "replica %d has not caught up", rport);
    }
}

static void worker_start(struct pf_run *u, const char *step, int max_deliveries)
{
    snprintf(u->log, sizeof u->log, "%s/worker-%s.log", sk_th_tmpdir(), step);
    char md[16];
    snprintf(md, sizeof md, "%d", max_deliveries);
    const char *bin = sk_th_seckill_hooks_bin(); /* SECKILL_TEST_PAUSE_AT */
    const char *argv[] = {bin,
                          "worker",
                          "--redis",
                          u->cl.url,
                          "--db",
                          u->e.spec,
                          "--consumer",
                          "pf-worker",
                          "--block-ms",
                          "200",
                          "--claim-idle-ms",
                          "60000",
                          "--max-deliveries",
                          md,
                          NULL};
    setenv("SECKILL_TEST_PAUSE_AT", step, 1);
    struct sk_spawn_cmd c = {
        .argv = argv, .out = u->log, .err = u->log, .flags = SK_SPAWN_PDEATHSIG};
    char err[256];
    CHECK_MSG(sk_spawn_exec(&c, &u->worker, err, sizeof err) == 0, "worker: %s", err);
    unsetenv("SECKILL_TEST_PAUSE_AT");
}

/* The victim freezes, the paused worker goes on and sends its step; once
 * the step's bytes sit unread in the victim's socket, the victim dies. */
static void kill_inside_the_step(struct pf_run *u, const char *step)
{
    CHECK_MSG(sk_th_proc_wait_stopped(u->worker, 30000), "the worker never reached %s (log %s)",
              step, u->log);
    pid_t vp = u->cl.pid[u->victim];
    kill(vp, SIGSTOP);
    kill(u->worker, SIGCONT);
    int port = u->cl.port[u->victim];
    WAIT_FOR(sk_th_proc_bytes_queued_at(u->worker, port) > 0, 10000,
             "the worker's %s never reached the frozen master (log %s)", step, u->log);
    kill(vp, SIGKILL);
    waitpid(vp, NULL, 0);
    u->cl.pid[u->victim] = 0;
}

static int db_has_all(struct pf_run *u)
{
    for (int w = 0; w < 2; w++) {
        struct sk_order_counts c;
        if (sk_store_orders_count(u->e.st, u->aid[w], &c) < 0) return 0;
        if (c.orders[SK_ORDER_CREATED] < (int64_t)u->nb[w]) return 0;
    }
    return 1;
}

/* After the fault: the failover, the killed node back as a replica, more
 * orders, and every order in the database within the bound. */
static void heal_buy_and_check(struct pf_run *u, const char *step, int64_t t_fault)
{
    WAIT_FOR(failed_over(u), 30000, "aid %" PRIu64 " not failed over", u->aid[0]);
    CHECK_MSG(sk_cluster_spawn_restart_node(&u->cl, u->victim, NODE_TIMEOUT_MS, NULL) == 0, "%s",
              u->cl.errstr);
    WAIT_FOR(link_up(u->cl.port[u->victim]), 30000, "the killed master did not come back");
    /* the blocking client follows the new map (a refused connect is retried) */
    struct sk_stock_state st;
    WAIT_FOR(sk_stock_state(u->e.r, u->aid[0], &st) == 0, 10000, "state: %s", u->e.r->errstr);
    buy(u, 0, 1000);
    buy(u, 1, 1000);
    WAIT_FOR(db_has_all(u), 40000, "step %s: not every order reached the database (log %s)", step,
             u->log);
    int64_t took = sk_mono_ms() - t_fault;
    CHECK_MSG(took < CLAIM_IDLE_MS, "%lld ms: that is a claim, not the worker's own re-read",
              (long long)took);
    /* the database, read directly: every order bought, as bought, no other */
    for (int w = 0; w < 2; w++) {
        for (size_t i = 0; i < u->nb[w]; i++) {
            struct sk_order o;
            const struct sk_th_bought *b = &u->bought[w][i];
            CHECK_MSG(sk_store_order_get(u->e.st, b->oid, &o) == 0, "order %s is not in the DB",
                      b->oid);
            CHECK_EQ(o.user_id, b->uid);
            CHECK_EQ(o.quantity, b->qty);
            CHECK_EQ(o.activity_id, u->aid[w]);
        }
        struct sk_order_counts c;
        CHECK_EQ(sk_store_orders_count(u->e.st, u->aid[w], &c), 0);
        CHECK_EQ(c.orders[SK_ORDER_CREATED] + c.orders[SK_ORDER_PAID] +
                     c.orders[SK_ORDER_CANCELLED],
                 (int64_t)u->nb[w]);
        /* nothing left pending in the group */
        struct sk_keys k;
        sk_keys_for(&k, u->aid[w]);
        int mport = u->cl.port[master_node(u, u->aid[w], 0)];
        redisReply *p;
        WAIT_FOR((p = sk_th_cluster_cmd(mport, "XPENDING %s %s", k.orders, SK_WORKER_GROUP)) &&
                     p->type == REDIS_REPLY_ARRAY && p->element[0]->integer == 0 &&
                     (freeReplyObject(p), 1),
                 10000, "entries left pending in %s", k.orders);
    }
    /* the chain of the stall never started */
    char line[1024];
    FILE *f = fopen(u->log, "r");
    CHECK(f);
    while (fgets(line, sizeof line, f)) {
        CHECK_MSG(!strstr(line, "inside a pipeline"), "%s", line);
        CHECK_MSG(!strstr(line, "unexpected reply"), "%s", line);
    }
    fclose(f);
    /* and reconcile agrees, with a tight bound on what may still wait */
    for (int w = 0; w < 2; w++) {
        char id[24], out[8192];
        snprintf(id, sizeof id, "%" PRIu64, u->aid[w]);
        const char *args[] = {"reconcile",  "--redis", u->cl.url,       "--db", u->e.spec,
                              "--activity", id,        "--stale-after", "20",   NULL};
        int rc = sk_th_run_seckill(out, sizeof out, NULL, args);
        CHECK_MSG(rc == 0, "reconcile exit %d:\n%s", rc, out);
    }
    printf(
        "    # %s: master node %d SIGKILLed with the step in its socket; %zu + %zu orders in the "
        "database %lld ms after the kill\n",
        step, u->victim, u->nb[0], u->nb[1], (long long)took);
}

static void pf_done(struct pf_run *u)
{
    kill(u->worker, SIGCONT);
    kill(u->worker, SIGTERM);
    int st;
    CHECK_EQ(waitpid(u->worker, &st, 0), u->worker);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "worker exit status %d (log %s)", st, u->log);
    sk_th_env_done(&u->e);
    sk_cluster_spawn_stop(&u->cl);
}

static void kill_master_during(const char *step)
{
    struct pf_run *u = calloc(1, sizeof *u);
    CHECK(u);
    pf_setup(u);
    worker_start(u, step, 5);
    kill_inside_the_step(u, step);
    heal_buy_and_check(u, step, sk_mono_ms());
    pf_done(u);
    free(u);
}

SK_TEST_T(pipeline_worker_survives_a_master_kill_during_its_xack, 150)
{
    kill_master_during("xack");
}

SK_TEST_T(pipeline_worker_survives_a_master_kill_during_its_split_xreadgroup, 150)
{
    kill_master_during("xread");
}

SK_TEST_T(pipeline_worker_survives_a_master_kill_during_the_guards_probe, 150)
{
    kill_master_during("probe");
}

SK_TEST_T(pipeline_worker_survives_a_master_kill_during_the_guards_ledger_check, 150)
{
    kill_master_during("ledger");
}

SK_TEST_T(pipeline_worker_survives_a_master_kill_during_its_segment_check, 150)
{
    kill_master_during("segments");
}

/* A poison entry dead-lettered (MULTI: XADD to the DLQ, XACK, EXEC) while
 * its master dies with the transaction in its socket: after the failover it
 * is dead-lettered exactly once, and every order still reaches the DB. */
SK_TEST_T(pipeline_worker_survives_a_master_kill_during_a_dead_letter_transaction, 150)
{
    struct pf_run *u = calloc(1, sizeof *u);
    CHECK(u);
    pf_setup(u);
    struct sk_keys k;
    sk_keys_for(&k, u->aid[0]);
    int mport = u->cl.port[u->victim];
    redisReply *r = sk_th_cluster_cmd(mport, "XADD %s * junk 1", k.orders);
    CHECK(r && r->type == REDIS_REPLY_STRING);
    freeReplyObject(r);
    int rport = sk_th_cluster_replica_of(mport);
    WAIT_FOR(caught_up(mport, rport), 10000, "replica behind");
    worker_start(u, "dead_letter", 1);
    kill_inside_the_step(u, "dead_letter");
    heal_buy_and_check(u, "dead_letter", sk_mono_ms());
    int now = u->cl.port[master_node(u, u->aid[0], 0)];
    WAIT_FOR(port_int(now, "XLEN %s", k.dlq) == 1, 10000, "the poison entry is not dead-lettered");
    CHECK_EQ(port_int(now, "XLEN %s", k.dlq), 1);
    pf_done(u);
    free(u);
}

static int64_t db_orders(struct sk_th_env *e, uint64_t aid)
{
    struct sk_order_counts c;
    if (sk_store_orders_count(e->st, aid, &c) < 0) return -1;
    return c.orders[SK_ORDER_CREATED] + c.orders[SK_ORDER_PAID] + c.orders[SK_ORDER_CANCELLED];
}

/* 1 once the file at path holds both words on one line. */
static int log_has(const char *path, const char *a, const char *b)
{
    FILE *f = fopen(path, "r");
    char line[1024];
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f))
        found = strstr(line, a) && strstr(line, b);
    if (f) fclose(f);
    return found;
}

/* The worker's connection times out with its XREADGROUP unread by a frozen
 * Redis, which then runs it: the entries it handed over are pending on this
 * consumer with the reply lost. The worker reads them again at once, not
 * after the claim-idle time (60 s). */
SK_TEST_T(pipeline_worker_rereads_its_own_pending_entries_after_a_failed_read, 120)
{
    struct sk_th_redis s;
    sk_th_redis_start(&s, NULL);
    struct sk_th_env e;
    sk_th_env_init(&e, 0, "reread.db", s.url);
    uint64_t aid[2] = {sk_th_env_activity(&e, 1000, 1, 1, 3600),
                       sk_th_env_activity(&e, 1000, 1, 1, 3600)};
    static struct sk_th_bought b[2][BUY_EACH];
    char log[400];
    snprintf(log, sizeof log, "%s/worker-reread.log", sk_th_tmpdir());
    const char *bin = sk_th_seckill_hooks_bin(); /* SECKILL_TEST_PAUSE_AT */
    const char *argv[] = {bin,          "worker", "--redis",         s.url,   "--db", e.spec,
                          "--block-ms", "200",    "--claim-idle-ms", "60000", NULL};
    setenv("SECKILL_TEST_PAUSE_AT", "xread", 1);
    struct sk_spawn_cmd c = {.argv = argv, .out = log, .err = log, .flags = SK_SPAWN_PDEATHSIG};
    pid_t wp;
    char err[256];
    CHECK_MSG(sk_spawn_exec(&c, &wp, err, sizeof err) == 0, "worker: %s", err);
    unsetenv("SECKILL_TEST_PAUSE_AT");
    CHECK_MSG(sk_th_proc_wait_stopped(wp, 30000), "the worker never reached its read (log %s)",
              log);
    /* orders arrive while it is paused: its XREADGROUP will take them */
    for (int w = 0; w < 2; w++)
        CHECK_EQ(sk_th_env_buy_users(&e, aid[w], 1, BUY_EACH, 1, 10, b[w]), BUY_EACH);
    kill(s.pid, SIGSTOP);
    kill(wp, SIGCONT);
    WAIT_FOR(sk_th_proc_bytes_queued_at(wp, s.port) > 0, 10000, "no read in flight");
    /* the worker gives up on the reply (block 200 + 2000 ms) and drops its connection */
    WAIT_FOR(log_has(log, "XREADGROUP", "timed out"), 10000, "the worker kept waiting (log %s)",
             log);
    int64_t t_thaw = sk_mono_ms();
    kill(s.pid, SIGCONT);
    sk_redis_disconnect(e.r);
    WAIT_FOR(db_orders(&e, aid[0]) == BUY_EACH && db_orders(&e, aid[1]) == BUY_EACH, 30000,
             "orders still not persisted (log %s)", log);
    int64_t took = sk_mono_ms() - t_thaw;
    CHECK_MSG(took < CLAIM_IDLE_MS / 2, "%lld ms", (long long)took);
    for (int w = 0; w < 2; w++)
        for (size_t i = 0; i < BUY_EACH; i++) {
            struct sk_order o;
            CHECK_MSG(sk_store_order_get(e.st, b[w][i].oid, &o) == 0, "%s missing", b[w][i].oid);
        }
    printf("    # persisted %d orders %lld ms after Redis thawed (claim idle %d ms)\n",
           2 * BUY_EACH, (long long)took, CLAIM_IDLE_MS);
    kill(wp, SIGTERM);
    waitpid(wp, NULL, 0);
    sk_th_env_done(&e);
    sk_th_redis_stop(&s, 1);
}

/* Redis 7.0 does not replicate a group's entries-read counter: on a
 * promoted replica XINFO GROUPS reports a lag of entries the old master
 * had delivered long ago. The backlog (stats, drain checks, /metrics,
 * the worker's warning) counts what lies after the last-delivered id. */
SK_TEST(pipeline_backlog_of_a_promoted_replica_counts_only_what_waits)
{
    struct sk_th_redis m, rp;
    sk_th_redis_start(&m, NULL);
    char mport[16];
    snprintf(mport, sizeof mport, "%d", m.port);
    const char *rargs[] = {"--replicaof", "127.0.0.1", mport, NULL};
    sk_th_redis_start(&rp, rargs);
    struct sk_th_env e;
    sk_th_env_init(&e, 0, "lag.db", m.url);
    uint64_t aid = sk_th_env_activity(&e, 100, 1, 1, 3600);
    static struct sk_th_bought b[20];
    CHECK_EQ(sk_th_env_buy_users(&e, aid, 1, 20, 1, 10, b), 20);
    sk_th_env_persist(&e, "lag-test", -1); /* delivered and acknowledged on the master */
    struct sk_keys k;
    sk_keys_for(&k, aid);
    WAIT_FOR(caught_up(m.port, rp.port), 10000, "replica behind");
    redisReply *r = sk_redis_spawn_cmd(rp.port, 2000, "REPLICAOF NO ONE");
    CHECK(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    sk_redis *pr = sk_th_redis_new(rp.url, 1000, 2000);
    struct sk_stock_state st;
    CHECK_EQ(sk_stock_state(pr, aid, &st), 0);
    CHECK_EQ(st.backlog, 0);
    struct sk_backlog bl;
    CHECK_EQ(sk_backlog_read(pr, k.orders, SK_WORKER_GROUP, &bl), 0);
    CHECK_EQ(bl.entries, 0);
    CHECK_EQ(bl.age_ms, 0);
    /* one more admission on the promoted node: exactly one waits */
    struct sk_admission a;
    CHECK_EQ(sk_th_buy(pr, aid, 99, 1, &a, NULL), 0);
    CHECK_EQ(a.rc, SK_RC_OK);
    CHECK_EQ(sk_stock_state(pr, aid, &st), 0);
    CHECK_EQ(st.backlog, 1);
    CHECK_EQ(sk_backlog_read(pr, k.orders, SK_WORKER_GROUP, &bl), 0);
    CHECK_EQ(bl.entries, 1);
    sk_redis_free(pr);
    sk_th_env_done(&e);
    sk_th_redis_stop(&rp, 1);
    sk_th_redis_stop(&m, 1);
}
