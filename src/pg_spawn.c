/* pg_spawn.c - start and stop a private PostgreSQL server (see pg_spawn.h). */
#include "pg_spawn.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <glob.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "clock.h"
#include "error.h"
#include "netutil.h"

#define SK_PG_SPAWN_MAX_SETTINGS 32
#define SK_PG_SPAWN_MAX_ENV 256
#define SK_PG_SPAWN_INITDB_MS 60000
#define SK_PG_SPAWN_READY_MS 30000
#define SK_PG_SPAWN_STOP_MS 15000
/* A port that was free when probed can be taken before postgres binds it. */
#define SK_PG_SPAWN_TRIES 5

extern char **environ;

/* Who runs the server: ourselves, or the postgres user when we are root. */
struct sk_pg_who {
    int drop;
    uid_t uid;
    gid_t gid;
};

static int fail(struct sk_pg_spawn *s, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct sk_pg_spawn *s, int err, const char *fmt, ...)
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

/* Major version from ".../postgresql/<v>/bin/postgres"; 0 when unparsable. */
static long path_version(const char *path)
{
    const char *p = strstr(path, "/postgresql/");
    return p ? strtol(p + 12, NULL, 10) : 0;
}

/* Directory of the server binaries: $SECKILL_PG_BIN, else the highest
 * version under /usr/lib/postgresql (numerically: 9 < 15). */
static int find_bindir(struct sk_pg_spawn *s, char *out, size_t cap)
{
    const char *env = getenv("SECKILL_PG_BIN");
    if (env && *env) {
        if ((size_t)snprintf(out, cap, "%s", env) >= cap)
            return fail(s, SK_EINVAL, "SECKILL_PG_BIN too long");
        return 0;
    }
    glob_t g;
    if (glob("/usr/lib/postgresql/*/bin/postgres", 0, NULL, &g) != 0 || g.gl_pathc == 0)
        return fail(s, SK_EIO,
                    "no PostgreSQL server in /usr/lib/postgresql/*/bin "
                    "(apt-get install postgresql, or set SECKILL_PG_BIN)");
    size_t best = 0;
    for (size_t i = 1; i < g.gl_pathc; i++)
        if (path_version(g.gl_pathv[i]) > path_version(g.gl_pathv[best])) best = i;
    size_t n = strlen(g.gl_pathv[best]) - strlen("/postgres");
    int w = snprintf(out, cap, "%.*s", (int)n, g.gl_pathv[best]);
    globfree(&g);
    return w < 0 || (size_t)w >= cap ? fail(s, SK_EINVAL, "server path too long") : 0;
}

static int find_user(struct sk_pg_spawn *s, struct sk_pg_who *who)
{
    memset(who, 0, sizeof *who);
    if (geteuid() != 0) return 0;
    struct passwd *pw = getpwnam("postgres");
    if (!pw)
        return fail(s, SK_EIO,
                    "running as root and there is no 'postgres' user to run the server as "
                    "(the postgresql package creates it)");
    who->drop = 1;
    who->uid = pw->pw_uid;
    who->gid = pw->pw_gid;
    return 0;
}

/* A directory the server user owns (mode 0700, as postgres insists). */
static int own_dir(struct sk_pg_spawn *s, const struct sk_pg_who *who, const char *path)
{
    if (mkdir(path, 0700) < 0 && errno != EEXIST)
        return fail(s, SK_EIO, "mkdir %s: %s", path, strerror(errno));
    if (who->drop && chown(path, who->uid, who->gid) < 0)
        return fail(s, SK_EIO, "chown %s: %s", path, strerror(errno));
    return 0;
}

/* The environment of the server: ours without PGDATA and locale variables,
 * plus LC_ALL=C. Built before fork (setenv is not safe in the child of a
 * threaded process); pointers into environ, nothing allocated. */
static void child_env(const char **envp, size_t cap)
{
    size_t n = 0;
    for (char **e = environ; e && *e && n + 2 < cap; e++)
        if (strncmp(*e, "PGDATA=", 7) && strncmp(*e, "LC_", 3) && strncmp(*e, "LANG=", 5))
            envp[n++] = *e;
    envp[n++] = "LC_ALL=C";
    envp[n] = NULL;
}

/* Forks argv[0] (absolute path) as the server user, stdout and stderr
 * appended to log, in directory dir. A server gets a session of its own
 * (a ^C at the terminal reaches us, and we stop it cleanly) and the
 * parent-death signal. */
static pid_t spawn(struct sk_pg_spawn *s, const struct sk_pg_who *who, const char *const *argv,
                   const char *dir, const char *log, int server)
{
    const char *envp[SK_PG_SPAWN_MAX_ENV];
    child_env(envp, SK_PG_SPAWN_MAX_ENV);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        fail(s, SK_EIO, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        /* Only async-signal-safe calls until exec. */
        if (server) setsid();
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        int nul = open("/dev/null", O_RDONLY);
        if (fd < 0 || nul < 0) _exit(126);
        dup2(nul, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        for (int i = 3; i < 1024; i++)
            close(i); /* no inherited sockets or files */
        if (who->drop && (setgroups(0, NULL) < 0 || setgid(who->gid) < 0 || setuid(who->uid) < 0))
            _exit(126);
        /* After setuid: a change of credentials clears the death signal. */
        if (server) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent) _exit(1);
        }
        if (chdir(dir) < 0) _exit(126);
        execve(argv[0], (char *const *)argv, (char *const *)envp);
        _exit(127);
    }
    return pid;
}

/* Last non-empty lines of a log, on one line: why something failed. */
static void log_tail(const char *path, char *out, size_t cap)
{
    out[0] = 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return;
    off_t end = lseek(fd, 0, SEEK_END);
    off_t from = end > (off_t)cap - 1 ? end - (off_t)cap + 1 : 0;
    ssize_t n = pread(fd, out, cap - 1, from);
    out[n > 0 ? n : 0] = 0;
    close(fd);
    for (char *p = out; *p; p++)
        if (*p == '\n') *p = ' ';
}

static void reap(pid_t pid, int sig, int ms)
{
    if (pid <= 0) return;
    kill(pid, SIGCONT); /* a stopped server must still get to exit */
    kill(pid, sig);
    for (int64_t end = sk_mono_ms() + ms; sk_mono_ms() < end; sleep_ms(10)) {
        pid_t w = waitpid(pid, NULL, WNOHANG);
        if (w == pid || (w < 0 && errno == ECHILD)) return;
    }
    kill(pid, SIGKILL); /* backends notice their postmaster is gone and exit */
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
}

static int run_initdb(struct sk_pg_spawn *s, const struct sk_pg_who *who, const char *bindir)
{
    char bin[300], data[300], log[300];
    snprintf(bin, sizeof bin, "%s/initdb", bindir);
    snprintf(data, sizeof data, "%s/data", s->dir);
    snprintf(log, sizeof log, "%s/initdb.log", s->dir);
    const char *argv[] = {bin,     "-D", data,   "-U",         "postgres",  "-A",
                          "trust", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions",
                          NULL};
    pid_t pid = spawn(s, who, argv, s->dir, log, 0);
    if (pid < 0) return SK_EIO;
    int st = 0;
    for (int64_t end = sk_mono_ms() + SK_PG_SPAWN_INITDB_MS;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) return fail(s, SK_EIO, "waitpid initdb: %s", strerror(errno));
        if (sk_mono_ms() > end) {
            reap(pid, SIGKILL, 1000);
            return fail(s, SK_EIO, "initdb did not finish in %d ms", SK_PG_SPAWN_INITDB_MS);
        }
        sleep_ms(10);
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        char tail[240];
        log_tail(log, tail, sizeof tail);
        return fail(s, SK_EIO, "initdb failed (status %d): ...%s",
                    WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), tail);
    }
    return 0;
}

/* One attempt on s->port: 0 ready, 1 port taken (retry on another),
 * negative on anything else. */
static int try_launch(struct sk_pg_spawn *s, const struct sk_pg_who *who, const char *bindir,
                      const char *const *settings, size_t nset)
{
    char bin[300], data[300], sock[300], log[300], port[16];
    snprintf(bin, sizeof bin, "%s/postgres", bindir);
    snprintf(data, sizeof data, "%s/data", s->dir);
    snprintf(sock, sizeof sock, "%s/sock", s->dir);
    snprintf(log, sizeof log, "%s/postgres.log", s->dir);
    snprintf(port, sizeof port, "%d", s->port);
    const char *argv[16 + 2 * SK_PG_SPAWN_MAX_SETTINGS] = {
        bin, "-D", data, "-p", port, "-k", sock, "-c", "listen_addresses=127.0.0.1", "-c",
        /* Shared memory in the data directory: nothing left behind in
         * /dev/shm when a SIGKILL ends the server. */
        "dynamic_shared_memory_type=mmap", "-c", "max_connections=200"};
    size_t n = 13;
    for (size_t i = 0; i < nset; i++) {
        argv[n++] = "-c";
        argv[n++] = settings[i];
    }
    argv[n] = NULL;
    s->pid = spawn(s, who, argv, s->dir, log, 1);
    if (s->pid < 0) {
        s->pid = 0;
        return SK_EIO;
    }
    snprintf(s->conninfo, sizeof s->conninfo,
             "host=127.0.0.1 port=%d dbname=postgres user=postgres connect_timeout=2", s->port);
    int64_t deadline = sk_mono_ms() + SK_PG_SPAWN_READY_MS;
    while (PQping(s->conninfo) != PQPING_OK) {
        int st;
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
            s->pid = 0;
            char tail[300];
            log_tail(log, tail, sizeof tail);
            fail(s, SK_EIO, "postgres exited at start: ...%s", tail);
            return strstr(tail, "could not bind") || strstr(tail, "already in use") ? 1 : SK_EIO;
        }
        if (sk_mono_ms() > deadline) {
            reap(s->pid, SIGINT, SK_PG_SPAWN_STOP_MS);
            s->pid = 0;
            return fail(s, SK_EIO, "postgres not ready after %d ms (see %s)", SK_PG_SPAWN_READY_MS,
                        log);
        }
        sleep_ms(5); /* poll interval of the readiness check */
    }
    snprintf(s->url, sizeof s->url, "postgres://postgres@127.0.0.1:%d/postgres", s->port);
    return 0;
}

int sk_pg_spawn_start(struct sk_pg_spawn *s, const char *const *settings)
{
    memset(s, 0, sizeof *s);
    size_t nset = 0;
    while (settings && settings[nset])
        nset++;
    if (nset > SK_PG_SPAWN_MAX_SETTINGS) return fail(s, SK_EINVAL, "too many postgres settings");
    char bindir[240];
    struct sk_pg_who who;
    int rc = find_bindir(s, bindir, sizeof bindir);
    if (rc < 0 || (rc = find_user(s, &who)) < 0) return rc;

    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp) tmp = "/tmp";
    int w = snprintf(s->dir, sizeof s->dir, "%s/seckill-pg-XXXXXX", tmp);
    if (w < 0 || (size_t)w >= sizeof s->dir - 32) {
        s->dir[0] = 0;
        return fail(s, SK_EINVAL, "TMPDIR path too long");
    }
    if (!mkdtemp(s->dir)) {
        int e = errno;
        s->dir[0] = 0;
        return fail(s, SK_EIO, "mkdtemp under %s: %s", tmp, strerror(e));
    }
    char sock[300];
    snprintf(sock, sizeof sock, "%s/sock", s->dir);
    rc = own_dir(s, &who, s->dir);
    if (rc == 0) rc = own_dir(s, &who, sock);
    if (rc == 0) rc = run_initdb(s, &who, bindir);
    if (rc == 0) {
        rc = 1;
        for (int t = 0; t < SK_PG_SPAWN_TRIES && rc == 1; t++) {
            s->port = sk_net_free_port();
            if (s->port <= 0) {
                rc = fail(s, SK_EIO, "no free loopback port: %s", strerror(errno));
                break;
            }
            rc = try_launch(s, &who, bindir, settings, nset);
        }
        if (rc == 1) rc = SK_EIO; /* errstr set by the last try */
    }
    if (rc < 0) {
        char keep[sizeof s->errstr];
        memcpy(keep, s->errstr, sizeof keep);
        sk_pg_spawn_stop(s);
        memcpy(s->errstr, keep, sizeof keep);
        return rc;
    }
    return 0;
}

int sk_pg_spawn_stop(struct sk_pg_spawn *s)
{
    if (s->pid > 0) reap(s->pid, SIGINT, SK_PG_SPAWN_STOP_MS); /* SIGINT: fast shutdown */
    s->pid = 0;
    int rc = 0;
    if (s->dir[0] && rm_tree(s->dir) < 0)
        rc = fail(s, SK_EIO, "cannot remove %s: %s", s->dir, strerror(errno));
    s->dir[0] = 0;
    s->url[0] = 0;
    s->conninfo[0] = 0;
    s->port = 0;
    return rc;
}

/* utime + stime of one process from /proc/<pid>/stat, and its parent. */
static double proc_cpu(const char *pid, int *ppid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%s/stat", pid);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return -1;
    buf[n] = 0;
    /* "pid (comm) state ppid ...": comm may hold spaces, the last ')' ends
     * it; utime and stime are the 12th and 13th fields after it. */
    const char *p = strrchr(buf, ')');
    unsigned long long ut = 0, st = 0;
    if (!p ||
        sscanf(p + 2, "%*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", ppid, &ut, &st) != 3)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

double sk_pg_spawn_cpu_seconds(const struct sk_pg_spawn *s)
{
    if (s->pid <= 0) return 0;
    DIR *d = opendir("/proc");
    if (!d) return 0;
    double total = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
        int ppid = 0;
        double c = proc_cpu(e->d_name, &ppid);
        if (c >= 0 && (atoi(e->d_name) == (int)s->pid || ppid == (int)s->pid)) total += c;
    }
    closedir(d);
    return total;
}
