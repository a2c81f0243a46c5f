/* bench.h - `seckill bench`: the benchmark programs (bench_admission.c
 * dispatches to bench_persist.c, bench_http.c, bench_strategies.c and
 * bench_cluster.c). Not part of the server's library. */
#ifndef SK_BENCH_H
#define SK_BENCH_H

int sk_cli_bench(int argc, char **argv);

#endif
