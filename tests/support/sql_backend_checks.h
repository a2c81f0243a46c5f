/* sql_backend_checks.h - the steps the test files of the SQL server
 * backends (PostgreSQL in test_store_backends.c, MariaDB in
 * test_store_mysql.c) share: an unreachable server refused clearly, the
 * CLI run against one database, the marks of an activity counted, and
 * one outage of a private server run on a store. Each fails the test
 * when what it checks does not hold. */
#ifndef SK_TEST_SQL_BACKEND_CHECKS_H
#define SK_TEST_SQL_BACKEND_CHECKS_H
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"
#include "support/store_faults.h"

/* Opening url (a server where nothing listens) fails with SK_EDB within
 * 3 s, leaves no handle, says "cannot connect" and never prints secret
 * (the password in url). */
void sk_th_open_unreachable(const char *url, const char *secret);

/* `seckill [cmd] args... --redis <the run's> --db db` (cmd may be NULL,
 * args NULL-terminated); the output into out (cap bytes), the exit code
 * returned. */
int sk_th_db_cli(const char *db, const char *cmd, char *out, size_t cap, const char *const *args);
#define SK_TH_DB_CLI(db, cmd, out, ...)                                                            \
    sk_th_db_cli(db, cmd, out, sizeof out, (const char *const[]){__VA_ARGS__, NULL})

/* The marks of activity_id (0: of every activity), which must be n.
 * Allocated by the store; the caller frees them. */
struct sk_mark *sk_th_marks_n(sk_store *st, uint64_t activity_id, size_t n);

/* The outage fault of d's server (0 stopped, 1 killed -9, 2 frozen:
 * sk_th_store_fault_stopped or _frozen) on a store of a fresh database
 * "fault" that create_db makes on d->srv (writing its URL into url, cap
 * bytes), opened with connect_timeout=2 and holding activity 1 (stock
 * 1000, two per buyer); the store is closed after, the server stays. */
void sk_th_store_fault_on(const struct sk_th_db_server *d,
                          void (*create_db)(void *srv, const char *name, char *url, size_t cap),
                          int fault);

#endif
