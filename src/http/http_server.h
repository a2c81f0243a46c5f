/* http_server.h - run one event-loop process of `seckill serve`. */
#ifndef SK_HTTP_SERVER_H
#define SK_HTTP_SERVER_H
#include <stddef.h>

#include "core/node_stats.h"
#include "http/config.h"

/* Serves until SIGTERM/SIGINT, then drains: stops accepting, answers every
 * request in flight, returns 0 (1 if something could not be answered or
 * the server could not start). */
int sk_server_run(const struct sk_config *cfg);
/* The same, as HTTP process `slot` of a node whose figures live in node's
 * shared segment (core/node_stats.h; made by the supervisor before it
 * forked). node NULL: a lone process with figures of its own. */
int sk_server_run_in(const struct sk_config *cfg, sk_node *node, int slot);

/* A bound (and, when backlog > 0, listening) non-blocking socket for
 * HOST:PORT ([v6]:PORT too), with SO_REUSEPORT when reuseport is set (the
 * event-loop processes share the port); without it the bind fails on a
 * port in use, which is how serve checks the port before starting.
 * HOST may be a name, resolved here (blocking): call it at startup only,
 * before a loop runs (serve's port check, each process's open).
 * Returns the fd or a negative SK_E* code with the reason in err. */
int sk_server_listen_fd(const char *addr, int backlog, int reuseport, char *err, size_t cap);

#endif
