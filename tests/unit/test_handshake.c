/* test_handshake.c - the connection handshake (redis/handshake.h): the
 * commands built from a URL, and the answers read, fed replies parsed from
 * RESP bytes (no server). */
#include <stdio.h>
#include <string.h>

#include <hiredis.h>

#include "core/error.h"
#include "redis/handshake.h"
#include "redis/redis_url.h"
#include "support/harness.h"
#include "support/resp_bytes.h"

static struct sk_redis_url url(const char *s)
{
    struct sk_redis_url u;
    char err[128];
    CHECK_MSG(sk_redis_url_parse(&u, s, strlen(s), err, sizeof err) == 0, "%s", err);
    return u;
}

/* The answer to command i of h, from bytes: its code, why into why. */
static int check(const struct sk_handshake *h, int i, const char *bytes, char *why, size_t cap)
{
    redisReply *r = sk_th_resp(bytes);
    int rc = sk_handshake_check(h, i, r, why, cap);
    freeReplyObject(r);
    return rc;
}

SK_TEST(handshake_says_auth_select_and_role_only_when_the_url_and_the_role_ask)
{
    struct sk_handshake h;
    struct sk_redis_url plain = url("redis://127.0.0.1:6379");
    sk_handshake_init(&h, &plain, SK_HS_AUTH | SK_HS_SELECT);
    CHECK_EQ(h.n, 0);

    struct sk_redis_url full = url("redis://alice:s%40cret@127.0.0.1:6379/3");
    sk_handshake_init(&h, &full, SK_HS_AUTH | SK_HS_SELECT | SK_HS_ROLE);
    CHECK_EQ(h.n, 3);
    CHECK_EQ(h.argc[0], 3);
    CHECK(!strcmp(h.argv[0][0], "AUTH") && !strcmp(h.argv[0][1], "alice") &&
          !strcmp(h.argv[0][2], "s@cret"));
    CHECK(h.argc[1] == 2 && !strcmp(h.argv[1][0], "SELECT") && !strcmp(h.argv[1][1], "3"));
    CHECK(h.argc[2] == 1 && !strcmp(h.argv[2][0], "ROLE"));

    /* a password without a user: AUTH pass; a cluster seed: AUTH only */
    struct sk_redis_url pw = url("redis://:pw@127.0.0.1:6379/2");
    sk_handshake_init(&h, &pw, SK_HS_AUTH);
    CHECK_EQ(h.n, 1);
    CHECK(h.argc[0] == 2 && !strcmp(h.argv[0][1], "pw"));
    /* a Sentinel is asked without the data's credentials */
    sk_handshake_init(&h, &pw, 0);
    CHECK_EQ(h.n, 0);
}

SK_TEST(handshake_reads_refusals_and_roles_and_names_no_secret)
{
    struct sk_handshake h;
    struct sk_redis_url u = url("redis://alice:topsecret@127.0.0.1:6379/1");
    sk_handshake_init(&h, &u, SK_HS_AUTH | SK_HS_SELECT | SK_HS_ROLE);
    char why[160];
    CHECK_EQ(check(&h, 0, "+OK\r\n", why, sizeof why), 0);
    CHECK_EQ(check(&h, 0, "-WRONGPASS invalid username-password pair\r\n", why, sizeof why),
             SK_EAUTH);
    CHECK_MSG(strstr(why, "AUTH refused") && !strstr(why, "topsecret"), "%s", why);
    CHECK_EQ(check(&h, 0, "-NOAUTH Authentication required.\r\n", why, sizeof why), SK_EAUTH);
    CHECK_EQ(check(&h, 1, "-ERR DB index is out of range\r\n", why, sizeof why), SK_EPROTO);
    CHECK_MSG(strstr(why, "SELECT refused"), "%s", why);
    CHECK_EQ(sk_handshake_check(&h, 1, NULL, why, sizeof why), SK_EIO);
    /* ROLE: master passes, a replica (a stale Sentinel answer) does not */
    CHECK_EQ(check(&h, 2, "*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n", why, sizeof why), 0);
    CHECK_EQ(check(&h, 2,
                   "*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:6379\r\n$9\r\nconnected\r\n:1\r\n",
                   why, sizeof why),
             SK_EPROTO);
    CHECK_MSG(strstr(why, "not a master (ROLE slave)"), "%s", why);
    redisReply *odd = sk_th_resp(":1\r\n");
    CHECK(!strcmp(sk_handshake_role(odd), "unknown"));
    freeReplyObject(odd);
    CHECK(!strcmp(sk_handshake_role(NULL), "unknown"));
}

SK_TEST(handshake_reads_the_settings_of_its_info_and_an_info_refused_is_no_failure)
{
    struct sk_handshake h;
    struct sk_redis_url u = url("redis://:pw@127.0.0.1:6379/2");
    sk_handshake_init(&h, &u, SK_HS_AUTH | SK_HS_SELECT | SK_HS_INFO);
    CHECK_EQ(h.n, 3);
    CHECK(h.argc[2] == 1 && !strcmp(h.argv[2][0], "INFO"));
    char why[160];
    struct sk_rsettings s;
    sk_rsettings_init(&s);
    /* another command's answer is not read as settings */
    redisReply *ok = sk_th_resp("+OK\r\n");
    CHECK_EQ(sk_handshake_settings(&h, 0, ok, &s), 0);
    freeReplyObject(ok);
    redisReply *info = sk_th_resp("$71\r\n# Memory\r\nused_memory:1000\r\nmaxmemory:0\r\n"
                                  "maxmemory_policy:allkeys-lru\r\n\r\n");
    CHECK_EQ(sk_handshake_check(&h, 2, info, why, sizeof why), 0);
    CHECK_EQ(sk_handshake_settings(&h, 2, info, &s), 1);
    freeReplyObject(info);
    CHECK(s.used_memory == 1000 && !strcmp(s.policy, "allkeys-lru"));
    /* INFO renamed away: the connection is fine, the settings unknown */
    redisReply *err = sk_th_resp("-ERR unknown command 'INFO'\r\n");
    CHECK_EQ(sk_handshake_check(&h, 2, err, why, sizeof why), 0);
    CHECK_EQ(sk_handshake_settings(&h, 2, err, &s), 1);
    freeReplyObject(err);
    CHECK(s.used_memory == -1 && s.policy[0] == 0);
    CHECK_EQ(sk_handshake_check(&h, 2, NULL, why, sizeof why), SK_EIO);
}
