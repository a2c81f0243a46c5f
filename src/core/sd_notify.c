/* sd_notify.c - the notification datagram and the watchdog interval
 * (sd_notify.h). */
#include "core/sd_notify.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/error.h"
#include "core/num.h"

int sk_sd_notify_enabled(void)
{
    const char *s = getenv("NOTIFY_SOCKET");
    return s && s[0];
}

int sk_sd_notify(const char *msg)
{
    const char *name = getenv("NOTIFY_SOCKET");
    if (!name || !name[0]) return 0;
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    size_t n = strlen(name);
    if ((name[0] != '/' && name[0] != '@') || n >= sizeof sa.sun_path) return SK_EINVAL;
    memcpy(sa.sun_path, name, n);
    if (name[0] == '@') sa.sun_path[0] = 0; /* abstract: no terminator counts */
    socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (name[0] == '/'));
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return SK_EIO;
    ssize_t w;
    do
        w = sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&sa, alen);
    while (w < 0 && errno == EINTR);
    close(fd);
    return w == (ssize_t)strlen(msg) ? 0 : SK_EIO;
}

int sk_sd_notifyf(const char *fmt, ...)
{
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof buf) return SK_EINVAL;
    return sk_sd_notify(buf);
}

uint64_t sk_sd_watchdog_usec(void)
{
    const char *us = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
    uint64_t v, p;
    if (!us || sk_num_u64_canonical(us, strlen(us), &v) < 0) return 0;
    if (pid && pid[0] &&
        (sk_num_u64_canonical(pid, strlen(pid), &p) < 0 || p != (uint64_t)getpid()))
        return 0;
    return v;
}
