/* fuzz_framing.c - the request-head checks (http/framing.h) on any bytes. */
#include <string.h>

#include "core/error.h"
#include "fuzz.h"
#include "http/framing.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_copy(data, size);
    size_t hl = sk_framing_head_len(buf, size);
    FUZZ_CHECK(hl <= size);
    const char *why = "unset";
    int rc = sk_framing_check(buf, size, &why);
    FUZZ_CHECK(rc == 0 || rc == 1 || rc == SK_EINVAL);
    FUZZ_CHECK((rc == SK_EINVAL) == (why != NULL));
    /* a complete head is judged; an incomplete one never is */
    FUZZ_CHECK((hl == 0) == (rc == 1));
    if (hl) {
        /* only the head matters: what follows it changes nothing */
        const char *why2 = NULL;
        FUZZ_CHECK(sk_framing_check(buf, hl, &why2) == rc);
        FUZZ_CHECK(sk_framing_head_len(buf, hl) == hl);
    }
    free(buf);
    return 0;
}
