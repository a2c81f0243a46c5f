/* test_framing.c - the request-head checks made before routing (framing.h),
 * fed bytes. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "http/framing.h"
#include "support/harness.h"

/* Exactly the bytes on the heap (ASan catches reads past len). */
static int check(const char *head, const char **why)
{
    size_t n = strlen(head);
    char *p = malloc(n ? n : 1);
    CHECK(p != NULL);
    memcpy(p, head, n);
    int rc = sk_framing_check(p, n, why);
    free(p);
    return rc;
}

#define RL "POST /api/v1/activities/1/purchase HTTP/1.1\r\nHost: x\r\n"

SK_TEST(framing_accepts_ordinary_heads)
{
    const char *why = "x";
    const char *ok[] = {
        RL "X-User-Id: 1\r\nContent-Length: 2\r\n\r\n{}",
        RL "Content-Length: 2\r\ncontent-length:  2 \r\n\r\n{}", /* equal values */
        RL "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        RL "X-Forwarded-For: 1.1.1.1\r\nX-Forwarded-For: 2.2.2.2\r\n\r\n",
        "\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",     /* one leading CRLF, as h2o */
        "GET /healthz HTTP/1.1\nHost: x\nX-User-Id: 1\n\n", /* bare LF lines */
        "GET / HTTP/1.0\r\n\r\n",
        /* what follows the head is not judged */
        RL "X-User-Id: 1\r\n\r\nGET / HTTP/1.1\r\nX-User-Id: 1\r\nX-User-Id: 2\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        CHECK_MSG(check(ok[i], &why) == 0, "refused #%zu: %s", i, why);
        CHECK(why == NULL);
    }
}

SK_TEST(framing_refuses_ambiguous_length_folding_and_twice_named_senders)
{
    static const struct {
        const char *head, *says;
    } bad[] = {
        {RL "Content-Length: 0\r\nContent-Length: 38\r\n\r\n", "Content-Length"},
        {RL "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", "Transfer-Encoding"},
        {RL "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", "Transfer-Encoding"},
        {RL "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", "Transfer"},
        {RL "X-A: a\r\n b\r\n\r\n", "folding"},
        {RL "X-User-Id: 111\r\n\t222\r\n\r\n", "folding"},
        {RL "X-User-Id: 111\r\nx-user-id: 222\r\n\r\n", "X-User-Id"},
        {RL "Authorization: Bearer a\r\nAUTHORIZATION: Bearer b\r\n\r\n", "Authorization"},
        {RL "Idempotency-Key: a\r\nIdempotency-Key: a\r\n\r\n", "Idempotency-Key"},
        {RL "Host: y\r\n\r\n", "Host"},
        {"GET / HTTP/1.1\nContent-Length: 1\nContent-Length: 2\n\n", "Content-Length"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *why = NULL;
        CHECK_MSG(check(bad[i].head, &why) == SK_EINVAL, "accepted #%zu", i);
        CHECK_MSG(why && strstr(why, bad[i].says), "#%zu: '%s' lacks '%s'", i, why ? why : "",
                  bad[i].says);
    }
}

SK_TEST(framing_head_length_finds_the_blank_line_or_says_incomplete)
{
    const char *why;
    CHECK_EQ(sk_framing_head_len("GET / HTTP/1.1\r\nHost: x\r\n\r\nBODY", 31), 27);
    CHECK_EQ(sk_framing_head_len("\r\nGET / HTTP/1.1\n\nX", 19), 18);
    CHECK_EQ(sk_framing_head_len("GET / HTTP/1.1\r\nHost: x\r\n", 25), 0);
    CHECK_EQ(sk_framing_head_len("GET / HTTP/1.1", 14), 0);
    CHECK_EQ(sk_framing_head_len("", 0), 0);
    CHECK_EQ(sk_framing_head_len(NULL, 5), 0);
    /* incomplete heads are not judged */
    CHECK_EQ(check(RL "X-User-Id: 1\r\nX-User-Id: 2\r\n", &why), 1);
    CHECK_EQ(check("GET", &why), 1);
    CHECK_EQ(sk_framing_check(NULL, 0, &why), 1);
    /* a head of SK_FRAMING_MAX_HEAD bytes is found within that many */
    size_t n = SK_FRAMING_MAX_HEAD;
    char *big = malloc(n);
    CHECK(big != NULL);
    memset(big, 'a', n);
    memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
    memcpy(big + n - 4, "\r\n\r\n", 4);
    CHECK_EQ(sk_framing_head_len(big, n), n);
    CHECK_EQ(sk_framing_head_len(big, n - 1), 0);
    free(big);
}
