/* order_id.c - order ids (order_id.h). */
#include "engine/order_id.h"

#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "engine/keys.h"

int sk_oid_branch_ok(const char *b, size_t len)
{
    if (!b || len != SK_OID_BRANCH_LEN) return 0;
    for (size_t i = 0; i < len; i++)
        if (!((b[i] >= '0' && b[i] <= '9') || (b[i] >= 'a' && b[i] <= 'f'))) return 0;
    return 1;
}

/* A canonical decimal of 1..20 digits (no leading zero but "0"). */
static int dec_ok(const char *s, size_t len)
{
    if (len == 0 || len > 20 || (s[0] == '0' && len > 1)) return 0;
    for (size_t i = 0; i < len; i++)
        if (s[i] < '0' || s[i] > '9') return 0;
    return 1;
}

int sk_oid_parse(const char *s, size_t len, struct sk_oid *out)
{
    if (!s) return SK_EINVAL;
    struct sk_oid o;
    memset(&o, 0, sizeof o);
    o.index = SK_OID_NO_INDEX;
    int ll = sk_keys_parse_label(s, len, &o.activity_id, &o.seg);
    if (ll <= 0 || (size_t)ll >= SK_LABEL_MAX) return SK_EINVAL;
    o.label_len = (size_t)ll;
    /* "-<ms>-<seq>" then, optionally, "-<branch>" and then "-<index>" */
    const char *p = s + ll + 1, *end = s + len;
    if ((size_t)ll + 1 > len) return SK_EINVAL;
    const char *d1 = memchr(p, '-', (size_t)(end - p));
    if (!d1 || !dec_ok(p, (size_t)(d1 - p))) return SK_EINVAL;
    const char *q = d1 + 1;
    const char *d2 = memchr(q, '-', (size_t)(end - q));
    const char *qend = d2 ? d2 : end;
    if (!dec_ok(q, (size_t)(qend - q))) return SK_EINVAL;
    if (sk_sid_parse(p, (size_t)(qend - p), &o.sid) < 0) return SK_EINVAL;
    if (d2) {
        const char *b = d2 + 1;
        const char *d3 = memchr(b, '-', (size_t)(end - b));
        size_t bl = (size_t)((d3 ? d3 : end) - b);
        if (!sk_oid_branch_ok(b, bl)) return SK_EINVAL;
        memcpy(o.branch, b, bl);
        o.branch[bl] = 0;
        if (d3) {
            size_t il = (size_t)(end - d3 - 1);
            if (!dec_ok(d3 + 1, il) || il > 4) return SK_EINVAL;
            int v = 0;
            for (size_t i = 0; i < il; i++)
                v = v * 10 + (d3[1 + i] - '0');
            if (v >= SK_OID_INDEX_MAX) return SK_EINVAL;
            o.index = v;
        }
    }
    *out = o;
    return 0;
}

int sk_oid_format(char *out, size_t cap, const char *label, const char *sid, size_t sidlen,
                  const char *branch, size_t blen, int index)
{
    if (branch && blen && !sk_oid_branch_ok(branch, blen)) return SK_EINVAL;
    int has_branch = branch && blen;
    if (index != SK_OID_NO_INDEX && (!has_branch || index < 0 || index >= SK_OID_INDEX_MAX))
        return SK_EINVAL;
    int n = !has_branch ? snprintf(out, cap, "%s-%.*s", label, (int)sidlen, sid)
            : index == SK_OID_NO_INDEX
                ? snprintf(out, cap, "%s-%.*s-%.*s", label, (int)sidlen, sid, (int)blen, branch)
                : snprintf(out, cap, "%s-%.*s-%.*s-%d", label, (int)sidlen, sid, (int)blen, branch,
                           index);
    return n < 0 || (size_t)n >= cap ? SK_EINVAL : 0;
}
