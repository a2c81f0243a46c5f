/* client_ip.c - the socket peer and the client behind trusted proxies
 * (client_ip.h). */
#include "http/client_ip.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "http/app.h"
#include "http/config.h"

int sk_http_peer_ip(h2o_req_t *req, struct sk_ip *ip)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    if (!req->conn || !req->conn->callbacks->get_peername ||
        req->conn->callbacks->get_peername(req->conn, (struct sockaddr *)&ss) == 0)
        return 0;
    char text[SK_IP_TEXT];
    if (ss.ss_family == AF_INET)
        inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, text, sizeof text);
    else if (ss.ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, text, sizeof text);
    else
        return 0;
    return sk_ip_parse(text, strlen(text), ip) == 0;
}

/* The client's address (sk_http_client_ip), 0 when it has none. */
static int client_ip(struct sk_app *app, h2o_req_t *req, struct sk_ip *out)
{
    struct sk_ip ip;
    if (!sk_http_peer_ip(req, &ip)) return 0;
    /* Walk X-Forwarded-For right to left (last header first) while the hop
     * that wrote it is a trusted proxy: the first untrusted address is the
     * client. Anything a client wrote further left is never believed. A
     * malformed entry stops the walk at the proxy that passed it on. */
    const h2o_headers_t *hs = &req->headers;
    for (ssize_t hi = (ssize_t)hs->size - 1; hi >= 0 && sk_config_is_trusted_proxy(&app->cfg, &ip);
         hi--) {
        const h2o_header_t *h = &hs->entries[hi];
        if (h->name->len != 15 ||
            !h2o_lcstris(h->name->base, h->name->len, H2O_STRLIT("x-forwarded-for")))
            continue;
        const char *b = h->value.base;
        size_t e = h->value.len;
        while (e > 0 && sk_config_is_trusted_proxy(&app->cfg, &ip)) {
            size_t st = e;
            while (st > 0 && b[st - 1] != ',')
                st--;
            size_t a = st, z = e;
            while (a < z && (b[a] == ' ' || b[a] == '\t'))
                a++;
            while (z > a && (b[z - 1] == ' ' || b[z - 1] == '\t'))
                z--;
            struct sk_ip hop;
            if (sk_ip_parse(b + a, z - a, &hop) < 0) goto done;
            ip = hop;
            e = st > 0 ? st - 1 : 0;
        }
    }
done:
    *out = ip;
    return 1;
}

int sk_http_client_ip(struct sk_app *app, h2o_req_t *req, char out[SK_IP_TEXT])
{
    struct sk_ip ip;
    out[0] = 0;
    if (!client_ip(app, req, &ip)) return 0;
    sk_ip_format(&ip, out);
    return out[0] != 0;
}

int sk_http_client_ip_key(struct sk_app *app, h2o_req_t *req, char out[SK_IP_TEXT])
{
    struct sk_ip ip;
    out[0] = 0;
    if (!client_ip(app, req, &ip)) return 0;
    sk_ip_rate_prefix(&ip);
    sk_ip_format(&ip, out);
    return out[0] != 0;
}
