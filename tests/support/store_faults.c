/* store_faults.c - the outages of store_faults.h, one body for each. */
#include "support/store_faults.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "support/harness.h"

void sk_th_order(struct sk_order *o, uint64_t aid, int64_t ms, int seq, uint64_t uid, int64_t qty)
{
    memset(o, 0, sizeof *o);
    snprintf(o->stream_id, sizeof o->stream_id, "%" PRId64 "-%d", ms, seq);
    snprintf(o->order_id, sizeof o->order_id, "%" PRIu64 "-%s", aid, o->stream_id);
    o->activity_id = aid;
    o->user_id = uid;
    o->quantity = qty;
    o->created_ms = ms;
}

struct sk_persist_result sk_th_persist_ok(sk_store *st, const struct sk_order *o, size_t n)
{
    struct sk_persist_result r;
    int rc = sk_store_orders_persist(st, o, n, &r);
    CHECK_MSG(rc == 0, "persist %zu: %d %s", n, rc, sk_store_errstr(st));
    return r;
}

int64_t sk_th_db_stock(sk_store *st, uint64_t id)
{
    struct sk_activity a;
    CHECK_MSG(sk_store_activity_get(st, id, &a) == 0, "get: %s", sk_store_errstr(st));
    return a.stock_db;
}

void sk_th_store_fault_stopped(sk_store *st, const struct sk_th_db_server *d, int hard)
{
    struct sk_order o[10];
    for (int i = 0; i < 10; i++)
        sk_th_order(&o[i], 1, 7000, i, (uint64_t)i + 1, 1);
    sk_th_persist_ok(st, o, 5);
    d->halt(d->srv, hard);
    struct sk_activity a;
    for (int round = 0; round < 3; round++) {
        int64_t t0 = sk_mono_ms();
        CHECK_EQ(sk_store_activity_get(st, 1, &a), SK_EDB);
        CHECK_EQ(sk_store_orders_persist(st, o, 10, NULL), SK_EDB);
        int64_t took = sk_mono_ms() - t0;
        CHECK_MSG(took < 3000, "two failing calls took %lld ms", (long long)took);
        CHECK_MSG(strstr(sk_store_errstr(st), d->name) != NULL, "%s", sk_store_errstr(st));
    }
    /* The caller's mistakes are still told apart from the outage. */
    struct sk_order bad = o[0];
    bad.quantity = 0;
    CHECK_EQ(sk_store_orders_persist(st, &bad, 1, NULL), SK_EINVAL);
    CHECK_EQ(sk_store_activity_set_state(st, 1, "running"), SK_EINVAL);
    d->restart(d->srv);
    /* The same handle: the next call reconnects. The committed batch
     * survived (a kill too: the server's log); nothing of the failed ones
     * was stored; the batch now goes in once. */
    CHECK_EQ(sk_store_activity_get(st, 1, &a), 0);
    CHECK_EQ(a.stock_db, 995);
    struct sk_persist_result r = sk_th_persist_ok(st, o, 10);
    CHECK_EQ(r.inserted, 5);
    CHECK_EQ(r.duplicates, 5);
    CHECK_EQ(sk_th_db_stock(st, 1), 990);
}

void sk_th_store_fault_frozen(sk_store *st, const struct sk_th_db_server *d)
{
    struct sk_order o[4];
    for (int i = 0; i < 4; i++)
        sk_th_order(&o[i], 1, 8000, i, (uint64_t)i + 1, 2);
    /* SIGSTOP: the kernel still accepts bytes, nobody answers; only the
     * client-side bound ends the wait. */
    d->freeze(d->srv, 1);
    int64_t t0 = sk_mono_ms();
    CHECK_EQ(sk_store_orders_persist(st, o, 4, NULL), SK_EDB);
    int64_t took = sk_mono_ms() - t0;
    CHECK_MSG(took >= 1500 && took < 4000, "frozen call took %lld ms", (long long)took);
    CHECK_MSG(strstr(sk_store_errstr(st), "no answer") != NULL, "%s", sk_store_errstr(st));
    /* Still frozen: the reconnect attempt is bounded by connect_timeout. */
    struct sk_activity a;
    t0 = sk_mono_ms();
    CHECK_EQ(sk_store_activity_get(st, 1, &a), SK_EDB);
    took = sk_mono_ms() - t0;
    CHECK_MSG(took < 5000, "reconnect to a frozen server took %lld ms", (long long)took);
    d->freeze(d->srv, 0);
    /* The abandoned batch may or may not have committed on the server
     * (it was frozen mid-way): re-sending it is what the worker does, and
     * it lands exactly once either way. */
    CHECK_EQ(sk_store_activity_get(st, 1, &a), 0);
    struct sk_persist_result r = sk_th_persist_ok(st, o, 4);
    CHECK_EQ(r.inserted + r.duplicates, 4);
    struct sk_order_counts c;
    CHECK_EQ(sk_store_orders_count(st, 1, &c), 0);
    CHECK_EQ(c.orders[SK_ORDER_CREATED], 4);
    CHECK_EQ(sk_th_db_stock(st, 1), 1000 - 8);
}
