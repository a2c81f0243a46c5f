/* strategies_run.c - one strategy of `seckill-bench strategies` from the
 * main thread (strategies_int.h): its setup (keys, activity, tables), its
 * client threads, the CPU samples around them, and the read-back from the
 * store of truth; and the redis-benchmark reference lines. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench_mysql.h"
#include "bench/bench_util.h"
#include "bench/strategies_int.h"
#include "core/clock.h"
#include "core/codes.h"
#include "core/error.h"
#include "engine/keys.h"
#include "redis/script.h"

/* ---- per-strategy setup and verification (main thread) ---- */

static int redis_simple(sk_redis *r, const char *fmt, const char *a, const char *b)
{
    redisReply *rep;
    int rc = sk_redis_cmd(r, &rep, fmt, a, b);
    if (rc < 0) return rc;
    rc = rep->type == REDIS_REPLY_ERROR ? SK_EPROTO : 0;
    if (rc < 0) snprintf(r->errstr, sizeof r->errstr, "%s", rep->str);
    freeReplyObject(rep);
    return rc;
}

static int setup_redis_keys(struct sk_bench_sctx *c, struct sk_bench_srun *run)
{
    const char *id = sk_bench_sdef[run->sid].id;
    snprintf(run->k_stock, sizeof run->k_stock, "sk:bench:%s:stock", id);
    snprintf(run->k_buyers, sizeof run->k_buyers, "sk:bench:%s:buyers", id);
    snprintf(run->k_orders, sizeof run->k_orders, "sk:bench:%s:orders", id);
    snprintf(run->k_lock, sizeof run->k_lock, "sk:bench:%s:lock", id);
    char stock[SK_BENCH_U64];
    snprintf(stock, sizeof stock, "%" PRId64, c->o.stock);
    redisReply *rep;
    int rc = sk_redis_cmd(c->ctl, &rep, "DEL %s %s %s %s", run->k_stock, run->k_buyers,
                          run->k_orders, run->k_lock);
    if (rc < 0) return rc;
    freeReplyObject(rep);
    return redis_simple(c->ctl, "SET %s %s", run->k_stock, stock);
}

static int setup_lua(struct sk_bench_sctx *c, struct sk_bench_srun *run, char *err, size_t cap)
{
    run->aid = SK_BENCH_AID_BASE + (uint64_t)run->sid;
    sk_stock_drop(c->ctl, run->aid);
    return sk_bench_preheat_open(c->ctl, run->aid, c->o.stock, 1, 1, err, cap);
}

/* The tables of the database strategies, one script per engine (MariaDB's
 * InnoDB, as the seeds have them). No CHECK (stock >= 0): the conditional
 * UPDATE alone must hold the line, and the verification would see a
 * negative stock. */
static const char *const schema[SID_COUNT] = {
    [SID_PG] = "DROP TABLE IF EXISTS orders, items;"
               "CREATE TABLE items (id int PRIMARY KEY, stock int NOT NULL);"
               "CREATE TABLE orders (id bigserial PRIMARY KEY, user_id bigint NOT NULL UNIQUE,"
               " item_id int NOT NULL, created_at timestamptz NOT NULL DEFAULT now());",
    [SID_MYSQL] = "DROP TABLE IF EXISTS orders, items;"
                  "CREATE TABLE items (id int PRIMARY KEY, stock int NOT NULL) ENGINE=InnoDB;"
                  "CREATE TABLE orders (id bigint AUTO_INCREMENT PRIMARY KEY, user_id bigint"
                  " NOT NULL UNIQUE, item_id int NOT NULL, created_at timestamp(6) NOT NULL"
                  " DEFAULT CURRENT_TIMESTAMP(6)) ENGINE=InnoDB;",
    [SID_SQLITE] = "PRAGMA journal_mode=WAL;"
                   "CREATE TABLE items (id INTEGER PRIMARY KEY, stock INTEGER NOT NULL);"
                   "CREATE TABLE orders (id INTEGER PRIMARY KEY, user_id INTEGER NOT NULL UNIQUE,"
                   " item_id INTEGER NOT NULL, created_at INTEGER NOT NULL DEFAULT"
                   " (strftime('%s', 'now')));",
};

/* Strategy sid's schema script and its stock row into sql (cap bytes). */
static void schema_sql(char *sql, size_t cap, int sid, int64_t stock)
{
    snprintf(sql, cap, "%sINSERT INTO items (id, stock) VALUES (1, %" PRId64 ")", schema[sid],
             stock);
}

static int pg_exec(PGconn *pg, const char *sql, char *err, size_t cap)
{
    PGresult *r = PQexec(pg, sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    if (!ok) snprintf(err, cap, "%.60s: %.180s", sql, PQresultErrorMessage(r));
    PQclear(r);
    return ok ? 0 : SK_EDB;
}

static void pg_quiet(void *arg, const char *msg)
{
    (void)arg; /* NOTICEs ("table does not exist, skipping") are not news */
    (void)msg;
}

static int setup_pg(struct sk_bench_sctx *c, char *err, size_t cap)
{
    PGconn *pg = PQconnectdb(c->pg.conninfo);
    if (PQstatus(pg) != CONNECTION_OK) {
        snprintf(err, cap, "connect: %.200s", PQerrorMessage(pg));
        PQfinish(pg);
        return SK_EDB;
    }
    PQsetNoticeProcessor(pg, pg_quiet, NULL);
    char sql[600];
    schema_sql(sql, sizeof sql, SID_PG, c->o.stock);
    int rc = pg_exec(pg, sql, err, cap);
    PQfinish(pg);
    return rc;
}

static int sq_exec(sqlite3 *db, const char *sql, char *err, size_t cap)
{
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) == SQLITE_OK) return 0;
    snprintf(err, cap, "%.60s: %.180s", sql, msg ? msg : sqlite3_errmsg(db));
    sqlite3_free(msg);
    return SK_EDB;
}

static int setup_my(struct sk_bench_sctx *c, char *err, size_t cap)
{
    struct st_mysql *m = sk_bench_my_connect(c->my.url, err, cap);
    if (!m) return SK_EDB;
    char sql[600];
    schema_sql(sql, sizeof sql, SID_MYSQL, c->o.stock);
    int rc = sk_bench_my_exec(m, sql, err, cap) == 0 ? 0 : SK_EDB;
    sk_bench_my_close(m);
    return rc;
}

static int setup_sqlite(struct sk_bench_sctx *c, char *err, size_t cap)
{
    snprintf(c->sqlite_path, sizeof c->sqlite_path, "%s/strategies.db", c->tmpdir);
    unlink(c->sqlite_path);
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(c->sqlite_path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
        SQLITE_OK) {
        snprintf(err, cap, "open %.150s: %.80s", c->sqlite_path,
                 db ? sqlite3_errmsg(db) : "no memory");
        sqlite3_close_v2(db);
        return SK_EDB;
    }
    char sql[600];
    schema_sql(sql, sizeof sql, SID_SQLITE, c->o.stock);
    int rc = sq_exec(db, sql, err, cap);
    sqlite3_close_v2(db);
    return rc;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Redis strategies without the engine: the order list is the truth. */
static int verify_redis_list(struct sk_bench_sctx *c, struct sk_bench_srun *run,
                             struct sk_bench_strat *s)
{
    redisReply *rep;
    int rc = sk_redis_cmd(c->ctl, &rep, "LRANGE %s 0 -1", run->k_orders);
    if (rc < 0) return rc;
    if (rep->type != REDIS_REPLY_ARRAY) {
        freeReplyObject(rep);
        return SK_EPROTO;
    }
    size_t n = rep->elements;
    uint64_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if (!ids) {
        freeReplyObject(rep);
        return SK_ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        ids[i] = rep->element[i]->type == REDIS_REPLY_STRING
                     ? strtoull(rep->element[i]->str, NULL, 10)
                     : 0;
    freeReplyObject(rep);
    qsort(ids, n, sizeof *ids, cmp_u64);
    int64_t dups = 0;
    for (size_t i = 1; i < n; i++)
        if (ids[i] == ids[i - 1]) dups++;
    free(ids);
    s->sold = (int64_t)n;
    s->limit_violations = dups;
    const char *get[] = {"GET", run->k_stock};
    return sk_bench_strat_cmd_i64(c->ctl, &s->stock_left, 2, get);
}

static int verify_lua(struct sk_bench_sctx *c, struct sk_bench_srun *run, struct sk_bench_strat *s)
{
    struct sk_stock_state st;
    int rc = sk_stock_state(c->ctl, run->aid, &st);
    if (rc < 0) return rc;
    /* the orders in the stream: quantity 1 each, so the units sold */
    if ((rc = sk_stock_stream_orders(c->ctl, run->aid, &s->sold)) < 0) return rc;
    s->stock_left = st.remaining;
    s->limit_violations = st.held - st.buyers; /* limit 1: held == buyers */
    return 0;
}

static int verify_pg(struct sk_bench_sctx *c, struct sk_bench_strat *s)
{
    PGconn *pg = PQconnectdb(c->pg.conninfo);
    int rc = SK_EDB;
    if (PQstatus(pg) == CONNECTION_OK) {
        PGresult *r = PQexec(pg, "SELECT (SELECT stock FROM items WHERE id = 1), count(*), "
                                 "count(DISTINCT user_id) FROM orders");
        if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
            s->stock_left = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
            s->sold = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
            s->limit_violations = s->sold - strtoll(PQgetvalue(r, 0, 2), NULL, 10);
            rc = 0;
        }
        PQclear(r);
    }
    PQfinish(pg);
    return rc;
}

static int verify_my(struct sk_bench_sctx *c, struct sk_bench_strat *s)
{
    char err[256];
    struct st_mysql *m = sk_bench_my_connect(c->my.url, err, sizeof err);
    if (!m) return SK_EDB;
    s->stock_left = sk_bench_my_int(m, "SELECT stock FROM items WHERE id = 1");
    s->sold = sk_bench_my_int(m, "SELECT count(*) FROM orders");
    long long users = sk_bench_my_int(m, "SELECT count(DISTINCT user_id) FROM orders");
    sk_bench_my_close(m);
    if (s->sold < 0 || users < 0) return SK_EDB;
    s->limit_violations = s->sold - users;
    return 0;
}

static int verify_sqlite(struct sk_bench_sctx *c, struct sk_bench_strat *s)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    int rc = SK_EDB;
    if (sqlite3_open_v2(c->sqlite_path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db,
                           "SELECT (SELECT stock FROM items WHERE id = 1), count(*), "
                           "count(DISTINCT user_id) FROM orders",
                           -1, &q, NULL) == SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW) {
        s->stock_left = sqlite3_column_int64(q, 0);
        s->sold = sqlite3_column_int64(q, 1);
        s->limit_violations = s->sold - sqlite3_column_int64(q, 2);
        rc = 0;
    }
    sqlite3_finalize(q);
    sqlite3_close_v2(db);
    return rc;
}

/* Prepares the store of truth of run->sid (keys, the engine's activity or
 * the tables); on failure the reason is in s->note. */
static int setup_strategy(struct sk_bench_sctx *c, struct sk_bench_srun *run,
                          struct sk_bench_strat *s)
{
    int rc;
    switch (run->sid) {
    case SID_PG: rc = setup_pg(c, s->note, sizeof s->note); break;
    case SID_MYSQL: rc = setup_my(c, s->note, sizeof s->note); break;
    case SID_SQLITE: rc = setup_sqlite(c, s->note, sizeof s->note); break;
    case SID_LUA:
    case SID_LUA_BATCH: rc = setup_lua(c, run, s->note, sizeof s->note); break;
    default:
        rc = setup_redis_keys(c, run);
        if (rc < 0) snprintf(s->note, sizeof s->note, "setup: %.200s", c->ctl->errstr);
    }
    return rc;
}

/* The state of nw client threads, allocated here (the caller frees it
 * after sk_bench_strat_client_close on each), and run->bar set up for them
 * and the caller. NULL when out of memory (nothing left allocated). */
static struct sk_bench_sw *new_clients(struct sk_bench_srun *run, size_t nw)
{
    const struct sk_bench_sopts *o = &run->c->o;
    struct sk_bench_sw *ws = calloc(nw, sizeof *ws);
    if (!ws) return NULL;
    int rc = 0;
    for (size_t i = 0; i < nw; i++) {
        ws[i].run = run;
        ws[i].idx = (int)i;
        ws[i].rng = 0x5EED0000ULL + i;
        sk_hist_init(&ws[i].hist);
        if (run->sid == SID_LUA_BATCH) {
            ws[i].p = calloc((size_t)o->batch, sizeof *ws[i].p);
            ws[i].res = calloc((size_t)o->batch, sizeof *ws[i].res);
            if (!ws[i].p || !ws[i].res) rc = SK_ENOMEM;
        }
    }
    if (rc < 0) {
        for (size_t i = 0; i < nw; i++)
            sk_bench_strat_client_close(&ws[i]);
        free(ws);
        return NULL;
    }
    return ws;
}

/* CPU seconds so far of the server the strategy talks to (0 for SQLite:
 * it runs in this process). */
static double server_cpu(struct sk_bench_sctx *c, enum sk_bench_sid sid)
{
    int redis_side = sid != SID_PG && sid != SID_MYSQL && sid != SID_SQLITE;
    return redis_side         ? sk_bench_redis_cpu_seconds(c->ctl)
           : sid == SID_PG    ? sk_pg_spawn_cpu_seconds(&c->pg)
           : sid == SID_MYSQL ? sk_bench_pid_cpu_seconds(c->my.pid)
                              : 0;
}

/* Adds a finished client's counts to s, then closes it; *last_admit moves
 * to its last sale when that is later. */
static void collect(struct sk_bench_strat *s, struct sk_bench_sw *w, int64_t *last_admit)
{
    s->answered += w->answered;
    s->admitted += w->admitted;
    s->sold_out += w->sold_out;
    s->limit += w->limit;
    s->gave_up += w->gave_up;
    s->errors += w->errors;
    s->retries += w->retries;
    s->lock_timeouts += w->lock_timeouts;
    s->lock_lost += w->lock_lost;
    if (w->last_admit_us > *last_admit) *last_admit = w->last_admit_us;
    sk_hist_add(&s->hist, &w->hist);
    if (w->err[0] && !s->note[0]) snprintf(s->note, sizeof s->note, "%s", w->err);
    sk_bench_strat_client_close(w);
}

/* Reads the store of truth back and judges the run: s->verified, the
 * oversold and undersold units, s->ok and the one-line s->check. */
static void judge(struct sk_bench_sctx *c, struct sk_bench_srun *run, struct sk_bench_strat *s)
{
    const struct sk_bench_sopts *o = &c->o;
    enum sk_bench_sid sid = run->sid;
    int rc;
    switch (sid) {
    case SID_PG: rc = verify_pg(c, s); break;
    case SID_MYSQL: rc = verify_my(c, s); break;
    case SID_SQLITE: rc = verify_sqlite(c, s); break;
    case SID_LUA:
    case SID_LUA_BATCH: rc = verify_lua(c, run, s); break;
    default: rc = verify_redis_list(c, run, s);
    }
    if (rc < 0) {
        snprintf(s->check, sizeof s->check, "cannot read the store back (%s)", sk_strerror(rc));
        return;
    }
    s->verified = 1;
    s->oversold = s->sold > o->stock ? s->sold - o->stock : 0;
    /* Every distinct user asked at least once: with more of them than
     * stock, any unit left is one a refused buyer could have had. */
    if (!s->cut && o->users >= o->stock) s->undersold = s->sold < o->stock ? o->stock - s->sold : 0;
    int agree = s->admitted == s->sold;
    int correct = s->oversold == 0 && s->limit_violations == 0 && s->stock_left >= 0;
    s->ok = s->errors == 0 && agree && (sid == SID_NAIVE || correct);
    snprintf(s->check, sizeof s->check,
             "%s: sold %" PRId64 " (store) / %" PRId64 " (answers) of %" PRId64
             ", stock left %" PRId64 ", users over the limit %" PRId64 "%s",
             !s->ok                            ? "FAILED"
             : sid == SID_NAIVE && s->oversold ? "oversold, as expected"
                                               : "ok",
             s->sold, s->admitted, o->stock, s->stock_left, s->limit_violations,
             s->cut ? " (cut by --duration)" : "");
}

/* Runs one strategy: setup, threads, verification. Results in c->s[sid]. */
void sk_bench_strat_run(struct sk_bench_sctx *c, enum sk_bench_sid sid)
{
    struct sk_bench_strat *s = &c->s[sid];
    const struct sk_bench_sopts *o = &c->o;
    sk_hist_init(&s->hist);
    s->undersold = -1;
    struct sk_bench_srun run;
    memset(&run, 0, sizeof run);
    run.c = c;
    run.sid = sid;
    atomic_init(&run.next, 0);
    atomic_init(&run.stop, 0);
    atomic_init(&run.cut, 0);

    if (sid == SID_PG && !c->have_pg) {
        s->status = ST_SKIPPED;
        snprintf(s->note, sizeof s->note, "PostgreSQL not available: %.200s", c->pg_err);
        return;
    }
    if (sid == SID_MYSQL && !c->have_my) {
        s->status = ST_SKIPPED;
        snprintf(s->note, sizeof s->note, "MariaDB not available: %.200s", c->my_err);
        return;
    }
    if (setup_strategy(c, &run, s) < 0) {
        s->status = ST_SKIPPED;
        return;
    }
    size_t nw = (size_t)o->conns;
    struct sk_bench_sw *ws = new_clients(&run, nw);
    if (!ws) {
        s->status = ST_SKIPPED;
        snprintf(s->note, sizeof s->note, "out of memory");
        return;
    }
    if (sk_bench_threads_start(&run.bar, ws, nw, sizeof *ws, offsetof(struct sk_bench_sw, tid),
                               sk_bench_strat_client_main, s->note, sizeof s->note) < 0) {
        for (size_t i = 0; i < nw; i++)
            sk_bench_strat_client_close(&ws[i]);
        free(ws);
        s->status = ST_SKIPPED;
        return;
    }
    pthread_barrier_wait(&run.bar);
    double scpu0 = server_cpu(c, sid);
    double ccpu0 = sk_bench_self_cpu_seconds(), mcpu0 = sk_bench_machine_cpu_seconds();
    run.t0_us = sk_mono_us();
    run.deadline_us = run.t0_us + o->duration_s * 1000000;
    pthread_barrier_wait(&run.bar);
    int64_t last_admit = run.t0_us;
    for (size_t i = 0; i < nw; i++)
        pthread_join(ws[i].tid, NULL);
    int64_t t1 = sk_mono_us();
    double scpu1 = server_cpu(c, sid);
    double ccpu1 = sk_bench_self_cpu_seconds(), mcpu1 = sk_bench_machine_cpu_seconds();
    for (size_t i = 0; i < nw; i++)
        collect(s, &ws[i], &last_admit);
    pthread_barrier_destroy(&run.bar);
    free(ws);
    s->status = ST_RAN;
    s->cut = atomic_load(&run.cut) || sk_bench_interrupted;
    s->secs = (double)(t1 - run.t0_us) / 1e6;
    s->sellout_secs = (double)(last_admit - run.t0_us) / 1e6;
    s->client_cpu_s = ccpu1 - ccpu0;
    s->machine_cpu_s = mcpu1 - mcpu0;
    /* SQLite runs inside this process: its CPU is the process's. */
    s->server_cpu_s = sid == SID_SQLITE ? s->client_cpu_s : scpu1 - scpu0;
    judge(c, &run, s);
}

/* ---- redis-benchmark reference lines ---- */

/* Runs redis-benchmark with argv into ref: its rate and note, the wall
 * time and the Redis CPU time it took. */
static int run_reference(struct sk_bench_sctx *c, struct sk_bench_ref *ref, const char **argv)
{
    double cpu0 = sk_bench_redis_cpu_seconds(c->ctl);
    int64_t t0 = sk_mono_us();
    int rc = sk_bench_redis_benchmark(argv, c->o.duration_s * 1000 + 10000, &sk_bench_interrupted,
                                      &ref->rps, ref->note, sizeof ref->note);
    ref->secs = (double)(sk_mono_us() - t0) / 1e6;
    ref->cpu_s = sk_bench_redis_cpu_seconds(c->ctl) - cpu0;
    return rc;
}

void sk_bench_strat_reference(struct sk_bench_sctx *c, int which)
{
    struct sk_bench_ref *ref = &c->ref[which];
    if (!sk_bench_on_path("redis-benchmark")) {
        snprintf(ref->note, sizeof ref->note, "redis-benchmark not on PATH");
        return;
    }
    char port[16], n[SK_BENCH_U64], aid[SK_BENCH_U64], nkeys[8];
    snprintf(port, sizeof port, "%d", c->rs.port);
    snprintf(n, sizeof n, "%" PRId64, ref->n);
    snprintf(nkeys, sizeof nkeys, "%d", SK_PURCHASE_NKEYS + 1); /* + the one buyer's limiter */
    char rl_key[SK_RL_KEY_MAX];
    const char *argv[48] = {
        "redis-benchmark",    "-h", "127.0.0.1",         "-p",   port, "-n", n, "-P",
        SK_BENCH_RB_PIPELINE, "-c", SK_BENCH_RB_CLIENTS, "--csv"};
    int a = 12;
    if (which == REF_DECR) {
        argv[a++] = "DECR";
        argv[a++] = "sk:bench:ref:decr";
    } else {
        /* The purchase script as the engine calls it; user ids random
         * 12-digit numbers (__rand_int__), so a handful repeat. */
        uint64_t id = SK_BENCH_AID_BASE + 100 + (uint64_t)which;
        snprintf(aid, sizeof aid, "%" PRIu64, id);
        int64_t stock = which == REF_SAME ? c->o.stock : ref->n + 1024; /* + whole pipelines */
        sk_stock_drop(c->ctl, id);
        if (sk_bench_preheat_open(c->ctl, id, stock, 1, 1, ref->note, sizeof ref->note) < 0) return;
        struct sk_keys k;
        sk_keys_for(&k, id);
        argv[a++] = "-r";
        argv[a++] = "2147483647";
        argv[a++] = "EVALSHA";
        argv[a++] = sk_script_sha(SK_SCRIPT_PURCHASE_BATCH);
        argv[a++] = nkeys;
        const char *keys[SK_PURCHASE_NKEYS];
        sk_keys_purchase(&k, keys);
        for (int i = 0; i < SK_PURCHASE_NKEYS; i++)
            argv[a++] = keys[i]; /* k outlives run_rb below */
        /* the buyer's limiter key (keys.h) names user 0, not the random
         * one: redis-benchmark draws each __rand_int__ apart, and no rate
         * limit is on here, so the script never touches it */
        if (sk_keys_rl_user(&k, 0, rl_key, sizeof rl_key) < 0) {
            snprintf(ref->note, sizeof ref->note, "limiter key: too long");
            return;
        }
        argv[a++] = rl_key;
        sk_bench_rb_purchase_args(argv + a, aid);
        a += SK_BENCH_RB_ARGC;
        argv[a] = NULL;
        int rc = run_reference(c, ref, argv);
        struct sk_stock_state st;
        int64_t sold = -1;
        if (rc == 0 && sk_stock_state(c->ctl, id, &st) == 0 &&
            sk_stock_stream_orders(c->ctl, id, &sold) == 0) {
            ref->ran = 1;
            snprintf(ref->note, sizeof ref->note,
                     "admitted %" PRId64 " of stock %" PRId64 ", stock left %" PRId64 "%s", sold,
                     stock, st.remaining, sold > stock || st.remaining < 0 ? " (OVERSOLD)" : "");
        }
        sk_stock_drop(c->ctl, id);
        return;
    }
    argv[a] = NULL;
    if (run_reference(c, ref, argv) == 0) ref->ran = 1;
}
