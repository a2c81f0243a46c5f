/* test_order_worker.c - the order worker against the run's real Redis and a
 * real database. Each behaviour is written once and runs on both backends:
 * worker_sqlite_<name> on a fresh SQLite file, worker_pg_<name> and
 * worker_mysql_<name> on a fresh database of the run's PostgreSQL cluster
 * and MariaDB server. The behaviours: exactly once
 * after a 1,000-unit sale bought by several processes, kill -9 before and
 * after the commit, poison entries to the dead-letter stream, activities
 * created while it runs, a failed conditional stock update, XAUTOCLAIM of a
 * dead consumer's entries, trimming that never drops an unacknowledged
 * entry, the worker on a thread, and Redis kill -9 with AOF.
 *
 * Backend-specific: a locked SQLite database (SQLite only); PostgreSQL
 * stopped, and frozen, and MariaDB stopped, frozen and killed -9, under a
 * running worker (a private server each).
 * The store's own calls are tested in test_store_backends.c.
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

#include "core/clock.h"
#include "core/codes.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/activity.h"
#include "engine/keys.h"
#include "engine/order_id.h"
#include "engine/stock.h"
#include "orders/order_worker.h"
#include "store/store.h"
#include "support/backend_env.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/mysql_harness.h"
#include "support/pg_harness.h"

SK_TH_PG_USED
SK_TH_MY_USED

/* ---- helpers ---- */

/* n purchases of quantity 1 by users base..base+n-1, per_entry (1..100)
 * in each admission call, so per stream entry (lib/admit.lua writes one
 * entry per call); all must be admitted. Their order ids go to ids[0..n)
 * when ids is not NULL. */
static void buy_entries(struct sk_th_env *e, uint64_t aid, uint64_t base, size_t n,
                        char (*ids)[SK_ORDER_ID_MAX], size_t per_entry)
{
    struct sk_purchase p[100];
    struct sk_admission res[100];
    for (size_t done = 0; done < n;) {
        size_t k = n - done < per_entry ? n - done : per_entry;
        for (size_t i = 0; i < k; i++)
            p[i] = (struct sk_purchase){.user_id = base + done + i, .quantity = 1};
        CHECK_EQ(sk_stock_buy(e->r, aid, NULL, p, k, res, NULL), 0);
        for (size_t i = 0; i < k; i++) {
            CHECK_EQ(res[i].rc, SK_RC_OK);
            if (ids) snprintf(ids[done + i], SK_ORDER_ID_MAX, "%s", res[i].order_id);
        }
        done += k;
    }
}

/* One order per stream entry: the tests below that count entries (batch
 * sizes, pending, trimming) count orders with them. */
static void buy_ids(struct sk_th_env *e, uint64_t aid, uint64_t base, size_t n,
                    char (*ids)[SK_ORDER_ID_MAX])
{
    buy_entries(e, aid, base, n, ids, 1);
}

static void buy_n(struct sk_th_env *e, uint64_t aid, uint64_t base, size_t n)
{
    buy_ids(e, aid, base, n, NULL);
}

static long long redis_int(struct sk_th_env *e, const char *fmt, const char *a, const char *b)
{
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(e->r, &rep, fmt, a, b), 0);
    CHECK_MSG(rep->type == REDIS_REPLY_INTEGER, "%s: not an integer (%s)", fmt,
              rep->type == REDIS_REPLY_ERROR ? rep->str : "?");
    long long v = rep->integer;
    freeReplyObject(rep);
    return v;
}

static long long xlen(struct sk_th_env *e, const char *key)
{
    return redis_int(e, "XLEN %s", key, NULL);
}

/* Entries pending in the group (any consumer). */
static long long pending(struct sk_th_env *e, uint64_t aid)
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

static struct sk_order_counts counts(struct sk_th_env *e, uint64_t aid)
{
    struct sk_order_counts c;
    CHECK_MSG(sk_store_orders_count(e->st, aid, &c) == 0, "count: %s", sk_store_errstr(e->st));
    return c;
}

static int64_t db_stock(struct sk_th_env *e, uint64_t aid)
{
    struct sk_activity a;
    CHECK_MSG(sk_store_activity_get(e->st, aid, &a) == 0, "get: %s", sk_store_errstr(e->st));
    return a.stock_db;
}

/* Runs an in-process worker with once=1; returns its counters. */
static struct sk_worker_stats run_once(struct sk_th_env *e, const char *consumer, int batch,
                                       int claim_idle_ms, int max_deliveries, int trim)
{
    struct sk_worker_opts o;
    sk_th_env_worker_opts(e, &o, consumer);
    o.batch = batch;
    o.claim_idle_ms = claim_idle_ms;
    o.max_deliveries = max_deliveries;
    o.trim = trim;
    o.once = 1;
    return sk_th_worker_run(&o);
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
        if (sk_stock_buy(r, aid, NULL, p, 50, res, &left)) _exit(3);
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
static size_t sell_out(struct sk_th_env *e, uint64_t aid, struct accepted *acc, size_t cap)
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
static void check_exactly_once(struct sk_th_env *e, uint64_t aid, const struct accepted *acc,
                               size_t n, int64_t initial)
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

#define BACKEND_TEST(name) SK_BACKEND_TEST(worker, "orders.db", name)

BACKEND_TEST(persists_a_1000_unit_sale_exactly_once_and_a_rerun_adds_nothing)
{
    uint64_t aid = sk_th_env_activity(e, 1000, 3, 3, 60);
    static struct accepted acc[1200];
    size_t n = sell_out(e, aid, acc, 1200);
    int64_t sold = 0;
    for (size_t i = 0; i < n; i++)
        sold += acc[i].qty;
    CHECK_EQ(sold, 1000); /* sold out exactly */

    /* The CLI, as an operator runs it; --no-trim keeps the entries so they
     * can be delivered a second time below. */
    char out[8192];
    const char *args[] = {"worker", "--redis", e->redis_url, "--db",      e->spec,  "--consumer",
                          "w1",     "--batch", "100",        "--no-trim", "--once", NULL};
    int rc = sk_th_run_seckill(out, sizeof out, NULL, args);
    CHECK_MSG(rc == 0, "worker exit %d: %s", rc, out);
    check_exactly_once(e, aid, acc, n, 1000);
    CHECK_EQ(pending(e, aid), 0);

    /* Re-deliver every entry (group rewound to 0): all duplicates. */
    struct sk_keys k;
    sk_keys_for(&k, aid);
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(e->r, &rep, "XGROUP SETID %s %s 0", k.orders, SK_WORKER_GROUP), 0);
    freeReplyObject(rep);
    struct sk_worker_stats s = run_once(e, "w2", 100, 30000, 5, 1);
    CHECK_EQ(s.persisted, 0);
    CHECK_EQ(s.duplicates, n);
    check_exactly_once(e, aid, acc, n, 1000);
    /* Everything acknowledged: the stream is trimmed to empty. */
    CHECK_EQ(pending(e, aid), 0);
    CHECK_EQ(xlen(e, k.orders), 0);
}

/* kill -9 of a `seckill worker` in the middle of its run, at the two
 * points that matter; a restart under the same consumer name re-reads its
 * pending entries. No order is lost, none duplicated. 300 orders in
 * entries of per_entry orders, fetched 50 orders (50 / per_entry
 * entries) at a time. */
static void crash_and_restart(struct sk_th_env *e, const char *env_var, long long rows_after_crash,
                              long long dups, size_t per_entry)
{
    uint64_t aid = sk_th_env_activity(e, 300, 1, 1, 60);
    buy_entries(e, aid, 1, 300, NULL, per_entry);
    char out[8192], batch[16];
    snprintf(batch, sizeof batch, "%zu", 50 / per_entry);
    const char *args[] = {"worker", "--redis", e->redis_url, "--db",   e->spec, "--consumer",
                          "crashy", "--batch", batch,        "--once", NULL};
    const char *env[] = {env_var, NULL};
    int rc = sk_th_run_seckill_hooks(out, sizeof out, env, args);
    CHECK_MSG(rc == 128 + SIGKILL, "expected SIGKILL, got %d: %s", rc, out);
    CHECK_EQ(counts(e, aid).orders[SK_ORDER_CREATED], rows_after_crash);
    CHECK_EQ(db_stock(e, aid), 300 - rows_after_crash);
    CHECK(pending(e, aid) > 0); /* the batch in hand was never acked */

    rc = sk_th_run_seckill(out, sizeof out, NULL, args);
    CHECK_MSG(rc == 0, "restart exit %d: %s", rc, out);
    struct sk_order_counts c = counts(e, aid);
    CHECK_EQ(c.orders[SK_ORDER_CREATED], 300);
    CHECK_EQ(c.units[SK_ORDER_CREATED], 300);
    CHECK_EQ(db_stock(e, aid), 0);
    CHECK_EQ(pending(e, aid), 0);
    char want[64];
    snprintf(want, sizeof want, "duplicates %lld,", dups);
    CHECK_MSG(strstr(out, want) != NULL, "expected '%s' in: %s", want, out);
}

BACKEND_TEST(killed_between_commit_and_xack_loses_and_duplicates_nothing)
{
    /* Transactions 1 and 2 committed and acked, 3 committed, then killed:
     * its 50 entries come back and are duplicates. */
    crash_and_restart(e, "SECKILL_TEST_CRASH_AFTER_COMMIT=3", 150, 50, 1);
}

BACKEND_TEST(killed_between_commit_and_xack_of_entries_of_ten_orders_loses_nothing)
{
    /* The same with ten orders per entry (a busy sale's admission calls):
     * an entry is committed and acknowledged whole. */
    crash_and_restart(e, "SECKILL_TEST_CRASH_AFTER_COMMIT=3", 150, 50, 10);
}

BACKEND_TEST(killed_before_commit_loses_and_duplicates_nothing)
{
    /* Killed with transaction 3 read but not committed (a killed process's
     * open transaction is discarded by the database, so dying just before
     * COMMIT is the same state as dying inside it). */
    crash_and_restart(e, "SECKILL_TEST_CRASH_BEFORE_COMMIT=3", 100, 0, 1);
}

BACKEND_TEST(killed_before_commit_of_entries_of_ten_orders_loses_nothing)
{
    crash_and_restart(e, "SECKILL_TEST_CRASH_BEFORE_COMMIT=3", 100, 0, 10);
}

/* The fault hooks exist only in the test build (-DSK_TEST,
 * build/seckill-hooks): the seckill binary that is installed and packaged
 * ignores them and persists everything, while the hooks binary dies at the
 * asked transaction. */
SK_TEST(worker_release_binary_ignores_the_test_fault_hooks)
{
    struct sk_th_env e;
    sk_th_env_init(&e, 0, "orders.db", sk_th_redis_url());
    uint64_t aid = sk_th_env_activity(&e, 100, 1, 1, 60);
    buy_entries(&e, aid, 1, 100, NULL, 1);
    const char *args[] = {"worker", "--redis", e.redis_url, "--db",   e.spec, "--consumer",
                          "hooked", "--batch", "10",        "--once", NULL};
    const char *env[] = {"SECKILL_TEST_CRASH_AFTER_COMMIT=1", NULL};
    char out[8192];
    int rc = sk_th_run_seckill_hooks(out, sizeof out, env, args);
    CHECK_MSG(rc == 128 + SIGKILL, "the hooks binary: expected SIGKILL, got %d: %s", rc, out);
    CHECK_EQ(counts(&e, aid).orders[SK_ORDER_CREATED], 10);
    rc = sk_th_run_seckill(out, sizeof out, env, args);
    CHECK_MSG(rc == 0, "the release binary: exit %d: %s", rc, out);
    CHECK_EQ(counts(&e, aid).orders[SK_ORDER_CREATED], 100);
    CHECK_EQ(pending(&e, aid), 0);
}

static const char *field(const redisReply *fields, const char *name)
{
    for (size_t i = 0; i + 1 < fields->elements; i += 2)
        if (!strcmp(fields->element[i]->str, name)) return fields->element[i + 1]->str;
    return NULL;
}

/* A fresh activity of 100 units (limit per user and order `limit`) for
 * the poison tests: its keys and its id as text, for entries written by
 * hand. */
static uint64_t poison_sale(struct sk_th_env *e, int64_t limit, struct sk_keys *k, char *aids,
                            size_t cap)
{
    uint64_t aid = sk_th_env_activity(e, 100, limit, limit, 60);
    sk_keys_for(k, aid);
    snprintf(aids, cap, "%" PRIu64, aid);
    return aid;
}

BACKEND_TEST(sends_poison_entries_to_the_dlq_after_k_deliveries_and_the_rest_flow_on)
{
    struct sk_keys k;
    char aids[24];
    uint64_t aid = poison_sale(e, 1, &k, aids, sizeof aids);
    buy_n(e, aid, 1, 5);
    redisReply *rep;
    /* Written around the admission script, as a bug or a hand would. */
    CHECK_EQ(sk_redis_cmd(e->r, &rep, "XADD %s * aid %s uid abc qty 1", k.orders, aids), 0);
    freeReplyObject(rep);
    CHECK_EQ(sk_redis_cmd(e->r, &rep, "XADD %s * foo bar", k.orders), 0);
    freeReplyObject(rep);
    CHECK_EQ(sk_redis_cmd(e->r, &rep, "XADD %s * aid %s uid 7 qty 0", k.orders, aids), 0);
    freeReplyObject(rep);
    buy_n(e, aid, 100, 5);

    struct sk_worker_stats s = run_once(e, "p1", 4, 30000, 3, 1);
    CHECK_EQ(s.persisted, 10);
    CHECK_EQ(s.dead_lettered, 3);
    CHECK_EQ(s.poison, 3 * 4); /* each delivered K + 1 = 4 times */
    CHECK_EQ(counts(e, aid).orders[SK_ORDER_CREATED], 10);
    CHECK_EQ(db_stock(e, aid), 90);
    CHECK_EQ(pending(e, aid), 0);
    CHECK_EQ(xlen(e, k.orders), 0); /* all acked, so all trimmed */
    CHECK_EQ(xlen(e, k.dlq), 3);
    CHECK_EQ(sk_redis_cmd(e->r, &rep, "XRANGE %s - +", k.dlq), 0);
    CHECK(rep->type == REDIS_REPLY_ARRAY && rep->elements == 3);
    const redisReply *f0 = rep->element[0]->element[1], *f1 = rep->element[1]->element[1];
    CHECK(strstr(field(f0, "dlq_reason"), "uid 'abc'") != NULL);
    CHECK_STR(field(f0, "dlq_deliveries"), "4");
    CHECK_STR(field(f0, "uid"), "abc"); /* the original fields travel along */
    CHECK(strstr(field(f1, "dlq_reason"), "missing field") != NULL);
    CHECK_STR(field(f1, "foo"), "bar");
    freeReplyObject(rep);
}

/* A `seckill worker` child with stderr to log; dies with the test. */
static pid_t spawn_worker(const char *const *args, const char *log)
{
    pid_t pid = sk_th_fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        dup2(fd, 2);
        sk_th_exec(sk_th_seckill_bin(), args);
    }
    return pid;
}

/* Polls until the activity has `want` order rows, at most 15 s. */
static int wait_rows(struct sk_th_env *e, uint64_t aid, long long want)
{
    int64_t deadline = sk_mono_ms() + 15000;
    while (sk_mono_ms() < deadline) {
        if (counts(e, aid).orders[SK_ORDER_CREATED] == want) return 1;
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return 0;
}

/* One admission call of several purchases writes one stream entry for
 * all of them (lib/admit.lua): each becomes its own row, with the id the
 * buyer was given ("<label>-<entry>-<branch>-<i>"), the entry's id and
 * time, its own Idempotency-Key, and the highest admission number of the
 * entry is the watermark. */
BACKEND_TEST(persists_each_order_of_an_entry_of_several_with_its_id_and_key)
{
    uint64_t aid = sk_th_env_activity(e, 100, 2, 2, 60);
    struct sk_purchase p[4] = {{.user_id = 11, .quantity = 1, .idem = "key-a", .idem_len = 5},
                               {.user_id = 12, .quantity = 2},
                               {.user_id = 11, .quantity = 1, .idem = "k:b!", .idem_len = 4},
                               {.user_id = 13, .quantity = 1}};
    struct sk_admission res[4];
    CHECK_EQ(sk_stock_buy(e->r, aid, NULL, p, 4, res, NULL), 0);
    struct sk_keys k;
    sk_keys_for(&k, aid);
    CHECK_EQ(xlen(e, k.orders), 1); /* one entry for the call */
    struct sk_oid first = {0};
    for (int i = 0; i < 4; i++) {
        CHECK_EQ(res[i].rc, SK_RC_OK);
        struct sk_oid id;
        CHECK_MSG(sk_oid_parse(res[i].order_id, strlen(res[i].order_id), &id) == 0, "id %s",
                  res[i].order_id);
        CHECK_EQ(id.index, i);
        if (i == 0) first = id;
        CHECK(id.sid.ms == first.sid.ms && id.sid.seq == first.sid.seq);
    }
    struct sk_worker_stats s = run_once(e, "m1", 10, 30000, 3, 1);
    CHECK_EQ(s.persisted, 4);
    CHECK_EQ(s.acked, 1);
    CHECK_EQ(s.poison, 0);
    const char *keys[4] = {"key-a", "", "k:b!", ""};
    for (int i = 0; i < 4; i++) {
        struct sk_order o;
        CHECK_MSG(sk_store_order_get(e->st, res[i].order_id, &o) == 0, "order %s missing",
                  res[i].order_id);
        CHECK_EQ(o.user_id, p[i].user_id);
        CHECK_EQ(o.quantity, p[i].quantity);
        CHECK_STR(o.idem_key, keys[i]);
        char sid[48];
        snprintf(sid, sizeof sid, "%" PRIu64 "-%" PRIu64, first.sid.ms, first.sid.seq);
        CHECK_STR(o.stream_id, sid);
        CHECK_EQ(o.created_ms, (int64_t)first.sid.ms);
    }
    CHECK_EQ(db_stock(e, aid), 95);
    struct sk_mark *marks;
    size_t nm;
    CHECK_EQ(sk_store_marks_list(e->st, aid, &marks, &nm), 0);
    CHECK_EQ(nm, 1);
    CHECK_EQ(marks[0].adm, 4); /* the numbers n, n + 1, ... of the entry's orders */
    CHECK_STR(marks[0].order_id, res[3].order_id);
    free(marks);
    CHECK_EQ(pending(e, aid), 0);
}

/* Entries of several orders that the admission script would never write
 * are poison, whole; a malformed key token only loses its key. */
BACKEND_TEST(sends_malformed_entries_of_several_orders_to_the_dlq_whole)
{
    struct sk_keys k;
    char aids[24];
    uint64_t aid = poison_sale(e, 5, &k, aids, sizeof aids);
    static const char *const bad[][2] = {
        {"n 1 b 0123abcd c 3 uid %s qty %s", "1 2|1 1 1"}, /* fewer users than c */
        {"n 1 c 2 uid %s qty %s", "1 2|1 1"},              /* no branch */
        {"n 1 b 0123abcd c 2 uid %s qty %s", "1  2|1 1"},  /* an empty token */
        {"n 1 b 0123abcd c 2 uid %s qty %s", "1 2|1 1 1"}, /* more quantities than c */
        {"n 1 b 0123abcd c 2 uid %s qty %s", "1 2 |1 1"},  /* a trailing separator */
        {"n 1 b 0123abcd c 0 uid %s qty %s", "1|1"},       /* no order */
        {"n 1 b 0123abcd c 1025 uid %s qty %s", "1|1"},    /* more than an entry holds */
        {"n 1 b 0123abcd c 2 uid %s qty %s", "1 x|1 1"},   /* not a user */
    };
    size_t nbad = sizeof bad / sizeof bad[0];
    redisReply *rep;
    for (size_t i = 0; i < nbad; i++) {
        char uids[32], qtys[32], fmt[160];
        const char *bar = strchr(bad[i][1], '|');
        snprintf(uids, sizeof uids, "%.*s", (int)(bar - bad[i][1]), bad[i][1]);
        snprintf(qtys, sizeof qtys, "%s", bar + 1);
        snprintf(fmt, sizeof fmt, "XADD %%s * aid %%s %s", bad[i][0]);
        CHECK_EQ(sk_redis_cmd(e->r, &rep, fmt, k.orders, aids, uids, qtys), 0);
        CHECK_MSG(rep->type == REDIS_REPLY_STRING, "XADD %zu", i);
        freeReplyObject(rep);
    }
    /* well formed, but its key tokens are not: the orders go through */
    CHECK_EQ(sk_redis_cmd(e->r, &rep, "XADD %s * aid %s n 7 b 0123abcd c 2 uid %s qty %s k %s",
                          k.orders, aids, "21 22", "1 2", "5:x 0 1:ok"),
             0);
    CHECK(rep->type == REDIS_REPLY_STRING);
    char good[48];
    snprintf(good, sizeof good, "%s", rep->str);
    freeReplyObject(rep);

    struct sk_worker_stats s = run_once(e, "m2", 20, 30000, 1, 1);
    CHECK_EQ(s.persisted, 2);
    CHECK_EQ(s.dead_lettered, nbad);
    CHECK_EQ(xlen(e, k.dlq), (long long)nbad);
    CHECK_EQ(db_stock(e, aid), 97);
    char oid[96];
    snprintf(oid, sizeof oid, "%s-%s-0123abcd-1", aids, good);
    struct sk_order o;
    CHECK_MSG(sk_store_order_get(e->st, oid, &o) == 0, "order %s missing", oid);
    CHECK_EQ(o.user_id, 22);
    CHECK_EQ(o.quantity, 2);
    CHECK_STR(o.idem_key, "ok");
    snprintf(oid, sizeof oid, "%s-%s-0123abcd-0", aids, good);
    CHECK_MSG(sk_store_order_get(e->st, oid, &o) == 0, "order %s missing", oid);
    CHECK_STR(o.idem_key, "");
    CHECK_EQ(pending(e, aid), 0);
}

BACKEND_TEST(picks_up_an_activity_created_after_it_started_and_exits_0_on_sigterm)
{
    uint64_t first = sk_th_env_activity(e, 10, 1, 1, 60);
    char log[450];
    snprintf(log, sizeof log, "%s/worker.log", e->dir);
    const char *args[] = {"worker",     "--redis", e->redis_url, "--db", e->spec,
                          "--consumer", "live",    "--block-ms", "100",  NULL};
    pid_t pid = spawn_worker(args, log);
    buy_n(e, first, 1, 3);
    CHECK_MSG(wait_rows(e, first, 3), "first activity not persisted (see %s)", log);
    uint64_t later = sk_th_env_activity(e, 10, 1, 1, 60); /* the worker is running */
    buy_n(e, later, 1, 4);
    CHECK_MSG(wait_rows(e, later, 4), "new activity not picked up (see %s)", log);
    CHECK_EQ(db_stock(e, later), 6);
    CHECK_EQ(kill(pid, SIGTERM), 0);
    int status;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "worker status %d", status);
}

BACKEND_TEST(counts_a_failed_stock_condition_when_db_stock_was_tampered_lower)
{
    uint64_t aid = sk_th_env_activity(e, 10, 1, 1, 60);
    buy_n(e, aid, 1, 5);
    CHECK_EQ(sk_store_activity_set_db_stock(e->st, aid, 2), 0); /* the tampering */
    struct sk_worker_stats s = run_once(e, "t1", 100, 30000, 5, 1);
    CHECK_EQ(s.persisted, 5); /* Redis admitted them: kept */
    CHECK_EQ(s.stock_failures, 3);
    struct sk_order_counts c = counts(e, aid);
    CHECK_EQ(c.orders[SK_ORDER_CREATED], 5);
    CHECK_EQ(c.stock_failures, 3);
    CHECK_EQ(db_stock(e, aid), 0); /* never negative */
    CHECK_EQ(pending(e, aid), 0);
}

/* Reads up to n new entries as consumer `who` and never acks them: a
 * consumer that died holding them. */
static void dead_consumer_reads(struct sk_th_env *e, uint64_t aid, const char *who, int n)
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
static void wait_idle(struct sk_th_env *e, uint64_t aid, const char *who, long long ms)
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

BACKEND_TEST(claims_a_dead_consumers_pending_entries_after_the_idle_time)
{
    uint64_t aid = sk_th_env_activity(e, 20, 1, 1, 60);
    buy_n(e, aid, 1, 6);
    dead_consumer_reads(e, aid, "dead", 4);
    buy_n(e, aid, 100, 2);
    /* Not idle long enough: the dead consumer's 4 stay where they are. */
    struct sk_worker_stats s = run_once(e, "alive", 100, 3600 * 1000, 5, 1);
    CHECK_EQ(s.claimed, 0);
    CHECK_EQ(s.persisted, 4);
    CHECK_EQ(pending(e, aid), 4);
    wait_idle(e, aid, "dead", 200);
    s = run_once(e, "alive", 100, 200, 5, 1);
    CHECK_EQ(s.claimed, 4);
    CHECK_EQ(s.persisted, 4);
    CHECK_EQ(counts(e, aid).orders[SK_ORDER_CREATED], 8);
    CHECK_EQ(db_stock(e, aid), 12);
    CHECK_EQ(pending(e, aid), 0);
}

BACKEND_TEST(trims_only_acknowledged_entries)
{
    uint64_t aid = sk_th_env_activity(e, 20, 1, 1, 60);
    struct sk_keys k;
    sk_keys_for(&k, aid);
    buy_n(e, aid, 1, 10);
    dead_consumer_reads(e, aid, "dead", 4);
    /* The dead consumer had acked its first 2. */
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(e->r, &rep, "XRANGE %s - + COUNT 2", k.orders), 0);
    redisReply *ack;
    CHECK_EQ(sk_redis_cmd(e->r, &ack, "XACK %s %s %s %s", k.orders, SK_WORKER_GROUP,
                          rep->element[0]->element[0]->str, rep->element[1]->element[0]->str),
             0);
    CHECK_EQ(ack->integer, 2);
    freeReplyObject(ack);
    freeReplyObject(rep);
    struct sk_worker_stats s = run_once(e, "alive", 100, 3600 * 1000, 5, 1);
    CHECK_EQ(s.persisted, 6);
    /* Entries 1-2 acked and below the oldest pending (3): trimmed. 3-4
     * still pending: kept, and so is everything after them. */
    CHECK_EQ(s.trimmed, 2);
    CHECK_EQ(xlen(e, k.orders), 8);
    CHECK_EQ(pending(e, aid), 2);
    /* The 2 pending ones still reach the database once claimed. */
    wait_idle(e, aid, "dead", 100);
    s = run_once(e, "alive", 100, 100, 5, 1);
    CHECK_EQ(s.persisted, 2);
    CHECK_EQ(xlen(e, k.orders), 0);
}

/* Stops a worker running on thread t, waits for the thread and frees the
 * worker; its last counters into *last when last is not NULL. */
static void stop_thread_worker(sk_worker *w, pthread_t t, struct sk_worker_stats *last)
{
    sk_worker_stop(w);
    CHECK_EQ(pthread_join(t, NULL), 0);
    if (last) sk_worker_stats(w, last);
    sk_worker_free(w);
}

BACKEND_TEST(on_a_thread_persists_as_orders_arrive_and_stops_on_request)
{
    uint64_t aid = sk_th_env_activity(e, 50, 1, 1, 60);
    struct sk_worker_opts o;
    sk_th_env_worker_opts(e, &o, "thread");
    o.block_ms = 50;
    pthread_t t;
    sk_worker *w = sk_th_worker_thread(&o, &t);
    for (int round = 0; round < 5; round++) {
        buy_n(e, aid, 1 + (uint64_t)round * 10, 10);
        CHECK_MSG(wait_rows(e, aid, 10 * (round + 1)), "round %d not persisted", round);
    }
    struct sk_worker_stats s;
    stop_thread_worker(w, t, &s);
    CHECK_EQ(s.persisted, 50);
    CHECK_EQ(s.activities, 1);
    CHECK_EQ(db_stock(e, aid), 0);
}

/* A worker on a thread (block 50 ms, re-list every relist_ms). */
static sk_worker *start_thread_worker(struct sk_th_env *e, pthread_t *t, int relist_ms)
{
    struct sk_worker_opts o;
    sk_th_env_worker_opts(e, &o, "thread");
    o.block_ms = 50;
    o.relist_ms = relist_ms;
    sk_worker *w = sk_th_worker_thread(&o, t);
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

/* A fresh orders.db (SQLite) on the run's Redis and an activity of 20
 * units, one per user; the activity's id. */
static uint64_t sqlite_sale(struct sk_th_env *e)
{
    sk_th_env_init(e, 0, "orders.db", sk_th_redis_url());
    return sk_th_env_activity(e, 20, 1, 1, 60);
}

/* The thread worker w has persisted `rows` orders of aid and acknowledged
 * their `entries` stream entries (why: what it failed to do else) and
 * none waits; then it is stopped
 * (its last counters into *last when not NULL). */
static void drained_then_stopped(struct sk_th_env *e, uint64_t aid, sk_worker *w, pthread_t t,
                                 long long rows, long long entries, const char *why,
                                 struct sk_worker_stats *last)
{
    CHECK_MSG(wait_rows(e, aid, rows), "%s", why);
    CHECK_MSG(wait_stat(w, offsetof(struct sk_worker_stats, acked), (uint64_t)entries),
              "not acked");
    CHECK_EQ(pending(e, aid), 0);
    stop_thread_worker(w, t, last);
}

/* SQLite only: another writer holds the write lock (SQLITE_BUSY for the
 * worker once its busy timeout runs out). */
SK_TEST(worker_sqlite_waits_out_a_locked_database_without_acking_and_then_drains)
{
    struct sk_th_env e;
    uint64_t aid = sqlite_sale(&e);
    pthread_t t;
    sk_worker *w = start_thread_worker(&e, &t, 1000);
    sqlite3 *db;
    CHECK_EQ(sqlite3_open(e.path, &db), SQLITE_OK);
    CHECK_EQ(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    buy_entries(&e, aid, 1, 10, NULL, 10); /* one call: one entry of ten orders */
    CHECK_MSG(wait_stat(w, offsetof(struct sk_worker_stats, db_errors), 1),
              "the worker never hit the lock");
    /* Nothing committed, so nothing acknowledged. */
    CHECK_EQ(counts(&e, aid).orders[SK_ORDER_CREATED], 0);
    CHECK_EQ(pending(&e, aid), 1);
    CHECK_EQ(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    drained_then_stopped(&e, aid, w, t, 10, 1, "not drained after the lock went away", NULL);
    CHECK_EQ(db_stock(&e, aid), 10);
    sk_th_env_done(&e);
}

/* A trickle shares a transaction: after a short fetch the worker reads
 * again only linger_ms after it began, so two orders that arrive one after
 * the other meanwhile are persisted together, once each. */
SK_TEST(worker_lingers_after_a_short_fetch_so_a_trickle_shares_a_transaction)
{
    struct sk_th_env e;
    uint64_t aid = sqlite_sale(&e);
    struct sk_worker_opts o;
    sk_worker_opts_init(&o);
    o.redis_url = e.redis_url;
    o.db_spec = e.spec;
    o.consumer = "linger";
    o.linger_ms = 1001;
    sk_worker *w;
    char err[512];
    CHECK_EQ(sk_worker_new(&w, &o, err, sizeof err), SK_EINVAL); /* at most 1000 */
    o.linger_ms = 1000;
    o.block_ms = 50;
    pthread_t t;
    w = sk_th_worker_thread(&o, &t);
    buy_n(&e, aid, 1, 1);
    CHECK_MSG(wait_stat(w, offsetof(struct sk_worker_stats, acked), 1), "first order not acked");
    int64_t t0 = sk_mono_ms();
    buy_n(&e, aid, 2, 1); /* two arrivals, each its own admission call */
    buy_n(&e, aid, 3, 1);
    int64_t sent_ms = sk_mono_ms() - t0;
    struct sk_worker_stats st;
    drained_then_stopped(&e, aid, w, t, 3, 3, "the trickle was not persisted", &st);
    CHECK_EQ(st.persisted, 3);
    CHECK_EQ(st.duplicates, 0);
    /* Both arrived within the linger (unless this machine stalled the test
     * for most of a second between them: then nothing can be said). */
    if (sent_ms < 500)
        CHECK_EQ(st.batches, 2);
    else
        printf("    # arrivals %lld ms apart: batches not judged\n", (long long)sent_ms);
    CHECK_EQ(db_stock(&e, aid), 17);
    sk_th_env_done(&e);
}

/* No progress while orders wait: the worker says so (every --stall-warn-s)
 * and says how many wait; once the database takes writes again it drains. */
SK_TEST(worker_warns_when_no_order_is_acknowledged_while_orders_wait)
{
    struct sk_th_env e;
    uint64_t aid = sqlite_sale(&e);
    sqlite3 *db;
    CHECK_EQ(sqlite3_open(e.path, &db), SQLITE_OK);
    CHECK_EQ(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    buy_n(&e, aid, 1, 7);
    char log[400];
    snprintf(log, sizeof log, "%s/stall.log", e.dir);
    const char *argv[] = {sk_th_seckill_bin(), "worker", "--redis", e.redis_url, "--db", e.spec,
                          "--stall-warn-s",    "1",      NULL};
    pid_t pid = sk_th_fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 1);
        dup2(fd, 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int64_t deadline = sk_mono_ms() + 20000;
    int warned = 0;
    while (!warned && sk_mono_ms() < deadline) {
        FILE *f = fopen(log, "r");
        char line[1024];
        while (f && fgets(line, sizeof line, f))
            warned |= strstr(line, "no order acknowledged for") && strstr(line, "while 7 wait");
        if (f) fclose(f);
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    CHECK_MSG(warned, "no warning in %s", log);
    CHECK_EQ(counts(&e, aid).orders[SK_ORDER_CREATED], 0);
    CHECK_EQ(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    CHECK_MSG(wait_rows(&e, aid, 7), "not drained after the lock went away");
    kill(pid, SIGTERM);
    int st;
    CHECK_EQ(waitpid(pid, &st, 0), pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    sk_th_env_done(&e);
}

/* Redis with appendonly yes + appendfsync always, killed -9 twice: once
 * before the worker ran (admitted orders must survive in the stream), once
 * under a running worker (it reconnects and carries on). */
static void redis_kill_9_with_aof_always(int pg)
{
    static const char *const aof[] = {"--appendonly", "yes", "--appendfsync", "always", NULL};
    struct sk_th_redis red;
    sk_th_redis_start(&red, aof);
    struct sk_th_env e;
    sk_th_env_init(&e, pg, "orders.db", red.url);
    uint64_t aid = sk_th_env_activity(&e, 50, 1, 1, 60);
    buy_n(&e, aid, 1, 20);
    sk_th_redis_stop(&red, 1);
    sk_th_redis_restart(&red, aof);
    pthread_t t;
    sk_worker *w = start_thread_worker(&e, &t, 1000);
    CHECK_MSG(wait_rows(&e, aid, 20), "orders admitted before the crash not persisted");
    sk_th_redis_stop(&red, 1);
    CHECK_MSG(wait_stat(w, offsetof(struct sk_worker_stats, redis_errors), 1),
              "the worker never noticed Redis was gone");
    sk_th_redis_restart(&red, aof);
    sk_redis_disconnect(e.r);
    buy_n(&e, aid, 100, 10);
    CHECK_MSG(wait_rows(&e, aid, 30), "orders after the restart not persisted");
    stop_thread_worker(w, t, NULL);
    CHECK_EQ(db_stock(&e, aid), 20);
    sk_th_env_done(&e);
    sk_th_redis_stop(&red, 0);
}

SK_TEST(worker_sqlite_persists_orders_across_redis_kill_9_with_aof_always)
{
    redis_kill_9_with_aof_always(0);
}

SK_TEST(worker_pg_persists_orders_across_redis_kill_9_with_aof_always)
{
    redis_kill_9_with_aof_always(1);
}

/* ---- the database server unavailable under a running worker ---- */

/* What Redis holds of the entries after `after` (an entry id) in one
 * consistent read (MULTI): *total of them are in the stream, *delivered of
 * them were delivered to the group; *pending is the group's whole pending
 * count. */
static void backlog(struct sk_th_env *e, uint64_t aid, const char *after, long long *total,
                    long long *delivered, long long *pending_out)
{
    struct sk_keys k;
    sk_keys_for(&k, aid);
    redisReply *rep;
    const char *multi[] = {"MULTI"}, *exec[] = {"EXEC"};
    char from[64];
    snprintf(from, sizeof from, "(%.60s", after);
    const char *xrange[] = {"XRANGE", k.orders, from, "+"};
    const char *xpending[] = {"XPENDING", k.orders, SK_WORKER_GROUP};
    const char *xinfo[] = {"XINFO", "GROUPS", k.orders};
    CHECK_EQ(sk_redis_append(e->r, 1, multi, NULL), 0);
    CHECK_EQ(sk_redis_append(e->r, 4, xrange, NULL), 0);
    CHECK_EQ(sk_redis_append(e->r, 3, xpending, NULL), 0);
    CHECK_EQ(sk_redis_append(e->r, 3, xinfo, NULL), 0);
    CHECK_EQ(sk_redis_append(e->r, 1, exec, NULL), 0);
    for (int i = 0; i < 4; i++) { /* +OK, then QUEUED x 3 */
        CHECK_EQ(sk_redis_read(e->r, &rep), 0);
        CHECK_MSG(rep->type == REDIS_REPLY_STATUS, "MULTI: %s",
                  rep->type == REDIS_REPLY_ERROR ? rep->str : "?");
        freeReplyObject(rep);
    }
    CHECK_EQ(sk_redis_read(e->r, &rep), 0);
    CHECK(rep->type == REDIS_REPLY_ARRAY && rep->elements == 3);
    const redisReply *range = rep->element[0], *pend = rep->element[1], *groups = rep->element[2];
    CHECK(range->type == REDIS_REPLY_ARRAY);
    CHECK(pend->type == REDIS_REPLY_ARRAY && pend->elements == 4);
    CHECK(groups->type == REDIS_REPLY_ARRAY && groups->elements == 1);
    const redisReply *g = groups->element[0];
    unsigned long long lms = 0, lseq = 0;
    for (size_t i = 0; i + 1 < g->elements; i += 2)
        if (!strcmp(g->element[i]->str, "last-delivered-id"))
            CHECK_EQ(sscanf(g->element[i + 1]->str, "%llu-%llu", &lms, &lseq), 2);
    *total = (long long)range->elements;
    *delivered = 0;
    for (size_t i = 0; i < range->elements; i++) {
        unsigned long long ms, seq;
        CHECK_EQ(sscanf(range->element[i]->element[0]->str, "%llu-%llu", &ms, &seq), 2);
        if (ms < lms || (ms == lms && seq <= lseq)) (*delivered)++;
    }
    *pending_out = pend->element[0]->integer;
    freeReplyObject(rep);
}

/* A private database server of either kind, for the outage tests. */
struct db_server {
    int my; /* MariaDB, else PostgreSQL */
    struct sk_th_pg pg;
    struct sk_th_my m;
};

static void server_start(struct db_server *s, int my)
{
    memset(s, 0, sizeof *s);
    s->my = my;
    if (my)
        sk_th_my_start(&s->m);
    else
        sk_th_pg_start(&s->pg);
}

/* A worker on a thread over a private server; 20 orders persisted while
 * the server is up; then `outage` (stop, freeze or kill) while 30 more are
 * admitted: the worker keeps failing, nothing of them is acknowledged,
 * every one stays in the stream (pending or not yet delivered); then
 * `recover`: all 50 land exactly once, DB stock == initial - sold, nothing
 * dead-lettered. */
static void db_outage(int my, void (*outage)(struct db_server *),
                      void (*recover)(struct db_server *))
{
    struct db_server srv;
    server_start(&srv, my);
    struct sk_th_env e;
    memset(&e, 0, sizeof e);
    e.pg = 1;
    e.my = my;
    snprintf(e.dir, sizeof e.dir, "%s", sk_th_tmpdir());
    char base[200];
    if (my)
        sk_th_my_create_db(&srv.m, "outage", base, sizeof base);
    else
        sk_th_pg_create_db(&srv.pg, "outage", base, sizeof base);
    /* connect_timeout=2: every wait for the server is bounded by ~2 s. */
    snprintf(e.spec, sizeof e.spec, "%s?connect_timeout=2", base);
    sk_th_env_open(&e, sk_th_redis_url());
    enum { BEFORE = 20, DURING = 30, STOCK = 100 };
    static char ids[BEFORE + DURING][SK_ORDER_ID_MAX];
    uint64_t aid = sk_th_env_activity(&e, STOCK, 1, 1, 60);
    pthread_t t;
    sk_worker *w = start_thread_worker(&e, &t, 100);

    buy_ids(&e, aid, 1, BEFORE, ids);
    CHECK_MSG(wait_rows(&e, aid, BEFORE), "orders not persisted while the server is up");
    CHECK_MSG(wait_stat(w, offsetof(struct sk_worker_stats, acked), BEFORE), "not acked");
    /* The stream id of the last of them. */
    char last[64];
    sk_th_order_sid(ids[BEFORE - 1], last, sizeof last);

    outage(&srv);
    struct sk_worker_stats s0;
    sk_worker_stats(w, &s0);
    buy_ids(&e, aid, 1000, DURING, ids + BEFORE);
    /* The worker keeps trying (and failing) with the orders in the stream. */
    CHECK_MSG(wait_stat(w, offsetof(struct sk_worker_stats, db_errors), s0.db_errors + 2),
              "the worker never noticed the database was gone");
    struct sk_worker_stats s1;
    sk_worker_stats(w, &s1);
    CHECK_EQ(s1.acked, BEFORE);
    CHECK_EQ(s1.persisted, BEFORE);
    CHECK_EQ(s1.dead_lettered, 0);
    long long total, delivered, pend;
    backlog(&e, aid, last, &total, &delivered, &pend);
    /* All 30 in the stream (trimming removes only acknowledged entries);
     * those delivered are pending (not acknowledged), the rest wait for
     * delivery; the first 20 are all acknowledged. */
    CHECK_EQ(total, DURING);
    CHECK_EQ(pend, delivered);

    recover(&srv);
    CHECK_MSG(wait_rows(&e, aid, BEFORE + DURING), "not drained after the server came back");
    CHECK_MSG(wait_stat(w, offsetof(struct sk_worker_stats, acked), BEFORE + DURING), "not acked");
    CHECK_EQ(pending(&e, aid), 0);
    struct sk_worker_stats s;
    stop_thread_worker(w, t, &s);
    CHECK_EQ(s.dead_lettered, 0);
    CHECK(s.db_errors > s0.db_errors);
    /* Exactly once: every admitted order is one row, nothing else is. */
    for (int i = 0; i < BEFORE + DURING; i++) {
        struct sk_order o;
        CHECK_MSG(sk_store_order_get(e.st, ids[i], &o) == 0, "order %s missing", ids[i]);
        CHECK_EQ(o.quantity, 1);
    }
    struct sk_order_counts c = counts(&e, aid);
    CHECK_EQ(c.orders[SK_ORDER_CREATED], BEFORE + DURING);
    CHECK_EQ(c.units[SK_ORDER_CREATED], BEFORE + DURING);
    CHECK_EQ(c.stock_failures, 0);
    CHECK_EQ(db_stock(&e, aid), STOCK - (BEFORE + DURING));
    struct sk_keys k;
    sk_keys_for(&k, aid);
    CHECK_EQ(xlen(&e, k.dlq), 0);
    sk_th_env_done(&e);
    if (my)
        sk_mysql_spawn_stop(&srv.m.srv);
    else
        sk_th_pg_stop(&srv.pg);
}

static void db_stop(struct db_server *s)
{
    if (s->my)
        sk_th_my_stop(&s->m);
    else
        sk_th_pg_stop(&s->pg);
}
static void db_start_again(struct db_server *s)
{
    if (s->my)
        sk_th_my_restart(&s->m);
    else
        sk_th_pg_restart(&s->pg);
}
static void db_freeze(struct db_server *s)
{
    if (s->my)
        sk_th_my_freeze(&s->m, 1);
    else
        sk_th_pg_freeze(&s->pg, 1);
}
static void db_thaw(struct db_server *s)
{
    if (s->my)
        sk_th_my_freeze(&s->m, 0);
    else
        sk_th_pg_freeze(&s->pg, 0);
}
static void db_kill_9(struct db_server *s)
{
    sk_th_my_kill(&s->m); /* MariaDB only: InnoDB recovers at the next start */
}

SK_TEST(worker_pg_waits_while_postgresql_is_stopped_and_drains_when_it_returns)
{
    db_outage(0, db_stop, db_start_again);
}

/* Frozen (SIGSTOP): connections hang instead of failing; every call is cut
 * at the client-side bound, and a batch abandoned mid-commit may have
 * committed: its re-delivery is a duplicate, never a second row. */
SK_TEST(worker_pg_waits_while_postgresql_is_frozen_and_drains_when_it_thaws)
{
    db_outage(0, db_freeze, db_thaw);
}

SK_TEST(worker_mysql_waits_while_mariadb_is_stopped_and_drains_when_it_returns)
{
    db_outage(1, db_stop, db_start_again);
}

SK_TEST(worker_mysql_waits_while_mariadb_is_frozen_and_drains_when_it_thaws)
{
    db_outage(1, db_freeze, db_thaw);
}

/* SIGKILL mid-sale, restarted on the same data directory: InnoDB's crash
 * recovery keeps every committed batch (the worker acknowledged only
 * those) and drops the one in flight, which the worker sends again. */
SK_TEST(worker_mysql_waits_while_mariadb_is_killed_9_and_drains_after_its_crash_recovery)
{
    db_outage(1, db_kill_9, db_start_again);
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
