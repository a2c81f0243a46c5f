/* test_histogram.c - the log-linear latency histogram: bucket arithmetic,
 * precision bound over the whole range, and percentiles of known
 * distributions compared with the exact order statistics. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/histogram.h"
#include "support/harness.h"

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Exact order statistic with the same rank rule as sk_hist_percentile. */
static uint64_t exact_pct(const uint64_t *sorted, size_t n, double p)
{
    double want = p * (double)n / 100.0 - 1e-6;
    size_t rank = (size_t)want;
    if ((double)rank < want) rank++;
    if (rank < 1) rank = 1;
    return sorted[rank - 1];
}

/* |got - want| within one bucket width, i.e. <= 1/128 of want (+1 for the
 * exact region's integer steps). */
static void check_close(uint64_t got, uint64_t want, const char *what)
{
    double tol = (double)want / SK_HIST_SUB + 1.0;
    CHECK_MSG(fabs((double)got - (double)want) <= tol, "%s: got %llu, exact %llu", what,
              (unsigned long long)got, (unsigned long long)want);
}

SK_TEST(histogram_buckets_cover_range_contiguously)
{
    /* Every value maps into a bucket whose [lo, hi] contains it, buckets
     * are contiguous, and their relative width never exceeds 1/128. */
    CHECK_EQ(sk_hist_index(0), 0);
    CHECK_EQ(sk_hist_index(255), 255);
    CHECK_EQ(sk_hist_index(256), 256);
    CHECK_EQ(sk_hist_index(257), 256);
    CHECK_EQ(sk_hist_index(258), 257);
    CHECK(sk_hist_index(SK_HIST_MAX) < SK_HIST_BUCKETS);
    CHECK_EQ(sk_hist_index(UINT64_MAX), sk_hist_index(SK_HIST_MAX));
    size_t last = sk_hist_index(SK_HIST_MAX);
    for (size_t i = 0; i <= last; i++) {
        uint64_t lo = sk_hist_bucket_lo(i), hi = sk_hist_bucket_hi(i);
        CHECK(lo <= hi);
        CHECK_EQ(sk_hist_index(lo), i);
        CHECK_EQ(sk_hist_index(hi), i);
        if (i > 0) CHECK_EQ(sk_hist_bucket_hi(i - 1) + 1, lo);
        if (lo >= 2 * SK_HIST_SUB)
            CHECK_MSG((double)(hi - lo + 1) / (double)lo <= 1.0 / SK_HIST_SUB + 1e-12,
                      "bucket %zu [%llu,%llu] too wide", i, (unsigned long long)lo,
                      (unsigned long long)hi);
    }
    /* a few spot values across the range, 1 us .. 60 s */
    const uint64_t vals[] = {1, 7, 127, 128, 1000, 12345, 999999, 1000000, 31999999, 59999999};
    for (size_t k = 0; k < sizeof vals / sizeof vals[0]; k++) {
        size_t i = sk_hist_index(vals[k]);
        CHECK(sk_hist_bucket_lo(i) <= vals[k] && vals[k] <= sk_hist_bucket_hi(i));
    }
}

SK_TEST(histogram_empty_and_single)
{
    struct sk_hist h;
    sk_hist_init(&h);
    CHECK_EQ(h.total, 0);
    CHECK_EQ(sk_hist_percentile(&h, 50), 0);
    CHECK(sk_hist_mean(&h) == 0.0);
    sk_hist_record(&h, 4242);
    CHECK_EQ(sk_hist_percentile(&h, 0), 4242);
    CHECK_EQ(sk_hist_percentile(&h, 50), 4242); /* capped to the exact max/min */
    CHECK_EQ(sk_hist_percentile(&h, 99.9), 4242);
    CHECK_EQ(sk_hist_percentile(&h, 100), 4242);
    CHECK(sk_hist_mean(&h) == 4242.0);
}

SK_TEST(histogram_uniform_1_to_100000)
{
    /* Every integer 1..100000 once: pN is N% of 100000 within 1/128. */
    static struct sk_hist h;
    sk_hist_init(&h);
    for (uint64_t v = 1; v <= 100000; v++)
        sk_hist_record(&h, v);
    CHECK_EQ(h.total, 100000);
    CHECK_EQ(h.min, 1);
    CHECK_EQ(h.max, 100000);
    check_close(sk_hist_percentile(&h, 50), 50000, "p50");
    check_close(sk_hist_percentile(&h, 90), 90000, "p90");
    check_close(sk_hist_percentile(&h, 99), 99000, "p99");
    check_close(sk_hist_percentile(&h, 99.9), 99900, "p99.9");
    CHECK_EQ(sk_hist_percentile(&h, 100), 100000);
    CHECK(fabs(sk_hist_mean(&h) - 50000.5) < 1e-6);
    /* the exact region: small values come back exactly */
    static struct sk_hist s;
    sk_hist_init(&s);
    for (uint64_t v = 1; v <= 200; v++)
        sk_hist_record(&s, v);
    CHECK_EQ(sk_hist_percentile(&s, 50), 100);
    CHECK_EQ(sk_hist_percentile(&s, 99), 198);
}

SK_TEST(histogram_bimodal_and_tail)
{
    /* 99% fast (1 ms), 1% slow (250 ms): p50/p90/p99 are fast, p99.9 is
     * slow: the shape a sold-out path with a few Redis stalls has. */
    static struct sk_hist h;
    sk_hist_init(&h);
    for (int i = 0; i < 99000; i++)
        sk_hist_record(&h, 1000);
    for (int i = 0; i < 1000; i++)
        sk_hist_record(&h, 250000);
    check_close(sk_hist_percentile(&h, 50), 1000, "p50");
    check_close(sk_hist_percentile(&h, 99), 1000, "p99");
    check_close(sk_hist_percentile(&h, 99.5), 250000, "p99.5");
    check_close(sk_hist_percentile(&h, 99.9), 250000, "p99.9");
    CHECK_EQ(sk_hist_percentile(&h, 100), 250000);
}

SK_TEST(histogram_exponential_matches_exact_order_statistics)
{
    /* Pseudo-random exponential latencies (mean 2 ms, long tail), checked
     * against sorting the same samples: the histogram never sorts. */
    enum { N = 200000 };
    uint64_t *v = malloc(N * sizeof *v);
    CHECK(v != NULL);
    static struct sk_hist a, b, all;
    sk_hist_init(&a);
    sk_hist_init(&b);
    uint64_t x = 88172645463325252ull; /* xorshift64 */
    for (size_t i = 0; i < N; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        double u = ((double)(x >> 11) + 0.5) / 9007199254740992.0;
        v[i] = 1 + (uint64_t)(-2000.0 * log(u));
        /* two "threads", merged below */
        sk_hist_record(i % 2 ? &a : &b, v[i]);
    }
    sk_hist_init(&all);
    sk_hist_add(&all, &a);
    sk_hist_add(&all, &b);
    CHECK_EQ(all.total, N);
    qsort(v, N, sizeof *v, cmp_u64);
    const double ps[] = {1, 10, 50, 75, 90, 99, 99.9, 99.99};
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        char what[32];
        snprintf(what, sizeof what, "p%g", ps[k]);
        check_close(sk_hist_percentile(&all, ps[k]), exact_pct(v, N, ps[k]), what);
    }
    CHECK_EQ(all.min, v[0]);
    CHECK_EQ(all.max, v[N - 1]);
    free(v);
}

SK_TEST(histogram_clamps_beyond_60s)
{
    struct sk_hist h;
    sk_hist_init(&h);
    sk_hist_record(&h, 1);
    sk_hist_record(&h, SK_HIST_MAX + 5);
    sk_hist_record(&h, UINT64_MAX);
    CHECK_EQ(h.clamped, 2);
    CHECK_EQ(h.max, SK_HIST_MAX);
    CHECK_EQ(sk_hist_percentile(&h, 100), SK_HIST_MAX);
    CHECK_EQ(sk_hist_percentile(&h, 50), SK_HIST_MAX);
    CHECK_EQ(sk_hist_percentile(&h, 10), 1);
}
