/* test_serve_supervisor.c - `seckill serve`'s process supervisor: with
 * --processes 2 (and the order worker of --role all), a process killed
 * with SIGKILL is replaced and the service keeps answering; SIGTERM stops
 * every process and the supervisor exits 0; a process dying of a fault
 * logs its stack first (core/crash.h); an order worker restarted during
 * a database outage waits for the database instead of dying again. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "store/store.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/http_client.h"
#include "support/pg_harness.h"
#include "support/proc_watch.h"

static int has(const pid_t *v, int n, pid_t x)
{
    for (int i = 0; i < n; i++)
        if (v[i] == x) return 1;
    return 0;
}

SK_TEST(serve_replaces_a_killed_process_and_keeps_answering)
{
    struct sk_th_serve s;
    const char *extra[] = {"--processes", "2", NULL};
    sk_th_serve_start(&s, sk_th_redis_url(), extra);
    pid_t before[8];
    int n = 0;
    int64_t deadline = sk_mono_ms() + 5000;
    while ((n = sk_th_proc_children(s.pid, NULL, before, 8)) < 3) { /* 2 HTTP + 1 order worker */
        CHECK_MSG(sk_mono_ms() < deadline, "only %d children", n);
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    CHECK_EQ(n, 3);
    for (int victim = 0; victim < 3; victim++) {
        kill(before[victim], SIGKILL);
        pid_t now[8];
        int m;
        deadline = sk_mono_ms() + 5000;
        for (;;) { /* a new process takes the dead one's place */
            m = sk_th_proc_children(s.pid, NULL, now, 8);
            if (m == 3 && !has(now, m, before[victim])) break;
            CHECK_MSG(sk_mono_ms() < deadline, "no replacement for %d", (int)before[victim]);
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        memcpy(before, now, sizeof now);
        /* the port still answers, on fresh connections (either process) */
        for (int i = 0; i < 20; i++) {
            struct sk_th_http c;
            struct sk_th_resp r;
            sk_th_http_open(&c, s.port);
            CHECK_EQ(sk_th_http_req(&c, "GET", "/healthz", NULL, NULL, &r), 200);
            sk_th_http_close(&c);
        }
    }
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
    char log[4096] = "";
    FILE *f = fopen(s.log, "r");
    CHECK(f != NULL);
    size_t got = fread(log, 1, sizeof log - 1, f);
    log[got] = 0;
    fclose(f);
    CHECK_MSG(strstr(log, "restarting") != NULL, "%s", log);
}

/* A stop that arrives while a process is still starting (here: the order
 * worker the supervisor just put in place of a killed one, while it opens
 * its store and Redis connections) is graceful: the supervisor exits 0.
 * The stop signals are held from fork until the child's handler exists. */
SK_TEST(serve_stopped_while_a_process_starts_exits_cleanly)
{
    for (int round = 0; round < 3; round++) {
        struct sk_th_serve s;
        sk_th_serve_start(&s, sk_th_redis_url(), NULL);
        pid_t before[8], now[8];
        int n = 0, m = 0;
        int64_t deadline = sk_mono_ms() + 5000;
        while ((n = sk_th_proc_children(s.pid, NULL, before, 8)) <
               2) { /* 1 HTTP + 1 order worker */
            CHECK_MSG(sk_mono_ms() < deadline, "only %d children", n);
            struct timespec ts = {0, 5 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        pid_t victim = before[n - 1]; /* the worker is forked last */
        kill(victim, SIGKILL);
        deadline = sk_mono_ms() + 5000;
        for (;;) { /* the replacement exists: stop the node at once */
            m = sk_th_proc_children(s.pid, NULL, now, 8);
            int fresh = 0;
            for (int i = 0; i < m; i++)
                if (!has(before, n, now[i])) fresh = 1;
            if (fresh) break;
            CHECK_MSG(sk_mono_ms() < deadline, "no replacement for %d", (int)victim);
        }
        CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
    }
}

/* A process that dies of a fault writes its stack to the log first (so a
 * crash the nemesis meets once can be read afterwards), then dies of that
 * signal: the supervisor sees SIGSEGV, as without the handler, and puts
 * another in its place. The fault is sent with kill(2): the same handler
 * runs for a real one. Under the sanitizers their own report replaces the
 * stack and the process exits (1 under ASan, 66 under ThreadSanitizer),
 * so the test checks only the supervisor's line there. */
#if defined(__SANITIZE_THREAD__)
#define SK_FAULT_DEATH "died (exit 66)" /* ThreadSanitizer's exit code */
#elif defined(__SANITIZE_ADDRESS__)
#define SK_FAULT_DEATH "died (exit 1)" /* the sanitizer reports, then exits */
#else
#define SK_FAULT_DEATH "died (signal 11)"
#endif
SK_TEST(serve_process_dying_of_a_fault_logs_its_stack_and_is_replaced)
{
    struct sk_th_serve s;
    const char *extra[] = {"--role", "api", "--processes", "2", NULL};
    sk_th_serve_start(&s, sk_th_redis_url(), extra);
    pid_t kids[8];
    int n;
    int64_t deadline = sk_mono_ms() + 5000;
    while ((n = sk_th_proc_children(s.pid, NULL, kids, 8)) < 2) {
        CHECK_MSG(sk_mono_ms() < deadline, "only %d children", n);
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    CHECK_EQ(kill(kids[0], SIGSEGV), 0);
    char log[16384] = "";
    deadline = sk_mono_ms() + 5000;
    for (;;) {
        FILE *f = fopen(s.log, "r");
        CHECK(f != NULL);
        size_t got = fread(log, 1, sizeof log - 1, f);
        log[got] = 0;
        fclose(f);
        if (strstr(log, SK_FAULT_DEATH)) break;
        CHECK_MSG(sk_mono_ms() < deadline, "no death seen: %s", log);
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    CHECK_MSG(strstr(log, "fatal signal; the stack") != NULL, "%s", log);
    CHECK_MSG(strstr(log, "seckill(") != NULL, "no frame of the binary: %s", log);
#endif
    /* replaced, and the port answers */
    struct sk_th_http c;
    struct sk_th_resp r;
    deadline = sk_mono_ms() + 5000;
    while (sk_th_proc_children(s.pid, NULL, kids, 8) < 2) {
        CHECK_MSG(sk_mono_ms() < deadline, "not replaced");
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    sk_th_http_open(&c, s.port);
    CHECK_EQ(sk_th_http_req(&c, "GET", "/healthz", NULL, NULL, &r), 200);
    sk_th_http_close(&c);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
}

/* How many times needle occurs in the file at path. */
static int count_in_file(const char *path, const char *needle)
{
    static char buf[1 << 20];
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    buf[got] = 0;
    fclose(f);
    int n = 0;
    for (const char *p = buf; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

/* The order worker's one process, or 0 when there is none (or several). */
static pid_t the_worker(pid_t serve)
{
    pid_t w[4];
    return sk_th_proc_children(serve, "seckill-worker", w, 4) == 1 ? w[0] : 0;
}

/* A serve --role all on a private PostgreSQL (its --db into db, cap bytes)
 * with an open activity of 10 units (*aid); then PostgreSQL stopped and
 * the order worker killed: returns the replacement's pid once it runs. */
static pid_t worker_killed_during_an_outage(struct sk_th_pg *pg, struct sk_th_serve *s, char *db,
                                            size_t cap, struct sk_th_http *c, uint64_t *aid)
{
    sk_th_pg_start(pg);
    sk_th_pg_create_db(pg, "supervised", db, cap);
    const char *extra[] = {"--db", db, NULL}; /* the last --db wins */
    sk_th_serve_start(s, sk_th_redis_url(), extra);
    sk_th_http_open(c, s->port);
    *aid = sk_th_http_activity(c, "worker outage", 10, 600);
    pid_t first = 0, second = 0;
    int64_t deadline = sk_mono_ms() + 5000;
    while (!(first = the_worker(s->pid))) {
        CHECK_MSG(sk_mono_ms() < deadline, "no order worker process");
        sk_th_nap_ms(10);
    }
    sk_th_pg_stop(pg);
    CHECK_EQ(kill(first, SIGKILL), 0);
    deadline = sk_mono_ms() + 5000;
    while (!(second = the_worker(s->pid)) || second == first) {
        CHECK_MSG(sk_mono_ms() < deadline, "no replacement for the killed worker");
        sk_th_nap_ms(5);
    }
    return second;
}

/* An order worker put in place of a crashed one while the database is
 * down (a real outage: PostgreSQL stopped) waits for the database in that
 * one process and persists the orders admitted meanwhile once it is back.
 * It used to exit at once, and the supervisor restarted it every 20 ms
 * for as long as the outage lasted (`make chaos CHAOS_STORE=mariadb`:
 * fifteen processes in 0.3 s): the test counts the supervisor's
 * "restarting" lines over 1.5 s of outage after the one kill. */
SK_TEST_T(serve_worker_restarted_during_a_database_outage_waits_in_one_process, 90)
{
    struct sk_th_pg pg;
    struct sk_th_serve s;
    struct sk_th_http c;
    char db[420];
    uint64_t aid;
    pid_t second = worker_killed_during_an_outage(&pg, &s, db, sizeof db, &c, &aid);
    /* 1.5 s of outage: the replacement stays, and says it waits */
    int64_t until = sk_mono_ms() + 1500;
    while (sk_mono_ms() < until) {
        pid_t now = the_worker(s.pid);
        CHECK_MSG(now == second || now == 0, "worker %d replaced by %d during the outage",
                  (int)second, (int)now);
        sk_th_nap_ms(20);
    }
    CHECK_EQ(the_worker(s.pid), second);
    CHECK_EQ(count_in_file(s.log, "restarting"), 1);
    CHECK_MSG(count_in_file(s.log, "(waiting; retrying)") >= 1, "no waiting line (log %s)", s.log);

    /* admitted during the outage (Redis only), persisted after it */
    struct sk_th_resp r;
    char path[96], oid[128];
    snprintf(path, sizeof path, "/api/v1/activities/%llu/purchase", (unsigned long long)aid);
    CHECK_EQ(sk_th_http_req(&c, "POST", path, "X-User-Id: 7\r\n", "{\"quantity\":1}", &r), 200);
    sk_th_resp_field(&r, "order_id", oid, sizeof oid);
    CHECK(oid[0] != 0);
    sk_th_pg_restart(&pg);
    sk_store *st = NULL;
    char err[256];
    struct sk_order o;
    int64_t deadline = sk_mono_ms() + 20000;
    for (;;) {
        if (!st && sk_store_open(&st, db, err, sizeof err) < 0) st = NULL;
        if (st && sk_store_order_get(st, oid, &o) == 0) break;
        CHECK_MSG(sk_mono_ms() < deadline, "order %s not persisted after the outage (log %s)", oid,
                  s.log);
        sk_th_nap_ms(50);
    }
    CHECK_EQ(o.activity_id, aid);
    CHECK_EQ(o.user_id, 7);
    sk_store_close(st);
    /* by the same process: it waited, it was not replaced */
    CHECK_EQ(the_worker(s.pid), second);
    CHECK_EQ(count_in_file(s.log, "restarting"), 1);
    CHECK(count_in_file(s.log, "order worker: started after") == 1);
    sk_th_http_close(&c);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
    sk_th_pg_stop(&pg);
}

/* A stop while the worker waits for the database ends the wait: serve
 * exits 0 within its drain, the outage still on. */
SK_TEST_T(serve_stopped_while_its_worker_waits_for_the_database_exits_cleanly, 60)
{
    struct sk_th_pg pg;
    struct sk_th_serve s;
    struct sk_th_http c;
    char db[420];
    uint64_t aid;
    worker_killed_during_an_outage(&pg, &s, db, sizeof db, &c, &aid);
    int64_t deadline = sk_mono_ms() + 5000;
    while (count_in_file(s.log, "(waiting; retrying)") < 1) {
        CHECK_MSG(sk_mono_ms() < deadline, "the worker does not wait (log %s)", s.log);
        sk_th_nap_ms(10);
    }
    sk_th_http_close(&c);
    int64_t t0 = sk_mono_ms();
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
    CHECK_MSG(sk_mono_ms() - t0 < 12000, "serve took %lld ms to stop",
              (long long)(sk_mono_ms() - t0));
    CHECK_EQ(count_in_file(s.log, "restarting"), 1);
    sk_th_pg_stop(&pg);
}

/* GET path on c until it answers want (20 s at most); the last answer in r. */
static void await_status(struct sk_th_http *c, const char *path, int want, struct sk_th_resp *r,
                         const char *log)
{
    int64_t deadline = sk_mono_ms() + 20000;
    int st;
    while ((st = sk_th_http_req(c, "GET", path, NULL, NULL, r)) != want) {
        CHECK_MSG(sk_mono_ms() < deadline, "GET %s: %d, not %d: %.300s (log %s)", path, st, want,
                  r->body, log);
        sk_th_nap_ms(50);
    }
}

/* A private PostgreSQL with a fresh database, and the node the two tests
 * below start on it. */
struct down_db {
    struct sk_th_pg pg;
    struct sk_th_serve s;
    struct sk_th_http c;
    struct sk_th_resp r;
    char db[420];
    const char *extra[3]; /* --db <db>: the last --db wins */
};

static void down_db_init(struct down_db *d, const char *name)
{
    sk_th_pg_start(&d->pg);
    sk_th_pg_create_db(&d->pg, name, d->db, sizeof d->db);
    d->extra[0] = "--db";
    d->extra[1] = d->db;
    d->extra[2] = NULL;
}

/* serve started while the database is stopped: it starts (the harness
 * fails the test unless /healthz answers), says why in its log and on
 * /readyz; d->c is open to it. */
static void serve_while_down(struct down_db *d)
{
    sk_th_serve_start(&d->s, sk_th_redis_url(), d->extra);
    CHECK_MSG(count_in_file(d->s.log, "not reachable at start") == 1, "log %s", d->s.log);
    sk_th_http_open(&d->c, d->s.port);
    CHECK_EQ(sk_th_http_req(&d->c, "GET", "/readyz", NULL, NULL, &d->r), 503);
    CHECK_MSG(strstr(d->r.body, "database") != NULL, "%s", d->r.body);
}

/* A node started while its database is down (PostgreSQL stopped) sells
 * a preheated sale anyway: purchases need Redis only. Both the supervisor
 * and the HTTP process used to exit 1 when the store could not be opened,
 * so a node restarted during an outage stayed down (the partition
 * nemesis draws a serve killed while the database is cut off). It says
 * why in its log and on /readyz, answers purchases, and once the database
 * is back /readyz is 200 and the orders admitted meanwhile are persisted
 * and read back over HTTP. */
SK_TEST_T(serve_started_while_its_database_is_down_sells_a_preheated_sale, 90)
{
    static struct down_db d;
    down_db_init(&d, "down_at_start");
    sk_th_serve_start(&d.s, sk_th_redis_url(), d.extra);
    sk_th_http_open(&d.c, d.s.port);
    uint64_t aid = sk_th_http_activity(&d.c, "down at start", 10, 600);
    sk_th_http_close(&d.c);
    CHECK_EQ(sk_th_serve_stop(&d.s, SIGTERM), 0);

    sk_th_pg_stop(&d.pg);
    serve_while_down(&d);
    char path[96], oid[128], opath[200];
    snprintf(path, sizeof path, "/api/v1/activities/%llu/purchase", (unsigned long long)aid);
    CHECK_EQ(sk_th_http_req(&d.c, "POST", path, "X-User-Id: 7\r\n", "{\"quantity\":1}", &d.r), 200);
    sk_th_resp_field(&d.r, "order_id", oid, sizeof oid);
    CHECK(oid[0] != 0);

    sk_th_pg_restart(&d.pg);
    await_status(&d.c, "/readyz", 200, &d.r, d.s.log);
    snprintf(opath, sizeof opath, "/api/v1/orders/%s", oid);
    int64_t deadline = sk_mono_ms() + 20000;
    for (;;) {
        CHECK_EQ(sk_th_http_req(&d.c, "GET", opath, "X-User-Id: 7\r\n", NULL, &d.r), 200);
        if (strstr(d.r.body, "\"status\":\"created\"")) break;
        CHECK_MSG(sk_mono_ms() < deadline, "order %s not persisted: %.300s (log %s)", oid, d.r.body,
                  d.s.log);
        sk_th_nap_ms(50);
    }
    sk_store *st = NULL;
    char err[256];
    struct sk_order o;
    CHECK_MSG(sk_store_open(&st, d.db, err, sizeof err) == 0, "%s", err);
    CHECK_EQ(sk_store_order_get(st, oid, &o), 0);
    CHECK_EQ(o.activity_id, aid);
    CHECK_EQ(o.user_id, 7);
    sk_store_close(st);
    sk_th_http_close(&d.c);
    CHECK_EQ(sk_th_serve_stop(&d.s, SIGTERM), 0);
    sk_th_pg_stop(&d.pg);
}

/* A node whose database has never answered (a fresh one, down when the
 * node starts) brings the schema up to date when it first does: the
 * first handle that connects runs the migrations (PostgreSQL serializes
 * them with the worker's), and the sale is then set up and sold through
 * that node as usual. */
SK_TEST_T(serve_started_before_its_database_ever_answered_migrates_it_when_it_does, 90)
{
    static struct down_db d;
    down_db_init(&d, "never_opened"); /* no tables */
    sk_th_pg_stop(&d.pg);
    serve_while_down(&d);

    sk_th_pg_restart(&d.pg);
    await_status(&d.c, "/readyz", 200, &d.r, d.s.log);
    uint64_t aid = sk_th_http_activity(&d.c, "migrated late", 10, 600);
    char path[96];
    snprintf(path, sizeof path, "/api/v1/activities/%llu/purchase", (unsigned long long)aid);
    CHECK_EQ(sk_th_http_req(&d.c, "POST", path, "X-User-Id: 9\r\n", "{\"quantity\":1}", &d.r), 200);
    sk_store *st = NULL;
    char err[256];
    CHECK_MSG(sk_store_open(&st, d.db, err, sizeof err) == 0, "%s", err);
    int version = 0;
    CHECK_EQ(sk_store_schema_version(st, &version), 0);
    CHECK(version > 0);
    struct sk_activity a;
    CHECK_EQ(sk_store_activity_get(st, aid, &a), 0);
    sk_store_close(st);
    sk_th_http_close(&d.c);
    CHECK_EQ(sk_th_serve_stop(&d.s, SIGTERM), 0);
    sk_th_pg_stop(&d.pg);
}

/* The one HTTP process of serve at pid, other than not (0: none yet). */
static pid_t http_process_other_than(pid_t serve, pid_t not )
{
    pid_t p[4];
    int n = sk_th_proc_children(serve, "seckill-api", p, 4);
    return n == 1 && p[0] != not ? p[0] : 0;
}

/* A node started while its database's host answers nothing (cut off by
 * a firewall that drops, not refused: here a listener that never accepts)
 * sells after one connect timeout, not two: the supervisor's try before
 * the fork found the server down, and the HTTP processes it forks set
 * their handles up without trying again (each try costs the timeout, 3 s
 * here). The sale was preheated on SQLite; purchases need Redis only. */
SK_TEST_T(serve_started_on_an_unanswering_database_host_sells_after_one_connect_timeout, 90)
{
    struct sk_th_serve s;
    struct sk_th_http c;
    struct sk_th_resp r;
    sk_th_serve_start(&s, sk_th_redis_url(), NULL);
    sk_th_http_open(&c, s.port);
    uint64_t aid = sk_th_http_activity(&c, "unanswering host", 10, 600);
    sk_th_http_close(&c);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);

    int port, fd = sk_th_blackhole(&port);
    char db[200], path[96];
    snprintf(db, sizeof db, "postgres://u@127.0.0.1:%d/x?connect_timeout=3", port);
    const char *extra[] = {"--db", db, "--role", "api", "--processes", "2", NULL};
    int64_t t0 = sk_mono_ms();
    sk_th_serve_start(&s, sk_th_redis_url(), extra);
    sk_th_http_open(&c, s.port);
    snprintf(path, sizeof path, "/api/v1/activities/%llu/purchase", (unsigned long long)aid);
    CHECK_EQ(sk_th_http_req(&c, "POST", path, "X-User-Id: 5\r\n", "{\"quantity\":1}", &r), 200);
    int64_t took = sk_mono_ms() - t0;
    CHECK_MSG(count_in_file(s.log, "not reachable at start") == 1, "log %s", s.log);
    /* one 3 s timeout and the start; the supervisor's and then each HTTP
     * process's would be 6 s at least */
    CHECK_MSG(took < 5500, "the node sold %lld ms after its start (log %s)", (long long)took,
              s.log);
    CHECK_EQ(sk_th_http_req(&c, "GET", "/readyz", NULL, NULL, &r), 503);
    sk_th_http_close(&c);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
    close(fd);
}

/* A process that keeps dying right after its start (here: SIGKILLed by the
 * test as soon as it appears, the way a bug at start would kill it) is
 * restarted after a pause that doubles, 100 ms up to 5 s, not at once: a
 * fork loop otherwise. A stop during a pause exits 0. */
SK_TEST_T(serve_restarts_a_process_that_dies_at_its_start_after_a_doubling_pause, 60)
{
    struct sk_th_serve s;
    sk_th_serve_start(&s, sk_th_redis_url(), NULL); /* one HTTP process and the worker */
    pid_t victim = 0;
    int64_t deadline = sk_mono_ms() + 5000;
    while (!(victim = http_process_other_than(s.pid, 0))) {
        CHECK_MSG(sk_mono_ms() < deadline, "no HTTP process");
        sk_th_nap_ms(5);
    }
    int64_t gap[5];
    for (int k = 0; k < 5; k++) {
        CHECK_EQ(kill(victim, SIGKILL), 0);
        int64_t t0 = sk_mono_ms();
        pid_t next;
        deadline = t0 + 15000;
        while (!(next = http_process_other_than(s.pid, victim))) {
            CHECK_MSG(sk_mono_ms() < deadline, "no replacement after kill %d", k + 1);
            sk_th_nap_ms(2);
        }
        gap[k] = sk_mono_ms() - t0;
        victim = next;
    }
    printf("    # kill to replacement, ms: %lld %lld %lld %lld %lld\n", (long long)gap[0],
           (long long)gap[1], (long long)gap[2], (long long)gap[3], (long long)gap[4]);
    /* the first victim may have lived a second (restarted at once); every
     * later one died within one of its start */
    for (int k = 1; k < 5; k++)
        CHECK_MSG(gap[k] >= 100, "replacement %d after %lld ms", k + 1, (long long)gap[k]);
    CHECK_MSG(gap[4] >= 800, "the pause did not grow: %lld ms", (long long)gap[4]);
    CHECK(count_in_file(s.log, "quick deaths in a row") >= 4);
    /* a stop while a restart waits out its pause (the victim is seconds
     * from its start: a quick death, paused 1.6 s or more) */
    int paused = count_in_file(s.log, "restarting in");
    CHECK_EQ(kill(victim, SIGKILL), 0);
    deadline = sk_mono_ms() + 5000;
    while (count_in_file(s.log, "restarting in") == paused) {
        CHECK_MSG(sk_mono_ms() < deadline, "the kill was not seen");
        sk_th_nap_ms(2);
    }
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
}
