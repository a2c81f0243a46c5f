/* api_admin.c - the activity read route, the admin routes (create,
 * preheat, open, close, stats) and the health routes (healthz, readyz; the
 * node's metrics and dashboard are ops_view.c). Definitions live in the
 * store, read and written off the event loop (store_call.h; the read route
 * through this process's cache, act_defs.h); live state comes from Redis
 * through the state script. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/clock.h"
#include "core/codes.h"
#include "core/error.h"
#include "core/log.h"
#include "core/rand.h"
#include "engine/activity.h"
#include "engine/activity_json.h"
#include "engine/draw.h"
#include "engine/keys.h"
#include "engine/seg_preheat.h"
#include "engine/segment.h"
#include "engine/stock.h"
#include "http/act_defs.h"
#include "http/app.h"
#include "http/challenge_http.h"
#include "http/http_body.h"
#include "http/store_call.h"
#include "redis/reply.h"

/* An activity read or admin request: its store steps run on the pool
 * (store_call.h), its Redis steps on the loop. */
struct op;
typedef void (*op_next_fn)(struct op *o);
struct op {
    struct sk_async_req a; /* begun while a Redis step holds the request */
    struct sk_app *app;
    enum sk_route route;
    uint64_t id;
    struct sk_activity act;
    int force;
    op_next_fn next;                          /* what follows the definition read */
    char state[16];                           /* the state to record after a switch or preheat */
    char store_id[SK_STOCK_STORE_ID_LEN + 1]; /* the store's identity, read with the
                                                 definition ("" when it could not be) */
    char err[256]; /* the store's failure, for the log line on the loop */
};

static struct op *op_alloc(struct sk_app *app, h2o_req_t *req, enum sk_route route)
{
    struct op *o = calloc(1, sizeof *o);
    if (!o) {
        sk_http_error(app, req, route, 503, "unavailable", "out of memory");
        return NULL;
    }
    o->app = app;
    o->route = route;
    return o;
}

/* The store's failure text, kept for the log line on the loop. */
static int keep_err(struct op *o, sk_store *st, int rc)
{
    if (rc < 0 && rc != SK_ENOTFOUND && rc != SK_EEXIST)
        snprintf(o->err, sizeof o->err, "%s", sk_store_errstr(st));
    return rc;
}

/* Replies o (taken), its strings escaped as sk_body_json_escape does: <,
 * > and & and the JS line terminators (json_dumps leaves them; JSON has
 * them only inside strings). */
static void reply_escaped(struct sk_app *app, h2o_req_t *req, enum sk_route route, int status,
                          json_t *o)
{
    char body[3072];
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    const unsigned char *p = (const unsigned char *)s;
    size_t n = 0;
    for (; p && *p && n + 7 < sizeof body; p++) {
        if (*p == '<' || *p == '>' || *p == '&') {
            n += (size_t)snprintf(body + n, 7, "\\u%04x", *p);
        } else if (p[0] == 0xe2 && p[1] == 0x80 && (p[2] == 0xa8 || p[2] == 0xa9)) {
            n += (size_t)snprintf(body + n, 7, "\\u%04x", 0x2000 + p[2] - 0x80);
            p += 2;
        } else {
            body[n++] = (char)*p;
        }
    }
    int whole = p && !*p;
    free(s);
    sk_http_reply(app, req, route, status, "application/json", body, whole ? n : 0);
}

/* The buyer's view of a with its live state st (engine/activity_json.h). */
static void reply_activity(struct sk_app *app, h2o_req_t *req, enum sk_route route, int status,
                           const struct sk_activity *a, const struct sk_stock_state *st)
{
    char chs[SK_CH_JSON_MAX];
    json_t *ch = NULL;
    if (sk_activity_has_challenge(a) && sk_challenge_json(a, &app->cfg, chs, sizeof chs) >= 0)
        ch = json_loads(chs, 0, NULL);
    reply_escaped(app, req, route, status, sk_activity_json(a, st, sk_wall_ms(), SK_AV_PUBLIC, ch));
}

/* ---- live state: one key set's state script, or a segmented activity's
 * every segment's and the base meta's reconcile verdict, in parallel,
 * summed ----------------------------------------------------------------- */

typedef void (*state_done_fn)(struct op *o, const struct sk_stock_state *st); /* st NULL: failed */

/* A peek.lua reply: exists, open and stock; the rest of *st zero. */
static int peek_parse(const redisReply *rep, struct sk_stock_state *st)
{
    if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements != 3) return SK_EPROTO;
    for (int i = 0; i < 3; i++)
        if (rep->element[i]->type != REDIS_REPLY_INTEGER) return SK_EPROTO;
    *st = (struct sk_stock_state){.exists = (int)rep->element[0]->integer,
                                  .open = (int)rep->element[1]->integer,
                                  .remaining = rep->element[2]->integer,
                                  .reconcile_drift = -1};
    return 0;
}

struct seg_state_op;
struct seg_state_slot {
    struct seg_state_op *so;
    int seg; /* -1: the base meta */
};
struct seg_state_op {
    struct sk_fanout f; /* first: its done casts back */
    struct op *o;
    state_done_fn done;
    int peek; /* peek.lua (exists, open, stock) instead of state.lua */
    int segments, added;
    struct sk_stock_state sum;
    int64_t drift, drift_ms;
    struct seg_state_slot slot[]; /* the base meta and each key set read */
};

static void on_seg_state_done(struct sk_fanout *f)
{
    struct seg_state_op *so = (struct seg_state_op *)f;
    if (!f->failed && so->segments > 1) {
        so->sum.reconcile_drift = so->drift;
        so->sum.reconcile_ms = so->drift_ms;
    }
    so->done(so->o, f->failed ? NULL : &so->sum);
    free(so);
}

static void on_seg_state(void *data, redisReply *rep)
{
    struct seg_state_slot *sl = data;
    struct seg_state_op *so = sl->so;
    if (sl->seg < 0) {
        if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements != SK_M_RECONCILED_N)
            so->f.failed = 1;
        else {
            const redisReply *d = rep->element[SK_M_RECONCILED_RECONCILE_DRIFT],
                             *ms = rep->element[SK_M_RECONCILED_RECONCILE_MS];
            if (d->type == REDIS_REPLY_STRING) so->drift = sk_reply_i64_or(d, 0);
            if (ms->type == REDIS_REPLY_STRING) so->drift_ms = sk_reply_i64_or(ms, 0);
        }
    } else {
        struct sk_stock_state one;
        if ((so->peek ? peek_parse(rep, &one) : sk_stock_state_parse(rep, &one)) < 0)
            so->f.failed = 1;
        else
            sk_seg_state_add(&so->sum, &one, so->added++ == 0);
    }
    sk_fanout_answered(&so->f);
}

/* Reads the (summed) state of o's activity (peek: only exists, open and
 * stock, O(1) per key set); done(o, st) runs once. */
static void state_read(struct op *o, state_done_fn done, int peek)
{
    int segs = (int)o->act.segments;
    /* sized for this activity: a plain one's read is on the buyer's path */
    struct seg_state_op *so =
        malloc(sizeof *so + (size_t)(segs > 0 ? segs + 1 : 1) * sizeof so->slot[0]);
    if (!so) {
        done(o, NULL);
        return;
    }
    *so = (struct seg_state_op){.o = o, .done = done, .peek = peek, .segments = segs, .drift = -1};
    sk_fanout_begin(&so->f, on_seg_state_done);
    for (int i = peek || segs < 2 ? 0 : -1; i < segs; i++) {
        struct sk_keys k;
        struct seg_state_slot *sl = &so->slot[i + 1];
        *sl = (struct seg_state_slot){so, i};
        int rc;
        if (i < 0 || segs < 2)
            sk_keys_for(&k, o->act.id);
        else
            sk_keys_seg(&k, o->act.id, i);
        if (i < 0) {
            const char *argv[] = {"HMGET", k.meta, SK_M_RECONCILED_FIELDS};
            rc = sk_aredis_command(o->app->redis, on_seg_state, sl,
                                   (int)(sizeof argv / sizeof *argv), argv, NULL);
        } else if (peek) {
            const char *keys[] = {SK_K_PEEK_EACH(SK_KEY_OF, &k)};
            rc = sk_aredis_eval(o->app->redis, SK_SCRIPT_PEEK, SK_K_PEEK_N, keys, 0, NULL, NULL,
                                on_seg_state, sl);
        } else {
            const char *keys[SK_STATE_NKEYS];
            sk_keys_state(&k, keys);
            rc = sk_aredis_eval(o->app->redis, SK_SCRIPT_STATE, SK_STATE_NKEYS, keys, 0, NULL, NULL,
                                on_seg_state, sl);
        }
        sk_fanout_sent(&so->f, rc);
    }
    sk_fanout_end(&so->f);
}

static void state_for_activity_done(struct op *o, const struct sk_stock_state *st)
{
    h2o_req_t *req = sk_async_end(o->app, &o->a); /* NULL: gone */
    if (req) {
        if (!st)
            sk_http_error(o->app, req, o->route, 503, "unavailable", "redis is unreachable");
        else
            reply_activity(o->app, req, o->route, o->route == SK_ROUTE_admin_create ? 201 : 200,
                           &o->act, st);
    }
    free(o);
}

/* Reads the live state, then answers with the activity. Takes o. */
static void answer_with_state(struct op *o)
{
    state_read(o, state_for_activity_done, 1);
}

/* ---- the buyer's view without a request (sk_activity_peek) ------------- */

struct peek_op {
    struct op o; /* first: state_read's done gets o back */
    sk_activity_peek_cb cb;
    void *arg;
};

static void peek_state_done(struct op *o, const struct sk_stock_state *st)
{
    struct peek_op *p = (struct peek_op *)o;
    p->cb(o->app, p->arg, st ? 0 : SK_EIO, &o->act, st);
    free(p);
}

static void on_peek_def(struct sk_app *app, void *arg, int rc, const struct sk_activity *a)
{
    struct peek_op *p = arg;
    if (rc == 0 && !sk_aredis_ready(app->redis)) rc = SK_EIO;
    if (rc < 0) {
        p->cb(app, p->arg, rc, a, NULL);
        free(p);
        return;
    }
    p->o.act = *a;
    state_read(&p->o, peek_state_done, 1);
}

/* A peek_op for cb(arg) about activity id (a: its definition, or NULL);
 * NULL (cb told) when out of memory. */
static struct peek_op *peek_new(struct sk_app *app, uint64_t id, const struct sk_activity *a,
                                sk_activity_peek_cb cb, void *arg)
{
    struct peek_op *p = calloc(1, sizeof *p);
    if (!p) {
        cb(app, arg, SK_ENOMEM, a, NULL);
        return NULL;
    }
    *p = (struct peek_op){.o = {.app = app, .id = id}, .cb = cb, .arg = arg};
    if (a) p->o.act = *a;
    return p;
}

void sk_activity_peek(struct sk_app *app, uint64_t id, sk_activity_peek_cb cb, void *arg)
{
    struct peek_op *p = peek_new(app, id, NULL, cb, arg);
    if (p) sk_act_defs_lookup(app, id, on_peek_def, p);
}

void sk_activity_state(struct sk_app *app, const struct sk_activity *a, sk_activity_peek_cb cb,
                       void *arg)
{
    struct peek_op *p = peek_new(app, a->id, a, cb, arg);
    if (p) state_read(&p->o, peek_state_done, 0);
}

static int activity_read_run(sk_store *st, void *ctx)
{
    struct op *o = ctx;
    int rc = keep_err(o, st, sk_store_activity_get(st, o->id, &o->act));
    /* read once per handle, then kept: a preheat stamps it */
    if (rc == 0 && sk_store_identity(st, o->store_id, sizeof o->store_id) < 0) o->store_id[0] = 0;
    return rc;
}

/* The definition, fresh from the store (it is cached for the read route
 * too); then Redis must be ready and o->next continues, holding the
 * request. */
static void activity_read_done(struct sk_app *app, h2o_req_t *req, void *ctx, int rc)
{
    struct op *o = ctx;
    if (rc == 0) sk_act_defs_put(app, &o->act);
    if (!req) {
        free(o);
        return;
    }
    if (rc == SK_ENOTFOUND) {
        sk_http_error(app, req, o->route, 404, "unknown_activity", "no such activity");
    } else if (rc < 0) {
        sk_http_db_error(app, req, o->route, rc, o->err);
    } else if (!sk_http_redis_or_reply(app, req, o->route)) {
        sk_async_begin(app, &o->a, req, o->route);
        o->next(o);
        return;
    }
    free(o);
}

/* The start of every admin route that reads or changes an activity's live
 * state: its definition from the store, off the loop, then next(o). Takes
 * o. */
static void activity_then(struct sk_app *app, h2o_req_t *req, struct op *o, op_next_fn next)
{
    o->next = next;
    if (o->id > SK_ACTIVITY_ID_MAX) { /* can never be created: no database trip */
        sk_http_error(app, req, o->route, 404, "unknown_activity", "no such activity");
        free(o);
        return;
    }
    sk_store_call(app, req, o->route, activity_read_run, activity_read_done, o);
}

/* An admin route on one activity (m->id): the admin check, the body's
 * options (opts: -1 no body, 0 none, 1 "force"), then next(o) after
 * activity_then. */
static int activity_route(struct sk_app *app, h2o_req_t *req, const struct sk_route_match *m,
                          int opts, op_next_fn next)
{
    int force = 0;
    if (sk_http_admin_or_reply(app, req, m->route)) return 0;
    if (opts >= 0 && sk_http_options_or_reply(app, req, m->route, opts, &force)) return 0;
    struct op *o = op_alloc(app, req, m->route);
    if (!o) return 0;
    o->id = m->id;
    o->force = force;
    activity_then(app, req, o, next);
    return 0;
}

/* The read route: the definition from this process's cache (act_defs.h),
 * read off the loop on a miss; the live state from Redis. */
static void on_activity_def(struct sk_app *app, void *arg, int rc, const struct sk_activity *a)
{
    struct op *o = arg;
    if (rc == 0 && o->a.req && sk_aredis_ready(app->redis)) {
        o->act = *a;
        answer_with_state(o);
        return;
    }
    h2o_req_t *req = sk_async_end(o->app, &o->a);
    if (req) {
        if (!sk_http_activity_read_or_reply(app, req, o->route, rc))
            sk_http_redis_or_reply(app, req, o->route);
    }
    free(o);
}

int sk_api_activity(struct sk_app *app, h2o_req_t *req, const struct sk_route_match *m)
{
    struct op *o = op_alloc(app, req, m->route);
    if (!o) return 0;
    sk_async_begin(app, &o->a, req, m->route);
    o->id = m->id;
    sk_act_defs_lookup(app, m->id, on_activity_def, o);
    return 0;
}

/* The seeds the body did not give, drawn: its waiting room's, and for a
 * draw the draw's (committed on the public read, revealed once drawn) and
 * its passes' key; 503 (and nonzero) when the kernel gives no randomness. */
static int seeds_or_reply(struct sk_app *app, h2o_req_t *req, enum sk_route route,
                          struct sk_activity *a)
{
    const char *why = NULL;
    if (a->wr_passes_per_s > 0 && !a->wr_seed[0] &&
        sk_rand_hex(a->wr_seed, sizeof a->wr_seed, SK_ACTIVITY_SEED_BYTES) != 0)
        why = "no randomness for the queue's seed";
    else if (a->draw_box_s > 0 &&
             ((!a->draw_seed[0] && sk_rand_hex(a->draw_seed, sizeof a->draw_seed,
                                               SK_ACTIVITY_DRAW_SEED_HEX / 2) != 0) ||
              (!a->wr_seed[0] &&
               sk_rand_hex(a->wr_seed, sizeof a->wr_seed, SK_ACTIVITY_SEED_BYTES) != 0)))
        why = "no randomness for the draw's seed";
    if (why) sk_http_error(app, req, route, 503, "unavailable", why);
    return why != NULL;
}

static int create_run(sk_store *st, void *ctx)
{
    struct op *o = ctx;
    int rc = sk_store_activity_insert(st, &o->act);
    /* every refusal's text is the store's: a taken id says which way */
    if (rc < 0) snprintf(o->err, sizeof o->err, "%s", sk_store_errstr(st));
    return rc;
}

static void create_done(struct sk_app *app, h2o_req_t *req, void *ctx, int rc)
{
    struct op *o = ctx;
    if (rc == 0) sk_act_defs_put(app, &o->act); /* no longer unknown here */
    if (req) {
        struct sk_stock_state none = {0};
        if (rc == SK_EEXIST) /* the store says which: a row, or a deleted sale's orders */
            sk_http_error(app, req, o->route, 409, "already_exists", o->err);
        else if (rc < 0)
            sk_http_db_error(app, req, o->route, rc, o->err);
        else
            reply_activity(app, req, o->route, 201, &o->act, &none);
    }
    free(o);
}

int sk_api_admin_create(struct sk_app *app, h2o_req_t *req, const struct sk_route_match *m)
{
    if (sk_http_admin_or_reply(app, req, m->route)) return 0;
    struct sk_activity a;
    char err[200];
    if (sk_body_activity_create(req->entity.base, req->entity.base ? req->entity.len : 0, &a, err,
                                sizeof err) < 0)
        return sk_http_error(app, req, m->route, 400, "bad_request", err);
    snprintf(a.state, sizeof a.state, "created");
    if (seeds_or_reply(app, req, m->route, &a)) return 0;
    a.created_ms = sk_wall_ms();
    sk_activity_apply_defaults(&a);
    if (sk_activity_validate(&a, err, sizeof err) < 0)
        return sk_http_error(app, req, m->route, 400, "bad_request", err);
    struct op *o = op_alloc(app, req, m->route);
    if (!o) return 0;
    o->act = a;
    sk_store_call(app, req, m->route, create_run, create_done, o);
    return 0;
}

static int state_run(sk_store *st, void *ctx)
{
    struct op *o = ctx;
    return keep_err(o, st, sk_store_activity_set_state(st, o->act.id, o->state));
}

/* The stored state follows Redis; a failure is logged, not the answer
 * (Redis decides what buyers see; reconcile and the next switch settle
 * the stored word). */
static void state_done(struct sk_app *app, h2o_req_t *req, void *ctx, int rc)
{
    struct op *o = ctx;
    if (rc < 0)
        sk_log(SK_LOG_WARN, "store: activity %" PRIu64 " state %s: %s", o->act.id, o->state,
               o->err[0] ? o->err : sk_strerror(rc));
    if (rc == 0) {
        snprintf(o->act.state, sizeof o->act.state, "%s", o->state);
        sk_act_defs_put(app, &o->act);
    }
    if (!req) {
        free(o);
        return;
    }
    sk_async_begin(app, &o->a, req, o->route);
    answer_with_state(o);
}

static void state_bg_done(void *arg, int rc)
{
    state_done(((struct op *)arg)->app, NULL, arg, rc);
}

/* Records the state Redis now has in the store (off the loop), then
 * answers with the live state. Takes o (a begun). */
static void record_state_then_answer(struct op *o, const char *state)
{
    struct sk_app *app = o->app;
    snprintf(o->state, sizeof o->state, "%s", state);
    h2o_req_t *req = sk_async_end(o->app, &o->a);
    if (req) {
        sk_store_call(app, req, o->route, state_run, state_done, o);
    } else if (sk_store_bg(app, 0, state_run, state_bg_done, o) < 0) {
        free(o); /* the client left: still recorded, when the pool takes it */
    }
}

static void reply_preheat(struct op *o, int rc)
{
    if (rc == SK_RC_PREHEATED || rc == SK_RC_STOCK_LIVE) {
        /* a forced preheat may have changed how much is left: drop the
         * local sold-out mark */
        struct sk_keyset *c = sk_app_act(o->app, o->act.id, SK_ACT_FIND);
        if (c) c->sold_out = 0;
        if (rc == SK_RC_PREHEATED)
            record_state_then_answer(o, "preheated");
        else
            answer_with_state(o);
        return;
    }
    h2o_req_t *req = sk_async_end(o->app, &o->a);
    if (req) {
        if (rc < 0)
            sk_http_error(o->app, req, o->route, 503, "unavailable", "redis is unreachable");
        else if (rc == SK_RC_OTHER_STORE)
            sk_http_error(o->app, req, o->route, 409, sk_rc_wire(rc),
                          "the activity is live in Redis for another database than this "
                          "node's: nothing was written; preheat it from that database, or "
                          "remove its live state there (docs/reconcile.md)");
        else
            sk_http_error(o->app, req, o->route, sk_rc_http_status(rc), sk_rc_wire(rc),
                          sk_rc_message(rc));
    }
    free(o);
}

static void on_preheat(void *data, redisReply *rep)
{
    int rc = -1;
    if (rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
        rep->element[0]->type == REDIS_REPLY_INTEGER)
        rc = (int)rep->element[0]->integer;
    reply_preheat(data, rc);
}

static void preheat_next(struct op *o);

/* A segmented preheat is a walk of ordered steps (engine/seg_preheat.h:
 * each segment's share needs what its buyers hold, a forced one settles
 * the transfers in transit first), driven here on the async client one
 * command at a time: 2S+3 round trips or so, none of them blocking the
 * loop. The same walk runs on the blocking client (sk_seg_preheat: the
 * CLI, the tests). */
struct seg_preheat {
    struct op *o;
    struct sk_seg_preheat p;
};

static void seg_preheat_send(struct seg_preheat *sp);

/* The walk ended (or Redis did not answer: why): answers o, frees sp. */
static void seg_preheat_end(struct seg_preheat *sp, const char *why)
{
    struct op *o = sp->o;
    int rc = !why && sp->p.step == SK_SPH_DONE ? sp->p.rc : -1;
    if (rc < 0) sk_log(SK_LOG_ERROR, "preheat of %" PRIu64 ": %s", o->id, why ? why : sp->p.errstr);
    sk_seg_preheat_free(&sp->p);
    free(sp);
    reply_preheat(o, rc);
}

static void on_seg_preheat(void *data, redisReply *rep)
{
    struct seg_preheat *sp = data;
    if (!rep) {
        seg_preheat_end(sp, "redis did not answer");
        return;
    }
    sk_seg_preheat_feed(&sp->p, rep);
    seg_preheat_send(sp);
}

static void seg_preheat_send(struct seg_preheat *sp)
{
    if (sp->p.step == SK_SPH_DONE || sp->p.step == SK_SPH_FAILED) {
        seg_preheat_end(sp, NULL);
        return;
    }
    struct sk_seg_cmd c;
    sk_seg_preheat_cmd(&sp->p, &c);
    sk_aredis *ar = sp->o->app->redis;
    int rc = c.script == SK_SEG_CMD_PLAIN
                 ? sk_aredis_command(ar, on_seg_preheat, sp, c.argc, c.argv, NULL)
                 : sk_aredis_eval(ar, (enum sk_script_id)c.script, c.nkeys, c.argv, c.nargs,
                                  c.argv + c.nkeys, NULL, on_seg_preheat, sp);
    if (rc < 0) seg_preheat_end(sp, "redis is unreachable");
}

static void seg_preheat_start(struct op *o, const struct sk_stock_def *d)
{
    struct seg_preheat *sp = malloc(sizeof *sp);
    if (!sp) {
        reply_preheat(o, -1);
        return;
    }
    sp->o = o;
    sk_seg_preheat_init(&sp->p, d, o->force);
    seg_preheat_send(sp);
}

int sk_api_admin_preheat(struct sk_app *app, h2o_req_t *req, const struct sk_route_match *m)
{
    return activity_route(app, req, m, 1, preheat_next);
}

/* A preheat whose stock's orders may not fit in a master's memory: said
 * in the log (SK_RSET_ORDER_BYTES each, redis_settings.h), once per master. */
struct fit_check {
    int64_t orders;
    uint64_t id;
};

static void warn_fit(void *data, const struct sk_aredis_master *am)
{
    const struct fit_check *fc = data;
    struct sk_rset_finding f;
    if (!sk_rsettings_fits(am->settings, fc->orders, &f))
        sk_log(SK_LOG_WARN, "preheat of %" PRIu64 ": redis %s: %s", fc->id, am->addr, f.why);
}

/* With the definition read and Redis ready. */
static void preheat_next(struct op *o)
{
    struct sk_app *app = o->app;
    const struct sk_activity a = o->act;
    int force = o->force;
    struct sk_stock_def d;
    sk_activity_stock_def(&a, &d);
    /* units the database holds: Redis without the keys then refuses, the
     * stock is rebuilt from the orders (docs/recovery.md) */
    d.db_held = a.stock - a.stock_db;
    memcpy(d.store_id, o->store_id, sizeof d.store_id);
    /* a Redis that may evict the sale's keys is refused; a stock whose
     * orders may not fit in its memory is warned about (redis_settings.h) */
    struct sk_keys k;
    sk_keys_for(&k, a.id);
    const char *key = a.segments > 1 ? NULL : k.meta;
    const struct sk_rset_finding *f = sk_aredis_unsafe(app->redis, key);
    if (f) {
        h2o_req_t *req = sk_async_end(o->app, &o->a);
        if (req) sk_http_error(app, req, o->route, 503, "redis_unsafe", f->why);
        free(o);
        return;
    }
    struct fit_check fc = {.orders = a.stock, .id = a.id};
    sk_aredis_each_master(app->redis, warn_fit, &fc);
    if (a.segments > 1) {
        seg_preheat_start(o, &d);
        return;
    }
    char v[SK_PREHEAT_ARGC][24];
    const char *args[SK_PREHEAT_ARGC];
    int nargs = sk_stock_preheat_args(&d, force, v, args);
    const char *keys[SK_PREHEAT_NKEYS];
    sk_keys_preheat(&k, keys);
    if (sk_aredis_eval(app->redis, SK_SCRIPT_PREHEAT, SK_PREHEAT_NKEYS, keys, nargs, args, NULL,
                       on_preheat, o) < 0)
        on_preheat(o, NULL);
}

static void reply_switch(struct op *o, int rc)
{
    if (rc == SK_RC_OK) {
        record_state_then_answer(o, o->route == SK_ROUTE_admin_open ? "open" : "closed");
        return;
    }
    h2o_req_t *req = sk_async_end(o->app, &o->a);
    if (req) {
        if (rc == SK_RC_UNKNOWN_ACTIVITY)
            sk_http_error(o->app, req, o->route, 409, "not_preheated",
                          "preheat the activity before opening or closing it");
        else
            sk_http_error(o->app, req, o->route, 503, "unavailable", "redis is unreachable");
    }
    free(o);
}

/* The switch script of the activity's key set, or of every segment's and
 * the base's at once (they are independent; opening is the moment traffic
 * peaks, so nothing waits in line and the event loop is never blocked). */
struct switch_op {
    struct sk_fanout f; /* first: its done casts back */
    struct op *o;
    int rc;
};

static void on_switch_done(struct sk_fanout *f)
{
    struct switch_op *so = (struct switch_op *)f;
    reply_switch(so->o, f->failed ? -1 : so->rc);
    free(so);
}

static void on_switch(void *data, redisReply *rep)
{
    struct switch_op *so = data;
    if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements < 1 ||
        rep->element[0]->type != REDIS_REPLY_INTEGER)
        so->f.failed = 1;
    else if (rep->element[0]->integer != SK_RC_OK)
        so->rc = (int)rep->element[0]->integer;
    sk_fanout_answered(&so->f);
}

/* With the definition read and Redis ready. */
static void switch_next(struct op *o)
{
    int segments = (int)o->act.segments, open = o->route == SK_ROUTE_admin_open;
    struct switch_op *so = calloc(1, sizeof *so);
    if (!so) {
        reply_switch(o, -1);
        return;
    }
    *so = (struct switch_op){.o = o, .rc = SK_RC_OK};
    sk_fanout_begin(&so->f, on_switch_done);
    const char *args[SK_A_SWITCH_N] = {[SK_A_SWITCH_OPEN] = open ? "1" : "0"};
    for (int i = segments > 1 ? 0 : segments; i <= segments; i++) {
        struct sk_keys k;
        if (i < segments)
            sk_keys_seg(&k, o->act.id, i);
        else
            sk_keys_for(&k, o->act.id);
        const char *keys[] = {SK_K_SWITCH_EACH(SK_KEY_OF, &k)};
        sk_fanout_sent(&so->f, sk_aredis_eval(o->app->redis, SK_SCRIPT_SWITCH, SK_K_SWITCH_N, keys,
                                              SK_A_SWITCH_N, args, NULL, on_switch, so));
    }
    sk_fanout_end(&so->f);
}

int sk_api_admin_switch(struct sk_app *app, h2o_req_t *req, const struct sk_route_match *m)
{
    return activity_route(app, req, m, 0, switch_next);
}

static void stats_done(struct op *o, const struct sk_stock_state *stp)
{
    h2o_req_t *req = sk_async_end(o->app, &o->a);
    if (req && !stp) {
        sk_http_error(o->app, req, o->route, 503, "unavailable", "redis is unreachable");
    } else if (req) {
        const struct sk_stock_state st = *stp;
        char refused[1024], rat[SK_TIME_RFC3339_MAX] = "";
        if (st.reconcile_ms > 0) sk_time_format_rfc3339(st.reconcile_ms, rat, sizeof rat);
        json_t *ref = sk_metrics_refusals_json(o->app->metrics, refused, sizeof refused) < 0
                          ? NULL
                          : json_loads(refused, 0, NULL);
        int e = st.exists;
        /* the rollback guard (docs/recovery.md): fence, fence_why */
        json_t *fence = st.fence[0] ? json_string(st.fence) : json_null(),
               *why = st.fence[0] ? json_string(st.fence_why) : json_null();
        reply_escaped(
            o->app, req, o->route, 200,
            json_pack("{s:I, s:b, s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
                      "s:s, s:I, s:I, s:o, s:o, s:I, s:I, s:I, s:o}",
                      "id", (json_int_t)o->act.id, "preheated", e, "open", st.open, "stock_initial",
                      (json_int_t)(e ? st.initial : o->act.stock), "remaining",
                      (json_int_t)(e ? st.remaining : o->act.stock), "admitted",
                      (json_int_t)sk_stock_admitted(&st), "held", (json_int_t)st.held, "buyers",
                      (json_int_t)st.buyers, "released", (json_int_t)st.released, "stream_length",
                      (json_int_t)st.stream_len, "stream_backlog", (json_int_t)st.backlog, "dlq",
                      (json_int_t)st.dlq, "db_stock", (json_int_t)o->act.stock_db,
                      "reconcile_drift", (json_int_t)st.reconcile_drift, "reconcile_at", rat,
                      "segments", (json_int_t)o->act.segments, "in_transit",
                      (json_int_t)st.in_transit, "fence", fence, "fence_why", why,
                      "fenced_key_sets", (json_int_t)st.fenced, "lost", (json_int_t)st.lost,
                      "oversold", (json_int_t)st.oversold, "refused_this_process",
                      ref ? ref : json_object()));
    }
    free(o);
}

/* With the definition (and its DB stock) read and Redis ready. */
static void stats_next(struct op *o)
{
    state_read(o, stats_done, 0);
}

int sk_api_admin_stats(struct sk_app *app, h2o_req_t *req, const struct sk_route_match *m)
{
    return activity_route(app, req, m, -1, stats_next);
}

/* /readyz of a node that sells some of its Redis's slots but not all:
 * 200, {"status":"partial","redis":{count_key:n,what_key:what}}. */
static void readyz_partial_reply(struct sk_app *app, h2o_req_t *req, enum sk_route route,
                                 const char *count_key, int n, const char *what_key,
                                 const char *what)
{
    sk_http_reply_json(
        app, req, route, 200,
        json_pack("{s:s,s:{s:i,s:s}}", "status", "partial", "redis", count_key, n, what_key, what));
}

/* /readyz of a node that sells, with sales it would never persist the
 * orders of (preheated from another database, or unknown to its own:
 * sk_ops_orphans_json): 200, {"status":"degraded","message":...,
 * "activities":[{id, reason, store_id, open, message, fix}, ...]}. The node
 * stays in service for its other sales; the named ones are refused. 1 when
 * answered. */
static int readyz_degraded(struct sk_app *app, h2o_req_t *req, enum sk_route route)
{
    struct sk_node_worker *w = sk_node_worker(app->node);
    struct sk_node_sample *smp = calloc(1, sizeof *smp);
    if (!smp) return 0;
    if (w) sk_node_sample_get(w, smp);
    json_t *acts = sk_ops_orphans_json(app, smp);
    free(smp);
    if (!acts || json_array_size(acts) == 0) {
        json_decref(acts);
        return 0;
    }
    sk_http_reply_json(app, req, route, 200,
                       json_pack("{s:s, s:s, s:o}", "status", "degraded", "message",
                                 "activities live in Redis whose orders this node's database "
                                 "would never persist: their purchases are refused; `seckill "
                                 "reconcile` names the fix",
                                 "activities", acts));
    return 1;
}

/* /readyz of a cluster client with slots it cannot serve now: 200,
 * {"status":"partial","redis":{"unserved_slots":N,"slots":"a-b (why), ..."}}. */
static void readyz_partial(struct sk_app *app, h2o_req_t *req, enum sk_route route)
{
    char slots[1024];
    int n = sk_aredis_unserved(app->redis, slots, sizeof slots);
    readyz_partial_reply(app, req, route, "unserved_slots", n, "slots", slots);
}

/* The masters whose settings refuse sales: how many of how many, and
 * the first one's "redis host:port: why". */
struct unsafe_master {
    int n, of;
    char text[420];
};

static void find_unsafe(void *data, const struct sk_aredis_master *am)
{
    struct unsafe_master *u = data;
    const struct sk_rset_finding *f = sk_rsettings_worst(am->verdict, SK_RSET_UNSAFE);
    u->of++;
    if (!f) return;
    if (!u->n++) snprintf(u->text, sizeof u->text, "redis %s: %s", am->addr, f->why);
}

/* /readyz of a client with masters that refuse sales: 503 naming the
 * setting and its fix; a Cluster whose other masters sell: 200 partial,
 * as with unserved slots, naming it. */
static void readyz_unsafe(struct sk_app *app, h2o_req_t *req, enum sk_route route)
{
    struct unsafe_master u = {0, 0, ""};
    sk_aredis_each_master(app->redis, find_unsafe, &u);
    if (u.n >= u.of) {
        sk_http_error(app, req, route, 503, "redis_unsafe", u.text);
        return;
    }
    readyz_partial_reply(app, req, route, "unsafe_masters", u.n, "unsafe", u.text);
}

int sk_api_ops(struct sk_app *app, h2o_req_t *req, const struct sk_route_match *m)
{
    switch (m->route) {
    case SK_ROUTE_healthz:
        sk_http_reply(app, req, m->route, 200, "application/json",
                      H2O_STRLIT("{\"status\":\"ok\"}"));
        return 0;
    case SK_ROUTE_readyz: {
        /* the database's last known health (store_call.h): never a wait */
        char msg[320];
        if (!sk_aredis_ready(app->redis)) {
            snprintf(msg, sizeof msg, "redis not ready: %s", sk_aredis_errstr(app->redis));
            sk_http_error(app, req, m->route, 503, "unavailable", msg);
        } else if (!sk_store_health(app, msg, sizeof msg)) {
            sk_http_error(app, req, m->route, 503, "unavailable", msg);
        } else if (sk_aredis_unsafe(app->redis, NULL)) {
            /* not ready to sell: a setting that could lose orders, named
             * with its fix (redis_settings.h) */
            readyz_unsafe(app, req, m->route);
        } else if (sk_aredis_unserved(app->redis, NULL, 0) > 0) {
            /* a cluster with a master down still sells the other masters'
             * slots: this node is up, and says which slots it cannot serve */
            readyz_partial(app, req, m->route);
        } else if (!readyz_degraded(app, req, m->route)) {
            sk_http_reply(app, req, m->route, 200, "application/json",
                          H2O_STRLIT("{\"status\":\"ready\"}"));
        }
        return 0;
    }
    default: /* /metrics and the dashboard: ops_view.c */
        return sk_http_error(app, req, m->route, 404, "not_found", "no such endpoint");
    }
}
