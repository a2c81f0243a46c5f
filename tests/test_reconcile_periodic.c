/* test_reconcile_periodic.c - the worker's periodic reconcile does not
 * grow with the sale: a full check of a sale bigger than its chunk reads it
 * in slices (never more ledger entries held than the chunk) and finds the
 * same drift as one snapshot; an incremental pass reads only the orders
 * since the previous one, and drift made behind its back (a DB row deleted,
 * a ledger entry removed in Redis) is still found, by that pass (the counts
 * make it full) or by the next full one (docs/reconcile.md, "The periodic
 * check"). Real Redis, real SQLite / PostgreSQL / MariaDB; the drift is made
 * in the database and in Redis directly. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "engine/keys.h"
#include "orders/reconcile.h"
#include "support/backend_env.h"
#include "support/harness.h"
#include "support/mysql_harness.h"
#include "support/pg_harness.h"
#include "support/reconcile_env.h"

SK_TH_PG_USED
SK_TH_MY_USED

#define BACKEND_TEST(name) SK_BACKEND_TEST(recper, "recper.db", name)

/* A sale of n users, persisted; their orders into b (n entries). */
static uint64_t sale(struct sk_th_env *e, size_t n, struct sk_th_bought *b)
{
    uint64_t aid = sk_th_env_activity(e, (int64_t)n * 2, 2, 2, 3600);
    CHECK_EQ(sk_th_env_buy_users(e, aid, 1, n, 2, 500, b), n);
    sk_th_env_persist(e, "w1", -1);
    return aid;
}

/* Waits (polling, 2 s at most) until the wall clock is past every order of
 * b, so the next pass's start is later than all of them. */
static void past_orders(const struct sk_th_bought *b, size_t n)
{
    uint64_t last = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned long long ms;
        CHECK(sscanf(strchr(b[i].oid, '-') + 1, "%llu", &ms) == 1);
        if (ms > last) last = ms;
    }
    int64_t deadline = sk_mono_ms() + 2000;
    while (sk_wall_ms() <= (int64_t)last + 1 && sk_mono_ms() < deadline) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    CHECK(sk_wall_ms() > (int64_t)last + 1);
}

static void check(struct sk_th_env *e, uint64_t aid, size_t chunk, struct sk_reconcile_report *rep)
{
    struct sk_reconcile_opts o;
    sk_reconcile_opts_init(&o);
    o.chunk = chunk;
    CHECK_EQ(sk_reconcile_activity(e->st, e->r, aid, &o, rep), 0);
}

static void del_row(struct sk_th_env *e, const char *oid)
{
    char sql[256];
    snprintf(sql, sizeof sql, "DELETE FROM orders WHERE order_id = '%s'", oid);
    sk_th_be_sql(e, sql);
}

/* Every kind of drift the orders can show, made at once, is found alike by
 * one snapshot and by slices of 40 (a sale of 600 orders: 19 slices), and
 * the sliced check never holds more than the chunk. */
BACKEND_TEST(sliced_full_check_finds_what_one_snapshot_finds)
{
    enum { N = 600, CHUNK = 40 };
    struct sk_th_bought *b = calloc(N, sizeof *b);
    CHECK(b != NULL);
    uint64_t aid = sale(e, N, b);
    struct sk_reconcile_report snap, sl;
    check(e, aid, 0, &snap);
    check(e, aid, CHUNK, &sl);
    CHECK(snap.consistent && sl.consistent);
    CHECK_EQ(snap.slices, 1);
    CHECK(sl.slices > 1);
    CHECK_EQ(snap.peak_held, (size_t)N);
    CHECK_MSG(sl.peak_held <= CHUNK, "peak %zu > chunk %d", sl.peak_held, CHUNK);
    sk_reconcile_report_free(&snap);
    sk_reconcile_report_free(&sl);

    struct sk_keys k;
    sk_keys_for(&k, aid);
    del_row(e, b[10].oid);                                      /* lost_order, db_stock */
    sk_th_redis_do(e, "HDEL %s %s", k.ledger, b[20].oid, NULL); /* not_in_ledger, user_count */
    char sql[256];
    snprintf(sql, sizeof sql, "UPDATE orders SET user_id = 999999 WHERE order_id = '%s'",
             b[30].oid); /* order_mismatch: its DB user is in another slice */
    sk_th_be_sql(e, sql);
    snprintf(sql, sizeof sql, "UPDATE orders SET quantity = quantity + 1 WHERE order_id = '%s'",
             b[40].oid); /* order_mismatch, db_stock */
    sk_th_be_sql(e, sql);
    char user[24];
    snprintf(user, sizeof user, "%" PRIu64, b[50].uid);
    sk_th_redis_do(e, "HINCRBY %s %s 5", k.buyers, user, NULL);    /* user_count, redis_invariant */
    sk_th_redis_do(e, "HSET %s 7-bad junk", k.ledger, NULL, NULL); /* malformed: order_mismatch */

    check(e, aid, 0, &snap);
    check(e, aid, CHUNK, &sl);
    CHECK(!snap.consistent && !sl.consistent);
    CHECK(sl.slices > 1);
    CHECK(sl.peak_held <= CHUNK);
    for (int kind = 0; kind < SK_DRIFT_NKINDS; kind++)
        CHECK_MSG(snap.found[kind] == sl.found[kind], "%s: snapshot %zu, slices %zu",
                  sk_drift_name(kind), snap.found[kind], sl.found[kind]);
    CHECK_EQ(snap.total, sl.total);
    CHECK_EQ(sl.found[SK_DRIFT_LOST_ORDER], 1);
    CHECK_EQ(sl.found[SK_DRIFT_NOT_IN_LEDGER], 1);
    CHECK_EQ(sl.found[SK_DRIFT_ORDER_MISMATCH], 3);
    CHECK_EQ(sl.found[SK_DRIFT_USER_COUNT], 2);
    CHECK_EQ(sl.found[SK_DRIFT_REDIS_INVARIANT], 1);
    /* the same figures */
    CHECK_EQ(snap.redis.admitted_orders, sl.redis.admitted_orders);
    CHECK_EQ(snap.redis.admitted_units, sl.redis.admitted_units);
    CHECK_EQ(snap.redis.held, sl.redis.held);
    CHECK_EQ(snap.redis.buyers, sl.redis.buyers);
    sk_reconcile_report_free(&snap);
    sk_reconcile_report_free(&sl);
    free(b);
}

/* The worker's passes: the first full, then incremental ones that read
 * only the orders since the previous pass; a DB row deleted behind them
 * makes the next pass full at once (the counts), a ledger entry removed in
 * Redis is found by the next full pass (full_every). */
BACKEND_TEST(incremental_passes_read_new_orders_only_and_drift_is_still_found)
{
    enum { N1 = 2000, N2 = 150, CHUNK = 500, EVERY = 4 };
    struct sk_th_bought *b = calloc(N1 + N2, sizeof *b);
    CHECK(b != NULL);
    uint64_t aid = sale(e, N1, b);
    struct sk_reconcile_periodic p;
    sk_reconcile_periodic_init(&p);
    p.full_every = EVERY;
    p.overlap_ms = 0; /* (the worker's 65 s would take in every order of this test) */
    p.chunk = CHUNK;
    past_orders(b, N1);
    struct sk_reconcile_report rep;

    /* pass 1: full, in slices */
    CHECK_EQ(sk_reconcile_periodic_run(&p, e->st, e->r, aid, &rep), 0);
    CHECK(rep.consistent);
    CHECK(!rep.incremental);
    CHECK(rep.slices > 1);
    CHECK(rep.peak_held <= CHUNK);
    CHECK(rep.rows_read >= N1);
    sk_reconcile_report_free(&rep);

    /* pass 2: incremental, the N2 new orders only */
    CHECK_EQ(sk_th_env_buy_users(e, aid, N1 + 1, N2, 2, 50, b + N1), (size_t)N2);
    sk_th_env_persist(e, "w1", -1);
    past_orders(b + N1, N2);
    CHECK_EQ(sk_reconcile_periodic_run(&p, e->st, e->r, aid, &rep), 0);
    CHECK(rep.consistent);
    CHECK(rep.incremental && !rep.escalated);
    CHECK_EQ(rep.rows_read, (size_t)N2);
    CHECK(rep.peak_held <= N2);
    sk_reconcile_report_free(&rep);

    /* pass 3: nothing new: nothing read */
    CHECK_EQ(sk_reconcile_periodic_run(&p, e->st, e->r, aid, &rep), 0);
    CHECK(rep.consistent);
    CHECK(rep.incremental && !rep.escalated);
    CHECK_EQ(rep.rows_read, (size_t)0);
    sk_reconcile_report_free(&rep);

    /* an old order's ledger entry removed in Redis: an incremental pass
     * does not read old orders (pass 4), the next full one finds it
     * (pass 5, the EVERY-th after the first) */
    struct sk_keys k;
    sk_keys_for(&k, aid);
    sk_th_redis_do(e, "HDEL %s %s", k.ledger, b[7].oid, NULL);
    CHECK_EQ(sk_reconcile_periodic_run(&p, e->st, e->r, aid, &rep), 0);
    CHECK(rep.incremental && !rep.escalated);
    CHECK(rep.consistent);
    sk_reconcile_report_free(&rep);
    CHECK_EQ(sk_reconcile_periodic_run(&p, e->st, e->r, aid, &rep), 0);
    CHECK(!rep.incremental);
    CHECK(!rep.consistent);
    CHECK_EQ(rep.found[SK_DRIFT_NOT_IN_LEDGER], 1);
    CHECK_EQ(rep.found[SK_DRIFT_USER_COUNT], 1);
    for (size_t i = 0; i < rep.ndrift; i++)
        if (rep.drift[i].kind == SK_DRIFT_NOT_IN_LEDGER)
            CHECK_STR(rep.drift[i].order.order_id, b[7].oid);
    CHECK(rep.peak_held <= CHUNK);
    sk_reconcile_report_free(&rep);
    /* put back (the entry as the admission wrote it) */
    char val[48];
    snprintf(val, sizeof val, "%" PRIu64 ":%" PRId64, b[7].uid, b[7].qty);
    sk_th_redis_do(e, "HSET %s %s %s", k.ledger, b[7].oid, val);

    /* an old order's DB row deleted: the next (incremental) pass sees more
     * ledger entries than DB orders and backlog, and turns full at once */
    del_row(e, b[3].oid);
    CHECK_EQ(sk_reconcile_periodic_run(&p, e->st, e->r, aid, &rep), 0);
    CHECK(rep.escalated);
    CHECK(!rep.consistent);
    CHECK_EQ(rep.found[SK_DRIFT_LOST_ORDER], 1);
    CHECK_EQ(rep.found[SK_DRIFT_DB_STOCK], 1);
    CHECK(rep.peak_held <= CHUNK);
    sk_reconcile_report_free(&rep);
    sk_reconcile_periodic_free(&p);
    free(b);
}

/* A live sale (buyers, the worker, a sweeper cancelling every order, so
 * units are released and sold again) checked over and over in slices of 8,
 * and as the worker's periodic passes: no drift is ever seen (a user who
 * buys or gives back during a pass is judged on the next one). */
BACKEND_TEST(a_live_sale_checked_in_slices_and_incrementally_never_shows_drift)
{
    enum { STOCK = 40, WANTED = 200 };
    for (int periodic = 0; periodic < 2; periodic++) {
        uint64_t aid = sk_th_env_activity(e, STOCK, 1, 1, 60);
        struct sk_th_live l;
        sk_th_live_start_as(&l, e, aid, "live", 0, 8, periodic);
        size_t accepted = sk_th_live_buy(&l, WANTED, 20000);
        sk_th_live_finish(&l, accepted);
        CHECK(accepted > STOCK);
        CHECK_MSG(l.sliced > 0, "no check ran in slices (%d checks)", atomic_load(&l.checks));
        if (periodic)
            CHECK_MSG(l.incremental > 0, "no incremental pass (%d checks)", atomic_load(&l.checks));
    }
}
