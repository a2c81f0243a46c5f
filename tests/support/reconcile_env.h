/* reconcile_env.h - what the reconcile tests (test_reconcile.c and
 * test_reconcile_segments.c) share on top of backend_env: breaking the
 * store or Redis on purpose, running `seckill reconcile` and checking its
 * repairs, and a live sale (buyers, worker, sweeper) reconciled over and
 * over on a thread while it runs. */
#ifndef SK_TEST_RECONCILE_ENV_H
#define SK_TEST_RECONCILE_ENV_H
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "orders/order_worker.h"
#include "orders/reconcile.h"
#include "support/backend_env.h"

#define HAS(out, s) CHECK_MSG(strstr((out), (s)) != NULL, "expected \"%s\" in:\n%s", (s), (out))
#define HASNT(out, s) CHECK_MSG(strstr((out), (s)) == NULL, "unexpected \"%s\" in:\n%s", (s), (out))

/* Raw SQL under the store (to break it on purpose). */
void sk_th_be_sql(struct sk_th_env *e, const char *sql);
/* One Redis command (fmt with up to three %s arguments) that must not
 * answer an error. */
void sk_th_redis_do(struct sk_th_env *e, const char *fmt, const char *a, const char *b,
                    const char *c);

/* Runs `seckill reconcile --redis .. --db ..` with `--activity <aid>`
 * (every activity of the DB when aid is 0) plus extra arguments
 * (NULL-terminated, may be NULL); output into out. Returns the exit code. */
int sk_th_reconcile(struct sk_th_env *e, uint64_t aid, char *out, size_t cap,
                    const char *const *extra);
/* The report of a reconcile of aid that must find it consistent (exit 0,
 * "consistent", no "DRIFT"); into out (cap bytes), returned. */
const char *sk_th_reconcile_clean(struct sk_th_env *e, uint64_t aid, char *out, size_t cap);
/* The library's report of aid as if seen later_ms from now (into *rep,
 * the caller frees it); fails the test when it cannot be made. */
void sk_th_reconcile_later(struct sk_th_env *e, uint64_t aid, int64_t later_ms,
                           struct sk_reconcile_report *rep);
/* Audit rows of activity aid, of kind `kind` (all when NULL). */
size_t sk_th_audit_count(struct sk_th_env *e, uint64_t aid, const char *kind);
/* Drift must be found (exit 1, with line), then repaired with exactly
 * `audits` new audit rows, at least one of kind audit_kind, and then gone. */
void sk_th_expect_repaired(struct sk_th_env *e, uint64_t aid, const char *line,
                           const char *audit_kind, size_t audits);

/* ---- a live sale ---------------------------------------------------------- */

/* A live sale of activity aid: the order worker (consumer, batch 7), a
 * sweeper that cancels every order as soon as it is persisted (its units
 * are bought again) and a checker that reconciles over and over, each on
 * its own thread. */
struct sk_th_live {
    struct sk_th_env *e;
    uint64_t aid;
    sk_worker *w;
    pthread_t tw, tc, ts;
    atomic_int stop, sweep_stop;
    atomic_int checks;    /* reconciles run */
    int bad;              /* and those that showed drift */
    char first_bad[8192]; /* the first of them, printed */
    /* How the checker reads (sk_th_live_start_as): chunk > 0 reads a sale
     * bigger than it in slices; periodic checks as the worker does
     * (incremental, full every 3rd pass). */
    size_t chunk;
    int periodic;
    int sliced, incremental; /* checks that ran so */
};

/* Starts the three threads; relist_ms > 0 overrides the worker's default. */
void sk_th_live_start(struct sk_th_live *l, struct sk_th_env *e, uint64_t aid, const char *consumer,
                      int relist_ms);
/* The same with the checker reading in slices of chunk ledger entries
 * (chunk > 0) and, when periodic is set, as the worker's periodic check. */
void sk_th_live_start_as(struct sk_th_live *l, struct sk_th_env *e, uint64_t aid,
                         const char *consumer, int relist_ms, size_t chunk, int periodic);
/* Buyers one by one (users 1, 2, ..., one unit each, sk_th_buy: a
 * segmented activity's purchases go to their home segments) until
 * `wanted` purchases were accepted, within within_ms. Returns how many. */
size_t sk_th_live_buy(struct sk_th_live *l, size_t wanted, int64_t within_ms);
/* Waits (20 s at most) until the `accepted` orders are all persisted,
 * and the checker has run at least 3 times while the worker and the
 * sweeper still run, stops the three, checks that the checker never saw
 * drift; then one more sweeper pass so that no cancel is left half done. */
void sk_th_live_finish(struct sk_th_live *l, size_t accepted);

#endif
