/* test_waiting_room_recovery.c - the waiting room meets the rollback guard
 * (docs/waiting-room.md, docs/recovery.md), against private redis-servers
 * and SQLite files, on Redis's real clock: a fenced key set's queue hands
 * nothing out and its pace stands still until the recovery resumes it, and
 * a recovery that rebuilds vanished keys (unsegmented and segmented) puts
 * the waiting room back from the database, so a purchase still needs its
 * buyer's pass and the queue starts again empty; over HTTP a queue being
 * recovered answers 503 recovering with Retry-After. */
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
#include "engine/recovery.h"
#include "engine/stock.h"
#include "orders/order_worker.h"
#include "orders/recover.h"
#include "store/store.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/http_api.h"
#include "support/queue_env.h"
#include "support/serve_buy.h"

#define SEED "00112233445566778899aabbccddeeff"

/* A private Redis, a SQLite store, and one activity in both. */
struct wenv {
    struct sk_th_redis rs;
    char db[400];
    sk_store *st;
    sk_redis *r;
    uint64_t aid;
};

/* An open activity with a waiting room (rate passes/s, passes living 60 s,
 * limit 1), started a second ago, in the store and preheated in Redis. */
static void wenv_start(struct wenv *e, const char *name, int64_t stock, int64_t rate, int segments)
{
    sk_th_redis_start(&e->rs, NULL);
    snprintf(e->db, sizeof e->db, "sqlite:%s/%s.db", sk_th_tmpdir(), name);
    sk_th_buy_store(e->db); /* a segmented activity's purchases: serve on this store */
    char err[512];
    CHECK_MSG(sk_store_open(&e->st, e->db, err, sizeof err) == 0, "%s", err);
    CHECK_MSG(sk_redis_new(&e->r, e->rs.url, 2000, 5000, err, sizeof err) == 0, "%s", err);
    struct sk_activity a;
    sk_th_activity_live(&a, name, stock, segments, 1000);
    e->aid = a.id;
    a.wr_passes_per_s = rate;
    a.wr_pass_ttl_s = 60;
    snprintf(a.wr_seed, sizeof a.wr_seed, "%s", SEED);
    sk_th_activity_open_in(e->st, e->r, &a);
}

static void wenv_stop(struct wenv *e)
{
    sk_redis_free(e->r);
    sk_store_close(e->st);
    sk_th_redis_stop(&e->rs, 1);
}

static int buy_with(sk_redis *r, uint64_t aid, uint64_t uid, const char *pass)
{
    struct sk_purchase p = {
        .user_id = uid, .quantity = 1, .pass = pass, .pass_len = pass ? strlen(pass) : 0};
    struct sk_admission a;
    int rc = sk_th_stock_buy(r, aid, NULL, &p, 1, &a, NULL);
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
    sk_th_worker_run(&o);
}

/* While the key set is fenced nobody joins and no pass is handed out
 * (503 recovering over HTTP); the pace stands still from the fence on, so
 * the recovery's resume does not release the passes the fence held back
 * all at once; then the queue goes on where it stood. */
SK_TEST_T(wr_fenced_queue_hands_out_nothing_and_its_pace_stands_still, 120)
{
    struct wenv e;
    wenv_start(&e, "wr_fence", 100, 10, 1);
    uint64_t users[30];
    struct sk_queue_answer ans[30];
    struct sk_queue_head h;
    char ops[30];
    for (int i = 0; i < 30; i++) {
        users[i] = 100 + (uint64_t)i;
        ops[i] = SK_QUEUE_JOIN;
    }
    CHECK_EQ(sk_queue_call(e.r, e.aid, ops, users, 30, &h, ans), 0);
    CHECK_EQ(h.length, 30);
    struct sk_queue_stats st0, st1;
    int64_t t0 = sk_wall_ms();
    CHECK_EQ(sk_queue_pace(e.r, e.aid, 0, &st0), 0);
    struct sk_keys k;
    sk_keys_for(&k, e.aid);
    char fence[SK_FENCE_MAX];
    CHECK_EQ(sk_recovery_fence(e.r, &k, "manual", "a test fences the sale", fence), 0);
    int64_t fenced_at = sk_wall_ms();
    /* the operator's figures stand still too, polls or not */
    struct sk_queue_stats fa, fb;
    CHECK_EQ(sk_queue_pace(e.r, e.aid, 0, &fa), 0);
    /* two seconds of fence (20 passes' worth at 10/s), polled all along */
    int64_t last_poll = 0;
    while (sk_wall_ms() - fenced_at < 2000) {
        last_poll = sk_wall_ms();
        struct sk_queue_answer a = queue_one(e.r, e.aid, SK_QUEUE_POLL, users[29], &h);
        CHECK_EQ(h.rc, SK_RC_RECOVERING);
        CHECK_EQ(a.rc, SK_RC_RECOVERING);
        CHECK_EQ(a.pass[0], 0);
        /* a newcomer does not get in either */
        CHECK_EQ(queue_one(e.r, e.aid, SK_QUEUE_JOIN, 999, NULL).rc, SK_RC_RECOVERING);
        sk_th_nap_ms(50);
    }
    CHECK_EQ(sk_queue_pace(e.r, e.aid, 0, &fb), 0);
    CHECK_EQ(fb.issued, fa.issued);
    /* and no purchase goes through, pass or not */
    CHECK_EQ(buy_with(e.r, e.aid, users[0], ans[0].pass), SK_RC_RECOVERING);
    struct sk_recover_report rep;
    recover_apply(&e, &rep);
    CHECK_EQ(rep.needed, 1);
    CHECK_EQ(rep.fenced_after, 0);
    sk_recover_report_free(&rep);
    CHECK_EQ(sk_queue_pace(e.r, e.aid, 0, &st1), 0);
    int64_t t1 = sk_wall_ms();
    CHECK_EQ(st1.length, 30); /* nobody joined while fenced */
    /* passes grew only outside the fence: before it, and between the last
     * fenced poll and this read (2 of slack for the clocks' rounding) */
    int64_t allowed = st0.issued + 10 * ((fenced_at - t0) + (t1 - last_poll)) / 1000 + 2;
    CHECK_MSG(st1.issued <= allowed,
              "%" PRId64 " places hold a pass after the fence, %" PRId64
              " before it: the fence's 2 s were paced (%" PRId64 " allowed)",
              st1.issued, st0.issued, allowed);
    /* the queue goes on: the front buys with its pass, the pace moves */
    CHECK_EQ(buy_with(e.r, e.aid, users[0], ans[0].pass), SK_RC_OK);
    struct sk_queue_answer b = queue_admitted(e.r, e.aid, users[(size_t)st1.issued]);
    CHECK_EQ(b.place, st1.issued + 1);
    wenv_stop(&e);
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
    struct sk_queue_answer a1 = queue_admitted(e.r, e.aid, 1);
    struct sk_queue_answer a2 = queue_admitted(e.r, e.aid, 2);
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
    struct sk_queue_answer a4 = queue_admitted(e.r, e.aid, 4);
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

/* A queue call of uid (POST join, GET poll) over HTTP. */
static int queue_http(struct srv *v, const char *method, uint64_t aid, uint64_t uid,
                      struct sk_th_resp *r)
{
    char path[128], h[64];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/queue", aid);
    snprintf(h, sizeof h, "X-User-Id: %" PRIu64 "\r\n", uid);
    return req(v, method, path, h, NULL, r);
}

static void expect_recovering(struct srv *v, const char *method, uint64_t aid, uint64_t uid)
{
    struct sk_th_resp r;
    EXPECT_ERROR(queue_http(v, method, aid, uid, &r), &r, 503, "recovering");
    char ra[16];
    CHECK_MSG(sk_th_http_header(&r, "retry-after", ra, sizeof ra) == 0, "no Retry-After");
    CHECK_STR(ra, "1");
}

/* Over HTTP (an API-only node: no order worker recovers anything behind
 * the test's back): a fenced queue, and a queue whose keys vanished while
 * the database says the sale is open, answer joins and polls with 503
 * recovering and Retry-After: 1, not as a closed or unknown sale. */
SK_TEST(wr_http_a_queue_being_recovered_answers_503_recovering)
{
    struct srv v;
    const char *extra[] = {"--role", "api", NULL};
    srv_start(&v, extra);
    uint64_t aid = sk_th_unique_id();
    char s[40], en[40], body[600];
    int64_t now = sk_wall_ms();
    CHECK(sk_time_format_rfc3339(now - 1000, s, sizeof s) == 0);
    CHECK(sk_time_format_rfc3339(now + 3600000, en, sizeof en) == 0);
    snprintf(body, sizeof body,
             "{\"id\":%" PRIu64 ",\"name\":\"recovering queue\",\"stock\":10,"
             "\"per_user_limit\":1,\"start\":\"%s\",\"end\":\"%s\","
             "\"waiting_room\":{\"passes_per_s\":1000,\"pass_ttl_s\":60}}",
             aid, s, en);
    struct sk_th_resp r;
    EXPECT_STATUS(admin(&v, "POST", "/api/v1/activities", body, &r), &r, 201);
    EXPECT_STATUS(admin_op(&v, aid, "preheat", NULL, &r), &r, 200);
    EXPECT_STATUS(admin_op(&v, aid, "open", NULL, &r), &r, 200);
    EXPECT_STATUS(queue_http(&v, "POST", aid, 7, &r), &r, 200);
    char err[256];
    sk_redis *rd;
    CHECK_MSG(sk_redis_new(&rd, sk_th_redis_url(), 2000, 5000, err, sizeof err) == 0, "%s", err);
    struct sk_keys k;
    sk_keys_for(&k, aid);
    CHECK_EQ(sk_recovery_fence(rd, &k, "manual", "a test fences the sale", NULL), 0);
    expect_recovering(&v, "GET", aid, 7);
    expect_recovering(&v, "POST", aid, 8);
    /* the keys vanish (the database still says open) */
    CHECK_EQ(sk_stock_drop(rd, aid), 0);
    expect_recovering(&v, "GET", aid, 7);
    expect_recovering(&v, "POST", aid, 8);
    sk_redis_free(rd);
    srv_stop(&v);
}
