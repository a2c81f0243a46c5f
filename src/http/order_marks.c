/* order_marks.c - the order worker's progress per key set, as this process
 * last read it from Redis (order_marks.h). */
#include "http/order_marks.h"

#include <stdlib.h>
#include <string.h>

#include "http/app.h"

enum { MK_EMPTY, MK_NO_STREAM, MK_NO_GROUP, MK_GROUP };

struct mark {
    char label[SK_LABEL_MAX]; /* the key set ("" when the slot is free) */
    int state;
    struct sk_sid ld;     /* last delivered */
    struct sk_sid oldest; /* oldest pending (pending > 0) */
    uint64_t pending;
};

struct sk_order_marks {
    struct mark slot[SK_ORDER_MARKS_SLOTS];
};

static struct mark *slot_for(struct sk_app *app, const struct sk_keys *k, int make)
{
    if (!app->order_marks) {
        if (!make) return NULL;
        app->order_marks = calloc(1, sizeof *app->order_marks);
        if (!app->order_marks) return NULL;
    }
    uint64_t h = 1469598103934665603ull; /* FNV-1a of the label */
    for (const char *p = k->label; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    struct mark *m = &app->order_marks->slot[h % SK_ORDER_MARKS_SLOTS];
    if (strcmp(m->label, k->label) == 0) return m;
    if (!make) return NULL;
    memset(m, 0, sizeof *m);
    snprintf(m->label, sizeof m->label, "%s", k->label);
    return m;
}

static enum sk_order_mark verdict(const struct mark *m, const struct sk_sid *e)
{
    switch (m->state) {
    case MK_NO_GROUP: return SK_ORDER_QUEUED; /* the worker never read this stream */
    case MK_GROUP:
        if (sk_sid_cmp(*e, m->ld) > 0) return SK_ORDER_QUEUED; /* not delivered yet */
        if (m->pending == 0 || sk_sid_cmp(*e, m->oldest) < 0) return SK_ORDER_PERSISTED;
        return SK_ORDER_ASK_DB; /* delivered, maybe not committed */
    default: return SK_ORDER_ASK_DB;
    }
}

int sk_order_marks_persisted(struct sk_app *app, const struct sk_keys *k, const struct sk_sid *e)
{
    const struct mark *m = slot_for(app, k, 0);
    return m && verdict(m, e) == SK_ORDER_PERSISTED;
}

enum sk_order_mark sk_order_marks_note(struct sk_app *app, const struct sk_keys *k,
                                       const redisReply *rep, const struct sk_sid *e)
{
    if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements != 6 ||
        rep->element[1]->type != REDIS_REPLY_INTEGER ||
        rep->element[5]->type != REDIS_REPLY_INTEGER)
        return SK_ORDER_ASK_DB;
    long long st = rep->element[1]->integer;
    const redisReply *ld = rep->element[2], *np = rep->element[3], *old = rep->element[4];
    struct mark got = {.state = st == 0 ? MK_NO_STREAM : st == 1 ? MK_NO_GROUP : MK_GROUP};
    if (st == 2) {
        if (ld->type != REDIS_REPLY_STRING || np->type != REDIS_REPLY_INTEGER ||
            old->type != REDIS_REPLY_STRING || sk_sid_parse(ld->str, ld->len, &got.ld) < 0 ||
            (np->integer > 0 && sk_sid_parse(old->str, old->len, &got.oldest) < 0))
            return SK_ORDER_ASK_DB;
        got.pending = (uint64_t)np->integer;
    } else if (st != 0 && st != 1) {
        return SK_ORDER_ASK_DB;
    }
    struct mark *m = slot_for(app, k, 1);
    if (m) {
        memcpy(got.label, m->label, sizeof got.label);
        *m = got;
    }
    enum sk_order_mark v = verdict(&got, e);
    /* queued only for an entry this stream holds as this order's */
    return v == SK_ORDER_QUEUED && rep->element[5]->integer != 1 ? SK_ORDER_ASK_DB : v;
}

void sk_order_marks_free(struct sk_app *app)
{
    free(app->order_marks);
    app->order_marks = NULL;
}
