/* segment.c - segmented stock on the blocking client: routing of purchases
 * to home segments, the drivers of the borrow, preheat and settle walks
 * (seg_borrow.h, seg_preheat.h, seg_settle.h), and the segment-wide
 * switch and state (design in docs/segments.md). */
#include "engine/segment.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/codes.h"
#include "core/error.h"
#include "core/mix64.h"
#include "engine/seg_preheat.h"
#include "engine/seg_settle.h"
#include "engine/stock_int.h"
#include "redis/script.h"

/* ---- pure ---------------------------------------------------------------- */

int sk_seg_home(uint64_t uid, int segments)
{
    /* neighbouring ids land on unrelated segments */
    return segments <= 1 ? 0 : (int)sk_mix64_bucket(uid, (uint64_t)segments);
}

int64_t sk_seg_share(int64_t initial, int segments, int seg)
{
    if (segments <= 1) return initial;
    return initial / segments + (seg < initial % segments ? 1 : 0);
}

void sk_seg_state_add(struct sk_stock_state *sum, const struct sk_stock_state *o, int first)
{
    if (first) {
        *sum = *o;
        sum->segments = 1;
        sum->in_transit = 0;
        return;
    }
    sum->exists = sum->exists && o->exists;
    sum->open = sum->open && o->open;
    sum->initial += o->initial;
    sum->remaining += o->remaining;
    sum->released += o->released;
    sum->buyers += o->buyers; /* a buyer is counted in its home segment only */
    sum->held += o->held;
    sum->stream_len += o->stream_len;
    sum->backlog = sum->backlog < 0 || o->backlog < 0 ? -1 : sum->backlog + o->backlog;
    sum->dlq += o->dlq;
    sum->xin += o->xin;
    sum->xout += o->xout;
    sum->segments++;
    sum->in_transit = sum->xout - sum->xin;
    if (!sum->fence[0] && o->fence[0]) {
        memcpy(sum->fence, o->fence, sizeof sum->fence);
        memcpy(sum->fence_why, o->fence_why, sizeof sum->fence_why);
        sum->fence_ms = o->fence_ms;
    }
    sum->fenced += o->fenced;
    sum->lost += o->lost;
    sum->oversold += o->oversold;
    sum->adm += o->adm;
}

/* ---- blocking ------------------------------------------------------------ */

int sk_seg_count(sk_redis *r, uint64_t aid, int *segments)
{
    struct sk_keys k;
    sk_keys_for(&k, aid);
    redisReply *rep;
    int rc = sk_redis_cmd(r, &rep, "HGET %s segments", k.meta);
    if (rc < 0) return rc;
    *segments = 1;
    if (rep->type == REDIS_REPLY_STRING) {
        long v = strtol(rep->str, NULL, 10);
        if (v > 1 && v <= SK_SEG_MAX) *segments = (int)v;
    } else if (rep->type != REDIS_REPLY_NIL) {
        rc = sk_stock_proto(r, "HGET segments");
    }
    freeReplyObject(rep);
    return rc;
}

/* Stock of every segment in one pipelined round (each node in parallel on
 * a cluster): the SCAN step of the borrow protocol, blocking. */
static int scan(sk_redis *r, uint64_t aid, struct sk_seg_stocks *st)
{
    sk_seg_stocks_reset(st, st->segments);
    for (int i = 0; i < st->segments; i++) {
        struct sk_keys k;
        const char *argv[2];
        sk_seg_stocks_argv(aid, i, &k, argv);
        int rc = sk_redis_append(r, 2, argv, NULL);
        if (rc < 0) return rc;
    }
    for (int i = 0; i < st->segments; i++) {
        redisReply *rep;
        int rc = sk_redis_read(r, &rep);
        if (rc < 0) return rc;
        sk_seg_stocks_reply(st, i, rep);
        freeReplyObject(rep);
    }
    return st->failed ? sk_stock_proto(r, "GET stock") : 0;
}

int sk_seg_lend(sk_redis *r, uint64_t aid, int from, int to, int64_t want, int64_t *taken, char *id,
                int *trc_out)
{
    struct sk_seg_lend_cmd c;
    sk_seg_lend_cmd(&c, aid, from, to, want, 0, 0);
    redisReply *rep;
    int rc = sk_script_eval(r, SK_SCRIPT_TRANSFER, 3, c.keys, c.nargs, c.args, NULL, &rep);
    if (rc < 0) {
        if (rep) freeReplyObject(rep);
        return rc;
    }
    int trc = SK_RC_BAD_ARGUMENT;
    int64_t left;
    *taken = 0;
    id[0] = 0;
    if (sk_seg_transfer_parse(rep, &trc, taken, id, &left) < 0)
        rc = sk_stock_proto(r, "transfer");
    else if (trc != SK_RC_TRANSFERRED)
        *taken = 0;
    if (trc_out) *trc_out = trc;
    freeReplyObject(rep);
    return rc;
}

/* Sends one command of a protocol step (seg_cmd.h) on the blocking
 * client; *rep (may be set on failure) is the caller's to free. */
static int run_cmd(sk_redis *r, struct sk_seg_cmd *c, redisReply **rep)
{
    *rep = NULL;
    if (c->script == SK_SEG_CMD_PLAIN) return sk_redis_command(r, rep, c->argc, c->argv, NULL);
    return sk_script_eval(r, (enum sk_script_id)c->script, c->nkeys, c->argv, c->nargs,
                          c->argv + c->nkeys, NULL, rep);
}

/* One turn of a walk (preheat, settle): with c its next command into *c,
 * else its reply rep (NULL: none came) fed to it; returns the step the
 * walk is at. */
typedef int walk_turn_fn(void *walk, struct sk_seg_cmd *c, const redisReply *rep);

/* Drives a walk on the blocking client from step until done or failed (a
 * reply that was not one: errstr, the walk's own, becomes r->errstr). */
static int run_walk(sk_redis *r, void *walk, walk_turn_fn *turn, int step, int done, int failed,
                    const char *errstr)
{
    int rc = 0;
    while (rc == 0 && step != done && step != failed) {
        struct sk_seg_cmd c;
        redisReply *rep;
        turn(walk, &c, NULL);
        if ((rc = run_cmd(r, &c, &rep)) == 0) step = turn(walk, NULL, rep);
        if (rep) freeReplyObject(rep);
    }
    if (rc == 0 && step == failed) {
        snprintf(r->errstr, sizeof r->errstr, "%s", errstr);
        rc = r->err = SK_EPROTO;
    }
    return rc;
}

/* The receiving half of a transfer; *applied as sk_seg_xfer_in_read. */
static int xfer_in(sk_redis *r, uint64_t aid, int to, const char *id, int64_t qty, int recovering,
                   int *applied)
{
    struct sk_seg_cmd c;
    sk_seg_xfer_in_cmd(&c, aid, to, id, qty, recovering);
    redisReply *rep;
    int rc = run_cmd(r, &c, &rep);
    if (rc == 0 && (rc = sk_seg_xfer_in_read(rep, applied)) < 0)
        rc = sk_stock_proto(r, rc == SK_ESTATE ? "xfer_in (refused)" : "xfer_in");
    if (rep) freeReplyObject(rep);
    return rc;
}

int sk_seg_move(sk_redis *r, uint64_t aid, int from, int to, int64_t want, int64_t *taken)
{
    char id[SK_XFER_ID_MAX];
    int rc = sk_seg_lend(r, aid, from, to, want, taken, id, NULL);
    if (rc < 0 || *taken == 0) return rc;
    int applied;
    return xfer_in(r, aid, to, id, *taken, 0, &applied);
}

/* One step of a borrow (seg_borrow.h) on the blocking client. p: the
 * borrow's purchases; idx, bp, br: room for b->n of each. */
static int borrow_step(sk_redis *r, struct sk_borrow *b, const struct sk_rate_limits *rl,
                       const struct sk_purchase *p, size_t *idx, struct sk_purchase *bp,
                       struct sk_admission *br)
{
    int rc = 0;
    redisReply *rep = NULL;
    struct sk_seg_lend_cmd c;
    switch (b->step) {
    case SK_BORROW_SCAN:
        if ((rc = scan(r, b->aid, &b->stocks)) == 0) sk_borrow_scanned(b);
        break;
    case SK_BORROW_LEND:
        /* no memory of the lender here: a blocking caller has no host memory */
        sk_borrow_lend_cmd(b, 0, 0, &c);
        rc = sk_script_eval(r, SK_SCRIPT_TRANSFER, 3, c.keys, c.nargs, c.args, NULL, &rep);
        if (rc == 0) sk_borrow_lent(b, rep, 1);
        break;
    case SK_BORROW_READMIT: {
        struct sk_keys k;
        sk_keys_seg(&k, b->aid, b->home);
        size_t m = sk_borrow_open(b, idx);
        for (size_t j = 0; j < m; j++)
            bp[j] = p[idx[j]];
        struct sk_batch_head h = {
            .label = k.label, .rl = rl, .xfer_id = b->xfer_id, .xfer_qty = b->xfer_qty};
        int64_t left = -1;
        if ((rc = sk_stock_batch_call(r, &k, &h, bp, m, br, &left)) == 0)
            sk_borrow_readmitted(b, idx, m, br, left);
        break;
    }
    default: break;
    }
    if (rep) freeReplyObject(rep);
    if (rc == 0 && b->step == SK_BORROW_FAILED) {
        snprintf(r->errstr, sizeof r->errstr, "%s", b->errstr);
        rc = r->err = SK_EPROTO;
    }
    return rc;
}

/* Borrowing for the purchases of one home segment (p/res, n of them) that
 * it could not serve, driven to its end; stocks holds a fresh read of
 * every segment for the first round and the last read after. */
static int home_borrow(sk_redis *r, uint64_t aid, int segments, int home,
                       const struct sk_rate_limits *rl, const struct sk_purchase *p, size_t n,
                       struct sk_admission *res, struct sk_seg_stocks *stocks)
{
    int64_t *qty = malloc(n * sizeof *qty);
    size_t *idx = malloc(n * sizeof *idx);
    struct sk_purchase *bp = malloc(n * sizeof *bp);
    struct sk_admission *br = malloc(n * sizeof *br);
    struct sk_borrow b = {0};
    int rc = qty && idx && bp && br ? 0 : SK_ENOMEM;
    for (size_t i = 0; rc == 0 && i < n; i++)
        qty[i] = p[i].quantity;
    if (rc == 0) rc = sk_borrow_init(&b, aid, segments, home, n, qty, res, stocks);
    if (rc < 0) r->err = rc;
    while (rc == 0 && b.step != SK_BORROW_DONE && b.step != SK_BORROW_FAILED)
        rc = borrow_step(r, &b, rl, p, idx, bp, br);
    if (rc == 0) {
        memcpy(res, b.res, n * sizeof *res);
        *stocks = b.stocks;
    }
    sk_borrow_free(&b);
    free(qty), free(idx), free(bp), free(br);
    return rc;
}

/* The purchases of one home segment, at [start, start + m) of the batch
 * regrouped by home. */
struct home_group {
    int home;
    size_t start, m;
    char *buf; /* the call's arguments and keys, alive until its reply is read */
    const char **args;
    size_t *lens;
    const char **keys;
};

/* One segmented batch (sk_seg_purchase_batch) on its way through its
 * steps: the purchases regrouped by home segment, their answers, and what
 * is known of every segment's stock. */
struct seg_batch {
    sk_redis *r;
    uint64_t aid;
    int segments;
    const struct sk_rate_limits *rl;
    size_t n;
    size_t *idx;             /* hp[i] is the caller's p[idx[i]] */
    struct sk_purchase *hp;  /* the purchases, grouped by home */
    struct sk_admission *hr; /* their answers, in the same order */
    struct home_group g[SK_SEG_MAX];
    int ng;
    struct sk_seg_stocks stocks; /* -1: no stock key, or not read yet */
};

/* Appends the first admission call of group g to the pipeline. */
static int append_home_call(sk_redis *r, uint64_t aid, const struct sk_rate_limits *rl,
                            struct home_group *g, const struct sk_purchase *hp)
{
    struct sk_keys k;
    sk_keys_seg(&k, aid, g->home);
    size_t cap = SK_BATCH_ARG_BYTES(g->m), kcap = SK_BATCH_KEY_BYTES(g->m);
    g->buf = malloc(cap + kcap);
    g->args = malloc(sizeof *g->args * SK_BATCH_ARGC(g->m));
    g->lens = malloc(sizeof *g->lens * SK_BATCH_ARGC(g->m));
    g->keys = malloc(sizeof *g->keys * SK_BATCH_KEYC(g->m));
    if (!g->buf || !g->args || !g->lens || !g->keys) return r->err = SK_ENOMEM;
    struct sk_batch_head h = {.label = k.label, .rl = rl};
    int rc = sk_stock_batch_args_head(&h, hp + g->start, g->m, g->buf, cap, g->args, g->lens);
    if (rc < 0) return r->err = rc;
    int nk = sk_stock_batch_keys(&k, rl, hp + g->start, g->m, g->buf + cap, kcap, g->keys);
    if (nk < 0) return r->err = nk;
    return sk_script_append(r, SK_SCRIPT_PURCHASE_BATCH, nk, g->keys, (int)SK_BATCH_ARGC(g->m),
                            g->args, g->lens);
}

/* Step 1: regroups p by home segment, in order of first appearance. */
static void group_by_home(struct seg_batch *sb, const struct sk_purchase *p)
{
    size_t at = 0;
    while (at < sb->n) {
        int home = -1;
        for (size_t i = 0; i < sb->n && home < 0; i++) {
            int hi = sk_seg_home(p[i].user_id, sb->segments), seen = 0;
            for (int j = 0; j < sb->ng; j++)
                seen |= sb->g[j].home == hi;
            if (!seen) home = hi;
        }
        struct home_group *g = &sb->g[sb->ng++];
        *g = (struct home_group){.home = home, .start = at};
        for (size_t i = 0; i < sb->n; i++)
            if (sk_seg_home(p[i].user_id, sb->segments) == home) {
                sb->idx[at] = i;
                sb->hp[at++] = p[i];
            }
        g->m = at - g->start;
    }
}

/* Step 2: the first call of every home in one pipeline: one round trip on
 * one Redis, every master in parallel on a cluster. */
static int first_calls(struct seg_batch *sb)
{
    sk_redis *r = sb->r;
    int rc = 0, sent = 0;
    unsigned char noscript[SK_SEG_MAX] = {0};
    for (int j = 0; rc == 0 && j < sb->ng; j++)
        if ((rc = append_home_call(r, sb->aid, sb->rl, &sb->g[j], sb->hp)) == 0) sent++;
    for (int j = 0; j < sent; j++) {
        const struct home_group *g = &sb->g[j];
        redisReply *rep = NULL;
        int rrc = sk_redis_read(r, &rep);
        if (rrc < 0) {
            if (rc == 0) rc = rrc;
            break; /* the pipeline is gone: nothing more to read */
        }
        if (rc == 0 && sk_script_is_noscript(rep)) {
            noscript[j] = 1;
        } else if (rc == 0) {
            rc = sk_stock_batch_reply(r, rep, g->m, sb->hr + g->start, &sb->stocks.v[g->home]);
        }
        freeReplyObject(rep);
    }
    /* A fresh node answered NOSCRIPT (the call never ran): the one-call
     * path loads the script, once every reply of the pipeline is read (a
     * command inside it would end it). */
    for (int j = 0; rc == 0 && j < sent; j++) {
        if (!noscript[j]) continue;
        const struct home_group *g = &sb->g[j];
        struct sk_keys k;
        sk_keys_seg(&k, sb->aid, g->home);
        struct sk_batch_head h = {.label = k.label, .rl = sb->rl};
        rc = sk_stock_batch_call(r, &k, &h, sb->hp + g->start, g->m, sb->hr + g->start,
                                 &sb->stocks.v[g->home]);
    }
    return rc;
}

/* Step 3: what a home could not serve borrows; one read of every segment
 * first, shared by the homes' first rounds. */
static int borrow_refused(struct seg_batch *sb)
{
    int rc = scan(sb->r, sb->aid, &sb->stocks);
    for (int j = 0; rc == 0 && j < sb->ng; j++) {
        const struct home_group *g = &sb->g[j];
        int open = 0;
        for (size_t i = 0; i < g->m; i++)
            open |= sk_seg_refused_by_stock(sb->hr[g->start + i].rc);
        if (open)
            rc = home_borrow(sb->r, sb->aid, sb->segments, g->home, sb->rl, sb->hp + g->start, g->m,
                             sb->hr + g->start, &sb->stocks);
    }
    return rc;
}

/* Step 4: the stock left as the last home saw it; 0 there means the sum of
 * every segment (read now unless step 3 just did). */
static int stock_left(struct seg_batch *sb, int scanned, int64_t *remaining)
{
    int last = sb->ng > 0 ? sb->g[sb->ng - 1].home : -1;
    *remaining = last >= 0 ? sb->stocks.v[last] : -1;
    int rc = 0;
    if (*remaining == 0 && !scanned && (rc = scan(sb->r, sb->aid, &sb->stocks)) < 0)
        *remaining = -1;
    if (rc == 0 && *remaining == 0) *remaining = sk_seg_stocks_sum(&sb->stocks);
    return rc;
}

int sk_seg_purchase_batch(sk_redis *r, uint64_t aid, int segments, const struct sk_rate_limits *rl,
                          const struct sk_purchase *p, size_t n, struct sk_admission *res,
                          int64_t *remaining)
{
    if (segments < 2 || segments > SK_SEG_MAX || n == 0 || n > SK_BATCH_MAX)
        return r->err = SK_EINVAL;
    struct seg_batch sb = {.r = r, .aid = aid, .segments = segments, .rl = rl, .n = n};
    int rc = 0;
    sb.idx = malloc(n * sizeof *sb.idx);
    sb.hp = malloc(n * sizeof *sb.hp);
    sb.hr = malloc(n * sizeof *sb.hr);
    if (!sb.idx || !sb.hp || !sb.hr) rc = r->err = SK_ENOMEM;
    sk_seg_stocks_reset(&sb.stocks, segments);
    if (rc == 0) {
        group_by_home(&sb, p);
        rc = first_calls(&sb);
    }
    int need = 0;
    for (size_t i = 0; rc == 0 && i < n; i++)
        need |= sk_seg_refused_by_stock(sb.hr[i].rc);
    if (rc == 0 && need) rc = borrow_refused(&sb);
    for (size_t i = 0; rc == 0 && i < n; i++)
        res[sb.idx[i]] = sb.hr[i];
    if (rc == 0 && remaining) rc = stock_left(&sb, need, remaining);
    for (int j = 0; j < sb.ng; j++)
        free(sb.g[j].buf), free(sb.g[j].args), free(sb.g[j].lens), free(sb.g[j].keys);
    free(sb.idx), free(sb.hp), free(sb.hr);
    return rc;
}

static int preheat_turn(void *walk, struct sk_seg_cmd *c, const redisReply *rep)
{
    if (c) sk_seg_preheat_cmd(walk, c);
    return (int)(c ? ((struct sk_seg_preheat *)walk)->step : sk_seg_preheat_feed(walk, rep));
}

int sk_seg_preheat(sk_redis *r, const struct sk_stock_def *d, int force, int *rc_out,
                   int64_t *stock)
{
    struct sk_seg_preheat p;
    sk_seg_preheat_init(&p, d, force);
    int rc = run_walk(r, &p, preheat_turn, (int)p.step, SK_SPH_DONE, SK_SPH_FAILED, p.errstr);
    if (rc == 0) {
        *rc_out = p.rc;
        if (stock && p.has_stock) *stock = p.stock;
    }
    sk_seg_preheat_free(&p);
    return rc;
}

int sk_seg_set_open(sk_redis *r, uint64_t aid, int segments, int open, int *rc_out)
{
    *rc_out = SK_RC_OK;
    for (int s = 0; s <= segments; s++) {
        /* segments first, the base last: the base says what all of them say */
        struct sk_keys k;
        if (s < segments)
            sk_keys_seg(&k, aid, s);
        else
            sk_keys_for(&k, aid);
        const char *keys[] = {k.meta};
        const char *args[] = {open ? "1" : "0"};
        int64_t v[1];
        int rc = sk_stock_eval_ints(r, SK_SCRIPT_SWITCH, 1, keys, 1, args, v, 1);
        if (rc < 0) return rc;
        if (v[0] != SK_RC_OK) *rc_out = (int)v[0];
    }
    return 0;
}

int sk_seg_state(sk_redis *r, uint64_t aid, int segments, struct sk_stock_state *st)
{
    for (int s = 0; s < segments; s++) {
        struct sk_keys k;
        sk_keys_seg(&k, aid, s);
        struct sk_stock_state one;
        int rc = sk_stock_state_keys(r, &k, &one);
        if (rc < 0) return rc;
        sk_seg_state_add(st, &one, s == 0);
    }
    /* the periodic reconcile's verdict is kept on the base meta */
    struct sk_keys b;
    sk_keys_for(&b, aid);
    redisReply *rep;
    int rc = sk_redis_cmd(r, &rep, "HMGET %s reconcile_drift reconcile_ms", b.meta);
    if (rc < 0) return rc;
    st->reconcile_drift = -1;
    st->reconcile_ms = 0;
    if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2) {
        if (rep->element[0]->type == REDIS_REPLY_STRING)
            st->reconcile_drift = strtoll(rep->element[0]->str, NULL, 10);
        if (rep->element[1]->type == REDIS_REPLY_STRING)
            st->reconcile_ms = strtoll(rep->element[1]->str, NULL, 10);
    }
    freeReplyObject(rep);
    return 0;
}

int sk_seg_settle(sk_redis *r, uint64_t aid, int segments, int64_t *units)
{
    return sk_seg_settle_opt(r, aid, segments, 0, units);
}

int sk_seg_xout_each(sk_redis *r, uint64_t aid, int seg, sk_seg_xout_fn fn, void *arg)
{
    struct sk_keys k;
    sk_keys_seg(&k, aid, seg);
    redisReply *rep;
    int rc = sk_redis_cmd(r, &rep, "HGETALL %s", k.xout);
    if (rc < 0) return rc;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements % 2) {
        freeReplyObject(rep);
        return sk_stock_proto(r, "HGETALL xout");
    }
    for (size_t i = 0; rc == 0 && i + 1 < rep->elements; i += 2) {
        const redisReply *id = rep->element[i], *v = rep->element[i + 1];
        int to;
        int64_t qty;
        if (id->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING ||
            sk_seg_xout_parse(v->str, &to, &qty) < 0)
            continue; /* not ours to judge: left for an operator */
        int del = fn(r, aid, id->str, to, qty, arg);
        if (del < 0) {
            rc = del;
        } else if (del) {
            redisReply *d;
            if ((rc = sk_redis_cmd(r, &d, "HDEL %s %s", k.xout, id->str)) == 0) freeReplyObject(d);
        }
    }
    freeReplyObject(rep);
    return rc;
}

static int settle_turn(void *walk, struct sk_seg_cmd *c, const redisReply *rep)
{
    if (c) sk_seg_settle_cmd(walk, c);
    return (int)(c ? ((struct sk_seg_settle *)walk)->step : sk_seg_settle_feed(walk, rep));
}

int sk_seg_settle_opt(sk_redis *r, uint64_t aid, int segments, int recovering, int64_t *units)
{
    struct sk_seg_settle st;
    sk_seg_settle_init(&st, aid, segments, recovering);
    int rc =
        run_walk(r, &st, settle_turn, (int)st.step, SK_SETTLE_DONE, SK_SETTLE_FAILED, st.errstr);
    *units = st.units;
    sk_seg_settle_free(&st);
    return rc;
}
