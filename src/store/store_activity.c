/* store_activity.c - the store's activity definitions, audit rows and the
 * rollback guard's marks (store.h), on every driver (store_int.h): the
 * checks every call makes before the database, the statements of
 * store_sql.c it runs, and what each answer means. */
#include "store/store_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "engine/stock.h"

int sk_store_schema_version(sk_store *st, int *version)
{
    int rc = sk_store_enter(st);
    return rc ? rc : sk_store_read_version(st, version);
}

_Static_assert(SK_STORE_IDENTITY_LEN == SK_STOCK_STORE_ID_LEN, "one identity length");

int sk_store_identity(sk_store *st, char *buf, size_t cap)
{
    if (!buf || cap < SK_STORE_IDENTITY_MAX) return SK_EINVAL;
    if (!st->identity[0]) {
        char id[SK_STORE_IDENTITY_MAX + 8] = "";
        int rc = sk_store_enter(st);
        if (rc == 0) rc = sk_q_one(st, Q_IDENTITY, NULL, 0, sk_store_read_identity, id);
        if (rc == 0) rc = sk_store_fail(st, SK_EDB, sk_sql_what(Q_IDENTITY), "no store identity");
        if (rc < 0) return rc;
        if (strlen(id) != SK_STORE_IDENTITY_LEN || id[strspn(id, "0123456789abcdef")])
            return sk_store_fail(st, SK_EDB, sk_sql_what(Q_IDENTITY),
                                 "malformed store identity '%.32s'", id);
        memcpy(st->identity, id, sizeof st->identity);
    }
    memcpy(buf, st->identity, SK_STORE_IDENTITY_MAX);
    return 0;
}

/* The insert, refused while orders of the id are still in the database:
 * a sale deleted keeps its paid and cancelled orders, and a new sale under
 * its id would meet them (its recovery would replay them into it, its
 * counts and reconcile would include them). One transaction, so no order
 * row of the id lands between the count and the insert. */
static int insert_tx(sk_store *st, void *arg)
{
    const struct sk_activity *v = arg;
    int64_t orders = 0;
    int rc = sk_q_one(st, Q_ACTIVITY_ORDERS, SK_ARGS(SK_I(v->id)), sk_store_read_i64, &orders);
    if (rc < 0) return rc;
    if (orders > 0)
        return sk_store_set_err(st, SK_EEXIST,
                                "activity %" PRIu64 " was deleted but its %" PRId64
                                " orders are still in the database; a sale under this id would "
                                "meet them: choose another id",
                                v->id, orders);
    struct sk_val val[SK_STORE_ACTIVITY_NCOLS];
    sk_store_activity_values(v, val);
    rc = sk_q_run(st, Q_ACTIVITY_INSERT, val, SK_STORE_ACTIVITY_NCOLS, NULL);
    if (rc == SK_EEXIST)
        sk_store_set_err(st, SK_EEXIST, "activity %" PRIu64 " already exists", v->id);
    return rc;
}

int sk_store_activity_insert(sk_store *st, const struct sk_activity *a)
{
    struct sk_activity v = *a;
    if (!v.state[0]) snprintf(v.state, sizeof v.state, "created");
    char why[256];
    if (sk_activity_validate(&v, why, sizeof why) < 0)
        return sk_store_set_err(st, SK_EINVAL, "activity %" PRIu64 ": %s", v.id, why);
    return sk_tx(st, insert_tx, &v);
}

int sk_store_activity_get(sk_store *st, uint64_t id, struct sk_activity *out)
{
    if (sk_store_id_beyond_sql(id)) return sk_store_no_activity(st, id);
    int rc = sk_store_enter(st);
    if (rc == 0) rc = sk_q_one(st, Q_ACTIVITY_GET, SK_ARGS(SK_I(id)), sk_store_read_activity, out);
    return rc == 0 ? sk_store_no_activity(st, id) : rc < 0 ? rc : 0;
}

int sk_store_activity_list(sk_store *st, struct sk_activity **out, size_t *n)
{
    return sk_store_all(st, Q_ACTIVITY_LIST, NULL, 0, sk_store_read_activity, sizeof **out,
                        (void **)out, n);
}

int sk_store_activity_ids(sk_store *st, uint64_t **out, size_t *n)
{
    return sk_store_all(st, Q_ACTIVITY_IDS, NULL, 0, sk_store_read_id, sizeof **out, (void **)out,
                        n);
}

/* Runs a one-row change of activity id (statement q, parameters v[0..n));
 * SK_ENOTFOUND when it matched no row. */
static int change_one(sk_store *st, uint64_t id, int q, const struct sk_val *v, int n)
{
    if (sk_store_id_beyond_sql(id)) return sk_store_no_activity(st, id);
    int64_t hit = 0;
    int rc = sk_store_enter(st);
    if (rc == 0) rc = sk_q_run(st, q, v, n, &hit);
    return rc ? rc : hit ? 0 : sk_store_no_activity(st, id);
}

struct state_set {
    uint64_t id;
    const char *state;
};

static void read_state(sk_store *st, sk_stmt *s, void *dst)
{
    st->drv->col_text(s, 0, dst, sizeof((struct sk_activity *)0)->state);
}

/* The state set, and its event (activity.opened / closed) when it moved,
 * in one transaction. */
static int state_tx(sk_store *st, void *arg)
{
    const struct state_set *c = arg;
    char before[sizeof((struct sk_activity *)0)->state];
    int rc = sk_q_one(st, Q_ACTIVITY_STATE_LOCK, SK_ARGS(SK_I(c->id)), read_state, before);
    if (rc <= 0) return rc ? rc : sk_store_no_activity(st, c->id);
    rc = sk_q_run(st, Q_ACTIVITY_SET_STATE, SK_ARGS(SK_T(c->state), SK_I(c->id)), NULL);
    return rc ? rc : sk_store_event_state(st, c->id, before, c->state, sk_wall_ms());
}

int sk_store_activity_set_state(sk_store *st, uint64_t id, const char *state)
{
    if (!state || !sk_activity_state_valid(state))
        return sk_store_set_err(st, SK_EINVAL, "invalid activity state '%s'",
                                state ? state : "(null)");
    if (sk_store_id_beyond_sql(id)) return sk_store_no_activity(st, id);
    struct state_set c = {id, state};
    return sk_tx(st, state_tx, &c);
}

int sk_store_activity_delete(sk_store *st, uint64_t id)
{
    int rc = change_one(st, id, Q_ACTIVITY_DELETE, SK_ARGS(SK_I(id)));
    /* a re-created id starts a new history: its old watermark would read
     * as a Redis that went back in time */
    if (rc == 0) rc = sk_q_run(st, Q_MARKS_DELETE, SK_ARGS(SK_I(id)), NULL);
    /* and its registrations are not the new sale's */
    if (rc == 0) rc = sk_q_run(st, Q_REG_DELETE, SK_ARGS(SK_I(id)), NULL);
    /* nor its webhook endpoints, with their cursors */
    return rc ? rc : sk_store_webhooks_drop(st, id);
}

int sk_store_activity_set_db_stock(sk_store *st, uint64_t id, int64_t stock)
{
    if (stock < 0) return sk_store_set_err(st, SK_EINVAL, "DB stock %" PRId64 " < 0", stock);
    int rc = change_one(st, id, Q_ACTIVITY_SET_STOCK, SK_ARGS(SK_I(stock), SK_I(id)));
    if (rc == SK_EINVAL) /* the CHECK stock <= stock_initial */
        sk_store_set_err(st, rc,
                         "DB stock %" PRId64 " is above the initial stock of activity %" PRIu64,
                         stock, id);
    return rc;
}

int sk_store_activity_set_pass_rate(sk_store *st, uint64_t id, int64_t rate)
{
    if (rate < 1 || rate > SK_ACTIVITY_PASS_RATE_MAX)
        return sk_store_set_err(st, SK_EINVAL, "passes per second %" PRId64 " out of range", rate);
    /* an activity without a waiting room matches no row: not found */
    return change_one(st, id, Q_ACTIVITY_SET_PASS_RATE, SK_ARGS(SK_I(rate), SK_I(id)));
}

/* ---- audit rows and marks ---- */

int sk_store_audit_row(sk_store *st, int64_t at_ms, uint64_t activity_id, const char *kind,
                       const char *detail)
{
    /* cut on a character boundary: the servers refuse broken UTF-8 */
    char d[SK_STORE_AUDIT_DETAIL_MAX];
    size_t dl = strnlen(detail, SK_STORE_AUDIT_DETAIL_MAX - 1);
    if (dl == SK_STORE_AUDIT_DETAIL_MAX - 1)
        while (dl > 0 && ((unsigned char)detail[dl] & 0xC0) == 0x80)
            dl--;
    memcpy(d, detail, dl);
    d[dl] = 0;
    return sk_q_run(st, Q_AUDIT_INSERT,
                    SK_ARGS(SK_I(at_ms), SK_I(activity_id), SK_T(kind), SK_T(d)), NULL);
}

int sk_store_audit_add(sk_store *st, int64_t at_ms, uint64_t activity_id, const char *kind,
                       const char *detail)
{
    if (!kind || !*kind || strlen(kind) >= SK_STORE_AUDIT_KIND_MAX)
        return sk_store_set_err(st, SK_EINVAL, "audit kind empty or too long");
    int rc = sk_store_enter(st);
    return rc ? rc : sk_store_audit_row(st, at_ms, activity_id, kind, detail ? detail : "");
}

/* The rows of q (audit rows, marks) of activity_id (0: every activity) in
 * a new array of size-byte elements. */
static int activity_rows(sk_store *st, int q, uint64_t activity_id, sk_store_reader *read,
                         size_t size, void **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (sk_store_id_beyond_sql(activity_id)) {
        st->errstr[0] = 0;
        return 0;
    }
    int64_t lo = (int64_t)activity_id, hi = activity_id ? lo : INT64_MAX;
    return sk_store_all(st, q, SK_ARGS(SK_I(lo), SK_I(hi)), read, size, out, n);
}

int sk_store_audit_list(sk_store *st, uint64_t activity_id, struct sk_audit **out, size_t *n)
{
    return activity_rows(st, Q_AUDIT_LIST, activity_id, sk_store_read_audit, sizeof **out,
                         (void **)out, n);
}

int sk_store_marks_list(sk_store *st, uint64_t activity_id, struct sk_mark **out, size_t *n)
{
    return activity_rows(st, Q_MARKS_LIST, activity_id, sk_store_read_mark, sizeof **out,
                         (void **)out, n);
}
