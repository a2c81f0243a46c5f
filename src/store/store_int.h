/* store_int.h - what store.c and the store backends share: the handle,
 * the table of backend functions, and the helpers every backend uses.
 * Callers use store.h only.
 *
 * store.c parses the spec, allocates the handle, calls the backend's open,
 * and every public sk_store_* function dispatches through st->ops. What is
 * the same for every backend happens in store.c, around the call: clearing
 * the error, checking arguments (activity definitions, order shapes, audit
 * kinds, states), the empty cases (no orders, limit 0), the order-id range
 * of an activity, and turning a status change into its answer (paid,
 * cancelled, refused). A backend keeps only what differs: its SQL dialect
 * and its driver calls. A new store.h function therefore needs: a line in
 * SK_STORE_OPS here, a dispatcher in store.c, and an implementation in
 * each backend (store_sqlite*.c, store_pg*.c, store_mysql*.c), named
 * <prefix>_<member> (sk_sq_, sk_pg_, sk_my_).
 *
 * The handle keeps the backends' fields in an anonymous union so the SQLite
 * code reads st->db / st->path as it always did. */
#ifndef SK_STORE_INT_H
#define SK_STORE_INT_H
#include "store/store.h"

struct sqlite3;
struct sqlite3_stmt;
struct pg_conn;
struct st_mysql;
struct st_mysql_stmt;
struct sk_mysql_url;

/* The first failed conditional stock update of a persist batch; the
 * backends fill it (sk_store_count_stock_failure) and store.c logs it. */
struct sk_stock_failure {
    char order_id[SK_STORE_ORDER_ID_MAX];
    uint64_t aid;
    int64_t qty, db_stock;
    int has_row; /* 0: the activity row is missing */
};

/* Columns read by the backends' activity and order row readers, in the
 * order they read them. */
#define SK_STORE_ACTIVITY_COLUMNS                                                                  \
    "id, name, stock_initial, stock, per_user_limit, max_per_order, start_ms, end_ms, "            \
    "pay_timeout_s, state, created_ms, rl_per_user_per_s, rl_burst, segments, "                    \
    "wr_passes_per_s, wr_pass_ttl_s, wr_seed, wr_control, reg_start_ms, reg_end_ms, draw_box_s, "  \
    "draw_seed, drawn_ms, draw_n, draw_state"
#define SK_STORE_ORDER_COLUMNS                                                                     \
    "order_id, stream_id, activity_id, user_id, quantity, status, created_ms, pay_deadline_ms, "   \
    "paid_ms, cancelled_ms, released_ms, idem_key"
#define SK_STORE_ACTIVITY_NCOLS 25
#define SK_STORE_AUDIT_COLUMNS "id, at_ms, activity_id, kind, detail"
#define SK_STORE_MARK_COLUMNS "label, activity_id, adm, updated_ms, order_id, branch"

/* One row of a result as a backend reads it: i64(r, col) (NULL reads 0)
 * and text(r, col, dst, cap) (NULL reads ""); res, aux and row are the
 * backend's (its result, its row handle, the row's number). */
struct sk_store_row {
    const void *res;
    void *aux;
    int row;
    int64_t (*i64)(const struct sk_store_row *r, int col);
    void (*text)(const struct sk_store_row *r, int col, char *dst, size_t cap);
};
/* Reads row r into the struct at dst (zeroed first): the columns of
 * SK_STORE_*_COLUMNS in that order, or one id (a uint64_t). store_row.c. */
typedef void sk_store_row_reader(const struct sk_store_row *r, void *dst);

/* One value of a row to write: text when not NULL, else num. */
struct sk_store_value {
    const char *text;
    int64_t num;
};
/* The values of a new activity's row in SK_STORE_ACTIVITY_COLUMNS order
 * (its DB stock starts at its stock). store_row.c. */
void sk_store_activity_values(const struct sk_activity *a,
                              struct sk_store_value v[SK_STORE_ACTIVITY_NCOLS]);

/* A list of an activity's rows: "SELECT <columns> FROM <table>", each
 * backend adding its filter on activity_id (0: every activity) and ORDER
 * BY order_by; the rows are read by read into elements of size bytes. */
struct sk_store_rows {
    const char *what, *select, *order_by;
    size_t size;
    sk_store_row_reader *read;
};
/* An activity's row of SK_STORE_STOCK_CHECK: its DB stock, the DB stock
 * its orders say it should have, and its initial stock. */
struct sk_store_stock {
    int64_t stock, expected, initial;
};
sk_store_row_reader sk_store_read_activity, sk_store_read_order, sk_store_read_audit,
    sk_store_read_mark, sk_store_read_id, sk_store_read_stock, sk_store_read_registration;

/* The default pay timeout as SQL text, for the statements that fall back
 * on it when an order's activity is not in the DB. */
#define SK_STORE_STR_(x) #x
#define SK_STORE_STR(x) SK_STORE_STR_(x)
#define SK_STORE_PAY_TIMEOUT_DEFAULT_SQL SK_STORE_STR(SK_ACTIVITY_PAY_TIMEOUT_DEFAULT)

/* Sets st->errstr (printf-style) and returns code. */
int sk_store_set_err(sk_store *st, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* SK_ENOTFOUND, "activity <id> not found". */
int sk_store_no_activity(sk_store *st, uint64_t id);
/* SK_ENOTFOUND, "order <id> not found". */
int sk_store_no_order(sk_store *st, const char *order_id);

/* "created" | "paid" | "cancelled" -> enum sk_order_status; -1 for another
 * text or NULL. */
int sk_store_status_from_text(const char *t);

/* Counts a failed conditional stock update of the inserted order o in
 * *res; the batch's first one (with the DB stock seen then, has_row 0
 * when the activity row is missing) goes to *first for the log line. */
void sk_store_count_stock_failure(struct sk_persist_result *res, struct sk_stock_failure *first,
                                  const struct sk_order *o, int has_row, int64_t db_stock);

/* The end of a status change (created -> paid or cancelled) that a
 * backend made by a conditional update: hit is what the update returned
 * (1 matched, 0 did not, or a negative code). *before is created when it
 * matched, else the status read_status reads now (statuses never go back
 * to created); SK_ENOTFOUND when the order is absent. The backend holds a
 * lock from the update to that read: an order inserted in between would
 * read as created although the update changed nothing. */
int sk_store_transition_end(sk_store *st, int hit, const char *order_id, int *before,
                            int (*read_status)(sk_store *st, const char *order_id, int *status));

/* Ends a transaction: commit(st, what) when rc is 0; when rc or the
 * commit failed, rollback(st), keeping the failure's error text. Returns
 * 0 or the failure's code. */
int sk_store_finish_tx(sk_store *st, int rc, const char *what,
                       int (*commit)(sk_store *st, const char *what),
                       void (*rollback)(sk_store *st));

/* A persist batch of n failed after its transaction began (and was rolled
 * back): says so after the error text; returns rc. */
int sk_store_batch_rolled_back(sk_store *st, int rc, size_t n);

/* The end of mark-released, made by a conditional update (hit as above):
 * 0 when it matched; else the order is read: 0 when cancelled (marked
 * before), SK_ESTATE when not cancelled, SK_ENOTFOUND when absent. */
int sk_store_release_end(sk_store *st, int hit, const char *order_id,
                         int (*read_status)(sk_store *st, const char *order_id, int *status));

/* Per activity of a persist batch: the summed units of its inserted
 * orders, whether the summed conditional update (stock >= units) matched,
 * and its pay timeout (read per batch by MySQL). */
struct sk_store_take {
    uint64_t aid;
    int64_t units;
    int64_t pay_timeout_s;
    int ok;
};
/* The entry of aid in t[0..*nt), added at the end (zeroed) when absent;
 * t has room for every activity of the batch. */
struct sk_store_take *sk_store_take_add(struct sk_store_take *t, size_t *nt, uint64_t aid);
/* Adds an inserted order's quantity q to t->units, saturating at
 * INT64_MAX: above any DB stock, so the summed condition fails and the
 * orders go one by one, as they must. */
void sk_store_take_units(struct sk_store_take *t, int64_t q);
/* The scratch of one persist call of n orders: a flag per order (which
 * were inserted) and room for one take per order. 0, or SK_ENOMEM on st
 * (nothing allocated); the caller frees both (sk_store_persist_scratch_free). */
int sk_store_persist_scratch(sk_store *st, size_t n, char **inserted, struct sk_store_take **takes);
void sk_store_persist_scratch_free(char *inserted, struct sk_store_take *takes);
/* Sorts t by activity id: two batches then lock shared activity rows in
 * one order. */
void sk_store_takes_sort(struct sk_store_take *t, size_t nt);
/* The entry of aid in t sorted by sk_store_takes_sort; NULL when absent. */
struct sk_store_take *sk_store_take_find(struct sk_store_take *t, size_t nt, uint64_t aid);

/* The marks a persist batch raises (store.h, migrations 6 and 8): per key
 * set label and branch of the batch, the highest adm_seq and its order id,
 * in a new array *marks of *nmarks (the caller frees it; NULL on failure).
 * Orders without adm_seq are left out. 0 or SK_ENOMEM. */
int sk_store_batch_marks(sk_store *st, const struct sk_order *orders, size_t n,
                         struct sk_mark **marks, size_t *nmarks);
/* The upsert of one mark, the same SQL on SQLite and PostgreSQL ($
 * placeholders for PostgreSQL, ? for SQLite; MySQL has its own,
 * store_mysql_orders.c): the mark only ever grows. */
#define SK_STORE_MARK_UPSERT(p1, p2, p3, p4, p5, p6)                                               \
    "INSERT INTO redis_marks (label, branch, activity_id, adm, updated_ms, order_id) VALUES (" p1  \
    ", " p2 ", " p3 ", " p4 ", " p5 ", " p6 ") ON CONFLICT (label, branch) DO UPDATE SET"          \
    " adm = excluded.adm, updated_ms = excluded.updated_ms, order_id = excluded.order_id"          \
    " WHERE excluded.adm > redis_marks.adm"
/* The mark of a cancelled order's release (placeholders: the time, the
 * order id), the same SQL on SQLite and PostgreSQL: it matches only a
 * cancelled order not marked yet. */
#define SK_STORE_MARK_RELEASED(p1, p2)                                                             \
    "UPDATE orders SET released_ms = " p1 " WHERE order_id = " p2                                  \
    " AND status = 'cancelled' AND released_ms IS NULL"
/* An activity's DB stock, its expected DB stock (the initial stock less
 * the units of its orders not cancelled) and its initial stock, in one
 * statement (one snapshot), the same SQL on every backend (p: the
 * placeholder of the activity id). */
#define SK_STORE_STOCK_CHECK(p)                                                                    \
    "SELECT a.stock, a.stock_initial - COALESCE((SELECT SUM(o.quantity)"                           \
    " FROM orders o WHERE o.activity_id = a.id AND o.status <> 'cancelled'), 0),"                  \
    " a.stock_initial FROM activities a WHERE a.id = " p
/* Which of orders[0..n) a multi-row INSERT ... ON CONFLICT DO NOTHING
 * RETURNING order_id added, from the ids it returned (ids[0..nids), in any
 * order): inserted[i] 1 for the first order of each returned id, else 0
 * (an id the batch holds twice is inserted once, by its first order).
 * nids == n: all of them, nothing compared. 0 or SK_ENOMEM; ids stays the
 * caller's. */
int sk_store_mark_inserted(sk_store *st, const struct sk_order *orders, size_t n,
                           const char *const *ids, size_t nids, char *inserted);
/* An order id already present: the existing row differs from o (another
 * activity, user or quantity)? 1 conflict, 0 a re-delivery. */
int sk_store_is_conflict(const struct sk_order *o, uint64_t activity_id, uint64_t user_id,
                         int64_t quantity);

/* A backend's read of SK_STORE_STOCK_CHECK for activity id into *out;
 * SK_ENOTFOUND when the activity is absent. */
typedef int sk_store_stock_check_fn(sk_store *st, uint64_t id, struct sk_store_stock *out);
/* The plan of a DB stock repair, inside the backend's transaction: the
 * stock read by check into *s; SK_ESTATE when the computed stock
 * (s->expected) is outside 0..initial; 0 when the stock is right; 1 when
 * the backend must set it to s->expected and add the audit row of text
 * detail. */
int sk_store_repair_plan(sk_store *st, uint64_t id, sk_store_stock_check_fn *check,
                         struct sk_store_stock *s, char detail[SK_STORE_AUDIT_DETAIL_MAX]);

/* Backend functions: X(p, type, member, (parameters)) for each member of
 * struct sk_store_ops. store.c clears st->errstr before each call and does
 * the checks named on a member; a backend sets st->errstr on failure.
 * Each backend defines all of them, named <prefix>_<member>, declared by
 * SK_STORE_OPS_DECLARE(prefix) in its internal header and gathered into
 * its table by SK_STORE_OPS_TABLE: a backend that misses one does not
 * link. */
/* clang-format off */
#define SK_STORE_OPS(X, p)                                                                         \
    X(p, void, close, (sk_store *st)) /* releases backend resources, not st */                    \
    X(p, int, schema_version, (sk_store *st, int *version))                                        \
    /* a passed sk_activity_validate, its state is set */                                          \
    X(p, int, activity_insert, (sk_store *st, const struct sk_activity *a))                        \
    X(p, int, activity_get, (sk_store *st, uint64_t id, struct sk_activity *out))                  \
    /* *out NULL, *n 0 */                                                                          \
    X(p, int, activity_list, (sk_store *st, struct sk_activity **out, size_t *n))                  \
    /* a valid state */                                                                            \
    X(p, int, activity_set_state, (sk_store *st, uint64_t id, const char *state))                  \
    X(p, int, activity_delete, (sk_store *st, uint64_t id))                                        \
    /* Orders and audit (store.h "Orders"). */                                                     \
    /* n >= 1 orders that passed the shape checks, *res zeroed: one                                \
     * transaction that counts into *res (failed stock updates with                                \
     * sk_store_count_stock_failure); on failure it is rolled back                                 \
     * (sk_store_batch_rolled_back). */                                                            \
    X(p, int, orders_persist, (sk_store *st, const struct sk_order *orders, size_t n,              \
                               struct sk_persist_result *res, struct sk_stock_failure *first))     \
    X(p, int, order_get, (sk_store *st, const char *order_id, struct sk_order *out))               \
    /* created -> paid / cancelled (the cancel gives the units back to the                         \
     * DB stock in the same transaction), conditional on status created;                           \
     * *before: the status the order had (created: this call changed it).                          \
     * store.c turns it into the answer. */                                                        \
    X(p, int, order_pay, (sk_store *st, const char *order_id, int64_t now_ms, int *before))        \
    X(p, int, order_cancel, (sk_store *st, const char *order_id, int64_t now_ms, int *before))     \
    /* The readers of orders get limit >= 1 and *n 0. */                                           \
    X(p, int, orders_expired, (sk_store *st, int64_t now_ms, size_t limit, struct sk_order *out,   \
                               size_t *n))                                                         \
    /* The orders of activity_id with lo < order_id < hi (store.c computes                         \
     * the range from the order-id format), by order_id. */                                        \
    X(p, int, orders_list, (sk_store *st, uint64_t activity_id, const char *lo, const char *hi,    \
                            size_t limit, struct sk_order *out, size_t *n))                        \
    /* *out zeroed */                                                                              \
    X(p, int, orders_count, (sk_store *st, uint64_t activity_id, struct sk_order_counts *out))     \
    /* kind checked, detail not NULL (the backend truncates it) */                                 \
    X(p, int, audit_add, (sk_store *st, int64_t at_ms, uint64_t activity_id, const char *kind,     \
                          const char *detail))                                                     \
    /* stock >= 0; a CHECK failure (above the initial stock) is SK_EINVAL */                       \
    X(p, int, activity_set_db_stock, (sk_store *st, uint64_t id, int64_t stock))                   \
    /* *out NULL, *n 0 */                                                                          \
    X(p, int, activity_ids, (sk_store *st, uint64_t **out, size_t *n))                             \
    /* rate >= 1; an activity without a waiting room is SK_ENOTFOUND */                            \
    X(p, int, activity_set_pass_rate, (sk_store *st, uint64_t id, int64_t rate))                   \
    /* Payment timeout and reconciliation (store.h, migration 3). */                               \
    X(p, int, order_mark_released, (sk_store *st, const char *order_id, int64_t now_ms))           \
    /* after not NULL */                                                                           \
    X(p, int, orders_unreleased, (sk_store *st, const char *after, size_t limit,                   \
                                  struct sk_order *out, size_t *n))                                \
    X(p, int, db_stock_check, (sk_store *st, uint64_t id, struct sk_store_stock *out))             \
    /* out->stock the stock before, out->expected after (on success) */                            \
    X(p, int, db_stock_repair, (sk_store *st, uint64_t id, int64_t now_ms,                         \
                                struct sk_store_stock *out))                                       \
    /* o checked (shape, status created or cancelled), audit_detail not NULL */                    \
    X(p, int, order_restore, (sk_store *st, const struct sk_order *o, int64_t now_ms,              \
                              const char *audit_detail))                                           \
    /* The rows of q (audit rows, the rollback guard's marks) of activity_id                      \
     * (0: all), into a new array; *out NULL, *n 0. */                                             \
    X(p, int, activity_rows, (sk_store *st, const struct sk_store_rows *q, uint64_t activity_id,   \
                              void **out, size_t *n))                                              \
    /* Statements sql[0..n) (n >= 1; literals only, no placeholders, the                           \
     * SQL every backend speaks) in one transaction, in order; affected[i]                         \
     * (affected not NULL) the rows statement i matched (an INSERT: the                            \
     * rows it added). expect (may be NULL): a statement i with expect[i]                          \
     * >= 0 must match exactly that many, else the transaction is rolled                           \
     * back and SK_ESTATE returned (affected says up to where). All or                             \
     * nothing: on any failure it is rolled back. */                                               \
    X(p, int, exec_tx, (sk_store *st, const char *const *sql, size_t n, const int64_t *expect,     \
                        int64_t *affected))
#define SK_STORE_OP_MEMBER_(p, type, member, params) type (*member) params;
#define SK_STORE_OP_DECLARE_(p, type, member, params) type p##_##member params;
#define SK_STORE_OP_INIT_(p, type, member, params) .member = p##_##member,
/* clang-format on */

struct sk_store_ops {
    const char *name; /* "sqlite" | "postgres" | "mysql", for messages */
    SK_STORE_OPS(SK_STORE_OP_MEMBER_, _)
};

/* Declares <prefix>_<member> for every member (a backend's internal
 * header). */
#define SK_STORE_OPS_DECLARE(prefix) SK_STORE_OPS(SK_STORE_OP_DECLARE_, prefix)
/* The initialiser of a backend's table: its name and <prefix>_<member>
 * for every member. */
#define SK_STORE_OPS_TABLE(name_, prefix)                                                          \
    {                                                                                              \
        .name = name_, SK_STORE_OPS(SK_STORE_OP_INIT_, prefix)                                     \
    }

#define SK_STORE_ERR_MAX 512
/* Row count buckets of SQLite's kept multi-row order inserts
 * (store_sqlite_persist.c). */
#define SK_STORE_SQ_INSERTS 8

struct sk_store {
    const struct sk_store_ops *ops;
    char errstr[SK_STORE_ERR_MAX];
    /* what an open made without a connection still owes (its migrations),
     * run by the first call that connects (sk_store_open_waiting); NULL
     * when nothing */
    int (*owed)(sk_store *st);
    union {
        struct { /* store_sqlite.c */
            struct sqlite3 *db;
            char path[512];
            struct sqlite3_stmt *sq[10]; /* statements kept prepared (persist path, hot reads) */
            struct sqlite3_stmt *sq_ins[SK_STORE_SQ_INSERTS]; /* the persist's multi-row
                                                                 inserts, by row count */
            int64_t sq_busy_since; /* monotonic ms of this wait's first busy try */
        };
        struct { /* store_pg.c */
            struct pg_conn *pg;
            char pg_where[192];   /* host:port/dbname, never the password */
            int pg_timeout_ms;    /* client-side bound of one statement */
            int pg_broken;        /* reset the connection on the next call */
            unsigned pg_prepared; /* statements prepared on this session (bit per PGQ_*) */
        };
        struct { /* store_mysql*.c */
            struct st_mysql *my;
            struct sk_mysql_url *my_url;   /* kept for reconnects (holds the password) */
            char my_where[192];            /* host:port/dbname, never the password */
            int my_broken;                 /* reconnect on the next call */
            int my_mariadb;                /* the server is MariaDB (else MySQL) */
            unsigned long my_version;      /* the server's, e.g. 101119 for 10.11.19 */
            struct st_mysql_stmt *my_bulk; /* MariaDB: the persist's insert, prepared on
                                              this session (store_mysql_persist.c) */
        };
    };
};

/* Backend opens: fill st (ops included) from the part of the spec they
 * own. On failure st->errstr says why; the caller then runs
 * st->ops->close (when st->ops is set) and frees st. waiting (a server
 * store's; SQLite opens its file either way): SK_STORE_CONNECT fails when
 * the server cannot be reached; SK_STORE_TRY leaves st unconnected then,
 * its migrations owed (st->owed), the reason in st->errstr, and returns
 * SK_STORE_UNCONNECTED; SK_STORE_LATER does the same without trying (a
 * handle beside one that just found the server down: an unreachable host
 * would cost each one the connect timeout). */
enum { SK_STORE_CONNECT, SK_STORE_TRY, SK_STORE_LATER };
#define SK_STORE_UNCONNECTED 1
/* sk_store_open with a waiting mode as above; the pool's handles. */
int sk_store_open_mode(sk_store **out, const char *spec, int waiting, char *err, size_t cap);
int sk_store_sqlite_open(sk_store *st, const char *path);
int sk_store_pg_open(sk_store *st, const char *url, int waiting);
int sk_store_mysql_open(sk_store *st, const char *url, int waiting);
/* Runs what st still owes (sk_store_open_waiting), once its connection is
 * up: the backends' enter calls it after connecting. 0 or a code. */
int sk_store_pay_owed(sk_store *st);

#endif
