/* test_redis_settings.c - a Redis server's settings read from INFO text
 * and CONFIG GET replies (redis/redis_settings.h), and the judge of them:
 * bytes a server sends, parsed without a server. */
#include <stdio.h>
#include <string.h>

#include <hiredis.h>

#include "core/error.h"
#include "redis/redis_settings.h"
#include "support/harness.h"
#include "support/resp_bytes.h"

/* What redis-server 7.0 says to `INFO` (trimmed to a few of each section). */
static const char info_7[] = "# Server\r\n"
                             "redis_version:7.0.15\r\n"
                             "redis_mode:standalone\r\n"
                             "\r\n"
                             "# Memory\r\n"
                             "used_memory:914576\r\n"
                             "used_memory_human:893.14K\r\n"
                             "total_system_memory:25276157952\r\n"
                             "maxmemory:31457280\r\n"
                             "maxmemory_human:30.00M\r\n"
                             "maxmemory_policy:allkeys-lru\r\n"
                             "mem_not_counted_for_evict:0\r\n"
                             "\r\n"
                             "# Persistence\r\n"
                             "loading:0\r\n"
                             "rdb_last_bgsave_status:ok\r\n"
                             "aof_enabled:1\r\n"
                             "aof_last_write_status:ok\r\n"
                             "\r\n"
                             "# Replication\r\n"
                             "role:master\r\n"
                             "connected_slaves:0\r\n";

static struct sk_rsettings parsed(const char *text)
{
    struct sk_rsettings s;
    sk_rsettings_init(&s);
    CHECK_EQ(sk_rsettings_info(&s, text, strlen(text)), 0);
    return s;
}

SK_TEST(redis_settings_reads_info_sections_and_leaves_the_unsaid_unknown)
{
    struct sk_rsettings s = parsed(info_7);
    CHECK_EQ(s.used_memory, 914576);
    CHECK_EQ(s.maxmemory, 31457280);
    CHECK_EQ(s.system_memory, 25276157952LL);
    CHECK(!strcmp(s.policy, "allkeys-lru"));
    CHECK(!strcmp(s.role, "master"));
    CHECK(!strcmp(s.version, "7.0.15"));
    CHECK_EQ(s.aof_enabled, 1);
    CHECK_EQ(s.aof_write_ok, 1);
    CHECK_EQ(s.bgsave_ok, 1);
    CHECK_EQ(s.appendfsync[0], 0); /* INFO does not say it */
    CHECK_EQ(s.nfields, 10);

    /* INFO memory alone, with bare \n line ends and no terminator */
    struct sk_rsettings m;
    sk_rsettings_init(&m);
    const char mem[] = "# Memory\nused_memory:100\nmaxmemory:0\nmaxmemory_policy:noeviction";
    CHECK_EQ(sk_rsettings_info(&m, mem, sizeof mem - 1), 0);
    CHECK(m.used_memory == 100 && m.maxmemory == 0 && !strcmp(m.policy, "noeviction"));
    CHECK(m.aof_enabled == -1 && m.system_memory == -1 && m.role[0] == 0);

    /* a later read replaces what it says and keeps the rest */
    const char again[] = "maxmemory_policy:volatile-lru\r\n";
    CHECK_EQ(sk_rsettings_info(&s, again, sizeof again - 1), 0);
    CHECK(!strcmp(s.policy, "volatile-lru") && s.maxmemory == 31457280);
}

SK_TEST(redis_settings_refuses_values_a_field_cannot_hold_and_reads_the_rest)
{
    struct sk_rsettings s;
    sk_rsettings_init(&s);
    const char bad[] = "maxmemory:12abc\r\n"
                       "used_memory:-5\r\n"
                       "maxmemory_policy:all keys\r\n"
                       "aof_enabled:2\r\n"
                       "role:master\r\n"
                       "maxmemory_policy:" /* empty */ "\r\n"
                       "redis_version:7.0.15.1.2.3.4.5.6.7.8.9.10.11\r\n"
                       "no colon here\r\n"
                       ":\r\n"
                       "used_memory_peak:99999999999999999999999\r\n";
    CHECK_EQ(sk_rsettings_info(&s, bad, sizeof bad - 1), SK_EPROTO);
    CHECK_EQ(s.maxmemory, -1);
    CHECK_EQ(s.used_memory, -1);
    CHECK_EQ(s.policy[0], 0);
    CHECK_EQ(s.aof_enabled, -1);
    CHECK_EQ(s.version[0], 0);
    CHECK(!strcmp(s.role, "master"));
    CHECK_EQ(s.nfields, 1);
    /* nothing at all */
    CHECK_EQ(sk_rsettings_info(&s, "", 0), 0);
}

SK_TEST(redis_settings_reads_config_get_replies)
{
    struct sk_rsettings s;
    sk_rsettings_init(&s);
    redisReply *r = sk_th_resp("*6\r\n$11\r\nappendfsync\r\n$8\r\neverysec\r\n"
                               "$16\r\nmaxmemory-policy\r\n$12\r\nvolatile-ttl\r\n"
                               "$10\r\nappendonly\r\n$3\r\nyes\r\n");
    CHECK_EQ(sk_rsettings_config_reply(&s, r), 0);
    freeReplyObject(r);
    CHECK(!strcmp(s.appendfsync, "everysec") && !strcmp(s.policy, "volatile-ttl"));
    CHECK_EQ(s.aof_enabled, 1);

    r = sk_th_resp("*2\r\n$11\r\nappendfsync\r\n+always\r\n");
    CHECK_EQ(sk_rsettings_config_reply(&s, r), 0);
    freeReplyObject(r);
    CHECK(!strcmp(s.appendfsync, "always"));

    /* CONFIG renamed away (managed offerings): nothing changes */
    r = sk_th_resp("-ERR unknown command 'CONFIG', with args beginning with: 'GET'\r\n");
    CHECK_EQ(sk_rsettings_config_reply(&s, r), SK_ENOTFOUND);
    freeReplyObject(r);
    CHECK(!strcmp(s.appendfsync, "always"));

    /* odd shapes: an odd count, a number for a value, INFO's spelling of a
     * name CONFIG does not use */
    r = sk_th_resp("*1\r\n$11\r\nappendfsync\r\n");
    CHECK_EQ(sk_rsettings_config_reply(&s, r), SK_EPROTO);
    freeReplyObject(r);
    r = sk_th_resp("*2\r\n$11\r\nappendfsync\r\n:1\r\n");
    CHECK_EQ(sk_rsettings_config_reply(&s, r), SK_EPROTO);
    freeReplyObject(r);
    r = sk_th_resp("*2\r\n$16\r\nmaxmemory_policy\r\n$11\r\nallkeys-lru\r\n");
    CHECK_EQ(sk_rsettings_config_reply(&s, r), 0);
    freeReplyObject(r);
    CHECK(!strcmp(s.policy, "volatile-ttl"));
    r = sk_th_resp(":5\r\n");
    CHECK_EQ(sk_rsettings_config_reply(&s, r), SK_EPROTO);
    freeReplyObject(r);
    CHECK_EQ(sk_rsettings_config_reply(&s, NULL), SK_EPROTO);
}

/* The finding about setting in v, or NULL. */
static const struct sk_rset_finding *about(const struct sk_rset_verdict *v, const char *setting)
{
    for (int i = 0; i < v->n; i++)
        if (!strcmp(v->f[i].setting, setting)) return &v->f[i];
    return NULL;
}

SK_TEST(redis_settings_judge_refuses_every_evicting_policy_and_names_the_fix)
{
    static const char *evicting[] = {"allkeys-lru",  "allkeys-lfu",  "allkeys-random",
                                     "volatile-lru", "volatile-lfu", "volatile-random",
                                     "volatile-ttl"};
    for (size_t i = 0; i < sizeof evicting / sizeof *evicting; i++) {
        char text[128];
        snprintf(text, sizeof text, "used_memory:1000\r\nmaxmemory:0\r\nmaxmemory_policy:%s\r\n",
                 evicting[i]);
        struct sk_rsettings s = parsed(text);
        struct sk_rset_verdict v;
        CHECK_EQ(sk_rsettings_judge(&s, 0, &v), SK_RSET_UNSAFE);
        const struct sk_rset_finding *f = sk_rsettings_worst(&v, SK_RSET_UNSAFE);
        CHECK(f && !strcmp(f->setting, "maxmemory-policy"));
        CHECK_MSG(strstr(f->why, evicting[i]) &&
                      strstr(f->why, "CONFIG SET maxmemory-policy noeviction"),
                  "%s", f->why);
        CHECK_MSG(strstr(f->why, i < 3 ? "acknowledged orders" : "TTL"), "%s", f->why);
        CHECK_EQ(sk_rsettings_policy_evicts(evicting[i]), 1);
    }
    struct sk_rsettings ok = parsed("used_memory:1000\r\nmaxmemory:0\r\n"
                                    "maxmemory_policy:noeviction\r\naof_enabled:1\r\n");
    struct sk_rset_verdict v;
    CHECK_EQ(sk_rsettings_judge(&ok, 1000000, &v), SK_RSET_OK);
    CHECK_EQ(v.n, 0);
    CHECK(sk_rsettings_worst(&v, SK_RSET_NOTE) == NULL);
    CHECK_EQ(sk_rsettings_policy_evicts("noeviction"), 0);

    /* a server that says nothing of its policy: warned, not refused */
    struct sk_rsettings mute;
    sk_rsettings_init(&mute);
    CHECK_EQ(sk_rsettings_judge(&mute, 0, &v), SK_RSET_WARN);
    CHECK(about(&v, "maxmemory-policy") &&
          strstr(about(&v, "maxmemory-policy")->why, "noeviction"));
    CHECK_EQ(sk_rsettings_policy_evicts(""), -1);
}

SK_TEST(redis_settings_judge_warns_near_full_and_when_the_stock_cannot_fit)
{
    /* 30 MiB max, 28 MiB used: 93% full */
    struct sk_rsettings s = parsed("used_memory:29360128\r\nmaxmemory:31457280\r\n"
                                   "maxmemory_policy:noeviction\r\naof_enabled:1\r\n");
    CHECK_EQ(sk_rsettings_used_pct(&s), 93);
    CHECK_EQ(sk_rsettings_free_bytes(&s), 2097152);
    CHECK_EQ(sk_rsettings_orders_fit(&s), 2097152 / SK_RSET_ORDER_BYTES);
    struct sk_rset_verdict v;
    CHECK_EQ(sk_rsettings_judge(&s, 0, &v), SK_RSET_WARN);
    CHECK_EQ(v.n, 1);
    CHECK_MSG(strstr(v.f[0].why, "93% full") && strstr(v.f[0].why, "503 redis_full"), "%s",
              v.f[0].why);

    /* a stock of a million orders in 30 MiB does not fit; the rule says
     * how much would */
    CHECK_EQ(sk_rsettings_judge(&s, 1000000, &v), SK_RSET_WARN);
    CHECK_EQ(v.n, 2);
    const struct sk_rset_finding *fit = &v.f[1];
    CHECK_MSG(strstr(fit->why, "1000000 orders") && strstr(fit->why, "raise maxmemory to at least"),
              "%s", fit->why);
    /* just what fits: no word of it */
    CHECK_EQ(sk_rsettings_judge(&s, sk_rsettings_orders_fit(&s), &v), SK_RSET_WARN);
    CHECK_EQ(v.n, 1);
    /* the fit rule alone, as preheat and serve --check ask it */
    struct sk_rset_finding f;
    CHECK_EQ(sk_rsettings_fits(&s, sk_rsettings_orders_fit(&s), &f), 1);
    CHECK_EQ(sk_rsettings_fits(&s, 0, &f), 1);
    CHECK_EQ(sk_rsettings_fits(&s, sk_rsettings_orders_fit(&s) + 1, &f), 0);
    CHECK(f.level == SK_RSET_WARN && !strcmp(f.setting, "maxmemory"));
    CHECK_MSG(strstr(f.why, "raise maxmemory to at least"), "%s", f.why);

    /* what eviction does not count (replication buffers) is left out */
    struct sk_rsettings r = parsed("used_memory:29360128\r\nmaxmemory:31457280\r\n"
                                   "mem_not_counted_for_evict:10485760\r\n"
                                   "maxmemory_policy:noeviction\r\n");
    CHECK_EQ(sk_rsettings_used_pct(&r), 60);
    /* over the limit: nothing free, not a negative figure */
    struct sk_rsettings over = parsed("used_memory:40000000\r\nmaxmemory:31457280\r\n");
    CHECK_EQ(sk_rsettings_free_bytes(&over), 0);
    CHECK(sk_rsettings_used_pct(&over) > 100);

    /* no maxmemory: the host's memory bounds it */
    struct sk_rsettings host = parsed("used_memory:1000000\r\nmaxmemory:0\r\n"
                                      "total_system_memory:101000000\r\n"
                                      "maxmemory_policy:noeviction\r\n");
    CHECK_EQ(sk_rsettings_used_pct(&host), -1);
    CHECK_EQ(sk_rsettings_free_bytes(&host), 100000000);
    CHECK_EQ(sk_rsettings_judge(&host, 100000000, &v), SK_RSET_WARN);
    CHECK(about(&v, "memory") != NULL);
    /* a stock past any product of bytes does not overflow the words */
    CHECK_EQ(sk_rsettings_judge(&host, INT64_MAX, &v), SK_RSET_WARN);
    /* unknown memory: the fit is not judged */
    struct sk_rsettings none = parsed("maxmemory_policy:noeviction\r\n");
    CHECK_EQ(sk_rsettings_orders_fit(&none), -1);
    CHECK_EQ(sk_rsettings_judge(&none, 1000000, &v), SK_RSET_OK);
}

SK_TEST(redis_settings_judge_notes_persistence_and_warns_on_failed_writes)
{
    struct sk_rset_verdict v;
    struct sk_rsettings s = parsed("maxmemory_policy:noeviction\r\naof_enabled:0\r\n");
    CHECK_EQ(sk_rsettings_judge(&s, 0, &v), SK_RSET_NOTE);
    CHECK(about(&v, "appendonly") && strstr(about(&v, "appendonly")->why, "appendonly yes"));

    s = parsed("maxmemory_policy:noeviction\r\naof_enabled:1\r\n");
    CHECK_EQ(sk_rsettings_config(&s, "appendfsync", 11, "everysec", 8), 0);
    CHECK_EQ(sk_rsettings_judge(&s, 0, &v), SK_RSET_NOTE);
    CHECK_MSG(strstr(v.f[0].why, "up to a second"), "%s", v.f[0].why);
    CHECK_EQ(sk_rsettings_config(&s, "appendfsync", 11, "always", 6), 0);
    CHECK_EQ(sk_rsettings_judge(&s, 0, &v), SK_RSET_OK);

    /* a failed background save: MISCONF refuses every write */
    s = parsed("maxmemory_policy:noeviction\r\naof_enabled:0\r\nrdb_last_bgsave_status:err\r\n");
    CHECK_EQ(sk_rsettings_judge(&s, 0, &v), SK_RSET_WARN);
    CHECK_MSG(!strcmp(v.f[0].setting, "save") && strstr(v.f[0].why, "MISCONF"), "%s", v.f[0].why);
    CHECK_EQ(v.f[1].level, SK_RSET_NOTE); /* worst first */

    /* everything at once: the unsafe policy leads */
    s = parsed("used_memory:31000000\r\nmaxmemory:31457280\r\nmaxmemory_policy:allkeys-lfu\r\n"
               "aof_enabled:1\r\naof_last_write_status:err\r\n");
    CHECK_EQ(sk_rsettings_judge(&s, 1000000, &v), SK_RSET_UNSAFE);
    CHECK_EQ(v.n, 4);
    CHECK(!strcmp(v.f[0].setting, "maxmemory-policy"));
    for (int i = 1; i < v.n; i++)
        CHECK(v.f[i].level <= v.f[i - 1].level && v.f[i].why[0]);
}
