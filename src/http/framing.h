/* framing.h - checks on the raw bytes of an HTTP/1.1 request head that a
 * parser lets through (bytes in, a verdict out: no I/O, no allocation);
 * http1_parse.h applies them to every head.
 *
 * Parsers disagree on a second Content-Length with another value, on
 * Transfer-Encoding next to Content-Length, on a folded continuation line,
 * and on which of two X-User-Id headers counts (h2o 2.2 took the first
 * length, preferred Transfer-Encoding, dropped folds, kept the first id).
 * Behind a proxy that frames or picks differently, each of those is
 * request smuggling or identity confusion, so the server refuses such a
 * request (400, then closes the connection) before routing it (README,
 * "HTTP hardening"). */
#ifndef SK_FRAMING_H
#define SK_FRAMING_H
#include <stddef.h>

/* Longest request head (request line, headers, blank line) a connection
 * may send; a longer one is refused (431) and the connection closed. */
#define SK_FRAMING_MAX_HEAD (16 * 1024)

/* Length of the request head at buf (the request line, the header lines
 * and the blank line that ends them, after at most one leading empty line,
 * as h2o's parser allows), or 0 when len bytes hold no complete head.
 * Lines end in LF or CRLF. */
size_t sk_framing_head_len(const char *buf, size_t len);

/* Checks the head at buf (len bytes, a whole head or more). Returns 0
 * (acceptable), 1 (no complete head in len bytes: nothing to judge), or
 * SK_EINVAL with *why set to a static one-line reason when the head holds:
 *   - an obsolete line folding (a header line starting with SP or HT),
 *   - two Content-Length headers with different values,
 *   - Content-Length together with Transfer-Encoding,
 *   - Transfer-Encoding, Host, X-User-Id, Authorization or
 *     Idempotency-Key more than once.
 * Header names compare case-insensitively; values without the optional
 * whitespace around them. *why is NULL unless refused. */
int sk_framing_check(const char *buf, size_t len, const char **why);

#endif
