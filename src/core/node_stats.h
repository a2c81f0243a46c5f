/* node_stats.h - the figures every process of one `seckill serve` node
 * shares, so that one scrape of /metrics (or the dashboard) on any HTTP
 * process reports the whole node.
 *
 * One segment of shared memory (MAP_SHARED | MAP_ANONYMOUS) made by the
 * supervisor before it forks: every child, and a child restarted after a
 * crash, maps the same pages. It holds one slot per HTTP process (bytes the
 * HTTP layer lays out: its metrics registry, http/metrics.h) and, when the
 * node runs one, the worker slot (struct sk_node_worker). Every slot has a
 * process header (struct sk_node_proc).
 *
 * Never backwards: a slot outlives its process. A restarted process is
 * given the same slot and goes on adding to what its predecessor left, so a
 * sum over the slots only grows, whatever crashes.
 *
 * Each slot has one writing process; any process reads. Counters are 64-bit
 * and aligned (a reader never sees half a value); the worker's sample of
 * activity figures is published under a sequence lock, so a reader copies
 * one consistent sample. No locks, no system calls after sk_node_new. */
#ifndef SK_NODE_STATS_H
#define SK_NODE_STATS_H
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

enum sk_node_kind { SK_NODE_UNUSED = 0, SK_NODE_API = 1, SK_NODE_WORKER = 2 };

/* The header of a slot: which process writes it now. */
struct sk_node_proc {
    _Atomic int kind;           /* enum sk_node_kind */
    _Atomic int pid;            /* the process writing the slot now, 0 before the first start */
    _Atomic uint64_t starts;    /* processes that wrote the slot: starts - 1 restarts */
    _Atomic int64_t started_ms; /* wall clock, when the current one started */
    _Atomic int64_t beat_ms;    /* wall clock, its last sign of life */
    _Atomic int waiting;        /* SK_NODE_WAIT_* bits: what it still waits for (0: ready) */
};

/* What a process waits for before it can serve (the supervisor's
 * readiness, cmd/serve_notify.h). */
enum {
    SK_NODE_WAIT_START = 1, /* still starting: listeners not bound yet */
    SK_NODE_WAIT_REDIS = 2, /* Redis not reached (or its scripts not loaded) */
    SK_NODE_WAIT_DB = 4     /* the database not reached */
};

/* The worker process's counters, named in worker_counters.def. */
enum sk_node_wc {
#define SK_WC(field, kind, name, help) SK_WC_##field,
#include "core/worker_counters.def"
#undef SK_WC
    SK_WC_COUNT_
};
enum sk_node_wc_kind { SK_WC_COUNTER, SK_WC_GAUGE };

/* One activity as the worker process last sampled it (Redis and the
 * database). Counts of orders by database status: created, paid,
 * cancelled (the store's order). */
#define SK_NODE_ACTS 64
#define SK_NODE_NAME 128 /* an activity name's room (engine/activity.h) */
#define SK_NODE_NSTATUS 3
struct sk_node_act {
    uint64_t id;
    char name[SK_NODE_NAME];
    int64_t start_ms, end_ms;
    int32_t exists; /* preheated: Redis holds its stock */
    int32_t open;   /* the switch */
    int64_t segments;
    int64_t initial, remaining; /* units; remaining includes units moving between segments */
    int64_t released;           /* units given back */
    int64_t backlog;            /* order events not yet persisted (-1: unknown) */
    int64_t oldest_age_ms;      /* age of the oldest of them on Redis's clock (0: none,
                                   -1: unknown) */
    int64_t dlq;                /* entries in the dead-letter stream(s) */
    int64_t db_stock;
    int64_t orders[SK_NODE_NSTATUS], units[SK_NODE_NSTATUS];
    int64_t reconcile_drift; /* -1: never checked */
    int64_t reconcile_ms;    /* when (wall clock ms), 0: never */
    int64_t admitted;        /* units admitted over the sale's life, each order once
                                (what buyers hold plus what was given back): the one
                                "admitted" figure of the CLI, the dashboard, /metrics */
    int64_t registered;      /* registrants in Redis's set (-1: no registration) */
};

/* An activity live in Redis that this node's database would never
 * persist (docs/design.md, "The store's identity"): unknown to the
 * database, or listed by it while another store preheated its live
 * state. */
#define SK_NODE_ORPHANS 16
#define SK_NODE_STORE_ID 17 /* a store identity's room: 16 hex digits */
enum sk_node_orphan_why { SK_NODE_ORPHAN_UNKNOWN = 1, SK_NODE_ORPHAN_OTHER_STORE = 2 };
struct sk_node_orphan {
    uint64_t id;
    int32_t why;                     /* enum sk_node_orphan_why */
    int32_t open;                    /* its switch */
    char store_id[SK_NODE_STORE_ID]; /* the store that preheated it ("" not known) */
};

/* What the worker process's sampler last saw. */
struct sk_node_sample {
    int64_t sampled_ms; /* 0: no sample yet */
    int32_t redis_ok, db_ok;
    char redis_err[128], db_err[128];
    int32_t n_acts;
    int32_t more_acts; /* activities left out: more than SK_NODE_ACTS */
    struct sk_node_act acts[SK_NODE_ACTS];
    char store_id[SK_NODE_STORE_ID]; /* this node's database's identity ("" not read) */
    int64_t orphans_ms;              /* when Redis's activities were last listed (0: never) */
    int32_t n_orphans, more_orphans;
    struct sk_node_orphan orphans[SK_NODE_ORPHANS];
};

/* One webhook endpoint of the worker's dispatcher (orders/webhooks.h):
 * written by its thread, the name once before it starts. */
#define SK_NODE_WEBHOOKS 16 /* == SK_WH_MAX_ENDPOINTS */
struct sk_node_webhook {
    char name[64];
    _Atomic uint64_t delivered, failed, dead; /* events; failed: attempts */
    _Atomic int64_t oldest_ms; /* wall time of the oldest undelivered event taken, 0 none */
    _Atomic int retrying;      /* its head event failed at least once */
    _Atomic int paused;        /* paused by the admin API (a database endpoint) */
    _Atomic int secrets;       /* secrets signing: 2 during a rotation */
};

struct sk_node_worker {
    struct sk_node_proc proc;
    _Atomic int n_webhooks; /* endpoints the dispatcher runs (names set first) */
    struct sk_node_webhook webhooks[SK_NODE_WEBHOOKS];
    _Atomic uint64_t wc[SK_WC_COUNT_];
    _Atomic uint32_t seq; /* odd while the sample is being written */
    struct sk_node_sample sample;
};

typedef struct sk_node sk_node;

/* Maps a segment of n_api HTTP slots of api_bytes each (0..256 slots) and
 * a worker slot when with_worker, all zero. Returns 0, SK_EINVAL or SK_EIO
 * (mmap failed). The caller owns *out (sk_node_free); children inherit the
 * mapping across fork. */
int sk_node_new(sk_node **out, int n_api, size_t api_bytes, int with_worker);
/* Unmaps (in this process). NULL is fine. */
void sk_node_free(sk_node *n);

int sk_node_api_slots(const sk_node *n);
/* The HTTP slot i's bytes (api_bytes, 64-byte aligned), or NULL. */
void *sk_node_api_mem(sk_node *n, int i);
/* Slot i's header: 0..n_api-1 the HTTP slots, n_api the worker's (when the
 * node has one); NULL out of range. */
struct sk_node_proc *sk_node_proc_at(sk_node *n, int i);
/* Slots with a header: n_api, plus one with a worker. */
int sk_node_procs(const sk_node *n);
/* The worker slot, or NULL when the node has none. */
struct sk_node_worker *sk_node_worker(sk_node *n);

/* Claims a slot for the calling process: kind, pid, starts + 1, started
 * and heartbeat now. */
void sk_node_proc_start(struct sk_node_proc *p, enum sk_node_kind kind);
/* A sign of life (the wall clock now); cheap enough for every loop pass. */
void sk_node_proc_beat(struct sk_node_proc *p, int64_t now_ms);
/* What the process still waits for (SK_NODE_WAIT_* bits; start sets
 * SK_NODE_WAIT_START). p NULL: nothing. */
void sk_node_proc_waiting(struct sk_node_proc *p, int bits);

/* Worker counters: add to a counter, set a gauge. w NULL: nothing. */
static inline void sk_node_wc_add(struct sk_node_worker *w, enum sk_node_wc c, uint64_t n)
{
    if (w && n) atomic_fetch_add_explicit(&w->wc[c], n, memory_order_relaxed);
}
static inline void sk_node_wc_set(struct sk_node_worker *w, enum sk_node_wc c, uint64_t v)
{
    if (w) atomic_store_explicit(&w->wc[c], v, memory_order_relaxed);
}
uint64_t sk_node_wc_get(const struct sk_node_worker *w, enum sk_node_wc c);
/* The metric name, help text and kind of a counter (static strings). */
const char *sk_node_wc_name(enum sk_node_wc c);
const char *sk_node_wc_help(enum sk_node_wc c);
enum sk_node_wc_kind sk_node_wc_kind_of(enum sk_node_wc c);
/* The field name of worker_counters.def ("persisted"), for JSON. */
const char *sk_node_wc_field(enum sk_node_wc c);

/* Publishes a sample (one writer: the worker process's sampler). */
void sk_node_sample_put(struct sk_node_worker *w, const struct sk_node_sample *s);
/* Copies the last published sample into out; 0, or SK_ESTATE when a writer
 * kept it busy through every retry (out is then all zero). */
int sk_node_sample_get(const struct sk_node_worker *w, struct sk_node_sample *out);

#endif
