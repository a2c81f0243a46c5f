/* test_fairness_http.c - pre-registration and the waiting room's emergency
 * controls through a real `seckill serve` over real sockets, on the run's
 * real redis-server and a SQLite store read directly (docs/fairness.md,
 * docs/waiting-room.md): a buyer who did not register is refused with its
 * own code and changes nothing; registering is idempotent and stored; the
 * window is kept; the controls pause, refuse joins and resume, and are
 * refused for bad input. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "engine/activity.h"
#include "store/store.h"
#include "support/fixtures.h"
#include "support/http_api.h"

static int reg_req(struct srv *v, const char *method, uint64_t aid, uint64_t uid,
                   struct sk_th_resp *r)
{
    char path[128], h[96];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/register", aid);
    snprintf(h, sizeof h, "X-User-Id: %" PRIu64 "\r\n", uid);
    return req(v, method, path, h, NULL, r);
}

static int join(struct srv *v, uint64_t aid, uint64_t uid, struct sk_th_resp *r)
{
    char path[128], h[96];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/queue", aid);
    snprintf(h, sizeof h, "X-User-Id: %" PRIu64 "\r\n", uid);
    return req(v, "POST", path, h, NULL, r);
}

static int control(struct srv *v, uint64_t aid, const char *body, struct sk_th_resp *r)
{
    char path[128];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/queue/control", aid);
    return admin(v, "POST", path, body, r);
}

/* The registrations the store holds for aid (the serve's SQLite file). */
static int64_t stored_registrants(struct srv *v, uint64_t aid)
{
    sk_store *st;
    char err[256];
    CHECK_MSG(sk_store_open(&st, v->s.db, err, sizeof err) == 0, "open: %s", err);
    int64_t n = -1;
    CHECK_EQ(sk_store_registrations_count(st, aid, &n), 0);
    sk_store_close(st);
    return n;
}

SK_TEST_T(fair_http_only_registered_buyers_buy_and_a_refusal_changes_nothing, 90)
{
    struct srv v;
    srv_start(&v, NULL);
    uint64_t aid = sk_th_unique_id();
    /* registration now for 2 s; the sale from its end for an hour */
    int64_t now = sk_wall_ms(), reg_end = (now / 1000 + 3) * 1000;
    char rs[40], re[40], e[40], body[700];
    rfc3339(now - 1000, rs, sizeof rs);
    rfc3339(reg_end, re, sizeof re);
    rfc3339(reg_end + HOUR_MS, e, sizeof e);
    snprintf(body, sizeof body,
             "{\"id\":%" PRIu64 ",\"name\":\"reg\",\"stock\":5,\"per_user_limit\":1,"
             "\"start\":\"%s\",\"end\":\"%s\",\"registration\":{\"start\":\"%s\",\"end\":\"%s\"}}",
             aid, re, e, rs, re);
    struct sk_th_resp r;
    EXPECT_STATUS(admin(&v, "POST", "/api/v1/activities", body, &r), &r, 201);
    CHECK_MSG(strstr(r.body, "\"registration\":{\"start\":") != NULL, "%s", r.body);
    EXPECT_STATUS(admin_op(&v, aid, "preheat", NULL, &r), &r, 200);
    EXPECT_STATUS(admin_op(&v, aid, "open", NULL, &r), &r, 200);

    /* register, again (idempotent), another buyer */
    EXPECT_STATUS(reg_req(&v, "POST", aid, 11, &r), &r, 200);
    CHECK_EQ(JINT(&r, "registrants"), 1);
    EXPECT_STATUS(reg_req(&v, "POST", aid, 11, &r), &r, 200);
    CHECK_EQ(JINT(&r, "registrants"), 1);
    EXPECT_STATUS(reg_req(&v, "POST", aid, 12, &r), &r, 200);
    CHECK_EQ(JINT(&r, "registrants"), 2);
    EXPECT_STATUS(reg_req(&v, "GET", aid, 11, &r), &r, 200);
    CHECK_MSG(strstr(r.body, "\"registered\":true") != NULL, "%s", r.body);
    EXPECT_ERROR(reg_req(&v, "GET", aid, 13, &r), &r, 403, "not_registered");
    /* no identity: 401; an activity without registration: its own 404 */
    EXPECT_ERROR(req(&v, "POST", "/api/v1/activities/1/register", NULL, NULL, &r), &r, 401,
                 NULL);
    uint64_t plain = sk_th_unique_id();
    ready_act(&v, plain, 5, 1, 1, W_NOW);
    EXPECT_ERROR(reg_req(&v, "POST", plain, 11, &r), &r, 404, "no_registration");

    /* the store's copy follows off the loop */
    int64_t deadline = sk_mono_ms() + 10000;
    while (stored_registrants(&v, aid) != 2 && sk_mono_ms() < deadline)
        sk_th_nap_ms(20);
    CHECK_EQ(stored_registrants(&v, aid), 2);

    /* the sale opens as registration closes */
    while (sk_wall_ms() < reg_end + 50)
        sk_th_nap_ms(20);
    EXPECT_ERROR(reg_req(&v, "POST", aid, 14, &r), &r, 403, "registration_closed");
    for (int i = 0; i < 3; i++)
        EXPECT_ERROR(buy(&v, aid, 13, NULL, &r), &r, 403, "not_registered");
    expect_stats(&v, aid, 5, 0, 0); /* nothing taken, nobody counted */
    EXPECT_STATUS(buy(&v, aid, 11, NULL, &r), &r, 200);
    EXPECT_STATUS(buy(&v, aid, 12, NULL, &r), &r, 200);
    expect_stats(&v, aid, 3, 2, 2);
    CHECK_EQ(stored_registrants(&v, aid), 2);
    srv_stop(&v);
}

SK_TEST_T(fair_http_controls_refuse_joins_pause_and_resume, 90)
{
    struct srv v;
    srv_start(&v, NULL);
    uint64_t aid = sk_th_unique_id();
    int64_t now = sk_wall_ms();
    char s[40], e[40], body[700];
    rfc3339(now - 2000, s, sizeof s);
    rfc3339(now + HOUR_MS, e, sizeof e);
    snprintf(body, sizeof body,
             "{\"id\":%" PRIu64 ",\"name\":\"ctl\",\"stock\":50,\"per_user_limit\":1,"
             "\"start\":\"%s\",\"end\":\"%s\","
             "\"waiting_room\":{\"passes_per_s\":1000,\"pass_ttl_s\":60}}",
             aid, s, e);
    struct sk_th_resp r;
    EXPECT_STATUS(admin(&v, "POST", "/api/v1/activities", body, &r), &r, 201);
    EXPECT_STATUS(admin_op(&v, aid, "preheat", NULL, &r), &r, 200);
    EXPECT_STATUS(admin_op(&v, aid, "open", NULL, &r), &r, 200);

    /* bad input and no token: refused, nothing set */
    const char *bad[] = {"", "{}", "{\"action\":\"stop\"}", "{\"action\":1}", "[", "null"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        EXPECT_ERROR(control(&v, aid, bad[i], &r), &r, 400, "bad_request");
    char path[128];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/queue/control", aid);
    EXPECT_ERROR(req(&v, "POST", path, NULL, "{\"action\":\"pause\"}", &r), &r, 401, NULL);
    EXPECT_ERROR(control(&v, 999999999, "{\"action\":\"pause\"}", &r), &r, 404, NULL);
    uint64_t plain = sk_th_unique_id();
    ready_act(&v, plain, 5, 1, 1, W_NOW);
    EXPECT_ERROR(control(&v, plain, "{\"action\":\"pause\"}", &r), &r, 404, "no_waiting_room");
    EXPECT_STATUS(join(&v, aid, 21, &r), &r, 200);

    /* refuse joins: a new buyer is turned away, one in line is not */
    EXPECT_STATUS(control(&v, aid, "{\"action\":\"refuse_joins\"}", &r), &r, 200);
    CHECK_MSG(strstr(r.body, "\"refuse_joins\":true") != NULL, "%s", r.body);
    EXPECT_ERROR(join(&v, aid, 22, &r), &r, 403, "joins_closed");
    EXPECT_STATUS(join(&v, aid, 21, &r), &r, 200);
    /* pause keeps refusing joins; the activity's read says so */
    EXPECT_STATUS(control(&v, aid, "{\"action\":\"pause\"}", &r), &r, 200);
    CHECK_MSG(strstr(r.body, "\"paused\":true") && strstr(r.body, "\"refuse_joins\":true"), "%s",
              r.body);
    EXPECT_STATUS(get_activity(&v, aid, &r), &r, 200);
    CHECK_MSG(strstr(r.body, "\"controls\":{\"paused\":true") != NULL, "%s", r.body);
    /* the store keeps the bits */
    sk_store *st;
    char err[256];
    struct sk_activity a;
    CHECK_MSG(sk_store_open(&st, v.s.db, err, sizeof err) == 0, "open: %s", err);
    CHECK_EQ(sk_store_activity_get(st, aid, &a), 0);
    CHECK_EQ(a.wr_control, SK_WR_PAUSE | SK_WR_NO_JOINS);
    /* resume lifts all: the new buyer joins */
    EXPECT_STATUS(control(&v, aid, "{\"action\":\"resume\"}", &r), &r, 200);
    CHECK_MSG(strstr(r.body, "\"paused\":false") && strstr(r.body, "\"refuse_joins\":false"),
              "%s", r.body);
    EXPECT_STATUS(join(&v, aid, 22, &r), &r, 200);
    CHECK_EQ(sk_store_activity_get(st, aid, &a), 0);
    CHECK_EQ(a.wr_control, 0);
    sk_store_close(st);
    srv_stop(&v);
}
