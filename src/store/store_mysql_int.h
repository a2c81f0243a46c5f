/* store_mysql_int.h - what the files of the MySQL / MariaDB backend share
 * (store_mysql_conn.c: the session; store_mysql.c: schema, activities,
 * the ops table; store_mysql_persist.c: the persist batch;
 * store_mysql_orders.c: orders, audit, marks, repair).
 * The backend's only public entry is sk_store_mysql_open (store_int.h). */
#ifndef SK_STORE_MYSQL_INT_H
#define SK_STORE_MYSQL_INT_H
#include <stddef.h>
#include <stdint.h>

#include <mysql.h>

#include "store/store_int.h"

/* ---- the session (store_mysql_conn.c) ---- */

/* Parses url (mysql_url.h), connects and sets the session up (READ
 * COMMITTED, strict SQL mode, utf8mb4, lock and statement bounds just
 * under the client's). st->my_url is allocated here and kept for
 * reconnects; sk_my_disconnect frees it. SK_EINVAL for a malformed URL,
 * SK_EDB when the server cannot be reached, refuses us or is too old. */
int sk_my_connect(sk_store *st, const char *url, int now);
/* Closes the connection and wipes and frees st->my_url. */
void sk_my_disconnect(sk_store *st);
/* Start of every call: a connection marked broken, or one whose idle
 * socket became readable (the server said goodbye), is replaced first. */
int sk_my_enter(sk_store *st);

/* Runs sql: one statement, or several separated by ';' (sent as one
 * round trip). *res (res may be NULL) gets the result set of the last
 * statement that returned rows: the caller frees it with
 * mysql_free_result. affected[i] (i < naff; affected may be NULL) gets the
 * rows matched by statement i (found rows, not changed rows), -1 for a
 * statement that returned rows. Statements after a failing one are not
 * run; the failure's SK code is returned with st->errstr "mysql WHERE:
 * what: message". A lost or timed-out connection is marked broken. */
int sk_my_run(sk_store *st, const char *what, const char *sql, size_t len, MYSQL_RES **res,
              long long *affected, size_t naff);
/* sk_my_run of a NUL-terminated statement list without results. */
int sk_my_cmd(sk_store *st, const char *what, const char *sql);
/* Ends the transaction: COMMIT when rc is 0, else ROLLBACK keeping the
 * error of rc (a broken connection rolled back on the server itself). */
int sk_my_finish_tx(sk_store *st, int rc, const char *what);
/* The last insert's AUTO_INCREMENT id. */
uint64_t sk_my_insert_id(sk_store *st);
/* MariaDB's bulk execution: sql (one statement, its parameters bound
 * column-wise by b, an array per column) run for rows parameter sets in
 * one round trip, prepared once per session (st->my_bulk: one sql per
 * store). Errors as sk_my_run. */
int sk_my_bulk(sk_store *st, const char *what, const char *sql, MYSQL_BIND *b, unsigned rows);

/* ---- statement text ---- */

/* A growing statement. oom is sticky: check it once before running. */
struct sk_my_sql {
    char *p;
    size_t len, cap;
    int oom;
};
void sk_my_sql_add(struct sk_my_sql *b, const char *s);
void sk_my_sql_addf(struct sk_my_sql *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Appends the n bytes of s as a quoted, escaped string literal. */
void sk_my_sql_str(sk_store *st, struct sk_my_sql *b, const char *s, size_t n);
/* sk_my_sql_str of the NUL-terminated s. */
void sk_my_sql_strz(sk_store *st, struct sk_my_sql *b, const char *s);
void sk_my_sql_free(struct sk_my_sql *b);
/* Runs b (SK_ENOMEM when it ran out of memory), as sk_my_run. */
int sk_my_run_sql(sk_store *st, const char *what, struct sk_my_sql *b, MYSQL_RES **res,
                  long long *affected, size_t naff);

/* ---- rows ---- */

/* Column c of r as an int64 (NULL reads 0). */
int64_t sk_my_i64(MYSQL_ROW r, int c);
/* Column c of r copied into dst (cap bytes; NULL reads ""). */
void sk_my_text(MYSQL_RES *res, MYSQL_ROW r, int c, char *dst, size_t cap);
/* Row row of res into dst by read (store_row.c). */
void sk_my_read_row(MYSQL_RES *res, MYSQL_ROW row, sk_store_row_reader *read, void *dst);
/* Runs b (freed here) for its rows: *r the result (the caller frees it
 * with mysql_free_result; NULL when the statement returned none). */
int sk_my_query(sk_store *st, const char *what, struct sk_my_sql *b, MYSQL_RES **r);
/* Runs b (freed here) and calls fn(res, row, arg) for each row it
 * returned. */
int sk_my_each_row(sk_store *st, const char *what, struct sk_my_sql *b,
                   void (*fn)(MYSQL_RES *res, MYSQL_ROW row, void *arg), void *arg);
/* Runs b (freed here) and reads every row into a calloc'd array of
 * size-byte elements by read. *out (the caller
 * frees it) is NULL and *n 0 when no row came back. */
int sk_my_read_all(sk_store *st, const char *what, struct sk_my_sql *b, size_t size,
                   sk_store_row_reader *read, void **out, size_t *n);

/* The members of the backend's ops table (store_int.h says what each
 * does). */
SK_STORE_OPS_DECLARE(sk_my)

#endif
