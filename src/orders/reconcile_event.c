/* reconcile_event.c - the reconcile.drift event (reconcile.h): what a
 * pass found, as an outbox event, written only when it is news against
 * the activity's latest one, so a shop's endpoint hears of drift once
 * when it appears or changes, not every 30 s while it lasts. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "core/clock.h"
#include "core/error.h"
#include "orders/reconcile.h"

/* Appends to out (cap bytes) at at: the length it has then, which may
 * pass cap (nothing written past it). */
static size_t put(char *out, size_t cap, size_t at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static size_t put(char *out, size_t cap, size_t at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(at < cap ? out + at : NULL, at < cap ? cap - at : 0, fmt, ap);
    va_end(ap);
    return at + (w > 0 ? (size_t)w : 0);
}

/* ,"name":{"kind":count,...} of the kinds counted in n[]. */
static size_t counts(char *out, size_t cap, size_t at, const char *name, const size_t *n)
{
    at = put(out, cap, at, ",\"%s\":{", name);
    const char *sep = "";
    for (int k = 0; k < SK_DRIFT_NKINDS; k++) {
        if (!n[k]) continue;
        at = put(out, cap, at, "%s\"%s\":%zu", sep, sk_drift_name(k), n[k]);
        sep = ",";
    }
    return put(out, cap, at, "}");
}

int sk_reconcile_drift_payload(const struct sk_reconcile_report *rep, char *out, size_t cap)
{
    size_t at = put(
        out, cap, 0, "{\"v\":%d,\"activity_id\":%" PRIu64 ",\"check\":\"%s\",\"total\":%zu",
        SK_EVENT_SCHEMA, rep->activity_id, rep->incremental ? "incremental" : "full", rep->total);
    at = counts(out, cap, at, "drift", rep->found);
    if (rep->repair) {
        at = put(out, cap, at, ",\"remaining_total\":%zu", rep->remaining_total);
        at = counts(out, cap, at, "remaining", rep->remaining);
    }
    at = put(out, cap, at, "}");
    return at < cap ? (int)at : SK_EINVAL;
}

int sk_reconcile_drift_news(const struct sk_reconcile_report *rep, const char *last,
                            int64_t last_ms, int64_t clean_ms)
{
    if (rep->total == 0) return 0;
    if (!last || (clean_ms > 0 && clean_ms > last_ms)) return 1;
    json_t *j = json_loads(last, 0, NULL);
    json_t *was = j ? json_object_get(j, "drift") : NULL;
    int news = !json_is_object(was);
    for (int k = 0; k < SK_DRIFT_NKINDS && !news; k++) {
        json_t *v = json_object_get(was, sk_drift_name(k));
        json_int_t prev = json_is_integer(v) ? json_integer_value(v) : 0;
        json_int_t now = (json_int_t)rep->found[k];
        news = rep->incremental ? now > prev : now != prev;
    }
    json_decref(j);
    return news;
}

struct due {
    const struct sk_reconcile_report *rep;
    int64_t clean_ms;
};

static int due(void *arg, const char *last, int64_t last_ms)
{
    const struct due *d = arg;
    return sk_reconcile_drift_news(d->rep, last, last_ms, d->clean_ms);
}

int sk_reconcile_drift_event(sk_store *st, struct sk_reconcile_report *rep, int64_t clean_ms,
                             int64_t now_ms)
{
    rep->event = 0;
    if (rep->total == 0) return 0;
    char payload[SK_STORE_PAYLOAD_MAX];
    if (sk_reconcile_drift_payload(rep, payload, sizeof payload) < 0)
        return rep->event = SK_EINVAL; /* every kind's count fits: cannot happen */
    struct due d = {rep, clean_ms};
    int written = 0;
    int rc = sk_store_event_if(st, "reconcile.drift", rep->activity_id,
                               now_ms ? now_ms : sk_wall_ms(), payload, due, &d, &written);
    rep->event = rc ? rc : written;
    return rc;
}
