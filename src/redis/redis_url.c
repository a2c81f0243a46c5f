/* redis_url.c - the Redis URL parser (redis://, redis+cluster://, redis+sentinel://,
 * redis+unix://). Takes bytes, does no I/O, so it is
 * unit-tested by feeding strings. */
#include "redis/redis_url.h"

#include <stdio.h>
#include <string.h>

#include "core/error.h"

static int fail(char *err, size_t cap, const char *msg)
{
    if (cap) snprintf(err, cap, "%s", msg);
    return SK_EINVAL;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Copies [s, s+n) into dst (cap bytes) decoding %XX. -1 on bad escape/overflow. */
static int copy_decoded(char *dst, size_t cap, const char *s, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '%') {
            if (i + 2 >= n) return -1;
            int h = hexval(s[i + 1]), l = hexval(s[i + 2]);
            if (h < 0 || l < 0) return -1;
            c = (char)(h * 16 + l);
            i += 2;
        }
        if (c == 0 || o + 1 >= cap) return -1;
        dst[o++] = c;
    }
    dst[o] = 0;
    return 0;
}

/* Decimal in [lo, hi] from exactly [s, s+n); -1 when not. */
static long parse_num(const char *s, size_t n, long lo, long hi)
{
    if (n == 0 || n > 9) return -1;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    return (v < lo || v > hi) ? -1 : v;
}

/* One host[:port] or [v6]:port of [p, end) into host/port. */
static int parse_hostport(const char *p, const char *end, char *host, size_t hostcap, int *port,
                          char *err, size_t errcap)
{
    const char *hs = p, *he;
    if (p < end && *p == '[') { /* [IPv6]:port */
        const char *rb = memchr(p, ']', (size_t)(end - p));
        if (!rb) return fail(err, errcap, "unterminated [IPv6] host");
        hs = p + 1;
        he = rb;
        p = rb + 1;
    } else {
        he = memchr(p, ':', (size_t)(end - p));
        if (!he) he = end;
        p = he;
    }
    if (he == hs) return fail(err, errcap, "missing host");
    if ((size_t)(he - hs) >= hostcap) return fail(err, errcap, "host too long");
    memcpy(host, hs, (size_t)(he - hs));
    host[he - hs] = 0;
    if (p < end) {
        if (*p != ':') return fail(err, errcap, "unexpected characters after host");
        long v = parse_num(p + 1, (size_t)(end - p - 1), 1, 65535);
        if (v < 0) return fail(err, errcap, "port must be 1-65535");
        *port = (int)v;
    }
    return 0;
}

/* user:pass of [p, at) into u: 0 or SK_EINVAL. */
static int parse_creds(struct sk_redis_url *u, const char *p, const char *at, char *err,
                       size_t errcap)
{
    const char *colon = memchr(p, ':', (size_t)(at - p));
    if (!colon) return fail(err, errcap, "credentials must be user:password or :password");
    if (copy_decoded(u->user, sizeof u->user, p, (size_t)(colon - p)) < 0 ||
        copy_decoded(u->pass, sizeof u->pass, colon + 1, (size_t)(at - colon - 1)) < 0)
        return fail(err, errcap, "bad or too long user or password");
    return 0;
}

/* redis+unix://[user:pass@]/path[?db=N]: [p, end) is what follows the scheme. */
static int parse_unix(struct sk_redis_url *u, const char *p, const char *end, char *err,
                      size_t errcap)
{
    const char *path = memchr(p, '/', (size_t)(end - p));
    if (!path) return fail(err, errcap, "redis+unix:// needs an absolute socket path");
    if (path > p) {
        if (path[-1] != '@') return fail(err, errcap, "redis+unix://[user:pass@]/path/to/socket");
        int rc = parse_creds(u, p, path - 1, err, errcap);
        if (rc < 0) return rc;
    }
    const char *q = memchr(path, '?', (size_t)(end - path));
    const char *pe = q ? q : end;
    /* sun_path holds 108 bytes with the terminator */
    if (pe - path < 2 || pe - path > 107)
        return fail(err, errcap, "socket path must be 2..107 bytes");
    memcpy(u->host, path, (size_t)(pe - path));
    u->host[pe - path] = 0;
    u->port = 0;
    u->unix_sock = 1;
    if (q) {
        if (end - q < 5 || memcmp(q, "?db=", 4) != 0)
            return fail(err, errcap, "the only parameter is ?db=N");
        long db = parse_num(q + 4, (size_t)(end - q - 4), 0, 100000);
        if (db < 0) return fail(err, errcap, "database must be a number");
        u->db = (int)db;
    }
    snprintf(u->seeds[0].host, sizeof u->seeds[0].host, "%s", u->host);
    u->nseeds = 1;
    return 0;
}

/* The path of a sentinel URL: MASTER_NAME[/db]. */
static int parse_master(struct sk_redis_url *u, const char *p, const char *end, char *err,
                        size_t errcap)
{
    const char *slash = memchr(p, '/', (size_t)(end - p));
    const char *ne = slash ? slash : end;
    if (ne == p) return fail(err, errcap, "redis+sentinel:// needs /MASTER_NAME after the hosts");
    if ((size_t)(ne - p) >= sizeof u->master_name) return fail(err, errcap, "master name too long");
    for (const char *c = p; c < ne; c++)
        if (*c == '?' || *c == '#' || *c == ',' || *c == '@' || *c == ':')
            return fail(err, errcap, "master name may not hold ? # , @ :");
    memcpy(u->master_name, p, (size_t)(ne - p));
    u->master_name[ne - p] = 0;
    if (slash && slash + 1 < end) {
        long db = parse_num(slash + 1, (size_t)(end - slash - 1), 0, 100000);
        if (db < 0) return fail(err, errcap, "database must be a number");
        u->db = (int)db;
    }
    return 0;
}

int sk_redis_url_parse(struct sk_redis_url *u, const char *s, size_t len, char *err, size_t errcap)
{
    memset(u, 0, sizeof *u);
    u->port = 6379;
    static const char scheme[] = "redis://", cscheme[] = "redis+cluster://",
                      sscheme[] = "redis+sentinel://", uscheme[] = "redis+unix://";
    size_t sl = sizeof scheme - 1;
    int def_port = 6379;
    if (len >= sizeof cscheme - 1 && memcmp(s, cscheme, sizeof cscheme - 1) == 0) {
        u->cluster = 1;
        sl = sizeof cscheme - 1;
    } else if (len >= sizeof sscheme - 1 && memcmp(s, sscheme, sizeof sscheme - 1) == 0) {
        u->sentinel = 1;
        sl = sizeof sscheme - 1;
        def_port = 26379;
    } else if (len >= sizeof uscheme - 1 && memcmp(s, uscheme, sizeof uscheme - 1) == 0) {
        sl = sizeof uscheme - 1;
    } else if (len < sl || memcmp(s, scheme, sl) != 0) {
        return fail(err, errcap,
                    "URL must start with redis://, redis+cluster://, redis+sentinel:// or "
                    "redis+unix://");
    }
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] >= 127)
            return fail(err, errcap, "URL contains spaces or control bytes");
    const char *p = s + sl, *end = s + len;
    if (sl == sizeof uscheme - 1) return parse_unix(u, p, end, err, errcap);

    /* authority ends at the first '/' */
    const char *slash = memchr(p, '/', (size_t)(end - p));
    const char *auth_end = slash ? slash : end;
    const char *at = NULL;
    for (const char *q = p; q < auth_end; q++)
        if (*q == '@') at = q; /* last '@': passwords may not contain a raw '@' anyway */
    if (at) {
        int rc = parse_creds(u, p, at, err, errcap);
        if (rc < 0) return rc;
        p = at + 1;
    }
    /* host list: one host for redis://, comma-separated seeds for a cluster
     * or the Sentinels */
    int many = u->cluster || u->sentinel;
    while (1) {
        const char *comma = many ? memchr(p, ',', (size_t)(auth_end - p)) : NULL;
        const char *he = comma ? comma : auth_end;
        if (u->nseeds == SK_REDIS_URL_MAX_SEEDS) return fail(err, errcap, "too many seed nodes");
        struct sk_redis_url_seed *sd = &u->seeds[u->nseeds];
        sd->port = def_port;
        int rc = parse_hostport(p, he, sd->host, sizeof sd->host, &sd->port, err, errcap);
        if (rc < 0) return rc;
        u->nseeds++;
        if (!comma) break;
        p = comma + 1;
    }
    memcpy(u->host, u->seeds[0].host, sizeof u->host);
    u->port = u->seeds[0].port;
    if (u->sentinel) {
        if (!slash)
            return fail(err, errcap, "redis+sentinel:// needs /MASTER_NAME after the hosts");
        return parse_master(u, slash + 1, end, err, errcap);
    }
    if (slash && slash + 1 < end) {
        long db = parse_num(slash + 1, (size_t)(end - slash - 1), 0, 100000);
        if (db < 0) return fail(err, errcap, "database must be a number");
        if (u->cluster && db != 0) return fail(err, errcap, "a cluster has only database 0");
        u->db = (int)db;
    }
    return 0;
}
