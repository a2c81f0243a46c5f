/* error.c - text for the SK_E* codes. */
#include "error.h"

const char *sk_strerror(int err)
{
    switch (err) {
    case 0: return "success";
#define SK_ERR_CASE(name, val, msg) \
    case val: return msg;
        SK_ERRORS(SK_ERR_CASE)
#undef SK_ERR_CASE
    default: return "unknown error";
    }
}
