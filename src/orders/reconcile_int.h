/* reconcile_int.h - what the files of the reconcile module share; callers
 * use reconcile.h only.
 *
 *   reconcile.c         the check (one run per activity) and the entry point
 *   reconcile_read.c    reading Redis: snapshots, the consumer group's view,
 *                       ledger look-ups
 *   reconcile_seg.c     stock transfers between segments
 *   reconcile_repair.c  repair planning and applying
 *   reconcile_report.c  the report: drift and repair lines, text and JSON
 *   reconcile_event.c   the reconcile.drift event written to the outbox
 *
 * A run (struct rec_run) is one activity; it holds one context (struct
 * rec_ctx) per key set: the activity's, or each segment's. */
#ifndef SK_RECONCILE_INT_H
#define SK_RECONCILE_INT_H
#include <stddef.h>
#include <stdint.h>

#include "engine/keys.h"
#include "orders/reconcile.h"
#include "redis/redis_conn.h"
#include "redis/stream_id.h"
#include "store/store.h"

#define SK_RECONCILE_PAGE 1000  /* DB orders per page, pending ids per XPENDING */
#define SK_RECONCILE_VERIFY 200 /* users read again per WATCH/EXEC (sliced check) */

/* ---- Report building (reconcile_report.c) --------------------------------- */

/* Adds a drift of segment seg (SK_SEG_NONE: the activity as a whole), whose
 * text then starts "segment <seg>: ". 0 or SK_ENOMEM. */
int sk_reconcile_add_drift(struct sk_reconcile_report *rep, int seg, int kind,
                           const struct sk_order *o, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Adds a repair line of segment seg (its text prefixed as a drift's); a
 * failed one (ok 0) is counted in rep->repair_failures. Out of memory only
 * the line is lost: the change itself is done and audited. */
void sk_reconcile_add_repair(struct sk_reconcile_report *rep, int seg, int kind, int ok,
                             const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* ---- Reading Redis (reconcile_read.c) -------------------------------------- */

struct rec_cmd {
    int argc;
    const char **argv;
};

/* Sends n commands in one round trip and reads the n replies into rep[]
 * (the caller frees each). On a failure every rep[i] is NULL and, when the
 * replies could not all be read, the connection is dropped (a half-read
 * pipeline would answer the next command with an old reply). */
int sk_reconcile_pipeline(sk_redis *r, size_t n, const struct rec_cmd *cmds, redisReply **rep);
/* Frees the non-NULL replies of rep[0..n). */
void sk_reconcile_free_replies(redisReply **rep, size_t n);
/* Sets r->errstr to "<what>: unexpected reply[: <error reply>]"; returns
 * r->err = SK_EPROTO. rep may be NULL. */
int sk_reconcile_proto_err(sk_redis *r, const char *what, const redisReply *rep);
/* Every field of hash key, HSCAN by HSCAN (1000 at a time), each pair given
 * to fn; fn's failure returned as is. A reply of another shape is SK_EPROTO
 * (sk_reconcile_proto_err; what NULL: r->errstr "unexpected reply"). */
int sk_reconcile_hscan(sk_redis *r, const char *key, const char *what,
                       int (*fn)(void *arg, const redisReply *k, const redisReply *v), void *arg);
/* A meta field that may be absent (0 then). */
int64_t sk_reconcile_opt_i64(const redisReply *v);

/* One ledger entry: order id -> "user:qty[:released]". */
struct rec_lentry {
    char oid[SK_STORE_ORDER_ID_MAX];
    uint64_t user;
    struct sk_sid sid; /* the stream id inside the order id */
    int64_t qty;
    int released;
    int in_db; /* set by the merge with the DB orders */
};

struct rec_uunits {
    uint64_t user;
    int64_t units;
};

/* One Redis view of a key set. Owned arrays: sk_reconcile_snap_free. */
struct rec_snap {
    int present;
    int64_t initial, stock, released_meta, dlq;
    int64_t xin, xout; /* segment counters (0 for an unsegmented activity) */
    /* The rollback guard (docs/recovery.md): the fence ("" none) and what
     * it says, units counted sold twice (stock + held == own + oversold). */
    char fence[16], fence_why[208];
    int64_t oversold;
    struct rec_uunits *buyers;
    size_t nb;
    struct rec_lentry *ledger; /* well-formed entries, sorted by order id */
    size_t nl;
    char **bad; /* malformed ledger entries ("id=value"), reported as they are */
    size_t nbad;
    size_t bcap, lcap; /* allocated entries (slices, look-ups) */
    /* Read in slices or incrementally: the whole key set's figures from the
     * state script (one instant), and the ledger's length. */
    int64_t held, nbuyers, ledger_len;
};

void sk_reconcile_snap_free(struct rec_snap *s);
/* Frees the buyers, ledger and malformed entries only (the figures stay). */
void sk_reconcile_snap_drop_rows(struct rec_snap *s);
/* The figures of key set k at one instant (the state script: stock, meta,
 * the buyers hash's sum and size, DLQ length, the guard's fields) and the
 * ledger's length, into s (its rows untouched). */
int sk_reconcile_read_head(sk_redis *r, const struct sk_keys *k, struct rec_snap *s);
/* Slice `slice` of nslices: the buyers u with u % nslices == slice, and
 * the ledger entries of those users (malformed ones: slice 0), read with
 * HSCAN (so not at one instant: sk_reconcile_verify_users), sorted, into
 * s's rows (replacing them). */
int sk_reconcile_read_slice(sk_redis *r, const struct sk_keys *k, int nslices, int slice,
                            struct rec_snap *s);
/* The ledger entries of the DB orders o[0..n) (those present and well
 * formed), sorted, into s's rows (replacing them). */
int sk_reconcile_ledger_fetch(sk_redis *r, const struct sk_keys *k, const struct sk_order *o,
                              size_t n, struct rec_snap *s);

/* A user whose buyers figure differed from its ledger units in a slice. */
struct rec_udiff {
    uint64_t user;
    int64_t buyers, ledger; /* as the slice read them */
    int confirmed;          /* still so, and unchanged, at one instant */
};
/* Reads the buyers figure and the slice's ledger entries of each d[i].user
 * again at one instant (WATCH, HMGET, HMGET, MULTI/EXEC) and sets
 * d[i].confirmed when the two still differ as the slice saw them. */
int sk_reconcile_verify_users(sk_redis *r, const struct sk_keys *k, const struct rec_snap *s,
                              struct rec_udiff *d, size_t n);
/* qsort/bsearch orders: ledger entries by order id, users by id. */
int sk_reconcile_cmp_lentry(const void *a, const void *b);
int sk_reconcile_cmp_uunits(const void *a, const void *b);

/* Reads the snapshot of one key set (the activity's, or one segment's: one
 * slot either way): atomically (MULTI) for a check, or after WATCH for a
 * repair (then EXEC fails if anything changed since the WATCH). s is the
 * caller's (sk_reconcile_snap_free), empty on a failure. */
int sk_reconcile_read_snap(sk_redis *r, const struct sk_keys *k, int watch, struct rec_snap *s);
/* Non-released ledger units per user, sorted by user (*out allocated, the
 * caller frees it; *n entries). 0 or SK_ENOMEM. */
int sk_reconcile_ledger_users(const struct rec_lentry *l, size_t nl, struct rec_uunits **out,
                              size_t *n);
/* Calls fn (when not NULL) for every user whose buyers count differs from
 * the ledger's. Returns the number of such users, or SK_ENOMEM. */
long sk_reconcile_user_diffs(const struct rec_snap *s,
                             void (*fn)(void *arg, uint64_t user, int64_t buyers, int64_t ledger),
                             void *arg);
/* Units held by buyers: the sum of the buyers hash. */
int64_t sk_reconcile_held_units(const struct rec_snap *s);

/* The consumer group's view of a key set's order stream. */
struct rec_backlog {
    int group;
    struct sk_sid last; /* last-delivered id (ms UINT64_MAX: no stream) */
    int64_t pending, undelivered;
    struct sk_sid *p; /* pending ids, ascending (owned) */
    size_t np, pcap;
};

/* Reads the group of key set k (XINFO GROUPS, XLEN, XPENDING) into b (the
 * caller frees b->p) and its figures into out. */
int sk_reconcile_read_group(sk_redis *r, const struct sk_keys *k, struct rec_backlog *b,
                            struct sk_reconcile_redis *out);
/* Is the order with stream id sid still on its way to the DB? */
int sk_reconcile_in_backlog(const struct rec_backlog *b, struct sk_sid sid);
/* Looks up n order ids in the ledger of k again, the i-th at ids + i *
 * stride (the order ids of an array of drift); present[i] is 0 when
 * absent, 1 when held, 2 when released. */
int sk_reconcile_ledger_lookup(sk_redis *r, const struct sk_keys *k, const char *ids, size_t stride,
                               size_t n, int *present);

/* ---- One run (reconcile.c) -------------------------------------------------- */

/* One key set checked: the activity's (not segmented), or one segment's. */
struct rec_ctx {
    sk_store *st;
    sk_redis *r;
    uint64_t aid;
    struct sk_keys k;
    int seg; /* SK_SEG_NONE, or the segment k belongs to */
    int64_t now, grace, stale;
    struct sk_reconcile_report *rep;
    struct sk_reconcile_redis *rr; /* this key set's figures (rep->redis or rep->seg[i]) */
    struct rec_snap s;
    struct rec_backlog b;
    size_t li;        /* merge cursor in s.ledger */
    int counters_bad; /* repair: the transfer counters are not trusted (no stock repair) */
    /* Candidates looked up again after the DB read (indexes into rep->drift
     * are not stable while it grows, so they are kept apart). */
    struct sk_drift *cand;
    size_t ncand, candcap;
    int in_slices; /* read slice by slice (REC_SLICED) */
    /* Sliced: users whose counts differ in the slice, verified before
     * they are reported. */
    struct rec_udiff *ud;
    size_t nud, udcap;
    int ud_nomem;
};

enum {
    REC_SNAPSHOT, /* one snapshot of every key set (a sale of at most a chunk) */
    REC_SLICED,   /* full, slice by slice (sk_reconcile_read_slice) */
    REC_SINCE     /* incremental: the DB orders since since_ms */
};

/* One activity: its key sets, one per segment (one when not segmented). */
struct rec_run {
    sk_store *st;
    sk_redis *r;
    uint64_t aid;
    int64_t now, grace, stale;
    struct sk_reconcile_report *rep;
    int mode;             /* REC_SNAPSHOT, REC_SLICED or REC_SINCE */
    int nslices, slice;   /* REC_SLICED: the slices, the one being checked */
    int64_t since_ms;     /* REC_SINCE: DB orders from this stream time on */
    int escalate;         /* REC_SINCE: the counts ask for a full check */
    int nseg;             /* 1: not segmented */
    struct rec_ctx *cs;   /* nseg of them */
    int64_t base_initial; /* segmented: the base meta's initial, -1 when absent */
};

/* ---- Stock transfers between segments (reconcile_seg.c) --------------------- */

/* Segmented: rep->transit, and in_transit drift for transfers lent more
 * than grace ago and never applied, malformed ones, and counters that no
 * set of transfers explains. */
int sk_reconcile_check_transit(struct rec_run *u);
/* The transfer figures as they are now (the same reads as the check). */
int sk_reconcile_transit_now(struct rec_run *u, struct sk_reconcile_transit *out);

/* ---- Repair (reconcile_repair.c) -------------------------------------------- */

/* Fixes what is provably safe in u->rep's drift, one audit row per change,
 * one repair line each (u->rep->repairs). */
void sk_reconcile_repair(struct rec_run *u);

#endif
