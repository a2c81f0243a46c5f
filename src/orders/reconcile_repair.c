/* reconcile_repair.c - reconcile's --repair (reconcile_int.h): fixes what
 * the check found and what is provably safe to fix, one audit row per
 * change (docs/reconcile.md says what it never does):
 *   - segmented: transfers lent and never applied are rolled forward;
 *   - per key set, in one WATCH/MULTI/EXEC: ledger entries restored from
 *     DB orders when the buyers hash proves their units are held, and the
 *     stock when the buyers hash agrees with the ledger;
 *   - lost orders written back to the DB, orders released in Redis
 *     cancelled in the DB, cancelled orders released in Redis;
 *   - last, the DB stock from the orders as they are then. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/codes.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/segment.h"
#include "engine/stock.h"
#include "orders/reconcile_int.h"

#define WATCH_ATTEMPTS 5 /* Redis repairs retried when the sale moved under them */

/* One audit row per change; a failed one is logged (the change stands). */
static void audit(sk_store *st, int64_t now, uint64_t aid, int seg, const char *kind,
                  const char *detail)
{
    char buf[SK_STORE_AUDIT_DETAIL_MAX];
    if (seg >= 0) {
        snprintf(buf, sizeof buf, "segment %d: %s", seg, detail);
        detail = buf;
    }
    if (sk_store_audit_add(st, now, aid, kind, detail) != 0)
        sk_log(SK_LOG_ERROR, "reconcile: activity %" PRIu64 ": %s done, audit row failed: %s (%s)",
               aid, kind, sk_store_errstr(st), detail);
}

/* A ledger entry to write back (from the DB order). */
struct restore {
    const struct sk_order *o;
    int released;
    int write;
};

/* A restored entry of a cancelled order, now owed a release. */
struct owed {
    const struct sk_order *o;
    int seg;
};

/* One WATCH attempt of repair_redis: the key set read under WATCH, the
 * restores (rs[0..nmiss): every not_in_ledger drift of the key set) and
 * what the attempt plans to write. */
struct plan {
    struct rec_ctx *c;
    struct restore *rs;
    size_t nmiss;
    struct rec_snap s;
    int64_t held;      /* units held by buyers in s */
    int64_t new_stock; /* -1: the stock is left alone */
};

/* Drift entries of kind found in segment seg (SK_SEG_NONE: the activity's). */
static size_t seg_found(const struct sk_reconcile_report *rep, int seg, int kind)
{
    size_t n = 0;
    for (size_t i = 0; i < rep->ndrift; i++)
        n += rep->drift[i].kind == kind && rep->drift[i].segment == seg;
    return n;
}

/* The not_in_ledger drift of c's key set, as restores (*rs allocated, the
 * caller frees it; NULL when none). 0 or SK_ENOMEM. */
static int collect_restores(struct rec_ctx *c, struct restore **rs, size_t *nmiss)
{
    const struct sk_reconcile_report *rep = c->rep;
    size_t n = seg_found(rep, c->seg, SK_DRIFT_NOT_IN_LEDGER);
    *rs = n ? calloc(n, sizeof **rs) : NULL;
    *nmiss = n;
    if (n && !*rs) return SK_ENOMEM;
    for (size_t i = 0, k = 0; i < rep->ndrift; i++)
        if (rep->drift[i].kind == SK_DRIFT_NOT_IN_LEDGER && rep->drift[i].segment == c->seg)
            (*rs)[k++].o = &rep->drift[i].order;
    return 0;
}

static void unwatch(struct rec_ctx *c)
{
    redisReply *rep;
    sk_redis_cmd(c->r, &rep, "UNWATCH");
    if (rep) freeReplyObject(rep);
}

/* Which missing entries are released ones (the released set keeps the
 * order id even when its ledger entry is gone), and which are still
 * missing from the ledger read under WATCH (rs[i].write). 0, or -1 when
 * Redis did not answer (detail in c->r->errstr, empty: out of memory). */
static int plan_released(struct plan *p)
{
    struct rec_ctx *c = p->c;
    redisReply *rep1 = NULL;
    const char **argv = malloc((2 + p->nmiss) * sizeof *argv);
    int ok = argv != NULL;
    for (size_t i = 0; ok && i < p->nmiss; i++)
        argv[2 + i] = p->rs[i].o->order_id;
    if (ok) {
        argv[0] = "SMISMEMBER";
        argv[1] = c->k.released;
        ok = sk_redis_command(c->r, &rep1, (int)(2 + p->nmiss), argv, NULL) == 0 &&
             rep1->type == REDIS_REPLY_ARRAY && rep1->elements == p->nmiss;
    }
    free(argv);
    for (size_t i = 0; ok && i < p->nmiss; i++) {
        struct restore *r = &p->rs[i];
        r->released =
            rep1->element[i]->type == REDIS_REPLY_INTEGER && rep1->element[i]->integer == 1;
        /* Still missing from the ledger read under WATCH? */
        struct rec_lentry key;
        snprintf(key.oid, sizeof key.oid, "%s", r->o->order_id);
        r->write = !p->s.nl || !bsearch(&key, p->s.ledger, p->s.nl, sizeof *p->s.ledger,
                                        sk_reconcile_cmp_lentry);
    }
    if (rep1) freeReplyObject(rep1);
    return ok ? 0 : -1;
}

/* Per user: the buyers hash must hold exactly the units of the missing
 * unreleased orders on top of the ledger's. Else the user's entries are
 * left alone (not provably safe): their write is dropped. */
static void plan_user_units(struct plan *p)
{
    struct rec_ctx *c = p->c;
    struct restore *rs = p->rs;
    struct rec_uunits *lu = NULL;
    size_t nlu = 0;
    sk_reconcile_ledger_users(p->s.ledger, p->s.nl, &lu, &nlu);
    for (size_t i = 0; i < p->nmiss; i++) {
        if (!rs[i].write) continue;
        uint64_t u = rs[i].o->user_id;
        int64_t need = 0, have = 0;
        for (size_t j = 0; j < p->nmiss; j++)
            if (rs[j].write && rs[j].o->user_id == u && !rs[j].released) need += rs[j].o->quantity;
        struct rec_uunits key = {.user = u};
        struct rec_uunits *b = p->s.nb ? bsearch(&key, p->s.buyers, p->s.nb, sizeof key,
                                                 sk_reconcile_cmp_uunits)
                                       : NULL,
                          *l = nlu ? bsearch(&key, lu, nlu, sizeof key, sk_reconcile_cmp_uunits)
                                   : NULL;
        have = (b ? b->units : 0) - (l ? l->units : 0);
        if (have == need) continue;
        for (size_t j = 0; j < p->nmiss; j++)
            if (rs[j].write && rs[j].o->user_id == u) {
                rs[j].write = 0;
                sk_reconcile_add_repair(c->rep, c->seg, SK_DRIFT_NOT_IN_LEDGER, 0,
                                        "order %s: ledger entry not restored: user %" PRIu64
                                        " holds %" PRId64 " unit(s) beyond the ledger, the "
                                        "missing orders %" PRId64 ": not provably safe",
                                        rs[j].o->order_id, u, have, need);
            }
    }
    free(lu);
}

/* With the restores applied, does the buyers hash agree with the ledger
 * for every user? Only then is stock = initial - held safe (a segment's:
 * initial + received - lent - held, what it owns): p->new_stock. The
 * restores are appended to p->s.ledger for the check. */
static void plan_stock(struct plan *p)
{
    struct rec_ctx *c = p->c;
    struct rec_snap *s = &p->s;
    /* units sold twice before a fence (docs/recovery.md) are held too */
    int64_t own = s->initial + s->xin - s->xout + s->oversold;
    p->held = sk_reconcile_held_units(s);
    p->new_stock = -1;
    if (!s->present || s->stock + p->held == own) return;
    size_t nl2 = s->nl;
    struct rec_lentry *l2 = realloc(s->ledger, (s->nl + p->nmiss + 1) * sizeof *l2);
    if (!l2) return;
    s->ledger = l2;
    for (size_t i = 0; i < p->nmiss; i++) {
        const struct restore *r = &p->rs[i];
        if (!r->write) continue;
        struct rec_lentry *e = &s->ledger[nl2++];
        memset(e, 0, sizeof *e);
        snprintf(e->oid, sizeof e->oid, "%s", r->o->order_id);
        e->user = r->o->user_id;
        e->qty = r->o->quantity;
        e->released = r->released;
    }
    s->nl = nl2;
    long diffs = sk_reconcile_user_diffs(s, NULL, NULL);
    int64_t target = own - p->held;
    if (diffs == 0 && target >= 0 && target <= own && !c->counters_bad) {
        p->new_stock = target;
        return;
    }
    sk_reconcile_add_repair(c->rep, c->seg, SK_DRIFT_REDIS_INVARIANT, 0,
                            "Redis stock %" PRId64 " left alone: %s", s->stock,
                            diffs ? "the buyers hash disagrees with the ledger, so it cannot "
                                    "prove what the stock should be"
                            : c->counters_bad
                                ? "the transfer counters (xin/xout) or the shares are in "
                                  "doubt (see the activity's drift), so they cannot prove "
                                  "what the segment owns"
                                : "initial - held is outside 0..initial (oversold)");
}

/* The planned writes as commands: MULTI, per restore HSET ledger and
 * SADD/SREM released, SET stock, EXEC. argv has 4 slots per command,
 * vals one per write. Returns the number of commands. */
static size_t build_writes(const struct plan *p, struct rec_cmd *cmds, const char **argv,
                           char (*vals)[48])
{
    const struct rec_ctx *c = p->c;
    size_t ci = 0, vi = 0;
    argv[0] = "MULTI";
    cmds[ci++] = (struct rec_cmd){1, &argv[0]};
    for (size_t i = 0; i < p->nmiss; i++) {
        const struct restore *r = &p->rs[i];
        if (!r->write) continue;
        const char **a = &argv[4 * ci];
        snprintf(vals[vi], sizeof vals[vi], "%" PRIu64 ":%" PRId64 "%s", r->o->user_id,
                 r->o->quantity, r->released ? ":released" : "");
        a[0] = "HSET";
        a[1] = c->k.ledger;
        a[2] = r->o->order_id;
        a[3] = vals[vi++];
        cmds[ci++] = (struct rec_cmd){4, a};
        /* The released set is kept in step with the ledger marks; a
         * no-op for a held entry (SREM of an absent member). */
        a = &argv[4 * ci];
        a[0] = r->released ? "SADD" : "SREM";
        a[1] = c->k.released;
        a[2] = r->o->order_id;
        cmds[ci++] = (struct rec_cmd){3, a};
    }
    if (p->new_stock >= 0) {
        const char **a = &argv[4 * ci];
        snprintf(vals[vi], sizeof vals[vi], "%" PRId64, p->new_stock);
        a[0] = "SET";
        a[1] = c->k.stock;
        a[2] = vals[vi];
        cmds[ci++] = (struct rec_cmd){3, a};
    }
    argv[4 * ci] = "EXEC";
    cmds[ci] = (struct rec_cmd){1, &argv[4 * ci]};
    return ci + 1;
}

enum exec_result { EXEC_DONE, EXEC_BUSY, EXEC_FAILED };

/* Sends the nw planned writes (and the stock) in one MULTI/EXEC: EXEC_DONE,
 * EXEC_BUSY when a watched key changed (EXEC answered nil), or EXEC_FAILED
 * with a repair line saying why. */
static enum exec_result exec_plan(struct plan *p, size_t nw)
{
    struct rec_ctx *c = p->c;
    size_t ncmd = 2 + 2 * nw + (p->new_stock >= 0);
    struct rec_cmd *cmds = calloc(ncmd, sizeof *cmds);
    const char **argv = calloc(ncmd * 4, sizeof *argv);
    char(*vals)[48] = calloc(nw + 1, sizeof *vals);
    redisReply **replies = calloc(ncmd, sizeof *replies);
    enum exec_result res = EXEC_FAILED;
    if (!cmds || !argv || !vals || !replies) {
        unwatch(c);
        sk_reconcile_add_repair(c->rep, c->seg, SK_DRIFT_REDIS_INVARIANT, 0, "out of memory");
    } else {
        size_t ci = build_writes(p, cmds, argv, vals);
        int rc = sk_reconcile_pipeline(c->r, ci, cmds, replies);
        if (rc == 0 && replies[ci - 1]->type == REDIS_REPLY_ARRAY)
            res = EXEC_DONE;
        else if (rc == 0 && replies[ci - 1]->type == REDIS_REPLY_NIL)
            res = EXEC_BUSY;
        else
            sk_reconcile_add_repair(c->rep, c->seg, SK_DRIFT_REDIS_INVARIANT, 0,
                                    "Redis repairs failed: %s",
                                    rc ? c->r->errstr : "unexpected EXEC reply");
        if (rc == 0) sk_reconcile_free_replies(replies, ci);
    }
    free(cmds);
    free(argv);
    free(vals);
    free(replies);
    return res;
}

/* The writes EXEC made: one audit row and one repair line each.
 * release_after[*nrel...]: restored entries of cancelled orders, now owed
 * a release. */
static void report_applied(const struct plan *p, struct owed *release_after, size_t *nrel)
{
    const struct rec_ctx *c = p->c;
    const struct rec_snap *s = &p->s;
    char detail[SK_STORE_AUDIT_DETAIL_MAX];
    for (size_t i = 0; i < p->nmiss; i++) {
        const struct restore *r = &p->rs[i];
        if (!r->write) continue;
        snprintf(detail, sizeof detail,
                 "order %s: ledger entry restored as \"%" PRIu64 ":%" PRId64
                 "%s\" from the DB order (%s); the buyers hash holds its units%s",
                 r->o->order_id, r->o->user_id, r->o->quantity, r->released ? ":released" : "",
                 sk_order_status_name(r->o->status),
                 r->released ? " (released: in the released set)" : "");
        audit(c->st, c->now, c->aid, c->seg, "repair_ledger_entry", detail);
        sk_reconcile_add_repair(c->rep, c->seg, SK_DRIFT_NOT_IN_LEDGER, 1, "%s", detail);
        if (!r->released && r->o->status == SK_ORDER_CANCELLED)
            release_after[(*nrel)++] = (struct owed){r->o, c->seg};
    }
    if (p->new_stock < 0) return;
    if (c->seg < 0)
        snprintf(detail, sizeof detail,
                 "Redis stock %" PRId64 " -> %" PRId64 " (initial %" PRId64
                 " - units held by buyers %" PRId64 "; the buyers hash agrees with the ledger)",
                 s->stock, p->new_stock, s->initial, p->held);
    else
        snprintf(detail, sizeof detail,
                 "Redis stock %" PRId64 " -> %" PRId64 " (initial %" PRId64 " + received %" PRId64
                 " - lent %" PRId64 " - units held by buyers %" PRId64
                 "; the buyers hash agrees with the ledger)",
                 s->stock, p->new_stock, s->initial, s->xin, s->xout, p->held);
    audit(c->st, c->now, c->aid, c->seg, "repair_redis_stock", detail);
    sk_reconcile_add_repair(c->rep, c->seg, SK_DRIFT_REDIS_INVARIANT, 1, "%s", detail);
}

/* One WATCH/MULTI/EXEC attempt: plan from a fresh read, then write.
 * Returns 1 when EXEC found the key set changed (plan again), 0 when done
 * or given up (its repair lines say which). */
static int repair_attempt(struct rec_ctx *c, struct restore *rs, size_t nmiss,
                          struct owed *release_after, size_t *nrel)
{
    struct plan p = {.c = c, .rs = rs, .nmiss = nmiss, .new_stock = -1};
    if (sk_reconcile_read_snap(c->r, &c->k, 1, &p.s)) {
        sk_reconcile_add_repair(c->rep, c->seg, SK_DRIFT_REDIS_INVARIANT, 0,
                                "Redis repairs not attempted: %s", c->r->errstr);
        return 0;
    }
    if (nmiss && plan_released(&p) != 0) {
        sk_reconcile_snap_free(&p.s);
        unwatch(c);
        sk_reconcile_add_repair(c->rep, c->seg, SK_DRIFT_NOT_IN_LEDGER, 0,
                                "ledger repairs not attempted: %s",
                                c->r->errstr[0] ? c->r->errstr : "out of memory");
        return 0;
    }
    plan_user_units(&p);
    plan_stock(&p);
    size_t nw = 0;
    for (size_t i = 0; i < nmiss; i++)
        nw += rs[i].write;
    enum exec_result res = EXEC_FAILED;
    if (!nw && p.new_stock < 0)
        unwatch(c); /* nothing provably safe to write */
    else if ((res = exec_plan(&p, nw)) == EXEC_DONE)
        report_applied(&p, release_after, nrel);
    sk_reconcile_snap_free(&p.s);
    return res == EXEC_BUSY;
}

/* Plans and applies the Redis repairs of one key set (the activity's, or one
 * segment's: one slot) in one WATCH/MULTI/EXEC: ledger entries restored
 * from DB orders when the buyers hash proves their units are held, and the
 * stock when the buyers hash agrees with the ledger.
 * *release_after: restored entries of cancelled orders, now owed a release
 * (caller's array of the NOT_IN_LEDGER drift count, *nrel set). */
static void repair_redis(struct rec_ctx *c, struct owed *release_after, size_t *nrel)
{
    struct sk_reconcile_report *rep = c->rep;
    *nrel = 0;
    struct restore *rs;
    size_t nmiss;
    if (collect_restores(c, &rs, &nmiss)) {
        sk_reconcile_add_repair(rep, c->seg, SK_DRIFT_NOT_IN_LEDGER, 0, "out of memory");
        return;
    }
    for (int attempt = 0; attempt < WATCH_ATTEMPTS; attempt++) {
        /* Lines of an attempt that EXEC then refused are dropped: the
         * next attempt plans again from fresh data. */
        size_t mark = rep->nrepairs, fmark = rep->repair_failures;
        if (!repair_attempt(c, rs, nmiss, release_after, nrel)) break;
        rep->nrepairs = mark;
        rep->repair_failures = fmark;
        if (attempt == WATCH_ATTEMPTS - 1)
            sk_reconcile_add_repair(rep, c->seg, SK_DRIFT_REDIS_INVARIANT, 0,
                                    "Redis repairs given up: the activity kept changing (a live "
                                    "sale?); run reconcile again");
    }
    free(rs);
}

/* Writes a lost order back into the DB (created, or cancelled when Redis
 * released it). */
static void repair_lost(struct rec_run *u, const struct sk_drift *d)
{
    const struct sk_order *o = &d->order;
    char detail[SK_STORE_AUDIT_DETAIL_MAX];
    snprintf(detail, sizeof detail,
             "order %s (user %" PRIu64 ", %" PRId64
             " unit(s)) was in the Redis ledger but not in the DB: restored as %s",
             o->order_id, o->user_id, o->quantity,
             o->status == SK_ORDER_CANCELLED ? "cancelled (released in Redis)" : "created");
    int rc = sk_store_order_restore(u->st, o, u->now, detail);
    if (rc == 0)
        sk_reconcile_add_repair(u->rep, d->segment, SK_DRIFT_LOST_ORDER, 1, "%s", detail);
    else if (rc == SK_EEXIST)
        sk_reconcile_add_repair(u->rep, d->segment, SK_DRIFT_LOST_ORDER, 1,
                                "order %s: persisted meanwhile, nothing to do", o->order_id);
    else
        sk_reconcile_add_repair(u->rep, d->segment, SK_DRIFT_LOST_ORDER, 0,
                                "order %s: not restored: %s", o->order_id, sk_store_errstr(u->st));
}

/* The end of a repair that settled order o on both sides: the order is
 * marked released in the DB, then either nothing was left to do (meanwhile
 * says what another hand did) or the repair is audited as audit_kind and
 * reported as "order <id> (user, units) <done>". */
static void repair_settled(struct rec_run *u, int seg, int kind, const struct sk_order *o,
                           const char *meanwhile, const char *audit_kind, const char *done)
{
    sk_store_order_mark_released(u->st, o->order_id, u->now);
    if (meanwhile) {
        sk_reconcile_add_repair(u->rep, seg, kind, 1, "order %s: %s meanwhile, nothing to do",
                                o->order_id, meanwhile);
        return;
    }
    char detail[SK_STORE_AUDIT_DETAIL_MAX];
    snprintf(detail, sizeof detail, "order %s (user %" PRIu64 ", %" PRId64 " unit(s)) %s",
             o->order_id, o->user_id, o->quantity, done);
    audit(u->st, u->now, u->aid, SK_SEG_NONE, audit_kind, detail);
    sk_reconcile_add_repair(u->rep, seg, kind, 1, "%s", detail);
}

/* Released in Redis, still created in the DB: cancel it there (a payment
 * must not keep units that went back on sale). */
static void repair_released_not_cancelled(struct rec_run *u, const struct sk_drift *d)
{
    const struct sk_order *o = &d->order;
    int seg = d->segment, prev = -1;
    int rc = sk_store_order_cancel(u->st, o->order_id, u->now, &prev);
    if (rc == SK_ESTATE) {
        sk_reconcile_add_repair(
            u->rep, seg, SK_DRIFT_RELEASED_NOT_CANCELLED, 0,
            "order %s: paid meanwhile: now paid in the DB and released in Redis (serious)",
            o->order_id);
        return;
    }
    if (rc) {
        sk_reconcile_add_repair(u->rep, seg, SK_DRIFT_RELEASED_NOT_CANCELLED, 0,
                                "order %s: not cancelled: %s", o->order_id, sk_store_errstr(u->st));
        return;
    }
    repair_settled(u, seg, SK_DRIFT_RELEASED_NOT_CANCELLED, o,
                   prev != SK_ORDER_CREATED ? "cancelled" : NULL, "repair_cancel_released",
                   "was released in Redis but created in the DB: cancelled in the DB");
}

/* Cancelled in the DB, units still held in Redis: run the release (on the
 * key set the order id names: sk_stock_release routes it). */
static void repair_release(struct rec_run *u, int seg, const struct sk_order *o)
{
    int rrc = -1;
    int64_t given = 0;
    int rc = sk_stock_release(u->r, u->aid, o->order_id, o->user_id, o->quantity, &rrc, &given);
    if (rc < 0) {
        sk_reconcile_add_repair(u->rep, seg, SK_DRIFT_CANCELLED_NOT_RELEASED, 0,
                                "order %s: release failed: %s", o->order_id, u->r->errstr);
        return;
    }
    if (rrc != SK_RC_RELEASED && rrc != SK_RC_ALREADY_RELEASED) {
        sk_reconcile_add_repair(u->rep, seg, SK_DRIFT_CANCELLED_NOT_RELEASED, 0,
                                "order %s: Redis refused the release (%s)", o->order_id,
                                sk_rc_name(rrc));
        return;
    }
    char done[128];
    snprintf(done, sizeof done,
             "was cancelled in the DB but held in Redis: released, %" PRId64
             " unit(s) back on sale",
             given);
    repair_settled(u, seg, SK_DRIFT_CANCELLED_NOT_RELEASED, o,
                   rrc == SK_RC_ALREADY_RELEASED ? "released" : NULL, "repair_release", done);
}

/* Segmented: rolls forward every transfer lent and never applied
 * (sk_seg_settle: idempotent per transfer id, so racing the borrower is
 * safe). Only when the transfer counters agree with the unapplied
 * transfers: if they do not, units were moved outside a transfer and
 * applying the transfers could create stock. */
static void repair_transit(struct rec_run *u)
{
    struct sk_reconcile_report *rep = u->rep;
    struct sk_reconcile_transit f;
    int rc = sk_reconcile_transit_now(u, &f);
    if (rc) {
        sk_reconcile_add_repair(rep, SK_SEG_NONE, SK_DRIFT_IN_TRANSIT, 0,
                                "transfers not settled: %s",
                                rc == SK_ENOMEM ? "out of memory" : u->r->errstr);
        return;
    }
    if (f.lent - f.received != f.units) {
        sk_reconcile_add_repair(rep, SK_SEG_NONE, SK_DRIFT_IN_TRANSIT, 0,
                                "transfers not settled: the counters say %" PRId64
                                " unit(s) in transit, the unapplied transfers hold %" PRId64
                                ": applying them would not restore the stock; not provably safe",
                                f.lent - f.received, f.units);
        return;
    }
    int64_t units = 0;
    rc = sk_seg_settle(u->r, u->aid, u->nseg, &units);
    if (rc < 0) {
        sk_reconcile_add_repair(rep, SK_SEG_NONE, SK_DRIFT_IN_TRANSIT, 0,
                                "transfers not settled: %s", u->r->errstr);
        return;
    }
    rep->settled = 1;
    rep->settled_units = units;
    if (units == 0) {
        sk_reconcile_add_repair(
            rep, SK_SEG_NONE, SK_DRIFT_IN_TRANSIT, 1,
            "transfers settled: 0 units (applied meanwhile by their borrowers), nothing "
            "to do");
        return;
    }
    char detail[SK_STORE_AUDIT_DETAIL_MAX];
    snprintf(detail, sizeof detail,
             "transfers settled: %" PRId64 " unit(s) lent by a segment and never applied were "
             "rolled forward to their receiving segment(s) (%" PRId64
             " transfer(s) in transit before)",
             units, f.transfers);
    audit(u->st, u->now, u->aid, SK_SEG_NONE, "repair_settle_transfers", detail);
    sk_reconcile_add_repair(rep, SK_SEG_NONE, SK_DRIFT_IN_TRANSIT, 1, "%s", detail);
}

/* The note of purchases refused to another store's nodes, once the
 * operator has dealt with them (docs/reconcile.md): cleared, audited. */
static void repair_store_note(struct rec_run *u)
{
    struct sk_keys b;
    sk_keys_for(&b, u->aid);
    redisReply *rep;
    int rc = sk_redis_cmd(u->r, &rep, "HDEL %s store_refused store_refused_ms", b.meta);
    if (rep) freeReplyObject(rep);
    if (rc) {
        sk_reconcile_add_repair(u->rep, SK_SEG_NONE, SK_DRIFT_STORE, 0,
                                "the note of refused purchases is left: %s", u->r->errstr);
        return;
    }
    char detail[160];
    snprintf(detail, sizeof detail, "cleared the note of purchases refused to store %s's nodes",
             u->rep->owner.refused);
    audit(u->st, u->now, u->aid, SK_SEG_NONE, "clear_store_refused", detail);
    sk_reconcile_add_repair(u->rep, SK_SEG_NONE, SK_DRIFT_STORE, 1, "%s", detail);
}

void sk_reconcile_repair(struct rec_run *u)
{
    struct sk_reconcile_report *rep = u->rep;
    size_t nd = rep->ndrift; /* repairs never add drift entries */
    struct owed *rel = nd ? calloc(nd, sizeof *rel) : NULL;
    size_t nrel = 0;
    if (nd && !rel) {
        sk_reconcile_add_repair(rep, SK_SEG_NONE, SK_DRIFT_NOT_IN_LEDGER, 0, "out of memory");
        return;
    }
    if (rep->found[SK_DRIFT_STORE] && rep->owner.note) repair_store_note(u);
    if (u->nseg > 1 && rep->found[SK_DRIFT_IN_TRANSIT]) repair_transit(u);
    /* A segment owns initial + xin - xout: only provable when the counters
     * agree with the transfers and the shares with the activity. */
    int counters_bad = u->nseg > 1 && (seg_found(rep, SK_SEG_NONE, SK_DRIFT_IN_TRANSIT) ||
                                       seg_found(rep, SK_SEG_NONE, SK_DRIFT_REDIS_INVARIANT));
    for (int i = 0; i < u->nseg; i++) {
        struct rec_ctx *c = &u->cs[i];
        c->counters_bad = counters_bad;
        if (!c->rr->present || (!seg_found(rep, c->seg, SK_DRIFT_NOT_IN_LEDGER) &&
                                !seg_found(rep, c->seg, SK_DRIFT_REDIS_INVARIANT)))
            continue;
        size_t n = 0;
        repair_redis(c, rel + nrel, &n);
        nrel += n;
    }
    int db_changed = 0;
    for (size_t i = 0; i < nd && rep->db.present; i++) {
        const struct sk_drift *d = &rep->drift[i];
        if (d->kind == SK_DRIFT_LOST_ORDER) {
            repair_lost(u, d);
            db_changed = 1;
        } else if (d->kind == SK_DRIFT_RELEASED_NOT_CANCELLED) {
            repair_released_not_cancelled(u, d);
            db_changed = 1;
        } else if (d->kind == SK_DRIFT_CANCELLED_NOT_RELEASED) {
            repair_release(u, d->segment, &d->order);
        }
    }
    for (size_t i = 0; i < nrel; i++)
        repair_release(u, rel[i].seg, rel[i].o);
    free(rel);
    /* Last: the DB stock from the orders as they are now. */
    if (rep->db.present && (rep->found[SK_DRIFT_DB_STOCK] || db_changed)) {
        int64_t before = 0, after = 0;
        int rc = sk_store_db_stock_repair(u->st, u->aid, u->now, &before, &after);
        if (rc)
            sk_reconcile_add_repair(rep, SK_SEG_NONE, SK_DRIFT_DB_STOCK, 0,
                                    "DB stock not repaired: %s", sk_store_errstr(u->st));
        else if (before != after)
            sk_reconcile_add_repair(rep, SK_SEG_NONE, SK_DRIFT_DB_STOCK, 1,
                                    "DB stock %" PRId64 " -> %" PRId64
                                    " (initial - units of orders not "
                                    "cancelled)",
                                    before, after);
    }
}
