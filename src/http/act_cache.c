/* act_cache.c - the per-process activity table and its eviction
 * (act_cache.h). */
#include "http/act_cache.h"

#include <stdint.h>
#include <string.h>

#include "core/vec.h"
#include "http/app.h"

/* Nothing waits on the entry: it may go. */
static int act_idle(const struct sk_act_cache *c)
{
    return c->inflight == 0 && !c->rechecking;
}

/* Room for one more entry (confirmed or not): evicts an idle unconfirmed
 * entry, or for a confirmed newcomer the idle confirmed one used longest
 * ago. Unknown ids a client makes up are only ever unconfirmed, so they
 * push out each other, never an activity Redis vouched for. 0 or -1. */
static int act_room(struct sk_app *app, int confirmed)
{
    int full = app->n_acts >= SK_ACTS_MAX;
    if (!full && (confirmed || app->n_acts_unconfirmed < SK_ACTS_UNCONFIRMED_MAX)) return 0;
    size_t victim = SIZE_MAX;
    for (size_t i = 0; i < app->n_acts; i++) {
        const struct sk_act_cache *c = &app->acts[i];
        if (!act_idle(c)) continue;
        if (!c->confirmed) {
            victim = i;
            break;
        }
        if (confirmed && (victim == SIZE_MAX || c->used_ms < app->acts[victim].used_ms)) victim = i;
    }
    if (victim == SIZE_MAX) return -1;
    if (!app->acts[victim].confirmed) app->n_acts_unconfirmed--;
    app->acts[victim] = app->acts[--app->n_acts];
    return 0;
}

struct sk_act_cache *sk_app_act(struct sk_app *app, uint64_t id, int create)
{
    uint64_t now = h2o_now(app->ctx.loop);
    for (size_t i = 0; i < app->n_acts; i++) {
        struct sk_act_cache *c = &app->acts[i];
        if (c->id != id) continue;
        if (create == SK_ACT_KNOWN && !c->confirmed) {
            c->confirmed = 1;
            app->n_acts_unconfirmed--;
        }
        c->used_ms = (int64_t)now;
        return c;
    }
    if (create == SK_ACT_FIND) return NULL;
    int confirmed = create == SK_ACT_KNOWN;
    if (act_room(app, confirmed) < 0) return NULL;
    if (SK_VEC_RESERVE(app->acts, app->cap_acts, app->n_acts + 1, 16)) return NULL;
    struct sk_act_cache *c = &app->acts[app->n_acts++];
    memset(c, 0, sizeof *c);
    c->id = id;
    c->confirmed = confirmed;
    c->used_ms = (int64_t)now;
    if (!confirmed) app->n_acts_unconfirmed++;
    return c;
}
