/* server_spawn.c - a program a test starts for itself (server_spawn.h). */
#include "support/server_spawn.h"

#include <signal.h>
#include <string.h>

#include "support/harness.h"

void sk_th_server_cmd(struct sk_spawn_cmd *c, const char *name, const char *const *argv,
                      const char *log, int (*ready)(void *arg), void *arg, int ready_ms)
{
    memset(c, 0, sizeof *c);
    c->argv = argv;
    c->out = log;
    c->err = log;
    c->flags = SK_SPAWN_PDEATHSIG;
    c->name = name;
    c->ready = ready;
    c->arg = arg;
    c->ready_ms = ready_ms;
    c->poll_ms = 20;
    c->stop_sig = SIGTERM;
    c->stop_ms = 2000;
}

pid_t sk_th_server_start(const char *name, const char *const *argv, const char *log,
                         int (*ready)(void *arg), void *arg, int ready_ms)
{
    struct sk_spawn_cmd c;
    sk_th_server_cmd(&c, name, argv, log, ready, arg, ready_ms);
    pid_t pid = 0;
    char err[600];
    if (sk_spawn_start(&c, &pid, err, sizeof err) < 0)
        sk_th_fail(__FILE__, __LINE__, "%s (log %s)", err, log);
    return pid;
}
