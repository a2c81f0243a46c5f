/* fuzz_purchase_body.c - the purchase body's fast path against the full
 * parser (http/http_body.h): for every input, sk_body_purchase gives what
 * sk_body_purchase_full alone gives (code, quantity, message), and the
 * fast path says yes only where the full parser accepts the same
 * quantity. Each input is tried as it is, and also as the source of a
 * body near the fast path's shape ({"quantity":N} with whitespace, digits
 * and bytes chosen by the input), where a disagreement would hide. */
#include <string.h>

#include "core/error.h"
#include "fuzz.h"
#include "http/http_body.h"

static void same_answer(const char *buf, size_t n)
{
    char *b = fuzz_copy((const uint8_t *)buf, n);
    char e1[160], e2[160];
    int64_t q1 = -7, q2 = -7, q3 = -7;
    int r1 = sk_body_purchase_full(b, n, &q1, e1, sizeof e1);
    int r2 = sk_body_purchase(b, n, &q2, e2, sizeof e2);
    FUZZ_CHECK(r1 == r2 && q1 == q2 && strcmp(e1, e2) == 0);
    if (sk_body_purchase_quick(b, n, &q3))
        FUZZ_CHECK(r1 == 0 && q3 == q1);
    else
        FUZZ_CHECK(q3 == -7);
    free(b);
}

/* A body near {"quantity":N}: each input byte picks the next piece. */
static size_t near_shape(const uint8_t *d, size_t size, char *out, size_t cap)
{
    static const char *const pieces[] = {"{",       "}",       "\"quantity\"",
                                         ":",       " ",       "\t",
                                         "\n",      "\r",      "0",
                                         "1",       "5",       "9",
                                         "1000000", "1000001", "-",
                                         ".",       "e",       "\"",
                                         ",",       "\"q\"",   "\\u0071",
                                         "\v",      "\f",      "\xc2\xa0",
                                         "x",       "999999",  "null",
                                         "[",       "]",       "\"quantity\":1",
                                         "\0"};
    size_t np = sizeof pieces / sizeof pieces[0], o = 0;
    for (size_t i = 0; i < size; i++) {
        const char *s = pieces[d[i] % np];
        size_t l = *s ? strlen(s) : 1; /* the last piece is one NUL byte */
        if (o + l > cap) break;
        memcpy(out + o, s, l);
        o += l;
    }
    return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    same_answer((const char *)data, size);
    char body[512];
    same_answer(body, near_shape(data, size, body, sizeof body));
    return 0;
}
