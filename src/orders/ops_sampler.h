/* ops_sampler.h - the figures of a node's activities that only Redis and
 * the database know (stock left, order backlog, dead letters, orders by
 * status, the last reconcile verdict), read once a second in the worker
 * process and published in the node's shared segment (core/node_stats.h),
 * where /metrics and the dashboard of every HTTP process read them without
 * a round trip of their own.
 *
 * Cheap reads only: per key set one HMGET, GET, XLEN of the dead letters and
 * the backlog script (lua/backlog.lua: the group's backlog and the age of
 * its oldest entry; never the buyers hash), and one COUNT ... GROUP BY
 * status per activity, the one read that grows with the sale: it is read
 * again only when its last cost is under 1/50 of the time since (a large
 * sale's counts lag by up to 50 times what they cost to read).
 * At most SK_NODE_ACTS activities: those whose sale window holds now
 * first, then the most recent ones.
 *
 * A sampler is one thread's object (its own Redis and store connections);
 * sk_sampler_stop may be called from any thread or a signal handler. */
#ifndef SK_OPS_SAMPLER_H
#define SK_OPS_SAMPLER_H
#include <stddef.h>

#include "core/node_stats.h"

typedef struct sk_sampler sk_sampler;

/* Creates a sampler publishing into w (required): copies the URL and the
 * spec, opens the store (migrations run), connects to Redis lazily.
 * Returns 0, SK_EINVAL, SK_EDB or SK_ENOMEM (err says why). The caller owns
 * *out: sk_sampler_free. */
int sk_sampler_new(sk_sampler **out, const char *redis_url, const char *db_spec,
                   struct sk_node_worker *w, char *err, size_t cap);
void sk_sampler_free(sk_sampler *s);

/* A pass every interval_ms until sk_sampler_stop (seen within 50 ms). */
void sk_sampler_run(sk_sampler *s, int interval_ms);
void sk_sampler_stop(sk_sampler *s);

#endif
