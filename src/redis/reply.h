/* reply.h - numbers out of Redis replies, read by the one decimal parser
 * (core/num.h) rather than strtoll: a reply that is not a whole number is
 * said so, never read as its leading digits; and one consumer group's
 * entry of an XINFO GROUPS reply. Pure: no I/O. */
#ifndef SK_REDIS_REPLY_H
#define SK_REDIS_REPLY_H
#include <stdint.h>

#include <hiredis.h>

/* The integer of r: an INTEGER reply, or a STRING that is exactly a
 * decimal ("-12", "0"). Returns 0 with *out set, or SK_EPROTO (r NULL, NIL,
 * another type, or text that is not a number) with *out untouched. */
int sk_reply_i64(const redisReply *r, int64_t *out);

/* The same, dflt when r holds no number (a missing field: NIL). */
int64_t sk_reply_i64_or(const redisReply *r, int64_t dflt);

/* One consumer group's fields in an XINFO GROUPS reply. */
struct sk_reply_xgroup {
    int found;       /* the reply lists the group */
    int64_t pending; /* delivered, not acknowledged; -1: not said */
    int64_t lag;     /* never delivered; -1: not said (Redis before 7) */
    char last[48];   /* last-delivered-id, "" when not said */
};
/* The entry of group in rep (an array of field-value arrays; any other
 * reply finds nothing) into *out. */
void sk_reply_xgroup(const redisReply *rep, const char *group, struct sk_reply_xgroup *out);

#endif
