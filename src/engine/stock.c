/* stock.c - blocking calls of the admission scripts (purchase_batch,
 * release, preheat, switch, state). Argument building and reply decoding
 * of the purchase are pure functions: serve's async path and the blocking
 * call here build and read the same purchase_batch call. */
#include "engine/stock.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/codes.h"
#include "core/error.h"
#include "engine/keys.h"
#include "engine/segment.h"
#include "engine/stock_int.h"
#include "redis/handshake.h"
#include "redis/reply.h"
#include "redis/script.h"

int sk_stock_proto(sk_redis *r, const char *what)
{
    snprintf(r->errstr, sizeof r->errstr, "unexpected reply to %s", what);
    return r->err = SK_EPROTO;
}

static int is_int(const redisReply *e)
{
    return e && e->type == REDIS_REPLY_INTEGER;
}

static void set_order_id(struct sk_admission *a, const redisReply *e)
{
    a->order_id[0] = 0;
    if (e && e->type == REDIS_REPLY_STRING && e->len < SK_ORDER_ID_MAX) {
        memcpy(a->order_id, e->str, e->len);
        a->order_id[e->len] = 0;
    }
}

/* A refusal's qty slot is 0, except RATE_LIMITED's: its retry-after; an
 * OK one replaying an earlier answer holds -qty (lib/admit.lua). */
static void set_outcome(struct sk_admission *a, int rc, int64_t qty)
{
    a->rc = rc;
    a->replay = rc == SK_RC_OK && qty < 0;
    a->quantity = rc == SK_RC_RATE_LIMITED ? 0 : a->replay ? -qty : qty;
    a->retry_after_ms = rc == SK_RC_RATE_LIMITED ? qty : 0;
}

/* Copies len bytes of v into buf at *off as argument i. */
static int put_arg(char *buf, size_t cap, size_t *off, const char *v, size_t len, const char **args,
                   size_t *lens, size_t i)
{
    if (len + 1 > cap - *off) return SK_ENOMEM;
    memcpy(buf + *off, v, len);
    buf[*off + len] = 0;
    args[i] = buf + *off;
    lens[i] = len;
    *off += len + 1;
    return 0;
}

int sk_stock_batch_args_head(const struct sk_batch_head *h, const struct sk_purchase *p, size_t n,
                             char *buf, size_t cap, const char **args, size_t *lens)
{
    if (n == 0 || n > SK_BATCH_MAX || !h->label) return SK_EINVAL;
    struct sk_rate_limits none = {0, 0, 0, 0};
    const struct sk_rate_limits *rl = h->rl ? h->rl : &none;
    const char *xid = h->xfer_id ? h->xfer_id : "";
    if (strlen(xid) >= SK_XFER_ID_MAX || strlen(h->label) >= SK_LABEL_MAX) return SK_EINVAL;
    const int64_t lim[4] = {rl->user_per_s, rl->user_burst, rl->ip_per_s, rl->ip_burst};
    static const size_t lim_at[4] = {SK_A_BATCH_U_RATE, SK_A_BATCH_U_BURST, SK_A_BATCH_IP_RATE,
                                     SK_A_BATCH_IP_BURST};
    size_t off = 0;
    char num[24];
    int rc = put_arg(buf, cap, &off, h->label, strlen(h->label), args, lens, SK_A_BATCH_LABEL);
    for (int f = 0; rc == 0 && f < 4; f++) {
        int w = snprintf(num, sizeof num, "%" PRId64, lim[f] > 0 ? lim[f] : 0);
        rc = put_arg(buf, cap, &off, num, (size_t)w, args, lens, lim_at[f]);
    }
    if (rc == 0) rc = put_arg(buf, cap, &off, xid, strlen(xid), args, lens, SK_A_BATCH_XFER_ID);
    if (rc == 0) {
        int w = snprintf(num, sizeof num, "%" PRId64, h->xfer_qty > 0 ? h->xfer_qty : 0);
        rc = put_arg(buf, cap, &off, num, (size_t)w, args, lens, SK_A_BATCH_XFER_QTY);
    }
    /* the caller's memory of the key set: "" "" when it knows nothing */
    int known = h->epoch > 0 && h->adm >= 0;
    for (int f = 0; rc == 0 && f < 2; f++) {
        int w = known ? snprintf(num, sizeof num, "%" PRId64, f ? h->adm : h->epoch) : 0;
        num[w] = 0;
        rc = put_arg(buf, cap, &off, num, (size_t)w, args, lens,
                     f ? SK_A_BATCH_ADM : SK_A_BATCH_EPOCH);
    }
    const char *sid = h->store_id ? h->store_id : "";
    if (rc == 0 && sid[0] && strlen(sid) != SK_STOCK_STORE_ID_LEN) rc = SK_EINVAL;
    if (rc == 0) rc = put_arg(buf, cap, &off, sid, strlen(sid), args, lens, SK_A_BATCH_STORE);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        size_t base = SK_BATCH_ARGC(i);
        int w = snprintf(num, sizeof num, "%" PRIu64, p[i].user_id);
        rc = put_arg(buf, cap, &off, num, (size_t)w, args, lens, base + SK_A_BUY_USER);
        if (rc) break;
        w = snprintf(num, sizeof num, "%" PRId64, p[i].quantity);
        rc = put_arg(buf, cap, &off, num, (size_t)w, args, lens, base + SK_A_BUY_QTY);
        /* key and IP are passed by reference: no copy on the hot path */
        args[base + SK_A_BUY_IDEM] = p[i].idem ? p[i].idem : "";
        lens[base + SK_A_BUY_IDEM] = p[i].idem ? p[i].idem_len : 0;
        args[base + SK_A_BUY_IP] = p[i].ip ? p[i].ip : "";
        lens[base + SK_A_BUY_IP] = p[i].ip ? strlen(p[i].ip) : 0;
        args[base + SK_A_BUY_PASS] = p[i].pass ? p[i].pass : "";
        lens[base + SK_A_BUY_PASS] = p[i].pass ? p[i].pass_len : 0;
        args[base + SK_A_BUY_TICKET] = p[i].ch ? p[i].ch : "";
        lens[base + SK_A_BUY_TICKET] = p[i].ch ? strlen(p[i].ch) : 0;
    }
    return rc;
}

int sk_stock_batch_keys(const struct sk_keys *k, const struct sk_rate_limits *rl,
                        const struct sk_purchase *p, size_t n, char *buf, size_t cap,
                        const char **keys)
{
    if (n == 0 || n > SK_BATCH_MAX) return SK_EINVAL;
    sk_keys_purchase(k, keys);
    size_t nk = SK_PURCHASE_NKEYS, off = 0;
    int by_ip = rl && rl->ip_per_s > 0; /* the script's rule too (admit_keys_ok) */
    int by_ch = 0;                      /* challenge keys only when a ticket comes */
    for (size_t i = 0; i < n && !by_ch; i++)
        by_ch = p[i].ch && p[i].ch[0]; /* the script's rule (admit_keys_ok) */
    for (int pass = 0; pass < 3; pass++) {
        if ((pass == 1 && !by_ip) || (pass == 2 && !by_ch)) continue;
        for (size_t i = 0; i < n; i++) {
            int w = pass == 0   ? sk_keys_rl_user(k, p[i].user_id, buf + off, cap - off)
                    : pass == 1 ? sk_keys_rl_ip(k, p[i].ip, buf + off, cap - off)
                                : sk_keys_ch(k, p[i].ch ? p[i].ch_id : NULL, buf + off, cap - off);
            if (w < 0) return w;
            keys[nk++] = buf + off;
            off += (size_t)w + 1;
        }
    }
    return (int)nk;
}

/* The script's answer to a malformed call: {BAD_ARGUMENT} (lua/lib/args.lua). */
static int batch_bad_args(const redisReply *rep)
{
    return rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 1 && is_int(rep->element[0]) &&
           rep->element[0]->integer == SK_RC_BAD_ARGUMENT;
}

int sk_stock_batch_reply(sk_redis *r, const redisReply *rep, size_t n, struct sk_admission *res,
                         int64_t *remaining)
{
    int rc = sk_stock_batch_parse(rep, n, res, remaining);
    if (rc == SK_ESCRIPT) {
        /* as a Lua error was before: the script's text in r->errstr */
        snprintf(r->errstr, sizeof r->errstr,
                 "script purchase_batch: malformed call (BAD_ARGUMENT)");
        return r->err = SK_ESCRIPT;
    }
    return rc < 0 ? sk_stock_proto(r, "purchase_batch") : 0;
}

int sk_stock_batch_parse(const redisReply *rep, size_t n, struct sk_admission *res,
                         int64_t *remaining)
{
    if (batch_bad_args(rep)) return SK_ESCRIPT;
    if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements != 3 * n + 3 ||
        !is_int(rep->element[3 * n]) || !is_int(rep->element[3 * n + 1]) ||
        !is_int(rep->element[3 * n + 2]))
        return SK_EPROTO;
    for (size_t i = 0; i < n; i++) {
        if (!is_int(rep->element[3 * i]) || !is_int(rep->element[3 * i + 2])) return SK_EPROTO;
        set_outcome(&res[i], (int)rep->element[3 * i]->integer, rep->element[3 * i + 2]->integer);
        set_order_id(&res[i], rep->element[3 * i + 1]);
    }
    if (remaining) *remaining = rep->element[3 * n]->integer;
    return 0;
}

void sk_stock_batch_seen(const redisReply *rep, size_t n, int64_t *epoch, int64_t *adm)
{
    *epoch = *adm = 0;
    if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements != 3 * n + 3 ||
        !is_int(rep->element[3 * n + 1]) || !is_int(rep->element[3 * n + 2]))
        return;
    *epoch = rep->element[3 * n + 1]->integer;
    *adm = rep->element[3 * n + 2]->integer;
}

int sk_stock_batch_call(sk_redis *r, const struct sk_keys *k, const struct sk_batch_head *h,
                        const struct sk_purchase *p, size_t n, struct sk_admission *res,
                        int64_t *remaining)
{
    if (n == 0 || n > SK_BATCH_MAX) return r->err = SK_EINVAL;
    size_t cap = SK_BATCH_ARG_BYTES(n), kcap = SK_BATCH_KEY_BYTES(n);
    char *buf = malloc(cap + kcap);
    const char **args = malloc(sizeof *args * SK_BATCH_ARGC(n));
    size_t *lens = malloc(sizeof *lens * SK_BATCH_ARGC(n));
    const char **keys = malloc(sizeof *keys * SK_BATCH_KEYC(n));
    int rc = SK_ENOMEM, nk = 0;
    redisReply *rep = NULL;
    if (buf && args && lens && keys) rc = sk_stock_batch_args_head(h, p, n, buf, cap, args, lens);
    if (rc == 0 && (nk = rc = sk_stock_batch_keys(k, h->rl, p, n, buf + cap, kcap, keys)) > 0)
        rc = sk_script_eval(r, SK_SCRIPT_PURCHASE_BATCH, nk, keys, (int)SK_BATCH_ARGC(n), args,
                            lens, &rep);
    if (rc == 0) rc = sk_stock_batch_reply(r, rep, n, res, remaining);
    if (rep) freeReplyObject(rep);
    free(buf);
    free(args);
    free(lens);
    free(keys);
    return rc;
}

int sk_stock_buy(sk_redis *r, uint64_t aid, const struct sk_rate_limits *rl,
                 const struct sk_purchase *p, size_t n, struct sk_admission *res,
                 int64_t *remaining)
{
    struct sk_keys k;
    sk_keys_for(&k, aid);
    struct sk_batch_head h = {.label = k.label, .rl = rl};
    return sk_stock_batch_call(r, &k, &h, p, n, res, remaining);
}

int sk_stock_eval_ints(sk_redis *r, enum sk_script_id id, int nkeys, const char *const *keys,
                       int nargs, const char *const *args, int64_t *out, size_t want)
{
    redisReply *rep;
    int rc = sk_script_eval(r, id, nkeys, keys, nargs, args, NULL, &rep);
    if (rc < 0) {
        if (rep) freeReplyObject(rep);
        return rc;
    }
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 1) {
        freeReplyObject(rep);
        return sk_stock_proto(r, sk_script_name(id));
    }
    for (size_t i = 0; i < want; i++) {
        if (i < rep->elements && !is_int(rep->element[i])) {
            freeReplyObject(rep);
            return sk_stock_proto(r, sk_script_name(id));
        }
        out[i] = i < rep->elements ? rep->element[i]->integer : 0;
    }
    freeReplyObject(rep);
    return 0;
}

void sk_stock_release_call(struct sk_release_call *c, uint64_t aid, const char *order_id,
                           uint64_t uid, int64_t qty)
{
    /* released where it was admitted: the key set its id names (the
     * script refuses an id that does not start with the label) */
    if (sk_keys_for_order(&c->k, order_id) < 0 || c->k.activity_id != aid) sk_keys_for(&c->k, aid);
    sk_keys_release(&c->k, c->keys);
    snprintf(c->buf[SK_A_RELEASE_USER], sizeof *c->buf, "%" PRIu64, uid);
    snprintf(c->buf[SK_A_RELEASE_QTY], sizeof *c->buf, "%" PRId64, qty);
    c->args[SK_A_RELEASE_LABEL] = c->k.label;
    c->args[SK_A_RELEASE_OID] = order_id;
    c->args[SK_A_RELEASE_USER] = c->buf[SK_A_RELEASE_USER];
    c->args[SK_A_RELEASE_QTY] = c->buf[SK_A_RELEASE_QTY];
}

int sk_stock_release_parse(const redisReply *rep, int *rc, int64_t *given)
{
    if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 || !is_int(rep->element[0]) ||
        !is_int(rep->element[1]))
        return SK_EPROTO;
    *rc = (int)rep->element[0]->integer;
    *given = rep->element[1]->integer;
    return 0;
}

int sk_stock_release(sk_redis *r, uint64_t aid, const char *order_id, uint64_t uid, int64_t qty,
                     int *rc_out, int64_t *given)
{
    struct sk_release_call c;
    sk_stock_release_call(&c, aid, order_id, uid, qty);
    redisReply *rep;
    int rc = sk_script_eval(r, SK_SCRIPT_RELEASE, SK_RELEASE_NKEYS, c.keys, SK_A_RELEASE_N, c.args,
                            NULL, &rep);
    int64_t g = 0;
    if (rc == 0 && sk_stock_release_parse(rep, rc_out, &g) < 0) rc = sk_stock_proto(r, "release");
    if (rep) freeReplyObject(rep);
    if (rc == 0 && given) *given = g;
    return rc;
}

int sk_stock_preheat_args(const struct sk_stock_def *d, int force, char buf[SK_PREHEAT_ARGC][24],
                          const char *args[SK_PREHEAT_ARGC])
{
    const struct {
        int at;
        int64_t v;
    } nums[] = {{SK_A_PREHEAT_INITIAL, d->initial},
                {SK_A_PREHEAT_LIMIT, d->per_user_limit},
                {SK_A_PREHEAT_MAX_QTY, d->max_per_order},
                {SK_A_PREHEAT_START_MS, d->start_ms},
                {SK_A_PREHEAT_END_MS, d->end_ms},
                {SK_A_PREHEAT_FORCE, force ? 1 : 0},
                {SK_A_PREHEAT_RL_RATE, d->rl_per_user_per_s > 0 ? d->rl_per_user_per_s : 0},
                {SK_A_PREHEAT_RL_BURST, d->rl_burst > 0 ? d->rl_burst : 0},
                {SK_A_PREHEAT_DB_HELD, d->db_held > 0 ? d->db_held : 0}};
    for (int i = 0; i < SK_PREHEAT_ARGC; i++) {
        buf[i][0] = 0;
        args[i] = buf[i];
    }
    snprintf(buf[SK_A_PREHEAT_ID], 24, "%" PRIu64, d->id);
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
        snprintf(buf[nums[i].at], 24, "%" PRId64, nums[i].v);
    /* seg, seg_of: "" (not a segment). The waiting room: passes per
       second, pass TTL, seed (docs/waiting-room.md); empty without one */
    args[SK_A_PREHEAT_WR_SEED] = "";
    if (d->wr_rate > 0) {
        snprintf(buf[SK_A_PREHEAT_WR_RATE], 24, "%" PRId64, d->wr_rate);
        snprintf(buf[SK_A_PREHEAT_WR_TTL], 24, "%" PRId64, d->wr_ttl_s);
    }
    if (d->wr_rate > 0 || d->dr_box_ms > 0) args[SK_A_PREHEAT_WR_SEED] = d->wr_seed;
    args[SK_A_PREHEAT_STORE] = d->store_id;
    /* the challenge (docs/challenges.md), "" none */
    snprintf(buf[SK_A_PREHEAT_CH], 24, "%s", d->ch);
    sk_stock_fair_args(d, buf + SK_A_PREHEAT_FAIR);
    return SK_PREHEAT_ARGC;
}

void sk_stock_fair_args(const struct sk_stock_def *d, char buf[SK_FAIR_ARGC][24])
{
    int64_t v[SK_FAIR_ARGC] = {0};
    v[SK_A_FAIR_REG_START] = d->reg_start_ms;
    v[SK_A_FAIR_REG_END] = d->reg_end_ms;
    v[SK_A_FAIR_DR_BOX] = d->dr_box_ms;
    v[SK_A_FAIR_CONTROL] = d->wr_control;
    for (int i = 0; i < SK_FAIR_ARGC; i++)
        snprintf(buf[i], 24, "%" PRId64, v[i] > 0 ? v[i] : 0);
}

int sk_stock_preheat(sk_redis *r, const struct sk_stock_def *d, int force, int *rc_out,
                     int64_t *stock)
{
    if (d->segments > 1) return sk_seg_preheat(r, d, force, rc_out, stock);
    struct sk_keys k;
    sk_keys_for(&k, d->id);
    char a[SK_PREHEAT_ARGC][24];
    const char *args[SK_PREHEAT_ARGC];
    int nargs = sk_stock_preheat_args(d, force, a, args);
    const char *keys[SK_PREHEAT_NKEYS];
    sk_keys_preheat(&k, keys);
    int64_t v[2];
    int rc = sk_stock_eval_ints(r, SK_SCRIPT_PREHEAT, SK_PREHEAT_NKEYS, keys, nargs, args, v, 2);
    if (rc < 0) return rc;
    *rc_out = (int)v[0];
    if (stock) *stock = v[1];
    return 0;
}

int sk_stock_set_open(sk_redis *r, uint64_t aid, int open, int *rc_out)
{
    int segs;
    int rc = sk_seg_count(r, aid, &segs);
    if (rc < 0) return rc;
    if (segs > 1) return sk_seg_set_open(r, aid, segs, open, rc_out);
    struct sk_keys k;
    sk_keys_for(&k, aid);
    const char *keys[] = {SK_K_SWITCH_EACH(SK_KEY_OF, &k)};
    const char *args[SK_A_SWITCH_N] = {[SK_A_SWITCH_OPEN] = open ? "1" : "0"};
    int64_t v[1];
    rc = sk_stock_eval_ints(r, SK_SCRIPT_SWITCH, SK_K_SWITCH_N, keys, SK_A_SWITCH_N, args, v, 1);
    if (rc < 0) return rc;
    *rc_out = (int)v[0];
    return 0;
}

#define STATE_FIELDS 18
#define GUARD_FIELDS 7 /* fence, fence_ms, fence_why, lost, oversold, adm, epoch */

static int is_text(const redisReply *e)
{
    return e && e->type == REDIS_REPLY_STRING;
}

/* Copies a string reply into buf (cap bytes, truncated). */
static void copy_text(char *buf, size_t cap, const redisReply *e)
{
    snprintf(buf, cap, "%.*s", (int)(e->len < cap ? e->len : cap - 1), e->str);
}

int sk_stock_state_parse(const redisReply *rep, struct sk_stock_state *st)
{
    if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements != STATE_FIELDS + GUARD_FIELDS)
        return SK_EPROTO;
    int64_t v[STATE_FIELDS];
    for (int i = 0; i < STATE_FIELDS; i++) {
        if (!is_int(rep->element[i])) return SK_EPROTO;
        v[i] = rep->element[i]->integer;
    }
    redisReply *const *g = rep->element + STATE_FIELDS;
    if (!is_text(g[0]) || !is_int(g[1]) || !is_text(g[2]) || !is_int(g[3]) || !is_int(g[4]) ||
        !is_int(g[5]) || !is_int(g[6]))
        return SK_EPROTO;
    *st = (struct sk_stock_state){.exists = (int)v[0],
                                  .open = (int)v[1],
                                  .initial = v[2],
                                  .remaining = v[3],
                                  .released = v[4],
                                  .per_user_limit = v[5],
                                  .max_per_order = v[6],
                                  .start_ms = v[7],
                                  .end_ms = v[8],
                                  .buyers = v[9],
                                  .held = v[10],
                                  .stream_len = v[11],
                                  .reconcile_drift = v[12],
                                  .reconcile_ms = v[13],
                                  .backlog = v[14],
                                  .dlq = v[15],
                                  .xin = v[16],
                                  .xout = v[17],
                                  .segments = 1,
                                  .fence_ms = g[1]->integer,
                                  .lost = g[3]->integer,
                                  .oversold = g[4]->integer,
                                  .adm = g[5]->integer,
                                  .epoch = g[6]->integer};
    copy_text(st->fence, sizeof st->fence, g[0]);
    copy_text(st->fence_why, sizeof st->fence_why, g[2]);
    st->fenced = st->fence[0] != 0;
    return 0;
}

int64_t sk_stock_admitted(const struct sk_stock_state *st)
{
    return st->exists ? st->held + st->released : 0;
}

int sk_stock_state_keys(sk_redis *r, const struct sk_keys *kp, struct sk_stock_state *st)
{
    const char *keys[SK_STATE_NKEYS];
    sk_keys_state(kp, keys);
    redisReply *rep;
    int rc = sk_script_eval(r, SK_SCRIPT_STATE, SK_STATE_NKEYS, keys, 0, NULL, NULL, &rep);
    if (rc == 0 && sk_stock_state_parse(rep, st) < 0) rc = sk_stock_proto(r, "state");
    if (rep) freeReplyObject(rep);
    return rc;
}

int sk_stock_state(sk_redis *r, uint64_t aid, struct sk_stock_state *st)
{
    int segs;
    int src = sk_seg_count(r, aid, &segs);
    if (src < 0) return src;
    if (segs > 1) return sk_seg_state(r, aid, segs, st);
    struct sk_keys k;
    sk_keys_for(&k, aid);
    return sk_stock_state_keys(r, &k, st);
}

/* Adds the orders of the stream at key to *orders (an entry holds one, or
 * its field c of them: lib/admit.lua). */
static int stream_orders(sk_redis *r, const char *key, int64_t *orders)
{
    char from[64] = "-";
    for (;;) {
        redisReply *rep;
        int rc = sk_redis_cmd(r, &rep, "XRANGE %s %s + COUNT 1000", key, from);
        if (rc < 0) return rc;
        if (rep->type != REDIS_REPLY_ARRAY) {
            freeReplyObject(rep);
            return sk_stock_proto(r, "XRANGE");
        }
        size_t got = rep->elements;
        for (size_t i = 0; i < got; i++) {
            const redisReply *e = rep->element[i];
            if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
                e->element[0]->type != REDIS_REPLY_STRING ||
                e->element[1]->type != REDIS_REPLY_ARRAY) {
                freeReplyObject(rep);
                return sk_stock_proto(r, "XRANGE entry");
            }
            const redisReply *f = e->element[1];
            int64_t c = 1;
            for (size_t j = 0; j + 1 < f->elements; j += 2)
                if (f->element[j]->type == REDIS_REPLY_STRING && f->element[j]->len == 1 &&
                    f->element[j]->str[0] == 'c' && f->element[j + 1]->type == REDIS_REPLY_STRING)
                    c = strtoll(f->element[j + 1]->str, NULL, 10);
            *orders += c;
            snprintf(from, sizeof from, "(%s", e->element[0]->str);
        }
        freeReplyObject(rep);
        if (got < 1000) return 0;
    }
}

int sk_stock_stream_orders(sk_redis *r, uint64_t aid, int64_t *orders)
{
    *orders = 0;
    int segs;
    int rc = sk_seg_count(r, aid, &segs);
    if (rc < 0) return rc;
    struct sk_keys k;
    sk_keys_for(&k, aid);
    if (segs <= 1) return stream_orders(r, k.orders, orders);
    for (int i = 0; i < segs && rc == 0; i++) {
        sk_keys_seg(&k, aid, i);
        rc = stream_orders(r, k.orders, orders);
    }
    return rc;
}

void sk_stock_drop_argv(const struct sk_keys *k, const char *argv[SK_STOCK_DROP_ARGC])
{
    const char *v[SK_STOCK_DROP_ARGC] = {
        "DEL",   k->meta, k->stock, k->buyers,  k->orders,   k->released, k->idem, k->ledger,
        k->xout, k->xin,  k->wr_q,  k->wr_pass, k->wr_spent, k->wr_held,  k->reg,  k->draw};
    memcpy(argv, v, sizeof v);
}

int sk_stock_drop_keys(sk_redis *r, const struct sk_keys *kp)
{
    const char *argv[SK_STOCK_DROP_ARGC];
    sk_stock_drop_argv(kp, argv);
    redisReply *rep;
    int rc = sk_redis_command(r, &rep, SK_STOCK_DROP_ARGC, argv, NULL);
    if (rc < 0) return rc;
    rc = rep->type == REDIS_REPLY_INTEGER ? 0 : sk_stock_proto(r, "DEL");
    freeReplyObject(rep);
    return rc;
}

int sk_stock_drop(sk_redis *r, uint64_t aid)
{
    int segs;
    int src = sk_seg_count(r, aid, &segs);
    if (src < 0) return src;
    for (int i = 0; i < segs && segs > 1; i++) {
        struct sk_keys sk;
        sk_keys_seg(&sk, aid, i);
        if ((src = sk_stock_drop_keys(r, &sk)) < 0) return src;
    }
    struct sk_keys k;
    sk_keys_for(&k, aid);
    return sk_stock_drop_keys(r, &k);
}

struct settings_walk {
    int64_t orders;
    struct sk_rset_verdict *worst;
    char *where;
    size_t cap;
};

static void judge_one(void *data, const char *addr, const struct sk_rsettings *s)
{
    struct settings_walk *w = data;
    struct sk_rset_verdict v;
    sk_rsettings_judge(s, w->orders, &v);
    if (v.level <= w->worst->level && w->where[0]) return;
    *w->worst = v;
    snprintf(w->where, w->cap, "%s", addr);
}

/* Behind a Sentinel: every replica the master's ROLE lists is connected
 * once, so its settings are judged too. */
static void probe_replicas(sk_redis *r, struct settings_walk *w)
{
    redisReply *rep;
    if (!r->url.sentinel || sk_redis_cmd(r, &rep, "ROLE") < 0) return;
    size_t n = sk_handshake_replicas(rep);
    for (size_t i = 0; i < n; i++) {
        const redisReply *e = rep->element[2]->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 2 ||
            e->element[0]->type != REDIS_REPLY_STRING || e->element[1]->type != REDIS_REPLY_STRING)
            continue;
        int64_t port;
        if (sk_reply_i64(e->element[1], &port) < 0 || port < 1 || port > 65535) continue;
        struct sk_rsettings s;
        if (sk_redis_probe_settings(r, e->element[0]->str, (int)port, &s) < 0)
            continue; /* unreachable: skipped */
        char addr[80];
        snprintf(addr, sizeof addr, "%.64s:%d", e->element[0]->str, (int)port);
        judge_one(w, addr, &s);
    }
    freeReplyObject(rep);
}

int sk_stock_settings(sk_redis *r, uint64_t activity_id, int segments, int64_t orders, int fresh,
                      struct sk_rset_verdict *worst, char *where, size_t cap)
{
    memset(worst, 0, sizeof *worst);
    where[0] = 0;
    int S = segments > 1 ? segments : 1;
    for (int s = 0; s < S; s++) {
        struct sk_keys k;
        sk_keys_seg(&k, activity_id, segments > 1 ? s : SK_SEG_NONE);
        redisReply *rep;
        int rc = sk_redis_cmd(r, &rep, "EXISTS %s", k.meta);
        if (rc < 0) return rc;
        freeReplyObject(rep);
    }
    if (fresh) sk_redis_refresh_settings(r);
    struct settings_walk w = {orders, worst, where, cap};
    sk_redis_each_settings(r, judge_one, &w);
    probe_replicas(r, &w);
    return 0;
}
