/* fuzz_http1_parse.c - the HTTP/1.1 request head parser
 * (http/http1_parse.h) on any bytes. The chunked decoder has its own
 * target (fuzz_chunked.c). */
#include <string.h>

#include "core/error.h"
#include "fuzz.h"
#include "http/http1_parse.h"

#define MAX_BODY 4096

static int inside(const char *p, size_t n, const char *buf, size_t len)
{
    return p >= buf && p + n <= buf + len;
}

static void check_head(const char *buf, size_t size)
{
    static struct sk_h1_head h, h2;
    struct sk_h1_refusal r;
    int rc = sk_h1_parse_head(buf, size, 0, MAX_BODY, &h, &r);
    FUZZ_CHECK(rc == SK_H1_OK || rc == SK_H1_INCOMPLETE || rc == SK_EINVAL);
    if (rc == SK_EINVAL) {
        FUZZ_CHECK(r.status == 400 || r.status == 413 || r.status == 417 || r.status == 431);
        FUZZ_CHECK(r.code && r.message);
        FUZZ_CHECK(r.status != 431 || size >= SK_FRAMING_MAX_HEAD);
        return;
    }
    if (rc == SK_H1_INCOMPLETE) {
        FUZZ_CHECK(size < SK_FRAMING_MAX_HEAD);
        /* a prefix of an incomplete head is incomplete too */
        FUZZ_CHECK(sk_h1_parse_head(buf, size / 2, 0, MAX_BODY, &h2, &r) == SK_H1_INCOMPLETE);
        return;
    }
    FUZZ_CHECK(h.len > 0 && h.len <= size && h.len <= SK_FRAMING_MAX_HEAD);
    FUZZ_CHECK(inside(h.method, h.method_len, buf, h.len) && h.method_len > 0);
    FUZZ_CHECK(inside(h.path, h.path_len, buf, h.len));
    FUZZ_CHECK(h.minor_version >= 0 && h.minor_version <= 9);
    FUZZ_CHECK(h.n_fields <= SK_H1_MAX_FIELDS);
    for (size_t i = 0; i < h.n_fields; i++) {
        FUZZ_CHECK(!h.fields[i].name || inside(h.fields[i].name, h.fields[i].name_len, buf, h.len));
        FUZZ_CHECK(inside(h.fields[i].value, h.fields[i].value_len, buf, h.len));
    }
    FUZZ_CHECK(h.body != SK_H1_LENGTH || h.content_length <= MAX_BODY);
    FUZZ_CHECK(h.keep_alive == 0 || h.keep_alive == 1);
    /* only the head matters: what follows it changes nothing */
    FUZZ_CHECK(sk_h1_parse_head(buf, h.len, 0, MAX_BODY, &h2, &r) == SK_H1_OK);
    FUZZ_CHECK(h2.len == h.len && h2.body == h.body && h2.keep_alive == h.keep_alive &&
               h2.content_length == h.content_length && h2.n_fields == h.n_fields);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_copy(data, size);
    check_head(buf, size);
    free(buf);
    return 0;
}
