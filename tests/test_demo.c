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

/* `make demo` installs what the demo needs and nothing of the suite's:
 * scripts/deps.sh demo, run with every package missing (a dpkg-query that
 * knows none) as a user (an id that says 1000), names what it would
 * install; the Makefile's demo runs that mode and builds only seckill. */
SK_TEST(demo_installs_only_what_the_demo_needs)
{
    char dir[400], cmd[3000];
    static char out[16384];
    snprintf(dir, sizeof dir, "%s", sk_th_tmpdir());
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s/bin && printf '#!/bin/sh\\nexit 1\\n' > %s/bin/dpkg-query && "
             "printf '#!/bin/sh\\necho 1000\\n' > %s/bin/id && chmod 755 %s/bin/* && "
             "PATH=%s/bin:$PATH sh %s/scripts/deps.sh demo 2>&1; echo \"exit $?\"",
             dir, dir, dir, dir, dir, sk_th_source_root());
    sk_th_sh(cmd, out, sizeof out);
    const char *want = strstr(out, "install them with: apt-get install");
    CHECK_MSG(want && strstr(out, "exit 1"), "%s", out);
    static const char *const needed[] = {" redis-server", " build-essential", " libhiredis-dev",
                                         " libsqlite3-dev", " libh2o-evloop-dev"};
    for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++)
        CHECK_MSG(strstr(want, needed[i]) != NULL, "the demo needs%s:\n%s", needed[i], out);
    static const char *const suite_only[] = {
        "chromium", "mariadb-server", "postgresql ", "prometheus", "lintian", "nodejs", "clang"};
    for (size_t i = 0; i < sizeof suite_only / sizeof suite_only[0]; i++)
        CHECK_MSG(strstr(out, suite_only[i]) == NULL, "the demo installs %s:\n%s", suite_only[i],
                  out);
    /* the full list is still what `make test` installs */
    snprintf(cmd, sizeof cmd, "PATH=%s/bin:$PATH sh %s/scripts/deps.sh 2>&1", dir,
             sk_th_source_root());
    sk_th_sh(cmd, out, sizeof out);
    CHECK_MSG(strstr(out, "chromium") && strstr(out, "mariadb-server"), "%s", out);
    /* make demo: that mode, and the seckill binary alone */
    snprintf(cmd, sizeof cmd, "make -n -C %s demo 2>&1", sk_th_source_root());
    sk_th_sh(cmd, out, sizeof out);
    CHECK_MSG(strstr(out, "scripts/deps.sh demo") != NULL, "%s", out);
    CHECK_MSG(strstr(out, "seckill-tests") == NULL && strstr(out, "seckill-bench") == NULL,
              "make demo builds the suite or the benchmarks:\n%s", out);
}
