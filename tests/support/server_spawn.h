/* server_spawn.h - a program a test starts for itself (a Prometheus, a
 * `seckill serve` with its own command line, a server inside a network
 * namespace): the one way the tests fill the spawner's command, with the
 * settings none of them cares about (the poll, how a server that never
 * got ready is stopped) chosen once. */
#ifndef SK_TEST_SERVER_SPAWN_H
#define SK_TEST_SERVER_SPAWN_H
#include <sys/types.h>

#include "spawn/spawn.h"

/* Fills c for argv (NULL-terminated, the caller's, read at the start):
 * stdout and stderr into the file log, the child killed when the calling
 * thread exits, ready(arg) polled every 20 ms for ready_ms, and a child
 * not ready in time stopped with SIGTERM, then SIGKILL after 2 s. name
 * names it in messages. Nothing is allocated; c points at the caller's
 * strings. */
void sk_th_server_cmd(struct sk_spawn_cmd *c, const char *name, const char *const *argv,
                      const char *log, int (*ready)(void *arg), void *arg, int ready_ms);

/* sk_th_server_cmd, then sk_spawn_start; the test fails (with the
 * spawner's message and the log's path) when the server does not get
 * ready. Ownership: the running child is the caller's (sk_spawn_stop, or
 * a signal and sk_spawn_wait). Returns its pid. */
pid_t sk_th_server_start(const char *name, const char *const *argv, const char *log,
                         int (*ready)(void *arg), void *arg, int ready_ms);

#endif
