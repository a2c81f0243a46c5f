/* store_webhooks.c - webhook endpoints per activity (store.h, migration
 * 13) on every driver: added with their cursor at the outbox's end,
 * listed, rotated, paused, removed with their cursor; and the replay that
 * sets a cursor back. Each change runs in one transaction, so a refused
 * one (no such activity, a name taken, too many) changes nothing. */
#include "store/store_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

void sk_store_webhook_key(char out[SK_STORE_WH_KEY_MAX], uint64_t aid, const char *name)
{
    snprintf(out, SK_STORE_WH_KEY_MAX, "%" PRIu64 "/%.32s", aid, name);
}

static int no_endpoint(sk_store *st, uint64_t aid, const char *name)
{
    return sk_store_set_err(st, SK_ENOTFOUND, "activity %" PRIu64 " has no webhook endpoint %.32s",
                            aid, name);
}

static int add_tx(sk_store *st, void *ctx)
{
    struct sk_store_webhook *w = ctx;
    struct sk_activity a;
    int rc =
        sk_q_one(st, Q_ACTIVITY_GET, SK_ARGS(SK_I(w->activity_id)), sk_store_read_activity, &a);
    if (rc == 0) return sk_store_no_activity(st, w->activity_id);
    if (rc < 0) return rc;
    int64_t n = 0;
    rc = sk_q_one(st, Q_WHE_COUNT, SK_ARGS(SK_I(w->activity_id)), sk_store_read_i64, &n);
    if (rc < 0) return rc;
    if (n >= SK_STORE_WH_PER_ACTIVITY)
        return sk_store_set_err(st, SK_ESTATE,
                                "activity %" PRIu64 " has %d webhook endpoints already (the most)",
                                w->activity_id, SK_STORE_WH_PER_ACTIVITY);
    rc = sk_q_run(st, Q_WHE_INSERT,
                  SK_ARGS(SK_I(w->activity_id), SK_T(w->name), SK_T(w->url), SK_T(w->events),
                          SK_T(w->secret), SK_I(w->paused), SK_I(w->created_ms),
                          SK_I(w->updated_ms)),
                  NULL);
    if (rc == SK_EEXIST)
        return sk_store_set_err(st, SK_EEXIST,
                                "activity %" PRIu64 " has a webhook endpoint named %s already",
                                w->activity_id, w->name);
    if (rc) return rc;
    char key[SK_STORE_WH_KEY_MAX];
    sk_store_webhook_key(key, w->activity_id, w->name);
    /* a cursor left by a remove that did not finish is not this one's */
    rc = sk_q_run(st, Q_WH_CURSOR_DELETE, SK_ARGS(SK_T(key)), NULL);
    if (rc == 0)
        rc = sk_q_run(st, Q_WH_CURSOR_AT_END, SK_ARGS(SK_T(key), SK_I(w->created_ms)), NULL);
    if (rc == 0)
        rc = sk_q_one(st, Q_WHE_GET, SK_ARGS(SK_I(w->activity_id), SK_T(w->name)),
                      sk_store_read_webhook, w);
    return rc < 0 ? rc : 0;
}

int sk_store_webhook_add(sk_store *st, struct sk_store_webhook *w, int64_t now_ms)
{
    if (sk_store_id_beyond_sql(w->activity_id)) return sk_store_no_activity(st, w->activity_id);
    w->prev_until_ms = 0;
    w->secret_prev[0] = 0;
    w->created_ms = w->updated_ms = now_ms;
    return sk_tx(st, add_tx, w);
}

int sk_store_webhook_list(sk_store *st, uint64_t aid, struct sk_store_webhook **out, size_t *n)
{
    if (aid)
        return sk_store_all(st, Q_WHE_LIST, SK_ARGS(SK_I(aid)), sk_store_read_webhook, sizeof **out,
                            (void **)out, n);
    return sk_store_all(st, Q_WHE_LIST_ALL, NULL, 0, sk_store_read_webhook, sizeof **out,
                        (void **)out, n);
}

int sk_store_webhook_get(sk_store *st, uint64_t aid, const char *name, struct sk_store_webhook *out)
{
    if (sk_store_id_beyond_sql(aid)) return no_endpoint(st, aid, name);
    int rc = sk_store_enter(st);
    if (rc == 0)
        rc = sk_q_one(st, Q_WHE_GET, SK_ARGS(SK_I(aid), SK_T(name)), sk_store_read_webhook, out);
    return rc == 0 ? no_endpoint(st, aid, name) : rc < 0 ? rc : 0;
}

/* One change of an endpoint, its existence checked under the transaction
 * (a server may count an update that sets the same values as no change). */
struct change {
    uint64_t aid;
    const char *name, *secret;
    int op; /* 0 remove, 1 rotate, 2 pause */
    int64_t a, now_ms;
};

static int change_tx(sk_store *st, void *ctx)
{
    struct change *c = ctx;
    struct sk_store_webhook w;
    int rc =
        sk_q_one(st, Q_WHE_GET, SK_ARGS(SK_I(c->aid), SK_T(c->name)), sk_store_read_webhook, &w);
    if (rc == 0) return no_endpoint(st, c->aid, c->name);
    if (rc < 0) return rc;
    if (c->op == 1)
        return sk_q_run(
            st, Q_WHE_ROTATE,
            SK_ARGS(SK_T(c->secret), SK_I(c->a), SK_I(c->now_ms), SK_I(c->aid), SK_T(c->name)),
            NULL);
    if (c->op == 2)
        return sk_q_run(st, Q_WHE_PAUSE,
                        SK_ARGS(SK_I(c->a), SK_I(c->now_ms), SK_I(c->aid), SK_T(c->name)), NULL);
    char key[SK_STORE_WH_KEY_MAX];
    sk_store_webhook_key(key, c->aid, c->name);
    rc = sk_q_run(st, Q_WHE_DELETE, SK_ARGS(SK_I(c->aid), SK_T(c->name)), NULL);
    return rc ? rc : sk_q_run(st, Q_WH_CURSOR_DELETE, SK_ARGS(SK_T(key)), NULL);
}

static int change(sk_store *st, struct change *c)
{
    if (sk_store_id_beyond_sql(c->aid)) return no_endpoint(st, c->aid, c->name);
    return sk_tx(st, change_tx, c);
}

int sk_store_webhook_remove(sk_store *st, uint64_t aid, const char *name)
{
    struct change c = {.aid = aid, .name = name, .op = 0};
    return change(st, &c);
}

int sk_store_webhook_rotate(sk_store *st, uint64_t aid, const char *name, const char *secret,
                            int64_t prev_until_ms, int64_t now_ms)
{
    struct change c = {
        .aid = aid, .name = name, .secret = secret, .op = 1, .a = prev_until_ms, .now_ms = now_ms};
    return change(st, &c);
}

int sk_store_webhook_pause(sk_store *st, uint64_t aid, const char *name, int paused, int64_t now_ms)
{
    struct change c = {.aid = aid, .name = name, .op = 2, .a = paused != 0, .now_ms = now_ms};
    return change(st, &c);
}

struct rewind {
    const char *endpoint;
    int64_t since_ms, now_ms, *row, *events;
};

static int rewind_tx(sk_store *st, void *ctx)
{
    struct rewind *r = ctx;
    int64_t cur[2];
    int rc = sk_q_one(st, Q_WH_CURSOR_GET, SK_ARGS(SK_T(r->endpoint)), sk_store_read_i64_pair, cur);
    if (rc == 0)
        return sk_store_set_err(st, SK_ENOTFOUND, "no webhook endpoint %.64s has a cursor",
                                r->endpoint);
    if (rc < 0) return rc;
    int64_t to = -1;
    rc = sk_q_one(st, Q_WH_REPLAY_FROM, SK_ARGS(SK_I(r->since_ms)), sk_store_read_i64, &to);
    if (rc < 0) return rc;
    *r->row = cur[0];
    if (to < 0 || to >= cur[0]) return 0; /* nothing delivered since then */
    rc = sk_q_run(st, Q_WH_CURSOR_REWIND,
                  SK_ARGS(SK_I(to), SK_I(r->now_ms), SK_T(r->endpoint), SK_I(to)), NULL);
    if (rc == 0)
        rc = sk_q_one(st, Q_WH_EVENTS_AFTER, SK_ARGS(SK_I(to), SK_I(cur[0])), sk_store_read_i64,
                      r->events);
    *r->row = to;
    return rc < 0 ? rc : 0;
}

int sk_store_webhook_rewind(sk_store *st, const char *endpoint, int64_t since_ms, int64_t now_ms,
                            int64_t *row, int64_t *events)
{
    *row = 0;
    *events = 0;
    struct rewind r = {endpoint, since_ms, now_ms, row, events};
    return sk_tx(st, rewind_tx, &r);
}

int sk_store_webhook_cursor_find(sk_store *st, const char *endpoint, int64_t *row, int64_t *epoch)
{
    int64_t got[2] = {0, 0};
    int rc = sk_store_enter(st);
    if (rc == 0)
        rc = sk_q_one(st, Q_WH_CURSOR_GET, SK_ARGS(SK_T(endpoint)), sk_store_read_i64_pair, got);
    if (rc == 0)
        return sk_store_set_err(st, SK_ENOTFOUND, "no webhook endpoint %.64s has a cursor",
                                endpoint);
    *row = got[0];
    *epoch = got[1];
    return rc < 0 ? rc : 0;
}

int sk_store_webhooks_drop(sk_store *st, uint64_t aid)
{
    struct sk_store_webhook *w;
    size_t n;
    int rc = sk_q_all(st, Q_WHE_LIST, SK_ARGS(SK_I(aid)), sk_store_read_webhook, sizeof *w,
                      (void **)&w, &n);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        char key[SK_STORE_WH_KEY_MAX];
        sk_store_webhook_key(key, aid, w[i].name);
        rc = sk_q_run(st, Q_WHE_DELETE, SK_ARGS(SK_I(aid), SK_T(w[i].name)), NULL);
        if (rc == 0) rc = sk_q_run(st, Q_WH_CURSOR_DELETE, SK_ARGS(SK_T(key)), NULL);
    }
    free(w);
    return rc;
}
