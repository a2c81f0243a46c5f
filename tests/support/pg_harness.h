/* pg_harness.h - private PostgreSQL clusters for the tests, made by the
 * spawner (tests/support/spawn/pg_spawn.h).
 *
 * One initdb per test run makes a template data directory (the slow part,
 * ~0.6 s); every cluster is a copy of it on a free port, in a temporary
 * directory, listening on 127.0.0.1 and on a socket directory of its own,
 * with fsync=off and full_page_writes=off (speed: test data need not
 * survive a power cut). initdb and postgres refuse to run as root: when
 * the runner is root they run as the `postgres` system user, which owns
 * the cluster directory.
 *
 * The shared cluster: a test file that uses PostgreSQL says SK_TH_PG_USED
 * once; the runner then starts one cluster before the first such test (so
 * a run that selects none never pays for it) and every later test shares
 * it, the way the run shares one redis-server. Each test takes a fresh
 * database of its own (sk_th_pg_fresh_db). Clusters die with the process
 * that started them (PR_SET_PDEATHSIG), even on a crash, and are stopped
 * cleanly at the runner's exit. */
#ifndef SK_PG_HARNESS_H
#define SK_PG_HARNESS_H
#include <stddef.h>

#include "tests/support/spawn/pg_spawn.h"

/* Marks the including test file as a PostgreSQL user (see above). */
void sk_th_pg_use_file(const char *file);
#define SK_TH_PG_USED                                                                              \
    __attribute__((constructor)) static void sk_th_pg_used_(void)                                  \
    {                                                                                              \
        sk_th_pg_use_file(__FILE__);                                                               \
    }

/* One cluster: the spawner's record (srv.pid, srv.port, srv.dir, srv.url). */
struct sk_th_pg {
    struct sk_pg_spawn srv;
};

/* URL of the run's shared cluster (maintenance database "postgres"),
 * started on first need. Fails the test when it could not start. */
const char *sk_th_pg_url(void);

/* Creates a fresh, empty database t<n> on the shared cluster and writes
 * its postgres:// URL into url_out (cap bytes). */
void sk_th_pg_fresh_db(char *url_out, size_t cap);

/* A private cluster, for tests that stop or freeze the server. Fails the
 * test when it cannot start. */
void sk_th_pg_start(struct sk_th_pg *pg);
/* Fast shutdown (SIGINT: what `pg_ctl stop -m fast` sends; a frozen server
 * is thawed first), waits for the postmaster to exit (SIGKILL after 15 s).
 * The directory stays, removed with the runner's temporary root. */
void sk_th_pg_stop(struct sk_th_pg *pg);
/* Starts it again on the same port and data directory. */
void sk_th_pg_restart(struct sk_th_pg *pg);
/* SIGSTOP (frozen = 1) or SIGCONT (0) of the whole server: the postmaster
 * and every backend, so open connections hang too. */
void sk_th_pg_freeze(struct sk_th_pg *pg, int frozen);
/* Creates database `name` on pg and writes its URL into url_out. */
void sk_th_pg_create_db(const struct sk_th_pg *pg, const char *name, char *url_out, size_t cap);

#endif
