/* preflight.h - what `seckill serve` finds before it starts: Redis
 * reached or why not (a refused password is said in full), its topology
 * and current master, the settings a sale depends on (persistence,
 * maxmemory-policy: judged by redis/redis_settings.h), and the store
 * reached or why not. `seckill serve --check` prints it and exits
 * 0 (ready) or 1 (a dependency unreachable or unfit); a start logs the
 * banner from it: one block with the version, the addresses, the admin
 * API, Redis, the store, the auth mode and the processes. Blocking calls,
 * made in the supervisor before any event loop runs. */
#ifndef SK_PREFLIGHT_H
#define SK_PREFLIGHT_H
#include <stdint.h>
#include <stdio.h>

#include "http/config.h"

struct sk_preflight {
    /* Redis */
    int redis_rc;           /* 0 reached; SK_EAUTH (handshake refused), SK_EIO, ... */
    char redis_err[400];    /* why not, in full (no secret) */
    char topology[40];      /* "single node", "Sentinel", "Cluster", "unix socket" */
    char master[300];       /* where writes go now: host:port, or "N masters" */
    char role[16];          /* the server's ROLE ("master", "slave"), "" unknown */
    char version[24];       /* redis_version, "" unknown */
    char persistence[200];  /* "AOF on, appendfsync everysec", "unknown (...)" */
    char policy[32];        /* maxmemory-policy, "" unknown */
    int settings_level;     /* the judge's worst level (SK_RSET_*), -1 not judged */
    char settings_why[600]; /* its findings, "; "-separated */
    /* the store */
    int db_rc;            /* 0 reached (or, SQLite, to be made by serve) */
    char db_err[600];     /* why not */
    char db_kind[16];     /* "SQLite", "PostgreSQL", "MariaDB/MySQL" */
    char db_note[300];    /* "schema 9", "the file will be made at start" */
    char db_identity[80]; /* the store's identity (sk_store_identity); "" unknown */
    int64_t stock_ahead;  /* units the store's preheated or open sales may still sell:
                             what Redis must find room for (0 unknown or none) */
};

/* Reaches Redis as cfg says (cfg->redis_timeout_ms) and fills p's Redis
 * part; with p->stock_ahead already read (sk_preflight_store first), its
 * maxmemory is judged against those orders too. Never fails: what went
 * wrong is in p. */
void sk_preflight_redis(const struct sk_config *cfg, struct sk_preflight *p);

/* Reaches the store, without making a SQLite file (one that is missing in
 * a directory that exists is fine: serve makes it), and fills p's store
 * part. */
void sk_preflight_store(const struct sk_config *cfg, struct sk_preflight *p);

/* The --check report on f; returns the exit code: 0 ready, 1 a
 * dependency unreachable or unfit. file: the config file read ("" none). */
int sk_preflight_report(FILE *f, const struct sk_config *cfg, const struct sk_preflight *p,
                        const char *file);

/* The start banner, one log line per item (info). */
void sk_preflight_banner(const struct sk_config *cfg, const struct sk_preflight *p,
                         const char *file, const char *version);

#endif
