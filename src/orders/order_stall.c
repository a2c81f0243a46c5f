/* order_stall.c - the order worker's word when it makes no progress
 * (order_worker_int.h): a worker that acknowledged nothing for
 * stall_warn_ms while entries wait says so, with the backlog and its last
 * error, again every stall_warn_ms. */
#include "core/log.h"
#include "engine/backlog.h"
#include "orders/order_worker_int.h"

/* No entry acknowledged for stall_warn_ms: asks Redis what waits on the
 * followed streams; a warning (again every stall_warn_ms) when something
 * does or Redis cannot say, and the clock starts again when nothing waits
 * (an idle worker is not a stalled one). */
void sk_worker_stall_check(sk_worker *w, int64_t now)
{
    uint64_t acked = atomic_load(&w->c.acked);
    if (!w->stall_since_ms || acked != w->stall_acked) {
        w->stall_acked = acked;
        w->stall_since_ms = now;
        w->stall_next_ms = now + w->o.stall_warn_ms;
        return;
    }
    if (!w->o.stall_warn_ms || now < w->stall_next_ms || !w->ns) return;
    w->stall_next_ms = now + w->o.stall_warn_ms;
    int64_t waiting = 0, oldest = 0;
    int unknown = 0;
    for (size_t i = 0; i < w->ns && !unknown; i++) {
        struct sk_backlog b;
        if (sk_backlog_read(w->r, w->s[i].k.orders, SK_WORKER_GROUP, &b) < 0) {
            unknown = 1;
        } else {
            waiting += b.entries > 0 ? b.entries : 0;
            unknown = b.entries < 0;
            if (b.age_ms > oldest) oldest = b.age_ms;
        }
    }
    if (!unknown && waiting == 0) {
        w->stall_since_ms = now; /* idle */
        return;
    }
    if (unknown)
        sk_log(SK_LOG_WARN,
               "worker: no order acknowledged for %lld s, and Redis cannot say what waits (%s; "
               "last error: %s)",
               (long long)((now - w->stall_since_ms) / 1000), w->r->errstr,
               w->errstr[0] ? w->errstr : "none");
    else
        sk_log(SK_LOG_WARN,
               "worker: no order acknowledged for %lld s while %lld wait (the oldest for %lld s); "
               "last error: %s",
               (long long)((now - w->stall_since_ms) / 1000), (long long)waiting,
               (long long)(oldest / 1000), w->errstr[0] ? w->errstr : "none");
}
