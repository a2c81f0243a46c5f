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
 *   seckill_admissions_total                      counter (purchases admitted; an
 *                                                 Idempotency-Key retry given its
 *                                                 first answer again is not one)
 *   seckill_idempotent_replays_total              counter (those retries)
 *   seckill_refusals_total{reason}                counter (every reason, 0 too)
 *   seckill_soldout_fastpath_total                counter (409s with no Redis trip)
 *   seckill_redis_roundtrip_seconds               histogram, 50us .. 1s
 *   seckill_batch_size                            histogram, 1, 2, 4 .. 1024
 *   seckill_purchase_duration_seconds             histogram, 100us .. 5s (arrival to answer)
 *   seckill_inflight_requests                     gauge
 *   seckill_redis_cluster_redirections_total{kind} counter (cluster clients only,
 *                                                 process-wide: see below)
 *   seckill_activity_admitted_units_total{activity}   counter \ per activity, at most
 *   seckill_activity_replays_total{activity}          counter | SK_METRICS_ACTS of them
 *   seckill_activity_refusals_total{activity,reason}  counter /
 * and once a process answered a waiting-room request (docs/waiting-room.md):
 *   seckill_queue_passes_total{event}             counter: issued (handed out),
 *                                                 spent (by a purchase), expired
 *                                                 (found expired unspent)
 *   seckill_activity_queue_passes_total{activity,event}  counter: the same per
 *                                                 activity (in its row)
 *   seckill_queue_length{activity}                gauge: buyers in the queue
 *   seckill_queue_passes_issued{activity}         gauge: places holding a pass
 *   seckill_queue_pace{activity}                  gauge: passes per second
 * and per Redis master the client of a process is connected to (its
 * settings re-read every 2 s, redis_settings.h):
 *   seckill_redis_memory_used_bytes{master}       gauge: used_memory
 *   seckill_redis_memory_max_bytes{master}        gauge: maxmemory (0: no limit)
 *   seckill_redis_settings_unsafe{master}         gauge: 1 while its settings
 *                                                 refuse sales (maxmemory-policy)
 * The three queue gauges are Redis's figures as a reply last showed them: every
 * process sees the same queue, so the node reports the newest observation
 * of any process (never a sum); the pass counters are summed like the rest.
 *
 * A node (`seckill serve` with its HTTP processes and order worker) keeps
 * one registry per HTTP process in a slot of its shared segment
 * (core/node_stats.h, sk_metrics_attach); sk_metrics_render_node sums them
 * and adds the worker process's counters and figures, so one scrape of any
 * process reports the node. */
#ifndef SK_METRICS_H
#define SK_METRICS_H
#include <stddef.h>
#include <stdint.h>

#include "core/node_stats.h"
#include "http/router.h"

/* Activities a registry counts one by one (admitted units, refusals by
 * reason): only activities Redis or the store knows (an admission, or a
 * refusal other than unknown_activity), the least recently updated row
 * reused past this many. */
#define SK_METRICS_ACTS 64

typedef struct sk_metrics sk_metrics;

/* The route label: a fixed set so the series count stays bounded whatever
 * paths clients send: each route of routes.def, in its order, but the
 * routes it counts under a shared label (the three order routes share
 * "orders"). SK_MROUTE_<label>. */
enum sk_metrics_route {
#define SK_LABEL(label) SK_MROUTE_##label,
#define SK_ROUTE(name, method, pattern) SK_MROUTE_##name,
#define SK_ROUTE_IN(label, name, method, pattern)
#include "http/routes.def"
#undef SK_ROUTE
    SK_MROUTE_other, /* 404s, and anything out of range */
    SK_MROUTE_COUNT
};

/* Refusal reasons that are not admission codes of codes.def. */
enum sk_metrics_extra {
    SK_MEXTRA_RATE_LIMITED,
    SK_MEXTRA_UNAUTHORIZED,
    SK_MEXTRA_BAD_REQUEST,
    SK_MEXTRA_UNAVAILABLE,
    SK_MEXTRA_UNCONFIRMED, /* admitted, but fewer replicas than --sync-replicas acknowledged */
    SK_MEXTRA_COUNT
};

/* Allocates a zeroed registry (~62 KiB). Returns NULL when out of memory.
 * The caller owns it and releases it with sk_metrics_free (NULL is fine). */
sk_metrics *sk_metrics_new(void);
/* Frees a registry of sk_metrics_new; one of sk_metrics_attach is left
 * alone (its memory is the caller's). */
void sk_metrics_free(sk_metrics *m);

/* Bytes a registry takes (~75 KiB), for a slot of the node's segment. */
size_t sk_metrics_bytes(void);
/* A registry in mem (sk_metrics_bytes() bytes, 8-byte aligned, owned by
 * the caller). Memory that already holds a registry of this binary (a
 * previous process of the same slot) keeps its counters, so nothing goes
 * backwards after a restart; only the in-flight gauge starts again at 0.
 * Anything else is laid out afresh (zero). */
sk_metrics *sk_metrics_attach(void *mem);

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
 * "bad_request", "unavailable", "unconfirmed"; anything else counts as
 * "other". */
void sk_metrics_refusal(sk_metrics *m, const char *reason);
void sk_metrics_soldout_fastpath(sk_metrics *m);
/* One Redis round trip; negative or NaN counts as 0, more than a day as a
 * day. */
void sk_metrics_redis_rtt(sk_metrics *m, double seconds);
/* One batched call carrying n purchases. */
void sk_metrics_batch(sk_metrics *m, size_t n);
/* In-flight gauge: +1 when a request arrives, -1 when it is answered. */
void sk_metrics_inflight(sk_metrics *m, int delta);
/* One purchase answered, seconds after it arrived (clamped like rtt). */
void sk_metrics_purchase_latency(sk_metrics *m, double seconds);

/* Per activity: units admitted (counts the activity), and refusals. A
 * refusal by result code counts the activity unless the code is
 * unknown_activity or busy (then only an activity already counted is); an extra
 * reason (unavailable, busy, ...) only an activity already counted. The
 * node-wide totals are the calls above: these add nothing to them. */
void sk_metrics_act_admitted(sk_metrics *m, uint64_t aid, int64_t units);
/* An Idempotency-Key retry answered 200 with its first answer: nothing
 * admitted now, counted apart (the node total too). */
void sk_metrics_act_replayed(sk_metrics *m, uint64_t aid);
void sk_metrics_act_refusal_rc(sk_metrics *m, uint64_t aid, int rc);
void sk_metrics_act_refusal_extra(sk_metrics *m, uint64_t aid, enum sk_metrics_extra e);

/* The waiting room (docs/waiting-room.md), per activity (counts the
 * activity: only a queue call Redis answered calls these). Passes this
 * process handed out, saw spent by a purchase, found expired; they add to
 * the node totals too. */
void sk_metrics_queue_passes(sk_metrics *m, uint64_t aid, uint64_t issued, uint64_t spent,
                             uint64_t expired);
/* Reports every master of the client (redis_async.h) at most once per
 * SK_RSET_REREAD_MS; call every loop pass. */
struct sk_aredis;
void sk_metrics_redis_tick(sk_metrics *m, const struct sk_aredis *ar);

/* The queue's figures from a Redis reply, seen at at_ms (wall clock): its
 * length, places holding a pass and pace. Gauges: a newer observation
 * replaces an older one, merge keeps the newest. */
void sk_metrics_queue_seen(sk_metrics *m, uint64_t aid, int64_t length, int64_t issued,
                           int64_t rate, int64_t at_ms);

/* Readers, for the admin stats route and tests. */
uint64_t sk_metrics_requests(const sk_metrics *m, enum sk_metrics_route route, int status);
uint64_t sk_metrics_admissions(const sk_metrics *m);
/* Count of a reason name as rendered ("sold_out", "other", ...); 0 when
 * the name is not a label. */
uint64_t sk_metrics_refusals(const sk_metrics *m, const char *reason);
int64_t sk_metrics_inflight_now(const sk_metrics *m);
/* Units admitted for activity aid, and its refusals of one reason name;
 * 0 when the activity is not counted. */
uint64_t sk_metrics_act_admitted_units(const sk_metrics *m, uint64_t aid);
uint64_t sk_metrics_act_refusals(const sk_metrics *m, uint64_t aid, const char *reason);
/* Waiting-room passes by event ("issued", "spent", "expired"; 0 for another
 * word): of activity aid, or of every activity when aid is 0. The last
 * queue length seen of an activity (-1: none). */
uint64_t sk_metrics_queue_passes_n(const sk_metrics *m, uint64_t aid, const char *event);
int64_t sk_metrics_queue_length(const sk_metrics *m, uint64_t aid);
/* Refusal counts as one JSON object, every reason label in render order:
 * {"sold_out":3,"limit_exceeded":0,...}. Writes a terminator; returns the
 * length, or SK_ENOMEM when cap is too small (buf then holds "" when
 * cap > 0; 1 KiB suffices for codes.def as it is). */
int sk_metrics_refusals_json(const sk_metrics *m, char *buf, size_t cap);

/* The Redis Cluster redirections of this process's async client
 * (sk_aredis_redirects, redis_async.h) are rendered by every registry once
 * a cluster client exists, so a single-node deployment's /metrics is
 * unchanged; merge leaves them alone (they are process-wide). */

/* Adds every counter, histogram and the gauge of from into into, and the
 * per-activity rows by activity id (rows that do not fit are left out).
 * SK_EINVAL for registries of different binaries. */
int sk_metrics_merge(sk_metrics *into, const sk_metrics *from);

/* A new heap registry (sk_metrics_free) holding the sum of the node's HTTP
 * slots; NULL when out of memory. */
sk_metrics *sk_metrics_node_sum(sk_node *node);

/* Renders into buf (cap bytes, terminated). Returns the length without the
 * terminator, or SK_ENOMEM when it does not fit (retry with a bigger
 * buffer; 16 KiB is typical, sk_metrics_render_alloc does this for you). */
int sk_metrics_render(const sk_metrics *m, char *buf, size_t cap);
/* Renders into a new malloc'd, terminated buffer that the caller frees with
 * free(). Returns NULL when out of memory; *len gets the length. */
char *sk_metrics_render_alloc(const sk_metrics *m, size_t *len);

/* The node's /metrics: the sum of its HTTP slots, then, when the node has
 * a worker process, its counters (core/worker_counters.def), its last
 * sample of every activity as gauges
 *   seckill_activity_stock_initial{activity}, _stock_remaining{activity},
 *   seckill_activity_open{activity}, seckill_activity_stream_backlog{activity},
 *   seckill_activity_dead_letters{activity}, seckill_activity_orders{activity,status},
 *   seckill_activity_reconcile_differences{activity},
 *   seckill_activity_registered{activity} (activities taking registrations)
 * and, for every slot, seckill_node_processes{kind} (alive now) and
 * seckill_node_process_starts_total{kind}. A new malloc'd, terminated
 * buffer (free()); NULL when out of memory; *len gets the length. */
char *sk_metrics_render_node(sk_node *node, size_t *len);

#endif
