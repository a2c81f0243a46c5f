/* store_int.h - the store's engine and its drivers (src/store only; callers
 * use store.h).
 *
 * The engine owns every algorithm, written once: the migrations
 * (store_schema.c), the persist batch (store_persist.c), the order
 * operations and reconcile reads (store_orders.c), activities, audit rows
 * and marks (store_activity.c), the handle and the statement runner
 * (store.c). Its SQL is one table (store_sql.c): a statement id, its text
 * with dialect tokens where the dialects differ, a dialect's own text
 * where they differ too much. A driver (store_sqlite.c, store_pg.c,
 * store_mysql.c) is a table of primitives over its client library, like
 * SQLite's VFS: open and close a session, run a script, begin / commit /
 * roll back, prepare a statement by id, bind, step, read a column, count
 * the changed rows, and classify its failures (SK_EEXIST a unique key,
 * SK_EINVAL a refused value, SK_ETIMEDOUT a wait cut short, SK_EDB the
 * rest and a lost connection). Its state is its own struct behind
 * st->conn.
 *
 * A new store operation is a statement in store_sql.c (its text, and a
 * dialect's own where needed) and a function in the engine; no driver
 * changes. A new migration is one entry at the end of the list in
 * store_schema.c. */
#ifndef SK_STORE_INT_H
#define SK_STORE_INT_H
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "store/store.h"

/* ---- the SQL (store_sql.c) ----------------------------------------- */

enum sk_dialect { SK_SQLITE, SK_PG, SK_MYSQL, SK_NDIALECTS };

/* Statement ids: store_sql.c holds the text of each. */
enum sk_q {
    /* schema (store_schema.c) */
    Q_VERSION,       /* the schema version: one row, one number */
    Q_VERSION_SET,   /* a format of (int version, long long ms), run as a script */
    Q_VERSION_TABLE, /* where the versions are kept, created when absent */
    Q_MIGRATE_LOCK,  /* (wait s): one row, 1 when taken; none on SQLite */
    Q_MIGRATE_UNLOCK,
    Q_HAS_COLUMN, /* (table, column): a count */
    Q_HAS_INDEX,  /* (table, index): a count */
    Q_IDENTITY,   /* the store's identity (migration 9): one row, one text */
    /* activities, audit, marks (store_activity.c) */
    Q_ACTIVITY_INSERT,
    Q_ACTIVITY_ORDERS, /* (id): a count of its order rows */
    Q_ACTIVITY_GET,
    Q_ACTIVITY_LIST,
    Q_ACTIVITY_IDS,
    Q_ACTIVITY_SET_STATE,
    Q_ACTIVITY_DELETE,
    Q_ACTIVITY_SET_STOCK,
    Q_ACTIVITY_SET_PASS_RATE,
    Q_MARKS_DELETE,
    Q_AUDIT_INSERT,
    Q_AUDIT_LIST,
    Q_MARKS_LIST,
    /* registrations and the draw (store_registration.c) */
    Q_REG_ADD,
    Q_REG_COUNT,
    Q_REG_LIST,
    Q_REG_DELETE,
    Q_DRAW_MARK,
    Q_DRAW_PLACE,
    Q_ACTIVITY_SET_FAIR,
    /* orders (store_orders.c) */
    Q_ORDER_GET,
    Q_ORDER_LOCK,
    Q_ORDER_PAY,
    Q_ORDER_CANCEL,
    Q_STOCK_CREDIT,
    Q_ORDER_RELEASED,
    Q_ORDERS_EXPIRED,
    Q_ORDERS_LIST,
    Q_ORDERS_UNRELEASED,
    Q_ORDERS_COUNT,
    Q_STOCK_CHECK,
    Q_ACTIVITY_LOCK,
    Q_ORDER_RESTORE,
    /* the persist batch (store_persist.c) */
    Q_PAY_TIMEOUTS,
    Q_ORDERS_PRESENT,
    Q_ORDERS_INSERT,
    Q_TAKE_STOCK,
    Q_READ_STOCK,
    Q_STOCK_FAILURE,
    Q_CONFLICT,
    Q_MARKS_UPSERT,
    /* the outbox (store_events.c) */
    Q_EVENT_ADD,
    Q_EVENTS_CREATED,
    Q_EVENT_SOLD_OUT,
    Q_EVENT_REFUSED,
    Q_EVENT_PAID_BY,
    Q_EVENTS_LIST,
    Q_EVENT_ORDERS,
    Q_EVENT_BATCH,
    Q_EVENT_LAST,
    Q_EVENTS_MAX,
    Q_ACTIVITY_STATE_LOCK,
    Q_WH_CURSOR_GET,
    Q_WH_CURSOR_INIT,
    Q_WH_CURSOR_SET,
    Q_WH_DEAD,
    /* webhook endpoints (store_webhooks.c) */
    Q_WH_CURSOR_DELETE,
    Q_WH_CURSOR_AT_END,
    Q_WH_REPLAY_FROM,
    Q_WH_CURSOR_REWIND,
    Q_WH_EVENTS_AFTER,
    Q_WHE_INSERT,
    Q_WHE_COUNT,
    Q_WHE_LIST,
    Q_WHE_LIST_ALL,
    Q_WHE_GET,
    Q_WHE_DELETE,
    Q_WHE_ROTATE,
    Q_WHE_PAUSE,
    Q_COUNT
};

/* Flags of a statement. */
#define SK_SQL_KEEP 1u /* hot: prepared once per session where the driver can */
#define SK_SQL_BULK 2u /* multi-row insert a driver may run as one bulk execution */
/* A write of a transaction whose answer is needed only by its commit (the
 * engine reads nothing of it, not its changed rows): in a transaction a
 * driver may send it with the next statement, or with the COMMIT. */
#define SK_SQL_DEFER 4u

/* Parameter and column types of a multi-row statement's row (sk_sql_types). */
#define SK_SQL_TEXT 't'
#define SK_SQL_INT 'i'

/* What statement q is, for messages ("insert orders"). */
const char *sk_sql_what(int q);
unsigned sk_sql_flags(int q);
/* A multi-row statement's row: one letter per parameter (SK_SQL_TEXT or
 * SK_SQL_INT); NULL for a one-row statement. Its rows are bound row after
 * row, parameter i of row r at r * strlen(types) + i. */
const char *sk_sql_types(int q);
/* The text of statement q in the dialect of st for rows rows (a one-row
 * statement: rows is 1), tokens expanded, placeholders in the dialect's
 * form ('?' or '$n'; PostgreSQL takes a multi-row statement's columns as
 * one array each). New memory the caller frees; NULL when out of memory
 * (SK_ENOMEM on st) or when the dialect has no such statement (*none 1,
 * nothing on st). */
char *sk_sql_text(sk_store *st, int q, size_t rows, int *none);
/* A script of the migrations (text: tokens, no parameters) in the
 * dialect of st: new memory the caller frees, or NULL with the error on
 * st (what names it). */
char *sk_sql_script(sk_store *st, const char *text, const char *what);

/* ---- values, rows ---------------------------------------------------- */

enum { SK_V_INT, SK_V_TEXT, SK_V_NULL };
/* One parameter: a number, a NUL-terminated text (the caller's memory,
 * valid until the statement is stepped), or NULL. */
struct sk_val {
    int kind;
    int64_t i;
    const char *t;
};
#define SK_I(x) ((struct sk_val){.kind = SK_V_INT, .i = (int64_t)(x)})
#define SK_T(x) ((struct sk_val){.kind = SK_V_TEXT, .t = (x)})
#define SK_NULL ((struct sk_val){.kind = SK_V_NULL})
/* A list of parameters for the runners below: SK_ARGS(SK_I(a), SK_T(b)). */
#define SK_ARGS(...)                                                                               \
    (const struct sk_val[]){__VA_ARGS__},                                                          \
        (int)(sizeof((const struct sk_val[]){__VA_ARGS__}) / sizeof(struct sk_val))

/* A statement prepared by a driver (its own struct). */
typedef struct sk_stmt sk_stmt;

/* Reads the current row of s into the struct at dst (store_row.c). */
typedef void sk_store_reader(sk_store *st, sk_stmt *s, void *dst);
sk_store_reader sk_store_read_activity, sk_store_read_order, sk_store_read_audit,
    sk_store_read_mark, sk_store_read_id, sk_store_read_i64, sk_store_read_registration,
    sk_store_read_event, sk_store_read_webhook, sk_store_read_i64_pair, /* into int64_t[2] */
    sk_store_read_identity; /* into char[SK_STORE_IDENTITY_MAX + 8] */

/* Columns the readers read, in their order. */
#define SK_STORE_ACTIVITY_COLUMNS                                                                  \
    "id, name, stock_initial, stock, per_user_limit, max_per_order, start_ms, end_ms, "            \
    "pay_timeout_s, state, created_ms, rl_per_user_per_s, rl_burst, segments, "                    \
    "wr_passes_per_s, wr_pass_ttl_s, wr_seed, ch_pow_min, ch_pow_max, ch_pow_step, ch_captcha, "   \
    "wr_control, reg_start_ms, reg_end_ms, draw_box_s, draw_seed, drawn_ms, draw_n, draw_state"
#define SK_STORE_ACTIVITY_NCOLS 29
#define SK_STORE_ORDER_COLUMNS                                                                     \
    "order_id, stream_id, activity_id, user_id, quantity, status, created_ms, pay_deadline_ms, "   \
    "paid_ms, cancelled_ms, released_ms, idem_key"
#define SK_STORE_AUDIT_COLUMNS "id, at_ms, activity_id, kind, detail"
#define SK_STORE_EVENT_COLUMNS                                                                     \
    "e.id, e.subject, e.seq, e.type, e.activity_id, e.order_id, e.created_ms, e.payload, "         \
    "o.user_id, o.quantity, o.created_ms, o.pay_deadline_ms, "                                     \
    "CASE WHEN e.batch IS NULL THEN 0 ELSE 1 END"
#define SK_STORE_EVENT_NCOLS 13 /* the last: a batch row (store_events.c) */
#define SK_STORE_WEBHOOK_COLUMNS                                                                   \
    "id, activity_id, name, url, events, secret, secret_prev, prev_until_ms, paused, "             \
    "created_ms, updated_ms"
#define SK_STORE_MARK_COLUMNS "label, activity_id, adm, updated_ms, order_id, branch"
/* The values of a new activity's row in SK_STORE_ACTIVITY_COLUMNS order
 * (its DB stock starts at its stock). */
void sk_store_activity_values(const struct sk_activity *a,
                              struct sk_val v[SK_STORE_ACTIVITY_NCOLS]);

/* ---- drivers --------------------------------------------------------- */

/* A driver's primitives. Each returns 0 or a negative SK_E* code with
 * the detail on st (sk_store_fail); a lost session is noticed by the
 * driver and replaced by its next enter, never in a transaction. */
struct sk_store_driver {
    const char *name; /* "sqlite" | "postgres" | "mysql": messages */
    int dialect;      /* enum sk_dialect */
    /* Sets st->conn up from the part of the spec the driver owns, and
     * st->where. waiting (SK_STORE_*): a server driver that cannot
     * connect fails with SK_EDB (LATER: without trying), the reason on st,
     * and connects on a later enter. */
    int (*open)(sk_store *st, const char *spec, int waiting);
    void (*close)(sk_store *st); /* st->conn and what it holds; NULL conn is fine */
    /* Start of every call: a session that failed or was closed by the
     * server is replaced. */
    int (*enter)(sk_store *st);
    /* A script: several statements, no parameters, no rows. */
    int (*exec)(sk_store *st, const char *script, const char *what);
    /* A transaction's BEGIN, run as a script; NULL: the driver sends it
     * with the transaction's first statement (st->tx_begin), and
     * SK_SQL_DEFER ones with the next (counted in st->deferred): a
     * failure then surfaces there, or at the COMMIT. */
    const char *begin;
    /* Sends COMMIT (commit 1) or ROLLBACK with what waits; the engine
     * (sk_tx_end) calls it only when something was sent. */
    int (*end)(sk_store *st, int commit);
    void (*drop)(sk_store *st); /* the deferred writes dropped unsent; NULL: none */
    /* Statement q (sk_sql_text) for up to rows rows of parameters (1 for
     * a one-row statement); *got: the rows it takes (1..rows: the caller
     * runs the rest in further statements). Owned by the driver until
     * finish. SK_STORE_NONE (nothing prepared) when the dialect has no
     * such statement. */
    int (*prepare)(sk_store *st, int q, size_t rows, size_t *got, sk_stmt **out);
    /* Parameter i (0-based; past the statement's last: ignored). */
    void (*bind)(sk_stmt *s, int i, struct sk_val v);
    int (*step)(sk_stmt *s);               /* 1 a row, 0 done, or a negative code */
    int64_t (*col_i64)(sk_stmt *s, int c); /* NULL reads 0 */
    void (*col_text)(sk_stmt *s, int c, char *dst, size_t cap); /* NULL reads "" */
    int64_t (*changes)(sk_stmt *s); /* rows the step changed (matched, on MySQL) */
    void (*finish)(sk_stmt *s);
};

extern const struct sk_store_driver sk_store_sqlite, sk_store_pg, sk_store_mysql;
/* A driver's table: its static functions carry the members' names (a
 * driver that misses one does not compile). A server driver's statements
 * keep their parameters until sent (sk_srv_*: bind, changes). */
#define SK_STORE_DRIVER(name_, dialect_, begin_, drop_, bind_, changes_)                           \
    {                                                                                              \
        .name = name_, .dialect = dialect_, .open = open_, .close = close_, .enter = enter,        \
        .exec = exec, .begin = begin_, .end = end, .drop = drop_, .prepare = prepare,              \
        .bind = bind_, .step = step, .col_i64 = col_i64, .col_text = col_text,                     \
        .changes = changes_, .finish = finish                                                      \
    }

#define SK_STORE_ERR_MAX 512

struct sk_store {
    const struct sk_store_driver *drv;
    void *conn;         /* the driver's session */
    int timeout_s;      /* a server's bound of one wait (connect_timeout), 0 none */
    int owe_migrations; /* opened unconnected: the first call that connects migrates */
    char where[520];    /* the file, or host:port/db: messages (never a password) */
    char errstr[SK_STORE_ERR_MAX];
    char
        identity[SK_STORE_IDENTITY_MAX]; /* sk_store_identity's answer, read once ("" until then) */
    int in_tx;                           /* in a transaction (sk_tx_begin) */
    int broken;      /* a server's session to replace on the next call (the driver's enter) */
    int tx_begin;    /* its BEGIN waits for the first statement (a driver without .begin) */
    size_t deferred; /* SK_SQL_DEFER writes waiting for the next round trip */
};

/* Waiting modes of an open: SK_STORE_CONNECT fails when a server cannot
 * be reached; SK_STORE_TRY leaves the handle unconnected then, its
 * migrations owed, the reason on st; SK_STORE_LATER does the same
 * without trying (a handle beside one that just found the server down). */
enum { SK_STORE_CONNECT, SK_STORE_TRY, SK_STORE_LATER };
/* A driver's prepare of a statement its dialect does without. */
#define SK_STORE_NONE 1
/* sk_store_open with a waiting mode (the pool's handles). */
int sk_store_open_mode(sk_store **out, const char *spec, int waiting, char *err, size_t cap);

/* ---- for the drivers and the engine (store.c) ------------------------ */

/* Sets st->errstr to "<driver> <where>: <what>: <detail>" and returns
 * code. */
int sk_store_fail(sk_store *st, int code, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Sets st->errstr (printf-style) and returns code. */
#define sk_store_set_err(st, code, ...) sk_errf((st)->errstr, sizeof(st)->errstr, code, __VA_ARGS__)

/* A growing text (statements, array literals). oom is sticky: check it
 * once at the end; p is the caller's to free. */
struct sk_text {
    char *p;
    size_t len, cap;
    int oom;
};
/* Appends n bytes of s (and keeps p NUL-terminated). */
void sk_text_add(struct sk_text *b, const char *s, size_t n);
/* Room for n more bytes at p + len; 0, or -1 (oom set). */
int sk_text_room(struct sk_text *b, size_t n);

/* ---- the engine's runners (store.c) ---------------------------------- */

/* Start of every public call: the error cleared, the session entered,
 * the migrations owed run. */
int sk_store_enter(sk_store *st);
/* Runs statement q with parameters v[0..n) to its end; *changes (may be
 * NULL) the rows it changed. */
int sk_q_run(sk_store *st, int q, const struct sk_val *v, int n, int64_t *changes);
/* The first row of q into out by read: 1 found, 0 none, or a code. */
int sk_q_one(sk_store *st, int q, const struct sk_val *v, int n, sk_store_reader *read, void *out);
/* Every row of q (at most limit) into out, an array of size-byte
 * elements; *got rows read. */
int sk_q_fill(sk_store *st, int q, const struct sk_val *v, int n, sk_store_reader *read,
              size_t size, void *out, size_t limit, size_t *got);
/* Every row of q into a new array of size-byte elements (*out, the
 * caller frees it; NULL and *got 0 when none). */
int sk_q_all(sk_store *st, int q, const struct sk_val *v, int n, sk_store_reader *read, size_t size,
             void **out, size_t *got);
/* sk_q_all as a call of its own: the session entered first. */
int sk_store_all(sk_store *st, int q, const struct sk_val *v, int n, sk_store_reader *read,
                 size_t size, void **out, size_t *got);
/* Every row of q to read(st, s, out), the same out. */
int sk_q_each(sk_store *st, int q, const struct sk_val *v, int n, sk_store_reader *read, void *out);
/* A multi-row statement q over rows 0..nrows): bind(ctx, row, vals)
 * fills the row's parameters (strlen(sk_sql_types(q)) of them); each
 * result row goes to row(st, s, ctx) when row is not NULL; *changes (may
 * be NULL) adds the rows changed. The driver says how many rows one
 * statement takes; the rest go in the next ones. */
int sk_q_rows(sk_store *st, int q, size_t nrows,
              void (*bind)(void *ctx, size_t row, struct sk_val *vals),
              void (*row)(sk_store *st, sk_stmt *s, void *ctx), void *ctx, int64_t *changes);
/* A call's transaction: the session entered, begin, body(st, ctx),
 * commit; on failure rolled back with the failure's text kept. */
int sk_tx(sk_store *st, int (*body)(sk_store *st, void *ctx), void *ctx);
/* Begins a transaction (or leaves its BEGIN waiting). */
int sk_tx_begin(sk_store *st);
/* Ends a begun transaction: commit when rc is 0, else roll back keeping
 * the error text of rc; one whose BEGIN still waits sent nothing and has
 * nothing to end. Returns 0 or the failure's code. */
int sk_tx_end(sk_store *st, int rc);

/* ---- what the server drivers share (store.c) ------------------------- */

#define SK_SRV_PARAMS 32 /* the parameters of a one-row statement */
/* A server driver's statement: its parameters kept until it is sent (the
 * driver's struct sk_stmt begins with it). */
struct sk_srv_stmt {
    sk_store *st;
    int q;
    int ncols; /* a multi-row statement's row, else 0 */
    size_t rows, nvals;
    struct sk_val *vals;
    int sent;
    int64_t changes;
};
/* A new statement of size bytes (a struct sk_stmt beginning with struct
 * sk_srv_stmt) for q and up to rows rows (at most max_rows); text[q] (the
 * driver's cache: one row's text, expanded once) filled. The driver's
 * prepare; its finish frees it with sk_srv_free. */
int sk_srv_prepare(sk_store *st, char **text, int q, size_t rows, size_t max_rows, size_t size,
                   size_t *got, sk_stmt **out);
void sk_srv_bind(sk_stmt *s, int i, struct sk_val v);
int64_t sk_srv_changes(sk_stmt *s);
void sk_srv_free(sk_stmt *s);
/* SK_EDB "connection lost". */
int sk_srv_lost(sk_store *st, const char *what);
/* code with the first line of a server's message msg (NULL: none), at most
 * max bytes of it; an empty line is "connection lost" when lost is set. */
int sk_srv_fail_line(sk_store *st, int code, const char *what, const char *msg, int max, int lost);
/* An idle session's socket fd readable (the server closed it: a FATAL
 * or EOF; nothing else arrives unasked), or no socket: 1. */
int sk_srv_idle_closed(int fd);

/* The webhook endpoints of activity aid and their cursors deleted (the
 * activity's delete; store_webhooks.c). */
int sk_store_webhooks_drop(sk_store *st, uint64_t aid);
/* SK_ENOTFOUND, "activity <id> not found" / "order <id> not found". */
int sk_store_no_activity(sk_store *st, uint64_t id);
int sk_store_no_order(sk_store *st, const char *order_id);
/* An id no SQL bigint holds (>= 2^63): no such activity. */
int sk_store_id_beyond_sql(uint64_t id);
/* "created" | "paid" | "cancelled" -> enum sk_order_status; -1 another. */
int sk_store_status_from_text(const char *t);

/* An audit row (store_activity.c), alone or in the caller's
 * transaction; detail cut to the column's size. */
int sk_store_audit_row(sk_store *st, int64_t at_ms, uint64_t activity_id, const char *kind,
                       const char *detail);
/* The outbox (store_events.c). An event of an order (o: its fields after
 * the change) or, with o NULL, of activity aid, in the caller's
 * transaction; its seq the subject's next. payload: NULL builds the
 * order's (sk_store_order_payload) or {"v", "activity_id"}. */
int sk_store_event(sk_store *st, const char *type, uint64_t aid, const struct sk_order *o,
                   int64_t now_ms, const char *pay_ref, const char *payload);
/* The JSON of order o (its status after the change; pay_ref NULL or "":
 * none) into dst (cap bytes, at least SK_STORE_PAYLOAD_MAX): its
 * length, or a negative code when it does not fit. */
int sk_store_order_payload(char *dst, size_t cap, const struct sk_order *o, const char *pay_ref);
/* An order.created's payload (its order's fields as persisted) into e. */
void sk_store_created_payload(struct sk_event *e, uint64_t user_id, int64_t quantity,
                              int64_t created_ms, int64_t pay_deadline_ms);
/* "activity-<aid>" into dst. */
void sk_store_activity_subject(char *dst, size_t cap, uint64_t aid);
/* The events of an activity's state set to state (opened / closed), in the
 * caller's transaction after the change: none when the state did not move
 * to open or closed. */
int sk_store_event_state(sk_store *st, uint64_t aid, const char *before, const char *state,
                         int64_t now_ms);

/* Migrations (store_schema.c): brings st's schema up to date; 0 or a
 * code, SK_EDB with "(schema migration N failed)" or "newer than this
 * binary". */
int sk_store_migrate(sk_store *st);
/* The schema version now in the database. */
int sk_store_read_version(sk_store *st, int *v);
/* An order's checks before it is written (store_persist.c): i is its
 * place in the batch, for the message. */
int sk_store_check_order(sk_store *st, const struct sk_order *o, size_t i);

#endif
