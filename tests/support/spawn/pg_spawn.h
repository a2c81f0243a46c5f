/* pg_spawn.h - a private PostgreSQL server for the binary's own use (the
 * strategy benchmark) and for the test harness: initdb into a fresh
 * temporary directory (or a copy of one made before: a template),
 * postmaster on a free loopback port and a socket directory of its own,
 * stopped and removed at the end. It dies with the thread that started it
 * (PR_SET_PDEATHSIG), even on a crash of this process. A server can be
 * halted and launched again on the same port and data, and frozen
 * (SIGSTOP of every process of it) to play a server that hangs.
 *
 * initdb and postgres refuse to run as root: when this process is root they
 * run as the `postgres` system user (the Debian package creates it), which
 * then owns the directory. The server binaries are the newest of
 * /usr/lib/postgresql/<version>/bin, or $SECKILL_PG_BIN. */
#ifndef SK_PG_SPAWN_H
#define SK_PG_SPAWN_H
#include <sys/types.h>

struct sk_pg_spawn {
    pid_t pid;          /* the postmaster, 0 when not running */
    int port;           /* 127.0.0.1 port it listens on, 0 before the first launch */
    char dir[256];      /* data/, sock/, initdb.log, postgres.log */
    char conninfo[320]; /* libpq keyword form, database "postgres", user "postgres" */
    char url[160];      /* postgres://postgres@127.0.0.1:<port>/postgres */
    char errstr[512];   /* detail of the last failure */
};

/* sk_pg_spawn_init, then sk_pg_spawn_launch with settings.
 *
 * Ownership: s is the caller's; on success it owns a running server and a
 * directory until sk_pg_spawn_stop(s). On failure nothing is left behind
 * (server stopped, directory removed) and s->errstr says why. Call it from
 * a thread that outlives the server, before other threads exist (it forks).
 * Returns 0, SK_EIO (no server binaries, no postgres user, cannot start,
 * not ready in time) or SK_EINVAL (too many settings, path too long). */
int sk_pg_spawn_start(struct sk_pg_spawn *s, const char *const *settings);

/* Runs initdb (trust auth, user "postgres", UTF8, C locale, no sync) into
 * data/ of a fresh directory made with mkdtemp under $TMPDIR or /tmp, and
 * starts no server: a cluster for sk_pg_spawn_launch, or a template for
 * sk_pg_spawn_clone. Ownership: on success s owns the directory until
 * sk_pg_spawn_stop(s); on failure nothing is left (s->errstr). Returns 0,
 * SK_EIO or SK_EINVAL as sk_pg_spawn_start. */
int sk_pg_spawn_init(struct sk_pg_spawn *s);

/* A fresh directory holding a copy of the data directory of template (made
 * by sk_pg_spawn_init and not running: `cp -a`, ~0.1 s instead of another
 * initdb); no server started. template stays the caller's, untouched.
 * Ownership and results as sk_pg_spawn_init. */
int sk_pg_spawn_clone(struct sk_pg_spawn *s, const struct sk_pg_spawn *template);

/* Starts the postmaster of s (made by sk_pg_spawn_init or _clone, or
 * halted) with `-c name=value` for every entry of settings (NULL-terminated
 * "name=value" strings, may be NULL; they come after the built-in ones, so
 * they override them), then waits (at most 30 s) until it accepts
 * connections. The port: s->port when set (a restart: that port or an
 * error), else a free one, tried again while the one picked turns out
 * taken. Built-in settings: listen_addresses=127.0.0.1,
 * dynamic_shared_memory_type=mmap (nothing left in /dev/shm after a kill),
 * max_connections=200. Durability settings are left at PostgreSQL's
 * defaults (fsync=on, synchronous_commit=on) unless settings say otherwise.
 * On failure nothing runs and the directory stays (s->errstr). Returns 0,
 * SK_EIO (no server binaries, cannot start, not ready in time) or
 * SK_EINVAL (too many settings, not running and no directory). */
int sk_pg_spawn_launch(struct sk_pg_spawn *s, const char *const *settings);

/* Fast shutdown (SIGINT; a frozen server is thawed first), wait (SIGKILL
 * after 15 s); the directory and port stay for sk_pg_spawn_launch. Nothing
 * when not running. Returns 0, or SK_ETIMEDOUT when it took SIGKILL. */
int sk_pg_spawn_halt(struct sk_pg_spawn *s);

/* SIGSTOP (frozen = 1) or SIGCONT (0) of the postmaster and every process
 * it started (backends, checkpointer...), so open connections hang too.
 * The postmaster first, so it cannot fork a child that is missed. Nothing
 * when not running. */
void sk_pg_spawn_freeze(const struct sk_pg_spawn *s, int frozen);
/* 1 once the postmaster and every child of it are stopped (a stop signal
 * lands asynchronously: on a loaded machine a backend could still answer
 * a query sent right after sk_pg_spawn_freeze), 0 when some still run
 * after within_ms. */
int sk_pg_spawn_wait_frozen(const struct sk_pg_spawn *s, int within_ms);

/* sk_pg_spawn_halt, then remove the directory and everything in it. Safe
 * on a stopped or zeroed s. Returns 0, or SK_EIO when the directory could
 * not be removed (s->errstr). */
int sk_pg_spawn_stop(struct sk_pg_spawn *s);

/* CPU seconds (user + system) used so far by the postmaster and its child
 * processes (backends, checkpointer, WAL writer...) that are alive now;
 * 0 when not running. */
double sk_pg_spawn_cpu_seconds(const struct sk_pg_spawn *s);

#endif
