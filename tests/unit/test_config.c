/* test_config.c - `seckill serve` options from flags, file text and an
 * environment array (no I/O). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "http/config.h"
#include "support/harness.h"

/* The fields the tables below read back by name: where each one is and how
 * it is stored. The role is read as its enumerator; "auth_name" and
 * "role_name" are what sk_config_auth_name and sk_config_role_name say. */
enum field_kind {
    FIELD_TEXT,
    FIELD_INT,
    FIELD_LLONG,
    FIELD_ROLE,
    FIELD_AUTH_NAME,
    FIELD_ROLE_NAME
};
static const struct field {
    const char *name;
    size_t at;
    enum field_kind kind;
} fields[] = {
    {"listen", offsetof(struct sk_config, listen), FIELD_TEXT},
    {"redis", offsetof(struct sk_config, redis), FIELD_TEXT},
    {"db", offsetof(struct sk_config, db), FIELD_TEXT},
    {"processes", offsetof(struct sk_config, processes), FIELD_INT},
    {"admin_token", offsetof(struct sk_config, admin_token), FIELD_TEXT},
    {"auth_hmac", offsetof(struct sk_config, auth_hmac), FIELD_INT},
    {"hmac_secret", offsetof(struct sk_config, hmac_secret), FIELD_TEXT},
    {"role", offsetof(struct sk_config, role), FIELD_ROLE},
    {"log_level", offsetof(struct sk_config, log_level), FIELD_TEXT},
    {"max_body", offsetof(struct sk_config, max_body), FIELD_LLONG},
    {"redis_timeout_ms", offsetof(struct sk_config, redis_timeout_ms), FIELD_INT},
    {"ops_listen", offsetof(struct sk_config, ops_listen), FIELD_TEXT},
    {"io_timeout_s", offsetof(struct sk_config, io_timeout_s), FIELD_INT},
    {"max_connections", offsetof(struct sk_config, max_connections), FIELD_LLONG},
    {"admin_token_file", offsetof(struct sk_config, admin_token_file), FIELD_TEXT},
    {"hmac_secret_file", offsetof(struct sk_config, hmac_secret_file), FIELD_TEXT},
    {"hmac_max_ttl_s", offsetof(struct sk_config, hmac_max_ttl_s), FIELD_LLONG},
    {"hmac_key_id", offsetof(struct sk_config, hmac_key_id), FIELD_TEXT},
    {"hmac_secret_prev", offsetof(struct sk_config, hmac_secret_prev), FIELD_TEXT},
    {"hmac_secret_prev_file", offsetof(struct sk_config, hmac_secret_prev_file), FIELD_TEXT},
    {"sync_replicas", offsetof(struct sk_config, sync_replicas), FIELD_INT},
    {"sync_timeout_ms", offsetof(struct sk_config, sync_timeout_ms), FIELD_INT},
    {"redis_functions", offsetof(struct sk_config, redis_functions), FIELD_INT},
    {"db_pool", offsetof(struct sk_config, db_pool), FIELD_INT},
    {"db_timeout_ms", offsetof(struct sk_config, db_timeout_ms), FIELD_INT},
    {"db_queue_max", offsetof(struct sk_config, db_queue_max), FIELD_INT},
    {"db_poll_wait_ms", offsetof(struct sk_config, db_poll_wait_ms), FIELD_INT},
    {"poll_rate_max", offsetof(struct sk_config, poll_rate_max), FIELD_LLONG},
    {"batches_in_flight", offsetof(struct sk_config, batches_in_flight), FIELD_INT},
    {"challenge_secret", offsetof(struct sk_config, challenge_secret), FIELD_TEXT},
    {"challenge_ttl_s", offsetof(struct sk_config, challenge_ttl_s), FIELD_INT},
    {"captcha_provider", offsetof(struct sk_config, captcha_provider), FIELD_TEXT},
    {"captcha_site_key", offsetof(struct sk_config, captcha_site_key), FIELD_TEXT},
    {"captcha_secret", offsetof(struct sk_config, captcha_secret), FIELD_TEXT},
    {"captcha_verify_url", offsetof(struct sk_config, captcha_verify_url), FIELD_TEXT},
    {"captcha_script_url", offsetof(struct sk_config, captcha_script_url), FIELD_TEXT},
    {"captcha_timeout_ms", offsetof(struct sk_config, captcha_timeout_ms), FIELD_INT},
    {"captcha_fail_open", offsetof(struct sk_config, captcha_fail_open), FIELD_INT},
    {"captcha_hostname", offsetof(struct sk_config, captcha_hostname), FIELD_TEXT},
    {"admit_target_ms", offsetof(struct sk_config, admit_target_ms), FIELD_INT},
    {"jwt_max_ttl_s", offsetof(struct sk_config, jwt_max_ttl_s), FIELD_LLONG},
    {"frame_ancestors", offsetof(struct sk_config, frame_ancestors), FIELD_TEXT},
    {"max_request_bytes", offsetof(struct sk_config, max_request_bytes), FIELD_LLONG},
    {"auth_name", 0, FIELD_AUTH_NAME},
    {"role_name", 0, FIELD_ROLE_NAME},
};

/* Field `name` of c as text into out (cap bytes): strings as they are,
 * numbers in decimal. Returns out; an unknown name fails the test. */
static const char *field_text(const struct sk_config *c, const char *name, char *out, size_t cap)
{
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        if (strcmp(fields[i].name, name) != 0) continue;
        const char *p = (const char *)c + fields[i].at;
        int n;
        long long ll;
        switch (fields[i].kind) {
        case FIELD_TEXT: snprintf(out, cap, "%s", p); break;
        case FIELD_INT:
            memcpy(&n, p, sizeof n);
            snprintf(out, cap, "%d", n);
            break;
        case FIELD_LLONG:
            memcpy(&ll, p, sizeof ll);
            snprintf(out, cap, "%lld", ll);
            break;
        case FIELD_ROLE:
            snprintf(out, cap, "%s",
                     c->role == SK_ROLE_ALL      ? "all"
                     : c->role == SK_ROLE_API    ? "api"
                     : c->role == SK_ROLE_WORKER ? "worker"
                                                 : "(no such role)");
            break;
        case FIELD_AUTH_NAME: snprintf(out, cap, "%s", sk_config_auth_name(c)); break;
        case FIELD_ROLE_NAME: snprintf(out, cap, "%s", sk_config_role_name(c->role)); break;
        }
        return out;
    }
    sk_th_fail(__FILE__, __LINE__, "the test reads no field %s", name);
}

/* A field and the text it should read. */
struct holds {
    const char *field, *text;
};

static void check_holds(const struct sk_config *c, const struct holds *t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char got[600];
        CHECK_MSG(strcmp(field_text(c, t[i].field, got, sizeof got), t[i].text) == 0,
                  "%s is \"%s\", not \"%s\"", t[i].field, got, t[i].text);
    }
}

static void set_ok(struct sk_config *c, const char *k, const char *v)
{
    char err[256] = "";
    CHECK_MSG(sk_config_set(c, k, v, err, sizeof err) == 0, "%s=%s refused: %s", k, v, err);
}

/* key = value is accepted, and then `field` reads `text`. */
struct accepted {
    const char *key, *value, *field, *text;
};

/* The rows in order, each on c as the rows before it left it. */
static void set_each_ok(struct sk_config *c, const struct accepted *t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        set_ok(c, t[i].key, t[i].value);
        char got[600];
        CHECK_MSG(strcmp(field_text(c, t[i].field, got, sizeof got), t[i].text) == 0,
                  "after %s=%s, %s is \"%s\", not \"%s\"", t[i].key, t[i].value, t[i].field, got,
                  t[i].text);
    }
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

/* key = value is refused, on defaults, with a reason holding `why`. */
struct refused {
    const char *key, *value, *why;
};

static void set_each_bad(const struct refused *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        set_bad(t[i].key, t[i].value, t[i].why);
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
    static const struct holds want[] = {
        {"listen", "127.0.0.1:8080"},
        {"redis", "redis://127.0.0.1:6379"},
        {"db", "sqlite:seckill.db"},
        {"processes", "1"},
        {"admin_token", ""},
        {"auth_hmac", "0"},
        {"auth_name", "trusted-header"},
        {"hmac_secret", ""},
        {"role", "all"},
        {"role_name", "all"},
        {"log_level", "info"},
        {"max_body", "65536"},
        {"redis_timeout_ms", "1000"},
        {"sync_replicas", "0"},
        {"sync_timeout_ms", "100"},
        {"redis_functions", "1"},
        {"challenge_secret", ""},
        {"challenge_ttl_s", "120"},
        {"captcha_provider", ""},
        {"captcha_timeout_ms", "3000"},
        {"captcha_fail_open", "0"},
    };
    struct sk_config c;
    memset(&c, 0x55, sizeof c);
    sk_config_defaults(&c);
    check_holds(&c, want, sizeof want / sizeof want[0]);
    char err[128];
    CHECK_EQ(sk_config_validate(&c, err, sizeof err), 0);
}

SK_TEST(config_set_accepts_valid_values_for_every_key)
{
    static const struct accepted ok[] = {
        {"listen", "0.0.0.0:80", "listen", "0.0.0.0:80"},
        {"listen", "[::1]:65535", "listen", "[::1]:65535"},
        {"listen", "api-1.internal:1", "listen", "api-1.internal:1"},
        {"redis", "redis://:pw@10.0.0.5:7000/2", "redis", "redis://:pw@10.0.0.5:7000/2"},
        {"redis", "redis+cluster://10.0.0.1:7000,10.0.0.2:7000", "redis",
         "redis+cluster://10.0.0.1:7000,10.0.0.2:7000"},
        {"redis", "redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/shop", "redis",
         "redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/shop"},
        {"redis", "redis+unix:///run/redis.sock?db=2", "redis",
         "redis+unix:///run/redis.sock?db=2"},
        {"db", "sqlite:/var/lib/seckill/db.sqlite", "db", "sqlite:/var/lib/seckill/db.sqlite"},
        {"db", "postgres://u:p@db/seckill", "db", "postgres://u:p@db/seckill"},
        {"db", "postgresql://db/seckill", "db", "postgresql://db/seckill"},
        {"processes", "64", "processes", "64"},
        {"admin_token", "Adm1n-T0ken_!@#$%^&*()", "admin_token", "Adm1n-T0ken_!@#$%^&*()"},
        /* an empty token clears it: admin routes closed */
        {"admin_token", "", "admin_token", ""},
        {"auth", "hmac", "auth_hmac", "1"},
        {"auth", "hmac", "auth_name", "hmac"},
        {"auth", "trusted-header", "auth_hmac", "0"},
        {"hmac_secret", "a secret with spaces", "hmac_secret", "a secret with spaces"},
        {"role", "worker", "role", "worker"},
        {"role", "api", "role_name", "api"},
        {"log_level", "debug", "log_level", "debug"},
        {"max_body", "1048576", "max_body", "1048576"},
        {"redis_timeout_ms", "250", "redis_timeout_ms", "250"},
        {"sync_replicas", "2", "sync_replicas", "2"},
        {"sync_timeout_ms", "40", "sync_timeout_ms", "40"},
        {"redis_functions", "off", "redis_functions", "0"},
        {"redis_functions", "on", "redis_functions", "1"},
        {"challenge_secret", "0123456789abcdef0123", "challenge_secret", "0123456789abcdef0123"},
        {"challenge_ttl_s", "10", "challenge_ttl_s", "10"},
        {"captcha_provider", "hcaptcha", "captcha_provider", "hcaptcha"},
        {"captcha_provider", "", "captcha_provider", ""},
        {"captcha_site_key", "0x4AAAAAAA_b-9", "captcha_site_key", "0x4AAAAAAA_b-9"},
        {"captcha_secret", "s3cret with spaces", "captcha_secret", "s3cret with spaces"},
        {"captcha_verify_url", "http://127.0.0.1:9/siteverify", "captcha_verify_url",
         "http://127.0.0.1:9/siteverify"},
        {"captcha_verify_url", "", "captcha_verify_url", ""},
        {"captcha_script_url", "https://cdn.shop.example/ts/api.js?render=explicit",
         "captcha_script_url", "https://cdn.shop.example/ts/api.js?render=explicit"},
        {"captcha_script_url", "http://127.0.0.1:8123/api.js", "captcha_script_url",
         "http://127.0.0.1:8123/api.js"},
        {"captcha_script_url", "http://[::1]:8123/api.js", "captcha_script_url",
         "http://[::1]:8123/api.js"},
        {"captcha_script_url", "", "captcha_script_url", ""},
        {"captcha_timeout_ms", "100", "captcha_timeout_ms", "100"},
        {"captcha_fail", "open", "captcha_fail_open", "1"},
        {"captcha_fail", "closed", "captcha_fail_open", "0"},
        {"captcha_hostname", "shop.example", "captcha_hostname", "shop.example"},
    };
    struct sk_config c;
    sk_config_defaults(&c);
    set_each_ok(&c, ok, sizeof ok / sizeof ok[0]);
}

SK_TEST(config_set_rejects_bad_values_and_names_the_key)
{
    static const struct refused bad[] = {
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
        {"redis", "redis+cluster://", "seeds"},
        {"redis", "redis+sentinel://h:26379", "MASTER_NAME"},
        {"redis", "redis+unix://relative", "path"},
        {"sync_replicas", "17", "between 0 (off) and 16"},
        {"sync_replicas", "-1", "between 0 (off) and 16"},
        {"sync_timeout_ms", "0", "between 1 and 60000"},
        {"sync_timeout_ms", "60001", "between 1 and 60000"},
        {"redis_functions", "yes", "on or off"},
        {"redis", "", "redis://"},
        {"db", "sqlite:", "sqlite:PATH"},
        {"db", "mongodb://x", "sqlite:PATH"},
        {"db", "postgres://", "sqlite:PATH"},
        {"db", "sqlite:a\nb", "sqlite:PATH"},
        {"processes", "0", "between 1 and 64"},
        {"processes", "65", "1 and 64"},
        {"processes", "-1", "between 1 and 64"},
        {"processes", "1.5", "between 1 and 64"},
        {"processes", " 2", "between 1 and 64"},
        {"processes", "", "between 1 and 64"},
        {"processes", "99999999999999999999999", "between 1 and 64"},
        {"admin_token", "has space", "printable"},
        {"admin_token", "tab\there", "printable"},
        {"admin_token", "caf\xc3\xa9", "printable"},
        {"auth", "HMAC", "trusted-header, hmac or jwt"},
        {"auth", "", "trusted-header, hmac or jwt"},
        {"role", "both", "all, api or worker"},
        {"log_level", "loud", "debug"},
        {"max_body", "1023", "1024"},
        {"max_body", "67108865", "between 1024 and 67108864"},
        {"redis_timeout_ms", "0", "between 1 and 600000"},
        {"redis_timeout_ms", "600001", "between 1 and 600000"},
        {"challenge_ttl_s", "9", "between 10 and 3600"},
        {"challenge_ttl_s", "3601", "between 10 and 3600"},
        {"captcha_provider", "recaptcha3", "turnstile, hcaptcha or recaptcha"},
        {"captcha_site_key", "has space", "letters, digits"},
        {"captcha_site_key", "quote\"", "letters, digits"},
        {"captcha_verify_url", "ftp://x/siteverify", "http:// or https://"},
        {"captcha_verify_url", "https://", "http:// or https://"},
        {"captcha_verify_url", "https://a b", "http:// or https://"},
        {"captcha_script_url", "http://cdn.shop.example/api.js", "http:// only on a loopback"},
        {"captcha_script_url", "http://127.0.0.1.evil.example/api.js",
         "http:// only on a loopback"},
        {"captcha_script_url", "ftp://cdn.shop.example/api.js", "https://"},
        {"captcha_script_url", "https://cdn.shop.example/a.js; script-src *", "character"},
        {"captcha_script_url", "https://cdn.shop.example/\"a.js", "character"},
        {"captcha_script_url", "https:///api.js", "scheme://host"},
        {"captcha_script_url", "https://cdn.shop.example:99999x/api.js", "scheme://host"},
        {"captcha_timeout_ms", "99", "between 100 and 60000"},
        {"captcha_fail", "maybe", "open or closed"},
        {"captcha_hostname", "a/b", "host name"},
        {"captcha_secret", "a\nb", "control"},
        {"nonsense", "1", "unknown option"},
        {"LISTEN", "h:1", "unknown option"},
    };
    set_each_bad(bad, sizeof bad / sizeof bad[0]);
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
                       "admin_token = \"tok#en-0123456789\"  # quoted: # kept\n"
                       "hmac_secret = 'a \\n literal # too'\n"
                       "db = sqlite:/tmp/a#b.db\n"
                       "redis-timeout-ms\t=\t200\n"
                       "auth = hmac\n"
                       "role = api";
    CHECK_MSG(file(&c, text, err, sizeof err) == 0, "%s", err);
    CHECK_STR(c.listen, "0.0.0.0:9000");
    CHECK_EQ(c.processes, 4);
    CHECK_STR(c.admin_token, "tok#en-0123456789");
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

/* A config file's text and the start of the error it gets. */
struct file_error {
    const char *text, *want;
};

SK_TEST(config_file_reports_the_line_number_of_errors)
{
    static const struct file_error cases[] = {
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
/* Applied in the loader's order (cmd/settings.c): file, environment,
 * flags; each overwrites what the one before set. */
SK_TEST(config_precedence_is_flags_over_env_over_file_over_defaults)
{
    struct sk_config c;
    char err[256] = "";
    sk_config_defaults(&c);
    CHECK_EQ(file(&c, "listen = 2.2.2.2:2\nprocesses = 3\nrole = worker\n", err, sizeof err), 0);
    char *env[] = {"SECKILL_LISTEN=1.1.1.1:1", "SECKILL_PROCESSES=2", NULL};
    CHECK_EQ(sk_config_apply_env(&c, env, err, sizeof err), 0);
    CHECK_EQ(sk_config_set_flag(&c, "listen", "3.3.3.3:3", err, sizeof err), 0);
    CHECK_STR(c.listen, "3.3.3.3:3");   /* flag */
    CHECK_EQ(c.processes, 2);           /* env */
    CHECK_EQ(c.role, SK_ROLE_WORKER);   /* file */
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
    static const struct holds defaults[] = {
        {"io_timeout_s", "30"}, {"max_connections", "0"}, {"hmac_max_ttl_s", "86400"},
        {"hmac_key_id", ""},    {"admin_token_file", ""},
    };
    struct sk_config c;
    char err[256];
    sk_config_defaults(&c);
    check_holds(&c, defaults, sizeof defaults / sizeof defaults[0]);
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

/* An address and its rate-limit prefix as text. */
struct prefix_case {
    const char *in, *out;
};

SK_TEST(rate_limit_prefix_keeps_ipv4_and_the_ipv6_64)
{
    struct sk_ip ip;
    char t[SK_IP_TEXT];
    static const struct prefix_case cases[] = {
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

/* A numeric key from every source: its default, both bounds accepted,
 * one past each refused (naming the unit when the number itself is
 * one), junk refused, then the flag, the file and the environment. */
struct num_key {
    const char *key, *flag, *env_name, *unit, *junk;
    long long def, lo, hi;
};

static void num_key_from_every_source(const struct num_key *t)
{
    struct sk_config c;
    sk_config_defaults(&c);
    char got[64], want[64], v[64], err[256], line[128], env_kv[128];
#define EXPECT_FIELD(n)                                                                            \
    do {                                                                                           \
        snprintf(want, sizeof want, "%lld", (long long)(n));                                       \
        CHECK_STR(field_text(&c, t->key, got, sizeof got), want);                                  \
    } while (0)
    EXPECT_FIELD(t->def);
    snprintf(v, sizeof v, "%lld", t->lo);
    set_ok(&c, t->key, v);
    EXPECT_FIELD(t->lo);
    snprintf(v, sizeof v, "%lld", t->hi);
    set_ok(&c, t->key, v);
    EXPECT_FIELD(t->hi);
    snprintf(v, sizeof v, "%lld", t->lo - 1);
    set_bad(t->key, v, t->lo - 1 >= 0 ? t->unit : NULL);
    snprintf(v, sizeof v, "%lld", t->hi + 1);
    set_bad(t->key, v, t->unit);
    set_bad(t->key, t->junk, NULL);
    snprintf(v, sizeof v, "%lld", t->lo + 3);
    CHECK_EQ(sk_config_set_flag(&c, t->flag, v, err, sizeof err), 0);
    EXPECT_FIELD(t->lo + 3);
    snprintf(line, sizeof line, "%s = %lld\n", t->key, t->lo + 4);
    CHECK_EQ(file(&c, line, err, sizeof err), 0);
    EXPECT_FIELD(t->lo + 4);
    snprintf(env_kv, sizeof env_kv, "%s=%lld", t->env_name, t->lo + 5);
    char *env[] = {env_kv, NULL};
    CHECK_EQ(sk_config_apply_env(&c, env, err, sizeof err), 0);
    EXPECT_FIELD(t->lo + 5);
#undef EXPECT_FIELD
}

SK_TEST(config_db_poll_wait_from_every_source)
{
    num_key_from_every_source(&(struct num_key){"db_poll_wait_ms", "db-poll-wait-ms",
                                                "SECKILL_DB_POLL_WAIT_MS", "milliseconds", "1e3",
                                                100, 1, 600000});
}

SK_TEST(config_poll_rate_max_from_every_source)
{
    /* 0: no budget */
    num_key_from_every_source(&(struct num_key){"poll_rate_max", "poll-rate-max",
                                                "SECKILL_POLL_RATE_MAX", "polls per second", "2k",
                                                SK_CONFIG_POLL_RATE_MAX, 0, 1000000});
}

SK_TEST(config_batches_in_flight_from_every_source)
{
    /* 0: no window */
    num_key_from_every_source(&(struct num_key){"batches_in_flight", "batches-in-flight",
                                                "SECKILL_BATCHES_IN_FLIGHT", "batches", "two",
                                                SK_CONFIG_BATCHES_IN_FLIGHT, 0, 64});
}

SK_TEST(config_admit_target_from_every_source)
{
    /* 0: off */
    num_key_from_every_source(&(struct num_key){"admit_target_ms", "admit-target-ms",
                                                "SECKILL_ADMIT_TARGET_MS", "milliseconds", "50ms",
                                                SK_CONFIG_ADMIT_TARGET_MS, 0, 60000});
}

SK_TEST(config_db_pool_timeout_and_queue_cap_from_every_source)
{
    struct sk_config c;
    sk_config_defaults(&c);
    CHECK_EQ(c.db_pool, 2);
    CHECK_EQ(c.db_timeout_ms, 1000);
    CHECK_EQ(c.db_queue_max, 1024);
    static const struct accepted ok[] = {
        {"db_pool", "64", "db_pool", "64"},
        {"db_timeout_ms", "600000", "db_timeout_ms", "600000"},
        {"db_queue_max", "1", "db_queue_max", "1"},
    };
    set_each_ok(&c, ok, sizeof ok / sizeof ok[0]);
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

SK_TEST(config_jwt_max_ttl_s_from_every_source)
{
    num_key_from_every_source(&(struct num_key){"jwt_max_ttl_s", "jwt-max-ttl-s",
                                                "SECKILL_JWT_MAX_TTL_S", "seconds", "1d", 86400, 1,
                                                31536000});
}

SK_TEST(config_validate_requires_a_jwt_audience_and_an_admin_token_of_16_bytes)
{
    struct sk_config c;
    char err[256];
    sk_config_defaults(&c);
    set_ok(&c, "auth", "jwt");
    set_ok(&c, "jwks_file", "/etc/seckill/jwks.json");
    /* a token made for another application of the same provider would buy */
    CHECK_EQ(sk_config_validate(&c, err, sizeof err), SK_EINVAL);
    CHECK_MSG(strstr(err, "jwt_audience") && strstr(err, "'*'"), "%s", err);
    set_ok(&c, "jwt_audience", "*"); /* any, said at start */
    CHECK_EQ(sk_config_validate(&c, err, sizeof err), 0);
    set_ok(&c, "jwt_audience", "seckill");
    CHECK_EQ(sk_config_validate(&c, err, sizeof err), 0);
    /* the admin token: as long as an HMAC secret, never echoed */
    set_ok(&c, "admin_token", "t0k");
    CHECK_EQ(sk_config_validate(&c, err, sizeof err), SK_EINVAL);
    CHECK_MSG(strstr(err, "admin_token must be at least 16 bytes") && !strstr(err, "t0k"), "%s",
              err);
    set_ok(&c, "admin_token", "0123456789abcde");
    CHECK_EQ(sk_config_validate(&c, err, sizeof err), SK_EINVAL);
    set_ok(&c, "admin_token", "0123456789abcdef");
    CHECK_EQ(sk_config_validate(&c, err, sizeof err), 0);
    set_ok(&c, "admin_token", ""); /* none: the admin routes answer 401 */
    CHECK_EQ(sk_config_validate(&c, err, sizeof err), 0);
}

SK_TEST(config_frame_ancestors_takes_csp_sources_only)
{
    struct sk_config c;
    sk_config_defaults(&c);
    CHECK_STR(c.frame_ancestors, "'self'");
    static const struct accepted ok[] = {
        {"frame_ancestors", "'none'", "frame_ancestors", "'none'"},
        {"frame_ancestors", "'self' https://shop.example", "frame_ancestors",
         "'self' https://shop.example"},
        {"frame_ancestors", "https://*.shop.example:8443 http://localhost:3000", "frame_ancestors",
         "https://*.shop.example:8443 http://localhost:3000"},
    };
    set_each_ok(&c, ok, sizeof ok / sizeof ok[0]);
    /* nothing that ends the directive, the header, or adds another one */
    set_bad("frame_ancestors", "", "at least one source");
    set_bad("frame_ancestors", "'none' 'self'", "'none' alone");
    set_bad("frame_ancestors", "'self'; script-src *", "sources");
    set_bad("frame_ancestors", "https://a.example,https://b.example", "sources");
    set_bad("frame_ancestors", "'self'\r\nSet-Cookie: x=1", "sources");
    set_bad("frame_ancestors", "'unsafe-inline'", "sources");
    set_bad("frame_ancestors", "\"https://a.example\"", "sources");
}

SK_TEST(config_max_request_bytes_bounds_and_whole_requests)
{
    struct sk_config c;
    char err[256];
    sk_config_defaults(&c);
    CHECK_EQ(c.max_request_bytes, 0);
    set_ok(&c, "max_request_bytes", "1048576");
    CHECK_EQ(sk_config_validate(&c, err, sizeof err), 0);
    set_ok(&c, "max_request_bytes", "1000");
    CHECK_EQ(sk_config_validate(&c, err, sizeof err), SK_EINVAL);
    CHECK_MSG(strstr(err, "1048576"), "%s", err);
    /* two requests of the largest body must fit */
    set_ok(&c, "max_body", "1048576");
    set_ok(&c, "max_request_bytes", "2097152");
    CHECK_EQ(sk_config_validate(&c, err, sizeof err), SK_EINVAL);
    CHECK_MSG(strstr(err, "twice max_body"), "%s", err);
    set_ok(&c, "max_request_bytes", "2129920");
    CHECK_EQ(sk_config_validate(&c, err, sizeof err), 0);
    set_bad("max_request_bytes", "1099511627777", "bytes");
    set_bad("max_request_bytes", "-1", NULL);
    set_bad("max_request_bytes", "1M", NULL);
}

SK_TEST(config_secret_held_names_each_kind_of_secret)
{
    static const struct {
        const char *text, *held;
    } cases[] = {
        {"listen = 0.0.0.0:8080\ndb = sqlite:/var/lib/seckill/seckill.db\n", NULL},
        {"admin_token_file = /etc/seckill/admin_token\n", NULL},
        {"admin_token = 0123456789abcdef\n", "admin_token"},
        {"hmac_secret = 0123456789abcdef\n", "hmac_secret"},
        {"hmac_secret_prev = 0123456789abcdef\n", "hmac_secret_prev"},
        {"challenge_secret = 0123456789abcdef\n", "challenge_secret"},
        {"captcha_secret = 0x4AAAsecret\n", "captcha_secret"},
        {"captcha_secret_file = /etc/seckill/captcha\n", NULL},
        {"redis = redis://:s3cret@10.0.0.1:6379\n", "redis password"},
        {"redis = redis://app:s3cret@10.0.0.1:6379/2\n", "redis password"},
        {"redis = redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/mymaster\n", NULL},
        {"db = postgres://app:pw@db.example/shop\n", "db password"},
        {"db = postgres://app@db.example/shop?password=pw\n", "db password"},
        {"db = mysql://app@db.example/shop\n", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct sk_config c;
        char err[256];
        sk_config_defaults(&c);
        CHECK_MSG(file(&c, cases[i].text, err, sizeof err) == 0, "%s: %s", cases[i].text, err);
        const char *held = sk_config_secret_held(&c);
        CHECK_MSG(cases[i].held ? held && !strcmp(held, cases[i].held) : held == NULL, "%s: %s",
                  cases[i].text, held ? held : "(none)");
    }
}

/* The challenge's key and the CAPTCHA's settings are checked together: a
 * provider needs its keys, keys need a provider, a short key is refused,
 * and no message shows a secret. */
SK_TEST(config_validate_challenge_and_captcha_settings)
{
    struct sk_config c;
    char err[256];
    sk_config_defaults(&c);
    CHECK_EQ(sk_config_set(&c, "challenge_secret", "short-secret", err, sizeof err), 0);
    CHECK_EQ(sk_config_validate(&c, err, sizeof err), SK_EINVAL);
    CHECK_MSG(strstr(err, "challenge_secret must be at least 16") && !strstr(err, "short-secret"),
              "%s", err);
    sk_config_defaults(&c);
    CHECK_EQ(sk_config_set(&c, "captcha_provider", "turnstile", err, sizeof err), 0);
    CHECK_EQ(sk_config_validate(&c, err, sizeof err), SK_EINVAL);
    CHECK_MSG(strstr(err, "captcha_site_key and captcha_secret"), "%s", err);
    CHECK_EQ(sk_config_set(&c, "captcha_site_key", "site-1", err, sizeof err), 0);
    CHECK_EQ(sk_config_set(&c, "captcha_secret", "topsecret-captcha", err, sizeof err), 0);
    CHECK_EQ(sk_config_validate(&c, err, sizeof err), 0);
    sk_config_defaults(&c);
    CHECK_EQ(sk_config_set(&c, "captcha_secret", "topsecret-captcha", err, sizeof err), 0);
    CHECK_EQ(sk_config_validate(&c, err, sizeof err), SK_EINVAL);
    CHECK_MSG(strstr(err, "need captcha_provider") && !strstr(err, "topsecret"), "%s", err);
    /* the later source wins between a secret and its file */
    sk_config_defaults(&c);
    CHECK_EQ(sk_config_set(&c, "captcha_secret", "x", err, sizeof err), 0);
    CHECK_EQ(sk_config_set(&c, "captcha_secret_file", "/etc/seckill/captcha", err, sizeof err), 0);
    CHECK_STR(c.captcha_secret, "");
    CHECK_EQ(sk_config_set(&c, "challenge_secret_file", "/etc/seckill/ch", err, sizeof err), 0);
    CHECK_EQ(sk_config_set(&c, "challenge_secret", "0123456789abcdef", err, sizeof err), 0);
    CHECK_STR(c.challenge_secret_file, "");
}
