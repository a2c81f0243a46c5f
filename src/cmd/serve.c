/* serve.c - `seckill serve`: configuration (flags > config file > SECKILL_*
 * environment > defaults) and the process supervisor. --role all (the
 * default) runs --processes N event-loop processes sharing the port with
 * SO_REUSEPORT plus one order-worker process; --role api only the former,
 * --role worker only the latter. The parent restarts a crashed process
 * and forwards SIGTERM/SIGINT for a graceful stop. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cmd/commands.h"
#include "cmd/db_file.h"
#include "cmd/preflight.h"
#include "cmd/serve_notify.h"
#include "cmd/settings.h"
#include "core/cli.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "core/node_stats.h"
#include "core/redact.h"
#include "core/sd_notify.h"
#include "core/sig.h"
#include "core/vec.h"
#include "engine/keys.h"
#include "engine/segment.h"
#include "http/auth_jwt.h"
#include "http/challenge_http.h"
#include "http/config.h"
#include "http/http_server.h"
#include "http/label_mem.h"
#include "http/metrics.h"
#include "http/ops_history.h"
#include "http/reload.h"
#include "http/store_call.h"
#include "orders/ops_sampler.h"
#include "orders/order_worker.h"
#include "orders/reconcile.h"
#include "orders/sweeper.h"
#include "redis/redis_conn.h"
#include "redis/redis_settings.h"
#include "store/store.h"

extern char **environ;

static volatile sig_atomic_t got_signal, got_hup;

static void on_signal(int sig)
{
    if (sig == SIGHUP)
        got_hup = 1;
    else
        got_signal = sig;
}

/* The JWT key set's text as the last (re)load read it. */
static char jwks_text[SK_JWKS_MAX];
static size_t jwks_len;

static int usage(FILE *f)
{
    fprintf(f, "usage: seckill serve [--config FILE] [--check] [flags]\n"
               "--check: read the configuration, reach Redis and the database, judge Redis's\n"
               "settings, print a summary and exit: 0 ready to start, 1 a dependency\n"
               "unreachable or unfit, 2 the configuration is wrong (like nginx -t).\n"
               "--config FILE (default $SECKILL_CONFIG, else /etc/seckill/seckill.conf when it\n"
               "exists). Each flag is also a config file key (with '_' for '-') and a\n"
               "SECKILL_<KEY> variable; flags win over the environment, the environment over\n"
               "the file (docs/configuration.md; `seckill config` shows what applies):\n");
    for (int k = 0; k < SK_CONFIG_NKEYS; k++) {
        const struct sk_config_key *key = &sk_config_keys[k];
        if (!(key->uses & SK_USE_SERVE)) continue;
        char flag[80], arg[120];
        snprintf(arg, sizeof arg, "%s %s", sk_config_flag_name(k, flag, sizeof flag), key->arg);
        fprintf(f, "  %-36s %s%s%s\n", arg, key->def[0] ? "default " : "",
                key->def[0] ? key->def : "", key->def[0] ? "" : "default none");
    }
    fprintf(f,
            "--role all (default): the HTTP processes and the order worker; api: HTTP only;\n"
            "worker: the order worker only (persists admitted orders to the database).\n"
            "--ops-listen: /metrics, /healthz, /readyz and the dashboard (GET /) answer on\n"
            "this address only (keep it private), and 404 on --listen. Without it they\n"
            "answer on --listen. /metrics and the dashboard report the whole node.\n"
            "--redis: redis://[user:pass@]host[:port][/db], redis+unix:///path/redis.sock[?db=N],\n"
            "redis+sentinel://[user:pass@]host:port[,host:port...]/MASTER_NAME[/db] (the\n"
            "Sentinels' addresses; the credentials are the master's), or\n"
            "redis+cluster://host:port[,host:port...].\n"
            "--sync-replicas N (default 0): a purchase is answered 200 only once WAIT says N\n"
            "replicas acknowledged its admission (within --sync-timeout-ms, default 100); else\n"
            "503 unconfirmed with Retry-After (docs/failover.md says what WAIT promises).\n"
            "Set N to the number of replicas: below it a failover can lose a 200.\n"
            "--redis-functions on (default): the scripts as one Redis Functions library\n"
            "(FCALL) when the server has Functions; off: EVALSHA.\n"
            "The HTTP processes never wait for the database on their event loop: each has\n"
            "--db-pool threads (default 2) with a connection each; a request waits for the\n"
            "database at most --db-timeout-ms (default 1000), then answers 503 unavailable\n"
            "with Retry-After; beyond --db-queue-max waiting calls (default 1024) it answers\n"
            "503 busy at once. An order poll (GET /api/v1/orders/{id}) that the database\n"
            "would not answer within --db-poll-wait-ms (default 100) gets 503 busy at once,\n"
            "with Retry-After (one admitted that waits longer gets 503 unavailable then);\n"
            "one Redis can answer (an order not persisted yet) never waits for the database.\n"
            "--poll-rate-max N (default 2000, 0: no budget): while purchases press (some\n"
            "were refused, or the loop is saturated), order polls one HTTP process answers\n"
            "per second; beyond it (a tenth of a second's worth may come at once) a poll\n"
            "gets 503 busy with Retry-After at once, before Redis or the database, so polls\n"
            "never take the CPU purchases need. An idle process answers every poll.\n"
            "Purchases, pays and cancels are never counted.\n"
            "--admit-target-ms MS (default 50, 0: off): the longest a purchase may wait in\n"
            "an HTTP process; it keeps in flight only what it can answer that soon\n"
            "(measured every 100 ms) and answers the rest 503 overloaded with Retry-After\n"
            "at once, before any Redis work (docs/overload.md).\n"
            "--batches-in-flight N (default 2, 0: no limit): purchase batches of one activity\n"
            "(or segment) an HTTP process keeps out to Redis at once; purchases arriving\n"
            "meanwhile wait in one batch for the first answer: fewer, larger Redis calls\n"
            "when busy, no wait when not.\n"
            "Secrets: flag values are visible to every local user in `ps` and\n"
            "/proc/<pid>/cmdline. Pass --admin-token, --hmac-secret and --hmac-secret-prev\n"
            "as files (--admin-token-file F: one line, chmod 600) or in the environment\n"
            "(SECKILL_ADMIN_TOKEN, SECKILL_HMAC_SECRET, SECKILL_HMAC_SECRET_PREV); under\n"
            "systemd the unit's LoadCredential= hands them over as credentials. A secret\n"
            "file, or a config file holding a secret, that other users may read is refused.\n"
            "The admin token and HMAC secrets must be at least 16 bytes; tokens expiring\n"
            "more than --hmac-max-ttl-s (default 86400) ahead are refused.\n"
            "--auth trusted-header (the default) believes X-User-Id from whoever connects:\n"
            "run it behind a gateway that sets the header, and set --trusted-proxies to\n"
            "the gateway's addresses so no one else can.\n"
            "--auth jwt: buyers send Authorization: Bearer <JSON Web Token> signed by your\n"
            "identity provider (RS256, ES256 or EdDSA) with a key of --jwks-file (a JWK Set;\n"
            "kid selects the key); exp is required, exp/nbf/iat allow --jwt-leeway-s\n"
            "(default 30) of clock skew; a lifetime (exp - iat, or exp - now) over\n"
            "--jwt-max-ttl-s (default 86400) is refused; --jwt-audience is required and\n"
            "must be in aud ('*': any, with a warning); --jwt-issuer, when set, must be\n"
            "iss (unset: a warning); the buyer is --jwt-user-claim (default sub): an\n"
            "integer, or a string of decimal digits, 1..2^64-1.\n"
            "--frame-ancestors (default 'self'): who may show the buyer's page and the\n"
            "dashboard in a frame (Content-Security-Policy frame-ancestors, with\n"
            "X-Frame-Options): \"'self' https://shop.example\" for a shop that embeds it.\n"
            "--max-request-bytes (default 0: an eighth of the memory, shared by the\n"
            "processes): request heads and bodies one HTTP process holds for all its\n"
            "connections; past it a body that must be waited for gets 503 and the oldest\n"
            "unfinished requests are closed.\n"
            "SIGHUP reloads the config file and the files it names (secrets, the key set):\n"
            "log level, rate limits, trusted proxies, admin token, HMAC and JWT keys,\n"
            "--max-connections, --db-poll-wait-ms, --poll-rate-max, --batches-in-flight and\n"
            "--admit-target-ms change at once,\n"
            "without dropping a connection; the log\n"
            "names every other changed setting, which needs a restart.\n"
            "Under systemd (Type=notify): READY=1 once every process reached Redis and the\n"
            "database, STATUS= while waiting, STOPPING=1 at a drain, WATCHDOG=1 pings.\n"
            "--io-timeout-s (default 30): a connection that moves no byte for that long\n"
            "is closed. --max-connections (default: from the file-descriptor limit): per\n"
            "process; at the cap the longest idle keep-alive connection is closed.\n"
            "--cors-origins https://www.shop.example,... (default: none, CORS off): pages\n"
            "from these origins may call /api/ from a browser (the buyer's page on a CDN:\n"
            "seckill activity page). GET /sale/ID is the buyer's page itself.\n");
    return f == stdout ? SK_EXIT_OK : SK_EXIT_USAGE;
}

/* auth=jwt: the key set named by jwks_file, read and checked (a key set
 * the processes could not use is refused here). Returns 0 or an exit
 * code; the text goes to jwks_text. */
static int read_jwks(const struct sk_config *cfg)
{
    jwks_len = 0;
    if (!cfg->auth_jwt) return 0;
    char *buf;
    size_t len;
    if (sk_settings_read_file(cfg->jwks_file, &buf, &len) < 0)
        return sk_cli_usage_error("serve: cannot read jwks_file %s: %s", cfg->jwks_file,
                                  strerror(errno));
    char err[256];
    sk_jwt_keys *k;
    int rc = 0;
    if (len > sizeof jwks_text)
        rc = sk_cli_usage_error("serve: jwks_file %s: larger than %d bytes", cfg->jwks_file,
                                SK_JWKS_MAX);
    else if (sk_jwt_keys_parse(&k, buf, len, err, sizeof err) < 0)
        rc = sk_cli_usage_error("serve: jwks_file %s: %s", cfg->jwks_file, err);
    else {
        sk_log(SK_LOG_INFO, "auth jwt: %zu key(s) from %s", sk_jwt_keys_count(k), cfg->jwks_file);
        sk_jwt_keys_free(k);
        memcpy(jwks_text, buf, len);
        jwks_len = len;
    }
    free(buf);
    return rc;
}

/* serve's own flags (the rest are configuration keys). */
enum { F_CHECK };
static const struct sk_flag serve_flags[] = {[F_CHECK] = {"--check", 0}};

/* Builds the configuration (cmd/settings.h) and reads the key set;
 * returns 0 or an exit code. When s is not NULL the settings are left
 * there (the caller's: sk_settings_free), also after a failure. */
static int load_config(int argc, char **argv, struct sk_config *cfg, struct sk_settings **out)
{
    struct sk_settings *s = sk_settings_new("serve", SK_USE_SERVE, serve_flags, 1, 0);
    if (!s) return sk_cli_runtime_error("serve: out of memory");
    int rc = sk_settings_load(s, argc, argv);
    if (rc == 0 && !s->help) {
        *cfg = s->cfg;
        rc = read_jwks(cfg);
        sk_redis_functions_default(cfg->redis_functions); /* the worker's handles too */
    }
    if (out)
        *out = s;
    else
        sk_settings_free(s);
    return rc;
}

/* SIGHUP: the config again (the same flags, which still win), the files
 * it names too. A configuration that does not load changes nothing. The
 * live settings go into running and to every process (http/reload.h); the
 * others are named in the log line and wait for a restart. Returns 0, or
 * -1 when the new configuration was refused. */
static int reload_config(int argc, char **argv, struct sk_config *running,
                         struct sk_reload_area *area)
{
    static char old_jwks[SK_JWKS_MAX];
    size_t old_len = jwks_len;
    memcpy(old_jwks, jwks_text, old_len);
    static struct sk_config next; /* large; one reloader at a time */
    if (load_config(argc, argv, &next, NULL) != 0) {
        memcpy(jwks_text, old_jwks, old_len);
        jwks_len = old_len;
        sk_log(SK_LOG_ERROR, "reload: the new configuration was refused (above); nothing changed");
        return -1;
    }
    int keys_changed = jwks_len != old_len || memcmp(jwks_text, old_jwks, old_len) != 0;
    char live[1024], fixed[1024];
    int n = sk_reload_diff(running, &next, keys_changed, live, fixed, sizeof live);
    sk_reload_copy_live(running, &next);
    enum sk_log_level lvl;
    if (sk_log_parse_level(running->log_level, &lvl) == 0) sk_log_set_level(lvl);
    sk_reload_publish(area, running, jwks_text, jwks_len);
    if (n == 0)
        sk_log(SK_LOG_INFO, "reload: nothing changed");
    else
        sk_log(fixed[0] ? SK_LOG_WARN : SK_LOG_INFO, "reload: applied: %s%s%s%s",
               live[0] ? live : "none", fixed[0] ? "; not applied (needs a restart): " : "", fixed,
               fixed[0] ? "" : "");
    return 0;
}

/* A lone process (no supervisor): SIGHUP is blocked in every thread and
 * taken here, so the file is read off the event loop. The thread's copy of
 * the running configuration is made before it starts: the caller's may be
 * gone by the time a late-scheduled thread would read it (a serve stopped
 * at once; ThreadSanitizer saw the thread read the exiting main thread's
 * stack). */
struct reloader_args {
    int argc;
    char **argv;
    struct sk_config running;
};

static void *reloader_thread(void *arg)
{
    struct reloader_args *a = arg;
    struct sk_config *running = &a->running;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGHUP);
    for (;;) {
        int sig;
        if (sigwait(&set, &sig) == 0 && sig == SIGHUP)
            reload_config(a->argc, a->argv, running, sk_reload_area_get());
    }
    return NULL;
}

static void start_reloader(int argc, char **argv, struct sk_config *cfg)
{
    static struct reloader_args a;
    a.argc = argc;
    a.argv = argv;
    a.running = *cfg;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* every thread made from now on too */
    pthread_t t;
    if (pthread_create(&t, NULL, reloader_thread, &a) == 0)
        pthread_detach(t);
    else
        sk_log(SK_LOG_WARN, "no reload thread: SIGHUP is ignored");
}

/* The worker process applies the live settings it uses (the log level)
 * from its reconcile thread. */
static void worker_reload_tick(void)
{
    static uint64_t applied;
    static struct sk_config now, next;
    static char keys[SK_JWKS_MAX];
    struct sk_reload_area *a = sk_reload_area_get();
    if (!a || atomic_load(&a->gen) == applied) return;
    size_t kl;
    applied = sk_reload_read(a, &next, keys, &kl);
    snprintf(now.log_level, sizeof now.log_level, "%s", "");
    sk_reload_apply(&now, &next, NULL);
    atomic_store(&a->applied[SK_RELOAD_SLOTS - 2], applied);
}

/* Trusted-header mode believes X-User-Id from whoever connects: say so
 * loudly when the port is reachable from elsewhere and no proxy list
 * keeps anyone else from naming the buyer. */
static void warn_open_identity(const struct sk_config *cfg)
{
    if (cfg->role == SK_ROLE_WORKER || cfg->auth_hmac || cfg->auth_jwt ||
        cfg->n_trusted_proxies > 0)
        return;
    static const char *const local[] = {"127.", "[::1]:", "localhost:"};
    for (size_t i = 0; i < sizeof local / sizeof local[0]; i++)
        if (strncmp(cfg->listen, local[i], strlen(local[i])) == 0) return;
    sk_log(SK_LOG_WARN,
           "serve: --auth trusted-header on %s without --trusted-proxies: anyone who can "
           "connect can buy as any user by sending X-User-Id. Put a gateway in front and set "
           "--trusted-proxies to its addresses, or use --auth hmac",
           cfg->listen);
}

/* auth=jwt with a policy wider than one application of one identity
 * provider: said at the start. The audience is required (config.h: "*"
 * spells out "any"); the issuer is not, because the key set already names
 * the provider (its keys sign nothing else), and an issuer check matters
 * when one key set holds several providers' keys: then it is said here. */
static void warn_jwt_policy(const struct sk_config *cfg)
{
    if (!cfg->auth_jwt || cfg->role == SK_ROLE_WORKER) return;
    if (!strcmp(cfg->jwt_audience, "*"))
        sk_log(SK_LOG_WARN,
               "serve: --jwt-audience '*': a token your identity provider made for any other "
               "application buys here too; name this service's audience");
    if (!cfg->jwt_issuer[0])
        sk_log(SK_LOG_WARN,
               "serve: no --jwt-issuer: a token of any issuer whose key is in %s is believed; "
               "set --jwt-issuer to your identity provider's iss",
               cfg->jwks_file);
}

/* The order-pipeline process (--role all|worker): the order worker in the
 * main thread, the payment-timeout sweeper and a periodic reconcile in two
 * more threads, each with its own Redis and store connections. SIGTERM
 * finishes the batch in hand and stops all three. */
static sk_worker *running_worker;
static sk_sweeper *running_sweeper;
static sk_sampler *running_sampler;
static atomic_int reconcile_stop;
/* The node's worker slot (NULL for a worker without a supervisor). */
static struct sk_node_worker *node_worker;

/* How often the worker process reconciles every activity. */
#define SERVE_RECONCILE_EVERY_MS 30000

static atomic_int worker_stop_asked;

static void on_worker_signal(int sig)
{
    (void)sig;
    atomic_store(&worker_stop_asked, 1);
    if (running_worker) sk_worker_stop(running_worker);
    if (running_sweeper) sk_sweeper_stop(running_sweeper);
    if (running_sampler) sk_sampler_stop(running_sampler);
    atomic_store(&reconcile_stop, 1);
}

static void *sampler_thread(void *arg)
{
    sk_sampler_run(arg, 1000);
    return NULL;
}

static void *sweeper_thread(void *arg)
{
    if (sk_sweeper_run(arg) < 0) sk_log(SK_LOG_ERROR, "sweeper: %s", sk_sweeper_errstr(arg));
    return NULL;
}

/* Where each activity's periodic check stands (the reconcile thread's). */
static struct sk_reconcile_periodic reconcile_marks;

/* Checks every activity (no repair: repairs are an operator's decision),
 * logs drift, and leaves the verdict in Redis (sk:{a<ID>}:meta fields
 * reconcile_ms and reconcile_drift) for the stats route and dashboards.
 * Incremental, full every SK_RECONCILE_FULL_EVERY passes and at start
 * (sk_reconcile_periodic): a pass's memory does not grow with the sale. */
static void reconcile_all(const struct sk_config *cfg)
{
    char err[256];
    sk_store *st;
    sk_redis *r;
    if (sk_store_open(&st, cfg->db, err, sizeof err) < 0) {
        sk_log(SK_LOG_WARN, "reconcile: store: %s", err);
        return;
    }
    if (sk_redis_new(&r, cfg->redis, 1000, 5000, err, sizeof err) < 0) {
        sk_store_close(st);
        return;
    }
    uint64_t *ids = NULL;
    size_t n = 0;
    int64_t differences = 0;
    if (sk_store_activity_ids(st, &ids, &n) == 0) {
        for (size_t i = 0; i < n && !atomic_load(&reconcile_stop); i++) {
            /* Roll forward stock transfers a dead borrower left half done
             * (docs/segments.md): always safe, and it must not wait for an
             * operator, or those units stay unsellable. */
            int segs;
            int64_t units = 0;
            if (sk_seg_count(r, ids[i], &segs) == 0 && segs > 1 &&
                sk_seg_settle(r, ids[i], segs, &units) == 0 && units > 0)
                sk_log(SK_LOG_WARN,
                       "reconcile: activity %llu: settled %lld unit(s) of stock transfers a "
                       "borrower left half done",
                       (unsigned long long)ids[i], (long long)units);
            struct sk_reconcile_report rep;
            if (sk_reconcile_periodic_run(&reconcile_marks, st, r, ids[i], &rep) == 0) {
                if (!rep.consistent) sk_reconcile_print(stderr, &rep, 5);
                if (rep.event < 0)
                    sk_log(SK_LOG_WARN, "reconcile: activity %llu: reconcile.drift event: %s",
                           (unsigned long long)ids[i], sk_store_errstr(st));
                sk_node_wc_add(node_worker, SK_WC_reconcile_runs, 1);
                sk_node_wc_add(node_worker, SK_WC_reconcile_drifts, rep.consistent ? 0 : 1);
                differences += rep.total;
                struct sk_keys k;
                sk_keys_for(&k, ids[i]);
                redisReply *rr;
                if (rep.redis.present &&
                    sk_redis_cmd(r, &rr, "HSET %s reconcile_ms %lld reconcile_drift %lld", k.meta,
                                 (long long)sk_wall_ms(), (long long)rep.total) == 0)
                    freeReplyObject(rr);
            }
            sk_reconcile_report_free(&rep);
        }
        sk_node_wc_set(node_worker, SK_WC_reconcile_last_s, (uint64_t)(sk_wall_ms() / 1000));
        sk_node_wc_set(node_worker, SK_WC_reconcile_last_drift, (uint64_t)differences);
    }
    free(ids);
    sk_redis_free(r);
    sk_store_close(st);
}

static void *reconcile_thread(void *arg)
{
    const struct sk_config *cfg = arg;
    sk_reconcile_periodic_init(&reconcile_marks);
    int64_t next = sk_mono_ms() + SERVE_RECONCILE_EVERY_MS;
    while (!atomic_load(&reconcile_stop)) {
        if (sk_mono_ms() >= next) {
            reconcile_all(cfg);
            next = sk_mono_ms() + SERVE_RECONCILE_EVERY_MS;
        }
        worker_reload_tick();
        struct timespec ts = {0, 100 * 1000 * 1000}; /* a stop is seen within 0.1 s */
        nanosleep(&ts, NULL);
    }
    sk_reconcile_periodic_free(&reconcile_marks);
    return NULL;
}

/* The worker process's parts: the order worker, the sweeper and the
 * sampler, each with its Redis client and store. A worker restarted while
 * Redis or the database is down (a crash, a kill) waits here for them,
 * retrying with a growing pause (0.1 s doubling up to 2 s; a line in the
 * log when the reason changes and every 30 s), instead of exiting: it
 * used to, and the supervisor restarted it every 20 ms for as long as the
 * outage lasted (seen under `make chaos CHAOS_STORE=mariadb`); waiting
 * here, it starts within 2 s of the outage's end and says what it waits
 * for. 0 when made (running_worker, running_sweeper, running_sampler), -1
 * when a stop came first (nothing made). */
static int make_worker_parts(const struct sk_config *cfg, const struct sk_worker_opts *o,
                             const struct sk_sweeper_opts *so, struct sk_node_worker *w)
{
    char err[256], logged[256] = "";
    int64_t pause_ms = 100, logged_ms = 0, since_ms = sk_mono_ms();
    for (;;) {
        if (sk_worker_new(&running_worker, o, err, sizeof err) == 0 &&
            sk_sweeper_new(&running_sweeper, so, err, sizeof err) == 0 &&
            (!w ||
             sk_sampler_new(&running_sampler, cfg->redis, cfg->db, w, err, sizeof err) == 0)) {
            if (logged[0])
                sk_log(SK_LOG_INFO, "order worker: started after %lld ms of waiting",
                       (long long)(sk_mono_ms() - since_ms));
            return 0;
        }
        /* out of the signal handler's sight before they are freed */
        sk_sweeper *sw = running_sweeper;
        sk_worker *wk = running_worker;
        running_sweeper = NULL;
        running_worker = NULL;
        sk_sweeper_free(sw);
        sk_worker_free(wk);
        int64_t now = sk_mono_ms();
        if (strcmp(err, logged) != 0 || now - logged_ms >= 30000) {
            sk_log(SK_LOG_ERROR, "order worker: %s (waiting; retrying)", err);
            snprintf(logged, sizeof logged, "%s", err);
            logged_ms = now;
        }
        sk_node_proc_beat(w ? &w->proc : NULL, sk_wall_ms()); /* waiting is not hanging */
        sk_nap(&worker_stop_asked, pause_ms);
        if (atomic_load(&worker_stop_asked)) return -1;
        pause_ms = pause_ms * 2 > 2000 ? 2000 : pause_ms * 2;
    }
}

/* The worker process; w: its slot in the node's segment, or NULL. */
static int run_order_worker(const struct sk_config *cfg, struct sk_node_worker *w)
{
    node_worker = w;
    sk_node_proc_start(w ? &w->proc : NULL, SK_NODE_WORKER);
    /* A SIGTERM while the parts below are made (opening the store takes a
     * moment) is a stop, not a death: remembered, applied once they exist. */
    struct sigaction sa = {.sa_handler = on_worker_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sk_sig_unblock_stop();
    struct sk_worker_opts o;
    sk_worker_opts_init(&o);
    o.redis_url = cfg->redis;
    o.db_spec = cfg->db;
    o.node = w;
    struct sk_wh_endpoint ep;
    o.n_webhooks = sk_settings_webhook(cfg, &ep, &o.webhook_opts);
    o.webhooks = &ep;
    struct sk_sweeper_opts so;
    sk_sweeper_opts_init(&so);
    so.redis_url = cfg->redis;
    so.db_spec = cfg->db;
    so.node = w;
    if (make_worker_parts(cfg, &o, &so, w) < 0) return SK_EXIT_OK; /* stopped while waiting */
    if (atomic_load(&worker_stop_asked)) on_worker_signal(SIGTERM);
    pthread_t sweeper, reconciler, sampler;
    int have_sweeper = pthread_create(&sweeper, NULL, sweeper_thread, running_sweeper) == 0;
    int have_reconciler = pthread_create(&reconciler, NULL, reconcile_thread, (void *)cfg) == 0;
    int have_sampler =
        running_sampler && pthread_create(&sampler, NULL, sampler_thread, running_sampler) == 0;
    sk_log(SK_LOG_INFO, "order worker %s, sweeper and reconcile started (pid %d)",
           sk_worker_consumer(running_worker), (int)getpid());
    int rc = sk_worker_run(running_worker);
    /* the worker returned (a stop): stop the others too */
    sk_sweeper_stop(running_sweeper);
    if (running_sampler) sk_sampler_stop(running_sampler);
    atomic_store(&reconcile_stop, 1);
    if (have_sweeper) pthread_join(sweeper, NULL);
    if (have_reconciler) pthread_join(reconciler, NULL);
    if (have_sampler) pthread_join(sampler, NULL);
    sk_sampler_free(running_sampler);
    running_sampler = NULL;
    struct sk_worker_stats st;
    sk_worker_stats(running_worker, &st);
    struct sk_sweeper_stats sw;
    sk_sweeper_stats(running_sweeper, &sw);
    sk_log(SK_LOG_INFO,
           "order worker stopped: %llu persisted, %llu dead-lettered; sweeper cancelled %llu; "
           "rollback guard: %llu recoveries, %llu orders replayed, %llu units oversold, %llu "
           "acknowledged admissions lost",
           (unsigned long long)st.persisted, (unsigned long long)st.dead_lettered,
           (unsigned long long)sw.cancelled, (unsigned long long)st.recoveries,
           (unsigned long long)st.orders_replayed, (unsigned long long)st.units_oversold,
           (unsigned long long)st.admissions_lost);
    sk_sweeper_free(running_sweeper);
    running_sweeper = NULL;
    sk_worker_free(running_worker);
    running_worker = NULL;
    return rc < 0 ? SK_EXIT_FAIL : SK_EXIT_OK;
}

enum proc_kind { PROC_API, PROC_WORKER };

/* Forks process `slot` of the node: HTTP slots first, then the worker. */
static pid_t spawn(const struct sk_config *cfg, sk_node *node, int slot, enum proc_kind kind)
{
    /* A SIGTERM that reaches the child before it has its own handler must
     * wait for it (blocked until then), not run the supervisor's handler
     * in the child, where it would be lost, nor kill it half made. */
    sk_sig_block_stop();
    pid_t pid = fork();
    if (pid != 0) sk_sig_unblock_stop();
    if (pid == 0) {
        /* a supervisor that dies (even by SIGKILL) takes its children along */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        /* ps, top and /proc/<pid>/comm tell the processes of a node apart */
        prctl(PR_SET_NAME, kind == PROC_API ? "seckill-api" : "seckill-worker");
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        signal(SIGHUP, SIG_IGN); /* the supervisor reloads; a hangup is not a death */
        exit(kind == PROC_API ? (sk_server_run_in(cfg, node, slot) ? SK_EXIT_FAIL : SK_EXIT_OK)
                              : run_order_worker(cfg, sk_node_worker(node)));
    }
    return pid;
}

/* A reload in progress: every running process has applied generation gen
 * (or 2 s passed: a process stuck in its start-up applies it when it gets
 * there). */
static int reload_applied(struct sk_reload_area *area, uint64_t gen, const pid_t *pids, int n_api,
                          int n, int64_t since)
{
    if (sk_mono_ms() - since > 2000) return 1;
    for (int i = 0; i < n; i++) {
        int idx = i < n_api ? i : SK_RELOAD_SLOTS - 2;
        if (pids[i] > 0 && atomic_load(&area->applied[idx]) < gen) return 0;
    }
    return 1;
}

/* A process that dies within RESTART_QUICK_MS of its start is restarted
 * after a pause that doubles with each such death of its slot in a row
 * (RESTART_PAUSE_MIN_MS up to RESTART_PAUSE_MAX_MS): a process that cannot
 * get going (a bug at start, a resource it lacks) does not turn into a
 * fork loop. One that lived longer is restarted at once, as is the first
 * process of a slot. */
#define RESTART_QUICK_MS 1000
#define RESTART_PAUSE_MIN_MS 100
#define RESTART_PAUSE_MAX_MS 5000

/* A slot's restarts: when its process started, how many of its processes
 * in a row died quickly, when a paused restart is due (0: none). */
struct slot_life {
    int64_t started_ms, due_ms;
    int quick;
};

/* The pause before restarting slot l's process, dead at now_ms: 0 when it
 * lived long enough. */
static int64_t restart_pause(struct slot_life *l, int64_t now_ms)
{
    if (now_ms - l->started_ms >= RESTART_QUICK_MS) {
        l->quick = 0;
        return 0;
    }
    l->quick++;
    int64_t pause = RESTART_PAUSE_MIN_MS;
    for (int k = 1; k < l->quick && pause < RESTART_PAUSE_MAX_MS; k++)
        pause *= 2;
    return pause < RESTART_PAUSE_MAX_MS ? pause : RESTART_PAUSE_MAX_MS;
}

/* Starts slot i's process (the first n_api slots are HTTP processes, the
 * next the worker); a fork that fails is retried like a quick death. */
static void start_slot(const struct sk_config *cfg, sk_node *node, int i, int n_api, pid_t *pids,
                       struct slot_life *life)
{
    int64_t now = sk_mono_ms();
    life[i].started_ms = now;
    life[i].due_ms = 0;
    pids[i] = spawn(cfg, node, i, i < n_api ? PROC_API : PROC_WORKER);
    if (pids[i] > 0) return;
    int64_t pause = restart_pause(&life[i], now);
    sk_log(SK_LOG_ERROR, "cannot fork process %d of the node: %s; trying again in %lld ms", i,
           strerror(errno), (long long)pause);
    pids[i] = 0;
    life[i].due_ms = now + pause;
}

/* Runs the API processes and the order worker process that the role asks
 * for, restarts any that crash (restart_pause), forwards SIGTERM/SIGINT,
 * reloads on SIGHUP, and tells systemd how the node is
 * (cmd/serve_notify.h). */
static int supervise(int argc, char **argv, struct sk_config *cfg, struct sk_reload_area *area)
{
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    int n_api = cfg->role == SK_ROLE_WORKER ? 0 : (int)cfg->processes;
    int n = n_api + (cfg->role == SK_ROLE_API ? 0 : 1);
    /* The node's figures: made before any fork, so every process (and a
     * replacement of a crashed one, in the same slot) shares them. */
    sk_node *node;
    if (sk_node_new(&node, n_api, sk_metrics_bytes(), n > n_api) < 0) {
        sk_log(SK_LOG_ERROR, "cannot map the node's shared figures");
        return SK_EXIT_FAIL;
    }
    pid_t *pids = calloc((size_t)n, sizeof *pids);
    struct slot_life *life = calloc((size_t)n, sizeof *life);
    if (!pids || !life) {
        free(pids);
        free(life);
        sk_node_free(node);
        return SK_EXIT_FAIL;
    }
    struct sk_svc_notify sn;
    sk_svc_notify_init(&sn, cfg);
    for (int i = 0; i < n; i++)
        start_slot(cfg, node, i, n_api, pids, life);
    /* a process restarted later finds the database as it is then */
    sk_store_calls_db_down_at_start(NULL);
    int failed = 0, alive = n, stopping = 0;
    int64_t kill_at = 0, reload_since = 0;
    uint64_t reload_gen = 0;
    while (alive > 0) {
        if (got_signal && !stopping) {
            stopping = 1;
            sk_svc_notify_stopping(&sn);
            /* a paused restart will not happen: that slot is done */
            for (int i = 0; i < n; i++)
                if (life[i].due_ms) {
                    life[i].due_ms = 0;
                    alive--;
                }
            /* children drain within 10 s; past 15 s something is stuck */
            kill_at = sk_mono_ms() + 15000;
            sk_log(SK_LOG_INFO, "stopping %d processes", alive);
            for (int i = 0; i < n; i++)
                if (pids[i] > 0) kill(pids[i], SIGTERM);
        }
        if (got_hup && !stopping) {
            got_hup = 0;
            sk_svc_notify_reloading(&sn);
            if (reload_config(argc, argv, cfg, area) == 0) {
                reload_gen = atomic_load(&area->gen);
                reload_since = sk_mono_ms();
            } else {
                sk_svc_notify_reloaded(&sn);
            }
        }
        if (reload_gen && reload_applied(area, reload_gen, pids, n_api, n, reload_since)) {
            sk_log(SK_LOG_INFO, "reload: every process runs the new settings");
            reload_gen = 0;
            sk_svc_notify_reloaded(&sn);
        }
        if (!stopping) sk_svc_notify_tick(&sn, node, pids, n_api, n);
        if (stopping && kill_at && sk_mono_ms() > kill_at) {
            for (int i = 0; i < n; i++)
                if (pids[i] > 0) {
                    sk_log(SK_LOG_ERROR, "process %d did not stop in 15 s; killing it",
                           (int)pids[i]);
                    kill(pids[i], SIGKILL);
                }
            kill_at = 0;
        }
        /* paused restarts that are due (none once stopping: cleared above) */
        int st, due = 0;
        for (int i = 0; i < n; i++) {
            if (life[i].due_ms && sk_mono_ms() >= life[i].due_ms)
                start_slot(cfg, node, i, n_api, pids, life);
            due |= life[i].due_ms != 0;
        }
        pid_t pid = waitpid(-1, &st, WNOHANG);
        /* no child at all while every slot waits out its pause: wait too */
        if (pid == 0 || (pid < 0 && (errno == EINTR || (errno == ECHILD && due)))) {
            /* polling keeps the signal check free of races with waitpid */
            struct timespec ts = {0, 20 * 1000 * 1000};
            nanosleep(&ts, NULL);
            continue;
        }
        if (pid < 0) break;
        for (int i = 0; i < n; i++) {
            if (pids[i] != pid) continue;
            int crashed = WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st) != 0);
            if (!stopping && crashed) {
                int64_t now = sk_mono_ms(), pause = restart_pause(&life[i], now);
                const char *how = WIFSIGNALED(st) ? "signal" : "exit";
                int code = WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st);
                if (pause) {
                    sk_log(SK_LOG_ERROR,
                           "process %d died (%s %d) %lld ms after its start; restarting in "
                           "%lld ms (%d quick deaths in a row)",
                           (int)pid, how, code, (long long)(now - life[i].started_ms),
                           (long long)pause, life[i].quick);
                    pids[i] = 0;
                    life[i].due_ms = now + pause;
                } else {
                    sk_log(SK_LOG_ERROR, "process %d died (%s %d); restarting", (int)pid, how,
                           code);
                    start_slot(cfg, node, i, n_api, pids, life);
                }
            } else {
                if (crashed) failed = 1;
                pids[i] = 0;
                alive--;
            }
        }
    }
    free(pids);
    free(life);
    sk_node_free(node);
    return failed ? SK_EXIT_FAIL : SK_EXIT_OK;
}

/* --check: the configuration was read; reach what it names, say what was
 * found, exit 0 ready / 1 a dependency unreachable or unfit. */
static int check(const struct sk_config *cfg, const char *file)
{
    struct sk_preflight p;
    memset(&p, 0, sizeof p);
    sk_preflight_store(cfg, &p); /* first: the stock Redis must have room for */
    sk_preflight_redis(cfg, &p);
    int rc = sk_preflight_report(stdout, cfg, &p, file);
    fflush(stdout);
    return rc;
}

/* At start: Redis as it is now for the banner; a refused handshake (a
 * wrong password, an ACL user that may not connect, a db the server does
 * not have) is an error line with the whole reason, not a hint in the
 * sweeper's retries. The node starts anyway: /readyz says the reason until
 * Redis lets it in. */
static void start_redis_check(const struct sk_config *cfg, struct sk_preflight *p)
{
    char safe[sizeof cfg->redis];
    sk_preflight_redis(cfg, p);
    sk_redact_url(cfg->redis, safe, sizeof safe);
    if (p->redis_rc == SK_EAUTH || p->redis_rc == SK_EPROTO)
        sk_log(SK_LOG_ERROR,
               "redis %s refused this node: %s. Nothing can be sold until it is fixed (the "
               "password or user in redis=, or the server's ACL); /readyz answers 503 with "
               "this reason meanwhile",
               safe, p->redis_err);
    else if (p->redis_rc)
        sk_log(SK_LOG_WARN, "redis %s: not reachable at start: %s (the node waits for it)", safe,
               p->redis_err);
    else if (p->settings_level >= SK_RSET_WARN)
        sk_log(SK_LOG_WARN, "redis %s: %s", safe, p->settings_why);
}

int sk_cli_serve(int argc, char **argv)
{
    struct sk_config cfg;
    struct sk_settings *s = NULL;
    int rc = load_config(argc, argv, &cfg, &s);
    int help = s && s->help, checking = s && s->val[F_CHECK] != NULL;
    char file[sizeof s->file] = "";
    if (s) snprintf(file, sizeof file, "%s", s->file);
    sk_settings_free(s);
    if (rc == 0 && help) return usage(stdout);
    if (rc) return rc;
    if (checking) return check(&cfg, file);
    warn_open_identity(&cfg);
    warn_jwt_policy(&cfg);

    char err[256];
    /* Fail fast on a port in use, before any process starts. */
    for (int i = 0; cfg.role != SK_ROLE_WORKER && i < 2; i++) {
        const char *addr = i ? cfg.ops_listen : cfg.listen;
        if (i && !addr[0]) continue;
        int probe = sk_server_listen_fd(addr, 0, 0, err, sizeof err);
        if (probe < 0) {
            sk_log(SK_LOG_ERROR, "%s%s", i ? "ops listener: " : "", err);
            return SK_EXIT_FAIL;
        }
        close(probe);
    }
    /* Open the store once before forking: migrations and the switch to WAL
     * happen here, not in N processes racing for the same file. A database
     * server that cannot be reached does not stop the start: purchases need
     * Redis only; the first handle that connects migrates (the servers
     * serialize concurrent migrations), the order worker waits for it. */
    sk_store *store;
    char safe[sizeof cfg.db];
    if (sk_db_file_check(cfg.db, 1, err, sizeof err) < 0 ||
        sk_store_open_waiting(&store, cfg.db, err, sizeof err) < 0) {
        sk_log(SK_LOG_ERROR, "store %s: %s", sk_redact_url(cfg.db, safe, sizeof safe), err);
        return SK_EXIT_FAIL;
    }
    if (err[0]) {
        sk_log(SK_LOG_WARN, "store %s: not reachable at start (%s): starting without it",
               sk_redact_url(cfg.db, safe, sizeof safe), err);
        /* the HTTP processes started now do not pay the connect timeout
         * again (supervise clears it once they are forked) */
        sk_store_calls_db_down_at_start(err);
    }
    /* The identity every admission of this node passes (docs/design.md,
     * "The store's identity"); unknown while the database is down, then
     * each HTTP process reads it when it first reaches the database. */
    char store_id[SK_STORE_IDENTITY_MAX] = "";
    if (!err[0] && sk_store_identity(store, store_id, sizeof store_id) < 0)
        sk_log(SK_LOG_WARN, "store %s: %s", sk_redact_url(cfg.db, safe, sizeof safe),
               sk_store_errstr(store));
    sk_store_calls_identity(store_id);
    struct sk_preflight pf;
    memset(&pf, 0, sizeof pf);
    snprintf(pf.db_identity, sizeof pf.db_identity, "%s", store_id); /* the banner's */
    sk_store_close(store);
    start_redis_check(&cfg, &pf);
    sk_preflight_banner(&cfg, &pf, file, sk_version());
    /* The rollback guard's memory of key sets (docs/recovery.md), made
     * before the fork so every HTTP process checks against the host's. */
    if (cfg.role != SK_ROLE_WORKER && sk_labelmem_host_init() < 0)
        sk_log(SK_LOG_WARN, "no shared memory for the rollback guard: each process keeps its own");
    /* The key challenges are signed with, when none is configured: drawn
     * now, so every HTTP process (and a restarted one) checks what another
     * handed out (http/challenge_http.h). */
    if (cfg.role != SK_ROLE_WORKER && sk_challenge_node_key_init(&cfg) < 0) {
        sk_log(SK_LOG_ERROR, "no randomness for the challenges' key");
        return SK_EXIT_FAIL;
    }
    /* What a SIGHUP changes reaches every process through this area, made
     * before the fork (http/reload.h); the key set travels in it too. */
    struct sk_reload_area *area;
    if (sk_reload_area_new(&area) < 0) {
        sk_log(SK_LOG_ERROR, "cannot map the reload area");
        return SK_EXIT_FAIL;
    }
    sk_reload_set_area(area);
    /* the dashboard's last minutes, shared by the node's HTTP processes */
    sk_ops_history *hist;
    if (cfg.role != SK_ROLE_WORKER && sk_ops_history_new(&hist) == 0) sk_ops_history_set(hist);
    sk_reload_publish(area, &cfg, jwks_text, jwks_len);
    /* Under systemd the supervisor always runs: it is the one that speaks
     * to systemd for the node. */
    int lone = !sk_sd_notify_enabled();
    if (lone && cfg.role == SK_ROLE_API && cfg.processes <= 1) {
        start_reloader(argc, argv, &cfg);
        return sk_server_run(&cfg) ? SK_EXIT_FAIL : SK_EXIT_OK;
    }
    if (lone && cfg.role == SK_ROLE_WORKER) {
        start_reloader(argc, argv, &cfg);
        return run_order_worker(&cfg, NULL);
    }
    return supervise(argc, argv, &cfg, area);
}
