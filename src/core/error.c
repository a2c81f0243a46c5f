/* error.c - text for the SK_E* codes. */
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>

const char *sk_strerror(int err)
{
    switch (err) {
    case 0: return "success";
#define SK_ERR_CASE(name, val, msg)                                                                \
    case val: return msg;
        SK_ERRORS(SK_ERR_CASE)
#undef SK_ERR_CASE
    default: return "unknown error";
    }
}

int sk_errf(char *err, size_t cap, int code, const char *fmt, ...)
{
    if (err && cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, cap, fmt, ap);
        va_end(ap);
    }
    return code;
}
