/* job_conns.h - the Redis client and the database store that a background
 * job of the order-worker process holds (the order worker, the
 * payment-timeout sweeper, the sampler of activity figures): opened
 * together, released together. */
#ifndef SK_JOB_CONNS_H
#define SK_JOB_CONNS_H
#include <stddef.h>

#include "redis/redis_conn.h"
#include "store/store.h"

/* Opens a client of redis_url (sk_redis_new's timeouts) into *r and the
 * store db_spec into *st. 0, or sk_redis_new's or sk_store_open's error
 * with "redis: ..." or "database: ..." in err (cap bytes; may be NULL);
 * then neither is open and both are NULL. The caller owns both and
 * releases them with sk_job_conns_close. */
int sk_job_conns_open(sk_redis **r, sk_store **st, const char *redis_url, int connect_ms,
                      int cmd_ms, const char *db_spec, char *err, size_t cap);

/* Frees r and closes st; either may be NULL. */
void sk_job_conns_close(sk_redis *r, sk_store *st);

#endif
