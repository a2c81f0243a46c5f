/* load_opts.c - the options of `seckill load` (load.h): defaults, the
 * flags, the checks of a struct built in code, and the --help text. */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cli.h"
#include "core/error.h"
#include "load/load_int.h"

#define DEFAULT_PATH "/api/v1/activities/{id}/purchase"

void sk_load_set_err(char *err, size_t cap, const char *fmt, ...)
{
    if (!err || !cap) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
}

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
        sk_load_set_err(err, cap, "--url must be http://HOST:PORT (https is not supported): '%s'",
                        url);
        return SK_EINVAL;
    }
    const char *h = url + 7, *colon = strchr(h, ':');
    if (!colon || colon == h || (size_t)(colon - h) >= sizeof o->host) {
        sk_load_set_err(err, cap, "--url needs an IPv4 host and a port: '%s'", url);
        return SK_EINVAL;
    }
    char host[64];
    memcpy(host, h, (size_t)(colon - h));
    host[colon - h] = 0;
    if (!strcmp(host, "localhost")) snprintf(host, sizeof host, "127.0.0.1");
    struct in_addr a;
    if (inet_pton(AF_INET, host, &a) != 1) {
        sk_load_set_err(err, cap, "--url host must be an IPv4 address: '%s'", url);
        return SK_EINVAL;
    }
    char port[8];
    const char *ps = colon + 1, *pe = ps;
    while (*pe >= '0' && *pe <= '9')
        pe++;
    if (pe == ps || pe - ps > 5 || (*pe && strcmp(pe, "/") != 0)) {
        sk_load_set_err(err, cap, "--url must be http://HOST:PORT (use --path for the path): '%s'",
                        url);
        return SK_EINVAL;
    }
    memcpy(port, ps, (size_t)(pe - ps));
    port[pe - ps] = 0;
    int64_t p;
    if (sk_cli_parse_i64(port, 1, 65535, &p) < 0) {
        sk_load_set_err(err, cap, "--url port out of range: '%s'", url);
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

void sk_load_path(const struct sk_load_opts *o, char *out, size_t cap)
{
    const char *id = strstr(o->path, "{id}");
    if (id)
        snprintf(out, cap, "%.*s%" PRIu64 "%s", (int)(id - o->path), o->path, o->activity, id + 4);
    else
        snprintf(out, cap, "%s", o->path);
}

int sk_load_opts_check(struct sk_load_opts *o, char *err, size_t cap)
{
    if (!o->port) {
        sk_load_set_err(err, cap, "--url is required (http://127.0.0.1:PORT)");
        return SK_EINVAL;
    }
    if (!o->host[0]) snprintf(o->host, sizeof o->host, "127.0.0.1");
    if (!o->url[0]) snprintf(o->url, sizeof o->url, "http://%s:%d", o->host, o->port);
    if (o->path[0] != '/') {
        sk_load_set_err(err, cap, "--path must start with '/'");
        return SK_EINVAL;
    }
    for (const char *c = o->path; *c; c++)
        if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f) {
            sk_load_set_err(err, cap, "--path must be visible ASCII without spaces");
            return SK_EINVAL;
        }
    if (strstr(o->path, "{id}") && !o->activity) {
        sk_load_set_err(err, cap, "--activity ID is required for path %s", o->path);
        return SK_EINVAL;
    }
    for (size_t i = 0; i < o->n_targets; i++) {
        const char *t = o->targets[i].path;
        size_t n = strnlen(t, SK_LOAD_TARGET_PATH_MAX);
        int ok = n > 0 && n < SK_LOAD_TARGET_PATH_MAX && t[0] == '/';
        for (size_t k = 0; ok && k < n; k++)
            ok = (unsigned char)t[k] > 0x20 && (unsigned char)t[k] < 0x7f;
        if (!ok) {
            sk_load_set_err(err, cap, "target %zu: path must be visible ASCII starting with '/'",
                            i);
            return SK_EINVAL;
        }
    }
    if (!o->method[0]) {
        sk_load_set_err(err, cap, "--method must not be empty");
        return SK_EINVAL;
    }
    for (const char *c = o->method; *c; c++)
        if (*c < 'A' || *c > 'Z') {
            sk_load_set_err(err, cap, "--method must be an upper-case token such as GET or POST");
            return SK_EINVAL;
        }
    if (o->connections < 1 || o->connections > SK_LOAD_MAX_CONNS || o->threads < 1 ||
        o->threads > SK_LOAD_MAX_THREADS || o->threads > o->connections) {
        sk_load_set_err(
            err, cap, "--connections must be 1..%d and --threads 1..%d, at most one per connection",
            SK_LOAD_MAX_CONNS, SK_LOAD_MAX_THREADS);
        return SK_EINVAL;
    }
    if (o->duration_ms < 1 || o->duration_ms > 3600000 || o->requests < 0 || o->timeout_ms < 1) {
        sk_load_set_err(err, cap, "--duration must be in (0, 3600] seconds and --requests >= 1");
        return SK_EINVAL;
    }
    if (o->users < 1 || o->quantity < 1 || !(o->retry_ratio >= 0 && o->retry_ratio <= 1) ||
        o->rate < 0) {
        sk_load_set_err(err, cap, "--users and --quantity must be >= 1, --retry-ratio in [0,1]");
        return SK_EINVAL;
    }
    if (o->user_base > UINT64_MAX - o->users) {
        sk_load_set_err(err, cap, "--user-base + --users overflows a user id");
        return SK_EINVAL;
    }
    if (o->auth == SK_LOAD_AUTH_HMAC && !o->hmac_secret[0]) {
        sk_load_set_err(err, cap, "--auth hmac needs --hmac-secret S");
        return SK_EINVAL;
    }
    return 0;
}

int sk_load_usage(FILE *f)
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
            "  --idempotency-keys  every request carries an Idempotency-Key never used before\n"
            "  --auth MODE         trusted-header (X-User-Id, default) or hmac (Bearer token)\n"
            "  --hmac-secret S     secret of --auth hmac\n"
            "checks:\n"
            "  --expect-stock N    accepted units must never exceed N, and must equal N\n"
            "                      when the answered demand covers it\n"
            "  --limit N           no user may get more than N units\n"
            "  --db SPEC           every accepted order must reach this store (sqlite:PATH,\n"
            "                      postgres://... or mysql://...) with the same user and quantity\n"
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
        if (!strcmp(a, "--idempotency-keys")) {
            o->idem_keys = 1;
            continue;
        }
        if (strncmp(a, "--", 2) != 0) {
            sk_load_set_err(err, cap, "unexpected argument '%s'", a);
            return SK_EINVAL;
        }
        if (i + 1 >= argc) {
            sk_load_set_err(err, cap, "%s needs a value", a);
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
            sk_load_set_err(err, cap, "unknown option '%s' (see seckill load --help)", a);
            return SK_EINVAL;
        }
        if (bad) {
            sk_load_set_err(err, cap, "bad value for %s: '%s'", a, v);
            return SK_EINVAL;
        }
    }
    /* --requests alone keeps a time bound: the default duration */
    if (o->hmac_secret[0] && o->auth != SK_LOAD_AUTH_HMAC) {
        sk_load_set_err(err, cap, "--hmac-secret needs --auth hmac");
        return SK_EINVAL;
    }
    int rc = sk_load_opts_check(o, err, cap);
    if (rc < 0 && err && cap > 6 && strncmp(err, "", 6) != 0) {
        char tmp[256];
        snprintf(tmp, sizeof tmp, "%s", err);
        sk_load_set_err(err, cap, "%s", tmp);
    }
    return rc;
}
