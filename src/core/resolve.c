/* resolve.c - host names off the event loop (resolve.h): numeric addresses
 * at once, names on a thread per request. Requests are rare (a client's
 * node made, or its name failed and is tried again), so a thread each
 * costs nothing and needs no pool, queue or shutdown: the thread owns its
 * copy of the name and its end of the socket, shares no memory with the
 * caller, and exits after one write. */
#include "core/resolve.h"

#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/error.h"

static int lookup(const char *host, int port, int flags, struct sk_resolved *r)
{
    char serv[8];
    snprintf(serv, sizeof serv, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = flags};
    struct addrinfo *res;
    memset(r, 0, sizeof *r);
    r->gai = getaddrinfo(host, serv, &hints, &res);
    if (r->gai) return r->gai;
    if (res->ai_addrlen > sizeof r->addr) {
        r->gai = EAI_FAMILY;
    } else {
        memcpy(&r->addr, res->ai_addr, res->ai_addrlen);
        r->len = res->ai_addrlen;
    }
    freeaddrinfo(res);
    return r->gai;
}

int sk_resolve_numeric(const char *host, int port, struct sockaddr_storage *addr, socklen_t *len)
{
    struct sk_resolved r;
    if (lookup(host, port, AI_NUMERICHOST | AI_NUMERICSERV, &r)) return SK_ENOTFOUND;
    memcpy(addr, &r.addr, r.len);
    *len = r.len;
    return 0;
}

struct request {
    int fd, port;
    char host[]; /* the name, owned by the thread */
};

static void *resolver_main(void *arg)
{
    struct request *q = arg;
    struct sk_resolved r;
    lookup(q->host, q->port, AI_NUMERICSERV, &r);
    /* a caller that gave up closed its end: EPIPE, no signal */
    ssize_t n = send(q->fd, &r, sizeof r, MSG_NOSIGNAL);
    (void)n;
    close(q->fd);
    free(q);
    return NULL;
}

int sk_resolve_start(const char *host, int port, int *fd)
{
    size_t hl = strlen(host);
    struct request *q = malloc(sizeof *q + hl + 1);
    if (!q) return SK_ENOMEM;
    memcpy(q->host, host, hl + 1);
    q->port = port;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        free(q);
        return SK_EIO;
    }
    int rc = fcntl(sv[0], F_SETFL, O_NONBLOCK);
    q->fd = sv[1];
    /* the thread takes no signal meant for the loop's thread */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t at;
    pthread_t t;
    if (rc == 0) rc = pthread_attr_init(&at);
    if (rc == 0) {
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        rc = pthread_create(&t, &at, resolver_main, q);
        pthread_attr_destroy(&at);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        close(sv[0]);
        close(sv[1]);
        free(q);
        return SK_EIO;
    }
    *fd = sv[0];
    return 0;
}
