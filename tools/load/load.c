/* load.c - `seckill load`: epoll HTTP/1.1 load generator with correctness
 * checks (see load.h for the model). Worker threads share nothing but a few
 * atomics (request budget, next fresh user id, progress, stop flag); each
 * keeps its own counters, histogram and accepted-order records, merged by
 * the calling thread after join. */
#include "tools/load/load.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "core/cli.h"
#include "core/clock.h"
#include "core/error.h"
#include "http/auth.h"
#include "store/store.h"

#define DEFAULT_PATH "/api/v1/activities/{id}/purchase"
#define MAX_HEADER_BYTES (64 * 1024)
#define MAX_RESPONSE_BYTES (1024 * 1024)
#define RBUF_INITIAL 2048
#define WBUF_CAP 1024 /* request line + headers + body: the path is < 512 */
#define MAX_EVENTS 1024
#define SCAN_NS (100 * 1000000LL) /* how often in-flight requests are checked for timeout */
#define MAX_CONSECUTIVE_FAILS 3   /* a connection that fails this often in a row is given up */
#define TOKEN_TTL_S 3600

/* ---- small helpers ---- */

static atomic_int load_interrupted;

void sk_load_interrupt(void)
{
    atomic_store(&load_interrupted, 1);
}
void sk_load_interrupt_reset(void)
{
    atomic_store(&load_interrupted, 0);
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void set_err(char *err, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t cap, const char *fmt, ...)
{
    if (!err || !cap) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
}

/* Writes v in decimal; returns the length (no terminator). */
static size_t u64_dec(uint64_t v, char *out)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    return n;
}

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* ---- HTTP response parsing ---- */

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
            if (size > (MAX_RESPONSE_BYTES >> 4)) return SK_EPROTO;
            size = size * 16 + (uint64_t)d;
        }
        if (digits == 0 || (q < le && *q != ';' && *q != ' ' && *q != '\t')) return SK_EPROTO;
        p = (size_t)(le - buf) + 2;
        if (size == 0) {
            /* trailers, then the empty line */
            for (;;) {
                char *te = memmem(buf + p, len - p, "\r\n", 2);
                if (!te) return len - p > MAX_HEADER_BYTES ? SK_EPROTO : 0;
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

int sk_load_parse_response(char *buf, size_t len, int eof, int head, struct sk_load_resp *r)
{
    size_t off = 0;
    for (;;) {
        char *hend = memmem(buf + off, len - off, "\r\n\r\n", 4);
        if (!hend) {
            if (len - off > MAX_HEADER_BYTES) return SK_EPROTO;
            /* a peer that closed mid-header sent something broken */
            return eof && len > off ? SK_EPROTO : 0;
        }
        const char *p = buf + off;
        size_t hlen = (size_t)(hend - p);
        if (hlen < 12 || memcmp(p, "HTTP/1.", 7) != 0 || (p[7] != '0' && p[7] != '1') ||
            p[8] != ' ')
            return SK_EPROTO;
        int status = 0;
        for (int i = 9; i < 12; i++) {
            if (p[i] < '0' || p[i] > '9') return SK_EPROTO;
            status = status * 10 + (p[i] - '0');
        }
        if (status < 100 || (hlen > 12 && p[12] != ' ' && p[12] != '\r')) return SK_EPROTO;
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
                if (vlen == 0 || vlen > 12) return SK_EPROTO;
                int64_t n = 0;
                for (size_t i = 0; i < vlen; i++) {
                    if (v[i] < '0' || v[i] > '9') return SK_EPROTO;
                    n = n * 10 + (v[i] - '0');
                }
                if (clen >= 0 && clen != n) return SK_EPROTO; /* conflicting lengths */
                if (n > MAX_RESPONSE_BYTES) return SK_EPROTO;
                clen = n;
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
        if (!eof) return len - body_off > MAX_RESPONSE_BYTES ? SK_EPROTO : 0;
        r->body = buf + body_off;
        r->body_len = len - body_off;
        r->consumed = len;
        r->keep_alive = 0;
        return 1;
    }
}

/* ---- minimal JSON field lookup (top level of one object) ---- */

static size_t skip_ws(const char *s, size_t n, size_t i)
{
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n'))
        i++;
    return i;
}

/* s[i] == '"': returns the index after the closing quote, or n on error. */
static size_t skip_string(const char *s, size_t n, size_t i)
{
    for (i++; i < n; i++) {
        if (s[i] == '\\')
            i++;
        else if (s[i] == '"')
            return i + 1;
    }
    return n + 1;
}

/* Skips one value; returns the index after it, or > n on error. */
static size_t skip_value(const char *s, size_t n, size_t i)
{
    if (i >= n) return n + 1;
    if (s[i] == '"') return skip_string(s, n, i);
    if (s[i] == '{' || s[i] == '[') {
        int depth = 0;
        while (i < n) {
            if (s[i] == '"') {
                i = skip_string(s, n, i);
                continue;
            }
            if (s[i] == '{' || s[i] == '[')
                depth++;
            else if (s[i] == '}' || s[i] == ']') {
                if (--depth == 0) return i + 1;
            }
            i++;
        }
        return n + 1;
    }
    size_t st = i;
    while (i < n && s[i] != ',' && s[i] != '}' && s[i] != ']' && s[i] != ' ' && s[i] != '\t' &&
           s[i] != '\r' && s[i] != '\n')
        i++;
    return i > st ? i : n + 1;
}

int sk_load_json_field(const char *s, size_t n, const char *key, const char **v, size_t *vlen,
                       int *is_str)
{
    size_t klen = strlen(key);
    size_t i = skip_ws(s, n, 0);
    if (i >= n || s[i] != '{') return SK_EPROTO;
    i = skip_ws(s, n, i + 1);
    if (i < n && s[i] == '}') return SK_ENOTFOUND;
    while (i < n) {
        if (s[i] != '"') return SK_EPROTO;
        size_t ks = i + 1, ke = skip_string(s, n, i);
        if (ke > n) return SK_EPROTO;
        i = skip_ws(s, n, ke);
        if (i >= n || s[i] != ':') return SK_EPROTO;
        i = skip_ws(s, n, i + 1);
        size_t vs = i, ve = skip_value(s, n, i);
        if (ve > n) return SK_EPROTO;
        if (ke - 1 - ks == klen && memcmp(s + ks, key, klen) == 0) {
            int str = s[vs] == '"';
            if (is_str) *is_str = str;
            *v = s + vs + (str ? 1 : 0);
            *vlen = ve - vs - (str ? 2 : 0);
            return 0;
        }
        i = skip_ws(s, n, ve);
        if (i < n && s[i] == ',')
            i = skip_ws(s, n, i + 1);
        else if (i < n && s[i] == '}')
            return SK_ENOTFOUND;
        else
            return SK_EPROTO;
    }
    return SK_EPROTO;
}

/* ---- options ---- */

void sk_load_opts_defaults(struct sk_load_opts *o)
{
    memset(o, 0, sizeof *o);
    snprintf(o->path, sizeof o->path, "%s", DEFAULT_PATH);
    snprintf(o->method, sizeof o->method, "POST");
    o->connections = 50;
    o->threads = 1;
    o->duration_ms = 60000;
    o->timeout_ms = 10000;
    o->users = 1000000;
    o->quantity = 1;
    o->auth = SK_LOAD_AUTH_HEADER;
    o->expect_stock = -1;
    o->limit = -1;
    o->order_check = -1;
}

static int parse_url(struct sk_load_opts *o, const char *url, char *err, size_t cap)
{
    if (strncmp(url, "http://", 7) != 0) {
        set_err(err, cap, "--url must be http://HOST:PORT (https is not supported): '%s'", url);
        return SK_EINVAL;
    }
    const char *h = url + 7, *colon = strchr(h, ':');
    if (!colon || colon == h || (size_t)(colon - h) >= sizeof o->host) {
        set_err(err, cap, "--url needs an IPv4 host and a port: '%s'", url);
        return SK_EINVAL;
    }
    char host[64];
    memcpy(host, h, (size_t)(colon - h));
    host[colon - h] = 0;
    if (!strcmp(host, "localhost")) snprintf(host, sizeof host, "127.0.0.1");
    struct in_addr a;
    if (inet_pton(AF_INET, host, &a) != 1) {
        set_err(err, cap, "--url host must be an IPv4 address: '%s'", url);
        return SK_EINVAL;
    }
    char port[8];
    const char *ps = colon + 1, *pe = ps;
    while (*pe >= '0' && *pe <= '9')
        pe++;
    if (pe == ps || pe - ps > 5 || (*pe && strcmp(pe, "/") != 0)) {
        set_err(err, cap, "--url must be http://HOST:PORT (use --path for the path): '%s'", url);
        return SK_EINVAL;
    }
    memcpy(port, ps, (size_t)(pe - ps));
    port[pe - ps] = 0;
    int64_t p;
    if (sk_cli_parse_i64(port, 1, 65535, &p) < 0) {
        set_err(err, cap, "--url port out of range: '%s'", url);
        return SK_EINVAL;
    }
    snprintf(o->host, sizeof o->host, "%s", host);
    o->port = (int)p;
    snprintf(o->url, sizeof o->url, "%.*s", (int)(sizeof o->url - 1), url);
    return 0;
}

static int parse_double(const char *s, double lo, double hi, double *out)
{
    if (!s || !*s) return SK_EINVAL;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !(v >= lo && v <= hi)) return SK_EINVAL;
    *out = v;
    return 0;
}

int sk_load_opts_check(struct sk_load_opts *o, char *err, size_t cap)
{
    if (!o->port) {
        set_err(err, cap, "--url is required (http://127.0.0.1:PORT)");
        return SK_EINVAL;
    }
    if (!o->host[0]) snprintf(o->host, sizeof o->host, "127.0.0.1");
    if (!o->url[0]) snprintf(o->url, sizeof o->url, "http://%s:%d", o->host, o->port);
    if (o->path[0] != '/') {
        set_err(err, cap, "--path must start with '/'");
        return SK_EINVAL;
    }
    for (const char *c = o->path; *c; c++)
        if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f) {
            set_err(err, cap, "--path must be visible ASCII without spaces");
            return SK_EINVAL;
        }
    if (strstr(o->path, "{id}") && !o->activity) {
        set_err(err, cap, "--activity ID is required for path %s", o->path);
        return SK_EINVAL;
    }
    if (!o->method[0]) {
        set_err(err, cap, "--method must not be empty");
        return SK_EINVAL;
    }
    for (const char *c = o->method; *c; c++)
        if (*c < 'A' || *c > 'Z') {
            set_err(err, cap, "--method must be an upper-case token such as GET or POST");
            return SK_EINVAL;
        }
    if (o->connections < 1 || o->connections > SK_LOAD_MAX_CONNS || o->threads < 1 ||
        o->threads > SK_LOAD_MAX_THREADS || o->threads > o->connections) {
        set_err(err, cap,
                "--connections must be 1..%d and --threads 1..%d, at most one per connection",
                SK_LOAD_MAX_CONNS, SK_LOAD_MAX_THREADS);
        return SK_EINVAL;
    }
    if (o->duration_ms < 1 || o->duration_ms > 3600000 || o->requests < 0 || o->timeout_ms < 1) {
        set_err(err, cap, "--duration must be in (0, 3600] seconds and --requests >= 1");
        return SK_EINVAL;
    }
    if (o->users < 1 || o->quantity < 1 || !(o->retry_ratio >= 0 && o->retry_ratio <= 1) ||
        o->rate < 0) {
        set_err(err, cap, "--users and --quantity must be >= 1, --retry-ratio in [0,1]");
        return SK_EINVAL;
    }
    if (o->user_base > UINT64_MAX - o->users) {
        set_err(err, cap, "--user-base + --users overflows a user id");
        return SK_EINVAL;
    }
    if (o->auth == SK_LOAD_AUTH_HMAC && !o->hmac_secret[0]) {
        set_err(err, cap, "--auth hmac needs --hmac-secret S");
        return SK_EINVAL;
    }
    return 0;
}

static int usage(FILE *f)
{
    fprintf(f,
            "usage: seckill load --url http://127.0.0.1:PORT --activity ID [options]\n"
            "\n"
            "HTTP/1.1 load generator for the purchase route, with correctness checks.\n"
            "Keep-alive connections on epoll; closed loop by default (each connection sends\n"
            "its next request when the answer arrives), open loop with --rate (latency from\n"
            "the intended send time, so a stalled server shows up in the percentiles).\n"
            "\n"
            "target:\n"
            "  --url URL           http://HOST:PORT, HOST an IPv4 address or localhost\n"
            "  --activity ID       activity id, put into the path's {id}\n"
            "  --path P            request path (default %s)\n"
            "  --method M          request method (default POST; GET and HEAD send no body)\n"
            "load:\n"
            "  --connections N     keep-alive connections, 1..%d (default 50)\n"
            "  --threads N         worker threads, 1..%d (default 1)\n"
            "  --requests N        stop after N requests in total\n"
            "  --duration S        stop after S seconds (default 60, at most 3600); with\n"
            "                      --requests, whichever comes first\n"
            "  --rate R            open loop: R requests/s in total (default: closed loop)\n"
            "  --timeout S         one request's time limit (default 10)\n"
            "buyers:\n"
            "  --users N           distinct user ids 1..N (default 1000000)\n"
            "  --user-base B       add B to every user id (default 0)\n"
            "  --retry-ratio F     fraction of requests that reuse a user id already used\n"
            "                      (repeat buyers), 0..1 (default 0)\n"
            "  --quantity Q        units per purchase (default 1)\n"
            "  --auth MODE         trusted-header (X-User-Id, default) or hmac (Bearer token)\n"
            "  --hmac-secret S     secret of --auth hmac\n"
            "checks:\n"
            "  --expect-stock N    accepted units must never exceed N, and must equal N\n"
            "                      when the answered demand covers it\n"
            "  --limit N           no user may get more than N units\n"
            "  --db SPEC           every accepted order must reach this store (sqlite:PATH or\n"
            "                      postgres://...) with the same user and quantity\n"
            "  --db-wait S         seconds the order pipeline may take (default 30)\n"
            "  --order-check MODE  yes: every 200 needs a unique order_id; no: skip (static\n"
            "                      routes); auto (default): yes when the path ends in /purchase\n"
            "                      Always checked: no 5xx, no 400/401/404/405/413/431 (a\n"
            "                      misconfigured run), no transport or protocol errors.\n"
            "output:\n"
            "  --json              one JSON object on stdout instead of the summary\n"
            "  --quiet             no progress lines on stderr\n"
            "\n"
            "exit status: 0 every check passed, 1 a check failed or the run could not\n"
            "start, 2 bad usage\n",
            DEFAULT_PATH, SK_LOAD_MAX_CONNS, SK_LOAD_MAX_THREADS);
    return f == stdout ? SK_EXIT_OK : SK_EXIT_USAGE;
}

int sk_load_parse_args(struct sk_load_opts *o, int argc, char **argv, char *err, size_t cap)
{
    sk_load_opts_defaults(o);
    o->progress = isatty(2);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
        if (!strcmp(a, "--json")) {
            o->json = 1;
            continue;
        }
        if (!strcmp(a, "--quiet")) {
            o->progress = 0;
            continue;
        }
        if (strncmp(a, "--", 2) != 0) {
            set_err(err, cap, "unexpected argument '%s'", a);
            return SK_EINVAL;
        }
        if (i + 1 >= argc) {
            set_err(err, cap, "%s needs a value", a);
            return SK_EINVAL;
        }
        const char *v = argv[++i];
        double d;
        int bad = 0;
        if (!strcmp(a, "--url")) {
            if (parse_url(o, v, err, cap) < 0) return SK_EINVAL;
        } else if (!strcmp(a, "--activity")) {
            bad = sk_cli_parse_u64(v, &o->activity) < 0 || o->activity == 0;
        } else if (!strcmp(a, "--path")) {
            bad = strlen(v) >= sizeof o->path;
            if (!bad) snprintf(o->path, sizeof o->path, "%s", v);
        } else if (!strcmp(a, "--method")) {
            bad = !*v || strlen(v) >= sizeof o->method;
            if (!bad) snprintf(o->method, sizeof o->method, "%s", v);
        } else if (!strcmp(a, "--connections")) {
            bad = sk_cli_parse_i64(v, 1, SK_LOAD_MAX_CONNS, &o->connections) < 0;
        } else if (!strcmp(a, "--threads")) {
            bad = sk_cli_parse_i64(v, 1, SK_LOAD_MAX_THREADS, &o->threads) < 0;
        } else if (!strcmp(a, "--requests")) {
            bad = sk_cli_parse_i64(v, 1, 1000000000000LL, &o->requests) < 0;
        } else if (!strcmp(a, "--duration")) {
            bad = parse_double(v, 0.001, 3600, &d) < 0;
            if (!bad) o->duration_ms = (int64_t)llround(d * 1000);
        } else if (!strcmp(a, "--timeout")) {
            bad = parse_double(v, 0.001, 3600, &d) < 0;
            if (!bad) o->timeout_ms = (int64_t)llround(d * 1000);
        } else if (!strcmp(a, "--rate")) {
            bad = parse_double(v, 0.001, 1e8, &o->rate) < 0;
        } else if (!strcmp(a, "--users")) {
            bad = sk_cli_parse_u64(v, &o->users) < 0 || o->users == 0;
        } else if (!strcmp(a, "--user-base")) {
            bad = sk_cli_parse_u64(v, &o->user_base) < 0;
        } else if (!strcmp(a, "--retry-ratio")) {
            bad = parse_double(v, 0, 1, &o->retry_ratio) < 0;
        } else if (!strcmp(a, "--quantity")) {
            bad = sk_cli_parse_i64(v, 1, 1000000, &o->quantity) < 0;
        } else if (!strcmp(a, "--auth")) {
            if (!strcmp(v, "trusted-header"))
                o->auth = SK_LOAD_AUTH_HEADER;
            else if (!strcmp(v, "hmac"))
                o->auth = SK_LOAD_AUTH_HMAC;
            else
                bad = 1;
        } else if (!strcmp(a, "--hmac-secret")) {
            bad = !*v || strlen(v) >= sizeof o->hmac_secret;
            if (!bad) snprintf(o->hmac_secret, sizeof o->hmac_secret, "%s", v);
        } else if (!strcmp(a, "--expect-stock")) {
            bad = sk_cli_parse_i64(v, 0, INT64_MAX, &o->expect_stock) < 0;
        } else if (!strcmp(a, "--limit")) {
            bad = sk_cli_parse_i64(v, 1, INT64_MAX, &o->limit) < 0;
        } else if (!strcmp(a, "--db")) {
            bad = !*v || strlen(v) >= sizeof o->db;
            if (!bad) snprintf(o->db, sizeof o->db, "%s", v);
        } else if (!strcmp(a, "--db-wait")) {
            int64_t sec;
            bad = sk_cli_parse_i64(v, 0, 3600, &sec) < 0;
            if (!bad) o->db_wait_ms = sec * 1000;
        } else if (!strcmp(a, "--order-check")) {
            if (!strcmp(v, "yes"))
                o->order_check = 1;
            else if (!strcmp(v, "no"))
                o->order_check = 0;
            else if (!strcmp(v, "auto"))
                o->order_check = -1;
            else
                bad = 1;
        } else {
            set_err(err, cap, "unknown option '%s' (see seckill load --help)", a);
            return SK_EINVAL;
        }
        if (bad) {
            set_err(err, cap, "bad value for %s: '%s'", a, v);
            return SK_EINVAL;
        }
    }
    /* --requests alone keeps a time bound: the default duration */
    if (o->hmac_secret[0] && o->auth != SK_LOAD_AUTH_HMAC) {
        set_err(err, cap, "--hmac-secret needs --auth hmac");
        return SK_EINVAL;
    }
    int rc = sk_load_opts_check(o, err, cap);
    if (rc < 0 && err && cap > 6 && strncmp(err, "", 6) != 0) {
        char tmp[256];
        snprintf(tmp, sizeof tmp, "%s", err);
        set_err(err, cap, "%s", tmp);
    }
    return rc;
}

/* ---- run state ---- */

struct rec {
    uint64_t uid;
    int64_t qty;
    size_t oid_off;
    uint32_t oid_len;
};

/* Accepted orders: records plus an arena of their order id bytes. */
struct sk_load_records {
    struct rec *v;
    size_t n, cap;
    char *arena;
    size_t alen, acap;
};

enum cstate { C_CLOSED, C_CONNECTING, C_IDLE, C_BUSY, C_DEAD };

struct worker;

struct conn {
    int fd;
    enum cstate state;
    int want_out; /* EPOLLOUT registered */
    int fails;    /* consecutive failures without a good answer */
    struct worker *w;
    char *rbuf;
    size_t rlen, rcap;
    char wbuf[WBUF_CAP];
    size_t wlen, woff;
    int64_t origin_ns; /* latency origin: send time, or intended time (open loop) */
    int64_t sent_ns;   /* send (or connect) time, for the timeout */
    uint64_t uid;
    int fresh;
};

struct run {
    const struct sk_load_opts *o;
    struct sockaddr_in addr;
    char prefix[1024]; /* request line and fixed headers, up to the identity header */
    size_t prefix_len;
    char body[64];
    size_t body_len;
    int head, order_check;
    int64_t start_ns, deadline_ns, expiry;
    atomic_llong budget;      /* sends left (closed loop with --requests) */
    atomic_ullong next_fresh; /* next fresh user index, 0-based */
    atomic_ullong progress;   /* answers so far, all threads */
    atomic_int running;
    /* connect phase: workers connect, report, and wait for `go`; the
     * starter sets the clock in between, so no request is timed before the
     * connections exist (a SYN backlog overflow would otherwise show up as
     * second-long latencies) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n_connected, go;
};

struct worker {
    struct run *run;
    int idx;
    pthread_t tid;
    int started;
    int ep, tfd;
    struct conn *conns;
    size_t nconns, live, inflight;
    struct conn **idle; /* open loop: free connections */
    size_t nidle;
    double rate; /* open loop, this thread's share */
    uint64_t share, next_idx;
    int64_t armed_ns;
    uint64_t rng;
    int64_t end_ns;
    int warming; /* connect phase: connected sockets wait for the start */
    struct sk_load_result res;
    struct sk_load_records rec;
    uint64_t fresh_contending; /* fresh users answered 200 or sold_out */
    int oom;
};

static int interrupted(void)
{
    return atomic_load_explicit(&load_interrupted, memory_order_relaxed);
}

static int rec_add(struct sk_load_records *rs, uint64_t uid, int64_t qty, const char *oid,
                   size_t oid_len)
{
    if (rs->n == rs->cap) {
        size_t cap = rs->cap ? rs->cap * 2 : 1024;
        struct rec *nv = realloc(rs->v, cap * sizeof *nv);
        if (!nv) return SK_ENOMEM;
        rs->v = nv;
        rs->cap = cap;
    }
    if (rs->alen + oid_len > rs->acap) {
        size_t cap = rs->acap ? rs->acap * 2 : 65536;
        while (cap < rs->alen + oid_len)
            cap *= 2;
        char *na = realloc(rs->arena, cap);
        if (!na) return SK_ENOMEM;
        rs->arena = na;
        rs->acap = cap;
    }
    memcpy(rs->arena + rs->alen, oid, oid_len);
    rs->v[rs->n++] = (struct rec){uid, qty, rs->alen, (uint32_t)oid_len};
    rs->alen += oid_len;
    return 0;
}

static void rec_free(struct sk_load_records *rs)
{
    if (!rs) return;
    free(rs->v);
    free(rs->arena);
    memset(rs, 0, sizeof *rs);
}

/* Adds n to the count of an error code (a small table: codes are few). */
static void count_code(struct sk_load_result *r, const char *code, size_t len, uint64_t n)
{
    for (size_t i = 0; i < r->n_refusals; i++)
        if (strlen(r->refusals[i].code) == len && !memcmp(r->refusals[i].code, code, len)) {
            r->refusals[i].n += n;
            return;
        }
    if (r->n_refusals < SK_LOAD_MAX_CODES && len < sizeof r->refusals[0].code) {
        memcpy(r->refusals[r->n_refusals].code, code, len);
        r->refusals[r->n_refusals].code[len] = 0;
        r->refusals[r->n_refusals].n = n;
        r->n_refusals++;
        return;
    }
    r->refusals_other += n;
}

/* ---- connection handling ---- */

static void ep_mod(struct conn *c, int out)
{
    if (c->want_out == out) return;
    struct epoll_event ev = {.events = EPOLLIN | (out ? EPOLLOUT : 0u), .data.ptr = c};
    epoll_ctl(c->w->ep, EPOLL_CTL_MOD, c->fd, &ev);
    c->want_out = out;
}

static int issuing(const struct worker *w, int64_t now)
{
    const struct run *run = w->run;
    if (interrupted() || now >= run->deadline_ns) return 0;
    if (run->o->rate > 0) return w->next_idx < w->share;
    return run->o->requests == 0 ||
           atomic_load_explicit(&((struct run *)run)->budget, memory_order_relaxed) > 0;
}

static void close_conn(struct conn *c, enum cstate to)
{
    struct worker *w = c->w;
    if (c->fd >= 0) {
        close(c->fd); /* also leaves the epoll set */
        c->fd = -1;
    }
    if (c->state == C_BUSY) w->inflight--;
    if (c->state == C_IDLE && w->run->o->rate > 0) {
        for (size_t i = 0; i < w->nidle; i++)
            if (w->idle[i] == c) {
                w->idle[i] = w->idle[--w->nidle];
                break;
            }
    }
    if (to == C_DEAD && c->state != C_DEAD) w->live--;
    c->state = to;
    c->rlen = 0;
    c->want_out = 0;
}

static void on_idle(struct conn *c);

static void start_connect(struct conn *c)
{
    struct worker *w = c->w;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        w->res.err_connect++;
        close_conn(c, C_DEAD);
        return;
    }
    int one = 1;
    /* one write per request: never wait for Nagle */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->fd = fd;
    c->sent_ns = now_ns();
    c->state = C_CONNECTING;
    c->want_out = 1;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
    if (epoll_ctl(w->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
        w->res.err_connect++;
        close_conn(c, C_DEAD);
        return;
    }
    if (connect(fd, (const struct sockaddr *)&w->run->addr, sizeof w->run->addr) < 0 &&
        errno != EINPROGRESS) {
        w->res.err_connect++;
        close_conn(c, ++c->fails >= MAX_CONSECUTIVE_FAILS ? C_DEAD : C_CLOSED);
    }
    /* completion (or failure) arrives as EPOLLOUT */
}

/* After a failure or a server-side close: reconnect while there is work. */
static void reconnect(struct conn *c, int64_t now)
{
    struct worker *w = c->w;
    if (c->state != C_DEAD) close_conn(c, C_CLOSED);
    if (c->state == C_CLOSED && issuing(w, now)) {
        w->res.reconnects++;
        start_connect(c);
    }
}

static void fail_conn(struct conn *c, uint64_t *counter, int64_t now)
{
    (*counter)++;
    if (++c->fails >= MAX_CONSECUTIVE_FAILS) {
        close_conn(c, C_DEAD);
        return;
    }
    reconnect(c, now);
}

static uint64_t pick_user(struct worker *w, int *fresh)
{
    struct run *run = w->run;
    const struct sk_load_opts *o = run->o;
    uint64_t used = atomic_load_explicit(&run->next_fresh, memory_order_relaxed);
    if (used > o->users) used = o->users;
    if (used > 0 && o->retry_ratio > 0 &&
        (double)(xorshift(&w->rng) >> 11) / 9007199254740992.0 < o->retry_ratio) {
        *fresh = 0;
        return o->user_base + 1 + xorshift(&w->rng) % used;
    }
    uint64_t k = atomic_fetch_add_explicit(&run->next_fresh, 1, memory_order_relaxed);
    if (k < o->users) {
        *fresh = 1;
        return o->user_base + 1 + k;
    }
    /* every id used once: the rest are repeat buyers */
    *fresh = 0;
    return o->user_base + 1 + xorshift(&w->rng) % o->users;
}

static void send_request(struct conn *c, int64_t origin, int64_t now)
{
    struct worker *w = c->w;
    struct run *run = w->run;
    c->uid = pick_user(w, &c->fresh);
    char *p = c->wbuf;
    memcpy(p, run->prefix, run->prefix_len);
    p += run->prefix_len;
    if (run->o->auth == SK_LOAD_AUTH_HMAC) {
        memcpy(p, "Authorization: Bearer ", 22);
        p += 22;
        int n = sk_auth_make_token(run->o->hmac_secret, strlen(run->o->hmac_secret), c->uid,
                                   run->expiry, p, SK_AUTH_TOKEN_MAX + 1);
        p += n > 0 ? n : 0;
    } else {
        memcpy(p, "X-User-Id: ", 11);
        p += 11;
        p += u64_dec(c->uid, p);
    }
    memcpy(p, "\r\n\r\n", 4);
    p += 4;
    memcpy(p, run->body, run->body_len);
    p += run->body_len;
    c->wlen = (size_t)(p - c->wbuf);
    c->woff = 0;
    c->origin_ns = origin;
    c->sent_ns = now;
    c->state = C_BUSY;
    w->inflight++;
    w->res.sent++;
    ssize_t n = send(c->fd, c->wbuf, c->wlen, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
        fail_conn(c, &w->res.err_closed, now);
        return;
    }
    c->woff = n > 0 ? (size_t)n : 0;
    ep_mod(c, c->woff < c->wlen);
}

static void on_idle(struct conn *c)
{
    struct worker *w = c->w;
    struct run *run = w->run;
    c->state = C_IDLE;
    if (w->warming) return;
    if (run->o->rate > 0) {
        w->idle[w->nidle++] = c; /* dispatch_due hands it the next due request */
        return;
    }
    int64_t now = now_ns();
    if (!issuing(w, now)) return;
    if (run->o->requests > 0 &&
        atomic_fetch_sub_explicit(&run->budget, 1, memory_order_relaxed) <= 0)
        return;
    send_request(c, now, now);
}

static void on_response(struct conn *c, const struct sk_load_resp *r, int64_t now)
{
    struct worker *w = c->w;
    struct sk_load_result *res = &w->res;
    const struct sk_load_opts *o = w->run->o;
    int64_t lat = now - c->origin_ns;
    sk_hist_record(&res->latency, lat > 0 ? (uint64_t)(lat / 1000) : 0);
    res->completed++;
    atomic_fetch_add_explicit(&w->run->progress, 1, memory_order_relaxed);
    if (r->status < 600)
        res->status[r->status]++;
    else
        res->status_other++;
    w->inflight--;
    c->fails = 0;
    int contending = 0;
    if (r->status >= 200 && r->status < 300) {
        if (r->status == 200) {
            res->accepted++;
            int64_t qty = o->quantity;
            const char *v;
            size_t vl;
            int str;
            if (sk_load_json_field(r->body, r->body_len, "quantity", &v, &vl, &str) == 0 && !str &&
                vl > 0 && vl < 20) {
                char tmp[24];
                memcpy(tmp, v, vl);
                tmp[vl] = 0;
                int64_t q;
                if (sk_cli_parse_i64(tmp, 1, INT64_MAX, &q) == 0) qty = q;
            }
            res->accepted_units += (uint64_t)qty;
            contending = 1;
            if (w->run->order_check) {
                if (sk_load_json_field(r->body, r->body_len, "order_id", &v, &vl, &str) == 0 &&
                    str && vl > 0) {
                    if (!w->oom && rec_add(&w->rec, c->uid, qty, v, vl) < 0) w->oom = 1;
                } else {
                    res->missing_orders++;
                }
            }
        }
    } else if (r->status >= 300) {
        const char *v;
        size_t vl;
        int str;
        if (sk_load_json_field(r->body, r->body_len, "error", &v, &vl, &str) == 0 && str) {
            count_code(res, v, vl, 1);
            if (vl == 8 && !memcmp(v, "sold_out", 8)) contending = 1;
        } else {
            res->refusals_other++;
        }
    }
    if (c->fresh) {
        res->distinct_users++;
        if (contending) w->fresh_contending++;
    }
}

static void on_readable(struct conn *c, int64_t now)
{
    struct worker *w = c->w;
    if (c->rlen == c->rcap) {
        if (c->rcap >= MAX_RESPONSE_BYTES + MAX_HEADER_BYTES) {
            fail_conn(c, &w->res.err_protocol, now);
            return;
        }
        size_t cap = c->rcap ? c->rcap * 2 : RBUF_INITIAL;
        char *nb = realloc(c->rbuf, cap);
        if (!nb) {
            w->oom = 1;
            fail_conn(c, &w->res.err_protocol, now);
            return;
        }
        c->rbuf = nb;
        c->rcap = cap;
    }
    ssize_t n = recv(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen, 0);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
        if (c->state == C_BUSY)
            fail_conn(c, &w->res.err_closed, now);
        else
            reconnect(c, now);
        return;
    }
    int eof = n == 0;
    c->rlen += (size_t)n;
    if (c->state != C_BUSY) {
        /* idle keep-alive closed by the server: normal; bytes nobody asked for: not */
        if (c->rlen > 0)
            fail_conn(c, &w->res.err_protocol, now);
        else
            reconnect(c, now);
        return;
    }
    struct sk_load_resp r;
    int rc = sk_load_parse_response(c->rbuf, c->rlen, eof, w->run->head, &r);
    if (rc == 0) {
        if (eof) fail_conn(c, &w->res.err_closed, now);
        return;
    }
    if (rc < 0 || r.consumed != c->rlen) {
        /* garbage, or bytes after the answer to a request never pipelined */
        fail_conn(c, &w->res.err_protocol, now);
        return;
    }
    on_response(c, &r, now);
    c->rlen = 0;
    if (!r.keep_alive || eof) {
        c->state = C_IDLE; /* answered: no longer in flight */
        reconnect(c, now);
        return;
    }
    on_idle(c);
}

static void on_event(struct conn *c, uint32_t ev, int64_t now)
{
    struct worker *w = c->w;
    if (c->state == C_CONNECTING) {
        if (!(ev & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr) {
            w->res.err_connect++;
            close_conn(c, ++c->fails >= MAX_CONSECUTIVE_FAILS ? C_DEAD : C_CLOSED);
            if (c->state == C_CLOSED && issuing(w, now)) start_connect(c);
            return;
        }
        ep_mod(c, 0);
        on_idle(c);
        return;
    }
    if (c->state == C_BUSY && (ev & EPOLLOUT) && c->woff < c->wlen) {
        ssize_t n = send(c->fd, c->wbuf + c->woff, c->wlen - c->woff, MSG_NOSIGNAL);
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            fail_conn(c, &w->res.err_closed, now);
            return;
        }
        if (n > 0) c->woff += (size_t)n;
        if (c->woff == c->wlen) ep_mod(c, 0);
    }
    if ((c->state == C_BUSY || c->state == C_IDLE) && (ev & (EPOLLIN | EPOLLHUP | EPOLLERR)))
        on_readable(c, now);
}

/* ---- open loop ---- */

static int64_t intended_ns(const struct worker *w, uint64_t idx)
{
    return w->run->start_ns + (int64_t)((double)idx * 1e9 / w->rate);
}

static void dispatch_due(struct worker *w, int64_t now)
{
    while (w->next_idx < w->share && w->nidle > 0 && issuing(w, now)) {
        int64_t t = intended_ns(w, w->next_idx);
        if (t > now) break;
        struct conn *c = w->idle[--w->nidle];
        w->next_idx++;
        send_request(c, t, now);
    }
    /* wake up for the next intended send only when a connection could take it;
     * otherwise the next answer frees one */
    int64_t want = 0;
    if (w->next_idx < w->share && w->nidle > 0) want = intended_ns(w, w->next_idx);
    if (want > now && want != w->armed_ns) {
        struct itimerspec its = {
            .it_value = {.tv_sec = want / 1000000000LL, .tv_nsec = want % 1000000000LL}};
        timerfd_settime(w->tfd, TFD_TIMER_ABSTIME, &its, NULL);
        w->armed_ns = want;
    }
}

/* ---- worker thread ---- */

static void scan_timeouts(struct worker *w, int64_t now)
{
    int64_t limit = w->run->o->timeout_ms * 1000000LL;
    for (size_t i = 0; i < w->nconns; i++) {
        struct conn *c = &w->conns[i];
        if ((c->state == C_BUSY && now - c->sent_ns > limit))
            fail_conn(c, &w->res.err_timeout, now);
        else if (c->state == C_CONNECTING && now - c->sent_ns > limit) {
            /* a connect that never completes (SYN backlog full) */
            w->res.err_connect++;
            close_conn(c, ++c->fails >= MAX_CONSECUTIVE_FAILS ? C_DEAD : C_CLOSED);
        } else if (c->state == C_CLOSED && issuing(w, now)) {
            start_connect(c);
        }
    }
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct run *run = w->run;
    const struct sk_load_opts *o = run->o;
    struct epoll_event evs[MAX_EVENTS];
    w->warming = 1;
    for (size_t i = 0; i < w->nconns; i++)
        start_connect(&w->conns[i]);
    int64_t now = now_ns(), warm_end = now + o->timeout_ms * 1000000LL;
    for (;;) {
        size_t connecting = 0;
        for (size_t i = 0; i < w->nconns; i++)
            connecting += w->conns[i].state == C_CONNECTING;
        if (!connecting || interrupted() || now >= warm_end) break;
        int n = epoll_wait(w->ep, evs, MAX_EVENTS, 50);
        now = now_ns();
        for (int i = 0; i < n; i++)
            if (evs[i].data.ptr) on_event(evs[i].data.ptr, evs[i].events, now);
    }
    pthread_mutex_lock(&run->mu);
    run->n_connected++;
    pthread_cond_broadcast(&run->cv);
    while (!run->go)
        pthread_cond_wait(&run->cv, &run->mu);
    pthread_mutex_unlock(&run->mu);
    w->warming = 0;
    for (size_t i = 0; i < w->nconns; i++)
        if (w->conns[i].state == C_IDLE) on_idle(&w->conns[i]);
    now = now_ns();
    int64_t next_scan = now + SCAN_NS;
    for (;;) {
        now = now_ns();
        int more = issuing(w, now);
        if (o->rate > 0) dispatch_due(w, now);
        if (!more) {
            /* nothing more to send: drop connections that carry nothing */
            for (size_t i = 0; i < w->nconns; i++)
                if (w->conns[i].state == C_CONNECTING || w->conns[i].state == C_IDLE ||
                    w->conns[i].state == C_CLOSED)
                    close_conn(&w->conns[i], C_CLOSED);
            if (w->inflight == 0) break;
        }
        if (w->live == 0) break;
        if (now >= next_scan) {
            scan_timeouts(w, now);
            next_scan = now + SCAN_NS;
        }
        int64_t wait = next_scan - now;
        if (more && run->deadline_ns - now < wait) wait = run->deadline_ns - now;
        int timeout_ms = wait <= 0 ? 0 : (int)((wait + 999999) / 1000000);
        int n = epoll_wait(w->ep, evs, MAX_EVENTS, timeout_ms);
        if (n < 0 && errno != EINTR) break;
        now = now_ns();
        for (int i = 0; i < n; i++) {
            if (evs[i].data.ptr == NULL) {
                uint64_t ticks;
                if (read(w->tfd, &ticks, sizeof ticks) < 0) {
                    /* spurious wake-up: dispatch_due re-arms */
                }
                w->armed_ns = 0;
                continue;
            }
            on_event(evs[i].data.ptr, evs[i].events, now);
        }
    }
    now = now_ns();
    if (o->rate > 0) {
        /* due sends that never found a free connection before the end */
        /* the last millisecond is left out: a send due just before the
         * deadline may miss it by the wake-up latency alone */
        int64_t stop = (now < run->deadline_ns ? now : run->deadline_ns) - 1000000LL;
        uint64_t due = stop <= run->start_ns
                           ? 0
                           : (uint64_t)((double)(stop - run->start_ns) * w->rate / 1e9) + 1;
        if (due > w->share) due = w->share;
        if (due > w->next_idx && !interrupted()) w->res.backlog_at_end = due - w->next_idx;
    }
    for (size_t i = 0; i < w->nconns; i++)
        if (w->conns[i].state == C_BUSY) {
            w->res.err_timeout++;
            close_conn(&w->conns[i], C_CLOSED);
        } else if (w->conns[i].fd >= 0) {
            close_conn(&w->conns[i], w->conns[i].state == C_DEAD ? C_DEAD : C_CLOSED);
        }
    w->end_ns = now;
    atomic_fetch_sub(&run->running, 1);
    return NULL;
}

/* ---- checks ---- */

static void violation(struct sk_load_result *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void violation(struct sk_load_result *r, const char *fmt, ...)
{
    r->ok = 0;
    if (r->n_violations >= SK_LOAD_MAX_VIOLATIONS) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->violations[r->n_violations++], sizeof r->violations[0], fmt, ap);
    va_end(ap);
}

static const struct sk_load_records *sort_recs;

static int cmp_oid(const void *a, const void *b)
{
    const struct rec *x = a, *y = b;
    size_t n = x->oid_len < y->oid_len ? x->oid_len : y->oid_len;
    int c = memcmp(sort_recs->arena + x->oid_off, sort_recs->arena + y->oid_off, n);
    if (c) return c;
    return x->oid_len < y->oid_len ? -1 : x->oid_len > y->oid_len;
}

static int cmp_uid(const void *a, const void *b)
{
    const struct rec *x = a, *y = b;
    return x->uid < y->uid ? -1 : x->uid > y->uid;
}

static void check(const struct sk_load_opts *o, struct sk_load_result *r, uint64_t contending)
{
    r->ok = 1;
    uint64_t transport = r->err_connect + r->err_closed + r->err_timeout + r->err_protocol;
    if (transport)
        violation(r,
                  "%" PRIu64 " transport errors (connect %" PRIu64 ", closed %" PRIu64
                  ", timeout %" PRIu64 ", protocol %" PRIu64 ")",
                  transport, r->err_connect, r->err_closed, r->err_timeout, r->err_protocol);
    uint64_t s5 = r->status_other;
    for (int s = 500; s < 600; s++)
        s5 += r->status[s];
    if (s5) violation(r, "%" PRIu64 " responses were 5xx", s5);
    /* refusals of the request itself, not of the purchase: the load was
     * misconfigured (--auth, --activity, --path) and measured nothing */
    uint64_t bad = r->status[400] + r->status[401] + r->status[404] + r->status[405] +
                   r->status[413] + r->status[431];
    if (bad)
        violation(r,
                  "%" PRIu64 " requests were refused as malformed, unauthorized or not found "
                  "(400/401/404/405/413/431: check --auth, --activity, --path)",
                  bad);
    if (r->order_check) {
        struct sk_load_records *rs = r->rec;
        size_t n = rs ? rs->n : 0;
        if (r->missing_orders)
            violation(r, "%" PRIu64 " 200 responses carried no order_id", r->missing_orders);
        if (n > 1) {
            sort_recs = rs;
            qsort(rs->v, n, sizeof *rs->v, cmp_oid);
            size_t first = n;
            for (size_t i = 1; i < n; i++)
                if (cmp_oid(&rs->v[i - 1], &rs->v[i]) == 0) {
                    r->duplicate_orders++;
                    if (first == n) first = i;
                }
            if (r->duplicate_orders)
                violation(r, "%" PRIu64 " duplicate order ids (e.g. \"%.*s\")", r->duplicate_orders,
                          (int)(rs->v[first].oid_len > 80 ? 80 : rs->v[first].oid_len),
                          rs->arena + rs->v[first].oid_off);
        }
        r->unique_orders = n - r->duplicate_orders;
        /* units per user, from the accepted answers */
        if (n > 0) {
            qsort(rs->v, n, sizeof *rs->v, cmp_uid);
            uint64_t worst_uid = 0;
            int64_t worst = 0;
            for (size_t i = 0; i < n;) {
                size_t j = i;
                int64_t units = 0;
                while (j < n && rs->v[j].uid == rs->v[i].uid)
                    units += rs->v[j++].qty;
                if (units > r->max_units_one_user) r->max_units_one_user = units;
                if (o->limit >= 0 && units > o->limit) {
                    r->users_over_limit++;
                    if (units > worst) {
                        worst = units;
                        worst_uid = rs->v[i].uid;
                    }
                }
                i = j;
            }
            if (r->users_over_limit)
                violation(r,
                          "%" PRIu64 " users got more than the limit of %" PRId64 " (user %" PRIu64
                          " got %" PRId64 ")",
                          r->users_over_limit, o->limit, worst_uid, worst);
        }
    }
    /* demand: every fresh user that got 200 or sold_out could take Q units
     * (none when Q is above the per-user limit) */
    int64_t per_user = o->limit >= 0 && o->quantity > o->limit ? 0 : o->quantity;
    r->demand_units = contending * (uint64_t)per_user;
    if (o->expect_stock >= 0) {
        uint64_t stock = (uint64_t)o->expect_stock;
        /* with Q > 1, a remainder below Q can never sell */
        uint64_t sellable = stock - stock % (uint64_t)o->quantity;
        if (r->accepted_units > stock)
            violation(r, "oversold: %" PRIu64 " units accepted, stock is %" PRIu64,
                      r->accepted_units, stock);
        else if (r->demand_units >= stock && r->accepted_units < sellable)
            violation(r,
                      "undersold: %" PRIu64 " units accepted of %" PRIu64
                      " while the demand was at least %" PRIu64,
                      r->accepted_units, sellable, r->demand_units);
    }
}

/* ---- run ---- */

static void merge(struct sk_load_result *r, const struct sk_load_result *p)
{
    r->sent += p->sent;
    r->completed += p->completed;
    for (int s = 0; s < 600; s++)
        r->status[s] += p->status[s];
    r->status_other += p->status_other;
    for (size_t i = 0; i < p->n_refusals; i++)
        count_code(r, p->refusals[i].code, strlen(p->refusals[i].code), p->refusals[i].n);
    r->refusals_other += p->refusals_other;
    r->err_connect += p->err_connect;
    r->err_closed += p->err_closed;
    r->err_timeout += p->err_timeout;
    r->err_protocol += p->err_protocol;
    r->reconnects += p->reconnects;
    r->backlog_at_end += p->backlog_at_end;
    sk_hist_add(&r->latency, &p->latency);
    r->accepted += p->accepted;
    r->accepted_units += p->accepted_units;
    r->distinct_users += p->distinct_users;
    r->missing_orders += p->missing_orders;
}

static int merge_records(struct sk_load_records *dst, const struct sk_load_records *src)
{
    for (size_t i = 0; i < src->n; i++)
        if (rec_add(dst, src->v[i].uid, src->v[i].qty, src->arena + src->v[i].oid_off,
                    src->v[i].oid_len) < 0)
            return SK_ENOMEM;
    return 0;
}

/* Room for the connections: raise the soft fd limit toward the hard one. */
static int ensure_fds(int64_t need, char *err, size_t cap)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0) return 0;
    if (rl.rlim_cur != RLIM_INFINITY && (int64_t)rl.rlim_cur >= need) return 0;
    if (rl.rlim_max != RLIM_INFINITY && (int64_t)rl.rlim_max < need) {
        set_err(err, cap,
                "%" PRId64 " connections need %" PRId64 " file descriptors; the limit is %llu",
                need - 64, need, (unsigned long long)rl.rlim_max);
        return SK_EINVAL;
    }
    rl.rlim_cur = (rlim_t)need;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
        set_err(err, cap, "cannot raise the file descriptor limit to %" PRId64 ": %s", need,
                strerror(errno));
        return SK_EINVAL;
    }
    return 0;
}

static void worker_free(struct worker *w)
{
    if (w->conns) {
        for (size_t i = 0; i < w->nconns; i++) {
            if (w->conns[i].fd >= 0) close(w->conns[i].fd);
            free(w->conns[i].rbuf);
        }
        free(w->conns);
    }
    free(w->idle);
    if (w->ep >= 0) close(w->ep);
    if (w->tfd >= 0) close(w->tfd);
    rec_free(&w->rec);
}

static int worker_init(struct worker *w, struct run *run, int idx, size_t nconns, char *err,
                       size_t cap)
{
    memset(w, 0, sizeof *w);
    w->run = run;
    w->idx = idx;
    w->ep = w->tfd = -1;
    sk_hist_init(&w->res.latency);
    w->rng = 0x9E3779B97F4A7C15ull ^ ((uint64_t)idx * 0xBF58476D1CE4E5B9ull) ^ (uint64_t)now_ns();
    if (!w->rng) w->rng = 1;
    w->ep = epoll_create1(EPOLL_CLOEXEC);
    w->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    w->conns = calloc(nconns, sizeof *w->conns);
    w->idle = calloc(nconns, sizeof *w->idle);
    if (w->ep < 0 || w->tfd < 0 || !w->conns || !w->idle) {
        set_err(err, cap, "cannot set up worker %d: %s", idx, strerror(errno));
        return SK_ENOMEM;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(w->ep, EPOLL_CTL_ADD, w->tfd, &ev);
    w->nconns = w->live = nconns;
    for (size_t i = 0; i < nconns; i++) {
        w->conns[i].fd = -1;
        w->conns[i].w = w;
        w->conns[i].state = C_CLOSED;
    }
    return 0;
}

static int build_prefix(struct run *run, char *err, size_t cap)
{
    const struct sk_load_opts *o = run->o;
    char path[600];
    const char *id = strstr(o->path, "{id}");
    if (id)
        snprintf(path, sizeof path, "%.*s%" PRIu64 "%s", (int)(id - o->path), o->path, o->activity,
                 id + 4);
    else
        snprintf(path, sizeof path, "%s", o->path);
    run->head = !strcmp(o->method, "HEAD");
    int with_body = strcmp(o->method, "GET") != 0 && !run->head;
    if (with_body)
        run->body_len = (size_t)snprintf(run->body, sizeof run->body, "{\"quantity\":%" PRId64 "}",
                                         o->quantity);
    int n;
    if (with_body)
        n = snprintf(run->prefix, sizeof run->prefix,
                     "%s %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n",
                     o->method, path, o->host, o->port, run->body_len);
    else
        n = snprintf(run->prefix, sizeof run->prefix, "%s %s HTTP/1.1\r\nHost: %s:%d\r\n",
                     o->method, path, o->host, o->port);
    /* the identity header and body must still fit the connection's buffer */
    if (n < 0 || (size_t)n + 22 + SK_AUTH_TOKEN_MAX + 4 + run->body_len > WBUF_CAP) {
        set_err(err, cap, "request too long (path %s)", path);
        return SK_EINVAL;
    }
    run->prefix_len = (size_t)n;
    run->order_check = o->order_check >= 0 ? o->order_check
                                           : (strlen(o->path) >= 9 &&
                                              !strcmp(o->path + strlen(o->path) - 9, "/purchase"));
    return 0;
}

int sk_load_run(const struct sk_load_opts *o, struct sk_load_result *r, char *err, size_t cap)
{
    memset(r, 0, sizeof *r);
    sk_hist_init(&r->latency);
    r->stopped_by = "duration";
    struct sk_load_opts copy = *o;
    if (sk_load_opts_check(&copy, err, cap) < 0) return SK_EINVAL;
    o = &copy; /* the workers read this one: the caller may reuse theirs */
    int rc = ensure_fds(o->connections + 4 * o->threads + 64, err, cap);
    if (rc < 0) return rc;
    struct run *run = calloc(1, sizeof *run);
    struct worker *ws = calloc((size_t)o->threads, sizeof *ws);
    if (!run || !ws) {
        free(run);
        free(ws);
        set_err(err, cap, "out of memory");
        return SK_ENOMEM;
    }
    run->o = o;
    run->addr.sin_family = AF_INET;
    run->addr.sin_port = htons((uint16_t)o->port);
    inet_pton(AF_INET, o->host, &run->addr.sin_addr);
    rc = build_prefix(run, err, cap);
    r->order_check = run->order_check;
    atomic_init(&run->budget, o->requests);
    atomic_init(&run->next_fresh, 0);
    atomic_init(&run->progress, 0);
    run->expiry = sk_wall_ms() / 1000 + TOKEN_TTL_S;
    int nthreads = (int)o->threads;
    for (int i = 0; rc == 0 && i < nthreads; i++) {
        size_t share = (size_t)(o->connections / o->threads) +
                       ((int64_t)i < o->connections % o->threads ? 1 : 0);
        rc = worker_init(&ws[i], run, i, share, err, cap);
        if (o->rate > 0) {
            ws[i].rate = o->rate / (double)o->threads;
            ws[i].share = o->requests > 0 ? (uint64_t)(o->requests / o->threads) +
                                                ((int64_t)i < o->requests % o->threads ? 1 : 0)
                                          : UINT64_MAX;
        }
    }
    pthread_mutex_init(&run->mu, NULL);
    pthread_cond_init(&run->cv, NULL);
    if (rc == 0) {
        atomic_init(&run->running, nthreads);
        int started = 0;
        for (int i = 0; i < nthreads; i++) {
            if (pthread_create(&ws[i].tid, NULL, worker_main, &ws[i]) != 0) {
                set_err(err, cap, "cannot start thread %d", i);
                atomic_fetch_sub(&run->running, nthreads - i);
                rc = SK_ENOMEM;
                break;
            }
            ws[i].started = 1;
            started++;
        }
        pthread_mutex_lock(&run->mu);
        while (run->n_connected < started)
            pthread_cond_wait(&run->cv, &run->mu);
        run->start_ns = now_ns();
        /* a failed start still releases the started workers: with no time
         * left they close their connections and return */
        run->deadline_ns = run->start_ns + (rc == 0 ? o->duration_ms * 1000000LL : 0);
        run->go = 1;
        pthread_cond_broadcast(&run->cv);
        pthread_mutex_unlock(&run->mu);
        /* progress from this thread while the workers run */
        uint64_t last = 0;
        int64_t last_ns = run->start_ns, next_print = run->start_ns + 1000000000LL;
        while (atomic_load(&run->running) > 0) {
            struct timespec ts = {0, 50 * 1000 * 1000};
            nanosleep(&ts, NULL);
            int64_t t = now_ns();
            if (o->progress && t >= next_print) {
                uint64_t done = atomic_load(&run->progress);
                fprintf(stderr, "load: %6.1f s  %" PRIu64 " answered  %.0f req/s\n",
                        (double)(t - run->start_ns) / 1e9, done,
                        (double)(done - last) * 1e9 / (double)(t - last_ns));
                last = done;
                last_ns = t;
                next_print = t + 1000000000LL;
            }
        }
    }
    int64_t start = run->start_ns, end = run->start_ns;
    uint64_t contending = 0;
    int all_dead = nthreads > 0, oom = 0;
    struct sk_load_records *recs = calloc(1, sizeof *recs);
    for (int i = 0; i < nthreads; i++) {
        if (ws[i].started) pthread_join(ws[i].tid, NULL);
        if (rc == 0) {
            merge(r, &ws[i].res);
            if (ws[i].end_ns > end) end = ws[i].end_ns;
            contending += ws[i].fresh_contending;
            if (ws[i].live > 0) all_dead = 0;
            if (ws[i].oom || !recs || merge_records(recs, &ws[i].rec) < 0) oom = 1;
        }
        worker_free(&ws[i]);
    }
    free(ws);
    pthread_mutex_destroy(&run->mu);
    pthread_cond_destroy(&run->cv);
    free(run);
    if (rc < 0) {
        rec_free(recs);
        free(recs);
        return rc;
    }
    r->rec = recs;
    r->elapsed_s = (double)(end - start) / 1e9;
    r->rps = r->elapsed_s > 0 ? (double)r->completed / r->elapsed_s : 0;
    if (interrupted())
        r->stopped_by = "interrupt";
    else if (all_dead)
        r->stopped_by = "connections";
    else if (o->requests > 0 && r->sent >= (uint64_t)o->requests)
        r->stopped_by = "requests";
    check(o, r, contending);
    if (all_dead) violation(r, "every connection failed (is the server up at %s?)", o->url);
    if (oom) violation(r, "out of memory while recording accepted orders: checks incomplete");
    return 0;
}

void sk_load_result_free(struct sk_load_result *r)
{
    if (!r) return;
    rec_free(r->rec);
    free(r->rec);
    r->rec = NULL;
}

/* ---- output ---- */

static void fmt_us(uint64_t us, char *out, size_t cap)
{
    if (us < 1000)
        snprintf(out, cap, "%" PRIu64 " us", us);
    else if (us < 1000000)
        snprintf(out, cap, "%.2f ms", (double)us / 1e3);
    else
        snprintf(out, cap, "%.2f s", (double)us / 1e6);
}

void sk_load_print(FILE *f, const struct sk_load_opts *o, const struct sk_load_result *r)
{
    char path[600];
    const char *id = strstr(o->path, "{id}");
    if (id)
        snprintf(path, sizeof path, "%.*s%" PRIu64 "%s", (int)(id - o->path), o->path, o->activity,
                 id + 4);
    else
        snprintf(path, sizeof path, "%s", o->path);
    fprintf(f, "seckill load: %s %s%s, %" PRId64 " connections, %" PRId64 " thread%s", o->method,
            o->url, path, o->connections, o->threads, o->threads == 1 ? "" : "s");
    if (o->rate > 0)
        fprintf(f, ", open loop at %.0f req/s\n", o->rate);
    else
        fprintf(f, ", closed loop\n");
    fprintf(f,
            "  requests      %" PRIu64 " sent, %" PRIu64
            " answered in %.3f s: %.0f req/s (stopped by %s)\n",
            r->sent, r->completed, r->elapsed_s, r->rps, r->stopped_by);
    fprintf(f, "  statuses     ");
    for (int s = 0; s < 600; s++)
        if (r->status[s]) fprintf(f, " %d: %" PRIu64, s, r->status[s]);
    if (r->status_other) fprintf(f, " other: %" PRIu64, r->status_other);
    if (!r->completed) fprintf(f, " (none)");
    fputc('\n', f);
    if (r->n_refusals || r->refusals_other) {
        fprintf(f, "  refusals     ");
        for (size_t i = 0; i < r->n_refusals; i++)
            fprintf(f, " %s: %" PRIu64, r->refusals[i].code, r->refusals[i].n);
        if (r->refusals_other) fprintf(f, " (no code): %" PRIu64, r->refusals_other);
        fputc('\n', f);
    }
    fprintf(f,
            "  accepted      %" PRIu64 " requests, %" PRIu64 " units; %" PRIu64
            " distinct users answered\n",
            r->accepted, r->accepted_units, r->distinct_users);
    char p[6][24];
    const double ps[] = {50, 90, 99, 99.9};
    for (int i = 0; i < 4; i++)
        fmt_us(sk_hist_percentile(&r->latency, ps[i]), p[i], sizeof p[i]);
    fmt_us(r->latency.total ? r->latency.max : 0, p[4], sizeof p[4]);
    fmt_us((uint64_t)sk_hist_mean(&r->latency), p[5], sizeof p[5]);
    fprintf(f, "  latency       p50 %s  p90 %s  p99 %s  p99.9 %s  max %s  (mean %s%s)\n", p[0],
            p[1], p[2], p[3], p[4], p[5], o->rate > 0 ? ", from intended send times" : "");
    fprintf(f,
            "  errors        connect %" PRIu64 ", closed %" PRIu64 ", timeout %" PRIu64
            ", protocol %" PRIu64 "; reconnects %" PRIu64 "\n",
            r->err_connect, r->err_closed, r->err_timeout, r->err_protocol, r->reconnects);
    if (r->backlog_at_end)
        fprintf(f, "  backlog       %" PRIu64 " due requests never found a free connection\n",
                r->backlog_at_end);
    if (r->ok) {
        fprintf(f, "  verification  OK:");
        if (r->order_check)
            fprintf(f, " %" PRIu64 " unique order ids, at most %" PRId64 " units per user%s;",
                    r->unique_orders, r->max_units_one_user,
                    o->limit >= 0 ? " (limit respected)" : "");
        if (o->expect_stock >= 0)
            fprintf(f, " %" PRIu64 " of stock %" PRId64 " accepted%s;", r->accepted_units,
                    o->expect_stock,
                    r->demand_units >= (uint64_t)o->expect_stock ? " (sold out)" : "");
        if (r->db_checked)
            fprintf(f, " all %" PRIu64 " accepted orders in the DB with their user and quantity;",
                    r->db_found);
        fprintf(f, " no 5xx, no transport errors\n");
    } else {
        fprintf(f, "  verification  FAILED\n");
        for (int i = 0; i < r->n_violations; i++)
            fprintf(f, "    violation: %s\n", r->violations[i]);
    }
}

json_t *sk_load_json(const struct sk_load_opts *o, const struct sk_load_result *r)
{
    json_t *j = json_object(), *st = json_object(), *ref = json_object(), *lat = json_object(),
           *errs = json_object(), *ver = json_object(), *vl = json_array();
    if (!j || !st || !ref || !lat || !errs || !ver || !vl) {
        json_decref(j);
        json_decref(st);
        json_decref(ref);
        json_decref(lat);
        json_decref(errs);
        json_decref(ver);
        json_decref(vl);
        return NULL;
    }
    json_object_set_new(j, "url", json_string(o->url));
    json_object_set_new(j, "method", json_string(o->method));
    json_object_set_new(j, "path", json_string(o->path));
    if (o->activity) json_object_set_new(j, "activity", json_integer((json_int_t)o->activity));
    json_object_set_new(j, "mode", json_string(o->rate > 0 ? "open" : "closed"));
    if (o->rate > 0) json_object_set_new(j, "rate", json_real(o->rate));
    json_object_set_new(j, "connections", json_integer(o->connections));
    json_object_set_new(j, "threads", json_integer(o->threads));
    json_object_set_new(j, "sent", json_integer((json_int_t)r->sent));
    json_object_set_new(j, "completed", json_integer((json_int_t)r->completed));
    json_object_set_new(j, "duration_s", json_real(r->elapsed_s));
    json_object_set_new(j, "rps", json_real(r->rps));
    json_object_set_new(j, "stopped_by", json_string(r->stopped_by));
    for (int s = 0; s < 600; s++)
        if (r->status[s]) {
            char k[16];
            snprintf(k, sizeof k, "%d", s);
            json_object_set_new(st, k, json_integer((json_int_t)r->status[s]));
        }
    if (r->status_other)
        json_object_set_new(st, "other", json_integer((json_int_t)r->status_other));
    json_object_set_new(j, "statuses", st);
    for (size_t i = 0; i < r->n_refusals; i++)
        json_object_set_new(ref, r->refusals[i].code, json_integer((json_int_t)r->refusals[i].n));
    if (r->refusals_other)
        json_object_set_new(ref, "(none)", json_integer((json_int_t)r->refusals_other));
    json_object_set_new(j, "refusals", ref);
    json_object_set_new(j, "accepted", json_integer((json_int_t)r->accepted));
    json_object_set_new(j, "accepted_units", json_integer((json_int_t)r->accepted_units));
    json_object_set_new(j, "distinct_users", json_integer((json_int_t)r->distinct_users));
    const struct {
        const char *k;
        double p;
    } ps[] = {{"p50", 50}, {"p90", 90}, {"p99", 99}, {"p999", 99.9}};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        json_object_set_new(lat, ps[i].k,
                            json_integer((json_int_t)sk_hist_percentile(&r->latency, ps[i].p)));
    json_object_set_new(lat, "max",
                        json_integer((json_int_t)(r->latency.total ? r->latency.max : 0)));
    json_object_set_new(lat, "mean", json_real(sk_hist_mean(&r->latency)));
    json_object_set_new(j, "latency_us", lat);
    json_object_set_new(errs, "connect", json_integer((json_int_t)r->err_connect));
    json_object_set_new(errs, "closed", json_integer((json_int_t)r->err_closed));
    json_object_set_new(errs, "timeout", json_integer((json_int_t)r->err_timeout));
    json_object_set_new(errs, "protocol", json_integer((json_int_t)r->err_protocol));
    json_object_set_new(j, "transport_errors", errs);
    json_object_set_new(j, "reconnects", json_integer((json_int_t)r->reconnects));
    if (o->rate > 0)
        json_object_set_new(j, "backlog_at_end", json_integer((json_int_t)r->backlog_at_end));
    json_object_set_new(ver, "ok", json_boolean(r->ok));
    json_object_set_new(ver, "order_check", json_boolean(r->order_check));
    if (r->order_check) {
        json_object_set_new(ver, "unique_orders", json_integer((json_int_t)r->unique_orders));
        json_object_set_new(ver, "duplicate_orders", json_integer((json_int_t)r->duplicate_orders));
        json_object_set_new(ver, "missing_orders", json_integer((json_int_t)r->missing_orders));
        json_object_set_new(ver, "max_units_one_user", json_integer(r->max_units_one_user));
        json_object_set_new(ver, "users_over_limit", json_integer((json_int_t)r->users_over_limit));
    }
    if (o->limit >= 0) json_object_set_new(ver, "limit", json_integer(o->limit));
    if (o->expect_stock >= 0)
        json_object_set_new(ver, "expect_stock", json_integer(o->expect_stock));
    json_object_set_new(ver, "demand_units", json_integer((json_int_t)r->demand_units));
    if (r->db_checked) {
        json_object_set_new(ver, "db_found", json_integer((json_int_t)r->db_found));
        json_object_set_new(ver, "db_missing", json_integer((json_int_t)r->db_missing));
        json_object_set_new(ver, "db_mismatched", json_integer((json_int_t)r->db_mismatched));
    }
    for (int i = 0; i < r->n_violations; i++)
        json_array_append_new(vl, json_string(r->violations[i]));
    json_object_set_new(ver, "violations", vl);
    json_object_set_new(j, "verification", ver);
    return j;
}

/* ---- the sub-command ---- */

static void on_sigint(int sig)
{
    (void)sig;
    sk_load_interrupt();
}

int sk_cli_load(int argc, char **argv)
{
    struct sk_load_opts o;
    char err[300] = "";
    int rc = sk_load_parse_args(&o, argc, argv, err, sizeof err);
    if (rc == 1) return usage(stdout);
    if (rc < 0) return sk_cli_usage_error("load: %s", err);
    /* Ctrl-C: stop sending, collect what is in flight, report */
    struct sigaction sa = {.sa_handler = on_sigint};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    struct sk_load_result r;
    rc = sk_load_run(&o, &r, err, sizeof err);
    if (rc == SK_EINVAL) return sk_cli_usage_error("load: %s", err);
    if (rc < 0) return sk_cli_runtime_error("load: %s", err);
    if (sk_load_check_db(&o, &r, err, sizeof err) < 0) {
        sk_load_result_free(&r);
        return sk_cli_runtime_error("load: --db: %s", err);
    }
    if (o.json) {
        json_t *j = sk_load_json(&o, &r);
        char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
        if (s) printf("%s\n", s);
        free(s);
        json_decref(j);
    } else {
        sk_load_print(stdout, &o, &r);
    }
    int ok = r.ok;
    sk_load_result_free(&r);
    return ok ? SK_EXIT_OK : SK_EXIT_FAIL;
}

/* ---- the database check (--db) ---- */

int sk_load_check_db(const struct sk_load_opts *o, struct sk_load_result *r, char *err, size_t cap)
{
    if (!o->db[0] || !r->rec) return 0;
    sk_store *st;
    int rc = sk_store_open(&st, o->db, err, cap);
    if (rc < 0) return rc;
    const struct sk_load_records *rs = r->rec;
    int64_t deadline = sk_mono_ms() + (o->db_wait_ms > 0 ? o->db_wait_ms : 30000);
    size_t i = 0;
    r->db_checked = 1;
    /* Orders are checked in turn; an absent one is waited for (the worker
     * persists in batches), so the wait is spent once, not per order. */
    while (i < rs->n) {
        const struct rec *e = &rs->v[i];
        char oid[SK_STORE_ORDER_ID_MAX];
        snprintf(oid, sizeof oid, "%.*s", (int)e->oid_len, rs->arena + e->oid_off);
        struct sk_order row;
        rc = sk_store_order_get(st, oid, &row);
        if (rc == SK_ENOTFOUND && sk_mono_ms() < deadline) {
            struct timespec ts = {0, 20 * 1000 * 1000}; /* waiting for the pipeline */
            nanosleep(&ts, NULL);
            continue;
        }
        if (rc == 0 && row.user_id == e->uid && row.quantity == e->qty) {
            r->db_found++;
        } else if (rc == 0) {
            r->db_mismatched++;
            violation(r,
                      "order %s in the DB is user %" PRIu64 " x%" PRId64
                      ", the 200 said user %" PRIu64 " x%" PRId64,
                      oid, row.user_id, row.quantity, e->uid, e->qty);
        } else {
            r->db_missing++;
            if (r->db_missing <= 3) violation(r, "accepted order %s is not in the DB", oid);
        }
        i++;
    }
    if (r->db_missing > 3)
        violation(r, "%" PRIu64 " accepted orders in all are not in the DB", r->db_missing);
    sk_store_close(st);
    return 0;
}
