/* spawn.c - process plumbing of the private servers (see spawn.h). */
#include "spawn/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/error.h"

/* Largest tail sk_spawn_log_tail reads, and the one sk_spawn_exited looks
 * at: a server's last words can span several log lines (postgres: bind
 * error, hint, fatal, shutdown; redis: bind error, then "aborting"). */
#define SK_SPAWN_TAIL_MAX 1024

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

int sk_spawn_tmpdir(char *dir, size_t cap, const char *prefix, size_t reserve, char *err,
                    size_t errcap)
{
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp) tmp = "/tmp";
    int w = snprintf(dir, cap, "%s/%s-XXXXXX", tmp, prefix);
    if (w < 0 || (size_t)w + reserve >= cap) {
        dir[0] = 0;
        return sk_spawn_fail(err, errcap, SK_EINVAL, "TMPDIR path too long");
    }
    if (!mkdtemp(dir)) {
        int e = errno;
        dir[0] = 0;
        return sk_spawn_fail(err, errcap, SK_EIO, "mkdtemp under %s: %s", tmp, strerror(e));
    }
    return 0;
}

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)type;
    (void)ftw;
    return remove(path) < 0 && errno != ENOENT ? -1 : 0;
}

int sk_spawn_rmtree(const char *dir, char *err, size_t cap)
{
    if (!dir[0]) return 0;
    if (nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) < 0 && errno != ENOENT)
        return sk_spawn_fail(err, cap, SK_EIO, "cannot remove %s: %s", dir, strerror(errno));
    return 0;
}

int sk_spawn_args(const char **argv, size_t at, size_t cap, const char *flag,
                  const char *const *extra, const char *what, char *err, size_t errcap)
{
    size_t n = 0, per = flag ? 2 : 1;
    while (extra && extra[n])
        n++;
    if (at >= cap || n > (cap - 1 - at) / per)
        return sk_spawn_fail(err, errcap, SK_EINVAL, "too many %s", what);
    for (size_t i = 0; i < n; i++) {
        if (flag) argv[at++] = flag;
        argv[at++] = extra[i];
    }
    argv[at] = NULL;
    return 0;
}

/* The child's side of sk_spawn_exec: only async-signal-safe calls until
 * exec (the parent may have threads); same_file decided before fork. */
static void child(const struct sk_spawn_cmd *c, pid_t parent, int same_file)
{
    if (c->flags & SK_SPAWN_SESSION) setsid();
    int nul = open("/dev/null", O_RDWR);
    int out = c->out ? open(c->out, O_WRONLY | O_CREAT | O_TRUNC, 0600) : nul;
    int err = same_file ? out : c->err ? open(c->err, O_WRONLY | O_CREAT | O_TRUNC, 0600) : nul;
    if (nul < 0 || out < 0 || err < 0) _exit(126);
    if (dup2(nul, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) _exit(126);
    for (int fd = 3; fd < 1024; fd++)
        close(fd); /* no inherited sockets or files */
    if (c->drop && (setgroups(0, NULL) < 0 || setgid(c->gid) < 0 || setuid(c->uid) < 0)) _exit(126);
    /* After setuid: a change of credentials clears the death signal. */
    if (c->flags & SK_SPAWN_PDEATHSIG) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(1); /* parent already gone */
    }
    if (c->cwd && chdir(c->cwd) < 0) _exit(126);
    execvpe(c->argv[0], (char *const *)c->argv, c->envp ? (char *const *)c->envp : environ);
    _exit(127);
}

int sk_spawn_exec(const struct sk_spawn_cmd *c, pid_t *pid, char *err, size_t cap)
{
    int same_file = c->out && c->err && !strcmp(c->out, c->err);
    pid_t parent = getpid();
    *pid = fork();
    if (*pid < 0) {
        *pid = 0;
        return sk_spawn_fail(err, cap, SK_EIO, "fork: %s", strerror(errno));
    }
    if (*pid == 0) child(c, parent, same_file);
    return 0;
}

int sk_spawn_wait(pid_t *pid, int (*ready)(void *arg), void *arg, int ms, int poll_ms, int *status)
{
    *status = -1;
    if (*pid <= 0) return SK_EINVAL;
    for (int64_t deadline = sk_mono_ms() + ms;; sleep_ms(poll_ms)) {
        if (ready && ready(arg)) return 0;
        pid_t w = waitpid(*pid, status, WNOHANG);
        if (w == *pid) {
            *pid = 0;
            return ready ? SK_EIO : 0;
        }
        if (w < 0 && errno != EINTR) { /* not our child any more */
            *pid = 0;
            *status = -1;
            return SK_EIO;
        }
        if (sk_mono_ms() > deadline) return SK_ETIMEDOUT;
    }
}

int sk_spawn_start(const struct sk_spawn_cmd *c, pid_t *pid, char *err, size_t cap)
{
    const char *name = c->name ? c->name : c->argv[0];
    *pid = 0;
    if (!c->ready) return sk_spawn_fail(err, cap, SK_EINVAL, "%s: no readiness test", name);
    int rc = sk_spawn_exec(c, pid, err, cap);
    if (rc < 0) return rc;
    int st;
    rc = sk_spawn_wait(pid, c->ready, c->arg, c->ready_ms, c->poll_ms, &st);
    if (rc == SK_ETIMEDOUT) {
        sk_spawn_stop(*pid, c->stop_sig, c->stop_ms);
        *pid = 0;
        return sk_spawn_fail(err, cap, SK_EIO, "%s not ready after %d ms", name, c->ready_ms);
    }
    if (rc < 0) {
        const char *logs[] = {c->out, c->err, c->log};
        return sk_spawn_exited(name, st, logs, 3, err, cap);
    }
    return 0;
}

int sk_spawn_stop(pid_t pid, int sig, int ms)
{
    if (pid <= 0) return 0;
    kill(pid, SIGCONT); /* a stopped child must still get to exit */
    kill(pid, sig);
    for (int64_t end = sk_mono_ms() + ms; sk_mono_ms() < end; sleep_ms(10)) {
        pid_t w = waitpid(pid, NULL, WNOHANG);
        if (w == pid || (w < 0 && errno == ECHILD)) return 0;
    }
    kill(pid, SIGKILL); /* postgres: backends notice their postmaster is gone and exit */
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
    return SK_ETIMEDOUT;
}

static int blank(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n';
}

size_t sk_spawn_log_tail(const char *path, char *out, size_t cap)
{
    char buf[SK_SPAWN_TAIL_MAX];
    if (!path || cap < 2) return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    size_t want = cap - 1 < sizeof buf - 1 ? cap - 1 : sizeof buf - 1;
    off_t end = lseek(fd, 0, SEEK_END);
    off_t from = end > (off_t)want ? end - (off_t)want : 0;
    ssize_t n = end > 0 ? pread(fd, buf, (size_t)(end - from), from) : 0;
    close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    char *p = buf, *e = buf + n;
    char *nl = from > 0 ? memchr(buf, '\n', (size_t)n) : NULL;
    if (nl) { /* drop a cut first line, unless nothing else follows */
        char *q = nl + 1;
        while (q < e && blank(*q))
            q++;
        if (q < e) p = q;
    }
    while (p < e && blank(*p))
        p++;
    while (e > p && blank(e[-1]))
        e--;
    if (e == p) return 0;
    size_t len = (size_t)(e - p);
    for (size_t i = 0; i < len; i++)
        out[i] = blank(p[i]) ? ' ' : p[i];
    out[len] = 0;
    return len;
}

int sk_spawn_exited(const char *name, int status, const char *const *logs, size_t nlogs, char *err,
                    size_t cap)
{
    if (status == -1) return sk_spawn_fail(err, cap, SK_EIO, "lost track of %s (waitpid)", name);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
        return sk_spawn_fail(err, cap, SK_EIO, "cannot run %s (not on PATH, or not executable?)",
                             name);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 126)
        return sk_spawn_fail(err, cap, SK_EIO, "cannot set up %s (its log file, user or directory)",
                             name);
    char tail[SK_SPAWN_TAIL_MAX] = "";
    for (size_t i = 0; i < nlogs; i++)
        sk_spawn_log_tail(logs[i], tail, sizeof tail);
    int rc = strstr(tail, "in use") ? SK_EEXIST : SK_EIO;
    if (!err || !cap) return rc;
    snprintf(err, cap, "%s exited (%s %d): ", name, WIFEXITED(status) ? "status" : "signal",
             WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    size_t at = strlen(err), room = cap - 1 - at, len = strlen(tail);
    const char *t = tail[0] ? tail : "no message", *dots = "";
    if (len > room && room > 3) { /* the end says why: keep it */
        t = tail + len - (room - 3);
        dots = "...";
    }
    snprintf(err + at, cap - at, "%s%s", dots, t);
    return rc;
}
