/* reconcile.c - Redis vs DB drift report and safe repair (see reconcile.h
 * and docs/reconcile.md for what is compared and why).
 *
 * One check:
 *   1. Redis snapshot, atomic (MULTI): meta initial/released, stock, the
 *      buyers hash, the ledger, the DLQ length.
 *   2. The order stream's consumer group: last-delivered id, pending ids
 *      (XINFO GROUPS, XPENDING): an order id above last-delivered or
 *      pending is still on its way to the DB (backlog), not lost.
 *   3. The DB: the activity row, counts, the DB stock check (one
 *      statement), then the orders, page by page in id order, merged with
 *      the ledger sorted the same way.
 *   4. Orders in the DB but not in the snapshot's ledger, and cancelled ones
 *      whose ledger entry was not released, are looked up again: they may be
 *      newer than the snapshot.
 * Repair (opt-in) then fixes what is provably safe, one audit row per
 * change, and a second check fills rep->remaining. */
#include "reconcile.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "codes.h"
#include "error.h"
#include "keys.h"
#include "log.h"
#include "order_worker.h"
#include "stock.h"

#define PAGE 1000         /* DB orders per page, pending ids per XPENDING */
#define RECHECK_CHUNK 200 /* order ids per HMGET when looking up again */
#define WATCH_ATTEMPTS 5  /* Redis repairs retried when the sale moved under them */

static const char *const drift_names[SK_DRIFT_NKINDS] = {
    [SK_DRIFT_REDIS_MISSING] = "redis_missing",
    [SK_DRIFT_DB_MISSING] = "db_missing",
    [SK_DRIFT_INITIAL_MISMATCH] = "initial_mismatch",
    [SK_DRIFT_REDIS_INVARIANT] = "redis_invariant",
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
    rep->drift = NULL;
    rep->repairs = NULL;
    rep->ndrift = rep->drift_cap = rep->nrepairs = rep->repairs_cap = 0;
}

/* ---- Report building ----------------------------------------------------- */

static int add_drift(struct sk_reconcile_report *rep, int kind, const struct sk_order *o,
                     const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int add_drift(struct sk_reconcile_report *rep, int kind, const struct sk_order *o,
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
    if (o) d->order = *o;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->text, sizeof d->text, fmt, ap);
    va_end(ap);
    rep->found[kind]++;
    rep->total++;
    return 0;
}

static void add_repair(struct sk_reconcile_report *rep, int kind, int ok, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void add_repair(struct sk_reconcile_report *rep, int kind, int ok, const char *fmt, ...)
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
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->text, sizeof x->text, fmt, ap);
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

/* Whole decimal string -> value; -1 when it is not one. */
static int parse_u64(const char *s, size_t len, uint64_t *v)
{
    if (len == 0 || len > 20) return -1;
    uint64_t x = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        uint64_t d = (uint64_t)(s[i] - '0');
        if (x > (UINT64_MAX - d) / 10) return -1;
        x = x * 10 + d;
    }
    *v = x;
    return 0;
}

static int parse_i64(const char *s, size_t len, int64_t *v)
{
    int neg = len > 0 && s[0] == '-';
    uint64_t u;
    if (parse_u64(s + neg, len - (size_t)neg, &u) || u > (uint64_t)INT64_MAX) return -1;
    *v = neg ? -(int64_t)u : (int64_t)u;
    return 0;
}

/* "<ms>-<seq>" -> numbers; -1 when malformed. */
static int parse_sid(const char *s, size_t len, uint64_t *ms, uint64_t *seq)
{
    const char *dash = memchr(s, '-', len);
    if (!dash) return -1;
    size_t a = (size_t)(dash - s);
    return parse_u64(s, a, ms) || parse_u64(dash + 1, len - a - 1, seq) ? -1 : 0;
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

/* Parses one ledger field/value pair of activity aid into *e: 0, or -1
 * when malformed. */
static int parse_lentry(uint64_t aid, const redisReply *k, const redisReply *v, struct lentry *e)
{
    memset(e, 0, sizeof *e);
    if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING) return -1;
    if (k->len == 0 || k->len >= sizeof e->oid) return -1;
    memcpy(e->oid, k->str, k->len);
    char prefix[32];
    int pl = snprintf(prefix, sizeof prefix, "%" PRIu64 "-", aid);
    if (strncmp(e->oid, prefix, (size_t)pl) != 0) return -1;
    if (parse_sid(e->oid + pl, k->len - (size_t)pl, &e->ms, &e->seq)) return -1;
    const char *s = v->str, *end = v->str + v->len;
    const char *c1 = memchr(s, ':', v->len);
    if (!c1) return -1;
    const char *c2 = memchr(c1 + 1, ':', (size_t)(end - c1 - 1));
    const char *qend = c2 ? c2 : end;
    if (parse_u64(s, (size_t)(c1 - s), &e->user)) return -1;
    if (parse_i64(c1 + 1, (size_t)(qend - c1 - 1), &e->qty) || e->qty < 1) return -1;
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

/* Fills s from the replies of HMGET meta initial released, GET stock,
 * HGETALL buyers, HGETALL ledger, XLEN dlq. */
static int parse_snap(sk_redis *r, uint64_t aid, redisReply *const *rep, struct snap *s)
{
    memset(s, 0, sizeof *s);
    const redisReply *meta = rep[0], *stock = rep[1], *buyers = rep[2], *ledger = rep[3],
                     *dlq = rep[4];
    if (meta->type != REDIS_REPLY_ARRAY || meta->elements != 2) return proto_err(r, "HMGET", meta);
    if (stock->type != REDIS_REPLY_STRING && stock->type != REDIS_REPLY_NIL)
        return proto_err(r, "GET stock", stock);
    if (buyers->type != REDIS_REPLY_ARRAY || buyers->elements % 2)
        return proto_err(r, "HGETALL buyers", buyers);
    if (ledger->type != REDIS_REPLY_ARRAY || ledger->elements % 2)
        return proto_err(r, "HGETALL ledger", ledger);
    if (dlq->type != REDIS_REPLY_INTEGER) return proto_err(r, "XLEN dlq", dlq);
    const redisReply *ini = meta->element[0], *rel = meta->element[1];
    s->present = ini->type == REDIS_REPLY_STRING && stock->type == REDIS_REPLY_STRING &&
                 parse_i64(ini->str, ini->len, &s->initial) == 0 &&
                 parse_i64(stock->str, stock->len, &s->stock) == 0;
    if (rel->type == REDIS_REPLY_STRING && parse_i64(rel->str, rel->len, &s->released_meta))
        s->released_meta = 0;
    s->dlq = dlq->integer;
    size_t nb = buyers->elements / 2, nl = ledger->elements / 2;
    s->buyers = nb ? calloc(nb, sizeof *s->buyers) : NULL;
    s->ledger = nl ? calloc(nl, sizeof *s->ledger) : NULL;
    if ((nb && !s->buyers) || (nl && !s->ledger)) return SK_ENOMEM;
    for (size_t i = 0; i < nb; i++) {
        const redisReply *k = buyers->element[2 * i], *v = buyers->element[2 * i + 1];
        struct uunits *u = &s->buyers[s->nb];
        if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING ||
            parse_u64(k->str, k->len, &u->user) || parse_i64(v->str, v->len, &u->units))
            return proto_err(r, "buyers hash: a field or value that is not a number", NULL);
        s->nb++;
    }
    if (s->nb) qsort(s->buyers, s->nb, sizeof *s->buyers, cmp_uunits);
    for (size_t i = 0; i < nl; i++) {
        const redisReply *k = ledger->element[2 * i], *v = ledger->element[2 * i + 1];
        if (parse_lentry(aid, k, v, &s->ledger[s->nl]) == 0)
            s->nl++;
        else if (keep_bad(s, k, v))
            return SK_ENOMEM;
    }
    if (s->nl) qsort(s->ledger, s->nl, sizeof *s->ledger, cmp_lentry);
    return 0;
}

/* Reads the snapshot: atomically (MULTI) for a check, or after WATCH for
 * a repair (then EXEC fails if anything changed since the WATCH). */
static int read_snap(sk_redis *r, uint64_t aid, int watch, struct snap *s)
{
    struct sk_keys k;
    sk_keys_for(&k, aid);
    const char *a_multi[] = {"MULTI"};
    const char *a_watch[] = {"WATCH", k.meta, k.stock, k.buyers, k.ledger, k.released};
    const char *a_meta[] = {"HMGET", k.meta, "initial", "released"};
    const char *a_stock[] = {"GET", k.stock};
    const char *a_buyers[] = {"HGETALL", k.buyers};
    const char *a_ledger[] = {"HGETALL", k.ledger};
    const char *a_dlq[] = {"XLEN", k.dlq};
    const char *a_exec[] = {"EXEC"};
    struct cmd cmds[] = {
        watch ? (struct cmd){6, a_watch} : (struct cmd){1, a_multi},
        {4, a_meta},
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
        rc = rep[0]->type == REDIS_REPLY_STATUS ? parse_snap(r, aid, rep + 1, s)
                                                : proto_err(r, "WATCH", rep[0]);
    } else {
        const redisReply *ex = rep[6];
        if (ex->type != REDIS_REPLY_ARRAY || ex->elements != 5)
            rc = proto_err(r, "MULTI/EXEC snapshot", ex);
        else
            rc = parse_snap(r, aid, ex->element, s);
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

struct ctx {
    sk_store *st;
    sk_redis *r;
    uint64_t aid;
    struct sk_keys k;
    int64_t now, grace;
    struct sk_reconcile_report *rep;
    struct snap s;
    struct backlog b;
    /* Candidates looked up again after the DB read (indexes into rep->drift
     * are not stable while it grows, so they are kept apart). */
    struct sk_drift *cand;
    size_t ncand, candcap;
};

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
    d->order = *o;
    return 0;
}

static int store_err(struct ctx *c, int rc)
{
    (void)c;
    return rc == SK_ENOTFOUND ? SK_EDB : rc;
}

static void user_drift(void *arg, uint64_t user, int64_t buyers, int64_t ledger)
{
    struct ctx *c = arg;
    struct sk_order o;
    memset(&o, 0, sizeof o);
    o.user_id = user;
    add_drift(c->rep, SK_DRIFT_USER_COUNT, &o,
              "user %" PRIu64 ": the buyers hash holds %" PRId64
              " unit(s), the user's unreleased ledger entries %" PRId64,
              user, buyers, ledger);
}

/* Compares one DB order with its ledger entry. */
static int compare_order(struct ctx *c, const struct sk_order *o, const struct lentry *e)
{
    struct sk_reconcile_report *rep = c->rep;
    if (o->user_id != e->user || o->quantity != e->qty)
        return add_drift(rep, SK_DRIFT_ORDER_MISMATCH, o,
                         "order %s: the DB has user %" PRIu64 ", %" PRId64
                         " unit(s); the ledger has user %" PRIu64 ", %" PRId64 " unit(s)",
                         o->order_id, o->user_id, o->quantity, e->user, e->qty);
    if (o->status == SK_ORDER_PAID && e->released)
        return add_drift(rep, SK_DRIFT_PAID_RELEASED, o,
                         "SERIOUS: order %s (user %" PRIu64 ", %" PRId64
                         " unit(s)) is paid in the DB but its units were released in Redis "
                         "(they may be sold again): an operator must settle it",
                         o->order_id, o->user_id, o->quantity);
    if (o->status == SK_ORDER_CREATED && e->released)
        return add_drift(rep, SK_DRIFT_RELEASED_NOT_CANCELLED, o,
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

/* Merges the DB orders (pages in id order) with the sorted ledger. */
static int merge_orders(struct ctx *c)
{
    struct sk_order *page = malloc(PAGE * sizeof *page);
    if (!page) return SK_ENOMEM;
    char after[SK_STORE_ORDER_ID_MAX] = "";
    size_t li = 0;
    int rc = 0;
    for (;;) {
        size_t n = 0;
        if ((rc = sk_store_orders_list(c->st, c->aid, after, PAGE, page, &n)) != 0) break;
        for (size_t i = 0; i < n && rc == 0; i++) {
            const struct sk_order *o = &page[i];
            while (li < c->s.nl && strcmp(c->s.ledger[li].oid, o->order_id) < 0)
                li++;
            if (li < c->s.nl && !strcmp(c->s.ledger[li].oid, o->order_id)) {
                c->s.ledger[li].in_db = 1;
                rc = compare_order(c, o, &c->s.ledger[li]);
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
            rc = add_drift(c->rep, SK_DRIFT_NOT_IN_LEDGER, o,
                           "order %s (user %" PRIu64 ", %" PRId64
                           " unit(s), %s) is in the DB but not in the Redis ledger",
                           o->order_id, o->user_id, o->quantity, sk_order_status_name(o->status));
        else if (c->cand[i].kind == SK_DRIFT_CANCELLED_NOT_RELEASED && present[i] == 1)
            rc = add_drift(c->rep, SK_DRIFT_CANCELLED_NOT_RELEASED, o,
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
    struct sk_reconcile_redis *rr = &c->rep->redis;
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
        int rc = add_drift(c->rep, SK_DRIFT_LOST_ORDER, &o,
                           "order %s (user %" PRIu64 ", %" PRId64
                           " unit(s)%s) is in the Redis ledger but not in the DB and not in the "
                           "stream backlog%s",
                           e->oid, e->user, e->qty, e->released ? ", released" : "",
                           c->rep->redis.dlq > 0 ? " (see the dead-letter stream)" : "");
        if (rc) return rc;
    }
    return 0;
}

static void redis_figures(struct ctx *c)
{
    struct sk_reconcile_redis *rr = &c->rep->redis;
    rr->present = c->s.present;
    rr->initial = c->s.initial;
    rr->remaining = c->s.stock;
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

/* The whole check into c->rep (no repair). */
static int check(struct ctx *c)
{
    struct sk_reconcile_report *rep = c->rep;
    int rc = read_snap(c->r, c->aid, 0, &c->s);
    if (rc) return rc;
    redis_figures(c);
    if ((rc = read_group(c->r, &c->k, &c->b, &rep->redis)) != 0) return rc;

    struct sk_activity a;
    rc = sk_store_activity_get(c->st, c->aid, &a);
    if (rc && rc != SK_ENOTFOUND) return rc;
    rep->db.present = rc == 0;
    if (!rep->db.present && !c->s.present && !c->s.nl) return SK_ENOTFOUND;
    if (rep->db.present) {
        snprintf(rep->db.state, sizeof rep->db.state, "%s", a.state);
        rep->db.initial = a.stock;
        if ((rc = sk_store_orders_count(c->st, c->aid, &rep->db.counts)) != 0) return rc;
        if ((rc = sk_store_db_stock_check(c->st, c->aid, &rep->db.stock,
                                          &rep->db.stock_expected)) != 0)
            return store_err(c, rc);
    }

    if (rep->db.present && !c->s.present) {
        int64_t orders = 0;
        for (int i = 0; i < SK_ORDER_NSTATUS; i++)
            orders += rep->db.counts.orders[i];
        /* Never preheated and nothing sold: nothing to compare. */
        if (strcmp(rep->db.state, "created") != 0 || orders > 0)
            add_drift(rep, SK_DRIFT_REDIS_MISSING, NULL,
                      "the DB activity is %s with %" PRId64
                      " order(s) but Redis has no live state for it (stock or meta missing): "
                      "re-preheat only after checking what was sold",
                      rep->db.state, orders);
    }
    if (!rep->db.present)
        add_drift(rep, SK_DRIFT_DB_MISSING, NULL,
                  "Redis has live state for the activity but the DB has no activity row");
    if (rep->db.present && rep->db.stock != rep->db.stock_expected) {
        const struct sk_order_counts *k = &rep->db.counts;
        char why[128] = "";
        if (k->stock_failures)
            snprintf(why, sizeof why,
                     " (%" PRId64 " failed conditional stock update(s) recorded, %" PRId64
                     " unit(s))",
                     k->stock_failures, k->stock_failure_units);
        add_drift(rep, SK_DRIFT_DB_STOCK, NULL,
                  "DB stock %" PRId64 " != expected %" PRId64 " = initial %" PRId64
                  " - units of orders not cancelled %" PRId64 "%s",
                  rep->db.stock, rep->db.stock_expected, rep->db.initial,
                  rep->db.initial - rep->db.stock_expected, why);
    }
    if (!c->s.present) return 0;

    if (rep->db.present && rep->db.initial != c->s.initial)
        add_drift(rep, SK_DRIFT_INITIAL_MISMATCH, NULL,
                  "Redis initial stock %" PRId64 " != DB initial stock %" PRId64, c->s.initial,
                  rep->db.initial);
    int64_t held = rep->redis.held;
    if (c->s.stock + held != c->s.initial)
        add_drift(rep, SK_DRIFT_REDIS_INVARIANT, NULL,
                  "Redis stock %" PRId64 " + units held by buyers %" PRId64 " = %" PRId64
                  " != initial %" PRId64,
                  c->s.stock, held, c->s.stock + held, c->s.initial);
    if (user_diffs(&c->s, user_drift, c) < 0) return SK_ENOMEM;
    for (size_t i = 0; i < c->s.nbad; i++)
        add_drift(rep, SK_DRIFT_ORDER_MISMATCH, NULL, "malformed ledger entry %s", c->s.bad[i]);
    if (!rep->db.present) return 0;
    if ((rc = merge_orders(c)) != 0) return rc;
    if ((rc = settle_candidates(c)) != 0) return rc;
    return find_lost(c);
}

static void ctx_free(struct ctx *c)
{
    snap_free(&c->s);
    free(c->b.p);
    free(c->cand);
    c->b.p = NULL;
    c->cand = NULL;
    c->ncand = c->candcap = 0;
}

/* ---- Repair ---------------------------------------------------------------- */

static void audit(struct ctx *c, const char *kind, const char *detail)
{
    if (sk_store_audit_add(c->st, c->now, c->aid, kind, detail) != 0)
        sk_log(SK_LOG_ERROR, "reconcile: activity %" PRIu64 ": %s done, audit row failed: %s (%s)",
               c->aid, kind, sk_store_errstr(c->st), detail);
}

/* A ledger entry to write back (from the DB order). */
struct restore {
    const struct sk_order *o;
    int released;
    int write;
};

/* Plans and applies the Redis repairs in one WATCH/MULTI/EXEC: ledger
 * entries restored from DB orders when the buyers hash proves their units
 * are held, and the stock when the buyers hash agrees with the ledger.
 * *release_after: restored entries of cancelled orders, now owed a release
 * (caller's array of the NOT_IN_LEDGER drift count, *nrel set). */
static void repair_redis(struct ctx *c, const struct sk_order **release_after, size_t *nrel)
{
    struct sk_reconcile_report *rep = c->rep;
    *nrel = 0;
    size_t nmiss = 0;
    for (size_t i = 0; i < rep->ndrift; i++)
        nmiss += rep->drift[i].kind == SK_DRIFT_NOT_IN_LEDGER;
    struct restore *rs = nmiss ? calloc(nmiss, sizeof *rs) : NULL;
    if (nmiss && !rs) {
        add_repair(rep, SK_DRIFT_NOT_IN_LEDGER, 0, "out of memory");
        return;
    }
    for (size_t i = 0, k = 0; i < rep->ndrift; i++)
        if (rep->drift[i].kind == SK_DRIFT_NOT_IN_LEDGER) rs[k++].o = &rep->drift[i].order;

    for (int attempt = 0; attempt < WATCH_ATTEMPTS; attempt++) {
        /* Lines of an attempt that EXEC then refused are dropped: the
         * next attempt plans again from fresh data. */
        size_t mark = rep->nrepairs, fmark = rep->repair_failures;
        struct snap s;
        redisReply *rep1 = NULL;
        int rc = read_snap(c->r, c->aid, 1, &s);
        if (rc) {
            add_repair(rep, SK_DRIFT_REDIS_INVARIANT, 0, "Redis repairs not attempted: %s",
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
            add_repair(rep, SK_DRIFT_NOT_IN_LEDGER, 0, "ledger repairs not attempted: %s",
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
                        add_repair(rep, SK_DRIFT_NOT_IN_LEDGER, 0,
                                   "order %s: ledger entry not restored: user %" PRIu64
                                   " holds %" PRId64 " unit(s) beyond the ledger, the "
                                   "missing orders %" PRId64 ": not provably safe",
                                   rs[j].o->order_id, u, have, need);
                    }
            }
        }
        free(lu);
        /* With the restores applied, does the buyers hash agree with the
         * ledger for every user? Only then is stock = initial - held safe. */
        int64_t held = held_units(&s), new_stock = -1;
        if (s.present && s.stock + held != s.initial) {
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
                int64_t target = s.initial - held;
                if (diffs == 0 && target >= 0 && target <= s.initial)
                    new_stock = target;
                else
                    add_repair(rep, SK_DRIFT_REDIS_INVARIANT, 0,
                               "Redis stock %" PRId64 " left alone: %s", s.stock,
                               diffs ? "the buyers hash disagrees with the ledger, so it cannot "
                                       "prove what the stock should be"
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
            add_repair(rep, SK_DRIFT_REDIS_INVARIANT, 0, "out of memory");
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
                audit(c, "repair_ledger_entry", detail);
                add_repair(rep, SK_DRIFT_NOT_IN_LEDGER, 1, "%s", detail);
                if (!rs[i].released && rs[i].o->status == SK_ORDER_CANCELLED)
                    release_after[(*nrel)++] = rs[i].o;
            }
            if (new_stock >= 0) {
                char detail[SK_STORE_AUDIT_DETAIL_MAX];
                snprintf(detail, sizeof detail,
                         "Redis stock %" PRId64 " -> %" PRId64 " (initial %" PRId64
                         " - units held by buyers %" PRId64
                         "; the buyers hash agrees with the ledger)",
                         s.stock, new_stock, s.initial, held);
                audit(c, "repair_redis_stock", detail);
                add_repair(rep, SK_DRIFT_REDIS_INVARIANT, 1, "%s", detail);
            }
        }
        free(cmds);
        free(argv);
        free(vals);
        free(replies);
        snap_free(&s);
        if (done) break;
        if (!busy) {
            add_repair(rep, SK_DRIFT_REDIS_INVARIANT, 0, "Redis repairs failed: %s",
                       rc ? c->r->errstr : "unexpected EXEC reply");
            break;
        }
        rep->nrepairs = mark;
        rep->repair_failures = fmark;
        if (attempt == WATCH_ATTEMPTS - 1)
            add_repair(rep, SK_DRIFT_REDIS_INVARIANT, 0,
                       "Redis repairs given up: the activity kept changing (a live sale?); "
                       "run reconcile again");
    }
    free(rs);
}

/* Writes a lost order back into the DB (created, or cancelled when Redis
 * released it). */
static void repair_lost(struct ctx *c, const struct sk_order *o)
{
    char detail[SK_STORE_AUDIT_DETAIL_MAX];
    snprintf(detail, sizeof detail,
             "order %s (user %" PRIu64 ", %" PRId64
             " unit(s)) was in the Redis ledger but not in the DB: restored as %s",
             o->order_id, o->user_id, o->quantity,
             o->status == SK_ORDER_CANCELLED ? "cancelled (released in Redis)" : "created");
    int rc = sk_store_order_restore(c->st, o, c->now, detail);
    if (rc == 0)
        add_repair(c->rep, SK_DRIFT_LOST_ORDER, 1, "%s", detail);
    else if (rc == SK_EEXIST)
        add_repair(c->rep, SK_DRIFT_LOST_ORDER, 1, "order %s: persisted meanwhile, nothing to do",
                   o->order_id);
    else
        add_repair(c->rep, SK_DRIFT_LOST_ORDER, 0, "order %s: not restored: %s", o->order_id,
                   sk_store_errstr(c->st));
}

/* Released in Redis, still created in the DB: cancel it there (a payment
 * must not keep units that went back on sale). */
static void repair_released_not_cancelled(struct ctx *c, const struct sk_order *o)
{
    int prev = -1;
    int rc = sk_store_order_cancel(c->st, o->order_id, c->now, &prev);
    if (rc == SK_ESTATE) {
        add_repair(c->rep, SK_DRIFT_RELEASED_NOT_CANCELLED, 0,
                   "order %s: paid meanwhile: now paid in the DB and released in Redis (serious)",
                   o->order_id);
        return;
    }
    if (rc) {
        add_repair(c->rep, SK_DRIFT_RELEASED_NOT_CANCELLED, 0, "order %s: not cancelled: %s",
                   o->order_id, sk_store_errstr(c->st));
        return;
    }
    sk_store_order_mark_released(c->st, o->order_id, c->now);
    if (prev != SK_ORDER_CREATED) {
        add_repair(c->rep, SK_DRIFT_RELEASED_NOT_CANCELLED, 1,
                   "order %s: cancelled meanwhile, nothing to do", o->order_id);
        return;
    }
    char detail[SK_STORE_AUDIT_DETAIL_MAX];
    snprintf(detail, sizeof detail,
             "order %s (user %" PRIu64 ", %" PRId64
             " unit(s)) was released in Redis but created in the DB: cancelled in the DB",
             o->order_id, o->user_id, o->quantity);
    audit(c, "repair_cancel_released", detail);
    add_repair(c->rep, SK_DRIFT_RELEASED_NOT_CANCELLED, 1, "%s", detail);
}

/* Cancelled in the DB, units still held in Redis: run the release. */
static void repair_release(struct ctx *c, const struct sk_order *o)
{
    int rrc = -1;
    int64_t given = 0;
    int rc = sk_stock_release(c->r, c->aid, o->order_id, o->user_id, o->quantity, &rrc, &given);
    if (rc < 0) {
        add_repair(c->rep, SK_DRIFT_CANCELLED_NOT_RELEASED, 0, "order %s: release failed: %s",
                   o->order_id, c->r->errstr);
        return;
    }
    if (rrc != SK_RC_RELEASED && rrc != SK_RC_ALREADY_RELEASED) {
        add_repair(c->rep, SK_DRIFT_CANCELLED_NOT_RELEASED, 0,
                   "order %s: Redis refused the release (%s)", o->order_id, sk_rc_name(rrc));
        return;
    }
    sk_store_order_mark_released(c->st, o->order_id, c->now);
    if (rrc == SK_RC_ALREADY_RELEASED) {
        add_repair(c->rep, SK_DRIFT_CANCELLED_NOT_RELEASED, 1,
                   "order %s: released meanwhile, nothing to do", o->order_id);
        return;
    }
    char detail[SK_STORE_AUDIT_DETAIL_MAX];
    snprintf(detail, sizeof detail,
             "order %s (user %" PRIu64 ", %" PRId64
             " unit(s)) was cancelled in the DB but held in Redis: released, %" PRId64
             " unit(s) back on sale",
             o->order_id, o->user_id, o->quantity, given);
    audit(c, "repair_release", detail);
    add_repair(c->rep, SK_DRIFT_CANCELLED_NOT_RELEASED, 1, "%s", detail);
}

static void repair(struct ctx *c)
{
    struct sk_reconcile_report *rep = c->rep;
    size_t nd = rep->ndrift; /* repairs never add drift entries */
    const struct sk_order **rel = nd ? calloc(nd, sizeof *rel) : NULL;
    size_t nrel = 0;
    if (nd && !rel) {
        add_repair(rep, SK_DRIFT_NOT_IN_LEDGER, 0, "out of memory");
        return;
    }
    if (rep->redis.present &&
        (rep->found[SK_DRIFT_NOT_IN_LEDGER] || rep->found[SK_DRIFT_REDIS_INVARIANT]))
        repair_redis(c, rel, &nrel);
    int db_changed = 0;
    for (size_t i = 0; i < nd && rep->db.present; i++) {
        const struct sk_drift *d = &rep->drift[i];
        if (d->kind == SK_DRIFT_LOST_ORDER) {
            repair_lost(c, &d->order);
            db_changed = 1;
        } else if (d->kind == SK_DRIFT_RELEASED_NOT_CANCELLED) {
            repair_released_not_cancelled(c, &d->order);
            db_changed = 1;
        } else if (d->kind == SK_DRIFT_CANCELLED_NOT_RELEASED) {
            repair_release(c, &d->order);
        }
    }
    for (size_t i = 0; i < nrel; i++)
        repair_release(c, rel[i]);
    free(rel);
    /* Last: the DB stock from the orders as they are now. */
    if (rep->db.present && (rep->found[SK_DRIFT_DB_STOCK] || db_changed)) {
        int64_t before = 0, after = 0;
        int rc = sk_store_db_stock_repair(c->st, c->aid, c->now, &before, &after);
        if (rc)
            add_repair(rep, SK_DRIFT_DB_STOCK, 0, "DB stock not repaired: %s",
                       sk_store_errstr(c->st));
        else if (before != after)
            add_repair(rep, SK_DRIFT_DB_STOCK, 1,
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
    struct ctx c = {.st = st, .r = r, .aid = activity_id, .rep = rep};
    sk_keys_for(&c.k, activity_id);
    c.now = o->now_ms ? o->now_ms : sk_wall_ms();
    c.grace = o->grace_ms >= 0 ? o->grace_ms : 0;
    int rc = check(&c);
    ctx_free(&c);
    if (rc) return rc;
    rep->consistent = rep->total == 0;
    if (!o->repair || rep->total == 0) return 0;
    c = (struct ctx){
        .st = st, .r = r, .aid = activity_id, .rep = rep, .now = c.now, .grace = c.grace, .k = c.k};
    repair(&c);
    /* A second check says what is left. */
    struct sk_reconcile_report after;
    memset(&after, 0, sizeof after);
    after.activity_id = activity_id;
    struct ctx c2 = {.st = st,
                     .r = r,
                     .aid = activity_id,
                     .rep = &after,
                     .now = c.now,
                     .grace = c.grace,
                     .k = c.k};
    rc = check(&c2);
    ctx_free(&c2);
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

void sk_reconcile_print(FILE *f, const struct sk_reconcile_report *rep, size_t max_lines)
{
    uint64_t id = rep->activity_id;
    const struct sk_reconcile_redis *rr = &rep->redis;
    const struct sk_reconcile_db *db = &rep->db;
    if (rr->present) {
        char und[24];
        if (rr->undelivered >= 0)
            snprintf(und, sizeof und, "%" PRId64, rr->undelivered);
        else
            snprintf(und, sizeof und, "?");
        fprintf(f,
                "activity %" PRIu64 ": redis: initial %" PRId64 ", remaining %" PRId64
                ", held %" PRId64 " by %" PRId64 " buyer(s); ledger %" PRId64 " order(s) (%" PRId64
                " units), released %" PRId64 " (%" PRId64 " units); backlog %" PRId64
                " (pending %" PRId64 ", undelivered %s, %" PRId64
                " not yet in the DB); dlq %" PRId64 "\n",
                id, rr->initial, rr->remaining, rr->held, rr->buyers, rr->admitted_orders,
                rr->admitted_units, rr->released_orders, rr->released_units, rr->backlog,
                rr->pending, und, rr->backlog_orders, rr->dlq);
    } else {
        fprintf(f, "activity %" PRIu64 ": redis: no live state\n", id);
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

json_t *sk_reconcile_json(const struct sk_reconcile_report *rep, size_t max_lines)
{
    const struct sk_reconcile_redis *rr = &rep->redis;
    const struct sk_reconcile_db *db = &rep->db;
    const struct sk_order_counts *k = &db->counts;
    json_t *o = json_pack(
        "{s:I, s:b, s:b, s:I, "
        "s:{s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:b, s:I, s:I, s:I, s:I, s:I, s:s},"
        "s:{s:b, s:s, s:I, s:I, s:I, s:{s:I, s:I, s:I}, s:{s:I, s:I, s:I}, s:I, s:I, s:I}}",
        "activity_id", (json_int_t)rep->activity_id, "consistent", rep->consistent, "repair",
        rep->repair, "drift_total", (json_int_t)rep->total, "redis", "present", rr->present,
        "initial", (json_int_t)rr->initial, "remaining", (json_int_t)rr->remaining, "held",
        (json_int_t)rr->held, "buyers", (json_int_t)rr->buyers, "admitted_orders",
        (json_int_t)rr->admitted_orders, "admitted_units", (json_int_t)rr->admitted_units,
        "released_orders", (json_int_t)rr->released_orders, "released_units",
        (json_int_t)rr->released_units, "released_meta", (json_int_t)rr->released_meta, "group",
        rr->group, "backlog", (json_int_t)rr->backlog, "pending", (json_int_t)rr->pending,
        "undelivered", (json_int_t)rr->undelivered, "backlog_orders",
        (json_int_t)rr->backlog_orders, "dlq", (json_int_t)rr->dlq, "last_delivered",
        rr->last_delivered, "db", "present", db->present, "state", db->state, "initial",
        (json_int_t)db->initial, "stock", (json_int_t)db->stock, "stock_expected",
        (json_int_t)db->stock_expected, "orders", "created",
        (json_int_t)k->orders[SK_ORDER_CREATED], "paid", (json_int_t)k->orders[SK_ORDER_PAID],
        "cancelled", (json_int_t)k->orders[SK_ORDER_CANCELLED], "units", "created",
        (json_int_t)k->units[SK_ORDER_CREATED], "paid", (json_int_t)k->units[SK_ORDER_PAID],
        "cancelled", (json_int_t)k->units[SK_ORDER_CANCELLED], "stock_failures",
        (json_int_t)k->stock_failures, "stock_failure_units", (json_int_t)k->stock_failure_units,
        "owed_recent", (json_int_t)db->owed_recent);
    if (!o) return NULL;
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
            if (e && d->order.order_id[0])
                json_object_set_new(e, "order_id", json_string(d->order.order_id));
            if (e && d->order.user_id)
                json_object_set_new(e, "user_id", json_integer((json_int_t)d->order.user_id));
            if (e) json_array_append_new(drift, e);
        }
    }
    for (size_t i = 0; i < rep->nrepairs; i++)
        json_array_append_new(
            repairs, json_pack("{s:s, s:b, s:s}", "kind", sk_drift_name(rep->repairs[i].kind), "ok",
                               rep->repairs[i].ok, "message", rep->repairs[i].text));
    return o;
}
