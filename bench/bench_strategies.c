/* bench_strategies.c - `seckill bench strategies`: the seeds' comparison of
 * stock-deduction strategies, on this machine, in one run (BENCHMARKS.md).
 *
 * Every strategy gets the same demand (the same list of purchase requests,
 * distinct users with some repeats, per-user limit 1, quantity 1), the same
 * stock and the same concurrency: --conns client threads, each with its own
 * connection, closed loop (send one purchase, wait for its answer, take the
 * next request from the shared list). Strategies:
 *   naive      GET stock, SISMEMBER buyer, then SET stock-1 from the client
 *   pg         UPDATE ... WHERE stock >= 1 + INSERT order (unique user), one
 *              transaction per purchase, on a private PostgreSQL
 *   sqlite     the same on SQLite (WAL, busy timeout: writers serialise)
 *   watch      WATCH/MULTI/EXEC with bounded immediate retries
 *   lock       SET lock NX PX + token-checked release (Lua compare-and-del),
 *              bounded waiting with exponential backoff
 *   lua        the engine, one purchase script call per request
 *   lua_batch  the engine, purchase_batch: each client thread takes --batch
 *              requests from the list at once and sends them in one call
 *   segmented  lua_batch on an activity of SK_BENCH_SEGMENTS segments
 *              (docs/segments.md): each batch split by home segment, one
 *              call per segment, borrowing at the end of the sale; on one
 *              Redis this only adds calls (its point is a cluster: see
 *              `seckill bench cluster`)
 * After each strategy the store of truth is read back (Redis keys and order
 * list or stream, database rows): units sold, oversold (beyond stock),
 * undersold (stock left although more distinct buyers asked than there was
 * stock), users holding more than the limit. Latency per request goes into
 * an sk_hist; the server's CPU is read before and after (INFO cpu for
 * Redis, /proc for the PostgreSQL processes, getrusage for in-process
 * SQLite). Reference lines from the same run: redis-benchmark on the
 * purchase script (same stock and request count: the Redis limit), on the
 * script with every call admitted, and on DECR.
 *
 * Starts its own redis-server (no persistence) and PostgreSQL (defaults:
 * fsync and synchronous_commit on), SQLite in a temporary directory, all
 * on free loopback ports, and stops and removes them on every exit path,
 * Ctrl-C included. Every strategy is capped by --duration.
 *
 * `--chart FILE.svg` writes a bar chart (throughput and p99 per strategy)
 * as hand-written SVG from the run's JSON; `--chart-from RUN.json` redraws
 * it from a saved `--json` output without running anything. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <libpq-fe.h>
#include <sqlite3.h>

#include "bench/bench_util.h"
#include "core/cli.h"
#include "core/clock.h"
#include "core/codes.h"
#include "core/error.h"
#include "core/histogram.h"
#include "engine/keys.h"
#include "engine/segment.h"
#include "engine/stock.h"
#include "redis/redis_conn.h"
#include "redis/script.h"
#include "tools/spawn/pg_spawn.h"
#include "tools/spawn/redis_spawn.h"

int sk_bench_strategies(int argc, char **argv);

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
/* Segments of the segmented strategy's activity. */
#define SK_BENCH_SEGMENTS 8
#define SK_BENCH_U64 24

static const char sk_bench_release_lua[] =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end "
    "return 0";

struct sk_bench_sopts {
    int64_t stock, requests, users, conns, batch, duration_s;
    int quick, json;
    const char *chart;      /* --chart FILE.svg */
    const char *chart_from; /* --chart-from RUN.json */
};

enum sk_bench_sid {
    SID_NAIVE,
    SID_PG,
    SID_SQLITE,
    SID_WATCH,
    SID_LOCK,
    SID_LUA,
    SID_LUA_BATCH,
    SID_SEGMENTED,
    SID_COUNT
};

enum sk_bench_out { OUT_ADMITTED, OUT_SOLD_OUT, OUT_LIMIT, OUT_GAVE_UP };

enum sk_bench_status { ST_PENDING, ST_RAN, ST_SKIPPED };

static const struct {
    const char *id, *label, *store;
} sk_bench_sdef[SID_COUNT] = {
    [SID_NAIVE] = {"naive", "naive GET/SET (Redis)", "redis"},
    [SID_PG] = {"pg", "DB conditional UPDATE (PostgreSQL)", "postgresql"},
    [SID_SQLITE] = {"sqlite", "DB conditional UPDATE (SQLite)", "sqlite"},
    [SID_WATCH] = {"watch", "Redis WATCH/MULTI/EXEC + retry", "redis"},
    [SID_LOCK] = {"lock", "Redis lock SET NX PX + release", "redis"},
    [SID_LUA] = {"lua", "Redis+Lua per request", "redis"},
    [SID_LUA_BATCH] = {"lua_batch", "Redis+Lua batched", "redis"},
    [SID_SEGMENTED] = {"segmented", "Redis+Lua segmented", "redis"},
};

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
    int have_redis, have_pg;
    char pg_err[300];
    char tmpdir[256]; /* SQLite's */
    char sqlite_path[300];
    sk_redis *ctl;
    char redis_version[64], pg_version[64], pg_durability[64];
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

/* Set by SIGINT/SIGTERM: a lock-free atomic is signal-safe and race-free. */
static atomic_int sk_bench_sint;

static void sk_bench_on_sig(int sig)
{
    (void)sig;
    sk_bench_sint = 1;
}

static int usage(FILE *f)
{
    fprintf(f,
            "usage: seckill bench strategies [options]\n"
            "\n"
            "The seeds' comparison on this machine in one run: naive GET/SET, DB conditional\n"
            "UPDATE (PostgreSQL and SQLite), Redis WATCH/MULTI, Redis lock, Redis+Lua per\n"
            "request and batched, with the same stock, demand and concurrency; throughput,\n"
            "p50/p99/p99.9, oversold, undersold, retries and server CPU per strategy, next\n"
            "to redis-benchmark on the purchase script (the Redis limit) and on DECR.\n"
            "Starts its own redis-server and PostgreSQL (temporary directories, free ports).\n"
            "\n"
            "options:\n"
            "  --quick         small sizes (stock 500, 5000 requests, 16 conns, 4 s cap)\n"
            "  --stock N       units for sale (default 5000)\n"
            "  --requests N    purchase requests, the same list for every strategy\n"
            "                  (default 100000: 5,000 units for 100,000 buyers, the seeds' sale)\n"
            "  --users N       distinct users among them, N <= requests; the rest are\n"
            "                  repeats of random users (default 90%% of requests)\n"
            "  --conns N       client threads, each with its own connection, 1..128\n"
            "                  (default 32)\n"
            "  --batch N       requests per purchase_batch call, 1..%d (default 16)\n"
            "  --duration S    cap on each strategy in seconds, 1..600 (default 30)\n"
            "  --json          print one JSON object instead of the table\n"
            "  --chart FILE    write an SVG chart (throughput and p99 per strategy)\n"
            "  --chart-from J  with --chart: redraw the chart from a saved --json output\n"
            "                  and run nothing\n"
            "\n"
            "exit status: 0 every strategy ran and the correct ones neither oversold nor\n"
            "broke the limit, 1 otherwise, 2 bad usage\n",
            SK_BATCH_MAX);
    return f == stdout ? SK_EXIT_OK : SK_EXIT_USAGE;
}

/* ---- small helpers ---- */

static uint64_t rng_next(uint64_t *s)
{
    /* splitmix64: seeded, so every run gets the same demand. */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static void sleep_us(int64_t us)
{
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

/* Integer value of a reply: INTEGER, a STRING holding one, NIL as 0, a
 * STATUS as 1; an error reply is SK_EPROTO with its text in r->errstr. */
static int reply_i64(sk_redis *r, const redisReply *rep, int64_t *v)
{
    switch (rep->type) {
    case REDIS_REPLY_INTEGER: *v = rep->integer; return 0;
    case REDIS_REPLY_STRING: *v = strtoll(rep->str, NULL, 10); return 0;
    case REDIS_REPLY_NIL: *v = 0; return 0;
    case REDIS_REPLY_STATUS: *v = 1; return 0;
    case REDIS_REPLY_ERROR: snprintf(r->errstr, sizeof r->errstr, "%s", rep->str); return SK_EPROTO;
    default: snprintf(r->errstr, sizeof r->errstr, "unexpected reply type %d", rep->type);
    }
    return SK_EPROTO;
}

/* One command given as strings, its reply as an integer (reply_i64). */
static int cmd_i64(sk_redis *r, int64_t *v, int argc, const char **argv)
{
    redisReply *rep;
    int rc = sk_redis_command(r, &rep, argc, argv, NULL);
    if (rc < 0) return rc;
    rc = reply_i64(r, rep, v);
    freeReplyObject(rep);
    return rc;
}

/* Reads n pipelined replies; *last gets the last one's type (-1 on error);
 * *v its integer value when it has one. */
static int read_replies(sk_redis *r, int n, int *last_type, int64_t *v)
{
    int rc = 0;
    *last_type = -1;
    for (int i = 0; i < n; i++) {
        redisReply *rep;
        int e = sk_redis_read(r, &rep);
        if (e < 0) return e; /* connection dropped: the rest is gone too */
        if (rep->type == REDIS_REPLY_ERROR && rc == 0) {
            snprintf(r->errstr, sizeof r->errstr, "%s", rep->str);
            rc = SK_EPROTO;
        }
        if (i == n - 1) {
            *last_type = rep->type;
            if (rep->type == REDIS_REPLY_INTEGER) *v = rep->integer;
        }
        freeReplyObject(rep);
    }
    return rc;
}

/* ---- the strategies: one purchase each ----
 * Each returns an OUT_* code, or a negative SK_E* code with the reason in
 * w->err (the purchase's outcome is then unknown). */

static int werr(struct sk_bench_sw *w, int rc, const char *what, const char *detail)
{
    snprintf(w->err, sizeof w->err, "%.60s: %.180s", what, detail);
    return rc;
}

/* The naive check-then-act: read the stock and the buyer, decide in the
 * client, write back. Between the GET and the SET other clients run their
 * own GET/SET; several read the same stock, each sells and each writes
 * stock-1 (a lost update), so more units are sold than the stock held. */
static int buy_naive(struct sk_bench_sw *w, uint64_t user)
{
    struct sk_bench_srun *run = w->run;
    char u[SK_BENCH_U64], left[SK_BENCH_U64];
    snprintf(u, sizeof u, "%" PRIu64, user);
    int64_t stock, member, v;
    const char *get[] = {"GET", run->k_stock};
    int rc = cmd_i64(w->r, &stock, 2, get);
    if (rc < 0) return werr(w, rc, "naive GET", w->r->errstr);
    if (stock <= 0) return OUT_SOLD_OUT;
    const char *ism[] = {"SISMEMBER", run->k_buyers, u};
    if ((rc = cmd_i64(w->r, &member, 3, ism)) < 0)
        return werr(w, rc, "naive SISMEMBER", w->r->errstr);
    if (member) return OUT_LIMIT;
    snprintf(left, sizeof left, "%" PRId64, stock - 1);
    const char *set[] = {"SET", run->k_stock, left};
    const char *sadd[] = {"SADD", run->k_buyers, u};
    const char *push[] = {"RPUSH", run->k_orders, u};
    if ((rc = cmd_i64(w->r, &v, 3, set)) < 0 || (rc = cmd_i64(w->r, &v, 3, sadd)) < 0 ||
        (rc = cmd_i64(w->r, &v, 3, push)) < 0)
        return werr(w, rc, "naive write", w->r->errstr);
    return OUT_ADMITTED;
}

/* Optimistic: WATCH the stock and the buyers, read, then MULTI/EXEC the
 * writes; EXEC answers nil when another client changed a watched key in
 * between, and the whole purchase starts again (bounded). */
static int buy_watch(struct sk_bench_sw *w, uint64_t user)
{
    struct sk_bench_srun *run = w->run;
    char u[SK_BENCH_U64];
    snprintf(u, sizeof u, "%" PRIu64, user);
    const char *watch[] = {"WATCH", run->k_stock, run->k_buyers};
    const char *get[] = {"GET", run->k_stock};
    const char *ism[] = {"SISMEMBER", run->k_buyers, u};
    const char *unwatch[] = {"UNWATCH"};
    const char *multi[] = {"MULTI"};
    const char *decr[] = {"DECR", run->k_stock};
    const char *sadd[] = {"SADD", run->k_buyers, u};
    const char *push[] = {"RPUSH", run->k_orders, u};
    const char *exec[] = {"EXEC"};
    for (int t = 0;; t++) {
        int64_t v, stock, member;
        int rc = cmd_i64(w->r, &v, 3, watch);
        if (rc == 0) rc = cmd_i64(w->r, &stock, 2, get);
        if (rc < 0) return werr(w, rc, "WATCH/GET", w->r->errstr);
        int out = -1;
        if (stock <= 0) {
            out = OUT_SOLD_OUT;
        } else {
            if ((rc = cmd_i64(w->r, &member, 3, ism)) < 0)
                return werr(w, rc, "SISMEMBER", w->r->errstr);
            if (member) out = OUT_LIMIT;
        }
        if (out >= 0) {
            if ((rc = cmd_i64(w->r, &v, 1, unwatch)) < 0)
                return werr(w, rc, "UNWATCH", w->r->errstr);
            return out;
        }
        /* The transaction in one round trip, as clients send it. */
        if ((rc = sk_redis_append(w->r, 1, multi, NULL)) < 0 ||
            (rc = sk_redis_append(w->r, 2, decr, NULL)) < 0 ||
            (rc = sk_redis_append(w->r, 3, sadd, NULL)) < 0 ||
            (rc = sk_redis_append(w->r, 3, push, NULL)) < 0 ||
            (rc = sk_redis_append(w->r, 1, exec, NULL)) < 0)
            return werr(w, rc, "MULTI", w->r->errstr);
        int type;
        if ((rc = read_replies(w->r, 5, &type, &v)) < 0)
            return werr(w, rc, "MULTI/EXEC", w->r->errstr);
        if (type == REDIS_REPLY_ARRAY) return OUT_ADMITTED;
        if (type != REDIS_REPLY_NIL) return werr(w, SK_EPROTO, "EXEC", "unexpected reply");
        w->retries++; /* a watched key changed: the seeds' retry storm */
        if (t + 1 >= SK_BENCH_WATCH_TRIES) return OUT_GAVE_UP;
    }
}

/* Pessimistic: one lock for the item (SET NX PX with a unique token),
 * check and act under it, release only if the lock is still ours (Lua
 * compare-and-del). Waiting for the lock backs off exponentially with
 * jitter and is bounded per request. */
static int buy_lock(struct sk_bench_sw *w, uint64_t user)
{
    struct sk_bench_srun *run = w->run;
    char u[SK_BENCH_U64], token[48], ttl[16];
    snprintf(u, sizeof u, "%" PRIu64, user);
    snprintf(token, sizeof token, "%d:%" PRIu64, w->idx, ++w->tokens);
    snprintf(ttl, sizeof ttl, "%d", SK_BENCH_LOCK_TTL_MS);
    const char *lock[] = {"SET", run->k_lock, token, "NX", "PX", ttl};
    int64_t start = sk_mono_us(), backoff = SK_BENCH_LOCK_BACKOFF_MIN_US;
    for (;;) {
        int64_t got;
        int rc = cmd_i64(w->r, &got, 6, lock);
        if (rc < 0) return werr(w, rc, "SET NX", w->r->errstr);
        if (got) break;
        w->retries++;
        if (sk_mono_us() - start > SK_BENCH_LOCK_WAIT_US) {
            w->lock_timeouts++;
            return OUT_GAVE_UP;
        }
        /* Jitter: waiters that sleep the same time collide again. */
        sleep_us(backoff / 2 + (int64_t)(rng_next(&w->rng) % (uint64_t)backoff));
        backoff =
            backoff * 2 > SK_BENCH_LOCK_BACKOFF_MAX_US ? SK_BENCH_LOCK_BACKOFF_MAX_US : backoff * 2;
    }
    int out = -1, rc = 0;
    int64_t stock, member, v;
    const char *get[] = {"GET", run->k_stock};
    const char *ism[] = {"SISMEMBER", run->k_buyers, u};
    const char *decr[] = {"DECR", run->k_stock};
    const char *sadd[] = {"SADD", run->k_buyers, u};
    const char *push[] = {"RPUSH", run->k_orders, u};
    if ((rc = cmd_i64(w->r, &stock, 2, get)) < 0) goto release;
    if (stock <= 0) {
        out = OUT_SOLD_OUT;
        goto release;
    }
    if ((rc = cmd_i64(w->r, &member, 3, ism)) < 0) goto release;
    if (member) {
        out = OUT_LIMIT;
        goto release;
    }
    int type;
    if ((rc = sk_redis_append(w->r, 2, decr, NULL)) < 0 ||
        (rc = sk_redis_append(w->r, 3, sadd, NULL)) < 0 ||
        (rc = sk_redis_append(w->r, 3, push, NULL)) < 0 ||
        (rc = read_replies(w->r, 3, &type, &v)) < 0)
        goto release;
    out = OUT_ADMITTED;
release:;
    /* Released even after an error: a stuck lock would stall everyone for
     * its TTL. */
    char err[200] = "";
    if (rc < 0) snprintf(err, sizeof err, "%.190s", w->r->errstr);
    const char *rel[] = {"EVALSHA", w->run->c->lock_sha, "1", run->k_lock, token};
    int64_t released = 0;
    int rrc = cmd_i64(w->r, &released, 5, rel);
    if (rc < 0) return werr(w, rc, "under lock", err);
    if (rrc < 0) return werr(w, rrc, "release", w->r->errstr);
    if (!released) w->lock_lost++; /* the TTL ran out while we held it */
    return out;
}

static int map_rc(struct sk_bench_sw *w, int rc)
{
    switch (rc) {
    case SK_RC_OK: return OUT_ADMITTED;
    case SK_RC_SOLD_OUT:
    case SK_RC_INSUFFICIENT: return OUT_SOLD_OUT;
    case SK_RC_LIMIT_EXCEEDED: return OUT_LIMIT;
    default: return werr(w, SK_EPROTO, "purchase", sk_rc_name(rc));
    }
}

static int buy_lua(struct sk_bench_sw *w, uint64_t user)
{
    struct sk_admission res;
    int rc = sk_stock_purchase(w->r, w->run->aid, user, 1, &res, NULL);
    if (rc < 0) return werr(w, rc, "purchase", w->r->errstr);
    return map_rc(w, res.rc);
}

/* n requests in one purchase_batch call; outs[i] answers users[i]. */
static int buy_lua_batch(struct sk_bench_sw *w, const uint64_t *users, size_t n, int *outs)
{
    for (size_t i = 0; i < n; i++) /* designated: every other field zero */
        w->p[i] = (struct sk_purchase){.user_id = users[i], .quantity = 1};
    int rc = w->run->sid == SID_SEGMENTED
                 ? sk_seg_purchase_batch(w->r, w->run->aid, SK_BENCH_SEGMENTS, NULL, w->p, n,
                                         w->res, NULL)
                 : sk_stock_purchase_batch(w->r, w->run->aid, w->p, n, w->res, NULL);
    if (rc < 0) return werr(w, rc, "purchase_batch", w->r->errstr);
    for (size_t i = 0; i < n; i++) {
        outs[i] = map_rc(w, w->res[i].rc);
        if (outs[i] < 0) return outs[i];
    }
    return 0;
}

static int pg_cmd(struct sk_bench_sw *w, PGresult *res, const char *what)
{
    int ok = PQresultStatus(res) == PGRES_COMMAND_OK;
    if (!ok) werr(w, SK_EDB, what, PQresultErrorMessage(res));
    PQclear(res);
    return ok ? 0 : SK_EDB;
}

/* The database does check and act in one statement under its row lock:
 * correct, but every purchase holds the one hot row until its COMMIT
 * (including the WAL flush), so purchases queue on that row. */
static int buy_pg(struct sk_bench_sw *w, uint64_t user)
{
    char u[SK_BENCH_U64];
    snprintf(u, sizeof u, "%" PRIu64, user);
    const char *pv[1] = {u};
    int rc = pg_cmd(w, PQexec(w->pg, "BEGIN"), "BEGIN");
    if (rc < 0) return rc;
    PGresult *res = PQexecPrepared(w->pg, "upd", 0, NULL, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        werr(w, SK_EDB, "UPDATE", PQresultErrorMessage(res));
        PQclear(res);
        PQclear(PQexec(w->pg, "ROLLBACK"));
        return SK_EDB;
    }
    int changed = atoi(PQcmdTuples(res));
    PQclear(res);
    if (!changed) {
        rc = pg_cmd(w, PQexec(w->pg, "ROLLBACK"), "ROLLBACK");
        return rc < 0 ? rc : OUT_SOLD_OUT;
    }
    res = PQexecPrepared(w->pg, "ins", 1, pv, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
        int dup = state && !strcmp(state, "23505"); /* unique_violation: the per-user limit */
        if (!dup) werr(w, SK_EDB, "INSERT", PQresultErrorMessage(res));
        PQclear(res);
        rc = pg_cmd(w, PQexec(w->pg, "ROLLBACK"), "ROLLBACK");
        return !dup ? SK_EDB : rc < 0 ? rc : OUT_LIMIT;
    }
    PQclear(res);
    rc = pg_cmd(w, PQexec(w->pg, "COMMIT"), "COMMIT");
    return rc < 0 ? rc : OUT_ADMITTED;
}

static int sq_step(sqlite3_stmt *q)
{
    sqlite3_reset(q);
    return sqlite3_step(q);
}

/* The same transaction on SQLite. BEGIN IMMEDIATE takes the database's
 * one write lock at once (a deferred transaction that upgrades later can
 * fail busy without waiting); other writers wait in the busy handler. */
static int buy_sqlite(struct sk_bench_sw *w, uint64_t user)
{
    int e = sq_step(w->q_begin);
    if ((e & 0xff) == SQLITE_BUSY) {
        w->lock_timeouts++; /* waited the whole busy timeout */
        return OUT_GAVE_UP;
    }
    if (e != SQLITE_DONE) return werr(w, SK_EDB, "BEGIN IMMEDIATE", sqlite3_errmsg(w->db));
    int out;
    if ((e = sq_step(w->q_upd)) != SQLITE_DONE) {
        werr(w, SK_EDB, "UPDATE", sqlite3_errmsg(w->db));
        out = SK_EDB;
    } else if (sqlite3_changes(w->db) == 0) {
        out = OUT_SOLD_OUT;
    } else {
        sqlite3_reset(w->q_ins);
        sqlite3_bind_int64(w->q_ins, 1, (sqlite3_int64)user);
        e = sqlite3_step(w->q_ins);
        if (e == SQLITE_DONE) {
            if (sq_step(w->q_commit) == SQLITE_DONE) return OUT_ADMITTED;
            werr(w, SK_EDB, "COMMIT", sqlite3_errmsg(w->db));
            out = SK_EDB;
        } else if ((e & 0xff) == SQLITE_CONSTRAINT) {
            out = OUT_LIMIT;
        } else {
            werr(w, SK_EDB, "INSERT", sqlite3_errmsg(w->db));
            out = SK_EDB;
        }
    }
    if (sq_step(w->q_rollback) != SQLITE_DONE && out >= 0)
        return werr(w, SK_EDB, "ROLLBACK", sqlite3_errmsg(w->db));
    return out;
}

/* ---- client threads ---- */

/* Opens w's own connection for its strategy (a Redis handle, a libpq
 * connection with its prepared statements, or an SQLite connection with
 * its statements); w owns them until worker_close. */
static int worker_connect(struct sk_bench_sw *w)
{
    struct sk_bench_srun *run = w->run;
    struct sk_bench_sctx *c = run->c;
    char eb[200] = "";
    switch (run->sid) {
    case SID_PG: {
        char ci[sizeof c->pg.conninfo + 64];
        snprintf(ci, sizeof ci, "%s options='-c statement_timeout=%d'", c->pg.conninfo,
                 SK_BENCH_PG_STATEMENT_TIMEOUT_MS);
        w->pg = PQconnectdb(ci);
        if (PQstatus(w->pg) != CONNECTION_OK)
            return werr(w, SK_EDB, "connect", PQerrorMessage(w->pg));
        PGresult *r1 =
            PQprepare(w->pg, "upd",
                      "UPDATE items SET stock = stock - 1 WHERE id = 1 AND stock >= 1", 0, NULL);
        int ok = PQresultStatus(r1) == PGRES_COMMAND_OK;
        PQclear(r1);
        PGresult *r2 = PQprepare(
            w->pg, "ins", "INSERT INTO orders (user_id, item_id) VALUES ($1::bigint, 1)", 1, NULL);
        ok = ok && PQresultStatus(r2) == PGRES_COMMAND_OK;
        PQclear(r2);
        return ok ? 0 : werr(w, SK_EDB, "prepare", PQerrorMessage(w->pg));
    }
    case SID_SQLITE: {
        /* One connection per thread: NOMUTEX skips the per-call mutex. */
        if (sqlite3_open_v2(c->sqlite_path, &w->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                            NULL) != SQLITE_OK)
            return werr(w, SK_EDB, "sqlite open", w->db ? sqlite3_errmsg(w->db) : "no memory");
        sqlite3_extended_result_codes(w->db, 1);
        sqlite3_busy_timeout(w->db, SK_BENCH_SQLITE_BUSY_MS);
        /* WAL is a property of the file (set at setup); synchronous=FULL is
         * per connection and what the project's store ships. */
        if (sqlite3_exec(w->db, "PRAGMA synchronous=FULL", NULL, NULL, NULL) != SQLITE_OK ||
            sqlite3_prepare_v2(w->db, "BEGIN IMMEDIATE", -1, &w->q_begin, NULL) != SQLITE_OK ||
            sqlite3_prepare_v2(w->db,
                               "UPDATE items SET stock = stock - 1 WHERE id = 1 AND stock >= 1", -1,
                               &w->q_upd, NULL) != SQLITE_OK ||
            sqlite3_prepare_v2(w->db, "INSERT INTO orders (user_id, item_id) VALUES (?1, 1)", -1,
                               &w->q_ins, NULL) != SQLITE_OK ||
            sqlite3_prepare_v2(w->db, "COMMIT", -1, &w->q_commit, NULL) != SQLITE_OK ||
            sqlite3_prepare_v2(w->db, "ROLLBACK", -1, &w->q_rollback, NULL) != SQLITE_OK)
            return werr(w, SK_EDB, "sqlite prepare", sqlite3_errmsg(w->db));
        return 0;
    }
    default:
        if (sk_redis_new(&w->r, c->rs.url, 2000, 10000, eb, sizeof eb) < 0)
            return werr(w, SK_ENOMEM, "redis", eb);
        if (sk_redis_connect(w->r) < 0) return werr(w, SK_EIO, "redis connect", w->r->errstr);
        return 0;
    }
}

static void worker_close(struct sk_bench_sw *w)
{
    sk_redis_free(w->r);
    if (w->pg) PQfinish(w->pg);
    sqlite3_finalize(w->q_begin); /* NULL is a no-op */
    sqlite3_finalize(w->q_upd);
    sqlite3_finalize(w->q_ins);
    sqlite3_finalize(w->q_commit);
    sqlite3_finalize(w->q_rollback);
    if (w->db) sqlite3_close_v2(w->db);
    free(w->p);
    free(w->res);
    w->r = NULL;
    w->pg = NULL;
    w->db = NULL;
    w->p = NULL;
    w->res = NULL;
}

static void tally(struct sk_bench_sw *w, int out, int64_t end_us)
{
    w->answered++;
    switch (out) {
    case OUT_ADMITTED:
        w->admitted++;
        w->last_admit_us = end_us;
        break;
    case OUT_SOLD_OUT: w->sold_out++; break;
    case OUT_LIMIT: w->limit++; break;
    default: w->gave_up++; break;
    }
}

/* Takes requests from the shared list until it is empty, the deadline
 * passes, or the phase is stopped. */
static void pump(struct sk_bench_sw *w)
{
    struct sk_bench_srun *run = w->run;
    const struct sk_bench_sopts *o = &run->c->o;
    const uint64_t *users = run->c->users;
    int64_t unit = run->sid == SID_LUA_BATCH || run->sid == SID_SEGMENTED ? o->batch : 1;
    int outs[SK_BATCH_MAX];
    for (;;) {
        if (atomic_load(&run->stop) || sk_bench_sint) break;
        if (sk_mono_us() > run->deadline_us) {
            atomic_store(&run->cut, 1);
            break;
        }
        int64_t first = atomic_fetch_add(&run->next, unit);
        if (first >= o->requests) break;
        size_t n = (size_t)(o->requests - first < unit ? o->requests - first : unit);
        int64_t t0 = sk_mono_us();
        int rc;
        switch (run->sid) {
        case SID_NAIVE: rc = outs[0] = buy_naive(w, users[first]); break;
        case SID_PG: rc = outs[0] = buy_pg(w, users[first]); break;
        case SID_SQLITE: rc = outs[0] = buy_sqlite(w, users[first]); break;
        case SID_WATCH: rc = outs[0] = buy_watch(w, users[first]); break;
        case SID_LOCK: rc = outs[0] = buy_lock(w, users[first]); break;
        case SID_LUA: rc = outs[0] = buy_lua(w, users[first]); break;
        default: rc = buy_lua_batch(w, users + first, n, outs); break;
        }
        int64_t t1 = sk_mono_us();
        if (rc < 0) {
            w->errors += (int64_t)n;
            /* A broken server makes the rest of the phase meaningless. */
            if (w->errors >= SK_BENCH_MAX_ERRORS) atomic_store(&run->stop, 1);
            continue;
        }
        for (size_t i = 0; i < n; i++) {
            /* Every request of a batch waited for the whole call. */
            sk_hist_record(&w->hist, (uint64_t)(t1 - t0));
            tally(w, outs[i], t1);
        }
    }
}

static void *worker_main(void *arg)
{
    struct sk_bench_sw *w = arg;
    int ok = worker_connect(w) == 0;
    if (!ok) {
        w->errors++; /* a client that never ran fails the phase */
        atomic_store(&w->run->stop, 1);
    }
    pthread_barrier_wait(&w->run->bar); /* all connected: main samples CPU */
    pthread_barrier_wait(&w->run->bar); /* go */
    if (ok) pump(w);
    return NULL;
}

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
    int64_t now = sk_wall_ms();
    struct sk_stock_def d = {.id = run->aid,
                             .initial = c->o.stock,
                             .per_user_limit = 1,
                             .max_per_order = 1,
                             .start_ms = now - 60000,
                             .end_ms = now + 86400000,
                             .segments = run->sid == SID_SEGMENTED ? SK_BENCH_SEGMENTS : 1};
    int rc, code;
    int64_t left;
    if ((rc = sk_stock_preheat(c->ctl, &d, 1, &code, &left)) < 0 ||
        (code == SK_RC_PREHEATED && (rc = sk_stock_set_open(c->ctl, run->aid, 1, &code)) < 0)) {
        snprintf(err, cap, "preheat: %.200s", c->ctl->errstr);
        return rc;
    }
    if (code != SK_RC_OK && code != SK_RC_PREHEATED) {
        snprintf(err, cap, "preheat: %s", sk_rc_name(code));
        return SK_ESTATE;
    }
    return 0;
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
    char ins[128];
    snprintf(ins, sizeof ins, "INSERT INTO items (id, stock) VALUES (1, %" PRId64 ")", c->o.stock);
    /* No CHECK (stock >= 0): the conditional UPDATE alone must hold the line,
     * and the verification would see a negative stock. */
    int rc = pg_exec(pg, "DROP TABLE IF EXISTS orders, items", err, cap);
    if (rc == 0)
        rc = pg_exec(pg, "CREATE TABLE items (id int PRIMARY KEY, stock int NOT NULL)", err, cap);
    if (rc == 0)
        rc = pg_exec(pg,
                     "CREATE TABLE orders (id bigserial PRIMARY KEY, user_id bigint NOT NULL "
                     "UNIQUE, item_id int NOT NULL, created_at timestamptz NOT NULL DEFAULT now())",
                     err, cap);
    if (rc == 0) rc = pg_exec(pg, ins, err, cap);
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
    char ins[128];
    snprintf(ins, sizeof ins, "INSERT INTO items (id, stock) VALUES (1, %" PRId64 ")", c->o.stock);
    int rc = sq_exec(db, "PRAGMA journal_mode=WAL", err, cap);
    if (rc == 0)
        rc = sq_exec(db, "CREATE TABLE items (id INTEGER PRIMARY KEY, stock INTEGER NOT NULL)", err,
                     cap);
    if (rc == 0)
        rc = sq_exec(db,
                     "CREATE TABLE orders (id INTEGER PRIMARY KEY, user_id INTEGER NOT NULL "
                     "UNIQUE, item_id INTEGER NOT NULL, created_at INTEGER NOT NULL DEFAULT "
                     "(strftime('%s', 'now')))",
                     err, cap);
    if (rc == 0) rc = sq_exec(db, ins, err, cap);
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
    return cmd_i64(c->ctl, &s->stock_left, 2, get);
}

static int verify_lua(struct sk_bench_sctx *c, struct sk_bench_srun *run, struct sk_bench_strat *s)
{
    struct sk_stock_state st;
    int rc = sk_stock_state(c->ctl, run->aid, &st);
    if (rc < 0) return rc;
    s->sold = st.stream_len; /* one order event per admitted unit */
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

/* Runs one strategy: setup, threads, verification. Results in c->s[sid]. */
static void run_strategy(struct sk_bench_sctx *c, enum sk_bench_sid sid)
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

    int rc = 0;
    if (sid == SID_PG && !c->have_pg) {
        s->status = ST_SKIPPED;
        snprintf(s->note, sizeof s->note, "PostgreSQL not available: %.200s", c->pg_err);
        return;
    }
    switch (sid) {
    case SID_PG: rc = setup_pg(c, s->note, sizeof s->note); break;
    case SID_SQLITE: rc = setup_sqlite(c, s->note, sizeof s->note); break;
    case SID_LUA:
    case SID_SEGMENTED:
    case SID_LUA_BATCH: rc = setup_lua(c, &run, s->note, sizeof s->note); break;
    default:
        rc = setup_redis_keys(c, &run);
        if (rc < 0) snprintf(s->note, sizeof s->note, "setup: %.200s", c->ctl->errstr);
    }
    if (rc < 0) {
        s->status = ST_SKIPPED;
        return;
    }

    size_t nw = (size_t)o->conns;
    struct sk_bench_sw *ws = calloc(nw, sizeof *ws);
    if (!ws) {
        s->status = ST_SKIPPED;
        snprintf(s->note, sizeof s->note, "out of memory");
        return;
    }
    for (size_t i = 0; i < nw; i++) {
        ws[i].run = &run;
        ws[i].idx = (int)i;
        ws[i].rng = 0x5EED0000ULL + i;
        sk_hist_init(&ws[i].hist);
        if (sid == SID_LUA_BATCH || sid == SID_SEGMENTED) {
            ws[i].p = calloc((size_t)o->batch, sizeof *ws[i].p);
            ws[i].res = calloc((size_t)o->batch, sizeof *ws[i].res);
            if (!ws[i].p || !ws[i].res) rc = SK_ENOMEM;
        }
    }
    if (rc < 0 || pthread_barrier_init(&run.bar, NULL, (unsigned)nw + 1) != 0) {
        for (size_t i = 0; i < nw; i++)
            worker_close(&ws[i]);
        free(ws);
        s->status = ST_SKIPPED;
        snprintf(s->note, sizeof s->note, "out of memory");
        return;
    }
    for (size_t i = 0; i < nw; i++)
        if (pthread_create(&ws[i].tid, NULL, worker_main, &ws[i]) != 0) {
            /* The barrier counts every thread: a missing one would hang it. */
            fprintf(stderr, "seckill: pthread_create failed\n");
            abort();
        }
    pthread_barrier_wait(&run.bar);
    int redis_side = sid != SID_PG && sid != SID_SQLITE;
    double scpu0 = redis_side      ? sk_bench_redis_cpu_seconds(c->ctl)
                   : sid == SID_PG ? sk_pg_spawn_cpu_seconds(&c->pg)
                                   : 0;
    double ccpu0 = sk_bench_self_cpu_seconds(), mcpu0 = sk_bench_machine_cpu_seconds();
    run.t0_us = sk_mono_us();
    run.deadline_us = run.t0_us + o->duration_s * 1000000;
    pthread_barrier_wait(&run.bar);
    int64_t last_admit = run.t0_us;
    for (size_t i = 0; i < nw; i++)
        pthread_join(ws[i].tid, NULL);
    int64_t t1 = sk_mono_us();
    double scpu1 = redis_side      ? sk_bench_redis_cpu_seconds(c->ctl)
                   : sid == SID_PG ? sk_pg_spawn_cpu_seconds(&c->pg)
                                   : 0;
    double ccpu1 = sk_bench_self_cpu_seconds(), mcpu1 = sk_bench_machine_cpu_seconds();
    for (size_t i = 0; i < nw; i++) {
        struct sk_bench_sw *w = &ws[i];
        s->answered += w->answered;
        s->admitted += w->admitted;
        s->sold_out += w->sold_out;
        s->limit += w->limit;
        s->gave_up += w->gave_up;
        s->errors += w->errors;
        s->retries += w->retries;
        s->lock_timeouts += w->lock_timeouts;
        s->lock_lost += w->lock_lost;
        if (w->last_admit_us > last_admit) last_admit = w->last_admit_us;
        sk_hist_add(&s->hist, &w->hist);
        if (w->err[0] && !s->note[0]) snprintf(s->note, sizeof s->note, "%s", w->err);
        worker_close(w);
    }
    pthread_barrier_destroy(&run.bar);
    free(ws);
    s->status = ST_RAN;
    s->cut = atomic_load(&run.cut) || sk_bench_sint;
    s->secs = (double)(t1 - run.t0_us) / 1e6;
    s->sellout_secs = (double)(last_admit - run.t0_us) / 1e6;
    s->client_cpu_s = ccpu1 - ccpu0;
    s->machine_cpu_s = mcpu1 - mcpu0;
    /* SQLite runs inside this process: its CPU is the process's. */
    s->server_cpu_s = sid == SID_SQLITE ? s->client_cpu_s : scpu1 - scpu0;

    switch (sid) {
    case SID_PG: rc = verify_pg(c, s); break;
    case SID_SQLITE: rc = verify_sqlite(c, s); break;
    case SID_LUA:
    case SID_SEGMENTED:
    case SID_LUA_BATCH: rc = verify_lua(c, &run, s); break;
    default: rc = verify_redis_list(c, &run, s);
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

/* ---- redis-benchmark reference lines ---- */

static void run_reference(struct sk_bench_sctx *c, int which)
{
    struct sk_bench_ref *ref = &c->ref[which];
    if (!sk_bench_on_path("redis-benchmark")) {
        snprintf(ref->note, sizeof ref->note, "redis-benchmark not on PATH");
        return;
    }
    char port[16], n[SK_BENCH_U64], aid[SK_BENCH_U64], nkeys[8];
    snprintf(port, sizeof port, "%d", c->rs.port);
    snprintf(n, sizeof n, "%" PRId64, ref->n);
    snprintf(nkeys, sizeof nkeys, "%d", SK_PURCHASE_NKEYS);
    const char *argv[40] = {
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
        int64_t now = sk_wall_ms(), left;
        struct sk_stock_def d = {.id = id,
                                 .initial = stock,
                                 .per_user_limit = 1,
                                 .max_per_order = 1,
                                 .start_ms = now - 60000,
                                 .end_ms = now + 86400000};
        int code;
        if (sk_stock_preheat(c->ctl, &d, 1, &code, &left) < 0 ||
            sk_stock_set_open(c->ctl, id, 1, &code) < 0) {
            snprintf(ref->note, sizeof ref->note, "preheat: %.200s", c->ctl->errstr);
            return;
        }
        struct sk_keys k;
        sk_keys_for(&k, id);
        argv[a++] = "-r";
        argv[a++] = "2147483647";
        argv[a++] = "EVALSHA";
        argv[a++] = sk_script_sha(SK_SCRIPT_PURCHASE);
        argv[a++] = nkeys;
        const char *keys[SK_PURCHASE_NKEYS];
        sk_keys_purchase(&k, keys);
        for (int i = 0; i < SK_PURCHASE_NKEYS; i++)
            argv[a++] = keys[i]; /* k outlives run_rb below */
        argv[a++] = aid;
        argv[a++] = "__rand_int__";
        argv[a++] = "1";
        argv[a] = NULL;
        double cpu0 = sk_bench_redis_cpu_seconds(c->ctl);
        int64_t t0 = sk_mono_us();
        int rc = sk_bench_redis_benchmark(argv, c->o.duration_s * 1000 + 10000, &sk_bench_sint,
                                          &ref->rps, ref->note, sizeof ref->note);
        ref->secs = (double)(sk_mono_us() - t0) / 1e6;
        ref->cpu_s = sk_bench_redis_cpu_seconds(c->ctl) - cpu0;
        struct sk_stock_state st;
        if (rc == 0 && sk_stock_state(c->ctl, id, &st) == 0) {
            ref->ran = 1;
            snprintf(ref->note, sizeof ref->note,
                     "admitted %" PRId64 " of stock %" PRId64 ", stock left %" PRId64 "%s",
                     st.stream_len, stock, st.remaining,
                     st.stream_len > stock || st.remaining < 0 ? " (OVERSOLD)" : "");
        }
        sk_stock_drop(c->ctl, id);
        return;
    }
    argv[a] = NULL;
    double cpu0 = sk_bench_redis_cpu_seconds(c->ctl);
    int64_t t0 = sk_mono_us();
    int rc = sk_bench_redis_benchmark(argv, c->o.duration_s * 1000 + 10000, &sk_bench_sint,
                                      &ref->rps, ref->note, sizeof ref->note);
    ref->secs = (double)(sk_mono_us() - t0) / 1e6;
    ref->cpu_s = sk_bench_redis_cpu_seconds(c->ctl) - cpu0;
    if (rc == 0) ref->ran = 1;
}

/* ---- results as JSON (the one source of the table's ratios and the chart) ---- */

static double ratio(double a, double b)
{
    return a > 0 && b > 0 ? a / b : 0;
}

static double rps_of(const struct sk_bench_strat *s)
{
    return s->status == ST_RAN && s->secs > 0 ? (double)s->answered / s->secs : 0;
}

/* Sales per second: admitted units over the time to the last sale. */
static double sales_rate(const struct sk_bench_strat *s)
{
    return s->status == ST_RAN && s->sellout_secs > 0 ? (double)s->admitted / s->sellout_secs : 0;
}

static const char *status_name(enum sk_bench_status st)
{
    switch (st) {
    case ST_RAN: return "ran";
    case ST_SKIPPED: return "skipped";
    default: return "pending";
    }
}

/* One strategy as a new JSON object (the caller owns the reference). */
static json_t *strat_json(const struct sk_bench_sctx *c, enum sk_bench_sid sid, double limit)
{
    const struct sk_bench_strat *s = &c->s[sid];
    json_t *j = json_object();
    json_object_set_new(j, "id", json_string(sk_bench_sdef[sid].id));
    json_object_set_new(j, "label", json_string(sk_bench_sdef[sid].label));
    json_object_set_new(j, "store", json_string(sk_bench_sdef[sid].store));
    json_object_set_new(j, "status", json_string(status_name(s->status)));
    if (s->note[0]) json_object_set_new(j, "note", json_string(s->note));
    if (s->status != ST_RAN) return j;
    double rps = rps_of(s);
    json_object_set_new(j, "requests", json_integer(s->answered));
    json_object_set_new(j, "secs", json_real(s->secs));
    json_object_set_new(j, "rps", json_real(rps));
    json_object_set_new(j, "x_redis_limit", json_real(ratio(rps, limit)));
    json_object_set_new(j, "sellout_secs", json_real(s->sellout_secs));
    json_object_set_new(j, "admitted_per_s", json_real(sales_rate(s)));
    json_object_set_new(j, "admitted", json_integer(s->admitted));
    json_object_set_new(j, "refused_sold_out", json_integer(s->sold_out));
    json_object_set_new(j, "refused_limit", json_integer(s->limit));
    json_object_set_new(j, "gave_up", json_integer(s->gave_up));
    json_object_set_new(j, "errors", json_integer(s->errors));
    json_object_set_new(j, "retries", json_integer(s->retries));
    json_object_set_new(j, "lock_timeouts", json_integer(s->lock_timeouts));
    json_object_set_new(j, "lock_lost", json_integer(s->lock_lost));
    json_t *lat = json_object();
    json_object_set_new(lat, "p50", json_real((double)sk_hist_percentile(&s->hist, 50) / 1e3));
    json_object_set_new(lat, "p99", json_real((double)sk_hist_percentile(&s->hist, 99) / 1e3));
    json_object_set_new(lat, "p999", json_real((double)sk_hist_percentile(&s->hist, 99.9) / 1e3));
    json_object_set_new(lat, "max", json_real((double)sk_hist_percentile(&s->hist, 100) / 1e3));
    json_object_set_new(lat, "mean", json_real(sk_hist_mean(&s->hist) / 1e3));
    json_object_set_new(j, "latency_ms", lat);
    json_object_set_new(j, "verified", json_boolean(s->verified));
    json_object_set_new(j, "sold", json_integer(s->sold));
    json_object_set_new(j, "stock_left", json_integer(s->stock_left));
    json_object_set_new(j, "oversold", json_integer(s->oversold));
    json_object_set_new(j, "undersold",
                        s->undersold >= 0 ? json_integer(s->undersold) : json_null());
    json_object_set_new(j, "limit_violations", json_integer(s->limit_violations));
    json_object_set_new(j, "server",
                        json_string(sid == SID_PG       ? "postgres (all processes)"
                                    : sid == SID_SQLITE ? "this process (SQLite in-process)"
                                                        : "redis-server"));
    json_object_set_new(j, "server_cpu_s", json_real(s->server_cpu_s));
    json_object_set_new(j, "server_cpu_pct",
                        json_real(s->secs > 0 ? 100.0 * s->server_cpu_s / s->secs : 0));
    json_object_set_new(j, "client_cpu_pct",
                        json_real(s->secs > 0 ? 100.0 * s->client_cpu_s / s->secs : 0));
    /* Cores taken by other processes of the machine during the phase. */
    double other = s->machine_cpu_s - s->client_cpu_s - (sid == SID_SQLITE ? 0 : s->server_cpu_s);
    json_object_set_new(j, "other_cores",
                        json_real(s->secs > 0 && other > 0 ? other / s->secs : 0));
    json_object_set_new(j, "cut", json_boolean(s->cut));
    json_object_set_new(j, "check", json_string(s->check));
    json_object_set_new(j, "ok", json_boolean(s->ok));
    return j;
}

/* A target a/b >= want, judged on requests/s (the whole sale); the same
 * ratio on sales/s (admitted units per second until the last sale) is
 * reported beside it. A new object; the caller owns it. */
static json_t *target_json(const struct sk_bench_strat *a, const struct sk_bench_strat *b,
                           double want)
{
    json_t *t = json_object();
    double r = ratio(rps_of(a), rps_of(b));
    json_object_set_new(t, "ratio", json_real(r));
    json_object_set_new(t, "target", json_real(want));
    json_object_set_new(t, "met", json_boolean(r >= want));
    double rs = ratio(sales_rate(a), sales_rate(b));
    json_object_set_new(t, "ratio_sales", json_real(rs));
    json_object_set_new(t, "met_sales", json_boolean(rs >= want));
    return t;
}

/* The whole run as one JSON object (caller json_decref's it). */
static json_t *results_json(const struct sk_bench_sctx *c, int ok)
{
    const struct sk_bench_sopts *o = &c->o;
    json_t *root = json_object();
    json_object_set_new(root, "benchmark", json_string("strategies"));
    char model[160];
    sk_bench_cpu_model(model, sizeof model);
    struct utsname un;
    char kernel[200] = "unknown";
    if (uname(&un) == 0) snprintf(kernel, sizeof kernel, "%s %s", un.sysname, un.release);
    json_t *m = json_object();
    json_object_set_new(m, "cpus", json_integer(sysconf(_SC_NPROCESSORS_ONLN)));
    json_object_set_new(m, "cpu_model", json_string(model));
    json_object_set_new(m, "kernel", json_string(kernel));
    json_object_set_new(root, "machine", m);
    json_t *sw = json_object();
    json_object_set_new(sw, "redis", json_string(c->redis_version));
    json_object_set_new(sw, "redis_persistence", json_string("none"));
    json_object_set_new(sw, "postgresql", json_string(c->pg_version));
    json_object_set_new(sw, "postgresql_durability", json_string(c->pg_durability));
    json_object_set_new(sw, "sqlite", json_string(sqlite3_libversion()));
    json_object_set_new(sw, "sqlite_mode", json_string("WAL, synchronous=FULL"));
    json_object_set_new(root, "software", sw);
    json_t *cf = json_object();
    json_object_set_new(cf, "quick", json_boolean(o->quick));
    json_object_set_new(cf, "stock", json_integer(o->stock));
    json_object_set_new(cf, "requests", json_integer(o->requests));
    json_object_set_new(cf, "users", json_integer(o->users));
    json_object_set_new(cf, "per_user_limit", json_integer(1));
    json_object_set_new(cf, "conns", json_integer(o->conns));
    json_object_set_new(cf, "batch", json_integer(o->batch));
    json_object_set_new(cf, "duration_s", json_integer(o->duration_s));
    json_object_set_new(cf, "watch_max_tries", json_integer(SK_BENCH_WATCH_TRIES));
    json_object_set_new(cf, "lock_ttl_ms", json_integer(SK_BENCH_LOCK_TTL_MS));
    json_object_set_new(cf, "lock_max_wait_ms", json_integer(SK_BENCH_LOCK_WAIT_US / 1000));
    json_object_set_new(cf, "sqlite_busy_timeout_ms", json_integer(SK_BENCH_SQLITE_BUSY_MS));
    json_object_set_new(cf, "redis_benchmark",
                        json_string("-c " SK_BENCH_RB_CLIENTS " -P " SK_BENCH_RB_PIPELINE));
    json_object_set_new(root, "config", cf);
    double limit = c->ref[REF_SAME].ran ? c->ref[REF_SAME].rps : 0;
    json_t *refs = json_array();
    for (int i = 0; i < REF_COUNT; i++) {
        const struct sk_bench_ref *r = &c->ref[i];
        json_t *j = json_object();
        json_object_set_new(j, "id", json_string(r->id));
        json_object_set_new(j, "label", json_string(r->label));
        json_object_set_new(j, "ran", json_boolean(r->ran));
        json_object_set_new(j, "requests", json_integer(r->n));
        if (r->ran) {
            json_object_set_new(j, "rps", json_real(r->rps));
            json_object_set_new(j, "server_cpu_pct",
                                json_real(r->secs > 0 ? 100.0 * r->cpu_s / r->secs : 0));
        }
        if (r->note[0]) json_object_set_new(j, "note", json_string(r->note));
        json_array_append_new(refs, j);
    }
    json_object_set_new(root, "references", refs);
    json_object_set_new(root, "redis_limit_rps", json_real(limit));
    json_t *arr = json_array();
    for (int i = 0; i < SID_COUNT; i++)
        json_array_append_new(arr, strat_json(c, (enum sk_bench_sid)i, limit));
    json_object_set_new(root, "strategies", arr);
    json_t *t = json_object();
    json_object_set_new(t, "lua_vs_pg",
                        target_json(&c->s[SID_LUA], &c->s[SID_PG], SK_BENCH_TARGET_LUA_VS_DB));
    json_object_set_new(t, "lua_vs_sqlite",
                        target_json(&c->s[SID_LUA], &c->s[SID_SQLITE], SK_BENCH_TARGET_LUA_VS_DB));
    json_object_set_new(
        t, "batch_vs_lua",
        target_json(&c->s[SID_LUA_BATCH], &c->s[SID_LUA], SK_BENCH_TARGET_BATCH_VS_LUA));
    json_object_set_new(root, "targets", t);
    json_object_set_new(root, "ok", json_boolean(ok));
    return root;
}

/* ---- the table ---- */

static void print_table(const struct sk_bench_sctx *c, const json_t *root)
{
    const struct sk_bench_sopts *o = &c->o;
    const json_t *m = json_object_get(root, "machine");
    printf("seckill bench strategies: stock %" PRId64 ", %" PRId64 " requests from %" PRId64
           " distinct users (limit 1 each), %" PRId64 " client threads with a connection each\n",
           o->stock, o->requests, o->users, o->conns);
    printf("  machine: %lld cpus, %s, %s\n",
           (long long)json_integer_value(json_object_get(m, "cpus")),
           json_string_value(json_object_get(m, "cpu_model")),
           json_string_value(json_object_get(m, "kernel")));
    printf("  redis-server %s (private, no persistence); PostgreSQL %s (private, %s); SQLite %s "
           "(WAL, synchronous=FULL)\n\n",
           c->redis_version, c->pg_version[0] ? c->pg_version : "-", c->pg_durability,
           sqlite3_libversion());
    double limit = c->ref[REF_SAME].ran ? c->ref[REF_SAME].rps : 0;
    printf("  %-36s %9s %7s %9s %7s %7s %7s %8s %6s %8s %9s %7s %7s\n", "strategy", "req/s",
           "x limit", "sales/s", "sold in", "p50 ms", "p99 ms", "p99.9 ms", "sold", "oversold",
           "undersold", "retries", "srv CPU");
    for (int i = 0; i < SID_COUNT; i++) {
        const struct sk_bench_strat *s = &c->s[i];
        if (s->status != ST_RAN) {
            printf("  %-36s %s\n", sk_bench_sdef[i].label, s->note);
            continue;
        }
        char under[24];
        if (s->undersold >= 0)
            snprintf(under, sizeof under, "%" PRId64, s->undersold);
        else
            snprintf(under, sizeof under, "n/a");
        double rps = rps_of(s);
        printf("  %-36s %9.0f %7.3f %9.0f %6.2fs %7.3f %7.3f %8.3f %6" PRId64 " %8" PRId64
               " %9s %7" PRId64 " %6.0f%%%s\n",
               sk_bench_sdef[i].label, rps, ratio(rps, limit), sales_rate(s), s->sellout_secs,
               (double)sk_hist_percentile(&s->hist, 50) / 1e3,
               (double)sk_hist_percentile(&s->hist, 99) / 1e3,
               (double)sk_hist_percentile(&s->hist, 99.9) / 1e3, s->sold, s->oversold, under,
               s->retries, s->secs > 0 ? 100.0 * s->server_cpu_s / s->secs : 0,
               s->cut ? "  (cut)" : "");
    }
    printf("\n  references (redis-benchmark -c %s -P %s, same run):\n", SK_BENCH_RB_CLIENTS,
           SK_BENCH_RB_PIPELINE);
    for (int i = 0; i < REF_COUNT; i++) {
        const struct sk_bench_ref *r = &c->ref[i];
        if (r->ran)
            printf("  %-76s %10.0f req/s  x limit %.3f%s%s%s\n", r->label, r->rps,
                   ratio(r->rps, limit), r->note[0] ? "  (" : "", r->note, r->note[0] ? ")" : "");
        else
            printf("  %-52s not run: %s\n", r->label, r->note);
    }
    printf("\n  checks:\n");
    for (int i = 0; i < SID_COUNT; i++) {
        const struct sk_bench_strat *s = &c->s[i];
        if (s->status != ST_RAN) continue;
        printf("  %-36s %s; refused: sold out %" PRId64 ", limit %" PRId64 ", gave up %" PRId64
               "; errors %" PRId64 "%s%s\n",
               sk_bench_sdef[i].label, s->check, s->sold_out, s->limit, s->gave_up, s->errors,
               s->errors && s->note[0] ? ": " : "", s->errors ? s->note : "");
    }
    const json_t *t = json_object_get(root, "targets");
    const char *names[][2] = {{"lua_vs_pg", "Redis+Lua / DB conditional update (PostgreSQL)"},
                              {"lua_vs_sqlite", "Redis+Lua / DB conditional update (SQLite)"},
                              {"batch_vs_lua", "Lua batched / Lua per request"}};
    printf("\n  targets:\n");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const json_t *x = json_object_get(t, names[i][0]);
        printf("  %-48s %6.2f x on requests/s (target >= %.1f): %s; %.2f x on sales/s\n",
               names[i][1], json_real_value(json_object_get(x, "ratio")),
               json_real_value(json_object_get(x, "target")),
               json_is_true(json_object_get(x, "met")) ? "met" : "NOT met",
               json_real_value(json_object_get(x, "ratio_sales")));
    }
}

/* ---- the chart: hand-written SVG from the JSON ---- */

#define CH_W 1000
#define CH_LABEL_W 250
#define CH_PANEL_W 330
#define CH_GAP 60
#define CH_ROW_H 30
#define CH_TOP 92

static double jnum(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : 0;
}

static const char *jstr(const json_t *o, const char *k, const char *dflt)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : dflt;
}

/* Writes s with XML's special characters escaped. */
static void xml_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* 12345.6 -> "12,346". */
static void fmt_thousands(double v, char *out, size_t cap)
{
    char digits[32];
    snprintf(digits, sizeof digits, "%.0f", v);
    size_t n = strlen(digits), o = 0;
    for (size_t i = 0; i < n && o + 2 < cap; i++) {
        if (i && (n - i) % 3 == 0) out[o++] = ',';
        out[o++] = digits[i];
    }
    out[o] = 0;
}

/* Colours of the three reference lines, in the order of "references". */
static const char *const ch_ref_color[] = {"#2ca02c", "#9467bd", "#7f7f7f"};

struct ch_axis {
    double lo, hi; /* powers of ten */
    int x0, w;
};

static void axis_fit(struct ch_axis *a, double vmin, double vmax)
{
    if (vmin <= 0) vmin = 1;
    if (vmax < vmin) vmax = vmin;
    a->lo = pow(10, floor(log10(vmin)));
    a->hi = pow(10, ceil(log10(vmax)));
    if (a->hi <= a->lo) a->hi = a->lo * 10;
}

static double axis_x(const struct ch_axis *a, double v)
{
    if (v < a->lo) v = a->lo;
    return a->x0 + (double)a->w * (log10(v) - log10(a->lo)) / (log10(a->hi) - log10(a->lo));
}

static void axis_draw(FILE *f, const struct ch_axis *a, int y0, int y1, const char *title,
                      int is_ms)
{
    fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"h\">", a->x0, CH_TOP - 14);
    xml_text(f, title);
    fprintf(f, "</text>\n");
    for (double v = a->lo; v <= a->hi * 1.0001; v *= 10) {
        double x = axis_x(a, v);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" class=\"grid\"/>\n", x, y0, x,
                y1);
        char lab[32];
        if (is_ms)
            snprintf(lab, sizeof lab, v < 1 ? "%.1f ms" : "%.0f ms", v);
        else if (v >= 1e6)
            snprintf(lab, sizeof lab, "%.0fM", v / 1e6);
        else if (v >= 1e3)
            snprintf(lab, sizeof lab, "%.0fk", v / 1e3);
        else
            snprintf(lab, sizeof lab, "%.0f", v);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"tick\">%s</text>\n", x, y1 + 14, lab);
        for (int m = 2; m < 10 && v * m < a->hi; m++) {
            double xm = axis_x(a, v * m);
            fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" class=\"minor\"/>\n", xm,
                    y0, xm, y1);
        }
    }
}

/* A value label readable over grid and reference lines: a white halo
 * first, the text on top (paint-order is not known to every renderer). */
static void ch_value(FILE *f, double x, int y, const char *txt)
{
    fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"halo\">", x, y);
    xml_text(f, txt);
    fprintf(f, "</text>\n<text x=\"%.1f\" y=\"%d\" class=\"v\">", x, y);
    xml_text(f, txt);
    fprintf(f, "</text>\n");
}

/* The chart from a run's JSON (results_json or a saved --json output). */
static int write_chart(const json_t *root, const char *path, char *err, size_t cap)
{
    const json_t *arr = json_object_get(root, "strategies");
    const json_t *refs = json_object_get(root, "references");
    const json_t *cf = json_object_get(root, "config");
    const json_t *m = json_object_get(root, "machine");
    if (!json_is_array(arr) || !json_is_object(cf)) {
        snprintf(err, cap, "not a `seckill bench strategies --json` output");
        return SK_EINVAL;
    }
    size_t n = json_array_size(arr);
    double rmin = 0, rmax = 0, pmin = 0, pmax = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *s = json_array_get(arr, i);
        double r = jnum(s, "rps"), p = jnum(json_object_get(s, "latency_ms"), "p99");
        if (r > 0) {
            rmin = rmin == 0 || r < rmin ? r : rmin;
            rmax = r > rmax ? r : rmax;
        }
        if (p > 0) {
            pmin = pmin == 0 || p < pmin ? p : pmin;
            pmax = p > pmax ? p : pmax;
        }
    }
    for (size_t i = 0; i < json_array_size(refs); i++) {
        double r = jnum(json_array_get(refs, i), "rps");
        if (r > rmax) rmax = r;
    }
    struct ch_axis ax = {.x0 = CH_LABEL_W, .w = CH_PANEL_W};
    struct ch_axis ay = {.x0 = CH_LABEL_W + CH_PANEL_W + CH_GAP, .w = CH_PANEL_W};
    axis_fit(&ax, rmin, rmax);
    axis_fit(&ay, pmin, pmax);
    int y1 = CH_TOP + (int)n * CH_ROW_H;
    int h = y1 + 120;
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, cap, "%s: %s", path, strerror(errno));
        return SK_EIO;
    }
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"DejaVu Sans, Arial, sans-serif\">\n"
            /* Not an XML comment: those may not contain "--". */
            "<desc>seckill bench strategies chart; regenerate with: seckill bench strategies "
            "--chart-from RUN.json --chart FILE.svg</desc>\n"
            "<style>text{font-size:12px;fill:#222}.t{font-size:16px;font-weight:bold}"
            ".h{font-size:13px;font-weight:bold}.tick{font-size:10px;fill:#555;text-anchor:middle}"
            ".v{font-size:11px}.halo{font-size:11px;fill:white;stroke:white;stroke-width:4px}.lab{"
            "text-anchor:end}.grid{stroke:#bbb;stroke-width:1}"
            ".minor{stroke:#eee;stroke-width:1}.note{font-size:11px;fill:#555}</style>\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            CH_W, h, CH_W, h);
    fprintf(f, "<text x=\"12\" y=\"24\" class=\"t\">Stock-deduction strategies, one run "
               "(seckill bench strategies)</text>\n");
    char cond[400];
    snprintf(cond, sizeof cond,
             "stock %lld, %lld requests from %lld users (limit 1), %lld client threads; "
             "%lld cpus, %s",
             (long long)jnum(cf, "stock"), (long long)jnum(cf, "requests"),
             (long long)jnum(cf, "users"), (long long)jnum(cf, "conns"), (long long)jnum(m, "cpus"),
             jstr(m, "cpu_model", "?"));
    fprintf(f, "<text x=\"12\" y=\"44\" class=\"note\">");
    xml_text(f, cond);
    fprintf(f, "</text>\n");
    axis_draw(f, &ax, CH_TOP - 4, y1, "throughput, requests/s (log scale)", 0);
    axis_draw(f, &ay, CH_TOP - 4, y1, "p99 latency (log scale)", 1);
    /* Reference lines across the throughput panel, under the bars. */
    for (size_t i = 0; i < json_array_size(refs) && i < 3; i++) {
        double v = jnum(json_array_get(refs, i), "rps");
        if (v <= 0) continue;
        double x = axis_x(&ax, v);
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\" "
                "stroke-width=\"2\" stroke-dasharray=\"6,4\"/>\n",
                x, CH_TOP - 4, x, y1, ch_ref_color[i]);
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *s = json_array_get(arr, i);
        int y = CH_TOP + (int)i * CH_ROW_H;
        const char *id = jstr(s, "id", "");
        int ran = !strcmp(jstr(s, "status", ""), "ran");
        long long over = (long long)jnum(s, "oversold");
        const char *color = !strcmp(id, "naive")                     ? "#d62728"
                            : !strcmp(jstr(s, "store", ""), "redis") ? "#1f77b4"
                                                                     : "#ff7f0e";
        fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"lab\">", CH_LABEL_W - 8, y + 19);
        xml_text(f, jstr(s, "label", id));
        fprintf(f, "</text>\n");
        if (!ran) {
            const char *why = jstr(s, "note", "not run");
            fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"note\">", CH_LABEL_W + 6, y + 19);
            xml_text(f, why);
            fprintf(f, "</text>\n");
            continue;
        }
        double r = jnum(s, "rps"), p = jnum(json_object_get(s, "latency_ms"), "p99");
        double xr = axis_x(&ax, r), xp = axis_x(&ay, p);
        char num[32], txt[96];
        fmt_thousands(r, num, sizeof num);
        if (over > 0)
            snprintf(txt, sizeof txt, "%s/s, OVERSOLD %lld", num, over);
        else
            snprintf(txt, sizeof txt, "%s/s", num);
        char lat[32];
        snprintf(lat, sizeof lat, "%.*f ms", p < 10 ? 2 : 0, p);
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"/>\n", ax.x0,
                y + 6, xr - ax.x0, CH_ROW_H - 12, color);
        ch_value(f, xr + 4, y + 19, txt);
        fprintf(f,
                "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\" "
                "fill-opacity=\"0.6\"/>\n",
                ay.x0, y + 6, xp - ay.x0, CH_ROW_H - 12, color);
        ch_value(f, xp + 4, y + 19, lat);
    }
    /* Legend of the reference lines (drawn under the bars, above). */
    int ly = y1 + 36;
    for (size_t i = 0; i < json_array_size(refs) && i < 3; i++) {
        const json_t *r = json_array_get(refs, i);
        double v = jnum(r, "rps");
        if (v <= 0) continue;
        char num[32];
        fmt_thousands(v, num, sizeof num);
        fprintf(f,
                "<line x1=\"12\" y1=\"%d\" x2=\"40\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\" "
                "stroke-dasharray=\"6,4\"/>\n<text x=\"46\" y=\"%d\" class=\"note\">",
                ly - 4, ly - 4, ch_ref_color[i], ly);
        xml_text(f, jstr(r, "label", ""));
        fprintf(f, ": %s/s</text>\n", num);
        ly += 18;
    }
    fprintf(f,
            "<text x=\"12\" y=\"%d\" class=\"note\">red: naive check-then-act (oversells); "
            "blue: Redis strategies; orange: database strategies. Latency per request, "
            "closed loop.</text>\n</svg>\n",
            ly + 4);
    if (fclose(f) != 0) {
        snprintf(err, cap, "%s: %s", path, strerror(errno));
        return SK_EIO;
    }
    return 0;
}

/* ---- command line ---- */

static int parse_opts(int argc, char **argv, struct sk_bench_sopts *o, int *help)
{
    static const struct {
        const char *name;
        int64_t lo, hi;
        size_t off;
    } nums[] = {
        {"--stock", 1, 10000000, offsetof(struct sk_bench_sopts, stock)},
        {"--requests", 1, 5000000, offsetof(struct sk_bench_sopts, requests)},
        {"--users", 1, 5000000, offsetof(struct sk_bench_sopts, users)},
        {"--conns", 1, 128, offsetof(struct sk_bench_sopts, conns)},
        {"--batch", 1, SK_BATCH_MAX, offsetof(struct sk_bench_sopts, batch)},
        {"--duration", 1, 600, offsetof(struct sk_bench_sopts, duration_s)},
    };
    /* --quick first: explicit sizes given with it override its defaults. */
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--quick")) {
            o->quick = 1;
            o->stock = 500;
            o->requests = 5000;
            o->conns = 16;
            o->duration_s = 4;
        }
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            *help = 1;
            return 0;
        }
        if (!strcmp(a, "--json") || !strcmp(a, "--quick")) {
            o->json |= !strcmp(a, "--json");
            continue;
        }
        const char *eq = strchr(a, '=');
        size_t nl = eq ? (size_t)(eq - a) : strlen(a);
        const char *val = eq ? eq + 1 : (i + 1 < argc ? argv[i + 1] : NULL);
        int matched = 0;
        if ((nl == 7 && !strncmp(a, "--chart", 7)) ||
            (nl == 12 && !strncmp(a, "--chart-from", 12))) {
            if (!val || !*val)
                return sk_cli_usage_error("bench strategies: %.*s needs a file name", (int)nl, a);
            if (nl == 7)
                o->chart = val;
            else
                o->chart_from = val;
            matched = 1;
        }
        for (size_t j = 0; !matched && j < sizeof nums / sizeof nums[0]; j++) {
            if (strlen(nums[j].name) != nl || strncmp(a, nums[j].name, nl) != 0) continue;
            int64_t *dst = (int64_t *)(void *)((char *)o + nums[j].off);
            if (!val || sk_cli_parse_i64(val, nums[j].lo, nums[j].hi, dst) < 0)
                return sk_cli_usage_error("bench strategies: %s needs an integer in %" PRId64
                                          "..%" PRId64,
                                          nums[j].name, nums[j].lo, nums[j].hi);
            matched = 1;
        }
        if (!matched)
            return sk_cli_usage_error("bench strategies: unknown option '%s' (see --help)", a);
        if (!eq) i++;
    }
    if (o->users <= 0) o->users = o->requests - o->requests / 10; /* 10% repeats */
    if (o->users > o->requests)
        return sk_cli_usage_error("bench strategies: --users (%" PRId64
                                  ") cannot exceed --requests (%" PRId64 ")",
                                  o->users, o->requests);
    if (o->chart_from && !o->chart)
        return sk_cli_usage_error("bench strategies: --chart-from needs --chart FILE.svg");
    return 0;
}

/* The demand, allocated here (caller frees): every one of the users
 * 1..users asks once, the remaining requests are repeats of random users,
 * all in a seeded random order, so each strategy sees the same list. */
static uint64_t *make_demand(const struct sk_bench_sopts *o)
{
    uint64_t *u = malloc((size_t)o->requests * sizeof *u);
    if (!u) return NULL;
    uint64_t seed = 0x5ECC111ULL;
    for (int64_t i = 0; i < o->requests; i++)
        u[i] = SK_BENCH_USER_BASE + 1 +
               (i < o->users ? (uint64_t)i : rng_next(&seed) % (uint64_t)o->users);
    for (int64_t i = o->requests - 1; i > 0; i--) {
        int64_t j = (int64_t)(rng_next(&seed) % (uint64_t)(i + 1));
        uint64_t t = u[i];
        u[i] = u[j];
        u[j] = t;
    }
    return u;
}

static int chart_from_file(const struct sk_bench_sopts *o)
{
    json_error_t je;
    json_t *root = json_load_file(o->chart_from, 0, &je);
    if (!root) {
        fprintf(stderr, "seckill: bench strategies: %s: %s (line %d)\n", o->chart_from, je.text,
                je.line);
        return SK_EXIT_FAIL;
    }
    char err[300];
    int rc = write_chart(root, o->chart, err, sizeof err);
    json_decref(root);
    if (rc < 0) {
        fprintf(stderr, "seckill: bench strategies: %s\n", err);
        return SK_EXIT_FAIL;
    }
    return SK_EXIT_OK;
}

/* Starts the servers: redis-server (required) and PostgreSQL (its
 * strategy is skipped, with the reason, when it cannot start). */
static int start_servers(struct sk_bench_sctx *c)
{
    if (sk_redis_spawn_start(&c->rs, NULL) < 0) {
        fprintf(stderr, "seckill: bench strategies: cannot start redis-server: %s\n", c->rs.errstr);
        return SK_EIO;
    }
    c->have_redis = 1;
    char eb[200] = "";
    if (sk_redis_new(&c->ctl, c->rs.url, 2000, 30000, eb, sizeof eb) < 0 ||
        sk_redis_connect(c->ctl) < 0 || sk_script_load_all(c->ctl) < 0) {
        fprintf(stderr, "seckill: bench strategies: redis: %s\n", c->ctl ? c->ctl->errstr : eb);
        return SK_EIO;
    }
    sk_redis_info_field(c->ctl, "server", "redis_version", c->redis_version,
                        sizeof c->redis_version);
    redisReply *rep;
    if (sk_redis_cmd(c->ctl, &rep, "SCRIPT LOAD %s", sk_bench_release_lua) < 0) {
        fprintf(stderr, "seckill: bench strategies: SCRIPT LOAD: %s\n", c->ctl->errstr);
        return SK_EIO;
    }
    if (rep->type == REDIS_REPLY_STRING) snprintf(c->lock_sha, sizeof c->lock_sha, "%s", rep->str);
    freeReplyObject(rep);

    snprintf(c->pg_durability, sizeof c->pg_durability, "-");
    if (sk_pg_spawn_start(&c->pg, NULL) < 0) {
        snprintf(c->pg_err, sizeof c->pg_err, "%.290s", c->pg.errstr);
        return 0;
    }
    c->have_pg = 1;
    PGconn *pg = PQconnectdb(c->pg.conninfo);
    if (PQstatus(pg) == CONNECTION_OK) {
        int v = PQserverVersion(pg);
        snprintf(c->pg_version, sizeof c->pg_version, "%d.%d", v / 10000, v % 10000);
        PGresult *r = PQexec(pg, "SELECT current_setting('fsync'), "
                                 "current_setting('synchronous_commit')");
        if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
            snprintf(c->pg_durability, sizeof c->pg_durability, "fsync=%s, synchronous_commit=%s",
                     PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1));
        PQclear(r);
    }
    PQfinish(pg);
    return 0;
}

static void stop_servers(struct sk_bench_sctx *c)
{
    sk_redis_free(c->ctl);
    c->ctl = NULL;
    if (c->have_pg && sk_pg_spawn_stop(&c->pg) < 0)
        fprintf(stderr, "seckill: bench strategies: %s\n", c->pg.errstr);
    if (c->have_redis && sk_redis_spawn_stop(&c->rs) < 0)
        fprintf(stderr, "seckill: bench strategies: %s\n", c->rs.errstr);
    if (c->tmpdir[0]) {
        char p[400];
        static const char *sfx[] = {"", "-wal", "-shm"};
        for (size_t i = 0; i < 3; i++) {
            snprintf(p, sizeof p, "%s%s", c->sqlite_path, sfx[i]);
            if (c->sqlite_path[0]) unlink(p);
        }
        rmdir(c->tmpdir);
    }
}

/* Entry point (argv[0] is "strategies"). Everything it allocates and
 * starts (context, demand, servers, temporary directory) is released
 * before it returns. */
int sk_bench_strategies(int argc, char **argv)
{
    struct sk_bench_sctx *c = calloc(1, sizeof *c);
    if (!c) return SK_EXIT_FAIL;
    c->o = (struct sk_bench_sopts){
        .stock = 5000, .requests = 100000, .conns = 32, .batch = 16, .duration_s = 30};
    int help = 0;
    int urc = parse_opts(argc - 1, argv + 1, &c->o, &help);
    if (urc || help) {
        free(c);
        return urc ? urc : usage(stdout);
    }
    if (c->o.chart_from) {
        int rc = chart_from_file(&c->o);
        free(c);
        return rc;
    }
    const struct sk_bench_sopts *o = &c->o;

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = sk_bench_on_sig;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN); /* a lost connection is an error, not a death */

    c->ref[REF_SAME] = (struct sk_bench_ref){
        .id = "redis_benchmark_purchase",
        .label = "redis-benchmark EVALSHA purchase, same stock and requests (the Redis limit)",
        .n = o->requests};
    c->ref[REF_ADMIT] =
        (struct sk_bench_ref){.id = "redis_benchmark_purchase_admitted",
                              .label = "redis-benchmark EVALSHA purchase, every call admitted",
                              .n = o->quick ? 10000 : 100000};
    c->ref[REF_DECR] = (struct sk_bench_ref){.id = "redis_benchmark_decr",
                                             .label = "redis-benchmark DECR",
                                             .n = o->quick ? 50000 : 300000};
    int exit_code = SK_EXIT_FAIL;
    c->users = make_demand(o);
    const char *tmp = getenv("TMPDIR");
    snprintf(c->tmpdir, sizeof c->tmpdir, "%s/seckill-strategies-XXXXXX",
             tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(c->tmpdir)) {
        fprintf(stderr, "seckill: bench strategies: mkdtemp %s: %s\n", c->tmpdir, strerror(errno));
        c->tmpdir[0] = 0;
        goto done;
    }
    if (!c->users || start_servers(c) < 0) goto done;

    for (int i = 0; i < SID_COUNT && !sk_bench_sint; i++) {
        if (!o->json) fprintf(stderr, "seckill: bench strategies: %s...\n", sk_bench_sdef[i].label);
        run_strategy(c, (enum sk_bench_sid)i);
    }
    for (int i = 0; i < REF_COUNT && !sk_bench_sint; i++) {
        if (!o->json) fprintf(stderr, "seckill: bench strategies: %s...\n", c->ref[i].label);
        run_reference(c, i);
    }
    int ok = !sk_bench_sint;
    for (int i = 0; i < SID_COUNT; i++)
        if (c->s[i].status != ST_RAN || !c->s[i].ok) ok = 0;
    json_t *root = results_json(c, ok);
    if (o->json) {
        char *txt = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
        if (txt) printf("%s\n", txt);
        free(txt);
    } else {
        print_table(c, root);
        if (c->s[SID_NAIVE].status == ST_RAN && c->s[SID_NAIVE].oversold == 0)
            printf("\n  note: the naive strategy did not oversell this time (fewer clients or\n"
                   "  less interleaving); it is still wrong, only lucky.\n");
    }
    if (o->chart) {
        char err[300];
        if (write_chart(root, o->chart, err, sizeof err) < 0) {
            fprintf(stderr, "seckill: bench strategies: %s\n", err);
            ok = 0;
        } else if (!o->json) {
            printf("\n  chart: %s\n", o->chart);
        }
    }
    json_decref(root);
    if (sk_bench_sint) fprintf(stderr, "seckill: bench strategies: interrupted\n");
    exit_code = ok ? SK_EXIT_OK : SK_EXIT_FAIL;
done:
    stop_servers(c);
    free(c->users);
    free(c);
    return exit_code;
}
