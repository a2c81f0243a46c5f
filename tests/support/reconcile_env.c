/* reconcile_env.c - the reconcile tests' shared helpers (reconcile_env.h). */
#include "support/reconcile_env.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include <libpq-fe.h>
#include <sqlite3.h>

#include "core/clock.h"
#include "core/codes.h"
#include "engine/stock.h"
#include "orders/reconcile.h"
#include "orders/sweeper.h"
#include "support/fixtures.h"
#include "support/mysql_harness.h"

void sk_th_be_sql(struct sk_th_env *e, const char *sql)
{
    if (e->my) {
        CHECK_MSG(sk_th_my_sql(e->spec, sql) == 0, "%s", sql);
        return;
    }
    if (!e->pg) {
        sqlite3 *db;
        CHECK_EQ(sqlite3_open(e->path, &db), SQLITE_OK);
        sqlite3_busy_timeout(db, 5000);
        char *msg = NULL;
        int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
        CHECK_MSG(rc == SQLITE_OK, "%s: %s", sql, msg ? msg : "?");
        sqlite3_close(db);
        return;
    }
    PGconn *c = PQconnectdb(e->spec);
    CHECK_MSG(PQstatus(c) == CONNECTION_OK, "connect: %s", PQerrorMessage(c));
    PGresult *r = PQexec(c, sql);
    CHECK_MSG(PQresultStatus(r) == PGRES_COMMAND_OK, "%s: %s", sql, PQresultErrorMessage(r));
    PQclear(r);
    PQfinish(c);
}

void sk_th_redis_do(struct sk_th_env *e, const char *fmt, const char *a, const char *b,
                    const char *c)
{
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(e->r, &rep, fmt, a, b, c), 0);
    CHECK_MSG(rep->type != REDIS_REPLY_ERROR, "%s: %s", fmt, rep->str);
    freeReplyObject(rep);
}

int sk_th_reconcile(struct sk_th_env *e, uint64_t aid, char *out, size_t cap,
                    const char *const *extra)
{
    char id[32];
    snprintf(id, sizeof id, "%" PRIu64, aid);
    const char *args[16] = {"reconcile", "--redis", e->redis_url, "--db", e->spec};
    int n = 5;
    if (aid) {
        args[n++] = "--activity";
        args[n++] = id;
    }
    for (int i = 0; extra && extra[i] && n < 15; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    return sk_th_run_seckill(out, cap, NULL, args);
}

size_t sk_th_audit_count(struct sk_th_env *e, uint64_t aid, const char *kind)
{
    struct sk_audit *rows;
    size_t n = 0, k = 0;
    CHECK_EQ(sk_store_audit_list(e->st, aid, &rows, &n), 0);
    for (size_t i = 0; i < n; i++)
        k += !kind || !strcmp(rows[i].kind, kind);
    free(rows);
    return k;
}

const char *sk_th_reconcile_clean(struct sk_th_env *e, uint64_t aid, char *out, size_t cap)
{
    int rc = sk_th_reconcile(e, aid, out, cap, NULL);
    CHECK_MSG(rc == 0, "exit %d:\n%s", rc, out);
    HAS(out, "consistent");
    HASNT(out, "DRIFT");
    return out;
}

void sk_th_reconcile_later(struct sk_th_env *e, uint64_t aid, int64_t later_ms,
                           struct sk_reconcile_report *rep)
{
    struct sk_reconcile_opts o;
    sk_reconcile_opts_init(&o);
    o.now_ms = sk_wall_ms() + later_ms;
    CHECK_EQ(sk_reconcile_activity(e->st, e->r, aid, &o, rep), 0);
}

void sk_th_expect_repaired(struct sk_th_env *e, uint64_t aid, const char *line,
                           const char *audit_kind, size_t audits)
{
    static char out[65536];
    int rc = sk_th_reconcile(e, aid, out, sizeof out, NULL);
    CHECK_MSG(rc == 1, "exit %d:\n%s", rc, out);
    HAS(out, line);
    size_t before = sk_th_audit_count(e, aid, NULL);
    size_t kind_before = sk_th_audit_count(e, aid, audit_kind);
    rc = sk_th_reconcile(e, aid, out, sizeof out, (const char *const[]){"--repair", NULL});
    CHECK_MSG(rc == 0, "repair exit %d:\n%s", rc, out);
    HAS(out, "REPAIRED");
    HAS(out, "remain after repair: consistent");
    HASNT(out, "NOT REPAIRED");
    size_t after = sk_th_audit_count(e, aid, NULL);
    CHECK_MSG(after == before + audits, "%zu audit rows, expected %zu:\n%s", after, before + audits,
              out);
    CHECK_MSG(sk_th_audit_count(e, aid, audit_kind) > kind_before, "no audit row of kind %s:\n%s",
              audit_kind, out);
    rc = sk_th_reconcile(e, aid, out, sizeof out, NULL);
    CHECK_MSG(rc == 0, "second reconcile exit %d:\n%s", rc, out);
    HAS(out, "consistent");
}

/* ---- a live sale ---------------------------------------------------------- */

static void *live_checker(void *p)
{
    struct sk_th_live *l = p;
    sk_store *st;
    sk_redis *r;
    char err[512];
    if (sk_store_open(&st, l->e->spec, err, sizeof err) ||
        sk_redis_new(&r, l->e->redis_url, 1000, 5000, err, sizeof err)) {
        l->bad = -1;
        return NULL;
    }
    struct sk_reconcile_opts o;
    sk_reconcile_opts_init(&o);
    o.chunk = l->chunk;
    struct sk_reconcile_periodic per;
    sk_reconcile_periodic_init(&per);
    per.chunk = l->chunk;
    per.full_every = 3;
    while (!atomic_load(&l->stop)) {
        struct sk_reconcile_report rep;
        int rc = l->periodic ? sk_reconcile_periodic_run(&per, st, r, l->aid, &rep)
                             : sk_reconcile_activity(st, r, l->aid, &o, &rep);
        atomic_fetch_add(&l->checks, 1);
        l->sliced += rep.slices > 1;
        l->incremental += rep.incremental && !rep.escalated;
        if ((rc || !rep.consistent) && l->bad++ == 0) {
            FILE *f = fmemopen(l->first_bad, sizeof l->first_bad - 1, "w");
            if (f) {
                fprintf(f, "rc %d\n", rc);
                sk_reconcile_print(f, &rep, 5);
                fclose(f);
            }
        }
        sk_reconcile_report_free(&rep);
    }
    sk_reconcile_periodic_free(&per);
    sk_store_close(st);
    sk_redis_free(r);
    return NULL;
}

static void *live_worker(void *p)
{
    sk_worker_run(p);
    return NULL;
}

static void *live_sweeper(void *p)
{
    struct sk_th_live *l = p;
    struct sk_sweeper_opts o;
    sk_sweeper_opts_init(&o);
    o.redis_url = l->e->redis_url;
    o.db_spec = l->e->spec;
    o.batch = 5;
    sk_sweeper *sw;
    char err[512];
    if (sk_sweeper_new(&sw, &o, err, sizeof err)) return NULL;
    while (!atomic_load(&l->sweep_stop))
        /* Every order is past its deadline at this time: each one is
         * cancelled as soon as it is persisted, and bought again. */
        sk_sweeper_pass(sw, sk_wall_ms() + 120000, NULL);
    sk_sweeper_free(sw);
    return NULL;
}

void sk_th_live_start(struct sk_th_live *l, struct sk_th_env *e, uint64_t aid, const char *consumer,
                      int relist_ms)
{
    sk_th_live_start_as(l, e, aid, consumer, relist_ms, 0, 0);
}

void sk_th_live_start_as(struct sk_th_live *l, struct sk_th_env *e, uint64_t aid,
                         const char *consumer, int relist_ms, size_t chunk, int periodic)
{
    memset(l, 0, sizeof *l);
    l->chunk = chunk;
    l->periodic = periodic;
    l->e = e;
    l->aid = aid;
    atomic_init(&l->stop, 0);
    atomic_init(&l->sweep_stop, 0);
    atomic_init(&l->checks, 0);
    struct sk_worker_opts wo;
    sk_worker_opts_init(&wo);
    wo.redis_url = e->redis_url;
    wo.db_spec = e->spec;
    wo.consumer = consumer;
    wo.batch = 7;
    wo.block_ms = 20;
    if (relist_ms > 0) wo.relist_ms = relist_ms;
    char err[512];
    CHECK_MSG(sk_worker_new(&l->w, &wo, err, sizeof err) == 0, "worker: %s", err);
    CHECK_EQ(pthread_create(&l->tw, NULL, live_worker, l->w), 0);
    CHECK_EQ(pthread_create(&l->tc, NULL, live_checker, l), 0);
    CHECK_EQ(pthread_create(&l->ts, NULL, live_sweeper, l), 0);
}

size_t sk_th_live_buy(struct sk_th_live *l, size_t wanted, int64_t within_ms)
{
    size_t accepted = 0;
    int64_t until = sk_mono_ms() + within_ms;
    for (uint64_t u = 1; accepted < wanted; u++) {
        CHECK_MSG(sk_mono_ms() < until, "only %zu purchases accepted", accepted);
        struct sk_admission a;
        CHECK_EQ(sk_th_buy(l->e->r, l->aid, u, 1, &a, NULL), 0);
        accepted += a.rc == SK_RC_OK;
    }
    return accepted;
}

void sk_th_live_finish(struct sk_th_live *l, size_t accepted)
{
    struct sk_th_env *e = l->e;
    /* Let the pipeline settle: every admitted order persisted, and the
     * checker's third pass made while the pipeline still runs (a loaded
     * machine may settle the sale before it). */
    int64_t until = sk_mono_ms() + 20000;
    for (;;) {
        struct sk_order_counts c;
        CHECK_EQ(sk_store_orders_count(e->st, l->aid, &c), 0);
        long long persisted = c.orders[0] + c.orders[1] + c.orders[2];
        int checks = atomic_load(&l->checks);
        if ((size_t)persisted == accepted && checks >= 3) break;
        CHECK_MSG(sk_mono_ms() < until, "in 20 s: %lld of %zu orders persisted, %d checks",
                  persisted, accepted, checks);
        sk_th_nap_ms(10);
    }
    atomic_store(&l->sweep_stop, 1);
    CHECK_EQ(pthread_join(l->ts, NULL), 0);
    sk_worker_stop(l->w);
    CHECK_EQ(pthread_join(l->tw, NULL), 0);
    sk_worker_free(l->w);
    l->w = NULL;
    atomic_store(&l->stop, 1);
    CHECK_EQ(pthread_join(l->tc, NULL), 0);
    CHECK_MSG(l->bad == 0, "%d of %d checks showed drift; first:\n%s", l->bad,
              atomic_load(&l->checks), l->first_bad);
    /* Settled: one more sweeper pass so no cancel is half done. */
    sk_sweeper *sw;
    struct sk_sweeper_opts so;
    sk_sweeper_opts_init(&so);
    so.redis_url = e->redis_url;
    so.db_spec = e->spec;
    char err[512];
    CHECK_EQ(sk_sweeper_new(&sw, &so, err, sizeof err), 0);
    CHECK_EQ(sk_sweeper_pass(sw, sk_wall_ms(), NULL), 0);
    sk_sweeper_free(sw);
}
