/* order_worker.c - Redis order streams -> the store, exactly once (see
 * order_worker.h for the protocol): the worker's life and its batches.
 * Which streams it follows, and their trimming, is order_streams.c
 * (order_worker_int.h).
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

#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/cli.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "core/num.h"
#include "core/vec.h"
#include "engine/activity.h"
#include "engine/backlog.h"
#include "engine/order_id.h"
#include "orders/order_worker_int.h"
#include "redis/stream_id.h"

#define DB_ATTEMPTS 5    /* store attempts per batch before leaving it pending */
#define ONCE_FAILURES 10 /* consecutive failed passes before --once gives up (~10 s) */
#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 2000

enum { FROM_NEW, FROM_HISTORY, FROM_CLAIM };

/* One fetched stream entry; id and fields point into the reply. */
struct worker_entry {
    size_t si;
    const char *id;
    size_t idlen;
    const redisReply *fields; /* NULL: deleted from the stream while pending */
    int source;
    int bad; /* not an order: poison */
    char reason[200];
    size_t oi; /* index in w->orders when valid */
};

void sk_worker_set_err(sk_worker *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->errstr, sizeof w->errstr, fmt, ap);
    va_end(ap);
}

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

static uint64_t env_u64(const char *name)
{
    const char *v = getenv(name);
    uint64_t n = 0;
    if (v && *v && sk_cli_parse_u64(v, &n) != 0) n = 0;
    return n;
}

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
    int rc = sk_redis_new(&w->r, w->redis_url, 1000, w->o.block_ms + 2000, err, cap);
    if (rc) {
        sk_worker_free(w);
        return rc;
    }
    rc = sk_store_open(&w->st, w->db_spec, err, cap);
    if (rc) {
        sk_worker_free(w);
        return rc;
    }
    w->crash_before = env_u64("SECKILL_TEST_CRASH_BEFORE_COMMIT");
    w->crash_after = env_u64("SECKILL_TEST_CRASH_AFTER_COMMIT");
    const char *pause = getenv("SECKILL_TEST_PAUSE_AT");
    if (pause) snprintf(w->pause_at, sizeof w->pause_at, "%s", pause);
    *out = w;
    return 0;
nomem:
    if (w) {
        free(w->redis_url);
        free(w->db_spec);
        free(w);
    }
    if (err) snprintf(err, cap, "out of memory");
    return SK_ENOMEM;
}

void sk_worker_free(sk_worker *w)
{
    if (!w) return;
    sk_redis_free(w->r);
    sk_store_close(w->st);
    free(w->s);
    free(w->e);
    free(w->orders);
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
    o->persisted = atomic_load(&c->persisted);
    o->duplicates = atomic_load(&c->duplicates);
    o->stock_failures = atomic_load(&c->stock_failures);
    o->dead_lettered = atomic_load(&c->dead_lettered);
    o->claimed = atomic_load(&c->claimed);
    o->poison = atomic_load(&c->poison);
    o->batches = atomic_load(&c->batches);
    o->acked = atomic_load(&c->acked);
    o->trimmed = atomic_load(&c->trimmed);
    o->deleted = atomic_load(&c->deleted);
    o->db_errors = atomic_load(&c->db_errors);
    o->redis_errors = atomic_load(&c->redis_errors);
    o->activities = atomic_load(&c->activities);
    o->fences = atomic_load(&c->fences);
    o->recoveries = atomic_load(&c->recoveries);
    o->orders_replayed = atomic_load(&c->orders_replayed);
    o->units_oversold = atomic_load(&c->units_oversold);
    o->admissions_lost = atomic_load(&c->admissions_lost);
    o->recover_failures = atomic_load(&c->recover_failures);
    o->conflicts = atomic_load(&c->conflicts);
    o->orders_refused = atomic_load(&c->orders_refused);
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
static void nap(sk_worker *w, int ms)
{
    while (ms > 0 && !atomic_load(&w->stop)) {
        int step = ms < 50 ? ms : 50;
        struct timespec ts = {0, (long)step * 1000000L};
        nanosleep(&ts, NULL);
        ms -= step;
    }
}

/* Room for n fetched entries (w->e and w->orders). */
static int grow_scratch(sk_worker *w, size_t n)
{
    if (SK_VEC_RESERVE(w->e, w->ecap, n, 64) || SK_VEC_RESERVE(w->orders, w->ocap, n, 64))
        return SK_ENOMEM;
    return 0;
}

/* Room for a command of n arguments (w->argv and w->lens). */
static int grow_argv(sk_worker *w, size_t n)
{
    if (SK_VEC_RESERVE(w->argv, w->acap, n, 64) || SK_VEC_RESERVE(w->lens, w->lcap, n, 64))
        return SK_ENOMEM;
    return 0;
}

/* ---- Redis helpers ---------------------------------------------------- */

void sk_worker_test_pause(sk_worker *w, const char *step)
{
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

static int is_nogroup(const redisReply *rep)
{
    return rep && rep->type == REDIS_REPLY_ERROR && !strncmp(rep->str, "NOGROUP", 7);
}

/* ---- Parsing ---------------------------------------------------------- */

/* Copies at most 32 bytes of v, escaping what is not printable ASCII. */
static void quote(char *out, size_t cap, const char *v, size_t len)
{
    size_t o = 0;
    for (size_t i = 0; i < len && i < 32 && o + 5 < cap; i++) {
        unsigned char ch = (unsigned char)v[i];
        if (ch >= 0x20 && ch < 0x7f && ch != '\\')
            out[o++] = (char)ch;
        else
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", ch);
    }
    if (len > 32 && o + 4 < cap) o += (size_t)snprintf(out + o, cap - o, "...");
    out[o] = 0;
}

/* Stream entry id "<ms>-<seq>" -> ms, a time the store accepts. */
static int parse_stream_id(const char *id, size_t len, int64_t *ms)
{
    struct sk_sid sid;
    if (sk_sid_parse(id, len, &sid) || sid.ms > (uint64_t)SK_TIME_MAX_MS) return SK_EINVAL;
    *ms = (int64_t)sid.ms;
    return 0;
}

/* Entry -> order, or e->bad with the reason. The fields written by the
 * admission script are aid, uid, qty, n (the admission's number in its key
 * set, docs/recovery.md), b (the admitting server's branch, part of the
 * order id: engine/order_id.h) and k (the purchase's Idempotency-Key, when
 * it had one); entries written before them have none. Unknown extra fields
 * are tolerated (a newer producer), a missing, repeated or malformed one of
 * the first three is poison, and so is a malformed b (the order id would
 * not be the one its buyer was given). A malformed n only loses the
 * watermark's news, a malformed k the key's record after a rollback: the
 * order is still an order. */
static void parse_entry(const sk_worker *w, struct worker_entry *e, struct sk_order *o)
{
    const struct worker_stream *s = &w->s[e->si];
    const redisReply *f = e->fields;
    const redisReply *val[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
    static const char *const names[6] = {"aid", "uid", "qty", "n", "b", "k"};
    char q[160];
    memset(o, 0, sizeof *o);
    if (f->type != REDIS_REPLY_ARRAY || f->elements % 2) {
        snprintf(e->reason, sizeof e->reason, "fields are not name/value pairs");
        goto bad;
    }
    for (size_t i = 0; i < f->elements; i += 2) {
        const redisReply *k = f->element[i], *v = f->element[i + 1];
        if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING) {
            snprintf(e->reason, sizeof e->reason, "field %zu is not a string", i / 2);
            goto bad;
        }
        for (int j = 0; j < 6; j++) {
            size_t nl = strlen(names[j]);
            if (k->len != nl || memcmp(k->str, names[j], nl) != 0) continue;
            if (val[j]) {
                snprintf(e->reason, sizeof e->reason, "field %s repeated", names[j]);
                goto bad;
            }
            val[j] = v;
        }
    }
    for (int j = 0; j < 3; j++)
        if (!val[j]) {
            snprintf(e->reason, sizeof e->reason, "missing field %s", names[j]);
            goto bad;
        }
    uint64_t aid, uid, qty;
    if (sk_num_u64_canonical(val[0]->str, val[0]->len, &aid) != 0 || aid != s->aid) {
        quote(q, sizeof q, val[0]->str, val[0]->len);
        snprintf(e->reason, sizeof e->reason, "field aid '%s' is not activity %" PRIu64, q, s->aid);
        goto bad;
    }
    if (sk_num_u64_canonical(val[1]->str, val[1]->len, &uid) != 0) {
        quote(q, sizeof q, val[1]->str, val[1]->len);
        snprintf(e->reason, sizeof e->reason, "field uid '%s' is not a user id", q);
        goto bad;
    }
    if (sk_num_u64_canonical(val[2]->str, val[2]->len, &qty) != 0 ||
        qty > (uint64_t)SK_ACTIVITY_STOCK_MAX) {
        quote(q, sizeof q, val[2]->str, val[2]->len);
        snprintf(e->reason, sizeof e->reason, "field qty '%s' is not a quantity", q);
        goto bad;
    }
    if (e->idlen >= SK_STORE_STREAM_ID_MAX || parse_stream_id(e->id, e->idlen, &o->created_ms)) {
        snprintf(e->reason, sizeof e->reason, "entry id is not a stream id");
        goto bad;
    }
    if (val[4] && !sk_oid_branch_ok(val[4]->str, val[4]->len)) {
        quote(q, sizeof q, val[4]->str, val[4]->len);
        snprintf(e->reason, sizeof e->reason, "field b '%s' is not a branch", q);
        goto bad;
    }
    /* "<label>-<stream id>-<branch>": the label names the segment
     * ("<ID>.<seg>"), so the order id alone finds the order's key set
     * (sk_keys_for_order). */
    if (sk_oid_format(o->order_id, sizeof o->order_id, s->k.label, e->id, e->idlen,
                      val[4] ? val[4]->str : NULL, val[4] ? val[4]->len : 0) < 0) {
        snprintf(e->reason, sizeof e->reason, "order id does not fit");
        goto bad;
    }
    snprintf(o->stream_id, sizeof o->stream_id, "%.*s", (int)e->idlen, e->id);
    o->activity_id = aid;
    o->user_id = uid;
    o->quantity = (int64_t)qty;
    o->status = SK_ORDER_CREATED;
    uint64_t seq;
    if (val[3] && sk_num_u64_canonical(val[3]->str, val[3]->len, &seq) == 0 &&
        seq <= (uint64_t)SK_ACTIVITY_STOCK_MAX * 1000)
        o->adm_seq = (int64_t)seq;
    if (val[5] && val[5]->len >= 1 && val[5]->len < sizeof o->idem_key) {
        int visible = 1;
        for (size_t i = 0; i < val[5]->len; i++)
            visible &= val[5]->str[i] >= 0x21 && val[5]->str[i] <= 0x7e;
        if (visible) memcpy(o->idem_key, val[5]->str, val[5]->len);
    }
    return;
bad:
    e->bad = 1;
}

/* Appends the entries of one stream's entry list (XREADGROUP / XAUTOCLAIM
 * shape: [[id, [f, v, ...]] | nil, ...]) to w->e[*n]. */
static int add_entries(sk_worker *w, size_t si, const redisReply *list, int source, size_t *n)
{
    if (list->type != REDIS_REPLY_ARRAY) return SK_EPROTO;
    if (grow_scratch(w, *n + list->elements)) return SK_ENOMEM;
    for (size_t i = 0; i < list->elements; i++) {
        const redisReply *it = list->element[i];
        if (it->type == REDIS_REPLY_NIL) continue; /* Redis 6.2 XAUTOCLAIM: deleted */
        if (it->type != REDIS_REPLY_ARRAY || it->elements != 2 ||
            it->element[0]->type != REDIS_REPLY_STRING || it->element[0]->len >= SK_WORKER_ID_MAX)
            return SK_EPROTO;
        /* An entry in a base stream: the activity is not segmented. */
        w->s[si].segcheck = 0;
        struct worker_entry *e = &w->e[(*n)++];
        memset(e, 0, sizeof *e);
        e->si = si;
        e->id = it->element[0]->str;
        e->idlen = it->element[0]->len;
        e->fields = it->element[1]->type == REDIS_REPLY_NIL ? NULL : it->element[1];
        e->source = source;
    }
    return 0;
}

/* ---- Processing one fetch ---------------------------------------------- */

/* Delivery count of one of our pending entries; 0 when no longer pending. */
static int deliveries(sk_worker *w, const struct worker_entry *e, long long *count)
{
    char id[SK_WORKER_ID_MAX];
    snprintf(id, sizeof id, "%.*s", (int)e->idlen, e->id);
    redisReply *rep;
    int rc = sk_redis_cmd(w->r, &rep, "XPENDING %s %s %s %s 1", w->s[e->si].k.orders,
                          SK_WORKER_GROUP, id, id);
    if (rc) return sk_worker_redis_fail(w, rc, "XPENDING");
    *count = 0;
    if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 1 &&
        rep->element[0]->type == REDIS_REPLY_ARRAY && rep->element[0]->elements == 4 &&
        rep->element[0]->element[3]->type == REDIS_REPLY_INTEGER)
        *count = rep->element[0]->element[3]->integer;
    else if (rep->type != REDIS_REPLY_ARRAY)
        rc = sk_worker_reply_fail(w, rep, "XPENDING");
    freeReplyObject(rep);
    return rc;
}

/* Moves one poison entry to the DLQ and acks it, atomically (MULTI): a
 * crash cannot leave it acked but not dead-lettered, or dead-lettered
 * twice. */
static int dead_letter(sk_worker *w, const struct worker_entry *e, long long count)
{
    const struct worker_stream *s = &w->s[e->si];
    char id[SK_WORKER_ID_MAX], cnt[24];
    snprintf(id, sizeof id, "%.*s", (int)e->idlen, e->id);
    snprintf(cnt, sizeof cnt, "%lld", count);
    size_t nf = e->fields && e->fields->type == REDIS_REPLY_ARRAY ? e->fields->elements : 0;
    if (grow_argv(w, 11 + nf)) return SK_ENOMEM;
    const char **a = w->argv;
    size_t *l = w->lens;
    size_t n = 0;
#define ARG(s_, l_) (a[n] = (s_), l[n] = (l_), n++)
#define ARGS(s_) ARG(s_, strlen(s_))
    ARGS("XADD");
    ARGS(s->k.dlq);
    ARGS("*");
    ARGS("dlq_reason");
    ARGS(e->reason);
    ARGS("dlq_entry_id");
    ARGS(id);
    ARGS("dlq_deliveries");
    ARGS(cnt);
    ARGS("dlq_consumer");
    ARGS(w->consumer);
    for (size_t i = 0; i < nf; i++) {
        const redisReply *x = e->fields->element[i];
        if (x->type == REDIS_REPLY_STRING)
            ARG(x->str, x->len);
        else
            ARGS("?");
    }
    const char *multi[] = {"MULTI"}, *exec[] = {"EXEC"};
    const char *ack[] = {"XACK", s->k.orders, SK_WORKER_GROUP, id};
    sk_worker_test_pause(w, "dead_letter");
    int rc = sk_redis_append(w->r, 1, multi, NULL);
    if (!rc) rc = sk_redis_append(w->r, (int)n, a, l);
    if (!rc) rc = sk_redis_append(w->r, 4, ack, NULL);
    if (!rc) rc = sk_redis_append(w->r, 1, exec, NULL);
#undef ARG
#undef ARGS
    redisReply *rep[4] = {NULL, NULL, NULL, NULL};
    for (int i = 0; i < 4 && !rc; i++)
        rc = sk_redis_read(w->r, &rep[i]);
    if (rc) {
        for (int i = 0; i < 4; i++)
            freeReplyObject(rep[i]);
        return sk_worker_redis_fail(w, rc, "dead-letter");
    }
    const redisReply *x = rep[3];
    if (x->type != REDIS_REPLY_ARRAY || x->elements != 2 ||
        x->element[0]->type != REDIS_REPLY_STRING)
        rc = sk_worker_reply_fail(w, x, "dead-letter MULTI");
    for (int i = 0; i < 4; i++)
        freeReplyObject(rep[i]);
    if (rc) return rc;
    INC(dead_lettered, 1);
    INC(acked, 1);
    sk_log(SK_LOG_WARN, "worker: entry %s of %s dead-lettered to %s after %lld deliveries: %s", id,
           s->k.orders, s->k.dlq, count, e->reason);
    return 0;
}

/* XACK every entry of w->e[0..n) that is done (valid or deleted), one
 * command per stream, pipelined. */
static int ack_done(sk_worker *w, size_t n)
{
    size_t streams = 0;
    for (size_t si = 0; si < w->ns; si++)
        for (size_t i = 0; i < n; i++)
            if (w->e[i].si == si && !w->e[i].bad) {
                streams++;
                break;
            }
    if (streams > 1) sk_worker_test_pause(w, "xack");
    size_t sent = 0;
    for (size_t si = 0; si < w->ns; si++) {
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (w->e[i].si == si && !w->e[i].bad) m++;
        if (!m) continue;
        if (grow_argv(w, 3 + m)) return SK_ENOMEM;
        w->argv[0] = "XACK";
        w->lens[0] = 4;
        w->argv[1] = w->s[si].k.orders;
        w->lens[1] = strlen(w->s[si].k.orders);
        w->argv[2] = SK_WORKER_GROUP;
        w->lens[2] = strlen(SK_WORKER_GROUP);
        size_t k = 3;
        for (size_t i = 0; i < n; i++)
            if (w->e[i].si == si && !w->e[i].bad) {
                w->argv[k] = w->e[i].id;
                w->lens[k++] = w->e[i].idlen;
            }
        int rc = sk_redis_append(w->r, (int)k, w->argv, w->lens);
        if (rc) return sk_worker_redis_fail(w, rc, "XACK");
        sent++;
    }
    /* Every reply is read, a failed one included (the client fails the rest
     * of the pipeline at once then): the acks other nodes made are counted. */
    int rc = 0;
    for (size_t i = 0; i < sent; i++) {
        redisReply *rep;
        int r2 = sk_redis_read(w->r, &rep);
        if (r2) {
            if (!rc) rc = sk_worker_redis_fail(w, r2, "XACK");
            continue;
        }
        if (rep->type == REDIS_REPLY_INTEGER)
            INC(acked, rep->integer);
        else if (!rc)
            rc = sk_worker_reply_fail(w, rep, "XACK");
        freeReplyObject(rep);
    }
    return rc;
}

/* Test-only fault injection (SECKILL_TEST_CRASH_BEFORE_COMMIT=N /
 * SECKILL_TEST_CRASH_AFTER_COMMIT=N: the N-th store transaction). A kill -9
 * from outside cannot be aimed at "committed but not acked" or "read but
 * not committed", so the worker sends itself SIGKILL exactly there: no
 * cleanup, no flush, like the real thing. */
static void crash_point(uint64_t at, uint64_t txn)
{
    if (at && at == txn) {
        kill(getpid(), SIGKILL);
        _exit(9); /* not reached */
    }
}

static void stall_check(sk_worker *w, int64_t now);

/* Persists the valid orders (w->orders[0..no)) of the fetch in one
 * transaction, with bounded retries. A row the store refuses (SK_EINVAL)
 * is isolated by persisting row by row and becomes poison. */
static int persist(sk_worker *w, size_t n, size_t no)
{
    int backoff = BACKOFF_MIN_MS;
    for (int attempt = 1;; attempt++) {
        struct sk_persist_result res;
        w->txns++;
        crash_point(w->crash_before, w->txns);
        int rc = sk_store_orders_persist(w->st, w->orders, no, &res);
        if (rc == 0) {
            crash_point(w->crash_after, w->txns);
            INC(batches, 1);
            INC(persisted, res.inserted);
            INC(duplicates, res.duplicates);
            INC(conflicts, res.conflicts);
            INC(stock_failures, res.stock_failures);
            return 0;
        }
        if (rc == SK_EINVAL) {
            /* One row is refused (its batch rolled back): find it. Rows
             * that pass commit one by one; re-delivery later is a no-op. */
            for (size_t i = 0; i < n; i++) {
                struct worker_entry *e = &w->e[i];
                if (e->bad || !e->fields) continue;
                rc = sk_store_orders_persist(w->st, &w->orders[e->oi], 1, &res);
                if (rc == SK_EINVAL) {
                    e->bad = 1;
                    snprintf(e->reason, sizeof e->reason, "store refused it: %.150s",
                             sk_store_errstr(w->st));
                    continue;
                }
                if (rc) break;
                INC(batches, 1);
                INC(persisted, res.inserted);
                INC(duplicates, res.duplicates);
                INC(conflicts, res.conflicts);
                INC(stock_failures, res.stock_failures);
            }
            if (rc == 0 || rc == SK_EINVAL) return 0;
        }
        INC(db_errors, 1);
        sk_worker_set_err(w, "store: %s", sk_store_errstr(w->st));
        sk_log(SK_LOG_WARN, "worker: batch of %zu not persisted (attempt %d/%d): %s", no, attempt,
               DB_ATTEMPTS, w->errstr);
        if (attempt >= DB_ATTEMPTS || atomic_load(&w->stop)) return rc;
        stall_check(w, sk_mono_ms()); /* a long outage is told while it lasts */
        nap(w, backoff);
        backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
    }
}

/* Handles the n fetched entries in w->e: parse, persist (one transaction),
 * ack, and poison handling. On failure nothing of the fetch is acked and
 * its streams re-read their pending entries on the next pass. */
static int process(sk_worker *w, size_t n)
{
    size_t no = 0, deleted = 0;
    for (size_t i = 0; i < n; i++) {
        struct worker_entry *e = &w->e[i];
        if (!e->fields) {
            deleted++; /* nothing left to persist: ack it so it stops coming back */
            sk_log(SK_LOG_WARN, "worker: pending entry %.*s of %s was deleted from the stream",
                   (int)e->idlen, e->id, w->s[e->si].k.orders);
            continue;
        }
        parse_entry(w, e, &w->orders[no]);
        if (!e->bad) e->oi = no++;
    }
    int rc = no ? persist(w, n, no) : 0;
    if (rc == 0) rc = ack_done(w, n);
    if (rc == 0) INC(deleted, deleted);
    for (size_t i = 0; i < n && rc == 0; i++) {
        struct worker_entry *e = &w->e[i];
        if (!e->bad) continue;
        INC(poison, 1);
        long long count = 1;
        if (e->source != FROM_NEW && (rc = deliveries(w, e, &count)) != 0) break;
        if (count == 0) continue; /* acked by someone else meanwhile */
        if (count > w->o.max_deliveries) {
            rc = dead_letter(w, e, count);
        } else {
            /* Left pending: delivered again by the next history pass. */
            struct worker_stream *s = &w->s[e->si];
            s->history_due = 1;
            snprintf(s->history_from, sizeof s->history_from, "0");
            sk_log(SK_LOG_WARN,
                   "worker: entry %.*s of %s is not an order (delivery %lld of %d): %s",
                   (int)e->idlen, e->id, s->k.orders, count, w->o.max_deliveries, e->reason);
        }
    }
    if (rc) {
        /* Whatever was not acked is still pending: read it again. */
        for (size_t i = 0; i < n; i++) {
            struct worker_stream *s = &w->s[w->e[i].si];
            s->history_due = 1;
            snprintf(s->history_from, sizeof s->history_from, "0");
        }
    }
    return rc;
}

/* ---- Fetching ---------------------------------------------------------- */

/* This consumer's own pending entries of stream si (XREADGROUP ... <id>). */
static int fetch_history(sk_worker *w, size_t si, size_t *got)
{
    struct worker_stream *s = &w->s[si];
    redisReply *rep;
    *got = 0;
    int rc = sk_redis_cmd(w->r, &rep, "XREADGROUP GROUP %s %s COUNT %d STREAMS %s %s",
                          SK_WORKER_GROUP, w->consumer, w->o.batch, s->k.orders, s->history_from);
    if (rc) return sk_worker_redis_fail(w, rc, "XREADGROUP (pending)");
    sk_worker_redis_ok(w);
    size_t n = 0;
    if (is_nogroup(rep)) {
        sk_worker_lost_group(w, s);
    } else if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 1 &&
               rep->element[0]->type == REDIS_REPLY_ARRAY && rep->element[0]->elements == 2) {
        rc = add_entries(w, si, rep->element[0]->element[1], FROM_HISTORY, &n);
    } else if (rep->type != REDIS_REPLY_NIL) {
        rc = sk_worker_reply_fail(w, rep, "XREADGROUP (pending)");
    }
    if (rc == 0) {
        /* Page on from the last id; a short page ends the pass. Set before
         * process(), which re-arms it when entries stay pending. */
        if (n == (size_t)w->o.batch) {
            snprintf(s->history_from, sizeof s->history_from, "%.*s", (int)w->e[n - 1].idlen,
                     w->e[n - 1].id);
        } else {
            s->history_due = 0;
            snprintf(s->history_from, sizeof s->history_from, "0");
        }
        *got = n;
        if (n) rc = process(w, n);
    }
    freeReplyObject(rep);
    return rc;
}

/* Entries idle on any consumer longer than claim_idle_ms (XAUTOCLAIM). */
static int fetch_claimed(sk_worker *w, size_t si, size_t *got)
{
    struct worker_stream *s = &w->s[si];
    redisReply *rep;
    *got = 0;
    int rc =
        sk_redis_cmd(w->r, &rep, "XAUTOCLAIM %s %s %s %d %s COUNT %d", s->k.orders, SK_WORKER_GROUP,
                     w->consumer, w->o.claim_idle_ms, s->claim_cursor, w->o.batch);
    if (rc) return sk_worker_redis_fail(w, rc, "XAUTOCLAIM");
    sk_worker_redis_ok(w);
    size_t n = 0;
    if (is_nogroup(rep)) {
        sk_worker_lost_group(w, s);
    } else if (rep->type == REDIS_REPLY_ARRAY && rep->elements >= 2 &&
               rep->element[0]->type == REDIS_REPLY_STRING &&
               rep->element[0]->len < sizeof s->claim_cursor) {
        snprintf(s->claim_cursor, sizeof s->claim_cursor, "%s", rep->element[0]->str);
        rc = add_entries(w, si, rep->element[1], FROM_CLAIM, &n);
        /* Redis 7 lists ids that were pending but deleted; it already
         * dropped them from the pending list. */
        if (rep->elements >= 3 && rep->element[2]->type == REDIS_REPLY_ARRAY &&
            rep->element[2]->elements) {
            INC(deleted, rep->element[2]->elements);
            sk_log(SK_LOG_WARN, "worker: %zu pending entries of %s were deleted from the stream",
                   rep->element[2]->elements, s->k.orders);
        }
    } else {
        rc = sk_worker_reply_fail(w, rep, "XAUTOCLAIM");
    }
    if (rc == 0 && n) {
        INC(claimed, n);
        sk_log(SK_LOG_INFO, "worker: claimed %zu idle entries of %s", n, s->k.orders);
        *got = n;
        rc = process(w, n);
    }
    freeReplyObject(rep);
    return rc;
}

/* New entries of every ready stream in one XREADGROUP (block_ms < 0: no
 * BLOCK). */
static int fetch_new(sk_worker *w, int block_ms, size_t *got)
{
    *got = 0;
    size_t nready = 0;
    for (size_t i = 0; i < w->ns; i++)
        nready += w->s[i].group_ready;
    w->fetch_short = 0;
    if (!nready) return 0;
    w->fetch_ms = sk_mono_ms();
    if (grow_argv(w, 10 + 2 * nready)) return SK_ENOMEM;
    char count[16], block[16];
    snprintf(count, sizeof count, "%d", w->o.batch);
    snprintf(block, sizeof block, "%d", block_ms);
    size_t k = 0;
    const char **a = w->argv;
    a[k++] = "XREADGROUP";
    a[k++] = "GROUP";
    a[k++] = SK_WORKER_GROUP;
    a[k++] = w->consumer;
    a[k++] = "COUNT";
    a[k++] = count;
    if (block_ms >= 0) {
        a[k++] = "BLOCK";
        a[k++] = block;
    }
    a[k++] = "STREAMS";
    for (size_t i = 0; i < w->ns; i++)
        if (w->s[i].group_ready) a[k++] = w->s[i].k.orders;
    for (size_t i = 0; i < nready; i++)
        a[k++] = ">";
    redisReply *rep;
    if (nready > 1) sk_worker_test_pause(w, "xread");
    int rc = sk_redis_command(w->r, &rep, (int)k, a, NULL);
    if (rc) return sk_worker_redis_fail(w, rc, "XREADGROUP");
    sk_worker_redis_ok(w);
    size_t n = 0;
    if (is_nogroup(rep)) {
        /* A stream lost its group (Redis restarted without persistence, or
         * keys dropped): re-create them all, cheap and idempotent. */
        sk_log(SK_LOG_WARN, "worker: %s; re-creating consumer groups", rep->str);
        for (size_t i = 0; i < w->ns; i++)
            sk_worker_lost_group(w, &w->s[i]);
    } else if (rep->type == REDIS_REPLY_ARRAY) {
        int full = 0;
        for (size_t i = 0; i < rep->elements && rc == 0; i++) {
            const redisReply *sr = rep->element[i];
            if (sr->type != REDIS_REPLY_ARRAY || sr->elements != 2 ||
                sr->element[0]->type != REDIS_REPLY_STRING) {
                rc = sk_worker_reply_fail(w, sr, "XREADGROUP");
                break;
            }
            size_t si = 0;
            while (si < w->ns && strcmp(w->s[si].k.orders, sr->element[0]->str) != 0)
                si++;
            if (si == w->ns) continue; /* cannot happen: we named the streams */
            full |= sr->element[1]->type == REDIS_REPLY_ARRAY &&
                    sr->element[1]->elements >= (size_t)w->o.batch;
            rc = add_entries(w, si, sr->element[1], FROM_NEW, &n);
        }
        if (rc == 0 && n) {
            w->fetch_short = !full;
            *got = n;
            rc = process(w, n);
        }
    } else if (rep->type != REDIS_REPLY_NIL) {
        rc = sk_worker_reply_fail(w, rep, "XREADGROUP");
    }
    freeReplyObject(rep);
    return rc;
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
        if ((rc = fetch_history(w, i, &got)) != 0) return rc;
        *progress += got;
    }
    for (size_t i = 0; i < w->ns && !atomic_load(&w->stop); i++) {
        struct worker_stream *s = &w->s[i];
        if (!s->group_ready || (!w->o.once && now < s->next_claim_ms)) continue;
        if ((rc = fetch_claimed(w, i, &got)) != 0) return rc;
        *progress += got;
        /* A full scan done: wait before the next one (an idle entry needs
         * claim_idle_ms to qualify anyway). */
        if (!strcmp(s->claim_cursor, "0-0"))
            s->next_claim_ms = now + (w->o.claim_idle_ms / 2 > 100 ? w->o.claim_idle_ms / 2 : 100);
    }
    if (atomic_load(&w->stop)) return 0;
    int block = w->o.once || *progress ? -1 : w->o.block_ms;
    if ((rc = fetch_new(w, block, &got)) != 0) return rc;
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

/* No entry acknowledged for stall_warn_ms: asks Redis what waits on the
 * followed streams; a warning (again every stall_warn_ms) when something
 * does or Redis cannot say, and the clock starts again when nothing waits
 * (an idle worker is not a stalled one). */
static void stall_check(sk_worker *w, int64_t now)
{
    uint64_t acked = atomic_load(&w->c.acked);
    if (!w->stall_since_ms || acked != w->stall_acked) {
        w->stall_acked = acked;
        w->stall_since_ms = now;
        w->stall_next_ms = now + w->o.stall_warn_ms;
        return;
    }
    if (!w->o.stall_warn_ms || now < w->stall_next_ms || !w->ns) return;
    w->stall_next_ms = now + w->o.stall_warn_ms;
    int64_t waiting = 0, oldest = 0;
    int unknown = 0;
    for (size_t i = 0; i < w->ns && !unknown; i++) {
        struct sk_backlog b;
        if (sk_backlog_read(w->r, w->s[i].k.orders, SK_WORKER_GROUP, &b) < 0) {
            unknown = 1;
        } else {
            waiting += b.entries > 0 ? b.entries : 0;
            unknown = b.entries < 0;
            if (b.age_ms > oldest) oldest = b.age_ms;
        }
    }
    if (!unknown && waiting == 0) {
        w->stall_since_ms = now; /* idle */
        return;
    }
    if (unknown)
        sk_log(SK_LOG_WARN,
               "worker: no order acknowledged for %lld s, and Redis cannot say what waits (%s; "
               "last error: %s)",
               (long long)((now - w->stall_since_ms) / 1000), w->r->errstr,
               w->errstr[0] ? w->errstr : "none");
    else
        sk_log(SK_LOG_WARN,
               "worker: no order acknowledged for %lld s while %lld wait (the oldest for %lld s); "
               "last error: %s",
               (long long)((now - w->stall_since_ms) / 1000), (long long)waiting,
               (long long)(oldest / 1000), w->errstr[0] ? w->errstr : "none");
}

int sk_worker_run(sk_worker *w)
{
    int backoff = BACKOFF_MIN_MS, failures = 0;
    sk_log(SK_LOG_INFO, "worker: consumer %s of group %s, batch %d, claim idle %d ms, DLQ after %d",
           w->consumer, SK_WORKER_GROUP, w->o.batch, w->o.claim_idle_ms, w->o.max_deliveries);
    while (!atomic_load(&w->stop)) {
        size_t progress;
        int rc = pass(w, &progress);
        stall_check(w, sk_mono_ms());
        if (rc) {
            history_all(w);
            if (w->o.once && ++failures >= ONCE_FAILURES) return rc;
            nap(w, backoff);
            backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
            continue;
        }
        failures = 0;
        backoff = BACKOFF_MIN_MS;
        if (w->o.once && progress == 0) {
            /* Drained: leave the streams trimmed to what is unacknowledged. */
            if (w->o.trim && (rc = sk_worker_trim_due(w, 1)) != 0) {
                if (++failures >= ONCE_FAILURES) return rc;
                nap(w, backoff);
                continue;
            }
            break;
        }
        /* Nothing followed yet: the XREADGROUP that would block is skipped,
         * so wait here for the next re-list. */
        if (!w->ns && !w->o.once) nap(w, w->o.relist_ms);
        /* A short fetch: what arrives meanwhile waits for the next one. A
         * transaction's fixed cost (its sync to disk above all) and the
         * round trips around it were ~270 us against ~8.5 us per order
         * (SQLite, BENCHMARKS.md): a trickle read as it came paid them every
         * few orders. The orders are no less safe while they wait: they
         * are in the stream, unacknowledged, and a poll answers them from
         * Redis. */
        if (w->fetch_short && w->o.linger_ms && !w->o.once) {
            int64_t wait = w->fetch_ms + w->o.linger_ms - sk_mono_ms();
            if (wait > 0) nap(w, (int)wait);
        }
    }
    return 0;
}
