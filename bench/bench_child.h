/* bench_child.h - what the HTTP benchmarks (bench_http.c,
 * bench_http_mixed.c) share: child processes that die with the benchmark
 * (serve, nginx, wrk) and a blocking one-shot HTTP client for set-up
 * calls. */
#ifndef SK_BENCH_CHILD_H
#define SK_BENCH_CHILD_H
#include <stdatomic.h>
#include <stddef.h>
#include <sys/types.h>

/* A child process and the port it serves on (0: none). */
struct sk_bench_child {
    pid_t pid;
    int port;
};

/* fork + exec argv (argv[0] a path) with stdout and stderr appended to
 * log; the child dies with the calling thread (PR_SET_PDEATHSIG). Returns
 * its pid, or -1. */
pid_t sk_bench_spawn(char *const *argv, const char *log);

/* SIGTERM, wait at most 10 s, then SIGKILL; always reaps; c->pid 0 after.
 * A zero pid is fine. */
void sk_bench_child_stop(struct sk_bench_child *c);

/* Waits until GET path on c->port answers 200 (at most 15 s, or until
 * *interrupted is set). 0, or -1 when the child exited (c->pid 0 then),
 * timed out or was interrupted. */
int sk_bench_child_wait_ready(struct sk_bench_child *c, const char *path,
                              const atomic_int *interrupted);

/* Sends one request to 127.0.0.1:port on a fresh connection and reads the
 * answer (5 s limit); headers: "Name: value\r\n" lines or NULL; body may
 * be NULL. Returns the status (> 0) or -1; the answer's body goes to out
 * (cap bytes, terminated). */
int sk_bench_http_call(int port, const char *method, const char *path, const char *headers,
                       const char *body, char *out, size_t cap);
/* The same, and *body_len (may be NULL) gets the whole body's length (out
 * holds at most cap-1 bytes of it; out may be NULL when cap is 0). */
int sk_bench_http_fetch(int port, const char *method, const char *path, const char *headers,
                        const char *body, char *out, size_t cap, size_t *body_len);

#endif
