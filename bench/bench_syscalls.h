/* bench_syscalls.h - the system calls a server makes during a benchmark
 * phase, for "syscalls per request" next to a reference server's.
 *
 * How: `perf stat` attached to the server's processes (every thread)
 * counts the raw_syscalls:sys_enter tracepoint, i.e. every system call,
 * and the per-call tracepoints of the ones that matter on an HTTP path
 * (reads, writes, epoll_wait, epoll_ctl, ioctl); the kernel counts, so the
 * cost is a few per cent on each call, the same for every server measured.
 * Without perf (Debian: linux-perf) or the right to trace, it falls back
 * to /proc/PID/io (syscr + syscw: the read and write calls only, no
 * epoll), and says so. */
#ifndef SK_BENCH_SYSCALLS_H
#define SK_BENCH_SYSCALLS_H
#include <stdint.h>
#include <sys/types.h>

enum sk_bench_sysc_method { SK_SYSC_NONE, SK_SYSC_PERF, SK_SYSC_PROC_IO };

enum {
    SK_SYSC_ALL,        /* every system call (perf), or reads + writes (/proc/PID/io) */
    SK_SYSC_READS,      /* read, readv, recvfrom, recvmsg */
    SK_SYSC_WRITES,     /* write, writev, sendto, sendmsg */
    SK_SYSC_EPOLL_WAIT, /* epoll_wait, epoll_pwait */
    SK_SYSC_EPOLL_CTL,
    SK_SYSC_IOCTL,
    SK_SYSC_N
};

struct sk_bench_sysc {
    enum sk_bench_sysc_method method;
    pid_t perf;     /* the perf process while counting */
    pid_t pids[16]; /* the processes counted */
    int n_pids;
    uint64_t io0[16]; /* /proc/PID/io syscr + syscw at the start */
    char out[400];    /* perf's output file */
    uint64_t count[SK_SYSC_N];
};

/* The method this machine allows (perf tried once with a short run). */
enum sk_bench_sysc_method sk_bench_sysc_probe(void);

/* Starts counting the system calls of root and its direct children (serve
 * with --role all is a supervisor, its HTTP processes and the worker),
 * with method m; dir holds perf's output. 0, or -1 (nothing counted). */
int sk_bench_sysc_start(struct sk_bench_sysc *s, enum sk_bench_sysc_method m, pid_t root,
                        const char *dir, const char *tag);
/* Stops and fills s->count. 0, or -1 when the counts are unknown. */
int sk_bench_sysc_stop(struct sk_bench_sysc *s);

/* "perf" / "/proc/PID/io" / "none". */
const char *sk_bench_sysc_method_name(enum sk_bench_sysc_method m);

#endif
