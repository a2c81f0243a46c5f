/* event_batch.h - the id list of an outbox batch row (migration 14,
 * docs/integration.md): the order ids of a persist's order.created events
 * of one sale, in id order, separated by one space. Written by the
 * persist (store_persist.c), read back as one event per id
 * (store_events.c). Bytes in and out, no I/O (tests/fuzz/fuzz_event_batch.c). */
#ifndef SK_EVENT_BATCH_H
#define SK_EVENT_BATCH_H
#include <stddef.h>

/* 1 when id can go in a list: non-empty, no byte <= ' ' (the separator,
 * controls); else the persist writes its event as a row of its own. */
int sk_event_batch_id_ok(const char *id);

/* Appends id (sk_event_batch_id_ok) to the list buf[0..*len), keeping
 * it NUL-terminated: 0, or SK_EINVAL when it does not fit in cap
 * (nothing changed). */
int sk_event_batch_add(char *buf, size_t cap, size_t *len, const char *id);

/* The next id of the NUL-terminated list at or after p: its start and
 * *len (> 0), *last 1 when no other follows; NULL at the end. Runs of
 * spaces (a hand edit) separate like one. */
const char *sk_event_batch_next(const char *p, size_t *len, int *last);

#endif
