/* recovery.h - the Redis side of the rollback guard (docs/recovery.md): what
 * a recovery reads of a key set, and the scripts that fence it, rebuild
 * its keys, replay the database's orders into it and resume it. One key
 * set is an unsegmented activity's {a<ID>} or one segment's {a<ID>.s<i>};
 * every call touches one slot (segments: one per segment).
 *
 * The decisions (which key sets, which orders, what the database holds)
 * are the orders layer's (orders/recover.h); these calls only carry them
 * out. Blocking; stock.h's convention: 0 when Redis answered, a negative
 * SK_E* code (details in r->errstr) when it did not. */
#ifndef SK_RECOVERY_H
#define SK_RECOVERY_H
#include <stddef.h>
#include <stdint.h>

#include "engine/keys.h"
#include "engine/stock.h"
#include "redis/redis_conn.h"

#define SK_FENCE_MAX 16
/* Orders per replay.lua call: short scripts, Redis never blocked long. */
#define SK_REPLAY_CHUNK 500

/* What a recovery first reads of a key set (one pipelined round for many). */
struct sk_keyset_probe {
    int present;              /* meta holds a definition (initial) */
    int has_stock;            /* the stock key exists */
    int64_t stock;            /* its value (0 when absent) */
    int64_t adm;              /* admission count (0 when absent) */
    int64_t epoch;            /* incarnation (0 when absent) */
    int64_t xseq;             /* segment: transfer numbers used */
    int64_t oversold;         /* units counted sold twice */
    int segments;             /* base meta of a segmented activity: its segments field */
    char fence[SK_FENCE_MAX]; /* "" none */
    char fence_why[208];      /* what the detection saw */
    /* Some of its keys vanished while others are there (an operator's DEL,
     * an eviction): the stock or the definition alone, or a key meta
     * `keys` says must exist (the order stream, the ledger, the idem
     * hash: lib/admit.lua), or the buyers hash while units are held. */
    int lost;
    char lost_what[48]; /* the missing keys' names, "stock meta orders ledger idem buyers" */
    int has_ledger;     /* the ledger hash exists (it holds every order admitted here) */
};

/* One HMGET of meta, one GET of stock and an EXISTS of the stream, ledger,
 * buyers, idem hash and registrants' set per key set, all pipelined (on a cluster every node
 * answers its own at once). */
int sk_recovery_probe(sk_redis *r, const struct sk_keys *ks, size_t n, struct sk_keyset_probe *out);

/* fence.lua: why "rollback" | "rebuild" | "manual", text (cut at 200
 * bytes). fence (SK_FENCE_MAX bytes, may be NULL): the fence in force after
 * the call (an earlier one stays). SK_EINVAL for a refused argument. */
int sk_recovery_fence(sk_redis *r, const struct sk_keys *k, const char *why, const char *text,
                      char *fence);

/* rebuild.lua: meta from d (the database's definition, its waiting room
 * included) with initial units (a segment's own share) and stock = initial,
 * on a fenced key set whose keys vanished, stamped with d->store_id (the
 * rebuilding store's identity, "" none). segments > 1: k is segment k->seg of that many. *rc:
 * SK_RC_PREHEATED, or SK_RC_STOCK_LIVE (live stock exists: nothing written). */
int sk_recovery_rebuild(sk_redis *r, const struct sk_keys *k, const struct sk_stock_def *d,
                        int64_t initial, int segments, int *rc);

/* reset.lua: on a fenced key set some of whose keys vanished (probe
 * `lost`), after what survived was salvaged into the database: drops
 * buyers, ledger, released and idem, and when meta holds the definition
 * writes stock = initial + xin - xout under a new epoch (*rc
 * SK_RC_PREHEATED, *stock); without one (*rc SK_RC_UNKNOWN_ACTIVITY) the
 * caller rebuilds it (sk_recovery_rebuild, which needs the stock key gone:
 * it is). The order stream is left as it is. */
int sk_recovery_reset(sk_redis *r, const struct sk_keys *k, int *rc, int64_t *stock);

/* One database order to put back. */
struct sk_replay_order {
    const char *order_id; /* an order id of this key set (order_id.h) */
    uint64_t user_id;
    int64_t quantity;
    int released;         /* 1: cancelled and released in the database; 0: held */
    int paid;             /* held and paid: never refused */
    const char *idem_key; /* its Idempotency-Key, "" or NULL none */
};

/* What replay.lua did (sums over the calls). */
struct sk_replay_result {
    int64_t held, held_units;       /* held orders put back, their units */
    int64_t released;               /* released orders recorded */
    int64_t again;                  /* releases Redis had lost, applied again */
    int64_t oversold;               /* units that did not fit (sold twice: paid orders) */
    int64_t stock;                  /* stock after the last call */
    int64_t refused, refused_units; /* held unpaid orders this Redis's history refused */
    int64_t paid_over_limit;        /* paid orders put back over their buyer's limit */
    int64_t idem_restored;          /* Idempotency-Key records put back */
    int64_t calls;
};

/* replay.lua over o[0..n) in chunks of SK_REPLAY_CHUNK, adding into *res
 * (zero it first). A held, unpaid order that does not fit this Redis's own
 * history (its buyer's Idempotency-Key bought another order here, or its
 * units would take the buyer past the limit or the stock below 0) is not
 * written: its index into o goes to refused[*nrefused++] (refused has room
 * for n; may be NULL when the caller knows none can be). SK_EINVAL when
 * the script refused an argument. */
int sk_recovery_replay(sk_redis *r, const struct sk_keys *k, const struct sk_replay_order *o,
                       size_t n, struct sk_replay_result *res, size_t *refused, size_t *nrefused);

struct sk_resume_args {
    int64_t watermark;   /* highest admission number the database holds */
    const char *max_sid; /* greatest stream id of a persisted order, NULL or "" none */
    int open;            /* the switch as the database records it: 1, 0, -1 keep */
    int64_t lent;        /* segment: units a receiver applied that it forgot lending */
    int64_t xseq;        /* segment: highest transfer number of it a receiver knows */
    int64_t over;        /* units to count oversold on top */
    int64_t xout_seen;   /* segment: its xout counter lent was computed against */
};

struct sk_resume_result {
    int64_t oversold; /* units still oversold: the fence stays */
    int64_t stock;
    int64_t lost; /* acknowledged admissions counted lost by this call */
    int64_t adm;
    int resumed; /* 1: the fence is lifted (or there was none) */
};

/* resume.lua: ends the recovery of a fenced key set. */
int sk_recovery_resume(sk_redis *r, const struct sk_keys *k, const struct sk_resume_args *a,
                       struct sk_resume_result *res);

/* What the ledger knows of each of n order ids (one HMGET): into state[i]
 * 0 unknown, 1 held (unmarked), 2 released; user[i]/qty[i] (may be NULL)
 * what the entry says. n <= 1000. */
int sk_recovery_ledger(sk_redis *r, const struct sk_keys *k, const char *const *oids, size_t n,
                       int *state, uint64_t *user, int64_t *qty);

/* Whether the ledger of each of n key sets holds one order id (pipelined
 * HEXISTS; oids[i] NULL or "": not asked, has[i] 1): a key set whose
 * ledger lacks an order the database holds has gone back in time, however
 * many admissions it made since. */
int sk_recovery_ledger_has(sk_redis *r, const struct sk_keys *ks, const char *const *oids, size_t n,
                           int *has);

/* Segments: transfers segment v lent that a receiver applied although v's
 * own meta does not know them (their number is above xseq, v's counter:
 * v went back in time after lending). *units: their units, *max_seq: the
 * highest transfer number of v any receiver knows (0 none). */
int sk_recovery_lost_lends(sk_redis *r, uint64_t activity_id, int segments, int v, int64_t xseq,
                           int64_t *units, int64_t *max_seq);

/* Segments: the sums of every segment's xin and xout counters (one
 * pipelined round), and segment v's xout. After a settle nothing is in
 * transit, so sum(xin) - sum(xout) > 0 are units applied by receivers that
 * their lenders no longer count: a lender went back in time. */
int sk_recovery_transfer_sums(sk_redis *r, uint64_t activity_id, int segments, int v, int64_t *xin,
                              int64_t *xout, int64_t *xout_v);

/* Segments: forgets the transfers other segments recorded as lent to v
 * (v's keys vanished: it is rebuilt with what its buyers hold, and a
 * settle must not apply old transfers again). *units: theirs. */
int sk_recovery_forget_lends_to(sk_redis *r, uint64_t activity_id, int segments, int v,
                                int64_t *units);

#endif
