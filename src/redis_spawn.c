/* redis_spawn.c - start and stop a private redis-server (see redis_spawn.h). */
#include "redis_spawn.h"

#include "netutil.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis.h>

#include "clock.h"
#include "error.h"

#define SK_SPAWN_MAX_EXTRA 48
#define SK_SPAWN_READY_MS 10000
#define SK_SPAWN_STOP_MS 5000
/* A port that was free when probed can be taken before redis binds it. */
#define SK_SPAWN_TRIES 5

static int fail(struct sk_redis_spawn *s, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->errstr, sizeof s->errstr, fmt, ap);
    va_end(ap);
    return err;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}


static int pings(int port)
{
    struct timeval tv = {0, 200000};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    int ok = 0;
    if (c && !c->err) {
        redisSetTimeout(c, tv);
        redisReply *r = redisCommand(c, "PING");
        ok = r && r->type == REDIS_REPLY_STATUS;
        if (r) freeReplyObject(r);
    }
    if (c) redisFree(c);
    return ok;
}

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)type;
    (void)ftw;
    return remove(path) < 0 && errno != ENOENT ? -1 : 0;
}

static int rm_tree(const char *dir)
{
    if (!dir[0]) return 0;
    return nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) < 0 && errno != ENOENT ? -1 : 0;
}

/* Last non-empty line of a file (the server's log, or its stderr, where
 * config errors go): why it refused to start. Keeps out when none. */
static void file_tail(const char *path, char *out, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        size_t n = strcspn(line, "\r\n");
        line[n] = 0;
        if (!n) continue;
        if (n >= cap) n = cap - 1; /* truncation is fine: a hint, not data */
        memcpy(out, line, n);
        out[n] = 0;
    }
    fclose(f);
}

static void reap(pid_t pid, int ms)
{
    kill(pid, SIGTERM);
    kill(pid, SIGCONT); /* a SIGSTOPped server must still get to exit */
    for (int64_t end = sk_mono_ms() + ms; sk_mono_ms() < end; sleep_ms(10)) {
        pid_t w = waitpid(pid, NULL, WNOHANG);
        if (w == pid || (w < 0 && errno == ECHILD)) return;
    }
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
}

/* One attempt on one port: 0 ready, 1 exited at start (retry on another
 * port), negative on anything else. */
static int try_start(struct sk_redis_spawn *s, const char **argv, const char *logpath,
                     const char *errpath)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) return fail(s, SK_EIO, "fork: %s", strerror(errno));
    if (pid == 0) {
        /* Only async-signal-safe calls until exec: the parent may have threads. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(1); /* parent already gone */
        int devnull = open("/dev/null", O_RDWR);
        int errfd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (devnull >= 0) {
            dup2(devnull, 0);
            dup2(devnull, 1);
        }
        if (errfd >= 0) dup2(errfd, 2);
        for (int fd = 3; fd < 1024; fd++)
            close(fd); /* no leaked sockets */
        execvp("redis-server", (char *const *)argv);
        _exit(127);
    }
    s->pid = pid;
    int64_t deadline = sk_mono_ms() + SK_SPAWN_READY_MS;
    while (!pings(s->port)) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            s->pid = 0;
            char tail[200] = "";
            file_tail(errpath, tail, sizeof tail);
            file_tail(logpath, tail, sizeof tail);
            if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
                return fail(s, SK_EIO, "cannot run redis-server (not on PATH?)");
            fail(s, SK_EIO, "redis-server exited at start: %s", tail[0] ? tail : "no message");
            /* Only a port taken since we probed it is worth another try. */
            return strstr(tail, "in use") ? 1 : SK_EIO;
        }
        if (sk_mono_ms() > deadline) {
            reap(pid, SK_SPAWN_STOP_MS);
            s->pid = 0;
            return fail(s, SK_EIO, "redis-server not answering PING after %d ms",
                        SK_SPAWN_READY_MS);
        }
        sleep_ms(10);
    }
    return 0;
}

int sk_redis_spawn_start(struct sk_redis_spawn *s, const char *const *extra_args)
{
    memset(s, 0, sizeof *s);
    size_t nextra = 0;
    while (extra_args && extra_args[nextra])
        nextra++;
    if (nextra > SK_SPAWN_MAX_EXTRA) return fail(s, SK_EINVAL, "too many redis-server arguments");

    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp) tmp = "/tmp";
    int w = snprintf(s->dir, sizeof s->dir, "%s/seckill-redis-XXXXXX", tmp);
    if (w < 0 || (size_t)w >= sizeof s->dir) {
        s->dir[0] = 0;
        return fail(s, SK_EINVAL, "TMPDIR path too long");
    }
    if (!mkdtemp(s->dir)) {
        int e = errno;
        s->dir[0] = 0;
        return fail(s, SK_EIO, "mkdtemp under %s: %s", tmp, strerror(e));
    }

    char port[16], logpath[300], errpath[300];
    snprintf(logpath, sizeof logpath, "%s/redis.log", s->dir);
    snprintf(errpath, sizeof errpath, "%s/redis.stderr", s->dir);
    const char *argv[16 + SK_SPAWN_MAX_EXTRA] = {
        "redis-server", "--port", port,        "--bind", "127.0.0.1",   "--dir", s->dir,
        "--save",       "",       "--logfile", logpath,  "--daemonize", "no"};
    size_t n = 13;
    for (size_t i = 0; i < nextra; i++)
        argv[n++] = extra_args[i];
    argv[n] = NULL;

    int rc = 1;
    for (int t = 0; t < SK_SPAWN_TRIES && rc == 1; t++) {
        s->port = sk_net_free_port();
        if (s->port <= 0) {
            rc = fail(s, SK_EIO, "no free loopback port: %s", strerror(errno));
            break;
        }
        snprintf(port, sizeof port, "%d", s->port);
        rc = try_start(s, argv, logpath, errpath);
    }
    if (rc != 0) {
        rm_tree(s->dir);
        s->dir[0] = 0;
        s->port = 0;
        return rc < 0 ? rc : SK_EIO; /* errstr already set by the last try */
    }
    snprintf(s->url, sizeof s->url, "redis://127.0.0.1:%d", s->port);
    return 0;
}

int sk_redis_spawn_stop(struct sk_redis_spawn *s)
{
    if (s->pid > 0) reap(s->pid, SK_SPAWN_STOP_MS);
    s->pid = 0;
    int rc = 0;
    if (s->dir[0] && rm_tree(s->dir) < 0)
        rc = fail(s, SK_EIO, "cannot remove %s: %s", s->dir, strerror(errno));
    s->dir[0] = 0;
    s->url[0] = 0;
    return rc;
}
