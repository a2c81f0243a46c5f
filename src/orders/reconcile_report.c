/* reconcile_report.c - the reconcile report: drift and repair lines as the
 * check and the repair find them, and the report printed as text or JSON
 * (reconcile.h). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/vec.h"
#include "engine/segment.h"
#include "orders/reconcile.h"
#include "orders/reconcile_int.h"

static const char *const drift_names[SK_DRIFT_NKINDS] = {
    [SK_DRIFT_REDIS_MISSING] = "redis_missing",
    [SK_DRIFT_DB_MISSING] = "db_missing",
    [SK_DRIFT_STORE] = "store",
    [SK_DRIFT_INITIAL_MISMATCH] = "initial_mismatch",
    [SK_DRIFT_REDIS_INVARIANT] = "redis_invariant",
    [SK_DRIFT_IN_TRANSIT] = "in_transit",
    [SK_DRIFT_USER_COUNT] = "user_count",
    [SK_DRIFT_LOST_ORDER] = "lost_order",
    [SK_DRIFT_STALE] = "stale",
    [SK_DRIFT_NOT_IN_LEDGER] = "not_in_ledger",
    [SK_DRIFT_ORDER_MISMATCH] = "order_mismatch",
    [SK_DRIFT_DB_STOCK] = "db_stock",
    [SK_DRIFT_CANCELLED_NOT_RELEASED] = "cancelled_not_released",
    [SK_DRIFT_RELEASED_NOT_CANCELLED] = "released_not_cancelled",
    [SK_DRIFT_PAID_RELEASED] = "paid_released",
    [SK_DRIFT_FENCED] = "fenced",
    [SK_DRIFT_OVERSOLD] = "oversold",
    [SK_DRIFT_ORDER_CONFLICT] = "order_conflict",
};

const char *sk_drift_name(int kind)
{
    return kind >= 0 && kind < SK_DRIFT_NKINDS ? drift_names[kind] : "?";
}

void sk_reconcile_report_free(struct sk_reconcile_report *rep)
{
    if (!rep) return;
    free(rep->drift);
    free(rep->repairs);
    free(rep->seg);
    rep->drift = NULL;
    rep->repairs = NULL;
    rep->seg = NULL;
    rep->ndrift = rep->drift_cap = rep->nrepairs = rep->repairs_cap = 0;
}

/* ---- Report building ----------------------------------------------------- */

int sk_reconcile_add_drift(struct sk_reconcile_report *rep, int seg, int kind,
                           const struct sk_order *o, const char *fmt, ...)
{
    if (SK_VEC_RESERVE(rep->drift, rep->drift_cap, rep->ndrift + 1, 16)) return SK_ENOMEM;
    struct sk_drift *d = &rep->drift[rep->ndrift++];
    memset(d, 0, sizeof *d);
    d->kind = kind;
    d->segment = seg >= 0 ? seg : SK_SEG_NONE;
    if (o) d->order = *o;
    int at = seg >= 0 ? snprintf(d->text, sizeof d->text, "segment %d: ", seg) : 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->text + at, sizeof d->text - (size_t)at, fmt, ap);
    va_end(ap);
    rep->found[kind]++;
    rep->total++;
    return 0;
}

void sk_reconcile_add_repair(struct sk_reconcile_report *rep, int seg, int kind, int ok,
                             const char *fmt, ...)
{
    if (!ok) rep->repair_failures++;
    /* out of memory: the change itself is done and audited; only the line is lost */
    if (SK_VEC_RESERVE(rep->repairs, rep->repairs_cap, rep->nrepairs + 1, 8)) return;
    struct sk_repair *x = &rep->repairs[rep->nrepairs++];
    x->kind = kind;
    x->ok = ok;
    x->segment = seg >= 0 ? seg : SK_SEG_NONE;
    int at = seg >= 0 ? snprintf(x->text, sizeof x->text, "segment %d: ", seg) : 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->text + at, sizeof x->text - (size_t)at, fmt, ap);
    va_end(ap);
}

/* ---- Output ------------------------------------------------------------------ */

/* One line of Redis figures: the activity's (seg < 0) or one segment's. */
static void print_redis(FILE *f, uint64_t id, int seg, const struct sk_reconcile_redis *rr,
                        const struct sk_reconcile_report *rep)
{
    char where[32] = "";
    if (seg >= 0) snprintf(where, sizeof where, "segment %d: ", seg);
    if (!rr->present) {
        fprintf(f, "activity %" PRIu64 ": %sredis: no live state\n", id, where);
        return;
    }
    char und[24], ini[80];
    if (rr->undelivered >= 0)
        snprintf(und, sizeof und, "%" PRId64, rr->undelivered);
    else
        snprintf(und, sizeof und, "?");
    if (seg >= 0)
        snprintf(ini, sizeof ini, "%" PRId64 " + received %" PRId64 " - lent %" PRId64, rr->initial,
                 rr->xin, rr->xout);
    else
        snprintf(ini, sizeof ini, "%" PRId64, rr->initial);
    fprintf(f,
            "activity %" PRIu64 ": %sredis: initial %s, remaining %" PRId64 ", held %" PRId64
            " by %" PRId64 " buyer(s); ledger %" PRId64 " order(s) (%" PRId64
            " units), released %" PRId64 " (%" PRId64 " units); backlog %" PRId64
            " (pending %" PRId64 ", undelivered %s, %" PRId64 " not yet in the DB); dlq %" PRId64,
            id, where, ini, rr->remaining, rr->held, rr->buyers, rr->admitted_orders,
            rr->admitted_units, rr->released_orders, rr->released_units, rr->backlog, rr->pending,
            und, rr->backlog_orders, rr->dlq);
    if (seg < 0 && rep->segments > 1) {
        const struct sk_reconcile_transit *t = &rep->transit;
        fprintf(f,
                "; %d segments, transfers: lent %" PRId64 ", received %" PRId64
                ", in transit %" PRId64 " unit(s) in %" PRId64 " transfer(s) (%" PRId64
                " older than the grace)",
                rep->segments, t->lent, t->received, t->units, t->transfers, t->stale);
    }
    fputc('\n', f);
}

void sk_reconcile_print(FILE *f, const struct sk_reconcile_report *rep, size_t max_lines)
{
    uint64_t id = rep->activity_id;
    const struct sk_reconcile_redis *rr = &rep->redis;
    const struct sk_reconcile_db *db = &rep->db;
    print_redis(f, id, SK_SEG_NONE, rr, rep);
    for (int s = 0; rep->seg && rep->segments > 1 && s < rep->segments; s++) {
        if ((size_t)s < max_lines) {
            print_redis(f, id, s, &rep->seg[s], rep);
        } else {
            fprintf(f, "activity %" PRIu64 ": ... and %d more segment(s)\n", id, rep->segments - s);
            break;
        }
    }
    if (db->present) {
        const struct sk_order_counts *k = &db->counts;
        fprintf(f,
                "activity %" PRIu64 ": db: state %s, initial %" PRId64 ", stock %" PRId64
                " (expected %" PRId64 "); orders created %" PRId64 " (%" PRId64
                " units), paid %" PRId64 " (%" PRId64 "), cancelled %" PRId64 " (%" PRId64
                "); failed stock updates %" PRId64 "\n",
                id, db->state, db->initial, db->stock, db->stock_expected,
                k->orders[SK_ORDER_CREATED], k->units[SK_ORDER_CREATED], k->orders[SK_ORDER_PAID],
                k->units[SK_ORDER_PAID], k->orders[SK_ORDER_CANCELLED],
                k->units[SK_ORDER_CANCELLED], k->stock_failures);
    } else {
        fprintf(f, "activity %" PRIu64 ": db: no activity row\n", id);
    }
    for (int kind = 0; kind < SK_DRIFT_NKINDS; kind++) {
        size_t shown = 0;
        for (size_t i = 0; i < rep->ndrift; i++) {
            if (rep->drift[i].kind != kind) continue;
            if (shown++ < max_lines)
                fprintf(f, "activity %" PRIu64 ": DRIFT %s: %s\n", id, sk_drift_name(kind),
                        rep->drift[i].text);
        }
        if (shown > max_lines)
            fprintf(f, "activity %" PRIu64 ": DRIFT %s: ... and %zu more\n", id,
                    sk_drift_name(kind), shown - max_lines);
    }
    for (size_t i = 0; i < rep->nrepairs; i++)
        fprintf(f, "activity %" PRIu64 ": %s %s: %s\n", id,
                rep->repairs[i].ok ? "REPAIRED" : "NOT REPAIRED",
                sk_drift_name(rep->repairs[i].kind), rep->repairs[i].text);
    if (rep->total == 0)
        fprintf(f, "activity %" PRIu64 ": consistent\n", id);
    else if (!rep->repair)
        fprintf(f, "activity %" PRIu64 ": %zu drift(s) found\n", id, rep->total);
    else
        fprintf(f, "activity %" PRIu64 ": %zu drift(s) found, %zu remain after repair%s\n", id,
                rep->total, rep->remaining_total, rep->consistent ? ": consistent" : "");
}

static json_t *redis_json(const struct sk_reconcile_redis *rr)
{
    return json_pack(
        "{s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:b, s:I, s:I, s:I, s:I, "
        "s:I, s:s}",
        "present", rr->present, "initial", (json_int_t)rr->initial, "remaining",
        (json_int_t)rr->remaining, "xin", (json_int_t)rr->xin, "xout", (json_int_t)rr->xout, "held",
        (json_int_t)rr->held, "buyers", (json_int_t)rr->buyers, "admitted_orders",
        (json_int_t)rr->admitted_orders, "admitted_units", (json_int_t)rr->admitted_units,
        "released_orders", (json_int_t)rr->released_orders, "released_units",
        (json_int_t)rr->released_units, "released_meta", (json_int_t)rr->released_meta, "group",
        rr->group, "backlog", (json_int_t)rr->backlog, "pending", (json_int_t)rr->pending,
        "undelivered", (json_int_t)rr->undelivered, "backlog_orders",
        (json_int_t)rr->backlog_orders, "dlq", (json_int_t)rr->dlq, "last_delivered",
        rr->last_delivered);
}

json_t *sk_reconcile_json(const struct sk_reconcile_report *rep, size_t max_lines)
{
    const struct sk_reconcile_db *db = &rep->db;
    const struct sk_order_counts *k = &db->counts;
    json_t *o = json_pack(
        "{s:I, s:b, s:b, s:I, s:o, s:i, "
        "s:{s:b, s:s, s:I, s:I, s:I, s:{s:I, s:I, s:I}, s:{s:I, s:I, s:I}, s:I, s:I, s:I}}",
        "activity_id", (json_int_t)rep->activity_id, "consistent", rep->consistent, "repair",
        rep->repair, "drift_total", (json_int_t)rep->total, "redis", redis_json(&rep->redis),
        "segments", rep->segments, "db", "present", db->present, "state", db->state, "initial",
        (json_int_t)db->initial, "stock", (json_int_t)db->stock, "stock_expected",
        (json_int_t)db->stock_expected, "orders", "created",
        (json_int_t)k->orders[SK_ORDER_CREATED], "paid", (json_int_t)k->orders[SK_ORDER_PAID],
        "cancelled", (json_int_t)k->orders[SK_ORDER_CANCELLED], "units", "created",
        (json_int_t)k->units[SK_ORDER_CREATED], "paid", (json_int_t)k->units[SK_ORDER_PAID],
        "cancelled", (json_int_t)k->units[SK_ORDER_CANCELLED], "stock_failures",
        (json_int_t)k->stock_failures, "stock_failure_units", (json_int_t)k->stock_failure_units,
        "owed_recent", (json_int_t)db->owed_recent);
    if (!o) return NULL;
    json_object_set_new(o, "drift_event", json_boolean(rep->event == 1));
    const struct sk_reconcile_owner *ow = &rep->owner;
    json_object_set_new(o, "store",
                        json_pack("{s:s, s:s?, s:s?, s:I}", "this", ow->store_id, "redis",
                                  ow->redis[0] ? ow->redis : NULL, "refused",
                                  ow->refused[0] ? ow->refused : NULL, "refused_ms",
                                  (json_int_t)ow->refused_ms));
    if (rep->segments > 1 && rep->seg) {
        const struct sk_reconcile_transit *t = &rep->transit;
        json_t *segs = json_array();
        json_object_set_new(o, "segment_figures", segs);
        for (int s = 0; s < rep->segments; s++) {
            json_t *e = redis_json(&rep->seg[s]);
            if (!e) continue;
            json_object_set_new(e, "segment", json_integer(s));
            json_array_append_new(segs, e);
        }
        json_object_set_new(o, "transit",
                            json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "lent", (json_int_t)t->lent,
                                      "received", (json_int_t)t->received, "units",
                                      (json_int_t)t->units, "transfers", (json_int_t)t->transfers,
                                      "stale", (json_int_t)t->stale, "stale_units",
                                      (json_int_t)t->stale_units));
        if (rep->repair) {
            json_object_set_new(o, "settled", json_boolean(rep->settled));
            json_object_set_new(o, "settled_units", json_integer((json_int_t)rep->settled_units));
        }
    }
    json_t *counts = json_object(), *drift = json_array(), *repairs = json_array();
    json_t *remaining = rep->repair ? json_object() : NULL;
    json_object_set_new(o, "drift_counts", counts);
    json_object_set_new(o, "drift", drift);
    json_object_set_new(o, "repairs", repairs);
    if (remaining) {
        json_object_set_new(o, "remaining", remaining);
        json_object_set_new(o, "remaining_total", json_integer((json_int_t)rep->remaining_total));
        json_object_set_new(o, "repair_failures", json_integer((json_int_t)rep->repair_failures));
    }
    for (int kind = 0; kind < SK_DRIFT_NKINDS; kind++) {
        if (rep->found[kind])
            json_object_set_new(counts, sk_drift_name(kind),
                                json_integer((json_int_t)rep->found[kind]));
        if (remaining && rep->remaining[kind])
            json_object_set_new(remaining, sk_drift_name(kind),
                                json_integer((json_int_t)rep->remaining[kind]));
        size_t shown = 0;
        for (size_t i = 0; i < rep->ndrift; i++) {
            const struct sk_drift *d = &rep->drift[i];
            if (d->kind != kind || shown++ >= max_lines) continue;
            json_t *e = json_pack("{s:s, s:s}", "kind", sk_drift_name(kind), "message", d->text);
            if (e && d->segment >= 0) json_object_set_new(e, "segment", json_integer(d->segment));
            if (e && d->order.order_id[0])
                json_object_set_new(e, "order_id", json_string(d->order.order_id));
            if (e && d->order.user_id)
                json_object_set_new(e, "user_id", json_integer((json_int_t)d->order.user_id));
            if (e) json_array_append_new(drift, e);
        }
    }
    for (size_t i = 0; i < rep->nrepairs; i++) {
        const struct sk_repair *x = &rep->repairs[i];
        json_t *e = json_pack("{s:s, s:b, s:s}", "kind", sk_drift_name(x->kind), "ok", x->ok,
                              "message", x->text);
        if (e && x->segment >= 0) json_object_set_new(e, "segment", json_integer(x->segment));
        if (e) json_array_append_new(repairs, e);
    }
    return o;
}
