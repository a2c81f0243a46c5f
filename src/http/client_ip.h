/* client_ip.h - who a request comes from: the socket peer, and the client
 * behind trusted proxies (X-Forwarded-For walked right to left;
 * docs/rate-limit.md, "Client IP and X-Forwarded-For"). No I/O. */
#ifndef SK_HTTP_CLIENT_IP_H
#define SK_HTTP_CLIENT_IP_H
#include <h2o.h>

#include "core/ip.h"

struct sk_app;

/* The peer's address of the request's connection into *ip; 1, or 0 when
 * the connection has no IP peer. */
int sk_http_peer_ip(h2o_req_t *req, struct sk_ip *ip);
/* The client's IP as text: the socket peer, or, when the peer is one of
 * trusted_proxies, the right-most X-Forwarded-For address that is not.
 * Returns 1, or 0 (out "") when the connection has no IP peer. */
int sk_http_client_ip(struct sk_app *app, h2o_req_t *req, char out[SK_IP_TEXT]);
/* The same address as the per-IP rate limit counts it: IPv6 clients by
 * their /64 network (sk_ip_rate_prefix). */
int sk_http_client_ip_key(struct sk_app *app, h2o_req_t *req, char out[SK_IP_TEXT]);

#endif
