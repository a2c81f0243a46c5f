/* pg_spawn.h - a private PostgreSQL server for the binary's own use (the
 * strategy benchmark): initdb into a fresh temporary directory, postmaster
 * on a free loopback port and a socket directory of its own, stopped and
 * removed at the end. It dies with the thread that started it
 * (PR_SET_PDEATHSIG), even on a crash of this process.
 *
 * initdb and postgres refuse to run as root: when this process is root they
 * run as the `postgres` system user (the Debian package creates it), which
 * then owns the directory. The server binaries are the newest of
 * /usr/lib/postgresql/<version>/bin, or $SECKILL_PG_BIN.
 *
 * tests/pg_harness.c does the same for the test runner (template cluster
 * shared by many tests, hooks into the runner); it is kept separate because
 * it reports through the harness and copies one initdb into many clusters. */
#ifndef SK_PG_SPAWN_H
#define SK_PG_SPAWN_H
#include <sys/types.h>

struct sk_pg_spawn {
    pid_t pid;          /* the postmaster, 0 when not running */
    int port;           /* 127.0.0.1 port it listens on */
    char dir[256];      /* data/, sock/, initdb.log, postgres.log */
    char conninfo[320]; /* libpq keyword form, database "postgres", user "postgres" */
    char url[160];      /* postgres://postgres@127.0.0.1:<port>/postgres */
    char errstr[512];   /* detail of the last failure */
};

/* Runs initdb (trust auth, UTF8, C locale, no sync) and starts the server
 * with `-c name=value` for every entry of settings (NULL-terminated
 * "name=value" strings, may be NULL; they come after the built-in ones, so
 * they override them), then waits (at most 30 s) until it accepts
 * connections. Built-in settings: listen_addresses=127.0.0.1,
 * dynamic_shared_memory_type=mmap (nothing left in /dev/shm after a kill),
 * max_connections=200. Durability settings are left at PostgreSQL's
 * defaults (fsync=on, synchronous_commit=on) unless settings say otherwise.
 *
 * Ownership: s is the caller's; on success it owns a running server and a
 * directory until sk_pg_spawn_stop(s). On failure nothing is left behind
 * (server stopped, directory removed) and s->errstr says why. Call it from
 * a thread that outlives the server, before other threads exist (it forks).
 * Returns 0, SK_EIO (no server binaries, no postgres user, cannot start,
 * not ready in time) or SK_EINVAL (too many settings, path too long). */
int sk_pg_spawn_start(struct sk_pg_spawn *s, const char *const *settings);

/* Fast shutdown (SIGINT), wait (SIGKILL after 15 s), then remove the
 * directory and everything in it. Safe on a stopped or zeroed s. Returns 0,
 * or SK_EIO when the directory could not be removed (s->errstr). */
int sk_pg_spawn_stop(struct sk_pg_spawn *s);

/* CPU seconds (user + system) used so far by the postmaster and its child
 * processes (backends, checkpointer, WAL writer...) that are alive now;
 * 0 when not running. */
double sk_pg_spawn_cpu_seconds(const struct sk_pg_spawn *s);

#endif
