/* cluster_harness.h - a private Redis Cluster for the tests: 3 masters + 3
 * replicas made by the spawner (tests/support/spawn/cluster_spawn.h: redis-server
 * --cluster-enabled yes on ports picked from 20000-30000, whose bus port
 * +10000 is free too; slots, MEET and CLUSTER REPLICATE sent by it), with a
 * node timeout of 3 s so a failover is quick.
 *
 * Shared like the PostgreSQL cluster: a test file says SK_TH_CLUSTER_USED
 * and the runner starts one cluster before the first of its tests; every
 * node dies with the runner (PR_SET_PDEATHSIG) and is stopped at its exit.
 * Tests that change the topology (failover, slot migration) leave a
 * healthy cluster behind: a client follows the new map. */
#ifndef SK_CLUSTER_HARNESS_H
#define SK_CLUSTER_HARNESS_H
#include <hiredis.h>
#include <sys/types.h>

#define SK_TH_CLUSTER_NODES 6

void sk_th_cluster_use_file(const char *file);
#define SK_TH_CLUSTER_USED                                                                         \
    __attribute__((constructor)) static void sk_th_cluster_used_(void)                             \
    {                                                                                              \
        sk_th_cluster_use_file(__FILE__);                                                          \
    }

/* redis+cluster://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3 of the shared
 * cluster; fails the test when it could not start. */
const char *sk_th_cluster_url(void);
/* Port of node i (0..5). */
int sk_th_cluster_port(int i);

/* One command on the node at port (a fresh connection); NULL on I/O error.
 * Caller frees with freeReplyObject. */
redisReply *sk_th_cluster_cmd(int port, const char *fmt, ...);

/* Port of the master serving slot right now (asked of every node until one
 * answers), or -1. */
int sk_th_cluster_master_of(int slot);
/* Port of the master of slot in the CLUSTER SLOTS answer of the node at
 * port, -1 when it names none. */
int sk_th_cluster_owner_seen_by(int port, int slot);

/* Port of a replica of the master at port (any cluster: it asks that
 * node's CLUSTER REPLICAS), or -1. */
int sk_th_cluster_replica_of(int port);

/* CLUSTER FAILOVER on a replica of the master of slot, then waits (bounded,
 * by polling) until that replica is the master of slot in every node's
 * view. Returns the new master's port; fails the test on a timeout. */
int sk_th_cluster_failover(int slot);

/* Moves slot to another master the way redis-cli --cluster reshard does
 * (SETSLOT IMPORTING/MIGRATING, MIGRATE of every key, SETSLOT NODE on all
 * masters). between(arg) runs after the keys moved and before the slot is
 * handed over (the window in which clients get ASK), may be NULL. Returns
 * the new owner's port; fails the test on an error. */
int sk_th_cluster_migrate_slot(int slot, void (*between)(void *), void *arg);

#endif
