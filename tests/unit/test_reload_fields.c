/* test_reload_fields.c - the reload's table of settings (http/reload.h)
 * covers every byte of struct sk_config, names only real options, and
 * tells live from fixed ones the way the documentation says. */
#include <stdlib.h>
#include <string.h>

#include "http/config.h"
#include "http/reload.h"
#include "support/harness.h"

static int by_off(const void *a, const void *b)
{
    const struct sk_reload_field *x = a, *y = b;
    return (x->off > y->off) - (x->off < y->off);
}

SK_TEST(reload_fields_cover_the_whole_config_struct)
{
    struct sk_reload_field f[128];
    CHECK(sk_reload_nfields <= 128);
    memcpy(f, sk_reload_fields, sizeof f[0] * sk_reload_nfields);
    qsort(f, sk_reload_nfields, sizeof f[0], by_off);
    size_t end = 0;
    for (size_t i = 0; i < sk_reload_nfields; i++) {
        /* a gap wider than padding is a field the table forgot */
        CHECK_MSG(f[i].off >= end && f[i].off - end < 8, "a gap before %s (offset %zu, end %zu)",
                  f[i].key, f[i].off, end);
        end = f[i].off + f[i].len;
    }
    CHECK_MSG(sizeof(struct sk_config) - end < 8, "fields after %s are missing",
              f[sk_reload_nfields - 1].key);
}

SK_TEST(reload_fields_name_real_options_and_the_documented_live_ones)
{
    struct sk_config c;
    char err[256];
    for (size_t i = 0; i < sk_reload_nfields; i++) {
        sk_config_defaults(&c);
        sk_config_set(&c, sk_reload_fields[i].key, "\x01", err, sizeof err);
        CHECK_MSG(strncmp(err, "unknown option", 14) != 0, "%s: %s", sk_reload_fields[i].key, err);
    }
    static const char *const live[] = {"log_level",       "rate_per_user_per_s", "rate_burst",
                                       "trusted_proxies", "admin_token",         "hmac_secret",
                                       "jwks_file",       "max_connections"};
    static const char *const fixed[] = {"listen", "redis", "db", "processes", "auth", "role"};
    for (size_t i = 0; i < sk_reload_nfields; i++) {
        for (size_t j = 0; j < sizeof live / sizeof live[0]; j++)
            if (!strcmp(sk_reload_fields[i].key, live[j])) CHECK(sk_reload_fields[i].live);
        for (size_t j = 0; j < sizeof fixed / sizeof fixed[0]; j++)
            if (!strcmp(sk_reload_fields[i].key, fixed[j])) CHECK(!sk_reload_fields[i].live);
    }
    /* the diff names both kinds, never a value */
    struct sk_config a, b;
    sk_config_defaults(&a);
    sk_config_defaults(&b);
    CHECK_EQ(sk_config_set(&b, "admin_token", "sekrit-value", err, sizeof err), 0);
    CHECK_EQ(sk_config_set(&b, "listen", "127.0.0.1:9999", err, sizeof err), 0);
    char l[512], x[512];
    CHECK_EQ(sk_reload_diff(&a, &b, 0, l, x, sizeof l), 2);
    CHECK_STR(l, "admin_token");
    CHECK_STR(x, "listen");
    sk_reload_copy_live(&a, &b);
    CHECK_STR(a.admin_token, "sekrit-value");
    CHECK_STR(a.listen, "127.0.0.1:8080");
}
