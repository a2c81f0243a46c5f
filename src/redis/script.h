/* script.h - the script registry: every lua/NAME.lua file is embedded into the
 * binary at build time (tools/gen_scripts.c), called with EVALSHA by its
 * SHA1; on NOSCRIPT (Redis restart, failover, SCRIPT FLUSH) the call is
 * retried once as EVAL with the text, which also caches it again. */
#ifndef SK_SCRIPT_H
#define SK_SCRIPT_H
#include <stddef.h>

#include "redis/redis_conn.h"
#include "scripts_gen.h"

/* Name ("purchase") and lowercase hex SHA1 of an embedded script (static). */
const char *sk_script_name(enum sk_script_id id);
const char *sk_script_sha(enum sk_script_id id);
const char *sk_script_text(enum sk_script_id id);

/* SCRIPT LOAD of every embedded script: 0 or a connection/protocol error. */
int sk_script_load_all(sk_redis *r);

/* EVALSHA id with nkeys keys then nargs args (lens may be NULL for C
 * strings). On NOSCRIPT retries once with EVAL: a NOSCRIPT reply means the
 * script never ran, so the retry cannot act twice. *out is the
 * reply (caller frees with freeReplyObject); a Lua error comes back as a
 * REDIS_REPLY_ERROR reply and SK_ESCRIPT with the text in r->errstr. */
int sk_script_eval(sk_redis *r, enum sk_script_id id, int nkeys, const char *const *keys, int nargs,
                   const char *const *args, const size_t *arglens, redisReply **out);

/* Pipelined form: appends EVALSHA to r's output buffer. Replies are read
 * with sk_redis_read; a pipelined caller handles NOSCRIPT itself (load all
 * scripts first, see sk_script_is_noscript). */
int sk_script_append(sk_redis *r, enum sk_script_id id, int nkeys, const char *const *keys,
                     int nargs, const char *const *args, const size_t *arglens);
int sk_script_is_noscript(const redisReply *rep);

/* EVALSHA <sha> <nkeys> keys... args... into caller arrays of 3 + nkeys +
 * nargs entries (argv points into keys/args and numkeys: keep them alive);
 * arglens NULL means C strings. For callers with their own transport. */
void sk_script_fill_argv(enum sk_script_id id, int nkeys, const char *const *keys, int nargs,
                         const char *const *args, const size_t *arglens, const char **argv,
                         size_t *lens, char numkeys[16]);

#endif
