/* store_row.c - rows into the store's structs and back (store_int.h):
 * which column holds which field is said here once, in the order of
 * SK_STORE_ACTIVITY_COLUMNS, SK_STORE_ORDER_COLUMNS, SK_STORE_AUDIT_COLUMNS,
 * SK_STORE_MARK_COLUMNS, SK_STORE_EVENT_COLUMNS and SK_STORE_WEBHOOK_COLUMNS; a driver only says
 * how it reads one number and one text of a row. */
#include "store/store_int.h"

#include <stdio.h>
#include <string.h>

#define I64(c) st->drv->col_i64(s, (c))
#define TEXT(c, f) st->drv->col_text(s, (c), (f), sizeof(f))

void sk_store_read_activity(sk_store *st, sk_stmt *s, void *dst)
{
    struct sk_activity *a = dst;
    memset(a, 0, sizeof *a);
    /* The number columns in SK_STORE_ACTIVITY_COLUMNS order (NULL: the id
     * and the text columns, read below). */
    int64_t *const num[] = {NULL,
                            NULL,
                            &a->stock /* stock_initial */,
                            &a->stock_db,
                            &a->per_user_limit,
                            &a->max_per_order,
                            &a->start_ms,
                            &a->end_ms,
                            &a->pay_timeout_s,
                            NULL,
                            &a->created_ms,
                            &a->rl_per_user_per_s,
                            &a->rl_burst,
                            &a->segments,
                            &a->wr_passes_per_s,
                            &a->wr_pass_ttl_s,
                            NULL,
                            &a->ch_pow_min,
                            &a->ch_pow_max,
                            &a->ch_pow_step,
                            NULL,
                            &a->wr_control,
                            &a->reg_start_ms,
                            &a->reg_end_ms,
                            &a->draw_box_s,
                            NULL,
                            &a->drawn_ms,
                            &a->draw_n,
                            NULL};
    _Static_assert(sizeof num / sizeof num[0] == SK_STORE_ACTIVITY_NCOLS,
                   "one entry per column of SK_STORE_ACTIVITY_COLUMNS");
    for (int c = 0; c < (int)(sizeof num / sizeof num[0]); c++)
        if (num[c]) *num[c] = I64(c);
    a->id = (uint64_t)I64(0);
    TEXT(1, a->name);
    TEXT(9, a->state);
    TEXT(16, a->wr_seed);
    TEXT(20, a->ch_captcha);
    TEXT(25, a->draw_seed);
    TEXT(28, a->draw_state);
}

void sk_store_read_registration(sk_store *st, sk_stmt *s, void *dst)
{
    struct sk_registration *g = dst;
    memset(g, 0, sizeof *g);
    g->user_id = (uint64_t)I64(0); /* same bits, see store.h */
    g->draw_place = I64(1);        /* NULL reads 0: not drawn */
    g->created_ms = I64(2);
}

void sk_store_read_order(sk_store *st, sk_stmt *s, void *dst)
{
    struct sk_order *o = dst;
    memset(o, 0, sizeof *o);
    TEXT(0, o->order_id);
    TEXT(1, o->stream_id);
    o->activity_id = (uint64_t)I64(2);
    o->user_id = (uint64_t)I64(3); /* same bits, see store.h */
    o->quantity = I64(4);
    char status[16];
    TEXT(5, status);
    o->status = sk_store_status_from_text(status);
    o->created_ms = I64(6);
    o->pay_deadline_ms = I64(7);
    o->paid_ms = I64(8); /* NULL reads as 0 */
    o->cancelled_ms = I64(9);
    o->released_ms = I64(10);
    TEXT(11, o->idem_key); /* NULL reads "" */
}

void sk_store_read_audit(sk_store *st, sk_stmt *s, void *dst)
{
    struct sk_audit *a = dst;
    memset(a, 0, sizeof *a);
    a->id = I64(0);
    a->at_ms = I64(1);
    a->activity_id = (uint64_t)I64(2);
    TEXT(3, a->kind);
    TEXT(4, a->detail);
}

void sk_store_read_mark(sk_store *st, sk_stmt *s, void *dst)
{
    struct sk_mark *m = dst;
    memset(m, 0, sizeof *m);
    TEXT(0, m->label);
    m->activity_id = (uint64_t)I64(1);
    m->adm = I64(2);
    m->updated_ms = I64(3);
    TEXT(4, m->order_id);
    TEXT(5, m->branch);
}

void sk_store_read_id(sk_store *st, sk_stmt *s, void *dst)
{
    *(uint64_t *)dst = (uint64_t)I64(0);
}

void sk_store_read_event(sk_store *st, sk_stmt *s, void *dst)
{
    struct sk_event *e = dst;
    memset(e, 0, sizeof *e);
    e->id = I64(0);
    TEXT(1, e->subject);
    e->seq = I64(2);
    TEXT(3, e->type);
    e->activity_id = (uint64_t)I64(4);
    TEXT(5, e->order_id); /* NULL reads "" */
    e->created_ms = I64(6);
    TEXT(7, e->payload);
    e->last = 1;
    if (e->payload[0] || !e->order_id[0]) return;
    /* an order.created: the order row, as it was persisted */
    sk_store_created_payload(e, (uint64_t)I64(8), I64(9), I64(10), I64(11));
}

void sk_store_read_i64(sk_store *st, sk_stmt *s, void *dst)
{
    *(int64_t *)dst = I64(0);
}

void sk_store_read_i64_pair(sk_store *st, sk_stmt *s, void *dst)
{
    ((int64_t *)dst)[0] = I64(0);
    ((int64_t *)dst)[1] = I64(1);
}

void sk_store_read_webhook(sk_store *st, sk_stmt *s, void *dst)
{
    struct sk_store_webhook *w = dst;
    memset(w, 0, sizeof *w);
    w->id = I64(0);
    w->activity_id = (uint64_t)I64(1);
    TEXT(2, w->name);
    TEXT(3, w->url);
    TEXT(4, w->events);
    TEXT(5, w->secret);
    TEXT(6, w->secret_prev);
    w->prev_until_ms = I64(7);
    w->paused = I64(8) != 0;
    w->created_ms = I64(9);
    w->updated_ms = I64(10);
}

void sk_store_read_identity(sk_store *st, sk_stmt *s, void *dst)
{
    st->drv->col_text(s, 0, dst, SK_STORE_IDENTITY_MAX + 8);
}

void sk_store_activity_values(const struct sk_activity *a, struct sk_val v[SK_STORE_ACTIVITY_NCOLS])
{
    const struct sk_val row[SK_STORE_ACTIVITY_NCOLS] = {
        SK_I(a->id), /* below 2^63: validated */
        SK_T(a->name),
        SK_I(a->stock), /* stock_initial */
        SK_I(a->stock),
        SK_I(a->per_user_limit),
        SK_I(a->max_per_order),
        SK_I(a->start_ms),
        SK_I(a->end_ms),
        SK_I(a->pay_timeout_s),
        SK_T(a->state),
        SK_I(a->created_ms),
        SK_I(a->rl_per_user_per_s),
        SK_I(a->rl_burst),
        SK_I(a->segments),
        SK_I(a->wr_passes_per_s),
        SK_I(a->wr_pass_ttl_s),
        SK_T(a->wr_seed),
        SK_I(a->ch_pow_min),
        SK_I(a->ch_pow_max),
        SK_I(a->ch_pow_step),
        SK_T(a->ch_captcha),
        SK_I(a->wr_control),
        SK_I(a->reg_start_ms),
        SK_I(a->reg_end_ms),
        SK_I(a->draw_box_s),
        SK_T(a->draw_seed),
        SK_I(0),  /* drawn_ms: the draw is recorded by sk_store_draw_record */
        SK_I(0),  /* draw_n */
        SK_T(""), /* draw_state */
    };
    memcpy(v, row, sizeof row);
}
