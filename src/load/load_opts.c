/* load_opts.c - the options of `seckill load` (load.h): defaults, the
 * flags, the checks of a struct built in code, and the --help text. */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stddef.h>
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

/* How a flag's value is read into its field of struct sk_load_opts. */
enum opt_kind {
    OPT_URL,    /* --url: parse_url */
    OPT_TEXT,   /* a string of lo bytes or more that fits the field */
    OPT_INT,    /* an integer in lo..hi (an int64_t), times scale when set */
    OPT_U64,    /* an unsigned integer, lo or more */
    OPT_REAL,   /* a number in dlo..dhi (a double) */
    OPT_MS,     /* seconds, a number in dlo..dhi, kept as int64_t milliseconds */
    OPT_CHOICE, /* one of names (NULL-terminated), kept as the int values[i] */
};

/* A flag with a value: its field (off, size), bounds and default (def for
 * a number or a choice, sdef for a text; else 0 or ""). */
struct opt {
    const char *flag;
    enum opt_kind kind;
    size_t off, size;
    int64_t lo, hi, scale;
    double dlo, dhi;
    const char *const *names;
    const int *values;
    int64_t def;
    const char *sdef;
};

/* One row per kind of flag (the field, its bounds, its default). */
/* clang-format off */
#define FIELD(f) .off = offsetof(struct sk_load_opts, f), .size = sizeof(((struct sk_load_opts *)0)->f)
#define URL(k) {.flag = k, .kind = OPT_URL}
#define TEXT(k, f, min, d) {.flag = k, .kind = OPT_TEXT, FIELD(f), .lo = min, .sdef = d}
#define INT(k, f, min, max, d) {.flag = k, .kind = OPT_INT, FIELD(f), .lo = min, .hi = max, .def = d}
#define U64(k, f, min, d) {.flag = k, .kind = OPT_U64, FIELD(f), .lo = min, .def = d}
#define REAL(k, f, min, max) {.flag = k, .kind = OPT_REAL, FIELD(f), .dlo = min, .dhi = max}
#define MS(k, f, min, max, d) {.flag = k, .kind = OPT_MS, FIELD(f), .dlo = min, .dhi = max, .def = d}
#define CHOICE(k, f, n, v, d) {.flag = k, .kind = OPT_CHOICE, FIELD(f), .names = n, .values = v, .def = d}
/* clang-format on */

static const char *const auth_names[] = {"trusted-header", "hmac", NULL};
static const int auth_values[] = {SK_LOAD_AUTH_HEADER, SK_LOAD_AUTH_HMAC};
static const char *const check_names[] = {"yes", "no", "auto", NULL};
static const int check_values[] = {1, 0, -1};

/* clang-format off */
static const struct opt opts[] = {
    URL("--url"),
    U64("--activity", activity, 1, 0),
    TEXT("--path", path, 0, DEFAULT_PATH),
    TEXT("--method", method, 1, "POST"),
    INT("--connections", connections, 1, SK_LOAD_MAX_CONNS, 50),
    INT("--threads", threads, 1, SK_LOAD_MAX_THREADS, 1),
    INT("--requests", requests, 1, 1000000000000LL, 0),
    MS("--duration", duration_ms, 0.001, 3600, 60000),
    MS("--timeout", timeout_ms, 0.001, 3600, 10000),
    REAL("--rate", rate, 0.001, 1e8),
    U64("--users", users, 1, 1000000),
    U64("--user-base", user_base, 0, 0),
    REAL("--retry-ratio", retry_ratio, 0, 1),
    INT("--quantity", quantity, 1, 1000000, 1),
    CHOICE("--auth", auth, auth_names, auth_values, SK_LOAD_AUTH_HEADER),
    TEXT("--hmac-secret", hmac_secret, 1, NULL),
    INT("--expect-stock", expect_stock, 0, INT64_MAX, -1),
    INT("--limit", limit, 1, INT64_MAX, -1),
    TEXT("--db", db, 1, NULL),
    /* whole seconds, kept as milliseconds */
    {.flag = "--db-wait", .kind = OPT_INT, FIELD(db_wait_ms), .lo = 0, .hi = 3600, .scale = 1000},
    CHOICE("--order-check", order_check, check_names, check_values, -1),
};
/* clang-format on */
#undef FIELD
#undef URL
#undef TEXT
#undef INT
#undef U64
#undef REAL
#undef MS
#undef CHOICE
#define NOPTS (sizeof opts / sizeof opts[0])
_Static_assert(sizeof(enum sk_load_auth) == sizeof(int), "a choice is kept as an int");

void sk_load_opts_defaults(struct sk_load_opts *o)
{
    memset(o, 0, sizeof *o);
    for (size_t i = 0; i < NOPTS; i++) {
        const struct opt *p = &opts[i];
        char *f = (char *)o + p->off;
        if (p->kind == OPT_TEXT && p->sdef)
            snprintf(f, p->size, "%s", p->sdef);
        else if (p->kind == OPT_CHOICE)
            *(int *)f = (int)p->def;
        else if (p->kind == OPT_INT || p->kind == OPT_MS)
            *(int64_t *)f = p->def;
        else if (p->kind == OPT_U64)
            *(uint64_t *)f = (uint64_t)p->def;
    }
}

/* Reads v into o's field of p: 0, 1 when v is out of p's bounds, or
 * SK_EINVAL with err set (a bad --url). */
static int set_opt(struct sk_load_opts *o, const struct opt *p, const char *v, char *err,
                   size_t cap)
{
    char *f = (char *)o + p->off;
    int64_t x;
    uint64_t u;
    double d;
    int bad;
    switch (p->kind) {
    case OPT_URL: return parse_url(o, v, err, cap);
    case OPT_TEXT:
        bad = strlen(v) < (size_t)p->lo || strlen(v) >= p->size;
        if (!bad) snprintf(f, p->size, "%s", v);
        return bad;
    case OPT_INT:
        if (sk_cli_parse_i64(v, p->lo, p->hi, &x) < 0) return 1;
        *(int64_t *)f = p->scale ? x * p->scale : x;
        return 0;
    case OPT_U64:
        bad = sk_cli_parse_u64(v, &u) < 0 || u < (uint64_t)p->lo;
        if (!bad) *(uint64_t *)f = u;
        return bad;
    case OPT_REAL: return parse_double(v, p->dlo, p->dhi, (double *)f) < 0;
    case OPT_MS:
        bad = parse_double(v, p->dlo, p->dhi, &d) < 0;
        if (!bad) *(int64_t *)f = (int64_t)llround(d * 1000);
        return bad;
    case OPT_CHOICE:
        for (size_t i = 0; p->names[i]; i++)
            if (!strcmp(v, p->names[i])) {
                *(int *)f = p->values[i];
                return 0;
            }
        return 1;
    }
    return 1;
}

static const struct opt *find_opt(const char *flag)
{
    for (size_t i = 0; i < NOPTS; i++)
        if (!strcmp(flag, opts[i].flag)) return &opts[i];
    return NULL;
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
        const struct opt *p = find_opt(a);
        if (!p) {
            /* the one wording of every command (core/cli.h) */
            const char *cands[NOPTS + 4] = {"--json", "--quiet", "--idempotency-keys", "--help"};
            for (size_t k = 0; k < NOPTS; k++)
                cands[4 + k] = opts[k].flag;
            const char *near = sk_cli_closest(a, cands, NOPTS + 4);
            if (near)
                sk_load_set_err(err, cap, "unknown flag %s; did you mean %s?", a, near);
            else
                sk_load_set_err(err, cap, "unknown flag %s; see seckill load --help", a);
            return SK_EINVAL;
        }
        if (i + 1 >= argc) {
            sk_load_set_err(err, cap, "%s needs a value", a);
            return SK_EINVAL;
        }
        const char *v = argv[++i];
        int bad = set_opt(o, p, v, err, cap);
        if (bad < 0) return SK_EINVAL;
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
