/* app.h - internal header of `seckill serve`: the state of one event-loop
 * process, shared by the core (http_server.c), the route handlers (api_*.c,
 * purchase_*.c, ops_view.c) and the files of src/http that serve them. Not
 * part of any public interface. */
#ifndef SK_APP_H
#define SK_APP_H
#include <stddef.h>
#include <stdint.h>

#include <h2o.h>
#include <jansson.h>

#include "core/node_stats.h"
#include "engine/stock.h"
#include "http/admit_limit.h"
#include "http/config.h"
#include "http/conns.h"
#include "http/keysets.h"
#include "http/metrics.h"
#include "http/router.h"
#include "redis/redis_async.h"
#include "redis/redis_conn.h"
#include "store/store_pool.h"

struct sk_batch;
struct sk_purchases;
struct sk_act_defs;
struct sk_order_marks;
struct sk_sale_live;
struct sk_stock_state;
struct sk_activity;
struct sk_chal;

/* /readyz's view of the database: refreshed by a probe on the store pool
 * (store_call.h), never by the request. */
struct sk_db_health {
    int ok;              /* the last probe's answer */
    int probing;         /* a probe is queued or running */
    int64_t probe_since; /* when it was queued (sk_mono_ms) */
    int64_t next_ms;     /* when the next one is due */
    char why[200];       /* the last failure */
    char probe_err[200]; /* written by the probe on its pool thread, read in its done */
    int64_t log_next_ms; /* failed calls are logged at most once in a while */
    uint64_t log_quiet;  /* failed calls not logged since the last line */
    /* what an order poll may expect of the pool (store_call.h) */
    int64_t call_us;        /* recent time a call runs on a pool thread (moving average of
                               times capped at --db-poll-wait-ms; 0: none yet) */
    h2o_linklist_t waiting; /* polls waiting for the database, oldest first */
    int stuck;              /* a call missed its deadline and none has come back
                               from the database since */
    /* The store's identity, passed with every admission ("" until known:
     * then not checked; docs/design.md, "The store's identity"): the one
     * serve read before the fork, else the probe's first answer. */
    char store_id[SK_STOCK_STORE_ID_LEN + 1];
    char probe_id[SK_STOCK_STORE_ID_LEN + 1]; /* written by the probe on its pool thread */
};

/* The order polls this process may still answer now: a token bucket of
 * --poll-rate-max per second (api_orders.c). */
struct sk_poll_budget {
    int64_t tokens; /* millionths of a poll */
    int64_t at_us;  /* last refill (sk_mono_us; 0: never) */
};

struct sk_app {
    struct sk_config cfg;
    h2o_globalconf_t h2o_config;
    h2o_context_t ctx;
    int listen_fd;
    /* --ops-listen: a second listener whose handler knows it is the
     * operations port (its own h2o configuration, the same context) */
    h2o_globalconf_t ops_config;
    struct sk_conns ops_conns;
    int ops_fd;                /* -1: no ops listener */
    sk_node *node;             /* the node's shared figures (a private one for a lone process) */
    int slot;                  /* this process's HTTP slot in node */
    int own_node;              /* 1: node made by this process, freed at exit */
    struct sk_node_proc *proc; /* this process's slot header */
    sk_aredis *redis;
    sk_metrics *metrics;
    sk_store_pool *pool;       /* the database, off the loop (store_call.h) */
    h2o_socket_t *pool_sock;   /* the pool's eventfd on the loop */
    int pool_ready;            /* it fired this pass: completions to drain (store_call.h) */
    h2o_timeout_t db_deadline; /* --db-timeout-ms: every wait for the database */
    struct sk_db_health db;
    struct sk_act_defs *defs;           /* activity definitions (act_defs.h) */
    struct sk_order_marks *order_marks; /* the order worker's progress (order_marks.h) */
    struct sk_poll_budget poll_budget;  /* --poll-rate-max (api_orders.c) */
    struct sk_admit_limit admit;        /* --admit-target-ms: purchases in flight (admit_limit.h) */
    struct sk_jwt_keys *jwt;            /* auth=jwt: the key set (auth_jwt.h; reload.h swaps it) */
    int inflight;                       /* requests accepted, not yet answered */
    int draining;                       /* SIGTERM: no new connections */
    struct sk_keysets *keysets;         /* per key set: activity state, batches (keysets.h) */
    struct sk_conns conns;              /* client connections: accept loop, cap, timeouts */
    struct sk_conns_mem req_mem;        /* request bytes of both listeners (--max-request-bytes) */
    struct sk_sale_live *sale;          /* the buyer's page's live reads (api_sale.c) */
    struct sk_purchases *purchases;     /* the purchase route's own (api_purchase.h) */
    struct sk_chal *chal; /* challenges: the CAPTCHA checks out, the load (challenge_http.h) */
};

/* Route handlers: answer now or later; always return 0. One type, so
 * every handler below has the signature the route table calls. */
typedef int sk_route_handler(struct sk_app *app, h2o_req_t *req, const struct sk_route_match *m);
typedef sk_route_handler *sk_route_fn;
/* api_purchase.c */
sk_route_handler sk_api_purchase;
/* api_admin.c: the activity read, the admin routes and GET /ops */
sk_route_handler sk_api_activity, sk_api_admin_create, sk_api_admin_preheat, sk_api_admin_switch,
    sk_api_admin_stats, sk_api_ops;
/* api_activities.c: GET /api/v1/activities, DELETE /api/v1/activities/{id} */
sk_route_handler sk_api_admin_list, sk_api_admin_delete;
/* api_webhooks.c: an activity's webhook endpoints (list, add, remove,
 * rotate, pause, resume, replay) */
sk_route_handler sk_api_webhooks;
/* ops_view.c: GET /metrics (the node's text), GET / (the dashboard page),
 * GET /dashboard.json (what the page shows). */
sk_route_handler sk_api_ops_metrics, sk_api_ops_dashboard, sk_api_ops_data;
/* The activities this node would never persist the orders of
 * (docs/design.md, "The store's identity"): the worker's last look at
 * Redis (live and unknown to the database, or preheated from another
 * store) and this process's purchases refused store_mismatch in the last
 * ten minutes, one entry per activity {id, reason, store_id, open,
 * message, fix}. A new JSON array (NULL: out of memory); ops_view.c. */
json_t *sk_ops_orphans_json(struct sk_app *app, const struct sk_node_sample *smp);
/* Once per loop pass: the first HTTP process adds a second's sample to the
 * dashboard's history (ops_history.h). */
void sk_ops_view_tick(struct sk_app *app);
/* api_orders.c: an order's read, pay and cancel */
sk_route_handler sk_api_order_get, sk_api_order_pay, sk_api_order_cancel;
/* api_queue.c: the waiting room's join or poll, and its pace */
sk_route_handler sk_api_queue, sk_api_queue_pace;
/* api_fair.c: pre-registration and the waiting room's emergency controls */
sk_route_handler sk_api_register, sk_api_queue_control;
/* api_sale.c: the buyer's page (GET /sale/{id}), the server's clock
 * (GET /api/v1/time) and the page's cheap live read (GET .../live). */
sk_route_handler sk_api_sale_page, sk_api_sale_time, sk_api_sale_live;

/* An activity as a buyer sees it, without holding a request: the
 * definition (this process's cache, act_defs.h) and the live state read
 * with peek.lua (exists, open, stock; every segment's summed). cb runs
 * once on the loop, maybe before this returns: rc 0 with def and st valid
 * during the call; SK_ENOTFOUND; SK_EIO (Redis not ready or no answer);
 * another store code (act_defs.h). api_admin.c. */
typedef void (*sk_activity_peek_cb)(struct sk_app *app, void *arg, int rc,
                                    const struct sk_activity *def, const struct sk_stock_state *st);
void sk_activity_peek(struct sk_app *app, uint64_t id, sk_activity_peek_cb cb, void *arg);
/* The whole live state of activity a (state.lua; a segmented one's
 * segments summed, as the stats route reads it): cb(app, arg, rc, a, st)
 * once on the loop, rc 0 or SK_EIO. a is copied. api_admin.c. */
void sk_activity_state(struct sk_app *app, const struct sk_activity *a, sk_activity_peek_cb cb,
                       void *arg);

/* Replies (body copied into the request's pool) and counts the request in
 * the metrics by route and status. */
void sk_http_reply(struct sk_app *app, h2o_req_t *req, enum sk_route route, int status,
                   const char *content_type, const char *body, size_t len);
/* The JSON object o (taken: a NULL o, or one that cannot be written, is
 * a 503 out of memory). */
void sk_http_reply_json(struct sk_app *app, h2o_req_t *req, enum sk_route route, int status,
                        json_t *o);
/* {"error":code,"message":message}. Returns 0, what a handler that
 * answered returns. */
int sk_http_error(struct sk_app *app, h2o_req_t *req, enum sk_route route, int status,
                  const char *code, const char *message);

/* Validation helpers that reply and return nonzero on failure (the handler
 * then just returns), like Redis's ...OrReply. */
int sk_http_user_or_reply(struct sk_app *app, h2o_req_t *req, enum sk_route route, uint64_t *uid);
int sk_http_admin_or_reply(struct sk_app *app, h2o_req_t *req, enum sk_route route);
int sk_http_redis_or_reply(struct sk_app *app, h2o_req_t *req, enum sk_route route);
/* A route whose body holds no fields, or only {"force": bool} when
 * allow_force (http_body.h, sk_body_options): 400 naming what is wrong;
 * *force (may be NULL) its value. */
int sk_http_options_or_reply(struct sk_app *app, h2o_req_t *req, enum sk_route route,
                             int allow_force, int *force);

/* A header's value, or NULL (len 0) when absent. Name in lower case. */
const char *sk_http_header(h2o_req_t *req, const char *name, size_t *len);

/* End of a loop pass: send the queue calls collected in it (api_queue.c). */
void sk_queue_flush(struct sk_app *app);
/* A purchase with the buyer's pass was admitted: the queue's record says
 * so (the buyer's next poll answers "used"). Fire and forget. */
void sk_queue_spent(struct sk_app *app, uint64_t activity_id, uint64_t user_id,
                    int64_t pass_exp_ms);

/* A request answered later (after a Redis reply). h2o 2.2 does not tell a
 * handler that the client left; instead a guard object lives in the
 * request's pool, and when h2o frees the request it clears a->req, so a
 * late reply never touches freed memory. The sk_async_req itself lives in
 * the caller's heap object. */
struct sk_guard;
struct sk_async_req {
    h2o_req_t *req; /* NULL once the request is gone */
    struct sk_guard *guard;
    enum sk_route route;
    int64_t t0_us; /* a purchase: when its handler ran (sk_mono_us, admit_limit.h) */
};
/* Guards req and counts it in flight. */
void sk_async_begin(struct sk_app *app, struct sk_async_req *a, h2o_req_t *req,
                    enum sk_route route);
/* Ends the wait: returns the request to answer, or NULL if it is gone. */
h2o_req_t *sk_async_end(struct sk_app *app, struct sk_async_req *a);

/* A waiting-room admin request (the pace: api_queue.c; the controls:
 * api_fair.c), the first member of the caller's heap object (calloc'd,
 * begun on the request, filled in, then its definition read with
 * sk_act_defs_lookup), then Redis, then the store when store is set.
 * The steps below free it. */
struct sk_qadmin {
    struct sk_async_req a;
    struct sk_app *app;
    uint64_t id;
    const char *what;     /* the log line's name of what changed */
    const char *unstored; /* the 503 when Redis took it and the store did not */
    int (*store)(sk_store *st, struct sk_qadmin *q); /* NULL: nothing to store */
    void (*reply)(struct sk_app *app, h2o_req_t *req, struct sk_qadmin *q);
    char err[256]; /* the store's failure, for the log line on the loop */
};
/* 1 when the definition (rc, a) has a waiting room and Redis is ready for
 * q; else q is answered (404 unknown_activity / no_waiting_room, the
 * store's or Redis's 503) and freed: 0. */
int sk_qadmin_def_ok(struct sk_qadmin *q, int rc, const struct sk_activity *a);
/* Redis's answer rc (negative: none, or unreadable): SK_RC_OK stores (when
 * q->store is set; off the loop, client or not) then replies; anything
 * else is answered. Takes q. */
void sk_qadmin_answer(struct sk_qadmin *q, int rc);

#endif
