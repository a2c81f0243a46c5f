/* act_defs.h - the activity definitions an HTTP process of `seckill serve`
 * has read from its store, so that GET /api/v1/activities/{id} and the
 * purchase path's "unknown to Redis: is it defined?" question are answered
 * on the event loop without the database.
 *
 * Known activities answer at once; one used after SK_ACT_DEFS_TTL_MS is
 * read again behind that answer. Ids the store does not have are
 * remembered as unknown for SK_ACT_DEFS_UNKNOWN_TTL_MS. Both live in the
 * id's record of the key set table (keysets.h): a definition makes its
 * record one the store vouched for, so unknown ids (unconfirmed records,
 * at most SK_ACTS_UNCONFIRMED_MAX of them) never evict a known activity
 * and never grow memory, however many a client makes up. The admin routes
 * of this process replace (sk_act_defs_put) or drop (sk_act_defs_forget)
 * a definition when they change the activity; other processes see the
 * change within the TTL.
 *
 * A miss reads the store on the pool (store_call.h); lookups of one id
 * that arrive meanwhile share that read. Every waiter is bounded by
 * --db-timeout-ms. A known activity keeps answering while the store is
 * failing or frozen (a definition rarely changes; a database outage must
 * not take the activities it already served down with it). */
#ifndef SK_ACT_DEFS_H
#define SK_ACT_DEFS_H
#include <stdint.h>

#include "engine/activity.h"

struct sk_app;

#define SK_ACT_DEFS_TTL_MS 5000
#define SK_ACT_DEFS_UNKNOWN_TTL_MS 1000

struct sk_act_defs;

/* A new, empty cache (NULL when out of memory); the caller frees it with
 * sk_act_defs_free, which first answers every waiter with SK_ETIMEDOUT. */
struct sk_act_defs *sk_act_defs_new(void);
void sk_act_defs_free(struct sk_app *app, struct sk_act_defs *d);

/* The answer of a lookup, on the loop: rc 0 with the definition (a is
 * valid during the call only), SK_ENOTFOUND (no such activity), or the
 * store's failure: SK_EBUSY (queue full), SK_ETIMEDOUT (no answer within
 * --db-timeout-ms), SK_EDB and friends. */
typedef void (*sk_act_defs_cb)(struct sk_app *app, void *arg, int rc, const struct sk_activity *a);

/* Looks up activity id: cb runs before this returns when the cache can
 * answer (ids above SK_ACTIVITY_ID_MAX are SK_ENOTFOUND at once), else
 * after one store read off the loop. */
void sk_act_defs_lookup(struct sk_app *app, uint64_t id, sk_act_defs_cb cb, void *arg);

/* A definition this process just read or wrote (admin routes): cached as
 * known, fresh. */
void sk_act_defs_put(struct sk_app *app, const struct sk_activity *a);
/* Drops what is known of id (known or unknown); a read in flight for it
 * answers its waiters but is not cached. */
void sk_act_defs_forget(struct sk_app *app, uint64_t id);

#endif
