/* settings.h - a command's settings: its command line parsed against its
 * own flags and the configuration keys it reads (http/config_keys.def),
 * and the sources layered in one order for every command:
 *
 *   flags > SECKILL_* environment > the config file > systemd credentials
 *   (serve's secrets) > built-in defaults
 *
 * The config file is --config FILE, else $SECKILL_CONFIG, else the first of
 * SK_SYSCONFDIR/seckill/seckill.conf and /etc/seckill/seckill.conf that
 * exists (none: defaults and the environment only). A key of the file or
 * the environment that the command does not read is checked and ignored;
 * given as a flag it is refused: "--admin-token is not a flag of seckill
 * worker". An unknown flag gets one wording in every command, with the
 * closest flag: "unknown flag --redsi; did you mean --redis?". A config
 * file others may write, or may read while it holds a secret (and a
 * secret's file others may read) is refused. Every refusal is printed
 * (core/cli.h) and is exit 2; nothing was opened.
 *
 *     struct sk_settings *s = sk_settings_new("worker", SK_USE_WORKER, flags, n, 0);
 *     int rc = sk_settings_load(s, argc, argv);  // 0, or the exit code
 *     if (!rc && s->help) ... usage;
 *     ... s->cfg.redis, s->val[i] (flag i's value, NULL when not given) ...
 *     sk_settings_free(s);
 */
#ifndef SK_SETTINGS_H
#define SK_SETTINGS_H
#include <stddef.h>
#include <stdint.h>

#include "http/config.h"
#include "orders/webhooks.h"

/* A command's own flag (not a configuration key): "--id", with a value
 * or not (a boolean). */
struct sk_flag {
    const char *name;
    int has_value;
};

#define SK_SETTINGS_FLAGS_MAX 64

/* Where a key's value came from. */
enum sk_setting_src {
    SK_SRC_DEFAULT = 0,
    SK_SRC_CRED,   /* $CREDENTIALS_DIRECTORY (systemd's LoadCredential=) */
    SK_SRC_FILE,   /* the config file (line[k]) */
    SK_SRC_ENV,    /* SECKILL_<KEY> */
    SK_SRC_FLAG,   /* --key */
    SK_SRC_SECRET, /* read from the file its *_file key names */
};

struct sk_settings {
    /* set by sk_settings_new */
    const char *cmd;             /* "serve", "activity show": messages */
    unsigned uses;               /* SK_USE_*: the keys it reads; 0: no configuration */
    int every_key;               /* seckill config: every key is its flag */
    const struct sk_flag *flags; /* its own flags */
    size_t nflags;               /* at most SK_SETTINGS_FLAGS_MAX */
    uint64_t allowed;            /* bit i: flags[i] is accepted; 0: all */
    char *const *envp;           /* the environment (environ unless a test sets it) */
    const char *const *defaults; /* the config files tried when none is named
                                    (NULL-terminated; a test may set it) */
    /* filled by sk_settings_load */
    struct sk_config cfg;
    const char *val[SK_SETTINGS_FLAGS_MAX]; /* flag i's value ("" boolean), NULL: not given */
    unsigned char src[SK_CONFIG_NKEYS];     /* enum sk_setting_src of each key */
    int line[SK_CONFIG_NKEYS];              /* the file's line of a SK_SRC_FILE key */
    int cleared_by[SK_CONFIG_NKEYS];        /* 1 + the secret (or file) key whose source
                                               emptied it; 0: none */
    char file[512];                         /* the config file read, "" none */
    int help;                               /* --help (or -h) was given: nothing else done */
};

/* A command's settings, before anything is read (the caller's: free with
 * sk_settings_free); NULL when out of memory. flags: nflags of its own
 * (may be 0), allowed: the mask of those it takes (0: all). */
struct sk_settings *sk_settings_new(const char *cmd, unsigned uses, const struct sk_flag *flags,
                                    size_t nflags, uint64_t allowed);
void sk_settings_free(struct sk_settings *s);

/* Parses argv (argv[0] is the command's name: skipped) and applies the
 * sources. For a command that reads serve's keys (or every key) the
 * secrets' files are read and the cross-field checks run
 * (sk_config_validate). Sets the log level. Returns 0, or an exit code
 * after printing why (2: bad usage or configuration). */
int sk_settings_load(struct sk_settings *s, int argc, char **argv);

/* "default", "flag --db", "env SECKILL_DB", "/etc/seckill/seckill.conf:12",
 * "admin_token_file" for key k, into out (cap bytes); a file key emptied by
 * its secret's source (or the other way round): "cleared by env
 * SECKILL_ADMIN_TOKEN". Returns out. */
const char *sk_settings_source(const struct sk_settings *s, int k, char *out, size_t cap);

/* The whole of a file of at most 1 MiB into *out (malloc'd, the caller
 * frees; *len bytes, terminated). 0, or SK_EIO with errno set (an empty
 * file is 0 bytes, not an error). */
int sk_settings_read_file(const char *path, char **out, size_t *len);

/* The node's webhook endpoint of c (its webhook_* keys) into *e, the
 * dispatcher's bounds into *o (whether or not it names one): 1, or 0 when
 * c names none (webhook_url ""). */
int sk_settings_webhook(const struct sk_config *c, struct sk_wh_endpoint *e, struct sk_wh_opts *o);

#endif
