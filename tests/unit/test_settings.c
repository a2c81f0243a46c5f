/* test_settings.c - the one table of configuration keys (http/config_keys.def)
 * and the one loader of every command (cmd/settings.h): which file is read,
 * which source wins, what a command does with the keys of others. The
 * loader runs in this process on files of a temporary directory, with an
 * environment and a list of default files of the test's own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cmd/settings.h"
#include "core/cli.h"
#include "core/error.h"
#include "http/config.h"
#include "support/harness.h"

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK_MSG(f != NULL, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
    chmod(path, 0600); /* some hold a secret: others may not read them */
}

/* A loader for cmd with uses, this environment and these default files. */
static struct sk_settings *loader(const char *cmd, unsigned uses, char *const *envp,
                                  const char *const *defaults)
{
    static char *const no_env[] = {"PATH=/usr/bin", NULL};
    struct sk_settings *s = sk_settings_new(cmd, uses, NULL, 0, 0);
    CHECK(s != NULL);
    s->envp = envp ? envp : no_env;
    s->defaults = defaults;
    return s;
}

static int load(struct sk_settings *s, const char *const *args)
{
    char *argv[16];
    int argc = 0;
    argv[argc++] = (char *)s->cmd;
    for (; args && *args; args++)
        argv[argc++] = (char *)*args;
    argv[argc] = NULL;
    return sk_settings_load(s, argc, argv);
}

SK_TEST(config_defaults_pass_their_own_setters_and_every_value_reads_back)
{
    struct sk_config c, d;
    sk_config_defaults(&c);
    char err[256], v[1200], again[1200];
    for (int k = 0; k < SK_CONFIG_NKEYS; k++) {
        const struct sk_config_key *key = &sk_config_keys[k];
        CHECK_MSG(key->name && key->arg && key->arg[0] && key->help && key->help[0] && key->uses,
                  "key %d (%s) lacks its arg, help or commands", k, key->name);
        CHECK_EQ(sk_config_key_find(key->name), k);
        for (int j = 0; j < k; j++)
            CHECK_MSG(strcmp(sk_config_keys[j].name, key->name), "%s twice", key->name);
        d = c;
        CHECK_MSG(sk_config_set_key(&d, k, key->def, err, sizeof err) == 0,
                  "%s: its default '%s' is refused: %s", key->name, key->def, err);
        CHECK_MSG(memcmp(&c, &d, sizeof c) == 0, "%s: defaults differ from its default", key->name);
        if (key->flags & SK_KEY_SECRET) continue;
        /* what is shown is what the setter takes back */
        sk_config_value(&c, k, v, sizeof v);
        CHECK_MSG(sk_config_set_key(&d, k, v, err, sizeof err) == 0, "%s: '%s' refused: %s",
                  key->name, v, err);
        CHECK_STR(sk_config_value(&d, k, again, sizeof again), v);
    }
    /* a value other than the default reads back too */
    CHECK_EQ(sk_config_set(&d, "trusted_proxies", "10.0.0.0/8, ::1,192.168.1.7", err, sizeof err),
             0);
    CHECK_STR(sk_config_value(&d, SK_CK_trusted_proxies, v, sizeof v),
              "10.0.0.0/8,::1,192.168.1.7");
    CHECK_EQ(sk_config_set(&d, "redis", "redis://:hunter2@h:6380/1", err, sizeof err), 0);
    CHECK_STR(sk_config_value(&d, SK_CK_redis, v, sizeof v), "redis://:***@h:6380/1");
    CHECK_EQ(sk_config_set(&d, "admin_token", "a-token-of-some-length", err, sizeof err), 0);
    CHECK_STR(sk_config_value(&d, SK_CK_admin_token, v, sizeof v), "(set)");
    CHECK_STR(sk_config_flag_name(SK_CK_db_poll_wait_ms, v, sizeof v), "--db-poll-wait-ms");
    CHECK_STR(sk_config_env_name(SK_CK_db_poll_wait_ms, v, sizeof v), "SECKILL_DB_POLL_WAIT_MS");
    CHECK_EQ(sk_config_key_find("db-poll-wait-ms"), SK_CK_db_poll_wait_ms);
    CHECK_EQ(sk_config_key_find("db_poll"), SK_ENOTFOUND);
}

SK_TEST(config_the_first_default_file_that_exists_is_read)
{
    char dir[300], missing[400], present[400];
    snprintf(dir, sizeof dir, "%s", sk_th_tmpdir());
    snprintf(missing, sizeof missing, "%s/etc-prefix/seckill.conf", dir);
    snprintf(present, sizeof present, "%s/seckill.conf", dir);
    write_file(present, "# installed\nlog_level = warn\ndb = sqlite:/srv/sale.db\n");
    const char *defaults[] = {missing, present, NULL};
    struct sk_settings *s = loader("reconcile", SK_USE_RECONCILE, NULL, defaults);
    CHECK_EQ(load(s, NULL), 0);
    CHECK_STR(s->file, present);
    CHECK_STR(s->cfg.db, "sqlite:/srv/sale.db");
    CHECK_EQ(s->src[SK_CK_db], SK_SRC_FILE);
    CHECK_EQ(s->line[SK_CK_db], 3);
    CHECK_EQ(s->src[SK_CK_redis], SK_SRC_DEFAULT);
    sk_settings_free(s);
    /* none there: the defaults, and no file */
    const char *none[] = {missing, NULL};
    s = loader("reconcile", SK_USE_RECONCILE, NULL, none);
    CHECK_EQ(load(s, NULL), 0);
    CHECK_STR(s->file, "");
    CHECK_STR(s->cfg.db, "sqlite:seckill.db");
    sk_settings_free(s);
    /* one that is there but cannot be read is an error, never the defaults */
    const char *unreadable[] = {dir, NULL}; /* a directory */
    s = loader("reconcile", SK_USE_RECONCILE, NULL, unreadable);
    CHECK_EQ(load(s, NULL), SK_EXIT_USAGE);
    sk_settings_free(s);
}

SK_TEST(config_flag_beats_environment_beats_file_beats_default)
{
    char named[400], other[400];
    snprintf(named, sizeof named, "%s/named.conf", sk_th_tmpdir());
    snprintf(other, sizeof other, "%s/other.conf", sk_th_tmpdir());
    write_file(named, "log_level = warn\nredis = redis://file:6379\n");
    write_file(other, "log_level = debug\n");
    char env_file[480];
    snprintf(env_file, sizeof env_file, "SECKILL_CONFIG=%s", other);
    char *env[] = {env_file, "SECKILL_LOG_LEVEL=error", "SECKILL_BIN=/x", NULL};
    const char *no_defaults[] = {NULL};
    /* --config beats $SECKILL_CONFIG; the environment beats the file */
    struct sk_settings *s = loader("worker", SK_USE_WORKER, env, no_defaults);
    CHECK_EQ(load(s, (const char *const[]){"--config", named, NULL}), 0);
    CHECK_STR(s->file, named);
    CHECK_STR(s->cfg.log_level, "error");
    CHECK_EQ(s->src[SK_CK_log_level], SK_SRC_ENV);
    CHECK_STR(s->cfg.redis, "redis://file:6379");
    CHECK_EQ(s->src[SK_CK_redis], SK_SRC_FILE);
    char src[600];
    CHECK_STR(sk_settings_source(s, SK_CK_log_level, src, sizeof src), "env SECKILL_LOG_LEVEL");
    sk_settings_free(s);
    /* a flag beats them all, in either spelling */
    s = loader("worker", SK_USE_WORKER, env, no_defaults);
    CHECK_EQ(load(s, (const char *const[]){"--log-level=info", "--redis", "redis://flag:1", NULL}),
             0);
    CHECK_STR(s->file, other); /* $SECKILL_CONFIG when no --config */
    CHECK_STR(s->cfg.log_level, "info");
    CHECK_STR(sk_settings_source(s, SK_CK_log_level, src, sizeof src), "flag --log-level");
    CHECK_STR(s->cfg.redis, "redis://flag:1");
    sk_settings_free(s);
    /* without the environment's value the file's applies */
    char *env2[] = {env_file, NULL};
    s = loader("worker", SK_USE_WORKER, env2, no_defaults);
    CHECK_EQ(load(s, NULL), 0);
    CHECK_STR(s->cfg.log_level, "debug");
    char want[420];
    snprintf(want, sizeof want, "%s:1", other);
    CHECK_STR(sk_settings_source(s, SK_CK_log_level, src, sizeof src), want);
    sk_settings_free(s);
}

SK_TEST(config_keys_of_other_commands_are_ignored_in_a_file_and_refused_as_flags)
{
    char path[400];
    snprintf(path, sizeof path, "%s/serve.conf", sk_th_tmpdir());
    /* serve's keys, even auth = hmac without its secret, do not stop the
     * worker: it does not read them */
    write_file(path, "processes = 4\nadmin_token = x\nauth = hmac\ndb = sqlite:/srv/s.db\n");
    const char *no_defaults[] = {NULL};
    struct sk_settings *s = loader("worker", SK_USE_WORKER, NULL, no_defaults);
    CHECK_EQ(load(s, (const char *const[]){"--config", path, NULL}), 0);
    CHECK_STR(s->cfg.db, "sqlite:/srv/s.db");
    sk_settings_free(s);
    /* the file's mode is every command's check: a worker refuses a file
     * others may read while it holds serve's secret */
    chmod(path, 0644);
    s = loader("worker", SK_USE_WORKER, NULL, no_defaults);
    CHECK_EQ(load(s, (const char *const[]){"--config", path, NULL}), 2);
    sk_settings_free(s);
    chmod(path, 0600);
    /* serve reads them all: the secret is missing */
    s = loader("serve", SK_USE_SERVE, NULL, no_defaults);
    CHECK_EQ(load(s, (const char *const[]){"--config", path, NULL}), SK_EXIT_USAGE);
    sk_settings_free(s);
    /* as a flag, a key the command does not read is refused */
    s = loader("worker", SK_USE_WORKER, NULL, no_defaults);
    CHECK_EQ(load(s, (const char *const[]){"--processes", "2", NULL}), SK_EXIT_USAGE);
    sk_settings_free(s);
    /* a wrong value is wrong for every command, read or not */
    write_file(path, "processes = 0\n");
    s = loader("worker", SK_USE_WORKER, NULL, no_defaults);
    CHECK_EQ(load(s, (const char *const[]){"--config", path, NULL}), SK_EXIT_USAGE);
    sk_settings_free(s);
    /* a command that reads none takes no --config either */
    s = loader("demo", 0, NULL, no_defaults);
    CHECK_EQ(load(s, (const char *const[]){"--config", path, NULL}), SK_EXIT_USAGE);
    sk_settings_free(s);
}

SK_TEST(config_secret_files_are_read_and_shown_as_their_source)
{
    char conf[400], tok[400];
    snprintf(conf, sizeof conf, "%s/s.conf", sk_th_tmpdir());
    snprintf(tok, sizeof tok, "%s/admin.token", sk_th_tmpdir());
    write_file(tok, "a-token-from-a-file-1234\n");
    chmod(tok, 0600);
    char text[600];
    snprintf(text, sizeof text, "admin_token_file = %s\n", tok);
    write_file(conf, text);
    const char *no_defaults[] = {NULL};
    struct sk_settings *s = loader("serve", SK_USE_SERVE, NULL, no_defaults);
    CHECK_EQ(load(s, (const char *const[]){"--config", conf, NULL}), 0);
    CHECK_STR(s->cfg.admin_token, "a-token-from-a-file-1234");
    char src[600];
    CHECK_STR(sk_settings_source(s, SK_CK_admin_token, src, sizeof src), "admin_token_file");
    sk_settings_free(s);
    /* a token from the environment wins over the file: the file is cleared */
    char *env[] = {"SECKILL_ADMIN_TOKEN=env-token-0123456789", NULL};
    s = loader("serve", SK_USE_SERVE, env, no_defaults);
    CHECK_EQ(load(s, (const char *const[]){"--config", conf, NULL}), 0);
    CHECK_STR(s->cfg.admin_token, "env-token-0123456789");
    CHECK_STR(s->cfg.admin_token_file, "");
    CHECK_STR(sk_settings_source(s, SK_CK_admin_token_file, src, sizeof src),
              "cleared by env SECKILL_ADMIN_TOKEN");
    CHECK_STR(sk_settings_source(s, SK_CK_admin_token, src, sizeof src), "env SECKILL_ADMIN_TOKEN");
    sk_settings_free(s);
}
