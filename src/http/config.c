/* config.c - the configuration keys of every command: one validating setter per key, shared
 * by flags, the config file and SECKILL_* variables, so a value is checked
 * the same way wherever it comes from. No I/O, no heap. */
#include "http/config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "core/num.h"
#include "core/redact.h"
#include "engine/activity.h"
#include "http/captcha.h"
#include "orders/webhooks.h"
#include "redis/redis_url.h"

typedef int (*setter_fn)(struct sk_config *c, const char *v, char *msg, size_t cap);

/* A string key's check: 0 when *v may be stored in its field (max bytes
 * and a terminator; the check may point *v at the text to store instead),
 * else SK_EINVAL with the reason in msg. */
typedef int (*check_fn)(const char **v, size_t max, char *msg, size_t cap);

/* Copies v into dst (a char array of cap bytes) or explains why not. */
static int copy_str(char *dst, size_t dcap, const char *v, char *msg, size_t cap)
{
    size_t n = strlen(v);
    if (n >= dcap) return sk_einval(msg, cap, "too long (at most %zu bytes)", dcap - 1);
    memcpy(dst, v, n + 1);
    return 0;
}

static int has_ctl(const char *v)
{
    for (; *v; v++)
        if ((unsigned char)*v < 0x20 || *v == 0x7f) return 1;
    return 0;
}

/* Decimal digits only (no sign, no spaces), value in [lo, hi] (lo >= 0). */
static int parse_range(const char *v, long long lo, long long hi, long long *out)
{
    uint64_t x;
    if (lo < 0 || sk_num_u64_range(v, strlen(v), (uint64_t)lo, (uint64_t)hi, &x)) return SK_EINVAL;
    *out = (long long)x;
    return 0;
}

/* (no setlocale anywhere: the ctype.h classes are ASCII's) */
static int is_host_char(char ch)
{
    return isalnum((unsigned char)ch) || ch == '.' || ch == '-' || ch == '_';
}

/* HOST:PORT, [v6]:PORT (listen). */
static int check_hostport(const char **vp, size_t max, char *msg, size_t cap)
{
    const char *v = *vp, *colon = strrchr(v, ':');
    (void)max;
    if (!colon || colon == v)
        return sk_einval(msg, cap, "must be HOST:PORT, e.g. 127.0.0.1:8080 or [::1]:8080");
    size_t hl = (size_t)(colon - v);
    if (v[0] == '[') { /* [IPv6]:port */
        if (hl < 3 || v[hl - 1] != ']')
            return sk_einval(msg, cap, "an IPv6 host must be written [addr]:PORT");
        for (size_t i = 1; i < hl - 1; i++)
            if (!isxdigit((unsigned char)v[i]) && v[i] != ':' && v[i] != '.')
                return sk_einval(msg, cap, "bad IPv6 address");
    } else {
        for (size_t i = 0; i < hl; i++)
            if (!is_host_char(v[i]))
                return sk_einval(msg, cap,
                                 "host may hold letters, digits, '.', '-' (IPv6: [addr]:PORT)");
    }
    long long port;
    if (parse_range(colon + 1, 1, 65535, &port) < 0)
        return sk_einval(msg, cap, "port must be a number between 1 and 65535");
    return 0;
}

/* "" (or "off") turns the ops listener off. */
static int check_ops_listen(const char **v, size_t max, char *msg, size_t cap)
{
    if (!strcmp(*v, "off")) *v = "";
    return (*v)[0] ? check_hostport(v, max, msg, cap) : 0;
}

static int starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static int check_redis(const char **vp, size_t max, char *msg, size_t cap)
{
    const char *v = *vp;
    (void)max;
    if (starts_with(v, "redis://") || starts_with(v, "redis+sentinel://") ||
        starts_with(v, "redis+unix://")) {
        struct sk_redis_url u;
        char e[160];
        if (sk_redis_url_parse(&u, v, strlen(v), e, sizeof e) < 0)
            return sk_einval(msg, cap, "%s", e);
    } else if (starts_with(v, "redis+cluster://")) {
        /* seed list checked by the cluster client; here only its shape */
        if (!v[16] || has_ctl(v) || strchr(v, ' '))
            return sk_einval(msg, cap, "redis+cluster:// needs host:port seeds, no spaces");
    } else {
        return sk_einval(msg, cap,
                         "must start with redis://, redis+cluster://, redis+sentinel:// or "
                         "redis+unix://");
    }
    return 0;
}

static int check_db(const char **vp, size_t max, char *msg, size_t cap)
{
    const char *v = *vp;
    (void)max;
    int ok = (starts_with(v, "sqlite:") && v[7]) || (starts_with(v, "postgres://") && v[11]) ||
             (starts_with(v, "postgresql://") && v[13]) || (starts_with(v, "mysql://") && v[8]) ||
             (starts_with(v, "mariadb://") && v[10]);
    if (!ok || has_ctl(v))
        return sk_einval(msg, cap, "must be sqlite:PATH, postgres://... or mysql://...");
    return 0;
}

/* The admin token travels as "Authorization: Bearer <token>": no spaces
 * possible. */
static int check_token(const char **v, size_t max, char *msg, size_t cap)
{
    (void)max;
    for (const char *p = *v; *p; p++)
        if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f)
            return sk_einval(msg, cap, "must be printable ASCII without spaces");
    return 0;
}

/* The index of v among words (NULL-terminated), or -1. */
static int word_index(const char *v, const char *const *words)
{
    for (int i = 0; words[i]; i++)
        if (strcmp(v, words[i]) == 0) return i;
    return -1;
}

static int set_auth(struct sk_config *c, const char *v, char *msg, size_t cap)
{
    static const char *const words[] = {"trusted-header", "hmac", "jwt", NULL};
    int i = word_index(v, words);
    if (i < 0) return sk_einval(msg, cap, "must be trusted-header, hmac or jwt");
    c->auth_hmac = i == 1;
    c->auth_jwt = i == 2;
    return 0;
}

static int set_role(struct sk_config *c, const char *v, char *msg, size_t cap)
{
    /* in the order of enum sk_config_role */
    static const char *const words[] = {"all", "api", "worker", NULL};
    int i = word_index(v, words);
    if (i < 0) return sk_einval(msg, cap, "must be all, api or worker");
    c->role = (enum sk_config_role)i;
    return 0;
}

static int check_log_level(const char **v, size_t max, char *msg, size_t cap)
{
    enum sk_log_level l;
    (void)max;
    if (sk_log_parse_level(*v, &l) < 0)
        return sk_einval(msg, cap, "must be debug, info, warn or error");
    return 0;
}

/* A path to a secret (or a key set): "" clears it. */
static int check_path(const char **v, size_t max, char *msg, size_t cap)
{
    (void)max;
    if (has_ctl(*v)) return sk_einval(msg, cap, "must be a file path without control characters");
    return 0;
}

/* A key id or a site key: up to max letters, digits, '_' or '-' ("" for
 * none); a site key goes into the page's JSON and the widget's markup. */
static int check_key_id(const char **vp, size_t max, char *msg, size_t cap)
{
    const char *v = *vp;
    size_t n = strlen(v);
    int ok = n <= max;
    for (size_t i = 0; ok && i < n; i++)
        ok = isalnum((unsigned char)v[i]) || v[i] == '_' || v[i] == '-';
    if (!ok) return sk_einval(msg, cap, "must be up to %zu letters, digits, '_' or '-'", max);
    return 0;
}

static int set_redis_functions(struct sk_config *c, const char *v, char *msg, size_t cap)
{
    static const char *const words[] = {"off", "on", NULL};
    int i = word_index(v, words);
    if (i < 0) return sk_einval(msg, cap, "must be on or off");
    c->redis_functions = i;
    return 0;
}

static int set_cors_origins(struct sk_config *c, const char *v, char *msg, size_t cap)
{
    return sk_cors_parse_list(v, c->cors_origins, sizeof c->cors_origins, msg, cap);
}

/* A claim value to match, or a secret: no control characters. */
static int check_no_ctl(const char **v, size_t max, char *msg, size_t cap)
{
    (void)max;
    if (has_ctl(*v)) return sk_einval(msg, cap, "must not hold control characters");
    return 0;
}

static int check_captcha_provider(const char **v, size_t max, char *msg, size_t cap)
{
    (void)max;
    if ((*v)[0] && !sk_activity_captcha_valid(*v))
        return sk_einval(msg, cap, "must be turnstile, hcaptcha or recaptcha (or empty: none)");
    return 0;
}

/* "" (the provider's own), or an http(s) URL without spaces or quotes. */
static int check_verify_url(const char **vp, size_t max, char *msg, size_t cap)
{
    const char *v = *vp;
    (void)max;
    int ok = !v[0] || ((starts_with(v, "http://") && v[7]) || (starts_with(v, "https://") && v[8]));
    for (const char *p = v; ok && *p; p++)
        ok = (unsigned char)*p > ' ' && (unsigned char)*p < 0x7f && *p != '"' && *p != '\\';
    if (!ok)
        return sk_einval(msg, cap, "must be an http:// or https:// URL without spaces (or empty)");
    return 0;
}

/* "" (the provider's own), or a script URL captcha.h takes. */
static int check_script_url(const char **v, size_t max, char *msg, size_t cap)
{
    char origin[SK_CAPTCHA_SCRIPT_MAX], why[96];
    (void)max;
    if ((*v)[0] && sk_captcha_script_check(*v, origin, sizeof origin, why, sizeof why) < 0)
        return sk_einval(msg, cap, "%s (or empty: the provider's own)", why);
    return 0;
}

static int set_captcha_fail(struct sk_config *c, const char *v, char *msg, size_t cap)
{
    static const char *const words[] = {"closed", "open", NULL};
    int i = word_index(v, words);
    if (i < 0) return sk_einval(msg, cap, "must be open or closed");
    c->captcha_fail_open = i;
    return 0;
}

static int check_hostname(const char **v, size_t max, char *msg, size_t cap)
{
    (void)max;
    for (const char *p = *v; *p; p++)
        if (!is_host_char(*p))
            return sk_einval(msg, cap,
                             "must be a host name: letters, digits, '.', '-' (or empty: any)");
    return 0;
}

/* A CSP source list for frame-ancestors: 'self', 'none' (alone), or
 * sources of letters, digits and . - : / * (https://shop.example,
 * *.example.com:443); nothing that could end the directive or the header
 * (';', ',', quotes elsewhere, control characters). */
static int check_frame_ancestors(const char **vp, size_t max, char *msg, size_t cap)
{
    int n = 0, none = 0;
    (void)max;
    for (const char *p = *vp; *p;) {
        while (*p == ' ')
            p++;
        if (!*p) break;
        const char *e = p;
        while (*e && *e != ' ')
            e++;
        size_t len = (size_t)(e - p);
        int ok = (len == 6 && !strncmp(p, "'self'", 6)) || (len == 6 && !strncmp(p, "'none'", 6));
        none |= len == 6 && !strncmp(p, "'none'", 6);
        for (size_t i = 0; !ok && i < len; i++) {
            if (!isalnum((unsigned char)p[i]) && !strchr(".-:/*", p[i])) break;
            ok = i + 1 == len;
        }
        if (!ok)
            return sk_einval(msg, cap,
                             "must be 'self', 'none' or sources such as https://shop.example, "
                             "separated by spaces");
        n++;
        p = e;
    }
    if (n == 0 || (none && n > 1))
        return sk_einval(msg, cap, "must name at least one source ('none' alone)");
    return 0;
}

static int check_claim_name(const char **v, size_t max, char *msg, size_t cap)
{
    (void)max;
    if (!(*v)[0] || has_ctl(*v)) return sk_einval(msg, cap, "must name a claim (e.g. sub)");
    return 0;
}

int sk_config_is_trusted_proxy(const struct sk_config *c, const struct sk_ip *ip)
{
    return sk_cidr_match(c->trusted_proxies, c->n_trusted_proxies, ip);
}

/* "10.0.0.0/8, 127.0.0.1, ::1" -> up to SK_CONFIG_PROXIES_MAX networks;
 * "" clears the list. */
static int set_trusted_proxies(struct sk_config *c, const char *v, char *msg, size_t cap)
{
    struct sk_cidr list[SK_CONFIG_PROXIES_MAX];
    int n = 0;
    for (const char *p = v; *p;) {
        while (*p == ' ' || *p == ',')
            p++;
        if (!*p) break;
        const char *e = p;
        while (*e && *e != ',' && *e != ' ')
            e++;
        if (n == SK_CONFIG_PROXIES_MAX)
            return sk_einval(msg, cap, "at most %d entries", SK_CONFIG_PROXIES_MAX);
        int bad_prefix;
        if (sk_cidr_parse(p, (size_t)(e - p), &list[n], &bad_prefix) < 0) {
            if (bad_prefix)
                snprintf(msg, cap, "entry %d: prefix length must be 0..%d", n + 1,
                         list[n].ip.v6 ? 128 : 32);
            else
                snprintf(msg, cap, "entry %d is not an IP address or CIDR (e.g. 10.0.0.0/8)",
                         n + 1);
            return SK_EINVAL;
        }
        n++;
        p = e;
    }
    memcpy(c->trusted_proxies, list, sizeof list[0] * (size_t)n);
    c->n_trusted_proxies = n;
    return 0;
}

/* ---- the webhook endpoint: each part checked as the dispatcher will ---- */

_Static_assert(sizeof((struct sk_config *)0)->webhook_url == SK_WH_URL_MAX &&
                   sizeof((struct sk_config *)0)->webhook_name == SK_WH_NAME_MAX &&
                   sizeof((struct sk_config *)0)->webhook_secret == SK_WH_SECRET_MAX &&
                   sizeof((struct sk_config *)0)->webhook_events == SK_WH_FILTER_MAX,
               "the webhook keys hold what an endpoint holds");

static int check_webhook_url(const char **vp, size_t max, char *msg, size_t cap)
{
    const char *v = *vp;
    (void)max;
    if (v[0] &&
        ((strncmp(v, "http://", 7) && strncmp(v, "https://", 8)) || has_ctl(v) || strchr(v, ' ')))
        return sk_einval(msg, cap, "must be an http:// or https:// URL without spaces, or \"\"");
    return 0;
}

static int check_webhook_name(const char **v, size_t max, char *msg, size_t cap)
{
    (void)max;
    if (!sk_wh_name_ok(*v)) return sk_einval(msg, cap, "must be 1 to 63 of A-Z a-z 0-9 _ . -");
    return 0;
}

/* A whsec_ secret or ""; the refusal never quotes it. */
static int check_wh_secret(const char **v, size_t max, char *msg, size_t cap)
{
    struct sk_wh_key k;
    char why[160];
    if ((*v)[0] && (strlen(*v) > max || sk_wh_key_parse(*v, &k, why, sizeof why) < 0))
        return sk_einval(msg, cap, "%s", strlen(*v) > max ? "too long" : why);
    return 0;
}

/* Event types or prefixes; "*" is all, as "". */
static int check_webhook_events(const char **v, size_t max, char *msg, size_t cap)
{
    (void)max;
    if (strspn(*v, "abcdefghijklmnopqrstuvwxyz_.,* ") != strlen(*v))
        return sk_einval(msg, cap,
                         "must be event types or prefixes (order.paid, order.), comma-separated");
    if (!strcmp(*v, "*")) *v = "";
    return 0;
}

/* The table, public part: what each key is (config.h). */
const struct sk_config_key sk_config_keys[SK_CONFIG_NKEYS] = {
#define SK_CFG_SET(key, setter, arg, uses, def, flags, help)                                       \
    {#key, arg, def, help, uses, flags, 0, 0, 0, NULL, NULL},
#define SK_CFG_STR(key, check, pair, arg, uses, def, flags, help)                                  \
    {#key, arg, def, help, uses, flags, 0, 0, 0, NULL, NULL},
#define SK_CFG_NUM(key, field, lo, hi, unit, lo_means, arg, uses, def, flags, help)                \
    {#key, arg, def, help, uses, flags, 1, lo, hi, unit, lo_means},
#include "http/config_keys.def"
#undef SK_CFG_SET
#undef SK_CFG_STR
#undef SK_CFG_NUM
};

/* The table, private part: how each key is stored. A setter; or (fn NULL)
 * a string, checked and copied into the char array at off (pair: the key
 * it clears); or a number in the int or long long field at off, within the
 * key's bounds (nginx's ngx_conf_num_bounds_t: digits only, lo..hi; the
 * refusal names the unit and what lo means when it means something, "0
 * (off)"). */
#define KEY_OFF(field) offsetof(struct sk_config, field)
#define KEY_SIZE(field) sizeof(((struct sk_config *)0)->field)
static const struct {
    setter_fn fn;
    check_fn check;
    size_t off, size, pair;
} keys[SK_CONFIG_NKEYS] = {
#define SK_CFG_SET(key, setter, ...) {setter, NULL, 0, 0, 0},
#define SK_CFG_STR(key, check, pair, ...) {NULL, check, KEY_OFF(key), KEY_SIZE(key), KEY_OFF(pair)},
#define SK_CFG_NUM(key, field, ...) {NULL, NULL, KEY_OFF(field), KEY_SIZE(field), 0},
#include "http/config_keys.def"
#undef SK_CFG_SET
#undef SK_CFG_STR
#undef SK_CFG_NUM
};
#define NKEYS ((size_t)SK_CONFIG_NKEYS)

/* A key as it may appear in messages: printable, at most 40 bytes. */
static void printable(char *dst, size_t dcap, const char *s)
{
    size_t o = 0;
    for (; *s && o + 1 < dcap && o < 40; s++)
        dst[o++] = ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e) ? '?' : *s;
    dst[o] = 0;
}

int sk_config_key_find(const char *key)
{
    if (!key) return SK_ENOTFOUND;
    for (size_t i = 0; i < NKEYS; i++) {
        const char *a = sk_config_keys[i].name, *b = key;
        while (*a && (*a == *b || (*a == '_' && *b == '-'))) {
            a++;
            b++;
        }
        if (!*a && !*b) return (int)i;
    }
    return SK_ENOTFOUND;
}

/* A numeric option: v within key k's bounds, stored in its field. */
static int set_num(struct sk_config *c, size_t k, const char *v, char *msg, size_t cap)
{
    const struct sk_config_key *b = &sk_config_keys[k];
    long long n;
    if (parse_range(v, b->lo, b->hi, &n) < 0)
        return sk_einval(msg, cap, "must be a number%s%s between %lld%s and %lld",
                         b->unit ? " of " : "", b->unit ? b->unit : "", b->lo,
                         b->lo_means ? b->lo_means : "", b->hi);
    char *field = (char *)c + keys[k].off;
    if (keys[k].size == sizeof(int)) {
        int i = (int)n;
        memcpy(field, &i, sizeof i);
    } else {
        memcpy(field, &n, sizeof n);
    }
    return 0;
}

/* A string key: its check, then the copy. A secret clears its file, and a
 * file (unless "") its secret, so the later source wins. */
static int set_str(struct sk_config *c, size_t k, const char *v, char *msg, size_t cap)
{
    if (keys[k].check && keys[k].check(&v, keys[k].size - 1, msg, cap) < 0) return SK_EINVAL;
    int rc = copy_str((char *)c + keys[k].off, keys[k].size, v, msg, cap);
    if (rc == 0 && keys[k].pair != keys[k].off &&
        (v[0] || (sk_config_keys[k].flags & SK_KEY_SECRET)))
        ((char *)c + keys[k].pair)[0] = 0;
    return rc;
}

/* Option i of keys[] set to v: its setter, its check, or its bounds. */
static int set_key(struct sk_config *c, size_t i, const char *v, char *msg, size_t cap)
{
    if (keys[i].fn) return keys[i].fn(c, v, msg, cap);
    if (!sk_config_keys[i].is_num) return set_str(c, i, v, msg, cap);
    return set_num(c, i, v, msg, cap);
}

void sk_config_defaults(struct sk_config *c)
{
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < NKEYS; i++) {
        char msg[200];
        /* a default its own setter refuses is a bug in the table: the
         * unit test config_defaults_pass_their_own_setters catches it */
        (void)set_key(c, i, sk_config_keys[i].def, msg, sizeof msg);
    }
}

int sk_config_set_key(struct sk_config *c, int k, const char *value, char *err, size_t cap)
{
    if (err && cap) err[0] = 0;
    if (k < 0 || (size_t)k >= NKEYS || !value) return sk_einval(err, cap, "missing key or value");
    char msg[200] = "";
    if (set_key(c, (size_t)k, value, msg, sizeof msg) < 0)
        return sk_einval(err, cap, "%s: %s", sk_config_keys[k].name, msg);
    return 0;
}

int sk_config_set(struct sk_config *c, const char *key, const char *value, char *err, size_t cap)
{
    if (err && cap) err[0] = 0;
    if (!key || !value) return sk_einval(err, cap, "missing key or value");
    for (size_t i = 0; i < NKEYS; i++)
        if (strcmp(sk_config_keys[i].name, key) == 0)
            return sk_config_set_key(c, (int)i, value, err, cap);
    char k[48];
    printable(k, sizeof k, key);
    return sk_einval(err, cap, "unknown option \"%s\"", k);
}

/* The trusted proxies as the setter takes them: "10.0.0.0/8,::1". */
static void proxies_text(const struct sk_config *c, char *out, size_t cap)
{
    size_t o = 0;
    out[0] = 0;
    for (int i = 0; i < c->n_trusted_proxies && o < cap; i++) {
        char ip[SK_IP_TEXT];
        sk_ip_format(&c->trusted_proxies[i].ip, ip);
        int full = c->trusted_proxies[i].bits == (c->trusted_proxies[i].ip.v6 ? 128 : 32);
        int n = full ? snprintf(out + o, cap - o, "%s%s", i ? "," : "", ip)
                     : snprintf(out + o, cap - o, "%s%s/%d", i ? "," : "", ip,
                                c->trusted_proxies[i].bits);
        if (n < 0) break;
        o += (size_t)n;
    }
}

const char *sk_config_value(const struct sk_config *c, int k, char *out, size_t cap)
{
    if (!cap) return out;
    out[0] = 0;
    if (k < 0 || (size_t)k >= NKEYS) return out;
    const struct sk_config_key *key = &sk_config_keys[k];
    const char *text = NULL;
    if (key->is_num) {
        const char *field = (const char *)c + keys[k].off;
        long long n;
        if (keys[k].size == sizeof(int)) {
            int i;
            memcpy(&i, field, sizeof i);
            n = i;
        } else {
            memcpy(&n, field, sizeof n);
        }
        snprintf(out, cap, "%lld", n);
        return out;
    }
    switch (keys[k].fn ? k : -1) {
    case -1: text = (const char *)c + keys[k].off; break;
    case SK_CK_role: text = sk_config_role_name(c->role); break;
    case SK_CK_auth: text = sk_config_auth_name(c); break;
    case SK_CK_trusted_proxies: proxies_text(c, out, cap); return out;
    case SK_CK_redis_functions: text = c->redis_functions ? "on" : "off"; break;
    case SK_CK_cors_origins: text = c->cors_origins; break;
    case SK_CK_captcha_fail: text = c->captcha_fail_open ? "open" : "closed"; break;
    default: text = "?"; break; /* a new key with a setter of its own, without its line here */
    }
    if ((key->flags & SK_KEY_SECRET))
        snprintf(out, cap, "%s", text[0] ? "(set)" : "");
    else if ((key->flags & SK_KEY_URL))
        sk_redact_url(text, out, cap);
    else
        snprintf(out, cap, "%s", text);
    return out;
}

/* prefix + key k's name, each character through map. */
static const char *key_name(int k, const char *prefix, char (*map)(char), char *out, size_t cap)
{
    if (!cap) return out;
    size_t n = (size_t)snprintf(out, cap, "%s", prefix);
    const char *name = k >= 0 && (size_t)k < NKEYS ? sk_config_keys[k].name : "";
    for (; *name && n + 1 < cap; name++)
        out[n++] = map(*name);
    if (n < cap) out[n] = 0;
    return out;
}

static char dash(char ch)
{
    return ch == '_' ? '-' : ch;
}

static char upper(char ch)
{
    return (ch >= 'a' && ch <= 'z') ? (char)(ch - 'a' + 'A') : ch;
}

const char *sk_config_flag_name(int k, char *out, size_t cap)
{
    return key_name(k, "--", dash, out, cap);
}

const char *sk_config_env_name(int k, char *out, size_t cap)
{
    return key_name(k, "SECKILL_", upper, out, cap);
}

const char *sk_config_uses_text(unsigned uses, char *out, size_t cap)
{
    static const char *const names[] = {"serve", "worker", "activity", "reconcile"};
    size_t o = 0;
    if (cap) out[0] = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (!(uses & (1u << i)) || o >= cap) continue;
        int n = snprintf(out + o, cap - o, "%s%s", o ? ", " : "", names[i]);
        if (n > 0) o += (size_t)n;
    }
    return out;
}

int sk_config_set_flag(struct sk_config *c, const char *flag, const char *value, char *err,
                       size_t cap)
{
    char key[64];
    size_t n = flag ? strlen(flag) : 0;
    if (n >= sizeof key) n = sizeof key - 1; /* too long to be a key: fails below */
    for (size_t i = 0; i < n; i++)
        key[i] = flag[i] == '-' ? '_' : flag[i];
    key[n] = 0;
    int rc = sk_config_set(c, key, value, err, cap);
    if (rc < 0 && err && cap && strncmp(err, "unknown option", 14) == 0) {
        char f[48];
        printable(f, sizeof f, flag ? flag : "");
        sk_einval(err, cap, "unknown option --%s", f);
    }
    return rc;
}

/* ---- config file ------------------------------------------------------------ */

static int is_ws(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r';
}

/* One line [p, e) (no '\n'). Sets *key and *val (terminated copies). Returns
 * 1 for a key = value line, 0 for blank/comment, SK_EINVAL with msg. */
static int parse_line(const char *p, const char *e, char *key, size_t kcap, char *val, size_t vcap,
                      char *msg, size_t cap)
{
    while (p < e && is_ws(*p))
        p++;
    if (p == e || *p == '#') return 0;
    size_t kl = 0;
    while (p < e && (isalnum((unsigned char)*p) || *p == '_' || *p == '-')) {
        if (kl + 1 >= kcap) return sk_einval(msg, cap, "key too long");
        key[kl++] = *p == '-' ? '_' : *p;
        p++;
    }
    key[kl] = 0;
    if (kl == 0) return sk_einval(msg, cap, "expected key = value");
    while (p < e && is_ws(*p))
        p++;
    if (p == e || *p != '=') return sk_einval(msg, cap, "expected '=' after %s", key);
    p++;
    while (p < e && is_ws(*p))
        p++;
    size_t vl = 0;
#define PUTV(ch)                                                                                   \
    do {                                                                                           \
        if (vl + 1 >= vcap) {                                                                      \
            snprintf(msg, cap, "value of %s too long", key);                                       \
            return SK_EINVAL;                                                                      \
        }                                                                                          \
        val[vl++] = (ch);                                                                          \
    } while (0)
    if (p < e && (*p == '"' || *p == '\'')) {
        char q = *p++;
        int closed = 0;
        while (p < e) {
            char ch = *p++;
            if (ch == q) {
                closed = 1;
                break;
            }
            if (q == '"' && ch == '\\') {
                if (p == e) break;
                char x = *p++;
                if (x == 'n')
                    ch = '\n';
                else if (x == 't')
                    ch = '\t';
                else if (x == '"' || x == '\\')
                    ch = x;
                else {
                    return sk_einval(
                        msg, cap, "unknown escape in the value of %s (use \\\" \\\\ \\n \\t)", key);
                }
            }
            PUTV(ch);
        }
        if (!closed) return sk_einval(msg, cap, "unterminated quote in the value of %s", key);
        while (p < e && is_ws(*p))
            p++;
        if (p < e && *p != '#')
            return sk_einval(msg, cap, "unexpected text after the quoted value of %s", key);
    } else {
        const char *start = p;
        while (p < e && !(*p == '#' && (p == start || is_ws(p[-1])))) {
            PUTV(*p);
            p++;
        }
        while (vl > 0 && is_ws(val[vl - 1]))
            vl--;
    }
#undef PUTV
    val[vl] = 0;
    return 1;
}

int sk_config_parse_file_seen(struct sk_config *c, const char *buf, size_t len,
                              sk_config_seen_fn seen, void *arg, char *err, size_t cap)
{
    if (err && cap) err[0] = 0;
    if (len && !buf) return sk_einval(err, cap, "no config text");
    if (len && memchr(buf, 0, len)) {
        int line = 1;
        for (const char *q = buf; *q; q++)
            line += *q == '\n';
        return sk_einval(err, cap, "line %d: NUL byte in the config file", line);
    }
    const char *p = buf, *end = buf + len;
    if (len >= 3 && memcmp(p, "\xef\xbb\xbf", 3) == 0) p += 3; /* UTF-8 BOM from editors */
    for (int line = 1; p < end; line++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl ? nl : end;
        char key[64], val[1024], msg[200] = "";
        int rc = parse_line(p, e, key, sizeof key, val, sizeof val, msg, sizeof msg);
        if (rc < 0) return sk_einval(err, cap, "line %d: %s", line, msg);
        if (rc == 1) {
            char e2[256];
            if (sk_config_set(c, key, val, e2, sizeof e2) < 0)
                return sk_einval(err, cap, "line %d: %s", line, e2);
            if (seen) seen(arg, sk_config_key_find(key), line);
        }
        p = nl ? nl + 1 : end;
    }
    return 0;
}

int sk_config_parse_file(struct sk_config *c, const char *buf, size_t len, char *err, size_t cap)
{
    return sk_config_parse_file_seen(c, buf, len, NULL, NULL, err, cap);
}

/* ---- environment ------------------------------------------------------------ */

int sk_config_apply_env_seen(struct sk_config *c, char *const *envp, sk_config_seen_fn seen,
                             void *arg, char *err, size_t cap)
{
    if (err && cap) err[0] = 0;
    static const char prefix[] = "SECKILL_";
    for (; envp && *envp; envp++) {
        const char *kv = *envp;
        if (strncmp(kv, prefix, sizeof prefix - 1) != 0) continue;
        const char *name = kv + sizeof prefix - 1, *eq = strchr(name, '=');
        if (!eq || eq[1] == 0) continue; /* empty: unset */
        size_t n = (size_t)(eq - name);
        char key[64];
        if (n == 0 || n >= sizeof key) continue;
        for (size_t i = 0; i < n; i++) {
            char ch = name[i];
            key[i] = (ch >= 'A' && ch <= 'Z') ? (char)(ch - 'A' + 'a') : ch;
        }
        key[n] = 0;
        size_t k = 0;
        while (k < NKEYS && strcmp(sk_config_keys[k].name, key) != 0)
            k++;
        if (k == NKEYS) continue; /* SECKILL_BIN and friends belong to others */
        char msg[200] = "";
        if (set_key(c, k, eq + 1, msg, sizeof msg) < 0)
            return sk_einval(err, cap, "SECKILL_%.*s: %s", (int)n, name, msg);
        if (seen) seen(arg, (int)k, 0);
    }
    return 0;
}

int sk_config_apply_env(struct sk_config *c, char *const *envp, char *err, size_t cap)
{
    return sk_config_apply_env_seen(c, envp, NULL, NULL, err, cap);
}

/* SK_EINVAL when the secret key holds (set) is shorter than
 * SK_CONFIG_SECRET_MIN. */
static int short_secret(const char *key, const char *v, char *err, size_t cap)
{
    if (!v[0] || strlen(v) >= SK_CONFIG_SECRET_MIN) return 0;
    return sk_einval(err, cap, "%s must be at least %d bytes (a random one: openssl rand -hex 32)",
                     key, SK_CONFIG_SECRET_MIN);
}

int sk_config_validate(const struct sk_config *c, char *err, size_t cap)
{
    if (err && cap) err[0] = 0;
    if (c->auth_hmac && !c->hmac_secret[0])
        return sk_einval(err, cap,
                         "auth=hmac needs hmac_secret (--hmac-secret-file, SECKILL_HMAC_SECRET, "
                         "hmac_secret in the config file or --hmac-secret)");
    if (c->auth_hmac && short_secret("hmac_secret", c->hmac_secret, err, cap) < 0) return SK_EINVAL;
    if (c->auth_hmac && c->hmac_secret_prev[0] &&
        strlen(c->hmac_secret_prev) < SK_CONFIG_SECRET_MIN)
        return sk_einval(err, cap, "hmac_secret_prev must be at least %d bytes",
                         SK_CONFIG_SECRET_MIN);
    if (c->auth_hmac && c->hmac_secret_prev[0] && !strcmp(c->hmac_key_id, c->hmac_key_id_prev))
        return sk_einval(err, cap,
                         "hmac_key_id_prev must differ from hmac_key_id: a token's key id "
                         "names the one secret that checks it");
    if (c->auth_hmac && c->hmac_key_id_prev[0] && !c->hmac_secret_prev[0])
        return sk_einval(err, cap, "hmac_key_id_prev is set but hmac_secret_prev is not");
    if (c->auth_jwt && !c->jwks_file[0])
        return sk_einval(err, cap, "auth=jwt needs jwks_file (--jwks-file F: a JSON Web Key Set)");
    /* a token the same identity provider minted for another application
     * would buy here (RFC 8725 section 3.9) */
    if (c->auth_jwt && !c->jwt_audience[0])
        return sk_einval(err, cap,
                         "auth=jwt needs jwt_audience (--jwt-audience AUD: the \"aud\" your "
                         "identity provider puts in this service's tokens; '*' accepts any)");
    if (short_secret("admin_token", c->admin_token, err, cap) < 0) return SK_EINVAL;
    if (sk_config_webhook_check(c, err, cap) < 0) return SK_EINVAL;
    if (c->max_request_bytes && c->max_request_bytes < 1048576)
        return sk_einval(err, cap, "max_request_bytes must be 0 or at least 1048576");
    if (c->max_request_bytes && c->max_request_bytes < 2 * (c->max_body + 16384))
        return sk_einval(err, cap,
                         "max_request_bytes must hold two whole requests: at least twice "
                         "max_body + 16384 bytes");
    if (c->processes < 1 || c->processes > 64)
        return sk_einval(err, cap, "processes must be 1..64");
    if (!c->listen[0]) return sk_einval(err, cap, "listen is empty");
    if (c->ops_listen[0] && !strcmp(c->ops_listen, c->listen))
        return sk_einval(err, cap, "ops_listen must differ from listen");
    if (short_secret("challenge_secret", c->challenge_secret, err, cap) < 0) return SK_EINVAL;
    if (c->captcha_provider[0] && (!c->captcha_site_key[0] || !c->captcha_secret[0]))
        return sk_einval(err, cap,
                         "captcha_provider %s needs captcha_site_key and captcha_secret (or "
                         "captcha_secret_file)",
                         c->captcha_provider);
    if (!c->captcha_provider[0] && (c->captcha_site_key[0] || c->captcha_secret[0]))
        return sk_einval(err, cap,
                         "captcha_site_key and captcha_secret need captcha_provider "
                         "(turnstile, hcaptcha or recaptcha)");
    return 0;
}

int sk_config_webhook_check(const struct sk_config *c, char *err, size_t cap)
{
    if (c->webhook_url[0] && !c->webhook_secret[0])
        return sk_einval(err, cap,
                         "webhook_url needs webhook_secret (whsec_ and the base64 of 24 to 64 "
                         "random bytes: echo whsec_$(openssl rand -base64 32))");
    if (!c->webhook_secret[0] && c->webhook_secret_prev[0])
        return sk_einval(err, cap, "webhook_secret_prev is set but webhook_secret is not");
    return 0;
}

/* A URL's password: "user:pass@" or ":pass@" before the host. */
static int url_has_password(const char *u)
{
    const char *p = strstr(u, "://");
    if (!p) return 0;
    p += 3;
    const char *at = strchr(p, '@'), *slash = strchr(p, '/');
    if (!at || (slash && slash < at)) return strstr(u, "password=") != NULL;
    const char *colon = memchr(p, ':', (size_t)(at - p));
    return (colon && colon + 1 < at) || strstr(u, "password=") != NULL;
}

const char *sk_config_secret_held(const struct sk_config *c)
{
    if (c->admin_token[0]) return "admin_token";
    if (c->hmac_secret[0]) return "hmac_secret";
    if (c->hmac_secret_prev[0]) return "hmac_secret_prev";
    if (c->challenge_secret[0]) return "challenge_secret";
    if (c->captcha_secret[0]) return "captcha_secret";
    if (c->webhook_secret[0]) return "webhook_secret";
    if (c->webhook_secret_prev[0]) return "webhook_secret_prev";
    if (url_has_password(c->redis)) return "redis password";
    if (url_has_password(c->db)) return "db password";
    return NULL;
}

const char *sk_config_auth_name(const struct sk_config *c)
{
    return c->auth_jwt ? "jwt" : c->auth_hmac ? "hmac" : "trusted-header";
}

const char *sk_config_role_name(enum sk_config_role r)
{
    switch (r) {
    case SK_ROLE_API: return "api";
    case SK_ROLE_WORKER: return "worker";
    default: return "all";
    }
}
