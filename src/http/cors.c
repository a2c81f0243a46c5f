/* cors.c - the CORS policy (cors.h): the allowed-origins list, an origin's
 * check, a preflight's verdict. Pure: bytes in, no I/O, no heap. */
#include "http/cors.h"

#include <stdio.h>
#include <string.h>

#include "core/error.h"

static char lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* One origin of n bytes, checked and normalised into out (cap bytes,
 * terminated); its length, or -1 with the reason in err. */
static int origin_norm(const char *s, size_t n, char *out, size_t cap, char *err, size_t ecap)
{
    size_t sl;
    if (n > 8 && !strncmp(s, "https://", 8))
        sl = 8;
    else if (n > 7 && !strncmp(s, "http://", 7))
        sl = 7;
    else
        return sk_einval(err, ecap, "an origin starts with http:// or https://"), -1;
    if (n >= cap) return sk_einval(err, ecap, "origin too long"), -1;
    size_t i = sl, hs = sl;
    if (s[i] == '[') { /* [IPv6] */
        while (i < n && s[i] != ']') {
            char c = lower(s[i]);
            if (i > hs &&
                !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || c == ':' || c == '.'))
                return sk_einval(err, ecap, "bad IPv6 host in an origin"), -1;
            i++;
        }
        if (i == n || i == hs + 1) return sk_einval(err, ecap, "bad IPv6 host in an origin"), -1;
        i++;
    } else {
        while (i < n && s[i] != ':') {
            char c = lower(s[i]);
            if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-'))
                return sk_einval(err, ecap,
                                 "an origin is scheme://host[:port]: letters, digits, '.', '-' "
                                 "(no path, no '/' at the end)"),
                       -1;
            i++;
        }
        if (i == hs) return sk_einval(err, ecap, "an origin needs a host"), -1;
    }
    if (i < n) {
        if (s[i] != ':' || i + 1 == n || n - i - 1 > 5)
            return sk_einval(err, ecap, "an origin's port is :1..65535, nothing after it"), -1;
        unsigned port = 0;
        for (size_t k = i + 1; k < n; k++) {
            if (s[k] < '0' || s[k] > '9')
                return sk_einval(err, ecap, "an origin's port is :1..65535, nothing after it"), -1;
            port = port * 10 + (unsigned)(s[k] - '0');
        }
        if (port < 1 || port > 65535)
            return sk_einval(err, ecap, "an origin's port is :1..65535, nothing after it"), -1;
    }
    for (size_t k = 0; k < n; k++)
        out[k] = lower(s[k]);
    out[n] = 0;
    return (int)n;
}

int sk_cors_parse_list(const char *v, char *out, size_t cap, char *err, size_t ecap)
{
    char list[SK_CORS_LIST_MAX];
    size_t o = 0;
    int count = 0;
    if (!strcmp(v, "off")) v = "";
    for (const char *p = v; *p;) {
        while (*p == ' ' || *p == ',' || *p == '\t')
            p++;
        if (!*p) break;
        const char *e = p;
        while (*e && *e != ' ' && *e != ',' && *e != '\t')
            e++;
        if (e - p == 1 && *p == '*')
            return sk_einval(err, ecap, "'*' is not allowed: name the pages' origins");
        if (++count > SK_CORS_ORIGINS_MAX)
            return sk_einval(err, ecap, "at most %d origins", SK_CORS_ORIGINS_MAX);
        char one[SK_CORS_LIST_MAX];
        int n = origin_norm(p, (size_t)(e - p), one, sizeof one, err, ecap);
        if (n < 0) return SK_EINVAL;
        if (o + (o ? 1 : 0) + (size_t)n + 1 > sizeof list || o + (size_t)n + 2 > cap)
            return sk_einval(err, ecap, "the list is too long (at most %zu bytes)",
                             (cap < sizeof list ? cap : sizeof list) - 1);
        if (o) list[o++] = ',';
        memcpy(list + o, one, (size_t)n);
        o += (size_t)n;
        p = e;
    }
    if (o >= cap) return sk_einval(err, ecap, "the list is too long");
    memcpy(out, list, o);
    out[o] = 0;
    return 0;
}

int sk_cors_allowed(const char *list, const char *origin, size_t len)
{
    if (!origin || len == 0) return 0;
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == len) {
            size_t k = 0;
            while (k < n && p[k] == lower(origin[k]))
                k++;
            if (k == n) return 1;
        }
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

/* 1 when the n bytes at s name an allowed request header (no case). */
static int header_ok(const char *s, size_t n)
{
    static const char *const ok[] = {"content-type", "idempotency-key", "x-queue-pass", "x-user-id",
                                     "authorization"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        if (strlen(ok[i]) != n) continue;
        size_t k = 0;
        while (k < n && lower(s[k]) == ok[i][k])
            k++;
        if (k == n) return 1;
    }
    return 0;
}

enum sk_cors_verdict sk_cors_preflight(const char *list, const char *origin, size_t olen,
                                       const char *method, size_t mlen, const char *headers,
                                       size_t hlen)
{
    if (!sk_cors_allowed(list, origin, olen)) return SK_CORS_BAD_ORIGIN;
    if (!method ||
        !((mlen == 3 && !memcmp(method, "GET", 3)) || (mlen == 4 && !memcmp(method, "POST", 4))))
        return SK_CORS_BAD_METHOD;
    for (size_t i = 0; headers && i < hlen;) {
        while (i < hlen && (headers[i] == ' ' || headers[i] == ',' || headers[i] == '\t'))
            i++;
        size_t st = i;
        while (i < hlen && headers[i] != ',' && headers[i] != ' ' && headers[i] != '\t')
            i++;
        if (i > st && !header_ok(headers + st, i - st)) return SK_CORS_BAD_HEADERS;
    }
    return SK_CORS_OK;
}

const char *sk_cors_verdict_text(enum sk_cors_verdict v)
{
    switch (v) {
    case SK_CORS_OK: return "allowed";
    case SK_CORS_BAD_ORIGIN: return "this origin may not call the API (cors_origins)";
    case SK_CORS_BAD_METHOD: return "only GET and POST may be asked for";
    case SK_CORS_BAD_HEADERS: return "a requested header is not one of " SK_CORS_ALLOW_HEADERS;
    }
    return "refused";
}
