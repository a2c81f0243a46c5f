/* store_call.c - the HTTP process's store calls (store_call.h): the pool
 * on h2o's loop, the per-request deadline, and the health probe behind
 * /readyz. */
#include "http/store_call.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "core/redact.h"

/* How often /readyz's answer is refreshed. */
#define HEALTH_EVERY_MS 1000

/* A request waiting for its store work. */
struct call {
    struct sk_async_req a;
    struct sk_app *app;
    h2o_timeout_entry_t deadline; /* on app->db_deadline */
    sk_store_job *job;
    sk_call_run_fn run;
    sk_call_done_fn done;
    void *ctx;
    int answered;           /* the deadline answered the request */
    int64_t run_us;         /* how long run took (written on the pool thread, read in done) */
    h2o_linklist_t waiting; /* a poll: in app->db.waiting until answered */
    int64_t since_ms;       /* a poll: when it began to wait */
    int64_t max_wait_ms;    /* a poll: answered 503 once it waited longer */
};

/* Completions are run after the pass's purchase batches left for Redis
 * (sk_store_calls_drain), not here, in the middle of the pass's reads. */
static void on_pool_ready(h2o_socket_t *sock, const char *err)
{
    struct sk_app *app = sock->data;
    (void)err;
    app->pool_ready = 1;
}

size_t sk_store_calls_drain(struct sk_app *app)
{
    if (!app->pool_ready || !app->pool) return 0;
    app->pool_ready = 0;
    return sk_store_pool_drain(app->pool);
}

/* Why the process that forks this one found the database down just
 * before (sk_store_calls_db_down_at_start); "" when it did not. */
static char down_at_start[256];

void sk_store_calls_db_down_at_start(const char *why)
{
    snprintf(down_at_start, sizeof down_at_start, "%s", why ? why : "");
}

/* The identity read before the fork (sk_store_calls_identity). */
static char identity_at_start[SK_STOCK_STORE_ID_LEN + 1];

void sk_store_calls_identity(const char *store_id)
{
    snprintf(identity_at_start, sizeof identity_at_start, "%s", store_id ? store_id : "");
}

int sk_store_calls_init(struct sk_app *app)
{
    memcpy(app->db.store_id, identity_at_start, sizeof app->db.store_id);
    const struct sk_config *cfg = &app->cfg;
    char err[512];
    /* A database that is down does not keep this process from selling:
     * purchases need Redis only, and the handles connect when it answers */
    int rc = sk_store_pool_new_waiting(&app->pool, cfg->db, cfg->db_pool, cfg->db_queue_max,
                                       down_at_start, err, sizeof err);
    char safe[sizeof cfg->db];
    if (rc < 0) {
        sk_log(SK_LOG_ERROR, "store %s: %s", sk_redact_url(cfg->db, safe, sizeof safe), err);
        return rc;
    }
    /* h2o closes the fd it watches: give it its own */
    int fd = dup(sk_store_pool_fd(app->pool));
    if (fd < 0) {
        sk_log(SK_LOG_ERROR, "store pool: cannot watch its eventfd");
        sk_store_pool_free(app->pool);
        app->pool = NULL;
        return SK_EIO;
    }
    app->pool_sock = h2o_evloop_socket_create(app->ctx.loop, fd, H2O_SOCKET_FLAG_DONT_READ);
    app->pool_sock->data = app;
    h2o_socket_read_start(app->pool_sock, on_pool_ready);
    h2o_timeout_init(app->ctx.loop, &app->db_deadline, (uint64_t)cfg->db_timeout_ms);
    /* the pool just opened every handle, or says why it could not */
    app->db.ok = !err[0];
    snprintf(app->db.why, sizeof app->db.why, "%.199s", err);
    if (err[0])
        sk_log(SK_LOG_WARN,
               "store %s: not reachable (%s): serving purchases from Redis; what needs the "
               "database answers 503 until it answers",
               sk_redact_url(cfg->db, safe, sizeof safe), err);
    h2o_linklist_init_anchor(&app->db.waiting);
    app->db.next_ms = sk_mono_ms() + HEALTH_EVERY_MS;
    return 0;
}

void sk_store_calls_free(struct sk_app *app)
{
    if (app->pool_sock) {
        h2o_socket_read_stop(app->pool_sock);
        h2o_socket_close(app->pool_sock);
        app->pool_sock = NULL;
    }
    sk_store_pool *p = app->pool;
    sk_store_pool_free(p); /* runs the last completions: app->pool still set */
    app->pool = NULL;
}

int64_t sk_store_deadline(const struct sk_app *app)
{
    return sk_mono_ms() + app->cfg.db_timeout_ms;
}

/* One warning line per LOG_EVERY_MS at most: a frozen database under
 * load would otherwise write a line per request (and the loop would wait
 * for stderr). */
#define LOG_EVERY_MS 5000

static void log_failure(struct sk_app *app, const char *detail)
{
    struct sk_db_health *h = &app->db;
    int64_t now = sk_mono_ms();
    if (now < h->log_next_ms) {
        h->log_quiet++;
        return;
    }
    if (h->log_quiet)
        sk_log(SK_LOG_WARN, "store: %s (and %" PRIu64 " more failed calls in the last %d s)",
               detail, h->log_quiet, LOG_EVERY_MS / 1000);
    else
        sk_log(SK_LOG_WARN, "store: %s", detail);
    h->log_quiet = 0;
    h->log_next_ms = now + LOG_EVERY_MS;
}

/* 503 unavailable with Retry-After: 1 (the database did not answer in
 * time, or failed); logs why (detail may be NULL). */
static void db_unavailable(struct sk_app *app, h2o_req_t *req, enum sk_route route,
                           const char *detail)
{
    if (detail && *detail) log_failure(app, detail);
    sk_metrics_refusal(app->metrics, "unavailable");
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_RETRY_AFTER, NULL, H2O_STRLIT("1"));
    sk_http_error(app, req, route, 503, "unavailable", "database unavailable; try again");
}

void sk_http_db_error(struct sk_app *app, h2o_req_t *req, enum sk_route route, int rc,
                      const char *detail)
{
    if (rc != SK_EBUSY) {
        db_unavailable(app, req, route, detail);
        return;
    }
    sk_metrics_refusal(app->metrics, "unavailable");
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_RETRY_AFTER, NULL, H2O_STRLIT("1"));
    sk_http_error(app, req, route, 503, "busy", "too many database calls waiting; try again");
}

int sk_http_activity_read_or_reply(struct sk_app *app, h2o_req_t *req, enum sk_route route, int rc)
{
    if (rc >= 0) return 0;
    if (rc == SK_ENOTFOUND)
        sk_http_error(app, req, route, 404, "unknown_activity", "no such activity");
    else
        sk_http_db_error(app, req, route, rc, "activity read: no answer in time");
    return 1;
}

static int call_run(sk_store *st, void *arg)
{
    struct call *c = arg;
    int64_t t0 = sk_mono_us();
    int rc = c->run(st, c->ctx);
    c->run_us = sk_mono_us() - t0;
    return rc;
}

static void call_done(void *arg, int rc)
{
    struct call *c = arg;
    struct sk_db_health *h = &c->app->db;
    if (h2o_linklist_is_linked(&c->waiting)) h2o_linklist_unlink(&c->waiting);
    if (c->run_us > 0) {
        /* it ran: an eighth of the new time, as TCP's srtt; capped, so
         * that one call stuck behind a lock does not close the door on
         * polls long after the lock is gone */
        int64_t cap = (int64_t)c->app->cfg.db_poll_wait_ms * 1000;
        int64_t t = c->run_us < cap ? c->run_us : cap;
        h->call_us = h->call_us ? h->call_us + (t - h->call_us) / 8 : t;
        /* an answer from the database, late or not: it is not stuck */
        if (rc != SK_ETIMEDOUT && rc != SK_EIO) h->stuck = 0;
    }
    if (h2o_timeout_is_linked(&c->deadline)) h2o_timeout_unlink(&c->deadline);
    /* after the deadline the buyer has the 503: this answer goes nowhere */
    h2o_req_t *req = c->answered ? NULL : sk_async_end(c->app, &c->a);
    c->done(c->app, req, c->ctx, rc);
    free(c);
}

/* Gives up on c: answers its request now (503 unavailable, why), and a
 * call still queued never runs; its completion frees c either way. */
static void give_up(struct call *c, const char *why)
{
    struct sk_app *app = c->app;
    sk_store_pool_cancel(app->pool, c->job);
    c->answered = 1;
    if (h2o_linklist_is_linked(&c->waiting)) h2o_linklist_unlink(&c->waiting);
    if (h2o_timeout_is_linked(&c->deadline)) h2o_timeout_unlink(&c->deadline);
    /* Running or queued that long, the pool cannot answer a poll in time
     * until something comes back: remembered, because the waiting polls
     * are answered now and their list is empty again. */
    app->db.stuck = 1;
    h2o_req_t *req = sk_async_end(app, &c->a);
    if (req) db_unavailable(app, req, c->a.route, why);
}

/* The deadline (--db-timeout-ms). */
static void on_call_deadline(h2o_timeout_entry_t *entry)
{
    struct call *c = (struct call *)((char *)entry - offsetof(struct call, deadline));
    char msg[96];
    snprintf(msg, sizeof msg, "no answer within %d ms (--db-timeout-ms)",
             c->app->cfg.db_timeout_ms);
    give_up(c, msg);
}

/* sk_store_call, handing out the call (*out) when it started. */
static int sk_store_call_as(struct sk_app *app, h2o_req_t *req, enum sk_route route,
                            sk_call_run_fn run, sk_call_done_fn done, void *ctx, struct call **out)
{
    struct call *c = ctx ? calloc(1, sizeof *c) : NULL;
    if (!c) {
        free(ctx);
        sk_http_error(app, req, route, 503, "unavailable", "out of memory");
        return SK_ENOMEM;
    }
    *c = (struct call){.app = app, .run = run, .done = done, .ctx = ctx};
    int rc =
        sk_store_pool_submit(app->pool, sk_store_deadline(app), call_run, call_done, c, &c->job);
    if (rc < 0) {
        free(ctx);
        free(c);
        sk_http_db_error(app, req, route, rc, rc == SK_EBUSY ? NULL : sk_strerror(rc));
        return rc;
    }
    sk_async_begin(app, &c->a, req, route);
    c->deadline.cb = on_call_deadline;
    h2o_timeout_link(app->ctx.loop, &app->db_deadline, &c->deadline);
    if (out) *out = c;
    return 0;
}

int sk_store_call(struct sk_app *app, h2o_req_t *req, enum sk_route route, sk_call_run_fn run,
                  sk_call_done_fn done, void *ctx)
{
    return sk_store_call_as(app, req, route, run, done, ctx, NULL);
}

static int sk_store_call_as(struct sk_app *app, h2o_req_t *req, enum sk_route route,
                            sk_call_run_fn run, sk_call_done_fn done, void *ctx, struct call **out);

static void expire_polls(struct sk_app *app);

/* 1 when a poll queued now would not be answered within max_wait_ms: a
 * call missed its deadline (or a poll its bound, answered here first)
 * and nothing has come back since, a call has waited in the queue for a
 * quarter of the bound without a thread taking it (the threads, niced
 * below the loop, do not get the CPU, or the database is slow: each
 * poll added would wait out its bound and be refused late instead of
 * now), or the calls ahead of it take longer at the recent time per
 * call. */
static int too_late(struct sk_app *app, int64_t max_wait_ms)
{
    struct sk_db_health *h = &app->db;
    expire_polls(app);
    if (h->stuck) return 1;
    struct sk_store_pool_stats st;
    sk_store_pool_stats(app->pool, &st);
    if (st.oldest_queued_ms && sk_mono_ms() - st.oldest_queued_ms > max_wait_ms / 4) return 1;
    size_t ahead = st.queued + st.running;
    size_t threads = st.threads > 0 ? (size_t)st.threads : 1;
    size_t waves = ahead < threads ? 0 : (ahead - threads) / threads + 1;
    return (int64_t)(waves + 1) * h->call_us > max_wait_ms * 1000;
}

int sk_store_call_within(struct sk_app *app, h2o_req_t *req, enum sk_route route,
                         int64_t max_wait_ms, sk_call_run_fn run, sk_call_done_fn done, void *ctx)
{
    if (too_late(app, max_wait_ms)) {
        free(ctx);
        char msg[112];
        snprintf(msg, sizeof msg, "the database cannot answer within %lld ms; try again",
                 (long long)max_wait_ms);
        sk_metrics_refusal(app->metrics, "unavailable");
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_RETRY_AFTER, NULL, H2O_STRLIT("1"));
        sk_http_error(app, req, route, 503, "busy", msg);
        return SK_EBUSY;
    }
    struct call *c = NULL;
    int rc = sk_store_call_as(app, req, route, run, done, ctx, &c);
    if (rc < 0) return rc;
    c->since_ms = sk_mono_ms();
    c->max_wait_ms = max_wait_ms;
    h2o_linklist_insert(&app->db.waiting, &c->waiting);
    return 0;
}

int sk_store_bg(struct sk_app *app, int64_t deadline_ms, sk_store_run_fn run, sk_store_done_fn done,
                void *arg)
{
    if (!app->pool) return SK_ESTATE;
    return sk_store_pool_submit(app->pool, deadline_ms, run, done, arg, NULL);
}

/* ---- /readyz: the last known health --------------------------------------- */

static int health_run(sk_store *st, void *arg)
{
    struct sk_app *app = arg;
    int version;
    int rc = sk_store_schema_version(st, &version);
    /* the store's identity: read from the database once per handle */
    char id[SK_STORE_IDENTITY_MAX];
    if (rc == 0 && sk_store_identity(st, id, sizeof id) == 0)
        memcpy(app->db.probe_id, id, sizeof app->db.probe_id);
    /* only this job writes probe_err and probe_id, and the loop reads them
     * in its done */
    snprintf(app->db.probe_err, sizeof app->db.probe_err, "%s", rc ? sk_store_errstr(st) : "");
    return rc;
}

static void health_done(void *arg, int rc)
{
    struct sk_app *app = arg;
    struct sk_db_health *h = &app->db;
    h->probing = 0;
    h->next_ms = sk_mono_ms() + HEALTH_EVERY_MS;
    int was = h->ok;
    h->ok = rc == 0;
    if (h->ok) h->stuck = 0; /* the probe came back: polls may try again */
    if (h->ok && !h->store_id[0] && h->probe_id[0]) {
        memcpy(h->store_id, h->probe_id, sizeof h->store_id);
        sk_log(SK_LOG_INFO, "store identity %s: admissions are checked against it from now on",
               h->store_id);
    }
    if (rc)
        snprintf(h->why, sizeof h->why, "%s",
                 rc == SK_ETIMEDOUT && !h->probe_err[0] ? "no answer in time" : h->probe_err);
    if (was != h->ok)
        sk_log(h->ok ? SK_LOG_INFO : SK_LOG_WARN, "database %s%s%s",
               h->ok ? "reachable again" : "unreachable", h->ok ? "" : ": ", h->ok ? "" : h->why);
}

/* Polls are admitted on the promise of an answer within
 * --db-poll-wait-ms; one still waiting well past it (the estimate was
 * wrong: the database froze, a lock) is answered now rather than at
 * --db-timeout-ms. Oldest first, so the walk stops at the first young one. */
static void expire_polls(struct sk_app *app)
{
    struct sk_db_health *h = &app->db;
    int64_t now = sk_mono_ms();
    while (!h2o_linklist_is_empty(&h->waiting)) {
        struct call *c = H2O_STRUCT_FROM_MEMBER(struct call, waiting, h->waiting.next);
        if (now - c->since_ms <= c->max_wait_ms) break;
        char msg[96];
        snprintf(msg, sizeof msg, "no answer within %lld ms (--db-poll-wait-ms)",
                 (long long)c->max_wait_ms);
        give_up(c, msg);
    }
}

void sk_store_calls_tick(struct sk_app *app)
{
    struct sk_db_health *h = &app->db;
    if (app->pool) expire_polls(app);
    int64_t now = sk_mono_ms();
    if (!app->pool || h->probing || now < h->next_ms) return;
    h->probe_err[0] = 0;
    int rc = sk_store_bg(app, now + app->cfg.db_timeout_ms, health_run, health_done, app);
    if (rc < 0) {
        h->ok = 0;
        h->next_ms = now + HEALTH_EVERY_MS;
        snprintf(h->why, sizeof h->why, "%s",
                 rc == SK_EBUSY ? "too many database calls waiting" : sk_strerror(rc));
        return;
    }
    h->probing = 1;
    h->probe_since = now;
}

int sk_store_health(struct sk_app *app, char *why, size_t cap)
{
    const struct sk_db_health *h = &app->db;
    int64_t waited = h->probing ? sk_mono_ms() - h->probe_since : 0;
    if (waited > app->cfg.db_timeout_ms) {
        snprintf(why, cap, "database not answering (probe waiting %" PRId64 " ms)", waited);
        return 0;
    }
    if (!h->ok) {
        snprintf(why, cap, "database not reachable: %s", h->why);
        return 0;
    }
    if (cap) why[0] = 0;
    return 1;
}
