/* bench_opts.h - the command-line options of a `seckill-bench ...` program,
 * parsed from a table: each option's name, kind, bounds and the field of the
 * program's options struct it fills. */
#ifndef SK_BENCH_OPTS_H
#define SK_BENCH_OPTS_H
#include <stddef.h>
#include <stdint.h>

enum sk_bench_opt_kind {
    SK_BENCH_OPT_INT,  /* int64_t field, a decimal in [lo, hi] */
    SK_BENCH_OPT_FLAG, /* int field set to 1; takes no value */
    SK_BENCH_OPT_STR,  /* const char * field, a non-empty value (what: "a URL") */
};

struct sk_bench_opt {
    const char *name; /* "--stock" */
    enum sk_bench_opt_kind kind;
    size_t off; /* offsetof the field in the options struct */
    int64_t lo, hi;
    const char *what;
};

/* Parses argv[0..argc) into the struct at opts by the n options of t:
 * "--name value" and "--name=value" (a flag only as "--name"). --help or
 * -h sets *help and stops. 0, or SK_EXIT_USAGE after printing
 * "seckill: bench <cmd>: ..." for an unknown option or a bad value. */
int sk_bench_opts_parse(const char *cmd, const struct sk_bench_opt *t, size_t n, int argc,
                        char **argv, void *opts, int *help);

#endif
