/* api_worker_env.c - serve, a worker of the test's own, Redis
 * (api_worker_env.h). */
#include "support/api_worker_env.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spawn/spawn.h"
#include "support/fixtures.h"

void aw_start(struct aw_env *e, const char *const *redis_conf)
{
    memset(e, 0, sizeof *e);
    sk_th_redis_start(&e->rs, redis_conf);
    const char *extra[] = {"--role", "api", "--processes", "2", NULL};
    setenv("LSAN_OPTIONS", "exitcode=0", 1);
    sk_th_serve_start(&e->v, e->rs.url, extra);
    sale_log_on_failure(e->v.log, e->v.port);
    sale_wait_ready(e->v.port);
    snprintf(e->wlog, sizeof e->wlog, "%s/worker.log", sk_th_tmpdir());
    aw_worker_start(e);
    e->st = sk_th_store_open(e->v.db);
    e->r = sk_th_redis_new(e->rs.url, 2000, 5000);
}

void aw_worker_start(struct aw_env *e)
{
    const char *argv[] = {sk_th_seckill_bin(), "worker", "--redis", e->rs.url, "--db", e->v.db,
                          "--block-ms",        "100",    NULL};
    struct sk_spawn_cmd c = {
        .argv = argv, .out = e->wlog, .err = e->wlog, .flags = SK_SPAWN_PDEATHSIG};
    char err[256];
    CHECK_MSG(sk_spawn_exec(&c, &e->worker, err, sizeof err) == 0, "worker: %s", err);
}

void aw_worker_stop(struct aw_env *e)
{
    sk_spawn_stop(e->worker, SIGTERM, 20000);
    e->worker = 0;
}

void aw_stop(struct aw_env *e)
{
    sale_log_passed();
    aw_worker_stop(e);
    CHECK_EQ(sk_th_serve_stop(&e->v, SIGTERM), 0);
    sk_redis_free(e->r);
    sk_store_close(e->st);
    sk_th_redis_stop(&e->rs, 1);
}

static int cmp_id(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

static void ids_unique(const struct sale *s)
{
    long n = atomic_load(&s->nids);
    char(*ids)[SK_STORE_ORDER_ID_MAX] = malloc((size_t)(n ? n : 1) * sizeof *ids);
    CHECK(ids);
    memcpy(ids, s->ids, (size_t)n * sizeof *ids);
    qsort(ids, (size_t)n, sizeof *ids, cmp_id);
    for (long i = 1; i < n; i++)
        CHECK_MSG(strcmp(ids[i - 1], ids[i]) != 0, "order id %s answered 200 twice", ids[i]);
    free(ids);
}

int64_t aw_sale_end(struct aw_env *e, const struct sale *s, uint64_t aid, int64_t stock,
                    int64_t limit)
{
    CHECK_EQ(atomic_load(&s->other), 0);
    sale_wait_drained(e->r, aid, 60000);
    int64_t sold = sale_check_invariants(e->st, e->r, e->rs.url, e->v.db, aid, stock, limit);
    CHECK_EQ(sold, stock);
    char missing[SK_STORE_ORDER_ID_MAX];
    long nmiss = sale_ids_missing(e->st, s, missing, sizeof missing);
    CHECK_MSG(nmiss == 0, "%ld orders answered 200 are not in the database (first %s)", nmiss,
              missing);
    ids_unique(s);
    return sold;
}
