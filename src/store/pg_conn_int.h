/* pg_conn_int.h - the libpq session of the PostgreSQL store (pg_conn.c),
 * for the store_pg*.c files only: connecting with bounded timeouts, statements whose
 * answer is awaited against a deadline, the prepared hot reads, and the
 * reset of a session that failed, and the helpers every statement uses
 * (text parameters, reading numbers, ending a transaction, reading a
 * result into an array). Every function returns 0 or a negative
 * SK_E* code with the detail on the store (sk_store_set_err). */
#ifndef SK_PG_CONN_INT_H
#define SK_PG_CONN_INT_H
#include <libpq-fe.h>

#include "store/store_int.h"

/* Statements prepared once per session (the hot reads of the HTTP
 * processes: an order poll, an activity read; the persist batch's
 * statements, store_pg_persist.c): the server parses and plans them once
 * instead of on every call. Bit q of st->pg_prepared says PGQ q is
 * prepared on the current session. */
enum {
    PGQ_ORDER_GET,
    PGQ_ACTIVITY_GET,
    PGQ_PERSIST_NEW,  /* the batch's orders, none present (a plain INSERT) */
    PGQ_PERSIST_SOME, /* the batch's orders, some present (ON CONFLICT DO NOTHING RETURNING) */
    PGQ_TAKE_STOCK,   /* the summed conditional stock update per activity */
    PGQ_COUNT
};

/* Connects st->pg to url (libpq's URL or key=value form) with the
 * store's defaults (connect_timeout 5 s, keepalives, tcp_user_timeout, a
 * server statement_timeout just under the client bound), non-blocking.
 * The URL's password never reaches an error message. now 0: only sets the
 * session up (libpq's non-blocking start, never waited for) and fails
 * with SK_EDB "not connected yet"; the next call connects. */
int sk_pg_connect(sk_store *st, const char *url, int now);

/* Start of every call: resets the session first when it failed before or
 * the server said goodbye while it was idle. */
int sk_pg_enter(sk_store *st);

/* Runs one command string and returns its last result (*out: the caller
 * PQclears it; out may be NULL). nparams == 0 sends it by the simple
 * protocol, so it may hold several statements; otherwise one statement
 * with text parameters. Bounded by st->pg_timeout_ms: a server that does
 * not answer leaves the session marked broken and the call failing with
 * SK_EDB. */
int sk_pg_run(sk_store *st, PGresult **out, const char *what, const char *sql, int nparams,
              const char *const *params);
/* Prepared statement q (PGQ_*), prepared on this session first when
 * needed; as sk_pg_run otherwise. A failure other than a refused value
 * (SK_EINVAL, SK_EEXIST) resets the session on the next call. */
int sk_pg_run_prepared(sk_store *st, PGresult **out, const char *what, int q, int nparams,
                       const char *const *params);
/* The SQL of the persist's prepared statements (store_pg_persist.c),
 * indexed by PGQ_*; NULL for the others. */
extern const char *const sk_pg_persist_sql[PGQ_COUNT];
/* sk_pg_run without parameters or result. */
int sk_pg_cmd(sk_store *st, const char *sql, const char *what);

/* Decimal text of a number, for a text parameter. */
struct sk_pg_num {
    char s[24];
};
struct sk_pg_num sk_pg_num_i64(int64_t v);
struct sk_pg_num sk_pg_num_u64(uint64_t v);
/* A BIGINT column of a result; NULL reads as 0. */
int64_t sk_pg_i64(const PGresult *r, int row, int col);
/* Rows changed by the last command (PQcmdTuples). */
long sk_pg_changed(PGresult *r);

/* Ends a transaction: COMMIT when rc is 0, else ROLLBACK keeping the
 * error of rc (a broken connection rolls back on the server by itself). */
int sk_pg_finish_tx(sk_store *st, int rc, const char *what);

/* Row `row` of r into dst by read (store_row.c). */
void sk_pg_read_row(const PGresult *r, int row, sk_store_row_reader *read, void *dst);
/* The row of prepared statement q (PGQ_*) with the one parameter key
 * into out by read, sk_pg_enter first: 1 found, 0 none, or a negative
 * code. */
int sk_pg_read_one(sk_store *st, const char *what, int q, const char *key,
                   sk_store_row_reader *read, void *out);
/* Runs sql (as sk_pg_run) and reads every row into a calloc'd array of
 * size-byte elements by read. *out (the caller
 * frees it) is NULL and *n 0 when no row came back. */
int sk_pg_read_all(sk_store *st, const char *what, const char *sql, int nparams,
                   const char *const *params, size_t size, sk_store_row_reader *read, void **out,
                   size_t *n);

#endif
