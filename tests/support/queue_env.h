/* queue_env.h - the waiting room's script (engine/queue.h) driven from
 * tests on a blocking client: one buyer's join or poll, and a buyer who
 * joins and polls until the queue hands them a pass. Both fail the test
 * (CHECK) on a failed call. */
#ifndef SK_TEST_QUEUE_ENV_H
#define SK_TEST_QUEUE_ENV_H

#include <stdint.h>

#include "engine/queue.h"
#include "redis/redis_conn.h"

/* One join (SK_QUEUE_JOIN) or poll (SK_QUEUE_POLL) of uid; the reply's
 * head into *h when h is not NULL. */
struct sk_queue_answer queue_one(sk_redis *r, uint64_t aid, char op, uint64_t uid,
                                 struct sk_queue_head *h);
/* uid joins, then polls every 2 ms until admitted (a pass); fails the
 * test after 5 s or on any answer but waiting. */
struct sk_queue_answer queue_admitted(sk_redis *r, uint64_t aid, uint64_t uid);

#endif
