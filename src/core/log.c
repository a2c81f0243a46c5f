/* log.c - plain stderr logging with a UTC timestamp and the pid. */
#include "core/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"

/* atomic: a reload sets it while other threads log */
static _Atomic int min_level = SK_LOG_INFO;
static const char *names[] = {"debug", "info", "warn", "error"};

void sk_log_set_level(enum sk_log_level l)
{
    atomic_store_explicit(&min_level, (int)l, memory_order_relaxed);
}

int sk_log_parse_level(const char *s, enum sk_log_level *out)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(s, names[i]) == 0) {
            *out = (enum sk_log_level)i;
            return 0;
        }
    return SK_EINVAL;
}

void sk_log(enum sk_log_level l, const char *fmt, ...)
{
    if ((int)l < atomic_load_explicit(&min_level, memory_order_relaxed)) return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char line[1024];
    int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ seckill[%d] %s ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     ts.tv_nsec / 1000000, (int)getpid(), names[l]);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof line) vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", line); /* one write per line: processes do not interleave */
}
