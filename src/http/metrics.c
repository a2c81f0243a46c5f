/* metrics.c - fixed-size counters and histograms, Prometheus text output.
 *
 * Everything lives in one flat struct so updates are plain array stores and
 * merge is a loop of additions. Histograms keep per-bucket (non-cumulative)
 * counts; the cumulative "le" series are summed at render time. */
#include "http/metrics.h"

#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/codes.h"
#include "core/error.h"
#include "core/vec.h"
#include "http/metrics_int.h"
#include "redis/redis_async.h"

#define STATUS_SLOTS SK_MSTATUS_SLOTS
#define MAX_REASONS SK_MMAX_REASONS
#define METRICS_MAGIC 0x736b6d6574726963ull /* "skmetric" */

static const char *const route_names[SK_MROUTE_COUNT] = {
#define SK_LABEL(label) [SK_MROUTE_##label] = #label,
#define SK_ROUTE(name, method, pattern) [SK_MROUTE_##name] = #name,
#define SK_ROUTE_IN(label, name, method, pattern)
#include "http/routes.def"
#undef SK_ROUTE
    [SK_MROUTE_other] = "other",
};

static const char *const extra_names[SK_MEXTRA_COUNT] = {
    [SK_MEXTRA_RATE_LIMITED] = "rate_limited", [SK_MEXTRA_UNAUTHORIZED] = "unauthorized",
    [SK_MEXTRA_BAD_REQUEST] = "bad_request",   [SK_MEXTRA_UNAVAILABLE] = "unavailable",
    [SK_MEXTRA_UNCONFIRMED] = "unconfirmed",
};

static const char *const cluster_names[SK_AREDIS_REDIRECT_COUNT] = {
    [SK_AREDIS_MOVED] = "moved",
    [SK_AREDIS_ASK] = "ask",
    [SK_AREDIS_TRYAGAIN] = "tryagain",
    [SK_AREDIS_CLUSTERDOWN] = "clusterdown",
};

/* Process-wide (metrics.h says why); relaxed: plain counters, no ordering. */

/* Upper bounds in seconds; the text form is what Prometheus shows. */
const double sk_metrics_rtt_le[SK_MRTT_BUCKETS] = {
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0};
static const char *const rtt_le_text[SK_MRTT_BUCKETS] = {
    "0.00005", "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005",
    "0.01",    "0.025",  "0.05",    "0.1",    "0.25",  "0.5",    "1"};
#define RTT_BUCKETS SK_MRTT_BUCKETS
#define rtt_le sk_metrics_rtt_le
#define BATCH_BUCKETS SK_MBATCH_BUCKETS
/* Purchase latency: 1-2-5 steps from 100 us to 5 s. */
const double sk_metrics_lat_le[SK_MLAT_BUCKETS] = {
    0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5};
static const char *const lat_le_text[SK_MLAT_BUCKETS] = {
    "0.0001", "0.0002", "0.0005", "0.001", "0.002", "0.005", "0.01", "0.02",
    "0.05",   "0.1",    "0.2",    "0.5",   "1",     "2",     "5"};

static int reason_index(sk_metrics *m, const char *name)
{
    for (int i = 0; i < m->n_reasons; i++)
        if (strcmp(m->reason_name[i], name) == 0) return i;
    m->reason_name[m->n_reasons] = name;
    return m->n_reasons++;
}

/* The label table: the same in every registry of one binary. */
static void init_labels(sk_metrics *m)
{
    m->n_reasons = 0;
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
}

sk_metrics *sk_metrics_new(void)
{
    sk_metrics *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    init_labels(m);
    m->magic = METRICS_MAGIC;
    m->owned = 1;
    return m;
}

size_t sk_metrics_bytes(void)
{
    return sizeof(sk_metrics);
}

sk_metrics *sk_metrics_attach(void *mem)
{
    sk_metrics *m = mem;
    if (!m) return NULL;
    if (m->magic != METRICS_MAGIC) memset(m, 0, sizeof *m);
    init_labels(m);
    /* the requests the previous process had in flight died with it */
    m->inflight = 0;
    m->owned = 0;
    m->magic = METRICS_MAGIC;
    return m;
}

void sk_metrics_free(sk_metrics *m)
{
    if (m && m->owned) free(m);
}

/* Each route's label (routes.def). */
static const enum sk_metrics_route route_label[SK_ROUTE_COUNT] = {
#define SK_ROUTE(name, method, pattern) [SK_ROUTE_##name] = SK_MROUTE_##name,
#define SK_ROUTE_IN(label, name, method, pattern) [SK_ROUTE_##name] = SK_MROUTE_##label,
#include "http/routes.def"
#undef SK_ROUTE
};

enum sk_metrics_route sk_metrics_route_of(enum sk_route r)
{
    return (unsigned)r < SK_ROUTE_COUNT ? route_label[r] : SK_MROUTE_other;
}

const char *sk_metrics_route_name(enum sk_metrics_route r)
{
    return ((unsigned)r < SK_MROUTE_COUNT) ? route_names[r] : "other";
}

static unsigned route_slot(enum sk_metrics_route r)
{
    return (unsigned)r < SK_MROUTE_COUNT ? (unsigned)r : SK_MROUTE_other;
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

/* One observation of a histogram with nb bounds le (bucket nb: +Inf). */
static void observe(double seconds, const double *le, size_t nb, uint64_t *bucket, double *sum)
{
    /* NaN or infinity would poison the sum forever */
    if (!(seconds >= 0)) seconds = 0;
    if (seconds > 86400) seconds = 86400;
    size_t b = 0;
    while (b < nb && seconds > le[b])
        b++;
    bucket[b]++;
    *sum += seconds;
}

void sk_metrics_redis_rtt(sk_metrics *m, double seconds)
{
    observe(seconds, rtt_le, RTT_BUCKETS, m->rtt_bucket, &m->rtt_sum);
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

void sk_metrics_purchase_latency(sk_metrics *m, double seconds)
{
    observe(seconds, sk_metrics_lat_le, SK_MLAT_BUCKETS, m->lat_bucket, &m->lat_sum);
}

/* The row of activity aid, or NULL; a free or the least recently used row
 * when create is set. */
static struct sk_metrics_act *act_row(sk_metrics *m, uint64_t aid, int create)
{
    if (aid == 0) return NULL;
    int h = m->act_hint;
    if (h >= 0 && h < SK_METRICS_ACTS && m->acts[h].id == aid) return &m->acts[h];
    int lru = 0;
    for (int i = 0; i < SK_METRICS_ACTS; i++) {
        if (m->acts[i].id == aid) {
            m->act_hint = i;
            return &m->acts[i];
        }
        if (m->acts[i].used < m->acts[lru].used) lru = i;
    }
    if (!create) return NULL;
    for (int i = 0; i < SK_METRICS_ACTS; i++)
        if (m->acts[i].id == 0) {
            lru = i;
            break;
        }
    memset(&m->acts[lru], 0, sizeof m->acts[lru]);
    m->acts[lru].id = aid;
    m->act_hint = lru;
    return &m->acts[lru];
}

void sk_metrics_act_admitted(sk_metrics *m, uint64_t aid, int64_t units)
{
    struct sk_metrics_act *a = act_row(m, aid, 1);
    if (!a) return;
    a->used = ++m->act_clock;
    a->admissions++;
    a->admitted_units += units > 0 ? (uint64_t)units : 0;
}

void sk_metrics_act_replayed(sk_metrics *m, uint64_t aid)
{
    m->replays++;
    struct sk_metrics_act *a = act_row(m, aid, 1);
    if (!a) return;
    a->used = ++m->act_clock;
    a->replays++;
}

void sk_metrics_act_refusal_rc(sk_metrics *m, uint64_t aid, int rc)
{
    int known = rc >= 0 && rc < SK_RC_COUNT_;
    if (known && m->rc_reason[rc] < 0) return; /* not a refusal */
    /* busy and overloaded are decided before Redis is asked: they prove
     * nothing about aid */
    struct sk_metrics_act *a = act_row(m, aid,
                                       known && rc != SK_RC_UNKNOWN_ACTIVITY && rc != SK_RC_BUSY &&
                                           rc != SK_RC_OVERLOADED);
    if (!a) return;
    a->used = ++m->act_clock;
    a->refusals[known ? m->rc_reason[rc] : m->other_reason]++;
}

void sk_metrics_act_refusal_extra(sk_metrics *m, uint64_t aid, enum sk_metrics_extra e)
{
    struct sk_metrics_act *a = act_row(m, aid, 0);
    if (!a) return;
    a->used = ++m->act_clock;
    a->refusals[(unsigned)e < SK_MEXTRA_COUNT ? m->extra_reason[e] : m->other_reason]++;
}

static const char *const pass_events[SK_MQ_EVENTS] = {"issued", "spent", "expired"};

void sk_metrics_queue_passes(sk_metrics *m, uint64_t aid, uint64_t issued, uint64_t spent,
                             uint64_t expired)
{
    const uint64_t ev[SK_MQ_EVENTS] = {issued, spent, expired};
    struct sk_metrics_act *a = act_row(m, aid, 1);
    m->queue_used = 1;
    for (int i = 0; i < SK_MQ_EVENTS; i++) {
        m->passes[i] += ev[i];
        if (a) a->passes[i] += ev[i];
    }
    if (a) a->used = ++m->act_clock;
}

/* A newer queue observation replaces an older one (gauges: never summed). */
static void queue_put(struct sk_metrics_act *a, int64_t length, int64_t issued, int64_t rate,
                      int64_t at_ms)
{
    if (at_ms < a->q_at_ms) return;
    a->q_length = length;
    a->q_issued = issued;
    a->q_rate = rate;
    a->q_at_ms = at_ms > 0 ? at_ms : 1;
}

void sk_metrics_queue_seen(sk_metrics *m, uint64_t aid, int64_t length, int64_t issued,
                           int64_t rate, int64_t at_ms)
{
    struct sk_metrics_act *a = act_row(m, aid, 1);
    if (!a) return;
    m->queue_used = 1;
    a->used = ++m->act_clock;
    queue_put(a, length, issued, rate, at_ms);
}

/* A Redis master's memory and verdict, reported at at_ms (wall clock):
 * used and max bytes (-1 not said), unsafe 1 when its settings refuse
 * sales. Gauges, the newest report of any process wins. */
static void redis_master(sk_metrics *m, const char *addr, int64_t used, int64_t max, int unsafe,
                         int64_t at_ms)
{
    struct sk_metrics_master *row = NULL, *oldest = &m->masters[0];
    for (int i = 0; i < SK_MMASTERS && !row; i++) {
        struct sk_metrics_master *r = &m->masters[i];
        if (!strcmp(r->addr, addr) || !r->addr[0])
            row = r;
        else if (r->at_ms < oldest->at_ms)
            oldest = r;
    }
    if (!row) row = oldest; /* a master that left long ago makes room */
    if (row->at_ms > at_ms && !strcmp(row->addr, addr)) return;
    snprintf(row->addr, sizeof row->addr, "%s", addr);
    row->used = used;
    row->max = max;
    row->unsafe = unsafe;
    row->at_ms = at_ms;
}

static void report_master(void *data, const struct sk_aredis_master *am)
{
    const struct sk_rsettings *s = am->settings;
    redis_master(data, am->addr, s->used_memory, s->maxmemory, am->verdict->level == SK_RSET_UNSAFE,
                 sk_wall_ms());
}

void sk_metrics_redis_tick(sk_metrics *m, const struct sk_aredis *ar)
{
    static int64_t next_ms; /* per process: one loop */
    int64_t now = sk_mono_ms();
    if (!m || !ar || now < next_ms) return;
    next_ms = now + SK_RSET_REREAD_MS;
    sk_aredis_each_master(ar, report_master, m);
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

static const struct sk_metrics_act *act_find(const sk_metrics *m, uint64_t aid)
{
    for (int i = 0; aid && i < SK_METRICS_ACTS; i++)
        if (m->acts[i].id == aid) return &m->acts[i];
    return NULL;
}

uint64_t sk_metrics_act_admitted_units(const sk_metrics *m, uint64_t aid)
{
    const struct sk_metrics_act *a = act_find(m, aid);
    return a ? a->admitted_units : 0;
}

uint64_t sk_metrics_act_refusals(const sk_metrics *m, uint64_t aid, const char *reason)
{
    const struct sk_metrics_act *a = act_find(m, aid);
    int i = find_reason(m, reason);
    return a && i >= 0 ? a->refusals[i] : 0;
}

static int pass_event(const char *event)
{
    for (int i = 0; event && i < SK_MQ_EVENTS; i++)
        if (strcmp(event, pass_events[i]) == 0) return i;
    return -1;
}

uint64_t sk_metrics_queue_passes_n(const sk_metrics *m, uint64_t aid, const char *event)
{
    int e = pass_event(event);
    if (e < 0) return 0;
    if (!aid) return m->passes[e];
    const struct sk_metrics_act *a = act_find(m, aid);
    return a ? a->passes[e] : 0;
}

int64_t sk_metrics_queue_length(const sk_metrics *m, uint64_t aid)
{
    const struct sk_metrics_act *a = act_find(m, aid);
    return a && a->q_at_ms ? a->q_length : -1;
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

/* into[i] += from[i] for n counters. */
static void add_counts(uint64_t *into, const uint64_t *from, size_t n)
{
    for (size_t i = 0; i < n; i++)
        into[i] += from[i];
}

int sk_metrics_merge(sk_metrics *into, const sk_metrics *from)
{
    if (into->n_reasons != from->n_reasons) return SK_EINVAL; /* not from this binary */
    for (int r = 0; r < SK_MROUTE_COUNT; r++)
        add_counts(into->requests[r], from->requests[r], STATUS_SLOTS);
    into->admissions += from->admissions;
    into->replays += from->replays;
    into->soldout_fastpath += from->soldout_fastpath;
    add_counts(into->refusals, from->refusals, (size_t)from->n_reasons);
    add_counts(into->rtt_bucket, from->rtt_bucket, RTT_BUCKETS + 1);
    into->rtt_sum += from->rtt_sum;
    add_counts(into->batch_bucket, from->batch_bucket, BATCH_BUCKETS + 1);
    into->batch_sum += from->batch_sum;
    add_counts(into->lat_bucket, from->lat_bucket, SK_MLAT_BUCKETS + 1);
    into->lat_sum += from->lat_sum;
    into->inflight += from->inflight;
    for (int i = 0; i < SK_METRICS_ACTS; i++) {
        const struct sk_metrics_act *f = &from->acts[i];
        if (!f->id) continue;
        struct sk_metrics_act *t = act_row(into, f->id, 0);
        if (!t) {
            /* a free row only: merging never pushes out a counted activity */
            for (int j = 0; j < SK_METRICS_ACTS && !t; j++)
                if (!into->acts[j].id) t = &into->acts[j];
            if (!t) continue;
            memset(t, 0, sizeof *t);
            t->id = f->id;
        }
        if (f->used > t->used) t->used = f->used;
        t->admitted_units += f->admitted_units;
        t->admissions += f->admissions;
        t->replays += f->replays;
        add_counts(t->refusals, f->refusals, (size_t)from->n_reasons);
        add_counts(t->passes, f->passes, SK_MQ_EVENTS);
        if (f->q_at_ms) queue_put(t, f->q_length, f->q_issued, f->q_rate, f->q_at_ms);
    }
    for (int i = 0; i < SK_MMASTERS; i++) {
        const struct sk_metrics_master *f = &from->masters[i];
        if (f->addr[0]) redis_master(into, f->addr, f->used, f->max, f->unsafe, f->at_ms);
    }
    into->queue_used |= from->queue_used;
    add_counts(into->passes, from->passes, SK_MQ_EVENTS);
    return 0;
}

sk_metrics *sk_metrics_node_sum(sk_node *node)
{
    sk_metrics *sum = sk_metrics_new();
    if (!sum) return NULL;
    for (int i = 0; i < sk_node_api_slots(node); i++) {
        const sk_metrics *m = sk_node_api_mem(node, i);
        /* a slot whose process has not started yet is all zero */
        if (m->magic == METRICS_MAGIC) sk_metrics_merge(sum, m);
    }
    return sum;
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

/* A histogram of nb bounds, their text in le (NULL: 2^b), the counts per
 * bucket (bucket nb: +Inf) summed into the cumulative series; its sum as
 * text. */
static void histogram(struct out *o, const char *name, const char *help, const uint64_t *bucket,
                      size_t nb, const char *const *le, const char *sum)
{
    header(o, name, "histogram", help);
    uint64_t cum = 0;
    for (size_t b = 0; b <= nb; b++) {
        char bound[24] = "+Inf";
        cum += bucket[b];
        if (b < nb && !le) snprintf(bound, sizeof bound, "%d", 1 << b);
        put(o, "%s_bucket{le=\"%s\"} %llu\n", name, b < nb && le ? le[b] : bound,
            (unsigned long long)cum);
    }
    put(o, "%s_sum %s\n", name, sum);
    put(o, "%s_count %llu\n", name, (unsigned long long)cum);
}

/* Rows in use, by activity id (the text is stable from scrape to scrape). */
static int sorted_rows(const sk_metrics *m, const struct sk_metrics_act **rows)
{
    int n = 0;
    for (int i = 0; i < SK_METRICS_ACTS; i++)
        if (m->acts[i].id) rows[n++] = &m->acts[i];
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && rows[j - 1]->id > rows[j]->id; j--) {
            const struct sk_metrics_act *t = rows[j];
            rows[j] = rows[j - 1];
            rows[j - 1] = t;
        }
    return n;
}

/* The waiting rooms: pass events per activity (counters) and each queue as
 * last seen (gauges: the newest observation, never a sum). */
static void render_queues(const struct sk_metrics_act *const *rows, int n, struct out *o)
{
    header(o, "seckill_activity_queue_passes_total", "counter",
           "Waiting-room passes handed out, spent by a purchase, found expired, by activity.");
    for (int i = 0; i < n; i++) {
        const struct sk_metrics_act *a = rows[i];
        if (!a->q_at_ms && !a->passes[0] && !a->passes[1] && !a->passes[2]) continue;
        for (int e = 0; e < SK_MQ_EVENTS; e++)
            put(o, "seckill_activity_queue_passes_total{activity=\"%llu\",event=\"%s\"} %llu\n",
                (unsigned long long)a->id, pass_events[e], (unsigned long long)a->passes[e]);
    }
    static const char *const names[3][2] = {
        {"seckill_queue_length", "Buyers in a waiting room's queue (Redis, as last seen)."},
        {"seckill_queue_passes_issued",
         "Places of a waiting room's queue holding a pass (Redis, as last seen)."},
        {"seckill_queue_pace", "Passes per second of a waiting room (Redis, as last seen)."},
    };
    for (int f = 0; f < 3; f++) {
        header(o, names[f][0], "gauge", names[f][1]);
        for (int i = 0; i < n; i++) {
            const struct sk_metrics_act *a = rows[i];
            if (!a->q_at_ms) continue;
            int64_t v = f == 0 ? a->q_length : f == 1 ? a->q_issued : a->q_rate;
            put(o, "%s{activity=\"%llu\"} %lld\n", names[f][0], (unsigned long long)a->id,
                (long long)v);
        }
    }
}

static void render_acts(const sk_metrics *m, struct out *o)
{
    const struct sk_metrics_act *rows[SK_METRICS_ACTS];
    int n = sorted_rows(m, rows);
    if (!n) return;
    header(o, "seckill_activity_admitted_units_total", "counter",
           "Units this node's processes admitted, by activity (replays apart).");
    for (int i = 0; i < n; i++)
        put(o, "seckill_activity_admitted_units_total{activity=\"%llu\"} %llu\n",
            (unsigned long long)rows[i]->id, (unsigned long long)rows[i]->admitted_units);
    header(o, "seckill_activity_replays_total", "counter",
           "Idempotency-Key retries answered 200 with their first answer, by activity.");
    for (int i = 0; i < n; i++)
        put(o, "seckill_activity_replays_total{activity=\"%llu\"} %llu\n",
            (unsigned long long)rows[i]->id, (unsigned long long)rows[i]->replays);
    header(o, "seckill_activity_refusals_total", "counter",
           "Purchases refused, by activity and reason (reasons seen so far).");
    for (int i = 0; i < n; i++)
        for (int r = 0; r < m->n_reasons; r++)
            if (rows[i]->refusals[r])
                put(o, "seckill_activity_refusals_total{activity=\"%llu\",reason=\"%s\"} %llu\n",
                    (unsigned long long)rows[i]->id, m->reason_name[r],
                    (unsigned long long)rows[i]->refusals[r]);
    if (m->queue_used) render_queues(rows, n, o);
}

/* The Redis masters' memory and verdicts (a master not heard of for a
 * minute has left: not shown). */
static void render_masters(const sk_metrics *m, struct out *o)
{
    static const struct {
        const char *name, *help;
    } g[] = {
        {"seckill_redis_memory_used_bytes", "Redis used_memory of each master (INFO memory)."},
        {"seckill_redis_memory_max_bytes", "Redis maxmemory of each master (0: no limit)."},
        {"seckill_redis_settings_unsafe",
         "1 while a master's settings refuse sales (an evicting maxmemory-policy)."},
    };
    int64_t now = sk_wall_ms();
    int any = 0;
    for (int i = 0; i < SK_MMASTERS; i++)
        any |= m->masters[i].addr[0] && now - m->masters[i].at_ms < 60000;
    if (!any) return;
    for (int k = 0; k < 3; k++) {
        header(o, g[k].name, "gauge", g[k].help);
        for (int i = 0; i < SK_MMASTERS; i++) {
            const struct sk_metrics_master *r = &m->masters[i];
            if (!r->addr[0] || now - r->at_ms >= 60000) continue;
            long long v = k == 0 ? r->used : k == 1 ? r->max : r->unsafe;
            if (v < 0) continue; /* not said */
            put(o, "%s{master=\"%s\"} %lld\n", g[k].name, r->addr, v);
        }
    }
}

static void render_registry(const sk_metrics *m, struct out *o)
{
    header(o, "seckill_http_requests_total", "counter",
           "HTTP requests answered, by route and status.");
    for (int r = 0; r < SK_MROUTE_COUNT; r++)
        for (int s = 0; s < STATUS_SLOTS; s++) {
            uint64_t v = m->requests[r][s];
            if (!v) continue;
            char status[12] = "other"; /* slot 0: outside 100..599 */
            if (s) snprintf(status, sizeof status, "%d", s);
            put(o, "seckill_http_requests_total{route=\"%s\",status=\"%s\"} %llu\n", route_names[r],
                status, (unsigned long long)v);
        }

    header(o, "seckill_admissions_total", "counter",
           "Purchases admitted by the stock script (Idempotency-Key replays apart).");
    put(o, "seckill_admissions_total %llu\n", (unsigned long long)m->admissions);
    header(o, "seckill_idempotent_replays_total", "counter",
           "Idempotency-Key retries answered 200 with their first answer: nothing admitted.");
    put(o, "seckill_idempotent_replays_total %llu\n", (unsigned long long)m->replays);

    header(o, "seckill_refusals_total", "counter", "Purchases refused, by reason.");
    for (int i = 0; i < m->n_reasons; i++)
        put(o, "seckill_refusals_total{reason=\"%s\"} %llu\n", m->reason_name[i],
            (unsigned long long)m->refusals[i]);

    header(o, "seckill_soldout_fastpath_total", "counter",
           "Sold-out refusals answered locally without a Redis round trip.");
    put(o, "seckill_soldout_fastpath_total %llu\n", (unsigned long long)m->soldout_fastpath);

    char sum[32];
    snprintf(sum, sizeof sum, "%.15g", m->rtt_sum);
    histogram(o, "seckill_redis_roundtrip_seconds", "Redis round-trip time of admission calls.",
              m->rtt_bucket, RTT_BUCKETS, rtt_le_text, sum);
    snprintf(sum, sizeof sum, "%llu", (unsigned long long)m->batch_sum);
    histogram(o, "seckill_batch_size", "Purchases carried by one batched Redis call.",
              m->batch_bucket, BATCH_BUCKETS, NULL, sum);
    snprintf(sum, sizeof sum, "%.15g", m->lat_sum);
    histogram(o, "seckill_purchase_duration_seconds",
              "Purchases from arrival to answer, as the server sees them.", m->lat_bucket,
              SK_MLAT_BUCKETS, lat_le_text, sum);

    header(o, "seckill_inflight_requests", "gauge", "Requests received and not yet answered.");
    put(o, "seckill_inflight_requests %lld\n", (long long)m->inflight);

    if (sk_aredis_cluster_used()) {
        header(o, "seckill_redis_cluster_redirections_total", "counter",
               "Redis Cluster MOVED/ASK redirections and TRYAGAIN/CLUSTERDOWN answers met by "
               "this process's Redis client.");
        for (int k = 0; k < SK_AREDIS_REDIRECT_COUNT; k++)
            put(o, "seckill_redis_cluster_redirections_total{kind=\"%s\"} %llu\n", cluster_names[k],
                (unsigned long long)sk_aredis_redirects((enum sk_aredis_redirect)k));
    }
    render_masters(m, o);
    if (m->queue_used) {
        header(o, "seckill_queue_passes_total", "counter",
               "Waiting-room passes handed out, spent by a purchase, found expired.");
        for (int e = 0; e < SK_MQ_EVENTS; e++)
            put(o, "seckill_queue_passes_total{event=\"%s\"} %llu\n", pass_events[e],
                (unsigned long long)m->passes[e]);
    }
    render_acts(m, o);
}

int sk_metrics_render(const sk_metrics *m, char *buf, size_t cap)
{
    if (!buf || cap == 0) return SK_ENOMEM;
    struct out o = {buf, cap, 0, 0};
    buf[0] = 0;
    render_registry(m, &o);
    if (o.full) {
        buf[0] = 0;
        return SK_ENOMEM;
    }
    return (int)o.len;
}

/* ---- the node: every HTTP slot summed, the worker process's figures --- */

static const char *const status_names[SK_NODE_NSTATUS] = {"created", "paid", "cancelled"};

/* 1 when slot p's process is running: its pid exists and it showed a sign
 * of life lately (HTTP processes every loop pass, the worker every
 * second). */
static int proc_alive(const struct sk_node_proc *p, int64_t now_ms)
{
    struct sk_node_proc *mp = (struct sk_node_proc *)p;
    int pid = atomic_load(&mp->pid);
    return pid > 0 && kill(pid, 0) == 0 && now_ms - atomic_load(&mp->beat_ms) < 10000;
}

/* The sales this node would never persist (docs/design.md, "The store's
 * identity"), as the worker's sampler last saw Redis. */
static void render_orphans(struct out *o, const struct sk_node_sample *smp)
{
    header(o, "seckill_orphan_activities", "gauge",
           "Activities live in Redis whose orders this node's database would never persist "
           "(unknown to it, or preheated from another store): seckill reconcile names the fix.");
    put(o, "seckill_orphan_activities %d\n", smp->n_orphans + smp->more_orphans);
    if (!smp->n_orphans) return;
    header(o, "seckill_activity_orphan", "gauge",
           "1 per activity live in Redis that this node's database would never persist, by "
           "reason (unknown_to_database, other_store).");
    for (int i = 0; i < smp->n_orphans; i++)
        put(o, "seckill_activity_orphan{activity=\"%llu\",reason=\"%s\"} 1\n",
            (unsigned long long)smp->orphans[i].id,
            smp->orphans[i].why == SK_NODE_ORPHAN_OTHER_STORE ? "other_store"
                                                              : "unknown_to_database");
}

/* The webhook dispatcher's endpoints (orders/webhooks.h), by name. */
static void render_webhooks(struct out *o, struct sk_node_worker *w)
{
    int n = atomic_load(&w->n_webhooks);
    if (n <= 0) return;
    static const struct {
        const char *name, *type, *help;
    } m[] = {
        {"seckill_webhook_delivered_total", "counter",
         "Events the endpoint acknowledged with a 2xx."},
        {"seckill_webhook_failed_attempts_total", "counter",
         "Delivery attempts that got no 2xx (error, timeout, 4xx, 5xx): each is retried."},
        {"seckill_webhook_dead_lettered_total", "counter",
         "Events given up after the retry horizon (webhook_dead; seckill events replay)."},
        {"seckill_webhook_retrying", "gauge", "1 while the endpoint's next event has failed."},
        {"seckill_webhook_lag_seconds", "gauge",
         "Age of the oldest event not yet delivered to the endpoint (0: none waiting)."},
        {"seckill_webhook_paused", "gauge", "1 while the admin API has the endpoint paused."},
        {"seckill_webhook_signing_secrets", "gauge",
         "Secrets signing each request: 2 while a rotated secret still signs."},
    };
    int64_t now = sk_wall_ms();
    for (size_t k = 0; k < sizeof m / sizeof m[0]; k++) {
        header(o, m[k].name, m[k].type, m[k].help);
        for (int i = 0; i < n && i < SK_NODE_WEBHOOKS; i++) {
            struct sk_node_webhook *h = &w->webhooks[i];
            if (!h->name[0]) continue; /* left by a removed endpoint */
            int64_t oldest = atomic_load(&h->oldest_ms);
            double v = k == 0                       ? (double)atomic_load(&h->delivered)
                       : k == 1                     ? (double)atomic_load(&h->failed)
                       : k == 2                     ? (double)atomic_load(&h->dead)
                       : k == 3                     ? (double)atomic_load(&h->retrying)
                       : k == 5                     ? (double)atomic_load(&h->paused)
                       : k == 6                     ? (double)atomic_load(&h->secrets)
                       : oldest > 0 && now > oldest ? (double)(now - oldest) / 1000.0
                                                    : 0.0;
            put(o, "%s{endpoint=\"%s\"} %.15g\n", m[k].name, h->name, v);
        }
    }
}

static void render_worker(struct out *o, const struct sk_node_worker *w,
                          const struct sk_node_sample *smp)
{
    render_webhooks(o, (struct sk_node_worker *)w);
    for (int c = 0; c < SK_WC_COUNT_; c++) {
        int gauge = sk_node_wc_kind_of((enum sk_node_wc)c) == SK_WC_GAUGE;
        header(o, sk_node_wc_name((enum sk_node_wc)c), gauge ? "gauge" : "counter",
               sk_node_wc_help((enum sk_node_wc)c));
        put(o, "%s %llu\n", sk_node_wc_name((enum sk_node_wc)c),
            (unsigned long long)sk_node_wc_get(w, (enum sk_node_wc)c));
    }
    if (smp->sampled_ms) {
        /* what alerting needs: reachability as the worker's last sample saw it */
        header(o, "seckill_redis_up", "gauge",
               "1 when the order worker's last sample (once a second) reached Redis.");
        put(o, "seckill_redis_up %d\n", smp->redis_ok ? 1 : 0);
        header(o, "seckill_database_up", "gauge",
               "1 when the order worker's last sample reached the database.");
        put(o, "seckill_database_up %d\n", smp->db_ok ? 1 : 0);
        header(o, "seckill_sample_timestamp_seconds", "gauge",
               "When the order worker last sampled Redis and the database (unix time).");
        put(o, "seckill_sample_timestamp_seconds %lld\n", (long long)(smp->sampled_ms / 1000));
        render_orphans(o, smp);
    }
    if (!smp->sampled_ms || smp->n_acts == 0) return;
    /* how a family shows its field: as is, only when not negative (-1: not
     * taken), milliseconds as seconds, the switch as 0/1, one per status */
    enum { PLAIN, SET_ONLY, SECONDS, SWITCH, BY_STATUS };
    static const struct {
        const char *name, *help;
        size_t off;
        int how;
    } g[] = {
        {"seckill_activity_stock_initial", "Units the activity was preheated with.",
         offsetof(struct sk_node_act, initial), PLAIN},
        {"seckill_activity_stock_remaining", "Units left in Redis (the sampler's last look).",
         offsetof(struct sk_node_act, remaining), PLAIN},
        {"seckill_activity_stream_backlog",
         "Admitted orders not yet persisted to the database (-1: unknown).",
         offsetof(struct sk_node_act, backlog), PLAIN},
        {"seckill_activity_dead_letters", "Entries in the activity's dead-letter stream(s).",
         offsetof(struct sk_node_act, dlq), PLAIN},
        {"seckill_activity_reconcile_differences",
         "Differences found by the last periodic reconcile (-1: not checked yet).",
         offsetof(struct sk_node_act, reconcile_drift), PLAIN},
        {"seckill_activity_registered",
         "Buyers registered for the activity (Redis's set; only activities taking "
         "registrations).",
         offsetof(struct sk_node_act, registered), SET_ONLY},
        {"seckill_activity_oldest_unpersisted_seconds",
         "Age of the oldest admitted order not yet persisted to the database, on Redis's "
         "clock (0: none waits; -1: unknown).",
         offsetof(struct sk_node_act, oldest_age_ms), SECONDS},
        {"seckill_activity_admitted_units",
         "Units admitted over the sale's life, each order once (held by buyers plus given "
         "back): the figure of `seckill activity show` and the dashboard.",
         offsetof(struct sk_node_act, admitted), PLAIN},
        {"seckill_activity_open", "1 when the activity's switch is open.", 0, SWITCH},
        {"seckill_activity_orders", "Orders in the database, by status.", 0, BY_STATUS},
    };
    for (size_t k = 0; k < sizeof g / sizeof g[0]; k++) {
        header(o, g[k].name, "gauge", g[k].help);
        for (int i = 0; i < smp->n_acts; i++) {
            const struct sk_node_act *a = &smp->acts[i];
            unsigned long long id = a->id;
            long long v =
                g[k].how == SWITCH ? a->open != 0 : *(const int64_t *)((const char *)a + g[k].off);
            if (g[k].how == SECONDS)
                put(o, "%s{activity=\"%llu\"} %s%lld.%03lld\n", g[k].name, id, v < 0 ? "-" : "",
                    v < 0 ? 1LL : v / 1000, v < 0 ? 0LL : v % 1000);
            else if (g[k].how == BY_STATUS)
                for (int s = 0; s < SK_NODE_NSTATUS; s++)
                    put(o, "%s{activity=\"%llu\",status=\"%s\"} %lld\n", g[k].name, id,
                        status_names[s], (long long)a->orders[s]);
            else if (g[k].how != SET_ONLY || v >= 0)
                put(o, "%s{activity=\"%llu\"} %lld\n", g[k].name, id, v);
        }
    }
}

static void render_procs(struct out *o, sk_node *node)
{
    static const char *const kinds[] = {"api", "worker"};
    int alive[2] = {0, 0}, present[2] = {0, 0};
    uint64_t starts[2] = {0, 0};
    int64_t now = sk_wall_ms();
    for (int i = 0; i < sk_node_procs(node); i++) {
        struct sk_node_proc *p = sk_node_proc_at(node, i);
        int k = i < sk_node_api_slots(node) ? 0 : 1;
        present[k] = 1;
        starts[k] += atomic_load(&p->starts);
        alive[k] += proc_alive(p, now);
    }
    header(o, "seckill_node_processes", "gauge", "Processes of the node running now, by kind.");
    for (int k = 0; k < 2; k++)
        if (present[k]) put(o, "seckill_node_processes{kind=\"%s\"} %d\n", kinds[k], alive[k]);
    header(o, "seckill_node_process_starts_total", "counter",
           "Processes started by the node's supervisor, by kind (restarts included).");
    for (int k = 0; k < 2; k++)
        if (present[k])
            put(o, "seckill_node_process_starts_total{kind=\"%s\"} %llu\n", kinds[k],
                (unsigned long long)starts[k]);
}

/* The text of registry m, then (node not NULL) the node's worker and
 * processes, in a buffer the caller frees: 16 KiB, then twice as much
 * until it fits; over 1 GiB cannot happen: the output is bounded. */
static char *render_grown(const sk_metrics *m, sk_node *node, const struct sk_node_sample *smp,
                          size_t *len)
{
    char *buf = NULL;
    size_t cap = 0;
    for (;;) {
        if (cap > ((size_t)1 << 30) || SK_VEC_RESERVE(buf, cap, cap + 1, 16384)) {
            free(buf);
            return NULL;
        }
        struct out o = {buf, cap, 0, 0};
        buf[0] = 0;
        render_registry(m, &o);
        if (node && sk_node_worker(node)) render_worker(&o, sk_node_worker(node), smp);
        if (node) render_procs(&o, node);
        if (!o.full) {
            if (len) *len = o.len;
            return buf;
        }
    }
}

char *sk_metrics_render_alloc(const sk_metrics *m, size_t *len)
{
    return render_grown(m, NULL, NULL, len);
}

char *sk_metrics_render_node(sk_node *node, size_t *len)
{
    sk_metrics *sum = sk_metrics_node_sum(node);
    struct sk_node_sample *smp = calloc(1, sizeof *smp);
    char *buf = NULL;
    if (sum && smp) {
        if (sk_node_worker(node)) sk_node_sample_get(sk_node_worker(node), smp);
        buf = render_grown(sum, node, smp, len);
    }
    sk_metrics_free(sum);
    free(smp);
    return buf;
}
