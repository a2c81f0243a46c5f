/* clock_shift.c - an LD_PRELOAD library for the nemesis's clock jumps on
 * redis-server: CLOCK_REALTIME (clock_gettime, gettimeofday, time) as the
 * process sees it is the real one plus an offset read from a file, so the
 * test can jump a running server's wall clock forward and back. The
 * monotonic clocks are left alone, as a real clock step leaves them.
 *
 * Why not Debian's libfaketime, which the nemesis uses for seckill's own
 * processes: redis-server is built with jemalloc, whose first allocation
 * reads the clock while libfaketime is still resolving its symbols, and
 * the server hangs at start (libfaketime's issue 130). This library never
 * allocates: until dlsym has found the real functions (and while it runs)
 * it asks the kernel directly.
 *
 * The file: the path in SK_CLOCK_SHIFT_FILE, relative paths read from the
 * process's working directory at each reading (redis-server changes into
 * its `dir`, so one relative name gives every node its own file). Its text:
 * "+N" or "-N" seconds, with an optional unit m, h or d (libfaketime's
 * offset format); no file or no number: no offset. Read again at most
 * every 100 ms of the monotonic clock. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);

static _Atomic(clock_gettime_fn) real_cg;
static atomic_int resolving; /* 0: not yet, 1: dlsym runs, 2: done */
static _Atomic int64_t offset_ns;
static _Atomic int64_t next_read_ns;

static int sys_clock_gettime(clockid_t id, struct timespec *ts)
{
    return (int)syscall(SYS_clock_gettime, id, ts);
}

static int base_clock_gettime(clockid_t id, struct timespec *ts)
{
    clock_gettime_fn f = atomic_load(&real_cg);
    if (f) return f(id, ts);
    int want = 0;
    if (atomic_compare_exchange_strong(&resolving, &want, 1)) {
        /* dlsym may allocate, and the allocator may read the clock: those
         * readings come here with resolving == 1 and go to the kernel */
        f = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
        if (f) atomic_store(&real_cg, f);
        atomic_store(&resolving, 2);
        if (f) return f(id, ts);
    }
    return sys_clock_gettime(id, ts);
}

/* "+3600", "-2h", "+90m", "+1d" in seconds; 0 for anything else. */
static int64_t parse_offset_s(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    int neg = *p == '-';
    if (*p != '+' && *p != '-') return 0;
    p++;
    int64_t v = 0;
    int digits = 0;
    while (*p >= '0' && *p <= '9' && v < (int64_t)1 << 40) {
        v = v * 10 + (*p++ - '0');
        digits++;
    }
    if (!digits) return 0;
    switch (*p) {
    case 'm': v *= 60; break;
    case 'h': v *= 3600; break;
    case 'd': v *= 86400; break;
    default: break;
    }
    return neg ? -v : v;
}

static int64_t current_offset_ns(void)
{
    struct timespec m; /* the coarse clock: cheap, and 100 ms need no more */
    if (base_clock_gettime(CLOCK_MONOTONIC_COARSE, &m) != 0) return atomic_load(&offset_ns);
    int64_t now = (int64_t)m.tv_sec * 1000000000 + m.tv_nsec;
    if (now < atomic_load(&next_read_ns)) return atomic_load(&offset_ns);
    atomic_store(&next_read_ns, now + 100000000);
    const char *path = getenv("SK_CLOCK_SHIFT_FILE");
    int64_t off = 0;
    if (path && *path) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            char buf[64];
            ssize_t n = read(fd, buf, sizeof buf - 1);
            close(fd);
            if (n > 0) {
                buf[n] = 0;
                off = parse_offset_s(buf) * 1000000000;
            }
        }
    }
    atomic_store(&offset_ns, off);
    return off;
}

static void shift(struct timespec *ts, int64_t off)
{
    int64_t ns = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec + off;
    ts->tv_sec = (time_t)(ns / 1000000000);
    ts->tv_nsec = (long)(ns % 1000000000);
    if (ts->tv_nsec < 0) {
        ts->tv_nsec += 1000000000;
        ts->tv_sec--;
    }
}

int clock_gettime(clockid_t id, struct timespec *ts)
{
    int rc = base_clock_gettime(id, ts);
    if (rc == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE))
        shift(ts, current_offset_ns());
    return rc;
}

/* glibc declares tv nonnull; a caller may pass NULL all the same */
#pragma GCC diagnostic ignored "-Wnonnull-compare"
int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
    (void)tz;
    struct timespec ts;
    int rc = clock_gettime(CLOCK_REALTIME, &ts);
    if (rc == 0 && tv) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return rc;
}

time_t time(time_t *t)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return (time_t)-1;
    if (t) *t = ts.tv_sec;
    return ts.tv_sec;
}
