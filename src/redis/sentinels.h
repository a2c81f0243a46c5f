/* sentinels.h - which master the Sentinels of a redis+sentinel:// URL name,
 * and whether the master in use may still be used: the Sentinel protocol
 * written once, without I/O (it builds the questions and reads the answers
 * a transport hands it), driven by the async client's Sentinel front
 * (redis_async_sentinel.c), which the blocking facade runs too.
 *
 * The rule (docs/failover.md):
 *   - every Sentinel of the URL is asked `SENTINEL MASTER <name>` (the
 *     master's address and the configuration epoch it was named in) every
 *     SK_SENTINELS_POLL_MS (SK_SENTINELS_FAST_MS while no master is in
 *     use); an answer counts for SK_SENTINELS_LEASE_MS;
 *   - a master is used once a strict majority of the URL's Sentinels have
 *     answered and it is the one named in the newest epoch among them (a
 *     failover is authorised by a majority of the Sentinels and raises the
 *     epoch, so the newest epoch wins over a Sentinel that has not heard
 *     of it yet); a Sentinel announcing +switch-master counts as an answer
 *     newer than any heard, so the move is at once;
 *   - the master in use is left when no majority has named it for
 *     SK_SENTINELS_LEASE_MS (it may be cut off with its clients, the
 *     majority promoting a replica meanwhile: only the Sentinels know), and
 *     when it answers ROLE (asked every SK_SENTINELS_POLL_MS) as anything
 *     but a master, or READONLY.
 * So a client stops sending to a master the Sentinels replaced within
 * SK_SENTINELS_POLL_MS + SK_SENTINELS_TIMEOUT_MS of the moment a majority
 * it can reach names another (at once on +switch-master), and within
 * SK_SENTINELS_LEASE_MS of the last majority it heard when it can reach no
 * majority. */
#ifndef SK_SENTINELS_H
#define SK_SENTINELS_H
#include <stddef.h>
#include <stdint.h>

#include <hiredis.h>

#include "redis/redis_url.h"

#define SK_SENTINELS_POLL_MS 500 /* every Sentinel asked, the master's ROLE, this often */
#define SK_SENTINELS_FAST_MS 100 /* ... while no master is ready */
#define SK_SENTINELS_LEASE_MS                                                                      \
    2000                            /* an answer counts this long; a master no majority            \
                                       named for this long is left */
#define SK_SENTINELS_TIMEOUT_MS 500 /* a Sentinel's answer (the transports' bound) */

enum sk_sentinels_verdict {
    SK_SN_WAIT,  /* no master in use, and no majority names one yet */
    SK_SN_KEEP,  /* the master in use stays */
    SK_SN_USE,   /* use the master decide() names (first, or a move) */
    SK_SN_LEAVE, /* stop sending to the master in use (why says why) */
};

/* What one Sentinel said last. */
struct sk_sentinels_peer {
    int answered; /* 1: it answered at at_ms (named a master, or does not know the name) */
    int named;    /* 1: it named host:port in epoch */
    char host[256];
    int port;
    int64_t epoch;
    int64_t at_ms; /* when (monotonic) */
};

struct sk_sentinels {
    int n; /* Sentinels of the URL */
    char name[128];
    struct sk_sentinels_peer peer[SK_REDIS_URL_MAX_SEEDS];
    /* the master in use (set by the transport with sk_sentinels_using) */
    int in_use;
    char host[256];
    int port;
    int64_t confirmed_ms; /* when a majority (or an announcement) last named it */
    int role_bad;         /* it answered ROLE as a replica, or READONLY */
    int64_t next_poll_ms;
    char why[256]; /* the last decision that was not KEEP, in words */
};

/* From a parsed redis+sentinel:// URL, at now (monotonic ms): nothing known,
 * a round due at once. */
void sk_sentinels_init(struct sk_sentinels *s, const struct sk_redis_url *u, int64_t now);

/* The question each Sentinel is asked (argv[3], pointing into s). */
void sk_sentinels_query(const struct sk_sentinels *s, const char *argv[3]);
/* The ROLE question for the master in use, and the subscription each
 * Sentinel's second connection makes (argv[2], static). */
void sk_sentinels_role_query(const char *argv[1]);
void sk_sentinels_subscribe(const char *argv[2]);

/* 1 when a round of questions (and the master's ROLE) is due at now. */
int sk_sentinels_due(const struct sk_sentinels *s, int64_t now);
/* A round starts at now: the next one is due a period later (fast: no
 * master is ready, SK_SENTINELS_FAST_MS). */
void sk_sentinels_round(struct sk_sentinels *s, int64_t now, int fast);

/* Sentinel i's answer to the question (NULL: none came, or it could not be
 * reached). */
void sk_sentinels_answer(struct sk_sentinels *s, int i, const redisReply *rep, int64_t now);
/* A message of Sentinel i's subscription: 1 when it announced a new master
 * of our name (decide() moves there), else 0. */
int sk_sentinels_message(struct sk_sentinels *s, int i, const redisReply *msg, int64_t now);
/* The answer to ROLE of the master in use: 0 fine, 1 it is no master
 * (decide() leaves it). NULL: no answer (the transport's connection
 * handles that). */
int sk_sentinels_role(struct sk_sentinels *s, const redisReply *rep);
/* The master in use is no master any more (what: how it showed, as
 * "answered READONLY"). */
void sk_sentinels_demoted(struct sk_sentinels *s, const char *what);

/* What to do now. SK_SN_USE: host (cap bytes) and *port name the master to
 * use; the transport connects, checks ROLE, and calls sk_sentinels_using.
 * SK_SN_LEAVE: the transport drops the master and calls
 * sk_sentinels_dropped; s->why says why. */
enum sk_sentinels_verdict sk_sentinels_decide(struct sk_sentinels *s, int64_t now, char *host,
                                              size_t cap, int *port);

/* The transport uses host:port now (its handshake checked ROLE), which a
 * majority named at named_ms (the USE decision's time), or no master any
 * more. */
void sk_sentinels_using(struct sk_sentinels *s, const char *host, int port, int64_t named_ms);
void sk_sentinels_dropped(struct sk_sentinels *s);

/* 1 when host:port is the master in use. */
int sk_sentinels_is_current(const struct sk_sentinels *s, const char *host, int port);

#endif
