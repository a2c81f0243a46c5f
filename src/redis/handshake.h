/* handshake.h - what a connection says to a Redis server before its first
 * command (AUTH with the URL's credentials, SELECT of a db other than 0,
 * ROLE when it must reach a master, INFO for the settings a sale depends
 * on: redis_settings.h), and how the answers are read: written once,
 * without I/O, and driven by the one transport, redis_async.c (whose
 * Cluster and Sentinel fronts, and the blocking facade, open every
 * connection through it). */
#ifndef SK_HANDSHAKE_H
#define SK_HANDSHAKE_H
#include <stddef.h>

#include <hiredis.h>

#include "redis/redis_settings.h"
#include "redis/redis_url.h"

/* What to say (flags of sk_handshake_init). */
enum {
    SK_HS_AUTH = 1,   /* AUTH [user] pass, when the URL has a password */
    SK_HS_SELECT = 2, /* SELECT db, when the URL names a db other than 0 */
    SK_HS_ROLE = 4,   /* ROLE, which must answer master */
    SK_HS_INFO = 8,   /* INFO: the server's settings (an error answer is no failure) */
};

#define SK_HS_MAX 4

/* The commands, in the order they are sent. argv points into the URL given
 * to sk_handshake_init (it must outlive h) and into h. */
struct sk_handshake {
    int n;
    int argc[SK_HS_MAX];
    const char *argv[SK_HS_MAX][3];
    char db[16];
};

/* The commands for u: AUTH, SELECT, ROLE, INFO in that order, each when
 * flags ask for it and u calls for it (n may be 0). */
void sk_handshake_init(struct sk_handshake *h, const struct sk_redis_url *u, unsigned flags);

/* The answer to command i: 0, or SK_EAUTH (credentials refused), SK_EPROTO
 * (another error, or ROLE not master) or SK_EIO (rep NULL: no answer),
 * with why (cap bytes) in words that hold no secret. */
int sk_handshake_check(const struct sk_handshake *h, int i, const redisReply *rep, char *why,
                       size_t cap);

/* The answer to command i into s when it is the INFO of SK_HS_INFO (read
 * again from scratch: what an earlier server said is forgotten); an error
 * answer (INFO renamed away) leaves s unknown. Returns 1 when command i
 * is that INFO, else 0 (s untouched). */
int sk_handshake_settings(const struct sk_handshake *h, int i, const redisReply *rep,
                          struct sk_rsettings *s);

/* The role a ROLE answer names ("master", "slave", "sentinel"), or
 * "unknown" for anything else (static or inside rep). */
const char *sk_handshake_role(const redisReply *rep);

/* How many replicas a master's ROLE answer lists (0 for any other). */
size_t sk_handshake_replicas(const redisReply *rep);

#endif
