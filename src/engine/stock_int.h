/* stock_int.h - internal to the admission engine (stock.c, segment.c):
 * the reply checks both use. Not for other modules. */
#ifndef SK_STOCK_INT_H
#define SK_STOCK_INT_H
#include <stddef.h>
#include <stdint.h>

#include "engine/stock.h"
#include "redis/redis_conn.h"
#include "redis/script.h"

/* Sets r->errstr to "unexpected reply to <what>"; returns r->err = SK_EPROTO. */
int sk_stock_proto(sk_redis *r, const char *what);

/* sk_stock_batch_parse on a blocking call's reply, its failure in r:
 * SK_ESCRIPT for a malformed call (as a Lua error was), SK_EPROTO. */
int sk_stock_batch_reply(sk_redis *r, const redisReply *rep, size_t n, struct sk_admission *res,
                         int64_t *remaining);

/* Runs a script (C-string arguments) whose reply is an array of integers;
 * copies up to want of them into out (missing ones are 0). Returns 0, the
 * call's error, or SK_EPROTO. */
int sk_stock_eval_ints(sk_redis *r, enum sk_script_id id, int nkeys, const char *const *keys,
                       int nargs, const char *const *args, int64_t *out, size_t want);

#endif
