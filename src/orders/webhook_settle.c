/* webhook_settle.c - the dispatcher's settle on its monotonic clock
 * (webhook_settle.h). */
#include "orders/webhook_settle.h"

#include <string.h>

void sk_wh_settle_saw(struct sk_wh_settle *s, int64_t hi, int64_t mono_ms)
{
    if (hi <= 0 || (s->n && hi <= s->row[s->n - 1])) return; /* nothing new */
    if (s->n == SK_WH_SETTLE_READS) {
        /* full: the two newest merge, the later time kept (a row then
         * waits a little longer, never less) */
        s->n--;
    }
    s->row[s->n] = hi;
    s->at[s->n] = mono_ms;
    s->n++;
}

int sk_wh_settle_ready(const struct sk_wh_settle *s, int64_t row, int64_t mono_ms,
                       int64_t settle_ms)
{
    for (int i = 0; i < s->n; i++)
        if (row <= s->row[i]) return mono_ms - s->at[i] >= settle_ms;
    return 0; /* never seen */
}

void sk_wh_settle_done(struct sk_wh_settle *s, int64_t cursor)
{
    int k = 0;
    while (k < s->n && s->row[k] <= cursor)
        k++;
    if (!k) return;
    memmove(s->row, s->row + k, (size_t)(s->n - k) * sizeof s->row[0]);
    memmove(s->at, s->at + k, (size_t)(s->n - k) * sizeof s->at[0]);
    s->n -= k;
}
