/* order_cancel.c - the one cancel path: DB first, then the Redis release,
 * then the DB mark (order_cancel.h says why in that order). */
#include "orders/order_cancel.h"

#include <string.h>

#include "core/codes.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/stock.h"

static void cancel_result_init(struct sk_cancel_result *res)
{
    memset(res, 0, sizeof *res);
    res->prev_status = -1;
    res->status = -1;
    res->release_rc = -1;
}

int sk_order_cancel_db(sk_store *st, const char *order_id, uint64_t user_id, int64_t now_ms,
                       struct sk_cancel_result *res)
{
    cancel_result_init(res);
    if (!order_id || !*order_id || strlen(order_id) >= SK_STORE_ORDER_ID_MAX) return SK_EINVAL;
    int rc = sk_store_order_get(st, order_id, &res->order);
    if (rc) return rc;
    /* Another buyer's order answers as absent: its existence is not theirs
     * to learn. */
    if (user_id && res->order.user_id != user_id) return SK_ENOTFOUND;
    int prev = -1;
    rc = sk_store_order_cancel(st, order_id, now_ms, &prev);
    res->prev_status = prev;
    if (rc == SK_ESTATE) {
        res->status = SK_ORDER_PAID;
        res->order.status = SK_ORDER_PAID;
        return rc;
    }
    if (rc) return rc;
    res->status = SK_ORDER_CANCELLED;
    /* Only the call that moved it from created owes the release: the DB's
     * conditional update picked exactly one such call. */
    res->cancelled = res->must_release = prev == SK_ORDER_CREATED;
    if (res->cancelled) res->order.cancelled_ms = now_ms;
    res->order.status = SK_ORDER_CANCELLED;
    return 0;
}

int sk_order_release_done(sk_store *st, struct sk_cancel_result *res, int release_rc, int64_t given,
                          int64_t now_ms)
{
    res->release_rc = release_rc;
    if (release_rc != SK_RC_RELEASED && release_rc != SK_RC_ALREADY_RELEASED) {
        res->release_pending = 1; /* stays owed: the sweeper retries it */
        return 0;
    }
    res->released = 1;
    res->release_pending = 0;
    res->units_given = release_rc == SK_RC_RELEASED ? given : 0;
    /* A failed mark only costs a later pass an ALREADY_RELEASED answer. */
    return sk_store_order_mark_released(st, res->order.order_id, now_ms);
}

int sk_order_cancel(sk_store *st, sk_redis *r, const char *order_id, uint64_t user_id,
                    int64_t now_ms, struct sk_cancel_result *res)
{
    int rc = sk_order_cancel_db(st, order_id, user_id, now_ms, res);
    if (rc || !res->must_release) return rc;
    const struct sk_order *o = &res->order;
    int rrc = -1;
    int64_t given = 0;
    rc = sk_stock_release(r, o->activity_id, o->order_id, o->user_id, o->quantity, &rrc, &given);
    if (rc < 0) {
        /* The cancellation stands (the DB decided); the units come back on
         * the sweeper's next pass. */
        res->release_pending = 1;
        sk_log(SK_LOG_WARN, "cancel %s: release owed (Redis: %s); the sweeper retries it",
               o->order_id, r->errstr);
        return 0;
    }
    if (rrc != SK_RC_RELEASED && rrc != SK_RC_ALREADY_RELEASED)
        sk_log(SK_LOG_WARN, "cancel %s: Redis refused the release (%s); run reconcile", o->order_id,
               sk_rc_name(rrc));
    if (sk_order_release_done(st, res, rrc, given, now_ms) != 0)
        sk_log(SK_LOG_WARN, "cancel %s: released, but not marked in the DB: %s", o->order_id,
               sk_store_errstr(st));
    return 0;
}
