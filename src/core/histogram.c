/* histogram.c - log-linear latency histogram (see histogram.h). Nothing
 * here allocates. */
#include "core/histogram.h"

#include <string.h>

void sk_hist_init(struct sk_hist *h)
{
    memset(h, 0, sizeof *h);
    h->min = UINT64_MAX;
}

size_t sk_hist_index(uint64_t v)
{
    if (v > SK_HIST_MAX) v = SK_HIST_MAX;
    if (v < 2 * SK_HIST_SUB) return (size_t)v; /* exact region */
    /* v in [2^msb, 2^(msb+1)): drop `shift` low bits so that v >> shift
     * lands in [SUB, 2*SUB); each octave then takes SUB buckets. */
    unsigned msb = 63u - (unsigned)__builtin_clzll(v);
    unsigned shift = msb - SK_HIST_SUB_BITS;
    return (size_t)shift * SK_HIST_SUB + (size_t)(v >> shift);
}

uint64_t sk_hist_bucket_lo(size_t i)
{
    if (i < 2 * SK_HIST_SUB) return i;
    size_t shift = i / SK_HIST_SUB - 1;
    return (uint64_t)(i - shift * SK_HIST_SUB) << shift;
}

uint64_t sk_hist_bucket_hi(size_t i)
{
    if (i < 2 * SK_HIST_SUB) return i;
    size_t shift = i / SK_HIST_SUB - 1;
    return sk_hist_bucket_lo(i) + (UINT64_C(1) << shift) - 1;
}

void sk_hist_record(struct sk_hist *h, uint64_t v)
{
    if (v > SK_HIST_MAX) {
        v = SK_HIST_MAX;
        h->clamped++;
    }
    h->counts[sk_hist_index(v)]++;
    h->total++;
    h->sum += (long double)v;
    if (v < h->min) h->min = v;
    if (v > h->max) h->max = v;
}

void sk_hist_add(struct sk_hist *dst, const struct sk_hist *src)
{
    for (size_t i = 0; i < SK_HIST_BUCKETS; i++)
        dst->counts[i] += src->counts[i];
    dst->total += src->total;
    dst->clamped += src->clamped;
    dst->sum += src->sum;
    if (src->min < dst->min) dst->min = src->min;
    if (src->max > dst->max) dst->max = src->max;
}

uint64_t sk_hist_percentile(const struct sk_hist *h, double p)
{
    if (h->total == 0) return 0;
    if (p <= 0) return h->min;
    if (p >= 100) return h->max;
    /* rank of the wanted value, 1-based; the float product is rounded up
     * so that p99 of 100 values is the 99th, not the 100th */
    double want = p * (double)h->total / 100.0 - 1e-6; /* 0.99 * 1e5 must be 99000 */
    uint64_t rank = (uint64_t)want;
    if ((double)rank < want) rank++;
    if (rank < 1) rank = 1;
    uint64_t seen = 0;
    for (size_t i = 0; i < SK_HIST_BUCKETS; i++) {
        seen += h->counts[i];
        if (seen >= rank) {
            uint64_t v = sk_hist_bucket_hi(i);
            if (v > h->max) v = h->max;
            if (v < h->min) v = h->min;
            return v;
        }
    }
    return h->max;
}

double sk_hist_mean(const struct sk_hist *h)
{
    return h->total ? (double)(h->sum / (long double)h->total) : 0.0;
}
