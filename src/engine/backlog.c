/* backlog.c - the order stream's backlog and its oldest entry (backlog.h). */
#include "engine/backlog.h"

#include <string.h>

#include "engine/stock_int.h"

int sk_backlog_read(sk_redis *r, const char *stream, const char *group, struct sk_backlog *out)
{
    memset(out, 0, sizeof *out);
    const char *keys[SK_K_BACKLOG_N] = {[SK_K_BACKLOG_ORDERS] = stream};
    const char *args[SK_A_BACKLOG_N] = {[SK_A_BACKLOG_GROUP] = group};
    int64_t v[4];
    int rc =
        sk_stock_eval_ints(r, SK_SCRIPT_BACKLOG, SK_K_BACKLOG_N, keys, SK_A_BACKLOG_N, args, v, 4);
    if (rc < 0) return rc;
    out->entries = v[0];
    out->pending = v[1];
    out->oldest_ms = v[2];
    out->now_ms = v[3];
    out->age_ms = v[2] > 0 && v[3] > v[2] ? v[3] - v[2] : 0;
    return 0;
}
