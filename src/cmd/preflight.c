/* preflight.c - Redis and the store reached before `seckill serve`
 * starts, for --check and the start banner (preflight.h). */
#include "cmd/preflight.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/db_file.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "core/redact.h"
#include "redis/handshake.h"
#include "redis/redis_conn.h"
#include "redis/redis_settings.h"
#include "store/store.h"

/* Appends a formatted piece to buf (cap bytes), cut when full. */
static void add(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add(char *buf, size_t cap, const char *fmt, ...)
{
    size_t n = strlen(buf);
    if (n + 1 >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, cap - n, fmt, ap);
    va_end(ap);
}

static const char *topology(const struct sk_redis_url *u)
{
    return u->cluster     ? "Cluster"
           : u->sentinel  ? "Sentinel"
           : u->unix_sock ? "unix socket"
                          : "single node";
}

/* One CONFIG GET name into rs; "" or why it could not be read into why. */
static void config_get(sk_redis *r, const char *name, struct sk_rsettings *rs, char *why,
                       size_t cap)
{
    redisReply *rep;
    if (sk_redis_cmd(r, &rep, "CONFIG GET %s", name) < 0) {
        snprintf(why, cap, "%s", r->errstr);
        return;
    }
    if (sk_rsettings_config_reply(rs, rep) < 0 && !why[0])
        snprintf(why, cap, "CONFIG GET refused: %.200s",
                 rep->type == REDIS_REPLY_ERROR ? rep->str : "an unexpected reply");
    freeReplyObject(rep);
}

/* Where writes go now: the Sentinels' master, the Cluster's masters, or
 * the one server. */
static void master_of(sk_redis *r, char *out, size_t cap)
{
    const struct sk_redis_url *u = &r->url;
    if (u->sentinel) {
        snprintf(out, cap, "%.200s:%d (named by the Sentinels for %.60s)", r->sn_host, r->sn_port,
                 u->master_name);
    } else if (u->cluster) {
        const struct sk_cluster_map *m = sk_redis_cluster_map(r);
        int masters = 0;
        for (int i = 0; m && i < m->nnodes; i++)
            masters += m->master[i] != 0;
        snprintf(out, cap, "%d master%s%s", masters, masters == 1 ? "" : "s",
                 m && m->uncovered ? ", some slots uncovered" : "");
    } else if (u->unix_sock) {
        snprintf(out, cap, "%s", u->host);
    } else {
        snprintf(out, cap, "%s:%d", u->host, u->port);
    }
}

void sk_preflight_redis(const struct sk_config *cfg, struct sk_preflight *p)
{
    p->redis_rc = 0;
    p->redis_err[0] = p->master[0] = p->role[0] = p->version[0] = p->policy[0] = 0;
    p->persistence[0] = p->settings_why[0] = 0;
    p->settings_level = -1;
    snprintf(p->topology, sizeof p->topology, "?");
    sk_redis *r;
    char err[256] = "";
    int rc =
        sk_redis_new(&r, cfg->redis, cfg->redis_timeout_ms, cfg->redis_timeout_ms, err, sizeof err);
    if (rc < 0) {
        p->redis_rc = rc;
        snprintf(p->redis_err, sizeof p->redis_err, "%s", err[0] ? err : sk_strerror(rc));
        return;
    }
    snprintf(p->topology, sizeof p->topology, "%s", topology(&r->url));
    if ((rc = sk_redis_connect(r)) < 0) {
        p->redis_rc = rc;
        snprintf(p->redis_err, sizeof p->redis_err, "%s",
                 r->errstr[0] ? r->errstr : sk_strerror(rc));
        size_t n = strlen(p->redis_err); /* the server's sentence ends the line's */
        while (n && (p->redis_err[n - 1] == '.' || p->redis_err[n - 1] == ' '))
            p->redis_err[--n] = 0;
        sk_redis_free(r);
        return;
    }
    master_of(r, p->master, sizeof p->master);
    redisReply *rep;
    if (!r->url.cluster && sk_redis_cmd(r, &rep, "ROLE") == 0) {
        snprintf(p->role, sizeof p->role, "%s", sk_handshake_role(rep));
        freeReplyObject(rep);
    }
    struct sk_rsettings rs;
    sk_rsettings_init(&rs);
    if (sk_redis_cmd(r, &rep, "INFO") == 0) {
        if (rep->type == REDIS_REPLY_STRING) (void)sk_rsettings_info(&rs, rep->str, rep->len);
        freeReplyObject(rep);
    }
    char why[300] = "";
    static const char *const names[] = {"maxmemory-policy", "maxmemory", "appendonly",
                                        "appendfsync"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        config_get(r, names[i], &rs, why, sizeof why);
    snprintf(p->version, sizeof p->version, "%s", rs.version);
    snprintf(p->policy, sizeof p->policy, "%s", rs.policy);
    if (rs.aof_enabled < 0)
        snprintf(p->persistence, sizeof p->persistence, "unknown");
    else
        snprintf(p->persistence, sizeof p->persistence, "%s",
                 rs.aof_enabled ? "AOF on" : "AOF off (a restart keeps only the last snapshot)");
    if (rs.appendfsync[0])
        add(p->persistence, sizeof p->persistence, ", appendfsync %s", rs.appendfsync);
    else if (rs.aof_enabled != 0)
        add(p->persistence, sizeof p->persistence, ", appendfsync unknown (%s)",
            why[0] ? why : "not said");
    struct sk_rset_verdict v;
    p->settings_level = sk_rsettings_judge(&rs, p->stock_ahead, &v);
    for (int i = 0; i < v.n; i++)
        add(p->settings_why, sizeof p->settings_why, "%s%s: %s", i ? "; " : "", v.f[i].setting,
            v.f[i].why);
    sk_redis_free(r);
}

static const char *db_kind(const char *spec)
{
    if (!strncmp(spec, "sqlite:", 7)) return "SQLite";
    if (!strncmp(spec, "postgres://", 11) || !strncmp(spec, "postgresql://", 13))
        return "PostgreSQL";
    return "MariaDB/MySQL";
}

/* The units the store's sales that may still sell (preheated or open,
 * not ended) have left: the orders Redis must hold room for until the
 * worker persists them (redis_settings.h, the fit rule). 0 when unread. */
static int64_t stock_ahead(sk_store *st)
{
    struct sk_activity *a;
    size_t n;
    if (sk_store_activity_list(st, &a, &n) < 0) return 0;
    int64_t now = sk_wall_ms(), sum = 0;
    for (size_t i = 0; i < n; i++)
        if ((!strcmp(a[i].state, "preheated") || !strcmp(a[i].state, "open")) &&
            a[i].end_ms > now && a[i].stock_db > 0)
            sum += a[i].stock_db;
    free(a);
    return sum;
}

void sk_preflight_store(const struct sk_config *cfg, struct sk_preflight *p)
{
    p->db_rc = 0;
    p->db_err[0] = p->db_note[0] = p->db_identity[0] = 0;
    p->stock_ahead = 0;
    snprintf(p->db_kind, sizeof p->db_kind, "%s", db_kind(cfg->db));
    char err[600];
    /* no file made here: a missing one in a directory that exists is
     * what a first start makes */
    if (sk_db_file_check(cfg->db, 0, err, sizeof err) < 0) {
        if (sk_db_file_check(cfg->db, 1, err, sizeof err) < 0) {
            p->db_rc = SK_ENOTFOUND;
            snprintf(p->db_err, sizeof p->db_err, "%s", err);
            return;
        }
        const char *path = cfg->db + 7, *slash = strrchr(path, '/');
        char dir[600];
        snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
        if (!dir[0]) snprintf(dir, sizeof dir, "/");
        if (access(dir, W_OK | X_OK) < 0) {
            p->db_rc = SK_EDB;
            snprintf(p->db_err, sizeof p->db_err,
                     "no database file %.200s yet, and its directory %.200s is not writable "
                     "by this user (%.60s)",
                     path, dir, strerror(errno));
            return;
        }
        snprintf(p->db_note, sizeof p->db_note, "no file yet: serve makes %s at start", path);
        return;
    }
    sk_store *st;
    int rc = sk_store_open(&st, cfg->db, err, sizeof err);
    if (rc < 0) {
        p->db_rc = rc;
        snprintf(p->db_err, sizeof p->db_err, "%s", err);
        return;
    }
    int version = 0;
    if (sk_store_schema_version(st, &version) == 0)
        snprintf(p->db_note, sizeof p->db_note, "schema %d", version);
    /* the identity preheat stamps into Redis (store.h) */
    if (sk_store_identity(st, p->db_identity, sizeof p->db_identity) < 0) p->db_identity[0] = 0;
    p->stock_ahead = stock_ahead(st);
    sk_store_close(st);
}

/* 1 when the Redis part says the node cannot sell. */
static int redis_unfit(const struct sk_preflight *p)
{
    return p->redis_rc != 0 || p->settings_level >= SK_RSET_UNSAFE || !strcmp(p->role, "slave");
}

int sk_preflight_report(FILE *f, const struct sk_config *cfg, const struct sk_preflight *p,
                        const char *file)
{
    char safe[600];
    fprintf(f, "config     %s: ok\n", file[0] ? file : "no file (defaults and the environment)");
    fprintf(f, "listen     %s (buyers and the admin API)%s%s\n", cfg->listen,
            cfg->ops_listen[0] ? "; ops " : "; ops on the same port",
            cfg->ops_listen[0] ? cfg->ops_listen : "");
    sk_redact_url(cfg->redis, safe, sizeof safe);
    if (p->redis_rc) {
        fprintf(f, "redis      %s: NOT REACHED: %s\n", safe, p->redis_err);
    } else {
        fprintf(f, "redis      %s: reached, %s, master %s%s%s\n", safe, p->topology, p->master,
                p->version[0] ? ", Redis " : "", p->version);
        if (!strcmp(p->role, "slave"))
            fprintf(f, "  role              a replica: it refuses writes (point redis at the "
                       "master, or at the Sentinels)\n");
        fprintf(f, "  persistence       %s\n", p->persistence);
        fprintf(f, "  maxmemory-policy  %s\n", p->policy[0] ? p->policy : "unknown");
        if (p->settings_why[0])
            fprintf(f, "  %-17s %s\n",
                    p->settings_level >= SK_RSET_UNSAFE ? "UNSAFE"
                    : p->settings_level >= SK_RSET_WARN ? "warning"
                                                        : "note",
                    p->settings_why);
    }
    sk_redact_url(cfg->db, safe, sizeof safe);
    if (p->db_rc)
        fprintf(f, "store      %s: NOT REACHED: %s\n", safe, p->db_err);
    else
        fprintf(f, "store      %s: %s, %s%s%s\n", safe, p->db_kind, p->db_note,
                p->db_identity[0] ? ", identity " : "", p->db_identity);
    int bad = redis_unfit(p) || p->db_rc != 0;
    fprintf(f, "result     %s\n",
            bad ? "NOT READY: seckill serve would start, but not sell (exit 1)" : "ready (exit 0)");
    return bad ? 1 : 0;
}

void sk_preflight_banner(const struct sk_config *cfg, const struct sk_preflight *p,
                         const char *file, const char *version)
{
    char safe[600], line[1400];
    sk_log(SK_LOG_INFO, "seckill %s: serve starting; config %s", version,
           file[0] ? file : "none (defaults and the environment)");
    if (cfg->role != SK_ROLE_WORKER) {
        sk_log(SK_LOG_INFO, "  buyers:     http://%s (purchase, orders, queue, /sale/ID)",
               cfg->listen);
        if (cfg->admin_token[0])
            sk_log(SK_LOG_INFO,
                   "  admin API:  http://%s/api/v1/activities (on the buyers' port; admin "
                   "token set)",
                   cfg->listen);
        else
            sk_log(SK_LOG_INFO, "  admin API:  off: no admin token (admin_token or "
                                "admin_token_file); admin routes answer 401");
        if (cfg->ops_listen[0])
            sk_log(SK_LOG_INFO, "  ops:        http://%s (/metrics, /healthz, /readyz, /)",
                   cfg->ops_listen);
        else
            sk_log(SK_LOG_INFO, "  ops:        on the buyers' port (/metrics, /healthz, /readyz, "
                                "/): set ops_listen to keep them private");
    }
    sk_redact_url(cfg->redis, safe, sizeof safe);
    if (p->redis_rc == SK_EAUTH || p->redis_rc == SK_EPROTO)
        snprintf(line, sizeof line, "%s: %s: REFUSED this node (the error above)", safe,
                 p->topology);
    else if (p->redis_rc)
        snprintf(line, sizeof line, "%s: %s: not reached at start (waiting for it)", safe,
                 p->topology);
    else
        snprintf(line, sizeof line, "%s: %s, master %s%s%s", safe, p->topology, p->master,
                 p->version[0] ? ", Redis " : "", p->version);
    sk_log(SK_LOG_INFO, "  redis:      %s", line);
    sk_redact_url(cfg->db, safe, sizeof safe);
    sk_log(SK_LOG_INFO, "  store:      %s: %s, identity %s", safe, db_kind(cfg->db),
           p->db_identity[0] ? p->db_identity : "unknown (not reached yet)");
    sk_log(SK_LOG_INFO, "  auth:       %s", sk_config_auth_name(cfg));
    int n_api = cfg->role == SK_ROLE_WORKER ? 0 : cfg->processes;
    sk_log(SK_LOG_INFO, "  processes:  %d HTTP + %d order worker (role %s)", n_api,
           cfg->role == SK_ROLE_API ? 0 : 1, sk_config_role_name(cfg->role));
}
