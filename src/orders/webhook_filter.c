/* webhook_filter.c - an endpoint's event filter (webhook_filter.h): which
 * events it takes, and the admin API's check of one. Pure. */
#include "orders/webhook_filter.h"

#include <stdio.h>
#include <string.h>

#include "core/error.h"

int sk_wh_filter_wants(const char *filter, const char *type)
{
    if (!filter[0]) return 1;
    const char *p = filter;
    while (*p) {
        size_t n = strcspn(p, ",");
        while (n && *p == ' ')
            p++, n--;
        while (n && p[n - 1] == ' ')
            n--;
        if ((n == 1 && *p == '*') || (n && p[n - 1] == '.' && !strncmp(type, p, n)) ||
            (n == strlen(type) && !strncmp(type, p, n)))
            return 1;
        p += strcspn(p, ",");
        if (*p == ',') p++;
    }
    return 0;
}

/* The types the outbox writes (store.h). */
static const char *const types[] = {"order.created",         "order.paid",
                                    "order.cancelled",       "order.released",
                                    "order.payment_refused", "activity.opened",
                                    "activity.closed",       "activity.sold_out",
                                    "reconcile.drift",       NULL};

int sk_wh_filter_check(const char *filter, char *why, size_t cap)
{
    size_t len = strlen(filter);
    while (len && filter[len - 1] == ' ')
        len--;
    if (len && filter[len - 1] == ',') { /* an empty last entry */
        snprintf(why, cap, "event filter: an empty entry (a comma too many)");
        return SK_EINVAL;
    }
    const char *p = filter;
    while (*p) {
        size_t n = strcspn(p, ",");
        const char *q = p;
        while (n && *q == ' ')
            q++, n--;
        while (n && q[n - 1] == ' ')
            n--;
        int ok = n == 1 && *q == '*';
        for (int i = 0; !ok && n && types[i]; i++)
            ok = (n == strlen(types[i]) || (q[n - 1] == '.' && n < strlen(types[i]))) &&
                 !strncmp(types[i], q, n);
        if (!ok) {
            char e[40];
            snprintf(e, sizeof e, "%.*s", (int)(n < 32 ? n : 32), q);
            for (char *c = e; *c; c++)
                if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e) *c = '?';
            snprintf(why, cap,
                     "event filter: \"%s\" is neither \"*\", an event type (order.paid, "
                     "activity.sold_out, ...) nor a prefix of some (order., activity.)",
                     e);
            return SK_EINVAL;
        }
        p += strcspn(p, ",");
        if (*p == ',') p++;
    }
    return 0;
}
