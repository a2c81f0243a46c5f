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

void sk_nap(const atomic_int *stop, int64_t ms)
{
    int64_t until = sk_mono_ms() + ms;
    for (int64_t left = ms; left > 0 && !(stop && atomic_load(stop)); left = until - sk_mono_ms()) {
        int64_t step = left < 50 ? left : 50;
        struct timespec ts = {0, (long)step * 1000000L};
        nanosleep(&ts, NULL);
    }
}
