/* bench_child.c - child processes and set-up HTTP calls of the HTTP
 * benchmarks (bench_child.h). */
#include "bench/bench_child.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/http_resp.h"

#define READY_MS 15000
#define STOP_MS 10000

int sk_bench_http_call(int port, const char *method, const char *path, const char *headers,
                       const char *body, char *out, size_t cap)
{
    return sk_bench_http_fetch(port, method, path, headers, body, out, cap, NULL);
}

int sk_bench_http_fetch(int port, const char *method, const char *path, const char *headers,
                        const char *body, char *out, size_t cap, size_t *body_len)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return -1;
    }
    char req[2048];
    size_t bl = body ? strlen(body) : 0;
    int n = snprintf(req, sizeof req,
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%sContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                     method, path, port, headers ? headers : "", bl, body ? body : "");
    if (n < 0 || (size_t)n >= sizeof req || send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
        close(fd);
        return -1;
    }
    /* a whole /metrics page fits: the parser's own limits */
    static _Thread_local char buf[SK_HTTP_RESP_MAX_HEAD + SK_HTTP_RESP_MAX_BODY];
    size_t len = 0;
    int status = -1;
    for (;;) {
        ssize_t got = recv(fd, buf + len, sizeof buf - 1 - len, 0);
        if (got < 0 && errno == EINTR) continue;
        int eof = got <= 0;
        if (got > 0) len += (size_t)got;
        struct sk_http_resp r;
        int rc = sk_http_resp_parse(buf, len, eof, !strcmp(method, "HEAD"), &r);
        if (rc == 1) {
            status = r.status;
            if (cap) snprintf(out, cap, "%.*s", (int)r.body_len, r.body);
            if (body_len) *body_len = r.body_len;
            break;
        }
        if (rc < 0 || eof || len == sizeof buf - 1) break;
    }
    close(fd);
    return status;
}

pid_t sk_bench_spawn(char *const *argv, const char *log)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid != 0) return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
    }
    if (devnull >= 0) dup2(devnull, 0);
    /* the parent ignores or catches these; the child starts clean */
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    execvp(argv[0], argv); /* a path, or seckill from PATH */
    _exit(127);
}

void sk_bench_child_stop(struct sk_bench_child *c)
{
    if (c->pid <= 0) return;
    kill(c->pid, SIGTERM);
    int64_t deadline = sk_mono_ms() + STOP_MS;
    for (;;) {
        pid_t r = waitpid(c->pid, NULL, WNOHANG);
        if (r == c->pid || (r < 0 && errno != EINTR)) break;
        if (sk_mono_ms() > deadline) {
            kill(c->pid, SIGKILL);
            waitpid(c->pid, NULL, 0);
            break;
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    c->pid = 0;
}

int sk_bench_child_wait_ready(struct sk_bench_child *c, const char *path,
                              const atomic_int *interrupted)
{
    int64_t deadline = sk_mono_ms() + READY_MS;
    while (!atomic_load(interrupted)) {
        char body[256];
        if (sk_bench_http_call(c->port, "GET", path, NULL, NULL, body, sizeof body) == 200)
            return 0;
        if (waitpid(c->pid, NULL, WNOHANG) == c->pid) {
            c->pid = 0;
            return -1;
        }
        if (sk_mono_ms() > deadline) return -1;
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return -1;
}
