/* clock.h - time helpers: monotonic for timeouts, wall clock for sale windows. */
#ifndef SK_CLOCK_H
#define SK_CLOCK_H
#include <stdatomic.h>
#include <stdint.h>

int64_t sk_mono_ms(void);
int64_t sk_mono_us(void);
int64_t sk_wall_ms(void);

/* Sleeps ms, waking within 50 ms once *stop is set (stop may be NULL):
 * the pause of a background loop between passes or retries, never a
 * timing that correctness depends on. */
void sk_nap(const atomic_int *stop, int64_t ms);

#endif
