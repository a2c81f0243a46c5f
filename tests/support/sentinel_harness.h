/* sentinel_harness.h - a private Redis Sentinel setup for one test: a
 * master, R replicas and three Sentinels (tests/support/spawn/sentinel_spawn.h) on
 * loopback, started by the test and dying with it (PR_SET_PDEATHSIG), with
 * the moves a failover test makes: kill the master, wait until the
 * Sentinels promote a replica, look at what each node holds.
 *
 * Each test starts its own (a failover changes the topology for good). */
#ifndef SK_SENTINEL_HARNESS_H
#define SK_SENTINEL_HARNESS_H
#include <hiredis.h>

#include "tests/support/spawn/sentinel_spawn.h"

/* Starts a master with `replicas` replicas (each with extra "--name value"
 * arguments, NULL-terminated, may be NULL) and three Sentinels with a
 * down-after of 1 s; fails the test when it cannot. s->url is the
 * redis+sentinel:// URL, s->node[i].url each node's redis:// URL. */
void sk_th_sentinel_start(struct sk_sentinel_spawn *s, int replicas, const char *const *extra);

/* The node the Sentinels name master now; fails the test when none does. */
int sk_th_sentinel_master(struct sk_sentinel_spawn *s);

/* SIGKILL of the master (its port and directory stay); returns its index. */
int sk_th_sentinel_kill_master(struct sk_sentinel_spawn *s);

/* Waits (at most 30 s) until the Sentinels agree on a master other than
 * node old and it says ROLE master; returns its index or fails the test. */
int sk_th_sentinel_await_failover(struct sk_sentinel_spawn *s, int old);

/* Starts node i again after it was killed (its pid 0), on its port and
 * directory (so its AOF, if any, is loaded) with extra as at the start:
 * as a replica of the master the Sentinels name now, or as the master when
 * they still name node i (no failover happened). Fails the test when it
 * cannot. */
void sk_th_sentinel_restart_node(struct sk_sentinel_spawn *s, int i, const char *const *extra);

/* One command on node i over a fresh connection (NULL on an I/O error).
 * Caller frees with freeReplyObject. */
redisReply *sk_th_sentinel_cmd(const struct sk_sentinel_spawn *s, int i, const char *fmt, ...);

/* Stops everything and removes the directories (a failed test's servers
 * die with it anyway). */
void sk_th_sentinel_stop(struct sk_sentinel_spawn *s);

#endif
