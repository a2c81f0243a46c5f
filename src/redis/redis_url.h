/* redis_url.h - parse the Redis URLs (bytes in, no I/O):
 *   redis://[user:pass@]host[:port][/db]
 *   redis+cluster://[user:pass@]host[:port][,host[:port]...][/0]
 *   redis+sentinel://[user:pass@]host[:port][,host[:port]...]/MASTER_NAME[/db]
 *       (the hosts are Sentinels, default port 26379; the credentials and db
 *       are the master's: the Sentinels are asked without AUTH)
 *   redis+unix://[user:pass@]/path/to/redis.sock[?db=N] */
#ifndef SK_REDIS_URL_H
#define SK_REDIS_URL_H
#include <stddef.h>

#define SK_REDIS_URL_MAX_SEEDS 16

struct sk_redis_url_seed {
    char host[256];
    int port;
};

struct sk_redis_url {
    char host[256];        /* name or address; IPv6 without brackets */
    int port;              /* default 6379 */
    char user[128];        /* empty: no ACL user (AUTH pass) */
    char pass[256];        /* empty: no AUTH */
    int db;                /* SELECT index, default 0 (a cluster has only 0) */
    int cluster;           /* 1 for redis+cluster:// */
    int sentinel;          /* 1 for redis+sentinel://: seeds are the Sentinels */
    int unix_sock;         /* 1 for redis+unix://: host is the socket's path, port 0 */
    char master_name[128]; /* redis+sentinel://: the name the Sentinels monitor */
    int nseeds; /* cluster: seed nodes, sentinel: Sentinels (seeds[0] is also host/port); 1
                   otherwise */
    struct sk_redis_url_seed seeds[SK_REDIS_URL_MAX_SEEDS];
};

/* Parses len bytes of s. Returns 0, or SK_EINVAL with a reason in err
 * (errcap bytes). Percent-escapes in user and password are decoded. */
int sk_redis_url_parse(struct sk_redis_url *u, const char *s, size_t len, char *err, size_t errcap);

/* The plain single-node URL of host:port with u's credentials (and u's db
 * when keep_db, else 0): what a cluster or Sentinel client opens for one of
 * its nodes. */
void sk_redis_url_node(struct sk_redis_url *out, const struct sk_redis_url *u, const char *host,
                       int port, int keep_db);

#endif
