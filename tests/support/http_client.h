/* http_client.h - a small blocking HTTP/1.1 client for tests: real sockets,
 * keep-alive, Content-Length bodies. Not for production use. */
#ifndef SK_TEST_HTTP_CLIENT_H
#define SK_TEST_HTTP_CLIENT_H
#include <stddef.h>

struct sk_th_http {
    int fd;
    int port;
};

struct sk_th_resp {
    int status;         /* 0 when the connection failed or closed */
    char headers[2048]; /* raw header block, lower-cased names */
    char body[8192];
    size_t body_len;
};

/* Connects to 127.0.0.1:port (fails the test on error). */
/* A response on the heap (it is large for a thread's stack); fails the
 * test when out of memory. The caller frees it. */
struct sk_th_resp *sk_th_resp_new(void);
void sk_th_http_open(struct sk_th_http *c, int port);
/* Returns 0 or -1 without failing the test (for "is it up yet" probes). */
int sk_th_http_try_open(struct sk_th_http *c, int port);
void sk_th_http_close(struct sk_th_http *c);
/* One request on a connection of its own (opened and closed): the
 * status, the response into r (as sk_th_http_req). */
int sk_th_http_once(int port, const char *method, const char *path, const char *hdrs,
                    const char *body, struct sk_th_resp *r);

/* Sends one request (extra_headers: "Name: value\r\n" lines or NULL; body
 * may be NULL) and reads the response. Reconnects once if the server had
 * closed a kept-alive connection before the request was written. Returns
 * the status, 0 on a closed connection. */
int sk_th_http_req(struct sk_th_http *c, const char *method, const char *path,
                   const char *extra_headers, const char *body, struct sk_th_resp *r);

/* Sends all n bytes on fd (blocking), or fails the test. */
void sk_th_send_all(int fd, const char *p, size_t n);

/* Raw bytes out, whatever comes back in (until close or timeout_ms). */
size_t sk_th_http_raw(int port, const char *bytes, size_t len, char *out, size_t cap,
                      int timeout_ms);

/* GET path on port over a fresh connection (so SO_REUSEPORT may pick any
 * process), however long the answer (up to 1 MiB); the body into body
 * (cap bytes, terminated). Returns the status, 0 when nothing came back. */
int sk_th_http_get_big(int port, const char *path, char *body, size_t cap);

/* The status of the status line at the start of raw (len bytes: what
 * sk_th_http_raw returned), read by the product's parser; 0 when there is
 * none. */
int sk_th_http_status(const char *raw, size_t len);

/* Value of header name (lower case) in r, copied into out; 0 or -1. */
int sk_th_http_header(const struct sk_th_resp *r, const char *name, char *out, size_t cap);

/* The top-level field key of r's JSON body, a string as it is and a
 * number in decimal, into out (cap bytes); fails the test when the body is
 * no JSON object or has no such field. */
void sk_th_resp_field(const struct sk_th_resp *r, const char *key, char *out, size_t cap);

#endif
