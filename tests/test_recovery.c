/* test_recovery.c - a Redis that goes back in time never oversells
 * (docs/recovery.md), on real servers: a standalone redis-server restarted
 * empty, restarted from an `appendfsync everysec` AOF missing its last
 * writes, and restored from an older RDB snapshot during an HTTP sale with
 * the order worker running; the fence answering every purchase; a rollback
 * of one segment; the oversold path; `seckill activity recover`; and the
 * recovery scripts refusing malformed arguments. The cluster failover to a
 * lagging replica is test_recovery_cluster.c. */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/codes.h"
#include "core/error.h"
#include "engine/activity.h"
#include "engine/keys.h"
#include "engine/recovery.h"
#include "engine/segment.h"
#include "engine/stock.h"
#include "orders/order_cancel.h"
#include "orders/order_worker.h"
#include "orders/recover.h"
#include "redis/redis_conn.h"
#include "redis/script.h"
#include "store/store.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/http_client.h"
#include "support/sale_env.h"

/* ---- the standalone scenarios ------------------------------------------- */

/* Six buyers sell about 15,000 units a second, and the worker follows a
 * new activity only after up to a second: a scenario that needs persisted
 * orders before its fault holds the buyers until they are
 * (sale_hold_until_persisted; with two tests at once the sale sometimes
 * sold out first). */

/* One scenario: a private redis-server, `seckill serve --role all` (HTTP
 * processes and the order worker) on it, an activity, six buyers. */
struct env {
    struct sk_th_redis rs;
    struct sk_th_serve v;
    sk_store *st;
    sk_redis *r;
    uint64_t aid;
    int64_t stock, limit;
    struct sale s;
};

static void env_start(struct env *e, const char *const *redis_extra, const char *role,
                      int64_t stock, int64_t limit, int segments)
{
    memset(e, 0, sizeof *e);
    sk_th_redis_start(&e->rs, redis_extra);
    const char *extra[] = {"--role", role, "--processes", "2", NULL};
    setenv("LSAN_OPTIONS", "exitcode=0", 1);
    sk_th_serve_start(&e->v, e->rs.url, extra);
    sale_log_on_failure(e->v.log, e->v.port);
    sale_wait_ready(e->v.port);
    e->stock = stock;
    e->limit = limit;
    e->aid = sale_activity(e->v.port, 0, stock, limit, segments);
    e->st = sk_th_store_open(e->v.db);
    e->r = sk_th_redis_new(e->rs.url, 2000, 5000);
}

static void env_stop(struct env *e)
{
    sale_log_passed();
    CHECK_EQ(sk_th_serve_stop(&e->v, SIGTERM), 0);
    sk_redis_free(e->r);
    sk_store_close(e->st);
    sk_th_redis_stop(&e->rs, 1);
}

static int sold_out(void *arg)
{
    return atomic_load(&((struct sale *)arg)->sold_out_seen);
}

/* Waits until the buyers got a 200 after the at-th. */
static void wait_selling_again(struct sale *s, long at, int timeout_ms)
{
    struct sale_ok_want arg = {s, at};
    sale_wait(sale_ok_above, &arg, timeout_ms, "a 200 after the recovery");
}

/* The six buyers on e's activity, logged, held at hold admissions (so
 * the fault lands mid-sale however slow the persist) until the database
 * holds persisted orders. */
static void sale_until_persisted(struct env *e, long hold, int64_t persisted)
{
    sale_start(&e->s, e->v.port, e->aid, 20000, e->limit, SALE_THREADS);
    sale_log_sale(&e->s);
    sale_hold_at(&e->s, hold);
    struct sale_db_want want = {e->st, e->aid, persisted};
    char what[64];
    snprintf(what, sizeof what, "%lld persisted orders", (long long)persisted);
    sale_wait(sale_db_has, &want, 60000, what);
}

/* Each audit kind of the NULL-terminated kinds was recorded for e's
 * activity at least once. */
static void audits_seen(const struct env *e, const char *const *kinds)
{
    for (size_t i = 0; kinds[i]; i++)
        CHECK_MSG(sale_audit_count(e->st, e->aid, kinds[i]) >= 1, "no %s audit", kinds[i]);
}

static int ok_at_least(void *arg)
{
    struct sale *s = ((struct sale **)arg)[0];
    return atomic_load(&s->ok) >= (long)(intptr_t)((struct sale **)arg)[1];
}

/* The sale's end: selling again (a 200 after the at-th), sold out,
 * drained, every invariant, audit rows. */
static void env_finish(struct env *e, long at, const char *label)
{
    int64_t t0 = sk_mono_ms();
    wait_selling_again(&e->s, at, 30000);
    printf("    selling again %lld ms after the recovery began\n", (long long)(sk_mono_ms() - t0));
    sale_wait(sold_out, &e->s, 120000, "the sale to sell out");
    sale_stop(&e->s);
    sale_print(&e->s, label);
    sale_wait_drained(e->r, e->aid, 30000);
    int64_t sold =
        sale_check_invariants(e->st, e->r, e->rs.url, e->v.db, e->aid, e->stock, e->limit);
    /* sold out: every unit is held by an order that exists (no undersell) */
    CHECK_EQ(sold, e->stock);
    struct sk_stock_state st;
    CHECK_EQ(sk_stock_state(e->r, e->aid, &st), 0);
    CHECK_EQ(st.oversold, 0);
    printf("    acknowledged admissions counted lost: %lld (200s %ld - units sold %lld = %lld "
           "answered but lost)\n",
           (long long)st.lost, (long)atomic_load(&e->s.ok), (long long)sold,
           (long long)(atomic_load(&e->s.ok) - sold));
}

SK_TEST_T(recovery_redis_restarted_empty_is_fenced_rebuilt_from_the_orders_and_sells_again, 300)
{
    struct env e;
    env_start(&e, NULL, "all", 30000, 3, 1);
    sale_until_persisted(&e, 8000, 4000);
    /* Redis dies without persistence and comes back empty. */
    sk_th_redis_stop(&e.rs, 1);
    sk_th_redis_restart(&e.rs, NULL);
    sale_hold_at(&e.s, 0);
    env_finish(&e, atomic_load(&e.s.ok), "restarted empty");
    /* the buyers met the fence (503 recovering), never a closed sale */
    CHECK(atomic_load(&e.s.recovering) > 0);
    CHECK_EQ(sale_audit_count(e.st, e.aid, "recover_rebuild"), 1);
    audits_seen(&e, (const char *const[]){"recover_replay", "recover_resume", NULL});
    env_stop(&e);
}

/* The one file of an AOF directory whose name ends with suffix (Redis 7
 * multi-part AOF: appendonlydir/appendonly.aof.N.incr.aof). */
static void aof_file(const char *dir, const char *suffix, char *out, size_t cap)
{
    char d[400];
    snprintf(d, sizeof d, "%s/appendonlydir", dir);
    DIR *dp = opendir(d);
    CHECK_MSG(dp, "no %s", d);
    struct dirent *de;
    out[0] = 0;
    while ((de = readdir(dp))) {
        size_t l = strlen(de->d_name), sl = strlen(suffix);
        if (l > sl && !strcmp(de->d_name + l - sl, suffix))
            snprintf(out, cap, "%.300s/%.250s", d, de->d_name);
    }
    closedir(dp);
    CHECK_MSG(out[0], "no *%s in %s", suffix, d);
}

/* Where the stream entry holding admission number n was appended to the
 * AOF file at path: an entry's field n is its first admission's number
 * (an admission call writes one entry for all its orders), so the entry
 * whose n is the greatest not above n. */
static int64_t aof_offset_of_admission(const char *path, int64_t n)
{
    FILE *f = fopen(path, "rb");
    CHECK(f);
    struct stat sb;
    CHECK_EQ(fstat(fileno(f), &sb), 0);
    char *buf = malloc((size_t)sb.st_size + 1);
    CHECK(buf && fread(buf, 1, (size_t)sb.st_size, f) == (size_t)sb.st_size);
    fclose(f);
    buf[sb.st_size] = 0;
    static const char pat[] = "$1\r\nn\r\n$";
    int64_t best = -1, best_n = -1;
    for (const char *at = buf;
         (at = memmem(at, (size_t)(buf + sb.st_size - at), pat, sizeof pat - 1)) != NULL; at++) {
        char *end;
        long len = strtol(at + sizeof pat - 1, &end, 10);
        if (len < 1 || len > 20 || end[0] != '\r' || end[1] != '\n') continue;
        int64_t v = strtoll(end + 2, NULL, 10);
        if (v <= n && v > best_n) {
            best_n = v;
            best = at - buf;
        }
    }
    CHECK_MSG(best >= 0, "no entry of admission %" PRId64 " in %s", n, path);
    free(buf);
    return best;
}

SK_TEST_T(recovery_redis_restarted_from_an_everysec_aof_missing_its_last_writes_is_replayed, 300)
{
    const char *aof[] = {"--appendonly",
                         "yes",
                         "--appendfsync",
                         "everysec",
                         "--aof-load-truncated",
                         "yes",
                         "--auto-aof-rewrite-percentage",
                         "0",
                         NULL};
    struct env e;
    env_start(&e, aof, "all", 30000, 3, 1);
    sale_until_persisted(&e, 12000, 6000);
    sk_th_redis_stop(&e.rs, 1); /* SIGKILL: nothing flushed */
    /* The AOF misses its last writes: the tail of the incremental file is
     * cut. A crash with appendfsync everysec loses up to a second; the cut
     * is made where the admission numbered half the database's watermark
     * was written, so the loss surely covers orders the database holds
     * (the worker's detection) as well as admissions only buyers saw
     * (serve's). */
    char incr[600];
    aof_file(e.rs.dir, ".incr.aof", incr, sizeof incr);
    struct sk_mark *m;
    size_t nm;
    CHECK_EQ(sk_store_marks_list(e.st, e.aid, &m, &nm), 0);
    CHECK_EQ(nm, 1);
    int64_t wm = m[0].adm, cut = aof_offset_of_admission(incr, wm / 2);
    free(m);
    CHECK_EQ(truncate(incr, cut), 0);
    sk_th_redis_restart(&e.rs, aof);
    sale_hold_at(&e.s, 0);
    struct sk_stock_state st;
    CHECK_EQ(sk_stock_state(e.r, e.aid, &st), 0);
    int64_t persisted = sale_db_orders(e.st, e.aid);
    printf("    AOF cut at byte %lld: Redis came back with %lld admissions, the database holds "
           "%lld orders (watermark %lld)\n",
           (long long)cut, (long long)st.adm, (long long)persisted, (long long)wm);
    CHECK(st.adm < wm);
    env_finish(&e, atomic_load(&e.s.ok), "AOF cut");
    CHECK(atomic_load(&e.s.recovering) > 0);
    CHECK_EQ(sale_audit_count(e.st, e.aid, "recover_rebuild"), 0);
    audits_seen(&e, (const char *const[]){"recover_fence", "recover_replay", NULL});
    env_stop(&e);
}

/* An order worker in a thread of the test (its own connections). */
struct worker_thread {
    sk_worker *w;
    pthread_t th;
};

static void worker_start(struct worker_thread *t, const char *redis_url, const char *db, int once,
                         int guard_ms)
{
    struct sk_worker_opts o;
    sk_worker_opts_init(&o);
    o.redis_url = redis_url;
    o.db_spec = db;
    o.once = once;
    o.guard_ms = guard_ms;
    o.block_ms = 100;
    if (once) {
        t->w = sk_th_worker_new(&o);
        CHECK_EQ(sk_worker_run(t->w), 0);
        return;
    }
    t->w = sk_th_worker_thread(&o, &t->th);
}

static void worker_stop(struct worker_thread *t, int once)
{
    if (!once) {
        sk_worker_stop(t->w);
        pthread_join(t->th, NULL);
    }
    sk_worker_free(t->w);
    t->w = NULL;
}

static int fence_is(void *arg)
{
    struct env *e = arg;
    struct sk_stock_state st;
    return sk_stock_state(e->r, e->aid, &st) == 0 && !strcmp(st.fence, "rollback");
}

static void copy_file(const char *from, const char *to)
{
    char cmd[900];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
    CHECK_EQ(system(cmd), 0);
}

SK_TEST_T(recovery_redis_restored_from_an_older_rdb_snapshot_is_fenced_by_a_buyer_then_replayed,
          300)
{
    /* serve without its own worker: the only detection left once the
     * worker is stopped is the admission script's, from serve's memory */
    struct env e;
    env_start(&e, NULL, "api", 30000, 3, 1);
    struct worker_thread wt;
    worker_start(&wt, e.rs.url, e.v.db, 0, 1000);
    sale_until_persisted(&e, 16000, 3000);
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(e.r, &rep, "SAVE"), 0);
    freeReplyObject(rep);
    char dump[400], old[400];
    snprintf(dump, sizeof dump, "%s/dump.rdb", e.rs.dir);
    snprintf(old, sizeof old, "%s/dump.old", e.rs.dir);
    copy_file(dump, old);
    /* the first hold may have stopped the buyers already (a slow worker):
     * the 5,000 admissions after the snapshot need them going */
    sale_hold_at(&e.s, 0);
    sale_hold_until_persisted(&e.s, e.st, atomic_load(&e.s.ok) + 5000, 8000);
    worker_stop(&wt, 0);
    sk_th_redis_stop(&e.rs, 1);
    copy_file(old, dump); /* the restored backup */
    sk_th_redis_restart(&e.rs, NULL);
    sale_hold_at(&e.s, 0);
    /* the first purchase of a process that saw more fences the key set */
    sale_wait(fence_is, &e, 30000, "the fence set by a buyer's call");
    long at_fence = atomic_load(&e.s.ok);
    struct sk_stock_state st;
    CHECK_EQ(sk_stock_state(e.r, e.aid, &st), 0);
    long rec0 = atomic_load(&e.s.recovering);
    /* fenced, with no worker: every purchase is refused (a burst of them) */
    int64_t by = sk_mono_ms() + 20000;
    while (atomic_load(&e.s.recovering) < rec0 + 300) {
        CHECK_MSG(sk_mono_ms() < by, "no burst of 503 recovering");
        sk_th_nap_ms(5);
    }
    CHECK_EQ(atomic_load(&e.s.ok), at_fence);
    struct sk_stock_state st2;
    CHECK_EQ(sk_stock_state(e.r, e.aid, &st2), 0);
    CHECK_EQ(st2.remaining, st.remaining);
    CHECK_EQ(st2.adm, st.adm);
    /* the worker comes back: it replays and the sale resumes */
    worker_start(&wt, e.rs.url, e.v.db, 0, 1000);
    env_finish(&e, at_fence, "RDB restored");
    worker_stop(&wt, 0);
    CHECK(sale_audit_count(e.st, e.aid, "recover_replay") >= 1);
    env_stop(&e);
}

SK_TEST_T(recovery_a_fence_answers_every_purchase_503_recovering_until_the_recovery_resumes, 300)
{
    struct env e;
    env_start(&e, NULL, "all", 60000, 3, 1);
    sale_start(&e.s, e.v.port, e.aid, 40000, e.limit, SALE_THREADS);
    void *want[2] = {&e.s, (void *)(intptr_t)2000};
    sale_wait(ok_at_least, want, 60000, "2000 admissions");
    struct sk_keys k;
    sk_keys_for(&k, e.aid);
    char fence[SK_FENCE_MAX];
    long rec0 = atomic_load(&e.s.recovering);
    CHECK_EQ(sk_recovery_fence(e.r, &k, "manual", "a test holds the sale", fence), 0);
    CHECK_STR(fence, "manual");
    /* from here Redis admits nothing */
    struct sk_stock_state st;
    CHECK_EQ(sk_stock_state(e.r, e.aid, &st), 0);
    int64_t by = sk_mono_ms() + 20000;
    while (atomic_load(&e.s.recovering) < rec0 + 100) {
        CHECK_MSG(sk_mono_ms() < by, "no 503 recovering");
        sk_th_nap_ms(2);
    }
    /* every buyer has had its answers since: the 200s stop */
    long ok0 = atomic_load(&e.s.ok);
    while (atomic_load(&e.s.recovering) < rec0 + 600) {
        CHECK_MSG(sk_mono_ms() < by, "no burst of 503 recovering");
        sk_th_nap_ms(5);
    }
    CHECK_MSG(atomic_load(&e.s.ok) == ok0, "%ld 200s while fenced", atomic_load(&e.s.ok) - ok0);
    /* the worker leaves an operator's fence alone, and nothing was sold */
    struct sk_stock_state st2;
    CHECK_EQ(sk_stock_state(e.r, e.aid, &st2), 0);
    CHECK_EQ(st2.remaining, st.remaining);
    CHECK_EQ(st2.adm, st.adm);
    CHECK_STR(st2.fence, "manual");
    /* the stats route shows it */
    char path[96], body[4096];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/stats", e.aid);
    CHECK_EQ(sale_admin(e.v.port, "GET", path, NULL, body, sizeof body), 200);
    CHECK_MSG(strstr(body, "\"fence\":\"manual\"") && strstr(body, "a test holds the sale"),
              "stats: %s", body);
    /* the operator lifts it: recover --apply (nothing to replay) */
    char out[4096], id[24];
    snprintf(id, sizeof id, "%" PRIu64, e.aid);
    const char *args[] = {"activity", "recover", "--redis", e.rs.url,  "--db",
                          e.v.db,     "--id",    id,        "--apply", NULL};
    long ok_before = atomic_load(&e.s.ok);
    int rc = sk_th_run_seckill(out, sizeof out, NULL, args);
    CHECK_MSG(rc == 0, "recover exit %d:\n%s", rc, out);
    CHECK_MSG(strstr(out, "resumed"), "%s", out);
    env_finish(&e, ok_before, "fenced by hand");
    env_stop(&e);
}

/* ---- the engine-level scenarios ----------------------------------------- */

/* An open activity in the store and in Redis (stock units, limit 1). */
static uint64_t engine_activity(sk_store *st, sk_redis *r, int64_t stock, int segments)
{
    struct sk_activity a;
    sk_th_activity_live(&a, "rollback", stock, segments, 60000);
    sk_th_activity_open_in(st, r, &a);
    return a.id;
}

/* Users from..to buy one unit each through the blocking API (it passes no
 * memory of the key set: the in-script check is not armed); all admitted. */
static void buy_range(sk_redis *r, uint64_t aid, uint64_t from, uint64_t to)
{
    for (uint64_t u = from; u <= to; u++) {
        struct sk_admission ad;
        CHECK_EQ(sk_stock_purchase(r, aid, u, 1, &ad, NULL), 0);
        CHECK_MSG(ad.rc == SK_RC_OK, "user %" PRIu64 ": %s", u, sk_rc_name(ad.rc));
    }
}

/* A copy of every key of a key set (DUMP), to put back later: the Redis
 * of that moment. */
struct keys_copy {
    const char *names[9];
    redisReply *dump[9];
    int n;
};

/* Every key at once (MULTI), as a snapshot or a replica would hold them. */
static void copy_keys(sk_redis *r, const struct sk_keys *k, struct keys_copy *c)
{
    const char *names[] = {k->meta,     k->stock, k->buyers, k->ledger, k->orders,
                           k->released, k->idem,  k->xin,    k->xout};
    c->n = 9;
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(r, &rep, "MULTI"), 0);
    freeReplyObject(rep);
    for (int i = 0; i < c->n; i++) {
        c->names[i] = names[i];
        CHECK_EQ(sk_redis_cmd(r, &rep, "DUMP %s", names[i]), 0);
        freeReplyObject(rep);
    }
    CHECK_EQ(sk_redis_cmd(r, &rep, "EXEC"), 0);
    CHECK(rep->type == REDIS_REPLY_ARRAY && rep->elements == (size_t)c->n);
    for (int i = 0; i < c->n; i++) {
        c->dump[i] = rep->element[i];
        rep->element[i] = NULL;
    }
    rep->elements = 0;
    freeReplyObject(rep);
}

/* Puts the copy back, every key at once (MULTI: a real rollback leaves a
 * consistent earlier state, never half of one): Redis went back in time
 * for this key set. */
static void restore_keys(sk_redis *r, struct keys_copy *c)
{
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(r, &rep, "MULTI"), 0);
    freeReplyObject(rep);
    for (int i = 0; i < c->n; i++) {
        if (c->dump[i]->type == REDIS_REPLY_STRING)
            CHECK_EQ(sk_redis_cmd(r, &rep, "RESTORE %s 0 %b REPLACE", c->names[i], c->dump[i]->str,
                                  c->dump[i]->len),
                     0);
        else
            CHECK_EQ(sk_redis_cmd(r, &rep, "DEL %s", c->names[i]), 0);
        CHECK_MSG(rep->type == REDIS_REPLY_STATUS, "%s", rep->str);
        freeReplyObject(rep);
        freeReplyObject(c->dump[i]);
    }
    CHECK_EQ(sk_redis_cmd(r, &rep, "EXEC"), 0);
    CHECK_MSG(rep->type == REDIS_REPLY_ARRAY && rep->elements == (size_t)c->n, "EXEC failed");
    for (int i = 0; i < c->n; i++)
        CHECK_MSG(rep->element[i]->type != REDIS_REPLY_ERROR, "%s", rep->element[i]->str);
    freeReplyObject(rep);
}

/* An engine-level scenario: a private redis-server, a SQLite database
 * file of the run's directory, an open activity in both (engine_activity)
 * and its key set. */
struct lab {
    struct sk_th_redis rs;
    char db[400];
    sk_store *st;
    sk_redis *r;
    uint64_t aid;
    struct sk_keys k;
};

static void lab_start(struct lab *l, const char *file, int64_t stock, int segments)
{
    sk_th_redis_start(&l->rs, NULL);
    snprintf(l->db, sizeof l->db, "sqlite:%s/%s", sk_th_tmpdir(), file);
    l->st = sk_th_store_open(l->db);
    l->r = sk_th_redis_new(l->rs.url, 2000, 5000);
    l->aid = engine_activity(l->st, l->r, stock, segments);
    sk_keys_for(&l->k, l->aid);
}

static void lab_stop(struct lab *l)
{
    sk_redis_free(l->r);
    sk_store_close(l->st);
    sk_th_redis_stop(&l->rs, 1);
}

/* Users 1..20 buy, the key set is copied into old (the Redis of that
 * moment), users 21..60 buy, and a worker run persists the 60 orders. */
static void sell_past_a_copy(struct lab *l, struct keys_copy *old)
{
    buy_range(l->r, l->aid, 1, 20);
    copy_keys(l->r, &l->k, old);
    buy_range(l->r, l->aid, 21, 60);
    struct worker_thread wt;
    worker_start(&wt, l->rs.url, l->db, 1, 1000);
    worker_stop(&wt, 1);
}

static int cli(char *out, size_t cap, const char *a0, const char *a1, const char *redis,
               const char *db, uint64_t id, const char *extra)
{
    char ids[24];
    snprintf(ids, sizeof ids, "%" PRIu64, id);
    const char *args[12];
    int n = 0;
    args[n++] = a0;
    if (a1 && *a1) args[n++] = a1;
    args[n++] = "--redis";
    args[n++] = redis;
    args[n++] = "--db";
    args[n++] = db;
    args[n++] = strcmp(a0, "reconcile") ? "--id" : "--activity";
    args[n++] = ids;
    if (extra) args[n++] = extra;
    args[n] = NULL;
    return sk_th_run_seckill(out, cap, NULL, args);
}

/* The order of user u among the activity's orders in the store, or fails. */
static void order_of_user(sk_store *st, uint64_t aid, uint64_t u, struct sk_order *out)
{
    struct sk_order page[200];
    size_t n;
    CHECK_EQ(sk_store_orders_list(st, aid, NULL, 200, page, &n), 0);
    for (size_t i = 0; i < n; i++)
        if (page[i].user_id == u) {
            *out = page[i];
            return;
        }
    CHECK_MSG(0, "no order of user %" PRIu64, u);
}

SK_TEST_T(recovery_orders_that_do_not_fit_the_surviving_history_are_refused_paid_ones_oversold, 120)
{
    struct lab l;
    lab_start(&l, "oversold.db", 100, 1);
    char out[8192];
    struct keys_copy old;
    sell_past_a_copy(&l, &old);
    struct worker_thread wt;
    CHECK_EQ(sale_db_orders(l.st, l.aid), 60);
    /* Redis goes back to 20 sold; with every detection off (the blocking
     * API passes no memory, the worker's guard is off) it sells the 40
     * units the database already holds again, and 40 more */
    restore_keys(l.r, &old);
    buy_range(l.r, l.aid, 101, 180);
    worker_start(&wt, l.rs.url, l.db, 1, 0);
    worker_stop(&wt, 1);
    CHECK_EQ(sale_db_orders(l.st, l.aid), 140);
    /* 10 of the 40 the rolled-back Redis lost were paid meanwhile */
    for (uint64_t u = 21; u <= 30; u++) {
        struct sk_order o;
        order_of_user(l.st, l.aid, u, &o);
        int status;
        CHECK_EQ(sk_store_order_pay(l.st, o.order_id, sk_wall_ms(), &status), 0);
    }

    /* the dry run says what the replay would do, and changes nothing */
    CHECK_EQ(cli(out, sizeof out, "activity", "recover", l.rs.url, l.db, l.aid, NULL), 1);
    CHECK_MSG(strstr(out, "would put back 40 held order(s) (40 unit(s))") &&
                  strstr(out, "refuse about 30 unit(s)") && strstr(out, "oversold 10"),
              "%s", out);
    struct sk_stock_state s;
    CHECK_EQ(sk_stock_state(l.r, l.aid, &s), 0);
    CHECK_EQ(s.fenced, 0);
    CHECK_EQ(s.held, 100);
    /* the recovery: this Redis's own history (the 80 it sold since) wins;
     * the 30 unpaid orders it lost do not fit (no stock left): refused,
     * cancelled in the database; the 10 paid ones go back whatever
     * happens, sold twice: the sale stays fenced */
    CHECK_EQ(cli(out, sizeof out, "activity", "recover", l.rs.url, l.db, l.aid, "--apply"), 1);
    CHECK_MSG(strstr(out, "STILL FENCED") && strstr(out, "refused 30 unpaid order(s)"), "%s", out);
    CHECK_EQ(sk_stock_state(l.r, l.aid, &s), 0);
    CHECK_STR(s.fence, "oversold");
    CHECK_EQ(s.oversold, 10);
    CHECK_EQ(s.remaining, 0); /* never negative */
    CHECK_EQ(s.held, 110);
    CHECK_EQ(sale_audit_count(l.st, l.aid, "recover_oversold"), 1);
    CHECK_EQ(sale_audit_count(l.st, l.aid, "recover_refuse"), 1);
    for (uint64_t u = 31; u <= 60; u++) {
        struct sk_order o;
        order_of_user(l.st, l.aid, u, &o);
        CHECK_MSG(o.status == SK_ORDER_CANCELLED && o.released_ms > 0, "user %" PRIu64 ": %s", u,
                  sk_order_status_name(o.status));
        redisReply *rep;
        CHECK_EQ(sk_redis_cmd(l.r, &rep, "HGET %s %s", l.k.ledger, o.order_id), 0);
        CHECK_MSG(rep->type == REDIS_REPLY_STRING && strstr(rep->str, ":released"), "%s",
                  rep->str ? rep->str : "nil");
        freeReplyObject(rep);
    }
    struct sk_order_counts c;
    CHECK_EQ(sk_store_orders_count(l.st, l.aid, &c), 0);
    CHECK_EQ(c.orders[SK_ORDER_CANCELLED], 30);
    struct sk_admission ad;
    CHECK_EQ(sk_stock_purchase(l.r, l.aid, 999, 1, &ad, NULL), 0);
    CHECK(ad.rc != SK_RC_OK);
    /* reconcile says so, and show */
    CHECK_EQ(cli(out, sizeof out, "reconcile", "", l.rs.url, l.db, l.aid, NULL), 1);
    CHECK_MSG(strstr(out, "DRIFT oversold") && strstr(out, "DRIFT fenced"), "%s", out);
    CHECK_EQ(cli(out, sizeof out, "activity", "show", l.rs.url, l.db, l.aid, "--json"), 0);
    CHECK_MSG(strstr(out, "\"oversold\": 10") && strstr(out, "\"fence\": \"oversold\""), "%s", out);

    /* an operator cancels 10 of the orders sold twice (refunds): the units
     * given back pay the oversold units back, and the worker resumes */
    int cancelled = 0;
    for (uint64_t u = 101; u <= 110; u++) {
        struct sk_order o;
        order_of_user(l.st, l.aid, u, &o);
        struct sk_cancel_result cr;
        CHECK_EQ(sk_order_cancel(l.st, l.r, o.order_id, 0, sk_wall_ms(), &cr), 0);
        cancelled++;
    }
    CHECK_EQ(cancelled, 10);
    worker_start(&wt, l.rs.url, l.db, 1, 1000);
    worker_stop(&wt, 1);
    CHECK_EQ(sk_stock_state(l.r, l.aid, &s), 0);
    CHECK_EQ(s.fenced, 0);
    CHECK_EQ(s.oversold, 0);
    CHECK_EQ(s.remaining, 0);
    CHECK_EQ(s.held, 100);
    CHECK(sale_audit_count(l.st, l.aid, "recover_resume") >= 1);
    int rrc = cli(out, sizeof out, "reconcile", "", l.rs.url, l.db, l.aid, NULL);
    CHECK_MSG(rrc == 0, "reconcile exit %d:\n%s", rrc, out);
    lab_stop(&l);
}

/* Everything of a key set as one text, to see that a call changed nothing. */
static void key_set_text(sk_redis *r, const struct sk_keys *k, char *out, size_t cap)
{
    const char *cmds[][2] = {{"HGETALL", k->meta},   {"GET", k->stock},
                             {"HGETALL", k->buyers}, {"HGETALL", k->ledger},
                             {"XLEN", k->orders},    {"SMEMBERS", k->released}};
    size_t o = 0;
    out[0] = 0;
    for (size_t c = 0; c < sizeof cmds / sizeof cmds[0]; c++) {
        redisReply *rep;
        CHECK_EQ(sk_redis_command(r, &rep, 2, cmds[c], NULL), 0);
        if (rep->type == REDIS_REPLY_ARRAY)
            for (size_t i = 0; i < rep->elements && o < cap; i++)
                o += (size_t)snprintf(out + o, cap - o, "%s,", rep->element[i]->str);
        else if (rep->type == REDIS_REPLY_STRING && o < cap)
            o += (size_t)snprintf(out + o, cap - o, "%s;", rep->str);
        else if (rep->type == REDIS_REPLY_INTEGER && o < cap)
            o += (size_t)snprintf(out + o, cap - o, "%lld;", rep->integer);
        freeReplyObject(rep);
    }
}

/* Runs script id on k's keys with args; returns the first integer of the
 * reply (an error reply: -1). */
static long long eval_rc(sk_redis *r, enum sk_script_id id, int nkeys, const char *const *keys,
                         int nargs, const char *const *args)
{
    redisReply *rep;
    int rc = sk_script_eval(r, id, nkeys, keys, nargs, args, NULL, &rep);
    long long v = -1;
    if (rc == 0 && rep->type == REDIS_REPLY_ARRAY && rep->elements > 0 &&
        rep->element[0]->type == REDIS_REPLY_INTEGER)
        v = rep->element[0]->integer;
    if (rep) freeReplyObject(rep);
    return v;
}

SK_TEST(recovery_scripts_refuse_malformed_arguments_and_change_nothing)
{
    sk_store *st = sk_th_store_open("sqlite::memory:");
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 2000, 5000);
    uint64_t aid = engine_activity(st, r, 50, 1);
    buy_range(r, aid, 1, 3);
    struct sk_keys k;
    sk_keys_for(&k, aid);
    char before[8192], after[8192], oid[64];
    key_set_text(r, &k, before, sizeof before);
    snprintf(oid, sizeof oid, "%s-1-1", k.label);
    const char *meta[] = {k.meta};
    const char *fence_bad[][3] = {
        {"bogus", "x", NULL}, {"", "x", NULL}, {"oversold", "x", NULL}, {"manual", "x", "extra"}};
    for (size_t i = 0; i < 4; i++)
        CHECK_EQ(eval_rc(r, SK_SCRIPT_FENCE, 1, meta, fence_bad[i][2] ? 3 : 2, fence_bad[i]),
                 SK_RC_BAD_ARGUMENT);
    char long_text[260];
    memset(long_text, 'x', sizeof long_text - 1);
    long_text[sizeof long_text - 1] = 0;
    const char *fence_long[] = {"manual", long_text};
    CHECK_EQ(eval_rc(r, SK_SCRIPT_FENCE, 1, meta, 2, fence_long), SK_RC_BAD_ARGUMENT);
    const char *rkeys[] = {k.meta, k.stock, k.buyers, k.ledger, k.released, k.idem};
    char oid_b[80], oid_bad_b[80], key65[66];
    snprintf(oid_b, sizeof oid_b, "%s-1-1-0a1b2c3d", k.label);
    snprintf(oid_bad_b, sizeof oid_bad_b, "%s-1-1-0A1B2C3D", k.label);
    memset(key65, 'k', 65);
    key65[65] = 0;
    const char *replay_bad[][6] = {
        {"x1", oid, "1", "1", "h", ""},       {k.label, "9-1-1", "1", "1", "h", ""},
        {k.label, oid, "u", "1", "h", ""},    {k.label, oid, "1", "0", "h", ""},
        {k.label, oid, "1", "1", "x", ""},    {k.label, oid, "1", "1000000000", "h", ""},
        {k.label, oid, "1", "-1", "r", ""},   {k.label, oid_bad_b, "1", "1", "h", ""},
        {k.label, oid, "1", "1", "p", key65},
    };
    for (size_t i = 0; i < sizeof replay_bad / sizeof replay_bad[0]; i++)
        CHECK_EQ(eval_rc(r, SK_SCRIPT_REPLAY, 6, rkeys, 6, replay_bad[i]), SK_RC_BAD_ARGUMENT);
    CHECK_EQ(eval_rc(r, SK_SCRIPT_REPLAY, 6, rkeys, 5, replay_bad[0]), SK_RC_BAD_ARGUMENT);
    /* well formed (with a branch, paid, a key), but the key set is not
     * fenced: refused */
    const char *replay_ok[] = {k.label, oid_b, "1", "1", "p", "key-1"};
    CHECK_EQ(eval_rc(r, SK_SCRIPT_REPLAY, 6, rkeys, 6, replay_ok), -1);
    const char *skeys[] = {k.meta, k.stock, k.orders};
    const char *resume_bad[][6] = {
        {"", "", "", "", "", ""},
        {"x", "", "", "", "", ""},
        {"1", "1-", "", "", "", ""},
        {"1", "", "2", "", "", ""},
        {"1", "", "", "-1", "", ""},
        {"1", "", "", "", "1e9", ""},
        {"1", "", "", "", "", "9999999999999999"},
    };
    for (size_t i = 0; i < sizeof resume_bad / sizeof resume_bad[0]; i++)
        CHECK_EQ(eval_rc(r, SK_SCRIPT_RESUME, 3, skeys, 6, resume_bad[i]), SK_RC_BAD_ARGUMENT);
    const char *bkeys[] = {k.meta, k.stock};
    const char *rebuild_bad[][10] = {
        {"1", "x", "1", "1", "0", "10", "0", "0", "", ""},
        {"1", "10", "0", "1", "0", "10", "0", "0", "", ""},
        {"1", "10", "1", "1", "10", "10", "0", "0", "", ""},
        {"1", "10", "1", "1", "0", "10", "0", "0", "1", ""},
        {"1", "10", "1", "1", "0", "10", "0", "0", "a", "4"},
    };
    for (size_t i = 0; i < sizeof rebuild_bad / sizeof rebuild_bad[0]; i++)
        CHECK_EQ(eval_rc(r, SK_SCRIPT_REBUILD, 2, bkeys, 10, rebuild_bad[i]), SK_RC_BAD_ARGUMENT);
    /* the waiting room's three (docs/waiting-room.md): all or none */
    const char *rebuild_wr_bad[][13] = {
        {"1", "10", "1", "1", "0", "10", "0", "0", "", "", "5", "60", ""},
        {"1", "10", "1", "1", "0", "10", "0", "0", "", "", "0", "60", "0123456789abcdef"},
        {"1", "10", "1", "1", "0", "10", "0", "0", "", "", "5", "x", "0123456789abcdef"},
        {"1", "10", "1", "1", "0", "10", "0", "0", "", "", "5", "60", "0123456789ABCDEF"},
    };
    for (size_t i = 0; i < sizeof rebuild_wr_bad / sizeof rebuild_wr_bad[0]; i++)
        CHECK_EQ(eval_rc(r, SK_SCRIPT_REBUILD, 2, bkeys, 13, rebuild_wr_bad[i]),
                 SK_RC_BAD_ARGUMENT);
    /* the admission scripts' memory of the key set: malformed refused */
    struct sk_batch_head h = {.label = k.label};
    struct sk_purchase p = {.user_id = 77, .quantity = 1};
    char buf[SK_BATCH_ARG_BYTES(1)];
    const char *args[SK_BATCH_ARGC(1)];
    size_t lens[SK_BATCH_ARGC(1)];
    CHECK_EQ(sk_stock_batch_args_head(&h, &p, 1, buf, sizeof buf, args, lens), 0);
    char kb[SK_BATCH_KEY_BYTES(1)];
    const char *keys[SK_BATCH_KEYC(1)];
    int nk = sk_stock_batch_keys(&k, NULL, &p, 1, kb, sizeof kb, keys);
    CHECK_EQ(nk, SK_PURCHASE_NKEYS + 1);
    const char *mem_bad[][2] = {{"abc", "1"}, {"1", ""}, {"", "1"}, {"1", "x"}};
    for (size_t i = 0; i < 4; i++) {
        args[7] = mem_bad[i][0];
        lens[7] = strlen(mem_bad[i][0]);
        args[8] = mem_bad[i][1];
        lens[8] = strlen(mem_bad[i][1]);
        redisReply *rep;
        /* the one answer to a malformed call (lua/lib/args.lua), which the
         * reply's decoder reports as a script error, as the Lua error was */
        CHECK_EQ(sk_script_eval(r, SK_SCRIPT_PURCHASE_BATCH, nk, keys, (int)SK_BATCH_ARGC(1), args,
                                lens, &rep),
                 0);
        CHECK_EQ(rep->type, REDIS_REPLY_ARRAY);
        CHECK_EQ(rep->elements, 1);
        CHECK_EQ(rep->element[0]->integer, SK_RC_BAD_ARGUMENT);
        struct sk_admission res;
        CHECK_EQ(sk_stock_batch_parse(rep, 1, &res, NULL), SK_ESCRIPT);
        freeReplyObject(rep);
    }
    /* the KEYS too: without the buyer's limiter key, or with the one of an
     * IP the call's limits do not need */
    args[7] = args[8] = "";
    lens[7] = lens[8] = 0;
    char ipkey[SK_RL_KEY_MAX + 1];
    CHECK(sk_keys_rl_ip(&k, "192.0.2.1", ipkey, sizeof ipkey) >= 0);
    CHECK(nk < (int)SK_BATCH_KEYC(1));
    keys[nk] = ipkey; /* the one past the call's keys: an IP key it does not need */
    for (int extra = -1; extra <= 1; extra += 2) {
        redisReply *rep;
        CHECK_EQ(sk_script_eval(r, SK_SCRIPT_PURCHASE_BATCH, nk + extra, keys,
                                (int)SK_BATCH_ARGC(1), args, lens, &rep),
                 0);
        CHECK_EQ(rep->elements, 1);
        CHECK_EQ(rep->element[0]->integer, SK_RC_BAD_ARGUMENT);
        freeReplyObject(rep);
    }
    key_set_text(r, &k, after, sizeof after);
    CHECK_STR(after, before);
    sk_redis_free(r);
    sk_store_close(st);
}

SK_TEST(recovery_cli_recover_dry_run_apply_and_a_preheat_of_vanished_keys_rebuild_them)
{
    struct lab l;
    lab_start(&l, "recover_cli.db", 50, 1);
    char out[8192], before[8192], after[8192];
    buy_range(l.r, l.aid, 1, 30);
    struct worker_thread wt;
    worker_start(&wt, l.rs.url, l.db, 1, 0);
    worker_stop(&wt, 1);
    CHECK_EQ(sale_db_orders(l.st, l.aid), 30);
    /* Redis agrees with the database */
    CHECK_EQ(cli(out, sizeof out, "activity", "recover", l.rs.url, l.db, l.aid, NULL), 0);
    CHECK_MSG(strstr(out, "nothing to recover"), "%s", out);
    /* bad arguments: exit 2, nothing changed */
    key_set_text(l.r, &l.k, before, sizeof before);
    const char *bad[][8] = {
        {"activity", "recover", "--redis", l.rs.url, "--db", l.db, NULL},
        {"activity", "recover", "--redis", l.rs.url, "--db", l.db, "--id", "abc"},
        {"activity", "recover", "--redis", l.rs.url, "--db", l.db, "--id", "0"},
        {"activity", "recover", "--redis", l.rs.url, "--db", l.db, "--id", "999999999999"},
        {"activity", "recover", "--redis", l.rs.url, "--db", l.db, "--bogus", NULL},
        {"activity", "recover", "--redis", l.rs.url, "--db", l.db, "--apply=1", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *a[10];
        int n = 0;
        for (int j = 0; j < 8 && bad[i][j]; j++)
            a[n++] = bad[i][j];
        if (i > 0 && i < 4) a[n++] = "--apply";
        a[n] = NULL;
        int rc = sk_th_run_seckill(out, sizeof out, NULL, a);
        CHECK_MSG(rc == 2, "case %zu: exit %d: %s", i, rc, out);
    }
    key_set_text(l.r, &l.k, after, sizeof after);
    CHECK_STR(after, before);
    /* the keys vanish: the dry run says what a rebuild would do, and
     * writes nothing */
    CHECK_EQ(sk_stock_drop(l.r, l.aid), 0);
    CHECK_EQ(cli(out, sizeof out, "activity", "recover", l.rs.url, l.db, l.aid, NULL), 1);
    CHECK_MSG(strstr(out, "would rebuild") &&
                  strstr(out, "would put back 30 held order(s) (30 unit(s))") &&
                  strstr(out, "stock 20"),
              "%s", out);
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(l.r, &rep, "EXISTS %s %s", l.k.meta, l.k.stock), 0);
    CHECK_EQ(rep->integer, 0);
    freeReplyObject(rep);
    /* a preheat does not write the whole stock again: it rebuilds */
    CHECK_EQ(cli(out, sizeof out, "activity", "preheat", l.rs.url, l.db, l.aid, NULL), 0);
    CHECK_MSG(strstr(out, "rebuilt") && strstr(out, "resumed"), "%s", out);
    struct sk_stock_state s;
    CHECK_EQ(sk_stock_state(l.r, l.aid, &s), 0);
    CHECK_EQ(s.exists, 1);
    CHECK_EQ(s.open, 1); /* as the database records it */
    CHECK_EQ(s.remaining, 20);
    CHECK_EQ(s.held, 30);
    CHECK_EQ(s.fenced, 0);
    CHECK_EQ(s.adm, 30); /* above every number the database holds */
    CHECK_EQ(sale_audit_count(l.st, l.aid, "recover_rebuild"), 1);
    /* the buyers of before cannot buy again (limit 1), the rest sells */
    struct sk_admission ad;
    CHECK_EQ(sk_stock_purchase(l.r, l.aid, 7, 1, &ad, NULL), 0);
    CHECK_EQ(ad.rc, SK_RC_LIMIT_EXCEEDED);
    buy_range(l.r, l.aid, 31, 50);
    CHECK_EQ(sk_stock_purchase(l.r, l.aid, 51, 1, &ad, NULL), 0);
    CHECK_EQ(ad.rc, SK_RC_SOLD_OUT);
    worker_start(&wt, l.rs.url, l.db, 1, 1000);
    worker_stop(&wt, 1);
    CHECK_EQ(sale_db_orders(l.st, l.aid), 50);
    CHECK_EQ(cli(out, sizeof out, "reconcile", "", l.rs.url, l.db, l.aid, NULL), 0);
    lab_stop(&l);
}

/* The watermark of one key set label (0 when none). */
static int64_t mark_of(sk_store *st, uint64_t aid, const char *label)
{
    struct sk_mark *m;
    size_t n;
    CHECK_EQ(sk_store_marks_list(st, aid, &m, &n), 0);
    int64_t v = 0;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(m[i].label, label)) v = m[i].adm;
    free(m);
    return v;
}

struct mark_above {
    sk_store *st;
    uint64_t aid;
    const char *label;
    int64_t at;
};

static int marked_above(void *arg)
{
    struct mark_above *m = arg;
    return mark_of(m->st, m->aid, m->label) > m->at;
}

SK_TEST_T(recovery_a_rollback_of_one_segment_is_replayed_for_that_segment_only, 300)
{
    struct env e;
    env_start(&e, NULL, "all", 40000, 3, 4);
    sale_start(&e.s, e.v.port, e.aid, 30000, e.limit, SALE_THREADS);
    struct sale_db_want want = {e.st, e.aid, 3000};
    sale_wait(sale_db_has, &want, 60000, "3000 persisted orders");
    struct sk_keys k2;
    sk_keys_seg(&k2, e.aid, 2);
    struct sk_keyset_probe p;
    CHECK_EQ(sk_recovery_probe(e.r, &k2, 1, &p), 0);
    struct keys_copy old;
    copy_keys(e.r, &k2, &old);
    /* the database holds more of segment 2 than the copy does */
    struct mark_above ma = {e.st, e.aid, k2.label, p.adm + 300};
    sale_wait(marked_above, &ma, 60000, "segment 2's watermark past the copy");
    restore_keys(e.r, &old); /* segment 2's master went back in time */
    env_finish(&e, atomic_load(&e.s.ok), "one segment rolled back");
    /* recovered: segment 2, and no other */
    struct sk_audit *a;
    size_t n;
    CHECK_EQ(sk_store_audit_list(e.st, e.aid, &a, &n), 0);
    int seg2 = 0, replays = 0;
    for (size_t i = 0; i < n; i++) {
        if (strncmp(a[i].kind, "recover_", 8) || !strcmp(a[i].kind, "recover_settle")) continue;
        CHECK_MSG(!strncmp(a[i].detail, "segment 2: ", 11), "%s: %s", a[i].kind, a[i].detail);
        seg2++;
        replays += !strcmp(a[i].kind, "recover_replay");
    }
    free(a);
    CHECK(seg2 >= 3);
    CHECK(replays >= 1);
    for (int s = 0; s < 4; s++) {
        struct sk_keys ks;
        sk_keys_seg(&ks, e.aid, s);
        redisReply *rep;
        CHECK_EQ(sk_redis_cmd(e.r, &rep, "HEXISTS %s fence_ms", ks.meta), 0);
        CHECK_EQ(rep->integer, 0);
        freeReplyObject(rep);
    }
    env_stop(&e);
}

/* Users from..to buy one unit each on r; their order ids into ids[0..]. */
static void buy_range_ids(sk_redis *r, uint64_t aid, uint64_t from, uint64_t to,
                          char (*ids)[SK_STORE_ORDER_ID_MAX])
{
    for (uint64_t u = from; u <= to; u++) {
        struct sk_admission ad;
        CHECK_EQ(sk_stock_purchase(r, aid, u, 1, &ad, NULL), 0);
        CHECK_MSG(ad.rc == SK_RC_OK, "user %" PRIu64 ": %s", u, sk_rc_name(ad.rc));
        snprintf(ids[u - from], SK_STORE_ORDER_ID_MAX, "%s", ad.order_id);
    }
}

static void redis_ok(sk_redis *r, const char *fmt, const char *a, const char *b)
{
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(r, &rep, fmt, a, b), 0);
    CHECK_MSG(rep->type != REDIS_REPLY_ERROR, "%s", rep->str);
    freeReplyObject(rep);
}

SK_TEST_T(recovery_two_masters_that_diverged_share_no_order_id_and_the_merge_keeps_the_limit, 120)
{
    /* a master and its replica, in sync */
    struct sk_th_redis m, rp;
    sk_th_redis_start_pair(&m, &rp);
    char db[400];
    snprintf(db, sizeof db, "sqlite:%s/diverged.db", sk_th_tmpdir());
    sk_store *st = sk_th_store_open(db);
    sk_redis *r1 = sk_th_redis_new(m.url, 2000, 5000), *r2 = sk_th_redis_new(rp.url, 2000, 5000);
    uint64_t aid = engine_activity(st, r1, 100, 1);
    struct sk_keys k;
    sk_keys_for(&k, aid);
    buy_range(r1, aid, 1, 10);
    redisReply *rep;
    int64_t by = sk_mono_ms() + 10000;
    for (;;) {
        CHECK_EQ(sk_redis_cmd(r1, &rep, "WAIT 1 100"), 0);
        int synced = rep->type == REDIS_REPLY_INTEGER && rep->integer == 1;
        freeReplyObject(rep);
        if (synced) break;
        CHECK_MSG(sk_mono_ms() < by, "the replica never acknowledged");
    }
    /* the split: the replica is promoted (a new replication id) while the
     * old master goes on, and both streams go on from the same id on the
     * same clock (XSETID to one future id: the same entry ids on both) */
    CHECK_EQ(sk_redis_cmd(r2, &rep, "REPLICAOF NO ONE"), 0);
    freeReplyObject(rep);
    redis_ok(r1, "XSETID %s %s", k.orders, "9000000000000-0");
    redis_ok(r2, "XSETID %s %s", k.orders, "9000000000000-0");
    static char old_ids[20][SK_STORE_ORDER_ID_MAX], new_ids[20][SK_STORE_ORDER_ID_MAX];
    buy_range_ids(r1, aid, 11, 30, old_ids); /* the old master, cut off */
    buy_range_ids(r2, aid, 21, 40, new_ids); /* the promoted one; users 21..30 on both */
    int same_entry = 0;
    for (int i = 0; i < 20; i++)
        for (int j = 0; j < 20; j++) {
            char a[64], b[64];
            sk_th_order_sid(old_ids[i], a, sizeof a);
            sk_th_order_sid(new_ids[j], b, sizeof b);
            same_entry += !strcmp(a, b);
            CHECK_MSG(strcmp(old_ids[i], new_ids[j]) != 0, "order id %s on both", old_ids[i]);
        }
    CHECK_EQ(same_entry, 20);

    /* a worker on each persists what it sees: 50 orders, none taken for a
     * re-delivery of another, no conflict (the 10 from before the split are
     * on both: re-deliveries) */
    struct worker_thread wt;
    worker_start(&wt, m.url, db, 1, 0);
    worker_stop(&wt, 1);
    worker_start(&wt, rp.url, db, 1, 0);
    struct sk_worker_stats ws;
    sk_worker_stats(wt.w, &ws);
    CHECK_EQ(ws.duplicates, 10);
    CHECK_EQ(ws.conflicts, 0);
    worker_stop(&wt, 1);
    CHECK_EQ(sale_db_orders(st, aid), 50);
    struct sk_mark *marks;
    size_t nm;
    CHECK_EQ(sk_store_marks_list(st, aid, &marks, &nm), 0);
    CHECK_EQ(nm, 2); /* one per branch */
    free(marks);

    /* the merge: the worker follows the promoted master; its ledger lacks
     * the old master's last persisted order (although its admission count
     * is as high): the histories diverged. The old master's 20 go back,
     * but users 21..30 bought here too (limit 1): theirs do not fit and are
     * refused (cancelled), never a user over the limit */
    worker_start(&wt, rp.url, db, 1, 1000);
    sk_worker_stats(wt.w, &ws);
    CHECK_EQ(ws.recoveries, 1);
    CHECK_EQ(ws.orders_refused, 10);
    worker_stop(&wt, 1);
    struct sk_order_counts c;
    CHECK_EQ(sk_store_orders_count(st, aid, &c), 0);
    CHECK_EQ(c.orders[SK_ORDER_CANCELLED], 10);
    CHECK_EQ(c.orders[SK_ORDER_CREATED], 40);
    for (int i = 10; i < 20; i++) {
        struct sk_order o;
        CHECK_EQ(sk_store_order_get(st, old_ids[i], &o), 0);
        CHECK_EQ(o.status, SK_ORDER_CANCELLED);
    }
    struct sk_stock_state s;
    CHECK_EQ(sk_stock_state(r2, aid, &s), 0);
    CHECK_STR(s.fence, "");
    CHECK_EQ(s.held, 40);
    CHECK_EQ(s.remaining, 60);
    char out[8192];
    int rrc = cli(out, sizeof out, "reconcile", "", rp.url, db, aid, NULL);
    CHECK_MSG(rrc == 0, "reconcile exit %d:\n%s", rrc, out);
    /* an admission under an id the database holds for another one (ids made
     * before branches could): a conflict, recorded, reported, not inserted */
    struct sk_order dup;
    CHECK_EQ(sk_store_order_get(st, new_ids[0], &dup), 0);
    dup.user_id = 999;
    struct sk_persist_result pr;
    CHECK_EQ(sk_store_orders_persist(st, &dup, 1, &pr), 0);
    CHECK_EQ(pr.conflicts, 1);
    CHECK_EQ(pr.inserted + pr.duplicates, 0);
    rrc = cli(out, sizeof out, "reconcile", "", rp.url, db, aid, NULL);
    CHECK_MSG(rrc == 1 && strstr(out, "order_conflict"), "reconcile exit %d:\n%s", rrc, out);
    sk_redis_free(r1);
    sk_redis_free(r2);
    sk_store_close(st);
    sk_th_redis_stop(&rp, 1);
    sk_th_redis_stop(&m, 1);
}

SK_TEST(recovery_the_worker_sees_a_rollback_after_redis_admitted_past_the_watermark_again)
{
    struct lab l;
    lab_start(&l, "past.db", 200, 1);
    struct keys_copy old;
    sell_past_a_copy(&l, &old);
    struct worker_thread wt;
    /* back to 20 admissions, then 70 more: the admission count (90) is
     * past the database's watermark (60), but the ledger lacks its order */
    restore_keys(l.r, &old);
    buy_range(l.r, l.aid, 101, 170);
    struct sk_stock_state s;
    CHECK_EQ(sk_stock_state(l.r, l.aid, &s), 0);
    CHECK_EQ(s.adm, 90);
    CHECK_EQ(mark_of(l.st, l.aid, l.k.label), 60);
    worker_start(&wt, l.rs.url, l.db, 1, 1000);
    worker_stop(&wt, 1);
    CHECK_EQ(sk_stock_state(l.r, l.aid, &s), 0);
    CHECK_EQ(s.fenced, 0);
    CHECK_EQ(s.held, 130); /* 20 + 40 put back + 70 */
    CHECK_EQ(s.remaining, 70);
    CHECK_EQ(s.oversold, 0);
    CHECK_EQ(sale_audit_count(l.st, l.aid, "recover_replay"), 1);
    CHECK_EQ(sale_db_orders(l.st, l.aid), 130);
    char out[8192];
    CHECK_EQ(cli(out, sizeof out, "reconcile", "", l.rs.url, l.db, l.aid, NULL), 0);
    lab_stop(&l);
}

SK_TEST(recovery_a_segment_that_forgot_a_transfer_it_lent_gives_its_units_up)
{
    struct lab l;
    lab_start(&l, "lend.db", 20, 2); /* 10 units per segment */
    char out[8192];
    struct sk_keys k0;
    sk_keys_seg(&k0, l.aid, 0);
    struct keys_copy old;
    copy_keys(l.r, &k0, &old);
    int64_t taken;
    CHECK_EQ(sk_seg_move(l.r, l.aid, 0, 1, 4, &taken), 0);
    CHECK_EQ(taken, 5); /* half of what the lender has */
    /* segment 0 goes back to before it lent: its 5 units are counted twice */
    restore_keys(l.r, &old);
    struct sk_stock_state s;
    CHECK_EQ(sk_stock_state(l.r, l.aid, &s), 0);
    CHECK_EQ(s.remaining, 25);
    /* an operator fences it; the recovery takes the forgotten lend out */
    char fence[SK_FENCE_MAX];
    CHECK_EQ(sk_recovery_fence(l.r, &k0, "manual", "segment 0 restored from a copy", fence), 0);
    CHECK_EQ(cli(out, sizeof out, "activity", "recover", l.rs.url, l.db, l.aid, "--apply"), 0);
    CHECK_EQ(sk_stock_state(l.r, l.aid, &s), 0);
    CHECK_EQ(s.fenced, 0);
    CHECK_EQ(s.remaining, 20);
    CHECK_EQ(s.in_transit, 0);
    struct sk_stock_state s0;
    CHECK_EQ(sk_stock_state_keys(l.r, &k0, &s0), 0);
    CHECK_EQ(s0.remaining, 5);
    CHECK_EQ(s0.xout, 5);
    CHECK_MSG(strstr(out, "segment 0"), "%s", out);
    CHECK_EQ(cli(out, sizeof out, "reconcile", "", l.rs.url, l.db, l.aid, NULL), 0);
    /* its next transfer gets a number no receiver has seen */
    CHECK_EQ(sk_seg_move(l.r, l.aid, 0, 1, 1, &taken), 0);
    CHECK(taken > 0);
    CHECK_EQ(sk_stock_state(l.r, l.aid, &s), 0);
    CHECK_EQ(s.remaining, 20);
    CHECK_EQ(cli(out, sizeof out, "reconcile", "", l.rs.url, l.db, l.aid, NULL), 0);
    lab_stop(&l);
}
