/* captcha.c - the CAPTCHA providers, their siteverify request and the
 * verdict on its answer (captcha.h). */
#include "http/captcha.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "core/error.h"

/* Each provider as its documentation gives it: the widget's script, the
 * origins its Content-Security-Policy reference asks for, siteverify. */
static const struct sk_captcha_provider providers[] = {
    {"turnstile", "https://challenges.cloudflare.com/turnstile/v0/siteverify",
     "https://challenges.cloudflare.com/turnstile/v0/api.js?render=explicit",
     "script-src https://challenges.cloudflare.com; frame-src https://challenges.cloudflare.com",
     0},
    {"hcaptcha", "https://api.hcaptcha.com/siteverify",
     "https://js.hcaptcha.com/1/api.js?render=explicit",
     "script-src https://hcaptcha.com https://*.hcaptcha.com; frame-src https://hcaptcha.com "
     "https://*.hcaptcha.com; style-src https://hcaptcha.com https://*.hcaptcha.com; connect-src "
     "https://hcaptcha.com https://*.hcaptcha.com",
     1},
    {"recaptcha", "https://www.google.com/recaptcha/api/siteverify",
     "https://www.google.com/recaptcha/api.js?render=explicit",
     "script-src https://www.google.com/recaptcha/ https://www.gstatic.com/recaptcha/; frame-src "
     "https://www.google.com/recaptcha/ https://recaptcha.google.com/recaptcha/",
     0},
};

const struct sk_captcha_provider *sk_captcha_find(const char *name)
{
    for (size_t i = 0; name && i < sizeof providers / sizeof providers[0]; i++)
        if (!strcmp(providers[i].name, name)) return &providers[i];
    return NULL;
}

/* 1 when host (n bytes) is a loopback name or address. */
static int loopback_host(const char *h, size_t n)
{
    if (n == 9 && !strncasecmp(h, "localhost", 9)) return 1;
    if (n == 5 && !memcmp(h, "[::1]", 5)) return 1;
    if (n < 8 || memcmp(h, "127.", 4) != 0) return 0;
    int dots = 0;
    for (size_t i = 0; i < n; i++) {
        if (h[i] == '.')
            dots++;
        else if (h[i] < '0' || h[i] > '9')
            return 0;
    }
    return dots == 3;
}

int sk_captcha_script_check(const char *url, char *origin, size_t cap, char *why, size_t wcap)
{
    if (wcap) why[0] = 0;
    if (cap) origin[0] = 0;
    size_t n = url ? strlen(url) : 0;
    if (n == 0 || n >= SK_CAPTCHA_SCRIPT_MAX)
        return sk_einval(why, wcap, "must be a URL of at most %d bytes", SK_CAPTCHA_SCRIPT_MAX - 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)url[i];
        /* it lands in the page's policy and in JSON: none of their delimiters */
        if (c <= ' ' || c >= 0x7f || strchr("\"'<>\\;,`", c)) {
            return sk_einval(why, wcap, "has a character a script URL here may not hold");
        }
    }
    int tls = !strncmp(url, "https://", 8);
    if (!tls && strncmp(url, "http://", 7) != 0)
        return sk_einval(why, wcap, "must be an https:// URL");
    const char *h = url + (tls ? 8 : 7), *he = h;
    if (*h == '[') {
        he = strchr(h, ']');
        he = he ? he + 1 : h;
    } else {
        while (*he && (isalnum((unsigned char)*he) || *he == '.' || *he == '-'))
            he++;
    }
    const char *oe = he;
    if (*oe == ':') {
        oe++;
        const char *d = oe;
        while (*oe >= '0' && *oe <= '9')
            oe++;
        if (oe == d || oe - d > 5) he = h; /* a port of 1..5 digits */
    }
    if (he == h || (*oe && *oe != '/' && *oe != '?'))
        return sk_einval(why, wcap, "must be scheme://host[:port][/path]");
    if (!tls && !loopback_host(h, (size_t)(he - h)))
        return sk_einval(why, wcap, "must be an https:// URL (http:// only on a loopback host)");
    if ((size_t)(oe - url) >= cap) return sk_einval(why, wcap, "is too long");
    memcpy(origin, url, (size_t)(oe - url));
    origin[oe - url] = 0;
    return 0;
}

int sk_captcha_widget(const struct sk_captcha_provider *p, const char *script_url,
                      const char **script, char *csp, size_t cap)
{
    if (cap) csp[0] = 0;
    if (!script_url || !script_url[0]) {
        *script = p->script_url;
        int n = snprintf(csp, cap, "%s", p->csp);
        return n < 0 || (size_t)n >= cap ? SK_ENOMEM : n;
    }
    char origin[SK_CAPTCHA_SCRIPT_MAX], why[96];
    if (sk_captcha_script_check(script_url, origin, sizeof origin, why, sizeof why) < 0)
        return SK_EINVAL;
    *script = script_url;
    /* the provider's directives, each naming that origin only */
    size_t o = 0;
    for (const char *d = p->csp; *d;) {
        while (*d == ' ' || *d == ';')
            d++;
        const char *ne = d;
        while (*ne && *ne != ' ' && *ne != ';')
            ne++;
        if (ne > d) {
            int k =
                snprintf(csp + o, cap - o, "%s%.*s %s", o ? "; " : "", (int)(ne - d), d, origin);
            if (k < 0 || (size_t)k >= cap - o) {
                if (cap) csp[0] = 0;
                return SK_ENOMEM;
            }
            o += (size_t)k;
        }
        d = strchr(ne, ';');
        if (!d) break;
    }
    return (int)o;
}

int sk_captcha_token_ok(const char *s, size_t len)
{
    if (!s || len < 1 || len > SK_CAPTCHA_TOKEN_MAX) return 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              strchr("_.:*+/=-", c)) ||
            c == 0)
            return 0;
    }
    return 1;
}

/* Appends key=<v form-encoded> (with '&' before it unless first). */
static int field(char *out, size_t cap, size_t *o, const char *key, const char *v, size_t vl)
{
    static const char hex[] = "0123456789ABCDEF";
    int n = snprintf(out + *o, cap - *o, "%s%s=", *o ? "&" : "", key);
    if (n < 0 || (size_t)n >= cap - *o) return SK_ENOMEM;
    *o += (size_t)n;
    for (size_t i = 0; i < vl; i++) {
        unsigned char c = (unsigned char)v[i];
        int plain = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    c == '-' || c == '_' || c == '.' || c == '~';
        if (*o + (plain ? 1 : 3) >= cap) return SK_ENOMEM;
        if (plain) {
            out[(*o)++] = (char)c;
        } else {
            out[(*o)++] = '%';
            out[(*o)++] = hex[c >> 4];
            out[(*o)++] = hex[c & 15];
        }
    }
    out[*o] = 0;
    return 0;
}

int sk_captcha_form(const struct sk_captcha_provider *p, const char *secret, const char *token,
                    size_t token_len, const char *remoteip, const char *site_key, char *out,
                    size_t cap)
{
    size_t o = 0;
    if (cap) out[0] = 0;
    int rc = field(out, cap, &o, "secret", secret, strlen(secret));
    if (rc == 0) rc = field(out, cap, &o, "response", token, token_len);
    if (rc == 0 && remoteip && remoteip[0])
        rc = field(out, cap, &o, "remoteip", remoteip, strlen(remoteip));
    if (rc == 0 && p->sends_sitekey && site_key && site_key[0])
        rc = field(out, cap, &o, "sitekey", site_key, strlen(site_key));
    if (rc < 0) {
        if (cap) out[0] = 0;
        return rc;
    }
    return (int)o;
}

/* 1 when the answer's error-codes name a failure of ours or the provider's
 * (not the token's): then nothing was said about the token. */
static int not_the_tokens_fault(json_t *codes)
{
    static const char *const ours[] = {"missing-input-secret", "invalid-input-secret",
                                       "internal-error",       "sitekey-secret-mismatch",
                                       "invalid-keys",         "bad-request"};
    size_t i;
    json_t *c;
    json_array_foreach(codes, i, c)
    {
        if (!json_is_string(c)) continue;
        for (size_t k = 0; k < sizeof ours / sizeof ours[0]; k++)
            if (!strcmp(json_string_value(c), ours[k])) return 1;
    }
    return 0;
}

/* The first error code, for the log ("" none). */
static const char *first_code(json_t *codes)
{
    json_t *c = json_is_array(codes) ? json_array_get(codes, 0) : NULL;
    return json_is_string(c) ? json_string_value(c) : "";
}

enum sk_captcha_verdict sk_captcha_verdict(int http_status, const char *body, size_t len,
                                           const struct sk_captcha_expect *e, char *why, size_t cap)
{
    if (cap) why[0] = 0;
    if (http_status != 200) {
        snprintf(why, cap, "siteverify answered HTTP %d", http_status);
        return SK_CAPTCHA_ERROR;
    }
    json_error_t je;
    json_t *j = body && len ? json_loadb(body, len, JSON_REJECT_DUPLICATES, &je) : NULL;
    json_t *ok = json_is_object(j) ? json_object_get(j, "success") : NULL;
    enum sk_captcha_verdict v = SK_CAPTCHA_ERROR;
    if (!json_is_boolean(ok)) {
        snprintf(why, cap, "siteverify's answer is not the documented JSON");
    } else if (!json_is_true(ok)) {
        json_t *codes = json_object_get(j, "error-codes");
        int ours = json_is_array(codes) && not_the_tokens_fault(codes);
        snprintf(why, cap, "%s: %.80s", ours ? "siteverify failed" : "token refused",
                 first_code(codes)[0] ? first_code(codes) : "no error code");
        v = ours ? SK_CAPTCHA_ERROR : SK_CAPTCHA_REFUSED;
    } else {
        json_t *host = json_object_get(j, "hostname"), *act = json_object_get(j, "action");
        v = SK_CAPTCHA_PASS;
        if (e && e->hostname && e->hostname[0] &&
            (!json_is_string(host) || strcasecmp(json_string_value(host), e->hostname) != 0)) {
            snprintf(why, cap, "token solved on another host (%.80s)",
                     json_is_string(host) ? json_string_value(host) : "none said");
            v = SK_CAPTCHA_REFUSED;
        } else if (e && e->action && e->action[0] && act && !json_is_null(act) &&
                   (!json_is_string(act) || strcmp(json_string_value(act), e->action) != 0)) {
            snprintf(why, cap, "token made for another action (%.40s)",
                     json_is_string(act) ? json_string_value(act) : "not text");
            v = SK_CAPTCHA_REFUSED;
        } else {
            snprintf(why, cap, "passed");
        }
    }
    json_decref(j);
    return v;
}
