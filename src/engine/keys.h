/* keys.h - Redis key names of one activity. Every key of an activity shares
 * the hash tag {a<ID>}, so one script touches one slot (Redis Cluster).
 *
 * A segmented activity (docs/segments.md) keeps only its definition under
 * {a<ID>} (the base meta, with a "segments" field); segment s has the full
 * key set under its own tag {a<ID>.s<s>}, so segments spread over slots.
 * The label of a key set ("1001", or "1001.3" for segment 3) prefixes the
 * order ids admitted there: "<label>-<stream id>". */
#ifndef SK_KEYS_H
#define SK_KEYS_H
#include <stddef.h>
#include <stdint.h>

#include "scripts_gen.h"

#define SK_KEY_MAX 64
#define SK_LABEL_MAX 32

/* Not a segment: the unsegmented key set {a<ID>}. */
#define SK_SEG_NONE (-1)

struct sk_keys {
    char meta[SK_KEY_MAX];     /* hash: open start_ms end_ms limit max_qty initial released id
                                  (segments: seg seg_of xin xout) */
    char stock[SK_KEY_MAX];    /* string: units left; never expires */
    char buyers[SK_KEY_MAX];   /* hash: user id -> units held */
    char orders[SK_KEY_MAX];   /* stream: one entry per admitted order */
    char released[SK_KEY_MAX]; /* set: order ids given back */
    char idem[SK_KEY_MAX];     /* hash: "user:Idempotency-Key" -> "qty:order_id" */
    char ledger[SK_KEY_MAX];   /* hash: order id -> "user:qty[:released]" */
    char dlq[SK_KEY_MAX];      /* stream: order events the worker gave up on */
    char xout[SK_KEY_MAX];     /* hash: transfer id -> "to:qty:ms" (stock lent, segments) */
    char xin[SK_KEY_MAX];      /* hash: transfer id -> qty (stock received, segments) */
    char wr_q[SK_KEY_MAX];     /* zset: the waiting room's queue, user -> draw or arrival
                                  (base key set only; docs/waiting-room.md) */
    char wr_pass[SK_KEY_MAX];  /* hash: user -> expiry of the pass handed out ("s"/"x"
                                  prefix: spent / seen expired; base key set only) */
    char wr_spent[SK_KEY_MAX]; /* hash: user -> expiry of the pass a purchase spent */
    char wr_held[SK_KEY_MAX];  /* zset: user -> when the seat a pass holds goes back to the
                                  pace unless spent (base key set only) */
    char reg[SK_KEY_MAX];      /* set: the registered buyers (docs/fairness.md) */
    char draw[SK_KEY_MAX];     /* zset: user -> place in the draw's order, 1 = first */
    char rl_u[SK_KEY_MAX];     /* "sk:{tag}:rl:u:": the prefix of the per-user rate limiter
                                  keys (string: GCRA arrival time; expires), + user id */
    char rl_ip[SK_KEY_MAX];    /* "sk:{tag}:rl:ip:": the same per client IP, + the IP */
    char ch[SK_KEY_MAX];       /* "sk:{tag}:ch:": the prefix of a spent challenge's key
                                  (string; expires with the challenge), + its id
                                  (docs/challenges.md) */
    char label[SK_LABEL_MAX];  /* "<ID>" or "<ID>.<seg>": order id prefix, script ARGV[1] */
    uint64_t activity_id;
    int seg; /* segment index, or SK_SEG_NONE */
};

void sk_keys_for(struct sk_keys *k, uint64_t activity_id);
/* Key set of segment seg (0..) of a segmented activity; SK_SEG_NONE gives
 * sk_keys_for's. */
void sk_keys_seg(struct sk_keys *k, uint64_t activity_id, int seg);

/* Every meta key (an activity's own and its segments'): the MATCH pattern
 * of a SCAN for the activities Redis holds (live_acts.h). */
#define SK_KEYS_META_MATCH "sk:{a*}:meta"
/* The activity id of an activity's own meta key "sk:{a<ID>}:meta": 1 with
 * *id set; 0 for any other key (a segment's meta, a malformed id). Pure. */
int sk_keys_meta_id(const char *key, size_t len, uint64_t *id);

/* Parses the label at the start of an order id ("<ID>-..." or
 * "<ID>.<seg>-..."): activity id and segment (SK_SEG_NONE when absent).
 * Returns the label's length (up to the first '-'), or SK_EINVAL. Pure. */
int sk_keys_parse_label(const char *order_id, size_t len, uint64_t *activity_id, int *seg);
/* The key set an order id belongs to. Returns 0 or SK_EINVAL. */
int sk_keys_for_order(struct sk_keys *k, const char *order_id);

/* Every key a script touches is in its KEYS (Redis requires it, Cluster
 * routes by it): no script builds a key name. Each script's KEYS are a
 * list of src/engine/script_pos.def (K_<SCRIPT>) naming fields of struct
 * sk_keys, so callers cannot drift from the scripts (docs/design.md, "The
 * scripts"): SK_K_<SCRIPT>_EACH(SK_KEY_OF, k) is k's keys in the script's
 * order, an initializer of SK_K_<SCRIPT>_N entries:
 *     const char *keys[] = {SK_K_RESET_EACH(SK_KEY_OF, k)};
 */
#define SK_KEY_OF(k, name) (k)->name,
/* The KEYS a script's generated EACH list names on key set k, copied into
 * keys (pointing into k; needs <string.h>). */
#define SK_KEYS_FILL(EACH, k, keys)                                                                \
    do {                                                                                           \
        const char *sk_fill_[] = {EACH(SK_KEY_OF, (k))};                                           \
        memcpy((keys), sk_fill_, sizeof sk_fill_);                                                 \
    } while (0)

/* The KEYS of purchase_batch.lua: first the key set's
 * SK_PURCHASE_NKEYS (K_PURCHASE of script_pos.def: meta stock buyers
 * orders idem ledger xin wr_spent reg),
 * then per purchase its buyer's rate limiter key (sk_keys_rl_user), then,
 * when the call carries a per-IP limit, per purchase its client IP's
 * (sk_keys_rl_ip), then, when it carries challenge tickets, per purchase
 * its challenge's spent key (sk_keys_ch): at most SK_PURCHASE_KEYC(n) for
 * n purchases.
 * sk_stock_batch_keys (engine/stock.h) lays out the whole list. */
#define SK_PURCHASE_NKEYS SK_K_PURCHASE_N
#define SK_PURCHASE_KEYC(n) (SK_PURCHASE_NKEYS + 3 * (n))
#define sk_keys_purchase(k, keys) SK_KEYS_FILL(SK_K_PURCHASE_EACH, k, keys)

/* A rate limiter's key (docs/rate-limit.md), in k's hash tag: the buyer's
 * (sk:{tag}:rl:u:<user>) or the client IP's (sk:{tag}:rl:ip:<ip>; an IP
 * longer than SK_RL_IP_MAX gives the bare prefix: the script refuses such
 * an IP before it touches a key). Into out (cap bytes, SK_RL_KEY_MAX is
 * enough); returns the length, or SK_ENOMEM when cap is short. Pure. */
#define SK_RL_IP_MAX 45
#define SK_RL_KEY_MAX (SK_KEY_MAX + SK_RL_IP_MAX)
int sk_keys_rl_user(const struct sk_keys *k, uint64_t user_id, char *out, size_t cap);
int sk_keys_rl_ip(const struct sk_keys *k, const char *ip, char *out, size_t cap);
/* A spent challenge's key, sk:{tag}:ch:<id> (id: up to SK_KEYS_CH_ID_MAX
 * bytes, else, or NULL, the bare prefix: what a script never writes). Into
 * out as above; SK_KEYS_CH_MAX is enough. Pure. */
#define SK_KEYS_CH_ID_MAX 32
#define SK_KEYS_CH_MAX (SK_KEY_MAX + SK_KEYS_CH_ID_MAX)
int sk_keys_ch(const struct sk_keys *k, const char *id, char *out, size_t cap);

/* The KEYS of release.lua, preheat.lua, state.lua and queue.lua (of the
 * base key set): K_RELEASE, K_PREHEAT, K_STATE, K_QUEUE. */
#define SK_RELEASE_NKEYS SK_K_RELEASE_N
#define sk_keys_release(k, keys) SK_KEYS_FILL(SK_K_RELEASE_EACH, k, keys)
#define SK_PREHEAT_NKEYS SK_K_PREHEAT_N
#define sk_keys_preheat(k, keys) SK_KEYS_FILL(SK_K_PREHEAT_EACH, k, keys)
#define SK_STATE_NKEYS SK_K_STATE_N
#define sk_keys_state(k, keys) SK_KEYS_FILL(SK_K_STATE_EACH, k, keys)
#define SK_QUEUE_NKEYS SK_K_QUEUE_N
#define sk_keys_queue(k, keys) SK_KEYS_FILL(SK_K_QUEUE_EACH, k, keys)

#endif
