/* activity_delete.h - deleting an activity: one set of rules for the CLI
 * (`seckill activity delete`) and the admin API (DELETE
 * /api/v1/activities/{id}), docs/activity.md, "Deleting a sale".
 *
 * A sale is refused deletion while its switch is open, and while it has
 * orders that are not settled: order events Redis admitted that the order
 * worker has not persisted yet (queued), or orders persisted and not paid
 * (created). Forced, it is deleted anyway and the answer says what
 * happened to them: the queued ones are dropped with the Redis keys (never
 * persisted: their buyers hold a 200 with no order behind it), the unpaid
 * ones are cancelled in the database (they can no longer be paid). Paid
 * and cancelled orders stay in the database; an audit row records the
 * delete.
 *
 * The steps, in the order both drivers take them: the facts read (the
 * definition and its unpaid orders from the database, the switch and each
 * key set's backlog from Redis), the verdict (sk_delete_decide, pure),
 * the database first (the row back to "created" so the order worker's
 * rollback guard does not rebuild the dropped keys, unpaid orders
 * cancelled when forced), the Redis keys dropped, the row deleted. The
 * CLI drives them on the blocking clients (sk_activity_delete); the admin
 * API on the async client and the store pool (api_admin.c). */
#ifndef SK_ACTIVITY_DELETE_H
#define SK_ACTIVITY_DELETE_H
#include <stddef.h>
#include <stdint.h>

#include "redis/redis_conn.h"
#include "store/store.h"

/* What the verdict is made of. */
struct sk_delete_facts {
    int live;       /* Redis holds its live state */
    int open;       /* its switch is on */
    int64_t queued; /* order events its stream(s) hold that the worker has not acknowledged
                       (-1: more than Redis counted exactly; treated as some) */
    int64_t unpaid; /* orders in the database created and not paid */
};

/* The verdict on f for activity id (force: delete with unsettled orders):
 * 0 to go ahead; SK_ESTATE refused while open (force does not lift it);
 * SK_EBUSY refused for unsettled orders. why (cap bytes): the refusal's
 * reason, or, going ahead, what becomes of the orders ("" when none).
 * Pure. */
int sk_delete_decide(uint64_t id, const struct sk_delete_facts *f, int force, char *why,
                     size_t cap);

/* The database's facts: the activity's unpaid orders into f->unpaid.
 * SK_ENOTFOUND when the store does not hold it. */
int sk_delete_db_facts(sk_store *st, uint64_t id, struct sk_delete_facts *f);

/* The database before Redis: the row back to "created", and when
 * cancel_unpaid every created order cancelled and marked released (its
 * units go with the Redis keys: no release is owed), *cancelled of them. */
int sk_delete_db_prepare(sk_store *st, uint64_t id, int cancel_unpaid, int64_t now_ms,
                         int64_t *cancelled);

/* The database after Redis: the row deleted and an audit row
 * "activity_deleted" (its detail: what became of the orders). */
int sk_delete_db_finish(sk_store *st, uint64_t id, int64_t now_ms, const char *detail);

/* What a delete did. */
struct sk_delete_report {
    struct sk_delete_facts f;
    int refused;       /* 0, SK_ESTATE (open) or SK_EBUSY (unsettled orders) */
    int64_t cancelled; /* unpaid orders cancelled */
    char why[400];     /* the refusal, or what became of the orders */
};

/* The whole delete on the blocking clients. 0 (rep->refused says whether
 * it happened), SK_ENOTFOUND (not in the store), or a Redis or store
 * failure (r->errstr, sk_store_errstr). */
int sk_activity_delete(sk_store *st, sk_redis *r, uint64_t id, int force,
                       struct sk_delete_report *rep);

/* The live state alone, for an activity this database does not hold, or
 * holds while another store preheated its live state (docs/reconcile.md,
 * "Activities only Redis holds"): refused (SK_EEXIST) when the store holds
 * it and its live state is this store's (a plain delete is the one to
 * use); otherwise the same rules on the Redis facts (unpaid 0), then its
 * keys dropped. 0 (rep->refused), SK_ENOTFOUND (Redis holds nothing of
 * it), or a failure. */
int sk_activity_delete_live(sk_store *st, sk_redis *r, uint64_t id, int force,
                            struct sk_delete_report *rep);

#endif
