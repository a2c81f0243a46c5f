/* order_worker_int.h - what the files of the order worker share; callers
 * use order_worker.h only.
 *
 *   order_worker.c   the worker's life and its loop of passes
 *   order_fetch.c    the reads of a pass: history, claims, new entries
 *   order_batch.c    one fetch: parse, persist, ack, poison
 *   order_stall.c    the warning of a worker that makes no progress
 *   order_streams.c  which streams it follows (the activity list, segment
 *                    detection, consumer groups) and their trimming
 *   order_guard.c    the rollback guard: key sets behind the database are
 *                    fenced and rebuilt (orders/recover.h) */
#ifndef SK_ORDER_WORKER_INT_H
#define SK_ORDER_WORKER_INT_H
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "engine/keys.h"
#include "orders/order_event.h"
#include "orders/order_worker.h"
#include "redis/redis_conn.h"
#include "store/store.h"

#define SK_WORKER_ID_MAX 48 /* "<ms>-<seq>" */

/* One followed order stream: an unsegmented activity's, or one segment's
 * (k.seg >= 0; k.label "<ID>.<seg>" prefixes its order ids). */
struct worker_stream {
    uint64_t aid; /* the activity's numeric id, also the entries' aid field */
    struct sk_keys k;
    int group_ready;
    int history_due;                     /* re-read this consumer's own pending entries */
    char history_from[SK_WORKER_ID_MAX]; /* where the history pass continues */
    char claim_cursor[SK_WORKER_ID_MAX]; /* XAUTOCLAIM cursor, "0-0" at the start */
    int64_t next_claim_ms, next_trim_ms;
    int seen;     /* mark for the re-list */
    int segcheck; /* base stream of an activity that may still turn out segmented */
};

/* The worker's own counters (struct sk_worker_stats, atomic). */
struct worker_counters {
#define SK_WC(field, kind, name, help)
#define SK_WC_WORKER(field, kind, name, help) _Atomic uint64_t field;
#define SK_WC_SWEEP(field, kind, name, help)
#include "core/worker_counters.def"
#undef SK_WC
};

/* Store attempts and Redis retries back off from MIN to MAX, doubling. */
#define SK_WORKER_BACKOFF_MIN_MS 50
#define SK_WORKER_BACKOFF_MAX_MS 2000

/* Where a fetched entry came from. */
enum { FROM_NEW, FROM_HISTORY, FROM_CLAIM };

/* One fetched stream entry (one order, or several: lib/admit.lua); id
 * and fields point into the reply. */
struct worker_entry {
    size_t si;
    const char *id;
    size_t idlen;
    const redisReply *fields; /* NULL: deleted from the stream while pending */
    int source;
    int bad; /* not an order: poison */
    char reason[200];
    size_t oi; /* its orders: w->orders[oi..oi+no) when valid */
    size_t no;
};

/* Orders persisted in one store transaction at most (a fetch of entries
 * that hold more is persisted in groups of entries: an entry holds up to
 * SK_OID_INDEX_MAX orders). */
#define SK_WORKER_TXN_ORDERS 8192

struct sk_worker {
    struct sk_worker_opts o;
    char *redis_url, *db_spec;
    char consumer[SK_WORKER_CONSUMER_MAX];
    sk_redis *r;
    sk_store *st;
    struct worker_stream *s;
    size_t ns, scap;
    int64_t next_relist_ms;
    atomic_int stop;
    sk_webhooks *webhooks; /* while sk_worker_run runs, when endpoints are set */
    struct worker_counters c;
    char errstr[512];
    /* Fetch scratch, grown as needed. */
    struct worker_entry *e;
    struct sk_order *orders;
    struct sk_event_field *fields; /* one entry's fields (order_event.h) */
    size_t ecap, ocap, fcap;
    const char **argv;
    size_t *lens;
    size_t acap, lcap;
    /* Test-build fault points (SK_TEST, SECKILL_TEST_CRASH_*): the
     * transaction number at which to _exit(9), 0 = never (always in a
     * release build). */
    uint64_t crash_before, crash_after, txns;
    int redis_down; /* logged once per outage */
    /* The last fetch of new entries: when it began, and whether it was short
     * (entries, but no stream's batch full): linger_ms then paces the next. */
    int64_t fetch_ms;
    int fetch_short;
    /* The rollback guard (order_guard.c): when it runs next, and the
     * connection count and MOVED count it last ran with. */
    int64_t guard_next_ms;
    unsigned guard_connects;
    uint64_t guard_moved;
    /* No progress (stall_warn_ms): the acknowledgement count last seen, when
     * it last moved (or nothing waited), when to look again. */
    uint64_t stall_acked;
    int64_t stall_since_ms, stall_next_ms;
    /* Test builds only (SK_TEST, SECKILL_TEST_PAUSE_AT=<step>; empty in a
     * release build): the multi-command step at
     * which the worker stops itself once (SIGSTOP), so that a test can
     * break a server exactly there and continue it (SIGCONT). */
    char pause_at[32];
    int paused;
    /* The store's identity (docs/design.md), and the activities the store
     * lists whose live state another store preheated: not followed, each
     * logged once (while it stays so). */
    char store_id[SK_STORE_IDENTITY_MAX];
    uint64_t *foreign;
    size_t nforeign, foreign_cap;
};

/* Adds n to counter `field` of w (atomic: sk_worker_stats reads them), and
 * to the node's counter of the same name (core/worker_counters.def). */
#define SK_WORKER_INC(w, field, n)                                                                 \
    do {                                                                                           \
        atomic_fetch_add(&(w)->c.field, (uint64_t)(n));                                            \
        sk_node_wc_add((w)->o.node, SK_WC_##field, (uint64_t)(n));                                 \
    } while (0)

/* w->errstr, printf-style. */
#define sk_worker_set_err(w, ...) sk_errf((w)->errstr, sizeof(w)->errstr, 0, __VA_ARGS__)
/* Test-only: stops this process (SIGSTOP) the first time it reaches step
 * when SECKILL_TEST_PAUSE_AT names it ("xack", "xread", "probe", "ledger",
 * "segments", "dead_letter": the steps that send several commands in one
 * round trip). It only pauses: every reply stays real. */
void sk_worker_test_pause(sk_worker *w, const char *step);
/* A failed Redis call (rc): counted, logged once per outage; returns rc. */
int sk_worker_redis_fail(sk_worker *w, int rc, const char *what);
/* A Redis call answered: ends an outage (logged). */
void sk_worker_redis_ok(sk_worker *w);
/* An error reply (or another unexpected type): logged, SK_EPROTO. */
int sk_worker_reply_fail(sk_worker *w, const redisReply *rep, const char *what);

/* Sleeps ms, waking early when stopped (never used for correctness, only
 * to pace retries). */
void sk_worker_nap(sk_worker *w, int ms);
/* Room for a command of n arguments (w->argv and w->lens); SK_ENOMEM. */
int sk_worker_grow_argv(sk_worker *w, size_t n);

/* (order_fetch.c) This consumer's own pending entries of stream si
 * (XREADGROUP ... <id>), handed to sk_worker_process; *got: how many. */
int sk_worker_fetch_history(sk_worker *w, size_t si, size_t *got);
/* The entries of stream si idle on any consumer (XAUTOCLAIM). */
int sk_worker_fetch_claimed(sk_worker *w, size_t si, size_t *got);
/* New entries of every ready stream in one XREADGROUP (block_ms < 0: no
 * BLOCK). */
int sk_worker_fetch_new(sk_worker *w, int block_ms, size_t *got);

/* (order_batch.c) Handles the n fetched entries in w->e: parse, persist
 * (one transaction), ack, and poison handling. On failure nothing of the
 * fetch is acked and its streams re-read their pending entries on the
 * next pass. */
int sk_worker_process(sk_worker *w, size_t n);

/* (order_stall.c) No entry acknowledged for stall_warn_ms: asks Redis what
 * waits and warns (see order_stall.c); call it as often as convenient. */
void sk_worker_stall_check(sk_worker *w, int64_t now);

/* (order_streams.c) Re-reads the activity list: follows new activities'
 * streams (each segment's for a segmented one), drops deleted ones, and
 * settles streams still waiting to know whether they are segmented. */
int sk_worker_relist(sk_worker *w);
/* Creates the consumer group of s (idempotent); its history is then due. */
int sk_worker_make_group(sk_worker *w, struct worker_stream *s);
/* Stream s lost its group: re-list before re-creating it. */
void sk_worker_lost_group(sk_worker *w, struct worker_stream *s);
/* Trims the acknowledged head of the streams whose turn it is (all of them
 * when `all`). */
int sk_worker_trim_due(sk_worker *w, int all);

/* (order_guard.c) The rollback guard, when it is due: every followed key
 * set against the database's watermark and definition; a key set behind
 * the database, vanished, or fenced by a buyer's call is recovered
 * (orders/recover.h). Returns a Redis failure (the pass retries), 0
 * otherwise (store failures and failed recoveries are logged, counted and
 * retried at the next check). */
int sk_worker_guard(sk_worker *w);

#endif
