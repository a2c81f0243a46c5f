/* sale_page.c - the exported buyer's page (sale_page.h). */
#include "http/sale_page.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "http/cors.h"
#include "web_gen.h"

static const char config_tag[] = "<script type=\"application/json\" id=\"sk-config\">{}</script>";
static const char csp_connect[] = "connect-src 'self'";

/* api_base checked: its origin into origin (cap bytes), its trimmed text
 * into base. */
static int check_base(const char *v, char *base, char *origin, size_t cap, char *err, size_t ecap)
{
    size_t n = strlen(v);
    if (n >= SK_SALE_API_BASE_MAX || n >= cap)
        return sk_einval(err, ecap, "--api-base is too long (at most %d bytes)",
                         SK_SALE_API_BASE_MAX - 1);
    while (n > 0 && v[n - 1] == '/')
        n--;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v[i];
        /* it lands in JSON in HTML and in a CSP: none of their delimiters */
        if (c <= ' ' || c >= 0x7f || strchr("\"'<>\\;,`", c))
            return sk_einval(err, ecap, "--api-base has a character a URL here may not hold");
    }
    const char *sep = strstr(v, "://");
    if (!sep || (size_t)(sep - v) + 3 >= n)
        return sk_einval(err, ecap, "--api-base must be http(s)://host[:port][/path]");
    const char *path = memchr(sep + 3, '/', n - (size_t)(sep + 3 - v));
    size_t on = path ? (size_t)(path - v) : n;
    char list[SK_CORS_LIST_MAX], one[SK_CORS_LIST_MAX];
    if (on >= sizeof one) return sk_einval(err, ecap, "--api-base is too long");
    memcpy(one, v, on);
    one[on] = 0;
    char why[160];
    if (sk_cors_parse_list(one, list, sizeof list, why, sizeof why) < 0 || !list[0] ||
        strchr(list, ','))
        return sk_einval(err, ecap, "--api-base must be http(s)://host[:port][/path]: %s", why);
    size_t ol = strlen(list);
    if (ol >= cap) return sk_einval(err, ecap, "--api-base is too long");
    memcpy(base, v, n);
    base[n] = 0;
    memcpy(origin, list, ol + 1);
    return 0;
}

/* Appends n bytes to *out at *o (cap known big enough). */
static void put(char *out, size_t *o, const char *s, size_t n)
{
    memcpy(out + *o, s, n);
    *o += n;
}

/* The directive of a policy at d (up to end): [*s, *e) trimmed of spaces;
 * returns where the next one starts. */
static const char *next_dir(const char *d, const char *end, const char **s, const char **e)
{
    const char *de = memchr(d, ';', (size_t)(end - d));
    if (!de) de = end;
    *s = d;
    *e = de;
    while (*s < *e && **s == ' ')
        (*s)++;
    while (*e > *s && (*e)[-1] == ' ')
        (*e)--;
    return de + (de < end);
}

int sk_csp_widen(const char *csp, size_t len, const char *extra, char *out, size_t cap)
{
    size_t o = 0;
#define PUT(p, n)                                                                                  \
    do {                                                                                           \
        if (o + (n) >= cap) return SK_ENOMEM;                                                      \
        memcpy(out + o, (p), (n));                                                                 \
        o += (n);                                                                                  \
    } while (0)
    const char *end = csp + len, *x_end = extra ? extra + strlen(extra) : extra;
    const char *s, *e, *xs, *xx;
    char used[16] = {0}; /* extra's directives already merged (at most 16) */
    for (const char *d = csp; d < end;) {
        d = next_dir(d, end, &s, &e);
        if (s == e) continue;
        if (o) PUT("; ", 2);
        PUT(s, (size_t)(e - s));
        const char *sp = memchr(s, ' ', (size_t)(e - s));
        size_t nl = sp ? (size_t)(sp - s) : (size_t)(e - s);
        int k = 0;
        for (const char *x = extra; x && x < x_end; k++) {
            x = next_dir(x, x_end, &xs, &xx);
            const char *xsp = memchr(xs, ' ', (size_t)(xx - xs));
            if (k < 16 && xsp && (size_t)(xsp - xs) == nl && !memcmp(xs, s, nl)) {
                PUT(xsp, (size_t)(xx - xsp));
                used[k] = 1;
            }
        }
    }
    int k = 0;
    for (const char *x = extra; x && x < x_end; k++) {
        x = next_dir(x, x_end, &xs, &xx);
        if (xs < xx && !memchr(xs, ' ', (size_t)(xx - xs))) return SK_EINVAL;
        if (xs < xx && (k >= 16 || !used[k])) {
            if (o) PUT("; ", 2);
            PUT(xs, (size_t)(xx - xs));
        }
    }
#undef PUT
    out[o] = 0;
    return (int)o;
}

/* The embedded page with its policy widened by extra (page's copy into
 * *out, the caller's). */
static int widen_page(const char *page, size_t plen, const char *extra, char **out, size_t *len)
{
    static const char meta[] = "http-equiv=\"Content-Security-Policy\" content=\"";
    const char *m = strstr(page, meta);
    const char *cs = m ? m + strlen(meta) : NULL, *ce = cs ? strchr(cs, '"') : NULL;
    if (!ce) return SK_EINVAL;
    size_t ecap = (size_t)(ce - cs) + (extra ? strlen(extra) : 0) + 64;
    char *buf = malloc(plen + ecap + 1);
    if (!buf) return SK_ENOMEM;
    size_t o = 0;
    put(buf, &o, page, (size_t)(cs - page));
    int n = sk_csp_widen(cs, (size_t)(ce - cs), extra, buf + o, ecap);
    if (n < 0) {
        free(buf);
        return n;
    }
    o += (size_t)n;
    put(buf, &o, ce, plen - (size_t)(ce - page));
    buf[o] = 0;
    *out = buf;
    *len = o;
    return 0;
}

int sk_sale_page_served(const char *extra, char **out, size_t *len)
{
    return widen_page(sk_web_sale_html, sk_web_sale_html_len, extra, out, len);
}

int sk_sale_page_build_csp(uint64_t id, const char *api_base, const char *extra, char **out,
                           size_t *len, char *err, size_t cap)
{
    char *page;
    size_t plen;
    int rc = sk_sale_page_build(id, api_base, &page, &plen, err, cap);
    if (rc < 0) return rc;
    if (!extra || !extra[0]) {
        *out = page;
        *len = plen;
        return 0;
    }
    rc = widen_page(page, plen, extra, out, len);
    free(page);
    if (rc < 0) sk_einval(err, cap, "the page's policy cannot take the CAPTCHA's origins");
    return rc;
}

int sk_sale_page_build(uint64_t id, const char *api_base, char **out, size_t *len, char *err,
                       size_t cap)
{
    char base[SK_SALE_API_BASE_MAX] = "", origin[SK_SALE_API_BASE_MAX] = "";
    if (id < 1) return sk_einval(err, cap, "the activity id must be positive");
    if (api_base && api_base[0] && check_base(api_base, base, origin, sizeof base, err, cap) < 0)
        return SK_EINVAL;
    const char *page = sk_web_sale_html;
    const char *ct = strstr(page, config_tag), *cs = strstr(page, csp_connect);
    if (!ct || !cs || cs > ct) return sk_einval(err, cap, "the embedded page lacks its markers");
    char conf[SK_SALE_API_BASE_MAX + 160], csp[SK_SALE_API_BASE_MAX + 32];
    int cn = snprintf(conf, sizeof conf,
                      "<script type=\"application/json\" id=\"sk-config\">{\"activity\":%" PRIu64
                      ",\"api_base\":\"%s\"}</script>",
                      id, base);
    int pn = snprintf(csp, sizeof csp, "connect-src %s", origin[0] ? origin : "'self'");
    size_t total = sk_web_sale_html_len + (size_t)cn + (size_t)pn;
    char *buf = malloc(total + 1);
    if (!buf) return SK_ENOMEM;
    size_t o = 0;
    put(buf, &o, page, (size_t)(cs - page));
    put(buf, &o, csp, (size_t)pn);
    const char *after_cs = cs + strlen(csp_connect);
    put(buf, &o, after_cs, (size_t)(ct - after_cs));
    put(buf, &o, conf, (size_t)cn);
    const char *rest = ct + strlen(config_tag);
    put(buf, &o, rest, sk_web_sale_html_len - (size_t)(rest - page));
    buf[o] = 0;
    *out = buf;
    *len = o;
    return 0;
}
