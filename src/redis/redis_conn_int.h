/* redis_conn_int.h - what the blocking client's two halves share: the
 * single-node client (redis_conn.c) and the cluster client
 * (redis_conn_cluster.c, used when sk_redis.cl is set). Callers use
 * redis_conn.h only. */
#ifndef SK_REDIS_CONN_INT_H
#define SK_REDIS_CONN_INT_H
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "redis/redis_conn.h"

/* r->errstr, printf-style, and r->err = err; returns err. */
int sk_redis_set_err(sk_redis *r, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* TCP connect (port 0: host is a unix socket path) + timeouts + AUTH +
 * SELECT to host:port: 0 with *out set (the caller owns it: redisFree), or
 * an error with r->errstr. */
int sk_redis_open_ctx(sk_redis *r, const char *host, int port, redisContext **out);
/* After a failed (re)connect at now (monotonic ms): the next backoff
 * (doubling, 50 ms .. 2 s) and the time before which none is tried. */
void sk_redis_backoff(sk_redis *r, int64_t now);

/* The cluster half (redis_conn_cluster.c): the same calls as redis_conn.h
 * for a redis+cluster:// handle (r->cl set). sk_redis_cl_new allocates
 * r->cl (0 or SK_ENOMEM), sk_redis_cl_free frees it (NULL is fine). */
int sk_redis_cl_new(sk_redis *r);
void sk_redis_cl_free(sk_redis *r);
void sk_redis_cl_drop_all(sk_redis *r);
int sk_redis_cl_connect(sk_redis *r);
int sk_redis_cl_ensure(sk_redis *r);
int sk_redis_cl_command(sk_redis *r, redisReply **out, int argc, const char **argv,
                        const size_t *lens);
/* The command on master k of the slot map (sk_redis_master_command). */
int sk_redis_cl_master_command(sk_redis *r, int k, redisReply **out, int argc, const char **argv,
                               const size_t *lens);
int sk_redis_cl_vcmd(sk_redis *r, redisReply **out, const char *fmt, va_list ap);
int sk_redis_cl_append(sk_redis *r, int argc, const char **argv, const size_t *lens);
int sk_redis_cl_read(sk_redis *r, redisReply **out);
/* Drops the pipeline queue: replies read and not handed out are freed,
 * commands queued and not sent are never sent. */
void sk_redis_cl_pipe_drop(sk_redis *r);

/* The Sentinel half (redis_conn_sentinel.c), for a redis+sentinel:// handle:
 * sk_redis_sn_connect asks the Sentinels and connects to the master a
 * majority names (r->c, ROLE checked); sk_redis_sn_check, between
 * exchanges, asks again when due (and the master's ROLE) and drops r->c
 * when the master must be left (0, or why: r->errstr); sk_redis_sn_readonly
 * notes a READONLY answer; sk_redis_sn_free closes the Sentinel
 * connections. sk_redis_is_readonly: 1 when rep is a READONLY error (a
 * replica refused a write: the command never ran). */
int sk_redis_sn_connect(sk_redis *r);
int sk_redis_sn_check(sk_redis *r);
void sk_redis_sn_readonly(sk_redis *r, const redisReply *rep);
void sk_redis_sn_free(sk_redis *r);
int sk_redis_is_readonly(const redisReply *rep);

#endif
