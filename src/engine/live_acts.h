/* live_acts.h - the activities Redis holds live state for, whatever a
 * database says: every master's keyspace walked with SCAN for the
 * activities' own meta keys (keys.h, SK_KEYS_META_MATCH), then each one's
 * owner read (meta `store_id`: the identity of the store that preheated
 * it, docs/design.md, "The store's identity").
 *
 * An activity live in Redis that a database does not hold, or holds while
 * Redis carries another store's identity, is sold into a stream that
 * database's order workers never read: `seckill reconcile` and the ops
 * sampler report it (docs/reconcile.md, "Activities only Redis holds").
 *
 * Cost: SCAN walks every key of every master (COUNT 1000 a step), then
 * one HMGET per activity found, pipelined: for an operator's command and a
 * background sampler at a low duty cycle, never for a purchase. */
#ifndef SK_LIVE_ACTS_H
#define SK_LIVE_ACTS_H
#include <stddef.h>
#include <stdint.h>

#include "engine/stock.h"
#include "redis/redis_conn.h"

struct sk_live_act {
    uint64_t id;
    char store_id[SK_STOCK_STORE_ID_LEN + 1]; /* its meta's; "" none (preheated before
                                                 identities, not admitted since) */
    int open;                                 /* the switch of its own meta */
    int segments;                             /* > 1: segmented (its own meta holds only the
                                                 definition) */
};

/* Every activity Redis holds (its own meta key exists), ordered by id,
 * into a new array *out of *n entries (the caller frees it; NULL when
 * none). 0, or a negative SK_E* code (detail in r->errstr). */
int sk_live_acts(sk_redis *r, struct sk_live_act **out, size_t *n);

/* The owner of activity id (its own meta's store_id) into out (cap at
 * least SK_STOCK_STORE_ID_LEN + 1; "" when none, or no meta). 0, or a
 * negative SK_E* code (r->errstr). */
int sk_live_act_owner(sk_redis *r, uint64_t id, char *out, size_t cap);

/* 1 when an owner (a meta's store_id, "" none) makes the key set another
 * store's than mine ("" unknown: never). Pure. */
int sk_live_foreign(const char *owner, const char *mine);

/* What fixes an activity live in Redis that this database would never
 * persist, as one sentence naming the commands, into buf (cap bytes):
 * listed 0 (unknown to this database) or 1 (listed, while owner, another
 * store, preheated its live state). Pure; returns buf. */
const char *sk_live_fix(uint64_t id, int listed, const char *owner, char *buf, size_t cap);

/* The entry of id in acts[0..n) (ordered by id), or NULL. */
const struct sk_live_act *sk_live_acts_find(const struct sk_live_act *acts, size_t n, uint64_t id);

#endif
