/* ip.c - IP addresses and networks (ip.h). */
#include "core/ip.h"

#include <arpa/inet.h>
#include <stdint.h>
#include <string.h>

#include "core/error.h"
#include "core/num.h"

int sk_ip_parse(const char *s, size_t len, struct sk_ip *out)
{
    char buf[64];
    if (!s || len == 0 || len >= sizeof buf) return SK_EINVAL;
    memcpy(buf, s, len);
    buf[len] = 0;
    memset(out, 0, sizeof *out);
    if (inet_pton(AF_INET, buf, out->b) == 1) return 0;
    if (inet_pton(AF_INET6, buf, out->b) != 1) return SK_EINVAL;
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (memcmp(out->b, mapped, 12) == 0) { /* ::ffff:a.b.c.d is an IPv4 client */
        memmove(out->b, out->b + 12, 4);
        memset(out->b + 4, 0, 12);
        return 0;
    }
    out->v6 = 1;
    return 0;
}

void sk_ip_format(const struct sk_ip *ip, char out[SK_IP_TEXT])
{
    if (!inet_ntop(ip->v6 ? AF_INET6 : AF_INET, ip->b, out, SK_IP_TEXT)) out[0] = 0;
}

void sk_ip_rate_prefix(struct sk_ip *ip)
{
    if (ip->v6) memset(ip->b + 8, 0, 8);
}

int sk_cidr_parse(const char *s, size_t len, struct sk_cidr *out, int *bad_prefix)
{
    *bad_prefix = 0;
    const char *slash = memchr(s, '/', len);
    if (sk_ip_parse(s, (size_t)((slash ? slash : s + len) - s), &out->ip) < 0) return SK_EINVAL;
    uint64_t maxbits = out->ip.v6 ? 128 : 32, bits = maxbits;
    if (slash && sk_num_u64_range(slash + 1, (size_t)(s + len - slash - 1), 0, maxbits, &bits)) {
        *bad_prefix = 1;
        return SK_EINVAL;
    }
    out->bits = (int)bits;
    return 0;
}

int sk_cidr_match(const struct sk_cidr *list, int n, const struct sk_ip *ip)
{
    for (int i = 0; i < n; i++) {
        const struct sk_cidr *c = &list[i];
        if (c->ip.v6 != ip->v6) continue;
        int full = c->bits / 8, rest = c->bits % 8;
        if (memcmp(c->ip.b, ip->b, (size_t)full) != 0) continue;
        if (rest && ((c->ip.b[full] ^ ip->b[full]) & (0xff << (8 - rest)) & 0xff)) continue;
        return 1;
    }
    return 0;
}
