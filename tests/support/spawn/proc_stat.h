/* proc_stat.h - one process's line of /proc/<pid>/stat, for the tests and
 * the benchmarks that watch other processes (stopped or not, their parent,
 * the CPU time they used). */
#ifndef SK_TEST_PROC_STAT_H
#define SK_TEST_PROC_STAT_H
#include <stddef.h>
#include <sys/types.h>

/* The fields of /proc/<pid>/stat that follow the command name, from the
 * state letter on ("S 1 ..."), read into buf (cap bytes); NULL when the
 * process is gone or the line has no command name. The name is skipped up
 * to its last ')': it may hold spaces and parentheses. */
const char *sk_proc_stat_fields(pid_t pid, char *buf, size_t cap);
/* pid's state letter ('R', 'S', 'T' stopped, 'Z', ...), 0 when it is gone. */
char sk_proc_state(pid_t pid);

#endif
