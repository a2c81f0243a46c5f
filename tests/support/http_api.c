/* http_api.c - the client side of the HTTP API contract tests (see
 * http_api.h). */
#include "support/http_api.h"

#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "engine/activity.h"

/* With SK_TH_RECORD_ANSWERS=FILE, every answer is appended to FILE as one
 * JSON line (method, path, status, content type, body): test_openapi.c
 * checks them against docs/openapi.yaml. One write() per line, O_APPEND:
 * tests running at once do not interleave. */
static void record(const char *method, const char *path, const struct sk_th_resp *r)
{
    const char *file = getenv("SK_TH_RECORD_ANSWERS");
    if (!file || !file[0] || r->status == 0) return;
    char ctype[128] = "";
    sk_th_http_header(r, "content-type", ctype, sizeof ctype);
    json_t *o = json_pack("{s:s, s:s, s:i, s:s, s:s%}", "method", method, "path", path, "status",
                          r->status, "content_type", ctype, "body", r->body, r->body_len);
    char *line = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!line) return;
    int fd = open(file, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
        size_t n = strlen(line);
        line[n] = '\n'; /* over the terminator: the line and its newline in one write */
        ssize_t w = write(fd, line, n + 1);
        (void)w; /* a lost record shows as a route the validation never saw */
        close(fd);
    }
    free(line);
}

int req(struct srv *v, const char *method, const char *path, const char *headers, const char *body,
        struct sk_th_resp *r)
{
    int st = sk_th_http_req(&v->c, method, path, headers, body, r);
    record(method, path, r);
    return st;
}

/* Sanitized build: LeakSanitizer would turn its exit-time report into exit
 * code 1. The objects that live as long as the process (h2o config and
 * context, struct sk_app) are not freed at exit and show as "Indirect
 * leak" only; so the exit code is asked to stay 0 and the log is judged
 * instead: any ASan error, UBSan report or "Direct leak" (a leak per
 * request) fails. Inherited by every server this file starts. */
void sanitizer_exit_code_0(void)
{
    setenv("LSAN_OPTIONS", "exitcode=0", 1);
}

static void check_server_log(const struct sk_th_serve *s)
{
    FILE *f = fopen(s->log, "r");
    char line[1024];
    if (!f) return;
    while (fgets(line, sizeof line, f))
        CHECK_MSG(!strstr(line, "ERROR: AddressSanitizer") && !strstr(line, "Direct leak") &&
                      !strstr(line, "runtime error:"),
                  "server log %s: %s", s->log, line);
    fclose(f);
}

/* A graceful stop must exit 0 (a crash or a stuck request would not) and
 * leave a clean log. */
void stop_checked(struct sk_th_serve *s)
{
    int rc = sk_th_serve_stop(s, SIGTERM);
    check_server_log(s);
    CHECK_MSG(rc == 0, "seckill serve exited %d on SIGTERM (log %s)", rc, s->log);
}

void srv_stop(struct srv *v)
{
    sk_th_http_close(&v->c);
    stop_checked(&v->s);
}

/* Polls /readyz until 200 (bounded): /healthz answers before the Redis
 * connection is up, and a request in that gap is a legitimate 503. */
static void wait_ready(struct srv *v)
{
    struct sk_th_resp r;
    int64_t deadline = sk_mono_ms() + 10000;
    while (req(v, "GET", "/readyz", NULL, NULL, &r) != 200) {
        if (sk_mono_ms() > deadline)
            sk_th_fail(__FILE__, __LINE__, "/readyz not 200 within 10 s: %d %s", r.status, r.body);
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

void srv_start(struct srv *v, const char *const *extra)
{
    sanitizer_exit_code_0();
    sk_th_serve_start(&v->s, sk_th_redis_url(), extra);
    sk_th_http_open(&v->c, v->s.port);
    wait_ready(v);
}

int admin(struct srv *v, const char *method, const char *path, const char *body,
          struct sk_th_resp *r)
{
    return req(v, method, path, ADMIN_HDR, body, r);
}

int admin_op(struct srv *v, uint64_t id, const char *op, const char *body, struct sk_th_resp *r)
{
    char path[128];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/%s", id, op);
    return admin(v, op[0] == 's' ? "GET" : "POST", path, body, r);
}

int buy_hdr(struct srv *v, uint64_t aid, const char *headers, const char *body,
            struct sk_th_resp *r)
{
    char path[128];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", aid);
    return req(v, "POST", path, headers, body, r);
}

int buy(struct srv *v, uint64_t aid, uint64_t uid, const char *body, struct sk_th_resp *r)
{
    char h[64];
    snprintf(h, sizeof h, "X-User-Id: %" PRIu64 "\r\n", uid);
    return buy_hdr(v, aid, h, body, r);
}

int get_activity(struct srv *v, uint64_t id, struct sk_th_resp *r)
{
    char path[128];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64, id);
    return req(v, "GET", path, NULL, NULL, r);
}

/* The body as a JSON object, or a test failure that shows the body. */
json_t *body_obj(const char *file, int line, const struct sk_th_resp *r)
{
    json_error_t e;
    json_t *j = json_loadb(r->body, r->body_len, 0, &e);
    if (!j || !json_is_object(j))
        sk_th_fail(file, line, "status %d: body is not a JSON object: '%s'", r->status, r->body);
    return j;
}

long long j_int(const char *file, int line, const struct sk_th_resp *r, const char *key)
{
    json_t *j = body_obj(file, line, r);
    json_t *f = json_object_get(j, key);
    if (!json_is_integer(f))
        sk_th_fail(file, line, "field \"%s\" is not an integer in %s", key, r->body);
    long long x = (long long)json_integer_value(f);
    json_decref(j);
    return x;
}

void j_str(const char *file, int line, const struct sk_th_resp *r, const char *key, char *out,
           size_t cap)
{
    json_t *j = body_obj(file, line, r);
    json_t *f = json_object_get(j, key);
    if (!json_is_string(f))
        sk_th_fail(file, line, "field \"%s\" is not a string in %s", key, r->body);
    snprintf(out, cap, "%s", json_string_value(f));
    json_decref(j);
}

void expect_status_at(const char *file, int line, int got, const struct sk_th_resp *r, int want)
{
    if (got != want) sk_th_fail(file, line, "status %d, want %d; body: '%s'", got, want, r->body);
}

/* The error shape: JSON {"error":code,"message":text}, application/json.
 * code NULL: any non-empty code (the contract does not name one). */
void expect_error_at(const char *file, int line, int got, const struct sk_th_resp *r, int want,
                     const char *code)
{
    char ct[128], err[128], msg[512];
    expect_status_at(file, line, got, r, want);
    if (sk_th_http_header(r, "content-type", ct, sizeof ct) < 0 ||
        strncmp(ct, "application/json", 16) != 0)
        sk_th_fail(file, line, "%d error without Content-Type application/json: '%s'", want,
                   r->headers);
    j_str(file, line, r, "error", err, sizeof err);
    j_str(file, line, r, "message", msg, sizeof msg);
    if (code ? strcmp(err, code) != 0 : err[0] == 0)
        sk_th_fail(file, line, "error code '%s', want '%s' (body %s)", err, code ? code : "any",
                   r->body);
    if (!msg[0]) sk_th_fail(file, line, "empty error message: %s", r->body);
}

/* RFC 3339 of a wall time, whole seconds (so the echo is exact). */
void rfc3339(int64_t ms, char *buf, size_t cap)
{
    CHECK(sk_time_format_rfc3339(ms - ms % 1000, buf, cap) == 0);
}

void window_ms(enum window w, int64_t *start, int64_t *end)
{
    int64_t now = sk_wall_ms();
    now -= now % 1000;
    switch (w) {
    case W_NOW: *start = now - HOUR_MS, *end = now + HOUR_MS; break;
    case W_FUTURE: *start = now + HOUR_MS, *end = now + 2 * HOUR_MS; break;
    case W_PAST: *start = now - 2 * HOUR_MS, *end = now - HOUR_MS; break;
    }
}

void create_body_ms(char *buf, size_t cap, uint64_t id, long long stock, long long limit,
                    long long maxq, int64_t s, int64_t e)
{
    char ss[40], es[40];
    rfc3339(s, ss, sizeof ss);
    rfc3339(e, es, sizeof es);
    snprintf(buf, cap,
             "{\"id\":%" PRIu64 ",\"name\":\"sale %" PRIu64 "\",\"stock\":%lld,"
             "\"per_user_limit\":%lld,\"max_per_order\":%lld,\"start\":\"%s\",\"end\":\"%s\","
             "\"pay_timeout_s\":1800}",
             id, id, stock, limit, maxq, ss, es);
}

void create_body(char *buf, size_t cap, uint64_t id, long long stock, long long limit,
                 long long maxq, enum window w)
{
    int64_t s, e;
    window_ms(w, &s, &e);
    create_body_ms(buf, cap, id, stock, limit, maxq, s, e);
}

void create_act(struct srv *v, uint64_t id, long long stock, long long limit, long long maxq,
                enum window w)
{
    char body[512];
    struct sk_th_resp r;
    create_body(body, sizeof body, id, stock, limit, maxq, w);
    EXPECT_STATUS(admin(v, "POST", "/api/v1/activities", body, &r), &r, 201);
}

/* Created, preheated and opened: ready to sell (or to refuse by window). */
void ready_act(struct srv *v, uint64_t id, long long stock, long long limit, long long maxq,
               enum window w)
{
    struct sk_th_resp r;
    create_act(v, id, stock, limit, maxq, w);
    EXPECT_STATUS(admin_op(v, id, "preheat", NULL, &r), &r, 200);
    EXPECT_STATUS(admin_op(v, id, "open", NULL, &r), &r, 200);
}

long long remaining(struct srv *v, uint64_t id)
{
    struct sk_th_resp r;
    EXPECT_STATUS(get_activity(v, id, &r), &r, 200);
    return JINT(&r, "stock_remaining");
}

void expect_state(struct srv *v, uint64_t id, const char *state)
{
    struct sk_th_resp r;
    char got[32];
    EXPECT_STATUS(get_activity(v, id, &r), &r, 200);
    JSTR(&r, "state", got);
    CHECK_MSG(strcmp(got, state) == 0, "activity %" PRIu64 " state '%s', want '%s'", id, got,
              state);
}

/* Stock and admitted units as the admin stats see them. */
void expect_stats(struct srv *v, uint64_t id, long long rem, long long admitted, long long buyers)
{
    struct sk_th_resp r;
    EXPECT_STATUS(admin_op(v, id, "stats", NULL, &r), &r, 200);
    CHECK_EQ(JINT(&r, "remaining"), rem);
    CHECK_EQ(JINT(&r, "admitted"), admitted);
    CHECK_EQ(JINT(&r, "buyers"), buyers);
}
