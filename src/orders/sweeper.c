/* sweeper.c - payment timeouts: unpaid orders past their deadline are
 * cancelled in the DB and their units released in Redis; cancelled orders
 * whose release was lost (crash gap) are released on a later pass. The
 * cancel path itself (DB first, then release, then mark) is shared with
 * the HTTP cancel route and the CLI: sk_order_cancel. See sweeper.h. */
#include "orders/sweeper.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/codes.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/live_acts.h"
#include "engine/stock.h"
#include "orders/job_conns.h"
#include "redis/reply.h"

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000
#define UNRELEASABLE_LOG_EVERY_MS 60000 /* one warning a minute, not one a pass */
/* Expired batches per pass: a sale that keeps expiring orders faster than
 * one batch must not hold the pass forever (the owed releases run at the
 * start of each pass). */
#define MAX_BATCHES_PER_PASS 20

/* ---- The sweeper --------------------------------------------------------- */

/* The sweeper's own counters (struct sk_sweeper_stats, atomic). */
struct counters {
#define SK_WC(field, kind, name, help)
#define SK_WC_WORKER(field, kind, name, help)
#define SK_WC_SWEEP(field, kind, name, help) _Atomic uint64_t field;
#include "core/worker_counters.def"
#undef SK_WC
};

struct sk_sweeper {
    struct sk_sweeper_opts o;
    char *redis_url, *db_spec;
    sk_redis *r;
    sk_store *st;
    struct sk_order *buf; /* o.batch orders */
    /* Where the next pass continues the owed-release scan: releases Redis
     * refuses stay owed, and must not hide the ones after them. */
    char cursor[SK_STORE_ORDER_ID_MAX];
    int64_t next_unreleasable_log_ms;
    /* The store's identity (docs/design.md) and this pass's owners: an
     * activity whose live state another store preheated is not swept (its
     * units in Redis are that store's sale). Logged once per activity. */
    char store_id[SK_STORE_IDENTITY_MAX];
    struct owner {
        uint64_t aid;
        int foreign;
    } owners[64];
    size_t nowners;
    uint64_t logged[64];
    size_t nlogged;
    atomic_int stop;
    struct counters c;
    char errstr[512];
};

/* sk_sweeper_stats's counter, and the node's of the same name (sweep_...) */
#define INC(field, n)                                                                              \
    do {                                                                                           \
        atomic_fetch_add(&sw->c.field, (uint64_t)(n));                                             \
        sk_node_wc_add(sw->o.node, SK_WC_sweep_##field, (uint64_t)(n));                            \
    } while (0)

#define set_err(sw, ...) sk_errf((sw)->errstr, sizeof(sw)->errstr, 0, __VA_ARGS__)

void sk_sweeper_opts_init(struct sk_sweeper_opts *o)
{
    memset(o, 0, sizeof *o);
    o->interval_ms = 1000;
    o->batch = 500;
}

int sk_sweeper_new(sk_sweeper **out, const struct sk_sweeper_opts *o, char *err, size_t cap)
{
    *out = NULL;
    if (err && cap) err[0] = 0;
    if (!o || !o->redis_url || !o->db_spec)
        return sk_einval(err, cap, "sweeper: a Redis URL and a database spec are required");
    if (o->batch < 1 || o->batch > 10000)
        return sk_einval(err, cap, "sweeper: batch %d outside 1..10000", o->batch);
    if (o->interval_ms < 1 || o->interval_ms > 86400000)
        return sk_einval(err, cap, "sweeper: interval %d ms outside 1..86400000", o->interval_ms);
    sk_sweeper *sw = calloc(1, sizeof *sw);
    if (!sw) goto oom;
    sw->o = *o;
    sw->redis_url = strdup(o->redis_url);
    sw->db_spec = strdup(o->db_spec);
    sw->buf = calloc((size_t)o->batch, sizeof *sw->buf);
    if (!sw->redis_url || !sw->db_spec || !sw->buf) goto oom;
    sw->o.redis_url = sw->redis_url;
    sw->o.db_spec = sw->db_spec;
    char why[600];
    int rc =
        sk_job_conns_open(&sw->r, &sw->st, sw->redis_url, 1000, 5000, sw->db_spec, why, sizeof why);
    if (rc) {
        if (err) snprintf(err, cap, "sweeper: %s", why);
        sk_sweeper_free(sw);
        return rc;
    }
    *out = sw;
    return 0;
oom:
    sk_sweeper_free(sw);
    if (err) snprintf(err, cap, "sweeper: out of memory");
    return SK_ENOMEM;
}

void sk_sweeper_free(sk_sweeper *sw)
{
    if (!sw) return;
    sk_job_conns_close(sw->r, sw->st);
    free(sw->buf);
    free(sw->redis_url);
    free(sw->db_spec);
    free(sw);
}

void sk_sweeper_stop(sk_sweeper *sw)
{
    atomic_store(&sw->stop, 1);
}

void sk_sweeper_stats(const sk_sweeper *sw, struct sk_sweeper_stats *o)
{
    struct counters *c = (struct counters *)&sw->c; /* atomic loads only */
#define SK_WC(field, kind, name, help)
#define SK_WC_WORKER(field, kind, name, help)
#define SK_WC_SWEEP(field, kind, name, help) o->field = atomic_load(&c->field);
#include "core/worker_counters.def"
#undef SK_WC
}

const char *sk_sweeper_errstr(const sk_sweeper *sw)
{
    return sw->errstr;
}

/* A store failure that is about the store, not one order: stop the pass. */
static int store_down(int rc)
{
    return rc == SK_EDB || rc == SK_ETIMEDOUT || rc == SK_ENOMEM;
}

/* Runs the release of cancelled order o and marks it. 0, or the error
 * that must stop the pass (Redis unreachable, store failing). *marked is
 * 1 when the order is no longer owed. */
static int release_one(sk_sweeper *sw, const struct sk_order *o, int64_t now_ms,
                       struct sk_sweep_result *res, int *marked)
{
    *marked = 0;
    int rrc = -1;
    int64_t given = 0;
    int rc =
        sk_stock_release(sw->r, o->activity_id, o->order_id, o->user_id, o->quantity, &rrc, &given);
    if (rc < 0) {
        res->errors++;
        set_err(sw, "release %s: redis: %s", o->order_id, sw->r->errstr);
        /* A script or protocol failure is about this call; a connection
         * failure is about every call that would follow. */
        return rc == SK_EIO || rc == SK_ETIMEDOUT || rc == SK_EAUTH ? rc : 0;
    }
    if (rrc == SK_RC_RELEASED) {
        res->released++;
        res->units_released += given;
    } else if (rrc == SK_RC_ALREADY_RELEASED) {
        res->already_released++;
    } else {
        /* Not in the ledger, another user or quantity there, or no live
         * activity: no retry can succeed until an operator acts. It stays
         * owed (reconcile reports it) and the cursor moves past it. */
        res->unreleasable++;
        return 0;
    }
    if ((rc = sk_store_order_mark_released(sw->st, o->order_id, now_ms)) != 0) {
        res->errors++;
        set_err(sw, "mark %s released: %s", o->order_id, sk_store_errstr(sw->st));
        return store_down(rc) ? rc : 0;
    }
    *marked = 1;
    return 0;
}

/* The crash gap: cancelled orders whose release is owed. One batch per
 * pass, continuing where the previous pass stopped. */
/* 1 when aid's live state belongs to another store (asked once per pass
 * and activity; a Redis failure is no verdict: *rc says it). */
static int foreign(sk_sweeper *sw, uint64_t aid, struct sk_sweep_result *res, int *rc)
{
    *rc = 0;
    for (size_t i = 0; i < sw->nowners; i++)
        if (sw->owners[i].aid == aid) return sw->owners[i].foreign;
    char owner[SK_STORE_IDENTITY_MAX];
    if ((*rc = sk_live_act_owner(sw->r, aid, owner, sizeof owner)) != 0) {
        res->errors++;
        set_err(sw, "owner of activity %" PRIu64 ": redis: %s", aid, sw->r->errstr);
        return 0;
    }
    int f = sk_live_foreign(owner, sw->store_id);
    if (sw->nowners < sizeof sw->owners / sizeof sw->owners[0])
        sw->owners[sw->nowners++] = (struct owner){aid, f};
    int logged = 0;
    for (size_t i = 0; i < sw->nlogged && !logged; i++)
        logged = sw->logged[i] == aid;
    if (f && !logged) {
        sk_log(SK_LOG_ERROR,
               "sweeper: activity %" PRIu64 " is in this database but its live state in Redis "
               "was preheated from another database (store %s; this one is store %s): its "
               "unpaid orders are left alone (neither cancelled nor released). `seckill "
               "reconcile` names the fix",
               aid, owner, sw->store_id);
        if (sw->nlogged < sizeof sw->logged / sizeof sw->logged[0]) sw->logged[sw->nlogged++] = aid;
    }
    return f;
}

static int pay_owed(sk_sweeper *sw, int64_t now_ms, struct sk_sweep_result *res)
{
    size_t n = 0;
    int rc = sk_store_orders_unreleased(sw->st, sw->cursor, (size_t)sw->o.batch, sw->buf, &n);
    if (rc) {
        set_err(sw, "owed releases: %s", sk_store_errstr(sw->st));
        return rc;
    }
    for (size_t i = 0; i < n && !atomic_load(&sw->stop); i++) {
        int marked, frc;
        if (foreign(sw, sw->buf[i].activity_id, res, &frc)) {
            res->foreign++;
            snprintf(sw->cursor, sizeof sw->cursor, "%s", sw->buf[i].order_id);
            continue;
        }
        if (frc) return frc == SK_EIO || frc == SK_ETIMEDOUT || frc == SK_EAUTH ? frc : 0;
        if ((rc = release_one(sw, &sw->buf[i], now_ms, res, &marked)) != 0) return rc;
        if (marked) res->repaired++;
        snprintf(sw->cursor, sizeof sw->cursor, "%s", sw->buf[i].order_id);
    }
    if (n < (size_t)sw->o.batch) sw->cursor[0] = 0; /* end reached: next pass starts over */
    return 0;
}

/* Cancels one expired order and, when this call cancelled it, releases it. */
static int expire_one(sk_sweeper *sw, const struct sk_order *o, int64_t now_ms,
                      struct sk_sweep_result *res)
{
    int frc, f = foreign(sw, o->activity_id, res, &frc);
    if (frc) return frc == SK_EIO || frc == SK_ETIMEDOUT || frc == SK_EAUTH ? frc : 0;
    if (f) {
        res->foreign++;
        return 0;
    }
    int prev = -1;
    int rc = sk_store_order_cancel(sw->st, o->order_id, now_ms, &prev);
    if (rc == SK_ESTATE) {
        res->lost_to_payment++; /* paid since it was listed: the payment won */
        return 0;
    }
    if (rc) {
        res->errors++;
        set_err(sw, "cancel %s: %s", o->order_id, sk_store_errstr(sw->st));
        return store_down(rc) ? rc : 0;
    }
    if (prev != SK_ORDER_CREATED) {
        res->already_cancelled++; /* another canceller won; it owes the release */
        return 0;
    }
    res->cancelled++;
    int marked;
    return release_one(sw, o, now_ms, res, &marked);
}

static int expire_all(sk_sweeper *sw, int64_t now_ms, struct sk_sweep_result *res)
{
    for (int b = 0; b < MAX_BATCHES_PER_PASS && !atomic_load(&sw->stop); b++) {
        size_t n = 0;
        int rc = sk_store_orders_expired(sw->st, now_ms, (size_t)sw->o.batch, sw->buf, &n);
        if (rc) {
            set_err(sw, "expired orders: %s", sk_store_errstr(sw->st));
            return rc;
        }
        res->expired += n;
        size_t errors = res->errors, skipped = res->foreign;
        for (size_t i = 0; i < n && !atomic_load(&sw->stop); i++)
            if ((rc = expire_one(sw, &sw->buf[i], now_ms, res)) != 0) return rc;
        /* A full batch may have more behind it; a batch with failures (or
         * orders left to another store) would list the same orders again:
         * leave them to the next pass. */
        if (n < (size_t)sw->o.batch || res->errors != errors || res->foreign != skipped) break;
    }
    return 0;
}

int sk_sweeper_pass(sk_sweeper *sw, int64_t now_ms, struct sk_sweep_result *res)
{
    struct sk_sweep_result local;
    if (!res) res = &local;
    memset(res, 0, sizeof *res);
    sw->errstr[0] = 0;
    /* No cancel while the release cannot follow: it would only grow the
     * owed list. */
    int rc = sk_redis_ensure(sw->r);
    if (rc) set_err(sw, "redis: %s", sw->r->errstr);
    sw->nowners = 0;
    if (rc == 0 && !sw->store_id[0] &&
        (rc = sk_store_identity(sw->st, sw->store_id, sizeof sw->store_id)) != 0)
        set_err(sw, "store identity: %s", sk_store_errstr(sw->st));
    /* Owed releases first, so a release that fails below is retried on the
     * next pass, not twice in this one. */
    if (rc == 0) rc = pay_owed(sw, now_ms, res);
    if (rc == 0) rc = expire_all(sw, now_ms, res);
    INC(passes, 1);
    if (rc) INC(failed_passes, 1);
    INC(cancelled, res->cancelled);
    INC(lost_to_payment, res->lost_to_payment);
    INC(released, res->released);
    INC(units_released, res->units_released);
    INC(repaired, res->repaired);
    INC(unreleasable, res->unreleasable);
    INC(errors, res->errors);
    INC(foreign, res->foreign);
    if (res->cancelled || res->repaired)
        sk_log(SK_LOG_INFO,
               "sweeper: cancelled %zu unpaid order(s), %" PRId64
               " unit(s) back on sale, %zu owed release(s) done, %zu lost to a payment",
               res->cancelled, res->units_released, res->repaired, res->lost_to_payment);
    if (res->unreleasable) {
        int64_t now = sk_mono_ms();
        if (now >= sw->next_unreleasable_log_ms) {
            sk_log(SK_LOG_WARN,
                   "sweeper: %zu cancelled order(s) cannot be released (not in the Redis "
                   "ledger, or the activity is gone from Redis); run seckill reconcile",
                   res->unreleasable);
            sw->next_unreleasable_log_ms = now + UNRELEASABLE_LOG_EVERY_MS;
        }
    }
    return rc;
}

/* The time a pass judges deadlines by: the earlier of this host's clock
 * and Redis's (TIME). A deadline is Redis's clock at the admission (the
 * order's stream entry id) plus the payment timeout, so neither clock
 * jumping ahead alone (an NTP step, a VM resumed, a wrong clock fixed
 * backwards) releases an order before its deadline; a clock behind only
 * releases late. 0, or the Redis error (no pass then: its releases could
 * not follow anyway). */
static int sweep_now(sk_sweeper *sw, int64_t *now)
{
    int64_t local = sk_wall_ms(), s, us;
    redisReply *rep;
    int rc = sk_redis_ensure(sw->r);
    if (rc == 0) rc = sk_redis_cmd(sw->r, &rep, "TIME");
    if (rc) {
        set_err(sw, "redis: TIME: %s", sw->r->errstr);
        return rc;
    }
    int ok = rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
             sk_reply_i64(rep->element[0], &s) == 0 && sk_reply_i64(rep->element[1], &us) == 0;
    freeReplyObject(rep);
    if (!ok) {
        set_err(sw, "redis: unexpected reply to TIME");
        return SK_EPROTO;
    }
    *now = s * 1000 + us / 1000 < local ? s * 1000 + us / 1000 : local;
    return 0;
}

/* Sleeps ms, waking early when stopped (paces passes and retries only). */
static void nap(sk_sweeper *sw, int64_t ms)
{
    sk_nap(&sw->stop, ms);
}

int sk_sweeper_run(sk_sweeper *sw)
{
    int backoff = 0;
    sk_log(SK_LOG_INFO, "sweeper: every %d ms, batch %d", sw->o.interval_ms, sw->o.batch);
    while (!atomic_load(&sw->stop)) {
        int64_t start = sk_mono_ms(), now = 0;
        int rc = sweep_now(sw, &now);
        if (rc == 0) rc = sk_sweeper_pass(sw, now, NULL);
        if (rc) {
            if (!backoff) sk_log(SK_LOG_WARN, "sweeper: pass failed: %s (retrying)", sw->errstr);
            backoff = backoff ? backoff * 2 : BACKOFF_MIN_MS;
            if (backoff > BACKOFF_MAX_MS) backoff = BACKOFF_MAX_MS;
            nap(sw, backoff);
            continue;
        }
        if (backoff) sk_log(SK_LOG_INFO, "sweeper: passes succeed again");
        backoff = 0;
        nap(sw, sw->o.interval_ms - (sk_mono_ms() - start));
    }
    return 0;
}
