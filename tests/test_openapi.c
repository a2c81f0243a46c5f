/* test_openapi.c - docs/openapi.yaml against the service: linted with
 * @redocly/cli, every route of src/http/routes.def in it, and the answers
 * of the HTTP contract tests (test_http_contract.c, test_http_admin.c,
 * test_waiting_room_http.c, run again here with every answer recorded)
 * validated against its schemas with ajv (tests/openapi/validate.mjs). The
 * npm packages are installed at test time into build-npm/
 * (scripts/npm-tools.sh), never at build time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/harness.h"

static void npm_dir(char *out, size_t cap)
{
    char cmd[800];
    snprintf(cmd, sizeof cmd, "sh %s/scripts/npm-tools.sh 2>&1", sk_th_source_root());
    int rc = sk_th_sh(cmd, out, cap);
    CHECK_MSG(rc == 0, "npm-tools.sh failed: %s", out);
    /* npm's own messages (stderr) come first; the folder is the last line */
    size_t n = strlen(out);
    while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == '\r'))
        out[--n] = 0;
    char *last = strrchr(out, '\n');
    if (last) memmove(out, last + 1, strlen(last + 1) + 1);
    CHECK_MSG(out[0] == '/', "npm-tools.sh printed no folder: %s", out);
}

SK_TEST_T(openapi_document_lints_and_covers_every_route_and_contract_answer, 600)
{
    char npm[512], cmd[3000];
    static char out[1 << 16];
    npm_dir(npm, sizeof npm);
    snprintf(cmd, sizeof cmd, "%s/node_modules/.bin/redocly lint %s/docs/openapi.yaml 2>&1", npm,
             sk_th_source_root());
    CHECK_MSG(sk_th_sh(cmd, out, sizeof out) == 0, "redocly lint:\n%s", out);
    CHECK_MSG(strstr(out, "Your API description is valid") && !strstr(out, "You have "),
              "redocly lint warns:\n%s", out);

    /* the contract tests again, every answer recorded */
    char answers[400], self[512];
    snprintf(answers, sizeof answers, "%s/answers.jsonl", sk_th_tmpdir());
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(n > 0);
    self[n] = 0;
    static const char *const files[] = {"test_http_contract", "test_http_admin",
                                        "test_waiting_room_http", "test_fairness_http"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(cmd, sizeof cmd, "SK_TH_RECORD_ANSWERS=%s %s -j 2 %s 2>&1", answers, self,
                 files[i]);
        int rc = sk_th_sh(cmd, out, sizeof out);
        CHECK_MSG(rc == 0, "%s failed under recording:\n%s", files[i], out);
    }
    snprintf(cmd, sizeof cmd,
             "node %s/tests/openapi/validate.mjs %s %s/docs/openapi.yaml %s/src/http/routes.def "
             "%s 2>&1",
             sk_th_source_root(), npm, sk_th_source_root(), sk_th_source_root(), answers);
    int rc = sk_th_sh(cmd, out, sizeof out);
    printf("    # %.*s\n", (int)strcspn(out, "\n"), out);
    CHECK_MSG(rc == 0, "the answers do not match docs/openapi.yaml:\n%s", out);
}
