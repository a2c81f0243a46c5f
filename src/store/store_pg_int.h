/* store_pg_int.h - what the files of the PostgreSQL backend share
 * (pg_conn.c: the session and the helpers for parameters and results;
 * store_pg.c: schema, activities, the ops table; store_pg_persist.c: the
 * persist batch; store_pg_orders.c: orders, audit, marks, repair). The
 * backend's only public entry is sk_store_pg_open (store_int.h); the
 * functions below are the members of its ops table (store_int.h says what
 * each does). */
#ifndef SK_STORE_PG_INT_H
#define SK_STORE_PG_INT_H
#include "store/pg_conn_int.h"

/* ---- store_pg_persist.c ---- */
int sk_pg_orders_persist(sk_store *st, const struct sk_order *orders, size_t n,
                         struct sk_persist_result *res, struct sk_stock_failure *first);

/* ---- store_pg_orders.c ---- */
int sk_pg_order_get(sk_store *st, const char *order_id, struct sk_order *out);
int sk_pg_order_pay(sk_store *st, const char *order_id, int64_t now_ms, int *before);
int sk_pg_order_cancel(sk_store *st, const char *order_id, int64_t now_ms, int *before);
int sk_pg_orders_expired(sk_store *st, int64_t now_ms, size_t limit, struct sk_order *out,
                         size_t *n);
int sk_pg_orders_list(sk_store *st, uint64_t activity_id, const char *lo, const char *hi,
                      size_t limit, struct sk_order *out, size_t *n);
int sk_pg_orders_count(sk_store *st, uint64_t activity_id, struct sk_order_counts *out);
int sk_pg_order_mark_released(sk_store *st, const char *order_id, int64_t now_ms);
int sk_pg_orders_unreleased(sk_store *st, const char *after, size_t limit, struct sk_order *out,
                            size_t *n);
int sk_pg_audit_add(sk_store *st, int64_t at_ms, uint64_t activity_id, const char *kind,
                    const char *detail);
int sk_pg_audit_list(sk_store *st, uint64_t activity_id, struct sk_audit **out, size_t *n);
int sk_pg_marks_list(sk_store *st, uint64_t activity_id, struct sk_mark **out, size_t *n);
int sk_pg_db_stock_check(sk_store *st, uint64_t id, int64_t *stock, int64_t *expected);
int sk_pg_db_stock_repair(sk_store *st, uint64_t id, int64_t now_ms, int64_t *before,
                          int64_t *after);
int sk_pg_order_restore(sk_store *st, const struct sk_order *o, int64_t now_ms,
                        const char *audit_detail);

#endif
