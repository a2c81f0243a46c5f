/* redis_async_sentinel.c - the async client's Redis Sentinel front
 * (redis+sentinel://, see sk_aredis_new and docs/failover.md): the
 * transport of redis/sentinels.h on the event loop (nothing here blocks).
 *
 * Single-node clients, all on the loop: per Sentinel of the URL one that is
 * asked SENTINEL MASTER every round and one subscribed to +switch-master
 * (so an announcement from any of them moves at once), and one to the
 * master the decision names (ROLE checked in its handshake, and asked
 * again every round). Commands go to the master's client unchanged; when
 * the decision leaves a master (another one named, no majority heard for
 * the lease, ROLE or READONLY says replica), its client is freed, which
 * fails everything in flight on it (NULL answers: the caller answers 503),
 * and until a master is ready again commands are refused (SK_EIO). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "redis/redis_async.h"
#include "redis/redis_async_int.h"
#include "redis/sentinels.h"

struct ar_sentinel;

/* The callback data of one Sentinel's clients. */
struct ar_peer {
    sk_aredis *ar; /* the front */
    int i;         /* url.seeds[i] */
    sk_aredis *query, *sub;
    unsigned sub_at; /* sub->connects when it last subscribed */
    int asking;
    int owed; /* this round's question waits for its connection to be made */
};

struct ar_sentinel {
    struct sk_sentinels v;
    struct ar_peer peer[SK_REDIS_URL_MAX_SEEDS];
    sk_aredis *master;
    char host[256]; /* the master's client's address */
    int port;
    int64_t chosen_ms; /* when the decision named it */
    int role_asking;
    unsigned readonly_seen, old_connects, switches;
    int closing;
    /* ticks came far apart (a blocking caller that slept): answers heard
     * before are stale for want of asking, not of Sentinels, so the lease
     * is judged on this round's answers */
    int64_t ticked_ms;
    int idle_round;
};

/* A client for Sentinel i of the URL. */
static sk_aredis *sentinel_client(sk_aredis *ar, int i)
{
    struct sk_redis_url u;
    sk_redis_url_node(&u, &ar->url, ar->url.seeds[i].host, ar->url.seeds[i].port, 0);
    int t = ar->opts.timeout_ms, ct = ar->opts.connect_timeout_ms;
    struct sk_aredis_opts o = {
        .timeout_ms = t < SK_SENTINELS_TIMEOUT_MS ? t : SK_SENTINELS_TIMEOUT_MS,
        .connect_timeout_ms = ct < SK_SENTINELS_TIMEOUT_MS ? ct : SK_SENTINELS_TIMEOUT_MS};
    sk_aredis *c = NULL;
    char err[128];
    if (sk_aredis_node_new(&c, ar->loop, &u, &o, AR_SENTINEL, err, sizeof err) < 0)
        sk_log(SK_LOG_WARN, "sentinel %.64s:%d: %.100s", u.host, u.port, err);
    return c;
}

/* Leaves the master's client (its commands in flight fail) and, when host
 * is given, opens one to host:port. */
static void switch_to(sk_aredis *ar, const char *host, int port)
{
    struct ar_sentinel *sn = ar->sn;
    sk_aredis *old = sn->master;
    sn->master = NULL;
    sn->role_asking = 0;
    sk_sentinels_dropped(&sn->v);
    if (old) {
        /* what its commands in flight hear (sk_aredis_failed) */
        ar->fail_rc = SK_EIO;
        snprintf(ar->errstr, sizeof ar->errstr, "redis %.50s:%d: left: %.70s", sn->host, sn->port,
                 sn->v.why);
        sn->old_connects += old->connects;
        sk_aredis_free(old);
    }
    if (!host) return;
    struct sk_redis_url u;
    sk_redis_url_node(&u, &ar->url, host, port, 1);
    snprintf(sn->host, sizeof sn->host, "%s", host);
    sn->port = port;
    sn->chosen_ms = sk_mono_ms();
    sn->readonly_seen = 0;
    char err[128];
    if (sk_aredis_node_new(&sn->master, ar->loop, &u, &ar->opts, AR_MASTER, err, sizeof err) < 0) {
        sn->master = NULL;
        snprintf(sn->v.why, sizeof sn->v.why, "master %.64s at %.64s:%d: %.100s",
                 ar->url.master_name, host, port, err);
        return;
    }
    if (old) sn->switches++;
    sk_log(SK_LOG_INFO, "sentinel: master %s is %s:%d", ar->url.master_name, host, port);
}

/* A round's question is out, or owed to a Sentinel still connecting. */
static int round_out(const struct ar_sentinel *sn)
{
    for (int i = 0; i < sn->v.n; i++)
        if (sn->peer[i].asking || sn->peer[i].owed) return 1;
    return 0;
}

/* The decision, carried out. */
static void act(sk_aredis *ar)
{
    struct ar_sentinel *sn = ar->sn;
    if (sn->closing) return;
    int64_t now = sk_mono_ms();
    if (sn->idle_round && !round_out(sn)) sn->idle_round = 0;
    /* a master client whose handshake passed (ROLE master) is the one in
     * use, as named when it was chosen */
    if (sn->master && sn->master->state == AR_READY && !sn->v.in_use &&
        sn->master->readonly == sn->readonly_seen)
        sk_sentinels_using(&sn->v, sn->host, sn->port, sn->chosen_ms);
    char host[256];
    int port = 0;
    switch (sk_sentinels_decide(&sn->v, now, host, sizeof host, &port)) {
    case SK_SN_USE:
        /* a client already opening to it (its handshake not done yet) stays */
        if (!sn->master || sn->port != port || strcmp(sn->host, host)) switch_to(ar, host, port);
        break;
    case SK_SN_LEAVE:
        /* a lease that ran out while nobody asked waits for this round */
        if (sn->idle_round && !sn->v.role_bad) break;
        if (sn->master)
            sk_log(SK_LOG_WARN, "sentinel: leaving %s:%d: %s", sn->host, sn->port, sn->v.why);
        switch_to(ar, NULL, 0);
        break;
    case SK_SN_KEEP:
    case SK_SN_WAIT: break;
    }
}

static void on_answer(void *data, redisReply *rep)
{
    struct ar_peer *p = data;
    sk_aredis *ar = p->ar;
    p->asking = 0;
    if (ar->sn->closing) return;
    sk_sentinels_answer(&ar->sn->v, p->i, rep, sk_mono_ms());
    act(ar);
}

static void on_switch_message(void *data, redisReply *rep)
{
    struct ar_peer *p = data;
    sk_aredis *ar = p->ar;
    if (ar->sn->closing) return;
    if (sk_sentinels_message(&ar->sn->v, p->i, rep, sk_mono_ms())) act(ar);
}

/* The master's ROLE. Runs inside the master's client: it only notes the
 * answer, and the tick's act() leaves the master (freeing a client from
 * its own callback would pull it from under its read loop). */
static void on_role(void *data, redisReply *rep)
{
    sk_aredis *ar = data;
    struct ar_sentinel *sn = ar->sn;
    sn->role_asking = 0;
    /* no answer (connection lost): the master's client handles that */
    if (!sn->closing) sk_sentinels_role(&sn->v, rep);
}

/* This round's question to Sentinel p: asked, owed to its connection
 * being made, or, when it is down, counted unanswered now. */
static void pose(sk_aredis *ar, struct ar_peer *p, int64_t now)
{
    if (!p->query || p->query->state == AR_DOWN) {
        p->owed = 0;
        sk_sentinels_answer(&ar->sn->v, p->i, NULL, now); /* unreachable now */
    } else if (p->query->state != AR_READY) {
        p->owed = 1; /* connecting: asked once it is made (sk_aredis_sn_tick) */
    } else {
        const char *q[3];
        sk_sentinels_query(&ar->sn->v, q);
        p->owed = 0;
        if (sk_aredis_command(p->query, on_answer, p, 3, q, NULL) == 0) {
            p->asking = 1;
            sk_aredis_flush(p->query);
        }
    }
}

int sk_aredis_sn_new(sk_aredis *ar)
{
    struct ar_sentinel *sn = calloc(1, sizeof *sn);
    if (!sn) return SK_ENOMEM;
    ar->sn = sn;
    sk_sentinels_init(&sn->v, &ar->url, sk_mono_ms());
    for (int i = 0; i < sn->v.n; i++) {
        struct ar_peer *p = &sn->peer[i];
        p->ar = ar;
        p->i = i;
        p->query = sentinel_client(ar, i);
        p->sub = sentinel_client(ar, i);
        if (p->sub) {
            p->sub->push_cb = on_switch_message;
            p->sub->push_data = p;
        }
    }
    return 0;
}

void sk_aredis_sn_free(sk_aredis *ar)
{
    struct ar_sentinel *sn = ar->sn;
    sn->closing = 1;
    switch_to(ar, NULL, 0);
    for (int i = 0; i < sn->v.n; i++) {
        sk_aredis_free(sn->peer[i].query);
        sk_aredis_free(sn->peer[i].sub);
    }
    free(sn);
    free(ar);
}

sk_aredis *sk_aredis_sn_master(const sk_aredis *ar)
{
    const struct ar_sentinel *sn = ar->sn;
    sk_aredis *m = sn->master;
    return m && m->state == AR_READY && sn->v.in_use ? m : NULL;
}

int sk_aredis_sn_stalled(const sk_aredis *ar)
{
    const struct ar_sentinel *sn = ar->sn;
    if (sn->master && !sk_aredis_node_stalled(sn->master)) return 0;
    for (int i = 0; i < sn->v.n; i++) {
        const struct ar_peer *p = &sn->peer[i];
        if (p->asking || p->owed) return 0;
        if (p->query && p->query->state != AR_READY && !sk_aredis_node_stalled(p->query)) return 0;
    }
    return 1;
}

const sk_aredis *sk_aredis_sn_failed(const sk_aredis *ar)
{
    const sk_aredis *m = ar->sn->master;
    return m && m->state != AR_READY ? m : ar;
}

const char *sk_aredis_sn_master_addr(const sk_aredis *ar, int *port)
{
    *port = ar->sn->port;
    return ar->sn->host;
}

const char *sk_aredis_sn_errstr(const sk_aredis *ar)
{
    const struct ar_sentinel *sn = ar->sn;
    if (sk_aredis_sn_master(ar)) return "ready";
    if (sn->master && sn->master->errstr[0]) return sn->master->errstr;
    return sn->v.why;
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
    if (sn->ticked_ms && now - sn->ticked_ms > SK_SENTINELS_POLL_MS) sn->idle_round = 1;
    sn->ticked_ms = now;
    if (sn->master) sk_aredis_tick(sn->master);
    for (int i = 0; i < sn->v.n; i++) {
        struct ar_peer *p = &sn->peer[i];
        if (p->query) sk_aredis_tick(p->query);
        if (p->sub) sk_aredis_tick(p->sub);
        /* a question owed to a Sentinel whose connection is now made, or
         * failed (unreachable this round) */
        if (p->owed) pose(ar, p, now);
        if (p->sub && p->sub->state == AR_READY && p->sub->connects != p->sub_at) {
            const char *argv[2];
            sk_sentinels_subscribe(argv);
            p->sub_at = p->sub->connects;
            /* its answer is not awaited: lost or refused, the tick
             * subscribes again after a reconnect */
            if (sk_aredis_command(p->sub, NULL, NULL, 2, argv, NULL) == 0) sk_aredis_flush(p->sub);
        }
    }
    /* a demoted master answers READONLY: leave it (its commands never ran) */
    if (sn->master && sn->master->readonly != sn->readonly_seen) {
        sn->readonly_seen = sn->master->readonly;
        sk_sentinels_demoted(&sn->v, "answered READONLY");
        sn->v.next_poll_ms = now; /* a failover: ask which master now */
    }
    if (sk_sentinels_due(&sn->v, now)) {
        sk_sentinels_round(&sn->v, now, !sk_aredis_sn_master(ar));
        /* one still asking: its answer is due by its client's timeout */
        for (int i = 0; i < sn->v.n; i++)
            if (!sn->peer[i].asking) pose(ar, &sn->peer[i], now);
        /* the master's ROLE: a master demoted under its clients without a
         * write (no READONLY yet) is left too */
        sk_aredis *m = sk_aredis_sn_master(ar);
        const char *role[1];
        sk_sentinels_role_query(role);
        if (m && !sn->role_asking && sk_aredis_command(m, on_role, ar, 1, role, NULL) == 0) {
            sn->role_asking = 1;
            sk_aredis_flush(m);
        }
    }
    act(ar);
}
