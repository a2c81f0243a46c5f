/* ops_sampler.c - reads what the dashboard and /metrics need from Redis and
 * the database, once a second, in the worker process (see ops_sampler.h). */
#include "orders/ops_sampler.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "engine/activity.h"
#include "engine/backlog.h"
#include "engine/keys.h"
#include "engine/live_acts.h"
#include "engine/segment.h"
#include "orders/job_conns.h"
#include "orders/order_worker.h"
#include "redis/redis_conn.h"
#include "redis/reply.h"
#include "store/store.h"

_Static_assert(SK_NODE_NAME >= SK_ACTIVITY_NAME_MAX, "activity names fit the node's rows");

/* Copies at most cap - 1 bytes of src, terminated. */
static void copy_text(char *dst, size_t cap, const char *src)
{
    size_t n = strnlen(src, cap - 1);
    memcpy(dst, src, n);
    dst[n] = 0;
}

struct sk_sampler {
    sk_redis *r;
    sk_store *st;
    struct sk_node_worker *w;
    atomic_int stop;
    struct sk_node_sample smp; /* built here, then published whole */
    /* The activity list last read: while the database cannot be read, the
     * Redis figures (the backlog and its age above all) go on being
     * sampled for the activities it knew. */
    struct sk_activity *acts;
    size_t nacts;
    /* The order counts are the one read whose cost grows with the sale (a
     * COUNT over every order of the activity: ~1 us per order on SQLite):
     * they are read again only once COUNT_DUTY times their last cost has
     * passed, so they never take more than 1/COUNT_DUTY of a core; until
     * then each activity shows its last counts. */
    int64_t counts_next_us;
    /* The activities only Redis holds (engine/live_acts.h): listed again
     * once ORPHAN_DUTY times the last walk's cost has passed, and at most
     * every ORPHAN_EVERY_MS (a walk reads every key of every master); the
     * last list is published in between. */
    int64_t orphans_next_us, orphans_ms;
    struct sk_node_orphan unknown[SK_NODE_ORPHANS];
    int32_t nunknown, more_unknown;
    size_t ncounted;
    struct counted {
        uint64_t id;
        int64_t orders[SK_NODE_NSTATUS], units[SK_NODE_NSTATUS];
    } counted[SK_NODE_ACTS];
};

#define COUNT_DUTY 50
#define ORPHAN_DUTY 50
#define ORPHAN_EVERY_MS 5000

int sk_sampler_new(sk_sampler **out, const char *redis_url, const char *db_spec,
                   struct sk_node_worker *w, char *err, size_t cap)
{
    *out = NULL;
    if (!redis_url || !db_spec || !w) {
        if (err) snprintf(err, cap, "sampler: redis URL, database and node slot are required");
        return SK_EINVAL;
    }
    sk_sampler *s = calloc(1, sizeof *s);
    if (!s) {
        if (err) snprintf(err, cap, "out of memory");
        return SK_ENOMEM;
    }
    s->w = w;
    int rc = sk_job_conns_open(&s->r, &s->st, redis_url, 1000, 2000, db_spec, err, cap);
    if (rc) {
        sk_sampler_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void sk_sampler_free(sk_sampler *s)
{
    if (!s) return;
    sk_job_conns_close(s->r, s->st);
    free(s->acts);
    free(s);
}

void sk_sampler_stop(sk_sampler *s)
{
    atomic_store(&s->stop, 1);
}

/* Adds one key set's figures (a whole unsegmented activity, or one
 * segment) to a; xfer gets xout - xin (units lent, not yet received). */
static int sample_keys(sk_redis *r, const struct sk_keys *k, struct sk_node_act *a, int64_t *xfer)
{
    redisReply *m, *x;
    const char *argv[] = {"HMGET", k->meta, SK_M_SAMPLE_FIELDS};
    int rc = sk_redis_command(r, &m, (int)(sizeof argv / sizeof *argv), argv, NULL);
    if (rc < 0) return rc;
    int exists = m->type == REDIS_REPLY_ARRAY && m->elements == SK_M_SAMPLE_N &&
                 m->element[SK_M_SAMPLE_INITIAL]->type == REDIS_REPLY_STRING;
    if (exists) {
        redisReply **e = m->element;
        a->open = a->open && sk_reply_i64_or(e[SK_M_SAMPLE_OPEN], 0) == 1;
        a->initial += sk_reply_i64_or(e[SK_M_SAMPLE_INITIAL], 0);
        a->released += sk_reply_i64_or(e[SK_M_SAMPLE_RELEASED], 0);
        *xfer += sk_reply_i64_or(e[SK_M_SAMPLE_XOUT], 0) - sk_reply_i64_or(e[SK_M_SAMPLE_XIN], 0);
    } else {
        a->exists = 0;
        a->open = 0;
    }
    freeReplyObject(m);
    if (!exists) return 0;
    int64_t v[2] = {0, 0}; /* stock, dlq length */
    const char *fmt[2] = {"GET %s", "XLEN %s"};
    const char *key[2] = {k->stock, k->dlq};
    for (int i = 0; i < 2; i++) {
        rc = sk_redis_cmd(r, &x, fmt[i], key[i]);
        if (rc < 0) return rc;
        v[i] = sk_reply_i64_or(x, 0);
        freeReplyObject(x);
    }
    struct sk_backlog b;
    rc = sk_backlog_read(r, k->orders, SK_WORKER_GROUP, &b);
    if (rc < 0) return rc;
    int64_t backlog = b.entries;
    if (b.age_ms > a->oldest_age_ms) a->oldest_age_ms = b.age_ms;
    a->remaining += v[0];
    a->dlq += v[1];
    a->backlog = a->backlog < 0 || backlog < 0 ? -1 : a->backlog + backlog;
    return 0;
}

/* An activity's live figures from Redis (every segment's, summed); owner:
 * its own meta's store_id ("" none). */
static int sample_redis(sk_redis *r, struct sk_node_act *a, char owner[SK_NODE_STORE_ID])
{
    int segs = 1;
    int rc = sk_seg_count(r, a->id, &segs);
    if (rc < 0) return rc;
    a->exists = 1;
    a->open = 1;
    a->initial = a->remaining = a->released = a->backlog = a->dlq = a->oldest_age_ms = 0;
    int64_t xfer = 0;
    for (int i = 0; i < (segs > 1 ? segs : 1) && rc == 0; i++) {
        struct sk_keys k;
        sk_keys_seg(&k, a->id, segs > 1 ? i : SK_SEG_NONE);
        rc = sample_keys(r, &k, a, &xfer);
    }
    if (rc < 0) return rc;
    /* units on their way between segments are neither sold nor on a shelf:
     * counted as remaining (held + remaining + in transit == initial) */
    a->remaining += xfer > 0 ? xfer : 0;
    a->segments = segs;
    struct sk_keys b;
    sk_keys_for(&b, a->id);
    redisReply *rep;
    const char *argv[] = {"HMGET", b.meta, SK_M_SAMPLE_BASE_FIELDS};
    rc = sk_redis_command(r, &rep, (int)(sizeof argv / sizeof *argv), argv, NULL);
    if (rc < 0) return rc;
    int ok = rep->type == REDIS_REPLY_ARRAY && rep->elements == SK_M_SAMPLE_BASE_N;
    redisReply **e = ok ? rep->element : NULL;
    int reg = ok && e[SK_M_SAMPLE_BASE_REG_END]->type == REDIS_REPLY_STRING;
    a->reconcile_drift = ok ? sk_reply_i64_or(e[SK_M_SAMPLE_BASE_RECONCILE_DRIFT], -1) : -1;
    a->reconcile_ms = ok ? sk_reply_i64_or(e[SK_M_SAMPLE_BASE_RECONCILE_MS], 0) : 0;
    owner[0] = 0;
    const redisReply *sid = ok ? e[SK_M_SAMPLE_BASE_STORE_ID] : NULL;
    if (sid && sid->type == REDIS_REPLY_STRING && sid->len < SK_NODE_STORE_ID)
        memcpy(owner, sid->str, sid->len + 1);
    freeReplyObject(rep);
    /* pre-registration: the live set's size (docs/fairness.md) */
    a->registered = -1;
    if (reg) {
        rc = sk_redis_cmd(r, &rep, "SCARD %s", b.reg);
        if (rc < 0) return rc;
        a->registered = sk_reply_i64_or(rep, 0);
        freeReplyObject(rep);
    }
    if (!a->exists) {
        a->initial = a->remaining = 0;
        a->backlog = 0;
        a->oldest_age_ms = 0;
    }
    /* held + released: remaining counts the units in transit, so
     * initial - remaining is what buyers hold (docs/design.md) */
    a->admitted = a->exists ? a->initial - a->remaining + a->released : 0;
    return 0;
}

/* The activities only Redis holds, when their walk is due: those of
 * live[0..nlive) the database's list acts[0..n) lacks. */
static void list_unknown(sk_sampler *s, const struct sk_activity *acts, size_t n)
{
    int64_t t0 = sk_mono_us();
    if (t0 < s->orphans_next_us) return;
    struct sk_live_act *live;
    size_t nlive;
    if (sk_live_acts(s->r, &live, &nlive) < 0) {
        s->orphans_next_us = t0 + ORPHAN_EVERY_MS * 1000LL;
        return;
    }
    s->nunknown = s->more_unknown = 0;
    for (size_t i = 0; i < nlive; i++) {
        int listed = 0;
        for (size_t j = 0; j < n && !listed; j++)
            listed = acts[j].id == live[i].id;
        if (listed) continue;
        if (s->nunknown == SK_NODE_ORPHANS) {
            s->more_unknown++;
            continue;
        }
        struct sk_node_orphan *o = &s->unknown[s->nunknown++];
        *o = (struct sk_node_orphan){
            .id = live[i].id, .why = SK_NODE_ORPHAN_UNKNOWN, .open = live[i].open};
        copy_text(o->store_id, sizeof o->store_id, live[i].store_id);
    }
    free(live);
    int64_t spent = sk_mono_us() - t0, wait = spent * ORPHAN_DUTY;
    s->orphans_next_us = t0 + (wait > ORPHAN_EVERY_MS * 1000LL ? wait : ORPHAN_EVERY_MS * 1000LL);
    s->orphans_ms = sk_wall_ms();
}

/* An orphan of this sample (room permitting). */
static void add_orphan(struct sk_node_sample *smp, const struct sk_node_orphan *o)
{
    if (smp->n_orphans < SK_NODE_ORPHANS)
        smp->orphans[smp->n_orphans++] = *o;
    else
        smp->more_orphans++;
}

/* The order counts of activity id, timed into *spent_us. */
static int counts_read(sk_sampler *s, uint64_t id, struct sk_order_counts *c, int64_t *spent_us)
{
    int64_t t0 = sk_mono_us();
    int rc = sk_store_orders_count(s->st, id, c);
    *spent_us += sk_mono_us() - t0;
    return rc;
}

/* Live sales first, then the most recent: the rows worth a look. */
static int act_order(const void *pa, const void *pb)
{
    const struct sk_activity *x = pa, *y = pb;
    int64_t now = sk_wall_ms();
    int lx = x->start_ms <= now && now < x->end_ms, ly = y->start_ms <= now && now < y->end_ms;
    if (lx != ly) return ly - lx;
    if (x->start_ms != y->start_ms) return x->start_ms < y->start_ms ? 1 : -1;
    return x->id < y->id ? 1 : x->id > y->id ? -1 : 0;
}

/* One sample, published (Redis or database failures are published too: the
 * health part says which failed). Also a sign of life of the worker slot. */
static void sample_pass(sk_sampler *s)
{
    struct sk_node_sample *smp = &s->smp;
    memset(smp, 0, sizeof *smp);
    struct sk_activity *acts = NULL;
    size_t n = 0;
    smp->db_ok = sk_store_activity_list(s->st, &acts, &n) == 0;
    if (smp->db_ok) {
        free(s->acts);
        s->acts = acts;
        s->nacts = n;
    } else {
        copy_text(smp->db_err, sizeof smp->db_err, sk_store_errstr(s->st));
        acts = s->acts;
        n = s->nacts;
    }
    if (n > 1) qsort(acts, n, sizeof *acts, act_order);
    smp->n_acts = n > SK_NODE_ACTS ? SK_NODE_ACTS : (int32_t)n;
    smp->more_acts = n > SK_NODE_ACTS ? (int32_t)(n - SK_NODE_ACTS) : 0;
    smp->redis_ok = sk_redis_ensure(s->r) == 0;
    if (sk_store_identity(s->st, smp->store_id, sizeof smp->store_id) < 0) smp->store_id[0] = 0;
    int64_t now_us = sk_mono_us(), count_us = 0;
    int count = now_us >= s->counts_next_us;
    for (int i = 0; i < smp->n_acts; i++) {
        struct sk_node_act *a = &smp->acts[i];
        const struct sk_activity *d = &acts[i];
        a->id = d->id;
        copy_text(a->name, sizeof a->name, d->name);
        a->start_ms = d->start_ms;
        a->end_ms = d->end_ms;
        a->segments = d->segments;
        a->db_stock = d->stock_db;
        a->reconcile_drift = -1;
        a->registered = -1;
        a->backlog = a->oldest_age_ms = -1; /* unknown unless Redis says */
        char owner[SK_NODE_STORE_ID] = "";
        if (smp->redis_ok && sample_redis(s->r, a, owner) < 0) {
            smp->redis_ok = 0;
            a->backlog = a->oldest_age_ms = -1;
        }
        if (sk_live_foreign(owner, smp->store_id)) {
            struct sk_node_orphan o = {
                .id = d->id, .why = SK_NODE_ORPHAN_OTHER_STORE, .open = a->open};
            copy_text(o.store_id, sizeof o.store_id, owner);
            add_orphan(smp, &o);
        }
        if (!a->exists) a->initial = a->remaining = d->stock; /* not preheated: the definition */
        const struct counted *last = NULL;
        for (size_t j = 0; !count && j < s->ncounted && !last; j++)
            if (s->counted[j].id == d->id) last = &s->counted[j];
        struct sk_order_counts c;
        if (last) {
            memcpy(a->orders, last->orders, sizeof a->orders);
            memcpy(a->units, last->units, sizeof a->units);
        } else if (smp->db_ok && counts_read(s, d->id, &c, &count_us) == 0) {
            for (int k = 0; k < SK_NODE_NSTATUS && k < SK_ORDER_NSTATUS; k++) {
                a->orders[k] = c.orders[k];
                a->units[k] = c.units[k];
            }
        } else if (smp->db_ok) {
            smp->db_ok = 0;
            copy_text(smp->db_err, sizeof smp->db_err, sk_store_errstr(s->st));
        }
    }
    if (count && smp->db_ok) {
        s->ncounted = (size_t)smp->n_acts;
        for (int i = 0; i < smp->n_acts; i++) {
            s->counted[i].id = smp->acts[i].id;
            memcpy(s->counted[i].orders, smp->acts[i].orders, sizeof s->counted[i].orders);
            memcpy(s->counted[i].units, smp->acts[i].units, sizeof s->counted[i].units);
        }
        s->counts_next_us = now_us + count_us * COUNT_DUTY;
    } else if (count) {
        s->ncounted = 0; /* counted again at the next pass */
    }
    if (smp->redis_ok && smp->db_ok) list_unknown(s, acts, n);
    for (int32_t i = 0; i < s->nunknown; i++)
        add_orphan(smp, &s->unknown[i]);
    smp->more_orphans += s->more_unknown;
    smp->orphans_ms = s->orphans_ms;
    if (!smp->redis_ok) copy_text(smp->redis_err, sizeof smp->redis_err, s->r->errstr);
    smp->sampled_ms = sk_wall_ms();
    sk_node_sample_put(s->w, smp);
    sk_node_proc_beat(&s->w->proc, smp->sampled_ms);
}

void sk_sampler_run(sk_sampler *s, int interval_ms)
{
    while (!atomic_load(&s->stop)) {
        int64_t next = sk_mono_ms() + interval_ms;
        sample_pass(s);
        sk_nap(&s->stop, next - sk_mono_ms());
    }
}
