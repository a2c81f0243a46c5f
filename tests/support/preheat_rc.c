/* preheat_rc.c - the preheat answer of preheat_rc.h. */
#include "support/preheat_rc.h"

#include "support/harness.h"

int sk_th_preheat_rc(sk_redis *r, const struct sk_stock_def *d, int force, int64_t *left)
{
    int rc;
    int64_t tmp;
    CHECK_EQ(sk_stock_preheat(r, d, force, &rc, left ? left : &tmp), 0);
    return rc;
}
