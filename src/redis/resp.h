/* resp.h - the bytes of a Redis command (RESP: an array of bulk strings),
 * written by the async client (redis_async.c) straight into its output
 * buffer. Pure: no I/O, no allocation. The same bytes as hiredis's
 * redisFormatCommandArgv, which allocated a string per command and ran
 * sprintf per argument (about a sixth of serve's user-space instructions
 * per admission, counted with callgrind). */
#ifndef SK_REDIS_RESP_H
#define SK_REDIS_RESP_H
#include <stddef.h>

/* How many bytes the command takes; lens NULL: argv are C strings. */
size_t sk_resp_cmd_len(int argc, const char *const *argv, const size_t *lens);

/* Writes the command at p (sk_resp_cmd_len bytes, no terminator); returns
 * the end of what it wrote. */
char *sk_resp_cmd_put(char *p, int argc, const char *const *argv, const size_t *lens);

#endif
