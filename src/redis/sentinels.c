/* sentinels.c - the Sentinel protocol's questions, answers and decision,
 * without I/O (sentinels.h). */
#include "redis/sentinels.h"

#include "redis/handshake.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis/reply.h"

void sk_sentinels_init(struct sk_sentinels *s, const struct sk_redis_url *u, int64_t now)
{
    memset(s, 0, sizeof *s);
    s->n = u->nseeds < SK_REDIS_URL_MAX_SEEDS ? u->nseeds : SK_REDIS_URL_MAX_SEEDS;
    snprintf(s->name, sizeof s->name, "%s", u->master_name);
    s->next_poll_ms = now;
    snprintf(s->why, sizeof s->why, "asking the %d sentinel(s) for master %.100s", s->n, s->name);
}

void sk_sentinels_query(const struct sk_sentinels *s, const char *argv[3])
{
    argv[0] = "SENTINEL";
    argv[1] = "MASTER";
    argv[2] = s->name;
}

void sk_sentinels_role_query(const char *argv[1])
{
    argv[0] = "ROLE";
}

void sk_sentinels_subscribe(const char *argv[2])
{
    argv[0] = "SUBSCRIBE";
    argv[1] = "+switch-master";
}

int sk_sentinels_due(const struct sk_sentinels *s, int64_t now)
{
    return now >= s->next_poll_ms;
}

void sk_sentinels_round(struct sk_sentinels *s, int64_t now, int fast)
{
    s->next_poll_ms = now + (fast || !s->in_use ? SK_SENTINELS_FAST_MS : SK_SENTINELS_POLL_MS);
}

/* The value of field name in a SENTINEL MASTER reply (a flat array of
 * names and values), or NULL. */
static const redisReply *field(const redisReply *rep, const char *name)
{
    if (rep->type != REDIS_REPLY_ARRAY) return NULL;
    for (size_t i = 0; i + 1 < rep->elements; i += 2) {
        const redisReply *k = rep->element[i];
        if ((k->type == REDIS_REPLY_STRING || k->type == REDIS_REPLY_STATUS) &&
            !strcmp(k->str, name))
            return rep->element[i + 1];
    }
    return NULL;
}

static int64_t num_of(const redisReply *v, int *ok)
{
    int64_t x = 0;
    if (sk_reply_i64(v, &x)) *ok = 0;
    return x;
}

void sk_sentinels_answer(struct sk_sentinels *s, int i, const redisReply *rep, int64_t now)
{
    if (i < 0 || i >= s->n) return;
    struct sk_sentinels_peer *p = &s->peer[i];
    if (!rep) {
        p->answered = p->named = 0;
        return;
    }
    if (rep->type == REDIS_REPLY_ERROR) {
        /* "No such master with that name": an answer, naming nothing */
        p->answered = strstr(rep->str, "No such master") != NULL;
        p->named = 0;
        p->at_ms = now;
        return;
    }
    const redisReply *ip = field(rep, "ip"), *port = field(rep, "port"),
                     *epoch = field(rep, "config-epoch");
    int ok = ip && ip->type == REDIS_REPLY_STRING && ip->len > 0 && ip->len < sizeof p->host;
    int64_t pt = num_of(port, &ok), ep = epoch ? num_of(epoch, &ok) : 0;
    if (!ok || pt <= 0 || pt > 65535) {
        p->answered = p->named = 0; /* an odd answer counts as none */
        return;
    }
    p->answered = p->named = 1;
    snprintf(p->host, sizeof p->host, "%s", ip->str);
    p->port = (int)pt;
    p->epoch = ep;
    p->at_ms = now;
}

int sk_sentinels_message(struct sk_sentinels *s, int i, const redisReply *msg, int64_t now)
{
    if (i < 0 || i >= s->n || !msg || msg->type != REDIS_REPLY_ARRAY || msg->elements != 3 ||
        msg->element[0]->type != REDIS_REPLY_STRING || strcmp(msg->element[0]->str, "message") ||
        msg->element[2]->type != REDIS_REPLY_STRING)
        return 0;
    char name[128], oldh[256], newh[256];
    int oldp, newp;
    if (sscanf(msg->element[2]->str, "%127s %255s %d %255s %d", name, oldh, &oldp, newh, &newp) !=
            5 ||
        strcmp(name, s->name) != 0 || newp <= 0 || newp > 65535)
        return 0;
    /* newer than anything heard: a failover a majority authorised */
    int64_t top = 0;
    for (int j = 0; j < s->n; j++)
        if (s->peer[j].named && s->peer[j].epoch > top) top = s->peer[j].epoch;
    struct sk_sentinels_peer *p = &s->peer[i];
    p->answered = p->named = 1;
    snprintf(p->host, sizeof p->host, "%s", newh);
    p->port = newp;
    p->epoch = top + 1;
    p->at_ms = now;
    s->next_poll_ms = now; /* the others' answers are asked again at once */
    return 1;
}

int sk_sentinels_role(struct sk_sentinels *s, const redisReply *rep)
{
    if (!rep) return 0;
    const char *role = sk_handshake_role(rep);
    int master = !strcmp(role, "master");
    if (!master) {
        char what[64];
        snprintf(what, sizeof what, "answers ROLE %.20s", role);
        sk_sentinels_demoted(s, what);
    }
    return !master;
}

void sk_sentinels_demoted(struct sk_sentinels *s, const char *what)
{
    if (!s->in_use) return;
    s->role_bad = 1;
    snprintf(s->why, sizeof s->why, "master %.60s at %.60s:%d %.60s", s->name, s->host, s->port,
             what);
}

int sk_sentinels_is_current(const struct sk_sentinels *s, const char *host, int port)
{
    return s->in_use && s->port == port && !strcmp(s->host, host);
}

enum sk_sentinels_verdict sk_sentinels_decide(struct sk_sentinels *s, int64_t now, char *host,
                                              size_t cap, int *port)
{
    if (s->in_use && s->role_bad) return SK_SN_LEAVE;
    int need = s->n / 2 + 1, heard = 0;
    const struct sk_sentinels_peer *best = NULL;
    int best_votes = 0;
    for (int i = 0; i < s->n; i++) {
        const struct sk_sentinels_peer *p = &s->peer[i];
        if (!p->answered || now - p->at_ms > SK_SENTINELS_LEASE_MS) continue;
        heard++;
        if (!p->named) continue;
        int votes = 0;
        for (int j = 0; j < s->n; j++) {
            const struct sk_sentinels_peer *q = &s->peer[j];
            votes += q->named && now - q->at_ms <= SK_SENTINELS_LEASE_MS && q->port == p->port &&
                     q->epoch == p->epoch && !strcmp(q->host, p->host);
        }
        /* the newest epoch wins; within one, the most named */
        if (!best || p->epoch > best->epoch || (p->epoch == best->epoch && votes > best_votes)) {
            best = p;
            best_votes = votes;
        }
    }
    if (heard >= need && best) {
        if (sk_sentinels_is_current(s, best->host, best->port)) {
            s->confirmed_ms = now;
            return SK_SN_KEEP;
        }
        snprintf(host, cap, "%s", best->host);
        *port = best->port;
        snprintf(s->why, sizeof s->why,
                 "%d of %d sentinel(s) answered; master %.60s is %.60s:%d (epoch %lld)", heard,
                 s->n, s->name, best->host, best->port, (long long)best->epoch);
        return SK_SN_USE;
    }
    if (s->in_use) {
        if (now - s->confirmed_ms <= SK_SENTINELS_LEASE_MS) return SK_SN_KEEP;
        snprintf(s->why, sizeof s->why,
                 "no majority of the %d sentinel(s) has named master %.60s at %.60s:%d for %d ms "
                 "(%d answered)",
                 s->n, s->name, s->host, s->port, SK_SENTINELS_LEASE_MS, heard);
        return SK_SN_LEAVE;
    }
    snprintf(s->why, sizeof s->why,
             "waiting for a majority of the %d sentinel(s) to name master %.60s (%d answered)",
             s->n, s->name, heard);
    return SK_SN_WAIT;
}

void sk_sentinels_using(struct sk_sentinels *s, const char *host, int port, int64_t named_ms)
{
    s->in_use = 1;
    s->role_bad = 0;
    snprintf(s->host, sizeof s->host, "%s", host);
    s->port = port;
    s->confirmed_ms = named_ms;
}

void sk_sentinels_dropped(struct sk_sentinels *s)
{
    s->in_use = 0;
    s->role_bad = 0;
}
