/* purchase_soldout.c - the sold-out mark and its re-check
 * (purchase_soldout.h). */
#include "http/purchase_soldout.h"

#include <stdlib.h>

#include "core/clock.h"
#include "engine/keys.h"
#include "http/seg_stocks.h"

/* How often a sold-out activity is re-checked, so released stock sells. */
#define SOLDOUT_RECHECK_MS 250
#define SUSPECT_CONFIRM_MS 20 /* far longer than a transfer's lend-to-readmit round trip */

void sk_purchase_mark_sold_out(struct sk_app *app, uint64_t aid)
{
    struct sk_act_cache *c = sk_app_act(app, aid, SK_ACT_KNOWN);
    if (c && !c->sold_out) {
        c->sold_out = 1;
        c->checked_ms = sk_mono_ms();
    }
}

void sk_purchase_suspect_sold_out(struct sk_app *app, uint64_t aid)
{
    struct sk_act_cache *c = sk_app_act(app, aid, SK_ACT_KNOWN);
    if (!c || c->sold_out || c->suspect) return;
    c->suspect = 1;
    /* the tick re-reads it SUSPECT_CONFIRM_MS from now */
    c->checked_ms = sk_mono_ms() - SOLDOUT_RECHECK_MS + SUSPECT_CONFIRM_MS;
}

/* The cache array may move while a check is in flight: carry the id. */
struct stock_check {
    struct sk_app *app;
    uint64_t id;
    struct sk_seg_stocks st; /* segmented activities: every segment's stock */
    struct sk_seg_read rd;
};

/* Stock back above zero (a release), or the activity is gone: stop
 * answering locally. A watched activity (a segmented waiting room) that a
 * read saw empty everywhere is sold out here from now on (empty: 1 when
 * the read saw every unit gone, 0 otherwise or when it failed). */
static void recheck_done(struct sk_app *app, uint64_t id, int back, int empty)
{
    struct sk_act_cache *c = sk_app_act(app, id, 0);
    if (!c) return;
    c->rechecking = 0;
    c->checked_ms = sk_mono_ms();
    if (back) c->sold_out = 0;
    /* sold out on two empty reads SUSPECT_CONFIRM_MS apart (or a borrow's
     * and a read): one read may fall between another process's lend and
     * its re-admission, when the units it moves are in no stock */
    if (empty && !c->sold_out && (c->watch || c->suspect)) {
        if (c->suspect) {
            c->sold_out = 1;
            c->suspect = 0;
        } else {
            c->suspect = 1;
            c->checked_ms = c->checked_ms - SOLDOUT_RECHECK_MS + SUSPECT_CONFIRM_MS;
        }
    } else {
        c->suspect = 0;
    }
}

static void on_stock_check(void *data, redisReply *rep)
{
    struct stock_check *chk = data;
    recheck_done(chk->app, chk->id,
                 rep && (rep->type == REDIS_REPLY_NIL ||
                         (rep->type == REDIS_REPLY_STRING && strtoll(rep->str, NULL, 10) > 0)),
                 0);
    free(chk);
}

static void on_segments_checked(void *data)
{
    struct stock_check *chk = data;
    int back = 0;
    /* a segment without stock key counts as back: the activity is gone */
    for (int i = 0; !chk->st.failed && i < chk->st.segments; i++)
        back |= chk->st.v[i] != 0;
    recheck_done(chk->app, chk->id, back, sk_seg_stocks_empty(&chk->st));
    free(chk);
}

void sk_purchase_tick(struct sk_app *app)
{
    int64_t now = sk_mono_ms();
    for (size_t i = 0; i < app->n_acts; i++) {
        struct sk_act_cache *c = &app->acts[i];
        if (!(c->sold_out || c->suspect || (c->watch && c->segments > 1)) || c->rechecking ||
            now - c->checked_ms < SOLDOUT_RECHECK_MS)
            continue;
        struct stock_check *chk = calloc(1, sizeof *chk);
        if (!chk) return;
        chk->app = app;
        chk->id = c->id;
        c->rechecking = 1;
        if (c->segments > 1) {
            chk->st.segments = c->segments;
            /* may finish (and free chk) at once */
            sk_seg_read_start(&chk->rd, app->redis, c->id, &chk->st, on_segments_checked, chk);
            continue;
        }
        struct sk_keys k;
        sk_keys_for(&k, c->id);
        const char *argv[] = {"GET", k.stock};
        if (sk_aredis_command(app->redis, on_stock_check, chk, 2, argv, NULL) < 0) {
            c->rechecking = 0;
            free(chk);
        }
    }
}
