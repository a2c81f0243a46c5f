/* reply.c - numbers out of Redis replies (reply.h). */
#include "redis/reply.h"

#include <stdio.h>
#include <string.h>

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

void sk_reply_xgroup(const redisReply *rep, const char *group, struct sk_reply_xgroup *out)
{
    *out = (struct sk_reply_xgroup){.pending = -1, .lag = -1};
    for (size_t g = 0; rep && rep->type == REDIS_REPLY_ARRAY && g < rep->elements; g++) {
        const redisReply *m = rep->element[g];
        if (m->type != REDIS_REPLY_ARRAY) continue;
        struct sk_reply_xgroup e = {.pending = -1, .lag = -1};
        for (size_t i = 0; i + 1 < m->elements; i += 2) {
            const redisReply *k = m->element[i], *v = m->element[i + 1];
            if (k->type != REDIS_REPLY_STRING) continue;
            if (!strcmp(k->str, "name") && v->type == REDIS_REPLY_STRING)
                e.found = !strcmp(v->str, group);
            else if (!strcmp(k->str, "pending") && v->type == REDIS_REPLY_INTEGER)
                e.pending = v->integer;
            else if (!strcmp(k->str, "lag") && v->type == REDIS_REPLY_INTEGER)
                e.lag = v->integer;
            else if (!strcmp(k->str, "last-delivered-id") && v->type == REDIS_REPLY_STRING)
                snprintf(e.last, sizeof e.last, "%s", v->str);
        }
        if (e.found) *out = e;
    }
}
