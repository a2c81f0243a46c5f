/* webhook_filter.h - the event filter of a webhook endpoint: a
 * comma-separated list of event types (order.paid) and prefixes ending in
 * a dot (order.), or "*"; "" takes every event. Pure: no I/O. */
#ifndef SK_WEBHOOK_FILTER_H
#define SK_WEBHOOK_FILTER_H
#include <stddef.h>

/* 1 when an event of type passes filter ("" passes all; spaces around an
 * entry are ignored). */
int sk_wh_filter_wants(const char *filter, const char *type);

/* Checks a filter of the admin API, stricter than the config key's: each
 * entry is "*", a type the outbox writes (store.h) or the prefix of some
 * ("order."). 0, or SK_EINVAL naming the entry in why (cap bytes). */
int sk_wh_filter_check(const char *filter, char *why, size_t cap);

#endif
