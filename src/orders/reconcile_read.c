/* reconcile_read.c - what reconcile reads from Redis (reconcile_int.h):
 * a key set's snapshot (meta, stock, buyers, ledger, DLQ length) in one
 * after WATCH (a check confirms with an empty MULTI/EXEC), the consumer group's view of its order
 * stream (last-delivered and pending ids: an order there is still on its way to the DB), and ledger
 * look-ups of single orders. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/num.h"
#include "core/vec.h"
#include "engine/order_id.h"
#include "engine/stock.h"
#include "orders/order_worker.h"
#include "orders/reconcile_int.h"
#include "redis/reply.h"

#define RECHECK_CHUNK 200 /* order ids per HMGET when looking up again */

/* Sends n commands in one round trip and reads the n replies into rep[]
 * (the caller frees each). On a failure every rep[i] is NULL and, when the
 * replies could not all be read, the connection is dropped (a half-read
 * pipeline would answer the next command with an old reply). */
int sk_reconcile_pipeline(sk_redis *r, size_t n, const struct rec_cmd *cmds, redisReply **rep)
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

void sk_reconcile_free_replies(redisReply **rep, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (rep[i]) freeReplyObject(rep[i]);
}

int sk_reconcile_proto_err(sk_redis *r, const char *what, const redisReply *rep)
{
    snprintf(r->errstr, sizeof r->errstr, "%s: unexpected reply%s%.200s", what,
             rep && rep->type == REDIS_REPLY_ERROR ? ": " : "",
             rep && rep->type == REDIS_REPLY_ERROR ? rep->str : "");
    r->err = SK_EPROTO;
    return SK_EPROTO;
}

void sk_reconcile_snap_drop_rows(struct rec_snap *s)
{
    free(s->buyers);
    free(s->ledger);
    for (size_t i = 0; i < s->nbad; i++)
        free(s->bad[i]);
    free(s->bad);
    s->buyers = NULL;
    s->ledger = NULL;
    s->bad = NULL;
    s->nb = s->nl = s->nbad = s->bcap = s->lcap = 0;
}

void sk_reconcile_snap_free(struct rec_snap *s)
{
    sk_reconcile_snap_drop_rows(s);
    memset(s, 0, sizeof *s);
}

int sk_reconcile_cmp_lentry(const void *a, const void *b)
{
    return strcmp(((const struct rec_lentry *)a)->oid, ((const struct rec_lentry *)b)->oid);
}

int sk_reconcile_cmp_uunits(const void *a, const void *b)
{
    uint64_t x = ((const struct rec_uunits *)a)->user, y = ((const struct rec_uunits *)b)->user;
    return x < y ? -1 : x > y;
}

/* Parses one ledger field/value pair of the key set labelled label ("<ID>"
 * or "<ID>.<seg>": its order ids are "<label>-<stream id>[-<branch>]",
 * engine/order_id.h) into *e: 0, or SK_EINVAL when malformed. */
static int parse_lentry(const char *label, const redisReply *k, const redisReply *v,
                        struct rec_lentry *e)
{
    memset(e, 0, sizeof *e);
    if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING) return SK_EINVAL;
    if (k->len == 0 || k->len >= sizeof e->oid) return SK_EINVAL;
    memcpy(e->oid, k->str, k->len);
    struct sk_oid id;
    size_t ll = strlen(label);
    if (sk_oid_parse(e->oid, k->len, &id) < 0 || id.label_len != ll || memcmp(e->oid, label, ll))
        return SK_EINVAL;
    e->sid = id.sid;
    const char *s = v->str, *end = v->str + v->len;
    const char *c1 = memchr(s, ':', v->len);
    if (!c1) return SK_EINVAL;
    const char *c2 = memchr(c1 + 1, ':', (size_t)(end - c1 - 1));
    const char *qend = c2 ? c2 : end;
    if (sk_num_u64(s, (size_t)(c1 - s), &e->user)) return SK_EINVAL;
    if (sk_num_i64(c1 + 1, (size_t)(qend - c1 - 1), &e->qty) || e->qty < 1) return SK_EINVAL;
    if (c2) {
        if ((size_t)(end - c2) != 9 || memcmp(c2, ":released", 9) != 0) return SK_EINVAL;
        e->released = 1;
    }
    return 0;
}

static int keep_bad(struct rec_snap *s, const redisReply *k, const redisReply *v)
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
int64_t sk_reconcile_opt_i64(const redisReply *v)
{
    return v->type == REDIS_REPLY_STRING ? sk_reply_i64_or(v, 0) : 0;
}

/* The user of a ledger value "user:qty[:released]"; -1 when malformed. */
static int value_user(const redisReply *v, uint64_t *user)
{
    if (v->type != REDIS_REPLY_STRING) return -1;
    const char *c = memchr(v->str, ':', v->len);
    return c && sk_num_u64(v->str, (size_t)(c - v->str), user) == 0 ? 0 : -1;
}

struct slice_arg {
    sk_redis *r;
    const char *label;
    uint64_t nslices, slice;
    struct rec_snap *s;
};

static int slice_buyer(void *arg, const redisReply *k, const redisReply *v)
{
    struct slice_arg *a = arg;
    struct rec_snap *s = a->s;
    struct rec_uunits u;
    if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING ||
        sk_num_u64(k->str, k->len, &u.user) || sk_num_i64(v->str, v->len, &u.units))
        return sk_reconcile_proto_err(a->r, "buyers hash: a field or value that is not a number",
                                      NULL);
    if (u.user % a->nslices != a->slice) return 0;
    if (SK_VEC_RESERVE(s->buyers, s->bcap, s->nb + 1, 256)) return SK_ENOMEM;
    s->buyers[s->nb++] = u;
    return 0;
}

static int slice_ledger(void *arg, const redisReply *k, const redisReply *v)
{
    struct slice_arg *a = arg;
    struct rec_snap *s = a->s;
    uint64_t user;
    int ok = value_user(v, &user) == 0;
    /* malformed entries are reported by slice 0 */
    if ((ok ? user % a->nslices : 0) != a->slice) return 0;
    if (SK_VEC_RESERVE(s->ledger, s->lcap, s->nl + 1, 256)) return SK_ENOMEM;
    if (ok && parse_lentry(a->label, k, v, &s->ledger[s->nl]) == 0) {
        s->nl++;
        return 0;
    }
    return keep_bad(s, k, v);
}

/* Each buyer and each ledger entry once, sorted (HSCAN may return a field
 * twice: a rehash during the scan). */
static void sort_rows(struct rec_snap *s)
{
    if (s->nb) qsort(s->buyers, s->nb, sizeof *s->buyers, sk_reconcile_cmp_uunits);
    size_t m = 0;
    for (size_t i = 0; i < s->nb; i++)
        if (!m || s->buyers[m - 1].user != s->buyers[i].user) s->buyers[m++] = s->buyers[i];
    s->nb = m;
    if (s->nl) qsort(s->ledger, s->nl, sizeof *s->ledger, sk_reconcile_cmp_lentry);
    m = 0;
    for (size_t i = 0; i < s->nl; i++)
        if (!m || strcmp(s->ledger[m - 1].oid, s->ledger[i].oid)) s->ledger[m++] = s->ledger[i];
    s->nl = m;
}

/* Fills s from the replies of HMGET meta (M_SNAP of script_pos.def), GET
 * stock, HGETALL buyers, HGETALL ledger, XLEN dlq. */
static int parse_snap(sk_redis *r, const char *label, redisReply *const *rep, struct rec_snap *s)
{
    memset(s, 0, sizeof *s);
    const redisReply *meta = rep[0], *stock = rep[1], *buyers = rep[2], *ledger = rep[3],
                     *dlq = rep[4];
    if (meta->type != REDIS_REPLY_ARRAY || meta->elements != SK_M_SNAP_N)
        return sk_reconcile_proto_err(r, "HMGET", meta);
    if (stock->type != REDIS_REPLY_STRING && stock->type != REDIS_REPLY_NIL)
        return sk_reconcile_proto_err(r, "GET stock", stock);
    if (buyers->type != REDIS_REPLY_ARRAY || buyers->elements % 2)
        return sk_reconcile_proto_err(r, "HGETALL buyers", buyers);
    if (ledger->type != REDIS_REPLY_ARRAY || ledger->elements % 2)
        return sk_reconcile_proto_err(r, "HGETALL ledger", ledger);
    if (dlq->type != REDIS_REPLY_INTEGER) return sk_reconcile_proto_err(r, "XLEN dlq", dlq);
    redisReply **e = meta->element;
    const redisReply *ini = e[SK_M_SNAP_INITIAL], *rel = e[SK_M_SNAP_RELEASED];
    s->present = ini->type == REDIS_REPLY_STRING && stock->type == REDIS_REPLY_STRING &&
                 sk_num_i64(ini->str, ini->len, &s->initial) == 0 &&
                 sk_num_i64(stock->str, stock->len, &s->stock) == 0;
    s->released_meta = sk_reconcile_opt_i64(rel);
    s->xin = sk_reconcile_opt_i64(e[SK_M_SNAP_XIN]);
    s->xout = sk_reconcile_opt_i64(e[SK_M_SNAP_XOUT]);
    const redisReply *fe = e[SK_M_SNAP_FENCE], *fw = e[SK_M_SNAP_FENCE_WHY];
    if (fe->type == REDIS_REPLY_STRING)
        snprintf(s->fence, sizeof s->fence, "%.*s", (int)fe->len, fe->str);
    if (fw->type == REDIS_REPLY_STRING)
        snprintf(s->fence_why, sizeof s->fence_why, "%.*s", (int)fw->len, fw->str);
    s->oversold = sk_reconcile_opt_i64(e[SK_M_SNAP_OVERSOLD]);
    s->dlq = dlq->integer;
    /* the rows as a slice of one reads them (every user in it) */
    struct slice_arg a = {r, label, 1, 0, s};
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < buyers->elements; i += 2)
        rc = slice_buyer(&a, buyers->element[i], buyers->element[i + 1]);
    for (size_t i = 0; rc == 0 && i < ledger->elements; i += 2)
        rc = slice_ledger(&a, ledger->element[i], ledger->element[i + 1]);
    if (rc == 0) sort_rows(s);
    return rc;
}

/* Reads the snapshot of one key set (the activity's, or one segment's: one
 * slot either way), after WATCH: for a repair the WATCH stays (its EXEC
 * fails if anything changed since); for a check an empty MULTI/EXEC after
 * the reads says whether they saw one state (nil: something changed
 * between them, read again). Not the reads inside MULTI: Redis refuses
 * every command queued in a transaction while it is out of memory
 * (maxmemory), and reconcile is wanted most then; reads alone it answers. */
#define SNAP_TRIES 5
int sk_reconcile_read_snap(sk_redis *r, const struct sk_keys *k, int watch, struct rec_snap *s)
{
    const char *a_watch[] = {"WATCH", k->meta, k->stock, k->buyers, k->ledger, k->released};
    const char *a_meta[] = {"HMGET", k->meta, SK_M_SNAP_FIELDS};
    const char *a_stock[] = {"GET", k->stock};
    const char *a_buyers[] = {"HGETALL", k->buyers};
    const char *a_ledger[] = {"HGETALL", k->ledger};
    const char *a_dlq[] = {"XLEN", k->dlq};
    const char *a_multi[] = {"MULTI"};
    const char *a_exec[] = {"EXEC"};
    struct rec_cmd cmds[] = {
        {6, a_watch},  {2 + SK_M_SNAP_N, a_meta},
        {2, a_stock},  {2, a_buyers},
        {2, a_ledger}, {2, a_dlq},
        {1, a_multi},  {1, a_exec},
    };
    size_t n = watch ? 6 : 8;
    for (int tries = 1;; tries++) {
        redisReply *rep[8];
        int rc = sk_reconcile_pipeline(r, n, cmds, rep);
        if (rc) return rc;
        int again = 0;
        if (rep[0]->type != REDIS_REPLY_STATUS) {
            rc = sk_reconcile_proto_err(r, "WATCH", rep[0]);
        } else if (!watch && rep[7]->type == REDIS_REPLY_NIL && tries < SNAP_TRIES) {
            again = 1; /* written between the reads */
        } else if (!watch && rep[7]->type != REDIS_REPLY_ARRAY) {
            rc = sk_reconcile_proto_err(r, "snapshot (WATCH, reads, MULTI/EXEC)", rep[7]);
        } else {
            rc = parse_snap(r, k->label, rep + 1, s);
        }
        sk_reconcile_free_replies(rep, n);
        if (again) continue;
        if (rc) sk_reconcile_snap_free(s);
        return rc;
    }
}

/* Non-released ledger units per user, sorted by user (allocated; *n). */
int sk_reconcile_ledger_users(const struct rec_lentry *l, size_t nl, struct rec_uunits **out,
                              size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!nl) return 0;
    struct rec_uunits *u = malloc(nl * sizeof *u);
    if (!u) return SK_ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < nl; i++)
        if (!l[i].released) u[k++] = (struct rec_uunits){l[i].user, l[i].qty};
    if (k) qsort(u, k, sizeof *u, sk_reconcile_cmp_uunits);
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
long sk_reconcile_user_diffs(const struct rec_snap *s,
                             void (*fn)(void *arg, uint64_t user, int64_t buyers, int64_t ledger),
                             void *arg)
{
    struct rec_uunits *lu;
    size_t nlu;
    if (sk_reconcile_ledger_users(s->ledger, s->nl, &lu, &nlu)) return SK_ENOMEM;
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

int64_t sk_reconcile_held_units(const struct rec_snap *s)
{
    int64_t h = 0;
    for (size_t i = 0; i < s->nb; i++)
        h += s->buyers[i].units;
    return h;
}

/* Our group's entry of an XINFO GROUPS reply (an array), when it has one. */
static void group_info(const redisReply *rep, struct rec_backlog *b)
{
    struct sk_reply_xgroup g;
    sk_reply_xgroup(rep, SK_WORKER_GROUP, &g);
    if (!g.found) return;
    b->group = 1;
    b->pending = g.pending < 0 ? 0 : g.pending;
    b->undelivered = g.lag;
    b->last = (struct sk_sid){0, 0};
    sk_sid_parse(g.last, strlen(g.last), &b->last);
}

/* The group's counters (XINFO GROUPS), and the stream's length when there
 * is no group yet (XLEN). */
static int read_group_info(sk_redis *r, const struct sk_keys *k, struct rec_backlog *b)
{
    redisReply *rep;
    int rc = sk_redis_cmd(r, &rep, "XINFO GROUPS %s", k->orders);
    if (rc) return rc;
    if (rep->type == REDIS_REPLY_ERROR) {
        /* No stream at all: nothing admitted, or the key is gone. */
        int nokey = strstr(rep->str, "no such key") != NULL;
        freeReplyObject(rep);
        if (!nokey) return sk_reconcile_proto_err(r, "XINFO GROUPS", NULL);
        /* Nothing can be waiting in a stream that does not exist. */
        b->undelivered = 0;
        b->last = (struct sk_sid){UINT64_MAX, UINT64_MAX};
    } else if (rep->type == REDIS_REPLY_ARRAY) {
        group_info(rep, b);
        freeReplyObject(rep);
    } else {
        freeReplyObject(rep);
        return sk_reconcile_proto_err(r, "XINFO GROUPS", NULL);
    }
    if (!b->group && b->undelivered != 0) {
        /* No group yet: every entry of the stream is undelivered. */
        if ((rc = sk_redis_cmd(r, &rep, "XLEN %s", k->orders))) return rc;
        b->undelivered = rep->type == REDIS_REPLY_INTEGER ? rep->integer : -1;
        freeReplyObject(rep);
    }
    return 0;
}

/* The pending ids, page by page (exclusive start after the first). */
static int read_pending(sk_redis *r, const struct sk_keys *k, struct rec_backlog *b)
{
    char from[48] = "-";
    while (b->group && b->pending > 0) {
        redisReply *rep;
        int rc = sk_redis_cmd(r, &rep, "XPENDING %s %s %s + %d", k->orders, SK_WORKER_GROUP, from,
                              SK_RECONCILE_PAGE);
        if (rc) return rc;
        if (rep->type != REDIS_REPLY_ARRAY) {
            freeReplyObject(rep);
            return sk_reconcile_proto_err(r, "XPENDING", NULL);
        }
        size_t got = rep->elements;
        for (size_t i = 0; i < got; i++) {
            const redisReply *e = rep->element[i];
            if (e->type != REDIS_REPLY_ARRAY || e->elements < 1 ||
                e->element[0]->type != REDIS_REPLY_STRING)
                continue;
            if (SK_VEC_RESERVE(b->p, b->pcap, b->np + 1, 64)) {
                freeReplyObject(rep);
                return SK_ENOMEM;
            }
            if (sk_sid_parse(e->element[0]->str, e->element[0]->len, &b->p[b->np]) == 0) b->np++;
            snprintf(from, sizeof from, "(%s", e->element[0]->str);
        }
        freeReplyObject(rep);
        if (got < SK_RECONCILE_PAGE) break;
    }
    return 0;
}

int sk_reconcile_read_group(sk_redis *r, const struct sk_keys *k, struct rec_backlog *b,
                            struct sk_reconcile_redis *out)
{
    memset(b, 0, sizeof *b);
    b->undelivered = -1;
    int rc = read_group_info(r, k, b);
    if (rc == 0) rc = read_pending(r, k, b);
    if (rc) return rc;
    out->group = b->group;
    out->pending = b->pending;
    out->undelivered = b->undelivered;
    out->backlog = b->pending + (b->undelivered > 0 ? b->undelivered : 0);
    if (b->last.ms == UINT64_MAX)
        snprintf(out->last_delivered, sizeof out->last_delivered, "none (no stream)");
    else
        snprintf(out->last_delivered, sizeof out->last_delivered, "%" PRIu64 "-%" PRIu64,
                 b->last.ms, b->last.seq);
    return 0;
}

/* Is the order with stream id sid still on its way to the DB? */
int sk_reconcile_in_backlog(const struct rec_backlog *b, struct sk_sid sid)
{
    if (sk_sid_cmp(sid, b->last) > 0) return 1; /* never delivered */
    size_t lo = 0, hi = b->np;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = sk_sid_cmp(b->p[mid], sid);
        if (c == 0) return 1;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

/* HMGET of m <= RECHECK_CHUNK order ids in the ledger of k, the i-th at
 * ids + i * stride (inside the caller's orders or drift): *rep an array of
 * m values (the caller frees it). */
static int ledger_hmget(sk_redis *r, const struct sk_keys *k, const char *ids, size_t stride,
                        size_t m, redisReply **rep)
{
    const char *argv[2 + RECHECK_CHUNK];
    argv[0] = "HMGET";
    argv[1] = k->ledger;
    for (size_t i = 0; i < m; i++)
        argv[2 + i] = ids + i * stride;
    int rc = sk_redis_command(r, rep, (int)(2 + m), argv, NULL);
    if (rc) return rc;
    if ((*rep)->type != REDIS_REPLY_ARRAY || (*rep)->elements != m) {
        freeReplyObject(*rep);
        *rep = NULL;
        return sk_reconcile_proto_err(r, "HMGET ledger", NULL);
    }
    return 0;
}

int sk_reconcile_ledger_lookup(sk_redis *r, const struct sk_keys *k, const char *ids, size_t stride,
                               size_t n, int *present)
{
    for (size_t at = 0; at < n; at += RECHECK_CHUNK) {
        size_t m = n - at < RECHECK_CHUNK ? n - at : RECHECK_CHUNK;
        redisReply *rep;
        int rc = ledger_hmget(r, k, ids + at * stride, stride, m, &rep);
        if (rc) return rc;
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

/* ---- Reading in slices (a sale bigger than a chunk) ------------------------ */

#define SCAN_COUNT 1000 /* fields per HSCAN call: the reply held at once */

int sk_reconcile_read_head(sk_redis *r, const struct sk_keys *k, struct rec_snap *s)
{
    struct sk_stock_state st;
    int rc = sk_stock_state_keys(r, k, &st);
    if (rc) return rc;
    s->present = st.exists;
    s->initial = st.initial;
    s->stock = st.remaining;
    s->released_meta = st.released;
    s->dlq = st.dlq;
    s->xin = st.xin;
    s->xout = st.xout;
    snprintf(s->fence, sizeof s->fence, "%s", st.fence);
    snprintf(s->fence_why, sizeof s->fence_why, "%s", st.fence_why);
    s->oversold = st.oversold;
    s->held = st.held;
    s->nbuyers = st.buyers;
    redisReply *rep;
    if ((rc = sk_redis_cmd(r, &rep, "HLEN %s", k->ledger))) return rc;
    if (rep->type != REDIS_REPLY_INTEGER) rc = sk_reconcile_proto_err(r, "HLEN ledger", rep);
    s->ledger_len = rc ? 0 : rep->integer;
    freeReplyObject(rep);
    return rc;
}

int sk_reconcile_hscan(sk_redis *r, const char *key, const char *what,
                       int (*fn)(void *arg, const redisReply *k, const redisReply *v), void *arg)
{
    char cursor[32] = "0";
    do {
        redisReply *rep;
        int rc = sk_redis_cmd(r, &rep, "HSCAN %s %s COUNT %d", key, cursor, SCAN_COUNT);
        if (rc) return rc;
        if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
            rep->element[0]->type != REDIS_REPLY_STRING ||
            rep->element[1]->type != REDIS_REPLY_ARRAY || rep->element[1]->elements % 2 ||
            rep->element[0]->len >= sizeof cursor) {
            rc = what
                     ? sk_reconcile_proto_err(r, what, rep)
                     : sk_errf(r->errstr, sizeof r->errstr, r->err = SK_EPROTO, "unexpected reply");
            freeReplyObject(rep);
            return rc;
        }
        memcpy(cursor, rep->element[0]->str, rep->element[0]->len + 1);
        const redisReply *f = rep->element[1];
        for (size_t i = 0; rc == 0 && i < f->elements; i += 2)
            rc = fn(arg, f->element[i], f->element[i + 1]);
        freeReplyObject(rep);
        if (rc) return rc;
    } while (strcmp(cursor, "0") != 0);
    return 0;
}

int sk_reconcile_read_slice(sk_redis *r, const struct sk_keys *k, int nslices, int slice,
                            struct rec_snap *s)
{
    sk_reconcile_snap_drop_rows(s);
    struct slice_arg a = {r, k->label, (uint64_t)nslices, (uint64_t)slice, s};
    /* the buyers before the ledger: every admission counted in a buyer's
     * figure has its ledger entry by then (one script writes both) */
    int rc = sk_reconcile_hscan(r, k->buyers, "HSCAN buyers", slice_buyer, &a);
    if (rc == 0) rc = sk_reconcile_hscan(r, k->ledger, "HSCAN ledger", slice_ledger, &a);
    if (rc) {
        sk_reconcile_snap_drop_rows(s);
        return rc;
    }
    sort_rows(s);
    return 0;
}

int sk_reconcile_ledger_fetch(sk_redis *r, const struct sk_keys *k, const struct sk_order *o,
                              size_t n, struct rec_snap *s)
{
    sk_reconcile_snap_drop_rows(s);
    if (n && !(s->ledger = calloc(n, sizeof *s->ledger))) return SK_ENOMEM;
    s->lcap = n;
    for (size_t at = 0; at < n; at += RECHECK_CHUNK) {
        size_t m = n - at < RECHECK_CHUNK ? n - at : RECHECK_CHUNK;
        redisReply *rep;
        int rc = ledger_hmget(r, k, o[at].order_id, sizeof *o, m, &rep);
        if (rc) return rc;
        for (size_t i = 0; i < m; i++) {
            const redisReply *v = rep->element[i];
            redisReply key = {.type = REDIS_REPLY_STRING,
                              .str = (char *)o[at + i].order_id,
                              .len = strlen(o[at + i].order_id)};
            /* absent or malformed: looked up again as not in the ledger */
            if (v->type == REDIS_REPLY_STRING &&
                parse_lentry(k->label, &key, v, &s->ledger[s->nl]) == 0)
                s->nl++;
        }
        freeReplyObject(rep);
    }
    if (s->nl) qsort(s->ledger, s->nl, sizeof *s->ledger, sk_reconcile_cmp_lentry);
    return 0;
}

/* Units of the unreleased entries among the ledger values of one HMGET. */
static int64_t unreleased_units(const redisReply *vals, size_t from, size_t n)
{
    int64_t units = 0;
    for (size_t i = from; i < from + n; i++) {
        const redisReply *v = vals->element[i];
        int64_t q;
        const char *c1 = v->type == REDIS_REPLY_STRING ? memchr(v->str, ':', v->len) : NULL;
        if (!c1) continue;
        const char *c2 = memchr(c1 + 1, ':', (size_t)(v->str + v->len - c1 - 1));
        if (c2) continue; /* released (or malformed: reported as such) */
        if (sk_num_i64(c1 + 1, (size_t)(v->str + v->len - c1 - 1), &q) == 0) units += q;
    }
    return units;
}

int sk_reconcile_verify_users(sk_redis *r, const struct sk_keys *k, const struct rec_snap *s,
                              struct rec_udiff *d, size_t n)
{
    for (size_t j = 0; j < n; j++)
        d[j].confirmed = 0;
    /* the oids of each candidate, in the order of d[] */
    size_t noid = 0;
    for (size_t i = 0; i < s->nl; i++)
        for (size_t j = 0; j < n; j++)
            if (s->ledger[i].user == d[j].user) noid++;
    const char **ua = malloc((n + 2) * sizeof *ua);
    const char **la = malloc((noid + 3) * sizeof *la); /* + a field that cannot exist */
    char(*unum)[24] = malloc((n ? n : 1) * sizeof *unum);
    int rc = !ua || !la || !unum ? SK_ENOMEM : 0;
    if (rc == 0) {
        ua[0] = "HMGET";
        ua[1] = k->buyers;
        la[0] = "HMGET";
        la[1] = k->ledger;
        size_t at = 2;
        for (size_t j = 0; j < n; j++) {
            snprintf(unum[j], sizeof unum[j], "%" PRIu64, d[j].user);
            ua[2 + j] = unum[j];
            for (size_t i = 0; i < s->nl; i++)
                if (s->ledger[i].user == d[j].user) la[at++] = s->ledger[i].oid;
        }
    }
    for (int tries = 0; rc == 0 && tries < SNAP_TRIES; tries++) {
        const char *a_watch[] = {"WATCH", k->buyers, k->ledger};
        const char *a_multi[] = {"MULTI"}, *a_exec[] = {"EXEC"};
        struct rec_cmd cmds[] = {
            {3, a_watch}, {(int)(n + 2), ua}, {(int)(noid + 2), la}, {1, a_multi}, {1, a_exec}};
        /* HMGET needs a field: a candidate without ledger entries reads one
         * that cannot exist */
        if (noid == 0) {
            la[2] = "-";
            cmds[2].argc = 3;
        }
        redisReply *rep[5];
        if ((rc = sk_reconcile_pipeline(r, 5, cmds, rep)) != 0) break;
        if (rep[4]->type == REDIS_REPLY_NIL) { /* written meanwhile: again */
            sk_reconcile_free_replies(rep, 5);
            continue;
        }
        if (rep[1]->type != REDIS_REPLY_ARRAY || rep[1]->elements != n ||
            rep[2]->type != REDIS_REPLY_ARRAY || rep[2]->elements != (noid ? noid : 1) ||
            rep[4]->type != REDIS_REPLY_ARRAY) {
            rc = sk_reconcile_proto_err(r, "user check (WATCH, HMGET, MULTI/EXEC)", rep[4]);
            sk_reconcile_free_replies(rep, 5);
            break;
        }
        for (size_t j = 0, first = 0; j < n; j++) {
            size_t cnt = 0; /* user j's entries, in la[] as above */
            for (size_t i = 0; i < s->nl; i++)
                cnt += s->ledger[i].user == d[j].user;
            const redisReply *b = rep[1]->element[j];
            int64_t b2 = b->type == REDIS_REPLY_STRING ? sk_reply_i64_or(b, 0) : 0;
            int64_t l2 = unreleased_units(rep[2], first, cnt);
            first += cnt;
            /* a purchase or release of the user since the slice was read
             * changes one of them: judged on the next pass */
            d[j].confirmed = b2 != l2 && b2 == d[j].buyers && l2 == d[j].ledger;
        }
        sk_reconcile_free_replies(rep, 5);
        break;
    }
    free(ua);
    free(la);
    free(unum);
    return rc;
}
