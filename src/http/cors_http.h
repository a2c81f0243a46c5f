/* cors_http.h - the CORS policy (cors.h) on `seckill serve`'s replies:
 * with cors_origins set, every /api/ reply varies by Origin and carries
 * Access-Control-Allow-Origin (with credentials allowed and the headers a
 * page must read exposed) for a named origin only; a preflight (OPTIONS)
 * of /api/ is answered here. Without cors_origins nothing changes:
 * no header, and OPTIONS is a 405 like any other unknown method. */
#ifndef SK_CORS_HTTP_H
#define SK_CORS_HTTP_H
#include <h2o.h>

struct sk_app;

/* The CORS headers of a reply (called by sk_http_reply). */
void sk_cors_reply_headers(struct sk_app *app, h2o_req_t *req);

/* An OPTIONS request of /api/ with CORS on: answered 204 with what the
 * browser may send, or 403 (no Access-Control-Allow-Origin for an origin
 * not named). 1 when answered, 0 when the request is not a preflight. */
int sk_cors_preflight_or_reply(struct sk_app *app, h2o_req_t *req);

#endif
