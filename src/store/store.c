/* store.c - picks the store backend from the spec and dispatches every
 * store.h call through the backend's table (store_int.h), doing around the
 * call what is the same for every backend (argument checks, empty cases,
 * turning a status change into its answer), and the helpers the backends
 * share (errors, status words, stock-failure and repair bookkeeping).
 *
 * "sqlite:PATH" -> store_sqlite.c, "postgres://..." or "postgresql://..."
 * -> store_pg.c, "mysql://..." or "mariadb://..." -> store_mysql*.c. The
 * spec is echoed in messages only when it cannot hold a password (a
 * postgres or mysql URL may). */
#include "store/store_int.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "engine/keys.h"
#include "engine/order_id.h"
#include "engine/stock.h"
#include "store/mysql_url.h"

static int is_pg_spec(const char *spec)
{
    return !strncmp(spec, "postgres://", 11) || !strncmp(spec, "postgresql://", 13);
}

int sk_store_open_mode(sk_store **out, const char *spec, int waiting, char *err, size_t cap)
{
    *out = NULL;
    if (err && cap) err[0] = 0;
    int rc = 0;
    if (!spec || !*spec) {
        rc = SK_EINVAL;
        if (err) snprintf(err, cap, "empty database spec (expected " SK_STORE_SPECS ")");
    } else if (is_pg_spec(spec)) {
        if (strlen(spec) > 4096) {
            rc = SK_EINVAL;
            if (err) snprintf(err, cap, "postgres URL too long");
        }
    } else if (sk_mysql_url_is(spec)) {
        if (strlen(spec) > SK_MYSQL_URL_MAX) {
            rc = SK_EINVAL;
            if (err) snprintf(err, cap, "mysql URL too long");
        }
    } else if (strncmp(spec, "sqlite:", 7) != 0) {
        rc = SK_EINVAL;
        /* the scheme only: an unknown URL may still carry a password */
        if (err)
            snprintf(err, cap, "unknown database spec '%.*s...' (expected " SK_STORE_SPECS ")",
                     (int)strcspn(spec, ":/@?"), spec);
    } else if (!spec[7]) {
        rc = SK_EINVAL;
        if (err) snprintf(err, cap, "database spec 'sqlite:' has no path");
    } else if (strlen(spec + 7) >= sizeof((struct sk_store *)0)->path) {
        rc = SK_EINVAL;
        if (err) snprintf(err, cap, "database path too long");
    }
    if (rc) return rc;
    sk_store *st = calloc(1, sizeof *st);
    if (!st) {
        if (err) snprintf(err, cap, "out of memory");
        return SK_ENOMEM;
    }
    rc = is_pg_spec(spec)        ? sk_store_pg_open(st, spec, waiting)
         : sk_mysql_url_is(spec) ? sk_store_mysql_open(st, spec, waiting)
                                 : sk_store_sqlite_open(st, spec + 7);
    if (rc == SK_STORE_UNCONNECTED) {
        if (err) snprintf(err, cap, "%s", st->errstr);
        st->errstr[0] = 0;
        *out = st;
        return 0;
    }
    if (rc) {
        if (err) snprintf(err, cap, "%s", st->errstr);
        sk_store_close(st);
        return rc;
    }
    if (err && cap) err[0] = 0;
    *out = st;
    return 0;
}

int sk_store_open(sk_store **out, const char *spec, char *err, size_t cap)
{
    return sk_store_open_mode(out, spec, SK_STORE_CONNECT, err, cap);
}

int sk_store_open_waiting(sk_store **out, const char *spec, char *err, size_t cap)
{
    return sk_store_open_mode(out, spec, SK_STORE_TRY, err, cap);
}

int sk_store_pay_owed(sk_store *st)
{
    int (*owed)(sk_store *) = st->owed;
    if (!owed) return 0;
    st->owed = NULL; /* the migrations run calls that must not run them again */
    int rc = owed(st);
    if (rc) st->owed = owed; /* the next call that connects tries again */
    return rc;
}

void sk_store_close(sk_store *st)
{
    if (!st) return;
    if (st->ops && st->ops->close) st->ops->close(st);
    free(st);
}

const char *sk_store_errstr(const sk_store *st)
{
    return st ? st->errstr : "no store";
}

/* ---- helpers shared by the backends (store_int.h) ------------------------ */

int sk_store_set_err(sk_store *st, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->errstr, sizeof st->errstr, fmt, ap);
    va_end(ap);
    return code;
}

int sk_store_finish_tx(sk_store *st, int rc, const char *what,
                       int (*commit)(sk_store *st, const char *what),
                       void (*rollback)(sk_store *st))
{
    if (rc == 0) rc = commit(st, what);
    if (rc) {
        char why[sizeof st->errstr]; /* the rollback may write over it */
        snprintf(why, sizeof why, "%s", st->errstr);
        rollback(st);
        sk_store_set_err(st, rc, "%s", why);
    }
    return rc;
}

struct sk_store_take *sk_store_take_add(struct sk_store_take *t, size_t *nt, uint64_t aid)
{
    size_t k = 0;
    while (k < *nt && t[k].aid != aid)
        k++;
    if (k == *nt) t[(*nt)++] = (struct sk_store_take){.aid = aid};
    return &t[k];
}

void sk_store_take_units(struct sk_store_take *t, int64_t q)
{
    t->units = t->units > INT64_MAX - q ? INT64_MAX : t->units + q;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int sk_store_mark_inserted(sk_store *st, const struct sk_order *orders, size_t n,
                           const char *const *ids, size_t nids, char *inserted)
{
    /* Each returned id is a row one order of the batch added. */
    memset(inserted, nids == n, n);
    if (nids == n || nids == 0) return 0;
    const char **got = malloc(nids * sizeof *got);
    char *used = calloc(nids, 1);
    if (!got || !used) {
        free(got);
        free(used);
        return sk_store_set_err(st, SK_ENOMEM, "out of memory reading inserted orders");
    }
    memcpy(got, ids, nids * sizeof *got);
    qsort(got, nids, sizeof *got, cmp_str);
    for (size_t i = 0; i < n; i++) {
        const char *key = orders[i].order_id;
        const char **hit = bsearch(&key, got, nids, sizeof *got, cmp_str);
        if (hit && !used[hit - got]) {
            used[hit - got] = 1;
            inserted[i] = 1;
        }
    }
    free(got);
    free(used);
    return 0;
}

static int cmp_take(const void *a, const void *b)
{
    uint64_t x = ((const struct sk_store_take *)a)->aid, y = ((const struct sk_store_take *)b)->aid;
    return x < y ? -1 : x > y;
}

int sk_store_persist_scratch(sk_store *st, size_t n, char **inserted, struct sk_store_take **takes)
{
    *inserted = malloc(n ? n : 1);
    *takes = malloc((n ? n : 1) * sizeof **takes);
    if (*inserted && *takes) return 0;
    sk_store_persist_scratch_free(*inserted, *takes);
    *inserted = NULL;
    *takes = NULL;
    return sk_store_set_err(st, SK_ENOMEM, "out of memory persisting %zu orders", n);
}

void sk_store_persist_scratch_free(char *inserted, struct sk_store_take *takes)
{
    free(inserted);
    free(takes);
}

void sk_store_takes_sort(struct sk_store_take *t, size_t nt)
{
    if (nt) qsort(t, nt, sizeof *t, cmp_take);
}

struct sk_store_take *sk_store_take_find(struct sk_store_take *t, size_t nt, uint64_t aid)
{
    struct sk_store_take key = {.aid = aid};
    return nt ? bsearch(&key, t, nt, sizeof *t, cmp_take) : NULL;
}

int sk_store_no_activity(sk_store *st, uint64_t id)
{
    return sk_store_set_err(st, SK_ENOTFOUND, "activity %" PRIu64 " not found", id);
}

int sk_store_no_order(sk_store *st, const char *order_id)
{
    return sk_store_set_err(st, SK_ENOTFOUND, "order %.80s not found", order_id);
}

int sk_store_status_from_text(const char *t)
{
    if (!t) return -1; /* value: no such status */
    for (int i = 0; i < SK_ORDER_NSTATUS; i++)
        if (!strcmp(t, sk_order_status_name(i))) return i;
    return -1; /* value: no such status */
}

void sk_store_count_stock_failure(struct sk_persist_result *res, struct sk_stock_failure *first,
                                  const struct sk_order *o, int has_row, int64_t db_stock)
{
    if (res->stock_failures == 0) {
        snprintf(first->order_id, sizeof first->order_id, "%s", o->order_id);
        first->aid = o->activity_id;
        first->qty = o->quantity;
        first->db_stock = has_row ? db_stock : 0;
        first->has_row = has_row;
    }
    res->stock_failures++;
    res->units_unstocked += o->quantity;
}

int sk_store_transition_end(sk_store *st, int hit, const char *order_id, int *before,
                            int (*read_status)(sk_store *st, const char *order_id, int *status))
{
    if (hit < 0) return hit;
    if (hit) {
        *before = SK_ORDER_CREATED;
        return 0;
    }
    return read_status(st, order_id, before);
}

int sk_store_batch_rolled_back(sk_store *st, int rc, size_t n)
{
    char why[sizeof st->errstr];
    snprintf(why, sizeof why, "%s", st->errstr);
    return sk_store_set_err(st, rc, "%s (batch of %zu rolled back)", why, n);
}

int sk_store_release_end(sk_store *st, int hit, const char *order_id,
                         int (*read_status)(sk_store *st, const char *order_id, int *status))
{
    if (hit) return hit < 0 ? hit : 0;
    /* Marked before, not cancelled, or absent. */
    int status = -1;
    int rc = read_status(st, order_id, &status);
    if (rc || status == SK_ORDER_CANCELLED) return rc;
    return sk_store_set_err(st, SK_ESTATE, "order %.80s is not cancelled: nothing to release",
                            order_id);
}

int sk_store_repair_plan(sk_store *st, uint64_t id, sk_store_stock_check_fn *check,
                         struct sk_store_stock *s, char detail[SK_STORE_AUDIT_DETAIL_MAX])
{
    int rc = check(st, id, s);
    if (rc) return rc;
    if (s->expected < 0 || s->expected > s->initial)
        return sk_store_set_err(st, SK_ESTATE,
                                "activity %" PRIu64 ": computed DB stock %" PRId64
                                " is outside 0..%" PRId64
                                " (the DB holds more units than the initial stock)",
                                id, s->expected, s->initial);
    if (s->stock == s->expected) return 0;
    snprintf(detail, SK_STORE_AUDIT_DETAIL_MAX,
             "DB stock %" PRId64 " -> %" PRId64 " (initial %" PRId64
             " - units of orders not cancelled %" PRId64 ")",
             s->stock, s->expected, s->initial, s->initial - s->expected);
    return 1;
}

int sk_store_batch_marks(sk_store *st, const struct sk_order *orders, size_t n,
                         struct sk_mark **marks, size_t *nmarks)
{
    struct sk_mark *out = malloc(n * sizeof *out);
    *marks = out;
    *nmarks = 0;
    if (!out) return sk_store_set_err(st, SK_ENOMEM, "out of memory raising marks");
    size_t nm = 0;
    for (size_t i = 0; i < n; i++) {
        const struct sk_order *o = &orders[i];
        struct sk_oid id;
        if (o->adm_seq <= 0 ||
            sk_oid_parse(o->order_id, strnlen(o->order_id, sizeof o->order_id), &id) < 0)
            continue;
        size_t ll = id.label_len, k = 0;
        while (k < nm && (strncmp(out[k].label, o->order_id, ll) || out[k].label[ll] ||
                          strcmp(out[k].branch, id.branch)))
            k++;
        if (k == nm) {
            out[nm] = (struct sk_mark){.activity_id = id.activity_id};
            memcpy(out[nm].label, o->order_id, ll);
            out[nm].label[ll] = 0;
            snprintf(out[nm++].branch, sizeof out[k].branch, "%s", id.branch);
        }
        if (o->adm_seq > out[k].adm) {
            out[k].adm = o->adm_seq;
            snprintf(out[k].order_id, sizeof out[k].order_id, "%s", o->order_id);
        }
    }
    *nmarks = nm;
    return 0;
}

int sk_store_is_conflict(const struct sk_order *o, uint64_t activity_id, uint64_t user_id,
                         int64_t quantity)
{
    return o->activity_id != activity_id || o->user_id != user_id || o->quantity != quantity;
}

/* ---- checks every backend relies on --------------------------------------- */

static int check_order(sk_store *st, const struct sk_order *o, size_t i)
{
    size_t il = strnlen(o->order_id, sizeof o->order_id);
    size_t sl = strnlen(o->stream_id, sizeof o->stream_id);
    if (il == 0 || il >= sizeof o->order_id)
        return sk_store_set_err(st, SK_EINVAL, "order %zu: empty or unterminated order id", i);
    if (sl == 0 || sl >= sizeof o->stream_id)
        return sk_store_set_err(st, SK_EINVAL, "order %s: empty or unterminated stream id",
                                o->order_id);
    if (o->activity_id == 0 || o->activity_id > SK_ACTIVITY_ID_MAX)
        return sk_store_set_err(st, SK_EINVAL, "order %s: bad activity id", o->order_id);
    if (o->quantity < 1)
        return sk_store_set_err(st, SK_EINVAL, "order %s: quantity %" PRId64 " < 1", o->order_id,
                                o->quantity);
    if (o->created_ms < 0 || o->created_ms > SK_TIME_MAX_MS)
        return sk_store_set_err(st, SK_EINVAL, "order %s: bad created time", o->order_id);
    size_t kl = strnlen(o->idem_key, sizeof o->idem_key);
    if (kl >= sizeof o->idem_key)
        return sk_store_set_err(st, SK_EINVAL, "order %s: unterminated idempotency key",
                                o->order_id);
    for (size_t k = 0; k < kl; k++)
        if (o->idem_key[k] < 0x21 || o->idem_key[k] > 0x7e)
            return sk_store_set_err(st, SK_EINVAL, "order %s: idempotency key not visible ASCII",
                                    o->order_id);
    return 0;
}

/* One warning line per batch for n failed conditional updates. */
static void log_stock_failures(size_t n, const struct sk_stock_failure *ff)
{
    if (ff->has_row)
        sk_log(SK_LOG_WARN,
               "store: %zu order(s) persisted without their DB stock (conditional update "
               "failed); first: order %s activity %" PRIu64 " qty %" PRId64 " > DB stock %" PRId64
               "; run reconcile",
               n, ff->order_id, ff->aid, ff->qty, ff->db_stock);
    else
        sk_log(SK_LOG_WARN,
               "store: %zu order(s) persisted without their DB stock; first: order %s: activity "
               "%" PRIu64 " is not in the database; run reconcile",
               n, ff->order_id, ff->aid);
}

/* ---- dispatch ------------------------------------------------------------ */

/* An id no SQL bigint can hold (>= 2^63): no such activity. Checked here
 * so that every backend answers "not found" instead of failing to bind or
 * cast it (PostgreSQL refuses the parameter). */
static int id_beyond_sql(uint64_t id)
{
    return id > (uint64_t)INT64_MAX;
}

/* A backend without the function: a clear refusal, not a crash. */
static int unsupported(sk_store *st, const char *what)
{
    snprintf(st->errstr, sizeof st->errstr, "%s store: %s is not supported", st->ops->name, what);
    return SK_EINVAL;
}

/* Every call starts with no error ("" after success, store.h). */
#define DISPATCH(member, ...)                                                                      \
    (st->errstr[0] = 0,                                                                            \
     st->ops->member ? st->ops->member(st, __VA_ARGS__) : unsupported(st, #member))

static const struct sk_store_rows audit_rows = {"list audit rows",
                                                "SELECT " SK_STORE_AUDIT_COLUMNS " FROM audit",
                                                "id", sizeof(struct sk_audit), sk_store_read_audit};
static const struct sk_store_rows mark_rows = {
    "list marks", "SELECT " SK_STORE_MARK_COLUMNS " FROM redis_marks", "label, branch",
    sizeof(struct sk_mark), sk_store_read_mark};

int sk_store_schema_version(sk_store *st, int *version)
{
    return DISPATCH(schema_version, version);
}

_Static_assert(SK_STORE_IDENTITY_LEN == SK_STOCK_STORE_ID_LEN, "one identity length");

int sk_store_identity(sk_store *st, char *buf, size_t cap)
{
    if (!buf || cap < SK_STORE_IDENTITY_MAX) return SK_EINVAL;
    if (!st->identity[0]) {
        char id[SK_STORE_IDENTITY_MAX + 8] = "";
        int rc = DISPATCH(identity, id, sizeof id);
        if (rc) return rc;
        if (strlen(id) != SK_STORE_IDENTITY_LEN || id[strspn(id, "0123456789abcdef")])
            return sk_store_set_err(st, SK_EDB, "%s store: malformed store identity '%.32s'",
                                    st->ops->name, id);
        memcpy(st->identity, id, sizeof st->identity);
    }
    memcpy(buf, st->identity, SK_STORE_IDENTITY_MAX);
    return 0;
}

int sk_store_activity_insert(sk_store *st, const struct sk_activity *a)
{
    struct sk_activity v = *a;
    if (!v.state[0]) snprintf(v.state, sizeof v.state, "created");
    char why[256];
    if (sk_activity_validate(&v, why, sizeof why) < 0)
        return sk_store_set_err(st, SK_EINVAL, "activity %" PRIu64 ": %s", v.id, why);
    return DISPATCH(activity_insert, &v);
}

int sk_store_activity_get(sk_store *st, uint64_t id, struct sk_activity *out)
{
    if (id_beyond_sql(id)) return sk_store_no_activity(st, id);
    return DISPATCH(activity_get, id, out);
}

int sk_store_activity_list(sk_store *st, struct sk_activity **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    return DISPATCH(activity_list, out, n);
}

int sk_store_activity_set_state(sk_store *st, uint64_t id, const char *state)
{
    if (!state || !sk_activity_state_valid(state))
        return sk_store_set_err(st, SK_EINVAL, "invalid activity state '%s'",
                                state ? state : "(null)");
    if (id_beyond_sql(id)) return sk_store_no_activity(st, id);
    return DISPATCH(activity_set_state, id, state);
}

int sk_store_activity_delete(sk_store *st, uint64_t id)
{
    if (id_beyond_sql(id)) return sk_store_no_activity(st, id);
    return DISPATCH(activity_delete, id);
}

int sk_store_orders_persist(sk_store *st, const struct sk_order *orders, size_t n,
                            struct sk_persist_result *res)
{
    struct sk_persist_result r = {0};
    if (res) *res = r;
    st->errstr[0] = 0;
    if (n == 0) return 0;
    for (size_t i = 0; i < n; i++) {
        int rc = check_order(st, &orders[i], i);
        if (rc) return rc;
    }
    struct sk_stock_failure first = {0};
    int rc = DISPATCH(orders_persist, orders, n, &r, &first);
    if (rc) return rc;
    if (r.stock_failures) log_stock_failures(r.stock_failures, &first);
    if (r.conflicts)
        sk_log(SK_LOG_ERROR,
               "store: %zu order id(s) of the batch already held by another admission (two "
               "histories that diverged): not inserted, recorded in order_conflicts; run "
               "reconcile",
               r.conflicts);
    if (res) *res = r;
    return 0;
}

int sk_store_order_get(sk_store *st, const char *order_id, struct sk_order *out)
{
    return DISPATCH(order_get, order_id, out);
}

int sk_store_order_pay(sk_store *st, const char *order_id, int64_t now_ms, int *status_out)
{
    int before = -1;
    int rc = DISPATCH(order_pay, order_id, now_ms, &before);
    if (rc) return rc;
    if (status_out) *status_out = before == SK_ORDER_CREATED ? SK_ORDER_PAID : before;
    if (before == SK_ORDER_CANCELLED)
        return sk_store_set_err(st, SK_ESTATE, "order %.80s is cancelled: payment refused",
                                order_id);
    if (before != SK_ORDER_CREATED && before != SK_ORDER_PAID)
        return sk_store_set_err(st, SK_EDB, "order %.80s has an unknown status", order_id);
    return 0;
}

int sk_store_order_cancel(sk_store *st, const char *order_id, int64_t now_ms, int *prev_status)
{
    int before = -1;
    int rc = DISPATCH(order_cancel, order_id, now_ms, &before);
    if (rc) return rc;
    if (prev_status) *prev_status = before;
    if (before == SK_ORDER_PAID)
        return sk_store_set_err(st, SK_ESTATE, "order %.80s is paid: cannot cancel", order_id);
    if (before != SK_ORDER_CREATED && before != SK_ORDER_CANCELLED)
        return sk_store_set_err(st, SK_EDB, "order %.80s has an unknown status", order_id);
    return 0;
}

int sk_store_orders_expired(sk_store *st, int64_t now_ms, size_t limit, struct sk_order *out,
                            size_t *n)
{
    *n = 0;
    st->errstr[0] = 0;
    if (limit == 0) return 0;
    return DISPATCH(orders_expired, now_ms, limit, out, n);
}

int sk_store_orders_list(sk_store *st, uint64_t activity_id, const char *after, size_t limit,
                         struct sk_order *out, size_t *n)
{
    *n = 0;
    st->errstr[0] = 0;
    if (limit == 0 || id_beyond_sql(activity_id)) return 0;
    /* The ids of one activity all start "<id>-", or "<id>.<seg>-" for a
     * segmented one (docs/segments.md): a primary-key range scan between
     * "<id>-" and "<id>/" ('-' < '.' < '/' < digits, so "<id><digit>..."
     * of another activity sorts after it; the backends compare bytes). */
    char lo[32], hi[32];
    snprintf(lo, sizeof lo, "%" PRIu64 "-", activity_id);
    snprintf(hi, sizeof hi, "%" PRIu64 "/", activity_id);
    const char *from = after && *after && strcmp(after, lo) > 0 ? after : lo;
    return DISPATCH(orders_list, activity_id, from, hi, limit, out, n);
}

int sk_store_orders_count(sk_store *st, uint64_t activity_id, struct sk_order_counts *out)
{
    memset(out, 0, sizeof *out);
    if (id_beyond_sql(activity_id)) {
        st->errstr[0] = 0;
        return 0;
    }
    return DISPATCH(orders_count, activity_id, out);
}

int sk_store_audit_add(sk_store *st, int64_t at_ms, uint64_t activity_id, const char *kind,
                       const char *detail)
{
    if (!kind || !*kind || strlen(kind) >= SK_STORE_AUDIT_KIND_MAX)
        return sk_store_set_err(st, SK_EINVAL, "audit kind empty or too long");
    return DISPATCH(audit_add, at_ms, activity_id, kind, detail ? detail : "");
}

int sk_store_audit_list(sk_store *st, uint64_t activity_id, struct sk_audit **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (id_beyond_sql(activity_id)) {
        st->errstr[0] = 0;
        return 0;
    }
    void *arr = NULL;
    int rc = DISPATCH(activity_rows, &audit_rows, activity_id, &arr, n);
    *out = arr;
    return rc;
}

int sk_store_activity_set_db_stock(sk_store *st, uint64_t id, int64_t stock)
{
    if (stock < 0) return sk_store_set_err(st, SK_EINVAL, "DB stock %" PRId64 " < 0", stock);
    if (id_beyond_sql(id)) return sk_store_no_activity(st, id);
    int rc = DISPATCH(activity_set_db_stock, id, stock);
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
    return DISPATCH(activity_set_pass_rate, id, rate);
}

int sk_store_activity_ids(sk_store *st, uint64_t **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    return DISPATCH(activity_ids, out, n);
}

int sk_store_order_mark_released(sk_store *st, const char *order_id, int64_t now_ms)
{
    return DISPATCH(order_mark_released, order_id, now_ms);
}

int sk_store_orders_unreleased(sk_store *st, const char *after, size_t limit, struct sk_order *out,
                               size_t *n)
{
    *n = 0;
    st->errstr[0] = 0;
    if (limit == 0) return 0;
    return DISPATCH(orders_unreleased, after ? after : "", limit, out, n);
}

/* The figures of a stock check or repair that returned rc: on success
 * the stock into *stock and the expected stock into *expected (each when
 * not NULL). Returns rc. */
static int stock_out(int rc, const struct sk_store_stock *s, int64_t *stock, int64_t *expected)
{
    if (rc == 0 && stock) *stock = s->stock;
    if (rc == 0 && expected) *expected = s->expected;
    return rc;
}

int sk_store_db_stock_check(sk_store *st, uint64_t id, int64_t *stock, int64_t *expected)
{
    struct sk_store_stock s = {0};
    if (id_beyond_sql(id)) return sk_store_no_activity(st, id);
    return stock_out(DISPATCH(db_stock_check, id, &s), &s, stock, expected);
}

int sk_store_db_stock_repair(sk_store *st, uint64_t id, int64_t now_ms, int64_t *before,
                             int64_t *after)
{
    struct sk_store_stock s = {0};
    if (id_beyond_sql(id)) return sk_store_no_activity(st, id);
    return stock_out(DISPATCH(db_stock_repair, id, now_ms, &s), &s, before, after);
}

int sk_store_marks_list(sk_store *st, uint64_t activity_id, struct sk_mark **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    void *arr = NULL;
    int rc = DISPATCH(activity_rows, &mark_rows, activity_id, &arr, n);
    *out = arr;
    return rc;
}

int sk_store_order_restore(sk_store *st, const struct sk_order *o, int64_t now_ms,
                           const char *audit_detail)
{
    int rc = check_order(st, o, 0);
    if (rc) return rc;
    if (o->status != SK_ORDER_CREATED && o->status != SK_ORDER_CANCELLED)
        return sk_store_set_err(st, SK_EINVAL, "order %s: restored as created or cancelled only",
                                o->order_id);
    return DISPATCH(order_restore, o, now_ms, audit_detail ? audit_detail : o->order_id);
}
