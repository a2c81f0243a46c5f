/* backend_env.c - the shared order-pipeline test fixture. */
#include "support/backend_env.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/codes.h"
#include "core/log.h"
#include "engine/activity.h"
#include "engine/segment.h"
#include "engine/stock.h"
#include "orders/order_worker.h"
#include "support/fixtures.h"
#include "support/mysql_harness.h"
#include "support/pg_harness.h"
#include "support/serve_buy.h"

void sk_th_env_open(struct sk_th_env *e, const char *redis_url)
{
    sk_log_set_level(SK_LOG_WARN); /* in-process workers and sweepers: warnings only */
    snprintf(e->redis_url, sizeof e->redis_url, "%s", redis_url);
    char err[512];
    CHECK_MSG(sk_store_open(&e->st, e->spec, err, sizeof err) == 0, "open store %s: %s", e->spec,
              err);
    CHECK_MSG(sk_redis_new(&e->r, redis_url, 1000, 5000, err, sizeof err) == 0, "redis: %s", err);
    sk_th_buy_store(e->spec); /* a segmented activity's purchases: serve on this store */
}

void sk_th_env_init(struct sk_th_env *e, int kind, const char *file, const char *redis_url)
{
    memset(e, 0, sizeof *e);
    e->pg = kind != SK_TH_SQLITE;
    e->my = kind == SK_TH_MYSQL;
    snprintf(e->dir, sizeof e->dir, "%s", sk_th_tmpdir());
    if (e->my) {
        sk_th_my_fresh_db(e->spec, sizeof e->spec);
    } else if (e->pg) {
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

void sk_th_env_own_redis(struct sk_th_env *e, struct sk_th_redis *rs)
{
    sk_th_redis_start(rs, NULL);
    sk_redis_free(e->r);
    e->r = NULL;
    snprintf(e->redis_url, sizeof e->redis_url, "%s", rs->url);
    char err[512];
    CHECK_MSG(sk_redis_new(&e->r, rs->url, 1000, 5000, err, sizeof err) == 0, "redis: %s", err);
}

uint64_t sk_th_env_activity(struct sk_th_env *e, int64_t stock, int64_t limit, int64_t max_qty,
                            int64_t pay_timeout_s)
{
    return sk_th_env_activity_segs(e, stock, limit, max_qty, pay_timeout_s, 1, 1);
}

uint64_t sk_th_env_activity_segs(struct sk_th_env *e, int64_t stock, int64_t limit, int64_t max_qty,
                                 int64_t pay_timeout_s, int segments, int preheat)
{
    int64_t now = sk_wall_ms();
    struct sk_activity a;
    sk_activity_init(&a);
    a.id = sk_th_unique_id();
    snprintf(a.name, sizeof a.name, "%s %" PRIu64, segments > 1 ? "segmented" : "test activity",
             a.id);
    a.stock = stock;
    a.per_user_limit = limit;
    a.max_per_order = max_qty;
    a.start_ms = now - 60000;
    a.end_ms = now + 3600 * 1000;
    a.pay_timeout_s = pay_timeout_s;
    a.segments = segments;
    a.created_ms = now;
    sk_activity_apply_defaults(&a);
    CHECK_MSG(sk_store_activity_insert(e->st, &a) == 0, "insert: %s", sk_store_errstr(e->st));
    CHECK_EQ(sk_store_activity_set_state(e->st, a.id, "open"), 0);
    if (preheat) sk_th_env_preheat_open(e, a.id);
    return a.id;
}

void sk_th_env_preheat_open(struct sk_th_env *e, uint64_t aid)
{
    struct sk_activity a;
    CHECK_MSG(sk_store_activity_get(e->st, aid, &a) == 0, "get: %s", sk_store_errstr(e->st));
    struct sk_stock_def d;
    sk_activity_stock_def(&a, &d);
    CHECK_EQ(d.segments, a.segments);
    int rc;
    int64_t left;
    CHECK_EQ(sk_stock_preheat(e->r, &d, 0, &rc, &left), 0);
    CHECK_MSG(rc == SK_RC_PREHEATED, "preheat: %s", sk_rc_name(rc));
    CHECK_EQ(left, a.stock);
    CHECK_EQ(sk_stock_set_open(e->r, aid, 1, &rc), 0);
    CHECK_EQ(rc, SK_RC_OK);
    int s;
    CHECK_EQ(sk_seg_count(e->r, aid, &s), 0);
    CHECK_EQ(s, a.segments);
}

size_t sk_th_env_buy_users(struct sk_th_env *e, uint64_t aid, uint64_t first, size_t n,
                           int64_t max_qty, size_t batch, struct sk_th_bought *out)
{
    struct sk_purchase *p = calloc(batch, sizeof *p);
    struct sk_admission *res = calloc(batch, sizeof *res);
    CHECK(batch > 0 && p != NULL && res != NULL);
    size_t got = 0;
    for (size_t done = 0; done < n;) {
        size_t k = n - done < batch ? n - done : batch;
        for (size_t i = 0; i < k; i++) {
            uint64_t u = first + done + i;
            p[i] = (struct sk_purchase){.user_id = u,
                                        .quantity = 1 + (int64_t)(u % (uint64_t)max_qty)};
        }
        CHECK_EQ(sk_th_stock_buy(e->r, aid, NULL, p, k, res, NULL), 0);
        for (size_t i = 0; i < k; i++) {
            if (res[i].rc != SK_RC_OK) {
                CHECK_MSG(res[i].rc == SK_RC_SOLD_OUT || res[i].rc == SK_RC_INSUFFICIENT,
                          "user %" PRIu64 ": %s", p[i].user_id, sk_rc_name(res[i].rc));
                continue;
            }
            CHECK_EQ(res[i].quantity, p[i].quantity);
            snprintf(out[got].oid, sizeof out[got].oid, "%s", res[i].order_id);
            out[got].uid = p[i].user_id;
            out[got].qty = p[i].quantity;
            got++;
        }
        done += k;
    }
    free(p);
    free(res);
    return got;
}

void sk_th_env_worker_opts(const struct sk_th_env *e, struct sk_worker_opts *o,
                           const char *consumer)
{
    sk_worker_opts_init(o);
    o->redis_url = e->redis_url;
    o->db_spec = e->spec;
    o->consumer = consumer;
}

void sk_th_env_persist(struct sk_th_env *e, const char *consumer, int claim_idle_ms)
{
    struct sk_worker_opts o;
    sk_th_env_worker_opts(e, &o, consumer);
    o.once = 1;
    if (claim_idle_ms >= 0) o.claim_idle_ms = claim_idle_ms;
    sk_th_worker_run(&o);
}

void sk_th_env_run(int kind, const char *file, void (*fn)(struct sk_th_env *))
{
    struct sk_th_env e;
    sk_th_env_init(&e, kind, file, sk_th_redis_url());
    fn(&e);
    sk_th_env_done(&e);
}
