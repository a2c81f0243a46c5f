/* api_activities.c - the admin routes over the activities as a whole:
 * GET /api/v1/activities (every activity with its live state, what
 * `seckill activity list --json` prints) and DELETE
 * /api/v1/activities/{id} (the rules of `seckill activity delete`:
 * orders/activity_delete.h). Store steps on the pool (store_call.h),
 * Redis steps on the loop, as api_admin.c. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/activity.h"
#include "engine/activity_json.h"
#include "engine/keys.h"
#include "engine/stock.h"
#include "http/act_defs.h"
#include "http/app.h"
#include "http/store_call.h"
#include "orders/activity_delete.h"
#include "orders/order_worker.h"
#include "redis/fanout.h"

/* ---- GET /api/v1/activities ------------------------------------------- */

struct list_op {
    struct sk_async_req a;
    struct sk_app *app;
    struct sk_activity *acts;
    size_t n, answered;
    int failed;
    json_t *items; /* one object per activity, in the store's order */
    char err[256];
};

static void list_free(struct list_op *l)
{
    free(l->acts);
    json_decref(l->items);
    free(l);
}

static int list_run(sk_store *st, void *ctx)
{
    struct list_op *l = ctx;
    int rc = sk_store_activity_list(st, &l->acts, &l->n);
    if (rc < 0) snprintf(l->err, sizeof l->err, "%s", sk_store_errstr(st));
    return rc;
}

static void list_answer(struct list_op *l)
{
    h2o_req_t *req = sk_async_end(l->app, &l->a);
    if (req && l->failed) {
        sk_http_error(l->app, req, SK_ROUTE_admin_list, 503, "unavailable", "redis is unreachable");
    } else if (req) {
        sk_http_reply_json(l->app, req, SK_ROUTE_admin_list, 200,
                           json_pack("{s:O}", "activities", l->items));
    }
    list_free(l);
}

static void on_list_state(struct sk_app *app, void *arg, int rc, const struct sk_activity *a,
                          const struct sk_stock_state *st)
{
    (void)app;
    struct list_op *l = arg;
    if (rc < 0 || !st) l->failed = 1;
    for (size_t i = 0; !l->failed && i < l->n; i++)
        if (l->acts[i].id == a->id)
            json_array_set_new(l->items, i,
                               sk_activity_json(a, st, sk_wall_ms(), SK_AV_LISTED, NULL));
    if (++l->answered == l->n) list_answer(l);
}

static void list_done(struct sk_app *app, h2o_req_t *req, void *ctx, int rc)
{
    struct list_op *l = ctx;
    if (!req) {
        list_free(l);
        return;
    }
    if (rc < 0) {
        sk_http_db_error(app, req, SK_ROUTE_admin_list, rc, l->err);
        list_free(l);
        return;
    }
    if (sk_http_redis_or_reply(app, req, SK_ROUTE_admin_list)) {
        list_free(l);
        return;
    }
    l->items = json_array();
    for (size_t i = 0; l->items && i < l->n; i++)
        json_array_append_new(l->items, json_null());
    sk_async_begin(app, &l->a, req, SK_ROUTE_admin_list);
    if (!l->items) l->failed = 1;
    if (l->n == 0 || !l->items) {
        list_answer(l);
        return;
    }
    size_t n = l->n;
    for (size_t i = 0; i < n; i++)
        sk_activity_state(app, &l->acts[i], on_list_state, l); /* the last answer frees l */
}

int sk_api_admin_list(struct sk_app *app, h2o_req_t *req, const struct sk_route_match *m)
{
    if (sk_http_admin_or_reply(app, req, m->route)) return 0;
    struct list_op *l = calloc(1, sizeof *l);
    if (!l) return sk_http_error(app, req, m->route, 503, "unavailable", "out of memory");
    l->app = app;
    sk_store_call(app, req, m->route, list_run, list_done, l);
    return 0;
}

/* ---- DELETE /api/v1/activities/{id} -------------------------------------
 *
 * The steps of orders/activity_delete.h: the database's facts (pool), the
 * switch and each key set's backlog (Redis), the verdict, the database's
 * part before Redis (pool), the keys dropped (Redis), the row deleted
 * (pool), the answer. */

struct del_op {
    struct sk_async_req a;
    int waiting;        /* a is begun: a Redis step holds the request */
    struct sk_fanout f; /* the Redis steps over the key sets */
    struct sk_app *app;
    uint64_t id;
    int force, step;
    struct sk_activity act;
    struct sk_delete_facts facts;
    int64_t cancelled;
    char why[400];
    char err[256];
};
enum { DEL_FACTS, DEL_PREPARE, DEL_FINISH };

/* A Redis step holds req (NULL: nobody to answer, the delete goes on). */
static void del_hold(struct del_op *o, h2o_req_t *req)
{
    if (!req) return;
    sk_async_begin(o->app, &o->a, req, SK_ROUTE_admin_delete);
    o->waiting = 1;
}

/* The request the Redis step held, or NULL (gone, or none). */
static h2o_req_t *del_release(struct del_op *o)
{
    if (!o->waiting) return NULL;
    o->waiting = 0;
    return sk_async_end(o->app, &o->a);
}

static void del_reply_error(struct del_op *o, h2o_req_t *req, int status, const char *code,
                            const char *msg)
{
    if (req) sk_http_error(o->app, req, SK_ROUTE_admin_delete, status, code, msg);
    free(o);
}

static int del_run(sk_store *st, void *ctx)
{
    struct del_op *o = ctx;
    int rc = 0;
    if (o->step == DEL_FACTS) {
        rc = sk_store_activity_get(st, o->id, &o->act);
        if (rc == 0) rc = sk_delete_db_facts(st, o->id, &o->facts);
    } else if (o->step == DEL_PREPARE) {
        rc = sk_delete_db_prepare(st, o->id, o->force, sk_wall_ms(), &o->cancelled);
    } else {
        rc = sk_delete_db_finish(st, o->id, sk_wall_ms(), o->why);
    }
    if (rc < 0 && rc != SK_ENOTFOUND) snprintf(o->err, sizeof o->err, "%s", sk_store_errstr(st));
    return rc;
}

static void del_done(struct sk_app *app, h2o_req_t *req, void *ctx, int rc);

static void del_bg_done(void *arg, int rc)
{
    struct del_op *o = arg;
    del_done(o->app, NULL, o, rc);
}

/* The next store step, holding req (NULL: the client left; a delete
 * decided goes on to its end). */
static void del_store(struct del_op *o, h2o_req_t *req, int step)
{
    o->step = step;
    if (req) {
        sk_store_call(o->app, req, SK_ROUTE_admin_delete, del_run, del_done, o);
        return;
    }
    if (sk_store_bg(o->app, 0, del_run, del_bg_done, o) < 0) {
        sk_log(SK_LOG_WARN,
               "delete of activity %" PRIu64 ": the client left and the database is busy; "
               "its row stays (state created): delete it again",
               o->id);
        free(o);
    }
}

/* Each key set of the activity (its segments', then its own). */
static int del_key_sets(const struct del_op *o, struct sk_keys *ks)
{
    int n = 0, segs = (int)o->act.segments;
    for (int i = 0; segs > 1 && i < segs; i++)
        sk_keys_seg(&ks[n++], o->id, i);
    sk_keys_for(&ks[n++], o->id);
    return n;
}

static void on_dropped(void *data, redisReply *rep)
{
    struct del_op *o = data;
    if (!rep || rep->type != REDIS_REPLY_INTEGER) o->f.failed = 1;
    sk_fanout_answered(&o->f);
}

static void dropped(struct sk_fanout *f)
{
    struct del_op *o = (struct del_op *)((char *)f - offsetof(struct del_op, f));
    h2o_req_t *req = del_release(o);
    if (f->failed) {
        /* the row stays ("created"): a retry finishes the delete */
        del_reply_error(o, req, 503, "unavailable", "redis is unreachable; nothing is lost, retry");
        return;
    }
    del_store(o, req, DEL_FINISH);
}

/* The database's part is done: the keys go. */
static void del_drop(struct del_op *o, h2o_req_t *req)
{
    struct sk_keys ks[SK_ACTIVITY_SEGMENTS_MAX + 1];
    int n = del_key_sets(o, ks);
    del_hold(o, req);
    sk_fanout_begin(&o->f, dropped);
    for (int i = 0; i < n; i++) {
        const char *argv[SK_STOCK_DROP_ARGC];
        sk_stock_drop_argv(&ks[i], argv);
        sk_fanout_sent(
            &o->f, sk_aredis_command(o->app->redis, on_dropped, o, SK_STOCK_DROP_ARGC, argv, NULL));
    }
    sk_fanout_end(&o->f);
}

/* The facts are in: the verdict. */
static void del_decide(struct del_op *o)
{
    h2o_req_t *req = del_release(o);
    if (!req) {
        free(o); /* nothing was changed */
        return;
    }
    int v = sk_delete_decide(o->id, &o->facts, o->force, o->why, sizeof o->why);
    if (v == SK_ESTATE) {
        del_reply_error(o, req, 409, "is_open", o->why);
        return;
    }
    if (v) {
        del_reply_error(o, req, 409, "open_orders", o->why); /* it says: ?force=true */
        return;
    }
    del_store(o, req, DEL_PREPARE);
}

static void on_backlog(void *data, redisReply *rep)
{
    struct del_op *o = data;
    if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements != 4 ||
        rep->element[0]->type != REDIS_REPLY_INTEGER) {
        o->f.failed = 1;
    } else {
        int64_t e = rep->element[0]->integer;
        o->facts.queued = o->facts.queued < 0 || e < 0 ? -1 : o->facts.queued + e;
    }
    sk_fanout_answered(&o->f);
}

static void backlogs_read(struct sk_fanout *f)
{
    struct del_op *o = (struct del_op *)((char *)f - offsetof(struct del_op, f));
    if (f->failed) {
        del_reply_error(o, del_release(o), 503, "unavailable", "redis is unreachable");
        return;
    }
    del_decide(o);
}

static void on_del_state(struct sk_app *app, void *arg, int rc, const struct sk_activity *a,
                         const struct sk_stock_state *st)
{
    (void)a;
    struct del_op *o = arg;
    if (rc < 0 || !st) {
        del_reply_error(o, del_release(o), 503, "unavailable", "redis is unreachable");
        return;
    }
    o->facts.live = st->exists;
    o->facts.open = st->exists && st->open;
    o->facts.queued = 0;
    /* every key set's backlog, as the CLI reads it (engine/backlog.h) */
    struct sk_keys ks[SK_ACTIVITY_SEGMENTS_MAX + 1];
    int n = del_key_sets(o, ks);
    if (o->act.segments > 1) n--; /* a segmented activity's own tag holds no orders */
    sk_fanout_begin(&o->f, backlogs_read);
    for (int i = 0; i < n; i++) {
        const char *keys[] = {SK_K_BACKLOG_EACH(SK_KEY_OF, &ks[i])};
        const char *args[SK_A_BACKLOG_N] = {[SK_A_BACKLOG_GROUP] = SK_WORKER_GROUP};
        sk_fanout_sent(&o->f, sk_aredis_eval(app->redis, SK_SCRIPT_BACKLOG, SK_K_BACKLOG_N, keys,
                                             SK_A_BACKLOG_N, args, NULL, on_backlog, o));
    }
    sk_fanout_end(&o->f);
}

static void del_done(struct sk_app *app, h2o_req_t *req, void *ctx, int rc)
{
    struct del_op *o = ctx;
    if (rc == SK_ENOTFOUND && o->step == DEL_FACTS) {
        del_reply_error(o, req, 404, "unknown_activity", "no such activity");
        return;
    }
    if (rc < 0) {
        if (req) sk_http_db_error(app, req, SK_ROUTE_admin_delete, rc, o->err);
        free(o);
        return;
    }
    if (o->step == DEL_FACTS) {
        if (!req || sk_http_redis_or_reply(app, req, SK_ROUTE_admin_delete)) {
            free(o);
            return;
        }
        del_hold(o, req);
        sk_activity_state(app, &o->act, on_del_state, o);
        return;
    }
    if (o->step == DEL_PREPARE) {
        del_drop(o, req);
        return;
    }
    /* deleted: this process forgets it at once (the others' caches expire) */
    sk_act_defs_forget(app, o->id);
    struct sk_keyset *c = sk_app_act(app, o->id, SK_ACT_FIND);
    if (c) c->sold_out = 0;
    if (req)
        sk_http_reply_json(app, req, SK_ROUTE_admin_delete, 200,
                           json_pack("{s:I, s:b, s:I, s:I, s:s}", "id", (json_int_t)o->id,
                                     "deleted", 1, "queued_dropped", (json_int_t)o->facts.queued,
                                     "unpaid_cancelled", (json_int_t)o->cancelled, "message",
                                     o->why[0] ? o->why : "no order was left unsettled"));
    free(o);
}

/* ?force=true|false in the query (the body may say {"force":true} too). */
static int query_force_or_reply(struct sk_app *app, h2o_req_t *req, int *force)
{
    const char *q = memchr(req->path.base, '?', req->path.len);
    if (!q) return 0;
    size_t n = req->path.len - (size_t)(++q - req->path.base);
    if (n == 0) return 0;
    if ((n == 10 && !memcmp(q, "force=true", 10)) || (n == 7 && !memcmp(q, "force=1", 7))) {
        *force = 1;
        return 0;
    }
    if ((n == 11 && !memcmp(q, "force=false", 11)) || (n == 7 && !memcmp(q, "force=0", 7)))
        return 0;
    char msg[160];
    size_t name = strcspn(q, "=&");
    snprintf(msg, sizeof msg, "%s: the query may only be force=true or force=false",
             name < n && q[name] == '=' && !memcmp(q, "force", name) ? "force must be true or false"
                                                                     : "unknown query parameter");
    sk_http_error(app, req, SK_ROUTE_admin_delete, 400, "bad_request", msg);
    return 1;
}

int sk_api_admin_delete(struct sk_app *app, h2o_req_t *req, const struct sk_route_match *m)
{
    int force = 0, qforce = 0;
    if (sk_http_admin_or_reply(app, req, m->route)) return 0;
    if (sk_http_options_or_reply(app, req, m->route, 1, &force)) return 0;
    if (query_force_or_reply(app, req, &qforce)) return 0;
    if (m->id > SK_ACTIVITY_ID_MAX)
        return sk_http_error(app, req, m->route, 404, "unknown_activity", "no such activity");
    struct del_op *o = calloc(1, sizeof *o);
    if (!o) return sk_http_error(app, req, m->route, 503, "unavailable", "out of memory");
    o->app = app;
    o->id = m->id;
    o->force = force || qforce;
    del_store(o, req, DEL_FACTS);
    return 0;
}
