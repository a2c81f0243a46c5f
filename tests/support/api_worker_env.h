/* api_worker_env.h - a sale whose order worker the test stops and starts:
 * a private redis-server, `seckill serve --role api` with two HTTP
 * processes, and a `seckill worker` process of its own (stopped with
 * SIGTERM, started anew: a SIGSTOP could hold a database transaction
 * open). For the tests of keys that vanish and of Redis's memory
 * (test_recovery_keys.c, test_redis_memory.c). */
#ifndef SK_TEST_API_WORKER_ENV_H
#define SK_TEST_API_WORKER_ENV_H
#include <sys/types.h>

#include "redis/redis_conn.h"
#include "store/store.h"
#include "support/harness.h"
#include "support/sale_env.h"

struct aw_env {
    struct sk_th_redis rs;
    struct sk_th_serve v;
    pid_t worker; /* 0 while stopped */
    char wlog[400];
    sk_store *st; /* serve's store */
    sk_redis *r;  /* a client of our own */
};

/* Starts it all (redis_conf: extra "--name value" arguments of the
 * redis-server, NULL-terminated, may be NULL) and waits until serve is
 * ready; failures are logged when the test fails (sale_log_on_failure). */
void aw_start(struct aw_env *e, const char *const *redis_conf);
/* Stops the worker (SIGTERM, bounded), or starts a new one. */
void aw_worker_stop(struct aw_env *e);
void aw_worker_start(struct aw_env *e);
/* Stops everything (the sale's buyers must be stopped first). */
void aw_stop(struct aw_env *e);

/* The end of a sale that sold out (its buyers stopped): drained, the
 * invariants (sale_check_invariants), every unit of the stock sold, every
 * recorded 200's order in the database, no order id answered twice.
 * Returns the units sold. */
int64_t aw_sale_end(struct aw_env *e, const struct sale *s, uint64_t aid, int64_t stock,
                    int64_t limit);

#endif
