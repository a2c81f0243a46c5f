/* sd_notify.h - systemd's service notification protocol, written here (no
 * libsystemd): one datagram of "KEY=VALUE\n" lines to the AF_UNIX socket
 * named by $NOTIFY_SOCKET (a path, or "@name" in the abstract namespace),
 * and the watchdog interval systemd announces in $WATCHDOG_USEC (for the
 * process $WATCHDOG_PID names, when it names one).
 *
 * Without $NOTIFY_SOCKET (not started by systemd with Type=notify) every
 * call is a no-op that returns 0. No heap; a socket is opened and closed
 * per message (the supervisor sends a few a second at most). */
#ifndef SK_SD_NOTIFY_H
#define SK_SD_NOTIFY_H
#include <stdint.h>

/* 1 when $NOTIFY_SOCKET is set (non-empty). */
int sk_sd_notify_enabled(void);

/* Sends msg ("READY=1", "STATUS=...\n...", at most 4 KiB) as one
 * datagram. Returns 0 (sent, or nowhere to send), SK_EINVAL (a socket name
 * that is not absolute or abstract, or too long) or SK_EIO. */
int sk_sd_notify(const char *msg);

/* printf-style sk_sd_notify. */
int sk_sd_notifyf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The watchdog interval in microseconds when systemd asks this process to
 * ping (WATCHDOG_USEC set, WATCHDOG_PID unset or this process's pid), else
 * 0. */
uint64_t sk_sd_watchdog_usec(void);

#endif
