/* codes.c - lookups over the codes.def table. */
#include "core/codes.h"

struct sk_rc_info {
    const char *name, *wire, *msg;
    int http;
};

static const struct sk_rc_info rc_table[] = {
#define SK_RC(name, val, wire, http, msg) [val] = {#name, wire, msg, http},
#include "core/codes.def"
#undef SK_RC
};

static const struct sk_rc_info *rc_info(int rc)
{
    if (rc < 0 || rc >= SK_RC_COUNT_ || rc_table[rc].name == 0) return 0;
    return &rc_table[rc];
}

const char *sk_rc_wire(int rc)
{
    return rc_info(rc) ? rc_info(rc)->wire : "internal";
}
int sk_rc_http_status(int rc)
{
    return rc_info(rc) ? rc_info(rc)->http : 500;
}
const char *sk_rc_message(int rc)
{
    return rc_info(rc) ? rc_info(rc)->msg : "unknown result code";
}
const char *sk_rc_name(int rc)
{
    return rc_info(rc) ? rc_info(rc)->name : "UNKNOWN";
}
