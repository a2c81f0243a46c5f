/* backend_env.c - the shared order-pipeline test fixture. */
#include "backend_env.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "activity.h"
#include "clock.h"
#include "codes.h"
#include "log.h"
#include "pg_harness.h"
#include "stock.h"

void sk_th_env_open(struct sk_th_env *e, const char *redis_url)
{
    sk_log_set_level(SK_LOG_WARN); /* in-process workers and sweepers: warnings only */
    snprintf(e->redis_url, sizeof e->redis_url, "%s", redis_url);
    char err[512];
    CHECK_MSG(sk_store_open(&e->st, e->spec, err, sizeof err) == 0, "open store %s: %s", e->spec,
              err);
    CHECK_MSG(sk_redis_new(&e->r, redis_url, 1000, 5000, err, sizeof err) == 0, "redis: %s", err);
}

void sk_th_env_init(struct sk_th_env *e, int pg, const char *file, const char *redis_url)
{
    memset(e, 0, sizeof *e);
    e->pg = pg;
    snprintf(e->dir, sizeof e->dir, "%s", sk_th_tmpdir());
    if (pg) {
        sk_th_pg_fresh_db(e->spec, sizeof e->spec);
    } else {
        snprintf(e->path, sizeof e->path, "%s/%s", e->dir, file);
        snprintf(e->spec, sizeof e->spec, "sqlite:%s", e->path);
    }
    sk_th_env_open(e, redis_url);
}

void sk_th_env_done(struct sk_th_env *e)
{
    sk_store_close(e->st);
    sk_redis_free(e->r);
    e->st = NULL;
    e->r = NULL;
}

uint64_t sk_th_env_activity(struct sk_th_env *e, int64_t stock, int64_t limit, int64_t max_qty,
                            int64_t pay_timeout_s)
{
    int64_t now = sk_wall_ms();
    struct sk_activity a;
    sk_activity_init(&a);
    a.id = sk_th_unique_id();
    snprintf(a.name, sizeof a.name, "test activity %" PRIu64, a.id);
    a.stock = stock;
    a.per_user_limit = limit;
    a.max_per_order = max_qty;
    a.start_ms = now - 60000;
    a.end_ms = now + 3600 * 1000;
    a.pay_timeout_s = pay_timeout_s;
    a.created_ms = now;
    sk_activity_apply_defaults(&a);
    CHECK_MSG(sk_store_activity_insert(e->st, &a) == 0, "insert: %s", sk_store_errstr(e->st));
    CHECK_EQ(sk_store_activity_set_state(e->st, a.id, "open"), 0);
    struct sk_stock_def d;
    sk_activity_stock_def(&a, &d);
    int rc;
    int64_t left;
    CHECK_EQ(sk_stock_preheat(e->r, &d, 0, &rc, &left), 0);
    CHECK_EQ(rc, SK_RC_PREHEATED);
    CHECK_EQ(sk_stock_set_open(e->r, a.id, 1, &rc), 0);
    CHECK_EQ(rc, SK_RC_OK);
    return a.id;
}
