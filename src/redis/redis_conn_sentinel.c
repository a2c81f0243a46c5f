/* redis_conn_sentinel.c - the blocking client's Redis Sentinel half
 * (redis+sentinel://, see redis_conn.h and docs/failover.md): the master's
 * address from the Sentinels (SENTINEL get-master-addr-by-name, each
 * Sentinel in turn), ROLE checked after connecting, and the address asked
 * again while connected so that a master that moved is left. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "redis/redis_conn.h"
#include "redis/redis_conn_int.h"

/* How often a connected client asks whether the master is still the one it
 * uses: a master cut off from the others keeps its clients, and only the
 * Sentinels know it was replaced. */
#define SN_CHECK_EVERY_MS 1000
/* ... and when no Sentinel answered the last time: asking costs up to
 * SN_TIMEOUT_MS per Sentinel, which the master's clients must not pay on
 * every second. */
#define SN_CHECK_UNREACHABLE_MS 10000
/* A Sentinel that does not answer within this is passed over. */
#define SN_TIMEOUT_MS 500

int sk_redis_is_readonly(const redisReply *rep)
{
    return rep && rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "READONLY", 8) == 0;
}

void sk_redis_sn_free(sk_redis *r)
{
    if (r->sn) redisFree(r->sn);
    r->sn = NULL;
}

/* One Sentinel's view: 0 with host/port, SK_ENOTFOUND (it does not know the
 * name), or SK_EIO (unreachable, or an odd answer; r->errstr). */
static int ask_one(sk_redis *r, int i, char *host, size_t cap, int *port)
{
    const struct sk_redis_url_seed *sd = &r->url.seeds[i];
    if (!r->sn || r->sn_cur != i) {
        sk_redis_sn_free(r);
        int ms = r->connect_timeout_ms < SN_TIMEOUT_MS ? r->connect_timeout_ms : SN_TIMEOUT_MS;
        struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
        redisContext *c = redisConnectWithTimeout(sd->host, sd->port, tv);
        if (!c || c->err) {
            sk_redis_set_err(r, SK_EIO, "sentinel %s:%d: %s", sd->host, sd->port,
                             c ? c->errstr : "out of memory");
            if (c) redisFree(c);
            return SK_EIO;
        }
        redisSetTimeout(c, tv);
        r->sn = c;
        r->sn_cur = i;
    }
    redisReply *rep =
        redisCommand(r->sn, "SENTINEL get-master-addr-by-name %s", r->url.master_name);
    if (!rep) {
        sk_redis_set_err(r, SK_EIO, "sentinel %s:%d: %s", sd->host, sd->port,
                         r->sn->errstr[0] ? r->sn->errstr : "connection lost");
        sk_redis_sn_free(r);
        return SK_EIO;
    }
    int rc = 0;
    if (rep->type == REDIS_REPLY_NIL) {
        rc = sk_redis_set_err(r, SK_ENOTFOUND, "sentinel %s:%d does not know master %s", sd->host,
                              sd->port, r->url.master_name);
    } else if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
               rep->element[0]->type != REDIS_REPLY_STRING ||
               rep->element[1]->type != REDIS_REPLY_STRING ||
               (*port = atoi(rep->element[1]->str)) <= 0 || *port > 65535) {
        rc = sk_redis_set_err(r, SK_EIO, "sentinel %s:%d: unexpected answer for master %s",
                              sd->host, sd->port, r->url.master_name);
    } else {
        snprintf(host, cap, "%s", rep->element[0]->str);
    }
    freeReplyObject(rep);
    return rc;
}

/* The master's address from the first Sentinel that knows it, starting
 * with the one asked last. */
static int resolve(sk_redis *r, char *host, size_t cap, int *port)
{
    int rc = SK_EIO, n = r->url.nseeds;
    for (int k = 0; k < n; k++) {
        int i = (r->sn_cur + k) % n;
        rc = ask_one(r, i, host, cap, port);
        if (rc == 0) {
            r->sn_check_ms = sk_mono_ms() + SN_CHECK_EVERY_MS;
            return 0;
        }
        if (rc == SK_EIO && r->sn_cur == i) sk_redis_sn_free(r);
    }
    return rc == SK_ENOTFOUND ? SK_EIO : rc;
}

/* 1 when the server on c says ROLE master. */
static int is_master(sk_redis *r, redisContext *c)
{
    redisReply *rep = redisCommand(c, "ROLE");
    int ok = rep && rep->type == REDIS_REPLY_ARRAY && rep->elements > 0 &&
             rep->element[0]->type == REDIS_REPLY_STRING && !strcmp(rep->element[0]->str, "master");
    if (!ok)
        sk_redis_set_err(r, SK_EIO, "redis %s:%d, named master %s by the sentinels, is %s",
                         r->sn_host, r->sn_port, r->url.master_name,
                         !rep ? "unreachable"
                         : rep->type == REDIS_REPLY_ARRAY && rep->elements > 0 &&
                                 rep->element[0]->type == REDIS_REPLY_STRING
                             ? rep->element[0]->str
                             : "not a master");
    if (rep) freeReplyObject(rep);
    return ok;
}

int sk_redis_sn_connect(sk_redis *r)
{
    char host[256];
    int port = 0;
    int rc = resolve(r, host, sizeof host, &port);
    if (rc < 0) return rc;
    snprintf(r->sn_host, sizeof r->sn_host, "%s", host);
    r->sn_port = port;
    redisContext *c;
    if ((rc = sk_redis_open_ctx(r, host, port, &c)) < 0) return rc;
    if (!is_master(r, c)) {
        /* the Sentinels' view is stale (a failover under way): not yet */
        redisFree(c);
        return r->err;
    }
    r->c = c;
    return 0;
}

int sk_redis_sn_check(sk_redis *r)
{
    if (sk_mono_ms() < r->sn_check_ms) return 0;
    char host[256];
    int port = 0;
    int rc = resolve(r, host, sizeof host, &port);
    if (rc < 0) {
        /* no Sentinel answers: keep the master we have, ask again later */
        r->sn_check_ms = sk_mono_ms() + SN_CHECK_UNREACHABLE_MS;
        return rc;
    }
    if (port != r->sn_port || strcmp(host, r->sn_host) != 0) {
        sk_redis_disconnect(r);
        r->backoff_ms = 0; /* connect to the new one now */
    }
    return 0;
}
