/* ops_view.c - what an operator looks at: GET /metrics (the node's
 * Prometheus text), GET / (the dashboard page, web/dashboard.* embedded at
 * build time) and GET /dashboard.json (the figures the page draws).
 *
 * Everything here is read from the node's shared segment
 * (core/node_stats.h): the HTTP slots summed, the worker process's counters
 * and its last sample of Redis and the database. No Redis or database call
 * is made for a scrape, so watching a sale costs the sale nothing but the
 * rendering (tens of microseconds). */
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "core/clock.h"
#include "engine/activity.h"
#include "engine/live_acts.h"
#include "http/api_purchase.h"
#include "http/app.h"
#include "http/metrics_int.h"
#include "http/ops_history.h"
#include "web_gen.h"

int sk_api_ops_metrics(struct sk_app *app, h2o_req_t *req, const struct sk_route_match *m)
{
    size_t len = 0;
    char *text = sk_metrics_render_node(app->node, &len);
    if (!text) return sk_http_error(app, req, m->route, 503, "unavailable", "out of memory");
    sk_http_reply(app, req, m->route, 200, "text/plain; version=0.0.4", text, len);
    free(text);
    return 0;
}

int sk_api_ops_dashboard(struct sk_app *app, h2o_req_t *req, const struct sk_route_match *m)
{
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL,
                   H2O_STRLIT("no-cache"));
    sk_http_reply(app, req, m->route, 200, "text/html; charset=utf-8", sk_web_dashboard_html,
                  sk_web_dashboard_html_len);
    return 0;
}

/* ---- /dashboard.json ---------------------------------------------------- */

static json_t *u64(uint64_t v)
{
    return json_integer((json_int_t)v);
}

/* A histogram as {"le":[...],"counts":[...]} (per bucket, not cumulative;
 * the last count is above the last bound), "sum". */
static json_t *histogram(const double *le, const uint64_t *counts, size_t n, double sum)
{
    json_t *jl = json_array(), *jc = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(jl, json_real(le[i]));
    for (size_t i = 0; i <= n; i++)
        json_array_append_new(jc, u64(counts[i]));
    return json_pack("{s:o, s:o, s:f}", "le", jl, "counts", jc, "sum", sum);
}

static json_t *refusals(const sk_metrics *m, const uint64_t *counts)
{
    json_t *o = json_object();
    for (int i = 0; i < m->n_reasons; i++)
        json_object_set_new(o, m->reason_name[i], u64(counts[i]));
    return o;
}

static json_t *totals(const sk_metrics *sum)
{
    uint64_t req = 0;
    for (int r = 0; r < SK_MROUTE_COUNT; r++)
        for (int s = 0; s < SK_MSTATUS_SLOTS; s++)
            req += sum->requests[r][s];
    return json_pack("{s:o, s:o, s:o, s:I, s:o, s:o, s:o, s:o}", "admissions", u64(sum->admissions),
                     "replays", u64(sum->replays), "soldout_fastpath", u64(sum->soldout_fastpath),
                     "inflight", (json_int_t)sum->inflight, "refusals",
                     refusals(sum, sum->refusals), "requests", u64(req), "purchase_latency",
                     histogram(sk_metrics_lat_le, sum->lat_bucket, SK_MLAT_BUCKETS, sum->lat_sum),
                     "redis_rtt",
                     histogram(sk_metrics_rtt_le, sum->rtt_bucket, SK_MRTT_BUCKETS, sum->rtt_sum));
}

static json_t *processes(sk_node *node, int64_t now)
{
    json_t *a = json_array();
    for (int i = 0; i < sk_node_procs(node); i++) {
        struct sk_node_proc *p = sk_node_proc_at(node, i);
        int pid = atomic_load(&p->pid);
        uint64_t starts = atomic_load(&p->starts);
        int64_t beat = atomic_load(&p->beat_ms);
        json_array_append_new(
            a, json_pack("{s:s, s:i, s:b, s:o, s:I, s:I}", "kind",
                         i < sk_node_api_slots(node) ? "http" : "worker", "pid", pid, "alive",
                         pid > 0 && kill(pid, 0) == 0 && now - beat < 10000, "restarts",
                         u64(starts > 0 ? starts - 1 : 0), "started_ms",
                         (json_int_t)atomic_load(&p->started_ms), "beat_ms", (json_int_t)beat));
    }
    return a;
}

static json_t *worker(const struct sk_node_worker *w)
{
    json_t *o = json_object();
    for (int c = 0; c < SK_WC_COUNT_; c++)
        json_object_set_new(o, sk_node_wc_field((enum sk_node_wc)c),
                            u64(sk_node_wc_get(w, (enum sk_node_wc)c)));
    return o;
}

/* The webhook dispatcher's endpoints (orders/webhooks.h): a tile each. */
static json_t *webhooks(struct sk_node_worker *w, int64_t now)
{
    json_t *a = json_array();
    int n = atomic_load(&w->n_webhooks);
    for (int i = 0; a && i < n && i < SK_NODE_WEBHOOKS; i++) {
        struct sk_node_webhook *h = &w->webhooks[i];
        if (!h->name[0]) continue; /* left by a removed endpoint */
        int64_t oldest = atomic_load(&h->oldest_ms);
        json_array_append_new(
            a,
            json_pack("{s:s, s:o, s:o, s:o, s:b, s:b, s:f}", "endpoint", h->name, "delivered",
                      u64(atomic_load(&h->delivered)), "failed", u64(atomic_load(&h->failed)),
                      "dead", u64(atomic_load(&h->dead)), "retrying",
                      atomic_load(&h->retrying) != 0, "paused", atomic_load(&h->paused) != 0,
                      "lag_s", oldest > 0 && now > oldest ? (double)(now - oldest) / 1000.0 : 0.0));
    }
    return a;
}

static const char *const status_names[SK_NODE_NSTATUS] = {"created", "paid", "cancelled"};

/* The waiting room of an activity as the HTTP processes saw it
 * (docs/waiting-room.md): the queue's figures of the newest Redis reply
 * any of them had, and the node's pass counters. */
static json_t *waiting_room(const struct sk_metrics_act *row)
{
    return json_pack("{s:I, s:I, s:I, s:I, s:o, s:o, s:o}", "queue_length",
                     (json_int_t)row->q_length, "passes_issued", (json_int_t)row->q_issued,
                     "passes_per_s", (json_int_t)row->q_rate, "seen_ms", (json_int_t)row->q_at_ms,
                     "handed_out_total", u64(row->passes[0]), "spent_total", u64(row->passes[1]),
                     "expired_total", u64(row->passes[2]));
}

/* One activity: the worker's sample (Redis and the database) and the HTTP
 * processes' counters (row, NULL when none counted it). */
static json_t *activity(const struct sk_node_act *a, const sk_metrics *sum,
                        const struct sk_metrics_act *row, int64_t now)
{
    json_t *orders = json_object(), *units = json_object();
    for (int s = 0; s < SK_NODE_NSTATUS; s++) {
        json_object_set_new(orders, status_names[s], json_integer(a->orders[s]));
        json_object_set_new(units, status_names[s], json_integer(a->units[s]));
    }
    static const uint64_t none[SK_MMAX_REASONS];
    /* the name escaped by jansson; "admitted": units admitted over the
     * sale's life, each order once, the figure `activity show`, the stats
     * route and /metrics give too; "registered": null when the activity
     * takes no pre-registration */
    return json_pack(
        "{s:o, s:o*, s:s, s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:o, "
        "s:o, s:I, s:I, s:o, s:o, s:o, s:o, s:o}",
        "id", u64(a->id), "name", json_string(a->name), "state",
        sk_activity_live_state(a->exists, a->open, a->start_ms, a->end_ms, now), "preheated",
        a->exists, "start_ms", (json_int_t)a->start_ms, "end_ms", (json_int_t)a->end_ms, "segments",
        (json_int_t)a->segments, "stock_initial", (json_int_t)a->initial, "stock_remaining",
        (json_int_t)a->remaining, "admitted", (json_int_t)a->admitted, "released",
        (json_int_t)a->released, "backlog", (json_int_t)a->backlog, "oldest_unpersisted_ms",
        (json_int_t)a->oldest_age_ms, "dead_letters", (json_int_t)a->dlq, "db_stock",
        (json_int_t)a->db_stock, "registered",
        a->registered >= 0 ? json_integer(a->registered) : json_null(), "orders", orders,
        "order_units", units, "reconcile_differences", (json_int_t)a->reconcile_drift,
        "reconcile_ms", (json_int_t)a->reconcile_ms, "admitted_units_total",
        u64(row ? row->admitted_units : 0), "admissions_total", u64(row ? row->admissions : 0),
        "replays_total", u64(row ? row->replays : 0), "refusals",
        refusals(sum, row ? row->refusals : none), "waiting_room",
        row && row->q_at_ms ? waiting_room(row) : json_null());
}

static const struct sk_metrics_act *row_of(const sk_metrics *m, uint64_t id)
{
    for (int i = 0; i < SK_METRICS_ACTS; i++)
        if (m->acts[i].id == id) return &m->acts[i];
    return NULL;
}

/* How long a purchase refused store_mismatch keeps its activity named. */
#define FOREIGN_NAMED_MS (10 * 60 * 1000)

static json_t *orphan(uint64_t id, const char *reason, const char *store_id, int open,
                      const char *message, int listed)
{
    char fix[320];
    return json_pack("{s:I, s:s, s:s?, s:b, s:s, s:s}", "id", (json_int_t)id, "reason", reason,
                     "store_id", store_id && store_id[0] ? store_id : NULL, "open", open, "message",
                     message, "fix", sk_live_fix(id, listed, store_id, fix, sizeof fix));
}

json_t *sk_ops_orphans_json(struct sk_app *app, const struct sk_node_sample *smp)
{
    json_t *a = json_array();
    if (!a) return NULL;
    for (int i = 0; i < smp->n_orphans; i++) {
        const struct sk_node_orphan *o = &smp->orphans[i];
        int other = o->why == SK_NODE_ORPHAN_OTHER_STORE;
        json_array_append_new(
            a, orphan(o->id, other ? "other_store" : "unknown_to_database", o->store_id, o->open,
                      other ? "listed by this node's database, but its live state in Redis was "
                              "preheated from another database: its purchases are refused here "
                              "and this node's worker does not persist its orders"
                            : "live in Redis but unknown to this node's database: no worker of "
                              "this database would ever persist its orders",
                      other));
    }
    int64_t now = sk_wall_ms();
    struct sk_foreign foreign[SK_FOREIGN_MAX];
    int nf = sk_purchase_foreign(app, foreign);
    for (int i = 0; i < nf; i++) {
        const struct sk_foreign *f = &foreign[i];
        /* the worker's look at Redis since the last refusal knows better */
        if (now - f->last_ms > FOREIGN_NAMED_MS || smp->orphans_ms > f->last_ms) continue;
        int seen = 0;
        for (int j = 0; j < smp->n_orphans && !seen; j++)
            seen = smp->orphans[j].id == f->id;
        if (seen) continue;
        json_array_append_new(a, orphan(f->id, "other_store", NULL, 1,
                                        "its purchases were refused here (store_mismatch): it "
                                        "was preheated from another database than this node's",
                                        1));
    }
    return a;
}

/* The whole document; NULL when out of memory. */
static json_t *dashboard(struct sk_app *app, const sk_metrics *sum,
                         const struct sk_node_sample *smp)
{
    int64_t now = sk_wall_ms();
    struct sk_node_worker *w = sk_node_worker(app->node);
    json_t *acts = json_array();
    for (int i = 0; i < smp->n_acts; i++)
        json_array_append_new(acts,
                              activity(&smp->acts[i], sum, row_of(sum, smp->acts[i].id), now));
    int redis_ok = sk_aredis_ready(app->redis);
    /* the store's identity, and the sales this node would never persist */
    const char *store_id = smp->store_id[0] ? smp->store_id : app->db.store_id;
    return json_pack(
        "{s:I, s:I, s:{s:{s:b, s:o*}, s:{s:o, s:o*}, s:I}, s:o, s:o, s:o, s:o, s:o, s:I, s:o*, "
        "s:o, s:I, s:I}",
        "now_ms", (json_int_t)now, "served_by", (json_int_t)getpid(), "health", "redis", "ok",
        redis_ok, "error", json_string(redis_ok ? "" : sk_aredis_errstr(app->redis)), "database",
        "ok", w && smp->sampled_ms ? json_boolean(smp->db_ok) : json_null(), "error",
        json_string(w && !smp->db_ok ? smp->db_err : ""), "sampled_ms", (json_int_t)smp->sampled_ms,
        "processes", processes(app->node, now), "totals", totals(sum), "worker",
        w ? worker(w) : json_null(), "webhooks", w ? webhooks(w, now) : json_array(), "activities",
        acts, "activities_left_out", (json_int_t)smp->more_acts, "store_id",
        store_id[0] ? json_string(store_id) : json_null(), "orphans", sk_ops_orphans_json(app, smp),
        "orphans_left_out", (json_int_t)smp->more_orphans, "orphans_checked_ms",
        (json_int_t)smp->orphans_ms);
}

void sk_ops_view_tick(struct sk_app *app)
{
    static int64_t next_ms;
    sk_ops_history *h = sk_ops_history_get();
    if (!h || app->slot != 0) return; /* one writer per node */
    int64_t now = sk_mono_ms();
    if (now < next_ms) return;
    next_ms = now + SK_HIST_EVERY_MS;
    sk_ops_history_record(h, app->node, sk_wall_ms());
}

/* ?history=1 in the query: the page's first request. */
static int wants_history(const h2o_req_t *req)
{
    if (req->query_at == SIZE_MAX) return 0;
    const char *q = req->path.base + req->query_at;
    size_t n = req->path.len - req->query_at;
    return memmem(q, n, "history=1", 9) != NULL;
}

int sk_api_ops_data(struct sk_app *app, h2o_req_t *req, const struct sk_route_match *m)
{
    sk_metrics *sum = sk_metrics_node_sum(app->node);
    struct sk_node_sample *smp = calloc(1, sizeof *smp);
    json_t *d = NULL;
    char *text = NULL;
    if (sum && smp) {
        sk_node_sample_get(sk_node_worker(app->node), smp);
        d = dashboard(app, sum, smp);
        if (d && wants_history(req) && sk_ops_history_get())
            json_object_set_new(d, "history", sk_ops_history_json(sk_ops_history_get()));
        text = d ? json_dumps(d, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
    }
    if (text) {
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL,
                       H2O_STRLIT("no-store"));
        sk_http_reply(app, req, m->route, 200, "application/json", text, strlen(text));
    } else {
        sk_http_error(app, req, m->route, 503, "unavailable", "out of memory");
    }
    free(text);
    json_decref(d);
    free(smp);
    sk_metrics_free(sum);
    return 0;
}
