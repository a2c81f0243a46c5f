/* draw_sync.c - the recorded draw written into Redis (draw_sync.h). */
#include "orders/draw_sync.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/codes.h"
#include "core/error.h"

int sk_draw_sync(sk_store *st, sk_redis *r, const struct sk_activity *a,
                 struct sk_draw_redis *after, char *err, size_t cap)
{
    memset(after, 0, sizeof *after);
    if (a->drawn_ms <= 0) return sk_einval(err, cap, "activity %" PRIu64 " is not drawn", a->id);
    struct sk_registration *reg = NULL;
    size_t n = 0;
    int rc = sk_store_registrations_list(st, a->id, &reg, &n);
    if (rc < 0) {
        snprintf(err, cap, "registrations: %s", sk_store_errstr(st));
        return rc;
    }
    if (a->draw_n < 0 || (size_t)a->draw_n > n) {
        free(reg);
        return sk_errf(err, cap, SK_ESTATE,
                       "the database records %" PRId64 " places for %zu registrants", a->draw_n, n);
    }
    /* the recorded places: place p -> order[p - 1] */
    uint64_t *order = calloc(n ? n : 1, sizeof *order);
    if (!order) {
        free(reg);
        return sk_errf(err, cap, SK_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++)
        if (reg[i].draw_place >= 1 && reg[i].draw_place <= a->draw_n)
            order[reg[i].draw_place - 1] = reg[i].user_id;
    free(reg);
    struct sk_draw_redis wave;
    const struct sk_draw_redis *wp =
        a->draw_state[0] && sk_draw_state_parse(a->draw_state, &wave) == 0 ? &wave : NULL;
    rc = sk_draw_put(r, a->id, order, (size_t)a->draw_n, a->drawn_ms, a->draw_seed, wp, after);
    free(order);
    if (rc < 0) {
        snprintf(err, cap, "redis: %s", r->errstr);
        return rc;
    }
    if (after->rc != SK_RC_OK) return 0;
    char state[SK_ACTIVITY_DRAW_STATE_MAX];
    sk_draw_state_format(after, state, sizeof state);
    if ((rc = sk_store_activity_set_fair(st, a->id, a->wr_control, state)) < 0) {
        snprintf(err, cap, "%s", sk_store_errstr(st));
        return rc;
    }
    return 0;
}
