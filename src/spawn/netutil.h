/* netutil.h - small loopback helpers shared by the programs that start
 * their own servers (demo, benchmarks, spawners, tests). */
#ifndef SK_NETUTIL_H
#define SK_NETUTIL_H

/* A loopback TCP port that was free a moment ago (bind to port 0), or -1. */
int sk_net_free_port(void);

/* 1 when GET path on 127.0.0.1:port answers 200 within timeout_ms. */
int sk_net_http_ok(int port, const char *path, int timeout_ms);

#endif
