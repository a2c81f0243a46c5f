/* cli_activity.c - `seckill activity create|preheat|open|close|show|list|
 * delete|recover|page`, the operator's view of an activity's lifecycle
 * (and its buyer's page, exported for a CDN).
 *
 * The store (SQLite) holds the definition; Redis holds the live stock and
 * the sale switch. Every argument is checked before anything is opened, so
 * a usage error (exit 2) never changes state; an unreachable server is
 * exit 1 within the connection timeout. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "cmd/commands.h"
#include "cmd/db_file.h"
#include "cmd/settings.h"
#include "core/cli.h"
#include "core/clock.h"
#include "core/codes.h"
#include "core/error.h"
#include "core/rand.h"
#include "engine/activity.h"
#include "engine/activity_json.h"
#include "engine/draw.h"
#include "engine/keys.h"
#include "engine/registration.h"
#include "engine/stock.h"
#include "http/captcha.h"
#include "http/sale_page.h"
#include "orders/activity_delete.h"
#include "orders/draw_sync.h"
#include "orders/recover.h"
#include "redis/redis_conn.h"
#include "redis/reply.h"
#include "store/store.h"

/* A CLI must answer quickly when Redis is gone: bounded connect/commands. */
#define REDIS_TIMEOUT_MS 1000

enum {
    O_ID,
    O_NAME,
    O_STOCK,
    O_LIMIT,
    O_MAX_PER_ORDER,
    O_START,
    O_END,
    O_PAY_TIMEOUT,
    O_RATE,
    O_BURST,
    O_SEGMENTS,
    O_PASSES,
    O_PASS_TTL,
    O_QUEUE_SEED,
    O_POW_BITS,
    O_POW_BITS_MAX,
    O_POW_STEP,
    O_CAPTCHA,
    O_FORCE,
    O_REDIS_ONLY,
    O_JSON,
    O_WATCH,
    O_APPLY,
    O_OUT,
    O_API_BASE,
    O_VERIFY,
    O_CAPTCHA_SCRIPT,
    O_COUNT
};
#define B(o) (1u << (o))

/* Its own flags; --redis, --db, --log-level and --config are the
 * configuration's (cmd/settings.h). */
static const struct sk_flag flag_defs[O_COUNT] = {
    [O_ID] = {"--id", 1},
    [O_NAME] = {"--name", 1},
    [O_STOCK] = {"--stock", 1},
    [O_LIMIT] = {"--limit", 1},
    [O_MAX_PER_ORDER] = {"--max-per-order", 1},
    [O_START] = {"--start", 1},
    [O_END] = {"--end", 1},
    [O_PAY_TIMEOUT] = {"--pay-timeout", 1},
    [O_RATE] = {"--rate-per-user-per-s", 1},
    [O_VERIFY] = {"--verify", 0},
    [O_BURST] = {"--rate-burst", 1},
    [O_SEGMENTS] = {"--segments", 1},
    [O_PASSES] = {"--passes-per-s", 1},
    [O_PASS_TTL] = {"--pass-ttl", 1},
    [O_QUEUE_SEED] = {"--queue-seed", 1},
    [O_POW_BITS] = {"--pow-bits", 1},
    [O_POW_BITS_MAX] = {"--pow-bits-max", 1},
    [O_POW_STEP] = {"--pow-load-step", 1},
    [O_CAPTCHA] = {"--captcha", 1},
    [O_FORCE] = {"--force", 0},
    [O_REDIS_ONLY] = {"--redis-only", 0},
    [O_JSON] = {"--json", 0},
    [O_WATCH] = {"--watch", 0},
    [O_APPLY] = {"--apply", 0},
    [O_OUT] = {"--out", 1},
    [O_API_BASE] = {"--api-base", 1},
    [O_CAPTCHA_SCRIPT] = {"--captcha-script", 1},
};

struct ctx {
    const struct sub *sc;
    const struct sk_config *cfg; /* redis, db: flags, environment, config file */
    const char *val[O_COUNT];    /* flag values ("" for a given boolean flag) */
    unsigned seen;               /* B(flag) of the flags given */
    uint64_t id;
    sk_store *st;
    sk_redis *r;
};

/* What a sub-command opens: nothing (page), an existing database, or one
 * it may make (create: cmd/db_file.h). */
enum { OPENS_NOTHING, OPENS_EXISTING, OPENS_OR_MAKES };

struct sub {
    const char *name;
    int opens;
    unsigned allowed, required;
    int (*run)(struct ctx *);
    const char *usage;
};

static int has(const struct ctx *c, int o)
{
    return (c->seen & B(o)) != 0;
}

/* ---- shared steps ---- */

static int parse_id(struct ctx *c)
{
    uint64_t id;
    if (sk_cli_parse_u64(c->val[O_ID], &id) < 0 || id < 1 || id > SK_ACTIVITY_ID_MAX)
        return sk_cli_usage_error("activity %s: --id must be a whole number between 1 and %llu, "
                                  "got '%s'",
                                  c->sc->name, (unsigned long long)SK_ACTIVITY_ID_MAX,
                                  c->val[O_ID]);
    c->id = id;
    return 0;
}

/* Store errors that are the caller's fault are exit 2, the rest exit 1. */
static int store_fail(const struct ctx *c, int rc)
{
    const char *why = sk_store_errstr(c->st);
    if (rc == SK_ENOTFOUND || rc == SK_EEXIST || rc == SK_EINVAL)
        return sk_cli_usage_error("activity %s: %s", c->sc->name, why);
    return sk_cli_runtime_error("activity %s: database: %s", c->sc->name, why);
}

static int open_store(struct ctx *c)
{
    char err[512];
    if (sk_db_file_check(c->cfg->db, c->sc->opens == OPENS_OR_MAKES, err, sizeof err) < 0)
        return sk_cli_runtime_error("activity %s: %s", c->sc->name, err);
    int rc = sk_store_open(&c->st, c->cfg->db, err, sizeof err);
    if (rc == SK_EINVAL) return sk_cli_usage_error("activity %s: --db: %s", c->sc->name, err);
    if (rc < 0) return sk_cli_runtime_error("activity %s: database: %s", c->sc->name, err);
    return 0;
}

static int load(struct ctx *c, struct sk_activity *a)
{
    int rc = sk_store_activity_get(c->st, c->id, a);
    return rc < 0 ? store_fail(c, rc) : 0;
}

static int redis_fail(const struct ctx *c)
{
    return sk_cli_runtime_error("activity %s: redis unreachable or failing: %s", c->sc->name,
                                c->r->errstr[0] ? c->r->errstr : sk_strerror(c->r->err));
}

static int open_redis(struct ctx *c)
{
    char err[256] = "";
    const char *url = c->cfg->redis;
    int rc = sk_redis_new(&c->r, url, REDIS_TIMEOUT_MS, REDIS_TIMEOUT_MS, err, sizeof err);
    if (rc == SK_EINVAL)
        return sk_cli_usage_error("activity %s: --redis: %s", c->sc->name,
                                  err[0] ? err : "bad URL");
    if (rc < 0) return sk_cli_runtime_error("activity %s: %s", c->sc->name, sk_strerror(rc));
    /* Connect now so "unreachable" is reported as such, before any work. */
    if (sk_redis_connect(c->r) < 0) return redis_fail(c);
    return 0;
}

/* Redis TIME: the live state is computed on the clock the purchase script
 * uses, so `show` says what a purchase would meet right now. */
static int redis_now(struct ctx *c, int64_t *now)
{
    redisReply *rep;
    if (sk_redis_cmd(c->r, &rep, "TIME") < 0) return redis_fail(c);
    int64_t s, us;
    int ok = rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
             rep->element[0]->type == REDIS_REPLY_STRING &&
             rep->element[1]->type == REDIS_REPLY_STRING &&
             sk_reply_i64(rep->element[0], &s) == 0 && sk_reply_i64(rep->element[1], &us) == 0;
    if (ok) *now = s * 1000 + us / 1000;
    freeReplyObject(rep);
    if (!ok) return sk_cli_runtime_error("activity %s: unexpected reply to TIME", c->sc->name);
    return 0;
}

static const char *fmt_time(int64_t ms, char *buf)
{
    if (sk_time_format_rfc3339(ms, buf, SK_TIME_RFC3339_MAX) < 0)
        snprintf(buf, SK_TIME_RFC3339_MAX, "%" PRId64 "ms", ms);
    return buf;
}

/* ---- output ---- */

static void print_json(json_t *o)
{
    char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (s) printf("%s\n", s);
    free(s);
}

/* One "key: value" line per field: readable, and easy to grep. */
static void print_text(json_t *o)
{
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v)
    {
        printf("%-16s ", key);
        switch (json_typeof(v)) {
        case JSON_STRING: printf("%s\n", json_string_value(v)); break;
        case JSON_INTEGER: printf("%" JSON_INTEGER_FORMAT "\n", json_integer_value(v)); break;
        case JSON_TRUE: printf("yes\n"); break;
        case JSON_FALSE: printf("no\n"); break;
        case JSON_NULL: printf("-\n"); break;
        default: printf("?\n"); break;
        }
    }
}

static int emit(const struct ctx *c, json_t *o)
{
    if (!o) return sk_cli_runtime_error("activity %s: out of memory", c->sc->name);
    if (has(c, O_JSON))
        print_json(o);
    else
        print_text(o);
    json_decref(o);
    return SK_EXIT_OK;
}

/* ---- sub-commands ---- */

/* Flag o's whole number into *out; a flag not given leaves it. */
static int parse_count(const struct ctx *c, int o, int64_t *out)
{
    const char *s = c->val[o];
    if (!has(c, o)) return 0;
    if (sk_cli_parse_i64(s, INT64_MIN, INT64_MAX, out) == 0) return 0;
    const char *d = s + (*s == '-');
    if (*d && d[strspn(d, "0123456789")] == 0)
        return sk_cli_usage_error("activity %s: %s is out of range: '%s'", c->sc->name,
                                  flag_defs[o].name, s);
    return sk_cli_usage_error("activity %s: %s must be a whole number, got '%s'", c->sc->name,
                              flag_defs[o].name, s);
}

static int parse_time(const struct ctx *c, int o, int64_t now, int64_t base, int64_t *out)
{
    const char *s = c->val[o];
    if (sk_time_parse_arg(s, strlen(s), now, base, out) < 0)
        return sk_cli_usage_error("activity %s: %s must be RFC 3339 (2026-11-29T10:00:00Z, "
                                  "+08:00 offsets), now, or +<N>s|m|h|d; got '%s'",
                                  c->sc->name, flag_defs[o].name, s);
    return 0;
}

/* --passes-per-s R [--pass-ttl S] [--queue-seed HEX]: the waiting room
 * (docs/waiting-room.md); without a seed a fresh one is drawn. Ranges are
 * sk_activity_validate's. */
static int parse_waiting_room(const struct ctx *c, struct sk_activity *a)
{
    int rc;
    if ((has(c, O_PASS_TTL) || has(c, O_QUEUE_SEED)) && !has(c, O_PASSES))
        return sk_cli_usage_error("activity create: --pass-ttl and --queue-seed need "
                                  "--passes-per-s");
    if (!has(c, O_PASSES)) return 0;
    if ((rc = parse_count(c, O_PASSES, &a->wr_passes_per_s)) != 0) return rc;
    if (a->wr_passes_per_s < 1 || a->wr_passes_per_s > SK_ACTIVITY_PASS_RATE_MAX)
        return sk_cli_usage_error("activity create: --passes-per-s must be between 1 and %d",
                                  SK_ACTIVITY_PASS_RATE_MAX);
    if ((rc = parse_count(c, O_PASS_TTL, &a->wr_pass_ttl_s)) != 0) return rc;
    if (has(c, O_QUEUE_SEED)) {
        const char *seed = c->val[O_QUEUE_SEED];
        if (!sk_activity_seed_valid(seed, strlen(seed)))
            return sk_cli_usage_error("activity create: --queue-seed must be %d to %d lowercase "
                                      "hex digits",
                                      SK_ACTIVITY_SEED_MIN, SK_ACTIVITY_SEED_MAX);
        snprintf(a->wr_seed, sizeof a->wr_seed, "%s", seed);
    } else if (sk_rand_hex(a->wr_seed, sizeof a->wr_seed, SK_ACTIVITY_SEED_BYTES) < 0) {
        return sk_cli_runtime_error("activity create: no randomness for the queue seed");
    }
    return 0;
}

/* --pow-bits N [--pow-bits-max M [--pow-load-step S]] and/or --captcha P:
 * the challenge of the queue join or the purchase (docs/challenges.md).
 * Ranges are sk_activity_validate's. */
static int parse_challenge(const struct ctx *c, struct sk_activity *a)
{
    int rc;
    if ((has(c, O_POW_BITS_MAX) || has(c, O_POW_STEP)) && !has(c, O_POW_BITS))
        return sk_cli_usage_error("activity create: --pow-bits-max and --pow-load-step need "
                                  "--pow-bits");
    if (has(c, O_POW_STEP) && !has(c, O_POW_BITS_MAX))
        return sk_cli_usage_error("activity create: --pow-load-step needs --pow-bits-max");
    if ((rc = parse_count(c, O_POW_BITS, &a->ch_pow_min)) != 0) return rc;
    if (has(c, O_POW_BITS) && a->ch_pow_min < 1)
        return sk_cli_usage_error("activity create: --pow-bits must be between 1 and %d",
                                  SK_CH_BITS_MAX);
    if ((rc = parse_count(c, O_POW_BITS_MAX, &a->ch_pow_max)) != 0) return rc;
    if ((rc = parse_count(c, O_POW_STEP, &a->ch_pow_step)) != 0) return rc;
    if (has(c, O_CAPTCHA)) {
        const char *p = c->val[O_CAPTCHA];
        if (!sk_activity_captcha_valid(p))
            return sk_cli_usage_error("activity create: --captcha must be turnstile, hcaptcha "
                                      "or recaptcha, got '%s'",
                                      p);
        snprintf(a->ch_captcha, sizeof a->ch_captcha, "%s", p);
    }
    return 0;
}

static int cmd_create(struct ctx *c)
{
    struct sk_activity a;
    sk_activity_init(&a);
    a.id = c->id;
    if (strlen(c->val[O_NAME]) >= sizeof a.name)
        return sk_cli_usage_error("activity create: name is longer than %d bytes",
                                  SK_ACTIVITY_NAME_MAX - 1);
    snprintf(a.name, sizeof a.name, "%s", c->val[O_NAME]);
    int rc;
    if ((rc = parse_count(c, O_STOCK, &a.stock)) != 0) return rc;
    if ((rc = parse_count(c, O_LIMIT, &a.per_user_limit)) != 0) return rc;
    if ((rc = parse_count(c, O_MAX_PER_ORDER, &a.max_per_order)) != 0) return rc;
    if ((rc = parse_count(c, O_PAY_TIMEOUT, &a.pay_timeout_s)) != 0) return rc;
    if ((rc = parse_count(c, O_RATE, &a.rl_per_user_per_s)) != 0) return rc;
    if ((rc = parse_count(c, O_BURST, &a.rl_burst)) != 0) return rc;
    if (has(c, O_BURST) && !has(c, O_RATE))
        return sk_cli_usage_error("activity create: --rate-burst needs --rate-per-user-per-s");
    /* Range (1..256) and segments <= stock: sk_activity_validate below. */
    if ((rc = parse_count(c, O_SEGMENTS, &a.segments)) != 0) return rc;
    if ((rc = parse_waiting_room(c, &a)) != 0) return rc;
    if ((rc = parse_challenge(c, &a)) != 0) return rc;
    int64_t now = sk_wall_ms();
    a.start_ms = now;
    if (has(c, O_START) && (rc = parse_time(c, O_START, now, now, &a.start_ms)) != 0) return rc;
    /* A relative end counts from the start: `--start +10m --end +1h` is a
     * one-hour sale. */
    a.end_ms = a.start_ms + 3600 * 1000;
    if (has(c, O_END) && (rc = parse_time(c, O_END, now, a.start_ms, &a.end_ms)) != 0) return rc;
    a.created_ms = now;
    sk_activity_apply_defaults(&a);
    char why[256];
    if (sk_activity_validate(&a, why, sizeof why) < 0)
        return sk_cli_usage_error("activity create: %s", why);

    if ((rc = open_store(c)) != 0) return rc;
    if ((rc = sk_store_activity_insert(c->st, &a)) < 0) return store_fail(c, rc);
    a.stock_db = a.stock;
    return emit(c, sk_activity_json(&a, NULL, 0, SK_AV_OPERATOR, NULL));
}

/* Runs the recovery of docs/recovery.md (apply or dry run), prints what it
 * did. Exit 0: nothing to do, or done and selling again; 1: a dry run
 * found work (or the activity stays fenced: oversold), or a failure. */
static int run_recover(struct ctx *c, const char *actor, int apply)
{
    struct sk_recover_opts o = {.apply = apply, .actor = actor};
    struct sk_recover_report rep;
    char err[512];
    int rc = sk_recover_activity(c->st, c->r, c->id, &o, &rep, err, sizeof err);
    if (rc == SK_ENOTFOUND) {
        sk_recover_report_free(&rep);
        return sk_cli_usage_error("activity %s: %s", c->sc->name, err);
    }
    if (rc < 0) {
        sk_recover_report_free(&rep);
        return sk_cli_runtime_error("activity %s: %s", c->sc->name, err);
    }
    sk_recover_print(stdout, &rep);
    int needed = rep.needed, fenced = rep.fenced_after;
    sk_recover_report_free(&rep);
    return (apply ? fenced : needed) ? SK_EXIT_FAIL : SK_EXIT_OK;
}

static int cmd_recover(struct ctx *c)
{
    int rc;
    if ((rc = open_store(c)) != 0 || (rc = open_redis(c)) != 0) return rc;
    return run_recover(c, "operator", has(c, O_APPLY));
}

static int cmd_preheat(struct ctx *c)
{
    struct sk_activity a;
    int rc;
    if ((rc = open_store(c)) != 0 || (rc = load(c, &a)) != 0 || (rc = open_redis(c)) != 0)
        return rc;
    struct sk_stock_def d;
    sk_activity_stock_def(&a, &d);
    /* units the database holds: keys gone with them are rebuilt, not
     * written with the whole stock again (docs/recovery.md) */
    d.db_held = a.stock - a.stock_db;
    /* the key sets belong to this store from now on (docs/design.md) */
    if ((rc = sk_store_identity(c->st, d.store_id, sizeof d.store_id)) < 0)
        return store_fail(c, rc);
    /* a Redis that may evict the sale's keys is refused before anything is
     * written; what it says to watch is said (redis_settings.h) */
    struct sk_rset_verdict v;
    char where[80];
    if (sk_stock_settings(c->r, a.id, (int)a.segments, a.stock, 0, &v, where, sizeof where) < 0)
        return redis_fail(c);
    if (v.level == SK_RSET_UNSAFE)
        return sk_cli_usage_error("activity preheat: refused: redis %s: %s", where, v.f[0].why);
    for (int i = 0; i < v.n; i++)
        if (v.f[i].level == SK_RSET_WARN)
            fprintf(stderr, "activity preheat: warning: redis %s: %s\n", where, v.f[i].why);
    int res;
    int64_t stock;
    if (sk_stock_preheat(c->r, &d, has(c, O_FORCE), &res, &stock) < 0) return redis_fail(c);
    switch (res) {
    case SK_RC_RECOVERING:
        printf("activity %" PRIu64 ": its live state is rebuilt from the database's orders, not "
               "written again\n",
               a.id);
        return run_recover(c, "preheat", 1);
    case SK_RC_PREHEATED:
        if ((rc = sk_store_activity_set_state(c->st, a.id, "preheated")) < 0)
            return sk_cli_runtime_error("activity preheat: preheated in Redis but the database "
                                        "was not updated: %s",
                                        sk_store_errstr(c->st));
        printf("activity %" PRIu64 " preheated: stock %" PRId64 " of %" PRId64 "\n", a.id, stock,
               a.stock);
        return SK_EXIT_OK;
    case SK_RC_STOCK_LIVE:
        /* Repairs a preheat whose database update was lost: Redis has the
         * stock, so the definition is preheated whatever the store says. */
        if (!strcmp(a.state, "created") &&
            (rc = sk_store_activity_set_state(c->st, a.id, "preheated")) < 0)
            return store_fail(c, rc);
        printf("activity %" PRIu64 ": live stock exists (%" PRId64 " left), left alone "
               "(--force rewrites it while closed)\n",
               a.id, stock);
        return SK_EXIT_OK;
    case SK_RC_IS_OPEN:
        return sk_cli_usage_error("activity preheat: activity %" PRIu64
                                  " is open; close it before a forced preheat",
                                  a.id);
    case SK_RC_BELOW_SOLD:
        return sk_cli_usage_error("activity preheat: activity %" PRIu64 ": stock %" PRId64
                                  " is below the units buyers already hold",
                                  a.id, a.stock);
    case SK_RC_OTHER_STORE:
        return sk_cli_runtime_error(
            "activity preheat: activity %" PRIu64 " is live in Redis for another database "
            "than this one (store %s): nothing was written. Run the command with that "
            "database's --db, or, if that sale should not exist, remove its live state with "
            "`seckill activity delete --id %" PRIu64 " --redis-only` (docs/reconcile.md)",
            a.id, d.store_id, a.id);
    default:
        return sk_cli_usage_error("activity preheat: Redis refused the definition: %s",
                                  sk_rc_message(res));
    }
}

/* open and close: the sale switch. */
static int cmd_switch(struct ctx *c)
{
    struct sk_activity a;
    int rc, open = !strcmp(c->sc->name, "open");
    if ((rc = open_store(c)) != 0 || (rc = load(c, &a)) != 0 || (rc = open_redis(c)) != 0)
        return rc;
    int res;
    if (sk_stock_set_open(c->r, a.id, open, &res) < 0) return redis_fail(c);
    if (res == SK_RC_UNKNOWN_ACTIVITY)
        return sk_cli_usage_error("activity %s: activity %" PRIu64 " is not preheated; run "
                                  "`seckill activity preheat --id %" PRIu64 "` first",
                                  c->sc->name, a.id, a.id);
    if (res != SK_RC_OK)
        return sk_cli_runtime_error("activity %s: unexpected answer: %s", c->sc->name,
                                    sk_rc_name(res));
    if ((rc = sk_store_activity_set_state(c->st, a.id, open ? "open" : "closed")) < 0)
        return sk_cli_runtime_error("activity %s: switch set in Redis but the database was not "
                                    "updated: %s",
                                    c->sc->name, sk_store_errstr(c->st));
    /* The local clock is good enough for this note; the switch is set. */
    printf("activity %" PRIu64 " %s (now %s)\n", a.id, open ? "opened" : "closed",
           sk_activity_live_state(1, open, a.start_ms, a.end_ms, sk_wall_ms()));
    return SK_EXIT_OK;
}

/* ---- the draw (docs/fairness.md) ---- */

/* The registrants in the store (sorted, distinct), into a new array, and
 * their user ids in that order into another (*order, the caller's too). */
static int stored_registrants(struct ctx *c, struct sk_registration **reg, size_t *n,
                              uint64_t **order)
{
    int rc = sk_store_registrations_list(c->st, c->id, reg, n);
    if (rc < 0) return store_fail(c, rc);
    if (!(*order = malloc((*n ? *n : 1) * sizeof **order))) {
        free(*reg);
        return sk_cli_runtime_error("activity draw: out of memory");
    }
    for (size_t i = 0; i < *n; i++)
        (*order)[i] = (*reg)[i].user_id;
    return 0;
}

/* Recomputes the draw from the published seed and the stored registrants
 * and compares it with the places the store recorded: exit 0 when they
 * agree, 1 when not. */
static int draw_verify(struct ctx *c, const struct sk_activity *a)
{
    if (a->drawn_ms <= 0)
        return sk_cli_usage_error("activity draw: activity %llu is not drawn yet",
                                  (unsigned long long)a->id);
    struct sk_registration *reg;
    size_t n;
    uint64_t *order;
    int rc = stored_registrants(c, &reg, &n, &order);
    if (rc) return rc;
    char commit[SK_DRAW_HEX], from[SK_DRAW_HEX], made[SK_DRAW_HEX];
    sk_draw_list_hash(order, n, from);
    size_t bad = 0;
    if (sk_draw_commit(a->draw_seed, commit) < 0 || sk_draw_order(a->draw_seed, order, n) < 0) {
        bad = n + 1;
    } else {
        /* reg is by user id, as the draw's input: find each one's place */
        for (size_t p = 0; p < n; p++) {
            size_t lo = 0, hi = n;
            while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (reg[mid].user_id < order[p])
                    lo = mid + 1;
                else
                    hi = mid;
            }
            if (lo == n || reg[lo].user_id != order[p] || reg[lo].draw_place != (int64_t)p + 1)
                bad++;
        }
    }
    sk_draw_list_hash(order, n, made);
    printf("activity %llu: %zu registrants, commitment %s, seed %s\n"
           "registrants sha256 %s\norder sha256 %s\n%s\n",
           (unsigned long long)a->id, n, commit, a->draw_seed, from, made,
           bad ? "MISMATCH: the recorded places are not the seed's draw" : "verified");
    free(reg);
    free(order);
    return bad ? SK_EXIT_FAIL : SK_EXIT_OK;
}

/* Makes the draw once: every registrant Redis holds is copied to the
 * store, the order drawn from the seed, recorded in the store (once: a
 * second run finds it), then written to Redis, whose first wave starts at
 * the sale's start. */
static int cmd_draw(struct ctx *c)
{
    struct sk_activity a;
    int rc;
    if ((rc = open_store(c)) != 0 || (rc = load(c, &a)) != 0) return rc;
    if (a.draw_box_s <= 0)
        return sk_cli_usage_error("activity draw: activity %llu has no draw (allocation race)",
                                  (unsigned long long)a.id);
    if (has(c, O_VERIFY)) return draw_verify(c, &a);
    if ((rc = open_redis(c)) != 0) return rc;
    int rrc;
    int64_t now, reg_end, nreg, drawn;
    if (sk_draw_check(c->r, a.id, &rrc, &now, &reg_end, &nreg, &drawn) < 0) return redis_fail(c);
    if (rrc != SK_RC_OK)
        return sk_cli_usage_error("activity draw: %s (preheat the activity first)",
                                  sk_rc_message(rrc));
    if (now < reg_end) return sk_cli_usage_error("activity draw: registration is still open");
    if (a.drawn_ms <= 0) {
        uint64_t *users;
        size_t n;
        if (sk_draw_registrants(c->r, a.id, &users, &n) < 0) return redis_fail(c);
        n = sk_draw_sort_unique(users, n);
        rc = sk_store_registrations_add(c->st, a.id, users, n, now, NULL);
        free(users);
        if (rc < 0) return store_fail(c, rc);
        struct sk_registration *reg;
        uint64_t *order;
        if ((rc = stored_registrants(c, &reg, &n, &order)) != 0) return rc;
        free(reg);
        rc = sk_draw_order(a.draw_seed, order, n);
        if (rc == 0) rc = sk_store_draw_record(c->st, a.id, order, n, now);
        free(order);
        if (rc < 0 && rc != SK_EEXIST) return store_fail(c, rc);
        /* recorded now, or by another run that drew first: its draw stands */
        if ((rc = load(c, &a)) != 0) return rc;
    }
    /* the recorded draw into Redis (a Redis that lost it gets the same one
     * back; the recovery does the same by itself) */
    struct sk_draw_redis after;
    char err[256];
    if ((rc = sk_draw_sync(c->st, c->r, &a, &after, err, sizeof err)) < 0)
        return sk_cli_runtime_error("activity draw: %s", err);
    if (after.rc != SK_RC_OK)
        return sk_cli_runtime_error("activity draw: redis refused the draw: %s",
                                    sk_rc_message(after.rc));
    char commit[SK_DRAW_HEX];
    if (sk_draw_commit(a.draw_seed, commit) < 0) commit[0] = 0;
    printf("activity %llu drawn: %lld registrants, commitment %s, seed %s; wave %lld: places "
           "%lld..%lld may buy until %lld (unix ms)\n",
           (unsigned long long)a.id, (long long)a.draw_n, commit, a.draw_seed,
           (long long)after.wave, (long long)after.from + 1, (long long)after.to,
           (long long)after.box_end_ms);
    return SK_EXIT_OK;
}

static volatile sig_atomic_t watch_stop;

static void on_watch_signal(int sig)
{
    (void)sig;
    watch_stop = 1;
}

/* The definition and the live state, read on Redis's clock; with --watch
 * the same figures every second until Ctrl-C (or SIGTERM), on a cleared
 * screen when stdout is a terminal; one state script a second, which sums
 * the buyers hash (O(buyers)), like the stats route. */
static int cmd_show(struct ctx *c)
{
    struct sk_activity a;
    int rc, watch = has(c, O_WATCH);
    if ((rc = open_store(c)) != 0 || (rc = load(c, &a)) != 0 || (rc = open_redis(c)) != 0)
        return rc;
    struct sigaction sa = {.sa_handler = on_watch_signal};
    if (watch) sigaction(SIGINT, &sa, NULL);
    if (watch) sigaction(SIGTERM, &sa, NULL);
    int tty = isatty(STDOUT_FILENO);
    int64_t last_held = -1, last_ms = 0;
    while (!watch_stop) {
        struct sk_stock_state live;
        int64_t now;
        if (sk_stock_state(c->r, a.id, &live) < 0) return redis_fail(c);
        if ((rc = redis_now(c, &now)) != 0) return rc;
        if (!watch) return emit(c, sk_activity_json(&a, &live, now, SK_AV_OPERATOR, NULL));
        if (tty) printf("\033[H\033[2J");
        char at[SK_TIME_RFC3339_MAX];
        sk_time_format_rfc3339(now, at, sizeof at);
        if (!has(c, O_JSON)) {
            printf("activity %llu at %s (every second; Ctrl-C to stop)\n", (unsigned long long)a.id,
                   at);
            if (last_held >= 0 && now > last_ms)
                printf("%-18s %.1f\n", "admitted_per_s",
                       (double)(live.held - last_held) * 1000.0 / (double)(now - last_ms));
        }
        last_held = live.held;
        last_ms = now;
        if ((rc = emit(c, sk_activity_json(&a, &live, now, SK_AV_OPERATOR, NULL))) != SK_EXIT_OK)
            return rc;
        if (!tty && !has(c, O_JSON)) printf("\n");
        fflush(stdout);
        for (int i = 0; i < 20 && !watch_stop; i++) {
            struct timespec ts = {0, 50 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    return SK_EXIT_OK;
}

/* The list's columns: each as wide as its widest cell (an id of 15
 * digits, a stock of 13), numbers to the right. */
enum { L_ID, L_STATE, L_STORED, L_REMAINING, L_INITIAL, L_SEGS, L_START, L_END, L_NAME, L_COLS };
#define L_CELL SK_TIME_RFC3339_MAX

static void print_rows(char (*rows)[L_COLS][L_CELL], size_t n, const struct sk_activity *all)
{
    static const int right[L_COLS] = {[L_REMAINING] = 1, [L_INITIAL] = 1, [L_SEGS] = 1};
    int w[L_COLS] = {0};
    for (size_t i = 0; i <= n; i++)
        for (int k = 0; k < L_NAME; k++)
            if ((int)strlen(rows[i][k]) > w[k]) w[k] = (int)strlen(rows[i][k]);
    for (size_t i = 0; i <= n; i++) {
        for (int k = 0; k < L_NAME; k++)
            printf(right[k] ? "%*s " : "%-*s ", w[k], rows[i][k]);
        printf("%s\n", i ? all[i - 1].name : "NAME");
    }
}

static int cmd_list(struct ctx *c)
{
    struct sk_activity *all;
    size_t n;
    int rc;
    if ((rc = open_store(c)) != 0) return rc;
    if ((rc = sk_store_activity_list(c->st, &all, &n)) < 0) return store_fail(c, rc);
    int64_t now;
    if ((rc = open_redis(c)) != 0 || (rc = redis_now(c, &now)) != 0) {
        free(all);
        return rc;
    }
    json_t *arr = json_array();
    /* row 0: the header */
    char(*rows)[L_COLS][L_CELL] = calloc(n + 1, sizeof *rows);
    if (!rows || !arr) rc = sk_cli_runtime_error("activity list: out of memory");
    static const char *const head[L_COLS] = {"ID",   "STATE", "STORED", "REMAINING", "INITIAL",
                                             "SEGS", "START", "END",    "NAME"};
    for (int k = 0; rows && k < L_COLS; k++)
        snprintf(rows[0][k], L_CELL, "%s", head[k]);
    for (size_t i = 0; i < n && rc == 0; i++) {
        struct sk_stock_state live;
        if (sk_stock_state(c->r, all[i].id, &live) < 0) {
            rc = redis_fail(c);
            break;
        }
        if (has(c, O_JSON)) {
            json_array_append_new(arr, sk_activity_json(&all[i], &live, now, SK_AV_OPERATOR, NULL));
            continue;
        }
        char(*r)[L_CELL] = rows[i + 1];
        snprintf(r[L_ID], L_CELL, "%" PRIu64, all[i].id);
        snprintf(
            r[L_STATE], L_CELL, "%s",
            sk_activity_live_state(live.exists, live.open, all[i].start_ms, all[i].end_ms, now));
        snprintf(r[L_STORED], L_CELL, "%s", all[i].state);
        snprintf(r[L_REMAINING], L_CELL, "-");
        if (live.exists) snprintf(r[L_REMAINING], L_CELL, "%" PRId64, live.remaining);
        snprintf(r[L_INITIAL], L_CELL, "%" PRId64, all[i].stock);
        snprintf(r[L_SEGS], L_CELL, "%" PRId64, all[i].segments);
        fmt_time(all[i].start_ms, r[L_START]);
        fmt_time(all[i].end_ms, r[L_END]);
    }
    if (rc == 0 && has(c, O_JSON))
        print_json(arr);
    else if (rc == 0)
        print_rows(rows, n, all);
    free(rows);
    json_decref(arr);
    free(all);
    return rc;
}

static int cmd_delete(struct ctx *c)
{
    int rc;
    if ((rc = open_store(c)) != 0 || (rc = open_redis(c)) != 0) return rc;
    int force = has(c, O_FORCE), live_only = has(c, O_REDIS_ONLY);
    struct sk_delete_report rep;
    rc = live_only ? sk_activity_delete_live(c->st, c->r, c->id, force, &rep)
                   : sk_activity_delete(c->st, c->r, c->id, force, &rep);
    if (rc == SK_ENOTFOUND && live_only)
        return sk_cli_usage_error("activity delete: Redis holds nothing of activity %" PRIu64,
                                  c->id);
    if (rc == SK_ENOTFOUND || rc == SK_EEXIST)
        return sk_cli_usage_error("activity delete: %s",
                                  rc == SK_EEXIST ? rep.why : sk_store_errstr(c->st));
    if (rc == SK_EDB || rc == SK_ETIMEDOUT || rc == SK_ENOMEM)
        return sk_cli_runtime_error("activity delete: database: %s", sk_store_errstr(c->st));
    if (rc) return redis_fail(c);
    /* open: a usage error as before (nothing changed); unsettled orders:
     * exit 1, the operator decides (docs/activity.md) */
    if (rep.refused == SK_ESTATE) return sk_cli_usage_error("activity delete: %s", rep.why);
    if (rep.refused) return sk_cli_runtime_error("activity delete: %s: --force", rep.why);
    printf("activity %" PRIu64 " %s%s%s\n", c->id,
           live_only ? "removed from Redis (its live state)" : "deleted", rep.why[0] ? ": " : "",
           rep.why);
    return SK_EXIT_OK;
}

/* ---- dispatch ---- */

/* The buyer's page for a CDN: DIR/index.html, self-contained; written
 * under a temporary name and renamed, so an edge never serves half a
 * file. Touches neither Redis nor the database. */
static int cmd_page(struct ctx *c)
{
    char *page, err[256];
    size_t len;
    /* a sale with a CAPTCHA: the page's policy allows its provider's origins */
    const struct sk_captcha_provider *cp = NULL;
    if (has(c, O_CAPTCHA) && !(cp = sk_captcha_find(c->val[O_CAPTCHA])))
        return sk_cli_usage_error("activity page: --captcha must be turnstile, hcaptcha or "
                                  "recaptcha, got '%s'",
                                  c->val[O_CAPTCHA]);
    /* its widget's script: the provider's, or the one serve's
     * captcha_script_url names (the page's policy allows that origin only) */
    char csp[SK_CAPTCHA_CSP_MAX] = "";
    const char *script;
    if (has(c, O_CAPTCHA_SCRIPT) && !cp)
        return sk_cli_usage_error("activity page: --captcha-script goes with --captcha");
    if (cp && sk_captcha_widget(cp, c->val[O_CAPTCHA_SCRIPT], &script, csp, sizeof csp) < 0) {
        char origin[SK_CAPTCHA_SCRIPT_MAX], why[96];
        sk_captcha_script_check(c->val[O_CAPTCHA_SCRIPT], origin, sizeof origin, why, sizeof why);
        return sk_cli_usage_error("activity page: --captcha-script %s", why);
    }
    int rc = sk_sale_page_build_csp(c->id, c->val[O_API_BASE], csp[0] ? csp : NULL, &page, &len,
                                    err, sizeof err);
    if (rc == SK_EINVAL) return sk_cli_usage_error("activity page: %s", err);
    if (rc < 0) return sk_cli_runtime_error("activity page: out of memory");
    const char *dir = c->val[O_OUT];
    char path[4096], tmp[4200];
    if (!dir[0] || snprintf(path, sizeof path, "%s/index.html", dir) >= (int)sizeof path) {
        free(page);
        return sk_cli_usage_error("activity page: --out must name a directory");
    }
    if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
        int e = errno;
        free(page);
        return sk_cli_runtime_error("activity page: cannot make %s: %s", dir, strerror(e));
    }
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    int ok = f && fwrite(page, 1, len, f) == len;
    if (f && fclose(f) != 0) ok = 0;
    if (ok && rename(tmp, path) < 0) ok = 0;
    int e = errno;
    free(page);
    if (!ok) {
        unlink(tmp);
        return sk_cli_runtime_error("activity page: cannot write %s: %s", path, strerror(e));
    }
    printf("wrote %s (%zu bytes): the sale page of activity %" PRIu64 ", calling %s\n", path, len,
           c->id,
           c->val[O_API_BASE] && c->val[O_API_BASE][0] ? c->val[O_API_BASE]
                                                       : "the API on its own origin");
    return SK_EXIT_OK;
}

#define COMMON_USAGE                                                                               \
    "  --config FILE        the config file (default $SECKILL_CONFIG, else\n"                      \
    "                       /etc/seckill/seckill.conf when it exists): its redis, db\n"            \
    "                       and log_level keys\n"                                                  \
    "  --redis URL          redis://[user:pass@]host:port[/db], redis+unix:///path.sock,\n"        \
    "                       redis+sentinel://host:port,.../MASTER, redis+cluster://...\n"          \
    "                       (default redis://127.0.0.1:6379)\n"                                    \
    "  --db SPEC            sqlite:PATH, postgres://... or mysql://... (MariaDB) (default\n"       \
    "                       sqlite:seckill.db)\n"                                                  \
    "  --log-level LEVEL    debug, info (default), warn or error\n"                                \
    "Flags win over SECKILL_REDIS, SECKILL_DB and SECKILL_LOG_LEVEL, which win over the\n"         \
    "config file. Only create makes a new SQLite file.\n"

static const struct sub subs[] = {
    {"create", OPENS_OR_MAKES,
     B(O_ID) | B(O_NAME) | B(O_STOCK) | B(O_LIMIT) | B(O_MAX_PER_ORDER) | B(O_START) | B(O_END) |
         B(O_PAY_TIMEOUT) | B(O_RATE) | B(O_BURST) | B(O_SEGMENTS) | B(O_PASSES) | B(O_PASS_TTL) |
         B(O_QUEUE_SEED) | B(O_POW_BITS) | B(O_POW_BITS_MAX) | B(O_POW_STEP) | B(O_CAPTCHA) |
         B(O_JSON),
     B(O_ID) | B(O_NAME) | B(O_STOCK) | B(O_LIMIT), cmd_create,
     "usage: seckill activity create --id N --name TEXT --stock N --limit N [options]\n"
     "Stores a new activity (state created); `preheat` then loads it into Redis.\n"
     "  --id N               activity id, 1..999999999999999\n"
     "  --name TEXT          1..127 bytes of UTF-8 text\n"
     "  --stock N            units on sale, 1..1000000000000\n"
     "  --limit N            most units one user may buy in total (>= 1)\n"
     "  --max-per-order N    most units in one purchase (default: --limit)\n"
     "  --start TIME         RFC 3339 (2026-11-29T10:00:00Z, 2026-11-29T18:00:00+08:00),\n"
     "                       now, or +<N>s|m|h|d from now (default now)\n"
     "  --end TIME           RFC 3339, or +<N>s|m|h|d from the start (default start + 1h)\n"
     "  --pay-timeout S      seconds a buyer has to pay (default 1800)\n"
     "  --rate-per-user-per-s R  this activity's per-user rate limit (default: serve's)\n"
     "  --rate-burst B       its burst (default: one second's worth)\n"
     "  --segments S         split the stock over S Redis hash tags, 1..256, at most\n"
     "                       --stock (default 1; docs/segments.md)\n"
     "  --passes-per-s R     put a waiting room in front of the sale: buyers queue\n"
     "                       (POST .../queue), those who join before the start in a\n"
     "                       random order, and R passes a second go out in queue\n"
     "                       order; a purchase needs its buyer's pass, 1..1000000\n"
     "                       (docs/waiting-room.md)\n"
     "  --pass-ttl S         how long a pass may be used, 1..86400 s (default 300)\n"
     "  --queue-seed HEX     the draw's secret seed, 16..64 lowercase hex digits (the\n"
     "                       same seed gives the same order; default: a random one)\n"
     "  --pow-bits N         a proof-of-work challenge before the queue join (or the\n"
     "                       purchase, without a waiting room): SHA-256 with N leading\n"
     "                       zero bits, 1..30 (docs/challenges.md)\n"
     "  --pow-bits-max M     let the bits rise with the load up to M (>= --pow-bits)\n"
     "  --pow-load-step S    one more bit each time load + S doubles (default 1000)\n"
     "  --captcha P          a CAPTCHA with the challenge: turnstile, hcaptcha or\n"
     "                       recaptcha (the server's captcha_* settings name its keys)\n"
     "  --json               print the activity as JSON\n" COMMON_USAGE},
    {"preheat", OPENS_EXISTING, B(O_ID) | B(O_FORCE), B(O_ID), cmd_preheat,
     "usage: seckill activity preheat --id N [--force]\n"
     "Writes the stock and the sale window to Redis. A no-op when live stock\n"
     "exists; --force rewrites it (keeping what buyers hold) unless the sale is open.\n"
     "When Redis lost the keys while the database holds orders, or the activity is\n"
     "fenced, its live state is rebuilt from the orders instead (activity recover).\n"
     "  --id N               activity id\n"
     "  --force              rewrite live stock (refused while open)\n" COMMON_USAGE},
    {"open", OPENS_EXISTING, B(O_ID), B(O_ID), cmd_switch,
     "usage: seckill activity open --id N\n"
     "Turns the sale switch on; purchases succeed inside [start, end).\n"
     "  --id N               activity id\n" COMMON_USAGE},
    {"close", OPENS_EXISTING, B(O_ID), B(O_ID), cmd_switch,
     "usage: seckill activity close --id N\n"
     "Turns the sale switch off; purchases are refused with `closed`.\n"
     "  --id N               activity id\n" COMMON_USAGE},
    {"show", OPENS_EXISTING, B(O_ID) | B(O_JSON) | B(O_WATCH), B(O_ID), cmd_show,
     "usage: seckill activity show --id N [--json] [--watch]\n"
     "The definition and the live state: remaining, admitted, held, released,\n"
     "buyers, order stream length, state (scheduled|open|closed|ended).\n"
     "  --id N               activity id\n"
     "  --json               print JSON\n"
     "  --watch              again every second (with admitted/s) until Ctrl-C\n" COMMON_USAGE},
    {"list", OPENS_EXISTING, B(O_JSON), 0, cmd_list,
     "usage: seckill activity list [--json]\n"
     "Every activity, one line each, with its live state.\n"
     "  --json               print a JSON array of what `show --json` prints\n" COMMON_USAGE},
    {"recover", OPENS_EXISTING, B(O_ID) | B(O_APPLY), B(O_ID), cmd_recover,
     "usage: seckill activity recover --id N [--apply]\n"
     "Compares the activity's live state in Redis with the orders in the database,\n"
     "as the order worker does every second, and prints what a recovery would do per\n"
     "key set: orders Redis lost (held, released), releases to apply again, the\n"
     "stock after, units sold twice (oversold). Exit 0 when there is nothing to do,\n"
     "1 when a recovery is needed. With --apply it runs it: fences the key sets\n"
     "(purchases get 503 recovering), rebuilds vanished keys, replays the orders,\n"
     "and resumes the sale unless units were sold twice (then it stays fenced,\n"
     "exit 1). Every change writes an audit row. docs/recovery.md.\n"
     "  --id N               activity id\n"
     "  --apply              run the recovery (default: a dry run, nothing "
     "written)\n" COMMON_USAGE},
    {"page", OPENS_NOTHING, B(O_ID) | B(O_OUT) | B(O_API_BASE) | B(O_CAPTCHA) | B(O_CAPTCHA_SCRIPT),
     B(O_ID) | B(O_OUT), cmd_page,
     "usage: seckill activity page --id N --out DIR [--api-base URL] [--captcha P\n"
     "                             [--captcha-script URL]]\n"
     "Writes the buyer's sale page of activity N as DIR/index.html, one self-contained\n"
     "file for a CDN or any static host (docs/buyer-page.md says how to brand it).\n"
     "The page calls the API at --api-base; seckill serve must then name the page's\n"
     "origin in --cors-origins. Without --api-base it calls its own origin (a CDN that\n"
     "forwards /api/ to seckill serve). `seckill serve` also sends this page itself\n"
     "at GET /sale/N. Reads neither Redis nor the database.\n"
     "  --id N               activity id\n"
     "  --out DIR            directory to write index.html into (made if missing)\n"
     "  --api-base URL       http(s)://host[:port][/path] of seckill serve's API\n"
     "  --captcha P          the sale asks a CAPTCHA of provider P (turnstile, hcaptcha,\n"
     "                       recaptcha): the page's policy allows that provider's\n"
     "                       origins, and only those (docs/challenges.md)\n"
     "  --captcha-script URL the widget's script as serve's captcha_script_url names it\n"
     "                       (https://, or http:// on loopback): the policy allows its\n"
     "                       origin instead of the provider's\n"},
    {"draw", OPENS_EXISTING, B(O_ID) | B(O_VERIFY), B(O_ID), cmd_draw,
     "usage: seckill activity draw --id N [--verify]\n"
     "Once registration has closed, draws the order of the registrants of a sale\n"
     "with allocation draw from its committed seed, records it in the database\n"
     "(once: running it again writes the recorded draw back to Redis) and gives\n"
     "the first wave its rights to buy (docs/fairness.md).\n"
     "  --id N               activity id\n"
     "  --verify             recompute the draw from the revealed seed and the stored\n"
     "                       registrants and compare it with the recorded places (exit\n"
     "                       0 verified, 1 not); reads only the database\n" COMMON_USAGE},
    {"delete", OPENS_EXISTING, B(O_ID) | B(O_FORCE) | B(O_REDIS_ONLY), B(O_ID), cmd_delete,
     "usage: seckill activity delete --id N [--force] [--redis-only]\n"
     "Removes the activity from the database and Redis. Refused while open (exit 2),\n"
     "and while it has orders not settled (exit 1): order events in Redis not yet\n"
     "persisted, orders not paid. --force deletes it anyway: the events not persisted\n"
     "are dropped, the unpaid orders cancelled (they can no longer be paid); paid\n"
     "orders stay in the database. docs/activity.md.\n"
     "  --id N               activity id\n"
     "  --force              delete even with orders not settled\n"
     "  --redis-only         remove only its live state from Redis: for a sale this\n"
     "                       database does not hold, or whose live state another\n"
     "                       database preheated (what `seckill reconcile` names)\n" COMMON_USAGE},
};
#define N_SUBS (sizeof subs / sizeof subs[0])

static int usage(FILE *f)
{
    fprintf(f, "usage: seckill activity <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < N_SUBS; i++)
        fprintf(f, "  %s\n", subs[i].name);
    fprintf(f, "\n`seckill activity <command> --help` for its options.\n"
               "Exit codes: 0 done, 1 Redis or database failure, 2 bad arguments or "
               "refused (nothing changed).\n");
    return f == stdout ? SK_EXIT_OK : SK_EXIT_USAGE;
}

int sk_cli_activity(int argc, char **argv)
{
    if (argc < 2) return usage(stderr);
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help"))
        return usage(stdout);
    const struct sub *sc = NULL;
    for (size_t i = 0; i < N_SUBS; i++)
        if (!strcmp(argv[1], subs[i].name)) sc = &subs[i];
    if (!sc) {
        sk_cli_usage_error("activity: unknown command '%s'", argv[1]);
        return usage(stderr);
    }
    struct sk_settings *s =
        sk_settings_new(sc->name, sc->opens == OPENS_NOTHING ? 0 : SK_USE_ACTIVITY, flag_defs,
                        O_COUNT, sc->allowed);
    if (!s) return sk_cli_runtime_error("activity: out of memory");
    char cmd[48];
    snprintf(cmd, sizeof cmd, "activity %s", sc->name);
    s->cmd = cmd;
    int rc = sk_settings_load(s, argc - 1, argv + 1);
    if (rc == 0 && s->help) {
        fputs(sc->usage, stdout);
        sk_settings_free(s);
        return SK_EXIT_OK;
    }
    struct ctx c;
    memset(&c, 0, sizeof c);
    c.sc = sc;
    c.cfg = &s->cfg;
    for (int k = 0; k < O_COUNT; k++)
        if ((c.val[k] = s->val[k]) != NULL) c.seen |= B(k);
    for (int k = 0; rc == 0 && k < O_COUNT; k++)
        if ((sc->required & B(k)) && !has(&c, k))
            rc = sk_cli_usage_error("activity %s: missing %s (see seckill activity %s --help)",
                                    sc->name, flag_defs[k].name, sc->name);
    if (rc == 0 && has(&c, O_ID)) rc = parse_id(&c);
    if (rc == 0) rc = sc->run(&c);
    sk_redis_free(c.r);
    sk_store_close(c.st);
    sk_settings_free(s);
    return rc;
}
