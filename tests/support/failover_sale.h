/* failover_sale.h - a flash sale over HTTP through a failover, and what
 * survived it: the tests of Sentinel (test_sentinel.c) and of synchronous
 * replicas on a Redis Cluster (test_sync_replicas.c) run the same sale and
 * the same checks, with their own fault. */
#ifndef SK_TEST_FAILOVER_SALE_H
#define SK_TEST_FAILOVER_SALE_H
#include <stdint.h>

#define FO_SALE_STOCK 20000
#define FO_SALE_LIMIT 2
#define FO_SALE_TRIES 3 /* attempts per user: one more than the limit */

/* What a sale through a failover gave. */
struct fo_sale_result {
    int ok, lost, over_limit, unconfirmed, s503;
    int64_t fault_ms, fault_to_200_ms, max_lat_ms;
    int master_port; /* the master the checks read (the client followed it there) */
};

/* Opens activity aid (0: a fresh id) through url, starts `seckill serve --role api --redis
 * url` (with --sync-replicas 1 when sync), runs 8 keep-alive buyers (every
 * user trying once more than the limit) and, once 300 purchases were
 * accepted, calls fault(arg), which breaks the master and returns when a
 * replacement serves; the load goes on until 300 more are accepted. Then:
 * no request hung or got an unexpected answer, and on the master the
 * blocking client now reaches, the invariants (docs/design.md). Every 200
 * is looked up in its ledger: with sync, each must be there, an order no
 * 200 announced must belong to a user answered 503, and no user got more
 * 200s than the limit; without, losses are only counted in res. */
void fo_sale(const char *url, uint64_t aid, int sync, void (*fault)(void *arg), void *arg,
             struct fo_sale_result *res);

/* One line with the figures of res. */
void fo_sale_print(const char *what, const struct fo_sale_result *res);

#endif
