/* fuzz_event_batch.c - an outbox batch row's id list (store/event_batch.h)
 * on any bytes: the ids read are non-empty, hold no space, end at the
 * text's end with the one marked last; written again into a list they
 * read back the same; the writer never overflows its buffer. */
#include <string.h>

#include "core/error.h"
#include "fuzz.h"
#include "store/event_batch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *in = fuzz_string(data, size);
    size_t cap = size + 1, len = 0, n = 0, lastn = 0, added = 0;
    char *again = malloc(cap);
    if (!again) abort();
    again[0] = 0;
    const char *end = in + strlen(in), *p = in, *id;
    size_t il;
    int last = 0;
    while ((id = sk_event_batch_next(p, &il, &last)) != NULL) {
        FUZZ_CHECK(id >= p && il > 0 && id + il <= end);
        FUZZ_CHECK(memchr(id, ' ', il) == NULL);
        char one[4096];
        if (il < sizeof one) {
            memcpy(one, id, il);
            one[il] = 0;
            /* an id the reader gives fits where it came from */
            if (sk_event_batch_id_ok(one)) {
                FUZZ_CHECK(sk_event_batch_add(again, cap, &len, one) == 0);
                added++;
            }
        }
        n++;
        if (last) lastn = n;
        p = id + il;
    }
    FUZZ_CHECK(n == 0 || lastn == n);
    FUZZ_CHECK(len < cap && strlen(again) == len);
    /* what was written reads back id for id */
    size_t m = 0;
    for (p = again; (id = sk_event_batch_next(p, &il, &last)) != NULL; p = id + il)
        m++;
    FUZZ_CHECK(m == added && m <= n);
    /* the writer refuses what does not fit, changing nothing */
    char small[8] = "ab";
    size_t sl = 2;
    FUZZ_CHECK(sk_event_batch_add(small, sizeof small, &sl, size < 4 ? "cd" : "cdefghij") ==
               (size < 4 ? 0 : SK_EINVAL));
    FUZZ_CHECK(strlen(small) == sl);
    free(again);
    free(in);
    return 0;
}
