/* test_idem_rollback.c - an Idempotency-Key never buys twice across a Redis
 * that went back in time (docs/recovery.md), on real servers and real
 * faults: a standalone redis-server killed and restarted empty under
 * `seckill serve` (on SQLite and on MariaDB), and a Sentinel failover to a replica that never got
 * the admissions (both replicas stopped and cut off), with --sync-replicas 1.
 *
 * The key goes to the database with its order (migration 8); the recovery
 * puts its record back with the order, so a retry with the key answers the
 * first admission. A retry that reached the Redis that had lost the first
 * admission before the recovery restored it (a serve process that never saw
 * it: its memory could not fence the key set) bought afresh; the recovery
 * then keeps that one and refuses the first (it was answered 503
 * unconfirmed: no promise), so the key still stands for one order. */
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "orders/order_worker.h"
#include "redis/redis_conn.h"
#include "store/store.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/http_client.h"
#include "support/mysql_harness.h"
#include "support/sale_env.h"
#include "support/sentinel_harness.h"

SK_TH_MY_USED

/* One purchase of a unit by user with an Idempotency-Key; the status, the
 * order id of a 200 into oid (cap bytes, "" otherwise). */
static int buy(int port, uint64_t aid, unsigned user, const char *key, char *oid, size_t cap,
               struct sk_th_resp *rp)
{
    struct sk_th_http c;
    sk_th_http_open(&c, port);
    char path[96], h[160];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", aid);
    snprintf(h, sizeof h, "X-User-Id: %u\r\nIdempotency-Key: %s\r\n", user, key);
    int st = sk_th_http_req(&c, "POST", path, h, "{\"quantity\":1}", rp);
    sk_th_http_close(&c);
    oid[0] = 0;
    const char *p = st == 200 ? strstr(rp->body, "\"order_id\":\"") : NULL;
    if (p) {
        size_t n = strcspn(p + 12, "\"");
        CHECK(n < cap);
        memcpy(oid, p + 12, n);
        oid[n] = 0;
    }
    return st;
}

/* The same, retried while the answer is a 503 (recovering, unconfirmed,
 * unavailable), bounded; *recovering counts the 503 recovering. */
static int buy_until(int port, uint64_t aid, unsigned user, const char *key, char *oid, size_t cap,
                     int *recovering)
{
    struct sk_th_resp *rp = sk_th_resp_new();
    int64_t by = sk_mono_ms() + 30000;
    int st;
    while ((st = buy(port, aid, user, key, oid, cap, rp)) == 503 && sk_mono_ms() < by) {
        if (recovering && strstr(rp->body, "\"recovering\"")) (*recovering)++;
        sk_th_nap_ms(50);
    }
    CHECK_MSG(st != 503, "user %u key %s: still 503 after 30 s: %s", user, key, rp->body);
    free(rp);
    return st;
}

/* The orders of user u in the database: how many are held (not cancelled),
 * and the held one's id into held_oid (the last one seen). */
static int held_of(sk_store *st, uint64_t aid, uint64_t u, char *held_oid, size_t cap,
                   int *cancelled)
{
    struct sk_order page[200];
    size_t n;
    CHECK_EQ(sk_store_orders_list(st, aid, NULL, 200, page, &n), 0);
    int held = 0;
    if (cancelled) *cancelled = 0;
    for (size_t i = 0; i < n; i++) {
        if (page[i].user_id != u) continue;
        if (page[i].status == SK_ORDER_CANCELLED) {
            if (cancelled) (*cancelled)++;
            continue;
        }
        held++;
        if (held_oid) snprintf(held_oid, cap, "%.63s", page[i].order_id);
    }
    return held;
}

/* serve on url with extra, ready, and a fresh activity of 100 units, one
 * per buyer, over its admin API (so in its database too). */
static uint64_t serve_sale(struct sk_th_serve *v, const char *url, const char *const *extra)
{
    setenv("LSAN_OPTIONS", "exitcode=0", 1);
    sk_th_serve_start(v, url, extra);
    sale_log_on_failure(v->log, v->port);
    sale_wait_ready(v->port);
    return sale_activity(v->port, 0, 100, 1, 1);
}

/* db: the store's spec, NULL for serve's SQLite file. */
static void retry_after_restart_empty(const char *db)
{
    struct sk_th_redis rs;
    sk_th_redis_start(&rs, NULL);
    const char *extra[] = {"--role", "all", db ? "--db" : NULL, db, NULL};
    struct sk_th_serve v;
    uint64_t aid = serve_sale(&v, rs.url, extra);
    sk_store *st = sk_th_store_open(db ? db : v.db);
    char oid1[80], again[80];
    int rc = buy_until(v.port, aid, 1, "first-try", oid1, sizeof oid1, NULL);
    CHECK_EQ(rc, 200);
    struct sale_db_want want = {st, aid, 1};
    sale_wait(sale_db_has, &want, 20000, "the order persisted");
    struct sk_order o;
    CHECK_EQ(sk_store_order_get(st, oid1, &o), 0);
    CHECK_STR(o.idem_key, "first-try");

    /* Redis dies without persistence and comes back empty: the worker
     * rebuilds the key set from the database, the key's record with it */
    sk_th_redis_stop(&rs, 1);
    sk_th_redis_restart(&rs, NULL);
    int recovering = 0;
    rc = buy_until(v.port, aid, 1, "first-try", again, sizeof again, &recovering);
    CHECK_MSG(rc == 200, "the retry: %d", rc);
    CHECK_STR(again, oid1);
    /* the buyer's limit came back too: another key buys nothing */
    rc = buy_until(v.port, aid, 1, "another-try", again, sizeof again, NULL);
    CHECK_EQ(rc, 409);
    CHECK_EQ(held_of(st, aid, 1, NULL, 0, NULL), 1);
    printf("    # the retry after the restart answered %s (%d answers 503 recovering first)\n",
           oid1, recovering);
    sale_log_passed();
    sk_store_close(st);
    CHECK_EQ(sk_th_serve_stop(&v, SIGTERM), 0);
    sk_th_redis_stop(&rs, 1);
}

SK_TEST_T(idem_retry_after_redis_restarted_empty_answers_the_first_order, 120)
{
    retry_after_restart_empty(NULL);
}

/* The same with MariaDB: the key comes back from its orders.idem_key. */
SK_TEST_T(idem_mysql_retry_after_redis_restarted_empty_answers_the_first_order, 120)
{
    char db[300];
    sk_th_my_fresh_db(db, sizeof db);
    retry_after_restart_empty(db);
}

struct worker_thread {
    sk_worker *w;
    pthread_t th;
};

static void worker_start(struct worker_thread *t, const char *url, const char *db)
{
    struct sk_worker_opts wo;
    sk_worker_opts_init(&wo);
    wo.redis_url = url;
    wo.db_spec = db;
    wo.block_ms = 100;
    t->w = sk_th_worker_thread(&wo, &t->th);
}

static void worker_stop(struct worker_thread *t, struct sk_worker_stats *s)
{
    sk_worker_stop(t->w);
    pthread_join(t->th, NULL);
    if (s) sk_worker_stats(t->w, s);
    sk_worker_free(t->w);
}

SK_TEST_T(idem_retry_after_a_failover_to_a_replica_that_lost_the_admission, 180)
{
    struct sk_sentinel_spawn ss;
    sk_th_sentinel_start(&ss, 2, NULL);
    const char *extra[] = {"--role", "api", "--sync-replicas", "1", "--sync-timeout-ms",
                           "50",     NULL};
    struct sk_th_serve v;
    uint64_t aid = serve_sale(&v, ss.url, extra);
    sk_store *st = sk_th_store_open(v.db);
    struct worker_thread wt;
    worker_start(&wt, ss.url, v.db);
    char oid1[80], oid2[80], oid3[80], got[80];
    CHECK_EQ(buy_until(v.port, aid, 1, "k1", oid1, sizeof oid1, NULL), 200);

    /* both replicas stopped and cut off: users 2 and 3 are admitted on the
     * master alone (503 unconfirmed), and the worker persists them */
    int m = sk_th_sentinel_master(&ss);
    for (int i = 0; i < ss.nodes; i++)
        if (i != m) CHECK_EQ(kill(ss.node[i].pid, SIGSTOP), 0);
    redisReply *kr = sk_th_sentinel_cmd(&ss, m, "CLIENT KILL TYPE replica");
    CHECK_MSG(kr && kr->type == REDIS_REPLY_INTEGER && kr->integer == 2, "CLIENT KILL: %s",
              kr && kr->str ? kr->str : "?");
    freeReplyObject(kr);
    struct sk_th_resp *rp = sk_th_resp_new();
    CHECK_EQ(buy(v.port, aid, 2, "k2", got, sizeof got, rp), 503);
    CHECK_MSG(strstr(rp->body, "\"unconfirmed\""), "%s", rp->body);
    CHECK_EQ(buy(v.port, aid, 3, "k3", got, sizeof got, rp), 503);
    struct sale_db_want want = {st, aid, 3};
    sale_wait(sale_db_has, &want, 20000, "the unconfirmed orders persisted");
    CHECK_EQ(held_of(st, aid, 2, oid2, sizeof oid2, NULL), 1);
    CHECK_EQ(held_of(st, aid, 3, oid3, sizeof oid3, NULL), 1);
    struct sk_worker_stats ws;
    worker_stop(&wt, &ws);

    /* the master dies with them; a replica that never saw them is promoted */
    sk_th_sentinel_kill_master(&ss);
    for (int i = 0; i < ss.nodes; i++)
        if (i != m) CHECK_EQ(kill(ss.node[i].pid, SIGCONT), 0);
    sk_th_sentinel_await_failover(&ss, m);

    /* user 3 retries on a serve process that never saw the lost admission
     * (started now: its memory cannot fence the key set), before the
     * worker has looked: the promoted master knows neither the order nor
     * the key, so this is a fresh purchase */
    struct sk_th_serve v2;
    /* a node of the same sale: the same database (its identity is the
     * sale's, docs/design.md) */
    const char *extra2[] = {
        "--role", "api", "--sync-replicas", "1", "--sync-timeout-ms", "50", "--db", v.db, NULL};
    sk_th_serve_start(&v2, ss.url, extra2);
    sale_wait_ready(v2.port);
    CHECK_EQ(buy_until(v2.port, aid, 3, "k3", got, sizeof got, NULL), 200);
    CHECK_MSG(strcmp(got, oid3) != 0, "the lost order %s came back before the recovery", got);
    char oid3b[80];
    snprintf(oid3b, sizeof oid3b, "%s", got);

    /* the worker: the database holds orders of a branch the promoted
     * master lacks; the recovery puts user 2's back with its key, and
     * refuses user 3's first one (the key bought another order here) */
    worker_start(&wt, ss.url, v.db);
    int recovering = 0;
    CHECK_EQ(buy_until(v.port, aid, 2, "k2", got, sizeof got, &recovering), 200);
    CHECK_STR(got, oid2); /* the first admission, not a second unit */
    CHECK_EQ(buy_until(v.port, aid, 3, "k3", got, sizeof got, NULL), 200);
    CHECK_STR(got, oid3b);
    CHECK_EQ(buy_until(v2.port, aid, 1, "k1", got, sizeof got, NULL), 200);
    CHECK_STR(got, oid1);
    want.n = 4;
    sale_wait(sale_db_has, &want, 20000, "the fresh purchase persisted");
    sk_redis *r = sk_th_redis_new(ss.url, 2000, 5000);
    sale_wait_drained(r, aid, 30000);
    sk_redis_free(r);
    worker_stop(&wt, &ws);
    CHECK_EQ(ws.orders_refused, 1);
    /* one order stands per key: user 3's first is cancelled, never a second
     * unit; nobody over the limit */
    int cancelled;
    char held[80];
    CHECK_EQ(held_of(st, aid, 2, held, sizeof held, NULL), 1);
    CHECK_STR(held, oid2);
    CHECK_EQ(held_of(st, aid, 3, held, sizeof held, &cancelled), 1);
    CHECK_STR(held, oid3b);
    CHECK_EQ(cancelled, 1);
    struct sk_order o;
    CHECK_EQ(sk_store_order_get(st, oid3, &o), 0);
    CHECK_EQ(o.status, SK_ORDER_CANCELLED);
    CHECK(o.released_ms > 0);
    CHECK_EQ(sale_audit_count(st, aid, "recover_refuse"), 1);
    printf("    # after the failover: user 2's retry answered %s (the first admission, %d answers "
           "503 recovering first); user 3's early retry bought %s, its first %s was refused\n",
           oid2, recovering, oid3b, oid3);
    sale_log_passed();
    free(rp);
    sk_store_close(st);
    CHECK_EQ(sk_th_serve_stop(&v2, SIGTERM), 0);
    CHECK_EQ(sk_th_serve_stop(&v, SIGTERM), 0);
    sk_th_sentinel_stop(&ss);
}
