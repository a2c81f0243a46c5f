/* job_conns.c - a background job's Redis client and store (job_conns.h). */
#include "orders/job_conns.h"

#include "core/error.h"

int sk_job_conns_open(sk_redis **r, sk_store **st, const char *redis_url, int connect_ms,
                      int cmd_ms, const char *db_spec, char *err, size_t cap)
{
    char why[512] = ""; /* not every failure writes a reason */
    *r = NULL;
    *st = NULL;
    int rc = sk_redis_new(r, redis_url, connect_ms, cmd_ms, why, sizeof why);
    if (rc) return sk_errf(err, cap, rc, "redis: %s", why);
    if ((rc = sk_store_open(st, db_spec, why, sizeof why)) != 0) {
        sk_redis_free(*r);
        *r = NULL;
        return sk_errf(err, cap, rc, "database: %s", why);
    }
    return 0;
}

void sk_job_conns_close(sk_redis *r, sk_store *st)
{
    sk_redis_free(r);
    sk_store_close(st);
}
