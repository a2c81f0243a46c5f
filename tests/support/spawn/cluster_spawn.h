/* cluster_spawn.h - a private Redis Cluster for the binary's own use
 * (benchmarks) and for the test harness: N masters, each with R replicas,
 * redis-server --cluster-enabled yes on loopback ports picked from
 * 20000-30000 whose cluster bus port (+10000) is free too, one fresh
 * temporary directory, no persistence, slots split evenly with CLUSTER
 * ADDSLOTS, the nodes joined with CLUSTER MEET and the replicas attached
 * with CLUSTER REPLICATE; every node dies with the thread that started it
 * (PR_SET_PDEATHSIG), even on a crash of this process.
 *
 * The process handling is spawn.h's, shared with redis_spawn.c and
 * pg_spawn.c. */
#ifndef SK_CLUSTER_SPAWN_H
#define SK_CLUSTER_SPAWN_H
#include <stddef.h>
#include <sys/types.h>

#define SK_CLUSTER_SPAWN_MAX 16

struct sk_cluster_spawn {
    int n;                           /* masters: nodes 0..n-1 */
    int nodes;                       /* masters and replicas: replicas are n..nodes-1 */
    pid_t pid[SK_CLUSTER_SPAWN_MAX]; /* redis-server of node i, 0 when not running */
    int port[SK_CLUSTER_SPAWN_MAX];  /* 127.0.0.1 port of node i (bus: port + 10000) */
    char dir[256];                   /* working directory; node i in dir/n<i> */
    char url[512];    /* "redis+cluster://127.0.0.1:P0,..." of the masters, for sk_redis_new */
    char errstr[256]; /* detail of the last failure */
};

/* What sk_cluster_spawn_start_opts builds. */
struct sk_cluster_spawn_opts {
    int masters;         /* 1..SK_CLUSTER_SPAWN_MAX */
    int replicas;        /* per master; masters * (1 + replicas) <= SK_CLUSTER_SPAWN_MAX */
    int node_timeout_ms; /* --cluster-node-timeout; 0: 5000 */
    const char *const *extra_args; /* NULL-terminated "--name", "value" strings, or NULL */
};

/* Starts masters * (1 + replicas) nodes: `redis-server --port P --bind
 * 127.0.0.1 --dir D/n<i> --save "" --appendonly no --cluster-enabled yes
 * --cluster-config-file nodes.conf --cluster-node-timeout T
 * --repl-diskless-sync-delay 0 --logfile
 * D/n<i>/redis.log --daemonize no` plus extra_args (copied), gives master i
 * the i-th masters-th of the 16384 slots, every node config epoch i + 1,
 * MEETs them, makes replica j (node masters + j) replicate master
 * j % masters, and waits (at most 30 s) until every node says
 * cluster_state:ok with all nodes known and every slot served, knows every
 * replica, and every replica's link to its master is up (a replica in sync:
 * a manual failover needs one).
 *
 * Ownership: s is the caller's; on success it owns the running nodes and
 * the directory until sk_cluster_spawn_stop(s). On failure nothing is left
 * behind (nodes killed and reaped, directory removed), s->errstr says why.
 * Call it from a thread that outlives the cluster (the main thread).
 * Returns 0, SK_EIO (cannot start, a node exited, or not ready in time) or
 * SK_EINVAL (bad counts, too many extra arguments). */
int sk_cluster_spawn_start_opts(struct sk_cluster_spawn *s, const struct sk_cluster_spawn_opts *o);

/* n masters, no replicas, node timeout 5000 ms: sk_cluster_spawn_start_opts. */
int sk_cluster_spawn_start(struct sk_cluster_spawn *s, int n, const char *const *extra_args);

/* Starts node i again (after the caller ended it: s->pid[i] 0) on its port
 * and directory with the same command line as at the start (node_timeout_ms
 * and extra_args as given there), and waits until it answers PING. With its
 * nodes.conf it rejoins the cluster; a master that was failed over comes
 * back as a replica of its successor (empty: no persistence, it syncs).
 * Ownership as for the start. Returns 0, SK_EIO or SK_EINVAL (s->errstr). */
int sk_cluster_spawn_restart_node(struct sk_cluster_spawn *s, int i, int node_timeout_ms,
                                  const char *const *extra_args);

/* The plain redis:// URL of node i (for per-node INFO), into out. */
void sk_cluster_spawn_node_url(const struct sk_cluster_spawn *s, int i, char *out, size_t cap);

/* SIGTERM to every node at once, wait for each (SIGKILL after 5 s), then
 * remove the directory. Safe on a
 * stopped or zeroed s. Returns 0, or SK_EIO when the directory could not be
 * removed (s->errstr). */
int sk_cluster_spawn_stop(struct sk_cluster_spawn *s);

#endif
