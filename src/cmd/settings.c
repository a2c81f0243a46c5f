/* settings.c - a command's settings from its flags, the environment, the
 * config file and the defaults, in that order of precedence (settings.h). */
#include "cmd/settings.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/cli.h"
#include "core/error.h"
#include "core/log.h"
#include "core/vec.h"

extern char **environ;

/* The installed prefix's configuration directory (the Makefile's
 * SYSCONFDIR, e.g. /usr/local/etc), then the system's. */
#ifndef SK_SYSCONFDIR
#define SK_SYSCONFDIR "/etc"
#endif
static const char *const builtin_files[] = {SK_SYSCONFDIR "/seckill/seckill.conf",
                                            "/etc/seckill/seckill.conf", NULL};

struct sk_settings *sk_settings_new(const char *cmd, unsigned uses, const struct sk_flag *flags,
                                    size_t nflags, uint64_t allowed)
{
    if (nflags > SK_SETTINGS_FLAGS_MAX) return NULL;
    struct sk_settings *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->cmd = cmd;
    s->uses = uses;
    s->flags = flags;
    s->nflags = nflags;
    s->allowed = allowed;
    s->envp = environ;
    s->defaults = builtin_files;
    return s;
}

void sk_settings_free(struct sk_settings *s)
{
    if (!s) return;
    /* the secrets read leave no copy behind in freed memory */
    memset(&s->cfg, 0, sizeof s->cfg);
    free(s);
}

int sk_settings_read_file(const char *path, char **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return SK_EIO;
    char *buf = NULL;
    size_t cap = 0, n = 0;
    int rc = 0;
    for (;;) {
        /* full: grow, up to 1 MiB (a config file is small) */
        if (n + 1 >= cap) {
            if (cap >= (1u << 20)) break;
            if (SK_VEC_RESERVE(buf, cap, n + 2, 4096)) {
                errno = ENOMEM;
                rc = SK_EIO;
                break;
            }
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        if (got == 0) {
            if (ferror(f)) rc = SK_EIO;
            break;
        }
        n += got;
    }
    int e = errno;
    fclose(f);
    if (rc < 0) {
        free(buf);
        errno = e;
        return SK_EIO;
    }
    if (!buf && !(buf = malloc(1))) return SK_EIO;
    buf[n] = 0;
    *out = buf;
    *len = n;
    return 0;
}

/* ---- the command line ------------------------------------------------------- */

/* A configuration key given as a flag, applied after the file and the
 * environment. */
struct key_flag {
    int key;
    const char *value;
};

static int key_is_mine(const struct sk_settings *s, int k)
{
    return s->every_key || (sk_config_keys[k].uses & s->uses) != 0;
}

static int flag_is_mine(const struct sk_settings *s, size_t i)
{
    return !s->allowed || (s->allowed & ((uint64_t)1 << i));
}

/* The flags this command takes, for the closest-match hint: its own, the
 * keys it reads, --config. */
static const char *closest_flag(const struct sk_settings *s, const char *flag)
{
    static char names[SK_CONFIG_NKEYS][72];
    const char *cands[SK_SETTINGS_FLAGS_MAX + SK_CONFIG_NKEYS + 2];
    size_t n = 0;
    for (size_t i = 0; i < s->nflags; i++)
        if (flag_is_mine(s, i)) cands[n++] = s->flags[i].name;
    if (s->uses || s->every_key) {
        for (int k = 0; k < SK_CONFIG_NKEYS; k++)
            if (key_is_mine(s, k)) cands[n++] = sk_config_flag_name(k, names[k], sizeof names[k]);
        cands[n++] = "--config";
    }
    cands[n++] = "--help";
    return sk_cli_closest(flag, cands, n);
}

/* A flag's value: after '=', or the next argument, which must not be
 * another flag ("--stock --limit 2" forgot the stock). */
static int take_value(const struct sk_settings *s, int argc, char **argv, int *i, const char *eq,
                      const char *name, size_t nlen, const char **out)
{
    const char *v = eq ? eq + 1 : (*i + 1 < argc ? argv[*i + 1] : NULL);
    if (!v || (!eq && !strncmp(v, "--", 2)))
        return sk_cli_usage_error("%s: %.*s needs a value", s->cmd, (int)nlen, name);
    if (!eq) (*i)++;
    *out = v;
    return 0;
}

/* argv into s->val, the key flags and the named config file. */
static int parse_argv(struct sk_settings *s, int argc, char **argv, struct key_flag *kf,
                      size_t *nkf, const char **config)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            s->help = 1;
            return 0;
        }
        if (strncmp(arg, "--", 2) != 0 || !arg[2])
            return sk_cli_usage_error("%s: unexpected argument '%s'", s->cmd, arg);
        const char *eq = strchr(arg, '=');
        size_t nlen = eq ? (size_t)(eq - arg) : strlen(arg);
        char name[80];
        snprintf(name, sizeof name, "%.*s", (int)(nlen < 79 ? nlen : 79), arg);
        int own = -1;
        for (size_t k = 0; k < s->nflags; k++)
            if (flag_is_mine(s, k) && !strcmp(s->flags[k].name, name)) own = (int)k;
        if (own >= 0) {
            if (s->val[own]) return sk_cli_usage_error("%s: %s given twice", s->cmd, name);
            const char *v = "";
            if (s->flags[own].has_value) {
                int rc = take_value(s, argc, argv, &i, eq, arg, nlen, &v);
                if (rc) return rc;
            } else if (eq) {
                return sk_cli_usage_error("%s: %s takes no value", s->cmd, name);
            }
            s->val[own] = v;
            continue;
        }
        if ((s->uses || s->every_key) && !strcmp(name, "--config")) {
            int rc = take_value(s, argc, argv, &i, eq, arg, nlen, config);
            if (rc) return rc;
            continue;
        }
        int k = sk_config_key_find(name + 2);
        if (k >= 0 && !key_is_mine(s, k)) {
            char who[64];
            return sk_cli_usage_error("%s: %s is not a flag of seckill %s (%s reads it)", s->cmd,
                                      name, s->cmd,
                                      sk_config_uses_text(sk_config_keys[k].uses, who, sizeof who));
        }
        if (k < 0) return sk_cli_unknown_flag(s->cmd, name, closest_flag(s, name));
        const char *v;
        int rc = take_value(s, argc, argv, &i, eq, arg, nlen, &v);
        if (rc) return rc;
        kf[*nkf].key = k;
        kf[*nkf].value = v;
        (*nkf)++;
    }
    return 0;
}

/* ---- the sources ------------------------------------------------------------ */

static const char *env_get(char *const *envp, const char *name)
{
    size_t n = strlen(name);
    for (; envp && *envp; envp++)
        if (!strncmp(*envp, name, n) && (*envp)[n] == '=') return *envp + n + 1;
    return NULL;
}

/* The file to read: --config, $SECKILL_CONFIG, or the first default that
 * exists. 0 with s->file set ("" for none), or an exit code. */
static int pick_file(struct sk_settings *s, const char *named)
{
    const char *env = env_get(s->envp, "SECKILL_CONFIG");
    if (!named && env && *env) named = env;
    if (named) {
        if (!*named) return sk_cli_usage_error("%s: --config needs a file name", s->cmd);
        if (strlen(named) >= sizeof s->file)
            return sk_cli_usage_error("%s: the config file's name is too long", s->cmd);
        snprintf(s->file, sizeof s->file, "%s", named);
        return 0;
    }
    for (const char *const *f = s->defaults; f && *f; f++) {
        struct stat st;
        if (stat(*f, &st) == 0 || errno != ENOENT) {
            snprintf(s->file, sizeof s->file, "%s", *f);
            return 0;
        }
    }
    s->file[0] = 0;
    return 0;
}

static void seen_file(void *arg, int k, int line)
{
    struct sk_settings *s = arg;
    if (k < 0) return;
    s->src[k] = SK_SRC_FILE;
    s->line[k] = line;
}

static void seen_env(void *arg, int k, int line)
{
    (void)line;
    struct sk_settings *s = arg;
    if (k >= 0) s->src[k] = SK_SRC_ENV;
}

/* A secret and the key naming its file. */
static const int secret_pairs[][2] = {{SK_CK_admin_token, SK_CK_admin_token_file},
                                      {SK_CK_hmac_secret, SK_CK_hmac_secret_file},
                                      {SK_CK_hmac_secret_prev, SK_CK_hmac_secret_prev_file},
                                      {SK_CK_challenge_secret, SK_CK_challenge_secret_file},
                                      {SK_CK_captcha_secret, SK_CK_captcha_secret_file}};
#define NPAIRS (sizeof secret_pairs / sizeof secret_pairs[0])

/* Setting a secret clears its file and the other way round: a key left
 * empty that way takes the source of the one that cleared it. */
static void follow_pairs(struct sk_settings *s)
{
    for (size_t i = 0; i < NPAIRS; i++)
        for (int j = 0; j < 2; j++) {
            int mine = secret_pairs[i][j], other = secret_pairs[i][1 - j];
            char v[8];
            if (s->src[mine] != SK_SRC_DEFAULT && s->src[other] > s->src[mine] &&
                !sk_config_value(&s->cfg, mine, v, sizeof v)[0]) {
                s->src[mine] = s->src[other];
                s->line[mine] = s->line[other];
                s->cleared_by[mine] = other + 1;
            }
        }
}

/* A file holding a secret (holds: what) that users other than its owner
 * and group may read, or any file of the configuration they may write (a
 * line added there is an admin token of theirs at the next reload):
 * refused, as ssh refuses such a key. A warning would sit in a journal
 * nobody reads while every local account could read the secret for as
 * long as the node runs; a refusal is seen at the start, and the fix is
 * one chmod. Returns 0 or an exit code. */
static int file_private(const struct sk_settings *s, const char *what, const char *path,
                        const char *holds)
{
    struct stat stt;
    /* a device (--config /dev/null: no file) holds no line of anyone's */
    if (stat(path, &stt) != 0 || !S_ISREG(stt.st_mode)) return 0;
    if (stt.st_mode & S_IWOTH)
        return sk_cli_usage_error("%s: %s %s: users other than its owner and group may write "
                                  "it: chmod o-rwx %s (0640 root:seckill, or 0600)",
                                  s->cmd, what, path, path);
    if (holds && (stt.st_mode & S_IROTH))
        return sk_cli_usage_error("%s: %s %s holds %s and users other than its owner and "
                                  "group may read it: chmod o-rwx %s (0640 root:seckill, or 0600)",
                                  s->cmd, what, path, holds, path);
    return 0;
}

/* 1 when the file at path holds nothing but line ends (or cannot be read). */
static int blank_file(const char *path)
{
    char *buf;
    size_t len;
    if (sk_settings_read_file(path, &buf, &len) < 0) return 1;
    size_t i = 0;
    while (i < len && (buf[i] == '\n' || buf[i] == '\r'))
        i++;
    memset(buf, 0, len);
    free(buf);
    return i == len;
}

/* Under systemd with LoadCredential= (contrib/systemd/seckill.service.in):
 * the credentials named as the secrets (admin_token, hmac_secret,
 * hmac_secret_prev, challenge_secret, captcha_secret) in
 * $CREDENTIALS_DIRECTORY name the files of those secrets, at the lowest
 * precedence (the file, the environment and the flags come after and
 * win). A blank credential (the unit's default when the operator made no
 * file) is no secret. */
static void apply_credentials(struct sk_settings *s)
{
    const char *dir = env_get(s->envp, "CREDENTIALS_DIRECTORY");
    if (!dir || !dir[0]) return;
    for (size_t i = 0; i < NPAIRS; i++) {
        char path[sizeof s->cfg.admin_token_file], err[256];
        int file_key = secret_pairs[i][1];
        snprintf(path, sizeof path, "%s/%s", dir, sk_config_keys[secret_pairs[i][0]].name);
        if (blank_file(path)) continue;
        if (sk_config_set_key(&s->cfg, file_key, path, err, sizeof err) < 0)
            sk_log(SK_LOG_WARN, "%s: credential %s: %s", s->cmd,
                   sk_config_keys[secret_pairs[i][0]].name, err);
        else
            s->src[file_key] = SK_SRC_CRED;
    }
}

static int read_config_file(struct sk_settings *s)
{
    if (!s->file[0]) return 0;
    char *buf;
    size_t len;
    if (sk_settings_read_file(s->file, &buf, &len) < 0) {
        int e = errno;
        if (e == EACCES)
            return sk_cli_usage_error(
                "%s: cannot read the config file %s: %s (it may hold secrets: read it as root "
                "or as a member of its group, seckill; or name another with --config)",
                s->cmd, s->file, strerror(e));
        return sk_cli_usage_error("%s: cannot read the config file %s: %s", s->cmd, s->file,
                                  strerror(e));
    }
    char err[300];
    int rc = sk_config_parse_file_seen(&s->cfg, buf, len, seen_file, s, err, sizeof err);
    free(buf);
    if (rc < 0) return sk_cli_usage_error("%s: %s: %s", s->cmd, s->file, err);
    /* what the file itself holds decides whether others may read it: only
     * the defaults and the credentials' paths came before it, no secret */
    return file_private(s, "config", s->file, sk_config_secret_held(&s->cfg));
}

/* One secret out of a file: its first line (a trailing CR/LF and nothing
 * else stripped), through the same checks as the flag. Refused when other
 * users may read the file. Returns 0 or an exit code. */
static int read_secret(struct sk_settings *s, int key, const char *path)
{
    const char *name = sk_config_keys[key].name;
    char what[64];
    snprintf(what, sizeof what, "%s_file", name);
    int private_rc = file_private(s, what, path, "a secret");
    if (private_rc) return private_rc;
    char *buf;
    size_t len;
    if (sk_settings_read_file(path, &buf, &len) < 0)
        return sk_cli_usage_error("%s: cannot read %s_file %s: %s", s->cmd, name, path,
                                  strerror(errno));
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
        len--;
    char err[256];
    int rc = 0;
    if (len == 0 || len > 1024 || memchr(buf, 0, len) || memchr(buf, '\n', len)) {
        rc = sk_cli_usage_error("%s: %s_file %s must hold the secret on one line", s->cmd, name,
                                path);
    } else {
        buf[len] = 0;
        if (sk_config_set_key(&s->cfg, key, buf, err, sizeof err) < 0)
            rc = sk_cli_usage_error("%s: %s_file %s: %s", s->cmd, name, path, err);
        else
            s->src[key] = SK_SRC_SECRET;
    }
    memset(buf, 0, len);
    free(buf);
    return rc;
}

/* The *_file keys name files holding secrets: read them now. */
static int read_secret_files(struct sk_settings *s)
{
    for (size_t i = 0; i < NPAIRS; i++) {
        char path[sizeof s->cfg.admin_token_file];
        sk_config_value(&s->cfg, secret_pairs[i][1], path, sizeof path);
        if (!path[0]) continue;
        int rc = read_secret(s, secret_pairs[i][0], path);
        if (rc) return rc;
    }
    return 0;
}

int sk_settings_load(struct sk_settings *s, int argc, char **argv)
{
    struct key_flag *kf = calloc((size_t)(argc > 0 ? argc : 1), sizeof *kf);
    if (!kf) return sk_cli_runtime_error("%s: out of memory", s->cmd);
    size_t nkf = 0;
    const char *named = NULL;
    char err[300];
    int rc = parse_argv(s, argc, argv, kf, &nkf, &named);
    if (rc || s->help) goto out;
    sk_config_defaults(&s->cfg);
    memset(s->src, SK_SRC_DEFAULT, sizeof s->src);
    if (!s->uses && !s->every_key) goto out; /* reads no configuration */
    if ((s->uses & SK_USE_SERVE) || s->every_key) apply_credentials(s);
    if ((rc = pick_file(s, named)) != 0 || (rc = read_config_file(s)) != 0) goto out;
    if (sk_config_apply_env_seen(&s->cfg, s->envp, seen_env, s, err, sizeof err) < 0) {
        rc = sk_cli_usage_error("%s: environment: %s", s->cmd, err);
        goto out;
    }
    for (size_t i = 0; i < nkf; i++) {
        if (sk_config_set_key(&s->cfg, kf[i].key, kf[i].value, err, sizeof err) < 0) {
            rc = sk_cli_usage_error("%s: %s", s->cmd, err);
            goto out;
        }
        s->src[kf[i].key] = SK_SRC_FLAG;
    }
    follow_pairs(s);
    if ((s->uses & SK_USE_SERVE) || s->every_key) {
        if ((rc = read_secret_files(s)) != 0) goto out;
        if (sk_config_validate(&s->cfg, err, sizeof err) < 0) {
            rc = sk_cli_usage_error("%s: %s", s->cmd, err);
            goto out;
        }
    }
    if ((s->uses & SK_USE_WORKER) && sk_config_webhook_check(&s->cfg, err, sizeof err) < 0) {
        rc = sk_cli_usage_error("%s: %s", s->cmd, err);
        goto out;
    }
    enum sk_log_level lvl;
    if (sk_log_parse_level(s->cfg.log_level, &lvl) == 0) sk_log_set_level(lvl);
out:
    free(kf);
    return rc;
}

const char *sk_settings_source(const struct sk_settings *s, int k, char *out, size_t cap)
{
    char name[80];
    if (k < 0 || k >= SK_CONFIG_NKEYS) {
        snprintf(out, cap, "?");
        return out;
    }
    /* a key emptied by its pair: the pair's source */
    const char *pre = s->cleared_by[k] ? "cleared by " : "";
    int key = s->cleared_by[k] ? s->cleared_by[k] - 1 : k;
    switch (s->src[k]) {
    case SK_SRC_FILE: snprintf(out, cap, "%s%s:%d", pre, s->file, s->line[k]); break;
    case SK_SRC_ENV:
        snprintf(out, cap, "%senv %s", pre, sk_config_env_name(key, name, sizeof name));
        break;
    case SK_SRC_FLAG:
        snprintf(out, cap, "%sflag %s", pre, sk_config_flag_name(key, name, sizeof name));
        break;
    case SK_SRC_SECRET: snprintf(out, cap, "%s_file", sk_config_keys[k].name); break;
    case SK_SRC_CRED: snprintf(out, cap, "%scredential", pre); break;
    default: snprintf(out, cap, "default"); break;
    }
    return out;
}

int sk_settings_webhook(const struct sk_config *c, struct sk_wh_endpoint *e, struct sk_wh_opts *o)
{
    memset(e, 0, sizeof *e);
    memset(o, 0, sizeof *o);
    /* the database's endpoints (the admin API's) take the bounds too */
    o->timeout_ms = c->webhook_timeout_ms;
    o->horizon_ms = c->webhook_horizon_s * 1000;
    o->settle_ms = c->webhook_settle_ms;
    if (!c->webhook_url[0]) return 0;
    snprintf(e->name, sizeof e->name, "%s", c->webhook_name);
    snprintf(e->url, sizeof e->url, "%s", c->webhook_url);
    snprintf(e->secret[0], sizeof e->secret[0], "%s", c->webhook_secret);
    snprintf(e->secret[1], sizeof e->secret[1], "%s", c->webhook_secret_prev);
    snprintf(e->filter, sizeof e->filter, "%s", c->webhook_events);
    return 1;
}
