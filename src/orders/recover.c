/* recover.c - fence, settle, rebuild, replay and resume of an activity's key
 * sets from the database (recover.h; design in docs/recovery.md). */
#include "orders/recover.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/codes.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/stock.h"
#include "orders/draw_sync.h"
#include "redis/reply.h"
#include "redis/stream_id.h"

/* Orders read from the store at once (a large page: on a PostgreSQL table
 * filled faster than its statistics follow, every page may cost a sort of
 * the whole activity), checked against the ledger in chunks of CHUNK. */
#define PAGE 5000
#define CHUNK 1000

/* One recovery on its way: the activity, its key sets and the handles. */
struct rec {
    sk_store *st;
    sk_redis *r;
    struct sk_activity a;
    const struct sk_recover_opts *o;
    struct sk_recover_report *rep;
    struct sk_keys base;
    struct sk_keyset_probe base_probe;
    char *err;
    size_t cap;
};

#define fail(c, ...) sk_errf((c)->err, (c)->cap, __VA_ARGS__)

static int redis_fail(struct rec *c, int rc, const char *what)
{
    return fail(c, rc, "activity %" PRIu64 ": redis %s: %s", c->a.id, what, c->r->errstr);
}

static int store_fail(struct rec *c, int rc, const char *what)
{
    return fail(c, rc, "activity %" PRIu64 ": database %s: %s", c->a.id, what,
                sk_store_errstr(c->st));
}

/* An audit row; a failure to write one is logged, not fatal: the change
 * it records is made, and the log line says so. */
static void audit(struct rec *c, const struct sk_recover_ks *ks, const char *kind, const char *fmt,
                  ...) __attribute__((format(printf, 4, 5)));
static void audit(struct rec *c, const struct sk_recover_ks *ks, const char *kind, const char *fmt,
                  ...)
{
    char text[SK_STORE_AUDIT_DETAIL_MAX - 64], detail[SK_STORE_AUDIT_DETAIL_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (ks && ks->k.seg >= 0)
        snprintf(detail, sizeof detail, "segment %d: %s (%s)", ks->k.seg, text, c->o->actor);
    else
        snprintf(detail, sizeof detail, "%s (%s)", text, c->o->actor);
    if (sk_store_audit_add(c->st, sk_wall_ms(), c->a.id, kind, detail) < 0)
        sk_log(SK_LOG_ERROR, "recover: activity %" PRIu64 ": audit row %s not written: %s", c->a.id,
               kind, sk_store_errstr(c->st));
}

/* The activity was preheated, so its keys must exist. */
static int was_preheated(const struct sk_activity *a)
{
    return strcmp(a->state, "created") != 0;
}

/* ---- 1. what Redis and the database hold --------------------------------- */

/* Key sets, watermarks, and one probe of every key set (and of the base
 * meta of a segmented activity). */
static int look(struct rec *c)
{
    struct sk_recover_report *rep = c->rep;
    int S = c->a.segments > 1 ? (int)c->a.segments : 1;
    rep->segments = S;
    rep->n = (size_t)S;
    rep->ks = calloc(rep->n, sizeof *rep->ks);
    struct sk_keys *keys = calloc(rep->n, sizeof *keys);
    if (!rep->ks || !keys) {
        free(keys);
        return fail(c, SK_ENOMEM, "out of memory");
    }
    for (int s = 0; s < S; s++) {
        struct sk_recover_ks *ks = &rep->ks[s];
        sk_keys_seg(&ks->k, c->a.id, S > 1 ? s : SK_SEG_NONE);
        ks->selected = S == 1 || !c->o->only || c->o->only[s];
        keys[s] = ks->k;
    }
    int rc = 0;
    struct sk_keyset_probe *pr = calloc(rep->n, sizeof *pr);
    if (!pr) rc = SK_ENOMEM;
    if (rc == 0 && (rc = sk_recovery_probe(c->r, keys, rep->n, pr)) < 0)
        rc = redis_fail(c, rc, "probe");
    for (size_t i = 0; rc == 0 && i < rep->n; i++)
        rep->ks[i].before = pr[i];
    free(pr);
    free(keys);
    if (rc < 0) return rc == SK_ENOMEM ? fail(c, rc, "out of memory") : rc;
    sk_keys_for(&c->base, c->a.id);
    if (S > 1 && (rc = sk_recovery_probe(c->r, &c->base, 1, &c->base_probe)) < 0)
        return redis_fail(c, rc, "probe");
    struct sk_mark *marks;
    size_t nm;
    if ((rc = sk_store_marks_list(c->st, c->a.id, &marks, &nm)) < 0)
        return store_fail(c, rc, "marks");
    /* one mark per branch: the highest admission number of any */
    for (size_t i = 0; i < nm; i++)
        for (size_t j = 0; j < rep->n; j++)
            if (!strcmp(marks[i].label, rep->ks[j].k.label) && marks[i].adm > rep->ks[j].watermark)
                rep->ks[j].watermark = marks[i].adm;
    free(marks);
    return 0;
}

/* The key set an order id belongs to, or NULL (another label). */
static struct sk_recover_ks *ks_of(struct rec *c, const char *oid)
{
    uint64_t aid;
    int seg;
    if (sk_keys_parse_label(oid, strlen(oid), &aid, &seg) < 0 || aid != c->a.id) return NULL;
    int S = c->rep->segments;
    if (S == 1) return seg == SK_SEG_NONE ? &c->rep->ks[0] : NULL;
    return seg >= 0 && seg < S ? &c->rep->ks[seg] : NULL;
}

/* Held in the database: created, paid, or cancelled with its release owed. */
static int db_held(const struct sk_order *o)
{
    return o->status != SK_ORDER_CANCELLED || o->released_ms == 0;
}

/* The greatest stream id of a key set's persisted orders. */
static void note_sid(struct sk_recover_ks *ks, const struct sk_order *o)
{
    struct sk_sid a, b;
    if (sk_sid_parse(o->stream_id, strlen(o->stream_id), &a) < 0) return;
    if (ks->max_sid[0] && sk_sid_parse(ks->max_sid, strlen(ks->max_sid), &b) == 0 &&
        sk_sid_cmp(a, b) <= 0)
        return;
    snprintf(ks->max_sid, sizeof ks->max_sid, "%s", o->stream_id);
}

/* The orders of one page that belong to key set ks, checked against its
 * ledger: what Redis does not know goes to out (when not NULL) and is
 * counted in the ks's missing_* fields (count). */
static int classify(struct rec *c, struct sk_recover_ks *ks, const struct sk_order *page, size_t n,
                    struct sk_replay_order *out, size_t *nout, int count)
{
    const char *oids[CHUNK];
    size_t idx[CHUNK], m = 0;
    for (size_t i = 0; i < n; i++)
        if (ks_of(c, page[i].order_id) == ks) {
            idx[m] = i;
            oids[m++] = page[i].order_id;
        }
    if (nout) *nout = 0;
    if (m == 0) return 0;
    int state[CHUNK];
    uint64_t luser[CHUNK];
    int64_t lqty[CHUNK];
    int rc = sk_recovery_ledger(c->r, &ks->k, oids, m, state, luser, lqty);
    if (rc < 0) return redis_fail(c, rc, "HMGET ledger");
    for (size_t j = 0; j < m; j++) {
        const struct sk_order *o = &page[idx[j]];
        int held = db_held(o), put = 0;
        if (state[j] && (luser[j] != o->user_id || lqty[j] != o->quantity)) {
            /* the ledger holds another admission under this id: it cannot
             * be put back (its units are that one's); reported */
            if (count) ks->conflicts++;
            continue;
        }
        if (held && state[j] == 0) {
            put = 1;
            if (count) ks->missing_held++, ks->missing_held_units += o->quantity;
            if (count && o->status == SK_ORDER_PAID) ks->missing_paid_units += o->quantity;
        } else if (!held && state[j] == 0) {
            put = 1;
            if (count) ks->missing_released++;
        } else if (!held && state[j] == 1) {
            put = 1;
            if (count) ks->releases_again++;
        }
        if (put && out)
            out[(*nout)++] = (struct sk_replay_order){.order_id = o->order_id,
                                                      .user_id = o->user_id,
                                                      .quantity = o->quantity,
                                                      .released = !held,
                                                      .paid = o->status == SK_ORDER_PAID,
                                                      .idem_key = o->idem_key};
    }
    return 0;
}

/* Held unpaid orders the replay refused (they did not fit the history this
 * Redis kept: replay.lua) are cancelled in the database, their units back
 * to the DB stock, and marked released (Redis never held them); then
 * recorded in the ledger as released, so they are never put back. One
 * paid meanwhile goes back as paid (a paid order is never refused). */
static int settle_refused(struct rec *c, struct sk_recover_ks *ks, struct sk_replay_order *put,
                          const size_t *refused, size_t nref)
{
    struct sk_replay_order again[CHUNK];
    size_t na = 0;
    int64_t now = sk_wall_ms();
    char first[SK_STORE_ORDER_ID_MAX] = "";
    for (size_t j = 0; j < nref; j++) {
        struct sk_replay_order *o = &put[refused[j]];
        int prev = -1;
        int rc = sk_store_order_cancel(c->st, o->order_id, now, &prev);
        if (rc == SK_ESTATE) {
            again[na] = *o;
            again[na++].paid = 1;
            continue;
        }
        if (rc < 0) return store_fail(c, rc, "cancel a refused order");
        if ((rc = sk_store_order_mark_released(c->st, o->order_id, now)) < 0)
            return store_fail(c, rc, "mark a refused order released");
        again[na] = *o;
        again[na++].released = 1;
        if (prev == SK_ORDER_CREATED) {
            ks->refused_cancelled++;
            ks->refused_units_after += o->quantity;
            if (!first[0]) snprintf(first, sizeof first, "%s", o->order_id);
        }
    }
    if (na) {
        struct sk_replay_result r2;
        memset(&r2, 0, sizeof r2);
        int rc = sk_recovery_replay(c->r, &ks->k, again, na, &r2, NULL, NULL);
        if (rc < 0) return redis_fail(c, rc, "replay");
        ks->replay.held += r2.held; /* paid meanwhile: put back */
        ks->replay.held_units += r2.held_units;
        ks->replay.oversold += r2.oversold;
        ks->replay.paid_over_limit += r2.paid_over_limit;
        ks->replay.idem_restored += r2.idem_restored;
        ks->replay.stock = r2.stock;
    }
    if (first[0])
        audit(c, ks, "recover_refuse",
              "%zu unpaid order(s) the database held did not fit the history this Redis kept "
              "(the buyer's Idempotency-Key had bought another order, or the per-user limit or "
              "the stock was reached): cancelled, units back; first %s",
              nref, first);
    return 0;
}

/* Pages through the activity's orders: pass 1 counts (per key set: orders,
 * units held, greatest stream id, what Redis does not know); pass 2
 * (replay) puts back what Redis does not know into the needed key sets. */
static int scan_orders(struct rec *c, int replay)
{
    struct sk_order *page = malloc(PAGE * sizeof *page);
    struct sk_replay_order *put = malloc(CHUNK * sizeof *put);
    size_t *refused = malloc(CHUNK * sizeof *refused);
    char after[SK_STORE_ORDER_ID_MAX] = "";
    int rc = page && put && refused ? 0 : fail(c, SK_ENOMEM, "out of memory");
    for (;;) {
        size_t n = 0;
        if (rc == 0 && (rc = sk_store_orders_list(c->st, c->a.id, after, PAGE, page, &n)) < 0)
            rc = store_fail(c, rc, "orders");
        if (rc < 0 || n == 0) break;
        for (size_t i = 0; !replay && i < n; i++) {
            struct sk_recover_ks *ks = ks_of(c, page[i].order_id);
            if (!ks) continue;
            ks->db_orders++;
            if (db_held(&page[i])) ks->db_held_units += page[i].quantity;
            note_sid(ks, &page[i]);
        }
        for (size_t at = 0; rc == 0 && at < n; at += CHUNK) {
            size_t m = n - at < CHUNK ? n - at : CHUNK;
            for (size_t s = 0; rc == 0 && s < c->rep->n; s++) {
                struct sk_recover_ks *ks = &c->rep->ks[s];
                if (!ks->selected || (replay && !ks->needed)) continue;
                size_t np = 0, nref = 0;
                rc = classify(c, ks, page + at, m, replay ? put : NULL, &np, !replay);
                if (rc == 0 && np &&
                    (rc = sk_recovery_replay(c->r, &ks->k, put, np, &ks->replay, refused, &nref)) <
                        0)
                    rc = redis_fail(c, rc, "replay");
                if (rc == 0 && nref) rc = settle_refused(c, ks, put, refused, nref);
            }
        }
        snprintf(after, sizeof after, "%s", page[n - 1].order_id);
        if (rc < 0 || n < PAGE) break;
    }
    free(page);
    free(put);
    free(refused);
    return rc;
}

/* ---- 2. which key sets need it ------------------------------------------- */

static void decide(struct rec *c)
{
    for (size_t i = 0; i < c->rep->n; i++) {
        struct sk_recover_ks *ks = &c->rep->ks[i];
        const struct sk_keyset_probe *p = &ks->before;
        if (!ks->selected) continue;
        ks->vanished = !p->present && was_preheated(&c->a);
        ks->lost = was_preheated(&c->a) && (p->lost || !strcmp(p->fence, "lost"));
        if (ks->vanished)
            snprintf(ks->reason, sizeof ks->reason,
                     "its keys are gone while the database says the activity was preheated (%s)",
                     c->a.state);
        else if (ks->lost && p->lost)
            snprintf(ks->reason, sizeof ks->reason, "keys vanished while others are there: %s",
                     p->lost_what);
        else if (p->fence[0])
            snprintf(ks->reason, sizeof ks->reason, "fenced (%s): %s", p->fence,
                     p->fence_why[0] ? p->fence_why : "no reason given");
        else if (p->present && p->adm < ks->watermark)
            snprintf(ks->reason, sizeof ks->reason,
                     "admission count %" PRId64 " is behind the %" PRId64
                     " the database holds: Redis lost writes",
                     p->adm, ks->watermark);
        else if (ks->missing_held || ks->missing_released || ks->releases_again)
            snprintf(ks->reason, sizeof ks->reason,
                     "the database holds orders the Redis ledger does not know");
        else
            continue;
        if (!p->present && !ks->vanished) continue; /* never preheated: nothing to rebuild */
        ks->needed = 1;
        c->rep->needed = 1;
    }
}

/* The dry run's estimate of the stock after the replay. */
static void estimate(struct rec *c)
{
    int64_t held_total = 0;
    int all_gone = 1;
    for (size_t i = 0; i < c->rep->n; i++) {
        held_total += c->rep->ks[i].db_held_units;
        all_gone &= !c->rep->ks[i].before.present;
    }
    for (size_t i = 0; i < c->rep->n; i++) {
        struct sk_recover_ks *ks = &c->rep->ks[i];
        int64_t stock;
        if (ks->vanished) {
            stock = c->rep->segments == 1 ? c->a.stock
                    : all_gone ? sk_seg_share(c->a.stock - held_total, c->rep->segments, (int)i) +
                                     ks->db_held_units
                               : ks->db_held_units;
        } else {
            stock = ks->before.stock;
        }
        /* paid orders go back whatever happens; unpaid ones only as far as
         * the stock goes (replay.lua) */
        stock -= ks->missing_paid_units;
        ks->oversold_after = ks->before.oversold + (stock < 0 ? -stock : 0);
        if (stock < 0) stock = 0;
        int64_t unpaid = ks->missing_held_units - ks->missing_paid_units;
        ks->refused_units_after = unpaid > stock ? unpaid - stock : 0;
        ks->stock_after = unpaid > stock ? 0 : stock - unpaid;
    }
}

/* ---- 3. apply ------------------------------------------------------------ */

static int fence_all(struct rec *c)
{
    for (size_t i = 0; i < c->rep->n; i++) {
        struct sk_recover_ks *ks = &c->rep->ks[i];
        if (!ks->needed) continue;
        char now[SK_FENCE_MAX];
        const char *why = ks->vanished || ks->lost ? "rebuild" : "rollback";
        int rc = sk_recovery_fence(c->r, &ks->k, why, ks->reason, now);
        if (rc < 0) return redis_fail(c, rc, "fence");
        /* the reason of a fence found already says which and why */
        if (ks->before.fence[0] && strcmp(ks->before.fence, "vanished"))
            audit(c, ks, "recover_fence", "found %s", ks->reason);
        else
            audit(c, ks, "recover_fence", "fenced (%s): %s", now, ks->reason);
        sk_log(SK_LOG_WARN, "recover: activity %" PRIu64 " %s: %s%s", c->a.id, ks->k.label,
               ks->before.fence[0] ? "found " : "fenced: ", ks->reason);
    }
    return 0;
}

/* Segments: transfers to a vanished segment are forgotten (it is rebuilt
 * with what its buyers hold), then every transfer in transit is applied,
 * fenced receivers included. */
static int settle(struct rec *c)
{
    int S = c->rep->segments;
    if (S < 2) return 0;
    int rc;
    for (size_t i = 0; i < c->rep->n; i++) {
        int64_t units = 0;
        if (!c->rep->ks[i].needed || !c->rep->ks[i].vanished) continue;
        if ((rc = sk_recovery_forget_lends_to(c->r, c->a.id, S, (int)i, &units)) < 0)
            return redis_fail(c, rc, "forget transfers");
        c->rep->forgotten_units += units;
    }
    int64_t units = 0;
    if ((rc = sk_seg_settle_opt(c->r, c->a.id, S, 1, &units)) < 0)
        return redis_fail(c, rc, "settle transfers");
    c->rep->settled_units += units;
    if (units) audit(c, NULL, "recover_settle", "transfers settled: %" PRId64 " unit(s)", units);
    return 0;
}

/* Key sets whose keys vanished, all or some: the orders their stream and
 * ledger still hold go to the database first (salvage.h), so an order only
 * Redis held is not lost with the rest; then what the replay writes back
 * is dropped and, when the definition survived, the stock starts again at
 * initial + xin - xout (reset.lua); without it rebuild() writes it. When
 * the salvage put orders into the database, its counts are read again
 * (the rebuild's shares and the resume's stream ids come from them). The
 * ledger holds every admission of the key set: when it survived, nothing
 * acknowledged was lost with the rest, so the resume counts none lost. */
static int salvage_all(struct rec *c)
{
    int64_t inserted = 0;
    for (size_t i = 0; i < c->rep->n; i++) {
        struct sk_recover_ks *ks = &c->rep->ks[i];
        if (!ks->needed || !(ks->vanished || ks->lost)) continue;
        int rc = sk_salvage_key_set(c->st, c->r, &ks->k, &ks->salvage, c->err, c->cap);
        if (rc < 0) return rc;
        const struct sk_salvage *sv = &ks->salvage;
        inserted += sv->inserted;
        if (sv->stream_orders || sv->ledger_orders)
            audit(c, ks, "recover_salvage",
                  "%" PRId64 " order(s) read from the stream, %" PRId64 " from the ledger; %" PRId64
                  " of them were in Redis only, now in the database; "
                  "%" PRId64 " conflict(s), %" PRId64 " malformed",
                  sv->stream_orders, sv->ledger_orders, sv->inserted, sv->conflicts, sv->bad);
        if (sv->inserted)
            sk_log(SK_LOG_WARN,
                   "recover: activity %" PRIu64 " %s: %" PRId64
                   " acknowledged order(s) only Redis held were salvaged into the database",
                   c->a.id, ks->k.label, sv->inserted);
        if (ks->before.has_ledger && ks->before.adm > ks->watermark) ks->watermark = ks->before.adm;
        int rrc;
        int64_t stock;
        if ((rc = sk_recovery_reset(c->r, &ks->k, &rrc, &stock)) < 0)
            return redis_fail(c, rc, "reset");
        ks->reset = rrc == SK_RC_PREHEATED;
        if (ks->reset)
            audit(c, ks, "recover_rebuild",
                  "keys that vanished (%s): the rest dropped, stock %" PRId64
                  " before the orders are put back, new epoch",
                  ks->before.lost_what[0] ? ks->before.lost_what : "fenced lost", stock);
        else
            ks->vanished = 1; /* no definition: rebuild() writes it */
        c->rep->salvaged += sv->inserted;
    }
    if (!inserted) return 0;
    /* the database's counts again, with the salvaged orders */
    for (size_t i = 0; i < c->rep->n; i++) {
        struct sk_recover_ks *ks = &c->rep->ks[i];
        ks->db_orders = ks->db_held_units = 0;
        ks->max_sid[0] = 0;
        ks->missing_held = ks->missing_held_units = ks->missing_released = 0;
        ks->releases_again = ks->missing_paid_units = ks->conflicts = 0;
    }
    return scan_orders(c, 0);
}

/* Vanished key sets get their definition back, stock = their initial. An
 * unsegmented activity: the database's initial stock. Every segment gone:
 * each its buyers' units plus its share of what is left. Some gone, some
 * alive: a gone segment gets what its buyers hold and no stock (its unsold
 * share stays out of sale until a forced preheat after the sale: never
 * units created, docs/recovery.md). *over0: units the database holds above
 * the initial stock, all segments gone (counted oversold on segment 0). */
static int rebuild(struct rec *c, int64_t *over0)
{
    struct sk_stock_def d;
    sk_activity_stock_def(&c->a, &d);
    /* rebuilt from this database: its own again (docs/design.md) */
    int irc = sk_store_identity(c->st, d.store_id, sizeof d.store_id);
    if (irc < 0) return fail(c, irc, "store identity: %s", sk_store_errstr(c->st));
    int S = c->rep->segments, all_gone = 1;
    int64_t held_total = 0;
    *over0 = 0;
    for (size_t i = 0; i < c->rep->n; i++) {
        all_gone &= !c->rep->ks[i].before.present;
        held_total += c->rep->ks[i].db_held_units;
    }
    int64_t left = c->a.stock - held_total;
    for (size_t i = 0; i < c->rep->n; i++) {
        struct sk_recover_ks *ks = &c->rep->ks[i];
        if (!ks->needed || !ks->vanished) continue;
        int64_t initial = c->a.stock;
        if (S > 1 && all_gone)
            initial = ks->db_held_units + (left > 0 ? sk_seg_share(left, S, (int)i) : 0);
        else if (S > 1)
            initial = ks->db_held_units;
        int rrc;
        int rc = sk_recovery_rebuild(c->r, &ks->k, &d, initial, S, &rrc);
        if (rc < 0) return redis_fail(c, rc, "rebuild");
        if (rrc != SK_RC_PREHEATED) continue; /* rebuilt meanwhile by someone else */
        ks->rebuilt = 1;
        ks->rebuilt_initial = initial;
        if (S > 1 && all_gone && i == 0 && left < 0) *over0 = -left;
        audit(c, ks, "recover_rebuild",
              "keys rebuilt from the definition: initial %" PRId64 ", new epoch", initial);
    }
    return 0;
}

/* Segments that went back in time may have forgotten transfers they lent:
 * their receivers know them (xin ids "<seg>-<n>" above the segment's own
 * counter). A segment that lent again before it was fenced reused some of
 * those numbers, so when it is the only one recovered the counters decide
 * too: after the settle nothing is in transit, and sum(xin) - sum(xout)
 * are units receivers hold that no lender counts. Read before the resume
 * takes them out (once: against the xout read here). */
static int lost_lends(struct rec *c, size_t i, struct sk_resume_args *a)
{
    a->lent = a->xseq = a->xout_seen = 0;
    if (c->rep->segments < 2) return 0;
    struct sk_recover_ks *ks = &c->rep->ks[i];
    int64_t own = ks->rebuilt ? 0 : ks->before.xseq, xin, xout;
    int rc =
        sk_recovery_lost_lends(c->r, c->a.id, c->rep->segments, (int)i, own, &a->lent, &a->xseq);
    if (rc == 0)
        rc = sk_recovery_transfer_sums(c->r, c->a.id, c->rep->segments, (int)i, &xin, &xout,
                                       &a->xout_seen);
    if (rc < 0) return redis_fail(c, rc, "read transfers");
    int alone = 1;
    for (size_t j = 0; j < c->rep->n; j++)
        alone &= j == i || !c->rep->ks[j].needed;
    if (alone && xin - xout > a->lent) a->lent = xin - xout;
    if (ks->rebuilt) a->lent = 0; /* rebuilt with no stock of its own to give back */
    ks->lent_lost = a->lent;
    return 0;
}

static int resume_all(struct rec *c, int64_t over0)
{
    int open = !strcmp(c->a.state, "open");
    for (size_t i = 0; i < c->rep->n; i++) {
        struct sk_recover_ks *ks = &c->rep->ks[i];
        if (!ks->needed) continue;
        struct sk_resume_args a = {.watermark = ks->watermark,
                                   .max_sid = ks->max_sid,
                                   .open = open,
                                   .over = i == 0 ? over0 : 0};
        int rc = lost_lends(c, i, &a);
        if (rc == 0 && (rc = sk_recovery_resume(c->r, &ks->k, &a, &ks->resume)) < 0)
            rc = redis_fail(c, rc, "resume");
        if (rc < 0) return rc;
        const struct sk_replay_result *p = &ks->replay;
        ks->stock_after = ks->resume.stock;
        ks->oversold_after = ks->resume.oversold;
        c->rep->orders_replayed += p->held + p->released + p->again;
        c->rep->lost += ks->resume.lost;
        c->rep->refused += ks->refused_cancelled;
        c->rep->conflicts += ks->conflicts;
        audit(c, ks, "recover_replay",
              "replayed: %" PRId64 " held order(s) put back (%" PRId64 " unit(s)), %" PRId64
              " released order(s) recorded, %" PRId64 " release(s) applied again, %" PRId64
              " unit(s) did not fit; %" PRId64 " unpaid order(s) refused (cancelled); %" PRId64
              " Idempotency-Key record(s) put back; %" PRId64
              " paid order(s) over the limit; %" PRId64
              " order id(s) the ledger holds for another admission; %" PRId64
              " acknowledged admission(s) lost; %" PRId64
              " unit(s) of forgotten transfers; stock now %" PRId64,
              p->held, p->held_units, p->released, p->again, p->oversold, ks->refused_cancelled,
              p->idem_restored, p->paid_over_limit, ks->conflicts, ks->resume.lost, ks->lent_lost,
              ks->resume.stock);
        if (ks->resume.resumed) {
            audit(c, ks, "recover_resume", "fence lifted, switch %s, admission count %" PRId64,
                  open ? "open" : "closed", ks->resume.adm);
            sk_log(SK_LOG_WARN,
                   "recover: activity %" PRIu64 " %s: replayed %" PRId64 " order(s), stock %" PRId64
                   ", %" PRId64 " acknowledged admission(s) lost; resumed",
                   c->a.id, ks->k.label, p->held + p->released + p->again, ks->resume.stock,
                   ks->resume.lost);
        } else {
            c->rep->fenced_after++;
            c->rep->oversold += ks->resume.oversold;
            audit(c, ks, "recover_oversold",
                  "%" PRId64 " unit(s) were sold twice before the fence: stock 0, the sale stays "
                  "fenced until orders are cancelled or an operator decides",
                  ks->resume.oversold);
            sk_log(SK_LOG_ERROR,
                   "recover: activity %" PRIu64 " %s: %" PRId64 " unit(s) OVERSOLD before the "
                   "fence; stock 0, the key set stays fenced (seckill reconcile reports it)",
                   c->a.id, ks->k.label, ks->resume.oversold);
        }
    }
    return 0;
}

/* Units sold twice before a fence failed their conditional DB stock
 * update; once the key sets resume (the orders sold twice were cancelled,
 * or nothing was oversold) the DB stock is recomputed from the orders, in
 * one transaction with its audit row when it changed (as reconcile
 * --repair does). A computed stock out of range (still oversold in the
 * database) is left alone: reconcile reports it. */
static void db_stock(sk_store *st, uint64_t id)
{
    int64_t before, after;
    int rc = sk_store_db_stock_repair(st, id, sk_wall_ms(), &before, &after);
    if (rc == 0 && before != after)
        sk_log(SK_LOG_WARN, "recover: activity %" PRIu64 ": DB stock %" PRId64 " -> %" PRId64, id,
               before, after);
    else if (rc < 0 && rc != SK_ESTATE)
        sk_log(SK_LOG_WARN, "recover: activity %" PRIu64 ": DB stock not checked: %s", id,
               sk_store_errstr(st));
}

/* Registrations (docs/fairness.md) live in Redis's set, which admissions
 * and queue joins read, and in the database, which the registration call
 * writes after it: a key set recovered for any reason gets the database's
 * registrants back (SADD: the ones that survived stay, so a set that went
 * back in time with the rest, or vanished alone, is whole again), else
 * registered buyers would be refused not_registered; then meta `keys` says
 * the set must exist (bit 8, lua/lib/reg.lua), so losing it again is seen.
 * Under the fence: nothing else writes meta meanwhile. Registration needs
 * an unsegmented activity, whose one key set is the base. */
#define REG_CHUNK 500
static int restore_registrations(struct rec *c)
{
    if (c->a.reg_end_ms <= 0 || c->rep->n != 1) return 0;
    struct sk_recover_ks *ks = &c->rep->ks[0];
    if (!ks->needed) return 0;
    struct sk_registration *reg = NULL;
    size_t n = 0;
    int rc = sk_store_registrations_list(c->st, c->a.id, &reg, &n);
    if (rc < 0) return store_fail(c, rc, "registrations");
    const char *argv[2 + REG_CHUNK];
    char num[REG_CHUNK][24];
    for (size_t i = 0; i < n && rc == 0; i += REG_CHUNK) {
        size_t m = n - i < REG_CHUNK ? n - i : REG_CHUNK;
        argv[0] = "SADD";
        argv[1] = ks->k.reg;
        for (size_t j = 0; j < m; j++) {
            snprintf(num[j], sizeof num[j], "%" PRIu64, reg[i + j].user_id);
            argv[2 + j] = num[j];
        }
        redisReply *rep;
        if ((rc = sk_redis_command(c->r, &rep, (int)(2 + m), argv, NULL)) == 0)
            freeReplyObject(rep);
    }
    free(reg);
    if (rc < 0) return redis_fail(c, rc, "SADD registrations");
    if (!n) return 0;
    redisReply *rep;
    if ((rc = sk_redis_cmd(c->r, &rep, "HGET %s keys", ks->k.meta)) < 0)
        return redis_fail(c, rc, "HGET keys");
    int64_t must = sk_reply_i64_or(rep, 0);
    freeReplyObject(rep);
    if (!(must & 8)) {
        if ((rc = sk_redis_cmd(c->r, &rep, "HSET %s keys %" PRId64, ks->k.meta, must | 8)) < 0)
            return redis_fail(c, rc, "HSET keys");
        freeReplyObject(rep);
    }
    audit(c, ks, "recover_rebuild", "%zu registration(s) written back from the database", n);
    return 0;
}

/* A drawn sale's draw (docs/fairness.md) lives in its key set: the order,
 * the seed and the current wave. Once the key set resumed (draw_put.lua
 * writes nothing into a fenced one) the draw the database recorded goes
 * back (draw_sync.h; Redis keeps one it still holds), so winners find
 * their rights again without anyone running `activity draw`. */
static int restore_draw(struct rec *c)
{
    if (c->a.drawn_ms <= 0 || c->rep->n != 1) return 0;
    struct sk_recover_ks *ks = &c->rep->ks[0];
    if (!ks->needed || !ks->resume.resumed) return 0;
    struct sk_draw_redis after;
    char why[256];
    int rc = sk_draw_sync(c->st, c->r, &c->a, &after, why, sizeof why);
    if (rc < 0) return fail(c, rc, "activity %" PRIu64 ": the draw: %s", c->a.id, why);
    if (after.rc != SK_RC_OK)
        return fail(c, SK_ESTATE, "activity %" PRIu64 ": the draw: redis refused it: %s", c->a.id,
                    sk_rc_message(after.rc));
    c->rep->draw_restored = 1;
    audit(c, ks, "recover_rebuild",
          "the draw written back: %" PRId64 " places, wave %" PRId64 " (places %" PRId64
          "..%" PRId64 ")",
          after.n, after.wave, after.from + 1, after.to);
    return 0;
}

/* Segmented: a base meta that vanished is written again last (its
 * `segments` field routes purchases), with the switch as the database
 * records it. */
static int rebuild_base(struct rec *c)
{
    if (c->rep->segments < 2 || (c->base_probe.present && c->base_probe.segments > 1) ||
        !was_preheated(&c->a))
        return 0;
    redisReply *rep;
    char ch[SK_CH_SPEC_MAX]; /* the queue join's challenge ("": none) */
    sk_activity_ch_spec(&c->a, ch, sizeof ch);
    int rc = sk_redis_cmd(
        c->r, &rep,
        "HSET %s id %" PRIu64 " segments %d initial %" PRId64 " limit %" PRId64 " max_qty %" PRId64
        " start_ms %" PRId64 " end_ms %" PRId64 " open %d ch %s",
        c->base.meta, c->a.id, c->rep->segments, c->a.stock, c->a.per_user_limit,
        c->a.max_per_order, c->a.start_ms, c->a.end_ms, !strcmp(c->a.state, "open"), ch);
    if (rc < 0) return redis_fail(c, rc, "HSET base meta");
    freeReplyObject(rep);
    /* the waiting room's meta: its queue lives under the base tag
     * (docs/waiting-room.md); the queue itself starts empty */
    if (c->a.wr_passes_per_s > 0) {
        rc = sk_redis_cmd(c->r, &rep, "HSET %s wr_rate %" PRId64 " wr_ttl %" PRId64 " wr_seed %s",
                          c->base.meta, c->a.wr_passes_per_s, c->a.wr_pass_ttl_s, c->a.wr_seed);
        if (rc < 0) return redis_fail(c, rc, "HSET base meta");
        freeReplyObject(rep);
    }
    c->rep->base_rebuilt = 1;
    c->rep->needed = 1;
    audit(c, NULL, "recover_rebuild", "base meta of %d segments written again", c->rep->segments);
    return 0;
}

int sk_recover_activity(sk_store *st, sk_redis *r, uint64_t id, const struct sk_recover_opts *o,
                        struct sk_recover_report *rep, char *err, size_t cap)
{
    memset(rep, 0, sizeof *rep);
    rep->id = id;
    rep->apply = o->apply;
    int64_t t0 = sk_mono_ms();
    struct rec c = {.st = st, .r = r, .o = o, .rep = rep, .err = err, .cap = cap};
    if (err && cap) err[0] = 0;
    int rc = sk_store_activity_get(st, id, &c.a);
    if (rc < 0) return fail(&c, rc, "activity %" PRIu64 ": %s", id, sk_store_errstr(st));
    if ((rc = look(&c)) < 0 || (rc = scan_orders(&c, 0)) < 0) return rc;
    decide(&c);
    estimate(&c);
    if (o->apply) {
        int64_t over0 = 0;
        int any = 0;
        for (size_t i = 0; i < rep->n; i++)
            any |= rep->ks[i].needed;
        /* never rebuilt into a Redis that may evict it again: the sale
         * stays as it is (serve refuses its purchases) until the setting
         * is fixed (redis_settings.h) */
        struct sk_rset_verdict v;
        char where[80];
        if (any &&
            (rc = sk_stock_settings(r, id, (int)c.a.segments, 0, 1, &v, where, sizeof where)) < 0)
            return redis_fail(&c, rc, "settings");
        if (any && v.level == SK_RSET_UNSAFE)
            return fail(&c, SK_ESTATE,
                        "activity %" PRIu64 ": not recovered while redis %s is unsafe: %s", id,
                        where, v.f[0].why);
        if (any) {
            if ((rc = fence_all(&c)) < 0 || (rc = settle(&c)) < 0 || (rc = salvage_all(&c)) < 0 ||
                (rc = rebuild(&c, &over0)) < 0 || (rc = restore_registrations(&c)) < 0 ||
                (rc = scan_orders(&c, 1)) < 0 || (rc = resume_all(&c, over0)) < 0 ||
                (rc = restore_draw(&c)) < 0)
                return rc;
        }
        if ((rc = rebuild_base(&c)) < 0) return rc;
        if (any && !rep->fenced_after) db_stock(st, id);
    }
    rep->ms = sk_mono_ms() - t0;
    return 0;
}

void sk_recover_report_free(struct sk_recover_report *rep)
{
    free(rep->ks);
    rep->ks = NULL;
    rep->n = 0;
}

void sk_recover_print(FILE *f, const struct sk_recover_report *rep)
{
    const char *verb = rep->apply ? "" : "would ";
    for (size_t i = 0; i < rep->n; i++) {
        const struct sk_recover_ks *ks = &rep->ks[i];
        if (!ks->needed) continue;
        char seg[24] = "";
        if (ks->k.seg >= 0) snprintf(seg, sizeof seg, "segment %d: ", ks->k.seg);
        int64_t held = rep->apply ? ks->replay.held : ks->missing_held;
        int64_t units = rep->apply ? ks->replay.held_units : ks->missing_held_units;
        int64_t rel = rep->apply ? ks->replay.released : ks->missing_released;
        int64_t again = rep->apply ? ks->replay.again : ks->releases_again;
        char refused[160];
        if (rep->apply)
            snprintf(refused, sizeof refused,
                     ", refused %" PRId64 " unpaid order(s) that did not fit (cancelled)",
                     ks->refused_cancelled);
        else
            snprintf(refused, sizeof refused,
                     ", refuse about %" PRId64 " unit(s) of unpaid orders that do not fit",
                     ks->refused_units_after);
        fprintf(f,
                "activity %" PRIu64 ": %s%s; admission count %" PRId64 ", database %" PRId64
                "; %s%sput back %" PRId64 " held order(s) (%" PRId64 " unit(s))%s, record %" PRId64
                " released, release %" PRId64 " again: stock %" PRId64 ", oversold %" PRId64 "%s\n",
                rep->id, seg, ks->reason, ks->before.adm, ks->watermark,
                ks->vanished ? (rep->apply ? "rebuilt, " : "would rebuild, ") : "", verb, held,
                units, refused, rel, again, ks->stock_after, ks->oversold_after,
                rep->apply ? (ks->resume.resumed ? "; resumed" : "; STILL FENCED") : "");
    }
    if (rep->base_rebuilt)
        fprintf(f, "activity %" PRIu64 ": base meta of %d segments written again\n", rep->id,
                rep->segments);
    if (rep->draw_restored)
        fprintf(f, "activity %" PRIu64 ": the recorded draw written back\n", rep->id);
    if (!rep->needed)
        fprintf(f, "activity %" PRIu64 ": Redis agrees with the database: nothing to recover\n",
                rep->id);
    else if (rep->apply)
        fprintf(f,
                "activity %" PRIu64 ": recovered in %" PRId64 " ms: %" PRId64
                " order(s) replayed, %" PRId64 " refused, %" PRId64
                " acknowledged admission(s) lost, %" PRId64 " unit(s) oversold%s\n",
                rep->id, rep->ms, rep->orders_replayed, rep->refused, rep->lost, rep->oversold,
                rep->fenced_after ? "; the sale stays fenced" : "");
    else
        fprintf(f, "activity %" PRIu64 ": a recovery is needed (--apply runs it)\n", rep->id);
}

int sk_recover_oversold_retry(sk_store *st, sk_redis *r, const struct sk_activity *a,
                              const struct sk_keys *k, int64_t watermark, int *resumed)
{
    struct sk_resume_args args = {.watermark = watermark, .open = !strcmp(a->state, "open")};
    struct sk_resume_result res;
    *resumed = 0;
    int rc = sk_recovery_resume(r, k, &args, &res);
    if (rc < 0) return rc;
    if (res.resumed) {
        *resumed = 1;
        char detail[256], seg[24] = "";
        if (k->seg >= 0) snprintf(seg, sizeof seg, "segment %d: ", k->seg);
        snprintf(detail, sizeof detail,
                 "%sthe oversold units are covered by stock given back: fence lifted (worker)",
                 seg);
        if (sk_store_audit_add(st, sk_wall_ms(), a->id, "recover_resume", detail) < 0)
            sk_log(SK_LOG_ERROR, "recover: audit row not written: %s", sk_store_errstr(st));
        sk_log(SK_LOG_WARN, "recover: activity %" PRIu64 " %s: oversold covered; resumed", a->id,
               k->label);
        db_stock(st, a->id);
    }
    return 0;
}
