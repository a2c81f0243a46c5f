/* load_records.c - the accepted orders of a load run (load_int.h): each
 * 200's user, units and order id, kept per worker thread and merged after
 * the run for the checks. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/vec.h"
#include "load/load_int.h"

int sk_load_rec_add(struct sk_load_records *rs, uint64_t uid, int64_t qty, const char *oid,
                    size_t oid_len)
{
    if (SK_VEC_RESERVE(rs->v, rs->cap, rs->n + 1, 1024) < 0) return SK_ENOMEM;
    if (SK_VEC_RESERVE(rs->arena, rs->acap, rs->alen + oid_len, 65536) < 0) return SK_ENOMEM;
    memcpy(rs->arena + rs->alen, oid, oid_len);
    rs->v[rs->n++] = (struct sk_load_rec){uid, qty, rs->alen, (uint32_t)oid_len};
    rs->alen += oid_len;
    return 0;
}

void sk_load_rec_free(struct sk_load_records *rs)
{
    if (!rs) return;
    free(rs->v);
    free(rs->arena);
    memset(rs, 0, sizeof *rs);
}

int sk_load_rec_merge(struct sk_load_records *dst, const struct sk_load_records *src)
{
    for (size_t i = 0; i < src->n; i++)
        if (sk_load_rec_add(dst, src->v[i].uid, src->v[i].qty, src->arena + src->v[i].oid_off,
                            src->v[i].oid_len) < 0)
            return SK_ENOMEM;
    return 0;
}

void sk_load_result_free(struct sk_load_result *r)
{
    if (!r) return;
    sk_load_rec_free(r->rec);
    free(r->rec);
    r->rec = NULL;
}
