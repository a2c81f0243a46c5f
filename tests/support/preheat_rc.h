/* preheat_rc.h - the preheat script's answer in one call, for the tests
 * that walk a preheat through its answers (live stock, open, forced,
 * below what is sold) on one or on several segments. */
#ifndef SK_TEST_PREHEAT_RC_H
#define SK_TEST_PREHEAT_RC_H
#include <stdint.h>

#include "engine/stock.h"
#include "redis/redis_conn.h"

/* Preheats d on r (force: rewrite live stock, which the script allows only
 * while closed); the script's answer (SK_RC_*), the stock it reports into
 * *left (may be NULL). Fails the test when the call itself fails. */
int sk_th_preheat_rc(sk_redis *r, const struct sk_stock_def *d, int force, int64_t *left);

#endif
