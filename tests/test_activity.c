/* test_activity.c - the activity lifecycle: definition rules and time
 * parsing (pure functions fed strings), the store spec (the store itself:
 * test_store_backends.c), and `seckill activity ...` end to end (the real
 * binary against the run's redis-server), including proof that refused commands change
 * nothing in the store or in Redis. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "core/clock.h"
#include "core/codes.h"
#include "core/error.h"
#include "engine/activity.h"
#include "engine/keys.h"
#include "engine/stock.h"
#include "store/store.h"
#include "support/fixtures.h"
#include "support/harness.h"

/* ---- helpers ---- */

static int64_t rfc(const char *s)
{
    int64_t ms = 0;
    CHECK_MSG(sk_time_parse_rfc3339(s, strlen(s), &ms) == 0, "should parse: %s", s);
    return ms;
}

static int rfc_rejects(const char *s)
{
    int64_t ms = 12345;
    return sk_time_parse_rfc3339(s, strlen(s), &ms) == SK_EINVAL && ms == 12345;
}

/* A fresh SQLite file, the run's Redis and two fresh activity ids, as
 * numbers and as text (most tests need one, some two). */
struct env {
    char path[400];
    char spec[420];
    const char *redis;
    uint64_t aid, aid2;
    char id[24], id2[24];
};

static sk_store *store_of(const struct env *e)
{
    sk_store *st;
    char err[256];
    CHECK_MSG(sk_store_open(&st, e->spec, err, sizeof err) == 0, "open store: %s", err);
    return st;
}

/* Runs `seckill activity <args...> --redis R --db D`. */
static int cli_run(const struct env *e, const char *redis, char *out, size_t cap,
                   const char *const *args)
{
    return sk_th_run_with_db(out, cap, "activity", args, redis, e->spec);
}
#define CLI(e, out, ...)                                                                           \
    cli_run(e, (e)->redis, out, sizeof out, (const char *const[]){__VA_ARGS__, NULL})

static sk_redis *redis_of(const char *url)
{
    sk_redis *r = sk_th_redis_new(url, 1000, 1000);
    return r;
}

static struct sk_stock_state live_of(uint64_t id)
{
    sk_redis *r = redis_of(sk_th_redis_url());
    struct sk_stock_state st;
    CHECK_EQ(sk_stock_state(r, id, &st), 0);
    sk_redis_free(r);
    return st;
}

/* Number of Redis keys of the activity (all share its hash tag). */
static long long redis_keys_of(uint64_t id)
{
    sk_redis *r = redis_of(sk_th_redis_url());
    struct sk_keys k;
    sk_keys_for(&k, id);
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(r, &rep, "EXISTS %s %s %s %s %s", k.meta, k.stock, k.buyers, k.orders,
                          k.released),
             0);
    CHECK_EQ(rep->type, REDIS_REPLY_INTEGER);
    long long n = rep->integer;
    freeReplyObject(rep);
    sk_redis_free(r);
    return n;
}

/* The stored row, or CHECK failure; returns rc of the get. */
static int stored(const struct env *e, uint64_t id, struct sk_activity *a)
{
    sk_store *st = store_of(e);
    int rc = sk_store_activity_get(st, id, a);
    sk_store_close(st);
    return rc;
}

/* `create` of the env's activity named "x" with stock 5 and limit 1 and
 * the extra flags (NULL-terminated). */
static int create_x(const struct env *e, char *out, size_t cap, const char *const *extra)
{
    const char *args[24] = {"create", "--id", e->id, "--name", "x", "--stock", "5", "--limit", "1"};
    size_t n = 9;
    while (*extra && n < 23)
        args[n++] = *extra++;
    CHECK_MSG(*extra == NULL, "too many flags for create_x");
    args[n] = NULL;
    return cli_run(e, e->redis, out, cap, args);
}
#define CREATE_X(e, out, ...) create_x(e, out, sizeof out, (const char *const[]){__VA_ARGS__, NULL})

/* create_x with these flags is refused (exit 2) with a message that holds
 * `want`. */
static void create_x_refused(const struct env *e, const char *want, const char *const *flags)
{
    char out[4096];
    int rc = create_x(e, out, sizeof out, flags);
    CHECK_MSG(rc == 2, "%s: exit %d: %s", flags[0], rc, out);
    CHECK_MSG(strstr(out, want) != NULL, "%s: output lacks '%s': %s", flags[0], want, out);
}
#define CREATE_X_REFUSED(e, want, ...)                                                             \
    create_x_refused(e, want, (const char *const[]){__VA_ARGS__, NULL})

/* `create` of activity `id` named "x" with the given stock and limit 1 is
 * refused (exit 2) with a message that holds `want`. */
static void create_refused(const struct env *e, const char *id, const char *stock, const char *want)
{
    char out[4096];
    int rc = CLI(e, out, "create", "--id", id, "--name", "x", "--stock", stock, "--limit", "1");
    CHECK_MSG(rc == 2, "create --id %s --stock %s: exit %d: %s", id, stock, rc, out);
    CHECK_MSG(strstr(out, want) != NULL, "output lacks '%s': %s", want, out);
}

/* Runs the CLI and checks its exit code and that its output holds `want`. */
static void cli_says(const struct env *e, int want_rc, const char *want, const char *const *args)
{
    char out[8192];
    int rc = cli_run(e, e->redis, out, sizeof out, args);
    CHECK_EQ(rc, want_rc);
    CHECK_MSG(strstr(out, want) != NULL, "output: %s", out);
}
#define CLI_SAYS(e, rc, want, ...) cli_says(e, rc, want, (const char *const[]){__VA_ARGS__, NULL})

/* The stored row exists and is in state `want`. */
static void state_is(const struct env *e, uint64_t id, const char *want)
{
    struct sk_activity a;
    CHECK_EQ(stored(e, id, &a), 0);
    CHECK_STR(a.state, want);
}

static size_t stored_count(const struct env *e)
{
    sk_store *st = store_of(e);
    struct sk_activity *all;
    size_t n;
    CHECK_EQ(sk_store_activity_list(st, &all, &n), 0);
    free(all);
    sk_store_close(st);
    return n;
}

static void check_nothing_written(const struct env *e, uint64_t id)
{
    struct sk_activity a;
    CHECK_EQ(stored(e, id, &a), SK_ENOTFOUND);
    CHECK_EQ(stored_count(e), 0);
    CHECK_EQ(redis_keys_of(id), 0);
}

static json_t *show_json(const struct env *e, const char *id)
{
    char out[8192];
    int rc = CLI(e, out, "show", "--id", id, "--json");
    CHECK_MSG(rc == 0, "show exit %d: %s", rc, out);
    json_error_t jerr;
    json_t *o = json_loads(out, 0, &jerr);
    CHECK_MSG(o && json_is_object(o), "show --json is not an object (%s): %s", jerr.text, out);
    return o;
}

static long long jint(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    CHECK_MSG(json_is_integer(v), "field %s missing or not an integer", key);
    return (long long)json_integer_value(v);
}

static const char *jstr(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    CHECK_MSG(json_is_string(v), "field %s missing or not a string", key);
    return json_string_value(v);
}

/* `show --json` of the env's activity reports these live counts. */
static void show_counts(const struct env *e, long long remaining, long long admitted,
                        long long held, long long buyers, long long stream_length)
{
    json_t *o = show_json(e, e->id);
    CHECK_EQ(jint(o, "stock_remaining"), remaining);
    CHECK_EQ(jint(o, "admitted"), admitted);
    CHECK_EQ(jint(o, "held"), held);
    CHECK_EQ(jint(o, "buyers"), buyers);
    CHECK_EQ(jint(o, "stream_length"), stream_length);
    json_decref(o);
}

/* Creates (store only) activity `id` with the given stock and limit 2,
 * window [now - 1 s, now + 1 h). */
static void create_ok(const struct env *e, const char *id, const char *stock)
{
    char out[4096];
    int rc = CLI(e, out, "create", "--id", id, "--name", "test sale", "--stock", stock, "--limit",
                 "2", "--start", "now", "--end", "+1h");
    CHECK_MSG(rc == 0, "create exit %d: %s", rc, out);
}

static void run_ok(const struct env *e, const char *sub, const char *id)
{
    char out[4096];
    int rc = CLI(e, out, sub, "--id", id);
    CHECK_MSG(rc == 0, "%s exit %d: %s", sub, rc, out);
}

static void id_str(char *buf, size_t cap, uint64_t id)
{
    snprintf(buf, cap, "%" PRIu64, id);
}

/* A fresh id no other test uses, written as text into `id` (24 bytes). */
static uint64_t id_fresh(char *id)
{
    uint64_t aid = sk_th_unique_id();
    id_str(id, 24, aid);
    return aid;
}

static struct env env_fresh(void)
{
    struct env e;
    snprintf(e.path, sizeof e.path, "%s/a.db", sk_th_tmpdir());
    snprintf(e.spec, sizeof e.spec, "sqlite:%s", e.path);
    e.redis = sk_th_redis_url();
    e.aid = id_fresh(e.id);
    e.aid2 = id_fresh(e.id2);
    return e;
}

/* Creates activity `id` with stock 10, preheats and opens it. */
static void sale_open(const struct env *e, const char *id)
{
    create_ok(e, id, "10");
    run_ok(e, "preheat", id);
    run_ok(e, "open", id);
}

/* One purchase that must be admitted. */
static void buy_ok(sk_redis *r, uint64_t aid, uint64_t user, int64_t qty)
{
    struct sk_admission adm;
    CHECK_EQ(sk_th_buy(r, aid, user, qty, &adm, NULL), 0);
    CHECK_EQ(adm.rc, SK_RC_OK);
}

/* The env's activity open with stock 10, user 7 holding qty of it, then
 * sub-command `then` run on it (NULL: none). */
static void sale_bought(const struct env *e, int64_t qty, const char *then)
{
    sale_open(e, e->id);
    sk_redis *r = redis_of(e->redis);
    buy_ok(r, e->aid, 7, qty);
    sk_redis_free(r);
    if (then) run_ok(e, then, e->id);
}

/* Preheats the env's activity; then its Redis meta holds each field of
 * `fields` (NULL-terminated) with the value beside it in `want`. */
static void preheat_carries(const struct env *e, const char *const *fields, const char *const *want)
{
    run_ok(e, "preheat", e->id);
    sk_redis *r = redis_of(e->redis);
    struct sk_keys k;
    sk_keys_for(&k, e->aid);
    for (size_t i = 0; fields[i]; i++) {
        redisReply *rep;
        CHECK_EQ(sk_redis_cmd(r, &rep, "HGET %s %s", k.meta, fields[i]), 0);
        CHECK_MSG(rep->type == REDIS_REPLY_STRING, "%s not in meta", fields[i]);
        CHECK_STR(rep->str, want[i]);
        freeReplyObject(rep);
    }
    sk_redis_free(r);
}

/* ---- definition rules ---- */

SK_TEST(activity_validate_accepts_a_complete_definition_and_applies_defaults)
{
    struct sk_activity a;
    sk_th_activity_valid(&a, 1);
    char err[256] = "";
    CHECK_EQ(sk_activity_validate(&a, err, sizeof err), 0);
    CHECK_EQ(a.max_per_order, 2); /* defaults to the per-user limit */
    CHECK_EQ(a.pay_timeout_s, SK_ACTIVITY_PAY_TIMEOUT_DEFAULT);
    CHECK_STR(a.state, "created");
    /* An explicit max per order survives the defaults. */
    sk_activity_init(&a);
    a.per_user_limit = 5;
    a.max_per_order = 1;
    sk_activity_apply_defaults(&a);
    CHECK_EQ(a.max_per_order, 1);
}

SK_TEST(activity_validate_rejects_each_bad_field_with_a_reason)
{
    static const struct {
        const char *field, *want;
    } cases[] = {
        {"stock0", "stock"},
        {"stock-1", "stock"},
        {"stockmax", "stock"},
        {"limit0", "limit"},
        {"max0", "max per order"},
        {"endeq", "end must be after"},
        {"endlt", "end must be after"},
        {"name0", "name"},
        {"name128", "name"},
        {"namectl", "name"},
        {"nameutf", "name"},
        {"pay0", "pay timeout"},
        {"id0", "id"},
        {"idmax", "id"},
        {"state", "state"},
        {"startneg", "start"},
        {"maxunset", "max per order"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct sk_activity a;
        sk_th_activity_valid(&a, 7);
        const char *f = cases[i].field;
        if (!strcmp(f, "stock0"))
            a.stock = 0;
        else if (!strcmp(f, "stock-1"))
            a.stock = -1;
        else if (!strcmp(f, "stockmax"))
            a.stock = SK_ACTIVITY_STOCK_MAX + 1;
        else if (!strcmp(f, "limit0"))
            a.per_user_limit = 0;
        else if (!strcmp(f, "max0"))
            a.max_per_order = 0;
        else if (!strcmp(f, "endeq"))
            a.end_ms = a.start_ms;
        else if (!strcmp(f, "endlt"))
            a.end_ms = a.start_ms - 1;
        else if (!strcmp(f, "name0"))
            a.name[0] = 0;
        else if (!strcmp(f, "name128"))
            memset(a.name, 'x', sizeof a.name); /* no terminator */
        else if (!strcmp(f, "namectl"))
            snprintf(a.name, sizeof a.name, "bad\nname");
        else if (!strcmp(f, "nameutf"))
            snprintf(a.name, sizeof a.name, "bad \xc3(");
        else if (!strcmp(f, "pay0"))
            a.pay_timeout_s = 0;
        else if (!strcmp(f, "id0"))
            a.id = 0;
        else if (!strcmp(f, "idmax"))
            a.id = SK_ACTIVITY_ID_MAX + 1;
        else if (!strcmp(f, "state"))
            snprintf(a.state, sizeof a.state, "running");
        else if (!strcmp(f, "startneg"))
            a.start_ms = -1000;
        else if (!strcmp(f, "maxunset"))
            a.max_per_order = SK_ACTIVITY_UNSET;
        char err[256] = "";
        CHECK_MSG(sk_activity_validate(&a, err, sizeof err) == SK_EINVAL, "case %s accepted", f);
        CHECK_MSG(strstr(err, cases[i].want) != NULL, "case %s: reason '%s' lacks '%s'", f, err,
                  cases[i].want);
    }
    /* Boundaries that are valid. */
    struct sk_activity a;
    sk_th_activity_valid(&a, SK_ACTIVITY_ID_MAX);
    a.stock = SK_ACTIVITY_STOCK_MAX;
    a.end_ms = a.start_ms + 1;
    memset(a.name, 'y', SK_ACTIVITY_NAME_MAX - 1);
    a.name[SK_ACTIVITY_NAME_MAX - 1] = 0;
    CHECK_EQ(sk_activity_validate(&a, NULL, 0), 0);
    snprintf(a.name, sizeof a.name, "秒杀 iPhone");
    CHECK_EQ(sk_activity_validate(&a, NULL, 0), 0);
}

SK_TEST(activity_segments_default_to_1_range_1_to_256_and_never_exceed_the_stock)
{
    struct sk_activity a;
    char err[256];
    /* Unset until the defaults: 1, not segmented; an explicit value survives. */
    sk_activity_init(&a);
    CHECK_EQ(a.segments, SK_ACTIVITY_UNSET);
    sk_th_activity_valid(&a, 7);
    CHECK_EQ(a.segments, 1);
    CHECK_EQ(sk_activity_validate(&a, NULL, 0), 0);
    sk_activity_init(&a);
    a.segments = 8;
    sk_activity_apply_defaults(&a);
    CHECK_EQ(a.segments, 8);

    static const struct {
        int64_t stock, segments;
        const char *want; /* NULL: valid */
    } cases[] = {
        {100, 1, NULL},
        {100, 2, NULL},
        {256, SK_ACTIVITY_SEGMENTS_MAX, NULL},
        {1000, SK_ACTIVITY_SEGMENTS_MAX, NULL},
        {5, 5, NULL}, /* one unit per segment */
        {100, 0, "segments must be between 1 and 256 (got 0)"},
        {100, -1, "segments must be between 1 and 256 (got -1)"},
        {1000, SK_ACTIVITY_SEGMENTS_MAX + 1, "segments must be between 1 and 256 (got 257)"},
        {1000, INT64_MAX, "segments must be between 1 and 256"},
        {100, SK_ACTIVITY_UNSET, "segments is not set"},
        {5, 6, "segments (6) must not exceed the stock (5)"},
        {1, 2, "each segment needs at least one unit"},
        {255, SK_ACTIVITY_SEGMENTS_MAX, "must not exceed the stock (255)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sk_th_activity_valid(&a, 7);
        a.stock = cases[i].stock;
        a.segments = cases[i].segments;
        err[0] = 0;
        int rc = sk_activity_validate(&a, err, sizeof err);
        if (!cases[i].want) {
            CHECK_MSG(rc == 0, "stock %lld segments %lld refused: %s", (long long)cases[i].stock,
                      (long long)cases[i].segments, err);
            continue;
        }
        CHECK_MSG(rc == SK_EINVAL, "stock %lld segments %lld accepted", (long long)cases[i].stock,
                  (long long)cases[i].segments);
        CHECK_MSG(strstr(err, cases[i].want) != NULL, "reason '%s' lacks '%s'", err, cases[i].want);
        CHECK_MSG(strchr(err, '\n') == NULL, "reason is not one line: '%s'", err);
    }

    /* Preheat's Redis-side definition carries it. */
    sk_th_activity_valid(&a, 7);
    a.segments = 16;
    struct sk_stock_def d;
    sk_activity_stock_def(&a, &d);
    CHECK_EQ(d.segments, 16);
    CHECK_EQ(d.initial, 100);
    sk_th_activity_valid(&a, 7);
    sk_activity_stock_def(&a, &d);
    CHECK_EQ(d.segments, 1);
}

SK_TEST(activity_live_state_follows_switch_and_window)
{
    const int64_t s = 1000, e = 2000;
    CHECK_STR(sk_activity_live_state(1, 1, s, e, 1500), "open");
    CHECK_STR(sk_activity_live_state(1, 1, s, e, 999), "scheduled");
    CHECK_STR(sk_activity_live_state(1, 1, s, e, 2000), "ended"); /* end is exclusive */
    CHECK_STR(sk_activity_live_state(1, 0, s, e, 1500), "closed");
    CHECK_STR(sk_activity_live_state(1, 0, s, e, 500), "closed");
    CHECK_STR(sk_activity_live_state(0, 0, s, e, 1500), "closed");
    CHECK_STR(sk_activity_live_state(1, 0, s, e, 2500), "ended");
}

/* ---- time ---- */

SK_TEST(activity_time_rfc3339_parses_utc_fractions_and_offsets)
{
    CHECK_EQ(rfc("2026-11-29T10:00:00Z"), 1795946400000LL);
    CHECK_EQ(rfc("2026-11-29t10:00:00z"), 1795946400000LL);
    CHECK_EQ(rfc("1970-01-01T00:00:00Z"), 0);
    CHECK_EQ(rfc("2030-01-01T00:00:00+08:00"), 1893427200000LL);
    CHECK_EQ(rfc("2026-11-29T10:00:00-05:30"), 1795966200000LL);
    CHECK_EQ(rfc("2026-11-29T10:00:00-00:00"), 1795946400000LL);
    CHECK_EQ(rfc("2026-11-29T10:00:00.5Z"), 1795946400500LL);
    CHECK_EQ(rfc("2026-11-29T10:00:00.123Z"), 1795946400123LL);
    CHECK_EQ(rfc("2026-11-29T10:00:00.123999999Z"), 1795946400123LL); /* truncated to ms */
    CHECK_EQ(rfc("2026-11-29T10:00:00.250+01:00"), 1795942800250LL);
    CHECK_EQ(rfc("1969-12-31T23:59:59.500Z"), -500);
}

SK_TEST(activity_time_rfc3339_knows_the_calendar_edges)
{
    CHECK_EQ(rfc("2024-02-29T23:59:59.999Z"), 1709251199999LL); /* leap year */
    CHECK_EQ(rfc("2000-02-29T00:00:00Z"), 951782400000LL);      /* 400-year rule */
    CHECK(rfc_rejects("2025-02-29T00:00:00Z"));
    CHECK(rfc_rejects("1900-02-29T00:00:00Z")); /* 100-year rule */
    CHECK(rfc_rejects("2026-02-30T10:00:00Z"));
    CHECK(rfc_rejects("2026-04-31T10:00:00Z"));
    CHECK(rfc_rejects("2026-13-01T10:00:00Z"));
    CHECK(rfc_rejects("2026-00-01T10:00:00Z"));
    CHECK(rfc_rejects("2026-01-00T10:00:00Z"));
    CHECK_EQ(rfc("0001-01-01T00:00:00Z"), -62135596800000LL);
    CHECK_EQ(rfc("9999-12-31T23:59:59.999Z"), SK_TIME_MAX_MS);
}

SK_TEST(activity_time_rfc3339_rejects_malformed_text)
{
    static const char *const bad[] = {
        "",
        "2026-11-29",
        "2026-11-29T10:00:00",  /* missing zone */
        "2026-11-29 10:00:00Z", /* space instead of T */
        "2026-11-29T24:00:00Z", /* hour 24 */
        "2026-11-29T10:60:00Z",
        "2026-11-29T10:00:60Z",  /* leap seconds are not accepted */
        "2026-11-29T10:00:00.Z", /* dot without digits */
        "2026-11-29T10:00:00ZZ", /* trailing bytes */
        "2026-11-29T10:00:00Z ",
        "2026-11-29T10:00:00+0800", /* offset without colon */
        "2026-11-29T10:00:00+08",
        "2026-11-29T10:00:00+24:00", /* offset hour out of range */
        "2026-11-29T10:00:00+08:60",
        "2026-1-29T10:00:00Z", /* one-digit month */
        "20261129T100000Z",    /* basic format is not RFC 3339 */
        "2026-11-29T1a:00:00Z",
        "+2026-11-29T10:00:00Z",
        "now",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_MSG(rfc_rejects(bad[i]), "accepted '%s'", bad[i]);
    /* The parser reads len bytes, not up to a terminator: a valid prefix
     * cut short, or a NUL inside, is refused. */
    const char *s = "2026-11-29T10:00:00Z";
    int64_t ms;
    CHECK_EQ(sk_time_parse_rfc3339(s, 19, &ms), SK_EINVAL);
    CHECK_EQ(sk_time_parse_rfc3339("2026-11-29T10:00:00\0Z", 21, &ms), SK_EINVAL);
    CHECK_EQ(sk_time_parse_rfc3339(NULL, 0, &ms), SK_EINVAL);
}

SK_TEST(activity_time_format_round_trips_through_the_parser)
{
    char buf[SK_TIME_RFC3339_MAX];
    CHECK_EQ(sk_time_format_rfc3339(0, buf, sizeof buf), 0);
    CHECK_STR(buf, "1970-01-01T00:00:00Z");
    CHECK_EQ(sk_time_format_rfc3339(1795946400123LL, buf, sizeof buf), 0);
    CHECK_STR(buf, "2026-11-29T10:00:00.123Z");
    CHECK_EQ(sk_time_format_rfc3339(-500, buf, sizeof buf), 0);
    CHECK_STR(buf, "1969-12-31T23:59:59.500Z");
    CHECK_EQ(sk_time_format_rfc3339(SK_TIME_MAX_MS, buf, sizeof buf), 0);
    CHECK_STR(buf, "9999-12-31T23:59:59.999Z");
    CHECK_EQ(sk_time_format_rfc3339(SK_TIME_MAX_MS + 1, buf, sizeof buf), SK_EINVAL);
    CHECK_EQ(sk_time_format_rfc3339(0, buf, 10), SK_EINVAL); /* too small */
    CHECK_STR(buf, "");
    /* Every day boundary of a leap year and some odd instants round-trip. */
    for (int64_t ms = 1704067200000LL; ms < 1735689600000LL; ms += 86400000LL + 1234) {
        CHECK_EQ(sk_time_format_rfc3339(ms, buf, sizeof buf), 0);
        CHECK_EQ(rfc(buf), ms);
    }
}

SK_TEST(activity_time_arg_takes_now_and_relative_offsets)
{
    const int64_t now = 1000000, base = 5000000;
    int64_t ms;
    CHECK_EQ(sk_time_parse_arg("now", 3, now, base, &ms), 0);
    CHECK_EQ(ms, now);
    CHECK_EQ(sk_time_parse_arg("+10s", 4, now, base, &ms), 0);
    CHECK_EQ(ms, base + 10000);
    CHECK_EQ(sk_time_parse_arg("+5m", 3, now, base, &ms), 0);
    CHECK_EQ(ms, base + 300000);
    CHECK_EQ(sk_time_parse_arg("+1h", 3, now, base, &ms), 0);
    CHECK_EQ(ms, base + 3600000);
    CHECK_EQ(sk_time_parse_arg("+2d", 3, now, base, &ms), 0);
    CHECK_EQ(ms, base + 2 * 86400000LL);
    CHECK_EQ(sk_time_parse_arg("2026-11-29T10:00:00Z", 20, now, base, &ms), 0);
    CHECK_EQ(ms, 1795946400000LL);
    static const char *const bad[] = {"+",    "+s",  "+10",   "+10x", "-10s",         "+1.5h",
                                      "now2", "NOW", "+ 10s", "10s",  "+1000000000s", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ms = 42;
        CHECK_MSG(sk_time_parse_arg(bad[i], strlen(bad[i]), now, base, &ms) == SK_EINVAL &&
                      ms == 42,
                  "accepted '%s'", bad[i]);
    }
}

/* ---- store ---- */

/* The store's behaviours (schema, activities, orders) run against SQLite
 * and PostgreSQL in test_store_backends.c. What stays here: the spec. */
SK_TEST(activity_store_rejects_unknown_and_empty_specs)
{
    static const char *const specs[] = {"mongodb://u:secret@h/db", "mysql://u:secret@h",
                                        "sqlite:", "", "seckill.db"};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        sk_store *st = (sk_store *)1;
        char err[256] = "";
        CHECK_MSG(sk_store_open(&st, specs[i], err, sizeof err) == SK_EINVAL, "spec %s", specs[i]);
        CHECK(st == NULL);
        CHECK(err[0] != 0);
        CHECK_MSG(!strstr(err, "secret"), "the password echoed: %s", err);
    }
    sk_store *st;
    char err[256];
    /* A directory that does not exist is a runtime failure, not a usage one. */
    CHECK_EQ(sk_store_open(&st, "sqlite:/nonexistent-dir-sk/a.db", err, sizeof err), SK_EDB);
}

/* ---- CLI end to end ---- */

SK_TEST(activity_cli_full_lifecycle_create_preheat_open_show_close)
{
    struct env e = env_fresh();
    char out[8192];

    CHECK_EQ(CLI(&e, out, "create", "--id", e.id, "--name", "Phone sale", "--stock", "50",
                 "--limit", "2", "--max-per-order", "1", "--start", "now", "--end", "+1h",
                 "--pay-timeout", "600", "--json"),
             0);
    json_t *o = json_loads(out, 0, NULL);
    CHECK_MSG(o != NULL, "create --json: %s", out);
    CHECK_EQ(jint(o, "id"), (long long)e.aid);
    CHECK_EQ(jint(o, "stock_initial"), 50);
    CHECK_EQ(jint(o, "max_per_order"), 1);
    CHECK_EQ(jint(o, "pay_timeout_s"), 600);
    CHECK_EQ(jint(o, "end_ms") - jint(o, "start_ms"), 3600 * 1000);
    CHECK_STR(jstr(o, "stored_state"), "created");
    json_decref(o);
    CHECK_EQ(redis_keys_of(e.aid), 0); /* create touches the store only */

    run_ok(&e, "preheat", e.id);
    state_is(&e, e.aid, "preheated");
    CHECK_EQ(live_of(e.aid).remaining, 50);
    CHECK_EQ(live_of(e.aid).open, 0);

    run_ok(&e, "open", e.id);
    state_is(&e, e.aid, "open");

    o = show_json(&e, e.id);
    CHECK_STR(jstr(o, "state"), "open");
    CHECK_STR(jstr(o, "name"), "Phone sale");
    CHECK_EQ(jint(o, "stock_initial"), 50);
    json_decref(o);
    show_counts(&e, 50, 0, 0, 0, 0);

    /* Two buyers, then show reflects them. */
    sk_redis *r = redis_of(e.redis);
    struct sk_admission adm;
    buy_ok(r, e.aid, 1, 1);
    buy_ok(r, e.aid, 2, 1);
    show_counts(&e, 48, 2, 2, 2, 2);

    /* The text form says the same. */
    CHECK_EQ(CLI(&e, out, "show", "--id", e.id), 0);
    CHECK_MSG(strstr(out, "stock_remaining  48\n") && strstr(out, "state            open\n"),
              "show text: %s", out);

    run_ok(&e, "close", e.id);
    state_is(&e, e.aid, "closed");
    o = show_json(&e, e.id);
    CHECK_STR(jstr(o, "state"), "closed");
    json_decref(o);
    CHECK_EQ(sk_th_buy(r, e.aid, 3, 1, &adm, NULL), 0);
    CHECK_EQ(adm.rc, SK_RC_CLOSED);
    sk_redis_free(r);
}

SK_TEST(activity_cli_second_preheat_is_a_noop_that_keeps_live_stock)
{
    struct env e = env_fresh();
    sale_bought(&e, 2, "close");

    CLI_SAYS(&e, 0, "live stock exists", "preheat", "--id", e.id);
    struct sk_stock_state st = live_of(e.aid);
    CHECK_EQ(st.remaining, 8); /* not reset to 10 */
    CHECK_EQ(st.held, 2);
    state_is(&e, e.aid, "closed"); /* a no-op changes nothing */
}

SK_TEST(activity_cli_forced_preheat_is_refused_while_open)
{
    struct env e = env_fresh();
    sale_bought(&e, 1, NULL);

    CLI_SAYS(&e, 2, "is open", "preheat", "--id", e.id, "--force");
    struct sk_stock_state st = live_of(e.aid);
    CHECK_EQ(st.remaining, 9);
    CHECK_EQ(st.open, 1);
    state_is(&e, e.aid, "open");
}

SK_TEST(activity_cli_forced_preheat_while_closed_rewrites_stock_keeping_holdings)
{
    struct env e = env_fresh();
    sale_bought(&e, 2, "close");
    sk_redis *r = redis_of(e.redis);
    /* Someone tampered with the stock; a forced preheat restores
     * initial - held from the stored definition. */
    struct sk_keys k;
    sk_keys_for(&k, e.aid);
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(r, &rep, "SET %s 1", k.stock), 0);
    freeReplyObject(rep);
    CLI_SAYS(&e, 0, "preheated", "preheat", "--id", e.id, "--force");
    CHECK_EQ(live_of(e.aid).remaining, 8);
    state_is(&e, e.aid, "preheated");
    sk_redis_free(r);
}

SK_TEST(activity_cli_open_before_preheat_says_not_preheated_and_changes_nothing)
{
    struct env e = env_fresh();
    create_ok(&e, e.id, "10");
    CLI_SAYS(&e, 2, "not preheated", "open", "--id", e.id);
    CLI_SAYS(&e, 2, "not preheated", "close", "--id", e.id);
    state_is(&e, e.aid, "created");
    CHECK_EQ(redis_keys_of(e.aid), 0); /* the switch did not half-create meta */
}

SK_TEST(activity_cli_delete_is_refused_while_open)
{
    struct env e = env_fresh();
    char out[4096];
    sale_open(&e, e.id);
    CLI_SAYS(&e, 2, "is open", "delete", "--id", e.id);
    CHECK_EQ(CLI(&e, out, "delete", "--id", e.id, "--force"), 2); /* --force does not bypass it */
    state_is(&e, e.aid, "open");
    CHECK_EQ(live_of(e.aid).open, 1);
    CHECK_EQ(live_of(e.aid).remaining, 10);
}

SK_TEST(activity_cli_delete_keeps_unpersisted_orders_unless_forced)
{
    struct env e = env_fresh();
    char out[4096];
    sale_bought(&e, 1, "close");

    CLI_SAYS(&e, 1, "1 order event(s) in Redis not yet persisted", "delete", "--id", e.id);
    struct sk_activity a;
    CHECK_EQ(stored(&e, e.aid, &a), 0);
    CHECK_EQ(live_of(e.aid).stream_len, 1);

    CHECK_EQ(CLI(&e, out, "delete", "--id", e.id, "--force"), 0);
    CHECK_MSG(strstr(out, "1 order event(s) not yet persisted were dropped"), "%s", out);
    CHECK_EQ(stored(&e, e.aid, &a), SK_ENOTFOUND);
    CHECK_EQ(redis_keys_of(e.aid), 0);
}

/* Persisted and unpaid: refused (exit 1) unless forced; forced, the unpaid
 * orders are cancelled (they can no longer be paid), the paid ones stay,
 * and an audit row says what happened. */
SK_TEST(activity_cli_delete_refuses_unpaid_orders_and_a_forced_delete_cancels_them)
{
    struct env e = env_fresh();
    char out[4096];
    sale_open(&e, e.id);
    sk_redis *r = redis_of(e.redis);
    buy_ok(r, e.aid, 7, 1);
    buy_ok(r, e.aid, 8, 1);
    sk_redis_free(r);
    run_ok(&e, "close", e.id);
    CHECK_EQ(sk_th_run_with_db(out, sizeof out, "worker", (const char *const[]){"--once", NULL},
                               e.redis, e.spec),
             0);
    sk_store *st = store_of(&e);
    struct sk_order page[4];
    size_t n;
    CHECK_EQ(sk_store_orders_list(st, e.aid, NULL, 4, page, &n), 0);
    CHECK_EQ(n, 2);
    CHECK_EQ(sk_store_order_pay(st, page[0].order_id, sk_wall_ms(), NULL), 0);
    CLI_SAYS(&e, 1, "1 unpaid order(s)", "delete", "--id", e.id);
    struct sk_activity a;
    CHECK_EQ(stored(&e, e.aid, &a), 0);
    CHECK(redis_keys_of(e.aid) > 0);
    CHECK_EQ(CLI(&e, out, "delete", "--id", e.id, "--force"), 0);
    CHECK_MSG(strstr(out, "1 unpaid order(s) cancelled"), "%s", out);
    CHECK_EQ(stored(&e, e.aid, &a), SK_ENOTFOUND);
    struct sk_order o;
    CHECK_EQ(sk_store_order_get(st, page[0].order_id, &o), 0);
    CHECK_EQ(o.status, SK_ORDER_PAID);
    CHECK_EQ(sk_store_order_get(st, page[1].order_id, &o), 0);
    CHECK_EQ(o.status, SK_ORDER_CANCELLED);
    CHECK(o.released_ms > 0); /* no release owed: its units went with the keys */
    CHECK_EQ(sk_store_order_pay(st, page[1].order_id, sk_wall_ms(), NULL), SK_ESTATE);
    struct sk_audit *rows;
    size_t nrows;
    CHECK_EQ(sk_store_audit_list(st, e.aid, &rows, &nrows), 0);
    int deleted = 0;
    for (size_t i = 0; i < nrows; i++)
        deleted += !strcmp(rows[i].kind, "activity_deleted");
    free(rows);
    CHECK_EQ(deleted, 1);
    /* its orders stay, so its id is not given to a new sale */
    CLI_SAYS(&e, 2, "was deleted but its 2 orders are still in the database", "create", "--id",
             e.id, "--name", "again", "--stock", "5", "--limit", "1", "--start", "now", "--end",
             "+1h");
    CHECK_EQ(stored(&e, e.aid, &a), SK_ENOTFOUND);
    sk_store_close(st);
}

SK_TEST(activity_cli_delete_removes_the_row_and_every_redis_key_so_the_id_is_reusable)
{
    struct env e = env_fresh();
    char out[4096];
    create_ok(&e, e.id, "10");
    run_ok(&e, "preheat", e.id);
    CHECK(redis_keys_of(e.aid) > 0);
    CHECK_EQ(CLI(&e, out, "delete", "--id", e.id), 0);
    struct sk_activity a;
    CHECK_EQ(stored(&e, e.aid, &a), SK_ENOTFOUND);
    CHECK_EQ(redis_keys_of(e.aid), 0);
    /* Re-created with another stock, the preheat writes the new stock. */
    create_ok(&e, e.id, "3");
    run_ok(&e, "preheat", e.id);
    CHECK_EQ(live_of(e.aid).remaining, 3);
    CHECK_EQ(live_of(e.aid).initial, 3);
}

SK_TEST(activity_create_rejects_end_before_start_without_writing)
{
    struct env e = env_fresh();
    char out[4096];
    CREATE_X_REFUSED(&e, "end must be after start", "--start", "2030-01-01T10:00:00Z", "--end",
                     "2030-01-01T09:00:00Z");
    CHECK_EQ(CREATE_X(&e, out, "--start", "2030-01-01T10:00:00Z", "--end", "2030-01-01T10:00:00Z"),
             2);
    check_nothing_written(&e, e.aid);
}

SK_TEST(activity_create_rejects_zero_or_negative_stock_without_writing)
{
    struct env e = env_fresh();
    static const char *const stocks[] = {"0", "-5", "1000000000001"};
    for (size_t i = 0; i < 3; i++)
        create_refused(&e, e.id, stocks[i], "stock must be between 1 and");
    check_nothing_written(&e, e.aid);
}

SK_TEST(activity_create_rejects_limit_zero_and_bad_max_per_order_without_writing)
{
    struct env e = env_fresh();
    CLI_SAYS(&e, 2, "per-user limit", "create", "--id", e.id, "--name", "x", "--stock", "5",
             "--limit", "0");
    CREATE_X_REFUSED(&e, "max per order", "--max-per-order", "0");
    CREATE_X_REFUSED(&e, "pay timeout", "--pay-timeout", "0");
    check_nothing_written(&e, e.aid);
}

SK_TEST(activity_create_rejects_non_numeric_values_and_bad_times_without_writing)
{
    struct env e = env_fresh();
    char out[4096];
    static const char *const bad[][2] = {
        {"--stock", "ten"},
        {"--stock", "5x"},
        {"--stock", "1e3"},
        {"--stock", ""},
        {"--limit", "one"},
        {"--limit", "1.5"},
        {"--stock", "99999999999999999999"},
        {"--start", "tomorrow"},
        {"--start", "2026-02-30T10:00:00Z"},
        {"--end", "2030-01-01T24:00:00Z"},
        {"--end", "2030-01-01T10:00:00"},
        {"--pay-timeout", "soon"},
        {"--max-per-order", "-"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        /* A valid create with one flag replaced (or added) by the bad value. */
        const char *args[16] = {"create",  "--id", e.id,      "--name", "x",
                                "--stock", "5",    "--limit", "1"};
        int n = 9;
        if (!strcmp(bad[i][0], "--stock"))
            args[6] = bad[i][1];
        else if (!strcmp(bad[i][0], "--limit"))
            args[8] = bad[i][1];
        else
            args[n++] = bad[i][0], args[n++] = bad[i][1];
        args[n] = NULL;
        int rc = cli_run(&e, e.redis, out, sizeof out, args);
        CHECK_MSG(rc == 2, "%s %s: exit %d: %s", bad[i][0], bad[i][1], rc, out);
        CHECK_MSG(strstr(out, bad[i][0]) != NULL, "message does not name %s: %s", bad[i][0], out);
    }
    /* Ids that are not ids. */
    static const char *const ids[] = {"abc", "0", "-1", "1000000000000000", "1.0"};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        create_refused(&e, ids[i], "5", "--id");
    check_nothing_written(&e, e.aid);
}

SK_TEST(activity_cli_rejects_unknown_flags_missing_values_and_missing_required_flags)
{
    struct env e = env_fresh();
    char out[4096];
    CREATE_X_REFUSED(&e, "unknown flag --colour; see seckill activity create --help", "--colour",
                     "red");
    CREATE_X_REFUSED(&e, "unknown flag --stokc; did you mean --stock?", "--stokc", "5");
    CLI_SAYS(&e, 2, "missing --limit", "create", "--id", e.id, "--name", "x", "--stock", "5");
    CLI_SAYS(&e, 2, "--stock needs a value", "create", "--id", e.id, "--name", "x", "--stock",
             "--limit", "1");
    CREATE_X_REFUSED(&e, "given twice", "--stock", "6");
    CHECK_EQ(CREATE_X(&e, out, "extra"), 2);
    CHECK_EQ(CREATE_X(&e, out, "--force"), 2); /* a flag of another sub-command */
    CHECK_EQ(CLI(&e, out, "preheat", "--id", e.id, "--force=yes"), 2);
    CLI_SAYS(&e, 2, "missing --id", "preheat");
    CHECK_EQ(CLI(&e, out, "launch", "--id", e.id), 2);
    check_nothing_written(&e, e.aid);
    /* --flag=value works like --flag value. */
    CHECK_EQ(CLI(&e, out, "create", "--id", e.id, "--name=eq form", "--stock=5", "--limit=1"), 0);
    struct sk_activity a;
    CHECK_EQ(stored(&e, e.aid, &a), 0);
    CHECK_STR(a.name, "eq form");
}

SK_TEST(activity_cli_duplicate_create_is_exit_2_and_keeps_the_original)
{
    struct env e = env_fresh();
    char out[4096];
    create_ok(&e, e.id, "10");
    CHECK_EQ(
        CLI(&e, out, "create", "--id", e.id, "--name", "other", "--stock", "99", "--limit", "1"),
        2);
    CHECK_MSG(strstr(out, "already exists") != NULL, "output: %s", out);
    struct sk_activity a;
    CHECK_EQ(stored(&e, e.aid, &a), 0);
    CHECK_EQ(a.stock, 10);
    CHECK_STR(a.name, "test sale");
    CHECK_EQ(stored_count(&e), 1);
}

SK_TEST(activity_cli_unknown_id_is_exit_2_for_every_subcommand)
{
    struct env e = env_fresh();
    char out[4096];
    static const char *const subs[] = {"preheat", "open", "close", "show", "delete"};
    sk_store_close(store_of(&e)); /* the database is there; the activity is not */
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
        CHECK_MSG(CLI(&e, out, subs[i], "--id", e.id) == 2, "%s: %s", subs[i], out);
        CHECK_MSG(strstr(out, "not found") != NULL, "%s: %s", subs[i], out);
    }
    check_nothing_written(&e, e.aid);
}

SK_TEST(activity_cli_redis_unreachable_is_exit_1_quickly_and_changes_nothing)
{
    struct env e = env_fresh();
    char out[4096], dead[64];
    create_ok(&e, e.id, "10");
    snprintf(dead, sizeof dead, "redis://127.0.0.1:%d", sk_th_free_port());
    static const char *const subs[] = {"preheat", "open", "close", "show", "delete"};
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
        int64_t t0 = sk_mono_ms();
        int rc =
            cli_run(&e, dead, out, sizeof out, (const char *const[]){subs[i], "--id", e.id, NULL});
        int64_t took = sk_mono_ms() - t0;
        CHECK_MSG(rc == 1, "%s: exit %d: %s", subs[i], rc, out);
        CHECK_MSG(strstr(out, "redis") != NULL, "%s: %s", subs[i], out);
        CHECK_MSG(took < 3000, "%s took %lld ms", subs[i], (long long)took);
    }
    CHECK_EQ(cli_run(&e, dead, out, sizeof out, (const char *const[]){"list", NULL}), 1);
    state_is(&e, e.aid, "created");
}

SK_TEST(activity_cli_unsupported_db_specs_are_exit_2)
{
    char out[4096], id[24];
    id_str(id, sizeof id, sk_th_unique_id());
    const char *args[] = {"activity",        "show", "--id",           id,  "--redis",
                          sk_th_redis_url(), "--db", "mongodb://h/db", NULL};
    CHECK_EQ(sk_th_run_seckill(out, sizeof out, NULL, args), 2);
    CHECK_MSG(strstr(out, "db: must be sqlite:PATH") != NULL, "output: %s", out);
}

SK_TEST(activity_cli_help_prints_usage_and_exits_0_for_every_subcommand)
{
    static const char *const subs[] = {"create", "preheat", "open",  "close",
                                       "show",   "list",    "delete"};
    char out[8192];
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
        const char *args[] = {"activity", subs[i], "--help", NULL};
        CHECK_MSG(sk_th_run_seckill(out, sizeof out, NULL, args) == 0, "%s --help", subs[i]);
        char want[64];
        snprintf(want, sizeof want, "usage: seckill activity %s", subs[i]);
        CHECK_MSG(strstr(out, want) != NULL, "%s --help: %s", subs[i], out);
    }
    const char *top[] = {"activity", "--help", NULL};
    CHECK_EQ(sk_th_run_seckill(out, sizeof out, NULL, top), 0);
    CHECK(strstr(out, "delete") != NULL);
    const char *none[] = {"activity", NULL};
    CHECK_EQ(sk_th_run_seckill(out, sizeof out, NULL, none), 2);
}

SK_TEST(activity_cli_times_take_rfc3339_offsets_and_relative_end_from_start)
{
    struct env e = env_fresh();
    char out[4096];
    CHECK_EQ(CREATE_X(&e, out, "--start", "2030-01-01T08:00:00+08:00", "--end", "+90m"), 0);
    struct sk_activity a;
    CHECK_EQ(stored(&e, e.aid, &a), 0);
    CHECK_EQ(a.start_ms, 1893456000000LL); /* 2030-01-01T00:00:00Z */
    CHECK_EQ(a.end_ms, a.start_ms + 90 * 60 * 1000);
    CHECK_EQ(a.max_per_order, 1);
    CHECK_EQ(a.pay_timeout_s, 1800);
    CHECK_MSG(strstr(out, "2030-01-01T00:00:00Z") != NULL, "create output: %s", out);
    /* Defaults: start now, end one hour later. */
    int64_t before = sk_wall_ms();
    CHECK_EQ(CLI(&e, out, "create", "--id", e.id2, "--name", "x", "--stock", "5", "--limit", "1"),
             0);
    int64_t after = sk_wall_ms();
    CHECK_EQ(stored(&e, e.aid2, &a), 0);
    CHECK(a.start_ms >= before && a.start_ms <= after);
    CHECK_EQ(a.end_ms - a.start_ms, 3600 * 1000);
}

SK_TEST(activity_cli_show_says_scheduled_before_start_and_ended_after_end)
{
    struct env e = env_fresh();
    char out[4096];
    CHECK_EQ(CLI(&e, out, "create", "--id", e.id, "--name", "later", "--stock", "5", "--limit", "1",
                 "--start", "+1h", "--end", "+1h"),
             0);
    CHECK_EQ(CLI(&e, out, "create", "--id", e.id2, "--name", "gone", "--stock", "5", "--limit", "1",
                 "--start", "2020-01-01T00:00:00Z", "--end", "2020-01-02T00:00:00Z"),
             0);
    json_t *o = show_json(&e, e.id);
    CHECK_STR(jstr(o, "state"), "closed"); /* not preheated */
    CHECK(json_is_null(json_object_get(o, "stock_remaining")));
    CHECK(json_object_get(o, "preheated") == json_false());
    json_decref(o);
    const char *ids[] = {e.id, e.id2};
    for (int i = 0; i < 2; i++) {
        run_ok(&e, "preheat", ids[i]);
        run_ok(&e, "open", ids[i]);
    }
    o = show_json(&e, e.id);
    CHECK_STR(jstr(o, "state"), "scheduled");
    json_decref(o);
    o = show_json(&e, e.id2);
    CHECK_STR(jstr(o, "state"), "ended");
    json_decref(o);
    /* And the purchase script agrees. */
    sk_redis *r = redis_of(e.redis);
    struct sk_admission adm;
    CHECK_EQ(sk_th_buy(r, e.aid, 1, 1, &adm, NULL), 0);
    CHECK_EQ(adm.rc, SK_RC_NOT_STARTED);
    CHECK_EQ(sk_th_buy(r, e.aid2, 1, 1, &adm, NULL), 0);
    CHECK_EQ(adm.rc, SK_RC_ENDED);
    sk_redis_free(r);
}

SK_TEST(activity_cli_list_shows_every_activity_with_live_state)
{
    struct env e = env_fresh();
    char out[16384];
    /* no database yet: list never makes one */
    CHECK_EQ(CLI(&e, out, "list"), 1);
    CHECK_MSG(strstr(out, "no such database file: ") != NULL, "%s", out);
    CHECK(access(e.path, F_OK) < 0);
    create_ok(&e, e.id, "10");
    create_ok(&e, e.id2, "20");
    run_ok(&e, "preheat", e.id2);
    run_ok(&e, "open", e.id2);

    CHECK_EQ(CLI(&e, out, "list", "--json"), 0);
    json_t *arr = json_loads(out, 0, NULL);
    CHECK_MSG(json_is_array(arr), "list --json: %s", out);
    CHECK_EQ(json_array_size(arr), 2);
    json_t *x = json_array_get(arr, 0), *y = json_array_get(arr, 1);
    CHECK_EQ(jint(x, "id"), (long long)e.aid);
    CHECK(json_is_null(json_object_get(x, "stock_remaining")));
    CHECK_STR(jstr(x, "stored_state"), "created");
    CHECK_EQ(jint(y, "id"), (long long)e.aid2);
    CHECK_EQ(jint(y, "stock_remaining"), 20);
    CHECK_STR(jstr(y, "state"), "open");
    json_decref(arr);

    CHECK_EQ(CLI(&e, out, "list"), 0);
    int lines = 0;
    for (const char *p = out; *p; p++)
        lines += *p == '\n';
    CHECK_EQ(lines, 3); /* header + one line each */
    CHECK(strstr(out, e.id) != NULL && strstr(out, e.id2) != NULL);
}

SK_TEST(activity_cli_delete_counts_stream_events_even_without_meta)
{
    struct env e = env_fresh();
    char out[4096];
    create_ok(&e, e.id, "10");
    /* An order event left behind with no meta or stock beside it. */
    sk_redis *r = redis_of(e.redis);
    struct sk_keys k;
    sk_keys_for(&k, e.aid);
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(r, &rep, "XADD %s * aid %s uid 1 qty 1", k.orders, e.id), 0);
    CHECK_EQ(rep->type, REDIS_REPLY_STRING);
    freeReplyObject(rep);
    sk_redis_free(r);
    CLI_SAYS(&e, 1, "1 order event(s)", "delete", "--id", e.id);
    struct sk_activity a;
    CHECK_EQ(stored(&e, e.aid, &a), 0);
    CHECK_EQ(redis_keys_of(e.aid), 1);
    CHECK_EQ(CLI(&e, out, "delete", "--id", e.id, "--force"), 0);
    CHECK_EQ(stored(&e, e.aid, &a), SK_ENOTFOUND);
    CHECK_EQ(redis_keys_of(e.aid), 0);
}

SK_TEST(activity_cli_preheat_finding_live_stock_marks_a_created_activity_preheated)
{
    /* A preheat whose database update was lost: Redis has the stock, the
     * store still says created. The next preheat leaves Redis alone and
     * repairs the stored state. */
    struct env e = env_fresh();
    create_ok(&e, e.id, "10");
    struct sk_activity a;
    CHECK_EQ(stored(&e, e.aid, &a), 0);
    struct sk_stock_def d;
    sk_activity_stock_def(&a, &d);
    sk_redis *r = redis_of(e.redis);
    int res;
    int64_t stock;
    CHECK_EQ(sk_stock_preheat(r, &d, 0, &res, &stock), 0);
    CHECK_EQ(res, SK_RC_PREHEATED);
    struct sk_keys k;
    sk_keys_for(&k, e.aid);
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(r, &rep, "DECRBY %s 4", k.stock), 0);
    freeReplyObject(rep);
    sk_redis_free(r);

    CLI_SAYS(&e, 0, "live stock exists (6 left)", "preheat", "--id", e.id);
    CHECK_EQ(live_of(e.aid).remaining, 6);
    CHECK_EQ(stored(&e, e.aid, &a), 0);
    CHECK_STR(a.state, "preheated");
}

SK_TEST(activity_cli_create_takes_a_per_user_rate_limit_and_preheat_carries_it_to_redis)
{
    struct env e = env_fresh();
    char out[4096];
    CHECK_EQ(CLI(&e, out, "create", "--id", e.id, "--name", "rl", "--stock", "5", "--limit", "1",
                 "--rate-burst", "2"),
             2); /* a burst alone means nothing */
    struct sk_activity a;
    CHECK_EQ(stored(&e, e.aid, &a), SK_ENOTFOUND);
    CHECK_EQ(CLI(&e, out, "create", "--id", e.id, "--name", "rl", "--stock", "5", "--limit", "1",
                 "--rate-per-user-per-s", "5", "--rate-burst", "2"),
             0);
    CHECK_EQ(stored(&e, e.aid, &a), 0);
    CHECK_EQ(a.rl_per_user_per_s, 5);
    CHECK_EQ(a.rl_burst, 2);
    preheat_carries(&e, (const char *const[]){"rl_rate", "rl_burst", NULL},
                    (const char *const[]){"5", "2"});
}

SK_TEST(activity_cli_create_takes_segments_and_show_and_list_print_them)
{
    struct env e = env_fresh();
    char out[16384];
    CHECK_EQ(CLI(&e, out, "create", "--id", e.id, "--name", "seg", "--stock", "40", "--limit", "1",
                 "--segments", "4", "--json"),
             0);
    json_t *o = json_loads(out, 0, NULL);
    CHECK_MSG(o != NULL, "create --json: %s", out);
    CHECK_EQ(jint(o, "segments"), 4);
    json_decref(o);
    struct sk_activity a;
    CHECK_EQ(stored(&e, e.aid, &a), 0);
    CHECK_EQ(a.segments, 4);
    CHECK_EQ(redis_keys_of(e.aid), 0); /* create touches the store only */
    /* Without the flag: 1; `--segments=N` works like the other flags. */
    create_ok(&e, e.id2, "10");
    CHECK_EQ(stored(&e, e.aid2, &a), 0);
    CHECK_EQ(a.segments, 1);

    o = show_json(&e, e.id);
    CHECK_EQ(jint(o, "segments"), 4);
    json_decref(o);
    CHECK_EQ(CLI(&e, out, "show", "--id", e.id), 0);
    CHECK_MSG(strstr(out, "segments         4\n") != NULL, "show text: %s", out);

    CHECK_EQ(CLI(&e, out, "list", "--json"), 0);
    json_t *arr = json_loads(out, 0, NULL);
    CHECK_MSG(json_is_array(arr) && json_array_size(arr) == 2, "list --json: %s", out);
    size_t i;
    json_t *x;
    json_array_foreach(arr, i, x)
    {
        CHECK_EQ(jint(x, "segments"), (uint64_t)jint(x, "id") == e.aid ? 4 : 1);
    }
    json_decref(arr);
    CHECK_EQ(CLI(&e, out, "list"), 0);
    CHECK_MSG(strstr(out, " SEGS ") != NULL, "list header: %s", out);
    /* The activity's line: ... INITIAL SEGS START ... */
    const char *line = strstr(out, e.id);
    CHECK_MSG(line && strstr(line, "   40    4 ") != NULL, "list text: %s", out);

    char id3[24];
    uint64_t aid3 = id_fresh(id3);
    CHECK_EQ(CLI(&e, out, "create", "--id", id3, "--name", "seg", "--stock", "256", "--limit", "1",
                 "--segments=256"),
             0);
    CHECK_EQ(stored(&e, aid3, &a), 0);
    CHECK_EQ(a.segments, 256);
}

SK_TEST(activity_cli_create_refuses_bad_segments_with_exit_2_and_writes_nothing)
{
    struct env e = env_fresh();
    char out[4096];
    static const struct {
        const char *stock, *segments, *want;
    } bad[] = {
        {"100", "0", "segments must be between 1 and 256 (got 0)"},
        {"100", "-3", "segments must be between 1 and 256 (got -3)"},
        {"1000", "257", "segments must be between 1 and 256 (got 257)"},
        {"100", "99999999999999999999", "--segments is out of range"},
        {"100", "four", "--segments must be a whole number, got 'four'"},
        {"100", "2.5", "--segments must be a whole number"},
        {"100", "", "--segments must be a whole number"},
        {"3", "4", "segments (4) must not exceed the stock (3)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char flag[64];
        snprintf(flag, sizeof flag, "--segments=%s", bad[i].segments);
        int rc = CLI(&e, out, "create", "--id", e.id, "--name", "x", "--stock", bad[i].stock,
                     "--limit", "1", flag);
        CHECK_MSG(rc == 2, "%s: exit %d: %s", flag, rc, out);
        CHECK_MSG(strstr(out, bad[i].want) != NULL, "%s: output lacks '%s': %s", flag, bad[i].want,
                  out);
        CHECK_MSG(strncmp(out, "seckill: ", 9) == 0 && strchr(out, '\n') == out + strlen(out) - 1,
                  "%s: not one 'seckill:' line: %s", flag, out);
    }
    CHECK_EQ(CREATE_X(&e, out, "--segments"), 2); /* no value */
    CHECK_MSG(strstr(out, "--segments needs a value") != NULL, "output: %s", out);
    check_nothing_written(&e, e.aid);
}

SK_TEST(activity_cli_create_takes_a_waiting_room_and_preheat_carries_it_to_redis)
{
    struct env e = env_fresh();
    static const struct {
        const char *a, *b, *want;
    } bad[] = {
        {"--pass-ttl=60", NULL, "--pass-ttl and --queue-seed need --passes-per-s"},
        {"--queue-seed=00112233445566778899aabbccddeeff", NULL, "need --passes-per-s"},
        {"--passes-per-s=0", NULL, "--passes-per-s must be between 1 and 1000000"},
        {"--passes-per-s=1000001", NULL, "--passes-per-s must be between 1 and 1000000"},
        {"--passes-per-s=5", "--pass-ttl=0", "pass TTL must be between 1 and 86400"},
        {"--passes-per-s=5", "--pass-ttl=86401", "pass TTL must be between 1 and 86400"},
        {"--passes-per-s=5", "--queue-seed=0011", "--queue-seed must be 16 to 64 lowercase hex"},
        {"--passes-per-s=5", "--queue-seed=00112233445566778899AABBCCDDEEFF", "lowercase hex"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CREATE_X_REFUSED(&e, bad[i].want, bad[i].a, bad[i].b); /* b NULL: a alone */
    check_nothing_written(&e, e.aid);
    char out[4096];
    CHECK_EQ(CLI(&e, out, "create", "--id", e.id, "--name", "wr", "--stock", "5", "--limit", "1",
                 "--passes-per-s", "20", "--pass-ttl", "90", "--queue-seed",
                 "00112233445566778899aabbccddeeff", "--json"),
             0);
    json_t *o = json_loads(out, 0, NULL);
    CHECK_MSG(o != NULL, "create --json: %s", out);
    CHECK_EQ(jint(o, "passes_per_s"), 20);
    CHECK_EQ(jint(o, "pass_ttl_s"), 90);
    CHECK_STR(jstr(o, "queue_seed"), "00112233445566778899aabbccddeeff");
    json_decref(o);
    /* without a seed one is drawn, without a TTL it is 300 s */
    CHECK_EQ(CLI(&e, out, "create", "--id", e.id2, "--name", "wr", "--stock", "5", "--limit", "1",
                 "--passes-per-s", "3"),
             0);
    struct sk_activity a, a2;
    CHECK_EQ(stored(&e, e.aid, &a), 0);
    CHECK_EQ(stored(&e, e.aid2, &a2), 0);
    CHECK_EQ(a.wr_passes_per_s, 20);
    CHECK_EQ(a.wr_pass_ttl_s, 90);
    CHECK_STR(a.wr_seed, "00112233445566778899aabbccddeeff");
    CHECK_EQ(a2.wr_pass_ttl_s, 300);
    CHECK_EQ(strlen(a2.wr_seed), 32);
    CHECK(strcmp(a2.wr_seed, a.wr_seed) != 0);
    preheat_carries(&e, (const char *const[]){"wr_rate", "wr_ttl", "wr_seed", NULL},
                    (const char *const[]){"20", "90", "00112233445566778899aabbccddeeff"});
}

/* `activity list` fits its columns to the largest id (15 digits) and stock
 * (13 digits): every column of every line starts where its header does. */
SK_TEST(activity_cli_list_columns_hold_the_largest_numbers)
{
    struct env e = env_fresh();
    char out[16384];
    /* the largest id there is; a unique one is not needed: the database
     * is this test's own */
    CHECK_EQ(CLI(&e, out, "create", "--id", "999999999999999", "--name", "big", "--stock",
                 "1000000000000", "--limit", "1000000000000"),
             0);
    CHECK_EQ(CLI(&e, out, "create", "--id", e.id, "--name", "small", "--stock", "5", "--limit", "1",
                 "--segments", "3"),
             0);
    CHECK_EQ(CLI(&e, out, "preheat", "--id", "999999999999999"), 0);
    CHECK_EQ(CLI(&e, out, "list"), 0);
    char *lines[4];
    int n = 0;
    for (char *p = strtok(out, "\n"); p && n < 4; p = strtok(NULL, "\n"))
        lines[n++] = p;
    CHECK_EQ(n, 3);
    /* right-aligned numbers end under their header's end; left-aligned
     * words start under their header's start */
    static const char *const right[] = {"REMAINING", "INITIAL", "SEGS"};
    for (size_t i = 0; i < sizeof right / sizeof right[0]; i++) {
        size_t end = (size_t)(strstr(lines[0], right[i]) - lines[0]) + strlen(right[i]);
        for (int l = 1; l < n; l++)
            CHECK_MSG(strlen(lines[l]) > end && lines[l][end] == ' ' && lines[l][end - 1] != ' ',
                      "%s does not end at column %zu:\n%s\n%s", right[i], end, lines[0], lines[l]);
    }
    static const char *const left[] = {"STATE", "STORED", "START", "END", "NAME"};
    for (size_t i = 0; i < sizeof left / sizeof left[0]; i++) {
        size_t at = (size_t)(strstr(lines[0], left[i]) - lines[0]);
        for (int l = 1; l < n; l++)
            CHECK_MSG(lines[l][at - 1] == ' ' && lines[l][at] != ' ',
                      "%s does not start at column %zu:\n%s\n%s", left[i], at, lines[0], lines[l]);
    }
    CHECK(strstr(lines[1], "999999999999999 ") || strstr(lines[2], "999999999999999 "));
    CHECK(strstr(lines[1], " 1000000000000 1000000000000 ") ||
          strstr(lines[2], " 1000000000000 1000000000000 "));
}
