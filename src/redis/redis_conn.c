/* redis_conn.c - blocking hiredis connection with timeouts and backoff
 * (redis_conn.h). A redis+cluster:// handle is served by
 * redis_conn_cluster.c (redis_conn_int.h): every call below hands it over
 * when r->cl is set, so the redis:// path pays one pointer test. A
 * redis+sentinel:// handle finds its master through redis_conn_sentinel.c
 * and is otherwise a plain one. */
#include "redis/redis_conn.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "redis/handshake.h"
#include "redis/redis_conn_int.h"

#define SK_BACKOFF_MIN_MS 50
#define SK_BACKOFF_MAX_MS 2000

int sk_redis_set_err(sk_redis *r, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->errstr, sizeof r->errstr, fmt, ap);
    va_end(ap);
    r->err = err;
    return err;
}

void sk_redis_backoff(sk_redis *r, int64_t now)
{
    r->backoff_ms = r->backoff_ms ? r->backoff_ms * 2 : SK_BACKOFF_MIN_MS;
    if (r->backoff_ms > SK_BACKOFF_MAX_MS) r->backoff_ms = SK_BACKOFF_MAX_MS;
    r->next_try_ms = now + r->backoff_ms;
}

static struct timeval tv_ms(int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    return tv;
}

int sk_redis_new(sk_redis **out, const char *url, int connect_timeout_ms, int command_timeout_ms,
                 char *errbuf, size_t errcap)
{
    *out = NULL;
    sk_redis *r = calloc(1, sizeof *r);
    if (!r) return SK_ENOMEM;
    if (sk_redis_url_parse(&r->url, url, strlen(url), errbuf, errcap) < 0) {
        free(r);
        return SK_EINVAL;
    }
    r->connect_timeout_ms = connect_timeout_ms > 0 ? connect_timeout_ms : 1000;
    r->command_timeout_ms = command_timeout_ms > 0 ? command_timeout_ms : 1000;
    if (r->url.cluster && sk_redis_cl_new(r) < 0) {
        free(r);
        return SK_ENOMEM;
    }
    *out = r;
    return 0;
}

static void pipe_reset(sk_redis *r)
{
    r->pipe_n = 0;
    r->pipe_read = 0;
    r->pipe_broken = 0;
}

void sk_redis_disconnect(sk_redis *r)
{
    if (!r) return;
    pipe_reset(r); /* the connection's replies go with it */
    if (r->cl) {
        sk_redis_cl_drop_all(r);
        return;
    }
    if (r->c) {
        redisFree(r->c);
        r->c = NULL;
    }
}

/* The caller starts anew (a command, or an append after reading) while its
 * pipeline still owes replies: they are dropped, so that nothing reads
 * them later. On one node the connection goes (its replies with it, and
 * commands never sent never run); a cluster frees what it holds. */
static void pipe_abandon(sk_redis *r)
{
    if (r->pipe_n && !r->pipe_broken) {
        r->pipe_dropped += r->pipe_n;
        if (r->cl)
            sk_redis_cl_pipe_drop(r);
        else
            sk_redis_disconnect(r);
    }
    pipe_reset(r);
}

/* A read of the pipeline failed (rc): the rest of it is gone. */
static int pipe_fail(sk_redis *r, int rc)
{
    if (r->cl) sk_redis_cl_pipe_drop(r);
    r->pipe_n = 0;
    r->pipe_read = 0;
    r->pipe_broken = 1;
    r->err = rc;
    return rc;
}

void sk_redis_free(sk_redis *r)
{
    if (!r) return;
    sk_redis_disconnect(r);
    sk_redis_cl_free(r);
    sk_redis_sn_free(r);
    free(r);
}

/* hiredis error -> SK code: a timeout is reported as EAGAIN/EWOULDBLOCK. */
static int io_err(sk_redis *r, const char *what)
{
    int timeout = r->c && r->c->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK);
    int e = timeout ? SK_ETIMEDOUT : SK_EIO;
    int sn = r->url.sentinel;
    sk_redis_set_err(
        r, e, "redis %s:%d: %s: %s", sn ? r->sn_host : r->url.host, sn ? r->sn_port : r->url.port,
        what, timeout ? "timed out" : (r->c && r->c->errstr[0] ? r->c->errstr : "connection lost"));
    sk_redis_disconnect(r);
    return e;
}

/* The settings host:port said, into r's table (its row replaced; a full
 * table drops its oldest row). */
static void keep_settings(sk_redis *r, const char *host, int port, const struct sk_rsettings *s)
{
    char addr[80];
    if (port)
        snprintf(addr, sizeof addr, "%.64s:%d", host, port);
    else
        snprintf(addr, sizeof addr, "%.79s", host);
    int i = 0;
    while (i < r->nrset && strcmp(r->rset[i].addr, addr))
        i++;
    if (i == SK_REDIS_RSET_MAX) i = 0;
    /* newest last */
    memmove(&r->rset[i], &r->rset[i + 1],
            (size_t)(r->nrset - i - (i < r->nrset)) * sizeof *r->rset);
    if (i < r->nrset) r->nrset--;
    struct sk_redis_rset *row = &r->rset[r->nrset++];
    snprintf(row->addr, sizeof row->addr, "%s", addr);
    snprintf(row->host, sizeof row->host, "%.63s", host);
    row->port = port;
    row->s = *s;
}

void sk_redis_each_settings(const sk_redis *r,
                            void (*fn)(void *data, const char *addr, const struct sk_rsettings *s),
                            void *data)
{
    for (int i = 0; i < r->nrset; i++)
        fn(data, r->rset[i].addr, &r->rset[i].s);
}

int sk_redis_probe_settings(sk_redis *r, const char *host, int port)
{
    redisContext *c;
    int rc = sk_redis_open_ctx(r, host, port, &c);
    if (rc == 0) redisFree(c);
    return rc;
}

void sk_redis_refresh_settings(sk_redis *r)
{
    /* a copy: each probe moves its row to the end */
    int n = r->nrset;
    struct {
        char host[64];
        int port;
    } at[SK_REDIS_RSET_MAX];
    for (int i = 0; i < n; i++) {
        memcpy(at[i].host, r->rset[i].host, sizeof at[i].host);
        at[i].port = r->rset[i].port;
    }
    int err = r->err;
    char errstr[sizeof r->errstr];
    memcpy(errstr, r->errstr, sizeof errstr);
    for (int i = 0; i < n; i++)
        sk_redis_probe_settings(r, at[i].host, at[i].port);
    r->err = err; /* a failed probe is not the client's failure */
    memcpy(r->errstr, errstr, sizeof errstr);
}

/* TCP connect + timeouts + the handshake (handshake.h: AUTH, SELECT, INFO) to
 * host:port: 0 with *out set, or an error with r->errstr. */
int sk_redis_open_ctx(sk_redis *r, const char *host, int port, redisContext **out)
{
    *out = NULL;
    redisContext *c = port == 0 ? redisConnectUnixWithTimeout(host, tv_ms(r->connect_timeout_ms))
                                : redisConnectWithTimeout(host, port, tv_ms(r->connect_timeout_ms));
    if (!c || c->err) {
        sk_redis_set_err(r, SK_EIO, "cannot connect to redis %s:%d: %s", host, port,
                         c ? c->errstr : "out of memory");
        if (c) redisFree(c);
        return SK_EIO;
    }
    int rc = 0;
    if (redisSetTimeout(c, tv_ms(r->command_timeout_ms)) != REDIS_OK)
        rc = sk_redis_set_err(r, SK_EIO, "redis %s:%d: set timeout failed", host, port);
    struct sk_handshake hs;
    struct sk_rsettings set;
    sk_handshake_init(&hs, &r->url, SK_HS_AUTH | SK_HS_SELECT | SK_HS_INFO);
    for (int i = 0; !rc && i < hs.n; i++) {
        redisReply *rep = redisCommandArgv(c, hs.argc[i], hs.argv[i], NULL);
        char why[160];
        rc = sk_handshake_check(&hs, i, rep, why, sizeof why);
        if (rc) sk_redis_set_err(r, rc, "redis %s:%d: %s", host, port, why);
        if (!rc && sk_handshake_settings(&hs, i, rep, &set)) keep_settings(r, host, port, &set);
        if (rep) freeReplyObject(rep);
    }
    if (rc) {
        redisFree(c);
        return rc;
    }
    *out = c;
    return 0;
}

int sk_redis_connect(sk_redis *r)
{
    sk_redis_disconnect(r);
    int rc = r->cl             ? sk_redis_cl_connect(r)
             : r->url.sentinel ? sk_redis_sn_connect(r)
                               : sk_redis_open_ctx(r, r->url.host, r->url.port, &r->c);
    if (rc < 0) return rc;
    r->connects++;
    r->backoff_ms = 0;
    r->err = 0;
    r->errstr[0] = 0;
    return 0;
}

int sk_redis_ensure(sk_redis *r)
{
    if (r->cl) return sk_redis_cl_ensure(r);
    /* a pipeline runs on one connection: a master that moved is left after it */
    if (r->c && r->pipe_n) return 0;
    if (r->c && r->url.sentinel) {
        int rc = sk_redis_sn_check(r); /* may drop r->c: a master to leave */
        if (rc < 0 && !r->c) return rc;
    }
    if (r->c) return 0;
    int64_t now = sk_mono_ms();
    if (r->backoff_ms && now < r->next_try_ms)
        return r->err ? r->err
                      : sk_redis_set_err(r, SK_EIO, "redis unreachable (reconnect backoff)");
    int rc = sk_redis_connect(r);
    if (rc < 0) {
        sk_redis_backoff(r, now);
    }
    return rc;
}

int sk_redis_master_command(sk_redis *r, int k, redisReply **out, int argc, const char **argv,
                            const size_t *lens)
{
    *out = NULL;
    if (r->cl) {
        if (r->pipe_n || r->pipe_broken) pipe_abandon(r);
        return sk_redis_cl_master_command(r, k, out, argc, argv, lens);
    }
    return k == 0 ? sk_redis_command(r, out, argc, argv, lens) : SK_ENOTFOUND;
}

int sk_redis_command(sk_redis *r, redisReply **out, int argc, const char **argv, const size_t *lens)
{
    *out = NULL;
    if (r->pipe_n || r->pipe_broken) pipe_abandon(r);
    if (r->cl) return sk_redis_cl_command(r, out, argc, argv, lens);
    for (int tries = 0;; tries++) {
        int rc = sk_redis_ensure(r);
        if (rc < 0) return rc;
        redisReply *rep = redisCommandArgv(r->c, argc, argv, lens);
        if (!rep) return io_err(r, argv[0]);
        if (r->url.sentinel && tries == 0 && sk_redis_is_readonly(rep)) {
            /* a demoted master: it refused, so nothing ran; ask the
             * Sentinels again and send it once more */
            sk_redis_sn_readonly(r, rep);
            freeReplyObject(rep);
            sk_redis_disconnect(r);
            r->backoff_ms = 0;
            continue;
        }
        *out = rep;
        r->err = 0;
        return 0;
    }
}

int sk_redis_cmd(sk_redis *r, redisReply **out, const char *fmt, ...)
{
    *out = NULL;
    va_list ap;
    if (r->pipe_n || r->pipe_broken) pipe_abandon(r);
    if (r->cl) {
        va_start(ap, fmt);
        int crc = sk_redis_cl_vcmd(r, out, fmt, ap);
        va_end(ap);
        return crc;
    }
    int rc = sk_redis_ensure(r);
    if (rc < 0) return rc;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(r->c, fmt, ap);
    va_end(ap);
    if (!rep) return io_err(r, "command");
    if (r->url.sentinel && sk_redis_is_readonly(rep)) {
        sk_redis_sn_readonly(r, rep);
        sk_redis_disconnect(r); /* the next command asks the Sentinels */
        r->backoff_ms = 0;
    }
    *out = rep;
    r->err = 0;
    return 0;
}

int sk_redis_append(sk_redis *r, int argc, const char **argv, const size_t *lens)
{
    if (r->pipe_broken || (r->pipe_read && !r->pipe_window)) pipe_abandon(r);
    unsigned owed = r->pipe_n;
    int rc = 0;
    if (r->cl) {
        rc = sk_redis_cl_append(r, argc, argv, lens);
    } else if (!r->pipe_n) {
        rc = sk_redis_ensure(r);
    } else if (!r->c) {
        rc = sk_redis_set_err(r, SK_EIO, "redis connection lost inside a pipeline");
    }
    if (rc == 0 && !r->cl && redisAppendCommandArgv(r->c, argc, argv, lens) != REDIS_OK)
        rc = io_err(r, "append");
    if (rc < 0) {
        /* nothing is owed for this command; what was, is gone */
        if (owed) pipe_fail(r, rc);
        return rc;
    }
    r->pipe_n++;
    return 0;
}

int sk_redis_read(sk_redis *r, redisReply **out)
{
    *out = NULL;
    if (r->pipe_broken)
        return r->err ? r->err : sk_redis_set_err(r, SK_EIO, "redis pipeline broken");
    if (!r->pipe_n)
        return r->err ? r->err : sk_redis_set_err(r, SK_ESTATE, "no pipelined reply to read");
    r->pipe_read = 1;
    if (r->cl) {
        int rc = sk_redis_cl_read(r, out);
        if (rc < 0) return pipe_fail(r, rc);
    } else {
        void *rep = NULL;
        if (!r->c) return pipe_fail(r, sk_redis_set_err(r, SK_EIO, "redis connection lost"));
        if (redisGetReply(r->c, &rep) != REDIS_OK || !rep)
            return pipe_fail(r, io_err(r, "read reply"));
        /* mid-pipeline the connection stays; the next ensure asks the Sentinels */
        if (r->url.sentinel) sk_redis_sn_readonly(r, rep);
        *out = rep;
    }
    if (--r->pipe_n == 0) pipe_reset(r);
    r->err = 0;
    return 0;
}

int sk_redis_info_field(sk_redis *r, const char *section, const char *field, char *val, size_t cap)
{
    redisReply *rep;
    int rc = sk_redis_cmd(r, &rep, "INFO %s", section);
    if (rc < 0) return rc;
    rc = SK_ENOTFOUND;
    if (rep->type == REDIS_REPLY_STRING || rep->type == REDIS_REPLY_STATUS) {
        size_t fl = strlen(field);
        for (char *line = rep->str; line && *line;) {
            char *nl = strchr(line, '\n');
            if (strncmp(line, field, fl) == 0 && line[fl] == ':') {
                size_t n = nl ? (size_t)(nl - line - fl - 1) : strlen(line + fl + 1);
                while (n && (line[fl + 1 + n - 1] == '\r'))
                    n--;
                if (n >= cap) n = cap - 1;
                memcpy(val, line + fl + 1, n);
                val[n] = 0;
                rc = 0;
                break;
            }
            line = nl ? nl + 1 : NULL;
        }
    }
    freeReplyObject(rep);
    return rc;
}
