/* order_worker.h - the order worker: Redis order streams -> the store,
 * exactly once.
 *
 * For every activity in the store (re-listed periodically, so a new
 * activity is picked up without a restart) the worker is a consumer of the
 * group "seckill" on sk:{a<ID>}:orders, or, for an activity preheated with
 * S > 1 segments (docs/segments.md), on each segment's stream
 * sk:{a<ID>.s<i>}:orders (order ids "<ID>.<i>-<stream id>"; the segment
 * count is read from Redis, see order_streams.c). Per fetch:
 * XREADGROUP a batch,
 * parse it, persist it in ONE store transaction (sk_store_orders_persist:
 * the order id is the primary key, so a re-delivered entry is a no-op),
 * and only after the commit XACK. A crash anywhere leaves the entries
 * pending; they are delivered again (this consumer re-reads its own pending
 * entries at start and after a failure; entries of a dead consumer are
 * taken over with XAUTOCLAIM after claim_idle_ms) and persisting them again
 * changes nothing.
 *
 * Poison: an entry that cannot be an order (missing or garbage fields, or
 * refused by the store's constraints) stays pending and is delivered
 * again; once its delivery count exceeds max_deliveries it is moved to the
 * dead-letter stream of its key set, sk:{a<ID>}:dlq or sk:{a<ID>.s<i>}:dlq
 * (reason + original fields) and acked in
 * one MULTI. A valid entry is never dead-lettered: when the database is
 * down it waits in the stream, however many times it was delivered.
 *
 * Trimming removes only acknowledged entries: XTRIM MINID below the group's
 * oldest pending entry and at most up to its last-delivered id.
 *
 * One worker is one thread's object (its own Redis connection and store
 * handle); sk_worker_stop and sk_worker_stats may be called from any thread
 * (and sk_worker_stop from a signal handler). */
#ifndef SK_ORDER_WORKER_H
#define SK_ORDER_WORKER_H
#include <stddef.h>
#include <stdint.h>

#include "core/node_stats.h"
#include "orders/webhooks.h"
#include "scripts_gen.h"

#define SK_WORKER_GROUP SK_NAME_WORKER_GROUP /* src/engine/script_names.def */
#define SK_WORKER_CONSUMER_MAX 64

struct sk_worker_opts {
    const char *redis_url; /* required; copied */
    const char *db_spec;   /* required; copied */
    const char *consumer;  /* NULL: "worker-<hostname>"; copied */
    int batch;          /* entries per stream per fetch (1..10000), default 500; an entry holds the
                           orders of one admission call (SK_WORKER_TXN_ORDERS per transaction) */
    int block_ms;       /* XREADGROUP BLOCK when idle, default 1000 */
    int claim_idle_ms;  /* XAUTOCLAIM entries idle this long, default 30000 */
    int max_deliveries; /* K: poison goes to the DLQ after K deliveries, default 5 */
    int relist_ms;      /* re-read the activity list this often, default 1000 */
    int trim;           /* 1 (default): trim acknowledged entries */
    int once;           /* 1: drain what is there, then sk_worker_run returns */
    struct sk_node_worker *node; /* NULL, or the node's worker slot (core/node_stats.h): every
                                    counter below is added there too, so the node's /metrics
                                    shows them; not owned */
    /* The rollback guard checks every followed key set against the
     * database this often (and at once after a reconnect or a MOVED);
     * default 1000, 0 = off (docs/recovery.md). */
    int guard_ms;
    /* No progress: when no entry was acknowledged for this long while
     * entries wait (or Redis cannot say), the worker logs a warning, again
     * every stall_warn_ms while it lasts; default 10000, 0 = off. */
    int stall_warn_ms;
    /* After a fetch of new entries that filled no stream's batch, the next
     * read waits until linger_ms after this one began, so that a trickle of
     * orders shares one transaction (and one sync to disk, one XACK) instead
     * of paying them per handful; 0..1000, default 20, 0 = read again at
     * once. Never with once. */
    int linger_ms;
    /* The webhook dispatcher (webhooks.h) sk_worker_run starts next to the
     * pipeline (not with once) and stops when it returns: n_webhooks
     * configured endpoints (not owned: read when sk_worker_run starts; 0:
     * none), and the database's (the admin API's). */
    const struct sk_wh_endpoint *webhooks;
    int n_webhooks;
    struct sk_wh_opts webhook_opts;
};

/* Fills o with the defaults (redis_url and db_spec NULL). */
void sk_worker_opts_init(struct sk_worker_opts *o);

/* Counters since the worker was created; read atomically one by one. One
 * field per SK_WC_WORKER row of core/worker_counters.def (its help says
 * what it counts). */
struct sk_worker_stats {
#define SK_WC(field, kind, name, help)
#define SK_WC_WORKER(field, kind, name, help) uint64_t field;
#define SK_WC_SWEEP(field, kind, name, help)
#include "core/worker_counters.def"
#undef SK_WC
};

typedef struct sk_worker sk_worker;

/* Creates a worker: copies o, opens the store (migrations run) and
 * prepares the Redis connection (connected lazily). On failure *out is NULL
 * and err (cap bytes) says why: SK_EINVAL (bad option, URL or spec),
 * SK_EDB, SK_ENOMEM. The caller owns *out: sk_worker_free. */
int sk_worker_new(sk_worker **out, const struct sk_worker_opts *o, char *err, size_t cap);

/* Frees everything; NULL is fine. Not while sk_worker_run runs. */
void sk_worker_free(sk_worker *w);

/* Runs until sk_worker_stop (the batch in hand is finished first), or, with
 * opts.once, until a pass finds nothing to do. Redis and store failures
 * are retried with backoff forever (with once: a bounded number of times).
 * Returns 0, or the last SK_E* failure when once gave up (detail in
 * sk_worker_errstr). */
int sk_worker_run(sk_worker *w);

/* Asks sk_worker_run to return after the current batch (within block_ms).
 * Async-signal-safe. */
void sk_worker_stop(sk_worker *w);

void sk_worker_stats(const sk_worker *w, struct sk_worker_stats *out);

/* Detail of the last failure. Owned by w. */
const char *sk_worker_errstr(const sk_worker *w);

/* The consumer name in use (owned by w). */
const char *sk_worker_consumer(const sk_worker *w);

/* The CLI, `seckill worker`, is sk_cli_worker (src/cmd/cli_worker.c). */

#endif
