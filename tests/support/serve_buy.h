/* serve_buy.h - a blocking test's purchases on any activity: one
 * purchase_batch call on the blocking client (sk_stock_buy) for an
 * unsegmented activity; for a segmented one, whose base keys answer
 * SEGMENTED, every purchase goes over HTTP to a real `seckill serve --role
 * api` on the same Redis, so the home routing and the borrow a test proves
 * are the ones buyers run (src/http/purchase_batch.c, purchase_borrow.c,
 * seg_stocks.c). The serve is started on the first such purchase of the
 * test process and dies with it. */
#ifndef SK_TEST_SERVE_BUY_H
#define SK_TEST_SERVE_BUY_H
#include <stddef.h>
#include <stdint.h>

#include "engine/stock.h"
#include "redis/redis_conn.h"

/* The store the serve runs on (spec as --db takes it; copied): the one
 * the test's activities and order worker use, since the first admission
 * claims a key set for its caller's store (docs/design.md, "The store's
 * identity"). NULL: a fresh SQLite file of the test's own. */
void sk_th_buy_store(const char *db_spec);

/* As sk_stock_buy. A segmented activity's purchases are sent in order, one
 * request each (the quantity, X-User-Id, Idempotency-Key, X-Queue-Pass; rl
 * as serve's --rate-per-user-per-s and --rate-burst, the serve restarted
 * when they change; no per-IP limit), each answer read back into res
 * (order id and quantity, the refusal's code, a 429's retry_after_ms);
 * *remaining: every segment's stock summed after. SK_EIO (r->errstr)
 * when serve answered 503 unavailable. */
int sk_th_stock_buy(sk_redis *r, uint64_t activity_id, const struct sk_rate_limits *rl,
                    const struct sk_purchase *p, size_t n, struct sk_admission *res,
                    int64_t *remaining);

/* The port of the serve the purchases above run on (started now if none
 * is) on r's Redis, for a test that sends its own requests too. */
int sk_th_buy_port(sk_redis *r);

/* Stops that serve (SIGTERM, a clean exit checked), if one runs. */
void sk_th_buy_stop(void);

#endif
