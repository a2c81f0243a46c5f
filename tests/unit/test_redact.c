/* test_redact.c - secrets out of URLs before they reach a log. */
#include <string.h>

#include "core/redact.h"
#include "support/harness.h"

SK_TEST(redact_hides_passwords_in_user_info_and_parameters)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"postgres://app:s3cr3t@db.example:5432/shop", "postgres://app:***@db.example:5432/shop"},
        {"postgresql://app:p%40ss@h/db?sslmode=require",
         "postgresql://app:***@h/db?sslmode=require"},
        {"redis://:hunter22@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0"},
        {"redis://user:pw@h:1", "redis://user:***@h:1"},
        {"redis+cluster://:pw@h1:1,h2:2", "redis+cluster://:***@h1:1,h2:2"},
        {"postgres://h/db?user=a&password=s3cr3t&sslmode=x",
         "postgres://h/db?user=a&password=***&sslmode=x"},
        {"postgres://h/db?sslpassword=k3y", "postgres://h/db?sslpassword=***"},
        {"host=h password=s3cr3t dbname=d", "host=h password=*** dbname=d"},
        /* a password with '/' or '@' its owner did not encode */
        {"postgres://app:a/b@c@h/db", "postgres://app:***@h/db"},
        {"postgres://app@h/db", "postgres://app@h/db"},
        /* found by fuzz_redis_url: '#' or '?' in a password that the
         * Redis URL parser takes as part of it */
        {"redis://usgr:pxxxxxx#x$20ss@eq3[r15", "redis://usgr:***@eq3[r15"},
        {"redis://:pw?s3cr3t@h:1", "redis://:***@h:1"},
        /* an '@' in the query: a password parameter before it is hidden */
        {"postgres://h/db?password=s3cr3t&user=a@b", "postgres://h/db?password=***&user=a@b"},
        {"redis://127.0.0.1:6379", "redis://127.0.0.1:6379"},
        {"sqlite:/var/lib/seckill/s.db", "sqlite:/var/lib/seckill/s.db"},
        {"", ""},
    };
    char out[256];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_STR(sk_redact_url(cases[i].in, out, sizeof out), cases[i].out);
        CHECK(strstr(out, "s3cr3t") == NULL && strstr(out, "hunter22") == NULL);
    }
    CHECK_STR(sk_redact_url(NULL, out, sizeof out), "");
    /* cut short, still terminated, still no secret */
    char small[12];
    CHECK_STR(sk_redact_url("redis://:s3cr3t@h", small, sizeof small), "redis://:**");
    CHECK(sk_redact_url("x", out, 0) == out);
}
