/* queue.c - the waiting room's arguments, replies, pacing arithmetic for
 * the buyer (position, estimate, when to poll), and the blocking calls of
 * queue.lua, queue_pace.lua and queue_spent.lua (docs/waiting-room.md). */
#include "engine/queue.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/codes.h"
#include "core/error.h"
#include "core/mix64.h"
#include "engine/activity.h"
#include "engine/keys.h"
#include "engine/stock_int.h"
#include "redis/script.h"

#define HEAD 9      /* reply values before the first buyer's */
#define PER_BUYER 5 /* values per buyer */
#define STATS 11    /* queue_pace's reply */

int sk_queue_args(uint64_t aid, const char *ops, const uint64_t *users, size_t n, char *buf,
                  size_t cap, const char **args, size_t *lens)
{
    return sk_queue_args_ch(aid, ops, users, NULL, n, buf, cap, args, lens);
}

int sk_queue_keys(const struct sk_keys *k, const char *const *ids, size_t n, char *buf, size_t cap,
                  const char **keys)
{
    if (n == 0 || n > SK_QUEUE_BATCH_MAX) return SK_EINVAL;
    sk_keys_queue(k, keys);
    size_t nk = SK_QUEUE_NKEYS, off = 0;
    for (size_t i = 0; ids && i < n; i++) {
        int w = sk_keys_ch(k, ids[i], buf + off, cap - off);
        if (w < 0) return w;
        keys[nk++] = buf + off;
        off += (size_t)w + 1;
    }
    return (int)nk;
}

int sk_queue_args_ch(uint64_t aid, const char *ops, const uint64_t *users,
                     const char *const *tickets, size_t n, char *buf, size_t cap, const char **args,
                     size_t *lens)
{
    if (n == 0 || n > SK_QUEUE_BATCH_MAX || cap < SK_QUEUE_ARG_BYTES(n)) return SK_EINVAL;
    size_t off = 0;
    int w = snprintf(buf, cap, "%" PRIu64, aid);
    args[SK_A_QUEUE_AID] = buf;
    lens[SK_A_QUEUE_AID] = (size_t)w;
    off = (size_t)w + 1;
    for (size_t i = 0; i < n; i++) {
        if (ops[i] != SK_QUEUE_JOIN && ops[i] != SK_QUEUE_POLL) return SK_EINVAL;
        /* buyer i's A_JOIN */
        const char **a = args + SK_A_QUEUE_N + SK_A_JOIN_N * i;
        size_t *l = lens + SK_A_QUEUE_N + SK_A_JOIN_N * i;
        w = snprintf(buf + off, cap - off, "%c", ops[i]);
        a[SK_A_JOIN_OP] = buf + off;
        l[SK_A_JOIN_OP] = (size_t)w;
        off += (size_t)w + 1;
        w = snprintf(buf + off, cap - off, "%" PRIu64, users[i]);
        a[SK_A_JOIN_USER] = buf + off;
        l[SK_A_JOIN_USER] = (size_t)w;
        off += (size_t)w + 1;
        const char *t = tickets && tickets[i] ? tickets[i] : "";
        a[SK_A_JOIN_TICKET] = t;
        l[SK_A_JOIN_TICKET] = strlen(t);
    }
    return 0;
}

static int is_int(const redisReply *e)
{
    return e && e->type == REDIS_REPLY_INTEGER;
}

int sk_queue_parse(const redisReply *rep, size_t n, struct sk_queue_head *h,
                   struct sk_queue_answer *a)
{
    /* a malformed call: the head alone, rc BAD_ARGUMENT (lua/lib/args.lua) */
    if (rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == HEAD && is_int(rep->element[0]) &&
        rep->element[0]->integer == SK_RC_BAD_ARGUMENT)
        return SK_ESCRIPT;
    if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements != HEAD + PER_BUYER * n)
        return SK_EPROTO;
    for (size_t i = 0; i < HEAD; i++)
        if (!is_int(rep->element[i])) return SK_EPROTO;
    *h = (struct sk_queue_head){.rc = (int)rep->element[0]->integer,
                                .length = rep->element[1]->integer,
                                .issued = rep->element[2]->integer,
                                .rate = rep->element[3]->integer,
                                .starts_in_ms = rep->element[4]->integer,
                                .segments = rep->element[5]->integer,
                                .returned = rep->element[6]->integer,
                                .expired = rep->element[7]->integer,
                                .control = (int)rep->element[8]->integer};
    for (size_t i = 0; i < n; i++) {
        redisReply **e = rep->element + HEAD + PER_BUYER * i;
        if (!is_int(e[0]) || !is_int(e[1]) || !is_int(e[2]) || !is_int(e[4]) ||
            e[3]->type != REDIS_REPLY_STRING || e[3]->len >= SK_QUEUE_PASS_MAX)
            return SK_EPROTO;
        a[i].rc = (int)e[0]->integer;
        a[i].place = e[1]->integer;
        a[i].pass_exp_ms = e[2]->integer;
        memcpy(a[i].pass, e[3]->str, e[3]->len);
        a[i].pass[e[3]->len] = 0;
        a[i].events = (int)e[4]->integer;
    }
    return 0;
}

int64_t sk_queue_position(const struct sk_queue_head *h, const struct sk_queue_answer *a)
{
    if (a->rc != SK_RC_Q_WAITING || a->place <= 0 || h->starts_in_ms > 0) return 0;
    int64_t p = a->place - h->issued;
    return p > 0 ? p : 1;
}

int64_t sk_queue_eta_ms(const struct sk_queue_head *h, const struct sk_queue_answer *a)
{
    if (a->rc != SK_RC_Q_WAITING) return 0;
    if (h->starts_in_ms > 0) return h->starts_in_ms;
    int64_t p = sk_queue_position(h, a);
    if (h->rate <= 0) return 0;
    /* the pass of position p comes when p more passes were issued */
    return (p * 1000 + h->rate - 1) / h->rate;
}

/* A fixed spread per buyer (splitmix64's finaliser), in [0, span). */
static int64_t spread(uint64_t user, int64_t span)
{
    return span <= 1 ? 0 : (int64_t)sk_mix64_bucket(user, (uint64_t)span);
}

int64_t sk_queue_poll_after_ms(const struct sk_queue_head *h, const struct sk_queue_answer *a,
                               uint64_t user)
{
    if (a->rc != SK_RC_Q_WAITING) return 0;
    int64_t eta = sk_queue_eta_ms(h, a), ms;
    if (h->starts_in_ms > 0) {
        /* at the start, not before it: nothing changes until then */
        ms = eta <= 20000 ? eta + spread(user, 1000) : 20000;
    } else {
        ms = eta / 2;
        if (ms < 250) ms = 250;
        if (ms > 20000) ms = 20000;
        ms += spread(user, ms / 10);
    }
    return ms > 20000 ? 20000 : ms;
}

int sk_queue_pass_wellformed(const char *s, size_t len, int64_t *exp_ms)
{
    if (!s || len == 0 || len >= SK_QUEUE_PASS_MAX) return 0;
    int64_t exp = 0;
    size_t i = 0;
    for (; i < len && s[i] >= '0' && s[i] <= '9'; i++)
        if (i < 15) exp = exp * 10 + (s[i] - '0');
    if (i == 0 || i > 15 || i + 1 >= len || s[i] != '.') return 0;
    for (size_t k = i + 1; k < len; k++)
        if (!((s[k] >= '0' && s[k] <= '9') || (s[k] >= 'a' && s[k] <= 'f'))) return 0;
    if (exp_ms) *exp_ms = exp;
    return 1;
}

int sk_queue_stats_parse(const redisReply *rep, struct sk_queue_stats *st)
{
    if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements != STATS) return SK_EPROTO;
    int64_t v[STATS];
    for (int i = 0; i < STATS; i++) {
        if (!is_int(rep->element[i])) return SK_EPROTO;
        v[i] = rep->element[i]->integer;
    }
    *st = (struct sk_queue_stats){.rc = (int)v[0],
                                  .rate = v[1],
                                  .ttl_s = v[2],
                                  .length = v[3],
                                  .issued = v[4],
                                  .handed_out = v[5],
                                  .spent = v[6],
                                  .expired = v[7],
                                  .starts_in_ms = v[8],
                                  .returned = v[9],
                                  .control = (int)v[10]};
    return 0;
}

/* ---- blocking ------------------------------------------------------------ */

int sk_queue_call(sk_redis *r, uint64_t aid, const char *ops, const uint64_t *users, size_t n,
                  struct sk_queue_head *h, struct sk_queue_answer *a)
{
    if (n == 0 || n > SK_QUEUE_BATCH_MAX) return r->err = SK_EINVAL;
    size_t cap = SK_QUEUE_ARG_BYTES(n), kcap = SK_QUEUE_KEY_BYTES(n);
    char *buf = malloc(cap + kcap);
    const char **args = malloc(SK_QUEUE_ARGC(n) * sizeof *args);
    const char **keys = malloc(SK_QUEUE_KEYC(n) * sizeof *keys);
    size_t *lens = malloc(SK_QUEUE_ARGC(n) * sizeof *lens);
    int rc = SK_ENOMEM, nk = 0;
    redisReply *rep = NULL;
    struct sk_keys k;
    sk_keys_for(&k, aid);
    if (buf && args && lens && keys) {
        rc = sk_queue_args(aid, ops, users, n, buf, cap, args, lens);
        if (rc == 0) rc = nk = sk_queue_keys(&k, NULL, n, buf + cap, kcap, keys);
    }
    if (rc >= 0) {
        rc = sk_script_eval(r, SK_SCRIPT_QUEUE, nk, keys, (int)SK_QUEUE_ARGC(n), args, lens, &rep);
    } else {
        r->err = rc;
    }
    int prc = rc == 0 ? sk_queue_parse(rep, n, h, a) : 0;
    if (prc == SK_ESCRIPT) {
        /* as a Lua error was before: a caller's bug, not a buyer's answer */
        snprintf(r->errstr, sizeof r->errstr, "script queue: malformed call (BAD_ARGUMENT)");
        rc = r->err = SK_ESCRIPT;
    } else if (prc < 0) {
        rc = sk_stock_proto(r, "queue");
    }
    if (rep) freeReplyObject(rep);
    free(buf);
    free(args);
    free(keys);
    free(lens);
    return rc;
}

int sk_queue_pace(sk_redis *r, uint64_t aid, int64_t new_rate, struct sk_queue_stats *st)
{
    struct sk_keys k;
    sk_keys_for(&k, aid);
    char rate[24] = "";
    if (new_rate > 0) snprintf(rate, sizeof rate, "%" PRId64, new_rate);
    const char *keys[] = {SK_K_QUEUE_PACE_EACH(SK_KEY_OF, &k)};
    const char *args[SK_A_QUEUE_PACE_N] = {[SK_A_QUEUE_PACE_RATE] = rate};
    redisReply *rep;
    int rc = sk_script_eval(r, SK_SCRIPT_QUEUE_PACE, SK_K_QUEUE_PACE_N, keys, SK_A_QUEUE_PACE_N,
                            args, NULL, &rep);
    if (rc == 0 && sk_queue_stats_parse(rep, st) < 0) rc = sk_stock_proto(r, "queue_pace");
    if (rep) freeReplyObject(rep);
    return rc;
}

void sk_queue_spent_call(struct sk_queue_spent_call *c, uint64_t aid, uint64_t uid, int64_t exp_ms)
{
    sk_keys_for(&c->k, aid);
    snprintf(c->a[SK_A_QUEUE_SPENT_USER], sizeof *c->a, "%" PRIu64, uid);
    snprintf(c->a[SK_A_QUEUE_SPENT_EXP], sizeof *c->a, "%" PRId64, exp_ms);
    const char *keys[] = {SK_K_QUEUE_SPENT_EACH(SK_KEY_OF, &c->k)};
    memcpy(c->keys, keys, sizeof keys);
    for (int i = 0; i < SK_A_QUEUE_SPENT_N; i++)
        c->args[i] = c->a[i];
}

const char *sk_queue_control_arg(int action)
{
    switch (action) {
    case SK_QC_PAUSE: return "pause";
    case SK_QC_QUEUE_ALL: return "all";
    case SK_QC_REFUSE_JOINS: return "nojoin";
    default: return "resume";
    }
}
