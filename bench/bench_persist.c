/* bench_persist.c - `seckill-bench persist`: orders persisted per second
 * from a pre-filled Redis stream into SQLite, PostgreSQL and MariaDB by
 * the order worker.
 *
 * MariaDB: a private mariadbd started for the run (mysql_spawn.h: the
 * server's default durability, innodb_flush_log_at_trx_commit=1 and the
 * doublewrite buffer on, no binary log, unless --my-set says otherwise), or
 * --db mysql://... for that server; every phase gets a database of its own,
 * dropped when the phase ends. --db mysql / --db postgres: that private
 * server only.
 *
 * Backends: without --db, SQLite (a file per phase in --dir, WAL,
 * synchronous=FULL as shipped) and a private PostgreSQL server started for
 * the run (pg_spawn.h: PostgreSQL's default durability, fsync=on and
 * synchronous_commit=on, unless --pg-set says otherwise; skipped with a
 * note when no server can be started). --db postgres://... measures that
 * server only, --db sqlite SQLite only. On PostgreSQL every phase gets a
 * fresh schema of its own (search_path set through the URL's options),
 * dropped when the phase ends, so a shared database is left as found.
 *
 * Per backend, four phases on a fresh store each. The worker phases XADD
 * --rows entries (the fields the admission script writes) to the stream
 * of the phase's activity in a private redis-server (redis_spawn.h), then
 * time one in-process worker run with once=1 from start to drained:
 * XREADGROUP, parse, one transaction per fetch, XACK and trimming all
 * included. The store-only phases time sk_store_orders_persist alone on
 * orders built in memory (the database's share). Per-row phases (batch 1:
 * one transaction per order) use --per-row-rows, fewer, because each
 * commit waits for a flush to disk. After every worker phase the result is
 * checked: one row per entry, DB stock == initial - rows, stream empty.
 *
 * Besides orders/s, each phase reports CPU per order over its timed part
 * only (not the stream's filling): this process's (the worker or the
 * store's client: getrusage, every thread) and, for a private PostgreSQL
 * or MariaDB server, the server's (/proc): the machine is shared, so CPU
 * per order compares two builds better than their rates do. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <libpq-fe.h>
#include <sqlite3.h>

#include "bench/bench_int.h"
#include "bench/bench_mysql.h"
#include "bench/bench_receiver.h"
#include "bench/bench_util.h"
#include "core/cli.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/activity.h"
#include "engine/keys.h"
#include "orders/order_worker.h"
#include "orders/webhooks.h"
#include "redis/redis_conn.h"
#include "spawn/redis_spawn.h"
#include "store/mysql_url.h"
#include "store/store.h"
#include "tests/support/spawn/mysql_spawn.h"
#include "tests/support/spawn/pg_spawn.h"

/* Targets (BENCHMARKS.md), 2-core machine, batched. */
#define TARGET_SQLITE_PER_S 10000.0
#define TARGET_PG_PER_S 20000.0
#define TARGET_MY_PER_S 20000.0
#define MAX_PG_SET 16
#define NPHASES 4

struct opts {
    int64_t rows, batch, per_row_rows;
    const char *dir;
    const char *db; /* NULL: all; "sqlite", "postgres", "mysql"; or a postgres:// / mysql:// URL */
    const char *pg_set[MAX_PG_SET + 1]; /* settings of the private servers */
    const char *my_set[MAX_PG_SET + 1];
    int npg_set, nmy_set;
    int webhooks; /* --webhooks: the worker with the dispatcher delivering */
};

/* One backend under test. */
struct backend {
    int pg, my;
    const char *name; /* "SQLite" | "PostgreSQL" | "MariaDB" */
    double target;
    char url[1024];            /* PostgreSQL: the database the schemas go in */
    PGconn *admin;             /* PostgreSQL: creates and drops the phase schemas */
    char schema[64];           /* PostgreSQL: the phase's schema, "" when none;
                                  MariaDB: the phase's database */
    struct st_mysql *my_admin; /* MariaDB: creates and drops the phase databases */
};

struct ctx {
    struct opts o;
    struct sk_redis_spawn sp;
    struct sk_pg_spawn pgs;
    struct sk_mysql_spawn mys;
    sk_redis *r;
    char dir[512];
    int phase;
};

/* What the timed part of a phase took: wall seconds, CPU seconds of this
 * process and of the database server (0 when unknown or SQLite). */
struct timing {
    double secs, cpu, srv;
};

struct result {
    const char *name;
    int64_t batch, rows;
    struct timing t;
};

/* CPU seconds used so far by the private server of b (0: none, SQLite). */
static double server_cpu(const struct ctx *c, const struct backend *b)
{
    if (b->pg) return sk_pg_spawn_cpu_seconds(&c->pgs);
    return b->my ? sk_bench_pid_cpu_seconds(c->mys.pid) : 0;
}

/* Starts (*t negative readings) and stops (the differences) a timing. */
static void timing_start(const struct ctx *c, const struct backend *b, struct timing *t)
{
    t->secs = -(double)sk_mono_us() / 1e6;
    t->cpu = -sk_bench_self_cpu_seconds();
    t->srv = -server_cpu(c, b);
}

static void timing_stop(const struct ctx *c, const struct backend *b, struct timing *t)
{
    t->secs += (double)sk_mono_us() / 1e6;
    t->cpu += sk_bench_self_cpu_seconds();
    t->srv += server_cpu(c, b);
}

/* A failure of this bench: "seckill: bench persist: <msg>", SK_EXIT_FAIL. */
#define fail(...) sk_cli_runtime_error("bench persist: " __VA_ARGS__)

/* ---- PostgreSQL: a schema per phase ---- */

static int pg_exec(struct backend *b, const char *sql)
{
    PGresult *r = PQexec(b->admin, sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok) fail("postgres: %s: %s", sql, PQerrorMessage(b->admin));
    PQclear(r);
    return ok ? 0 : SK_EXIT_FAIL;
}

static void pg_drop_schema(struct backend *b)
{
    if (b->my && b->schema[0] && b->my_admin) {
        char sql[128], err[256];
        snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s", b->schema);
        if (sk_bench_my_exec(b->my_admin, sql, err, sizeof err)) fail("%s", err);
        b->schema[0] = 0;
    }
    if (!b->pg || !b->schema[0]) return;
    char sql[128];
    snprintf(sql, sizeof sql, "DROP SCHEMA IF EXISTS %s CASCADE", b->schema);
    pg_exec(b, sql);
    b->schema[0] = 0;
}

static void quiet_notice(void *arg, const char *msg)
{
    (void)arg;
    (void)msg; /* "drop cascades to N other objects" */
}

/* Connects the admin session and prints what the server is and how
 * durable its commits are. */
static int pg_connect(struct backend *b)
{
    b->admin = PQconnectdb(b->url);
    if (PQstatus(b->admin) != CONNECTION_OK)
        return fail("postgres: cannot connect: %s", PQerrorMessage(b->admin));
    PQsetNoticeProcessor(b->admin, quiet_notice, NULL);
    PGresult *r = PQexec(b->admin, "SELECT current_setting('server_version'),"
                                   " current_setting('fsync'),"
                                   " current_setting('synchronous_commit'),"
                                   " current_setting('full_page_writes'),"
                                   " current_setting('wal_level'),"
                                   " current_setting('shared_buffers')");
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
        int rc = fail("postgres: reading settings: %s", PQerrorMessage(b->admin));
        PQclear(r);
        return rc;
    }
    printf("  PostgreSQL %s at %s:%s/%s: fsync=%s, synchronous_commit=%s, "
           "full_page_writes=%s, wal_level=%s, shared_buffers=%s\n",
           PQgetvalue(r, 0, 0), PQhost(b->admin), PQport(b->admin), PQdb(b->admin),
           PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 2), PQgetvalue(r, 0, 3), PQgetvalue(r, 0, 4),
           PQgetvalue(r, 0, 5));
    PQclear(r);
    return 0;
}

/* MariaDB: connects the admin session and prints the server's settings. */
static int my_connect(struct backend *b)
{
    char err[512], what[512];
    if (!(b->my_admin = sk_bench_my_connect(b->url, err, sizeof err))) return fail("%s", err);
    sk_bench_my_describe(b->my_admin, what, sizeof what);
    printf("  MariaDB %s\n", what);
    return 0;
}

/* A fresh store for one phase, with one activity of `stock`. */
static int open_phase(struct ctx *c, struct backend *b, int64_t stock, char *spec, size_t cap,
                      uint64_t *aid, sk_store **st)
{
    c->phase++;
    if (b->my) {
        snprintf(b->schema, sizeof b->schema, "seckill_bench_%ld_%d", (long)getpid(), c->phase);
        char sql[128], err[256];
        snprintf(sql, sizeof sql, "CREATE DATABASE %s", b->schema);
        if (sk_bench_my_exec(b->my_admin, sql, err, sizeof err)) {
            b->schema[0] = 0;
            return fail("%s", err);
        }
        if (sk_bench_my_url_with_db(b->url, b->schema, spec, cap)) return fail("URL too long");
    } else if (b->pg) {
        snprintf(b->schema, sizeof b->schema, "seckill_bench_%ld_%d", (long)getpid(), c->phase);
        char sql[128];
        snprintf(sql, sizeof sql, "CREATE SCHEMA %s", b->schema);
        if (pg_exec(b, sql)) {
            b->schema[0] = 0;
            return SK_EXIT_FAIL;
        }
        /* options=-c search_path=<schema>, URL-encoded. */
        int n = snprintf(spec, cap, "%s%soptions=-c%%20search_path%%3D%s", b->url,
                         strchr(b->url, '?') ? "&" : "?", b->schema);
        if (n < 0 || (size_t)n >= cap) return fail("postgres URL too long");
    } else {
        snprintf(spec, cap, "sqlite:%s/phase%d.db", c->dir, c->phase);
    }
    char err[512];
    if (sk_store_open(st, spec, err, sizeof err)) return fail("%s", err);
    struct sk_activity a;
    sk_activity_init(&a);
    a.id = (uint64_t)c->phase;
    snprintf(a.name, sizeof a.name, "bench persist %d", c->phase);
    a.stock = stock;
    a.per_user_limit = 1;
    a.start_ms = 0;
    a.end_ms = SK_TIME_MAX_MS;
    a.created_ms = sk_wall_ms();
    sk_activity_apply_defaults(&a);
    if (sk_store_activity_insert(*st, &a)) return fail("%s", sk_store_errstr(*st));
    *aid = a.id;
    return 0;
}

/* Closes the phase's store and drops what it wrote (SQLite files stay
 * until the end of the run: unlinked there). */
static void end_phase(struct backend *b, sk_store *st)
{
    sk_store_close(st);
    pg_drop_schema(b);
}

/* A new store for one phase (open_phase); on failure what it made is
 * dropped again (end_phase) and *st is NULL. */
static int fresh_store(struct ctx *c, struct backend *b, int64_t stock, char *spec, size_t cap,
                       uint64_t *aid, sk_store **st)
{
    int rc = open_phase(c, b, stock, spec, cap, aid, st);
    if (rc) {
        end_phase(b, *st);
        *st = NULL;
    }
    return rc;
}

/* XADDs n order entries (aid, uid, qty 1), pipelined 1,000 deep. */
static int fill(struct ctx *c, uint64_t aid, int64_t n)
{
    struct sk_keys k;
    sk_keys_for(&k, aid);
    char aids[24];
    snprintf(aids, sizeof aids, "%" PRIu64, aid);
    redisReply *rep;
    if (sk_redis_cmd(c->r, &rep, "DEL %s %s", k.orders, k.dlq)) return fail("%s", c->r->errstr);
    freeReplyObject(rep);
    for (int64_t done = 0; done < n;) {
        int64_t m = n - done < 1000 ? n - done : 1000;
        for (int64_t i = 0; i < m; i++) {
            char uid[24];
            snprintf(uid, sizeof uid, "%" PRId64, done + i + 1);
            const char *a[] = {"XADD", k.orders, "*", "aid", aids, "uid", uid, "qty", "1"};
            if (sk_redis_append(c->r, 9, a, NULL)) return fail("%s", c->r->errstr);
        }
        for (int64_t i = 0; i < m; i++) {
            if (sk_redis_read(c->r, &rep)) return fail("%s", c->r->errstr);
            int ok = rep->type == REDIS_REPLY_STRING;
            freeReplyObject(rep);
            if (!ok) return fail("XADD refused");
        }
        done += m;
    }
    return 0;
}

/* The order worker persists rows entries of aid (fed here) into st, batch
 * entries per fetch, then the rows and the stream are checked. */
static int phase_worker(struct ctx *c, const struct backend *b, sk_store *st, const char *spec,
                        uint64_t aid, int64_t rows, int64_t batch, struct timing *t)
{
    int rc = fill(c, aid, rows);
    if (rc) return rc;
    struct sk_worker_opts o;
    sk_worker_opts_init(&o);
    o.redis_url = c->sp.url;
    o.db_spec = spec;
    o.consumer = "bench";
    o.batch = (int)batch;
    o.once = 1;
    sk_worker *w;
    char err[512];
    if (sk_worker_new(&w, &o, err, sizeof err)) return fail("%s", err);
    timing_start(c, b, t);
    rc = sk_worker_run(w);
    timing_stop(c, b, t);
    struct sk_worker_stats s;
    sk_worker_stats(w, &s);
    if (rc) fail("worker: %s", sk_worker_errstr(w));
    sk_worker_free(w);
    /* Check: every entry is one row, the DB stock went to 0, nothing left. */
    struct sk_order_counts cnt;
    struct sk_activity a;
    struct sk_keys k;
    sk_keys_for(&k, aid);
    redisReply *rep = NULL;
    if (!rc && (sk_store_orders_count(st, aid, &cnt) || sk_store_activity_get(st, aid, &a)))
        rc = fail("%s", sk_store_errstr(st));
    if (!rc && sk_redis_cmd(c->r, &rep, "XLEN %s", k.orders)) rc = fail("%s", c->r->errstr);
    if (!rc &&
        (cnt.orders[SK_ORDER_CREATED] != rows || a.stock_db != 0 || (int64_t)s.persisted != rows ||
         rep->type != REDIS_REPLY_INTEGER || rep->integer != 0))
        rc = fail("check failed: %" PRId64 " rows for %" PRId64 " entries, DB stock %" PRId64
                  ", stream length %lld",
                  cnt.orders[SK_ORDER_CREATED], rows, a.stock_db,
                  rep && rep->type == REDIS_REPLY_INTEGER ? rep->integer : -1);
    freeReplyObject(rep);
    return rc;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Events per second out of the outbox: the worker persists rows entries
 * (as phase_worker) while the webhook dispatcher, started before, posts
 * every event (rows order.created and one activity.sold_out) to a loopback
 * receiver that answers 200 at once. Prints the worker's rate beside the
 * dispatcher, deliveries/s and the lag from the event's commit to its
 * arrival; settle_ms as the worker sets it by default (10 s on a server
 * store, none on SQLite: docs/configuration.md). *t is the worker's. */
static int phase_webhooks(struct ctx *c, const struct backend *b, sk_store *st, const char *spec,
                          uint64_t aid, int64_t rows, int64_t batch, struct timing *t)
{
    struct sk_bench_rx rx;
    if (sk_bench_rx_start(&rx)) return fail("receiver: %s", strerror(errno));
    struct sk_wh_endpoint ep;
    memset(&ep, 0, sizeof ep);
    snprintf(ep.name, sizeof ep.name, "bench");
    snprintf(ep.url, sizeof ep.url, "http://127.0.0.1:%d/", rx.port);
    snprintf(ep.secret[0], sizeof ep.secret[0], "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
    struct sk_wh_opts wo = {.settle_ms = b->pg || b->my ? 10000 : -1, .idle_ms = 50};
    sk_webhooks *w = NULL;
    char err[512];
    int rc = sk_webhooks_start(&w, spec, &ep, 1, &wo, err, sizeof err);
    if (rc) {
        sk_bench_rx_stop(&rx);
        sk_bench_rx_free(&rx);
        return fail("webhooks: %s", err);
    }
    rc = phase_worker(c, b, st, spec, aid, rows, batch, t);
    int64_t persisted_us = sk_mono_us(), want = rows + 1, deadline = persisted_us + 600000000LL;
    while (!rc && (int64_t)sk_bench_rx_count(&rx) < want && sk_mono_us() < deadline)
        usleep(20000);
    sk_webhooks_stop(w);
    sk_bench_rx_stop(&rx);
    if (!rc && (int64_t)rx.n < want)
        rc = fail("%zu of %" PRId64 " events delivered in 600 s", rx.n, want);
    if (!rc) {
        int64_t *lag = rx.lag_ms;
        size_t n = rx.n;
        qsort(lag, n, sizeof *lag, cmp_i64);
        double span = (double)(rx.last_us - rx.first_us) / 1e6;
        printf("  %-22s %6s %9zu %9.3f %12.0f   lag p50 %" PRId64 " ms, p99 %" PRId64
               " ms, max %" PRId64 " ms; last event %.2f s after the worker's end "
               "(settle %s)\n",
               "webhooks, delivered", "1", n, span, span > 0 ? (double)n / span : 0.0, lag[n / 2],
               lag[n * 99 / 100], lag[n - 1], (double)(rx.last_us - persisted_us) / 1e6,
               wo.settle_ms > 0 ? "10 s" : "none");
    }
    sk_bench_rx_free(&rx);
    return rc;
}

/* The store alone persists rows orders of aid, batch per call. */
static int phase_store(struct ctx *c, const struct backend *b, sk_store *st, const char *spec,
                       uint64_t aid, int64_t rows, int64_t batch, struct timing *t)
{
    (void)spec;
    struct sk_order *o = calloc((size_t)rows, sizeof *o);
    if (!o) return fail("out of memory");
    int64_t base = sk_wall_ms();
    for (int64_t i = 0; i < rows; i++) {
        snprintf(o[i].stream_id, sizeof o[i].stream_id, "%" PRId64 "-%" PRId64, base, i);
        snprintf(o[i].order_id, sizeof o[i].order_id, "%" PRIu64 "-%s", aid, o[i].stream_id);
        o[i].activity_id = aid;
        o[i].user_id = (uint64_t)i + 1;
        o[i].quantity = 1;
        o[i].created_ms = base;
    }
    int rc = 0;
    timing_start(c, b, t);
    for (int64_t i = 0; i < rows && !rc; i += batch) {
        size_t m = (size_t)(rows - i < batch ? rows - i : batch);
        if (sk_store_orders_persist(st, o + i, m, NULL)) rc = fail("%s", sk_store_errstr(st));
    }
    timing_stop(c, b, t);
    free(o);
    return rc;
}

/* A measured phase: how it runs on its fresh store, and its table names. */
struct phase {
    int (*run)(struct ctx *c, const struct backend *b, sk_store *st, const char *spec, uint64_t aid,
               int64_t rows, int64_t batch, struct timing *t);
    const char *per_row, *batched;
};

/* Runs ph on a fresh store of b (dropped after) with rows and batch. */
static int run_phase(struct ctx *c, struct backend *b, const struct phase *ph, int64_t rows,
                     int64_t batch, struct result *res)
{
    char spec[1200];
    uint64_t aid = 0;
    sk_store *st = NULL;
    if (fresh_store(c, b, rows, spec, sizeof spec, &aid, &st)) return SK_EXIT_FAIL;
    int rc = ph->run(c, b, st, spec, aid, rows, batch, &res->t);
    end_phase(b, st);
    res->name = batch == 1 ? ph->per_row : ph->batched;
    res->batch = batch;
    res->rows = rows;
    return rc;
}

/* A private server for a backend: 0 and its URL, or an error and why. */
static int start_pg(struct ctx *c, const char **url, const char **why)
{
    *url = c->pgs.url, *why = c->pgs.errstr;
    return sk_pg_spawn_start(&c->pgs, c->o.pg_set);
}

static int start_my(struct ctx *c, const char **url, const char **why)
{
    *url = c->mys.url, *why = c->mys.errstr;
    return sk_mysql_spawn_start(&c->mys, c->o.my_set);
}

/* A server backend: asked for (want), at the --db URL (given) or started. */
struct server {
    int want, given;
    int (*start)(struct ctx *c, const char **url, const char **why);
    struct backend b;
};

/* Sets *b up from s: the --db URL, else a private server's; when none
 * could be started, b is skipped with a note (cap bytes). 1 when b runs. */
static int backend_server(struct ctx *c, const struct server *s, struct backend *b, char *note,
                          size_t cap)
{
    *b = s->b;
    const char *url = c->o.db, *why = "";
    if (!s->given && s->start(c, &url, &why) != 0) {
        snprintf(note, cap, "%s skipped: no private server: %s", b->name, why);
        fprintf(stderr, "seckill: bench persist: %s\n", note);
        return 0;
    }
    snprintf(b->url, sizeof b->url, "%s", url);
    return 1;
}

/* The four phases on one backend, a table, and the target line. *batched
 * gets the batched worker's rate. */
static int run_backend(struct ctx *c, struct backend *b, double *batched)
{
    printf("\n  %s\n  %-22s %6s %9s %9s %12s %10s %10s\n", b->name, "phase", "batch", "rows",
           "seconds", "orders/s", "cpu us/o", "db us/o");
    fflush(stdout);
    struct result res[NPHASES];
    static const struct phase worker = {phase_worker, "worker, per row", "worker, batched"},
                              store = {phase_store, "store only, per row", "store only, batched"};
    const struct phase *ph[NPHASES] = {&worker, &worker, &store, &store};
    int64_t rows[NPHASES] = {c->o.rows, c->o.per_row_rows, c->o.rows, c->o.per_row_rows};
    int64_t batch[NPHASES] = {c->o.batch, 1, c->o.batch, 1};
    for (int i = 0; i < NPHASES; i++) {
        int rc = run_phase(c, b, ph[i], rows[i], batch[i], &res[i]);
        if (rc) return rc;
        double r = (double)res[i].rows;
        printf("  %-22s %6" PRId64 " %9" PRId64 " %9.3f %12.0f %10.2f", res[i].name, res[i].batch,
               res[i].rows, res[i].t.secs, r / res[i].t.secs, res[i].t.cpu * 1e6 / r);
        if (res[i].t.srv > 0)
            printf(" %10.2f\n", res[i].t.srv * 1e6 / r);
        else
            printf(" %10s\n", "-");
        fflush(stdout);
    }
    if (c->o.webhooks) {
        static const struct phase hooks = {phase_webhooks, "-", "worker + webhooks"};
        struct result h;
        int rc = run_phase(c, b, &hooks, c->o.rows, c->o.batch, &h);
        if (rc) return rc;
        double r = (double)h.rows;
        printf("  %-22s %6" PRId64 " %9" PRId64 " %9.3f %12.0f %10.2f", h.name, h.batch, h.rows,
               h.t.secs, r / h.t.secs, h.t.cpu * 1e6 / r);
        if (h.t.srv > 0)
            printf(" %10.2f\n", h.t.srv * 1e6 / r);
        else
            printf(" %10s\n", "-");
        fflush(stdout);
    }
    *batched = (double)res[0].rows / res[0].t.secs;
    printf("  %s worker batched: %.0f orders/s, target >= %.0f/s: %s; batched / per-row = "
           "%.1fx\n",
           b->name, *batched, b->target, *batched >= b->target ? "met" : "NOT met",
           *batched / ((double)res[1].rows / res[1].t.secs));
    return 0;
}

/* ---- machine description ---- */

static const char *fs_name(const char *dir)
{
    struct statfs s;
    if (statfs(dir, &s) != 0) return "unknown";
    switch ((unsigned long)s.f_type) {
    case 0xEF53: return "ext4";
    case 0x01021994: return "tmpfs";
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    case 0x794C7630: return "overlayfs";
    default: return "other";
    }
}

static int usage(FILE *f)
{
    fprintf(
        f, "usage: seckill-bench persist [--db sqlite|postgres|mysql|postgres://...|mysql://...]\n"
           "                             [--rows N] [--batch B] [--per-row-rows M] [--dir DIR]\n"
           "                             [--pg-set NAME=VALUE]... [--my-set NAME=VALUE]...\n"
           "                             [--webhooks]\n"
           "  Orders persisted per second from a pre-filled stream into SQLite, PostgreSQL\n"
           "  and MariaDB.\n"
           "  --webhooks        one more phase per store: the worker while the webhook\n"
           "                    dispatcher posts every event to a loopback receiver\n"
           "                    (deliveries/s, lag from commit to arrival)\n"
           "  --db SPEC         sqlite, postgres or mysql: that store only (the servers private);\n"
           "                    postgres://... or mysql://...: that server only (a schema or a\n"
           "                    database per phase is created and dropped); default: SQLite and\n"
           "                    private PostgreSQL and MariaDB servers started for the run\n"
           "  --rows N          entries in the stream for the batched phases (default 100000)\n"
           "  --batch B         worker batch = entries per transaction (default 500)\n"
           "  --per-row-rows M  entries for the batch-1 phases (default 5000)\n"
           "  --dir DIR         where the SQLite files go (default $TMPDIR or /tmp)\n"
           "  --pg-set N=V      a setting of the private server (repeatable), e.g.\n"
           "                    synchronous_commit=off; default: PostgreSQL's own\n"
           "                    (fsync=on, synchronous_commit=on)\n"
           "  --my-set N=V      a setting of the private MariaDB (repeatable), e.g.\n"
           "                    innodb_flush_log_at_trx_commit=2; default: MariaDB's own\n"
           "                    (innodb_flush_log_at_trx_commit=1, doublewrite on)\n");
    return f == stdout ? SK_EXIT_OK : SK_EXIT_USAGE;
}

static int parse_args(struct opts *o, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return -1;
        }
        if (!strcmp(a, "--webhooks")) {
            o->webhooks = 1;
            continue;
        }
        if (i + 1 >= argc)
            return sk_cli_usage_error("bench persist: unknown option or missing value: %s", a);
        const char *v = argv[++i];
        int64_t *t = !strcmp(a, "--rows")           ? &o->rows
                     : !strcmp(a, "--batch")        ? &o->batch
                     : !strcmp(a, "--per-row-rows") ? &o->per_row_rows
                                                    : NULL;
        if (t) {
            if (sk_cli_parse_i64(v, 1, t == &o->batch ? 10000 : 100000000, t))
                return sk_cli_usage_error("bench persist: %s: bad number '%s'", a, v);
        } else if (!strcmp(a, "--dir")) {
            o->dir = v;
        } else if (!strcmp(a, "--db")) {
            if (strcmp(v, "sqlite") != 0 && strcmp(v, "postgres") != 0 && strcmp(v, "mysql") &&
                strncmp(v, "postgres://", 11) != 0 && strncmp(v, "postgresql://", 13) != 0 &&
                !sk_mysql_url_is(v))
                return sk_cli_usage_error("bench persist: --db: expected sqlite, postgres, mysql, "
                                          "postgres://... or mysql://...");
            if (strstr(v, "options=") || strlen(v) > 900)
                return sk_cli_usage_error(
                    "bench persist: --db: the URL must be shorter than 900 bytes and carry no "
                    "options= (the benchmark sets search_path through it)");
            o->db = v;
        } else if (!strcmp(a, "--pg-set")) {
            if (!strchr(v, '=') || o->npg_set >= MAX_PG_SET)
                return sk_cli_usage_error("bench persist: --pg-set: NAME=VALUE, at most %d",
                                          MAX_PG_SET);
            o->pg_set[o->npg_set++] = v;
        } else if (!strcmp(a, "--my-set")) {
            if (!strchr(v, '=') || o->nmy_set >= MAX_PG_SET)
                return sk_cli_usage_error("bench persist: --my-set: NAME=VALUE, at most %d",
                                          MAX_PG_SET);
            o->my_set[o->nmy_set++] = v;
        } else {
            return sk_cli_usage_error("bench persist: unknown option %s", a);
        }
    }
    if ((o->npg_set || o->nmy_set) && o->db && strstr(o->db, "://"))
        return sk_cli_usage_error("bench persist: --pg-set and --my-set are for the private "
                                  "servers (no --db URL)");
    return 0;
}

int sk_bench_persist(int argc, char **argv)
{
    struct ctx c;
    memset(&c, 0, sizeof c);
    c.o.rows = 100000;
    c.o.batch = 500;
    c.o.per_row_rows = 5000;
    const char *tmp = getenv("TMPDIR");
    c.o.dir = tmp && *tmp ? tmp : "/tmp";
    int prc = parse_args(&c.o, argc, argv);
    if (prc == -1) return SK_EXIT_OK; /* --help */
    if (prc) return prc;
    const char *db = c.o.db;
    int want_sqlite = !db || !strcmp(db, "sqlite");
    int want_my = !db || !strcmp(db, "mysql") || sk_mysql_url_is(db);
    int want_pg = !db || !strcmp(db, "postgres") || !strncmp(db, "postgres", 8);
    int pg_url = db && strstr(db, "://") && want_pg, my_url = db && sk_mysql_url_is(db);

    struct backend be[3];
    memset(be, 0, sizeof be);
    int nbe = 0;
    if (want_sqlite) be[nbe++] = (struct backend){.name = "SQLite", .target = TARGET_SQLITE_PER_S};
    /* PostgreSQL, then MariaDB: the server given, else a private one
     * (started before any other thread or connection: it forks). */
    const struct server srv[2] = {
        {want_pg, pg_url, start_pg, {.pg = 1, .name = "PostgreSQL", .target = TARGET_PG_PER_S}},
        {want_my, my_url, start_my, {.my = 1, .name = "MariaDB", .target = TARGET_MY_PER_S}}};
    char note[2][600] = {"", ""};
    for (int i = 0; i < 2; i++)
        if (srv[i].want) nbe += backend_server(&c, &srv[i], &be[nbe], note[i], sizeof note[i]);

    snprintf(c.dir, sizeof c.dir, "%s/seckill-bench-persist-XXXXXX", c.o.dir);
    int rc = 0;
    if (!mkdtemp(c.dir)) {
        rc = fail("mkdtemp %s: %s", c.dir, strerror(errno));
        c.dir[0] = 0;
        goto out;
    }
    sk_log_set_level(SK_LOG_WARN); /* the worker's per-activity info lines */
    if (sk_redis_spawn_start(&c.sp, NULL) < 0) {
        rc = fail("%s", c.sp.errstr);
        goto out;
    }
    char err[256];
    if (sk_redis_new(&c.r, c.sp.url, 1000, 10000, err, sizeof err)) {
        rc = fail("%s", err);
        goto out;
    }
    char redis_ver[64] = "?", cpu[256], kernel[200];
    sk_bench_info_field(c.r, "server", "redis_version", redis_ver, sizeof redis_ver);
    sk_bench_machine(cpu, sizeof cpu, kernel, sizeof kernel);
    printf("seckill-bench persist: redis-server %s (private, no persistence); worker batch %" PRId64
           ", %" PRId64 " entries (per row: %" PRId64 ")\n",
           redis_ver, c.o.batch, c.o.rows, c.o.per_row_rows);
    printf("  machine: %ld cpus, %s, %s\n", sysconf(_SC_NPROCESSORS_ONLN), cpu, kernel);
    if (want_sqlite)
        printf("  SQLite %s (WAL, synchronous=FULL) on %s (%s)\n", sqlite3_libversion(), c.o.dir,
               fs_name(c.dir));
    for (int i = 0; i < nbe; i++) {
        if (be[i].my) {
            if ((rc = my_connect(&be[i])) != 0) goto out;
            if (c.mys.pid)
                printf("  (private server started for this run, data in %s (%s))\n", c.mys.dir,
                       fs_name(c.mys.dir));
            continue;
        }
        if (!be[i].pg) continue;
        if ((rc = pg_connect(&be[i])) != 0) goto out;
        if (c.pgs.pid)
            printf("  (private server started for this run, data in %s (%s))\n", c.pgs.dir,
                   fs_name(c.pgs.dir));
    }
    for (int i = 0; i < 2; i++)
        if (note[i][0]) printf("  %s\n", note[i]);
    fflush(stdout);

    double rate[3] = {0, 0, 0};
    for (int i = 0; i < nbe && !rc; i++)
        rc = run_backend(&c, &be[i], &rate[i]);
    if (!rc) {
        printf("\n  summary (worker, batch %" PRId64 "):", c.o.batch);
        for (int i = 0; i < nbe; i++)
            printf(" %s %.0f/s (target %.0f: %s)%s", be[i].name, rate[i], be[i].target,
                   rate[i] >= be[i].target ? "met" : "NOT met", i + 1 < nbe ? ";" : "\n");
    }
out:
    for (int i = 0; i < nbe; i++) {
        if (be[i].admin) {
            pg_drop_schema(&be[i]);
            PQfinish(be[i].admin);
        }
        if (be[i].my_admin) {
            pg_drop_schema(&be[i]);
            sk_bench_my_close(be[i].my_admin);
        }
    }
    if (c.mys.pid && sk_mysql_spawn_stop(&c.mys) < 0)
        fprintf(stderr, "seckill: %s\n", c.mys.errstr);
    sk_redis_free(c.r);
    if (c.sp.pid && sk_redis_spawn_stop(&c.sp) < 0) fprintf(stderr, "seckill: %s\n", c.sp.errstr);
    if (c.pgs.pid && sk_pg_spawn_stop(&c.pgs) < 0) fprintf(stderr, "seckill: %s\n", c.pgs.errstr);
    if (c.dir[0]) {
        for (int i = 1; i <= c.phase; i++) {
            static const char *const sfx[] = {"", "-wal", "-shm"};
            for (int j = 0; j < 3; j++) {
                char p[700];
                snprintf(p, sizeof p, "%s/phase%d.db%s", c.dir, i, sfx[j]);
                unlink(p);
            }
        }
        rmdir(c.dir);
    }
    return rc;
}
