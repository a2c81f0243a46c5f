/* order_batch.c - one fetch of the order worker, from entries to
 * acknowledged orders (order_worker_int.h): each entry parsed into its
 * orders (one, or several: lib/admit.lua) or poison, with the reason; the
 * valid ones persisted in one store transaction per group of entries of
 * at most SK_WORKER_TXN_ORDERS orders, with bounded retries, then XACK;
 * poison is delivered again up to max_deliveries, then moved to the
 * dead-letter stream. Nothing is acked before its transaction committed. */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "core/vec.h"
#include "orders/order_event.h"
#include "orders/order_worker_int.h"

#define DB_ATTEMPTS 5 /* store attempts per batch before leaving it pending */

#define INC(field, n) SK_WORKER_INC(w, field, n)

/* ---- Parsing ---------------------------------------------------------- */

/* Entry e -> its orders (e->no of them from w->orders[e->oi]), or e->bad
 * with the reason (order_event.h). Grows w->orders (SK_ENOMEM). */
static int parse_entry(sk_worker *w, struct worker_entry *e)
{
    const struct worker_stream *s = &w->s[e->si];
    const redisReply *f = e->fields;
    e->no = 0;
    if (f->type != REDIS_REPLY_ARRAY || f->elements % 2) {
        snprintf(e->reason, sizeof e->reason, "fields are not name/value pairs");
        e->bad = 1;
        return 0;
    }
    size_t nf = f->elements / 2;
    if (SK_VEC_RESERVE(w->fields, w->fcap, nf ? nf : 1, 16) ||
        SK_VEC_RESERVE(w->orders, w->ocap, e->oi + SK_EVENT_ORDERS_MAX, 64))
        return SK_ENOMEM;
    for (size_t i = 0; i < nf; i++) {
        const redisReply *k = f->element[2 * i], *v = f->element[2 * i + 1];
        if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING) {
            snprintf(e->reason, sizeof e->reason, "field %zu is not a string", i);
            e->bad = 1;
            return 0;
        }
        w->fields[i] = (struct sk_event_field){k->str, k->len, v->str, v->len};
    }
    if (sk_order_event_parse(s->k.label, s->aid, e->id, e->idlen, w->fields, nf, &w->orders[e->oi],
                             &e->no, e->reason, sizeof e->reason) < 0)
        e->bad = 1;
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
    if (sk_worker_grow_argv(w, 11 + nf)) return SK_ENOMEM;
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

/* XACK every entry of w->e[lo..hi) that is done (valid or deleted), one
 * command per stream, pipelined. */
static int ack_done(sk_worker *w, size_t lo, size_t hi)
{
    size_t streams = 0;
    for (size_t si = 0; si < w->ns; si++)
        for (size_t i = lo; i < hi; i++)
            if (w->e[i].si == si && !w->e[i].bad) {
                streams++;
                break;
            }
    if (streams > 1) sk_worker_test_pause(w, "xack");
    size_t sent = 0;
    for (size_t si = 0; si < w->ns; si++) {
        size_t m = 0;
        for (size_t i = lo; i < hi; i++)
            if (w->e[i].si == si && !w->e[i].bad) m++;
        if (!m) continue;
        if (sk_worker_grow_argv(w, 3 + m)) return SK_ENOMEM;
        w->argv[0] = "XACK";
        w->lens[0] = 4;
        w->argv[1] = w->s[si].k.orders;
        w->lens[1] = strlen(w->s[si].k.orders);
        w->argv[2] = SK_WORKER_GROUP;
        w->lens[2] = strlen(SK_WORKER_GROUP);
        size_t k = 3;
        for (size_t i = lo; i < hi; i++)
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

/* Test-build fault injection (SK_TEST; SECKILL_TEST_CRASH_BEFORE_COMMIT=N /
 * SECKILL_TEST_CRASH_AFTER_COMMIT=N: the N-th store transaction). A kill -9
 * from outside cannot be aimed at "committed but not acked" or "read but
 * not committed", so the worker sends itself SIGKILL exactly there: no
 * cleanup, no flush, like the real thing. */
static void crash_point(uint64_t at, uint64_t txn)
{
#ifdef SK_TEST
    if (at && at == txn) {
        kill(getpid(), SIGKILL);
        _exit(9); /* not reached */
    }
#else
    (void)at, (void)txn; /* no hooks in a release build */
#endif
}

/* One transaction's figures into the counters. */
static void counted(sk_worker *w, const struct sk_persist_result *res)
{
    INC(batches, 1);
    INC(persisted, res->inserted);
    INC(duplicates, res->duplicates);
    INC(conflicts, res->conflicts);
    INC(stock_failures, res->stock_failures);
}

/* Persists the orders of w->orders[o0..o1), those of the valid entries
 * of w->e[lo..hi), in one transaction, with bounded retries. A row the
 * store refuses (SK_EINVAL) is isolated by persisting entry by entry: the
 * entry holding it becomes poison. */
static int persist(sk_worker *w, size_t lo, size_t hi, size_t o0, size_t o1)
{
    int backoff = SK_WORKER_BACKOFF_MIN_MS;
    for (int attempt = 1;; attempt++) {
        struct sk_persist_result res;
        w->txns++;
        crash_point(w->crash_before, w->txns);
        int rc = sk_store_orders_persist(w->st, &w->orders[o0], o1 - o0, &res);
        if (rc == 0) {
            crash_point(w->crash_after, w->txns);
            counted(w, &res);
            return 0;
        }
        if (rc == SK_EINVAL) {
            /* One row is refused (its batch rolled back): find its entry.
             * Entries that pass commit one by one; re-delivery later is a
             * no-op. */
            for (size_t i = lo; i < hi; i++) {
                struct worker_entry *e = &w->e[i];
                if (e->bad || !e->fields) continue;
                rc = sk_store_orders_persist(w->st, &w->orders[e->oi], e->no, &res);
                if (rc == SK_EINVAL) {
                    e->bad = 1;
                    snprintf(e->reason, sizeof e->reason, "store refused it: %.150s",
                             sk_store_errstr(w->st));
                    continue;
                }
                if (rc) break;
                counted(w, &res);
            }
            if (rc == 0 || rc == SK_EINVAL) return 0;
        }
        INC(db_errors, 1);
        sk_worker_set_err(w, "store: %s", sk_store_errstr(w->st));
        sk_log(SK_LOG_WARN, "worker: batch of %zu not persisted (attempt %d/%d): %s", o1 - o0,
               attempt, DB_ATTEMPTS, w->errstr);
        if (attempt >= DB_ATTEMPTS || atomic_load(&w->stop)) return rc;
        sk_worker_stall_check(w, sk_mono_ms()); /* a long outage is told while it lasts */
        sk_worker_nap(w, backoff);
        backoff = backoff * 2 > SK_WORKER_BACKOFF_MAX_MS ? SK_WORKER_BACKOFF_MAX_MS : backoff * 2;
    }
}

/* Persists, acks and handles the poison of the parsed entries w->e[lo..hi)
 * (their orders w->orders[0..no)). */
static int process_group(sk_worker *w, size_t lo, size_t hi, size_t no)
{
    int rc = no ? persist(w, lo, hi, 0, no) : 0;
    if (rc == 0) rc = ack_done(w, lo, hi);
    for (size_t i = lo; i < hi && rc == 0; i++) {
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
    return rc;
}

/* Handles the n fetched entries in w->e: parse, persist (one transaction
 * per group of entries of at most SK_WORKER_TXN_ORDERS orders), ack, and
 * poison handling. On failure nothing of the group is acked and the
 * fetch's streams re-read their pending entries on the next pass. */
int sk_worker_process(sk_worker *w, size_t n)
{
    size_t lo = 0, no = 0, deleted = 0;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        struct worker_entry *e = &w->e[i];
        if (no >= SK_WORKER_TXN_ORDERS) {
            rc = process_group(w, lo, i, no);
            lo = i;
            no = 0;
            if (rc) break;
        }
        if (!e->fields) {
            deleted++; /* nothing left to persist: ack it so it stops coming back */
            sk_log(SK_LOG_WARN, "worker: pending entry %.*s of %s was deleted from the stream",
                   (int)e->idlen, e->id, w->s[e->si].k.orders);
            continue;
        }
        e->oi = no;
        rc = parse_entry(w, e);
        if (!e->bad) no += e->no;
    }
    if (rc == 0) rc = process_group(w, lo, n, no);
    if (rc == 0) INC(deleted, deleted);
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
