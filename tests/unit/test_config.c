/* test_config.c - `seckill serve` options from flags, file text and an
 * environment array (no I/O). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "http/config.h"
#include "support/harness.h"

static void set_ok(struct sk_config *c, const char *k, const char *v)
{
    char err[256] = "";
    CHECK_MSG(sk_config_set(c, k, v, err, sizeof err) == 0, "%s=%s refused: %s", k, v, err);
}

static void set_bad(const char *k, const char *v, const char *why_contains)
{
    struct sk_config c, before;
    sk_config_defaults(&c);
    before = c;
    char err[256] = "";
    CHECK_MSG(sk_config_set(&c, k, v, err, sizeof err) == SK_EINVAL, "%s=\"%s\" accepted", k, v);
    CHECK_MSG(memcmp(&c, &before, sizeof c) == 0, "%s=\"%s\" changed the config", k, v);
    CHECK_MSG(strncmp(err, k, strlen(k)) == 0 || strstr(err, "unknown option"),
              "%s: error \"%s\" does not name the key", k, err);
    if (why_contains)
        CHECK_MSG(strstr(err, why_contains) != NULL, "%s=\"%s\": \"%s\" lacks \"%s\"", k, v, err,
                  why_contains);
}

static int file(struct sk_config *c, const char *text, char *err, size_t cap)
{
    size_t n = strlen(text);
    char *p = malloc(n ? n : 1); /* exact size: ASan catches overreads */
    CHECK(p != NULL);
    memcpy(p, text, n);
    int rc = sk_config_parse_file(c, p, n, err, cap);
    free(p);
    return rc;
}

SK_TEST(config_defaults_match_the_spec)
{
    struct sk_config c;
    memset(&c, 0x55, sizeof c);
    sk_config_defaults(&c);
    CHECK_STR(c.listen, "127.0.0.1:8080");
    CHECK_STR(c.redis, "redis://127.0.0.1:6379");
    CHECK_STR(c.db, "sqlite:seckill.db");
    CHECK_EQ(c.processes, 1);
    CHECK_STR(c.admin_token, "");
    CHECK_EQ(c.auth_hmac, 0);
    CHECK_STR(sk_config_auth_name(&c), "trusted-header");
    CHECK_STR(c.hmac_secret, "");
    CHECK_EQ(c.role, SK_ROLE_ALL);
    CHECK_STR(sk_config_role_name(c.role), "all");
    CHECK_STR(c.log_level, "info");
    CHECK_EQ(c.max_body, 65536);
    CHECK_EQ(c.redis_timeout_ms, 1000);
    CHECK_EQ(c.sync_replicas, 0);
    CHECK_EQ(c.sync_timeout_ms, 100);
    CHECK_EQ(c.redis_functions, 1);
    char err[128];
    CHECK_EQ(sk_config_validate(&c, err, sizeof err), 0);
}

SK_TEST(config_set_accepts_valid_values_for_every_key)
{
    struct sk_config c;
    sk_config_defaults(&c);
    set_ok(&c, "listen", "0.0.0.0:80");
    CHECK_STR(c.listen, "0.0.0.0:80");
    set_ok(&c, "listen", "[::1]:65535");
    set_ok(&c, "listen", "api-1.internal:1");
    CHECK_STR(c.listen, "api-1.internal:1");
    set_ok(&c, "redis", "redis://:pw@10.0.0.5:7000/2");
    CHECK_STR(c.redis, "redis://:pw@10.0.0.5:7000/2");
    set_ok(&c, "redis", "redis+cluster://10.0.0.1:7000,10.0.0.2:7000");
    set_ok(&c, "redis", "redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/shop");
    CHECK_STR(c.redis, "redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/shop");
    set_ok(&c, "redis", "redis+unix:///run/redis.sock?db=2");
    CHECK_STR(c.redis, "redis+unix:///run/redis.sock?db=2");
    set_ok(&c, "db", "sqlite:/var/lib/seckill/db.sqlite");
    set_ok(&c, "db", "postgres://u:p@db/seckill");
    set_ok(&c, "db", "postgresql://db/seckill");
    CHECK_STR(c.db, "postgresql://db/seckill");
    set_ok(&c, "processes", "64");
    CHECK_EQ(c.processes, 64);
    set_ok(&c, "admin_token", "Adm1n-T0ken_!@#$%^&*()");
    CHECK_STR(c.admin_token, "Adm1n-T0ken_!@#$%^&*()");
    set_ok(&c, "admin_token", ""); /* clears it: admin routes closed */
    CHECK_STR(c.admin_token, "");
    set_ok(&c, "auth", "hmac");
    CHECK_EQ(c.auth_hmac, 1);
    CHECK_STR(sk_config_auth_name(&c), "hmac");
    set_ok(&c, "auth", "trusted-header");
    CHECK_EQ(c.auth_hmac, 0);
    set_ok(&c, "hmac_secret", "a secret with spaces");
    CHECK_STR(c.hmac_secret, "a secret with spaces");
    set_ok(&c, "role", "worker");
    CHECK_EQ(c.role, SK_ROLE_WORKER);
    set_ok(&c, "role", "api");
    CHECK_STR(sk_config_role_name(c.role), "api");
    set_ok(&c, "log_level", "debug");
    CHECK_STR(c.log_level, "debug");
    set_ok(&c, "max_body", "1048576");
    CHECK_EQ(c.max_body, 1048576);
    set_ok(&c, "redis_timeout_ms", "250");
    CHECK_EQ(c.redis_timeout_ms, 250);
    set_ok(&c, "sync_replicas", "2");
    CHECK_EQ(c.sync_replicas, 2);
    set_ok(&c, "sync_timeout_ms", "40");
    CHECK_EQ(c.sync_timeout_ms, 40);
    set_ok(&c, "redis_functions", "off");
    CHECK_EQ(c.redis_functions, 0);
    set_ok(&c, "redis_functions", "on");
    CHECK_EQ(c.redis_functions, 1);
}

SK_TEST(config_set_rejects_bad_values_and_names_the_key)
{
    struct {
        const char *k, *v, *why;
    } bad[] = {
        {"listen", "", "HOST:PORT"},
        {"listen", "8080", "HOST:PORT"},
        {"listen", ":8080", "HOST:PORT"},
        {"listen", "h:0", "port"},
        {"listen", "h:65536", "port"},
        {"listen", "h:-1", "port"},
        {"listen", "h:80x", "port"},
        {"listen", "h:", "port"},
        {"listen", "::1:8080", "IPv6"},
        {"listen", "[::1:8080", "IPv6"},
        {"listen", "[zz]:80", "IPv6"},
        {"listen", "a b:80", "host"},
        {"listen", "*:80", "host"},
        {"redis", "http://x", "redis://"},
        {"redis", "redis://", "host"},
        {"redis", "redis://h:99999", "port"},
        {"redis", "redis+cluster://", NULL},
        {"redis", "redis+sentinel://h:26379", "MASTER_NAME"},
        {"redis", "redis+unix://relative", "path"},
        {"sync_replicas", "17", NULL},
        {"sync_replicas", "-1", NULL},
        {"sync_timeout_ms", "0", NULL},
        {"sync_timeout_ms", "60001", NULL},
        {"redis_functions", "yes", "on or off"},
        {"redis", "", "redis://"},
        {"db", "sqlite:", "sqlite:PATH"},
        {"db", "mongodb://x", "sqlite:PATH"},
        {"db", "postgres://", NULL},
        {"db", "sqlite:a\nb", NULL},
        {"processes", "0", "between 1 and 64"},
        {"processes", "65", "1 and 64"},
        {"processes", "-1", NULL},
        {"processes", "1.5", NULL},
        {"processes", " 2", NULL},
        {"processes", "", NULL},
        {"processes", "99999999999999999999999", NULL},
        {"admin_token", "has space", "printable"},
        {"admin_token", "tab\there", "printable"},
        {"admin_token", "caf\xc3\xa9", "printable"},
        {"auth", "HMAC", "trusted-header, hmac or jwt"},
        {"auth", "", NULL},
        {"role", "both", "all, api or worker"},
        {"log_level", "loud", "debug"},
        {"max_body", "1023", "1024"},
        {"max_body", "67108865", NULL},
        {"redis_timeout_ms", "0", NULL},
        {"redis_timeout_ms", "600001", NULL},
        {"nonsense", "1", "unknown option"},
        {"LISTEN", "h:1", "unknown option"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        set_bad(bad[i].k, bad[i].v, bad[i].why);
    char big[600];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = 0;
    set_bad("admin_token", big, "too long");
    set_bad("hmac_secret", big, "too long");
    struct sk_config c;
    sk_config_defaults(&c);
    char err[64];
    CHECK_EQ(sk_config_set(&c, NULL, "x", err, sizeof err), SK_EINVAL);
    CHECK_EQ(sk_config_set(&c, "listen", NULL, err, sizeof err), SK_EINVAL);
    CHECK_EQ(sk_config_set(&c, "nonsense", "x", NULL, 0), SK_EINVAL);
}

SK_TEST(config_errors_never_echo_secrets)
{
    struct sk_config c;
    sk_config_defaults(&c);
    char err[256];
    CHECK_EQ(sk_config_set(&c, "admin_token", "topsecret with-space", err, sizeof err), SK_EINVAL);
    CHECK(strstr(err, "topsecret") == NULL);
    CHECK_EQ(file(&c, "admin_token = 'topsecret x'\n", err, sizeof err), SK_EINVAL);
    CHECK(strstr(err, "topsecret") == NULL);
    CHECK_EQ(file(&c, "hmac_secret = \"topsecret\\q\"\n", err, sizeof err), SK_EINVAL);
    CHECK(strstr(err, "topsecret") == NULL);
    char *env[] = {"SECKILL_ADMIN_TOKEN=topsecret x", NULL};
    CHECK_EQ(sk_config_apply_env(&c, env, err, sizeof err), SK_EINVAL);
    CHECK(strstr(err, "topsecret") == NULL);
    CHECK_MSG(strstr(err, "SECKILL_ADMIN_TOKEN") != NULL, "%s", err);
}

SK_TEST(config_set_flag_maps_dashes_to_underscores)
{
    struct sk_config c;
    sk_config_defaults(&c);
    char err[256];
    CHECK_EQ(sk_config_set_flag(&c, "admin-token", "t0k", err, sizeof err), 0);
    CHECK_STR(c.admin_token, "t0k");
    CHECK_EQ(sk_config_set_flag(&c, "hmac-secret", "s", err, sizeof err), 0);
    CHECK_EQ(sk_config_set_flag(&c, "redis-timeout-ms", "5", err, sizeof err), 0);
    CHECK_EQ(c.redis_timeout_ms, 5);
    CHECK_EQ(sk_config_set_flag(&c, "max_body", "2048", err, sizeof err), 0);
    CHECK_EQ(c.max_body, 2048);
    CHECK_EQ(sk_config_set_flag(&c, "admin-tokens", "x", err, sizeof err), SK_EINVAL);
    CHECK_STR(err, "unknown option --admin-tokens");
    CHECK_EQ(sk_config_set_flag(&c, "processes", "0", err, sizeof err), SK_EINVAL);
    CHECK_MSG(strstr(err, "processes: ") == err, "%s", err);
    char longflag[200];
    memset(longflag, 'x', sizeof longflag - 1);
    longflag[sizeof longflag - 1] = 0;
    CHECK_EQ(sk_config_set_flag(&c, longflag, "1", err, sizeof err), SK_EINVAL);
    CHECK_EQ(sk_config_set_flag(&c, NULL, "1", err, sizeof err), SK_EINVAL);
}

SK_TEST(config_file_parses_comments_quotes_and_blank_lines)
{
    struct sk_config c;
    sk_config_defaults(&c);
    char err[256] = "";
    const char *text = "\xef\xbb\xbf# seckill.conf\n"
                       "\n"
                       "   # indented comment\n"
                       "listen = 0.0.0.0:9000   # trailing comment\n"
                       "processes=4\r\n"
                       "admin_token = \"tok#en\"  # quoted: # kept\n"
                       "hmac_secret = 'a \\n literal # too'\n"
                       "db = sqlite:/tmp/a#b.db\n"
                       "redis-timeout-ms\t=\t200\n"
                       "auth = hmac\n"
                       "role = api";
    CHECK_MSG(file(&c, text, err, sizeof err) == 0, "%s", err);
    CHECK_STR(c.listen, "0.0.0.0:9000");
    CHECK_EQ(c.processes, 4);
    CHECK_STR(c.admin_token, "tok#en");
    CHECK_STR(c.hmac_secret, "a \\n literal # too");
    CHECK_STR(c.db, "sqlite:/tmp/a#b.db"); /* '#' not after whitespace: part of the value */
    CHECK_EQ(c.redis_timeout_ms, 200);
    CHECK_EQ(c.auth_hmac, 1);
    CHECK_EQ(c.role, SK_ROLE_API);
    CHECK_EQ(sk_config_validate(&c, err, sizeof err), 0);

    sk_config_defaults(&c);
    CHECK_MSG(file(&c, "hmac_secret = \"q\\\"b\\\\s\\tt\\n\"\nadmin_token = # empty\n", err,
                   sizeof err) == 0,
              "%s", err);
    CHECK_STR(c.hmac_secret, "q\"b\\s\tt\n");
    CHECK_STR(c.admin_token, "");
    CHECK_EQ(file(&c, "", err, sizeof err), 0);
    CHECK_EQ(sk_config_parse_file(&c, NULL, 0, err, sizeof err), 0);
}

SK_TEST(config_file_reports_the_line_number_of_errors)
{
    struct {
        const char *text, *want;
    } cases[] = {
        {"listen = h:1\nprocesses = 100\n", "line 2: processes: "},
        {"# c\n\nbogus = 1\n", "line 3: unknown option \"bogus\""},
        {"listen h:1\n", "line 1: expected '=' after listen"},
        {"= 5\n", "line 1: expected key = value"},
        {"admin_token = \"abc\n", "line 1: unterminated quote"},
        {"admin_token = 'abc\n", "line 1: unterminated quote"},
        {"admin_token = \"abc\" xyz\n", "line 1: unexpected text after the quoted value"},
        {"listen = h:1\n\n\nadmin_token = \"a\\zb\"\n", "line 4: unknown escape"},
        {"listen = h:1\nlisten = h:1\x01\n", "line 2: listen: "},
        {"key.with.dots = 1\n", "line 1: expected '='"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct sk_config c;
        sk_config_defaults(&c);
        char err[256] = "";
        CHECK_MSG(file(&c, cases[i].text, err, sizeof err) == SK_EINVAL, "accepted %s",
                  cases[i].text);
        CHECK_MSG(strstr(err, cases[i].want) == err, "\"%s\" does not start with \"%s\"", err,
                  cases[i].want);
    }
    /* NUL bytes and over-long values */
    struct sk_config c;
    sk_config_defaults(&c);
    char err[256];
    CHECK_EQ(sk_config_parse_file(&c, "listen = h:1\nro\0le = api\n", 24, err, sizeof err),
             SK_EINVAL);
    CHECK_STR(err, "line 2: NUL byte in the config file");
    char big[3000];
    int n = snprintf(big, sizeof big, "processes = 2\nadmin_token = ");
    memset(big + n, 'x', 2000);
    big[n + 2000] = 0;
    CHECK_EQ(file(&c, big, err, sizeof err), SK_EINVAL);
    CHECK_MSG(strstr(err, "line 2: value of admin_token too long") == err, "%s", err);
}

SK_TEST(config_file_last_duplicate_wins)
{
    struct sk_config c;
    sk_config_defaults(&c);
    char err[128];
    CHECK_EQ(file(&c, "processes = 2\nprocesses = 3\n", err, sizeof err), 0);
    CHECK_EQ(c.processes, 3);
}

SK_TEST(config_env_reads_seckill_variables_and_ignores_others)
{
    struct sk_config c;
    sk_config_defaults(&c);
    char err[256] = "";
    char *env[] = {"PATH=/usr/bin",
                   "SECKILL_LISTEN=10.1.2.3:8081",
                   "SECKILL_REDIS=redis://cache:6380",
                   "SECKILL_DB=sqlite:/data/x.db",
                   "SECKILL_ADMIN_TOKEN=adm",
                   "SECKILL_AUTH=hmac",
                   "SECKILL_HMAC_SECRET=hs",
                   "SECKILL_PROCESSES=3",
                   "SECKILL_ROLE=worker",
                   "SECKILL_LOG_LEVEL=warn",
                   "SECKILL_MAX_BODY=4096",
                   "SECKILL_REDIS_TIMEOUT_MS=70",
                   "SECKILL_BIN=/usr/bin/seckill", /* the harness's, not ours */
                   "SECKILL_CONFIG=/etc/seckill.conf",
                   "SECKILL_=x",
                   "SECKILL_NOEQUALS",
                   "SECKILL_LISTEN_X=bad",
                   "seckill_listen=lower:1",
                   NULL};
    CHECK_MSG(sk_config_apply_env(&c, env, err, sizeof err) == 0, "%s", err);
    CHECK_STR(c.listen, "10.1.2.3:8081");
    CHECK_STR(c.redis, "redis://cache:6380");
    CHECK_STR(c.db, "sqlite:/data/x.db");
    CHECK_STR(c.admin_token, "adm");
    CHECK_EQ(c.auth_hmac, 1);
    CHECK_STR(c.hmac_secret, "hs");
    CHECK_EQ(c.processes, 3);
    CHECK_EQ(c.role, SK_ROLE_WORKER);
    CHECK_STR(c.log_level, "warn");
    CHECK_EQ(c.max_body, 4096);
    CHECK_EQ(c.redis_timeout_ms, 70);

    char *empty[] = {"SECKILL_LISTEN=", NULL}; /* empty: unset, keeps the value */
    CHECK_EQ(sk_config_apply_env(&c, empty, err, sizeof err), 0);
    CHECK_STR(c.listen, "10.1.2.3:8081");
    CHECK_EQ(sk_config_apply_env(&c, NULL, err, sizeof err), 0);
    char *bad[] = {"SECKILL_PROCESSES=0", NULL};
    CHECK_EQ(sk_config_apply_env(&c, bad, err, sizeof err), SK_EINVAL);
    CHECK_MSG(strstr(err, "SECKILL_PROCESSES: ") == err, "%s", err);
}

/* The documented order: env, then file, then flags, each overwriting. */
SK_TEST(config_precedence_is_flags_over_file_over_env_over_defaults)
{
    struct sk_config c;
    char err[256] = "";
    sk_config_defaults(&c);
    char *env[] = {"SECKILL_LISTEN=1.1.1.1:1", "SECKILL_PROCESSES=2", "SECKILL_ROLE=api", NULL};
    CHECK_EQ(sk_config_apply_env(&c, env, err, sizeof err), 0);
    CHECK_EQ(file(&c, "listen = 2.2.2.2:2\nprocesses = 3\n", err, sizeof err), 0);
    CHECK_EQ(sk_config_set_flag(&c, "listen", "3.3.3.3:3", err, sizeof err), 0);
    CHECK_STR(c.listen, "3.3.3.3:3");   /* flag */
    CHECK_EQ(c.processes, 3);           /* file */
    CHECK_EQ(c.role, SK_ROLE_API);      /* env */
    CHECK_EQ(c.redis_timeout_ms, 1000); /* default */
}

SK_TEST(config_validate_requires_a_secret_for_hmac)
{
    struct sk_config c;
    char err[256];
    sk_config_defaults(&c);
    set_ok(&c, "auth", "hmac");
    CHECK_EQ(sk_config_validate(&c, err, sizeof err), SK_EINVAL);
    CHECK_MSG(strstr(err, "hmac_secret") != NULL, "%s", err);
    /* a secret, and one of at least SK_CONFIG_SECRET_MIN bytes */
    set_ok(&c, "hmac_secret", "k");
    CHECK_EQ(sk_config_validate(&c, err, sizeof err), SK_EINVAL);
    CHECK_MSG(strstr(err, "at least 16 bytes") != NULL && !strstr(err, "\"k\""), "%s", err);
    set_ok(&c, "hmac_secret", "0123456789abcde");
    CHECK_EQ(sk_config_validate(&c, err, sizeof err), SK_EINVAL);
    set_ok(&c, "hmac_secret", "0123456789abcdef");
    CHECK_EQ(sk_config_validate(&c, err, sizeof err), 0);
    set_ok(&c, "hmac_secret", "");
    CHECK_EQ(sk_config_validate(&c, err, sizeof err), SK_EINVAL);
    set_ok(&c, "auth", "trusted-header");
    CHECK_EQ(sk_config_validate(&c, err, sizeof err), 0);
}

/* 100,000 random and mutated config texts, keys and env entries: no crash
 * (ASan/UBSan under SANITIZE=1), a reason for every refusal, and the struct
 * always holds terminated strings and in-range numbers. */
SK_TEST(config_parsers_survive_100000_random_inputs)
{
    static const char *seeds[] = {
        "listen = 0.0.0.0:9000 # c\nprocesses=4\n",
        "admin_token = \"a\\\"b\" # x\nhmac_secret='s'\nauth=hmac\n",
        "role = worker\nlog_level = debug\nmax_body = 2048\nredis = redis://h:1/0\n",
        "db = sqlite:x.db\nredis_timeout_ms = 5\n# end",
    };
    static const char alphabet[] = "=#\"'\\\n\r\t :[]0123456789abcdehlnoprstuwy_-.+/\xff";
    unsigned long long x = 0x853c49e6748fea9bULL;
    for (int iter = 0; iter < 100000; iter++) {
        char buf[256];
        const char *seed = seeds[iter % 4];
        size_t n = strlen(seed);
        memcpy(buf, seed, n);
        for (int m = 0; m < 1 + iter % 4; m++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            size_t at = (size_t)(x % n);
            char ch = (x >> 40) & 1 ? alphabet[(x >> 20) % (sizeof alphabet - 1)] : (char)(x >> 48);
            if ((x >> 8) % 3 == 0 && n + 1 < sizeof buf) {
                memmove(buf + at + 1, buf + at, n - at);
                n++;
            } else if ((x >> 8) % 3 == 1 && n > 1) {
                memmove(buf + at, buf + at + 1, n - at - 1);
                n--;
                continue;
            }
            buf[at] = ch;
        }
        struct sk_config c;
        sk_config_defaults(&c);
        char err[128] = "";
        char *p = malloc(n);
        memcpy(p, buf, n);
        int rc = sk_config_parse_file(&c, p, n, err, sizeof err);
        CHECK(rc == 0 || (rc == SK_EINVAL && strncmp(err, "line ", 5) == 0));
        /* the same bytes as one key and one value, and as an env entry */
        char kv[300];
        snprintf(kv, sizeof kv, "SECKILL_%.*s", (int)n, p);
        char *env[] = {kv, NULL};
        rc = sk_config_apply_env(&c, env, err, sizeof err);
        CHECK(rc == 0 || (rc == SK_EINVAL && err[0]));
        char val[257];
        memcpy(val, p, n);
        val[n] = 0;
        rc = sk_config_set(&c, (iter & 1) ? "listen" : "admin_token", val, err, sizeof err);
        CHECK(rc == 0 || (rc == SK_EINVAL && err[0]));
        rc = sk_config_set_flag(&c, val, "1", err, sizeof err);
        CHECK(rc == 0 || (rc == SK_EINVAL && err[0]));
        free(p);
        CHECK(memchr(c.listen, 0, sizeof c.listen) && memchr(c.redis, 0, sizeof c.redis) &&
              memchr(c.db, 0, sizeof c.db) && memchr(c.log_level, 0, sizeof c.log_level) &&
              memchr(c.admin_token, 0, sizeof c.admin_token) &&
              memchr(c.hmac_secret, 0, sizeof c.hmac_secret));
        CHECK(c.processes >= 1 && c.processes <= 64);
        CHECK(c.max_body >= 1024 && c.redis_timeout_ms >= 1);
        CHECK(c.listen[0] && strchr(c.listen, ':'));
    }
}

SK_TEST(config_ops_listen_from_every_source_and_its_checks)
{
    struct sk_config c;
    char err[256];
    sk_config_defaults(&c);
    CHECK_STR(c.ops_listen, ""); /* off by default: today's single port */
    set_ok(&c, "ops_listen", "10.0.0.5:9090");
    CHECK_STR(c.ops_listen, "10.0.0.5:9090");
    set_ok(&c, "ops_listen", "off");
    CHECK_STR(c.ops_listen, "");
    CHECK_EQ(sk_config_set_flag(&c, "ops-listen", "[::1]:9091", err, sizeof err), 0);
    CHECK_STR(c.ops_listen, "[::1]:9091");
    set_bad("ops_listen", "9090", "HOST:PORT");
    set_bad("ops_listen", "127.0.0.1:0", "port");
    set_bad("ops_listen", "bad host:80", NULL);
    sk_config_defaults(&c);
    CHECK_EQ(file(&c, "ops_listen = 127.0.0.1:9092\n", err, sizeof err), 0);
    CHECK_STR(c.ops_listen, "127.0.0.1:9092");
    sk_config_defaults(&c);
    char *env[] = {"SECKILL_OPS_LISTEN=127.0.0.1:9093", NULL};
    CHECK_EQ(sk_config_apply_env(&c, env, err, sizeof err), 0);
    CHECK_STR(c.ops_listen, "127.0.0.1:9093");
    CHECK_EQ(sk_config_validate(&c, err, sizeof err), 0);
    set_ok(&c, "ops_listen", c.listen); /* the buyers' port itself: refused as a whole */
    CHECK_EQ(sk_config_validate(&c, err, sizeof err), SK_EINVAL);
    CHECK(strstr(err, "ops_listen") != NULL);
}
SK_TEST(config_hardening_options_have_defaults_ranges_and_precedence)
{
    struct sk_config c;
    char err[256];
    sk_config_defaults(&c);
    CHECK_EQ(c.io_timeout_s, 30);
    CHECK_EQ(c.max_connections, 0);
    CHECK_EQ(c.hmac_max_ttl_s, 86400);
    CHECK_STR(c.hmac_key_id, "");
    CHECK_STR(c.admin_token_file, "");
    set_ok(&c, "io_timeout_s", "1");
    set_ok(&c, "max_connections", "10000000");
    set_ok(&c, "hmac_max_ttl_s", "31536000");
    set_ok(&c, "hmac_key_id", "key_2-b");
    CHECK_EQ(c.io_timeout_s, 1);
    CHECK_EQ(c.max_connections, 10000000);
    CHECK_EQ(c.hmac_max_ttl_s, 31536000);
    CHECK_STR(c.hmac_key_id, "key_2-b");
    set_bad("io_timeout_s", "0", "seconds");
    set_bad("io_timeout_s", "86401", "seconds");
    set_bad("max_connections", "-1", NULL);
    set_bad("max_connections", "10000001", NULL);
    set_bad("hmac_max_ttl_s", "0", NULL);
    set_bad("hmac_key_id", "a:b", "letters");
    set_bad("hmac_key_id", "012345678901234567890123456789012", "32");
    set_bad("hmac_key_id_prev", "x y", "letters");
    set_bad("admin_token_file", "/tmp/a\nb", "path");

    /* a secret and its file: whichever is applied last wins (sources are
     * applied lowest precedence first) */
    sk_config_defaults(&c);
    set_ok(&c, "admin_token", "from-env");
    set_ok(&c, "admin_token_file", "/run/secrets/admin");
    CHECK_STR(c.admin_token, "");
    CHECK_STR(c.admin_token_file, "/run/secrets/admin");
    set_ok(&c, "admin_token", "from-flag");
    CHECK_STR(c.admin_token, "from-flag");
    CHECK_STR(c.admin_token_file, "");
    set_ok(&c, "hmac_secret", "s");
    set_ok(&c, "hmac_secret_file", "/f");
    CHECK_STR(c.hmac_secret, "");
    set_ok(&c, "hmac_secret_prev", "p");
    set_ok(&c, "hmac_secret_prev_file", "/g");
    CHECK_STR(c.hmac_secret_prev, "");
    set_ok(&c, "hmac_secret_prev", "p2");
    CHECK_STR(c.hmac_secret_prev_file, "");

    /* rotation: a second secret needs its own id and the same length */
    sk_config_defaults(&c);
    set_ok(&c, "auth", "hmac");
    set_ok(&c, "hmac_secret", "current-secret-0001");
    set_ok(&c, "hmac_key_id", "2");
    CHECK_EQ(sk_config_validate(&c, err, sizeof err), 0);
    set_ok(&c, "hmac_secret_prev", "short");
    CHECK_EQ(sk_config_validate(&c, err, sizeof err), SK_EINVAL);
    CHECK_MSG(strstr(err, "hmac_secret_prev") && strstr(err, "16"), "%s", err);
    set_ok(&c, "hmac_secret_prev", "previous-secret-01");
    set_ok(&c, "hmac_key_id_prev", "2");
    CHECK_EQ(sk_config_validate(&c, err, sizeof err), SK_EINVAL);
    CHECK_MSG(strstr(err, "differ") != NULL, "%s", err);
    set_ok(&c, "hmac_key_id_prev", "");
    CHECK_EQ(sk_config_validate(&c, err, sizeof err), 0);
    set_ok(&c, "hmac_secret_prev", "");
    set_ok(&c, "hmac_key_id_prev", "1");
    CHECK_EQ(sk_config_validate(&c, err, sizeof err), SK_EINVAL);
    CHECK_MSG(strstr(err, "hmac_secret_prev is not") != NULL, "%s", err);
}

SK_TEST(rate_limit_prefix_keeps_ipv4_and_the_ipv6_64)
{
    struct sk_ip ip;
    char t[SK_IP_TEXT];
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"203.0.113.9", "203.0.113.9"},
        {"::ffff:203.0.113.9", "203.0.113.9"},
        {"2001:db8:1:2:aaaa:bbbb:cccc:dddd", "2001:db8:1:2::"},
        {"2001:db8:1:2::1", "2001:db8:1:2::"},
        {"2001:db8:1:3::1", "2001:db8:1:3::"},
        {"::1", "::"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK(sk_ip_parse(cases[i].in, strlen(cases[i].in), &ip) == 0);
        sk_ip_rate_prefix(&ip);
        sk_ip_format(&ip, t);
        CHECK_STR(t, cases[i].out);
    }
}

SK_TEST(config_db_poll_wait_from_every_source)
{
    struct sk_config c;
    sk_config_defaults(&c);
    CHECK_EQ(c.db_poll_wait_ms, 100);
    set_ok(&c, "db_poll_wait_ms", "1");
    CHECK_EQ(c.db_poll_wait_ms, 1);
    set_ok(&c, "db_poll_wait_ms", "600000");
    CHECK_EQ(c.db_poll_wait_ms, 600000);
    set_bad("db_poll_wait_ms", "0", "milliseconds");
    set_bad("db_poll_wait_ms", "600001", "milliseconds");
    set_bad("db_poll_wait_ms", "1e3", NULL);
    char err[256];
    CHECK_EQ(sk_config_set_flag(&c, "db-poll-wait-ms", "250", err, sizeof err), 0);
    CHECK_EQ(c.db_poll_wait_ms, 250);
    CHECK_EQ(file(&c, "db_poll_wait_ms = 40\n", err, sizeof err), 0);
    CHECK_EQ(c.db_poll_wait_ms, 40);
    char *env[] = {"SECKILL_DB_POLL_WAIT_MS=70", NULL};
    CHECK_EQ(sk_config_apply_env(&c, env, err, sizeof err), 0);
    CHECK_EQ(c.db_poll_wait_ms, 70);
}

SK_TEST(config_db_pool_timeout_and_queue_cap_from_every_source)
{
    struct sk_config c;
    sk_config_defaults(&c);
    CHECK_EQ(c.db_pool, 2);
    CHECK_EQ(c.db_timeout_ms, 1000);
    CHECK_EQ(c.db_queue_max, 1024);
    set_ok(&c, "db_pool", "64");
    CHECK_EQ(c.db_pool, 64);
    set_ok(&c, "db_timeout_ms", "600000");
    CHECK_EQ(c.db_timeout_ms, 600000);
    set_ok(&c, "db_queue_max", "1");
    CHECK_EQ(c.db_queue_max, 1);
    set_bad("db_pool", "0", "between 1 and 64");
    set_bad("db_pool", "65", "between 1 and 64");
    set_bad("db_timeout_ms", "0", "milliseconds");
    set_bad("db_timeout_ms", "600001", "milliseconds");
    set_bad("db_queue_max", "0", "between 1 and 1000000");
    set_bad("db_queue_max", "1000001", NULL);
    set_bad("db_queue_max", "-5", NULL);
    char err[256];
    CHECK_EQ(sk_config_set_flag(&c, "db-pool", "3", err, sizeof err), 0);
    CHECK_EQ(c.db_pool, 3);
    CHECK_EQ(sk_config_set_flag(&c, "db-timeout-ms", "250", err, sizeof err), 0);
    CHECK_EQ(c.db_timeout_ms, 250);
    CHECK_EQ(sk_config_set_flag(&c, "db-queue-max", "77", err, sizeof err), 0);
    CHECK_EQ(c.db_queue_max, 77);
    CHECK_EQ(
        file(&c, "db_pool = 5\ndb-timeout-ms = 40 # short\ndb_queue_max = 9\n", err, sizeof err),
        0);
    CHECK_EQ(c.db_pool, 5);
    CHECK_EQ(c.db_timeout_ms, 40);
    CHECK_EQ(c.db_queue_max, 9);
    char *env[] = {"SECKILL_DB_POOL=7", "SECKILL_DB_TIMEOUT_MS=70", "SECKILL_DB_QUEUE_MAX=700",
                   NULL};
    CHECK_EQ(sk_config_apply_env(&c, env, err, sizeof err), 0);
    CHECK_EQ(c.db_pool, 7);
    CHECK_EQ(c.db_timeout_ms, 70);
    CHECK_EQ(c.db_queue_max, 700);
    char *bad_env[] = {"SECKILL_DB_POOL=100", NULL};
    CHECK_EQ(sk_config_apply_env(&c, bad_env, err, sizeof err), SK_EINVAL);
    CHECK_MSG(strstr(err, "SECKILL_DB_POOL") != NULL, "%s", err);
    CHECK_EQ(c.db_pool, 7);
}
