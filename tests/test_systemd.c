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
 *     pass), and comes back when it runs again. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
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
