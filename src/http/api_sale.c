/* api_sale.c - the buyer's side of a sale (docs/buyer-page.md):
 *
 * GET /sale/{id}: the buyer's page (web/buyer/, embedded at build time).
 *   The same bytes for every id (its script reads the id from the path),
 *   so caches keep one copy: ETag, Cache-Control, 304 on If-None-Match.
 *   Nothing is read for it, neither Redis nor the database.
 * GET /api/v1/time: this server's clock, which the page's countdown runs
 *   on (a phone's clock may be minutes off). Never cached, no Redis.
 * GET /api/v1/activities/{id}/live: what an open page shows and re-reads
 *   at the pace the answer suggests (poll_after_ms): name, state, stock,
 *   sold out. Each process answers it from memory while its last read of
 *   the activity is younger than LIVE_FRESH_MS; past that, the requests
 *   that arrive share one read (the definitions cache and peek.lua).
 *   So a sold-out reaches every page within a pace, and a thousand open
 *   pages cost Redis four reads a second per process, not a thousand;
 *   Cache-Control lets a CDN in front absorb it as well. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/vec.h"
#include "engine/activity.h"
#include "engine/stock.h"
#include "http/app.h"
#include "http/captcha.h"
#include "http/challenge_http.h"
#include "http/http_body.h"
#include "http/sale_page.h"
#include "http/store_call.h"
#include "web_gen.h"

/* A read younger than this answers from memory (the purchase path
 * re-checks its sold-out verdict at the same pace). */
#define LIVE_FRESH_MS 250
/* Activities whose live read a process keeps; more push out the one read
 * longest ago (ids nobody defined are never kept). */
#define LIVE_MAX 1024

/* The pace the live read suggests, by what a page shows: the figures a
 * page's requests per second follow (BENCHMARKS.md). 0: nothing will
 * change any more, stop asking. */
static const struct {
    const char *state;
    int sold_out;
    int64_t ms;
} paces[] = {
    {"open", 0, 4000},       /* on sale: a sell-out reaches every page within about this */
    {"open", 1, 15000},      /* sold out: unpaid orders may still give stock back */
    {"scheduled", 0, 15000}, /* the countdown runs on the page, from the server's clock */
    {"scheduled", 1, 15000}, {"closed", 0, 15000}, /* the operator may open it */
    {"closed", 1, 15000},    {"ended", 0, 0},      {"ended", 1, 0},
};

/* What a page sees of an activity. */
struct live_view {
    uint64_t id;
    char name[SK_ACTIVITY_NAME_MAX];
    int64_t start_ms, end_ms, stock, per_user_limit, max_per_order, pay_timeout_s;
    int64_t wr_rate, wr_ttl_s;
    int64_t ch_pow_min, ch_pow_max, ch_pow_step; /* the challenge (docs/challenges.md) */
    char ch_captcha[SK_CH_CAPTCHA_MAX];
    int64_t reg_start_ms, reg_end_ms, draw_box_s; /* registration (docs/fairness.md) */
    int exists, open;
    int64_t remaining;
};

struct live_waiter {
    struct sk_async_req a;
    struct live_waiter *next;
};

struct live_entry {
    uint64_t id;
    int have;        /* view holds a read */
    int reading;     /* a read is in flight */
    int64_t read_ms; /* when the view was read (sk_mono_ms) */
    struct live_view view;
    struct live_waiter *waiters;
};

struct sk_sale_live {
    struct live_entry *e;
    size_t n, cap;
    /* with a CAPTCHA provider: the page whose policy allows its origins
     * (built at the first request), and its ETag */
    char *page;
    size_t page_len;
    char etag[96];
};

/* ---- the page and the clock --------------------------------------------- */

static struct sk_sale_live *live_of(struct sk_app *app);

/* The page this server sends: the embedded one, or with a CAPTCHA
 * provider configured, the same with its policy allowing the provider's
 * origins (the widget loads from there only on a sale that asks for it)
 * under an ETag of its own. */
static void page_of(struct sk_app *app, const char **page, size_t *len, const char **etag)
{
    *page = sk_web_sale_html;
    *len = sk_web_sale_html_len;
    *etag = sk_web_sale_etag;
    const struct sk_captcha_provider *p = sk_captcha_find(app->cfg.captcha_provider);
    struct sk_sale_live *l = p ? live_of(app) : NULL;
    if (!l) return;
    if (!l->page) {
        /* the provider's origins, or those of the widget's script the
         * operator named (captcha_script_url) and nothing else */
        const char *script;
        char csp[SK_CAPTCHA_CSP_MAX];
        if (sk_captcha_widget(p, app->cfg.captcha_script_url, &script, csp, sizeof csp) < 0 ||
            sk_sale_page_served(csp, &l->page, &l->page_len) < 0)
            return;
        size_t el = strlen(sk_web_sale_etag);
        /* "<build's tag>-<provider>-<the policy's hash>", quoted: another
         * script's origin is another page */
        uint32_t h = 2166136261u;
        for (const char *c = csp; *c; c++)
            h = (h ^ (unsigned char)*c) * 16777619u;
        snprintf(l->etag, sizeof l->etag, "%.*s-%s-%08x\"", (int)(el > 1 ? el - 1 : 0),
                 sk_web_sale_etag, p->name, (unsigned)h);
    }
    *page = l->page;
    *len = l->page_len;
    *etag = l->etag;
}

int sk_api_sale_page(struct sk_app *app, h2o_req_t *req, const struct sk_route_match *m)
{
    const char *page, *etag;
    size_t page_len;
    page_of(app, &page, &page_len, &etag);
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_ETAG, NULL, etag, strlen(etag));
    /* a new build's page has a new ETag; a few minutes of an old one at an
     * edge are harmless (the API it calls is versioned) */
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL,
                   H2O_STRLIT("public, max-age=300"));
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("x-content-type-options"), 0,
                          NULL, H2O_STRLIT("nosniff"));
    size_t len;
    const char *inm = sk_http_header(req, "if-none-match", &len);
    if (inm && len == strlen(etag) && !memcmp(inm, etag, len)) {
        sk_http_reply(app, req, m->route, 304, NULL, "", 0);
        return 0;
    }
    sk_http_reply(app, req, m->route, 200, "text/html; charset=utf-8", page, page_len);
    return 0;
}

int sk_api_sale_time(struct sk_app *app, h2o_req_t *req, const struct sk_route_match *m)
{
    char body[64];
    int n = snprintf(body, sizeof body, "{\"now_ms\":%" PRId64 "}", sk_wall_ms());
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL,
                   H2O_STRLIT("no-store"));
    sk_http_reply(app, req, m->route, 200, "application/json", body, (size_t)n);
    return 0;
}

/* ---- the live read ------------------------------------------------------ */

static int64_t pace_of(const char *state, int sold_out)
{
    for (size_t i = 0; i < sizeof paces / sizeof paces[0]; i++)
        if (!strcmp(paces[i].state, state) && paces[i].sold_out == sold_out) return paces[i].ms;
    return 15000;
}

static void reply_view(struct sk_app *app, h2o_req_t *req, const struct live_view *v)
{
    char start[SK_TIME_RFC3339_MAX], end[SK_TIME_RFC3339_MAX], name[400], wr[96], body[2600],
        ch[SK_CH_JSON_MAX];
    int64_t now = sk_wall_ms();
    const char *state = sk_activity_live_state(v->exists, v->open, v->start_ms, v->end_ms, now);
    int64_t remaining = v->exists ? v->remaining : v->stock;
    int sold_out = v->exists && remaining <= 0;
    sk_time_format_rfc3339(v->start_ms, start, sizeof start);
    sk_time_format_rfc3339(v->end_ms, end, sizeof end);
    if (sk_body_json_escape(v->name, strlen(v->name), name, sizeof name) < 0) name[0] = 0;
    if (v->wr_rate > 0)
        snprintf(wr, sizeof wr, "{\"passes_per_s\":%" PRId64 ",\"pass_ttl_s\":%" PRId64 "}",
                 v->wr_rate, v->wr_ttl_s);
    else
        snprintf(wr, sizeof wr, "null");
    /* what the page solves before it joins or buys, and the CAPTCHA's widget */
    struct sk_activity def = {.id = v->id,
                              .ch_pow_min = v->ch_pow_min,
                              .ch_pow_max = v->ch_pow_max,
                              .ch_pow_step = v->ch_pow_step};
    memcpy(def.ch_captcha, v->ch_captcha, sizeof def.ch_captcha);
    if (sk_challenge_json(&def, &app->cfg, ch, sizeof ch) < 0) snprintf(ch, sizeof ch, "null");
    /* the page's registration state and countdown (docs/fairness.md) */
    char reg[128] = "null";
    if (v->reg_end_ms > 0)
        snprintf(reg, sizeof reg, "{\"start_ms\":%" PRId64 ",\"end_ms\":%" PRId64 ",\"draw\":%s}",
                 v->reg_start_ms, v->reg_end_ms, v->draw_box_s > 0 ? "true" : "false");
    int n = snprintf(
        body, sizeof body,
        "{\"id\":%" PRIu64 ",\"name\":\"%s\",\"state\":\"%s\",\"sold_out\":%s,\"start\":\"%s\","
        "\"end\":\"%s\",\"start_ms\":%" PRId64 ",\"end_ms\":%" PRId64 ",\"stock_initial\":%" PRId64
        ",\"stock_remaining\":%" PRId64 ",\"per_user_limit\":%" PRId64 ",\"max_per_order\":%" PRId64
        ",\"pay_timeout_s\":%" PRId64
        ",\"waiting_room\":%s,\"challenge\":%s,\"registration\":%s,\"poll_after_ms\":%" PRId64 "}",
        v->id, name, state, sold_out ? "true" : "false", start, end, v->start_ms, v->end_ms,
        v->stock, remaining > 0 ? remaining : 0, v->per_user_limit, v->max_per_order,
        v->pay_timeout_s, wr, ch, reg, pace_of(state, sold_out));
    /* one second at a CDN edge or in the browser: a page asks every few */
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL,
                   H2O_STRLIT("public, max-age=1"));
    sk_http_reply(app, req, SK_ROUTE_sale_live, 200, "application/json", body,
                  n > 0 && (size_t)n < sizeof body ? (size_t)n : 0);
}

static struct sk_sale_live *live_of(struct sk_app *app)
{
    if (!app->sale) app->sale = calloc(1, sizeof *app->sale);
    return app->sale;
}

static struct live_entry *entry_find(struct sk_sale_live *l, uint64_t id)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->e[i].id == id) return &l->e[i];
    return NULL;
}

static void entry_drop(struct sk_sale_live *l, struct live_entry *e)
{
    *e = l->e[--l->n];
}

/* A new entry for id; at the cap, the idle one read longest ago goes.
 * NULL when none can. Moves the entries. */
static struct live_entry *entry_new(struct sk_sale_live *l, uint64_t id)
{
    if (l->n >= LIVE_MAX) {
        struct live_entry *old = NULL;
        for (size_t i = 0; i < l->n; i++) {
            struct live_entry *e = &l->e[i];
            if (!e->reading && !e->waiters && (!old || e->read_ms < old->read_ms)) old = e;
        }
        if (!old) return NULL;
        entry_drop(l, old);
    }
    if (SK_VEC_RESERVE(l->e, l->cap, l->n + 1, 16)) return NULL;
    struct live_entry *e = &l->e[l->n++];
    memset(e, 0, sizeof *e);
    e->id = id;
    return e;
}

/* Answers every request waiting for id's read: with the view (rc 0), or
 * the failure. Unknown ids are not kept. */
static void answer_waiters(struct sk_app *app, uint64_t id, int rc)
{
    struct sk_sale_live *l = app->sale;
    struct live_entry *e = entry_find(l, id);
    if (!e) return;
    struct live_waiter *w = e->waiters;
    e->waiters = NULL;
    e->reading = 0;
    struct live_view view = e->view;
    if (rc == SK_ENOTFOUND) entry_drop(l, e);
    while (w) {
        struct live_waiter *next = w->next;
        h2o_req_t *req = sk_async_end(app, &w->a);
        if (!req) {
            /* the client left */
        } else if (rc == 0) {
            reply_view(app, req, &view);
        } else if (rc == SK_ENOTFOUND) {
            sk_http_error(app, req, SK_ROUTE_sale_live, 404, "unknown_activity",
                          "no such activity");
        } else if (rc == SK_EIO) {
            h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_RETRY_AFTER, NULL,
                           H2O_STRLIT("1"));
            sk_http_error(app, req, SK_ROUTE_sale_live, 503, "unavailable",
                          "redis is unreachable; try again");
        } else {
            sk_http_db_error(app, req, SK_ROUTE_sale_live, rc, "activity read: no answer in time");
        }
        free(w);
        w = next;
    }
}

static void on_peek(struct sk_app *app, void *arg, int rc, const struct sk_activity *a,
                    const struct sk_stock_state *st)
{
    uint64_t id = (uint64_t)(uintptr_t)arg;
    struct live_entry *e = app->sale ? entry_find(app->sale, id) : NULL;
    if (e && rc == 0) {
        struct live_view *v = &e->view;
        *v = (struct live_view){.id = a->id,
                                .start_ms = a->start_ms,
                                .end_ms = a->end_ms,
                                .stock = a->stock,
                                .per_user_limit = a->per_user_limit,
                                .max_per_order = a->max_per_order,
                                .pay_timeout_s = a->pay_timeout_s,
                                .wr_rate = a->wr_passes_per_s,
                                .wr_ttl_s = a->wr_pass_ttl_s,
                                .ch_pow_min = a->ch_pow_min,
                                .ch_pow_max = a->ch_pow_max,
                                .ch_pow_step = a->ch_pow_step,
                                .reg_start_ms = a->reg_start_ms,
                                .reg_end_ms = a->reg_end_ms,
                                .draw_box_s = a->draw_box_s,
                                .exists = st->exists,
                                .open = st->open,
                                .remaining = st->remaining};
        snprintf(v->name, sizeof v->name, "%s", a->name);
        memcpy(v->ch_captcha, a->ch_captcha, sizeof v->ch_captcha);
        e->have = 1;
        e->read_ms = sk_mono_ms();
    }
    answer_waiters(app, id, rc);
}

int sk_api_sale_live(struct sk_app *app, h2o_req_t *req, const struct sk_route_match *m)
{
    struct sk_sale_live *l = live_of(app);
    struct live_entry *e = l ? entry_find(l, m->id) : NULL;
    if (e && e->have && sk_mono_ms() - e->read_ms < LIVE_FRESH_MS) {
        reply_view(app, req, &e->view);
        return 0;
    }
    if (!e && l) e = entry_new(l, m->id);
    struct live_waiter *w = e ? malloc(sizeof *w) : NULL;
    if (!w)
        return sk_http_error(app, req, m->route, 503, "busy", "too many activities read at once");
    sk_async_begin(app, &w->a, req, m->route);
    w->next = e->waiters;
    e->waiters = w;
    if (e->reading) return 0;
    e->reading = 1;
    /* may answer (and move the entries) before it returns */
    sk_activity_peek(app, m->id, on_peek, (void *)(uintptr_t)m->id);
    return 0;
}
