/* test_waiting_room_recovery.c - the waiting room meets the rollback guard
 * (docs/waiting-room.md, docs/recovery.md), against private redis-servers
 * and SQLite files, on Redis's real clock: a recovery that rebuilds
 * vanished keys (unsegmented and segmented) puts the waiting room back from
 * the database, so a purchase still needs its buyer's pass and the queue
 * starts again empty. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/codes.h"
#include "core/error.h"
#include "engine/activity.h"
#include "engine/keys.h"
#include "engine/queue.h"
#include "engine/stock.h"
#include "orders/order_worker.h"
#include "orders/recover.h"
#include "store/store.h"
#include "support/harness.h"

#define SEED "00112233445566778899aabbccddeeff"

/* A private Redis, a SQLite store, and one activity in both. */
struct wenv {
    struct sk_th_redis rs;
    char db[400];
    sk_store *st;
    sk_redis *r;
    uint64_t aid;
};

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* An open activity with a waiting room (rate passes/s, passes living 60 s,
 * limit 1), started a second ago, in the store and preheated in Redis. */
static void wenv_start(struct wenv *e, const char *name, int64_t stock, int64_t rate, int segments)
{
    sk_th_redis_start(&e->rs, NULL);
    snprintf(e->db, sizeof e->db, "sqlite:%s/%s.db", sk_th_tmpdir(), name);
    char err[512];
    CHECK_MSG(sk_store_open(&e->st, e->db, err, sizeof err) == 0, "%s", err);
    CHECK_MSG(sk_redis_new(&e->r, e->rs.url, 2000, 5000, err, sizeof err) == 0, "%s", err);
    struct sk_activity a;
    sk_activity_init(&a);
    a.id = e->aid = sk_th_unique_id();
    snprintf(a.name, sizeof a.name, "%s", name);
    a.stock = stock;
    a.per_user_limit = 1;
    a.start_ms = sk_wall_ms() - 1000;
    a.end_ms = a.start_ms + 7200000;
    a.created_ms = sk_wall_ms();
    a.segments = segments;
    a.wr_passes_per_s = rate;
    a.wr_pass_ttl_s = 60;
    snprintf(a.wr_seed, sizeof a.wr_seed, "%s", SEED);
    sk_activity_apply_defaults(&a);
    CHECK_EQ(sk_store_activity_insert(e->st, &a), 0);
    struct sk_stock_def d;
    sk_activity_stock_def(&a, &d);
    int rc;
    CHECK_EQ(sk_stock_preheat(e->r, &d, 0, &rc, NULL), 0);
    CHECK_EQ(rc, SK_RC_PREHEATED);
    CHECK_EQ(sk_stock_set_open(e->r, a.id, 1, &rc), 0);
    CHECK_EQ(rc, SK_RC_OK);
    CHECK_EQ(sk_store_activity_set_state(e->st, a.id, "open"), 0);
}

static void wenv_stop(struct wenv *e)
{
    sk_redis_free(e->r);
    sk_store_close(e->st);
    sk_th_redis_stop(&e->rs, 1);
}

/* One buyer's join or poll. */
static struct sk_queue_answer q1(sk_redis *r, uint64_t aid, char op, uint64_t uid,
                                 struct sk_queue_head *h)
{
    struct sk_queue_head tmp;
    struct sk_queue_answer a;
    if (!h) h = &tmp;
    int rc = sk_queue_call(r, aid, &op, &uid, 1, h, &a);
    CHECK_MSG(rc == 0, "queue call: %s (%s)", sk_strerror(rc), r->errstr);
    return a;
}

/* uid joins and polls until it has a pass (bounded). */
static struct sk_queue_answer admitted(sk_redis *r, uint64_t aid, uint64_t uid)
{
    int64_t deadline = sk_mono_ms() + 5000;
    struct sk_queue_answer a = q1(r, aid, SK_QUEUE_JOIN, uid, NULL);
    while (a.rc != SK_RC_Q_ADMITTED) {
        CHECK_MSG(a.rc == SK_RC_Q_WAITING, "user %" PRIu64 ": rc %d", uid, a.rc);
        CHECK_MSG(sk_mono_ms() < deadline, "user %" PRIu64 " got no pass within 5 s", uid);
        nap_ms(2);
        a = q1(r, aid, SK_QUEUE_POLL, uid, NULL);
    }
    return a;
}

static int buy_with(sk_redis *r, uint64_t aid, uint64_t uid, const char *pass)
{
    struct sk_purchase p = {
        .user_id = uid, .quantity = 1, .pass = pass, .pass_len = pass ? strlen(pass) : 0};
    struct sk_admission a;
    int rc = sk_stock_purchase_idem(r, aid, &p, &a, NULL);
    CHECK_MSG(rc == 0, "purchase: %s (%s)", sk_strerror(rc), r->errstr);
    return a.rc;
}

/* The recovery, applied as the order worker or an operator runs it. */
static void recover_apply(struct wenv *e, struct sk_recover_report *rep)
{
    struct sk_recover_opts o = {.apply = 1, .actor = "operator"};
    char err[512];
    CHECK_MSG(sk_recover_activity(e->st, e->r, e->aid, &o, rep, err, sizeof err) == 0, "%s", err);
}

/* Persists what the stream holds (the order worker, once). */
static void persist(struct wenv *e)
{
    struct sk_worker_opts o;
    sk_worker_opts_init(&o);
    o.redis_url = e->rs.url;
    o.db_spec = e->db;
    o.once = 1;
    o.guard_ms = 0;
    o.block_ms = 100;
    sk_worker *w;
    char err[256];
    CHECK_MSG(sk_worker_new(&w, &o, err, sizeof err) == 0, "%s", err);
    CHECK_EQ(sk_worker_run(w), 0);
    sk_worker_free(w);
}

/* Redis loses the activity's keys (as a restart from nothing does); the
 * recovery rebuilds every key set with the waiting room's seed, pace and
 * TTL from the database: a purchase without a pass is still refused, a
 * pass handed out before the loss still buys (it is signed, not stored),
 * the buyer who already bought is held to the limit by the replayed
 * orders, and the queue, whose places lived in Redis only, starts again
 * empty: a buyer who joins now is at its front. */
static void vanished_keys_keep_the_waiting_room(int segments)
{
    struct wenv e;
    wenv_start(&e, segments > 1 ? "wr_vanish_seg" : "wr_vanish", 50, 1000, segments);
    struct sk_queue_answer a1 = admitted(e.r, e.aid, 1);
    struct sk_queue_answer a2 = admitted(e.r, e.aid, 2);
    CHECK_EQ(buy_with(e.r, e.aid, 1, a1.pass), SK_RC_OK);
    persist(&e);
    CHECK_EQ(sk_stock_drop(e.r, e.aid), 0);
    struct sk_recover_report rep;
    recover_apply(&e, &rep);
    CHECK_EQ(rep.needed, 1);
    CHECK_EQ(rep.fenced_after, 0);
    sk_recover_report_free(&rep);
    /* every key set carries the waiting room again */
    for (int s = segments > 1 ? -1 : 0; s < (segments > 1 ? segments : 1); s++) {
        struct sk_keys k;
        if (s < 0 || segments == 1)
            sk_keys_for(&k, e.aid);
        else
            sk_keys_seg(&k, e.aid, s);
        redisReply *rep2;
        CHECK_EQ(sk_redis_cmd(e.r, &rep2, "HMGET %s wr_rate wr_ttl wr_seed", k.meta), 0);
        CHECK_EQ(rep2->elements, 3);
        for (int i = 0; i < 3; i++)
            CHECK_MSG(rep2->element[i]->type == REDIS_REPLY_STRING, "%s lost its waiting room",
                      k.meta);
        CHECK_STR(rep2->element[0]->str, "1000");
        CHECK_STR(rep2->element[1]->str, "60");
        CHECK_STR(rep2->element[2]->str, SEED);
        freeReplyObject(rep2);
    }
    struct sk_stock_state st0, st;
    CHECK_EQ(sk_stock_state(e.r, e.aid, &st0), 0);
    CHECK_EQ(st0.held, 1);
    /* no pass, another's: refused, nothing changes */
    CHECK_EQ(buy_with(e.r, e.aid, 3, NULL), SK_RC_NO_PASS);
    CHECK_EQ(buy_with(e.r, e.aid, 3, a2.pass), SK_RC_NO_PASS);
    CHECK_EQ(sk_stock_state(e.r, e.aid, &st), 0);
    CHECK_EQ(st.remaining, st0.remaining);
    CHECK_EQ(st.held, 1);
    /* the buyer of before: the limit holds */
    CHECK_EQ(buy_with(e.r, e.aid, 1, a1.pass), SK_RC_LIMIT_EXCEEDED);
    /* a pass of before buys */
    CHECK_EQ(buy_with(e.r, e.aid, 2, a2.pass), SK_RC_OK);
    /* the queue starts again: a new joiner is at its front */
    struct sk_queue_answer a4 = admitted(e.r, e.aid, 4);
    CHECK_EQ(a4.place, 1);
    CHECK_EQ(buy_with(e.r, e.aid, 4, a4.pass), SK_RC_OK);
    CHECK_EQ(sk_stock_state(e.r, e.aid, &st), 0);
    CHECK_EQ(st.held, 3);
    CHECK_EQ(st.remaining + st.held + st.in_transit, st.initial);
    CHECK_EQ(st.initial, 50);
    wenv_stop(&e);
}

SK_TEST_T(wr_vanished_keys_are_rebuilt_with_the_waiting_room, 120)
{
    vanished_keys_keep_the_waiting_room(1);
}

SK_TEST_T(wr_vanished_segments_are_rebuilt_with_the_waiting_room, 120)
{
    vanished_keys_keep_the_waiting_room(3);
}

