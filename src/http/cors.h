/* cors.h - Cross-Origin Resource Sharing for the buyers' API: the buyer's
 * page exported to a CDN (another origin) calls /api/ on `seckill serve`,
 * and the browser lets it only when the API names the page's origin.
 * Off by default (no origin named: no CORS header is ever sent).
 *
 * This is the policy, bytes in and no I/O (cors_http.c puts it on the
 * replies): the list of allowed origins as the config key cors_origins
 * gives it, the check of a request's Origin against it, and the verdict
 * on a preflight (OPTIONS) request. */
#ifndef SK_CORS_H
#define SK_CORS_H
#include <stddef.h>

/* The normalised list's size (sk_config.cors_origins) and its length. */
#define SK_CORS_LIST_MAX 1024
#define SK_CORS_ORIGINS_MAX 16

/* What a preflight may ask for, and what a page may read of a reply. */
#define SK_CORS_ALLOW_METHODS "GET, POST"
#define SK_CORS_ALLOW_HEADERS                                                                      \
    "Content-Type, Idempotency-Key, X-Queue-Pass, X-User-Id, Authorization"
#define SK_CORS_EXPOSE_HEADERS "Retry-After, Date, ETag"
#define SK_CORS_MAX_AGE_S "600"

/* "https://shop.example, http://localhost:8000" -> "https://shop.example,
 * http://localhost:8000" in out (cap bytes): each entry an origin as a
 * browser sends it, scheme http or https, "://", a host of letters,
 * digits, '.' and '-' (or [IPv6]), an optional :port 1..65535, nothing
 * after (no path, no trailing '/'); scheme and host lower-cased; at most
 * SK_CORS_ORIGINS_MAX entries, separated by commas and/or spaces. ""
 * (or "off") is the empty list. "*" is refused: the API names its pages'
 * origins. 0, or SK_EINVAL with the reason in err. */
int sk_cors_parse_list(const char *v, char *out, size_t cap, char *err, size_t ecap);

/* 1 when origin (len bytes, as the Origin header carried it) is one of the
 * normalised list's entries (scheme and host compared without case), else
 * 0. An empty list matches nothing. */
int sk_cors_allowed(const char *list, const char *origin, size_t len);

enum sk_cors_verdict {
    SK_CORS_OK = 0,
    SK_CORS_BAD_ORIGIN,  /* no Origin, or not named */
    SK_CORS_BAD_METHOD,  /* Access-Control-Request-Method missing or not GET/POST */
    SK_CORS_BAD_HEADERS, /* a requested header outside SK_CORS_ALLOW_HEADERS */
};

/* The verdict on a preflight: its Origin, Access-Control-Request-Method
 * and Access-Control-Request-Headers (a comma-separated list, may be NULL)
 * values, each with its length. */
enum sk_cors_verdict sk_cors_preflight(const char *list, const char *origin, size_t olen,
                                       const char *method, size_t mlen, const char *headers,
                                       size_t hlen);

/* A line for each verdict, for the 403 answer. Static text. */
const char *sk_cors_verdict_text(enum sk_cors_verdict v);

#endif
