/* purchase_idem.c - one HGET tells whether a keyed purchase on a sold-out
 * activity is a replay (purchase_idem.h). */
#include "http/purchase_idem.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/codes.h"
#include "engine/keys.h"
#include "http/purchase_batch.h"

struct idem_probe {
    struct sk_app *app;
    uint64_t aid;
    int seg;
    struct sk_pending *p;
};

static void on_idem_probe(void *data, redisReply *rep)
{
    struct idem_probe *pr = data;
    struct sk_app *app = pr->app;
    if (!rep || (rep->type != REDIS_REPLY_NIL && rep->type != REDIS_REPLY_STRING)) {
        sk_purchase_answer(app, pr->aid, pr->p, NULL, "redis is unreachable; try again");
    } else if (rep->type == REDIS_REPLY_NIL) {
        struct sk_admission ad = {.rc = SK_RC_SOLD_OUT};
        sk_metrics_soldout_fastpath(app->metrics);
        sk_purchase_answer(app, pr->aid, pr->p, &ad, NULL);
    } else {
        /* a replay: sent with this pass's batches */
        struct sk_batch *b = sk_batch_for(app, pr->aid, pr->seg);
        if (b)
            b->items[b->n++] = pr->p;
        else
            sk_purchase_answer(app, pr->aid, pr->p, NULL, "out of memory");
    }
    free(pr);
}

void sk_purchase_idem_probe(struct sk_app *app, uint64_t aid, int seg, struct sk_pending *p)
{
    struct idem_probe *pr = malloc(sizeof *pr);
    if (!pr) {
        sk_purchase_answer(app, aid, p, NULL, "out of memory");
        return;
    }
    *pr = (struct idem_probe){app, aid, seg, p};
    struct sk_keys k;
    sk_keys_seg(&k, aid, seg);
    char field[24 + SK_IDEM_MAX];
    snprintf(field, sizeof field, "%" PRIu64 ":%.*s", p->p.user_id, (int)p->p.idem_len, p->p.idem);
    const char *argv[] = {"HGET", k.idem, field};
    if (sk_aredis_command(app->redis, on_idem_probe, pr, 3, argv, NULL) < 0) {
        sk_purchase_answer(app, aid, p, NULL, "redis is unreachable; try again");
        free(pr);
    }
}
