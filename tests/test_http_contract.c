/* test_http_contract.c - the HTTP API v1 (README) proved from outside:
 * a real `seckill serve` process (sk_th_serve_start) over real sockets,
 * against the run's shared redis-server, with fresh activity ids per test.
 * The admin routes are test_http_admin.c's; the helpers both use are
 * support/http_api.h's.
 *
 * Covered here: purchase (the accepted body, default quantity, every
 * refusal code, each leaving the stock unchanged), Idempotency-Key, HMAC
 * buyer tokens, the operations routes (/healthz, /readyz also with a dead
 * Redis, /metrics, /), and `seckill serve` configuration: exit codes of
 * bad flags and the precedence flags > config file > SECKILL_* env.
 *
 * Response bodies are parsed with jansson, so a test checks JSON fields and
 * types, never byte layouts (except Idempotency-Key replays, which must be
 * byte-identical). Waits are bounded: the client times out after 10 s and
 * every process this file starts is polled with a deadline. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "core/clock.h"
#include "core/error.h"
#include "http/auth.h"
#include "http/http_body.h"
#include "support/d2_srv_activity.h"
#include "support/harness.h"
#include "support/http_api.h"
#include "support/http_client.h"

/* ---------------------------------------------------------------- helpers */

/* The status of a raw answer's first status line, 0 when none. */
static int raw_status(const char *out)
{
    return sk_th_http_status(out, strlen(out));
}

/* ---------------------------------------------------------------- purchase */

SK_TEST(purchase_answers_200_accepted_and_defaults_quantity_to_1)
{
    struct srv v;
    struct sk_th_resp r;
    char oid[4][128], st[32], ct[64];
    static const char *const bodies[] = {NULL, "{}", "{\"quantity\":3}", " {\"quantity\": 2} "};
    static const int qty[] = {1, 1, 3, 2};
    uint64_t id = srv_start_activity(&v, ACT_READY, 10, 5, 3);
    for (int i = 0; i < 4; i++) {
        EXPECT_STATUS(buy(&v, id, 100 + (uint64_t)i, bodies[i], &r), &r, 200);
        CHECK(sk_th_http_header(&r, "content-type", ct, sizeof ct) == 0);
        CHECK(strncmp(ct, "application/json", 16) == 0);
        JSTR(&r, "status", st);
        CHECK_STR(st, "accepted");
        JSTR(&r, "order_id", oid[i]);
        CHECK(oid[i][0] != 0);
        CHECK_EQ(JINT(&r, "activity_id"), id);
        CHECK_EQ(JINT(&r, "quantity"), qty[i]);
        /* byte for byte: the fields in this order, no spaces */
        char want[256];
        int wn = snprintf(want, sizeof want,
                          "{\"status\":\"accepted\",\"order_id\":\"%s\",\"activity_id\":%" PRIu64
                          ",\"quantity\":%d}",
                          oid[i], id, qty[i]);
        CHECK(r.body_len == (size_t)wn && memcmp(r.body, want, (size_t)wn) == 0);
        for (int k = 0; k < i; k++)
            CHECK(strcmp(oid[k], oid[i]) != 0);
    }
    CHECK_EQ(remaining(&v, id), 10 - 7);
    expect_stats(&v, id, 3, 7, 4);
    /* The largest uint64 is a valid user id. */
    EXPECT_STATUS(buy_hdr(&v, id, "X-User-Id: 18446744073709551615\r\n", NULL, &r), &r, 200);
    CHECK_EQ(remaining(&v, id), 2);
    srv_stop(&v);
}

SK_TEST(purchase_refusals_carry_their_code_and_change_no_stock)
{
    struct srv v;
    struct sk_th_resp r;
    uint64_t sold = sk_th_unique_id(), lim = sk_th_unique_id(), fut = sk_th_unique_id();
    uint64_t past = sk_th_unique_id(), shut = sk_th_unique_id(), never = sk_th_unique_id();
    uint64_t lim2 = sk_th_unique_id();
    srv_start(&v, NULL);

    /* sold_out: stock 2, two buyers, then everyone else. Also a quantity
     * above what is left. The fast path must answer the same. */
    ready_act(&v, sold, 2, 2, 2, W_NOW);
    EXPECT_STATUS(buy(&v, sold, 9, "{\"quantity\":2}", &r), &r, 200);
    CHECK_EQ(remaining(&v, sold), 0);
    EXPECT_ERROR(buy(&v, sold, 1, NULL, &r), &r, 409, "sold_out");
    EXPECT_ERROR(buy(&v, sold, 2, NULL, &r), &r, 409, "sold_out");
    /* an error body byte for byte, and one whose message is escaped */
    static const char sold_body[] = "{\"error\":\"sold_out\",\"message\":\"sold out\"}";
    CHECK(r.body_len == sizeof sold_body - 1 && memcmp(r.body, sold_body, r.body_len) == 0);
    EXPECT_ERROR(buy(&v, sold, 2, "<\"", &r), &r, 400, "bad_request");
    char why[160], esc[256], want[512];
    int64_t q;
    CHECK_EQ(sk_body_purchase_full("<\"", 2, &q, why, sizeof why), SK_EINVAL);
    CHECK(sk_body_json_escape(why, strlen(why), esc, sizeof esc) > 0 && strstr(esc, "\\u003c"));
    int wn = snprintf(want, sizeof want, "{\"error\":\"bad_request\",\"message\":\"%s\"}", esc);
    CHECK(r.body_len == (size_t)wn && memcmp(r.body, want, (size_t)wn) == 0);
    CHECK_EQ(remaining(&v, sold), 0);
    expect_stats(&v, sold, 0, 2, 1);

    /* Not enough left for the quantity: also sold_out (the contract has no other
     * code), and the unit left still sells. */
    ready_act(&v, lim, 3, 2, 2, W_NOW);
    EXPECT_STATUS(buy(&v, lim, 1, "{\"quantity\":2}", &r), &r, 200);
    EXPECT_ERROR(buy(&v, lim, 2, "{\"quantity\":2}", &r), &r, 409, "sold_out");
    CHECK_EQ(remaining(&v, lim), 1);
    EXPECT_STATUS(buy(&v, lim, 2, NULL, &r), &r, 200);
    CHECK_EQ(remaining(&v, lim), 0);
    expect_stats(&v, lim, 0, 3, 2);

    /* limit_exceeded: user 1 holds 1 of 2; asking 2 more, then 1 more twice. */
    ready_act(&v, lim2, 10, 2, 2, W_NOW);
    EXPECT_STATUS(buy(&v, lim2, 1, NULL, &r), &r, 200);
    EXPECT_ERROR(buy(&v, lim2, 1, "{\"quantity\":2}", &r), &r, 409, "limit_exceeded");
    CHECK_EQ(remaining(&v, lim2), 9);
    EXPECT_STATUS(buy(&v, lim2, 1, NULL, &r), &r, 200);
    EXPECT_ERROR(buy(&v, lim2, 1, NULL, &r), &r, 409, "limit_exceeded");
    CHECK_EQ(remaining(&v, lim2), 8);
    expect_stats(&v, lim2, 8, 2, 1);

    ready_act(&v, fut, 5, 1, 1, W_FUTURE);
    EXPECT_ERROR(buy(&v, fut, 1, NULL, &r), &r, 403, "not_started");
    CHECK_EQ(remaining(&v, fut), 5);

    ready_act(&v, past, 5, 1, 1, W_PAST);
    EXPECT_ERROR(buy(&v, past, 1, NULL, &r), &r, 403, "ended");
    CHECK_EQ(remaining(&v, past), 5);

    /* closed: preheated, switch off (never opened, then opened and closed) */
    create_act(&v, shut, 5, 1, 1, W_NOW);
    EXPECT_STATUS(admin_op(&v, shut, "preheat", NULL, &r), &r, 200);
    EXPECT_ERROR(buy(&v, shut, 1, NULL, &r), &r, 403, "closed");
    EXPECT_STATUS(admin_op(&v, shut, "open", NULL, &r), &r, 200);
    EXPECT_STATUS(buy(&v, shut, 1, NULL, &r), &r, 200);
    EXPECT_STATUS(admin_op(&v, shut, "close", NULL, &r), &r, 200);
    EXPECT_ERROR(buy(&v, shut, 2, NULL, &r), &r, 403, "closed");
    CHECK_EQ(remaining(&v, shut), 4);
    expect_stats(&v, shut, 4, 1, 1);

    EXPECT_ERROR(buy(&v, never, 1, NULL, &r), &r, 404, "unknown_activity");
    EXPECT_ERROR(get_activity(&v, never, &r), &r, 404, "unknown_activity");
    srv_stop(&v);
}

/* Created in the store but not preheated: GET says state "closed", so a
 * purchase must say the same (403 closed), not that the activity does not
 * exist. */
SK_TEST(purchase_on_a_created_but_unpreheated_activity_is_403_closed)
{
    struct srv v;
    struct sk_th_resp r;
    uint64_t id = srv_start_activity(&v, ACT_CREATED, 5, 1, 1);
    expect_state(&v, id, "closed");
    EXPECT_ERROR(buy(&v, id, 1, NULL, &r), &r, 403, "closed");
    CHECK_EQ(remaining(&v, id), 5);
    srv_stop(&v);
}

SK_TEST(purchase_with_a_bad_quantity_or_body_is_400_and_changes_no_stock)
{
    struct srv v;
    struct sk_th_resp r;
    static const char *const bad[] = {
        "{\"quantity\":0}",
        "{\"quantity\":-1}",
        "{\"quantity\":1.5}",
        "{\"quantity\":\"2\"}",
        "{\"quantity\":3}", /* above max_per_order 2 */
        "{\"quantity\":1000001}",
        "{\"quantity\":99999999999999999999}",
        "{\"quantity\":-99999999999999999999}",
        "{\"quantity\":1e2}",
        "{\"quantity\":2.0}",
        "{\"quantity\":null}",
        "{\"quantity\":true}",
        "{\"quantity\":[1]}",
        "{\"quantity\":{}}",
        "[]",
        "[{\"quantity\":1}]",
        "1",
        "\"quantity\"",
        "null",
        "{",
        "{\"quantity\":1",
        "{}x",
        "{\"quantity\":1}{}",
        "quantity=1",
        "{'quantity':1}",
        "{\"quantity\":01}",
        "{\"quantity\":0x1}",
        " ",
    };
    uint64_t id = srv_start_activity(&v, ACT_READY, 10, 3, 2);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int st = buy(&v, id, 7, bad[i], &r);
        if (st != 400) sk_th_fail(__FILE__, __LINE__, "body '%s' -> %d %s", bad[i], st, r.body);
        EXPECT_ERROR(st, &r, 400, "bad_request");
        CHECK_EQ(remaining(&v, id), 10);
    }
    /* None of them used up user 7's limit either. */
    EXPECT_STATUS(buy(&v, id, 7, "{\"quantity\":2}", &r), &r, 200);
    EXPECT_STATUS(buy(&v, id, 7, NULL, &r), &r, 200);
    expect_stats(&v, id, 7, 3, 1);
    srv_stop(&v);
}

SK_TEST(purchase_without_a_valid_user_id_is_401)
{
    struct srv v;
    struct sk_th_resp r;
    static const char *const hdrs[] = {
        NULL,
        "X-User-Id: 0\r\n",
        "X-User-Id: abc\r\n",
        "X-User-Id: -5\r\n",
        "X-User-Id: 18446744073709551616\r\n", /* UINT64_MAX + 1 */
        "X-User-Id: 99999999999999999999999\r\n",
        "X-User-Id: \r\n",
        "X-User-Id: 1 2\r\n",
        "X-User-Id: +5\r\n",
        "X-User-Id: 5.0\r\n",
        "X-User-Id: 0x10\r\n",
        "X-User: 5\r\n",
        "Authorization: Bearer " SK_TH_ADMIN_TOKEN "\r\n",
    };
    uint64_t id = srv_start_activity(&v, ACT_READY, 10, 1, 1);
    for (size_t i = 0; i < sizeof hdrs / sizeof hdrs[0]; i++) {
        int st = buy_hdr(&v, id, hdrs[i], "{\"quantity\":1}", &r);
        if (st != 401)
            sk_th_fail(__FILE__, __LINE__, "headers '%s' -> %d %s", hdrs[i] ? hdrs[i] : "(none)",
                       st, r.body);
        EXPECT_ERROR(st, &r, 401, "unauthorized");
    }
    CHECK_EQ(remaining(&v, id), 10);
    expect_stats(&v, id, 10, 0, 0);
    /* an unknown field is refused, named, and buys nothing */
    EXPECT_ERROR(buy(&v, id, 200, "{\"quantity\":2,\"note\":\"x\"}", &r), &r, 400, "bad_request");
    CHECK_MSG(strstr(r.body, "unknown field note"), "%s", r.body);
    CHECK_EQ(remaining(&v, id), 10);
    srv_stop(&v);
}

SK_TEST(wrong_method_is_405_with_allow_and_unknown_path_is_404)
{
    struct srv v;
    struct sk_th_resp r;
    char path[128], allow[64];
    uint64_t id = srv_start_activity(&v, ACT_READY, 10, 1, 1);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", id);
    EXPECT_ERROR(req(&v, "GET", path, "X-User-Id: 1\r\n", NULL, &r), &r, 405, NULL);
    CHECK(sk_th_http_header(&r, "allow", allow, sizeof allow) == 0);
    CHECK(strcasestr(allow, "POST") != NULL); /* the client lower-cases headers */
    EXPECT_ERROR(req(&v, "PUT", path, "X-User-Id: 1\r\n", "{}", &r), &r, 405, NULL);
    EXPECT_ERROR(req(&v, "PATCH", "/api/v1/activities/1", NULL, NULL, &r), &r, 405, NULL);
    EXPECT_ERROR(req(&v, "DELETE", path, "X-User-Id: 1\r\n", NULL, &r), &r, 405, NULL);
    EXPECT_ERROR(req(&v, "POST", "/healthz", NULL, NULL, &r), &r, 405, NULL);
    EXPECT_ERROR(req(&v, "GET", "/api/v1/nothing", NULL, NULL, &r), &r, 404, NULL);
    EXPECT_ERROR(req(&v, "POST", "/api/v2/activities/1/purchase", "X-User-Id: 1\r\n", NULL, &r), &r,
                 404, NULL);
    EXPECT_ERROR(req(&v, "GET", "/favicon.ico", NULL, NULL, &r), &r, 404, NULL);
    CHECK_EQ(remaining(&v, id), 10);
    srv_stop(&v);
}

SK_TEST(body_over_64k_is_413_with_a_json_error_and_buys_nothing)
{
    struct srv v;
    char path[128];
    uint64_t id = srv_start_activity(&v, ACT_READY, 10, 1, 1);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", id);
    /* The body limit is 64 KiB: exactly 65536 bytes (valid JSON padded with
     * spaces) is served; one byte more is 413. Sent raw: the client's
     * buffer is smaller than that. */
    static char big[65536 + 1024], out[2][4096];
    for (int over = 0; over <= 1; over++) {
        size_t blen = 65536 + (size_t)over;
        int n = snprintf(big, sizeof big,
                         "POST %s HTTP/1.1\r\nHost: x\r\nX-User-Id: %d\r\nContent-Type: "
                         "application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                         path, 50 + over, blen);
        memset(big + n, ' ', blen);
        memcpy(big + n, "{\"quantity\":1}", 14);
        sk_th_http_raw(v.s.port, big, (size_t)n + blen, out[over], sizeof out[over], 5000);
        int st = raw_status(out[over]);
        CHECK_MSG(st == (over ? 413 : 200), "%zu-byte body -> '%.300s'", blen, out[over]);
    }
    CHECK_EQ(remaining(&v, id), 9);
    expect_stats(&v, id, 9, 1, 1);
    /* The contract: every error body is {"error","message"} JSON. */
    const char *b = strstr(out[1], "\r\n\r\n");
    CHECK(b != NULL);
    struct sk_th_resp rr = {.status = 413};
    snprintf(rr.body, sizeof rr.body, "%s", b + 4);
    rr.body_len = strlen(rr.body);
    json_t *j = body_obj(__FILE__, __LINE__, &rr);
    CHECK(json_is_string(json_object_get(j, "error")));
    CHECK(json_is_string(json_object_get(j, "message")));
    json_decref(j);
    srv_stop(&v);
}

/* ---------------------------------------------------------- Idempotency-Key */

SK_TEST(idempotency_key_retry_returns_the_first_answer_and_buys_once)
{
    struct srv v;
    struct sk_th_resp r1, r;
    char h[256], key64[65], oid1[128], oid[128];
    uint64_t id = srv_start_activity(&v, ACT_READY, 5, 2, 1);
    const char *k1 = "X-User-Id: 1\r\nIdempotency-Key: order-attempt-1\r\n";
    EXPECT_STATUS(buy_hdr(&v, id, k1, NULL, &r1), &r1, 200);
    JSTR(&r1, "order_id", oid1);
    /* Retries, on the same and on a new connection: byte-identical. */
    for (int i = 0; i < 3; i++) {
        if (i == 2) sk_th_http_close(&v.c);
        EXPECT_STATUS(buy_hdr(&v, id, k1, NULL, &r), &r, 200);
        CHECK_MSG(r.body_len == r1.body_len && memcmp(r.body, r1.body, r.body_len) == 0,
                  "retry body '%s' != first '%s'", r.body, r1.body);
    }
    CHECK_EQ(remaining(&v, id), 4);
    expect_stats(&v, id, 4, 1, 1);

    /* A new key is a new order; the same key for another user is that
     * user's own first attempt. */
    EXPECT_STATUS(buy_hdr(&v, id, "X-User-Id: 1\r\nIdempotency-Key: order-attempt-2\r\n", NULL, &r),
                  &r, 200);
    JSTR(&r, "order_id", oid);
    CHECK(strcmp(oid, oid1) != 0);
    EXPECT_STATUS(buy_hdr(&v, id, "X-User-Id: 2\r\nIdempotency-Key: order-attempt-1\r\n", NULL, &r),
                  &r, 200);
    JSTR(&r, "order_id", oid);
    CHECK(strcmp(oid, oid1) != 0);
    CHECK_EQ(remaining(&v, id), 2);

    /* User 1 is now at the limit, and then the sale closes: the first
     * key still replays its answer, and still buys nothing. */
    EXPECT_ERROR(buy(&v, id, 1, NULL, &r), &r, 409, "limit_exceeded");
    EXPECT_STATUS(buy_hdr(&v, id, k1, NULL, &r), &r, 200);
    CHECK(r.body_len == r1.body_len && memcmp(r.body, r1.body, r.body_len) == 0);
    EXPECT_STATUS(admin_op(&v, id, "close", NULL, &r), &r, 200);
    EXPECT_STATUS(buy_hdr(&v, id, k1, NULL, &r), &r, 200);
    CHECK_MSG(r.body_len == r1.body_len && memcmp(r.body, r1.body, r.body_len) == 0,
              "replay after close: '%s'", r.body);
    CHECK_EQ(remaining(&v, id), 2);
    expect_stats(&v, id, 2, 3, 2);

    /* 64 visible characters is the longest valid key. */
    EXPECT_STATUS(admin_op(&v, id, "open", NULL, &r), &r, 200);
    memset(key64, 'k', 64);
    key64[64] = 0;
    snprintf(h, sizeof h, "X-User-Id: 3\r\nIdempotency-Key: %s\r\n", key64);
    EXPECT_STATUS(buy_hdr(&v, id, h, NULL, &r), &r, 200);
    EXPECT_STATUS(buy_hdr(&v, id, h, NULL, &r), &r, 200);
    CHECK_EQ(remaining(&v, id), 1);
    srv_stop(&v);
}

SK_TEST(invalid_idempotency_key_is_400_and_buys_nothing)
{
    struct srv v;
    struct sk_th_resp r;
    char h[256], key65[66];
    uint64_t id = srv_start_activity(&v, ACT_READY, 5, 1, 1);
    memset(key65, 'k', 65);
    key65[65] = 0;
    snprintf(h, sizeof h, "X-User-Id: 1\r\nIdempotency-Key: %s\r\n", key65);
    EXPECT_ERROR(buy_hdr(&v, id, h, NULL, &r), &r, 400, "bad_request");
    static const char *const ctl[] = {"a\x01z", "a\x1fz", "a\x7fz", "\x1b[0m"};
    for (size_t i = 0; i < sizeof ctl / sizeof ctl[0]; i++) {
        snprintf(h, sizeof h, "X-User-Id: 1\r\nIdempotency-Key: %s\r\n", ctl[i]);
        int st = buy_hdr(&v, id, h, NULL, &r);
        CHECK_MSG(st == 400, "control key %zu -> %d %s", i, st, r.body);
    }
    CHECK_EQ(remaining(&v, id), 5);
    /* The user can still buy: the refusals used none of the limit. */
    EXPECT_STATUS(buy(&v, id, 1, NULL, &r), &r, 200);
    CHECK_EQ(remaining(&v, id), 4);
    srv_stop(&v);
}

/* ---------------------------------------------------------------- HMAC mode */

SK_TEST(hmac_mode_accepts_valid_tokens_and_refuses_every_other_identity)
{
    static const char secret[] = "hmac-test-secret";
    const char *extra[] = {"--auth", "hmac", "--hmac-secret", secret, NULL};
    struct srv v;
    struct sk_th_resp r;
    char tok[SK_AUTH_TOKEN_MAX + 1], h[400];
    uint64_t id = sk_th_unique_id();
    int64_t now = sk_wall_ms() / 1000;
    srv_start(&v, extra);
    ready_act(&v, id, 10, 1, 1, W_NOW); /* the admin token still works */

    CHECK(sk_auth_make_token(secret, strlen(secret), 41, now + 600, tok, sizeof tok) > 0);
    snprintf(h, sizeof h, "Authorization: Bearer %s\r\n", tok);
    EXPECT_STATUS(buy_hdr(&v, id, h, NULL, &r), &r, 200);
    /* the identity is the token's user: a second buy hits its limit */
    EXPECT_ERROR(buy_hdr(&v, id, h, NULL, &r), &r, 409, "limit_exceeded");
    CHECK_EQ(remaining(&v, id), 9);

    char bad[8][400];
    int nb = 0;
    CHECK(sk_auth_make_token(secret, strlen(secret), 42, now - 5, tok, sizeof tok) > 0);
    snprintf(bad[nb++], 400, "Authorization: Bearer %s\r\n", tok); /* expired */
    CHECK(sk_auth_make_token("other", 5, 43, now + 600, tok, sizeof tok) > 0);
    snprintf(bad[nb++], 400, "Authorization: Bearer %s\r\n", tok); /* wrong secret */
    CHECK(sk_auth_make_token(secret, strlen(secret), 44, now + 600, tok, sizeof tok) > 0);
    size_t tl = strlen(tok);
    tok[tl - 1] = tok[tl - 1] == '0' ? '1' : '0'; /* flipped signature digit */
    snprintf(bad[nb++], 400, "Authorization: Bearer %s\r\n", tok);
    CHECK(sk_auth_make_token(secret, strlen(secret), 45, now + 600, tok, sizeof tok) > 0);
    snprintf(bad[nb++], 400, "Authorization: %s\r\n", tok); /* no Bearer */
    snprintf(bad[nb++], 400, "X-User-Id: 46\r\n");          /* trusted header alone */
    snprintf(bad[nb++], 400, "X-User-Id: 45\r\nAuthorization: Basic %s\r\n", tok);
    /* someone else's signature on a forged user id */
    snprintf(bad[nb++], 400, "Authorization: Bearer 47%s\r\n", strchr(tok, '.'));
    snprintf(bad[nb++], 400, "Authorization: Bearer " SK_TH_ADMIN_TOKEN "\r\n");
    for (int i = 0; i < nb; i++) {
        int st = buy_hdr(&v, id, bad[i], NULL, &r);
        if (st != 401) sk_th_fail(__FILE__, __LINE__, "'%s' -> %d %s", bad[i], st, r.body);
        EXPECT_ERROR(st, &r, 401, "unauthorized");
    }
    CHECK_EQ(remaining(&v, id), 9);
    expect_stats(&v, id, 9, 1, 1);
    srv_stop(&v);
}

/* --------------------------------------------------------------- operations */

/* The value of one exact series line "name{labels} value" in a metrics text. */
static long long metric(const char *text, const char *series)
{
    size_t n = strlen(series);
    for (const char *p = text; (p = strstr(p, series)) != NULL; p += n)
        if ((p == text || p[-1] == '\n') && p[n] == ' ') return strtoll(p + n + 1, NULL, 10);
    return -1;
}

SK_TEST(ops_routes_healthz_readyz_metrics_and_dashboard)
{
    struct srv v;
    struct sk_th_resp r;
    char ct[128];
    static char out[262144];
    uint64_t id = sk_th_unique_id();
    srv_start(&v, NULL);
    EXPECT_STATUS(req(&v, "GET", "/healthz", NULL, NULL, &r), &r, 200);
    EXPECT_STATUS(req(&v, "GET", "/readyz", NULL, NULL, &r), &r, 200);
    ready_act(&v, id, 3, 1, 1, W_NOW);
    for (uint64_t u = 1; u <= 3; u++)
        EXPECT_STATUS(buy(&v, id, u, NULL, &r), &r, 200);
    EXPECT_ERROR(buy(&v, id, 4, NULL, &r), &r, 409, "sold_out");
    EXPECT_ERROR(buy(&v, id, 5, NULL, &r), &r, 409, "sold_out");
    EXPECT_ERROR(buy(&v, id, 1, "{\"quantity\":0}", &r), &r, 400, "bad_request");

    /* /metrics can exceed the client's body buffer: read it raw. */
    static const char mreq[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    size_t got = sk_th_http_raw(v.s.port, mreq, sizeof mreq - 1, out, sizeof out, 5000);
    CHECK(got > 0 && raw_status(out) == 200);
    CHECK_MSG(got < sizeof out - 1, "metrics larger than %zu bytes", sizeof out);
    const char *hdr_end = strstr(out, "\r\n\r\n");
    CHECK(hdr_end != NULL);
    const char *text = hdr_end + 4;
    CHECK(strcasestr(out, "content-type: text/plain") != NULL);
    CHECK(strstr(text, "# TYPE seckill_http_requests_total counter") != NULL);
    CHECK_EQ(metric(text, "seckill_admissions_total"), 3);
    CHECK_EQ(metric(text, "seckill_refusals_total{reason=\"sold_out\"}"), 2);
    CHECK_EQ(metric(text, "seckill_refusals_total{reason=\"bad_request\"}"), 1);
    CHECK_EQ(metric(text, "seckill_http_requests_total{route=\"purchase\",status=\"200\"}"), 3);
    CHECK_EQ(metric(text, "seckill_http_requests_total{route=\"purchase\",status=\"409\"}"), 2);
    CHECK_EQ(metric(text, "seckill_http_requests_total{route=\"healthz\",status=\"200\"}") >= 1, 1);
    CHECK(strstr(text, "seckill_redis_roundtrip_seconds_bucket") != NULL);
    CHECK(strstr(text, "seckill_batch_size_bucket") != NULL);
    CHECK(strstr(text, "seckill_inflight_requests") != NULL);

    /* the dashboard page is larger than the client's body buffer too */
    static const char dreq[] = "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    got = sk_th_http_raw(v.s.port, dreq, sizeof dreq - 1, out, sizeof out, 5000);
    CHECK(got > 0 && raw_status(out) == 200);
    CHECK(strcasestr(out, "content-type: text/html") != NULL);
    CHECK(strcasestr(out, "<html") != NULL);
    (void)ct;
    srv_stop(&v);
}

/* The header block of a raw answer (its lines up to the blank one, each
 * with its CRLF), lowered, as a terminated string in out. */
static const char *raw_head_lower(const char *raw, char *out, size_t cap)
{
    const char *end = strstr(raw, "\r\n\r\n");
    size_t n = end ? (size_t)(end - raw) + 2 : strlen(raw);
    if (n >= cap) n = cap - 1;
    for (size_t i = 0; i < n; i++)
        out[i] = (char)(raw[i] >= 'A' && raw[i] <= 'Z' ? raw[i] - 'A' + 'a' : raw[i]);
    out[n] = 0;
    return out;
}

/* An answer about one buyer is no shared cache's and no browser's to keep,
 * whatever its status; the public reads stay cacheable. */
static void expect_private(const struct sk_th_resp *r, const char *what)
{
    char cc[128] = "";
    CHECK_MSG(sk_th_http_header(r, "cache-control", cc, sizeof cc) == 0 &&
                  !strcmp(cc, "private, no-store"),
              "%s (%d): Cache-Control \"%s\"", what, r->status, cc);
}

SK_TEST(per_user_answers_are_private_no_store_and_pages_refuse_foreign_frames)
{
    struct srv v;
    struct sk_th_resp r;
    char oid[128], path[256], h[64];
    uint64_t id = srv_start_activity(&v, ACT_READY, 10, 1, 1);
    buy(&v, id, 501, NULL, &r);
    EXPECT_STATUS(r.status, &r, 200);
    expect_private(&r, "purchase");
    JSTR(&r, "order_id", oid);
    buy(&v, id, 501, NULL, &r);
    EXPECT_STATUS(r.status, &r, 409);
    expect_private(&r, "purchase refused for the limit");
    buy_hdr(&v, id, "", NULL, &r);
    EXPECT_STATUS(r.status, &r, 401);
    expect_private(&r, "purchase without a buyer");
    snprintf(h, sizeof h, "X-User-Id: 501\r\n");
    snprintf(path, sizeof path, "/api/v1/orders/%s", oid);
    req(&v, "GET", path, h, NULL, &r);
    expect_private(&r, "order");
    snprintf(path, sizeof path, "/api/v1/orders/%s/pay", oid);
    req(&v, "POST", path, h, NULL, &r);
    expect_private(&r, "pay");
    snprintf(path, sizeof path, "/api/v1/orders/%s/cancel", oid);
    req(&v, "POST", path, h, NULL, &r);
    expect_private(&r, "cancel");
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/queue", id);
    req(&v, "POST", path, h, NULL, &r);
    expect_private(&r, "queue join");
    req(&v, "GET", path, h, NULL, &r);
    expect_private(&r, "queue poll");
    /* the public activity read is not private */
    char cc[128] = "";
    EXPECT_STATUS(get_activity(&v, id, &r), &r, 200);
    CHECK_MSG(sk_th_http_header(&r, "cache-control", cc, sizeof cc) != 0 || !strstr(cc, "private"),
              "%s", cc);

    /* the HTML pages: framed by this origin only, by default */
    static char out[1 << 19];
    char head[4096], rq[256];
    const char *pages[] = {"/", NULL};
    char sale[64];
    snprintf(sale, sizeof sale, "/sale/%" PRIu64, id);
    pages[1] = sale;
    for (int i = 0; i < 2; i++) {
        int n = snprintf(rq, sizeof rq, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                         pages[i]);
        size_t got = sk_th_http_raw(v.s.port, rq, (size_t)n, out, sizeof out, 5000);
        CHECK_MSG(got > 0 && raw_status(out) == 200, "%s: %.200s", pages[i], out);
        raw_head_lower(out, head, sizeof head);
        CHECK_MSG(strstr(head, "\r\ncontent-security-policy: frame-ancestors 'self'\r") &&
                      strstr(head, "\r\nx-frame-options: sameorigin\r"),
                  "%s: %s", pages[i], head);
    }
    srv_stop(&v);

    /* a shop that embeds the page names itself; 'none': nobody at all */
    const char *shop[] = {"--frame-ancestors", "'self' https://shop.example", NULL};
    srv_start(&v, shop);
    static const char sale7[] = "GET /sale/7 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    size_t got = sk_th_http_raw(v.s.port, sale7, sizeof sale7 - 1, out, sizeof out, 5000);
    CHECK(got > 0);
    raw_head_lower(out, head, sizeof head);
    CHECK_MSG(
        strstr(head, "content-security-policy: frame-ancestors 'self' https://shop.example\r"),
        "%s", head);
    srv_stop(&v);
    const char *none[] = {"--frame-ancestors", "'none'", NULL};
    srv_start(&v, none);
    static const char dash[] = "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    got = sk_th_http_raw(v.s.port, dash, sizeof dash - 1, out, sizeof out, 5000);
    CHECK(got > 0);
    raw_head_lower(out, head, sizeof head);
    CHECK_MSG(strstr(head, "frame-ancestors 'none'\r") && strstr(head, "x-frame-options: deny\r"),
              "%s", head);
    srv_stop(&v);
}

SK_TEST(readyz_and_purchase_answer_503_when_redis_is_unreachable)
{
    struct sk_th_serve s;
    struct sk_th_http c;
    struct sk_th_resp r;
    char dead[64];
    /* A port nothing listens on: Redis is "down" from the start. */
    snprintf(dead, sizeof dead, "redis://127.0.0.1:%d", sk_th_free_port());
    sanitizer_exit_code_0();
    sk_th_serve_start(&s, dead, (const char *const[]){"--redis-timeout-ms", "200", NULL});
    sk_th_http_open(&c, s.port);
    EXPECT_STATUS(sk_th_http_req(&c, "GET", "/healthz", NULL, NULL, &r), &r, 200);
    EXPECT_ERROR(sk_th_http_req(&c, "GET", "/readyz", NULL, NULL, &r), &r, 503, "unavailable");
    int64_t t0 = sk_mono_ms();
    EXPECT_ERROR(
        sk_th_http_req(&c, "POST", "/api/v1/activities/1/purchase", "X-User-Id: 1\r\n", NULL, &r),
        &r, 503, "unavailable");
    CHECK_MSG(sk_mono_ms() - t0 < 5000, "503 took %lld ms", (long long)(sk_mono_ms() - t0));
    sk_th_http_close(&c);
    stop_checked(&s);
}

/* ----------------------------------------------------- serve configuration */

/* Runs seckill with args and extra env, at most timeout_ms (then SIGKILL,
 * returns -1): a bad flag that is wrongly accepted would otherwise start a
 * server that never exits. Output into out. */
static int run_bounded(char *out, size_t cap, const char *const *env, const char *const *args,
                       int timeout_ms)
{
    int pfd[2];
    CHECK(pipe(pfd) == 0);
    pid_t pid = sk_th_fork();
    if (pid == 0) {
        close(pfd[0]);
        sk_th_exec_out(pfd[1], sk_th_seckill_bin(), env, args);
    }
    close(pfd[1]);
    size_t len = 0;
    int64_t deadline = sk_mono_ms() + timeout_ms;
    struct pollfd p = {.fd = pfd[0], .events = POLLIN};
    for (;;) {
        int64_t left = deadline - sk_mono_ms();
        if (left <= 0 || poll(&p, 1, (int)left) <= 0) break;
        ssize_t got = read(pfd[0], out + len, cap - len - 1);
        if (got <= 0) break; /* EOF: the process exited (or closed its output) */
        len += (size_t)got;
        if (len + 1 >= cap) break;
    }
    out[len] = 0;
    close(pfd[0]);
    int st;
    while (waitpid(pid, &st, WNOHANG) != pid) {
        if (sk_mono_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

SK_TEST(serve_help_exits_0_and_bad_flags_exit_2_with_a_message)
{
    char out[4096], listen[64], dead[64];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", sk_th_free_port());
    snprintf(dead, sizeof dead, "redis://127.0.0.1:%d", sk_th_free_port());
    char db[400];
    snprintf(db, sizeof db, "sqlite:%s/x.db", sk_th_tmpdir());
    int rc =
        run_bounded(out, sizeof out, NULL, (const char *const[]){"serve", "--help", NULL}, 5000);
    CHECK_MSG(rc == 0, "--help exit %d: %s", rc, out);
    CHECK(strstr(out, "usage") != NULL && strstr(out, "--listen") != NULL);

    /* Each with a valid listen/redis/db so only the bad part can fail. */
    struct {
        const char *flag, *value, *env, *says;
    } cases[] = {
        {"--bogus", "1", NULL, "bogus"},
        {"--processes", "0", NULL, "processes"},
        {"--processes", "65", NULL, "processes"},
        {"--processes", "two", NULL, "processes"},
        {"--auth", "hmac", NULL, "hmac"},
        {"--auth", "magic", NULL, "auth"},
        {"--listen", "garbage", NULL, "listen"},
        {"--listen", "127.0.0.1:70000", NULL, "listen"},
        {"--redis", "http://x", NULL, "redis"},
        {"--config", "/nonexistent/seckill.conf", NULL, "nonexistent"},
        {"--log-level", "loud", NULL, "log"},
        {NULL, NULL, "SECKILL_PROCESSES=0", "processes"},
        {NULL, NULL, "SECKILL_AUTH=hmac", "hmac"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args[16] = {"serve", "--listen", listen, "--redis", dead, "--db", db};
        int n = 7;
        if (cases[i].flag) args[n++] = cases[i].flag, args[n++] = cases[i].value;
        args[n] = NULL;
        const char *env[] = {cases[i].env, NULL};
        rc = run_bounded(out, sizeof out, env, args, 5000);
        CHECK_MSG(rc == 2, "case %zu (%s %s %s): exit %d, output '%s'", i,
                  cases[i].flag ? cases[i].flag : "", cases[i].value ? cases[i].value : "",
                  cases[i].env ? cases[i].env : "", rc, out);
        CHECK_MSG(strcasestr(out, cases[i].says) != NULL, "case %zu: message '%s' lacks '%s'", i,
                  out, cases[i].says);
    }
    /* A flag without its value is a usage error too. */
    rc = run_bounded(out, sizeof out, NULL, (const char *const[]){"serve", "--listen", NULL}, 5000);
    CHECK_MSG(rc == 2, "--listen without value: exit %d '%s'", rc, out);
}

/* Starts `seckill serve` with exactly args (no harness defaults) and env,
 * and waits until /healthz answers on port. */
static void spawn_serve(struct sk_th_serve *s, int port, const char *const *env,
                        const char *const *args)
{
    memset(s, 0, sizeof *s);
    s->port = port;
    sanitizer_exit_code_0();
    snprintf(s->log, sizeof s->log, "%s/serve.log", sk_th_tmpdir());
    pid_t pid = sk_th_fork();
    if (pid == 0) {
        int fd = open(s->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        dup2(fd, 2);
        dup2(fd, 1);
        for (int i = 0; env && env[i]; i++)
            putenv((char *)env[i]);
        sk_th_exec(sk_th_seckill_bin(), args);
    }
    s->pid = pid;
    int64_t deadline = sk_mono_ms() + 15000;
    for (;;) {
        char out[256];
        static const char probe[] = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
        if (sk_th_http_raw(port, probe, sizeof probe - 1, out, sizeof out, 1000) &&
            raw_status(out) == 200)
            return;
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid)
            sk_th_fail(__FILE__, __LINE__, "serve exited at start (see %s)", s->log);
        if (sk_mono_ms() > deadline) sk_th_fail(__FILE__, __LINE__, "serve not up on %d", port);
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* Admin status on stats of an unknown id: 404 once the token is accepted,
 * 401 when it is not (no state needed). */
static int admin_status(int port, const char *token)
{
    struct sk_th_http c;
    struct sk_th_resp r;
    char h[200];
    snprintf(h, sizeof h, "Authorization: Bearer %s\r\n", token);
    sk_th_http_open(&c, port);
    int st = sk_th_http_req(&c, "GET", "/api/v1/activities/1/stats", h, NULL, &r);
    sk_th_http_close(&c);
    return st;
}

SK_TEST(serve_config_precedence_is_flags_then_environment_then_file)
{
    struct sk_th_serve s;
    char conf[400], db[400], env_listen[80], env_tok[] = "SECKILL_ADMIN_TOKEN=env-token-0123456789";
    char env_redis[600], file_listen[64], flag_listen[64];
    int p_env = sk_th_free_port(), p_file = sk_th_free_port(), p_flag = sk_th_free_port();
    const char *dir = sk_th_tmpdir();
    snprintf(conf, sizeof conf, "%s/seckill.conf", dir);
    snprintf(db, sizeof db, "sqlite:%s/serve.db", dir);
    snprintf(env_listen, sizeof env_listen, "SECKILL_LISTEN=127.0.0.1:%d", p_env);
    snprintf(env_redis, sizeof env_redis, "SECKILL_REDIS=%s", sk_th_redis_url());
    snprintf(file_listen, sizeof file_listen, "127.0.0.1:%d", p_file);
    snprintf(flag_listen, sizeof flag_listen, "127.0.0.1:%d", p_flag);
    const char *env[] = {env_tok, env_listen, env_redis, NULL};

    /* Environment only. */
    spawn_serve(&s, p_env, env, (const char *const[]){"serve", "--db", db, NULL});
    CHECK_EQ(admin_status(p_env, "env-token-0123456789"), 404);
    CHECK_EQ(admin_status(p_env, SK_TH_ADMIN_TOKEN), 401);
    stop_checked(&s);

    /* The config file alone... */
    FILE *f = fopen(conf, "w");
    CHECK(f != NULL);
    fprintf(f, "# test config\nlisten = %s\nadmin_token = \"file-token-0123456789\"  # quoted\n",
            file_listen);
    fclose(f);
    chmod(conf, 0600); /* it holds a secret: others may not read it */
    const char *env_redis_only[] = {env_redis, NULL};
    spawn_serve(&s, p_file, env_redis_only,
                (const char *const[]){"serve", "--db", db, "--config", conf, NULL});
    CHECK_EQ(admin_status(p_file, "file-token-0123456789"), 404);
    CHECK_EQ(admin_status(p_file, "env-token-0123456789"), 401);
    stop_checked(&s);

    /* ...and the environment beats it. */
    spawn_serve(&s, p_env, env, (const char *const[]){"serve", "--db", db, "--config", conf, NULL});
    CHECK_EQ(admin_status(p_env, "env-token-0123456789"), 404);
    CHECK_EQ(admin_status(p_env, "file-token-0123456789"), 401);
    stop_checked(&s);

    /* Flags beat both (whatever their position relative to --config). */
    spawn_serve(&s, p_flag, env,
                (const char *const[]){"serve", "--admin-token", "flag-token-0123456789", "--db", db,
                                      "--config", conf, "--listen", flag_listen, NULL});
    CHECK_EQ(admin_status(p_flag, "flag-token-0123456789"), 404);
    CHECK_EQ(admin_status(p_flag, "file-token-0123456789"), 401);
    CHECK_EQ(admin_status(p_flag, "env-token-0123456789"), 401);
    stop_checked(&s);

    /* The harness passes --admin-token: it wins over an inherited env. */
    setenv("SECKILL_ADMIN_TOKEN", "env-token-0123456789", 1);
    struct srv v;
    srv_start(&v, NULL);
    CHECK_EQ(admin_status(v.s.port, SK_TH_ADMIN_TOKEN), 404);
    CHECK_EQ(admin_status(v.s.port, "env-token-0123456789"), 401);
    srv_stop(&v);
    unsetenv("SECKILL_ADMIN_TOKEN");
}

/* Listening sockets on 127.0.0.1:port in /proc/net/tcp. */
static int listeners_on(int port)
{
    FILE *f = fopen("/proc/net/tcp", "r");
    char line[512], want[32];
    int n = 0;
    if (!f) return -1;
    snprintf(want, sizeof want, "0100007F:%04X", port);
    while (fgets(line, sizeof line, f)) {
        char local[64], rem[64];
        unsigned st;
        if (sscanf(line, " %*d: %63s %63s %x", local, rem, &st) == 3 && st == 0x0A &&
            strcmp(local, want) == 0)
            n++;
    }
    fclose(f);
    return n;
}

/* SO_REUSEPORT (for --processes N) must not let a second, unrelated
 * `seckill serve` join a port that one already serves: both would then
 * silently split the traffic (different admin tokens, databases, ...). */
SK_TEST(serve_on_a_port_already_served_exits_with_an_error)
{
    struct srv v;
    char listen[64], db[400];
    srv_start(&v, NULL);
    CHECK_EQ(listeners_on(v.s.port), 1);
    snprintf(listen, sizeof listen, "127.0.0.1:%d", v.s.port);
    snprintf(db, sizeof db, "sqlite:%s/second.db", sk_th_tmpdir());
    const char *argv[] = {sk_th_seckill_bin(),
                          "serve",
                          "--listen",
                          listen,
                          "--redis",
                          sk_th_redis_url(),
                          "--db",
                          db,
                          "--admin-token",
                          "other-token-0123456789",
                          NULL};
    pid_t pid = sk_th_fork();
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDWR);
        dup2(devnull, 1);
        dup2(devnull, 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    /* Poll: it either exits (right) or a second listener appears (wrong). */
    int st = 0, exited = 0, joined = 0;
    int64_t deadline = sk_mono_ms() + 10000;
    while (!exited && !joined && sk_mono_ms() < deadline) {
        if (waitpid(pid, &st, WNOHANG) == pid)
            exited = 1;
        else if (listeners_on(v.s.port) > 1)
            joined = 1;
        else {
            struct timespec ts = {0, 5 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    if (!exited) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    CHECK_MSG(!joined, "a second seckill serve started listening on port %d too", v.s.port);
    CHECK_MSG(exited, "second seckill serve neither exited nor listened within 10 s");
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) != 0, "second serve exit status %d", st);
    srv_stop(&v);
}
