/* fault_plan.h - a nemesis's schedule from its seed: a fault every
 * gap_min..gap_max ms, its kind drawn by weight from a table, lasting
 * min_ms..max_ms of its kind, with a number that picks its target when
 * it is due. The nemesis (test_chaos.c) and the partition nemesis
 * (test_partitions.c) draw their schedules here, so a seed means the same
 * thing in both. */
#ifndef SK_TEST_FAULT_PLAN_H
#define SK_TEST_FAULT_PLAN_H
#include <stddef.h>
#include <stdint.h>

struct sk_th_fault_kind {
    const char *id, *name;
    int weight, min_ms, max_ms; /* how long it lasts (a kill: until the restart) */
};

struct sk_th_fault {
    int64_t at_ms; /* after the start */
    int kind, dur_ms;
    uint64_t pick; /* which of the candidates, when due */
};

/* Fills out (cap entries) with the schedule of seed over duration_s
 * seconds: the first fault at 3 s, none in the last 2 s. Returns how
 * many. kinds[0..nkinds) must hold a weight above 0. */
size_t sk_th_fault_plan(uint64_t seed, int duration_s, const struct sk_th_fault_kind *kinds,
                        int nkinds, int gap_min_ms, int gap_max_ms, struct sk_th_fault *out,
                        size_t cap);

#endif
