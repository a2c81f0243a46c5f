/* fuzz_http_resp.c - the HTTP/1.1 response parser (core/http_resp.h: load,
 * the tests' client, the benchmarks, the readiness probe) on any bytes: the
 * first byte picks eof and HEAD, the rest is what arrived. */
#include <string.h>

#include "core/error.h"
#include "core/http_resp.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    int eof = data[0] & 1, head = (data[0] >> 1) & 1;
    size_t len = size - 1;
    char *buf = fuzz_copy(data + 1, len);
    struct sk_http_resp r;
    memset(&r, 0, sizeof r);
    int rc = sk_http_resp_parse(buf, len, eof, head, &r);
    FUZZ_CHECK(rc == 0 || rc == 1 || rc == SK_EPROTO);
    if (rc == 1) {
        FUZZ_CHECK(r.status >= 200 && r.status <= 999);
        FUZZ_CHECK(r.consumed <= len && r.body >= buf && r.body + r.body_len <= buf + len);
        FUZZ_CHECK(r.keep_alive == 0 || r.keep_alive == 1);
        FUZZ_CHECK(r.head >= buf && r.head + r.head_len <= buf + r.consumed);
        FUZZ_CHECK(r.head_len >= 16 && !memcmp(r.head + r.head_len - 4, "\r\n\r\n", 4));
        /* the status line alone reads the same status */
        FUZZ_CHECK(sk_http_resp_status(r.head, r.head_len) == r.status);
    }
    /* the status line reader on any prefix: a status, "more", or refused */
    int st = sk_http_resp_status((const char *)data + 1, len);
    FUZZ_CHECK(st == 0 || st == SK_EPROTO || (st >= 100 && st <= 999));
    free(buf);
    return 0;
}
