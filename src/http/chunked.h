/* chunked.h - the chunked transfer coding of a request body (RFC 9112
 * section 7.1), decoded strictly, as the bytes arrive, in place: bytes in,
 * a verdict out (no I/O, no allocation).
 *
 * Strict, because a body is where a request can be hidden: a front end
 * that reads a chunk line differently (`0x2f` as 47 where a lenient
 * decoder reads 0 and an extension) takes the next request for body, or
 * the other way round, and the hidden request runs with the front end's
 * address and whatever identity header it carries. So every chunk line is
 *
 *     chunk-size [ chunk-ext ] CRLF
 *     chunk-size = 1*16HEXDIG              (no sign, no "0x", no space before)
 *     chunk-ext  = *( BWS ";" BWS name [ BWS "=" BWS ( token / quoted-string ) ] )
 *
 * with at most SK_CHUNKED_EXT_MAX bytes of extensions (they are read and
 * dropped), chunk data is followed by exactly CRLF, and the last chunk
 * ("0") by exactly CRLF: trailer fields are refused, not dropped (nothing
 * here reads them, and a field in a trailer that another hop merges into
 * the head, an X-User-Id, would be read by one side only). A bare LF or
 * CR anywhere in the framing is refused. The caller answers 400 and
 * closes the connection. */
#ifndef SK_CHUNKED_H
#define SK_CHUNKED_H
#include <stddef.h>
#include <stdint.h>

/* Bytes of chunk extensions one chunk line may carry. */
#define SK_CHUNKED_EXT_MAX 1024
/* Hex digits of a chunk size (16: every size fits 64 bits). */
#define SK_CHUNKED_DIGITS_MAX 16

enum { SK_CHUNKED_DONE = 0, SK_CHUNKED_MORE = 1 };

/* The decoder's state; sk_chunked_init before the first byte. */
struct sk_chunked {
    uint64_t size;      /* the chunk size being read, then the data left of the chunk */
    uint64_t body;      /* body bytes decoded so far */
    uint64_t max;       /* a larger body is refused (too_large) */
    uint32_t ext;       /* bytes of extensions on the current chunk line */
    uint8_t state;      /* chunked.c */
    uint8_t digits;     /* hex digits of the size read so far */
    uint8_t too_large;  /* the refusal was the size limit (413), not the syntax (400) */
    uint8_t last_chunk; /* the line being read is the last chunk's ("0") */
};

/* A fresh decoder for a body of at most max bytes. */
void sk_chunked_init(struct sk_chunked *d, uint64_t max);

/* Decodes the *len bytes at buf in place, the next piece of the encoded
 * body (the caller appends each piece right after the body decoded so
 * far). Every byte is consumed (a partial chunk line is kept in d).
 * Returns:
 *   SK_CHUNKED_MORE  buf[0..*len) is body; call again with the next bytes.
 *   SK_CHUNKED_DONE  buf[0..*len) is the end of the body, and the *tail
 *                    bytes of the piece that followed it (the next
 *                    request) were moved to buf + *len.
 *   SK_EINVAL        not strict chunked coding, or (d->too_large) a body
 *                    over max; *why is a static one-line reason. */
int sk_chunked_decode(struct sk_chunked *d, char *buf, size_t *len, size_t *tail, const char **why);

#endif
