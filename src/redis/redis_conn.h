/* redis_conn.h - a blocking Redis connection for the CLI, tools, workers and
 * benchmarks: URL, AUTH, SELECT, bounded connect and command timeouts, and
 * reconnect with exponential backoff. Not thread-safe: one per thread. */
#ifndef SK_REDIS_CONN_H
#define SK_REDIS_CONN_H
#include <stddef.h>
#include <stdint.h>

#include <hiredis.h>

#include "redis/redis_cluster.h"
#include "redis/redis_settings.h"
#include "redis/redis_url.h"

struct sk_rcluster; /* cluster state, redis_conn_cluster.c */
struct sk_rsn;      /* Sentinel state, redis_conn_sentinel.c */

/* How the embedded scripts are called (script.h). */
enum sk_redis_fn {
    SK_FN_AUTO = 0, /* FCALL; the first miss tells: EVAL and FUNCTION LOAD, or EVALSHA for good */
    SK_FN_OFF,      /* EVALSHA only (a server without Functions, or asked so) */
    SK_FN_ON        /* FCALL: the library was loaded on this server */
};

#define SK_REDIS_RSET_MAX 16

typedef struct sk_redis {
    redisContext *c; /* NULL while disconnected */
    struct sk_redis_url url;
    int connect_timeout_ms, command_timeout_ms;
    int err;             /* last SK_E* code, 0 after success */
    char errstr[256];    /* detail of the last failure */
    int backoff_ms;      /* current reconnect backoff, 0 when connected */
    int64_t next_try_ms; /* monotonic ms before which no reconnect is tried */
    unsigned connects;   /* successful (re)connects so far */
    int fn;              /* enum sk_redis_fn; the caller may set SK_FN_OFF */
    /* redis+sentinel:// only: what the Sentinels said and a connection to
     * each (redis_conn_sentinel.c); asked only between exchanges (never
     * while pipe_n replies are owed) */
    struct sk_rsn *sn;
    char sn_host[256]; /* the master in use (or last tried), as the Sentinels named it */
    int sn_port;
    /* redis+cluster:// only (NULL for redis://, whose path never looks at
     * it): slot map, one connection per master, the pipeline queue. In
     * cluster mode c is a borrowed alias of one master's connection (so
     * "is connected" checks keep working); never free it directly. */
    struct sk_rcluster *cl;
    /* The pipeline (sk_redis_append / sk_redis_read), kept by the client so
     * that no caller can leave replies behind for a later read. */
    unsigned pipe_n;       /* replies owed: appended, not read yet */
    int pipe_read;         /* a reply of this pipeline was read */
    int pipe_broken;       /* a read of it failed: the rest is gone */
    int pipe_window;       /* the caller's: 1 = a sliding window (see sk_redis_append) */
    uint64_t pipe_dropped; /* replies and unsent commands of pipelines left unread */
    /* What each server this client connected to said of its settings (the
     * handshake's INFO, redis_settings.h), by address; a reconnection
     * replaces its row (sk_redis_each_settings) */
    int nrset;
    struct sk_redis_rset {
        char addr[80];
        char host[64];
        int port;
        struct sk_rsettings s;
    } rset[SK_REDIS_RSET_MAX];
} sk_redis;

/* Parses url and allocates a handle (caller frees with sk_redis_free); does
 * not connect: the first command does. Timeouts <= 0 mean 1000 ms.
 * redis+unix:// connects to the socket. redis+sentinel:// asks the
 * Sentinels (all of them at once) which master a majority names in the
 * newest epoch, connects to it and checks with ROLE that it is one; while
 * connected they are asked again, and the master's ROLE, every
 * SK_SENTINELS_POLL_MS between exchanges (a master they replaced, one no
 * majority has named for SK_SENTINELS_LEASE_MS, or one that is a replica
 * now is left), and after a READONLY answer (the command, which never ran,
 * is sent once more to the new master). The rule is redis/sentinels.h's.
 * Returns 0, SK_EINVAL (bad URL, reason in errstr when errbuf given) or SK_ENOMEM. */
int sk_redis_new(sk_redis **out, const char *url, int connect_timeout_ms, int command_timeout_ms,
                 char *errbuf, size_t errcap);
void sk_redis_free(sk_redis *r);

/* Connects now (TCP, AUTH, SELECT), dropping any old connection. Returns 0
 * or SK_EIO/SK_EAUTH/SK_ETIMEDOUT with r->errstr set. */
int sk_redis_connect(sk_redis *r);

/* Ensures a connection, reconnecting when the backoff allows: 0 or the
 * connect error; fails fast (SK_EIO) while inside the backoff window. */
int sk_redis_ensure(sk_redis *r);

/* Sends one command and reads its reply into *out (caller frees with
 * freeReplyObject). Error replies (-ERR ...) are returned as replies, not
 * failures. On an I/O error or timeout the connection is dropped and
 * SK_EIO/SK_ETIMEDOUT returned; the command is never resent, because a
 * purchase that may have run must not run twice. */
int sk_redis_command(sk_redis *r, redisReply **out, int argc, const char **argv,
                     const size_t *lens);
/* printf-style variant (hiredis format). */
int sk_redis_cmd(sk_redis *r, redisReply **out, const char *fmt, ...);

/* Pipelining: append any number of commands, then read the replies in
 * order. The client keeps the pipeline whole, whatever the caller does:
 *  - a read when no reply is owed fails at once (SK_ESTATE), without I/O;
 *  - a failed read (I/O error, timeout, a lost cluster node) ends the
 *    pipeline: the replies still owed are dropped (with the connection on
 *    one node; those already read from the other nodes of a cluster are
 *    freed), and every further read fails at once (SK_EIO, r->errstr the
 *    first failure) until the caller starts anew; the commands not
 *    answered may or may not have run;
 *  - starting anew while replies are owed drops them: any command
 *    (sk_redis_command, sk_redis_cmd), or an append after a read of this
 *    pipeline (unless r->pipe_window: a caller keeping a sliding window of
 *    calls in flight continues its pipeline). On one node the connection
 *    is dropped (the replies go with it, commands not yet sent never
 *    run); on a cluster the replies are freed and queued commands never
 *    sent. Counted in r->pipe_dropped.
 * So a later command never reads an earlier command's reply. Appends
 * while replies are owed never reconnect (nor leave a Sentinel's master):
 * a pipeline runs on one connection. An append fails (nothing owed for it)
 * when no connection can be made, or on out of memory (which ends the
 * pipeline as a failed read does). */
int sk_redis_append(sk_redis *r, int argc, const char **argv, const size_t *lens);
int sk_redis_read(sk_redis *r, redisReply **out);

/* Cluster (redis+cluster://): every command above is routed by the slot of
 * its first key (EVAL/EVALSHA: the first key after numkeys); MOVED and ASK
 * are followed (at most SK_CLUSTER_MAX_REDIRECTS hops; a redirected
 * command never ran, so the resend cannot act twice), TRYAGAIN and
 * CLUSTERDOWN are waited out (bounded), and the slot map is re-read with
 * CLUSTER SLOTS after a MOVED or a lost node. Keyless commands: SCRIPT,
 * FUNCTION, CONFIG and FLUSH* go to every master (the first error reply wins, else
 * the first master's reply); MULTI/EXEC/DISCARD/UNWATCH go to the node of
 * the last keyed command (so WATCH ... MULTI ... EXEC stays on one node);
 * anything else (PING, INFO, TIME) to one master. XREAD/XREADGROUP naming
 * streams of several slots is split into one call per slot (a node refuses
 * two slots in one command), sent together, and the replies merged (a
 * BLOCK then waits on every call at once, so an idle stream holds the
 * answer up to BLOCK ms). Pipelines: appended commands
 * are queued and sent to their nodes at the first read (a MULTI...EXEC run
 * goes to one node as a unit); replies come back in append order. See
 * docs/cluster.md. */

/* The command on master k: on a cluster the k-th master of the slot map
 * (the map read first when stale), elsewhere the one master (k 0). No
 * routing by key, no redirection followed: for commands that walk one
 * node's keyspace (SCAN), sent to each master in turn, k = 0, 1, ...
 * until SK_ENOTFOUND (no master k). Otherwise as sk_redis_command. */
int sk_redis_master_command(sk_redis *r, int k, redisReply **out, int argc, const char **argv,
                            const size_t *lens);

/* Redirection counters: 0, or SK_EINVAL for a redis:// handle. */
int sk_redis_cluster_stats(const sk_redis *r, struct sk_cluster_stats *out);
/* The slot map (NULL for redis://): valid until the next command. */
const struct sk_cluster_map *sk_redis_cluster_map(const sk_redis *r);

/* Drops the connection (next command reconnects). */
void sk_redis_disconnect(sk_redis *r);

/* fn for each server this client connected to (its address and what its
 * handshake's INFO said, redis_settings.h), oldest first. */
void sk_redis_each_settings(const sk_redis *r,
                            void (*fn)(void *data, const char *addr, const struct sk_rsettings *s),
                            void *data);
/* Connects to host:port with r's credentials only to read its settings
 * (then kept as above) and closes: a Sentinel master's replicas, which a
 * failover makes masters. 0 or the connect error (r->errstr). */
int sk_redis_probe_settings(sk_redis *r, const char *host, int port);
/* Reads the settings of every server of the table again (a connection
 * each, as sk_redis_probe_settings): a long-lived client's are as old as
 * its connection, and a policy may have changed since. One that cannot be
 * reached keeps its row. */
void sk_redis_refresh_settings(sk_redis *r);

/* Copies the value of one "field:value" line of INFO <section> into val
 * (cap bytes): 0, SK_ENOTFOUND, or a connection error. */
int sk_redis_info_field(sk_redis *r, const char *section, const char *field, char *val, size_t cap);

#endif
