/* config.h - options of `seckill serve` (bytes in, no I/O, no heap).
 *
 * Sources, highest precedence first: command-line flags, a config file,
 * SECKILL_* environment variables, defaults. The caller implements the
 * precedence by applying them lowest first, each overwriting the last:
 *
 *     struct sk_config c;
 *     sk_config_defaults(&c);
 *     sk_config_apply_env(&c, environ, err, cap);          // SECKILL_*
 *     sk_config_parse_file(&c, text, len, err, cap);       // if a file was given
 *     sk_config_set_flag(&c, "admin-token", optarg, ...);  // each flag
 *     sk_config_validate(&c, err, cap);                    // cross-field checks
 *
 * Keys (file key = flag name with '_' for '-' = env name upper-cased after
 * SECKILL_):
 *   listen            HOST:PORT, port 1..65535, IPv6 as [::1]:8080
 *                     (default 127.0.0.1:8080)
 *   redis             redis://[user:pass@]host[:port][/db],
 *                     redis+cluster://..., redis+sentinel://..., or
 *                     redis+unix://... (redis_url.h; default
 *                     redis://127.0.0.1:6379)
 *   db                sqlite:PATH, postgres://... / postgresql://..., or
 *                     mysql://... / mariadb://...
 *                     (default sqlite:seckill.db)
 *   processes         1..64 (default 1)
 *   admin_token       printable ASCII, no spaces, at least
 *                     SK_CONFIG_SECRET_MIN bytes; empty (the default)
 *                     means no admin token: every admin route answers 401
 *   auth              trusted-header (default) | hmac | jwt
 *   hmac_secret       required (non-empty) when auth = hmac
 *   role              all (default) | api | worker
 *   log_level         debug | info (default) | warn | error
 *   max_body          bytes, 1024..67108864 (default 65536)
 *   redis_timeout_ms  1..600000 (default 1000)
 *   rate_per_user_per_s  purchase requests per second per user and activity,
 *                     0..1000000 (default 0 = off); an activity's own
 *                     "rate_limit" wins (docs/rate-limit.md)
 *   rate_burst        requests a user may send at once, 0..1000000
 *                     (default 0 = one second's worth)
 *   rate_per_ip_per_s purchase requests per second per client IP and
 *                     activity, 0..1000000 (default 0 = off)
 *   rate_ip_burst     as rate_burst, for the per-IP limit
 *   trusted_proxies   comma-separated IPs or CIDRs (10.0.0.0/8, ::1) whose
 *                     X-Forwarded-For is believed, at most 16 (default none)
 *   max_inflight      purchases of one activity a process lets wait for
 *                     Redis at once; more get 429 busy at once (0..1000000,
 *                     default 0 = no cap)
 *   ops_listen        HOST:PORT of the operations listener (default "" = none):
 *                     when set, /metrics, /healthz, /readyz, the dashboard (/)
 *                     and /dashboard.json answer there only, and 404 on
 *                     listen; "off" or "" turns it off
 *   io_timeout_s      a connection that moves no byte reading or writing
 *                     for this long is closed, 1..86400 (default 30)
 *   max_connections   client connections per process, 0..10000000
 *                     (default 0 = what the file-descriptor limit allows)
 *   admin_token_file, hmac_secret_file, hmac_secret_prev_file
 *                     a file holding the secret (one line; read by the
 *                     caller, not here: the path is kept). Setting a
 *                     secret clears its file and the other way round, so
 *                     the source with the highest precedence wins.
 *   hmac_max_ttl_s    a token expiring later than now + this is refused,
 *                     1..31536000 (default 86400)
 *   hmac_key_id       the id tokens signed with hmac_secret carry
 *                     ("<id>:<user>.<exp>.<mac>"); empty (default): such
 *                     tokens carry none ("<user>.<exp>.<mac>")
 *   hmac_secret_prev, hmac_key_id_prev
 *                     a second key accepted too (rotation); its id must
 *                     differ from hmac_key_id
 *   sync_replicas     0..16 (default 0 = off): a purchase is answered 200
 *                     only when WAIT says that many replicas acknowledged
 *                     its admission; else 503 unconfirmed (docs/failover.md)
 *   sync_timeout_ms   WAIT's timeout, 1..60000 (default 100)
 *   redis_functions   on (default: the scripts as one Redis Functions
 *                     library, FCALL, when the server has Functions) | off
 *                     (EVALSHA)
 *   db_pool           database threads (and connections) per HTTP process,
 *                     1..64 (default 2): the event loop never calls the
 *                     database itself (docs/design.md)
 *   db_timeout_ms     how long a request waits for the database, 1..600000
 *                     (default 1000); then 503 unavailable with Retry-After
 *   jwks_file         auth = jwt: a JSON Web Key Set file (RS256, ES256,
 *                     EdDSA public keys; read by the caller, not here)
 *   jwt_issuer        the "iss" a token must carry ("" = any, with a
 *                     warning at start)
 *   jwt_audience      a value its "aud" must hold; required with auth =
 *                     jwt ("*" accepts any, with a warning at start)
 *   jwt_user_claim    the claim naming the buyer (default sub): a JSON
 *                     integer 1..2^63-1 or a canonical decimal string
 *                     1..2^64-1
 *   jwt_leeway_s      clock skew allowed on exp, nbf and iat, 0..300
 *                     (default 30)
 *   jwt_max_ttl_s     the longest token lifetime accepted: exp - iat, or
 *                     exp - now without iat, 1..31536000 (default 86400)
 *   frame_ancestors   who may frame the HTML pages (the buyer's page, the
 *                     dashboard): a CSP frame-ancestors source list, e.g.
 *                     "'self' https://shop.example" (default 'self';
 *                     'none': nobody), sent with X-Frame-Options
 *   max_request_bytes bytes of request heads and bodies one HTTP process
 *                     holds for all its connections together, 0 or
 *                     1048576..1099511627776 (default 0: an eighth of the
 *                     machine's memory, shared by the processes); past it
 *                     a body that must be waited for is refused 503 and
 *                     the oldest unfinished requests are closed
 *   db_queue_max      database calls that may wait for a thread per HTTP
 *                     process, 1..1000000 (default 1024); more get
 *                     503 busy at once
 *   db_poll_wait_ms   the longest an order poll (GET /api/v1/orders/{id})
 *                     may wait for the database, 1..600000 (default 100):
 *                     one the pool would not finish in time gets 503
 *                     busy with Retry-After at once, never a queue place
 *   batches_in_flight purchase batches of one key set (an activity, or one
 *                     of its segments) one HTTP process keeps out to Redis
 *                     at once, 0..64 (default 2; 0: no limit); what
 *                     arrives meanwhile waits in one batch for the first
 *                     answer, so a busy process sends fewer, larger calls
 *   poll_rate_max     order polls (GET /api/v1/orders/{id}) one HTTP
 *                     process answers per second while purchases press
 *                     (admit_limit.h: purchases refused, or a saturated
 *                     loop), 0..1000000 (default 2000; 0: no budget);
 *                     beyond it (with a burst of a tenth of a second's
 *                     worth) 503 busy with Retry-After at once, before
 *                     Redis or the database; an unpressed process answers
 *                     every poll
 *   admit_target_ms   the longest a purchase may wait in one HTTP process,
 *                     0..60000 (default 50; 0: off): the process keeps in
 *                     flight only what it can answer within it (measured)
 *                     and refuses the rest at once, 503 overloaded with
 *                     Retry-After, before any Redis work
 *   cors_origins      origins (scheme://host[:port], comma-separated, at
 *                     most 16) whose pages may call /api/ from a browser
 *                     (cors.h); "" (the default) or "off": CORS off
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
    long long jwt_max_ttl_s;             /* the longest token lifetime accepted */
    char frame_ancestors[512];           /* CSP frame-ancestors of the HTML pages */
    long long max_request_bytes;         /* request bytes buffered per process; 0: default */
};

/* The default budget of order polls per second per HTTP process
 * (poll_rate_max). */
#define SK_CONFIG_POLL_RATE_MAX 2000

/* The default window of purchase batches out to Redis per key set and
 * HTTP process (batches_in_flight; BENCHMARKS.md, "The batch window"). */
#define SK_CONFIG_BATCHES_IN_FLIGHT 2

/* The default admission target: a purchase the process could not answer
 * within it is refused 503 overloaded at once (admit_target_ms). */
#define SK_CONFIG_ADMIT_TARGET_MS 50

/* Shortest hmac_secret (and hmac_secret_prev) and admin_token accepted. */
#define SK_CONFIG_SECRET_MIN 16

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

/* SECKILL_<KEY> entries of a NULL-terminated "NAME=VALUE" array (environ,
 * or a test's own; NULL is an empty environment). Other SECKILL_* names
 * (SECKILL_BIN, SECKILL_CONFIG, ...) are ignored, and an empty value counts
 * as unset. */
int sk_config_apply_env(struct sk_config *c, char *const *envp, char *err, size_t cap);

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
