/* redis_conn.h - a blocking Redis connection for the CLI, tools, workers and
 * benchmarks: URL, AUTH, SELECT, bounded connect and command timeouts, and
 * reconnect with exponential backoff. Not thread-safe: one per thread. */
#ifndef SK_REDIS_CONN_H
#define SK_REDIS_CONN_H
#include <stddef.h>
#include <stdint.h>

#include <hiredis.h>

#include "redis_url.h"

typedef struct sk_redis {
    redisContext *c; /* NULL while disconnected */
    struct sk_redis_url url;
    int connect_timeout_ms, command_timeout_ms;
    int err;           /* last SK_E* code, 0 after success */
    char errstr[256];  /* detail of the last failure */
    int backoff_ms;    /* current reconnect backoff, 0 when connected */
    int64_t next_try_ms; /* monotonic ms before which no reconnect is tried */
    unsigned connects; /* successful (re)connects so far */
} sk_redis;

/* Parses url and allocates a handle (caller frees with sk_redis_free); does
 * not connect: the first command does. Timeouts <= 0 mean 1000 ms.
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
int sk_redis_command(sk_redis *r, redisReply **out, int argc, const char **argv, const size_t *lens);
/* printf-style variant (hiredis format). */
int sk_redis_cmd(sk_redis *r, redisReply **out, const char *fmt, ...);

/* Pipelining: append any number of commands, then read the replies in order. */
int sk_redis_append(sk_redis *r, int argc, const char **argv, const size_t *lens);
int sk_redis_read(sk_redis *r, redisReply **out);

/* Drops the connection (next command reconnects). */
void sk_redis_disconnect(sk_redis *r);

/* Copies the value of one "field:value" line of INFO <section> into val
 * (cap bytes): 0, SK_ENOTFOUND, or a connection error. */
int sk_redis_info_field(sk_redis *r, const char *section, const char *field, char *val, size_t cap);

#endif
