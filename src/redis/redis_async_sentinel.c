/* redis_async_sentinel.c - the async client's Redis Sentinel front
 * (redis+sentinel://, see sk_aredis_new and docs/failover.md).
 *
 * A front over three single-node clients, all on the event loop (nothing
 * here blocks): one to a Sentinel that answers SENTINEL
 * get-master-addr-by-name, one to the same Sentinel subscribed to
 * +switch-master, and one to the master it named (ROLE checked in its
 * handshake). The master is asked for again while its client is down (a
 * crash: the Sentinels name the promoted replica once they agree), after a
 * READONLY answer (a demoted master), and at once on +switch-master. A
 * Sentinel that cannot be reached is left for the next one of the URL.
 * Commands go to the master's client unchanged; when the master changes,
 * the old client is freed, which fails everything in flight on it (NULL
 * answers: the caller answers 503), and until the new one is ready commands
 * are refused (SK_EIO). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "redis/redis_async.h"
#include "redis/redis_async_int.h"

#define SN_ASK_EVERY_MS 100 /* while no master is ready */
#define SN_ROTATE_MS 200    /* before leaving a Sentinel that is down */
#define SN_TIMEOUT_MS 1000  /* a Sentinel's answers */

struct ar_sentinel {
    int cur;          /* the Sentinel used: url.seeds[cur] */
    sk_aredis *query; /* SENTINEL get-master-addr-by-name */
    sk_aredis *sub;   /* SUBSCRIBE +switch-master */
    unsigned sub_at;  /* sub->connects when it last subscribed */
    sk_aredis *master;
    char host[256];
    int port;
    int asking, rotate;
    int64_t next_ask_ms, next_rotate_ms;
    unsigned readonly_seen, old_connects, switches;
    int closing;
    char errstr[256];
};

static void on_switch_message(void *data, redisReply *rep);

/* A client for Sentinel i of the URL. */
static sk_aredis *sentinel_client(sk_aredis *ar, int i)
{
    struct sk_redis_url u = ar->url;
    snprintf(u.host, sizeof u.host, "%s", ar->url.seeds[i].host);
    u.port = ar->url.seeds[i].port;
    u.sentinel = 0;
    u.nseeds = 1;
    u.db = 0;
    struct sk_aredis_opts o = {
        .timeout_ms = ar->opts.timeout_ms < SN_TIMEOUT_MS ? ar->opts.timeout_ms : SN_TIMEOUT_MS};
    sk_aredis *c = NULL;
    char err[128];
    if (sk_aredis_node_new(&c, ar->loop, &u, &o, AR_SENTINEL, err, sizeof err) < 0)
        snprintf(ar->sn->errstr, sizeof ar->sn->errstr, "sentinel %.64s:%d: %.100s", u.host, u.port,
                 err);
    return c;
}

/* Drops the Sentinel clients and opens them to Sentinel i. */
static void use_sentinel(sk_aredis *ar, int i)
{
    struct ar_sentinel *sn = ar->sn;
    sk_aredis *q = sn->query, *s = sn->sub;
    sn->query = sn->sub = NULL;
    sn->asking = 0;
    sk_aredis_free(q);
    sk_aredis_free(s);
    sn->cur = i;
    sn->query = sentinel_client(ar, i);
    sn->sub = sentinel_client(ar, i);
    sn->sub_at = 0;
    if (sn->sub) {
        sn->sub->push_cb = on_switch_message;
        sn->sub->push_data = ar;
    }
    sn->next_rotate_ms = sk_mono_ms() + SN_ROTATE_MS;
}

/* Leaves the master's client (its commands in flight fail) and, when host
 * is given, opens one to host:port. */
static void switch_to(sk_aredis *ar, const char *host, int port)
{
    struct ar_sentinel *sn = ar->sn;
    sk_aredis *old = sn->master;
    sn->master = NULL;
    if (old) {
        sn->old_connects += old->connects;
        sk_aredis_free(old);
    }
    if (!host) return;
    struct sk_redis_url u = ar->url;
    snprintf(u.host, sizeof u.host, "%s", host);
    u.port = port;
    u.sentinel = 0;
    u.nseeds = 1;
    snprintf(sn->host, sizeof sn->host, "%s", host);
    sn->port = port;
    sn->readonly_seen = 0;
    char err[128];
    if (sk_aredis_node_new(&sn->master, ar->loop, &u, &ar->opts, AR_MASTER, err, sizeof err) < 0) {
        sn->master = NULL;
        snprintf(sn->errstr, sizeof sn->errstr, "master %.64s at %.64s:%d: %.100s",
                 ar->url.master_name, host, port, err);
        return;
    }
    if (old) sn->switches++;
    sk_log(SK_LOG_INFO, "sentinel: master %s is %s:%d", ar->url.master_name, host, port);
}

/* 1 when host:port is the master in use. */
static int same_master(const struct ar_sentinel *sn, const char *host, int port)
{
    return sn->master && sn->port == port && strcmp(sn->host, host) == 0;
}

static void on_master_addr(void *data, redisReply *rep)
{
    sk_aredis *ar = data;
    struct ar_sentinel *sn = ar->sn;
    sn->asking = 0;
    if (!rep || sn->closing) return; /* the Sentinel went away: the tick moves on */
    const struct sk_redis_url_seed *sd = &ar->url.seeds[sn->cur];
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
        rep->element[0]->type != REDIS_REPLY_STRING ||
        rep->element[1]->type != REDIS_REPLY_STRING) {
        snprintf(sn->errstr, sizeof sn->errstr, "sentinel %.64s:%d: %s %.60s", sd->host, sd->port,
                 rep->type == REDIS_REPLY_NIL ? "does not know master" : "odd answer for master",
                 ar->url.master_name);
        sn->rotate = 1; /* another Sentinel may know it (not from here: this is its callback) */
        return;
    }
    int port = atoi(rep->element[1]->str);
    if (port <= 0 || port > 65535) return;
    if (!same_master(sn, rep->element[0]->str, port)) switch_to(ar, rep->element[0]->str, port);
}

/* "+switch-master" messages: "<name> <old ip> <old port> <new ip> <new port>". */
static void on_switch_message(void *data, redisReply *rep)
{
    sk_aredis *ar = data;
    struct ar_sentinel *sn = ar->sn;
    if (sn->closing || rep->type != REDIS_REPLY_ARRAY || rep->elements != 3 ||
        rep->element[0]->type != REDIS_REPLY_STRING || strcmp(rep->element[0]->str, "message") ||
        rep->element[2]->type != REDIS_REPLY_STRING)
        return;
    char name[128], oldh[256], newh[256];
    int oldp, newp;
    if (sscanf(rep->element[2]->str, "%127s %255s %d %255s %d", name, oldh, &oldp, newh, &newp) !=
            5 ||
        strcmp(name, ar->url.master_name) != 0 || newp <= 0 || newp > 65535)
        return;
    if (!same_master(sn, newh, newp)) switch_to(ar, newh, newp);
}

static void on_subscribed(void *data, redisReply *rep)
{
    (void)data;
    (void)rep; /* lost or refused: the tick subscribes again after a reconnect */
}

int sk_aredis_sn_new(sk_aredis *ar)
{
    struct ar_sentinel *sn = calloc(1, sizeof *sn);
    if (!sn) return SK_ENOMEM;
    ar->sn = sn;
    snprintf(sn->errstr, sizeof sn->errstr, "asking the sentinels for master %.100s",
             ar->url.master_name);
    use_sentinel(ar, 0);
    return 0;
}

void sk_aredis_sn_free(sk_aredis *ar)
{
    struct ar_sentinel *sn = ar->sn;
    sn->closing = 1;
    switch_to(ar, NULL, 0);
    sk_aredis_free(sn->query);
    sk_aredis_free(sn->sub);
    free(sn);
    free(ar);
}

sk_aredis *sk_aredis_sn_master(const sk_aredis *ar)
{
    sk_aredis *m = ar->sn->master;
    return m && m->state == AR_READY ? m : NULL;
}

const char *sk_aredis_sn_errstr(const sk_aredis *ar)
{
    const struct ar_sentinel *sn = ar->sn;
    if (sn->master && sn->master->state == AR_READY) return "ready";
    if (sn->master && sn->master->errstr[0]) return sn->master->errstr;
    return sn->errstr;
}

unsigned sk_aredis_sn_connects(const sk_aredis *ar)
{
    const struct ar_sentinel *sn = ar->sn;
    return sn->old_connects + (sn->master ? sn->master->connects : 0);
}

void sk_aredis_sn_tick(sk_aredis *ar)
{
    struct ar_sentinel *sn = ar->sn;
    int64_t now = sk_mono_ms();
    if (sn->master) sk_aredis_tick(sn->master);
    if (sn->query) sk_aredis_tick(sn->query);
    if (sn->sub) sk_aredis_tick(sn->sub);
    /* a Sentinel that is down (or could not be made) is left for the next */
    if ((sn->rotate || !sn->query || sn->query->state == AR_DOWN) && now >= sn->next_rotate_ms) {
        sn->rotate = 0;
        use_sentinel(ar, (sn->cur + 1) % ar->url.nseeds);
    }
    if (sn->sub && sn->sub->state == AR_READY && sn->sub->connects != sn->sub_at) {
        sn->sub_at = sn->sub->connects;
        if (sk_aredis_command(sn->sub, on_subscribed, ar, 2,
                              (const char *const[]){"SUBSCRIBE", "+switch-master"}, NULL) == 0)
            sk_aredis_flush(sn->sub);
    }
    /* a demoted master answers READONLY: leave it (its commands never ran) */
    if (sn->master && sn->master->readonly != sn->readonly_seen) {
        sn->readonly_seen = sn->master->readonly;
        snprintf(sn->errstr, sizeof sn->errstr, "master %.64s at %.64s:%d answered READONLY",
                 ar->url.master_name, sn->host, sn->port);
        switch_to(ar, NULL, 0);
        sn->next_ask_ms = 0;
    }
    int want = !sn->master || sn->master->state == AR_DOWN;
    if (want && !sn->asking && now >= sn->next_ask_ms && sn->query &&
        sn->query->state == AR_READY) {
        const char *argv[] = {"SENTINEL", "get-master-addr-by-name", ar->url.master_name};
        if (sk_aredis_command(sn->query, on_master_addr, ar, 3, argv, NULL) == 0) {
            sn->asking = 1;
            sk_aredis_flush(sn->query);
        }
        sn->next_ask_ms = now + SN_ASK_EVERY_MS;
    }
}
