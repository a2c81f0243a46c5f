/* router.c - table-driven path matching for routes.def. */
#include "http/router.h"

#include <string.h>

static const struct {
    const char *name, *method, *pattern;
} table[SK_ROUTE_COUNT] = {
#define SK_ROUTE(n, m, p) [SK_ROUTE_##n] = {#n, m, p},
#include "http/routes.def"
#undef SK_ROUTE
};

const char *sk_route_name(enum sk_route r)
{
    return r < SK_ROUTE_COUNT ? table[r].name : "other";
}

/* 1: matched, 0: no, -1: shape matched but {id} is not a positive integer
 * in canonical decimal (no sign, no leading zero). */
static int match_pattern(const char *pat, const char *path, size_t plen, struct sk_route_match *m)
{
    size_t i = 0;
    int bad_id = 0;
    while (*pat) {
        if (pat[0] == '{') {
            const char *close = strchr(pat, '}');
            size_t start = i;
            while (i < plen && path[i] != '/')
                i++;
            if (i == start) return 0;
            if (strncmp(pat, "{id}", 4) == 0) {
                uint64_t v = 0;
                int ok = i - start <= 20;
                for (size_t k = start; ok && k < i; k++) {
                    unsigned d = (unsigned)(path[k] - '0');
                    if (d > 9 || v > (UINT64_MAX - d) / 10)
                        ok = 0;
                    else
                        v = v * 10 + d;
                }
                /* one spelling per id: "001001" or "0" would let a
                 * gateway rule on the literal path be sidestepped */
                if (!ok || v == 0 || path[start] == '0') bad_id = 1;
                m->id = v;
            } else {
                m->param = path + start;
                m->param_len = i - start;
            }
            pat = close + 1;
            continue;
        }
        if (i >= plen || path[i] != *pat) return 0;
        i++;
        pat++;
    }
    if (i != plen) return 0;
    return bad_id ? -1 : 1;
}

void sk_router_match(const char *method, size_t mlen, const char *path, size_t plen,
                     struct sk_route_match *m)
{
    memset(m, 0, sizeof m[0]);
    m->status = 404;
    const char *q = memchr(path, '?', plen);
    if (q) plen = (size_t)(q - path);
    for (int r = 0; r < SK_ROUTE_COUNT; r++) {
        struct sk_route_match t = {0};
        int k = match_pattern(table[r].pattern, path, plen, &t);
        if (k == 0) continue;
        int method_ok =
            strlen(table[r].method) == mlen && memcmp(table[r].method, method, mlen) == 0;
        if (!method_ok) {
            /* the same path may take another method in a later row */
            if (m->status == 404) {
                *m = t;
                m->status = 405;
                m->route = (enum sk_route)r;
                m->allow = table[r].method;
            }
            continue;
        }
        *m = t;
        m->route = (enum sk_route)r;
        m->status = k < 0 ? 400 : 200;
        return;
    }
}
