/* store_mysql_int.h - what the files of the MySQL / MariaDB backend share
 * (store_mysql_conn.c: the session; store_mysql.c: schema, activities,
 * the ops table; store_mysql_orders.c: orders, audit, marks, repair).
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
int sk_my_connect(sk_store *st, const char *url);
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
void sk_my_sql_free(struct sk_my_sql *b);
/* Runs b (SK_ENOMEM when it ran out of memory), as sk_my_run. */
int sk_my_run_sql(sk_store *st, const char *what, struct sk_my_sql *b, MYSQL_RES **res,
                  long long *affected, size_t naff);

/* ---- rows ---- */

/* Column c of r as an int64 (NULL reads 0). */
int64_t sk_my_i64(MYSQL_ROW r, int c);
/* Column c of r copied into dst (cap bytes; NULL reads ""). */
void sk_my_text(MYSQL_RES *res, MYSQL_ROW r, int c, char *dst, size_t cap);

/* ---- the ops in store_mysql_orders.c ---- */

int sk_my_orders_persist(sk_store *st, const struct sk_order *orders, size_t n,
                         struct sk_persist_result *res, struct sk_stock_failure *first);
int sk_my_order_get(sk_store *st, const char *order_id, struct sk_order *out);
int sk_my_order_pay(sk_store *st, const char *order_id, int64_t now_ms, int *before);
int sk_my_order_cancel(sk_store *st, const char *order_id, int64_t now_ms, int *before);
int sk_my_orders_expired(sk_store *st, int64_t now_ms, size_t limit, struct sk_order *out,
                         size_t *n);
int sk_my_orders_list(sk_store *st, uint64_t activity_id, const char *lo, const char *hi,
                      size_t limit, struct sk_order *out, size_t *n);
int sk_my_orders_count(sk_store *st, uint64_t activity_id, struct sk_order_counts *out);
int sk_my_audit_add(sk_store *st, int64_t at_ms, uint64_t activity_id, const char *kind,
                    const char *detail);
int sk_my_audit_list(sk_store *st, uint64_t activity_id, struct sk_audit **out, size_t *n);
int sk_my_marks_list(sk_store *st, uint64_t activity_id, struct sk_mark **out, size_t *n);
int sk_my_order_mark_released(sk_store *st, const char *order_id, int64_t now_ms);
int sk_my_orders_unreleased(sk_store *st, const char *after, size_t limit, struct sk_order *out,
                            size_t *n);
int sk_my_db_stock_check(sk_store *st, uint64_t id, int64_t *stock, int64_t *expected);
int sk_my_db_stock_repair(sk_store *st, uint64_t id, int64_t now_ms, int64_t *before,
                          int64_t *after);
int sk_my_order_restore(sk_store *st, const struct sk_order *o, int64_t now_ms,
                        const char *audit_detail);

#endif
