/* sentinel_harness.c - a test's own master, replicas and Sentinels, started
 * by tests/support/spawn/sentinel_spawn.c (see sentinel_harness.h). */
#include "support/sentinel_harness.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/wait.h>

#include "spawn/redis_spawn.h"
#include "support/harness.h"

void sk_th_sentinel_start(struct sk_sentinel_spawn *s, int replicas, const char *const *extra)
{
    struct sk_sentinel_spawn_opts o = {.replicas = replicas, .extra_args = extra};
    if (sk_sentinel_spawn_start(s, &o) < 0)
        sk_th_fail(__FILE__, __LINE__, "sentinel setup: %s", s->errstr);
}

int sk_th_sentinel_master(struct sk_sentinel_spawn *s)
{
    int m = sk_sentinel_spawn_master(s);
    if (m < 0) sk_th_fail(__FILE__, __LINE__, "no sentinel names a master of ours");
    return m;
}

int sk_th_sentinel_kill_master(struct sk_sentinel_spawn *s)
{
    int m = sk_th_sentinel_master(s);
    pid_t pid = s->node[m].pid;
    if (pid <= 0) sk_th_fail(__FILE__, __LINE__, "master (node %d) is not running", m);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    s->node[m].pid = 0;
    return m;
}

int sk_th_sentinel_await_failover(struct sk_sentinel_spawn *s, int old)
{
    int n = sk_sentinel_spawn_wait_failover(s, old, 30000);
    if (n < 0) sk_th_fail(__FILE__, __LINE__, "%s", s->errstr);
    return n;
}

void sk_th_sentinel_restart_node(struct sk_sentinel_spawn *s, int i, const char *const *extra)
{
    int m = sk_sentinel_spawn_master(s);
    char mport[16];
    const char *args[40] = {"--repl-diskless-sync-delay", "0"};
    size_t n = 2;
    if (m >= 0 && m != i) {
        snprintf(mport, sizeof mport, "%d", s->node[m].port);
        args[n++] = "--replicaof";
        args[n++] = "127.0.0.1";
        args[n++] = mport;
    }
    for (size_t k = 0; extra && extra[k] && n + 1 < sizeof args / sizeof *args; k++)
        args[n++] = extra[k];
    args[n] = NULL;
    if (sk_redis_spawn_restart(&s->node[i], args) < 0)
        sk_th_fail(__FILE__, __LINE__, "restart of node %d: %s", i, s->node[i].errstr);
}

redisReply *sk_th_sentinel_cmd(const struct sk_sentinel_spawn *s, int i, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = sk_redis_spawn_vcmd(s->node[i].port, 2000, fmt, ap);
    va_end(ap);
    return r;
}

void sk_th_sentinel_stop(struct sk_sentinel_spawn *s)
{
    if (sk_sentinel_spawn_stop(s) < 0) fprintf(stderr, "# sentinel stop: %s\n", s->errstr);
}
