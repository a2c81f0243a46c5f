/* redis_spawn.c - start and stop a private redis-server (see redis_spawn.h);
 * the process plumbing is spawn.c's. */
#include "tools/spawn/redis_spawn.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

#include <hiredis.h>

#include "core/error.h"
#include "tools/spawn/netutil.h"
#include "tools/spawn/spawn.h"

#define SK_RSPAWN_MAX_EXTRA 48
#define SK_RSPAWN_READY_MS 10000
#define SK_RSPAWN_STOP_MS 5000
/* A port that was free when probed can be taken before redis binds it. */
#define SK_RSPAWN_TRIES 5

#define fail(s, ...) sk_spawn_fail((s)->errstr, sizeof(s)->errstr, __VA_ARGS__)

/* Readiness: the server at port *arg answers PING. */
static int pings(void *arg)
{
    struct timeval tv = {0, 200000};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", *(const int *)arg, tv);
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

int sk_redis_spawn_start(struct sk_redis_spawn *s, const char *const *extra_args)
{
    memset(s, 0, sizeof *s);
    char port[16], logpath[300], errpath[300]; /* filled in below */
    const char *argv[16 + SK_RSPAWN_MAX_EXTRA] = {
        "redis-server", "--port", port,        "--bind", "127.0.0.1",   "--dir", s->dir,
        "--save",       "",       "--logfile", logpath,  "--daemonize", "no"};
    int rc = sk_spawn_args(argv, 13, sizeof argv / sizeof *argv, NULL, extra_args,
                           "redis-server arguments", s->errstr, sizeof s->errstr);
    if (rc == 0)
        rc =
            sk_spawn_tmpdir(s->dir, sizeof s->dir, "seckill-redis", 0, s->errstr, sizeof s->errstr);
    if (rc < 0) return rc;
    snprintf(logpath, sizeof logpath, "%s/redis.log", s->dir);
    snprintf(errpath, sizeof errpath, "%s/redis.stderr", s->dir);
    /* stderr gets the config errors, the log file the rest */
    struct sk_spawn_cmd cmd = {.argv = argv,
                               .err = errpath,
                               .flags = SK_SPAWN_PDEATHSIG,
                               .log = logpath,
                               .ready = pings,
                               .arg = &s->port,
                               .ready_ms = SK_RSPAWN_READY_MS,
                               .poll_ms = 10,
                               .stop_sig = SIGTERM,
                               .stop_ms = SK_RSPAWN_STOP_MS};

    rc = SK_EEXIST;
    for (int t = 0; t < SK_RSPAWN_TRIES && rc == SK_EEXIST; t++) {
        s->port = sk_net_free_port();
        if (s->port <= 0) {
            rc = fail(s, SK_EIO, "no free loopback port: %s", strerror(errno));
            break;
        }
        snprintf(port, sizeof port, "%d", s->port);
        rc = sk_spawn_start(&cmd, &s->pid, s->errstr, sizeof s->errstr);
    }
    if (rc != 0) { /* nothing runs: sk_spawn_start leaves no child behind */
        sk_spawn_rmtree(s->dir, NULL, 0);
        s->dir[0] = 0;
        s->port = 0;
        return rc == SK_EEXIST ? SK_EIO : rc; /* errstr set by the last try */
    }
    snprintf(s->url, sizeof s->url, "redis://127.0.0.1:%d", s->port);
    return 0;
}

int sk_redis_spawn_stop(struct sk_redis_spawn *s)
{
    sk_spawn_stop(s->pid, SIGTERM, SK_RSPAWN_STOP_MS);
    s->pid = 0;
    int rc = sk_spawn_rmtree(s->dir, s->errstr, sizeof s->errstr);
    s->dir[0] = 0;
    s->url[0] = 0;
    return rc;
}
