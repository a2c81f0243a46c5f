/* json_field.c - one top-level field of a JSON object text (json_field.h):
 * a scanner that skips values (strings with escapes, nested objects and
 * arrays) instead of building them. */
#include "load/json_field.h"

#include <string.h>

#include "core/error.h"

static size_t skip_ws(const char *s, size_t n, size_t i)
{
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n'))
        i++;
    return i;
}

/* s[i] == '"': returns the index after the closing quote, or n on error. */
static size_t skip_string(const char *s, size_t n, size_t i)
{
    for (i++; i < n; i++) {
        if (s[i] == '\\')
            i++;
        else if (s[i] == '"')
            return i + 1;
    }
    return n + 1;
}

/* Skips one value; returns the index after it, or > n on error. */
static size_t skip_value(const char *s, size_t n, size_t i)
{
    if (i >= n) return n + 1;
    if (s[i] == '"') return skip_string(s, n, i);
    if (s[i] == '{' || s[i] == '[') {
        int depth = 0;
        while (i < n) {
            if (s[i] == '"') {
                i = skip_string(s, n, i);
                continue;
            }
            if (s[i] == '{' || s[i] == '[')
                depth++;
            else if (s[i] == '}' || s[i] == ']') {
                if (--depth == 0) return i + 1;
            }
            i++;
        }
        return n + 1;
    }
    size_t st = i;
    while (i < n && s[i] != ',' && s[i] != '}' && s[i] != ']' && s[i] != ' ' && s[i] != '\t' &&
           s[i] != '\r' && s[i] != '\n')
        i++;
    return i > st ? i : n + 1;
}

int sk_load_json_field(const char *s, size_t n, const char *key, const char **v, size_t *vlen,
                       int *is_str)
{
    size_t klen = strlen(key);
    size_t i = skip_ws(s, n, 0);
    if (i >= n || s[i] != '{') return SK_EPROTO;
    i = skip_ws(s, n, i + 1);
    if (i < n && s[i] == '}') return SK_ENOTFOUND;
    while (i < n) {
        if (s[i] != '"') return SK_EPROTO;
        size_t ks = i + 1, ke = skip_string(s, n, i);
        if (ke > n) return SK_EPROTO;
        i = skip_ws(s, n, ke);
        if (i >= n || s[i] != ':') return SK_EPROTO;
        i = skip_ws(s, n, i + 1);
        size_t vs = i, ve = skip_value(s, n, i);
        if (ve > n) return SK_EPROTO;
        if (ke - 1 - ks == klen && memcmp(s + ks, key, klen) == 0) {
            int str = s[vs] == '"';
            if (is_str) *is_str = str;
            *v = s + vs + (str ? 1 : 0);
            *vlen = ve - vs - (str ? 2 : 0);
            return 0;
        }
        i = skip_ws(s, n, ve);
        if (i < n && s[i] == ',')
            i = skip_ws(s, n, i + 1);
        else if (i < n && s[i] == '}')
            return SK_ENOTFOUND;
        else
            return SK_EPROTO;
    }
    return SK_EPROTO;
}
