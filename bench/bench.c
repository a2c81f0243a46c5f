/* bench.c - `seckill-bench`: the dispatcher to the benchmark programs
 * (bench_int.h): admission, cluster, http, persist, pow, recover, scrape,
 * strategies. */
#include "bench/bench.h"

#include <stdio.h>
#include <string.h>

#include "bench/bench_int.h"
#include "core/cli.h"

int sk_cli_bench(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
        !strcmp(argv[1], "help")) {
        FILE *f = argc < 2 ? stderr : stdout;
        fprintf(
            f,
            "usage: seckill-bench <benchmark> [options]\n\nbenchmarks:\n"
            "  admission   purchase and purchase_batch scripts against Redis\n"
            "  cluster     one hot activity: single Redis vs a 3-master cluster, 1/3/8 segments\n"
            "  http        seckill serve vs a static responder (nginx) over HTTP; purchases\n"
            "              while buyers poll their orders (SQLite, PostgreSQL, frozen DB)\n"
            "  scrape      admission latency with and without a /metrics scrape every second\n"
            "  persist     order worker: Redis stream -> SQLite, orders/s\n"
            "  recover     a Redis gone back in time: time to the fence, replay orders/s\n"
            "  strategies  naive, DB, WATCH, lock, Lua, Lua batched: the seeds' comparison\n"
            "  pow         a challenge's proof of work: a bot's solutions/s, the server's "
            "checks/s\n"
            "\n`seckill-bench <benchmark> --help` for its options.\n");
        return argc < 2 ? SK_EXIT_USAGE : SK_EXIT_OK;
    }
    if (!strcmp(argv[1], "admission")) return sk_bench_admission(argc - 1, argv + 1);
    if (!strcmp(argv[1], "http")) return sk_bench_http(argc - 1, argv + 1);
    if (!strcmp(argv[1], "scrape")) return sk_bench_scrape(argc - 1, argv + 1);
    if (!strcmp(argv[1], "persist")) return sk_bench_persist(argc - 1, argv + 1);
    if (!strcmp(argv[1], "recover")) return sk_bench_recover(argc - 1, argv + 1);
    if (!strcmp(argv[1], "strategies")) return sk_bench_strategies(argc - 1, argv + 1);
    if (!strcmp(argv[1], "cluster")) return sk_bench_cluster(argc - 1, argv + 1);
    if (!strcmp(argv[1], "pow")) return sk_bench_pow(argc - 1, argv + 1);
    return sk_cli_usage_error("bench: unknown benchmark '%s' (available: admission, cluster, http, "
                              "persist, pow, recover, scrape, strategies)",
                              argv[1]);
}
