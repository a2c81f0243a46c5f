/* cluster_spawn.c - start and stop a private Redis Cluster of N masters
 * (see cluster_spawn.h). The process handling (fork with a parent-death
 * signal, reaping, removing the directory) is the same as redis_spawn.c's;
 * the port choice (20000-30000, bus port free too) and the readiness test
 * are the same as tests/cluster_harness.c's. */
#include "cluster_spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis.h>

#include "clock.h"
#include "error.h"
#include "redis_cluster.h"

#define SK_CSPAWN_MAX_EXTRA 32
#define SK_CSPAWN_PING_MS 10000
#define SK_CSPAWN_READY_MS 30000
#define SK_CSPAWN_STOP_MS 5000
/* A port that was free when probed can be taken before redis binds it. */
#define SK_CSPAWN_TRIES 5
#define SK_CSPAWN_PORT_LO 20000
#define SK_CSPAWN_PORT_SPAN 10000
#define SK_CSPAWN_BUS_OFFSET 10000

static int fail(struct sk_cluster_spawn *s, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct sk_cluster_spawn *s, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->errstr, sizeof s->errstr, fmt, ap);
    va_end(ap);
    return err;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)type;
    (void)ftw;
    return remove(path) < 0 && errno != ENOENT ? -1 : 0;
}

static int rm_tree(const char *dir)
{
    if (!dir[0]) return 0;
    return nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) < 0 && errno != ENOENT ? -1 : 0;
}

static void reap(pid_t pid, int ms)
{
    kill(pid, SIGTERM);
    kill(pid, SIGCONT); /* a SIGSTOPped server must still get to exit */
    for (int64_t end = sk_mono_ms() + ms; sk_mono_ms() < end; sleep_ms(10)) {
        pid_t w = waitpid(pid, NULL, WNOHANG);
        if (w == pid || (w < 0 && errno == ECHILD)) return;
    }
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
}

/* Last non-empty line of a file (a node's log or stderr): why it stopped. */
static void file_tail(const char *path, char *out, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        size_t n = strcspn(line, "\r\n");
        line[n] = 0;
        if (!n) continue;
        if (n >= cap) n = cap - 1; /* a hint, not data */
        memcpy(out, line, n);
        out[n] = 0;
    }
    fclose(f);
}

static int port_free(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 0;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

static uint64_t next_rand(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* A port in 20000-30000 whose bus port is free too, distinct from (and not
 * the bus port of) the ports already taken. */
static int pick_port(uint64_t *rng, const int *taken, int ntaken)
{
    for (int tries = 0; tries < 2000; tries++) {
        int p = SK_CSPAWN_PORT_LO + (int)(next_rand(rng) % SK_CSPAWN_PORT_SPAN);
        int dup = 0;
        for (int i = 0; i < ntaken; i++)
            dup |= taken[i] == p || taken[i] + SK_CSPAWN_BUS_OFFSET == p ||
                   taken[i] == p + SK_CSPAWN_BUS_OFFSET;
        if (!dup && port_free(p) && port_free(p + SK_CSPAWN_BUS_OFFSET)) return p;
    }
    return -1;
}

/* One command on the node at port, over a fresh connection; NULL on an
 * I/O error. Caller frees the reply. */
static redisReply *node_cmd(int port, int argc, const char **argv)
{
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (!c || c->err) {
        if (c) redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    redisReply *r = redisCommandArgv(c, argc, argv, NULL);
    redisFree(c);
    return r;
}

static int node_ok(int port, int argc, const char **argv, char *err, size_t cap)
{
    redisReply *r = node_cmd(port, argc, argv);
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (!ok)
        snprintf(err, cap, "%s %s on node %d: %s", argv[0], argc > 1 ? argv[1] : "", port,
                 r && r->str ? r->str : "no reply");
    if (r) freeReplyObject(r);
    return ok;
}

static int pings(int port)
{
    const char *argv[] = {"PING"};
    redisReply *r = node_cmd(port, 1, argv);
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    return ok;
}

/* The node sees a healthy cluster of n masters with every slot served. */
static int node_ready(int port, int n)
{
    const char *argv[] = {"CLUSTER", "INFO"};
    redisReply *r = node_cmd(port, 2, argv);
    char known[48];
    snprintf(known, sizeof known, "cluster_known_nodes:%d\r", n);
    int ok = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "cluster_state:ok") &&
             strstr(r->str, known) && strstr(r->str, "cluster_slots_ok:16384");
    if (r) freeReplyObject(r);
    return ok;
}

/* Forks redis-server for node i on s->port[i]. */
static int spawn_node(struct sk_cluster_spawn *s, int i, const char *const *extra, size_t nextra)
{
    char d[300], port[16], logpath[340], errpath[340];
    snprintf(d, sizeof d, "%.250s/n%d", s->dir, i);
    if (mkdir(d, 0700) < 0 && errno != EEXIST)
        return fail(s, SK_EIO, "mkdir %s: %s", d, strerror(errno));
    snprintf(port, sizeof port, "%d", s->port[i]);
    snprintf(logpath, sizeof logpath, "%s/redis.log", d);
    snprintf(errpath, sizeof errpath, "%s/redis.stderr", d);
    const char *argv[32 + SK_CSPAWN_MAX_EXTRA] = {"redis-server",
                                                  "--port",
                                                  port,
                                                  "--bind",
                                                  "127.0.0.1",
                                                  "--dir",
                                                  d,
                                                  "--save",
                                                  "",
                                                  "--appendonly",
                                                  "no",
                                                  "--cluster-enabled",
                                                  "yes",
                                                  "--cluster-config-file",
                                                  "nodes.conf",
                                                  "--cluster-node-timeout",
                                                  "5000",
                                                  "--logfile",
                                                  logpath,
                                                  "--daemonize",
                                                  "no"};
    size_t a = 21;
    for (size_t k = 0; k < nextra; k++)
        argv[a++] = extra[k];
    argv[a] = NULL;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) return fail(s, SK_EIO, "fork: %s", strerror(errno));
    if (pid == 0) {
        /* Only async-signal-safe calls until exec: the parent may have threads. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(1);
        int devnull = open("/dev/null", O_RDWR);
        int errfd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (devnull >= 0) {
            dup2(devnull, 0);
            dup2(devnull, 1);
        }
        if (errfd >= 0) dup2(errfd, 2);
        for (int fd = 3; fd < 1024; fd++)
            close(fd); /* no leaked sockets */
        execvp("redis-server", (char *const *)argv);
        _exit(127);
    }
    s->pid[i] = pid;
    return 0;
}

/* Waits until node i answers PING: 0, 1 when it exited because its port
 * was taken (try another), negative otherwise. */
static int wait_node(struct sk_cluster_spawn *s, int i)
{
    int64_t deadline = sk_mono_ms() + SK_CSPAWN_PING_MS;
    while (!pings(s->port[i])) {
        int st;
        if (waitpid(s->pid[i], &st, WNOHANG) == s->pid[i]) {
            s->pid[i] = 0;
            char path[340], tail[200] = "";
            snprintf(path, sizeof path, "%.250s/n%d/redis.stderr", s->dir, i);
            file_tail(path, tail, sizeof tail);
            snprintf(path, sizeof path, "%.250s/n%d/redis.log", s->dir, i);
            file_tail(path, tail, sizeof tail);
            if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
                return fail(s, SK_EIO, "cannot run redis-server (not on PATH?)");
            fail(s, SK_EIO, "redis-server (cluster node %d, port %d) exited at start: %s", i,
                 s->port[i], tail[0] ? tail : "no message");
            return strstr(tail, "in use") ? 1 : SK_EIO;
        }
        if (sk_mono_ms() > deadline) {
            reap(s->pid[i], SK_CSPAWN_STOP_MS);
            s->pid[i] = 0;
            return fail(s, SK_EIO, "cluster node %d (port %d) not answering PING after %d ms", i,
                        s->port[i], SK_CSPAWN_PING_MS);
        }
        sleep_ms(10);
    }
    return 0;
}

/* Slots, epochs, MEET, then wait for every node to see the whole cluster. */
static int form(struct sk_cluster_spawn *s)
{
    char err[200] = "";
    char *slots = malloc((size_t)SK_CLUSTER_SLOTS * 8);
    const char **argv = malloc(sizeof *argv * (SK_CLUSTER_SLOTS + 2));
    if (!slots || !argv) {
        free(slots);
        free(argv);
        return fail(s, SK_EIO, "out of memory");
    }
    int ok = 1;
    for (int i = 0; i < s->n && ok; i++) {
        int lo = SK_CLUSTER_SLOTS * i / s->n, hi = SK_CLUSTER_SLOTS * (i + 1) / s->n;
        argv[0] = "CLUSTER";
        argv[1] = "ADDSLOTS";
        int a = 2;
        for (int slot = lo; slot < hi; slot++) {
            char *p = slots + (size_t)(slot - lo) * 8;
            snprintf(p, 8, "%d", slot & 0x3fff);
            argv[a++] = p;
        }
        ok = node_ok(s->port[i], a, argv, err, sizeof err);
        /* distinct epochs, as redis-cli --cluster create gives: no
         * collision to resolve before the cluster is stable */
        char epoch[16];
        snprintf(epoch, sizeof epoch, "%d", i + 1);
        const char *ep[] = {"CLUSTER", "SET-CONFIG-EPOCH", epoch};
        if (ok) ok = node_ok(s->port[i], 3, ep, err, sizeof err);
    }
    for (int i = 1; i < s->n && ok; i++) {
        char port[16];
        snprintf(port, sizeof port, "%d", s->port[i]);
        const char *meet[] = {"CLUSTER", "MEET", "127.0.0.1", port};
        ok = node_ok(s->port[0], 4, meet, err, sizeof err);
    }
    free(slots);
    free(argv);
    if (!ok) return fail(s, SK_EIO, "cannot form the cluster: %s", err);
    int64_t deadline = sk_mono_ms() + SK_CSPAWN_READY_MS;
    for (int i = 0; i < s->n; i++)
        while (!node_ready(s->port[i], s->n)) {
            if (sk_mono_ms() > deadline)
                return fail(s, SK_EIO,
                            "cluster node %d (port %d) never reported cluster_state:ok with %d "
                            "nodes within %d ms",
                            i, s->port[i], s->n, SK_CSPAWN_READY_MS);
            sleep_ms(20);
        }
    return 0;
}

static void kill_nodes(struct sk_cluster_spawn *s)
{
    for (int i = 0; i < SK_CLUSTER_SPAWN_MAX; i++)
        if (s->pid[i] > 0) {
            reap(s->pid[i], SK_CSPAWN_STOP_MS);
            s->pid[i] = 0;
        }
}

int sk_cluster_spawn_start(struct sk_cluster_spawn *s, int n, const char *const *extra_args)
{
    memset(s, 0, sizeof *s);
    if (n < 1 || n > SK_CLUSTER_SPAWN_MAX)
        return fail(s, SK_EINVAL, "cluster of %d masters: 1..%d", n, SK_CLUSTER_SPAWN_MAX);
    size_t nextra = 0;
    while (extra_args && extra_args[nextra])
        nextra++;
    if (nextra > SK_CSPAWN_MAX_EXTRA) return fail(s, SK_EINVAL, "too many redis-server arguments");

    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp) tmp = "/tmp";
    int w = snprintf(s->dir, sizeof s->dir, "%s/seckill-cluster-XXXXXX", tmp);
    if (w < 0 || (size_t)w >= sizeof s->dir - 16) {
        s->dir[0] = 0;
        return fail(s, SK_EINVAL, "TMPDIR path too long");
    }
    if (!mkdtemp(s->dir)) {
        int e = errno;
        s->dir[0] = 0;
        return fail(s, SK_EIO, "mkdtemp under %s: %s", tmp, strerror(e));
    }
    s->n = n;
    uint64_t rng = (uint64_t)getpid() * 0x100000001b3ULL ^ (uint64_t)sk_mono_us();
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        rc = 1;
        for (int t = 0; t < SK_CSPAWN_TRIES && rc == 1; t++) {
            s->port[i] = pick_port(&rng, s->port, i);
            if (s->port[i] < 0) {
                rc = fail(s, SK_EIO, "no free port pair (P, P+10000) in 20000-30000");
                break;
            }
            rc = spawn_node(s, i, extra_args, nextra);
            if (rc == 0) rc = wait_node(s, i);
        }
        if (rc == 1) rc = SK_EIO; /* errstr set by the last try */
    }
    if (rc == 0) rc = form(s);
    if (rc != 0) {
        kill_nodes(s);
        rm_tree(s->dir);
        s->dir[0] = 0;
        s->n = 0;
        return rc;
    }
    int off = snprintf(s->url, sizeof s->url, "redis+cluster://");
    for (int i = 0; i < n; i++)
        off += snprintf(s->url + off, sizeof s->url - (size_t)off, "%s127.0.0.1:%d", i ? "," : "",
                        s->port[i]);
    return 0;
}

void sk_cluster_spawn_node_url(const struct sk_cluster_spawn *s, int i, char *out, size_t cap)
{
    snprintf(out, cap, "redis://127.0.0.1:%d", i >= 0 && i < s->n ? s->port[i] : 0);
}

int sk_cluster_spawn_stop(struct sk_cluster_spawn *s)
{
    kill_nodes(s);
    int rc = 0;
    if (s->dir[0] && rm_tree(s->dir) < 0)
        rc = fail(s, SK_EIO, "cannot remove %s: %s", s->dir, strerror(errno));
    s->dir[0] = 0;
    s->url[0] = 0;
    s->n = 0;
    return rc;
}
