/* bench_http_mixed.h - the mixed phase of `seckill-bench http`
 * (bench_http_mixed.c): purchases at a fixed rate alone, then while buyers
 * poll their orders and pay at fixed rates, on SQLite, PostgreSQL and
 * MariaDB; the order reads/s each store serves; and, on the servers,
 * purchases and polls while the database is frozen (SIGSTOP). */
#ifndef SK_BENCH_HTTP_MIXED_H
#define SK_BENCH_HTTP_MIXED_H
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

struct sk_bench_mixed_opts {
    double duration_s;     /* per measured phase */
    double purchase_rate;  /* open loop, purchases/s */
    double poll_rate;      /* open loop, GET /api/v1/orders/{id} per s */
    double pay_rate;       /* open loop, POST .../pay per s */
    int sqlite, pg, mysql; /* which stores */
    int json;              /* no table on stdout */
    const char *dir;       /* a temporary directory of the run (logs, SQLite file) */
    const char *redis_url;
    pid_t redis_pid; /* for its CPU time */
    const atomic_int *interrupted;
};

/* Runs the mixed phase on each store asked for; prints a table on stdout
 * unless o->json. *out: a new JSON object with every figure (the caller
 * owns it; NULL when out of memory). Returns 0 when every phase ran and
 * its answers checked out (503s are expected only while frozen), -1
 * otherwise (a line on stderr says why). */
int sk_bench_http_mixed(const struct sk_bench_mixed_opts *o, json_t **out);

/* Default rates: the targets of docs/design.md's benchmark. */
#define SK_BENCH_MIXED_PURCHASE_RATE 20000
#define SK_BENCH_MIXED_POLL_RATE 10000
#define SK_BENCH_MIXED_PAY_RATE 200

#endif
