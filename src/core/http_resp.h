/* http_resp.h - the HTTP/1.1 response parser of `seckill load`: bytes in,
 * a parsed response out, no I/O and no allocation (a pure function over a
 * buffer, so it can be fed anything: tests, fuzzers). */
#ifndef SK_LOAD_HTTP_RESP_H
#define SK_LOAD_HTTP_RESP_H
#include <stddef.h>

/* Limits of what the parser accepts; the load generator's read buffer
 * never grows beyond their sum. */
#define SK_LOAD_MAX_HEADER_BYTES (64 * 1024)
#define SK_LOAD_MAX_RESPONSE_BYTES (1024 * 1024)

/* One parsed response (pointers into the caller's buffer). */
struct sk_load_resp {
    int status;
    int keep_alive; /* 0: the server closes after this response */
    const char *body;
    size_t body_len; /* decoded length; chunked bodies are decoded in place */
    size_t consumed; /* bytes of the buffer this response used */
};

/* Incremental HTTP/1.1 response parser: status line, headers
 * (Content-Length, Transfer-Encoding: chunked, Connection), body. buf holds
 * what has arrived so far; eof says the peer closed. Returns 1 with *r
 * filled when a complete response is in buf, 0 when more bytes are needed,
 * or SK_EPROTO for something that is not HTTP. 1xx interim responses are
 * skipped (counted in consumed). Chunked bodies are decoded in place, which
 * is why buf is not const. head: the request was HEAD (no body). */
int sk_load_parse_response(char *buf, size_t len, int eof, int head, struct sk_load_resp *r);

#endif
