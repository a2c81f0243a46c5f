/* store_int.h - what store.c and the store backends share: the handle and
 * the table of backend functions. Callers use store.h only.
 *
 * store.c parses the spec, allocates the handle, calls the backend's open,
 * and every public sk_store_* function dispatches through st->ops. A new
 * store.h function therefore needs: a member here, a dispatcher in store.c,
 * and a static implementation in store_sqlite.c and store_pg.c (a NULL
 * member makes the dispatcher fail with SK_EINVAL "not supported").
 *
 * The handle keeps the backends' fields in an anonymous union so the SQLite
 * code reads st->db / st->path as it always did. */
#ifndef SK_STORE_INT_H
#define SK_STORE_INT_H
#include "store/store.h"

struct sqlite3;
struct sqlite3_stmt;
struct pg_conn;

/* The first failed conditional stock update of a persist batch; both
 * backends fill it and log it with sk_store_log_stock_failures. */
struct sk_stock_failure {
    char order_id[SK_STORE_ORDER_ID_MAX];
    uint64_t aid;
    int64_t qty, db_stock;
    int has_row; /* 0: the activity row is missing */
};

/* One warning line per batch for n failed conditional updates. */
void sk_store_log_stock_failures(size_t n, const struct sk_stock_failure *first);

struct sk_store_ops {
    const char *name;            /* "sqlite" | "postgres", for messages */
    void (*close)(sk_store *st); /* releases backend resources, not st */
    int (*schema_version)(sk_store *st, int *version);
    int (*activity_insert)(sk_store *st, const struct sk_activity *a);
    int (*activity_get)(sk_store *st, uint64_t id, struct sk_activity *out);
    int (*activity_list)(sk_store *st, struct sk_activity **out, size_t *n);
    int (*activity_set_state)(sk_store *st, uint64_t id, const char *state);
    int (*activity_delete)(sk_store *st, uint64_t id);
    /* Orders and audit (store.h "Orders"). */
    int (*orders_persist)(sk_store *st, const struct sk_order *orders, size_t n,
                          struct sk_persist_result *res);
    int (*order_get)(sk_store *st, const char *order_id, struct sk_order *out);
    int (*order_pay)(sk_store *st, const char *order_id, int64_t now_ms, int *status_out);
    int (*order_cancel)(sk_store *st, const char *order_id, int64_t now_ms, int *prev_status);
    int (*orders_expired)(sk_store *st, int64_t now_ms, size_t limit, struct sk_order *out,
                          size_t *n);
    int (*orders_list)(sk_store *st, uint64_t activity_id, const char *after, size_t limit,
                       struct sk_order *out, size_t *n);
    int (*orders_count)(sk_store *st, uint64_t activity_id, struct sk_order_counts *out);
    int (*audit_add)(sk_store *st, int64_t at_ms, uint64_t activity_id, const char *kind,
                     const char *detail);
    int (*audit_list)(sk_store *st, uint64_t activity_id, struct sk_audit **out, size_t *n);
    int (*activity_set_db_stock)(sk_store *st, uint64_t id, int64_t stock);
    int (*activity_ids)(sk_store *st, uint64_t **out, size_t *n);
    /* Payment timeout and reconciliation (store.h, migration 3). */
    int (*order_mark_released)(sk_store *st, const char *order_id, int64_t now_ms);
    int (*orders_unreleased)(sk_store *st, const char *after, size_t limit, struct sk_order *out,
                             size_t *n);
    int (*db_stock_check)(sk_store *st, uint64_t id, int64_t *stock, int64_t *expected);
    int (*db_stock_repair)(sk_store *st, uint64_t id, int64_t now_ms, int64_t *before,
                           int64_t *after);
    int (*order_restore)(sk_store *st, const struct sk_order *o, int64_t now_ms,
                         const char *audit_detail);
};

#define SK_STORE_ERR_MAX 512

struct sk_store {
    const struct sk_store_ops *ops;
    char errstr[SK_STORE_ERR_MAX];
    union {
        struct { /* store_sqlite.c */
            struct sqlite3 *db;
            char path[512];
            struct sqlite3_stmt *sq[8]; /* statements kept prepared (persist path) */
        };
        struct { /* store_pg.c */
            struct pg_conn *pg;
            char pg_where[192]; /* host:port/dbname, never the password */
            int pg_timeout_ms;  /* client-side bound of one statement */
            int pg_broken;      /* reset the connection on the next call */
        };
    };
};

/* Backend opens: fill st (ops included) from the part of the spec they
 * own. On failure st->errstr says why; the caller then runs
 * st->ops->close (when st->ops is set) and frees st. */
int sk_store_sqlite_open(sk_store *st, const char *path);
int sk_store_pg_open(sk_store *st, const char *url);

#endif
