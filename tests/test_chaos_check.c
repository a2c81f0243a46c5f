/* test_chaos_check.c - the nemesis's checker (support/chaos_check.h) is
 * honest: a clean sale passes, and each broken promise, made on purpose in
 * the database, Redis or the ledger, is found and named. The sale is real
 * (admission script, the order worker); the ledger is written as buyers
 * would have recorded it. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/codes.h"
#include "engine/keys.h"
#include "engine/stock.h"
#include "support/backend_env.h"
#include "support/chaos_check.h"
#include "support/harness.h"
#include "support/reconcile_env.h"

#define N_BUY 12

struct fixture {
    struct sk_th_env e;
    struct chaos_activity act;
    struct chaos_ledger L;
    char oid[N_BUY][SK_ORDER_ID_MAX];
};

static void record(struct fixture *f, uint32_t user, uint64_t key, int status, const char *err,
                   const char *oid, int sent)
{
    struct chaos_answer *a = chaos_ledger_add(&f->L);
    CHECK(a);
    *a = (struct chaos_answer){.aid = f->act.id,
                               .key = key,
                               .user = user,
                               .qty = 1,
                               .status = (int16_t)status,
                               .attempt = 1,
                               .sent = (uint8_t)sent,
                               .t_send_ms = sk_wall_ms(),
                               .t_done_ms = sk_wall_ms()};
    snprintf(a->err, sizeof a->err, "%s", err ? err : "");
    snprintf(a->oid, sizeof a->oid, "%s", oid ? oid : "");
}

/* Users 1..N_BUY buy one unit each (key = user), all answered 200 and
 * persisted; stock 20, limit 1. */
static void setup(struct fixture *f)
{
    memset(f, 0, sizeof *f);
    sk_th_env_init(&f->e, 0, "check.db", sk_th_redis_url());
    f->act = (struct chaos_activity){sk_th_env_activity(&f->e, 20, 1, 1, 3600), 20, 1};
    chaos_ledger_init(&f->L, 64);
    for (uint32_t u = 1; u <= N_BUY; u++) {
        struct sk_admission a;
        CHECK_EQ(sk_stock_purchase(f->e.r, f->act.id, u, 1, &a, NULL), 0);
        CHECK_EQ(a.rc, SK_RC_OK);
        snprintf(f->oid[u - 1], sizeof f->oid[0], "%s", a.order_id);
        record(f, u, u, 200, NULL, a.order_id, 1);
    }
    sk_th_env_persist(&f->e, "check-test", -1);
}

static void run_jumped(struct fixture *f, struct chaos_report *rep, int64_t healed,
                       const struct chaos_clock_jump *jumps, size_t njumps, int jumped)
{
    const char *names[] = {"serve"};
    struct chaos_input in = {.ledger = &f->L,
                             .acts = &f->act,
                             .nacts = 1,
                             .nserves = 1,
                             .serve_names = names,
                             .st = f->e.st,
                             .r = f->e.r,
                             .redis_url = f->e.redis_url,
                             .db_spec = f->e.spec,
                             .start_ms = sk_wall_ms() - 1000,
                             .healed_ms = healed,
                             .stale_after_s = 30,
                             .jumps = jumps,
                             .njumps = njumps,
                             .clock_jumped = jumped};
    CHECK_EQ(chaos_check(&in, rep), 0);
}

static void run(struct fixture *f, struct chaos_report *rep, int64_t healed)
{
    run_jumped(f, rep, healed, NULL, 0, 0);
}

static void done(struct fixture *f)
{
    chaos_ledger_free(&f->L);
    sk_th_env_done(&f->e);
}

SK_TEST(chaos_check_passes_a_clean_sale_and_names_every_broken_promise)
{
    static struct fixture f;
    static struct chaos_report rep;
    setup(&f);
    /* refusals and doubt are fine: a 409, and a 503 whose retry got 200 */
    record(&f, 1, 100, 409, "limit_exceeded", NULL, 1);
    record(&f, 2, 2, 503, "unconfirmed", NULL, 1);
    /* and the 503s the nemesis's redis_oom and an evicting policy cause */
    record(&f, 3, 3, 503, "redis_full", NULL, 1);
    record(&f, 4, 4, 503, "redis_unsafe", NULL, 1);
    run(&f, &rep, 0);
    chaos_report_print(stdout, &rep);
    CHECK_MSG(chaos_report_ok(&rep), "a clean sale was judged broken");
    CHECK_EQ(rep.ok200, N_BUY);
    CHECK_EQ(rep.act[0].db_orders, N_BUY);

    /* the sale did not resume: no 200 after the last fault, stock left */
    run(&f, &rep, sk_wall_ms() + 1000);
    CHECK_EQ(rep.found[CF_NOT_RESUMED], 1);

    /* a 200 whose order the database lost, one whose row holds another
     * user, one cancelled (as a recovery that refused it would) */
    char sql[256];
    snprintf(sql, sizeof sql, "DELETE FROM orders WHERE order_id = '%s'", f.oid[0]);
    sk_th_be_sql(&f.e, sql);
    snprintf(sql, sizeof sql, "UPDATE orders SET user_id = 777 WHERE order_id = '%s'", f.oid[1]);
    sk_th_be_sql(&f.e, sql);
    snprintf(sql, sizeof sql,
             "UPDATE orders SET status = 'cancelled', cancelled_ms = 1 WHERE order_id = '%s'",
             f.oid[2]);
    sk_th_be_sql(&f.e, sql);
    run(&f, &rep, 0);
    CHECK_EQ(rep.found[CF_MISSING], 2);
    CHECK(strstr(rep.example[CF_MISSING], f.oid[0]) != NULL);
    /* every missing 200 listed: the summary by attempt and serve, then it */
    CHECK_MSG(strstr(rep.missing, "missing: 1 answered 200") && strstr(rep.missing, "#1 1") &&
                  strstr(rep.missing, f.oid[0]),
              "%s", rep.missing);
    CHECK_EQ(rep.found[CF_MISMATCH], 1);
    CHECK(rep.found[CF_STOCK] >= 1);     /* Redis holds a unit the database does not */
    CHECK(rep.found[CF_RECONCILE] >= 1); /* and reconcile says so */
    CHECK_EQ(rep.found[CF_PHANTOM], 0);  /* the id was announced: a mismatch, not a phantom */
    /* an order admitted for real that nobody asked for (no attempt at all) */
    struct sk_admission a;
    CHECK_EQ(sk_stock_purchase(f.e.r, f.act.id, 60, 1, &a, NULL), 0);
    CHECK_EQ(a.rc, SK_RC_OK);
    sk_th_env_persist(&f.e, "check-test", -1);
    run(&f, &rep, 0);
    CHECK_EQ(rep.found[CF_PHANTOM], 1);
    CHECK(strstr(rep.example[CF_PHANTOM], a.order_id) != NULL);
    done(&f);
}

SK_TEST(chaos_check_finds_keys_that_bought_twice_and_ids_answered_twice)
{
    static struct fixture f;
    static struct chaos_report rep;
    setup(&f);
    /* one order id answered to two keys (two users) */
    record(&f, 5, 500, 200, NULL, f.oid[3], 1);
    /* one key answered two order ids (the second one user 8's: that id is
     * then answered to two keys as well) */
    record(&f, 6, 6, 200, NULL, f.oid[7], 1);
    /* an answer outside the contract */
    record(&f, 7, 700, 500, "internal", NULL, 1);
    run(&f, &rep, 0);
    CHECK_EQ(rep.found[CF_ID_REUSED], 2);
    CHECK_EQ(rep.found[CF_KEY_TWICE], 1);
    CHECK_EQ(rep.found[CF_BAD_ANSWER], 1);
    CHECK(!chaos_report_ok(&rep));
    done(&f);

    /* a user holding two orders from one key: the database has an order
     * (admitted for real) that no 200 announced, from a user whose only key
     * was answered with the other one */
    setup(&f);
    struct sk_admission a;
    CHECK_EQ(sk_stock_purchase(f.e.r, f.act.id, 50, 1, &a, NULL), 0);
    CHECK_EQ(a.rc, SK_RC_OK);
    char unannounced[SK_ORDER_ID_MAX];
    snprintf(unannounced, sizeof unannounced, "%s", a.order_id);
    record(&f, 50, 5000, 503, "unavailable", NULL, 1); /* in doubt: the order may be it */
    sk_th_env_persist(&f.e, "check-test", -1);
    run(&f, &rep, 0);
    CHECK_MSG(chaos_report_ok(&rep), "an order of a user in doubt is allowed");
    CHECK_EQ(rep.maybe_orders, 1);
    CHECK_EQ(sk_stock_purchase(f.e.r, f.act.id, 50, 1, &a, NULL), 0); /* limit 1 */
    CHECK_EQ(a.rc, SK_RC_LIMIT_EXCEEDED);
    /* the limit raised by hand: a second unit sold to user 50 under the same key */
    struct sk_keys k;
    sk_keys_for(&k, f.act.id);
    sk_th_redis_do(&f.e, "HSET %s limit 5 max_qty 5", k.meta, NULL, NULL);
    CHECK_EQ(sk_stock_purchase(f.e.r, f.act.id, 50, 1, &a, NULL), 0);
    CHECK_EQ(a.rc, SK_RC_OK);
    record(&f, 50, 5000, 200, NULL, a.order_id, 1);
    sk_th_env_persist(&f.e, "check-test", -1);
    run(&f, &rep, 0);
    CHECK_EQ(rep.found[CF_KEY_TWICE], 1);  /* two orders, one key */
    CHECK_EQ(rep.found[CF_OVER_LIMIT], 1); /* two units, limit 1 */
    /* the order never answered 200 cancelled, as a recovery refuses one of
     * a key's two orders from the two sides of a split brain: one stands */
    char sql[256];
    snprintf(sql, sizeof sql,
             "UPDATE orders SET status = 'cancelled', cancelled_ms = 1 WHERE order_id = '%s'",
             unannounced);
    sk_th_be_sql(&f.e, sql);
    run(&f, &rep, 0);
    CHECK_EQ(rep.found[CF_KEY_TWICE], 0);
    CHECK_EQ(rep.found[CF_OVER_LIMIT], 0);
    CHECK_EQ(rep.found[CF_MISSING], 0);
    CHECK_EQ(rep.found[CF_PHANTOM], 0);
    done(&f);
}

SK_TEST(chaos_check_finds_a_sale_while_the_masters_clock_was_out_of_the_window)
{
    static struct fixture f;
    static struct chaos_report rep;
    int64_t before = sk_wall_ms() - 1;
    setup(&f);
    int64_t after = sk_wall_ms() + 1;
    /* the branch of the orders: the master that admitted them */
    const char *b = strrchr(f.oid[0], '-');
    CHECK(b && strlen(b + 1) == 8);
    struct chaos_clock_jump j = {.from_ms = before, .to_ms = after};
    snprintf(j.branch, sizeof j.branch, "%s", b + 1);
    run_jumped(&f, &rep, 0, &j, 1, 1);
    CHECK_EQ(rep.found[CF_WINDOW], N_BUY);
    CHECK(strstr(rep.example[CF_WINDOW], j.branch) != NULL);
    /* another master's clock, or the jump over before the attempts: fine */
    snprintf(j.branch, sizeof j.branch, "%s", "00000000");
    run_jumped(&f, &rep, 0, &j, 1, 1);
    CHECK_EQ(rep.found[CF_WINDOW], 0);
    snprintf(j.branch, sizeof j.branch, "%s", b + 1);
    j.to_ms = before;
    run_jumped(&f, &rep, 0, &j, 1, 1);
    CHECK_EQ(rep.found[CF_WINDOW], 0);
    /* a 200 replayed for a key whose first attempt came before the jump
     * (its order may be older than the jump): not judged */
    struct chaos_answer *first = chaos_ledger_add(&f.L);
    CHECK(first);
    *first = f.L.a[0];
    first->status = 503;
    snprintf(first->err, sizeof first->err, "unavailable");
    first->oid[0] = 0;
    first->t_send_ms = first->t_done_ms = before - 1000;
    j.to_ms = after;
    run_jumped(&f, &rep, 0, &j, 1, 1);
    CHECK_EQ(rep.found[CF_WINDOW], N_BUY - 1);
    /* a window refusal is an allowed answer only when a clock jumped */
    record(&f, 3, 300, 403, "ended", NULL, 1);
    run_jumped(&f, &rep, 0, NULL, 0, 1);
    CHECK_MSG(chaos_report_ok(&rep), "403 ended after a clock jump is allowed");
    run(&f, &rep, 0);
    CHECK_EQ(rep.found[CF_BAD_ANSWER], 1);
    done(&f);
}
