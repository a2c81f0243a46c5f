/* backend_env.h - the fixture the order-pipeline tests share: a fresh
 * database on one backend (SQLite file, or a fresh database on the run's
 * shared PostgreSQL cluster or MariaDB server) plus a Redis connection,
 * and a macro that writes a behaviour once and registers it for every
 * backend. */
#ifndef SK_TEST_BACKEND_ENV_H
#define SK_TEST_BACKEND_ENV_H
#include <stddef.h>
#include <stdint.h>

#include "engine/stock.h"
#include "redis/redis_conn.h"
#include "store/store.h"
#include "support/harness.h"

/* Backends, for sk_th_env_init. */
enum { SK_TH_SQLITE = 0, SK_TH_PG = 1, SK_TH_MYSQL = 2 };

struct sk_th_env {
    int pg;         /* a server backend: PostgreSQL or MariaDB (0: SQLite) */
    int my;         /* MariaDB */
    char dir[320];  /* a fresh temporary directory */
    char path[400]; /* the SQLite file (SQLite only) */
    char spec[420]; /* what sk_store_open and --db take */
    char redis_url[160];
    sk_store *st;
    sk_redis *r;
};

/* Fresh database of backend kind (SK_TH_*): SQLite <dir>/<file>, or a
 * fresh database on the shared server, and a connection to redis_url.
 * Log level: warnings. */
void sk_th_env_init(struct sk_th_env *e, int kind, const char *file, const char *redis_url);
/* Opens e->spec and redis_url again (after sk_th_env_done, or a restart). */
void sk_th_env_open(struct sk_th_env *e, const char *redis_url);
void sk_th_env_done(struct sk_th_env *e);
/* Moves e to a redis-server of its own (started into rs, stopped with the
 * test), before it made anything: for a test that looks at every
 * activity Redis holds (a plain `seckill reconcile`), which the run's
 * shared server holds the other tests' of. */
struct sk_th_redis;
void sk_th_env_own_redis(struct sk_th_env *e, struct sk_th_redis *rs);

/* An activity in the store (state "open", pay_timeout_s as given) and
 * preheated and open in Redis, with a window around now. */
uint64_t sk_th_env_activity(struct sk_th_env *e, int64_t stock, int64_t limit, int64_t max_qty,
                            int64_t pay_timeout_s);
/* The same with its stock over `segments` segments (1: not segmented);
 * preheated and opened in Redis only when preheat is set (else see
 * sk_th_env_preheat_open). */
uint64_t sk_th_env_activity_segs(struct sk_th_env *e, int64_t stock, int64_t limit, int64_t max_qty,
                                 int64_t pay_timeout_s, int segments, int preheat);
/* Preheats and opens the store's activity aid in Redis; checks the stock
 * preheated and the segment count Redis then reports. */
void sk_th_env_preheat_open(struct sk_th_env *e, uint64_t aid);

/* An admitted purchase. */
struct sk_th_bought {
    char oid[SK_ORDER_ID_MAX];
    uint64_t uid;
    int64_t qty;
};

/* Users first..first+n-1 each buy 1 + (user % max_qty) units, `batch` at a
 * time (one sk_th_stock_buy call each: a segmented activity's purchases go
 * over HTTP to a `seckill serve` on this store, whose buyers go to their
 * home segments, borrowing as needed). The admitted
 * ones go to out (returned count), each admitted for the quantity asked;
 * refusals other than sold out / insufficient fail the test. */
size_t sk_th_env_buy_users(struct sk_th_env *e, uint64_t aid, uint64_t first, size_t n,
                           int64_t max_qty, size_t batch, struct sk_th_bought *out);

struct sk_worker_opts;
/* o initialised for a worker of e (its Redis and store) named consumer. */
void sk_th_env_worker_opts(const struct sk_th_env *e, struct sk_worker_opts *o,
                           const char *consumer);

/* Drains every stream with the real order worker (once mode) as consumer;
 * claim_idle_ms >= 0 overrides the worker's default (0 also takes over
 * every entry another consumer left pending). */
void sk_th_env_persist(struct sk_th_env *e, const char *consumer, int claim_idle_ms);

/* fn on a fresh environment of kind on the run's Redis (init, fn, done). */
void sk_th_env_run(int kind, const char *file, void (*fn)(struct sk_th_env *));

/* SK_BACKEND_TEST(prefix, file, name): static void name(struct sk_th_env *)
 * runs as <prefix>_sqlite_<name>, <prefix>_pg_<name> and
 * <prefix>_mysql_<name> (a file using it says SK_TH_PG_USED and
 * SK_TH_MY_USED). */
#define SK_BACKEND_TEST(prefix, file, name)                                                        \
    static void name(struct sk_th_env *e);                                                         \
    SK_TEST(prefix##_sqlite_##name)                                                                \
    {                                                                                              \
        sk_th_env_run(SK_TH_SQLITE, file, name);                                                   \
    }                                                                                              \
    SK_TEST(prefix##_pg_##name)                                                                    \
    {                                                                                              \
        sk_th_env_run(SK_TH_PG, file, name);                                                       \
    }                                                                                              \
    SK_TEST(prefix##_mysql_##name)                                                                 \
    {                                                                                              \
        sk_th_env_run(SK_TH_MYSQL, file, name);                                                    \
    }                                                                                              \
    static void name(struct sk_th_env *e)

#endif
