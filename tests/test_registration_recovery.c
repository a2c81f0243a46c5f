/* test_registration_recovery.c - pre-registration meets the recovery of
 * vanished keys (docs/fairness.md, docs/recovery.md), against a private
 * redis-server and a SQLite file on Redis's real clock: the registrants
 * the database holds are written back into Redis's set when the key set
 * is rebuilt, so a registered buyer still buys and an unregistered one is
 * still refused. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/codes.h"
#include "core/error.h"
#include "engine/activity.h"
#include "engine/keys.h"
#include "engine/registration.h"
#include "engine/stock.h"
#include "orders/order_worker.h"
#include "orders/recover.h"
#include "store/store.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/sale_env.h"

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
