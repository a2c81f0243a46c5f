/* reconcile_seg.c - stock transfers between the segments of a segmented
 * activity (reconcile_int.h, docs/segments.md): every transfer a lender
 * recorded in its xout hash is matched against its receiver's xin hash,
 * and the xin/xout counters against the transfers. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/num.h"
#include "core/vec.h"
#include "engine/segment.h"
#include "orders/reconcile_int.h"

/* One transfer recorded in a lender's xout hash. */
struct xfer {
    char *id;
    int from, to;
    int64_t qty, ms;
    int applied; /* its id is in the receiver's xin hash */
};

struct badx {
    int seg;
    char text[160];
};

struct transit {
    struct sk_reconcile_transit f;
    struct xfer *x; /* every xout entry sk_seg_settle would roll forward */
    size_t nx, xcap;
    struct badx *bad; /* xout entries it leaves alone (malformed) */
    size_t nbad;
};

static void transit_free(struct transit *t)
{
    for (size_t i = 0; i < t->nx; i++)
        free(t->x[i].id);
    free(t->x);
    free(t->bad);
    memset(t, 0, sizeof *t);
}

/* One xout entry of segment from: "to:qty:ms". Accepted exactly as
 * sk_seg_settle accepts it (ms may be missing: then it counts as old). */
static int add_xfer(struct transit *t, int from, int nseg, const redisReply *k, const redisReply *v)
{
    int to = -1;
    int64_t qty = 0, ms = 0;
    int ok = k->type == REDIS_REPLY_STRING && v->type == REDIS_REPLY_STRING && k->len > 0 &&
             sscanf(v->str, "%d:%" SCNd64, &to, &qty) == 2 && to >= 0 && to < nseg && qty >= 1;
    if (!ok) {
        struct badx *nb = realloc(t->bad, (t->nbad + 1) * sizeof *nb);
        if (!nb) return SK_ENOMEM;
        t->bad = nb;
        nb[t->nbad].seg = from;
        snprintf(nb[t->nbad].text, sizeof nb[t->nbad].text, "%.60s=%.60s",
                 k->type == REDIS_REPLY_STRING ? k->str : "?",
                 v->type == REDIS_REPLY_STRING ? v->str : "?");
        t->nbad++;
        return 0;
    }
    int64_t q2;
    int to2;
    if (sscanf(v->str, "%d:%" SCNd64 ":%" SCNd64, &to2, &q2, &ms) != 3 || ms < 0) ms = 0;
    if (SK_VEC_RESERVE(t->x, t->xcap, t->nx + 1, 16)) return SK_ENOMEM;
    struct xfer *x = &t->x[t->nx];
    if (!(x->id = strdup(k->str))) return SK_ENOMEM;
    x->from = from;
    x->to = to;
    x->qty = qty;
    x->ms = ms;
    x->applied = 0;
    t->nx++;
    return 0;
}

/* By receiver, then id. */
static int cmp_xfer(const void *a, const void *b)
{
    const struct xfer *x = a, *y = b;
    return x->to != y->to ? (x->to < y->to ? -1 : 1) : strcmp(x->id, y->id);
}

/* "<seg>-<n>" (a transfer id: the lender's segment, its xseq) -> seg, n; -1
 * when it is not one. */
static int parse_xfer_id(const char *s, size_t len, int *seg, uint64_t *n)
{
    const char *dash = memchr(s, '-', len);
    uint64_t sg;
    if (!dash || sk_num_u64(s, (size_t)(dash - s), &sg) || sg > SK_SEG_MAX ||
        sk_num_u64(dash + 1, len - (size_t)(dash - s) - 1, n))
        return -1;
    *seg = (int)sg;
    return 0;
}

/* Reads the transfers of every segment in two pipelined rounds, each
 * segment's reads in one MULTI (one slot):
 *   1. as a lender: meta xout and xseq, and the xout hash (transfers lent,
 *      kept until sk_seg_settle forgets them);
 *   2. as a receiver: meta xin and the xin hash (every transfer id applied).
 * A transfer seen in round 1 is counted in `lent` and, in round 2, either
 * applied (in `received`) or not (in `units`). A transfer lent after its
 * lender's round-1 read and applied before its receiver's round-2 read is
 * in `received` only: its id is above the xseq read in round 1, so it is
 * taken out again. Then lent - received == units holds exactly, whatever
 * the sale does meanwhile, unless units were moved outside a transfer. */
static int measure_transit(struct rec_run *u, struct transit *t)
{
    memset(t, 0, sizeof *t);
    int ns = u->nseg;
    size_t per = 4, ncmd = per * (size_t)ns;
    struct rec_cmd *cmds = calloc(ncmd, sizeof *cmds);
    const char **argv = calloc(ncmd * 4, sizeof *argv);
    redisReply **rep = calloc(ncmd, sizeof *rep);
    uint64_t *xseq = calloc((size_t)ns, sizeof *xseq);
    int rc = cmds && argv && rep && xseq ? 0 : SK_ENOMEM;
    for (int round = 1; rc == 0 && round <= 2; round++) {
        for (int s = 0; s < ns; s++) {
            const struct sk_keys *k = &u->cs[s].k;
            const char **a = &argv[16 * (size_t)s];
            /* HMGET meta M_LENT (round 1) or M_GOT (round 2): a[3], a[4] */
            static const char *const lent[] = {SK_M_LENT_FIELDS}, *const got[] = {SK_M_GOT_FIELDS};
            _Static_assert(SK_M_LENT_N <= 2 && SK_M_GOT_N <= 2, "a[3], a[4] hold the fields");
            int m = round == 1 ? SK_M_LENT_N : SK_M_GOT_N;
            a[0] = "MULTI";
            a[1] = "HMGET", a[2] = k->meta;
            for (int f = 0; f < m; f++)
                a[3 + f] = (round == 1 ? lent : got)[f];
            a[5] = "HGETALL", a[6] = round == 1 ? k->xout : k->xin;
            a[7] = "EXEC";
            struct rec_cmd *c = &cmds[per * (size_t)s];
            c[0] = (struct rec_cmd){1, a};
            c[1] = (struct rec_cmd){2 + m, a + 1};
            c[2] = (struct rec_cmd){2, a + 5};
            c[3] = (struct rec_cmd){1, a + 7};
        }
        if ((rc = sk_reconcile_pipeline(u->r, ncmd, cmds, rep)) != 0) break;
        for (int s = 0; rc == 0 && s < ns; s++) {
            /* EXEC's replies: the HMGET's, the HGETALL's */
            enum { EX_META, EX_XFERS, EX_N };
            const redisReply *ex = rep[per * (size_t)s + 3];
            if (ex->type != REDIS_REPLY_ARRAY || ex->elements != EX_N ||
                ex->element[EX_META]->type != REDIS_REPLY_ARRAY ||
                ex->element[EX_META]->elements != (size_t)(round == 1 ? SK_M_LENT_N : SK_M_GOT_N) ||
                ex->element[EX_XFERS]->type != REDIS_REPLY_ARRAY ||
                ex->element[EX_XFERS]->elements % 2) {
                rc = sk_reconcile_proto_err(u->r, round == 1 ? "MULTI/EXEC xout" : "MULTI/EXEC xin",
                                            ex);
                break;
            }
            const redisReply *m = ex->element[EX_META], *h = ex->element[EX_XFERS];
            if (round == 1) {
                t->f.lent += sk_reconcile_opt_i64(m->element[SK_M_LENT_XOUT]);
                int64_t q = sk_reconcile_opt_i64(m->element[SK_M_LENT_XSEQ]);
                xseq[s] = q > 0 ? (uint64_t)q : 0;
                for (size_t i = 0; rc == 0 && i + 1 < h->elements; i += 2)
                    rc = add_xfer(t, s, ns, h->element[i], h->element[i + 1]);
                if (rc == 0 && s == ns - 1 && t->nx) qsort(t->x, t->nx, sizeof *t->x, cmp_xfer);
                continue;
            }
            t->f.received += sk_reconcile_opt_i64(m->element[SK_M_GOT_XIN]);
            /* Applied here: the transfers seen in round 1, and the newer ones. */
            for (size_t i = 0; i + 1 < h->elements; i += 2) {
                const redisReply *id = h->element[i], *v = h->element[i + 1];
                if (id->type != REDIS_REPLY_STRING) continue;
                int from;
                uint64_t n;
                if (parse_xfer_id(id->str, id->len, &from, &n) == 0 && from >= 0 && from < ns &&
                    n > xseq[from]) {
                    t->f.received -= sk_reconcile_opt_i64(v); /* lent after round 1 looked */
                    continue;
                }
                struct xfer key = {.id = id->str, .to = s};
                struct xfer *x = t->nx ? bsearch(&key, t->x, t->nx, sizeof key, cmp_xfer) : NULL;
                if (x) x->applied = 1;
            }
        }
        sk_reconcile_free_replies(rep, ncmd);
        memset(rep, 0, ncmd * sizeof *rep);
    }
    if (rep) sk_reconcile_free_replies(rep, ncmd);
    free(cmds);
    free(argv);
    free(rep);
    free(xseq);
    for (size_t i = 0; rc == 0 && i < t->nx; i++) {
        const struct xfer *x = &t->x[i];
        if (x->applied) continue;
        t->f.units += x->qty;
        t->f.transfers++;
        if (x->ms < u->now - u->grace) {
            t->f.stale++;
            t->f.stale_units += x->qty;
        }
    }
    return rc;
}

/* Segmented: transfers lent more than grace ago and never applied (the
 * borrower stopped between the two halves), malformed ones, and counters
 * that no set of transfers explains. Younger unapplied transfers are in
 * flight: counted, not drift. */
int sk_reconcile_check_transit(struct rec_run *u)
{
    struct sk_reconcile_report *rep = u->rep;
    struct transit t;
    int rc = measure_transit(u, &t);
    if (rc) {
        transit_free(&t);
        return rc;
    }
    rep->transit = t.f;
    for (size_t i = 0; rc == 0 && i < t.nx; i++) {
        const struct xfer *x = &t.x[i];
        if (x->applied || x->ms >= u->now - u->grace) continue;
        rc = sk_reconcile_add_drift(
            rep, x->from, SK_DRIFT_IN_TRANSIT, NULL,
            "transfer %s: %" PRId64 " unit(s) lent to segment %d %" PRId64
            " ms ago and never applied there (the borrower stopped between the two "
            "halves)",
            x->id, x->qty, x->to, u->now - x->ms);
    }
    for (size_t i = 0; rc == 0 && i < t.nbad; i++)
        rc = sk_reconcile_add_drift(
            rep, t.bad[i].seg, SK_DRIFT_IN_TRANSIT, NULL,
            "malformed transfer entry %s in the xout hash (never rolled forward)", t.bad[i].text);
    if (rc == 0 && t.f.lent - t.f.received != t.f.units)
        rc = sk_reconcile_add_drift(
            rep, SK_SEG_NONE, SK_DRIFT_IN_TRANSIT, NULL,
            "the transfer counters say %" PRId64 " unit(s) in transit (lent %" PRId64
            " - received %" PRId64 ") but the unapplied transfers hold %" PRId64
            ": units were moved outside a transfer (a forced preheat while a "
            "transfer was pending?)",
            t.f.lent - t.f.received, t.f.lent, t.f.received, t.f.units);
    transit_free(&t);
    return rc;
}

int sk_reconcile_transit_now(struct rec_run *u, struct sk_reconcile_transit *out)
{
    struct transit t;
    int rc = measure_transit(u, &t);
    *out = t.f;
    transit_free(&t);
    return rc;
}
