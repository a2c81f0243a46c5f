/* redis_spawn.h - a private redis-server for the binary's own use (bench,
 * demo) and for the test harness: free loopback port, fresh temporary
 * directory, no RDB snapshots unless asked, and it dies with the thread that
 * started it (PR_SET_PDEATHSIG), even on a crash of this process. It can be
 * ended (hard or gracefully) and started again on the same port and
 * directory, so an AOF or RDB file written there is loaded again. */
#ifndef SK_REDIS_SPAWN_H
#define SK_REDIS_SPAWN_H
#include <stdarg.h>
#include <sys/types.h>

struct sk_redis_spawn {
    pid_t pid;          /* redis-server, 0 when not running */
    int port;           /* 127.0.0.1 port it listens on */
    char dir[256];      /* its working directory (log, any RDB/AOF files) */
    char url[128];      /* "redis://127.0.0.1:<port>", for sk_redis_new */
    char sock[128];     /* its unix socket, dir/redis.sock ("" when the path would not fit) */
    char unix_url[160]; /* "redis+unix://<sock>" ("" without a socket) */
    char errstr[256];   /* detail of the last failure */
};

/* Starts `redis-server --port P --bind 127.0.0.1 --dir D --save ""
 * --logfile D/redis.log --daemonize no --unixsocket D/redis.sock
 * --unixsocketperm 700` (no socket when D is too long for one) plus
 * extra_args (NULL-terminated
 * "--name", "value" strings, may be NULL; copied, the caller keeps them),
 * in a directory made with mkdtemp under $TMPDIR or /tmp, and waits (at
 * most 10 s) until it is ready: any answer to PING but LOADING (an AOF or
 * RDB still being read), so a server with a password counts too.
 *
 * Ownership: s is the caller's; on success it owns a running server and a
 * directory until sk_redis_spawn_stop(s). On failure nothing is left
 * behind (process killed and reaped, directory removed), s->errstr says why.
 * Call it from a thread that outlives the server (the main thread): the
 * kernel's parent-death signal fires when the starting thread exits.
 * Returns 0, SK_EIO (cannot start, exited, or not ready in time) or
 * SK_EINVAL (too many extra arguments). */
int sk_redis_spawn_start(struct sk_redis_spawn *s, const char *const *extra_args);

/* Ends the server and keeps its port and directory (with the files in it)
 * for sk_redis_spawn_restart: SIGKILL when hard (a crash: only what the AOF
 * already holds survives), else SIGTERM and a wait of at most 5 s (then
 * SIGKILL). A stopped (SIGSTOP) server is resumed so it can end. Nothing
 * when it does not run (pid 0). Returns 0, or SK_ETIMEDOUT when a graceful
 * end took SIGKILL. */
int sk_redis_spawn_halt(struct sk_redis_spawn *s, int hard);

/* Starts redis-server again on s->port in s->dir (halting a running one
 * gracefully first) with extra_args as for sk_redis_spawn_start, and waits
 * until it is ready, LOADING counting as not yet. Ownership as for
 * sk_redis_spawn_start; on failure nothing runs and the directory stays.
 * Returns 0, SK_EIO (the port was taken meanwhile, it exited, or it was
 * not ready in time; s->errstr) or SK_EINVAL (too many extra arguments, or
 * s has no directory). */
int sk_redis_spawn_restart(struct sk_redis_spawn *s, const char *const *extra_args);

/* SIGTERM, wait (SIGKILL after 5 s), then remove the directory and
 * everything in it. Safe on a stopped or zeroed s. Returns 0, or SK_EIO
 * when the directory could not be removed (s->errstr). */
int sk_redis_spawn_stop(struct sk_redis_spawn *s);

/* One command on 127.0.0.1:port over a fresh connection, connect and
 * reply bounded by timeout_ms; NULL on an I/O error. The caller frees the
 * reply (freeReplyObject). */
struct redisReply *sk_redis_spawn_cmd(int port, int timeout_ms, const char *fmt, ...);
struct redisReply *sk_redis_spawn_vcmd(int port, int timeout_ms, const char *fmt, va_list ap);

#endif
