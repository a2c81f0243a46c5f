/* event_batch.c - the id list of an outbox batch row (event_batch.h). */
#include "store/event_batch.h"

#include <string.h>

#include "core/error.h"

int sk_event_batch_id_ok(const char *id)
{
    if (!*id) return 0;
    for (const unsigned char *c = (const unsigned char *)id; *c; c++)
        if (*c <= ' ') return 0;
    return 1;
}

int sk_event_batch_add(char *buf, size_t cap, size_t *len, const char *id)
{
    size_t il = strlen(id), at = *len + (*len > 0);
    if (at + il >= cap) return SK_EINVAL;
    if (*len) buf[*len] = ' ';
    memcpy(buf + at, id, il);
    buf[at + il] = 0;
    *len = at + il;
    return 0;
}

const char *sk_event_batch_next(const char *p, size_t *len, int *last)
{
    while (*p == ' ')
        p++;
    if (!*p) return NULL;
    *len = strcspn(p, " ");
    const char *q = p + *len;
    while (*q == ' ')
        q++;
    *last = !*q;
    return p;
}
