/* api_webhooks.c - the admin routes of an activity's webhook endpoints
 * (docs/integration.md): list, add, remove, rotate the secret, pause,
 * resume, replay. The endpoints live in the store (store.h, migration
 * 13); the worker's dispatcher (orders/webhooks.h) picks a change up
 * within a second. Every store step runs on the pool (store_call.h); the
 * loop only checks the request and answers. A secret is shown once: in
 * the answer of the add or the rotate that set it. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/clock.h"
#include "core/error.h"
#include "engine/activity.h"
#include "http/app.h"
#include "http/http_body.h"
#include "http/store_call.h"
#include "orders/webhook_sign.h"
#include "store/store.h"

struct wh_op {
    struct sk_app *app;
    enum sk_route route;
    uint64_t aid;
    char name[SK_BODY_WH_NAME_MAX];
    struct sk_body_webhook body;         /* add */
    char secret[SK_STORE_WH_SECRET_MAX]; /* add, rotate: the one set */
    int64_t keep_s, since_ms, now_ms;
    struct sk_store_webhook row, *rows; /* add; list */
    size_t n;
    int no_activity;
    int64_t cursor, replayed; /* replay */
    char err[256];
};

static void op_free(struct wh_op *o)
{
    free(o->rows);
    free(o);
}

static int wh_run(sk_store *st, void *ctx)
{
    struct wh_op *o = ctx;
    struct sk_activity a;
    int rc = sk_store_activity_get(st, o->aid, &a);
    if (rc == SK_ENOTFOUND) o->no_activity = 1;
    if (rc == 0) switch (o->route) {
        case SK_ROUTE_admin_webhooks:
            rc = sk_store_webhook_list(st, o->aid, &o->rows, &o->n);
            break;
        case SK_ROUTE_admin_webhook_add:
            o->row.activity_id = o->aid;
            snprintf(o->row.name, sizeof o->row.name, "%s", o->body.name);
            snprintf(o->row.url, sizeof o->row.url, "%s", o->body.url);
            snprintf(o->row.events, sizeof o->row.events, "%s", o->body.events);
            snprintf(o->row.secret, sizeof o->row.secret, "%s", o->secret);
            rc = sk_store_webhook_add(st, &o->row, o->now_ms);
            break;
        case SK_ROUTE_admin_webhook_remove:
            rc = sk_store_webhook_remove(st, o->aid, o->name);
            break;
        case SK_ROUTE_admin_webhook_rotate:
            rc = sk_store_webhook_rotate(st, o->aid, o->name, o->secret,
                                         o->now_ms + o->keep_s * 1000, o->now_ms);
            break;
        case SK_ROUTE_admin_webhook_pause:
        case SK_ROUTE_admin_webhook_resume:
            rc = sk_store_webhook_pause(st, o->aid, o->name,
                                        o->route == SK_ROUTE_admin_webhook_pause, o->now_ms);
            break;
        case SK_ROUTE_admin_webhook_replay: {
            struct sk_store_webhook w;
            char key[SK_STORE_WH_KEY_MAX];
            sk_store_webhook_key(key, o->aid, o->name);
            rc = sk_store_webhook_get(st, o->aid, o->name, &w);
            if (rc == 0)
                rc = sk_store_webhook_rewind(st, key, o->since_ms, o->now_ms, &o->cursor,
                                             &o->replayed);
            break;
        }
        default: rc = SK_EINVAL;
        }
    if (rc < 0 && rc != SK_ENOTFOUND && rc != SK_EEXIST && rc != SK_ESTATE)
        snprintf(o->err, sizeof o->err, "%s", sk_store_errstr(st));
    return rc;
}

/* The filter as a JSON array ("" = every event: ["*"]). */
static json_t *events_json(const char *events)
{
    json_t *a = json_array();
    const char *p = events[0] ? events : "*";
    while (a && *p) {
        size_t n = strcspn(p, ",");
        json_array_append_new(a, json_stringn(p, n));
        p += n;
        if (*p == ',') p++;
    }
    return a;
}

/* An endpoint as the API shows it: never its secrets. */
static json_t *item(const struct sk_store_webhook *w, int64_t now)
{
    char created[SK_TIME_RFC3339_MAX], until[SK_TIME_RFC3339_MAX], key[SK_STORE_WH_KEY_MAX];
    sk_time_format_rfc3339(w->created_ms, created, sizeof created);
    sk_store_webhook_key(key, w->activity_id, w->name);
    json_t *o =
        json_pack("{s:s, s:s, s:s, s:o, s:b, s:s}", "name", w->name, "endpoint", key, "url", w->url,
                  "events", events_json(w->events), "paused", w->paused, "created", created);
    if (o && w->secret_prev[0] && w->prev_until_ms > now) {
        sk_time_format_rfc3339(w->prev_until_ms, until, sizeof until);
        json_object_set_new(o, "previous_secret_until", json_string(until));
    }
    return o;
}

static void wh_done(struct sk_app *app, h2o_req_t *req, void *ctx, int rc)
{
    struct wh_op *o = ctx;
    enum sk_route r = o->route;
    char msg[200];
    if (!req) {
        op_free(o);
        return;
    }
    if (rc == SK_ENOTFOUND && o->no_activity) {
        sk_http_error(app, req, r, 404, "unknown_activity", "no such activity");
    } else if (rc == SK_ENOTFOUND) {
        snprintf(msg, sizeof msg, "activity %" PRIu64 " has no webhook endpoint named %s", o->aid,
                 o->name);
        sk_http_error(app, req, r, 404, "unknown_webhook", msg);
    } else if (rc == SK_EEXIST) {
        snprintf(msg, sizeof msg,
                 "activity %" PRIu64 " has a webhook endpoint named %s already: remove it first, "
                 "or choose another name",
                 o->aid, o->body.name);
        sk_http_error(app, req, r, 409, "webhook_exists", msg);
    } else if (rc == SK_ESTATE) {
        snprintf(msg, sizeof msg, "an activity has at most %d webhook endpoints",
                 SK_STORE_WH_PER_ACTIVITY);
        sk_http_error(app, req, r, 409, "too_many_webhooks", msg);
    } else if (rc < 0) {
        sk_http_db_error(app, req, r, rc, o->err);
    } else if (r == SK_ROUTE_admin_webhooks) {
        json_t *a = json_array();
        for (size_t i = 0; a && i < o->n; i++)
            json_array_append_new(a, item(&o->rows[i], o->now_ms));
        sk_http_reply_json(
            app, req, r, 200,
            a ? json_pack("{s:I, s:o}", "activity_id", (json_int_t)o->aid, "webhooks", a) : NULL);
    } else if (r == SK_ROUTE_admin_webhook_add) {
        json_t *j = item(&o->row, o->now_ms);
        if (j) json_object_set_new(j, "secret", json_string(o->secret)); /* once, here */
        sk_http_reply_json(app, req, r, 201, j);
    } else if (r == SK_ROUTE_admin_webhook_rotate) {
        char until[SK_TIME_RFC3339_MAX];
        sk_time_format_rfc3339(o->now_ms + o->keep_s * 1000, until, sizeof until);
        sk_http_reply_json(app, req, r, 200,
                           json_pack("{s:s, s:s, s:s}", "name", o->name, "secret", o->secret,
                                     "previous_secret_until", until));
    } else if (r == SK_ROUTE_admin_webhook_replay) {
        sk_http_reply_json(app, req, r, 200,
                           json_pack("{s:s, s:I, s:I}", "name", o->name, "events",
                                     (json_int_t)o->replayed, "cursor", (json_int_t)o->cursor));
    } else {
        sk_http_reply_json(app, req, r, 200,
                           r == SK_ROUTE_admin_webhook_remove
                               ? json_pack("{s:s, s:b}", "name", o->name, "removed", 1)
                               : json_pack("{s:s, s:b}", "name", o->name, "paused",
                                           r == SK_ROUTE_admin_webhook_pause));
    }
    op_free(o);
}

/* The request's checks, each answering 4xx and returning non-zero. */
static int body_or_reply(struct sk_app *app, h2o_req_t *req, struct wh_op *o)
{
    const char *b = req->entity.base;
    size_t len = b ? req->entity.len : 0;
    char err[400];
    int rc = 0;
    switch (o->route) {
    case SK_ROUTE_admin_webhook_add:
        rc = sk_body_webhook_add(b, len, &o->body, err, sizeof err);
        if (rc == 0 && o->body.secret[0])
            snprintf(o->secret, sizeof o->secret, "%s", o->body.secret);
        else if (rc == 0 && sk_wh_secret_new(o->secret, sizeof o->secret) < 0)
            rc = SK_ENOMEM;
        break;
    case SK_ROUTE_admin_webhook_rotate:
        rc = sk_body_webhook_rotate(b, len, o->secret, sizeof o->secret, &o->keep_s, err,
                                    sizeof err);
        if (rc == 0 && !o->secret[0] && sk_wh_secret_new(o->secret, sizeof o->secret) < 0)
            rc = SK_ENOMEM;
        break;
    case SK_ROUTE_admin_webhook_replay:
        rc = sk_body_webhook_replay(b, len, &o->since_ms, err, sizeof err);
        break;
    case SK_ROUTE_admin_webhooks: return 0;
    default: return sk_http_options_or_reply(app, req, o->route, 0, NULL);
    }
    if (rc == SK_ENOMEM)
        sk_http_error(app, req, o->route, 503, "unavailable", "out of memory");
    else if (rc < 0)
        sk_http_error(app, req, o->route, 400, "bad_request", err);
    return rc < 0;
}

int sk_api_webhooks(struct sk_app *app, h2o_req_t *req, const struct sk_route_match *m)
{
    if (sk_http_admin_or_reply(app, req, m->route)) return 0;
    if (m->id > SK_ACTIVITY_ID_MAX)
        return sk_http_error(app, req, m->route, 404, "unknown_activity", "no such activity");
    if (m->route != SK_ROUTE_admin_webhooks && m->route != SK_ROUTE_admin_webhook_add &&
        !sk_body_wh_name_ok(m->param, m->param_len))
        return sk_http_error(app, req, m->route, 400, "bad_request",
                             "the endpoint's name in the path is 1 to 32 of A-Z a-z 0-9 _ . -");
    struct wh_op *o = calloc(1, sizeof *o);
    if (!o) return sk_http_error(app, req, m->route, 503, "unavailable", "out of memory");
    o->app = app;
    o->route = m->route;
    o->aid = m->id;
    o->now_ms = sk_wall_ms();
    if (m->param) memcpy(o->name, m->param, m->param_len);
    if (body_or_reply(app, req, o)) {
        op_free(o);
        return 0;
    }
    sk_store_call(app, req, m->route, wh_run, wh_done, o);
    return 0;
}
