/* bench_admission.c - `seckill bench admission` (being written). */
#include "cli.h"

int sk_cli_bench(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return sk_cli_usage_error("bench: not built yet");
}
