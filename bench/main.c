/* main.c - the seckill-bench binary: the benchmarks (bench.c dispatches),
 * apart from the product. It runs the seckill binary beside it (or
 * $SECKILL_BIN) for the servers it measures. */
#ifndef SK_VERSION
#define SK_VERSION "unknown" /* the Makefile passes the VERSION file's */
#endif
#include <stdio.h>
#include <string.h>

#include "bench/bench.h"
#include "core/cli.h"

int main(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version"))) {
        printf("seckill-bench %s\n", SK_VERSION);
        return SK_EXIT_OK;
    }
    return sk_cli_bench(argc, argv);
}
