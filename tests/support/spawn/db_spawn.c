/* db_spawn.c - the steps the SQL server spawners share (db_spawn.h). */
#include "tests/support/spawn/db_spawn.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "core/error.h"
#include "spawn/netutil.h"

int sk_db_spawn_tool(const struct sk_spawn_cmd *cmd, const char *name, const char *log, int ms,
                     char *err, size_t cap)
{
    pid_t pid;
    int st, rc = sk_spawn_exec(cmd, &pid, err, cap);
    if (rc < 0) return rc;
    rc = sk_spawn_wait(&pid, NULL, NULL, ms, 10, &st);
    if (rc == SK_ETIMEDOUT) {
        sk_spawn_stop(pid, SIGKILL, 1000);
        return sk_spawn_fail(err, cap, SK_EIO, "%s did not finish in %d ms", name, ms);
    }
    if (rc < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        const char *logs[] = {log};
        sk_spawn_exited(name, st, logs, 1, err, cap);
        return SK_EIO;
    }
    return 0;
}

int sk_db_spawn_undo(int (*stop)(void *s), void *s, char *err, size_t cap, int rc)
{
    char keep[1024];
    snprintf(keep, sizeof keep, "%s", err);
    stop(s);
    snprintf(err, cap, "%s", keep);
    return rc;
}

int sk_db_spawn_forget(char *dir, char *url, char *other, int *port, char *err, size_t cap)
{
    int rc = sk_spawn_rmtree(dir, err, cap);
    dir[0] = 0;
    url[0] = 0;
    other[0] = 0;
    *port = 0;
    return rc;
}

int sk_db_spawn_on_port(int *port, int tries, int (*try_launch)(void *arg), void *arg, char *err,
                        size_t cap)
{
    int rc;
    if (*port > 0) { /* a restart: this port or nothing */
        rc = try_launch(arg);
        return rc == SK_EEXIST ? SK_EIO : rc;
    }
    rc = SK_EEXIST;
    for (int t = 0; t < tries && rc == SK_EEXIST; t++) {
        *port = sk_net_free_port();
        if (*port <= 0) {
            *port = 0;
            return sk_spawn_fail(err, cap, SK_EIO, "no free loopback port: %s", strerror(errno));
        }
        rc = try_launch(arg);
    }
    if (rc < 0) *port = 0;                /* the next launch picks again */
    return rc == SK_EEXIST ? SK_EIO : rc; /* err set by the last try */
}
