/* bench.h - `seckill-bench`: the benchmark programs (bench.c dispatches to
 * bench_admission.c, bench_cluster.c, bench_http.c, bench_persist.c,
 * bench_recover.c, bench_scrape.c and bench_strategies.c). Not in
 * libseckill.a; linked into the seckill binary. */
#ifndef SK_BENCH_H
#define SK_BENCH_H

/* `seckill-bench <benchmark> [options]` (argv[0] is "bench"); returns the
 * exit status. */
int sk_cli_bench(int argc, char **argv);

#endif
