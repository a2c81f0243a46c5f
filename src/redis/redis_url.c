/* redis_url.c - the Redis URL parser (redis://, redis+cluster://, redis+sentinel://,
 * redis+unix://). Takes bytes, does no I/O, so it is
 * unit-tested by feeding strings. */
#include "redis/redis_url.h"

#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/num.h"
#include "core/url.h"

static int fail(char *err, size_t cap, const char *msg)
{
    if (cap) snprintf(err, cap, "%s", msg);
    return SK_EINVAL;
}

/* The database number [p, end) into u: 0 or SK_EINVAL. */
static int parse_db(struct sk_redis_url *u, const char *p, const char *end, char *err,
                    size_t errcap)
{
    uint64_t db;
    if (sk_num_u64_range(p, (size_t)(end - p), 0, 100000, &db))
        return fail(err, errcap, "database must be a number");
    u->db = (int)db;
    return 0;
}

/* user:pass of [p, at) into u: 0 or SK_EINVAL. */
static int parse_creds(struct sk_redis_url *u, const char *p, const char *at, char *err,
                       size_t errcap)
{
    const char *colon = memchr(p, ':', (size_t)(at - p));
    if (!colon) return fail(err, errcap, "credentials must be user:password or :password");
    if (sk_url_decode(u->user, sizeof u->user, p, (size_t)(colon - p)) < 0 ||
        sk_url_decode(u->pass, sizeof u->pass, colon + 1, (size_t)(at - colon - 1)) < 0)
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
    if (q && (end - q < 5 || memcmp(q, "?db=", 4) != 0))
        return fail(err, errcap, "the only parameter is ?db=N");
    if (q && parse_db(u, q + 4, end, err, errcap) < 0) return SK_EINVAL;
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
    return slash && slash + 1 < end ? parse_db(u, slash + 1, end, err, errcap) : 0;
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
        int rc = sk_url_hostport(p, he, sd->host, sizeof sd->host, &sd->port, err, errcap);
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
        if (parse_db(u, slash + 1, end, err, errcap) < 0) return SK_EINVAL;
        if (u->cluster && u->db != 0) return fail(err, errcap, "a cluster has only database 0");
    }
    return 0;
}

void sk_redis_url_node(struct sk_redis_url *out, const struct sk_redis_url *u, const char *host,
                       int port, int keep_db)
{
    *out = *u;
    snprintf(out->host, sizeof out->host, "%s", host);
    out->port = port;
    out->db = keep_db ? u->db : 0;
    out->cluster = 0;
    out->sentinel = 0;
    out->nseeds = 1;
    memcpy(out->seeds[0].host, out->host, sizeof out->host);
    out->seeds[0].port = port;
}
