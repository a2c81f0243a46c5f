/* activity_delete.c - deleting an activity (activity_delete.h). */
#include "orders/activity_delete.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "engine/backlog.h"
#include "engine/keys.h"
#include "engine/live_acts.h"
#include "engine/segment.h"
#include "engine/stock.h"
#include "orders/order_worker.h"

int sk_delete_decide(uint64_t id, const struct sk_delete_facts *f, int force, char *why, size_t cap)
{
    if (cap) why[0] = 0;
    if (f->live && f->open) {
        snprintf(why, cap, "activity %" PRIu64 " is open; close it first", id);
        return SK_ESTATE;
    }
    if (f->queued == 0 && f->unpaid == 0) return 0;
    char queued[24];
    if (f->queued < 0)
        snprintf(queued, sizeof queued, "more than 100");
    else
        snprintf(queued, sizeof queued, "%" PRId64, f->queued);
    if (!force) {
        snprintf(why, cap,
                 "activity %" PRIu64 " has orders not settled: %s order event(s) in Redis not yet "
                 "persisted, %" PRId64 " unpaid order(s); wait for the worker and the sweeper, or "
                 "force it (events not persisted are dropped, unpaid orders cancelled)",
                 id, f->queued ? queued : "0", f->unpaid);
        return SK_EBUSY;
    }
    snprintf(why, cap,
             "%s order event(s) not yet persisted were dropped (their buyers were answered 200: "
             "no order will follow); %" PRId64 " unpaid order(s) cancelled, they cannot be paid",
             f->queued ? queued : "0", f->unpaid);
    return 0;
}

int sk_delete_db_facts(sk_store *st, uint64_t id, struct sk_delete_facts *f)
{
    struct sk_activity a;
    int rc = sk_store_activity_get(st, id, &a);
    if (rc) return rc;
    struct sk_order_counts c;
    if ((rc = sk_store_orders_count(st, id, &c)) != 0) return rc;
    f->unpaid = c.orders[SK_ORDER_CREATED];
    return 0;
}

/* Cancels every created order of id, each marked released: its units go
 * with the Redis keys. */
static int cancel_unpaid(sk_store *st, uint64_t id, int64_t now, int64_t *cancelled)
{
    enum { PAGE = 500 };
    struct sk_order *page = malloc(PAGE * sizeof *page);
    if (!page) return SK_ENOMEM;
    char after[SK_STORE_ORDER_ID_MAX] = "";
    size_t n;
    int rc;
    do {
        if ((rc = sk_store_orders_list(st, id, after, PAGE, page, &n)) != 0) break;
        for (size_t i = 0; i < n && rc == 0; i++) {
            if (page[i].status != SK_ORDER_CREATED) continue;
            int prev;
            rc = sk_store_order_cancel(st, page[i].order_id, now, &prev);
            if (rc == SK_ESTATE) { /* paid meanwhile: it stays paid */
                rc = 0;
                continue;
            }
            if (rc == 0 && prev == SK_ORDER_CREATED) {
                ++*cancelled;
                rc = sk_store_order_mark_released(st, page[i].order_id, now);
            }
        }
        if (n) snprintf(after, sizeof after, "%s", page[n - 1].order_id);
    } while (rc == 0 && n == PAGE);
    free(page);
    return rc;
}

int sk_delete_db_prepare(sk_store *st, uint64_t id, int cancel, int64_t now_ms, int64_t *cancelled)
{
    *cancelled = 0;
    int rc = sk_store_activity_set_state(st, id, "created");
    if (rc == 0 && cancel) rc = cancel_unpaid(st, id, now_ms, cancelled);
    return rc;
}

int sk_delete_db_finish(sk_store *st, uint64_t id, int64_t now_ms, const char *detail)
{
    int rc = sk_store_activity_delete(st, id);
    if (rc == 0)
        rc = sk_store_audit_add(st, now_ms, id, "activity_deleted",
                                detail && detail[0] ? detail : "no order left unsettled");
    return rc;
}

/* Redis's facts: the switch, and each key set's backlog summed. *any:
 * Redis holds something of it (meta, stock or stream). */
static int redis_facts(sk_redis *r, uint64_t id, struct sk_delete_facts *f, int *any)
{
    struct sk_stock_state s;
    int rc = sk_stock_state(r, id, &s);
    if (rc) return rc;
    f->live = s.exists;
    f->open = s.exists && s.open;
    int segs;
    if ((rc = sk_seg_count(r, id, &segs)) != 0) return rc;
    f->queued = 0;
    for (int i = segs > 1 ? 0 : SK_SEG_NONE; i < (segs > 1 ? segs : 0); i++) {
        struct sk_keys k;
        sk_keys_seg(&k, id, i);
        struct sk_backlog b;
        if ((rc = sk_backlog_read(r, k.orders, SK_WORKER_GROUP, &b)) != 0) return rc;
        f->queued = f->queued < 0 || b.entries < 0 ? -1 : f->queued + b.entries;
    }
    *any = s.exists || f->queued != 0 || segs > 1;
    if (!*any) {
        struct sk_keys k;
        sk_keys_for(&k, id);
        redisReply *rep;
        if ((rc = sk_redis_cmd(r, &rep, "EXISTS %s %s %s", k.meta, k.stock, k.orders)) != 0)
            return rc;
        *any = rep->type == REDIS_REPLY_INTEGER && rep->integer > 0;
        freeReplyObject(rep);
    }
    return 0;
}

int sk_activity_delete(sk_store *st, sk_redis *r, uint64_t id, int force,
                       struct sk_delete_report *rep)
{
    memset(rep, 0, sizeof *rep);
    int any, rc = sk_delete_db_facts(st, id, &rep->f);
    if (rc == 0) rc = redis_facts(r, id, &rep->f, &any);
    if (rc) return rc;
    rep->refused = sk_delete_decide(id, &rep->f, force, rep->why, sizeof rep->why);
    if (rep->refused) return 0;
    int64_t now = sk_wall_ms();
    /* the row is "created" before the keys go: the order worker's
     * rollback guard would otherwise take the dropped keys of a preheated
     * activity for keys Redis lost, and rebuild them (docs/recovery.md) */
    if ((rc = sk_delete_db_prepare(st, id, force, now, &rep->cancelled)) != 0) return rc;
    if ((rc = sk_stock_drop(r, id)) != 0) return rc;
    return sk_delete_db_finish(st, id, now, rep->why);
}

int sk_activity_delete_live(sk_store *st, sk_redis *r, uint64_t id, int force,
                            struct sk_delete_report *rep)
{
    memset(rep, 0, sizeof *rep);
    struct sk_activity a;
    int held = sk_store_activity_get(st, id, &a);
    if (held && held != SK_ENOTFOUND) return held;
    char mine[SK_STORE_IDENTITY_MAX], owner[SK_STORE_IDENTITY_MAX];
    int rc = sk_store_identity(st, mine, sizeof mine);
    if (rc == 0) rc = sk_live_act_owner(r, id, owner, sizeof owner);
    if (rc) return rc;
    if (held == 0 && !sk_live_foreign(owner, mine))
        return sk_errf(rep->why, sizeof rep->why, SK_EEXIST,
                       "activity %" PRIu64 " is this database's (store %s): delete it without "
                       "--redis-only",
                       id, mine);
    int any;
    if ((rc = redis_facts(r, id, &rep->f, &any)) != 0) return rc;
    if (!any) return SK_ENOTFOUND;
    /* this database cannot close a switch it holds no definition of:
     * forced, an open one goes too */
    if (rep->f.open && !force) {
        snprintf(rep->why, sizeof rep->why,
                 "activity %" PRIu64 " is open: close it with the database that preheated it, "
                 "or --force",
                 id);
        rep->refused = SK_ESTATE;
        return 0;
    }
    struct sk_delete_facts f = rep->f;
    f.open = 0;
    rep->refused = sk_delete_decide(id, &f, force, rep->why, sizeof rep->why);
    if (rep->refused) return 0;
    if ((rc = sk_stock_drop(r, id)) != 0) return rc;
    char detail[SK_STORE_AUDIT_DETAIL_MAX];
    snprintf(detail, sizeof detail, "live state removed from Redis (preheated from store %s)%s%s",
             owner[0] ? owner : "unknown", rep->why[0] ? ": " : "", rep->why);
    sk_store_audit_add(st, sk_wall_ms(), id, "activity_live_deleted", detail);
    return 0;
}
