/* purchase_borrow.c - the borrow protocol on the async client
 * (purchase_borrow.h): each step of engine/seg_borrow.h sent with
 * sk_aredis, each reply handed back to it. */
#include "http/purchase_borrow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/codes.h"
#include "core/error.h"
#include "engine/seg_borrow.h"
#include "http/api_purchase.h"
#include "http/label_mem.h"
#include "http/purchase_batch.h"
#include "http/seg_stocks.h"

struct sk_purchase_borrow {
    struct sk_app *app;
    struct sk_borrow b;        /* the protocol: step, answers, stocks */
    struct sk_seg_read rd;     /* the SCAN in flight */
    struct sk_pending **items; /* b.n; NULL once answered */
    size_t *idx;               /* the READMIT's purchases (b.n) */
    size_t m;
};

static void borrow_free(struct sk_purchase_borrow *bo)
{
    sk_borrow_free(&bo->b);
    free(bo->items);
    free(bo->idx);
    free(bo);
}

/* Every purchase still waiting answered 503 why; frees bo. */
static void borrow_fail(struct sk_purchase_borrow *bo, const char *why)
{
    for (size_t i = 0; i < bo->b.n; i++)
        if (bo->items[i]) sk_purchase_answer(bo->app, bo->b.aid, bo->items[i], NULL, why);
    borrow_free(bo);
}

/* DONE: the answers stand; every segment seen empty makes the activity
 * sold out in this process once a read a moment later agrees. Frees bo. */
static void borrow_finish(struct sk_purchase_borrow *bo)
{
    for (size_t i = 0; i < bo->b.n; i++)
        if (bo->items[i]) sk_purchase_answer(bo->app, bo->b.aid, bo->items[i], &bo->b.res[i], NULL);
    if (sk_borrow_sold_out(&bo->b)) sk_purchase_suspect_sold_out(bo->app, bo->b.aid);
    borrow_free(bo);
}

static void step(struct sk_purchase_borrow *bo);

static void on_scanned(void *data)
{
    struct sk_purchase_borrow *bo = data;
    sk_borrow_scanned(&bo->b);
    step(bo);
}

static void on_transfer(void *data, redisReply *rep)
{
    struct sk_purchase_borrow *bo = data;
    sk_borrow_lent(&bo->b, rep, !sk_purchase_unsure(bo->app));
    /* a fenced lender: what this host knew of it is void */
    if (bo->b.final_rc == SK_RC_RECOVERING)
        sk_labelmem_forget(sk_labelmem_host(), bo->b.aid, bo->b.lender);
    step(bo);
}

static void lend(struct sk_purchase_borrow *bo)
{
    int64_t epoch, adm;
    sk_labelmem_get(sk_labelmem_host(), bo->b.aid, bo->b.lender, &epoch, &adm);
    struct sk_seg_lend_cmd c;
    sk_borrow_lend_cmd(&bo->b, epoch, adm, &c);
    if (sk_aredis_eval_wait(bo->app->redis, SK_SCRIPT_TRANSFER, SK_K_TRANSFER_N, c.keys, c.nargs,
                            c.args, NULL, on_transfer, bo) < 0)
        borrow_fail(bo, "redis is unreachable; try again");
}

/* The open purchases go home in a batch of their own, the transfer first. */
static void readmit(struct sk_purchase_borrow *bo)
{
    struct sk_batch *b = sk_batch_new(bo->app, bo->b.aid, bo->b.home);
    if (!b) {
        borrow_fail(bo, "out of memory");
        return;
    }
    bo->m = sk_borrow_open(&bo->b, bo->idx);
    b->borrow = bo;
    snprintf(b->xfer_id, sizeof b->xfer_id, "%s", bo->b.xfer_id);
    b->xfer_qty = bo->b.xfer_qty;
    b->n = bo->m;
    for (size_t j = 0; j < bo->m; j++)
        b->items[j] = bo->items[bo->idx[j]];
    sk_batch_send(bo->app, b);
}

static void step(struct sk_purchase_borrow *bo)
{
    switch (bo->b.step) {
    case SK_BORROW_SCAN:
        sk_seg_read_start(&bo->rd, bo->app->redis, bo->b.aid, &bo->b.stocks, on_scanned, bo);
        return;
    case SK_BORROW_LEND: lend(bo); return;
    case SK_BORROW_READMIT: readmit(bo); return;
    case SK_BORROW_DONE: borrow_finish(bo); return;
    case SK_BORROW_FAILED:
        borrow_fail(bo, bo->b.unconfirmed ? "replicas did not confirm a stock transfer; try again"
                                          : "redis is unreachable; try again");
        return;
    }
}

void sk_purchase_borrow_start(struct sk_app *app, uint64_t aid, int segments, int home,
                              struct sk_pending **items, const struct sk_admission *res, size_t n)
{
    struct sk_purchase_borrow *bo = calloc(1, sizeof *bo);
    int64_t qty[SK_BATCH_MAX];
    int rc = bo && n <= SK_BATCH_MAX ? 0 : SK_ENOMEM;
    if (rc == 0) {
        bo->app = app;
        bo->items = malloc(n * sizeof *bo->items);
        bo->idx = malloc(n * sizeof *bo->idx);
        for (size_t i = 0; i < n; i++)
            qty[i] = items[i]->p.quantity;
        rc = bo->items && bo->idx ? sk_borrow_init(&bo->b, aid, segments, home, n, qty, res, NULL)
                                  : SK_ENOMEM;
    }
    if (rc < 0) {
        if (bo) borrow_free(bo);
        sk_purchase_fail(app, aid, items, n, "out of memory");
        return;
    }
    memcpy(bo->items, items, n * sizeof *items);
    step(bo);
}

int sk_purchase_borrow_segments(const struct sk_purchase_borrow *bo)
{
    return bo->b.segments;
}

void sk_purchase_borrow_readmitted(struct sk_purchase_borrow *bo, const struct sk_admission *res,
                                   size_t n, int64_t remaining)
{
    /* the batch answered every purchase but the stock refusals */
    for (size_t j = 0; j < n && j < bo->m; j++)
        if (!sk_seg_refused_by_stock(res[j].rc)) bo->items[bo->idx[j]] = NULL;
    sk_borrow_readmitted(&bo->b, bo->idx, n < bo->m ? n : bo->m, res, remaining);
    step(bo);
}

void sk_purchase_borrow_drop(struct sk_purchase_borrow *bo)
{
    borrow_free(bo);
}
