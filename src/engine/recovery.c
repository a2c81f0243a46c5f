/* recovery.c - the Redis side of the rollback guard: probes, and the calls
 * of fence.lua, rebuild.lua, replay.lua and resume.lua (design in
 * docs/recovery.md). */
#include "engine/recovery.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/codes.h"
#include "core/error.h"
#include "engine/segment.h"
#include "engine/stock_int.h"
#include "redis/reply.h"
#include "redis/script.h"

static int64_t num_of(const redisReply *e)
{
    return sk_reply_i64_or(e, 0);
}

/* The probe's EXISTS, in this order after HMGET meta and GET stock. */
#define PROBE_EXISTS 5
#define PROBE_CMDS (2 + PROBE_EXISTS)

/* Adds a key's name to p->lost_what. */
static void lost_add(struct sk_keyset_probe *p, const char *what)
{
    size_t len = strlen(p->lost_what);
    snprintf(p->lost_what + len, sizeof p->lost_what - len, "%s%s", len ? " " : "", what);
}

/* Which of p's keys vanished while others did not (recovery.h). ex: the
 * EXISTS answers of orders, ledger, buyers, idem, reg; f: HMGET's M_PROBE
 * as numbers (keys: its bits 1 orders, 2 ledger, 4 idem, 8 reg must
 * exist: lua/lib/admit.lua, lua/lib/reg.lua). */
static void probe_lost(struct sk_keyset_probe *p, const int *ex, const int64_t *f)
{
    static const char *const name[PROBE_EXISTS] = {"orders", "ledger", "buyers", "idem", "reg"};
    int64_t keys = f[SK_M_PROBE_KEYS];
    int must[PROBE_EXISTS] = {(keys & 1) != 0, (keys & 2) != 0,
                              p->stock < f[SK_M_PROBE_INITIAL] + f[SK_M_PROBE_XIN] -
                                             f[SK_M_PROBE_XOUT] + f[SK_M_PROBE_OVERSOLD],
                              (keys & 4) != 0, (keys & 8) != 0};
    p->lost_what[0] = 0;
    if (p->present && !p->has_stock && p->segments < 2) {
        lost_add(p, "stock");
    } else if (!p->present && (p->has_stock || ex[0] || ex[1] || ex[2] || ex[3])) {
        lost_add(p, "meta");
        if (!p->has_stock) lost_add(p, "stock");
    } else if (p->present && p->has_stock) {
        for (int i = 0; i < PROBE_EXISTS; i++)
            if (must[i] && !ex[i]) lost_add(p, name[i]);
    }
    p->lost = p->lost_what[0] != 0;
}

int sk_recovery_probe(sk_redis *r, const struct sk_keys *ks, size_t n, struct sk_keyset_probe *out)
{
    for (size_t i = 0; i < n; i++) {
        const char *hm[] = {"HMGET", ks[i].meta, SK_M_PROBE_FIELDS};
        const char *get[] = {"GET", ks[i].stock};
        const char *ex[PROBE_EXISTS][2] = {{"EXISTS", ks[i].orders},
                                           {"EXISTS", ks[i].ledger},
                                           {"EXISTS", ks[i].buyers},
                                           {"EXISTS", ks[i].idem},
                                           {"EXISTS", ks[i].reg}};
        int rc = sk_redis_append(r, (int)(sizeof hm / sizeof *hm), hm, NULL);
        if (rc == 0) rc = sk_redis_append(r, 2, get, NULL);
        for (int j = 0; rc == 0 && j < PROBE_EXISTS; j++)
            rc = sk_redis_append(r, 2, ex[j], NULL);
        if (rc < 0) return rc;
    }
    int err = 0;
    for (size_t i = 0; i < n; i++) {
        redisReply *rep[PROBE_CMDS];
        for (int j = 0; j < PROBE_CMDS; j++) {
            int rc = sk_redis_read(r, &rep[j]);
            if (rc < 0) {
                while (j-- > 0)
                    freeReplyObject(rep[j]);
                return rc;
            }
        }
        const redisReply *m = rep[0], *s = rep[1];
        struct sk_keyset_probe *p = &out[i];
        memset(p, 0, sizeof *p);
        int64_t f[SK_M_PROBE_N] = {0};
        if (m->type == REDIS_REPLY_ARRAY && m->elements == SK_M_PROBE_N) {
            redisReply **e = m->element;
            for (int j = 0; j < SK_M_PROBE_N; j++)
                f[j] = num_of(e[j]);
            p->present = e[SK_M_PROBE_INITIAL]->type == REDIS_REPLY_STRING;
            p->adm = f[SK_M_PROBE_ADM];
            p->epoch = f[SK_M_PROBE_EPOCH];
            p->xseq = f[SK_M_PROBE_XSEQ];
            p->oversold = f[SK_M_PROBE_OVERSOLD];
            p->segments = (int)f[SK_M_PROBE_SEGMENTS];
            const redisReply *fe = e[SK_M_PROBE_FENCE], *fw = e[SK_M_PROBE_FENCE_WHY];
            if (fe->type == REDIS_REPLY_STRING)
                snprintf(p->fence, sizeof p->fence, "%.*s", (int)fe->len, fe->str);
            if (fw->type == REDIS_REPLY_STRING)
                snprintf(p->fence_why, sizeof p->fence_why, "%.*s", (int)fw->len, fw->str);
        } else {
            err = 1;
        }
        if (s->type == REDIS_REPLY_STRING) {
            p->has_stock = 1;
            p->stock = sk_reply_i64_or(s, 0);
        } else if (s->type != REDIS_REPLY_NIL) {
            err = 1;
        }
        int ex[PROBE_EXISTS];
        for (int j = 0; j < PROBE_EXISTS; j++) {
            const redisReply *x = rep[2 + j];
            if (x->type != REDIS_REPLY_INTEGER) err = 1;
            ex[j] = x->type == REDIS_REPLY_INTEGER && x->integer > 0;
        }
        p->has_ledger = ex[1];
        if (!err) probe_lost(p, ex, f);
        for (int j = 0; j < PROBE_CMDS; j++)
            freeReplyObject(rep[j]);
    }
    return err ? sk_stock_proto(r, "HMGET meta (probe)") : 0;
}

/* A script's {rc, stock} answer: rc one of the two it may give (into
 * *rc_out), else a refusal said in r->errstr (SK_EINVAL). */
static int two_rc(sk_redis *r, const char *what, const struct sk_keys *k, const int64_t *out, int a,
                  int b, int *rc_out)
{
    if (out[0] != a && out[0] != b) {
        snprintf(r->errstr, sizeof r->errstr, "%s of %s refused: %s", what, k->label,
                 sk_rc_message((int)out[0]));
        return r->err = SK_EINVAL;
    }
    *rc_out = (int)out[0];
    return 0;
}

int sk_recovery_reset(sk_redis *r, const struct sk_keys *k, int *rc_out, int64_t *stock)
{
    const char *keys[] = {SK_K_RESET_EACH(SK_KEY_OF, k)};
    int64_t out[2];
    int rc = sk_stock_eval_ints(r, SK_SCRIPT_RESET, SK_K_RESET_N, keys, 0, NULL, out, 2);
    if (rc == 0) rc = two_rc(r, "reset", k, out, SK_RC_PREHEATED, SK_RC_UNKNOWN_ACTIVITY, rc_out);
    if (rc == 0) *stock = out[1];
    return rc;
}

int sk_recovery_fence(sk_redis *r, const struct sk_keys *k, const char *why, const char *text,
                      char *fence)
{
    const char *keys[] = {SK_K_FENCE_EACH(SK_KEY_OF, k)};
    char t[201]; /* fence.lua takes at most 200 bytes of text */
    snprintf(t, sizeof t, "%s", text ? text : "");
    const char *args[SK_A_FENCE_N] = {[SK_A_FENCE_WHY] = why, [SK_A_FENCE_TEXT] = t};
    redisReply *rep;
    int rc = sk_script_eval(r, SK_SCRIPT_FENCE, SK_K_FENCE_N, keys, SK_A_FENCE_N, args, NULL, &rep);
    if (rc == 0 && (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
                    rep->element[0]->type != REDIS_REPLY_INTEGER ||
                    rep->element[1]->type != REDIS_REPLY_STRING))
        rc = sk_stock_proto(r, "fence");
    if (rc == 0 && rep->element[0]->integer != SK_RC_OK) {
        snprintf(r->errstr, sizeof r->errstr, "fence: refused the argument '%s'", why);
        rc = r->err = SK_EINVAL;
    }
    if (rc == 0 && fence)
        snprintf(fence, SK_FENCE_MAX, "%.*s", (int)rep->element[1]->len, rep->element[1]->str);
    if (rep) freeReplyObject(rep);
    return rc;
}

int sk_recovery_rebuild(sk_redis *r, const struct sk_keys *k, const struct sk_stock_def *d,
                        int64_t initial, int segments, int *rc_out)
{
    /* rebuild.lua's ARGV: A_REBUILD of script_pos.def */
    char a[SK_A_REBUILD_N][24];
    const char *args[SK_A_REBUILD_N];
    const struct {
        int at;
        int64_t v;
    } nums[] = {{SK_A_REBUILD_INITIAL, initial},
                {SK_A_REBUILD_LIMIT, d->per_user_limit},
                {SK_A_REBUILD_MAX_QTY, d->max_per_order},
                {SK_A_REBUILD_START_MS, d->start_ms},
                {SK_A_REBUILD_END_MS, d->end_ms},
                {SK_A_REBUILD_RL_RATE, d->rl_per_user_per_s > 0 ? d->rl_per_user_per_s : 0},
                {SK_A_REBUILD_RL_BURST, d->rl_burst > 0 ? d->rl_burst : 0}};
    for (int i = 0; i < SK_A_REBUILD_N; i++) {
        a[i][0] = 0;
        args[i] = a[i];
    }
    snprintf(a[SK_A_REBUILD_ID], sizeof *a, "%" PRIu64, d->id);
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
        snprintf(a[nums[i].at], sizeof *a, "%" PRId64, nums[i].v);
    if (segments > 1 && k->seg >= 0) {
        snprintf(a[SK_A_REBUILD_SEG], sizeof *a, "%d", k->seg);
        snprintf(a[SK_A_REBUILD_SEG_OF], sizeof *a, "%d", segments);
    }
    /* the waiting room: every key set checks passes with its seed */
    if (d->wr_rate > 0) {
        snprintf(a[SK_A_REBUILD_WR_RATE], sizeof *a, "%" PRId64, d->wr_rate);
        snprintf(a[SK_A_REBUILD_WR_TTL], sizeof *a, "%" PRId64, d->wr_ttl_s);
    }
    args[SK_A_REBUILD_WR_SEED] = d->wr_rate > 0 || d->dr_box_ms > 0 ? d->wr_seed : "";
    /* the rebuilt key set is the rebuilding store's */
    args[SK_A_REBUILD_STORE] = d->store_id;
    /* the challenge (docs/challenges.md): every key set checks it */
    args[SK_A_REBUILD_CH] = d->ch;
    /* registration, the draw's box and the emergency controls, as stored */
    sk_stock_fair_args(d, a + SK_A_REBUILD_FAIR);
    const char *keys[] = {SK_K_REBUILD_EACH(SK_KEY_OF, k)};
    int64_t out[2];
    int rc = sk_stock_eval_ints(r, SK_SCRIPT_REBUILD, SK_K_REBUILD_N, keys, SK_A_REBUILD_N, args,
                                out, 2);
    if (rc == 0) rc = two_rc(r, "rebuild", k, out, SK_RC_PREHEATED, SK_RC_STOCK_LIVE, rc_out);
    return rc;
}

/* One replay.lua call for o[0..n), n <= SK_REPLAY_CHUNK; the refused ones'
 * indexes, plus base, into refused. */
static int replay_chunk(sk_redis *r, const struct sk_keys *k, const struct sk_replay_order *o,
                        size_t n, struct sk_replay_result *res, size_t base, size_t *refused,
                        size_t *nrefused)
{
    size_t nargs = SK_A_REPLAY_N + SK_A_REPLAY_ONE_N * n;
    const char **args = malloc(nargs * sizeof *args);
    char(*num)[2][24] = malloc(n * sizeof *num);
    if (!args || !num) {
        free(args);
        free(num);
        return r->err = SK_ENOMEM;
    }
    args[SK_A_REPLAY_LABEL] = k->label;
    for (size_t i = 0; i < n; i++) {
        const char **a = args + SK_A_REPLAY_N + SK_A_REPLAY_ONE_N * i;
        snprintf(num[i][0], 24, "%" PRIu64, o[i].user_id);
        snprintf(num[i][1], 24, "%" PRId64, o[i].quantity);
        a[SK_A_REPLAY_ONE_OID] = o[i].order_id;
        a[SK_A_REPLAY_ONE_USER] = num[i][0];
        a[SK_A_REPLAY_ONE_QTY] = num[i][1];
        a[SK_A_REPLAY_ONE_KIND] = o[i].released ? "r" : o[i].paid ? "p" : "h";
        a[SK_A_REPLAY_ONE_IDEM] = o[i].idem_key ? o[i].idem_key : "";
    }
    const char *keys[] = {SK_K_REPLAY_EACH(SK_KEY_OF, k)};
    redisReply *rep;
    int rc = sk_script_eval(r, SK_SCRIPT_REPLAY, SK_K_REPLAY_N, keys, (int)nargs, args, NULL, &rep);
    free(args);
    free(num);
    if (rc < 0) {
        if (rep) freeReplyObject(rep);
        return rc;
    }
    int64_t v[11];
    int ok = rep->type == REDIS_REPLY_ARRAY && rep->elements >= 11;
    for (size_t i = 0; ok && i < rep->elements; i++)
        ok = rep->element[i]->type == REDIS_REPLY_INTEGER;
    for (size_t i = 0; ok && i < 11; i++)
        v[i] = rep->element[i]->integer;
    if (ok && v[0] == SK_RC_OK) ok = rep->elements == 11 + (size_t)v[7];
    if (!ok) {
        freeReplyObject(rep);
        return sk_stock_proto(r, "replay");
    }
    if (v[0] != SK_RC_OK) {
        freeReplyObject(rep);
        snprintf(r->errstr, sizeof r->errstr, "replay into %s refused: %s", k->label,
                 sk_rc_message((int)v[0]));
        return r->err = SK_EINVAL;
    }
    for (size_t j = 11; j < rep->elements; j++) {
        long long at = rep->element[j]->integer;
        if (at < 1 || (size_t)at > n || !refused) continue;
        refused[(*nrefused)++] = base + (size_t)at - 1;
    }
    freeReplyObject(rep);
    res->held += v[1];
    res->held_units += v[2];
    res->released += v[3];
    res->again += v[4];
    res->oversold += v[5];
    res->stock = v[6];
    res->refused += v[7];
    res->refused_units += v[8];
    res->paid_over_limit += v[9];
    res->idem_restored += v[10];
    res->calls++;
    return 0;
}

int sk_recovery_replay(sk_redis *r, const struct sk_keys *k, const struct sk_replay_order *o,
                       size_t n, struct sk_replay_result *res, size_t *refused, size_t *nrefused)
{
    if (nrefused) *nrefused = 0;
    size_t dummy = 0;
    for (size_t at = 0; at < n; at += SK_REPLAY_CHUNK) {
        size_t m = n - at < SK_REPLAY_CHUNK ? n - at : SK_REPLAY_CHUNK;
        int rc = replay_chunk(r, k, o + at, m, res, at, refused, nrefused ? nrefused : &dummy);
        if (rc < 0) return rc;
    }
    return 0;
}

int sk_recovery_resume(sk_redis *r, const struct sk_keys *k, const struct sk_resume_args *a,
                       struct sk_resume_result *res)
{
    char v[SK_A_RESUME_N][24] = {{0}};
    const int64_t nums[][2] = {{SK_A_RESUME_WATERMARK, a->watermark},
                               {SK_A_RESUME_LENT, a->lent},
                               {SK_A_RESUME_XSEQ, a->xseq},
                               {SK_A_RESUME_OVER, a->over},
                               {SK_A_RESUME_XOUT, a->xout_seen}};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
        snprintf(v[nums[i][0]], sizeof *v, "%" PRId64, nums[i][1] > 0 ? nums[i][1] : 0);
    const char *args[SK_A_RESUME_N];
    for (int i = 0; i < SK_A_RESUME_N; i++)
        args[i] = v[i];
    args[SK_A_RESUME_MAX_SID] = a->max_sid ? a->max_sid : "";
    args[SK_A_RESUME_OPEN] = a->open < 0 ? "" : a->open ? "1" : "0";
    const char *keys[] = {SK_K_RESUME_EACH(SK_KEY_OF, k)};
    int64_t out[6];
    int rc =
        sk_stock_eval_ints(r, SK_SCRIPT_RESUME, SK_K_RESUME_N, keys, SK_A_RESUME_N, args, out, 6);
    if (rc < 0) return rc;
    if (out[0] != SK_RC_OK) {
        snprintf(r->errstr, sizeof r->errstr, "resume of %s refused: %s", k->label,
                 sk_rc_message((int)out[0]));
        return r->err = SK_EINVAL;
    }
    *res = (struct sk_resume_result){
        .oversold = out[1], .stock = out[2], .resumed = (int)out[3], .lost = out[4], .adm = out[5]};
    return 0;
}

int sk_recovery_ledger(sk_redis *r, const struct sk_keys *k, const char *const *oids, size_t n,
                       int *state, uint64_t *user, int64_t *qty)
{
    if (n == 0) return 0;
    if (n > 1000) return r->err = SK_EINVAL;
    const char **argv = malloc((n + 2) * sizeof *argv);
    if (!argv) return r->err = SK_ENOMEM;
    argv[0] = "HMGET";
    argv[1] = k->ledger;
    memcpy(argv + 2, oids, n * sizeof *oids);
    redisReply *rep;
    int rc = sk_redis_command(r, &rep, (int)n + 2, argv, NULL);
    free(argv);
    if (rc < 0) return rc;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != n) {
        freeReplyObject(rep);
        return sk_stock_proto(r, "HMGET ledger");
    }
    for (size_t i = 0; i < n; i++) {
        const redisReply *e = rep->element[i];
        unsigned long long u = 0;
        long long q = 0;
        int used = 0;
        state[i] = 0;
        if (e->type == REDIS_REPLY_STRING && sscanf(e->str, "%llu:%lld%n", &u, &q, &used) == 2)
            state[i] = e->str[used] ? 2 : 1;
        if (user) user[i] = (uint64_t)u;
        if (qty) qty[i] = (int64_t)q;
    }
    freeReplyObject(rep);
    return 0;
}

int sk_recovery_ledger_has(sk_redis *r, const struct sk_keys *ks, const char *const *oids, size_t n,
                           int *has)
{
    size_t sent = 0;
    for (size_t i = 0; i < n; i++) {
        has[i] = 1;
        if (!oids[i] || !oids[i][0]) continue;
        const char *argv[] = {"HEXISTS", ks[i].ledger, oids[i]};
        int rc = sk_redis_append(r, 3, argv, NULL);
        if (rc < 0) return rc;
        sent++;
    }
    int err = 0;
    for (size_t i = 0; i < n && sent; i++) {
        if (!oids[i] || !oids[i][0]) continue;
        redisReply *rep;
        int rc = sk_redis_read(r, &rep);
        if (rc < 0) return rc;
        sent--;
        if (rep->type == REDIS_REPLY_INTEGER)
            has[i] = rep->integer != 0;
        else
            err = 1;
        freeReplyObject(rep);
    }
    return err ? sk_stock_proto(r, "HEXISTS ledger") : 0;
}

/* The xin hash of segment s: every transfer id applied there. Caller frees
 * *out (freeReplyObject). */
static int read_xin(sk_redis *r, uint64_t aid, int s, redisReply **out)
{
    struct sk_keys k;
    sk_keys_seg(&k, aid, s);
    int rc = sk_redis_cmd(r, out, "HGETALL %s", k.xin);
    if (rc < 0) return rc;
    if ((*out)->type != REDIS_REPLY_ARRAY || (*out)->elements % 2) {
        freeReplyObject(*out);
        return sk_stock_proto(r, "HGETALL xin");
    }
    return 0;
}

int sk_recovery_lost_lends(sk_redis *r, uint64_t aid, int segments, int v, int64_t xseq,
                           int64_t *units, int64_t *max_seq)
{
    *units = *max_seq = 0;
    for (int s = 0; s < segments; s++) {
        if (s == v) continue;
        redisReply *rep;
        int rc = read_xin(r, aid, s, &rep);
        if (rc < 0) return rc;
        for (size_t i = 0; i + 1 < rep->elements; i += 2) {
            int from, used = 0;
            long long seq;
            const redisReply *id = rep->element[i], *q = rep->element[i + 1];
            if (id->type != REDIS_REPLY_STRING || q->type != REDIS_REPLY_STRING ||
                sscanf(id->str, "%d-%lld%n", &from, &seq, &used) != 2 || id->str[used] || from != v)
                continue;
            if (seq > *max_seq) *max_seq = seq;
            if (seq > xseq) *units += sk_reply_i64_or(q, 0);
        }
        freeReplyObject(rep);
    }
    return 0;
}

int sk_recovery_transfer_sums(sk_redis *r, uint64_t aid, int segments, int v, int64_t *xin,
                              int64_t *xout, int64_t *xout_v)
{
    *xin = *xout = *xout_v = 0;
    for (int s = 0; s < segments; s++) {
        struct sk_keys k;
        sk_keys_seg(&k, aid, s);
        const char *argv[] = {"HMGET", k.meta, SK_M_XFER_FIELDS};
        int rc = sk_redis_append(r, (int)(sizeof argv / sizeof *argv), argv, NULL);
        if (rc < 0) return rc;
    }
    int err = 0;
    for (int s = 0; s < segments; s++) {
        redisReply *rep;
        int rc = sk_redis_read(r, &rep);
        if (rc < 0) return rc;
        if (rep->type == REDIS_REPLY_ARRAY && rep->elements == SK_M_XFER_N) {
            *xin += num_of(rep->element[SK_M_XFER_XIN]);
            *xout += num_of(rep->element[SK_M_XFER_XOUT]);
            if (s == v) *xout_v = num_of(rep->element[SK_M_XFER_XOUT]);
        } else {
            err = 1;
        }
        freeReplyObject(rep);
    }
    return err ? sk_stock_proto(r, "HMGET xin xout") : 0;
}

struct forget {
    int v;
    int64_t units;
};

static int forget_one(sk_redis *r, uint64_t aid, const char *id, int to, int64_t qty, void *arg)
{
    (void)r, (void)aid, (void)id;
    struct forget *f = arg;
    if (to != f->v) return 0;
    f->units += qty;
    return 1;
}

int sk_recovery_forget_lends_to(sk_redis *r, uint64_t aid, int segments, int v, int64_t *units)
{
    struct forget f = {v, 0};
    int rc = 0;
    for (int s = 0; s < segments && rc == 0; s++)
        if (s != v) rc = sk_seg_xout_each(r, aid, s, forget_one, &f);
    *units = f.units;
    return rc;
}
