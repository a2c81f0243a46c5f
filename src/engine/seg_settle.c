/* seg_settle.c - the settle walk without I/O (seg_settle.h). */
#include "engine/seg_settle.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/codes.h"
#include "core/error.h"

int sk_seg_xout_parse(const char *value, int *to, int64_t *units)
{
    return sscanf(value, "%d:%" SCNd64, to, units) == 2 ? 0 : SK_EINVAL;
}

void sk_seg_xfer_in_cmd(struct sk_seg_cmd *c, uint64_t aid, int to, const char *id, int64_t qty,
                        int recovering)
{
    memset(c, 0, sizeof *c);
    sk_keys_seg(&c->k, aid, to);
    snprintf(c->num[SK_A_XFER_IN_QTY], sizeof *c->num, "%" PRId64, qty);
    const char *keys[] = {SK_K_XFER_IN_EACH(SK_KEY_OF, &c->k)};
    memcpy(c->argv, keys, sizeof keys);
    const char **a = c->argv + SK_K_XFER_IN_N;
    a[SK_A_XFER_IN_ID] = id;
    a[SK_A_XFER_IN_QTY] = c->num[SK_A_XFER_IN_QTY];
    a[SK_A_XFER_IN_RECOVER] = "recover";
    c->script = SK_SCRIPT_XFER_IN;
    c->nkeys = SK_K_XFER_IN_N;
    /* the recovery's own call says so; the others stop before it */
    c->nargs = recovering ? SK_A_XFER_IN_N : SK_A_XFER_IN_RECOVER;
}

int sk_seg_xfer_in_read(const redisReply *rep, int *applied)
{
    if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements < 1 ||
        rep->element[0]->type != REDIS_REPLY_INTEGER ||
        (rep->elements > 1 && rep->element[1]->type != REDIS_REPLY_INTEGER))
        return SK_EPROTO;
    int64_t rc = rep->element[0]->integer;
    if (rc == SK_RC_RECOVERING) {
        *applied = -1;
        return 0;
    }
    if (rc != SK_RC_TRANSFERRED) return SK_ESTATE;
    *applied = rep->elements > 1 ? (int)rep->element[1]->integer : 0;
    return 0;
}

void sk_seg_settle_init(struct sk_seg_settle *s, uint64_t aid, int segments, int recovering)
{
    memset(s, 0, sizeof *s);
    s->aid = aid;
    s->segments = segments;
    s->recovering = recovering;
    s->step = segments > 0 ? SK_SETTLE_LIST : SK_SETTLE_DONE;
}

void sk_seg_settle_free(struct sk_seg_settle *s)
{
    free(s->x);
    s->x = NULL;
    s->n = s->i = 0;
}

static enum sk_seg_settle_step fail(struct sk_seg_settle *s, const char *what)
{
    snprintf(s->errstr, sizeof s->errstr, "unexpected reply to %s", what);
    return s->step = SK_SETTLE_FAILED;
}

/* The next entry of this segment worth applying, or the next segment. */
static enum sk_seg_settle_step next_entry(struct sk_seg_settle *s)
{
    for (; s->i < s->n; s->i++) {
        const struct sk_seg_xfer *x = &s->x[s->i];
        if (x->to >= 0 && x->to < s->segments && x->units >= 1) return s->step = SK_SETTLE_APPLY;
        /* left for an operator */
    }
    sk_seg_settle_free(s);
    if (++s->seg >= s->segments) return s->step = SK_SETTLE_DONE;
    return s->step = SK_SETTLE_LIST;
}

void sk_seg_settle_cmd(const struct sk_seg_settle *s, struct sk_seg_cmd *c)
{
    memset(c, 0, sizeof *c);
    c->script = SK_SEG_CMD_PLAIN;
    if (s->step == SK_SETTLE_LIST) {
        sk_keys_seg(&c->k, s->aid, s->seg);
        c->argv[0] = "HGETALL";
        c->argv[1] = c->k.xout;
        c->argc = 2;
    } else if (s->step == SK_SETTLE_APPLY) {
        const struct sk_seg_xfer *x = &s->x[s->i];
        sk_seg_xfer_in_cmd(c, s->aid, x->to, x->id, x->units, s->recovering);
    } else if (s->step == SK_SETTLE_FORGET) {
        sk_keys_seg(&c->k, s->aid, s->seg);
        c->argv[0] = "HDEL";
        c->argv[1] = c->k.xout;
        c->argv[2] = s->x[s->i].id;
        c->argc = 3;
    }
}

static enum sk_seg_settle_step listed(struct sk_seg_settle *s, const redisReply *rep)
{
    if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements % 2) return fail(s, "HGETALL xout");
    s->x = rep->elements ? malloc(rep->elements / 2 * sizeof *s->x) : NULL;
    if (rep->elements && !s->x) {
        snprintf(s->errstr, sizeof s->errstr, "out of memory");
        return s->step = SK_SETTLE_FAILED;
    }
    s->n = s->i = 0;
    for (size_t e = 0; e + 1 < rep->elements; e += 2) {
        const redisReply *id = rep->element[e], *v = rep->element[e + 1];
        struct sk_seg_xfer *x = &s->x[s->n];
        /* not ours to judge: left for an operator */
        if (id->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING ||
            id->len >= SK_XFER_ID_MAX || sk_seg_xout_parse(v->str, &x->to, &x->units) < 0)
            continue;
        memcpy(x->id, id->str, id->len);
        x->id[id->len] = 0;
        s->n++;
    }
    return next_entry(s);
}

static enum sk_seg_settle_step applied(struct sk_seg_settle *s, const redisReply *rep)
{
    int now;
    int rc = sk_seg_xfer_in_read(rep, &now);
    if (rc < 0) return fail(s, rc == SK_ESTATE ? "xfer_in (refused)" : "xfer_in");
    if (now < 0) { /* fenced receiver: its recovery settles it */
        s->i++;
        return next_entry(s);
    }
    if (now) s->units += s->x[s->i].units;
    return s->step = SK_SETTLE_FORGET;
}

enum sk_seg_settle_step sk_seg_settle_feed(struct sk_seg_settle *s, const redisReply *rep)
{
    switch (s->step) {
    case SK_SETTLE_LIST: return listed(s, rep);
    case SK_SETTLE_APPLY: return applied(s, rep);
    case SK_SETTLE_FORGET:
        if (!rep) return fail(s, "HDEL xout"); /* its answer decides nothing */
        s->i++;
        return next_entry(s);
    default: return s->step;
    }
}
