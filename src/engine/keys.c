/* keys.c - key naming (the Redis data model of docs/design.md; segments in docs/segments.md). */
#include "engine/keys.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"

void sk_keys_seg(struct sk_keys *k, uint64_t id, int seg)
{
    char tag[SK_LABEL_MAX];
    if (seg >= 0) {
        snprintf(tag, sizeof tag, "a%" PRIu64 ".s%d", id, seg);
        snprintf(k->label, sizeof k->label, "%" PRIu64 ".%d", id, seg);
    } else {
        snprintf(tag, sizeof tag, "a%" PRIu64, id);
        snprintf(k->label, sizeof k->label, "%" PRIu64, id);
    }
    k->activity_id = id;
    k->seg = seg >= 0 ? seg : SK_SEG_NONE;
    snprintf(k->meta, sizeof k->meta, "sk:{%s}:meta", tag);
    snprintf(k->stock, sizeof k->stock, "sk:{%s}:stock", tag);
    snprintf(k->buyers, sizeof k->buyers, "sk:{%s}:buyers", tag);
    snprintf(k->orders, sizeof k->orders, "sk:{%s}:orders", tag);
    snprintf(k->released, sizeof k->released, "sk:{%s}:released", tag);
    snprintf(k->idem, sizeof k->idem, "sk:{%s}:idem", tag);
    snprintf(k->ledger, sizeof k->ledger, "sk:{%s}:ledger", tag);
    snprintf(k->dlq, sizeof k->dlq, "sk:{%s}:dlq", tag);
    snprintf(k->xout, sizeof k->xout, "sk:{%s}:xout", tag);
    snprintf(k->xin, sizeof k->xin, "sk:{%s}:xin", tag);
    snprintf(k->wr_q, sizeof k->wr_q, "sk:{%s}:wr:q", tag);
    snprintf(k->wr_pass, sizeof k->wr_pass, "sk:{%s}:wr:pass", tag);
    snprintf(k->wr_spent, sizeof k->wr_spent, "sk:{%s}:wr:spent", tag);
    snprintf(k->wr_held, sizeof k->wr_held, "sk:{%s}:wr:held", tag);
    snprintf(k->reg, sizeof k->reg, "sk:{%s}:reg", tag);
    snprintf(k->draw, sizeof k->draw, "sk:{%s}:draw", tag);
    snprintf(k->rl_u, sizeof k->rl_u, "sk:{%s}:rl:u:", tag);
    snprintf(k->rl_ip, sizeof k->rl_ip, "sk:{%s}:rl:ip:", tag);
    snprintf(k->ch, sizeof k->ch, "sk:{%s}:ch:", tag);
}

void sk_keys_for(struct sk_keys *k, uint64_t id)
{
    sk_keys_seg(k, id, SK_SEG_NONE);
}

/* Canonical decimal (no sign, no leading zero) of at most maxd digits. */
static int dec(const char *s, size_t len, int maxd, uint64_t *v)
{
    if (len == 0 || (int)len > maxd || (s[0] == '0' && len > 1)) return SK_EINVAL;
    uint64_t x = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return SK_EINVAL;
        uint64_t d = (uint64_t)(s[i] - '0');
        if (x > (UINT64_MAX - d) / 10) return SK_EINVAL;
        x = x * 10 + d;
    }
    *v = x;
    return 0;
}

int sk_keys_meta_id(const char *key, size_t len, uint64_t *id)
{
    static const char pre[] = "sk:{a", post[] = "}:meta";
    size_t np = sizeof pre - 1, nq = sizeof post - 1;
    if (len <= np + nq || memcmp(key, pre, np) || memcmp(key + len - nq, post, nq)) return 0;
    uint64_t v;
    if (dec(key + np, len - np - nq, 20, &v) < 0 || v == 0) return 0;
    *id = v;
    return 1;
}

int sk_keys_parse_label(const char *oid, size_t len, uint64_t *aid, int *seg)
{
    const char *dash = memchr(oid, '-', len);
    if (!dash) return SK_EINVAL;
    size_t ll = (size_t)(dash - oid);
    const char *dot = memchr(oid, '.', ll);
    size_t al = dot ? (size_t)(dot - oid) : ll;
    uint64_t a, s = 0;
    if (dec(oid, al, 20, &a) < 0 || a == 0) return SK_EINVAL;
    if (dot && dec(dot + 1, ll - al - 1, 4, &s) < 0) return SK_EINVAL;
    *aid = a;
    *seg = dot ? (int)s : SK_SEG_NONE;
    return (int)ll;
}

int sk_keys_for_order(struct sk_keys *k, const char *order_id)
{
    uint64_t aid;
    int seg;
    if (sk_keys_parse_label(order_id, strlen(order_id), &aid, &seg) < 0) return SK_EINVAL;
    sk_keys_seg(k, aid, seg);
    return 0;
}

/* prefix then len bytes of s into out (cap bytes, terminated). */
static int key_of(const char *prefix, const char *s, size_t len, char *out, size_t cap)
{
    size_t pl = strlen(prefix);
    if (pl + len + 1 > cap) return SK_ENOMEM;
    memcpy(out, prefix, pl);
    memcpy(out + pl, s, len);
    out[pl + len] = 0;
    return (int)(pl + len);
}

int sk_keys_rl_user(const struct sk_keys *k, uint64_t user_id, char *out, size_t cap)
{
    char d[20];
    size_t n = sizeof d;
    do {
        d[--n] = (char)('0' + user_id % 10);
        user_id /= 10;
    } while (user_id);
    return key_of(k->rl_u, d + n, sizeof d - n, out, cap);
}

int sk_keys_rl_ip(const struct sk_keys *k, const char *ip, char *out, size_t cap)
{
    size_t len = ip ? strlen(ip) : 0;
    return key_of(k->rl_ip, ip ? ip : "", len > SK_RL_IP_MAX ? 0 : len, out, cap);
}

int sk_keys_ch(const struct sk_keys *k, const char *id, char *out, size_t cap)
{
    size_t len = id ? strlen(id) : 0;
    return key_of(k->ch, id ? id : "", len > SK_KEYS_CH_ID_MAX ? 0 : len, out, cap);
}
