/* purchase_batch.c - the purchase batches of one event-loop pass, their
 * purchase_batch calls and the answers of their replies (purchase_batch.h).
 *
 * Segmented activities (docs/segments.md): a purchase goes to its buyer's
 * home segment (the first batch of an activity goes to its base keys,
 * which answer SEGMENTED with the count; the process remembers it). What a
 * home cannot serve borrows (purchase_borrow.h).
 *
 * Rollback guard (docs/recovery.md): every call carries what this host saw
 * last of the key set (its epoch and admission count, http/label_mem.h);
 * a Redis behind that fences the key set in the same call, and a fenced
 * key set answers 503 `recovering` with Retry-After until the order worker
 * has rebuilt it from the database.
 *
 * Synchronous replicas (--sync-replicas N, docs/failover.md): admission
 * calls go with sk_aredis_eval_wait, so the answer comes with the replicas
 * that acknowledged; an admission fewer than N acknowledged is answered
 * 503 unconfirmed (Retry-After), not 200.
 *
 * The batch window (--batches-in-flight K): while K batches of a key set
 * wait for Redis, that key set's open batch is not sent at the end of the
 * pass but kept open, and what the next passes bring joins it; it goes
 * when an answer comes back (or when it is full). Without load nothing is
 * in flight and nothing waits; under load one call carries what several
 * passes brought, and Redis's cost per purchase falls with the batch
 * (BENCHMARKS.md, "The batch window"). A purchase waits at most one
 * Redis round trip for it, and every call ends in its callback (answer,
 * reply timeout or lost connection), so the window always reopens. */
#include "http/purchase_batch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/codes.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/keys.h"
#include "engine/segment.h"
#include "http/act_defs.h"
#include "http/api_purchase.h"
#include "http/label_mem.h"
#include "http/purchase_borrow.h"

struct sk_batch *sk_batch_new(struct sk_app *app, uint64_t aid, int seg)
{
    struct sk_batch *b = malloc(sizeof *b);
    if (!b) return NULL;
    b->app = app;
    b->aid = aid;
    b->seg = seg;
    b->ks = NULL;
    b->borrow = NULL;
    b->xfer_id[0] = 0;
    b->xfer_qty = 0;
    b->n = 0;
    return b;
}

/* A call of b's key set came back (or was never sent): its window has
 * one more place. */
static void flight_end(struct sk_batch *b)
{
    if (b->ks) b->ks->flights--;
    b->ks = NULL;
}

static void fail_batch(struct sk_batch *b, const char *why)
{
    sk_purchase_fail(b->app, b->aid, b->items, b->n, why);
    /* the batch held every purchase its borrow had left */
    if (b->borrow) sk_purchase_borrow_drop(b->borrow);
    free(b);
}

/* The same with a refusal of codes.def (REDIS_FULL, REDIS_UNSAFE). */
static void refuse_batch(struct sk_batch *b, int rc)
{
    sk_purchase_refuse_all(b->app, b->aid, b->items, b->n, rc);
    if (b->borrow) sk_purchase_borrow_drop(b->borrow);
    free(b);
}

/* Redis out of memory (maxmemory with noeviction refuses every write with
 * -OOM, before the script runs): purchases are answered 503 redis_full,
 * and the log says so once per OOM_LOG_MS with how many, not per batch.
 * Per process: the loop's own state. */
#define OOM_LOG_MS 10000
static int64_t oom_logged_ms;
static uint64_t oom_refused;

static int is_oom(const redisReply *rep)
{
    return rep->type == REDIS_REPLY_ERROR && !strncmp(rep->str, "OOM ", 4);
}

static void note_oom(struct sk_batch *b, const redisReply *rep)
{
    oom_refused += b->n;
    int64_t now = sk_mono_ms();
    if (oom_logged_ms && now - oom_logged_ms < OOM_LOG_MS) return;
    sk_log(SK_LOG_WARN,
           "purchases refused (503 redis_full): Redis is out of memory (%.100s); %llu refused "
           "since the last such line; memory comes back as the worker persists and trims orders, "
           "or raise maxmemory",
           rep->str, (unsigned long long)oom_refused);
    oom_logged_ms = now;
    oom_refused = 0;
}

/* A purchase_batch reply into res and *remaining; a missing or malformed
 * one fails the whole batch (freed) and returns 1. */
static int parse_or_fail(struct sk_batch *b, redisReply *rep, struct sk_admission *res,
                         int64_t *remaining)
{
    if (!rep) {
        fail_batch(b, "redis is unreachable; try again");
        return 1;
    }
    if (is_oom(rep)) {
        note_oom(b, rep);
        refuse_batch(b, SK_RC_REDIS_FULL);
        return 1;
    }
    int rc = sk_stock_batch_parse(rep, b->n, res, remaining);
    if (rc < 0) {
        sk_log(SK_LOG_ERROR, "purchase_batch: %s%s%.200s",
               rc == SK_ESCRIPT ? "malformed call (BAD_ARGUMENT)" : "unexpected reply",
               rep->type == REDIS_REPLY_ERROR ? ": " : "",
               rep->type == REDIS_REPLY_ERROR ? rep->str : "");
        fail_batch(b, "admission failed; try again");
        return 1;
    }
    return 0;
}

/* When the base keys said the activity is segmented (with the count):
 * remembers the count, sends every purchase of the batch to its home
 * segment, frees b and returns 1. */
static int reroute_if_segmented(struct sk_batch *b, const struct sk_admission *res)
{
    if (res[0].rc != SK_RC_SEGMENTED || b->seg != SK_SEG_NONE || res[0].quantity <= 1 ||
        res[0].quantity > SK_SEG_MAX)
        return 0;
    int segments = (int)res[0].quantity;
    struct sk_app *app = b->app;
    struct sk_keyset *c = sk_app_act(app, b->aid, SK_ACT_KNOWN);
    if (c) c->segments = segments;
    for (size_t i = 0; i < b->n; i++) {
        struct sk_pending *p = b->items[i];
        struct sk_batch *hb = sk_batch_for(app, b->aid, sk_seg_home(p->p.user_id, segments));
        if (!hb)
            sk_purchase_fail(app, b->aid, &p, 1, "out of memory");
        else
            hb->items[hb->n++] = p;
    }
    free(b);
    return 1;
}

static void finish_batch(struct sk_batch *b, const struct sk_admission *res, int64_t remaining);

/* A batch Redis answered UNKNOWN_ACTIVITY, waiting for the definitions
 * cache (heap; owns nothing but itself). */
struct unknown_wait {
    struct sk_batch *b;
    int64_t remaining;
    struct sk_admission res[]; /* b->n */
};

static void on_unknown_definition(struct sk_app *app, void *arg, int rc,
                                  const struct sk_activity *a)
{
    (void)app;
    (void)a;
    struct unknown_wait *w = arg;
    /* defined in the store: created, not preheated; anything else (not
     * defined, or the store did not answer in time) stays unknown */
    if (rc == 0)
        for (size_t i = 0; i < w->b->n; i++)
            if (w->res[i].rc == SK_RC_UNKNOWN_ACTIVITY) w->res[i].rc = SK_RC_CLOSED;
    finish_batch(w->b, w->res, w->remaining);
    free(w);
}

/* Unknown to Redis but defined in the store: created, not preheated. A
 * buyer sees it as closed, as GET /activities/{id} says. Only ids Redis
 * does not know pay for this lookup, and it goes through this process's
 * definitions cache (act_defs.h): the answer waits for the store, off the
 * loop, only on a miss. Returns 1 when the batch finishes later. */
static int unknown_as_closed(struct sk_batch *b, const struct sk_admission *res, int64_t remaining)
{
    if (res[0].rc != SK_RC_UNKNOWN_ACTIVITY) return 0;
    struct unknown_wait *w = malloc(sizeof *w + b->n * sizeof *res);
    if (!w) return 0; /* answered as unknown */
    w->b = b;
    w->remaining = remaining;
    memcpy(w->res, res, b->n * sizeof *res);
    sk_act_defs_lookup(b->app, b->aid, on_unknown_definition, w);
    return 1;
}

/* Answers the purchases of the batch, except a segment's stock refusals
 * (segments > 1): those are not final, they go to more/more_res, in
 * arrival order, to borrow. Returns how many went there. */
static size_t answer_batch(struct sk_batch *b, const struct sk_admission *res, int segments,
                           struct sk_pending **more, struct sk_admission *more_res)
{
    /* Counted before any answer leaves: a scrape made by a buyer who
     * already has the 200 must see it. */
    size_t nmore = 0, admitted = 0;
    int unsure = sk_purchase_unsure(b->app);
    for (size_t i = 0; i < b->n; i++)
        admitted += res[i].rc == SK_RC_OK && !res[i].replay && !unsure;
    sk_metrics_admission(b->app->metrics, admitted);
    for (size_t i = 0; i < b->n; i++) {
        if (b->seg >= 0 && segments > 1 && sk_seg_refused_by_stock(res[i].rc)) {
            more_res[nmore] = res[i];
            more[nmore++] = b->items[i];
            continue;
        }
        if (res[i].rc == SK_RC_OK && unsure) {
            sk_purchase_unconfirmed(b->app, b->aid, b->items[i]);
            continue;
        }
        sk_purchase_answer(b->app, b->aid, b->items[i], &res[i], NULL);
    }
    return nmore;
}

/* The rollback guard's memory of the key set: raised by the reply; a
 * fenced key set is forgotten, and the activity's sold-out mark dropped
 * (its stock is about to be rebuilt). */
static void note_key_set(struct sk_batch *b, const redisReply *rep, const struct sk_admission *res)
{
    int fenced = 0;
    for (size_t i = 0; i < b->n && !fenced; i++)
        fenced = res[i].rc == SK_RC_RECOVERING;
    if (fenced) {
        sk_labelmem_forget(sk_labelmem_host(), b->aid, b->seg);
        struct sk_keyset *c = sk_app_act(b->app, b->aid, 0);
        if (c) c->sold_out = 0;
        return;
    }
    int64_t epoch, adm;
    sk_stock_batch_seen(rep, b->n, &epoch, &adm);
    sk_labelmem_seen(sk_labelmem_host(), b->aid, b->seg, epoch, adm);
}

static void on_batch_reply(void *data, redisReply *rep)
{
    struct sk_batch *b = data;
    struct sk_app *app = b->app;
    flight_end(b);
    struct sk_admission res[SK_BATCH_MAX];
    int64_t remaining = -1;
    if (parse_or_fail(b, rep, res, &remaining)) return;
    sk_metrics_redis_rtt(app->metrics, (double)sk_aredis_rtt_us(app->redis) / 1e6);
    sk_metrics_batch(app->metrics, b->n);
    note_key_set(b, rep, res);
    if (reroute_if_segmented(b, res)) return;
    /* Redis vouched for the activity: its entry is kept when ids a client
     * made up crowd the table */
    struct sk_keyset *c = sk_app_act(app, b->aid, SK_ACT_FIND);
    if (c && !c->confirmed && res[0].rc != SK_RC_UNKNOWN_ACTIVITY)
        sk_app_act(app, b->aid, SK_ACT_KNOWN);
    if (unknown_as_closed(b, res, remaining)) return;
    finish_batch(b, res, remaining);
}

/* Answers the batch; a re-admission hands its answers back to its borrow,
 * a first refusal at home starts one, and a base key set that reported no
 * stock left marks the activity sold out. Frees b. */
static void finish_batch(struct sk_batch *b, const struct sk_admission *res, int64_t remaining)
{
    struct sk_app *app = b->app;
    struct sk_keyset *c = b->seg >= 0 ? sk_app_act(app, b->aid, 0) : NULL;
    int segments = b->borrow ? sk_purchase_borrow_segments(b->borrow) : c ? c->segments : 0;
    struct sk_pending *more[SK_BATCH_MAX];
    struct sk_admission more_res[SK_BATCH_MAX];
    size_t nmore = answer_batch(b, res, segments, more, more_res);
    if (b->borrow)
        sk_purchase_borrow_readmitted(b->borrow, res, b->n, remaining);
    else if (nmore > 0)
        sk_purchase_borrow_start(app, b->aid, segments, b->seg, more, more_res, nmore);
    else if (remaining == 0 && b->seg == SK_SEG_NONE)
        sk_purchase_mark_sold_out(app, b->aid);
    free(b);
}

void sk_batch_send(struct sk_app *app, struct sk_batch *b)
{
    struct sk_keys k;
    sk_keys_seg(&k, b->aid, b->seg);
    /* a master that may evict the sale's keys sells nothing: a flag the
     * client keeps per master, read here (redis_settings.h) */
    if (sk_aredis_unsafe(app->redis, k.meta)) {
        refuse_batch(b, SK_RC_REDIS_UNSAFE);
        return;
    }
    size_t argc = SK_BATCH_ARGC(b->n), cap = SK_BATCH_ARG_BYTES(b->n);
    size_t kcap = SK_BATCH_KEY_BYTES(b->n);
    struct sk_purchase ps[SK_BATCH_MAX];
    for (size_t i = 0; i < b->n; i++)
        ps[i] = b->items[i]->p;
    /* one block per batch (the hot path): the pointer arrays first, for
     * their alignment, then the argument and key bytes */
    size_t nkeys = SK_BATCH_KEYC(b->n);
    void *mem = malloc(argc * sizeof(const char *) + nkeys * sizeof(const char *) +
                       argc * sizeof(size_t) + cap + kcap);
    if (!mem) {
        fail_batch(b, "redis is unreachable; try again");
        return;
    }
    const char **args = mem, **keys = args + argc;
    size_t *lens = (size_t *)(keys + nkeys);
    char *buf = (char *)(lens + argc);
    int rc = SK_ENOMEM, nk = 0;
    const struct sk_config *cf = &app->cfg;
    struct sk_rate_limits rl = {cf->rate_per_user_per_s, cf->rate_burst, cf->rate_per_ip_per_s,
                                cf->rate_ip_burst};
    struct sk_batch_head h = {.label = k.label,
                              .rl = &rl,
                              .xfer_id = b->borrow ? b->xfer_id : NULL,
                              .xfer_qty = b->borrow ? b->xfer_qty : 0,
                              .store_id = app->db.store_id};
    sk_labelmem_get(sk_labelmem_host(), b->aid, b->seg, &h.epoch, &h.adm);
    /* counted before the call, whose callback ends the flight (and frees
     * b): its key set's record stays while the call is out; not counted
     * without one (no room): the window is then open, as without one */
    if (!b->ks) b->ks = sk_app_keyset(app, b->aid, b->seg, SK_ACT_MAKE);
    if (b->ks) b->ks->flights++;
    if (sk_stock_batch_args_head(&h, ps, b->n, buf, cap, args, lens) == 0 &&
        (nk = sk_stock_batch_keys(&k, &rl, ps, b->n, buf + cap, kcap, keys)) > 0)
        rc = sk_aredis_eval_wait(app->redis, SK_SCRIPT_PURCHASE_BATCH, nk, keys, (int)argc, args,
                                 lens, on_batch_reply, b);
    free(mem);
    if (rc < 0) {
        /* no callback will run */
        flight_end(b);
        fail_batch(b, "redis is unreachable; try again");
    }
}

/* 1 when b stays open for the next pass: its key set has the window's
 * batches out already. */
static int held(struct sk_app *app, const struct sk_batch *b)
{
    int window = app->cfg.batches_in_flight;
    if (window <= 0 || b->n >= SK_BATCH_MAX) return 0;
    return b->ks && b->ks->flights >= window;
}

void sk_purchase_flush(struct sk_app *app)
{
    for (struct sk_keyset *ks = sk_keysets_take_open(app, SK_OPEN_PURCHASE), *next; ks; ks = next) {
        next = ks->open_next[SK_OPEN_PURCHASE];
        struct sk_batch *b = ks->batch;
        if (!b) continue;
        if (held(app, b)) {
            sk_keyset_opened(app, ks, SK_OPEN_PURCHASE);
            continue;
        }
        ks->batch = NULL;
        sk_batch_send(app, b);
    }
}

struct sk_batch *sk_batch_for(struct sk_app *app, uint64_t aid, int seg)
{
    struct sk_keyset *ks = sk_app_keyset(app, aid, seg, SK_ACT_MAKE);
    if (!ks) return NULL;
    if (ks->batch && ks->batch->n < SK_BATCH_MAX) return ks->batch;
    if (ks->batch) { /* full: it goes now */
        struct sk_batch *full = ks->batch;
        ks->batch = NULL;
        sk_batch_send(app, full);
    }
    struct sk_batch *b = sk_batch_new(app, aid, seg);
    if (!b) return NULL;
    b->ks = ks;
    ks->batch = b;
    sk_keyset_opened(app, ks, SK_OPEN_PURCHASE);
    return b;
}
