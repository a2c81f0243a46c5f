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

/* The members of the backend's ops table (store_int.h says what each
 * does). */
SK_STORE_OPS_DECLARE(sk_pg)

#endif
