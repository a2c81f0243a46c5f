/* proc_watch.h - what a fault test reads of other processes from /proc, so
 * that a fault lands exactly where it should without sleeping: whether a
 * process is stopped (SIGSTOP, or a test pause point), and whether bytes a
 * process sent to a local server wait unread in that server's socket (the
 * server is frozen with the request in flight), and how much memory a
 * process holds. */
#ifndef SK_TEST_PROC_WATCH_H
#define SK_TEST_PROC_WATCH_H
#include <stdint.h>
#include <sys/types.h>

/* The state letter of /proc/<pid>/stat ('R', 'S', 'T' stopped, ...), or 0
 * when the process is gone. */
char sk_th_proc_state(pid_t pid);

/* The children of pid (the kernel lists them per thread: the main
 * thread's), those named comm (/proc/<child>/comm, e.g. "seckill-api")
 * when comm is not NULL, into out (at most cap); returns how many. */
int sk_th_proc_children(pid_t pid, const char *comm, pid_t *out, int cap);

/* Waits (bounded by ms) until pid is stopped; 1 when it is, 0 on timeout. */
int sk_th_proc_wait_stopped(pid_t pid, int ms);

/* Bytes queued unread at 127.0.0.1:port on connections from sockets of
 * process pid (the rx queue of the server's end, /proc/net/tcp): > 0 once
 * a request of pid reached a server that does not read it (frozen). */
long sk_th_proc_bytes_queued_at(pid_t pid, int port);

/* The resident set of pid in KiB (VmRSS of /proc/<pid>/status), -1 when
 * the line is missing; fails the test when the process is gone. */
long sk_th_proc_rss_kib(pid_t pid);
/* The same, -1 when the process is gone (a sampler of processes that may
 * die). */
long sk_th_proc_rss_kib_or(pid_t pid);
/* A KiB figure of /proc/<pid>/status by its name ("VmRSS", "RssAnon": the
 * resident memory that is not a mapped file), -1 when absent or gone. */
long sk_th_proc_status_kib(pid_t pid, const char *field);

#endif
