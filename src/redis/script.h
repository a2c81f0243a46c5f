/* script.h - the script registry: every lua/NAME.lua file is embedded into the
 * binary at build time (tools/gen_scripts.c), both as a script (EVALSHA by
 * its SHA1) and as a function of one Redis Functions library (FCALL by its
 * name). A server with Functions gets the library (FUNCTION LOAD) and FCALL;
 * otherwise EVALSHA. When the server lacks the script or the library
 * (NOSCRIPT or "Function not found": a restart, a failover, SCRIPT or
 * FUNCTION FLUSH) the call is retried once as EVAL with the text, which runs
 * it whatever happens meanwhile (a second flush cannot make it miss), and
 * the library is loaded again for the next call. */
#ifndef SK_SCRIPT_H
#define SK_SCRIPT_H
#include <stddef.h>

#include "redis/redis_conn.h"
#include "scripts_gen.h"

/* Most keys + arguments of one call: a purchase_batch of SK_BATCH_MAX
 * purchases has 9 + 5 * 1024 arguments and up to 8 + 2 * 1024 keys. */
#define SK_SCRIPT_MAX_ARGS 8192

/* Name ("purchase") and lowercase hex SHA1 of an embedded script (static). */
const char *sk_script_name(enum sk_script_id id);
const char *sk_script_sha(enum sk_script_id id);
const char *sk_script_text(enum sk_script_id id);

/* The FCALL name of a script in the library (static). */
const char *sk_script_fname(enum sk_script_id id);

/* (redis_conn.c) FCALL (the library loaded, r->fn not SK_FN_OFF) or
 * EVALSHA of id with nkeys keys then nargs args (arglens may be NULL for C
 * strings). When the server lacks it, the transport sends it once more as
 * EVAL: such a reply means the script never ran, so the retry cannot act
 * twice. *out is the reply (caller frees with freeReplyObject); a Lua error
 * comes back as a REDIS_REPLY_ERROR reply and SK_ESCRIPT with the text in
 * r->errstr. */
int sk_script_eval(sk_redis *r, enum sk_script_id id, int nkeys, const char *const *keys, int nargs,
                   const char *const *args, const size_t *arglens, redisReply **out);

/* Pipelined form (redis_conn.c): appended like sk_redis_append, the reply
 * read with sk_redis_read (a missing script is sent again as EVAL there
 * too). */
int sk_script_append(sk_redis *r, enum sk_script_id id, int nkeys, const char *const *keys,
                     int nargs, const char *const *args, const size_t *arglens);
/* 1 when rep says the server lacks the script or function, so it never ran:
 * NOSCRIPT, "Function not found", or FCALL unknown (no Functions). */
int sk_script_is_noscript(const redisReply *rep);

/* EVALSHA <sha> <nkeys> keys... args... into caller arrays of 3 + nkeys +
 * nargs entries (argv points into keys/args and numkeys: keep them alive);
 * arglens NULL means C strings. For callers with their own transport
 * (redis_async.c turns it into FCALL <name> ... when the server has the
 * library: the same layout). */
void sk_script_fill_argv(enum sk_script_id id, int nkeys, const char *const *keys, int nargs,
                         const char *const *args, const size_t *arglens, const char **argv,
                         size_t *lens, char numkeys[16]);

#endif
