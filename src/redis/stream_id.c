/* stream_id.c - Redis stream entry ids (stream_id.h). */
#include "redis/stream_id.h"

#include <string.h>

#include "core/error.h"
#include "core/num.h"

int sk_sid_parse(const char *s, size_t len, struct sk_sid *out)
{
    const char *dash = s ? memchr(s, '-', len) : NULL;
    if (!dash) return SK_EINVAL;
    size_t a = (size_t)(dash - s);
    struct sk_sid v;
    if (sk_num_u64(s, a, &v.ms) || sk_num_u64(dash + 1, len - a - 1, &v.seq)) return SK_EINVAL;
    *out = v;
    return 0;
}

int sk_sid_cmp(struct sk_sid a, struct sk_sid b)
{
    if (a.ms != b.ms) return a.ms < b.ms ? -1 : 1;
    return a.seq < b.seq ? -1 : a.seq > b.seq;
}
