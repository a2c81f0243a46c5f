/* metrics_int.h - the metrics registry's layout, shared by metrics.c (the
 * registry, its Prometheus text) and ops_view.c (the node's figures for the
 * dashboard). Callers outside src/http use metrics.h.
 *
 * The registry is one flat struct with no pointers to the heap, so it can
 * live in a slot of the node's shared segment (core/node_stats.h): the
 * label names point to static strings of the binary, the same in every
 * process forked from one supervisor (and rebuilt by sk_metrics_attach). */
#ifndef SK_METRICS_INT_H
#define SK_METRICS_INT_H
#include <stdint.h>

#include "core/codes.h"
#include "http/metrics.h"

#define SK_MSTATUS_SLOTS 600 /* index = HTTP status; slot 0 = out of 100..599 */
#define SK_MMAX_REASONS (SK_RC_COUNT_ + SK_MEXTRA_COUNT + 1)
#define SK_MRTT_BUCKETS 14
#define SK_MBATCH_BUCKETS 11 /* le 1, 2, 4, ..., 1024 */
#define SK_MLAT_BUCKETS 15
/* Waiting-room pass events: issued (handed out), spent, expired. */
#define SK_MQ_EVENTS 3

/* Upper bounds of the purchase latency and Redis round-trip buckets, in
 * seconds. */
extern const double sk_metrics_lat_le[SK_MLAT_BUCKETS];
extern const double sk_metrics_rtt_le[SK_MRTT_BUCKETS];

/* One activity's purchases as this registry counted them. */
struct sk_metrics_act {
    uint64_t id;   /* 0: free */
    uint64_t used; /* the registry's clock at the last update: the oldest row is reused */
    uint64_t admitted_units, admissions;
    uint64_t replays; /* 200s that gave an earlier admission's answer again */
    uint64_t refusals[SK_MMAX_REASONS];
    /* the waiting room (docs/waiting-room.md): pass events (counters), and
     * the queue as a Redis reply last showed it (gauges, q_at_ms the wall
     * clock then; 0: never seen) */
    uint64_t passes[SK_MQ_EVENTS];
    int64_t q_length, q_issued, q_rate, q_at_ms;
};

/* One Redis master's memory and verdict as this process's client last read
 * them (redis_settings.h): gauges, the newest read wins in a merge. */
#define SK_MMASTERS 16
struct sk_metrics_master {
    char addr[80];     /* "host:port"; "" a free row */
    int64_t used, max; /* used_memory, maxmemory (0: none); -1 not said */
    int unsafe;        /* its settings refuse sales (maxmemory-policy) */
    int64_t at_ms;     /* wall clock of the report */
};

struct sk_metrics {
    uint64_t magic; /* a registry already laid out in this memory (attach) */
    int owned;      /* 1: sk_metrics_new's heap, freed by sk_metrics_free */
    uint64_t requests[SK_MROUTE_COUNT][SK_MSTATUS_SLOTS];
    uint64_t admissions, soldout_fastpath;
    uint64_t replays; /* Idempotency-Key retries answered 200 again: not admissions */
    uint64_t refusals[SK_MMAX_REASONS];
    uint64_t rtt_bucket[SK_MRTT_BUCKETS + 1]; /* last: +Inf */
    double rtt_sum;
    uint64_t batch_bucket[SK_MBATCH_BUCKETS + 1];
    uint64_t batch_sum;
    uint64_t lat_bucket[SK_MLAT_BUCKETS + 1]; /* purchase latency */
    double lat_sum;
    int64_t inflight;
    uint64_t act_clock;
    int act_hint;                  /* the row of the last update */
    uint64_t passes[SK_MQ_EVENTS]; /* waiting-room pass events, every activity */
    int queue_used;                /* 1 once a waiting-room figure was counted */
    struct sk_metrics_act acts[SK_METRICS_ACTS];
    struct sk_metrics_master masters[SK_MMASTERS];
    /* label table, the same in every registry of one binary */
    const char *reason_name[SK_MMAX_REASONS];
    int n_reasons, other_reason;
    int rc_reason[SK_RC_COUNT_]; /* -1: not a refusal, ignored */
    int extra_reason[SK_MEXTRA_COUNT];
};

#endif
