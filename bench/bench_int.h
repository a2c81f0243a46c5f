/* bench_int.h - the benchmark programs that `seckill-bench` dispatches to
 * (bench.c), for the files of bench/ only. Each takes argv[0] as its own
 * name (argv[0] is the benchmark's name, its options follow) and returns
 * the exit status: 0 every check passed, 1 otherwise, 2 bad usage. */
#ifndef SK_BENCH_INT_H
#define SK_BENCH_INT_H

int sk_bench_admission(int argc, char **argv);  /* bench_admission.c */
int sk_bench_cluster(int argc, char **argv);    /* bench_cluster.c */
int sk_bench_http(int argc, char **argv);       /* bench_http.c */
int sk_bench_persist(int argc, char **argv);    /* bench_persist.c */
int sk_bench_recover(int argc, char **argv);    /* bench_recover.c */
int sk_bench_strategies(int argc, char **argv); /* bench_strategies.c */
int sk_bench_scrape(int argc, char **argv);     /* bench_scrape.c */
int sk_bench_pow(int argc, char **argv);        /* bench_pow.c */

#endif
