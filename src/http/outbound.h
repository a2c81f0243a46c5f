/* outbound.h - HTTP(S) POSTs from an HTTP process to another service (a
 * CAPTCHA provider's siteverify: captcha.h), off the event loop.
 *
 * One thread per process runs libcurl's multi interface: every request in
 * flight shares it, connections to the provider are kept and reused, each
 * request is bounded by its own timeout (connect, TLS, answer). The loop
 * hands a request over (sk_outbound_post: the bytes are copied) and the
 * thread hands the answer back through an eventfd the loop watches, as
 * core/resolve.c does for names; sk_outbound_drain, on the loop, runs each
 * request's callback with the HTTP status and the body. Nothing of it
 * blocks the loop: the loop takes a mutex the thread holds only to move a
 * request between lists.
 *
 * Threads: new, post, drain and free are the owner's (the loop's thread);
 * everything else runs on the outbound thread. */
#ifndef SK_OUTBOUND_H
#define SK_OUTBOUND_H
#include <stddef.h>

struct sk_outbound;

/* Longest answer body kept; a longer one fails its request (status 0). */
#define SK_OUTBOUND_BODY_MAX 16384

/* The answer, on the owner's thread: status is the HTTP status, or 0 when
 * there was none (timeout, connection refused, TLS, a body too long: why
 * says which); body (len bytes, terminated) is valid during the call. */
typedef void (*sk_outbound_cb)(void *arg, int status, const char *body, size_t len,
                               const char *why);

/* Starts the thread; at most max_inflight requests at once (then post says
 * SK_EBUSY). *out: the caller's, sk_outbound_free. 0, SK_ENOMEM or SK_EIO
 * (no thread, no eventfd, libcurl would not start). */
int sk_outbound_new(struct sk_outbound **out, int max_inflight);
/* The eventfd that becomes readable when answers wait (watch it, then
 * sk_outbound_drain). */
int sk_outbound_fd(const struct sk_outbound *o);
/* POSTs len bytes of body (application/x-www-form-urlencoded) to url,
 * within timeout_ms. cb(arg, ...) runs exactly once, on a later drain
 * (never inside this call) when this returns 0; not at all when it
 * returns SK_EBUSY (too many in flight) or SK_ENOMEM. */
int sk_outbound_post(struct sk_outbound *o, const char *url, const char *body, size_t len,
                     int timeout_ms, sk_outbound_cb cb, void *arg);
/* Runs the callbacks of the answers that arrived. Returns how many. */
int sk_outbound_drain(struct sk_outbound *o);
/* Stops the thread: requests still out end now (their callbacks run here,
 * status 0, "stopping"), then frees everything. NULL is fine. */
void sk_outbound_free(struct sk_outbound *o);

#endif
