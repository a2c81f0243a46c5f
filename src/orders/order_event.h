/* order_event.h - an order event, the stream entry the admission script
 * writes for the orders one call admitted (lua/lib/admit.lua,
 * docs/design.md "Redis data model"), read back into its orders:
 * bytes in, no I/O. The order worker persists what it gives
 * (order_batch.c); the tests read streams through it.
 *
 * An entry holds one order {aid, uid, qty, n, b[, k]}, or several {aid,
 * n, b, c, uid, qty[, k]}: c orders whose users and quantities are the
 * space-separated lists uid and qty, n the first one's admission number,
 * k "<i>:<key>" for each order with an Idempotency-Key; order i's id is
 * "<label>-<entry id>-<b>-<i>" (engine/order_id.h). Entries written before
 * n, b and k have none. */
#ifndef SK_ORDER_EVENT_H
#define SK_ORDER_EVENT_H
#include <stddef.h>
#include <stdint.h>

#include "engine/order_id.h"
#include "store/store.h"

/* Orders one entry holds at most. */
#define SK_EVENT_ORDERS_MAX SK_OID_INDEX_MAX

/* One field of an entry: name and value bytes (not terminated). */
struct sk_event_field {
    const char *name;
    size_t nlen;
    const char *val;
    size_t vlen;
};

/* Entry id (idlen bytes) of key set label ("<ID>" or "<ID>.<seg>", the
 * order ids' prefix) of activity aid, with its nf fields, into its orders
 * out[0..*n); out has room for SK_EVENT_ORDERS_MAX. Each order gets its
 * id, the entry's id as stream id and its time as created_ms, user,
 * quantity, status created, admission number (0 when the entry has none)
 * and Idempotency-Key (""); the caller sets the pay deadline. 0, or
 * SK_EINVAL with the reason in why (whycap bytes): the entry is poison.
 * Unknown extra fields are tolerated (a newer producer); a missing,
 * repeated or malformed aid, uid, qty or c is poison, and so is a
 * malformed b (the order id would not be the one its buyer was given) or
 * an entry of several without one. A malformed n only loses the
 * watermark's news, a malformed k the key's record after a rollback: the
 * orders are still orders. */
int sk_order_event_parse(const char *label, uint64_t aid, const char *id, size_t idlen,
                         const struct sk_event_field *f, size_t nf, struct sk_order *out, size_t *n,
                         char *why, size_t whycap);

#endif
