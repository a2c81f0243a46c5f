/* test_order_worker.c - the order pipeline against the run's real Redis and
 * a real SQLite file: the store's order calls (persist, pay/cancel races,
 * expiry, audit), then the worker: exactly once after a 1,000-unit sale
 * bought by several processes, kill -9 before and after the commit,
 * poison entries to the dead-letter stream, activities created while it
 * runs, a failed conditional stock update, XAUTOCLAIM of a dead consumer's
 * entries, and trimming that never drops an unacknowledged entry.
 *
 * No test sleeps for timing: every wait polls for its condition, bounded. */
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "activity.h"
#include "clock.h"
#include "codes.h"
#include "error.h"
#include "harness.h"
#include "keys.h"
#include "log.h"
#include "order_worker.h"
#include "stock.h"
#include "store.h"

struct env {
    char dir[320];
    char path[400];
    char spec[420];
    sk_store *st;
    sk_redis *r;
};

static void env_init(struct env *e)
{
    sk_log_set_level(SK_LOG_WARN); /* in-process workers: keep the warnings only */
    snprintf(e->dir, sizeof e->dir, "%s", sk_th_tmpdir());
    snprintf(e->path, sizeof e->path, "%s/orders.db", e->dir);
    snprintf(e->spec, sizeof e->spec, "sqlite:%s", e->path);
    char err[256];
    CHECK_MSG(sk_store_open(&e->st, e->spec, err, sizeof err) == 0, "open store: %s", err);
    CHECK_MSG(sk_redis_new(&e->r, sk_th_redis_url(), 1000, 5000, err, sizeof err) == 0, "redis: %s",
              err);
}

/* The same against a private redis-server (tests that break it). */
static void env_init_redis(struct env *e, const char *url)
{
    env_init(e);
    sk_redis_free(e->r);
    char err[256];
    CHECK_MSG(sk_redis_new(&e->r, url, 1000, 5000, err, sizeof err) == 0, "redis: %s", err);
}

static void env_done(struct env *e)
{
    sk_store_close(e->st);
    sk_redis_free(e->r);
}

/* An activity in the store and preheated, open, in Redis. */
static uint64_t new_activity(struct env *e, int64_t stock, int64_t limit, int64_t maxq)
{
    int64_t now = sk_wall_ms();
    struct sk_activity a;
    sk_activity_init(&a);
    a.id = sk_th_unique_id();
    snprintf(a.name, sizeof a.name, "worker test %" PRIu64, a.id);
    a.stock = stock;
    a.per_user_limit = limit;
    a.max_per_order = maxq;
    a.start_ms = now - 60000;
    a.end_ms = now + 3600 * 1000;
    a.pay_timeout_s = 60;
    a.created_ms = now;
    sk_activity_apply_defaults(&a);
    CHECK_MSG(sk_store_activity_insert(e->st, &a) == 0, "insert: %s", sk_store_errstr(e->st));
    struct sk_stock_def d;
    sk_activity_stock_def(&a, &d);
    int rc;
    int64_t left;
    CHECK_EQ(sk_stock_preheat(e->r, &d, 0, &rc, &left), 0);
    CHECK_EQ(rc, SK_RC_PREHEATED);
    CHECK_EQ(sk_stock_set_open(e->r, a.id, 1, &rc), 0);
    CHECK_EQ(rc, SK_RC_OK);
    return a.id;
}

/* n purchases of quantity 1 by users base..base+n-1; all must be admitted. */
static void buy_n(struct env *e, uint64_t aid, uint64_t base, size_t n)
{
    struct sk_purchase p[100];
    struct sk_admission res[100];
    for (size_t done = 0; done < n;) {
        size_t k = n - done < 100 ? n - done : 100;
        for (size_t i = 0; i < k; i++)
            p[i] = (struct sk_purchase){.user_id = base + done + i, .quantity = 1};
        CHECK_EQ(sk_stock_purchase_batch(e->r, aid, p, k, res, NULL), 0);
        for (size_t i = 0; i < k; i++)
            CHECK_EQ(res[i].rc, SK_RC_OK);
        done += k;
    }
}

static long long redis_int(struct env *e, const char *fmt, const char *a, const char *b)
{
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(e->r, &rep, fmt, a, b), 0);
    CHECK_MSG(rep->type == REDIS_REPLY_INTEGER, "%s: not an integer (%s)", fmt,
              rep->type == REDIS_REPLY_ERROR ? rep->str : "?");
    long long v = rep->integer;
    freeReplyObject(rep);
    return v;
}

static long long xlen(struct env *e, const char *key)
{
    return redis_int(e, "XLEN %s", key, NULL);
}

/* Entries pending in the group (any consumer). */
static long long pending(struct env *e, uint64_t aid)
{
    struct sk_keys k;
    sk_keys_for(&k, aid);
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(e->r, &rep, "XPENDING %s %s", k.orders, SK_WORKER_GROUP), 0);
    CHECK(rep->type == REDIS_REPLY_ARRAY && rep->elements == 4);
    long long n = rep->element[0]->integer;
    freeReplyObject(rep);
    return n;
}

static struct sk_order_counts counts(struct env *e, uint64_t aid)
{
    struct sk_order_counts c;
    CHECK_MSG(sk_store_orders_count(e->st, aid, &c) == 0, "count: %s", sk_store_errstr(e->st));
    return c;
}

static int64_t db_stock(struct env *e, uint64_t aid)
{
    struct sk_activity a;
    CHECK_EQ(sk_store_activity_get(e->st, aid, &a), 0);
    return a.stock_db;
}

/* Runs an in-process worker with once=1; returns its counters. */
static struct sk_worker_stats run_once(struct env *e, const char *consumer, int batch,
                                       int claim_idle_ms, int max_deliveries, int trim)
{
    struct sk_worker_opts o;
    sk_worker_opts_init(&o);
    o.redis_url = sk_th_redis_url();
    o.db_spec = e->spec;
    o.consumer = consumer;
    o.batch = batch;
    o.claim_idle_ms = claim_idle_ms;
    o.max_deliveries = max_deliveries;
    o.trim = trim;
    o.once = 1;
    sk_worker *w;
    char err[256];
    CHECK_MSG(sk_worker_new(&w, &o, err, sizeof err) == 0, "worker: %s", err);
    int rc = sk_worker_run(w);
    CHECK_MSG(rc == 0, "worker run: %s", sk_worker_errstr(w));
    struct sk_worker_stats s;
    sk_worker_stats(w, &s);
    sk_worker_free(w);
    return s;
}

static struct sk_order make_order(uint64_t aid, const char *stream_id, uint64_t uid, int64_t q,
                                  int64_t created)
{
    struct sk_order o;
    memset(&o, 0, sizeof o);
    snprintf(o.order_id, sizeof o.order_id, "%" PRIu64 "-%s", aid, stream_id);
    snprintf(o.stream_id, sizeof o.stream_id, "%s", stream_id);
    o.activity_id = aid;
    o.user_id = uid;
    o.quantity = q;
    o.created_ms = created;
    return o;
}

/* ---- the store's order calls ---- */

SK_TEST(store_persist_inserts_once_takes_db_stock_and_sets_the_pay_deadline)
{
    struct env e;
    env_init(&e);
    uint64_t aid = new_activity(&e, 10, 5, 5);
    struct sk_order o[3] = {make_order(aid, "1000-0", 7, 2, 1000),
                            make_order(aid, "1000-1", 8, 3, 1000),
                            make_order(aid, "1001-0", UINT64_MAX, 1, 1001)};
    struct sk_persist_result r;
    CHECK_EQ(sk_store_orders_persist(e.st, o, 3, &r), 0);
    CHECK_EQ(r.inserted, 3);
    CHECK_EQ(r.duplicates, 0);
    CHECK_EQ(r.units, 6);
    CHECK_EQ(r.stock_failures, 0);
    CHECK_EQ(db_stock(&e, aid), 4);
    /* The same batch again (a re-delivery): nothing written, stock kept. */
    CHECK_EQ(sk_store_orders_persist(e.st, o, 3, &r), 0);
    CHECK_EQ(r.inserted, 0);
    CHECK_EQ(r.duplicates, 3);
    CHECK_EQ(db_stock(&e, aid), 4);
    struct sk_order got;
    CHECK_EQ(sk_store_order_get(e.st, o[1].order_id, &got), 0);
    CHECK_STR(got.order_id, o[1].order_id);
    CHECK_STR(got.stream_id, "1000-1");
    CHECK_EQ(got.user_id, 8);
    CHECK_EQ(got.quantity, 3);
    CHECK_EQ(got.status, SK_ORDER_CREATED);
    CHECK_EQ(got.created_ms, 1000);
    CHECK_EQ(got.pay_deadline_ms, 1000 + 60 * 1000);
    CHECK_EQ(got.paid_ms, 0);
    CHECK_EQ(sk_store_order_get(e.st, o[2].order_id, &got), 0);
    CHECK(got.user_id == UINT64_MAX); /* the full unsigned range round-trips */
    CHECK_EQ(sk_store_order_get(e.st, "nope", &got), SK_ENOTFOUND);
    struct sk_order_counts c = counts(&e, aid);
    CHECK_EQ(c.orders[SK_ORDER_CREATED], 3);
    CHECK_EQ(c.units[SK_ORDER_CREATED], 6);
    env_done(&e);
}

SK_TEST(store_persist_is_all_or_nothing_and_refuses_a_malformed_order)
{
    struct env e;
    env_init(&e);
    uint64_t aid = new_activity(&e, 10, 5, 5);
    struct sk_order o[2] = {make_order(aid, "5-0", 1, 1, 5), make_order(aid, "5-1", 2, 0, 5)};
    struct sk_persist_result r;
    CHECK_EQ(sk_store_orders_persist(e.st, o, 2, &r), SK_EINVAL);
    CHECK_EQ(counts(&e, aid).orders[SK_ORDER_CREATED], 0);
    CHECK_EQ(db_stock(&e, aid), 10);
    o[1].quantity = 1;
    o[1].order_id[0] = 0;
    CHECK_EQ(sk_store_orders_persist(e.st, o, 2, &r), SK_EINVAL);
    CHECK_EQ(counts(&e, aid).orders[SK_ORDER_CREATED], 0);
    CHECK_EQ(sk_store_orders_persist(e.st, o, 0, &r), 0);
    env_done(&e);
}

SK_TEST(store_persist_keeps_the_order_and_records_a_failed_stock_condition)
{
    struct env e;
    env_init(&e);
    uint64_t aid = new_activity(&e, 10, 5, 5);
    CHECK_EQ(sk_store_activity_set_db_stock(e.st, aid, 2), 0);
    struct sk_order o[3] = {make_order(aid, "9-0", 1, 2, 9), make_order(aid, "9-1", 2, 1, 9),
                            make_order(aid, "9-2", 3, 1, 9)};
    struct sk_persist_result r;
    CHECK_EQ(sk_store_orders_persist(e.st, o, 3, &r), 0);
    /* 2 fits, then 0 left: both later orders are kept, their stock not. */
    CHECK_EQ(r.inserted, 3);
    CHECK_EQ(r.stock_failures, 2);
    CHECK_EQ(r.units_unstocked, 2);
    CHECK_EQ(db_stock(&e, aid), 0);
    struct sk_order_counts c = counts(&e, aid);
    CHECK_EQ(c.orders[SK_ORDER_CREATED], 3);
    CHECK_EQ(c.stock_failures, 2);
    CHECK_EQ(c.stock_failure_units, 2);
    /* An order of an activity missing from the DB: kept and recorded. */
    struct sk_order ghost = make_order(aid + 100000, "9-3", 4, 1, 9);
    CHECK_EQ(sk_store_orders_persist(e.st, &ghost, 1, &r), 0);
    CHECK_EQ(r.stock_failures, 1);
    CHECK_EQ(counts(&e, aid + 100000).stock_failures, 1);
    env_done(&e);
}

SK_TEST(store_pay_and_cancel_are_conditional_and_idempotent)
{
    struct env e;
    env_init(&e);
    uint64_t aid = new_activity(&e, 10, 5, 5);
    struct sk_order o[2] = {make_order(aid, "1-0", 1, 1, 1), make_order(aid, "1-1", 2, 1, 1)};
    CHECK_EQ(sk_store_orders_persist(e.st, o, 2, NULL), 0);
    int st = -1;
    CHECK_EQ(sk_store_order_pay(e.st, o[0].order_id, 500, &st), 0);
    CHECK_EQ(st, SK_ORDER_PAID);
    CHECK_EQ(sk_store_order_pay(e.st, o[0].order_id, 900, &st), 0); /* idempotent */
    CHECK_EQ(st, SK_ORDER_PAID);
    struct sk_order got;
    CHECK_EQ(sk_store_order_get(e.st, o[0].order_id, &got), 0);
    CHECK_EQ(got.paid_ms, 500); /* the first payment's time */
    CHECK_EQ(sk_store_order_cancel(e.st, o[0].order_id, 950, &st), SK_ESTATE);
    CHECK_EQ(st, SK_ORDER_PAID);

    CHECK_EQ(sk_store_order_cancel(e.st, o[1].order_id, 600, &st), 0);
    CHECK_EQ(st, SK_ORDER_CREATED); /* this call won: it may release */
    CHECK_EQ(sk_store_order_cancel(e.st, o[1].order_id, 700, &st), 0);
    CHECK_EQ(st, SK_ORDER_CANCELLED); /* already: must not release again */
    CHECK_EQ(sk_store_order_pay(e.st, o[1].order_id, 800, &st), SK_ESTATE);
    CHECK_EQ(st, SK_ORDER_CANCELLED);
    CHECK_EQ(sk_store_order_get(e.st, o[1].order_id, &got), 0);
    CHECK_EQ(got.cancelled_ms, 600);
    CHECK_EQ(sk_store_order_pay(e.st, "x-1", 1, &st), SK_ENOTFOUND);
    CHECK_EQ(sk_store_order_cancel(e.st, "x-1", 1, &st), SK_ENOTFOUND);
    struct sk_order_counts c = counts(&e, aid);
    CHECK_EQ(c.orders[SK_ORDER_PAID], 1);
    CHECK_EQ(c.orders[SK_ORDER_CANCELLED], 1);
    CHECK_EQ(c.orders[SK_ORDER_CREATED], 0);
    env_done(&e);
}

/* Two processes race on the same 200 orders, one paying, one cancelling:
 * each order ends exactly one way, and each side's "I won" answers match. */
SK_TEST(store_racing_pay_and_cancel_have_exactly_one_winner_per_order)
{
    struct env e;
    env_init(&e);
    uint64_t aid = new_activity(&e, 1000, 1000, 5);
    enum { N = 200 };
    struct sk_order o[N];
    char sid[N][32];
    for (int i = 0; i < N; i++) {
        snprintf(sid[i], sizeof sid[i], "77-%d", i);
        o[i] = make_order(aid, sid[i], (uint64_t)i + 1, 1, 77);
    }
    CHECK_EQ(sk_store_orders_persist(e.st, o, N, NULL), 0);
    int pfd[2][2];
    pid_t kid[2];
    for (int side = 0; side < 2; side++) {
        CHECK_EQ(pipe(pfd[side]), 0);
        kid[side] = fork();
        CHECK(kid[side] >= 0);
        if (kid[side] == 0) {
            sk_store *st;
            char err[256];
            if (sk_store_open(&st, e.spec, err, sizeof err)) _exit(2);
            int won = 0;
            for (int i = 0; i < N; i++) {
                int prev, rc;
                if (side == 0) {
                    rc = sk_store_order_pay(st, o[i].order_id, 1, &prev);
                    /* paid before (only by us) or now: a win; cancelled: lost */
                    if (rc == 0)
                        won++;
                    else if (rc != SK_ESTATE)
                        _exit(3);
                } else {
                    rc = sk_store_order_cancel(st, o[i].order_id, 1, &prev);
                    if (rc == 0 && prev == SK_ORDER_CREATED)
                        won++;
                    else if (rc != SK_ESTATE && !(rc == 0 && prev == SK_ORDER_CANCELLED))
                        _exit(3);
                }
            }
            sk_store_close(st);
            if (write(pfd[side][1], &won, sizeof won) != sizeof won) _exit(4);
            _exit(0);
        }
        close(pfd[side][1]);
    }
    int won[2];
    for (int side = 0; side < 2; side++) {
        int status;
        CHECK_EQ(waitpid(kid[side], &status, 0), kid[side]);
        CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "racer %d failed", side);
        CHECK_EQ(read(pfd[side][0], &won[side], sizeof won[side]), (long)sizeof won[side]);
        close(pfd[side][0]);
    }
    struct sk_order_counts c = counts(&e, aid);
    CHECK_EQ(c.orders[SK_ORDER_CREATED], 0);
    CHECK_EQ(c.orders[SK_ORDER_PAID], won[0]);
    CHECK_EQ(c.orders[SK_ORDER_CANCELLED], won[1]);
    CHECK_EQ(won[0] + won[1], N);
    env_done(&e);
}

SK_TEST(store_lists_expired_orders_oldest_deadline_first_and_pages_orders)
{
    struct env e;
    env_init(&e);
    uint64_t aid = new_activity(&e, 10, 5, 5); /* pay timeout 60 s */
    struct sk_order o[4] = {
        make_order(aid, "3000-0", 1, 1, 3000), make_order(aid, "1000-0", 2, 1, 1000),
        make_order(aid, "2000-0", 3, 1, 2000), make_order(aid, "9000-0", 4, 1, 9000)};
    CHECK_EQ(sk_store_orders_persist(e.st, o, 4, NULL), 0);
    CHECK_EQ(sk_store_order_pay(e.st, o[2].order_id, 1, NULL), 0); /* paid: never expires */
    struct sk_order out[8];
    size_t n = 99;
    /* now = 63000: deadlines 61000 (1000-0) and 63000 (3000-0, not < now). */
    CHECK_EQ(sk_store_orders_expired(e.st, 63000, 8, out, &n), 0);
    CHECK_EQ(n, 1);
    CHECK_STR(out[0].order_id, o[1].order_id);
    CHECK_EQ(sk_store_orders_expired(e.st, 65000, 8, out, &n), 0);
    CHECK_EQ(n, 2);
    CHECK_STR(out[0].order_id, o[1].order_id);
    CHECK_STR(out[1].order_id, o[0].order_id);
    CHECK_EQ(sk_store_orders_expired(e.st, 70000, 8, out, &n), 0);
    CHECK_EQ(n, 3);
    CHECK_STR(out[2].order_id, o[3].order_id);
    CHECK_EQ(sk_store_orders_expired(e.st, 70000, 1, out, &n), 0);
    CHECK_EQ(n, 1);
    /* Paging the activity's orders, 3 then 1. */
    CHECK_EQ(sk_store_orders_list(e.st, aid, NULL, 3, out, &n), 0);
    CHECK_EQ(n, 3);
    char after[SK_STORE_ORDER_ID_MAX];
    snprintf(after, sizeof after, "%s", out[2].order_id);
    CHECK_EQ(sk_store_orders_list(e.st, aid, after, 3, out + 3, &n), 0);
    CHECK_EQ(n, 1);
    CHECK(strcmp(out[3].order_id, after) > 0);
    CHECK_EQ(sk_store_orders_list(e.st, aid + 1, NULL, 3, out, &n), 0);
    CHECK_EQ(n, 0);
    env_done(&e);
}

SK_TEST(store_audit_rows_and_db_stock_repair_are_validated)
{
    struct env e;
    env_init(&e);
    uint64_t aid = new_activity(&e, 10, 5, 5);
    CHECK_EQ(sk_store_audit_add(e.st, 123, aid, "repair_db_stock", "db stock 3 -> 7"), 0);
    CHECK_EQ(sk_store_audit_add(e.st, 124, aid + 1, "other", ""), 0);
    CHECK_EQ(sk_store_audit_add(e.st, 125, aid, "", "x"), SK_EINVAL);
    struct sk_audit *a;
    size_t n;
    CHECK_EQ(sk_store_audit_list(e.st, aid, &a, &n), 0);
    CHECK_EQ(n, 1);
    CHECK_EQ(a[0].at_ms, 123);
    CHECK_STR(a[0].kind, "repair_db_stock");
    CHECK_STR(a[0].detail, "db stock 3 -> 7");
    free(a);
    CHECK_EQ(sk_store_audit_list(e.st, 0, &a, &n), 0);
    CHECK_EQ(n, 2);
    free(a);
    CHECK_EQ(sk_store_activity_set_db_stock(e.st, aid, 7), 0);
    CHECK_EQ(db_stock(&e, aid), 7);
    CHECK_EQ(sk_store_activity_set_db_stock(e.st, aid, 11), SK_EINVAL); /* above initial */
    CHECK_EQ(sk_store_activity_set_db_stock(e.st, aid, -1), SK_EINVAL);
    CHECK_EQ(sk_store_activity_set_db_stock(e.st, aid + 1000, 1), SK_ENOTFOUND);
    CHECK_EQ(db_stock(&e, aid), 7);
    uint64_t *ids;
    CHECK_EQ(sk_store_activity_ids(e.st, &ids, &n), 0);
    CHECK_EQ(n, 1);
    CHECK(ids[0] == aid);
    free(ids);
    env_done(&e);
}

/* A database made by a binary that knew only migration 1 is upgraded in
 * place, its activities kept. */
SK_TEST(store_upgrades_a_version_1_database_to_the_orders_schema)
{
    char path[400], spec[420];
    snprintf(path, sizeof path, "%s/v1.db", sk_th_tmpdir());
    snprintf(spec, sizeof spec, "sqlite:%s", path);
    sqlite3 *db;
    CHECK_EQ(sqlite3_open(path, &db), SQLITE_OK);
    CHECK_EQ(sqlite3_exec(db,
                          "CREATE TABLE activities (id INTEGER PRIMARY KEY CHECK (id >= 1),"
                          " name TEXT NOT NULL, stock_initial INTEGER NOT NULL,"
                          " stock INTEGER NOT NULL CHECK (stock >= 0 AND stock <= stock_initial),"
                          " per_user_limit INTEGER NOT NULL, max_per_order INTEGER NOT NULL,"
                          " start_ms INTEGER NOT NULL, end_ms INTEGER NOT NULL,"
                          " pay_timeout_s INTEGER NOT NULL, state TEXT NOT NULL DEFAULT 'created',"
                          " created_ms INTEGER NOT NULL);"
                          "INSERT INTO activities VALUES (5, 'old', 10, 10, 1, 1, 0, 1000, 30,"
                          " 'created', 0);"
                          "PRAGMA user_version = 1;",
                          NULL, NULL, NULL),
             SQLITE_OK);
    sqlite3_close(db);
    sk_store *st;
    char err[256];
    CHECK_MSG(sk_store_open(&st, spec, err, sizeof err) == 0, "open: %s", err);
    int v;
    CHECK_EQ(sk_store_schema_version(st, &v), 0);
    CHECK(v >= 2);
    struct sk_order o = make_order(5, "100-0", 1, 4, 100);
    struct sk_persist_result r;
    CHECK_EQ(sk_store_orders_persist(st, &o, 1, &r), 0);
    CHECK_EQ(r.inserted, 1);
    struct sk_activity a;
    CHECK_EQ(sk_store_activity_get(st, 5, &a), 0);
    CHECK_EQ(a.stock_db, 6);
    struct sk_order got;
    CHECK_EQ(sk_store_order_get(st, o.order_id, &got), 0);
    CHECK_EQ(got.pay_deadline_ms, 100 + 30 * 1000);
    sk_store_close(st);
}

/* ---- the worker ---- */

/* Buyers in separate processes, each with its own connection, sending
 * batched purchases of 1..3 units until the sale is over; every accepted
 * order id goes to the child's file. */
static void buyer(const char *file, uint64_t aid, int child)
{
    sk_redis *r;
    char err[128];
    if (sk_redis_new(&r, sk_th_redis_url(), 1000, 5000, err, sizeof err)) _exit(2);
    FILE *f = fopen(file, "w");
    if (!f) _exit(2);
    struct sk_purchase p[50];
    struct sk_admission res[50];
    uint64_t user = (uint64_t)(child + 1) * 1000000;
    for (;;) {
        for (int i = 0; i < 50; i++)
            p[i] = (struct sk_purchase){.user_id = user++, .quantity = 1 + (int64_t)(user % 3)};
        int64_t left;
        if (sk_stock_purchase_batch(r, aid, p, 50, res, &left)) _exit(3);
        for (int i = 0; i < 50; i++)
            if (res[i].rc == SK_RC_OK)
                fprintf(f, "%s %" PRIu64 " %" PRId64 "\n", res[i].order_id, p[i].user_id,
                        res[i].quantity);
            else if (res[i].rc != SK_RC_SOLD_OUT && res[i].rc != SK_RC_INSUFFICIENT)
                _exit(4);
        if (left == 0) break;
    }
    fclose(f);
    sk_redis_free(r);
    _exit(0);
}

struct accepted {
    char id[SK_ORDER_ID_MAX];
    uint64_t user;
    int64_t qty;
};

/* Sells 1,000 units to 4 buying processes; returns the accepted orders. */
static size_t sell_out(struct env *e, uint64_t aid, struct accepted *acc, size_t cap)
{
    enum { KIDS = 4 };
    char files[KIDS][420];
    pid_t kid[KIDS];
    for (int i = 0; i < KIDS; i++) {
        snprintf(files[i], sizeof files[i], "%s/buyer%d.txt", e->dir, i);
        kid[i] = fork();
        CHECK(kid[i] >= 0);
        if (kid[i] == 0) buyer(files[i], aid, i);
    }
    size_t n = 0;
    for (int i = 0; i < KIDS; i++) {
        int status;
        CHECK_EQ(waitpid(kid[i], &status, 0), kid[i]);
        CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "buyer %d failed", i);
        FILE *f = fopen(files[i], "r");
        CHECK(f != NULL);
        while (n < cap &&
               fscanf(f, "%63s %" SCNu64 " %" SCNd64, acc[n].id, &acc[n].user, &acc[n].qty) == 3)
            n++;
        fclose(f);
    }
    return n;
}

/* Every accepted purchase has exactly one row with its buyer and quantity,
 * there are no other rows, and DB stock == initial - sold. */
static void check_exactly_once(struct env *e, uint64_t aid, const struct accepted *acc, size_t n,
                               int64_t initial)
{
    int64_t sold = 0;
    for (size_t i = 0; i < n; i++) {
        struct sk_order o;
        CHECK_MSG(sk_store_order_get(e->st, acc[i].id, &o) == 0, "order %s missing", acc[i].id);
        CHECK(o.user_id == acc[i].user);
        CHECK_EQ(o.quantity, acc[i].qty);
        sold += acc[i].qty;
    }
    struct sk_order_counts c = counts(e, aid);
    CHECK_EQ(c.orders[SK_ORDER_CREATED], (long long)n);
    CHECK_EQ(c.units[SK_ORDER_CREATED], sold);
    CHECK_EQ(c.stock_failures, 0);
    CHECK_EQ(db_stock(e, aid), initial - sold);
}

SK_TEST(worker_persists_a_1000_unit_sale_exactly_once_and_a_rerun_adds_nothing)
{
    struct env e;
    env_init(&e);
    uint64_t aid = new_activity(&e, 1000, 3, 3);
    static struct accepted acc[1200];
    size_t n = sell_out(&e, aid, acc, 1200);
    int64_t sold = 0;
    for (size_t i = 0; i < n; i++)
        sold += acc[i].qty;
    CHECK_EQ(sold, 1000); /* sold out exactly */

    /* The CLI, as an operator runs it; --no-trim keeps the entries so they
     * can be delivered a second time below. */
    char out[8192];
    const char *args[] = {"worker",     "--redis", sk_th_redis_url(), "--db", e.spec,
                          "--consumer", "w1",      "--batch",         "100",  "--no-trim",
                          "--once",     NULL};
    int rc = sk_th_run_seckill(out, sizeof out, NULL, args);
    CHECK_MSG(rc == 0, "worker exit %d: %s", rc, out);
    check_exactly_once(&e, aid, acc, n, 1000);
    CHECK_EQ(pending(&e, aid), 0);

    /* Re-deliver every entry (group rewound to 0): all duplicates. */
    struct sk_keys k;
    sk_keys_for(&k, aid);
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(e.r, &rep, "XGROUP SETID %s %s 0", k.orders, SK_WORKER_GROUP), 0);
    freeReplyObject(rep);
    struct sk_worker_stats s = run_once(&e, "w2", 100, 30000, 5, 1);
    CHECK_EQ(s.persisted, 0);
    CHECK_EQ(s.duplicates, n);
    check_exactly_once(&e, aid, acc, n, 1000);
    /* Everything acknowledged: the stream is trimmed to empty. */
    CHECK_EQ(pending(&e, aid), 0);
    CHECK_EQ(xlen(&e, k.orders), 0);
    env_done(&e);
}

/* kill -9 of a `seckill worker` in the middle of its run, at the two
 * points that matter; a restart under the same consumer name re-reads its
 * pending entries. No order is lost, none duplicated. */
static void crash_and_restart(const char *env_var, long long rows_after_crash, long long dups)
{
    struct env e;
    env_init(&e);
    uint64_t aid = new_activity(&e, 300, 1, 1);
    buy_n(&e, aid, 1, 300);
    char out[8192];
    const char *args[] = {"worker",     "--redis", sk_th_redis_url(), "--db", e.spec,
                          "--consumer", "crashy",  "--batch",         "50",   "--once",
                          NULL};
    const char *env[] = {env_var, NULL};
    int rc = sk_th_run_seckill(out, sizeof out, env, args);
    CHECK_MSG(rc == 128 + SIGKILL, "expected SIGKILL, got %d: %s", rc, out);
    CHECK_EQ(counts(&e, aid).orders[SK_ORDER_CREATED], rows_after_crash);
    CHECK_EQ(db_stock(&e, aid), 300 - rows_after_crash);
    CHECK(pending(&e, aid) > 0); /* the batch in hand was never acked */

    rc = sk_th_run_seckill(out, sizeof out, NULL, args);
    CHECK_MSG(rc == 0, "restart exit %d: %s", rc, out);
    struct sk_order_counts c = counts(&e, aid);
    CHECK_EQ(c.orders[SK_ORDER_CREATED], 300);
    CHECK_EQ(c.units[SK_ORDER_CREATED], 300);
    CHECK_EQ(db_stock(&e, aid), 0);
    CHECK_EQ(pending(&e, aid), 0);
    char want[64];
    snprintf(want, sizeof want, "duplicates %lld,", dups);
    CHECK_MSG(strstr(out, want) != NULL, "expected '%s' in: %s", want, out);
    env_done(&e);
}

SK_TEST(worker_killed_between_commit_and_xack_loses_and_duplicates_nothing)
{
    /* Transactions 1 and 2 committed and acked, 3 committed, then killed:
     * its 50 entries come back and are duplicates. */
    crash_and_restart("SECKILL_TEST_CRASH_AFTER_COMMIT=3", 150, 50);
}

SK_TEST(worker_killed_before_commit_loses_and_duplicates_nothing)
{
    /* Killed with transaction 3 read but not committed (a killed process's
     * open transaction is discarded by the database, so dying just before
     * COMMIT is the same state as dying inside it). */
    crash_and_restart("SECKILL_TEST_CRASH_BEFORE_COMMIT=3", 100, 0);
}

static const char *field(const redisReply *fields, const char *name)
{
    for (size_t i = 0; i + 1 < fields->elements; i += 2)
        if (!strcmp(fields->element[i]->str, name)) return fields->element[i + 1]->str;
    return NULL;
}

SK_TEST(worker_sends_poison_entries_to_the_dlq_after_k_deliveries_and_the_rest_flow_on)
{
    struct env e;
    env_init(&e);
    uint64_t aid = new_activity(&e, 100, 1, 1);
    struct sk_keys k;
    sk_keys_for(&k, aid);
    char aids[24];
    snprintf(aids, sizeof aids, "%" PRIu64, aid);
    buy_n(&e, aid, 1, 5);
    redisReply *rep;
    /* Written around the admission script, as a bug or a hand would. */
    CHECK_EQ(sk_redis_cmd(e.r, &rep, "XADD %s * aid %s uid abc qty 1", k.orders, aids), 0);
    freeReplyObject(rep);
    CHECK_EQ(sk_redis_cmd(e.r, &rep, "XADD %s * foo bar", k.orders), 0);
    freeReplyObject(rep);
    CHECK_EQ(sk_redis_cmd(e.r, &rep, "XADD %s * aid %s uid 7 qty 0", k.orders, aids), 0);
    freeReplyObject(rep);
    buy_n(&e, aid, 100, 5);

    struct sk_worker_stats s = run_once(&e, "p1", 4, 30000, 3, 1);
    CHECK_EQ(s.persisted, 10);
    CHECK_EQ(s.dead_lettered, 3);
    CHECK_EQ(s.poison, 3 * 4); /* each delivered K + 1 = 4 times */
    CHECK_EQ(counts(&e, aid).orders[SK_ORDER_CREATED], 10);
    CHECK_EQ(db_stock(&e, aid), 90);
    CHECK_EQ(pending(&e, aid), 0);
    CHECK_EQ(xlen(&e, k.orders), 0); /* all acked, so all trimmed */
    CHECK_EQ(xlen(&e, k.dlq), 3);
    CHECK_EQ(sk_redis_cmd(e.r, &rep, "XRANGE %s - +", k.dlq), 0);
    CHECK(rep->type == REDIS_REPLY_ARRAY && rep->elements == 3);
    const redisReply *f0 = rep->element[0]->element[1], *f1 = rep->element[1]->element[1];
    CHECK(strstr(field(f0, "dlq_reason"), "uid 'abc'") != NULL);
    CHECK_STR(field(f0, "dlq_deliveries"), "4");
    CHECK_STR(field(f0, "uid"), "abc"); /* the original fields travel along */
    CHECK(strstr(field(f1, "dlq_reason"), "missing field") != NULL);
    CHECK_STR(field(f1, "foo"), "bar");
    freeReplyObject(rep);
    env_done(&e);
}

/* A `seckill worker` child with stderr to log; dies with the test. */
static pid_t spawn_worker(const char *const *args, const char *log)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(1);
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        dup2(fd, 2);
        const char *argv[32] = {sk_th_seckill_bin()};
        int n = 1;
        for (int i = 0; args[i] && n < 31; i++)
            argv[n++] = args[i];
        argv[n] = NULL;
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    return pid;
}

/* Polls until the activity has `want` order rows, at most 15 s. */
static int wait_rows(struct env *e, uint64_t aid, long long want)
{
    int64_t deadline = sk_mono_ms() + 15000;
    while (sk_mono_ms() < deadline) {
        if (counts(e, aid).orders[SK_ORDER_CREATED] == want) return 1;
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return 0;
}

SK_TEST(worker_picks_up_an_activity_created_after_it_started_and_exits_0_on_sigterm)
{
    struct env e;
    env_init(&e);
    uint64_t first = new_activity(&e, 10, 1, 1);
    char log[450];
    snprintf(log, sizeof log, "%s/worker.log", e.dir);
    const char *args[] = {"worker",     "--redis", sk_th_redis_url(), "--db", e.spec,
                          "--consumer", "live",    "--block-ms",      "100",  NULL};
    pid_t pid = spawn_worker(args, log);
    buy_n(&e, first, 1, 3);
    CHECK_MSG(wait_rows(&e, first, 3), "first activity not persisted (see %s)", log);
    uint64_t later = new_activity(&e, 10, 1, 1); /* the worker is running */
    buy_n(&e, later, 1, 4);
    CHECK_MSG(wait_rows(&e, later, 4), "new activity not picked up (see %s)", log);
    CHECK_EQ(db_stock(&e, later), 6);
    CHECK_EQ(kill(pid, SIGTERM), 0);
    int status;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "worker status %d", status);
    env_done(&e);
}

SK_TEST(worker_counts_a_failed_stock_condition_when_db_stock_was_tampered_lower)
{
    struct env e;
    env_init(&e);
    uint64_t aid = new_activity(&e, 10, 1, 1);
    buy_n(&e, aid, 1, 5);
    CHECK_EQ(sk_store_activity_set_db_stock(e.st, aid, 2), 0); /* the tampering */
    struct sk_worker_stats s = run_once(&e, "t1", 100, 30000, 5, 1);
    CHECK_EQ(s.persisted, 5); /* Redis admitted them: kept */
    CHECK_EQ(s.stock_failures, 3);
    struct sk_order_counts c = counts(&e, aid);
    CHECK_EQ(c.orders[SK_ORDER_CREATED], 5);
    CHECK_EQ(c.stock_failures, 3);
    CHECK_EQ(db_stock(&e, aid), 0); /* never negative */
    CHECK_EQ(pending(&e, aid), 0);
    env_done(&e);
}

/* Reads up to n new entries as consumer `who` and never acks them: a
 * consumer that died holding them. */
static void dead_consumer_reads(struct env *e, uint64_t aid, const char *who, int n)
{
    struct sk_keys k;
    sk_keys_for(&k, aid);
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(e->r, &rep, "XGROUP CREATE %s %s 0 MKSTREAM", k.orders, SK_WORKER_GROUP),
             0);
    freeReplyObject(rep);
    CHECK_EQ(sk_redis_cmd(e->r, &rep, "XREADGROUP GROUP %s %s COUNT %d STREAMS %s >",
                          SK_WORKER_GROUP, who, n, k.orders),
             0);
    CHECK(rep->type == REDIS_REPLY_ARRAY && rep->element[0]->element[1]->elements == (size_t)n);
    freeReplyObject(rep);
}

/* Polls XPENDING until the oldest entry of `who` is idle >= ms (bounded). */
static void wait_idle(struct env *e, uint64_t aid, const char *who, long long ms)
{
    struct sk_keys k;
    sk_keys_for(&k, aid);
    int64_t deadline = sk_mono_ms() + 10000;
    for (;;) {
        redisReply *rep;
        CHECK_EQ(sk_redis_cmd(e->r, &rep, "XPENDING %s %s IDLE %lld - + 1 %s", k.orders,
                              SK_WORKER_GROUP, ms, who),
                 0);
        int ok = rep->type == REDIS_REPLY_ARRAY && rep->elements == 1;
        freeReplyObject(rep);
        if (ok) return;
        CHECK_MSG(sk_mono_ms() < deadline, "entries never became idle");
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

SK_TEST(worker_claims_a_dead_consumers_pending_entries_after_the_idle_time)
{
    struct env e;
    env_init(&e);
    uint64_t aid = new_activity(&e, 20, 1, 1);
    buy_n(&e, aid, 1, 6);
    dead_consumer_reads(&e, aid, "dead", 4);
    buy_n(&e, aid, 100, 2);
    /* Not idle long enough: the dead consumer's 4 stay where they are. */
    struct sk_worker_stats s = run_once(&e, "alive", 100, 3600 * 1000, 5, 1);
    CHECK_EQ(s.claimed, 0);
    CHECK_EQ(s.persisted, 4);
    CHECK_EQ(pending(&e, aid), 4);
    wait_idle(&e, aid, "dead", 200);
    s = run_once(&e, "alive", 100, 200, 5, 1);
    CHECK_EQ(s.claimed, 4);
    CHECK_EQ(s.persisted, 4);
    CHECK_EQ(counts(&e, aid).orders[SK_ORDER_CREATED], 8);
    CHECK_EQ(db_stock(&e, aid), 12);
    CHECK_EQ(pending(&e, aid), 0);
    env_done(&e);
}

SK_TEST(worker_trims_only_acknowledged_entries)
{
    struct env e;
    env_init(&e);
    uint64_t aid = new_activity(&e, 20, 1, 1);
    struct sk_keys k;
    sk_keys_for(&k, aid);
    buy_n(&e, aid, 1, 10);
    dead_consumer_reads(&e, aid, "dead", 4);
    /* The dead consumer had acked its first 2. */
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(e.r, &rep, "XRANGE %s - + COUNT 2", k.orders), 0);
    redisReply *ack;
    CHECK_EQ(sk_redis_cmd(e.r, &ack, "XACK %s %s %s %s", k.orders, SK_WORKER_GROUP,
                          rep->element[0]->element[0]->str, rep->element[1]->element[0]->str),
             0);
    CHECK_EQ(ack->integer, 2);
    freeReplyObject(ack);
    freeReplyObject(rep);
    struct sk_worker_stats s = run_once(&e, "alive", 100, 3600 * 1000, 5, 1);
    CHECK_EQ(s.persisted, 6);
    /* Entries 1-2 acked and below the oldest pending (3): trimmed. 3-4
     * still pending: kept, and so is everything after them. */
    CHECK_EQ(s.trimmed, 2);
    CHECK_EQ(xlen(&e, k.orders), 8);
    CHECK_EQ(pending(&e, aid), 2);
    /* The 2 pending ones still reach the database once claimed. */
    wait_idle(&e, aid, "dead", 100);
    s = run_once(&e, "alive", 100, 100, 5, 1);
    CHECK_EQ(s.persisted, 2);
    CHECK_EQ(xlen(&e, k.orders), 0);
    env_done(&e);
}

/* The worker on a thread, stopped by sk_worker_stop: the serve embedding. */
static void *run_thread(void *arg)
{
    sk_worker_run(arg);
    return NULL;
}

SK_TEST(worker_on_a_thread_persists_as_orders_arrive_and_stops_on_request)
{
    struct env e;
    env_init(&e);
    uint64_t aid = new_activity(&e, 50, 1, 1);
    struct sk_worker_opts o;
    sk_worker_opts_init(&o);
    o.redis_url = sk_th_redis_url();
    o.db_spec = e.spec;
    o.consumer = "thread";
    o.block_ms = 50;
    sk_worker *w;
    char err[256];
    CHECK_MSG(sk_worker_new(&w, &o, err, sizeof err) == 0, "worker: %s", err);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, run_thread, w), 0);
    for (int round = 0; round < 5; round++) {
        buy_n(&e, aid, 1 + (uint64_t)round * 10, 10);
        CHECK_MSG(wait_rows(&e, aid, 10 * (round + 1)), "round %d not persisted", round);
    }
    sk_worker_stop(w);
    CHECK_EQ(pthread_join(t, NULL), 0);
    struct sk_worker_stats s;
    sk_worker_stats(w, &s);
    CHECK_EQ(s.persisted, 50);
    CHECK_EQ(s.activities, 1);
    sk_worker_free(w);
    CHECK_EQ(db_stock(&e, aid), 0);
    env_done(&e);
}

static sk_worker *start_thread_worker(struct env *e, const char *url, pthread_t *t)
{
    struct sk_worker_opts o;
    sk_worker_opts_init(&o);
    o.redis_url = url;
    o.db_spec = e->spec;
    o.consumer = "thread";
    o.block_ms = 50;
    sk_worker *w;
    char err[256];
    CHECK_MSG(sk_worker_new(&w, &o, err, sizeof err) == 0, "worker: %s", err);
    CHECK_EQ(pthread_create(t, NULL, run_thread, w), 0);
    return w;
}

/* Polls the worker's counters until pick(stats) >= want, at most 20 s. */
static int wait_stat(sk_worker *w, size_t offset, uint64_t want)
{
    int64_t deadline = sk_mono_ms() + 20000;
    while (sk_mono_ms() < deadline) {
        struct sk_worker_stats s;
        sk_worker_stats(w, &s);
        uint64_t v;
        memcpy(&v, (const char *)&s + offset, sizeof v);
        if (v >= want) return 1;
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return 0;
}

SK_TEST(worker_waits_out_a_locked_database_without_acking_and_then_drains)
{
    struct env e;
    env_init(&e);
    uint64_t aid = new_activity(&e, 20, 1, 1);
    pthread_t t;
    sk_worker *w = start_thread_worker(&e, sk_th_redis_url(), &t);
    /* Another process-like writer holds the write lock (SQLITE_BUSY for the
     * worker once its busy timeout runs out). */
    sqlite3 *db;
    CHECK_EQ(sqlite3_open(e.path, &db), SQLITE_OK);
    CHECK_EQ(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    buy_n(&e, aid, 1, 10);
    CHECK_MSG(wait_stat(w, offsetof(struct sk_worker_stats, db_errors), 1),
              "the worker never hit the lock");
    /* Nothing committed, so nothing acknowledged. */
    CHECK_EQ(counts(&e, aid).orders[SK_ORDER_CREATED], 0);
    CHECK_EQ(pending(&e, aid), 10);
    CHECK_EQ(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    CHECK_MSG(wait_rows(&e, aid, 10), "not drained after the lock went away");
    CHECK_MSG(wait_stat(w, offsetof(struct sk_worker_stats, acked), 10), "not acked");
    CHECK_EQ(pending(&e, aid), 0);
    sk_worker_stop(w);
    CHECK_EQ(pthread_join(t, NULL), 0);
    sk_worker_free(w);
    CHECK_EQ(db_stock(&e, aid), 10);
    env_done(&e);
}

/* Redis with appendonly yes + appendfsync always, killed -9 twice: once
 * before the worker ran (admitted orders must survive in the stream), once
 * under a running worker (it reconnects and carries on). */
SK_TEST(worker_persists_orders_across_redis_kill_9_with_aof_always)
{
    static const char *const aof[] = {"--appendonly", "yes", "--appendfsync", "always", NULL};
    struct sk_th_redis red;
    sk_th_redis_start(&red, aof);
    struct env e;
    env_init_redis(&e, red.url);
    uint64_t aid = new_activity(&e, 50, 1, 1);
    buy_n(&e, aid, 1, 20);
    sk_th_redis_stop(&red, 1);
    sk_th_redis_restart(&red, aof);
    pthread_t t;
    sk_worker *w = start_thread_worker(&e, red.url, &t);
    CHECK_MSG(wait_rows(&e, aid, 20), "orders admitted before the crash not persisted");
    sk_th_redis_stop(&red, 1);
    CHECK_MSG(wait_stat(w, offsetof(struct sk_worker_stats, redis_errors), 1),
              "the worker never noticed Redis was gone");
    sk_th_redis_restart(&red, aof);
    sk_redis_disconnect(e.r);
    buy_n(&e, aid, 100, 10);
    CHECK_MSG(wait_rows(&e, aid, 30), "orders after the restart not persisted");
    sk_worker_stop(w);
    CHECK_EQ(pthread_join(t, NULL), 0);
    sk_worker_free(w);
    CHECK_EQ(db_stock(&e, aid), 20);
    env_done(&e);
    sk_th_redis_stop(&red, 0);
}

SK_TEST(worker_cli_refuses_bad_options_with_exit_2)
{
    char out[2048];
    const char *a1[] = {"worker", "--batch", "0", NULL};
    CHECK_EQ(sk_th_run_seckill(out, sizeof out, NULL, a1), 2);
    const char *a2[] = {"worker", "--frobnicate", NULL};
    CHECK_EQ(sk_th_run_seckill(out, sizeof out, NULL, a2), 2);
    const char *a3[] = {"worker", "--db", "mysql://x", "--once", NULL};
    CHECK_EQ(sk_th_run_seckill(out, sizeof out, NULL, a3), 2);
    const char *a4[] = {"worker", "--help", NULL};
    CHECK_EQ(sk_th_run_seckill(out, sizeof out, NULL, a4), 0);
    CHECK(strstr(out, "--max-deliveries") != NULL);
}
