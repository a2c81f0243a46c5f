/* sale_env.h - an HTTP sale against a real `seckill serve`, for the tests
 * of a Redis that goes back in time (test_recovery*.c): admin calls,
 * buyer threads that count every answer by kind, and the invariants of
 * docs/design.md checked on the database and Redis afterwards. */
#ifndef SK_TEST_SALE_ENV_H
#define SK_TEST_SALE_ENV_H
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "redis/redis_conn.h"
#include "store/store.h"
#include "support/harness.h"

#define SALE_THREADS 6
#define SALE_MAX_USERS 200000

/* What the buyers got. */
struct sale {
    int port;
    uint64_t aid;
    uint32_t users;  /* buyers are 1..users */
    int64_t limit;   /* per user */
    int max_threads; /* SALE_THREADS unless smaller */
    atomic_int stop; /* set to stop the buyers */
    atomic_int hold; /* set to pause them (each finishes the request in hand) */
    atomic_long ok;  /* 200 */
    atomic_long sold_out, limit_exceeded;
    atomic_long recovering;     /* 503 recovering with Retry-After */
    atomic_long unavailable;    /* other 503 (Redis unreachable, ...) */
    atomic_long lost;           /* no answer (connection closed) */
    atomic_long other;          /* anything else: a test failure */
    atomic_long bad_recovering; /* 503 recovering without Retry-After: 1 */
    atomic_int other_status;
    char other_body[256];
    atomic_long last_ok_ms, first_recovering_ms;
    atomic_int sold_out_seen;
    pthread_t th[SALE_THREADS];
    int nth;
    /* sale_start_recording: the order id of every 200 (up to ids_cap), and
     * the user it was for */
    char (*ids)[SK_STORE_ORDER_ID_MAX];
    uint64_t *id_user;
    size_t ids_cap;
    atomic_long nids;
    int backoff_ms;      /* after a 503 (sale_start_recording) */
    atomic_long hold_at; /* sale_hold_at: buyers wait while ok >= hold_at (0: never) */
    int netns_fd;        /* the buyers' network namespace (sale_start_in), -1: ours */
    /* the longest time without a 200 since sale_gap_reset, and when it ended */
    atomic_long max_gap_ms, gap_end_ms;
    /* sale_time_from: answers timed since, those slower than slow_us, the
     * slowest (us) */
    atomic_int timing;
    long slow_us;
    atomic_long timed, slow, slowest_us;
    /* when set, every 200 also counts in gap_group's gap fields: the
     * longest time without a 200 across several sales */
    struct sale *_Atomic gap_group; /* set by the test while buyers run */
};

/* An admin call; returns the status (the body in *out when not NULL). */
int sale_admin(int port, const char *method, const char *path, const char *body, char *out,
               size_t cap);
/* Creates (id 0: a fresh one), preheats and opens an activity over the
 * admin API: stock units, limit per user, segments (1 = not segmented),
 * max_per_order = limit. Returns its id. */
uint64_t sale_activity(int port, uint64_t id, int64_t stock, int64_t limit, int segments);
/* The same, open from a minute ago for open_s seconds, with a payment
 * timeout of pay_timeout_s (0: the default, 30 minutes). */
uint64_t sale_activity_for(int port, uint64_t id, int64_t stock, int64_t limit, int segments,
                           int64_t open_s, int64_t pay_timeout_s);
/* Waits until /readyz answers 200 (bounded). */
void sale_wait_ready(int port);

/* Starts threads buyers (at most SALE_THREADS) on the activity; each buys
 * one unit at a time as a random user of 1..users until s->stop or the
 * activity is sold out (409 sold_out). */
void sale_start(struct sale *s, int port, uint64_t aid, uint32_t users, int64_t limit, int threads);
/* The same, and the order id of every 200 is kept (up to max_ids; more
 * fail the test at sale_ids_missing; sale_ids_free releases them), and a
 * buyer answered 503 waits backoff_ms before its next purchase (as a
 * client honouring Retry-After would, though shorter: a failover that
 * takes seconds is not spent answering millions of 503s to buyers in a
 * loop, which would starve the Sentinels of the 2 cores). */
void sale_start_recording(struct sale *s, int port, uint64_t aid, uint32_t users, int64_t limit,
                          int threads, size_t max_ids, int backoff_ms);
/* sale_start_recording with every buyer thread in the network namespace
 * netns_fd first (setns: port is on that namespace's loopback). */
void sale_start_in(struct sale *s, int netns_fd, int port, uint64_t aid, uint32_t users,
                   int64_t limit, int threads, size_t max_ids, int backoff_ms);
/* The longest time without a 200 is measured from now (s->max_gap_ms). */
void sale_gap_reset(struct sale *s);
/* From now every answer's time (request written to response read) is
 * counted: s->timed, s->slow (over slow_ms), s->slowest_us; with the gap
 * reset. sale_time_stop ends the count. */
void sale_time_from(struct sale *s, long slow_ms);
void sale_time_stop(struct sale *s);
void sale_stop(struct sale *s);
/* Buyers send no purchase while at least n 200s were counted (0 lifts the
 * hold): a fault then lands mid-sale however fast the sale runs. */
void sale_hold_at(struct sale *s, long n);
/* Pauses the buyers until enough of what they bought is persisted: waits
 * for more than `ok` 200s, holds the buyers, waits until the database
 * holds `persisted` orders of the activity, lets them go again and waits
 * for one more 200, so that a fault made next lands mid-sale with those
 * orders persisted, however slow the worker is next to the buyers (all
 * bounded). */
void sale_hold_until_persisted(struct sale *s, sk_store *st, long ok, int64_t persisted);
/* How many of the recorded 200s' orders the database does not hold (the
 * first such id into first, cap bytes, "" when none). */
long sale_ids_missing(sk_store *st, const struct sale *s, char *first, size_t cap);
void sale_ids_free(struct sale *s);
/* sale_wait conditions: the database holds at least n orders of the
 * activity (sale_db_has, arg a struct sale_db_want); the buyers got more
 * than n 200s (sale_ok_above, arg a struct sale_ok_want). */
struct sale_db_want {
    sk_store *st;
    uint64_t aid;
    int64_t n;
};
int sale_db_has(void *arg);
struct sale_ok_want {
    struct sale *s;
    long n;
};
int sale_ok_above(void *arg);
/* When the test's process exits before sale_log_passed: the counts of
 * the sale last given to sale_log_sale (if any), serve's /readyz on port,
 * and the first 60 lines of the serve log worth reading (warnings,
 * errors, recovery, Redis links). */
void sale_log_on_failure(const char *serve_log, int port);
void sale_log_sale(struct sale *s);
void sale_log_passed(void);
/* The buyers' counts as one line. */
void sale_print(const struct sale *s, const char *label);

/* Waits (bounded by timeout_ms) until cond(arg) is true; fails the test
 * with what otherwise. */
void sale_wait(int (*cond)(void *), void *arg, int timeout_ms, const char *what);
/* Orders of the activity in the database (all statuses). */
int64_t sale_db_orders(sk_store *st, uint64_t aid);

/* After the sale, once the order worker drained the streams: the orders
 * that exist (database + Redis-only) never exceed the stock, no user holds
 * more than limit in the database, Redis's stock + held == initial (no
 * fence left), Redis holds what the database holds, and `seckill
 * reconcile` says consistent. Returns the units sold. */
int64_t sale_check_invariants(sk_store *st, sk_redis *r, const char *redis_url, const char *db_spec,
                              uint64_t aid, int64_t stock, int64_t limit);

/* Number of audit rows of kind for the activity. */
int sale_audit_count(sk_store *st, uint64_t aid, const char *kind);
/* Held orders the recoveries of the activity put back into Redis (the sum
 * their recover_replay audit rows give). */
long long sale_replayed_held(sk_store *st, uint64_t aid);

/* Waits until every stream of the activity is acknowledged and nothing is
 * fenced (the worker drained and resumed), bounded. */
void sale_wait_drained(sk_redis *r, uint64_t aid, int timeout_ms);

#endif
