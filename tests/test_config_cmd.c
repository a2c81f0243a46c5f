/* test_config_cmd.c - one configuration for every command, run as an
 * operator runs them: each command (activity, reconcile, worker, serve,
 * config) with nothing but --config reads the file's Redis and database,
 * in a working directory of its own where no ./seckill.db may appear;
 * `seckill config` names each value's source; keys of other commands;
 * unknown flags worded one way with the closest flag; a config file that
 * cannot be read; read-only commands that never make a database; the key
 * table in docs/configuration.md is the program's. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "core/codes.h"
#include "engine/stock.h"
#include "http/config.h"
#include "spawn/netutil.h"
#include "spawn/spawn.h"
#include "store/store.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/http_client.h"

extern char **environ;

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Runs seckill with args (NULL-terminated) in directory cwd, as nobody
 * when drop, with the "K=V" entries of env added to (or replacing) the
 * environment ("K=" unsets K). stdout and stderr into out. Returns the
 * exit code. */
static int run_at(const char *cwd, int drop, const char *const *env, const char *const *args,
                  char *out, size_t cap)
{
    static char *envp[512];
    size_t n = 0;
    for (char **e = environ; *e && n < 400; e++) {
        int replaced = 0;
        for (const char *const *x = env; x && *x; x++) {
            size_t kl = (size_t)(strchr(*x, '=') - *x) + 1;
            if (!strncmp(*e, *x, kl)) replaced = 1;
        }
        if (!replaced) envp[n++] = *e;
    }
    for (const char *const *x = env; x && *x; x++)
        if (strchr(*x, '=')[1]) envp[n++] = (char *)*x;
    envp[n] = NULL;
    const char *argv[40] = {sk_th_seckill_bin()};
    size_t a = 1;
    while (args[a - 1] && a < 39) {
        argv[a] = args[a - 1];
        a++;
    }
    argv[a] = NULL;
    char log[400], err[600];
    snprintf(log, sizeof log, "%s/run.out", sk_th_tmpdir());
    struct sk_spawn_cmd c = {.argv = argv,
                             .envp = (const char *const *)envp,
                             .out = log,
                             .err = log,
                             .cwd = cwd,
                             .flags = SK_SPAWN_PDEATHSIG,
                             .drop = drop,
                             .uid = 65534,
                             .gid = 65534};
    pid_t pid;
    CHECK_MSG(sk_spawn_exec(&c, &pid, err, sizeof err) == 0, "%s", err);
    int st = -1;
    CHECK_EQ(sk_spawn_wait(&pid, NULL, NULL, 60000, 5, &st), 0);
    FILE *f = fopen(log, "r");
    size_t len = f ? fread(out, 1, cap - 1, f) : 0;
    if (f) fclose(f);
    out[len] = 0;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
#define RUN(cwd, out, ...)                                                                         \
    run_at(cwd, 0, NULL, (const char *const[]){__VA_ARGS__, NULL}, out, sizeof out)

#define HAS(out, s) CHECK_MSG(strstr(out, s) != NULL, "no \"%s\" in:\n%s", s, out)

/* A config file naming the run's Redis and a database of its own, and an
 * empty working directory: no command may make ./seckill.db there. */
struct fx {
    char dir[300], conf[400], db[400], cwd[400], stray[420];
    char id[24];
    uint64_t aid;
};

/* f's files in a temporary directory, the config naming redis (NULL: the
 * suite's shared server) and f's SQLite database, plus more lines. */
static void fx_init_at(struct fx *f, const char *redis, const char *more)
{
    const char *dir = sk_th_tmpdir();
    snprintf(f->dir, sizeof f->dir, "%s", dir);
    snprintf(f->conf, sizeof f->conf, "%s/seckill.conf", dir);
    snprintf(f->db, sizeof f->db, "%s/sale.db", dir);
    snprintf(f->cwd, sizeof f->cwd, "%s/elsewhere", dir);
    snprintf(f->stray, sizeof f->stray, "%s/seckill.db", f->cwd);
    CHECK_EQ(mkdir(f->cwd, 0755), 0);
    char text[2000];
    snprintf(text, sizeof text,
             "# as an operator writes it\nredis = %s\ndb = sqlite:%s\nlog_level = warn\n%s",
             redis ? redis : sk_th_redis_url(), f->db, more ? more : "");
    sk_th_write_file(f->conf, text);
    f->aid = sk_th_unique_id();
    snprintf(f->id, sizeof f->id, "%llu", (unsigned long long)f->aid);
}

static void fx_init(struct fx *f, const char *more)
{
    fx_init_at(f, NULL, more);
}

/* `seckill activity create` of f's activity, with only --config. */
static void fx_create(struct fx *f)
{
    char out[4096];
    int rc = RUN(f->cwd, out, "activity", "create", "--config", f->conf, "--id", f->id, "--name",
                 "configured", "--stock", "5", "--limit", "1");
    CHECK_MSG(rc == 0, "create: exit %d: %s", rc, out);
    CHECK_MSG(exists(f->db), "create did not make the config's database %s", f->db);
}

static void fx_no_stray(const struct fx *f)
{
    CHECK_MSG(!exists(f->stray), "%s was made: a command used the default database", f->stray);
}

SK_TEST(config_file_alone_drives_every_activity_command)
{
    struct fx f;
    fx_init(&f, "processes = 3\nadmin_token_file = /nonexistent/serve-only\n");
    char out[8192];
    fx_create(&f);
    static const char *const steps[][2] = {{"preheat", "preheated"},    {"open", "opened"},
                                           {"show", "stock_remaining"}, {"list", "configured"},
                                           {"close", "closed"},         {"recover", ""}};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        int rc = !strcmp(steps[i][0], "list")
                     ? RUN(f.cwd, out, "activity", "list", "--config", f.conf)
                     : RUN(f.cwd, out, "activity", steps[i][0], "--config", f.conf, "--id", f.id);
        CHECK_MSG(rc == 0, "%s: exit %d: %s", steps[i][0], rc, out);
        HAS(out, steps[i][1]);
        fx_no_stray(&f);
    }
    /* the live state is the config's Redis's */
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 1000, 1000);
    struct sk_stock_state live;
    CHECK_EQ(sk_stock_state(r, f.aid, &live), 0);
    CHECK(live.exists && live.remaining == 5 && !live.open);
    sk_redis_free(r);
    CHECK_EQ(RUN(f.cwd, out, "activity", "delete", "--config", f.conf, "--id", f.id), 0);
    HAS(out, "deleted");
    fx_no_stray(&f);
}

SK_TEST(config_file_alone_drives_reconcile)
{
    /* a Redis of its own: a plain reconcile also judges every activity
     * Redis holds, and the shared one holds other tests' */
    struct sk_th_redis own;
    sk_th_redis_start(&own, NULL);
    struct fx f;
    fx_init_at(&f, own.url, "auth = hmac\n"); /* serve's, without its secret: not reconcile's */
    char out[8192];
    fx_create(&f);
    CHECK_EQ(RUN(f.cwd, out, "activity", "preheat", "--config", f.conf, "--id", f.id), 0);
    int rc = RUN(f.cwd, out, "reconcile", "--config", f.conf);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out);
    HAS(out, "reconcile: 1 activity consistent");
    HAS(out, f.id);
    fx_no_stray(&f);
    /* the same with the file from the environment */
    char env[480];
    snprintf(env, sizeof env, "SECKILL_CONFIG=%s", f.conf);
    rc = run_at(f.cwd, 0, (const char *const[]){env, NULL},
                (const char *const[]){"reconcile", "--activity", f.id, NULL}, out, sizeof out);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out);
    fx_no_stray(&f);
    sk_th_redis_stop(&own, 1);
}

SK_TEST(config_file_alone_drives_the_worker)
{
    struct fx f;
    fx_init(&f, NULL);
    char out[8192];
    fx_create(&f);
    CHECK_EQ(RUN(f.cwd, out, "activity", "preheat", "--config", f.conf, "--id", f.id), 0);
    CHECK_EQ(RUN(f.cwd, out, "activity", "open", "--config", f.conf, "--id", f.id), 0);
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 1000, 1000);
    struct sk_admission adm;
    CHECK_EQ(sk_stock_purchase(r, f.aid, 77, 1, &adm, NULL), 0);
    CHECK_EQ(adm.rc, SK_RC_OK);
    sk_redis_free(r);
    int rc = RUN(f.cwd, out, "worker", "--config", f.conf, "--once", "--consumer", "cfg-test");
    CHECK_MSG(rc == 0, "worker: exit %d: %s", rc, out);
    fx_no_stray(&f);
    /* the order is in the config's database */
    sk_store *st;
    char spec[420], err[256];
    snprintf(spec, sizeof spec, "sqlite:%s", f.db);
    CHECK_MSG(sk_store_open(&st, spec, err, sizeof err) == 0, "%s", err);
    struct sk_order o;
    CHECK_MSG(sk_store_order_get(st, adm.order_id, &o) == 0, "order %s not persisted: %s",
              adm.order_id, sk_store_errstr(st));
    CHECK_EQ(o.user_id, 77);
    sk_store_close(st);
}

static int healthy(void *port)
{
    return sk_net_http_ok(*(const int *)port, "/healthz", 1000);
}

SK_TEST(config_file_alone_drives_serve)
{
    struct fx f;
    int port = sk_th_free_port();
    char more[200];
    snprintf(more, sizeof more,
             "listen = 127.0.0.1:%d\nadmin_token = cfg-admin-token-0123456\nlog_level = info\n",
             port);
    fx_init(&f, more);
    fx_create(&f);
    char log[400], err[1200];
    snprintf(log, sizeof log, "%s/serve.log", sk_th_tmpdir());
    const char *argv[] = {sk_th_seckill_bin(), "serve", "--config", f.conf, NULL};
    struct sk_spawn_cmd c = {.argv = argv,
                             .err = log,
                             .cwd = f.cwd,
                             .flags = SK_SPAWN_PDEATHSIG,
                             .name = "seckill serve",
                             .ready = healthy,
                             .arg = &port,
                             .ready_ms = 15000,
                             .poll_ms = 10,
                             .stop_sig = SIGKILL,
                             .stop_ms = 1000};
    pid_t pid;
    CHECK_MSG(sk_spawn_start(&c, &pid, err, sizeof err) == 0, "%s", err);
    /* the file's database: the activity the CLI made is there */
    struct sk_th_http h;
    struct sk_th_resp *resp = sk_th_resp_new();
    sk_th_http_open(&h, port);
    char path[80];
    snprintf(path, sizeof path, "/api/v1/activities/%s", f.id);
    CHECK_EQ(sk_th_http_req(&h, "GET", path, NULL, NULL, resp), 200);
    /* the file's admin token */
    snprintf(path, sizeof path, "/api/v1/activities/%s/stats", f.id);
    CHECK_EQ(sk_th_http_req(&h, "GET", path, "Authorization: Bearer cfg-admin-token-0123456\r\n",
                            NULL, resp),
             200);
    CHECK_EQ(sk_th_http_req(&h, "GET", path, "Authorization: Bearer wrong\r\n", NULL, resp), 401);
    sk_th_http_close(&h);
    free(resp);
    CHECK_EQ(sk_spawn_stop(pid, SIGTERM, 15000), 0);
    fx_no_stray(&f);
    FILE *lf = fopen(log, "r");
    static char text[1 << 16];
    size_t n = lf ? fread(text, 1, sizeof text - 1, lf) : 0;
    if (lf) fclose(lf);
    text[n] = 0;
    char want[500];
    snprintf(want, sizeof want, "serve starting; config %s", f.conf);
    HAS(text, want);
}

SK_TEST(config_command_names_each_value_and_its_source)
{
    struct fx f;
    fx_init(&f, "processes = 2\nadmin_token = Sup3rSecretAdminToken\n"
                "hmac_secret_prev = another-secret-0123\n");
    char out[16384];
    /* the file's db and processes, the environment's log level, a flag's
     * listen, the default's redis_timeout_ms */
    int rc =
        run_at(f.cwd, 0, (const char *const[]){"SECKILL_LOG_LEVEL=error", NULL},
               (const char *const[]){"config", "--config", f.conf, "--listen", "0.0.0.0:9", NULL},
               out, sizeof out);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out);
    char want[600];
    snprintf(want, sizeof want, "# config file: %s", f.conf);
    HAS(out, want);
    /* each line: key, value, source, commands */
    static const char *const lines[][3] = {
        {"processes", "2", ":5"},
        {"log_level", "error", "env SECKILL_LOG_LEVEL"},
        {"listen", "0.0.0.0:9", "flag --listen"},
        {"redis_timeout_ms", "1000", "default"},
        {"admin_token", "(set)", ":6"},
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        const char *p = out;
        int found = 0;
        while ((p = strstr(p, lines[i][0])) != NULL) {
            if ((p == out || p[-1] == '\n') && p[strlen(lines[i][0])] == ' ') {
                const char *e = strchr(p, '\n');
                char line[400];
                snprintf(line, sizeof line, "%.*s", e ? (int)(e - p) : (int)strlen(p), p);
                CHECK_MSG(strstr(line, lines[i][1]) && strstr(line, lines[i][2]), "line: %s", line);
                found = 1;
                break;
            }
            p++;
        }
        CHECK_MSG(found, "no line for %s in:\n%s", lines[i][0], out);
    }
    snprintf(want, sizeof want, "sqlite:%s", f.db);
    HAS(out, want);
    CHECK_MSG(!strstr(out, "Sup3rSecret") && !strstr(out, "another-secret"), "a secret: %s", out);
    /* --for: one command's keys only */
    CHECK_EQ(RUN(f.cwd, out, "config", "--config", f.conf, "--for", "worker"), 0);
    HAS(out, "\nredis ");
    CHECK_MSG(!strstr(out, "\nprocesses "), "serve's key shown for the worker:\n%s", out);
    CHECK_EQ(RUN(f.cwd, out, "config", "--for", "nobody"), 2);
    /* a wrong configuration: exit 2 and why */
    CHECK_EQ(RUN(f.cwd, out, "config", "--config", f.conf, "--processes", "0"), 2);
    HAS(out, "processes: must be a number between 1 and 64");
}

SK_TEST(config_flags_beat_the_environment_which_beats_the_file)
{
    struct fx f;
    fx_init(&f, NULL); /* log_level = warn at line 4 */
    char out[16384], want[500];
    const char *env[] = {"SECKILL_LOG_LEVEL=error", NULL};
    const char *const with_flag[] = {"config", "--for",       "worker", "--config",
                                     f.conf,   "--log-level", "debug",  NULL};
    CHECK_EQ(run_at(f.cwd, 0, env, with_flag, out, sizeof out), 0);
    HAS(out, "debug");
    HAS(out, "flag --log-level");
    CHECK_EQ(run_at(f.cwd, 0, env,
                    (const char *const[]){"config", "--for", "worker", "--config", f.conf, NULL},
                    out, sizeof out),
             0);
    HAS(out, "env SECKILL_LOG_LEVEL");
    CHECK_EQ(RUN(f.cwd, out, "config", "--for", "worker", "--config", f.conf), 0);
    snprintf(want, sizeof want, "%s:4", f.conf);
    HAS(out, want);
    CHECK_EQ(RUN(f.cwd, out, "config", "--for", "worker", "--config", "/dev/null"), 0);
    HAS(out, "info");
    HAS(out, "default");
}

SK_TEST(config_keys_of_other_commands_are_refused_as_flags)
{
    struct fx f;
    fx_init(&f, NULL);
    char out[4096];
    CHECK_EQ(RUN(f.cwd, out, "reconcile", "--config", f.conf, "--admin-token", "x"), 2);
    HAS(out,
        "seckill: reconcile: --admin-token is not a flag of seckill reconcile (serve reads it)");
    CHECK_EQ(RUN(f.cwd, out, "worker", "--processes", "2"), 2);
    HAS(out, "--processes is not a flag of seckill worker");
    CHECK_EQ(RUN(f.cwd, out, "activity", "page", "--id", "1", "--out", "/tmp", "--db", "sqlite:x"),
             2);
    HAS(out, "--db is not a flag of seckill activity page");
    /* a wrong value of a key the command does not read: still wrong */
    char bad[500];
    snprintf(bad, sizeof bad, "%s/bad.conf", sk_th_tmpdir());
    sk_th_write_file(bad, "# ok\n\nmax_body = 12\n");
    CHECK_EQ(RUN(f.cwd, out, "reconcile", "--config", bad), 2);
    HAS(out, "line 3: max_body: must be a number of bytes between 1024 and 67108864");
    fx_no_stray(&f);
}

/* One command, a mistyped flag, and what it must be told. */
struct typo {
    const char *args[6];
    const char *want;
};

SK_TEST(config_unknown_flags_are_worded_one_way_with_the_closest_flag)
{
    static const struct typo typos[] = {
        {{"serve", "--redsi", "redis://h"},
         "seckill: serve: unknown flag --redsi; did you mean --redis?"},
        {{"serve", "--admin-tokne", "t"},
         "serve: unknown flag --admin-tokne; did you mean --admin-token?"},
        {{"worker", "--redsi", "redis://h"},
         "seckill: worker: unknown flag --redsi; did you mean --redis?"},
        {{"worker", "--bacth", "5"}, "worker: unknown flag --bacth; did you mean --batch?"},
        {{"reconcile", "--activty", "5"},
         "reconcile: unknown flag --activty; did you mean --activity?"},
        {{"reconcile", "--confg", "f"}, "reconcile: unknown flag --confg; did you mean --config?"},
        {{"activity", "show", "--di", "5"}, "activity show: unknown flag --di; did you mean --id?"},
        {{"activity", "create", "--stokc", "5"},
         "activity create: unknown flag --stokc; did you mean --stock?"},
        {{"config", "--refrence"}, "config: unknown flag --refrence; did you mean --reference?"},
        {{"demo", "--stokc", "5"}, "seckill: demo: unknown flag --stokc; did you mean --stock?"},
        {{"load", "--activty", "5"},
         "seckill: load: unknown flag --activty; did you mean --activity?"},
        {{"worker", "--frobnicate"},
         "seckill: worker: unknown flag --frobnicate; see seckill worker --help"},
        {{"serv"}, "seckill: unknown command 'serv'; did you mean serve?"},
    };
    char out[8192];
    for (size_t i = 0; i < sizeof typos / sizeof typos[0]; i++) {
        int rc = sk_th_run_seckill(out, sizeof out, NULL, typos[i].args);
        CHECK_MSG(rc == 2, "%s %s: exit %d: %s", typos[i].args[0], typos[i].args[1], rc, out);
        HAS(out, typos[i].want);
    }
}

SK_TEST(config_file_that_cannot_be_read_is_exit_2_never_the_defaults)
{
    struct fx f;
    fx_init(&f, NULL);
    CHECK_EQ(chmod(f.dir, 0755), 0);
    CHECK_EQ(chmod(f.cwd, 0777), 0);
    CHECK_EQ(chmod(f.conf, 0640), 0); /* root's; nobody may not read it */
    char out[4096], want[600];
    static const char *const cmds[][2] = {
        {"reconcile", NULL}, {"worker", "--once"}, {"activity", "list"}, {"serve", "--check"}};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        const char *args[6] = {cmds[i][0]};
        int n = 1;
        if (cmds[i][1]) args[n++] = cmds[i][1];
        args[n++] = "--config";
        args[n++] = f.conf;
        int rc = run_at(f.cwd, 1, NULL, args, out, sizeof out);
        CHECK_MSG(rc == 2, "%s as nobody: exit %d: %s", cmds[i][0], rc, out);
        snprintf(want, sizeof want, "cannot read the config file %s: Permission denied", f.conf);
        HAS(out, want);
        HAS(out, "group, seckill");
    }
    fx_no_stray(&f);
    /* named by the environment and not there; a directory */
    CHECK_EQ(run_at(f.cwd, 0, (const char *const[]){"SECKILL_CONFIG=/nonexistent/s.conf", NULL},
                    (const char *const[]){"reconcile", NULL}, out, sizeof out),
             2);
    HAS(out, "cannot read the config file /nonexistent/s.conf: No such file or directory");
    CHECK_EQ(RUN(f.cwd, out, "worker", "--config", f.cwd), 2);
    HAS(out, "cannot read the config file");
    fx_no_stray(&f);
}

SK_TEST(cli_read_only_commands_never_make_a_database)
{
    struct fx f;
    fx_init(&f, NULL);
    char out[4096], want[800], typo[500], nodir[500], dir[300];
    snprintf(dir, sizeof dir, "%s", sk_th_tmpdir()); /* each call: a fresh one */
    /* no config, no --db: the default ./seckill.db, which is not there */
    static const char *const cmds[][4] = {
        {"reconcile", NULL},
        {"worker", "--once", NULL},
        {"activity", "list", NULL},
        {"activity", "show", "--id", "1"},
        {"activity", "preheat", "--id", "1"},
        {"activity", "open", "--id", "1"},
        {"activity", "close", "--id", "1"},
        {"activity", "delete", "--id", "1"},
        {"activity", "recover", "--id", "1"},
    };
    snprintf(typo, sizeof typo, "sqlite:%s/seckil.db", dir);
    snprintf(nodir, sizeof nodir, "sqlite:%s/nodir/x.db", dir);
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        const char *args[10] = {0};
        int n = 0;
        for (int j = 0; j < 4 && cmds[i][j]; j++)
            args[n++] = cmds[i][j];
        args[n++] = "--redis";
        args[n++] = sk_th_redis_url();
        int rc = run_at(f.cwd, 0, NULL, args, out, sizeof out);
        CHECK_MSG(rc == 1, "%s %s: exit %d: %s", args[0], args[1], rc, out);
        snprintf(want, sizeof want, "no such database file: seckill.db (in %s)", f.cwd);
        HAS(out, want);
        fx_no_stray(&f);
        /* a typo in a path */
        args[n] = "--db";
        args[n + 1] = typo;
        rc = run_at(f.cwd, 0, NULL, args, out, sizeof out);
        CHECK_MSG(rc == 1, "%s %s: exit %d: %s", args[0], args[1], rc, out);
        snprintf(want, sizeof want, "no such database file: %s", typo + 7);
        HAS(out, want);
        CHECK_MSG(!exists(typo + 7), "%s made %s", args[0], typo + 7);
        /* a directory that is not there */
        args[n + 1] = nodir;
        rc = run_at(f.cwd, 0, NULL, args, out, sizeof out);
        CHECK_EQ(rc, 1);
        snprintf(want, sizeof want, "and no directory %s/nodir", dir);
        HAS(out, want);
    }
    /* the commands that make one name the missing directory */
    int rc = RUN(f.cwd, out, "activity", "create", "--db", nodir, "--id", "1", "--name", "n",
                 "--stock", "1", "--limit", "1");
    CHECK_MSG(rc == 1, "exit %d: %s", rc, out);
    snprintf(want, sizeof want, "no such directory: %s/nodir, for the database", dir);
    HAS(out, want);
    int port = sk_th_free_port();
    char listen[40];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    rc = RUN(f.cwd, out, "serve", "--db", nodir, "--listen", listen, "--redis", sk_th_redis_url());
    CHECK_MSG(rc == 1, "exit %d: %s", rc, out);
    HAS(out, want);
    CHECK(!exists(nodir + 7));
}

/* docs/configuration.md's table is what the program's table says. */
SK_TEST(config_reference_in_docs_matches_the_table)
{
    static char ref[1 << 16], doc[1 << 17];
    CHECK_EQ(sk_th_run_seckill(ref, sizeof ref, NULL,
                               (const char *const[]){"config", "--reference", NULL}),
             0);
    char path[600];
    snprintf(path, sizeof path, "%s/docs/configuration.md", sk_th_source_root());
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "%s: %s", path, strerror(errno));
    size_t n = fread(doc, 1, sizeof doc - 1, f);
    fclose(f);
    doc[n] = 0;
    const char *b = strstr(doc, "<!-- keys:begin");
    const char *e = strstr(doc, "<!-- keys:end");
    CHECK_MSG(b && e && e > b, "%s has no keys:begin / keys:end markers", path);
    b = strchr(b, '\n') + 1;
    CHECK_MSG((size_t)(e - b) == strlen(ref) && !memcmp(b, ref, strlen(ref)),
              "docs/configuration.md's table of keys differs from `seckill config --reference`: "
              "run make config-doc");
    /* and every key is in it with its flag and its variable */
    for (int k = 0; k < SK_CONFIG_NKEYS; k++) {
        char flag[80], env[80], row[200];
        snprintf(row, sizeof row, "| `%s` | `%s`, `%s` |", sk_config_keys[k].name,
                 sk_config_flag_name(k, flag, sizeof flag), sk_config_env_name(k, env, sizeof env));
        CHECK_MSG(strstr(ref, row) != NULL, "no row %s", row);
    }
}
