/* http_resp.h - the one HTTP/1.1 response parser of the project: `seckill
 * load`, the tests' client, the benchmarks and the spawners' readiness
 * probe all read answers with it. Bytes in, a parsed response out, no I/O
 * and no allocation (a pure function over a buffer, so it can be fed
 * anything: tests, fuzzers: tests/fuzz/fuzz_http_resp.c). */
#ifndef SK_HTTP_RESP_H
#define SK_HTTP_RESP_H
#include <stddef.h>

/* Limits of what the parser accepts; a reader's buffer never needs to grow
 * beyond their sum. */
#define SK_HTTP_RESP_MAX_HEAD (64 * 1024)
#define SK_HTTP_RESP_MAX_BODY (1024 * 1024)

/* One parsed response (pointers into the caller's buffer). */
struct sk_http_resp {
    int status;
    int keep_alive;   /* 0: the server closes after this response */
    const char *head; /* the final response's status line and headers, */
    size_t head_len;  /* through the empty line (1xx interim ones skipped) */
    const char *body;
    size_t body_len; /* decoded length; chunked bodies are decoded in place */
    size_t consumed; /* bytes of the buffer this response used */
};

/* The status line alone, at the start of buf (len bytes): "HTTP/1.x NNN"
 * then a space or the line's end. Returns the status (100..999), 0 when
 * fewer bytes than a status line arrived and they may still become one,
 * or SK_EPROTO. For probes that read only the first bytes of an answer. */
int sk_http_resp_status(const char *buf, size_t len);

/* Incremental HTTP/1.1 response parser: status line, headers
 * (Content-Length, Transfer-Encoding: chunked, Connection), body. buf holds
 * what has arrived so far; eof says the peer closed. Returns 1 with *r
 * filled when a complete response is in buf, 0 when more bytes are needed,
 * or SK_EPROTO for something that is not HTTP. 1xx interim responses are
 * skipped (counted in consumed). Chunked bodies are decoded in place, which
 * is why buf is not const. head: the request was HEAD (no body). */
int sk_http_resp_parse(char *buf, size_t len, int eof, int head, struct sk_http_resp *r);

#endif
