/* test_http_contract.c - the HTTP API v1 (README) proved from outside:
 * a real `seckill serve` process (sk_th_serve_start) over real sockets,
 * against the run's shared redis-server, with fresh activity ids per test.
 *
 * Covered, route by route: admin create / preheat / open / close / stats
 * (status codes, body fields, 401 without the admin token), the activity
 * read with each live state, purchase (the accepted body, default quantity,
 * every refusal code, each leaving the stock unchanged), Idempotency-Key,
 * HMAC buyer tokens, the operations routes (/healthz, /readyz also with a
 * dead Redis, /metrics, /), and `seckill serve` configuration: exit codes
 * of bad flags and the precedence flags > config file > SECKILL_* env.
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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "core/clock.h"
#include "engine/activity.h"
#include "http/auth.h"
#include "support/harness.h"
#include "support/http_client.h"

#define ADMIN_HDR "Authorization: Bearer " SK_TH_ADMIN_TOKEN "\r\n"
#define HOUR_MS (3600LL * 1000)

/* ---------------------------------------------------------------- helpers */

/* One server under test and one keep-alive connection to it. */
struct srv {
    struct sk_th_serve s;
    struct sk_th_http c;
};

static int req(struct srv *v, const char *method, const char *path, const char *headers,
               const char *body, struct sk_th_resp *r)
{
    return sk_th_http_req(&v->c, method, path, headers, body, r);
}

/* Sanitized build: LeakSanitizer would turn its exit-time report into exit
 * code 1. The objects that live as long as the process (h2o config and
 * context, struct sk_app) are not freed at exit and show as "Indirect
 * leak" only; so the exit code is asked to stay 0 and the log is judged
 * instead: any ASan error, UBSan report or "Direct leak" (a leak per
 * request) fails. Inherited by every server this file starts. */
static void sanitizer_exit_code_0(void)
{
    setenv("LSAN_OPTIONS", "exitcode=0", 1);
}

static void check_server_log(const struct sk_th_serve *s)
{
    FILE *f = fopen(s->log, "r");
    char line[1024];
    if (!f) return;
    while (fgets(line, sizeof line, f))
        CHECK_MSG(!strstr(line, "ERROR: AddressSanitizer") && !strstr(line, "Direct leak") &&
                      !strstr(line, "runtime error:"),
                  "server log %s: %s", s->log, line);
    fclose(f);
}

/* A graceful stop must exit 0 (a crash or a stuck request would not) and
 * leave a clean log. */
static void stop_checked(struct sk_th_serve *s)
{
    int rc = sk_th_serve_stop(s, SIGTERM);
    check_server_log(s);
    CHECK_MSG(rc == 0, "seckill serve exited %d on SIGTERM (log %s)", rc, s->log);
}

static void srv_stop(struct srv *v)
{
    sk_th_http_close(&v->c);
    stop_checked(&v->s);
}

/* Polls /readyz until 200 (bounded): /healthz answers before the Redis
 * connection is up, and a request in that gap is a legitimate 503. */
static void wait_ready(struct srv *v)
{
    struct sk_th_resp r;
    int64_t deadline = sk_mono_ms() + 10000;
    while (req(v, "GET", "/readyz", NULL, NULL, &r) != 200) {
        if (sk_mono_ms() > deadline)
            sk_th_fail(__FILE__, __LINE__, "/readyz not 200 within 10 s: %d %s", r.status, r.body);
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

static void srv_start(struct srv *v, const char *const *extra)
{
    sanitizer_exit_code_0();
    sk_th_serve_start(&v->s, sk_th_redis_url(), extra);
    sk_th_http_open(&v->c, v->s.port);
    wait_ready(v);
}

static int admin(struct srv *v, const char *method, const char *path, const char *body,
                 struct sk_th_resp *r)
{
    return req(v, method, path, ADMIN_HDR, body, r);
}

static int admin_op(struct srv *v, uint64_t id, const char *op, const char *body,
                    struct sk_th_resp *r)
{
    char path[128];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/%s", id, op);
    return admin(v, op[0] == 's' ? "GET" : "POST", path, body, r);
}

static int buy_hdr(struct srv *v, uint64_t aid, const char *headers, const char *body,
                   struct sk_th_resp *r)
{
    char path[128];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", aid);
    return req(v, "POST", path, headers, body, r);
}

static int buy(struct srv *v, uint64_t aid, uint64_t uid, const char *body, struct sk_th_resp *r)
{
    char h[64];
    snprintf(h, sizeof h, "X-User-Id: %" PRIu64 "\r\n", uid);
    return buy_hdr(v, aid, h, body, r);
}

static int get_activity(struct srv *v, uint64_t id, struct sk_th_resp *r)
{
    char path[128];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64, id);
    return req(v, "GET", path, NULL, NULL, r);
}

/* The body as a JSON object, or a test failure that shows the body. */
static json_t *body_obj(const char *file, int line, const struct sk_th_resp *r)
{
    json_error_t e;
    json_t *j = json_loadb(r->body, r->body_len, 0, &e);
    if (!j || !json_is_object(j))
        sk_th_fail(file, line, "status %d: body is not a JSON object: '%s'", r->status, r->body);
    return j;
}

static long long j_int(const char *file, int line, const struct sk_th_resp *r, const char *key)
{
    json_t *j = body_obj(file, line, r);
    json_t *f = json_object_get(j, key);
    if (!json_is_integer(f))
        sk_th_fail(file, line, "field \"%s\" is not an integer in %s", key, r->body);
    long long x = (long long)json_integer_value(f);
    json_decref(j);
    return x;
}

static void j_str(const char *file, int line, const struct sk_th_resp *r, const char *key,
                  char *out, size_t cap)
{
    json_t *j = body_obj(file, line, r);
    json_t *f = json_object_get(j, key);
    if (!json_is_string(f))
        sk_th_fail(file, line, "field \"%s\" is not a string in %s", key, r->body);
    snprintf(out, cap, "%s", json_string_value(f));
    json_decref(j);
}

#define JINT(r, key) j_int(__FILE__, __LINE__, (r), (key))
#define JSTR(r, key, out) j_str(__FILE__, __LINE__, (r), (key), (out), sizeof(out))

static void expect_status_at(const char *file, int line, int got, const struct sk_th_resp *r,
                             int want)
{
    if (got != want) sk_th_fail(file, line, "status %d, want %d; body: '%s'", got, want, r->body);
}
#define EXPECT_STATUS(got, r, want) expect_status_at(__FILE__, __LINE__, (got), (r), (want))

/* The error shape: JSON {"error":code,"message":text}, application/json.
 * code NULL: any non-empty code (the contract does not name one). */
static void expect_error_at(const char *file, int line, int got, const struct sk_th_resp *r,
                            int want, const char *code)
{
    char ct[128], err[128], msg[512];
    expect_status_at(file, line, got, r, want);
    if (sk_th_http_header(r, "content-type", ct, sizeof ct) < 0 ||
        strncmp(ct, "application/json", 16) != 0)
        sk_th_fail(file, line, "%d error without Content-Type application/json: '%s'", want,
                   r->headers);
    j_str(file, line, r, "error", err, sizeof err);
    j_str(file, line, r, "message", msg, sizeof msg);
    if (code ? strcmp(err, code) != 0 : err[0] == 0)
        sk_th_fail(file, line, "error code '%s', want '%s' (body %s)", err, code ? code : "any",
                   r->body);
    if (!msg[0]) sk_th_fail(file, line, "empty error message: %s", r->body);
}
#define EXPECT_ERROR(got, r, want, code)                                                           \
    expect_error_at(__FILE__, __LINE__, (got), (r), (want), (code))

/* RFC 3339 of a wall time, whole seconds (so the echo is exact). */
static void rfc3339(int64_t ms, char *buf, size_t cap)
{
    CHECK(sk_time_format_rfc3339(ms - ms % 1000, buf, cap) == 0);
}

enum window { W_NOW, W_FUTURE, W_PAST };

static void window_ms(enum window w, int64_t *start, int64_t *end)
{
    int64_t now = sk_wall_ms();
    now -= now % 1000;
    switch (w) {
    case W_NOW: *start = now - HOUR_MS, *end = now + HOUR_MS; break;
    case W_FUTURE: *start = now + HOUR_MS, *end = now + 2 * HOUR_MS; break;
    case W_PAST: *start = now - 2 * HOUR_MS, *end = now - HOUR_MS; break;
    }
}

static void create_body_ms(char *buf, size_t cap, uint64_t id, long long stock, long long limit,
                           long long maxq, int64_t s, int64_t e)
{
    char ss[40], es[40];
    rfc3339(s, ss, sizeof ss);
    rfc3339(e, es, sizeof es);
    snprintf(buf, cap,
             "{\"id\":%" PRIu64 ",\"name\":\"sale %" PRIu64 "\",\"stock\":%lld,"
             "\"per_user_limit\":%lld,\"max_per_order\":%lld,\"start\":\"%s\",\"end\":\"%s\","
             "\"pay_timeout_s\":1800}",
             id, id, stock, limit, maxq, ss, es);
}

static void create_body(char *buf, size_t cap, uint64_t id, long long stock, long long limit,
                        long long maxq, enum window w)
{
    int64_t s, e;
    window_ms(w, &s, &e);
    create_body_ms(buf, cap, id, stock, limit, maxq, s, e);
}

static void create_act(struct srv *v, uint64_t id, long long stock, long long limit, long long maxq,
                       enum window w)
{
    char body[512];
    struct sk_th_resp r;
    create_body(body, sizeof body, id, stock, limit, maxq, w);
    EXPECT_STATUS(admin(v, "POST", "/api/v1/activities", body, &r), &r, 201);
}

/* Created, preheated and opened: ready to sell (or to refuse by window). */
static void ready_act(struct srv *v, uint64_t id, long long stock, long long limit, long long maxq,
                      enum window w)
{
    struct sk_th_resp r;
    create_act(v, id, stock, limit, maxq, w);
    EXPECT_STATUS(admin_op(v, id, "preheat", NULL, &r), &r, 200);
    EXPECT_STATUS(admin_op(v, id, "open", NULL, &r), &r, 200);
}

static long long remaining(struct srv *v, uint64_t id)
{
    struct sk_th_resp r;
    EXPECT_STATUS(get_activity(v, id, &r), &r, 200);
    return JINT(&r, "stock_remaining");
}

static void expect_state(struct srv *v, uint64_t id, const char *state)
{
    struct sk_th_resp r;
    char got[32];
    EXPECT_STATUS(get_activity(v, id, &r), &r, 200);
    JSTR(&r, "state", got);
    CHECK_MSG(strcmp(got, state) == 0, "activity %" PRIu64 " state '%s', want '%s'", id, got,
              state);
}

/* Stock and admitted units as the admin stats see them. */
static void expect_stats(struct srv *v, uint64_t id, long long rem, long long admitted,
                         long long buyers)
{
    struct sk_th_resp r;
    EXPECT_STATUS(admin_op(v, id, "stats", NULL, &r), &r, 200);
    CHECK_EQ(JINT(&r, "remaining"), rem);
    CHECK_EQ(JINT(&r, "admitted"), admitted);
    CHECK_EQ(JINT(&r, "buyers"), buyers);
}

/* The status of a raw answer's first status line, 0 when none. */
static int raw_status(const char *out)
{
    int st = 0;
    if (sscanf(out, "HTTP/1.%*d %d", &st) != 1) return 0;
    return st;
}

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
             "\"start\":\"2030-01-01T10:00:00.5+02:00\",\"end\":\"2030-01-01T12:00:00+02:00\","
             "\"unknown_field\":[1,2,3]}",
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
    body_with(body, sizeof body, id, s, e, "extra", "1");
    EXPECT_STATUS(admin(&v, "POST", "/api/v1/activities", body, &r), &r, 201);
    srv_stop(&v);
}

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
    body_with(body, sizeof body, plain, s, e, "extra", "1");
    EXPECT_STATUS(admin(&v, "POST", "/api/v1/activities", body, &r), &r, 201);
    CHECK_EQ(JINT(&r, "segments"), 1);
    EXPECT_STATUS(get_activity(&v, plain, &r), &r, 200);
    CHECK_EQ(JINT(&r, "segments"), 1);

    /* Refused with a message that names the field and the rule. */
    static const struct {
        const char *value, *want;
    } refused[] = {
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
    uint64_t id = sk_th_unique_id();
    srv_start(&v, NULL);
    create_act(&v, id, 5, 1, 1, W_NOW);
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
    uint64_t id = sk_th_unique_id();
    srv_start(&v, NULL);
    ready_act(&v, id, 10, 3, 3, W_NOW);
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

/* ---------------------------------------------------------------- purchase */

SK_TEST(purchase_answers_200_accepted_and_defaults_quantity_to_1)
{
    struct srv v;
    struct sk_th_resp r;
    char oid[4][128], st[32], ct[64];
    uint64_t id = sk_th_unique_id();
    static const char *const bodies[] = {NULL, "{}", "{\"quantity\":3}",
                                         "{\"quantity\":2,\"note\":\"unknown fields ignored\"}"};
    static const int qty[] = {1, 1, 3, 2};
    srv_start(&v, NULL);
    ready_act(&v, id, 10, 5, 3, W_NOW);
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
    uint64_t id = sk_th_unique_id();
    srv_start(&v, NULL);
    create_act(&v, id, 5, 1, 1, W_NOW);
    expect_state(&v, id, "closed");
    EXPECT_ERROR(buy(&v, id, 1, NULL, &r), &r, 403, "closed");
    CHECK_EQ(remaining(&v, id), 5);
    srv_stop(&v);
}

SK_TEST(purchase_with_a_bad_quantity_or_body_is_400_and_changes_no_stock)
{
    struct srv v;
    struct sk_th_resp r;
    uint64_t id = sk_th_unique_id();
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
    srv_start(&v, NULL);
    ready_act(&v, id, 10, 3, 2, W_NOW);
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
    uint64_t id = sk_th_unique_id();
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
    srv_start(&v, NULL);
    ready_act(&v, id, 10, 1, 1, W_NOW);
    for (size_t i = 0; i < sizeof hdrs / sizeof hdrs[0]; i++) {
        int st = buy_hdr(&v, id, hdrs[i], "{\"quantity\":1}", &r);
        if (st != 401)
            sk_th_fail(__FILE__, __LINE__, "headers '%s' -> %d %s", hdrs[i] ? hdrs[i] : "(none)",
                       st, r.body);
        EXPECT_ERROR(st, &r, 401, "unauthorized");
    }
    CHECK_EQ(remaining(&v, id), 10);
    expect_stats(&v, id, 10, 0, 0);
    srv_stop(&v);
}

SK_TEST(wrong_method_is_405_with_allow_and_unknown_path_is_404)
{
    struct srv v;
    struct sk_th_resp r;
    char path[128], allow[64];
    uint64_t id = sk_th_unique_id();
    srv_start(&v, NULL);
    ready_act(&v, id, 10, 1, 1, W_NOW);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", id);
    EXPECT_ERROR(req(&v, "GET", path, "X-User-Id: 1\r\n", NULL, &r), &r, 405, NULL);
    CHECK(sk_th_http_header(&r, "allow", allow, sizeof allow) == 0);
    CHECK(strcasestr(allow, "POST") != NULL); /* the client lower-cases headers */
    EXPECT_ERROR(req(&v, "PUT", path, "X-User-Id: 1\r\n", "{}", &r), &r, 405, NULL);
    EXPECT_ERROR(req(&v, "DELETE", "/api/v1/activities/1", NULL, NULL, &r), &r, 405, NULL);
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
    uint64_t id = sk_th_unique_id();
    srv_start(&v, NULL);
    ready_act(&v, id, 10, 1, 1, W_NOW);
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
    uint64_t id = sk_th_unique_id();
    srv_start(&v, NULL);
    ready_act(&v, id, 5, 2, 1, W_NOW);
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
    uint64_t id = sk_th_unique_id();
    srv_start(&v, NULL);
    ready_act(&v, id, 5, 1, 1, W_NOW);
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
    pid_t parent = getpid();
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);
        dup2(pfd[1], 1);
        dup2(pfd[1], 2);
        close(pfd[0]);
        for (int i = 0; env && env[i]; i++)
            putenv((char *)env[i]);
        const char *argv[32] = {sk_th_seckill_bin()};
        int n = 1;
        for (int i = 0; args[i] && n < 31; i++)
            argv[n++] = args[i];
        argv[n] = NULL;
        execv(argv[0], (char *const *)argv);
        _exit(127);
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
    pid_t parent = getpid();
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(1);
        int fd = open(s->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        dup2(fd, 2);
        dup2(fd, 1);
        for (int i = 0; env && env[i]; i++)
            putenv((char *)env[i]);
        const char *argv[32] = {sk_th_seckill_bin()};
        int n = 1;
        for (int i = 0; args[i] && n < 31; i++)
            argv[n++] = args[i];
        argv[n] = NULL;
        execv(argv[0], (char *const *)argv);
        _exit(127);
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

SK_TEST(serve_config_precedence_is_flags_then_file_then_environment)
{
    struct sk_th_serve s;
    char conf[400], db[400], env_listen[80], env_tok[] = "SECKILL_ADMIN_TOKEN=env-token";
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
    CHECK_EQ(admin_status(p_env, "env-token"), 404);
    CHECK_EQ(admin_status(p_env, SK_TH_ADMIN_TOKEN), 401);
    stop_checked(&s);

    /* The config file beats the environment. */
    FILE *f = fopen(conf, "w");
    CHECK(f != NULL);
    fprintf(f, "# test config\nlisten = %s\nadmin_token = \"file-token\"  # quoted\n", file_listen);
    fclose(f);
    spawn_serve(&s, p_file, env,
                (const char *const[]){"serve", "--db", db, "--config", conf, NULL});
    CHECK_EQ(admin_status(p_file, "file-token"), 404);
    CHECK_EQ(admin_status(p_file, "env-token"), 401);
    stop_checked(&s);

    /* Flags beat both (whatever their position relative to --config). */
    spawn_serve(&s, p_flag, env,
                (const char *const[]){"serve", "--admin-token", "flag-token", "--db", db,
                                      "--config", conf, "--listen", flag_listen, NULL});
    CHECK_EQ(admin_status(p_flag, "flag-token"), 404);
    CHECK_EQ(admin_status(p_flag, "file-token"), 401);
    CHECK_EQ(admin_status(p_flag, "env-token"), 401);
    stop_checked(&s);

    /* The harness passes --admin-token: it wins over an inherited env. */
    setenv("SECKILL_ADMIN_TOKEN", "env-token", 1);
    struct srv v;
    srv_start(&v, NULL);
    CHECK_EQ(admin_status(v.s.port, SK_TH_ADMIN_TOKEN), 404);
    CHECK_EQ(admin_status(v.s.port, "env-token"), 401);
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
    const char *argv[] = {sk_th_seckill_bin(), "serve",           "--listen", listen,
                          "--redis",           sk_th_redis_url(), "--db",     db,
                          "--admin-token",     "other",           NULL};
    pid_t parent = getpid();
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(1);
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
