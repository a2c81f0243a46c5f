/* url.c - the shared pieces of the URL parsers (url.h). */
#include "core/url.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/num.h"

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

int sk_url_decode(char *dst, size_t cap, const char *s, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '%') {
            if (i + 2 >= n) return SK_EINVAL;
            int h = hexval(s[i + 1]), l = hexval(s[i + 2]);
            if (h < 0 || l < 0) return SK_EINVAL;
            c = (char)(h * 16 + l);
            i += 2;
        }
        if (c == 0 || o + 1 >= cap) return SK_EINVAL;
        dst[o++] = c;
    }
    if (cap == 0) return SK_EINVAL;
    dst[o] = 0;
    return 0;
}

static int fail(char *err, size_t cap, const char *msg)
{
    if (cap) snprintf(err, cap, "%s", msg);
    return SK_EINVAL;
}

int sk_url_hostport(const char *p, const char *end, char *host, size_t hostcap, int *port,
                    char *err, size_t errcap)
{
    const char *hs = p, *he;
    if (p < end && *p == '[') { /* [IPv6]:port */
        const char *rb = memchr(p, ']', (size_t)(end - p));
        if (!rb) return fail(err, errcap, "unterminated [IPv6] host");
        hs = p + 1;
        he = rb;
        p = rb + 1;
    } else {
        he = memchr(p, ':', (size_t)(end - p));
        if (!he) he = end;
        p = he;
    }
    if (he == hs) return fail(err, errcap, "missing host");
    if ((size_t)(he - hs) >= hostcap) return fail(err, errcap, "host too long");
    memcpy(host, hs, (size_t)(he - hs));
    host[he - hs] = 0;
    if (p < end) {
        if (*p != ':') return fail(err, errcap, "unexpected characters after host");
        uint64_t v;
        if (sk_num_u64_range(p + 1, (size_t)(end - p - 1), 1, 65535, &v))
            return fail(err, errcap, "port must be 1-65535");
        *port = (int)v;
    }
    return 0;
}
