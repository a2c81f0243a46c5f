/* cli_config.c - `seckill config`: the settings that apply, each with
 * where it came from (a flag, SECKILL_*, the config file and its line,
 * the default), secrets never shown; and --reference, the table of every
 * key as docs/configuration.md holds it (made from the same table). */
#include <stdio.h>
#include <string.h>

#include "cmd/commands.h"
#include "cmd/settings.h"
#include "core/cli.h"

static int usage(FILE *f)
{
    fprintf(f, "usage: seckill config [--config FILE] [--for COMMAND] [flags]\n"
               "       seckill config --reference\n"
               "Prints every configuration key with the value that applies and where it comes\n"
               "from: a flag, a SECKILL_<KEY> variable, the config file (with its line), or the\n"
               "default. Precedence: flags > SECKILL_* > --config FILE (else $SECKILL_CONFIG,\n"
               "else /etc/seckill/seckill.conf when it exists) > defaults. Secrets are never\n"
               "printed (\"(set)\"), nor the passwords in URLs. The file, the variables and\n"
               "the secrets' files are checked as serve checks them: exit 2 when one is wrong.\n"
               "  --config FILE     the config file to read\n"
               "  --for COMMAND     only the keys COMMAND reads: serve, worker, activity,\n"
               "                    reconcile\n"
               "  --reference       the table of every key (default, values, the commands\n"
               "                    that read it) in Markdown, as docs/configuration.md has it\n"
               "  --KEY VALUE       any key, as a flag: what it would be with that flag\n");
    return f == stdout ? SK_EXIT_OK : SK_EXIT_USAGE;
}

enum { F_FOR, F_REFERENCE };
static const struct sk_flag flags[] = {[F_FOR] = {"--for", 1}, [F_REFERENCE] = {"--reference", 0}};

/* A Markdown table cell: '|' escaped. */
static void cell(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '|') fputc('\\', f);
        fputc(*s, f);
    }
}

/* Every key as a Markdown table (docs/configuration.md's reference). */
static void reference(FILE *f)
{
    fprintf(f, "| Key | Flag, variable | Default | Values | Read by | What it does |\n"
               "|---|---|---|---|---|---|\n");
    for (int k = 0; k < SK_CONFIG_NKEYS; k++) {
        const struct sk_config_key *key = &sk_config_keys[k];
        char flag[80], env[80], uses[64];
        fprintf(f, "| `%s` | `%s`, `%s` | ", key->name, sk_config_flag_name(k, flag, sizeof flag),
                sk_config_env_name(k, env, sizeof env));
        if (key->def[0]) {
            fputc('`', f);
            cell(f, key->def);
            fputc('`', f);
        } else {
            fputs("none", f);
        }
        fputs(" | ", f);
        if (key->is_num)
            fprintf(f, "%lld%s..%lld%s%s", key->lo, key->lo_means ? key->lo_means : "", key->hi,
                    key->unit ? " " : "", key->unit ? key->unit : "");
        else
            cell(f, key->arg);
        fprintf(f, " | %s | ", sk_config_uses_text(key->uses, uses, sizeof uses));
        cell(f, key->help);
        if (key->flags & SK_KEY_SECRET) fputs(" (never printed)", f);
        fputs(" |\n", f);
    }
}

static unsigned uses_of(const char *cmd)
{
    return !strcmp(cmd, "serve")       ? SK_USE_SERVE
           : !strcmp(cmd, "worker")    ? SK_USE_WORKER
           : !strcmp(cmd, "activity")  ? SK_USE_ACTIVITY
           : !strcmp(cmd, "reconcile") ? SK_USE_RECONCILE
                                       : 0;
}

/* The settings that apply, one line per key, in columns. */
static void show(const struct sk_settings *s)
{
    static char val[SK_CONFIG_NKEYS][600], src[SK_CONFIG_NKEYS][600];
    int wk = 3, wv = 5, ws = 6;
    for (int k = 0; k < SK_CONFIG_NKEYS; k++) {
        sk_config_value(&s->cfg, k, val[k], sizeof val[k]);
        if (!val[k][0]) snprintf(val[k], sizeof val[k], "\"\"");
        sk_settings_source(s, k, src[k], sizeof src[k]);
        int n = (int)strlen(sk_config_keys[k].name);
        if (n > wk) wk = n;
        if ((n = (int)strlen(val[k])) > wv && n <= 48) wv = n;
        if ((n = (int)strlen(src[k])) > ws) ws = n;
    }
    printf("# config file: %s\n", s->file[0] ? s->file : "none (defaults and the environment)");
    printf("%-*s  %-*s  %-*s  %s\n", wk, "KEY", wv, "VALUE", ws, "SOURCE", "READ BY");
    for (int k = 0; k < SK_CONFIG_NKEYS; k++) {
        if (!s->every_key && !(sk_config_keys[k].uses & s->uses)) continue;
        char uses[64];
        printf("%-*s  %-*s  %-*s  %s\n", wk, sk_config_keys[k].name, wv, val[k], ws, src[k],
               sk_config_uses_text(sk_config_keys[k].uses, uses, sizeof uses));
    }
}

int sk_cli_config(int argc, char **argv)
{
    /* the table alone reads no configuration */
    if (argc == 2 && !strcmp(argv[1], "--reference")) {
        reference(stdout);
        return SK_EXIT_OK;
    }
    struct sk_settings *s = sk_settings_new("config", 0, flags, 2, 0);
    if (!s) return sk_cli_runtime_error("config: out of memory");
    s->every_key = 1;
    /* --for narrows the keys before they are read: a worker's settings do
     * not fail on serve's secrets */
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--for") && uses_of(argv[i + 1])) {
            s->uses = uses_of(argv[i + 1]);
            s->every_key = 0;
        }
    int rc = sk_settings_load(s, argc, argv);
    if (rc == 0 && s->help) {
        rc = usage(stdout);
    } else if (rc == 0 && s->val[F_FOR] && !uses_of(s->val[F_FOR])) {
        rc = sk_cli_usage_error("config: --for: serve, worker, activity or reconcile, not '%s'",
                                s->val[F_FOR]);
    } else if (rc == 0 && s->val[F_REFERENCE]) {
        reference(stdout);
    } else if (rc == 0) {
        show(s);
    }
    sk_settings_free(s);
    return rc;
}
