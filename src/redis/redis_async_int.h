/* redis_async_int.h - what the async client's files share: the single-node
 * client (redis_async.c), the cluster front over one such client per
 * master (redis_async_cluster.c) and the Sentinel front over one client for
 * the master and two for a Sentinel (redis_async_sentinel.c). Callers use
 * redis_async.h only. */
#ifndef SK_REDIS_ASYNC_INT_H
#define SK_REDIS_ASYNC_INT_H
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "redis/handshake.h"
#include "redis/redis_async.h"
#include "redis/redis_cluster.h"
#include "redis/redis_settings.h"
#include "redis/redis_url.h"

/* RESOLVING: a host name on a resolver thread (core/resolve.h), before the
 * first connect */
enum ar_state { AR_DOWN, AR_RESOLVING, AR_CONNECTING, AR_HANDSHAKE, AR_READY };

/* What a single-node client is for. */
enum ar_role {
    AR_DATA,     /* a master with our data: scripts loaded, ROLE not asked */
    AR_MASTER,   /* the same, and the handshake checks ROLE is master (Sentinel) */
    AR_SENTINEL, /* a Sentinel: PING only, no scripts, no SELECT */
    AR_PROBE,    /* a cluster seed asked for the map: AUTH only, no scripts */
    AR_BARE,     /* a server as it is (a probe, a tool): AUTH and SELECT, no scripts,
                    and the opening PING's answer, whatever it is, makes it ready */
};

struct ar_buf {
    char *p;
    size_t len, cap;
};

struct ar_entry;    /* one command waiting for its answer, redis_async.c */
struct ar_held;     /* an answer waiting for the WAIT after it, redis_async.c */
struct ar_cluster;  /* the cluster front's state, redis_async_cluster.c */
struct ar_sentinel; /* the Sentinel front's state, redis_async_sentinel.c */

struct sk_aredis {
    h2o_loop_t *loop;
    h2o_socket_t *sock;
    h2o_socket_t *rsock; /* the resolver's answer, while RESOLVING */
    enum ar_state state;
    enum ar_role role;
    struct sk_redis_url url;
    struct sk_aredis_opts opts; /* defaults filled in */
    /* the input buffers' allocator, this client's own: h2o's shared one
     * recycles through a list no thread owns, and the blocking facade runs
     * clients on several threads */
    h2o_buffer_prototype_t inproto;
    struct sockaddr_storage addr;
    socklen_t addrlen;  /* 0: a name not resolved yet */
    int resolve_warned; /* a failed resolution was logged */
    int timeout_ms;
    redisReader *reader;
    struct ar_buf out; /* encoded commands; the first woff bytes are written */
    size_t woff;
    int write_busy;        /* the kernel took part of out: waiting until writable */
    struct ar_entry *fifo; /* ring buffer */
    size_t head, count, cap;
    int64_t state_since_ms, next_try_ms;
    int backoff_ms;
    int fail_rc;            /* why the failed commands fail: SK_EIO, or SK_ETIMEDOUT */
    int64_t block_until_us; /* a blocking read (XREAD BLOCK) may hold the answers until */
    int64_t rtt_us;
    unsigned connects;
    char errstr[160];
    struct sk_handshake hs; /* this connection's AUTH, SELECT, ROLE (handshake.h) */
    int hs_next;            /* the step the next handshake answer is for (answers come in order) */
    /* Functions: 1 once this server holds the library (calls go as FCALL) */
    int fn, fn_reloading;
    /* WAIT (opts.sync_replicas > 0): confirmed commands sent since the last
     * WAIT, whether one is in flight, and the answers held for it */
    size_t unwaited;
    int wait_inflight;
    struct ar_held *held;
    size_t nheld, capheld;
    int acked;         /* for the callback being run: WAIT's count, -1 none */
    unsigned readonly; /* READONLY answers seen (a demoted master) */
    int sync_warned;   /* told once that --sync-replicas is below the master's replicas */
    /* The server's settings (redis_settings.h): read by the handshake's
     * INFO and again every SK_RSET_REREAD_MS while ready (a policy changed
     * with CONFIG SET at run time), judged at once; purchases read the
     * verdict (sk_aredis_unsafe), never the server. */
    struct sk_rsettings rset;
    struct sk_rset_verdict verdict;
    int64_t rset_next_ms;
    int rset_inflight;
    int rset_logged;        /* the level last said in the log */
    int64_t rset_warned_ms; /* when a warning was last said */
    /* replies that answer no command (pub/sub messages); NULL: an error */
    sk_aredis_cb push_cb;
    void *push_data;
    struct ar_cluster *cl;  /* non-NULL: a cluster front, the fields above unused */
    struct ar_sentinel *sn; /* non-NULL: a Sentinel front, likewise */
};

/* (redis_async.c) One single-node client for an already parsed URL (also
 * a cluster's node, a Sentinel front's master or Sentinel): takes a
 * numeric address or a unix socket path at once, hands a host name to a
 * resolver thread (never blocking the loop), and starts connecting. The caller
 * frees *out with sk_aredis_free. 0, SK_EINVAL (reason in err) or
 * SK_ENOMEM. */
int sk_aredis_node_new(sk_aredis **out, h2o_loop_t *loop, const struct sk_redis_url *u,
                       const struct sk_aredis_opts *o, enum ar_role role, char *err, size_t cap);
/* sk_aredis_new_opts for an URL already parsed. */
int sk_aredis_new_url(sk_aredis **out, h2o_loop_t *loop, const struct sk_redis_url *u,
                      const struct sk_aredis_opts *o, char *err, size_t cap);
/* A single-node client down and inside its reconnect backoff. */
int sk_aredis_node_stalled(const sk_aredis *ar);
/* Queues a command on a single-node client whatever its state (script >= 0:
 * an EVALSHA of that script, sent as FCALL when the server has the
 * library and kept for a resend as EVAL; confirm: held for a WAIT). 0 (cb
 * will run) or SK_ENOMEM. */
int sk_aredis_enqueue(sk_aredis *ar, sk_aredis_cb cb, void *data, int argc, const char *const *argv,
                      const size_t *lens, int script, int confirm);
/* A command's arguments, copied for a resend. */
struct sk_aredis_args {
    int argc;
    const char **argv;
    size_t *lens;
};
/* Allocates head bytes for the caller followed by a copy of the command
 * (pointers, lengths, bytes) described in *a; returns the block (the
 * caller frees it with free, which frees the copy too) or NULL. */
void *sk_aredis_args_copy(size_t head, int argc, const char *const *argv, const size_t *lens,
                          struct sk_aredis_args *a);
/* How long (ms) the oldest command of a single-node client has waited for
 * its answer; 0 when none waits. */
int64_t sk_aredis_oldest_ms(const sk_aredis *ar);
/* The master serving key on a cluster front (NULL: none known yet). */
const sk_aredis *sk_aredis_cl_master_of(const sk_aredis *ar, const char *key, size_t len);
/* The client of the k-th master of the slot map of a cluster front (0, 1,
 * ...), ready or not; NULL past the last, or while it has none yet.
 * *nmasters (when given): the masters of the map. */
sk_aredis *sk_aredis_cl_master_k(const sk_aredis *ar, int k, int *nmasters);
/* (redis_async.c) How many ready masters have not answered since they were
 * asked to read their settings again (the blocking facade's
 * sk_redis_refresh_settings waits for 0); reread: every one is asked now,
 * to read them at its next tick (INFO memory, as every SK_RSET_REREAD_MS). */
int sk_aredis_settings_pending(sk_aredis *ar, int reread);

/* (redis_async_cluster.c) The calls of redis_async.h for a cluster front
 * (ar->cl set). sk_aredis_cl_new sets ar->cl and reads the slot map (an
 * unreachable cluster is not an error); sk_aredis_cl_free frees ar too. */
int sk_aredis_cl_new(sk_aredis *ar);
void sk_aredis_cl_free(sk_aredis *ar);
int sk_aredis_cl_submit(sk_aredis *ar, int argc, const char *const *argv, const size_t *lens,
                        int script, int confirm, sk_aredis_cb cb, void *data);
int sk_aredis_cl_ready(const sk_aredis *ar);
int sk_aredis_cl_unserved(const sk_aredis *ar, char *buf, size_t cap);
size_t sk_aredis_cl_pending(const sk_aredis *ar);
const char *sk_aredis_cl_errstr(const sk_aredis *ar);
unsigned sk_aredis_cl_connects(const sk_aredis *ar);
int sk_aredis_cl_stalled(const sk_aredis *ar);
/* The slot map and the redirection counts (the blocking facade's). */
const struct sk_cluster_map *sk_aredis_cl_map(const sk_aredis *ar);
void sk_aredis_cl_stats(const sk_aredis *ar, struct sk_cluster_stats *out);
void sk_aredis_cl_flush(sk_aredis *ar);
void sk_aredis_cl_tick(sk_aredis *ar);

/* (redis_async_sentinel.c) The same for a Sentinel front (ar->sn set):
 * sk_aredis_sn_new starts asking the Sentinels (an unreachable one is not
 * an error); sk_aredis_sn_master is the master's client when it is ready,
 * else NULL; sk_aredis_sn_free frees ar too. */
int sk_aredis_sn_new(sk_aredis *ar);
void sk_aredis_sn_free(sk_aredis *ar);
sk_aredis *sk_aredis_sn_master(const sk_aredis *ar);
const char *sk_aredis_sn_errstr(const sk_aredis *ar);
unsigned sk_aredis_sn_connects(const sk_aredis *ar);
int sk_aredis_sn_stalled(const sk_aredis *ar);
/* The client whose failure a NULL answer reports (sk_aredis_failed): the
 * master's while it is there, else the front, which says why it left. */
const sk_aredis *sk_aredis_sn_failed(const sk_aredis *ar);
/* The master in use or last chosen (host "" when none). */
const char *sk_aredis_sn_master_addr(const sk_aredis *ar, int *port);
void sk_aredis_sn_tick(sk_aredis *ar);

#endif
