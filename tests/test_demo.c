/* test_demo.c - `seckill demo` end to end with small sizes: it starts its
 * own redis-server and `seckill serve`, runs a sale over HTTP, and its
 * summary must show an exact sell-out. */
#include <stdlib.h>
#include <string.h>

#include "support/harness.h"

SK_TEST(demo_runs_a_small_sale_to_an_exact_sell_out)
{
    static char out[65536];
    const char *args[] = {"demo",       "--stock", "200",           "--buyers", "1000",
                          "--requests", "1500",    "--connections", "50",       NULL};
    int rc = sk_th_run_seckill(out, sizeof out, NULL, args);
    CHECK_MSG(rc == 0, "demo exited %d:\n%s", rc, out);
    CHECK_MSG(strstr(out, "accepted        200 orders, 200 units (stock 200)"), "%s", out);
    CHECK_MSG(strstr(out, "oversold        0\n"), "%s", out);
    CHECK_MSG(strstr(out, "undersold       0\n"), "%s", out);
    CHECK_MSG(strstr(out, "(matches the 200s)"), "%s", out);
    CHECK_MSG(strstr(out, "orders in DB    200 (SQLite), DB stock 0 (one row per 200"), "%s", out);
    CHECK_MSG(strstr(out, "reconcile       consistent"), "%s", out);
    CHECK_MSG(strstr(out, "result          OK"), "%s", out);
}

SK_TEST(demo_rejects_bad_sizes_with_exit_2)
{
    char out[4096];
    const char *a1[] = {"demo", "--stock", "0", NULL};
    CHECK_EQ(sk_th_run_seckill(out, sizeof out, NULL, a1), 2);
    const char *a2[] = {"demo", "--bogus", "1", NULL};
    CHECK_EQ(sk_th_run_seckill(out, sizeof out, NULL, a2), 2);
    const char *a3[] = {"demo", "--retry-ratio", "2", NULL};
    CHECK_EQ(sk_th_run_seckill(out, sizeof out, NULL, a3), 2);
    const char *a4[] = {"demo", "--help", NULL};
    CHECK_EQ(sk_th_run_seckill(out, sizeof out, NULL, a4), 0);
}
