/* order_guard.c - the order worker's rollback guard (order_worker_int.h;
 * design in docs/recovery.md).
 *
 * Every guard_ms (1 s), and at once when the worker's Redis connection was
 * made again or a MOVED moved a slot (a restart, a failover, a Sentinel
 * switch all show as one of these), the worker compares every key set it
 * follows with the database, in one pipelined round (HMGET meta, GET
 * stock per key set):
 *   - no definition while the database says the activity was preheated:
 *     the keys vanished (Redis restarted empty, or flushed): rebuild;
 *   - an admission count below the highest one the database holds (the
 *     watermark, raised in every persist transaction), or a ledger without
 *     the order of the highest number of one of the branches the database
 *     holds orders of (one more pipelined HEXISTS per key set and branch:
 *     it sees the loss even after the rolled-back Redis has admitted past
 *     the watermark again, and a Redis that followed another history after
 *     a split, whose admission numbers overlap the lost one's): Redis lacks
 *     orders the database holds: replay;
 *   - some of its keys vanished while others are there (an operator's DEL,
 *     an eviction: four more pipelined EXISTS per key set, recovery.h), or
 *     a buyer's call found so (fence `lost`): salvage what the stream and
 *     the ledger hold into the database, reset, replay;
 *   - fenced by a buyer's call (its process saw admissions this Redis no
 *     longer has, or knew keys that vanished): replay, or rebuild;
 *   - fenced `oversold`: stock given back since pays the oversold units
 *     back, and the fence goes once they are covered;
 *   - fenced `manual`: an operator's; left alone.
 * The recovery itself (fence, settle, rebuild, replay, resume) is
 * orders/recover.c, the same code as `seckill activity recover --apply`.
 * While it runs the worker persists nothing else: the fenced key sets
 * admit nothing, and the others' orders wait in their streams. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/recovery.h"
#include "orders/order_worker_int.h"
#include "orders/recover.h"

/* What the guard found for one activity. */
struct guard_hit {
    uint64_t aid;
    unsigned char only[SK_SEG_MAX]; /* segments to recover */
    int any;                        /* a key set needs a recovery */
};

static uint64_t moved_count(const sk_worker *w)
{
    struct sk_cluster_stats cs;
    return sk_redis_cluster_stats(w->r, &cs) == 0 ? cs.moved : 0;
}

static const struct sk_activity *find_activity(const struct sk_activity *acts, size_t n,
                                               uint64_t id)
{
    for (size_t i = 0; i < n; i++)
        if (acts[i].id == id) return &acts[i];
    return NULL;
}

static struct guard_hit *hit_for(struct guard_hit *hits, size_t *nh, uint64_t aid)
{
    for (size_t i = 0; i < *nh; i++)
        if (hits[i].aid == aid) return &hits[i];
    struct guard_hit *h = &hits[(*nh)++];
    memset(h, 0, sizeof *h);
    h->aid = aid;
    return h;
}

/* Runs the recovery of one activity and counts it. */
static void recover(sk_worker *w, const struct guard_hit *h)
{
    struct sk_recover_opts o = {.apply = 1, .actor = "worker", .only = h->only};
    struct sk_recover_report rep;
    char err[512];
    int rc = sk_recover_activity(w->st, w->r, h->aid, &o, &rep, err, sizeof err);
    if (rc < 0) {
        SK_WORKER_INC(w, recover_failures, 1);
        /* retried every second: the same failure is said once a minute */
        static char last[512];
        static int64_t last_ms;
        int64_t now = sk_mono_ms();
        if (strcmp(last, err) != 0 || now - last_ms >= 60000) {
            sk_log(SK_LOG_ERROR, "worker: recovery of activity %" PRIu64 " failed (retried): %s",
                   h->aid, err);
            snprintf(last, sizeof last, "%s", err);
            last_ms = now;
        }
    } else if (rep.needed) {
        size_t fenced = 0;
        for (size_t i = 0; i < rep.n; i++)
            fenced += rep.ks[i].needed;
        SK_WORKER_INC(w, fences, fenced);
        SK_WORKER_INC(w, recoveries, 1);
        SK_WORKER_INC(w, orders_replayed, rep.orders_replayed);
        SK_WORKER_INC(w, units_oversold, rep.oversold);
        SK_WORKER_INC(w, admissions_lost, rep.lost);
        SK_WORKER_INC(w, orders_refused, rep.refused);
        sk_log(SK_LOG_WARN,
               "worker: activity %" PRIu64 " recovered in %" PRId64 " ms: %zu key set(s), %" PRId64
               " order(s) replayed, %" PRId64 " refused (cancelled: they did not fit), %" PRId64
               " acknowledged admission(s) lost, %" PRId64 " unit(s) oversold",
               h->aid, rep.ms, fenced, rep.orders_replayed, rep.refused, rep.lost, rep.oversold);
    }
    sk_recover_report_free(&rep);
    /* A stream that went back in time brings back entries this consumer had
     * acknowledged: pending again, they are read now, not after the
     * claim-idle time (they are orders the database holds: duplicates). */
    for (size_t i = 0; i < w->ns; i++)
        if (w->s[i].aid == h->aid) {
            w->s[i].history_due = 1;
            snprintf(w->s[i].history_from, sizeof w->s[i].history_from, "0");
        }
}

/* The key sets to look at: every followed stream's, and the base meta of
 * every segmented activity (its `segments` field routes purchases). */
static size_t gather(const sk_worker *w, struct sk_keys *ks)
{
    size_t n = 0;
    for (size_t i = 0; i < w->ns; i++)
        ks[n++] = w->s[i].k;
    for (size_t i = 0; i < w->ns; i++) {
        if (w->s[i].k.seg < 0) continue;
        int seen = 0;
        for (size_t j = w->ns; j < n && !seen; j++)
            seen = ks[j].activity_id == w->s[i].aid;
        if (!seen) sk_keys_for(&ks[n++], w->s[i].aid);
    }
    return n;
}

/* One key set's verdict into hits (has: its ledger holds the order of the
 * watermark); the cheap oversold retry runs here. */
static void judge(sk_worker *w, const struct sk_keys *k, const struct sk_keyset_probe *p,
                  const struct sk_activity *a, int64_t wm, int has, int base,
                  struct guard_hit *hits, size_t *nh)
{
    int preheated = strcmp(a->state, "created") != 0;
    if (!strcmp(p->fence, "manual")) return;
    if (!strcmp(p->fence, "oversold")) {
        int resumed;
        if (sk_recover_oversold_retry(w->st, w->r, a, k, wm, &resumed) < 0)
            SK_WORKER_INC(w, recover_failures, 1);
        return;
    }
    int need = p->fence[0] || (!p->present && preheated) || (p->present && (p->adm < wm || !has)) ||
               (p->lost && preheated);
    if (base) need = preheated && (!p->present || p->segments < 2);
    if (!need) return;
    struct guard_hit *h = hit_for(hits, nh, a->id);
    h->any = 1;
    if (k->seg >= 0) h->only[k->seg] = 1;
}

/* The watermark of a label: the highest admission number of its marks
 * (one per branch). */
static int64_t watermark_of(const struct sk_mark *m, size_t n, const char *label)
{
    int64_t wm = 0;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(m[i].label, label) && m[i].adm > wm) wm = m[i].adm;
    return wm;
}

/* Probes every key set, and the ledger for the order of every branch mark
 * of each, judges each, and recovers what needs it. */
static int check(sk_worker *w, const struct sk_activity *acts, size_t na,
                 const struct sk_mark *marks, size_t nm)
{
    size_t cap = 2 * w->ns;
    struct sk_keys *ks = malloc(cap * sizeof *ks);
    struct sk_keyset_probe *pr = malloc(cap * sizeof *pr);
    int *has = malloc(cap * sizeof *has);
    /* one ledger question per (key set, branch mark) */
    struct sk_keys *qk = malloc((nm + 1) * sizeof *qk);
    const char **qo = malloc((nm + 1) * sizeof *qo);
    size_t *qi = malloc((nm + 1) * sizeof *qi);
    int *qh = malloc((nm + 1) * sizeof *qh);
    struct guard_hit *hits = malloc(w->ns * sizeof *hits);
    int rc = ks && pr && has && qk && qo && qi && qh && hits ? 0 : SK_ENOMEM;
    size_t n = rc ? 0 : gather(w, ks), nh = 0, nq = 0;
    if (n > 1) sk_worker_test_pause(w, "probe");
    if (rc == 0 && (rc = sk_recovery_probe(w->r, ks, n, pr)) < 0)
        sk_worker_redis_fail(w, rc, "rollback guard");
    for (size_t i = 0; rc == 0 && i < n; i++) {
        has[i] = 1;
        if (!pr[i].present || i >= w->ns) continue;
        for (size_t j = 0; j < nm && nq < nm; j++)
            if (!strcmp(marks[j].label, ks[i].label)) {
                qk[nq] = ks[i];
                qo[nq] = marks[j].order_id;
                qi[nq++] = i;
            }
    }
    if (nq > 1) sk_worker_test_pause(w, "ledger");
    if (rc == 0 && nq && (rc = sk_recovery_ledger_has(w->r, qk, qo, nq, qh)) < 0)
        sk_worker_redis_fail(w, rc, "rollback guard");
    for (size_t q = 0; rc == 0 && q < nq; q++)
        has[qi[q]] &= qh[q];
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const struct sk_activity *a = find_activity(acts, na, ks[i].activity_id);
        if (a)
            judge(w, &ks[i], &pr[i], a, watermark_of(marks, nm, ks[i].label), has[i], i >= w->ns,
                  hits, &nh);
    }
    for (size_t i = 0; rc == 0 && i < nh && !atomic_load(&w->stop); i++)
        recover(w, &hits[i]);
    free(ks);
    free(pr);
    free(has);
    free(qk);
    free(qo);
    free(qi);
    free(qh);
    free(hits);
    return rc == SK_ENOMEM ? 0 : rc;
}

int sk_worker_guard(sk_worker *w)
{
    if (w->o.guard_ms <= 0 || w->ns == 0) return 0;
    /* a dropped connection is made again now, so a restarted Redis is
     * checked before anything else is read from it */
    sk_redis_ensure(w->r);
    int64_t now = sk_mono_ms();
    uint64_t moved = moved_count(w);
    if (now < w->guard_next_ms && w->r->connects == w->guard_connects && moved == w->guard_moved)
        return 0;
    w->guard_next_ms = now + w->o.guard_ms;
    struct sk_activity *acts = NULL;
    struct sk_mark *marks = NULL;
    size_t na = 0, nm = 0;
    if (sk_store_activity_list(w->st, &acts, &na) < 0 ||
        sk_store_marks_list(w->st, 0, &marks, &nm) < 0) {
        SK_WORKER_INC(w, db_errors, 1);
        sk_log(SK_LOG_WARN, "worker: rollback guard: database: %s", sk_store_errstr(w->st));
        free(acts);
        return 0;
    }
    int rc = check(w, acts, na, marks, nm);
    /* what this check ran with: a reconnect during it is covered by it */
    w->guard_connects = w->r->connects;
    w->guard_moved = moved_count(w);
    free(acts);
    free(marks);
    return rc;
}
