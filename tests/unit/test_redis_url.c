/* test_redis_url.c - the redis:// parser, fed bytes (no server). */
#include <string.h>

#include "core/error.h"
#include "redis/redis_url.h"
#include "support/harness.h"

static struct sk_redis_url parse_ok(const char *s)
{
    struct sk_redis_url u;
    char err[128] = "";
    CHECK_MSG(sk_redis_url_parse(&u, s, strlen(s), err, sizeof err) == 0, "%s: %s", s, err);
    return u;
}

/* Each of bad[0..n) is refused with SK_EINVAL and a reason. */
static void check_rejected(const char *const *bad, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct sk_redis_url u;
        char err[128] = "";
        CHECK_MSG(sk_redis_url_parse(&u, bad[i], strlen(bad[i]), err, sizeof err) == SK_EINVAL,
                  "accepted \"%s\"", bad[i]);
        CHECK_MSG(err[0] != 0, "no reason for \"%s\"", bad[i]);
    }
}

static void check_creds(const struct sk_redis_url *u, const char *user, const char *pass)
{
    CHECK_STR(u->user, user);
    CHECK_STR(u->pass, pass);
}

static void check_at(const struct sk_redis_url *u, const char *host, int port)
{
    CHECK_STR(u->host, host);
    CHECK_EQ(u->port, port);
}

SK_TEST(redis_url_parses_host_port_credentials_and_db)
{
    struct sk_redis_url u = parse_ok("redis://127.0.0.1");
    check_at(&u, "127.0.0.1", 6379);
    CHECK_EQ(u.db, 0);
    CHECK_STR(u.pass, "");
    u = parse_ok("redis://alice:p%40ss@cache.local:7000/5");
    check_creds(&u, "alice", "p@ss");
    check_at(&u, "cache.local", 7000);
    CHECK_EQ(u.db, 5);
    u = parse_ok("redis://:only-pass@h:1/");
    check_creds(&u, "", "only-pass");
    CHECK_EQ(u.port, 1);
    u = parse_ok("redis://[::1]:6380");
    check_at(&u, "::1", 6380);
}

SK_TEST(redis_url_rejects_malformed_input_with_a_reason)
{
    const char *bad[] = {"",
                         "http://h:1",
                         "redis://",
                         "redis://:6379",
                         "redis://h:0",
                         "redis://h:65536",
                         "redis://h:12ab",
                         "redis://h:1/x",
                         "redis://h:1/-1",
                         "redis://user@h",
                         "redis://u:%zz@h",
                         "redis://u:%4@h",
                         "redis://[::1",
                         "redis://h h:1",
                         "redis://h:99999999999999999999"};
    check_rejected(bad, sizeof bad / sizeof bad[0]);
    /* length is honoured: bytes past len are not read */
    struct sk_redis_url u;
    char err[64];
    CHECK_EQ(sk_redis_url_parse(&u, "redis://h:12/3garbage", 12, err, sizeof err), 0);
    CHECK_EQ(u.port, 12);
    CHECK_EQ(u.db, 0);
}

SK_TEST(redis_url_parses_sentinels_master_name_credentials_and_db)
{
    struct sk_redis_url u = parse_ok("redis+sentinel://10.0.0.1,10.0.0.2:26380,[::1]/mymaster");
    CHECK(u.sentinel);
    CHECK(!u.cluster);
    CHECK_EQ(u.nseeds, 3);
    CHECK_STR(u.seeds[0].host, "10.0.0.1");
    CHECK_EQ(u.seeds[0].port, 26379); /* a Sentinel's default port */
    CHECK_STR(u.seeds[1].host, "10.0.0.2");
    CHECK_EQ(u.seeds[1].port, 26380);
    CHECK_STR(u.seeds[2].host, "::1");
    CHECK_STR(u.master_name, "mymaster");
    CHECK_EQ(u.db, 0);
    CHECK_STR(u.pass, "");
    u = parse_ok("redis+sentinel://app:s%40cret@s1:26379,s2:26379/shop.main-1/3");
    check_creds(&u, "app", "s@cret");
    CHECK_STR(u.master_name, "shop.main-1");
    CHECK_EQ(u.db, 3);
    CHECK_EQ(u.nseeds, 2);
    /* a plain URL is still one host */
    u = parse_ok("redis://h:1");
    CHECK(!u.sentinel && !u.unix_sock);
    CHECK_STR(u.master_name, "");
}

SK_TEST(redis_url_parses_unix_sockets_with_credentials_and_db)
{
    struct sk_redis_url u = parse_ok("redis+unix:///var/run/redis/redis.sock");
    CHECK(u.unix_sock);
    check_at(&u, "/var/run/redis/redis.sock", 0);
    CHECK_EQ(u.db, 0);
    u = parse_ok("redis+unix://:pw@/tmp/r.sock?db=7");
    CHECK_STR(u.host, "/tmp/r.sock");
    CHECK_STR(u.pass, "pw");
    CHECK_EQ(u.db, 7);
    u = parse_ok("redis+unix://alice:p%3Aw@/tmp/r.sock");
    check_creds(&u, "alice", "p:w");
}

SK_TEST(redis_url_rejects_malformed_sentinel_and_unix_urls)
{
    char longpath[160] = "redis+unix:///";
    memset(longpath + strlen(longpath), 'a', 110);
    const char *bad[] = {"redis+sentinel://h:26379",
                         "redis+sentinel://h:26379/",
                         "redis+sentinel://h:26379/a?b",
                         "redis+sentinel://h:26379/m/x",
                         "redis+sentinel://h:0/m",
                         "redis+sentinel://,h/m",
                         "redis+unix://",
                         "redis+unix://relative.sock",
                         "redis+unix:///",
                         "redis+unix://pw@/tmp/r.sock",
                         "redis+unix:///tmp/r.sock?db=x",
                         "redis+unix:///tmp/r.sock?timeout=1",
                         longpath};
    check_rejected(bad, sizeof bad / sizeof bad[0]);
}
