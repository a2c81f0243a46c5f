/* test_vec.c - the one array growth rule (core/vec.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/vec.h"
#include "support/harness.h"

struct item {
    uint64_t a, b;
};

SK_TEST(vec_reserve_grows_from_empty_keeps_contents_and_doubles)
{
    struct item *v = NULL;
    size_t cap = 0, n = 0;
    for (uint64_t i = 0; i < 1000; i++) {
        CHECK_EQ(SK_VEC_RESERVE(v, cap, n + 1, 16), 0);
        CHECK(cap >= n + 1);
        v[n++] = (struct item){i, i * 3};
    }
    CHECK_EQ(cap, 1024); /* 16, 32, ... 1024: doubling, not one at a time */
    for (uint64_t i = 0; i < 1000; i++)
        CHECK(v[i].a == i && v[i].b == i * 3);
    /* enough room already: nothing moves */
    struct item *before = v;
    CHECK_EQ(SK_VEC_RESERVE(v, cap, 900, 16), 0);
    CHECK(v == before && cap == 1024);
    /* a big jump goes straight to the next power of two above it */
    CHECK_EQ(SK_VEC_RESERVE(v, cap, 5000, 16), 0);
    CHECK_EQ(cap, 8192);
    CHECK(v[999].a == 999);
    free(v);
}

SK_TEST(vec_reserve_refuses_overflow_and_leaves_the_array)
{
    char *v = NULL;
    size_t cap = 0;
    CHECK_EQ(SK_VEC_RESERVE(v, cap, 10, 8), 0);
    memcpy(v, "abcdefghi", 10);
    CHECK_EQ(SK_VEC_RESERVE(v, cap, SIZE_MAX, 8), SK_ENOMEM);
    CHECK_EQ(cap, 16);
    CHECK_STR(v, "abcdefghi");
    struct item *w = NULL;
    size_t wcap = 0;
    CHECK_EQ(SK_VEC_RESERVE(w, wcap, SIZE_MAX / 4, 1), SK_ENOMEM); /* n * elem overflows */
    CHECK(w == NULL && wcap == 0);
    free(v);
}
