/* cors_http.c - CORS headers on the replies and the preflight answer
 * (cors_http.h), from the policy in cors.c. */
#include "http/cors_http.h"

#include <string.h>

#include "http/app.h"
#include "http/cors.h"

static int api_path(const h2o_req_t *req)
{
    return req->path.len >= 5 && !memcmp(req->path.base, "/api/", 5);
}

void sk_cors_reply_headers(struct sk_app *app, h2o_req_t *req)
{
    if (!app->cfg.cors_origins[0] || !api_path(req)) return;
    /* a cache in front must keep the answers to different origins apart */
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_VARY, NULL, H2O_STRLIT("Origin"));
    size_t ol;
    const char *origin = sk_http_header(req, "origin", &ol);
    if (!sk_cors_allowed(app->cfg.cors_origins, origin, ol)) return;
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_ACCESS_CONTROL_ALLOW_ORIGIN, NULL,
                   h2o_strdup(&req->pool, origin, ol).base, ol);
    h2o_add_header_by_str(&req->pool, &req->res.headers,
                          H2O_STRLIT("access-control-allow-credentials"), 0, NULL,
                          H2O_STRLIT("true"));
    h2o_add_header_by_str(&req->pool, &req->res.headers,
                          H2O_STRLIT("access-control-expose-headers"), 0, NULL,
                          H2O_STRLIT(SK_CORS_EXPOSE_HEADERS));
}

int sk_cors_preflight_or_reply(struct sk_app *app, h2o_req_t *req)
{
    if (!app->cfg.cors_origins[0] || !api_path(req) ||
        !h2o_memis(req->method.base, req->method.len, H2O_STRLIT("OPTIONS")))
        return 0;
    size_t ol, ml, hl;
    const char *origin = sk_http_header(req, "origin", &ol);
    const char *method = sk_http_header(req, "access-control-request-method", &ml);
    const char *hdrs = sk_http_header(req, "access-control-request-headers", &hl);
    enum sk_cors_verdict v =
        sk_cors_preflight(app->cfg.cors_origins, origin, ol, method, ml, hdrs, hl);
    if (v != SK_CORS_OK) {
        sk_http_error(app, req, SK_ROUTE_COUNT, 403, "cors_refused", sk_cors_verdict_text(v));
        return 1;
    }
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("access-control-allow-methods"),
                          0, NULL, H2O_STRLIT(SK_CORS_ALLOW_METHODS));
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("access-control-allow-headers"),
                          0, NULL, H2O_STRLIT(SK_CORS_ALLOW_HEADERS));
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("access-control-max-age"), 0,
                          NULL, H2O_STRLIT(SK_CORS_MAX_AGE_S));
    sk_http_reply(app, req, SK_ROUTE_COUNT, 204, NULL, "", 0);
    return 1;
}
