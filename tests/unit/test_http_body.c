/* test_http_body.c - purchase and admin-create bodies, RFC 3339 times (seen
 * through the create body), JSON escaping; fed bytes, no server. Bodies are
 * copied into exactly sized heap buffers so ASan catches any overread. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/error.h"
#include "http/http_body.h"
#include "support/fixtures.h"
#include "support/harness.h"

static char *exact(const char *s, size_t n)
{
    char *p = malloc(n ? n : 1);
    CHECK(p != NULL);
    if (n) memcpy(p, s, n);
    return p;
}

static int purchase_n(const char *s, size_t n, int64_t *q, char *err, size_t cap)
{
    char *p = exact(s, n);
    int rc = sk_body_purchase(p, n, q, err, cap);
    free(p);
    return rc;
}

static int64_t purchase_ok(const char *s)
{
    int64_t q = -99;
    char err[256] = "";
    CHECK_MSG(purchase_n(s, strlen(s), &q, err, sizeof err) == 0, "refused %s: %s", s, err);
    return q;
}

static void purchase_bad(const char *s, size_t n, const char *why_contains)
{
    int64_t q = -99;
    char err[256] = "";
    CHECK_MSG(purchase_n(s, n, &q, err, sizeof err) == SK_EINVAL, "accepted \"%.*s\"", (int)n, s);
    CHECK_MSG(q == -99, "wrote quantity for \"%.*s\"", (int)n, s);
    CHECK_MSG(err[0] != 0, "no reason for \"%.*s\"", (int)n, s);
    if (why_contains)
        CHECK_MSG(strstr(err, why_contains) != NULL, "\"%.*s\": reason \"%s\" lacks \"%s\"", (int)n,
                  s, err, why_contains);
}
#define BAD(s, why) purchase_bad(s, strlen(s), why)

/* deterministic, so a failure reproduces */
static uint64_t rng_state = 0x2545f4914f6cdd1dULL;
#define rnd() sk_th_xorshift(&rng_state)

SK_TEST(purchase_body_empty_or_empty_object_means_quantity_one)
{
    int64_t q = 0;
    CHECK_EQ(sk_body_purchase(NULL, 0, &q, NULL, 0), 0);
    CHECK_EQ(q, 1);
    CHECK_EQ(purchase_ok("{}"), 1);
    CHECK_EQ(purchase_ok(" { } \r\n"), 1);
}

/* An unknown field is refused and named (a typo must not fall back to a
 * default in silence); keys are case-sensitive, escapes are the same key. */
SK_TEST(purchase_body_refuses_unknown_fields_naming_them)
{
    BAD("{\"note\":\"no quantity here\"}", "unknown field note");
    BAD("{\"a\":[1,{\"b\":null}],\"quantity\":3,\"z\":\"\\u00e9\"}", "unknown field a");
    BAD("{\"quantity\":3,\"z\":1}", "unknown field z");
    BAD("{\"Quantity\":5}", "unknown field Quantity");
    BAD("{\"qty\":5}", "(known: quantity)");
    /* a field name that is no printable ASCII is named safely */
    BAD("{\"q\\u0001\":1}", "unknown field q?");
}

SK_TEST(purchase_body_reads_an_integer_quantity)
{
    CHECK_EQ(purchase_ok("{\"quantity\":1}"), 1);
    CHECK_EQ(purchase_ok("{\"quantity\":2}"), 2);
    CHECK_EQ(purchase_ok("{\"quantity\":1000000}"), 1000000);
    CHECK_EQ(purchase_ok("\t{ \"quantity\" :\n 7 }\n"), 7);
    CHECK_EQ(purchase_ok("{\"quantit\\u0079\":4}"), 4); /* escaped key is the same key */
    int64_t q = 0;
    CHECK_EQ(sk_body_purchase("{\"quantity\":0}", 14, &q, NULL, 0), SK_EINVAL); /* no err buffer */
    CHECK_EQ(sk_body_purchase("x", 1, &q, NULL, 0), SK_EINVAL);
}

SK_TEST(purchase_body_rejects_fractional_quantity)
{
    BAD("{\"quantity\":1.5}", "integer");
    BAD("{\"quantity\":1.0}", "integer");
    BAD("{\"quantity\":0.999}", "integer");
}

SK_TEST(purchase_body_rejects_exponent_forms_consistently)
{
    /* even when the value is integral: numbers must be written as integers */
    BAD("{\"quantity\":1e2}", "integer");
    BAD("{\"quantity\":1E0}", "integer");
    BAD("{\"quantity\":10e-1}", "integer");
    BAD("{\"quantity\":1e400}", "range");
}

SK_TEST(purchase_body_rejects_non_integer_quantity_types)
{
    BAD("{\"quantity\":\"2\"}", "integer");
    BAD("{\"quantity\":true}", "integer");
    BAD("{\"quantity\":false}", "integer");
    BAD("{\"quantity\":null}", "integer");
    BAD("{\"quantity\":[1]}", "integer");
    BAD("{\"quantity\":{\"n\":1}}", "integer");
}

SK_TEST(purchase_body_rejects_out_of_range_quantities)
{
    BAD("{\"quantity\":0}", "between 1 and 1000000");
    BAD("{\"quantity\":-0}", "between");
    BAD("{\"quantity\":-1}", "between");
    BAD("{\"quantity\":1000001}", "between");
    BAD("{\"quantity\":9223372036854775807}", "between");
    BAD("{\"quantity\":-9223372036854775808}", "between");
    BAD("{\"quantity\":9223372036854775808}", "range");
    BAD("{\"quantity\":99999999999999999999999999999999}", "range");
}

SK_TEST(purchase_body_rejects_non_objects_and_invalid_json)
{
    const char *bad[] = {"[]",
                         "[{\"quantity\":1}]",
                         "1",
                         "\"x\"",
                         "null",
                         "true",
                         "{",
                         "}",
                         "{quantity:1}",
                         "{'quantity':1}",
                         "{\"quantity\":01}",
                         "{\"quantity\":+1}",
                         "{\"quantity\":1,}",
                         "{,}",
                         " ",
                         "\n",
                         "/* c */{}",
                         "{} // c",
                         "\xef\xbb\xbf{}",
                         "{\"quantity\":0x10}",
                         "{\"quantity\":NaN}",
                         "{\"quantity\":Infinity}",
                         "{\"quantity\" 1}",
                         "{\"quantity\"::1}",
                         "{\"q\":\"\\x41\"}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        BAD(bad[i], NULL);
    BAD("[]", "object");
}

SK_TEST(purchase_body_rejects_trailing_garbage)
{
    BAD("{\"quantity\":1}x", "JSON");
    BAD("{\"quantity\":1}{}", "JSON");
    BAD("{} {}", "JSON");
    BAD("{}]", "JSON");
    BAD("{\"quantity\":1} 2", "JSON");
}

static char *nested(int depth, const char *open, const char *close, const char *inner)
{
    size_t n = (size_t)depth * (strlen(open) + strlen(close)) + strlen(inner) + 1;
    char *s = malloc(n);
    CHECK(s != NULL);
    s[0] = 0;
    for (int i = 0; i < depth; i++)
        strcat(s, open);
    strcat(s, inner);
    for (int i = 0; i < depth; i++)
        strcat(s, close);
    return s;
}

SK_TEST(purchase_body_rejects_nesting_deeper_than_32)
{
    /* depth 32 counting the outer object: accepted */
    char *ok = nested(31, "{\"a\":", "}", "1");
    char *s = malloc(strlen(ok) + 32);
    sprintf(s, "{\"x\":%s}", ok);
    BAD(s, "unknown field x"); /* past the depth check: refused for its field */
    free(s);
    free(ok);
    char *deep = nested(32, "{\"a\":", "}", "1");
    s = malloc(strlen(deep) + 32);
    sprintf(s, "{\"x\":%s}", deep);
    BAD(s, "deeper than 32");
    free(s);
    free(deep);
    deep = nested(33, "[", "]", "");
    BAD(deep, "deeper");
    free(deep);
    /* brackets inside strings do not count: past the depth check */
    BAD("{\"s\":\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\\\"[[[[[[[[\",\"quantity\":2}",
        "unknown field s");
    /* 200,000 open brackets: refused quickly, no stack exhaustion */
    size_t n = 200000;
    char *big = malloc(n);
    memset(big, '[', n);
    purchase_bad(big, n, "deeper");
    memset(big, '{', n);
    purchase_bad(big, n, NULL);
    free(big);
}

SK_TEST(purchase_body_rejects_duplicate_quantity_keys)
{
    BAD("{\"quantity\":1,\"quantity\":1}", "duplicate");
    BAD("{\"quantity\":1,\"quantity\":5}", "duplicate");
    BAD("{\"quantity\":1,\"quantit\\u0079\":5}", "duplicate");
    /* any duplicate key is refused, even in an ignored field */
    BAD("{\"a\":{\"b\":1,\"b\":2},\"quantity\":1}", "duplicate");
}

SK_TEST(purchase_body_survives_nul_bytes_invalid_utf8_and_bad_escapes)
{
    purchase_bad("{\"quantity\":1}\0", 15, NULL);
    purchase_bad("\0{\"quantity\":1}", 15, NULL);
    purchase_bad("{\"quantity\"\0:1}", 15, NULL);
    purchase_bad("{\"q\":\"a\0b\",\"quantity\":1}", 24, NULL);
    BAD("{\"q\":\"\\u0000\",\"quantity\":1}", NULL);
    BAD("{\"q\\u0000\":1}", NULL);
    BAD("{\"q\":\"\xff\xfe\"}", NULL);
    BAD("{\"q\":\"\xc0\xaf\"}", NULL);     /* overlong '/' */
    BAD("{\"q\":\"\xed\xa0\x80\"}", NULL); /* UTF-8 encoded surrogate */
    BAD("{\"q\":\"\\ud800\"}", NULL);      /* lone surrogate escape */
    BAD("{\"q\":\"\\u12\"}", NULL);
    BAD("{\"q\":\"\x01\"}", NULL); /* raw control byte in a string */
    BAD("{\"q\":\"abc", NULL);
    BAD("{\"q\":\"abc\\", NULL);
    BAD("{\"q\":\"\xe7\xa7\x92\xe6\x9d\x80\",\"quantity\":9}", "unknown field q"); /* 秒杀 */
}

/* The fast path decides the common shape only, with jansson's answer;
 * everything else (each refusal included) it leaves to jansson. */
SK_TEST(purchase_body_fast_path_takes_the_common_shape_and_leaves_the_rest)
{
    struct {
        const char *body;
        int64_t q; /* 0: left to the full parser */
    } cases[] = {{"{\"quantity\":1}", 1},
                 {"{\"quantity\":1000000}", 1000000},
                 {"{\"quantity\":999999}", 999999},
                 {" \t\r\n{ \"quantity\"\n:\t7\r}\n ", 7},
                 {"{\"quantity\":1000001}", 0},
                 {"{\"quantity\":10000000}", 0},
                 {"{\"quantity\":0}", 0},
                 {"{\"quantity\":01}", 0},
                 {"{\"quantity\":-1}", 0},
                 {"{\"quantity\":1.0}", 0},
                 {"{\"quantity\":1e2}", 0},
                 {"{\"quantity\":1,\"quantity\":2}", 0},
                 {"{\"quantity\":1,\"a\":2}", 0},
                 {"{\"a\":2,\"quantity\":1}", 0},
                 {"{\"quantit\\u0079\":4}", 0},
                 {"{\"quantity\":1}x", 0},
                 {"{\"quantity\":1", 0},
                 {"{\"quantity\":\"1\"}", 0},
                 {"\v{\"quantity\":1}", 0},
                 {"{}", 0},
                 {"", 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = strlen(cases[i].body);
        char *p = exact(cases[i].body, n);
        int64_t q = -99, qf = -99, qa = -99;
        int quick = sk_body_purchase_quick(p, n, &q);
        CHECK_MSG(quick == (cases[i].q != 0), "fast path on %s: %d", cases[i].body, quick);
        CHECK_MSG(q == (quick ? cases[i].q : -99), "%s: quantity %lld", cases[i].body,
                  (long long)q);
        /* and the answer is the full parser's, message included */
        char ef[128], ea[128];
        int rf = sk_body_purchase_full(p, n, &qf, ef, sizeof ef);
        int ra = sk_body_purchase(p, n, &qa, ea, sizeof ea);
        CHECK_MSG(rf == ra && qf == qa && !strcmp(ef, ea), "%s: %d/%d %s/%s", cases[i].body, rf, ra,
                  ef, ea);
        if (quick) CHECK(rf == 0 && qf == q);
        free(p);
    }
    /* only the given bytes are read: a valid body cut short is not one */
    int64_t q = -99;
    CHECK_EQ(sk_body_purchase_quick("{\"quantity\":12}", 14, &q), 0);
    CHECK_EQ(sk_body_purchase_quick(NULL, 0, &q), 0);
    CHECK_EQ(q, -99);
}

SK_TEST(purchase_body_parse_cost_is_measured)
{
    const char *body = "{\"quantity\":1}";
    size_t n = strlen(body);
    int64_t q = 0;
    const int iters = 200000;
    int64_t t0 = sk_mono_us();
    for (int i = 0; i < iters; i++)
        CHECK(sk_body_purchase(body, n, &q, NULL, 0) == 0);
    double per = (double)(sk_mono_us() - t0) / iters;
    t0 = sk_mono_us();
    for (int i = 0; i < iters; i++)
        CHECK(sk_body_purchase_full(body, n, &q, NULL, 0) == 0);
    double full = (double)(sk_mono_us() - t0) / iters;
    fprintf(stderr, "# sk_body_purchase({\"quantity\":1}): %.3f us per call (jansson: %.3f)\n", per,
            full);
    CHECK_EQ(q, 1);
    /* generous: a regression to tens of us would show; sanitizers are slow */
    CHECK_MSG(per < 20.0, "%.3f us per call", per);
}

/* ---- admin create ------------------------------------------------------ */

static int create(const char *s, struct sk_activity *a, char *err, size_t cap)
{
    size_t n = strlen(s);
    char *p = exact(s, n);
    int rc = sk_body_activity_create(p, n, a, err, cap);
    free(p);
    return rc;
}

static void create_ok(const char *s, struct sk_activity *a)
{
    char err[256] = "";
    CHECK_MSG(create(s, a, err, sizeof err) == 0, "refused %s: %s", s, err);
}

static void create_bad(const char *s, const char *why_contains)
{
    struct sk_activity a;
    char err[256] = "";
    CHECK_MSG(create(s, &a, err, sizeof err) == SK_EINVAL, "accepted %s", s);
    CHECK_MSG(err[0] != 0, "no reason for %s", s);
    CHECK_MSG(a.id == 0 && a.stock == 0 && a.name[0] == 0, "partial result left for %s", s);
    if (why_contains)
        CHECK_MSG(strstr(err, why_contains) != NULL, "%s: reason \"%s\" lacks \"%s\"", s, err,
                  why_contains);
}

/* A valid body with one field's JSON text replaced ("" drops the field). */
static void body_with(char *out, size_t cap, const char *field, const char *json)
{
    const char *names[] = {"id", "name", "stock", "per_user_limit", "start", "end"};
    const char *vals[] = {
        "1001", "\"Phone X\"", "5000", "2", "\"2026-11-29T10:00:00Z\"", "\"2026-11-29T12:00:00Z\""};
    size_t o = (size_t)snprintf(out, cap, "{");
    int first = 1;
    for (size_t i = 0; i < 6; i++) {
        const char *v = strcmp(names[i], field) == 0 ? json : vals[i];
        if (!*v) continue;
        o += (size_t)snprintf(out + o, cap - o, "%s\"%s\":%s", first ? "" : ",", names[i], v);
        first = 0;
    }
    if (strcmp(field, "max_per_order") == 0 || strcmp(field, "pay_timeout_s") == 0)
        o += (size_t)snprintf(out + o, cap - o, ",\"%s\":%s", field, json);
    snprintf(out + o, cap - o, "}");
}

/* A valid body with one field's JSON text replaced is refused, the error
 * holding why_contains. */
static void field_bad(const char *field, const char *json, const char *why_contains)
{
    char b[1024];
    body_with(b, sizeof b, field, json);
    create_bad(b, why_contains);
}

SK_TEST(activity_body_parses_a_full_definition)
{
    struct sk_activity a;
    create_ok("{\"id\":1001,\"name\":\"iPhone \xe7\xa7\x92\xe6\x9d\x80\",\"stock\":5000,"
              "\"per_user_limit\":3,\"max_per_order\":2,\"start\":\"2026-11-29T10:00:00Z\","
              "\"end\":\"2026-11-29T20:00:00+08:00\",\"pay_timeout_s\":900}",
              &a);
    CHECK(a.id == 1001);
    CHECK_STR(a.name, "iPhone \xe7\xa7\x92\xe6\x9d\x80");
    CHECK_EQ(a.stock, 5000);
    CHECK_EQ(a.per_user_limit, 3);
    CHECK_EQ(a.max_per_order, 2);
    CHECK_EQ(a.start_ms, 1795946400000LL);
    CHECK_EQ(a.end_ms, 1795946400000LL + 2 * 3600000LL); /* 20:00+08:00 is 12:00Z */
    CHECK_EQ(a.pay_timeout_s, 900);
    /* a field the definition does not know, at the top or nested: refused, named */
    char err[256];
    static const char *const unknown[][2] = {
        {"\"pay_timout_s\":900", "unknown field pay_timout_s"},
        {"\"force\":true", "unknown field force"},
        {"\"rate_limit\":{\"per_user_per_s\":5,\"brust\":1}", "unknown field rate_limit.brust"},
        {"\"waiting_room\":{\"passes_per_s\":5,\"ttl\":1}", "unknown field waiting_room.ttl"},
    };
    for (size_t i = 0; i < 4; i++) {
        char body[400];
        snprintf(body, sizeof body,
                 "{\"id\":1,\"name\":\"n\",\"stock\":5,\"per_user_limit\":1,"
                 "\"start\":\"2026-11-29T10:00:00Z\",\"end\":\"2026-11-29T11:00:00Z\",%s}",
                 unknown[i][0]);
        CHECK_EQ(create(body, &a, err, sizeof err), SK_EINVAL);
        CHECK_MSG(strstr(err, unknown[i][1]), "%s: %s", body, err);
        CHECK_EQ(a.id, 0); /* nothing written */
    }
}

/* The bodies of routes that take no field but force (preheat, delete) or
 * none at all (open, close, pay, cancel, the queue's join). */
SK_TEST(options_body_takes_nothing_but_force_where_allowed)
{
    char err[256];
    int f = 7;
    CHECK_EQ(sk_body_options(NULL, 0, 0, &f, err, sizeof err), 0);
    CHECK_EQ(f, 0);
    CHECK_EQ(sk_body_options("{}", 2, 0, &f, err, sizeof err), 0);
    CHECK_EQ(sk_body_options(" {} ", 4, 1, &f, err, sizeof err), 0);
    CHECK_EQ(sk_body_options("{\"force\":true}", 14, 1, &f, err, sizeof err), 0);
    CHECK_EQ(f, 1);
    CHECK_EQ(sk_body_options("{\"force\":false}", 15, 1, &f, err, sizeof err), 0);
    CHECK_EQ(f, 0);
    CHECK_EQ(sk_body_options("{\"force\":true}", 14, 0, &f, err, sizeof err), SK_EINVAL);
    CHECK_MSG(strstr(err, "unknown field force"), "%s", err);
    CHECK_EQ(sk_body_options("{\"force\":1}", 11, 1, &f, err, sizeof err), SK_EINVAL);
    CHECK_MSG(strstr(err, "true or false"), "%s", err);
    CHECK_EQ(sk_body_options("garbage", 7, 0, &f, err, sizeof err), SK_EINVAL);
    CHECK_MSG(strstr(err, "empty or {}"), "%s", err);
    CHECK_EQ(sk_body_options("[]", 2, 1, &f, err, sizeof err), SK_EINVAL);
    CHECK_EQ(sk_body_options("{\"forse\":true}", 14, 1, &f, err, sizeof err), SK_EINVAL);
    CHECK_MSG(strstr(err, "unknown field forse"), "%s", err);
}

SK_TEST(activity_body_applies_defaults_for_optional_fields)
{
    char b[512];
    struct sk_activity a;
    body_with(b, sizeof b, "", "");
    create_ok(b, &a);
    CHECK_EQ(a.per_user_limit, 2);
    CHECK_EQ(a.max_per_order, 2); /* defaults to per_user_limit */
    CHECK_EQ(a.pay_timeout_s, SK_BODY_PAY_TIMEOUT_DEFAULT);
    CHECK_EQ(a.end_ms - a.start_ms, 2 * 3600 * 1000);
    CHECK(a.id == 1001);
    CHECK_STR(a.name, "Phone X");
}

SK_TEST(activity_body_reports_each_missing_required_field)
{
    const char *req[] = {"id", "name", "stock", "per_user_limit", "start", "end"};
    for (size_t i = 0; i < 6; i++) {
        char b[512], want[64];
        body_with(b, sizeof b, req[i], "");
        snprintf(want, sizeof want, "missing field %s", req[i]);
        create_bad(b, want);
    }
    create_bad("", "object");
    create_bad("[]", "object");
    create_bad("{}", "missing field id");
}

SK_TEST(activity_body_rejects_out_of_range_and_mistyped_fields)
{
    struct {
        const char *field, *json, *why;
    } cases[] = {
        {"id", "0", "id must be"},
        {"id", "-5", "id must be"},
        {"id", "\"1001\"", "id must be"},
        {"id", "1001.0", "id must be"},
        {"id", "1000000000000000", "id must be"},
        {"id", "null", "id must be"},
        {"name", "\"\"", "name must be 1 to 127"},
        {"name", "42", "name must be a string"},
        {"name", "null", "name must be a string"},
        {"name", "\"tab\\there\"", "control"},
        {"name", "\"a\\u007fb\"", "control"},
        {"name",
         "\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
         "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"",
         "name must be 1 to 127"}, /* 128 bytes */
        {"stock", "0", "stock must be"},
        {"stock", "1000000000001", "stock must be"},
        {"stock", "1e3", "stock must be"},
        {"stock", "true", "stock must be"},
        {"per_user_limit", "0", "per_user_limit must be"},
        {"per_user_limit", "-1", "per_user_limit must be"},
        {"max_per_order", "0", "max_per_order must be"},
        {"max_per_order", "3", "max_per_order must be an integer between 1 and 2"},
        {"max_per_order", "null", "max_per_order must be"},
        {"pay_timeout_s", "0", "pay_timeout_s must be"},
        {"pay_timeout_s", "31536001", "pay_timeout_s must be"},
        {"pay_timeout_s", "\"1800\"", "pay_timeout_s must be"},
        {"start", "1795946400", "start must be an RFC 3339 string"},
        {"start", "\"1969-12-31T23:59:59Z\"", "between 1970 and 9999"},
        {"end", "\"soon\"", "end must be an RFC 3339 time"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        field_bad(cases[i].field, cases[i].json, cases[i].why);
    /* exactly 127 bytes is fine */
    char name[140] = "\"", b[1024];
    memset(name + 1, 'n', 127);
    strcpy(name + 128, "\"");
    body_with(b, sizeof b, "name", name);
    struct sk_activity a;
    create_ok(b, &a);
    CHECK_EQ(strlen(a.name), 127);
}

SK_TEST(activity_body_rejects_end_not_after_start)
{
    char b[512];
    field_bad("end", "\"2026-11-29T10:00:00Z\"", "end must be after start");
    field_bad("end", "\"2026-11-29T09:59:59.999Z\"", "end must be after start");
    field_bad("end", "\"2026-11-29T18:00:00+08:00\"", "end must be after start"); /* same instant */
    body_with(b, sizeof b, "end", "\"2026-11-29T10:00:00.001Z\"");
    struct sk_activity a;
    create_ok(b, &a);
    CHECK_EQ(a.end_ms - a.start_ms, 1);
}

static int64_t start_of(const char *rfc)
{
    char b[512], v[128];
    snprintf(v, sizeof v, "\"%s\"", rfc);
    body_with(b, sizeof b, "start", v);
    /* keep end after any start we test */
    char *e = strstr(b, "2026-11-29T12:00:00Z");
    CHECK(e != NULL);
    memcpy(e, "9999", 4);
    struct sk_activity a;
    char err[256] = "";
    int rc = create(b, &a, err, sizeof err);
    CHECK_MSG(rc == 0 || strstr(err, "start") != NULL, "%s: %s", rfc, err);
    return rc == 0 ? a.start_ms : -1;
}

/* Expected values from Python: datetime.fromisoformat(s).timestamp() * 1000 */
SK_TEST(rfc3339_accepts_zulu_fractions_and_offsets)
{
    CHECK_EQ(start_of("2026-11-29T10:00:00Z"), 1795946400000LL);
    CHECK_EQ(start_of("2026-11-29t10:00:00z"), 1795946400000LL);
    CHECK_EQ(start_of("2026-11-29T18:00:00+08:00"), 1795946400000LL);
    CHECK_EQ(start_of("2026-11-29T04:30:00-05:30"), 1795946400000LL);
    CHECK_EQ(start_of("2026-11-29T10:00:00-00:00"), 1795946400000LL);
    CHECK_EQ(start_of("2026-11-29T10:00:00.5Z"), 1795946400500LL);
    CHECK_EQ(start_of("2026-11-29T10:00:00.123Z"), 1795946400123LL);
    CHECK_EQ(start_of("2026-11-29T10:00:00.123999999Z"), 1795946400123LL); /* truncated */
    CHECK_EQ(start_of("2026-11-29T10:00:00.07+08:00"), 1795946400070LL - 8 * 3600000LL);
    CHECK_EQ(start_of("2024-02-29T00:00:00Z"), 1709164800000LL);
    CHECK_EQ(start_of("2000-02-29T23:59:59Z"), 951868799000LL);
    CHECK_EQ(start_of("1970-01-01T00:00:00Z"), 0);
    CHECK_EQ(start_of("1970-01-01T08:00:00+08:00"), 0);
}

SK_TEST(rfc3339_rejects_impossible_dates_and_missing_zone)
{
    const char *bad[] = {"2026-02-30T10:00:00Z",      "2026-02-29T10:00:00Z",
                         "1900-02-29T10:00:00Z",      "2026-04-31T10:00:00Z",
                         "2026-13-01T10:00:00Z",      "2026-00-10T10:00:00Z",
                         "2026-11-00T10:00:00Z",      "2026-11-29T24:00:00Z",
                         "2026-11-29T10:60:00Z",      "2026-11-29T10:00:60Z",
                         "2026-11-29T10:00:00",       "2026-11-29 10:00:00Z",
                         "2026-11-29T10:00Z",         "26-11-29T10:00:00Z",
                         "2026-11-29T10:00:00.Z",     "2026-11-29T10:00:00+0800",
                         "2026-11-29T10:00:00+08",    "2026-11-29T10:00:00+24:00",
                         "2026-11-29T10:00:00+08:60", "2026-11-29T10:00:00ZZ",
                         "2026-11-29T10:00:00Z ",     " 2026-11-29T10:00:00Z",
                         "2026/11/29T10:00:00Z",      "2026-11-29T1:00:00Z",
                         "+2026-11-29T10:00:00Z",     "2026-11-29T10:00:00UTC",
                         "2026-1a-29T10:00:00Z",      ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_MSG(start_of(bad[i]) == -1, "accepted \"%s\"", bad[i]);
}

/* libc's timegm is an independent oracle: random valid times in every
 * month, with random offsets, must agree to the millisecond. */
SK_TEST(rfc3339_agrees_with_timegm_on_random_valid_times)
{
    static const int dim[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    for (int i = 0; i < 20000; i++) {
        struct tm tm = {0};
        int y = 1971 + (int)(rnd() % 8000), mo = 1 + (int)(rnd() % 12);
        int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
        int d = 1 + (int)(rnd() % (unsigned)(dim[mo - 1] + (mo == 2 && leap)));
        tm.tm_year = y - 1900;
        tm.tm_mon = mo - 1;
        tm.tm_mday = d;
        tm.tm_hour = (int)(rnd() % 24);
        tm.tm_min = (int)(rnd() % 60);
        tm.tm_sec = (int)(rnd() % 60);
        int ms = (int)(rnd() % 1000);
        int oh = (int)(rnd() % 24), om = (int)(rnd() % 60), neg = (int)(rnd() & 1);
        char t[64];
        snprintf(t, sizeof t, "%04d-%02d-%02dT%02d:%02d:%02d.%03d%c%02d:%02d", y, mo, d, tm.tm_hour,
                 tm.tm_min, tm.tm_sec, ms, neg ? '-' : '+', oh, om);
        int64_t off = (int64_t)(oh * 3600 + om * 60) * (neg ? -1 : 1);
        int64_t want = ((int64_t)timegm(&tm) - off) * 1000 + ms;
        if (want < 0 || want > SK_BODY_TIME_MAX_MS) continue; /* outside the accepted range */
        CHECK_MSG(start_of(t) == want, "%s: %lld != %lld", t, (long long)start_of(t),
                  (long long)want);
    }
}

/* ---- escaping ------------------------------------------------------------ */

static const char *esc(const char *s, size_t n)
{
    static char out[1024];
    int rc = sk_body_json_escape(s, n, out, sizeof out);
    CHECK(rc >= 0 && (size_t)rc == strlen(out));
    return out;
}

SK_TEST(json_escape_escapes_quotes_backslashes_and_control_bytes)
{
    CHECK_STR(esc("plain", 5), "plain");
    CHECK_STR(esc("a\"b\\c", 5), "a\\\"b\\\\c");
    CHECK_STR(esc("\n\r\t\b\f", 5), "\\n\\r\\t\\u0008\\u000c");
    CHECK_STR(esc("a\0b", 3), "a\\u0000b");
    CHECK_STR(esc("\x1f\x7f", 2), "\\u001f\\u007f");
    CHECK_STR(esc("</script>&", 10), "\\u003c/script\\u003e\\u0026");
    CHECK_STR(esc("\xe7\xa7\x92\xe6\x9d\x80", 6), "\xe7\xa7\x92\xe6\x9d\x80");
    CHECK_STR(esc("\xf0\x9f\x98\x80", 4), "\xf0\x9f\x98\x80");
    CHECK_STR(esc("\xe2\x80\xa8\xe2\x80\xa9", 6), "\\u2028\\u2029");
    CHECK_STR(esc("", 0), "");
}

SK_TEST(json_escape_replaces_each_invalid_utf8_byte)
{
    CHECK_STR(esc("\xff", 1), "\\ufffd");
    CHECK_STR(esc("a\xc0\xafz", 4), "a\\ufffd\\ufffdz");                   /* overlong */
    CHECK_STR(esc("\xed\xa0\x80", 3), "\\ufffd\\ufffd\\ufffd");            /* surrogate */
    CHECK_STR(esc("\xf4\x90\x80\x80", 4), "\\ufffd\\ufffd\\ufffd\\ufffd"); /* > U+10FFFF */
    CHECK_STR(esc("\xe7\xa7", 2), "\\ufffd\\ufffd");                       /* truncated */
    CHECK_STR(esc("\xe0\x80\x80", 3), "\\ufffd\\ufffd\\ufffd");            /* overlong 3-byte */
    CHECK_STR(esc("\x80x", 2), "\\ufffdx");                                /* lone continuation */
}

SK_TEST(json_escape_reports_a_small_buffer)
{
    char out[8];
    memset(out, 'x', sizeof out);
    CHECK_EQ(sk_body_json_escape("abcdefgh", 8, out, sizeof out), SK_ENOMEM);
    CHECK_STR(out, "");
    CHECK_EQ(sk_body_json_escape("abcdefg", 7, out, sizeof out), 7);
    CHECK_EQ(sk_body_json_escape("abcdef\"", 7, out, sizeof out), SK_ENOMEM);
    CHECK_EQ(sk_body_json_escape("a", 1, NULL, 0), SK_ENOMEM);
    CHECK_EQ(sk_body_json_escape("", 0, out, 1), 0);
    /* found by fuzz_http_body: an empty input into no room at all wrote
     * the terminator past the buffer */
    CHECK_EQ(sk_body_json_escape("", 0, NULL, 0), SK_ENOMEM);
    char *none = malloc(1);
    CHECK(none != NULL);
    none[0] = 'x';
    CHECK_EQ(sk_body_json_escape("", 0, none + 1, 0), SK_ENOMEM);
    CHECK_EQ(none[0], 'x');
    free(none);
}

SK_TEST(error_json_builds_the_spec_error_body)
{
    char out[256];
    int n = sk_body_error_json("bad_request", "quantity must be \"1\"\n", out, sizeof out);
    CHECK_STR(out, "{\"error\":\"bad_request\",\"message\":\"quantity must be \\\"1\\\"\\n\"}");
    CHECK_EQ(n, (long long)strlen(out));
    json_error_t je;
    json_t *j = json_loads(out, 0, &je);
    CHECK(j != NULL);
    CHECK_STR(json_string_value(json_object_get(j, "message")), "quantity must be \"1\"\n");
    json_decref(j);
    for (size_t cap = 0; cap <= (size_t)n; cap++)
        CHECK_EQ(sk_body_error_json("bad_request", "quantity must be \"1\"\n", out, cap),
                 SK_ENOMEM);
    CHECK_EQ(sk_body_error_json("bad_request", "quantity must be \"1\"\n", out, (size_t)n + 1), n);
}

/* ---- robustness ------------------------------------------------------------ */

static const char *seeds[] = {
    "{\"quantity\":1}",
    "{\"quantity\":2,\"x\":[1,2,{\"y\":\"z\"}]}",
    "{}",
    "{\"id\":1001,\"name\":\"n\",\"stock\":5,\"per_user_limit\":1,\"start\":\"2026-11-29T10:00:"
    "00Z\","
    "\"end\":\"2026-11-29T18:00:00+08:00\",\"pay_timeout_s\":60,\"max_per_order\":1}",
    "{\"id\":1,\"name\":\"\\u00e9\\\"\",\"stock\":1e3,\"per_user_limit\":-1,\"start\":null}",
};

/* 100,000 mutated or random byte strings through every parser: no crash
 * (ASan/UBSan under SANITIZE=1), results always one of the documented
 * outcomes, successes always in range, and escaping always yields JSON
 * that decodes back to the input when the input was valid UTF-8. */
SK_TEST(body_parsers_survive_100000_random_and_mutated_inputs)
{
    static const char alphabet[] = "{}[]\":,0123456789.-+eE \\u quantity null true \xff\xc3\xa9";
    char buf[512];
    int accepted_purchase = 0, accepted_create = 0;
    for (int iter = 0; iter < 100000; iter++) {
        size_t n;
        if (iter % 4 != 3) {
            const char *seed = seeds[rnd() % (sizeof seeds / sizeof seeds[0])];
            n = strlen(seed);
            memcpy(buf, seed, n);
            int muts = 1 + (int)(rnd() % 4);
            for (int m = 0; m < muts; m++) {
                size_t at = n ? (size_t)(rnd() % n) : 0;
                switch (rnd() % 5) {
                case 0:
                    if (n) buf[at] = alphabet[rnd() % (sizeof alphabet - 1)];
                    break;
                case 1:
                    if (n) buf[at] = (char)rnd();
                    break;
                case 2:
                    if (n) {
                        memmove(buf + at, buf + at + 1, n - at - 1);
                        n--;
                    }
                    break;
                case 3:
                    if (n) buf[at] = 0;
                    break;
                default:
                    n = sk_th_insert_drawn(buf, n, sizeof buf, at, alphabet, sizeof alphabet - 1,
                                           &rng_state);
                }
            }
        } else {
            n = (size_t)(rnd() % 64);
            for (size_t i = 0; i < n; i++)
                buf[i] = (rnd() & 1) ? alphabet[rnd() % (sizeof alphabet - 1)] : (char)rnd();
        }
        char *p = exact(buf, n);
        char err[128];
        int64_t q = -1;
        int rc = sk_body_purchase(p, n, &q, err, sizeof err);
        CHECK_MSG(rc == 0 || rc == SK_EINVAL, "iteration %d: rc %d", iter, rc);
        /* the fast path changes no answer */
        char ferr[128];
        int64_t fq = -1;
        CHECK_MSG(sk_body_purchase_full(p, n, &fq, ferr, sizeof ferr) == rc && fq == q &&
                      !strcmp(ferr, err),
                  "iteration %d: fast path and full parser disagree", iter);
        if (rc == 0) {
            CHECK(q >= 1 && q <= SK_BODY_QUANTITY_MAX);
            accepted_purchase++;
        } else {
            CHECK(err[0] != 0);
        }
        struct sk_activity a;
        rc = sk_body_activity_create(p, n, &a, err, sizeof err);
        CHECK(rc == 0 || rc == SK_EINVAL);
        if (rc == 0) {
            CHECK(a.id >= 1 && a.stock >= 1 && a.end_ms > a.start_ms && a.name[0]);
            CHECK(a.max_per_order >= 1 && a.max_per_order <= a.per_user_limit);
            accepted_create++;
        } else {
            CHECK(err[0] != 0 && a.id == 0);
        }
        /* escape, wrap in quotes, decode: always valid JSON */
        char out[512 * 6 + 3];
        out[0] = '"';
        int en = sk_body_json_escape(p, n, out + 1, sizeof out - 2);
        CHECK(en >= 0);
        out[en + 1] = '"';
        json_error_t je;
        json_t *j = json_loadb(out, (size_t)en + 2, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
        CHECK_MSG(j && json_is_string(j), "escape of iteration %d is not JSON: %s", iter, je.text);
        if (!strstr(out, "\\ufffd")) /* nothing replaced: decodes to the input */
            CHECK(json_string_length(j) == n && memcmp(json_string_value(j), p, n) == 0);
        json_decref(j);
        free(p);
    }
    /* the mutations must not be so destructive that nothing is ever valid */
    CHECK(accepted_purchase > 100);
    CHECK(accepted_create > 10);
}

SK_TEST(purchase_body_with_a_nul_byte_before_the_closing_brace_is_refused)
{
    /* jansson alone accepts this as {"quantity":1} */
    int64_t q = 0;
    char err[128];
    CHECK_EQ(sk_body_purchase("{\"quantity\":1\0}", 15, &q, err, sizeof err), SK_EINVAL);
    CHECK_MSG(strstr(err, "NUL") != NULL, "%s", err);
}
