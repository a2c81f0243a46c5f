/* url.h - the pieces of a URL that several parsers share (the Redis URLs,
 * the MySQL URL): percent-decoding, one host[:port] (numbers: core/num.h).
 * Pure: bytes in, no I/O, no allocation. */
#ifndef SK_URL_H
#define SK_URL_H
#include <stddef.h>

/* Copies the n bytes at s into dst (cap bytes, always terminated on
 * success) decoding %XX escapes. SK_EINVAL on a bad escape, a decoded NUL,
 * or when it does not fit; dst is then unspecified. */
int sk_url_decode(char *dst, size_t cap, const char *s, size_t n);

/* One "host", "host:port", "[v6]" or "[v6]:port" of [p, end) into host
 * (hostcap bytes; brackets dropped) and *port (left as it was when the
 * text has none). Returns 0, or SK_EINVAL with a reason in err (errcap
 * bytes). */
int sk_url_hostport(const char *p, const char *end, char *host, size_t hostcap, int *port,
                    char *err, size_t errcap);

#endif
