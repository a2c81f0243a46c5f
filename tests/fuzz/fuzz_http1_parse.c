/* fuzz_http1_parse.c - the HTTP/1.1 request head parser and the chunked
 * body decoder (http/http1_parse.h) on any bytes. */
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

/* Decoding in one go and in two pieces (as bytes arrive) agree. */
static void check_chunked(const char *data, size_t size)
{
    char *a = fuzz_copy((const uint8_t *)data, size), *b = fuzz_copy((const uint8_t *)data, size);
    struct sk_h1_chunked da = {0}, db = {0};
    size_t na = size, ta = 0;
    int ra = sk_h1_chunked_decode(&da, a, &na, &ta);
    FUZZ_CHECK(ra == SK_H1_OK || ra == SK_H1_INCOMPLETE || ra == SK_EINVAL);
    if (ra != SK_EINVAL) FUZZ_CHECK(na + ta <= size);
    size_t k = size ? (unsigned char)data[0] % (size + 1) : 0;
    size_t n1 = k, t1 = 0;
    int r1 = sk_h1_chunked_decode(&db, b, &n1, &t1);
    if (r1 == SK_H1_INCOMPLETE) {
        /* the rest arrives after what was decoded so far */
        memmove(b + n1, b + k, size - k);
        size_t n2 = size - k, t2 = 0;
        int r2 = sk_h1_chunked_decode(&db, b + n1, &n2, &t2);
        FUZZ_CHECK(r2 == ra);
        if (ra == SK_H1_OK) {
            FUZZ_CHECK(n1 + n2 == na && t2 == ta);
            FUZZ_CHECK(memcmp(a, b, na + ta) == 0);
        }
    }
    free(a);
    free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_copy(data, size);
    check_head(buf, size);
    check_chunked(buf, size);
    free(buf);
    return 0;
}
