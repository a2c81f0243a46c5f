/* backend_env.h - the fixture the order-pipeline tests share: a fresh
 * database on one backend (SQLite file or a fresh PostgreSQL database on
 * the run's shared cluster) plus a Redis connection, and a macro that
 * writes a behaviour once and registers it for both backends. */
#ifndef SK_TEST_BACKEND_ENV_H
#define SK_TEST_BACKEND_ENV_H
#include <stdint.h>

#include "harness.h"
#include "redis_conn.h"
#include "store.h"

struct sk_th_env {
    int pg;          /* 0 SQLite, 1 PostgreSQL */
    char dir[320];   /* a fresh temporary directory */
    char path[400];  /* the SQLite file (SQLite only) */
    char spec[420];  /* what sk_store_open and --db take */
    char redis_url[160];
    sk_store *st;
    sk_redis *r;
};

/* Fresh database named file (SQLite: <dir>/<file>) or a fresh PostgreSQL
 * database, and a connection to redis_url. Log level: warnings. */
void sk_th_env_init(struct sk_th_env *e, int pg, const char *file, const char *redis_url);
/* Opens e->spec and redis_url again (after sk_th_env_done, or a restart). */
void sk_th_env_open(struct sk_th_env *e, const char *redis_url);
void sk_th_env_done(struct sk_th_env *e);

/* An activity in the store (state "open", pay_timeout_s as given) and
 * preheated and open in Redis, with a window around now. */
uint64_t sk_th_env_activity(struct sk_th_env *e, int64_t stock, int64_t limit, int64_t max_qty,
                            int64_t pay_timeout_s);

/* SK_BACKEND_TEST(prefix, file, name): static void name(struct sk_th_env *)
 * runs as <prefix>_sqlite_<name> and <prefix>_pg_<name>. */
#define SK_BACKEND_TEST(prefix, file, name)                                                        \
    static void name(struct sk_th_env *e);                                                         \
    SK_TEST(prefix##_sqlite_##name)                                                                \
    {                                                                                              \
        struct sk_th_env e;                                                                        \
        sk_th_env_init(&e, 0, file, sk_th_redis_url());                                            \
        name(&e);                                                                                  \
        sk_th_env_done(&e);                                                                        \
    }                                                                                              \
    SK_TEST(prefix##_pg_##name)                                                                    \
    {                                                                                              \
        struct sk_th_env e;                                                                        \
        sk_th_env_init(&e, 1, file, sk_th_redis_url());                                            \
        name(&e);                                                                                  \
        sk_th_env_done(&e);                                                                        \
    }                                                                                              \
    static void name(struct sk_th_env *e)

#endif
