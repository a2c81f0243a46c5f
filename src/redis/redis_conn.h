/* redis_conn.h - the blocking Redis client of the CLI, the order worker's
 * threads (worker, sweeper, sampler, reconcile), the tests and the
 * benchmarks: the async client (redis_async.h), the one transport, run on
 * a private event loop until the answer is in. Connecting, the handshake
 * (AUTH, SELECT, ROLE), scripts (FCALL or EVALSHA, a NOSCRIPT sent again as
 * EVAL), Sentinel following, Cluster routing, redirections, MULTI units and
 * reads of several slots, timeouts and reconnect backoff are all the async
 * client's; this file queues, waits and hands the answers over. Not
 * thread-safe: one handle per thread at a time (each owns its loop). */
#ifndef SK_REDIS_CONN_H
#define SK_REDIS_CONN_H
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis.h>

#include "redis/redis_cluster.h"
#include "redis/redis_settings.h"
#include "redis/redis_url.h"

struct sk_aredis;       /* the transport (redis_async.h) */
struct st_h2o_evloop_t; /* its loop */
struct sk_rcall;        /* a command awaiting its answer (redis_conn.c) */

/* How the embedded scripts are called (script.h). */
enum sk_redis_fn {
    SK_FN_AUTO = 0, /* FCALL once the library is loaded, else EVALSHA */
    SK_FN_OFF,      /* EVALSHA only (a server without Functions, or asked so) */
    SK_FN_ON        /* FCALL: the library was loaded on this server */
};

#define SK_REDIS_RSET_MAX 16

typedef struct sk_redis {
    struct sk_aredis *a;          /* NULL until the first command, and after a disconnect */
    struct st_h2o_evloop_t *loop; /* the loop it runs on, this handle's alone */
    int loop_pid; /* the process that made the loop (a fork's child does not reuse it) */
    struct sk_redis_url url;
    int connect_timeout_ms, command_timeout_ms;
    int err;           /* last SK_E* code, 0 after success */
    char errstr[256];  /* detail of the last failure */
    unsigned connects; /* successful (re)connects so far */
    /* enum sk_redis_fn, read at the next connect: the caller may set
     * SK_FN_OFF (no library loaded); after an exchange ON or OFF says how
     * the scripts went */
    int fn;
    /* the caller's, before the first command: a server as it is, whatever
     * it is (a replica, a Sentinel, one that wants a password): no scripts
     * loaded, and any answer to the opening PING will do (redis:// only) */
    int bare;
    /* redis+sentinel://: the master in use, as the Sentinels named it (after
     * an exchange) */
    char sn_host[256];
    int sn_port;
    /* The pipeline (sk_redis_append / sk_redis_read), kept by the client so
     * that no caller can leave replies behind for a later read. */
    struct sk_rcall *head, *tail, *spare;
    unsigned pipe_n;       /* replies owed: appended, not read yet */
    int pipe_read;         /* a reply of this pipeline was read */
    int pipe_broken;       /* a read of it failed: the rest is gone */
    int pipe_window;       /* the caller's: 1 = a sliding window (see sk_redis_append) */
    uint64_t pipe_dropped; /* replies and unsent commands of pipelines left unread */
    int64_t pumped_ms;     /* the loop last ran */
    /* what transports dropped before this one counted */
    unsigned connects_before;
    struct sk_cluster_stats cl_before;
} sk_redis;

/* Parses url and allocates a handle (caller frees with sk_redis_free); does
 * not connect: the first command does. Timeouts <= 0 mean 1000 ms; the
 * command timeout bounds each answer (an XREAD/XREADGROUP BLOCK n waits n
 * ms more). redis+unix:// connects to the socket; a host name is resolved
 * off the loop (core/resolve.h). redis+sentinel:// follows the master the
 * Sentinels name (the rule is redis/sentinels.h's): asked every
 * SK_SENTINELS_POLL_MS while the handle waits for answers, and at once
 * after a READONLY answer (the command, which never ran, is sent once more
 * to the new master). redis+cluster:// routes every command by the slot of
 * its first key: see sk_aredis_new and docs/cluster.md (MOVED and ASK
 * followed, TRYAGAIN and CLUSTERDOWN waited out, a slot whose master is
 * not ready waited for, bounded; SCRIPT, FUNCTION, CONFIG (but CONFIG GET:
 * one ready master) and FLUSH* on every master; a MULTI...EXEC run to one node as a unit; XREAD and
 * XREADGROUP over streams of several slots as one call per slot, merged).
 * Returns 0, SK_EINVAL (bad URL, reason in errbuf when given) or SK_ENOMEM. */
int sk_redis_new(sk_redis **out, const char *url, int connect_timeout_ms, int command_timeout_ms,
                 char *errbuf, size_t errcap);
/* The process's default for the handles it makes from now on: on (the
 * default) loads the Functions library where the server has them; off
 * (serve's --redis-functions off) never loads it, scripts by EVALSHA. */
void sk_redis_functions_default(int on);
void sk_redis_free(sk_redis *r);

/* Connects now (TCP, handshake), dropping any old connection. Returns 0 or
 * SK_EIO/SK_EAUTH with r->errstr set. */
int sk_redis_connect(sk_redis *r);

/* Ensures a connection, reconnecting when the backoff allows, after
 * hearing what came meanwhile (a lost connection, a Sentinel's news): 0 or
 * the connect error; fails fast (SK_EIO) while inside the backoff window
 * of a failed connect. */
int sk_redis_ensure(sk_redis *r);

/* Sends one command and waits for its reply into *out (caller frees with
 * freeReplyObject). Error replies (-ERR ...) are returned as replies, not
 * failures. On an I/O error or timeout the connection is dropped and
 * SK_EIO/SK_ETIMEDOUT returned; the command is never resent, because a
 * purchase that may have run must not run twice. */
int sk_redis_command(sk_redis *r, redisReply **out, int argc, const char **argv,
                     const size_t *lens);
/* printf-style variants (hiredis format). */
int sk_redis_cmd(sk_redis *r, redisReply **out, const char *fmt, ...);
int sk_redis_vcmd(sk_redis *r, redisReply **out, const char *fmt, va_list ap);

/* Pipelining: append any number of commands, then read the replies in
 * order; they leave together at the first read. The client keeps the
 * pipeline whole, whatever the caller does:
 *  - a read when no reply is owed fails at once (SK_ESTATE), without I/O;
 *  - a failed read (I/O error, timeout, a lost cluster node) ends the
 *    pipeline: the replies still owed are dropped when they come, and
 *    every further read fails at once (SK_EIO, r->errstr the first
 *    failure) until the caller starts anew; the commands not answered may
 *    or may not have run;
 *  - starting anew while replies are owed drops them: any command
 *    (sk_redis_command, sk_redis_cmd), or an append after a read of this
 *    pipeline (unless r->pipe_window: a caller keeping a sliding window of
 *    calls in flight continues its pipeline). Before any read nothing was
 *    sent: the connection goes with the commands, which never run; after
 *    one, the replies are dropped as they come. Counted in r->pipe_dropped.
 * So a later command never reads an earlier command's reply. Appends
 * while replies are owed never reconnect (nor leave a Sentinel's master):
 * a pipeline runs on one connection. An append fails (nothing owed for it)
 * when no connection can be made, or on out of memory. */
int sk_redis_append(sk_redis *r, int argc, const char **argv, const size_t *lens);
int sk_redis_read(sk_redis *r, redisReply **out);

/* The command on master k: on a cluster the k-th master of the slot map,
 * elsewhere the one master (k 0). No routing by key, no redirection
 * followed: for commands that walk one node's keyspace (SCAN), sent to
 * each master in turn, k = 0, 1, ... until SK_ENOTFOUND (no master k).
 * Otherwise as sk_redis_command. */
int sk_redis_master_command(sk_redis *r, int k, redisReply **out, int argc, const char **argv,
                            const size_t *lens);

/* Redirection counters: 0, or SK_EINVAL for a handle not of a cluster. */
int sk_redis_cluster_stats(const sk_redis *r, struct sk_cluster_stats *out);
/* The slot map (NULL for a handle not of a cluster, or not connected):
 * valid until the next command. */
const struct sk_cluster_map *sk_redis_cluster_map(const sk_redis *r);

/* Drops the connection (next command reconnects at once); commands
 * appended since the last read were not sent and never run. */
void sk_redis_disconnect(sk_redis *r);

/* fn for each master the client holds a connection for (the one server,
 * the Sentinels' master, each Cluster master), with what it last said of
 * its settings: its handshake's INFO, then INFO memory every
 * SK_RSET_REREAD_MS while the handle runs (redis_async.h). A master that
 * has not answered yet is left out. Nothing before the first command. */
void sk_redis_each_settings(const sk_redis *r,
                            void (*fn)(void *data, const char *addr, const struct sk_rsettings *s),
                            void *data);
/* Connects to host:port with r's credentials (AUTH, SELECT; no scripts)
 * only to read its settings into *s (INFO), and closes: a Sentinel
 * master's replicas, which a failover makes masters. 0 or the connect
 * error (r->errstr; r's own connection is untouched). */
int sk_redis_probe_settings(sk_redis *r, const char *host, int port, struct sk_rsettings *s);
/* Reads every ready master's settings again now (INFO memory, waited for
 * up to the command timeout): a policy may have changed since the last
 * read. A master that does not answer keeps what it said before. */
void sk_redis_refresh_settings(sk_redis *r);

#endif
