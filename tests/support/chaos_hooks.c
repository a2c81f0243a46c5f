/* chaos_hooks.c - the webhooks received against the outbox and the orders
 * (chaos_hooks.h). */
#include "support/chaos_hooks.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "support/fixtures.h"
#include "support/harness.h"

#define PAGE 1000

struct ev {
    char id[SK_STORE_SUBJECT_MAX + 24];
    char type[SK_STORE_EVENT_TYPE_MAX];
    int64_t row, seq;
    int64_t first_at; /* the first request that carried it, -1 none */
    int acked;
};

struct evs {
    struct ev *e;
    size_t n, cap;
    int64_t last_row;
    int32_t last_sub; /* within a batch row (store.h) */
};

static int cmp_ev(const void *a, const void *b)
{
    return strcmp(((const struct ev *)a)->id, ((const struct ev *)b)->id);
}

static struct ev *find(const struct evs *v, const char *id)
{
    struct ev key;
    snprintf(key.id, sizeof key.id, "%s", id);
    return bsearch(&key, v->e, v->n, sizeof *v->e, cmp_ev);
}

static void finding(struct chaos_hooks_report *r, int k, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void finding(struct chaos_hooks_report *r, int k, const char *fmt, ...)
{
    if (r->found[k]++) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->example[k], sizeof r->example[k], fmt, ap);
    va_end(ap);
}

/* The outbox rows after v->last_row added (v sorted again). */
static int read_new(sk_store *st, struct evs *v)
{
    struct sk_event *page = malloc(PAGE * sizeof *page);
    CHECK(page != NULL);
    size_t added = 0;
    int rc = 0;
    for (;;) {
        size_t n = 0;
        if ((rc = sk_store_events_list_at(st, v->last_row, v->last_sub, PAGE, page, &n)) != 0)
            break;
        for (size_t i = 0; i < n; i++) {
            if (v->n == v->cap) {
                v->cap = v->cap ? v->cap * 2 : 4096;
                v->e = realloc(v->e, v->cap * sizeof *v->e);
                CHECK(v->e != NULL);
            }
            struct ev *e = &v->e[v->n++];
            memset(e, 0, sizeof *e);
            snprintf(e->id, sizeof e->id, "%s:%" PRId64, page[i].subject, page[i].seq);
            snprintf(e->type, sizeof e->type, "%s", page[i].type);
            e->row = page[i].id;
            e->seq = page[i].seq;
            e->first_at = -1;
            v->last_row = page[i].id;
            v->last_sub = page[i].sub;
            added++;
        }
        if (n < PAGE) break;
    }
    free(page);
    if (added) qsort(v->e, v->n, sizeof *v->e, cmp_ev);
    return rc;
}

/* The events of v not acknowledged by rx yet (every request's 200 marks
 * its event; one of an event not read yet counts on a later call). */
static size_t unacked(struct evs *v, struct sk_th_rx *rx)
{
    size_t n = sk_th_rx_count(rx), left = 0;
    for (size_t i = 0; i < n; i++) {
        struct sk_th_rx_req q;
        sk_th_rx_get(rx, i, &q);
        struct ev *e = find(v, q.id);
        if (e && q.status == 200) e->acked = 1;
    }
    for (size_t i = 0; i < v->n; i++)
        left += !v->e[i].acked;
    return left;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The orders of the activities against the outbox. */
static int check_orders(sk_store *st, const struct evs *v, const uint64_t *aids, size_t nacts,
                        struct chaos_hooks_report *r)
{
    struct sk_order *page = malloc(PAGE * sizeof *page);
    CHECK(page != NULL);
    char **ids = NULL;
    size_t nid = 0, cap = 0;
    int rc = 0;
    for (size_t a = 0; a < nacts && rc == 0; a++) {
        char after[SK_STORE_ORDER_ID_MAX] = "";
        for (;;) {
            size_t n = 0;
            if ((rc = sk_store_orders_list(st, aids[a], after, PAGE, page, &n)) != 0) break;
            for (size_t i = 0; i < n; i++) {
                const struct sk_order *o = &page[i];
                if (nid == cap) {
                    cap = cap ? cap * 2 : 4096;
                    ids = realloc(ids, cap * sizeof *ids);
                    CHECK(ids != NULL);
                }
                ids[nid++] = strdup(o->order_id);
                char id[sizeof v->e[0].id];
                snprintf(id, sizeof id, "%s:1", o->order_id);
                const struct ev *e = find(v, id);
                if (!e || strcmp(e->type, "order.created")) {
                    finding(r, CH_ORDERS, "order %s (%s): %s", o->order_id,
                            sk_order_status_name(o->status),
                            e ? "its seq 1 is not order.created" : "no order.created event");
                    continue;
                }
                int paid = 0, cancelled = 0, later = 0;
                for (int64_t s = 2;; s++) {
                    snprintf(id, sizeof id, "%s:%" PRId64, o->order_id, s);
                    if (!(e = find(v, id))) break;
                    later++;
                    paid |= !strcmp(e->type, "order.paid");
                    cancelled |=
                        !strcmp(e->type, "order.cancelled") || !strcmp(e->type, "order.released");
                }
                int ok = o->status == SK_ORDER_PAID        ? paid && !cancelled
                         : o->status == SK_ORDER_CANCELLED ? cancelled && !paid
                                                           : later == 0;
                if (!ok)
                    finding(r, CH_ORDERS, "order %s is %s, its events after order.created: %d%s%s",
                            o->order_id, sk_order_status_name(o->status), later,
                            paid ? " (order.paid)" : "",
                            cancelled ? " (order.cancelled/released)" : "");
            }
            r->orders += n;
            if (n < PAGE) break;
            snprintf(after, sizeof after, "%s", page[n - 1].order_id);
        }
    }
    free(page);
    if (rc == 0) {
        /* no order event of an order the database does not hold */
        qsort(ids, nid, sizeof *ids, cmp_str);
        for (size_t i = 0; i < v->n; i++) {
            const struct ev *e = &v->e[i];
            if (strncmp(e->type, "order.", 6)) continue;
            char subject[sizeof e->id];
            snprintf(subject, sizeof subject, "%s", e->id);
            char *colon = strrchr(subject, ':');
            if (colon) *colon = 0;
            char *key = subject;
            if (!bsearch(&key, ids, nid, sizeof *ids, cmp_str))
                finding(r, CH_ORDERS, "event %s (%s) of an order the database does not hold", e->id,
                        e->type);
        }
    }
    for (size_t i = 0; i < nid; i++)
        free(ids[i]);
    free(ids);
    return rc;
}

int chaos_hooks_check(sk_store *st, struct sk_th_rx *rx, const uint64_t *aids, size_t nacts,
                      int64_t wait_ms, struct chaos_hooks_report *out)
{
    memset(out, 0, sizeof *out);
    struct evs v = {0};
    int64_t t0 = sk_mono_ms(), by = t0 + wait_ms;
    int rc = read_new(st, &v);
    while (rc == 0 && unacked(&v, rx) > 0 && sk_mono_ms() < by) {
        sk_th_nap_ms(500);
        rc = read_new(st, &v);
    }
    out->waited_ms = sk_mono_ms() - t0;
    if (rc == 0) { /* every row again: one committed late below a row read before */
        free(v.e);
        v = (struct evs){0};
        rc = read_new(st, &v);
    }
    if (rc) {
        free(v.e);
        snprintf(out->example[0], sizeof out->example[0], "%s", sk_store_errstr(st));
        return rc;
    }
    unacked(&v, rx);
    out->events = v.n;
    size_t n = sk_th_rx_count(rx);
    out->requests = n;
    sk_th_rx_answers(rx, out->answers);
    for (size_t i = 0; i < n; i++) {
        struct sk_th_rx_req q;
        sk_th_rx_get(rx, i, &q);
        if (!q.sig_ok || !q.id_ok)
            finding(out, CH_SIGNATURE, "request %zu (%s): %s", i, q.id,
                    !q.sig_ok ? "no signature verifies" : "the body's id is not the webhook-id");
        struct ev *e = find(&v, q.id);
        if (!e) {
            finding(out, CH_PHANTOM, "request %zu: event %s (%s) is not in the outbox", i, q.id,
                    q.type);
            continue;
        }
        if (strcmp(e->type, q.type))
            finding(out, CH_PHANTOM, "request %zu: event %s is %s in the outbox, %s delivered", i,
                    q.id, e->type, q.type);
        if (e->first_at < 0)
            e->first_at = q.at;
        else
            out->duplicates++;
    }
    for (size_t i = 0; i < v.n; i++) {
        const struct ev *e = &v.e[i];
        out->subjects += e->seq == 1;
        if (!e->acked)
            finding(out, CH_MISSING, "event %s (%s, outbox row %" PRId64 ") never acknowledged",
                    e->id, e->type, e->row);
        if (e->seq <= 1 || e->first_at < 0) continue;
        char prev[sizeof e->id];
        snprintf(prev, sizeof prev, "%.*s:%" PRId64, (int)(strrchr(e->id, ':') - e->id), e->id,
                 e->seq - 1);
        const struct ev *p = find(&v, prev);
        if (!p || p->first_at < 0 || p->first_at > e->first_at)
            finding(out, CH_ORDER, "%s first arrived (request %" PRId64 ") before %s (%s)", e->id,
                    e->first_at, prev, p && p->first_at >= 0 ? "later" : "never");
    }
    rc = check_orders(st, &v, aids, nacts, out);
    free(v.e);
    if (rc) snprintf(out->example[0], sizeof out->example[0], "%s", sk_store_errstr(st));
    return rc;
}

int chaos_hooks_ok(const struct chaos_hooks_report *r)
{
    for (int k = 0; k < CH_COUNT; k++)
        if (r->found[k]) return 0;
    return 1;
}

static const char *const names[CH_COUNT] = {
    [CH_MISSING] = "webhook: committed event never delivered",
    [CH_PHANTOM] = "webhook: event delivered that the outbox does not hold",
    [CH_SIGNATURE] = "webhook: bad signature or id",
    [CH_ORDER] = "webhook: out of order for its subject",
    [CH_ORDERS] = "webhook: outbox disagrees with the orders",
};

const char *chaos_hooks_first(const struct chaos_hooks_report *r)
{
    static char line[400];
    line[0] = 0;
    for (int k = 0; k < CH_COUNT && !line[0]; k++)
        if (r->found[k])
            snprintf(line, sizeof line, "%s: %zu, e.g. %s", names[k], r->found[k], r->example[k]);
    return line;
}

void chaos_hooks_print(FILE *f, const struct chaos_hooks_report *r)
{
    fprintf(f,
            "    # webhooks: %zu events in the outbox (%zu subjects), %zu orders compared; %zu "
            "requests: 200 %ld (slow %ld), 500 %ld, 429 %ld, no answer %ld; %zu duplicates; all "
            "acknowledged %.1f s after the drain\n",
            r->events, r->subjects, r->orders, r->requests, r->answers[0], r->answers[4],
            r->answers[1], r->answers[2], r->answers[3], r->duplicates,
            (double)r->waited_ms / 1000);
    for (int k = 0; k < CH_COUNT; k++)
        if (r->found[k])
            fprintf(f, "    # FOUND %s: %zu, e.g. %s\n", names[k], r->found[k], r->example[k]);
}
