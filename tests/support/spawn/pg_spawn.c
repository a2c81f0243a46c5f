/* pg_spawn.c - start and stop a private PostgreSQL server (see pg_spawn.h);
 * the process plumbing is spawn.c's. */
#include "tests/support/spawn/pg_spawn.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "core/clock.h"
#include "core/error.h"
#include "spawn/spawn.h"
#include "tests/support/spawn/db_spawn.h"
#include "tests/support/spawn/proc_stat.h"

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

#define fail(s, ...) sk_spawn_fail((s)->errstr, sizeof(s)->errstr, __VA_ARGS__)

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

/* How to run argv[0] (an absolute path) as the server user, stdout and
 * stderr into log, in s->dir, with envp from child_env. A server gets a
 * session of its own (a ^C at the terminal reaches us, and we stop it
 * cleanly) and the parent-death signal. */
static struct sk_spawn_cmd command(const struct sk_pg_spawn *s, const struct sk_pg_who *who,
                                   const char *const *argv, const char **envp, const char *log,
                                   int server)
{
    child_env(envp, SK_PG_SPAWN_MAX_ENV);
    return (struct sk_spawn_cmd){.argv = argv,
                                 .envp = envp,
                                 .out = log,
                                 .err = log,
                                 .cwd = s->dir,
                                 .flags = server ? SK_SPAWN_SESSION | SK_SPAWN_PDEATHSIG : 0,
                                 .drop = who->drop,
                                 .uid = who->uid,
                                 .gid = who->gid};
}

/* The files of one server, under s->dir, and its port as text. */
struct pg_paths {
    char initdb[300], postgres[300], data[300], sock[300], initdb_log[300], log[300], port[16];
};

static void pg_paths(const struct sk_pg_spawn *s, const char *bindir, struct pg_paths *p)
{
    snprintf(p->initdb, sizeof p->initdb, "%s/initdb", bindir);
    snprintf(p->postgres, sizeof p->postgres, "%s/postgres", bindir);
    snprintf(p->data, sizeof p->data, "%s/data", s->dir);
    snprintf(p->sock, sizeof p->sock, "%s/sock", s->dir);
    snprintf(p->initdb_log, sizeof p->initdb_log, "%s/initdb.log", s->dir);
    snprintf(p->log, sizeof p->log, "%s/postgres.log", s->dir);
}

/* Runs argv (a tool: initdb, cp) in s->dir as who, output into log, and
 * waits for it to exit 0 (at most SK_PG_SPAWN_INITDB_MS). */
static int run_tool(struct sk_pg_spawn *s, const struct sk_pg_who *who, const char *name,
                    const char *const *argv, const char *log)
{
    const char *envp[SK_PG_SPAWN_MAX_ENV];
    struct sk_spawn_cmd cmd = command(s, who, argv, envp, log, 0);
    return sk_db_spawn_tool(&cmd, name, log, SK_PG_SPAWN_INITDB_MS, s->errstr, sizeof s->errstr);
}

/* Readiness: the server of conninfo *arg accepts connections. */
static int accepts(void *conninfo)
{
    return PQping(conninfo) == PQPING_OK;
}

/* One launch of the postmaster: the server, who runs it, its command
 * line (which points into p, whose port is filled in per attempt). */
struct pg_launch {
    struct sk_pg_spawn *s;
    const struct sk_pg_who *who;
    const char *const *argv;
    struct pg_paths *p;
};

/* One attempt on s->port: 0 ready, SK_EEXIST port taken (retry on
 * another), another negative code on anything else. */
static int try_launch(void *arg)
{
    const struct pg_launch *l = arg;
    struct sk_pg_spawn *s = l->s;
    const struct sk_pg_who *who = l->who;
    const char *const *argv = l->argv;
    struct pg_paths *p = l->p;
    snprintf(p->port, sizeof p->port, "%d", s->port);
    snprintf(s->conninfo, sizeof s->conninfo,
             "host=127.0.0.1 port=%d dbname=postgres user=postgres connect_timeout=2", s->port);
    const char *envp[SK_PG_SPAWN_MAX_ENV];
    struct sk_spawn_cmd cmd = command(s, who, argv, envp, p->log, 1);
    cmd.name = "postgres";
    cmd.ready = accepts;
    cmd.arg = s->conninfo;
    cmd.ready_ms = SK_PG_SPAWN_READY_MS;
    cmd.poll_ms = 5;
    cmd.stop_sig = SIGINT; /* fast shutdown */
    cmd.stop_ms = SK_PG_SPAWN_STOP_MS;
    int rc = sk_spawn_start(&cmd, &s->pid, s->errstr, sizeof s->errstr);
    if (rc == 0)
        snprintf(s->url, sizeof s->url, "postgres://postgres@127.0.0.1:%d/postgres", s->port);
    return rc;
}

/* On a failure of init or clone: nothing left behind, the reason kept. */
static int stop_any(void *s)
{
    return sk_pg_spawn_stop(s);
}

static int undo(struct sk_pg_spawn *s, int rc)
{
    return sk_db_spawn_undo(stop_any, s, s->errstr, sizeof s->errstr, rc);
}

/* A fresh directory for s, owned by who, with its socket directory. */
static int make_dir(struct sk_pg_spawn *s, const struct sk_pg_who *who)
{
    int rc = sk_spawn_tmpdir(s->dir, sizeof s->dir, "seckill-pg", 32, s->errstr, sizeof s->errstr);
    if (rc < 0) return rc;
    char sock[300];
    snprintf(sock, sizeof sock, "%s/sock", s->dir);
    rc = own_dir(s, who, s->dir);
    return rc < 0 ? rc : own_dir(s, who, sock);
}

int sk_pg_spawn_init(struct sk_pg_spawn *s)
{
    memset(s, 0, sizeof *s);
    char bindir[240];
    struct sk_pg_who who;
    int rc = find_bindir(s, bindir, sizeof bindir);
    if (rc == 0) rc = find_user(s, &who);
    if (rc == 0) rc = make_dir(s, &who);
    if (rc < 0) return undo(s, rc);
    struct pg_paths p;
    pg_paths(s, bindir, &p);
    const char *argv[] = {p.initdb, "-D", p.data, "-U",         "postgres",  "-A",
                          "trust",  "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions",
                          NULL};
    rc = run_tool(s, &who, "initdb", argv, p.initdb_log);
    return rc < 0 ? undo(s, rc) : 0;
}

int sk_pg_spawn_clone(struct sk_pg_spawn *s, const struct sk_pg_spawn *tmpl)
{
    memset(s, 0, sizeof *s);
    struct sk_pg_who who, us = {0}; /* cp runs as us: root may read the template */
    int rc = find_user(s, &who);
    if (rc == 0) rc = make_dir(s, &who);
    if (rc < 0) return undo(s, rc);
    char src[300], log[300];
    snprintf(src, sizeof src, "%s/data", tmpl->dir);
    snprintf(log, sizeof log, "%s/cp.log", s->dir);
    /* -a keeps the owner and the 0700 mode the server insists on */
    const char *argv[] = {"cp", "-a", src, s->dir, NULL};
    rc = run_tool(s, &us, "cp", argv, log);
    return rc < 0 ? undo(s, rc) : 0;
}

int sk_pg_spawn_launch(struct sk_pg_spawn *s, const char *const *settings)
{
    if (!s->dir[0] || s->pid > 0)
        return fail(s, SK_EINVAL, "launch of a PostgreSQL server without a directory, or running");
    struct pg_paths p; /* filled in below */
    const char *argv[16 + 2 * SK_PG_SPAWN_MAX_SETTINGS] = {
        p.postgres, "-D", p.data, "-p", p.port, "-k", p.sock, "-c", "listen_addresses=127.0.0.1",
        /* Shared memory in the data directory: nothing left behind in
         * /dev/shm when a SIGKILL ends the server. */
        "-c", "dynamic_shared_memory_type=mmap", "-c", "max_connections=200"};
    int rc = sk_spawn_args(argv, 13, sizeof argv / sizeof *argv, "-c", settings,
                           "postgres settings", s->errstr, sizeof s->errstr);
    char bindir[240];
    struct sk_pg_who who;
    if (rc == 0) rc = find_bindir(s, bindir, sizeof bindir);
    if (rc == 0) rc = find_user(s, &who);
    if (rc < 0) return rc;
    pg_paths(s, bindir, &p);
    struct pg_launch l = {s, &who, argv, &p};
    return sk_db_spawn_on_port(&s->port, SK_PG_SPAWN_TRIES, try_launch, &l, s->errstr,
                               sizeof s->errstr);
}

int sk_pg_spawn_start(struct sk_pg_spawn *s, const char *const *settings)
{
    int rc = sk_pg_spawn_init(s);
    if (rc == 0) rc = sk_pg_spawn_launch(s, settings);
    return rc < 0 ? undo(s, rc) : 0;
}

int sk_pg_spawn_halt(struct sk_pg_spawn *s)
{
    if (s->pid <= 0) return 0;
    sk_pg_spawn_freeze(s, 0); /* a frozen backend would hold up the shutdown */
    int rc = sk_spawn_stop(s->pid, SIGINT, SK_PG_SPAWN_STOP_MS); /* SIGINT: fast shutdown */
    s->pid = 0;
    return rc;
}

int sk_pg_spawn_stop(struct sk_pg_spawn *s)
{
    sk_pg_spawn_halt(s);
    return sk_db_spawn_forget(s->dir, s->url, s->conninfo, &s->port, s->errstr, sizeof s->errstr);
}

/* The parent of one process and its CPU seconds (utime + stime), from
 * /proc/<pid>/stat; -1 when it is gone. */
static double proc_stat(const char *pid, int *ppid)
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

/* Calls fn(pid, cpu seconds, arg) for every live process whose parent is
 * the postmaster of s. Not by process group: every backend calls setsid()
 * at birth. */
static void each_child(const struct sk_pg_spawn *s, void (*fn)(pid_t, double, void *), void *arg)
{
    DIR *d = opendir("/proc");
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
        int ppid = 0;
        double cpu = proc_stat(e->d_name, &ppid);
        if (cpu >= 0 && ppid == (int)s->pid) fn((pid_t)atoi(e->d_name), cpu, arg);
    }
    closedir(d);
}

static void send_sig(pid_t pid, double cpu, void *sig)
{
    (void)cpu;
    kill(pid, *(const int *)sig);
}

void sk_pg_spawn_freeze(const struct sk_pg_spawn *s, int frozen)
{
    if (s->pid <= 0) return;
    int sig = frozen ? SIGSTOP : SIGCONT;
    kill(s->pid, sig); /* first: a stopped postmaster forks no child we miss */
    each_child(s, send_sig, &sig);
}

/* 1 when pid is stopped (or gone: nothing of it can answer). */
static int is_stopped(pid_t pid)
{
    char st = sk_proc_state(pid);
    return !st || st == 'T' || st == 't' || st == 'Z' || st == 'X';
}

static void count_running(pid_t pid, double cpu, void *n)
{
    (void)cpu;
    if (!is_stopped(pid)) ++*(int *)n;
}

int sk_pg_spawn_wait_frozen(const struct sk_pg_spawn *s, int within_ms)
{
    int64_t until = sk_mono_ms() + within_ms;
    for (;;) {
        int running = s->pid > 0 && !is_stopped(s->pid);
        if (s->pid > 0) each_child(s, count_running, &running);
        if (!running) return 1;
        if (sk_mono_ms() >= until) return 0;
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

static void add_cpu(pid_t pid, double cpu, void *total)
{
    (void)pid;
    *(double *)total += cpu;
}

double sk_pg_spawn_cpu_seconds(const struct sk_pg_spawn *s)
{
    if (s->pid <= 0) return 0;
    char self[16];
    int ppid;
    snprintf(self, sizeof self, "%d", (int)s->pid);
    double total = proc_stat(self, &ppid);
    if (total < 0) total = 0;
    each_child(s, add_cpu, &total);
    return total;
}
