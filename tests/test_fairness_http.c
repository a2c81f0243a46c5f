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

#include <sqlite3.h>

#include "core/clock.h"
#include "engine/activity.h"
#include "engine/draw.h"
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
    EXPECT_ERROR(req(&v, "POST", "/api/v1/activities/1/register", NULL, NULL, &r), &r, 401, NULL);
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
    CHECK_MSG(strstr(r.body, "\"paused\":false") && strstr(r.body, "\"refuse_joins\":false"), "%s",
              r.body);
    EXPECT_STATUS(join(&v, aid, 22, &r), &r, 200);
    CHECK_EQ(sk_store_activity_get(st, aid, &a), 0);
    CHECK_EQ(a.wr_control, 0);
    sk_store_close(st);
    srv_stop(&v);
}

/* `seckill activity draw` on v's activity (extra: "--verify" or NULL). */
static int draw_cli(struct srv *v, uint64_t aid, const char *extra, char *out, size_t cap)
{
    char id[24];
    snprintf(id, sizeof id, "%" PRIu64, aid);
    const char *args[] = {"draw", "--id", id, extra, NULL};
    return sk_th_run_with_db(out, cap, "activity", args, sk_th_redis_url(), v->s.db);
}

/* The body's string field key into out ("" when absent). */
static void field(const struct sk_th_resp *r, const char *key, char *out, size_t cap)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":\"", key);
    const char *p = strstr(r->body, pat);
    out[0] = 0;
    if (!p) return;
    p += strlen(pat);
    size_t n = strcspn(p, "\"");
    snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), p);
}

/* A draw end to end: the commitment published before registration closes,
 * the draw made once by the CLI, the seed revealed, the commitment its
 * SHA-256, the recorded order recomputed (--verify), the one winner the
 * only buyer; a tampered record fails the verification. */
SK_TEST_T(fair_http_the_draw_is_committed_made_once_verified_and_only_winners_buy, 120)
{
    struct srv v;
    srv_start(&v, NULL);
    uint64_t aid = sk_th_unique_id();
    int64_t now = sk_wall_ms(), reg_end = (now / 1000 + 3) * 1000;
    char rs[40], re[40], e[40], body[800];
    rfc3339(now - 1000, rs, sizeof rs);
    rfc3339(reg_end, re, sizeof re);
    rfc3339(reg_end + HOUR_MS, e, sizeof e);
    snprintf(body, sizeof body,
             "{\"id\":%" PRIu64 ",\"name\":\"draw\",\"stock\":1,\"per_user_limit\":1,"
             "\"start\":\"%s\",\"end\":\"%s\",\"registration\":{\"start\":\"%s\",\"end\":\"%s\"},"
             "\"allocation\":\"draw\",\"draw\":{\"box_s\":600}}",
             aid, re, e, rs, re);
    struct sk_th_resp r;
    EXPECT_STATUS(admin(&v, "POST", "/api/v1/activities", body, &r), &r, 201);
    EXPECT_STATUS(admin_op(&v, aid, "preheat", NULL, &r), &r, 200);
    EXPECT_STATUS(admin_op(&v, aid, "open", NULL, &r), &r, 200);
    EXPECT_STATUS(get_activity(&v, aid, &r), &r, 200);
    char commit[80], seed[80];
    field(&r, "commitment", commit, sizeof commit);
    CHECK_MSG(strlen(commit) == 64 && !strstr(r.body, "\"seed\""), "%s", r.body);
    for (uint64_t u = 31; u <= 35; u++)
        EXPECT_STATUS(reg_req(&v, "POST", aid, u, &r), &r, 200);
    char out[4096];
    /* before registration closes: refused, nothing drawn */
    CHECK_EQ(draw_cli(&v, aid, NULL, out, sizeof out), 2);
    CHECK_MSG(strstr(out, "registration is still open") != NULL, "%s", out);
    while (sk_wall_ms() < reg_end + 50)
        sk_th_nap_ms(20);
    CHECK_MSG(draw_cli(&v, aid, NULL, out, sizeof out) == 0, "%s", out);
    char first[4096];
    snprintf(first, sizeof first, "%s", out);
    /* once: again, the same draw (written back to Redis), the same words */
    CHECK_MSG(draw_cli(&v, aid, NULL, out, sizeof out) == 0, "%s", out);
    CHECK_STR(out, first);
    CHECK_MSG(draw_cli(&v, aid, "--verify", out, sizeof out) == 0 && strstr(out, "verified"), "%s",
              out);
    /* serve's definitions are read again every 5 s: the seed shows then */
    int64_t deadline = sk_mono_ms() + 20000;
    do {
        sk_th_nap_ms(100);
        EXPECT_STATUS(get_activity(&v, aid, &r), &r, 200);
    } while (!strstr(r.body, "\"drawn\":true") && sk_mono_ms() < deadline);
    field(&r, "seed", seed, sizeof seed);
    CHECK_MSG(strlen(seed) == 64 && strstr(r.body, "\"drawn\":true"), "%s", r.body);
    CHECK_MSG(strstr(r.body, "\"registrants\":5") != NULL, "%s", r.body);
    char again[SK_DRAW_HEX];
    CHECK_EQ(sk_draw_commit(seed, again), 0);
    CHECK_STR(again, commit);

    /* the winner (place 1) holds a pass; everyone else buys nothing */
    uint64_t winner = 0;
    char pass[96] = "";
    for (uint64_t u = 31; u <= 35; u++) {
        EXPECT_STATUS(reg_req(&v, "GET", aid, u, &r), &r, 200);
        if (JINT(&r, "place") == 1) {
            winner = u;
            field(&r, "pass", pass, sizeof pass);
        }
    }
    CHECK_MSG(winner && pass[0], "no winner with a pass");
    char h[200];
    for (uint64_t u = 31; u <= 35; u++) {
        if (u == winner) continue;
        snprintf(h, sizeof h, "X-User-Id: %" PRIu64 "\r\n", u);
        EXPECT_ERROR(buy_hdr(&v, aid, h, NULL, &r), &r, 403, NULL);
        /* the winner's pass is bound to the winner */
        snprintf(h, sizeof h, "X-User-Id: %" PRIu64 "\r\nX-Queue-Pass: %s\r\n", u, pass);
        EXPECT_ERROR(buy_hdr(&v, aid, h, NULL, &r), &r, 403, NULL);
    }
    expect_stats(&v, aid, 1, 0, 0);
    snprintf(h, sizeof h, "X-User-Id: %" PRIu64 "\r\nX-Queue-Pass: %s\r\n", winner, pass);
    EXPECT_STATUS(buy_hdr(&v, aid, h, NULL, &r), &r, 200);
    expect_stats(&v, aid, 0, 1, 1);

    /* a record altered by hand no longer verifies */
    char sql[300];
    snprintf(sql, sizeof sql,
             "UPDATE registrations SET draw_rank = 6 - draw_rank WHERE activity_id = %" PRIu64,
             aid);
    sqlite3 *db;
    CHECK_EQ(sqlite3_open(v.s.db + strlen("sqlite:"), &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    CHECK_EQ(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    CHECK_EQ(sqlite3_changes(db), 5);
    sqlite3_close(db);
    CHECK_EQ(draw_cli(&v, aid, "--verify", out, sizeof out), 1);
    CHECK_MSG(strstr(out, "MISMATCH") != NULL, "%s", out);
    srv_stop(&v);
}
