/* codes.h - admission result codes (business outcomes of the Lua scripts).
 *
 * These are not errors: a refusal is a successful answer. Errors (Redis
 * unreachable, bad reply) are the negative SK_E* codes of error.h. */
#ifndef SK_CODES_H
#define SK_CODES_H

typedef enum sk_rc {
#define SK_RC(name, val, wire, http, msg) SK_RC_##name = val,
#include "core/codes.def"
#undef SK_RC
    SK_RC_COUNT_
} sk_rc;

/* Wire error code ("sold_out"), HTTP status and message of a result code;
 * "internal"/500 for a value outside the table. Static strings. */
const char *sk_rc_wire(int rc);
int sk_rc_http_status(int rc);
const char *sk_rc_message(int rc);
/* Symbolic name ("SOLD_OUT"), for logs and reports. */
const char *sk_rc_name(int rc);

#endif
