/* http1_parse.c - the request head (http1_parse.h) over picohttpparser,
 * whose parser libh2o exports but declares in no installed header: its
 * prototype is written here, with the structure it fills (the same layout
 * as ours, checked below). */
#include "http/http1_parse.h"

#include <string.h>
#include <strings.h>

#include "core/error.h"

struct phr_header {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
};

int phr_parse_request(const char *buf, size_t len, const char **method, size_t *method_len,
                      const char **path, size_t *path_len, int *minor_version,
                      struct phr_header *headers, size_t *num_headers, size_t last_len);

_Static_assert(sizeof(struct phr_header) == sizeof(struct sk_h1_field), "phr_header layout");

static int refuse(struct sk_h1_refusal *r, int status, const char *code, const char *message)
{
    r->status = status;
    r->code = code;
    r->message = message;
    return SK_EINVAL;
}

static int is_ows(char c)
{
    return c == ' ' || c == '\t';
}

static int name_is(const struct sk_h1_field *f, const char *name)
{
    size_t n = strlen(name);
    return f->name_len == n && strncasecmp(f->name, name, n) == 0;
}

/* The value's tokens (comma-separated, any case): does one equal tok? */
static int has_token(const char *v, size_t len, const char *tok)
{
    size_t tl = strlen(tok), i = 0;
    while (i < len) {
        while (i < len && (is_ows(v[i]) || v[i] == ','))
            i++;
        size_t s = i;
        while (i < len && v[i] != ',')
            i++;
        size_t e = i;
        while (e > s && is_ows(v[e - 1]))
            e--;
        if (e - s == tl && strncasecmp(v + s, tok, tl) == 0) return 1;
    }
    return 0;
}

/* Content-Length: digits only (no sign, no space inside), at most 19 of
 * them, so that the value fits; -1 otherwise. */
static int64_t content_length(const char *v, size_t len)
{
    if (len == 0 || len > 19) return -1;
    int64_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (v[i] < '0' || v[i] > '9') return -1;
        n = n * 10 + (v[i] - '0');
    }
    return n;
}

/* What the header lines say about the body, persistence and Expect;
 * framing.h has refused duplicates and Content-Length with
 * Transfer-Encoding already. */
static int read_fields(struct sk_h1_head *h, uint64_t max_body, struct sk_h1_refusal *r)
{
    int has_cl = 0, close = 0, keep = 0;
    for (size_t i = 0; i < h->n_fields; i++) {
        struct sk_h1_field *f = &h->fields[i];
        while (f->value_len > 0 && is_ows(f->value[f->value_len - 1]))
            f->value_len--;
        if (!f->name) continue; /* a folded line: framing.h refused it */
        if (name_is(f, "content-length")) {
            int64_t n = content_length(f->value, f->value_len);
            if (n < 0)
                return refuse(r, 400, "bad_request", "Content-Length must be a decimal number");
            has_cl = 1;
            h->content_length = (uint64_t)n;
        } else if (name_is(f, "transfer-encoding")) {
            if (f->value_len != 7 || strncasecmp(f->value, "chunked", 7) != 0)
                return refuse(r, 400, "bad_request",
                              "Transfer-Encoding other than chunked is not accepted");
            h->body = SK_H1_CHUNKED;
        } else if (name_is(f, "connection")) {
            close |= has_token(f->value, f->value_len, "close");
            keep |= has_token(f->value, f->value_len, "keep-alive");
        } else if (name_is(f, "expect")) {
            if (f->value_len != 12 || strncasecmp(f->value, "100-continue", 12) != 0)
                return refuse(r, 417, "expectation_failed", "only Expect: 100-continue is known");
            h->expect_continue = 1;
        } else if (name_is(f, "host")) {
            h->host = f->value;
            h->host_len = f->value_len;
        }
    }
    if (h->body == SK_H1_CHUNKED && h->minor_version == 0)
        return refuse(r, 400, "bad_request", "Transfer-Encoding in an HTTP/1.0 request");
    if (has_cl) {
        h->body = SK_H1_LENGTH;
        if (h->content_length > max_body)
            return refuse(r, 413, "payload_too_large", "request body over the size limit");
    }
    /* HTTP/1.1 keeps the connection unless told to close; 1.0 only when
     * asked to keep it */
    h->keep_alive = !close && (h->minor_version >= 1 || keep);
    return SK_H1_OK;
}

int sk_h1_parse_head(const char *buf, size_t len, size_t last_len, uint64_t max_body,
                     struct sk_h1_head *h, struct sk_h1_refusal *r)
{
    memset(h, 0, offsetof(struct sk_h1_head, fields));
    r->status = 0;
    r->code = r->message = NULL;
    /* only the first SK_FRAMING_MAX_HEAD bytes can hold an acceptable head */
    size_t n = len < SK_FRAMING_MAX_HEAD ? len : SK_FRAMING_MAX_HEAD;
    if (last_len > n) last_len = 0;
    size_t nf = SK_H1_MAX_FIELDS;
    int rc = phr_parse_request(buf, n, &h->method, &h->method_len, &h->path, &h->path_len,
                               &h->minor_version, (struct phr_header *)h->fields, &nf, last_len);
    if (rc == -2) {
        if (len >= SK_FRAMING_MAX_HEAD)
            return refuse(r, 431, "headers_too_large",
                          "the request line and headers are over 16384 bytes");
        return SK_H1_INCOMPLETE;
    }
    if (rc < 0 || h->method_len == 0 || h->path_len == 0)
        return refuse(r, 400, "bad_request", "malformed HTTP/1.1 request line or header");
    h->len = (size_t)rc;
    h->n_fields = nf;
    const char *why;
    if (sk_framing_check(buf, h->len, &why) != 0)
        return refuse(r, 400, "bad_request", why ? why : "malformed request head");
    return read_fields(h, max_body, r);
}
