/* redact.c - secrets out of URLs before they are logged (redact.h). */
#include "core/redact.h"

#include <string.h>
#include <strings.h>

struct out {
    char *p;
    size_t cap, n;
};

static void put(struct out *o, const char *s, size_t n)
{
    for (size_t i = 0; i < n && o->n + 1 < o->cap; i++)
        o->p[o->n++] = s[i];
}

static int is_sep(char c)
{
    return c == '?' || c == '&' || c == ';' || c == ' ' || c == '\t';
}

/* Does the key [k, k+n) name a password ("password", "sslpassword", ...)? */
static int names_a_secret(const char *k, size_t n)
{
    for (size_t i = 0; i + 4 <= n; i++)
        if (strncasecmp(k + i, "pass", 4) == 0) return 1;
    return 0;
}

/* [s, end): the rest of a URL (path, query) or a key=value string: every
 * value of a key that names a password is replaced. */
static void copy_params(struct out *o, const char *s, const char *end)
{
    while (s < end) {
        size_t key = 0;
        while (s + key < end && !is_sep(s[key]) && s[key] != '=')
            key++;
        if (s + key == end || s[key] != '=') { /* no value here: copy through the separator */
            size_t n = key + (s + key < end ? 1 : 0);
            put(o, s, n);
            s += n;
            continue;
        }
        put(o, s, key + 1);
        const char *v = s + key + 1;
        size_t vl = 0;
        while (v + vl < end && !is_sep(v[vl]) && v[vl] != '#')
            vl++;
        if (names_a_secret(s, key))
            put(o, SK_REDACTED, strlen(SK_REDACTED));
        else
            put(o, v, vl);
        s = v + vl;
        if (s < end) put(o, s++, 1);
    }
}

const char *sk_redact_url(const char *url, char *out, size_t cap)
{
    struct out o = {out, cap, 0};
    if (cap == 0) return out;
    out[0] = 0;
    if (!url) return out;
    const char *rest = url, *end = url + strlen(url), *scheme = strstr(url, "://");
    if (scheme) {
        const char *auth = scheme + 3;
        /* The user info ends at the last '@': a password may hold '/', '?',
         * '#' or '@' that its owner did not percent-encode, and parsers
         * disagree on where it ends. An '@' later in the URL only hides
         * more than needed. */
        const char *at = strrchr(auth, '@');
        put(&o, url, (size_t)(auth - url));
        rest = auth;
        if (at) {
            const char *colon = memchr(auth, ':', (size_t)(at - auth));
            if (colon) {
                put(&o, auth, (size_t)(colon - auth) + 1);
                put(&o, SK_REDACTED, strlen(SK_REDACTED));
            } else {
                copy_params(&o, auth, at); /* a user, or a query before the '@' */
            }
            rest = at;
        }
    }
    copy_params(&o, rest, end);
    out[o.n] = 0;
    return out;
}
