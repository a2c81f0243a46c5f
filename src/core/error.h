/* error.h - the one error convention: 0 is success, failures are negative
 * SK_E* codes (like libuv's negative errno). Detail text lives on the object
 * that failed (ctx->errstr), like hiredis. */
#ifndef SK_ERROR_H
#define SK_ERROR_H
#include <stddef.h>

#define SK_ERRORS(X)                                                                               \
    X(EINVAL, -1, "invalid argument")                                                              \
    X(ENOMEM, -2, "out of memory")                                                                 \
    X(EIO, -3, "server unreachable or connection lost")                                            \
    X(ETIMEDOUT, -4, "timed out")                                                                  \
    X(EPROTO, -5, "unexpected reply")                                                              \
    X(ENOTFOUND, -6, "not found")                                                                  \
    X(EEXIST, -7, "already exists")                                                                \
    X(ESTATE, -8, "not allowed in the current state")                                              \
    X(EDB, -9, "database error")                                                                   \
    X(EAUTH, -10, "authentication failed")                                                         \
    X(ESCRIPT, -11, "script error")                                                                \
    X(EBUSY, -12, "busy: too many calls waiting")

enum sk_err {
#define SK_ERR_ENUM(name, val, msg) SK_##name = val,
    SK_ERRORS(SK_ERR_ENUM)
#undef SK_ERR_ENUM
};

/* Static text for an SK_E* code; "success" for 0. */
const char *sk_strerror(int err);

/* Formats a reason into err (cap bytes; err may be NULL) and returns
 * code: the one-liner of every failure path that reports into a buffer. */
int sk_errf(char *err, size_t cap, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* sk_errf with SK_EINVAL: every parser's failure path. */
#define sk_einval(err, cap, ...) sk_errf((err), (cap), SK_EINVAL, __VA_ARGS__)

#endif
