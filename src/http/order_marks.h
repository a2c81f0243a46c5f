/* order_marks.h - what Redis knows of how far the order worker got in a
 * key set's stream, so that an order poll (GET /api/v1/orders/{id}) needs
 * the database only when the database is the one that knows.
 *
 * The worker reads a stream in order with its consumer group, commits a
 * batch, then acknowledges it. So, for an order whose stream entry is E:
 *   - E newer than the group's last delivered entry (or no group at all):
 *     the database cannot have it: it is queued, and the ledger in Redis
 *     says whose it is and whether it was released;
 *   - E older than the oldest pending entry (or delivered with nothing
 *     pending): acknowledged, so committed: the database has it (created,
 *     paid or cancelled: only the database knows which);
 *   - in between (delivered, maybe committed): ask the database.
 * "Queued" also needs the stream to hold E as this order's entry (its
 * branch field is the id's): an order put back from the database after a
 * rebuild has a ledger entry but no entry in the new stream, and after a
 * split another branch's order may sit at the same entry id.
 * A poll reads the order's ledger entry and these figures in one script
 * (lua/order_state.lua: HGET, XRANGE of E, XINFO GROUPS, the XPENDING
 * summary), so a "queued" answer is as fresh as the read. The process keeps the last
 * figures per key set; they only ever serve to send a poll straight to
 * the database, which stays right however old they are: an acknowledged
 * entry stays acknowledged. */
#ifndef SK_ORDER_MARKS_H
#define SK_ORDER_MARKS_H
#include <stddef.h>
#include <stdint.h>

#include <hiredis.h>

#include "engine/keys.h"
#include "redis/stream_id.h"

struct sk_app;

#define SK_ORDER_MARKS_SLOTS                                                                       \
    256 /* key sets remembered per process (a colliding one overwrites)                            \
         */

enum sk_order_mark {
    SK_ORDER_ASK_DB,    /* not known here: the database decides */
    SK_ORDER_PERSISTED, /* the database has it */
    SK_ORDER_QUEUED     /* the database cannot have it yet */
};

/* 1 when the figures this process read last for key set k say the
 * database has entry e (no Redis call). */
int sk_order_marks_persisted(struct sk_app *app, const struct sk_keys *k, const struct sk_sid *e);

/* A reply of lua/order_state.lua for key set k: keeps its figures and
 * says what they mean for entry e (SK_ORDER_QUEUED only when the reply
 * says the stream holds e as the order's). The ledger entry
 * (rep->element[0]) is the caller's to read. A malformed reply: SK_ORDER_ASK_DB. */
enum sk_order_mark sk_order_marks_note(struct sk_app *app, const struct sk_keys *k,
                                       const redisReply *rep, const struct sk_sid *e);

/* Frees the process's table (app->order_marks). */
void sk_order_marks_free(struct sk_app *app);

#endif
