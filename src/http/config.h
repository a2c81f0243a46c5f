/* config.h - the configuration of every seckill command: one table of
 * keys (config_keys.def: name, bounds, default, which commands read it),
 * one validating setter per key (a string key's check and field, or a
 * setter of its own), the config file's syntax and the SECKILL_*
 * environment (bytes in, no I/O, no heap). Where the sources are found and
 * in which order they apply is cmd/settings.h's; this file applies one.
 *
 * Sources, highest precedence first: command-line flags, SECKILL_*
 * environment variables, the config file, the defaults. A caller applies
 * them lowest first, each overwriting the last:
 *
 *     struct sk_config c;
 *     sk_config_defaults(&c);
 *     sk_config_parse_file(&c, text, len, err, cap);       // the file, if any
 *     sk_config_apply_env(&c, environ, err, cap);          // SECKILL_*
 *     sk_config_set_flag(&c, "admin-token", optarg, ...);  // each flag
 *     sk_config_validate(&c, err, cap);                    // cross-field checks
 *
 * Keys: config_keys.def (file key = flag name with '_' for '-' = env name
 * upper-cased after SECKILL_); docs/configuration.md is made from it.
 * admin_token_file, hmac_secret_file and hmac_secret_prev_file name a file
 * holding the secret (read by the caller, not here: the path is kept).
 * Setting a secret clears its file and the other way round, so the source
 * with the highest precedence wins.
 *
 * All functions return 0 or SK_EINVAL with one human line in err (cap
 * bytes, terminated when cap > 0). Error text never contains the value of
 * admin_token or hmac_secret. On failure the key that failed keeps its
 * previous value; keys set before it in the same call stay set. */
#ifndef SK_CONFIG_H
#define SK_CONFIG_H
#include <stddef.h>

#include "core/ip.h"
#include "http/cors.h"

enum sk_config_role { SK_ROLE_ALL, SK_ROLE_API, SK_ROLE_WORKER };

#define SK_CONFIG_PROXIES_MAX 16

struct sk_config {
    char listen[256];
    char redis[512];
    char db[512];
    int processes;
    char admin_token[256]; /* "" = admin API disabled */
    int auth_hmac;         /* 0: auth=trusted-header (X-User-Id), 1: auth=hmac */
    int auth_jwt;          /* 1: auth=jwt (auth_hmac is 0 then) */
    char hmac_secret[256];
    enum sk_config_role role;
    char log_level[16]; /* validated by sk_log_parse_level (log.h) */
    long long max_body;
    int redis_timeout_ms;
    long long rate_per_user_per_s, rate_burst, rate_per_ip_per_s, rate_ip_burst;
    struct sk_cidr trusted_proxies[SK_CONFIG_PROXIES_MAX];
    int n_trusted_proxies;
    long long max_inflight;
    char ops_listen[256]; /* "" = no ops listener */
    int io_timeout_s;
    long long max_connections; /* 0: from the file-descriptor limit */
    char admin_token_file[512];
    char hmac_secret_file[512];
    long long hmac_max_ttl_s;
    char hmac_key_id[33]; /* SK_AUTH_KID_MAX bytes of [A-Za-z0-9_-], or "" */
    char hmac_secret_prev[256];
    char hmac_key_id_prev[33];
    char hmac_secret_prev_file[512];
    int sync_replicas, sync_timeout_ms;
    int redis_functions; /* 1: on, 0: off */
    int db_pool, db_timeout_ms, db_queue_max, db_poll_wait_ms;
    long long poll_rate_max;             /* order polls per second per HTTP process; 0: no budget */
    int batches_in_flight;               /* per key set and process; 0: no limit */
    int admit_target_ms;                 /* a purchase's longest wait (admit_limit.h); 0: off */
    char cors_origins[SK_CORS_LIST_MAX]; /* normalised (cors.h); "" = off */
    char jwks_file[512];                 /* auth=jwt: the JSON Web Key Set (read by the caller) */
    char jwt_issuer[256];                /* "" = any issuer */
    char jwt_audience[256];              /* "" = any audience */
    char jwt_user_claim[64];             /* default "sub" */
    int jwt_leeway_s;                    /* clock skew allowed on exp, nbf and iat */
    char challenge_secret[256];          /* "" = drawn at start (http/challenge_http.h) */
    char challenge_secret_file[512];
    int challenge_ttl_s;
    char captcha_provider[16]; /* "" none, or a name sk_activity_captcha_valid takes */
    char captcha_site_key[104];
    char captcha_secret[256];
    char captcha_secret_file[512];
    char captcha_verify_url[512]; /* "" = the provider's own */
    char captcha_script_url[256]; /* the widget's script; "" = the provider's own
                                     (SK_CAPTCHA_SCRIPT_MAX) */
    int captcha_timeout_ms;
    int captcha_fail_open; /* 1: captcha_fail = open */
    char captcha_hostname[256];
    long long jwt_max_ttl_s;     /* the longest token lifetime accepted */
    char frame_ancestors[512];   /* CSP frame-ancestors of the HTML pages */
    long long max_request_bytes; /* request bytes buffered per process; 0: default */
    /* the node's webhook endpoint (orders/webhooks.h) */
    /* sizes: SK_WH_URL_MAX, SK_WH_NAME_MAX, SK_WH_SECRET_MAX, SK_WH_FILTER_MAX */
    char webhook_url[512];         /* "" = none */
    char webhook_name[64];         /* its cursor's key */
    char webhook_secret[100];      /* whsec_... */
    char webhook_secret_prev[100]; /* "" = no rotation */
    char webhook_events[256];      /* the filter; "" = all */
    int webhook_timeout_ms;
    long long webhook_horizon_s;
    int webhook_settle_ms; /* 0: the dispatcher's default */
};

/* The default budget of order polls per second per HTTP process while
 * purchases press (poll_rate_max; admit_limit.h). */
#define SK_CONFIG_POLL_RATE_MAX 2000

/* The default window of purchase batches out to Redis per key set and
 * HTTP process (batches_in_flight; BENCHMARKS.md, "The batch window"). */
#define SK_CONFIG_BATCHES_IN_FLIGHT 2

/* The default admission target: a purchase the process could not answer
 * within it is refused 503 overloaded at once (admit_target_ms). */
#define SK_CONFIG_ADMIT_TARGET_MS 50

/* Shortest hmac_secret (and hmac_secret_prev) and admin_token accepted. */
#define SK_CONFIG_SECRET_MIN 16

/* The commands that read a key (config_keys.def's uses). */
enum {
    SK_USE_SERVE = 1,     /* seckill serve */
    SK_USE_WORKER = 2,    /* seckill worker */
    SK_USE_ACTIVITY = 4,  /* seckill activity ... (recover included) */
    SK_USE_RECONCILE = 8, /* seckill reconcile */
};
#define SK_USE_ALL (SK_USE_SERVE | SK_USE_WORKER | SK_USE_ACTIVITY | SK_USE_RECONCILE)

/* How a key's value may be shown (config_keys.def's flags). */
enum {
    SK_KEY_SECRET = 1, /* never shown: "(set)" */
    SK_KEY_URL = 2,    /* shown with its password redacted (core/redact.h) */
};

#define SK_CONFIG_STR_(x) #x
#define SK_CONFIG_STR(x) SK_CONFIG_STR_(x)

/* SK_CK_<key>: a key's position in the table. */
enum sk_config_key_id {
#define SK_CFG_SET(key, ...) SK_CK_##key,
#define SK_CFG_STR(key, ...) SK_CK_##key,
#define SK_CFG_NUM(key, ...) SK_CK_##key,
#include "http/config_keys.def"
#undef SK_CFG_SET
#undef SK_CFG_STR
#undef SK_CFG_NUM
    SK_CONFIG_NKEYS
};

/* One key as config_keys.def defines it. */
struct sk_config_key {
    const char *name; /* the file's spelling: admin_token */
    const char *arg;  /* the value's name in help: TOKEN */
    const char *def;  /* the default, as text ("" for none) */
    const char *help; /* one line */
    unsigned uses;    /* SK_USE_* */
    unsigned flags;   /* SK_KEY_* */
    int is_num;       /* a whole number in [lo, hi] */
    long long lo, hi;
    const char *unit, *lo_means; /* how the range is worded (NULL: none) */
};
extern const struct sk_config_key sk_config_keys[SK_CONFIG_NKEYS];

/* The position of key (underscore spelling; '-' is taken for '_'), or
 * SK_ENOTFOUND. */
int sk_config_key_find(const char *key);

/* Sets key number k (0..SK_CONFIG_NKEYS-1) from value; err as
 * sk_config_set, which names the key. */
int sk_config_set_key(struct sk_config *c, int k, const char *value, char *err, size_t cap);

/* The value of key k in c as text into out (cap bytes, terminated; cut
 * when longer): what the setter would take back, except that SK_KEY_SECRET
 * keys give "(set)" or "" and SK_KEY_URL keys have their password
 * redacted. Returns out. */
const char *sk_config_value(const struct sk_config *c, int k, char *out, size_t cap);

/* Key k's flag ("--admin-token") and variable ("SECKILL_ADMIN_TOKEN")
 * into out (cap bytes). Return out. */
const char *sk_config_flag_name(int k, char *out, size_t cap);
const char *sk_config_env_name(int k, char *out, size_t cap);

/* "serve, worker, activity, reconcile" for a uses mask, into out. Returns
 * out. */
const char *sk_config_uses_text(unsigned uses, char *out, size_t cap);

/* Defaults: every key's config_keys.def default through its setter. */
void sk_config_defaults(struct sk_config *c);

/* Sets one key (underscore spelling) from a terminated string. */
int sk_config_set(struct sk_config *c, const char *key, const char *value, char *err, size_t cap);

/* Same, from a flag name without the leading dashes: "admin-token" and
 * "admin_token" both mean admin_token. */
int sk_config_set_flag(struct sk_config *c, const char *flag, const char *value, char *err,
                       size_t cap);

/* A config file's text (len bytes, no terminator needed):
 *     # comment
 *     listen = 0.0.0.0:8080
 *     admin_token = "s3cret with # inside"   # trailing comment
 *     hmac_secret = 'literal, no escapes'
 * One key = value per line; blank lines and lines starting with # are
 * skipped; keys may use '-' for '_'. An unquoted value runs to the end of
 * the line or to a '#' that follows whitespace, trimmed. "double quoted"
 * values understand \" \\ \n \t; 'single quoted' ones are literal. A key
 * given twice: the last wins. Unknown keys, NUL bytes, a missing '=' or an
 * unterminated quote are errors, reported as "line N: ...". */
int sk_config_parse_file(struct sk_config *c, const char *buf, size_t len, char *err, size_t cap);

/* Called after a source set key k: line is the config file's line (0 for
 * the environment). For callers that say where each value came from. */
typedef void (*sk_config_seen_fn)(void *arg, int k, int line);

/* sk_config_parse_file and sk_config_apply_env with seen (may be NULL)
 * called after each key they set. */
int sk_config_parse_file_seen(struct sk_config *c, const char *buf, size_t len,
                              sk_config_seen_fn seen, void *arg, char *err, size_t cap);
int sk_config_apply_env_seen(struct sk_config *c, char *const *envp, sk_config_seen_fn seen,
                             void *arg, char *err, size_t cap);

/* SECKILL_<KEY> entries of a NULL-terminated "NAME=VALUE" array (environ,
 * or a test's own; NULL is an empty environment). Other SECKILL_* names
 * (SECKILL_BIN, SECKILL_CONFIG, ...) are ignored, and an empty value counts
 * as unset. */
int sk_config_apply_env(struct sk_config *c, char *const *envp, char *err, size_t cap);

/* The webhook keys together: a URL needs its secret, a previous secret a
 * current one. 0, or SK_EINVAL with err. (Part of sk_config_validate;
 * `seckill worker`, which validates nothing else, calls it alone.) */
int sk_config_webhook_check(const struct sk_config *c, char *err, size_t cap);

/* Cross-field checks after all sources are applied (and the secret files
 * read): auth = hmac needs an hmac_secret of at least SK_CONFIG_SECRET_MIN
 * bytes; a second key needs its own id and the same length; an admin token
 * needs SK_CONFIG_SECRET_MIN bytes; auth = jwt needs jwks_file and
 * jwt_audience; max_request_bytes must hold a whole request. */
int sk_config_validate(const struct sk_config *c, char *err, size_t cap);

/* The first secret the configuration holds ("admin_token", "hmac_secret",
 * "hmac_secret_prev", "redis password", "db password"), or NULL: what a
 * config file must not show to other users (serve refuses such a file
 * when others may read it). Static strings. */
const char *sk_config_secret_held(const struct sk_config *c);

/* 1 when ip lies in one of the trusted_proxies (core/ip.h: sk_cidr_match). */
int sk_config_is_trusted_proxy(const struct sk_config *c, const struct sk_ip *ip);

/* "trusted-header" / "hmac", "all" / "api" / "worker". Static strings. */
const char *sk_config_auth_name(const struct sk_config *c);
const char *sk_config_role_name(enum sk_config_role r);

#endif
