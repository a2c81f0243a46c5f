/* clock.c - time helpers. */
#include "core/clock.h"

#include <time.h>

static int64_t clock_us(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t sk_mono_us(void)
{
    return clock_us(CLOCK_MONOTONIC);
}
int64_t sk_mono_ms(void)
{
    return clock_us(CLOCK_MONOTONIC) / 1000;
}
int64_t sk_wall_ms(void)
{
    return clock_us(CLOCK_REALTIME) / 1000;
}
