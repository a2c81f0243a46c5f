/* reply.h - numbers out of Redis replies, read by the one decimal parser
 * (core/num.h) rather than strtoll: a reply that is not a whole number is
 * said so, never read as its leading digits. Pure: no I/O. */
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

#endif
