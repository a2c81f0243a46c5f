/* test_registration_recovery.c - pre-registration and the draw meet the
 * recovery of vanished keys (docs/fairness.md, docs/recovery.md), on real
 * redis-servers and real stores on Redis's real clock: the registrants the
 * database holds are written back into Redis's set when the key set is
 * rebuilt, so a registered buyer still buys and an unregistered one is
 * still refused; the set deleted alone (the rest intact) fences the sale
 * instead of refusing registered buyers as not registered, and the
 * recovery restores it; the draw's Redis state is written back by the
 * recovery itself. The faults are real (the keys deleted in the real
 * Redis), the recovery the one the order worker runs, and SPEC section 7
 * is checked afterwards against the database (SQLite, PostgreSQL,
 * MariaDB: the registrants and the draw come from the store). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/codes.h"
#include "core/error.h"
#include "engine/activity.h"
#include "engine/keys.h"
#include "engine/recovery.h"
#include "engine/registration.h"
#include "engine/stock.h"
#include "orders/draw_sync.h"
#include "orders/order_worker.h"
#include "orders/recover.h"
#include "store/store.h"
#include "support/backend_env.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/mysql_harness.h"
#include "support/pg_harness.h"
#include "support/sale_env.h"

SK_TH_PG_USED
SK_TH_MY_USED

static int buy(sk_redis *r, uint64_t aid, uint64_t uid)
{
    struct sk_purchase p = {.user_id = uid, .quantity = 1};
    struct sk_admission a;
    int rc = sk_stock_buy(r, aid, NULL, &p, 1, &a, NULL);
    CHECK_MSG(rc == 0, "purchase: %s (%s)", sk_strerror(rc), r->errstr);
    return a.rc;
}

static int sale_started(void *arg)
{
    return sk_wall_ms() >= *(const int64_t *)arg;
}

static int is_member(sk_redis *r, const char *set, uint64_t uid)
{
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(r, &rep, "SISMEMBER %s %" PRIu64, set, uid), 0);
    int v = rep->type == REDIS_REPLY_INTEGER ? (int)rep->integer : -1;
    freeReplyObject(rep);
    return v;
}

SK_TEST_T(reg_vanished_keys_get_the_registrants_back_from_the_database, 120)
{
    struct sk_th_redis rs;
    sk_th_redis_start(&rs, NULL);
    char db[400], err[512];
    snprintf(db, sizeof db, "sqlite:%s/reg_vanish.db", sk_th_tmpdir());
    sk_store *st;
    sk_redis *r;
    CHECK_MSG(sk_store_open(&st, db, err, sizeof err) == 0, "%s", err);
    CHECK_MSG(sk_redis_new(&r, rs.url, 2000, 5000, err, sizeof err) == 0, "%s", err);
    /* registration open now for 1.5 s, the sale from its end */
    struct sk_activity a;
    sk_th_activity_live(&a, "reg_vanish", 10, 1, 0);
    int64_t now = sk_wall_ms();
    a.reg_start_ms = now - 1000;
    a.reg_end_ms = now + 1500;
    a.start_ms = a.reg_end_ms;
    a.end_ms = a.start_ms + 3600000;
    sk_th_activity_open_in(st, r, &a);
    /* buyers 1 and 2 register, as the HTTP call does: Redis, then the store */
    for (uint64_t u = 1; u <= 2; u++) {
        struct sk_reg_answer ra;
        CHECK_EQ(sk_reg_call(r, a.id, 'r', u, NULL, "", &ra), 0);
        CHECK_EQ(ra.rc, SK_RC_REGISTERED);
        CHECK_EQ(sk_store_registrations_add(st, a.id, &u, 1, sk_wall_ms(), NULL), 0);
    }
    sale_wait(sale_started, &a.start_ms, 10000, "the sale's start");
    CHECK_EQ(buy(r, a.id, 1), SK_RC_OK);
    CHECK_EQ(buy(r, a.id, 3), SK_RC_NOT_REGISTERED);
    struct sk_worker_opts o;
    sk_worker_opts_init(&o);
    o.redis_url = rs.url;
    o.db_spec = db;
    o.once = 1;
    o.guard_ms = 0;
    o.block_ms = 100;
    sk_th_worker_run(&o);

    /* every key of the sale vanishes (the set of registrants with them) */
    CHECK_EQ(sk_stock_drop(r, a.id), 0);
    struct sk_keys k;
    sk_keys_for(&k, a.id);
    CHECK_EQ(is_member(r, k.reg, 2), 0);
    struct sk_recover_opts ro = {.apply = 1, .actor = "operator"};
    struct sk_recover_report rep;
    CHECK_MSG(sk_recover_activity(st, r, a.id, &ro, &rep, err, sizeof err) == 0, "%s", err);
    CHECK_EQ(rep.needed, 1);
    CHECK_EQ(rep.fenced_after, 0);
    sk_recover_report_free(&rep);
    CHECK_EQ(is_member(r, k.reg, 1), 1);
    CHECK_EQ(is_member(r, k.reg, 2), 1);
    CHECK_EQ(is_member(r, k.reg, 3), 0);
    /* the registered buyer who had not bought buys; the one who had is
     * held to the limit; the unregistered one is refused, nothing taken */
    CHECK_EQ(buy(r, a.id, 3), SK_RC_NOT_REGISTERED);
    CHECK_EQ(buy(r, a.id, 1), SK_RC_LIMIT_EXCEEDED);
    CHECK_EQ(buy(r, a.id, 2), SK_RC_OK);
    struct sk_stock_state ss;
    CHECK_EQ(sk_stock_state(r, a.id, &ss), 0);
    CHECK_EQ(ss.held, 2);
    CHECK_EQ(ss.remaining + ss.held, 10);
    sk_redis_free(r);
    sk_store_close(st);
    sk_th_redis_stop(&rs, 1);
}

/* ---- a lost set alone, and the draw, on every store ----------------------- */

/* A sale taking registrations from now - 1 s to now + reg_ms, selling from
 * then for an hour: stock units, one per buyer; with box_s > 0 a draw with
 * that box. In the store and preheated and open in Redis. */
static void reg_sale(struct sk_th_env *e, struct sk_activity *a, const char *name, int64_t stock,
                     int64_t reg_ms, int64_t box_s)
{
    sk_th_activity_live(a, name, stock, 1, 0);
    int64_t now = sk_wall_ms();
    a->reg_start_ms = now - 1000;
    a->reg_end_ms = now + reg_ms;
    a->start_ms = a->reg_end_ms;
    a->end_ms = a->start_ms + 3600000;
    if (box_s > 0) {
        a->draw_box_s = box_s;
        memset(a->draw_seed, 'c', SK_ACTIVITY_DRAW_SEED_HEX);
        a->draw_seed[SK_ACTIVITY_DRAW_SEED_HEX] = 0;
        snprintf(a->wr_seed, sizeof a->wr_seed, "%s", "0123456789abcdef0123456789abcdef");
    }
    sk_th_activity_open_in(e->st, e->r, a);
}

/* uid registers, as the HTTP call does: Redis first, then the store. */
static void registers(struct sk_th_env *e, uint64_t aid, uint64_t uid)
{
    struct sk_reg_answer ra;
    CHECK_EQ(sk_reg_call(e->r, aid, 'r', uid, NULL, "", &ra), 0);
    CHECK_EQ(ra.rc, SK_RC_REGISTERED);
    CHECK_EQ(sk_store_registrations_add(e->st, aid, &uid, 1, sk_wall_ms(), NULL), 0);
}

static int status_of(struct sk_th_env *e, uint64_t aid, uint64_t uid, struct sk_reg_answer *ra)
{
    CHECK_EQ(sk_reg_call(e->r, aid, 's', uid, NULL, "", ra), 0);
    return ra->rc;
}

/* The set of registrants deleted alone, every other key of the sale
 * intact: a registered buyer is never told not_registered. The purchase
 * finds the set gone while meta says it must exist and fences the sale
 * (503 recovering), the registration status and a new registration say
 * recovering too, the order worker's probe names it, and the recovery
 * writes the database's registrants back: the registered buyers buy, the
 * one who had bought is held to the limit, a stranger is still refused. */
SK_BACKEND_TEST(regrec, "regrec.db", a_lost_registrant_set_alone_fences_and_is_restored)
{
    struct sk_activity a;
    reg_sale(e, &a, "reg_lost_alone", 10, 1500, 0);
    for (uint64_t u = 1; u <= 3; u++)
        registers(e, a.id, u);
    sale_wait(sale_started, &a.start_ms, 10000, "the sale's start");
    CHECK_EQ(buy(e->r, a.id, 1), SK_RC_OK);
    CHECK_EQ(buy(e->r, a.id, 9), SK_RC_NOT_REGISTERED);
    sk_th_env_persist(e, "regrec", -1);

    /* the fault: the set alone vanishes (an operator's DEL, an eviction) */
    struct sk_keys k;
    sk_keys_for(&k, a.id);
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(e->r, &rep, "DEL %s", k.reg), 0);
    CHECK_EQ(rep->integer, 1);
    freeReplyObject(rep);
    /* the worker's probe names it, before any buyer comes */
    struct sk_keyset_probe p;
    CHECK_EQ(sk_recovery_probe(e->r, &k, 1, &p), 0);
    CHECK_MSG(p.lost && strstr(p.lost_what, "reg"), "probe: lost %d (%s)", p.lost, p.lost_what);
    /* a registered buyer: recovering, never not_registered; nothing taken */
    struct sk_reg_answer ra;
    CHECK_EQ(status_of(e, a.id, 2, &ra), SK_RC_RECOVERING);
    CHECK_EQ(buy(e->r, a.id, 2), SK_RC_RECOVERING);
    struct sk_stock_state ss;
    CHECK_EQ(sk_stock_state(e->r, a.id, &ss), 0);
    CHECK_MSG(ss.fenced && !strcmp(ss.fence, "lost") && strstr(ss.fence_why, "reg"), "fence %s: %s",
              ss.fence, ss.fence_why);
    CHECK_EQ(ss.held, 1);
    CHECK_EQ(is_member(e->r, k.reg, 1), 0); /* no set came back under the fence */

    char err[512];
    struct sk_recover_opts ro = {.apply = 0, .actor = "operator"};
    struct sk_recover_report rep0;
    CHECK_MSG(sk_recover_activity(e->st, e->r, a.id, &ro, &rep0, err, sizeof err) == 0, "%s", err);
    CHECK_EQ(rep0.needed, 1);
    sk_recover_report_free(&rep0);
    ro.apply = 1;
    CHECK_MSG(sk_recover_activity(e->st, e->r, a.id, &ro, &rep0, err, sizeof err) == 0, "%s", err);
    CHECK_EQ(rep0.fenced_after, 0);
    sk_recover_report_free(&rep0);
    for (uint64_t u = 1; u <= 3; u++)
        CHECK_EQ(is_member(e->r, k.reg, u), 1);
    CHECK_EQ(is_member(e->r, k.reg, 9), 0);
    CHECK_EQ(status_of(e, a.id, 3, &ra), SK_RC_REGISTERED);
    CHECK_EQ(status_of(e, a.id, 9, &ra), SK_RC_NOT_REGISTERED);
    CHECK_EQ(buy(e->r, a.id, 2), SK_RC_OK);
    CHECK_EQ(buy(e->r, a.id, 1), SK_RC_LIMIT_EXCEEDED);
    CHECK_EQ(buy(e->r, a.id, 9), SK_RC_NOT_REGISTERED);
    /* the recovery marked it must exist: lost again, it is seen again */
    CHECK_EQ(sk_recovery_probe(e->r, &k, 1, &p), 0);
    CHECK(!p.lost);
    CHECK_EQ(sk_redis_cmd(e->r, &rep, "HGET %s keys", k.meta), 0);
    CHECK_MSG(rep->type == REDIS_REPLY_STRING && (atoll(rep->str) & 8), "keys %s",
              rep->type == REDIS_REPLY_STRING ? rep->str : "none");
    freeReplyObject(rep);
    sk_th_env_persist(e, "regrec", -1);
    CHECK_EQ(sale_check_invariants(e->st, e->r, e->redis_url, e->spec, a.id, 10, 1), 2);
    CHECK(sale_audit_count(e->st, a.id, "recover_fence") >= 1);
}

/* A drawn sale whose keys all vanish: the recovery writes the recorded
 * draw back by itself (no `activity draw` run again): the same order and
 * wave, so the second winner's right buys, a later place waits, and the
 * first winner, who bought before the fault, is held to the limit. */
SK_BACKEND_TEST(regrec, "regdraw.db", the_draw_is_rebuilt_by_the_recovery)
{
    struct sk_activity a;
    reg_sale(e, &a, "draw_rebuilt", 2, 1500, 600);
    for (uint64_t u = 1; u <= 4; u++)
        registers(e, a.id, u);
    sale_wait(sale_started, &a.start_ms, 10000, "the registration's end");
    char out[4096], id[24];
    snprintf(id, sizeof id, "%" PRIu64, a.id);
    const char *args[] = {"draw", "--id", id, NULL};
    int rc = sk_th_run_with_db(out, sizeof out, "activity", args, e->redis_url, e->spec);
    CHECK_MSG(rc == 0, "draw: %d %s", rc, out);
    uint64_t order[4], again[4];
    CHECK_EQ(sk_draw_read(e->r, a.id, order, 4), 0);
    for (int i = 0; i < 4; i++)
        CHECK_MSG(order[i] >= 1 && order[i] <= 4, "place %d: %" PRIu64, i + 1, order[i]);
    /* place 1 buys with the right the status call hands out */
    struct sk_reg_answer ra;
    CHECK_EQ(status_of(e, a.id, order[0], &ra), SK_RC_Q_ADMITTED);
    struct sk_purchase pu = {
        .user_id = order[0], .quantity = 1, .pass = ra.pass, .pass_len = strlen(ra.pass)};
    struct sk_admission ad;
    CHECK_EQ(sk_stock_buy(e->r, a.id, NULL, &pu, 1, &ad, NULL), 0);
    CHECK_EQ(ad.rc, SK_RC_OK);
    sk_th_env_persist(e, "regdraw", -1);

    /* the fault: every key of the sale vanishes */
    CHECK_EQ(sk_stock_drop(e->r, a.id), 0);
    memset(again, 0, sizeof again);
    CHECK_EQ(sk_draw_read(e->r, a.id, again, 4), 0);
    CHECK_EQ(again[0], 0);
    char err[512];
    struct sk_recover_opts ro = {.apply = 1, .actor = "operator"};
    struct sk_recover_report rep;
    CHECK_MSG(sk_recover_activity(e->st, e->r, a.id, &ro, &rep, err, sizeof err) == 0, "%s", err);
    CHECK_EQ(rep.fenced_after, 0);
    CHECK_EQ(rep.draw_restored, 1);
    sk_recover_report_free(&rep);
    /* the same order, the same wave (places 1..2 hold rights) */
    CHECK_EQ(sk_draw_read(e->r, a.id, again, 4), 0);
    for (int i = 0; i < 4; i++)
        CHECK_EQ(again[i], order[i]);
    CHECK_EQ(status_of(e, a.id, order[2], &ra), SK_RC_Q_WAITING);
    CHECK_EQ(ra.place, 3);
    CHECK_EQ(status_of(e, a.id, order[1], &ra), SK_RC_Q_ADMITTED);
    CHECK_EQ(ra.place, 2);
    pu.user_id = order[1];
    pu.pass = ra.pass;
    pu.pass_len = strlen(ra.pass);
    CHECK_EQ(sk_stock_buy(e->r, a.id, NULL, &pu, 1, &ad, NULL), 0);
    CHECK_EQ(ad.rc, SK_RC_OK);
    /* the first winner again, with a right of the rebuilt draw: nothing
     * more (the stock is sold, and the limit holds) */
    int st0 = status_of(e, a.id, order[0], &ra);
    CHECK_MSG(st0 == SK_RC_Q_ADMITTED || st0 == SK_RC_Q_USED, "rc %s", sk_rc_name(st0));
    if (st0 == SK_RC_Q_ADMITTED) {
        pu.user_id = order[0];
        pu.pass = ra.pass;
        pu.pass_len = strlen(ra.pass);
        CHECK_EQ(sk_stock_buy(e->r, a.id, NULL, &pu, 1, &ad, NULL), 0);
        CHECK_MSG(ad.rc == SK_RC_LIMIT_EXCEEDED || ad.rc == SK_RC_SOLD_OUT, "rc %s",
                  sk_rc_name(ad.rc));
    }
    sk_th_env_persist(e, "regdraw", -1);
    CHECK_EQ(sale_check_invariants(e->st, e->r, e->redis_url, e->spec, a.id, 2, 1), 2);
    /* the database's record of the draw is the one put back */
    rc = sk_th_run_with_db(out, sizeof out, "activity",
                           (const char *const[]){"draw", "--id", id, "--verify", NULL},
                           e->redis_url, e->spec);
    CHECK_MSG(rc == 0 && strstr(out, "verified"), "verify: %d %s", rc, out);
}
