/* test_check_errors.c - scripts/check-errors.sh (run by make test) on a
 * tree of its own: it names an exported function's bare -1 and passes a
 * static function's, a marked value and an SK_E* code. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "support/harness.h"

SK_TEST(check_errors_names_a_bare_minus_one_of_an_exported_function_only)
{
    char root[400], dir[450], cmd[1200];
    static char out[8192];
    snprintf(root, sizeof root, "%s/check-errors", sk_th_tmpdir());
    snprintf(dir, sizeof dir, "%s/src/core", root);
    snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
    CHECK_EQ(sk_th_sh(cmd, out, sizeof out), 0);
    sk_th_write_in(dir, "good.c",
                   "static int helper(int x)\n{\n    if (x) return -1;\n    return 0;\n}\n\n"
                   "int sk_good(int x)\n{\n    if (x > 1) return -1; /* value: none */\n"
                   "    return helper(x) < 0 ? SK_EINVAL : 0;\n}\n");
    CHECK_MSG(sk_th_check_script("check-errors.sh", root, out, sizeof out) == 0 &&
                  strstr(out, "check-errors: ok"),
              "%s", out);
    sk_th_write_in(dir, "bad.c",
                   "int sk_bad(const char *s,\n           int n)\n{\n    if (!s) return -1;\n"
                   "    return n;\n}\n");
    CHECK_MSG(sk_th_check_script("check-errors.sh", root, out, sizeof out) != 0, "%s", out);
    CHECK_MSG(strstr(out, "src/core/bad.c:4: sk_bad returns a bare -1") != NULL, "%s", out);
    CHECK_MSG(!strstr(out, "good.c"), "%s", out);
}
