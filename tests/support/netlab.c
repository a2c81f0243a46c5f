/* netlab.c - hosts in network namespaces of the test's own (netlab.h). */
#include "support/netlab.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/harness.h"

/* A process holding a fresh network namespace: it makes it, says so on
 * the pipe, and waits to die with the test. */
static pid_t holder(int *fd_out)
{
    int p[2];
    CHECK_EQ(pipe(p), 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        char ok = unshare(CLONE_NEWNET) == 0 ? 'y' : 'n';
        if (write(p[1], &ok, 1) != 1) _exit(1);
        close(p[1]);
        for (;;)
            pause();
    }
    close(p[1]);
    char ok = 0;
    ssize_t n = read(p[0], &ok, 1);
    close(p[0]);
    CHECK_MSG(n == 1 && ok == 'y', "cannot make a network namespace (unshare: not root?)");
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/net", (int)pid);
    *fd_out = open(path, O_RDONLY | O_CLOEXEC);
    CHECK_MSG(*fd_out >= 0, "open %s: %s", path, strerror(errno));
    return pid;
}

static int ns_fd(const struct sk_th_netlab *l, int i)
{
    return i == -2 ? l->bridge_fd : i == -1 ? l->home_fd : l->host[i].fd;
}

/* The program's path on PATH, found before a fork (the child of a threaded
 * process runs nothing but async-signal-safe calls and execv). */
static int find(const char *prog, char *path, size_t cap)
{
    if (strchr(prog, '/')) {
        snprintf(path, cap, "%s", prog);
        return 0;
    }
    const char *dirs[] = {"/usr/sbin", "/sbin", "/usr/bin", "/bin"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        snprintf(path, cap, "%s/%s", dirs[i], prog);
        if (access(path, X_OK) == 0) return 0;
    }
    return -1;
}

int sk_th_netlab_run(struct sk_th_netlab *l, int i, const char *const *argv, char *out, size_t cap)
{
    char prog[128];
    if (find(argv[0], prog, sizeof prog) < 0) return -1;
    int fd = ns_fd(l, i);
    int p[2];
    if (pipe(p) < 0) return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (pid == 0) {
        close(p[0]);
        dup2(p[1], 1);
        dup2(p[1], 2);
        if (setns(fd, CLONE_NEWNET) < 0) _exit(126);
        execv(prog, (char *const *)argv);
        _exit(127);
    }
    close(p[1]);
    size_t got = 0;
    char sink[256];
    for (;;) {
        char *dst = out && got + 1 < cap ? out + got : sink;
        size_t room = out && got + 1 < cap ? cap - 1 - got : sizeof sink;
        ssize_t n = read(p[0], dst, room);
        if (n <= 0) break;
        if (dst != sink) got += (size_t)n;
    }
    if (out && cap) out[got] = 0;
    close(p[0]);
    int st;
    if (waitpid(pid, &st, 0) < 0) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A command that must succeed (the lab is broken otherwise). */
static void must(struct sk_th_netlab *l, int i, const char *const *argv)
{
    char out[512];
    int rc = sk_th_netlab_run(l, i, argv, out, sizeof out);
    if (rc != 0) {
        char line[256] = "";
        for (int k = 0; argv[k] && strlen(line) < 200; k++)
            snprintf(line + strlen(line), sizeof line - strlen(line), "%s ", argv[k]);
        sk_th_fail(__FILE__, __LINE__, "netlab: `%s` exited %d: %s", line, rc, out);
    }
}

/* 1 when prog is there. */
static int have(const char *prog)
{
    char path[128];
    return find(prog, path, sizeof path) == 0;
}

int sk_th_netlab_possible(char *why, size_t cap)
{
    if (geteuid() != 0) {
        snprintf(why, cap, "not root (network namespaces and nft rules need it)");
        return 0;
    }
    if (!have("ip") || !have("nft")) {
        snprintf(why, cap, "`ip` or `nft` missing (iproute2, nftables: scripts/deps.sh)");
        return 0;
    }
    return 1;
}

void sk_th_netlab_start(struct sk_th_netlab *l, const char *const *names, int n)
{
    memset(l, 0, sizeof *l);
    CHECK(n >= 1 && n <= SK_TH_NETLAB_MAX);
    l->home_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    CHECK(l->home_fd >= 0);
    l->bridge = holder(&l->bridge_fd);
    must(l, -2, (const char *const[]){"ip", "link", "set", "lo", "up", NULL});
    must(l, -2, (const char *const[]){"ip", "link", "add", "br0", "type", "bridge", NULL});
    must(l, -2, (const char *const[]){"ip", "link", "set", "br0", "up", NULL});
    for (int i = 0; i < n; i++) {
        struct sk_th_netlab_host *h = &l->host[i];
        snprintf(h->name, sizeof h->name, "%s", names[i]);
        snprintf(h->addr, sizeof h->addr, "10.77.0.%d", i + 1);
        h->holder = holder(&h->fd);
        l->n = i + 1;
        char port[16], pid[16], cidr[24];
        snprintf(port, sizeof port, "h%d", i);
        snprintf(pid, sizeof pid, "%d", (int)h->holder);
        snprintf(cidr, sizeof cidr, "%s/24", h->addr);
        must(l, -2,
             (const char *const[]){"ip", "link", "add", port, "type", "veth", "peer", "name",
                                   "eth0", "netns", pid, NULL});
        must(l, -2, (const char *const[]){"ip", "link", "set", port, "master", "br0", NULL});
        must(l, -2, (const char *const[]){"ip", "link", "set", port, "up", NULL});
        must(l, i, (const char *const[]){"ip", "link", "set", "lo", "up", NULL});
        must(l, i, (const char *const[]){"ip", "addr", "add", cidr, "dev", "eth0", NULL});
        must(l, i, (const char *const[]){"ip", "link", "set", "eth0", "up", NULL});
    }
}

void sk_th_netlab_enter(struct sk_th_netlab *l, int i)
{
    CHECK_MSG(setns(ns_fd(l, i), CLONE_NEWNET) == 0, "setns into %s: %s",
              i >= 0 ? l->host[i].name : "home", strerror(errno));
}

int sk_th_netlab_fd(const struct sk_th_netlab *l, int i)
{
    return ns_fd(l, i);
}

void sk_th_netlab_cut(struct sk_th_netlab *l, int i, const int *peers, int np)
{
    char set[SK_TH_NETLAB_MAX * 26] = "";
    for (int k = 0; k < np; k++)
        snprintf(set + strlen(set), sizeof set - strlen(set), "%s%s", k ? ", " : "",
                 l->host[peers[k]].addr);
    char rules[1024];
    snprintf(rules, sizeof rules,
             "add table inet sk_cut; "
             "add chain inet sk_cut in { type filter hook input priority 0; policy accept; }; "
             "add chain inet sk_cut out { type filter hook output priority 0; policy accept; }; "
             "add rule inet sk_cut in ip saddr { %s } drop; "
             "add rule inet sk_cut out ip daddr { %s } drop",
             set, set);
    sk_th_netlab_heal(l, i);
    must(l, i, (const char *const[]){"nft", rules, NULL});
}

void sk_th_netlab_heal(struct sk_th_netlab *l, int i)
{
    must(l, i, (const char *const[]){"nft", "flush", "ruleset", NULL});
}

void sk_th_netlab_stop(struct sk_th_netlab *l)
{
    if (l->home_fd > 0) setns(l->home_fd, CLONE_NEWNET);
    for (int i = 0; i < l->n; i++) {
        if (l->host[i].holder > 0) {
            kill(l->host[i].holder, SIGKILL);
            waitpid(l->host[i].holder, NULL, 0);
        }
        if (l->host[i].fd > 0) close(l->host[i].fd);
    }
    if (l->bridge > 0) {
        kill(l->bridge, SIGKILL);
        waitpid(l->bridge, NULL, 0);
    }
    if (l->bridge_fd > 0) close(l->bridge_fd);
    if (l->home_fd > 0) close(l->home_fd);
    memset(l, 0, sizeof *l);
}
