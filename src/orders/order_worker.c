/* order_worker.c - Redis order streams -> the store, exactly once (see
 * order_worker.h for the protocol): the worker's life and its loop. The
 * other files (order_worker_int.h): order_fetch.c reads the entries,
 * order_batch.c persists and acknowledges them, order_streams.c says which
 * streams it follows, order_guard.c is the rollback guard, order_stall.c
 * tells a worker that makes no progress.
 *
 * A pass over the followed activities:
 *   1. re-list activities (new ones get a consumer group per stream -- one
 *      stream, or one per segment of a segmented activity -- created at id 0
 *      with MKSTREAM so entries written before the group are consumed), and
 *      the rollback guard when it is due (order_guard.c);
 *   2. history: this consumer's own pending entries (left by a previous
 *      life of the same consumer name, or by a failed batch);
 *   3. XAUTOCLAIM: entries idle on any consumer longer than claim_idle_ms;
 *   4. new entries (XREADGROUP ... >), blocking only when 2 and 3 were idle;
 *   5. trim acknowledged entries.
 * Each fetch is one store transaction, then XACK. Nothing is acked before
 * its transaction committed. */
#include "orders/order_worker.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cli.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "core/vec.h"
#include "orders/job_conns.h"
#include "orders/order_worker_int.h"

#define ONCE_FAILURES 10 /* consecutive failed passes before --once gives up (~10 s) */

#define INC(field, n) SK_WORKER_INC(w, field, n)

void sk_worker_opts_init(struct sk_worker_opts *o)
{
    memset(o, 0, sizeof *o);
    o->batch = 500;
    o->block_ms = 1000;
    o->linger_ms = 20;
    o->claim_idle_ms = 30000;
    o->max_deliveries = 5;
    o->relist_ms = 1000;
    o->trim = 1;
    o->guard_ms = 1000;
    o->stall_warn_ms = 10000;
}

#ifdef SK_TEST
/* Test builds only (seckill-hooks, the Makefile): a fault hook's number. */
static uint64_t env_u64(const char *name)
{
    const char *v = getenv(name);
    uint64_t n = 0;
    if (v && *v && sk_cli_parse_u64(v, &n) != 0) n = 0;
    return n;
}
#endif

int sk_worker_new(sk_worker **out, const struct sk_worker_opts *o, char *err, size_t cap)
{
    *out = NULL;
    if (err && cap) err[0] = 0;
    if (!o->redis_url || !o->db_spec) {
        if (err) snprintf(err, cap, "worker: redis URL and database spec are required");
        return SK_EINVAL;
    }
    if (o->batch < 1 || o->batch > 10000 || o->block_ms < 0 || o->linger_ms < 0 ||
        o->linger_ms > 1000 || o->claim_idle_ms < 0 || o->max_deliveries < 1 || o->relist_ms < 1 ||
        o->guard_ms < 0 || o->stall_warn_ms < 0) {
        if (err) snprintf(err, cap, "worker: option out of range");
        return SK_EINVAL;
    }
    if (o->consumer && (!*o->consumer || strlen(o->consumer) >= SK_WORKER_CONSUMER_MAX)) {
        if (err)
            snprintf(err, cap, "worker: consumer name must be 1..%d bytes",
                     SK_WORKER_CONSUMER_MAX - 1);
        return SK_EINVAL;
    }
    sk_worker *w = calloc(1, sizeof *w);
    if (!w) goto nomem;
    w->o = *o;
    w->redis_url = strdup(o->redis_url);
    w->db_spec = strdup(o->db_spec);
    if (!w->redis_url || !w->db_spec) goto nomem;
    w->o.redis_url = w->redis_url;
    w->o.db_spec = w->db_spec;
    if (o->consumer) {
        snprintf(w->consumer, sizeof w->consumer, "%s", o->consumer);
    } else {
        /* Stable across restarts: a restarted worker finds its own pending
         * entries at once instead of waiting claim_idle_ms for XAUTOCLAIM. */
        char host[48] = "localhost";
        gethostname(host, sizeof host - 1);
        host[sizeof host - 1] = 0;
        snprintf(w->consumer, sizeof w->consumer, "worker-%s", host);
    }
    w->o.consumer = w->consumer;
    /* BLOCK must end before the command timeout. */
    int rc = sk_job_conns_open(&w->r, &w->st, w->redis_url, 1000, w->o.block_ms + 2000, w->db_spec,
                               err, cap);
    if (rc) {
        sk_worker_free(w);
        return rc;
    }
#ifdef SK_TEST
    w->crash_before = env_u64("SECKILL_TEST_CRASH_BEFORE_COMMIT");
    w->crash_after = env_u64("SECKILL_TEST_CRASH_AFTER_COMMIT");
    const char *pause = getenv("SECKILL_TEST_PAUSE_AT");
    if (pause) snprintf(w->pause_at, sizeof w->pause_at, "%s", pause);
#endif
    *out = w;
    return 0;
nomem:
    sk_worker_free(w);
    if (err) snprintf(err, cap, "out of memory");
    return SK_ENOMEM;
}

void sk_worker_free(sk_worker *w)
{
    if (!w) return;
    sk_job_conns_close(w->r, w->st);
    free(w->s);
    free(w->foreign);
    free(w->e);
    free(w->orders);
    free(w->fields);
    free(w->argv);
    free(w->lens);
    free(w->redis_url);
    free(w->db_spec);
    free(w);
}

void sk_worker_stop(sk_worker *w)
{
    atomic_store(&w->stop, 1);
}

void sk_worker_stats(const sk_worker *w, struct sk_worker_stats *o)
{
    struct worker_counters *c = (struct worker_counters *)&w->c; /* atomic loads only */
#define SK_WC(field, kind, name, help)
#define SK_WC_WORKER(field, kind, name, help) o->field = atomic_load(&c->field);
#define SK_WC_SWEEP(field, kind, name, help)
#include "core/worker_counters.def"
#undef SK_WC
}

const char *sk_worker_errstr(const sk_worker *w)
{
    return w->errstr;
}

const char *sk_worker_consumer(const sk_worker *w)
{
    return w->consumer;
}

/* Sleeps ms, waking early when stopped (never used for correctness, only
 * to pace retries). */
void sk_worker_nap(sk_worker *w, int ms)
{
    sk_nap(&w->stop, ms);
}

/* Room for a command of n arguments (w->argv and w->lens). */
int sk_worker_grow_argv(sk_worker *w, size_t n)
{
    if (SK_VEC_RESERVE(w->argv, w->acap, n, 64) || SK_VEC_RESERVE(w->lens, w->lcap, n, 64))
        return SK_ENOMEM;
    return 0;
}

/* ---- Redis helpers ---------------------------------------------------- */

void sk_worker_test_pause(sk_worker *w, const char *step)
{
    /* pause_at is only ever set in a test build (SK_TEST) */
    if (!w->pause_at[0] || w->paused || strcmp(w->pause_at, step) != 0) return;
    w->paused = 1;
    sk_log(SK_LOG_INFO, "worker: test pause at %s (pid %d)", step, (int)getpid());
    raise(SIGSTOP);
}

/* A failed Redis call: counted, logged once per outage. */
int sk_worker_redis_fail(sk_worker *w, int rc, const char *what)
{
    INC(redis_errors, 1);
    sk_worker_set_err(w, "redis %s: %s", what, w->r->errstr);
    if (!w->redis_down) sk_log(SK_LOG_ERROR, "worker: %s (retrying)", w->errstr);
    w->redis_down = 1;
    return rc;
}

void sk_worker_redis_ok(sk_worker *w)
{
    if (w->redis_down) sk_log(SK_LOG_INFO, "worker: redis reachable again");
    w->redis_down = 0;
}

/* An error reply (or another unexpected type): logged, SK_EPROTO. */
int sk_worker_reply_fail(sk_worker *w, const redisReply *rep, const char *what)
{
    sk_worker_set_err(w, "redis %s: %s", what,
                      rep && rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply");
    sk_log(SK_LOG_WARN, "worker: %s", w->errstr);
    return SK_EPROTO;
}

/* ---- The loop ---------------------------------------------------------- */

/* One pass; *progress: entries fetched. */
static int pass(sk_worker *w, size_t *progress)
{
    *progress = 0;
    int64_t now = sk_mono_ms();
    int rc = 0;
    if (now >= w->next_relist_ms) {
        if ((rc = sk_worker_relist(w)) != 0) return rc;
        w->next_relist_ms = now + w->o.relist_ms;
    }
    /* Before anything is read: a Redis that went back in time is fenced
     * and rebuilt first (docs/recovery.md). */
    if ((rc = sk_worker_guard(w)) != 0) return rc;
    for (size_t i = 0; i < w->ns; i++)
        if (!w->s[i].group_ready && (rc = sk_worker_make_group(w, &w->s[i])) != 0) return rc;
    size_t got;
    for (size_t i = 0; i < w->ns && !atomic_load(&w->stop); i++) {
        struct worker_stream *s = &w->s[i];
        if (!s->group_ready || !s->history_due) continue;
        if ((rc = sk_worker_fetch_history(w, i, &got)) != 0) return rc;
        *progress += got;
    }
    for (size_t i = 0; i < w->ns && !atomic_load(&w->stop); i++) {
        struct worker_stream *s = &w->s[i];
        if (!s->group_ready || (!w->o.once && now < s->next_claim_ms)) continue;
        if ((rc = sk_worker_fetch_claimed(w, i, &got)) != 0) return rc;
        *progress += got;
        /* A full scan done: wait before the next one (an idle entry needs
         * claim_idle_ms to qualify anyway). */
        if (!strcmp(s->claim_cursor, "0-0"))
            s->next_claim_ms = now + (w->o.claim_idle_ms / 2 > 100 ? w->o.claim_idle_ms / 2 : 100);
    }
    if (atomic_load(&w->stop)) return 0;
    int block = w->o.once || *progress ? -1 : w->o.block_ms;
    if ((rc = sk_worker_fetch_new(w, block, &got)) != 0) return rc;
    *progress += got;
    return w->o.trim ? sk_worker_trim_due(w, 0) : 0;
}

/* After any failed pass: whatever the failed read may have handed this
 * consumer (an XREADGROUP whose reply was lost, one node of a split read),
 * and whatever a failed batch left unacknowledged, is pending on this
 * consumer: read it at the next pass, not after the claim-idle time. */
static void history_all(sk_worker *w)
{
    for (size_t i = 0; i < w->ns; i++) {
        w->s[i].history_due = 1;
        snprintf(w->s[i].history_from, sizeof w->s[i].history_from, "0");
    }
}

static int run_pipeline(sk_worker *w)
{
    int backoff = SK_WORKER_BACKOFF_MIN_MS, failures = 0;
    sk_log(SK_LOG_INFO, "worker: consumer %s of group %s, batch %d, claim idle %d ms, DLQ after %d",
           w->consumer, SK_WORKER_GROUP, w->o.batch, w->o.claim_idle_ms, w->o.max_deliveries);
    while (!atomic_load(&w->stop)) {
        size_t progress;
        int rc = pass(w, &progress);
        sk_worker_stall_check(w, sk_mono_ms());
        if (rc) {
            history_all(w);
            if (w->o.once && ++failures >= ONCE_FAILURES) return rc;
            sk_worker_nap(w, backoff);
            backoff =
                backoff * 2 > SK_WORKER_BACKOFF_MAX_MS ? SK_WORKER_BACKOFF_MAX_MS : backoff * 2;
            continue;
        }
        failures = 0;
        backoff = SK_WORKER_BACKOFF_MIN_MS;
        if (w->o.once && progress == 0) {
            /* Drained: leave the streams trimmed to what is unacknowledged. */
            if (w->o.trim && (rc = sk_worker_trim_due(w, 1)) != 0) {
                if (++failures >= ONCE_FAILURES) return rc;
                sk_worker_nap(w, backoff);
                continue;
            }
            break;
        }
        /* Nothing followed yet: the XREADGROUP that would block is skipped,
         * so wait here for the next re-list. */
        if (!w->ns && !w->o.once) sk_worker_nap(w, w->o.relist_ms);
        /* A short fetch: what arrives meanwhile waits for the next one. A
         * transaction's fixed cost (its sync to disk above all) and the
         * round trips around it were ~270 us against ~8.5 us per order
         * (SQLite, BENCHMARKS.md): a trickle read as it came paid them every
         * few orders. The orders are no less safe while they wait: they
         * are in the stream, unacknowledged, and a poll answers them from
         * Redis. */
        if (w->fetch_short && w->o.linger_ms && !w->o.once) {
            int64_t wait = w->fetch_ms + w->o.linger_ms - sk_mono_ms();
            if (wait > 0) sk_worker_nap(w, (int)wait);
        }
    }
    return 0;
}

int sk_worker_run(sk_worker *w)
{
    sk_webhooks *wh = NULL;
    /* always (but once): the admin API may add endpoints at any time */
    if (!w->o.once) {
        char err[512];
        w->o.webhook_opts.node = w->o.node;
        if (sk_webhooks_start(&wh, w->db_spec, w->o.webhooks, w->o.n_webhooks, &w->o.webhook_opts,
                              err, sizeof err) != 0)
            sk_log(SK_LOG_ERROR, "worker: webhooks not started: %s", err);
        else
            sk_log(SK_LOG_INFO,
                   "worker: webhook dispatcher started (%d configured endpoint(s), and the "
                   "database's)",
                   w->o.n_webhooks);
    }
    w->webhooks = wh;
    int rc = run_pipeline(w);
    w->webhooks = NULL;
    sk_webhooks_stop(wh);
    return rc;
}
