/* chaos_hooks.h - the nemesis's verdict on the webhooks: what a receiver
 * of the test's own (webhook_rx.h) got, against the database's outbox and
 * orders, read directly once the sale drained (SPEC section 7, issue of
 * the outbox: at least once, in order per order, nothing uncommitted):
 *   - every event of the outbox was acknowledged (a 200) at least once
 *     (missing);
 *   - every request carried an event of the outbox, of the same type
 *     (phantom: an event of a change that did not commit), a signature
 *     that verifies and a body whose id is its webhook-id (signature);
 *   - per subject, the first arrival of seq k + 1 came after the first
 *     arrival of seq k (order; duplicates are at least once, not disorder);
 *   - the outbox against the orders: every order row has its
 *     order.created as seq 1 and its latest event says its status (paid:
 *     order.paid, cancelled: order.cancelled or order.released, created:
 *     nothing after it); no order event names an order the database does
 *     not hold (orders).
 * Reads the outbox and the orders through the store; independent of how
 * the faults were made. */
#ifndef SK_TEST_CHAOS_HOOKS_H
#define SK_TEST_CHAOS_HOOKS_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "store/store.h"
#include "support/webhook_rx.h"

enum chaos_hook_finding { CH_MISSING, CH_PHANTOM, CH_SIGNATURE, CH_ORDER, CH_ORDERS, CH_COUNT };

struct chaos_hooks_report {
    size_t events, requests, subjects, orders;
    size_t duplicates; /* requests of an event acknowledged before */
    long answers[5];   /* as sk_th_rx_answers */
    int64_t waited_ms; /* from the call to every event acknowledged (or the deadline) */
    size_t found[CH_COUNT];
    char example[CH_COUNT][320];
};

/* Waits (at most wait_ms) until rx acknowledged every event the outbox of
 * st holds, then judges (aids[0..nacts): the activities whose orders are
 * compared). 0 when it could read, or the store's code. */
int chaos_hooks_check(sk_store *st, struct sk_th_rx *rx, const uint64_t *aids, size_t nacts,
                      int64_t wait_ms, struct chaos_hooks_report *out);
int chaos_hooks_ok(const struct chaos_hooks_report *r);
/* The first kind found and its example ("" when none): a failure's own
 * line names it (CI may show only the end of a long output). Static
 * storage, overwritten by the next call. */
const char *chaos_hooks_first(const struct chaos_hooks_report *r);
/* Lines starting "    # ". */
void chaos_hooks_print(FILE *f, const struct chaos_hooks_report *r);

#endif
