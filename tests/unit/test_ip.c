/* test_ip.c - addresses and networks (core/ip.h): CIDR parsing, its two
 * kinds of refusal, and matching at byte and bit boundaries. */
#include <string.h>

#include "core/error.h"
#include "core/ip.h"
#include "support/harness.h"

static struct sk_cidr net(const char *s)
{
    struct sk_cidr c;
    int bad;
    CHECK_MSG(sk_cidr_parse(s, strlen(s), &c, &bad) == 0, "%s", s);
    return c;
}

static int in(const struct sk_cidr *list, int n, const char *addr)
{
    struct sk_ip ip;
    CHECK_MSG(sk_ip_parse(addr, strlen(addr), &ip) == 0, "%s", addr);
    return sk_cidr_match(list, n, &ip);
}

SK_TEST(cidr_parse_refuses_bad_addresses_and_bad_prefixes_apart)
{
    struct sk_cidr c;
    int bad = 7;
    CHECK_EQ(sk_cidr_parse("10.0.0.0/8", 10, &c, &bad), 0);
    CHECK_EQ(c.bits, 8);
    CHECK_EQ(bad, 0);
    CHECK_EQ(sk_cidr_parse("::1", 3, &c, &bad), 0);
    CHECK_EQ(c.bits, 128); /* a bare address is a host network */
    CHECK(c.ip.v6);
    CHECK_EQ(sk_cidr_parse("::ffff:10.1.2.3", 15, &c, &bad), 0);
    CHECK(!c.ip.v6 && c.bits == 32); /* IPv4-mapped is IPv4 */
    const char *prefixes[] = {"10.0.0.0/33", "10.0.0.0/", "10.0.0.0/-1", "10.0.0.0/8x", "::/129"};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        CHECK_EQ(sk_cidr_parse(prefixes[i], strlen(prefixes[i]), &c, &bad), SK_EINVAL);
        CHECK_MSG(bad == 1, "%s: not a prefix refusal", prefixes[i]);
    }
    const char *addrs[] = {"10.0.0/8", "x/8", "", "/8", "10.0.0.256"};
    for (size_t i = 0; i < sizeof addrs / sizeof addrs[0]; i++) {
        CHECK_EQ(sk_cidr_parse(addrs[i], strlen(addrs[i]), &c, &bad), SK_EINVAL);
        CHECK_MSG(bad == 0, "%s: not an address refusal", addrs[i]);
    }
}

SK_TEST(cidr_match_at_byte_and_bit_boundaries_and_never_across_families)
{
    struct sk_cidr list[] = {net("10.0.0.0/8"), net("192.168.1.128/25"), net("2001:db8::/33")};
    CHECK(in(list, 3, "10.255.255.255"));
    CHECK(!in(list, 3, "11.0.0.0"));
    CHECK(in(list, 3, "192.168.1.128"));
    CHECK(in(list, 3, "192.168.1.255"));
    CHECK(!in(list, 3, "192.168.1.127"));
    CHECK(in(list, 3, "2001:db8:7fff::1"));
    CHECK(!in(list, 3, "2001:db8:8000::1"));
    CHECK(!in(list, 3, "::ffff:11.0.0.1"));
    CHECK(in(list, 3, "::ffff:10.0.0.1")); /* mapped: the IPv4 network */
    CHECK(!in(list, 0, "10.0.0.1"));       /* an empty list trusts nobody */
    struct sk_cidr all4 = net("0.0.0.0/0");
    CHECK(in(&all4, 1, "203.0.113.9"));
    CHECK(!in(&all4, 1, "::1"));
}
