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
