/* test_serve_supervisor.c - `seckill serve`'s process supervisor: with
 * --processes 2 (and the order worker of --role all), a process killed
 * with SIGKILL is replaced and the service keeps answering; SIGTERM stops
 * every process and the supervisor exits 0; a process dying of a fault
 * logs its stack first (core/crash.h). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "support/harness.h"
#include "support/http_client.h"
#include "support/proc_watch.h"

static int has(const pid_t *v, int n, pid_t x)
{
    for (int i = 0; i < n; i++)
        if (v[i] == x) return 1;
    return 0;
}

SK_TEST(serve_replaces_a_killed_process_and_keeps_answering)
{
    struct sk_th_serve s;
    const char *extra[] = {"--processes", "2", NULL};
    sk_th_serve_start(&s, sk_th_redis_url(), extra);
    pid_t before[8];
    int n = 0;
    int64_t deadline = sk_mono_ms() + 5000;
    while ((n = sk_th_proc_children(s.pid, NULL, before, 8)) < 3) { /* 2 HTTP + 1 order worker */
        CHECK_MSG(sk_mono_ms() < deadline, "only %d children", n);
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    CHECK_EQ(n, 3);
    for (int victim = 0; victim < 3; victim++) {
        kill(before[victim], SIGKILL);
        pid_t now[8];
        int m;
        deadline = sk_mono_ms() + 5000;
        for (;;) { /* a new process takes the dead one's place */
            m = sk_th_proc_children(s.pid, NULL, now, 8);
            if (m == 3 && !has(now, m, before[victim])) break;
            CHECK_MSG(sk_mono_ms() < deadline, "no replacement for %d", (int)before[victim]);
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        memcpy(before, now, sizeof now);
        /* the port still answers, on fresh connections (either process) */
        for (int i = 0; i < 20; i++) {
            struct sk_th_http c;
            struct sk_th_resp r;
            sk_th_http_open(&c, s.port);
            CHECK_EQ(sk_th_http_req(&c, "GET", "/healthz", NULL, NULL, &r), 200);
            sk_th_http_close(&c);
        }
    }
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
    char log[4096] = "";
    FILE *f = fopen(s.log, "r");
    CHECK(f != NULL);
    size_t got = fread(log, 1, sizeof log - 1, f);
    log[got] = 0;
    fclose(f);
    CHECK_MSG(strstr(log, "restarting") != NULL, "%s", log);
}

/* A stop that arrives while a process is still starting (here: the order
 * worker the supervisor just put in place of a killed one, while it opens
 * its store and Redis connections) is graceful: the supervisor exits 0.
 * The stop signals are held from fork until the child's handler exists. */
SK_TEST(serve_stopped_while_a_process_starts_exits_cleanly)
{
    for (int round = 0; round < 3; round++) {
        struct sk_th_serve s;
        sk_th_serve_start(&s, sk_th_redis_url(), NULL);
        pid_t before[8], now[8];
        int n = 0, m = 0;
        int64_t deadline = sk_mono_ms() + 5000;
        while ((n = sk_th_proc_children(s.pid, NULL, before, 8)) <
               2) { /* 1 HTTP + 1 order worker */
            CHECK_MSG(sk_mono_ms() < deadline, "only %d children", n);
            struct timespec ts = {0, 5 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        pid_t victim = before[n - 1]; /* the worker is forked last */
        kill(victim, SIGKILL);
        deadline = sk_mono_ms() + 5000;
        for (;;) { /* the replacement exists: stop the node at once */
            m = sk_th_proc_children(s.pid, NULL, now, 8);
            int fresh = 0;
            for (int i = 0; i < m; i++)
                if (!has(before, n, now[i])) fresh = 1;
            if (fresh) break;
            CHECK_MSG(sk_mono_ms() < deadline, "no replacement for %d", (int)victim);
        }
        CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
    }
}

/* A process that dies of a fault writes its stack to the log first (so a
 * crash the nemesis meets once can be read afterwards), then dies of that
 * signal: the supervisor sees SIGSEGV, as without the handler, and puts
 * another in its place. The fault is sent with kill(2): the same handler
 * runs for a real one. Under the sanitizers their own report replaces the
 * stack and the process exits 1, so the test checks only the supervisor's
 * line there. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SK_FAULT_DEATH "died (exit 1)" /* the sanitizer reports, then exits */
#else
#define SK_FAULT_DEATH "died (signal 11)"
#endif
SK_TEST(serve_process_dying_of_a_fault_logs_its_stack_and_is_replaced)
{
    struct sk_th_serve s;
    const char *extra[] = {"--role", "api", "--processes", "2", NULL};
    sk_th_serve_start(&s, sk_th_redis_url(), extra);
    pid_t kids[8];
    int n;
    int64_t deadline = sk_mono_ms() + 5000;
    while ((n = sk_th_proc_children(s.pid, NULL, kids, 8)) < 2) {
        CHECK_MSG(sk_mono_ms() < deadline, "only %d children", n);
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    CHECK_EQ(kill(kids[0], SIGSEGV), 0);
    char log[16384] = "";
    deadline = sk_mono_ms() + 5000;
    for (;;) {
        FILE *f = fopen(s.log, "r");
        CHECK(f != NULL);
        size_t got = fread(log, 1, sizeof log - 1, f);
        log[got] = 0;
        fclose(f);
        if (strstr(log, SK_FAULT_DEATH)) break;
        CHECK_MSG(sk_mono_ms() < deadline, "no death seen: %s", log);
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    CHECK_MSG(strstr(log, "fatal signal; the stack") != NULL, "%s", log);
    CHECK_MSG(strstr(log, "seckill(") != NULL, "no frame of the binary: %s", log);
#endif
    /* replaced, and the port answers */
    struct sk_th_http c;
    struct sk_th_resp r;
    deadline = sk_mono_ms() + 5000;
    while (sk_th_proc_children(s.pid, NULL, kids, 8) < 2) {
        CHECK_MSG(sk_mono_ms() < deadline, "not replaced");
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    sk_th_http_open(&c, s.port);
    CHECK_EQ(sk_th_http_req(&c, "GET", "/healthz", NULL, NULL, &r), 200);
    sk_th_http_close(&c);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
}
