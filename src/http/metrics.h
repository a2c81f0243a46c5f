/* metrics.h - the per-process metrics registry of `seckill serve`, rendered
 * as Prometheus text exposition format 0.0.4 for GET /metrics.
 *
 * One registry per event-loop process, updated without locks (one loop per
 * process; do not share a registry between threads). Every update is O(1):
 * array indexing, no allocation, no string compares except in
 * sk_metrics_refusal (a scan of ~15 short names; prefer the _rc and _extra
 * forms on the hot path). A multi-process server can sum registries with
 * sk_metrics_merge.
 *
 * Series:
 *   seckill_http_requests_total{route,status}     counter (non-zero pairs only)
 *   seckill_admissions_total                      counter (purchases admitted)
 *   seckill_refusals_total{reason}                counter (every reason, 0 too)
 *   seckill_soldout_fastpath_total                counter (409s with no Redis trip)
 *   seckill_redis_roundtrip_seconds               histogram, 50us .. 1s
 *   seckill_batch_size                            histogram, 1, 2, 4 .. 1024
 *   seckill_inflight_requests                     gauge
 *   seckill_redis_cluster_redirections_total{kind} counter (cluster clients only,
 *                                                 process-wide: see below)
 * and once this process answered a waiting-room request (docs/waiting-room.md):
 *   seckill_queue_passes_total{event}             counter: issued (handed out by
 *                                                 this process), spent (by its
 *                                                 purchases), expired (found by it)
 *   seckill_queue_length{activity}                gauge: buyers in the queue
 *   seckill_queue_passes_issued{activity}         gauge: places holding a pass
 *   seckill_queue_pace{activity}                  gauge: passes per second
 * The three gauges are Redis's figures as this process last saw them (every
 * process reports the same queue: merge keeps the newest, never a sum). */
#ifndef SK_METRICS_H
#define SK_METRICS_H
#include <stddef.h>
#include <stdint.h>

#include "http/router.h"

typedef struct sk_metrics sk_metrics;

/* The route label: a fixed set so the series count stays bounded whatever
 * paths clients send. The three order routes share "orders". */
enum sk_metrics_route {
    SK_MROUTE_PURCHASE,
    SK_MROUTE_ACTIVITY,
    SK_MROUTE_ADMIN_CREATE,
    SK_MROUTE_ADMIN_PREHEAT,
    SK_MROUTE_ADMIN_OPEN,
    SK_MROUTE_ADMIN_CLOSE,
    SK_MROUTE_ADMIN_STATS,
    SK_MROUTE_ORDERS,
    SK_MROUTE_HEALTHZ,
    SK_MROUTE_READYZ,
    SK_MROUTE_METRICS,
    SK_MROUTE_DASHBOARD,
    SK_MROUTE_QUEUE_JOIN,
    SK_MROUTE_QUEUE_POLL,
    SK_MROUTE_ADMIN_PACE_SET,
    SK_MROUTE_ADMIN_PACE_GET,
    SK_MROUTE_OTHER, /* 404s, and anything out of range */
    SK_MROUTE_COUNT
};

/* Refusal reasons that are not admission codes of codes.def. */
enum sk_metrics_extra {
    SK_MEXTRA_RATE_LIMITED,
    SK_MEXTRA_UNAUTHORIZED,
    SK_MEXTRA_BAD_REQUEST,
    SK_MEXTRA_UNAVAILABLE,
    SK_MEXTRA_COUNT
};

/* Allocates a zeroed registry (~62 KiB). Returns NULL when out of memory.
 * The caller owns it and releases it with sk_metrics_free (NULL is fine). */
sk_metrics *sk_metrics_new(void);
void sk_metrics_free(sk_metrics *m);

/* Route label of a router route (router.h); routes the table does not
 * know (SK_ROUTE_COUNT for a 404, a route added later) become "other". */
enum sk_metrics_route sk_metrics_route_of(enum sk_route r);
/* "purchase", "admin_create", ...; "other" when out of range. Static. */
const char *sk_metrics_route_name(enum sk_metrics_route r);

/* One answered request. A status outside 100..599 is counted as "other". */
void sk_metrics_request(sk_metrics *m, enum sk_metrics_route route, int status);
/* n purchases admitted (one Redis reply may admit several). */
void sk_metrics_admission(sk_metrics *m, uint64_t n);
/* A refusal by admission result code (codes.def): counted under its wire
 * code ("sold_out", "limit_exceeded", ...). Codes that are not refusals
 * (OK, RELEASED, ... : HTTP status < 400) are ignored; unknown codes count
 * as "other". */
void sk_metrics_refusal_rc(sk_metrics *m, int rc);
void sk_metrics_refusal_extra(sk_metrics *m, enum sk_metrics_extra e);
/* By name: any wire code of codes.def or "rate_limited", "unauthorized",
 * "bad_request", "unavailable"; anything else counts as "other". */
void sk_metrics_refusal(sk_metrics *m, const char *reason);
void sk_metrics_soldout_fastpath(sk_metrics *m);
/* One Redis round trip; negative or NaN counts as 0, more than a day as a
 * day. */
void sk_metrics_redis_rtt(sk_metrics *m, double seconds);
/* One batched call carrying n purchases. */
void sk_metrics_batch(sk_metrics *m, size_t n);
/* In-flight gauge: +1 when a request arrives, -1 when it is answered. */
void sk_metrics_inflight(sk_metrics *m, int delta);
/* Waiting-room passes this process saw handed out, spent, found expired. */
void sk_metrics_queue_passes(sk_metrics *m, uint64_t issued, uint64_t spent, uint64_t expired);
/* A queue figure from Redis (at_ms: when, any clock that only grows): its
 * length, places holding a pass and pace. The registry keeps the last
 * SK_METRICS_QUEUES activities seen, dropping the longest unseen. */
#define SK_METRICS_QUEUES 16
void sk_metrics_queue_seen(sk_metrics *m, uint64_t activity_id, int64_t length, int64_t issued,
                           int64_t rate, int64_t at_ms);
/* Readers for tests: passes by event ("issued", "spent", "expired"; 0 for
 * another word) and the last length seen of an activity (-1: none). */
uint64_t sk_metrics_queue_passes_n(const sk_metrics *m, const char *event);
int64_t sk_metrics_queue_length(const sk_metrics *m, uint64_t activity_id);

/* Readers, for the admin stats route and tests. */
uint64_t sk_metrics_requests(const sk_metrics *m, enum sk_metrics_route route, int status);
uint64_t sk_metrics_admissions(const sk_metrics *m);
/* Count of a reason name as rendered ("sold_out", "other", ...); 0 when
 * the name is not a label. */
uint64_t sk_metrics_refusals(const sk_metrics *m, const char *reason);
int64_t sk_metrics_inflight_now(const sk_metrics *m);
/* Refusal counts as one JSON object, every reason label in render order:
 * {"sold_out":3,"limit_exceeded":0,...}. Writes a terminator; returns the
 * length, or SK_ENOMEM when cap is too small (buf then holds "" when
 * cap > 0; 1 KiB suffices for codes.def as it is). */
int sk_metrics_refusals_json(const sk_metrics *m, char *buf, size_t cap);

/* The Redis Cluster redirections of this process's async client
 * (sk_aredis_redirects, redis_async.h) are rendered by every registry once
 * a cluster client exists, so a single-node deployment's /metrics is
 * unchanged; merge leaves them alone (they are process-wide). */

/* Adds every counter, histogram and the gauge of from into into. */
int sk_metrics_merge(sk_metrics *into, const sk_metrics *from);

/* Renders into buf (cap bytes, terminated). Returns the length without the
 * terminator, or SK_ENOMEM when it does not fit (retry with a bigger
 * buffer; 16 KiB is typical, sk_metrics_render_alloc does this for you). */
int sk_metrics_render(const sk_metrics *m, char *buf, size_t cap);
/* Renders into a new malloc'd, terminated buffer that the caller frees with
 * free(). Returns NULL when out of memory; *len gets the length. */
char *sk_metrics_render_alloc(const sk_metrics *m, size_t *len);

#endif
