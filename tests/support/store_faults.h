/* store_faults.h - a SQL server's outages as a store sees them, written
 * once for every server the store speaks to (PostgreSQL, MariaDB): a
 * stopped or killed server makes calls fail fast and the same handle carry
 * on after the restart; a frozen one makes them time out and the handle
 * carry on after the thaw; each batch lands exactly once. */
#ifndef SK_TEST_STORE_FAULTS_H
#define SK_TEST_STORE_FAULTS_H
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

/* How a test breaks its server. */
struct sk_th_db_server {
    const char *name; /* what the store's error text names ("postgres") */
    void *srv;
    void (*halt)(void *srv, int hard); /* a clean stop, or SIGKILL when hard */
    void (*restart)(void *srv);        /* on the same data and port */
    void (*freeze)(void *srv, int frozen);
};

/* st: a store on d's server opened with connect_timeout=2, holding
 * activity 1 (stock 1000, two or more per buyer) and nothing else. The
 * server is halted (hard: killed) after a first batch and restarted; the
 * caller closes st and stops the server. */
void sk_th_store_fault_stopped(sk_store *st, const struct sk_th_db_server *d, int hard);
/* The same store; the server is frozen (SIGSTOP) while a batch is sent,
 * then thawed. */
void sk_th_store_fault_frozen(sk_store *st, const struct sk_th_db_server *d);

/* Order seq of activity aid, admitted at ms: id "<aid>-<ms>-<seq>". */
void sk_th_order(struct sk_order *o, uint64_t aid, int64_t ms, int seq, uint64_t uid, int64_t qty);
/* sk_store_orders_persist of n orders, failing the test unless it is 0. */
struct sk_persist_result sk_th_persist_ok(sk_store *st, const struct sk_order *o, size_t n);
/* The stock the database holds for activity id. */
int64_t sk_th_db_stock(sk_store *st, uint64_t id);

#endif
