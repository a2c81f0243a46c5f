/* test_http1_parse.c - the HTTP/1.1 request head parser (http1_parse.h),
 * fed bytes. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "http/http1_parse.h"
#include "support/harness.h"

static struct sk_h1_head h;
static struct sk_h1_refusal r;

/* Exactly the bytes on the heap (ASan catches reads past len). */
static int parse_n(const char *bytes, size_t n, uint64_t max_body)
{
    char *p = malloc(n ? n : 1);
    CHECK(p != NULL);
    memcpy(p, bytes, n);
    int rc = sk_h1_parse_head(p, n, 0, max_body, &h, &r);
    /* the pointers into the copy, moved to the caller's bytes (the copy
     * is freed below) */
    if (rc == SK_H1_OK) {
#define MOVE(ptr) ((ptr) = (ptr) ? bytes + ((ptr)-p) : NULL)
        MOVE(h.method);
        MOVE(h.path);
        MOVE(h.host);
        for (size_t i = 0; i < h.n_fields; i++) {
            MOVE(h.fields[i].name);
            MOVE(h.fields[i].value);
        }
#undef MOVE
    }
    free(p);
    return rc;
}

static int parse(const char *s)
{
    return parse_n(s, strlen(s), 65536);
}

#define RL "POST /api/v1/activities/1/purchase HTTP/1.1\r\nHost: x\r\n"

SK_TEST(http1_head_fields_body_framing_and_persistence)
{
    static const char a[] = RL "X-User-Id: 7\r\nContent-Length: 14\r\n\r\n{\"quantity\":1}";
    CHECK_EQ(parse(a), SK_H1_OK);
    CHECK_EQ(h.len, strlen(a) - 14);
    CHECK(h.method_len == 4 && !memcmp(h.method, "POST", 4));
    CHECK(h.path_len == 29 && !memcmp(h.path, "/api/v1/activities/1/purchase", 29));
    CHECK_EQ(h.minor_version, 1);
    CHECK_EQ(h.body, SK_H1_LENGTH);
    CHECK_EQ(h.content_length, 14);
    CHECK_EQ(h.keep_alive, 1);
    CHECK_EQ(h.expect_continue, 0);
    CHECK(h.host_len == 1 && h.host[0] == 'x');
    CHECK_EQ(h.n_fields, 3);
    /* whitespace around a value is not part of it */
    CHECK_EQ(parse(RL "Content-Length:  0 \t\r\n\r\n"), SK_H1_OK);
    CHECK(h.body == SK_H1_LENGTH && h.content_length == 0);
    CHECK_EQ(parse("GET /healthz HTTP/1.1\r\n\r\n"), SK_H1_OK);
    CHECK(h.body == SK_H1_NO_BODY && h.keep_alive == 1);
    CHECK_EQ(parse(RL "Transfer-Encoding: Chunked\r\n\r\n"), SK_H1_OK);
    CHECK_EQ(h.body, SK_H1_CHUNKED);
    /* HTTP/1.1 keeps the connection unless told to close; 1.0 only when asked */
    CHECK_EQ(parse("GET / HTTP/1.1\r\nConnection: keep-alive, Close\r\n\r\n"), SK_H1_OK);
    CHECK_EQ(h.keep_alive, 0);
    CHECK_EQ(parse("GET / HTTP/1.1\r\nConnection: Upgrade, HTTP2-Settings\r\n\r\n"), SK_H1_OK);
    CHECK_EQ(h.keep_alive, 1);
    CHECK_EQ(parse("GET / HTTP/1.0\r\n\r\n"), SK_H1_OK);
    CHECK(h.minor_version == 0 && h.keep_alive == 0);
    CHECK_EQ(parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"), SK_H1_OK);
    CHECK_EQ(h.keep_alive, 1);
    CHECK_EQ(parse(RL "Expect: 100-Continue\r\nContent-Length: 1\r\n\r\n"), SK_H1_OK);
    CHECK_EQ(h.expect_continue, 1);
    /* one leading empty line is skipped, as h2o did; bare LF lines are lines */
    CHECK_EQ(parse("\r\nGET /healthz HTTP/1.1\nHost: x\n\n"), SK_H1_OK);
    CHECK(h.path_len == 8 && !memcmp(h.path, "/healthz", 8));
}

SK_TEST(http1_head_incomplete_until_the_blank_line_and_431_past_16_kib)
{
    static const char a[] = RL "X-User-Id: 7\r\nContent-Length: 2\r\n\r\n";
    for (size_t n = 1; n < sizeof a - 1; n++)
        CHECK_MSG(parse_n(a, n, 65536) == SK_H1_INCOMPLETE, "prefix of %zu bytes", n);
    CHECK_EQ(parse_n(a, sizeof a - 1, 65536), SK_H1_OK);
    /* a head that has not ended within 16 KiB is refused */
    size_t big = SK_FRAMING_MAX_HEAD + 100;
    char *p = malloc(big);
    CHECK(p != NULL);
    memcpy(p, "GET / HTTP/1.1\r\nX-Big: ", 23);
    memset(p + 23, 'a', big - 23);
    CHECK_EQ(parse_n(p, SK_FRAMING_MAX_HEAD - 1, 65536), SK_H1_INCOMPLETE);
    CHECK_EQ(parse_n(p, big, 65536), SK_EINVAL);
    CHECK_EQ(r.status, 431);
    /* one that ends just inside is served */
    memcpy(p + SK_FRAMING_MAX_HEAD - 4, "\r\n\r\n", 4);
    CHECK_EQ(parse_n(p, big, 65536), SK_H1_OK);
    CHECK_EQ(h.len, SK_FRAMING_MAX_HEAD);
    free(p);
}

SK_TEST(http1_head_refusals_name_their_status_and_reason)
{
    static const struct {
        const char *head;
        int status;
        const char *says;
    } bad[] = {
        {RL "Content-Length: 0\r\nContent-Length: 38\r\n\r\n", 400, "Content-Length"},
        {RL "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "Transfer"},
        {RL "X-A: a\r\n b\r\n\r\n", 400, "folding"},
        {RL "X-User-Id: 1\r\nX-User-Id: 2\r\n\r\n", 400, "X-User-Id"},
        {RL "Host: y\r\n\r\n", 400, "Host"},
        {RL "Content-Length: +2\r\n\r\n", 400, "decimal"},
        {RL "Content-Length: -1\r\n\r\n", 400, "decimal"},
        {RL "Content-Length: 1 2\r\n\r\n", 400, "decimal"},
        {RL "Content-Length: 0x10\r\n\r\n", 400, "decimal"},
        {RL "Content-Length: \r\n\r\n", 400, "decimal"},
        {RL "Content-Length: 99999999999999999999\r\n\r\n", 400, "decimal"},
        {RL "Content-Length: 65537\r\n\r\n", 413, "limit"},
        {RL "Transfer-Encoding: gzip, chunked\r\n\r\n", 400, "chunked"},
        /* RFC 9112 section 6.1: faulty framing, whatever Connection says */
        {"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "HTTP/1.0"},
        {"POST / HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
         "HTTP/1.0"},
        {RL "Expect: 200-ok\r\n\r\n", 417, "100-continue"},
        {"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 400, "malformed"},
        {"GET /\r\n\r\n", 400, "malformed"},
        {"GET / HTTP/3.0\r\n\r\n", 400, "malformed"},
        {" / HTTP/1.1\r\n\r\n", 400, "malformed"},
        {"GET / HTTP/1.1\r\nHo st: x\r\n\r\n", 400, "malformed"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_MSG(parse(bad[i].head) == SK_EINVAL, "accepted #%zu", i);
        CHECK_MSG(r.status == bad[i].status, "#%zu: status %d", i, r.status);
        CHECK_MSG(r.code && r.message && strstr(r.message, bad[i].says), "#%zu: %s", i,
                  r.message ? r.message : "(null)");
    }
    static const char nul[] = "GET /a\0b HTTP/1.1\r\n\r\n";
    CHECK_EQ(parse_n(nul, sizeof nul - 1, 65536), SK_EINVAL);
    CHECK_EQ(r.status, 400);
    /* the body limit is the caller's */
    CHECK_EQ(parse_n(RL "Content-Length: 65537\r\n\r\n", strlen(RL) + 25, 70000), SK_H1_OK);
}
