/* sentinel_spawn.h - a private Redis Sentinel setup for the binary's own use
 * (benchmarks) and for the test harness: one master and R replicas
 * (redis_spawn.h: free loopback ports, a directory each, unix sockets), and
 * three Sentinels (`redis-server sentinel.conf --sentinel`) monitoring the
 * master under one name with quorum 2, on loopback ports, in one fresh
 * temporary directory. Every process dies with the thread that started it
 * (PR_SET_PDEATHSIG), even on a crash of this process.
 *
 * The process handling is spawn.h's, shared with the other spawners. */
#ifndef SK_SENTINEL_SPAWN_H
#define SK_SENTINEL_SPAWN_H
#include <stddef.h>
#include <sys/types.h>

#include "spawn/redis_spawn.h"

#define SK_SENTINEL_SPAWN_MAX_NODES 5 /* the master and up to 4 replicas */
#define SK_SENTINEL_SPAWN_SENTINELS 3

struct sk_sentinel_spawn {
    int nodes;                                               /* node 0 starts as the master */
    struct sk_redis_spawn node[SK_SENTINEL_SPAWN_MAX_NODES]; /* its pid is 0 when not running */
    pid_t spid[SK_SENTINEL_SPAWN_SENTINELS];                 /* the Sentinels, 0 when not running */
    int sport[SK_SENTINEL_SPAWN_SENTINELS];
    char dir[256];    /* the Sentinels' directory: dir/s<i>/sentinel.conf, sentinel.log */
    char name[64];    /* the master's name: "seckill" */
    char url[512];    /* "redis+sentinel://127.0.0.1:S1,127.0.0.1:S2,127.0.0.1:S3/seckill" */
    char errstr[256]; /* detail of the last failure */
};

/* What sk_sentinel_spawn_start builds. */
struct sk_sentinel_spawn_opts {
    int replicas;                  /* 1..SK_SENTINEL_SPAWN_MAX_NODES - 1 */
    int down_after_ms;             /* sentinel down-after-milliseconds; 0: 1000 */
    int failover_timeout_ms;       /* sentinel failover-timeout; 0: 10000 */
    const char *const *extra_args; /* every data node's extra "--name", "value" strings, or NULL */
};

/* Starts the master (node 0) and the replicas (`--replicaof 127.0.0.1 P`,
 * `--repl-diskless-sync-delay 0`) and waits (at most 30 s) until every
 * replica's link is up and WAIT on the master counts them all, then the
 * Sentinels (`sentinel monitor seckill
 * 127.0.0.1 P 2`, down-after, failover-timeout) and waits until each of
 * them names the master, knows the other two and every replica.
 *
 * Ownership: s is the caller's; on success it owns the running servers and
 * their directories until sk_sentinel_spawn_stop(s). On failure nothing is
 * left behind, s->errstr says why. Call it from a thread that outlives the
 * servers (the main thread). Returns 0, SK_EIO (cannot start, exited, not
 * ready in time) or SK_EINVAL (bad counts, too many extra arguments). */
int sk_sentinel_spawn_start(struct sk_sentinel_spawn *s, const struct sk_sentinel_spawn_opts *o);

/* The node the Sentinels name master now: asks each Sentinel in turn; the
 * index of the node on that port, or -1 when none answers or the port is
 * not one of ours. */
int sk_sentinel_spawn_master(struct sk_sentinel_spawn *s);

/* Waits (at most ms) until every Sentinel names a master other than node
 * old, and that node says ROLE master. Returns its index, or -1 on a
 * timeout (s->errstr). */
int sk_sentinel_spawn_wait_failover(struct sk_sentinel_spawn *s, int old, int ms);

/* Waits (at most ms) until node i is a replica of the current master with
 * its link up. 0, or SK_ETIMEDOUT (s->errstr). */
int sk_sentinel_spawn_wait_replica(struct sk_sentinel_spawn *s, int i, int ms);

/* Starts Sentinel i again (its pid 0: it was killed and reaped) on its
 * port from whatever its sentinel.conf holds now (a test may have put an
 * old copy there: a Sentinel back with a stale view). Does not wait for it
 * to know the others. 0, SK_EINVAL (i runs or is no Sentinel) or SK_EIO
 * (s->errstr). */
int sk_sentinel_spawn_restart_sentinel(struct sk_sentinel_spawn *s, int i);

/* Every node, then the Sentinels: SIGTERM, a bounded wait, SIGKILL; the
 * directories are removed. Safe on a stopped or zeroed s. Returns 0, or
 * SK_EIO when a directory could not be removed (s->errstr). */
int sk_sentinel_spawn_stop(struct sk_sentinel_spawn *s);

#endif
