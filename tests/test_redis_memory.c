/* test_redis_memory.c - Redis's memory and settings as a sale meets them
 * (docs/failover.md, "Redis settings a sale needs" and "Redis full"), on
 * real servers: a private redis-server with a small maxmemory, `seckill
 * serve --role api` (two HTTP processes), a `seckill worker` of its own
 * (stopped while Redis fills up, so its stream holds what it must
 * persist, then started again), six concurrent buyers.
 *   - at maxmemory with noeviction: purchases are answered 503 redis_full
 *     with Retry-After, logged once per interval; polls, the activity, the
 *     stats route and `seckill reconcile` keep answering; the worker goes on
 *     persisting and trimming, and memory comes back;
 *   - an evicting policy turned on at run time while Redis is full: it
 *     evicts sale keys at once; serve refuses purchases (503 redis_unsafe,
 *     /readyz names the setting and the fix) until the policy is fixed,
 *     then the rollback guard rebuilds what was evicted and the sale sells
 *     out: every 200 has its order, no order id twice (SPEC section 7);
 *   - a worker that first meets the sale when Redis is already full still
 *     reads and drains it (the group is made at preheat);
 *   - preheat refuses a Redis that evicts, with the reason; behind a
 *     Sentinel, a replica that would evict once promoted is refused too. */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "engine/keys.h"
#include "engine/stock.h"
#include "redis/redis_conn.h"
#include "store/store.h"
#include "support/api_worker_env.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/http_client.h"
#include "support/sale_env.h"
#include "support/sentinel_harness.h"

#define STOCK 60000
#define LIMIT 1
#define PROBE_USER 199000 /* our own purchases' buyers, apart from the sale's */

/* GET or POST path; the status, the response into r. */
static int call(int port, const char *method, const char *path, const char *hdr,
                struct sk_th_resp *r)
{
    return sk_th_http_once(port, method, path, hdr, NULL, r);
}

/* The value of a /metrics line that starts with prefix (-1: none). */
static double metric(int port, const char *prefix)
{
    static char body[1 << 18]; /* the whole exposition, not a first page of it */
    double v = -1;
    if (sk_th_http_get_big(port, "/metrics", body, sizeof body) == 200) {
        size_t n = strlen(prefix);
        for (const char *p = body; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
            if (!strncmp(p, prefix, n) && p[n] == ' ') v = atof(p + n + 1);
    }
    return v;
}

static int64_t info_field(sk_redis *r, const char *section, const char *field)
{
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(r, &rep, "INFO %s", section), 0);
    int64_t v = -1;
    const char *p = strstr(rep->str, field);
    if (p) v = strtoll(p + strlen(field) + 1, NULL, 10);
    freeReplyObject(rep);
    return v;
}

static void config_set(sk_redis *r, const char *name, const char *value)
{
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(r, &rep, "CONFIG SET %s %s", name, value), 0);
    CHECK_MSG(rep->type == REDIS_REPLY_STATUS, "CONFIG SET %s %s: %s", name, value,
              rep->type == REDIS_REPLY_ERROR ? rep->str : "?");
    freeReplyObject(rep);
}

/* Lines of the file at path that hold needle. */
static int log_lines(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    CHECK(f);
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

struct full_want {
    int port;
    const char *reason;
    long above; /* refusals for reason already counted (0: any refusal) */
};

static int refused_for(void *arg)
{
    const struct full_want *w = arg;
    char prefix[96];
    snprintf(prefix, sizeof prefix, "seckill_refusals_total{reason=\"%s\"}", w->reason);
    return metric(w->port, prefix) > w->above;
}

struct log_want {
    const char *path, *needle;
    int n;
};

static int log_has(void *arg)
{
    const struct log_want *w = arg;
    return log_lines(w->path, w->needle) >= w->n;
}

static int readyz_unsafe(void *arg)
{
    struct sk_th_resp *r = sk_th_resp_new();
    int st = call(*(int *)arg, "GET", "/readyz", NULL, r);
    int yes = st == 503 && strstr(r->body, "redis_unsafe") && strstr(r->body, "allkeys-lru") &&
              strstr(r->body, "CONFIG SET maxmemory-policy noeviction");
    free(r);
    return yes;
}

static int readyz_ready(void *arg)
{
    struct sk_th_resp *r = sk_th_resp_new();
    int st = call(*(int *)arg, "GET", "/readyz", NULL, r);
    free(r);
    return st == 200;
}

static int sold_out(void *arg)
{
    return atomic_load(&((struct sale *)arg)->sold_out_seen);
}

/* A sale on a Redis of 6 MB that does not evict: serve, Redis, the
 * buyers recording their answers (a worker unless no_worker); the
 * activity's id. */
static uint64_t small_redis_sale(struct aw_env *e, struct sale *s, int no_worker)
{
    const char *conf[] = {"--maxmemory", "6mb", "--maxmemory-policy", "noeviction", NULL};
    aw_start(e, conf);
    if (no_worker) aw_worker_stop(e);
    uint64_t aid = sale_activity(e->v.port, 0, STOCK, LIMIT, 1);
    sale_start_recording(s, e->v.port, aid, SALE_MAX_USERS - 2000, LIMIT, SALE_THREADS, STOCK + 100,
                         20);
    sale_log_sale(s);
    return aid;
}

/* Entries in the activity's order stream. */
static long long stream_len(sk_redis *r, uint64_t aid)
{
    struct sk_keys k;
    sk_keys_for(&k, aid);
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(r, &rep, "XLEN %s", k.orders), 0);
    long long n = rep->integer;
    freeReplyObject(rep);
    return n;
}

SK_TEST_T(redis_memory_full_answers_503_reads_work_then_an_evicting_policy_is_refused_and_healed,
          420)
{
    /* ---- full: 503 redis_full, reads go on ---- */
    struct aw_env e;
    struct sale s;
    uint64_t aid = small_redis_sale(&e, &s, 0);
    struct sk_th_serve v = e.v;
    struct sk_th_redis rs = e.rs;
    sk_redis *r = e.r;
    struct sale_ok_want some = {&s, 2000};
    sale_wait(sale_ok_above, &some, 60000, "2000 200s");
    /* from here the stream keeps what the buyers buy */
    aw_worker_stop(&e);
    struct full_want full = {v.port, "redis_full", 0};
    sale_wait(refused_for, &full, 120000, "purchases refused redis_full");
    int64_t t_full = sk_mono_ms();
    sk_th_nap_ms(3000); /* the buyers go on meeting it */
    /* one purchase of ours while full: the answer a buyer gets */
    struct sk_th_resp *rp = sk_th_resp_new();
    char path[128], ra[16] = "";
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", aid);
    int got = 0;
    long probe_ok = 0;
    for (int i = 0; i < 200 && got != 503; i++) {
        char h[64];
        snprintf(h, sizeof h, "X-User-Id: %d\r\n", PROBE_USER + i);
        got = call(v.port, "POST", path, h, rp);
        probe_ok += got == 200;
    }
    CHECK_EQ(got, 503);
    CHECK_MSG(strstr(rp->body, "\"redis_full\""), "%s", rp->body);
    CHECK_EQ(sk_th_http_header(rp, "retry-after", ra, sizeof ra), 0);
    CHECK(atoi(ra) >= 1);
    /* reads while full: a poll of an order only Redis holds yet (the
     * worker is stopped: answered "queued" by a script, never the
     * database), the activity, the stats */
    sale_hold_at(&s, 1); /* buyers pause: Redis stays full */
    long last = atomic_load(&s.nids) - 1;
    CHECK(last >= 0);
    snprintf(path, sizeof path, "/api/v1/orders/%s", s.ids[last]);
    char uh[64];
    snprintf(uh, sizeof uh, "X-User-Id: %" PRIu64 "\r\n", s.id_user[last]);
    CHECK_MSG(call(v.port, "GET", path, uh, rp) == 200 && strstr(rp->body, "queued"),
              "poll while full: %d %s", rp->status, rp->body);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64, aid);
    CHECK_MSG(call(v.port, "GET", path, NULL, rp) == 200, "activity while full: %s", rp->body);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/stats", aid);
    CHECK_MSG(call(v.port, "GET", path, "Authorization: Bearer " SK_TH_ADMIN_TOKEN "\r\n", rp) ==
                  200,
              "stats while full: %s", rp->body);
    /* the worker persists and trims while Redis is full: the stream
     * empties, memory comes back */
    int64_t used_full = info_field(r, "memory", "used_memory");
    long long backlog = stream_len(r, aid);
    CHECK(backlog > 0);
    aw_worker_start(&e);
    sale_wait_drained(r, aid, 60000);
    char id[24], out[8192];
    snprintf(id, sizeof id, "%" PRIu64, aid);
    const char *rargs[] = {"reconcile", "--redis", rs.url, "--db", v.db, "--activity", id, NULL};
    int rrc = sk_th_run_seckill(out, sizeof out, NULL, rargs);
    CHECK_MSG(rrc == 0 && !strstr(out, "EXECABORT"), "reconcile while full: exit %d\n%s", rrc, out);
    int64_t deadline = sk_mono_ms() + 30000;
    while (info_field(r, "memory", "used_memory") >= used_full) {
        CHECK_MSG(sk_mono_ms() < deadline, "memory did not come back from %lld bytes",
                  (long long)used_full);
        sk_th_nap_ms(100);
    }
    char series[128];
    snprintf(series, sizeof series, "seckill_redis_memory_max_bytes{master=\"127.0.0.1:%d\"}",
             rs.port);
    CHECK_EQ(metric(v.port, series), 6 << 20);
    printf("    full after %ld 200s (%lld in the stream); used %lld bytes at the full mark, %lld "
           "after the trim\n",
           atomic_load(&s.ok), backlog, (long long)used_full,
           (long long)info_field(r, "memory", "used_memory"));
    /* once per interval, not per purchase */
    int lines = log_lines(v.log, "Redis is out of memory");
    long refused = (long)metric(v.port, "seckill_refusals_total{reason=\"redis_full\"}");
    long secs = (long)((sk_mono_ms() - t_full) / 1000) + 1;
    printf("    %ld purchases refused redis_full, %d log lines in %ld s\n", refused, lines, secs);
    CHECK(lines >= 1 && lines <= 2 * (secs / 10 + 1) && refused > lines);
    CHECK_EQ(log_lines(v.log, "purchase_batch: unexpected reply"), 0);

    /* ---- allkeys-lru turned on while Redis is full ---- */
    long ok_before = atomic_load(&s.ok);
    config_set(r, "maxmemory-policy", "allkeys-lru");
    /* memory pressure: a write that needs room makes Redis evict now */
    char *filler = malloc(2 << 20);
    CHECK(filler);
    memset(filler, 'x', 2 << 20);
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(r, &rep, "SET sk-test-filler %b", filler, (size_t)(2 << 20)), 0);
    freeReplyObject(rep);
    free(filler);
    int64_t evicted = info_field(r, "stats", "evicted_keys");
    CHECK_MSG(evicted > 0, "nothing evicted (%lld)", (long long)evicted);
    sale_wait(readyz_unsafe, &v.port, 10000, "/readyz naming maxmemory-policy");
    sale_hold_at(&s, 0);
    struct full_want unsafe = {v.port, "redis_unsafe", 0};
    sale_wait(refused_for, &unsafe, 10000, "purchases refused redis_unsafe");
    sk_th_nap_ms(500);
    long ok_unsafe = atomic_load(&s.ok);
    sk_th_nap_ms(500);
    CHECK_MSG(atomic_load(&s.ok) == ok_unsafe, "%ld 200s while the policy evicts",
              atomic_load(&s.ok) - ok_unsafe);
    /* each HTTP process says it once, at its next read of the settings
     * (every SK_RSET_REREAD_MS; the other may have refused "recovering"
     * till then), and not again while purchases go on being refused */
    struct log_want said = {v.log, "maxmemory-policy allkeys-lru", 2};
    sale_wait(log_has, &said, 10000, "each HTTP process to log the policy");
    long unsafe_n = (long)metric(v.port, "seckill_refusals_total{reason=\"redis_unsafe\"}");
    struct full_want more = {v.port, "redis_unsafe", unsafe_n + 50};
    sale_wait(refused_for, &more, 10000, "50 more purchases refused redis_unsafe");
    CHECK_EQ(log_lines(v.log, "maxmemory-policy allkeys-lru"), 2); /* once per HTTP process */
    printf("    allkeys-lru: %lld key(s) evicted, %ld 200s between the switch and the refusal\n",
           (long long)evicted, ok_unsafe - ok_before);

    /* ---- fixed: the evicted keys are rebuilt, the sale sells out ---- */
    CHECK_EQ(sk_redis_cmd(r, &rep, "DEL sk-test-filler"), 0);
    freeReplyObject(rep);
    config_set(r, "maxmemory-policy", "noeviction");
    config_set(r, "maxmemory", "0");
    sale_wait(readyz_ready, &v.port, 10000, "/readyz ready again");
    sale_wait(sold_out, &s, 240000, "the sale to sell out");
    sale_stop(&s);
    sale_print(&s, "full, then allkeys-lru, then fixed");
    free(rp);
    int64_t sold = aw_sale_end(&e, &s, aid, STOCK, LIMIT);
    CHECK_EQ(atomic_load(&s.ok) + probe_ok, sold);
    sale_ids_free(&s);
    aw_stop(&e);
}

/* A worker that first meets the sale after its buyers filled Redis: Redis
 * full refuses XGROUP CREATE (-OOM), so unless the group was made with the
 * key set (preheat) nothing can ever read the stream, and nothing gives
 * the memory back: the sale would stay refused redis_full for good. */
SK_TEST_T(redis_memory_a_worker_that_first_meets_the_sale_when_redis_is_full_drains_it, 300)
{
    struct aw_env e;
    struct sale s;
    /* no worker has seen the activity before Redis is full */
    uint64_t aid = small_redis_sale(&e, &s, 1);
    sk_redis *r = e.r;
    struct full_want full = {e.v.port, "redis_full", 0};
    sale_wait(refused_for, &full, 120000, "purchases refused redis_full");
    sale_hold_at(&s, 1); /* buyers pause: Redis stays full */
    long long backlog = stream_len(r, aid);
    CHECK(backlog > 0);
    /* Redis is full: a group made now would be refused. What is used moves
     * by some KiB once the buyers pause (their connections' buffers), and
     * can fall just under the mark: the mark goes to 256 KiB under what is
     * used, so Redis stays full whatever the last purchase left */
    char mark[24];
    snprintf(mark, sizeof mark, "%lld",
             (long long)(info_field(r, "memory", "used_memory") - (256 << 10)));
    config_set(r, "maxmemory", mark);
    struct sk_keys k;
    sk_keys_for(&k, aid);
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(r, &rep, "XGROUP CREATE %s probe-group 0", k.orders), 0);
    CHECK_MSG(rep->type == REDIS_REPLY_ERROR && !strncmp(rep->str, "OOM ", 4), "%s",
              rep->type == REDIS_REPLY_ERROR ? rep->str : "not refused");
    freeReplyObject(rep);
    aw_worker_start(&e);
    sale_wait_drained(r, aid, 60000);
    CHECK_EQ(sale_db_orders(e.st, aid), atomic_load(&s.ok));
    printf("    full after %ld 200s (%lld in the stream, no group read it): drained by a worker "
           "started then\n",
           atomic_load(&s.ok), backlog);
    /* room again: the sale sells out, every 200 persisted once */
    config_set(r, "maxmemory", "0");
    sale_hold_at(&s, 0);
    sale_wait(sold_out, &s, 240000, "the sale to sell out");
    sale_stop(&s);
    int64_t sold = aw_sale_end(&e, &s, aid, STOCK, LIMIT);
    CHECK_EQ(atomic_load(&s.ok), sold);
    sale_ids_free(&s);
    aw_stop(&e);
}

SK_TEST(redis_memory_preheat_refuses_an_evicting_policy_and_warns_when_the_stock_cannot_fit)
{
    struct sk_th_redis rs;
    const char *conf[] = {"--maxmemory", "8mb", "--maxmemory-policy", "volatile-lru", NULL};
    sk_th_redis_start(&rs, conf);
    char db[400], id[24], out[8192];
    snprintf(db, sizeof db, "sqlite:%s/pre.db", sk_th_tmpdir());
    uint64_t aid = sk_th_unique_id();
    snprintf(id, sizeof id, "%" PRIu64, aid);
    const char *create[] = {"activity", "create",  "--id",    id,        "--name",
                            "p",        "--stock", "1000000", "--limit", "1",
                            "--redis",  rs.url,    "--db",    db,        NULL};
    CHECK_EQ(sk_th_run_seckill(out, sizeof out, NULL, create), 0);
    const char *pre[] = {"activity", "preheat", "--id", id, "--redis", rs.url, "--db", db, NULL};
    int rc = sk_th_run_seckill(out, sizeof out, NULL, pre);
    CHECK_MSG(rc == 2 && strstr(out, "refused") && strstr(out, "volatile-lru") &&
                  strstr(out, "CONFIG SET maxmemory-policy noeviction"),
              "exit %d:\n%s", rc, out);
    sk_redis *r = sk_th_redis_new(rs.url, 2000, 5000);
    struct sk_keys k;
    sk_keys_for(&k, aid);
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(r, &rep, "EXISTS %s", k.stock), 0);
    CHECK_EQ(rep->integer, 0); /* nothing written */
    freeReplyObject(rep);
    /* fixed: preheated, with a warning that a million orders need more
     * than 8 MiB */
    config_set(r, "maxmemory-policy", "noeviction");
    rc = sk_th_run_seckill(out, sizeof out, NULL, pre);
    CHECK_MSG(rc == 0 && strstr(out, "preheated") && strstr(out, "warning") &&
                  strstr(out, "a stock of 1000000 orders needs up to"),
              "exit %d:\n%s", rc, out);
    sk_redis_free(r);
    sk_th_redis_stop(&rs, 1);
}

/* Behind a Sentinel the replicas are judged as well: a failover promotes
 * one, and an evicting replica would then evict the sale's keys. Preheat
 * names the replica's address and writes nothing; fixed, it preheats. */
SK_TEST(redis_memory_preheat_behind_a_sentinel_refuses_a_replica_that_would_evict)
{
    struct sk_sentinel_spawn ss;
    sk_th_sentinel_start(&ss, 1, NULL);
    int m = sk_th_sentinel_master(&ss), rep_i = m == 0 ? 1 : 0;
    redisReply *rep = sk_th_sentinel_cmd(&ss, rep_i, "CONFIG SET maxmemory-policy allkeys-lru");
    CHECK(rep && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    char db[400], id[24], out[8192], port[16];
    snprintf(db, sizeof db, "sqlite:%s/sen.db", sk_th_tmpdir());
    uint64_t aid = sk_th_unique_id();
    snprintf(id, sizeof id, "%" PRIu64, aid);
    snprintf(port, sizeof port, ":%d", ss.node[rep_i].port);
    const char *create[] = {"activity", "create",  "--id", id,        "--name",
                            "s",        "--stock", "100",  "--limit", "1",
                            "--redis",  ss.url,    "--db", db,        NULL};
    CHECK_EQ(sk_th_run_seckill(out, sizeof out, NULL, create), 0);
    const char *pre[] = {"activity", "preheat", "--id", id, "--redis", ss.url, "--db", db, NULL};
    int rc = sk_th_run_seckill(out, sizeof out, NULL, pre);
    CHECK_MSG(rc == 2 && strstr(out, "refused") && strstr(out, "allkeys-lru") && strstr(out, port),
              "exit %d (replica %s):\n%s", rc, port, out);
    struct sk_keys k;
    sk_keys_for(&k, aid);
    rep = sk_th_sentinel_cmd(&ss, m, "EXISTS %s", k.stock);
    CHECK(rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == 0); /* nothing written */
    freeReplyObject(rep);
    rep = sk_th_sentinel_cmd(&ss, rep_i, "CONFIG SET maxmemory-policy noeviction");
    CHECK(rep && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    rc = sk_th_run_seckill(out, sizeof out, NULL, pre);
    CHECK_MSG(rc == 0 && strstr(out, "preheated"), "exit %d:\n%s", rc, out);
    sk_th_sentinel_stop(&ss);
}
