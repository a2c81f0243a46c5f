/* netutil.c - loopback helpers. */
#include "spawn/netutil.h"

#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "core/http_resp.h"

int sk_net_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    return port;
}

int sk_net_http_ok(int port, const char *path, int timeout_ms)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 0;
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    char req[256], resp[64];
    int n =
        snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path);
    int ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
             send(fd, req, (size_t)n, MSG_NOSIGNAL) == n;
    /* the status line is enough: read until it is whole */
    size_t len = 0;
    int status = 0;
    while (ok && status == 0 && len < sizeof resp) {
        ssize_t got = recv(fd, resp + len, sizeof resp - len, 0);
        if (got <= 0) break;
        len += (size_t)got;
        status = sk_http_resp_status(resp, len);
    }
    close(fd);
    return ok && status == 200;
}
