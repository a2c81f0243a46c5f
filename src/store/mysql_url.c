/* mysql_url.c - the MySQL / MariaDB URL parser (mysql_url.h). Takes bytes,
 * does no I/O: unit-tested by strings and fuzzed (tests/fuzz). */
#include "store/mysql_url.h"

#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/num.h"
#include "core/url.h"

static int fail(char *err, size_t cap, const char *msg)
{
    if (cap) snprintf(err, cap, "malformed mysql URL: %s", msg);
    return SK_EINVAL;
}

int sk_mysql_url_is(const char *spec)
{
    return spec && (!strncmp(spec, "mysql://", 8) || !strncmp(spec, "mariadb://", 10));
}

/* The ssl-mode words, in enum order; '-' and '_' are the same. */
static const char *const ssl_modes[] = {"disabled", "preferred", "required", "verify_identity"};

static int ssl_mode_of(const char *v)
{
    for (size_t m = 0; m < sizeof ssl_modes / sizeof ssl_modes[0]; m++) {
        const char *w = ssl_modes[m];
        size_t i = 0;
        for (; w[i] && v[i]; i++) {
            char c = v[i] == '-' ? '_' : v[i];
            if ((c | 0x20) != w[i] && c != w[i]) break;
        }
        if (!w[i] && !v[i]) return (int)m;
    }
    return -1;
}

/* One NAME=VALUE of [p, e) into u. */
static int parse_param(struct sk_mysql_url *u, const char *p, const char *e, char *err,
                       size_t errcap)
{
    const char *eq = memchr(p, '=', (size_t)(e - p));
    if (!eq || eq == p) return fail(err, errcap, "parameters are NAME=VALUE");
    size_t nl = (size_t)(eq - p);
    char val[256];
    if (sk_url_decode(val, sizeof val, eq + 1, (size_t)(e - eq - 1)) < 0)
        return fail(err, errcap, "bad or too long parameter value");
#define IS(name) (nl == sizeof name - 1 && !memcmp(p, name, nl))
    if (IS("socket")) {
        if (val[0] != '/' || strlen(val) >= sizeof u->socket)
            return fail(err, errcap, "socket must be an absolute path of at most 107 bytes");
        memcpy(u->socket, val, strlen(val) + 1);
    } else if (IS("connect_timeout")) {
        uint64_t t;
        if (sk_num_u64_range(val, strlen(val), 1, 3600, &t))
            return fail(err, errcap, "connect_timeout must be 1..3600 seconds");
        u->timeout_s = (int)t;
    } else if (IS("ssl-mode") || IS("ssl_mode") || IS("sslmode")) {
        int m = ssl_mode_of(val);
        if (m < 0)
            return fail(err, errcap,
                        "ssl-mode must be disabled, preferred, required or verify_identity");
        u->ssl_mode = m;
    } else if (IS("ssl-ca") || IS("ssl_ca")) {
        if (!val[0]) return fail(err, errcap, "ssl-ca is empty");
        memcpy(u->ssl_ca, val, strlen(val) + 1);
    } else {
        char msg[96];
        snprintf(msg, sizeof msg, "unknown parameter '%.*s'", (int)(nl > 40 ? 40 : nl), p);
        for (char *c = msg; *c; c++) /* a name is printable, or it is not shown */
            if ((unsigned char)*c < ' ' || (unsigned char)*c >= 127) *c = '?';
        return fail(err, errcap, msg);
    }
#undef IS
    return 0;
}

int sk_mysql_url_parse(struct sk_mysql_url *u, const char *s, size_t len, char *err, size_t errcap)
{
    memset(u, 0, sizeof *u);
    u->port = SK_MYSQL_PORT_DEFAULT;
    u->timeout_s = SK_MYSQL_TIMEOUT_DEFAULT_S;
    size_t sl;
    if (len >= 8 && !memcmp(s, "mysql://", 8))
        sl = 8;
    else if (len >= 10 && !memcmp(s, "mariadb://", 10))
        sl = 10;
    else
        return fail(err, errcap, "must start with mysql:// or mariadb://");
    if (len > SK_MYSQL_URL_MAX) return fail(err, errcap, "longer than 4096 bytes");
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] >= 127)
            return fail(err, errcap, "spaces or control bytes (percent-encode them)");
    const char *p = s + sl, *end = s + len;
    const char *slash = memchr(p, '/', (size_t)(end - p));
    if (!slash) return fail(err, errcap, "no /DBNAME after the host");
    /* the user info ends at the authority's last '@' */
    const char *at = NULL;
    for (const char *q = p; q < slash; q++)
        if (*q == '@') at = q;
    if (at) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        const char *ue = colon ? colon : at;
        if (sk_url_decode(u->user, sizeof u->user, p, (size_t)(ue - p)) < 0)
            return fail(err, errcap, "bad or too long user name");
        if (colon &&
            sk_url_decode(u->password, sizeof u->password, colon + 1, (size_t)(at - colon - 1)) < 0)
            return fail(err, errcap, "bad or too long password");
        p = at + 1;
    }
    if (p < slash) {
        int rc = sk_url_hostport(p, slash, u->host, sizeof u->host, &u->port, err, errcap);
        if (rc < 0) {
            char why[120];
            snprintf(why, sizeof why, "%s", err);
            return fail(err, errcap, why);
        }
    }
    const char *q = memchr(slash, '?', (size_t)(end - slash));
    const char *de = q ? q : end;
    if (de == slash + 1) return fail(err, errcap, "no database name after the host");
    if (sk_url_decode(u->dbname, sizeof u->dbname, slash + 1, (size_t)(de - slash - 1)) < 0)
        return fail(err, errcap, "bad database name, or longer than 64 bytes");
    if (strchr(u->dbname, '/') || strchr(u->dbname, '`'))
        return fail(err, errcap, "a database name may not hold / or `");
    for (const char *pp = q ? q + 1 : end; pp < end;) {
        const char *amp = memchr(pp, '&', (size_t)(end - pp));
        const char *pe = amp ? amp : end;
        int rc = parse_param(u, pp, pe, err, errcap);
        if (rc < 0) return rc;
        pp = amp ? amp + 1 : end;
    }
    if (!u->host[0] && !u->socket[0])
        return fail(err, errcap, "no host (or ?socket=/path for a unix socket)");
    if (u->ssl_ca[0] && u->ssl_mode != SK_MYSQL_SSL_VERIFY_IDENTITY)
        return fail(err, errcap, "ssl-ca goes with ssl-mode=verify_identity");
    return 0;
}

const char *sk_mysql_url_where(const struct sk_mysql_url *u, char *out, size_t cap)
{
    if (u->socket[0])
        snprintf(out, cap, "%.107s/%.64s", u->socket, u->dbname);
    else if (strchr(u->host, ':'))
        snprintf(out, cap, "[%.80s]:%d/%.64s", u->host, u->port, u->dbname);
    else
        snprintf(out, cap, "%.80s:%d/%.64s", u->host, u->port, u->dbname);
    return out;
}
