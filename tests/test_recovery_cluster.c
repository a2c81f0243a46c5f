/* test_recovery_cluster.c - a Redis Cluster failover to a lagging replica
 * never oversells (docs/recovery.md): an activity's replica is stopped
 * (SIGSTOP) until it is tens of megabytes of replication stream behind, so
 * kernel buffers cannot hide the lag, then its master is stopped too and
 * the replica continued and promoted (CLUSTER FAILOVER TAKEOVER): the new
 * master has forgotten admissions the order worker already wrote to the
 * database. The sale is fenced, replayed from the database, and resumes;
 * the orders that exist never exceed the stock.
 *
 * The old master is frozen (SIGSTOP) rather than killed: to the cluster and
 * to the clients it is the same dead node, and the writes the replica never
 * received are lost the same way (when it is continued it rejoins as a
 * replica of the promoted node and resynchronises from it). A test process
 * cannot restart a node the runner owns, and a killed node would leave the
 * cluster one replica short for the tests that follow. */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "engine/keys.h"
#include "engine/stock.h"
#include "redis/redis_cluster.h"
#include "redis/redis_conn.h"
#include "store/store.h"
#include "support/cluster_harness.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/sale_env.h"

SK_TH_CLUSTER_USED

/* The nodes this test freezes are the runner's: whatever happens to the
 * test (a failed check, the runner's timeout killing its process group),
 * they must run again, or every cluster test after it fails. A watcher in
 * a session of its own waits for the test to end (its pipe closes) and
 * continues them. */
static void continue_at_exit(pid_t a, pid_t b)
{
    int fd[2];
    CHECK_EQ(pipe(fd), 0);
    pid_t w = fork();
    CHECK(w >= 0);
    if (w == 0) {
        setsid();
        close(fd[1]);
        char c;
        while (read(fd[0], &c, 1) > 0)
            ;
        kill(a, SIGCONT);
        kill(b, SIGCONT);
        _exit(0);
    }
    close(fd[0]); /* fd[1] stays open until this test's process ends */
}

/* A numeric field of INFO <section> of the node at port, -1 when absent. */
static long long info_num(int port, const char *section, const char *field)
{
    return sk_th_info_num(sk_th_cluster_cmd(port, "INFO %s", section), field);
}

/* Port of a replica of the master at port (CLUSTER REPLICAS), -1 none. */
static int replica_of(int port)
{
    redisReply *id = sk_th_cluster_cmd(port, "CLUSTER MYID");
    CHECK(id && id->type == REDIS_REPLY_STRING);
    redisReply *r = sk_th_cluster_cmd(port, "CLUSTER REPLICAS %s", id->str);
    freeReplyObject(id);
    int rp = -1;
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements > 0) {
        const char *colon = strchr(r->element[0]->str, ':');
        if (colon) rp = atoi(colon + 1);
    }
    if (r) freeReplyObject(r);
    return rp;
}

struct lag {
    int master;
    long long from, bytes;
};

static int lagging(void *arg)
{
    struct lag *l = arg;
    return info_num(l->master, "replication", "master_repl_offset") >= l->from + l->bytes;
}

static int healthy_again(void *arg)
{
    int port = *(int *)arg;
    redisReply *r = sk_th_cluster_cmd(port, "INFO replication");
    int ok = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "role:slave") &&
             strstr(r->str, "master_link_status:up");
    if (r) freeReplyObject(r);
    return ok;
}

SK_TEST_T(recovery_cluster_failover_to_a_lagging_replica_is_fenced_replayed_and_never_oversells,
          400)
{
    sk_redis *r;
    char err[256];
    CHECK_MSG(sk_redis_new(&r, sk_th_cluster_url(), 2000, 5000, err, sizeof err) == 0, "%s", err);
    struct sk_th_serve v;
    const char *extra[] = {"--role", "all", "--processes", "2", NULL};
    setenv("LSAN_OPTIONS", "exitcode=0", 1);
    sk_th_serve_start(&v, sk_th_cluster_url(), extra);
    sale_wait_ready(v.port);
    const int64_t stock = 200000, limit = 5;
    uint64_t aid = sale_activity(v.port, 0, stock, limit, 1);
    sk_store *st;
    CHECK_MSG(sk_store_open(&st, v.db, err, sizeof err) == 0, "%s", err);
    struct sk_keys k;
    sk_keys_for(&k, aid);
    int slot = sk_cluster_key_slot(k.meta, strlen(k.meta));
    int master = sk_th_cluster_master_of(slot), replica = replica_of(master);
    CHECK(master > 0 && replica > 0);
    pid_t mpid = (pid_t)info_num(master, "server", "process_id");
    pid_t rpid = (pid_t)info_num(replica, "server", "process_id");
    CHECK(mpid > 0 && rpid > 0);
    continue_at_exit(mpid, rpid);
    sale_log_on_failure(v.log, v.port);

    static struct sale s;
    sale_start(&s, v.port, aid, 100000, limit, SALE_THREADS);
    sale_log_sale(&s);
    struct sale_db_want want = {st, aid, 5000};
    sale_wait(sale_db_has, &want, 60000, "5000 persisted orders");
    /* the replica falls behind: tens of MB of replication stream */
    struct lag l = {master, info_num(master, "replication", "master_repl_offset"), 24 << 20};
    CHECK_EQ(kill(rpid, SIGSTOP), 0);
    sale_wait(lagging, &l, 120000, "the replica 24 MB behind");
    want.n = sale_db_orders(st, aid) + 20000;
    sale_wait(sale_db_has, &want, 120000, "20000 more persisted orders");
    /* the master dies (frozen), the replica is continued and promoted */
    CHECK_EQ(kill(mpid, SIGSTOP), 0);
    CHECK_EQ(kill(rpid, SIGCONT), 0);
    redisReply *rep = sk_th_cluster_cmd(replica, "CLUSTER FAILOVER TAKEOVER");
    CHECK_MSG(rep && rep->type == REDIS_REPLY_STATUS, "TAKEOVER: %s",
              rep && rep->str ? rep->str : "no reply");
    freeReplyObject(rep);
    /* every live node knows the new owner (the frozen one cannot answer) */
    int64_t by = sk_mono_ms() + 30000;
    for (int i = 0; i < SK_TH_CLUSTER_NODES; i++) {
        int port = sk_th_cluster_port(i);
        while (port != master && sk_th_cluster_owner_seen_by(port, slot) != replica) {
            CHECK_MSG(sk_mono_ms() < by, "node %d does not see %d own slot %d", port, replica,
                      slot);
            sk_th_nap_ms(10);
        }
    }
    long at = atomic_load(&s.ok);
    struct sale_ok_want arg = {&s, at};
    sale_wait(sale_ok_above, &arg, 60000, "a 200 after the failover");
    /* sell on for a while after the recovery, then stop and check */
    arg.n = at + 5000;
    sale_wait(sale_ok_above, &arg, 60000, "5000 more 200s after the failover");
    sale_stop(&s);
    sale_print(&s, "failover to a lagging replica");
    sale_wait_drained(r, aid, 60000);
    int64_t sold = sale_check_invariants(st, r, sk_th_cluster_url(), v.db, aid, stock, limit);
    long long held = sale_replayed_held(st, aid);
    struct sk_stock_state sst;
    CHECK_EQ(sk_stock_state(r, aid, &sst), 0);
    printf("    replica %lld MB behind; the promoted master had forgotten persisted orders: %lld "
           "put back from the database; %lld acknowledged admissions lost; %lld units sold of "
           "%lld\n",
           l.bytes >> 20, held, (long long)sst.lost, (long long)sold, (long long)stock);
    /* a real rollback: the database held orders the promoted master lacked */
    CHECK(held > 0);
    CHECK(atomic_load(&s.recovering) > 0);
    CHECK_EQ(sk_th_serve_stop(&v, SIGTERM), 0);
    /* the old master comes back as a replica of the promoted one */
    CHECK_EQ(kill(mpid, SIGCONT), 0);
    sale_wait(healthy_again, &master, 60000, "the old master back as a replica");
    sk_store_close(st);
    sk_redis_free(r);
    sale_log_passed();
}
