/* salvage.h - what a key set whose keys partly vanished (an operator's
 * DEL, an eviction, a flush that spared some) still holds of the orders
 * it admitted, put into the database before the rollback guard's recovery
 * drops the rest and rebuilds the key set from the database
 * (docs/recovery.md): the entries of its order stream (every field of an
 * order) and the records of its ledger (order id -> user:qty, the
 * Idempotency-Key from the idem hash when that survived). An order that
 * only Redis held, answered 200 and not persisted yet, reaches the
 * database this way from whichever of the two survived.
 *
 * Persisting is the worker's (sk_store_orders_persist): an order the
 * database holds already is a duplicate, nothing written; one it holds for
 * another admission is a conflict, recorded. Blocking; the key set must be
 * fenced (nothing is admitted meanwhile). */
#ifndef SK_SALVAGE_H
#define SK_SALVAGE_H
#include <stddef.h>
#include <stdint.h>

#include "engine/keys.h"
#include "redis/redis_conn.h"
#include "store/store.h"

struct sk_salvage {
    int64_t stream_orders; /* orders read from the stream's entries */
    int64_t ledger_orders; /* held orders read from the ledger */
    int64_t inserted;      /* of them, new in the database */
    int64_t conflicts;     /* ids the database holds for another admission */
    int64_t bad;           /* stream entries or ledger records that are no order */
};

/* Salvages key set k's orders into st (adding into *out: zero it first).
 * 0, or a Redis or store error with the reason in err (cap bytes). */
int sk_salvage_key_set(sk_store *st, sk_redis *r, const struct sk_keys *k, struct sk_salvage *out,
                       char *err, size_t cap);

#endif
