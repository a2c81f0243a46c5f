/* vec.h - the one growth rule for the arrays we keep (drift lists, stream
 * tables, buffers): at least min_cap elements, then doubling, so n appends
 * cost O(n) copies. One call instead of a hand-written `cap * 2` loop each.
 *
 *     if (SK_VEC_RESERVE(rep->drift, rep->drift_cap, rep->ndrift + 1, 16))
 *         return SK_ENOMEM;
 *
 * p is any object pointer (NULL for an empty array), cap its size_t
 * capacity in elements. */
#ifndef SK_VEC_H
#define SK_VEC_H
#include <stddef.h>

/* Makes room for need elements of elem bytes at *pp (realloc, so *pp may
 * move; new elements are uninitialised). Ownership: the array stays the
 * caller's (free() it). Returns 0, or SK_ENOMEM (also on size overflow)
 * with *pp and *cap unchanged and still valid. */
int sk_vec_reserve(void *pp, size_t *cap, size_t need, size_t elem, size_t min_cap);

#define SK_VEC_RESERVE(p, cap, need, min_cap)                                                      \
    sk_vec_reserve(&(p), &(cap), (need), sizeof *(p), (min_cap))

#endif
