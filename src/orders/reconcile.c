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
 * change, and a second check fills rep->remaining. */
#include "orders/reconcile.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/codes.h"
#include "core/error.h"
#include "core/log.h"
#include "core/num.h"
#include "engine/keys.h"
#include "engine/segment.h"
#include "engine/stock.h"
#include "orders/order_worker.h"

#define PAGE 1000         /* DB orders per page, pending ids per XPENDING */
#define RECHECK_CHUNK 200 /* order ids per HMGET when looking up again */
#define WATCH_ATTEMPTS 5  /* Redis repairs retried when the sale moved under them */

static const char *const drift_names[SK_DRIFT_NKINDS] = {
    [SK_DRIFT_REDIS_MISSING] = "redis_missing",
    [SK_DRIFT_DB_MISSING] = "db_missing",
    [SK_DRIFT_INITIAL_MISMATCH] = "initial_mismatch",
    [SK_DRIFT_REDIS_INVARIANT] = "redis_invariant",
    [SK_DRIFT_IN_TRANSIT] = "in_transit",
    [SK_DRIFT_USER_COUNT] = "user_count",
    [SK_DRIFT_LOST_ORDER] = "lost_order",
    [SK_DRIFT_NOT_IN_LEDGER] = "not_in_ledger",
    [SK_DRIFT_ORDER_MISMATCH] = "order_mismatch",
    [SK_DRIFT_DB_STOCK] = "db_stock",
    [SK_DRIFT_CANCELLED_NOT_RELEASED] = "cancelled_not_released",
    [SK_DRIFT_RELEASED_NOT_CANCELLED] = "released_not_cancelled",
    [SK_DRIFT_PAID_RELEASED] = "paid_released",
};

const char *sk_drift_name(int kind)
{
    return kind >= 0 && kind < SK_DRIFT_NKINDS ? drift_names[kind] : "?";
}

void sk_reconcile_opts_init(struct sk_reconcile_opts *o)
{
    memset(o, 0, sizeof *o);
    o->grace_ms = SK_RECONCILE_GRACE_MS;
}

void sk_reconcile_report_free(struct sk_reconcile_report *rep)
{
    if (!rep) return;
    free(rep->drift);
    free(rep->repairs);
    free(rep->seg);
    rep->drift = NULL;
    rep->repairs = NULL;
    rep->seg = NULL;
    rep->ndrift = rep->drift_cap = rep->nrepairs = rep->repairs_cap = 0;
}

/* ---- Report building ----------------------------------------------------- */

/* Drift of segment seg (SK_SEG_NONE: the activity as a whole), whose text
 * then starts "segment <seg>: ". */
static int add_drift(struct sk_reconcile_report *rep, int seg, int kind, const struct sk_order *o,
                     const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int add_drift(struct sk_reconcile_report *rep, int seg, int kind, const struct sk_order *o,
                     const char *fmt, ...)
{
    if (rep->ndrift == rep->drift_cap) {
        size_t nc = rep->drift_cap ? rep->drift_cap * 2 : 16;
        struct sk_drift *nd = realloc(rep->drift, nc * sizeof *nd);
        if (!nd) return SK_ENOMEM;
        rep->drift = nd;
        rep->drift_cap = nc;
    }
    struct sk_drift *d = &rep->drift[rep->ndrift++];
    memset(d, 0, sizeof *d);
    d->kind = kind;
    d->segment = seg >= 0 ? seg : SK_SEG_NONE;
    if (o) d->order = *o;
    int at = seg >= 0 ? snprintf(d->text, sizeof d->text, "segment %d: ", seg) : 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->text + at, sizeof d->text - (size_t)at, fmt, ap);
    va_end(ap);
    rep->found[kind]++;
    rep->total++;
    return 0;
}

/* A repair in segment seg (its text prefixed as add_drift's). */
static void add_repair(struct sk_reconcile_report *rep, int seg, int kind, int ok, const char *fmt,
                       ...) __attribute__((format(printf, 5, 6)));
static void add_repair(struct sk_reconcile_report *rep, int seg, int kind, int ok, const char *fmt,
                       ...)
{
    if (!ok) rep->repair_failures++;
    if (rep->nrepairs == rep->repairs_cap) {
        size_t nc = rep->repairs_cap ? rep->repairs_cap * 2 : 8;
        struct sk_repair *nr = realloc(rep->repairs, nc * sizeof *nr);
        if (!nr) return; /* the change itself is done and audited; only the line is lost */
        rep->repairs = nr;
        rep->repairs_cap = nc;
    }
    struct sk_repair *x = &rep->repairs[rep->nrepairs++];
    x->kind = kind;
    x->ok = ok;
    x->segment = seg >= 0 ? seg : SK_SEG_NONE;
    int at = seg >= 0 ? snprintf(x->text, sizeof x->text, "segment %d: ", seg) : 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->text + at, sizeof x->text - (size_t)at, fmt, ap);
    va_end(ap);
}

/* ---- Redis reading --------------------------------------------------------- */

struct cmd {
    int argc;
    const char **argv;
};

/* Sends n commands in one round trip and reads the n replies into rep[]
 * (the caller frees each). On a failure every rep[i] is NULL and, when the
 * replies could not all be read, the connection is dropped (a half-read
 * pipeline would answer the next command with an old reply). */
static int pipeline(sk_redis *r, size_t n, const struct cmd *cmds, redisReply **rep)
{
    for (size_t i = 0; i < n; i++)
        rep[i] = NULL;
    for (size_t i = 0; i < n; i++) {
        int rc = sk_redis_append(r, cmds[i].argc, cmds[i].argv, NULL);
        if (rc < 0) {
            sk_redis_disconnect(r);
            return rc;
        }
    }
    for (size_t i = 0; i < n; i++) {
        int rc = sk_redis_read(r, &rep[i]);
        if (rc < 0) {
            for (size_t k = 0; k < i; k++) {
                freeReplyObject(rep[k]);
                rep[k] = NULL;
            }
            sk_redis_disconnect(r);
            return rc;
        }
    }
    return 0;
}

static void free_replies(redisReply **rep, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (rep[i]) freeReplyObject(rep[i]);
}

static int proto_err(sk_redis *r, const char *what, const redisReply *rep)
{
    snprintf(r->errstr, sizeof r->errstr, "%s: unexpected reply%s%.200s", what,
             rep && rep->type == REDIS_REPLY_ERROR ? ": " : "",
             rep && rep->type == REDIS_REPLY_ERROR ? rep->str : "");
    r->err = SK_EPROTO;
    return SK_EPROTO;
}

/* "<ms>-<seq>" -> numbers; -1 when malformed. */
static int parse_sid(const char *s, size_t len, uint64_t *ms, uint64_t *seq)
{
    const char *dash = memchr(s, '-', len);
    if (!dash) return -1;
    size_t a = (size_t)(dash - s);
    return sk_num_u64(s, a, ms) || sk_num_u64(dash + 1, len - a - 1, seq) ? -1 : 0;
}

static int sid_cmp(uint64_t ams, uint64_t aseq, uint64_t bms, uint64_t bseq)
{
    return ams < bms ? -1 : ams > bms ? 1 : aseq < bseq ? -1 : aseq > bseq ? 1 : 0;
}

/* One ledger entry: order id -> "user:qty[:released]". */
struct lentry {
    char oid[SK_STORE_ORDER_ID_MAX];
    uint64_t user, ms, seq; /* ms-seq: the stream id inside the order id */
    int64_t qty;
    int released;
    int in_db; /* set by the merge with the DB orders */
};

struct uunits {
    uint64_t user;
    int64_t units;
};

/* One Redis view of an activity. Owned arrays: snap_free. */
struct snap {
    int present;
    int64_t initial, stock, released_meta, dlq;
    int64_t xin, xout; /* segment counters (0 for an unsegmented activity) */
    struct uunits *buyers;
    size_t nb;
    struct lentry *ledger; /* well-formed entries, sorted by order id */
    size_t nl;
    char **bad; /* malformed ledger entries ("id=value"), reported as they are */
    size_t nbad;
};

static void snap_free(struct snap *s)
{
    free(s->buyers);
    free(s->ledger);
    for (size_t i = 0; i < s->nbad; i++)
        free(s->bad[i]);
    free(s->bad);
    memset(s, 0, sizeof *s);
}

static int cmp_lentry(const void *a, const void *b)
{
    return strcmp(((const struct lentry *)a)->oid, ((const struct lentry *)b)->oid);
}

static int cmp_uunits(const void *a, const void *b)
{
    uint64_t x = ((const struct uunits *)a)->user, y = ((const struct uunits *)b)->user;
    return x < y ? -1 : x > y;
}

/* Parses one ledger field/value pair of the key set labelled label ("<ID>"
 * or "<ID>.<seg>": its order ids are "<label>-<stream id>") into *e: 0, or
 * -1 when malformed. */
static int parse_lentry(const char *label, const redisReply *k, const redisReply *v,
                        struct lentry *e)
{
    memset(e, 0, sizeof *e);
    if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING) return -1;
    if (k->len == 0 || k->len >= sizeof e->oid) return -1;
    memcpy(e->oid, k->str, k->len);
    char prefix[SK_LABEL_MAX + 2];
    int pl = snprintf(prefix, sizeof prefix, "%s-", label);
    if (strncmp(e->oid, prefix, (size_t)pl) != 0) return -1;
    if (parse_sid(e->oid + pl, k->len - (size_t)pl, &e->ms, &e->seq)) return -1;
    const char *s = v->str, *end = v->str + v->len;
    const char *c1 = memchr(s, ':', v->len);
    if (!c1) return -1;
    const char *c2 = memchr(c1 + 1, ':', (size_t)(end - c1 - 1));
    const char *qend = c2 ? c2 : end;
    if (sk_num_u64(s, (size_t)(c1 - s), &e->user)) return -1;
    if (sk_num_i64(c1 + 1, (size_t)(qend - c1 - 1), &e->qty) || e->qty < 1) return -1;
    if (c2) {
        if ((size_t)(end - c2) != 9 || memcmp(c2, ":released", 9) != 0) return -1;
        e->released = 1;
    }
    return 0;
}

static int keep_bad(struct snap *s, const redisReply *k, const redisReply *v)
{
    char **nb = realloc(s->bad, (s->nbad + 1) * sizeof *nb);
    if (!nb) return SK_ENOMEM;
    s->bad = nb;
    char buf[160];
    snprintf(buf, sizeof buf, "%.80s=%.60s", k->type == REDIS_REPLY_STRING ? k->str : "?",
             v->type == REDIS_REPLY_STRING ? v->str : "?");
    if (!(s->bad[s->nbad] = strdup(buf))) return SK_ENOMEM;
    s->nbad++;
    return 0;
}

/* A meta field that may be absent (0 then). */
static int64_t opt_i64(const redisReply *v)
{
    int64_t x = 0;
    if (v->type != REDIS_REPLY_STRING || sk_num_i64(v->str, v->len, &x)) return 0;
    return x;
}

/* Fills s from the replies of HMGET meta initial released xin xout, GET
 * stock, HGETALL buyers, HGETALL ledger, XLEN dlq. */
static int parse_snap(sk_redis *r, const char *label, redisReply *const *rep, struct snap *s)
{
    memset(s, 0, sizeof *s);
    const redisReply *meta = rep[0], *stock = rep[1], *buyers = rep[2], *ledger = rep[3],
                     *dlq = rep[4];
    if (meta->type != REDIS_REPLY_ARRAY || meta->elements != 4) return proto_err(r, "HMGET", meta);
    if (stock->type != REDIS_REPLY_STRING && stock->type != REDIS_REPLY_NIL)
        return proto_err(r, "GET stock", stock);
    if (buyers->type != REDIS_REPLY_ARRAY || buyers->elements % 2)
        return proto_err(r, "HGETALL buyers", buyers);
    if (ledger->type != REDIS_REPLY_ARRAY || ledger->elements % 2)
        return proto_err(r, "HGETALL ledger", ledger);
    if (dlq->type != REDIS_REPLY_INTEGER) return proto_err(r, "XLEN dlq", dlq);
    const redisReply *ini = meta->element[0], *rel = meta->element[1];
    s->present = ini->type == REDIS_REPLY_STRING && stock->type == REDIS_REPLY_STRING &&
                 sk_num_i64(ini->str, ini->len, &s->initial) == 0 &&
                 sk_num_i64(stock->str, stock->len, &s->stock) == 0;
    s->released_meta = opt_i64(rel);
    s->xin = opt_i64(meta->element[2]);
    s->xout = opt_i64(meta->element[3]);
    s->dlq = dlq->integer;
    size_t nb = buyers->elements / 2, nl = ledger->elements / 2;
    s->buyers = nb ? calloc(nb, sizeof *s->buyers) : NULL;
    s->ledger = nl ? calloc(nl, sizeof *s->ledger) : NULL;
    if ((nb && !s->buyers) || (nl && !s->ledger)) return SK_ENOMEM;
    for (size_t i = 0; i < nb; i++) {
        const redisReply *k = buyers->element[2 * i], *v = buyers->element[2 * i + 1];
        struct uunits *u = &s->buyers[s->nb];
        if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING ||
            sk_num_u64(k->str, k->len, &u->user) || sk_num_i64(v->str, v->len, &u->units))
            return proto_err(r, "buyers hash: a field or value that is not a number", NULL);
        s->nb++;
    }
    if (s->nb) qsort(s->buyers, s->nb, sizeof *s->buyers, cmp_uunits);
    for (size_t i = 0; i < nl; i++) {
        const redisReply *k = ledger->element[2 * i], *v = ledger->element[2 * i + 1];
        if (parse_lentry(label, k, v, &s->ledger[s->nl]) == 0)
            s->nl++;
        else if (keep_bad(s, k, v))
            return SK_ENOMEM;
    }
    if (s->nl) qsort(s->ledger, s->nl, sizeof *s->ledger, cmp_lentry);
    return 0;
}

/* Reads the snapshot of one key set (the activity's, or one segment's: one
 * slot either way): atomically (MULTI) for a check, or after WATCH for a
 * repair (then EXEC fails if anything changed since the WATCH). */
static int read_snap(sk_redis *r, const struct sk_keys *kp, int watch, struct snap *s)
{
    const struct sk_keys *k = kp;
    const char *a_multi[] = {"MULTI"};
    const char *a_watch[] = {"WATCH", k->meta, k->stock, k->buyers, k->ledger, k->released};
    const char *a_meta[] = {"HMGET", k->meta, "initial", "released", "xin", "xout"};
    const char *a_stock[] = {"GET", k->stock};
    const char *a_buyers[] = {"HGETALL", k->buyers};
    const char *a_ledger[] = {"HGETALL", k->ledger};
    const char *a_dlq[] = {"XLEN", k->dlq};
    const char *a_exec[] = {"EXEC"};
    struct cmd cmds[] = {
        watch ? (struct cmd){6, a_watch} : (struct cmd){1, a_multi},
        {6, a_meta},
        {2, a_stock},
        {2, a_buyers},
        {2, a_ledger},
        {2, a_dlq},
        {1, a_exec},
    };
    size_t n = watch ? 6 : 7;
    redisReply *rep[7];
    int rc = pipeline(r, n, cmds, rep);
    if (rc) return rc;
    if (watch) {
        rc = rep[0]->type == REDIS_REPLY_STATUS ? parse_snap(r, k->label, rep + 1, s)
                                                : proto_err(r, "WATCH", rep[0]);
    } else {
        const redisReply *ex = rep[6];
        if (ex->type != REDIS_REPLY_ARRAY || ex->elements != 5)
            rc = proto_err(r, "MULTI/EXEC snapshot", ex);
        else
            rc = parse_snap(r, k->label, ex->element, s);
    }
    free_replies(rep, n);
    if (rc) snap_free(s);
    return rc;
}

/* Non-released ledger units per user, sorted by user (allocated; *n). */
static int ledger_users(const struct lentry *l, size_t nl, struct uunits **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!nl) return 0;
    struct uunits *u = malloc(nl * sizeof *u);
    if (!u) return SK_ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < nl; i++)
        if (!l[i].released) u[k++] = (struct uunits){l[i].user, l[i].qty};
    if (k) qsort(u, k, sizeof *u, cmp_uunits);
    size_t m = 0;
    for (size_t i = 0; i < k; i++) {
        if (m && u[m - 1].user == u[i].user)
            u[m - 1].units += u[i].units;
        else
            u[m++] = u[i];
    }
    *out = u;
    *n = m;
    return 0;
}

/* Calls fn for every user whose buyers count differs from the ledger's.
 * Returns the number of such users, or SK_ENOMEM. */
static long user_diffs(const struct snap *s,
                       void (*fn)(void *arg, uint64_t user, int64_t buyers, int64_t ledger),
                       void *arg)
{
    struct uunits *lu;
    size_t nlu;
    if (ledger_users(s->ledger, s->nl, &lu, &nlu)) return SK_ENOMEM;
    long diffs = 0;
    size_t i = 0, j = 0;
    while (i < s->nb || j < nlu) {
        uint64_t u;
        int64_t b = 0, l = 0;
        if (j >= nlu || (i < s->nb && s->buyers[i].user < lu[j].user)) {
            u = s->buyers[i].user;
            b = s->buyers[i++].units;
        } else if (i >= s->nb || lu[j].user < s->buyers[i].user) {
            u = lu[j].user;
            l = lu[j++].units;
        } else {
            u = s->buyers[i].user;
            b = s->buyers[i++].units;
            l = lu[j++].units;
        }
        if (b != l) {
            diffs++;
            if (fn) fn(arg, u, b, l);
        }
    }
    free(lu);
    return diffs;
}

static int64_t held_units(const struct snap *s)
{
    int64_t h = 0;
    for (size_t i = 0; i < s->nb; i++)
        h += s->buyers[i].units;
    return h;
}

/* The consumer group's view of the stream. */
struct backlog {
    int group;
    uint64_t lms, lseq; /* last-delivered id */
    int64_t pending, undelivered;
    struct {
        uint64_t ms, seq;
    } * p; /* pending ids, ascending */
    size_t np, pcap;
};

static int read_group(sk_redis *r, const struct sk_keys *k, struct backlog *b,
                      struct sk_reconcile_redis *out)
{
    memset(b, 0, sizeof *b);
    b->undelivered = -1;
    redisReply *rep;
    int rc = sk_redis_cmd(r, &rep, "XINFO GROUPS %s", k->orders);
    if (rc) return rc;
    if (rep->type == REDIS_REPLY_ERROR) {
        /* No stream at all: nothing admitted, or the key is gone. */
        int nokey = strstr(rep->str, "no such key") != NULL;
        freeReplyObject(rep);
        if (!nokey) return proto_err(r, "XINFO GROUPS", NULL);
        /* Nothing can be waiting in a stream that does not exist. */
        b->undelivered = 0;
        b->lms = b->lseq = UINT64_MAX;
    } else if (rep->type == REDIS_REPLY_ARRAY) {
        for (size_t g = 0; g < rep->elements; g++) {
            const redisReply *m = rep->element[g];
            if (m->type != REDIS_REPLY_ARRAY) continue;
            int ours = 0;
            int64_t pending = 0, lag = -1;
            uint64_t lms = 0, lseq = 0;
            for (size_t i = 0; i + 1 < m->elements; i += 2) {
                const redisReply *kk = m->element[i], *v = m->element[i + 1];
                if (kk->type != REDIS_REPLY_STRING) continue;
                if (!strcmp(kk->str, "name") && v->type == REDIS_REPLY_STRING)
                    ours = !strcmp(v->str, SK_WORKER_GROUP);
                else if (!strcmp(kk->str, "pending") && v->type == REDIS_REPLY_INTEGER)
                    pending = v->integer;
                else if (!strcmp(kk->str, "lag") && v->type == REDIS_REPLY_INTEGER)
                    lag = v->integer;
                else if (!strcmp(kk->str, "last-delivered-id") && v->type == REDIS_REPLY_STRING)
                    parse_sid(v->str, v->len, &lms, &lseq);
            }
            if (ours) {
                b->group = 1;
                b->pending = pending;
                b->undelivered = lag;
                b->lms = lms;
                b->lseq = lseq;
            }
        }
        freeReplyObject(rep);
    } else {
        freeReplyObject(rep);
        return proto_err(r, "XINFO GROUPS", NULL);
    }
    if (!b->group && b->undelivered != 0) {
        /* No group yet: every entry of the stream is undelivered. */
        if ((rc = sk_redis_cmd(r, &rep, "XLEN %s", k->orders))) return rc;
        b->undelivered = rep->type == REDIS_REPLY_INTEGER ? rep->integer : -1;
        freeReplyObject(rep);
    }
    /* The pending ids, page by page (exclusive start after the first). */
    char from[48] = "-";
    while (b->group && b->pending > 0) {
        if ((rc = sk_redis_cmd(r, &rep, "XPENDING %s %s %s + %d", k->orders, SK_WORKER_GROUP, from,
                               PAGE)))
            return rc;
        if (rep->type != REDIS_REPLY_ARRAY) {
            freeReplyObject(rep);
            return proto_err(r, "XPENDING", NULL);
        }
        size_t got = rep->elements;
        for (size_t i = 0; i < got; i++) {
            const redisReply *e = rep->element[i];
            if (e->type != REDIS_REPLY_ARRAY || e->elements < 1 ||
                e->element[0]->type != REDIS_REPLY_STRING)
                continue;
            if (b->np == b->pcap) {
                size_t nc = b->pcap ? b->pcap * 2 : 64;
                void *np = realloc(b->p, nc * sizeof *b->p);
                if (!np) {
                    freeReplyObject(rep);
                    return SK_ENOMEM;
                }
                b->p = np;
                b->pcap = nc;
            }
            if (parse_sid(e->element[0]->str, e->element[0]->len, &b->p[b->np].ms,
                          &b->p[b->np].seq) == 0)
                b->np++;
            snprintf(from, sizeof from, "(%s", e->element[0]->str);
        }
        freeReplyObject(rep);
        if (got < PAGE) break;
    }
    out->group = b->group;
    out->pending = b->pending;
    out->undelivered = b->undelivered;
    out->backlog = b->pending + (b->undelivered > 0 ? b->undelivered : 0);
    if (b->lms == UINT64_MAX)
        snprintf(out->last_delivered, sizeof out->last_delivered, "none (no stream)");
    else
        snprintf(out->last_delivered, sizeof out->last_delivered, "%" PRIu64 "-%" PRIu64, b->lms,
                 b->lseq);
    return 0;
}

/* Is the order with stream id ms-seq still on its way to the DB? */
static int in_backlog(const struct backlog *b, uint64_t ms, uint64_t seq)
{
    if (sid_cmp(ms, seq, b->lms, b->lseq) > 0) return 1; /* never delivered */
    size_t lo = 0, hi = b->np;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = sid_cmp(b->p[mid].ms, b->p[mid].seq, ms, seq);
        if (c == 0) return 1;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

/* Looks up the given order ids in the ledger again; present[i] is 0 when
 * absent, 1 when held, 2 when released. */
static int ledger_lookup(sk_redis *r, const struct sk_keys *k, const struct sk_drift *const *d,
                         size_t n, int *present)
{
    for (size_t at = 0; at < n; at += RECHECK_CHUNK) {
        size_t m = n - at < RECHECK_CHUNK ? n - at : RECHECK_CHUNK;
        const char *argv[2 + RECHECK_CHUNK];
        argv[0] = "HMGET";
        argv[1] = k->ledger;
        for (size_t i = 0; i < m; i++)
            argv[2 + i] = d[at + i]->order.order_id;
        redisReply *rep;
        int rc = sk_redis_command(r, &rep, (int)(2 + m), argv, NULL);
        if (rc) return rc;
        if (rep->type != REDIS_REPLY_ARRAY || rep->elements != m) {
            freeReplyObject(rep);
            return proto_err(r, "HMGET ledger", NULL);
        }
        for (size_t i = 0; i < m; i++) {
            const redisReply *v = rep->element[i];
            present[at + i] = v->type != REDIS_REPLY_STRING                             ? 0
                              : v->len > 9 && !strcmp(v->str + v->len - 9, ":released") ? 2
                                                                                        : 1;
        }
        freeReplyObject(rep);
    }
    return 0;
}

/* ---- The check ------------------------------------------------------------ */

/* One key set checked: the activity's (not segmented), or one segment's. */
struct ctx {
    sk_store *st;
    sk_redis *r;
    uint64_t aid;
    struct sk_keys k;
    int seg; /* SK_SEG_NONE, or the segment k belongs to */
    int64_t now, grace;
    struct sk_reconcile_report *rep;
    struct sk_reconcile_redis *rr; /* this key set's figures (rep->redis or rep->seg[i]) */
    struct snap s;
    struct backlog b;
    size_t li;        /* merge cursor in s.ledger */
    int counters_bad; /* repair: the transfer counters are not trusted (no stock repair) */
    /* Candidates looked up again after the DB read (indexes into rep->drift
     * are not stable while it grows, so they are kept apart). */
    struct sk_drift *cand;
    size_t ncand, candcap;
};

/* One activity: its key sets, one per segment (one when not segmented). */
struct run {
    sk_store *st;
    sk_redis *r;
    uint64_t aid;
    int64_t now, grace;
    struct sk_reconcile_report *rep;
    int nseg;             /* 1: not segmented */
    struct ctx *cs;       /* nseg of them */
    int64_t base_initial; /* segmented: the base meta's initial, -1 when absent */
};

static void ctx_free(struct ctx *c)
{
    snap_free(&c->s);
    free(c->b.p);
    free(c->cand);
    c->b.p = NULL;
    c->cand = NULL;
    c->ncand = c->candcap = 0;
    c->li = 0;
}

static int run_init(struct run *u, sk_store *st, sk_redis *r, uint64_t aid, int64_t now,
                    int64_t grace, struct sk_reconcile_report *rep, int nseg)
{
    memset(u, 0, sizeof *u);
    *u = (struct run){.st = st,
                      .r = r,
                      .aid = aid,
                      .now = now,
                      .grace = grace,
                      .rep = rep,
                      .nseg = nseg > 1 ? nseg : 1,
                      .base_initial = -1};
    rep->segments = u->nseg;
    if (u->nseg > 1 && !rep->seg && !(rep->seg = calloc((size_t)u->nseg, sizeof *rep->seg)))
        return SK_ENOMEM;
    if (!(u->cs = calloc((size_t)u->nseg, sizeof *u->cs))) return SK_ENOMEM;
    for (int i = 0; i < u->nseg; i++) {
        struct ctx *c = &u->cs[i];
        *c = (struct ctx){.st = st, .r = r, .aid = aid, .now = now, .grace = grace, .rep = rep};
        sk_keys_seg(&c->k, aid, u->nseg > 1 ? i : SK_SEG_NONE);
        c->seg = c->k.seg;
        c->rr = u->nseg > 1 ? &rep->seg[i] : &rep->redis;
    }
    return 0;
}

static void run_free(struct run *u)
{
    for (int i = 0; u->cs && i < u->nseg; i++)
        ctx_free(&u->cs[i]);
    free(u->cs);
    u->cs = NULL;
}

static int add_cand(struct ctx *c, int kind, const struct sk_order *o)
{
    if (c->ncand == c->candcap) {
        size_t nc = c->candcap ? c->candcap * 2 : 16;
        struct sk_drift *n = realloc(c->cand, nc * sizeof *n);
        if (!n) return SK_ENOMEM;
        c->cand = n;
        c->candcap = nc;
    }
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
    struct ctx *c = arg;
    struct sk_order o;
    memset(&o, 0, sizeof o);
    o.user_id = user;
    add_drift(c->rep, c->seg, SK_DRIFT_USER_COUNT, &o,
              "user %" PRIu64 ": the buyers hash holds %" PRId64
              " unit(s), the user's unreleased ledger entries %" PRId64,
              user, buyers, ledger);
}

/* Compares one DB order with its ledger entry. */
static int compare_order(struct ctx *c, const struct sk_order *o, const struct lentry *e)
{
    struct sk_reconcile_report *rep = c->rep;
    if (o->user_id != e->user || o->quantity != e->qty)
        return add_drift(rep, c->seg, SK_DRIFT_ORDER_MISMATCH, o,
                         "order %s: the DB has user %" PRIu64 ", %" PRId64
                         " unit(s); the ledger has user %" PRIu64 ", %" PRId64 " unit(s)",
                         o->order_id, o->user_id, o->quantity, e->user, e->qty);
    if (o->status == SK_ORDER_PAID && e->released)
        return add_drift(rep, c->seg, SK_DRIFT_PAID_RELEASED, o,
                         "SERIOUS: order %s (user %" PRIu64 ", %" PRId64
                         " unit(s)) is paid in the DB but its units were released in Redis "
                         "(they may be sold again): an operator must settle it",
                         o->order_id, o->user_id, o->quantity);
    if (o->status == SK_ORDER_CREATED && e->released)
        return add_drift(rep, c->seg, SK_DRIFT_RELEASED_NOT_CANCELLED, o,
                         "order %s (user %" PRIu64 ", %" PRId64
                         " unit(s)) was released in Redis but is still created (payable) in "
                         "the DB",
                         o->order_id, o->user_id, o->quantity);
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
static struct ctx *route(struct run *u, const char *oid)
{
    if (u->nseg == 1) return &u->cs[0];
    uint64_t a;
    int seg;
    if (sk_keys_parse_label(oid, strlen(oid), &a, &seg) < 0 || a != u->aid || seg < 0 ||
        seg >= u->nseg)
        return NULL;
    return &u->cs[seg];
}

/* Merges the DB orders (pages in id order, one pass for every segment)
 * with the sorted ledger of the key set each one belongs to: a segment's
 * orders are a sorted subsequence, so each key set keeps its own cursor. */
static int merge_orders(struct run *u)
{
    struct sk_order *page = malloc(PAGE * sizeof *page);
    if (!page) return SK_ENOMEM;
    char after[SK_STORE_ORDER_ID_MAX] = "";
    int rc = 0;
    for (;;) {
        size_t n = 0;
        if ((rc = sk_store_orders_list(u->st, u->aid, after, PAGE, page, &n)) != 0) break;
        for (size_t i = 0; i < n && rc == 0; i++) {
            const struct sk_order *o = &page[i];
            struct ctx *c = route(u, o->order_id);
            if (!c) {
                rc = add_drift(u->rep, SK_SEG_NONE, SK_DRIFT_ORDER_MISMATCH, o,
                               "order %s (user %" PRIu64 ", %" PRId64
                               " unit(s), %s) is in the DB but its id names no segment of "
                               "this activity (%d segments)",
                               o->order_id, o->user_id, o->quantity,
                               sk_order_status_name(o->status), u->nseg);
                continue;
            }
            if (!c->s.present) continue; /* the segment is reported as redis_missing */
            while (c->li < c->s.nl && strcmp(c->s.ledger[c->li].oid, o->order_id) < 0)
                c->li++;
            if (c->li < c->s.nl && !strcmp(c->s.ledger[c->li].oid, o->order_id)) {
                c->s.ledger[c->li].in_db = 1;
                rc = compare_order(c, o, &c->s.ledger[c->li]);
            } else {
                rc = add_cand(c, SK_DRIFT_NOT_IN_LEDGER, o);
            }
        }
        if (rc || n < PAGE) break;
        snprintf(after, sizeof after, "%s", page[n - 1].order_id);
    }
    free(page);
    return rc;
}

/* Candidates looked up in the ledger again: those still failing are drift. */
static int settle_candidates(struct ctx *c)
{
    if (!c->ncand) return 0;
    const struct sk_drift **d = malloc(c->ncand * sizeof *d);
    int *present = malloc(c->ncand * sizeof *present);
    int rc = !d || !present ? SK_ENOMEM : 0;
    for (size_t i = 0; rc == 0 && i < c->ncand; i++)
        d[i] = &c->cand[i];
    if (rc == 0) rc = ledger_lookup(c->r, &c->k, d, c->ncand, present);
    for (size_t i = 0; rc == 0 && i < c->ncand; i++) {
        const struct sk_order *o = &c->cand[i].order;
        if (c->cand[i].kind == SK_DRIFT_NOT_IN_LEDGER && present[i] == 0)
            rc = add_drift(c->rep, c->seg, SK_DRIFT_NOT_IN_LEDGER, o,
                           "order %s (user %" PRIu64 ", %" PRId64
                           " unit(s), %s) is in the DB but not in the Redis ledger",
                           o->order_id, o->user_id, o->quantity, sk_order_status_name(o->status));
        else if (c->cand[i].kind == SK_DRIFT_CANCELLED_NOT_RELEASED && present[i] == 1)
            rc = add_drift(c->rep, c->seg, SK_DRIFT_CANCELLED_NOT_RELEASED, o,
                           "order %s (user %" PRIu64 ", %" PRId64
                           " unit(s)) is cancelled in the DB but its units are still held in "
                           "Redis (not released)",
                           o->order_id, o->user_id, o->quantity);
    }
    free(d);
    free(present);
    return rc;
}

/* Ledger orders that are neither in the DB nor on their way there. */
static int find_lost(struct ctx *c)
{
    struct sk_reconcile_redis *rr = c->rr;
    for (size_t i = 0; i < c->s.nl; i++) {
        const struct lentry *e = &c->s.ledger[i];
        if (e->in_db) continue;
        if (in_backlog(&c->b, e->ms, e->seq)) {
            rr->backlog_orders++;
            continue;
        }
        struct sk_order o;
        memset(&o, 0, sizeof o);
        snprintf(o.order_id, sizeof o.order_id, "%s", e->oid);
        snprintf(o.stream_id, sizeof o.stream_id, "%" PRIu64 "-%" PRIu64, e->ms, e->seq);
        o.activity_id = c->aid;
        o.user_id = e->user;
        o.quantity = e->qty;
        o.created_ms = (int64_t)e->ms;
        /* What a restore writes: a released order comes back cancelled. */
        o.status = e->released ? SK_ORDER_CANCELLED : SK_ORDER_CREATED;
        int rc = add_drift(c->rep, c->seg, SK_DRIFT_LOST_ORDER, &o,
                           "order %s (user %" PRIu64 ", %" PRId64
                           " unit(s)%s) is in the Redis ledger but not in the DB and not in the "
                           "stream backlog%s",
                           e->oid, e->user, e->qty, e->released ? ", released" : "",
                           rr->dlq > 0 ? " (see the dead-letter stream)" : "");
        if (rc) return rc;
    }
    return 0;
}

static void redis_figures(struct ctx *c)
{
    struct sk_reconcile_redis *rr = c->rr;
    rr->present = c->s.present;
    rr->initial = c->s.initial;
    rr->remaining = c->s.stock;
    rr->xin = c->s.xin;
    rr->xout = c->s.xout;
    rr->released_meta = c->s.released_meta;
    rr->held = held_units(&c->s);
    rr->buyers = (int64_t)c->s.nb;
    rr->dlq = c->s.dlq;
    rr->admitted_orders = (int64_t)(c->s.nl + c->s.nbad);
    for (size_t i = 0; i < c->s.nl; i++) {
        rr->admitted_units += c->s.ledger[i].qty;
        if (c->s.ledger[i].released) {
            rr->released_orders++;
            rr->released_units += c->s.ledger[i].qty;
        }
    }
}

/* Segmented: the activity's Redis figures are the segments' summed (initial
 * is the base meta's, the definition, when it has one). */
static void sum_figures(struct run *u)
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

/* ---- Stock transfers between segments ------------------------------------- */

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
    if (t->nx == t->xcap) {
        size_t nc = t->xcap ? t->xcap * 2 : 16;
        struct xfer *nx = realloc(t->x, nc * sizeof *nx);
        if (!nx) return SK_ENOMEM;
        t->x = nx;
        t->xcap = nc;
    }
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
static int measure_transit(struct run *u, struct transit *t)
{
    memset(t, 0, sizeof *t);
    int ns = u->nseg;
    size_t per = 4, ncmd = per * (size_t)ns;
    struct cmd *cmds = calloc(ncmd, sizeof *cmds);
    const char **argv = calloc(ncmd * 4, sizeof *argv);
    redisReply **rep = calloc(ncmd, sizeof *rep);
    uint64_t *xseq = calloc((size_t)ns, sizeof *xseq);
    int rc = cmds && argv && rep && xseq ? 0 : SK_ENOMEM;
    for (int round = 1; rc == 0 && round <= 2; round++) {
        for (int s = 0; s < ns; s++) {
            const struct sk_keys *k = &u->cs[s].k;
            const char **a = &argv[16 * (size_t)s];
            int m = round == 1 ? 2 : 1;
            a[0] = "MULTI";
            a[1] = "HMGET", a[2] = k->meta, a[3] = round == 1 ? "xout" : "xin", a[4] = "xseq";
            a[5] = "HGETALL", a[6] = round == 1 ? k->xout : k->xin;
            a[7] = "EXEC";
            struct cmd *c = &cmds[per * (size_t)s];
            c[0] = (struct cmd){1, a};
            c[1] = (struct cmd){2 + m, a + 1};
            c[2] = (struct cmd){2, a + 5};
            c[3] = (struct cmd){1, a + 7};
        }
        if ((rc = pipeline(u->r, ncmd, cmds, rep)) != 0) break;
        for (int s = 0; rc == 0 && s < ns; s++) {
            const redisReply *ex = rep[per * (size_t)s + 3];
            if (ex->type != REDIS_REPLY_ARRAY || ex->elements != 2 ||
                ex->element[0]->type != REDIS_REPLY_ARRAY ||
                ex->element[0]->elements != (round == 1 ? 2u : 1u) ||
                ex->element[1]->type != REDIS_REPLY_ARRAY || ex->element[1]->elements % 2) {
                rc = proto_err(u->r, round == 1 ? "MULTI/EXEC xout" : "MULTI/EXEC xin", ex);
                break;
            }
            const redisReply *m = ex->element[0], *h = ex->element[1];
            if (round == 1) {
                t->f.lent += opt_i64(m->element[0]);
                int64_t q = opt_i64(m->element[1]);
                xseq[s] = q > 0 ? (uint64_t)q : 0;
                for (size_t i = 0; rc == 0 && i + 1 < h->elements; i += 2)
                    rc = add_xfer(t, s, ns, h->element[i], h->element[i + 1]);
                if (rc == 0 && s == ns - 1 && t->nx) qsort(t->x, t->nx, sizeof *t->x, cmp_xfer);
                continue;
            }
            t->f.received += opt_i64(m->element[0]);
            /* Applied here: the transfers seen in round 1, and the newer ones. */
            for (size_t i = 0; i + 1 < h->elements; i += 2) {
                const redisReply *id = h->element[i], *v = h->element[i + 1];
                if (id->type != REDIS_REPLY_STRING) continue;
                int from;
                uint64_t n;
                if (parse_xfer_id(id->str, id->len, &from, &n) == 0 && from >= 0 && from < ns &&
                    n > xseq[from]) {
                    t->f.received -= opt_i64(v); /* lent after round 1 looked */
                    continue;
                }
                struct xfer key = {.id = id->str, .to = s};
                struct xfer *x = t->nx ? bsearch(&key, t->x, t->nx, sizeof key, cmp_xfer) : NULL;
                if (x) x->applied = 1;
            }
        }
        free_replies(rep, ncmd);
        memset(rep, 0, ncmd * sizeof *rep);
    }
    if (rep) free_replies(rep, ncmd);
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
static int check_transit(struct run *u)
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
        rc = add_drift(rep, x->from, SK_DRIFT_IN_TRANSIT, NULL,
                       "transfer %s: %" PRId64 " unit(s) lent to segment %d %" PRId64
                       " ms ago and never applied there (the borrower stopped between the two "
                       "halves)",
                       x->id, x->qty, x->to, u->now - x->ms);
    }
    for (size_t i = 0; rc == 0 && i < t.nbad; i++)
        rc = add_drift(rep, t.bad[i].seg, SK_DRIFT_IN_TRANSIT, NULL,
                       "malformed transfer entry %s in the xout hash (never rolled forward)",
                       t.bad[i].text);
    if (rc == 0 && t.f.lent - t.f.received != t.f.units)
        rc = add_drift(rep, SK_SEG_NONE, SK_DRIFT_IN_TRANSIT, NULL,
                       "the transfer counters say %" PRId64 " unit(s) in transit (lent %" PRId64
                       " - received %" PRId64 ") but the unapplied transfers hold %" PRId64
                       ": units were moved outside a transfer (a forced preheat while a "
                       "transfer was pending?)",
                       t.f.lent - t.f.received, t.f.lent, t.f.received, t.f.units);
    transit_free(&t);
    return rc;
}

/* The base meta's initial (the activity's definition), -1 when absent. */
static int read_base_initial(struct run *u)
{
    struct sk_keys b;
    sk_keys_for(&b, u->aid);
    redisReply *rep;
    int rc = sk_redis_cmd(u->r, &rep, "HGET %s initial", b.meta);
    if (rc) return rc;
    u->base_initial = -1;
    if (rep->type == REDIS_REPLY_STRING) {
        if (sk_num_i64(rep->str, rep->len, &u->base_initial)) u->base_initial = -1;
    } else if (rep->type != REDIS_REPLY_NIL) {
        rc = proto_err(u->r, "HGET base meta initial", rep);
    }
    freeReplyObject(rep);
    return rc;
}

/* The checks of one key set's Redis side (its snapshot is present). */
static int check_redis(struct ctx *c)
{
    struct sk_reconcile_report *rep = c->rep;
    int64_t held = c->rr->held, own = c->s.initial + c->s.xin - c->s.xout;
    if (c->s.stock + held != own) {
        if (c->seg < 0)
            add_drift(rep, c->seg, SK_DRIFT_REDIS_INVARIANT, NULL,
                      "Redis stock %" PRId64 " + units held by buyers %" PRId64 " = %" PRId64
                      " != initial %" PRId64,
                      c->s.stock, held, c->s.stock + held, c->s.initial);
        else
            add_drift(rep, c->seg, SK_DRIFT_REDIS_INVARIANT, NULL,
                      "Redis stock %" PRId64 " + units held by buyers %" PRId64 " = %" PRId64
                      " != initial %" PRId64 " + received %" PRId64 " - lent %" PRId64
                      " = %" PRId64,
                      c->s.stock, held, c->s.stock + held, c->s.initial, c->s.xin, c->s.xout, own);
    }
    if (user_diffs(&c->s, user_drift, c) < 0) return SK_ENOMEM;
    for (size_t i = 0; i < c->s.nbad; i++)
        add_drift(rep, c->seg, SK_DRIFT_ORDER_MISMATCH, NULL, "malformed ledger entry %s",
                  c->s.bad[i]);
    return 0;
}

/* The whole check into u->rep (no repair). */
static int check(struct run *u)
{
    struct sk_reconcile_report *rep = u->rep;
    int segmented = u->nseg > 1, any = 0, rc;
    size_t entries = 0;
    for (int i = 0; i < u->nseg; i++) {
        struct ctx *c = &u->cs[i];
        if ((rc = read_snap(u->r, &c->k, 0, &c->s)) != 0) return rc;
        redis_figures(c);
        if ((rc = read_group(u->r, &c->k, &c->b, c->rr)) != 0) return rc;
        any |= c->s.present;
        entries += c->s.nl + c->s.nbad;
    }
    if (segmented && (rc = read_base_initial(u)) != 0) return rc;
    sum_figures(u);

    struct sk_activity a;
    rc = sk_store_activity_get(u->st, u->aid, &a);
    if (rc && rc != SK_ENOTFOUND) return rc;
    rep->db.present = rc == 0;
    /* (a segmented activity has at least its base meta in Redis) */
    if (!rep->db.present && !any && !entries && !segmented) return SK_ENOTFOUND;
    if (rep->db.present) {
        snprintf(rep->db.state, sizeof rep->db.state, "%s", a.state);
        rep->db.initial = a.stock;
        if ((rc = sk_store_orders_count(u->st, u->aid, &rep->db.counts)) != 0) return rc;
        if ((rc = sk_store_db_stock_check(u->st, u->aid, &rep->db.stock,
                                          &rep->db.stock_expected)) != 0)
            return store_err(rc);
    }

    if (rep->db.present && !any) {
        int64_t orders = 0;
        for (int i = 0; i < SK_ORDER_NSTATUS; i++)
            orders += rep->db.counts.orders[i];
        /* Never preheated and nothing sold: nothing to compare. */
        if (strcmp(rep->db.state, "created") != 0 || orders > 0)
            add_drift(rep, SK_SEG_NONE, SK_DRIFT_REDIS_MISSING, NULL,
                      "the DB activity is %s with %" PRId64
                      " order(s) but Redis has no live state for it (stock or meta missing): "
                      "re-preheat only after checking what was sold",
                      rep->db.state, orders);
    }
    if (!rep->db.present)
        add_drift(rep, SK_SEG_NONE, SK_DRIFT_DB_MISSING, NULL,
                  "Redis has live state for the activity but the DB has no activity row");
    if (rep->db.present && rep->db.stock != rep->db.stock_expected) {
        const struct sk_order_counts *k = &rep->db.counts;
        char why[128] = "";
        if (k->stock_failures)
            snprintf(why, sizeof why,
                     " (%" PRId64 " failed conditional stock update(s) recorded, %" PRId64
                     " unit(s))",
                     k->stock_failures, k->stock_failure_units);
        add_drift(rep, SK_SEG_NONE, SK_DRIFT_DB_STOCK, NULL,
                  "DB stock %" PRId64 " != expected %" PRId64 " = initial %" PRId64
                  " - units of orders not cancelled %" PRId64 "%s",
                  rep->db.stock, rep->db.stock_expected, rep->db.initial,
                  rep->db.initial - rep->db.stock_expected, why);
    }
    if (!any) return 0;

    int all = 1;
    int64_t shares = 0;
    for (int i = 0; segmented && i < u->nseg; i++) {
        all = all && u->cs[i].s.present;
        shares += u->cs[i].s.initial;
        if (!u->cs[i].s.present)
            add_drift(rep, i, SK_DRIFT_REDIS_MISSING, NULL,
                      "no live state (stock or meta missing) while other segments have it: its "
                      "orders are not checked; re-preheat only after checking what was sold");
    }
    if (rep->db.present && rep->db.initial != rep->redis.initial)
        add_drift(rep, SK_SEG_NONE, SK_DRIFT_INITIAL_MISMATCH, NULL,
                  "Redis initial stock %" PRId64 " != DB initial stock %" PRId64,
                  rep->redis.initial, rep->db.initial);
    /* The global invariant sum(stock) + sum(held) + in transit == initial
     * follows from the segments' own ones once their shares add up. */
    if (segmented && all && u->base_initial >= 0 && shares != u->base_initial)
        add_drift(rep, SK_SEG_NONE, SK_DRIFT_REDIS_INVARIANT, NULL,
                  "the segments' initial shares add up to %" PRId64
                  " != the activity's initial %" PRId64 " (base meta)",
                  shares, u->base_initial);
    for (int i = 0; i < u->nseg; i++)
        if (u->cs[i].s.present && (rc = check_redis(&u->cs[i])) != 0) return rc;
    if (rep->db.present) {
        if ((rc = merge_orders(u)) != 0) return rc;
        for (int i = 0; i < u->nseg; i++) {
            struct ctx *c = &u->cs[i];
            if (!c->s.present) continue;
            if ((rc = settle_candidates(c)) != 0 || (rc = find_lost(c)) != 0) return rc;
        }
    }
    if (segmented && (rc = check_transit(u)) != 0) return rc;
    sum_figures(u); /* backlog_orders were counted since */
    return 0;
}

/* ---- Repair ---------------------------------------------------------------- */

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
/* Plans and applies the Redis repairs of one key set (the activity's, or one
 * segment's: one slot) in one WATCH/MULTI/EXEC: ledger entries restored
 * from DB orders when the buyers hash proves their units are held, and the
 * stock when the buyers hash agrees with the ledger.
 * *release_after: restored entries of cancelled orders, now owed a release
 * (caller's array of the NOT_IN_LEDGER drift count, *nrel set). */
static void repair_redis(struct ctx *c, const struct sk_order **release_after, size_t *nrel)
{
    struct sk_reconcile_report *rep = c->rep;
    *nrel = 0;
    size_t nmiss = 0;
    for (size_t i = 0; i < rep->ndrift; i++)
        nmiss += rep->drift[i].kind == SK_DRIFT_NOT_IN_LEDGER && rep->drift[i].segment == c->seg;
    struct restore *rs = nmiss ? calloc(nmiss, sizeof *rs) : NULL;
    if (nmiss && !rs) {
        add_repair(rep, c->seg, SK_DRIFT_NOT_IN_LEDGER, 0, "out of memory");
        return;
    }
    for (size_t i = 0, k = 0; i < rep->ndrift; i++)
        if (rep->drift[i].kind == SK_DRIFT_NOT_IN_LEDGER && rep->drift[i].segment == c->seg)
            rs[k++].o = &rep->drift[i].order;

    for (int attempt = 0; attempt < WATCH_ATTEMPTS; attempt++) {
        /* Lines of an attempt that EXEC then refused are dropped: the
         * next attempt plans again from fresh data. */
        size_t mark = rep->nrepairs, fmark = rep->repair_failures;
        struct snap s;
        redisReply *rep1 = NULL;
        int rc = read_snap(c->r, &c->k, 1, &s);
        if (rc) {
            add_repair(rep, c->seg, SK_DRIFT_REDIS_INVARIANT, 0, "Redis repairs not attempted: %s",
                       c->r->errstr);
            break;
        }
        /* Which missing entries are released ones (the released set keeps
         * the order id even when its ledger entry is gone)? */
        int ok = 1;
        if (nmiss) {
            const char **argv = malloc((2 + nmiss) * sizeof *argv);
            if (!argv) ok = 0;
            for (size_t i = 0; ok && i < nmiss; i++)
                argv[2 + i] = rs[i].o->order_id;
            if (ok) {
                argv[0] = "SMISMEMBER";
                argv[1] = c->k.released;
                ok = sk_redis_command(c->r, &rep1, (int)(2 + nmiss), argv, NULL) == 0 &&
                     rep1->type == REDIS_REPLY_ARRAY && rep1->elements == nmiss;
            }
            free(argv);
            for (size_t i = 0; ok && i < nmiss; i++) {
                rs[i].released =
                    rep1->element[i]->type == REDIS_REPLY_INTEGER && rep1->element[i]->integer == 1;
                /* Still missing from the ledger read under WATCH? */
                struct lentry key;
                snprintf(key.oid, sizeof key.oid, "%s", rs[i].o->order_id);
                rs[i].write = !s.nl || !bsearch(&key, s.ledger, s.nl, sizeof *s.ledger, cmp_lentry);
            }
            if (rep1) freeReplyObject(rep1);
        }
        if (!ok) {
            snap_free(&s);
            sk_redis_cmd(c->r, &rep1, "UNWATCH");
            if (rep1) freeReplyObject(rep1);
            add_repair(rep, c->seg, SK_DRIFT_NOT_IN_LEDGER, 0, "ledger repairs not attempted: %s",
                       c->r->errstr[0] ? c->r->errstr : "out of memory");
            break;
        }
        /* Per user: the buyers hash must hold exactly the units of the
         * missing unreleased orders on top of the ledger's. Else the
         * entries are left alone (not provably safe). */
        struct uunits *lu = NULL;
        size_t nlu = 0;
        ledger_users(s.ledger, s.nl, &lu, &nlu);
        for (size_t i = 0; i < nmiss; i++) {
            if (!rs[i].write) continue;
            uint64_t u = rs[i].o->user_id;
            int64_t need = 0, have = 0;
            for (size_t j = 0; j < nmiss; j++)
                if (rs[j].write && rs[j].o->user_id == u && !rs[j].released)
                    need += rs[j].o->quantity;
            struct uunits key = {.user = u};
            struct uunits *b = s.nb ? bsearch(&key, s.buyers, s.nb, sizeof key, cmp_uunits) : NULL,
                          *l = nlu ? bsearch(&key, lu, nlu, sizeof key, cmp_uunits) : NULL;
            have = (b ? b->units : 0) - (l ? l->units : 0);
            if (have != need) {
                for (size_t j = 0; j < nmiss; j++)
                    if (rs[j].write && rs[j].o->user_id == u) {
                        rs[j].write = 0;
                        add_repair(rep, c->seg, SK_DRIFT_NOT_IN_LEDGER, 0,
                                   "order %s: ledger entry not restored: user %" PRIu64
                                   " holds %" PRId64 " unit(s) beyond the ledger, the "
                                   "missing orders %" PRId64 ": not provably safe",
                                   rs[j].o->order_id, u, have, need);
                    }
            }
        }
        free(lu);
        /* With the restores applied, does the buyers hash agree with the
         * ledger for every user? Only then is stock = initial - held safe
         * (a segment's: initial + received - lent - held, what it owns). */
        int64_t held = held_units(&s), new_stock = -1, own = s.initial + s.xin - s.xout;
        if (s.present && s.stock + held != own) {
            size_t nl2 = s.nl;
            struct lentry *l2 = realloc(s.ledger, (s.nl + nmiss + 1) * sizeof *l2);
            if (l2) {
                s.ledger = l2;
                for (size_t i = 0; i < nmiss; i++) {
                    if (!rs[i].write) continue;
                    struct lentry *e = &s.ledger[nl2++];
                    memset(e, 0, sizeof *e);
                    snprintf(e->oid, sizeof e->oid, "%s", rs[i].o->order_id);
                    e->user = rs[i].o->user_id;
                    e->qty = rs[i].o->quantity;
                    e->released = rs[i].released;
                }
                s.nl = nl2;
                long diffs = user_diffs(&s, NULL, NULL);
                int64_t target = own - held;
                if (diffs == 0 && target >= 0 && target <= own && !c->counters_bad)
                    new_stock = target;
                else
                    add_repair(rep, c->seg, SK_DRIFT_REDIS_INVARIANT, 0,
                               "Redis stock %" PRId64 " left alone: %s", s.stock,
                               diffs ? "the buyers hash disagrees with the ledger, so it cannot "
                                       "prove what the stock should be"
                               : c->counters_bad
                                   ? "the transfer counters (xin/xout) or the shares are in "
                                     "doubt (see the activity's drift), so they cannot prove "
                                     "what the segment owns"
                                   : "initial - held is outside 0..initial (oversold)");
            }
        }
        size_t nw = 0;
        for (size_t i = 0; i < nmiss; i++)
            nw += rs[i].write;
        if (!nw && new_stock < 0) {
            snap_free(&s);
            sk_redis_cmd(c->r, &rep1, "UNWATCH");
            if (rep1) freeReplyObject(rep1);
            break;
        }
        /* MULTI, the writes, EXEC: nil when a watched key changed. */
        size_t ncmd = 2 + 2 * nw + (new_stock >= 0);
        struct cmd *cmds = calloc(ncmd, sizeof *cmds);
        const char **argv = calloc(ncmd * 4, sizeof *argv);
        char(*vals)[48] = calloc(nw + 1, sizeof *vals);
        redisReply **replies = calloc(ncmd, sizeof *replies);
        if (!cmds || !argv || !vals || !replies) {
            free(cmds);
            free(argv);
            free(vals);
            free(replies);
            snap_free(&s);
            sk_redis_cmd(c->r, &rep1, "UNWATCH");
            if (rep1) freeReplyObject(rep1);
            add_repair(rep, c->seg, SK_DRIFT_REDIS_INVARIANT, 0, "out of memory");
            break;
        }
        size_t ci = 0, vi = 0;
        argv[0] = "MULTI";
        cmds[ci++] = (struct cmd){1, &argv[0]};
        for (size_t i = 0; i < nmiss; i++) {
            if (!rs[i].write) continue;
            const char **a = &argv[4 * ci];
            snprintf(vals[vi], sizeof vals[vi], "%" PRIu64 ":%" PRId64 "%s", rs[i].o->user_id,
                     rs[i].o->quantity, rs[i].released ? ":released" : "");
            a[0] = "HSET";
            a[1] = c->k.ledger;
            a[2] = rs[i].o->order_id;
            a[3] = vals[vi++];
            cmds[ci++] = (struct cmd){4, a};
            /* The released set is kept in step with the ledger marks; a
             * no-op for a held entry (SREM of an absent member). */
            a = &argv[4 * ci];
            a[0] = rs[i].released ? "SADD" : "SREM";
            a[1] = c->k.released;
            a[2] = rs[i].o->order_id;
            cmds[ci++] = (struct cmd){3, a};
        }
        if (new_stock >= 0) {
            const char **a = &argv[4 * ci];
            snprintf(vals[vi], sizeof vals[vi], "%" PRId64, new_stock);
            a[0] = "SET";
            a[1] = c->k.stock;
            a[2] = vals[vi];
            cmds[ci++] = (struct cmd){3, a};
        }
        argv[4 * ci] = "EXEC";
        cmds[ci] = (struct cmd){1, &argv[4 * ci]};
        ci++;
        rc = pipeline(c->r, ci, cmds, replies);
        int done = rc == 0 && replies[ci - 1]->type == REDIS_REPLY_ARRAY;
        int busy = rc == 0 && replies[ci - 1]->type == REDIS_REPLY_NIL;
        if (rc == 0) free_replies(replies, ci);
        if (done) {
            for (size_t i = 0; i < nmiss; i++) {
                if (!rs[i].write) continue;
                char detail[SK_STORE_AUDIT_DETAIL_MAX];
                snprintf(detail, sizeof detail,
                         "order %s: ledger entry restored as \"%" PRIu64 ":%" PRId64
                         "%s\" from the DB order (%s); the buyers hash holds its units%s",
                         rs[i].o->order_id, rs[i].o->user_id, rs[i].o->quantity,
                         rs[i].released ? ":released" : "", sk_order_status_name(rs[i].o->status),
                         rs[i].released ? " (released: in the released set)" : "");
                audit(c->st, c->now, c->aid, c->seg, "repair_ledger_entry", detail);
                add_repair(rep, c->seg, SK_DRIFT_NOT_IN_LEDGER, 1, "%s", detail);
                if (!rs[i].released && rs[i].o->status == SK_ORDER_CANCELLED)
                    release_after[(*nrel)++] = rs[i].o;
            }
            if (new_stock >= 0) {
                char detail[SK_STORE_AUDIT_DETAIL_MAX];
                if (c->seg < 0)
                    snprintf(detail, sizeof detail,
                             "Redis stock %" PRId64 " -> %" PRId64 " (initial %" PRId64
                             " - units held by buyers %" PRId64
                             "; the buyers hash agrees with the ledger)",
                             s.stock, new_stock, s.initial, held);
                else
                    snprintf(detail, sizeof detail,
                             "Redis stock %" PRId64 " -> %" PRId64 " (initial %" PRId64
                             " + received %" PRId64 " - lent %" PRId64
                             " - units held by buyers %" PRId64
                             "; the buyers hash agrees with the ledger)",
                             s.stock, new_stock, s.initial, s.xin, s.xout, held);
                audit(c->st, c->now, c->aid, c->seg, "repair_redis_stock", detail);
                add_repair(rep, c->seg, SK_DRIFT_REDIS_INVARIANT, 1, "%s", detail);
            }
        }
        free(cmds);
        free(argv);
        free(vals);
        free(replies);
        snap_free(&s);
        if (done) break;
        if (!busy) {
            add_repair(rep, c->seg, SK_DRIFT_REDIS_INVARIANT, 0, "Redis repairs failed: %s",
                       rc ? c->r->errstr : "unexpected EXEC reply");
            break;
        }
        rep->nrepairs = mark;
        rep->repair_failures = fmark;
        if (attempt == WATCH_ATTEMPTS - 1)
            add_repair(rep, c->seg, SK_DRIFT_REDIS_INVARIANT, 0,
                       "Redis repairs given up: the activity kept changing (a live sale?); "
                       "run reconcile again");
    }
    free(rs);
}

/* Writes a lost order back into the DB (created, or cancelled when Redis
 * released it). */
static void repair_lost(struct run *u, const struct sk_drift *d)
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
        add_repair(u->rep, d->segment, SK_DRIFT_LOST_ORDER, 1, "%s", detail);
    else if (rc == SK_EEXIST)
        add_repair(u->rep, d->segment, SK_DRIFT_LOST_ORDER, 1,
                   "order %s: persisted meanwhile, nothing to do", o->order_id);
    else
        add_repair(u->rep, d->segment, SK_DRIFT_LOST_ORDER, 0, "order %s: not restored: %s",
                   o->order_id, sk_store_errstr(u->st));
}

/* Released in Redis, still created in the DB: cancel it there (a payment
 * must not keep units that went back on sale). */
static void repair_released_not_cancelled(struct run *u, const struct sk_drift *d)
{
    const struct sk_order *o = &d->order;
    int seg = d->segment, prev = -1;
    int rc = sk_store_order_cancel(u->st, o->order_id, u->now, &prev);
    if (rc == SK_ESTATE) {
        add_repair(u->rep, seg, SK_DRIFT_RELEASED_NOT_CANCELLED, 0,
                   "order %s: paid meanwhile: now paid in the DB and released in Redis (serious)",
                   o->order_id);
        return;
    }
    if (rc) {
        add_repair(u->rep, seg, SK_DRIFT_RELEASED_NOT_CANCELLED, 0, "order %s: not cancelled: %s",
                   o->order_id, sk_store_errstr(u->st));
        return;
    }
    sk_store_order_mark_released(u->st, o->order_id, u->now);
    if (prev != SK_ORDER_CREATED) {
        add_repair(u->rep, seg, SK_DRIFT_RELEASED_NOT_CANCELLED, 1,
                   "order %s: cancelled meanwhile, nothing to do", o->order_id);
        return;
    }
    char detail[SK_STORE_AUDIT_DETAIL_MAX];
    snprintf(detail, sizeof detail,
             "order %s (user %" PRIu64 ", %" PRId64
             " unit(s)) was released in Redis but created in the DB: cancelled in the DB",
             o->order_id, o->user_id, o->quantity);
    audit(u->st, u->now, u->aid, SK_SEG_NONE, "repair_cancel_released", detail);
    add_repair(u->rep, seg, SK_DRIFT_RELEASED_NOT_CANCELLED, 1, "%s", detail);
}

/* Cancelled in the DB, units still held in Redis: run the release (on the
 * key set the order id names: sk_stock_release routes it). */
static void repair_release(struct run *u, int seg, const struct sk_order *o)
{
    int rrc = -1;
    int64_t given = 0;
    int rc = sk_stock_release(u->r, u->aid, o->order_id, o->user_id, o->quantity, &rrc, &given);
    if (rc < 0) {
        add_repair(u->rep, seg, SK_DRIFT_CANCELLED_NOT_RELEASED, 0, "order %s: release failed: %s",
                   o->order_id, u->r->errstr);
        return;
    }
    if (rrc != SK_RC_RELEASED && rrc != SK_RC_ALREADY_RELEASED) {
        add_repair(u->rep, seg, SK_DRIFT_CANCELLED_NOT_RELEASED, 0,
                   "order %s: Redis refused the release (%s)", o->order_id, sk_rc_name(rrc));
        return;
    }
    sk_store_order_mark_released(u->st, o->order_id, u->now);
    if (rrc == SK_RC_ALREADY_RELEASED) {
        add_repair(u->rep, seg, SK_DRIFT_CANCELLED_NOT_RELEASED, 1,
                   "order %s: released meanwhile, nothing to do", o->order_id);
        return;
    }
    char detail[SK_STORE_AUDIT_DETAIL_MAX];
    snprintf(detail, sizeof detail,
             "order %s (user %" PRIu64 ", %" PRId64
             " unit(s)) was cancelled in the DB but held in Redis: released, %" PRId64
             " unit(s) back on sale",
             o->order_id, o->user_id, o->quantity, given);
    audit(u->st, u->now, u->aid, SK_SEG_NONE, "repair_release", detail);
    add_repair(u->rep, seg, SK_DRIFT_CANCELLED_NOT_RELEASED, 1, "%s", detail);
}

/* Segmented: rolls forward every transfer lent and never applied
 * (sk_seg_settle: idempotent per transfer id, so racing the borrower is
 * safe). Only when the transfer counters agree with the unapplied
 * transfers: if they do not, units were moved outside a transfer and
 * applying the transfers could create stock. */
static void repair_transit(struct run *u)
{
    struct sk_reconcile_report *rep = u->rep;
    struct transit t;
    int rc = measure_transit(u, &t);
    if (rc) {
        transit_free(&t);
        add_repair(rep, SK_SEG_NONE, SK_DRIFT_IN_TRANSIT, 0, "transfers not settled: %s",
                   rc == SK_ENOMEM ? "out of memory" : u->r->errstr);
        return;
    }
    struct sk_reconcile_transit f = t.f;
    transit_free(&t);
    if (f.lent - f.received != f.units) {
        add_repair(rep, SK_SEG_NONE, SK_DRIFT_IN_TRANSIT, 0,
                   "transfers not settled: the counters say %" PRId64
                   " unit(s) in transit, the unapplied transfers hold %" PRId64
                   ": applying them would not restore the stock; not provably safe",
                   f.lent - f.received, f.units);
        return;
    }
    int64_t units = 0;
    rc = sk_seg_settle(u->r, u->aid, u->nseg, &units);
    if (rc < 0) {
        add_repair(rep, SK_SEG_NONE, SK_DRIFT_IN_TRANSIT, 0, "transfers not settled: %s",
                   u->r->errstr);
        return;
    }
    rep->settled = 1;
    rep->settled_units = units;
    if (units == 0) {
        add_repair(rep, SK_SEG_NONE, SK_DRIFT_IN_TRANSIT, 1,
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
    add_repair(rep, SK_SEG_NONE, SK_DRIFT_IN_TRANSIT, 1, "%s", detail);
}

static size_t seg_found(const struct sk_reconcile_report *rep, int seg, int kind)
{
    size_t n = 0;
    for (size_t i = 0; i < rep->ndrift; i++)
        n += rep->drift[i].kind == kind && rep->drift[i].segment == seg;
    return n;
}

static void repair(struct run *u)
{
    struct sk_reconcile_report *rep = u->rep;
    size_t nd = rep->ndrift; /* repairs never add drift entries */
    const struct sk_order **rel = nd ? calloc(nd, sizeof *rel) : NULL;
    int *relseg = nd ? calloc(nd, sizeof *relseg) : NULL;
    size_t nrel = 0;
    if (nd && (!rel || !relseg)) {
        free(rel);
        free(relseg);
        add_repair(rep, SK_SEG_NONE, SK_DRIFT_NOT_IN_LEDGER, 0, "out of memory");
        return;
    }
    if (u->nseg > 1 && rep->found[SK_DRIFT_IN_TRANSIT]) repair_transit(u);
    /* A segment owns initial + xin - xout: only provable when the counters
     * agree with the transfers and the shares with the activity. */
    int counters_bad = u->nseg > 1 && (seg_found(rep, SK_SEG_NONE, SK_DRIFT_IN_TRANSIT) ||
                                       seg_found(rep, SK_SEG_NONE, SK_DRIFT_REDIS_INVARIANT));
    for (int i = 0; i < u->nseg; i++) {
        struct ctx *c = &u->cs[i];
        c->counters_bad = counters_bad;
        if (!c->rr->present || (!seg_found(rep, c->seg, SK_DRIFT_NOT_IN_LEDGER) &&
                                !seg_found(rep, c->seg, SK_DRIFT_REDIS_INVARIANT)))
            continue;
        size_t n = 0;
        repair_redis(c, rel + nrel, &n);
        for (size_t j = 0; j < n; j++)
            relseg[nrel + j] = c->seg;
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
        repair_release(u, relseg[i], rel[i]);
    free(rel);
    free(relseg);
    /* Last: the DB stock from the orders as they are now. */
    if (rep->db.present && (rep->found[SK_DRIFT_DB_STOCK] || db_changed)) {
        int64_t before = 0, after = 0;
        int rc = sk_store_db_stock_repair(u->st, u->aid, u->now, &before, &after);
        if (rc)
            add_repair(rep, SK_SEG_NONE, SK_DRIFT_DB_STOCK, 0, "DB stock not repaired: %s",
                       sk_store_errstr(u->st));
        else if (before != after)
            add_repair(rep, SK_SEG_NONE, SK_DRIFT_DB_STOCK, 1,
                       "DB stock %" PRId64 " -> %" PRId64 " (initial - units of orders not "
                       "cancelled)",
                       before, after);
    }
}

int sk_reconcile_activity(sk_store *st, sk_redis *r, uint64_t activity_id,
                          const struct sk_reconcile_opts *o, struct sk_reconcile_report *rep)
{
    struct sk_reconcile_opts def;
    if (!o) {
        sk_reconcile_opts_init(&def);
        o = &def;
    }
    memset(rep, 0, sizeof *rep);
    rep->activity_id = activity_id;
    rep->repair = o->repair;
    rep->segments = 1;
    int64_t now = o->now_ms ? o->now_ms : sk_wall_ms();
    int64_t grace = o->grace_ms >= 0 ? o->grace_ms : 0;
    /* Segmented or not, as Redis routes purchases: the base meta's count. */
    int nseg;
    int rc = sk_seg_count(r, activity_id, &nseg);
    if (rc) return rc;
    struct run u;
    rc = run_init(&u, st, r, activity_id, now, grace, rep, nseg);
    if (rc == 0) rc = check(&u);
    run_free(&u);
    if (rc) return rc;
    rep->consistent = rep->total == 0;
    if (!o->repair || rep->total == 0) return 0;
    if ((rc = run_init(&u, st, r, activity_id, now, grace, rep, nseg)) == 0) repair(&u);
    run_free(&u);
    if (rc) return rc;
    /* A second check says what is left. */
    struct sk_reconcile_report after;
    memset(&after, 0, sizeof after);
    after.activity_id = activity_id;
    rc = run_init(&u, st, r, activity_id, now, grace, &after, nseg);
    if (rc == 0) rc = check(&u);
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

/* ---- Output ------------------------------------------------------------------ */

/* One line of Redis figures: the activity's (seg < 0) or one segment's. */
static void print_redis(FILE *f, uint64_t id, int seg, const struct sk_reconcile_redis *rr,
                        const struct sk_reconcile_report *rep)
{
    char where[32] = "";
    if (seg >= 0) snprintf(where, sizeof where, "segment %d: ", seg);
    if (!rr->present) {
        fprintf(f, "activity %" PRIu64 ": %sredis: no live state\n", id, where);
        return;
    }
    char und[24], ini[80];
    if (rr->undelivered >= 0)
        snprintf(und, sizeof und, "%" PRId64, rr->undelivered);
    else
        snprintf(und, sizeof und, "?");
    if (seg >= 0)
        snprintf(ini, sizeof ini, "%" PRId64 " + received %" PRId64 " - lent %" PRId64, rr->initial,
                 rr->xin, rr->xout);
    else
        snprintf(ini, sizeof ini, "%" PRId64, rr->initial);
    fprintf(f,
            "activity %" PRIu64 ": %sredis: initial %s, remaining %" PRId64 ", held %" PRId64
            " by %" PRId64 " buyer(s); ledger %" PRId64 " order(s) (%" PRId64
            " units), released %" PRId64 " (%" PRId64 " units); backlog %" PRId64
            " (pending %" PRId64 ", undelivered %s, %" PRId64 " not yet in the DB); dlq %" PRId64,
            id, where, ini, rr->remaining, rr->held, rr->buyers, rr->admitted_orders,
            rr->admitted_units, rr->released_orders, rr->released_units, rr->backlog, rr->pending,
            und, rr->backlog_orders, rr->dlq);
    if (seg < 0 && rep->segments > 1) {
        const struct sk_reconcile_transit *t = &rep->transit;
        fprintf(f,
                "; %d segments, transfers: lent %" PRId64 ", received %" PRId64
                ", in transit %" PRId64 " unit(s) in %" PRId64 " transfer(s) (%" PRId64
                " older than the grace)",
                rep->segments, t->lent, t->received, t->units, t->transfers, t->stale);
    }
    fputc('\n', f);
}

void sk_reconcile_print(FILE *f, const struct sk_reconcile_report *rep, size_t max_lines)
{
    uint64_t id = rep->activity_id;
    const struct sk_reconcile_redis *rr = &rep->redis;
    const struct sk_reconcile_db *db = &rep->db;
    print_redis(f, id, SK_SEG_NONE, rr, rep);
    for (int s = 0; rep->seg && rep->segments > 1 && s < rep->segments; s++) {
        if ((size_t)s < max_lines) {
            print_redis(f, id, s, &rep->seg[s], rep);
        } else {
            fprintf(f, "activity %" PRIu64 ": ... and %d more segment(s)\n", id, rep->segments - s);
            break;
        }
    }
    if (db->present) {
        const struct sk_order_counts *k = &db->counts;
        fprintf(f,
                "activity %" PRIu64 ": db: state %s, initial %" PRId64 ", stock %" PRId64
                " (expected %" PRId64 "); orders created %" PRId64 " (%" PRId64
                " units), paid %" PRId64 " (%" PRId64 "), cancelled %" PRId64 " (%" PRId64
                "); failed stock updates %" PRId64 "\n",
                id, db->state, db->initial, db->stock, db->stock_expected,
                k->orders[SK_ORDER_CREATED], k->units[SK_ORDER_CREATED], k->orders[SK_ORDER_PAID],
                k->units[SK_ORDER_PAID], k->orders[SK_ORDER_CANCELLED],
                k->units[SK_ORDER_CANCELLED], k->stock_failures);
    } else {
        fprintf(f, "activity %" PRIu64 ": db: no activity row\n", id);
    }
    for (int kind = 0; kind < SK_DRIFT_NKINDS; kind++) {
        size_t shown = 0;
        for (size_t i = 0; i < rep->ndrift; i++) {
            if (rep->drift[i].kind != kind) continue;
            if (shown++ < max_lines)
                fprintf(f, "activity %" PRIu64 ": DRIFT %s: %s\n", id, sk_drift_name(kind),
                        rep->drift[i].text);
        }
        if (shown > max_lines)
            fprintf(f, "activity %" PRIu64 ": DRIFT %s: ... and %zu more\n", id,
                    sk_drift_name(kind), shown - max_lines);
    }
    for (size_t i = 0; i < rep->nrepairs; i++)
        fprintf(f, "activity %" PRIu64 ": %s %s: %s\n", id,
                rep->repairs[i].ok ? "REPAIRED" : "NOT REPAIRED",
                sk_drift_name(rep->repairs[i].kind), rep->repairs[i].text);
    if (rep->total == 0)
        fprintf(f, "activity %" PRIu64 ": consistent\n", id);
    else if (!rep->repair)
        fprintf(f, "activity %" PRIu64 ": %zu drift(s) found\n", id, rep->total);
    else
        fprintf(f, "activity %" PRIu64 ": %zu drift(s) found, %zu remain after repair%s\n", id,
                rep->total, rep->remaining_total, rep->consistent ? ": consistent" : "");
}

static json_t *redis_json(const struct sk_reconcile_redis *rr)
{
    return json_pack(
        "{s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:b, s:I, s:I, s:I, s:I, "
        "s:I, s:s}",
        "present", rr->present, "initial", (json_int_t)rr->initial, "remaining",
        (json_int_t)rr->remaining, "xin", (json_int_t)rr->xin, "xout", (json_int_t)rr->xout, "held",
        (json_int_t)rr->held, "buyers", (json_int_t)rr->buyers, "admitted_orders",
        (json_int_t)rr->admitted_orders, "admitted_units", (json_int_t)rr->admitted_units,
        "released_orders", (json_int_t)rr->released_orders, "released_units",
        (json_int_t)rr->released_units, "released_meta", (json_int_t)rr->released_meta, "group",
        rr->group, "backlog", (json_int_t)rr->backlog, "pending", (json_int_t)rr->pending,
        "undelivered", (json_int_t)rr->undelivered, "backlog_orders",
        (json_int_t)rr->backlog_orders, "dlq", (json_int_t)rr->dlq, "last_delivered",
        rr->last_delivered);
}

json_t *sk_reconcile_json(const struct sk_reconcile_report *rep, size_t max_lines)
{
    const struct sk_reconcile_db *db = &rep->db;
    const struct sk_order_counts *k = &db->counts;
    json_t *o = json_pack(
        "{s:I, s:b, s:b, s:I, s:o, s:i, "
        "s:{s:b, s:s, s:I, s:I, s:I, s:{s:I, s:I, s:I}, s:{s:I, s:I, s:I}, s:I, s:I, s:I}}",
        "activity_id", (json_int_t)rep->activity_id, "consistent", rep->consistent, "repair",
        rep->repair, "drift_total", (json_int_t)rep->total, "redis", redis_json(&rep->redis),
        "segments", rep->segments, "db", "present", db->present, "state", db->state, "initial",
        (json_int_t)db->initial, "stock", (json_int_t)db->stock, "stock_expected",
        (json_int_t)db->stock_expected, "orders", "created",
        (json_int_t)k->orders[SK_ORDER_CREATED], "paid", (json_int_t)k->orders[SK_ORDER_PAID],
        "cancelled", (json_int_t)k->orders[SK_ORDER_CANCELLED], "units", "created",
        (json_int_t)k->units[SK_ORDER_CREATED], "paid", (json_int_t)k->units[SK_ORDER_PAID],
        "cancelled", (json_int_t)k->units[SK_ORDER_CANCELLED], "stock_failures",
        (json_int_t)k->stock_failures, "stock_failure_units", (json_int_t)k->stock_failure_units,
        "owed_recent", (json_int_t)db->owed_recent);
    if (!o) return NULL;
    if (rep->segments > 1 && rep->seg) {
        const struct sk_reconcile_transit *t = &rep->transit;
        json_t *segs = json_array();
        json_object_set_new(o, "segment_figures", segs);
        for (int s = 0; s < rep->segments; s++) {
            json_t *e = redis_json(&rep->seg[s]);
            if (!e) continue;
            json_object_set_new(e, "segment", json_integer(s));
            json_array_append_new(segs, e);
        }
        json_object_set_new(o, "transit",
                            json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "lent", (json_int_t)t->lent,
                                      "received", (json_int_t)t->received, "units",
                                      (json_int_t)t->units, "transfers", (json_int_t)t->transfers,
                                      "stale", (json_int_t)t->stale, "stale_units",
                                      (json_int_t)t->stale_units));
        if (rep->repair) {
            json_object_set_new(o, "settled", json_boolean(rep->settled));
            json_object_set_new(o, "settled_units", json_integer((json_int_t)rep->settled_units));
        }
    }
    json_t *counts = json_object(), *drift = json_array(), *repairs = json_array();
    json_t *remaining = rep->repair ? json_object() : NULL;
    json_object_set_new(o, "drift_counts", counts);
    json_object_set_new(o, "drift", drift);
    json_object_set_new(o, "repairs", repairs);
    if (remaining) {
        json_object_set_new(o, "remaining", remaining);
        json_object_set_new(o, "remaining_total", json_integer((json_int_t)rep->remaining_total));
        json_object_set_new(o, "repair_failures", json_integer((json_int_t)rep->repair_failures));
    }
    for (int kind = 0; kind < SK_DRIFT_NKINDS; kind++) {
        if (rep->found[kind])
            json_object_set_new(counts, sk_drift_name(kind),
                                json_integer((json_int_t)rep->found[kind]));
        if (remaining && rep->remaining[kind])
            json_object_set_new(remaining, sk_drift_name(kind),
                                json_integer((json_int_t)rep->remaining[kind]));
        size_t shown = 0;
        for (size_t i = 0; i < rep->ndrift; i++) {
            const struct sk_drift *d = &rep->drift[i];
            if (d->kind != kind || shown++ >= max_lines) continue;
            json_t *e = json_pack("{s:s, s:s}", "kind", sk_drift_name(kind), "message", d->text);
            if (e && d->segment >= 0) json_object_set_new(e, "segment", json_integer(d->segment));
            if (e && d->order.order_id[0])
                json_object_set_new(e, "order_id", json_string(d->order.order_id));
            if (e && d->order.user_id)
                json_object_set_new(e, "user_id", json_integer((json_int_t)d->order.user_id));
            if (e) json_array_append_new(drift, e);
        }
    }
    for (size_t i = 0; i < rep->nrepairs; i++) {
        const struct sk_repair *x = &rep->repairs[i];
        json_t *e = json_pack("{s:s, s:b, s:s}", "kind", sk_drift_name(x->kind), "ok", x->ok,
                              "message", x->text);
        if (e && x->segment >= 0) json_object_set_new(e, "segment", json_integer(x->segment));
        if (e) json_array_append_new(repairs, e);
    }
    return o;
}
