/* bench_util.h - helpers shared by the `seckill-bench ...` programs. */
#ifndef SK_BENCH_UTIL_H
#define SK_BENCH_UTIL_H
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "engine/stock.h"
#include "redis/redis_conn.h"

/* The seckill binary the benchmarks run as servers (serve, worker):
 * $SECKILL_BIN when set, else the `seckill` beside this program (both are
 * built into build/ and installed into one bin/), else "seckill" from
 * PATH. A static string. */
const char *sk_bench_seckill_bin(void);

/* 1 when prog is an executable somewhere on PATH. */
int sk_bench_on_path(const char *prog);

/* Runs `redis-benchmark` with args (NULL-terminated argv, args[0] the
 * program, --csv among them), killed after limit_ms or once *stop is set
 * (stop may be NULL); *rps from its result line. 0, SK_ETIMEDOUT or SK_EIO
 * with the reason in err. */
int sk_bench_redis_benchmark(const char *const *args, int64_t limit_ms, const atomic_int *stop,
                             double *rps, char *err, size_t errcap);

/* Copies the value of one "field:value" line of INFO <section> into val
 * (cap bytes): 0, SK_ENOTFOUND, or a connection error. */
int sk_bench_info_field(sk_redis *r, const char *section, const char *field, char *val, size_t cap);
/* SCRIPT LOAD of every embedded script (on every master of a cluster), for
 * the redis-benchmark runs that send EVALSHA themselves (the handshake
 * loads the Functions library): 0 or an error (r->errstr). */
int sk_bench_load_scripts(sk_redis *r);

/* CPU seconds (user + system) of this process, of the whole machine (all
 * but idle and iowait, from /proc/stat), and of a Redis server (INFO cpu). */
double sk_bench_self_cpu_seconds(void);
double sk_bench_machine_cpu_seconds(void);
double sk_bench_redis_cpu_seconds(sk_redis *r);

/* CPU seconds (user + system) of pid so far (0 when unknown); pid and its
 * direct children into out (at most cap; serve --role all is a supervisor
 * with HTTP processes and an order worker), returning how many; the CPU
 * seconds of pid and its children. */
double sk_bench_pid_cpu_seconds(pid_t pid);
int sk_bench_with_children(pid_t pid, pid_t *out, int cap);
double sk_bench_tree_cpu_seconds(pid_t root);

/* The CPU model name from /proc/cpuinfo ("unknown" when absent). */
void sk_bench_cpu_model(char *out, size_t cap);

/* The CPU model (sk_bench_cpu_model) into cpu and the kernel ("Linux
 * 6.1.0-18-amd64", "unknown") into kernel: the machine line of a report. */
void sk_bench_machine(char *cpu, size_t cpucap, char *kernel, size_t kcap);

/* Starts fn on each of the n items of size bytes at items (each holds its
 * pthread_t tid_off bytes in), threads that meet the caller at bar, made
 * here for n + 1 parties. 0, or SK_ENOMEM with the reason in note when
 * the barrier cannot be made (no thread started). A thread that cannot
 * start would leave the barrier waiting forever: the process aborts. */
int sk_bench_threads_start(pthread_barrier_t *bar, void *items, size_t n, size_t size,
                           size_t tid_off, void *(*fn)(void *), char *note, size_t cap);

/* The buffers of one purchase_batch call of up to a batch of purchases:
 * its arguments (cap bytes of buf), then its keys (kcap bytes), their
 * pointers and lengths, and the admissions of its reply. */
struct sk_bench_call {
    struct sk_admission *res;
    char *buf;
    size_t cap, kcap;
    const char **args;
    size_t *lens;
    const char **keys;
};

/* Allocates c's buffers for batch purchases (c is zeroed first): 0 or
 * SK_ENOMEM; either way sk_bench_call_free releases them. */
int sk_bench_call_init(struct sk_bench_call *c, size_t batch);
void sk_bench_call_free(struct sk_bench_call *c);

/* Preheats activity aid as the benchmarks sell it: stock units in segs
 * segments, one unit per user and per order, on sale from a minute ago
 * for a day; force overwrites an earlier definition. Then opens it. 0, or
 * an error with the reason in err. */
int sk_bench_preheat_open(sk_redis *ctl, uint64_t aid, int64_t stock, int segs, int force,
                          char *err, size_t cap);

/* Set by SIGINT/SIGTERM once sk_bench_catch_signals ran, read by the
 * benchmark's threads: a lock-free atomic is signal-safe and race-free. */
extern atomic_int sk_bench_interrupted;

/* SIGINT and SIGTERM set sk_bench_interrupted and then call also (NULL:
 * nothing; it runs in the handler, so async-signal-safe only); SIGPIPE is
 * ignored: a lost connection is an error, not a death. */
void sk_bench_catch_signals(void (*also)(void));

/* The ARGV of one buyer's purchase_batch call (no rate limit, no
 * transfer, nothing known of the key set, no store identity, no key, IP
 * or pass) for redis-benchmark: label, then the user id "__rand_int__"
 * (drawn per command), quantity 1. Writes SK_BENCH_RB_ARGC entries at argv,
 * static strings and label (not copied). */
#define SK_BENCH_RB_ARGC 15
void sk_bench_rb_purchase_args(const char **argv, const char *label);

#endif
