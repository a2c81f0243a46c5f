/* stock.h - the admission engine over Redis: purchase, batched purchase,
 * release, preheat, open/close and live state of one activity.
 *
 * Calls return 0 when Redis answered (the business outcome, accepted or a
 * refusal, is an SK_RC_* code in the result) and a negative SK_E* code when
 * it did not (details in r->errstr). A purchase that fails with SK_EIO or
 * SK_ETIMEDOUT may or may not have been admitted: it is never resent. */
#ifndef SK_STOCK_H
#define SK_STOCK_H
#include <stddef.h>
#include <stdint.h>

#include "engine/keys.h"
#include "redis/redis_conn.h"

#define SK_ORDER_ID_MAX 64
/* Longest batch one purchase_batch call takes (Redis argv stays small). */
#define SK_BATCH_MAX 1024

/* Longest Idempotency-Key accepted (printable ASCII, no ':' issues: the
 * key is stored after the user id, so any byte but NUL is safe). */
#define SK_IDEM_MAX 64

/* Longest client IP text (an IPv6 address with an IPv4 tail is 45). */
#define SK_IP_MAX 46

struct sk_purchase {
    uint64_t user_id;
    int64_t quantity;
    const char *idem; /* Idempotency-Key or NULL; not owned */
    size_t idem_len;
    const char *ip;   /* client IP (terminated, hex digits ':' '.') for the per-IP
                         limit, or NULL; not owned */
    const char *pass; /* the buyer's queue pass (docs/waiting-room.md) or NULL; not owned */
    size_t pass_len;
    const char *ch;    /* a checked challenge's ticket (engine/challenge.h:
                          sk_challenge_ticket) or NULL; not owned */
    const char *ch_id; /* its id, which names its spent key; not owned */
};

/* A store's identity as Redis carries it (store.h, SK_STORE_IDENTITY_LEN). */
#define SK_STOCK_STORE_ID_LEN 16

struct sk_admission {
    int rc;                         /* SK_RC_OK or a refusal code */
    int replay;                     /* rc OK: the first answer of an Idempotency-Key given
                                       again (nothing admitted now); counted apart */
    int64_t quantity;               /* units admitted (the first answer's on a replay) */
    char order_id[SK_ORDER_ID_MAX]; /* "<activity>-<stream id>" when rc == SK_RC_OK */
    int64_t retry_after_ms;         /* rc == SK_RC_RATE_LIMITED: when a retry is allowed */
};

/* Rate limits passed with a batch (docs/rate-limit.md): GCRA per user and
 * per client IP, requests per second and burst; 0 = off (a burst of 0 is
 * one second's worth). An activity's own per-user limit, written to Redis
 * by preheat, wins over the per-user one here. */
struct sk_rate_limits {
    int64_t user_per_s, user_burst;
    int64_t ip_per_s, ip_burst;
};

/* n (1..SK_BATCH_MAX) purchases of one activity in one purchase_batch
 * call, decided in order (res[i] answers p[i]; an Idempotency-Key given
 * again gets the first accepted answer and buys nothing), with global rate
 * limits rl (NULL: none; the activity's own still applies). The blocking
 * twin of serve's call: same arguments, keys, script and reply decoding.
 * A segmented activity answers SEGMENTED from its base keys (the segment
 * count in res[0].quantity): its purchases are serve's, which sends each
 * to its buyer's home segment and borrows (src/http/purchase_batch.c).
 * *remaining (may be NULL): the stock after the call, -1 when the call was
 * refused before reading it (closed, not started, ended, unknown). */
int sk_stock_buy(sk_redis *r, uint64_t activity_id, const struct sk_rate_limits *rl,
                 const struct sk_purchase *p, size_t n, struct sk_admission *res,
                 int64_t *remaining);

/* Building blocks shared with the async service and the benchmarks: the
 * purchase_batch arguments as strings in buf (cap bytes, at least
 * SK_BATCH_ARG_BYTES(n); args/lens hold SK_BATCH_ARGC(n) entries: the
 * head A_BATCH, then A_BUY per purchase, of script_pos.def), its KEYS
 * (sk_stock_batch_keys) and the decoding of its reply. All pure, no I/O. */
#define SK_BATCH_ARGC(n) (SK_A_BATCH_N + SK_A_BUY_N * (n))
#define SK_BATCH_ARG_BYTES(n)                                                                      \
    (SK_LABEL_MAX + SK_XFER_ID_MAX + 7 * 22 + SK_STOCK_STORE_ID_LEN + 1 + (n) * (22 + 22 + 2))
/* Longest stock transfer id ("<segment>-<n>"). */
#define SK_XFER_ID_MAX 32

/* The head of a purchase_batch call. */
struct sk_batch_head {
    const char *label;               /* "<ID>" or "<ID>.<seg>" (struct sk_keys.label) */
    const struct sk_rate_limits *rl; /* NULL: none */
    const char *xfer_id;             /* a transfer to apply first (segments), or NULL */
    int64_t xfer_qty;
    /* What the caller saw last of the key set (docs/recovery.md): its epoch
     * and admission count, from an earlier reply (sk_stock_batch_seen); 0
     * epoch = nothing known. Same epoch, smaller count in Redis: the call
     * fences the key set and answers RECOVERING. */
    int64_t epoch, adm;
    /* The caller's store identity (SK_STOCK_STORE_ID_LEN hex digits), or
     * NULL / "" when it does not know it: then not checked. A key set
     * preheated from another store refuses every purchase OTHER_STORE
     * (docs/design.md, "The store's identity"). */
    const char *store_id;
};
int sk_stock_batch_args_head(const struct sk_batch_head *h, const struct sk_purchase *p, size_t n,
                             char *buf, size_t cap, const char **args, size_t *lens);
/* The KEYS of a purchase_batch call of n purchases p on key set k, as
 * keys.h lays them out: the key set's, each buyer's rate limiter key,
 * each client IP's when rl (NULL: none) carries a per-IP limit, and each
 * challenge's spent key when a purchase carries a ticket. Pointers into k
 * and buf (cap bytes, at least
 * SK_BATCH_KEY_BYTES(n)); keys holds SK_BATCH_KEYC(n) entries. Returns how
 * many keys, or SK_EINVAL / SK_ENOMEM. */
#define SK_BATCH_KEYC(n) SK_PURCHASE_KEYC(n)
#define SK_BATCH_KEY_BYTES(n) ((n) * (SK_KEY_MAX + SK_RL_KEY_MAX + SK_KEYS_CH_MAX))
int sk_stock_batch_keys(const struct sk_keys *k, const struct sk_rate_limits *rl,
                        const struct sk_purchase *p, size_t n, char *buf, size_t cap,
                        const char **keys);
/* The reply of n purchases into res and *remaining: 0, SK_EPROTO, or
 * SK_ESCRIPT for the script's answer to a malformed call ({BAD_ARGUMENT},
 * lua/lib/args.lua: a caller's bug, never a buyer's answer). */
int sk_stock_batch_parse(const redisReply *rep, size_t n, struct sk_admission *res,
                         int64_t *remaining);
/* The key set's epoch and admission count after a purchase_batch call of n
 * purchases (both 0 when the call did not read them, or was fenced). Pure. */
void sk_stock_batch_seen(const redisReply *rep, size_t n, int64_t *epoch, int64_t *adm);

/* Gives back an order's units once (to the segment the order id names). *rc: SK_RC_RELEASED,
 * ALREADY_RELEASED, UNKNOWN_ORDER (no such order, or not this user's, or another quantity),
 * UNKNOWN_ACTIVITY or BAD_ARGUMENT. *given: units actually added back (capped at initial). */
int sk_stock_release(sk_redis *r, uint64_t activity_id, const char *order_id, uint64_t user_id,
                     int64_t quantity, int *rc, int64_t *given);
/* The release.lua call of that release (shared with the async service):
 * the key set the order id names (an id of another activity: the
 * activity's own, whose script refuses it), its KEYS and ARGV. Pure. */
struct sk_release_call {
    struct sk_keys k;
    const char *keys[SK_RELEASE_NKEYS];
    char buf[SK_A_RELEASE_N][24];
    const char *args[SK_A_RELEASE_N];
};
void sk_stock_release_call(struct sk_release_call *c, uint64_t activity_id, const char *order_id,
                           uint64_t user_id, int64_t quantity);
/* Its reply -> *rc and *given. Returns 0 or SK_EPROTO. Pure. */
int sk_stock_release_parse(const redisReply *rep, int *rc, int64_t *given);

struct sk_stock_def {
    uint64_t id;
    int64_t initial, per_user_limit, max_per_order;
    int64_t start_ms, end_ms;            /* unix ms, [start, end) */
    int64_t rl_per_user_per_s, rl_burst; /* the activity's own rate limit, 0 = none */
    int64_t segments;          /* stock segments (docs/segments.md); 0 or 1 = not segmented */
    int64_t db_held;           /* units the database holds in orders (initial - DB stock): a
                                  preheat finding no live stock then refuses RECOVERING, the
                                  stock is rebuilt from the orders (docs/recovery.md) */
    int64_t wr_rate, wr_ttl_s; /* waiting room (docs/waiting-room.md): passes per second
                                  and a pass's lifetime; wr_rate 0 = none */
    char wr_seed[65];          /* its draw seed (hex); a draw's passes' key (wr_rate 0) */
    char ch[24];               /* the challenge as the scripts check it, meta `ch`
                                  (sk_activity_ch_spec; "" none: docs/challenges.md) */
    int64_t wr_control;        /* the waiting room's emergency controls (SK_WR_* bits) */
    /* pre-registration and the draw (docs/fairness.md): the
     * window (0 0: none) and a winner's time box in ms (0: no draw) */
    int64_t reg_start_ms, reg_end_ms, dr_box_ms;
    /* the preheating store's identity (store.h), stamped into the meta of
     * every key set: "" for none (a key set without one takes the first
     * admitting or preheating caller's) */
    char store_id[SK_STOCK_STORE_ID_LEN + 1];
};

/* Writes stock and meta (d->segments > 1: every segment, then the base
 * meta; docs/segments.md). *rc: PREHEATED, STOCK_LIVE (no-op), IS_OPEN,
 * BELOW_SOLD, BAD_ARGUMENT, OTHER_STORE (the key set was preheated from
 * another store: d->store_id differs from its meta's), or RECOVERING (the key set is fenced, or its
 * keys are gone while d->db_held > 0: rebuild it, docs/recovery.md);
 * *stock: the stock now in Redis. */
int sk_stock_preheat(sk_redis *r, const struct sk_stock_def *d, int force, int *rc, int64_t *stock);
/* The preheat script's ARGV (shared with the async service), A_PREHEAT of
 * script_pos.def: fills buf and args (not a segment: the seg/seg_of pair
 * is empty; no waiting room: its three fields are empty, else
 * args[SK_A_PREHEAT_WR_SEED] points at d->wr_seed; args[SK_A_PREHEAT_STORE]
 * at d->store_id; then the SK_FAIR_ARGC fields of sk_stock_fair_args),
 * returns their count. */
#define SK_PREHEAT_ARGC SK_A_PREHEAT_N
int sk_stock_preheat_args(const struct sk_stock_def *d, int force, char buf[SK_PREHEAT_ARGC][24],
                          const char *args[SK_PREHEAT_ARGC]);

/* The definition's pre-registration, draw and waiting-room controls as
 * script arguments (lua/lib/def.lua: fair_of), shared by preheat and
 * rebuild: registration start and end ms, a winner's box in ms, the
 * controls' bits; "0" for what the activity does not have. Pure. */
#define SK_FAIR_ARGC SK_A_FAIR_N
void sk_stock_fair_args(const struct sk_stock_def *d, char buf[SK_FAIR_ARGC][24]);

/* The settings of every Redis server an activity's sale depends on,
 * judged (redis/redis_settings.h) with its stock as the orders to fit:
 * the master of each of its key sets (segments: each segment's; one
 * command on each makes sure its connection, and so its handshake's INFO,
 * was made) and, behind a Sentinel, the master's replicas (each connected
 * once to be asked); fresh: read every server's settings again (a
 * long-lived client: its connections' may be old). The worst verdict into *worst, "host:port" of it
 * into where (cap bytes). Returns 0, or the error of a master that could not be reached
 * (r->errstr); a replica that cannot be reached is skipped. */
int sk_stock_settings(sk_redis *r, uint64_t activity_id, int segments, int64_t orders, int fresh,
                      struct sk_rset_verdict *worst, char *where, size_t cap);

/* Opens (1) or closes (0) the switch. *rc: OK or UNKNOWN_ACTIVITY. */
int sk_stock_set_open(sk_redis *r, uint64_t activity_id, int open, int *rc);

struct sk_stock_state {
    int exists, open;
    int64_t initial, remaining, released, per_user_limit, max_per_order, start_ms, end_ms;
    int64_t buyers;          /* distinct users holding units */
    int64_t held;            /* units held by buyers (sum of the buyers hash) */
    int64_t stream_len;      /* entries in the stream, one per admission call that admitted
                                (the worker trims persisted ones; sk_stock_stream_orders
                                counts their orders) */
    int64_t reconcile_drift; /* drift found by the last periodic reconcile, -1: none ran */
    int64_t reconcile_ms;    /* when it ran (unix ms) */
    int64_t backlog;         /* stream entries the order worker has not acknowledged, -1 unknown */
    int64_t dlq;             /* dead-lettered entries */
    int64_t xin, xout;       /* segment: units received from / lent to other segments */
    int64_t segments;        /* 1, or how many segments the figures above sum */
    int64_t in_transit;      /* segmented: units lent and not yet received (xout - xin) */
    /* The rollback guard (docs/recovery.md); segmented: summed, and the
     * fence of the first fenced segment. */
    char fence[16];      /* "" none, rollback, vanished, rebuild, oversold, manual */
    char fence_why[208]; /* what the detection saw */
    int64_t fence_ms;    /* when the fence was set (unix ms) */
    int64_t fenced;      /* key sets fenced (0 or 1; segmented: how many segments) */
    int64_t lost;        /* acknowledged admissions counted lost (reached neither store) */
    int64_t oversold;    /* units sold twice before a fence */
    int64_t adm;         /* orders ever admitted (the key set's admission count) */
    int64_t epoch;       /* the key set's incarnation (Redis TIME in us at its preheat) */
};

/* Units admitted over the sale's life, each order once (an
 * Idempotency-Key replay admits nothing) and releases not taken back: what
 * buyers hold plus what was given back. The one "admitted" figure of
 * `seckill activity show`, the stats route, the dashboard and /metrics
 * (seckill_activity_admitted_units). 0 when not preheated. */
int64_t sk_stock_admitted(const struct sk_stock_state *st);

/* Live state, read by one script so the figures are from one instant (for
 * a segmented activity: one script per segment, summed; held + remaining +
 * in_transit == initial still holds, each segment's figures being exact). */
int sk_stock_state(sk_redis *r, uint64_t activity_id, struct sk_stock_state *st);
/* The orders the activity's streams hold now (its segments' for a
 * segmented one): an entry holds one order, or several (lib/admit.lua),
 * so stream_len counts entries and this counts orders. Reads every entry:
 * for benchmarks, tests and operators, never a hot path. 0 or a negative
 * SK_E* code (r->errstr). */
int sk_stock_stream_orders(sk_redis *r, uint64_t activity_id, int64_t *orders);
/* Decodes the state script's reply (shared with the async service). */
int sk_stock_state_parse(const redisReply *rep, struct sk_stock_state *st);

/* Deletes every key of the activity (every segment's too). */
int sk_stock_drop(sk_redis *r, uint64_t activity_id);
/* The DEL of every key of key set k (shared with the async service):
 * argv of SK_STOCK_DROP_ARGC entries, pointing into k. Pure. */
#define SK_STOCK_DROP_ARGC 16
void sk_stock_drop_argv(const struct sk_keys *k, const char *argv[SK_STOCK_DROP_ARGC]);

/* The same calls on one key set: an unsegmented activity, or one segment
 * (segment.c builds the segmented operations from these). */
int sk_stock_batch_call(sk_redis *r, const struct sk_keys *k, const struct sk_batch_head *h,
                        const struct sk_purchase *p, size_t n, struct sk_admission *res,
                        int64_t *remaining);
int sk_stock_state_keys(sk_redis *r, const struct sk_keys *k, struct sk_stock_state *st);
int sk_stock_drop_keys(sk_redis *r, const struct sk_keys *k);

#endif
