/* test_store_identity.c - the store's identity carried in Redis
 * (docs/design.md, "The store's identity"): a sale preheated from one
 * database is never sold by the nodes of another, whose workers would
 * never persist its orders.
 *
 * End to end with the real binary: a sale made with the CLI on store A
 * (explicitly, and the README's old way: no --db, in another directory),
 * `seckill serve` on store B against the same private redis-server; no
 * purchase is answered 200, nothing enters the stream, `seckill reconcile`
 * on either store exits 1 naming the activity and the command that fixes
 * it, /readyz is degraded naming it, dashboard.json and /metrics list it,
 * and the named fix works. Then the parts one by one against the real
 * Redis: preheat refusing another store's key set (CLI and admin API), a
 * key set preheated before identities taking the first caller's, the
 * worker and the sweeper of a store that lists an activity another store
 * preheated leaving it alone, a segmented preheat stamping every segment,
 * and malformed identities refused by the script. */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "core/clock.h"
#include "core/codes.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/activity.h"
#include "engine/keys.h"
#include "engine/live_acts.h"
#include "engine/stock.h"
#include "orders/order_worker.h"
#include "orders/sweeper.h"
#include "store/store.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/http_client.h"
#include "support/store_faults.h"

#define ADMIN "Authorization: Bearer " SK_TH_ADMIN_TOKEN "\r\n"

/* ---- helpers ---- */

/* A directory of its own under the test's temporary root. */
static void subdir(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", sk_th_tmpdir(), name);
    CHECK_MSG(mkdir(out, 0755) == 0, "mkdir %s", out);
}

/* Runs the binary in directory dir with args (one string, the shell's
 * words: no quoting needed for the tests' arguments), without the
 * SECKILL_* environment, stdout and stderr into out. The exit code. */
static int run_in(const char *dir, char *out, size_t cap, const char *args)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cd %s && env -u SECKILL_DB -u SECKILL_REDIS %s %s 2>&1", dir,
             sk_th_seckill_bin(), args);
    int st = sk_th_sh(cmd, out, cap);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void has(const char *out, const char *want, int line)
{
    if (!strstr(out, want)) sk_th_fail(__FILE__, line, "output lacks '%s':\n%s", want, out);
}
#define HAS(out, want) has(out, want, __LINE__)

/* The identity of the store at spec. */
static void identity_of(const char *spec, char id[SK_STORE_IDENTITY_MAX])
{
    sk_store *st;
    char err[256];
    CHECK_MSG(sk_store_open(&st, spec, err, sizeof err) == 0, "open %s: %s", spec, err);
    CHECK_EQ(sk_store_identity(st, id, SK_STORE_IDENTITY_MAX), 0);
    sk_store_close(st);
}

/* A field of the activity's own meta ("" when absent). */
static void meta_field(sk_redis *r, uint64_t aid, int seg, const char *field, char *out, size_t cap)
{
    struct sk_keys k;
    sk_keys_seg(&k, aid, seg);
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(r, &rep, "HGET %s %s", k.meta, field), 0);
    snprintf(out, cap, "%s", rep->type == REDIS_REPLY_STRING ? rep->str : "");
    freeReplyObject(rep);
}

static long long redis_int(sk_redis *r, const char *fmt, const char *key)
{
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(r, &rep, fmt, key), 0);
    long long v = rep->type == REDIS_REPLY_INTEGER  ? rep->integer
                  : rep->type == REDIS_REPLY_STRING ? strtoll(rep->str, NULL, 10)
                                                    : -1;
    freeReplyObject(rep);
    return v;
}

/* A serve on its own SQLite store (B) against redis_url, two HTTP
 * processes, an ops listener. */
static void serve_b(struct sk_th_serve *s, const char *redis_url, char *ops, size_t cap)
{
    snprintf(ops, cap, "127.0.0.1:%d", sk_th_free_port());
    sk_th_serve_start(s, redis_url,
                      (const char *const[]){"--ops-listen", ops, "--processes", "2", NULL});
}

/* GET path on port into r (a fresh connection). */
static int get(int port, const char *path, struct sk_th_resp *r)
{
    struct sk_th_http c;
    sk_th_http_open(&c, port);
    int st = sk_th_http_req(&c, "GET", path, NULL, NULL, r);
    sk_th_http_close(&c);
    return st;
}

/* Polls /readyz (on ops_port) until it is degraded and names activity
 * aid with reason; fails after 20 s. */
static void readyz_names(int ops_port, uint64_t aid, const char *reason)
{
    struct sk_th_resp *r = sk_th_resp_new();
    char want_id[48], want_reason[64];
    snprintf(want_id, sizeof want_id, "\"id\":%" PRIu64 ",", aid);
    snprintf(want_reason, sizeof want_reason, "\"reason\":\"%s\"", reason);
    int64_t deadline = sk_mono_ms() + 20000;
    for (;;) {
        int st = get(ops_port, "/readyz", r);
        if (st == 200 && strstr(r->body, "\"status\":\"degraded\"") && strstr(r->body, want_id) &&
            strstr(r->body, want_reason))
            break;
        CHECK_MSG(sk_mono_ms() < deadline, "/readyz never named activity %" PRIu64 ": %d %s", aid,
                  st, r->body);
        sk_th_nap_ms(100);
    }
    HAS(r->body, "--redis-only");
    free(r);
}

/* Polls dashboard.json and /metrics until both list activity aid as an
 * orphan for reason (or, listed 0, until dashboard.json lists none and
 * /metrics counts none). */
static void ops_list(int ops_port, uint64_t aid, const char *reason, int listed)
{
    static char body[1 << 20];
    char want[64], metric[160];
    snprintf(want, sizeof want, "\"id\":%" PRIu64 ",\"reason\":\"%s\"", aid, reason);
    snprintf(metric, sizeof metric,
             "seckill_activity_orphan{activity=\"%" PRIu64 "\",reason=\"%s\"} 1", aid, reason);
    int64_t deadline = sk_mono_ms() + 20000;
    for (;;) {
        int ok = sk_th_http_get_big(ops_port, "/dashboard.json", body, sizeof body) == 200;
        int dash = ok && strstr(body, want) != NULL;
        int none = ok && strstr(body, "\"orphans\":[]") != NULL;
        ok = sk_th_http_get_big(ops_port, "/metrics", body, sizeof body) == 200;
        int met = ok && strstr(body, metric) != NULL;
        int met_none = ok && strstr(body, "\nseckill_orphan_activities 0\n") != NULL;
        if (listed ? dash && met : none && met_none) break;
        CHECK_MSG(sk_mono_ms() < deadline, "the ops views never %s activity %" PRIu64 " (dash %d)",
                  listed ? "listed" : "stopped listing", aid, listed ? dash : none);
        sk_th_nap_ms(100);
    }
}

/* n purchases of aid by users first.. on port: every answer must be 503
 * store_mismatch (none 200). */
static void purchases_refused(int port, uint64_t aid, uint64_t first, int n)
{
    struct sk_th_http c;
    sk_th_http_open(&c, port);
    struct sk_th_resp *r = sk_th_resp_new();
    char path[96], hdr[64];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", aid);
    for (int i = 0; i < n; i++) {
        snprintf(hdr, sizeof hdr, "X-User-Id: %" PRIu64 "\r\n", first + (uint64_t)i);
        int st = sk_th_http_req(&c, "POST", path, hdr, "{\"quantity\":1}", r);
        CHECK_MSG(st == 503 && strstr(r->body, "\"store_mismatch\""), "purchase %d: %d %s", i, st,
                  r->body);
    }
    free(r);
    sk_th_http_close(&c);
}

/* Nothing of aid was sold: stock whole, no stream entry, no buyer. */
static void nothing_sold(sk_redis *r, uint64_t aid, long long stock)
{
    struct sk_keys k;
    sk_keys_for(&k, aid);
    CHECK_EQ(redis_int(r, "GET %s", k.stock), stock);
    CHECK_EQ(redis_int(r, "XLEN %s", k.orders), 0);
    CHECK_EQ(redis_int(r, "HLEN %s", k.buyers), 0);
}

/* ---- the operator's mistake, end to end ---- */

/* The sale made on store A at dir (the CLI's --db given when db is not
 * NULL, else none: ./seckill.db there), served by a node on store B. */
static void preheated_elsewhere(const char *dir, const char *db_flag)
{
    struct sk_th_redis rs;
    sk_th_redis_start(&rs, NULL); /* its own: a plain reconcile sees every activity */
    uint64_t aid = sk_th_unique_id();
    char out[16384], args[1024], spec_a[512];
    snprintf(spec_a, sizeof spec_a, "sqlite:%s/seckill.db", dir);
    const char *dbf = db_flag ? db_flag : "";
    snprintf(args, sizeof args,
             "activity create --id %" PRIu64 " --name stray --stock 10 --limit 2 --redis %s %s",
             aid, rs.url, dbf);
    CHECK_MSG(run_in(dir, out, sizeof out, args) == 0, "%s", out);
    snprintf(args, sizeof args, "activity preheat --id %" PRIu64 " --redis %s %s", aid, rs.url,
             dbf);
    CHECK_MSG(run_in(dir, out, sizeof out, args) == 0, "%s", out);
    snprintf(args, sizeof args, "activity open --id %" PRIu64 " --redis %s %s", aid, rs.url, dbf);
    CHECK_MSG(run_in(dir, out, sizeof out, args) == 0, "%s", out);
    CHECK_MSG(access(spec_a + 7, F_OK) == 0, "the CLI's store %s was not made", spec_a + 7);

    struct sk_th_serve s;
    char ops[64];
    serve_b(&s, rs.url, ops, sizeof ops);
    char id_a[SK_STORE_IDENTITY_MAX], id_b[SK_STORE_IDENTITY_MAX];
    identity_of(spec_a, id_a);
    identity_of(s.db, id_b);
    CHECK_MSG(strcmp(id_a, id_b) != 0, "two stores, one identity %s", id_a);

    /* not one purchase admitted: nothing in the stream nobody persists */
    purchases_refused(s.port, aid, 1, 20);
    sk_redis *r = sk_th_redis_new(rs.url, 1000, 2000);
    nothing_sold(r, aid, 10);
    char f[64];
    meta_field(r, aid, SK_SEG_NONE, "store_id", f, sizeof f);
    CHECK_STR(f, id_a);
    meta_field(r, aid, SK_SEG_NONE, "store_refused", f, sizeof f);
    CHECK_STR(f, id_b);

    /* the node says so: /readyz, dashboard.json, /metrics; the log once */
    readyz_names(s.ops_port, aid, "unknown_to_database");
    ops_list(s.ops_port, aid, "unknown_to_database", 1);
    char grep[512];
    snprintf(grep, sizeof grep, "grep -c 'activity %" PRIu64 " was preheated from another' %s", aid,
             s.log);
    sk_th_sh(grep, out, sizeof out);
    CHECK_MSG(atoi(out) >= 1 && atoi(out) <= 2, "log lines (one per HTTP process at most): %s",
              out);

    /* reconcile, plain, on either store: exit 1 naming the activity */
    char idtxt[24];
    snprintf(idtxt, sizeof idtxt, "%" PRIu64, aid);
    snprintf(args, sizeof args, "reconcile --redis %s --db %s", rs.url, s.db);
    CHECK_EQ(run_in(dir, out, sizeof out, args), 1);
    HAS(out, idtxt);
    HAS(out, "DRIFT db_missing");
    HAS(out, id_a);
    HAS(out, "--redis-only");
    snprintf(args, sizeof args, "reconcile --redis %s %s", rs.url, dbf);
    CHECK_EQ(run_in(dir, out, sizeof out, args), 1);
    HAS(out, idtxt);
    HAS(out, "DRIFT store");
    HAS(out, id_b);

    /* the fix it names: the stray live state removed, the sale made again
     * on this node's store, and it sells and persists */
    snprintf(args, sizeof args, "activity delete --id %" PRIu64 " --redis-only --redis %s --db %s",
             aid, rs.url, s.db);
    CHECK_EQ(run_in(dir, out, sizeof out, args), 2); /* open: refused, nothing changed */
    HAS(out, "--force");
    nothing_sold(r, aid, 10); /* still there */
    snprintf(args, sizeof args,
             "activity delete --id %" PRIu64 " --redis-only --force --redis %s --db %s", aid,
             rs.url, s.db);
    CHECK_MSG(run_in(dir, out, sizeof out, args) == 0, "%s", out);
    char meta[64];
    snprintf(meta, sizeof meta, "sk:{a%" PRIu64 "}:meta", aid);
    CHECK_EQ(redis_int(r, "EXISTS %s", meta), 0);
    snprintf(args, sizeof args,
             "activity create --id %" PRIu64 " --name here --stock 10 --limit 2 --redis %s --db %s",
             aid, rs.url, s.db);
    CHECK_MSG(run_in(dir, out, sizeof out, args) == 0, "%s", out);
    snprintf(args, sizeof args, "activity preheat --id %" PRIu64 " --redis %s --db %s", aid, rs.url,
             s.db);
    CHECK_MSG(run_in(dir, out, sizeof out, args) == 0, "%s", out);
    snprintf(args, sizeof args, "activity open --id %" PRIu64 " --redis %s --db %s", aid, rs.url,
             s.db);
    CHECK_MSG(run_in(dir, out, sizeof out, args) == 0, "%s", out);
    struct sk_th_http c;
    sk_th_http_open(&c, s.port);
    struct sk_th_resp *resp = sk_th_resp_new();
    char path[96];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", aid);
    CHECK_EQ(sk_th_http_req(&c, "POST", path, "X-User-Id: 7\r\n", NULL, resp), 200);
    sk_th_http_close(&c);
    free(resp);
    ops_list(s.ops_port, aid, "", 0);
    /* persisted by this node's worker, then consistent (the old store's
     * note of refused purchases aside: that store no longer holds it here) */
    int64_t deadline = sk_mono_ms() + 20000;
    for (;;) {
        snprintf(args, sizeof args, "reconcile --redis %s --db %s --activity %" PRIu64, rs.url,
                 s.db, aid);
        if (run_in(dir, out, sizeof out, args) == 0) break;
        CHECK_MSG(sk_mono_ms() < deadline, "never consistent:\n%s", out);
        sk_th_nap_ms(200);
    }
    sk_redis_free(r);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
    sk_th_redis_stop(&rs, 1);
}

SK_TEST_T(store_identity_a_sale_preheated_from_another_store_is_never_sold_and_is_named, 120)
{
    char dir[400], db[460];
    subdir(dir, sizeof dir, "ops");
    snprintf(db, sizeof db, "--db sqlite:%s/seckill.db", dir);
    preheated_elsewhere(dir, db);
}

/* The README's old steps: serve on its store, the CLI run without --db in
 * another directory (it makes ./seckill.db there and preheats from it). */
SK_TEST_T(store_identity_the_readme_old_steps_cli_without_db_elsewhere_sell_nothing, 120)
{
    char dir[400];
    subdir(dir, sizeof dir, "home");
    preheated_elsewhere(dir, NULL);
}

/* ---- the parts ---- */

/* An activity defined in store st, preheated with identity store_id
 * ("" none) and opened: its id. */
static uint64_t sale_on(sk_store *st, sk_redis *r, const char *store_id, int64_t stock,
                        int segments)
{
    struct sk_activity a;
    sk_th_activity_live(&a, "identity", stock, segments, 60000);
    a.per_user_limit = 5;
    sk_activity_apply_defaults(&a);
    CHECK_EQ(sk_store_activity_insert(st, &a), 0);
    struct sk_stock_def d;
    sk_activity_stock_def(&a, &d);
    snprintf(d.store_id, sizeof d.store_id, "%s", store_id);
    int rc;
    CHECK_EQ(sk_stock_preheat(r, &d, 0, &rc, NULL), 0);
    CHECK_EQ(rc, SK_RC_PREHEATED);
    CHECK_EQ(sk_stock_set_open(r, a.id, 1, &rc), 0);
    CHECK_EQ(rc, SK_RC_OK);
    return a.id;
}

static sk_store *fresh_store(const char *name, char *spec, size_t cap)
{
    snprintf(spec, cap, "sqlite:%s/%s", sk_th_tmpdir(), name);
    sk_store *st;
    char err[256];
    CHECK_MSG(sk_store_open(&st, spec, err, sizeof err) == 0, "%s", err);
    return st;
}

/* One purchase through purchase_batch with the caller's identity. */
static int buy_as(sk_redis *r, uint64_t aid, uint64_t uid, const char *store_id,
                  struct sk_admission *res)
{
    struct sk_keys k;
    sk_keys_for(&k, aid);
    struct sk_batch_head h = {.label = k.label, .store_id = store_id};
    struct sk_purchase p = {.user_id = uid, .quantity = 1};
    int64_t left;
    return sk_stock_batch_call(r, &k, &h, &p, 1, res, &left);
}

SK_TEST(store_identity_admission_checks_the_callers_identity_in_the_script)
{
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 1000, 2000);
    char spec[460], a_id[SK_STORE_IDENTITY_MAX];
    sk_store *st = fresh_store("a.db", spec, sizeof spec);
    CHECK_EQ(sk_store_identity(st, a_id, sizeof a_id), 0);
    uint64_t aid = sale_on(st, r, a_id, 10, 1);
    struct sk_admission res;
    CHECK_EQ(buy_as(r, aid, 1, a_id, &res), 0);
    CHECK_EQ(res.rc, SK_RC_OK);
    CHECK_EQ(buy_as(r, aid, 2, "0123456789abcdef", &res), 0);
    CHECK_EQ(res.rc, SK_RC_OTHER_STORE);
    CHECK_EQ(buy_as(r, aid, 3, NULL, &res), 0); /* a caller that knows none: not checked */
    CHECK_EQ(res.rc, SK_RC_OK);
    struct sk_stock_state s;
    CHECK_EQ(sk_stock_state(r, aid, &s), 0);
    CHECK_EQ(s.remaining, 8);
    CHECK_EQ(s.adm, 2);
    /* a malformed identity is the caller's bug: refused whole */
    CHECK_EQ(buy_as(r, aid, 4, "ZZZZZZZZZZZZZZZZ", &res), SK_ESCRIPT);
    CHECK_EQ(buy_as(r, aid, 4, "0123", &res), SK_EINVAL);
    CHECK_EQ(sk_stock_state(r, aid, &s), 0);
    CHECK_EQ(s.remaining, 8);

    /* preheated before identities: the first caller's is taken, then held */
    struct sk_stock_def d = {.id = sk_th_unique_id(),
                             .initial = 5,
                             .per_user_limit = 5,
                             .max_per_order = 1,
                             .start_ms = sk_wall_ms() - 1000,
                             .end_ms = sk_wall_ms() + 3600000};
    int rc;
    CHECK_EQ(sk_stock_preheat(r, &d, 0, &rc, NULL), 0);
    CHECK_EQ(sk_stock_set_open(r, d.id, 1, &rc), 0);
    char f[32];
    meta_field(r, d.id, SK_SEG_NONE, "store_id", f, sizeof f);
    CHECK_STR(f, "");
    CHECK_EQ(buy_as(r, d.id, 1, "00000000000000aa", &res), 0);
    CHECK_EQ(res.rc, SK_RC_OK);
    meta_field(r, d.id, SK_SEG_NONE, "store_id", f, sizeof f);
    CHECK_STR(f, "00000000000000aa");
    CHECK_EQ(buy_as(r, d.id, 2, "00000000000000bb", &res), 0);
    CHECK_EQ(res.rc, SK_RC_OTHER_STORE);
    sk_store_close(st);
    sk_redis_free(r);
}

SK_TEST(store_identity_preheat_from_another_store_is_refused_and_changes_nothing)
{
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 1000, 2000);
    char spec_a[460], spec_b[460], a_id[SK_STORE_IDENTITY_MAX], out[4096], idt[24];
    sk_store *a = fresh_store("a.db", spec_a, sizeof spec_a);
    sk_store *b = fresh_store("b.db", spec_b, sizeof spec_b);
    CHECK_EQ(sk_store_identity(a, a_id, sizeof a_id), 0);
    uint64_t aid = sale_on(a, r, a_id, 10, 1);
    CHECK_EQ(sk_stock_set_open(r, aid, 0, (int[]){0}), 0);
    /* store B holds a definition of the same id */
    struct sk_activity def;
    CHECK_EQ(sk_store_activity_get(a, aid, &def), 0);
    def.stock = 50;
    CHECK_EQ(sk_store_activity_insert(b, &def), 0);
    snprintf(idt, sizeof idt, "%" PRIu64, aid);
    for (int forced = 0; forced < 2; forced++) {
        const char *args[] = {"preheat", "--id", idt, forced ? "--force" : NULL, NULL};
        int rc = sk_th_run_with_db(out, sizeof out, "activity", args, sk_th_redis_url(), spec_b);
        CHECK_MSG(rc == 1, "exit %d: %s", rc, out);
        HAS(out, "another database");
        HAS(out, "--redis-only");
        struct sk_stock_state s;
        CHECK_EQ(sk_stock_state(r, aid, &s), 0);
        CHECK_EQ(s.initial, 10);
        CHECK_EQ(s.remaining, 10);
        char f[32];
        meta_field(r, aid, SK_SEG_NONE, "store_id", f, sizeof f);
        CHECK_STR(f, a_id);
    }
    /* the admin API of a node on store B: 409, nothing written */
    struct sk_th_serve s;
    sk_th_serve_start(&s, sk_th_redis_url(), (const char *const[]){"--db", spec_b, NULL});
    struct sk_th_http c;
    sk_th_http_open(&c, s.port);
    struct sk_th_resp *resp = sk_th_resp_new();
    char path[96];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/preheat", aid);
    int st = sk_th_http_req(&c, "POST", path, ADMIN, "{\"force\":true}", resp);
    CHECK_MSG(st == 409 && strstr(resp->body, "\"store_mismatch\""), "%d %s", st, resp->body);
    struct sk_stock_state live;
    CHECK_EQ(sk_stock_state(r, aid, &live), 0);
    CHECK_EQ(live.initial, 10);
    free(resp);
    sk_th_http_close(&c);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
    sk_store_close(a);
    sk_store_close(b);
    sk_redis_free(r);
}

SK_TEST(store_identity_a_segmented_preheat_stamps_every_segment_and_the_base)
{
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 1000, 2000);
    char spec[460], a_id[SK_STORE_IDENTITY_MAX];
    sk_store *st = fresh_store("a.db", spec, sizeof spec);
    CHECK_EQ(sk_store_identity(st, a_id, sizeof a_id), 0);
    uint64_t aid = sale_on(st, r, a_id, 40, 4);
    char f[32];
    meta_field(r, aid, SK_SEG_NONE, "store_id", f, sizeof f);
    CHECK_STR(f, a_id);
    for (int i = 0; i < 4; i++) {
        meta_field(r, aid, i, "store_id", f, sizeof f);
        CHECK_STR(f, a_id);
    }
    /* a purchase of another store is refused at the buyer's home segment,
     * and no borrow moves stock for it */
    struct sk_purchase p = {.user_id = 9, .quantity = 1};
    struct sk_admission res;
    for (int i = 0; i < 4; i++) {
        struct sk_keys k;
        sk_keys_seg(&k, aid, i);
        struct sk_batch_head h = {.label = k.label, .store_id = "0123456789abcdef"};
        int64_t left;
        CHECK_EQ(sk_stock_batch_call(r, &k, &h, &p, 1, &res, &left), 0);
        CHECK_EQ(res.rc, SK_RC_OTHER_STORE);
    }
    struct sk_stock_state s;
    CHECK_EQ(sk_stock_state(r, aid, &s), 0);
    CHECK_EQ(s.remaining, 40);
    /* Redis's activities, as reconcile walks them, carry the owner */
    struct sk_live_act *live;
    size_t n;
    CHECK_EQ(sk_live_acts(r, &live, &n), 0);
    const struct sk_live_act *la = sk_live_acts_find(live, n, aid);
    CHECK(la != NULL);
    CHECK_STR(la->store_id, a_id);
    CHECK_EQ(la->segments, 4);
    CHECK_EQ(la->open, 1);
    free(live);
    sk_store_close(st);
    sk_redis_free(r);
}

/* The worker and the sweeper of store A, which lists an activity whose
 * live state store B preheated: neither touches it, each says why once,
 * and the counters show it. A key set preheated before identities is
 * claimed by the worker of the store that lists it. */
SK_TEST(store_identity_worker_and_sweeper_leave_another_stores_sale_alone)
{
    sk_log_set_level(SK_LOG_WARN);
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 1000, 2000);
    char spec[460], a_id[SK_STORE_IDENTITY_MAX];
    sk_store *st = fresh_store("a.db", spec, sizeof spec);
    CHECK_EQ(sk_store_identity(st, a_id, sizeof a_id), 0);
    uint64_t foreign = sale_on(st, r, "00000000000000bb", 10, 1);
    uint64_t legacy = sale_on(st, r, "", 10, 1);
    /* store A holds an unpaid order of the foreign sale, long expired */
    struct sk_order o;
    sk_th_order(&o, foreign, sk_wall_ms() - 7200000, 0, 5, 1);
    sk_th_persist_ok(st, &o, 1);

    struct sk_node_worker *node = calloc(1, sizeof *node);
    struct sk_worker_opts wo;
    sk_worker_opts_init(&wo);
    wo.redis_url = sk_th_redis_url();
    wo.db_spec = spec;
    wo.once = 1;
    wo.node = node;
    sk_worker *w;
    char err[256];
    CHECK_MSG(sk_worker_new(&w, &wo, err, sizeof err) == 0, "%s", err);
    CHECK_EQ(sk_worker_run(w), 0);
    CHECK_EQ(sk_node_wc_get(node, SK_WC_foreign), 1);
    struct sk_keys k;
    sk_keys_for(&k, foreign);
    redisReply *rep;
    /* Store B's preheat made the group; the worker of A never read it, so
     * no consumer of A joined it. */
    CHECK_EQ(sk_redis_cmd(r, &rep, "XINFO CONSUMERS %s %s", k.orders, SK_WORKER_GROUP), 0);
    CHECK_MSG(rep->type == REDIS_REPLY_ARRAY && rep->elements == 0,
              "the worker read another store's stream (%s)",
              rep->type == REDIS_REPLY_ERROR ? rep->str : "a consumer joined");
    freeReplyObject(rep);
    char f[32];
    meta_field(r, legacy, SK_SEG_NONE, "store_id", f, sizeof f);
    CHECK_STR(f, a_id); /* claimed by the store that lists it */
    sk_worker_free(w);

    struct sk_sweeper_opts so;
    sk_sweeper_opts_init(&so);
    so.redis_url = sk_th_redis_url();
    so.db_spec = spec;
    so.node = node;
    sk_sweeper *sw;
    CHECK_MSG(sk_sweeper_new(&sw, &so, err, sizeof err) == 0, "%s", err);
    struct sk_sweep_result res;
    for (int pass = 0; pass < 2; pass++) {
        CHECK_EQ(sk_sweeper_pass(sw, sk_wall_ms(), &res), 0);
        CHECK_EQ(res.foreign, 1);
        CHECK_EQ(res.cancelled, 0);
    }
    CHECK_EQ(sk_node_wc_get(node, SK_WC_sweep_foreign), 2);
    struct sk_order got;
    CHECK_EQ(sk_store_order_get(st, o.order_id, &got), 0);
    CHECK_EQ(got.status, SK_ORDER_CREATED);
    struct sk_stock_state s;
    CHECK_EQ(sk_stock_state(r, foreign, &s), 0);
    CHECK_EQ(s.remaining, 10);
    sk_sweeper_free(sw);
    free(node);
    sk_store_close(st);
    sk_redis_free(r);
}

SK_TEST(store_identity_meta_keys_name_their_activity)
{
    uint64_t id = 0;
    CHECK_EQ(sk_keys_meta_id("sk:{a1003}:meta", 15, &id), 1);
    CHECK_EQ(id, 1003);
    CHECK_EQ(sk_keys_meta_id("sk:{a1003.s2}:meta", 18, &id), 0);
    CHECK_EQ(sk_keys_meta_id("sk:{a0}:meta", 12, &id), 0);
    CHECK_EQ(sk_keys_meta_id("sk:{a01}:meta", 13, &id), 0);
    CHECK_EQ(sk_keys_meta_id("sk:{a1003}:stock", 16, &id), 0);
    CHECK_EQ(sk_keys_meta_id("sk:{a99999999999999999999}:meta", 31, &id), 0);
    CHECK_EQ(sk_live_foreign("00000000000000aa", "00000000000000bb"), 1);
    CHECK_EQ(sk_live_foreign("", "00000000000000bb"), 0);
    CHECK_EQ(sk_live_foreign("00000000000000aa", ""), 0);
    CHECK_EQ(sk_live_foreign("00000000000000aa", "00000000000000aa"), 0);
}
