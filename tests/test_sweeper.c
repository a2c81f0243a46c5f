/* test_sweeper.c - payment timeouts and the shared cancel path, against the
 * run's real Redis and a real database: each behaviour runs on SQLite
 * (sweeper_sqlite_<name>) and on PostgreSQL (sweeper_pg_<name>).
 *
 * Purchases go through the admission script (sk_th_buy), orders
 * reach the DB through the real order worker (in-process, once mode), and
 * time is moved by passing a future now_ms to sk_sweeper_pass, so no test
 * waits for a deadline. Waits that remain poll their condition, bounded. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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
#include "spawn/redis_spawn.h"
#include "store/store.h"
#include "support/backend_env.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/mysql_harness.h"
#include "support/pg_harness.h"

SK_TH_PG_USED
SK_TH_MY_USED

#define PAY_TIMEOUT_S 60

/* One purchase that must be admitted; its order id into oid. */
static void buy(struct sk_th_env *e, uint64_t aid, uint64_t user, int64_t qty, char *oid)
{
    struct sk_admission a;
    CHECK_EQ(sk_th_buy(e->r, aid, user, qty, &a, NULL), 0);
    CHECK_MSG(a.rc == SK_RC_OK, "purchase by %" PRIu64 ": %s", user, sk_rc_name(a.rc));
    if (oid) snprintf(oid, SK_ORDER_ID_MAX, "%s", a.order_id);
}

static int try_buy(struct sk_th_env *e, uint64_t aid, uint64_t user, int64_t qty)
{
    struct sk_admission a;
    CHECK_EQ(sk_th_buy(e->r, aid, user, qty, &a, NULL), 0);
    return a.rc;
}

/* Drains every stream into the DB with the real worker (once mode). */
static void persist(struct sk_th_env *e)
{
    struct sk_worker_opts o;
    sk_worker_opts_init(&o);
    o.redis_url = e->redis_url;
    o.db_spec = e->spec;
    o.consumer = "sweeper-test";
    o.once = 1;
    CHECK_EQ(sk_th_worker_run(&o).stock_failures, 0);
}

/* An activity of `stock` units (limit and max per order `limit`) with
 * user ua's order of qa units (its id into a) and, when ub is not 0, user
 * ub's of qb (into b), both persisted. */
static uint64_t orders_persisted(struct sk_th_env *e, int64_t stock, int64_t limit, uint64_t ua,
                                 int64_t qa, char *a, uint64_t ub, int64_t qb, char *b)
{
    uint64_t aid = sk_th_env_activity(e, stock, limit, limit, PAY_TIMEOUT_S);
    buy(e, aid, ua, qa, a);
    if (ub) buy(e, aid, ub, qb, b);
    persist(e);
    return aid;
}

static sk_sweeper *new_sweeper(struct sk_th_env *e, int batch)
{
    struct sk_sweeper_opts o;
    sk_sweeper_opts_init(&o);
    o.redis_url = sk_th_redis_url();
    o.db_spec = e->spec;
    if (batch) o.batch = batch;
    sk_sweeper *sw;
    char err[512];
    CHECK_MSG(sk_sweeper_new(&sw, &o, err, sizeof err) == 0, "sweeper: %s", err);
    return sw;
}

static struct sk_sweep_result pass(sk_sweeper *sw, int64_t now_ms)
{
    struct sk_sweep_result res;
    int rc = sk_sweeper_pass(sw, now_ms, &res);
    CHECK_MSG(rc == 0, "pass: %d %s", rc, sk_sweeper_errstr(sw));
    CHECK_EQ(res.errors, 0);
    return res;
}

static struct sk_stock_state redis_state(struct sk_th_env *e, uint64_t aid)
{
    struct sk_stock_state s;
    CHECK_EQ(sk_stock_state(e->r, aid, &s), 0);
    CHECK(s.exists);
    /* The invariant every script keeps, and no release above initial. */
    CHECK_MSG(s.remaining + s.held == s.initial,
              "stock %" PRId64 " + held %" PRId64 " != initial %" PRId64, s.remaining, s.held,
              s.initial);
    CHECK(s.remaining >= 0 && s.remaining <= s.initial);
    return s;
}

static struct sk_order get_order(struct sk_th_env *e, const char *oid)
{
    struct sk_order o;
    CHECK_MSG(sk_store_order_get(e->st, oid, &o) == 0, "get %s: %s", oid, sk_store_errstr(e->st));
    return o;
}

static int64_t db_stock(struct sk_th_env *e, uint64_t aid)
{
    struct sk_activity a;
    CHECK_EQ(sk_store_activity_get(e->st, aid, &a), 0);
    return a.stock_db;
}

/* The ledger entry of an order ("" when absent). */
static void ledger(struct sk_th_env *e, uint64_t aid, const char *oid, char *out, size_t cap)
{
    struct sk_keys k;
    sk_keys_for(&k, aid);
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(e->r, &rep, "HGET %s %s", k.ledger, oid), 0);
    snprintf(out, cap, "%s", rep->type == REDIS_REPLY_STRING ? rep->str : "");
    freeReplyObject(rep);
}

static int is_released(struct sk_th_env *e, uint64_t aid, const char *oid)
{
    char v[64];
    ledger(e, aid, oid, v, sizeof v);
    CHECK_MSG(v[0], "order %s not in the ledger", oid);
    return strstr(v, ":released") != NULL;
}

static size_t owed(struct sk_th_env *e)
{
    struct sk_order out[64];
    size_t n = 0;
    CHECK_EQ(sk_store_orders_unreleased(e->st, NULL, 64, out, &n), 0);
    return n;
}

static void check_consistent(struct sk_th_env *e, uint64_t aid)
{
    struct sk_reconcile_report rep;
    int rc = sk_reconcile_activity(e->st, e->r, aid, NULL, &rep);
    CHECK_MSG(rc == 0, "reconcile: %d", rc);
    if (!rep.consistent) sk_reconcile_print(stderr, &rep, 10);
    CHECK(rep.consistent);
    sk_reconcile_report_free(&rep);
}

/* ---- the store calls the sweeper relies on --------------------------------- */

#define BACKEND_TEST(name) SK_BACKEND_TEST(sweeper, "sweep.db", name)

BACKEND_TEST(store_cancel_gives_units_back_to_db_stock_once_and_mark_released_is_conditional)
{
    char a[SK_ORDER_ID_MAX], b[SK_ORDER_ID_MAX];
    uint64_t aid = orders_persisted(e, 5, 3, 1, 3, a, 2, 2, b);
    CHECK_EQ(db_stock(e, aid), 0);
    int64_t stock, expected;
    CHECK_EQ(sk_store_db_stock_check(e->st, aid, &stock, &expected), 0);
    CHECK_EQ(stock, 0);
    CHECK_EQ(expected, 0);

    /* Release owed only once the order is cancelled. */
    CHECK_EQ(sk_store_order_mark_released(e->st, a, 1), SK_ESTATE);
    CHECK_EQ(sk_store_order_mark_released(e->st, "1-1-1", 1), SK_ENOTFOUND);
    int prev;
    CHECK_EQ(sk_store_order_cancel(e->st, a, 1000, &prev), 0);
    CHECK_EQ(prev, SK_ORDER_CREATED);
    CHECK_EQ(db_stock(e, aid), 3); /* the units are back in the DB stock */
    CHECK_EQ(sk_store_order_cancel(e->st, a, 2000, &prev), 0);
    CHECK_EQ(prev, SK_ORDER_CANCELLED);
    CHECK_EQ(db_stock(e, aid), 3); /* not twice */
    CHECK_EQ(sk_store_db_stock_check(e->st, aid, &stock, &expected), 0);
    CHECK_EQ(expected, 3);

    /* Owed until marked; marking twice keeps the first time. */
    struct sk_order out[4];
    size_t n;
    CHECK_EQ(sk_store_orders_unreleased(e->st, NULL, 4, out, &n), 0);
    CHECK_EQ(n, 1);
    CHECK_STR(out[0].order_id, a);
    CHECK_EQ(sk_store_orders_unreleased(e->st, a, 4, out, &n), 0);
    CHECK_EQ(n, 0); /* paging: nothing after it */
    CHECK_EQ(sk_store_order_mark_released(e->st, a, 3000), 0);
    CHECK_EQ(sk_store_order_mark_released(e->st, a, 4000), 0);
    CHECK_EQ(owed(e), 0);
    sk_stock_release(e->r, aid, a, 1, 3, &prev, NULL); /* keep Redis in step */
}

BACKEND_TEST(store_db_stock_repair_recomputes_atomically_with_one_audit_row)
{
    uint64_t aid = sk_th_env_activity(e, 10, 2, 2, PAY_TIMEOUT_S);
    for (uint64_t u = 1; u <= 4; u++)
        buy(e, aid, u, 1, NULL);
    persist(e);
    int64_t before, after;
    CHECK_EQ(sk_store_db_stock_repair(e->st, aid, 1, &before, &after), 0);
    CHECK_EQ(before, 6);
    CHECK_EQ(after, 6); /* nothing to do: no audit row */
    struct sk_audit *rows;
    size_t n;
    CHECK_EQ(sk_store_audit_list(e->st, aid, &rows, &n), 0);
    CHECK_EQ(n, 0);
    CHECK_EQ(sk_store_activity_set_db_stock(e->st, aid, 9), 0);
    CHECK_EQ(sk_store_db_stock_repair(e->st, aid, 77, &before, &after), 0);
    CHECK_EQ(before, 9);
    CHECK_EQ(after, 6);
    CHECK_EQ(db_stock(e, aid), 6);
    CHECK_EQ(sk_store_audit_list(e->st, aid, &rows, &n), 0);
    CHECK_EQ(n, 1);
    CHECK_STR(rows[0].kind, "repair_db_stock");
    CHECK_EQ(rows[0].at_ms, 77);
    CHECK_MSG(strstr(rows[0].detail, "9 -> 6") != NULL, "detail: %s", rows[0].detail);
    free(rows);
    CHECK_EQ(sk_store_db_stock_repair(e->st, aid + 1000000, 1, &before, &after), SK_ENOTFOUND);
}

BACKEND_TEST(store_order_restore_inserts_without_touching_db_stock_and_audits)
{
    char oid[SK_ORDER_ID_MAX];
    uint64_t aid = orders_persisted(e, 10, 2, 5, 2, oid, 0, 0, NULL);
    struct sk_order o = get_order(e, oid);
    CHECK_EQ(sk_store_order_restore(e->st, &o, 5, "again"), SK_EEXIST);
    struct sk_order n = o;
    snprintf(n.stream_id, sizeof n.stream_id, "1-7");
    snprintf(n.order_id, sizeof n.order_id, "%" PRIu64 "-1-7", aid);
    n.status = SK_ORDER_CANCELLED;
    n.created_ms = 1;
    CHECK_EQ(sk_store_order_restore(e->st, &n, 99, "restored for the test"), 0);
    struct sk_order got = get_order(e, n.order_id);
    CHECK_EQ(got.status, SK_ORDER_CANCELLED);
    CHECK_EQ(got.cancelled_ms, 99);
    CHECK_EQ(got.pay_deadline_ms, 1 + PAY_TIMEOUT_S * 1000);
    CHECK_EQ(got.user_id, 5);
    CHECK_EQ(owed(e), 0); /* restored cancelled = released already */
    CHECK_EQ(db_stock(e, aid), 8);
    n.status = SK_ORDER_PAID;
    CHECK_EQ(sk_store_order_restore(e->st, &n, 99, "x"), SK_EINVAL);
    struct sk_audit *rows;
    size_t cnt;
    CHECK_EQ(sk_store_audit_list(e->st, aid, &rows, &cnt), 0);
    CHECK_EQ(cnt, 1);
    CHECK_STR(rows[0].kind, "repair_restore_order");
    CHECK_STR(rows[0].detail, "restored for the test");
    free(rows);
}

/* ---- the sweeper -------------------------------------------------------------- */

BACKEND_TEST(unpaid_order_past_its_deadline_is_cancelled_and_its_stock_is_bought_again)
{
    uint64_t aid = sk_th_env_activity(e, 1, 1, 1, PAY_TIMEOUT_S);
    char first[SK_ORDER_ID_MAX], second[SK_ORDER_ID_MAX];
    buy(e, aid, 1, 1, first);
    persist(e);
    CHECK_EQ(try_buy(e, aid, 2, 1), SK_RC_SOLD_OUT);
    struct sk_order o = get_order(e, first);
    sk_sweeper *sw = new_sweeper(e, 0);

    /* Before the deadline nothing happens. */
    struct sk_sweep_result r = pass(sw, o.pay_deadline_ms - 1);
    CHECK_EQ(r.expired, 0);
    CHECK_EQ(get_order(e, first).status, SK_ORDER_CREATED);

    r = pass(sw, o.pay_deadline_ms + 1);
    CHECK_EQ(r.expired, 1);
    CHECK_EQ(r.cancelled, 1);
    CHECK_EQ(r.released, 1);
    CHECK_EQ(r.units_released, 1);
    o = get_order(e, first);
    CHECK_EQ(o.status, SK_ORDER_CANCELLED);
    CHECK_EQ(o.cancelled_ms, o.pay_deadline_ms + 1);
    CHECK(is_released(e, aid, first));
    CHECK_EQ(owed(e), 0);
    CHECK_EQ(redis_state(e, aid).remaining, 1);

    /* Someone else buys the unit, and it persists without a stock failure
     * (the cancel gave the unit back to the DB stock too). */
    buy(e, aid, 2, 1, second);
    persist(e);
    CHECK_EQ(get_order(e, second).status, SK_ORDER_CREATED);
    CHECK_EQ(db_stock(e, aid), 0);
    struct sk_order_counts c;
    CHECK_EQ(sk_store_orders_count(e->st, aid, &c), 0);
    CHECK_EQ(c.orders[SK_ORDER_CANCELLED], 1);
    CHECK_EQ(c.orders[SK_ORDER_CREATED], 1);
    CHECK_EQ(c.stock_failures, 0);

    /* A second pass at the same time finds nothing more. */
    r = pass(sw, o.pay_deadline_ms + 1);
    CHECK_EQ(r.expired, 0);
    CHECK_EQ(r.cancelled, 0);
    struct sk_sweeper_stats st;
    sk_sweeper_stats(sw, &st);
    CHECK_EQ(st.passes, 3);
    CHECK_EQ(st.cancelled, 1);
    CHECK_EQ(st.units_released, 1);
    sk_sweeper_free(sw);
    check_consistent(e, aid);
}

BACKEND_TEST(late_payment_after_the_timeout_is_refused_and_the_units_stay_on_sale)
{
    char oid[SK_ORDER_ID_MAX];
    uint64_t aid = orders_persisted(e, 3, 3, 7, 3, oid, 0, 0, NULL);
    sk_sweeper *sw = new_sweeper(e, 0);
    struct sk_sweep_result r = pass(sw, get_order(e, oid).pay_deadline_ms + 1000);
    CHECK_EQ(r.cancelled, 1);
    CHECK_EQ(r.units_released, 3);
    int status = -1;
    CHECK_EQ(sk_store_order_pay(e->st, oid, sk_wall_ms(), &status), SK_ESTATE);
    CHECK_EQ(status, SK_ORDER_CANCELLED);
    CHECK_EQ(get_order(e, oid).status, SK_ORDER_CANCELLED);
    CHECK_EQ(redis_state(e, aid).remaining, 3);
    CHECK_EQ(db_stock(e, aid), 3);
    sk_sweeper_free(sw);
    check_consistent(e, aid);
}

BACKEND_TEST(paid_order_is_never_cancelled_by_the_sweeper)
{
    char paid[SK_ORDER_ID_MAX], unpaid[SK_ORDER_ID_MAX];
    uint64_t aid = orders_persisted(e, 2, 1, 1, 1, paid, 2, 1, unpaid);
    CHECK_EQ(sk_store_order_pay(e->st, paid, sk_wall_ms(), NULL), 0);
    sk_sweeper *sw = new_sweeper(e, 0);
    struct sk_sweep_result r = pass(sw, sk_wall_ms() + 86400000LL);
    CHECK_EQ(r.expired, 1);
    CHECK_EQ(r.cancelled, 1);
    CHECK_EQ(get_order(e, paid).status, SK_ORDER_PAID);
    CHECK(!is_released(e, aid, paid));
    CHECK(is_released(e, aid, unpaid));
    CHECK_EQ(redis_state(e, aid).remaining, 1);
    sk_sweeper_free(sw);
    check_consistent(e, aid);
}

BACKEND_TEST(expired_orders_beyond_one_batch_are_all_cancelled_in_one_pass)
{
    uint64_t aid = sk_th_env_activity(e, 25, 1, 1, PAY_TIMEOUT_S);
    for (uint64_t u = 1; u <= 25; u++)
        buy(e, aid, u, 1, NULL);
    persist(e);
    sk_sweeper *sw = new_sweeper(e, 4); /* 7 batches */
    struct sk_sweep_result r = pass(sw, sk_wall_ms() + 86400000LL);
    CHECK_EQ(r.expired, 25);
    CHECK_EQ(r.cancelled, 25);
    CHECK_EQ(r.units_released, 25);
    CHECK_EQ(redis_state(e, aid).remaining, 25);
    CHECK_EQ(db_stock(e, aid), 25);
    sk_sweeper_free(sw);
    check_consistent(e, aid);
}

BACKEND_TEST(double_cancel_releases_once)
{
    char oid[SK_ORDER_ID_MAX];
    uint64_t aid = orders_persisted(e, 4, 2, 9, 2, oid, 0, 0, NULL);
    struct sk_cancel_result res;
    CHECK_EQ(sk_order_cancel(e->st, e->r, oid, 9, sk_wall_ms(), &res), 0);
    CHECK_EQ(res.cancelled, 1);
    CHECK_EQ(res.released, 1);
    CHECK_EQ(res.release_pending, 0);
    CHECK_EQ(res.units_given, 2);
    CHECK_EQ(res.prev_status, SK_ORDER_CREATED);
    CHECK_EQ(redis_state(e, aid).remaining, 4);

    CHECK_EQ(sk_order_cancel(e->st, e->r, oid, 9, sk_wall_ms(), &res), 0);
    CHECK_EQ(res.cancelled, 0);
    CHECK_EQ(res.released, 0);
    CHECK_EQ(res.prev_status, SK_ORDER_CANCELLED);
    CHECK_EQ(res.status, SK_ORDER_CANCELLED);
    struct sk_stock_state s = redis_state(e, aid);
    CHECK_EQ(s.remaining, 4);
    CHECK_EQ(s.released, 2); /* units given back, once */
    /* The script refuses a second release too, and a sweeper pass has
     * nothing owed. */
    int rrc;
    int64_t given;
    CHECK_EQ(sk_stock_release(e->r, aid, oid, 9, 2, &rrc, &given), 0);
    CHECK_EQ(rrc, SK_RC_ALREADY_RELEASED);
    sk_sweeper *sw = new_sweeper(e, 0);
    struct sk_sweep_result r = pass(sw, sk_wall_ms());
    CHECK_EQ(r.repaired, 0);
    CHECK_EQ(r.released, 0);
    sk_sweeper_free(sw);
    CHECK_EQ(redis_state(e, aid).remaining, 4);
    CHECK_EQ(db_stock(e, aid), 4);
    check_consistent(e, aid);
}

BACKEND_TEST(cancel_checks_the_buyer_and_refuses_a_paid_order)
{
    char a[SK_ORDER_ID_MAX], b[SK_ORDER_ID_MAX];
    uint64_t aid = orders_persisted(e, 4, 2, 1, 1, a, 2, 1, b);
    struct sk_cancel_result res;
    /* Another buyer's order is "not found"; nothing changes. */
    CHECK_EQ(sk_order_cancel(e->st, e->r, a, 2, sk_wall_ms(), &res), SK_ENOTFOUND);
    CHECK_EQ(get_order(e, a).status, SK_ORDER_CREATED);
    CHECK_EQ(sk_order_cancel(e->st, e->r, "nope", 0, sk_wall_ms(), &res), SK_ENOTFOUND);
    CHECK_EQ(sk_order_cancel(e->st, e->r, "", 0, sk_wall_ms(), &res), SK_EINVAL);
    /* Paid: refused, units stay held. */
    CHECK_EQ(sk_store_order_pay(e->st, b, sk_wall_ms(), NULL), 0);
    CHECK_EQ(sk_order_cancel(e->st, e->r, b, 2, sk_wall_ms(), &res), SK_ESTATE);
    CHECK_EQ(res.status, SK_ORDER_PAID);
    CHECK_EQ(res.released, 0);
    CHECK(!is_released(e, aid, b));
    /* An operator (user 0) may cancel anyone's order. */
    CHECK_EQ(sk_order_cancel(e->st, e->r, a, 0, sk_wall_ms(), &res), 0);
    CHECK_EQ(res.cancelled, 1);
    CHECK_EQ(res.units_given, 1);
    CHECK_EQ(redis_state(e, aid).remaining, 3);
    check_consistent(e, aid);
}

BACKEND_TEST(crash_gap_cancel_in_db_without_release_is_repaired_by_the_next_pass)
{
    char a[SK_ORDER_ID_MAX], b[SK_ORDER_ID_MAX];
    uint64_t aid = orders_persisted(e, 3, 1, 1, 1, a, 2, 1, b);
    /* The process "dies" right after the DB cancel: no release ran. */
    int prev;
    CHECK_EQ(sk_store_order_cancel(e->st, a, sk_wall_ms(), &prev), 0);
    CHECK_EQ(prev, SK_ORDER_CREATED);
    CHECK(!is_released(e, aid, a));
    CHECK_EQ(redis_state(e, aid).remaining, 1);
    CHECK_EQ(owed(e), 1);
    sk_sweeper *sw = new_sweeper(e, 0);
    struct sk_sweep_result r = pass(sw, sk_wall_ms());
    CHECK_EQ(r.repaired, 1);
    CHECK_EQ(r.units_released, 1);
    CHECK_EQ(r.cancelled, 0); /* b is not expired yet */
    CHECK(is_released(e, aid, a));
    CHECK_EQ(owed(e), 0);
    CHECK_EQ(redis_state(e, aid).remaining, 2);
    r = pass(sw, sk_wall_ms());
    CHECK_EQ(r.repaired, 0);
    CHECK_EQ(redis_state(e, aid).remaining, 2);
    sk_sweeper_free(sw);
    check_consistent(e, aid);
}

BACKEND_TEST(cancel_while_redis_is_down_stands_and_the_sweeper_releases_later)
{
    char oid[SK_ORDER_ID_MAX];
    uint64_t aid = orders_persisted(e, 2, 1, 4, 1, oid, 0, 0, NULL);
    char url[64], err[256];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", sk_th_free_port()); /* nobody there */
    sk_redis *dead;
    CHECK_EQ(sk_redis_new(&dead, url, 200, 200, err, sizeof err), 0);
    struct sk_cancel_result res;
    CHECK_EQ(sk_order_cancel(e->st, dead, oid, 4, sk_wall_ms(), &res), 0);
    sk_redis_free(dead);
    CHECK_EQ(res.cancelled, 1);
    CHECK_EQ(res.released, 0);
    CHECK_EQ(res.release_pending, 1);
    CHECK_EQ(get_order(e, oid).status, SK_ORDER_CANCELLED);
    CHECK_EQ(owed(e), 1);
    sk_sweeper *sw = new_sweeper(e, 0);
    struct sk_sweep_result r = pass(sw, sk_wall_ms());
    CHECK_EQ(r.repaired, 1);
    CHECK_EQ(redis_state(e, aid).remaining, 2);
    sk_sweeper_free(sw);
    check_consistent(e, aid);
}

/* A release Redis refuses (the order is not in the ledger) stays owed, is
 * counted, and does not hide the owed releases behind it. */
BACKEND_TEST(unreleasable_order_stays_owed_without_blocking_the_others)
{
    uint64_t aid = sk_th_env_activity(e, 5, 1, 1, PAY_TIMEOUT_S);
    char oid[4][SK_ORDER_ID_MAX];
    for (int i = 0; i < 4; i++)
        buy(e, aid, (uint64_t)i + 1, 1, oid[i]);
    persist(e);
    struct sk_keys k;
    sk_keys_for(&k, aid);
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(e->r, &rep, "HDEL %s %s", k.ledger, oid[0]), 0); /* first in id order */
    freeReplyObject(rep);
    int prev;
    for (int i = 0; i < 4; i++)
        CHECK_EQ(sk_store_order_cancel(e->st, oid[i], sk_wall_ms(), &prev), 0);
    sk_sweeper *sw = new_sweeper(e, 2); /* two owed per pass */
    struct sk_sweep_result r = pass(sw, sk_wall_ms());
    CHECK_EQ(r.unreleasable, 1);
    CHECK_EQ(r.repaired, 1);
    r = pass(sw, sk_wall_ms()); /* continues after the cursor */
    CHECK_EQ(r.repaired, 2);
    CHECK_EQ(owed(e), 1);
    for (int i = 1; i < 4; i++)
        CHECK(is_released(e, aid, oid[i]));
    sk_sweeper_free(sw);
    /* Put the ledger entry back so the run's Redis stays tidy. */
    CHECK_EQ(sk_redis_cmd(e->r, &rep, "HSET %s %s 1:1", k.ledger, oid[0]), 0);
    freeReplyObject(rep);
}

/* n orders bought one unit each by users 1..n and persisted, for two
 * racing processes. */
struct race_orders {
    const char *spec;
    int n;
    char (*oid)[SK_ORDER_ID_MAX];
};

static uint64_t race_orders_bought(struct sk_th_env *e, struct race_orders *ro)
{
    uint64_t aid = sk_th_env_activity(e, ro->n, 1, 1, PAY_TIMEOUT_S);
    for (int i = 0; i < ro->n; i++)
        buy(e, aid, (uint64_t)i + 1, 1, ro->oid[i]);
    persist(e);
    ro->spec = e->spec;
    return aid;
}

/* Blocks a racer until the test opens the gate (closes its end). */
static void race_gate(int gate_fd)
{
    char ch;
    while (read(gate_fd, &ch, 1) > 0) {
    }
}

/* One side of a race, run in a forked process: it calls race_gate(gate_fd)
 * once ready, then races, writing two numbers into out; 0, or the exit
 * code that says what failed. */
typedef int (*race_side)(int side, int gate_fd, const struct race_orders *ro, long out[2]);

/* Runs side 0 and side 1 of fn at once in two processes, opens the gate,
 * waits for both (each must exit 0) and returns their numbers by side. */
static void race_two(race_side fn, const struct race_orders *ro, long got[2][2])
{
    int gate[2], res_pipe[2];
    CHECK_EQ(pipe(gate), 0);
    CHECK_EQ(pipe(res_pipe), 0);
    pid_t kid[2];
    for (int side = 0; side < 2; side++) {
        kid[side] = fork();
        CHECK(kid[side] >= 0);
        if (kid[side] != 0) continue;
        close(gate[1]);
        long out[2] = {0, 0};
        int rc = fn(side, gate[0], ro, out);
        if (rc) _exit(rc);
        long msg[3] = {side, out[0], out[1]};
        if (write(res_pipe[1], msg, sizeof msg) != sizeof msg) _exit(5);
        _exit(0);
    }
    close(gate[0]);
    close(gate[1]); /* go */
    close(res_pipe[1]);
    for (int i = 0; i < 2; i++) {
        int status;
        CHECK_EQ(waitpid(kid[i], &status, 0), kid[i]);
        CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "racer %d exit %d", i,
                  WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        long msg[3];
        CHECK_EQ(read(res_pipe[0], msg, sizeof msg), (long)sizeof msg);
        got[msg[0]][0] = msg[1];
        got[msg[0]][1] = msg[2];
    }
    close(res_pipe[0]);
}

/* Side 0 pays every order, newest first; side 1 runs sweeper passes at a
 * time past every deadline. out[0]: the orders each side won. */
static int pay_or_sweep(int side, int gate_fd, const struct race_orders *ro, long out[2])
{
    /* Both sides ready (connected) before the gate opens. */
    sk_store *st = NULL;
    sk_sweeper *sw = NULL;
    char err[512];
    if (side == 0 && sk_store_open(&st, ro->spec, err, sizeof err)) return 2;
    if (side == 1) {
        struct sk_sweeper_opts o;
        sk_sweeper_opts_init(&o);
        o.redis_url = sk_th_redis_url();
        o.db_spec = ro->spec;
        o.batch = 7; /* many small passes interleave with the payer */
        if (sk_sweeper_new(&sw, &o, err, sizeof err)) return 2;
    }
    race_gate(gate_fd);
    long won = 0;
    if (side == 0) {
        /* Newest first, while the sweeper goes oldest deadline first:
         * they meet somewhere in the middle and fight there. */
        for (int i = ro->n - 1; i >= 0; i--) {
            int rc = sk_store_order_pay(st, ro->oid[i], sk_wall_ms(), NULL);
            if (rc == SK_ETIMEDOUT) {
                i++; /* a lock wait cut short: try again */
                continue;
            }
            if (rc == 0)
                won++;
            else if (rc != SK_ESTATE)
                return 3;
        }
        sk_store_close(st);
    } else {
        int64_t future = sk_wall_ms() + 86400000LL;
        for (;;) {
            struct sk_sweep_result r;
            if (sk_sweeper_pass(sw, future, &r) || r.errors) return 4;
            won += (long)r.cancelled;
            if (r.expired == 0) break;
        }
        sk_sweeper_free(sw);
    }
    out[0] = won;
    return 0;
}

#define RACE_N 150

/* Two processes race on RACE_N orders: one pays each, the other runs
 * sweeper passes at a time past every deadline. */
BACKEND_TEST(cancel_racing_a_payment_has_exactly_one_winner_and_releases_only_the_cancelled)
{
    static char oid[RACE_N][SK_ORDER_ID_MAX];
    struct race_orders ro = {NULL, RACE_N, oid};
    uint64_t aid = race_orders_bought(e, &ro);
    long got[2][2];
    race_two(pay_or_sweep, &ro, got);
    long won[2] = {got[0][0], got[1][0]};
    CHECK_EQ(won[0] + won[1], RACE_N);
    long paid = 0, cancelled = 0;
    for (int i = 0; i < RACE_N; i++) {
        struct sk_order o = get_order(e, oid[i]);
        CHECK(o.status == SK_ORDER_PAID || o.status == SK_ORDER_CANCELLED);
        /* Units given back exactly for the cancelled ones. */
        CHECK_EQ(is_released(e, aid, oid[i]), o.status == SK_ORDER_CANCELLED);
        paid += o.status == SK_ORDER_PAID;
        cancelled += o.status == SK_ORDER_CANCELLED;
    }
    CHECK_EQ(paid, won[0]);
    CHECK_EQ(cancelled, won[1]);
    struct sk_stock_state s = redis_state(e, aid);
    CHECK_EQ(s.remaining, cancelled);
    CHECK_EQ(s.held, paid);
    CHECK_EQ(s.released, cancelled);
    CHECK_EQ(db_stock(e, aid), cancelled);
    CHECK_EQ(owed(e), 0);
    check_consistent(e, aid);
}

/* Both sides cancel every order as an operator. out: the cancels each
 * won and the units they gave back. */
static int cancel_every_order(int side, int gate_fd, const struct race_orders *ro, long out[2])
{
    (void)side;
    race_gate(gate_fd);
    sk_store *st;
    sk_redis *r;
    char err[512];
    if (sk_store_open(&st, ro->spec, err, sizeof err)) return 2;
    if (sk_redis_new(&r, sk_th_redis_url(), 1000, 5000, err, sizeof err)) return 2;
    for (int i = 0; i < ro->n; i++) {
        struct sk_cancel_result res;
        int rc = sk_order_cancel(st, r, ro->oid[i], 0, sk_wall_ms(), &res);
        if (rc == SK_ETIMEDOUT) {
            i--;
            continue;
        }
        if (rc || res.release_pending) return 3;
        out[0] += res.cancelled;
        out[1] += res.units_given;
    }
    sk_store_close(st);
    sk_redis_free(r);
    return 0;
}

/* Two processes cancel the same orders at once through sk_order_cancel:
 * each order is cancelled by one of them and released once. */
BACKEND_TEST(concurrent_cancels_of_the_same_orders_release_each_once)
{
    enum { N = 60 };
    static char oid[N][SK_ORDER_ID_MAX];
    struct race_orders ro = {NULL, N, oid};
    uint64_t aid = race_orders_bought(e, &ro);
    long got[2][2];
    race_two(cancel_every_order, &ro, got);
    CHECK_EQ(got[0][0] + got[1][0], N); /* wins */
    CHECK_EQ(got[0][1] + got[1][1], N); /* units given */
    struct sk_stock_state s = redis_state(e, aid);
    CHECK_EQ(s.remaining, N);
    CHECK_EQ(s.released, N);
    CHECK_EQ(db_stock(e, aid), N);
    check_consistent(e, aid);
}

BACKEND_TEST(stock_never_exceeds_initial_whatever_is_released_again)
{
    uint64_t aid = sk_th_env_activity(e, 6, 2, 2, PAY_TIMEOUT_S);
    static char oid[6][SK_ORDER_ID_MAX];
    for (int i = 0; i < 3; i++)
        buy(e, aid, (uint64_t)i + 1, 2, oid[i]);
    persist(e);
    CHECK_EQ(redis_state(e, aid).remaining, 0);
    sk_sweeper *sw = new_sweeper(e, 0);
    int64_t future = sk_wall_ms() + 86400000LL;
    struct sk_sweep_result r = pass(sw, future);
    CHECK_EQ(r.units_released, 6);
    CHECK_EQ(redis_state(e, aid).remaining, 6);
    /* Everything released again, by every path: nothing moves. */
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 3; i++) {
            int rrc;
            int64_t given = -1;
            CHECK_EQ(sk_stock_release(e->r, aid, oid[i], (uint64_t)i + 1, 2, &rrc, &given), 0);
            CHECK_EQ(rrc, SK_RC_ALREADY_RELEASED);
            CHECK_EQ(given, 0);
            struct sk_cancel_result res;
            CHECK_EQ(sk_order_cancel(e->st, e->r, oid[i], 0, future, &res), 0);
            CHECK_EQ(res.units_given, 0);
            int prev;
            CHECK_EQ(sk_store_order_cancel(e->st, oid[i], future, &prev), 0);
        }
        r = pass(sw, future);
        CHECK_EQ(r.units_released, 0);
        struct sk_stock_state s = redis_state(e, aid);
        CHECK_EQ(s.remaining, 6);
        CHECK_EQ(db_stock(e, aid), 6);
    }
    sk_sweeper_free(sw);
    check_consistent(e, aid);
}

/* ---- the loop ------------------------------------------------------------------ */

struct run_arg {
    sk_sweeper *sw;
    int rc;
};

static void *run_thread(void *p)
{
    struct run_arg *a = p;
    a->rc = sk_sweeper_run(a->sw);
    return NULL;
}

/* An activity of one unit, open from start_ms, whose payment timeout is
 * pay_timeout_s, in the database and preheated: its id. */
static uint64_t one_unit_activity(struct sk_th_env *e, const char *what, int64_t start_ms,
                                  int pay_timeout_s)
{
    int64_t now = sk_wall_ms();
    struct sk_activity a;
    sk_activity_init(&a);
    a.id = sk_th_unique_id();
    snprintf(a.name, sizeof a.name, "%s %" PRIu64, what, a.id);
    a.stock = 1;
    a.per_user_limit = 1;
    a.start_ms = start_ms;
    a.end_ms = now + 3600000;
    a.pay_timeout_s = pay_timeout_s;
    a.created_ms = now;
    sk_activity_apply_defaults(&a);
    CHECK_EQ(sk_store_activity_insert(e->st, &a), 0);
    struct sk_stock_def d;
    sk_activity_stock_def(&a, &d);
    int rc;
    CHECK_EQ(sk_stock_preheat(e->r, &d, 0, &rc, NULL), 0);
    CHECK_EQ(sk_stock_set_open(e->r, a.id, 1, &rc), 0);
    return a.id;
}

/* The sweeper's loop on a thread of its own, passes every 50 ms. */
static void run_start(struct sk_th_env *e, struct run_arg *arg, pthread_t *t)
{
    struct sk_sweeper_opts o;
    sk_sweeper_opts_init(&o);
    o.redis_url = e->redis_url;
    o.db_spec = e->spec;
    o.interval_ms = 50;
    arg->rc = -1;
    char err[256];
    CHECK_EQ(sk_sweeper_new(&arg->sw, &o, err, sizeof err), 0);
    CHECK_EQ(pthread_create(t, NULL, run_thread, arg), 0);
}

SK_TEST(sweeper_run_cancels_on_its_own_and_stops_on_request)
{
    struct sk_th_env env;
    struct sk_th_env *e = &env;
    sk_th_env_init(e, 0, "sweep.db", sk_th_redis_url());
    /* pay_timeout 1 s: the run loop must find the order by itself. */
    uint64_t aid = one_unit_activity(e, "run loop", sk_wall_ms() - 60000, 1);
    char oid[SK_ORDER_ID_MAX];
    buy(e, aid, 1, 1, oid);
    persist(e);
    struct run_arg arg;
    pthread_t t;
    run_start(e, &arg, &t);
    /* Poll (bounded) for the cancellation: deadline 1 s after admission. */
    int64_t until = sk_mono_ms() + 10000;
    while (get_order(e, oid).status != SK_ORDER_CANCELLED && sk_mono_ms() < until) {
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    CHECK_EQ(get_order(e, oid).status, SK_ORDER_CANCELLED);
    until = sk_mono_ms() + 5000;
    while (!is_released(e, aid, oid) && sk_mono_ms() < until) {
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    CHECK(is_released(e, aid, oid));
    int64_t t0 = sk_mono_ms();
    sk_sweeper_stop(arg.sw);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(arg.rc, 0);
    CHECK(sk_mono_ms() - t0 < 2000);
    struct sk_sweeper_stats st;
    sk_sweeper_stats(arg.sw, &st);
    CHECK_EQ(st.cancelled, 1);
    CHECK(st.passes >= 1);
    sk_sweeper_free(arg.sw);
    sk_th_env_done(e);
}

/* Redis's clock as TIME answers it, in ms. */
static int64_t redis_time_ms(struct sk_th_env *e)
{
    redisReply *r;
    CHECK_EQ(sk_redis_cmd(e->r, &r, "TIME"), 0);
    CHECK(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    int64_t ms = atoll(r->element[0]->str) * 1000 + atoll(r->element[1]->str) / 1000;
    freeReplyObject(r);
    return ms;
}

/* The worker host's clock 3 h ahead of Redis's (the nemesis's clock_jump
 * found it): a deadline is Redis's clock at the admission plus the
 * payment timeout, and a sweeper that judged it by its own clock alone
 * cancelled every unpaid order at once. Here Redis's wall clock is moved
 * 3 h back instead (the test's preload library on a private redis-server:
 * the same difference of clocks, without moving this process's): the
 * sweeper runs passes and releases nothing; once Redis's clock is back
 * (past the deadline on both clocks) it releases the order. */
SK_TEST(sweeper_releases_nothing_early_when_its_clock_is_ahead_of_redis)
{
    struct sk_redis_spawn rs;
    sk_th_clock_shift_env("clock-shift");
    int rc = sk_redis_spawn_start(&rs, NULL);
    sk_th_clock_shift_env(NULL);
    CHECK_MSG(rc == 0, "redis: %s", rs.errstr);
    char shift[400];
    snprintf(shift, sizeof shift, "%s/clock-shift", rs.dir);
    FILE *f = fopen(shift, "w");
    CHECK(f);
    fputs("-3h", f);
    CHECK(fclose(f) == 0);

    struct sk_th_env env;
    struct sk_th_env *e = &env;
    sk_th_env_init(e, 0, "sweep-clock.db", rs.url);
    int64_t by = sk_mono_ms() + 5000;
    while (sk_wall_ms() - redis_time_ms(e) < 2 * 3600 * 1000) {
        CHECK_MSG(sk_mono_ms() < by, "Redis's clock never moved back");
        sk_th_nap_ms(20);
    }
    /* open on both clocks */
    uint64_t aid = one_unit_activity(e, "clock", sk_wall_ms() - 4 * 3600 * 1000, PAY_TIMEOUT_S);
    char oid[SK_ORDER_ID_MAX];
    buy(e, aid, 1, 1, oid);
    persist(e);
    /* its deadline passed hours ago on this host's clock, not on Redis's */
    CHECK(get_order(e, oid).pay_deadline_ms < sk_wall_ms() - 3600 * 1000);

    struct run_arg arg;
    pthread_t t;
    run_start(e, &arg, &t);
    struct sk_sweeper_stats st;
    by = sk_mono_ms() + 10000;
    do { /* twenty passes: each would have cancelled it */
        sk_th_nap_ms(20);
        sk_sweeper_stats(arg.sw, &st);
        CHECK(sk_mono_ms() < by);
    } while (st.passes < 20);
    CHECK_EQ(st.cancelled, 0);
    CHECK_EQ(get_order(e, oid).status, SK_ORDER_CREATED);

    /* Redis's clock back: past the deadline on both clocks */
    f = fopen(shift, "w");
    CHECK(f);
    fputs("+0", f);
    CHECK(fclose(f) == 0);
    by = sk_mono_ms() + 10000;
    while (get_order(e, oid).status != SK_ORDER_CANCELLED && sk_mono_ms() < by)
        sk_th_nap_ms(20);
    CHECK_EQ(get_order(e, oid).status, SK_ORDER_CANCELLED);
    sk_sweeper_stop(arg.sw);
    CHECK_EQ(pthread_join(t, NULL), 0);
    sk_sweeper_free(arg.sw);
    sk_th_env_done(e);
    sk_redis_spawn_stop(&rs);
}

SK_TEST(sweeper_new_refuses_bad_options)
{
    struct sk_sweeper_opts o;
    sk_sweeper_opts_init(&o);
    sk_sweeper *sw = (sk_sweeper *)1;
    char err[256];
    CHECK_EQ(sk_sweeper_new(&sw, &o, err, sizeof err), SK_EINVAL);
    CHECK(sw == NULL);
    CHECK(strstr(err, "required") != NULL);
    o.redis_url = "redis://127.0.0.1:1";
    o.db_spec = "sqlite:/nonexistent-dir/x.db";
    o.batch = 0;
    CHECK_EQ(sk_sweeper_new(&sw, &o, err, sizeof err), SK_EINVAL);
    o.batch = 10;
    o.interval_ms = 0;
    CHECK_EQ(sk_sweeper_new(&sw, &o, err, sizeof err), SK_EINVAL);
    o.interval_ms = 10;
    CHECK_EQ(sk_sweeper_new(&sw, &o, err, sizeof err), SK_EDB);
    CHECK(strstr(err, "database") != NULL);
    o.db_spec = "nonsense";
    CHECK_EQ(sk_sweeper_new(&sw, &o, err, sizeof err), SK_EINVAL);
}
