/* mix64.c - splitmix64's finaliser as a hash of ids (mix64.h). */
#include "core/mix64.h"

static uint64_t mix64(uint64_t x)
{
    uint64_t z = x + 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t sk_mix64_bucket(uint64_t x, uint64_t buckets)
{
    return buckets <= 1 ? 0 : mix64(x) % buckets;
}
