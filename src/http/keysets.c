/* keysets.c - the per-process key set table (keysets.h): separate
 * chaining over a power-of-two bucket array that doubles with the table,
 * each record its own allocation (so it never moves), two use-ordered
 * lists (unconfirmed, confirmed) whose oldest idle records the tick frees,
 * and intrusive lists of the turn's open batches and the watched
 * activities. */
#include "http/keysets.h"

#include <stdlib.h>

#include "engine/activity.h"
#include "engine/keys.h"
#include "http/app.h"

/* Use order of one kind of record: newest first. */
struct lru {
    struct sk_keyset *newest, *oldest;
    size_t n;
};

struct sk_keysets {
    struct sk_keyset **buckets;
    size_t nbuckets;    /* a power of two */
    struct lru kind[2]; /* [0] unconfirmed, [1] confirmed */
    struct sk_keyset *open[SK_OPEN_LISTS], *watched;
};

enum { L_OPEN = 1 /* << list */, L_QOPEN = 2, L_WATCH = 4 };

struct sk_keysets *sk_keysets_new(void)
{
    struct sk_keysets *t = calloc(1, sizeof *t);
    if (t) t->buckets = calloc(t->nbuckets = 64, sizeof *t->buckets);
    if (t && !t->buckets) {
        free(t);
        t = NULL;
    }
    return t;
}

void sk_keysets_free(struct sk_keysets *t)
{
    if (!t) return;
    for (int k = 0; k < 2; k++)
        for (struct sk_keyset *r = t->kind[k].newest, *next; r; r = next) {
            next = r->older;
            free(r->def);
            free(r);
        }
    free(t->buckets);
    free(t);
}

static size_t bucket_of(const struct sk_keysets *t, uint64_t aid, int seg)
{
    /* Fibonacci hashing of the key: the high bits of the product mix best */
    uint64_t h = (aid * 512 + (uint64_t)(seg + 2)) * 0x9e3779b97f4a7c15ULL;
    return (size_t)(h >> 32) & (t->nbuckets - 1);
}

static void lru_unlink(struct lru *l, struct sk_keyset *r)
{
    if (r->newer)
        r->newer->older = r->older;
    else
        l->newest = r->older;
    if (r->older)
        r->older->newer = r->newer;
    else
        l->oldest = r->newer;
    r->newer = r->older = NULL;
    l->n--;
}

static void lru_push(struct lru *l, struct sk_keyset *r)
{
    r->newer = NULL;
    r->older = l->newest;
    if (l->newest)
        l->newest->newer = r;
    else
        l->oldest = r;
    l->newest = r;
    l->n++;
}

/* Doubles the buckets (the records stay where they are); on failure the
 * chains just grow longer. */
static void grow(struct sk_keysets *t)
{
    size_t n = t->nbuckets * 2;
    struct sk_keyset **b = calloc(n, sizeof *b);
    if (!b) return;
    struct sk_keyset **old = t->buckets;
    size_t on = t->nbuckets;
    t->buckets = b;
    t->nbuckets = n;
    for (size_t i = 0; i < on; i++)
        for (struct sk_keyset *r = old[i], *next; r; r = next) {
            next = r->hnext;
            size_t j = bucket_of(t, r->aid, r->seg);
            r->hnext = b[j];
            b[j] = r;
        }
    free(old);
}

struct sk_keyset *sk_app_keyset(struct sk_app *app, uint64_t aid, int seg, int create)
{
    struct sk_keysets *t = app->keysets;
    struct sk_keyset **head = &t->buckets[bucket_of(t, aid, seg)];
    for (struct sk_keyset *r = *head; r; r = r->hnext) {
        if (r->aid != aid || r->seg != seg) continue;
        lru_unlink(&t->kind[r->confirmed], r);
        if (create == SK_ACT_KNOWN) r->confirmed = 1;
        lru_push(&t->kind[r->confirmed], r);
        return r;
    }
    if (create == SK_ACT_FIND) return NULL;
    int confirmed = create == SK_ACT_KNOWN || seg != SK_SEG_NONE;
    /* the tick keeps the bounds; within a turn, room for as many again */
    size_t cap = confirmed ? SK_ACTS_MAX : SK_ACTS_UNCONFIRMED_MAX;
    if (t->kind[confirmed].n >= 2 * cap) return NULL;
    struct sk_keyset *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->aid = aid;
    r->seg = seg;
    r->confirmed = confirmed;
    r->hnext = *head;
    *head = r;
    lru_push(&t->kind[confirmed], r);
    if (t->kind[0].n + t->kind[1].n > t->nbuckets) grow(t);
    return r;
}

struct sk_keyset *sk_app_act(struct sk_app *app, uint64_t id, int create)
{
    return sk_app_keyset(app, id, SK_SEG_NONE, create);
}

void sk_keyset_opened(struct sk_app *app, struct sk_keyset *ks, int list)
{
    if (ks->listed & (L_OPEN << list)) return;
    ks->listed |= L_OPEN << list;
    ks->open_next[list] = app->keysets->open[list];
    app->keysets->open[list] = ks;
}

struct sk_keyset *sk_keysets_take_open(struct sk_app *app, int list)
{
    struct sk_keyset *l = app->keysets->open[list];
    app->keysets->open[list] = NULL;
    for (struct sk_keyset *r = l; r; r = r->open_next[list])
        r->listed &= ~(L_OPEN << list);
    return l;
}

int sk_keysets_open(const struct sk_app *app)
{
    return app->keysets->open[SK_OPEN_PURCHASE] || app->keysets->open[SK_OPEN_QUEUE];
}

void sk_keyset_watch(struct sk_app *app, struct sk_keyset *ks)
{
    struct sk_keysets *t = app->keysets;
    if (ks->listed & L_WATCH) return;
    ks->listed |= L_WATCH;
    ks->watch_prev = NULL;
    ks->watch_next = t->watched;
    if (t->watched) t->watched->watch_prev = ks;
    t->watched = ks;
}

void sk_keyset_unwatch(struct sk_app *app, struct sk_keyset *ks)
{
    if (!(ks->listed & L_WATCH)) return;
    ks->listed &= ~L_WATCH;
    if (ks->watch_prev)
        ks->watch_prev->watch_next = ks->watch_next;
    else
        app->keysets->watched = ks->watch_next;
    if (ks->watch_next) ks->watch_next->watch_prev = ks->watch_prev;
    ks->watch_prev = ks->watch_next = NULL;
}

struct sk_keyset *sk_keysets_watched(const struct sk_app *app)
{
    return app->keysets->watched;
}

/* Nothing waits on the record: it may go. */
static int idle(const struct sk_keyset *r)
{
    return r->inflight == 0 && !r->rechecking && r->flights == 0 && !r->batch && !r->qbatch &&
           !r->fill && !(r->listed & (L_OPEN | L_QOPEN));
}

static void drop(struct sk_app *app, struct sk_keyset *r)
{
    struct sk_keysets *t = app->keysets;
    struct sk_keyset **p = &t->buckets[bucket_of(t, r->aid, r->seg)];
    while (*p != r)
        p = &(*p)->hnext;
    *p = r->hnext;
    lru_unlink(&t->kind[r->confirmed], r);
    sk_keyset_unwatch(app, r);
    free(r->def);
    free(r);
}

/* Frees the oldest idle records of one kind until at most cap are left
 * (busy ones stay, however old). */
static void trim(struct sk_app *app, int kind, size_t cap)
{
    struct lru *l = &app->keysets->kind[kind];
    for (struct sk_keyset *r = l->oldest, *newer; r && l->n > cap; r = newer) {
        newer = r->newer;
        if (idle(r)) drop(app, r);
    }
}

void sk_keysets_tick(struct sk_app *app)
{
    trim(app, 0, SK_ACTS_UNCONFIRMED_MAX);
    trim(app, 1, SK_ACTS_MAX);
}
