/* redis_async_int.h - what the async client's files share: the single-node
 * client (redis_async.c) and the cluster front over one such client per
 * master (redis_async_cluster.c). Callers use redis_async.h only. */
#ifndef SK_REDIS_ASYNC_INT_H
#define SK_REDIS_ASYNC_INT_H
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "redis/redis_async.h"
#include "redis/redis_url.h"

enum ar_state { AR_DOWN, AR_CONNECTING, AR_HANDSHAKE, AR_READY };

struct ar_buf {
    char *p;
    size_t len, cap;
};

struct ar_entry;   /* one command waiting for its answer, redis_async.c */
struct ar_cluster; /* the cluster front's state, redis_async_cluster.c */

struct sk_aredis {
    h2o_loop_t *loop;
    h2o_socket_t *sock;
    enum ar_state state;
    struct sk_redis_url url;
    struct sockaddr_storage addr;
    socklen_t addrlen;
    int timeout_ms;
    redisReader *reader;
    struct ar_buf out, writing; /* queued / handed to h2o (must live until on_write) */
    int write_busy;
    struct ar_entry *fifo; /* ring buffer */
    size_t head, count, cap;
    int64_t state_since_ms, next_try_ms;
    int backoff_ms;
    int64_t rtt_us;
    unsigned connects;
    char errstr[160];
    struct ar_cluster *cl; /* non-NULL: a cluster front, the fields above unused */
};

/* (redis_async.c) One single-node client for an already parsed URL (also
 * a cluster's node): resolves the host (blocking) and starts connecting.
 * The caller frees *out with sk_aredis_free. 0, SK_EINVAL (reason in err)
 * or SK_ENOMEM. */
int sk_aredis_node_new(sk_aredis **out, h2o_loop_t *loop, const struct sk_redis_url *u,
                       int timeout_ms, char *err, size_t cap);
/* Queues a command on a single-node client whatever its state (script >= 0:
 * an EVALSHA of that script, kept for a NOSCRIPT resend). 0 (cb will run)
 * or SK_ENOMEM. */
int sk_aredis_enqueue(sk_aredis *ar, sk_aredis_cb cb, void *data, int argc, const char *const *argv,
                      const size_t *lens, int script);

/* (redis_async_cluster.c) The calls of redis_async.h for a cluster front
 * (ar->cl set). sk_aredis_cl_new sets ar->cl and reads the slot map (an
 * unreachable cluster is not an error); sk_aredis_cl_free frees ar too. */
int sk_aredis_cl_new(sk_aredis *ar);
void sk_aredis_cl_free(sk_aredis *ar);
int sk_aredis_cl_submit(sk_aredis *ar, int argc, const char *const *argv, const size_t *lens,
                        int script, sk_aredis_cb cb, void *data);
int sk_aredis_cl_ready(const sk_aredis *ar);
size_t sk_aredis_cl_pending(const sk_aredis *ar);
const char *sk_aredis_cl_errstr(const sk_aredis *ar);
unsigned sk_aredis_cl_connects(const sk_aredis *ar);
void sk_aredis_cl_flush(sk_aredis *ar);
void sk_aredis_cl_tick(sk_aredis *ar);

#endif
