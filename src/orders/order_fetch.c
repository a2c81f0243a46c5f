/* order_fetch.c - the order worker's reads of its streams
 * (order_worker_int.h): this consumer's own pending entries (history),
 * the entries idle on any consumer (XAUTOCLAIM), and the new ones
 * (XREADGROUP ... >); each fetch goes to order_batch.c whole. A stream
 * whose group vanished (NOGROUP) is re-listed before its group is made
 * again. */
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "core/vec.h"
#include "orders/order_worker_int.h"

#define INC(field, n) SK_WORKER_INC(w, field, n)

/* Room for n fetched entries (w->e and w->orders). */
static int grow_scratch(sk_worker *w, size_t n)
{
    if (SK_VEC_RESERVE(w->e, w->ecap, n, 64) || SK_VEC_RESERVE(w->orders, w->ocap, n, 64))
        return SK_ENOMEM;
    return 0;
}

static int is_nogroup(const redisReply *rep)
{
    return rep && rep->type == REDIS_REPLY_ERROR && !strncmp(rep->str, "NOGROUP", 7);
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

/* This consumer's own pending entries of stream si (XREADGROUP ... <id>). */
int sk_worker_fetch_history(sk_worker *w, size_t si, size_t *got)
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
         * sk_worker_process(), which re-arms it when entries stay pending. */
        if (n == (size_t)w->o.batch) {
            snprintf(s->history_from, sizeof s->history_from, "%.*s", (int)w->e[n - 1].idlen,
                     w->e[n - 1].id);
        } else {
            s->history_due = 0;
            snprintf(s->history_from, sizeof s->history_from, "0");
        }
        *got = n;
        if (n) rc = sk_worker_process(w, n);
    }
    freeReplyObject(rep);
    return rc;
}

/* Entries idle on any consumer longer than claim_idle_ms (XAUTOCLAIM). */
int sk_worker_fetch_claimed(sk_worker *w, size_t si, size_t *got)
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
        rc = sk_worker_process(w, n);
    }
    freeReplyObject(rep);
    return rc;
}

/* New entries of every ready stream in one XREADGROUP (block_ms < 0: no
 * BLOCK). */
int sk_worker_fetch_new(sk_worker *w, int block_ms, size_t *got)
{
    *got = 0;
    size_t nready = 0;
    for (size_t i = 0; i < w->ns; i++)
        nready += w->s[i].group_ready;
    w->fetch_short = 0;
    if (!nready) return 0;
    w->fetch_ms = sk_mono_ms();
    if (sk_worker_grow_argv(w, 10 + 2 * nready)) return SK_ENOMEM;
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
            rc = sk_worker_process(w, n);
        }
    } else if (rep->type != REDIS_REPLY_NIL) {
        rc = sk_worker_reply_fail(w, rep, "XREADGROUP");
    }
    freeReplyObject(rep);
    return rc;
}
