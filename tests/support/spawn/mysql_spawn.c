/* mysql_spawn.c - start and stop a private MariaDB server (see
 * mysql_spawn.h); the process plumbing is spawn.c's. */
#include "tests/support/spawn/mysql_spawn.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <mysql.h>

#include "core/error.h"
#include "spawn/exe_path.h"
#include "spawn/spawn.h"
#include "tests/support/spawn/db_spawn.h"

#define MAX_SETTINGS 32
#define INSTALL_MS 60000
#define READY_MS 30000
#define STOP_MS 30000
/* A port that was free when probed can be taken before mariadbd binds it. */
#define TRIES 5

#define fail(s, ...) sk_spawn_fail((s)->errstr, sizeof(s)->errstr, __VA_ARGS__)

/* The path of a program: on PATH, else in /usr/sbin or /usr/bin. */
static int find_bin(struct sk_mysql_spawn *s, const char *name, char *out, size_t cap)
{
    if (sk_exe_path(name, out, cap) == 0) return 0;
    return fail(s, SK_EIO, "no %s (apt-get install mariadb-server)", name);
}

/* The files of one server, under s->dir. */
struct my_paths {
    char data[300], log[300], pid[300], install_log[300];
};

static void my_paths(const struct sk_mysql_spawn *s, struct my_paths *p)
{
    snprintf(p->data, sizeof p->data, "%s/data", s->dir);
    snprintf(p->log, sizeof p->log, "%s/mariadbd.log", s->dir);
    snprintf(p->pid, sizeof p->pid, "%s/mariadbd.pid", s->dir);
    snprintf(p->install_log, sizeof p->install_log, "%s/install.log", s->dir);
}

/* Runs a tool (mariadb-install-db, cp) in s->dir, output into log, and
 * waits for it to exit 0. */
static int run_tool(struct sk_mysql_spawn *s, const char *name, const char *const *argv,
                    const char *log)
{
    struct sk_spawn_cmd cmd = {.argv = argv, .out = log, .err = log, .cwd = s->dir};
    return sk_db_spawn_tool(&cmd, name, log, INSTALL_MS, s->errstr, sizeof s->errstr);
}

/* Readiness: the server accepts a connection on its socket. */
static int accepts(void *sock)
{
    MYSQL *m = mysql_init(NULL);
    if (!m) return 0;
    unsigned t = 1, proto = MYSQL_PROTOCOL_SOCKET;
    mysql_options(m, MYSQL_OPT_CONNECT_TIMEOUT, &t);
    mysql_options(m, MYSQL_OPT_PROTOCOL, &proto);
    int ok = mysql_real_connect(m, "localhost", "root", "", NULL, 0, sock, 0) != NULL;
    mysql_close(m);
    return ok;
}

/* One launch of mariadbd: the server, its command line (whose port
 * argument is filled in per attempt) and its files. */
struct my_launch {
    struct sk_mysql_spawn *s;
    const char *const *argv;
    char *port_arg;
    size_t cap;
    const struct my_paths *p;
};

/* One attempt on s->port: 0 ready, SK_EEXIST port taken, another code on
 * anything else. */
static int try_launch(void *arg)
{
    const struct my_launch *l = arg;
    struct sk_mysql_spawn *s = l->s;
    const struct my_paths *p = l->p;
    const char *const *argv = l->argv;
    snprintf(l->port_arg, l->cap, "--port=%d", s->port);
    struct sk_spawn_cmd cmd = {.argv = argv,
                               .out = p->log,
                               .err = p->log,
                               .cwd = s->dir,
                               .flags = SK_SPAWN_SESSION | SK_SPAWN_PDEATHSIG,
                               .name = "mariadbd",
                               .log = p->log,
                               .ready = accepts,
                               .arg = s->sock,
                               .ready_ms = READY_MS,
                               .poll_ms = 10,
                               .stop_sig = SIGTERM,
                               .stop_ms = STOP_MS};
    int rc = sk_spawn_start(&cmd, &s->pid, s->errstr, sizeof s->errstr);
    if (rc == 0) snprintf(s->url, sizeof s->url, "mysql://root@127.0.0.1:%d/mysql", s->port);
    return rc;
}

static int stop_any(void *s)
{
    return sk_mysql_spawn_stop(s);
}

static int undo(struct sk_mysql_spawn *s, int rc)
{
    return sk_db_spawn_undo(stop_any, s, s->errstr, sizeof s->errstr, rc);
}

static int make_dir(struct sk_mysql_spawn *s)
{
    int rc =
        sk_spawn_tmpdir(s->dir, sizeof s->dir, "seckill-mysql", 32, s->errstr, sizeof s->errstr);
    if (rc == 0) snprintf(s->sock, sizeof s->sock, "%s/sock", s->dir);
    return rc;
}

int sk_mysql_spawn_init(struct sk_mysql_spawn *s)
{
    memset(s, 0, sizeof *s);
    char bin[300];
    int rc = find_bin(s, "mariadb-install-db", bin, sizeof bin);
    if (rc == 0) rc = make_dir(s);
    if (rc < 0) return undo(s, rc);
    struct my_paths p;
    my_paths(s, &p);
    char data[320];
    snprintf(data, sizeof data, "--datadir=%s", p.data);
    const char *argv[] = {bin,
                          "--no-defaults",
                          data,
                          "--user=root",
                          "--auth-root-authentication-method=normal",
                          "--skip-test-db",
                          "--innodb-log-file-size=16M",
                          NULL};
    rc = run_tool(s, "mariadb-install-db", argv, p.install_log);
    return rc < 0 ? undo(s, rc) : 0;
}

int sk_mysql_spawn_clone(struct sk_mysql_spawn *s, const struct sk_mysql_spawn *tmpl)
{
    memset(s, 0, sizeof *s);
    int rc = make_dir(s);
    if (rc < 0) return undo(s, rc);
    char src[300], log[300];
    snprintf(src, sizeof src, "%s/data", tmpl->dir);
    snprintf(log, sizeof log, "%s/cp.log", s->dir);
    const char *argv[] = {"cp", "-a", src, s->dir, NULL};
    rc = run_tool(s, "cp", argv, log);
    return rc < 0 ? undo(s, rc) : 0;
}

int sk_mysql_spawn_launch(struct sk_mysql_spawn *s, const char *const *settings)
{
    if (!s->dir[0] || s->pid > 0)
        return fail(s, SK_EINVAL, "launch of a MariaDB server without a directory, or running");
    struct my_paths p;
    my_paths(s, &p);
    char bin[300], data[320], sock[320], pid[320], log[320], port[32];
    char set[MAX_SETTINGS][160];
    const char *argv[16 + MAX_SETTINGS] = {bin,
                                           "--no-defaults",
                                           data,
                                           port,
                                           "--bind-address=127.0.0.1",
                                           sock,
                                           pid,
                                           log,
                                           "--user=root",
                                           "--innodb-buffer-pool-size=128M",
                                           "--innodb-log-file-size=16M",
                                           "--max-connections=400",
                                           "--skip-log-bin"};
    size_t n = 13;
    for (size_t i = 0; settings && settings[i]; i++) {
        if (i >= MAX_SETTINGS) return fail(s, SK_EINVAL, "too many mariadbd settings");
        snprintf(set[i], sizeof set[i], "--%s", settings[i]);
        argv[n++] = set[i];
    }
    argv[n] = NULL;
    int rc = find_bin(s, "mariadbd", bin, sizeof bin);
    if (rc < 0) return rc;
    snprintf(data, sizeof data, "--datadir=%s", p.data);
    snprintf(sock, sizeof sock, "--socket=%s", s->sock);
    snprintf(pid, sizeof pid, "--pid-file=%s", p.pid);
    snprintf(log, sizeof log, "--log-error=%s", p.log);
    struct my_launch l = {s, argv, port, sizeof port, &p};
    return sk_db_spawn_on_port(&s->port, TRIES, try_launch, &l, s->errstr, sizeof s->errstr);
}

int sk_mysql_spawn_start(struct sk_mysql_spawn *s, const char *const *settings)
{
    int rc = sk_mysql_spawn_init(s);
    if (rc == 0) rc = sk_mysql_spawn_launch(s, settings);
    return rc < 0 ? undo(s, rc) : 0;
}

int sk_mysql_spawn_halt(struct sk_mysql_spawn *s, int kill9)
{
    if (s->pid <= 0) return 0;
    sk_mysql_spawn_freeze(s, 0); /* a frozen server would hold up the shutdown */
    int rc = sk_spawn_stop(s->pid, kill9 ? SIGKILL : SIGTERM, STOP_MS);
    s->pid = 0;
    return kill9 ? 0 : rc;
}

void sk_mysql_spawn_freeze(const struct sk_mysql_spawn *s, int frozen)
{
    if (s->pid > 0) kill(s->pid, frozen ? SIGSTOP : SIGCONT);
}

int sk_mysql_spawn_stop(struct sk_mysql_spawn *s)
{
    sk_mysql_spawn_halt(s, 0);
    return sk_db_spawn_forget(s->dir, s->url, s->sock, &s->port, s->errstr, sizeof s->errstr);
}
