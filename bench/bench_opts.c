/* bench_opts.c - table-driven options of the bench programs (bench_opts.h). */
#include "bench/bench_opts.h"

#include <inttypes.h>
#include <string.h>

#include "core/cli.h"

/* The option of t named by the nl bytes of a, or NULL. */
static const struct sk_bench_opt *find(const struct sk_bench_opt *t, size_t n, const char *a,
                                       size_t nl)
{
    for (size_t j = 0; j < n; j++)
        if (strlen(t[j].name) == nl && strncmp(a, t[j].name, nl) == 0) return &t[j];
    return NULL;
}

int sk_bench_opts_parse(const char *cmd, const struct sk_bench_opt *t, size_t n, int argc,
                        char **argv, void *opts, int *help)
{
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            *help = 1;
            return 0;
        }
        const char *eq = strchr(a, '=');
        size_t nl = eq ? (size_t)(eq - a) : strlen(a);
        const struct sk_bench_opt *o = find(t, n, a, nl);
        if (o && o->kind == SK_BENCH_OPT_FLAG && eq) o = NULL;
        if (!o) return sk_cli_usage_error("bench %s: unknown option '%s' (see --help)", cmd, a);
        char *field = (char *)opts + o->off;
        if (o->kind == SK_BENCH_OPT_FLAG) {
            *(int *)(void *)field = 1;
            continue;
        }
        const char *val = eq ? eq + 1 : (i + 1 < argc ? argv[i + 1] : NULL);
        if (!eq) i++;
        if (o->kind == SK_BENCH_OPT_STR) {
            if (!val || !*val)
                return sk_cli_usage_error("bench %s: %s needs %s", cmd, o->name, o->what);
            *(const char **)(void *)field = val;
        } else if (!val || sk_cli_parse_i64(val, o->lo, o->hi, (int64_t *)(void *)field) < 0) {
            return sk_cli_usage_error(
                "bench %s: %s needs an integer in %" PRId64 "..%" PRId64 "%s%s%s", cmd, o->name,
                o->lo, o->hi, val ? " (got '" : "", val ? val : "", val ? "')" : "");
        }
    }
    return 0;
}
