/* served_activity.h - the opening most HTTP API contract tests share: a
 * `seckill serve` under test (http_api.h) and one fresh activity on it,
 * created or made ready to sell, with its window around now. */
#ifndef SK_TEST_SERVED_ACTIVITY_H
#define SK_TEST_SERVED_ACTIVITY_H
#include <stdint.h>

#include "support/http_api.h"

/* What srv_start_activity leaves the activity as. */
enum srv_activity_state { ACT_CREATED, ACT_READY };

/* srv_start(v, NULL), then a fresh activity id with stock, per-user limit
 * and max per order, created (ACT_CREATED, still closed) or created,
 * preheated and opened (ACT_READY); returns the id. Fails the test when a
 * step does. */
uint64_t srv_start_activity(struct srv *v, enum srv_activity_state state, long long stock,
                            long long limit, long long maxq);

#endif
