/* store_events.c - the outbox (store.h, migrations 12-14) on every driver
 * (store_int.h): the JSON of an event, its row written in the caller's
 * transaction (a status change, a persist, a state change), a sale's
 * event written only when it is news (reconcile.drift), and the list the
 * dispatcher and `seckill events` read. The subject's next seq is
 * computed by the INSERT itself, under the row lock the change holds, so
 * a change costs no extra round trip (SK_SQL_DEFER: the servers send it
 * with the COMMIT). */
#include "store/store_int.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "store/event_batch.h"

/* A JSON writer into a fixed buffer: ok 0 once it overflowed. */
struct jw {
    char *p;
    size_t len, cap;
    int ok;
};

static void jw_raw(struct jw *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void jw_raw(struct jw *w, const char *fmt, ...)
{
    if (!w->ok) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(w->p + w->len, w->cap - w->len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= w->cap - w->len)
        w->ok = 0;
    else
        w->len += (size_t)n;
}

/* ,"key":"s" with s escaped (RFC 8259: quote, backslash, controls). */
static void jw_str(struct jw *w, const char *key, const char *s)
{
    jw_raw(w, ",\"%s\":\"", key);
    for (const unsigned char *c = (const unsigned char *)s; w->ok && *c; c++) {
        if (*c == '"' || *c == '\\')
            jw_raw(w, "\\%c", *c);
        else if (*c < 0x20)
            jw_raw(w, "\\u%04x", *c);
        else
            jw_raw(w, "%c", *c);
    }
    jw_raw(w, "\"");
}

int sk_store_order_payload(char *dst, size_t cap, const struct sk_order *o, const char *pay_ref)
{
    struct jw w = {dst, 0, cap, cap > 0};
    jw_raw(&w, "{\"v\":%d", SK_EVENT_SCHEMA);
    jw_str(&w, "order_id", o->order_id);
    jw_raw(&w, ",\"activity_id\":%" PRIu64 ",\"user_id\":%" PRIu64 ",\"quantity\":%" PRId64,
           o->activity_id, o->user_id, o->quantity);
    jw_str(&w, "status", sk_order_status_name(o->status));
    jw_raw(&w, ",\"created_ms\":%" PRId64 ",\"pay_deadline_ms\":%" PRId64, o->created_ms,
           o->pay_deadline_ms);
    if (o->paid_ms) jw_raw(&w, ",\"paid_ms\":%" PRId64, o->paid_ms);
    if (o->cancelled_ms) jw_raw(&w, ",\"cancelled_ms\":%" PRId64, o->cancelled_ms);
    if (pay_ref && *pay_ref) jw_str(&w, "payment_ref", pay_ref);
    jw_raw(&w, "}");
    return w.ok ? (int)w.len : SK_EINVAL;
}

void sk_store_activity_subject(char *dst, size_t cap, uint64_t aid)
{
    snprintf(dst, cap, "activity-%" PRIu64, aid);
}

int sk_store_event(sk_store *st, const char *type, uint64_t aid, const struct sk_order *o,
                   int64_t now_ms, const char *pay_ref, const char *payload)
{
    char subject[SK_STORE_SUBJECT_MAX], json[SK_STORE_PAYLOAD_MAX];
    if (o)
        snprintf(subject, sizeof subject, "%s", o->order_id);
    else
        sk_store_activity_subject(subject, sizeof subject, aid);
    if (!payload) {
        if (o && sk_store_order_payload(json, sizeof json, o, pay_ref) < 0)
            return sk_store_set_err(st, SK_EINVAL, "order %s: event payload too long", o->order_id);
        if (!o)
            snprintf(json, sizeof json, "{\"v\":%d,\"activity_id\":%" PRIu64 "}", SK_EVENT_SCHEMA,
                     aid);
        payload = json;
    }
    /* an order's order.created is its seq 1, maybe inside another
     * subject's batch row: its later events count from there */
    int base = o && strcmp(type, "order.created") ? 1 : 0;
    return sk_q_run(st, Q_EVENT_ADD,
                    SK_ARGS(SK_T(subject), SK_I(base), SK_T(type), SK_I(aid),
                            o ? SK_T(o->order_id) : SK_NULL, SK_I(now_ms),
                            pay_ref && *pay_ref ? SK_T(pay_ref) : SK_NULL, SK_T(payload),
                            SK_T(subject)),
                    NULL);
}

int sk_store_event_state(sk_store *st, uint64_t aid, const char *before, const char *state,
                         int64_t now_ms)
{
    const char *type = !strcmp(state, "open")     ? "activity.opened"
                       : !strcmp(state, "closed") ? "activity.closed"
                                                  : NULL;
    if (!type || !strcmp(before, state)) return 0;
    char json[160];
    snprintf(json, sizeof json,
             "{\"v\":%d,\"activity_id\":%" PRIu64 ",\"state\":\"%s\",\"before\":\"%s\"}",
             SK_EVENT_SCHEMA, aid, state, before);
    return sk_store_event(st, type, aid, NULL, now_ms, NULL, json);
}

void sk_store_created_payload(struct sk_event *e, uint64_t user_id, int64_t quantity,
                              int64_t created_ms, int64_t pay_deadline_ms)
{
    struct sk_order o = {.activity_id = e->activity_id, .status = SK_ORDER_CREATED};
    snprintf(o.order_id, sizeof o.order_id, "%s", e->order_id);
    o.user_id = user_id;
    o.quantity = quantity;
    o.created_ms = created_ms;
    o.pay_deadline_ms = pay_deadline_ms;
    if (sk_store_order_payload(e->payload, sizeof e->payload, &o, NULL) < 0) e->payload[0] = 0;
}

/* A list in the making: events after (after_id, after_sub) into out;
 * fill: the events of batch rows, whose payloads their orders give. */
struct list {
    int64_t after_id;
    int32_t after_sub;
    struct sk_event *out;
    size_t limit, n;
    size_t *fill, nfill;
};

/* A row of Q_EVENTS_LIST into the next struct sk_event of *arg (its
 * last column: a batch row, flagged by sub -1 until expanded). */
static void read_row(sk_store *st, sk_stmt *s, void *arg)
{
    struct sk_event *e = arg;
    sk_store_read_event(st, s, e);
    if (st->drv->col_i64(s, SK_STORE_EVENT_NCOLS - 1)) e->sub = -1;
}

#define BATCH_TEXT_MAX (SK_STORE_BATCH_ROW_MAX * SK_STORE_ORDER_ID_MAX)

static void read_batch(sk_store *st, sk_stmt *s, void *dst)
{
    st->drv->col_text(s, 0, dst, BATCH_TEXT_MAX);
}

/* The events of batch row r (its ids read now) after the position into
 * l, up to its limit. */
static int expand(sk_store *st, struct list *l, const struct sk_event *r)
{
    char batch[BATCH_TEXT_MAX];
    batch[0] = 0;
    int rc = sk_q_one(st, Q_EVENT_BATCH, SK_ARGS(SK_I(r->id)), read_batch, batch);
    if (rc < 0) return rc;
    int32_t behind = r->id == l->after_id ? l->after_sub : -1; /* its events up to this */
    size_t len;
    int last = 0;
    int32_t sub = 0;
    for (const char *p = batch; l->n < l->limit && (p = sk_event_batch_next(p, &len, &last));
         p += len, sub++) {
        if (sub <= behind) continue;
        struct sk_event *x = &l->out[l->n];
        *x = *r;
        x->payload[0] = 0;
        x->seq = 1;
        x->sub = sub;
        x->last = last;
        snprintf(x->subject, sizeof x->subject, "%.*s", (int)len, p);
        snprintf(x->order_id, sizeof x->order_id, "%s", x->subject);
        l->fill[l->nfill++] = l->n++;
    }
    return 0;
}

static void bind_fill(void *ctx, size_t row, struct sk_val *v)
{
    const struct list *l = ctx;
    v[0] = SK_T(l->out[l->fill[row]].order_id);
}

/* A row (order_id, user_id, quantity, created_ms, pay_deadline_ms) of
 * Q_EVENT_ORDERS into its event's payload. */
static void fill_row(sk_store *st, sk_stmt *s, void *ctx)
{
    struct list *l = ctx;
    char id[SK_STORE_ORDER_ID_MAX];
    st->drv->col_text(s, 0, id, sizeof id);
    for (size_t k = 0; k < l->nfill; k++) {
        struct sk_event *e = &l->out[l->fill[k]];
        if (strcmp(e->order_id, id)) continue;
        sk_store_created_payload(e, (uint64_t)st->drv->col_i64(s, 1), st->drv->col_i64(s, 2),
                                 st->drv->col_i64(s, 3), st->drv->col_i64(s, 4));
    }
}

/* The events of rows[0..nrows) after the position into l: a row of one
 * event as it is, a batch row expanded (its ids read only when it is
 * reached: a page holds a row or two of them). */
static int list_rows(sk_store *st, struct list *l, const struct sk_event *rows, size_t nrows)
{
    for (size_t i = 0; i < nrows && l->n < l->limit; i++) {
        const struct sk_event *r = &rows[i];
        if (r->sub < 0) {
            int rc = expand(st, l, r);
            if (rc) return rc;
        } else if (r->id != l->after_id || l->after_sub < 0) {
            l->out[l->n++] = *r;
        }
    }
    if (l->nfill == 0) return 0;
    /* an order not found (deleted by hand) reads zeros, as a row of one
     * event joined to nothing */
    for (size_t k = 0; k < l->nfill; k++)
        sk_store_created_payload(&l->out[l->fill[k]], 0, 0, 0, 0);
    return sk_q_rows(st, Q_EVENT_ORDERS, l->nfill, bind_fill, fill_row, l, NULL);
}

int sk_store_events_list_at(sk_store *st, int64_t after_id, int32_t after_sub, size_t limit,
                            struct sk_event *out, size_t *n)
{
    *n = 0;
    st->errstr[0] = 0;
    if (limit == 0) return 0;
    if (after_sub == SK_EVENT_ROW_END && after_id == INT64_MAX) return 0;
    int rc = sk_store_enter(st);
    if (rc) return rc;
    /* a row more than events asked: fewer events than limit means the end */
    size_t want = limit + 1, nrows = 0;
    struct list l = {after_id, after_sub, out, limit, 0, malloc(limit * sizeof(size_t)), 0};
    struct sk_event *rows = malloc(want * sizeof *rows);
    if (!l.fill || !rows) rc = sk_store_set_err(st, SK_ENOMEM, "out of memory reading events");
    int64_t first = after_sub == SK_EVENT_ROW_END ? after_id + 1 : after_id;
    int64_t lim = want > INT64_MAX ? INT64_MAX : (int64_t)want;
    if (rc == 0)
        rc = sk_q_fill(st, Q_EVENTS_LIST, SK_ARGS(SK_I(first), SK_I(lim)), read_row, sizeof *rows,
                       rows, want, &nrows);
    if (rc == 0) rc = list_rows(st, &l, rows, nrows);
    free(rows);
    free(l.fill);
    if (rc < 0) return rc;
    *n = l.n;
    return 0;
}

int sk_store_events_list(sk_store *st, int64_t after_id, size_t limit, struct sk_event *out,
                         size_t *n)
{
    return sk_store_events_list_at(st, after_id, SK_EVENT_ROW_END, limit, out, n);
}

int sk_store_events_max(sk_store *st, int64_t *max_row)
{
    *max_row = 0;
    int rc = sk_store_enter(st);
    if (rc == 0) rc = sk_q_one(st, Q_EVENTS_MAX, NULL, 0, sk_store_read_i64, max_row);
    return rc < 0 ? rc : 0;
}

/* The latest event's payload and time (Q_EVENT_LAST). */
struct last_event {
    char payload[SK_STORE_PAYLOAD_MAX];
    int64_t created_ms;
};

static void read_last(sk_store *st, sk_stmt *s, void *dst)
{
    struct last_event *e = dst;
    st->drv->col_text(s, 0, e->payload, sizeof e->payload);
    e->created_ms = st->drv->col_i64(s, 1);
}

struct event_if {
    const char *type, *payload;
    uint64_t aid;
    int64_t now_ms;
    sk_store_event_due *due;
    void *arg;
    int *written;
};

static int event_if_tx(sk_store *st, void *arg)
{
    const struct event_if *c = arg;
    char state[SK_STORE_IDENTITY_MAX + 8], subject[SK_STORE_SUBJECT_MAX]; /* state: unused */
    /* no row (an activity only Redis holds) locks nothing: SQLite's
     * writers take turns anyway, a server's race ends on the unique
     * (subject, seq) */
    int rc =
        sk_q_one(st, Q_ACTIVITY_STATE_LOCK, SK_ARGS(SK_I(c->aid)), sk_store_read_identity, state);
    if (rc < 0) return rc;
    struct last_event last;
    sk_store_activity_subject(subject, sizeof subject, c->aid);
    rc = sk_q_one(st, Q_EVENT_LAST, SK_ARGS(SK_T(subject), SK_T(c->type)), read_last, &last);
    if (rc < 0) return rc;
    if (!c->due(c->arg, rc ? last.payload : NULL, rc ? last.created_ms : 0)) return 0;
    rc = sk_store_event(st, c->type, c->aid, NULL, c->now_ms, NULL, c->payload);
    if (rc == 0) *c->written = 1;
    return rc;
}

int sk_store_event_if(sk_store *st, const char *type, uint64_t aid, int64_t now_ms,
                      const char *payload, sk_store_event_due *due, void *arg, int *written)
{
    *written = 0;
    if (strlen(payload) >= SK_STORE_PAYLOAD_MAX)
        return sk_store_set_err(st, SK_EINVAL, "%s: event payload too long", type);
    if (sk_store_id_beyond_sql(aid)) return sk_store_no_activity(st, aid);
    struct event_if c = {type, payload, aid, now_ms, due, arg, written};
    int rc = sk_tx(st, event_if_tx, &c);
    if (rc) *written = 0; /* rolled back */
    return rc;
}

int sk_store_webhook_cursor(sk_store *st, const char *endpoint, int64_t now_ms, int64_t *row,
                            int64_t *epoch)
{
    int64_t got[2] = {0, 0};
    *row = 0;
    if (epoch) *epoch = 0;
    int rc = sk_store_enter(st);
    if (rc) return rc;
    rc = sk_q_one(st, Q_WH_CURSOR_GET, SK_ARGS(SK_T(endpoint)), sk_store_read_i64_pair, got);
    if (rc == 1) {
        *row = got[0];
        if (epoch) *epoch = got[1];
        return 0;
    }
    if (rc < 0) return rc;
    rc = sk_q_run(st, Q_WH_CURSOR_INIT, SK_ARGS(SK_T(endpoint), SK_I(now_ms)), NULL);
    return rc == SK_EEXIST ? sk_store_webhook_cursor(st, endpoint, now_ms, row, epoch) : rc;
}

int sk_store_webhook_advance(sk_store *st, const char *endpoint, int64_t row, int64_t epoch,
                             int64_t now_ms)
{
    int rc = sk_store_enter(st);
    return rc ? rc
              : sk_q_run(st, Q_WH_CURSOR_SET,
                         SK_ARGS(SK_I(row), SK_I(now_ms), SK_T(endpoint), SK_I(row), SK_I(epoch)),
                         NULL);
}

int sk_store_webhook_dead(sk_store *st, const char *endpoint, const struct sk_event *e,
                          int64_t epoch, int64_t now_ms, int64_t attempts, int last_status)
{
    int rc = sk_store_enter(st);
    if (rc == 0)
        rc = sk_q_run(st, Q_WH_DEAD,
                      SK_ARGS(SK_T(endpoint), SK_I(e->id), SK_I(e->sub), SK_I(now_ms),
                              SK_I(attempts), SK_I(last_status)),
                      NULL);
    if (rc || !e->last) return rc;
    return sk_store_webhook_advance(st, endpoint, e->id, epoch, now_ms);
}
