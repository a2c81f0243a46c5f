/* test_http_db_off_loop.c - `seckill serve` never waits for its database
 * on the event loop (docs/design.md, "The database off the event loop"),
 * over real HTTP against real servers:
 *   - PostgreSQL frozen (SIGSTOP of every server process) while buyers
 *     purchase on the same process and others poll their orders and
 *     /readyz: purchases are answered while it is frozen, order reads
 *     answer 503 at their deadline, /readyz answers at once; after SIGCONT
 *     everything works and every accepted order reaches the database;
 *   - SQLite held by another connection's exclusive transaction during
 *     pay and cancel: 503 at the deadline; a call still queued at its
 *     deadline never runs; one that was running completes (a cancel's
 *     units go back exactly once); beyond the queue cap 503 busy;
 *   - ids a client makes up neither grow the process nor push out the
 *     activities it knows (the sold-out fast path of a later activity);
 *   - activity ids >= 2^63 are 404 on both stores;
 *   - order polls: one of an order not persisted yet is answered from
 *     Redis with the database frozen; one the database cannot answer in
 *     time is refused at once (503 + Retry-After) instead of queueing.
 * Latency bounds below are not speed checks: they separate "answered on
 * the loop" (milliseconds) from "waited for the frozen database" (the
 * store's own 2 s bound), with a wide margin. */
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <libpq-fe.h>
#include <sqlite3.h>

#include "core/clock.h"
#include "engine/activity.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/http_client.h"
#include "support/pg_harness.h"
#include "support/proc_watch.h"

SK_TH_PG_USED

#define ADMIN "Authorization: Bearer " SK_TH_ADMIN_TOKEN "\r\n"
/* a purchase that waited for a frozen database would take the store's
 * own bound (2 s: connect_timeout=2) */
#define LOOP_ANSWER_MS 1500

static void pause_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int call(struct sk_th_http *c, const char *method, const char *path, uint64_t uid,
                const char *body, struct sk_th_resp *r)
{
    char hdr[64] = "";
    if (uid) snprintf(hdr, sizeof hdr, "X-User-Id: %" PRIu64 "\r\n", uid);
    return sk_th_http_req(c, method, path, hdr, body, r);
}

static int is_error(const struct sk_th_resp *r, int status, const char *code)
{
    char got[64] = "";
    if (r->status != status) return 0;
    json_t *j = json_loadb(r->body, r->body_len, 0, NULL);
    json_t *e = j ? json_object_get(j, "error") : NULL;
    if (e && json_is_string(e)) snprintf(got, sizeof got, "%s", json_string_value(e));
    json_decref(j);
    return !strcmp(got, code);
}

static int retry_after(const struct sk_th_resp *r)
{
    char v[16];
    return sk_th_http_header(r, "retry-after", v, sizeof v) == 0 && atoi(v) >= 1;
}

static void wait_status(struct sk_th_http *c, const char *path, int want, int64_t within_ms)
{
    int64_t until = sk_mono_ms() + within_ms;
    struct sk_th_resp r;
    while (sk_th_http_req(c, "GET", path, NULL, NULL, &r) != want) {
        CHECK_MSG(sk_mono_ms() < until, "%s: %d, want %d: %s", path, r.status, want, r.body);
        pause_ms(20);
    }
}

/* Creates, preheats and opens an activity; returns its id. */
static uint64_t activity(struct sk_th_http *c, int stock)
{
    uint64_t id = sk_th_unique_id();
    char body[512];
    sk_th_activity_json(body, sizeof body, id, "off loop", stock, 1800, 0);
    sk_th_http_activity_open(c, id, body);
    return id;
}

static int buy(struct sk_th_http *c, uint64_t aid, uint64_t uid, char *oid, size_t cap,
               struct sk_th_resp *r)
{
    char path[96];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", aid);
    int st = call(c, "POST", path, uid, NULL, r);
    if (st == 200 && oid) sk_th_resp_field(r, "order_id", oid, cap);
    return st;
}

static void order_status(struct sk_th_http *c, const char *oid, uint64_t uid, char *out, size_t cap)
{
    char path[128];
    struct sk_th_resp r;
    snprintf(path, sizeof path, "/api/v1/orders/%s", oid);
    CHECK_MSG(call(c, "GET", path, uid, NULL, &r) == 200, "GET %s: %d %s", oid, r.status, r.body);
    sk_th_resp_field(&r, "status", out, cap);
}

/* GET the order until it has status want (bounded). */
static void wait_order(struct sk_th_http *c, const char *oid, uint64_t uid, const char *want)
{
    char st[32] = "";
    int64_t until = sk_mono_ms() + 20000;
    for (;;) {
        char path[128];
        struct sk_th_resp r;
        snprintf(path, sizeof path, "/api/v1/orders/%s", oid);
        if (call(c, "GET", path, uid, NULL, &r) == 200) {
            sk_th_resp_field(&r, "status", st, sizeof st);
            if (!strcmp(st, want)) return;
        }
        CHECK_MSG(sk_mono_ms() < until, "order %s: %d %s, want %s", oid, r.status, st, want);
        pause_ms(20);
    }
}

/* n orders (n <= 4) of one unit bought by users first, first + 1, ...
 * and waited for until the database has them (created); their ids into
 * oid[0..n). */
static void bought_persisted(struct sk_th_http *c, uint64_t aid, uint64_t first, int n,
                             char oid[][64])
{
    for (int i = 0; i < n; i++) {
        struct sk_th_resp r;
        CHECK_EQ(buy(c, aid, first + (uint64_t)i, oid[i], 64, &r), 200);
        wait_order(c, oid[i], first + (uint64_t)i, "created");
    }
}

static int order_op(struct sk_th_http *c, const char *oid, const char *op, uint64_t uid,
                    struct sk_th_resp *r)
{
    char path[128];
    snprintf(path, sizeof path, "/api/v1/orders/%s/%s", oid, op);
    return call(c, "POST", path, uid, NULL, r);
}

static long long remaining(struct sk_th_http *c, uint64_t aid)
{
    char path[96], v[32];
    struct sk_th_resp r;
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64, aid);
    CHECK_MSG(sk_th_http_req(c, "GET", path, NULL, NULL, &r) == 200, "%d %s", r.status, r.body);
    sk_th_resp_field(&r, "stock_remaining", v, sizeof v);
    return atoll(v);
}

/* ---- PostgreSQL frozen ------------------------------------------------- */

#define BUYERS 3
#define MAX_BOUGHT 15000

struct frozen_run {
    int port;
    uint64_t aid;
    atomic_int stop;
    /* buyers */
    pthread_mutex_t mu;
    char (*oids)[64];
    uint64_t *oid_users;
    int n_oids;
    atomic_int bought, buy_other, buy_slowest_ms;
    /* order pollers: the orders persisted before the freeze */
    char polled[4][64];
    uint64_t polled_users[4];
    atomic_int polls, polls_503, polls_busy, polls_other, polls_no_retry_after;
    atomic_int busy_slowest_ms; /* the slowest refusal at once */
    atomic_int late_slowest_ms; /* the slowest poll that waited and got 503 */
    /* readyz */
    atomic_int ready_200, ready_503, ready_slowest_ms;
};

static void slowest(atomic_int *slot, int64_t ms)
{
    int cur = atomic_load(slot);
    while (ms > cur && !atomic_compare_exchange_weak(slot, &cur, (int)ms)) {
    }
}

struct buyer_arg {
    struct frozen_run *x;
    int idx;
};

static void *buyer_main(void *arg)
{
    struct buyer_arg *b = arg;
    struct frozen_run *x = b->x;
    struct sk_th_http c;
    sk_th_http_open(&c, x->port);
    for (uint64_t k = 0; !atomic_load(&x->stop); k++) {
        if (k >= MAX_BOUGHT / BUYERS) { /* enough: every order is checked later */
            pause_ms(10);
            continue;
        }
        uint64_t uid = 100000 + (uint64_t)b->idx * 1000000 + k;
        char oid[64];
        struct sk_th_resp r;
        int64_t t0 = sk_mono_ms();
        int st = buy(&c, x->aid, uid, oid, sizeof oid, &r);
        slowest(&x->buy_slowest_ms, sk_mono_ms() - t0);
        if (st != 200) {
            atomic_fetch_add(&x->buy_other, 1);
            continue;
        }
        pthread_mutex_lock(&x->mu);
        if (x->n_oids < MAX_BOUGHT) {
            snprintf(x->oids[x->n_oids], 64, "%s", oid);
            x->oid_users[x->n_oids++] = uid;
        }
        pthread_mutex_unlock(&x->mu);
        atomic_fetch_add(&x->bought, 1);
    }
    sk_th_http_close(&c);
    return NULL;
}

static void *poller_main(void *arg)
{
    struct frozen_run *x = arg;
    struct sk_th_http c;
    sk_th_http_open(&c, x->port);
    for (int k = 0; !atomic_load(&x->stop); k++) {
        char path[128];
        struct sk_th_resp r;
        snprintf(path, sizeof path, "/api/v1/orders/%s", x->polled[k % 4]);
        int64_t t0 = sk_mono_ms();
        call(&c, "GET", path, x->polled_users[k % 4], NULL, &r);
        int64_t ms = sk_mono_ms() - t0;
        atomic_fetch_add(&x->polls, 1);
        int busy = is_error(&r, 503, "busy");
        if (busy || is_error(&r, 503, "unavailable")) {
            atomic_fetch_add(busy ? &x->polls_busy : &x->polls_503, 1);
            slowest(busy ? &x->busy_slowest_ms : &x->late_slowest_ms, ms);
            if (!retry_after(&r)) atomic_fetch_add(&x->polls_no_retry_after, 1);
        } else {
            atomic_fetch_add(&x->polls_other, 1);
        }
    }
    sk_th_http_close(&c);
    return NULL;
}

static void *readyz_main(void *arg)
{
    struct frozen_run *x = arg;
    struct sk_th_http c;
    sk_th_http_open(&c, x->port);
    while (!atomic_load(&x->stop)) {
        struct sk_th_resp r;
        int64_t t0 = sk_mono_ms();
        int st = sk_th_http_req(&c, "GET", "/readyz", NULL, NULL, &r);
        slowest(&x->ready_slowest_ms, sk_mono_ms() - t0);
        atomic_fetch_add(st == 200 ? &x->ready_200 : &x->ready_503, st == 200 || st == 503);
        pause_ms(20);
    }
    sk_th_http_close(&c);
    return NULL;
}

/* The order ids of activity aid in the database. */
static int pg_orders(const char *url, uint64_t aid, char (*out)[64], int cap)
{
    PGconn *c = PQconnectdb(url);
    CHECK_MSG(PQstatus(c) == CONNECTION_OK, "%s", PQerrorMessage(c));
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT order_id FROM orders WHERE activity_id = %" PRIu64, aid);
    PGresult *r = PQexec(c, sql);
    CHECK_MSG(PQresultStatus(r) == PGRES_TUPLES_OK, "%s", PQresultErrorMessage(r));
    int n = PQntuples(r);
    for (int i = 0; i < n && i < cap; i++)
        snprintf(out[i], 64, "%s", PQgetvalue(r, i, 0));
    PQclear(r);
    PQfinish(c);
    return n;
}

static int cmp_oid(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

/* A private PostgreSQL database (name; its URL in base) and a serve on it
 * (connect_timeout=2: the store's own bound) with flags after --db,
 * ready; c connected to it. */
static void pg_serve(struct sk_th_pg *pg, const char *name, char base[200],
                     const char *const *flags, struct sk_th_serve *s, struct sk_th_http *c)
{
    static char url[260];
    sk_th_pg_start(pg);
    sk_th_pg_create_db(pg, name, base, 200);
    snprintf(url, sizeof url, "%s?connect_timeout=2", base);
    const char *extra[16] = {"--db", url};
    int n = 2;
    for (int i = 0; flags[i] && n < 15; i++)
        extra[n++] = flags[i];
    extra[n] = NULL;
    sk_th_serve_start(s, sk_th_redis_url(), extra);
    sk_th_http_open(c, s->port);
    wait_status(c, "/readyz", 200, 15000);
}

SK_TEST_T(pg_frozen_purchases_answer_order_reads_503_readyz_at_once_and_nothing_is_lost, 240)
{
    struct sk_th_pg pg;
    char base[200];
    struct sk_th_serve s;
    struct sk_th_http c;
    const char *flags[] = {"--role", "all", "--db-timeout-ms", "1000", "--db-poll-wait-ms",
                           "100",    NULL};
    pg_serve(&pg, "offloop", base, flags, &s, &c);
    const int stock = 1000000;
    struct frozen_run *x = calloc(1, sizeof *x);
    CHECK(x != NULL);
    x->oids = calloc(MAX_BOUGHT, 64);
    x->oid_users = calloc(MAX_BOUGHT, sizeof *x->oid_users);
    CHECK(x->oids && x->oid_users);
    pthread_mutex_init(&x->mu, NULL);
    x->port = s.port;
    x->aid = activity(&c, stock);
    struct sk_th_resp r;
    for (int i = 0; i < 4; i++) {
        x->polled_users[i] = 11 + (uint64_t)i;
        CHECK_EQ(buy(&c, x->aid, x->polled_users[i], x->polled[i], 64, &r), 200);
        wait_order(&c, x->polled[i], x->polled_users[i], "created");
    }

    sk_th_pg_freeze(&pg, 1);
    int64_t frozen_at = sk_mono_ms();
    pthread_t t[BUYERS + 2];
    struct buyer_arg ba[BUYERS];
    for (int i = 0; i < BUYERS; i++) {
        ba[i] = (struct buyer_arg){x, i};
        CHECK_EQ(pthread_create(&t[i], NULL, buyer_main, &ba[i]), 0);
    }
    CHECK_EQ(pthread_create(&t[BUYERS], NULL, poller_main, x), 0);
    CHECK_EQ(pthread_create(&t[BUYERS + 1], NULL, readyz_main, x), 0);
    /* a pay while frozen: 503 at its deadline, with Retry-After */
    CHECK_EQ(order_op(&c, x->polled[0], "pay", x->polled_users[0], &r), 503);
    CHECK_MSG(is_error(&r, 503, "unavailable") && retry_after(&r), "%s", r.body);
    /* the activity read comes from this process's cache */
    char path[96];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64, x->aid);
    CHECK_MSG(sk_th_http_req(&c, "GET", path, NULL, NULL, &r) == 200, "%d %s", r.status, r.body);
    /* run until everyone has seen the freeze for a while (bounded) */
    int64_t until = sk_mono_ms() + 30000;
    while (sk_mono_ms() - frozen_at < 3000 || atomic_load(&x->polls_busy) < 4 ||
           atomic_load(&x->ready_503) < 3) {
        CHECK_MSG(sk_mono_ms() < until,
                  "frozen run: %d bought, %d polls 503 late, %d at once, %d readyz 503",
                  atomic_load(&x->bought), atomic_load(&x->polls_503), atomic_load(&x->polls_busy),
                  atomic_load(&x->ready_503));
        pause_ms(50);
    }
    atomic_store(&x->stop, 1);
    for (int i = 0; i < BUYERS + 2; i++)
        pthread_join(t[i], NULL);
    int64_t frozen_for = sk_mono_ms() - frozen_at;

    /* Still frozen: every purchase was answered, none waited for it. */
    fprintf(
        stderr,
        "# frozen %lld ms: %d purchases (slowest %d ms), %d order reads (%d x 503 late, slowest "
        "%d ms; %d x 503 at once, slowest %d ms), readyz %d x 200 / %d x 503 (slowest %d ms)\n",
        (long long)frozen_for, atomic_load(&x->bought), atomic_load(&x->buy_slowest_ms),
        atomic_load(&x->polls), atomic_load(&x->polls_503), atomic_load(&x->late_slowest_ms),
        atomic_load(&x->polls_busy), atomic_load(&x->busy_slowest_ms), atomic_load(&x->ready_200),
        atomic_load(&x->ready_503), atomic_load(&x->ready_slowest_ms));
    CHECK_EQ(atomic_load(&x->buy_other), 0);
    CHECK(atomic_load(&x->bought) >= 50);
    CHECK_MSG(atomic_load(&x->buy_slowest_ms) < LOOP_ANSWER_MS, "a purchase took %d ms",
              atomic_load(&x->buy_slowest_ms));
    CHECK_MSG(atomic_load(&x->ready_slowest_ms) < LOOP_ANSWER_MS, "a /readyz took %d ms",
              atomic_load(&x->ready_slowest_ms));
    /* Every order read: 503 with Retry-After. Once a call missed its
     * deadline the database is known stuck: the reads after it are refused
     * at once instead of each waiting its own deadline (the poller's
     * first read, sent into the freeze, waits it out). */
    CHECK_EQ(atomic_load(&x->polls_other), 0);
    CHECK_EQ(atomic_load(&x->polls_no_retry_after), 0);
    CHECK_MSG(atomic_load(&x->polls_503) <= 2, "%d order reads waited for their deadline",
              atomic_load(&x->polls_503));
    CHECK_MSG(atomic_load(&x->busy_slowest_ms) < LOOP_ANSWER_MS, "a refusal took %d ms",
              atomic_load(&x->busy_slowest_ms));
    /* and a poll that did wait was answered near its own bound (100 ms),
     * not at the 1 s deadline of pays and cancels */
    CHECK_MSG(atomic_load(&x->late_slowest_ms) < 600, "a poll waited %d ms for its 503",
              atomic_load(&x->late_slowest_ms));

    sk_th_pg_freeze(&pg, 0);
    wait_status(&c, "/readyz", 200, 30000);
    /* The pay sent while frozen may have run late (its answer dropped) or
     * never: either way a retry tells the truth. */
    char st[32];
    int64_t pay_until = sk_mono_ms() + 20000;
    while (order_op(&c, x->polled[0], "pay", x->polled_users[0], &r) != 200)
        CHECK_MSG(sk_mono_ms() < pay_until && r.status == 503, "pay: %d %s", r.status, r.body);
    sk_th_resp_field(&r, "status", st, sizeof st);
    CHECK_STR(st, "paid");
    order_status(&c, x->polled[1], x->polled_users[1], st, sizeof st);
    CHECK_STR(st, "created");

    /* Nothing was lost: every accepted order reaches the database. */
    CHECK_EQ(x->n_oids, atomic_load(&x->bought));
    int want = x->n_oids + 4;
    char(*got)[64] = calloc((size_t)want + 16, 64);
    CHECK(got != NULL);
    int64_t db_until = sk_mono_ms() + 60000;
    int n;
    while ((n = pg_orders(base, x->aid, got, want + 16)) < want) {
        CHECK_MSG(sk_mono_ms() < db_until, "%d of %d orders in the database", n, want);
        pause_ms(100);
    }
    CHECK_EQ(n, want);
    qsort(got, (size_t)n, 64, cmp_oid);
    for (int i = 0; i < x->n_oids; i++)
        CHECK_MSG(bsearch(x->oids[i], got, (size_t)n, 64, cmp_oid) != NULL,
                  "accepted order %s is not in the database", x->oids[i]);
    CHECK_EQ(remaining(&c, x->aid), stock - want);
    sk_th_http_close(&c);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
    sk_th_pg_stop(&pg);
    free(got);
    free(x->oids);
    free(x->oid_users);
    free(x);
}

/* ---- SQLite held by a writer -------------------------------------------- */

/* Another connection's exclusive transaction on serve's SQLite file: every
 * write waits behind it (reads go on: WAL). */
static sqlite3 *hold(const struct sk_th_serve *s)
{
    sqlite3 *db;
    CHECK_EQ(sqlite3_open(s->db + 7, &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000); /* the order worker may be committing */
    CHECK_MSG(sqlite3_exec(db, "BEGIN EXCLUSIVE", NULL, NULL, NULL) == SQLITE_OK, "%s",
              sqlite3_errmsg(db));
    return db;
}

static void release_hold(sqlite3 *db)
{
    CHECK_EQ(sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
}

/* n requests on n connections at once; their statuses and error codes. */
static void at_once(int port, int n, const char *const *paths, uint64_t uid, int *status,
                    char (*code)[32])
{
    struct sk_th_http c[8];
    CHECK(n <= 8);
    for (int i = 0; i < n; i++) {
        sk_th_http_open(&c[i], port);
        char req[400];
        int len =
            snprintf(req, sizeof req,
                     "GET %s HTTP/1.1\r\nHost: x\r\nX-User-Id: %" PRIu64 "\r\n\r\n", paths[i], uid);
        CHECK(send(c[i].fd, req, (size_t)len, MSG_NOSIGNAL) == len);
    }
    for (int i = 0; i < n; i++) {
        char buf[4096];
        size_t got = 0;
        while (got < sizeof buf - 1) {
            ssize_t k = recv(c[i].fd, buf + got, sizeof buf - 1 - got, 0);
            CHECK_MSG(k > 0, "connection %d: no answer", i);
            got += (size_t)k;
            buf[got] = 0;
            if (strstr(buf, "\r\n\r\n") && strchr(strstr(buf, "\r\n\r\n"), '}')) break;
        }
        CHECK_EQ(sscanf(buf, "HTTP/1.1 %d", &status[i]), 1);
        const char *e = strstr(buf, "\"error\":\"");
        code[i][0] = 0;
        if (e) sscanf(e + 9, "%31[^\"]", code[i]);
        sk_th_http_close(&c[i]);
    }
}

SK_TEST_T(sqlite_held_by_a_writer_pay_and_cancel_answer_503_in_time_and_purchases_go_on, 120)
{
    struct sk_th_serve s;
    const char *extra[] = {"--role",         "all", "--db-pool", "1", "--db-timeout-ms", "300",
                           "--db-queue-max", "2",   NULL};
    sk_th_serve_start(&s, sk_th_redis_url(), extra);
    struct sk_th_http c;
    sk_th_http_open(&c, s.port);
    wait_status(&c, "/readyz", 200, 15000);
    uint64_t aid = activity(&c, 1000);
    char oid[4][64];
    struct sk_th_resp r;
    bought_persisted(&c, aid, 21, 4, oid);
    long long left = remaining(&c, aid);
    CHECK_EQ(left, 996);

    sqlite3 *db = hold(&s);
    /* The pay takes the only pool thread and waits for the lock: the buyer
     * gets 503 at the deadline; the pay goes on and completes later. */
    CHECK_EQ(order_op(&c, oid[0], "pay", 21, &r), 503);
    CHECK_MSG(is_error(&r, 503, "unavailable") && retry_after(&r), "%s", r.body);
    /* This cancel waits in the queue behind it and is still there at its
     * deadline: 503, and it never runs. */
    CHECK_EQ(order_op(&c, oid[1], "cancel", 22, &r), 503);
    CHECK_MSG(is_error(&r, 503, "unavailable") && retry_after(&r), "%s", r.body);
    /* Two calls missed their deadline and nothing came back since: the
     * database is stuck, and polls are refused at once (503 busy) rather
     * than queued for a deadline of their own. (The pool's own cap is
     * test_store_pool.c's.) */
    char paths[3][96];
    const char *pp[3];
    for (int i = 0; i < 3; i++) {
        snprintf(paths[i], sizeof paths[i], "/api/v1/orders/%s", oid[3]);
        pp[i] = paths[i];
    }
    int status[3];
    char code[3][32];
    at_once(s.port, 3, pp, 24, status, code);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(status[i], 503);
        CHECK_STR(code[i], "busy");
    }
    /* Purchases and the activity read never wait for the store. */
    for (uint64_t u = 500; u < 520; u++) {
        int64_t t0 = sk_mono_ms();
        CHECK_EQ(buy(&c, aid, u, NULL, 0, &r), 200);
        CHECK_MSG(sk_mono_ms() - t0 < LOOP_ANSWER_MS, "a purchase took %lld ms",
                  (long long)(sk_mono_ms() - t0));
    }
    CHECK_EQ(remaining(&c, aid), left - 20);
    release_hold(db);

    /* The pay that was running completed; a retry tells the truth. */
    wait_order(&c, oid[0], 21, "paid");
    CHECK_EQ(order_op(&c, oid[0], "pay", 21, &r), 200);
    /* The cancel that never left the queue changed nothing. */
    char st[32];
    order_status(&c, oid[1], 22, st, sizeof st);
    CHECK_STR(st, "created");
    CHECK_EQ(remaining(&c, aid), left - 20);
    CHECK_EQ(order_op(&c, oid[1], "cancel", 22, &r), 200);
    CHECK_EQ(remaining(&c, aid), left - 20 + 1);
    /* That cancel's released mark goes to the pool after its answer; a
     * read queued behind it (one thread, in order) says it is done, so
     * the cancel below is the call the only thread runs. */
    order_status(&c, oid[1], 22, st, sizeof st);
    CHECK_STR(st, "cancelled");

    /* A cancel that was running at its deadline: 503 to the buyer, then it
     * completes, and its units go back exactly once. */
    db = hold(&s);
    CHECK_EQ(order_op(&c, oid[2], "cancel", 23, &r), 503);
    CHECK_EQ(remaining(&c, aid), left - 20 + 1);
    /* /readyz: the probe waits behind the stuck call; it says so at once */
    wait_status(&c, "/readyz", 503, 4000);
    release_hold(db);
    wait_order(&c, oid[2], 23, "cancelled");
    int64_t until = sk_mono_ms() + 10000;
    while (remaining(&c, aid) != left - 20 + 2) {
        CHECK_MSG(sk_mono_ms() < until, "the late cancel's unit did not come back: %lld",
                  remaining(&c, aid));
        pause_ms(20);
    }
    CHECK_EQ(order_op(&c, oid[2], "cancel", 23, &r), 200); /* again: nothing more */
    CHECK_EQ(remaining(&c, aid), left - 20 + 2);
    wait_status(&c, "/readyz", 200, 10000);
    sk_th_http_close(&c);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
}

/* ---- unknown ids --------------------------------------------------------- */

/* The exposition is read whole: it outgrows a response buffer once the
 * flood has added its per-endpoint lines. One process, so any connection
 * reaches the counter of the process that answered the purchases. */
static uint64_t fastpath_count(struct sk_th_http *c)
{
    static char text[1 << 20];
    CHECK_EQ(sk_th_http_get_big(c->port, "/metrics", text, sizeof text), 200);
    const char *p = strstr(text, "\nseckill_soldout_fastpath_total ");
    CHECK(p != NULL);
    return strtoull(p + 32, NULL, 10);
}

/* Ids nobody created, spread over the whole id space. */
static void unknown_flood(struct sk_th_http *c, uint64_t *seed, int n)
{
    struct sk_th_resp r;
    for (int i = 0; i < n; i++) {
        uint64_t id = 1 + sk_th_rng(seed) % SK_ACTIVITY_ID_MAX;
        char path[96];
        snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", id);
        CHECK_EQ(call(c, "POST", path, 7, NULL, &r), 404);
        snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64, sk_th_rng(seed) % 1000000 + 1);
        int st = sk_th_http_req(c, "GET", path, NULL, NULL, &r);
        CHECK_MSG(st == 404 || st == 200, "%s: %d", path, st);
    }
}

/* Sells the single unit of a new activity; the next purchase must come
 * back from the local sold-out fast path. */
static void check_fast_path(struct sk_th_http *c, uint64_t aid)
{
    struct sk_th_resp r;
    CHECK_EQ(buy(c, aid, 1, NULL, 0, &r), 200);
    CHECK_EQ(buy(c, aid, 2, NULL, 0, &r), 409); /* Redis says sold out: now known here */
    uint64_t before = fastpath_count(c);
    CHECK_EQ(buy(c, aid, 3, NULL, 0, &r), 409);
    CHECK_EQ(buy(c, aid, 4, NULL, 0, &r), 409);
    CHECK_EQ(fastpath_count(c) - before, 2);
}

SK_TEST_T(unknown_ids_neither_grow_memory_nor_evict_known_activities, 240)
{
#ifdef __SANITIZE_ADDRESS__
    /* AddressSanitizer keeps freed memory in a quarantine (up to 256 MiB):
     * without it, reuse shows in the RSS as it does in a normal build */
    const char *asan = getenv("ASAN_OPTIONS");
    char opts[512];
    snprintf(opts, sizeof opts, "%s%squarantine_size_mb=0", asan ? asan : "",
             asan && *asan ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
#endif
    struct sk_th_serve s;
    /* one process: its pid is the serve pid; the in-flight cap makes every
     * purchase of an id need an entry */
    const char *extra[] = {"--role", "api", "--max-inflight", "1000", NULL};
    sk_th_serve_start(&s, sk_th_redis_url(), extra);
    struct sk_th_http c;
    sk_th_http_open(&c, s.port);
    wait_status(&c, "/readyz", 200, 15000);
    uint64_t known = activity(&c, 1);
    check_fast_path(&c, known);
    uint64_t seed = 11;
    unknown_flood(&c, &seed, 3000); /* warm: allocator arenas, caches full */
    long warm = sk_th_proc_rss_kib(s.pid);
    unknown_flood(&c, &seed, 12000); /* 12,000 more purchase ids, 12,000 reads */
    long after = sk_th_proc_rss_kib(s.pid);
    fprintf(stderr, "# RSS after 3,000 unknown ids: %ld KiB, after 15,000: %ld KiB\n", warm, after);
#ifndef __SANITIZE_THREAD__
    /* ThreadSanitizer's allocator keeps freed memory and shadows what it
     * hands out: the growth is shown, not held, under it */
    CHECK_MSG(after - warm < 2048, "RSS grew %ld KiB over 12,000 unknown ids", after - warm);
#endif
    /* the activity known before keeps its fast path; one created after
     * the flood gets one too */
    struct sk_th_resp r;
    uint64_t before = fastpath_count(&c);
    CHECK_EQ(buy(&c, known, 5, NULL, 0, &r), 409);
    CHECK_EQ(fastpath_count(&c) - before, 1);
    check_fast_path(&c, activity(&c, 1));
    /* an unknown id stays unknown (404), a created one is found at once */
    uint64_t fresh = sk_th_unique_id();
    char path[96];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64, fresh);
    CHECK_EQ(sk_th_http_req(&c, "GET", path, NULL, NULL, &r), 404);
    char body[512], start[SK_TIME_RFC3339_MAX], end[SK_TIME_RFC3339_MAX];
    sk_time_format_rfc3339((sk_wall_ms() / 1000 + 600) * 1000, start, sizeof start);
    sk_time_format_rfc3339((sk_wall_ms() / 1000 + 3600) * 1000, end, sizeof end);
    snprintf(body, sizeof body,
             "{\"id\":%" PRIu64 ",\"name\":\"late\",\"stock\":5,\"per_user_limit\":1,"
             "\"start\":\"%s\",\"end\":\"%s\"}",
             fresh, start, end);
    CHECK_EQ(sk_th_http_req(&c, "POST", "/api/v1/activities", ADMIN, body, &r), 201);
    CHECK_EQ(sk_th_http_req(&c, "GET", path, NULL, NULL, &r), 200); /* this process forgot it */
    /* created, not preheated: a purchase sees it closed, not unknown */
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", fresh);
    CHECK_MSG(call(&c, "POST", path, 9, NULL, &r) == 403 && is_error(&r, 403, "closed"), "%d %s",
              r.status, r.body);
    sk_th_http_close(&c);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
}

/* ---- ids beyond bigint --------------------------------------------------- */

static void ids_beyond_bigint(const char *db)
{
    struct sk_th_serve s;
    const char *extra[] = {"--role", "api", "--db", db, NULL};
    sk_th_serve_start(&s, sk_th_redis_url(), extra);
    struct sk_th_http c;
    sk_th_http_open(&c, s.port);
    wait_status(&c, "/readyz", 200, 15000);
    static const char *const ids[] = {"9223372036854775808", "9223372036854775809",
                                      "18446744073709551615", "1000000000000000"};
    struct sk_th_resp r;
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        char path[128];
        snprintf(path, sizeof path, "/api/v1/activities/%s", ids[i]);
        CHECK_MSG(sk_th_http_req(&c, "GET", path, NULL, NULL, &r) == 404 &&
                      is_error(&r, 404, "unknown_activity"),
                  "GET %s: %d %s", path, r.status, r.body);
        snprintf(path, sizeof path, "/api/v1/activities/%s/purchase", ids[i]);
        CHECK_MSG(call(&c, "POST", path, 5, NULL, &r) == 404, "%s: %d %s", path, r.status, r.body);
        static const char *const ops[] = {"preheat", "open", "close", "stats"};
        for (int k = 0; k < 4; k++) {
            snprintf(path, sizeof path, "/api/v1/activities/%s/%s", ids[i], ops[k]);
            CHECK_MSG(sk_th_http_req(&c, k == 3 ? "GET" : "POST", path, ADMIN, NULL, &r) == 404,
                      "%s: %d %s", path, r.status, r.body);
        }
    }
    sk_th_http_close(&c);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
}

SK_TEST(activity_ids_beyond_bigint_are_404_never_5xx_on_sqlite)
{
    char db[400];
    snprintf(db, sizeof db, "sqlite:%s/big.db", sk_th_tmpdir());
    ids_beyond_bigint(db);
}

SK_TEST(activity_ids_beyond_bigint_are_404_never_5xx_on_postgres)
{
    char db[300];
    sk_th_pg_fresh_db(db, sizeof db);
    ids_beyond_bigint(db);
}

/* ---- order polls: Redis first, the database bounded ---------------------- */

/* GET /api/v1/orders/{oid} as uid: its status code; *ms how long it took. */
static int poll_order(struct sk_th_http *c, const char *oid, uint64_t uid, struct sk_th_resp *r,
                      int64_t *ms)
{
    char path[256];
    snprintf(path, sizeof path, "/api/v1/orders/%s", oid);
    int64_t t0 = sk_mono_ms();
    int st = call(c, "GET", path, uid, NULL, r);
    *ms = sk_mono_ms() - t0;
    return st;
}

SK_TEST_T(polls_of_orders_not_persisted_yet_are_answered_from_redis_with_the_database_frozen, 120)
{
    /* no order worker: nothing is ever persisted; a poll that waited for
     * the frozen database would take the 3 s deadline */
    struct sk_th_pg pg;
    char base[200];
    struct sk_th_serve s;
    struct sk_th_http c;
    const char *flags[] = {"--role", "api", "--db-timeout-ms", "3000", NULL};
    pg_serve(&pg, "pollsq", base, flags, &s, &c);
    uint64_t aid = activity(&c, 100);
    sk_th_pg_freeze(&pg, 1);
    char oid[3][64];
    struct sk_th_resp r;
    int64_t ms;
    for (int i = 0; i < 3; i++)
        CHECK_EQ(buy(&c, aid, 31 + (uint64_t)i, oid[i], sizeof oid[i], &r), 200);
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < 3; i++) {
            CHECK_MSG(poll_order(&c, oid[i], 31 + (uint64_t)i, &r, &ms) == 200, "%d %s", r.status,
                      r.body);
            char st[32];
            sk_th_resp_field(&r, "status", st, sizeof st);
            CHECK_STR(st, "queued");
            CHECK_MSG(ms < LOOP_ANSWER_MS, "a queued order's poll took %lld ms", (long long)ms);
        }
    /* another buyer's order: the ledger says whose it is */
    CHECK_EQ(poll_order(&c, oid[0], 99, &r, &ms), 404);
    CHECK_MSG(ms < LOOP_ANSWER_MS, "took %lld ms", (long long)ms);
    sk_th_pg_freeze(&pg, 0);
    sk_th_http_close(&c);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
    sk_th_pg_stop(&pg);
}

SK_TEST_T(polls_the_database_cannot_answer_in_time_are_refused_at_once_then_served_again, 120)
{
    struct sk_th_pg pg;
    char base[200];
    struct sk_th_serve s;
    struct sk_th_http c;
    const char *flags[] = {"--role", "all", "--db-timeout-ms", "3000", "--db-poll-wait-ms",
                           "100",    NULL};
    pg_serve(&pg, "pollsdb", base, flags, &s, &c);
    uint64_t aid = activity(&c, 100);
    char oid[4][64];
    struct sk_th_resp r;
    bought_persisted(&c, aid, 41, 4, oid);
    sk_th_pg_freeze(&pg, 1);
    /* one poll reaches the frozen database and waits there; once nothing
     * has come back for longer than the poll's bound, the others are
     * refused at once, with Retry-After, instead of queueing behind it */
    struct sk_th_http stuck;
    sk_th_http_open(&stuck, s.port);
    char req[256];
    int n = snprintf(req, sizeof req,
                     "GET /api/v1/orders/%s HTTP/1.1\r\nHost: x\r\nX-User-Id: 41\r\n\r\n", oid[0]);
    CHECK(send(stuck.fd, req, (size_t)n, MSG_NOSIGNAL) == n);
    pause_ms(300); /* the bound is 100 ms: the stuck call is older than that */
    for (int i = 0; i < 8; i++) {
        int64_t ms;
        int st = poll_order(&c, oid[1 + i % 3], 42 + (uint64_t)(i % 3), &r, &ms);
        CHECK_MSG(st == 503 && is_error(&r, 503, "busy") && retry_after(&r), "poll %d: %d %s", i,
                  st, r.body);
        CHECK_MSG(ms < LOOP_ANSWER_MS, "poll %d refused after %lld ms", i, (long long)ms);
    }
    sk_th_pg_freeze(&pg, 0);
    sk_th_http_close(&stuck);
    /* the database back: polls are served again (the stuck call answered
     * or failed by the store's own bound meanwhile) */
    int64_t until = sk_mono_ms() + 20000;
    for (int i = 0; i < 4; i++)
        for (;;) {
            int64_t ms;
            if (poll_order(&c, oid[i], 41 + (uint64_t)i, &r, &ms) == 200) break;
            CHECK_MSG(r.status == 503 && sk_mono_ms() < until, "poll: %d %s", r.status, r.body);
            pause_ms(50);
        }
    char st[32];
    sk_th_resp_field(&r, "status", st, sizeof st);
    CHECK_STR(st, "created");
    sk_th_http_close(&c);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
    sk_th_pg_stop(&pg);
}

SK_TEST_T(a_poll_is_refused_at_once_while_a_call_waits_in_the_queue_untaken, 120)
{
    /* one pool thread, held by a poll the frozen database never answers;
     * a second poll waits in the queue behind it, untaken. Once that one
     * has waited a quarter of the poll bound, the next poll is refused at
     * once instead of joining it to wait out the bound (400 ms); nothing
     * has missed a deadline yet (3 s), so only the queue's age says so */
    struct sk_th_pg pg;
    char base[200];
    struct sk_th_serve s;
    struct sk_th_http c;
    const char *flags[] = {
        "--role", "all", "--db-pool", "1", "--db-timeout-ms", "3000", "--db-poll-wait-ms",
        "400",    NULL};
    pg_serve(&pg, "pollsq2", base, flags, &s, &c);
    uint64_t aid = activity(&c, 100);
    char oid[3][64];
    struct sk_th_resp r;
    bought_persisted(&c, aid, 51, 3, oid);
    /* the poll of a persisted order (its process knows it is) goes to the
     * database */
    sk_th_pg_freeze(&pg, 1);
    struct sk_th_http held[2];
    for (int i = 0; i < 2; i++) {
        sk_th_http_open(&held[i], s.port);
        char req[256];
        int n = snprintf(req, sizeof req,
                         "GET /api/v1/orders/%s HTTP/1.1\r\nHost: x\r\nX-User-Id: %d\r\n\r\n",
                         oid[i], 51 + i);
        CHECK(send(held[i].fd, req, (size_t)n, MSG_NOSIGNAL) == n);
        pause_ms(20);
    }
    pause_ms(150); /* the queued one: older than 400 / 4 ms, younger than 400 */
    int64_t ms;
    int st = poll_order(&c, oid[2], 53, &r, &ms);
    CHECK_MSG(st == 503 && is_error(&r, 503, "busy") && retry_after(&r), "poll: %d %s", st, r.body);
    CHECK_MSG(ms < 200, "refused after %lld ms, not at once", (long long)ms);
    sk_th_pg_freeze(&pg, 0);
    for (int i = 0; i < 2; i++)
        sk_th_http_close(&held[i]);
    sk_th_http_close(&c);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
    sk_th_pg_stop(&pg);
}

/* ---- the harness: a test that fails with its server frozen -------------- */

SK_TEST_T(a_test_failing_with_postgres_frozen_leaves_no_stopped_backend, 60)
{
    struct sk_th_pg pg;
    sk_th_pg_start(&pg);
    char url[256];
    sk_th_pg_create_db(&pg, "atfail", url, sizeof url);
    PGconn *conn = PQconnectdb(url);
    CHECK_MSG(PQstatus(conn) == CONNECTION_OK, "%s", PQerrorMessage(conn));
    PGresult *res = PQexec(conn, "SELECT pg_backend_pid()");
    CHECK(PQresultStatus(res) == PGRES_TUPLES_OK);
    pid_t backend = (pid_t)atoi(PQgetvalue(res, 0, 0));
    PQclear(res);
    /* a test's process that freezes the server and fails: what the
     * runner sees when such a test fails */
    fflush(NULL);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, 2); /* its FAIL line is not this test's */
        sk_th_pg_freeze(&pg, 1);
        sk_th_fail(__FILE__, __LINE__, "failing on purpose, the server frozen");
    }
    int st;
    CHECK_EQ(waitpid(child, &st, 0), child);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1);
    char state = sk_th_proc_state(backend);
    CHECK_MSG(state != 'T' && state != 't', "backend %d left in state %c", (int)backend, state);
    PQfinish(conn);
    sk_th_pg_stop(&pg);
}
