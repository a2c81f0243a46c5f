/* resolve.h - host:port to a socket address without blocking an event loop.
 * A numeric address is converted at once (AI_NUMERICHOST: never the
 * resolver's network path); a name is resolved by a short-lived thread that
 * hands the answer back through a socket the caller watches on its loop
 * (redis/redis_async.c). This file and the listening address at startup
 * (http/http_server.c) are the only callers of getaddrinfo in src/
 * (scripts/check-layers.sh keeps it so). */
#ifndef SK_RESOLVE_H
#define SK_RESOLVE_H
#include <sys/socket.h>

/* What the resolver thread writes, in one piece, to its socket. */
struct sk_resolved {
    int gai;                      /* 0, or getaddrinfo's error (gai_strerror) */
    socklen_t len;                /* of addr, when gai is 0 */
    struct sockaddr_storage addr; /* the first address getaddrinfo gave */
};

/* host as a numeric IPv4/IPv6 address with port: fills *addr and *len and
 * returns 0; SK_ENOTFOUND when host is a name (resolve it with
 * sk_resolve_start). Never blocks. */
int sk_resolve_numeric(const char *host, int port, struct sockaddr_storage *addr, socklen_t *len);

/* Starts resolving host:port (SOCK_STREAM, any family) on a detached
 * thread of its own (every signal blocked) and gives the caller *fd, the
 * read end of a stream socket (non-blocking, close-on-exec) on which one
 * struct sk_resolved arrives, then EOF. The caller owns *fd and closes it
 * when done, or earlier to abandon the request (the thread's write then
 * fails quietly and it exits). Returns 0, SK_ENOMEM or SK_EIO (no socket or
 * no thread: nothing left behind). */
int sk_resolve_start(const char *host, int port, int *fd);

#endif
