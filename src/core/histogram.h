/* histogram.h - a latency histogram in the style of HdrHistogram: fixed
 * memory, log-linear buckets, O(1) record, percentiles by walking the
 * buckets (no sorting of samples).
 *
 * Values are unsigned integers in the caller's unit (the load generator
 * uses microseconds). Values below 2 * SK_HIST_SUB are kept exactly; above
 * that every power-of-two range is split into SK_HIST_SUB linear buckets, so
 * a bucket is at most 1/128 (< 0.8 %) of its values wide. The range ends at
 * SK_HIST_MAX (60 s in microseconds); larger values are counted in the last
 * bucket and in `clamped`.
 *
 * Memory: struct sk_hist holds everything inline (about 20 KiB) and never
 * allocates; the caller owns it (stack, static or embedded). Not thread-safe:
 * keep one per thread and merge with sk_hist_add. */
#ifndef SK_HISTOGRAM_H
#define SK_HISTOGRAM_H
#include <stddef.h>
#include <stdint.h>

#define SK_HIST_SUB_BITS 7
#define SK_HIST_SUB (1u << SK_HIST_SUB_BITS)
#define SK_HIST_MAX UINT64_C(60000000)
/* Index of SK_HIST_MAX (2^25 <= 6e7 < 2^26: shift 18) plus one. */
#define SK_HIST_BUCKETS (18 * SK_HIST_SUB + 2 * SK_HIST_SUB)

struct sk_hist {
    uint64_t counts[SK_HIST_BUCKETS];
    uint64_t total;    /* values recorded */
    uint64_t clamped;  /* values above SK_HIST_MAX (recorded as SK_HIST_MAX) */
    uint64_t min, max; /* exact, of the (clamped) values; min is UINT64_MAX when empty */
    long double sum;   /* for the mean; long double keeps microsecond sums exact */
};

/* Empties h. */
void sk_hist_init(struct sk_hist *h);

/* Records one value (O(1)). */
void sk_hist_record(struct sk_hist *h, uint64_t v);

/* Adds src's counts into dst (per-thread histograms into one). */
void sk_hist_add(struct sk_hist *dst, const struct sk_hist *src);

/* The value at percentile p (0..100): the highest value equivalent to the
 * bucket holding the ceil(p/100 * total)-th smallest value, capped to the
 * exact max (p = 100 gives max, p = 0 gives min). 0 when empty. */
uint64_t sk_hist_percentile(const struct sk_hist *h, double p);

/* Mean of the recorded values; 0 when empty. */
double sk_hist_mean(const struct sk_hist *h);

/* Bucket arithmetic, exposed for tests: index of v (v clamped to
 * SK_HIST_MAX), and the lowest and highest value of a bucket. */
size_t sk_hist_index(uint64_t v);
uint64_t sk_hist_bucket_lo(size_t i);
uint64_t sk_hist_bucket_hi(size_t i);

#endif
