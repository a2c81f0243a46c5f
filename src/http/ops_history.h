/* ops_history.h - the node's recent past for the dashboard: once a second
 * the first HTTP process adds a sample of the node's counters (admissions,
 * refusals, and per activity units admitted, refusals by reason and
 * waiting-room passes handed out) to a ring of the last five minutes in
 * memory shared by every process of the node. /dashboard.json?history=1
 * sends the ring, so a page opened (or reloaded) in the middle of a sale
 * draws the minutes before it was opened, not only what it polled since.
 *
 * One writer (HTTP slot 0; a restarted one goes on in the same ring), any
 * number of readers, under a process-shared mutex held for a copy only
 * (the writer: one sample, once a second; a reader: the ring, once per
 * page load). No allocation after sk_ops_history_new. */
#ifndef SK_OPS_HISTORY_H
#define SK_OPS_HISTORY_H
#include <stdint.h>

#include <jansson.h>

#include "core/node_stats.h"

#define SK_HIST_SAMPLES 300 /* seconds */
#define SK_HIST_EVERY_MS 1000

typedef struct sk_ops_history sk_ops_history;

/* Maps a ring shared with children forked later (it lives as long as the
 * process). 0 or SK_EIO. */
int sk_ops_history_new(sk_ops_history **out);

/* The ring of this process (set before the fork; NULL: none). */
void sk_ops_history_set(sk_ops_history *h);
sk_ops_history *sk_ops_history_get(void);

/* Adds a sample of node's counters taken at now_ms (wall clock). */
void sk_ops_history_record(sk_ops_history *h, sk_node *node, int64_t now_ms);

/* The ring as JSON (the caller's, json_decref), oldest first:
 * {"every_ms":1000,"t_ms":[...],"admissions":[...],"refusals":[...],
 *  "activities":[{"id":N,"admitted_units_total":[...],
 *  "handed_out_total":[...]|null,"refusals":{"sold_out":[...],...}},...]}
 * (counters, as on /metrics: the page takes differences) where an
 * activity's arrays have null where a sample did not count it. A series
 * that never changed in the window (a reason nobody was refused for, no
 * waiting room) is left out: at most 64 activities. */
json_t *sk_ops_history_json(sk_ops_history *h);

#endif
