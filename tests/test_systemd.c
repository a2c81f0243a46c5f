/* test_systemd.c - `seckill serve` under systemd's notification protocol,
 * with the test as systemd: its own NOTIFY_SOCKET (a datagram socket in
 * the test's directory) and WATCHDOG_USEC/WATCHDOG_PID in the server's
 * environment, as systemd sets them for Type=notify and WatchdogSec=.
 *
 *   - READY=1 never comes while Redis does not answer (a real Redis,
 *     SIGSTOPped: connections open, nothing answers); STATUS= says what
 *     the node waits for; READY=1 follows once Redis answers, and /readyz
 *     is 200 then; STOPPING=1 comes at SIGTERM, before the exit.
 *   - WATCHDOG=1 comes every half interval while the node runs, stops
 *     when an HTTP process's event loop hangs (SIGSTOP: the loop makes no
 *     pass), and comes back when it runs again.
 *   - the unit's sandbox: a whole sale, run as an unprivileged user under
 *     strace, makes no system call outside the unit's SystemCallFilter
 *     and reads no file of /proc but its own. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "support/harness.h"
#include "support/http_client.h"
#include "support/proc_watch.h"

struct notify_sock {
    int fd;
    char path[300];
};

static void notify_open(struct notify_sock *n)
{
    snprintf(n->path, sizeof n->path, "%s/notify.sock", sk_th_tmpdir());
    unlink(n->path);
    n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    CHECK(n->fd >= 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    CHECK(strlen(n->path) < sizeof sa.sun_path);
    memcpy(sa.sun_path, n->path, strlen(n->path) + 1); /* length checked above */
    CHECK_EQ(bind(n->fd, (struct sockaddr *)&sa, sizeof sa), 0);
}

/* The next datagram within ms into buf; 0 when none came. */
static int notify_recv(struct notify_sock *n, char *buf, size_t cap, int ms)
{
    struct pollfd p = {.fd = n->fd, .events = POLLIN};
    if (poll(&p, 1, ms) <= 0) return 0;
    ssize_t got = recv(n->fd, buf, cap - 1, 0);
    CHECK(got >= 0);
    buf[got] = 0;
    return 1;
}

/* `seckill serve` with the notification environment; its stderr to log. */
static pid_t serve_notified(const struct notify_sock *n, const char *watchdog_usec, int port,
                            const char *redis, const char *const *extra, char *log, size_t logcap)
{
    snprintf(log, logcap, "%s/serve-notify.log", sk_th_tmpdir());
    char listen[64], db[400];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    snprintf(db, sizeof db, "sqlite:%s/notify.db", sk_th_tmpdir());
    const char *argv[32] = {sk_th_seckill_bin(), "serve", "--listen", listen,
                            "--redis",           redis,   "--db",     db};
    int a = 8;
    for (int i = 0; extra && extra[i] && a < 30; i++)
        argv[a++] = extra[i];
    argv[a] = NULL;
    pid_t pid = sk_th_fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 2);
        int nul = open("/dev/null", O_RDWR);
        dup2(nul, 0);
        dup2(nul, 1);
        char pidtxt[32];
        snprintf(pidtxt, sizeof pidtxt, "%d", (int)getpid());
        setenv("NOTIFY_SOCKET", n->path, 1);
        if (watchdog_usec) {
            setenv("WATCHDOG_USEC", watchdog_usec, 1);
            setenv("WATCHDOG_PID", pidtxt, 1);
        }
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    return pid;
}

static int wait_exit(pid_t pid, int ms)
{
    int64_t deadline = sk_mono_ms() + ms;
    int st;
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        CHECK_MSG(sk_mono_ms() < deadline, "serve did not exit in %d ms", ms);
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

static int has_line(const char *msg, const char *line)
{
    size_t l = strlen(line);
    for (const char *p = msg; (p = strstr(p, line)) != NULL; p += l)
        if ((p == msg || p[-1] == '\n') && (p[l] == 0 || p[l] == '\n')) return 1;
    return 0;
}

SK_TEST_T(systemd_ready_only_once_redis_answers_then_stopping_at_sigterm, 120)
{
    struct sk_th_redis rs;
    sk_th_redis_start(&rs, NULL);
    CHECK_EQ(kill(rs.pid, SIGSTOP), 0); /* accepts connections, answers nothing */
    struct notify_sock n;
    notify_open(&n);
    int port = sk_th_free_port(), ops = sk_th_free_port();
    char opsaddr[64], log[400];
    snprintf(opsaddr, sizeof opsaddr, "127.0.0.1:%d", ops);
    const char *extra[] = {"--processes", "2", "--ops-listen", opsaddr, "--redis-timeout-ms",
                           "300",         NULL};
    pid_t pid = serve_notified(&n, NULL, port, rs.url, extra, log, sizeof log);
    char msg[4096];
    int waiting_seen = 0;
    int64_t deadline = sk_mono_ms() + 20000;
    while (!waiting_seen) {
        CHECK_MSG(sk_mono_ms() < deadline, "no STATUS= naming Redis while it is stopped");
        if (!notify_recv(&n, msg, sizeof msg, 200)) continue;
        CHECK_MSG(!has_line(msg, "READY=1"), "READY=1 while Redis answers nothing: %s", msg);
        if (strstr(msg, "STATUS=") && strstr(msg, "waiting for Redis") && strstr(msg, rs.url + 8))
            waiting_seen = 1;
    }
    /* a while longer: still no READY=1 while Redis is stopped */
    int64_t until = sk_mono_ms() + 1500;
    while (sk_mono_ms() < until)
        if (notify_recv(&n, msg, sizeof msg, 100))
            CHECK_MSG(!has_line(msg, "READY=1"), "READY=1 while Redis answers nothing");
    struct sk_th_http h;
    struct sk_th_resp r;
    sk_th_http_open(&h, ops);
    CHECK_EQ(sk_th_http_req(&h, "GET", "/readyz", NULL, NULL, &r), 503);
    sk_th_http_close(&h);

    CHECK_EQ(kill(rs.pid, SIGCONT), 0);
    int ready = 0, serving_status = 0;
    deadline = sk_mono_ms() + 20000;
    while (!ready) {
        CHECK_MSG(sk_mono_ms() < deadline, "no READY=1 after Redis answers again (log %s)", log);
        if (!notify_recv(&n, msg, sizeof msg, 200)) continue;
        if (strstr(msg, "STATUS=serving on ")) serving_status = 1;
        if (has_line(msg, "READY=1")) ready = 1;
    }
    CHECK_MSG(serving_status, "READY=1 came before the STATUS= that says the node serves");
    /* what READY=1 promised: every process answers ready */
    for (int i = 0; i < 10; i++) {
        sk_th_http_open(&h, ops);
        CHECK_EQ(sk_th_http_req(&h, "GET", "/readyz", NULL, NULL, &r), 200);
        sk_th_http_close(&h);
    }
    CHECK_EQ(kill(pid, SIGTERM), 0);
    int stopping = 0;
    deadline = sk_mono_ms() + 20000;
    while (!stopping) {
        CHECK_MSG(sk_mono_ms() < deadline, "no STOPPING=1 after SIGTERM");
        if (notify_recv(&n, msg, sizeof msg, 200) && has_line(msg, "STOPPING=1")) stopping = 1;
    }
    CHECK_EQ(wait_exit(pid, 20000), 0);
    close(n.fd);
    sk_th_redis_stop(&rs, 1);
}

/* Waits (bounded by ms) for a gap of at least gap_ms without WATCHDOG=1;
 * returns the number of pings seen meanwhile, or -1 when no gap came. */
static int watchdog_gap(struct notify_sock *n, int gap_ms, int ms)
{
    int64_t deadline = sk_mono_ms() + ms, last = sk_mono_ms();
    int pings = 0;
    char msg[4096];
    while (sk_mono_ms() < deadline) {
        if (sk_mono_ms() - last >= gap_ms) return pings;
        if (notify_recv(n, msg, sizeof msg, 50) && has_line(msg, "WATCHDOG=1")) {
            pings++;
            last = sk_mono_ms();
        }
    }
    return -1;
}

/* Counts WATCHDOG=1 pings within ms. */
static int watchdog_pings(struct notify_sock *n, int ms)
{
    int64_t deadline = sk_mono_ms() + ms;
    int pings = 0;
    char msg[4096];
    while (sk_mono_ms() < deadline)
        if (notify_recv(n, msg, sizeof msg, 50) && has_line(msg, "WATCHDOG=1")) pings++;
    return pings;
}

SK_TEST_T(systemd_watchdog_pings_stop_while_an_event_loop_hangs, 120)
{
    struct notify_sock n;
    notify_open(&n);
    int port = sk_th_free_port();
    char log[400], msg[4096];
    const char *extra[] = {"--role", "api", "--processes", "2", NULL};
    /* WatchdogSec=1: a ping every 500 ms */
    pid_t pid = serve_notified(&n, "1000000", port, sk_th_redis_url(), extra, log, sizeof log);
    int64_t deadline = sk_mono_ms() + 20000;
    for (int ready = 0; !ready;) {
        CHECK_MSG(sk_mono_ms() < deadline, "no READY=1 (log %s)", log);
        ready = notify_recv(&n, msg, sizeof msg, 200) && has_line(msg, "READY=1");
    }
    /* a running node: every half interval, give or take a supervisor pass */
    int pings = watchdog_pings(&n, 3000);
    CHECK_MSG(pings >= 4 && pings <= 8, "%d pings in 3 s with WATCHDOG_USEC=1000000", pings);
    pid_t kids[8];
    int k = sk_th_proc_children(pid, NULL, kids, 8);
    CHECK_EQ(k, 2);
    CHECK_EQ(kill(kids[1], SIGSTOP), 0); /* its event loop makes no more passes */
    /* a hung process is one silent for 3 s: the pings stop */
    CHECK_MSG(watchdog_gap(&n, 2500, 10000) >= 0, "WATCHDOG=1 went on while a loop hung");
    CHECK_EQ(kill(kids[1], SIGCONT), 0);
    pings = watchdog_pings(&n, 2000);
    CHECK_MSG(pings >= 2, "%d pings in 2 s after the loop runs again", pings);
    CHECK_EQ(kill(pid, SIGTERM), 0);
    CHECK_EQ(wait_exit(pid, 20000), 0);
    FILE *f = fopen(log, "r");
    static char text[65536];
    size_t got = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[got] = 0;
    if (f) fclose(f);
    char want[96];
    snprintf(want, sizeof want, "watchdog: process %d has shown no sign of life", (int)kids[1]);
    CHECK_MSG(strstr(text, want) != NULL, "the log does not name the hung process:\n%s", text);
    close(n.fd);
}

/* ---- the unit's sandbox ------------------------------------------------ */

/* A set of system call names (small: a few hundred). */
struct names {
    char (*v)[40];
    size_t n, cap;
};

static int names_has(const struct names *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->v[i], name)) return 1;
    return 0;
}

static void names_add(struct names *s, const char *name)
{
    if (names_has(s, name) || strlen(name) >= sizeof s->v[0]) return;
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 256;
        s->v = realloc(s->v, s->cap * sizeof s->v[0]);
        CHECK(s->v != NULL);
    }
    snprintf(s->v[s->n++], sizeof s->v[0], "%s", name);
}

static void names_del(struct names *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->v[i], name)) {
            memcpy(s->v[i], s->v[--s->n], sizeof s->v[i]);
            return;
        }
}

/* Adds (add = 1) or removes the system calls of a filter entry: a name,
 * or a @group of systemd-analyze's table (groups holds its output), whose
 * entries may be groups themselves. */
static void filter_entry(struct names *s, const char *groups, const char *entry, int add, int depth)
{
    CHECK(depth < 8);
    if (entry[0] != '@') {
        if (add)
            names_add(s, entry);
        else
            names_del(s, entry);
        return;
    }
    char head[64];
    snprintf(head, sizeof head, "\n%s\n", entry);
    const char *p = strstr(groups, head);
    CHECK_MSG(p != NULL, "systemd-analyze knows no group %s", entry);
    for (p += strlen(head); *p == ' ';) { /* its entries: indented lines */
        const char *e = strchr(p, '\n');
        if (!e) break;
        char name[64];
        if (sscanf(p, " %63s", name) == 1 && name[0] != '#')
            filter_entry(s, groups, name, add, depth + 1);
        p = e + 1;
    }
}

/* The system calls the installed unit's SystemCallFilter= lines allow: an
 * allow list, then the "~" lines taken out of it. */
static void unit_filter(struct names *allowed)
{
    static char groups[1 << 18], unit[1 << 16];
    char cmd[600];
    groups[0] = '\n';
    sk_th_sh("systemd-analyze syscall-filter 2>/dev/null", groups + 1, sizeof groups - 1);
    snprintf(cmd, sizeof cmd, "grep '^SystemCallFilter=' %s/contrib/systemd/seckill.service.in",
             sk_th_source_root());
    CHECK_EQ(sk_th_sh(cmd, unit, sizeof unit), 0);
    for (char *line = strtok(unit, "\n"); line; line = strtok(NULL, "\n")) {
        char *v = line + strlen("SystemCallFilter=");
        int add = *v != '~';
        if (!add) v++;
        char entries[512];
        snprintf(entries, sizeof entries, "%s", v);
        char *save = NULL;
        for (char *e = strtok_r(entries, " ", &save); e; e = strtok_r(NULL, " ", &save))
            filter_entry(allowed, groups, e, add, 0);
    }
    CHECK_MSG(allowed->n > 100 && names_has(allowed, "epoll_wait"), "%zu calls allowed",
              allowed->n);
}

static int healthz_ok(int port)
{
    struct sk_th_http h = {.fd = -1};
    struct sk_th_resp *r = sk_th_resp_new();
    int ok = sk_th_http_try_open(&h, port) == 0 &&
             sk_th_http_req(&h, "GET", "/healthz", NULL, NULL, r) == 200;
    if (h.fd >= 0) sk_th_http_close(&h);
    free(r);
    return ok;
}

/* A whole sale under strace, as the unit's user would run it (not root:
 * strace -u nobody) with two HTTP processes and the worker process: every
 * system call any of them made is in the unit's SystemCallFilter (with
 * SystemCallErrorNumber=EPERM a missing one would fail a call mid-sale),
 * and no file of /proc is opened but a process's own (ProcSubset=pid,
 * ProtectProc=invisible hide the rest). systemd itself is not the machine's
 * init here, so the filter is checked against the calls, not applied. */
SK_TEST_T(systemd_filter_allows_every_system_call_a_sale_makes, 240)
{
    struct names allowed = {0};
    unit_filter(&allowed);
    char dir[400], trace[500], db[500], listen[64], log[500], cmd[1500];
    snprintf(dir, sizeof dir, "%s/sandbox", sk_th_tmpdir());
    CHECK_EQ(mkdir(dir, 0777), 0);
    CHECK_EQ(chmod(dir, 0777), 0); /* nobody writes the database here */
    snprintf(trace, sizeof trace, "%s/trace", sk_th_tmpdir());
    snprintf(db, sizeof db, "sqlite:%s/sale.db", dir);
    snprintf(log, sizeof log, "%s/serve.log", sk_th_tmpdir());
    int port = sk_th_free_port();
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    const char *argv[] = {"strace",
                          "-f",
                          "-qq",
                          "-u",
                          "nobody",
                          "-o",
                          trace,
                          sk_th_seckill_bin(),
                          "serve",
                          "--listen",
                          listen,
                          "--redis",
                          sk_th_redis_url(),
                          "--db",
                          db,
                          "--processes",
                          "2",
                          "--admin-token",
                          SK_TH_ADMIN_TOKEN,
                          NULL};
    pid_t st = sk_th_fork();
    if (st == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 2);
        dup2(fd, 1);
        /* a sanitized build: LeakSanitizer cannot run under ptrace */
        char asan[512];
        snprintf(asan, sizeof asan, "%s%sdetect_leaks=0",
                 getenv("ASAN_OPTIONS") ? getenv("ASAN_OPTIONS") : "",
                 getenv("ASAN_OPTIONS") ? ":" : "");
        setenv("ASAN_OPTIONS", asan, 1);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    int64_t deadline = sk_mono_ms() + 60000;
    while (!healthz_ok(port)) {
        CHECK_MSG(sk_mono_ms() < deadline, "serve under strace did not start (log %s)", log);
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    pid_t serve = 0;
    CHECK_EQ(sk_th_proc_children(st, NULL, &serve, 1), 1);
    /* a sale: admin calls, purchases, an order read, pay and cancel, the
     * dashboard and metrics, a reload */
    uint64_t aid = sk_th_unique_id();
    char body[400], path[200], out[16384], url[64], a[32];
    struct sk_th_http h;
    struct sk_th_resp *r = sk_th_resp_new();
    sk_th_http_open(&h, port);
    snprintf(body, sizeof body,
             "{\"id\":%" PRIu64 ",\"name\":\"sandbox\",\"stock\":50,\"per_user_limit\":1,"
             "\"start\":\"2020-01-01T00:00:00Z\",\"end\":\"2099-01-01T00:00:00Z\"}",
             aid);
    static const char admin[] = "Authorization: Bearer " SK_TH_ADMIN_TOKEN "\r\n";
    CHECK_EQ(sk_th_http_req(&h, "POST", "/api/v1/activities", admin, body, r), 201);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/preheat", aid);
    CHECK_EQ(sk_th_http_req(&h, "POST", path, admin, "{}", r), 200);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/open", aid);
    CHECK_EQ(sk_th_http_req(&h, "POST", path, admin, NULL, r), 200);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    snprintf(a, sizeof a, "%" PRIu64, aid);
    const char *load[] = {"load", "--url",      url,   "--activity", a,     "--connections",
                          "4",    "--requests", "200", "--users",    "100", "--expect-stock",
                          "50",   "--limit",    "1",   "--quiet",    NULL};
    CHECK_MSG(sk_th_run_seckill(out, sizeof out, NULL, load) == 0, "%s", out);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", aid);
    CHECK_EQ(sk_th_http_req(&h, "POST", path, "X-User-Id: 999001\r\n", NULL, r), 409);
    /* (the metrics and the dashboard are larger than the client's buffer) */
    snprintf(path, sizeof path, "/sale/%" PRIu64, aid);
    const char *const big[] = {"/metrics", "/dashboard.json", "/", path};
    static char raw[1 << 19];
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        char rq[200];
        int rl = snprintf(rq, sizeof rq, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                          big[i]);
        size_t got = sk_th_http_raw(port, rq, (size_t)rl, raw, sizeof raw, 10000);
        CHECK_MSG(sk_th_http_status(raw, got) == 200, "%s: %.200s", big[i], raw);
    }
    CHECK_EQ(kill(serve, SIGHUP), 0);
    sk_th_http_close(&h);
    free(r);
    CHECK_EQ(kill(serve, SIGTERM), 0);
    CHECK_EQ(wait_exit(st, 60000), 0);

    /* every call by name (an interrupted one resumes under its name) */
    snprintf(cmd, sizeof cmd,
             "sed -E -e 's/^[0-9]+ +//' -e '/^(---|\\+\\+\\+)/d' -e 's/^<\\.\\.\\. ([a-z0-9_]+) "
             "resumed>.*/\\1/' -e 's/\\(.*//' %s | sort -u",
             trace);
    static char calls[1 << 16];
    CHECK_EQ(sk_th_sh(cmd, calls, sizeof calls), 0);
    char denied[2048] = "";
    int n = 0;
    for (char *c = strtok(calls, "\n"); c; c = strtok(NULL, "\n"), n++)
        if (!names_has(&allowed, c))
            snprintf(denied + strlen(denied), sizeof denied - strlen(denied), " %s", c);
    CHECK_MSG(n > 30, "only %d distinct calls in %s", n, trace);
    CHECK_MSG(!denied[0], "calls outside the unit's SystemCallFilter:%s (trace %s)", denied, trace);
    /* /proc: a process's own entries only, and the one file glibc reads
     * when a thread's heap shrinks (malloc_trim after a reconcile pass);
     * under the unit's ProcSubset=pid it is absent and glibc does without */
    snprintf(cmd, sizeof cmd,
             "grep -oE 'open(at)?\\([^\"]*\"/proc/[^\"]*\"' %s | grep -oE '\"/proc/[^\"]*\"' | "
             "grep -vE '^\"/proc/(self|thread-self)(/|\")' | "
             "grep -vx '\"/proc/sys/vm/overcommit_memory\"' | sort -u",
             trace);
    static char procs[8192];
    sk_th_sh(cmd, procs, sizeof procs);
    CHECK_MSG(!procs[0], "files of /proc outside the process's own: %s", procs);
    free(allowed.v);
}
