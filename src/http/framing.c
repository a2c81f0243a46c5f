/* framing.c - request-head checks that h2o 2.2 does not make (framing.h).
 * One pass over the head's lines; nothing is copied. */
#include "http/framing.h"

#include <string.h>
#include <strings.h>

#include "core/error.h"

/* Bytes of the one leading empty line h2o's parser skips (0, 1 or 2). */
static size_t leading_empty_line(const char *buf, size_t len)
{
    if (len >= 2 && buf[0] == '\r' && buf[1] == '\n') return 2;
    if (len >= 1 && buf[0] == '\n') return 1;
    return 0;
}

/* The line starting at p: its end without CR/LF in *end, and the offset of
 * the next line returned; 0 when no LF follows within len. */
static size_t next_line(const char *buf, size_t len, size_t p, size_t *end)
{
    const char *nl = memchr(buf + p, '\n', len - p);
    if (!nl) return 0;
    size_t e = (size_t)(nl - buf);
    *end = e > p && buf[e - 1] == '\r' ? e - 1 : e;
    return e + 1;
}

size_t sk_framing_head_len(const char *buf, size_t len)
{
    if (!buf) return 0;
    size_t p = leading_empty_line(buf, len), end;
    for (int first = 1; p < len; first = 0) {
        size_t next = next_line(buf, len, p, &end);
        if (!next) return 0;
        if (end == p && !first) return next; /* the blank line */
        p = next;
    }
    return 0;
}

/* Headers counted, by name. */
enum { H_CL, H_TE, H_HOST, H_USER, H_AUTHZ, H_IDEM, H_COUNT };
static const char *const names[H_COUNT] = {
    "content-length", "transfer-encoding", "host", "x-user-id", "authorization", "idempotency-key",
};
static const char *const twice[H_COUNT] = {
    NULL, /* two equal Content-Length values frame the same body */
    "more than one Transfer-Encoding header",
    "more than one Host header",
    "more than one X-User-Id header",
    "more than one Authorization header",
    "more than one Idempotency-Key header",
};

static int name_of(const char *s, size_t n)
{
    for (int i = 0; i < H_COUNT; i++)
        if (strlen(names[i]) == n && strncasecmp(s, names[i], n) == 0) return i;
    return -1;
}

static int is_ows(char c)
{
    return c == ' ' || c == '\t';
}

int sk_framing_check(const char *buf, size_t len, const char **why)
{
    *why = NULL;
    if (!buf) return 1;
    int count[H_COUNT] = {0}, fold = 0, cl_differs = 0;
    const char *cl = NULL;
    size_t cl_len = 0;
    size_t p = leading_empty_line(buf, len), end;
    size_t next = next_line(buf, len, p, &end); /* the request line */
    if (!next) return 1;
    for (p = next;; p = next) {
        if (p >= len || !(next = next_line(buf, len, p, &end))) return 1;
        if (end == p) break; /* the blank line: the head is complete */
        if (is_ows(buf[p])) {
            fold = 1;
            continue;
        }
        const char *colon = memchr(buf + p, ':', end - p);
        if (!colon) continue; /* h2o refuses it before it could reach a handler */
        int h = name_of(buf + p, (size_t)(colon - (buf + p)));
        if (h < 0) continue;
        count[h]++;
        if (h != H_CL) continue;
        const char *v = colon + 1, *ve = buf + end;
        while (v < ve && is_ows(*v))
            v++;
        while (ve > v && is_ows(ve[-1]))
            ve--;
        if (!cl) {
            cl = v;
            cl_len = (size_t)(ve - v);
        } else if ((size_t)(ve - v) != cl_len || memcmp(v, cl, cl_len) != 0) {
            cl_differs = 1;
        }
    }
    if (fold)
        *why = "obsolete line folding (a header line starting with a space or tab)";
    else if (cl_differs)
        *why = "two Content-Length headers with different values";
    else if (count[H_CL] && count[H_TE])
        *why = "Content-Length together with Transfer-Encoding";
    for (int i = 0; !*why && i < H_COUNT; i++)
        if (twice[i] && count[i] > 1) *why = twice[i];
    return *why ? SK_EINVAL : 0;
}
