/* rand.c - getrandom(2) as hex text. */
#include "core/rand.h"

#include <errno.h>
#include <sys/random.h>

#include "core/error.h"

int sk_rand_hex(char *out, size_t cap, size_t nbytes)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char b[64];
    if (cap < 2 * nbytes + 1 || nbytes > sizeof b) return SK_EINVAL;
    size_t got = 0;
    while (got < nbytes) {
        ssize_t n = getrandom(b + got, nbytes - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return SK_EIO;
        got += (size_t)n;
    }
    for (size_t i = 0; i < nbytes; i++) {
        out[2 * i] = hex[b[i] >> 4];
        out[2 * i + 1] = hex[b[i] & 15];
    }
    out[2 * nbytes] = 0;
    return 0;
}
