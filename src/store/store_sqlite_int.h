/* store_sqlite_int.h - what the files of the SQLite backend share
 * (store_sqlite.c: opening, schema, the kept statements, activities, the
 * ops table; store_sqlite_persist.c: the persist batch;
 * store_sqlite_orders.c: orders, audit, marks, repair). The backend's only
 * public entry is sk_store_sqlite_open (store_int.h). */
#ifndef SK_STORE_SQLITE_INT_H
#define SK_STORE_SQLITE_INT_H
#include <sqlite3.h>

#include "store/store_int.h"

/* Statements kept prepared on the handle (st->sq; the persist path runs
 * them per batch or per activity, the reads per poll; the persist's
 * multi-row inserts are st->sq_ins, store_sqlite_persist.c). */
enum {
    Q_PAY_TIMEOUT,
    Q_TAKE_STOCK,
    Q_READ_STOCK,
    Q_INSERT_FAILURE,
    Q_UPSERT_MARK,
    Q_READ_HOLDER,
    Q_ORDER_GET,
    Q_ACTIVITY_GET,
    Q_COUNT
};

/* SQLite failure -> SK code (a unique key EEXIST, busy ETIMEDOUT, a CHECK
 * EINVAL, the rest EDB), with the database's own message after what. */
int sk_sq_err(sk_store *st, const char *what);
/* Runs sql (no parameters, no rows). */
int sk_sq_exec(sk_store *st, const char *sql, const char *what);
/* Prepares sql into *stmt (the caller finalizes it); *stmt NULL on
 * failure. */
int sk_sq_prepare(sk_store *st, sqlite3_stmt **stmt, const char *sql);
/* One parameter of a statement: text when set (bound as a copy), else
 * num. */
struct sk_sq_arg {
    const char *text;
    int64_t num;
};
/* Prepares sql into *stmt (the caller finalizes it) with args[0..n) bound
 * as its parameters 1..n; *stmt NULL on failure. */
int sk_sq_prepare_args(sk_store *st, sqlite3_stmt **stmt, const char *sql,
                       const struct sk_sq_arg *args, int n);
/* Runs sql (no rows) with args[0..n) bound; what names it in an error. */
int sk_sq_run(sk_store *st, const char *sql, const struct sk_sq_arg *args, int n, const char *what);
/* The kept statement which (Q_*), prepared on first use, reset and
 * unbound, ready to bind; owned by the handle (reset it, never finalize). */
int sk_sq_cached(sk_store *st, int which, sqlite3_stmt **out);
/* Ends a transaction: COMMIT when rc is 0, else ROLLBACK keeping the
 * error text of rc. */
int sk_sq_finish_tx(sk_store *st, int rc, const char *what);
/* The activity's pay timeout in seconds into *secs; *found 0 (and the
 * default timeout) when the activity row is absent. */
int sk_sq_pay_timeout(sk_store *st, uint64_t aid, int64_t *secs, int *found);
/* The current row of s into dst by read (store_row.c). */
void sk_sq_read_row(sqlite3_stmt *s, sk_store_row_reader *read, void *dst);
/* The row of kept statement q (Q_*) with its one parameter (text_key,
 * or int_key when text_key is NULL) into out by read: 1 found, 0 none, or
 * a negative code. */
int sk_sq_read_one(sk_store *st, int q, const char *what, const char *text_key, int64_t int_key,
                   sk_store_row_reader *read, void *out);
/* The first row of sql with args[0..n) bound into out by read: 1 found,
 * 0 none, or a negative code. */
int sk_sq_query_one(sk_store *st, const char *sql, const struct sk_sq_arg *args, int n,
                    const char *what, sk_store_row_reader *read, void *out);
/* Steps s (prepared and bound; finalized here) and reads every row into
 * a growing array of size-byte elements by read.
 * *out (the caller frees it) stays NULL and *n 0 when no row came back. */
int sk_sq_read_all(sk_store *st, sqlite3_stmt *s, const char *what, size_t size,
                   sk_store_row_reader *read, void **out, size_t *n);

/* The members of the backend's ops table (store_int.h says what each
 * does). */
SK_STORE_OPS_DECLARE(sk_sq)

#endif
