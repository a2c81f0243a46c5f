/* live_acts.c - the activities Redis holds (live_acts.h). */
#include "engine/live_acts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/vec.h"
#include "engine/keys.h"
#include "redis/reply.h"

static int by_id(const void *a, const void *b)
{
    uint64_t x = ((const struct sk_live_act *)a)->id, y = ((const struct sk_live_act *)b)->id;
    return x < y ? -1 : x > y;
}

static int proto(sk_redis *r, const char *what)
{
    snprintf(r->errstr, sizeof r->errstr, "unexpected reply to %s", what);
    return r->err = SK_EPROTO;
}

/* The ids of one master's activity meta keys, appended to *acts. */
static int scan_master(sk_redis *r, int k, struct sk_live_act **acts, size_t *n, size_t *cap)
{
    char cursor[32] = "0";
    do {
        const char *argv[] = {"SCAN", cursor, "MATCH", SK_KEYS_META_MATCH, "COUNT", "1000"};
        redisReply *rep;
        int rc = sk_redis_master_command(r, k, &rep, 6, argv, NULL);
        if (rc) return rc;
        if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
            rep->element[0]->type != REDIS_REPLY_STRING || rep->element[0]->len >= sizeof cursor ||
            rep->element[1]->type != REDIS_REPLY_ARRAY) {
            freeReplyObject(rep);
            return proto(r, "SCAN");
        }
        snprintf(cursor, sizeof cursor, "%s", rep->element[0]->str);
        const redisReply *keys = rep->element[1];
        for (size_t i = 0; i < keys->elements; i++) {
            uint64_t id;
            const redisReply *key = keys->element[i];
            if (key->type != REDIS_REPLY_STRING || !sk_keys_meta_id(key->str, key->len, &id))
                continue;
            if (SK_VEC_RESERVE(*acts, *cap, *n + 1, 64)) {
                freeReplyObject(rep);
                return r->err = SK_ENOMEM;
            }
            (*acts)[(*n)++] = (struct sk_live_act){.id = id};
        }
        freeReplyObject(rep);
    } while (strcmp(cursor, "0") != 0);
    return 0;
}

/* Each activity's owner, switch and segment count: one HMGET each,
 * pipelined. */
static int read_owners(sk_redis *r, struct sk_live_act *acts, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct sk_keys k;
        sk_keys_for(&k, acts[i].id);
        const char *argv[] = {"HMGET", k.meta, SK_M_LIVE_FIELDS};
        int rc = sk_redis_append(r, (int)(sizeof argv / sizeof *argv), argv, NULL);
        if (rc) return rc;
    }
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        redisReply *rep;
        int rc = sk_redis_read(r, &rep);
        if (rc) return rc;
        if (rep->type == REDIS_REPLY_ARRAY && rep->elements == SK_M_LIVE_N) {
            const redisReply *sid = rep->element[SK_M_LIVE_STORE_ID];
            if (sid->type == REDIS_REPLY_STRING && sid->len <= SK_STOCK_STORE_ID_LEN)
                memcpy(acts[i].store_id, sid->str, sid->len + 1);
            acts[i].open = sk_reply_i64_or(rep->element[SK_M_LIVE_OPEN], 0) == 1;
            acts[i].segments = (int)sk_reply_i64_or(rep->element[SK_M_LIVE_SEGMENTS], 1);
        } else {
            bad = 1;
        }
        freeReplyObject(rep);
    }
    return bad ? proto(r, "HMGET meta") : 0;
}

int sk_live_acts(sk_redis *r, struct sk_live_act **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    struct sk_live_act *acts = NULL;
    size_t got = 0, cap = 0;
    int rc = 0;
    for (int k = 0; rc == 0; k++) {
        rc = scan_master(r, k, &acts, &got, &cap);
        if (rc == SK_ENOTFOUND && k > 0) {
            rc = 0;
            break;
        }
    }
    if (rc == 0 && got > 1) {
        /* a slot that moved during the walk may be seen twice */
        qsort(acts, got, sizeof *acts, by_id);
        size_t w = 1;
        for (size_t i = 1; i < got; i++)
            if (acts[i].id != acts[w - 1].id) acts[w++] = acts[i];
        got = w;
    }
    if (rc == 0 && got) rc = read_owners(r, acts, got);
    if (rc) {
        free(acts);
        return rc;
    }
    *out = acts;
    *n = got;
    return 0;
}

const struct sk_live_act *sk_live_acts_find(const struct sk_live_act *acts, size_t n, uint64_t id)
{
    struct sk_live_act key = {.id = id};
    return n ? bsearch(&key, acts, n, sizeof *acts, by_id) : NULL;
}

int sk_live_act_owner(sk_redis *r, uint64_t id, char *out, size_t cap)
{
    if (cap) out[0] = 0;
    struct sk_keys k;
    sk_keys_for(&k, id);
    redisReply *rep;
    int rc = sk_redis_cmd(r, &rep, "HGET %s store_id", k.meta);
    if (rc) return rc;
    if (rep->type == REDIS_REPLY_STRING && rep->len < cap)
        memcpy(out, rep->str, rep->len + 1);
    else if (rep->type != REDIS_REPLY_NIL && rep->type != REDIS_REPLY_STRING)
        rc = proto(r, "HGET meta store_id");
    freeReplyObject(rep);
    return rc;
}

int sk_live_foreign(const char *owner, const char *mine)
{
    return owner && mine && owner[0] && mine[0] && strcmp(owner, mine) != 0;
}

const char *sk_live_fix(uint64_t id, int listed, const char *owner, char *buf, size_t cap)
{
    if (listed)
        snprintf(buf, cap,
                 "if the sale belongs to this database, remove the stray live state "
                 "(`seckill activity delete --id %llu --redis-only`, --force when it is open) "
                 "and preheat it again from "
                 "here (`seckill activity preheat --id %llu`)",
                 (unsigned long long)id, (unsigned long long)id);
    else
        snprintf(buf, cap,
                 "run the activity commands with the --db of the database that preheated it%s%s%s; "
                 "if that sale should not exist (or that database is gone), `seckill activity "
                 "delete --id %llu --redis-only` removes its live state (--force when it is open)",
                 owner && owner[0] ? " (store " : "", owner && owner[0] ? owner : "",
                 owner && owner[0] ? ")" : "", (unsigned long long)id);
    return buf;
}
