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
    struct sk_wh_endpoint cfg; /* name: the cursor's key; url and filter never change */
    uint64_t activity_id;      /* a database endpoint's activity; 0: every one */
    int64_t db_id;             /* its row; 0: a configured endpoint */
    pthread_t th;
    int started;
    atomic_int stop; /* this endpoint only: it was removed */
    atomic_int done; /* its thread has ended */
    uint64_t rng;
    pthread_mutex_t mu; /* the figures, and what the watcher hands over: */
    struct sk_wh_key keys[2];
    int nkeys;
    int paused;
    struct sk_wh_stats stats;
    struct sk_node_webhook *node; /* the node's copy of them, or NULL */
    struct ep *next;              /* the watcher's list */
};

struct sk_webhooks {
    char *db_spec;
    struct sk_wh_opts o;
    atomic_int stop;
    pthread_mutex_t mu; /* the database endpoints' list (dyn) */
    pthread_cond_t cv;  /* stop wakes the sleepers */
    struct ep eps[SK_WH_MAX_ENDPOINTS];
    int n;
    struct ep *dyn; /* the database's endpoints, each with its thread */
    pthread_t watcher;
    int watching;
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

/* Stopped: the dispatcher, or this endpoint (removed)? */
static int halted(struct ep *ep)
{
    return atomic_load(&ep->w->stop) || atomic_load(&ep->stop);
}

/* Sleeps ms unless stopped: 1 when stopped. On the monotonic clock (w->cv
 * waits on it): a deadline on the wall clock taken while it was ahead
 * and waited for once it was stepped back held the endpoint for the
 * step's length (3 h in the nemesis's clock jump). */
static int nap(struct ep *ep, int64_t ms)
{
    struct sk_webhooks *w = ep->w;
    if (halted(ep)) return 1;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&w->mu);
    while (!halted(ep) && pthread_cond_timedwait(&w->cv, &w->mu, &ts) == 0) {
    }
    pthread_mutex_unlock(&w->mu);
    return halted(ep);
}

static int is_paused(struct ep *ep)
{
    pthread_mutex_lock(&ep->mu);
    int p = ep->paused;
    pthread_mutex_unlock(&ep->mu);
    return p;
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
    return halted(arg); /* non-zero: cut short */
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
    struct sk_wh_key keys[2];
    pthread_mutex_lock(&ep->mu); /* the watcher may rotate them */
    int nkeys = ep->nkeys;
    memcpy(keys, ep->keys, sizeof keys);
    pthread_mutex_unlock(&ep->mu);
    if (sk_wh_signature_header(keys, nkeys, id, ts, body, strlen(body), sig, sizeof sig) == 0) {
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

/* The store could not be read since since_ms (wall): what was committed
 * since then may wait undelivered, so the lag is at least that long (an
 * outage never reads as an endpoint caught up). */
static void set_blind(struct ep *ep, int64_t since_ms)
{
    int64_t lag = sk_wall_ms() - since_ms;
    pthread_mutex_lock(&ep->mu);
    int worse = lag > ep->stats.oldest_lag_ms;
    if (worse) ep->stats.oldest_lag_ms = lag;
    pthread_mutex_unlock(&ep->mu);
    if (worse && ep->node) atomic_store(&ep->node->oldest_ms, since_ms);
}

/* Delivers event e (retrying until acknowledged, the horizon, or stop):
 * 0 done (delivered: the caller moves the cursor past it; or
 * dead-lettered, the cursor moved within epoch), 1 stopped, 2 paused
 * meanwhile (the cursor stays), or a store code. */
static int deliver(struct ep *ep, sk_store *st, CURL *h, const struct sk_event *e, int64_t epoch)
{
    const struct sk_wh_opts *o = &ep->w->o;
    int64_t first = sk_mono_ms();
    for (int64_t attempt = 1;; attempt++) {
        int64_t retry_after = -1;
        long status = post(ep, h, e, &retry_after);
        if (halted(ep)) return 1;
        int64_t now = sk_wall_ms();
        if (status >= 200 && status < 300) {
            set_stats(ep, 1, 0, 0, 0, 0);
            return 0;
        }
        set_stats(ep, 0, 1, 0, 1, now - e->created_ms);
        if (sk_mono_ms() - first >= o->horizon_ms) {
            sk_log(SK_LOG_WARN,
                   "webhooks: %s: event %s:%" PRId64 " dead-lettered after %" PRId64
                   " attempts (last HTTP status %ld)",
                   ep->cfg.name, e->subject, e->seq, attempt, status);
            set_stats(ep, 0, 0, 1, 0, 0);
            return sk_store_webhook_dead(st, ep->cfg.name, e, epoch, now, attempt, (int)status);
        }
        /* exponential, full jitter in [d/2, d]; Retry-After when longer */
        int64_t d = o->backoff_min_ms;
        for (int64_t k = 1; k < attempt && d < o->backoff_max_ms; k++)
            d *= 2;
        if (d > o->backoff_max_ms) d = o->backoff_max_ms;
        d = d / 2 + draw(ep, d / 2 + 1);
        if ((status == 429 || status == 503) && retry_after > d) d = retry_after;
        if (nap(ep, d)) return 1;
        if (is_paused(ep)) return 2;
    }
}

/* An event for this endpoint: its activity's (a database endpoint), and
 * its filter's. */
static int wanted(const struct ep *ep, const struct sk_event *e)
{
    return (!ep->activity_id || e->activity_id == ep->activity_id) &&
           sk_wh_filter_wants(ep->cfg.filter, e->type);
}

static void *run(void *arg)
{
    struct ep *ep = arg;
    struct sk_webhooks *w = ep->w;
    sk_store *st = NULL;
    CURL *h = curl_easy_init();
    struct sk_event *page = malloc(PAGE * sizeof *page);
    struct sk_wh_settle seen = {.n = 0};
    /* within a batch row (store.h): its events up to part_sub are done,
     * in part_epoch; the stored cursor moves past a row once it is whole
     * (a restart delivers the row's first ones again: at least once) */
    int64_t part_row = 0, part_epoch = 0;
    int32_t part_sub = 0;
    char err[512];
    int64_t read_ok_ms = sk_wall_ms(); /* the store last read whole */
    if (h) {
        curl_easy_setopt(h, CURLOPT_URL, ep->cfg.url);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)w->o.timeout_ms);
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)w->o.timeout_ms);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, ep);
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    }
    while (h && page && !halted(ep)) {
        if (!st && sk_store_open_waiting(&st, w->db_spec, err, sizeof err) != 0) {
            st = NULL;
            set_blind(ep, read_ok_ms);
            nap(ep, 1000);
            continue;
        }
        if (is_paused(ep)) { /* its cursor waits: it catches up on resume */
            set_stats(ep, 0, 0, 0, 0, 0);
            nap(ep, w->o.idle_ms);
            continue;
        }
        int64_t cursor = 0, epoch = 0;
        size_t n = 0;
        /* an endpoint of the admin API has its cursor from its add; none:
         * it was removed (the watcher stops this thread) */
        int rc = ep->db_id
                     ? sk_store_webhook_cursor_find(st, ep->cfg.name, &cursor, &epoch)
                     : sk_store_webhook_cursor(st, ep->cfg.name, sk_wall_ms(), &cursor, &epoch);
        int64_t hi = 0;
        /* the cursor not past the row, in the same epoch (a rewind: anew) */
        if (part_row && (part_epoch != epoch || cursor >= part_row)) part_row = 0;
        if (rc == 0)
            rc = part_row ? sk_store_events_list_at(st, part_row, part_sub, PAGE, page, &n)
                          : sk_store_events_list(st, cursor, PAGE, page, &n);
        if (rc == 0) rc = sk_store_events_max(st, &hi);
        if (rc) {
            set_blind(ep, read_ok_ms);
            nap(ep, w->o.idle_ms);
            continue;
        }
        read_ok_ms = sk_wall_ms();
        /* (after the read of hi: its rows were inserted before mono) */
        int64_t now = sk_wall_ms(), mono = sk_mono_ms(), pass = 0, flushed = mono;
        sk_wh_settle_done(&seen, cursor);
        sk_wh_settle_saw(&seen, hi, mono);
        size_t i = 0;
        for (; rc == 0 && i < n; i++) {
            const struct sk_event *e = &page[i];
            /* may have a gap before it */
            if (!sk_wh_settle_ready(&seen, e->id, mono, w->o.settle_ms)) break;
            if (wanted(ep, e)) {
                set_stats(ep, 0, 0, 0, 0, now - e->created_ms);
                rc = deliver(ep, st, h, e, epoch);
                if (rc != 0) break;
            }
            /* the cursor moves once a page, or every 200 ms while a slow
             * receiver takes the page: not a committed write per event
             * (a restart may deliver those again: at least once); a
             * batch row's events before its last move only part_sub */
            part_row = e->last ? 0 : e->id;
            part_sub = e->sub;
            part_epoch = epoch;
            if (!e->last) continue;
            pass = e->id;
            int64_t t = sk_mono_ms();
            if (t - flushed >= 200) {
                rc = sk_store_webhook_advance(st, ep->cfg.name, pass, epoch, sk_wall_ms());
                flushed = t, pass = 0;
            }
        }
        if (pass && (rc == 0 || rc == 1 || rc == 2))
            sk_store_webhook_advance(st, ep->cfg.name, pass, epoch, sk_wall_ms());
        if (rc == 1) break;
        if (i == n || rc) set_stats(ep, 0, 0, 0, 0, 0);
        if (n < PAGE || i < n || rc) nap(ep, w->o.idle_ms);
    }
    free(page);
    if (h) curl_easy_cleanup(h);
    sk_store_close(st);
    atomic_store(&ep->done, 1);
    return NULL;
}

/* A node slot for ep's figures (a free one: never used, or left by a
 * removed endpoint), named; none when all are taken. */
static void node_attach(struct sk_webhooks *w, struct ep *ep)
{
    struct sk_node_worker *nw = w->o.node;
    if (!nw) return;
    int n = atomic_load(&nw->n_webhooks), i = 0;
    while (i < n && nw->webhooks[i].name[0])
        i++;
    if (i >= SK_NODE_WEBHOOKS) return;
    struct sk_node_webhook *s = &nw->webhooks[i];
    atomic_store(&s->delivered, 0);
    atomic_store(&s->failed, 0);
    atomic_store(&s->dead, 0);
    atomic_store(&s->retrying, 0);
    atomic_store(&s->oldest_ms, 0);
    atomic_store(&s->paused, 0);
    atomic_store(&s->secrets, ep->nkeys);
    snprintf(s->name, sizeof s->name, "%s", ep->cfg.name);
    ep->node = s;
    if (i == n) atomic_store(&nw->n_webhooks, n + 1);
}

/* ep's keys and pause from row r (the watcher's, or at its start). */
static void take_row(struct ep *ep, const struct sk_store_webhook *r, int64_t now)
{
    struct sk_wh_key k[2];
    int nk = 0;
    char why[160];
    if (sk_wh_key_parse(r->secret, &k[nk], why, sizeof why) == 0) nk++;
    if (r->secret_prev[0] && now < r->prev_until_ms &&
        sk_wh_key_parse(r->secret_prev, &k[nk], why, sizeof why) == 0)
        nk++;
    pthread_mutex_lock(&ep->mu);
    memcpy(ep->keys, k, sizeof k);
    ep->nkeys = nk;
    ep->paused = r->paused;
    ep->stats.paused = r->paused;
    pthread_mutex_unlock(&ep->mu);
    if (ep->node) {
        atomic_store(&ep->node->paused, r->paused);
        atomic_store(&ep->node->secrets, nk);
    }
}

/* A thread for the database's endpoint r: 0, or SK_EINVAL (a row a hand
 * edit broke) or SK_ENOMEM; the next pass tries again. */
static int dyn_start(struct sk_webhooks *w, const struct sk_store_webhook *r, int64_t now)
{
    struct ep *ep = calloc(1, sizeof *ep);
    if (!ep) return SK_ENOMEM;
    ep->w = w;
    ep->activity_id = r->activity_id;
    ep->db_id = r->id;
    sk_store_webhook_key(ep->cfg.name, r->activity_id, r->name);
    snprintf(ep->cfg.url, sizeof ep->cfg.url, "%s", r->url);
    snprintf(ep->cfg.filter, sizeof ep->cfg.filter, "%s", r->events);
    snprintf(ep->cfg.secret[0], sizeof ep->cfg.secret[0], "%s", r->secret);
    char why[200];
    if ((strncmp(r->url, "http://", 7) && strncmp(r->url, "https://", 8)) ||
        sk_wh_key_parse(r->secret, &ep->keys[0], why, sizeof why) < 0) {
        sk_log(SK_LOG_WARN, "webhooks: endpoint %s: its url or secret is not valid; not started",
               ep->cfg.name);
        free(ep);
        return SK_EINVAL;
    }
    ep->rng = (w->o.seed + (uint64_t)r->id * 0xbf58476d1ce4e5b9ull) | 1;
    pthread_mutex_init(&ep->mu, NULL);
    node_attach(w, ep);
    take_row(ep, r, now);
    if (pthread_create(&ep->th, NULL, run, ep) != 0) {
        if (ep->node) ep->node->name[0] = 0;
        pthread_mutex_destroy(&ep->mu);
        free(ep);
        return SK_ENOMEM;
    }
    ep->started = 1;
    pthread_mutex_lock(&w->mu);
    ep->next = w->dyn;
    w->dyn = ep;
    pthread_mutex_unlock(&w->mu);
    sk_log(SK_LOG_INFO, "webhooks: endpoint %s started", ep->cfg.name);
    return 0;
}

/* Joins and frees the endpoints whose thread ended (removed). */
static void dyn_reap(struct sk_webhooks *w, int all)
{
    pthread_mutex_lock(&w->mu);
    struct ep **pp = &w->dyn, *gone = NULL;
    while (*pp) {
        struct ep *ep = *pp;
        if (all || (atomic_load(&ep->stop) && atomic_load(&ep->done))) {
            *pp = ep->next;
            ep->next = gone;
            gone = ep;
        } else {
            pp = &ep->next;
        }
    }
    pthread_mutex_unlock(&w->mu);
    while (gone) {
        struct ep *ep = gone;
        gone = ep->next;
        pthread_join(ep->th, NULL);
        if (ep->node) ep->node->name[0] = 0;
        pthread_mutex_destroy(&ep->mu);
        free(ep);
    }
}

/* One pass of the watcher over the database's list. */
static void watch_pass(struct sk_webhooks *w, sk_store *st)
{
    struct sk_store_webhook *rows;
    size_t n;
    if (sk_store_webhook_list(st, 0, &rows, &n) != 0) return; /* the next pass tries again */
    int64_t now = sk_wall_ms();
    pthread_mutex_lock(&w->mu);
    struct ep *running = w->dyn;
    pthread_mutex_unlock(&w->mu);
    /* removed (or removed and added again: another row) */
    for (struct ep *ep = running; ep; ep = ep->next) {
        int kept = 0;
        for (size_t i = 0; i < n && !kept; i++)
            if (rows[i].id == ep->db_id) {
                /* every pass: a pause, a rotation, and the end of a
                 * rotation's overlap (by the clock) */
                kept = 1;
                take_row(ep, &rows[i], now);
            }
        if (!kept && !atomic_load(&ep->stop)) {
            atomic_store(&ep->stop, 1);
            sk_log(SK_LOG_INFO, "webhooks: endpoint %s removed", ep->cfg.name);
        }
    }
    pthread_mutex_lock(&w->mu);
    pthread_cond_broadcast(&w->cv); /* the removed ones' naps end */
    pthread_mutex_unlock(&w->mu);
    for (size_t i = 0; i < n; i++) {
        int known = 0;
        for (struct ep *ep = running; ep && !known; ep = ep->next)
            known = ep->db_id == rows[i].id;
        if (!known) dyn_start(w, &rows[i], now);
    }
    free(rows);
    dyn_reap(w, 0);
}

/* The watcher: the database's endpoints every refresh_ms. */
static void *watch(void *arg)
{
    struct sk_webhooks *w = arg;
    struct ep self = {.w = w}; /* for nap: the dispatcher's stop only */
    sk_store *st = NULL;
    char err[512];
    while (!atomic_load(&w->stop)) {
        if (!st && sk_store_open_waiting(&st, w->db_spec, err, sizeof err) != 0) st = NULL;
        if (st) watch_pass(w, st);
        nap(&self, w->o.refresh_ms);
    }
    /* every endpoint's thread stops with the dispatcher (w->stop) */
    dyn_reap(w, 1);
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
    if (w->o.refresh_ms == 0) w->o.refresh_ms = 1000;
    if (!w->o.seed) w->o.seed = (uint64_t)sk_mono_ms() * 0x9e3779b97f4a7c15ull;
    pthread_mutex_init(&w->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* nap's deadlines */
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    w->n = n;
    if (w->o.node) atomic_store(&w->o.node->n_webhooks, 0);
    for (int i = 0; i < n; i++) {
        struct ep *ep = &w->eps[i];
        ep->w = w;
        ep->cfg = eps[i];
        ep->rng = (w->o.seed + (uint64_t)i * 0xbf58476d1ce4e5b9ull) | 1;
        pthread_mutex_init(&ep->mu, NULL);
        char why[160];
        for (int k = 0; k < 2 && eps[i].secret[k][0]; k++)
            if (sk_wh_key_parse(eps[i].secret[k], &ep->keys[ep->nkeys], why, sizeof why) == 0)
                ep->nkeys++;
        node_attach(w, ep);
    }
    for (int i = 0; i < n; i++) {
        if (pthread_create(&w->eps[i].th, NULL, run, &w->eps[i]) != 0) {
            snprintf(err, cap, "cannot start the webhook thread of %s", eps[i].name);
            sk_webhooks_stop(w);
            return SK_ENOMEM;
        }
        w->eps[i].started = 1;
    }
    if (w->o.refresh_ms > 0) {
        if (pthread_create(&w->watcher, NULL, watch, w) != 0) {
            snprintf(err, cap, "cannot start the webhook endpoints' watcher");
            sk_webhooks_stop(w);
            return SK_ENOMEM;
        }
        w->watching = 1;
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
    if (w->watching) pthread_join(w->watcher, NULL);
    for (int i = 0; i < w->n; i++) {
        if (w->eps[i].started) pthread_join(w->eps[i].th, NULL);
        pthread_mutex_destroy(&w->eps[i].mu);
    }
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w->db_spec);
    free(w);
}
