/* rand.h - secrets from the kernel's random source (getrandom), for the
 * values nobody may guess: a waiting room's draw seed (docs/waiting-room.md). */
#ifndef SK_RAND_H
#define SK_RAND_H
#include <stddef.h>

/* nbytes random bytes as 2 * nbytes lowercase hex digits and a terminator
 * in out (cap bytes, at least 2 * nbytes + 1). Returns 0, SK_EINVAL when
 * cap is too small, or SK_EIO when the kernel gave no randomness. */
int sk_rand_hex(char *out, size_t cap, size_t nbytes);

#endif
