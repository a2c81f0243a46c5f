/* load.c - `seckill load`: the sub-command (flags, run, --db check,
 * report). The parts live beside it: http_resp.c (response parser),
 * json_field.c (JSON lookup), load_opts.c (flags), load_engine.c (epoll
 * connections, sk_load_run), load_records.c (accepted orders),
 * load_verify.c (checks) and load_report.c (output); see load.h. */
#include "load/load.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/cli.h"
#include "core/error.h"
#include "load/load_int.h"

static void on_sigint(int sig)
{
    (void)sig;
    sk_load_interrupt();
}

int sk_cli_load(int argc, char **argv)
{
    struct sk_load_opts o;
    char err[300] = "";
    int rc = sk_load_parse_args(&o, argc, argv, err, sizeof err);
    if (rc == 1) return sk_load_usage(stdout);
    if (rc < 0) return sk_cli_usage_error("load: %s", err);
    /* Ctrl-C: stop sending, collect what is in flight, report */
    struct sigaction sa = {.sa_handler = on_sigint};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    struct sk_load_result r;
    rc = sk_load_run(&o, &r, err, sizeof err);
    if (rc == SK_EINVAL) return sk_cli_usage_error("load: %s", err);
    if (rc < 0) return sk_cli_runtime_error("load: %s", err);
    if (sk_load_check_db(&o, &r, err, sizeof err) < 0) {
        sk_load_result_free(&r);
        return sk_cli_runtime_error("load: --db: %s", err);
    }
    if (o.json) {
        json_t *j = sk_load_json(&o, &r);
        char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
        if (s) printf("%s\n", s);
        free(s);
        json_decref(j);
    } else {
        sk_load_print(stdout, &o, &r);
    }
    int ok = r.ok;
    sk_load_result_free(&r);
    return ok ? SK_EXIT_OK : SK_EXIT_FAIL;
}
