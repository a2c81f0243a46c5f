/* bench_recover.c - `seckill-bench recover`: how fast a Redis that went back
 * in time is fenced, and how fast the database's orders are put back into
 * it (docs/recovery.md).
 *
 * Part 1, time to the fence. A private redis-server (DEBUG enabled), a
 * SQLite store, an in-process order worker whose rollback guard checks
 * every second as in `seckill serve`, and buyers: one "with memory" (it
 * passes the key set's epoch and admission count of its last reply, as
 * serve does) and one "plain" (the blocking API: no memory, like a host
 * that never saw the lost writes). Each round sells for a while, then
 * Redis goes back in time, either restarted empty (FLUSHALL, SCRIPT FLUSH,
 * every connection dropped) or restored from a snapshot taken a second
 * before (SAVE, then DEBUG RELOAD NOSAVE and every connection dropped).
 * Per buyer: milliseconds from the rollback to its first 503-recovering
 * answer (RECOVERING), to its first admission again, and the units it got
 * admitted in between (sold on the rolled-back stock before the fence).
 * Rounds with both buyers measure serve's in-script check; rounds with the
 * plain buyer alone measure the worker's check.
 *
 * Part 2, the replay rate. Per store (SQLite, and PostgreSQL on a private
 * server): --orders orders admitted and persisted by the worker (timed:
 * the reference line, orders/s persisted), then every key of the activity
 * dropped (Redis restarted empty) and `activity recover --apply`'s code
 * timed: rebuild plus the replay of every order; checked afterwards (held
 * == orders, no fence). */
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench_int.h"
#include "bench/bench_util.h"
#include "core/cli.h"
#include "core/clock.h"
#include "core/codes.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/activity.h"
#include "engine/keys.h"
#include "engine/recovery.h"
#include "engine/stock.h"
#include "orders/order_worker.h"
#include "orders/recover.h"
#include "redis/redis_conn.h"
#include "redis/script.h"
#include "spawn/redis_spawn.h"
#include "store/store.h"
#include "tests/support/spawn/pg_spawn.h"

#define MAX_ROUNDS 20

struct opts {
    int64_t orders;
    int rounds;
    int fence, replay; /* parts to run */
    const char *db;    /* NULL both, "sqlite", or a postgres:// URL */
};

/* A failure of this bench: "seckill: bench recover: <msg>", SK_EXIT_FAIL. */
#define fail(...) sk_cli_runtime_error("bench recover: " __VA_ARGS__)

static void nap_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* An open activity in the store and in Redis: stock units, limit 1. */
static int make_activity(sk_store *st, sk_redis *r, uint64_t id, int64_t stock)
{
    struct sk_activity a;
    sk_activity_init(&a);
    a.id = id;
    snprintf(a.name, sizeof a.name, "bench recover");
    a.stock = stock;
    a.per_user_limit = 1;
    a.start_ms = sk_wall_ms() - 60000;
    a.end_ms = a.start_ms + 24 * 3600 * 1000LL;
    a.created_ms = sk_wall_ms();
    sk_activity_apply_defaults(&a);
    struct sk_stock_def d;
    sk_activity_stock_def(&a, &d);
    int rc;
    if (sk_store_activity_insert(st, &a) < 0) return fail("store: %s", sk_store_errstr(st));
    if (sk_stock_preheat(r, &d, 0, &rc, NULL) < 0 || rc != SK_RC_PREHEATED ||
        sk_stock_set_open(r, id, 1, &rc) < 0 || rc != SK_RC_OK)
        return fail("preheat: %s", r->errstr);
    if (sk_store_activity_set_state(st, id, "open") < 0)
        return fail("store: %s", sk_store_errstr(st));
    return 0;
}

/* ---- part 1: time to the fence ------------------------------------------- */

struct buyer {
    const char *url;
    uint64_t aid;
    int memory; /* pass (epoch, adm) as serve does */
    atomic_uint_fast64_t *next_user;
    atomic_int *stop;
    _Atomic int64_t *rollback_us; /* set by the main thread; 0 before */
    /* per round, since rollback_us */
    _Atomic int64_t fenced_us, ok_us;
    atomic_long before_fence; /* admitted after the rollback, before the fence */
    atomic_long ok;
    pthread_t th;
};

/* One purchase of a fresh user; *rc the answer, or a negative failure. */
static int buy_one(struct buyer *b, sk_redis *r, struct sk_keys *k, int64_t *epoch, int64_t *adm,
                   int *rc)
{
    struct sk_purchase p = {.user_id = atomic_fetch_add(b->next_user, 1), .quantity = 1};
    struct sk_admission res;
    if (!b->memory) {
        int e = sk_stock_buy(r, b->aid, NULL, &p, 1, &res, NULL);
        *rc = res.rc;
        return e;
    }
    struct sk_batch_head h = {.label = k->label, .epoch = *epoch, .adm = *adm};
    char buf[SK_BATCH_ARG_BYTES(1)];
    const char *args[SK_BATCH_ARGC(1)];
    size_t lens[SK_BATCH_ARGC(1)];
    char kb[SK_BATCH_KEY_BYTES(1)];
    const char *keys[SK_BATCH_KEYC(1)];
    int nk = sk_stock_batch_keys(k, NULL, &p, 1, kb, sizeof kb, keys);
    if (nk < 0 || sk_stock_batch_args_head(&h, &p, 1, buf, sizeof buf, args, lens) < 0)
        return SK_EINVAL;
    redisReply *rep;
    int e = sk_script_eval(r, SK_SCRIPT_PURCHASE_BATCH, nk, keys, (int)SK_BATCH_ARGC(1), args, lens,
                           &rep);
    if (e == 0 && sk_stock_batch_parse(rep, 1, &res, NULL) < 0) e = SK_EPROTO;
    if (e == 0) {
        *rc = res.rc;
        int64_t ep, ad;
        sk_stock_batch_seen(rep, 1, &ep, &ad);
        if (res.rc == SK_RC_RECOVERING) *epoch = *adm = 0;
        if (ep > 0) *epoch = ep, *adm = ad;
    }
    if (rep) freeReplyObject(rep);
    return e;
}

static void *buyer_run(void *arg)
{
    struct buyer *b = arg;
    sk_redis *r;
    char err[256];
    if (sk_redis_new(&r, b->url, 1000, 1000, err, sizeof err) < 0) return NULL;
    struct sk_keys k;
    sk_keys_for(&k, b->aid);
    int64_t epoch = 0, adm = 0;
    while (!atomic_load(b->stop)) {
        int rc = -1;
        if (buy_one(b, r, &k, &epoch, &adm, &rc) < 0) {
            nap_ms(1); /* the connection was dropped: reconnects on the next call */
            continue;
        }
        int64_t t = atomic_load(b->rollback_us);
        if (rc == SK_RC_OK) atomic_fetch_add(&b->ok, 1);
        if (!t) continue;
        int64_t now = sk_mono_us(), zero = 0;
        if (rc == SK_RC_RECOVERING)
            atomic_compare_exchange_strong(&b->fenced_us, &zero, now - t);
        else if (rc == SK_RC_OK && !atomic_load(&b->fenced_us))
            atomic_fetch_add(&b->before_fence, 1);
        else if (rc == SK_RC_OK)
            atomic_compare_exchange_strong(&b->ok_us, &zero, now - t);
    }
    sk_redis_free(r);
    return NULL;
}

struct fence_run {
    struct sk_redis_spawn sp;
    char db[600];
    sk_store *st;
    sk_redis *r;
    sk_worker *w;
    pthread_t wth;
    uint64_t aid;
    atomic_uint_fast64_t next_user;
    atomic_int stop;
    _Atomic int64_t rollback_us;
};

static void *worker_run(void *arg)
{
    sk_worker_run(arg);
    return NULL;
}

/* A command of words separated by single spaces; a failure or an error
 * reply is reported. */
static int cmd_ok(sk_redis *r, const char *cmd)
{
    char buf[128];
    const char *argv[8];
    int argc = 0;
    snprintf(buf, sizeof buf, "%s", cmd);
    for (char *t = strtok(buf, " "); t && argc < 8; t = strtok(NULL, " "))
        argv[argc++] = t;
    redisReply *rep;
    if (sk_redis_command(r, &rep, argc, argv, NULL) < 0) return fail("%s: %s", cmd, r->errstr);
    int bad = rep->type == REDIS_REPLY_ERROR;
    if (bad) fail("%s: %s", cmd, rep->str);
    freeReplyObject(rep);
    return bad ? SK_EXIT_FAIL : 0;
}

static int64_t watermark(sk_store *st, uint64_t aid)
{
    struct sk_mark *m;
    size_t n;
    int64_t v = 0;
    if (sk_store_marks_list(st, aid, &m, &n) == 0 && n) v = m[0].adm;
    free(m);
    return v;
}

struct round_result {
    double fence_ms[2], resume_ms[2];
    long before_fence[2];
};

/* One round: sell ~1 s, go back in time (snapshot: restore the one taken
 * at the start), wait until every buyer sold again (bounded). */
static int round_once(struct fence_run *f, struct buyer *b, int nb, int snapshot,
                      struct round_result *out)
{
    if (snapshot && cmd_ok(f->r, "SAVE")) return SK_EXIT_FAIL;
    struct sk_keys k;
    sk_keys_for(&k, f->aid);
    struct sk_keyset_probe p;
    if (sk_recovery_probe(f->r, &k, 1, &p) < 0) return fail("probe: %s", f->r->errstr);
    /* the database holds orders the snapshot does not */
    int64_t by = sk_mono_ms() + 30000;
    while (watermark(f->st, f->aid) < p.adm + 2000 || sk_mono_ms() < by - 29000) {
        if (sk_mono_ms() > by) return fail("the worker persisted nothing for 30 s");
        nap_ms(10);
    }
    for (int i = 0; i < nb; i++) {
        atomic_store(&b[i].fenced_us, 0);
        atomic_store(&b[i].ok_us, 0);
        atomic_store(&b[i].before_fence, 0);
    }
    int rc = snapshot ? cmd_ok(f->r, "DEBUG RELOAD NOSAVE") : cmd_ok(f->r, "FLUSHALL");
    if (rc == 0) rc = cmd_ok(f->r, "SCRIPT FLUSH");
    atomic_store(&f->rollback_us, sk_mono_us());
    if (rc == 0) rc = cmd_ok(f->r, "CLIENT KILL TYPE normal"); /* a restart drops them */
    if (rc) return rc;
    by = sk_mono_ms() + 30000;
    for (int i = 0; i < nb; i++)
        while (!atomic_load(&b[i].ok_us)) {
            if (sk_mono_ms() > by) return fail("buyer %d did not buy again within 30 s", i);
            nap_ms(1);
        }
    atomic_store(&f->rollback_us, 0);
    for (int i = 0; i < nb; i++) {
        out->fence_ms[i] = (double)atomic_load(&b[i].fenced_us) / 1000.0;
        out->resume_ms[i] = (double)atomic_load(&b[i].ok_us) / 1000.0;
        out->before_fence[i] = atomic_load(&b[i].before_fence);
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* "median [min-max]" of n values. */
static void spread(char *buf, size_t cap, const double *v, int n)
{
    double s[MAX_ROUNDS];
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    snprintf(buf, cap, "%.0f [%.0f-%.0f]", s[n / 2], s[0], s[n - 1]);
}

static int fence_part(const struct opts *o)
{
    static struct fence_run f;
    memset(&f, 0, sizeof f);
    const char *extra[] = {"--enable-debug-command", "yes", NULL};
    if (sk_redis_spawn_start(&f.sp, extra) < 0) return fail("redis-server: %s", f.sp.errstr);
    snprintf(f.db, sizeof f.db, "sqlite:%s/fence.db", f.sp.dir);
    char err[512];
    int rc = SK_EXIT_OK;
    if (sk_store_open(&f.st, f.db, err, sizeof err) < 0 ||
        sk_redis_new(&f.r, f.sp.url, 2000, 30000, err, sizeof err) < 0) {
        rc = fail("%s", err);
        goto out;
    }
    f.aid = 4242;
    atomic_store(&f.next_user, 1);
    if ((rc = make_activity(f.st, f.r, f.aid, 100000000)) != 0) goto out;
    struct sk_worker_opts wo;
    sk_worker_opts_init(&wo);
    wo.redis_url = f.sp.url;
    wo.db_spec = f.db;
    if (sk_worker_new(&f.w, &wo, err, sizeof err) < 0 ||
        pthread_create(&f.wth, NULL, worker_run, f.w) != 0) {
        rc = fail("worker: %s", err);
        goto out;
    }
    printf("time to the fence (ms from the rollback; %d rounds: median [range])\n", o->rounds);
    printf("  %-14s %-12s %-22s %-22s %-22s %s\n", "rollback", "buyers", "fenced (memory)",
           "fenced (plain)", "selling again (plain)", "plain: sold before fence");
    for (int cfg = 0; cfg < 4 && rc == 0; cfg++) {
        int snapshot = cfg >= 2, with_memory = cfg % 2 == 0;
        struct buyer b[2];
        memset(b, 0, sizeof b);
        int nb = with_memory ? 2 : 1;
        for (int i = 0; i < nb; i++) {
            b[i] = (struct buyer){.url = f.sp.url,
                                  .aid = f.aid,
                                  .memory = with_memory && i == 0,
                                  .next_user = &f.next_user,
                                  .stop = &f.stop,
                                  .rollback_us = &f.rollback_us};
            pthread_create(&b[i].th, NULL, buyer_run, &b[i]);
        }
        struct round_result rr[MAX_ROUNDS];
        for (int i = 0; i < o->rounds && rc == 0; i++)
            rc = round_once(&f, b, nb, snapshot, &rr[i]);
        atomic_store(&f.stop, 1);
        for (int i = 0; i < nb; i++)
            pthread_join(b[i].th, NULL);
        atomic_store(&f.stop, 0);
        if (rc) break;
        double fm[MAX_ROUNDS], fp[MAX_ROUNDS], rp[MAX_ROUNDS], bp[MAX_ROUNDS];
        int plain = nb - 1;
        for (int i = 0; i < o->rounds; i++) {
            fm[i] = rr[i].fence_ms[0];
            fp[i] = rr[i].fence_ms[plain];
            rp[i] = rr[i].resume_ms[plain];
            bp[i] = (double)rr[i].before_fence[plain];
        }
        char s1[64] = "-", s2[64], s3[64], s4[64];
        if (with_memory) spread(s1, sizeof s1, fm, o->rounds);
        spread(s2, sizeof s2, fp, o->rounds);
        spread(s3, sizeof s3, rp, o->rounds);
        spread(s4, sizeof s4, bp, o->rounds);
        printf("  %-14s %-12s %-22s %-22s %-22s %s\n", snapshot ? "snapshot" : "restart empty",
               with_memory ? "memory+plain" : "plain only", s1, s2, s3, s4);
    }
    struct sk_worker_stats ws;
    sk_worker_stats(f.w, &ws);
    printf("  worker: %" PRIu64 " recoveries, %" PRIu64 " orders replayed, %" PRIu64
           " units oversold, %" PRIu64 " acknowledged admissions lost\n",
           ws.recoveries, ws.orders_replayed, ws.units_oversold, ws.admissions_lost);
out:
    if (f.w) {
        sk_worker_stop(f.w);
        pthread_join(f.wth, NULL);
        sk_worker_free(f.w);
    }
    sk_redis_free(f.r);
    sk_store_close(f.st);
    sk_redis_spawn_stop(&f.sp);
    return rc;
}

/* ---- part 2: the replay rate -------------------------------------------- */

/* Admits n orders of users 1..n (batches of 1000). */
static int admit(sk_redis *r, uint64_t aid, int64_t n)
{
    struct sk_purchase *p = malloc(1000 * sizeof *p);
    struct sk_admission *res = malloc(1000 * sizeof *res);
    int rc = p && res ? 0 : fail("out of memory");
    for (int64_t at = 0; rc == 0 && at < n; at += 1000) {
        size_t m = (size_t)(n - at < 1000 ? n - at : 1000);
        for (size_t i = 0; i < m; i++)
            p[i] = (struct sk_purchase){.user_id = (uint64_t)(at + (int64_t)i + 1), .quantity = 1};
        if (sk_stock_buy(r, aid, NULL, p, m, res, NULL) < 0) rc = fail("purchase: %s", r->errstr);
        for (size_t i = 0; rc == 0 && i < m; i++)
            if (res[i].rc != SK_RC_OK) rc = fail("purchase refused: %s", sk_rc_name(res[i].rc));
    }
    free(p);
    free(res);
    return rc;
}

/* sk_recover_activity of aid into *rep, timed into *secs: apply 1 rebuilds
 * and replays, 0 only checks. 0, or the failure (printed). */
static int recover_timed(sk_store *st, sk_redis *r, uint64_t aid, int apply,
                         struct sk_recover_report *rep, double *secs)
{
    struct sk_recover_opts ro = {.apply = apply, .actor = "bench"};
    char err[512];
    int64_t t0 = sk_mono_us();
    int rc = sk_recover_activity(st, r, aid, &ro, rep, err, sizeof err);
    *secs = (double)(sk_mono_us() - t0) / 1e6;
    return rc < 0 ? fail("%s: %s", apply ? "recover" : "check", err) : 0;
}

static int replay_one(const struct opts *o, const char *name, const char *spec,
                      const char *redis_url, uint64_t aid)
{
    sk_store *st;
    sk_redis *r;
    sk_worker *w = NULL;
    char err[512];
    if (sk_store_open(&st, spec, err, sizeof err) < 0) return fail("%s: %s", name, err);
    if (sk_redis_new(&r, redis_url, 2000, 60000, err, sizeof err) < 0) {
        sk_store_close(st);
        return fail("%s", err);
    }
    int rc = make_activity(st, r, aid, o->orders);
    if (rc == 0) rc = admit(r, aid, o->orders);
    struct sk_worker_opts wo;
    sk_worker_opts_init(&wo);
    wo.redis_url = redis_url;
    wo.db_spec = spec;
    wo.once = 1;
    wo.guard_ms = 0;
    int64_t t0 = sk_mono_us();
    if (rc == 0 && (sk_worker_new(&w, &wo, err, sizeof err) < 0 || sk_worker_run(w) < 0))
        rc = fail("worker: %s", w ? sk_worker_errstr(w) : err);
    double persist_s = (double)(sk_mono_us() - t0) / 1e6;
    sk_worker_free(w);
    /* Redis restarted empty: every key of the activity gone */
    if (rc == 0 && sk_stock_drop(r, aid) < 0) rc = fail("drop: %s", r->errstr);
    struct sk_recover_report rep = {0}, rep2 = {0};
    double replay_s = 0, check_s = 0;
    if (rc == 0) rc = recover_timed(st, r, aid, 1, &rep, &replay_s);
    if (rc == 0) rc = recover_timed(st, r, aid, 0, &rep2, &check_s);
    struct sk_stock_state s;
    if (rc == 0 && (sk_stock_state(r, aid, &s) < 0 || s.held != o->orders || s.fenced ||
                    rep.orders_replayed != o->orders || rep2.needed))
        rc = fail("%s: after the replay: held %" PRId64 ", fenced %" PRId64 ", replayed %" PRId64
                  ", check needed %d",
                  name, s.held, s.fenced, rep.orders_replayed, rep2.needed);
    if (rc == 0)
        printf("  %-11s %9" PRId64 " orders: persisted by the worker %8.0f orders/s (reference); "
               "rebuilt + replayed in %.2f s = %8.0f orders/s (%.2f x); a check with nothing "
               "to do %.2f s\n",
               name, o->orders, (double)o->orders / persist_s, replay_s,
               (double)o->orders / replay_s, persist_s / replay_s, check_s);
    sk_recover_report_free(&rep);
    sk_recover_report_free(&rep2);
    sk_redis_free(r);
    sk_store_close(st);
    return rc;
}

static int replay_part(const struct opts *o, struct sk_pg_spawn *pgs, int have_pg)
{
    struct sk_redis_spawn sp = {0};
    if (sk_redis_spawn_start(&sp, NULL) < 0) return fail("redis-server: %s", sp.errstr);
    printf("replay rate (Redis restarted empty, every persisted order put back)\n");
    int rc = 0;
    /* fresh ids: a --db given may hold earlier runs */
    uint64_t id = (uint64_t)(sk_wall_ms() % 100000000) * 10;
    if (!o->db || !strcmp(o->db, "sqlite")) {
        char spec[600];
        snprintf(spec, sizeof spec, "sqlite:%s/replay.db", sp.dir);
        rc = replay_one(o, "SQLite", spec, sp.url, id + 1);
    }
    if (rc == 0 && o->db && strncmp(o->db, "sqlite", 6))
        rc = replay_one(o, "PostgreSQL", o->db, sp.url, id + 2);
    else if (rc == 0 && !o->db && have_pg)
        rc = replay_one(o, "PostgreSQL", pgs->url, sp.url, id + 2);
    else if (rc == 0 && !o->db)
        printf("  PostgreSQL: skipped (no server could be started: %s)\n", pgs->errstr);
    sk_redis_spawn_stop(&sp);
    return rc;
}

static int usage(FILE *f)
{
    fprintf(f,
            "usage: seckill-bench recover [--orders N] [--rounds R] [--db sqlite|postgres://...]\n"
            "                             [--only fence|replay]\n"
            "How fast a Redis that went back in time is fenced and rebuilt (docs/recovery.md):\n"
            "time from a rollback (restart empty, snapshot restore) to the first 503-recovering\n"
            "answer, with and without serve's memory of the key set (the worker's 1 s check),\n"
            "and the replay rate of --orders persisted orders (default 100000) on SQLite and\n"
            "a private PostgreSQL server (--db: that store only). --rounds: rounds per\n"
            "rollback kind (default 3).\n");
    return f == stdout ? SK_EXIT_OK : SK_EXIT_USAGE;
}

int sk_bench_recover(int argc, char **argv)
{
    struct opts o = {.orders = 100000, .rounds = 3, .fence = 1, .replay = 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t n;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(stdout);
        if (!v) return sk_cli_usage_error("bench recover: %s needs a value", a);
        if (!strcmp(a, "--orders") && sk_cli_parse_u64(v, &n) == 0 && n >= 1 && n <= 10000000)
            o.orders = (int64_t)n;
        else if (!strcmp(a, "--rounds") && sk_cli_parse_u64(v, &n) == 0 && n >= 1 &&
                 n <= MAX_ROUNDS)
            o.rounds = (int)n;
        else if (!strcmp(a, "--db") && (!strcmp(v, "sqlite") || !strncmp(v, "postgres", 8)))
            o.db = v;
        else if (!strcmp(a, "--only") && (!strcmp(v, "fence") || !strcmp(v, "replay")))
            o.fence = !strcmp(v, "fence"), o.replay = !o.fence;
        else
            return sk_cli_usage_error("bench recover: bad option %s %s (see --help)", a, v);
        i++;
    }
    sk_log_set_level(getenv("SECKILL_BENCH_LOG")
                         ? SK_LOG_DEBUG
                         : SK_LOG_ERROR); /* the recoveries log a warning each */
    struct sk_pg_spawn pgs = {0};
    /* before any thread exists: it forks */
    int have_pg = o.replay && !o.db && sk_pg_spawn_start(&pgs, NULL) == 0;
    char cpu[128], kernel[200];
    sk_bench_machine(cpu, sizeof cpu, kernel, sizeof kernel);
    printf("seckill-bench recover: %ld cpus, %s, %s\n", sysconf(_SC_NPROCESSORS_ONLN), cpu, kernel);
    int rc = o.fence ? fence_part(&o) : 0;
    if (rc == 0 && o.replay) rc = replay_part(&o, &pgs, have_pg);
    sk_pg_spawn_stop(&pgs);
    return rc;
}
