/* pg_harness.c - private PostgreSQL clusters for the tests (pg_harness.h). */
#include "support/pg_harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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

#include "core/clock.h"
#include "support/harness.h"

#define READY_TIMEOUT_MS 30000
#define STOP_TIMEOUT_MS 15000

static char bindir[200];
static char template_dir[320]; /* holds data/ once initdb succeeded */
static uid_t run_uid;
static gid_t run_gid;
static int drop_root; /* 1: run initdb/postgres as run_uid/run_gid */

static char used_files[32][200];
static int nused;

static struct sk_th_pg shared;
static int shared_state; /* 0 not started, 1 up, -1 failed (shared_err) */
static char shared_err[600];

void sk_th_pg_use_file(const char *file)
{
    if (nused < 32) snprintf(used_files[nused++], sizeof used_files[0], "%s", file);
}

static int errf(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int errf(char *err, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return -1;
}

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The newest installed server (Debian: /usr/lib/postgresql/<v>/bin), or
 * $SECKILL_PG_BIN; and whom to run it as. */
static int setup(char *err, size_t cap)
{
    if (bindir[0]) return 0;
    const char *env = getenv("SECKILL_PG_BIN");
    if (env && *env) {
        snprintf(bindir, sizeof bindir, "%s", env);
    } else {
        glob_t g;
        if (glob("/usr/lib/postgresql/*/bin/postgres", 0, NULL, &g) != 0 || g.gl_pathc == 0)
            return errf(err, cap,
                        "no PostgreSQL server in /usr/lib/postgresql/*/bin "
                        "(apt-get install postgresql, or set SECKILL_PG_BIN)");
        /* glob sorts: the last is the highest version (same digit count). */
        snprintf(bindir, sizeof bindir, "%.*s", (int)(strlen(g.gl_pathv[g.gl_pathc - 1]) - 9),
                 g.gl_pathv[g.gl_pathc - 1]);
        globfree(&g);
    }
    if (geteuid() == 0) {
        /* initdb and postgres refuse to run as root. */
        struct passwd *pw = getpwnam("postgres");
        if (!pw) {
            bindir[0] = 0;
            return errf(err, cap,
                        "running as root and there is no 'postgres' user to run the "
                        "server as (the postgresql package creates it)");
        }
        run_uid = pw->pw_uid;
        run_gid = pw->pw_gid;
        drop_root = 1;
    }
    return 0;
}

/* A directory the server user owns. */
static int own_dir(const char *path, char *err, size_t cap)
{
    if (mkdir(path, 0700) < 0 && errno != EEXIST)
        return errf(err, cap, "mkdir %s: %s", path, strerror(errno));
    if (drop_root && chown(path, run_uid, run_gid) < 0)
        return errf(err, cap, "chown %s: %s", path, strerror(errno));
    return 0;
}

/* Forks argv (absolute path) as the server user, output appended to log,
 * working directory dir. A server gets a session of its own (a ^C at the
 * terminal reaches the runner, which stops it cleanly) and dies with this
 * process. */
static pid_t spawn(const char *const *argv, const char *dir, const char *log, int server, char *err,
                   size_t cap)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        errf(err, cap, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        if (server) setsid();
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        int nul = open("/dev/null", O_RDONLY);
        if (fd < 0 || nul < 0) _exit(126);
        dup2(nul, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        if (drop_root && (setgroups(0, NULL) < 0 || setgid(run_gid) < 0 || setuid(run_uid) < 0))
            _exit(126);
        /* After setuid: a change of credentials clears the death signal. */
        if (server) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent) _exit(1);
        }
        if (chdir(dir) < 0) _exit(126);
        setenv("LC_ALL", "C", 1);
        unsetenv("PGDATA");
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    return pid;
}

static int run_tool(const char *const *argv, const char *dir, const char *log, char *err,
                    size_t cap)
{
    pid_t pid = spawn(argv, dir, log, 0, err, cap);
    if (pid < 0) return -1;
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return errf(err, cap, "%s failed (status %d), see %s", argv[0],
                    WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), log);
    return 0;
}

/* initdb once per process tree: the template every cluster copies. */
static int make_template(char *err, size_t cap)
{
    if (template_dir[0]) return 0;
    char dir[320], data[340], log[340], bin[260];
    snprintf(dir, sizeof dir, "%s", sk_th_tmpdir());
    snprintf(data, sizeof data, "%s/data", dir);
    snprintf(log, sizeof log, "%s/initdb.log", dir);
    snprintf(bin, sizeof bin, "%s/initdb", bindir);
    if (own_dir(dir, err, cap) < 0) return -1;
    const char *argv[] = {bin,     "-D", data,   "-U",         "postgres",  "-A",
                          "trust", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions",
                          NULL};
    int64_t t0 = sk_mono_ms();
    if (run_tool(argv, dir, log, err, cap) < 0) return -1;
    printf("# PostgreSQL: initdb of the template cluster took %lld ms\n",
           (long long)(sk_mono_ms() - t0));
    snprintf(template_dir, sizeof template_dir, "%s", dir);
    return 0;
}

static void log_tail(const char *log, char *out, size_t cap)
{
    out[0] = 0;
    int fd = open(log, O_RDONLY);
    if (fd < 0) return;
    off_t end = lseek(fd, 0, SEEK_END);
    off_t from = end > (off_t)cap - 1 ? end - (off_t)cap + 1 : 0;
    ssize_t n = pread(fd, out, cap - 1, from);
    out[n > 0 ? n : 0] = 0;
    close(fd);
    for (char *p = out; *p; p++)
        if (*p == '\n') *p = ' ';
}

/* Starts the postmaster of pg (dir, port set) and waits until it accepts
 * connections (PQping), at most READY_TIMEOUT_MS. */
static int launch(struct sk_th_pg *pg, char *err, size_t cap)
{
    char data[300], sock[300], log[300], bin[260], port[16];
    snprintf(data, sizeof data, "%s/data", pg->dir);
    snprintf(sock, sizeof sock, "%s/sock", pg->dir);
    snprintf(log, sizeof log, "%s/postgres.log", pg->dir);
    snprintf(bin, sizeof bin, "%s/postgres", bindir);
    snprintf(port, sizeof port, "%d", pg->port);
    const char *argv[] = {bin, "-D", data, "-p", port, "-k", sock, "-c",
                          "listen_addresses=127.0.0.1",
                          /* Speed for tests: test data need not survive a crash. */
                          "-c", "fsync=off", "-c", "full_page_writes=off",
                          /* Shared memory in the data directory: nothing left in
                           * /dev/shm when a SIGKILL ends the server. */
                          "-c", "dynamic_shared_memory_type=mmap", "-c", "shared_buffers=32MB",
                          "-c", "max_connections=200", NULL};
    pg->pid = spawn(argv, pg->dir, log, 1, err, cap);
    if (pg->pid < 0) return -1;
    char conninfo[200];
    snprintf(conninfo, sizeof conninfo,
             "host=127.0.0.1 port=%d dbname=postgres user=postgres connect_timeout=2", pg->port);
    int64_t deadline = sk_mono_ms() + READY_TIMEOUT_MS;
    while (PQping(conninfo) != PQPING_OK) {
        int st;
        if (waitpid(pg->pid, &st, WNOHANG) == pg->pid) {
            pg->pid = 0;
            char tail[300];
            log_tail(log, tail, sizeof tail);
            return errf(err, cap, "postgres exited at start: ...%s", tail);
        }
        if (sk_mono_ms() > deadline) return errf(err, cap, "postgres not ready (see %s)", log);
        pause_ms(5); /* poll interval of the readiness condition */
    }
    snprintf(pg->url, sizeof pg->url, "postgres://postgres@127.0.0.1:%d/postgres", pg->port);
    return 0;
}

static int start(struct sk_th_pg *pg, char *err, size_t cap)
{
    memset(pg, 0, sizeof *pg);
    if (setup(err, cap) < 0 || make_template(err, cap) < 0) return -1;
    snprintf(pg->dir, sizeof pg->dir, "%s", sk_th_tmpdir());
    if (own_dir(pg->dir, err, cap) < 0) return -1;
    /* A copy of the template (cp -a keeps the owner and the 0700 mode the
     * server insists on): ~0.1 s instead of another initdb. */
    char src[340], log[300], sock[300];
    snprintf(src, sizeof src, "%s/data", template_dir);
    snprintf(log, sizeof log, "%s/cp.log", pg->dir);
    snprintf(sock, sizeof sock, "%s/sock", pg->dir);
    int saved = drop_root;
    drop_root = 0; /* cp runs as us: root may read the template */
    const char *cp[] = {"/bin/cp", "-a", src, pg->dir, NULL};
    int rc = run_tool(cp, pg->dir, log, err, cap);
    drop_root = saved;
    if (rc < 0 || own_dir(sock, err, cap) < 0) return -1;
    pg->port = sk_th_free_port();
    return launch(pg, err, cap);
}

/* Sends sig to the postmaster and to each of its children. Not to its
 * process group: every backend calls setsid() at birth. The postmaster
 * first, so a SIGSTOP leaves it no chance to fork a child we miss. */
static void signal_server(pid_t postmaster, int sig)
{
    if (postmaster <= 0) return;
    kill(postmaster, sig);
    DIR *d = opendir("/proc");
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char path[300], buf[512];
        if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        int fd = open(path, O_RDONLY);
        if (fd < 0) continue;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n <= 0) continue;
        buf[n] = 0;
        /* "pid (comm) state ppid ...": comm may hold spaces, ')' ends it. */
        const char *p = strrchr(buf, ')');
        int ppid = 0;
        char state;
        if (p && sscanf(p + 1, " %c %d", &state, &ppid) == 2 && ppid == postmaster)
            kill((pid_t)atoi(e->d_name), sig);
    }
    closedir(d);
}

static void reap(struct sk_th_pg *pg)
{
    if (pg->pid <= 0) return;
    signal_server(pg->pid, SIGCONT); /* a frozen server must be able to stop */
    kill(pg->pid, SIGINT);           /* fast shutdown */
    int64_t deadline = sk_mono_ms() + STOP_TIMEOUT_MS;
    int st;
    while (waitpid(pg->pid, &st, WNOHANG) == 0) {
        if (sk_mono_ms() > deadline) {
            kill(pg->pid, SIGKILL); /* backends follow their postmaster */
            waitpid(pg->pid, &st, 0);
            break;
        }
        pause_ms(5);
    }
    pg->pid = 0;
}

/* ---- the shared cluster ---- */

static int file_uses_pg(const char *file)
{
    for (int i = 0; i < nused; i++)
        if (!strcmp(used_files[i], file)) return 1;
    return 0;
}

/* Runner: before a test of a file that uses PostgreSQL, start the shared
 * cluster once. A failure is kept for the tests to report: the runner
 * itself must go on. */
static void before_test(const char *name, const char *file)
{
    (void)name;
    if (shared_state != 0 || !file_uses_pg(file)) return;
    int64_t t0 = sk_mono_ms();
    if (start(&shared, shared_err, sizeof shared_err) < 0) {
        shared_state = -1;
        reap(&shared);
        printf("# PostgreSQL: shared cluster failed to start: %s\n", shared_err);
        return;
    }
    shared_state = 1;
    printf("# PostgreSQL: shared cluster on port %d ready %lld ms after the start request\n",
           shared.port, (long long)(sk_mono_ms() - t0));
}

static void at_exit(void)
{
    if (shared_state == 1) reap(&shared);
}

__attribute__((constructor)) static void register_hooks(void)
{
    sk_th_add_hooks(before_test, at_exit);
}

const char *sk_th_pg_url(void)
{
    if (shared_state == 0) {
        /* A file without SK_TH_PG_USED: a cluster for this test alone. */
        fprintf(stderr, "    note: add SK_TH_PG_USED to this test file to share one cluster\n");
        if (start(&shared, shared_err, sizeof shared_err) < 0) {
            reap(&shared);
            shared_state = -1;
        } else {
            shared_state = 1;
        }
    }
    if (shared_state < 0) sk_th_fail(__FILE__, __LINE__, "PostgreSQL test cluster: %s", shared_err);
    return shared.url;
}

void sk_th_pg_create_db(const struct sk_th_pg *pg, const char *name, char *url_out, size_t cap)
{
    PGconn *c = PQconnectdb(pg->url);
    if (PQstatus(c) != CONNECTION_OK)
        sk_th_fail(__FILE__, __LINE__, "connect %s: %s", pg->url, PQerrorMessage(c));
    char sql[160];
    snprintf(sql, sizeof sql, "CREATE DATABASE \"%s\"", name);
    PGresult *r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
        sk_th_fail(__FILE__, __LINE__, "%s: %s", sql, PQresultErrorMessage(r));
    PQclear(r);
    PQfinish(c);
    snprintf(url_out, cap, "postgres://postgres@127.0.0.1:%d/%s", pg->port, name);
}

void sk_th_pg_fresh_db(char *url_out, size_t cap)
{
    sk_th_pg_url();
    char name[40];
    snprintf(name, sizeof name, "t%llu", (unsigned long long)sk_th_unique_id());
    sk_th_pg_create_db(&shared, name, url_out, cap);
}

/* ---- private clusters ---- */

void sk_th_pg_start(struct sk_th_pg *pg)
{
    char err[600];
    if (start(pg, err, sizeof err) < 0) {
        reap(pg);
        sk_th_fail(__FILE__, __LINE__, "PostgreSQL test cluster: %s", err);
    }
}

void sk_th_pg_stop(struct sk_th_pg *pg)
{
    reap(pg);
}

void sk_th_pg_restart(struct sk_th_pg *pg)
{
    reap(pg);
    char err[600];
    if (launch(pg, err, sizeof err) < 0) {
        reap(pg);
        sk_th_fail(__FILE__, __LINE__, "PostgreSQL restart: %s", err);
    }
}

void sk_th_pg_freeze(struct sk_th_pg *pg, int frozen)
{
    signal_server(pg->pid, frozen ? SIGSTOP : SIGCONT);
}
