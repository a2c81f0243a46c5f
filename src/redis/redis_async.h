/* redis_async.h - a pipelined, non-blocking Redis client on h2o's event loop.
 *
 * h2o's evloop owns the socket (h2o_socket_connect/read/write), hiredis's
 * reader parses replies and its formatter encodes commands: no second
 * event system and no fd shared by two owners. One connection per event-loop
 * process; every command is pipelined on it, answers come back in order.
 *
 * Life of a connection: DOWN -> CONNECTING -> HANDSHAKE (AUTH, SELECT,
 * ROLE for a Sentinel's master: handshake.h, FUNCTION LOAD of the script library, or
 * SCRIPT LOAD of every embedded script when the server has no Functions)
 * -> READY. Commands are taken only when READY; anything in flight when the
 * connection is lost or a reply is late (timeout) is failed with a NULL
 * reply, and sk_aredis_tick reconnects with exponential backoff. A cluster
 * client is a front over one such client per master, a Sentinel client a
 * front over one for the master it was told of (see sk_aredis_new). */
#ifndef SK_REDIS_ASYNC_H
#define SK_REDIS_ASYNC_H
#include <stddef.h>
#include <stdint.h>

#include <h2o.h>
#include <hiredis.h>

#include "redis/fanout.h" /* sk_fanout: awaiting several answers together */
#include "redis/redis_settings.h"
#include "scripts_gen.h"

typedef struct sk_aredis sk_aredis;

/* Options of a client; zero fields take the defaults. */
struct sk_aredis_opts {
    int timeout_ms;         /* reply timeout (default 1000) */
    int connect_timeout_ms; /* a connect and its handshake (default timeout_ms) */
    int sync_replicas;      /* > 0: answers of sk_aredis_eval_wait wait for WAIT sync_replicas */
    int sync_timeout_ms;    /* WAIT's timeout in ms (default 100) */
    int no_functions;       /* 1: EVALSHA only, no FUNCTION LOAD / FCALL */
    /* a cluster client: a command whose slot's master is not ready waits
     * for it (as after TRYAGAIN: bounded) instead of being refused */
    int patient;
    /* a redis:// client for a server as it is (a replica, a Sentinel, one
     * that wants a password): AUTH and SELECT of the URL only, no scripts
     * loaded, and ready once it answered PING, whatever the answer */
    int bare;
};

/* Reply callback. rep is NULL when no answer will come (not connected,
 * connection lost, timed out): a command that failed this way may or may
 * not have run (sk_aredis_failed says why). rep belongs to the client and
 * is freed after the callback returns, unless the callback takes it
 * (sk_aredis_take). A callback may issue new commands but must not free
 * the client. */
typedef void (*sk_aredis_cb)(void *data, redisReply *rep);

/* Inside a callback: moves the reply out of the client's hands into a new
 * one the caller owns (freeReplyObject), without copying its contents;
 * what the client frees after the callback is an empty shell. NULL when
 * rep is NULL or out of memory (rep is then left as it was). */
redisReply *sk_aredis_take(redisReply *rep);
/* Inside a callback given NULL: why no answer comes, SK_ETIMEDOUT (the
 * reply, or the connect, timed out) or SK_EIO, and the words (*why,
 * static while the callback runs). */
int sk_aredis_failed(const sk_aredis *ar, const char **why);

/* Allocates a client for url on loop and starts connecting: a numeric
 * address at once, a host name after a resolver thread answered (on the
 * loop, never blocking it; resolved once, a failure retried with the
 * reconnect backoff and said by sk_aredis_errstr). redis+unix:// connects to the socket.
 * redis+sentinel://sentinels/NAME gives a Sentinel client: it asks a
 * Sentinel for the master (SENTINEL get-master-addr-by-name, on the loop,
 * never blocking), connects to it and checks ROLE, listens for
 * +switch-master, and asks again when the master's connection is lost or a
 * command meets READONLY; commands in flight on a master it leaves fail
 * (NULL), and while no master is ready commands are refused (SK_EIO).
 * redis+cluster://seeds gives a cluster client
 * with the same contract: one connection per master, commands routed by the
 * slot of their first key, MOVED/ASK/TRYAGAIN followed with the same
 * callback (and counted on /metrics, metrics.h), the slot map read with CLUSTER SLOTS on the
 * loop like any command (through a seed's client at start, a ready master's
 * after a topology change; never blocking), and a slot whose master is not
 * ready refused alone (SK_EIO) while the others are served
 * (docs/cluster.md). Caller frees with sk_aredis_free.
 * Returns 0, SK_EINVAL (bad URL or socket path, reason in err) or SK_ENOMEM. */
int sk_aredis_new(sk_aredis **out, h2o_loop_t *loop, const char *url, int timeout_ms, char *err,
                  size_t cap);
/* The same with options (o may be NULL: the defaults). With
 * o->sync_replicas > 0 every reply timeout also allows for the WAITs ahead
 * of the command (2 x sync_timeout_ms). */
int sk_aredis_new_opts(sk_aredis **out, h2o_loop_t *loop, const char *url,
                       const struct sk_aredis_opts *o, char *err, size_t cap);
/* Closes the connection and fails every pending command (callbacks run). */
void sk_aredis_free(sk_aredis *ar);

/* 1 when commands can be sent: one connection ready (a cluster client: its
 * map loaded and one master ready; sk_aredis_unserved says which slots
 * are refused meanwhile). */
int sk_aredis_ready(const sk_aredis *ar);
/* A cluster client: how many of the 16384 slots are refused now (no master
 * in the map, or its master's connection not ready), and when buf is given
 * which, with why, e.g. "0-5460 (127.0.0.1:7000: reply timed out)" (cap
 * bytes, cut when longer). Any other client: 0. */
int sk_aredis_unserved(const sk_aredis *ar, char *buf, size_t cap);
/* 1 when the client is not ready and nothing under way can make it so
 * before a reconnect backoff ends: its connect failed (every seed's, for
 * a cluster; every Sentinel is unreachable, for a Sentinel client). A
 * caller that waits for readiness (the blocking facade) stops there. */
int sk_aredis_stalled(const sk_aredis *ar);
/* Commands sent and not yet answered. */
size_t sk_aredis_pending(const sk_aredis *ar);
/* Why the client is not ready (static while the state lasts). */
const char *sk_aredis_errstr(const sk_aredis *ar);
/* Round trip of the reply being delivered, in microseconds (valid inside a
 * callback). */
int64_t sk_aredis_rtt_us(const sk_aredis *ar);

/* Queues a command; bytes are copied, so argv may be freed on return.
 * Returns 0 (cb will run exactly once) or SK_EIO when not ready (cb will
 * not run). Queued bytes go out at the next sk_aredis_flush. */
int sk_aredis_command(sk_aredis *ar, sk_aredis_cb cb, void *data, int argc, const char *const *argv,
                      const size_t *lens);

/* EVALSHA of an embedded script; on a NOSCRIPT answer the client resends
 * it as EVAL with the text (a NOSCRIPT means it never ran) and the callback
 * sees only the final answer. Same returns as sk_aredis_command. */
int sk_aredis_eval(sk_aredis *ar, enum sk_script_id id, int nkeys, const char *const *keys,
                   int nargs, const char *const *args, const size_t *arglens, sk_aredis_cb cb,
                   void *data);

/* sk_aredis_eval for a write that must reach replicas before it is
 * answered: with sync_replicas > 0 the client sends `WAIT sync_replicas
 * sync_timeout_ms` on the same connection after the commands of the pass
 * (one WAIT in flight per connection: commands sent while one waits are
 * covered by the next), and holds each answer until that WAIT answers.
 * Inside the callback sk_aredis_acked() says how many replicas
 * acknowledged every write before it (WAIT is not consensus: see
 * docs/failover.md). Without sync_replicas it is sk_aredis_eval. */
int sk_aredis_eval_wait(sk_aredis *ar, enum sk_script_id id, int nkeys, const char *const *keys,
                        int nargs, const char *const *args, const size_t *arglens, sk_aredis_cb cb,
                        void *data);
/* Valid inside a callback: the replicas that acknowledged (WAIT's answer,
 * 0 when WAIT failed), or -1 when no WAIT ran for this answer. */
int sk_aredis_acked(const sk_aredis *ar);
/* 1 when scripts go as FCALL (the server, or every ready master, took the
 * library). */
int sk_aredis_uses_functions(const sk_aredis *ar);

/* Hands everything queued to the socket: call once at the end of each
 * event-loop pass, so commands of one pass leave in one write. */
void sk_aredis_flush(sk_aredis *ar);

/* Housekeeping, call every loop pass: fails a connection whose oldest
 * command waited longer than the timeout, and reconnects when due. */
void sk_aredis_tick(sk_aredis *ar);

/* Connections made so far (a reconnect counts). */
unsigned sk_aredis_connects(const sk_aredis *ar);

/* The settings a sale depends on (redis_settings.h), as each master said
 * them: read by the handshake of every (re)connection, failover and
 * Sentinel switch included, and again every SK_RSET_REREAD_MS while
 * connected (one INFO memory per master, off the purchase path), judged
 * when read. A change of verdict is logged once per master.
 * sk_aredis_unsafe: the finding that refuses sales on the master serving
 * key (a cluster: the master of its slot; key NULL: any master of the
 * client), or NULL: a read of the client's memory, no I/O. */
const struct sk_rset_finding *sk_aredis_unsafe(const sk_aredis *ar, const char *key);

/* One master as the client knows it, for sk_aredis_each_master. */
struct sk_aredis_master {
    char addr[80]; /* "host:port" (a unix socket: its path) */
    int ready;
    const struct sk_rsettings *settings;
    const struct sk_rset_verdict *verdict;
};
/* fn for every master the client has a connection for (a single node, a
 * Sentinel's master, each Cluster master), ready or not. */
void sk_aredis_each_master(const sk_aredis *ar,
                           void (*fn)(void *data, const struct sk_aredis_master *m), void *data);

/* Redis Cluster answers met by the async clients of this process: MOVED,
 * ASK, and the wait-and-retry ones, TRYAGAIN and CLUSTERDOWN, followed or
 * not. Process-wide and atomic (any thread may read). */
enum sk_aredis_redirect {
    SK_AREDIS_MOVED,
    SK_AREDIS_ASK,
    SK_AREDIS_TRYAGAIN,
    SK_AREDIS_CLUSTERDOWN,
    SK_AREDIS_REDIRECT_COUNT
};
/* Count of one kind; 0 for an out of range kind. */
uint64_t sk_aredis_redirects(enum sk_aredis_redirect kind);
/* 1 once a cluster client was made in this process. */
int sk_aredis_cluster_used(void);

#endif
