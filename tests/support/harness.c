/* harness.c - test runner, throwaway redis-servers and `seckill serve`
 * processes (started with spawn/), and CLI runner. */
#include "support/harness.h"
#include "support/http_client.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/error.h"
#include "engine/order_id.h"
#include "spawn/netutil.h"
#include "spawn/redis_spawn.h"
#include "spawn/spawn.h"

/* Every registered test (constructors run before main); grows as needed:
 * a fixed table once dropped the tests past its size without a word. */
static struct test {
    const char *name, *file;
    sk_test_fn fn;
    int timeout_s;  /* 0: the run's default */
    int on_request; /* selected only by a filter that is a prefix of its name */
} * tests;
static int ntests, cap_tests;
static char root_dir[256];
static struct sk_th_redis shared_redis;
static unsigned tmp_counter, id_counter;
/* The running test's number in this run (1..): part of every unique id, so
 * a test whose pid an earlier test of the same run had (pid_max wraps in a
 * long run) never meets that test's keys in the shared redis-server. */
static unsigned test_number;

void sk_test_register(const char *name, sk_test_fn fn, const char *file, int timeout_s)
{
    if (ntests == cap_tests) {
        int cap = cap_tests ? cap_tests * 2 : 256;
        struct test *t = realloc(tests, (size_t)cap * sizeof *t);
        if (!t) {
            fprintf(stderr, "out of memory registering test %s\n", name);
            abort();
        }
        tests = t;
        cap_tests = cap;
    }
    tests[ntests].name = name;
    tests[ntests].file = file;
    tests[ntests].fn = fn;
    tests[ntests].timeout_s = timeout_s;
    tests[ntests].on_request = 0;
    ntests++;
}

void sk_test_register_on_request(const char *name, sk_test_fn fn, const char *file)
{
    sk_test_register(name, fn, file, 0);
    tests[ntests - 1].on_request = 1;
}

void sk_th_report(const char *file, int line, const char *fmt, va_list ap)
{
    fprintf(stderr, "    FAIL %s:%d: ", file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

static struct {
    void (*fn)(void *);
    void *arg;
} at_fail[16];
static int n_at_fail;

void sk_th_at_fail(void (*fn)(void *), void *arg)
{
    if (n_at_fail == (int)(sizeof at_fail / sizeof at_fail[0]))
        sk_th_fail(__FILE__, __LINE__, "sk_th_at_fail: more than 16 hooks");
    at_fail[n_at_fail].fn = fn;
    at_fail[n_at_fail++].arg = arg;
}

void sk_th_at_fail_cancel(void (*fn)(void *), void *arg)
{
    for (int i = n_at_fail - 1; i >= 0; i--)
        if (at_fail[i].fn == fn && at_fail[i].arg == arg) {
            at_fail[i] = at_fail[--n_at_fail];
            return;
        }
}

void sk_th_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sk_th_report(file, line, fmt, ap);
    va_end(ap);
    fflush(stderr);
    /* a hook that fails again must not run the hooks twice */
    while (n_at_fail > 0) {
        n_at_fail--;
        at_fail[n_at_fail].fn(at_fail[n_at_fail].arg);
    }
    exit(1);
}

int sk_th_free_port(void)
{
    int port = sk_net_free_port();
    if (port < 0) sk_th_fail(__FILE__, __LINE__, "no free port: %s", strerror(errno));
    return port;
}

const char *sk_th_tmpdir(void)
{
    static char path[320];
    /* the test's number too: pids wrap in a long run */
    snprintf(path, sizeof path, "%s/t%u-%d-%u", root_dir, test_number, (int)getpid(),
             tmp_counter++);
    if (mkdir(path, 0777) < 0)
        sk_th_fail(__FILE__, __LINE__, "mkdir %s: %s", path, strerror(errno));
    chmod(path, 0777); /* servers that drop root (postgres) write here too */
    return path;
}

uint64_t sk_th_unique_id(void)
{
    /* < 2^53, a JavaScript number: test number < 10^4, pid < 2^22 < 10^7,
     * and fewer than 10^4 ids a process */
    return (uint64_t)test_number * 100000000000ULL + (uint64_t)getpid() * 10000 + ++id_counter;
}

static int unit_only; /* --unit: no shared redis-server */

long long sk_th_redis_calls(int port, const char *cmd)
{
    static char raw[1 << 16];
    const char q[] = "INFO commandstats\r\nQUIT\r\n";
    size_t n = sk_th_http_raw(port, q, sizeof q - 1, raw, sizeof raw - 1, 3000);
    raw[n] = 0;
    char pat[64];
    snprintf(pat, sizeof pat, "cmdstat_%s:calls=", cmd);
    const char *p = strstr(raw, pat);
    return p ? atoll(p + strlen(pat)) : 0;
}

const char *sk_th_redis_url(void)
{
    if (unit_only) sk_th_fail(__FILE__, __LINE__, "a unit test (--unit) asked for a redis-server");
    return shared_redis.url;
}

const char *sk_th_seckill_bin(void)
{
    const char *b = getenv("SECKILL_BIN");
    return b && *b ? b : "build/seckill";
}

const char *sk_th_seckill_hooks_bin(void)
{
    static char path[4096];
    const char *b = getenv("SECKILL_BIN");
    snprintf(path, sizeof path, "%s-hooks", b && *b ? b : "build/seckill");
    return path;
}

/* A test's record and the spawner's: tests read pid, port, dir and url,
 * and may end the server themselves (kill, waitpid, pid = 0), so the
 * record is the one truth, copied in and out around each spawner call. */
static void to_spawn(const struct sk_th_redis *t, struct sk_redis_spawn *s)
{
    memset(s, 0, sizeof *s);
    s->pid = t->pid;
    s->port = t->port;
    snprintf(s->dir, sizeof s->dir, "%s", t->dir);
    snprintf(s->url, sizeof s->url, "%s", t->url);
    snprintf(s->unix_url, sizeof s->unix_url, "%s", t->unix_url);
}

static void from_spawn(const struct sk_redis_spawn *s, struct sk_th_redis *t)
{
    t->pid = s->pid;
    t->port = s->port;
    snprintf(t->dir, sizeof t->dir, "%s", s->dir);
    snprintf(t->url, sizeof t->url, "%s", s->url);
    snprintf(t->unix_url, sizeof t->unix_url, "%s", s->unix_url);
}

void sk_th_redis_start(struct sk_th_redis *t, const char *const *extra)
{
    struct sk_redis_spawn s;
    if (sk_redis_spawn_start(&s, extra) < 0)
        sk_th_fail(__FILE__, __LINE__, "redis-server: %s", s.errstr);
    from_spawn(&s, t);
}

void sk_th_redis_start_pair(struct sk_th_redis *m, struct sk_th_redis *rp)
{
    const char *margs[] = {"--repl-diskless-sync-delay", "0", NULL};
    sk_th_redis_start(m, margs);
    char mport[16];
    snprintf(mport, sizeof mport, "%d", m->port);
    const char *rargs[] = {"--replicaof", "127.0.0.1", mport, NULL};
    sk_th_redis_start(rp, rargs);
}

void sk_th_redis_restart(struct sk_th_redis *t, const char *const *extra)
{
    struct sk_redis_spawn s;
    to_spawn(t, &s);
    int rc = sk_redis_spawn_restart(&s, extra);
    from_spawn(&s, t);
    if (rc < 0) sk_th_fail(__FILE__, __LINE__, "redis-server restart: %s", s.errstr);
}

void sk_th_redis_stop(struct sk_th_redis *t, int hard)
{
    struct sk_redis_spawn s;
    to_spawn(t, &s);
    sk_redis_spawn_halt(&s, hard);
    t->pid = 0;
}

const char *sk_th_bench_bin(void)
{
    const char *b = getenv("SECKILL_BENCH_BIN");
    return b && *b ? b : "build/seckill-bench";
}

pid_t sk_th_fork(void)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) sk_th_fail(__FILE__, __LINE__, "fork: %s", strerror(errno));
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(1);
    }
    return pid;
}

void sk_th_exec(const char *bin, const char *const *args)
{
    const char *argv[64] = {bin};
    int n = 1;
    for (int i = 0; args[i] && n < 63; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    execv(argv[0], (char *const *)argv);
    _exit(127);
}

void sk_th_exec_out(int out_fd, const char *bin, const char *const *env, const char *const *args)
{
    dup2(out_fd, 1);
    dup2(out_fd, 2);
    for (int i = 0; env && env[i]; i++)
        putenv((char *)env[i]);
    sk_th_exec(bin, args);
}

static int run_bin(const char *bin, char *out, size_t cap, const char *const *env,
                   const char *const *args)
{
    int pfd[2];
    if (pipe(pfd) < 0) sk_th_fail(__FILE__, __LINE__, "pipe");
    pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        sk_th_exec_out(pfd[1], bin, env, args);
    }
    close(pfd[1]);
    size_t len = 0;
    ssize_t got;
    char sink[4096];
    while ((got = read(pfd[0], cap > len + 1 ? out + len : sink,
                       cap > len + 1 ? cap - len - 1 : sizeof sink)) > 0)
        if (cap > len + 1) len += (size_t)got;
    close(pfd[0]);
    if (cap) out[len] = 0;
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int sk_th_run_seckill(char *out, size_t cap, const char *const *env, const char *const *args)
{
    return run_bin(sk_th_seckill_bin(), out, cap, env, args);
}

const char *sk_th_clock_shift_lib(void)
{
    static char path[4200];
    const char *bin = sk_th_seckill_bin(), *slash = strrchr(bin, '/');
    snprintf(path, sizeof path, "%.*s/libsk-clock-shift.so", slash ? (int)(slash - bin) : 1,
             slash ? bin : ".");
    if (access(path, R_OK) != 0) sk_th_fail(__FILE__, __LINE__, "%s: make builds it", path);
    return path;
}

void sk_th_clock_shift_env(const char *file)
{
    static char asan[1024];
    static int had_asan = -1; /* -1: not set by this; 0 or 1: ASAN_OPTIONS before */
    if (file) {
        const char *lib = sk_th_clock_shift_lib(), *was = getenv("ASAN_OPTIONS");
        if (had_asan < 0) {
            had_asan = was != NULL;
            snprintf(asan, sizeof asan, "%s", was ? was : "");
        }
        char opts[1100];
        snprintf(opts, sizeof opts, "%s%sverify_asan_link_order=0", asan, asan[0] ? ":" : "");
        setenv("ASAN_OPTIONS", opts, 1);
        setenv("LD_PRELOAD", lib, 1);
        setenv("SK_CLOCK_SHIFT_FILE", file, 1);
        return;
    }
    unsetenv("LD_PRELOAD");
    unsetenv("SK_CLOCK_SHIFT_FILE");
    if (had_asan == 1)
        setenv("ASAN_OPTIONS", asan, 1);
    else if (had_asan == 0)
        unsetenv("ASAN_OPTIONS");
    had_asan = -1;
}

int sk_th_run_seckill_hooks(char *out, size_t cap, const char *const *env, const char *const *args)
{
    return run_bin(sk_th_seckill_hooks_bin(), out, cap, env, args);
}

int sk_th_run_bench(char *out, size_t cap, const char *const *env, const char *const *args)
{
    return run_bin(sk_th_bench_bin(), out, cap, env, args);
}

uint64_t sk_th_rng(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void sk_th_buyers(uint32_t *users, size_t n, uint32_t nusers, uint32_t nhot, uint32_t hot_reps,
                  uint64_t *seed)
{
    if ((size_t)(nusers - nhot) + (size_t)nhot * hot_reps > n)
        sk_th_fail(__FILE__, __LINE__, "sk_th_buyers: %zu attempts are too few", n);
    size_t k = 0;
    for (uint32_t u = nhot + 1; u <= nusers; u++)
        users[k++] = u;
    for (uint32_t u = 1; u <= nhot; u++)
        for (uint32_t j = 0; j < hot_reps; j++)
            users[k++] = u;
    while (k < n)
        users[k++] = 1 + (uint32_t)(sk_th_rng(seed) % nusers);
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)(sk_th_rng(seed) % (i + 1));
        uint32_t t = users[i];
        users[i] = users[j];
        users[j] = t;
    }
}

static pid_t runner_pid;

#define MAX_HOOKS 8
static void (*before_hooks[MAX_HOOKS])(const char *name, const char *file);
static void (*exit_hooks[MAX_HOOKS])(void);
static int nhooks;

void sk_th_add_hooks(void (*before_test)(const char *name, const char *file), void (*at_exit)(void))
{
    if (nhooks < MAX_HOOKS) {
        before_hooks[nhooks] = before_test;
        exit_hooks[nhooks++] = at_exit;
    }
}

/* Readiness of `seckill serve`: GET /healthz on port *arg answers 200. */
static int serve_healthy(void *port)
{
    return sk_net_http_ok(*(const int *)port, "/healthz", 1000);
}

void sk_th_serve_start(struct sk_th_serve *s, const char *redis_url, const char *const *extra)
{
    sk_th_serve_start_in(s, sk_th_tmpdir(), redis_url, extra);
}

void sk_th_serve_start_in(struct sk_th_serve *s, const char *dir, const char *redis_url,
                          const char *const *extra)
{
    memset(s, 0, sizeof *s);
    s->port = sk_th_free_port();
    snprintf(s->db, sizeof s->db, "sqlite:%s/serve.db", dir);
    snprintf(s->log, sizeof s->log, "%s/serve.log", dir);
    char listen[64], err[600];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", s->port);
    const char *argv[64] = {
        sk_th_seckill_bin(), "serve",         "--listen",        listen, "--redis",
        redis_url,           "--admin-token", SK_TH_ADMIN_TOKEN, "--db", s->db};
    int fixed = 10;
    /* With --ops-listen the ops routes, /healthz too, answer only there. */
    for (int i = 0; extra && extra[i]; i++) {
        if (!strcmp(extra[i], "--ops-listen") && extra[i + 1] && strrchr(extra[i + 1], ':'))
            s->ops_port = atoi(strrchr(extra[i + 1], ':') + 1);
        if (!strcmp(extra[i], "--db") && extra[i + 1]) { /* the caller's store instead */
            fixed = 8;
            snprintf(s->db, sizeof s->db, "%s", extra[i + 1]);
        }
    }
    if (sk_spawn_args(argv, fixed, 64, NULL, extra, "serve arguments", err, sizeof err) < 0)
        sk_th_fail(__FILE__, __LINE__, "%s", err);
    struct sk_spawn_cmd cmd = {.argv = argv,
                               .err = s->log,
                               .flags = SK_SPAWN_PDEATHSIG,
                               .name = "seckill serve",
                               .ready = serve_healthy,
                               .arg = s->ops_port ? &s->ops_port : &s->port,
                               .ready_ms = 15000,
                               .poll_ms = 10,
                               .stop_sig = SIGKILL,
                               .stop_ms = 1000};
    if (sk_spawn_start(&cmd, &s->pid, err, sizeof err) < 0)
        sk_th_fail(__FILE__, __LINE__, "%s (log %s)", err, s->log);
}

int sk_th_serve_stop(struct sk_th_serve *s, int sig)
{
    if (s->pid <= 0) return -1;
    kill(s->pid, sig);
    int st, rc = sk_spawn_wait(&s->pid, NULL, NULL, 20000, 5, &st);
    if (rc == SK_ETIMEDOUT) {
        sk_spawn_stop(s->pid, SIGKILL, 1000);
        s->pid = 0;
        sk_th_fail(__FILE__, __LINE__, "seckill serve did not stop within 20 s");
    }
    if (rc < 0) sk_th_fail(__FILE__, __LINE__, "lost track of seckill serve (waitpid)");
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (code != 0) {
        /* the caller's check will fail: show why serve thinks it failed */
        fprintf(stderr, "# seckill serve exited %d; the end of its log:\n", code);
        FILE *f = fopen(s->log, "r");
        char line[512], tail[20][512];
        int n = 0;
        while (f && fgets(line, sizeof line, f))
            snprintf(tail[n++ % 20], sizeof tail[0], "%s", line);
        if (f) fclose(f);
        for (int i = n > 20 ? n - 20 : 0; i < n; i++)
            fprintf(stderr, "#   %s", tail[i % 20]);
    }
    return code;
}

/* Runs at exit of the runner only: test children inherit the atexit hook
 * and must not tear down the shared server when they fail. */
static void cleanup(void)
{
    if (getpid() != runner_pid) return;
    for (int i = nhooks - 1; i >= 0; i--)
        if (exit_hooks[i]) exit_hooks[i]();
    sk_th_redis_stop(&shared_redis, 1);
    char err[400];
    if (!getenv("SK_KEEP") && sk_spawn_rmtree(root_dir, err, sizeof err) < 0)
        fprintf(stderr, "%s\n", err);
}

static void on_signal(int sig)
{
    cleanup();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* One test running in its own child (its own process group, so a timeout
 * kills whatever it started too), its output kept in a file until it ends
 * so parallel tests do not interleave. */
struct running {
    int test, number;
    pid_t pid;
    int64_t t0, deadline;
    char out[300];
};

static void start_test(struct running *r, int test, int number, int default_timeout_s)
{
    r->test = test;
    r->number = number;
    snprintf(r->out, sizeof r->out, "%s/out-%d.txt", root_dir, number);
    for (int h = 0; h < nhooks; h++)
        if (before_hooks[h]) before_hooks[h](tests[test].name, tests[test].file);
    int timeout = tests[test].timeout_s > 0 ? tests[test].timeout_s : default_timeout_s;
    r->t0 = sk_mono_ms();
    r->deadline = r->t0 + (int64_t)timeout * 1000;
    fflush(NULL);
    pid_t runner = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(2);
    }
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != runner) _exit(1);
        test_number = (unsigned)number;
        int fd = open(r->out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        tests[test].fn();
        fflush(NULL);
        _exit(0);
    }
    setpgid(pid, pid); /* also here: no race with a kill before the child ran */
    r->pid = pid;
}

/* Prints the test's output and its verdict; returns 1 when it passed. */
static int finish_test(struct running *r, int st, int timed_out)
{
    FILE *f = fopen(r->out, "r");
    if (f) {
        char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, f)) > 0)
            fwrite(buf, 1, n, stdout);
        fclose(f);
        unlink(r->out);
    }
    int ok = !timed_out && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    const char *file = strrchr(tests[r->test].file, '/');
    printf("%s %d - %s (%s, %lld ms)%s\n", ok ? "ok" : "not ok", r->number, tests[r->test].name,
           file ? file + 1 : tests[r->test].file, (long long)(sk_mono_ms() - r->t0),
           timed_out         ? " [timed out]"
           : WIFSIGNALED(st) ? " [crashed]"
                             : "");
    return ok;
}

static int usage(void)
{
    fprintf(stderr, "usage: seckill-tests [--unit] [-j N] [--timeout S] [--list] [FILTER]\n"
                    "  FILTER      run the tests whose name or file contains it (the\n"
                    "              partition_ tests run only when a FILTER selects them)\n"
                    "  --unit      only tests/unit/ (no server is started)\n"
                    "  -j N        run N tests at once (default 1)\n"
                    "  --timeout S a test running longer fails (default 300; a test may ask more)\n"
                    "  --list      print the selected tests' names\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *filter = NULL;
    int jobs = 1, timeout_s = 300, list = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--unit"))
            unit_only = 1;
        else if (!strcmp(argv[i], "--list"))
            list = 1;
        else if (!strcmp(argv[i], "-j") && i + 1 < argc)
            jobs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--timeout") && i + 1 < argc)
            timeout_s = atoi(argv[++i]);
        else if (argv[i][0] == '-')
            return usage();
        else
            filter = argv[i];
    }
    if (jobs < 1 || jobs > 64 || timeout_s < 1) return usage();
    int *selected = calloc((size_t)(ntests ? ntests : 1), sizeof *selected), nsel = 0, skipped = 0;
    if (!selected) return 2;
    for (int i = 0; i < ntests; i++) {
        int match = !filter || strstr(tests[i].name, filter) || strstr(tests[i].file, filter);
        if (tests[i].on_request)
            match =
                filter && strlen(filter) >= 5 && !strncmp(tests[i].name, filter, strlen(filter));
        if (match && unit_only && !strstr(tests[i].file, "/unit/")) match = 0;
        /* the partition tests (root, minutes) run only when asked for:
         * `make partitions` */
        if (match && !filter && !strncmp(tests[i].name, "partition_", 10)) match = 0;
        if (match)
            selected[nsel++] = i;
        else
            skipped++;
    }
    if (list) {
        for (int i = 0; i < nsel; i++)
            printf("%s\n", tests[selected[i]].name);
        free(selected);
        return 0;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    snprintf(root_dir, sizeof root_dir, "/tmp/seckill-test-XXXXXX");
    if (!mkdtemp(root_dir)) {
        perror("mkdtemp");
        return 2;
    }
    chmod(root_dir, 0777);
    setenv("TMPDIR", root_dir, 1); /* the spawners' directories go in the root too */
    /* Every seckill the suite starts reads an empty config file unless a
     * test names one: a /etc/seckill/seckill.conf on this machine must not
     * change what a test runs (cmd/settings.h). */
    setenv("SECKILL_CONFIG", "/dev/null", 0);
    runner_pid = getpid();
    atexit(cleanup);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGPIPE, SIG_IGN);
    if (!unit_only) sk_th_redis_start(&shared_redis, NULL);

    struct running *run = calloc((size_t)jobs, sizeof *run);
    int passed = 0, failed = 0, next = 0, active = 0;
    while (next < nsel || active > 0) {
        while (active < jobs && next < nsel) {
            for (int k = 0; k < jobs; k++)
                if (run[k].pid == 0) {
                    start_test(&run[k], selected[next], next + 1, timeout_s);
                    next++;
                    active++;
                    break;
                }
        }
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid > 0) {
            for (int k = 0; k < jobs; k++)
                if (run[k].pid == pid) {
                    kill(-pid, SIGKILL); /* anything the test left behind */
                    if (finish_test(&run[k], st, 0))
                        passed++;
                    else
                        failed++;
                    run[k].pid = 0;
                    active--;
                }
            continue;
        }
        int64_t now = sk_mono_ms();
        for (int k = 0; k < jobs; k++)
            if (run[k].pid > 0 && now > run[k].deadline) {
                kill(-run[k].pid, SIGKILL);
                waitpid(run[k].pid, &st, 0);
                finish_test(&run[k], st, 1);
                failed++;
                run[k].pid = 0;
                active--;
            }
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    free(run);
    free(selected);
    printf("%d passed, %d failed", passed, failed);
    if (skipped) printf(", %d skipped", skipped);
    printf("\n");
    return failed ? 1 : 0;
}

const char *sk_th_source_root(void)
{
    static char path[512];
    const char *f = __FILE__, *slash = strrchr(f, '/');
    snprintf(path, sizeof path, "%.*s/../..", slash ? (int)(slash - f) : 1, slash ? f : ".");
    return path;
}

int sk_th_sh(const char *cmd, char *out, size_t cap)
{
    FILE *p = popen(cmd, "r");
    if (!p) sk_th_fail(__FILE__, __LINE__, "popen %s failed", cmd);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    return pclose(p);
}

void sk_th_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) sk_th_fail(__FILE__, __LINE__, "%s: %s", path, strerror(errno));
    fputs(text, f);
    if (fclose(f) != 0) sk_th_fail(__FILE__, __LINE__, "%s: %s", path, strerror(errno));
    /* private: serve refuses a config or secret file others may read */
    chmod(path, 0600);
}

void sk_th_write_in(const char *dir, const char *name, const char *text)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    sk_th_write_file(path, text);
}

int sk_th_check_script(const char *script, const char *root, char *out, size_t cap)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "SK_CHECK_ROOT='%s' sh '%s/scripts/%s' 2>&1", root,
             sk_th_source_root(), script);
    return sk_th_sh(cmd, out, cap);
}

void sk_th_order_sid(const char *order_id, char *sid, size_t cap)
{
    struct sk_oid id;
    CHECK_MSG(sk_oid_parse(order_id, strlen(order_id), &id) == 0, "not an order id: %s", order_id);
    snprintf(sid, cap, "%llu-%llu", (unsigned long long)id.sid.ms, (unsigned long long)id.sid.seq);
}
