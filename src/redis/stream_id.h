/* stream_id.h - Redis stream entry ids ("<ms>-<seq>"): parse and order
 * them. Pure: no I/O. Order ids embed them (`<label>-<ms>-<seq>`), the
 * worker and reconcile compare them. */
#ifndef SK_STREAM_ID_H
#define SK_STREAM_ID_H
#include <stddef.h>
#include <stdint.h>

struct sk_sid {
    uint64_t ms;
    uint64_t seq;
};

/* "<ms>-<seq>", both plain decimals, from exactly [s, s+len).
 * Returns 0, or SK_EINVAL (out untouched). */
int sk_sid_parse(const char *s, size_t len, struct sk_sid *out);
/* <0, 0, >0 as a is before, equal to, after b (Redis's order). */
int sk_sid_cmp(struct sk_sid a, struct sk_sid b);

#endif
