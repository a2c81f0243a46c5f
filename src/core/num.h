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

#endif
