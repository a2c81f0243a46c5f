/* bench_util.c - what the benchmark programs share: running
 * redis-benchmark as a reference line, and reading CPU time (this process,
 * the machine, a Redis server) and the CPU model for the reports. */
#include "bench/bench_util.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/codes.h"
#include "core/error.h"
#include "engine/stock.h"
#include "redis/script.h"
#include "tests/support/spawn/proc_stat.h"

const char *sk_bench_seckill_bin(void)
{
    static char bin[4096];
    if (bin[0]) return bin;
    const char *env = getenv("SECKILL_BIN");
    if (env && *env) {
        snprintf(bin, sizeof bin, "%s", env);
        return bin;
    }
    char self[4000];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = 0;
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = 0;
            snprintf(bin, sizeof bin, "%s/seckill", self);
            if (access(bin, X_OK) == 0) return bin;
        }
    }
    snprintf(bin, sizeof bin, "seckill");
    return bin;
}

int sk_bench_on_path(const char *prog)
{
    const char *path = getenv("PATH");
    if (!path) return 0;
    char buf[1024];
    for (const char *p = path; *p;) {
        size_t n = strcspn(p, ":");
        if (n && n < sizeof buf - strlen(prog) - 2) {
            snprintf(buf, sizeof buf, "%.*s/%s", (int)n, p, prog);
            if (access(buf, X_OK) == 0) return 1;
        }
        p += n;
        if (*p == ':') p++;
    }
    return 0;
}

/* Runs redis-benchmark --csv with args, killed after limit_ms; *rps from
 * its result line ("<test>","<rps>",...). --csv prints no progress lines. */
int sk_bench_redis_benchmark(const char *const *args, int64_t limit_ms, const atomic_int *stop,
                             double *rps, char *err, size_t errcap)
{
    int pfd[2];
    if (pipe(pfd) < 0) {
        snprintf(err, errcap, "pipe: %s", strerror(errno));
        return SK_EIO;
    }
    pid_t pid = fork();
    if (pid < 0) {
        close(pfd[0]);
        close(pfd[1]);
        snprintf(err, errcap, "fork: %s", strerror(errno));
        return SK_EIO;
    }
    if (pid == 0) {
        dup2(pfd[1], 1);
        dup2(pfd[1], 2);
        close(pfd[0]);
        close(pfd[1]);
        execvp("redis-benchmark", (char *const *)args);
        _exit(127);
    }
    close(pfd[1]);
    char out[8192];
    size_t len = 0;
    int64_t deadline = sk_mono_ms() + limit_ms;
    int timed_out = 0;
    for (;;) {
        int64_t left = deadline - sk_mono_ms();
        if (left <= 0 || (stop && atomic_load(stop))) {
            timed_out = 1;
            break;
        }
        struct pollfd pf = {.fd = pfd[0], .events = POLLIN};
        int pr = poll(&pf, 1, (int)(left < 200 ? left : 200));
        if (pr < 0 && errno != EINTR) break;
        if (pr <= 0) continue;
        char tmp[1024];
        ssize_t got = read(pfd[0], tmp, sizeof tmp);
        if (got <= 0) break;
        /* Keep the tail: the result is the last line. */
        if (len + (size_t)got >= sizeof out) {
            size_t drop = len + (size_t)got - (sizeof out - 1);
            if (drop > len) drop = len;
            memmove(out, out + drop, len - drop);
            len -= drop;
        }
        size_t take = (size_t)got < sizeof out - 1 - len ? (size_t)got : sizeof out - 1 - len;
        memcpy(out + len, tmp, take);
        len += take;
    }
    close(pfd[0]);
    out[len] = 0;
    if (timed_out) kill(pid, SIGKILL);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (timed_out) {
        snprintf(err, errcap, "redis-benchmark did not finish within %" PRId64 " ms", limit_ms);
        return SK_ETIMEDOUT;
    }
    *rps = -1;
    for (char *line = out; line && *line;) {
        char *nl = strpbrk(line, "\r\n");
        if (nl) *nl = 0;
        char *sep = strstr(line, "\",\"");
        if (line[0] == '"' && sep && strncmp(line, "\"test\"", 6) != 0)
            *rps = strtod(sep + 3, NULL);
        line = nl ? nl + 1 : NULL;
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || *rps <= 0) {
        /* The parse above cut out[] into lines: report the first one, where
         * redis-benchmark puts its error. */
        snprintf(err, errcap, "redis-benchmark failed (status %d): %.150s",
                 WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), out[0] ? out : "no output");
        return SK_EIO;
    }
    return 0;
}

double sk_bench_self_cpu_seconds(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) < 0) return 0;
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* Busy CPU seconds of the whole machine (all but idle and iowait): what
 * other processes took during a phase shows how disturbed it was. */
double sk_bench_machine_cpu_seconds(void)
{
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return 0;
    unsigned long long v[8] = {0};
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                   &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    if (n < 8) return 0;
    return (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)sysconf(_SC_CLK_TCK);
}

int sk_bench_info_field(sk_redis *r, const char *section, const char *field, char *val, size_t cap)
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

int sk_bench_load_scripts(sk_redis *r)
{
    for (int i = 0; i < SK_SCRIPT_COUNT; i++) {
        redisReply *rep;
        const char *argv[] = {"SCRIPT", "LOAD", sk_script_text((enum sk_script_id)i)};
        int rc = sk_redis_command(r, &rep, 3, argv, NULL);
        if (rc < 0) return rc;
        int ok = rep->type == REDIS_REPLY_STRING &&
                 !strcmp(rep->str, sk_script_sha((enum sk_script_id)i));
        if (!ok)
            snprintf(r->errstr, sizeof r->errstr, "SCRIPT LOAD %s: %s",
                     sk_script_name((enum sk_script_id)i),
                     rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply");
        freeReplyObject(rep);
        if (!ok) return r->err = SK_ESCRIPT;
    }
    return 0;
}

double sk_bench_redis_cpu_seconds(sk_redis *r)
{
    char v[64];
    double t = 0;
    if (sk_bench_info_field(r, "cpu", "used_cpu_sys", v, sizeof v) == 0) t += strtod(v, NULL);
    if (sk_bench_info_field(r, "cpu", "used_cpu_user", v, sizeof v) == 0) t += strtod(v, NULL);
    return t;
}

void sk_bench_cpu_model(char *out, size_t cap)
{
    snprintf(out, cap, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char *c = strchr(line, ':');
        if (!strncmp(line, "model name", 10) && c) {
            c += 1 + strspn(c + 1, " \t");
            c[strcspn(c, "\n")] = 0;
            snprintf(out, cap, "%s", c);
            break;
        }
    }
    fclose(f);
}

void sk_bench_machine(char *cpu, size_t cpucap, char *kernel, size_t kcap)
{
    sk_bench_cpu_model(cpu, cpucap);
    struct utsname un;
    if (uname(&un) == 0)
        snprintf(kernel, kcap, "%s %s", un.sysname, un.release);
    else
        snprintf(kernel, kcap, "unknown");
}

double sk_bench_pid_cpu_seconds(pid_t pid)
{
    if (pid <= 0) return 0;
    char buf[1024];
    /* after the command name, utime and stime are the 12th and 13th fields */
    const char *p = sk_proc_stat_fields(pid, buf, sizeof buf);
    unsigned long long ut = 0, st = 0;
    if (!p || sscanf(p, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return 0;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

int sk_bench_with_children(pid_t pid, pid_t *out, int cap)
{
    int n = 0;
    if (pid <= 0 || cap < 1) return 0;
    out[n++] = pid;
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d && (e = readdir(d)) && n < cap) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
        char buf[512];
        pid_t child = (pid_t)atoi(e->d_name);
        const char *p = sk_proc_stat_fields(child, buf, sizeof buf);
        int ppid;
        if (p && sscanf(p, "%*c %d", &ppid) == 1 && ppid == (int)pid) out[n++] = child;
    }
    if (d) closedir(d);
    return n;
}

double sk_bench_tree_cpu_seconds(pid_t root)
{
    pid_t ps[16];
    int n = sk_bench_with_children(root, ps, 16);
    double t = 0;
    for (int i = 0; i < n; i++)
        t += sk_bench_pid_cpu_seconds(ps[i]);
    return t;
}

int sk_bench_threads_start(pthread_barrier_t *bar, void *items, size_t n, size_t size,
                           size_t tid_off, void *(*fn)(void *), char *note, size_t cap)
{
    if (pthread_barrier_init(bar, NULL, (unsigned)n + 1) != 0)
        return sk_errf(note, cap, SK_ENOMEM, "pthread_barrier_init failed");
    for (size_t i = 0; i < n; i++) {
        char *item = (char *)items + i * size;
        if (pthread_create((pthread_t *)(void *)(item + tid_off), NULL, fn, item) != 0) {
            fprintf(stderr, "seckill: pthread_create failed\n");
            abort();
        }
    }
    return 0;
}

int sk_bench_call_init(struct sk_bench_call *c, size_t batch)
{
    memset(c, 0, sizeof *c);
    c->cap = SK_BATCH_ARG_BYTES(batch);
    c->kcap = SK_BATCH_KEY_BYTES(batch);
    c->res = calloc(batch, sizeof *c->res);
    c->buf = malloc(c->cap + c->kcap);
    c->args = calloc(SK_BATCH_ARGC(batch), sizeof *c->args);
    c->lens = calloc(SK_BATCH_ARGC(batch), sizeof *c->lens);
    c->keys = calloc(SK_BATCH_KEYC(batch), sizeof *c->keys);
    return c->res && c->buf && c->args && c->lens && c->keys ? 0 : SK_ENOMEM;
}

void sk_bench_call_free(struct sk_bench_call *c)
{
    free(c->res);
    free(c->buf);
    free(c->args);
    free(c->lens);
    free(c->keys);
}

int sk_bench_preheat_open(sk_redis *ctl, uint64_t aid, int64_t stock, int segs, int force,
                          char *err, size_t cap)
{
    int64_t now = sk_wall_ms(), left;
    struct sk_stock_def d = {.id = aid,
                             .initial = stock,
                             .per_user_limit = 1,
                             .max_per_order = 1,
                             .start_ms = now - 60000,
                             .end_ms = now + 86400000,
                             .segments = segs};
    int code;
    int rc = sk_stock_preheat(ctl, &d, force, &code, &left);
    if (rc < 0) return sk_errf(err, cap, rc, "preheat: %.200s", ctl->errstr);
    if (code != SK_RC_PREHEATED)
        return sk_errf(err, cap, SK_ESTATE, "preheat of activity %" PRIu64 ": %s", aid,
                       sk_rc_name(code));
    if ((rc = sk_stock_set_open(ctl, aid, 1, &code)) < 0)
        return sk_errf(err, cap, rc, "open: %.200s", ctl->errstr);
    if (code != SK_RC_OK) return sk_errf(err, cap, SK_ESTATE, "open: %s", sk_rc_name(code));
    return 0;
}

atomic_int sk_bench_interrupted;
static void (*volatile on_interrupt)(void);

static void interrupted(int sig)
{
    (void)sig;
    atomic_store(&sk_bench_interrupted, 1);
    if (on_interrupt) on_interrupt();
}

void sk_bench_catch_signals(void (*also)(void))
{
    on_interrupt = also;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = interrupted;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

void sk_bench_rb_purchase_args(const char **argv, const char *label)
{
    /* the stride of stock.h's sk_stock_batch_args_head: ten head fields,
     * then five per purchase */
    const char *a[SK_BENCH_RB_ARGC] = {label,          "0", "0", "0", "0", "", "0", "", "", "",
                                       "__rand_int__", "1", "",  "",  ""};
    for (int i = 0; i < SK_BENCH_RB_ARGC; i++)
        argv[i] = a[i];
}
