/* test_reconcile_segments.c - `seckill reconcile` and sk_reconcile_activity
 * on segmented activities (docs/segments.md, docs/reconcile.md), against the
 * run's real Redis and a real database: each behaviour on SQLite
 * (reconcile_seg_sqlite_<name>) and PostgreSQL (reconcile_seg_pg_<name>).
 *
 * A sale over 4 segments is made for real (sk_stock_purchase_batch routes
 * each buyer to its home segment and borrows across segments by itself;
 * the real order worker persists every segment's stream), then:
 *  - it reconciles clean, segment by segment, with the transfers accounted;
 *  - drift put into one segment (a deleted order row, a dropped ledger
 *    entry, a tampered segment stock) is found in that segment only and
 *    repaired there;
 *  - a transfer taken from a lender and never applied at its receiver is
 *    in flight while young, drift once old, and `--repair` rolls it forward
 *    (the global invariant then holds with nothing in transit) once;
 *  - a pending transfer whose counters were reset by a forced preheat is
 *    reported and never rolled forward (that would create stock), and a
 *    tampered transfer counter never drives a segment's stock repair;
 *  - a live segmented sale (buyers borrowing, worker, sweeper) never shows
 *    drift to a reconcile running over and over.
 * No sleeps for timing: waits poll. */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <libpq-fe.h>
#include <sqlite3.h>

#include "activity.h"
#include "backend_env.h"
#include "clock.h"
#include "codes.h"
#include "error.h"
#include "harness.h"
#include "keys.h"
#include "order_worker.h"
#include "pg_harness.h"
#include "reconcile.h"
#include "script.h"
#include "segment.h"
#include "stock.h"
#include "store.h"
#include "sweeper.h"

SK_TH_PG_USED

#define SEGS 4

/* ---- helpers ------------------------------------------------------------- */

/* Raw SQL under the store (to break it on purpose). */
static void be_sql(struct sk_th_env *e, const char *sql)
{
    if (!e->pg) {
        sqlite3 *db;
        CHECK_EQ(sqlite3_open(e->path, &db), SQLITE_OK);
        sqlite3_busy_timeout(db, 5000);
        char *msg = NULL;
        int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
        CHECK_MSG(rc == SQLITE_OK, "%s: %s", sql, msg ? msg : "?");
        sqlite3_close(db);
        return;
    }
    PGconn *c = PQconnectdb(e->spec);
    CHECK_MSG(PQstatus(c) == CONNECTION_OK, "connect: %s", PQerrorMessage(c));
    PGresult *r = PQexec(c, sql);
    CHECK_MSG(PQresultStatus(r) == PGRES_COMMAND_OK, "%s: %s", sql, PQresultErrorMessage(r));
    PQclear(r);
    PQfinish(c);
}

static void redis_do(struct sk_th_env *e, const char *fmt, const char *a, const char *b,
                     const char *c)
{
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(e->r, &rep, fmt, a, b, c), 0);
    CHECK_MSG(rep->type != REDIS_REPLY_ERROR, "%s: %s", fmt, rep->str);
    freeReplyObject(rep);
}

/* An activity of SEGS segments in the store (state "open"), preheated and
 * opened in Redis. */
static uint64_t seg_activity(struct sk_th_env *e, int64_t stock, int64_t limit, int64_t max_qty,
                             int64_t pay_timeout_s)
{
    int64_t now = sk_wall_ms();
    struct sk_activity a;
    sk_activity_init(&a);
    a.id = sk_th_unique_id();
    snprintf(a.name, sizeof a.name, "segmented %" PRIu64, a.id);
    a.stock = stock;
    a.per_user_limit = limit;
    a.max_per_order = max_qty;
    a.start_ms = now - 60000;
    a.end_ms = now + 3600 * 1000;
    a.pay_timeout_s = pay_timeout_s;
    a.segments = SEGS;
    a.created_ms = now;
    sk_activity_apply_defaults(&a);
    CHECK_MSG(sk_store_activity_insert(e->st, &a) == 0, "insert: %s", sk_store_errstr(e->st));
    CHECK_EQ(sk_store_activity_set_state(e->st, a.id, "open"), 0);
    struct sk_stock_def d;
    sk_activity_stock_def(&a, &d);
    CHECK_EQ(d.segments, SEGS);
    int rc;
    int64_t left;
    CHECK_EQ(sk_stock_preheat(e->r, &d, 0, &rc, &left), 0);
    CHECK_MSG(rc == SK_RC_PREHEATED, "preheat: %s", sk_rc_name(rc));
    CHECK_EQ(sk_stock_set_open(e->r, a.id, 1, &rc), 0);
    CHECK_EQ(rc, SK_RC_OK);
    int s;
    CHECK_EQ(sk_seg_count(e->r, a.id, &s), 0);
    CHECK_EQ(s, SEGS);
    return a.id;
}

struct bought {
    char oid[SK_ORDER_ID_MAX];
    uint64_t uid;
    int64_t qty;
};

/* Users first.. buy 1 + (user % max_qty) units each, in batches of 50 (one
 * sk_stock_purchase_batch call each: routed to the home segments,
 * borrowing as needed), until n users were served or the sale sold out.
 * The admitted ones go to out; returns their count. */
static size_t buy_users(struct sk_th_env *e, uint64_t aid, uint64_t first, size_t n,
                        int64_t max_qty, struct bought *out)
{
    struct sk_purchase p[50];
    struct sk_admission res[50];
    size_t got = 0;
    for (size_t done = 0; done < n;) {
        size_t k = n - done < 50 ? n - done : 50;
        for (size_t i = 0; i < k; i++) {
            uint64_t u = first + done + i;
            p[i] = (struct sk_purchase){.user_id = u,
                                        .quantity = 1 + (int64_t)(u % (uint64_t)max_qty)};
        }
        CHECK_EQ(sk_stock_purchase_batch(e->r, aid, p, k, res, NULL), 0);
        for (size_t i = 0; i < k; i++) {
            if (res[i].rc != SK_RC_OK) {
                CHECK_MSG(res[i].rc == SK_RC_SOLD_OUT || res[i].rc == SK_RC_INSUFFICIENT,
                          "user %" PRIu64 ": %s", p[i].user_id, sk_rc_name(res[i].rc));
                continue;
            }
            snprintf(out[got].oid, sizeof out[got].oid, "%s", res[i].order_id);
            out[got].uid = p[i].user_id;
            out[got].qty = p[i].quantity;
            got++;
        }
        done += k;
    }
    return got;
}

/* Drains every segment's stream with the real worker (once mode). */
static void persist(struct sk_th_env *e)
{
    struct sk_worker_opts o;
    sk_worker_opts_init(&o);
    o.redis_url = sk_th_redis_url();
    o.db_spec = e->spec;
    o.consumer = "reconcile-seg-test";
    o.once = 1;
    sk_worker *w;
    char err[512];
    CHECK_MSG(sk_worker_new(&w, &o, err, sizeof err) == 0, "worker: %s", err);
    CHECK_MSG(sk_worker_run(w) == 0, "worker: %s", sk_worker_errstr(w));
    sk_worker_free(w);
}

/* The segment an order id names. */
static int seg_of(const char *oid, uint64_t aid)
{
    uint64_t a;
    int seg;
    CHECK_MSG(sk_keys_parse_label(oid, strlen(oid), &a, &seg) > 0, "order id %s", oid);
    CHECK_MSG(a == aid && seg >= 0 && seg < SEGS, "order id %s", oid);
    return seg;
}

/* A sold-out sale of 40 units over 4 segments: users from 1 buy 1 or 2
 * units until nothing is left (the last segments to drain lend to the
 * first); then the first order is paid, the second cancelled (its units go
 * back to its own segment) and sold again. Everything persisted. b gets the
 * admitted orders (at most 64), *nb their count. */
static uint64_t seg_sale(struct sk_th_env *e, struct bought *b, size_t *nb)
{
    uint64_t aid = seg_activity(e, 40, 2, 2, 60);
    size_t n = buy_users(e, aid, 1, 40, 2, b);
    CHECK(n >= 20 && n < 40);
    persist(e);
    CHECK_EQ(sk_store_order_pay(e->st, b[0].oid, sk_wall_ms(), NULL), 0);
    struct sk_cancel_result res;
    CHECK_EQ(sk_order_cancel(e->st, e->r, b[1].oid, b[1].uid, sk_wall_ms(), &res), 0);
    CHECK_EQ(res.units_given, b[1].qty);
    n += buy_users(e, aid, 1000, 10, 2, b + n);
    persist(e);
    *nb = n;
    return aid;
}

/* Runs `seckill reconcile --redis .. --db .. --activity <aid>` plus extra
 * arguments (NULL-terminated, may be NULL); output into out. */
static int reconcile(struct sk_th_env *e, uint64_t aid, char *out, size_t cap,
                     const char *const *extra)
{
    char id[32];
    snprintf(id, sizeof id, "%" PRIu64, aid);
    const char *args[16] = {"reconcile", "--redis", sk_th_redis_url(), "--db", e->spec,
                            "--activity", id};
    int n = 7;
    for (int i = 0; extra && extra[i] && n < 15; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    return sk_th_run_seckill(out, cap, NULL, args);
}

#define HAS(out, s) CHECK_MSG(strstr((out), (s)) != NULL, "expected \"%s\" in:\n%s", (s), (out))
#define HASNT(out, s) CHECK_MSG(strstr((out), (s)) == NULL, "unexpected \"%s\" in:\n%s", (s), (out))

static size_t audit_count(struct sk_th_env *e, uint64_t aid, const char *kind)
{
    struct sk_audit *rows;
    size_t n = 0, k = 0;
    CHECK_EQ(sk_store_audit_list(e->st, aid, &rows, &n), 0);
    for (size_t i = 0; i < n; i++)
        k += !kind || !strcmp(rows[i].kind, kind);
    free(rows);
    return k;
}

/* Drift must be found (exit 1, with line), then repaired with exactly
 * `audits` new audit rows, at least one of kind audit_kind, and then gone. */
static void expect_repaired(struct sk_th_env *e, uint64_t aid, const char *line,
                            const char *audit_kind, size_t audits)
{
    static char out[65536];
    int rc = reconcile(e, aid, out, sizeof out, NULL);
    CHECK_MSG(rc == 1, "exit %d:\n%s", rc, out);
    HAS(out, line);
    size_t before = audit_count(e, aid, NULL), kind_before = audit_count(e, aid, audit_kind);
    rc = reconcile(e, aid, out, sizeof out, (const char *const[]){"--repair", NULL});
    CHECK_MSG(rc == 0, "repair exit %d:\n%s", rc, out);
    HAS(out, "REPAIRED");
    HAS(out, "remain after repair: consistent");
    HASNT(out, "NOT REPAIRED");
    size_t after = audit_count(e, aid, NULL);
    CHECK_MSG(after == before + audits, "%zu audit rows, expected %zu:\n%s", after,
              before + audits, out);
    CHECK_MSG(audit_count(e, aid, audit_kind) > kind_before, "no audit row of kind %s:\n%s",
              audit_kind, out);
    rc = reconcile(e, aid, out, sizeof out, NULL);
    CHECK_MSG(rc == 0, "second reconcile exit %d:\n%s", rc, out);
    HAS(out, "consistent");
}

/* Library check: every drift found is in segment seg (or none is found). */
static void drift_only_in(struct sk_th_env *e, uint64_t aid, int seg, size_t *total)
{
    struct sk_reconcile_report rep;
    CHECK_EQ(sk_reconcile_activity(e->st, e->r, aid, NULL, &rep), 0);
    for (size_t i = 0; i < rep.ndrift; i++)
        CHECK_MSG(rep.drift[i].segment == seg ||
                      (rep.drift[i].kind == SK_DRIFT_DB_STOCK && rep.drift[i].segment < 0),
                  "drift %s in segment %d, expected %d: %s", sk_drift_name(rep.drift[i].kind),
                  rep.drift[i].segment, seg, rep.drift[i].text);
    *total = rep.total;
    sk_reconcile_report_free(&rep);
}

/* The global invariant over the segments' live state. */
static struct sk_stock_state global_state(struct sk_th_env *e, uint64_t aid)
{
    struct sk_stock_state st;
    CHECK_EQ(sk_stock_state(e->r, aid, &st), 0);
    CHECK_EQ(st.segments, SEGS);
    CHECK_MSG(st.remaining + st.held + st.in_transit == st.initial,
              "stock %" PRId64 " + held %" PRId64 " + in transit %" PRId64 " != initial %" PRId64,
              st.remaining, st.held, st.in_transit, st.initial);
    return st;
}

static int64_t seg_stock(struct sk_th_env *e, uint64_t aid, int seg)
{
    struct sk_keys k;
    sk_keys_seg(&k, aid, seg);
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(e->r, &rep, "GET %s", k.stock), 0);
    CHECK(rep->type == REDIS_REPLY_STRING);
    int64_t v = strtoll(rep->str, NULL, 10);
    freeReplyObject(rep);
    return v;
}

/* transfer.lua's lending half alone, from segment from to segment to: the
 * borrower "dies" before applying it. Returns the units taken; id gets the
 * transfer id. */
static int64_t lend_only(struct sk_th_env *e, uint64_t aid, int from, int to, int64_t want,
                         char *id)
{
    struct sk_keys k;
    sk_keys_seg(&k, aid, from);
    char a[2][24];
    snprintf(a[0], sizeof a[0], "%d", to);
    snprintf(a[1], sizeof a[1], "%" PRId64, want);
    const char *keys[] = {k.meta, k.stock, k.xout};
    const char *args[] = {a[0], a[1]};
    redisReply *rep;
    CHECK_EQ(sk_script_eval(e->r, SK_SCRIPT_TRANSFER, 3, keys, 2, args, NULL, &rep), 0);
    int trc;
    int64_t taken, left;
    CHECK_EQ(sk_seg_transfer_parse(rep, &trc, &taken, id, &left), 0);
    freeReplyObject(rep);
    CHECK_MSG(trc == SK_RC_TRANSFERRED, "transfer: %s", sk_rc_name(trc));
    CHECK(taken >= want);
    return taken;
}

/* Makes a pending transfer look old: its timestamp a minute back. */
static void age_transfer(struct sk_th_env *e, uint64_t aid, int from, const char *id)
{
    struct sk_keys k;
    sk_keys_seg(&k, aid, from);
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(e->r, &rep, "HGET %s %s", k.xout, id), 0);
    CHECK(rep->type == REDIS_REPLY_STRING);
    int to;
    int64_t qty, ms;
    CHECK_EQ(sscanf(rep->str, "%d:%" SCNd64 ":%" SCNd64, &to, &qty, &ms), 3);
    freeReplyObject(rep);
    char v[80];
    snprintf(v, sizeof v, "%d:%" PRId64 ":%" PRId64, to, qty, ms - 60000);
    redis_do(e, "HSET %s %s %s", k.xout, id, v);
}

/* The fullest segment and another one. */
static void pick_pair(struct sk_th_env *e, uint64_t aid, int *from, int *to)
{
    *from = 0;
    for (int s = 1; s < SEGS; s++)
        if (seg_stock(e, aid, s) > seg_stock(e, aid, *from)) *from = s;
    *to = (*from + 1) % SEGS;
    CHECK_MSG(seg_stock(e, aid, *from) >= 2, "segment %d has %" PRId64 " unit(s)", *from,
              seg_stock(e, aid, *from));
}

static json_t *json_activity(const char *out, json_t **root)
{
    json_error_t jerr;
    *root = json_loads(strchr(out, '{'), 0, &jerr);
    CHECK_MSG(*root, "json: %s:\n%s", jerr.text, out);
    json_t *a = json_array_get(json_object_get(*root, "activities"), 0);
    CHECK(a != NULL);
    return a;
}

#define BACKEND_TEST(name) SK_BACKEND_TEST(reconcile_seg, "recseg.db", name)

/* ---- (a) a clean segmented sale ------------------------------------------ */

BACKEND_TEST(segmented_sale_with_borrowing_payment_and_cancel_reconciles_clean)
{
    struct bought b[64];
    size_t n;
    uint64_t aid = seg_sale(e, b, &n);
    static char out[65536];
    int rc = reconcile(e, aid, out, sizeof out, NULL);
    CHECK_MSG(rc == 0, "exit %d:\n%s", rc, out);
    HAS(out, "consistent");
    HASNT(out, "DRIFT");
    HAS(out, "redis: initial 40, remaining 0, held 40");
    HAS(out, "; 4 segments, transfers: lent ");
    HAS(out, "in transit 0 unit(s) in 0 transfer(s)");
    HAS(out, ": segment 0: redis: initial 10 + received ");
    HAS(out, ": segment 3: redis: initial 10 + received ");
    HAS(out, "stock 0 (expected 0)");

    /* The library report: per-segment figures add up, transfers settled. */
    struct sk_reconcile_report rep;
    CHECK_EQ(sk_reconcile_activity(e->st, e->r, aid, NULL, &rep), 0);
    CHECK(rep.consistent);
    CHECK_EQ(rep.segments, SEGS);
    CHECK(rep.seg != NULL);
    int64_t shares = 0, held = 0, orders = 0;
    for (int s = 0; s < SEGS; s++) {
        const struct sk_reconcile_redis *x = &rep.seg[s];
        CHECK(x->present);
        CHECK_EQ(x->remaining + x->held, x->initial + x->xin - x->xout);
        CHECK_EQ(x->backlog, 0);
        shares += x->initial;
        held += x->held;
        orders += x->admitted_orders;
    }
    CHECK_EQ(shares, 40);
    CHECK_EQ(held, 40);
    CHECK_EQ(orders, (int64_t)n);
    CHECK_EQ(rep.redis.initial, 40);
    CHECK_EQ(rep.redis.admitted_orders, (int64_t)n);
    CHECK_MSG(rep.transit.lent > 0, "the sale never borrowed: lent %" PRId64, rep.transit.lent);
    CHECK_EQ(rep.transit.lent, rep.transit.received);
    CHECK_EQ(rep.transit.units, 0);
    CHECK_EQ(rep.db.counts.orders[SK_ORDER_PAID], 1);
    CHECK_EQ(rep.db.counts.orders[SK_ORDER_CANCELLED], 1);
    sk_reconcile_report_free(&rep);

    /* JSON: segments, one figure set per segment, transfers. */
    rc = reconcile(e, aid, out, sizeof out, (const char *const[]){"--json", NULL});
    CHECK_MSG(rc == 0, "exit %d:\n%s", rc, out);
    json_t *root, *a = json_activity(out, &root);
    CHECK(json_is_true(json_object_get(root, "consistent")));
    CHECK_EQ(json_integer_value(json_object_get(a, "segments")), SEGS);
    json_t *segs = json_object_get(a, "segment_figures");
    CHECK_EQ(json_array_size(segs), SEGS);
    CHECK_EQ(json_integer_value(json_object_get(json_array_get(segs, 2), "segment")), 2);
    CHECK_EQ(json_integer_value(json_object_get(json_object_get(a, "transit"), "units")), 0);
    CHECK_EQ(json_integer_value(json_object_get(json_object_get(a, "redis"), "held")), 40);
    json_decref(root);

    /* --repair on a clean activity changes nothing. */
    size_t audits = audit_count(e, aid, NULL);
    rc = reconcile(e, aid, out, sizeof out, (const char *const[]){"--repair", NULL});
    CHECK_MSG(rc == 0, "exit %d:\n%s", rc, out);
    HASNT(out, "REPAIRED");
    CHECK_EQ(audit_count(e, aid, NULL), audits);
    /* Every activity of the DB when --activity is left out. */
    const char *all[] = {"reconcile", "--redis", sk_th_redis_url(), "--db", e->spec, NULL};
    rc = sk_th_run_seckill(out, sizeof out, NULL, all);
    CHECK_MSG(rc == 0, "exit %d:\n%s", rc, out);
    HAS(out, "activity consistent");
}

BACKEND_TEST(segment_orders_still_in_their_streams_are_backlog_not_lost)
{
    uint64_t aid = seg_activity(e, 40, 1, 1, 60);
    struct bought b[16];
    size_t n = buy_users(e, aid, 1, 12, 1, b);
    CHECK_EQ(n, 12);
    static char out[65536];
    /* No worker yet, not even a group: every order is undelivered. */
    int rc = reconcile(e, aid, out, sizeof out, NULL);
    CHECK_MSG(rc == 0, "exit %d:\n%s", rc, out);
    HAS(out, "12 not yet in the DB");
    persist(e);
    rc = reconcile(e, aid, out, sizeof out, NULL);
    CHECK_MSG(rc == 0, "exit %d:\n%s", rc, out);
    HAS(out, "backlog 0 (pending 0, undelivered 0, 0 not yet in the DB)");
}

/* ---- (b) drift in one segment -------------------------------------------- */

BACKEND_TEST(deleted_order_row_in_one_segment_is_lost_there_and_restored)
{
    struct bought b[64];
    size_t n;
    uint64_t aid = seg_sale(e, b, &n);
    const struct bought *v = &b[3];
    int seg = seg_of(v->oid, aid);
    char sql[256];
    snprintf(sql, sizeof sql, "DELETE FROM orders WHERE order_id = '%s'", v->oid);
    be_sql(e, sql);
    size_t total;
    drift_only_in(e, aid, seg, &total);
    CHECK_EQ(total, 2); /* lost_order in the segment, db_stock for the activity */
    char line[256];
    snprintf(line, sizeof line,
             "DRIFT lost_order: segment %d: order %s (user %" PRIu64 ", %" PRId64 " unit(s))", seg,
             v->oid, v->uid, v->qty);
    expect_repaired(e, aid, line, "repair_restore_order", 1);
    struct sk_order o;
    CHECK_EQ(sk_store_order_get(e->st, v->oid, &o), 0);
    CHECK_EQ(o.status, SK_ORDER_CREATED);
    CHECK_EQ(o.user_id, v->uid);
    CHECK_EQ(o.quantity, v->qty);
    CHECK_EQ(o.activity_id, aid);
    CHECK_EQ(o.pay_deadline_ms, o.created_ms + 60000);
}

BACKEND_TEST(dropped_ledger_entry_and_tampered_stock_in_one_segment_are_repaired_there)
{
    struct bought b[64];
    size_t n;
    uint64_t aid = seg_sale(e, b, &n);
    const struct bought *v = &b[4];
    int seg = seg_of(v->oid, aid);
    struct sk_keys k;
    sk_keys_seg(&k, aid, seg);
    redis_do(e, "HDEL %s %s", k.ledger, v->oid, NULL);
    redis_do(e, "SET %s 3", k.stock, NULL, NULL); /* 3 units appear from nowhere */
    size_t total;
    drift_only_in(e, aid, seg, &total);
    CHECK_EQ(total, 3); /* user_count, not_in_ledger, redis_invariant */
    static char out[65536];
    CHECK_EQ(reconcile(e, aid, out, sizeof out, NULL), 1);
    char line[256];
    snprintf(line, sizeof line,
             "DRIFT user_count: segment %d: user %" PRIu64 ": the buyers hash holds", seg, v->uid);
    HAS(out, line);
    snprintf(line, sizeof line, "DRIFT redis_invariant: segment %d: Redis stock 3 + units held",
             seg);
    HAS(out, line);
    HAS(out, " - lent ");
    snprintf(line, sizeof line,
             "DRIFT not_in_ledger: segment %d: order %s (user %" PRIu64 ", %" PRId64
             " unit(s), created)",
             seg, v->oid, v->uid, v->qty);
    expect_repaired(e, aid, line, "repair_ledger_entry", 2 /* + repair_redis_stock */);
    CHECK_EQ(audit_count(e, aid, "repair_redis_stock"), 1);
    /* The segment's stock is what it owns again: sold out. */
    CHECK_EQ(seg_stock(e, aid, seg), 0);
    global_state(e, aid);
    /* The entry was restored in the segment's own ledger, and works: the
     * order is cancelled and its units go back to that segment. */
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(e->r, &rep, "HGET %s %s", k.ledger, v->oid), 0);
    CHECK(rep->type == REDIS_REPLY_STRING);
    char want[64];
    snprintf(want, sizeof want, "%" PRIu64 ":%" PRId64, v->uid, v->qty);
    CHECK_STR(rep->str, want);
    freeReplyObject(rep);
    struct sk_cancel_result res;
    CHECK_EQ(sk_order_cancel(e->st, e->r, v->oid, v->uid, sk_wall_ms(), &res), 0);
    CHECK_EQ(res.units_given, v->qty);
    CHECK_EQ(seg_stock(e, aid, seg), v->qty);
    CHECK_EQ(reconcile(e, aid, out, sizeof out, NULL), 0);
}

BACKEND_TEST(cancelled_but_not_released_in_a_segment_is_released_in_that_segment)
{
    struct bought b[64];
    size_t n;
    uint64_t aid = seg_sale(e, b, &n);
    const struct bought *v = &b[5];
    int seg = seg_of(v->oid, aid);
    int prev;
    CHECK_EQ(sk_store_order_cancel(e->st, v->oid, sk_wall_ms() - 60000, &prev), 0);
    char line[256];
    snprintf(line, sizeof line,
             "DRIFT cancelled_not_released: segment %d: order %s (user %" PRIu64 ", %" PRId64
             " unit(s)) is cancelled in the DB",
             seg, v->oid, v->uid, v->qty);
    expect_repaired(e, aid, line, "repair_release", 1);
    CHECK_EQ(seg_stock(e, aid, seg), v->qty);
    global_state(e, aid);
}

/* ---- (c) a transfer taken and never applied ------------------------------ */

BACKEND_TEST(transfer_never_applied_is_in_transit_and_repair_settles_it_once)
{
    uint64_t aid = seg_activity(e, 40, 2, 2, 60);
    struct bought b[16];
    size_t n = buy_users(e, aid, 1, 8, 2, b);
    CHECK_EQ(n, 8);
    persist(e);
    int from, to;
    pick_pair(e, aid, &from, &to);
    int64_t to_before = seg_stock(e, aid, to);
    char id[SK_XFER_ID_MAX];
    int64_t taken = lend_only(e, aid, from, to, 1, id);
    CHECK(global_state(e, aid).in_transit == taken);

    /* Young: a transfer in flight, counted but not drift. */
    struct sk_reconcile_report rep;
    CHECK_EQ(sk_reconcile_activity(e->st, e->r, aid, NULL, &rep), 0);
    CHECK_MSG(rep.consistent, "%zu drift(s): %s", rep.total, rep.ndrift ? rep.drift[0].text : "");
    CHECK_EQ(rep.transit.units, taken);
    CHECK_EQ(rep.transit.transfers, 1);
    CHECK_EQ(rep.transit.stale, 0);
    CHECK_EQ(rep.transit.lent - rep.transit.received, taken);
    sk_reconcile_report_free(&rep);
    /* Seen a minute later it is drift, in the lender's segment. */
    struct sk_reconcile_opts o;
    sk_reconcile_opts_init(&o);
    o.now_ms = sk_wall_ms() + 60000;
    CHECK_EQ(sk_reconcile_activity(e->st, e->r, aid, &o, &rep), 0);
    CHECK(!rep.consistent);
    CHECK_EQ(rep.total, 1);
    CHECK_EQ(rep.found[SK_DRIFT_IN_TRANSIT], 1);
    CHECK_EQ(rep.drift[0].segment, from);
    CHECK_EQ(rep.transit.stale, 1);
    CHECK_EQ(rep.transit.stale_units, taken);
    sk_reconcile_report_free(&rep);

    /* The binary: found (exit 1), settled by --repair with an audit row. */
    age_transfer(e, aid, from, id);
    static char out[65536];
    int rc = reconcile(e, aid, out, sizeof out, NULL);
    CHECK_MSG(rc == 1, "exit %d:\n%s", rc, out);
    char line[256];
    snprintf(line, sizeof line,
             "DRIFT in_transit: segment %d: transfer %s: %" PRId64
             " unit(s) lent to segment %d ",
             from, id, taken, to);
    HAS(out, line);
    snprintf(line, sizeof line, "in transit %" PRId64 " unit(s) in 1 transfer(s) (1 older", taken);
    HAS(out, line);
    CHECK_EQ(seg_stock(e, aid, to), to_before); /* a check never settles */
    rc = reconcile(e, aid, out, sizeof out, (const char *const[]){"--repair", "--json", NULL});
    CHECK_MSG(rc == 0, "repair exit %d:\n%s", rc, out);
    json_t *root, *a = json_activity(out, &root);
    CHECK(json_is_true(json_object_get(root, "consistent")));
    CHECK(json_is_true(json_object_get(a, "settled")));
    CHECK_EQ(json_integer_value(json_object_get(a, "settled_units")), taken);
    CHECK_EQ(json_integer_value(json_object_get(a, "remaining_total")), 0);
    json_t *r0 = json_array_get(json_object_get(a, "repairs"), 0);
    CHECK_STR(json_string_value(json_object_get(r0, "kind")), "in_transit");
    CHECK(json_is_true(json_object_get(r0, "ok")));
    snprintf(line, sizeof line, "transfers settled: %" PRId64 " unit(s)", taken);
    CHECK_MSG(strstr(json_string_value(json_object_get(r0, "message")), line), "%s", out);
    json_decref(root);
    CHECK_EQ(audit_count(e, aid, "repair_settle_transfers"), 1);

    /* Afterwards: applied at the receiver, nothing in transit, the global
     * invariant holds. */
    CHECK_EQ(seg_stock(e, aid, to), to_before + taken);
    struct sk_stock_state st = global_state(e, aid);
    CHECK_EQ(st.in_transit, 0);
    CHECK_EQ(st.remaining + st.held, 40);
    /* A second run finds nothing and does nothing; so does a second settle. */
    rc = reconcile(e, aid, out, sizeof out, (const char *const[]){"--repair", NULL});
    CHECK_MSG(rc == 0, "exit %d:\n%s", rc, out);
    HASNT(out, "REPAIRED");
    HAS(out, "in transit 0 unit(s) in 0 transfer(s)");
    CHECK_EQ(audit_count(e, aid, "repair_settle_transfers"), 1);
    CHECK_EQ(seg_stock(e, aid, to), to_before + taken);
    int64_t units;
    CHECK_EQ(sk_seg_settle(e->r, aid, SEGS, &units), 0);
    CHECK_EQ(units, 0);
    /* The borrower's late re-admission with the transfer adds nothing. */
    struct sk_keys kt;
    sk_keys_seg(&kt, aid, to);
    struct sk_purchase p = {.user_id = 5000, .quantity = 1};
    while (sk_seg_home(p.user_id, SEGS) != to)
        p.user_id++;
    struct sk_batch_head h = {.label = kt.label, .xfer_id = id, .xfer_qty = taken};
    struct sk_admission adm;
    int64_t left;
    CHECK_EQ(sk_stock_batch_call(e->r, &kt, &h, &p, 1, &adm, &left), 0);
    CHECK_EQ(adm.rc, SK_RC_OK);
    CHECK_EQ(left, to_before + taken - 1);
    persist(e);
    CHECK_EQ(reconcile(e, aid, out, sizeof out, NULL), 0);
}

BACKEND_TEST(forced_preheat_settles_a_pending_transfer_first_so_no_unit_is_created)
{
    uint64_t aid = seg_activity(e, 40, 2, 2, 60);
    struct bought b[16];
    CHECK_EQ(buy_users(e, aid, 1, 8, 2, b), 8);
    persist(e);
    int from, to;
    pick_pair(e, aid, &from, &to);
    char id[SK_XFER_ID_MAX];
    lend_only(e, aid, from, to, 1, id);
    age_transfer(e, aid, from, id);
    /* The sale is closed and force-preheated: the pending transfer is
     * applied before xin/xout restart at 0 and the stock is shared out
     * again, so neither a later settle nor the borrower's late call can
     * add its units a second time. */
    int rc;
    CHECK_EQ(sk_stock_set_open(e->r, aid, 0, &rc), 0);
    struct sk_activity a;
    CHECK_EQ(sk_store_activity_get(e->st, aid, &a), 0);
    struct sk_stock_def d;
    sk_activity_stock_def(&a, &d);
    int64_t left;
    CHECK_EQ(sk_stock_preheat(e->r, &d, 1, &rc, &left), 0);
    CHECK_MSG(rc == SK_RC_PREHEATED, "forced preheat: %s", sk_rc_name(rc));
    struct sk_stock_state st = global_state(e, aid);
    CHECK_EQ(st.in_transit, 0);
    CHECK_EQ(st.remaining + st.held, 40);
    struct sk_keys k;
    sk_keys_seg(&k, aid, from);
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(e->r, &rep, "HLEN %s", k.xout), 0);
    CHECK_EQ(rep->integer, 0);
    freeReplyObject(rep);
    int64_t units, to_before = seg_stock(e, aid, to);
    CHECK_EQ(sk_seg_settle(e->r, aid, SEGS, &units), 0);
    CHECK_EQ(units, 0);
    CHECK_EQ(seg_stock(e, aid, to), to_before);
    static char out[65536];
    CHECK_EQ(reconcile(e, aid, out, sizeof out, NULL), 0);
}

BACKEND_TEST(tampered_transfer_counter_is_reported_and_no_stock_is_rewritten_from_it)
{
    uint64_t aid = seg_activity(e, 40, 2, 2, 60);
    struct bought b[16];
    CHECK_EQ(buy_users(e, aid, 1, 8, 2, b), 8);
    persist(e);
    int from, to;
    pick_pair(e, aid, &from, &to);
    char id[SK_XFER_ID_MAX];
    lend_only(e, aid, from, to, 1, id);
    int64_t units;
    CHECK_EQ(sk_seg_settle(e->r, aid, SEGS, &units), 0); /* a normal, settled transfer */
    struct sk_keys k;
    sk_keys_seg(&k, aid, from);
    redis_do(e, "HINCRBY %s xout 3", k.meta, NULL, NULL); /* 3 units "lent" to nobody */
    int64_t stock = seg_stock(e, aid, from);
    static char out[65536];
    CHECK_EQ(reconcile(e, aid, out, sizeof out, NULL), 1);
    char line[256];
    snprintf(line, sizeof line, "DRIFT redis_invariant: segment %d: Redis stock %" PRId64, from,
             stock);
    HAS(out, line);
    HAS(out, "DRIFT in_transit: the transfer counters say 3 unit(s) in transit");
    /* Setting the stock to initial + received - lent - held would destroy
     * 3 units on the word of the tampered counter: refused. */
    CHECK_EQ(reconcile(e, aid, out, sizeof out, (const char *const[]){"--repair", NULL}), 1);
    HAS(out, "NOT REPAIRED redis_invariant");
    HAS(out, "the transfer counters (xin/xout) or the shares are in doubt");
    HAS(out, "NOT REPAIRED in_transit: transfers not settled");
    CHECK_EQ(seg_stock(e, aid, from), stock);
    CHECK_EQ(audit_count(e, aid, NULL), 0);
    /* Put back: consistent again. */
    redis_do(e, "HINCRBY %s xout -3", k.meta, NULL, NULL);
    CHECK_EQ(reconcile(e, aid, out, sizeof out, NULL), 0);
}

/* ---- a live segmented sale --------------------------------------------- */

struct live {
    struct sk_th_env *e;
    uint64_t aid;
    atomic_int stop;
    int checks, bad;
    char first_bad[8192];
};

static void *live_checker(void *p)
{
    struct live *l = p;
    sk_store *st;
    sk_redis *r;
    char err[512];
    if (sk_store_open(&st, l->e->spec, err, sizeof err) ||
        sk_redis_new(&r, sk_th_redis_url(), 1000, 5000, err, sizeof err)) {
        l->bad = -1;
        return NULL;
    }
    while (!atomic_load(&l->stop)) {
        struct sk_reconcile_report rep;
        int rc = sk_reconcile_activity(st, r, l->aid, NULL, &rep);
        l->checks++;
        if ((rc || !rep.consistent) && l->bad++ == 0) {
            FILE *f = fmemopen(l->first_bad, sizeof l->first_bad - 1, "w");
            if (f) {
                fprintf(f, "rc %d\n", rc);
                sk_reconcile_print(f, &rep, 5);
                fclose(f);
            }
        }
        sk_reconcile_report_free(&rep);
    }
    sk_store_close(st);
    sk_redis_free(r);
    return NULL;
}

static void *live_worker(void *p)
{
    sk_worker_run(p);
    return NULL;
}

struct sweep_arg {
    struct sk_th_env *e;
    atomic_int *stop;
};

static void *live_sweeper(void *p)
{
    struct sweep_arg *a = p;
    struct sk_sweeper_opts o;
    sk_sweeper_opts_init(&o);
    o.redis_url = sk_th_redis_url();
    o.db_spec = a->e->spec;
    o.batch = 5;
    sk_sweeper *sw;
    char err[512];
    if (sk_sweeper_new(&sw, &o, err, sizeof err)) return NULL;
    while (!atomic_load(a->stop))
        /* Every order is past its deadline then: cancelled once persisted,
         * its unit back in its segment, bought again (borrowing). */
        sk_sweeper_pass(sw, sk_wall_ms() + 120000, NULL);
    sk_sweeper_free(sw);
    return NULL;
}

BACKEND_TEST(a_live_segmented_sale_with_borrowing_never_shows_drift)
{
    enum { STOCK = 40, WANTED = 200 };
    uint64_t aid = seg_activity(e, STOCK, 1, 1, 60);
    struct live l = {.e = e, .aid = aid};
    struct sk_worker_opts wo;
    sk_worker_opts_init(&wo);
    wo.redis_url = sk_th_redis_url();
    wo.db_spec = e->spec;
    wo.consumer = "live-seg";
    wo.batch = 7;
    wo.block_ms = 20;
    wo.relist_ms = 50;
    sk_worker *w;
    char err[512];
    CHECK_MSG(sk_worker_new(&w, &wo, err, sizeof err) == 0, "worker: %s", err);
    pthread_t tw, tc, ts;
    atomic_int sweep_stop = 0;
    struct sweep_arg sa = {.e = e, .stop = &sweep_stop};
    CHECK_EQ(pthread_create(&tw, NULL, live_worker, w), 0);
    CHECK_EQ(pthread_create(&tc, NULL, live_checker, &l), 0);
    CHECK_EQ(pthread_create(&ts, NULL, live_sweeper, &sa), 0);
    /* Buyers one by one until released units were sold again WANTED times
     * over (bounded); each segment drains and borrows many times. */
    size_t accepted = 0;
    int64_t until = sk_mono_ms() + 30000;
    for (uint64_t u = 1; accepted < WANTED; u++) {
        CHECK_MSG(sk_mono_ms() < until, "only %zu purchases accepted", accepted);
        struct sk_purchase p = {.user_id = u, .quantity = 1};
        struct sk_admission a;
        CHECK_EQ(sk_stock_purchase_batch(e->r, aid, &p, 1, &a, NULL), 0);
        accepted += a.rc == SK_RC_OK;
    }
    until = sk_mono_ms() + 20000;
    for (;;) {
        struct sk_order_counts c;
        CHECK_EQ(sk_store_orders_count(e->st, aid, &c), 0);
        if ((size_t)(c.orders[0] + c.orders[1] + c.orders[2]) == accepted) break;
        CHECK_MSG(sk_mono_ms() < until, "only %lld of %zu orders persisted",
                  (long long)(c.orders[0] + c.orders[1] + c.orders[2]), accepted);
        struct timespec ts2 = {0, 10 * 1000000L};
        nanosleep(&ts2, NULL);
    }
    atomic_store(&sweep_stop, 1);
    CHECK_EQ(pthread_join(ts, NULL), 0);
    sk_worker_stop(w);
    CHECK_EQ(pthread_join(tw, NULL), 0);
    sk_worker_free(w);
    atomic_store(&l.stop, 1);
    CHECK_EQ(pthread_join(tc, NULL), 0);
    CHECK_MSG(l.bad == 0, "%d of %d checks showed drift; first:\n%s", l.bad, l.checks,
              l.first_bad);
    CHECK(l.checks >= 3);
    CHECK(accepted > STOCK);
    /* Settled: one more sweeper pass so no cancel is half done, then the
     * binary: consistent, and the sale did borrow. */
    sk_sweeper *sw;
    struct sk_sweeper_opts so;
    sk_sweeper_opts_init(&so);
    so.redis_url = sk_th_redis_url();
    so.db_spec = e->spec;
    CHECK_EQ(sk_sweeper_new(&sw, &so, err, sizeof err), 0);
    CHECK_EQ(sk_sweeper_pass(sw, sk_wall_ms(), NULL), 0);
    sk_sweeper_free(sw);
    static char out[65536];
    int rc = reconcile(e, aid, out, sizeof out, (const char *const[]){"--json", NULL});
    CHECK_MSG(rc == 0, "exit %d:\n%s", rc, out);
    json_t *root, *a = json_activity(out, &root);
    json_t *t = json_object_get(a, "transit");
    CHECK_MSG(json_integer_value(json_object_get(t, "lent")) > 0, "no borrowing:\n%s", out);
    CHECK_EQ(json_integer_value(json_object_get(t, "units")), 0);
    json_decref(root);
    global_state(e, aid);
}
