/* http_resp.c - HTTP/1.1 response parsing (http_resp.h):
 * status line, the headers that frame the body, Content-Length, chunked or
 * read-to-close bodies. Works on the bytes given and nothing else. */
#include "core/http_resp.h"

#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"
#include "core/num.h"

static int ieq(const char *a, size_t alen, const char *b)
{
    size_t blen = strlen(b);
    return alen == blen && strncasecmp(a, b, blen) == 0;
}

/* Does a comma-separated header value hold token tok (case-insensitive)? */
static int has_token(const char *v, size_t n, const char *tok)
{
    size_t i = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        size_t s = i;
        while (i < n && v[i] != ',')
            i++;
        size_t e = i;
        while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
            e--;
        if (ieq(v + s, e - s, tok)) return 1;
    }
    return 0;
}

/* Scans (decode = 0) or decodes in place (decode = 1) a chunked body at
 * buf[off..len). Returns 1 with *end (bytes used) and *dlen (decoded
 * length) when complete, 0 when more is needed, SK_EPROTO when malformed. */
static int chunked(char *buf, size_t off, size_t len, int decode, size_t *end, size_t *dlen)
{
    size_t p = off, out = off;
    for (;;) {
        char *le = memmem(buf + p, len - p, "\r\n", 2);
        if (!le) return len - p > 1024 ? SK_EPROTO : 0;
        uint64_t size = 0;
        size_t digits = 0;
        const char *q = buf + p;
        for (; q < le; q++, digits++) {
            int d = (*q >= '0' && *q <= '9')   ? *q - '0'
                    : (*q >= 'a' && *q <= 'f') ? *q - 'a' + 10
                    : (*q >= 'A' && *q <= 'F') ? *q - 'A' + 10
                                               : -1;
            if (d < 0) break;
            if (size > (SK_HTTP_RESP_MAX_BODY >> 4)) return SK_EPROTO;
            size = size * 16 + (uint64_t)d;
        }
        if (digits == 0 || (q < le && *q != ';' && *q != ' ' && *q != '\t')) return SK_EPROTO;
        p = (size_t)(le - buf) + 2;
        if (size == 0) {
            /* trailers, then the empty line */
            for (;;) {
                char *te = memmem(buf + p, len - p, "\r\n", 2);
                if (!te) return len - p > SK_HTTP_RESP_MAX_HEAD ? SK_EPROTO : 0;
                size_t l = (size_t)(te - (buf + p));
                p += l + 2;
                if (l == 0) break;
            }
            *end = p;
            *dlen = out - off;
            return 1;
        }
        if (len - p < size + 2) return 0;
        if (buf[p + size] != '\r' || buf[p + size + 1] != '\n') return SK_EPROTO;
        if (decode) memmove(buf + out, buf + p, size);
        out += size;
        p += size + 2;
    }
}

int sk_http_resp_status(const char *p, size_t len)
{
    static const char proto[] = "HTTP/1.";
    for (size_t i = 0; i < len && i < 7; i++)
        if (p[i] != proto[i]) return SK_EPROTO;
    if (len > 7 && p[7] != '0' && p[7] != '1') return SK_EPROTO;
    if (len > 8 && p[8] != ' ') return SK_EPROTO;
    int status = 0;
    for (size_t i = 9; i < 12 && i < len; i++) {
        if (p[i] < '0' || p[i] > '9') return SK_EPROTO;
        status = status * 10 + (p[i] - '0');
    }
    if (len < 13) return 0;
    if (status < 100 || (p[12] != ' ' && p[12] != '\r')) return SK_EPROTO;
    return status;
}

int sk_http_resp_parse(char *buf, size_t len, int eof, int head, struct sk_http_resp *r)
{
    size_t off = 0;
    for (;;) {
        char *hend = memmem(buf + off, len - off, "\r\n\r\n", 4);
        if (!hend) {
            if (len - off > SK_HTTP_RESP_MAX_HEAD) return SK_EPROTO;
            /* a peer that closed mid-header sent something broken */
            return eof && len > off ? SK_EPROTO : 0;
        }
        const char *p = buf + off;
        size_t hlen = (size_t)(hend - p);
        /* the status line is followed at least by the "\r\n\r\n" found */
        if (hlen < 12) return SK_EPROTO;
        int status = sk_http_resp_status(p, hlen + 4);
        if (status <= 0) return SK_EPROTO;
        int http10 = p[7] == '0';
        int64_t clen = -1;
        int is_chunked = 0, conn_close = 0, conn_keep = 0;
        const char *line = memchr(p, '\n', hlen);
        line = line ? line + 1 : hend;
        while (line < hend) {
            const char *le = memmem(line, (size_t)(hend + 2 - line), "\r\n", 2);
            if (!le) return SK_EPROTO;
            const char *colon = memchr(line, ':', (size_t)(le - line));
            /* no name, or obsolete line folding: not worth guessing */
            if (!colon || colon == line || *line == ' ' || *line == '\t') return SK_EPROTO;
            size_t nlen = (size_t)(colon - line);
            const char *v = colon + 1;
            while (v < le && (*v == ' ' || *v == '\t'))
                v++;
            const char *ve = le;
            while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            size_t vlen = (size_t)(ve - v);
            if (ieq(line, nlen, "content-length")) {
                uint64_t n;
                if (vlen > 12 || sk_num_u64(v, vlen, &n) || n > SK_HTTP_RESP_MAX_BODY)
                    return SK_EPROTO;
                if (clen >= 0 && clen != (int64_t)n) return SK_EPROTO; /* conflicting lengths */
                clen = (int64_t)n;
            } else if (ieq(line, nlen, "transfer-encoding")) {
                if (has_token(v, vlen, "chunked")) is_chunked = 1;
            } else if (ieq(line, nlen, "connection")) {
                if (has_token(v, vlen, "close")) conn_close = 1;
                if (has_token(v, vlen, "keep-alive")) conn_keep = 1;
            }
            line = le + 2;
        }
        size_t body_off = (size_t)(hend - buf) + 4;
        if (status < 200) {
            if (status == 101) return SK_EPROTO; /* we never asked to upgrade */
            off = body_off;                      /* interim (100 Continue): skip */
            continue;
        }
        r->status = status;
        r->head = p;
        r->head_len = body_off - off;
        r->keep_alive = conn_close ? 0 : http10 ? conn_keep : 1;
        if (head || status == 204 || status == 304) {
            r->body = buf + body_off;
            r->body_len = 0;
            r->consumed = body_off;
            return 1;
        }
        if (is_chunked) {
            size_t end, dlen;
            int rc = chunked(buf, body_off, len, 0, &end, &dlen);
            if (rc <= 0) return rc == 0 && eof ? SK_EPROTO : rc;
            chunked(buf, body_off, len, 1, &end, &dlen);
            r->body = buf + body_off;
            r->body_len = dlen;
            r->consumed = end;
            return 1;
        }
        if (clen >= 0) {
            if (len - body_off < (size_t)clen) return eof ? SK_EPROTO : 0;
            r->body = buf + body_off;
            r->body_len = (size_t)clen;
            r->consumed = body_off + (size_t)clen;
            return 1;
        }
        /* neither length nor chunked: the body ends when the peer closes */
        if (!eof) return len - body_off > SK_HTTP_RESP_MAX_BODY ? SK_EPROTO : 0;
        r->body = buf + body_off;
        r->body_len = len - body_off;
        r->consumed = len;
        r->keep_alive = 0;
        return 1;
    }
}
