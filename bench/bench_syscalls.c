/* bench_syscalls.c - system calls of a server during a phase
 * (bench_syscalls.h). */
#include "bench/bench_syscalls.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench_child.h"
#include "bench/bench_util.h"
#include "core/clock.h"

/* perf's events and what each counts towards. */
static const struct {
    const char *event;
    int into;
} events[] = {
    {"raw_syscalls:sys_enter", SK_SYSC_ALL},
    {"syscalls:sys_enter_read", SK_SYSC_READS},
    {"syscalls:sys_enter_readv", SK_SYSC_READS},
    {"syscalls:sys_enter_recvfrom", SK_SYSC_READS},
    {"syscalls:sys_enter_recvmsg", SK_SYSC_READS},
    {"syscalls:sys_enter_write", SK_SYSC_WRITES},
    {"syscalls:sys_enter_writev", SK_SYSC_WRITES},
    {"syscalls:sys_enter_sendto", SK_SYSC_WRITES},
    {"syscalls:sys_enter_sendmsg", SK_SYSC_WRITES},
    {"syscalls:sys_enter_epoll_wait", SK_SYSC_EPOLL_WAIT},
    {"syscalls:sys_enter_epoll_pwait", SK_SYSC_EPOLL_WAIT},
    {"syscalls:sys_enter_epoll_ctl", SK_SYSC_EPOLL_CTL},
    {"syscalls:sys_enter_ioctl", SK_SYSC_IOCTL},
};
#define N_EVENTS (sizeof events / sizeof events[0])

const char *sk_bench_sysc_method_name(enum sk_bench_sysc_method m)
{
    return m == SK_SYSC_PERF ? "perf" : m == SK_SYSC_PROC_IO ? "/proc/PID/io" : "none";
}

static void nap_ms(int ms)
{
    struct timespec ts = {0, (long)ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* syscr + syscw of a process; 0 when unreadable. */
static uint64_t proc_io(pid_t pid)
{
    char path[64], line[128];
    snprintf(path, sizeof path, "/proc/%d/io", (int)pid);
    FILE *f = fopen(path, "r");
    uint64_t n = 0;
    unsigned long long v;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "syscr: %llu", &v) == 1 || sscanf(line, "syscw: %llu", &v) == 1) n += v;
    if (f) fclose(f);
    return n;
}

/* perf's perf_event descriptors: one per event and thread once attached. */
static int perf_fds(pid_t perf)
{
    char path[64], link[128], target[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)perf);
    DIR *d = opendir(path);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        snprintf(link, sizeof link, "%s/%.20s", path, e->d_name);
        ssize_t l = readlink(link, target, sizeof target - 1);
        if (l > 0) {
            target[l] = 0;
            n += strstr(target, "perf_event") != NULL;
        }
    }
    if (d) closedir(d);
    return n;
}

/* perf stat on pids into out; the pid, or -1. Returns once perf has
 * attached (its descriptors stop growing), so the count starts now. */
static pid_t perf_start(const pid_t *pids, int n, const char *out)
{
    char plist[256] = "", evs[1024] = "";
    for (int i = 0; i < n; i++)
        snprintf(plist + strlen(plist), sizeof plist - strlen(plist), "%s%d", i ? "," : "",
                 (int)pids[i]);
    for (size_t i = 0; i < N_EVENTS; i++)
        snprintf(evs + strlen(evs), sizeof evs - strlen(evs), "%s%s", i ? "," : "",
                 events[i].event);
    char exe[] = "/usr/bin/perf";
    if (access(exe, X_OK) != 0) return -1;
    char *argv[] = {exe, "stat", "-x", ",", "-e", evs, "-p", plist, "-o", (char *)out, NULL};
    char log[420];
    snprintf(log, sizeof log, "%s.log", out);
    pid_t p = sk_bench_spawn(argv, log);
    if (p < 0) return -1;
    int last = -1, stable = 0;
    for (int64_t end = sk_mono_ms() + 5000; sk_mono_ms() < end;) {
        if (waitpid(p, NULL, WNOHANG) == p) return -1; /* it could not trace */
        int k = perf_fds(p);
        stable = k >= (int)N_EVENTS && k == last ? stable + 1 : 0;
        if (stable >= 3) return p;
        last = k;
        nap_ms(20);
    }
    kill(p, SIGKILL);
    waitpid(p, NULL, 0);
    return -1;
}

/* SIGINT makes perf print its counts; 0 when they were read. */
static int perf_stop(pid_t p, const char *out, uint64_t count[SK_SYSC_N])
{
    kill(p, SIGINT);
    int st;
    if (waitpid(p, &st, 0) != p) return -1;
    FILE *f = fopen(out, "r");
    if (!f) return -1;
    char line[512];
    int seen = 0;
    while (fgets(line, sizeof line, f)) {
        char *c1 = strchr(line, ','), *c2 = c1 ? strchr(c1 + 1, ',') : NULL;
        if (!c2 || !(line[0] >= '0' && line[0] <= '9')) continue;
        char *c3 = strchr(c2 + 1, ',');
        if (c3) *c3 = 0;
        for (size_t i = 0; i < N_EVENTS; i++)
            if (!strcmp(c2 + 1, events[i].event)) {
                count[events[i].into] += strtoull(line, NULL, 10);
                seen += events[i].into == SK_SYSC_ALL;
            }
    }
    fclose(f);
    return seen ? 0 : -1;
}

enum sk_bench_sysc_method sk_bench_sysc_probe(void)
{
    char dir[] = "/tmp/seckill-sysc-XXXXXX", out[64];
    if (!mkdtemp(dir)) return SK_SYSC_PROC_IO;
    snprintf(out, sizeof out, "%s/probe", dir);
    pid_t self = getpid();
    pid_t p = perf_start(&self, 1, out);
    uint64_t c[SK_SYSC_N] = {0};
    int ok = p > 0 && perf_stop(p, out, c) == 0 && c[SK_SYSC_ALL] > 0;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) { /* a temporary file left: harmless */
    }
    return ok ? SK_SYSC_PERF : SK_SYSC_PROC_IO;
}

int sk_bench_sysc_start(struct sk_bench_sysc *s, enum sk_bench_sysc_method m, pid_t root,
                        const char *dir, const char *tag)
{
    s->method = SK_SYSC_NONE;
    s->perf = 0;
    s->n_pids = root > 0 ? sk_bench_with_children(root, s->pids, 16) : 0;
    memset(s->count, 0, sizeof s->count);
    if (s->n_pids <= 0 || m == SK_SYSC_NONE) return -1;
    if (m == SK_SYSC_PERF) {
        snprintf(s->out, sizeof s->out, "%s/syscalls-%s.csv", dir, tag);
        s->perf = perf_start(s->pids, s->n_pids, s->out);
        if (s->perf > 0) {
            s->method = SK_SYSC_PERF;
            return 0;
        }
    }
    for (int i = 0; i < s->n_pids; i++)
        s->io0[i] = proc_io(s->pids[i]);
    s->method = SK_SYSC_PROC_IO;
    return 0;
}

int sk_bench_sysc_stop(struct sk_bench_sysc *s)
{
    if (s->method == SK_SYSC_PERF) {
        pid_t p = s->perf;
        s->perf = 0;
        if (perf_stop(p, s->out, s->count) == 0) return 0;
        s->method = SK_SYSC_NONE;
        return -1;
    }
    if (s->method != SK_SYSC_PROC_IO) return -1;
    for (int i = 0; i < s->n_pids; i++) {
        uint64_t now = proc_io(s->pids[i]);
        if (now > s->io0[i]) s->count[SK_SYSC_ALL] += now - s->io0[i];
    }
    return 0;
}
