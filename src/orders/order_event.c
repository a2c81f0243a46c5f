/* order_event.c - an order event into its orders (order_event.h). */
#include "orders/order_event.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/num.h"
#include "redis/stream_id.h"

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

/* 1 when [s, s+len) is a canonical decimal: "0" or no leading zero. */
static int canonical(const char *s, size_t len)
{
    if (len == 0 || (s[0] == '0' && len > 1)) return 0;
    for (size_t i = 0; i < len; i++)
        if (s[i] < '0' || s[i] > '9') return 0;
    return 1;
}

/* Stream entry id "<ms>-<seq>" as Redis writes it (canonical decimals, so
 * that the order ids made of it parse back: engine/order_id.h) -> ms, a
 * time the store accepts. */
static int parse_stream_id(const char *id, size_t len, int64_t *ms)
{
    struct sk_sid sid;
    const char *dash = memchr(id, '-', len);
    if (!dash || !canonical(id, (size_t)(dash - id)) ||
        !canonical(dash + 1, (size_t)(id + len - dash - 1)))
        return SK_EINVAL;
    if (sk_sid_parse(id, len, &sid) || sid.ms > (uint64_t)SK_TIME_MAX_MS) return SK_EINVAL;
    *ms = (int64_t)sid.ms;
    return 0;
}

/* The next token of a space-separated list [*p, end): its bytes in
 * [*tok, *tok + *len), *p moved past it and its separator. 0, or SK_EINVAL
 * when the list ends or two separators meet. */
static int next_token(const char **p, const char *end, const char **tok, size_t *len)
{
    if (*p >= end) return SK_EINVAL;
    const char *sp = memchr(*p, ' ', (size_t)(end - *p));
    const char *te = sp ? sp : end;
    if (te == *p || (sp && sp + 1 == end)) return SK_EINVAL;
    *tok = *p;
    *len = (size_t)(te - *p);
    *p = sp ? sp + 1 : end;
    return 0;
}

/* An order's token of field [*p, end): the next of the list when the
 * entry holds several orders, the whole field when it holds one. */
static int order_token(int listed, const char **p, const char *end, const char **tok, size_t *len)
{
    if (listed) return next_token(p, end, tok, len);
    *tok = *p;
    *len = (size_t)(end - *p);
    *p = end;
    return 0;
}

/* 1 when [s, s+len) may be an Idempotency-Key: visible ASCII, not too long. */
static int idem_ok(const char *s, size_t len, size_t cap)
{
    if (len < 1 || len >= cap) return 0;
    for (size_t i = 0; i < len; i++)
        if (s[i] < 0x21 || s[i] > 0x7e) return 0;
    return 1;
}

/* The fields of an entry written by the admission script. */
enum { F_AID, F_UID, F_QTY, F_N, F_B, F_K, F_C, F_COUNT };

#define BAD(...)                                                                                   \
    do {                                                                                           \
        snprintf(why, whycap, __VA_ARGS__);                                                        \
        return SK_EINVAL;                                                                          \
    } while (0)

int sk_order_event_parse(const char *label, uint64_t aid, const char *id, size_t idlen,
                         const struct sk_event_field *f, size_t nf, struct sk_order *out, size_t *n,
                         char *why, size_t whycap)
{
    const struct sk_event_field *val[F_COUNT] = {NULL};
    static const char *const names[F_COUNT] = {"aid", "uid", "qty", "n", "b", "k", "c"};
    char q[160];
    *n = 0;
    for (size_t i = 0; i < nf; i++) {
        for (int j = 0; j < F_COUNT; j++) {
            size_t nl = strlen(names[j]);
            if (f[i].nlen != nl || memcmp(f[i].name, names[j], nl) != 0) continue;
            if (val[j]) BAD("field %s repeated", names[j]);
            val[j] = &f[i];
        }
    }
    for (int j = F_AID; j <= F_QTY; j++)
        if (!val[j]) BAD("missing field %s", names[j]);
    uint64_t eaid, count = 1;
    int64_t created_ms;
    if (sk_num_u64_canonical(val[F_AID]->val, val[F_AID]->vlen, &eaid) != 0 || eaid != aid) {
        quote(q, sizeof q, val[F_AID]->val, val[F_AID]->vlen);
        BAD("field aid '%s' is not activity %" PRIu64, q, aid);
    }
    if (val[F_C] && (sk_num_u64_canonical(val[F_C]->val, val[F_C]->vlen, &count) != 0 ||
                     count > SK_EVENT_ORDERS_MAX)) {
        quote(q, sizeof q, val[F_C]->val, val[F_C]->vlen);
        BAD("field c '%s' is not an order count", q);
    }
    if (idlen >= SK_STORE_STREAM_ID_MAX || parse_stream_id(id, idlen, &created_ms))
        BAD("entry id is not a stream id");
    const char *b = val[F_B] ? val[F_B]->val : NULL;
    size_t bl = val[F_B] ? val[F_B]->vlen : 0;
    if (b && !sk_oid_branch_ok(b, bl)) {
        quote(q, sizeof q, b, bl);
        BAD("field b '%s' is not a branch", q);
    }
    if (val[F_C] && !b) BAD("an entry of several orders without field b");
    uint64_t n0 = 0;
    int has_n = val[F_N] && sk_num_u64_canonical(val[F_N]->val, val[F_N]->vlen, &n0) == 0 &&
                n0 <= (uint64_t)SK_ACTIVITY_STOCK_MAX * 1000;
    const char *up = val[F_UID]->val, *uend = up + val[F_UID]->vlen;
    const char *qp = val[F_QTY]->val, *qend = qp + val[F_QTY]->vlen;
    int listed = val[F_C] != NULL;
    for (uint64_t i = 0; i < count; i++) {
        struct sk_order *o = &out[i];
        memset(o, 0, sizeof *o);
        const char *tok;
        size_t tl;
        uint64_t uid, qty;
        if (order_token(listed, &up, uend, &tok, &tl))
            BAD("field uid holds fewer than %" PRIu64 " users", count);
        if (sk_num_u64_canonical(tok, tl, &uid) != 0) {
            quote(q, sizeof q, tok, tl);
            BAD("field uid '%s' is not a user id", q);
        }
        if (order_token(listed, &qp, qend, &tok, &tl))
            BAD("field qty holds fewer than %" PRIu64 " quantities", count);
        if (sk_num_u64_canonical(tok, tl, &qty) != 0 || qty > (uint64_t)SK_ACTIVITY_STOCK_MAX) {
            quote(q, sizeof q, tok, tl);
            BAD("field qty '%s' is not a quantity", q);
        }
        /* "<label>-<stream id>-<branch>[-<i>]": the label names the segment
         * ("<ID>.<seg>"), so the order id alone finds the order's key set
         * (sk_keys_for_order). */
        if (sk_oid_format(o->order_id, sizeof o->order_id, label, id, idlen, b, bl,
                          listed ? (int)i : SK_OID_NO_INDEX) < 0)
            BAD("order id does not fit");
        memcpy(o->stream_id, id, idlen);
        o->stream_id[idlen] = 0;
        o->activity_id = aid;
        o->user_id = uid;
        o->quantity = (int64_t)qty;
        o->created_ms = created_ms;
        o->status = SK_ORDER_CREATED;
        if (has_n) o->adm_seq = (int64_t)(n0 + i);
    }
    if (up != uend || qp != qend)
        BAD("fields uid and qty hold more than %" PRIu64 " orders", count);
    if (val[F_K] && !listed) {
        if (idem_ok(val[F_K]->val, val[F_K]->vlen, sizeof out[0].idem_key))
            memcpy(out[0].idem_key, val[F_K]->val, val[F_K]->vlen);
    } else if (val[F_K]) {
        /* "<i>:<key>" per keyed order; a malformed token loses its key only */
        const char *kp = val[F_K]->val, *kend = kp + val[F_K]->vlen, *tok;
        size_t tl;
        while (next_token(&kp, kend, &tok, &tl) == 0) {
            const char *colon = memchr(tok, ':', tl);
            if (!colon) continue;
            /* the order's place: "0", or a canonical decimal below count */
            size_t il = (size_t)(colon - tok);
            uint64_t at = 0;
            if (!(il == 1 && tok[0] == '0') && sk_num_u64_canonical(tok, il, &at) != 0) continue;
            if (at >= count) continue;
            size_t kl = tl - (size_t)(colon + 1 - tok);
            if (idem_ok(colon + 1, kl, sizeof out[at].idem_key))
                memcpy(out[at].idem_key, colon + 1, kl);
        }
    }
    *n = (size_t)count;
    return 0;
}
