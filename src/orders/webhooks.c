/* webhooks.c - the webhook dispatcher (webhooks.h): a thread per endpoint
 * reading the outbox from its cursor and posting one event at a time. */
#include "orders/webhooks.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>
#include <jansson.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "orders/webhook_settle.h"
#include "store/store.h"

#define PAGE 64

struct ep {
    struct sk_webhooks *w;
    struct sk_wh_endpoint cfg;
    struct sk_wh_key keys[2];
    int nkeys;
    pthread_t th;
    int started;
    uint64_t rng;
    pthread_mutex_t mu; /* the figures */
    struct sk_wh_stats stats;
    struct sk_node_webhook *node; /* the node's copy of them, or NULL */
};

struct sk_webhooks {
    char *db_spec;
    struct sk_wh_opts o;
    atomic_int stop;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* stop wakes the sleepers */
    struct ep eps[SK_WH_MAX_ENDPOINTS];
    int n;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

int sk_wh_endpoint_check(const struct sk_wh_endpoint *e, char *why, size_t cap)
{
    if (!sk_wh_name_ok(e->name)) {
        snprintf(why, cap, "webhook endpoint name: 1 to 63 of A-Z a-z 0-9 _ . -");
        return SK_EINVAL;
    }
    if (strncmp(e->url, "http://", 7) && strncmp(e->url, "https://", 8)) {
        snprintf(why, cap, "webhook endpoint %s: the url must start with http:// or https://",
                 e->name);
        return SK_EINVAL;
    }
    for (int i = 0; i < 2; i++) {
        if (i == 1 && !e->secret[1][0]) break;
        struct sk_wh_key k;
        char w[160];
        if (sk_wh_key_parse(e->secret[i], &k, w, sizeof w) < 0) {
            snprintf(why, cap, "webhook endpoint %s: secret %d: %s", e->name, i + 1, w);
            return SK_EINVAL;
        }
    }
    return 0;
}

/* Does type pass the endpoint's filter? */
static int wanted(const char *filter, const char *type)
{
    if (!filter[0]) return 1;
    const char *p = filter;
    while (*p) {
        size_t n = strcspn(p, ",");
        while (n && *p == ' ')
            p++, n--;
        if ((n == 1 && *p == '*') || (n && p[n - 1] == '.' && !strncmp(type, p, n)) ||
            (n == strlen(type) && !strncmp(type, p, n)))
            return 1;
        p += n;
        if (*p == ',') p++;
    }
    return 0;
}

/* A uniform draw in [0, n) (xorshift: jitter only). */
static int64_t draw(struct ep *e, int64_t n)
{
    uint64_t x = e->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    e->rng = x;
    return n > 0 ? (int64_t)(x % (uint64_t)n) : 0;
}

/* Sleeps ms unless stopped: 1 when stopped. */
static int nap(struct sk_webhooks *w, int64_t ms)
{
    if (atomic_load(&w->stop)) return 1;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&w->mu);
    while (!atomic_load(&w->stop) && pthread_cond_timedwait(&w->cv, &w->mu, &ts) == 0) {
    }
    pthread_mutex_unlock(&w->mu);
    return atomic_load(&w->stop);
}

/* The body of event e: its stable id, type, subject, seq, ids, time and
 * payload. New memory the caller frees; NULL when out of memory. */
static char *event_body(const struct sk_event *e, char *id, size_t cap)
{
    snprintf(id, cap, "%s:%" PRId64, e->subject, e->seq);
    json_t *data = json_loads(e->payload, 0, NULL);
    json_t *o =
        json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:o}", "id", id, "type", e->type, "subject",
                  e->subject, "seq", (json_int_t)e->seq, "activity_id", (json_int_t)e->activity_id,
                  "created_ms", (json_int_t)e->created_ms, "data", data ? data : json_object());
    if (!o) return NULL;
    if (e->order_id[0]) json_object_set_new(o, "order_id", json_string(e->order_id));
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    return s;
}

struct reply {
    int64_t retry_after_ms; /* -1 none */
};

static size_t on_header(char *b, size_t size, size_t n, void *arg)
{
    struct reply *r = arg;
    size_t len = size * n;
    static const char name[] = "retry-after:";
    if (len > sizeof name && !strncasecmp(b, name, sizeof name - 1)) {
        char v[32];
        size_t vl = len - (sizeof name - 1);
        if (vl >= sizeof v) vl = sizeof v - 1;
        memcpy(v, b + sizeof name - 1, vl);
        v[vl] = 0;
        char *end;
        long s = strtol(v, &end, 10);
        if (end != v && s >= 0 && s < 86400) r->retry_after_ms = s * 1000;
    }
    return len;
}

static size_t on_body(char *b, size_t size, size_t n, void *arg)
{
    (void)b;
    (void)arg;
    return size * n; /* the answer's body is not read */
}

static int on_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    (void)a, (void)b, (void)c, (void)d;
    return atomic_load(&((struct sk_webhooks *)arg)->stop); /* non-zero: cut short */
}

/* One POST of event e: the HTTP status (0: no answer), *retry_after. */
static long post(struct ep *ep, CURL *h, const struct sk_event *e, int64_t *retry_after)
{
    char id[SK_STORE_SUBJECT_MAX + 24];
    char *body = event_body(e, id, sizeof id);
    if (!body) return 0;
    int64_t ts = sk_wall_ms() / 1000;
    char sig[2 * SK_WH_SIG_MAX + 2], hid[sizeof id + 16], hts[48], hsig[sizeof sig + 24];
    long status = 0;
    if (sk_wh_signature_header(ep->keys, ep->nkeys, id, ts, body, strlen(body), sig, sizeof sig) ==
        0) {
        snprintf(hid, sizeof hid, "webhook-id: %s", id);
        snprintf(hts, sizeof hts, "webhook-timestamp: %" PRId64, ts);
        snprintf(hsig, sizeof hsig, "webhook-signature: %s", sig);
        struct curl_slist *hl = NULL;
        hl = curl_slist_append(hl, "content-type: application/json");
        hl = curl_slist_append(hl, hid);
        hl = curl_slist_append(hl, hts);
        hl = curl_slist_append(hl, hsig);
        hl = curl_slist_append(hl, "expect:");
        struct reply r = {-1};
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
        curl_easy_setopt(h, CURLOPT_HEADERDATA, &r);
        if (curl_easy_perform(h) == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        curl_slist_free_all(hl);
        *retry_after = r.retry_after_ms;
    }
    free(body);
    return status;
}

static void set_stats(struct ep *ep, int64_t delivered, int64_t failed, int64_t dead, int retrying,
                      int64_t lag)
{
    pthread_mutex_lock(&ep->mu);
    ep->stats.delivered += (uint64_t)delivered;
    ep->stats.failed_attempts += (uint64_t)failed;
    ep->stats.dead += (uint64_t)dead;
    ep->stats.retrying = retrying;
    ep->stats.oldest_lag_ms = lag;
    pthread_mutex_unlock(&ep->mu);
    struct sk_node_webhook *n = ep->node;
    if (n) {
        atomic_fetch_add(&n->delivered, (uint64_t)delivered);
        atomic_fetch_add(&n->failed, (uint64_t)failed);
        atomic_fetch_add(&n->dead, (uint64_t)dead);
        atomic_store(&n->retrying, retrying);
        atomic_store(&n->oldest_ms, lag > 0 ? sk_wall_ms() - lag : 0);
    }
}

/* Delivers event e (retrying until acknowledged, the horizon, or stop):
 * 0 done (delivered or dead-lettered, the cursor moved), 1 stopped, or a
 * store code. */
static int deliver(struct ep *ep, sk_store *st, CURL *h, const struct sk_event *e)
{
    struct sk_webhooks *w = ep->w;
    const struct sk_wh_opts *o = &w->o;
    int64_t first = sk_mono_ms();
    for (int64_t attempt = 1;; attempt++) {
        int64_t retry_after = -1;
        long status = post(ep, h, e, &retry_after);
        if (atomic_load(&w->stop)) return 1;
        int64_t now = sk_wall_ms();
        if (status >= 200 && status < 300) {
            set_stats(ep, 1, 0, 0, 0, 0);
            return sk_store_webhook_advance(st, ep->cfg.name, e->id, now);
        }
        set_stats(ep, 0, 1, 0, 1, now - e->created_ms);
        if (sk_mono_ms() - first >= o->horizon_ms) {
            sk_log(SK_LOG_WARN,
                   "webhooks: %s: event %s:%" PRId64 " dead-lettered after %" PRId64
                   " attempts (last HTTP status %ld)",
                   ep->cfg.name, e->subject, e->seq, attempt, status);
            set_stats(ep, 0, 0, 1, 0, 0);
            return sk_store_webhook_dead(st, ep->cfg.name, e->id, now, attempt, (int)status);
        }
        /* exponential, full jitter in [d/2, d]; Retry-After when longer */
        int64_t d = o->backoff_min_ms;
        for (int64_t k = 1; k < attempt && d < o->backoff_max_ms; k++)
            d *= 2;
        if (d > o->backoff_max_ms) d = o->backoff_max_ms;
        d = d / 2 + draw(ep, d / 2 + 1);
        if ((status == 429 || status == 503) && retry_after > d) d = retry_after;
        if (nap(w, d)) return 1;
    }
}

static void *run(void *arg)
{
    struct ep *ep = arg;
    struct sk_webhooks *w = ep->w;
    sk_store *st = NULL;
    CURL *h = curl_easy_init();
    struct sk_event *page = malloc(PAGE * sizeof *page);
    struct sk_wh_settle seen = {.n = 0};
    char err[512];
    if (h) {
        curl_easy_setopt(h, CURLOPT_URL, ep->cfg.url);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)w->o.timeout_ms);
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)w->o.timeout_ms);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, w);
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    }
    while (h && page && !atomic_load(&w->stop)) {
        if (!st && sk_store_open_waiting(&st, w->db_spec, err, sizeof err) != 0) {
            st = NULL;
            nap(w, 1000);
            continue;
        }
        int64_t cursor = 0;
        size_t n = 0;
        int rc = sk_store_webhook_cursor(st, ep->cfg.name, sk_wall_ms(), &cursor);
        int64_t hi = 0;
        if (rc == 0) rc = sk_store_events_list(st, cursor, PAGE, page, &n);
        if (rc == 0) rc = sk_store_events_max(st, &hi);
        if (rc) {
            nap(w, w->o.idle_ms);
            continue;
        }
        /* (after the read of hi: its rows were inserted before mono) */
        int64_t now = sk_wall_ms(), mono = sk_mono_ms();
        sk_wh_settle_done(&seen, cursor);
        sk_wh_settle_saw(&seen, hi, mono);
        size_t i = 0;
        for (; rc == 0 && i < n; i++) {
            const struct sk_event *e = &page[i];
            /* may have a gap before it */
            if (!sk_wh_settle_ready(&seen, e->id, mono, w->o.settle_ms)) break;
            if (!wanted(ep->cfg.filter, e->type)) {
                rc = sk_store_webhook_advance(st, ep->cfg.name, e->id, now);
                continue;
            }
            set_stats(ep, 0, 0, 0, 0, now - e->created_ms);
            rc = deliver(ep, st, h, e);
        }
        if (rc == 1) break;
        if (i == n || rc) set_stats(ep, 0, 0, 0, 0, 0);
        if (n < PAGE || i < n || rc) nap(w, w->o.idle_ms);
    }
    free(page);
    if (h) curl_easy_cleanup(h);
    sk_store_close(st);
    return NULL;
}

int sk_webhooks_start(sk_webhooks **out, const char *db_spec, const struct sk_wh_endpoint *eps,
                      int n, const struct sk_wh_opts *o, char *err, size_t cap)
{
    *out = NULL;
    if (n < 0 || n > SK_WH_MAX_ENDPOINTS) {
        snprintf(err, cap, "at most %d webhook endpoints", SK_WH_MAX_ENDPOINTS);
        return SK_EINVAL;
    }
    for (int i = 0; i < n; i++) {
        if (sk_wh_endpoint_check(&eps[i], err, cap) < 0) return SK_EINVAL;
        for (int j = 0; j < i; j++)
            if (!strcmp(eps[i].name, eps[j].name)) {
                snprintf(err, cap, "two webhook endpoints are named %s", eps[i].name);
                return SK_EINVAL;
            }
    }
    pthread_once(&curl_once, curl_init);
    sk_webhooks *w = calloc(1, sizeof *w);
    if (!w || !(w->db_spec = strdup(db_spec))) {
        free(w);
        snprintf(err, cap, "out of memory");
        return SK_ENOMEM;
    }
    w->o = o ? *o : (struct sk_wh_opts){0};
    if (w->o.horizon_ms <= 0) w->o.horizon_ms = 86400000;
    if (w->o.backoff_min_ms <= 0) w->o.backoff_min_ms = 1000;
    if (w->o.backoff_max_ms <= 0) w->o.backoff_max_ms = 300000;
    if (w->o.timeout_ms <= 0) w->o.timeout_ms = 10000;
    if (w->o.settle_ms == 0) w->o.settle_ms = strncmp(db_spec, "sqlite:", 7) ? 10000 : 0;
    if (w->o.settle_ms < 0) w->o.settle_ms = 0;
    if (w->o.idle_ms <= 0) w->o.idle_ms = 500;
    uint64_t seed = w->o.seed ? w->o.seed : (uint64_t)sk_mono_ms() * 0x9e3779b97f4a7c15ull;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->n = n;
    for (int i = 0; i < n; i++) {
        struct ep *ep = &w->eps[i];
        ep->w = w;
        ep->cfg = eps[i];
        ep->rng = (seed + (uint64_t)i * 0xbf58476d1ce4e5b9ull) | 1;
        pthread_mutex_init(&ep->mu, NULL);
        char why[160];
        for (int k = 0; k < 2 && eps[i].secret[k][0]; k++)
            if (sk_wh_key_parse(eps[i].secret[k], &ep->keys[ep->nkeys], why, sizeof why) == 0)
                ep->nkeys++;
    }
    if (w->o.node) {
        for (int i = 0; i < n && i < SK_NODE_WEBHOOKS; i++) {
            w->eps[i].node = &w->o.node->webhooks[i];
            snprintf(w->eps[i].node->name, sizeof w->eps[i].node->name, "%s", eps[i].name);
        }
        atomic_store(&w->o.node->n_webhooks, n < SK_NODE_WEBHOOKS ? n : SK_NODE_WEBHOOKS);
    }
    for (int i = 0; i < n; i++) {
        if (pthread_create(&w->eps[i].th, NULL, run, &w->eps[i]) != 0) {
            snprintf(err, cap, "cannot start the webhook thread of %s", eps[i].name);
            sk_webhooks_stop(w);
            return SK_ENOMEM;
        }
        w->eps[i].started = 1;
    }
    *out = w;
    return 0;
}

void sk_webhooks_stats(sk_webhooks *w, int i, struct sk_wh_stats *out)
{
    memset(out, 0, sizeof *out);
    if (!w || i < 0 || i >= w->n) return;
    pthread_mutex_lock(&w->eps[i].mu);
    *out = w->eps[i].stats;
    pthread_mutex_unlock(&w->eps[i].mu);
}

void sk_webhooks_stop(sk_webhooks *w)
{
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    atomic_store(&w->stop, 1);
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    for (int i = 0; i < w->n; i++) {
        if (w->eps[i].started) pthread_join(w->eps[i].th, NULL);
        pthread_mutex_destroy(&w->eps[i].mu);
    }
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w->db_spec);
    free(w);
}
