/* metrics.c - fixed-size counters and histograms, Prometheus text output.
 *
 * Everything lives in one flat struct so updates are plain array stores and
 * merge is a loop of additions. Histograms keep per-bucket (non-cumulative)
 * counts; the cumulative "le" series are summed at render time. */
#include "http/metrics.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/codes.h"
#include "core/error.h"
#include "core/vec.h"
#include "redis/redis_async.h"

#define STATUS_SLOTS 600 /* index = HTTP status; slot 0 = out of 100..599 */
#define MAX_REASONS (SK_RC_COUNT_ + SK_MEXTRA_COUNT + 1)

static const char *const route_names[SK_MROUTE_COUNT] = {
    [SK_MROUTE_PURCHASE] = "purchase",
    [SK_MROUTE_ACTIVITY] = "activity",
    [SK_MROUTE_ADMIN_CREATE] = "admin_create",
    [SK_MROUTE_ADMIN_PREHEAT] = "admin_preheat",
    [SK_MROUTE_ADMIN_OPEN] = "admin_open",
    [SK_MROUTE_ADMIN_CLOSE] = "admin_close",
    [SK_MROUTE_ADMIN_STATS] = "admin_stats",
    [SK_MROUTE_ORDERS] = "orders",
    [SK_MROUTE_HEALTHZ] = "healthz",
    [SK_MROUTE_READYZ] = "readyz",
    [SK_MROUTE_METRICS] = "metrics",
    [SK_MROUTE_DASHBOARD] = "dashboard",
    [SK_MROUTE_QUEUE_JOIN] = "queue_join",
    [SK_MROUTE_QUEUE_POLL] = "queue_poll",
    [SK_MROUTE_ADMIN_PACE_SET] = "admin_pace_set",
    [SK_MROUTE_ADMIN_PACE_GET] = "admin_pace_get",
    [SK_MROUTE_OTHER] = "other",
};

static const char *const extra_names[SK_MEXTRA_COUNT] = {
    [SK_MEXTRA_RATE_LIMITED] = "rate_limited",
    [SK_MEXTRA_UNAUTHORIZED] = "unauthorized",
    [SK_MEXTRA_BAD_REQUEST] = "bad_request",
    [SK_MEXTRA_UNAVAILABLE] = "unavailable",
};

static const char *const cluster_names[SK_AREDIS_REDIRECT_COUNT] = {
    [SK_AREDIS_MOVED] = "moved",
    [SK_AREDIS_ASK] = "ask",
    [SK_AREDIS_TRYAGAIN] = "tryagain",
    [SK_AREDIS_CLUSTERDOWN] = "clusterdown",
};

/* Process-wide (metrics.h says why); relaxed: plain counters, no ordering. */

/* Upper bounds in seconds; the text form is what Prometheus shows. */
static const double rtt_le[] = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                0.01,    0.025,  0.05,    0.1,    0.25,  0.5,    1.0};
static const char *const rtt_le_text[] = {"0.00005", "0.0001", "0.00025", "0.0005", "0.001",
                                          "0.0025",  "0.005",  "0.01",    "0.025",  "0.05",
                                          "0.1",     "0.25",   "0.5",     "1"};
#define RTT_BUCKETS (sizeof rtt_le / sizeof rtt_le[0])
#define BATCH_BUCKETS 11 /* le 1, 2, 4, ..., 1024 */

struct sk_metrics {
    uint64_t requests[SK_MROUTE_COUNT][STATUS_SLOTS];
    uint64_t admissions, soldout_fastpath;
    uint64_t refusals[MAX_REASONS];
    uint64_t rtt_bucket[RTT_BUCKETS + 1]; /* last: +Inf */
    double rtt_sum;
    uint64_t batch_bucket[BATCH_BUCKETS + 1];
    uint64_t batch_sum;
    int64_t inflight;
    /* the waiting room: pass events (issued, spent, expired) and the last
     * queue figures seen per activity (id 0: a free slot) */
    int queue_used;
    uint64_t passes[3];
    struct {
        uint64_t id;
        int64_t length, issued, rate, at_ms;
    } queues[SK_METRICS_QUEUES];
    /* label table, the same in every registry of one binary */
    const char *reason_name[MAX_REASONS];
    int n_reasons, other_reason;
    int rc_reason[SK_RC_COUNT_]; /* -1: not a refusal, ignored */
    int extra_reason[SK_MEXTRA_COUNT];
};

static int reason_index(sk_metrics *m, const char *name)
{
    for (int i = 0; i < m->n_reasons; i++)
        if (strcmp(m->reason_name[i], name) == 0) return i;
    m->reason_name[m->n_reasons] = name;
    return m->n_reasons++;
}

sk_metrics *sk_metrics_new(void)
{
    sk_metrics *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    /* Reasons: the distinct wire codes of the refusals in codes.def (so a
     * code appended there shows up without touching this file), then the
     * extras, then "other". Two codes may share a wire name (SOLD_OUT and
     * INSUFFICIENT are both "sold_out"): one label. */
    for (int rc = 0; rc < SK_RC_COUNT_; rc++) {
        /* a value codes.def leaves unused is no label (sk_rc_name: UNKNOWN) */
        int unused = strcmp(sk_rc_name(rc), "UNKNOWN") == 0;
        m->rc_reason[rc] =
            !unused && sk_rc_http_status(rc) >= 400 ? reason_index(m, sk_rc_wire(rc)) : -1;
    }
    for (int e = 0; e < SK_MEXTRA_COUNT; e++)
        m->extra_reason[e] = reason_index(m, extra_names[e]);
    m->other_reason = reason_index(m, "other");
    return m;
}

void sk_metrics_free(sk_metrics *m)
{
    free(m);
}

enum sk_metrics_route sk_metrics_route_of(enum sk_route r)
{
    switch (r) {
    case SK_ROUTE_purchase: return SK_MROUTE_PURCHASE;
    case SK_ROUTE_activity: return SK_MROUTE_ACTIVITY;
    case SK_ROUTE_admin_create: return SK_MROUTE_ADMIN_CREATE;
    case SK_ROUTE_admin_preheat: return SK_MROUTE_ADMIN_PREHEAT;
    case SK_ROUTE_admin_open: return SK_MROUTE_ADMIN_OPEN;
    case SK_ROUTE_admin_close: return SK_MROUTE_ADMIN_CLOSE;
    case SK_ROUTE_admin_stats: return SK_MROUTE_ADMIN_STATS;
    case SK_ROUTE_order_get:
    case SK_ROUTE_order_pay:
    case SK_ROUTE_order_cancel: return SK_MROUTE_ORDERS;
    case SK_ROUTE_healthz: return SK_MROUTE_HEALTHZ;
    case SK_ROUTE_readyz: return SK_MROUTE_READYZ;
    case SK_ROUTE_metrics: return SK_MROUTE_METRICS;
    case SK_ROUTE_dashboard: return SK_MROUTE_DASHBOARD;
    case SK_ROUTE_queue_join: return SK_MROUTE_QUEUE_JOIN;
    case SK_ROUTE_queue_poll: return SK_MROUTE_QUEUE_POLL;
    case SK_ROUTE_admin_pace_set: return SK_MROUTE_ADMIN_PACE_SET;
    case SK_ROUTE_admin_pace_get: return SK_MROUTE_ADMIN_PACE_GET;
    default: return SK_MROUTE_OTHER;
    }
}

const char *sk_metrics_route_name(enum sk_metrics_route r)
{
    return ((unsigned)r < SK_MROUTE_COUNT) ? route_names[r] : "other";
}

static unsigned route_slot(enum sk_metrics_route r)
{
    return (unsigned)r < SK_MROUTE_COUNT ? (unsigned)r : SK_MROUTE_OTHER;
}

static unsigned status_slot(int status)
{
    return status >= 100 && status <= 599 ? (unsigned)status : 0;
}

void sk_metrics_request(sk_metrics *m, enum sk_metrics_route route, int status)
{
    m->requests[route_slot(route)][status_slot(status)]++;
}

void sk_metrics_admission(sk_metrics *m, uint64_t n)
{
    m->admissions += n;
}

void sk_metrics_refusal_rc(sk_metrics *m, int rc)
{
    if (rc < 0 || rc >= SK_RC_COUNT_) {
        m->refusals[m->other_reason]++;
        return;
    }
    if (m->rc_reason[rc] >= 0) m->refusals[m->rc_reason[rc]]++;
}

void sk_metrics_refusal_extra(sk_metrics *m, enum sk_metrics_extra e)
{
    m->refusals[(unsigned)e < SK_MEXTRA_COUNT ? m->extra_reason[e] : m->other_reason]++;
}

static int find_reason(const sk_metrics *m, const char *reason)
{
    if (reason)
        for (int i = 0; i < m->n_reasons; i++)
            if (strcmp(m->reason_name[i], reason) == 0) return i;
    return -1;
}

void sk_metrics_refusal(sk_metrics *m, const char *reason)
{
    int i = find_reason(m, reason);
    m->refusals[i >= 0 ? i : m->other_reason]++;
}

void sk_metrics_soldout_fastpath(sk_metrics *m)
{
    m->soldout_fastpath++;
}

void sk_metrics_redis_rtt(sk_metrics *m, double seconds)
{
    /* NaN or infinity would poison the sum forever */
    if (!(seconds >= 0)) seconds = 0;
    if (seconds > 86400) seconds = 86400;
    size_t b = 0;
    while (b < RTT_BUCKETS && seconds > rtt_le[b])
        b++;
    m->rtt_bucket[b]++;
    m->rtt_sum += seconds;
}

void sk_metrics_batch(sk_metrics *m, size_t n)
{
    /* bucket k holds 2^(k-1) < n <= 2^k: ceil(log2 n) by one clz */
    unsigned b = n <= 1 ? 0 : 64u - (unsigned)__builtin_clzll((unsigned long long)n - 1);
    m->batch_bucket[b < BATCH_BUCKETS ? b : BATCH_BUCKETS]++;
    m->batch_sum += n;
}

void sk_metrics_inflight(sk_metrics *m, int delta)
{
    m->inflight += delta;
}

static const char *const pass_events[3] = {"issued", "spent", "expired"};

void sk_metrics_queue_passes(sk_metrics *m, uint64_t issued, uint64_t spent, uint64_t expired)
{
    m->queue_used = 1;
    m->passes[0] += issued;
    m->passes[1] += spent;
    m->passes[2] += expired;
}

void sk_metrics_queue_seen(sk_metrics *m, uint64_t id, int64_t length, int64_t issued, int64_t rate,
                           int64_t at_ms)
{
    if (id == 0) return;
    m->queue_used = 1;
    int slot = -1, free_slot = -1, oldest = 0;
    for (int i = 0; i < SK_METRICS_QUEUES && slot < 0; i++) {
        if (m->queues[i].id == id)
            slot = i;
        else if (!m->queues[i].id && free_slot < 0)
            free_slot = i;
        else if (m->queues[i].at_ms < m->queues[oldest].at_ms)
            oldest = i;
    }
    if (slot >= 0 && m->queues[slot].at_ms > at_ms) return; /* older news */
    if (slot < 0) slot = free_slot >= 0 ? free_slot : oldest;
    m->queues[slot].id = id;
    m->queues[slot].length = length;
    m->queues[slot].issued = issued;
    m->queues[slot].rate = rate;
    m->queues[slot].at_ms = at_ms;
}

uint64_t sk_metrics_queue_passes_n(const sk_metrics *m, const char *event)
{
    for (int i = 0; i < 3; i++)
        if (event && strcmp(event, pass_events[i]) == 0) return m->passes[i];
    return 0;
}

int64_t sk_metrics_queue_length(const sk_metrics *m, uint64_t id)
{
    for (int i = 0; i < SK_METRICS_QUEUES; i++)
        if (id && m->queues[i].id == id) return m->queues[i].length;
    return -1;
}

uint64_t sk_metrics_requests(const sk_metrics *m, enum sk_metrics_route route, int status)
{
    return m->requests[route_slot(route)][status_slot(status)];
}

uint64_t sk_metrics_admissions(const sk_metrics *m)
{
    return m->admissions;
}

uint64_t sk_metrics_refusals(const sk_metrics *m, const char *reason)
{
    int i = find_reason(m, reason);
    return i >= 0 ? m->refusals[i] : 0;
}

int64_t sk_metrics_inflight_now(const sk_metrics *m)
{
    return m->inflight;
}

int sk_metrics_refusals_json(const sk_metrics *m, char *buf, size_t cap)
{
    if (!buf || cap == 0) return SK_ENOMEM;
    size_t o = 0;
    for (int i = 0; i <= m->n_reasons; i++) {
        /* label names are fixed identifiers: no escaping needed */
        int n = i == m->n_reasons ? snprintf(buf + o, cap - o, "}")
                                  : snprintf(buf + o, cap - o, "%s\"%s\":%llu", i ? "," : "{",
                                             m->reason_name[i], (unsigned long long)m->refusals[i]);
        if (n < 0 || (size_t)n >= cap - o) {
            buf[0] = 0;
            return SK_ENOMEM;
        }
        o += (size_t)n;
    }
    return (int)o;
}

int sk_metrics_merge(sk_metrics *into, const sk_metrics *from)
{
    if (into->n_reasons != from->n_reasons) return SK_EINVAL; /* not from this binary */
    for (int r = 0; r < SK_MROUTE_COUNT; r++)
        for (int s = 0; s < STATUS_SLOTS; s++)
            into->requests[r][s] += from->requests[r][s];
    into->admissions += from->admissions;
    into->soldout_fastpath += from->soldout_fastpath;
    for (int i = 0; i < from->n_reasons; i++)
        into->refusals[i] += from->refusals[i];
    for (size_t b = 0; b <= RTT_BUCKETS; b++)
        into->rtt_bucket[b] += from->rtt_bucket[b];
    into->rtt_sum += from->rtt_sum;
    for (size_t b = 0; b <= BATCH_BUCKETS; b++)
        into->batch_bucket[b] += from->batch_bucket[b];
    into->batch_sum += from->batch_sum;
    into->inflight += from->inflight;
    into->queue_used |= from->queue_used;
    for (int i = 0; i < 3; i++)
        into->passes[i] += from->passes[i];
    for (int i = 0; i < SK_METRICS_QUEUES; i++)
        if (from->queues[i].id)
            sk_metrics_queue_seen(into, from->queues[i].id, from->queues[i].length,
                                  from->queues[i].issued, from->queues[i].rate,
                                  from->queues[i].at_ms);
    return 0;
}

/* ---- rendering ------------------------------------------------------------ */

struct out {
    char *buf;
    size_t cap, len;
    int full;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
    if (o->full) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= o->cap - o->len)
        o->full = 1;
    else
        o->len += (size_t)n;
}

static void header(struct out *o, const char *name, const char *type, const char *help)
{
    put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void render_queues(const sk_metrics *m, struct out *o)
{
    header(o, "seckill_queue_passes_total", "counter",
           "Waiting-room passes this process handed out, saw spent by a purchase, found expired.");
    for (int i = 0; i < 3; i++)
        put(o, "seckill_queue_passes_total{event=\"%s\"} %llu\n", pass_events[i],
            (unsigned long long)m->passes[i]);
    static const char *const names[3][2] = {
        {"seckill_queue_length", "Buyers in a waiting room's queue (Redis, as last seen)."},
        {"seckill_queue_passes_issued",
         "Places of a waiting room's queue holding a pass (Redis, as last seen)."},
        {"seckill_queue_pace", "Passes per second of a waiting room (Redis, as last seen)."},
    };
    for (int f = 0; f < 3; f++) {
        header(o, names[f][0], "gauge", names[f][1]);
        for (int i = 0; i < SK_METRICS_QUEUES; i++) {
            if (!m->queues[i].id) continue;
            int64_t v = f == 0   ? m->queues[i].length
                        : f == 1 ? m->queues[i].issued
                                 : m->queues[i].rate;
            put(o, "%s{activity=\"%llu\"} %lld\n", names[f][0], (unsigned long long)m->queues[i].id,
                (long long)v);
        }
    }
}

int sk_metrics_render(const sk_metrics *m, char *buf, size_t cap)
{
    if (!buf || cap == 0) return SK_ENOMEM;
    struct out o = {buf, cap, 0, 0};
    buf[0] = 0;

    header(&o, "seckill_http_requests_total", "counter",
           "HTTP requests answered, by route and status.");
    for (int r = 0; r < SK_MROUTE_COUNT; r++)
        for (int s = 0; s < STATUS_SLOTS; s++) {
            uint64_t v = m->requests[r][s];
            if (!v) continue;
            if (s == 0)
                put(&o, "seckill_http_requests_total{route=\"%s\",status=\"other\"} %llu\n",
                    route_names[r], (unsigned long long)v);
            else
                put(&o, "seckill_http_requests_total{route=\"%s\",status=\"%d\"} %llu\n",
                    route_names[r], s, (unsigned long long)v);
        }

    header(&o, "seckill_admissions_total", "counter", "Purchases admitted by the stock script.");
    put(&o, "seckill_admissions_total %llu\n", (unsigned long long)m->admissions);

    header(&o, "seckill_refusals_total", "counter", "Purchases refused, by reason.");
    for (int i = 0; i < m->n_reasons; i++)
        put(&o, "seckill_refusals_total{reason=\"%s\"} %llu\n", m->reason_name[i],
            (unsigned long long)m->refusals[i]);

    header(&o, "seckill_soldout_fastpath_total", "counter",
           "Sold-out refusals answered locally without a Redis round trip.");
    put(&o, "seckill_soldout_fastpath_total %llu\n", (unsigned long long)m->soldout_fastpath);

    header(&o, "seckill_redis_roundtrip_seconds", "histogram",
           "Redis round-trip time of admission calls.");
    uint64_t cum = 0;
    for (size_t b = 0; b < RTT_BUCKETS; b++) {
        cum += m->rtt_bucket[b];
        put(&o, "seckill_redis_roundtrip_seconds_bucket{le=\"%s\"} %llu\n", rtt_le_text[b],
            (unsigned long long)cum);
    }
    cum += m->rtt_bucket[RTT_BUCKETS];
    put(&o, "seckill_redis_roundtrip_seconds_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)cum);
    put(&o, "seckill_redis_roundtrip_seconds_sum %.15g\n", m->rtt_sum);
    put(&o, "seckill_redis_roundtrip_seconds_count %llu\n", (unsigned long long)cum);

    header(&o, "seckill_batch_size", "histogram", "Purchases carried by one batched Redis call.");
    cum = 0;
    for (int b = 0; b < BATCH_BUCKETS; b++) {
        cum += m->batch_bucket[b];
        put(&o, "seckill_batch_size_bucket{le=\"%d\"} %llu\n", 1 << b, (unsigned long long)cum);
    }
    cum += m->batch_bucket[BATCH_BUCKETS];
    put(&o, "seckill_batch_size_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)cum);
    put(&o, "seckill_batch_size_sum %llu\n", (unsigned long long)m->batch_sum);
    put(&o, "seckill_batch_size_count %llu\n", (unsigned long long)cum);

    header(&o, "seckill_inflight_requests", "gauge", "Requests received and not yet answered.");
    put(&o, "seckill_inflight_requests %lld\n", (long long)m->inflight);

    if (sk_aredis_cluster_used()) {
        header(&o, "seckill_redis_cluster_redirections_total", "counter",
               "Redis Cluster MOVED/ASK redirections and TRYAGAIN/CLUSTERDOWN answers met by "
               "this process's Redis client.");
        for (int k = 0; k < SK_AREDIS_REDIRECT_COUNT; k++)
            put(&o, "seckill_redis_cluster_redirections_total{kind=\"%s\"} %llu\n",
                cluster_names[k],
                (unsigned long long)sk_aredis_redirects((enum sk_aredis_redirect)k));
    }

    if (m->queue_used) render_queues(m, &o);

    if (o.full) {
        buf[0] = 0;
        return SK_ENOMEM;
    }
    return (int)o.len;
}

char *sk_metrics_render_alloc(const sk_metrics *m, size_t *len)
{
    char *buf = NULL;
    size_t cap = 0;
    for (;;) {
        /* 16 KiB, then twice as much until it fits; over 1 GiB cannot
         * happen: the output is bounded */
        if (cap > ((size_t)1 << 30) || SK_VEC_RESERVE(buf, cap, cap + 1, 16384)) {
            free(buf);
            return NULL;
        }
        int n = sk_metrics_render(m, buf, cap);
        if (n >= 0) {
            if (len) *len = (size_t)n;
            return buf;
        }
    }
}
