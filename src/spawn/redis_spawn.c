/* redis_spawn.c - start, restart and stop a private redis-server (see
 * redis_spawn.h); the process plumbing is spawn.c's. */
#include "spawn/redis_spawn.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <hiredis.h>

#include "core/error.h"
#include "redis/redis_conn.h"
#include "spawn/netutil.h"
#include "spawn/spawn.h"

#define SK_RSPAWN_MAX_EXTRA 48
/* A restart loads the AOF first (LOADING is not ready): a nemesis's node
 * holds 50-100 MB of it after two minutes of sale, which a loaded 2-core
 * machine took over 10 s to read. */
#define SK_RSPAWN_READY_MS 30000
#define SK_RSPAWN_STOP_MS 5000
/* A port that was free when probed can be taken before redis binds it. */
#define SK_RSPAWN_TRIES 5

#define fail(s, ...) sk_spawn_fail((s)->errstr, sizeof(s)->errstr, __VA_ARGS__)

/* Readiness: the server at port *arg answers PING with anything but
 * LOADING (an AOF or RDB being read after a restart). NOAUTH counts: the
 * server serves, it only wants a password. */
static int pings(void *arg)
{
    redisReply *r = sk_redis_spawn_cmd(*(const int *)arg, 200, "PING");
    int ok = r && !(r->type == REDIS_REPLY_ERROR && strncmp(r->str, "LOADING", 7) == 0);
    if (r) freeReplyObject(r);
    return ok;
}

/* Runs redis-server in s->dir with extra_args until it is ready: on
 * s->port, or (pick) on a free port, tried again while the one picked
 * turns out taken. Nothing runs on failure. */
static int launch(struct sk_redis_spawn *s, const char *const *extra_args, int pick)
{
    char port[16], logpath[300], errpath[300]; /* filled in below */
    const char *argv[24 + SK_RSPAWN_MAX_EXTRA] = {
        "redis-server", "--port", port,        "--bind", "127.0.0.1",   "--dir", s->dir,
        "--save",       "",       "--logfile", logpath,  "--daemonize", "no"};
    size_t at = 13;
    /* a unix socket too, for clients on this machine (sun_path: 108 bytes) */
    int n = snprintf(s->sock, sizeof s->sock, "%s/redis.sock", s->dir);
    if (n > 0 && n < 100 && (size_t)n < sizeof s->sock) {
        argv[at++] = "--unixsocket";
        argv[at++] = s->sock;
        argv[at++] = "--unixsocketperm";
        argv[at++] = "700";
    } else {
        s->sock[0] = 0;
    }
    int rc = sk_spawn_args(argv, at, sizeof argv / sizeof *argv, NULL, extra_args,
                           "redis-server arguments", s->errstr, sizeof s->errstr);
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
    for (int t = 0; t < (pick ? SK_RSPAWN_TRIES : 1) && rc == SK_EEXIST; t++) {
        if (pick) s->port = sk_net_free_port();
        if (s->port <= 0) return fail(s, SK_EIO, "no free loopback port: %s", strerror(errno));
        snprintf(port, sizeof port, "%d", s->port);
        rc = sk_spawn_start(&cmd, &s->pid, s->errstr, sizeof s->errstr);
    }
    if (rc == SK_EEXIST) rc = SK_EIO; /* errstr set by the last try */
    if (rc == 0) {
        snprintf(s->url, sizeof s->url, "redis://127.0.0.1:%d", s->port);
        if (s->sock[0]) snprintf(s->unix_url, sizeof s->unix_url, "redis+unix://%s", s->sock);
    }
    return rc;
}

int sk_redis_spawn_start(struct sk_redis_spawn *s, const char *const *extra_args)
{
    memset(s, 0, sizeof *s);
    int rc =
        sk_spawn_tmpdir(s->dir, sizeof s->dir, "seckill-redis", 0, s->errstr, sizeof s->errstr);
    if (rc == 0) rc = launch(s, extra_args, 1);
    if (rc < 0) { /* nothing runs: launch leaves no child behind */
        sk_spawn_rmtree(s->dir, NULL, 0);
        s->dir[0] = 0;
        s->port = 0;
    }
    return rc;
}

int sk_redis_spawn_halt(struct sk_redis_spawn *s, int hard)
{
    int rc = sk_spawn_stop(s->pid, hard ? SIGKILL : SIGTERM, SK_RSPAWN_STOP_MS);
    s->pid = 0;
    return hard ? 0 : rc;
}

int sk_redis_spawn_restart(struct sk_redis_spawn *s, const char *const *extra_args)
{
    sk_redis_spawn_halt(s, 0);
    if (!s->dir[0] || s->port <= 0)
        return fail(s, SK_EINVAL, "restart of a redis-server that was never started");
    return launch(s, extra_args, 0);
}

int sk_redis_spawn_stop(struct sk_redis_spawn *s)
{
    sk_redis_spawn_halt(s, 0);
    int rc = sk_spawn_rmtree(s->dir, s->errstr, sizeof s->errstr);
    s->dir[0] = 0;
    s->url[0] = 0;
    s->unix_url[0] = 0;
    return rc;
}

redisReply *sk_redis_spawn_vcmd(int port, int timeout_ms, const char *fmt, va_list ap)
{
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    sk_redis *c;
    if (sk_redis_new(&c, url, timeout_ms, timeout_ms, NULL, 0) < 0) return NULL;
    c->bare = 1; /* whatever it is: a replica, a Sentinel, one wanting a password */
    redisReply *r = NULL;
    sk_redis_vcmd(c, &r, fmt, ap);
    sk_redis_free(c);
    return r;
}

redisReply *sk_redis_spawn_cmd(int port, int timeout_ms, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = sk_redis_spawn_vcmd(port, timeout_ms, fmt, ap);
    va_end(ap);
    return r;
}
