/* test_num.c - strict decimal parsers (core/num.h), the numbers of Redis
 * replies (redis/reply.h), the flags' parsers built on them (core/cli.h)
 * and stream ids (redis/stream_id.h). */
#include <stdint.h>
#include <string.h>

#include "core/cli.h"
#include "core/error.h"
#include "core/num.h"
#include "redis/reply.h"
#include "redis/stream_id.h"
#include "support/harness.h"

#define U64(s, out) sk_num_u64((s), strlen(s), (out))

SK_TEST(num_parsers_take_exact_decimals_and_refuse_everything_else)
{
    uint64_t u = 7;
    CHECK_EQ(U64("0", &u), 0);
    CHECK_EQ(u, 0);
    CHECK_EQ(U64("007", &u), 0);
    CHECK_EQ(u, 7);
    CHECK_EQ(U64("18446744073709551615", &u), 0);
    CHECK(u == UINT64_MAX);
    const char *bad[] = {"",
                         "-1",
                         "+1",
                         " 1",
                         "1 ",
                         "1a",
                         "18446744073709551616",
                         "99999999999999999999",
                         "000000000000000000001"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        u = 42;
        CHECK_MSG(U64(bad[i], &u) == SK_EINVAL && u == 42, "accepted \"%s\"", bad[i]);
    }
    /* only [s, s+len) is read: the byte after the range does not count */
    CHECK_EQ(sk_num_u64("123x", 3, &u), 0);
    CHECK_EQ(u, 123);
    CHECK_EQ(sk_num_u64(NULL, 0, &u), SK_EINVAL);

    CHECK_EQ(sk_num_u64_canonical("1", 1, &u), 0);
    CHECK_EQ(sk_num_u64_canonical("0", 1, &u), SK_EINVAL);
    CHECK_EQ(sk_num_u64_canonical("01", 2, &u), SK_EINVAL);

    int64_t i = 0;
    CHECK_EQ(sk_num_i64("-9223372036854775807", 20, &i), 0);
    CHECK(i == -INT64_MAX);
    CHECK_EQ(sk_num_i64("9223372036854775807", 19, &i), 0);
    CHECK(i == INT64_MAX);
    CHECK_EQ(sk_num_i64("9223372036854775808", 19, &i), SK_EINVAL);
    CHECK_EQ(sk_num_i64("-", 1, &i), SK_EINVAL);
    CHECK_EQ(sk_num_i64("--1", 3, &i), SK_EINVAL);
}

SK_TEST(num_ranges_bound_the_value_and_refuse_what_the_plain_parsers_refuse)
{
    uint64_t u = 9;
    CHECK_EQ(sk_num_u64_range("1", 1, 1, 65535, &u), 0);
    CHECK_EQ(u, 1);
    CHECK_EQ(sk_num_u64_range("65535", 5, 1, 65535, &u), 0);
    CHECK_EQ(u, 65535);
    u = 9;
    CHECK_EQ(sk_num_u64_range("0", 1, 1, 65535, &u), SK_EINVAL);
    CHECK_EQ(sk_num_u64_range("65536", 5, 1, 65535, &u), SK_EINVAL);
    CHECK_EQ(sk_num_u64_range("1x", 2, 1, 65535, &u), SK_EINVAL);
    CHECK_EQ(sk_num_u64_range("", 0, 0, 65535, &u), SK_EINVAL);
    CHECK_EQ(u, 9); /* untouched on a refusal */
    int64_t i = 5;
    CHECK_EQ(sk_num_i64_range("-3", 2, -5, 5, &i), 0);
    CHECK_EQ(i, -3);
    CHECK_EQ(sk_num_i64_range("-6", 2, -5, 5, &i), SK_EINVAL);
    CHECK_EQ(sk_num_i64_range("6", 1, -5, 5, &i), SK_EINVAL);
    CHECK_EQ(sk_num_i64_range("- 1", 3, -5, 5, &i), SK_EINVAL);
    CHECK_EQ(i, -3);
    /* the flags: the same parser, NUL-terminated, nothing after the digits */
    CHECK_EQ(sk_cli_parse_i64("42", 0, 100, &i), 0);
    CHECK_EQ(i, 42);
    CHECK_EQ(sk_cli_parse_i64("42 ", 0, 100, &i), SK_EINVAL);
    CHECK_EQ(sk_cli_parse_i64("0x10", 0, 100, &i), SK_EINVAL);
    CHECK_EQ(sk_cli_parse_i64("101", 0, 100, &i), SK_EINVAL);
    CHECK_EQ(sk_cli_parse_i64(NULL, 0, 100, &i), SK_EINVAL);
    CHECK_EQ(sk_cli_parse_u64("18446744073709551615", &u), 0);
    CHECK(u == UINT64_MAX);
    CHECK_EQ(sk_cli_parse_u64("18446744073709551616", &u), SK_EINVAL);
    CHECK_EQ(sk_cli_parse_u64("-1", &u), SK_EINVAL);
}

SK_TEST(reply_numbers_are_integers_or_whole_decimal_strings)
{
    char digits[] = "-17", junk[] = "12abc", empty[] = "";
    redisReply in = {.type = REDIS_REPLY_INTEGER, .integer = 7};
    redisReply str = {.type = REDIS_REPLY_STRING, .str = digits, .len = 3};
    redisReply bad = {.type = REDIS_REPLY_STRING, .str = junk, .len = 5};
    redisReply none = {.type = REDIS_REPLY_STRING, .str = empty, .len = 0};
    redisReply nil = {.type = REDIS_REPLY_NIL};
    int64_t v = 99;
    CHECK_EQ(sk_reply_i64(&in, &v), 0);
    CHECK_EQ(v, 7);
    CHECK_EQ(sk_reply_i64(&str, &v), 0);
    CHECK_EQ(v, -17);
    v = 99;
    /* strtoll would have read 12 out of "12abc" */
    CHECK_EQ(sk_reply_i64(&bad, &v), SK_EPROTO);
    CHECK_EQ(sk_reply_i64(&none, &v), SK_EPROTO);
    CHECK_EQ(sk_reply_i64(&nil, &v), SK_EPROTO);
    CHECK_EQ(sk_reply_i64(NULL, &v), SK_EPROTO);
    CHECK_EQ(v, 99);
    CHECK_EQ(sk_reply_i64_or(&bad, -1), -1);
    CHECK_EQ(sk_reply_i64_or(&nil, 5), 5);
    CHECK_EQ(sk_reply_i64_or(&str, 5), -17);
}

SK_TEST(stream_ids_parse_and_order_as_redis_does)
{
    struct sk_sid a, b;
    CHECK_EQ(sk_sid_parse("1700000000000-5", 15, &a), 0);
    CHECK(a.ms == 1700000000000ULL && a.seq == 5);
    CHECK_EQ(sk_sid_parse("1700000000000-10", 16, &b), 0);
    CHECK(sk_sid_cmp(a, b) < 0 && sk_sid_cmp(b, a) > 0 && sk_sid_cmp(a, a) == 0);
    CHECK_EQ(sk_sid_parse("1700000000001-0", 15, &b), 0);
    CHECK(sk_sid_cmp(a, b) < 0); /* ms first, then seq */
    const char *bad[] = {"", "-", "1-", "-1", "1", "a-1", "1-a", "1-2-3", "1--2"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        CHECK_MSG(sk_sid_parse(bad[k], strlen(bad[k]), &a) == SK_EINVAL, "accepted \"%s\"", bad[k]);
}
