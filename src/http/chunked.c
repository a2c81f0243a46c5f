/* chunked.c - the strict chunked decoder (chunked.h): one state per place
 * in the grammar, a byte at a time on the framing, memmove on the data. */
#include "http/chunked.h"

#include <string.h>

#include "core/error.h"

enum {
    ST_SIZE0,     /* the first hex digit of a chunk size */
    ST_SIZE,      /* more hex digits, or what ends the size */
    ST_EXT_BWS,   /* whitespace before ';' */
    ST_EXT_NAME0, /* after ';': whitespace, then the first character of a name */
    ST_EXT_NAME,  /* in a name */
    ST_EXT_EQ,    /* whitespace after a name: '=' or ';' must follow */
    ST_EXT_VAL0,  /* after '=': whitespace, then a token or a quoted string */
    ST_EXT_TOKEN, /* in a token value */
    ST_EXT_QS,    /* in a quoted string */
    ST_EXT_QP,    /* after a backslash in a quoted string */
    ST_EXT_QEND,  /* after a quoted string */
    ST_LINE_LF,   /* the CR of a chunk line came: its LF */
    ST_DATA,      /* chunk data */
    ST_DATA_CR,   /* the CR after chunk data */
    ST_DATA_LF,   /* its LF */
    ST_END_CR,    /* after the last chunk's line: the CR of the empty line */
    ST_END_LF,    /* its LF */
    ST_FAILED     /* refused, or ended: nothing more belongs to this body */
};

void sk_chunked_init(struct sk_chunked *d, uint64_t max)
{
    memset(d, 0, sizeof *d);
    d->max = max;
    d->state = ST_SIZE0;
}

static int hex_value(unsigned char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* RFC 9110's tchar. */
static int is_tchar(unsigned char c)
{
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return 1;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static int is_ws(unsigned char c)
{
    return c == ' ' || c == '\t';
}

/* qdtext: HTAB, SP, '!', '#'..'[', ']'..'~', obs-text. */
static int is_qdtext(unsigned char c)
{
    return c == '\t' || c == ' ' || c == 0x21 || (c >= 0x23 && c <= 0x5b) ||
           (c >= 0x5d && c <= 0x7e) || c >= 0x80;
}

/* What may follow a backslash: HTAB, SP, VCHAR, obs-text. */
static int is_quotable(unsigned char c)
{
    return c == '\t' || c == ' ' || (c >= 0x21 && c <= 0x7e) || c >= 0x80;
}

static int fail(struct sk_chunked *d, const char **why, const char *text)
{
    d->state = ST_FAILED;
    *why = text;
    return SK_EINVAL;
}

/* The CR ending a chunk line: on to its LF. */
static int line_cr(struct sk_chunked *d)
{
    d->state = ST_LINE_LF;
    return 0;
}

/* One byte of a chunk line (the size and its extensions). 0, or SK_EINVAL
 * with *why. */
static int line_byte(struct sk_chunked *d, unsigned char c, const char **why)
{
    if (d->state >= ST_EXT_BWS && d->state <= ST_EXT_QEND && c != '\r' &&
        ++d->ext > SK_CHUNKED_EXT_MAX)
        return fail(d, why, "chunk extensions over 1024 bytes");
    switch (d->state) {
    case ST_SIZE0: {
        int v = hex_value(c);
        if (v < 0)
            return fail(d, why,
                        c == '\r' || c == '\n' ? "empty chunk size"
                                               : "a chunk size must start with a hex digit");
        d->size = (uint64_t)v;
        d->digits = 1;
        d->state = ST_SIZE;
        return 0;
    }
    case ST_SIZE: {
        int v = hex_value(c);
        if (v >= 0) {
            if (++d->digits > SK_CHUNKED_DIGITS_MAX)
                return fail(d, why, "chunk size over 16 hex digits");
            d->size = d->size << 4 | (uint64_t)v;
            return 0;
        }
        if (c == ';') {
            d->state = ST_EXT_NAME0;
            d->ext = 1;
            return 0;
        }
        if (is_ws(c)) {
            d->state = ST_EXT_BWS;
            d->ext = 1;
            return 0;
        }
        if (c == '\r') return line_cr(d);
        return fail(d, why, c == '\n' ? "chunk line ends in a bare LF" : "malformed chunk size");
    }
    case ST_EXT_BWS:
    case ST_EXT_QEND:
        if (is_ws(c)) {
            d->state = ST_EXT_BWS;
            return 0;
        }
        if (c == ';') {
            d->state = ST_EXT_NAME0;
            return 0;
        }
        if (c == '\r' && d->state == ST_EXT_QEND) return line_cr(d);
        return fail(d, why, "malformed chunk extension");
    case ST_EXT_NAME0:
        if (is_ws(c)) return 0;
        if (!is_tchar(c)) return fail(d, why, "malformed chunk extension name");
        d->state = ST_EXT_NAME;
        return 0;
    case ST_EXT_NAME:
    case ST_EXT_TOKEN:
        if (is_tchar(c)) return 0;
        if (c == ';') {
            d->state = ST_EXT_NAME0;
            return 0;
        }
        if (c == '\r') return line_cr(d);
        if (is_ws(c)) {
            d->state = d->state == ST_EXT_NAME ? ST_EXT_EQ : ST_EXT_BWS;
            return 0;
        }
        if (c == '=' && d->state == ST_EXT_NAME) {
            d->state = ST_EXT_VAL0;
            return 0;
        }
        return fail(d, why,
                    c == '\n' ? "chunk line ends in a bare LF" : "malformed chunk extension");
    case ST_EXT_EQ:
        if (is_ws(c)) return 0;
        if (c == '=') {
            d->state = ST_EXT_VAL0;
            return 0;
        }
        if (c == ';') {
            d->state = ST_EXT_NAME0;
            return 0;
        }
        return fail(d, why, "malformed chunk extension");
    case ST_EXT_VAL0:
        if (is_ws(c)) return 0;
        if (c == '"') {
            d->state = ST_EXT_QS;
            return 0;
        }
        if (!is_tchar(c)) return fail(d, why, "malformed chunk extension value");
        d->state = ST_EXT_TOKEN;
        return 0;
    case ST_EXT_QS:
        if (c == '"')
            d->state = ST_EXT_QEND;
        else if (c == '\\')
            d->state = ST_EXT_QP;
        else if (!is_qdtext(c))
            return fail(d, why, "malformed quoted chunk extension value");
        return 0;
    case ST_EXT_QP:
        if (!is_quotable(c)) return fail(d, why, "malformed quoted chunk extension value");
        d->state = ST_EXT_QS;
        return 0;
    default: return fail(d, why, "malformed chunked body");
    }
}

/* The LF of a chunk line: the size is complete. */
static int line_end(struct sk_chunked *d, const char **why)
{
    if (d->size > d->max - d->body) {
        d->too_large = 1;
        return fail(d, why, "request body over the size limit");
    }
    d->ext = 0;
    d->digits = 0;
    d->last_chunk = d->size == 0;
    d->state = d->last_chunk ? ST_END_CR : ST_DATA;
    return 0;
}

int sk_chunked_decode(struct sk_chunked *d, char *buf, size_t *len, size_t *tail, const char **why)
{
    size_t in = 0, out = 0, n = *len;
    *tail = 0;
    *why = NULL;
    if (d->state == ST_FAILED) {
        *len = 0;
        *why = "malformed chunked body";
        return SK_EINVAL;
    }
    int rc = 0;
    while (in < n && rc == 0) {
        unsigned char c = (unsigned char)buf[in];
        switch (d->state) {
        case ST_DATA: {
            size_t k = n - in;
            if (k > d->size) k = (size_t)d->size;
            if (out != in) memmove(buf + out, buf + in, k);
            out += k;
            in += k;
            d->size -= k;
            d->body += k;
            if (d->size == 0) d->state = ST_DATA_CR;
            continue;
        }
        case ST_DATA_CR:
            if (c != '\r') rc = fail(d, why, "chunk data not followed by CRLF");
            d->state = rc ? d->state : ST_DATA_LF;
            break;
        case ST_DATA_LF:
            if (c != '\n') rc = fail(d, why, "chunk data not followed by CRLF");
            d->state = rc ? d->state : ST_SIZE0;
            break;
        case ST_LINE_LF:
            rc = c == '\n' ? line_end(d, why) : fail(d, why, "a CR without LF in a chunk line");
            break;
        case ST_END_CR:
            if (c != '\r')
                rc = fail(d, why,
                          c == '\n' ? "chunked body ends in a bare LF"
                                    : "trailer fields are not accepted");
            d->state = rc ? d->state : ST_END_LF;
            break;
        case ST_END_LF:
            if (c != '\n') {
                rc = fail(d, why, "chunked body ends in a CR without LF");
                break;
            }
            in++;
            *tail = n - in;
            if (*tail && out != in) memmove(buf + out, buf + in, *tail);
            *len = out;
            d->state = ST_FAILED; /* ended */
            return SK_CHUNKED_DONE;
        default: rc = line_byte(d, c, why); break;
        }
        in++;
    }
    *len = out;
    return rc ? rc : SK_CHUNKED_MORE;
}
