/* strategies_int.h - what the files of `seckill-bench strategies` share
 * (bench/ only): the options, the strategies' table, the run's context and
 * the client threads' state. bench_strategies.c is the entry point (flags,
 * servers), strategies_client.c the client side (one purchase per
 * strategy, the client threads), strategies_run.c one strategy's setup,
 * run and read-back plus the redis-benchmark reference lines,
 * strategies_report.c the JSON and the table; chart.c draws the chart. */
#ifndef SK_BENCH_STRATEGIES_INT_H
#define SK_BENCH_STRATEGIES_INT_H
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <libpq-fe.h>
#include <sqlite3.h>

#include "core/histogram.h"
#include "engine/stock.h"
#include "redis/redis_conn.h"
#include "spawn/redis_spawn.h"
#include "tests/support/spawn/mysql_spawn.h"
#include "tests/support/spawn/pg_spawn.h"

/* Targets (BENCHMARKS.md) (2-core machine, same run). */
#define SK_BENCH_TARGET_LUA_VS_DB 20.0
#define SK_BENCH_TARGET_BATCH_VS_LUA 1.3

/* WATCH: immediate retries (the seeds' retry storm), bounded. */
#define SK_BENCH_WATCH_TRIES 64
/* Lock: TTL long enough that a descheduled holder keeps it; waiting is
 * bounded per request; backoff doubles from MIN to MAX with jitter. */
#define SK_BENCH_LOCK_TTL_MS 2000
#define SK_BENCH_LOCK_WAIT_US 2000000
#define SK_BENCH_LOCK_BACKOFF_MIN_US 50
#define SK_BENCH_LOCK_BACKOFF_MAX_US 2000
#define SK_BENCH_SQLITE_BUSY_MS 10000
#define SK_BENCH_PG_STATEMENT_TIMEOUT_MS 10000
/* A phase gives up after this many transport/database errors. */
#define SK_BENCH_MAX_ERRORS 100
/* redis-benchmark settings of the reference lines (as in bench admission). */
#define SK_BENCH_RB_PIPELINE "16"
#define SK_BENCH_RB_CLIENTS "50"
#define SK_BENCH_USER_BASE 1000000ULL
#define SK_BENCH_AID_BASE 9100000000ULL
#define SK_BENCH_U64 24

struct sk_bench_sopts {
    int64_t stock, requests, users, conns, batch, duration_s;
    int quick, json;
    const char *chart;      /* --chart FILE.svg */
    const char *chart_from; /* --chart-from RUN.json */
};

enum sk_bench_sid {
    SID_NAIVE,
    SID_PG,
    SID_MYSQL,
    SID_SQLITE,
    SID_WATCH,
    SID_LOCK,
    SID_LUA,
    SID_LUA_BATCH,
    SID_COUNT
};

enum sk_bench_out { OUT_ADMITTED, OUT_SOLD_OUT, OUT_LIMIT, OUT_GAVE_UP };

enum sk_bench_status { ST_PENDING, ST_RAN, ST_SKIPPED };

/* A strategy's name, label and store of truth (indexed by sid). */
struct sk_bench_sdesc {
    const char *id, *label, *store;
};
extern const struct sk_bench_sdesc sk_bench_sdef[SID_COUNT];

/* One strategy's results. */
struct sk_bench_strat {
    enum sk_bench_status status;
    char note[256];
    int cut;
    int64_t answered, admitted, sold_out, limit, gave_up, errors, retries, lock_timeouts, lock_lost;
    double secs, sellout_secs, server_cpu_s, client_cpu_s, machine_cpu_s;
    struct sk_hist hist;
    /* read back from the store of truth after the run */
    int verified;
    int64_t sold, stock_left, limit_violations, oversold, undersold; /* undersold -1: n/a */
    int ok;
    char check[256];
};

/* A reference line (redis-benchmark). */
struct sk_bench_ref {
    const char *id, *label;
    int ran;
    int64_t n;
    double rps, secs, cpu_s;
    char note[256];
};

enum { REF_SAME, REF_ADMIT, REF_DECR, REF_COUNT };

/* Everything one run owns. */
struct sk_bench_sctx {
    struct sk_bench_sopts o;
    uint64_t *users; /* the demand: user id of request i */
    struct sk_redis_spawn rs;
    struct sk_pg_spawn pg;
    struct sk_mysql_spawn my;
    int have_redis, have_pg, have_my;
    char pg_err[300], my_err[300];
    char tmpdir[256]; /* SQLite's */
    char sqlite_path[300];
    sk_redis *ctl;
    char redis_version[64], pg_version[64], pg_durability[64], my_version[64], my_durability[96];
    char lock_sha[48];
    struct sk_bench_strat s[SID_COUNT];
    struct sk_bench_ref ref[REF_COUNT];
};

/* State shared by the client threads of one strategy. */
struct sk_bench_srun {
    struct sk_bench_sctx *c;
    enum sk_bench_sid sid;
    _Atomic int64_t next;
    atomic_int stop, cut;
    int64_t t0_us, deadline_us;
    pthread_barrier_t bar;
    uint64_t aid; /* Lua strategies */
    char k_stock[64], k_buyers[64], k_orders[64], k_lock[64];
};

/* One client thread with its own connection. */
struct sk_bench_sw {
    struct sk_bench_srun *run;
    pthread_t tid;
    int idx;
    sk_redis *r;
    PGconn *pg;
    struct st_mysql *my;
    sqlite3 *db;
    sqlite3_stmt *q_begin, *q_upd, *q_ins, *q_commit, *q_rollback;
    struct sk_purchase *p;
    struct sk_admission *res;
    struct sk_hist hist;
    int64_t answered, admitted, sold_out, limit, gave_up, errors, retries, lock_timeouts, lock_lost,
        last_admit_us;
    uint64_t rng, tokens;
    char err[256];
};

/* strategies_client.c: a seeded splitmix64 step (the demand and the lock's
 * jitter). */
uint64_t sk_bench_strat_rng(uint64_t *s);
/* One command given as strings, its reply as an integer (INTEGER, a
 * STRING holding one, NIL as 0, a STATUS as 1); an error reply is
 * SK_EPROTO with its text in r->errstr. */
int sk_bench_strat_cmd_i64(sk_redis *r, int64_t *v, int argc, const char **argv);
/* A client thread (pthread start routine; arg is its struct sk_bench_sw):
 * connects, meets the others at run->bar twice (connected, go), then takes
 * requests from the shared list. */
void *sk_bench_strat_client_main(void *arg);
/* Frees what a client opened and allocated (connections, statements,
 * batch arrays); w itself stays the caller's. */
void sk_bench_strat_client_close(struct sk_bench_sw *w);

/* strategies_run.c: runs one strategy (setup, client threads, read-back);
 * results in c->s[sid]. */
void sk_bench_strat_run(struct sk_bench_sctx *c, enum sk_bench_sid sid);
/* Runs redis-benchmark reference line `which` (REF_*); results in
 * c->ref[which]. */
void sk_bench_strat_reference(struct sk_bench_sctx *c, int which);

/* strategies_report.c: the whole run as one JSON object, the one source
 * of the table's ratios and of the chart (a new reference the caller
 * json_decref's). */
json_t *sk_bench_strat_json(const struct sk_bench_sctx *c, int ok);
/* The readable table on stdout, from c and the JSON of the run. */
void sk_bench_strat_print(const struct sk_bench_sctx *c, const json_t *root);

#endif
