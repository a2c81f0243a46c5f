/* segment.c - segmented stock on the blocking client: the drivers of the
 * preheat and settle walks (seg_preheat.h, seg_settle.h), a transfer's
 * halves, and the segment-wide switch and state (design in
 * docs/segments.md). Buyers' purchases, home routing and the borrow are
 * serve's (src/http/purchase_batch.c, purchase_borrow.c). */
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

int sk_seg_lend(sk_redis *r, uint64_t aid, int from, int to, int64_t want, int64_t *taken, char *id,
                int *trc_out)
{
    struct sk_seg_lend_cmd c;
    sk_seg_lend_cmd(&c, aid, from, to, want, 0, 0);
    redisReply *rep;
    int rc =
        sk_script_eval(r, SK_SCRIPT_TRANSFER, SK_K_TRANSFER_N, c.keys, c.nargs, c.args, NULL, &rep);
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
        const char *keys[] = {SK_K_SWITCH_EACH(SK_KEY_OF, &k)};
        const char *args[SK_A_SWITCH_N] = {[SK_A_SWITCH_OPEN] = open ? "1" : "0"};
        int64_t v[1];
        int rc =
            sk_stock_eval_ints(r, SK_SCRIPT_SWITCH, SK_K_SWITCH_N, keys, SK_A_SWITCH_N, args, v, 1);
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
    const char *argv[] = {"HMGET", b.meta, SK_M_RECONCILED_FIELDS};
    int rc = sk_redis_command(r, &rep, (int)(sizeof argv / sizeof *argv), argv, NULL);
    if (rc < 0) return rc;
    st->reconcile_drift = -1;
    st->reconcile_ms = 0;
    if (rep->type == REDIS_REPLY_ARRAY && rep->elements == SK_M_RECONCILED_N) {
        const redisReply *d = rep->element[SK_M_RECONCILED_RECONCILE_DRIFT],
                         *ms = rep->element[SK_M_RECONCILED_RECONCILE_MS];
        if (d->type == REDIS_REPLY_STRING) st->reconcile_drift = strtoll(d->str, NULL, 10);
        if (ms->type == REDIS_REPLY_STRING) st->reconcile_ms = strtoll(ms->str, NULL, 10);
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
