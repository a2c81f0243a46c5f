/* fuzz_redis_settings.c - a Redis server's settings (redis/redis_settings.h)
 * read from any bytes: the first byte picks INFO text or a CONFIG GET
 * reply (RESP bytes through hiredis's reader, as a client hands them), and
 * the judge of what was read, with any stock. */
#include <string.h>

#include <hiredis.h>

#include "core/error.h"
#include "fuzz.h"
#include "redis/redis_settings.h"

static void check_text(const char *s, size_t cap)
{
    FUZZ_CHECK(memchr(s, 0, cap) != NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    struct sk_rsettings s;
    sk_rsettings_init(&s);
    size_t len = size - 1;
    char *buf = fuzz_copy(data + 1, len);
    if (data[0] & 1) {
        int rc = sk_rsettings_info(&s, buf, len);
        FUZZ_CHECK(rc == 0 || rc == SK_EPROTO);
    } else {
        redisReader *r = redisReaderCreate();
        FUZZ_CHECK(r != NULL);
        void *rep = NULL;
        if (redisReaderFeed(r, buf, len) == REDIS_OK && redisReaderGetReply(r, &rep) == REDIS_OK &&
            rep) {
            int rc = sk_rsettings_config_reply(&s, rep);
            FUZZ_CHECK(rc == 0 || rc == SK_EPROTO || rc == SK_ENOTFOUND);
            freeReplyObject(rep);
        }
        redisReaderFree(r);
    }
    FUZZ_CHECK(s.used_memory >= -1 && s.maxmemory >= -1 && s.system_memory >= -1);
    FUZZ_CHECK(s.not_counted >= 0);
    FUZZ_CHECK(s.aof_enabled >= -1 && s.aof_enabled <= 1 && s.aof_write_ok >= -1 &&
               s.aof_write_ok <= 1 && s.bgsave_ok >= -1 && s.bgsave_ok <= 1);
    check_text(s.policy, sizeof s.policy);
    check_text(s.role, sizeof s.role);
    check_text(s.version, sizeof s.version);
    check_text(s.appendfsync, sizeof s.appendfsync);
    int64_t fr = sk_rsettings_free_bytes(&s);
    FUZZ_CHECK(fr >= -1);
    FUZZ_CHECK(sk_rsettings_orders_fit(&s) >= -1);
    FUZZ_CHECK(sk_rsettings_used_pct(&s) >= -1);
    /* any stock, the extremes included */
    static const int64_t stocks[] = {0, 1, 1000000, INT64_MAX};
    int64_t stock = stocks[len % 4];
    struct sk_rset_verdict v;
    int lvl = sk_rsettings_judge(&s, stock, &v);
    FUZZ_CHECK(lvl == v.level && lvl >= SK_RSET_OK && lvl <= SK_RSET_UNSAFE);
    FUZZ_CHECK(v.n >= 0 && v.n <= SK_RSET_FINDINGS_MAX);
    FUZZ_CHECK((v.n == 0) == (lvl == SK_RSET_OK));
    for (int i = 0; i < v.n; i++) {
        FUZZ_CHECK(v.f[i].setting && v.f[i].setting[0]);
        check_text(v.f[i].why, sizeof v.f[i].why);
        FUZZ_CHECK(v.f[i].why[0] != 0);
        FUZZ_CHECK(i == 0 ? v.f[i].level == lvl : v.f[i].level <= v.f[i - 1].level);
    }
    /* an evicting policy is always refused, noeviction never */
    int ev = sk_rsettings_policy_evicts(s.policy);
    FUZZ_CHECK((ev == 1) == (lvl == SK_RSET_UNSAFE));
    free(buf);
    return 0;
}
