/* http_server.c - one event-loop process of `seckill serve`: h2o set-up
 * (its loop, context and request objects; the HTTP/1.1 connections are
 * http1.c's), the listening sockets (SO_REUSEPORT, so N processes share a
 * port; the connections on them are conns.c's), routing through
 * routes.def, reply helpers, the loop with end-of-pass flushing, and
 * graceful draining on SIGTERM. */
#include "http/http_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "core/redact.h"
#include "core/sig.h"
#include "core/vec.h"
#include "http/act_defs.h"
#include "http/api_purchase.h"
#include "http/app.h"
#include "http/auth.h"
#include "http/auth_jwt.h"
#include "http/challenge_http.h"
#include "http/client_ip.h"
#include "http/cors_http.h"
#include "http/http_body.h"
#include "http/order_marks.h"
#include "http/purchase_batch.h"
#include "http/reload.h"
#include "http/store_call.h"

static volatile sig_atomic_t stop_requested;

static void on_stop_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

struct app_handler {
    h2o_handler_t super;
    struct sk_app *app;
    int ops; /* the handler of the --ops-listen port */
};

static const sk_route_fn route_fns[SK_ROUTE_COUNT] = {
    [SK_ROUTE_purchase] = sk_api_purchase,
    [SK_ROUTE_activity] = sk_api_activity,
    [SK_ROUTE_admin_create] = sk_api_admin_create,
    [SK_ROUTE_admin_preheat] = sk_api_admin_preheat,
    [SK_ROUTE_admin_open] = sk_api_admin_switch,
    [SK_ROUTE_admin_close] = sk_api_admin_switch,
    [SK_ROUTE_admin_stats] = sk_api_admin_stats,
    [SK_ROUTE_admin_list] = sk_api_admin_list,
    [SK_ROUTE_admin_delete] = sk_api_admin_delete,
    [SK_ROUTE_order_get] = sk_api_order_get,
    [SK_ROUTE_order_pay] = sk_api_order_pay,
    [SK_ROUTE_order_cancel] = sk_api_order_cancel,
    [SK_ROUTE_healthz] = sk_api_ops,
    [SK_ROUTE_readyz] = sk_api_ops,
    [SK_ROUTE_metrics] = sk_api_ops_metrics,
    [SK_ROUTE_dashboard] = sk_api_ops_dashboard,
    [SK_ROUTE_dashboard_data] = sk_api_ops_data,
    [SK_ROUTE_queue_join] = sk_api_queue,
    [SK_ROUTE_queue_poll] = sk_api_queue,
    [SK_ROUTE_admin_pace_set] = sk_api_queue_pace,
    [SK_ROUTE_admin_pace_get] = sk_api_queue_pace,
    [SK_ROUTE_register] = sk_api_register,
    [SK_ROUTE_register_get] = sk_api_register,
    [SK_ROUTE_admin_queue_control] = sk_api_queue_control,
    [SK_ROUTE_sale_page] = sk_api_sale_page,
    [SK_ROUTE_sale_live] = sk_api_sale_live,
    [SK_ROUTE_sale_time] = sk_api_sale_time,
    [SK_ROUTE_challenge] = sk_api_challenge,
    [SK_ROUTE_admin_webhooks] = sk_api_webhooks,
    [SK_ROUTE_admin_webhook_add] = sk_api_webhooks,
    [SK_ROUTE_admin_webhook_remove] = sk_api_webhooks,
    [SK_ROUTE_admin_webhook_rotate] = sk_api_webhooks,
    [SK_ROUTE_admin_webhook_pause] = sk_api_webhooks,
    [SK_ROUTE_admin_webhook_resume] = sk_api_webhooks,
    [SK_ROUTE_admin_webhook_replay] = sk_api_webhooks,
};

/* The routes an operator uses; with --ops-listen they answer only there. */
static int is_ops_route(enum sk_route r)
{
    return r == SK_ROUTE_healthz || r == SK_ROUTE_readyz || r == SK_ROUTE_metrics ||
           r == SK_ROUTE_dashboard || r == SK_ROUTE_dashboard_data;
}

static const char *reason_of(int status)
{
    switch (status) {
    case 200: return "OK";
    case 201: return "Created";
    case 204: return "No Content";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 413: return "Payload Too Large";
    case 429: return "Too Many Requests";
    case 503: return "Service Unavailable";
    default: return status < 500 ? "Client Error" : "Server Error";
    }
}

/* An answer about one buyer (their purchase, order, place in the queue):
 * no shared cache may keep it, nor the browser store it, whatever the
 * status (a 409 "limit reached" is the buyer's own too). */
static int per_user_route(enum sk_route r)
{
    switch (r) {
    case SK_ROUTE_purchase:
    case SK_ROUTE_order_get:
    case SK_ROUTE_order_pay:
    case SK_ROUTE_order_cancel:
    case SK_ROUTE_queue_join:
    case SK_ROUTE_queue_poll:
    case SK_ROUTE_register:
    case SK_ROUTE_register_get: return 1;
    default: return 0;
    }
}

/* An HTML page may be framed only by --frame-ancestors (default 'self'):
 * a buy button in another site's invisible frame is a click stolen. The
 * CSP header for the browsers that know frame-ancestors (a <meta> CSP
 * cannot carry it), X-Frame-Options for the older ones. */
static void frame_headers(struct sk_app *app, h2o_req_t *req)
{
    static const char dir[] = "frame-ancestors ";
    const char *fa = app->cfg.frame_ancestors[0] ? app->cfg.frame_ancestors : "'self'";
    size_t fl = strlen(fa);
    char *csp = h2o_mem_alloc_pool(&req->pool, sizeof dir - 1 + fl);
    memcpy(csp, dir, sizeof dir - 1);
    memcpy(csp + sizeof dir - 1, fa, fl);
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("content-security-policy"), 0,
                          NULL, csp, sizeof dir - 1 + fl);
    int none = !strcmp(fa, "'none'");
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("x-frame-options"), 0, NULL,
                          none ? "DENY" : "SAMEORIGIN", none ? 4 : 10);
}

void sk_http_reply(struct sk_app *app, h2o_req_t *req, enum sk_route route, int status,
                   const char *content_type, const char *body, size_t len)
{
    req->res.status = status;
    req->res.reason = reason_of(status);
    if (content_type)
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, content_type,
                       strlen(content_type));
    if (per_user_route(route))
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL,
                       H2O_STRLIT("private, no-store"));
    if (route == SK_ROUTE_sale_page || route == SK_ROUTE_dashboard ||
        (content_type && !strncmp(content_type, "text/html", 9)))
        frame_headers(app, req);
    sk_cors_reply_headers(app, req);
    if (app->draining)
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONNECTION, NULL,
                       H2O_STRLIT("close"));
    sk_metrics_request(app->metrics, sk_metrics_route_of(route), status);
    if (route == SK_ROUTE_purchase) {
        struct timeval now;
        gettimeofday(&now, NULL);
        const struct timeval *t0 = &req->timestamps.request_begin_at;
        sk_metrics_purchase_latency(app->metrics, (double)(now.tv_sec - t0->tv_sec) +
                                                      (double)(now.tv_usec - t0->tv_usec) / 1e6);
    }
    req->res.content_length = len; /* no chunked framing for a known length */
    h2o_send_inline(req, body, len);
}

void sk_http_reply_json(struct sk_app *app, h2o_req_t *req, enum sk_route route, int status,
                        json_t *o)
{
    char *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (body)
        sk_http_reply(app, req, route, status, "application/json", body, strlen(body));
    else
        sk_http_error(app, req, route, 503, "unavailable", "out of memory");
    free(body);
}

int sk_http_error(struct sk_app *app, h2o_req_t *req, enum sk_route route, int status,
                  const char *code, const char *message)
{
    char body[1024];
    int n = sk_body_error_json(code, message, body, sizeof body);
    if (n < 0) n = sk_body_error_json(code, "", body, sizeof body); /* too long: the code alone */
    sk_http_reply(app, req, route, status, "application/json", body, n > 0 ? (size_t)n : 0);
    return 0;
}

const char *sk_http_header(h2o_req_t *req, const char *name, size_t *len)
{
    ssize_t i = h2o_find_header_by_str(&req->headers, name, strlen(name), -1);
    if (i < 0) {
        *len = 0;
        return NULL;
    }
    *len = req->headers.entries[i].value.len;
    return req->headers.entries[i].value.base;
}

/* The buyer's token checked with the configured secrets (two during a
 * rotation, told apart by the token's key id) and the lifetime bound. */
static int hmac_user(struct sk_app *app, const char *tok, size_t tl, uint64_t *uid)
{
    const struct sk_config *c = &app->cfg;
    struct sk_auth_key keys[2] = {
        {c->hmac_key_id, c->hmac_secret, strlen(c->hmac_secret)},
        {c->hmac_key_id_prev, c->hmac_secret_prev, strlen(c->hmac_secret_prev)}};
    return sk_auth_verify_token_keys(keys, c->hmac_secret_prev[0] ? 2 : 1, tok, tl,
                                     sk_wall_ms() / 1000, c->hmac_max_ttl_s, uid);
}

/* The buyer's JSON Web Token checked with the key set (auth_jwt.h). */
static int jwt_user(struct sk_app *app, const char *tok, size_t tl, uint64_t *uid)
{
    const struct sk_config *c = &app->cfg;
    struct sk_jwt_policy p = {c->jwt_issuer, c->jwt_audience, c->jwt_user_claim, c->jwt_leeway_s,
                              c->jwt_max_ttl_s};
    const char *why;
    int rc = sk_jwt_verify(app->jwt, &p, tok, tl, sk_wall_ms() / 1000, uid, &why);
    if (rc < 0) sk_log(SK_LOG_DEBUG, "refused a token: %s", why);
    return rc;
}

int sk_http_user_or_reply(struct sk_app *app, h2o_req_t *req, enum sk_route route, uint64_t *uid)
{
    size_t len, tl;
    const char *v, *tok, *why = NULL;
    struct sk_ip peer;
    if (app->cfg.auth_hmac || app->cfg.auth_jwt) {
        v = sk_http_header(req, "authorization", &len);
        if (!v || sk_auth_bearer(v, len, &tok, &tl) < 0 ||
            (app->cfg.auth_jwt ? jwt_user(app, tok, tl, uid) : hmac_user(app, tok, tl, uid)) < 0)
            why = "a valid Authorization: Bearer <user token> is required";
    } else if (app->cfg.n_trusted_proxies > 0 &&
               !(sk_http_peer_ip(req, &peer) && sk_config_is_trusted_proxy(&app->cfg, &peer))) {
        /* With trusted proxies configured, only they may name the buyer: a
         * client that reaches the port directly cannot act as anyone. */
        why = "X-User-Id is accepted only from a trusted proxy";
    } else if (!(v = sk_http_header(req, "x-user-id", &len)) ||
               sk_auth_parse_user_id(v, len, uid) < 0) {
        why = "X-User-Id must be a positive integer user id";
    }
    if (!why) return 0;
    sk_metrics_refusal(app->metrics, "unauthorized");
    sk_http_error(app, req, route, 401, "unauthorized", why);
    return 1;
}

int sk_http_admin_or_reply(struct sk_app *app, h2o_req_t *req, enum sk_route route)
{
    size_t len, tl;
    const char *tok;
    const char *v = sk_http_header(req, "authorization", &len);
    const char *want = app->cfg.admin_token;
    if (!want[0] || !v || sk_auth_bearer(v, len, &tok, &tl) < 0 ||
        !sk_auth_equal(tok, tl, want, strlen(want))) {
        sk_http_error(app, req, route, 401, "unauthorized", "admin token required");
        return 1;
    }
    return 0;
}

int sk_http_redis_or_reply(struct sk_app *app, h2o_req_t *req, enum sk_route route)
{
    if (sk_aredis_ready(app->redis)) return 0;
    sk_metrics_refusal(app->metrics, "unavailable");
    sk_http_error(app, req, route, 503, "unavailable", "redis is unreachable; try again");
    return 1;
}

int sk_http_options_or_reply(struct sk_app *app, h2o_req_t *req, enum sk_route route,
                             int allow_force, int *force)
{
    char err[320];
    int f = 0;
    if (sk_body_options(req->entity.base, req->entity.base ? req->entity.len : 0, allow_force, &f,
                        err, sizeof err) == 0) {
        if (force) *force = f;
        return 0;
    }
    sk_http_error(app, req, route, 400, "bad_request", err);
    return 1;
}

struct sk_guard {
    struct sk_async_req *a;
};

static void guard_dispose(void *p)
{
    struct sk_guard *g = p;
    if (g->a) {
        g->a->req = NULL;
        g->a->guard = NULL;
    }
}

void sk_async_begin(struct sk_app *app, struct sk_async_req *a, h2o_req_t *req, enum sk_route route)
{
    a->req = req;
    a->route = route;
    a->guard = h2o_mem_alloc_shared(&req->pool, sizeof *a->guard, guard_dispose);
    a->guard->a = a;
    /* a purchase's sojourn, handler to answer: what CoDel's rule watches
     * (admit_limit.h) */
    if (route == SK_ROUTE_purchase) {
        a->t0_us = sk_mono_us();
        sk_admit_begin(&app->admit, a->t0_us);
    }
    app->inflight++;
    sk_metrics_inflight(app->metrics, 1);
}

h2o_req_t *sk_async_end(struct sk_app *app, struct sk_async_req *a)
{
    if (a->guard) a->guard->a = NULL;
    a->guard = NULL;
    if (a->route == SK_ROUTE_purchase) {
        int64_t now = sk_mono_us();
        sk_admit_done(&app->admit, now - a->t0_us, now);
    }
    app->inflight--;
    sk_metrics_inflight(app->metrics, -1);
    return a->req;
}

/* A request the HTTP layer refuses (http1_parse.h: ambiguous framing or
 * sender, a head or body over the limits, a malformed head): answered
 * like every error, and its connection closes after the answer, so that
 * whatever followed it is never read as a request. */
static void on_refused(h2o_handler_t *self, h2o_req_t *req, int status, const char *code,
                       const char *message)
{
    struct sk_app *app = ((struct app_handler *)self)->app;
    req->http1_is_persistent = 0;
    sk_log(SK_LOG_DEBUG, "refused a request: %s", message);
    if (status == 503) /* the request bytes are over the cap: a moment */
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_RETRY_AFTER, NULL, H2O_STRLIT("1"));
    sk_http_error(app, req, SK_ROUTE_COUNT, status, code, message);
}

static int on_req(h2o_handler_t *self, h2o_req_t *req)
{
    struct sk_app *app = ((struct app_handler *)self)->app;
    int ops_port = ((struct app_handler *)self)->ops;
    struct sk_route_match m;
    /* (the HTTP layer refuses larger bodies before reading them) */
    if (req->entity.base && req->entity.len > (size_t)app->cfg.max_body) {
        char msg[96];
        snprintf(msg, sizeof msg, "request body over %lld bytes", app->cfg.max_body);
        return sk_http_error(app, req, SK_ROUTE_COUNT, 413, "payload_too_large", msg);
    }
    if (sk_cors_preflight_or_reply(app, req)) return 0;
    sk_router_match(req->method.base, req->method.len, req->path.base, req->path.len, &m);
    /* with an ops port, each port knows only its own routes */
    if (app->ops_fd >= 0 && m.status != 404 && is_ops_route(m.route) != ops_port) m.status = 404;
    if (m.status == 404)
        return sk_http_error(app, req, SK_ROUTE_COUNT, 404, "not_found", "no such endpoint");
    if (m.status == 405) {
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_ALLOW, NULL, m.allow,
                       strlen(m.allow));
        return sk_http_error(app, req, m.route, 405, "method_not_allowed",
                             "method not allowed here");
    }
    if (m.status == 400)
        return sk_http_error(app, req, m.route, 400, "bad_request",
                             "id must be a positive integer");
    return route_fns[m.route](app, req, &m);
}

int sk_server_listen_fd(const char *addr, int backlog, int reuseport, char *err, size_t cap)
{
    char host[256];
    const char *colon = strrchr(addr, ':');
    if (!colon || (size_t)(colon - addr) >= sizeof host)
        return sk_einval(err, cap, "listen address must be HOST:PORT");
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = 0;
    size_t hl = strlen(host);
    if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') { /* [::1]:8080 */
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = 0;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE},
                    *res;
    int gai = getaddrinfo(host[0] ? host : NULL, colon + 1, &hints, &res);
    if (gai) return sk_einval(err, cap, "cannot resolve %s: %s", addr, gai_strerror(gai));
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), on = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) < 0 ||
        (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) < 0) ||
        bind(fd, res->ai_addr, res->ai_addrlen) < 0 || (backlog > 0 && listen(fd, backlog) < 0)) {
        snprintf(err, cap, "cannot listen on %s: %s", addr, strerror(errno));
        if (fd >= 0) close(fd);
        freeaddrinfo(res);
        return SK_EIO;
    }
    freeaddrinfo(res);
    return fd;
}

static void start_drain(struct sk_app *app)
{
    app->draining = 1;
    sk_conns_drain(&app->conns);
    if (app->ops_fd >= 0) sk_conns_drain(&app->ops_conns);
    sk_log(SK_LOG_INFO, "draining: %d requests in flight", app->inflight);
}

/* The process's app: one per process, lives until exit. */
static struct sk_app
    *volatile running_app; /* volatile: a never-read static store would be optimised away */

/* The metrics, the activity definitions cache and the listening socket.
 * On failure: logged, what was made released (app included), -1. */
static int open_resources(struct sk_app *app)
{
    const struct sk_config *cfg = &app->cfg;
    char err[256] = "out of memory";
    app->metrics = sk_metrics_attach(sk_node_api_mem(app->node, app->slot));
    app->defs = sk_act_defs_new();
    app->keysets = sk_keysets_new();
    app->purchases = sk_purchases_new();
    app->ops_fd = -1;
    app->listen_fd = app->metrics && app->defs && app->keysets && app->purchases
                         ? sk_server_listen_fd(cfg->listen, 4096, 1, err, sizeof err)
                         : -1;
    if (app->listen_fd >= 0 && cfg->ops_listen[0]) {
        app->ops_fd = sk_server_listen_fd(cfg->ops_listen, 256, 1, err, sizeof err);
        if (app->ops_fd < 0) {
            close(app->listen_fd);
            app->listen_fd = -1;
        }
    }
    if (app->listen_fd < 0) {
        sk_log(SK_LOG_ERROR, "%s", app->metrics ? err : "no slot for the metrics");
        sk_act_defs_free(app, app->defs);
        sk_keysets_free(app->keysets);
        sk_purchases_free(app->purchases);
        if (app->own_node) sk_node_free(app->node);
        free(app);
        return -1;
    }
    app->proc = sk_node_proc_at(app->node, app->slot);
    sk_node_proc_start(app->proc, SK_NODE_API);
    return 0;
}

/* One h2o configuration: a host and a path whose requests the HTTP layer
 * (http1.h) hands to on_req. h2o's own HTTP/1 and HTTP/2 are never used:
 * the HTTP/2 preface is a malformed HTTP/1.1 request here. */
static void setup_conf(struct sk_app *app, h2o_globalconf_t *conf, int ops)
{
    h2o_config_init(conf);
    conf->server_name = h2o_iovec_init(H2O_STRLIT("seckill"));
    h2o_hostconf_t *host =
        h2o_config_register_host(conf, h2o_iovec_init(H2O_STRLIT("default")), 65535);
    h2o_pathconf_t *path = h2o_config_register_path(host, "/", 0);
    struct app_handler *h = (struct app_handler *)h2o_create_handler(path, sizeof *h);
    h->super.on_req = on_req;
    h->app = app;
    h->ops = ops;
}

/* h2o's configuration and context (and the ops port's configuration). */
static void setup_h2o(struct sk_app *app)
{
    setup_conf(app, &app->h2o_config, 0);
    h2o_context_init(&app->ctx, h2o_evloop_create(), &app->h2o_config);
    if (app->ops_fd >= 0) setup_conf(app, &app->ops_config, 1);
}

/* The pipelined Redis client on the loop. Gives Redis a moment before
 * taking traffic, so a fresh process does not answer its share with 503s;
 * then goes on regardless (/healthz must answer while Redis is down).
 * -1 (logged, the listening socket closed) when the client cannot be made. */
static int connect_redis(struct sk_app *app)
{
    const struct sk_config *cfg = &app->cfg;
    char err[256];
    struct sk_aredis_opts o = {.timeout_ms = cfg->redis_timeout_ms,
                               .sync_replicas = cfg->sync_replicas,
                               .sync_timeout_ms = cfg->sync_timeout_ms,
                               .no_functions = !cfg->redis_functions};
    if (sk_aredis_new_opts(&app->redis, app->ctx.loop, cfg->redis, &o, err, sizeof err) < 0) {
        char safe[sizeof cfg->redis];
        sk_log(SK_LOG_ERROR, "redis %s: %s", sk_redact_url(cfg->redis, safe, sizeof safe), err);
        close(app->listen_fd);
        if (app->ops_fd >= 0) close(app->ops_fd);
        return -1;
    }
    int64_t ready_by = sk_mono_ms() + cfg->redis_timeout_ms;
    while (!sk_aredis_ready(app->redis) && sk_mono_ms() < ready_by && !stop_requested) {
        sk_node_proc_beat(app->proc, sk_wall_ms()); /* waiting is not hanging */
        h2o_evloop_run(app->ctx.loop, 10);
        sk_aredis_flush(app->redis);
        sk_aredis_tick(app->redis);
    }
    return 0;
}

/* The handler of a configuration made by setup_conf. */
static h2o_handler_t *handler_of(h2o_globalconf_t *conf)
{
    return conf->hosts[0]->paths.entries[0].handlers.entries[0];
}

/* The connections of a listener: the buyers' port with the configured cap,
 * the operations port (a few private connections) with none. */
static void listen_on(struct sk_app *app, struct sk_conns *cs, h2o_globalconf_t *conf, int fd,
                      long long max_connections)
{
    struct sk_conns_app ca = {
        .ctx = &app->ctx, .hosts = conf->hosts, .handler = handler_of(conf), .refuse = on_refused};
    sk_conns_init(cs, app->ctx.loop, &ca, fd, max_connections, app->cfg.io_timeout_s,
                  (uint64_t)app->cfg.max_body);
    cs->mem = &app->req_mem;
    sk_conns_listen(cs);
}

static void start_accepting(struct sk_app *app)
{
    app->req_mem.max = app->cfg.max_request_bytes > 0
                           ? (size_t)app->cfg.max_request_bytes
                           : sk_conns_mem_default(app->cfg.processes, (uint64_t)app->cfg.max_body);
    listen_on(app, &app->conns, &app->h2o_config, app->listen_fd, app->cfg.max_connections);
    if (app->ops_fd >= 0) {
        listen_on(app, &app->ops_conns, &app->ops_config, app->ops_fd, 0);
        sk_log(SK_LOG_INFO,
               "listening on %s, operations on %s (pid %d, at most %lld connections, I/O "
               "timeout %d s)",
               app->cfg.listen, app->cfg.ops_listen, (int)getpid(), app->conns.max,
               app->cfg.io_timeout_s);
        return;
    }
    sk_log(SK_LOG_INFO,
           "listening on %s (pid %d, at most %lld connections, I/O timeout %d s, %zu MiB of "
           "requests)",
           app->cfg.listen, (int)getpid(), app->conns.max, app->cfg.io_timeout_s,
           app->req_mem.max >> 20);
}

/* While draining: 1 when the loop may stop (everything answered for
 * 100 ms, or the drain deadline passed). *idle_since: when the process was
 * last seen idle (0: busy). */
static int drained(struct sk_app *app, int64_t deadline, int64_t *idle_since)
{
    int64_t now = sk_mono_ms();
    int idle = app->inflight == 0 && !sk_keysets_open(app) && sk_conns_busy(&app->conns) == 0 &&
               (app->ops_fd < 0 || sk_conns_busy(&app->ops_conns) == 0);
    if (!idle)
        *idle_since = 0;
    else if (!*idle_since)
        *idle_since = now;
    /* answered and written: a moment for the last requests in the kernel */
    if (idle && now - *idle_since >= 100) return 1;
    if (now > deadline) {
        sk_log(SK_LOG_ERROR, "drain deadline: %d requests in flight, batches %s", app->inflight,
               sk_keysets_open(app) ? "open" : "sent");
        return 1;
    }
    return 0;
}

/* Answers that came outside their connection's own read go out, and the
 * requests their clients pipelined behind them go on. */
static void flush_conns(struct sk_app *app)
{
    sk_conns_flush(&app->conns);
    if (app->ops_fd >= 0) sk_conns_flush(&app->ops_conns);
}

static int conns_waiting(struct sk_app *app)
{
    return sk_conns_has_ready(&app->conns) ||
           (app->ops_fd >= 0 && sk_conns_has_ready(&app->ops_conns));
}

/* The batches and queue calls of the pass, to Redis in one write. */
static void flush_redis(struct sk_app *app)
{
    sk_purchase_flush(app);
    sk_queue_flush(app);
    sk_aredis_flush(app->redis);
}

/* The loop: one pass of events; then the batches of the pass go to Redis
 * (first: Redis works on them while the answers are written), the store
 * calls that completed in the pass are answered (after the purchases: a
 * pass full of polls does not hold the batches back), the answers of the
 * pass go out, and what pipelined requests queued behind them follows.
 * SIGTERM starts a drain of at most 10 s. */
/* How long the loop worked in the evloop run that began at start_us and
 * returned at now_us: all of it when it was not to sleep; else the time
 * since it woke, which h2o stamps (wall clock, whole milliseconds) after
 * its wait: the middle of that millisecond is the estimate. */
static int64_t run_work_us(struct sk_app *app, int slept, int64_t start_us, int64_t now_us)
{
    if (!slept) return now_us - start_us;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    int64_t woke = (int64_t)h2o_now(app->ctx.loop) * 1000 + 500;
    int64_t work = (int64_t)tv.tv_sec * 1000000 + tv.tv_usec - woke;
    if (work < 0) work = 0;
    return work < now_us - start_us ? work : now_us - start_us;
}

static void serve(struct sk_app *app)
{
    int64_t drain_deadline = 0, idle_since = 0;
    for (;;) {
        int64_t start_us = sk_mono_us();
        int slept = !conns_waiting(app);
        h2o_evloop_run(app->ctx.loop, slept ? 20 : 0);
        int64_t run_us = sk_mono_us();
        int64_t work_us = run_work_us(app, slept, start_us, run_us);
        flush_redis(app);
        /* a completion may queue a Redis command (a ledger read, a release) */
        if (sk_store_calls_drain(app)) sk_aredis_flush(app->redis);
        flush_conns(app);
        if (sk_keysets_open(app)) flush_redis(app);
        sk_aredis_tick(app->redis);
        sk_metrics_redis_tick(app->metrics, app->redis);
        sk_purchase_tick(app);
        sk_keysets_tick(app);
        sk_node_proc_beat(app->proc, sk_wall_ms());
        /* readiness, for the supervisor's READY=1 (cmd/serve_notify.h) */
        sk_node_proc_waiting(app->proc, (sk_aredis_ready(app->redis) ? 0 : SK_NODE_WAIT_REDIS) |
                                            (app->db.ok ? 0 : SK_NODE_WAIT_DB));
        sk_conns_tick(&app->conns);
        if (app->ops_fd >= 0) sk_conns_tick(&app->ops_conns);
        sk_reload_tick_app(app, 1);
        sk_ops_view_tick(app);
        sk_store_calls_tick(app);
        int64_t end_us = sk_mono_us();
        sk_admit_set_target(&app->admit, app->cfg.admit_target_ms); /* a reload may change it */
        sk_admit_pass(&app->admit, work_us + end_us - run_us, end_us);
        if (stop_requested && !app->draining) {
            start_drain(app);
            drain_deadline = sk_mono_ms() + 10000;
        }
        if (app->draining && drained(app, drain_deadline, &idle_since)) break;
    }
}

int sk_server_run(const struct sk_config *cfg)
{
    return sk_server_run_in(cfg, NULL, 0);
}

int sk_server_run_in(const struct sk_config *cfg, sk_node *node, int slot)
{
    struct sk_app *app = calloc(1, sizeof *app);
    if (!app) return 1;
    running_app = app;
    app->cfg = *cfg;
    sk_admit_init(&app->admit, app->cfg.admit_target_ms, sk_mono_us());
    app->node = node;
    app->slot = slot;
    if (!node) {
        /* a lone process: one slot of its own, no worker */
        if (sk_node_new(&app->node, 1, sk_metrics_bytes(), 0) < 0) {
            free(app);
            return 1;
        }
        app->own_node = 1;
        app->slot = 0;
    }
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {.sa_handler = on_stop_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sk_sig_unblock_stop();
    if (open_resources(app) < 0) return 1;
    /* the settings a reload may have changed since the fork, and the key set */
    sk_reload_tick_app(app, 0);
    if (app->cfg.auth_jwt && !app->jwt) {
        sk_log(SK_LOG_ERROR, "auth=jwt without a key set");
        return 1;
    }
    setup_h2o(app);
    /* the store's threads start here, after the fork, with their own
     * connections */
    if (sk_store_calls_init(app) < 0) {
        close(app->listen_fd);
        return 1;
    }
    if (sk_challenge_http_init(app) < 0) {
        close(app->listen_fd);
        return 1;
    }
    if (connect_redis(app) < 0) return 1;
    start_accepting(app);
    serve(app);
    int left = app->inflight;
    sk_log(left ? SK_LOG_ERROR : SK_LOG_INFO, "stopped, %d requests unanswered", left);
    /* the CAPTCHA checks and the store first: their last completions may
     * still answer or use Redis */
    sk_challenge_http_free(app);
    sk_store_calls_free(app);
    sk_act_defs_free(app, app->defs);
    app->defs = NULL;
    sk_aredis_free(app->redis);
    sk_keysets_free(app->keysets); /* after the client: its last callbacks end batches */
    sk_purchases_free(app->purchases);
    sk_order_marks_free(app);
    sk_metrics_free(app->metrics);
    if (app->own_node) sk_node_free(app->node);
    /* h2o's context cannot be disposed while client connections are still
     * linked to its timeouts (it asserts); the process is about to exit,
     * so app stays reachable from running_app instead. */
    return left ? 1 : 0;
}
