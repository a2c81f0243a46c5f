/* recover.h - rebuilding an activity's live state in Redis from the
 * database after Redis went back in time (docs/recovery.md): the order
 * worker runs it on its own when it detects a rollback, `seckill activity
 * recover` runs it for an operator, `seckill activity preheat` runs it when
 * an activity's keys vanished while the database holds its orders.
 *
 * Per key set (an unsegmented activity, or one segment), in this order:
 * fence (no admission from here on), settle the transfers of a segmented
 * activity; when keys vanished (all, or some: an operator's DEL, an
 * eviction), salvage into the database the orders its stream and ledger
 * still hold (salvage.h), drop what the replay writes back and start the
 * stock again (reset.lua), or rebuild the definition; replay the
 * database's orders that Redis does not know (replay.lua, in chunks,
 * idempotent), then resume: the admission count above every number the
 * database and the callers saw, new stream ids above every persisted one,
 * the switch as the database records it, and the fence lifted unless units
 * were sold twice before it (then the key set stays fenced with stock 0 and
 * `oversold` set). Every step that changes something writes an audit row.
 *
 * A dry run (apply 0) reads only and reports what the replay would do.
 * One thread's object: a store handle and a Redis handle of its own. */
#ifndef SK_RECOVER_H
#define SK_RECOVER_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/keys.h"
#include "engine/recovery.h"
#include "engine/segment.h"
#include "orders/salvage.h"
#include "redis/redis_conn.h"
#include "store/store.h"

struct sk_recover_opts {
    int apply;         /* 0: dry run, nothing written */
    const char *actor; /* "worker" | "operator" | "preheat": log lines and audit rows */
    /* Key sets to recover: NULL = every one that needs it; else only[s]
     * for segment s of a segmented activity (an unsegmented activity's one
     * key set is always considered). */
    const unsigned char *only;
};

/* One key set: what was found, and what the replay did (or would do). */
struct sk_recover_ks {
    struct sk_keys k;
    struct sk_keyset_probe before; /* Redis before the recovery */
    int64_t watermark;             /* highest admission number the database holds */
    int selected, needed, vanished;
    int lost;                  /* some keys vanished, others not (before.lost, or fenced `lost`) */
    int reset;                 /* reset.lua started its stock again */
    struct sk_salvage salvage; /* what its stream and ledger still held */
    char reason[256];          /* why it needs a recovery */
    /* the database's orders of this key set */
    int64_t db_orders, db_held_units;
    char max_sid[SK_STORE_STREAM_ID_MAX];
    /* the orders Redis does not know (dry run: found; apply: put back) */
    int64_t missing_held, missing_held_units, missing_released, releases_again;
    int64_t missing_paid_units;  /* of missing_held_units, the paid orders' (never refused) */
    int64_t refused_units_after; /* dry run: unpaid units estimated not to fit the stock
                                    (limits and keys are the apply's to find); apply: the
                                    refused orders' units */
    int rebuilt;
    int64_t rebuilt_initial;
    int64_t lent_lost;         /* segment: units it forgot lending */
    int64_t conflicts;         /* database orders whose id the ledger holds for another admission */
    int64_t refused_cancelled; /* held unpaid orders that did not fit this Redis's history:
                                  cancelled in the database (replay.lua) */
    struct sk_replay_result replay;
    struct sk_resume_result resume;
    int64_t stock_after, oversold_after; /* dry run: estimated; apply: the result */
};

struct sk_recover_report {
    uint64_t id;
    int segments; /* 1, or S */
    int apply;
    size_t n;                 /* key sets */
    struct sk_recover_ks *ks; /* n entries, owned by the report */
    int needed;               /* some key set needs (or needed) a recovery */
    int base_rebuilt;         /* segmented: the base meta was written again */
    int draw_restored;        /* the recorded draw was written back into Redis */
    int fenced_after;         /* key sets still fenced after an apply (oversold) */
    int64_t orders_replayed, oversold, lost, settled_units, forgotten_units;
    int64_t refused;   /* unpaid orders cancelled because they did not fit */
    int64_t salvaged;  /* orders only Redis held, put into the database */
    int64_t conflicts; /* order ids the ledger holds for another admission */
    int64_t ms;        /* how long it took */
};

/* Recovers activity id (sk_recover_opts). Returns 0 with *rep filled
 * (free with sk_recover_report_free, also after a failure), or SK_ENOTFOUND
 * (no such activity), or the store's or Redis's failure, with err (cap
 * bytes) saying why. A failure half-way leaves the key sets fenced: the
 * next run (the worker's next check) finishes the job. */
int sk_recover_activity(sk_store *st, sk_redis *r, uint64_t id, const struct sk_recover_opts *o,
                        struct sk_recover_report *rep, char *err, size_t cap);
void sk_recover_report_free(struct sk_recover_report *rep);

/* One line per key set that needs (or needed) a recovery, and a summary. */
void sk_recover_print(FILE *f, const struct sk_recover_report *rep);

/* The cheap half for a key set fenced `oversold`: pays the oversold units
 * back from stock given back since (cancelled orders) and lifts the fence
 * when they are covered. *resumed: 1 when it did. */
int sk_recover_oversold_retry(sk_store *st, sk_redis *r, const struct sk_activity *a,
                              const struct sk_keys *k, int64_t watermark, int *resumed);

#endif
