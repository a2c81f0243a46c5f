/* backlog.h - how far the order pipeline is behind on one order stream: the
 * entries its consumer group has not acknowledged (not yet in the database,
 * as far as Redis can tell) and the age of the oldest of them, read in one
 * call (lua/backlog.lua) on the server's clock, the clock that made the
 * entry ids. The /metrics gauge of the oldest unpersisted order, the
 * worker's "no progress" warning and the tests read it. */
#ifndef SK_BACKLOG_H
#define SK_BACKLOG_H
#include <stdint.h>

#include "redis/redis_conn.h"

struct sk_backlog {
    int64_t entries;   /* not acknowledged (pending + never delivered); -1: unknown */
    int64_t pending;   /* delivered to a consumer, not acknowledged */
    int64_t oldest_ms; /* admission time (id ms) of the oldest of them, 0: none */
    int64_t now_ms;    /* the server's clock when it looked */
    int64_t age_ms;    /* now_ms - oldest_ms, 0 when none waits */
};

/* Fills out for stream (a key set's orders key) and the consumer group
 * group. No stream: nothing waits. A stream without the group: all of it
 * waits. Returns 0, or a Redis error (r->errstr; SK_EPROTO for an
 * unexpected reply). */
int sk_backlog_read(sk_redis *r, const char *stream, const char *group, struct sk_backlog *out);

#endif
