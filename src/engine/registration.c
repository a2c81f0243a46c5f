/* registration.c - register.lua's and draw_put.lua's arguments and
 * replies, and their blocking calls (registration.h). */
#include "engine/registration.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/codes.h"
#include "core/error.h"
#include "core/num.h"
#include "engine/stock_int.h"
#include "redis/reply.h"
#include "redis/script.h"

#define REG_REPLY 11  /* register.lua's reply */
#define DRAW_REPLY 7  /* draw_put.lua's state */
#define PUT_CHUNK 500 /* places a 'p' call writes */

void sk_reg_call_make(struct sk_reg_call *c, uint64_t aid, char op, uint64_t uid,
                      const struct sk_rate_limits *rl, const char *ip)
{
    memset(c, 0, sizeof *c);
    sk_keys_for(&c->k, aid);
    sk_keys_rl_user(&c->k, uid, c->rl_user, sizeof c->rl_user);
    int has_ip = ip && ip[0];
    if (has_ip) sk_keys_rl_ip(&c->k, ip, c->rl_ip, sizeof c->rl_ip);
    c->keys[SK_K_REGISTER_META] = c->k.meta;
    c->keys[SK_K_REGISTER_REG] = c->k.reg;
    c->keys[SK_K_REGISTER_DRAW] = c->k.draw;
    c->keys[SK_K_REGISTER_WR_SPENT] = c->k.wr_spent;
    c->keys[SK_K_REGISTER_STOCK] = c->k.stock;
    c->keys[SK_K_REGISTER_RL_USER] = c->rl_user;
    c->keys[SK_K_REGISTER_RL_IP] = c->rl_ip;
    /* rl_ip only with a client IP (the last of K_REGISTER) */
    c->nkeys = has_ip ? SK_K_REGISTER_N : SK_K_REGISTER_RL_IP;
    c->op[0] = op;
    snprintf(c->a[SK_A_REGISTER_USER], sizeof *c->a, "%" PRIu64, uid);
    const int64_t v[][2] = {{SK_A_REGISTER_U_RATE, rl ? rl->user_per_s : 0},
                            {SK_A_REGISTER_U_BURST, rl ? rl->user_burst : 0},
                            {SK_A_REGISTER_IP_RATE, rl ? rl->ip_per_s : 0},
                            {SK_A_REGISTER_IP_BURST, rl ? rl->ip_burst : 0}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        snprintf(c->a[v[i][0]], sizeof *c->a, "%" PRId64, v[i][1] > 0 ? v[i][1] : 0);
    for (int i = 0; i < SK_A_REGISTER_N; i++)
        c->args[i] = c->a[i];
    c->args[SK_A_REGISTER_OP] = c->op;
    c->args[SK_A_REGISTER_IP] = has_ip ? ip : "";
    c->args[SK_A_REGISTER_TICKET] = "";
    c->nargs = SK_A_REGISTER_N;
}

void sk_reg_call_ticket(struct sk_reg_call *c, const char *ticket, const char *ch_id)
{
    if (!ticket || !ticket[0]) return;
    sk_keys_ch(&c->k, ch_id, c->ch_key, sizeof c->ch_key);
    c->keys[c->nkeys++] = c->ch_key;
    c->args[SK_A_REGISTER_TICKET] = ticket;
}

/* A user id in a string reply: canonical decimal. */
static int reply_u64(const redisReply *e, uint64_t *u)
{
    return e && e->type == REDIS_REPLY_STRING ? sk_num_u64_canonical(e->str, e->len, u) : SK_EPROTO;
}

static int is_int(const redisReply *e)
{
    return e && e->type == REDIS_REPLY_INTEGER;
}

int sk_reg_parse(const redisReply *rep, struct sk_reg_answer *a)
{
    memset(a, 0, sizeof *a);
    if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements != REG_REPLY) return SK_EPROTO;
    redisReply **e = rep->element;
    for (size_t i = 0; i < REG_REPLY; i++)
        if (i != 7 && !is_int(e[i])) return SK_EPROTO;
    if (e[7]->type != REDIS_REPLY_STRING || e[7]->len >= SK_QUEUE_PASS_MAX) return SK_EPROTO;
    if (e[0]->integer == SK_RC_BAD_ARGUMENT) return SK_ESCRIPT;
    a->rc = (int)e[0]->integer;
    a->registered = e[1]->integer != 0;
    a->added = e[2]->integer != 0;
    a->count = e[3]->integer;
    a->retry_ms = e[4]->integer;
    a->place = e[5]->integer;
    a->pass_exp_ms = e[6]->integer;
    memcpy(a->pass, e[7]->str, e[7]->len);
    a->pass[e[7]->len] = 0;
    a->box_start_ms = e[8]->integer;
    a->winners = e[9]->integer;
    a->drawn = e[10]->integer;
    return 0;
}

int sk_reg_call(sk_redis *r, uint64_t aid, char op, uint64_t uid, const struct sk_rate_limits *rl,
                const char *ip, struct sk_reg_answer *a)
{
    struct sk_reg_call c;
    sk_reg_call_make(&c, aid, op, uid, rl, ip);
    redisReply *rep;
    int rc = sk_script_eval(r, SK_SCRIPT_REGISTER, c.nkeys, c.keys, c.nargs, c.args, NULL, &rep);
    if (rc == 0) {
        int prc = sk_reg_parse(rep, a);
        if (prc == SK_ESCRIPT) {
            snprintf(r->errstr, sizeof r->errstr, "script register: malformed call");
            rc = r->err = SK_ESCRIPT;
        } else if (prc < 0) {
            rc = sk_stock_proto(r, "register");
        }
    }
    if (rep) freeReplyObject(rep);
    return rc;
}

/* ---- the draw in Redis --------------------------------------------------- */

static void draw_keys(struct sk_keys *k, uint64_t aid, const char *keys[SK_K_DRAW_PUT_N])
{
    sk_keys_for(k, aid);
    SK_KEYS_FILL(SK_K_DRAW_PUT_EACH, k, keys);
}

/* draw_put.lua with its op alone */
static int draw_op(sk_redis *r, uint64_t aid, const char *op, int64_t *v, int nv)
{
    struct sk_keys k;
    const char *keys[SK_K_DRAW_PUT_N];
    draw_keys(&k, aid, keys);
    const char *args[] = {[SK_A_DRAW_PUT_OP] = op};
    return sk_stock_eval_ints(r, SK_SCRIPT_DRAW_PUT, SK_K_DRAW_PUT_N, keys, SK_A_DRAW_PUT_OP + 1,
                              args, v, nv);
}

static void state_of(const int64_t v[DRAW_REPLY], struct sk_draw_redis *st)
{
    *st = (struct sk_draw_redis){.rc = (int)v[0],
                                 .n = v[1],
                                 .wave = v[2],
                                 .from = v[3],
                                 .to = v[4],
                                 .box_start_ms = v[5],
                                 .box_end_ms = v[6]};
}

int sk_draw_check(sk_redis *r, uint64_t aid, int *rc_out, int64_t *now_ms, int64_t *reg_end_ms,
                  int64_t *registrants, int64_t *drawn)
{
    int64_t v[5];
    int rc = draw_op(r, aid, "c", v, 5);
    if (rc < 0) return rc;
    *rc_out = (int)v[0];
    *now_ms = v[1];
    *reg_end_ms = v[2];
    *registrants = v[3];
    *drawn = v[4];
    return 0;
}

int sk_draw_registrants(sk_redis *r, uint64_t aid, uint64_t **out, size_t *n)
{
    struct sk_keys k;
    sk_keys_for(&k, aid);
    *out = NULL;
    *n = 0;
    uint64_t *arr = NULL;
    size_t len = 0, cap = 0;
    char cursor[32] = "0";
    int rc = 0;
    do {
        redisReply *rep;
        if ((rc = sk_redis_cmd(r, &rep, "SSCAN %s %s COUNT 1000", k.reg, cursor)) < 0) break;
        if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
            rep->element[0]->type != REDIS_REPLY_STRING ||
            rep->element[1]->type != REDIS_REPLY_ARRAY) {
            freeReplyObject(rep);
            rc = sk_stock_proto(r, "SSCAN");
            break;
        }
        snprintf(cursor, sizeof cursor, "%.*s", (int)rep->element[0]->len, rep->element[0]->str);
        const redisReply *m = rep->element[1];
        for (size_t i = 0; i < m->elements && rc == 0; i++) {
            uint64_t u;
            if (m->element[i]->type != REDIS_REPLY_STRING || reply_u64(m->element[i], &u) < 0 ||
                u == 0)
                continue; /* not a user id: not a registrant */
            if (len == cap) {
                size_t nc = cap ? 2 * cap : 1024;
                uint64_t *na = realloc(arr, nc * sizeof *na);
                if (!na) {
                    rc = r->err = SK_ENOMEM;
                    break;
                }
                arr = na;
                cap = nc;
            }
            arr[len++] = u;
        }
        freeReplyObject(rep);
    } while (rc == 0 && strcmp(cursor, "0") != 0);
    if (rc < 0) {
        free(arr);
        return rc;
    }
    *out = arr;
    *n = len;
    return 0;
}

int sk_draw_put(sk_redis *r, uint64_t aid, const uint64_t *order, size_t n, int64_t drawn_ms,
                const char *seed_hex, const struct sk_draw_redis *wave, struct sk_draw_redis *st)
{
    struct sk_keys k;
    const char *keys[SK_K_DRAW_PUT_N];
    draw_keys(&k, aid, keys);
    /* the order, PUT_CHUNK places a call: op 'p', then A_DRAW_PLACE each */
    enum { PLACES = SK_A_DRAW_PUT_OP + 1 };
    const char **args = malloc((PLACES + SK_A_DRAW_PLACE_N * PUT_CHUNK) * sizeof *args);
    char(*num)[SK_A_DRAW_PLACE_N][24] = malloc(PUT_CHUNK * sizeof *num);
    int rc = args && num ? 0 : (r->err = SK_ENOMEM);
    for (size_t i = 0; rc == 0 && i < n; i += PUT_CHUNK) {
        size_t m = n - i < PUT_CHUNK ? n - i : PUT_CHUNK;
        args[SK_A_DRAW_PUT_OP] = "p";
        for (size_t j = 0; j < m; j++) {
            const char **a = args + PLACES + SK_A_DRAW_PLACE_N * j;
            snprintf(num[j][SK_A_DRAW_PLACE_PLACE], 24, "%zu", i + j + 1);
            snprintf(num[j][SK_A_DRAW_PLACE_USER], 24, "%" PRIu64, order[i + j]);
            for (int f = 0; f < SK_A_DRAW_PLACE_N; f++)
                a[f] = num[j][f];
        }
        int64_t v[2];
        if ((rc = sk_stock_eval_ints(r, SK_SCRIPT_DRAW_PUT, SK_K_DRAW_PUT_N, keys,
                                     (int)(PLACES + SK_A_DRAW_PLACE_N * m), args, v, 2)) == 0 &&
            v[0] != SK_RC_OK) {
            memset(st, 0, sizeof *st);
            st->rc = (int)v[0];
            free(args);
            free(num);
            return 0;
        }
    }
    free(args);
    free(num);
    if (rc < 0) return rc;
    /* the finish: A_DRAW_PUT, the wave only when the database recorded one */
    char a[SK_A_DRAW_PUT_N][24];
    const char *fa[SK_A_DRAW_PUT_N] = {[SK_A_DRAW_PUT_OP] = "f", [SK_A_DRAW_PUT_SEED] = seed_hex};
    snprintf(a[SK_A_DRAW_PUT_COUNT], sizeof *a, "%zu", n);
    snprintf(a[SK_A_DRAW_PUT_DRAWN_MS], sizeof *a, "%" PRId64, drawn_ms);
    fa[SK_A_DRAW_PUT_COUNT] = a[SK_A_DRAW_PUT_COUNT];
    fa[SK_A_DRAW_PUT_DRAWN_MS] = a[SK_A_DRAW_PUT_DRAWN_MS];
    int nargs = SK_A_DRAW_PUT_WAVE;
    if (wave) {
        int64_t w[SK_A_DRAW_WAVE_N];
        w[SK_A_DRAW_WAVE_WAVE] = wave->wave;
        w[SK_A_DRAW_WAVE_FROM] = wave->from;
        w[SK_A_DRAW_WAVE_TO] = wave->to;
        w[SK_A_DRAW_WAVE_BOX_START] = wave->box_start_ms;
        w[SK_A_DRAW_WAVE_BOX_END] = wave->box_end_ms;
        for (int i = 0; i < SK_A_DRAW_WAVE_N; i++) {
            snprintf(a[SK_A_DRAW_PUT_WAVE + i], sizeof *a, "%" PRId64, w[i]);
            fa[SK_A_DRAW_PUT_WAVE + i] = a[SK_A_DRAW_PUT_WAVE + i];
        }
        nargs = SK_A_DRAW_PUT_N;
    }
    int64_t v[DRAW_REPLY];
    if ((rc = sk_stock_eval_ints(r, SK_SCRIPT_DRAW_PUT, SK_K_DRAW_PUT_N, keys, nargs, fa, v,
                                 DRAW_REPLY)) < 0)
        return rc;
    state_of(v, st);
    return 0;
}

int sk_draw_read(sk_redis *r, uint64_t aid, uint64_t *out, size_t n)
{
    struct sk_keys k;
    sk_keys_for(&k, aid);
    memset(out, 0, n * sizeof *out);
    for (size_t from = 0; from < n; from += 1000) {
        redisReply *rep;
        /* the command formatter takes no %zu (hiredis's conversions) */
        int rc = sk_redis_cmd(r, &rep, "ZRANGE %s %llu %llu WITHSCORES", k.draw,
                              (unsigned long long)from, (unsigned long long)(from + 999));
        if (rc < 0) return rc;
        if (rep->type != REDIS_REPLY_ARRAY) {
            freeReplyObject(rep);
            return sk_stock_proto(r, "ZRANGE");
        }
        for (size_t i = 0; i + 1 < rep->elements; i += 2) {
            uint64_t u;
            int64_t place;
            if (reply_u64(rep->element[i], &u) < 0 ||
                sk_reply_i64(rep->element[i + 1], &place) < 0 || place < 1 || (size_t)place > n)
                continue;
            out[place - 1] = u;
        }
        size_t got = rep->elements / 2;
        freeReplyObject(rep);
        if (got < 1000) break;
    }
    return 0;
}

void sk_draw_state_format(const struct sk_draw_redis *st, char *out, size_t cap)
{
    if (!st || st->n <= 0) {
        if (cap) out[0] = 0;
        return;
    }
    snprintf(out, cap, "%" PRId64 ":%" PRId64 ":%" PRId64 ":%" PRId64 ":%" PRId64, st->wave,
             st->from, st->to, st->box_start_ms, st->box_end_ms);
}

int sk_draw_state_parse(const char *s, struct sk_draw_redis *st)
{
    memset(st, 0, sizeof *st);
    long long v[5];
    int used = 0;
    if (!s ||
        sscanf(s, "%lld:%lld:%lld:%lld:%lld%n", &v[0], &v[1], &v[2], &v[3], &v[4], &used) != 5 ||
        s[used] != 0)
        return SK_EINVAL;
    for (int i = 0; i < 5; i++)
        if (v[i] < 0) return SK_EINVAL;
    if (v[1] > v[2]) return SK_EINVAL;
    *st = (struct sk_draw_redis){.rc = SK_RC_OK,
                                 .wave = v[0],
                                 .from = v[1],
                                 .to = v[2],
                                 .box_start_ms = v[3],
                                 .box_end_ms = v[4]};
    return 0;
}
