/* mysql_harness.h - private MariaDB servers for the tests, made by the
 * spawner (tests/support/spawn/mysql_spawn.h).
 *
 * One mariadb-install-db per test run makes a template data directory;
 * every server is a copy of it on a free 127.0.0.1 port, in a temporary
 * directory, with innodb_flush_log_at_trx_commit=2 and the doublewrite
 * buffer off (speed: test data need not survive a power cut; a killed
 * server keeps every commit, the OS has it).
 *
 * The shared server: a test file that uses MariaDB says SK_TH_MY_USED
 * once; the runner then starts one server before the first such test and
 * every later test shares it, as with PostgreSQL (pg_harness.h). Each test
 * takes a fresh database of its own (sk_th_my_fresh_db). Servers die with
 * the process that started them (PR_SET_PDEATHSIG) and are stopped
 * cleanly at the runner's exit. */
#ifndef SK_MYSQL_HARNESS_H
#define SK_MYSQL_HARNESS_H
#include <stddef.h>

#include "tests/support/spawn/mysql_spawn.h"

/* Marks the including test file as a MariaDB user (see above). */
void sk_th_my_use_file(const char *file);
#define SK_TH_MY_USED                                                                              \
    __attribute__((constructor)) static void sk_th_my_used_(void)                                  \
    {                                                                                              \
        sk_th_my_use_file(__FILE__);                                                               \
    }

/* One server: the spawner's record (srv.pid, srv.port, srv.dir, srv.url). */
struct sk_th_my {
    struct sk_mysql_spawn srv;
};

/* URL of the run's shared server (database "mysql"), started on first
 * need. Fails the test when it could not start. */
const char *sk_th_my_url(void);

/* The unix socket of the shared server (started on first need). */
const char *sk_th_my_socket(void);

/* Creates a fresh, empty database t<n> on the shared server and writes
 * its mysql:// URL into url_out (cap bytes). */
void sk_th_my_fresh_db(char *url_out, size_t cap);

/* A private server, for tests that stop, freeze or kill it. */
void sk_th_my_start(struct sk_th_my *m);
/* Clean shutdown (thawed first), waits for the exit. The directory stays. */
void sk_th_my_stop(struct sk_th_my *m);
/* SIGKILL: a crash; the data directory stays for sk_th_my_restart. */
void sk_th_my_kill(struct sk_th_my *m);
/* Starts it again on the same port and data directory. */
void sk_th_my_restart(struct sk_th_my *m);
/* SIGSTOP (frozen = 1) or SIGCONT (0) of the server. */
void sk_th_my_freeze(struct sk_th_my *m, int frozen);
/* Creates database `name` on m and writes its URL into url_out. */
void sk_th_my_create_db(const struct sk_th_my *m, const char *name, char *url_out, size_t cap);

/* Raw SQL (several statements may be ';'-separated) on the database of
 * url, under the store: 0 done, 1 refused by a constraint or a value the
 * strict SQL mode refuses (SQLSTATE 23xxx, 22xxx), -1 another failure. */
int sk_th_my_sql(const char *url, const char *sql);
/* One integer from raw SQL (the first column of the first row). */
long long sk_th_my_int(const char *url, const char *sql);

/* Runs sql on a session of its own on the database of url and keeps that
 * session open - its transaction and the locks it holds with it - until
 * sk_th_my_release closes it (an open transaction rolls back). Fails the
 * test when sql fails. Allocated here, freed by sk_th_my_release. */
struct sk_th_my_held;
struct sk_th_my_held *sk_th_my_hold(const char *url, const char *sql);
void sk_th_my_release(struct sk_th_my_held *h);

#endif
