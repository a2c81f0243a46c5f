/* chaos_check.c - the ledger against the database and Redis (chaos_check.h). */
#include "support/chaos_check.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/codes.h"
#include "core/error.h"
#include "engine/order_id.h"
#include "support/harness.h"

void chaos_ledger_init(struct chaos_ledger *L, size_t cap)
{
    L->a = calloc(cap, sizeof *L->a);
    CHECK_MSG(L->a, "no room for a ledger of %zu answers", cap);
    L->cap = cap;
    atomic_store(&L->n, 0);
}

void chaos_ledger_free(struct chaos_ledger *L)
{
    free(L->a);
    L->a = NULL;
    L->cap = 0;
}

struct chaos_answer *chaos_ledger_add(struct chaos_ledger *L)
{
    size_t i = atomic_fetch_add(&L->n, 1);
    return i < L->cap ? &L->a[i] : NULL;
}

int chaos_ledger_full(const struct chaos_ledger *L)
{
    return atomic_load(&((struct chaos_ledger *)L)->n) > L->cap;
}

void chaos_key_text(uint64_t key, char *out, size_t cap)
{
    snprintf(out, cap, "c%016" PRIx64, key);
}

static const char *const finding_names[CF_COUNT] = {
    [CF_MISSING] = "acknowledged order missing",
    [CF_MISMATCH] = "acknowledged order id holds another order",
    [CF_ID_REUSED] = "order id answered to two keys",
    [CF_KEY_TWICE] = "an Idempotency-Key bought twice",
    [CF_PHANTOM] = "order nobody was told of",
    [CF_OVERSOLD] = "oversold",
    [CF_OVER_LIMIT] = "user over the limit",
    [CF_STOCK] = "stock not conserved",
    [CF_FENCED] = "still fenced",
    [CF_NOT_RESUMED] = "sale did not resume",
    [CF_RECONCILE] = "reconcile drift",
    [CF_BAD_ANSWER] = "answer outside the contract",
    [CF_WINDOW] = "sold outside the window on Redis's clock",
};

const char *chaos_finding_name(int f)
{
    return f >= 0 && f < CF_COUNT ? finding_names[f] : "?";
}

static void found(struct chaos_report *r, int kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void found(struct chaos_report *r, int kind, const char *fmt, ...)
{
    if (r->found[kind]++) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->example[kind], sizeof r->example[kind], fmt, ap);
    va_end(ap);
}

/* The first example of kind is about user of activity aid (its detail is
 * filled in at the end). */
static void about(struct chaos_report *r, int kind, uint64_t aid, uint64_t user)
{
    if (r->found[kind] == 1 && !r->ex_user[kind]) {
        r->ex_aid[kind] = aid;
        r->ex_user[kind] = user;
    }
}

/* ---- the database's orders ----------------------------------------------- */

struct dbo {
    char oid[SK_STORE_ORDER_ID_MAX];
    uint64_t aid, user;
    int64_t qty;
    int status;
    int announced; /* a 200 named it */
};

static int cmp_dbo(const void *a, const void *b)
{
    return strcmp(((const struct dbo *)a)->oid, ((const struct dbo *)b)->oid);
}

static int read_orders(sk_store *st, const struct chaos_activity *acts, size_t nacts,
                       struct dbo **out, size_t *nout)
{
    size_t n = 0, cap = 0;
    struct dbo *v = NULL;
    struct sk_order *page = malloc(1000 * sizeof *page);
    if (!page) return SK_ENOMEM;
    int rc = 0;
    for (size_t a = 0; a < nacts && rc == 0; a++) {
        char after[SK_STORE_ORDER_ID_MAX] = "";
        size_t got;
        do {
            if ((rc = sk_store_orders_list(st, acts[a].id, after, 1000, page, &got)) < 0) break;
            if (n + got > cap) {
                cap = (n + got) * 2;
                struct dbo *g = realloc(v, cap * sizeof *g);
                if (!g) {
                    rc = SK_ENOMEM;
                    break;
                }
                v = g;
            }
            for (size_t i = 0; i < got; i++) {
                struct dbo *d = &v[n++];
                snprintf(d->oid, sizeof d->oid, "%s", page[i].order_id);
                d->aid = page[i].activity_id;
                d->user = page[i].user_id;
                d->qty = page[i].quantity;
                d->status = page[i].status;
                d->announced = 0;
            }
            if (got) snprintf(after, sizeof after, "%s", page[got - 1].order_id);
        } while (got == 1000);
    }
    free(page);
    if (rc < 0) {
        free(v);
        return rc;
    }
    if (n) qsort(v, n, sizeof *v, cmp_dbo);
    *out = v;
    *nout = n;
    return 0;
}

static struct dbo *find_dbo(struct dbo *v, size_t n, const char *oid)
{
    struct dbo key;
    snprintf(key.oid, sizeof key.oid, "%s", oid);
    return n ? bsearch(&key, v, n, sizeof *v, cmp_dbo) : NULL;
}

/* ---- the ledger, sorted several ways -------------------------------------- */

static const struct chaos_answer *g_a; /* qsort has no argument: the array being sorted */

static int cmp_by_oid(const void *x, const void *y)
{
    const struct chaos_answer *a = &g_a[*(const size_t *)x], *b = &g_a[*(const size_t *)y];
    int c = strcmp(a->oid, b->oid);
    if (c) return c;
    return a->key < b->key ? -1 : a->key > b->key;
}

static int cmp_by_key(const void *x, const void *y)
{
    const struct chaos_answer *a = &g_a[*(const size_t *)x], *b = &g_a[*(const size_t *)y];
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    return a->aid < b->aid ? -1 : a->aid > b->aid;
}

static int cmp_by_user(const void *x, const void *y)
{
    const struct chaos_answer *a = &g_a[*(const size_t *)x], *b = &g_a[*(const size_t *)y];
    if (a->aid != b->aid) return a->aid < b->aid ? -1 : 1;
    if (a->user != b->user) return a->user < b->user ? -1 : 1;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    return strcmp(a->oid, b->oid);
}

static int cmp_pu(const void *x, const void *y)
{
    const struct dbo *a = *(const struct dbo *const *)x, *b = *(const struct dbo *const *)y;
    if (a->aid != b->aid) return a->aid < b->aid ? -1 : 1;
    if (a->user != b->user) return a->user < b->user ? -1 : 1;
    return strcmp(a->oid, b->oid);
}

static int cmp_time(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return a < b ? -1 : a > b;
}

/* What one user did in one activity, from the ledger. */
struct ustat {
    uint64_t aid;
    uint32_t user;
    long keys; /* distinct keys with an attempt that may have run */
    int doubt; /* an attempt that may have run without a definite answer */
    long ok;   /* distinct 200 order ids */
};

static int cmp_ustat(const void *x, const void *y)
{
    const struct ustat *a = x, *b = y;
    if (a->aid != b->aid) return a->aid < b->aid ? -1 : 1;
    return a->user < b->user ? -1 : a->user > b->user;
}

static int allowed(const struct chaos_answer *a, int clock_jumped)
{
    if (a->bad) return 0;
    switch (a->status) {
    case 0:
    case 200: return 1;
    case 403: return clock_jumped && (!strcmp(a->err, "not_started") || !strcmp(a->err, "ended"));
    case 409: return !strcmp(a->err, "sold_out") || !strcmp(a->err, "limit_exceeded");
    case 503:
        if (!strcmp(a->err, "unavailable") || !strcmp(a->err, "unconfirmed") ||
            !strcmp(a->err, "recovering") || !strcmp(a->err, "busy"))
            return 1;
        /* a refusal of the scripts that is a 503 (e.g. Redis out of memory) */
        for (int rc = 0; rc < SK_RC_COUNT_; rc++)
            if (sk_rc_http_status(rc) == 503 && !strcmp(a->err, sk_rc_wire(rc))) return 1;
        return 0;
    default: return 0;
    }
}

/* An attempt that may have bought without the buyer learning so. */
static int in_doubt(const struct chaos_answer *a)
{
    return a->sent && (a->status == 0 || a->status >= 500);
}

static int act_index(const struct chaos_input *in, uint64_t aid)
{
    for (size_t i = 0; i < in->nacts; i++)
        if (in->acts[i].id == aid) return (int)i;
    return -1;
}

/* The longest stretch between consecutive times t[0..n) (sorted), and
 * when it began (relative to base). */
static void longest_gap(const int64_t *t, size_t n, int64_t base, int64_t *gap, int64_t *at)
{
    *gap = 0;
    *at = -1;
    for (size_t i = 1; i < n; i++)
        if (t[i] - t[i - 1] > *gap) {
            *gap = t[i] - t[i - 1];
            *at = t[i - 1] - base;
        }
}

static int cmp_done(const void *x, const void *y)
{
    const struct chaos_answer *a = &g_a[*(const size_t *)x], *b = &g_a[*(const size_t *)y];
    return a->t_done_ms < b->t_done_ms ? -1 : a->t_done_ms > b->t_done_ms;
}

/* The answer of the attempt before x (the same key, attempt - 1), or NULL. */
static const struct chaos_answer *before(const struct chaos_answer *a, size_t n,
                                         const struct chaos_answer *x)
{
    for (size_t i = 0; i < n && x->attempt > 1; i++)
        if (a[i].key == x->key && a[i].aid == x->aid && a[i].attempt == x->attempt - 1)
            return &a[i];
    return NULL;
}

/* The missing 200s (indexes into a) as out->missing: a summary line, then
 * one line each, in the order they were answered. */
static void missing_story(const struct chaos_input *in, const struct chaos_answer *a, size_t n,
                          size_t *miss, size_t nmiss, const long *att, const long *sv, int64_t from,
                          int64_t to, struct chaos_report *out)
{
    char *d = out->missing;
    size_t cap = sizeof out->missing, o = 0;
    d[0] = 0;
    if (!nmiss) return;
    o += (size_t)snprintf(
        d + o, cap - o, "      missing: %zu answered 200 from %+.3f to %+.3f s; by attempt:", nmiss,
        (double)(from - in->start_ms) / 1000, (double)(to - in->start_ms) / 1000);
    for (int i = 1; i <= 8; i++)
        if (att[i])
            o += (size_t)snprintf(d + o, cap - o, " #%d%s %ld", i, i == 8 ? "+" : "", att[i]);
    o += (size_t)snprintf(d + o, cap - o, "; by serve:");
    for (int s = 0; s < out->nserves; s++)
        o += (size_t)snprintf(d + o, cap - o, " %s %ld", out->serve_name[s], sv[s]);
    o += (size_t)snprintf(d + o, cap - o, "\n");
    g_a = a;
    qsort(miss, nmiss, sizeof *miss, cmp_done);
    for (size_t k = 0; k < nmiss && k < 24 && o + 240 < cap; k++) {
        const struct chaos_answer *x = &a[miss[k]], *p = before(a, n, x);
        o += (size_t)snprintf(
            d + o, cap - o, "      200 at %+.3f s (sent %+.3f), %s, key %016" PRIx64 " #%d, %s",
            (double)(x->t_done_ms - in->start_ms) / 1000,
            (double)(x->t_send_ms - in->start_ms) / 1000,
            x->serve < out->nserves ? out->serve_name[x->serve] : "?", x->key, x->attempt, x->oid);
        if (p)
            o += (size_t)snprintf(d + o, cap - o, "; #%d at %+.3f s: %s %d %s", p->attempt,
                                  (double)(p->t_send_ms - in->start_ms) / 1000,
                                  p->serve < out->nserves ? out->serve_name[p->serve] : "?",
                                  p->status, p->err);
        o += (size_t)snprintf(d + o, cap - o, "\n");
    }
}

int chaos_check(const struct chaos_input *in, struct chaos_report *out)
{
    memset(out, 0, sizeof *out);
    const struct chaos_ledger *L = in->ledger;
    size_t n = atomic_load(&((struct chaos_ledger *)L)->n);
    if (n > L->cap) n = L->cap;
    const struct chaos_answer *a = L->a;
    out->answers = n;
    out->ledger_full = chaos_ledger_full(L);
    out->nacts = in->nacts < CHAOS_MAX_ACTS ? in->nacts : CHAOS_MAX_ACTS;
    out->nserves = in->nserves < CHAOS_MAX_SERVES ? in->nserves : CHAOS_MAX_SERVES;
    for (int s = 0; s < out->nserves; s++)
        snprintf(out->serve_name[s], sizeof out->serve_name[s], "%s",
                 in->serve_names ? in->serve_names[s] : "serve");
    for (size_t i = 0; i < out->nacts; i++) {
        out->act[i].id = in->acts[i].id;
        out->act[i].stock = in->acts[i].stock;
        out->act[i].limit = in->acts[i].limit;
        out->act[i].last_ok_ms = -1;
    }

    struct dbo *db = NULL;
    size_t ndb = 0;
    int rc = read_orders(in->st, in->acts, out->nacts, &db, &ndb);
    if (rc < 0) {
        snprintf(out->example[0], sizeof out->example[0], "database: %s", sk_store_errstr(in->st));
        return rc;
    }
    size_t *ix = malloc((n ? n : 1) * sizeof *ix);
    int64_t *times = malloc((n ? n : 1) * sizeof *times);
    struct ustat *us = malloc((n ? n : 1) * sizeof *us);
    CHECK(ix && times && us);

    /* answers by kind, and the contract */
    for (size_t i = 0; i < n; i++) {
        const struct chaos_answer *x = &a[i];
        int ai = act_index(in, x->aid);
        struct chaos_act_report *ar = ai >= 0 && ai < CHAOS_MAX_ACTS ? &out->act[ai] : NULL;
        if (!allowed(x, in->clock_jumped))
            found(out, CF_BAD_ANSWER, "user %" PRIu32 " activity %" PRIu64 ": %d %s%s", x->user,
                  x->aid, x->status, x->err, x->bad ? " (malformed)" : "");
        if (x->status == 200) {
            out->ok200++;
            if (ar) ar->ok200++, ar->units200 += x->qty;
            if (x->serve < out->nserves) out->serve_ok[x->serve]++;
        } else if (x->status == 409) {
            out->s409++;
            if (ar) ar->refused++;
        } else if (x->status == 503) {
            out->s503++;
            if (ar) ar->s503++;
            out->unconfirmed += !strcmp(x->err, "unconfirmed");
            out->recovering += !strcmp(x->err, "recovering");
            out->unavailable += !strcmp(x->err, "unavailable");
        } else if (x->status == 0) {
            out->no_answer++;
            if (ar) ar->no_answer++;
        } else {
            out->other++;
        }
    }

    /* every 200 in the database, as answered; one key per order id */
    size_t nok = 0, nmiss = 0;
    long miss_att[9] = {0}, miss_sv[CHAOS_MAX_SERVES] = {0};
    int64_t miss_from = 0, miss_to = 0;
    size_t *miss = malloc((n ? n : 1) * sizeof *miss);
    CHECK(miss);
    for (size_t i = 0; i < n; i++)
        if (a[i].status == 200) ix[nok++] = i;
    g_a = a;
    qsort(ix, nok, sizeof *ix, cmp_by_oid);
    for (size_t k = 0; k < nok; k++) {
        const struct chaos_answer *x = &a[ix[k]];
        if (k > 0) {
            const struct chaos_answer *p = &a[ix[k - 1]];
            if (!strcmp(p->oid, x->oid) && p->key != x->key) {
                found(out, CF_ID_REUSED,
                      "order %s answered to user %" PRIu32 " (key %016" PRIx64 ") and user %" PRIu32
                      " (key %016" PRIx64 ")",
                      x->oid, p->user, p->key, x->user, x->key);
                about(out, CF_ID_REUSED, x->aid, x->user);
            }
            if (!strcmp(p->oid, x->oid)) continue; /* the same order answered again */
        }
        struct dbo *d = find_dbo(db, ndb, x->oid);
        if (!d) {
            found(out, CF_MISSING,
                  "order %s (user %" PRIu32 ", activity %" PRIu64 ", %d unit(s), serve %d) is "
                  "not in the database",
                  x->oid, x->user, x->aid, x->qty, x->serve);
            about(out, CF_MISSING, x->aid, x->user);
            miss[nmiss++] = ix[k];
            miss_att[x->attempt < 8 ? x->attempt : 8]++;
            if (x->serve < out->nserves) miss_sv[x->serve]++;
            if (!miss_from || x->t_done_ms < miss_from) miss_from = x->t_done_ms;
            if (x->t_done_ms > miss_to) miss_to = x->t_done_ms;
            continue;
        }
        d->announced = 1;
        if (d->user != x->user || d->aid != x->aid || d->qty != x->qty) {
            found(out, CF_MISMATCH,
                  "order %s was answered to user %" PRIu32 " for %d unit(s) of %" PRIu64
                  "; the database holds user %" PRIu64 ", %" PRId64 " unit(s) of %" PRIu64,
                  x->oid, x->user, x->qty, x->aid, d->user, d->qty, d->aid);
            about(out, CF_MISMATCH, x->aid, x->user);
        } else if (d->status == SK_ORDER_CANCELLED) {
            found(out, CF_MISSING,
                  "order %s (user %" PRIu32 ", activity %" PRIu64 ", serve %d) is cancelled in "
                  "the database",
                  x->oid, x->user, x->aid, x->serve);
            about(out, CF_MISSING, x->aid, x->user);
        }
    }

    /* the window on Redis's clock: no admission on a master while its
     * clock was jumped out of every window. A 200 then may be the replay
     * of an order admitted before (a retry with the key gets its first
     * accepted answer whatever the gate says): judged only when every
     * attempt of its key was sent after the jump began. */
    if (in->njumps) {
        size_t *bk = malloc((n ? n : 1) * sizeof *bk);
        CHECK(bk);
        for (size_t i = 0; i < n; i++)
            bk[i] = i;
        g_a = a;
        qsort(bk, n, sizeof *bk, cmp_by_key);
        for (size_t j = 0; j < in->njumps; j++) {
            const struct chaos_clock_jump *cj = &in->jumps[j];
            for (size_t k = 0; k < n;) {
                size_t e = k;
                int64_t first = a[bk[k]].t_send_ms;
                while (e < n && a[bk[e]].key == a[bk[k]].key && a[bk[e]].aid == a[bk[k]].aid) {
                    if (a[bk[e]].t_send_ms < first) first = a[bk[e]].t_send_ms;
                    e++;
                }
                for (size_t i = k; i < e && first >= cj->from_ms; i++) {
                    const struct chaos_answer *x = &a[bk[i]];
                    struct sk_oid o;
                    if (x->status != 200 || x->t_done_ms > cj->to_ms) continue;
                    if (sk_oid_parse(x->oid, strlen(x->oid), &o) != 0 ||
                        strcmp(o.branch, cj->branch))
                        continue;
                    found(out, CF_WINDOW,
                          "order %s (user %" PRIu32 ", activity %" PRIu64
                          ") was admitted from %+.3f to %+.3f s by the master of branch %s, "
                          "whose clock was out of every window from %+.3f to %+.3f s",
                          x->oid, x->user, x->aid, (double)(first - in->start_ms) / 1000,
                          (double)(x->t_done_ms - in->start_ms) / 1000, cj->branch,
                          (double)(cj->from_ms - in->start_ms) / 1000,
                          (double)(cj->to_ms - in->start_ms) / 1000);
                    about(out, CF_WINDOW, x->aid, x->user);
                }
                k = e;
            }
        }
        free(bk);
    }

    /* per user and activity: keys, doubt, and one order id per key */
    for (size_t i = 0; i < n; i++)
        ix[i] = i;
    qsort(ix, n, sizeof *ix, cmp_by_user);
    size_t nus = 0;
    for (size_t k = 0; k < n;) {
        const struct chaos_answer *first = &a[ix[k]];
        struct ustat u = {.aid = first->aid, .user = first->user};
        size_t e = k;
        while (e < n && a[ix[e]].aid == u.aid && a[ix[e]].user == u.user) {
            uint64_t key = a[ix[e]].key;
            int may = 0;
            const char *oid = NULL;
            for (; e < n && a[ix[e]].aid == u.aid && a[ix[e]].user == u.user && a[ix[e]].key == key;
                 e++) {
                const struct chaos_answer *x = &a[ix[e]];
                may |= x->sent;
                u.doubt |= in_doubt(x);
                if (x->status != 200) continue;
                if (oid && strcmp(oid, x->oid)) {
                    found(out, CF_KEY_TWICE,
                          "key %016" PRIx64 " of user %" PRIu32 " was answered orders %s and %s",
                          key, u.user, oid, x->oid);
                    about(out, CF_KEY_TWICE, u.aid, u.user);
                }
                if (!oid || strcmp(oid, x->oid)) u.ok++;
                oid = x->oid;
            }
            u.keys += may;
        }
        us[nus++] = u;
        k = e;
    }

    /* the database per user and activity: limit, keys, phantoms */
    struct uu {
        uint64_t aid, user;
        int64_t orders, units;
        int64_t live; /* orders not cancelled */
    } *uu = malloc((ndb ? ndb : 1) * sizeof *uu);
    CHECK(uu);
    size_t nuu = 0;
    {
        /* sort a copy of the orders by (aid, user) */
        struct dbo **byu = malloc((ndb ? ndb : 1) * sizeof *byu);
        CHECK(byu);
        for (size_t i = 0; i < ndb; i++)
            byu[i] = &db[i];
        qsort(byu, ndb, sizeof *byu, cmp_pu);
        for (size_t i = 0; i < ndb;) {
            struct uu u = {byu[i]->aid, byu[i]->user, 0, 0, 0};
            for (; i < ndb && byu[i]->aid == u.aid && byu[i]->user == u.user; i++) {
                const struct dbo *d = byu[i];
                u.orders++;
                if (d->status != SK_ORDER_CANCELLED) {
                    u.units += d->qty;
                    u.live++;
                }
                if (!d->announced) {
                    struct ustat key = {.aid = d->aid, .user = (uint32_t)d->user};
                    const struct ustat *s =
                        nus ? bsearch(&key, us, nus, sizeof *us, cmp_ustat) : NULL;
                    if (s && s->doubt) {
                        out->maybe_orders++;
                    } else {
                        found(out, CF_PHANTOM,
                              "order %s (user %" PRIu64 ", activity %" PRIu64
                              ") was never answered 200, and its user had no attempt in doubt",
                              d->oid, d->user, d->aid);
                        about(out, CF_PHANTOM, d->aid, d->user);
                    }
                }
            }
            uu[nuu++] = u;
        }
        free(byu);
    }
    for (size_t i = 0; i < nuu; i++) {
        int ai = act_index(in, uu[i].aid);
        int64_t limit = ai >= 0 ? in->acts[ai].limit : 0;
        if (uu[i].units > limit) {
            found(out, CF_OVER_LIMIT,
                  "user %" PRIu64 " holds %" PRId64 " unit(s) of activity %" PRIu64
                  " (limit %" PRId64 ")",
                  uu[i].user, uu[i].units, uu[i].aid, limit);
            about(out, CF_OVER_LIMIT, uu[i].aid, uu[i].user);
        }
        struct ustat key = {.aid = uu[i].aid, .user = (uint32_t)uu[i].user};
        const struct ustat *s = nus ? bsearch(&key, us, nus, sizeof *us, cmp_ustat) : NULL;
        long keys = s ? s->keys : 0;
        /* a cancelled order holds nothing: a recovery refuses (cancels) the
         * one of two orders of a key that bought on each side of a split
         * brain, the one never answered 200 (a cancelled 200 is missing) */
        if (uu[i].live > keys) {
            found(out, CF_KEY_TWICE,
                  "user %" PRIu64 " holds %" PRId64 " order(s) of activity %" PRIu64
                  " (not cancelled) from %ld key(s) that may have bought",
                  uu[i].user, uu[i].live, uu[i].aid, keys);
            about(out, CF_KEY_TWICE, uu[i].aid, uu[i].user);
        }
        if (ai >= 0 && ai < CHAOS_MAX_ACTS) {
            out->act[ai].db_orders += uu[i].orders;
            out->act[ai].db_units += uu[i].units;
        }
    }
    free(uu);
    out->keys = 0;
    for (size_t i = 0; i < nus; i++)
        out->keys += (size_t)us[i].keys;

    /* stock, per activity: the database and Redis */
    for (size_t i = 0; i < out->nacts; i++) {
        struct chaos_act_report *ar = &out->act[i];
        if (ar->db_units > ar->stock)
            found(out, CF_OVERSOLD,
                  "activity %" PRIu64 ": the database holds %" PRId64 " unit(s) of %" PRId64,
                  ar->id, ar->db_units, ar->stock);
        struct sk_stock_state s;
        if ((rc = sk_stock_state(in->r, ar->id, &s)) < 0) {
            snprintf(out->example[0], sizeof out->example[0], "redis: %s", in->r->errstr);
            goto done;
        }
        ar->redis_remaining = s.remaining;
        ar->redis_held = s.held;
        if (s.remaining < 0)
            found(out, CF_OVERSOLD, "activity %" PRIu64 ": Redis stock %" PRId64, ar->id,
                  s.remaining);
        if (s.remaining + s.held + s.in_transit != s.initial || s.initial != ar->stock)
            found(out, CF_STOCK,
                  "activity %" PRIu64 ": remaining %" PRId64 " + held %" PRId64
                  " + in transit %" PRId64 " != initial %" PRId64 " (stock %" PRId64 ")",
                  ar->id, s.remaining, s.held, s.in_transit, s.initial, ar->stock);
        if (s.held != ar->db_units)
            found(out, CF_STOCK,
                  "activity %" PRIu64 ": Redis holds %" PRId64
                  " unit(s) for buyers, the database %" PRId64,
                  ar->id, s.held, ar->db_units);
        if (s.fenced)
            found(out, CF_FENCED, "activity %" PRIu64 ": fenced (%s: %s)", ar->id, s.fence,
                  s.fence_why);
    }

    /* time without a 200: per activity, per serve; the sale after the last fault */
    for (size_t i = 0; i < out->nacts; i++) {
        struct chaos_act_report *ar = &out->act[i];
        size_t m = 0;
        for (size_t k = 0; k < n; k++)
            if (a[k].status == 200 && a[k].aid == ar->id) times[m++] = a[k].t_done_ms;
        qsort(times, m, sizeof *times, cmp_time);
        longest_gap(times, m, in->start_ms, &ar->gap_ms, &ar->gap_at_ms);
        ar->last_ok_ms = m ? times[m - 1] - in->start_ms : -1;
        if (ar->redis_remaining > 0 && (!m || times[m - 1] < in->healed_ms))
            found(out, CF_NOT_RESUMED,
                  "activity %" PRIu64 ": %" PRId64 " unit(s) left and no 200 after the last fault "
                  "healed (last 200 at %+.1f s, healed at %+.1f s)",
                  ar->id, ar->redis_remaining,
                  m ? (double)(times[m - 1] - in->start_ms) / 1000 : -1.0,
                  (double)(in->healed_ms - in->start_ms) / 1000);
    }
    for (int s = 0; s < out->nserves; s++) {
        size_t m = 0;
        for (size_t k = 0; k < n; k++)
            if (a[k].status == 200 && a[k].serve == s) times[m++] = a[k].t_done_ms;
        qsort(times, m, sizeof *times, cmp_time);
        longest_gap(times, m, in->start_ms, &out->serve_gap_ms[s], &out->serve_gap_at_ms[s]);
    }

    /* reconcile, as an operator runs it */
    for (size_t i = 0; i < out->nacts && in->redis_url && in->db_spec; i++) {
        char id[24], stale[16];
        static char text[65536];
        snprintf(id, sizeof id, "%" PRIu64, out->act[i].id);
        snprintf(stale, sizeof stale, "%d", in->stale_after_s > 0 ? in->stale_after_s : 30);
        const char *args[] = {"reconcile",  "--redis", in->redis_url,   "--db", in->db_spec,
                              "--activity", id,        "--stale-after", stale,  NULL};
        int ex = sk_th_run_seckill(text, sizeof text, NULL, args);
        if (ex != 0) {
            const char *d = strstr(text, "DRIFT");
            found(out, CF_RECONCILE, "activity %s: exit %d: %.240s", id, ex, d ? d : text);
        }
    }
    missing_story(in, a, n, miss, nmiss, miss_att, miss_sv, miss_from, miss_to, out);
    /* the story of each example's user */
    for (int kind = 0; kind < CF_COUNT; kind++) {
        if (!out->ex_user[kind]) continue;
        char *d = out->detail[kind];
        size_t cap = sizeof out->detail[kind], o = 0;
        for (size_t i = 0; i < n && o + 200 < cap; i++) {
            const struct chaos_answer *x = &a[i];
            if (x->aid != out->ex_aid[kind] || x->user != out->ex_user[kind]) continue;
            o += (size_t)snprintf(d + o, cap - o,
                                  "      attempt at %+.3f s: key %016" PRIx64 " #%d, %d unit(s), "
                                  "%s: %d %s %s%s\n",
                                  (double)(x->t_send_ms - in->start_ms) / 1000, x->key, x->attempt,
                                  x->qty, x->serve < out->nserves ? out->serve_name[x->serve] : "?",
                                  x->status, x->err, x->oid, x->sent ? "" : " (not sent)");
        }
        for (size_t i = 0; i < ndb && o + 200 < cap; i++)
            if (db[i].aid == out->ex_aid[kind] && db[i].user == out->ex_user[kind])
                o += (size_t)snprintf(d + o, cap - o,
                                      "      in the database: %s, %" PRId64 " unit(s), %s%s\n",
                                      db[i].oid, db[i].qty, sk_order_status_name(db[i].status),
                                      db[i].announced ? "" : ", never answered 200");
    }
    rc = 0;
done:
    free(miss);
    free(ix);
    free(times);
    free(us);
    free(db);
    return rc;
}

int chaos_report_ok(const struct chaos_report *r)
{
    if (r->ledger_full) return 0;
    for (int k = 0; k < CF_COUNT; k++)
        if (r->found[k]) return 0;
    return 1;
}

const char *chaos_report_first(const struct chaos_report *r)
{
    static char line[400];
    line[0] = 0;
    if (r->ledger_full) snprintf(line, sizeof line, "the ledger was full: answers were dropped");
    for (int k = 0; k < CF_COUNT && !line[0]; k++)
        if (r->found[k])
            snprintf(line, sizeof line, "%s: %zu, e.g. %s", chaos_finding_name(k), r->found[k],
                     r->example[k]);
    return line;
}

void chaos_report_print(FILE *f, const struct chaos_report *r)
{
    fprintf(f,
            "    # answers %zu (keys %zu): 200 %ld, 409 %ld, 503 %ld (unconfirmed %ld, recovering "
            "%ld, unavailable %ld), no answer %ld, other %ld; orders no 200 announced (users in "
            "doubt) %ld%s\n",
            r->answers, r->keys, r->ok200, r->s409, r->s503, r->unconfirmed, r->recovering,
            r->unavailable, r->no_answer, r->other, r->maybe_orders,
            r->ledger_full ? "; LEDGER FULL: answers were dropped" : "");
    for (size_t i = 0; i < r->nacts; i++) {
        const struct chaos_act_report *a = &r->act[i];
        fprintf(f,
                "    # activity %" PRIu64 " (stock %" PRId64 ", limit %" PRId64 "): 200 %ld (%ld "
                "units), 409 %ld, 503 %ld, no answer %ld; database %" PRId64 " orders %" PRId64
                " units; Redis remaining %" PRId64 " held %" PRId64
                "; longest without a 200 %.2f s (from %+.1f s); last 200 at %+.1f s\n",
                a->id, a->stock, a->limit, a->ok200, a->units200, a->refused, a->s503, a->no_answer,
                a->db_orders, a->db_units, a->redis_remaining, a->redis_held,
                (double)a->gap_ms / 1000, (double)a->gap_at_ms / 1000,
                (double)a->last_ok_ms / 1000);
    }
    for (int s = 0; s < r->nserves; s++)
        fprintf(f, "    # %s: 200 %ld, longest without a 200 %.2f s (from %+.1f s)\n",
                r->serve_name[s], r->serve_ok[s], (double)r->serve_gap_ms[s] / 1000,
                (double)r->serve_gap_at_ms[s] / 1000);
    for (int k = 0; k < CF_COUNT; k++)
        if (r->found[k]) {
            fprintf(f, "    # FOUND %s: %zu, e.g. %s\n", chaos_finding_name(k), r->found[k],
                    r->example[k]);
            fputs(r->detail[k], f);
            if (k == CF_MISSING) fputs(r->missing, f);
        }
    if (chaos_report_ok(r)) fprintf(f, "    # every promise kept\n");
}
