/* seg_borrow.c - the segment borrow protocol, without I/O (seg_borrow.h):
 * the commands of each step and what their replies decide. */
#include "engine/seg_borrow.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/codes.h"
#include "core/error.h"

int sk_seg_pick_lender(const int64_t *stocks, int segments, int skip)
{
    int best = -1;
    for (int i = 0; i < segments; i++)
        if (i != skip && stocks[i] > 0 && (best < 0 || stocks[i] > stocks[best])) best = i;
    return best;
}

int sk_seg_refused_by_stock(int rc)
{
    return rc == SK_RC_SOLD_OUT || rc == SK_RC_INSUFFICIENT;
}

/* ---- every segment's stock at once -------------------------------------- */

void sk_seg_stocks_reset(struct sk_seg_stocks *s, int segments)
{
    s->segments = segments;
    s->failed = 0;
    for (int i = 0; i < SK_SEG_MAX; i++)
        s->v[i] = -1;
}

void sk_seg_stocks_argv(uint64_t aid, int seg, struct sk_keys *k, const char *argv[2])
{
    sk_keys_seg(k, aid, seg);
    argv[0] = "GET";
    argv[1] = k->stock;
}

void sk_seg_stocks_reply(struct sk_seg_stocks *s, int seg, const redisReply *rep)
{
    if (!rep || (rep->type != REDIS_REPLY_STRING && rep->type != REDIS_REPLY_NIL))
        s->failed = 1;
    else if (seg >= 0 && seg < SK_SEG_MAX)
        s->v[seg] = rep->type == REDIS_REPLY_NIL ? -1 : strtoll(rep->str, NULL, 10);
}

int sk_seg_stocks_empty(const struct sk_seg_stocks *s)
{
    int empty = !s->failed;
    for (int i = 0; empty && i < s->segments; i++)
        empty = s->v[i] == 0;
    return empty;
}

/* ---- the lending half ---------------------------------------------------- */

void sk_seg_lend_cmd(struct sk_seg_lend_cmd *c, uint64_t aid, int from, int to, int64_t want,
                     int64_t epoch, int64_t adm)
{
    sk_keys_seg(&c->k, aid, from);
    const char *keys[] = {SK_K_TRANSFER_EACH(SK_KEY_OF, &c->k)};
    memcpy(c->keys, keys, sizeof keys);
    snprintf(c->buf[SK_A_TRANSFER_TO], sizeof *c->buf, "%d", to);
    snprintf(c->buf[SK_A_TRANSFER_WANT], sizeof *c->buf, "%" PRId64, want);
    snprintf(c->buf[SK_A_TRANSFER_EPOCH], sizeof *c->buf, "%" PRId64, epoch);
    snprintf(c->buf[SK_A_TRANSFER_ADM], sizeof *c->buf, "%" PRId64, adm > 0 ? adm : 0);
    for (int i = 0; i < SK_A_TRANSFER_N; i++)
        c->args[i] = c->buf[i];
    /* without a memory of the lender the script checks nothing: the
     * arguments before epoch */
    c->nargs = epoch > 0 ? SK_A_TRANSFER_N : SK_A_TRANSFER_EPOCH;
}

int sk_seg_lend_refusal_final(int rc)
{
    /* a fenced lender (docs/recovery.md): its stock may be units already
     * sold; the borrowers retry once it is rebuilt */
    return rc == SK_RC_CLOSED || rc == SK_RC_UNKNOWN_ACTIVITY || rc == SK_RC_BAD_ARGUMENT ||
           rc == SK_RC_RECOVERING;
}

int sk_seg_transfer_parse(const redisReply *rep, int *rc, int64_t *taken, char *id, int64_t *left)
{
    if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements != 4 ||
        rep->element[0]->type != REDIS_REPLY_INTEGER ||
        rep->element[1]->type != REDIS_REPLY_INTEGER ||
        rep->element[2]->type != REDIS_REPLY_STRING ||
        rep->element[3]->type != REDIS_REPLY_INTEGER || rep->element[2]->len >= SK_XFER_ID_MAX)
        return SK_EPROTO;
    *rc = (int)rep->element[0]->integer;
    *taken = rep->element[1]->integer;
    memcpy(id, rep->element[2]->str, rep->element[2]->len);
    id[rep->element[2]->len] = 0;
    *left = rep->element[3]->integer;
    return 0;
}

/* ---- the borrow ---------------------------------------------------------- */

static enum sk_borrow_step fail(struct sk_borrow *b, const char *why)
{
    snprintf(b->errstr, sizeof b->errstr, "%s", why);
    return b->step = SK_BORROW_FAILED;
}

/* With a fresh read of every segment: the lender, or the refusals stand. */
static enum sk_borrow_step pick(struct sk_borrow *b)
{
    int from = sk_seg_pick_lender(b->stocks.v, b->segments, b->home);
    if (from < 0) return b->step = SK_BORROW_DONE; /* every other segment is empty */
    b->lender = from;
    return b->step = SK_BORROW_LEND;
}

/* One more round, if any is left. */
static enum sk_borrow_step again(struct sk_borrow *b)
{
    if (++b->round >= b->segments) return b->step = SK_BORROW_DONE;
    return b->step = SK_BORROW_SCAN;
}

int sk_borrow_init(struct sk_borrow *b, uint64_t aid, int segments, int home, size_t n,
                   const int64_t *qty, const struct sk_admission *res,
                   const struct sk_seg_stocks *stocks)
{
    memset(b, 0, sizeof *b);
    if (segments < 2 || segments > SK_SEG_MAX || home < 0 || home >= segments || n == 0 ||
        n > SK_BATCH_MAX)
        return SK_EINVAL;
    b->qty = malloc(n * sizeof *b->qty);
    b->res = malloc(n * sizeof *b->res);
    if (!b->qty || !b->res) {
        sk_borrow_free(b);
        return SK_ENOMEM;
    }
    b->aid = aid;
    b->segments = segments;
    b->home = home;
    b->n = n;
    b->lender = -1;
    memcpy(b->qty, qty, n * sizeof *qty);
    memcpy(b->res, res, n * sizeof *res);
    size_t open = 0;
    for (size_t i = 0; i < n; i++)
        open += sk_seg_refused_by_stock(res[i].rc);
    if (!open) {
        b->stocks = stocks ? *stocks : b->stocks;
        b->stocks.segments = segments;
        b->step = SK_BORROW_DONE; /* nothing to borrow for */
    } else if (stocks) {
        b->stocks = *stocks;
        b->stocks.segments = segments;
        pick(b);
    } else {
        sk_seg_stocks_reset(&b->stocks, segments);
        b->step = SK_BORROW_SCAN;
    }
    return 0;
}

void sk_borrow_free(struct sk_borrow *b)
{
    free(b->qty);
    free(b->res);
    b->qty = NULL;
    b->res = NULL;
}

enum sk_borrow_step sk_borrow_scanned(struct sk_borrow *b)
{
    if (b->stocks.failed) return fail(b, "unexpected reply to GET stock");
    return pick(b);
}

size_t sk_borrow_open(const struct sk_borrow *b, size_t *idx)
{
    size_t m = 0;
    for (size_t i = 0; i < b->n; i++)
        if (sk_seg_refused_by_stock(b->res[i].rc)) idx[m++] = i;
    return m;
}

int64_t sk_borrow_want(const struct sk_borrow *b)
{
    int64_t want = 0;
    for (size_t i = 0; i < b->n; i++)
        if (sk_seg_refused_by_stock(b->res[i].rc)) want += b->qty[i];
    return want;
}

void sk_borrow_lend_cmd(const struct sk_borrow *b, int64_t epoch, int64_t adm,
                        struct sk_seg_lend_cmd *c)
{
    sk_seg_lend_cmd(c, b->aid, b->lender, b->home, sk_borrow_want(b), epoch, adm);
}

enum sk_borrow_step sk_borrow_lent(struct sk_borrow *b, const redisReply *rep, int confirmed)
{
    int trc;
    int64_t taken = 0, left;
    char id[SK_XFER_ID_MAX];
    if (sk_seg_transfer_parse(rep, &trc, &taken, id, &left) < 0)
        return fail(b, rep ? "unexpected reply to transfer" : "no answer to transfer");
    if (trc == SK_RC_TRANSFERRED && taken > 0 && !confirmed) {
        b->unconfirmed = 1;
        return fail(b, "replicas did not confirm a stock transfer");
    }
    if (sk_seg_lend_refusal_final(trc)) {
        /* closed (or gone, or fenced) since: that is the answer, not sold out */
        b->final_rc = trc;
        for (size_t i = 0; i < b->n; i++)
            if (sk_seg_refused_by_stock(b->res[i].rc)) b->res[i].rc = trc;
        return b->step = SK_BORROW_DONE;
    }
    if (trc != SK_RC_TRANSFERRED || taken <= 0) return again(b); /* the lender drained meanwhile */
    snprintf(b->xfer_id, sizeof b->xfer_id, "%s", id);
    b->xfer_qty = taken;
    return b->step = SK_BORROW_READMIT;
}

enum sk_borrow_step sk_borrow_readmitted(struct sk_borrow *b, const size_t *idx, size_t m,
                                         const struct sk_admission *got, int64_t home_left)
{
    int open = 0;
    for (size_t j = 0; j < m; j++) {
        if (idx[j] >= b->n) continue;
        b->res[idx[j]] = got[j];
        open |= sk_seg_refused_by_stock(got[j].rc);
    }
    b->stocks.v[b->home] = home_left;
    b->xfer_id[0] = 0;
    b->xfer_qty = 0;
    if (!open) return b->step = SK_BORROW_DONE;
    return again(b);
}

int sk_borrow_sold_out(const struct sk_borrow *b)
{
    return b->step == SK_BORROW_DONE && !b->final_rc && sk_seg_stocks_empty(&b->stocks);
}
