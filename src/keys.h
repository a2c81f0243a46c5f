/* keys.h - Redis key names of one activity. Every key of an activity shares
 * the hash tag {a<ID>}, so one script touches one slot (Redis Cluster). */
#ifndef SK_KEYS_H
#define SK_KEYS_H
#include <stdint.h>

#define SK_KEY_MAX 64

struct sk_keys {
    char meta[SK_KEY_MAX];     /* hash: open start_ms end_ms limit max_qty initial released id */
    char stock[SK_KEY_MAX];    /* string: units left; never expires */
    char buyers[SK_KEY_MAX];   /* hash: user id -> units held */
    char orders[SK_KEY_MAX];   /* stream: one entry per admitted order */
    char released[SK_KEY_MAX]; /* set: order ids given back */
    char idem[SK_KEY_MAX];     /* hash: "user:Idempotency-Key" -> "qty:order_id" */
    char ledger[SK_KEY_MAX];   /* hash: order id -> "user:qty[:released]" */
    char dlq[SK_KEY_MAX];      /* stream: order events the worker gave up on */
};

void sk_keys_for(struct sk_keys *k, uint64_t activity_id);

/* The KEYS of purchase.lua and purchase_batch.lua, in their order: the one
 * place that knows it, so callers cannot drift from the scripts. */
#define SK_PURCHASE_NKEYS 6
void sk_keys_purchase(const struct sk_keys *k, const char *keys[SK_PURCHASE_NKEYS]);

#endif
