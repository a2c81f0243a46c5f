/* promise_check.c - the buyers' 200s against the database and Redis
 * (promise_check.h). */
#include "support/promise_check.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "engine/stock.h"
#include "support/harness.h"

static void problem(struct pcheck_verdict *v, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void problem(struct pcheck_verdict *v, const char *fmt, ...)
{
    v->ok = 0;
    if (v->first[0]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->first, sizeof v->first, fmt, ap);
    va_end(ap);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* One user's units, in a table grown as needed. */
struct held {
    uint64_t user;
    int64_t units;
};

static int cmp_held(const void *a, const void *b)
{
    uint64_t x = ((const struct held *)a)->user, y = ((const struct held *)b)->user;
    return x < y ? -1 : x > y;
}

void pcheck_run(sk_store *st, sk_redis *r, uint64_t aid, int64_t stock, int64_t limit,
                const struct pcheck_ack *acks, size_t n, struct pcheck_verdict *v)
{
    memset(v, 0, sizeof *v);
    v->ok = 1;
    v->acks = (long)n;
    /* twice: one order id for two 200s */
    const char **ids = malloc((n ? n : 1) * sizeof *ids);
    CHECK(ids);
    for (size_t i = 0; i < n; i++)
        ids[i] = acks[i].order_id;
    qsort(ids, n, sizeof *ids, cmp_str);
    for (size_t i = 1; i < n; i++)
        if (!strcmp(ids[i], ids[i - 1])) {
            v->twice++;
            problem(v, "order %s was answered to two purchases", ids[i]);
        }
    free(ids);
    /* lost: every 200's order, held by its buyer */
    for (size_t i = 0; i < n; i++) {
        struct sk_order o;
        int rc = acks[i].order_id[0] ? sk_store_order_get(st, acks[i].order_id, &o) : SK_ENOTFOUND;
        CHECK_MSG(rc == 0 || rc == SK_ENOTFOUND, "order %s: %s", acks[i].order_id,
                  sk_store_errstr(st));
        const char *why = rc ? "is not in the database"
                          : o.user_id != acks[i].user || o.quantity != acks[i].qty
                              ? "is someone else's in the database"
                          : o.status == SK_ORDER_CANCELLED ? "is cancelled"
                                                           : NULL;
        if (why) {
            v->lost++;
            problem(v, "a 200 for user %" PRIu64 ": order %s %s", acks[i].user,
                    acks[i].order_id[0] ? acks[i].order_id : "(none)", why);
        }
    }
    /* the database: units held, per user */
    struct sk_order *page = malloc(1000 * sizeof *page);
    size_t cap = 1024, nh = 0;
    struct held *h = malloc(cap * sizeof *h);
    CHECK(page && h);
    char after[SK_STORE_ORDER_ID_MAX] = "";
    size_t got;
    do {
        CHECK_MSG(sk_store_orders_list(st, aid, after, 1000, page, &got) == 0, "orders: %s",
                  sk_store_errstr(st));
        for (size_t i = 0; i < got; i++) {
            v->db_orders++;
            if (page[i].status == SK_ORDER_CANCELLED) {
                v->db_cancelled++;
                continue;
            }
            v->db_units += page[i].quantity;
            if (nh == cap) {
                cap *= 2;
                h = realloc(h, cap * sizeof *h);
                CHECK(h);
            }
            h[nh++] = (struct held){page[i].user_id, page[i].quantity};
        }
        if (got) snprintf(after, sizeof after, "%s", page[got - 1].order_id);
    } while (got == 1000);
    free(page);
    qsort(h, nh, sizeof *h, cmp_held);
    for (size_t i = 0; i < nh;) {
        size_t j = i;
        int64_t units = 0;
        while (j < nh && h[j].user == h[i].user)
            units += h[j++].units;
        if (units > limit) {
            v->over_limit++;
            problem(v, "user %" PRIu64 " holds %" PRId64 " unit(s), the limit is %" PRId64,
                    h[i].user, units, limit);
        }
        i = j;
    }
    free(h);
    if (v->db_units > stock) {
        v->oversold = v->db_units - stock;
        problem(v, "the database holds %" PRId64 " unit(s) of %" PRId64, v->db_units, stock);
    }
    /* Redis, drained: the same units, its invariant, no fence */
    struct sk_stock_state s;
    CHECK_MSG(sk_stock_state(r, aid, &s) == 0, "redis: %s", r->errstr);
    v->redis_remaining = s.remaining;
    v->redis_held = s.held;
    v->redis_initial = s.initial;
    v->redis_ok = !s.fenced && s.remaining >= 0 &&
                  s.remaining + s.held + s.in_transit == s.initial && s.initial == stock &&
                  s.held == v->db_units;
    if (!v->redis_ok)
        problem(v,
                "redis: fence '%s', remaining %" PRId64 " + held %" PRId64 " of %" PRId64
                " (the database holds %" PRId64 ")",
                s.fence, (int64_t)s.remaining, (int64_t)s.held, (int64_t)s.initial, v->db_units);
}

void pcheck_print(const struct pcheck_verdict *v, const char *label)
{
    printf("    # %s: %ld 200s checked: %ld lost, %ld twice; %ld user(s) over the limit; database "
           "%" PRId64 " order(s) (%" PRId64 " cancelled), %" PRId64 " unit(s) held, %" PRId64
           " oversold; redis remaining %" PRId64 " held %" PRId64 " of %" PRId64 " (%s)%s%s\n",
           label, v->acks, v->lost, v->twice, v->over_limit, v->db_orders, v->db_cancelled,
           v->db_units, v->oversold, v->redis_remaining, v->redis_held, v->redis_initial,
           v->redis_ok ? "consistent" : "NOT consistent", v->ok ? "" : "; first: ", v->first);
    fflush(stdout);
}
