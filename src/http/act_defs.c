/* act_defs.c - the activity definitions cache of an HTTP process
 * (act_defs.h): known definitions in a bounded array (their ids in a
 * parallel array, so a lookup scans 8 bytes per entry), unknown ids in a
 * fixed direct-mapped table, and reads in flight with their waiters. */
#include "http/act_defs.h"

#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/vec.h"
#include "http/app.h"
#include "http/store_call.h"

struct known {
    struct sk_activity a;
    int64_t fetched_ms;
};

struct unknown {
    uint64_t id; /* 0: free */
    int64_t until_ms;
};

struct fill;

/* A lookup waiting for a read. */
struct waiter {
    h2o_timeout_entry_t deadline; /* on app->db_deadline */
    struct sk_app *app;
    struct fill *f;
    sk_act_defs_cb cb;
    void *arg;
    struct waiter *prev, *next;
};

/* One store read of an id, shared by its waiters. */
struct fill {
    struct sk_app *app;
    struct sk_act_defs *d; /* NULL once the cache was freed */
    uint64_t id;
    int stale; /* forgotten or replaced meanwhile: do not cache the answer */
    struct waiter *waiters;
    struct sk_activity a; /* written by the pool thread, read in fill_done */
    struct fill *prev, *next;
};

struct sk_act_defs {
    uint64_t *ids; /* ids[i] == known[i].a.id */
    struct known *known;
    size_t n, cap_ids, cap_known;
    struct unknown unknown[SK_ACT_DEFS_UNKNOWN_SLOTS];
    struct fill *fills;
    size_t nfills;
};

struct sk_act_defs *sk_act_defs_new(void)
{
    return calloc(1, sizeof(struct sk_act_defs));
}

static struct known *find_known(struct sk_act_defs *d, uint64_t id)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->ids[i] == id) return &d->known[i];
    return NULL;
}

static struct unknown *slot_of(struct sk_act_defs *d, uint64_t id)
{
    /* Fibonacci hashing: consecutive ids spread over the slots */
    return &d->unknown[(id * 0x9E3779B97F4A7C15ULL) >> 54];
}
_Static_assert(SK_ACT_DEFS_UNKNOWN_SLOTS == 1 << 10, "slot_of takes the top 10 bits");

static void drop_known(struct sk_act_defs *d, size_t i)
{
    d->n--;
    d->ids[i] = d->ids[d->n];
    d->known[i] = d->known[d->n];
}

static void put_known(struct sk_act_defs *d, const struct sk_activity *a, int64_t now)
{
    struct known *k = find_known(d, a->id);
    if (!k) {
        if (d->n >= SK_ACT_DEFS_MAX) { /* the one read longest ago goes */
            size_t old = 0;
            for (size_t i = 1; i < d->n; i++)
                if (d->known[i].fetched_ms < d->known[old].fetched_ms) old = i;
            drop_known(d, old);
        }
        if (SK_VEC_RESERVE(d->ids, d->cap_ids, d->n + 1, 16) ||
            SK_VEC_RESERVE(d->known, d->cap_known, d->n + 1, 16))
            return; /* out of memory: simply not cached */
        d->ids[d->n] = a->id;
        k = &d->known[d->n++];
    }
    k->a = *a;
    k->fetched_ms = now;
    struct unknown *u = slot_of(d, a->id);
    if (u->id == a->id) u->id = 0;
}

static void put_unknown(struct sk_act_defs *d, uint64_t id, int64_t now)
{
    struct known *k = find_known(d, id);
    if (k) drop_known(d, (size_t)(k - d->known)); /* deleted since */
    struct unknown *u = slot_of(d, id);
    u->id = id; /* a colliding id is simply forgotten: the table stays fixed */
    u->until_ms = now + SK_ACT_DEFS_UNKNOWN_TTL_MS;
}

/* The answer for a failed or late read: an expired known entry if there
 * is one, else the failure. */
static void answer_failure(struct sk_app *app, struct sk_act_defs *d, uint64_t id, int rc,
                           sk_act_defs_cb cb, void *arg)
{
    struct known *k = d ? find_known(d, id) : NULL;
    if (k) {
        struct sk_activity a = k->a; /* cb may change the cache */
        cb(app, arg, 0, &a);
        return;
    }
    cb(app, arg, rc, NULL);
}

static int fill_run(sk_store *st, void *arg)
{
    struct fill *f = arg;
    return sk_store_activity_get(st, f->id, &f->a);
}

static void unlink_fill(struct fill *f)
{
    struct sk_act_defs *d = f->d;
    if (!d) return;
    if (f->prev)
        f->prev->next = f->next;
    else
        d->fills = f->next;
    if (f->next) f->next->prev = f->prev;
    f->prev = f->next = NULL;
    d->nfills--;
}

static void fill_done(void *arg, int rc)
{
    struct fill *f = arg;
    struct sk_app *app = f->app;
    struct sk_act_defs *d = f->d;
    unlink_fill(f);
    if (d && !f->stale) {
        if (rc == 0)
            put_known(d, &f->a, sk_mono_ms());
        else if (rc == SK_ENOTFOUND)
            put_unknown(d, f->id, sk_mono_ms());
    }
    /* the waiters' callbacks may use the cache: the list is ours now */
    struct waiter *w = f->waiters;
    f->waiters = NULL;
    while (w) {
        struct waiter *next = w->next;
        if (h2o_timeout_is_linked(&w->deadline)) h2o_timeout_unlink(&w->deadline);
        if (rc == 0 || rc == SK_ENOTFOUND)
            w->cb(app, w->arg, rc, rc == 0 ? &f->a : NULL);
        else
            answer_failure(app, d, f->id, rc, w->cb, w->arg);
        free(w);
        w = next;
    }
    free(f);
}

static void unlink_waiter(struct waiter *w)
{
    if (w->prev)
        w->prev->next = w->next;
    else
        w->f->waiters = w->next;
    if (w->next) w->next->prev = w->prev;
}

/* A waiter's deadline: it answers without the read, which goes on and
 * fills the cache when it comes. */
static void on_waiter_deadline(h2o_timeout_entry_t *entry)
{
    struct waiter *w = (struct waiter *)((char *)entry - offsetof(struct waiter, deadline));
    unlink_waiter(w);
    answer_failure(w->app, w->f->d, w->f->id, SK_ETIMEDOUT, w->cb, w->arg);
    free(w);
}

static struct fill *start_fill(struct sk_app *app, struct sk_act_defs *d, uint64_t id, int *rc)
{
    struct fill *f = calloc(1, sizeof *f);
    if (!f) {
        *rc = SK_ENOMEM;
        return NULL;
    }
    f->app = app;
    f->d = d;
    f->id = id;
    *rc = sk_store_bg(app, sk_store_deadline(app), fill_run, fill_done, f);
    if (*rc < 0) {
        free(f);
        return NULL;
    }
    f->next = d->fills;
    if (d->fills) d->fills->prev = f;
    d->fills = f;
    d->nfills++;
    return f;
}

void sk_act_defs_lookup(struct sk_app *app, uint64_t id, sk_act_defs_cb cb, void *arg)
{
    struct sk_act_defs *d = app->defs;
    if (id == 0 || id > SK_ACTIVITY_ID_MAX) { /* can never be created */
        cb(app, arg, SK_ENOTFOUND, NULL);
        return;
    }
    int64_t now = sk_mono_ms();
    struct known *k = find_known(d, id);
    struct fill *f = d->fills;
    while (f && f->id != id)
        f = f->next;
    int rc = SK_ENOMEM;
    if (k) {
        /* Known: answered now. Past its TTL it is read again behind the
         * answer, so a known activity never waits for the database. */
        struct sk_activity a = k->a;
        if (now - k->fetched_ms >= SK_ACT_DEFS_TTL_MS && !f) start_fill(app, d, id, &rc);
        cb(app, arg, 0, &a);
        return;
    }
    struct unknown *u = slot_of(d, id);
    if (u->id == id && now < u->until_ms) {
        cb(app, arg, SK_ENOTFOUND, NULL);
        return;
    }
    if (!f) f = start_fill(app, d, id, &rc);
    struct waiter *w = f ? calloc(1, sizeof *w) : NULL;
    if (!w) { /* an unstarted fill has no waiter and is not in flight */
        answer_failure(app, d, id, rc, cb, arg);
        return;
    }
    *w = (struct waiter){.app = app, .f = f, .cb = cb, .arg = arg, .next = f->waiters};
    if (f->waiters) f->waiters->prev = w;
    f->waiters = w;
    w->deadline.cb = on_waiter_deadline;
    h2o_timeout_link(app->ctx.loop, &app->db_deadline, &w->deadline);
}

static void mark_reads_stale(struct sk_act_defs *d, uint64_t id)
{
    for (struct fill *f = d->fills; f; f = f->next)
        if (f->id == id) f->stale = 1;
}

void sk_act_defs_put(struct sk_app *app, const struct sk_activity *a)
{
    struct sk_act_defs *d = app->defs;
    mark_reads_stale(d, a->id);
    put_known(d, a, sk_mono_ms());
}

void sk_act_defs_forget(struct sk_app *app, uint64_t id)
{
    struct sk_act_defs *d = app->defs;
    mark_reads_stale(d, id);
    struct known *k = find_known(d, id);
    if (k) drop_known(d, (size_t)(k - d->known));
    struct unknown *u = slot_of(d, id);
    if (u->id == id) u->id = 0;
}

void sk_act_defs_free(struct sk_app *app, struct sk_act_defs *d)
{
    if (!d) return;
    /* reads still in flight: their waiters get an answer now; the read
     * itself frees its fill when it completes */
    for (struct fill *f = d->fills; f; f = f->next) {
        struct waiter *w = f->waiters;
        f->waiters = NULL;
        f->d = NULL;
        while (w) {
            struct waiter *next = w->next;
            if (h2o_timeout_is_linked(&w->deadline)) h2o_timeout_unlink(&w->deadline);
            w->cb(app, w->arg, SK_ETIMEDOUT, NULL);
            free(w);
            w = next;
        }
    }
    free(d->ids);
    free(d->known);
    free(d);
}
