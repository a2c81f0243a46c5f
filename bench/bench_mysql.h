/* bench_mysql.h - the benchmarks' admin session to a MySQL / MariaDB
 * server (not the store's: the store is store.h): connect from a mysql://
 * URL, run a statement, describe the server's durability settings, and the
 * fresh database a phase writes into. */
#ifndef SK_BENCH_MYSQL_H
#define SK_BENCH_MYSQL_H
#include <stddef.h>

struct st_mysql;

/* Connects to the server of url (its database, multi-statements on);
 * NULL with the reason in err (cap bytes; never the password). The caller
 * closes it with sk_bench_my_close. */
struct st_mysql *sk_bench_my_connect(const char *url, char *err, size_t cap);
void sk_bench_my_close(struct st_mysql *m);
/* Runs sql (results dropped): 0, or -1 with the reason in err. */
int sk_bench_my_exec(struct st_mysql *m, const char *sql, char *err, size_t cap);
/* The first column of the first row of sql as a number (-1 on failure). */
long long sk_bench_my_int(struct st_mysql *m, const char *sql);
/* "MariaDB 10.11.19: innodb_flush_log_at_trx_commit=1, ..." into out. */
void sk_bench_my_describe(struct st_mysql *m, char *out, size_t cap);
/* url with its database replaced by db (and its parameters kept) into out. */
int sk_bench_my_url_with_db(const char *url, const char *db, char *out, size_t cap);

#endif
