/* fuzz_config.c - `seckill serve` options (http/config.h) from any bytes:
 * as a config file, as SECKILL_* environment entries and as a flag. */
#include <string.h>

#include "core/error.h"
#include "fuzz.h"
#include "http/config.h"

static void well_formed(const struct sk_config *c)
{
    FUZZ_CHECK(memchr(c->listen, 0, sizeof c->listen) && memchr(c->redis, 0, sizeof c->redis) &&
               memchr(c->db, 0, sizeof c->db) && memchr(c->admin_token, 0, sizeof c->admin_token) &&
               memchr(c->hmac_secret, 0, sizeof c->hmac_secret) &&
               memchr(c->hmac_key_id, 0, sizeof c->hmac_key_id) &&
               memchr(c->admin_token_file, 0, sizeof c->admin_token_file));
    FUZZ_CHECK(c->processes >= 1 && c->processes <= 64);
    FUZZ_CHECK(c->io_timeout_s >= 1 && c->io_timeout_s <= 86400);
    FUZZ_CHECK(c->max_connections >= 0 && c->hmac_max_ttl_s >= 1);
    FUZZ_CHECK(c->n_trusted_proxies >= 0 && c->n_trusted_proxies <= SK_CONFIG_PROXIES_MAX);
    for (int i = 0; i < c->n_trusted_proxies; i++)
        FUZZ_CHECK(c->trusted_proxies[i].bits >= 0 &&
                   c->trusted_proxies[i].bits <= (c->trusted_proxies[i].ip.v6 ? 128 : 32));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    struct sk_config c;
    sk_config_defaults(&c);
    char *buf = fuzz_copy(data, size);
    int rc = sk_config_parse_file(&c, buf, size, err, sizeof err);
    FUZZ_CHECK(rc == 0 || (rc == SK_EINVAL && strncmp(err, "line ", 5) == 0));
    well_formed(&c);
    rc = sk_config_validate(&c, err, sizeof err);
    FUZZ_CHECK(rc == 0 || (rc == SK_EINVAL && err[0]));

    /* NUL-separated entries as an environment, each SECKILL_-prefixed */
    char *env_text = fuzz_string(data, size);
    char *envp[17];
    char entries[16][300];
    int ne = 0;
    for (char *p = env_text; p < env_text + size && ne < 16; p += strlen(p) + 1) {
        snprintf(entries[ne], sizeof entries[ne], "SECKILL_%s", p);
        envp[ne] = entries[ne];
        ne++;
    }
    envp[ne] = NULL;
    rc = sk_config_apply_env(&c, envp, err, sizeof err);
    FUZZ_CHECK(rc == 0 || (rc == SK_EINVAL && err[0]));
    well_formed(&c);

    /* "flag=value" */
    char *eq = strchr(env_text, '=');
    if (eq) {
        *eq = 0;
        rc = sk_config_set_flag(&c, env_text, eq + 1, err, sizeof err);
        FUZZ_CHECK(rc == 0 || (rc == SK_EINVAL && err[0]));
        well_formed(&c);
    }
    struct sk_ip ip;
    if (sk_ip_parse(buf, size, &ip) == 0) {
        char t[SK_IP_TEXT];
        sk_ip_rate_prefix(&ip);
        sk_ip_format(&ip, t);
        FUZZ_CHECK(t[0] != 0);
    }
    free(env_text);
    free(buf);
    return 0;
}
