/* order_worker.c - Redis order streams -> the store, exactly once (see
 * order_worker.h for the protocol), and `seckill worker`.
 *
 * A pass over the followed activities:
 *   1. re-list activities (new ones get a consumer group per stream -- one
 *      stream, or one per segment of a segmented activity -- created at id 0
 *      with MKSTREAM so entries written before the group are consumed);
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
#include "engine/activity.h"
#include "engine/keys.h"
#include "engine/segment.h"
#include "redis/redis_conn.h"
#include "store/store.h"

#define DB_ATTEMPTS 5    /* store attempts per batch before leaving it pending */
#define ONCE_FAILURES 10 /* consecutive failed passes before --once gives up (~10 s) */
#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 2000
#define TRIM_EVERY_MS 1000
#define ID_MAX 48 /* "<ms>-<seq>" */

/* One followed order stream: an unsegmented activity's, or one segment's
 * (k.seg >= 0; k.label "<ID>.<seg>" prefixes its order ids). */
struct stream {
    uint64_t aid; /* the activity's numeric id, also the entries' aid field */
    struct sk_keys k;
    int group_ready;
    int history_due;           /* re-read this consumer's own pending entries */
    char history_from[ID_MAX]; /* where the history pass continues */
    char claim_cursor[ID_MAX]; /* XAUTOCLAIM cursor, "0-0" at the start */
    int64_t next_claim_ms, next_trim_ms;
    int seen;     /* mark for the re-list */
    int segcheck; /* base stream of an activity that may still turn out segmented */
};

enum { FROM_NEW, FROM_HISTORY, FROM_CLAIM };

/* One fetched stream entry; id and fields point into the reply. */
struct entry {
    size_t si;
    const char *id;
    size_t idlen;
    const redisReply *fields; /* NULL: deleted from the stream while pending */
    int source;
    int bad; /* not an order: poison */
    char reason[200];
    size_t oi; /* index in w->orders when valid */
};

struct counters {
    _Atomic uint64_t persisted, duplicates, stock_failures, dead_lettered, claimed, poison, batches,
        acked, trimmed, deleted, db_errors, redis_errors, activities;
};

struct sk_worker {
    struct sk_worker_opts o;
    char *redis_url, *db_spec;
    char consumer[SK_WORKER_CONSUMER_MAX];
    sk_redis *r;
    sk_store *st;
    struct stream *s;
    size_t ns, scap;
    int64_t next_relist_ms;
    atomic_int stop;
    struct counters c;
    char errstr[512];
    /* Fetch scratch, grown as needed. */
    struct entry *e;
    struct sk_order *orders;
    size_t ecap;
    const char **argv;
    size_t *lens;
    size_t acap;
    /* Test-only fault points (SECKILL_TEST_CRASH_*): the transaction number
     * at which to _exit(9), 0 = never. */
    uint64_t crash_before, crash_after, txns;
    int redis_down; /* logged once per outage */
};

static void set_err(sk_worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_err(sk_worker *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->errstr, sizeof w->errstr, fmt, ap);
    va_end(ap);
}

#define INC(field, n) atomic_fetch_add(&w->c.field, (uint64_t)(n))

void sk_worker_opts_init(struct sk_worker_opts *o)
{
    memset(o, 0, sizeof *o);
    o->batch = 500;
    o->block_ms = 1000;
    o->claim_idle_ms = 30000;
    o->max_deliveries = 5;
    o->relist_ms = 1000;
    o->trim = 1;
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
    if (o->batch < 1 || o->batch > 10000 || o->block_ms < 0 || o->claim_idle_ms < 0 ||
        o->max_deliveries < 1 || o->relist_ms < 1) {
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
    struct counters *c = (struct counters *)&w->c; /* atomic loads only */
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

static int grow_scratch(sk_worker *w, size_t n)
{
    if (n <= w->ecap) return 0;
    size_t ncap = w->ecap ? w->ecap : 64;
    while (ncap < n)
        ncap *= 2;
    struct entry *e = realloc(w->e, ncap * sizeof *e);
    if (!e) return SK_ENOMEM;
    w->e = e;
    struct sk_order *o = realloc(w->orders, ncap * sizeof *o);
    if (!o) return SK_ENOMEM;
    w->orders = o;
    w->ecap = ncap;
    return 0;
}

static int grow_argv(sk_worker *w, size_t n)
{
    if (n <= w->acap) return 0;
    size_t ncap = w->acap ? w->acap : 64;
    while (ncap < n)
        ncap *= 2;
    const char **a = realloc(w->argv, ncap * sizeof *a);
    if (!a) return SK_ENOMEM;
    w->argv = a;
    size_t *l = realloc(w->lens, ncap * sizeof *l);
    if (!l) return SK_ENOMEM;
    w->lens = l;
    w->acap = ncap;
    return 0;
}

/* ---- Redis helpers ---------------------------------------------------- */

/* A failed Redis call: counted, logged once per outage. */
static int redis_fail(sk_worker *w, int rc, const char *what)
{
    INC(redis_errors, 1);
    set_err(w, "redis %s: %s", what, w->r->errstr);
    if (!w->redis_down) sk_log(SK_LOG_ERROR, "worker: %s (retrying)", w->errstr);
    w->redis_down = 1;
    return rc;
}

static void redis_ok(sk_worker *w)
{
    if (w->redis_down) sk_log(SK_LOG_INFO, "worker: redis reachable again");
    w->redis_down = 0;
}

/* An error reply (or another unexpected type): logged, SK_EPROTO. */
static int reply_fail(sk_worker *w, const redisReply *rep, const char *what)
{
    set_err(w, "redis %s: %s", what,
            rep && rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply");
    sk_log(SK_LOG_WARN, "worker: %s", w->errstr);
    return SK_EPROTO;
}

static int is_nogroup(const redisReply *rep)
{
    return rep && rep->type == REDIS_REPLY_ERROR && !strncmp(rep->str, "NOGROUP", 7);
}

static int make_group(sk_worker *w, struct stream *s)
{
    redisReply *rep;
    /* Id 0, not $: entries admitted before the group existed are orders
     * too. MKSTREAM: an activity nobody bought from yet has no stream. */
    int rc =
        sk_redis_cmd(w->r, &rep, "XGROUP CREATE %s %s 0 MKSTREAM", s->k.orders, SK_WORKER_GROUP);
    if (rc) return redis_fail(w, rc, "XGROUP CREATE");
    redis_ok(w);
    if (rep->type == REDIS_REPLY_STATUS ||
        (rep->type == REDIS_REPLY_ERROR && !strncmp(rep->str, "BUSYGROUP", 9))) {
        s->group_ready = 1;
        s->history_due = 1; /* our pending entries from a previous life */
        snprintf(s->history_from, sizeof s->history_from, "0");
    } else {
        rc = reply_fail(w, rep, "XGROUP CREATE");
    }
    freeReplyObject(rep);
    return rc;
}

/* ---- Activities ------------------------------------------------------- */

/* Segmented activities (docs/segments.md): an activity of S > 1 segments
 * has one order stream per segment, {a<ID>.s<i>}, and none of its own; the
 * worker follows all S of them, each exactly like an unsegmented
 * activity's stream (its own group, history, claims, DLQ and trimming).
 * Redis decides: the base meta's "segments" field, written last by the
 * segmented preheat, is what routes purchases, so it is what routes the
 * worker too.
 *
 * An activity first seen before it was preheated has no base meta yet: it
 * is followed as unsegmented (its base stream), and marked `segcheck`. On
 * every re-list the marked activities are checked again, all of them in one
 * pipelined round of HMGET segments initial: "segments" present -> switch to
 * the segment streams; "initial" present without it -> preheated
 * unsegmented, settled; neither -> still not preheated, check again. The
 * first entry read from a base stream settles it as well (a segmented
 * activity's base keys hold no stock, so nothing is ever admitted there).
 * A base stream that loses its group (its keys were dropped: the activity
 * deleted and created again, or Redis restarted empty) is marked again,
 * since its keys may come back segmented. So the check costs one round
 * trip per re-list, and only while some activity in the store has no live
 * keys in Redis. Purchases cannot start before
 * the preheat (and the switch, after it), so no order waits longer than one
 * re-list interval for its stream to be followed. */

/* Grows w->s to hold `more` more streams. */
static int grow_streams(sk_worker *w, size_t more)
{
    if (w->ns + more <= w->scap) return 0;
    size_t ncap = w->scap ? w->scap * 2 : 16;
    while (ncap < w->ns + more)
        ncap *= 2;
    struct stream *ns = realloc(w->s, ncap * sizeof *ns);
    if (!ns) return SK_ENOMEM;
    w->s = ns;
    w->scap = ncap;
    return 0;
}

/* Follows the stream of key set (aid, seg). */
static void add_stream(sk_worker *w, uint64_t aid, int seg, int segcheck)
{
    struct stream *s = &w->s[w->ns++];
    memset(s, 0, sizeof *s);
    s->aid = aid;
    sk_keys_seg(&s->k, aid, seg);
    snprintf(s->claim_cursor, sizeof s->claim_cursor, "0-0");
    s->seen = 1;
    s->segcheck = segcheck;
    sk_log(SK_LOG_DEBUG, "worker: following %s (activity %" PRIu64 ")", s->k.orders, aid);
}

/* Segment counts of aids[0..n) in one pipelined round: segs[i] = S (> 1:
 * segmented), 1 when preheated unsegmented, 0 when not known yet (no base
 * meta, or an unexpected reply). */
static int seg_counts(sk_worker *w, const uint64_t *aids, size_t n, int *segs)
{
    for (size_t i = 0; i < n; i++) {
        struct sk_keys k;
        sk_keys_for(&k, aids[i]);
        const char *argv[] = {"HMGET", k.meta, "segments", "initial"};
        int rc = sk_redis_append(w->r, 4, argv, NULL);
        if (rc) return redis_fail(w, rc, "HMGET segments");
    }
    for (size_t i = 0; i < n; i++) {
        redisReply *rep;
        int rc = sk_redis_read(w->r, &rep);
        if (rc) return redis_fail(w, rc, "HMGET segments");
        segs[i] = 0;
        if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2) {
            const redisReply *sg = rep->element[0], *in = rep->element[1];
            long v = sg->type == REDIS_REPLY_STRING ? strtol(sg->str, NULL, 10) : 0;
            if (v > 1 && v <= SK_SEG_MAX)
                segs[i] = (int)v;
            else if (sg->type == REDIS_REPLY_NIL && in->type == REDIS_REPLY_STRING)
                segs[i] = 1;
        } else {
            sk_log(SK_LOG_WARN, "worker: segments of activity %" PRIu64 ": %s", aids[i],
                   rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply");
        }
        freeReplyObject(rep);
    }
    redis_ok(w);
    return 0;
}

/* Entries in stream key (XLEN) into *len. */
static int stream_len(sk_worker *w, const char *key, long long *len)
{
    redisReply *rep;
    int rc = sk_redis_cmd(w->r, &rep, "XLEN %s", key);
    if (rc) return redis_fail(w, rc, "XLEN");
    if (rep->type == REDIS_REPLY_INTEGER)
        *len = rep->integer;
    else
        rc = reply_fail(w, rep, "XLEN");
    freeReplyObject(rep);
    return rc;
}

static int relist(sk_worker *w)
{
    uint64_t *ids;
    size_t n;
    int rc = sk_store_activity_ids(w->st, &ids, &n);
    if (rc) {
        INC(db_errors, 1);
        set_err(w, "list activities: %s", sk_store_errstr(w->st));
        sk_log(SK_LOG_WARN, "worker: %s", w->errstr);
        return rc;
    }
    for (size_t j = 0; j < w->ns; j++)
        w->s[j].seen = 0;
    /* check[0..nc): activities to ask Redis about: new ones first, then
     * followed base streams still marked segcheck. */
    uint64_t *check = malloc((n + w->ns + 1) * sizeof *check);
    int *segs = malloc((n + w->ns + 1) * sizeof *segs);
    if (!check || !segs) {
        free(ids), free(check), free(segs);
        return SK_ENOMEM;
    }
    size_t nnew = 0, nc;
    for (size_t i = 0; i < n; i++) {
        int known = 0;
        for (size_t j = 0; j < w->ns; j++)
            if (w->s[j].aid == ids[i]) w->s[j].seen = known = 1;
        if (!known) check[nnew++] = ids[i];
    }
    free(ids);
    /* A deleted activity's streams were dropped with it: stop following. */
    size_t k = 0;
    for (size_t j = 0; j < w->ns; j++)
        if (w->s[j].seen) w->s[k++] = w->s[j];
    w->ns = k;
    nc = nnew;
    for (size_t j = 0; j < w->ns; j++)
        if (w->s[j].segcheck) check[nc++] = w->s[j].aid;
    rc = nc ? seg_counts(w, check, nc, segs) : 0;
    for (size_t i = 0; rc == 0 && i < nc; i++) {
        int S = segs[i];
        if (i < nnew) {
            if ((rc = grow_streams(w, S > 1 ? (size_t)S : 1)) != 0) break;
            if (S > 1)
                for (int g = 0; g < S; g++)
                    add_stream(w, check[i], g, 0);
            else
                add_stream(w, check[i], SK_SEG_NONE, S == 0);
            sk_log(SK_LOG_INFO, "worker: following activity %" PRIu64 " (%d stream%s)", check[i],
                   S > 1 ? S : 1, S > 1 ? "s" : "");
            continue;
        }
        size_t j = 0;
        while (j < w->ns && !(w->s[j].segcheck && w->s[j].aid == check[i]))
            j++;
        if (j == w->ns || S == 0) continue; /* still not preheated */
        w->s[j].segcheck = 0;
        if (S == 1) continue; /* preheated unsegmented: settled */
        /* Preheated segmented since we saw it: follow its segments. Its base
         * stream (made by our MKSTREAM) holds nothing; one that does holds
         * orders that must still be drained, so it stays followed. */
        long long len = 0;
        if ((rc = stream_len(w, w->s[j].k.orders, &len)) != 0) {
            w->s[j].segcheck = 1; /* decided on the next re-list */
            break;
        }
        if ((rc = grow_streams(w, (size_t)S)) != 0) break;
        if (len == 0) w->s[j] = w->s[--w->ns];
        for (int g = 0; g < S; g++)
            add_stream(w, check[i], g, 0);
        sk_log(SK_LOG_INFO,
               "worker: activity %" PRIu64 " was preheated with %d segments: following "
               "their streams",
               check[i], S);
    }
    free(check);
    free(segs);
    atomic_store(&w->c.activities, (uint64_t)w->ns);
    return rc;
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

/* Stream entry id "<ms>-<seq>" -> ms. */
static int parse_stream_id(const char *id, size_t len, int64_t *ms)
{
    const char *dash = memchr(id, '-', len);
    if (!dash || dash == id) return SK_EINVAL;
    uint64_t v = 0;
    for (const char *p = id; p < dash; p++) {
        if (*p < '0' || *p > '9' || v > (uint64_t)SK_TIME_MAX_MS) return SK_EINVAL;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (v > (uint64_t)SK_TIME_MAX_MS) return SK_EINVAL;
    *ms = (int64_t)v;
    return 0;
}

/* Entry -> order, or e->bad with the reason. The fields written by the
 * admission script are aid, uid, qty; unknown extra fields are tolerated
 * (a newer producer), a missing, repeated or malformed one is poison. */
static void parse_entry(const sk_worker *w, struct entry *e, struct sk_order *o)
{
    const struct stream *s = &w->s[e->si];
    const redisReply *f = e->fields;
    const redisReply *val[3] = {NULL, NULL, NULL};
    static const char *const names[3] = {"aid", "uid", "qty"};
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
        for (int j = 0; j < 3; j++) {
            if (k->len != 3 || memcmp(k->str, names[j], 3) != 0) continue;
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
    /* "<label>-<stream id>": the label names the segment ("<ID>.<seg>"), so
     * the order id alone finds the order's key set (sk_keys_for_order). */
    int len =
        snprintf(o->order_id, sizeof o->order_id, "%s-%.*s", s->k.label, (int)e->idlen, e->id);
    if (len < 0 || (size_t)len >= sizeof o->order_id) {
        snprintf(e->reason, sizeof e->reason, "order id does not fit");
        goto bad;
    }
    snprintf(o->stream_id, sizeof o->stream_id, "%.*s", (int)e->idlen, e->id);
    o->activity_id = aid;
    o->user_id = uid;
    o->quantity = (int64_t)qty;
    o->status = SK_ORDER_CREATED;
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
            it->element[0]->type != REDIS_REPLY_STRING || it->element[0]->len >= ID_MAX)
            return SK_EPROTO;
        /* An entry in a base stream: the activity is not segmented. */
        w->s[si].segcheck = 0;
        struct entry *e = &w->e[(*n)++];
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
static int deliveries(sk_worker *w, const struct entry *e, long long *count)
{
    char id[ID_MAX];
    snprintf(id, sizeof id, "%.*s", (int)e->idlen, e->id);
    redisReply *rep;
    int rc = sk_redis_cmd(w->r, &rep, "XPENDING %s %s %s %s 1", w->s[e->si].k.orders,
                          SK_WORKER_GROUP, id, id);
    if (rc) return redis_fail(w, rc, "XPENDING");
    *count = 0;
    if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 1 &&
        rep->element[0]->type == REDIS_REPLY_ARRAY && rep->element[0]->elements == 4 &&
        rep->element[0]->element[3]->type == REDIS_REPLY_INTEGER)
        *count = rep->element[0]->element[3]->integer;
    else if (rep->type != REDIS_REPLY_ARRAY)
        rc = reply_fail(w, rep, "XPENDING");
    freeReplyObject(rep);
    return rc;
}

/* Moves one poison entry to the DLQ and acks it, atomically (MULTI): a
 * crash cannot leave it acked but not dead-lettered, or dead-lettered
 * twice. */
static int dead_letter(sk_worker *w, const struct entry *e, long long count)
{
    const struct stream *s = &w->s[e->si];
    char id[ID_MAX], cnt[24];
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
        return redis_fail(w, rc, "dead-letter");
    }
    const redisReply *x = rep[3];
    if (x->type != REDIS_REPLY_ARRAY || x->elements != 2 ||
        x->element[0]->type != REDIS_REPLY_STRING)
        rc = reply_fail(w, x, "dead-letter MULTI");
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
        if (rc) return redis_fail(w, rc, "XACK");
        sent++;
    }
    int rc = 0;
    for (size_t i = 0; i < sent; i++) {
        redisReply *rep;
        int r2 = sk_redis_read(w->r, &rep);
        if (r2) return redis_fail(w, r2, "XACK");
        if (rep->type == REDIS_REPLY_INTEGER)
            INC(acked, rep->integer);
        else if (!rc)
            rc = reply_fail(w, rep, "XACK");
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
            INC(stock_failures, res.stock_failures);
            return 0;
        }
        if (rc == SK_EINVAL) {
            /* One row is refused (its batch rolled back): find it. Rows
             * that pass commit one by one; re-delivery later is a no-op. */
            for (size_t i = 0; i < n; i++) {
                struct entry *e = &w->e[i];
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
                INC(stock_failures, res.stock_failures);
            }
            if (rc == 0 || rc == SK_EINVAL) return 0;
        }
        INC(db_errors, 1);
        set_err(w, "store: %s", sk_store_errstr(w->st));
        sk_log(SK_LOG_WARN, "worker: batch of %zu not persisted (attempt %d/%d): %s", no, attempt,
               DB_ATTEMPTS, w->errstr);
        if (attempt >= DB_ATTEMPTS || atomic_load(&w->stop)) return rc;
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
        struct entry *e = &w->e[i];
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
        struct entry *e = &w->e[i];
        if (!e->bad) continue;
        INC(poison, 1);
        long long count = 1;
        if (e->source != FROM_NEW && (rc = deliveries(w, e, &count)) != 0) break;
        if (count == 0) continue; /* acked by someone else meanwhile */
        if (count > w->o.max_deliveries) {
            rc = dead_letter(w, e, count);
        } else {
            /* Left pending: delivered again by the next history pass. */
            struct stream *s = &w->s[e->si];
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
            struct stream *s = &w->s[w->e[i].si];
            s->history_due = 1;
            snprintf(s->history_from, sizeof s->history_from, "0");
        }
    }
    return rc;
}

/* ---- Fetching ---------------------------------------------------------- */

/* Stream s lost its group: its keys were dropped (the activity deleted, or
 * Redis restarted without persistence). Re-list before re-creating it (a
 * deleted activity's stream must not come back), and check a base
 * stream's activity for segments again: its keys may come back from a
 * segmented preheat. */
static void lost_group(sk_worker *w, struct stream *s)
{
    s->group_ready = 0;
    if (s->k.seg == SK_SEG_NONE) s->segcheck = 1;
    w->next_relist_ms = 0;
}

/* This consumer's own pending entries of stream si (XREADGROUP ... <id>). */
static int fetch_history(sk_worker *w, size_t si, size_t *got)
{
    struct stream *s = &w->s[si];
    redisReply *rep;
    *got = 0;
    int rc = sk_redis_cmd(w->r, &rep, "XREADGROUP GROUP %s %s COUNT %d STREAMS %s %s",
                          SK_WORKER_GROUP, w->consumer, w->o.batch, s->k.orders, s->history_from);
    if (rc) return redis_fail(w, rc, "XREADGROUP (pending)");
    redis_ok(w);
    size_t n = 0;
    if (is_nogroup(rep)) {
        lost_group(w, s);
    } else if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 1 &&
               rep->element[0]->type == REDIS_REPLY_ARRAY && rep->element[0]->elements == 2) {
        rc = add_entries(w, si, rep->element[0]->element[1], FROM_HISTORY, &n);
    } else if (rep->type != REDIS_REPLY_NIL) {
        rc = reply_fail(w, rep, "XREADGROUP (pending)");
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
    struct stream *s = &w->s[si];
    redisReply *rep;
    *got = 0;
    int rc =
        sk_redis_cmd(w->r, &rep, "XAUTOCLAIM %s %s %s %d %s COUNT %d", s->k.orders, SK_WORKER_GROUP,
                     w->consumer, w->o.claim_idle_ms, s->claim_cursor, w->o.batch);
    if (rc) return redis_fail(w, rc, "XAUTOCLAIM");
    redis_ok(w);
    size_t n = 0;
    if (is_nogroup(rep)) {
        lost_group(w, s);
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
        rc = reply_fail(w, rep, "XAUTOCLAIM");
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
    if (!nready) return 0;
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
    int rc = sk_redis_command(w->r, &rep, (int)k, a, NULL);
    if (rc) return redis_fail(w, rc, "XREADGROUP");
    redis_ok(w);
    size_t n = 0;
    if (is_nogroup(rep)) {
        /* A stream lost its group (Redis restarted without persistence, or
         * keys dropped): re-create them all, cheap and idempotent. */
        sk_log(SK_LOG_WARN, "worker: %s; re-creating consumer groups", rep->str);
        for (size_t i = 0; i < w->ns; i++)
            lost_group(w, &w->s[i]);
    } else if (rep->type == REDIS_REPLY_ARRAY) {
        for (size_t i = 0; i < rep->elements && rc == 0; i++) {
            const redisReply *sr = rep->element[i];
            if (sr->type != REDIS_REPLY_ARRAY || sr->elements != 2 ||
                sr->element[0]->type != REDIS_REPLY_STRING) {
                rc = reply_fail(w, sr, "XREADGROUP");
                break;
            }
            size_t si = 0;
            while (si < w->ns && strcmp(w->s[si].k.orders, sr->element[0]->str) != 0)
                si++;
            if (si == w->ns) continue; /* cannot happen: we named the streams */
            rc = add_entries(w, si, sr->element[1], FROM_NEW, &n);
        }
        if (rc == 0 && n) {
            *got = n;
            rc = process(w, n);
        }
    } else if (rep->type != REDIS_REPLY_NIL) {
        rc = reply_fail(w, rep, "XREADGROUP");
    }
    freeReplyObject(rep);
    return rc;
}

/* ---- Trimming ---------------------------------------------------------- */

/* The id right after "<ms>-<seq>" (into out); SK_EINVAL if not an id. */
static int next_id(const char *id, char *out, size_t cap)
{
    unsigned long long ms, seq;
    char tail;
    if (sscanf(id, "%llu-%llu%c", &ms, &seq, &tail) != 2) return SK_EINVAL;
    if (seq == UINT64_MAX)
        snprintf(out, cap, "%llu-0", ms + 1);
    else
        snprintf(out, cap, "%llu-%llu", ms, seq + 1);
    return 0;
}

/* Removes the acknowledged head of stream si: everything below the
 * group's oldest pending entry, and never past its last-delivered id
 * (entries after it were never read). Entries below both are delivered and
 * not pending, i.e. acknowledged (or dead-lettered, which acks). */
static int trim(sk_worker *w, size_t si)
{
    struct stream *s = &w->s[si];
    redisReply *rep;
    int rc = sk_redis_cmd(w->r, &rep, "XINFO GROUPS %s", s->k.orders);
    if (rc) return redis_fail(w, rc, "XINFO GROUPS");
    char last[ID_MAX] = "";
    long long pending = -1;
    if (rep->type == REDIS_REPLY_ARRAY) {
        for (size_t g = 0; g < rep->elements; g++) {
            const redisReply *m = rep->element[g];
            if (m->type != REDIS_REPLY_ARRAY) continue;
            int ours = 0;
            char l[ID_MAX] = "";
            long long p = -1;
            for (size_t i = 0; i + 1 < m->elements; i += 2) {
                const redisReply *k = m->element[i], *v = m->element[i + 1];
                if (k->type != REDIS_REPLY_STRING) continue;
                if (!strcmp(k->str, "name") && v->type == REDIS_REPLY_STRING)
                    ours = !strcmp(v->str, SK_WORKER_GROUP);
                else if (!strcmp(k->str, "pending") && v->type == REDIS_REPLY_INTEGER)
                    p = v->integer;
                else if (!strcmp(k->str, "last-delivered-id") && v->type == REDIS_REPLY_STRING)
                    snprintf(l, sizeof l, "%s", v->str);
            }
            if (ours) {
                pending = p;
                snprintf(last, sizeof last, "%s", l);
            }
        }
    }
    freeReplyObject(rep);
    char minid[ID_MAX];
    if (pending < 0 || !last[0] || !strcmp(last, "0-0")) return 0; /* nothing delivered */
    if (next_id(last, minid, sizeof minid)) return 0;
    if (pending > 0) {
        if ((rc = sk_redis_cmd(w->r, &rep, "XPENDING %s %s", s->k.orders, SK_WORKER_GROUP)))
            return redis_fail(w, rc, "XPENDING");
        /* [count, smallest id, greatest id, consumers]; count 0: all acked
         * since XINFO, and last-delivered then bounds the trim. */
        if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 4 &&
            rep->element[1]->type == REDIS_REPLY_STRING && rep->element[1]->len < ID_MAX)
            snprintf(minid, sizeof minid, "%s", rep->element[1]->str);
        freeReplyObject(rep);
    }
    if ((rc = sk_redis_cmd(w->r, &rep, "XTRIM %s MINID %s", s->k.orders, minid)))
        return redis_fail(w, rc, "XTRIM");
    if (rep->type == REDIS_REPLY_INTEGER)
        INC(trimmed, rep->integer);
    else
        rc = reply_fail(w, rep, "XTRIM");
    freeReplyObject(rep);
    return rc;
}

/* Trims the streams whose turn it is (all of them when `all`). */
static int trim_due(sk_worker *w, int all)
{
    int64_t now = sk_mono_ms();
    for (size_t i = 0; i < w->ns; i++) {
        struct stream *s = &w->s[i];
        if (!s->group_ready || (!all && now < s->next_trim_ms)) continue;
        int rc = trim(w, i);
        if (rc) return rc;
        s->next_trim_ms = now + TRIM_EVERY_MS;
    }
    return 0;
}

/* ---- The loop ---------------------------------------------------------- */

/* One pass; *progress: entries fetched. */
static int pass(sk_worker *w, size_t *progress)
{
    *progress = 0;
    int64_t now = sk_mono_ms();
    int rc = 0;
    if (now >= w->next_relist_ms) {
        if ((rc = relist(w)) != 0) return rc;
        w->next_relist_ms = now + w->o.relist_ms;
    }
    for (size_t i = 0; i < w->ns; i++)
        if (!w->s[i].group_ready && (rc = make_group(w, &w->s[i])) != 0) return rc;
    size_t got;
    for (size_t i = 0; i < w->ns && !atomic_load(&w->stop); i++) {
        struct stream *s = &w->s[i];
        if (!s->group_ready || !s->history_due) continue;
        if ((rc = fetch_history(w, i, &got)) != 0) return rc;
        *progress += got;
    }
    for (size_t i = 0; i < w->ns && !atomic_load(&w->stop); i++) {
        struct stream *s = &w->s[i];
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
    return w->o.trim ? trim_due(w, 0) : 0;
}

int sk_worker_run(sk_worker *w)
{
    int backoff = BACKOFF_MIN_MS, failures = 0;
    sk_log(SK_LOG_INFO, "worker: consumer %s of group %s, batch %d, claim idle %d ms, DLQ after %d",
           w->consumer, SK_WORKER_GROUP, w->o.batch, w->o.claim_idle_ms, w->o.max_deliveries);
    while (!atomic_load(&w->stop)) {
        size_t progress;
        int rc = pass(w, &progress);
        if (rc) {
            if (w->o.once && ++failures >= ONCE_FAILURES) return rc;
            nap(w, backoff);
            backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
            continue;
        }
        failures = 0;
        backoff = BACKOFF_MIN_MS;
        if (w->o.once && progress == 0) {
            /* Drained: leave the streams trimmed to what is unacknowledged. */
            if (w->o.trim && (rc = trim_due(w, 1)) != 0) {
                if (++failures >= ONCE_FAILURES) return rc;
                nap(w, backoff);
                continue;
            }
            break;
        }
        /* Nothing followed yet: the XREADGROUP that would block is skipped,
         * so wait here for the next re-list. */
        if (!w->ns && !w->o.once) nap(w, w->o.relist_ms);
    }
    return 0;
}
