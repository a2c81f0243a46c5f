/* test_webhook_settle.c - when the dispatcher may take an outbox row
 * (orders/webhook_settle.h), driven with made-up monotonic times: a row
 * waits settle_ms from the first read of the outbox's highest row id that
 * covered it, whatever its
 * created_ms says; rows never seen wait; delivered rows are forgotten; a
 * full history makes rows wait longer, never less. */
#include "orders/webhook_settle.h"
#include "support/harness.h"

SK_TEST(webhook_settle_counts_from_the_first_read_of_a_row)
{
    struct sk_wh_settle s = {.n = 0};
    CHECK_EQ(sk_wh_settle_ready(&s, 1, 0, 0), 0); /* never seen */
    sk_wh_settle_saw(&s, 10, 1000);               /* rows 1..10 first seen at 1000 */
    CHECK_EQ(sk_wh_settle_ready(&s, 5, 1000, 0), 1);
    CHECK_EQ(sk_wh_settle_ready(&s, 5, 1000, 500), 0);
    CHECK_EQ(sk_wh_settle_ready(&s, 10, 1499, 500), 0);
    CHECK_EQ(sk_wh_settle_ready(&s, 10, 1500, 500), 1);
    sk_wh_settle_saw(&s, 10, 1400); /* read again: nothing new, nothing moves */
    CHECK_EQ(sk_wh_settle_ready(&s, 10, 1500, 500), 1);
    sk_wh_settle_saw(&s, 14, 1400); /* 11..14 first seen at 1400 */
    CHECK_EQ(sk_wh_settle_ready(&s, 11, 1500, 500), 0);
    CHECK_EQ(sk_wh_settle_ready(&s, 11, 1900, 500), 1);
    CHECK_EQ(sk_wh_settle_ready(&s, 15, 5000, 500), 0);
    sk_wh_settle_done(&s, 10); /* delivered up to 10: only 11..14 left */
    CHECK_EQ(s.n, 1);
    CHECK_EQ(sk_wh_settle_ready(&s, 12, 1899, 500), 0);
    sk_wh_settle_done(&s, 14);
    CHECK_EQ(s.n, 0);
    /* a full history: the newest reads merge, their rows wait for the
     * latest of them */
    for (int i = 1; i <= SK_WH_SETTLE_READS + 5; i++)
        sk_wh_settle_saw(&s, i * 10, i * 100);
    CHECK_EQ(s.n, SK_WH_SETTLE_READS);
    CHECK_EQ(sk_wh_settle_ready(&s, 10, 100 + 500, 500), 1); /* the oldest kept exact */
    int64_t last = (SK_WH_SETTLE_READS + 5) * 100;
    CHECK_EQ(sk_wh_settle_ready(&s, (SK_WH_SETTLE_READS + 1) * 10, last + 499, 500), 0);
    CHECK_EQ(sk_wh_settle_ready(&s, (SK_WH_SETTLE_READS + 1) * 10, last + 500, 500), 1);
}
