/* test_reconcile.c - `seckill reconcile` and sk_reconcile_activity against
 * the run's real Redis and a real database, each behaviour on SQLite
 * (reconcile_sqlite_<name>) and PostgreSQL (reconcile_pg_<name>).
 *
 * A sale is made for real (admission script, order worker in once mode),
 * then each kind of drift is produced on purpose - a deleted order row, a
 * tampered Redis stock, a tampered DB stock, a dropped ledger entry, an
 * order paid in the DB but released in Redis, ... - and the binary must
 * exit 1 with the right line, `--repair` must fix what is safe with an
 * audit row per change, and a second run must exit 0. Bad flags exit 2.
 * Last, a live sale (buyers, worker and sweeper running) is reconciled
 * over and over and must never show drift. No sleeps: waits poll. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "core/clock.h"
#include "core/codes.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/activity.h"
#include "engine/keys.h"
#include "engine/stock.h"
#include "orders/order_worker.h"
#include "orders/reconcile.h"
#include "orders/sweeper.h"
#include "store/store.h"
#include "support/backend_env.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/mysql_harness.h"
#include "support/pg_harness.h"
#include "support/reconcile_env.h"

SK_TH_PG_USED
SK_TH_MY_USED

static void buy(struct sk_th_env *e, uint64_t aid, uint64_t user, int64_t qty, char *oid)
{
    struct sk_admission a;
    CHECK_EQ(sk_th_buy(e->r, aid, user, qty, &a, NULL), 0);
    CHECK_MSG(a.rc == SK_RC_OK, "purchase by %" PRIu64 ": %s", user, sk_rc_name(a.rc));
    if (oid) snprintf(oid, SK_ORDER_ID_MAX, "%s", a.order_id);
}

static void persist(struct sk_th_env *e)
{
    sk_th_env_persist(e, "reconcile-test", -1);
}

/* A finished sale of 10 units: users 1..4 buy 2 each, users 5 and 6 one
 * each; user 1 paid, user 2's order timed out (cancelled, released, its
 * units bought again by user 7). oids[i] is user i+1's order. */
static uint64_t sale(struct sk_th_env *e, char oids[7][SK_ORDER_ID_MAX])
{
    uint64_t aid = sk_th_env_activity(e, 10, 2, 2, 60);
    for (int u = 1; u <= 6; u++)
        buy(e, aid, (uint64_t)u, u <= 4 ? 2 : 1, oids[u - 1]);
    persist(e);
    CHECK_EQ(sk_store_order_pay(e->st, oids[0], sk_wall_ms(), NULL), 0);
    struct sk_cancel_result res;
    CHECK_EQ(sk_order_cancel(e->st, e->r, oids[1], 2, sk_wall_ms(), &res), 0);
    CHECK_EQ(res.units_given, 2);
    buy(e, aid, 7, 2, oids[6]);
    persist(e);
    return aid;
}

static struct sk_stock_state redis_state(struct sk_th_env *e, uint64_t aid)
{
    struct sk_stock_state s;
    CHECK_EQ(sk_stock_state(e->r, aid, &s), 0);
    return s;
}

static struct sk_order get_order(struct sk_th_env *e, const char *oid)
{
    struct sk_order o;
    CHECK_MSG(sk_store_order_get(e->st, oid, &o) == 0, "get %s: %s", oid, sk_store_errstr(e->st));
    return o;
}

/* ---- consistent states ---------------------------------------------------------- */

#define BACKEND_TEST(name) SK_BACKEND_TEST(reconcile, "rec.db", name)

BACKEND_TEST(clean_sale_with_payments_and_timeouts_exits_0)
{
    struct sk_th_redis rs;
    sk_th_env_own_redis(e, &rs); /* a plain reconcile looks at every activity Redis holds */
    char oids[7][SK_ORDER_ID_MAX];
    uint64_t aid = sale(e, oids);
    static char out[65536];
    sk_th_reconcile_clean(e, aid, out, sizeof out);
    HAS(out, "redis: initial 10, remaining 0, held 10");
    HAS(out, "stock 0 (expected 0)");
    /* Every activity of the DB when --activity is left out. */
    int rc = sk_th_reconcile(e, 0, out, sizeof out, NULL);
    CHECK_MSG(rc == 0, "exit %d:\n%s", rc, out);
    HAS(out, "activity consistent");
    sk_th_redis_stop(&rs, 1);
}

/* The store's identity (docs/design.md): an activity live in Redis that
 * this database does not hold, one it holds whose live state another
 * store preheated, and one whose purchases another store's nodes were
 * refused: each a drift of a plain reconcile, naming its fix; the note of
 * refused purchases is cleared by --repair, with an audit row. */
BACKEND_TEST(activities_another_store_preheated_are_drift_with_their_fix)
{
    struct sk_th_redis rs;
    sk_th_env_own_redis(e, &rs);
    char mine[SK_STORE_IDENTITY_MAX];
    CHECK_EQ(sk_store_identity(e->st, mine, sizeof mine), 0);
    uint64_t ok = sk_th_env_activity(e, 10, 1, 1, 60);
    /* live in Redis only, preheated from store ...bb */
    struct sk_stock_def d = {.id = sk_th_unique_id(),
                             .initial = 5,
                             .per_user_limit = 1,
                             .max_per_order = 1,
                             .start_ms = sk_wall_ms() - 1000,
                             .end_ms = sk_wall_ms() + 3600000};
    snprintf(d.store_id, sizeof d.store_id, "00000000000000bb");
    int prc;
    CHECK_EQ(sk_stock_preheat(e->r, &d, 0, &prc, NULL), 0);
    CHECK_EQ(prc, SK_RC_PREHEATED);
    /* held here, its live state preheated by store ...cc */
    uint64_t held = sk_th_env_activity_segs(e, 5, 1, 1, 60, 1, 0);
    struct sk_activity a;
    CHECK_EQ(sk_store_activity_get(e->st, held, &a), 0);
    struct sk_stock_def hd;
    sk_activity_stock_def(&a, &hd);
    snprintf(hd.store_id, sizeof hd.store_id, "00000000000000cc");
    CHECK_EQ(sk_stock_preheat(e->r, &hd, 0, &prc, NULL), 0);
    static char out[65536];
    int rc = sk_th_reconcile(e, 0, out, sizeof out, NULL);
    CHECK_MSG(rc == 1, "exit %d:\n%s", rc, out);
    char line[160];
    snprintf(line, sizeof line, "activity %" PRIu64 ": DRIFT db_missing", d.id);
    HAS(out, line);
    HAS(out, "preheated it (store 00000000000000bb)");
    HAS(out, "--redis-only");
    snprintf(line, sizeof line, "activity %" PRIu64 ": DRIFT store", held);
    HAS(out, line);
    HAS(out, "(store 00000000000000cc; this one is store");
    snprintf(line, sizeof line, "activity %" PRIu64 ": consistent", ok);
    HAS(out, line);
    HAS(out, "drift in 2 of 3 activities");
    /* --activity still checks only the one named */
    CHECK_EQ(sk_th_reconcile(e, ok, out, sizeof out, NULL), 0);

    /* the orphans gone (the fix named): a purchase refused to another
     * store's node leaves a note on an activity of this store */
    CHECK_EQ(sk_stock_drop(e->r, d.id), 0);
    CHECK_EQ(sk_stock_drop(e->r, held), 0);
    CHECK_EQ(sk_store_activity_delete(e->st, held), 0);
    CHECK_EQ(sk_store_activity_get(e->st, ok, &a), 0);
    sk_activity_stock_def(&a, &hd);
    snprintf(hd.store_id, sizeof hd.store_id, "%s", mine); /* preheated before: stamped now */
    CHECK_EQ(sk_stock_preheat(e->r, &hd, 0, &prc, NULL), 0);
    CHECK_EQ(prc, SK_RC_STOCK_LIVE);
    struct sk_keys k;
    sk_keys_for(&k, ok);
    struct sk_batch_head h = {.label = k.label, .store_id = "00000000000000dd"};
    struct sk_purchase p = {.user_id = 99, .quantity = 1};
    struct sk_admission res;
    int64_t left;
    CHECK_EQ(sk_stock_batch_call(e->r, &k, &h, &p, 1, &res, &left), 0);
    CHECK_EQ(res.rc, SK_RC_OTHER_STORE);
    rc = sk_th_reconcile(e, 0, out, sizeof out, NULL);
    CHECK_MSG(rc == 1, "exit %d:\n%s", rc, out);
    HAS(out, "nodes of another database (store 00000000000000dd)");
    rc = sk_th_reconcile(e, ok, out, sizeof out, (const char *const[]){"--repair", NULL});
    CHECK_MSG(rc == 0, "exit %d:\n%s", rc, out);
    CHECK_EQ(sk_th_audit_count(e, ok, "clear_store_refused"), 1);
    CHECK_EQ(sk_th_reconcile(e, 0, out, sizeof out, NULL), 0);
    sk_th_redis_stop(&rs, 1);
}

BACKEND_TEST(orders_still_in_the_stream_are_backlog_not_lost)
{
    uint64_t aid = sk_th_env_activity(e, 10, 1, 1, 60);
    for (uint64_t u = 1; u <= 3; u++)
        buy(e, aid, u, 1, NULL);
    static char out[65536];
    /* No worker yet: the group preheat made has delivered nothing, so all
     * three are undelivered. */
    int rc = sk_th_reconcile(e, aid, out, sizeof out, NULL);
    CHECK_MSG(rc == 0, "exit %d:\n%s", rc, out);
    HAS(out, "3 not yet in the DB");
    /* A consumer took them but never acknowledged them: pending. */
    struct sk_keys k;
    sk_keys_for(&k, aid);
    sk_th_redis_do(e, "XREADGROUP GROUP %s crashed COUNT 2 STREAMS %s >", SK_WORKER_GROUP, k.orders,
                   NULL);
    rc = sk_th_reconcile(e, aid, out, sizeof out, (const char *const[]){"--json", NULL});
    CHECK_MSG(rc == 0, "exit %d:\n%s", rc, out);
    json_error_t jerr;
    json_t *j = json_loads(strchr(out, '{'), 0, &jerr);
    CHECK_MSG(j, "json: %s:\n%s", jerr.text, out);
    json_t *a = json_array_get(json_object_get(j, "activities"), 0);
    json_t *redis = json_object_get(a, "redis");
    CHECK_EQ(json_integer_value(json_object_get(redis, "pending")), 2);
    CHECK_EQ(json_integer_value(json_object_get(redis, "undelivered")), 1);
    CHECK_EQ(json_integer_value(json_object_get(redis, "backlog_orders")), 3);
    CHECK(json_is_true(json_object_get(j, "consistent")));
    json_decref(j);
    /* The worker persists the undelivered one; the two pending on the
     * crashed consumer wait for their claim time: still backlog. */
    persist(e);
    rc = sk_th_reconcile(e, aid, out, sizeof out, NULL);
    CHECK_MSG(rc == 0, "exit %d:\n%s", rc, out);
    HAS(out, "2 not yet in the DB");
    sk_th_env_persist(e, "reconcile-test", 0); /* claims what "crashed" left pending */
    rc = sk_th_reconcile(e, aid, out, sizeof out, NULL);
    CHECK_MSG(rc == 0, "exit %d:\n%s", rc, out);
    HAS(out, "backlog 0 (pending 0, undelivered 0, 0 not yet in the DB)");
}

/* An order on its way to the DB for longer than the bound is drift
 * (stale): undelivered or pending on a consumer, and the binary exits 1;
 * once persisted, nothing is. */
BACKEND_TEST(orders_waiting_longer_than_the_bound_are_stale_drift)
{
    uint64_t aid = sk_th_env_activity(e, 10, 1, 1, 60);
    char oids[3][SK_ORDER_ID_MAX];
    for (uint64_t u = 1; u <= 3; u++)
        buy(e, aid, u, 1, oids[u - 1]);
    struct sk_keys k;
    sk_keys_for(&k, aid);
    sk_th_redis_do(e, "XREADGROUP GROUP %s stuck COUNT 1 STREAMS %s >", SK_WORKER_GROUP, k.orders,
                   NULL);
    struct sk_reconcile_report rep;
    CHECK_EQ(sk_reconcile_activity(e->st, e->r, aid, NULL, &rep), 0);
    CHECK(rep.consistent); /* just admitted: on its way */
    sk_reconcile_report_free(&rep);
    struct sk_reconcile_opts o;
    sk_reconcile_opts_init(&o);
    o.now_ms = sk_wall_ms() + 2 * SK_RECONCILE_STALE_AFTER_MS;
    CHECK_EQ(sk_reconcile_activity(e->st, e->r, aid, &o, &rep), 0);
    CHECK(!rep.consistent);
    CHECK_EQ(rep.found[SK_DRIFT_STALE], 3);
    CHECK_EQ(rep.total, 3);
    CHECK_STR(rep.drift[0].order.order_id, oids[0]);
    CHECK(strstr(rep.drift[0].text, "pending") != NULL);
    CHECK(strstr(rep.drift[1].text, "never delivered") != NULL);
    sk_reconcile_report_free(&rep);
    o.stale_after_ms = 0; /* not checked */
    CHECK_EQ(sk_reconcile_activity(e->st, e->r, aid, &o, &rep), 0);
    CHECK(rep.consistent);
    sk_reconcile_report_free(&rep);
    /* the binary, with a bound of a second: exit 1 once they are older */
    static char out[65536];
    const char *const one[] = {"--stale-after", "1", NULL};
    int64_t by = sk_mono_ms() + 10000;
    int rc;
    while ((rc = sk_th_reconcile(e, aid, out, sizeof out, one)) == 0 && sk_mono_ms() < by)
        ;
    CHECK_MSG(rc == 1, "exit %d:\n%s", rc, out);
    HAS(out, "DRIFT stale: order");
    HAS(out, "still not in the DB");
    /* persisted (the pending one claimed): consistent, even with the bound */
    sk_th_env_persist(e, "reconcile-test", 0);
    rc = sk_th_reconcile(e, aid, out, sizeof out, one);
    CHECK_MSG(rc == 0, "exit %d:\n%s", rc, out);
}

BACKEND_TEST(a_cancel_in_progress_is_not_drift_but_an_old_one_is)
{
    char oids[7][SK_ORDER_ID_MAX];
    uint64_t aid = sale(e, oids);
    int prev;
    /* Cancelled in the DB just now, release not run yet: in progress. */
    CHECK_EQ(sk_store_order_cancel(e->st, oids[2], sk_wall_ms(), &prev), 0);
    struct sk_reconcile_report rep;
    CHECK_EQ(sk_reconcile_activity(e->st, e->r, aid, NULL, &rep), 0);
    CHECK(rep.consistent);
    CHECK_EQ(rep.db.owed_recent, 1);
    sk_reconcile_report_free(&rep);
    /* The same seen a minute later is drift. */
    sk_th_reconcile_later(e, aid, 60000, &rep);
    CHECK(!rep.consistent);
    CHECK_EQ(rep.found[SK_DRIFT_CANCELLED_NOT_RELEASED], 1);
    CHECK_EQ(rep.total, 1);
    CHECK_STR(rep.drift[0].order.order_id, oids[2]);
    sk_reconcile_report_free(&rep);
}

/* ---- each drift, found and repaired -------------------------------------------- */

/* sale(), then the row of its order victim deleted from the DB. */
static uint64_t sale_then_delete(struct sk_th_env *e, char oids[7][SK_ORDER_ID_MAX], int victim)
{
    uint64_t aid = sale(e, oids);
    char sql[256];
    snprintf(sql, sizeof sql, "DELETE FROM orders WHERE order_id = '%s'", oids[victim]);
    sk_th_be_sql(e, sql);
    return aid;
}

BACKEND_TEST(deleted_order_row_is_lost_and_repair_restores_it)
{
    char oids[7][SK_ORDER_ID_MAX];
    uint64_t aid = sale_then_delete(e, oids, 3);
    char line[200];
    snprintf(line, sizeof line, "DRIFT lost_order: order %s (user 4, 2 unit(s))", oids[3]);
    static char out[65536];
    CHECK_EQ(sk_th_reconcile(e, aid, out, sizeof out, NULL), 1);
    HAS(out, "DRIFT db_stock"); /* the row's units are missing from the sum too */
    sk_th_expect_repaired(e, aid, line, "repair_restore_order", 1);
    struct sk_order o = get_order(e, oids[3]);
    CHECK_EQ(o.status, SK_ORDER_CREATED);
    CHECK_EQ(o.user_id, 4);
    CHECK_EQ(o.quantity, 2);
    CHECK(o.created_ms > 0);
    CHECK_EQ(o.pay_deadline_ms, o.created_ms + 60000);
}

BACKEND_TEST(deleted_row_of_a_released_order_comes_back_cancelled)
{
    char oids[7][SK_ORDER_ID_MAX];
    uint64_t aid = sale_then_delete(e, oids, 1);
    char line[200];
    snprintf(line, sizeof line, "DRIFT lost_order: order %s (user 2, 2 unit(s), released)",
             oids[1]);
    sk_th_expect_repaired(e, aid, line, "repair_restore_order", 1);
    struct sk_order o = get_order(e, oids[1]);
    CHECK_EQ(o.status, SK_ORDER_CANCELLED);
    CHECK_EQ(sk_store_order_pay(e->st, oids[1], sk_wall_ms(), NULL), SK_ESTATE);
}

BACKEND_TEST(tampered_redis_stock_is_reported_and_repaired_from_the_buyers)
{
    char oids[7][SK_ORDER_ID_MAX];
    uint64_t aid = sale(e, oids);
    struct sk_keys k;
    sk_keys_for(&k, aid);
    sk_th_redis_do(e, "SET %s 3", k.stock, NULL, NULL); /* 3 units appear from nowhere */
    sk_th_expect_repaired(e, aid,
                          "DRIFT redis_invariant: Redis stock 3 + units held by buyers 10 = 13 != "
                          "initial 10",
                          "repair_redis_stock", 1);
    CHECK_EQ(redis_state(e, aid).remaining, 0);
    /* Lowered stock too (units vanish): given back, never above initial. */
    int prev;
    CHECK_EQ(sk_store_order_cancel(e->st, oids[4], sk_wall_ms(), &prev), 0);
    int rrc;
    CHECK_EQ(sk_stock_release(e->r, aid, oids[4], 5, 1, &rrc, NULL), 0); /* stock 1 */
    CHECK_EQ(sk_store_order_mark_released(e->st, oids[4], sk_wall_ms()), 0);
    sk_th_redis_do(e, "SET %s 0", k.stock, NULL, NULL);
    sk_th_expect_repaired(e, aid, "DRIFT redis_invariant: Redis stock 0 + units held by buyers 9",
                          "repair_redis_stock", 1);
    CHECK_EQ(redis_state(e, aid).remaining, 1);
}

BACKEND_TEST(tampered_db_stock_is_reported_and_recomputed)
{
    char oids[7][SK_ORDER_ID_MAX];
    uint64_t aid = sale(e, oids);
    CHECK_EQ(sk_store_activity_set_db_stock(e->st, aid, 4), 0);
    sk_th_expect_repaired(
        e, aid,
        "DRIFT db_stock: DB stock 4 != expected 0 = initial 10 - units of orders not "
        "cancelled 10",
        "repair_db_stock", 1);
    struct sk_activity a;
    CHECK_EQ(sk_store_activity_get(e->st, aid, &a), 0);
    CHECK_EQ(a.stock_db, 0);
}

BACKEND_TEST(dropped_ledger_entry_is_reported_and_restored_from_the_db)
{
    char oids[7][SK_ORDER_ID_MAX];
    uint64_t aid = sale(e, oids);
    struct sk_keys k;
    sk_keys_for(&k, aid);
    sk_th_redis_do(e, "HDEL %s %s", k.ledger, oids[2], NULL);
    static char out[65536];
    CHECK_EQ(sk_th_reconcile(e, aid, out, sizeof out, NULL), 1);
    HAS(out, "DRIFT user_count: user 3: the buyers hash holds 2 unit(s), the user's unreleased "
             "ledger entries 0");
    char line[200];
    snprintf(line, sizeof line, "DRIFT not_in_ledger: order %s (user 3, 2 unit(s), created)",
             oids[2]);
    sk_th_expect_repaired(e, aid, line, "repair_ledger_entry", 1);
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(e->r, &rep, "HGET %s %s", k.ledger, oids[2]), 0);
    CHECK(rep->type == REDIS_REPLY_STRING);
    CHECK_STR(rep->str, "3:2");
    freeReplyObject(rep);
    /* The restored entry works: the order can be cancelled and released. */
    struct sk_cancel_result res;
    CHECK_EQ(sk_order_cancel(e->st, e->r, oids[2], 3, sk_wall_ms(), &res), 0);
    CHECK_EQ(res.units_given, 2);
}

BACKEND_TEST(cancelled_but_not_released_is_repaired_by_releasing)
{
    char oids[7][SK_ORDER_ID_MAX];
    uint64_t aid = sale(e, oids);
    int prev;
    CHECK_EQ(sk_store_order_cancel(e->st, oids[5], sk_wall_ms() - 60000, &prev), 0);
    char line[200];
    snprintf(line, sizeof line,
             "DRIFT cancelled_not_released: order %s (user 6, 1 unit(s)) is cancelled in the DB",
             oids[5]);
    sk_th_expect_repaired(e, aid, line, "repair_release", 1);
    CHECK_EQ(redis_state(e, aid).remaining, 1);
}

BACKEND_TEST(released_but_still_created_is_repaired_by_cancelling_in_the_db)
{
    char oids[7][SK_ORDER_ID_MAX];
    uint64_t aid = sale(e, oids);
    int rrc;
    CHECK_EQ(sk_stock_release(e->r, aid, oids[4], 5, 1, &rrc, NULL), 0); /* Redis only */
    CHECK_EQ(rrc, SK_RC_RELEASED);
    char line[200];
    snprintf(line, sizeof line, "DRIFT released_not_cancelled: order %s (user 5, 1 unit(s))",
             oids[4]);
    sk_th_expect_repaired(e, aid, line, "repair_cancel_released", 1);
    CHECK_EQ(get_order(e, oids[4]).status, SK_ORDER_CANCELLED);
    CHECK_EQ(sk_store_order_pay(e->st, oids[4], sk_wall_ms(), NULL), SK_ESTATE);
}

BACKEND_TEST(paid_and_released_is_serious_and_never_repaired)
{
    char oids[7][SK_ORDER_ID_MAX];
    uint64_t aid = sale(e, oids);
    int rrc;
    CHECK_EQ(sk_stock_release(e->r, aid, oids[0], 1, 2, &rrc, NULL), 0); /* oids[0] is paid */
    CHECK_EQ(rrc, SK_RC_RELEASED);
    static char out[65536];
    CHECK_EQ(sk_th_reconcile(e, aid, out, sizeof out, NULL), 1);
    char line[200];
    snprintf(line, sizeof line, "DRIFT paid_released: SERIOUS: order %s", oids[0]);
    HAS(out, line);
    CHECK_EQ(sk_th_reconcile(e, aid, out, sizeof out, (const char *const[]){"--repair", NULL}), 1);
    HAS(out, "1 drift(s) found, 1 remain after repair");
    struct sk_audit *rows;
    size_t n;
    CHECK_EQ(sk_store_audit_list(e->st, aid, &rows, &n), 0);
    CHECK_EQ(n, 0);
    CHECK_EQ(get_order(e, oids[0]).status, SK_ORDER_PAID);
}

BACKEND_TEST(redis_stock_is_left_alone_when_the_buyers_hash_cannot_prove_it)
{
    char oids[7][SK_ORDER_ID_MAX];
    uint64_t aid = sale(e, oids);
    struct sk_keys k;
    sk_keys_for(&k, aid);
    sk_th_redis_do(e, "SET %s 2", k.stock, NULL, NULL);
    sk_th_redis_do(e, "HINCRBY %s 5 1", k.buyers, NULL, NULL);
    static char out[65536];
    CHECK_EQ(sk_th_reconcile(e, aid, out, sizeof out, (const char *const[]){"--repair", NULL}), 1);
    HAS(out, "DRIFT redis_invariant");
    HAS(out, "DRIFT user_count: user 5: the buyers hash holds 2 unit(s)");
    HAS(out, "NOT REPAIRED redis_invariant: Redis stock 2 left alone: the buyers hash disagrees");
    CHECK_EQ(redis_state(e, aid).remaining, 2);
    /* Put it back for the next tests' sake. */
    sk_th_redis_do(e, "SET %s 0", k.stock, NULL, NULL);
    sk_th_redis_do(e, "HINCRBY %s 5 -1", k.buyers, NULL, NULL);
    CHECK_EQ(sk_th_reconcile(e, aid, out, sizeof out, NULL), 0);
}

BACKEND_TEST(several_drifts_at_once_are_all_reported_and_repaired)
{
    char oids[7][SK_ORDER_ID_MAX];
    uint64_t aid = sale(e, oids);
    struct sk_keys k;
    sk_keys_for(&k, aid);
    char sql[256];
    snprintf(sql, sizeof sql, "DELETE FROM orders WHERE order_id = '%s'", oids[6]);
    sk_th_be_sql(e, sql);
    sk_th_redis_do(e, "HDEL %s %s", k.ledger, oids[3], NULL);
    sk_th_redis_do(e, "SET %s 5", k.stock, NULL, NULL);
    CHECK_EQ(sk_store_activity_set_db_stock(e->st, aid, 7), 0);
    static char out[65536];
    CHECK_EQ(sk_th_reconcile(e, aid, out, sizeof out, (const char *const[]){"--json", NULL}), 1);
    json_error_t jerr;
    json_t *j = json_loads(strchr(out, '{'), 0, &jerr);
    CHECK_MSG(j, "json: %s:\n%s", jerr.text, out);
    CHECK(json_is_false(json_object_get(j, "consistent")));
    json_t *a = json_array_get(json_object_get(j, "activities"), 0);
    json_t *c = json_object_get(a, "drift_counts");
    CHECK_EQ(json_integer_value(json_object_get(c, "lost_order")), 1);
    CHECK_EQ(json_integer_value(json_object_get(c, "not_in_ledger")), 1);
    CHECK_EQ(json_integer_value(json_object_get(c, "redis_invariant")), 1);
    CHECK_EQ(json_integer_value(json_object_get(c, "db_stock")), 1);
    CHECK_EQ(json_integer_value(json_object_get(c, "user_count")), 1);
    CHECK_EQ(json_array_size(json_object_get(a, "drift")), 5);
    json_decref(j);
    CHECK_EQ(
        sk_th_reconcile(e, aid, out, sizeof out, (const char *const[]){"--repair", "--json", NULL}),
        0);
    j = json_loads(strchr(out, '{'), 0, &jerr);
    CHECK_MSG(j, "json: %s:\n%s", jerr.text, out);
    a = json_array_get(json_object_get(j, "activities"), 0);
    CHECK(json_is_true(json_object_get(j, "consistent")));
    CHECK_EQ(json_integer_value(json_object_get(a, "remaining_total")), 0);
    CHECK_EQ(json_integer_value(json_object_get(a, "repair_failures")), 0);
    json_decref(j);
    CHECK_EQ(sk_th_reconcile(e, aid, out, sizeof out, NULL), 0);
    CHECK_EQ(redis_state(e, aid).remaining, 0);
}

/* ---- usage -------------------------------------------------------------------- */

SK_TEST(reconcile_bad_flags_exit_2_and_change_nothing)
{
    static char out[8192];
    const char *const bad[][4] = {
        {"reconcile", "--bogus", NULL},
        {"reconcile", "--activity", NULL},
        {"reconcile", "--activity", "abc", NULL},
        {"reconcile", "--activity", "0", NULL},
        {"reconcile", "--max-lines", "0", NULL},
        {"reconcile", "--stale-after", "-1", NULL},
        {"reconcile", "--stale-after", "soon", NULL},
        {"reconcile", "--db", "nonsense", NULL},
        {"reconcile", "--redis", "http://x", NULL},
        {"reconcile", "extra", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = sk_th_run_seckill(out, sizeof out, NULL, bad[i]);
        CHECK_MSG(rc == 2, "%s %s: exit %d:\n%s", bad[i][1], bad[i][2] ? bad[i][2] : "", rc, out);
        HAS(out, "seckill: reconcile");
    }
    CHECK_EQ(sk_th_run_seckill(out, sizeof out, NULL,
                               (const char *const[]){"reconcile", "--help", NULL}),
             0);
    HAS(out, "--repair");
    /* An activity neither in the DB nor in Redis: bad argument. */
    struct sk_th_env e;
    sk_th_env_init(&e, 0, "rec.db", sk_th_redis_url());
    CHECK_EQ(sk_th_reconcile(&e, 999999999999ULL, out, sizeof out, NULL), 2);
    HAS(out, "neither in the database nor in Redis");
    sk_th_env_done(&e);
}

SK_TEST(reconcile_exits_1_when_redis_is_unreachable)
{
    struct sk_th_env e;
    sk_th_env_init(&e, 0, "rec.db", sk_th_redis_url());
    uint64_t aid = sk_th_env_activity(&e, 5, 1, 1, 60);
    char url[64], id[32];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", sk_th_free_port());
    snprintf(id, sizeof id, "%" PRIu64, aid);
    static char out[8192];
    int rc = sk_th_run_seckill(
        out, sizeof out, NULL,
        (const char *const[]){"reconcile", "--redis", url, "--db", e.spec, "--activity", id, NULL});
    CHECK_MSG(rc == 1, "exit %d:\n%s", rc, out);
    HAS(out, "seckill: reconcile: activity");
    sk_th_env_done(&e);
}

/* ---- a live sale ---------------------------------------------------------------- */

BACKEND_TEST(a_live_sale_with_worker_and_sweeper_never_shows_drift)
{
    enum { STOCK = 40, WANTED = 200 };
    uint64_t aid = sk_th_env_activity(e, STOCK, 1, 1, 60);
    struct sk_th_live l;
    sk_th_live_start(&l, e, aid, "live", 0);
    /* Buyers arrive one by one until released units were sold again
     * WANTED times over (bounded). */
    size_t accepted = sk_th_live_buy(&l, WANTED, 20000);
    /* Every admitted order persisted, then no drift was ever seen. */
    sk_th_live_finish(&l, accepted);
    CHECK(accepted > STOCK); /* units were released and sold again */
    /* Settled (no cancel half done): a final check. */
    static char out[65536];
    int rc = sk_th_reconcile(e, aid, out, sizeof out, NULL);
    CHECK_MSG(rc == 0, "exit %d:\n%s", rc, out);
}
