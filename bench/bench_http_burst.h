/* bench_http_burst.h - the open-loop phase of `seckill-bench http`
 * (--open-loop, bench_http_burst.c): the first second of a sale. One
 * `seckill serve --role api` process; its closed-loop admission capacity
 * measured first, then the purchase route driven open loop (`seckill load
 * --rate`, latency from the intended send time) at 0.5, 1, 1.5, 2, 3 and
 * 5 times that capacity, a few seconds each, with /healthz probed at the
 * same time; per step: offered, answered/s, admitted/s, refused/s by
 * reason, p50/p99 of the admitted and of the refused, /healthz's p99 and
 * transport errors; and the same generator at the same rates against the
 * static reference (nginx), for the generator's own limit. */
#ifndef SK_BENCH_HTTP_BURST_H
#define SK_BENCH_HTTP_BURST_H
#include <stdatomic.h>
#include <stdint.h>

#include <jansson.h>

struct sk_bench_burst_opts {
    double step_s;           /* per step */
    int64_t connections;     /* of the open-loop generator */
    int64_t cl_connections;  /* of the closed-loop capacity run */
    int64_t threads;         /* of the generator */
    int64_t admit_target_ms; /* serve --admit-target-ms (0: off, the "before" figures) */
    int json;                /* no table on stdout */
    const char *dir;         /* a temporary directory of the run (logs, SQLite file) */
    const char *redis_url;   /* serve's Redis */
    int nginx_port;          /* the static reference (0: none) */
    const atomic_int *interrupted;
};

/* Runs the steps; prints a table on stdout unless o->json. *out: a new
 * JSON object with every figure (the caller owns it; NULL when out of
 * memory). Returns 0 when every step ran and no admitted purchase broke a
 * check (duplicate order ids, a buyer over the limit), -1 otherwise (a
 * line on stderr says why). */
int sk_bench_http_burst(const struct sk_bench_burst_opts *o, json_t **out);

#endif
