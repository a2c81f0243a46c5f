/* num.h - strict decimal parsers for bytes from outside (flags, headers,
 * Redis replies, stream fields). Pure: no I/O, no allocation, no locale.
 * Each takes exactly [s, s+len) (no terminator needed, none looked for)
 * and returns 0 with *out set, or SK_EINVAL with *out untouched. */
#ifndef SK_NUM_H
#define SK_NUM_H
#include <stddef.h>
#include <stdint.h>

/* Digits only (leading zeros allowed), 0..UINT64_MAX, at most 20 digits. */
int sk_num_u64(const char *s, size_t len, uint64_t *out);
/* Canonical positive decimal 1..UINT64_MAX: first digit 1-9, so "0", a
 * sign and leading zeros are refused (ids: one value, one spelling). */
int sk_num_u64_canonical(const char *s, size_t len, uint64_t *out);
/* Optional '-' then digits, INT64_MIN+1..INT64_MAX. */
int sk_num_i64(const char *s, size_t len, int64_t *out);

/* The same, and the value within [lo, hi]. The one decimal parser of the
 * flags (core/cli.c), the config file (http/config.c), URLs (redis_url.c,
 * mysql_url.c) and replies (redis/reply.h). */
int sk_num_u64_range(const char *s, size_t len, uint64_t lo, uint64_t hi, uint64_t *out);
int sk_num_i64_range(const char *s, size_t len, int64_t lo, int64_t hi, int64_t *out);

/* Writes v in decimal at p (up to 20 bytes, no terminator); returns the
 * end of what it wrote. */
char *sk_num_u64_put(char *p, uint64_t v);

#endif
