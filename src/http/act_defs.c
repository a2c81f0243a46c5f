/* act_defs.c - the activity definitions cache of an HTTP process
 * (act_defs.h): a known definition, an unknown id's verdict and the read
 * in flight of an id live in its record of the key set table (keysets.h);
 * here are the reads and their waiters. */
#include "http/act_defs.h"

#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "http/app.h"
#include "http/store_call.h"

/* A lookup waiting for a read. */
struct waiter {
    h2o_timeout_entry_t deadline; /* on app->db_deadline */
    struct sk_app *app;
    struct sk_act_fill *f;
    sk_act_defs_cb cb;
    void *arg;
    struct waiter *prev, *next;
};

/* One store read of an id, shared by its waiters (through the id's
 * record, which it holds while in flight). */
struct sk_act_fill {
    struct sk_app *app;
    struct sk_act_defs *d; /* NULL once the cache was freed */
    struct sk_keyset *ks;  /* the id's record (NULL: no room for one; then not shared) */
    uint64_t id;
    int stale; /* forgotten or replaced meanwhile: do not cache the answer */
    struct waiter *waiters;
    struct sk_activity a; /* written by the pool thread, read in fill_done */
    struct sk_act_fill *prev, *next;
};

/* The reads in flight (each also in its record), for the exit. */
struct sk_act_defs {
    struct sk_act_fill *fills;
};

struct sk_act_defs *sk_act_defs_new(void)
{
    return calloc(1, sizeof(struct sk_act_defs));
}

/* The record of id holding a definition, or NULL. */
static struct sk_keyset *find_known(struct sk_app *app, uint64_t id)
{
    struct sk_keyset *r = sk_app_act(app, id, SK_ACT_FIND);
    return r && r->def ? r : NULL;
}

static void drop_known(struct sk_keyset *r)
{
    free(r->def);
    r->def = NULL;
}

/* Known: the store defined it, which vouches for it as Redis would. */
static void put_known(struct sk_app *app, const struct sk_activity *a, int64_t now)
{
    struct sk_keyset *r = sk_app_act(app, a->id, SK_ACT_KNOWN);
    if (!r) return; /* no room: simply not cached */
    if (!r->def && !(r->def = malloc(sizeof *r->def))) return;
    *r->def = *a;
    r->def_ms = now;
    r->unknown_until_ms = 0;
}

/* Unknown: a record of its own, unconfirmed, so made-up ids only ever
 * push out each other. */
static void put_unknown(struct sk_app *app, uint64_t id, int64_t now)
{
    struct sk_keyset *r = sk_app_act(app, id, SK_ACT_MAKE);
    if (!r) return;
    drop_known(r); /* deleted since */
    r->unknown_until_ms = now + SK_ACT_DEFS_UNKNOWN_TTL_MS;
}

/* The answer for a failed or late read: an expired known definition if
 * there is one, else the failure. */
static void answer_failure(struct sk_app *app, struct sk_act_defs *d, uint64_t id, int rc,
                           sk_act_defs_cb cb, void *arg)
{
    struct sk_keyset *k = d ? find_known(app, id) : NULL;
    if (k) {
        struct sk_activity a = *k->def; /* cb may change the cache */
        cb(app, arg, 0, &a);
        return;
    }
    cb(app, arg, rc, NULL);
}

static int fill_run(sk_store *st, void *arg)
{
    struct sk_act_fill *f = arg;
    return sk_store_activity_get(st, f->id, &f->a);
}

/* The read is over: off the list and out of its record. */
static void unlink_fill(struct sk_act_fill *f)
{
    struct sk_act_defs *d = f->d;
    if (!d) return;
    if (f->prev)
        f->prev->next = f->next;
    else
        d->fills = f->next;
    if (f->next) f->next->prev = f->prev;
    f->prev = f->next = NULL;
    if (f->ks && f->ks->fill == f) f->ks->fill = NULL;
    f->ks = NULL;
}

static void fill_done(void *arg, int rc)
{
    struct sk_act_fill *f = arg;
    struct sk_app *app = f->app;
    struct sk_act_defs *d = f->d;
    unlink_fill(f);
    if (d && !f->stale) {
        if (rc == 0)
            put_known(app, &f->a, sk_mono_ms());
        else if (rc == SK_ENOTFOUND)
            put_unknown(app, f->id, sk_mono_ms());
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

/* A store read of id, in ks (may be NULL) for the lookups that follow. */
static struct sk_act_fill *start_fill(struct sk_app *app, struct sk_keyset *ks, uint64_t id,
                                      int *rc)
{
    struct sk_act_defs *d = app->defs;
    struct sk_act_fill *f = calloc(1, sizeof *f);
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
    if (ks) {
        f->ks = ks;
        ks->fill = f;
    }
    return f;
}

void sk_act_defs_lookup(struct sk_app *app, uint64_t id, sk_act_defs_cb cb, void *arg)
{
    if (id == 0 || id > SK_ACTIVITY_ID_MAX) { /* can never be created */
        cb(app, arg, SK_ENOTFOUND, NULL);
        return;
    }
    int64_t now = sk_mono_ms();
    struct sk_keyset *r = sk_app_act(app, id, SK_ACT_FIND);
    struct sk_act_fill *f = r ? r->fill : NULL;
    int rc = SK_ENOMEM;
    if (r && r->def) {
        /* Known: answered now. Past its TTL it is read again behind the
         * answer, so a known activity never waits for the database. */
        struct sk_activity a = *r->def;
        if (now - r->def_ms >= SK_ACT_DEFS_TTL_MS && !f) start_fill(app, r, id, &rc);
        cb(app, arg, 0, &a);
        return;
    }
    if (r && now < r->unknown_until_ms) {
        cb(app, arg, SK_ENOTFOUND, NULL);
        return;
    }
    if (!f) f = start_fill(app, r ? r : sk_app_act(app, id, SK_ACT_MAKE), id, &rc);
    struct waiter *w = f ? calloc(1, sizeof *w) : NULL;
    if (!w) { /* an unstarted fill has no waiter and is not in flight */
        answer_failure(app, app->defs, id, rc, cb, arg);
        return;
    }
    *w = (struct waiter){.app = app, .f = f, .cb = cb, .arg = arg, .next = f->waiters};
    if (f->waiters) f->waiters->prev = w;
    f->waiters = w;
    w->deadline.cb = on_waiter_deadline;
    h2o_timeout_link(app->ctx.loop, &app->db_deadline, &w->deadline);
}

/* A read in flight for id answers its waiters but is not cached. */
static void mark_read_stale(struct sk_app *app, uint64_t id)
{
    struct sk_keyset *r = sk_app_act(app, id, SK_ACT_FIND);
    if (r && r->fill) r->fill->stale = 1;
}

void sk_act_defs_put(struct sk_app *app, const struct sk_activity *a)
{
    mark_read_stale(app, a->id);
    put_known(app, a, sk_mono_ms());
}

void sk_act_defs_forget(struct sk_app *app, uint64_t id)
{
    mark_read_stale(app, id);
    struct sk_keyset *r = sk_app_act(app, id, SK_ACT_FIND);
    if (!r) return;
    drop_known(r);
    r->unknown_until_ms = 0;
}

void sk_act_defs_free(struct sk_app *app, struct sk_act_defs *d)
{
    if (!d) return;
    /* reads still in flight: their waiters get an answer now; the read
     * itself frees its fill when it completes */
    for (struct sk_act_fill *f = d->fills; f; f = f->next) {
        struct waiter *w = f->waiters;
        f->waiters = NULL;
        f->d = NULL;
        if (f->ks) f->ks->fill = NULL;
        f->ks = NULL;
        while (w) {
            struct waiter *next = w->next;
            if (h2o_timeout_is_linked(&w->deadline)) h2o_timeout_unlink(&w->deadline);
            w->cb(app, w->arg, SK_ETIMEDOUT, NULL);
            free(w);
            w = next;
        }
    }
    free(d);
}
