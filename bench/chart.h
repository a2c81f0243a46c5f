/* chart.h - the chart of `seckill-bench strategies`: throughput and p99
 * latency per strategy, two log-scale bar panels with the redis-benchmark
 * reference lines, as hand-written SVG. Drawn from the run's JSON (the
 * object `--json` prints), so a saved run can be redrawn; the drawing is a
 * pure function of that object. */
#ifndef SK_BENCH_CHART_H
#define SK_BENCH_CHART_H
#include <stddef.h>

#include <jansson.h>

/* The SVG of run as one string: *svg is allocated here (terminated, *len
 * bytes without the terminator; the caller free()s it). Returns 0,
 * SK_EINVAL when run is not a `seckill-bench strategies --json` output, or
 * SK_ENOMEM; the reason in err. */
int sk_chart_svg(const json_t *run, char **svg, size_t *len, char *err, size_t cap);

/* sk_chart_svg written to the file at path (created or truncated; not
 * touched when run is not a strategies output). 0, or SK_EINVAL, SK_ENOMEM
 * or SK_EIO with the reason in err. */
int sk_chart_write(const json_t *run, const char *path, char *err, size_t cap);

#endif
