/* test_chunked.c - the strict chunked decoder (http/chunked.h), fed bytes
 * in every split: what RFC 9112's grammar allows decodes the same however
 * it arrives; every lenient reading a proxy might make differently (the
 * issue's `0x2f`, signs, spaces before the size, bare LF, trailers, more
 * than 16 digits) is refused, whatever the split. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "http/chunked.h"
#include "support/harness.h"

/* Decodes enc arriving in pieces of step bytes, as a connection does;
 * returns the verdict, the body in out (*blen) and the bytes that followed
 * it (*tail, copied to tail_out). */
static int decode_in_pieces(const char *enc, size_t len, size_t step, uint64_t max, char *out,
                            size_t *blen, char *tail_out, size_t *tail, int *too_large)
{
    char *buf = malloc(len + 1);
    CHECK(buf != NULL);
    struct sk_chunked d;
    sk_chunked_init(&d, max);
    size_t done = 0, fed = 0;
    int rc = SK_CHUNKED_MORE;
    const char *why = NULL;
    *tail = 0;
    while (rc == SK_CHUNKED_MORE && fed < len) {
        size_t k = len - fed < step ? len - fed : step;
        memcpy(buf + done, enc + fed, k);
        fed += k;
        size_t n = k;
        rc = sk_chunked_decode(&d, buf + done, &n, tail, &why);
        CHECK_MSG(rc != SK_EINVAL || (why && why[0]), "a refusal without a reason");
        done += n;
    }
    memcpy(out, buf, done);
    *blen = done;
    *too_large = d.too_large;
    if (rc == SK_CHUNKED_DONE) {
        /* what came after the body in the last piece, then the rest */
        memcpy(tail_out, buf + done, *tail);
        memcpy(tail_out + *tail, enc + fed, len - fed);
        *tail += len - fed;
    }
    free(buf);
    return rc;
}

/* The verdict on enc, the same for every split (checked). */
static int verdict(const char *enc, uint64_t max, char *out, size_t *blen, char *tail, size_t *tl,
                   int *too_large)
{
    size_t len = strlen(enc);
    int first = 0;
    for (size_t step = 1; step <= len + 1; step++) {
        int rc = decode_in_pieces(enc, len, step, max, out, blen, tail, tl, too_large);
        if (step == 1) first = rc;
        CHECK_MSG(rc == first, "'%s': step %zu says %d, step 1 says %d", enc, step, rc, first);
    }
    return first;
}

SK_TEST(chunked_bodies_decode_the_same_however_they_arrive)
{
    static const char enc[] = "4\r\nWiki\r\n5;ext=1\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n"
                              "0\r\n\r\nGET / HTTP/1.1\r\n\r\n";
    static const char want[] = "Wikipedia in\r\n\r\nchunks.";
    char out[256], tail[256];
    size_t blen, tl;
    int big;
    CHECK_EQ(verdict(enc, 65536, out, &blen, tail, &tl, &big), SK_CHUNKED_DONE);
    CHECK_MSG(blen == sizeof want - 1 && !memcmp(out, want, blen), "'%.*s'", (int)blen, out);
    CHECK_MSG(tl == 18 && !memcmp(tail, "GET / HTTP/1.1\r\n\r\n", 18), "tail %zu", tl);
    /* what the grammar allows: leading zeros, upper and lower case, 16
     * digits, extensions with whitespace around ';' and '=', quoted values
     * with escapes, an extension on the last chunk */
    static const struct {
        const char *enc, *body;
    } ok[] = {
        {"0\r\n\r\n", ""},
        {"000\r\n\r\n", ""},
        {"0000000000000002\r\nab\r\n0\r\n\r\n", "ab"},
        {"a\r\n0123456789\r\nA\r\n0123456789\r\n0\r\n\r\n", "01234567890123456789"},
        {"2;a\r\nab\r\n0\r\n\r\n", "ab"},
        {"2 ; a = b ;c\r\nab\r\n0;last\r\n\r\n", "ab"},
        {"2\t;a=\"x y\\\"z\\\\\"\r\nab\r\n0\r\n\r\n", "ab"},
        {"2;a=\"\"\r\nab\r\n0\r\n\r\n", "ab"},
        {"2;!#$%&'*+-.^_`|~=~\r\nab\r\n0\r\n\r\n", "ab"},
        {"2\r\n\r\n\r\n0\r\n\r\n", "\r\n"},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        CHECK_MSG(verdict(ok[i].enc, 65536, out, &blen, tail, &tl, &big) == SK_CHUNKED_DONE,
                  "refused '%s'", ok[i].enc);
        CHECK_MSG(blen == strlen(ok[i].body) && !memcmp(out, ok[i].body, blen) && tl == 0,
                  "'%s': body '%.*s'", ok[i].enc, (int)blen, out);
    }
    /* not complete yet: more is awaited, nothing refused */
    static const char *const partial[] = {"",        "2",     "2\r",    "2\r\n{}", "2\r\n{}\r\n",
                                          "2;a=\"x", "0\r\n", "0\r\n\r"};
    for (size_t i = 0; i < sizeof partial / sizeof partial[0]; i++)
        CHECK_MSG(verdict(partial[i], 65536, out, &blen, tail, &tl, &big) == SK_CHUNKED_MORE,
                  "'%s' is not incomplete", partial[i]);
}

SK_TEST(chunked_lenient_readings_are_refused_whatever_the_split)
{
    static const char *const bad[] = {
        /* the smuggling of the issue: "0x2f" read as 0 and an extension
         * "x2f" here, as 47 by a front end */
        "0x2f\r\n\r\nGET /api/v1/time HTTP/1.1\r\nHost: x\r\n\r\n\r\n0\r\n\r\n",
        "2zz\r\nab\r\n0\r\n\r\n", /* digits then garbage read as 2 */
        "zz\r\nabc\r\n0\r\n\r\n",
        "-1\r\nabc\r\n",
        "+2\r\nab\r\n0\r\n\r\n",
        " 2\r\nab\r\n0\r\n\r\n", /* space before the size */
        "\t2\r\nab\r\n0\r\n\r\n",
        "2 \r\nab\r\n0\r\n\r\n", /* whitespace not followed by ';' */
        "2;a \r\nab\r\n0\r\n\r\n",
        "2;a=b \r\nab\r\n0\r\n\r\n",
        "\r\nab\r\n0\r\n\r\n",   /* no size */
        "2\nab\r\n0\r\n\r\n",    /* bare LF after the size */
        "2;a\nab\r\n0\r\n\r\n",  /* after an extension */
        "2\r\nab\n0\r\n\r\n",    /* after the data */
        "2\r\nab\r\n0\n\r\n",    /* the last chunk */
        "2\r\nab\r\n0\r\n\n",    /* the end */
        "2\rab\r\n0\r\n\r\n",    /* a CR without LF */
        "2\r\nabc\r\n0\r\n\r\n", /* more data than the size */
        "2\r\nab0\r\n\r\n",
        "0\r\nX-User-Id: 7\r\n\r\n", /* trailers are refused */
        "0\r\nX-Trailer\r\n\r\n",    /* a trailer line without ':' */
        "0\r\n X: y\r\n\r\n",
        "2;\r\nab\r\n0\r\n\r\n", /* ';' without a name */
        "2;=b\r\nab\r\n0\r\n\r\n",
        "2;a=\r\nab\r\n0\r\n\r\n",    /* '=' without a value */
        "2;a=\"x\r\nab\r\n0\r\n\r\n", /* an unterminated quoted string */
        "2;a=\"\x01\"\r\nab\r\n0\r\n\r\n",
        "2;a=b\"c\"\r\nab\r\n0\r\n\r\n",
        "2;a@b\r\nab\r\n0\r\n\r\n",
        "00000000000000002\r\nab\r\n0\r\n\r\n", /* 17 digits, even zeros */
        "FFFFFFFFFFFFFFFFFFFF\r\nab\r\n",
        "2\r\nab\r\n\r\n", /* the last chunk missing */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char out[256], tail[256];
        size_t blen, tl;
        int big;
        CHECK_MSG(verdict(bad[i], 65536, out, &blen, tail, &tl, &big) == SK_EINVAL,
                  "accepted #%zu '%s'", i, bad[i]);
        CHECK_MSG(!big, "#%zu refused as too large", i);
    }
    /* extensions are bounded: SK_CHUNKED_EXT_MAX bytes pass, one more not */
    static char line[2 * SK_CHUNKED_EXT_MAX];
    for (int extra = 0; extra <= 1; extra++) {
        size_t n = 0;
        line[n++] = '1';
        line[n++] = ';';
        while (n < 1 + SK_CHUNKED_EXT_MAX + (size_t)extra)
            line[n++] = 'e';
        memcpy(line + n, "\r\nx\r\n0\r\n\r\n", 11);
        char out[16], tail[16];
        size_t blen, tl;
        int big;
        size_t len = strlen(line);
        int rc = decode_in_pieces(line, len, 7, 65536, out, &blen, tail, &tl, &big);
        CHECK_MSG(rc == (extra ? SK_EINVAL : SK_CHUNKED_DONE), "%zu bytes of extension: %d", n - 1,
                  rc);
    }
}

SK_TEST(chunked_bodies_over_the_limit_are_refused_at_the_size_line)
{
    char out[256], tail[256];
    size_t blen, tl;
    int big;
    CHECK_EQ(verdict("8\r\n01234567\r\n0\r\n\r\n", 8, out, &blen, tail, &tl, &big),
             SK_CHUNKED_DONE);
    CHECK_EQ(verdict("8\r\n01234567\r\n1\r\nx\r\n0\r\n\r\n", 8, out, &blen, tail, &tl, &big),
             SK_EINVAL);
    CHECK(big);
    /* refused before the data: the size alone says it */
    CHECK_EQ(verdict("9\r\n", 8, out, &blen, tail, &tl, &big), SK_EINVAL);
    CHECK(big);
    CHECK_EQ(verdict("ffffffffffffffff\r\n", UINT64_MAX - 1, out, &blen, tail, &tl, &big),
             SK_EINVAL);
    CHECK(big);
}
