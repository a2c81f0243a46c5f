/* webhooks.h - the webhook dispatcher: the outbox's events (store.h,
 * migration 11) posted to the shop's endpoints, signed as Standard
 * Webhooks has it (webhook_sign.h), at least once and, per endpoint, in
 * the order of the outbox's rows (so an order's events arrive in their
 * seq order once duplicates are dropped).
 *
 * One thread per endpoint, with its own store handle and HTTP client
 * (libcurl): a slow or dead endpoint delays nobody else, and never the
 * order pipeline (the dispatcher only reads the outbox and writes its own
 * cursor). An endpoint delivers one event at a time: the next waits until
 * the previous one is acknowledged (2xx), retried with exponential
 * backoff and full jitter (Retry-After honoured on 429 and 503) for the
 * horizon (a day by default), or dead-lettered (webhook_dead) after it.
 * The cursor (webhook_cursors) moves once a page of events is through (or
 * every 200 ms while a slow receiver takes it): a committed write per
 * event would bound the rate to the store's commits (180 events/s on a
 * busy SQLite). A restart resumes from it and may deliver up to a page
 * again (at least once: receivers drop duplicates by webhook-id).
 *
 * Endpoints come from two places: the node's configuration (the
 * endpoints given to sk_webhooks_start, every activity's events) and the
 * database (store.h's webhook endpoints, added by the admin API: one
 * activity's events). A watcher thread reads the database's list every
 * refresh_ms: it starts a thread for an endpoint added, stops the thread
 * of one removed, and hands a paused flag or a rotated secret to the
 * thread of one changed (a paused endpoint keeps its cursor: it catches
 * up on resume). A replay (sk_store_webhook_rewind) sets a cursor back;
 * the endpoint's thread reads the cursor again after each page.
 *
 * The row ids of the outbox grow in insert order; a server store may
 * commit them out of that order, so an endpoint only takes an event
 * settle_ms (longer than any store transaction) after a read of the
 * outbox's highest row id covered it, on its monotonic clock
 * (webhook_settle.h), and never one past a gap younger than that. */
#ifndef SK_WEBHOOKS_H
#define SK_WEBHOOKS_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/node_stats.h"
#include "orders/webhook_filter.h"
#include "orders/webhook_sign.h"

#define SK_WH_MAX_ENDPOINTS 16
#define SK_WH_NAME_MAX 64
#define SK_WH_URL_MAX 512
#define SK_WH_FILTER_MAX 256

struct sk_wh_endpoint {
    char name[SK_WH_NAME_MAX];        /* its cursor's key: [A-Za-z0-9_.-], 1..63 */
    char url[SK_WH_URL_MAX];          /* http:// or https:// */
    char secret[2][SK_WH_SECRET_MAX]; /* whsec_...; the second during a rotation, "" none */
    char filter[SK_WH_FILTER_MAX]; /* comma-separated types or prefixes ("order.", "*"); "" all */
};

struct sk_wh_opts {
    int64_t horizon_ms;          /* retry an event this long, then dead-letter; 0: a day */
    int64_t backoff_min_ms;      /* first retry delay; 0: 1000 */
    int64_t backoff_max_ms;      /* cap; 0: 300000 */
    int64_t timeout_ms;          /* one POST, connect included; 0: 10000 */
    int64_t settle_ms;           /* events first covered less than this ago wait (see above);
                                    <0: 0, 0: 10000 */
    int64_t idle_ms;             /* poll of the outbox when nothing is due; 0: 500 */
    int64_t refresh_ms;          /* the database's endpoints read again; 0: 1000, <0: never
                                    (the configured endpoints only) */
    uint64_t seed;               /* the jitter's; 0: from the clock */
    struct sk_node_worker *node; /* NULL, or the node's worker slot: each endpoint's figures
                                    go there too (/metrics); not owned */
};

struct sk_wh_stats {
    uint64_t delivered, failed_attempts, dead;
    int retrying;          /* the head event has failed at least once */
    int paused;            /* a database endpoint paused by the admin API */
    int64_t oldest_lag_ms; /* age of the oldest undelivered event taken, 0 none */
};

typedef struct sk_webhooks sk_webhooks;

/* 1 when name is an endpoint's name: 1 to 63 of [A-Za-z0-9_.-]
 * (inline: the configuration checks it without the dispatcher). */
static inline int sk_wh_name_ok(const char *name)
{
    size_t nl = strnlen(name, SK_WH_NAME_MAX);
    return nl > 0 && nl < SK_WH_NAME_MAX &&
           strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") == nl;
}

/* Checks an endpoint (name, url, secrets, filter): 0, or SK_EINVAL with
 * why (never a secret). */
int sk_wh_endpoint_check(const struct sk_wh_endpoint *e, char *why, size_t cap);

/* Starts one thread per endpoint over the store db_spec. *out owned by
 * the caller (sk_webhooks_stop). 0, SK_EINVAL (an endpoint, err says
 * which), or another code with err. */
int sk_webhooks_start(sk_webhooks **out, const char *db_spec, const struct sk_wh_endpoint *eps,
                      int n, const struct sk_wh_opts *o, char *err, size_t cap);
/* Configured endpoint i's figures. */
void sk_webhooks_stats(sk_webhooks *w, int i, struct sk_wh_stats *out);
/* Stops the threads (an attempt in flight is cut short) and frees. */
void sk_webhooks_stop(sk_webhooks *w);

#endif
