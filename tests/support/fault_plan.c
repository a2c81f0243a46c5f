/* fault_plan.c - a nemesis's schedule from its seed (fault_plan.h). */
#include "support/fault_plan.h"

#include "support/harness.h"

size_t sk_th_fault_plan(uint64_t seed, int duration_s, const struct sk_th_fault_kind *kinds,
                        int nkinds, int gap_min_ms, int gap_max_ms, struct sk_th_fault *out,
                        size_t cap)
{
    uint64_t rng = seed;
    int total = 0;
    for (int k = 0; k < nkinds; k++)
        total += kinds[k].weight;
    size_t n = 0;
    uint64_t gap_span = (uint64_t)(gap_max_ms - gap_min_ms + 1);
    for (int64_t t = 3000; t < (int64_t)duration_s * 1000 - 2000 && n < cap;
         t += gap_min_ms + (int64_t)(sk_th_rng(&rng) % gap_span)) {
        int w = (int)(sk_th_rng(&rng) % (uint64_t)total), k = 0;
        while (w >= kinds[k].weight)
            w -= kinds[k++].weight;
        int span = kinds[k].max_ms - kinds[k].min_ms;
        out[n++] = (struct sk_th_fault){
            .at_ms = t,
            .kind = k,
            .dur_ms = kinds[k].min_ms + (span ? (int)(sk_th_rng(&rng) % (uint64_t)span) : 0),
            .pick = sk_th_rng(&rng)};
    }
    return n;
}
