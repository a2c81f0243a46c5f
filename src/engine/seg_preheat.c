/* seg_preheat.c - the segmented preheat walk without I/O (seg_preheat.h). */
#include "engine/seg_preheat.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/codes.h"
#include "engine/activity.h"
#include "engine/segment.h"

static enum sk_seg_preheat_step done(struct sk_seg_preheat *p, int rc, int64_t stock)
{
    p->rc = rc;
    p->stock = stock;
    p->has_stock = 1;
    return p->step = SK_SPH_DONE;
}

/* Refused before anything was read: no stock figure either. */
static enum sk_seg_preheat_step refuse(struct sk_seg_preheat *p)
{
    p->rc = SK_RC_BAD_ARGUMENT;
    return p->step = SK_SPH_DONE;
}

static enum sk_seg_preheat_step fail(struct sk_seg_preheat *p, const char *what)
{
    snprintf(p->errstr, sizeof p->errstr, "unexpected reply to %s", what);
    return p->step = SK_SPH_FAILED;
}

void sk_seg_preheat_init(struct sk_seg_preheat *p, const struct sk_stock_def *d, int force)
{
    memset(p, 0, sizeof *p);
    p->d = *d;
    p->force = force;
    p->stock = -1;
    p->step = SK_SPH_COUNT;
    int segs = (int)d->segments;
    if (segs < 2 || segs > SK_SEG_MAX || d->initial < segs) refuse(p);
}

void sk_seg_preheat_free(struct sk_seg_preheat *p)
{
    sk_seg_settle_free(&p->settle);
}

_Static_assert(SK_PREHEAT_NKEYS + SK_PREHEAT_ARGC <= SK_SEG_CMD_MAXARG,
               "a segment's preheat command fits in struct sk_seg_cmd");

static void num(struct sk_seg_cmd *c, int i, int64_t v)
{
    snprintf(c->num[i], sizeof c->num[i], "%" PRId64, v);
}

/* preheat.lua of segment p->seg: its share of the stock. */
static void write_cmd(const struct sk_seg_preheat *p, struct sk_seg_cmd *c)
{
    int segs = (int)p->d.segments, s = p->seg;
    struct sk_stock_def sd = p->d;
    /* forced: each segment keeps what its buyers hold, the rest is shared */
    sd.initial = p->force ? p->held[s] + sk_seg_share(p->d.initial - p->total_held, segs, s)
                          : sk_seg_share(p->d.initial, segs, s);
    const char *args[SK_PREHEAT_ARGC];
    int nargs = sk_stock_preheat_args(&sd, p->force, c->num, args);
    if (p->d.wr_rate > 0 || p->d.dr_box_ms > 0)
        args[SK_A_PREHEAT_WR_SEED] = p->d.wr_seed; /* sd is gone when the command is sent */
    args[SK_A_PREHEAT_STORE] = p->d.store_id;
    snprintf(c->num[SK_A_PREHEAT_SEG], sizeof *c->num, "%d", s);
    snprintf(c->num[SK_A_PREHEAT_SEG_OF], sizeof *c->num, "%d", segs);
    /* every segment was checked: none is gone with orders held */
    c->num[SK_A_PREHEAT_DB_HELD][0] = 0;
    sk_keys_seg(&c->k, p->d.id, s);
    c->script = SK_SCRIPT_PREHEAT;
    c->nkeys = SK_PREHEAT_NKEYS;
    c->nargs = nargs;
    sk_keys_preheat(&c->k, c->argv);
    for (int i = 0; i < nargs; i++)
        c->argv[SK_PREHEAT_NKEYS + i] = args[i];
}

/* The base meta: the definition and the segment count (the routing mark),
 * written last so routing starts when the segments exist. */
static void base_cmd(const struct sk_seg_preheat *p, struct sk_seg_cmd *c)
{
    const struct sk_stock_def *d = &p->d;
    sk_keys_for(&c->k, d->id);
    snprintf(c->num[0], sizeof c->num[0], "%" PRIu64, d->id);
    num(c, 1, d->segments);
    num(c, 2, d->initial);
    num(c, 3, d->per_user_limit);
    num(c, 4, d->max_per_order);
    num(c, 5, d->start_ms);
    num(c, 6, d->end_ms);
    /* ch: the challenge of the queue join, whose queue lives here ("": none) */
    const char *argv[] = {"HSET",    c->k.meta, "id",       c->num[0], "segments",
                          c->num[1], "initial", c->num[2],  "limit",   c->num[3],
                          "max_qty", c->num[4], "start_ms", c->num[5], "end_ms",
                          c->num[6], "open",    "0",        "ch",      d->ch};
    memcpy(c->argv, argv, sizeof argv);
    c->argc = (int)(sizeof argv / sizeof *argv);
    if (d->store_id[0]) {
        c->argv[c->argc++] = "store_id";
        c->argv[c->argc++] = d->store_id;
    }
}

/* The waiting room's queue lives under the base tag (docs/waiting-room.md). */
static void base_wr_cmd(const struct sk_seg_preheat *p, struct sk_seg_cmd *c)
{
    const struct sk_stock_def *d = &p->d;
    sk_keys_for(&c->k, d->id);
    if (d->wr_rate > 0) {
        num(c, 0, d->wr_rate);
        num(c, 1, d->wr_ttl_s);
        /* the emergency controls as stored ("" = off: the queue's scripts
         * read an empty field as absent) */
        const char *hold = d->wr_control & SK_WR_QUEUE_ALL ? "all"
                           : d->wr_control & SK_WR_PAUSE   ? "pause"
                                                           : "";
        const char *argv[] = {"HSET",    c->k.meta,   "wr_rate",
                              c->num[0], "wr_ttl",    c->num[1],
                              "wr_seed", d->wr_seed,  "wr_hold",
                              hold,      "wr_nojoin", d->wr_control & SK_WR_NO_JOINS ? "1" : ""};
        memcpy(c->argv, argv, sizeof argv);
        c->argc = (int)(sizeof argv / sizeof *argv);
    } else {
        const char *argv[] = {"HDEL", c->k.meta, "wr_rate", "wr_ttl", "wr_seed"};
        memcpy(c->argv, argv, sizeof argv);
        c->argc = (int)(sizeof argv / sizeof *argv);
    }
}

void sk_seg_preheat_cmd(const struct sk_seg_preheat *p, struct sk_seg_cmd *c)
{
    memset(c, 0, sizeof *c);
    c->script = SK_SEG_CMD_PLAIN;
    switch (p->step) {
    case SK_SPH_COUNT: {
        sk_keys_for(&c->k, p->d.id);
        const char *const argv[] = {"HMGET", c->k.meta, SK_M_SEGS_FIELDS};
        memcpy(c->argv, argv, sizeof argv);
        c->argc = (int)(sizeof argv / sizeof *argv);
        break;
    }
    case SK_SPH_STAMP:
        sk_keys_for(&c->k, p->d.id);
        c->argv[0] = "HSETNX";
        c->argv[1] = c->k.meta;
        c->argv[2] = "store_id";
        c->argv[3] = p->d.store_id;
        c->argc = 4;
        break;
    case SK_SPH_SETTLE: sk_seg_settle_cmd(&p->settle, c); break;
    case SK_SPH_STATE:
        sk_keys_seg(&c->k, p->d.id, p->seg);
        sk_keys_state(&c->k, c->argv);
        c->script = SK_SCRIPT_STATE;
        c->nkeys = SK_STATE_NKEYS;
        break;
    case SK_SPH_WRITE: write_cmd(p, c); break;
    case SK_SPH_BASE: base_cmd(p, c); break;
    case SK_SPH_BASE_WR: base_wr_cmd(p, c); break;
    default: break;
    }
}

static enum sk_seg_preheat_step to_states(struct sk_seg_preheat *p)
{
    p->seg = 0;
    return p->step = SK_SPH_STATE;
}

static enum sk_seg_preheat_step counted(struct sk_seg_preheat *p, const redisReply *rep)
{
    int have = 1, segs = (int)p->d.segments;
    if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements != SK_M_SEGS_N)
        return fail(p, "HMGET segments store_id");
    const redisReply *sg = rep->element[SK_M_SEGS_SEGMENTS],
                     *owner = rep->element[SK_M_SEGS_STORE_ID];
    if (sg->type == REDIS_REPLY_STRING) {
        long v = strtol(sg->str, NULL, 10);
        if (v > 1 && v <= SK_SEG_MAX) have = (int)v;
    } else if (sg->type != REDIS_REPLY_NIL) {
        return fail(p, "HMGET segments store_id");
    }
    /* preheated from another store: that store's, left alone */
    if (p->d.store_id[0] && owner->type == REDIS_REPLY_STRING && strcmp(owner->str, p->d.store_id))
        return done(p, SK_RC_OTHER_STORE, -1);
    /* a changed segment count would strand stock in the old segments */
    if (have > 1 && have != segs) return refuse(p);
    /* A forced preheat restarts the transfer counters: finish transfers a
     * dead borrower left half done first, or settling one later would add
     * its units on top of the new shares. */
    if (p->force && have > 1) {
        sk_seg_settle_init(&p->settle, p->d.id, segs, 0);
        return p->step = SK_SPH_SETTLE;
    }
    return to_states(p);
}

static enum sk_seg_preheat_step settled(struct sk_seg_preheat *p, const redisReply *rep)
{
    enum sk_seg_settle_step s = sk_seg_settle_feed(&p->settle, rep);
    if (s == SK_SETTLE_FAILED) {
        snprintf(p->errstr, sizeof p->errstr, "%s", p->settle.errstr);
        return p->step = SK_SPH_FAILED;
    }
    return s == SK_SETTLE_DONE ? to_states(p) : p->step;
}

static enum sk_seg_preheat_step stated(struct sk_seg_preheat *p, const redisReply *rep)
{
    struct sk_stock_state st;
    if (sk_stock_state_parse(rep, &st) < 0) return fail(p, "state");
    /* a segment being rebuilt, or gone while the database holds orders:
     * rebuilt from the orders instead (docs/recovery.md), before anything
     * is written */
    if (st.fenced || (!st.exists && p->d.db_held > 0)) return done(p, SK_RC_RECOVERING, -1);
    if (st.exists && st.open && p->force) return done(p, SK_RC_IS_OPEN, st.remaining);
    p->held[p->seg] = st.exists ? st.held : 0;
    p->total_held += p->held[p->seg];
    if (++p->seg < p->d.segments) return p->step;
    if (p->force && p->d.initial < p->total_held) return done(p, SK_RC_BELOW_SOLD, -1);
    p->seg = 0;
    return p->step = SK_SPH_WRITE;
}

static enum sk_seg_preheat_step written(struct sk_seg_preheat *p, const redisReply *rep)
{
    if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements < 1 ||
        rep->element[0]->type != REDIS_REPLY_INTEGER ||
        (rep->elements > 1 && rep->element[1]->type != REDIS_REPLY_INTEGER))
        return fail(p, "preheat");
    int prc = (int)rep->element[0]->integer;
    p->sum += rep->elements > 1 ? rep->element[1]->integer : 0;
    if (prc == SK_RC_PREHEATED)
        p->any_new = 1;
    else if (prc != SK_RC_STOCK_LIVE)
        return done(p, prc, -1);
    if (++p->seg < p->d.segments) return p->step;
    p->rc = p->any_new ? SK_RC_PREHEATED : SK_RC_STOCK_LIVE;
    p->stock = p->sum;
    if (p->any_new) return p->step = SK_SPH_BASE;
    return p->d.store_id[0] ? (p->step = SK_SPH_STAMP) : done(p, p->rc, p->sum);
}

enum sk_seg_preheat_step sk_seg_preheat_feed(struct sk_seg_preheat *p, const redisReply *rep)
{
    switch (p->step) {
    case SK_SPH_COUNT: return counted(p, rep);
    case SK_SPH_SETTLE: return settled(p, rep);
    case SK_SPH_STATE: return stated(p, rep);
    case SK_SPH_WRITE: return written(p, rep);
    case SK_SPH_BASE:
        if (!rep || rep->type != REDIS_REPLY_INTEGER) return fail(p, "HSET base meta");
        return p->step = SK_SPH_BASE_WR;
    case SK_SPH_BASE_WR:
        if (!rep || rep->type != REDIS_REPLY_INTEGER) return fail(p, "HSET base meta");
        return done(p, p->rc, p->stock);
    case SK_SPH_STAMP:
        if (!rep || rep->type != REDIS_REPLY_INTEGER) return fail(p, "HSETNX base meta");
        return done(p, p->rc, p->stock);
    default: return p->step;
    }
}
