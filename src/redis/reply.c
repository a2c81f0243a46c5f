/* reply.c - numbers out of Redis replies (reply.h). */
#include "redis/reply.h"

#include "core/error.h"
#include "core/num.h"

int sk_reply_i64(const redisReply *r, int64_t *out)
{
    if (!r) return SK_EPROTO;
    if (r->type == REDIS_REPLY_INTEGER) {
        *out = r->integer;
        return 0;
    }
    if (r->type == REDIS_REPLY_STRING && sk_num_i64(r->str, r->len, out) == 0) return 0;
    return SK_EPROTO;
}

int64_t sk_reply_i64_or(const redisReply *r, int64_t dflt)
{
    int64_t v;
    return sk_reply_i64(r, &v) == 0 ? v : dflt;
}
