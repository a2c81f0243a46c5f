/* load_verify.c - the checks of a load run (load.h): statuses, transport
 * errors, unique order ids, the per-user limit and the stock, and the
 * --db check that every accepted order reached the store. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/error.h"
#include "load/load_int.h"
#include "store/store.h"

void sk_load_violation(struct sk_load_result *r, const char *fmt, ...)
{
    r->ok = 0;
    if (r->n_violations >= SK_LOAD_MAX_VIOLATIONS) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->violations[r->n_violations++], sizeof r->violations[0], fmt, ap);
    va_end(ap);
}

static const struct sk_load_records *sort_recs;

static int cmp_oid(const void *a, const void *b)
{
    const struct sk_load_rec *x = a, *y = b;
    size_t n = x->oid_len < y->oid_len ? x->oid_len : y->oid_len;
    int c = memcmp(sort_recs->arena + x->oid_off, sort_recs->arena + y->oid_off, n);
    if (c) return c;
    return x->oid_len < y->oid_len ? -1 : x->oid_len > y->oid_len;
}

static int cmp_uid(const void *a, const void *b)
{
    const struct sk_load_rec *x = a, *y = b;
    return x->uid < y->uid ? -1 : x->uid > y->uid;
}

void sk_load_verify(const struct sk_load_opts *o, struct sk_load_result *r, uint64_t contending)
{
    r->ok = 1;
    uint64_t transport = r->err_connect + r->err_closed + r->err_timeout + r->err_protocol;
    if (transport)
        sk_load_violation(r,
                          "%" PRIu64 " transport errors (connect %" PRIu64 ", closed %" PRIu64
                          ", timeout %" PRIu64 ", protocol %" PRIu64 ")",
                          transport, r->err_connect, r->err_closed, r->err_timeout,
                          r->err_protocol);
    uint64_t s5 = r->status_other;
    for (int s = 500; s < 600; s++)
        s5 += r->status[s];
    /* 503 overloaded is the server shedding load as designed (a refusal
     * with Retry-After, docs/overload.md), not a failure */
    for (size_t i = 0; i < r->n_refusals; i++)
        if (strcmp(r->refusals[i].code, "overloaded") == 0 && r->refusals[i].n <= s5)
            s5 -= r->refusals[i].n;
    if (s5) sk_load_violation(r, "%" PRIu64 " responses were 5xx", s5);
    /* refusals of the request itself, not of the purchase: the load was
     * misconfigured (--auth, --activity, --path) and measured nothing */
    uint64_t bad = r->status[400] + r->status[401] + r->status[404] + r->status[405] +
                   r->status[413] + r->status[431];
    if (bad)
        sk_load_violation(r,
                          "%" PRIu64
                          " requests were refused as malformed, unauthorized or not found "
                          "(400/401/404/405/413/431: check --auth, --activity, --path)",
                          bad);
    if (r->order_check) {
        struct sk_load_records *rs = r->rec;
        size_t n = rs ? rs->n : 0;
        if (r->missing_orders)
            sk_load_violation(r, "%" PRIu64 " 200 responses carried no order_id",
                              r->missing_orders);
        if (n > 1) {
            sort_recs = rs;
            qsort(rs->v, n, sizeof *rs->v, cmp_oid);
            size_t first = n;
            for (size_t i = 1; i < n; i++)
                if (cmp_oid(&rs->v[i - 1], &rs->v[i]) == 0) {
                    r->duplicate_orders++;
                    if (first == n) first = i;
                }
            if (r->duplicate_orders)
                sk_load_violation(r, "%" PRIu64 " duplicate order ids (e.g. \"%.*s\")",
                                  r->duplicate_orders,
                                  (int)(rs->v[first].oid_len > 80 ? 80 : rs->v[first].oid_len),
                                  rs->arena + rs->v[first].oid_off);
        }
        r->unique_orders = n - r->duplicate_orders;
        /* units per user, from the accepted answers */
        if (n > 0) {
            qsort(rs->v, n, sizeof *rs->v, cmp_uid);
            uint64_t worst_uid = 0;
            int64_t worst = 0;
            for (size_t i = 0; i < n;) {
                size_t j = i;
                int64_t units = 0;
                while (j < n && rs->v[j].uid == rs->v[i].uid)
                    units += rs->v[j++].qty;
                if (units > r->max_units_one_user) r->max_units_one_user = units;
                if (o->limit >= 0 && units > o->limit) {
                    r->users_over_limit++;
                    if (units > worst) {
                        worst = units;
                        worst_uid = rs->v[i].uid;
                    }
                }
                i = j;
            }
            if (r->users_over_limit)
                sk_load_violation(r,
                                  "%" PRIu64 " users got more than the limit of %" PRId64
                                  " (user %" PRIu64 " got %" PRId64 ")",
                                  r->users_over_limit, o->limit, worst_uid, worst);
        }
    }
    /* demand: every fresh user that got 200 or sold_out could take Q units
     * (none when Q is above the per-user limit) */
    int64_t per_user = o->limit >= 0 && o->quantity > o->limit ? 0 : o->quantity;
    r->demand_units = contending * (uint64_t)per_user;
    if (o->expect_stock >= 0) {
        uint64_t stock = (uint64_t)o->expect_stock;
        /* with Q > 1, a remainder below Q can never sell */
        uint64_t sellable = stock - stock % (uint64_t)o->quantity;
        if (r->accepted_units > stock)
            sk_load_violation(r, "oversold: %" PRIu64 " units accepted, stock is %" PRIu64,
                              r->accepted_units, stock);
        else if (r->demand_units >= stock && r->accepted_units < sellable)
            sk_load_violation(r,
                              "undersold: %" PRIu64 " units accepted of %" PRIu64
                              " while the demand was at least %" PRIu64,
                              r->accepted_units, sellable, r->demand_units);
    }
}
/* ---- the database check (--db) ---- */

int sk_load_check_db(const struct sk_load_opts *o, struct sk_load_result *r, char *err, size_t cap)
{
    if (!o->db[0] || !r->rec) return 0;
    sk_store *st;
    int rc = sk_store_open(&st, o->db, err, cap);
    if (rc < 0) return rc;
    const struct sk_load_records *rs = r->rec;
    int64_t deadline = sk_mono_ms() + (o->db_wait_ms > 0 ? o->db_wait_ms : 30000);
    size_t i = 0;
    r->db_checked = 1;
    /* Orders are checked in turn; an absent one is waited for (the worker
     * persists in batches), so the wait is spent once, not per order. */
    while (i < rs->n) {
        const struct sk_load_rec *e = &rs->v[i];
        char oid[SK_STORE_ORDER_ID_MAX];
        snprintf(oid, sizeof oid, "%.*s", (int)e->oid_len, rs->arena + e->oid_off);
        struct sk_order row;
        rc = sk_store_order_get(st, oid, &row);
        if (rc == SK_ENOTFOUND && sk_mono_ms() < deadline) {
            struct timespec ts = {0, 20 * 1000 * 1000}; /* waiting for the pipeline */
            nanosleep(&ts, NULL);
            continue;
        }
        if (rc == 0 && row.user_id == e->uid && row.quantity == e->qty) {
            r->db_found++;
        } else if (rc == 0) {
            r->db_mismatched++;
            sk_load_violation(r,
                              "order %s in the DB is user %" PRIu64 " x%" PRId64
                              ", the 200 said user %" PRIu64 " x%" PRId64,
                              oid, row.user_id, row.quantity, e->uid, e->qty);
        } else {
            r->db_missing++;
            if (r->db_missing <= 3) sk_load_violation(r, "accepted order %s is not in the DB", oid);
        }
        i++;
    }
    if (r->db_missing > 3)
        sk_load_violation(r, "%" PRIu64 " accepted orders in all are not in the DB", r->db_missing);
    sk_store_close(st);
    return 0;
}
