/* api_fair.c - pre-registration and the waiting room's emergency controls
 * over HTTP (docs/fairness.md, docs/waiting-room.md):
 * POST /api/v1/activities/{id}/register (a buyer registers; idempotent,
 * rate-limited like a purchase) and GET (where the buyer stands: registered,
 * their place and pass in a draw), and the admin's
 * POST /api/v1/activities/{id}/queue/control {"action": ...}.
 *
 * Redis is the live record (register.lua, queue_control.lua); the store
 * follows off the loop: a new registrant's row, the controls' bits. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/codes.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/activity.h"
#include "engine/keys.h"
#include "engine/queue.h"
#include "engine/registration.h"
#include "http/act_defs.h"
#include "http/api_purchase.h"
#include "http/app.h"
#include "http/challenge_http.h"
#include "http/client_ip.h"
#include "http/http_body.h"
#include "http/store_call.h"

/* ---- register ------------------------------------------------------------ */

/* One register or status call (heap; owned by the step running). */
struct reg_op {
    struct sk_async_req a;
    struct sk_app *app;
    uint64_t aid, uid;
    int64_t at_ms;
    char ip[SK_IP_TEXT];
    struct sk_ch_pass ch; /* the call's challenge (its ticket is an argument) */
    struct sk_reg_call c;
};

static void reply_reg(struct sk_app *app, h2o_req_t *req, enum sk_route route, uint64_t aid,
                      const struct sk_reg_answer *an)
{
    char body[640];
    int n =
        snprintf(body, sizeof body,
                 "{\"id\":%" PRIu64 ",\"state\":\"%s\",\"registered\":%s,\"registrants\":%" PRId64
                 ",\"drawn\":%" PRId64 ",\"place\":%" PRId64 ",\"winners\":%" PRId64,
                 aid, sk_rc_wire(an->rc), an->registered ? "true" : "false", an->count, an->drawn,
                 an->place, an->winners);
    if (an->pass[0] && n > 0 && (size_t)n < sizeof body)
        n += snprintf(body + n, sizeof body - (size_t)n,
                      ",\"pass\":\"%s\",\"pass_expires_ms\":%" PRId64 ",\"box_start_ms\":%" PRId64,
                      an->pass, an->pass_exp_ms, an->box_start_ms);
    if (n > 0 && (size_t)n < sizeof body) n += snprintf(body + n, sizeof body - (size_t)n, "}");
    sk_http_reply(app, req, route, 200, "application/json", body,
                  n > 0 && (size_t)n < sizeof body ? (size_t)n : 0);
}

/* The durable copy of a new registrant (off the loop, after the answer). */
static int reg_store_run(sk_store *st, void *ctx)
{
    struct reg_op *o = ctx;
    int rc = sk_store_registrations_add(st, o->aid, &o->uid, 1, o->at_ms, NULL);
    if (rc < 0)
        sk_log(SK_LOG_ERROR, "store: registration of %" PRIu64 " for %" PRIu64 ": %s", o->uid,
               o->aid, sk_store_errstr(st));
    return rc;
}

static void reg_store_done(void *arg, int rc)
{
    (void)rc; /* logged by the run; Redis holds the registration */
    free(arg);
}

static void on_register(void *data, redisReply *rep)
{
    struct reg_op *o = data;
    struct sk_app *app = o->app;
    h2o_req_t *req = sk_async_end(app, &o->a);
    enum sk_route route = o->a.route;
    struct sk_reg_answer an;
    int prc = rep ? sk_reg_parse(rep, &an) : SK_EPROTO;
    if (!req) {
        /* the client left; a registration Redis took is still stored */
    } else if (prc < 0) {
        sk_http_error(app, req, route, 503, "unavailable", "redis is unreachable");
    } else if (an.rc == SK_RC_RATE_LIMITED) {
        sk_http_reply_429(app, req, route, SK_RC_RATE_LIMITED, an.retry_ms);
    } else if (sk_rc_http_status(an.rc) == 200) {
        reply_reg(app, req, route, o->aid, &an);
    } else {
        sk_http_error(app, req, route, sk_rc_http_status(an.rc), sk_rc_wire(an.rc),
                      sk_rc_message(an.rc));
    }
    if (prc == 0 && an.added) {
        o->at_ms = sk_wall_ms();
        if (sk_store_bg(app, 0, reg_store_run, reg_store_done, o) == 0) return;
        sk_log(SK_LOG_ERROR,
               "store: registration of %" PRIu64 " for %" PRIu64 " not stored: the"
               " pool refused it (the worker's reconcile copies it from Redis)",
               o->uid, o->aid);
    }
    free(o);
}

/* A register or status call past its checks (and a new registrant past
 * the challenge: docs/challenges.md). */
struct reg_ctx {
    uint64_t aid, uid;
    enum sk_route route;
};

static void register_go(struct sk_app *app, h2o_req_t *req, void *ctx, const struct sk_ch_pass *ch)
{
    const struct reg_ctx *rc = ctx;
    if (sk_http_redis_or_reply(app, req, rc->route)) return;
    struct reg_op *o = calloc(1, sizeof *o);
    if (!o) {
        sk_http_error(app, req, rc->route, 503, "unavailable", "out of memory");
        return;
    }
    o->app = app;
    o->aid = rc->aid;
    o->uid = rc->uid;
    o->ch = *ch;
    const struct sk_config *cf = &app->cfg;
    struct sk_rate_limits rl = {cf->rate_per_user_per_s, cf->rate_burst, cf->rate_per_ip_per_s,
                                cf->rate_ip_burst};
    const char *ip =
        cf->rate_per_ip_per_s > 0 && sk_http_client_ip_key(app, req, o->ip) ? o->ip : NULL;
    char op = rc->route == SK_ROUTE_register ? SK_REG_REGISTER : SK_REG_STATUS;
    sk_reg_call_make(&o->c, rc->aid, op, rc->uid, &rl, ip);
    if (o->ch.present) sk_reg_call_ticket(&o->c, o->ch.ticket, o->ch.id);
    sk_async_begin(app, &o->a, req, rc->route);
    if (sk_aredis_eval(app->redis, SK_SCRIPT_REGISTER, o->c.nkeys, o->c.keys, o->c.nargs, o->c.args,
                       NULL, on_register, o) < 0)
        on_register(o, NULL);
}

int sk_api_register(struct sk_app *app, h2o_req_t *req, const struct sk_route_match *m)
{
    uint64_t uid;
    if (sk_http_user_or_reply(app, req, m->route, &uid)) return 0;
    if (m->route == SK_ROUTE_register && sk_http_options_or_reply(app, req, m->route, 0, NULL))
        return 0;
    struct reg_ctx rc = {.aid = m->id, .uid = uid, .route = m->route};
    struct sk_ch_pass ch = {0};
    /* becoming a registrant takes the sale's challenge (register.lua) */
    if (m->route == SK_ROUTE_register && sk_challenge_or_reply(app, req, m->route, m->id, uid, &ch,
                                                               register_go, &rc, sizeof rc) != 0)
        return 0;
    register_go(app, req, &rc, &ch);
    return 0;
}

/* ---- admin: the emergency controls ---------------------------------------- */

struct ctl_op {
    struct sk_qadmin q;
    int action;
    int64_t segments;
    int64_t bits;
    char draw_state[SK_ACTIVITY_DRAW_STATE_MAX];
};

static void reply_ctl(struct sk_app *app, h2o_req_t *req, struct sk_qadmin *q)
{
    int64_t bits = ((struct ctl_op *)q)->bits;
    char body[256];
    int n =
        snprintf(body, sizeof body,
                 "{\"id\":%" PRIu64 ",\"paused\":%s,\"queue_all\":%s,\"refuse_joins\":%s}", q->id,
                 bits & SK_WR_PAUSE ? "true" : "false", bits & SK_WR_QUEUE_ALL ? "true" : "false",
                 bits & SK_WR_NO_JOINS ? "true" : "false");
    sk_http_reply(app, req, q->a.route, 200, "application/json", body,
                  n > 0 && (size_t)n < sizeof body ? (size_t)n : 0);
}

static int ctl_store(sk_store *st, struct sk_qadmin *q)
{
    const struct ctl_op *o = (const struct ctl_op *)q;
    return sk_store_activity_set_fair(st, q->id, o->bits, o->draw_state);
}

static void on_seg_control(void *data, redisReply *rep)
{
    (void)data;
    (void)rep; /* each segment's hold follows the main key set's; a failure shows in its meta */
}

static void on_control(void *data, redisReply *rep)
{
    struct ctl_op *o = data;
    int ok = rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
             rep->element[0]->type == REDIS_REPLY_INTEGER &&
             rep->element[1]->type == REDIS_REPLY_INTEGER;
    int rc = ok ? (int)rep->element[0]->integer : -1;
    if (rc == SK_RC_OK) {
        o->bits = rep->element[1]->integer;
        /* a segmented sale decides its purchases in its segments: each
         * holds "queue everyone" in its own meta */
        for (int64_t i = 0; o->segments > 1 && i < o->segments; i++) {
            struct sk_keys sk;
            sk_keys_seg(&sk, o->q.id, (int)i);
            const char *keys[] = {SK_K_SEG_CONTROL_EACH(SK_KEY_OF, &sk)};
            const char *args[SK_A_QUEUE_CONTROL_N] = {
                [SK_A_QUEUE_CONTROL_ACTION] = o->bits & SK_WR_QUEUE_ALL ? "seg_all" : "seg_none"};
            sk_aredis_eval(o->q.app->redis, SK_SCRIPT_QUEUE_CONTROL, SK_K_SEG_CONTROL_N, keys,
                           SK_A_QUEUE_CONTROL_N, args, NULL, on_seg_control, NULL);
        }
    }
    sk_qadmin_answer(&o->q, rc);
}

static void on_control_definition(struct sk_app *app, void *arg, int rc,
                                  const struct sk_activity *a)
{
    struct ctl_op *o = arg;
    if (!sk_qadmin_def_ok(&o->q, rc, a)) return;
    o->segments = a->segments;
    snprintf(o->draw_state, sizeof o->draw_state, "%s", a->draw_state);
    struct sk_keys k;
    sk_keys_for(&k, o->q.id);
    const char *keys[] = {SK_K_QUEUE_CONTROL_EACH(SK_KEY_OF, &k)};
    const char *args[SK_A_QUEUE_CONTROL_N] = {[SK_A_QUEUE_CONTROL_ACTION] =
                                                  sk_queue_control_arg(o->action)};
    if (sk_aredis_eval(app->redis, SK_SCRIPT_QUEUE_CONTROL, SK_K_QUEUE_CONTROL_N, keys,
                       SK_A_QUEUE_CONTROL_N, args, NULL, on_control, o) < 0)
        on_control(o, NULL);
}

int sk_api_queue_control(struct sk_app *app, h2o_req_t *req, const struct sk_route_match *m)
{
    if (sk_http_admin_or_reply(app, req, m->route)) return 0;
    int action = 0;
    char err[200];
    if (sk_body_queue_control(req->entity.base, req->entity.base ? req->entity.len : 0, &action,
                              err, sizeof err) < 0)
        return sk_http_error(app, req, m->route, 400, "bad_request", err);
    struct ctl_op *o = calloc(1, sizeof *o);
    if (!o) return sk_http_error(app, req, m->route, 503, "unavailable", "out of memory");
    o->q.app = app;
    o->q.id = m->id;
    o->q.what = "controls";
    o->q.unstored = "the controls are live but the database did not store them; send it again";
    o->q.store = ctl_store;
    o->q.reply = reply_ctl;
    o->action = action;
    sk_async_begin(app, &o->q.a, req, m->route);
    sk_act_defs_lookup(app, m->id, on_control_definition, o);
    return 0;
}
