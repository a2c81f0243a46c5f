/* clock.h - time helpers: monotonic for timeouts, wall clock for sale windows. */
#ifndef SK_CLOCK_H
#define SK_CLOCK_H
#include <stdint.h>

int64_t sk_mono_ms(void);
int64_t sk_mono_us(void);
int64_t sk_wall_ms(void);

#endif
