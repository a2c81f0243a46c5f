/* strategies_client.c - the client side of `seckill-bench strategies`
 * (strategies_int.h): each strategy's purchase, as its clients send it
 * (naive GET/SET, WATCH/MULTI/EXEC, lock, Lua per request and batched,
 * a PostgreSQL or SQLite transaction), and the client threads that take
 * requests from the shared list. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mysql.h>

#include "bench/bench_mysql.h"
#include "bench/bench_util.h"
#include "bench/strategies_int.h"
#include "core/clock.h"
#include "core/codes.h"
#include "core/error.h"

/* ---- small helpers ---- */

uint64_t sk_bench_strat_rng(uint64_t *s)
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
int sk_bench_strat_cmd_i64(sk_redis *r, int64_t *v, int argc, const char **argv)
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
    int rc = sk_bench_strat_cmd_i64(w->r, &stock, 2, get);
    if (rc < 0) return werr(w, rc, "naive GET", w->r->errstr);
    if (stock <= 0) return OUT_SOLD_OUT;
    const char *ism[] = {"SISMEMBER", run->k_buyers, u};
    if ((rc = sk_bench_strat_cmd_i64(w->r, &member, 3, ism)) < 0)
        return werr(w, rc, "naive SISMEMBER", w->r->errstr);
    if (member) return OUT_LIMIT;
    snprintf(left, sizeof left, "%" PRId64, stock - 1);
    const char *set[] = {"SET", run->k_stock, left};
    const char *sadd[] = {"SADD", run->k_buyers, u};
    const char *push[] = {"RPUSH", run->k_orders, u};
    if ((rc = sk_bench_strat_cmd_i64(w->r, &v, 3, set)) < 0 ||
        (rc = sk_bench_strat_cmd_i64(w->r, &v, 3, sadd)) < 0 ||
        (rc = sk_bench_strat_cmd_i64(w->r, &v, 3, push)) < 0)
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
        int rc = sk_bench_strat_cmd_i64(w->r, &v, 3, watch);
        if (rc == 0) rc = sk_bench_strat_cmd_i64(w->r, &stock, 2, get);
        if (rc < 0) return werr(w, rc, "WATCH/GET", w->r->errstr);
        int out = -1;
        if (stock <= 0) {
            out = OUT_SOLD_OUT;
        } else {
            if ((rc = sk_bench_strat_cmd_i64(w->r, &member, 3, ism)) < 0)
                return werr(w, rc, "SISMEMBER", w->r->errstr);
            if (member) out = OUT_LIMIT;
        }
        if (out >= 0) {
            if ((rc = sk_bench_strat_cmd_i64(w->r, &v, 1, unwatch)) < 0)
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
        int rc = sk_bench_strat_cmd_i64(w->r, &got, 6, lock);
        if (rc < 0) return werr(w, rc, "SET NX", w->r->errstr);
        if (got) break;
        w->retries++;
        if (sk_mono_us() - start > SK_BENCH_LOCK_WAIT_US) {
            w->lock_timeouts++;
            return OUT_GAVE_UP;
        }
        /* Jitter: waiters that sleep the same time collide again. */
        sleep_us(backoff / 2 + (int64_t)(sk_bench_strat_rng(&w->rng) % (uint64_t)backoff));
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
    if ((rc = sk_bench_strat_cmd_i64(w->r, &stock, 2, get)) < 0) goto release;
    if (stock <= 0) {
        out = OUT_SOLD_OUT;
        goto release;
    }
    if ((rc = sk_bench_strat_cmd_i64(w->r, &member, 3, ism)) < 0) goto release;
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
    int rrc = sk_bench_strat_cmd_i64(w->r, &released, 5, rel);
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
    struct sk_purchase p = {.user_id = user, .quantity = 1};
    int rc = sk_stock_buy(w->r, w->run->aid, NULL, &p, 1, &res, NULL);
    if (rc < 0) return werr(w, rc, "purchase", w->r->errstr);
    return map_rc(w, res.rc);
}

/* n requests in one purchase_batch call; outs[i] answers users[i]. */
static int buy_lua_batch(struct sk_bench_sw *w, const uint64_t *users, size_t n, int *outs)
{
    for (size_t i = 0; i < n; i++) /* designated: every other field zero */
        w->p[i] = (struct sk_purchase){.user_id = users[i], .quantity = 1};
    int rc = sk_stock_buy(w->r, w->run->aid, NULL, w->p, n, w->res, NULL);
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

/* The seeds' own strategy on the seeds' own database: the same
 * transaction on MariaDB (InnoDB row lock on the one hot row until
 * COMMIT and its redo log flush). Text protocol, as the seeds' JDBC. */
static int my_q(struct sk_bench_sw *w, const char *sql, const char *what)
{
    if (mysql_query(w->my, sql) == 0) return 0;
    werr(w, SK_EDB, what, mysql_error(w->my));
    return SK_EDB;
}

static int buy_my(struct sk_bench_sw *w, uint64_t user)
{
    int rc = my_q(w, "START TRANSACTION", "START TRANSACTION");
    if (rc < 0) return rc;
    if ((rc = my_q(w, "UPDATE items SET stock = stock - 1 WHERE id = 1 AND stock >= 1", "UPDATE")) <
        0) {
        mysql_query(w->my, "ROLLBACK");
        return rc;
    }
    if (mysql_affected_rows(w->my) == 0) {
        rc = my_q(w, "ROLLBACK", "ROLLBACK");
        return rc < 0 ? rc : OUT_SOLD_OUT;
    }
    char sql[96];
    snprintf(sql, sizeof sql, "INSERT INTO orders (user_id, item_id) VALUES (%" PRIu64 ", 1)",
             user);
    if (mysql_query(w->my, sql) != 0) {
        int dup = mysql_errno(w->my) == 1062; /* ER_DUP_ENTRY: the per-user limit */
        if (!dup) werr(w, SK_EDB, "INSERT", mysql_error(w->my));
        rc = my_q(w, "ROLLBACK", "ROLLBACK");
        return !dup ? SK_EDB : rc < 0 ? rc : OUT_LIMIT;
    }
    rc = my_q(w, "COMMIT", "COMMIT");
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
 * its statements); w owns them until sk_bench_strat_client_close. */
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
    case SID_MYSQL: {
        w->my = sk_bench_my_connect(c->my.url, eb, sizeof eb);
        if (!w->my) return werr(w, SK_EDB, "connect", eb);
        char sql[96];
        snprintf(sql, sizeof sql, "SET SESSION innodb_lock_wait_timeout = %d",
                 SK_BENCH_PG_STATEMENT_TIMEOUT_MS / 1000);
        return my_q(w, sql, "session");
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

void sk_bench_strat_client_close(struct sk_bench_sw *w)
{
    sk_redis_free(w->r);
    if (w->pg) PQfinish(w->pg);
    sk_bench_my_close(w->my);
    w->my = NULL;
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
    int64_t unit = run->sid == SID_LUA_BATCH ? o->batch : 1;
    int outs[SK_BATCH_MAX];
    for (;;) {
        if (atomic_load(&run->stop) || sk_bench_interrupted) break;
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
        case SID_MYSQL: rc = outs[0] = buy_my(w, users[first]); break;
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

void *sk_bench_strat_client_main(void *arg)
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
