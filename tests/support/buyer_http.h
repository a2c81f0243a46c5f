/* buyer_http.h - a buyer's calls over one connection to `seckill serve`:
 * any request as user uid (X-User-Id), a purchase that hands back its
 * order id, an order's operations, and waiting for an order's status. */
#ifndef SK_TEST_BUYER_HTTP_H
#define SK_TEST_BUYER_HTTP_H
#include <stddef.h>
#include <stdint.h>

#include "support/http_client.h"

/* method path (body may be NULL) as user uid (0: no user header); the
 * status, the answer into r. */
int sk_th_as_user(struct sk_th_http *c, const char *method, const char *path, uint64_t uid,
                  const char *body, struct sk_th_resp *r);
/* One unit of activity aid for uid; the status, and on 200 the order id
 * into oid (cap bytes) when oid is not NULL. */
int sk_th_buy_one(struct sk_th_http *c, uint64_t aid, uint64_t uid, char *oid, size_t cap);
/* POST /api/v1/orders/<oid>/<op> as uid. */
int sk_th_order_op(struct sk_th_http *c, const char *oid, const char *op, uint64_t uid,
                   struct sk_th_resp *r);
/* GETs the order as uid until its status is want, at most timeout_ms
 * (fails the test then, or on an answer other than 200 or a poll's 503
 * busy / unavailable, which it polls again after); the last answer into
 * r. */
void sk_th_order_wait(struct sk_th_http *c, const char *oid, uint64_t uid, const char *want,
                      int timeout_ms, struct sk_th_resp *r);

/* A purchase of one unit of aid (or a poll of order oid) as uid, written
 * on a fresh connection and left waiting: the fd, whose answer
 * sk_th_http_answer reads (the caller closes it). */
int sk_th_buy_send(int port, uint64_t aid, uint64_t uid);
int sk_th_poll_send(int port, const char *oid, uint64_t uid);

#endif
