/* harness.h - the one test runner and its throwaway servers.
 *
 * SK_TEST(name) registers a test; the runner forks one child per test so a
 * crash fails that test only, prints "ok"/"not ok" per test and a closing
 * "N passed, N failed" line, and exits non-zero on any failure. A test that
 * runs past its timeout is killed with everything it started (its process
 * group) and fails. `-j N` runs N at once; `--unit` runs tests/unit/ only,
 * without starting any server.
 * A private redis-server (free port, temporary directory) is started once
 * for the whole run; its URL is sk_th_redis_url(). Tests that must break a
 * server start their own with sk_th_redis_start. Every spawned server dies
 * with the process that started it (PR_SET_PDEATHSIG), even on a crash.
 * The runner sets SECKILL_CONFIG=/dev/null (unless set): the seckill
 * processes of a test read no config file but the one the test names. */
#ifndef SK_HARNESS_H
#define SK_HARNESS_H
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

typedef void (*sk_test_fn)(void);
void sk_test_register(const char *name, sk_test_fn fn, const char *file, int timeout_s);

/* SK_TEST_T(name, seconds): a test that needs longer than the run's
 * per-test timeout (--timeout, default 300 s). */
#define SK_TEST_T(name, timeout_s)                                                                 \
    static void name(void);                                                                        \
    __attribute__((constructor)) static void sk_reg_##name(void)                                   \
    {                                                                                              \
        sk_test_register(#name, name, __FILE__, timeout_s);                                        \
    }                                                                                              \
    static void name(void)
#define SK_TEST(name) SK_TEST_T(name, 0)

/* SK_TEST_ON_REQUEST(name): a test the run skips unless asked for by name
 * (the filter is a prefix of its name): the nemesis (`make chaos`), minutes
 * long, is not part of `make test`. */
void sk_test_register_on_request(const char *name, sk_test_fn fn, const char *file);
#define SK_TEST_ON_REQUEST(name)                                                                   \
    static void name(void);                                                                        \
    __attribute__((constructor)) static void sk_reg_##name(void)                                   \
    {                                                                                              \
        sk_test_register_on_request(#name, name, __FILE__);                                        \
    }                                                                                              \
    static void name(void)

/* Prints a failure of the running test (where and why) without ending
 * it: a test that lists every bad input before it fails. */
void sk_th_report(const char *file, int line, const char *fmt, va_list ap);
/* fn(arg) runs when this test fails (sk_th_fail, before the test's
 * process exits): for what the runner's kill of the test's process group
 * cannot undo, e.g. a frozen server's children that left the group.
 * sk_th_at_fail_cancel takes it back (same fn and arg). At most 16. */
void sk_th_at_fail(void (*fn)(void *), void *arg);
void sk_th_at_fail_cancel(void (*fn)(void *), void *arg);
/* Fails the running test (prints where and why, exits the test's child). */
void sk_th_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) sk_th_fail(__FILE__, __LINE__, "CHECK(%s)", #cond);                           \
    } while (0)
#define CHECK_MSG(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond)) sk_th_fail(__FILE__, __LINE__, __VA_ARGS__);                                  \
    } while (0)
#define CHECK_EQ(a, b)                                                                             \
    do {                                                                                           \
        long long sk_a_ = (long long)(a), sk_b_ = (long long)(b);                                  \
        if (sk_a_ != sk_b_)                                                                        \
            sk_th_fail(__FILE__, __LINE__, "CHECK_EQ(%s, %s): %lld != %lld", #a, #b, sk_a_,        \
                       sk_b_);                                                                     \
    } while (0)
#define CHECK_STR(a, b)                                                                            \
    do {                                                                                           \
        const char *sk_a_ = (a), *sk_b_ = (b);                                                     \
        if (!sk_a_ || !sk_b_ || strcmp(sk_a_, sk_b_) != 0)                                         \
            sk_th_fail(__FILE__, __LINE__, "CHECK_STR(%s, %s): \"%s\" != \"%s\"", #a, #b,          \
                       sk_a_ ? sk_a_ : "(null)", sk_b_ ? sk_b_ : "(null)");                        \
    } while (0)

/* A private redis-server (started by spawn/redis_spawn.c). A test
 * may signal pid itself (SIGSTOP, or SIGKILL and waitpid, then pid = 0). */
struct sk_th_redis {
    pid_t pid;
    int port;
    char dir[256];
    char url[128];
    char unix_url[160]; /* redis+unix:// of its socket ("" when the path was too long) */
};

/* Starts redis-server on a free port in a fresh temporary directory, with
 * extra "--name value" arguments (NULL-terminated list, may be NULL), and
 * waits until it answers PING (LOADING: not yet). Fails the test when it
 * cannot. */
void sk_th_redis_start(struct sk_th_redis *s, const char *const *extra);
/* A master (diskless sync without delay) and one replica of it, started
 * (not yet waited for in sync). */
void sk_th_redis_start_pair(struct sk_th_redis *master, struct sk_th_redis *replica);
/* SIGKILL (hard) or SIGTERM and a bounded wait; the port and the directory
 * (with any AOF/RDB files) stay for sk_th_redis_restart, and the directory
 * goes with the runner's temporary root. */
void sk_th_redis_stop(struct sk_th_redis *s, int hard);
/* Restarts on the same port and directory (keeps AOF/RDB files), stopping
 * a running one gracefully first, and waits until it has loaded them. */
void sk_th_redis_restart(struct sk_th_redis *s, const char *const *extra);

/* Calls Redis on 127.0.0.1:port served of command cmd (lower case, as
 * INFO commandstats names it: "evalsha", "fcall", "hget"), 0 when none. */
long long sk_th_redis_calls(int port, const char *cmd);

/* URL of the run's shared redis-server. Tests use their own activity ids so
 * they do not disturb each other. */
const char *sk_th_redis_url(void);

/* A fresh activity id no other test in this run uses. */
uint64_t sk_th_unique_id(void);

/* The stream entry id inside an order id (engine/order_id.h) into sid (cap
 * bytes); fails the test when order_id is not one. */
void sk_th_order_sid(const char *order_id, char *sid, size_t cap);

/* A fresh temporary directory (removed at exit of the runner). The runner
 * also points $TMPDIR at its temporary root, so the spawners' directories
 * go there too. */
const char *sk_th_tmpdir(void);

/* A TCP port that was free a moment ago. */
int sk_th_free_port(void);

/* Runs the seckill binary (SECKILL_BIN) with args (NULL-terminated) and
 * extra environment entries "K=V" (NULL-terminated, may be NULL); captures
 * stdout+stderr into out (cap bytes, always terminated). Returns the exit
 * code, or 128+signal. */
int sk_th_run_seckill(char *out, size_t cap, const char *const *env, const char *const *args);
/* The same with the hooks binary (sk_th_seckill_hooks_bin). */
int sk_th_run_seckill_hooks(char *out, size_t cap, const char *const *env, const char *const *args);

/* fork() for a child that dies with the test (PR_SET_PDEATHSIG; it exits
 * at once when the test is already gone). 0 in the child, its pid in the
 * test; fails the test when it cannot fork. */
pid_t sk_th_fork(void);

/* In a forked child: execs bin with args (NULL-terminated, at most 62)
 * after it as its argv; exits 127 when the exec fails. */
void sk_th_exec(const char *bin, const char *const *args) __attribute__((noreturn));
/* The same with stdout and stderr on out_fd and the "K=V" entries of env
 * (NULL-terminated, may be NULL) added to the environment. */
void sk_th_exec_out(int out_fd, const char *bin, const char *const *env, const char *const *args)
    __attribute__((noreturn));

/* The same for the benchmarks' binary, seckill-bench (SECKILL_BENCH_BIN,
 * default build/seckill-bench): args start with the benchmark's name. */
const char *sk_th_bench_bin(void);
int sk_th_run_bench(char *out, size_t cap, const char *const *env, const char *const *args);

/* A `seckill serve` process under test. */
struct sk_th_serve {
    pid_t pid;
    int port;
    int ops_port;  /* --ops-listen's port when extra has one, else 0 */
    char db[320];  /* sqlite:PATH of its store */
    char log[320]; /* its stderr */
};
#define SK_TH_ADMIN_TOKEN "test-admin-token"

/* Starts `seckill serve --listen 127.0.0.1:<free port> --redis redis_url
 * --db sqlite:<tmp>/serve.db --admin-token SK_TH_ADMIN_TOKEN` plus extra
 * args (NULL-terminated, may be NULL), and waits until /healthz answers
 * (on the --ops-listen port when extra has one).
 * The server dies with the test (PR_SET_PDEATHSIG). */
void sk_th_serve_start(struct sk_th_serve *s, const char *redis_url, const char *const *extra);
/* The same with its store and log in dir; a "--db SPEC" in extra is its
 * store instead of dir's SQLite file. */
void sk_th_serve_start_in(struct sk_th_serve *s, const char *dir, const char *redis_url,
                          const char *const *extra);
/* Sends sig (SIGTERM for a graceful stop) and waits at most 20 s; returns
 * the exit code, or 128+signal. */
int sk_th_serve_stop(struct sk_th_serve *s, int sig);

/* splitmix64: a seeded PRNG, so a failing load can be replayed. */
uint64_t sk_th_rng(uint64_t *state);

/* n buyer ids for a load: users nhot+1..nusers once each, users 1..nhot
 * hot_reps times each, the rest at random from 1..nusers, all shuffled.
 * Requires (nusers - nhot) + nhot * hot_reps <= n. */
void sk_th_buyers(uint32_t *users, size_t n, uint32_t nusers, uint32_t nhot, uint32_t hot_reps,
                  uint64_t *seed);

/* The source tree's root ("tests/support/.." as this file was compiled:
 * the suite runs from the tree, make test's folder). */
const char *sk_th_source_root(void);
/* Runs cmd with /bin/sh; what it prints on stdout into out (cap bytes,
 * terminated). Returns the wait status (0: exit 0). */
int sk_th_sh(const char *cmd, char *out, size_t cap);
/* Writes text to path (created or truncated, mode 0600: serve refuses a
 * config or secret file others may read); fails the test when it cannot. */
void sk_th_write_file(const char *path, const char *text);
/* The same for the file name in directory dir ("README.md", "src/a.c"). */
void sk_th_write_in(const char *dir, const char *name, const char *text);
/* Runs scripts/<script> of the source tree on the tree at root
 * (SK_CHECK_ROOT, as make test's checks take it), stdout and stderr into
 * out. Returns the wait status (0: the check passed). */
int sk_th_check_script(const char *script, const char *root, char *out, size_t cap);

/* Path of the seckill binary under test. */
const char *sk_th_seckill_bin(void);
/* The same built with the test fault hooks (-DSK_TEST: SECKILL_TEST_* in
 * its environment; the Makefile's seckill-hooks): SECKILL_BIN's path with
 * "-hooks" appended, or build/seckill-hooks. Static storage. */
const char *sk_th_seckill_hooks_bin(void);
/* The tests' clock shift library (tests/preload/clock_shift.c: a wall
 * clock moved by an offset read from a file), beside the binary under
 * test; the test fails when make has not built it. Static storage. */
const char *sk_th_clock_shift_lib(void);
/* The environment for processes spawned next: file non-NULL preloads the
 * clock shift library, its offset read from file (a relative path: from
 * each process's working directory), with ASan's link order check off
 * (a sanitized binary's runtime is then not first); NULL restores the
 * environment as it was. */
void sk_th_clock_shift_env(const char *file);

/* Hooks for server helpers in other files (pg_harness.c). before_test runs
 * in the runner before each selected test is forked, so a server started
 * there is shared by the tests that follow and dies with the runner;
 * at_exit runs in the runner at its exit, before the temporary root is
 * removed. Either may be NULL; at most 8 pairs. */
void sk_th_add_hooks(void (*before_test)(const char *name, const char *file),
                     void (*at_exit)(void));

#endif
