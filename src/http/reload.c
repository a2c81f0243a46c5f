/* reload.c - the reload area, the table of settings (live or not), and
 * what one process does with a new publication (reload.h). */
#include "http/reload.h"

#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "core/shm.h"
#include "http/app.h"

#define F(key, field, live, hook)                                                                  \
    {                                                                                              \
        key, offsetof(struct sk_config, field), sizeof(((struct sk_config *)0)->field), live, hook \
    }
#define LIVE(key, field) F(key, field, 1, SK_RELOAD_COPY)
#define FIXED(key, field) F(key, field, 0, SK_RELOAD_COPY)

const struct sk_reload_field sk_reload_fields[] = {
    FIXED("listen", listen),
    FIXED("redis", redis),
    FIXED("db", db),
    FIXED("processes", processes),
    LIVE("admin_token", admin_token),
    FIXED("auth", auth_hmac),
    FIXED("auth", auth_jwt),
    LIVE("hmac_secret", hmac_secret),
    FIXED("role", role),
    F("log_level", log_level, 1, SK_RELOAD_LOG_LEVEL),
    FIXED("max_body", max_body),
    FIXED("redis_timeout_ms", redis_timeout_ms),
    LIVE("rate_per_user_per_s", rate_per_user_per_s),
    LIVE("rate_burst", rate_burst),
    LIVE("rate_per_ip_per_s", rate_per_ip_per_s),
    LIVE("rate_ip_burst", rate_ip_burst),
    LIVE("trusted_proxies", trusted_proxies),
    LIVE("trusted_proxies", n_trusted_proxies),
    /* its accounting counts only while a cap is set: a change would
     * unbalance the purchases already counted */
    FIXED("max_inflight", max_inflight),
    FIXED("ops_listen", ops_listen),
    FIXED("io_timeout_s", io_timeout_s),
    F("max_connections", max_connections, 1, SK_RELOAD_CONNS),
    LIVE("admin_token_file", admin_token_file),
    LIVE("hmac_secret_file", hmac_secret_file),
    LIVE("hmac_max_ttl_s", hmac_max_ttl_s),
    LIVE("hmac_key_id", hmac_key_id),
    LIVE("hmac_secret_prev", hmac_secret_prev),
    LIVE("hmac_key_id_prev", hmac_key_id_prev),
    LIVE("hmac_secret_prev_file", hmac_secret_prev_file),
    FIXED("sync_replicas", sync_replicas),
    FIXED("sync_timeout_ms", sync_timeout_ms),
    FIXED("redis_functions", redis_functions),
    FIXED("db_pool", db_pool),
    FIXED("db_timeout_ms", db_timeout_ms),
    FIXED("db_queue_max", db_queue_max),
    LIVE("db_poll_wait_ms", db_poll_wait_ms),     /* read by every poll */
    LIVE("poll_rate_max", poll_rate_max),         /* read by every poll */
    LIVE("batches_in_flight", batches_in_flight), /* read at every pass's end */
    LIVE("admit_target_ms", admit_target_ms),     /* read at every pass's end */
    LIVE("cors_origins", cors_origins),
    F("jwks_file", jwks_file, 1, SK_RELOAD_JWKS),
    LIVE("jwt_issuer", jwt_issuer),
    LIVE("jwt_audience", jwt_audience),
    LIVE("jwt_user_claim", jwt_user_claim),
    LIVE("jwt_leeway_s", jwt_leeway_s),
    /* the key that checks the challenges already handed out */
    FIXED("challenge_secret", challenge_secret),
    FIXED("challenge_secret_file", challenge_secret_file),
    LIVE("challenge_ttl_s", challenge_ttl_s),
    /* the page's CSP and the verifier's thread follow the provider; the
     * page (and its policy) is built once, at its first request */
    FIXED("captcha_provider", captcha_provider),
    FIXED("captcha_script_url", captcha_script_url),
    LIVE("captcha_site_key", captcha_site_key),
    LIVE("captcha_secret", captcha_secret),
    LIVE("captcha_secret_file", captcha_secret_file),
    LIVE("captcha_verify_url", captcha_verify_url),
    LIVE("captcha_timeout_ms", captcha_timeout_ms),
    LIVE("captcha_fail", captcha_fail_open),
    LIVE("captcha_hostname", captcha_hostname),
    LIVE("jwt_max_ttl_s", jwt_max_ttl_s),
    LIVE("frame_ancestors", frame_ancestors), /* read by every HTML answer */
    FIXED("max_request_bytes", max_request_bytes),
    /* the worker's dispatcher reads them at its start */
    FIXED("webhook_url", webhook_url),
    FIXED("webhook_name", webhook_name),
    FIXED("webhook_secret", webhook_secret),
    FIXED("webhook_secret_prev", webhook_secret_prev),
    FIXED("webhook_events", webhook_events),
    FIXED("webhook_timeout_ms", webhook_timeout_ms),
    FIXED("webhook_horizon_s", webhook_horizon_s),
    FIXED("webhook_settle_ms", webhook_settle_ms),
};
const size_t sk_reload_nfields = sizeof sk_reload_fields / sizeof sk_reload_fields[0];

int sk_reload_area_new(struct sk_reload_area **out)
{
    /* zero pages: generation 0 */
    *out = sk_shm_alloc_locked(sizeof **out, offsetof(struct sk_reload_area, lock));
    return *out ? 0 : SK_EIO;
}

static struct sk_reload_area *the_area;

void sk_reload_set_area(struct sk_reload_area *a)
{
    the_area = a;
}

struct sk_reload_area *sk_reload_area_get(void)
{
    return the_area;
}

void sk_reload_publish(struct sk_reload_area *a, const struct sk_config *cfg, const char *jwks,
                       size_t jwks_len)
{
    if (jwks_len > sizeof a->jwks) jwks_len = 0;
    pthread_mutex_lock(&a->lock);
    a->cfg = *cfg;
    if (jwks_len) memcpy(a->jwks, jwks, jwks_len);
    a->jwks_len = jwks_len;
    atomic_fetch_add(&a->gen, 1);
    pthread_mutex_unlock(&a->lock);
}

uint64_t sk_reload_read(struct sk_reload_area *a, struct sk_config *cfg, char *jwks,
                        size_t *jwks_len)
{
    pthread_mutex_lock(&a->lock);
    uint64_t gen = atomic_load(&a->gen);
    *cfg = a->cfg;
    size_t n = a->jwks_len <= SK_JWKS_MAX ? a->jwks_len : 0;
    memcpy(jwks, a->jwks, n);
    *jwks_len = n;
    pthread_mutex_unlock(&a->lock);
    return gen;
}

/* Appends key to a comma list, once. */
static void add_name(char *list, size_t cap, const char *key)
{
    size_t kl = strlen(key), n = strlen(list);
    for (const char *p = list; (p = strstr(p, key)) != NULL; p += kl)
        if ((p == list || p[-1] == ' ') && (p[kl] == ',' || p[kl] == 0)) return;
    snprintf(list + n, cap - n, "%s%s", n ? ", " : "", key);
}

int sk_reload_diff(const struct sk_config *old, const struct sk_config *nw, int key_set_changed,
                   char *live, char *fixed, size_t cap)
{
    live[0] = fixed[0] = 0;
    int n = 0;
    for (size_t i = 0; i < sk_reload_nfields; i++) {
        const struct sk_reload_field *f = &sk_reload_fields[i];
        if (!memcmp((const char *)old + f->off, (const char *)nw + f->off, f->len)) continue;
        add_name(f->live ? live : fixed, cap, f->key);
        n++;
    }
    if (key_set_changed) {
        add_name(live, cap, "jwks_file");
        n++;
    }
    return n;
}

void sk_reload_copy_live(struct sk_config *dst, const struct sk_config *src)
{
    for (size_t i = 0; i < sk_reload_nfields; i++) {
        const struct sk_reload_field *f = &sk_reload_fields[i];
        if (f->live) memcpy((char *)dst + f->off, (const char *)src + f->off, f->len);
    }
}

void sk_reload_apply(struct sk_config *dst, const struct sk_config *src, struct sk_conns *conns)
{
    int level = strcmp(dst->log_level, src->log_level) != 0;
    int changed = dst->max_connections != src->max_connections;
    sk_reload_copy_live(dst, src);
    enum sk_log_level lvl;
    if (level && sk_log_parse_level(dst->log_level, &lvl) == 0) sk_log_set_level(lvl);
    if (changed && conns) sk_conns_set_max(conns, dst->max_connections);
}

/* ---- one HTTP process ---------------------------------------------------- */

static uint64_t applied_gen;

int sk_reload_tick_app(struct sk_app *app, int started)
{
    struct sk_reload_area *a = the_area;
    if (!a || atomic_load_explicit(&a->gen, memory_order_acquire) == applied_gen) return 0;
    static struct sk_config cfg; /* one loop per process */
    static char jwks[SK_JWKS_MAX];
    size_t jl = 0;
    uint64_t gen = sk_reload_read(a, &cfg, jwks, &jl);
    int rc = 0;
    if (app->cfg.auth_jwt) {
        char err[256];
        sk_jwt_keys *k;
        if (sk_jwt_keys_parse(&k, jwks, jl, err, sizeof err) == 0) {
            sk_jwt_keys_free(app->jwt);
            app->jwt = k;
        } else {
            /* the publisher checked it: only memory can fail here */
            sk_log(SK_LOG_ERROR, "reload: the JWT key set: %s; keeping the previous one", err);
            rc = -1;
        }
    }
    sk_reload_apply(&app->cfg, &cfg, started ? &app->conns : NULL);
    applied_gen = gen;
    if (app->slot >= 0 && app->slot < SK_RELOAD_SLOTS) atomic_store(&a->applied[app->slot], gen);
    return rc;
}
