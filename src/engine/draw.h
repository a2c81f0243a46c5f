/* draw.h - the verifiable draw of a sale's registrants
 * (docs/fairness.md, "The algorithm"): pure, no I/O.
 *
 * Before registration closes the activity publishes commit = SHA-256 of
 * its seed (32 bytes, written as 64 hex digits); at the draw the seed is
 * revealed, and anyone holding it and the registrants can recompute the
 * order:
 *   1. the registrants' user ids, distinct, sorted ascending as unsigned
 *      64-bit numbers: a[0..n);
 *   2. a stream of 64-bit words: block c (c = 0, 1, 2, ...) is
 *      SHA-256(seed bytes || c as 8 bytes big-endian), read as four words,
 *      each 8 bytes big-endian, in order;
 *   3. for i = 0 .. n-2: m = n - i; take words until one, w, is below
 *      2^64 - (2^64 mod m) (rejection sampling: no modulo bias); j = i +
 *      (w mod m); swap a[i] and a[j] (Fisher-Yates);
 *   4. a[0] is place 1 of the draw's order, a[n-1] place n.
 * Every order of the registrants is equally likely, given a seed nobody
 * could choose after seeing them. */
#ifndef SK_DRAW_H
#define SK_DRAW_H
#include <stddef.h>
#include <stdint.h>

#define SK_DRAW_HEX 65 /* 64 hex digits and a terminator */

/* The commitment of seed_hex (64 hex digits): SHA-256 of its 32 bytes, in
 * lowercase hex. Returns 0 or SK_EINVAL for a seed of another shape. */
int sk_draw_commit(const char *seed_hex, char out[SK_DRAW_HEX]);

/* Sorts users[0..n) ascending and drops repeats; returns the new n. */
size_t sk_draw_sort_unique(uint64_t *users, size_t n);

/* Puts users[0..n) (sorted, distinct: sk_draw_sort_unique) in the draw's
 * order for seed_hex, in place. Returns 0 or SK_EINVAL (a bad seed, or
 * users not sorted and distinct). */
int sk_draw_order(const char *seed_hex, uint64_t *users, size_t n);

/* SHA-256 of a list of user ids written one per line in decimal ("42\n"),
 * in lowercase hex: of the sorted registrants, what the draw was made from;
 * of the order, what it made. */
void sk_draw_list_hash(const uint64_t *users, size_t n, char out[SK_DRAW_HEX]);

#endif
