/* mix64.h - a fixed, well-spread 64-bit hash of an integer (splitmix64's
 * finaliser), for spreading ids over buckets: neighbouring ids land on
 * unrelated buckets, and the same id always on the same one. */
#ifndef SK_MIX64_H
#define SK_MIX64_H
#include <stdint.h>

/* x spread over [0, buckets): 0 when buckets is 1 or less. */
uint64_t sk_mix64_bucket(uint64_t x, uint64_t buckets);

#endif
