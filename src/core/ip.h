/* ip.h - IP addresses and networks as the HTTP layer sees its clients:
 * parsing a textual address or CIDR, canonical text, the network the
 * per-IP rate limit counts in, and matching an address against networks
 * (the trusted proxies). Pure: bytes in, no I/O, no allocation. */
#ifndef SK_IP_H
#define SK_IP_H
#include <stddef.h>

/* An IP address: IPv4 in 4 bytes (IPv4-mapped IPv6 is stored as IPv4), or
 * IPv6 in 16. */
struct sk_ip {
    int v6;
    unsigned char b[16];
};
/* A network: an address and its prefix length. */
struct sk_cidr {
    struct sk_ip ip;
    int bits; /* prefix length */
};

/* Parses len bytes of a textual IPv4 or IPv6 address: 0 or SK_EINVAL. */
int sk_ip_parse(const char *s, size_t len, struct sk_ip *out);
/* Canonical text (inet_ntop; IPv4 for IPv4-mapped) into out (SK_IP_TEXT). */
#define SK_IP_TEXT 46
void sk_ip_format(const struct sk_ip *ip, char out[SK_IP_TEXT]);
/* The network the per-IP rate limit counts an address in: an IPv4
 * address is itself; an IPv6 address keeps its first 64 bits (the /64 a
 * site or a host gets, inside which a client can pick addresses at will),
 * the rest zeroed. */
void sk_ip_rate_prefix(struct sk_ip *ip);

/* Parses len bytes of "ADDR" (a host network: /32 or /128) or
 * "ADDR/BITS" (BITS 0..32 for IPv4, 0..128 for IPv6). Returns 0, or
 * SK_EINVAL with *bad_prefix 1 when only the prefix length was wrong (the
 * caller's message says which), 0 when the address was. */
int sk_cidr_parse(const char *s, size_t len, struct sk_cidr *out, int *bad_prefix);
/* 1 when ip lies in one of the n networks of list. */
int sk_cidr_match(const struct sk_cidr *list, int n, const struct sk_ip *ip);

#endif
