/* mysql_spawn.h - a private MariaDB server for the binary's own use (the
 * test runner, the benchmarks): mariadb-install-db into a temporary
 * directory, then mariadbd on a free 127.0.0.1 port and a socket of its
 * own, never Debian's service or its configuration (--no-defaults). When
 * this process is root the server runs as root too (--user=root: the
 * data directory is ours). root@localhost has no password
 * (--auth-root-authentication-method=normal); the server binds 127.0.0.1
 * only. Binaries: mariadbd and mariadb-install-db on PATH or in
 * /usr/sbin, /usr/bin. */
#ifndef SK_MYSQL_SPAWN_H
#define SK_MYSQL_SPAWN_H
#include <sys/types.h>

struct sk_mysql_spawn {
    pid_t pid;        /* mariadbd, 0 when not running */
    int port;         /* 127.0.0.1 port, 0 before the first launch */
    char dir[256];    /* data/, sock, install.log, mariadbd.log */
    char sock[300];   /* its unix socket */
    char url[200];    /* mysql://root@127.0.0.1:<port>/mysql */
    char errstr[512]; /* detail of the last failure */
};

/* sk_mysql_spawn_init, then sk_mysql_spawn_launch with settings.
 * Ownership: s is the caller's; on success it owns a running server and a
 * directory until sk_mysql_spawn_stop(s). On failure nothing is left
 * behind and s->errstr says why. Call it from a thread that outlives the
 * server (parent-death signal). Returns 0, SK_EIO (no server binaries,
 * cannot start, not ready in time) or SK_EINVAL (too many settings). */
int sk_mysql_spawn_start(struct sk_mysql_spawn *s, const char *const *settings);

/* Runs mariadb-install-db into data/ of a fresh directory (mkdtemp under
 * $TMPDIR or /tmp); starts no server: one for sk_mysql_spawn_launch, or a
 * template for sk_mysql_spawn_clone. Ownership: on success s owns the
 * directory until sk_mysql_spawn_stop(s); on failure nothing is left. */
int sk_mysql_spawn_init(struct sk_mysql_spawn *s);

/* A fresh directory holding a copy of the data directory of template
 * (made by sk_mysql_spawn_init and not running: `cp -a`); no server.
 * Ownership and results as sk_mysql_spawn_init. */
int sk_mysql_spawn_clone(struct sk_mysql_spawn *s, const struct sk_mysql_spawn *template);

/* Starts mariadbd on s (made by init or clone, or halted) with `--NAME=V`
 * for every "NAME=V" of settings (NULL-terminated, may be NULL; after the
 * built-in ones, so they override them) and waits (at most 30 s) until it
 * accepts connections. The port: s->port when set (a restart: that port or
 * an error), else a free one, tried again while the one picked is taken.
 * Built-in: innodb_buffer_pool_size=128M, innodb_log_file_size=16M,
 * max_connections=400. Durability is left at MariaDB's defaults
 * (innodb_flush_log_at_trx_commit=1, doublewrite on) unless settings say
 * otherwise. On failure nothing runs and the directory stays. Returns 0,
 * SK_EIO or SK_EINVAL as sk_mysql_spawn_start. */
int sk_mysql_spawn_launch(struct sk_mysql_spawn *s, const char *const *settings);

/* Clean shutdown (SIGTERM; a frozen server is thawed first), wait (SIGKILL
 * after 30 s); the directory and port stay for sk_mysql_spawn_launch.
 * kill9: SIGKILL at once instead (a crash: InnoDB recovers at the next
 * launch). Nothing when not running. Returns 0, or SK_ETIMEDOUT when a
 * clean shutdown took SIGKILL. */
int sk_mysql_spawn_halt(struct sk_mysql_spawn *s, int kill9);

/* SIGSTOP (frozen = 1) or SIGCONT (0) of the server (one process: open
 * connections hang too). Nothing when not running. */
void sk_mysql_spawn_freeze(const struct sk_mysql_spawn *s, int frozen);

/* sk_mysql_spawn_halt, then remove the directory. Safe on a stopped or
 * zeroed s. Returns 0, or SK_EIO when the directory could not be removed. */
int sk_mysql_spawn_stop(struct sk_mysql_spawn *s);

#endif
