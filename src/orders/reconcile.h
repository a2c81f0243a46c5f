/* reconcile.h - compares an activity's live state in Redis with the DB,
 * reports every drift, and optionally repairs what is provably safe.
 *
 * Redis is the authority on admission (the ledger sk:{a<ID>}:ledger holds
 * one entry per admitted order, written by the same script that took the
 * stock); the DB is the authority on an order's fate (created, paid,
 * cancelled). Each check below compares one pair of them; docs/reconcile.md
 * has the formulas, what --repair does and what it never does.
 *
 * Reads happen in an order that makes a live sale safe to check: one
 * atomic Redis snapshot (MULTI: stock, meta, buyers, ledger), then the
 * stream group's backlog, then the DB; the few orders found in the DB but
 * not in the snapshot's ledger are looked up again afterwards. So an order
 * admitted or persisted while the check runs is never reported as drift.
 *
 * A segmented activity (segment.h, docs/segments.md) is checked segment by
 * segment: each segment's key set {a<ID>.s<i>} (its own snapshot, stream
 * group, ledger and buyers) against the DB orders whose id carries its
 * label "<ID>.<i>", with the per-segment invariant
 *   stock_i + sum(buyers_i) == initial_i + xin_i - xout_i;
 * the DB checks and figures stay activity-wide, and stock transfers taken
 * from a lender and never applied at their receiver are reported
 * (in_transit) and, with --repair, rolled forward (sk_seg_settle).
 *
 * A sale bigger than a chunk (opts.chunk ledger entries; the worker's
 * periodic check sets one, `seckill reconcile` reads one snapshot, several
 * times faster on a big sale) is checked slice by slice, so memory is
 * bounded by the chunk, not the sale: slice s holds
 * the orders and buyers of the users u with u % S == s (S = the slices),
 * read with HSCAN; the invariant stock + held == initial comes from the
 * state script (one instant), and a user whose counts differ is read again
 * in one WATCH/EXEC before it is reported (a purchase or release of that
 * user during the pass is judged on the next one).
 *
 * An incremental check (opts.since_ms) reads only the DB orders admitted
 * since a time, each page looked up in the ledger, plus the figures that
 * cost no memory (the invariant, the DB stock, counts); it turns into a
 * full check in the same call (rep->escalated) when the counts say a
 * ledger order may be missing from the DB (ledger entries > DB orders +
 * backlog) or the backlog holds an order older than the stale bound.
 *
 * Used by `seckill reconcile` (cli_reconcile.c: always full) and,
 * periodically, by the worker process (sk_reconcile_periodic: incremental,
 * full every SK_RECONCILE_FULL_EVERY passes). */
#ifndef SK_RECONCILE_H
#define SK_RECONCILE_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "redis/redis_conn.h"
#include "store/store.h"

/* Kinds of drift, in report order. */
enum sk_drift_kind {
    SK_DRIFT_REDIS_MISSING,          /* the DB activity was preheated, Redis has no live state */
    SK_DRIFT_DB_MISSING,             /* live state in Redis, no activity row in the DB */
    SK_DRIFT_STORE,                  /* the live state belongs to another store (its identity
                                        in Redis is not this database's), or nodes of another
                                        store were refused its purchases (docs/design.md,
                                        "The store's identity") */
    SK_DRIFT_INITIAL_MISMATCH,       /* Redis initial != DB stock_initial */
    SK_DRIFT_REDIS_INVARIANT,        /* Redis stock + sum(buyers) != initial (a segment's:
                                        != initial + xin - xout; or the segments' shares
                                        do not add up to the activity's initial) */
    SK_DRIFT_IN_TRANSIT,             /* segmented: a stock transfer taken from a lender more
                                        than grace ago and never applied at its receiver
                                        (or the transfer counters disagree with them) */
    SK_DRIFT_USER_COUNT,             /* buyers[u] != units of u's unreleased ledger entries */
    SK_DRIFT_LOST_ORDER,             /* in the ledger, not in the DB, not in the backlog */
    SK_DRIFT_STALE,                  /* in the ledger and the backlog, not in the DB, admitted
                                        longer ago than the bound (stale_after_ms): the order
                                        pipeline is stuck */
    SK_DRIFT_NOT_IN_LEDGER,          /* in the DB, not in the ledger */
    SK_DRIFT_ORDER_MISMATCH,         /* DB user/quantity != the ledger's (or a malformed entry) */
    SK_DRIFT_DB_STOCK,               /* DB stock != initial - units of orders not cancelled */
    SK_DRIFT_CANCELLED_NOT_RELEASED, /* cancelled in the DB, units still held in Redis */
    SK_DRIFT_RELEASED_NOT_CANCELLED, /* released in Redis, DB order still created */
    SK_DRIFT_PAID_RELEASED,          /* paid in the DB, released in Redis: serious */
    SK_DRIFT_FENCED,                 /* purchases fenced while the key set is rebuilt from
                                        the DB (docs/recovery.md) */
    SK_DRIFT_OVERSOLD,               /* units sold twice before a rollback was fenced: buyers
                                        hold more than the stock (docs/recovery.md) */
    SK_DRIFT_ORDER_CONFLICT,         /* admissions whose order id the DB held for another
                                        one (two histories that diverged), recorded in
                                        order_conflicts and never inserted */
    SK_DRIFT_NKINDS
};

/* "lost_order", ... (static); "?" for another value. */
const char *sk_drift_name(int kind);

#define SK_RECONCILE_TEXT_MAX 512

/* One drift found. */
struct sk_drift {
    int kind;
    int segment;           /* the segment it was found in, SK_SEG_NONE (-1): the
                              activity as a whole (or an unsegmented one) */
    struct sk_order order; /* the order concerned (order_id "" when none) */
    char text[SK_RECONCILE_TEXT_MAX];
};

/* One repair made (or attempted: ok 0). */
struct sk_repair {
    int kind; /* the drift kind it fixes */
    int ok;
    int segment; /* as in struct sk_drift */
    char text[SK_RECONCILE_TEXT_MAX];
};

/* Redis figures of the activity, or of one segment (for a segmented
 * activity the activity's are the segments' summed, initial being the base
 * meta's). */
struct sk_reconcile_redis {
    int present; /* meta and stock exist (segmented activity: of some segment) */
    int64_t initial, remaining;
    int64_t xin, xout;                       /* segment counters: units received / lent */
    int64_t held, buyers;                    /* sum of the buyers hash, and its users */
    int64_t admitted_orders, admitted_units; /* ledger entries and their units */
    int64_t released_orders, released_units; /* ledger entries marked released */
    int64_t released_meta;                   /* meta "released" (units given back) */
    int group;                               /* the worker's consumer group exists */
    int64_t pending, undelivered;            /* undelivered -1: unknown */
    int64_t backlog;                         /* entries not yet acknowledged */
    int64_t backlog_orders;                  /* ledger orders waiting there, not in the DB */
    int64_t dlq;                             /* dead-lettered entries */
    char last_delivered[48];
};

/* Stock transfers between segments (segmented activities only). */
struct sk_reconcile_transit {
    int64_t lent, received;     /* meta xout and xin counters, summed over segments */
    int64_t units, transfers;   /* unapplied transfers (lent, not applied at the receiver) */
    int64_t stale, stale_units; /* of those, taken more than grace ago */
};

/* The store's identity (docs/design.md): this database's, Redis's owner
 * of the activity (its base meta's store_id, "" none) and the last store
 * whose nodes were refused its purchases ("" none), and when. */
struct sk_reconcile_owner {
    char store_id[SK_STORE_IDENTITY_MAX];
    char redis[SK_STORE_IDENTITY_MAX];
    char refused[SK_STORE_IDENTITY_MAX];
    int64_t refused_ms;
    int note; /* the drift is only the refused purchases' note (a repair clears it) */
};

struct sk_reconcile_db {
    int present;
    char state[16];
    int64_t initial, stock, stock_expected;
    struct sk_order_counts counts;
    int64_t owed_recent; /* cancelled within the grace, release not yet seen */
};

/* The report of one activity. Arrays are allocated here: free with
 * sk_reconcile_report_free. */
struct sk_reconcile_report {
    uint64_t activity_id;
    int repair;     /* --repair ran */
    int consistent; /* no drift (after the repair, when it ran) */
    struct sk_reconcile_redis redis;
    struct sk_reconcile_db db;
    struct sk_reconcile_owner owner;
    int segments;                   /* 1 (not segmented), or S */
    struct sk_reconcile_redis *seg; /* S > 1: each segment's figures (S entries) */
    struct sk_reconcile_transit transit;
    int settled;                   /* --repair rolled unapplied transfers forward */
    int64_t settled_units;         /* units it applied */
    size_t found[SK_DRIFT_NKINDS]; /* drift found, per kind */
    size_t total;                  /* sum of found[] */
    struct sk_drift *drift;        /* every drift found */
    size_t ndrift, drift_cap;
    struct sk_repair *repairs;
    size_t nrepairs, repairs_cap;
    size_t repair_failures;
    size_t remaining[SK_DRIFT_NKINDS]; /* after the repair (a second check) */
    size_t remaining_total;
    /* How the check read (docs/reconcile.md, "The periodic check"). */
    int incremental;  /* only the orders since opts.since_ms were compared */
    int escalated;    /* an incremental check that turned into a full one */
    int slices;       /* full check: ledger slices read one after another (1: one snapshot) */
    size_t rows_read; /* DB order rows read */
    size_t peak_held; /* most ledger entries held in memory at once */
    /* The reconcile.drift event (sk_reconcile_drift_event): 1 written, 0
     * none (no drift, not news, or not asked), < 0 the store's failure. */
    int event;
};

#define SK_RECONCILE_GRACE_MS 5000
/* An admitted order still on its way to the DB this long after its
 * admission is drift: the worker persists within a second when healthy, an
 * order left pending by a dead worker is claimed after its claim-idle time
 * (30 s) plus half of it (the claim scan), and a recovery or a database
 * outage the worker rides out takes seconds; past a minute something is
 * stuck (docs/reconcile.md). */
#define SK_RECONCILE_STALE_AFTER_MS 60000
/* A full check holds at most about this many ledger entries at once (a
 * bigger sale is read in slices, ~130 bytes an entry while held). */
#define SK_RECONCILE_CHUNK 50000

struct sk_reconcile_opts {
    int repair;             /* fix what is safe, one audit row per change */
    int64_t now_ms;         /* 0: the wall clock */
    int64_t grace_ms;       /* an order cancelled less than this ago whose release is
                               not seen yet is a cancel in progress, not drift; so is
                               a stock transfer taken less than this ago and not yet
                               applied (default SK_RECONCILE_GRACE_MS) */
    int64_t stale_after_ms; /* an order in the stream backlog admitted longer ago than
                               this is drift (stale); 0: not checked (default
                               SK_RECONCILE_STALE_AFTER_MS) */
    size_t chunk;           /* ledger entries held at once by a full check (0: no
                               bound, one snapshot: fastest, memory grows with the
                               sale; the worker's periodic check uses
                               SK_RECONCILE_CHUNK) */
    int64_t since_ms;       /* > 0: incremental: only DB orders admitted at or after
                               this (unix ms, the order id's stream time) are compared
                               with the ledger; no repair then */
};

void sk_reconcile_opts_init(struct sk_reconcile_opts *o);

/* Checks (and with o->repair, repairs) one activity, segment by segment when
 * it is segmented (sk_seg_count). rep is filled (free it
 * with sk_reconcile_report_free, whatever the result). Returns 0 when the
 * check ran (the verdict is rep->consistent); SK_ENOTFOUND when the
 * activity is neither in the DB nor in Redis; SK_EIO / SK_ETIMEDOUT /
 * SK_EPROTO (Redis, detail r->errstr), SK_EDB (detail sk_store_errstr),
 * SK_ENOMEM. o may be NULL (defaults: check only). */
int sk_reconcile_activity(sk_store *st, sk_redis *r, uint64_t activity_id,
                          const struct sk_reconcile_opts *o, struct sk_reconcile_report *rep);

void sk_reconcile_report_free(struct sk_reconcile_report *rep);

/* The worker's periodic check: per activity, the first pass and every
 * full_every-th are full, the others incremental from the previous pass's
 * start less overlap_ms (orders persisted late, e.g. claimed from a dead
 * worker, are still compared; an order in the backlog longer than the
 * stale bound makes the pass full). Drift an incremental pass cannot see
 * (a ledger entry or a user's count altered in Redis for an old order) is
 * found by the next full pass: within full_every passes. */
#define SK_RECONCILE_FULL_EVERY 10
#define SK_RECONCILE_OVERLAP_MS (SK_RECONCILE_STALE_AFTER_MS + SK_RECONCILE_GRACE_MS)

struct sk_reconcile_mark {
    uint64_t activity_id;
    int64_t since_ms; /* the start of its last pass */
    unsigned passes;  /* passes run */
    int64_t clean_ms; /* the start of its last full pass that found no drift, 0 none */
};

struct sk_reconcile_periodic {
    int full_every;     /* SK_RECONCILE_FULL_EVERY by default */
    int64_t overlap_ms; /* SK_RECONCILE_OVERLAP_MS by default */
    size_t chunk;       /* 0: SK_RECONCILE_CHUNK */
    struct sk_reconcile_mark *m;
    size_t n, cap;
};

void sk_reconcile_periodic_init(struct sk_reconcile_periodic *p);
/* Frees the marks (p stays usable, every activity starts with a full pass). */
void sk_reconcile_periodic_free(struct sk_reconcile_periodic *p);
/* One pass over one activity (no repair): as sk_reconcile_activity. The
 * mark moves only when the check ran; drift that is news is written to
 * the outbox (sk_reconcile_drift_event: rep->event). */
int sk_reconcile_periodic_run(struct sk_reconcile_periodic *p, sk_store *st, sk_redis *r,
                              uint64_t activity_id, struct sk_reconcile_report *rep);

/* ---- The reconcile.drift event (reconcile_event.c, docs/integration.md) --
 *
 * A pass that finds drift writes one event to the outbox (subject
 * "activity-<ID>", payload: schema v, the check, the kinds found and
 * their counts, the total; after --repair what remains) when it is news
 * against the activity's latest reconcile.drift event:
 *   - none yet, or a full pass found the activity clean since it was
 *     written (clean_ms, the caller's memory: the worker's marks);
 *   - a full pass: a kind's count differs from the event's (a kind
 *     appeared, went, grew or shrank);
 *   - an incremental pass (which does not see every kind): a kind's count
 *     is above the event's.
 * So the same drift seen pass after pass writes one event, a clean pass
 * none. */

/* The payload of rep's event into out (cap bytes): its length, or
 * SK_EINVAL when it does not fit. */
int sk_reconcile_drift_payload(const struct sk_reconcile_report *rep, char *out, size_t cap);
/* 1 when rep's drift is news against last (the latest event's payload,
 * NULL none), written at last_ms; clean_ms as above (0: unknown). */
int sk_reconcile_drift_news(const struct sk_reconcile_report *rep, const char *last,
                            int64_t last_ms, int64_t clean_ms);
/* Writes rep's event when it found drift and it is news (one transaction
 * with the read of the latest one: sk_store_event_if); rep->event says
 * what happened. now_ms 0: the wall clock. 0, or the store's code. */
int sk_reconcile_drift_event(sk_store *st, struct sk_reconcile_report *rep, int64_t clean_ms,
                             int64_t now_ms);

/* Human report: one line of Redis figures (segmented: the activity's, with
 * its transfers, then one per segment, at most max_lines), one of DB
 * figures, one per drift (at most max_lines per kind, then a count; a
 * segment's start "segment <i>: "), one per repair, and a verdict line;
 * every line starts "activity <ID>: ". */
void sk_reconcile_print(FILE *f, const struct sk_reconcile_report *rep, size_t max_lines);

/* The report as a JSON object (new reference, caller json_decref's it;
 * NULL when out of memory). Drift entries: at most max_lines per kind.
 * Segmented: "segments", "segment_figures" (one Redis object per segment),
 * "transit", and with --repair "settled" / "settled_units"; drift and
 * repair entries of a segment carry "segment". */
json_t *sk_reconcile_json(const struct sk_reconcile_report *rep, size_t max_lines);

#endif
