/* challenge_http.c - challenges handed out and checked by an HTTP process
 * (challenge_http.h). */
#include "http/challenge_http.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/codes.h"
#include "core/error.h"
#include "core/log.h"
#include "core/rand.h"
#include "http/act_defs.h"
#include "http/captcha.h"
#include "http/client_ip.h"
#include "http/outbound.h"
#include "http/store_call.h"

/* Activities whose challenge rate a process counts (the rest share the
 * oldest row: the estimate only steers the bits). */
#define RATES 64
/* CAPTCHA checks one process keeps out to the provider at once; more get
 * 503 busy at once (a flood of tokens must not queue without bound). */
#define CAPTCHA_INFLIGHT_MAX 512

/* The node's key when none is configured (drawn before the fork). */
static char node_key[2 * 32 + 1];

struct rate {
    uint64_t aid;
    int64_t sec;       /* the second (sk_mono_ms / 1000) cur counts */
    int64_t cur, prev; /* challenges handed out in that second and the one before */
};

struct sk_chal {
    struct sk_outbound *out; /* NULL without a CAPTCHA provider */
    h2o_socket_t *sock;      /* its eventfd on the loop */
    uint64_t salt;           /* the next challenge's: a random start, then counted */
    struct rate rates[RATES];
    int64_t fail_open_logged_ms;
};

int sk_challenge_node_key_init(const struct sk_config *cfg)
{
    if (cfg->challenge_secret[0] || node_key[0]) return 0;
    return sk_rand_hex(node_key, sizeof node_key, 32);
}

static void key_of(const struct sk_app *app, const char **key, size_t *len)
{
    *key = app->cfg.challenge_secret[0] ? app->cfg.challenge_secret : node_key;
    *len = strlen(*key);
}

static void on_outbound(h2o_socket_t *sock, const char *err)
{
    (void)err;
    struct sk_app *app = sock->data;
    sk_outbound_drain(app->chal->out);
}

int sk_challenge_http_init(struct sk_app *app)
{
    if (sk_challenge_node_key_init(&app->cfg) < 0) {
        sk_log(SK_LOG_ERROR, "challenges: no randomness for the node's key");
        return SK_EIO;
    }
    struct sk_chal *c = calloc(1, sizeof *c);
    char salt[17];
    if (!c || sk_rand_hex(salt, sizeof salt, 8) < 0) {
        free(c);
        sk_log(SK_LOG_ERROR, "challenges: out of memory or randomness");
        return SK_ENOMEM;
    }
    c->salt = strtoull(salt, NULL, 16);
    app->chal = c;
    if (!app->cfg.captcha_provider[0]) return 0;
    int rc = sk_outbound_new(&c->out, CAPTCHA_INFLIGHT_MAX);
    /* h2o closes the fd it watches: give it its own */
    int fd = rc == 0 ? dup(sk_outbound_fd(c->out)) : -1;
    if (fd < 0) {
        sk_log(SK_LOG_ERROR, "captcha %s: cannot start the siteverify thread",
               app->cfg.captcha_provider);
        sk_outbound_free(c->out);
        c->out = NULL;
        return rc < 0 ? rc : SK_EIO;
    }
    c->sock = h2o_evloop_socket_create(app->ctx.loop, fd, H2O_SOCKET_FLAG_DONT_READ);
    c->sock->data = app;
    h2o_socket_read_start(c->sock, on_outbound);
    return 0;
}

void sk_challenge_http_free(struct sk_app *app)
{
    struct sk_chal *c = app->chal;
    if (!c) return;
    if (c->sock) {
        h2o_socket_read_stop(c->sock);
        h2o_socket_close(c->sock);
    }
    sk_outbound_free(c->out); /* the checks still out answer now */
    free(c);
    app->chal = NULL;
}

/* ---- reads ---------------------------------------------------------------- */

/* The widget's script this server hands the page for provider p: the
 * operator's (captcha_script_url, checked when the configuration was
 * read) or the provider's own. */
static const char *script_of(const struct sk_config *cfg, const struct sk_captcha_provider *p)
{
    return cfg->captcha_script_url[0] ? cfg->captcha_script_url : p->script_url;
}

int sk_challenge_json(const struct sk_activity *a, const struct sk_config *cfg, char *out,
                      size_t cap)
{
    int n;
    if (!sk_activity_has_challenge(a)) {
        n = snprintf(out, cap, "null");
    } else {
        char cp[SK_CH_JSON_MAX / 2] = "null";
        const struct sk_captcha_provider *p = sk_captcha_find(a->ch_captcha);
        /* the site key and script of this server's provider: the page's widget */
        if (p && !strcmp(cfg->captcha_provider, a->ch_captcha))
            snprintf(cp, sizeof cp, "{\"provider\":\"%s\",\"site_key\":\"%s\",\"script\":\"%s\"}",
                     p->name, cfg->captcha_site_key, script_of(cfg, p));
        else if (p)
            snprintf(cp, sizeof cp, "{\"provider\":\"%s\",\"site_key\":null,\"script\":null}",
                     p->name);
        n = snprintf(out, cap,
                     "{\"pow_bits_min\":%" PRId64 ",\"pow_bits_max\":%" PRId64
                     ",\"pow_load_step\":%" PRId64 ",\"captcha\":%s}",
                     a->ch_pow_min, a->ch_pow_max, a->ch_pow_step, cp);
    }
    if (n < 0 || (size_t)n >= cap) {
        if (cap) out[0] = 0;
        return SK_ENOMEM;
    }
    return n;
}

/* ---- the load ------------------------------------------------------------ */

/* The row of activity aid (the oldest one is reused), brought to now. */
static struct rate *rate_of(struct sk_chal *c, uint64_t aid, int64_t sec)
{
    struct rate *r = NULL, *old = &c->rates[0];
    for (int i = 0; i < RATES && !r; i++) {
        if (c->rates[i].aid == aid) r = &c->rates[i];
        if (c->rates[i].sec < old->sec) old = &c->rates[i];
    }
    if (!r) {
        r = old;
        *r = (struct rate){.aid = aid, .sec = sec};
    }
    if (r->sec != sec) {
        r->prev = r->sec == sec - 1 ? r->cur : 0;
        r->cur = 0;
        r->sec = sec;
    }
    return r;
}

/* What the bits follow (challenge_http.h): the queue's length, or the
 * node's challenges per second for this activity. Counts this one. */
static int64_t load_of(struct sk_app *app, const struct sk_activity *a)
{
    if (a->wr_passes_per_s > 0) {
        int64_t len = sk_metrics_queue_length(app->metrics, a->id);
        return len > 0 ? len : 0;
    }
    struct rate *r = rate_of(app->chal, a->id, sk_mono_ms() / 1000);
    r->cur++;
    int64_t per_s = r->prev > r->cur ? r->prev : r->cur;
    return per_s * (app->cfg.processes > 0 ? app->cfg.processes : 1);
}

/* ---- the route ----------------------------------------------------------- */

struct issue_op {
    struct sk_async_req a;
    uint64_t uid;
};

static void refuse(struct sk_app *app, h2o_req_t *req, enum sk_route route, int rc)
{
    sk_metrics_refusal_rc(app->metrics, rc);
    if (rc == SK_RC_CAPTCHA_UNAVAILABLE)
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_RETRY_AFTER, NULL, H2O_STRLIT("1"));
    sk_http_error(app, req, route, sk_rc_http_status(rc), sk_rc_wire(rc), sk_rc_message(rc));
}

static void issue(struct sk_app *app, h2o_req_t *req, enum sk_route route, uint64_t uid,
                  const struct sk_activity *a)
{
    int captcha = a->ch_captcha[0] != 0;
    if (captcha && strcmp(app->cfg.captcha_provider, a->ch_captcha) != 0) {
        sk_log(SK_LOG_ERROR,
               "activity %" PRIu64 " asks a %s CAPTCHA, but this server's captcha_provider is "
               "\"%s\": its challenges cannot be handed out",
               a->id, a->ch_captcha, app->cfg.captcha_provider);
        refuse(app, req, route, SK_RC_CAPTCHA_UNAVAILABLE);
        return;
    }
    int64_t now = sk_wall_ms();
    struct sk_ch_issue in = {
        .activity_id = a->id,
        .user_id = uid,
        .exp_ms = now + 1000LL * app->cfg.challenge_ttl_s,
        .bits = sk_challenge_bits(a->ch_pow_min, a->ch_pow_max, a->ch_pow_step, load_of(app, a)),
        .captcha = captcha,
        .salt = app->chal->salt++,
        .made_ms = now};
    const char *key;
    size_t klen;
    key_of(app, &key, &klen);
    char text[SK_CH_TEXT_MAX], at[SK_TIME_RFC3339_MAX], cp[SK_CH_JSON_MAX / 2] = "null", body[1024];
    if (sk_challenge_make(key, klen, &in, text, sizeof text) < 0) {
        sk_http_error(app, req, route, 503, "unavailable", "no challenge could be made");
        return;
    }
    sk_time_format_rfc3339(in.exp_ms, at, sizeof at);
    /* what the buyer does next: a CAPTCHA token is made for that action */
    const char *action = a->reg_end_ms > now      ? "register"
                         : a->wr_passes_per_s > 0 ? "join"
                                                  : "purchase";
    const struct sk_captcha_provider *p = sk_captcha_find(a->ch_captcha);
    if (captcha && p)
        snprintf(cp, sizeof cp,
                 "{\"provider\":\"%s\",\"site_key\":\"%s\",\"script\":\"%s\",\"action\":\"%s\"}",
                 p->name, app->cfg.captcha_site_key, script_of(&app->cfg, p), action);
    int n = snprintf(
        body, sizeof body,
        "{\"challenge\":\"%s\",\"bits\":%d,\"expires_at\":\"%s\",\"expires_in_ms\":%" PRId64
        ",\"for\":\"%s\",\"captcha\":%s}",
        text, in.bits, at, in.exp_ms - now, action, cp);
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL,
                   H2O_STRLIT("no-store"));
    sk_http_reply(app, req, route, 200, "application/json", body,
                  n > 0 && (size_t)n < sizeof body ? (size_t)n : 0);
}

static void on_issue_def(struct sk_app *app, void *arg, int rc, const struct sk_activity *a)
{
    struct issue_op *o = arg;
    h2o_req_t *req = sk_async_end(app, &o->a);
    enum sk_route route = o->a.route;
    if (!req) {
        /* the client left */
    } else if (sk_http_activity_read_or_reply(app, req, route, rc)) {
        /* answered */
    } else if (!sk_activity_has_challenge(a)) {
        refuse(app, req, route, SK_RC_NO_CHALLENGE);
    } else if (a->end_ms <= sk_wall_ms()) {
        sk_http_error(app, req, route, 403, "ended", sk_rc_message(SK_RC_ENDED));
    } else {
        issue(app, req, route, o->uid, a);
    }
    free(o);
}

int sk_api_challenge(struct sk_app *app, h2o_req_t *req, const struct sk_route_match *m)
{
    uint64_t uid;
    if (sk_http_user_or_reply(app, req, m->route, &uid)) return 0;
    struct issue_op *o = malloc(sizeof *o);
    if (!o) return sk_http_error(app, req, m->route, 503, "unavailable", "out of memory");
    o->uid = uid;
    sk_async_begin(app, &o->a, req, m->route);
    sk_act_defs_lookup(app, m->id, on_issue_def, o);
    return 0;
}

/* ---- the check ----------------------------------------------------------- */

/* A solution waiting for its CAPTCHA token's verdict (heap; owns itself). */
struct cwait {
    struct sk_async_req a;
    struct sk_app *app;
    struct sk_ch_ok ok;
    struct sk_ch_pass ch;
    sk_ch_resume resume;
    const char *action;
    size_t ctx_len;
    max_align_t ctx[]; /* the caller's, copied */
};

static void on_verified(void *arg, int status, const char *body, size_t len, const char *why)
{
    struct cwait *w = arg;
    struct sk_app *app = w->app;
    h2o_req_t *req = sk_async_end(app, &w->a);
    struct sk_captcha_expect e = {.hostname = app->cfg.captcha_hostname, .action = w->action};
    char vwhy[160];
    enum sk_captcha_verdict v = SK_CAPTCHA_ERROR;
    if (status == 0)
        snprintf(vwhy, sizeof vwhy, "siteverify not answered: %.120s", why);
    else
        v = sk_captcha_verdict(status, body, len, &e, vwhy, sizeof vwhy);
    if (v == SK_CAPTCHA_ERROR) {
        /* the operator's to know, not each buyer's: once a second at most */
        int64_t now = sk_mono_ms();
        if (now - app->chal->fail_open_logged_ms >= 1000) {
            app->chal->fail_open_logged_ms = now;
            sk_log(SK_LOG_WARN, "captcha %s: %s (captcha_fail %s)", app->cfg.captcha_provider, vwhy,
                   app->cfg.captcha_fail_open ? "open: let through" : "closed: 503");
        }
        if (app->cfg.captcha_fail_open) v = SK_CAPTCHA_PASS;
    }
    if (!req) {
        /* the client left */
    } else if (v == SK_CAPTCHA_PASS) {
        sk_challenge_ticket(&w->ok, 1, w->ch.ticket, sizeof w->ch.ticket);
        w->resume(app, req, w->ctx, &w->ch);
    } else {
        refuse(app, req, w->a.route,
               v == SK_CAPTCHA_REFUSED ? SK_RC_CAPTCHA_FAILED : SK_RC_CAPTCHA_UNAVAILABLE);
    }
    free(w);
}

/* The CAPTCHA token of a checked solution goes to the provider; 1 when
 * the request was answered, 2 when it waits. */
static int verify_captcha(struct sk_app *app, h2o_req_t *req, enum sk_route route,
                          const struct sk_ch_ok *ok, const struct sk_ch_pass *ch,
                          sk_ch_resume resume, const void *ctx, size_t ctx_len)
{
    size_t tlen;
    const char *tok = sk_http_header(req, "x-captcha-token", &tlen);
    if (!tok) {
        refuse(app, req, route, SK_RC_CAPTCHA_REQUIRED);
        return 1;
    }
    if (!sk_captcha_token_ok(tok, tlen)) {
        sk_metrics_refusal(app->metrics, "bad_request");
        sk_http_error(app, req, route, 400, "bad_request",
                      "X-Captcha-Token must be the token the CAPTCHA widget gave");
        return 1;
    }
    const struct sk_captcha_provider *p = sk_captcha_find(app->cfg.captcha_provider);
    if (!p || !app->chal || !app->chal->out) {
        refuse(app, req, route, SK_RC_CAPTCHA_UNAVAILABLE);
        return 1;
    }
    char ip[SK_IP_TEXT] = "";
    sk_http_client_ip(app, req, ip);
    size_t cap =
        3 * (tlen + sizeof app->cfg.captcha_secret + sizeof ip + sizeof app->cfg.captcha_site_key) +
        64;
    char *form = malloc(cap);
    struct cwait *w = form ? malloc(sizeof *w + ctx_len) : NULL;
    int n = w ? sk_captcha_form(p, app->cfg.captcha_secret, tok, tlen, ip,
                                app->cfg.captcha_site_key, form, cap)
              : SK_ENOMEM;
    if (n < 0) {
        free(form);
        free(w);
        sk_http_error(app, req, route, 503, "unavailable", "out of memory");
        return 1;
    }
    w->app = app;
    w->ok = *ok;
    w->ch = *ch;
    w->resume = resume;
    w->action = route == SK_ROUTE_queue_join ? "join"
                : route == SK_ROUTE_register ? "register"
                                             : "purchase";
    w->ctx_len = ctx_len;
    memcpy(w->ctx, ctx, ctx_len);
    const char *url = app->cfg.captcha_verify_url[0] ? app->cfg.captcha_verify_url : p->verify_url;
    sk_async_begin(app, &w->a, req, route);
    int rc = sk_outbound_post(app->chal->out, url, form, (size_t)n, app->cfg.captcha_timeout_ms,
                              on_verified, w);
    memset(form, 0, (size_t)n); /* it holds the secret */
    free(form);
    if (rc < 0) {
        sk_async_end(app, &w->a);
        free(w);
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_RETRY_AFTER, NULL, H2O_STRLIT("1"));
        sk_http_error(app, req, route, 503, "busy", "too many CAPTCHA checks at once; try again");
        return 1;
    }
    return 2;
}

int sk_challenge_or_reply(struct sk_app *app, h2o_req_t *req, enum sk_route route, uint64_t aid,
                          uint64_t uid, struct sk_ch_pass *ch, sk_ch_resume resume, const void *ctx,
                          size_t ctx_len)
{
    ch->present = 0;
    size_t len;
    const char *hdr = sk_http_header(req, "x-challenge", &len);
    if (!hdr) return 0;
    struct sk_ch_parsed p;
    if (sk_challenge_parse(hdr, len, &p) < 0) {
        sk_metrics_refusal(app->metrics, "bad_request");
        sk_http_error(app, req, route, 400, "bad_request",
                      "X-Challenge must be <challenge>.<nonce>: the challenge as GET "
                      ".../challenge handed it out, a dot, the nonce");
        return 1;
    }
    const char *key;
    size_t klen;
    key_of(app, &key, &klen);
    struct sk_ch_ok ok;
    int rc = sk_challenge_check(key, klen, &p, aid, uid, sk_wall_ms(), &ok);
    if (rc != SK_RC_OK) {
        refuse(app, req, route, rc);
        return 1;
    }
    ch->present = 1;
    memcpy(ch->id, ok.id, sizeof ch->id);
    sk_challenge_ticket(&ok, 0, ch->ticket, sizeof ch->ticket);
    if (!ok.captcha) return 0;
    return verify_captcha(app, req, route, &ok, ch, resume, ctx, ctx_len);
}
