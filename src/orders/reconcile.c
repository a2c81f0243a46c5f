/* reconcile.c - Redis vs DB drift report and safe repair (see reconcile.h
 * and docs/reconcile.md for what is compared and why).
 *
 * One check, per key set (the activity's, or each segment's of a segmented
 * activity):
 *   1. Redis snapshot, atomic (MULTI, one slot): meta initial/released/
 *      xin/xout, stock, the buyers hash, the ledger, the DLQ length.
 *   2. The order stream's consumer group: last-delivered id, pending ids
 *      (XINFO GROUPS, XPENDING): an order id above last-delivered or
 *      pending is still on its way to the DB (backlog), not lost.
 * then, for the activity:
 *   3. The DB: the activity row, counts, the DB stock check (one
 *      statement), then the orders, page by page in id order, each merged
 *      with the ledger of the key set its id names (sorted the same way).
 *   4. Orders in the DB but not in the snapshot's ledger, and cancelled ones
 *      whose ledger entry was not released, are looked up again: they may be
 *      newer than the snapshot.
 *   5. Segmented: the stock transfers between segments (xout hashes against
 *      the receivers' xin hashes, and the xin/xout counters).
 * Repair (opt-in) then fixes what is provably safe, one audit row per
 * change, and a second check fills rep->remaining.
 *
 * The check is here; reading Redis is in reconcile_read.c, the transfers
 * in reconcile_seg.c, the repair in reconcile_repair.c and the report in
 * reconcile_report.c (reconcile_int.h). */
#include "orders/reconcile.h"

#include <inttypes.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/num.h"
#include "core/vec.h"
#include "engine/keys.h"
#include "engine/live_acts.h"
#include "engine/segment.h"
#include "orders/reconcile_int.h"

void sk_reconcile_opts_init(struct sk_reconcile_opts *o)
{
    memset(o, 0, sizeof *o);
    o->grace_ms = SK_RECONCILE_GRACE_MS;
    o->stale_after_ms = SK_RECONCILE_STALE_AFTER_MS;
}

static void ctx_free(struct rec_ctx *c)
{
    sk_reconcile_snap_free(&c->s);
    free(c->b.p);
    free(c->cand);
    free(c->ud);
    c->ud = NULL;
    c->nud = c->udcap = 0;
    c->b.p = NULL;
    c->cand = NULL;
    c->ncand = c->candcap = 0;
    c->li = 0;
}

/* u from the run's parameters in base (st, r, aid, now, grace, stale,
 * nseg), reporting into rep: one context per key set. */
static int run_init(struct rec_run *u, const struct rec_run *base, struct sk_reconcile_report *rep)
{
    *u = *base;
    u->rep = rep;
    u->mode = REC_SNAPSHOT;
    u->nslices = 1;
    u->base_initial = -1;
    rep->segments = u->nseg;
    if (u->nseg > 1 && !rep->seg && !(rep->seg = calloc((size_t)u->nseg, sizeof *rep->seg)))
        return SK_ENOMEM;
    if (!(u->cs = calloc((size_t)u->nseg, sizeof *u->cs))) return SK_ENOMEM;
    for (int i = 0; i < u->nseg; i++) {
        struct rec_ctx *c = &u->cs[i];
        *c = (struct rec_ctx){.st = u->st,
                              .r = u->r,
                              .aid = u->aid,
                              .now = u->now,
                              .grace = u->grace,
                              .stale = u->stale,
                              .rep = rep};
        sk_keys_seg(&c->k, u->aid, u->nseg > 1 ? i : SK_SEG_NONE);
        c->seg = c->k.seg;
        c->rr = u->nseg > 1 ? &rep->seg[i] : &rep->redis;
    }
    return 0;
}

static void run_free(struct rec_run *u)
{
    for (int i = 0; u->cs && i < u->nseg; i++)
        ctx_free(&u->cs[i]);
    free(u->cs);
    u->cs = NULL;
}

static int add_cand(struct rec_ctx *c, int kind, const struct sk_order *o)
{
    if (SK_VEC_RESERVE(c->cand, c->candcap, c->ncand + 1, 16)) return SK_ENOMEM;
    struct sk_drift *d = &c->cand[c->ncand++];
    memset(d, 0, sizeof *d);
    d->kind = kind;
    d->segment = c->seg;
    d->order = *o;
    return 0;
}

static int store_err(int rc)
{
    return rc == SK_ENOTFOUND ? SK_EDB : rc;
}

static void user_drift(void *arg, uint64_t user, int64_t buyers, int64_t ledger)
{
    struct rec_ctx *c = arg;
    struct sk_order o;
    memset(&o, 0, sizeof o);
    o.user_id = user;
    sk_reconcile_add_drift(c->rep, c->seg, SK_DRIFT_USER_COUNT, &o,
                           "user %" PRIu64 ": the buyers hash holds %" PRId64
                           " unit(s), the user's unreleased ledger entries %" PRId64,
                           user, buyers, ledger);
}

/* Compares one DB order with its ledger entry. */
static int compare_order(struct rec_ctx *c, const struct sk_order *o, const struct rec_lentry *e)
{
    struct sk_reconcile_report *rep = c->rep;
    if (o->user_id != e->user || o->quantity != e->qty)
        return sk_reconcile_add_drift(rep, c->seg, SK_DRIFT_ORDER_MISMATCH, o,
                                      "order %s: the DB has user %" PRIu64 ", %" PRId64
                                      " unit(s); the ledger has user %" PRIu64 ", %" PRId64
                                      " unit(s)",
                                      o->order_id, o->user_id, o->quantity, e->user, e->qty);
    if (e->released && (o->status == SK_ORDER_PAID || o->status == SK_ORDER_CREATED)) {
        /* released in Redis, still holding its units in the DB */
        int paid = o->status == SK_ORDER_PAID;
        return sk_reconcile_add_drift(
            rep, c->seg, paid ? SK_DRIFT_PAID_RELEASED : SK_DRIFT_RELEASED_NOT_CANCELLED, o,
            "%sorder %s (user %" PRIu64 ", %" PRId64 " unit(s)) %s", paid ? "SERIOUS: " : "",
            o->order_id, o->user_id, o->quantity,
            paid ? "is paid in the DB but its units were released in Redis (they may be sold "
                   "again): an operator must settle it"
                 : "was released in Redis but is still created (payable) in the DB");
    }
    if (o->status == SK_ORDER_CANCELLED && !e->released) {
        if (o->cancelled_ms > c->now - c->grace) {
            rep->db.owed_recent++; /* a cancel in progress: its release follows */
            return 0;
        }
        return add_cand(c, SK_DRIFT_CANCELLED_NOT_RELEASED, o);
    }
    return 0;
}

/* The key set a DB order belongs to: the only one when not segmented (as
 * before segments: whatever its id says), else the segment its id's label
 * names; NULL when it names none of this activity's segments. */
static struct rec_ctx *route(struct rec_run *u, const char *oid)
{
    if (u->nseg == 1) return &u->cs[0];
    uint64_t a;
    int seg;
    if (sk_keys_parse_label(oid, strlen(oid), &a, &seg) < 0 || a != u->aid || seg < 0 ||
        seg >= u->nseg)
        return NULL;
    return &u->cs[seg];
}

/* One DB order merged with the sorted ledger (rows) of its key set. */
static int merge_one(struct rec_run *u, const struct sk_order *o)
{
    struct rec_ctx *c = route(u, o->order_id);
    if (!c) {
        if (u->mode == REC_SLICED && u->slice != 0) return 0; /* slice 0 says it */
        return sk_reconcile_add_drift(u->rep, SK_SEG_NONE, SK_DRIFT_ORDER_MISMATCH, o,
                                      "order %s (user %" PRIu64 ", %" PRId64
                                      " unit(s), %s) is in the DB but its id names no segment of "
                                      "this activity (%d segments)",
                                      o->order_id, o->user_id, o->quantity,
                                      sk_order_status_name(o->status), u->nseg);
    }
    if (!c->s.present) return 0; /* the segment is reported as redis_missing */
    /* sliced: the users of this slice only (an order whose user differs
     * from its ledger entry's is found by the look-up of candidates) */
    if (u->mode == REC_SLICED && o->user_id % (uint64_t)u->nslices != (uint64_t)u->slice) return 0;
    while (c->li < c->s.nl && strcmp(c->s.ledger[c->li].oid, o->order_id) < 0)
        c->li++;
    if (c->li < c->s.nl && !strcmp(c->s.ledger[c->li].oid, o->order_id)) {
        struct rec_lentry *e = &c->s.ledger[c->li];
        e->in_db = 1;
        /* incremental: the ledger was read after the DB page, so a release
         * since (a cancel writes the DB first) is judged on the row as it
         * is now */
        struct sk_order now;
        if (u->mode == REC_SINCE && e->released &&
            (o->status == SK_ORDER_PAID || o->status == SK_ORDER_CREATED)) {
            int rc = sk_store_order_get(u->st, o->order_id, &now);
            if (rc && rc != SK_ENOTFOUND) return store_err(rc);
            if (rc == 0) o = &now;
        }
        return compare_order(c, o, e);
    }
    return add_cand(c, SK_DRIFT_NOT_IN_LEDGER, o);
}

static void note_held(struct rec_run *u)
{
    size_t held = 0;
    for (int i = 0; i < u->nseg; i++)
        held += u->cs[i].s.nl + u->cs[i].s.nbad;
    if (held > u->rep->peak_held) u->rep->peak_held = held;
}

/* Merges the DB orders (pages in id order, one pass for every segment)
 * with the sorted ledger of the key set each one belongs to: a segment's
 * orders are a sorted subsequence, so each key set keeps its own cursor.
 * Incremental (REC_SINCE): each key set's orders from its label and
 * since_ms on, each page's ledger entries looked up (HMGET) first. */
static int merge_orders(struct rec_run *u)
{
    struct sk_order *page = malloc(SK_RECONCILE_PAGE * sizeof *page);
    if (!page) return SK_ENOMEM;
    int rc = 0;
    for (int ci = 0; ci < (u->mode == REC_SINCE ? u->nseg : 1) && rc == 0; ci++) {
        struct rec_ctx *c = &u->cs[ci];
        char after[SK_STORE_ORDER_ID_MAX] = "", prefix[40] = "";
        size_t pl = 0;
        if (u->mode == REC_SINCE) {
            if (!c->s.present) continue;
            pl = (size_t)snprintf(prefix, sizeof prefix, "%s-", c->k.label);
            snprintf(after, sizeof after, "%s%" PRId64, prefix, u->since_ms);
        }
        for (;;) {
            size_t n = 0, k;
            if ((rc = sk_store_orders_list(u->st, u->aid, after, SK_RECONCILE_PAGE, page, &n)) != 0)
                break;
            u->rep->rows_read += n;
            k = n;
            if (u->mode == REC_SINCE) {
                for (k = 0; k < n && !strncmp(page[k].order_id, prefix, pl); k++)
                    ;
                if ((rc = sk_reconcile_ledger_fetch(u->r, &c->k, page, k, &c->s)) != 0) break;
                c->li = 0;
                note_held(u);
            }
            for (size_t i = 0; i < k && rc == 0; i++)
                rc = merge_one(u, &page[i]);
            if (rc || k < n || n < SK_RECONCILE_PAGE) break;
            snprintf(after, sizeof after, "%s", page[n - 1].order_id);
        }
        if (u->mode == REC_SINCE) sk_reconcile_snap_drop_rows(&c->s);
    }
    free(page);
    return rc;
}

/* Sliced: candidates not in their slice's ledger but in the ledger all the
 * same are orders whose DB user differs from the ledger's (the slices go
 * by user): compared here. */
static int cross_slice(struct rec_ctx *c, const struct sk_order *o)
{
    struct rec_snap one;
    memset(&one, 0, sizeof one);
    int rc = sk_reconcile_ledger_fetch(c->r, &c->k, o, 1, &one);
    if (rc == 0 && one.nl == 1 &&
        (one.ledger[0].user != o->user_id || one.ledger[0].qty != o->quantity))
        rc = compare_order(c, o, &one.ledger[0]);
    sk_reconcile_snap_free(&one);
    return rc;
}

/* Candidates looked up in the ledger again: those still failing are drift. */
static int settle_candidates(struct rec_ctx *c)
{
    if (!c->ncand) return 0;
    int *present = malloc(c->ncand * sizeof *present);
    int rc = !present ? SK_ENOMEM : 0;
    if (rc == 0)
        rc = sk_reconcile_ledger_lookup(c->r, &c->k, c->cand[0].order.order_id, sizeof *c->cand,
                                        c->ncand, present);
    size_t ncand = c->ncand; /* (a cross-slice comparison adds none: user or qty differ) */
    for (size_t i = 0; rc == 0 && i < ncand; i++) {
        const struct sk_order *o = &c->cand[i].order;
        if (c->cand[i].kind == SK_DRIFT_NOT_IN_LEDGER && present[i] != 0 && c->in_slices)
            rc = cross_slice(c, o);
        else if (c->cand[i].kind == SK_DRIFT_NOT_IN_LEDGER && present[i] == 0)
            rc = sk_reconcile_add_drift(c->rep, c->seg, SK_DRIFT_NOT_IN_LEDGER, o,
                                        "order %s (user %" PRIu64 ", %" PRId64
                                        " unit(s), %s) is in the DB but not in the Redis ledger",
                                        o->order_id, o->user_id, o->quantity,
                                        sk_order_status_name(o->status));
        else if (c->cand[i].kind == SK_DRIFT_CANCELLED_NOT_RELEASED && present[i] == 1)
            rc = sk_reconcile_add_drift(
                c->rep, c->seg, SK_DRIFT_CANCELLED_NOT_RELEASED, o,
                "order %s (user %" PRIu64 ", %" PRId64
                " unit(s)) is cancelled in the DB but its units are still held in "
                "Redis (not released)",
                o->order_id, o->user_id, o->quantity);
    }
    free(present);
    c->ncand = 0;
    return rc;
}

/* Ledger orders that are neither in the DB nor on their way there. */
static int find_lost(struct rec_ctx *c)
{
    struct sk_reconcile_redis *rr = c->rr;
    for (size_t i = 0; i < c->s.nl; i++) {
        const struct rec_lentry *e = &c->s.ledger[i];
        if (e->in_db) continue;
        if (c->in_slices) {
            /* its DB row may name another user (another slice): compared there */
            struct sk_order o;
            int rc = sk_store_order_get(c->st, e->oid, &o);
            if (rc == 0) continue;
            if (rc != SK_ENOTFOUND) return store_err(rc);
        }
        struct sk_order o;
        memset(&o, 0, sizeof o);
        snprintf(o.order_id, sizeof o.order_id, "%s", e->oid);
        snprintf(o.stream_id, sizeof o.stream_id, "%" PRIu64 "-%" PRIu64, e->sid.ms, e->sid.seq);
        o.activity_id = c->aid;
        o.user_id = e->user;
        o.quantity = e->qty;
        o.created_ms = (int64_t)e->sid.ms;
        /* What a restore writes: a released order comes back cancelled. */
        o.status = e->released ? SK_ORDER_CANCELLED : SK_ORDER_CREATED;
        int rc = 0;
        if (sk_reconcile_in_backlog(&c->b, e->sid)) {
            rr->backlog_orders++;
            /* on its way, but for too long: the order pipeline is stuck */
            if (c->stale && (int64_t)e->sid.ms < c->now - c->stale) {
                o.status = SK_ORDER_CREATED; /* what the worker will make it */
                rc = sk_reconcile_add_drift(
                    c->rep, c->seg, SK_DRIFT_STALE, &o,
                    "order %s (user %" PRIu64 ", %" PRId64 " unit(s)) was admitted %" PRId64
                    " s ago and is still not in the DB (stream backlog: %s; bound %" PRId64 " s)",
                    e->oid, e->user, e->qty, (c->now - (int64_t)e->sid.ms) / 1000,
                    sk_sid_cmp(e->sid, c->b.last) > 0 ? "never delivered" : "pending",
                    c->stale / 1000);
            }
        } else {
            rc = sk_reconcile_add_drift(
                c->rep, c->seg, SK_DRIFT_LOST_ORDER, &o,
                "order %s (user %" PRIu64 ", %" PRId64
                " unit(s)%s) is in the Redis ledger but not in the DB and not in the "
                "stream backlog%s",
                e->oid, e->user, e->qty, e->released ? ", released" : "",
                rr->dlq > 0 ? " (see the dead-letter stream)" : "");
        }
        if (rc) return rc;
    }
    return 0;
}

/* Sliced: a slice's ledger entries added to its key set's figures. */
static void slice_figures(struct rec_ctx *c)
{
    struct sk_reconcile_redis *rr = c->rr;
    rr->admitted_orders += (int64_t)(c->s.nl + c->s.nbad);
    for (size_t i = 0; i < c->s.nl; i++) {
        rr->admitted_units += c->s.ledger[i].qty;
        if (c->s.ledger[i].released) {
            rr->released_orders++;
            rr->released_units += c->s.ledger[i].qty;
        }
    }
}

/* The figures of a key set's snapshot (its ledger's as a slice's); read in
 * slices or incrementally,
 * those of its head (the state script), the ledger's added per slice
 * (sliced) or its length only (incremental). */
static void redis_figures(struct rec_ctx *c, int mode)
{
    struct sk_reconcile_redis *rr = c->rr;
    rr->present = c->s.present;
    rr->initial = c->s.initial;
    rr->remaining = c->s.stock;
    rr->xin = c->s.xin;
    rr->xout = c->s.xout;
    rr->released_meta = c->s.released_meta;
    rr->dlq = c->s.dlq;
    if (mode != REC_SNAPSHOT) {
        rr->held = c->s.held;
        rr->buyers = c->s.nbuyers;
        if (mode == REC_SINCE) rr->admitted_orders = c->s.ledger_len;
        return;
    }
    rr->held = sk_reconcile_held_units(&c->s);
    rr->buyers = (int64_t)c->s.nb;
    rr->admitted_orders = 0;
    slice_figures(c);
}

/* Segmented: the activity's Redis figures are the segments' summed (initial
 * is the base meta's, the definition, when it has one). */
static void sum_figures(struct rec_run *u)
{
    if (u->nseg == 1) return;
    struct sk_reconcile_redis *t = &u->rep->redis;
    memset(t, 0, sizeof *t);
    t->group = 1;
    int64_t shares = 0;
    for (int i = 0; i < u->nseg; i++) {
        const struct sk_reconcile_redis *s = &u->rep->seg[i];
        t->present |= s->present;
        shares += s->initial;
        t->remaining += s->remaining;
        t->xin += s->xin;
        t->xout += s->xout;
        t->held += s->held;
        t->buyers += s->buyers; /* a buyer is counted in its home segment only */
        t->admitted_orders += s->admitted_orders;
        t->admitted_units += s->admitted_units;
        t->released_orders += s->released_orders;
        t->released_units += s->released_units;
        t->released_meta += s->released_meta;
        t->group = t->group && s->group;
        t->pending += s->pending;
        t->undelivered =
            t->undelivered < 0 || s->undelivered < 0 ? -1 : t->undelivered + s->undelivered;
        t->backlog += s->backlog;
        t->backlog_orders += s->backlog_orders;
        t->dlq += s->dlq;
    }
    t->initial = u->base_initial >= 0 ? u->base_initial : shares;
    snprintf(t->last_delivered, sizeof t->last_delivered, "per segment");
}

/* The stock invariant of one key set (present): from its snapshot, or
 * from its head when read in slices or incrementally (the same instant). */
static void check_invariant(struct rec_ctx *c)
{
    struct sk_reconcile_report *rep = c->rep;
    /* units sold twice before a fence are reported as oversold, not here */
    int64_t held = c->rr->held, own = c->s.initial + c->s.xin - c->s.xout + c->s.oversold;
    if (c->s.oversold > 0)
        sk_reconcile_add_drift(rep, c->seg, SK_DRIFT_OVERSOLD, NULL,
                               "%" PRId64 " unit(s) were sold twice before a rollback of Redis "
                               "was fenced: buyers hold more than the stock; the sale stays "
                               "fenced (docs/recovery.md)",
                               c->s.oversold);
    if (c->s.stock + held != own) {
        if (c->seg < 0)
            sk_reconcile_add_drift(rep, c->seg, SK_DRIFT_REDIS_INVARIANT, NULL,
                                   "Redis stock %" PRId64 " + units held by buyers %" PRId64
                                   " = %" PRId64 " != initial %" PRId64,
                                   c->s.stock, held, c->s.stock + held, c->s.initial);
        else
            sk_reconcile_add_drift(
                rep, c->seg, SK_DRIFT_REDIS_INVARIANT, NULL,
                "Redis stock %" PRId64 " + units held by buyers %" PRId64 " = %" PRId64
                " != initial %" PRId64 " + received %" PRId64 " - lent %" PRId64 " = %" PRId64,
                c->s.stock, held, c->s.stock + held, c->s.initial, c->s.xin, c->s.xout, own);
    }
}

static void collect_udiff(void *arg, uint64_t user, int64_t buyers, int64_t ledger)
{
    struct rec_ctx *c = arg;
    if (SK_VEC_RESERVE(c->ud, c->udcap, c->nud + 1, 64)) {
        c->ud_nomem = 1;
        return;
    }
    c->ud[c->nud++] = (struct rec_udiff){.user = user, .buyers = buyers, .ledger = ledger};
}

/* Users whose buyers figure differs from their ledger units, and malformed
 * ledger entries, in the rows held (the whole key set, or one slice: then
 * each user found is read again at one instant before it is reported). */
static int check_ledger(struct rec_ctx *c)
{
    struct sk_reconcile_report *rep = c->rep;
    if (!c->in_slices) {
        if (sk_reconcile_user_diffs(&c->s, user_drift, c) < 0) return SK_ENOMEM;
    } else {
        c->nud = 0;
        c->ud_nomem = 0;
        if (sk_reconcile_user_diffs(&c->s, collect_udiff, c) < 0 || c->ud_nomem) return SK_ENOMEM;
        for (size_t at = 0; at < c->nud; at += SK_RECONCILE_VERIFY) {
            size_t m = c->nud - at < SK_RECONCILE_VERIFY ? c->nud - at : SK_RECONCILE_VERIFY;
            int rc = sk_reconcile_verify_users(c->r, &c->k, &c->s, c->ud + at, m);
            if (rc) return rc;
            for (size_t j = at; j < at + m; j++)
                if (c->ud[j].confirmed)
                    user_drift(c, c->ud[j].user, c->ud[j].buyers, c->ud[j].ledger);
        }
    }
    for (size_t i = 0; i < c->s.nbad; i++)
        sk_reconcile_add_drift(rep, c->seg, SK_DRIFT_ORDER_MISMATCH, NULL,
                               "malformed ledger entry %s", c->s.bad[i]);
    return 0;
}

/* The base meta (the activity's own, or a segmented one's): Redis's owner
 * of the activity and the note of purchases refused to another store's
 * nodes (the store's identity, docs/design.md), and, segmented, the
 * activity's initial (its definition; -1 when absent). */
static int read_base(struct rec_run *u)
{
    struct sk_reconcile_owner *ow = &u->rep->owner;
    struct sk_keys b;
    sk_keys_for(&b, u->aid);
    redisReply *rep;
    const char *argv[] = {"HMGET", b.meta, SK_M_OWNER_FIELDS};
    int rc = sk_redis_command(u->r, &rep, (int)(sizeof argv / sizeof *argv), argv, NULL);
    if (rc) return rc;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != SK_M_OWNER_N) {
        rc = sk_reconcile_proto_err(u->r, "HMGET meta store_id", rep);
        freeReplyObject(rep);
        return rc;
    }
    const struct {
        int at;
        char *dst;
    } ids[] = {{SK_M_OWNER_STORE_ID, ow->redis}, {SK_M_OWNER_STORE_REFUSED, ow->refused}};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        const redisReply *e = rep->element[ids[i].at];
        if (e->type == REDIS_REPLY_STRING && e->len < SK_STORE_IDENTITY_MAX)
            memcpy(ids[i].dst, e->str, e->len + 1);
    }
    ow->refused_ms = sk_reconcile_opt_i64(rep->element[SK_M_OWNER_STORE_REFUSED_MS]);
    const redisReply *ini = rep->element[SK_M_OWNER_INITIAL];
    if (u->nseg > 1 &&
        (ini->type != REDIS_REPLY_STRING || sk_num_i64(ini->str, ini->len, &u->base_initial) != 0))
        u->base_initial = -1;
    freeReplyObject(rep);
    return 0;
}

/* Every key set's snapshot and group, and the base meta (read_base).
 * *any: some key set has live state; *entries: ledger entries. */
static int read_redis(struct rec_run *u, int *any, size_t *entries)
{
    int rc;
    *any = 0;
    *entries = 0;
    for (int i = 0; i < u->nseg; i++) {
        struct rec_ctx *c = &u->cs[i];
        c->in_slices = u->mode == REC_SLICED;
        if (u->mode == REC_SNAPSHOT)
            rc = sk_reconcile_read_snap(u->r, &c->k, 0, &c->s);
        else
            rc = sk_reconcile_read_head(u->r, &c->k, &c->s);
        if (rc) return rc;
        redis_figures(c, u->mode);
        if ((rc = sk_reconcile_read_group(u->r, &c->k, &c->b, c->rr)) != 0) return rc;
        *any |= c->s.present;
        *entries += u->mode == REC_SNAPSHOT ? c->s.nl + c->s.nbad : (size_t)c->s.ledger_len;
    }
    if (u->mode == REC_SNAPSHOT) note_held(u);
    return read_base(u);
}

/* The DB's figures: the activity row, and when there is one, the order
 * counts and the DB stock check. */
static int read_db(struct rec_run *u)
{
    struct sk_reconcile_report *rep = u->rep;
    struct sk_activity a;
    int rc = sk_store_activity_get(u->st, u->aid, &a);
    if (rc && rc != SK_ENOTFOUND) return rc;
    rep->db.present = rc == 0;
    if (!rep->db.present) return 0;
    snprintf(rep->db.state, sizeof rep->db.state, "%s", a.state);
    rep->db.initial = a.stock;
    if ((rc = sk_store_orders_count(u->st, u->aid, &rep->db.counts)) != 0) return rc;
    if ((rc = sk_store_db_stock_check(u->st, u->aid, &rep->db.stock, &rep->db.stock_expected)) != 0)
        return store_err(rc);
    return 0;
}

/* An activity this database holds whose live state another store owns,
 * or whose purchases another store's nodes were refused. */
static void store_drift(struct rec_run *u)
{
    struct sk_reconcile_report *rep = u->rep;
    struct sk_reconcile_owner *ow = &rep->owner;
    if (!rep->db.present) return;
    if (ow->redis[0] && strcmp(ow->redis, ow->store_id) != 0) {
        char fix[300];
        sk_reconcile_add_drift(rep, SK_SEG_NONE, SK_DRIFT_STORE, NULL,
                               "its live state in Redis was preheated from another database "
                               "(store %s; this one is store %s): this database's workers do "
                               "not persist its orders, its nodes refuse its purchases. Fix: %s",
                               ow->redis, ow->store_id,
                               sk_live_fix(u->aid, 1, ow->redis, fix, sizeof fix));
        return;
    }
    if (ow->refused[0] && strcmp(ow->refused, ow->store_id) != 0) {
        char at[SK_TIME_RFC3339_MAX];
        if (sk_time_format_rfc3339(ow->refused_ms, at, sizeof at) < 0) snprintf(at, sizeof at, "?");
        ow->note = 1;
        sk_reconcile_add_drift(
            rep, SK_SEG_NONE, SK_DRIFT_STORE, NULL,
            "nodes of another database (store %s) serve this Redis and were refused its "
            "purchases (last at %s): they would never persist its orders. Fix: point those "
            "nodes (serve --db) at this database; then `seckill reconcile --activity %" PRIu64
            " --repair` clears this note",
            ow->refused, at, u->aid);
    }
}

/* Drift of the activity as a whole from the DB's side: no live state in
 * Redis (any 0), no activity row, the DB stock. */
static void db_drift(struct rec_run *u, int any)
{
    struct sk_reconcile_report *rep = u->rep;
    if (rep->db.present && !any) {
        int64_t orders = 0;
        for (int i = 0; i < SK_ORDER_NSTATUS; i++)
            orders += rep->db.counts.orders[i];
        /* Never preheated and nothing sold: nothing to compare. */
        if (strcmp(rep->db.state, "created") != 0 || orders > 0)
            sk_reconcile_add_drift(
                rep, SK_SEG_NONE, SK_DRIFT_REDIS_MISSING, NULL,
                "the DB activity is %s with %" PRId64
                " order(s) but Redis has no live state for it (stock or meta missing): "
                "re-preheat only after checking what was sold",
                rep->db.state, orders);
    }
    const struct sk_reconcile_owner *ow = &rep->owner;
    char fix[300];
    if (!rep->db.present)
        sk_reconcile_add_drift(rep, SK_SEG_NONE, SK_DRIFT_DB_MISSING, NULL,
                               "Redis has live state for the activity but this database "
                               "(store %s) has no activity row: its orders are never persisted "
                               "here. Fix: %s",
                               ow->store_id, sk_live_fix(u->aid, 0, ow->redis, fix, sizeof fix));
    store_drift(u);
    if (rep->db.counts.conflicts)
        sk_reconcile_add_drift(
            rep, SK_SEG_NONE, SK_DRIFT_ORDER_CONFLICT, NULL,
            "%" PRId64 " admission(s) came with an order id the DB already held for another "
            "admission (two Redis histories that diverged); they are in the table "
            "order_conflicts, not in orders: an operator must settle them",
            rep->db.counts.conflicts);
    if (rep->db.present && rep->db.stock != rep->db.stock_expected) {
        const struct sk_order_counts *k = &rep->db.counts;
        char why[128] = "";
        if (k->stock_failures)
            snprintf(why, sizeof why,
                     " (%" PRId64 " failed conditional stock update(s) recorded, %" PRId64
                     " unit(s))",
                     k->stock_failures, k->stock_failure_units);
        sk_reconcile_add_drift(rep, SK_SEG_NONE, SK_DRIFT_DB_STOCK, NULL,
                               "DB stock %" PRId64 " != expected %" PRId64 " = initial %" PRId64
                               " - units of orders not cancelled %" PRId64 "%s",
                               rep->db.stock, rep->db.stock_expected, rep->db.initial,
                               rep->db.initial - rep->db.stock_expected, why);
    }
}

/* Drift of the activity's initial stock: segments without live state, the
 * initial against the DB's, the segments' shares against the base meta. */
static void initial_drift(struct rec_run *u)
{
    struct sk_reconcile_report *rep = u->rep;
    int segmented = u->nseg > 1, all = 1;
    int64_t shares = 0;
    for (int i = 0; segmented && i < u->nseg; i++) {
        all = all && u->cs[i].s.present;
        shares += u->cs[i].s.initial;
        if (!u->cs[i].s.present)
            sk_reconcile_add_drift(
                rep, i, SK_DRIFT_REDIS_MISSING, NULL,
                "no live state (stock or meta missing) while other segments have it: its "
                "orders are not checked; re-preheat only after checking what was sold");
    }
    if (rep->db.present && rep->db.initial != rep->redis.initial)
        sk_reconcile_add_drift(rep, SK_SEG_NONE, SK_DRIFT_INITIAL_MISMATCH, NULL,
                               "Redis initial stock %" PRId64 " != DB initial stock %" PRId64,
                               rep->redis.initial, rep->db.initial);
    /* The global invariant sum(stock) + sum(held) + in transit == initial
     * follows from the segments' own ones once their shares add up. */
    if (segmented && all && u->base_initial >= 0 && shares != u->base_initial)
        sk_reconcile_add_drift(rep, SK_SEG_NONE, SK_DRIFT_REDIS_INVARIANT, NULL,
                               "the segments' initial shares add up to %" PRId64
                               " != the activity's initial %" PRId64 " (base meta)",
                               shares, u->base_initial);
}

/* The DB orders merged with the rows held, the candidates looked up
 * again, then (not incremental: the whole ledger, or a slice's, is held)
 * the ledger orders the DB lacks. */
static int merge_db(struct rec_run *u)
{
    int rc = merge_orders(u);
    for (int i = 0; i < u->nseg && rc == 0; i++) {
        struct rec_ctx *c = &u->cs[i];
        if (!c->s.present) continue;
        if ((rc = settle_candidates(c)) == 0 && u->mode != REC_SINCE) rc = find_lost(c);
    }
    return rc;
}

/* One slice of a sliced check: its rows of every key set, their user
 * check, and the DB orders of its users merged with them. */
static int check_slice(struct rec_run *u)
{
    int rc = 0;
    for (int i = 0; i < u->nseg && rc == 0; i++) {
        struct rec_ctx *c = &u->cs[i];
        if (!c->s.present) continue;
        c->li = 0;
        if ((rc = sk_reconcile_read_slice(u->r, &c->k, u->nslices, u->slice, &c->s)) != 0) break;
        slice_figures(c);
        rc = check_ledger(c);
    }
    note_held(u);
    if (rc == 0 && u->rep->db.present) rc = merge_db(u);
    for (int i = 0; i < u->nseg; i++)
        sk_reconcile_snap_drop_rows(&u->cs[i].s);
    malloc_trim(0); /* the next slice reuses the pages, other threads too */
    return rc;
}

/* Incremental: do the counts say a ledger order may be missing from the DB
 * (more ledger entries than DB orders and backlog: a row deleted, an order
 * never persisted), or is an order stuck in the backlog past the stale
 * bound? Then the pass is made full. The ledger's length is read before
 * the backlog and the backlog before the DB, so an order on its way is
 * counted at least once. */
static int needs_full(struct rec_run *u)
{
    int64_t ledger = 0, backlog = 0, db = 0;
    for (int i = 0; i < SK_ORDER_NSTATUS; i++)
        db += u->rep->db.counts.orders[i];
    for (int i = 0; i < u->nseg; i++) {
        const struct rec_ctx *c = &u->cs[i];
        ledger += c->s.ledger_len;
        backlog += c->rr->backlog;
        for (size_t j = 0; u->stale && j < c->b.np; j++)
            if ((int64_t)c->b.p[j].ms < u->now - u->stale) return 1;
        if (u->stale && c->b.undelivered > 0 && c->b.last.ms != UINT64_MAX &&
            (int64_t)c->b.last.ms < u->now - u->stale)
            return 1;
    }
    return ledger > db + backlog;
}

/* The whole check into u->rep (no repair). */
static int check(struct rec_run *u)
{
    struct sk_reconcile_report *rep = u->rep;
    int segmented = u->nseg > 1, any, rc;
    size_t entries;
    if ((rc = read_redis(u, &any, &entries)) != 0) return rc;
    sum_figures(u);
    if ((rc = read_db(u)) != 0) return rc;
    /* (a segmented activity has at least its base meta in Redis) */
    if (!rep->db.present && !any && !entries && !segmented) return SK_ENOTFOUND;
    rc = sk_store_identity(u->st, rep->owner.store_id, sizeof rep->owner.store_id);
    if (rc) return store_err(rc);
    db_drift(u, any);
    if (!any) return 0;
    initial_drift(u);
    for (int i = 0; i < u->nseg; i++) {
        const struct rec_snap *s = &u->cs[i].s;
        if (s->fence[0])
            sk_reconcile_add_drift(rep, u->nseg > 1 ? i : SK_SEG_NONE, SK_DRIFT_FENCED, NULL,
                                   "purchases are fenced (%s) while the live state is rebuilt "
                                   "from the database: %s",
                                   s->fence, s->fence_why[0] ? s->fence_why : "no reason given");
        if (!s->present) continue;
        check_invariant(&u->cs[i]);
        if (u->mode == REC_SNAPSHOT && (rc = check_ledger(&u->cs[i])) != 0) return rc;
    }
    if (u->mode == REC_SLICED) {
        for (u->slice = 0; u->slice < u->nslices; u->slice++)
            if ((rc = check_slice(u)) != 0) return rc;
    } else if (rep->db.present) {
        if ((rc = merge_db(u)) != 0) return rc;
        if (u->mode == REC_SINCE) u->escalate = needs_full(u);
    }
    if (segmented && (rc = sk_reconcile_check_transit(u)) != 0) return rc;
    sum_figures(u); /* backlog_orders were counted since */
    return 0;
}

/* The ledger entries of every key set (HLEN): how a full check reads. */
static int ledger_total(sk_redis *r, uint64_t aid, int nseg, int64_t *total)
{
    *total = 0;
    for (int i = 0; i < (nseg > 1 ? nseg : 1); i++) {
        struct sk_keys k;
        sk_keys_seg(&k, aid, nseg > 1 ? i : SK_SEG_NONE);
        redisReply *rep;
        int rc = sk_redis_cmd(r, &rep, "HLEN %s", k.ledger);
        if (rc) return rc;
        if (rep->type == REDIS_REPLY_INTEGER) *total += rep->integer;
        freeReplyObject(rep);
    }
    return 0;
}

/* One check of the activity in the mode chosen: a snapshot when the sale
 * fits in a chunk, slices when it does not (a quarter of headroom: users
 * do not spread exactly evenly), or incremental. */
static int run_check(struct rec_run *u, const struct rec_run *base, struct sk_reconcile_report *rep,
                     size_t chunk, int64_t since_ms)
{
    int rc = run_init(u, base, rep);
    if (rc) return rc;
    if (since_ms > 0) {
        u->mode = REC_SINCE;
        u->since_ms = since_ms;
    } else {
        int64_t total;
        if ((rc = ledger_total(u->r, u->aid, u->nseg, &total)) != 0) return rc;
        if (total > 0 && (uint64_t)total > chunk) { /* chunk < total: no overflow below */
            int64_t per = (int64_t)(chunk / 5 * 4) > 0 ? (int64_t)(chunk / 5 * 4) : 1;
            int64_t slices = (total + per - 1) / per;
            if (slices > 1) {
                u->mode = REC_SLICED;
                u->nslices = slices > INT32_MAX ? INT32_MAX : (int)slices;
            }
        }
    }
    rep->slices = u->nslices;
    rep->incremental = u->mode == REC_SINCE;
    return check(u);
}

/* rep emptied for a check of activity aid. */
static void report_start(struct sk_reconcile_report *rep, uint64_t aid)
{
    memset(rep, 0, sizeof *rep);
    rep->activity_id = aid;
    rep->segments = 1;
}

static int reconcile_one(sk_store *st, sk_redis *r, uint64_t activity_id,
                         const struct sk_reconcile_opts *o, struct sk_reconcile_report *rep)
{
    struct sk_reconcile_opts def;
    if (!o) {
        sk_reconcile_opts_init(&def);
        o = &def;
    }
    report_start(rep, activity_id);
    rep->repair = o->repair;
    struct rec_run base = {.st = st,
                           .r = r,
                           .aid = activity_id,
                           .now = o->now_ms ? o->now_ms : sk_wall_ms(),
                           .grace = o->grace_ms >= 0 ? o->grace_ms : 0,
                           .stale = o->stale_after_ms > 0 ? o->stale_after_ms : 0};
    size_t chunk = o->chunk ? o->chunk : SIZE_MAX; /* 0: one snapshot */
    int64_t since = o->repair ? 0 : o->since_ms;
    /* Segmented or not, as Redis routes purchases: the base meta's count. */
    int rc = sk_seg_count(r, activity_id, &base.nseg);
    if (rc) return rc;
    if (base.nseg < 1) base.nseg = 1;
    struct rec_run u;
    rc = run_check(&u, &base, rep, chunk, since);
    int escalate = rc == 0 && u.escalate;
    run_free(&u);
    if (escalate) {
        /* the same call, full (what the incremental read is kept) */
        size_t rows = rep->rows_read, peak = rep->peak_held;
        sk_reconcile_report_free(rep);
        report_start(rep, activity_id);
        rc = run_check(&u, &base, rep, chunk, 0);
        run_free(&u);
        rep->escalated = 1;
        rep->rows_read += rows;
        if (peak > rep->peak_held) rep->peak_held = peak;
    }
    if (rc) return rc;
    rep->consistent = rep->total == 0;
    if (!o->repair || rep->total == 0) return 0;
    if ((rc = run_init(&u, &base, rep)) == 0) sk_reconcile_repair(&u);
    run_free(&u);
    if (rc) return rc;
    /* A second check says what is left. */
    struct sk_reconcile_report after;
    report_start(&after, activity_id);
    rc = run_check(&u, &base, &after, chunk, 0);
    run_free(&u);
    if (rc == 0) {
        memcpy(rep->remaining, after.found, sizeof rep->remaining);
        rep->remaining_total = after.total;
        rep->consistent = after.total == 0;
    } else {
        /* Unknown after the repair: report everything as remaining. */
        memcpy(rep->remaining, rep->found, sizeof rep->remaining);
        rep->remaining_total = rep->total;
    }
    sk_reconcile_report_free(&after);
    return rc == SK_ENOTFOUND ? 0 : rc;
}

/* The snapshot of a big sale is read whole (HGETALL of the ledger and the
 * buyers: ~600 bytes an order while parsed, the hiredis replies and the
 * sorted copies), and glibc keeps what a thread freed in its arena: in a
 * process that reconciles every 30 s (serve's worker) the resident size
 * became the largest snapshot ever read, and grew with the sale. So the
 * freed pages go back to the system after each activity. */
int sk_reconcile_activity(sk_store *st, sk_redis *r, uint64_t activity_id,
                          const struct sk_reconcile_opts *o, struct sk_reconcile_report *rep)
{
    int rc = reconcile_one(st, r, activity_id, o, rep);
    malloc_trim(0);
    return rc;
}

void sk_reconcile_periodic_init(struct sk_reconcile_periodic *p)
{
    memset(p, 0, sizeof *p);
    p->full_every = SK_RECONCILE_FULL_EVERY;
    p->overlap_ms = SK_RECONCILE_OVERLAP_MS;
}

void sk_reconcile_periodic_free(struct sk_reconcile_periodic *p)
{
    free(p->m);
    p->m = NULL;
    p->n = p->cap = 0;
}

int sk_reconcile_periodic_run(struct sk_reconcile_periodic *p, sk_store *st, sk_redis *r,
                              uint64_t activity_id, struct sk_reconcile_report *rep)
{
    struct sk_reconcile_mark *m = NULL;
    for (size_t i = 0; i < p->n && !m; i++)
        if (p->m[i].activity_id == activity_id) m = &p->m[i];
    if (!m) {
        if (SK_VEC_RESERVE(p->m, p->cap, p->n + 1, 16)) {
            memset(rep, 0, sizeof *rep);
            return SK_ENOMEM;
        }
        m = &p->m[p->n++];
        *m = (struct sk_reconcile_mark){.activity_id = activity_id};
    }
    struct sk_reconcile_opts o;
    sk_reconcile_opts_init(&o);
    o.chunk = p->chunk ? p->chunk : SK_RECONCILE_CHUNK;
    int full = m->passes == 0 || p->full_every <= 1 || m->passes % (unsigned)p->full_every == 0;
    if (!full) o.since_ms = m->since_ms - p->overlap_ms > 1 ? m->since_ms - p->overlap_ms : 1;
    int64_t start = sk_wall_ms();
    int rc = sk_reconcile_activity(st, r, activity_id, &o, rep);
    if (rc == 0) {
        m->since_ms = start;
        m->passes++;
        if (rep->total == 0 && !rep->incremental)
            m->clean_ms = start;
        else
            sk_reconcile_drift_event(st, rep, m->clean_ms, 0); /* rep->event says how it went */
    }
    return rc;
}
