/* spawn.h - the process plumbing shared by the private servers: the demo's
 * redis-server (redis_spawn.c) and the test spawners that the benchmarks
 * share (tests/support/spawn: Cluster, Sentinel, PostgreSQL, MariaDB): a
 * temporary directory, a child that dies with the thread that started it,
 * a bounded wait until it is ready, a bounded stop, the end of its log for
 * messages.
 *
 * Every function returns 0 or a negative SK_E* code (error.h) and writes
 * the detail of a failure into the caller's err buffer (cap bytes; err may
 * be NULL), like sk_einval. Nothing here keeps state: each child, file and
 * directory is the caller's, as each function says. */
#ifndef SK_SPAWN_H
#define SK_SPAWN_H
#include <stddef.h>
#include <sys/types.h>

#include "core/error.h"

/* Formats a reason into err (cap bytes; err may be NULL) and returns code:
 * the one-liner of every failure path of the spawners (core/error.h). */
#define sk_spawn_fail sk_errf

/* Makes a fresh directory "<tmp>/<prefix>-XXXXXX" (mkdtemp, mode 0700)
 * where <tmp> is $TMPDIR, or /tmp when that is unset or empty, into dir
 * (cap bytes), keeping at least reserve bytes of dir free for the names the
 * caller appends.
 * Ownership: on success the directory is the caller's, to be removed with
 * sk_spawn_rmtree; on failure dir is "" and nothing was made.
 * Returns 0, SK_EINVAL (path too long) or SK_EIO (mkdtemp failed). */
int sk_spawn_tmpdir(char *dir, size_t cap, const char *prefix, size_t reserve, char *err,
                    size_t errcap);

/* Removes dir and everything below it (links are removed, not followed).
 * A "" dir and a missing directory are fine. dir stays the caller's string.
 * Returns 0, or SK_EIO when something could not be removed (err). */
int sk_spawn_rmtree(const char *dir, char *err, size_t cap);

/* Ends the command line argv (cap entries, the first at filled in) with
 * the NULL-terminated list extra (may be NULL), each entry after flag when
 * flag is not NULL (postgres' "-c"), and a NULL. Only pointers are copied:
 * the strings stay the caller's and must outlive argv (so argv may point at
 * buffers filled in later). Call it before making anything, so a list too
 * long costs nothing. Returns 0, or SK_EINVAL when extra does not fit
 * (err: "too many <what>"). */
int sk_spawn_args(const char **argv, size_t at, size_t cap, const char *flag,
                  const char *const *extra, const char *what, char *err, size_t errcap);

/* flags of struct sk_spawn_cmd */
#define SK_SPAWN_PDEATHSIG 1 /* SIGKILL when the thread that forked it exits */
#define SK_SPAWN_SESSION 2   /* a session of its own: a ^C at the terminal reaches only us */

/* What to run and how: the caller's, read by sk_spawn_exec/sk_spawn_start
 * only during the call (the child has its own copy after fork). */
struct sk_spawn_cmd {
    const char *const *argv; /* NULL-terminated; argv[0] is looked up on PATH unless it has a '/' */
    const char *const *envp; /* the child's environment; NULL: ours */
    const char *out;         /* file for stdout, created or truncated; NULL: /dev/null */
    const char *err;         /* file for stderr, likewise; the same path as out: one file */
    const char *cwd;         /* directory to run in; NULL: ours */
    int flags;               /* SK_SPAWN_PDEATHSIG | SK_SPAWN_SESSION */
    int drop;                /* run as uid/gid (when we are root); files are opened before */
    uid_t uid;
    gid_t gid;
    /* sk_spawn_start only: */
    const char *name;        /* the server in messages; NULL: argv[0] */
    const char *log;         /* a log the program writes itself (read for messages), or NULL */
    int (*ready)(void *arg); /* nonzero once it serves; called every poll_ms */
    void *arg;
    int ready_ms; /* bound of the wait for ready */
    int poll_ms;
    int stop_sig; /* how to end one that is not ready in time, */
    int stop_ms;  /* and how long before SIGKILL (sk_spawn_stop) */
};

/* Forks and runs c: stdin from /dev/null, stdout and stderr to c->out and
 * c->err, every other descriptor closed, credentials dropped when c->drop,
 * then the parent-death signal (a change of credentials would clear it).
 * The child only makes async-signal-safe calls before exec, so this is fine
 * in a threaded process. It exits 126 when it cannot set itself up (a file,
 * the user, the directory) and 127 when the program cannot be run.
 * Ownership: on success the child is the caller's (*pid), to be ended with
 * sk_spawn_stop or reaped by sk_spawn_wait; with SK_SPAWN_PDEATHSIG the
 * calling thread must outlive it (the kernel's parent is the thread).
 * Returns 0, or SK_EIO when fork failed (*pid is 0). */
int sk_spawn_exec(const struct sk_spawn_cmd *c, pid_t *pid, char *err, size_t cap);

/* Polls (every poll_ms, at most ms) until ready(arg) says the child *pid
 * serves: 0. When the child exits first it is reaped, *pid becomes 0,
 * *status is its wait status (-1 when it could not be had) and the result
 * is SK_EIO, or 0 when ready is NULL (waiting for the exit alone). When ms
 * pass: SK_ETIMEDOUT, and the child still runs, still the caller's.
 * Returns SK_EINVAL when *pid is not a child's id. */
int sk_spawn_wait(pid_t *pid, int (*ready)(void *arg), void *arg, int ms, int poll_ms, int *status);

/* sk_spawn_exec, then sk_spawn_wait for c->ready; a child not ready in
 * c->ready_ms is stopped (c->stop_sig, c->stop_ms). Ownership: on success
 * the running child is the caller's (*pid); on failure nothing runs and
 * *pid is 0. Returns 0, SK_EEXIST when the child exited saying its address
 * is in use (pick another port and try again), SK_EIO otherwise (cannot
 * run, exited, not ready in time; err says which, with the end of its log)
 * or SK_EINVAL (no ready function). */
int sk_spawn_start(const struct sk_spawn_cmd *c, pid_t *pid, char *err, size_t cap);

/* Ends the child pid: SIGCONT (a stopped child must get to exit) and sig,
 * waits at most ms for it, then SIGKILL, and reaps it. Nothing when
 * pid <= 0. After it the pid is no longer the caller's (set it to 0).
 * Returns 0, or SK_ETIMEDOUT when it took SIGKILL. */
int sk_spawn_stop(pid_t pid, int sig, int ms);

/* The end of the file at path (its last cap-1 bytes at most, and at most
 * 1023, starting at a line where it can) on one line: line breaks become
 * spaces, white space at both ends is dropped. out is left as it was when
 * the file is missing or blank, so of several logs read in turn the last
 * with words wins. path stays the caller's. Returns the length written,
 * 0 when out was left. */
size_t sk_spawn_log_tail(const char *path, char *out, size_t cap);

/* The message for a child that ended when it should not have (status from
 * sk_spawn_wait): "cannot run NAME (not on PATH, ...)" (exit 127), "cannot set
 * up NAME ..." (exit 126), else "NAME exited (status N): ..." or "NAME
 * exited (signal N): ..." followed by as much of the end of the last of
 * logs (nlogs paths, NULL entries skipped) with words as err holds.
 * Returns SK_EEXIST when that log says "in use" (its port was taken since
 * it was probed), else SK_EIO. */
int sk_spawn_exited(const char *name, int status, const char *const *logs, size_t nlogs, char *err,
                    size_t cap);

#endif
