/* order_streams.c - the streams the order worker follows (order_worker_int.h):
 * the activity list re-read periodically, segmented activities detected
 * from Redis (one stream per segment), consumer groups created and
 * re-created, and acknowledged entries trimmed. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "core/vec.h"
#include "engine/keys.h"
#include "engine/live_acts.h"
#include "engine/segment.h"
#include "orders/order_worker_int.h"
#include "redis/reply.h"
#include "redis/stream_id.h"

#define TRIM_EVERY_MS 1000

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
    return SK_VEC_RESERVE(w->s, w->scap, w->ns + more, 16) ? SK_ENOMEM : 0;
}

/* Follows the stream of key set (aid, seg). */
static void add_stream(sk_worker *w, uint64_t aid, int seg, int segcheck)
{
    struct worker_stream *s = &w->s[w->ns++];
    memset(s, 0, sizeof *s);
    s->aid = aid;
    sk_keys_seg(&s->k, aid, seg);
    snprintf(s->claim_cursor, sizeof s->claim_cursor, "0-0");
    s->seen = 1;
    s->segcheck = segcheck;
    sk_log(SK_LOG_DEBUG, "worker: following %s (activity %" PRIu64 ")", s->k.orders, aid);
}

/* Who owns an activity's live state (its base meta's store_id,
 * docs/design.md): this store (or nobody knows yet), another store, or
 * nobody although it is preheated (preheated before identities). */
enum { OWN_OURS, OWN_FOREIGN, OWN_NONE };

/* Segment counts of aids[0..n) in one pipelined round: segs[i] = S (> 1:
 * segmented), 1 when preheated unsegmented, 0 when not known yet (no base
 * meta, or an unexpected reply); own[i] its owner. */
static int seg_counts(sk_worker *w, const uint64_t *aids, size_t n, int *segs, int *own)
{
    if (n > 1) sk_worker_test_pause(w, "segments");
    for (size_t i = 0; i < n; i++) {
        struct sk_keys k;
        sk_keys_for(&k, aids[i]);
        const char *argv[] = {"HMGET", k.meta, SK_M_ROUTE_FIELDS};
        int rc = sk_redis_append(w->r, (int)(sizeof argv / sizeof *argv), argv, NULL);
        if (rc) return sk_worker_redis_fail(w, rc, "HMGET segments");
    }
    for (size_t i = 0; i < n; i++) {
        redisReply *rep;
        int rc = sk_redis_read(w->r, &rep);
        if (rc) return sk_worker_redis_fail(w, rc, "HMGET segments");
        segs[i] = 0;
        own[i] = OWN_OURS;
        if (rep->type == REDIS_REPLY_ARRAY && rep->elements == SK_M_ROUTE_N) {
            const redisReply *sg = rep->element[SK_M_ROUTE_SEGMENTS],
                             *in = rep->element[SK_M_ROUTE_INITIAL],
                             *sid = rep->element[SK_M_ROUTE_STORE_ID];
            int64_t v = sg->type == REDIS_REPLY_STRING ? sk_reply_i64_or(sg, 0) : 0;
            if (v > 1 && v <= SK_SEG_MAX)
                segs[i] = (int)v;
            else if (sg->type == REDIS_REPLY_NIL && in->type == REDIS_REPLY_STRING)
                segs[i] = 1;
            if (sid->type == REDIS_REPLY_STRING && sk_live_foreign(sid->str, w->store_id))
                own[i] = OWN_FOREIGN;
            else if (sid->type == REDIS_REPLY_NIL && segs[i] && w->store_id[0])
                own[i] = OWN_NONE;
        } else {
            sk_log(SK_LOG_WARN, "worker: segments of activity %" PRIu64 ": %s", aids[i],
                   rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply");
        }
        freeReplyObject(rep);
    }
    sk_worker_redis_ok(w);
    return 0;
}

/* Entries in stream key (XLEN) into *len. */
static int stream_len(sk_worker *w, const char *key, long long *len)
{
    redisReply *rep;
    int rc = sk_redis_cmd(w->r, &rep, "XLEN %s", key);
    if (rc) return sk_worker_redis_fail(w, rc, "XLEN");
    if (rep->type == REDIS_REPLY_INTEGER)
        *len = rep->integer;
    else
        rc = sk_worker_reply_fail(w, rep, "XLEN");
    freeReplyObject(rep);
    return rc;
}

/* An activity preheated before identities existed, listed by this store:
 * it is ours from now on (HSETNX: a preheat or an admission may have
 * claimed it since). */
static int claim(sk_worker *w, uint64_t aid)
{
    struct sk_keys k;
    sk_keys_for(&k, aid);
    redisReply *rep;
    int rc = sk_redis_cmd(w->r, &rep, "HSETNX %s store_id %s", k.meta, w->store_id);
    if (rc) return sk_worker_redis_fail(w, rc, "HSETNX store_id");
    freeReplyObject(rep);
    return 0;
}

/* Whether aid was found foreign at the last re-list. */
static int was_foreign(const sk_worker *w, uint64_t aid)
{
    for (size_t i = 0; i < w->nforeign; i++)
        if (w->foreign[i] == aid) return 1;
    return 0;
}

/* This re-list's foreign activities (check[i] with own[i] OWN_FOREIGN):
 * each newly foreign one logged once, the list and the gauge replaced. */
static int note_foreign(sk_worker *w, const uint64_t *check, const int *own, size_t nc)
{
    size_t nf = 0;
    for (size_t i = 0; i < nc; i++)
        nf += own[i] == OWN_FOREIGN;
    uint64_t *now = nf ? malloc(nf * sizeof *now) : NULL;
    if (nf && !now) return SK_ENOMEM;
    for (size_t i = 0, k = 0; i < nc; i++) {
        if (own[i] != OWN_FOREIGN) continue;
        now[k++] = check[i];
        if (!was_foreign(w, check[i]))
            sk_log(SK_LOG_ERROR,
                   "worker: activity %" PRIu64 " is in this database but its live state in "
                   "Redis was preheated from another database (this one is store %s): not "
                   "following its orders, they belong to that database's workers. `seckill "
                   "reconcile` names the fix",
                   check[i], w->store_id);
    }
    free(w->foreign);
    w->foreign = now;
    w->nforeign = w->foreign_cap = nf;
    sk_node_wc_set(w->o.node, SK_WC_foreign, (uint64_t)nf);
    return 0;
}

int sk_worker_relist(sk_worker *w)
{
    uint64_t *ids;
    size_t n;
    int rc = sk_store_activity_ids(w->st, &ids, &n);
    if (rc == 0 && !w->store_id[0] &&
        (rc = sk_store_identity(w->st, w->store_id, sizeof w->store_id)) != 0)
        free(ids);
    if (rc) {
        SK_WORKER_INC(w, db_errors, 1);
        sk_worker_set_err(w, "list activities: %s", sk_store_errstr(w->st));
        sk_log(SK_LOG_WARN, "worker: %s", w->errstr);
        return rc;
    }
    for (size_t j = 0; j < w->ns; j++)
        w->s[j].seen = 0;
    /* check[0..nc): activities to ask Redis about: new ones first, then
     * followed base streams still marked segcheck. */
    uint64_t *check = malloc((n + w->ns + 1) * sizeof *check);
    int *segs = malloc((n + w->ns + 1) * sizeof *segs);
    int *own = malloc((n + w->ns + 1) * sizeof *own);
    if (!check || !segs || !own) {
        free(ids), free(check), free(segs), free(own);
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
    rc = nc ? seg_counts(w, check, nc, segs, own) : 0;
    if (rc == 0) rc = note_foreign(w, check, own, nc);
    for (size_t i = 0; rc == 0 && i < nc; i++) {
        int S = segs[i];
        if (own[i] == OWN_NONE && (rc = claim(w, check[i])) != 0) break;
        if (own[i] == OWN_FOREIGN && i < nnew) continue;
        if (own[i] == OWN_FOREIGN) {
            /* preheated from another store since we followed it: its orders
             * are that store's workers' */
            for (size_t j = 0; j < w->ns; j++)
                if (w->s[j].segcheck && w->s[j].aid == check[i]) w->s[j--] = w->s[--w->ns];
            continue;
        }
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
    free(own);
    atomic_store(&w->c.activities, (uint64_t)w->ns);
    sk_node_wc_set(w->o.node, SK_WC_activities, (uint64_t)w->ns);
    return rc;
}

/* ---- Consumer groups --------------------------------------------------- */

/* Redis out of memory refuses XGROUP CREATE before it looks (-OOM), even
 * for a group that exists: then XINFO GROUPS, a read, says whether it
 * does, so a worker started while Redis is full drains it (the one thing
 * that gives memory back). 1 when the group is there. */
static int group_exists(sk_worker *w, const struct worker_stream *s)
{
    redisReply *rep;
    if (sk_redis_cmd(w->r, &rep, "XINFO GROUPS %s", s->k.orders)) return 0;
    struct sk_reply_xgroup grp;
    sk_reply_xgroup(rep, SK_WORKER_GROUP, &grp);
    freeReplyObject(rep);
    return grp.found;
}

int sk_worker_make_group(sk_worker *w, struct worker_stream *s)
{
    redisReply *rep;
    /* Id 0, not $: entries admitted before the group existed are orders
     * too. MKSTREAM: an activity nobody bought from yet has no stream. */
    int rc =
        sk_redis_cmd(w->r, &rep, "XGROUP CREATE %s %s 0 MKSTREAM", s->k.orders, SK_WORKER_GROUP);
    if (rc) return sk_worker_redis_fail(w, rc, "XGROUP CREATE");
    sk_worker_redis_ok(w);
    if (rep->type == REDIS_REPLY_STATUS ||
        (rep->type == REDIS_REPLY_ERROR && !strncmp(rep->str, "BUSYGROUP", 9)) ||
        (rep->type == REDIS_REPLY_ERROR && !strncmp(rep->str, "OOM ", 4) && group_exists(w, s))) {
        s->group_ready = 1;
        s->history_due = 1; /* our pending entries from a previous life */
        snprintf(s->history_from, sizeof s->history_from, "0");
    } else {
        rc = sk_worker_reply_fail(w, rep, "XGROUP CREATE");
    }
    freeReplyObject(rep);
    return rc;
}

/* Stream s lost its group: its keys were dropped (the activity deleted, or
 * Redis restarted without persistence). Re-list before re-creating it (a
 * deleted activity's stream must not come back), and check a base
 * stream's activity for segments again: its keys may come back from a
 * segmented preheat. */
void sk_worker_lost_group(sk_worker *w, struct worker_stream *s)
{
    /* the rollback guard first, at the next pass: a stream that vanished
     * while its key set holds orders is recovered (its ids kept above the
     * lost ones) before XGROUP CREATE ... MKSTREAM would make it anew */
    w->guard_next_ms = 0;
    s->group_ready = 0;
    if (s->k.seg == SK_SEG_NONE) s->segcheck = 1;
    w->next_relist_ms = 0;
}

/* ---- Trimming ---------------------------------------------------------- */

/* The id right after "<ms>-<seq>" (into out); SK_EINVAL if not an id. */
static int next_id(const char *id, char *out, size_t cap)
{
    struct sk_sid sid;
    if (sk_sid_parse(id, strlen(id), &sid)) return SK_EINVAL;
    if (sid.seq == UINT64_MAX)
        snprintf(out, cap, "%" PRIu64 "-0", sid.ms + 1);
    else
        snprintf(out, cap, "%" PRIu64 "-%" PRIu64, sid.ms, sid.seq + 1);
    return 0;
}

/* Removes the acknowledged head of stream si: everything below the
 * group's oldest pending entry, and never past its last-delivered id
 * (entries after it were never read). Entries below both are delivered and
 * not pending, i.e. acknowledged (or dead-lettered, which acks). */
static int trim(sk_worker *w, size_t si)
{
    struct worker_stream *s = &w->s[si];
    redisReply *rep;
    int rc = sk_redis_cmd(w->r, &rep, "XINFO GROUPS %s", s->k.orders);
    if (rc) return sk_worker_redis_fail(w, rc, "XINFO GROUPS");
    struct sk_reply_xgroup grp;
    sk_reply_xgroup(rep, SK_WORKER_GROUP, &grp);
    long long pending = grp.found ? grp.pending : -1;
    char last[SK_WORKER_ID_MAX];
    snprintf(last, sizeof last, "%s", grp.found ? grp.last : "");
    freeReplyObject(rep);
    char minid[SK_WORKER_ID_MAX];
    if (pending < 0 || !last[0] || !strcmp(last, "0-0")) return 0; /* nothing delivered */
    if (next_id(last, minid, sizeof minid)) return 0;
    if (pending > 0) {
        if ((rc = sk_redis_cmd(w->r, &rep, "XPENDING %s %s", s->k.orders, SK_WORKER_GROUP)))
            return sk_worker_redis_fail(w, rc, "XPENDING");
        /* [count, smallest id, greatest id, consumers]; count 0: all acked
         * since XINFO, and last-delivered then bounds the trim. */
        if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 4 &&
            rep->element[1]->type == REDIS_REPLY_STRING && rep->element[1]->len < SK_WORKER_ID_MAX)
            snprintf(minid, sizeof minid, "%s", rep->element[1]->str);
        freeReplyObject(rep);
    }
    if ((rc = sk_redis_cmd(w->r, &rep, "XTRIM %s MINID %s", s->k.orders, minid)))
        return sk_worker_redis_fail(w, rc, "XTRIM");
    if (rep->type == REDIS_REPLY_INTEGER)
        SK_WORKER_INC(w, trimmed, rep->integer);
    else
        rc = sk_worker_reply_fail(w, rep, "XTRIM");
    freeReplyObject(rep);
    return rc;
}

/* Trims the streams whose turn it is (all of them when `all`). */
int sk_worker_trim_due(sk_worker *w, int all)
{
    int64_t now = sk_mono_ms();
    for (size_t i = 0; i < w->ns; i++) {
        struct worker_stream *s = &w->s[i];
        if (!s->group_ready || (!all && now < s->next_trim_ms)) continue;
        int rc = trim(w, i);
        if (rc) return rc;
        s->next_trim_ms = now + TRIM_EVERY_MS;
    }
    return 0;
}
