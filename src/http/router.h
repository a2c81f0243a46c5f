/* router.h - maps method + path to a route of routes.def (pure, no I/O). */
#ifndef SK_ROUTER_H
#define SK_ROUTER_H
#include <stddef.h>
#include <stdint.h>

enum sk_route {
#define SK_ROUTE(name, method, pattern) SK_ROUTE_##name,
#include "http/routes.def"
#undef SK_ROUTE
    SK_ROUTE_COUNT
};

struct sk_route_match {
    int status;          /* 200 matched, 404 no such path, 405 wrong method, 400 bad id */
    enum sk_route route; /* when status is 200 or 405 */
    uint64_t id;         /* {id} */
    const char *param;   /* {oid}: points into the path, not terminated */
    size_t param_len;
    const char *allow; /* 405: the method the path takes */
};

/* Matches the path up to '?' (the query string is ignored). */
void sk_router_match(const char *method, size_t mlen, const char *path, size_t plen,
                     struct sk_route_match *m);
const char *sk_route_name(enum sk_route r);

#endif
