/* test_segments_pipeline.c - the order pipeline on segmented activities
 * (docs/segments.md), against the run's real Redis and a real database:
 * each backend behaviour runs on SQLite (segments_pipeline_sqlite_<name>)
 * and on PostgreSQL (segments_pipeline_pg_<name>).
 *
 *  - the order worker follows every segment's stream and persists each
 *    order once, under its segment's order id "<ID>.<seg>-<stream id>";
 *  - a worker that saw the activity before its segmented preheat switches
 *    to the segment streams on a re-list;
 *  - the sweeper cancels an unpaid segmented order and its unit goes back
 *    to the order's own segment, where it sells again;
 *  - the HTTP order routes (`seckill serve`) on a segmented order: queued,
 *    created, cancel released in its segment, malformed labels refused.
 *
 * Purchases go through a real `seckill serve` (serve_buy.h: it routes a
 * segmented activity's buyers to their home segments, borrowing as
 * needed). No test
 * sleeps for timing: waits poll their condition, bounded. */
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "core/clock.h"
#include "core/codes.h"
#include "core/error.h"
#include "engine/activity.h"
#include "engine/keys.h"
#include "engine/segment.h"
#include "engine/stock.h"
#include "orders/order_worker.h"
#include "orders/sweeper.h"
#include "store/store.h"
#include "support/backend_env.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/http_client.h"
#include "support/mysql_harness.h"
#include "support/pg_harness.h"
#include "support/serve_buy.h"

SK_TH_PG_USED
SK_TH_MY_USED

#define SEGS 4

/* ---- helpers ------------------------------------------------------------- */

/* sk_th_env_buy_users buys 100 at a time (one sk_th_stock_buy each). */
#define BATCH 100

/* One purchase of qty by user; its result code (order id into oid). */
static int buy_one(struct sk_th_env *e, uint64_t aid, uint64_t user, int64_t qty, char *oid)
{
    struct sk_purchase p = {.user_id = user, .quantity = qty};
    struct sk_admission a;
    CHECK_EQ(sk_th_stock_buy(e->r, aid, NULL, &p, 1, &a, NULL), 0);
    if (oid) snprintf(oid, SK_ORDER_ID_MAX, "%s", a.rc == SK_RC_OK ? a.order_id : "");
    return a.rc;
}

/* The segment an order id names; fails the test unless it is "<aid>.<seg>-". */
static int seg_of(const char *oid, uint64_t aid)
{
    uint64_t a;
    int seg;
    CHECK_MSG(sk_keys_parse_label(oid, strlen(oid), &a, &seg) > 0, "order id %s", oid);
    CHECK_MSG(a == aid && seg >= 0 && seg < SEGS, "order id %s: activity %" PRIu64 " seg %d", oid,
              a, seg);
    return seg;
}

/* One segment's live state; checks that segment's invariant. */
static struct sk_stock_state seg_state(sk_redis *r, uint64_t aid, int seg)
{
    struct sk_keys k;
    sk_keys_seg(&k, aid, seg);
    struct sk_stock_state s;
    CHECK_EQ(sk_stock_state_keys(r, &k, &s), 0);
    CHECK(s.exists);
    CHECK_MSG(s.remaining + s.held == s.initial + s.xin - s.xout,
              "segment %d: stock %" PRId64 " + held %" PRId64 " != initial %" PRId64
              " + xin %" PRId64 " - xout %" PRId64,
              seg, s.remaining, s.held, s.initial, s.xin, s.xout);
    return s;
}

/* A worker of options o, run to its end (o->once); its stats. */
static struct sk_worker_stats run_worker(const struct sk_worker_opts *o)
{
    return sk_th_worker_run(o);
}

static struct sk_worker_stats run_worker_once(const char *redis_url, const char *spec)
{
    struct sk_worker_opts o;
    sk_worker_opts_init(&o);
    o.redis_url = redis_url;
    o.db_spec = spec;
    o.consumer = "segments";
    o.batch = 64; /* several fetches per segment stream */
    o.once = 1;
    return run_worker(&o);
}

static struct sk_order_counts counts(struct sk_th_env *e, uint64_t aid)
{
    struct sk_order_counts c;
    CHECK_MSG(sk_store_orders_count(e->st, aid, &c) == 0, "count: %s", sk_store_errstr(e->st));
    return c;
}

static int cmp_oid(const void *a, const void *b)
{
    return strcmp(((const struct sk_th_bought *)a)->oid, ((const struct sk_th_bought *)b)->oid);
}

/* Every admitted order is in the DB exactly as admitted, once, and its id
 * names the buyer's home segment; the store lists them all for the
 * activity. */
static void check_persisted(struct sk_th_env *e, uint64_t aid, struct sk_th_bought *b, size_t n)
{
    int64_t units = 0;
    for (size_t i = 0; i < n; i++) {
        struct sk_order o;
        CHECK_MSG(sk_store_order_get(e->st, b[i].oid, &o) == 0, "order %s: %s", b[i].oid,
                  sk_store_errstr(e->st));
        CHECK_STR(o.order_id, b[i].oid);
        CHECK_EQ(o.activity_id, aid);
        CHECK_EQ(o.user_id, b[i].uid);
        CHECK_EQ(o.quantity, b[i].qty);
        CHECK_EQ(o.status, SK_ORDER_CREATED);
        /* admitted (after borrowing, if any) in the buyer's home segment */
        CHECK_EQ(seg_of(b[i].oid, aid), sk_seg_home(b[i].uid, SEGS));
        /* the order id is the label, the stream entry id and the branch */
        char sid[64];
        sk_th_order_sid(b[i].oid, sid, sizeof sid);
        CHECK_MSG(!strcmp(sid, o.stream_id), "%s vs stream id %s", b[i].oid, o.stream_id);
        units += b[i].qty;
    }
    qsort(b, n, sizeof *b, cmp_oid);
    for (size_t i = 1; i < n; i++)
        CHECK_MSG(strcmp(b[i - 1].oid, b[i].oid) != 0, "order id %s admitted twice", b[i].oid);
    struct sk_order_counts c = counts(e, aid);
    CHECK_EQ(c.orders[SK_ORDER_CREATED], (long long)n);
    CHECK_EQ(c.units[SK_ORDER_CREATED], units);
    CHECK_EQ(c.stock_failures, 0);
    /* the per-activity listing (reconcile's) finds the segments' orders */
    struct sk_order *page = calloc(n + 1, sizeof *page);
    CHECK(page != NULL);
    size_t got = 0;
    CHECK_MSG(sk_store_orders_list(e->st, aid, NULL, n + 1, page, &got) == 0, "list: %s",
              sk_store_errstr(e->st));
    CHECK_EQ(got, n);
    for (size_t i = 0; i < n; i++)
        CHECK_STR(page[i].order_id, b[i].oid); /* both sorted by order id */
    free(page);
}

/* Every segment's stream fully consumed (backlog 0), nothing dead-lettered. */
static void check_drained(struct sk_th_env *e, uint64_t aid)
{
    for (int s = 0; s < SEGS; s++) {
        struct sk_stock_state st = seg_state(e->r, aid, s);
        CHECK_MSG(st.backlog == 0, "segment %d backlog %" PRId64, s, st.backlog);
        CHECK_EQ(st.dlq, 0);
    }
    struct sk_stock_state all;
    CHECK_EQ(sk_stock_state(e->r, aid, &all), 0);
    CHECK_EQ(all.segments, SEGS);
    CHECK_EQ(all.backlog, 0);
}

/* ---- the worker ---------------------------------------------------------- */

SK_BACKEND_TEST(segments_pipeline, "segpipe.db", worker_persists_every_segment_order_once)
{
    enum { STOCK = 600, USERS = 500 };
    uint64_t aid = sk_th_env_activity_segs(e, STOCK, 2, 2, 60, SEGS, 1);
    struct sk_th_bought *b = calloc(USERS, sizeof *b);
    CHECK(b != NULL);
    /* 500 users want 750 units: the sale sells out, borrowing between
     * segments as homes run dry */
    size_t n = sk_th_env_buy_users(e, aid, 1, USERS, 2, BATCH, b);
    int64_t sold = 0;
    int per_seg[SEGS] = {0};
    for (size_t i = 0; i < n; i++) {
        sold += b[i].qty;
        per_seg[seg_of(b[i].oid, aid)]++;
    }
    CHECK_EQ(sold, STOCK);
    for (int s = 0; s < SEGS; s++)
        CHECK_MSG(per_seg[s] > 0, "no order admitted in segment %d", s);

    struct sk_worker_stats ws = run_worker_once(e->redis_url, e->spec);
    CHECK_EQ(ws.persisted, n);
    CHECK_EQ(ws.duplicates, 0);
    CHECK_EQ(ws.dead_lettered, 0);
    CHECK_EQ(ws.poison, 0);
    CHECK_EQ(ws.stock_failures, 0);
    CHECK_EQ(ws.activities, SEGS); /* one stream per segment, none of the base */
    check_persisted(e, aid, b, n);
    check_drained(e, aid);
    struct sk_activity a;
    CHECK_EQ(sk_store_activity_get(e->st, aid, &a), 0);
    CHECK_EQ(a.stock_db, 0);
    /* the streams were trimmed to what is unacknowledged: nothing */
    for (int s = 0; s < SEGS; s++)
        CHECK_EQ(seg_state(e->r, aid, s).stream_len, 0);
    /* a second worker finds nothing to do: nothing re-delivered */
    ws = run_worker_once(e->redis_url, e->spec);
    CHECK_EQ(ws.persisted, 0);
    CHECK_EQ(ws.duplicates, 0);
    free(b);
}

SK_BACKEND_TEST(segments_pipeline, "segpipe.db", worker_dead_letters_poison_in_its_segment)
{
    uint64_t aid = sk_th_env_activity_segs(e, 40, 1, 1, 60, SEGS, 1);
    struct sk_th_bought b[8];
    size_t n = sk_th_env_buy_users(e, aid, 1, 8, 1, BATCH, b);
    CHECK_EQ(n, 8);
    /* an entry of another activity in segment 2's stream: poison there */
    struct sk_keys k;
    sk_keys_seg(&k, aid, 2);
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(e->r, &rep, "XADD %s * aid %" PRIu64 " uid 7 qty 1", k.orders, aid + 1),
             0);
    CHECK(rep->type == REDIS_REPLY_STRING);
    freeReplyObject(rep);
    struct sk_worker_opts o;
    sk_th_env_worker_opts(e, &o, "segments");
    o.claim_idle_ms = 0;
    o.max_deliveries = 1;
    o.once = 1;
    struct sk_worker_stats s = run_worker(&o);
    CHECK_EQ(s.persisted, 8);
    CHECK_EQ(s.dead_lettered, 1);
    check_persisted(e, aid, b, n);
    for (int g = 0; g < SEGS; g++) {
        struct sk_stock_state st = seg_state(e->r, aid, g);
        CHECK_EQ(st.dlq, g == 2 ? 1 : 0); /* the segment's own DLQ */
        CHECK_EQ(st.backlog, 0);
    }
    struct sk_keys base;
    sk_keys_for(&base, aid);
    CHECK_EQ(sk_redis_cmd(e->r, &rep, "EXISTS %s %s", base.orders, base.dlq), 0);
    CHECK_EQ(rep->integer, 0); /* the base key set has no stream */
    freeReplyObject(rep);
}

/* A worker (consumer "thread", re-listing every 50 ms) started on thread *t. */
static sk_worker *start_worker_thread(struct sk_th_env *e, pthread_t *t)
{
    struct sk_worker_opts o;
    sk_th_env_worker_opts(e, &o, "thread");
    o.block_ms = 50;
    o.relist_ms = 50;
    sk_worker *w = sk_th_worker_thread(&o, t);
    return w;
}

/* Stops and frees start_worker_thread's worker; its final stats. */
static struct sk_worker_stats stop_worker_thread(sk_worker *w, pthread_t t)
{
    sk_worker_stop(w);
    CHECK_EQ(pthread_join(t, NULL), 0);
    struct sk_worker_stats s;
    sk_worker_stats(w, &s);
    sk_worker_free(w);
    return s;
}

/* Waits (15 s at most) until n orders of aid are in the DB, created. */
static void wait_created(struct sk_th_env *e, uint64_t aid, size_t n)
{
    int64_t deadline = sk_mono_ms() + 15000;
    while (counts(e, aid).orders[SK_ORDER_CREATED] < (long long)n) {
        CHECK_MSG(sk_mono_ms() < deadline, "only %lld of %zu orders persisted",
                  (long long)counts(e, aid).orders[SK_ORDER_CREATED], n);
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

SK_BACKEND_TEST(segments_pipeline, "segpipe.db",
                worker_follows_segments_preheated_after_it_saw_the_activity)
{
    uint64_t aid = sk_th_env_activity_segs(e, 100, 1, 1, 60, SEGS, 0); /* created, not preheated */
    pthread_t t;
    sk_worker *w = start_worker_thread(e, &t);
    /* it follows the activity as it knows it: one (base) stream */
    struct sk_keys base;
    sk_keys_for(&base, aid);
    int64_t deadline = sk_mono_ms() + 10000;
    for (;;) {
        redisReply *rep;
        CHECK_EQ(sk_redis_cmd(e->r, &rep, "EXISTS %s", base.orders), 0);
        long long ex = rep->integer;
        freeReplyObject(rep);
        struct sk_worker_stats s;
        sk_worker_stats(w, &s);
        if (ex && s.activities == 1) break; /* its group was made on the base stream */
        CHECK_MSG(sk_mono_ms() < deadline, "worker never followed activity %" PRIu64, aid);
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    sk_th_env_preheat_open(e, aid);
    struct sk_th_bought b[120];
    size_t n = sk_th_env_buy_users(e, aid, 1, 120, 1, BATCH, b);
    CHECK_EQ(n, 100);
    wait_created(e, aid, n);
    struct sk_worker_stats s = stop_worker_thread(w, t);
    CHECK_EQ(s.persisted, n);
    CHECK_EQ(s.dead_lettered, 0);
    CHECK_EQ(s.activities, SEGS); /* the empty base stream is no longer followed */
    check_persisted(e, aid, b, n);
    check_drained(e, aid);
}

/* The activity's keys are dropped under a running worker and come back
 * segmented (the operator's row back to created first, as a delete leaves
 * it, so the rollback guard does not rebuild the unsegmented keys before
 * the new preheat): the lost group makes the worker check it again. */
SK_BACKEND_TEST(segments_pipeline, "segpipe.db",
                worker_checks_again_when_a_followed_stream_loses_its_group)
{
    uint64_t aid = sk_th_env_activity_segs(e, 40, 1, 1, 60, 1, 1); /* unsegmented, preheated */
    pthread_t t;
    sk_worker *w = start_worker_thread(e, &t);
    struct sk_th_bought b[40];
    size_t n = sk_th_env_buy_users(e, aid, 1, 10, 1, BATCH, b);
    CHECK_EQ(n, 10);
    wait_created(e, aid, n); /* the unsegmented orders */
    /* gone from Redis, then preheated again with 4 segments */
    CHECK_EQ(sk_store_activity_set_state(e->st, aid, "created"), 0);
    CHECK_EQ(sk_stock_drop(e->r, aid), 0);
    struct sk_activity a;
    CHECK_EQ(sk_store_activity_get(e->st, aid, &a), 0);
    struct sk_stock_def d;
    sk_activity_stock_def(&a, &d);
    d.segments = SEGS;
    int rc;
    int64_t left;
    CHECK_EQ(sk_stock_preheat(e->r, &d, 0, &rc, &left), 0);
    CHECK_MSG(rc == SK_RC_PREHEATED, "preheat: %s", sk_rc_name(rc));
    CHECK_EQ(sk_stock_set_open(e->r, aid, 1, &rc), 0);
    CHECK_EQ(rc, SK_RC_OK);
    CHECK_EQ(sk_store_activity_set_state(e->st, aid, "open"), 0);
    size_t m = sk_th_env_buy_users(e, aid, 1001, 30, 1, BATCH, b + n);
    CHECK_EQ(m, 30);
    for (size_t i = n; i < n + m; i++)
        seg_of(b[i].oid, aid);
    wait_created(e, aid, n + m);
    struct sk_worker_stats s = stop_worker_thread(w, t);
    CHECK_EQ(s.persisted, n + m);
    CHECK_EQ(s.dead_lettered, 0);
    CHECK_EQ(s.activities, SEGS);
    for (size_t i = n; i < n + m; i++) {
        struct sk_order ord;
        CHECK_EQ(sk_store_order_get(e->st, b[i].oid, &ord), 0);
        CHECK_EQ(ord.user_id, b[i].uid);
        CHECK_EQ(ord.activity_id, aid);
    }
    check_drained(e, aid);
}

/* ---- the sweeper --------------------------------------------------------- */

SK_BACKEND_TEST(segments_pipeline, "segpipe.db", sweeper_releases_an_unpaid_order_into_its_segment)
{
    enum { STOCK = 2 * SEGS };
    uint64_t aid = sk_th_env_activity_segs(e, STOCK, 1, 1, 60, SEGS, 1);
    struct sk_th_bought b[STOCK + 20];
    size_t n = sk_th_env_buy_users(e, aid, 1, STOCK + 20, 1, BATCH, b);
    CHECK_EQ(n, STOCK); /* sold out over every segment */
    CHECK_EQ(run_worker_once(e->redis_url, e->spec).persisted, STOCK);
    /* all paid but one: that one expires */
    const struct sk_th_bought *late = &b[3];
    int seg = seg_of(late->oid, aid);
    for (size_t i = 0; i < n; i++) {
        if (&b[i] == late) continue;
        int status;
        CHECK_EQ(sk_store_order_pay(e->st, b[i].oid, sk_wall_ms(), &status), 0);
    }
    struct sk_stock_state before[SEGS];
    for (int g = 0; g < SEGS; g++) {
        before[g] = seg_state(e->r, aid, g);
        CHECK_EQ(before[g].remaining, 0);
    }
    struct sk_sweeper_opts so;
    sk_sweeper_opts_init(&so);
    so.redis_url = e->redis_url;
    so.db_spec = e->spec;
    sk_sweeper *sw;
    char err[512];
    CHECK_MSG(sk_sweeper_new(&sw, &so, err, sizeof err) == 0, "sweeper: %s", err);
    struct sk_sweep_result res;
    CHECK_MSG(sk_sweeper_pass(sw, sk_wall_ms() + 61 * 1000, &res) == 0, "pass: %s",
              sk_sweeper_errstr(sw));
    CHECK_EQ(res.errors, 0);
    CHECK_EQ(res.expired, 1);
    CHECK_EQ(res.cancelled, 1);
    CHECK_EQ(res.released, 1);
    CHECK_EQ(res.units_released, 1);
    CHECK_EQ(res.unreleasable, 0);
    struct sk_order o;
    CHECK_EQ(sk_store_order_get(e->st, late->oid, &o), 0);
    CHECK_EQ(o.status, SK_ORDER_CANCELLED);
    /* the unit is back in the order's segment, and only there */
    for (int g = 0; g < SEGS; g++) {
        struct sk_stock_state st = seg_state(e->r, aid, g);
        CHECK_EQ(st.remaining, before[g].remaining + (g == seg ? 1 : 0));
        CHECK_EQ(st.held, before[g].held - (g == seg ? 1 : 0));
        CHECK_EQ(st.released, before[g].released + (g == seg ? 1 : 0));
    }
    struct sk_keys k;
    sk_keys_seg(&k, aid, seg);
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(e->r, &rep, "HGET %s %s", k.ledger, late->oid), 0);
    CHECK_MSG(rep->type == REDIS_REPLY_STRING && strstr(rep->str, ":released"),
              "ledger of segment %d: %s", seg, rep->type == REDIS_REPLY_STRING ? rep->str : "nil");
    freeReplyObject(rep);
    /* nothing owed: a second pass does nothing */
    CHECK_EQ(sk_sweeper_pass(sw, sk_wall_ms() + 62 * 1000, &res), 0);
    CHECK_EQ(res.cancelled + res.released + res.repaired + res.unreleasable, 0);
    sk_sweeper_free(sw);
    /* its buyer may buy again (the count went down in its home), and the unit
     * sells once more: to a new buyer of the same home segment directly, or
     * to one of another home that borrows it */
    char oid[SK_ORDER_ID_MAX];
    /* serve answers sold out from memory until its next stock read (every
     * 250 ms) sees the unit back: a buyer tries again */
    int64_t until = sk_mono_ms() + 5000;
    int rc;
    while ((rc = buy_one(e, aid, 1000, 1, oid)) == SK_RC_SOLD_OUT && sk_mono_ms() < until)
        sk_th_nap_ms(20);
    CHECK_EQ(rc, SK_RC_OK);
    CHECK_EQ(buy_one(e, aid, 1001, 1, NULL), SK_RC_SOLD_OUT);
    CHECK_EQ(seg_of(oid, aid), sk_seg_home(1000, SEGS));
    struct sk_stock_state all;
    CHECK_EQ(sk_stock_state(e->r, aid, &all), 0);
    CHECK_EQ(all.remaining, 0);
    CHECK_EQ(all.held + all.in_transit, STOCK);
}

/* ---- the HTTP order routes ----------------------------------------------- */

#define ADMIN "Authorization: Bearer " SK_TH_ADMIN_TOKEN "\r\n"

static int call(struct sk_th_http *c, const char *method, const char *path, uint64_t uid,
                struct sk_th_resp *r)
{
    char hdr[64] = "";
    if (uid) snprintf(hdr, sizeof hdr, "X-User-Id: %" PRIu64 "\r\n", uid);
    return sk_th_http_req(c, method, path, hdr, NULL, r);
}

static int order_call(struct sk_th_http *c, const char *method, const char *oid, const char *op,
                      uint64_t uid, struct sk_th_resp *r)
{
    char path[160];
    snprintf(path, sizeof path, "/api/v1/orders/%s%s%s", oid, op ? "/" : "", op ? op : "");
    return call(c, method, path, uid, r);
}

static void check_status(struct sk_th_http *c, const char *oid, uint64_t uid, const char *want)
{
    struct sk_th_resp r;
    char val[64];
    CHECK_EQ(order_call(c, "GET", oid, NULL, uid, &r), 200);
    sk_th_resp_field(&r, "status", val, sizeof val);
    CHECK_STR(val, want);
    sk_th_resp_field(&r, "order_id", val, sizeof val);
    CHECK_STR(val, oid);
}

SK_TEST(segments_pipeline_http_order_routes_on_a_segmented_order)
{
    struct sk_th_serve srv;
    const char *extra[] = {"--role", "api", NULL}; /* no worker: orders stay queued */
    sk_th_serve_start(&srv, sk_th_redis_url(), extra);
    struct sk_th_http c;
    sk_th_http_open(&c, srv.port);
    struct sk_th_resp r;
    int64_t deadline = sk_mono_ms() + 10000;
    while (sk_th_http_req(&c, "GET", "/readyz", NULL, NULL, &r) != 200) {
        CHECK_MSG(sk_mono_ms() < deadline, "not ready: %s", r.body);
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    sk_redis *rd = sk_th_redis_new(sk_th_redis_url(), 1000, 5000);

    /* an activity of 4 segments, one unit each, through the admin API */
    uint64_t aid = sk_th_unique_id();
    char body[512], path[160], val[96];
    sk_th_activity_json(body, sizeof body, aid, "seg orders", SEGS, 1800, SEGS);
    sk_th_http_activity_open(&c, aid, body);
    int segs;
    CHECK_EQ(sk_seg_count(rd, aid, &segs), 0);
    CHECK_EQ(segs, SEGS);

    /* two buyers */
    char oid[SK_ORDER_ID_MAX], oid2[SK_ORDER_ID_MAX];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", aid);
    CHECK_EQ(call(&c, "POST", path, 81, &r), 200);
    sk_th_resp_field(&r, "order_id", oid, sizeof oid);
    CHECK_EQ(call(&c, "POST", path, 82, &r), 200);
    sk_th_resp_field(&r, "order_id", oid2, sizeof oid2);
    int seg = seg_of(oid, aid);
    CHECK_EQ(seg, sk_seg_home(81, SEGS));

    /* queued: known only to its segment's ledger */
    check_status(&c, oid, 81, "queued");
    CHECK_EQ(order_call(&c, "GET", oid, NULL, 82, &r), 404); /* not 82's */
    CHECK_EQ(order_call(&c, "POST", oid, "pay", 81, &r), 409);
    sk_th_resp_field(&r, "error", val, sizeof val);
    CHECK_STR(val, "order_queued");
    CHECK_EQ(order_call(&c, "POST", oid, "cancel", 81, &r), 409);
    /* the same stream id under another segment's label is no order */
    char other[SK_ORDER_ID_MAX];
    snprintf(other, sizeof other, "%" PRIu64 ".%d%s", aid, (seg + 1) % SEGS, strchr(oid, '-'));
    CHECK_EQ(order_call(&c, "GET", other, NULL, 81, &r), 404);
    snprintf(other, sizeof other, "%" PRIu64 "%s", aid, strchr(oid, '-')); /* nor unsegmented */
    CHECK_EQ(order_call(&c, "GET", other, NULL, 81, &r), 404);

    /* the worker persists it: created */
    struct sk_worker_stats ws = run_worker_once(sk_th_redis_url(), srv.db);
    CHECK_EQ(ws.persisted, 2);
    check_status(&c, oid, 81, "created");
    check_status(&c, oid2, 82, "created");
    CHECK_EQ(order_call(&c, "GET", oid, NULL, 82, &r), 404);
    sk_th_resp_field(&r, "error", val, sizeof val);
    CHECK_STR(val, "unknown_order");

    /* cancel: the unit goes back to the order's segment */
    struct sk_stock_state before[SEGS];
    for (int g = 0; g < SEGS; g++)
        before[g] = seg_state(rd, aid, g);
    CHECK_EQ(order_call(&c, "POST", oid, "cancel", 81, &r), 200);
    sk_th_resp_field(&r, "status", val, sizeof val);
    CHECK_STR(val, "cancelled");
    for (int g = 0; g < SEGS; g++) {
        struct sk_stock_state st = seg_state(rd, aid, g);
        CHECK_EQ(st.remaining, before[g].remaining + (g == seg ? 1 : 0));
        CHECK_EQ(st.held, before[g].held - (g == seg ? 1 : 0));
    }
    CHECK_EQ(order_call(&c, "POST", oid, "cancel", 81, &r), 200); /* again: no second release */
    for (int g = 0; g < SEGS; g++)
        CHECK_EQ(seg_state(rd, aid, g).remaining, before[g].remaining + (g == seg ? 1 : 0));
    check_status(&c, oid, 81, "cancelled");
    CHECK_EQ(order_call(&c, "POST", oid, "pay", 81, &r), 409);
    CHECK_EQ(order_call(&c, "POST", oid2, "pay", 82, &r), 200);
    sk_th_resp_field(&r, "status", val, sizeof val);
    CHECK_STR(val, "paid");

    /* malformed labels: refused as bad ids (400), never a server error */
    char bad[][48] = {
        "12.x-1-1",   "12.-1-1",   "12..3-1-1",    "12.3.4-1-1", ".3-1-1",
        "12.03-1-1",  "012.3-1-1", "12.12345-1-1", "12.256-1-1", "12.3-1",
        "12.3-1-2-3", "12.3--1",   "12.3-1-",      "12.3-x-1",   "12.3-123456789012345678901-1",
        "0.3-1-1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *ops[] = {NULL, "pay", "cancel"};
        for (int j = 0; j < 3; j++) {
            int st = order_call(&c, j ? "POST" : "GET", bad[i], ops[j], 81, &r);
            CHECK_MSG(st == 400, "%s %s: %d %s", bad[i], ops[j] ? ops[j] : "get", st, r.body);
        }
    }
    /* well-formed, but no such order: 404 */
    const char *absent[] = {"12.3-1-1", "999999.255-1-0", "999999.0-1-0"};
    for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++) {
        const char *ops[] = {NULL, "pay", "cancel"};
        for (int j = 0; j < 3; j++) {
            int st = order_call(&c, j ? "POST" : "GET", absent[i], ops[j], 81, &r);
            CHECK_MSG(st == 404, "%s %s: %d %s", absent[i], ops[j] ? ops[j] : "get", st, r.body);
        }
    }
    sk_redis_free(rd);
    sk_th_http_close(&c);
    CHECK_EQ(sk_th_serve_stop(&srv, SIGTERM), 0);
}
