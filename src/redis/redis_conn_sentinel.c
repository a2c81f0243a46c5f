/* redis_conn_sentinel.c - the blocking client's Redis Sentinel half
 * (redis+sentinel://, see redis_conn.h and docs/failover.md): the
 * transport of redis/sentinels.h. Every Sentinel of the URL is asked at
 * once over a connection of its own (non-blocking sockets, one poll() with
 * one deadline, so an unreachable Sentinel costs SK_SENTINELS_TIMEOUT_MS
 * per round, not that per Sentinel); sentinels.h decides, this file
 * connects, checks ROLE, and drops the master it must leave. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "redis/handshake.h"
#include "redis/redis_conn.h"
#include "redis/redis_conn_int.h"
#include "redis/sentinels.h"

/* A Sentinel that could not be reached is tried again after this. */
#define SN_RETRY_MS 1000

struct sk_rsn {
    struct sk_sentinels v;
    redisContext *c[SK_REDIS_URL_MAX_SEEDS]; /* non-blocking, NULL when not connected */
    int up[SK_REDIS_URL_MAX_SEEDS];          /* its connect completed */
    int64_t retry_ms[SK_REDIS_URL_MAX_SEEDS];
};

int sk_redis_is_readonly(const redisReply *rep)
{
    return rep && rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "READONLY", 8) == 0;
}

static void drop_peer(struct sk_rsn *sn, int i, int64_t now)
{
    if (sn->c[i]) redisFree(sn->c[i]);
    sn->c[i] = NULL;
    sn->up[i] = 0;
    sn->retry_ms[i] = now + SN_RETRY_MS;
}

void sk_redis_sn_free(sk_redis *r)
{
    if (!r->sn) return;
    for (int i = 0; i < SK_REDIS_URL_MAX_SEEDS; i++)
        if (r->sn->c[i]) redisFree(r->sn->c[i]);
    free(r->sn);
    r->sn = NULL;
}

static struct sk_rsn *state(sk_redis *r)
{
    if (!r->sn && (r->sn = calloc(1, sizeof *r->sn)) != NULL)
        sk_sentinels_init(&r->sn->v, &r->url, sk_mono_ms());
    return r->sn;
}

/* One round: the question to every Sentinel at once, each answer (or its
 * absence by the deadline) handed to the decision. */
static void ask_all(sk_redis *r, struct sk_rsn *sn)
{
    int64_t now = sk_mono_ms();
    sk_sentinels_round(&sn->v, now, !r->c);
    const char *q[3];
    sk_sentinels_query(&sn->v, q);
    int n = sn->v.n, pending[SK_REDIS_URL_MAX_SEEDS] = {0}, written[SK_REDIS_URL_MAX_SEEDS] = {0};
    int left = 0;
    for (int i = 0; i < n; i++) {
        const struct sk_redis_url_seed *sd = &r->url.seeds[i];
        if (!sn->c[i]) {
            if (now < sn->retry_ms[i]) {
                sk_sentinels_answer(&sn->v, i, NULL, now);
                continue;
            }
            sn->c[i] = redisConnectNonBlock(sd->host, sd->port);
            sn->up[i] = 0;
            if (!sn->c[i] || sn->c[i]->err) {
                drop_peer(sn, i, now);
                sk_sentinels_answer(&sn->v, i, NULL, now);
                continue;
            }
        }
        if (redisAppendCommandArgv(sn->c[i], 3, q, NULL) != REDIS_OK) {
            drop_peer(sn, i, now);
            sk_sentinels_answer(&sn->v, i, NULL, now);
            continue;
        }
        pending[i] = 1;
        left++;
    }
    int ms = r->connect_timeout_ms < SK_SENTINELS_TIMEOUT_MS ? r->connect_timeout_ms
                                                             : SK_SENTINELS_TIMEOUT_MS;
    int64_t deadline = now + ms;
    while (left > 0) {
        struct pollfd fds[SK_REDIS_URL_MAX_SEEDS];
        int who[SK_REDIS_URL_MAX_SEEDS], k = 0;
        for (int i = 0; i < n; i++)
            if (pending[i]) {
                fds[k] = (struct pollfd){.fd = sn->c[i]->fd,
                                         .events = POLLIN | (written[i] ? 0 : POLLOUT)};
                who[k++] = i;
            }
        int64_t wait = deadline - sk_mono_ms();
        if (wait <= 0) break;
        int got = poll(fds, (nfds_t)k, (int)wait);
        if (got < 0 && errno != EINTR) break;
        for (int j = 0; j < k && got > 0; j++) {
            int i = who[j], fail = 0;
            short ev = fds[j].revents;
            redisContext *c = sn->c[i];
            if (!ev) continue;
            if ((ev & (POLLERR | POLLHUP | POLLNVAL)) && !(ev & POLLIN)) fail = 1;
            if (!fail && !sn->up[i] && (ev & POLLOUT)) {
                int err = 0;
                socklen_t el = sizeof err;
                fail = getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0 || err != 0;
                sn->up[i] = !fail;
            }
            if (!fail && sn->up[i] && !written[i] && (ev & POLLOUT))
                fail = redisBufferWrite(c, &written[i]) != REDIS_OK;
            void *rep = NULL;
            if (!fail && (ev & POLLIN))
                fail = redisBufferRead(c) != REDIS_OK || redisGetReply(c, &rep) != REDIS_OK;
            if (fail || rep) {
                int64_t t = sk_mono_ms();
                sk_sentinels_answer(&sn->v, i, rep, t);
                if (rep) freeReplyObject(rep);
                if (fail) drop_peer(sn, i, t);
                pending[i] = 0;
                left--;
            }
        }
    }
    /* no answer in time: that Sentinel's connection is of no more use (a
     * late reply would answer the next question) */
    for (int i = 0; i < n; i++)
        if (pending[i]) {
            sk_sentinels_answer(&sn->v, i, NULL, sk_mono_ms());
            drop_peer(sn, i, sk_mono_ms());
        }
}

/* ROLE of the master on r->c (between exchanges only): the decision hears
 * it. */
static void ask_role(sk_redis *r, struct sk_rsn *sn)
{
    const char *argv[1];
    sk_sentinels_role_query(argv);
    redisReply *rep = redisCommandArgv(r->c, 1, argv, NULL);
    if (!rep) {
        sk_redis_disconnect(r); /* the next command reconnects, or says why not */
        sk_sentinels_dropped(&sn->v);
        return;
    }
    sk_sentinels_role(&sn->v, rep);
    freeReplyObject(rep);
}

/* Connects to host:port, named by a majority at named_ms, and checks it
 * says ROLE master. */
static int open_master(sk_redis *r, struct sk_rsn *sn, const char *host, int port, int64_t named_ms)
{
    snprintf(r->sn_host, sizeof r->sn_host, "%s", host);
    r->sn_port = port;
    redisContext *c;
    int rc = sk_redis_open_ctx(r, host, port, &c);
    if (rc < 0) return rc;
    const char *argv[1];
    sk_sentinels_role_query(argv);
    redisReply *rep = redisCommandArgv(c, 1, argv, NULL);
    if (!rep || strcmp(sk_handshake_role(rep), "master") != 0) {
        /* the Sentinels' view is stale (a failover under way): not yet */
        sk_redis_set_err(r, SK_EIO, "redis %s:%d, named master %s by the sentinels, is %s", host,
                         port, r->url.master_name, rep ? sk_handshake_role(rep) : "unreachable");
        if (rep) freeReplyObject(rep);
        redisFree(c);
        return r->err;
    }
    freeReplyObject(rep);
    r->c = c;
    sk_sentinels_using(&sn->v, host, port, named_ms);
    return 0;
}

int sk_redis_sn_connect(sk_redis *r)
{
    struct sk_rsn *sn = state(r);
    if (!sn) return sk_redis_set_err(r, SK_ENOMEM, "out of memory");
    sk_sentinels_dropped(&sn->v); /* r->c is gone: nothing in use */
    char host[256];
    int port = 0;
    ask_all(r, sn);
    int64_t t = sk_mono_ms();
    enum sk_sentinels_verdict v = sk_sentinels_decide(&sn->v, t, host, sizeof host, &port);
    if (v != SK_SN_USE) return sk_redis_set_err(r, SK_EIO, "%s", sn->v.why);
    return open_master(r, sn, host, port, t);
}

int sk_redis_sn_check(sk_redis *r)
{
    struct sk_rsn *sn = r->sn;
    int64_t now = sk_mono_ms();
    if (!sn || !r->c || r->pipe_n || !sk_sentinels_due(&sn->v, now)) return 0;
    ask_all(r, sn);
    ask_role(r, sn);
    char host[256];
    int port = 0;
    enum sk_sentinels_verdict v =
        sk_sentinels_decide(&sn->v, sk_mono_ms(), host, sizeof host, &port);
    if (v == SK_SN_KEEP) return 0;
    /* a master it must leave: the next command connects to the one the
     * majority names (at once), or fails until one does */
    if (r->c) sk_log(SK_LOG_WARN, "sentinel: leaving %s:%d: %s", r->sn_host, r->sn_port, sn->v.why);
    sk_redis_disconnect(r);
    sk_sentinels_dropped(&sn->v);
    r->backoff_ms = 0;
    return v == SK_SN_USE ? 0 : sk_redis_set_err(r, SK_EIO, "%s", sn->v.why);
}

void sk_redis_sn_readonly(sk_redis *r, const redisReply *rep)
{
    if (r->sn && sk_sentinels_readonly(&r->sn->v, rep)) r->sn->v.next_poll_ms = 0;
}
