/* store_row.c - the backends' rows into the store's structs (store_int.h):
 * which column holds which field is said here once, in the order of
 * SK_STORE_ACTIVITY_COLUMNS, SK_STORE_ORDER_COLUMNS, SK_STORE_AUDIT_COLUMNS
 * and SK_STORE_MARK_COLUMNS; a backend only says how it reads one number
 * and one text of a row. */
#include "store/store_int.h"

#include <string.h>

#define I64(c) r->i64(r, (c))
#define TEXT(c, f) r->text(r, (c), (f), sizeof(f))

void sk_store_read_activity(const struct sk_store_row *r, void *dst)
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
                            &a->wr_control,
                            &a->reg_start_ms,
                            &a->reg_end_ms,
                            &a->draw_box_s,
                            NULL,
                            &a->drawn_ms,
                            &a->draw_n,
                            NULL};
    for (int c = 0; c < (int)(sizeof num / sizeof num[0]); c++)
        if (num[c]) *num[c] = I64(c);
    a->id = (uint64_t)I64(0);
    TEXT(1, a->name);
    TEXT(9, a->state);
    TEXT(16, a->wr_seed);
    TEXT(21, a->draw_seed);
    TEXT(24, a->draw_state);
}

void sk_store_read_order(const struct sk_store_row *r, void *dst)
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

void sk_store_read_audit(const struct sk_store_row *r, void *dst)
{
    struct sk_audit *a = dst;
    memset(a, 0, sizeof *a);
    a->id = I64(0);
    a->at_ms = I64(1);
    a->activity_id = (uint64_t)I64(2);
    TEXT(3, a->kind);
    TEXT(4, a->detail);
}

void sk_store_read_mark(const struct sk_store_row *r, void *dst)
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

void sk_store_read_stock(const struct sk_store_row *r, void *dst)
{
    struct sk_store_stock *s = dst;
    s->stock = I64(0);
    s->expected = I64(1);
    s->initial = I64(2);
}

void sk_store_read_registration(const struct sk_store_row *r, void *dst)
{
    struct sk_registration *g = dst;
    memset(g, 0, sizeof *g);
    g->user_id = (uint64_t)I64(0); /* same bits, see store.h */
    g->draw_place = I64(1);        /* NULL reads 0: not drawn */
    g->created_ms = I64(2);
}

void sk_store_read_id(const struct sk_store_row *r, void *dst)
{
    *(uint64_t *)dst = (uint64_t)I64(0);
}

void sk_store_activity_values(const struct sk_activity *a,
                              struct sk_store_value v[SK_STORE_ACTIVITY_NCOLS])
{
    const struct sk_store_value row[SK_STORE_ACTIVITY_NCOLS] = {
        {.num = (int64_t)a->id},                      /* below 2^63: validated */
        {.text = a->name},         {.num = a->stock}, /* stock_initial */
        {.num = a->stock},         {.num = a->per_user_limit}, {.num = a->max_per_order},
        {.num = a->start_ms},      {.num = a->end_ms},         {.num = a->pay_timeout_s},
        {.text = a->state},        {.num = a->created_ms},     {.num = a->rl_per_user_per_s},
        {.num = a->rl_burst},      {.num = a->segments},       {.num = a->wr_passes_per_s},
        {.num = a->wr_pass_ttl_s}, {.text = a->wr_seed},         {.num = a->wr_control},
        {.num = a->reg_start_ms},  {.num = a->reg_end_ms},      {.num = a->draw_box_s},
        {.text = a->draw_seed},    {.num = 0} /* drawn_ms */,   {.num = 0} /* draw_n */,
        {.text = ""} /* draw_state */,
    };
    memcpy(v, row, sizeof row);
}
