/* bench.h - `seckill-bench`: the benchmark programs (bench.c dispatches to
 * bench_admission.c, bench_cluster.c, bench_http.c, bench_persist.c,
 * bench_recover.c, bench_scrape.c and bench_strategies.c). Not in
 * libseckill.a and never in the seckill binary: linked into seckill-bench
 * (bench/main.c) and the tests. */
#ifndef SK_BENCH_H
#define SK_BENCH_H

/* `seckill-bench <benchmark> [options]` (argv[0] is the program,
 * argv[1] the benchmark); returns the exit status. */
int sk_cli_bench(int argc, char **argv);

#endif
