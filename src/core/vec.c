/* vec.c - array growth (vec.h). */
#include "core/vec.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

int sk_vec_reserve(void *pp, size_t *cap, size_t need, size_t elem, size_t min_cap)
{
    if (need <= *cap) return 0;
    size_t n = *cap > min_cap ? *cap : (min_cap ? min_cap : 1);
    while (n < need) {
        if (n > SIZE_MAX / 2) return SK_ENOMEM;
        n *= 2;
    }
    if (elem && n > SIZE_MAX / elem) return SK_ENOMEM;
    /* pp points at the caller's typed pointer: read and write it as bytes,
     * which is valid whatever its pointee type (no aliasing through void **). */
    void *p;
    memcpy(&p, pp, sizeof p);
    void *np = realloc(p, n * elem);
    if (!np) return SK_ENOMEM;
    memcpy(pp, &np, sizeof np);
    *cap = n;
    return 0;
}
