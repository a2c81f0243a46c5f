/* fuzz.h - shared by the libFuzzer targets in tests/fuzz/ (`make fuzz`):
 * the entry point's prototype and a check that stops the fuzzer with a
 * crash (so a broken property is reported and saved like a memory error). */
#ifndef SK_FUZZ_H
#define SK_FUZZ_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: property broken: %s\n", __FILE__, __LINE__, #cond);            \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* A heap copy of exactly n bytes (no terminator), so AddressSanitizer
 * catches a read past the end. Caller frees. */
static inline char *fuzz_copy(const uint8_t *data, size_t n)
{
    char *p = malloc(n ? n : 1);
    if (!p) abort();
    for (size_t i = 0; i < n; i++)
        p[i] = (char)data[i];
    return p;
}

/* A terminated heap copy. Caller frees. */
static inline char *fuzz_string(const uint8_t *data, size_t n)
{
    char *p = malloc(n + 1);
    if (!p) abort();
    for (size_t i = 0; i < n; i++)
        p[i] = (char)data[i];
    p[n] = 0;
    return p;
}

#endif
