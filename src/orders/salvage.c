/* salvage.c - the orders a partly vanished key set still holds, into the
 * database (salvage.h). */
#include "orders/salvage.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/num.h"
#include "core/vec.h"
#include "engine/order_id.h"
#include "orders/order_event.h"
#include "orders/reconcile_int.h"

/* Entries (stream) or fields (hashes) read per round trip, and orders per
 * persist transaction. */
#define PAGE 1000

struct salv {
    sk_store *st;
    sk_redis *r;
    const struct sk_keys *k;
    struct sk_salvage *out;
    char *err;
    size_t cap;
    struct sk_order *batch; /* orders waiting for their transaction */
    size_t n;
    /* the idem hash read back: order id -> Idempotency-Key, sorted */
    struct idem_of {
        char *oid, *key;
    } * idem;
    size_t nidem, idem_cap;
};

static int redis_err(struct salv *s, int rc, const char *what)
{
    snprintf(s->err, s->cap, "%s: redis %s: %s", s->k->label, what, s->r->errstr);
    return rc;
}

static int flush(struct salv *s)
{
    if (!s->n) return 0;
    struct sk_persist_result res;
    int rc = sk_store_orders_persist(s->st, s->batch, s->n, &res);
    if (rc < 0) {
        snprintf(s->err, s->cap, "%s: database: %s", s->k->label, sk_store_errstr(s->st));
        return rc;
    }
    s->out->inserted += (int64_t)res.inserted;
    s->out->conflicts += (int64_t)res.conflicts;
    s->n = 0;
    return 0;
}

static struct sk_order *slot(struct salv *s)
{
    return &s->batch[s->n];
}

/* One more order in the batch (a full batch goes to the database). */
static int add(struct salv *s)
{
    return ++s->n == PAGE ? flush(s) : 0;
}

/* ---- the stream --------------------------------------------------------- */

/* One XRANGE entry ([id, [field, value, ...]]) into the batch. */
static int stream_entry(struct salv *s, const redisReply *e, char *last, size_t lcap)
{
    if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
        e->element[0]->type != REDIS_REPLY_STRING || e->element[1]->type != REDIS_REPLY_ARRAY ||
        e->element[1]->elements % 2) {
        s->out->bad++;
        return 0;
    }
    const redisReply *id = e->element[0], *f = e->element[1];
    snprintf(last, lcap, "%.*s", (int)id->len, id->str);
    size_t nf = f->elements / 2;
    struct sk_event_field *fields = malloc((nf ? nf : 1) * sizeof *fields);
    struct sk_order *orders = malloc(SK_EVENT_ORDERS_MAX * sizeof *orders);
    int rc = fields && orders ? 0 : SK_ENOMEM;
    for (size_t i = 0; rc == 0 && i < nf; i++) {
        const redisReply *k = f->element[2 * i], *v = f->element[2 * i + 1];
        if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING) {
            nf = 0; /* not an order: parsed as one with no fields, which is poison */
            break;
        }
        fields[i] = (struct sk_event_field){k->str, k->len, v->str, v->len};
    }
    size_t no = 0;
    char why[160];
    if (rc == 0 && sk_order_event_parse(s->k->label, s->k->activity_id, id->str, id->len, fields,
                                        nf, orders, &no, why, sizeof why) < 0) {
        s->out->bad++;
        no = 0;
    }
    for (size_t i = 0; rc == 0 && i < no; i++) {
        *slot(s) = orders[i];
        s->out->stream_orders++;
        rc = add(s);
    }
    free(fields);
    free(orders);
    if (rc == SK_ENOMEM) snprintf(s->err, s->cap, "out of memory");
    return rc;
}

static int from_stream(struct salv *s)
{
    char start[64] = "-";
    for (;;) {
        redisReply *rep;
        int rc = sk_redis_cmd(s->r, &rep, "XRANGE %s %s + COUNT %d", s->k->orders, start, PAGE);
        if (rc < 0) return redis_err(s, rc, "XRANGE");
        if (rep->type != REDIS_REPLY_ARRAY) {
            freeReplyObject(rep);
            return sk_errf(s->err, s->cap, SK_EPROTO, "%s: redis XRANGE: unexpected reply",
                           s->k->label);
        }
        char last[48] = "";
        for (size_t i = 0; rc == 0 && i < rep->elements; i++)
            rc = stream_entry(s, rep->element[i], last, sizeof last);
        size_t got = rep->elements;
        freeReplyObject(rep);
        if (rc < 0) return rc;
        if (got < PAGE || !last[0]) return 0;
        snprintf(start, sizeof start, "(%s", last); /* after it (Redis 6.2) */
    }
}

/* ---- the hashes ---------------------------------------------------------- */

/* fn for every field of hash key: a failure of Redis (r->err) told here,
 * fn's own has its message on s->err already. */
static int each_field(struct salv *s, const char *key,
                      int (*fn)(void *arg, const redisReply *f, const redisReply *v))
{
    int rc = sk_reconcile_hscan(s->r, key, NULL, fn, s);
    return rc && s->r->err ? redis_err(s, rc, "HSCAN") : rc;
}

/* An idem record "user:key" -> "qty:order id": kept as order id -> key. */
static int idem_field(void *arg, const redisReply *f, const redisReply *v)
{
    struct salv *s = arg;
    if (f->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING) return 0;
    const char *kc = memchr(f->str, ':', f->len), *vc = memchr(v->str, ':', v->len);
    if (!kc || !vc) return 0;
    if (SK_VEC_RESERVE(s->idem, s->idem_cap, s->nidem + 1, 256)) return SK_ENOMEM;
    struct idem_of *e = &s->idem[s->nidem];
    e->oid = strndup(vc + 1, (size_t)(v->str + v->len - vc - 1));
    e->key = strndup(kc + 1, (size_t)(f->str + f->len - kc - 1));
    if (!e->oid || !e->key) {
        free(e->oid);
        free(e->key);
        return SK_ENOMEM;
    }
    s->nidem++;
    return 0;
}

static int idem_cmp(const void *a, const void *b)
{
    return strcmp(((const struct idem_of *)a)->oid, ((const struct idem_of *)b)->oid);
}

static const char *idem_key_of(const struct salv *s, const char *oid)
{
    struct idem_of want = {(char *)oid, NULL};
    const struct idem_of *e =
        s->nidem ? bsearch(&want, s->idem, s->nidem, sizeof *s->idem, idem_cmp) : NULL;
    return e ? e->key : "";
}

/* A ledger record "order id" -> "user:qty" (":released" appended once
 * given back: the database cancelled it first, so it holds it) into the
 * batch. */
static int ledger_field(void *arg, const redisReply *f, const redisReply *v)
{
    struct salv *s = arg;
    struct sk_oid o;
    if (f->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING) return 0;
    const char *c = memchr(v->str, ':', v->len);
    uint64_t user, qty;
    if (f->len >= SK_STORE_ORDER_ID_MAX || sk_oid_parse(f->str, f->len, &o) < 0 ||
        o.activity_id != s->k->activity_id || !c ||
        sk_num_u64_canonical(v->str, (size_t)(c - v->str), &user) < 0) {
        s->out->bad++;
        return 0;
    }
    const char *q = c + 1, *end = v->str + v->len, *c2 = memchr(q, ':', (size_t)(end - q));
    if (c2) return 0; /* released */
    if (sk_num_u64_canonical(q, (size_t)(end - q), &qty) < 0 || qty > INT64_MAX) {
        s->out->bad++;
        return 0;
    }
    struct sk_order *d = slot(s);
    memset(d, 0, sizeof *d);
    snprintf(d->order_id, sizeof d->order_id, "%.*s", (int)f->len, f->str);
    snprintf(d->stream_id, sizeof d->stream_id, "%" PRIu64 "-%" PRIu64, o.sid.ms, o.sid.seq);
    d->activity_id = o.activity_id;
    d->user_id = user;
    d->quantity = (int64_t)qty;
    d->status = SK_ORDER_CREATED;
    d->created_ms = (int64_t)o.sid.ms;
    snprintf(d->idem_key, sizeof d->idem_key, "%s", idem_key_of(s, d->order_id));
    s->out->ledger_orders++;
    return add(s);
}

int sk_salvage_key_set(sk_store *st, sk_redis *r, const struct sk_keys *k, struct sk_salvage *out,
                       char *err, size_t cap)
{
    struct salv s = {.st = st, .r = r, .k = k, .out = out, .err = err, .cap = cap};
    s.batch = malloc(PAGE * sizeof *s.batch);
    int rc = s.batch ? 0 : SK_ENOMEM;
    /* the stream first: its entries carry every field (the admission
     * number for the marks, the key); the ledger's records of the same
     * orders are then duplicates */
    if (rc == 0) rc = from_stream(&s);
    if (rc == 0) rc = flush(&s);
    if (rc == 0) rc = each_field(&s, k->idem, idem_field);
    if (rc == 0 && s.nidem) qsort(s.idem, s.nidem, sizeof *s.idem, idem_cmp);
    if (rc == 0) rc = each_field(&s, k->ledger, ledger_field);
    if (rc == 0) rc = flush(&s);
    if (rc == SK_ENOMEM) snprintf(err, cap, "%s: out of memory", k->label);
    for (size_t i = 0; i < s.nidem; i++) {
        free(s.idem[i].oid);
        free(s.idem[i].key);
    }
    free(s.idem);
    free(s.batch);
    return rc;
}
