/* store_row.c - rows into the store's structs and back (store_int.h):
 * which column holds which field is said here once, in the order of
 * SK_STORE_ACTIVITY_COLUMNS, SK_STORE_ORDER_COLUMNS, SK_STORE_AUDIT_COLUMNS,
 * SK_STORE_MARK_COLUMNS, SK_STORE_EVENT_COLUMNS and SK_STORE_WEBHOOK_COLUMNS; a driver only says
 * how it reads one number and one text of a row. */
#include "store/store_int.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define I64(c) st->drv->col_i64(s, (c))
#define TEXT(c, f) st->drv->col_text(s, (c), (f), sizeof(f))

/* The columns of SK_STORE_ACTIVITY_COLUMNS in order: where each is in
 * struct sk_activity, and a text's size (0: a number, int64_t or the
 * same bits in the id's uint64_t). */
#define NUM(f)                                                                                     \
    {                                                                                              \
        offsetof(struct sk_activity, f), 0                                                         \
    }
#define TXT(f)                                                                                     \
    {                                                                                              \
        offsetof(struct sk_activity, f), sizeof(((struct sk_activity *)0)->f)                      \
    }
static const struct {
    size_t off, size;
} activity_cols[] = {
    NUM(id),
    TXT(name),
    NUM(stock), /* stock_initial */
    NUM(stock_db),
    NUM(per_user_limit),
    NUM(max_per_order),
    NUM(start_ms),
    NUM(end_ms),
    NUM(pay_timeout_s),
    TXT(state),
    NUM(created_ms),
    NUM(rl_per_user_per_s),
    NUM(rl_burst),
    NUM(segments),
    NUM(wr_passes_per_s),
    NUM(wr_pass_ttl_s),
    TXT(wr_seed),
    NUM(ch_pow_min),
    NUM(ch_pow_max),
    NUM(ch_pow_step),
    TXT(ch_captcha),
    NUM(wr_control),
    NUM(reg_start_ms),
    NUM(reg_end_ms),
    NUM(draw_box_s),
    TXT(draw_seed),
    NUM(drawn_ms),
    NUM(draw_n),
    TXT(draw_state),
};
_Static_assert(sizeof activity_cols / sizeof activity_cols[0] == SK_STORE_ACTIVITY_NCOLS,
               "one entry per column of SK_STORE_ACTIVITY_COLUMNS");

void sk_store_read_activity(sk_store *st, sk_stmt *s, void *dst)
{
    memset(dst, 0, sizeof(struct sk_activity));
    for (int c = 0; c < SK_STORE_ACTIVITY_NCOLS; c++) {
        char *f = (char *)dst + activity_cols[c].off;
        if (activity_cols[c].size)
            st->drv->col_text(s, c, f, activity_cols[c].size);
        else
            *(int64_t *)f = I64(c);
    }
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
    for (int c = 0; c < SK_STORE_ACTIVITY_NCOLS; c++) {
        const char *f = (const char *)a + activity_cols[c].off;
        v[c] = activity_cols[c].size ? SK_T(f) : SK_I(*(const int64_t *)f);
    }
    v[3] = SK_I(a->stock); /* the DB stock starts at the initial stock */
    /* drawn_ms, draw_n, draw_state: the draw is recorded by sk_store_draw_record */
    v[26] = SK_I(0);
    v[27] = SK_I(0);
    v[28] = SK_T("");
}
