/* http1_parse.h - one HTTP/1.1 request head from raw bytes: bytes in, a
 * verdict out (no I/O, no allocation). A chunked body is chunked.h's.
 *
 * The syntax is picohttpparser's (phr_parse_request, which libh2o
 * exports; h2o's own HTTP/1 parses with it). On top of it: framing.h's
 * checks (what a proxy could frame or attribute differently), the body's
 * framing (one Content-Length of digits only, or Transfer-Encoding:
 * chunked and nothing else, and never in an HTTP/1.0 request: RFC 9112
 * section 6.1 calls that framing faulty), the head size bound,
 * --max-body, persistence (Connection, the HTTP version) and Expect.
 * Everything refused comes back as an HTTP status with a code and a
 * one-line reason, for the caller to answer and close. */
#ifndef SK_HTTP1_PARSE_H
#define SK_HTTP1_PARSE_H
#include <stddef.h>
#include <stdint.h>

#include "http/framing.h"

/* More header lines than this: 400 (h2o's bound too). */
#define SK_H1_MAX_FIELDS 100

enum { SK_H1_OK = 0, SK_H1_INCOMPLETE = 1 };

enum sk_h1_body {
    SK_H1_NO_BODY, /* neither Content-Length nor Transfer-Encoding */
    SK_H1_LENGTH,  /* Content-Length bytes follow the head */
    SK_H1_CHUNKED  /* Transfer-Encoding: chunked */
};

/* One header line; points into the parsed bytes. (The layout of
 * picohttpparser's struct phr_header, which it is filled as.) */
struct sk_h1_field {
    const char *name;
    size_t name_len;
    const char *value; /* without the whitespace around it */
    size_t value_len;
};

struct sk_h1_head {
    size_t len; /* bytes of the head: request line, header lines, blank line */
    const char *method, *path;
    size_t method_len, path_len;
    int minor_version; /* HTTP/1.<minor_version> */
    const char *host;  /* the Host header's value, NULL without one */
    size_t host_len;
    enum sk_h1_body body;
    uint64_t content_length; /* SK_H1_LENGTH */
    int keep_alive;          /* the connection may carry another request after this one */
    int expect_continue;     /* Expect: 100-continue */
    size_t n_fields;
    struct sk_h1_field fields[SK_H1_MAX_FIELDS];
};

/* How to answer a refused request (static strings); the connection is
 * closed after the answer. */
struct sk_h1_refusal {
    int status;          /* 400, 413, 417 or 431 */
    const char *code;    /* the JSON error code: "bad_request", ... */
    const char *message; /* one line, no request bytes in it */
};

/* Parses the head at the start of buf (len bytes, what arrived so far).
 * last_len: len at the previous call for the same head that returned
 * SK_H1_INCOMPLETE (0 at first): only what came since is scanned for the
 * end of the head. max_body: a larger Content-Length is refused (413).
 * Returns SK_H1_OK (*h filled, its pointers into buf), SK_H1_INCOMPLETE
 * (more bytes needed, and the head may still fit SK_FRAMING_MAX_HEAD), or
 * SK_EINVAL (*r filled). */
int sk_h1_parse_head(const char *buf, size_t len, size_t last_len, uint64_t max_body,
                     struct sk_h1_head *h, struct sk_h1_refusal *r);

#endif
