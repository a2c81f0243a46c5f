/* store.c - picks the store backend from the spec and dispatches every
 * store.h call through the backend's table (store_int.h).
 *
 * "sqlite:PATH" -> store_sqlite.c, "postgres://..." or "postgresql://..."
 * -> store_pg.c. The spec is echoed in messages only when it cannot hold a
 * password (a postgres URL may). */
#include "store/store_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"

static int is_pg_spec(const char *spec)
{
    return !strncmp(spec, "postgres://", 11) || !strncmp(spec, "postgresql://", 13);
}

int sk_store_open(sk_store **out, const char *spec, char *err, size_t cap)
{
    *out = NULL;
    if (err && cap) err[0] = 0;
    int rc = 0;
    if (!spec || !*spec) {
        rc = SK_EINVAL;
        if (err) snprintf(err, cap, "empty database spec (expected sqlite:PATH or postgres://...)");
    } else if (is_pg_spec(spec)) {
        if (strlen(spec) > 4096) {
            rc = SK_EINVAL;
            if (err) snprintf(err, cap, "postgres URL too long");
        }
    } else if (strncmp(spec, "sqlite:", 7) != 0) {
        rc = SK_EINVAL;
        if (err)
            snprintf(err, cap,
                     "unknown database spec '%.200s' (expected sqlite:PATH or postgres://...)",
                     spec);
    } else if (!spec[7]) {
        rc = SK_EINVAL;
        if (err) snprintf(err, cap, "database spec 'sqlite:' has no path");
    } else if (strlen(spec + 7) >= sizeof((struct sk_store *)0)->path) {
        rc = SK_EINVAL;
        if (err) snprintf(err, cap, "database path too long");
    }
    if (rc) return rc;
    sk_store *st = calloc(1, sizeof *st);
    if (!st) {
        if (err) snprintf(err, cap, "out of memory");
        return SK_ENOMEM;
    }
    rc = is_pg_spec(spec) ? sk_store_pg_open(st, spec) : sk_store_sqlite_open(st, spec + 7);
    if (rc) {
        if (err) snprintf(err, cap, "%s", st->errstr);
        sk_store_close(st);
        return rc;
    }
    *out = st;
    return 0;
}

void sk_store_close(sk_store *st)
{
    if (!st) return;
    if (st->ops && st->ops->close) st->ops->close(st);
    free(st);
}

const char *sk_store_errstr(const sk_store *st)
{
    return st ? st->errstr : "no store";
}

/* A backend without the function: a clear refusal, not a crash. */
static int unsupported(sk_store *st, const char *what)
{
    snprintf(st->errstr, sizeof st->errstr, "%s store: %s is not supported", st->ops->name, what);
    return SK_EINVAL;
}

#define DISPATCH(member, ...)                                                                      \
    (st->ops->member ? st->ops->member(st, __VA_ARGS__) : unsupported(st, #member))

int sk_store_schema_version(sk_store *st, int *version)
{
    return DISPATCH(schema_version, version);
}

int sk_store_activity_insert(sk_store *st, const struct sk_activity *a)
{
    return DISPATCH(activity_insert, a);
}

int sk_store_activity_get(sk_store *st, uint64_t id, struct sk_activity *out)
{
    return DISPATCH(activity_get, id, out);
}

int sk_store_activity_list(sk_store *st, struct sk_activity **out, size_t *n)
{
    return DISPATCH(activity_list, out, n);
}

int sk_store_activity_set_state(sk_store *st, uint64_t id, const char *state)
{
    return DISPATCH(activity_set_state, id, state);
}

int sk_store_activity_delete(sk_store *st, uint64_t id)
{
    return DISPATCH(activity_delete, id);
}

int sk_store_orders_persist(sk_store *st, const struct sk_order *orders, size_t n,
                            struct sk_persist_result *res)
{
    return DISPATCH(orders_persist, orders, n, res);
}

int sk_store_order_get(sk_store *st, const char *order_id, struct sk_order *out)
{
    return DISPATCH(order_get, order_id, out);
}

int sk_store_order_pay(sk_store *st, const char *order_id, int64_t now_ms, int *status_out)
{
    return DISPATCH(order_pay, order_id, now_ms, status_out);
}

int sk_store_order_cancel(sk_store *st, const char *order_id, int64_t now_ms, int *prev_status)
{
    return DISPATCH(order_cancel, order_id, now_ms, prev_status);
}

int sk_store_orders_expired(sk_store *st, int64_t now_ms, size_t limit, struct sk_order *out,
                            size_t *n)
{
    return DISPATCH(orders_expired, now_ms, limit, out, n);
}

int sk_store_orders_list(sk_store *st, uint64_t activity_id, const char *after, size_t limit,
                         struct sk_order *out, size_t *n)
{
    return DISPATCH(orders_list, activity_id, after, limit, out, n);
}

int sk_store_orders_count(sk_store *st, uint64_t activity_id, struct sk_order_counts *out)
{
    return DISPATCH(orders_count, activity_id, out);
}

int sk_store_audit_add(sk_store *st, int64_t at_ms, uint64_t activity_id, const char *kind,
                       const char *detail)
{
    return DISPATCH(audit_add, at_ms, activity_id, kind, detail);
}

int sk_store_audit_list(sk_store *st, uint64_t activity_id, struct sk_audit **out, size_t *n)
{
    return DISPATCH(audit_list, activity_id, out, n);
}

int sk_store_activity_set_db_stock(sk_store *st, uint64_t id, int64_t stock)
{
    return DISPATCH(activity_set_db_stock, id, stock);
}

int sk_store_activity_ids(sk_store *st, uint64_t **out, size_t *n)
{
    return DISPATCH(activity_ids, out, n);
}

int sk_store_order_mark_released(sk_store *st, const char *order_id, int64_t now_ms)
{
    return DISPATCH(order_mark_released, order_id, now_ms);
}

int sk_store_orders_unreleased(sk_store *st, const char *after, size_t limit, struct sk_order *out,
                               size_t *n)
{
    return DISPATCH(orders_unreleased, after, limit, out, n);
}

int sk_store_db_stock_check(sk_store *st, uint64_t id, int64_t *stock, int64_t *expected)
{
    return DISPATCH(db_stock_check, id, stock, expected);
}

int sk_store_db_stock_repair(sk_store *st, uint64_t id, int64_t now_ms, int64_t *before,
                             int64_t *after)
{
    return DISPATCH(db_stock_repair, id, now_ms, before, after);
}

int sk_store_order_restore(sk_store *st, const struct sk_order *o, int64_t now_ms,
                           const char *audit_detail)
{
    return DISPATCH(order_restore, o, now_ms, audit_detail);
}

void sk_store_log_stock_failures(size_t n, const struct sk_stock_failure *ff)
{
    if (ff->has_row)
        sk_log(SK_LOG_WARN,
               "store: %zu order(s) persisted without their DB stock (conditional update "
               "failed); first: order %s activity %" PRIu64 " qty %" PRId64 " > DB stock %" PRId64
               "; run reconcile",
               n, ff->order_id, ff->aid, ff->qty, ff->db_stock);
    else
        sk_log(SK_LOG_WARN,
               "store: %zu order(s) persisted without their DB stock; first: order %s: activity "
               "%" PRIu64 " is not in the database; run reconcile",
               n, ff->order_id, ff->aid);
}
