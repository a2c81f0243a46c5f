/* sale_page.h - the buyer's page (web/buyer/, embedded at build time) as
 * `seckill activity page` exports it for a CDN: the same page with the
 * activity id and the API's address written into its sk-config block,
 * and its Content-Security-Policy letting it call that API only. Bytes
 * in, bytes out, no I/O. */
#ifndef SK_SALE_PAGE_H
#define SK_SALE_PAGE_H
#include <stddef.h>
#include <stdint.h>

/* Longest --api-base accepted. */
#define SK_SALE_API_BASE_MAX 512

/* The page for activity id calling the API at api_base (NULL or "": the
 * page's own origin, e.g. a CDN that forwards /api/ to seckill serve).
 * api_base: http:// or https://, a host (cors.h's rules), an optional
 * :port and path; a trailing '/' is dropped. *out: malloc'd, the caller
 * frees it; *len its length. 0, SK_EINVAL (err says why) or SK_ENOMEM. */
int sk_sale_page_build(uint64_t id, const char *api_base, char **out, size_t *len, char *err,
                       size_t cap);

/* The same, its Content-Security-Policy widened by extra (a CAPTCHA
 * provider's directives, captcha.h: "script-src https://x; frame-src
 * https://x"; NULL or "": none): each source is added to the page's
 * directive of that name, or the directive is added. */
int sk_sale_page_build_csp(uint64_t id, const char *api_base, const char *extra, char **out,
                           size_t *len, char *err, size_t cap);

/* The page as `seckill serve` sends it (no activity id, its own origin)
 * with the policy widened by extra, as above. *out: malloc'd, the
 * caller's. 0, SK_EINVAL or SK_ENOMEM. */
int sk_sale_page_served(const char *extra, char **out, size_t *len);

/* The policy csp (len bytes) widened by extra, into out (cap bytes,
 * terminated). Returns the length, SK_EINVAL (a directive of extra
 * without a name) or SK_ENOMEM. Pure. */
int sk_csp_widen(const char *csp, size_t len, const char *extra, char *out, size_t cap);

#endif
