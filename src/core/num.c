/* num.c - strict decimal parsers (num.h). */
#include "core/num.h"

#include "core/error.h"

int sk_num_u64(const char *s, size_t len, uint64_t *out)
{
    if (!s || len == 0 || len > 20) return SK_EINVAL;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return SK_EINVAL;
        uint64_t d = (uint64_t)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10) return SK_EINVAL; /* overflow, digit by digit */
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

int sk_num_u64_canonical(const char *s, size_t len, uint64_t *out)
{
    if (!s || len == 0 || s[0] < '1' || s[0] > '9') return SK_EINVAL;
    return sk_num_u64(s, len, out);
}

int sk_num_u64_range(const char *s, size_t len, uint64_t lo, uint64_t hi, uint64_t *out)
{
    uint64_t v;
    if (sk_num_u64(s, len, &v) || v < lo || v > hi) return SK_EINVAL;
    *out = v;
    return 0;
}

int sk_num_i64_range(const char *s, size_t len, int64_t lo, int64_t hi, int64_t *out)
{
    int64_t v;
    if (sk_num_i64(s, len, &v) || v < lo || v > hi) return SK_EINVAL;
    *out = v;
    return 0;
}

int sk_num_i64(const char *s, size_t len, int64_t *out)
{
    if (!s) return SK_EINVAL;
    int neg = len > 0 && s[0] == '-';
    uint64_t u;
    if (sk_num_u64(s + neg, len - (size_t)neg, &u) || u > (uint64_t)INT64_MAX) return SK_EINVAL;
    *out = neg ? -(int64_t)u : (int64_t)u;
    return 0;
}

char *sk_num_u64_put(char *p, uint64_t v)
{
    char t[20];
    int n = 0;
    do {
        t[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *p++ = t[--n];
    return p;
}
