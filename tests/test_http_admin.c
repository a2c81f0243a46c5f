/* test_http_admin.c - the admin routes of the HTTP API v1 (README) proved
 * from outside, like test_http_contract.c (whose helpers, shared through
 * support/http_api.h, this uses): a real `seckill serve` process over real
 * sockets, against the run's shared redis-server, with fresh activity ids
 * per test.
 *
 * Covered: admin create / preheat / open / close / stats (status codes,
 * body fields, segments, 401 without the admin token) and the activity
 * read with each live state. Response bodies are parsed with jansson, so a
 * test checks JSON fields and types, never byte layouts. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "core/clock.h"
#include "engine/activity.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/http_api.h"
#include "support/http_client.h"
#include "support/served_activity.h"

/* ------------------------------------------------------------ admin create */

SK_TEST(admin_create_answers_201_with_the_activity_and_409_for_a_duplicate)
{
    struct srv v;
    struct sk_th_resp r;
    char body[512], s[40], e[40], got[64];
    int64_t sm, em;
    uint64_t id = sk_th_unique_id();
    srv_start(&v, NULL);
    window_ms(W_NOW, &sm, &em); /* once: the echo must match what was sent */
    rfc3339(sm, s, sizeof s);
    rfc3339(em, e, sizeof e);
    create_body_ms(body, sizeof body, id, 25, 2, 1, sm, em);
    EXPECT_STATUS(admin(&v, "POST", "/api/v1/activities", body, &r), &r, 201);
    char ct[64];
    CHECK(sk_th_http_header(&r, "content-type", ct, sizeof ct) == 0);
    CHECK(strncmp(ct, "application/json", 16) == 0);
    CHECK_EQ(JINT(&r, "id"), id);
    JSTR(&r, "name", got);
    CHECK(strncmp(got, "sale ", 5) == 0);
    JSTR(&r, "start", got);
    CHECK_STR(got, s);
    JSTR(&r, "end", got);
    CHECK_STR(got, e);
    CHECK_EQ(JINT(&r, "stock_initial"), 25);
    CHECK_EQ(JINT(&r, "stock_remaining"), 25);
    CHECK_EQ(JINT(&r, "per_user_limit"), 2);
    JSTR(&r, "state", got);
    CHECK_STR(got, "closed"); /* not preheated: nothing can sell yet */

    /* Same id again, even with other values: 409, the first one stays. */
    create_body(body, sizeof body, id, 99, 1, 1, W_FUTURE);
    EXPECT_ERROR(admin(&v, "POST", "/api/v1/activities", body, &r), &r, 409, NULL);
    EXPECT_STATUS(get_activity(&v, id, &r), &r, 200);
    CHECK_EQ(JINT(&r, "stock_initial"), 25);
    JSTR(&r, "start", got);
    CHECK_STR(got, s);

    /* RFC 3339 with an offset and a fraction is a valid time too; max_per_order
     * and pay_timeout_s are optional. */
    uint64_t id2 = sk_th_unique_id();
    snprintf(body, sizeof body,
             "{\"id\":%" PRIu64 ",\"name\":\"offset\",\"stock\":1,\"per_user_limit\":1,"
             "\"start\":\"2030-01-01T10:00:00.5+02:00\",\"end\":\"2030-01-01T12:00:00+02:00\"}",
             id2);
    EXPECT_STATUS(admin(&v, "POST", "/api/v1/activities", body, &r), &r, 201);
    JSTR(&r, "end", got);
    CHECK_STR(got, "2030-01-01T10:00:00Z");
    srv_stop(&v);
}

/* A create body with one field replaced (value) or left out (value NULL);
 * fields not in the base (max_per_order, ...) are appended. "@S" and "@E"
 * stand for the quoted valid start and end. */
static void body_with(char *buf, size_t cap, uint64_t id, const char *s, const char *e,
                      const char *field, const char *value)
{
    char ids[24], qs[48], qe[48];
    snprintf(ids, sizeof ids, "%" PRIu64, id);
    snprintf(qs, sizeof qs, "\"%s\"", s);
    snprintf(qe, sizeof qe, "\"%s\"", e);
    const char *names[] = {"id", "name", "stock", "per_user_limit", "start", "end"};
    const char *vals[] = {ids, "\"n\"", "10", "1", qs, qe};
    size_t o = (size_t)snprintf(buf, cap, "{");
    int found = 0;
    for (int i = 0; i < 6; i++) {
        const char *v = vals[i];
        if (!strcmp(names[i], field)) {
            found = 1;
            if (!value) continue;
            v = !strcmp(value, "@S") ? qs : !strcmp(value, "@E") ? qe : value;
        }
        o += (size_t)snprintf(buf + o, cap - o, "%s\"%s\":%s", o > 1 ? "," : "", names[i], v);
    }
    if (!found) o += (size_t)snprintf(buf + o, cap - o, ",\"%s\":%s", field, value);
    snprintf(buf + o, cap - o, "}");
}

#define X16 "xxxxxxxxxxxxxxxx"
#define NAME_128 "\"" X16 X16 X16 X16 X16 X16 X16 X16 "\""

SK_TEST(admin_create_refuses_each_malformed_field_with_400)
{
    struct srv v;
    struct sk_th_resp r;
    char s[40], e[40], body[512];
    int64_t sm, em;
    uint64_t id = sk_th_unique_id();
    window_ms(W_NOW, &sm, &em);
    rfc3339(sm, s, sizeof s);
    rfc3339(em, e, sizeof e);
    static const struct {
        const char *field, *value; /* value NULL: the field is missing */
    } bad[] = {
        /* negative, zero, out of range */
        {"stock", "-1"},
        {"stock", "0"},
        {"stock", "99999999999999999999999"},
        {"per_user_limit", "0"},
        {"per_user_limit", "-1"},
        {"id", "0"},
        {"id", "-5"},
        {"id", "1000000000000000"}, /* above the 15-digit id limit */
        {"max_per_order", "0"},
        {"max_per_order", "2"}, /* above per_user_limit 1 */
        {"pay_timeout_s", "0"},
        /* windows */
        {"start", "@E"}, /* start == end */
        {"end", "\"2000-01-01T00:00:00Z\""},
        /* not RFC 3339 */
        {"start", "\"2030-01-01\""},
        {"start", "\"tomorrow\""},
        {"start", "\"2030-13-01T00:00:00Z\""},
        {"start", "\"2030-02-30T00:00:00Z\""},
        {"start", "\"2030-01-01T00:00:00\""}, /* no zone */
        {"end", "\"\""},
        /* missing */
        {"id", NULL},
        {"name", NULL},
        {"stock", NULL},
        {"per_user_limit", NULL},
        {"start", NULL},
        {"end", NULL},
        /* wrong types */
        {"id", "\"5\""},
        {"id", "1.5"},
        {"name", "5"},
        {"name", "\"\""},
        {"name", "null"},
        {"name", "\"a\\u0001b\""}, /* control character */
        {"name", NAME_128},        /* 1..127 bytes */
        {"stock", "\"10\""},
        {"stock", "1.5"},
        {"stock", "1e3"},
        {"stock", "[10]"},
        {"per_user_limit", "true"},
        {"start", "1900000000"},
        {"end", "null"},
        /* segments: an integer 1..256, at most the stock (10 here) */
        {"segments", "0"},
        {"segments", "-1"},
        {"segments", "257"},
        {"segments", "11"},
        {"segments", "\"4\""},
        {"segments", "1.5"},
        {"segments", "2e0"},
        {"segments", "null"},
        {"segments", "true"},
        {"segments", "[4]"},
    };
    /* Bodies that are not one JSON object. */
    static const char *const not_object[] = {"", "null", "[]", "{", "id=1", "{}", "{} {}"};
    srv_start(&v, NULL);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        body_with(body, sizeof body, id, s, e, bad[i].field, bad[i].value);
        int st = admin(&v, "POST", "/api/v1/activities", body, &r);
        if (st != 400) sk_th_fail(__FILE__, __LINE__, "%s -> %d %s", body, st, r.body);
        EXPECT_ERROR(st, &r, 400, "bad_request");
    }
    for (size_t i = 0; i < sizeof not_object / sizeof not_object[0]; i++) {
        int st = admin(&v, "POST", "/api/v1/activities", not_object[i], &r);
        if (st != 400) sk_th_fail(__FILE__, __LINE__, "'%s' -> %d %s", not_object[i], st, r.body);
        EXPECT_ERROR(st, &r, 400, "bad_request");
    }
    /* None of them created the activity; the valid base body does. */
    EXPECT_ERROR(get_activity(&v, id, &r), &r, 404, "unknown_activity");
    /* an unknown field is refused, named: a typo must not take a default */
    body_with(body, sizeof body, id, s, e, "pay_timout_s", "30");
    EXPECT_ERROR(admin(&v, "POST", "/api/v1/activities", body, &r), &r, 400, "bad_request");
    CHECK_MSG(strstr(r.body, "unknown field pay_timout_s"), "%s", r.body);
    EXPECT_ERROR(get_activity(&v, id, &r), &r, 404, "unknown_activity");
    body_with(body, sizeof body, id, s, e, "name", "\"ok\"");
    EXPECT_STATUS(admin(&v, "POST", "/api/v1/activities", body, &r), &r, 201);
    srv_stop(&v);
}

/* Unknown fields in any admin or buyer body: 400 naming the field, and
 * nothing changed; open, close and preheat take no body but {} (preheat:
 * {"force":bool}), and refuse garbage alike. */
SK_TEST(every_admin_and_buyer_body_refuses_an_unknown_field_naming_it)
{
    struct srv v;
    struct sk_th_resp r;
    char s[40], e[40], body[600], path[160];
    int64_t sm, em;
    window_ms(W_NOW, &sm, &em);
    rfc3339(sm, s, sizeof s);
    rfc3339(em, e, sizeof e);
    uint64_t id = srv_start_activity(&v, ACT_CREATED, 10, 2, 2);
    static const struct {
        const char *method, *op, *body, *field;
    } bad[] = {
        {"POST", "preheat", "{\"forse\":true}", "forse"},
        {"POST", "preheat", "garbage", NULL},
        {"POST", "preheat", "[]", NULL},
        {"POST", "preheat", "{\"force\":1}", NULL},
        {"POST", "open", "garbage", NULL},
        {"POST", "open", "{\"force\":true}", "force"},
        {"POST", "close", "{\"now\":1}", "now"},
        {"POST", "queue/pace", "{\"passes_per_s\":5,\"pace\":1}", "pace"},
        {"DELETE", "", "{\"forced\":true}", "forced"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "%s%s", id,
                 bad[i].op[0] ? "/" : "", bad[i].op);
        int st = admin(&v, bad[i].method, path, bad[i].body, &r);
        if (st != 400)
            sk_th_fail(__FILE__, __LINE__, "%s %s '%s' -> %d %s", bad[i].method, path, bad[i].body,
                       st, r.body);
        EXPECT_ERROR(st, &r, 400, "bad_request");
        if (bad[i].field) {
            char want[64];
            snprintf(want, sizeof want, "unknown field %s", bad[i].field);
            CHECK_MSG(strstr(r.body, want), "%s: %s", bad[i].body, r.body);
        }
    }
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "?forse=true", id);
    EXPECT_ERROR(admin(&v, "DELETE", path, NULL, &r), &r, 400, "bad_request");
    expect_state(&v, id, "closed"); /* created: not preheated, nothing changed */
    /* nested objects of the create body */
    static const char *const nested[][2] = {
        {"rate_limit", "{\"per_user_per_s\":5,\"brust\":2}"},
        {"waiting_room", "{\"passes_per_s\":5,\"seeds\":\"00\"}"},
    };
    uint64_t id2 = sk_th_unique_id();
    for (size_t i = 0; i < 2; i++) {
        body_with(body, sizeof body, id2, s, e, nested[i][0], nested[i][1]);
        EXPECT_ERROR(admin(&v, "POST", "/api/v1/activities", body, &r), &r, 400, "bad_request");
        CHECK_MSG(strstr(r.body, "unknown field") && strstr(r.body, nested[i][0]), "%s", r.body);
    }
    EXPECT_ERROR(get_activity(&v, id2, &r), &r, 404, "unknown_activity");
    /* buyers: purchase, pay, cancel, the waiting room's join */
    EXPECT_STATUS(admin_op(&v, id, "preheat", "{}", &r), &r, 200);
    EXPECT_STATUS(admin_op(&v, id, "open", "", &r), &r, 200);
    EXPECT_ERROR(buy(&v, id, 5, "{\"quantity\":1,\"qty\":2}", &r), &r, 400, "bad_request");
    CHECK_MSG(strstr(r.body, "unknown field qty"), "%s", r.body);
    CHECK_EQ(remaining(&v, id), 10);
    EXPECT_STATUS(buy(&v, id, 5, "{\"quantity\":1}", &r), &r, 200);
    char oid[96];
    JSTR(&r, "order_id", oid);
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "/api/v1/orders/%s/%s", oid, k ? "cancel" : "pay");
        EXPECT_ERROR(req(&v, "POST", path, "X-User-Id: 5\r\n", "{\"amount\":1}", &r), &r, 400,
                     "bad_request");
        CHECK_MSG(strstr(r.body, "unknown field amount"), "%s", r.body);
    }
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/queue", id);
    EXPECT_ERROR(req(&v, "POST", path, "X-User-Id: 5\r\n", "{\"seat\":1}", &r), &r, 400,
                 "bad_request");
    CHECK_EQ(remaining(&v, id), 9);
    srv_stop(&v);
}

/* GET /api/v1/activities: every activity with its live state, as `seckill
 * activity list --json` shows it; admins only. */
SK_TEST(admin_list_shows_every_activity_with_its_live_state_for_admins_only)
{
    struct srv v;
    struct sk_th_resp r;
    uint64_t a = srv_start_activity(&v, ACT_READY, 10, 2, 2);
    uint64_t b = sk_th_unique_id();
    create_act(&v, b, 5, 1, 1, W_FUTURE);
    EXPECT_STATUS(buy(&v, a, 3, "{\"quantity\":2}", &r), &r, 200);
    EXPECT_STATUS(admin(&v, "GET", "/api/v1/activities", NULL, &r), &r, 200);
    json_t *root = body_obj(__FILE__, __LINE__, &r);
    json_t *list = json_object_get(root, "activities");
    CHECK(json_is_array(list));
    int seen = 0;
    size_t i;
    json_t *it;
    json_array_foreach(list, i, it)
    {
        uint64_t id = (uint64_t)json_integer_value(json_object_get(it, "id"));
        const char *state = json_string_value(json_object_get(it, "state"));
        if (id == a) {
            seen |= 1;
            CHECK_STR(state, "open");
            CHECK_EQ(json_integer_value(json_object_get(it, "stock_remaining")), 8);
            CHECK_EQ(json_integer_value(json_object_get(it, "admitted")), 2);
            CHECK(json_is_true(json_object_get(it, "preheated")));
        } else if (id == b) {
            seen |= 2;
            CHECK_STR(json_string_value(json_object_get(it, "stored_state")), "created");
            CHECK(json_is_false(json_object_get(it, "preheated")));
            CHECK_EQ(json_integer_value(json_object_get(it, "stock_remaining")), 5);
        }
    }
    json_decref(root);
    CHECK_EQ(seen, 3);
    EXPECT_ERROR(req(&v, "GET", "/api/v1/activities", NULL, NULL, &r), &r, 401, "unauthorized");
    EXPECT_ERROR(req(&v, "PUT", "/api/v1/activities", NULL, NULL, &r), &r, 405, NULL);
    srv_stop(&v);
}

/* DELETE /api/v1/activities/{id}, the rules of `seckill activity delete`:
 * refused while open (409 is_open) and while orders are not settled (409
 * open_orders, saying which); forced, the unpaid orders are cancelled, the
 * answer says so, and such an order can no longer be paid. */
SK_TEST(admin_delete_refuses_open_sales_and_unsettled_orders_unless_forced)
{
    struct srv v;
    struct sk_th_resp r;
    char path[160], oid[96], opath[200];
    uint64_t id = srv_start_activity(&v, ACT_READY, 10, 2, 2);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64, id);
    EXPECT_ERROR(admin(&v, "DELETE", path, NULL, &r), &r, 409, "is_open");
    snprintf(opath, sizeof opath, "%s?force=true", path);
    EXPECT_ERROR(admin(&v, "DELETE", opath, NULL, &r), &r, 409, "is_open"); /* force: no */
    EXPECT_STATUS(buy(&v, id, 4, NULL, &r), &r, 200);
    JSTR(&r, "order_id", oid);
    EXPECT_STATUS(admin_op(&v, id, "close", NULL, &r), &r, 200);
    /* persisted by the node's worker: created, unpaid */
    snprintf(opath, sizeof opath, "/api/v1/orders/%s", oid);
    int64_t deadline = sk_mono_ms() + 20000;
    for (;;) {
        EXPECT_STATUS(req(&v, "GET", opath, "X-User-Id: 4\r\n", NULL, &r), &r, 200);
        if (strstr(r.body, "\"created\"")) break;
        CHECK_MSG(sk_mono_ms() < deadline, "never persisted: %s", r.body);
        sk_th_nap_ms(50);
    }
    EXPECT_ERROR(admin(&v, "DELETE", path, NULL, &r), &r, 409, "open_orders");
    CHECK_MSG(strstr(r.body, "1 unpaid order(s)") && strstr(r.body, "force"), "%s", r.body);
    expect_state(&v, id, "closed");
    snprintf(opath, sizeof opath, "%s?force=true", path);
    EXPECT_STATUS(admin(&v, "DELETE", opath, NULL, &r), &r, 200);
    CHECK_EQ(JINT(&r, "unpaid_cancelled"), 1);
    CHECK_MSG(strstr(r.body, "cannot be paid"), "%s", r.body);
    EXPECT_ERROR(get_activity(&v, id, &r), &r, 404, "unknown_activity");
    EXPECT_ERROR(admin(&v, "DELETE", path, NULL, &r), &r, 404, "unknown_activity");
    snprintf(opath, sizeof opath, "/api/v1/orders/%s/pay", oid);
    EXPECT_ERROR(req(&v, "POST", opath, "X-User-Id: 4\r\n", NULL, &r), &r, 409, NULL);
    /* the order stays, so the id is not given to a new sale */
    char body[512];
    create_body(body, sizeof body, id, 5, 1, 1, W_FUTURE);
    EXPECT_ERROR(admin(&v, "POST", "/api/v1/activities", body, &r), &r, 409, "already_exists");
    CHECK_MSG(strstr(r.body, "was deleted but its 1 orders are still in the database"), "%s",
              r.body);
    EXPECT_ERROR(get_activity(&v, id, &r), &r, 404, "unknown_activity");
    srv_stop(&v);
}

/* A segments value and the error it gets. */
struct segments_refusal {
    const char *value, *want;
};

SK_TEST(admin_create_takes_segments_echoes_them_and_refuses_bad_ones_with_a_reason)
{
    struct srv v;
    struct sk_th_resp r;
    char s[40], e[40], body[512], msg[256];
    int64_t sm, em;
    uint64_t seg = sk_th_unique_id(), plain = sk_th_unique_id(), bad = sk_th_unique_id();
    window_ms(W_NOW, &sm, &em);
    rfc3339(sm, s, sizeof s);
    rfc3339(em, e, sizeof e);
    srv_start(&v, NULL);

    /* Given: echoed by the create answer and by the activity read. */
    body_with(body, sizeof body, seg, s, e, "segments", "4");
    EXPECT_STATUS(admin(&v, "POST", "/api/v1/activities", body, &r), &r, 201);
    CHECK_EQ(JINT(&r, "segments"), 4);
    CHECK_EQ(JINT(&r, "stock_initial"), 10);
    EXPECT_STATUS(get_activity(&v, seg, &r), &r, 200);
    CHECK_EQ(JINT(&r, "segments"), 4);
    /* Left out: 1. */
    body_with(body, sizeof body, plain, s, e, "name", "\"plain\"");
    EXPECT_STATUS(admin(&v, "POST", "/api/v1/activities", body, &r), &r, 201);
    CHECK_EQ(JINT(&r, "segments"), 1);
    EXPECT_STATUS(get_activity(&v, plain, &r), &r, 200);
    CHECK_EQ(JINT(&r, "segments"), 1);

    /* Refused with a message that names the field and the rule. */
    static const struct segments_refusal refused[] = {
        {"0", "segments must be an integer between 1 and 256"},
        {"257", "segments must be an integer between 1 and 256"},
        {"\"2\"", "segments must be an integer between 1 and 256"},
        {"11", "segments (11) must not exceed the stock (10)"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        body_with(body, sizeof body, bad, s, e, "segments", refused[i].value);
        EXPECT_ERROR(admin(&v, "POST", "/api/v1/activities", body, &r), &r, 400, "bad_request");
        JSTR(&r, "message", msg);
        CHECK_MSG(strstr(msg, refused[i].want) != NULL, "segments %s: message '%s' lacks '%s'",
                  refused[i].value, msg, refused[i].want);
    }
    EXPECT_ERROR(get_activity(&v, bad, &r), &r, 404, "unknown_activity");
    /* Equal to the stock (one unit per segment) is fine. */
    body_with(body, sizeof body, bad, s, e, "segments", "10");
    EXPECT_STATUS(admin(&v, "POST", "/api/v1/activities", body, &r), &r, 201);
    CHECK_EQ(JINT(&r, "segments"), 10);
    srv_stop(&v);
}

/* The whole lifecycle of a segmented activity over HTTP: preheat writes
 * every segment, GET and stats sum them, buyers drain all segments
 * (borrowing across them), close closes every segment. */
SK_TEST(segmented_activity_preheats_opens_sells_out_and_closes_over_http)
{
    struct srv v;
    struct sk_th_resp r;
    char s[40], e[40], body[512], st[32];
    int64_t sm, em;
    uint64_t id = sk_th_unique_id();
    window_ms(W_NOW, &sm, &em);
    rfc3339(sm, s, sizeof s);
    rfc3339(em, e, sizeof e);
    srv_start(&v, NULL);
    body_with(body, sizeof body, id, s, e, "segments", "4"); /* stock 10, limit 1 */
    EXPECT_STATUS(admin(&v, "POST", "/api/v1/activities", body, &r), &r, 201);
    EXPECT_ERROR(admin_op(&v, id, "open", NULL, &r), &r, 409, "not_preheated");
    EXPECT_STATUS(admin_op(&v, id, "preheat", NULL, &r), &r, 200);
    CHECK_EQ(JINT(&r, "stock_remaining"), 10);
    EXPECT_STATUS(admin_op(&v, id, "preheat", NULL, &r), &r, 200); /* live: left alone */
    CHECK_EQ(JINT(&r, "stock_remaining"), 10);
    EXPECT_STATUS(buy(&v, id, 1, NULL, &r), &r, 403); /* not open yet */
    EXPECT_STATUS(admin_op(&v, id, "open", NULL, &r), &r, 200);
    expect_state(&v, id, "open");
    /* 10 users buy one unit each: their homes drain unevenly and borrow */
    for (uint64_t u = 1; u <= 9; u++)
        EXPECT_STATUS(buy(&v, id, u, NULL, &r), &r, 200);
    for (uint64_t u = 1; u <= 9; u++)
        EXPECT_ERROR(buy(&v, id, u, NULL, &r), &r, 409, "limit_exceeded");
    EXPECT_STATUS(buy(&v, id, 10, NULL, &r), &r, 200);
    EXPECT_ERROR(buy(&v, id, 11, NULL, &r), &r, 409, "sold_out");
    CHECK_EQ(remaining(&v, id), 0);
    expect_stats(&v, id, 0, 10, 10);
    EXPECT_STATUS(admin_op(&v, id, "stats", NULL, &r), &r, 200);
    CHECK_EQ(JINT(&r, "segments"), 4);
    CHECK_EQ(JINT(&r, "in_transit"), 0);
    EXPECT_STATUS(admin_op(&v, id, "close", NULL, &r), &r, 200);
    EXPECT_STATUS(get_activity(&v, id, &r), &r, 200);
    JSTR(&r, "state", st);
    CHECK_MSG(strcmp(st, "closed") == 0 || strcmp(st, "sold_out") == 0, "state %s", st);
    srv_stop(&v);
}

SK_TEST(admin_routes_answer_401_without_the_admin_token)
{
    struct srv v;
    struct sk_th_resp r;
    uint64_t id = sk_th_unique_id(), id2 = sk_th_unique_id();
    char body[512], path[128];
    static const char *const creds[] = {
        NULL,
        "Authorization: Bearer wrong-token\r\n",
        "Authorization: Bearer " SK_TH_ADMIN_TOKEN "x\r\n",
        "Authorization: Bearer test-admin-toke\r\n",
        "Authorization: Basic " SK_TH_ADMIN_TOKEN "\r\n",
        "Authorization: " SK_TH_ADMIN_TOKEN "\r\n",
        "Authorization: Bearer\r\n",
        "X-Admin-Token: " SK_TH_ADMIN_TOKEN "\r\n",
    };
    srv_start(&v, NULL);
    create_act(&v, id, 10, 1, 1, W_NOW);
    create_body(body, sizeof body, id2, 10, 1, 1, W_NOW);
    for (size_t i = 0; i < sizeof creds / sizeof creds[0]; i++) {
        EXPECT_ERROR(req(&v, "POST", "/api/v1/activities", creds[i], body, &r), &r, 401,
                     "unauthorized");
        static const char *const ops[] = {"preheat", "open", "close", "stats"};
        for (size_t k = 0; k < 4; k++) {
            snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/%s", id, ops[k]);
            EXPECT_ERROR(req(&v, k == 3 ? "GET" : "POST", path, creds[i], NULL, &r), &r, 401,
                         "unauthorized");
        }
    }
    /* Nothing happened: id2 does not exist, id was never preheated. */
    EXPECT_ERROR(get_activity(&v, id2, &r), &r, 404, "unknown_activity");
    EXPECT_STATUS(admin_op(&v, id, "stats", NULL, &r), &r, 200);
    json_t *j = body_obj(__FILE__, __LINE__, &r);
    CHECK_MSG(json_is_false(json_object_get(j, "preheated")), "stats: %s", r.body);
    json_decref(j);
    srv_stop(&v);
}

/* ----------------------------------------------------- preheat, open, close */

SK_TEST(preheat_twice_keeps_live_stock_and_force_while_open_is_409)
{
    struct srv v;
    struct sk_th_resp r;
    char got[32];
    uint64_t id = srv_start_activity(&v, ACT_CREATED, 5, 1, 1);
    EXPECT_STATUS(admin_op(&v, id, "preheat", NULL, &r), &r, 200);
    CHECK_EQ(JINT(&r, "id"), id);
    CHECK_EQ(JINT(&r, "stock_remaining"), 5);
    EXPECT_STATUS(admin_op(&v, id, "open", NULL, &r), &r, 200);
    EXPECT_STATUS(buy(&v, id, 1, NULL, &r), &r, 200);
    EXPECT_STATUS(buy(&v, id, 2, NULL, &r), &r, 200);
    CHECK_EQ(remaining(&v, id), 3);

    /* A second preheat (with or without an explicit force:false) is a
     * no-op: it must not give the sold units back. */
    EXPECT_STATUS(admin_op(&v, id, "preheat", NULL, &r), &r, 200);
    CHECK_EQ(JINT(&r, "stock_remaining"), 3);
    EXPECT_STATUS(admin_op(&v, id, "preheat", "{\"force\":false}", &r), &r, 200);
    CHECK_EQ(remaining(&v, id), 3);
    expect_stats(&v, id, 3, 2, 2);

    /* Forcing while open is refused, and changes nothing. */
    EXPECT_ERROR(admin_op(&v, id, "preheat", "{\"force\":true}", &r), &r, 409, NULL);
    CHECK_EQ(remaining(&v, id), 3);
    expect_state(&v, id, "open");
    EXPECT_ERROR(admin_op(&v, id, "preheat", "{\"force\":\"yes\"}", &r), &r, 400, "bad_request");

    /* Closed, force rewrites the definition but keeps what buyers hold. */
    EXPECT_STATUS(admin_op(&v, id, "close", NULL, &r), &r, 200);
    EXPECT_STATUS(admin_op(&v, id, "preheat", "{\"force\":true}", &r), &r, 200);
    JSTR(&r, "state", got);
    CHECK_STR(got, "closed");
    CHECK_EQ(remaining(&v, id), 3);
    expect_stats(&v, id, 3, 2, 2);
    srv_stop(&v);
}

SK_TEST(open_and_close_answer_200_with_state_404_unknown_409_not_preheated)
{
    struct srv v;
    struct sk_th_resp r;
    char got[32], path[160];
    uint64_t id = sk_th_unique_id(), unknown = sk_th_unique_id();
    srv_start(&v, NULL);
    create_act(&v, id, 3, 1, 1, W_NOW);
    EXPECT_ERROR(admin_op(&v, id, "open", NULL, &r), &r, 409, "not_preheated");
    EXPECT_ERROR(admin_op(&v, id, "close", NULL, &r), &r, 409, "not_preheated");
    expect_state(&v, id, "closed");

    static const char *const ops[] = {"preheat", "open", "close", "stats"};
    for (int k = 0; k < 4; k++)
        EXPECT_ERROR(admin_op(&v, unknown, ops[k], NULL, &r), &r, 404, "unknown_activity");
    EXPECT_ERROR(get_activity(&v, unknown, &r), &r, 404, "unknown_activity");

    EXPECT_STATUS(admin_op(&v, id, "preheat", NULL, &r), &r, 200);
    EXPECT_STATUS(admin_op(&v, id, "open", NULL, &r), &r, 200);
    JSTR(&r, "state", got);
    CHECK_STR(got, "open");
    CHECK_EQ(JINT(&r, "id"), id);
    EXPECT_STATUS(admin_op(&v, id, "close", NULL, &r), &r, 200);
    JSTR(&r, "state", got);
    CHECK_STR(got, "closed");
    EXPECT_STATUS(admin_op(&v, id, "open", NULL, &r), &r, 200);
    JSTR(&r, "state", got);
    CHECK_STR(got, "open");

    /* Ids that are not positive integers: 400, before any lookup. */
    static const char *const bad_ids[] = {"abc", "0", "-1", "1.5", "99999999999999999999999", "1x"};
    for (size_t i = 0; i < sizeof bad_ids / sizeof bad_ids[0]; i++) {
        snprintf(path, sizeof path, "/api/v1/activities/%s/open", bad_ids[i]);
        EXPECT_ERROR(admin(&v, "POST", path, NULL, &r), &r, 400, "bad_request");
        snprintf(path, sizeof path, "/api/v1/activities/%s", bad_ids[i]);
        EXPECT_ERROR(req(&v, "GET", path, NULL, NULL, &r), &r, 400, "bad_request");
    }
    srv_stop(&v);
}

/* ----------------------------------------------------------- activity read */

SK_TEST(activity_read_reports_scheduled_open_closed_and_ended)
{
    struct srv v;
    struct sk_th_resp r;
    char got[64];
    uint64_t fut = sk_th_unique_id(), now = sk_th_unique_id(), past = sk_th_unique_id();
    uint64_t fresh = sk_th_unique_id();
    srv_start(&v, NULL);
    ready_act(&v, fut, 7, 2, 1, W_FUTURE);
    ready_act(&v, now, 8, 3, 2, W_NOW);
    ready_act(&v, past, 9, 1, 1, W_PAST);
    create_act(&v, fresh, 4, 1, 1, W_NOW);

    /* Every contract field, with its type, on a public (unauthenticated) read. */
    EXPECT_STATUS(get_activity(&v, now, &r), &r, 200);
    CHECK_EQ(JINT(&r, "id"), now);
    JSTR(&r, "name", got);
    CHECK(got[0] != 0);
    JSTR(&r, "start", got);
    int64_t ms;
    CHECK(sk_time_parse_rfc3339(got, strlen(got), &ms) == 0);
    JSTR(&r, "end", got);
    CHECK(sk_time_parse_rfc3339(got, strlen(got), &ms) == 0);
    CHECK_EQ(JINT(&r, "stock_initial"), 8);
    CHECK_EQ(JINT(&r, "stock_remaining"), 8);
    CHECK_EQ(JINT(&r, "per_user_limit"), 3);

    expect_state(&v, fut, "scheduled");
    expect_state(&v, now, "open");
    expect_state(&v, past, "ended");
    expect_state(&v, fresh, "closed");
    EXPECT_STATUS(admin_op(&v, now, "close", NULL, &r), &r, 200);
    expect_state(&v, now, "closed");
    /* "ended" wins over the switch: a past window never sells again. */
    EXPECT_STATUS(admin_op(&v, past, "close", NULL, &r), &r, 200);
    expect_state(&v, past, "ended");
    srv_stop(&v);
}

SK_TEST(stats_reports_remaining_admitted_and_buyers_for_admins_only)
{
    struct srv v;
    struct sk_th_resp r;
    char path[128];
    uint64_t id = srv_start_activity(&v, ACT_READY, 10, 3, 3);
    expect_stats(&v, id, 10, 0, 0);
    EXPECT_STATUS(buy(&v, id, 11, "{\"quantity\":2}", &r), &r, 200);
    EXPECT_STATUS(buy(&v, id, 12, NULL, &r), &r, 200);
    EXPECT_STATUS(buy(&v, id, 13, "{\"quantity\":3}", &r), &r, 200);
    EXPECT_STATUS(buy(&v, id, 11, "{\"quantity\":1}", &r), &r, 200);
    /* admitted counts units (remaining + admitted = initial), buyers users */
    expect_stats(&v, id, 3, 7, 3);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/stats", id);
    EXPECT_ERROR(req(&v, "GET", path, NULL, NULL, &r), &r, 401, "unauthorized");
    EXPECT_ERROR(req(&v, "GET", path, "X-User-Id: 11\r\n", NULL, &r), &r, 401, "unauthorized");
    srv_stop(&v);
}
