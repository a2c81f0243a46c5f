/* store_registration.c - pre-registration and the draw in the store
 * (store.h, docs/fairness.md), on every driver (store_int.h): who
 * registered for a sale, the draw's order once made, and what changes of
 * the fairness definition while a sale runs (the waiting room's
 * emergency controls, the draw's wave). */
#include "store/store_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

struct reg_rows {
    uint64_t id;
    const uint64_t *users;
    int64_t at_ms;
};

static void bind_reg(void *ctx, size_t row, struct sk_val *v)
{
    const struct reg_rows *r = ctx;
    v[0] = SK_I(r->id);
    v[1] = SK_I((int64_t)r->users[row]); /* same bits, see store.h */
    v[2] = SK_I(r->at_ms);
}

struct reg_add {
    struct reg_rows rows;
    size_t n;
    int64_t added;
};

static int add_tx(sk_store *st, void *ctx)
{
    struct reg_add *a = ctx;
    return sk_q_rows(st, Q_REG_ADD, a->n, bind_reg, NULL, &a->rows, &a->added);
}

int sk_store_registrations_add(sk_store *st, uint64_t id, const uint64_t *users, size_t n,
                               int64_t at_ms, size_t *added)
{
    if (added) *added = 0;
    if (id < 1 || id > SK_ACTIVITY_ID_MAX)
        return sk_store_set_err(st, SK_EINVAL, "activity id %" PRIu64 " out of range", id);
    int rc = sk_store_enter(st);
    if (rc || n == 0) return rc;
    struct reg_add a = {{id, users, at_ms}, n, 0};
    rc = sk_tx(st, add_tx, &a);
    if (rc == 0 && added) *added = a.added > 0 ? (size_t)a.added : 0;
    return rc;
}

int sk_store_registrations_count(sk_store *st, uint64_t id, int64_t *count)
{
    *count = 0;
    if (sk_store_id_beyond_sql(id)) {
        st->errstr[0] = 0;
        return 0;
    }
    int rc = sk_store_enter(st);
    if (rc == 0) rc = sk_q_one(st, Q_REG_COUNT, SK_ARGS(SK_I(id)), sk_store_read_i64, count);
    return rc < 0 ? rc : 0;
}

static int cmp_reg(const void *a, const void *b)
{
    uint64_t x = ((const struct sk_registration *)a)->user_id,
             y = ((const struct sk_registration *)b)->user_id;
    return (x > y) - (x < y);
}

int sk_store_registrations_list(sk_store *st, uint64_t id, struct sk_registration **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (sk_store_id_beyond_sql(id)) {
        st->errstr[0] = 0;
        return 0;
    }
    int rc = sk_store_all(st, Q_REG_LIST, SK_ARGS(SK_I(id)), sk_store_read_registration,
                          sizeof **out, (void **)out, n);
    /* by user id as unsigned: ids above 2^63 read back negative in SQL */
    if (rc == 0 && *n) qsort(*out, *n, sizeof **out, cmp_reg);
    return rc;
}

struct draw_rec {
    uint64_t id;
    const uint64_t *order;
    size_t n;
    int64_t drawn_ms;
    int64_t marked; /* the activity row matched (0: absent or drawn before) */
};

static int draw_tx(sk_store *st, void *ctx)
{
    struct draw_rec *d = ctx;
    /* first the activity, once: a second draw matches no row */
    int rc =
        sk_q_run(st, Q_DRAW_MARK, SK_ARGS(SK_I(d->drawn_ms), SK_I(d->n), SK_I(d->id)), &d->marked);
    if (rc || d->marked != 1) return rc ? rc : SK_ESTATE;
    /* then every registrant's place: each must match one registration */
    for (size_t i = 0; rc == 0 && i < d->n; i++) {
        int64_t hit = 0;
        rc = sk_q_run(st, Q_DRAW_PLACE,
                      SK_ARGS(SK_I(i + 1), SK_I(d->id), SK_I((int64_t)d->order[i])), &hit);
        if (rc == 0 && hit != 1)
            rc = sk_store_set_err(st, SK_ESTATE,
                                  "activity %" PRIu64 ": user %" PRIu64 " of the draw's order"
                                  " did not register",
                                  d->id, d->order[i]);
    }
    return rc;
}

int sk_store_draw_record(sk_store *st, uint64_t id, const uint64_t *order, size_t n,
                         int64_t drawn_ms)
{
    if (sk_store_id_beyond_sql(id)) return sk_store_no_activity(st, id);
    struct draw_rec d = {id, order, n, drawn_ms > 0 ? drawn_ms : 1, 0};
    int rc = sk_tx(st, draw_tx, &d);
    if (rc != SK_ESTATE || d.marked == 1) return rc;
    /* the activity row did not match: absent, or drawn before */
    struct sk_activity a;
    rc = sk_store_activity_get(st, id, &a);
    return rc ? rc : sk_store_set_err(st, SK_EEXIST, "activity %" PRIu64 " was drawn before", id);
}

int sk_store_activity_set_fair(sk_store *st, uint64_t id, int64_t wr_control,
                               const char *draw_state)
{
    if (wr_control < 0 || wr_control > (SK_WR_PAUSE | SK_WR_QUEUE_ALL | SK_WR_NO_JOINS) ||
        !draw_state || strlen(draw_state) >= SK_ACTIVITY_DRAW_STATE_MAX ||
        draw_state[strspn(draw_state, "0123456789:")] != 0)
        return sk_store_set_err(st, SK_EINVAL,
                                "activity %" PRIu64 ": controls or draw state out of shape", id);
    if (sk_store_id_beyond_sql(id)) return sk_store_no_activity(st, id);
    int64_t hit = 0;
    int rc = sk_store_enter(st);
    if (rc == 0)
        rc = sk_q_run(st, Q_ACTIVITY_SET_FAIR,
                      SK_ARGS(SK_I(wr_control), SK_T(draw_state), SK_I(id)), &hit);
    return rc ? rc : hit ? 0 : sk_store_no_activity(st, id);
}
