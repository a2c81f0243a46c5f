/* http_api.h - what the HTTP API contract tests (test_http_contract.c,
 * test_http_admin.c) share: a `seckill serve` under test with a keep-alive
 * connection, requests by route, JSON field checks and the error shape,
 * activities created and made ready over the admin API.
 *
 * The names are short and carry no sk_th_ prefix on purpose: the tests
 * read as the API they check and moved between the two files unchanged.
 * Only those two files, test_waiting_room_http.c, test_http1.c (the
 * HTTP/1.1 layer) and test_cluster.c (a serve of a cluster of its own)
 * include this header.
 * Every check fails the running test (sk_th_fail) with the file and line
 * of the caller where it takes them (the macros). */
#ifndef SK_TEST_HTTP_API_H
#define SK_TEST_HTTP_API_H
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "support/harness.h"
#include "support/http_client.h"

#define ADMIN_HDR "Authorization: Bearer " SK_TH_ADMIN_TOKEN "\r\n"
#define HOUR_MS (3600LL * 1000)

/* One server under test and one keep-alive connection to it. */
struct srv {
    struct sk_th_serve s;
    struct sk_th_http c;
};

/* Starts the server with extra serve arguments (may be NULL) against the
 * run's shared redis-server, connects, and waits (bounded) until /readyz
 * answers 200. */
void srv_start(struct srv *v, const char *const *extra);
/* Closes the connection and stops the server (stop_checked). */
void srv_stop(struct srv *v);
/* A graceful stop must exit 0 (a crash or a stuck request would not) and
 * leave a clean log: no sanitizer report, no "Direct leak". */
void stop_checked(struct sk_th_serve *s);
/* Sanitized build: LeakSanitizer is asked to keep exit code 0 (the
 * process-lifetime objects show as "Indirect leak" only) and the log is
 * judged instead; inherited by every server started afterwards. */
void sanitizer_exit_code_0(void);

/* One request on v's connection; returns the status (r filled in). */
int req(struct srv *v, const char *method, const char *path, const char *headers, const char *body,
        struct sk_th_resp *r);
/* The same with the admin token. */
int admin(struct srv *v, const char *method, const char *path, const char *body,
          struct sk_th_resp *r);
/* POST /api/v1/activities/<id>/<op> (GET for "stats"), admin token. */
int admin_op(struct srv *v, uint64_t id, const char *op, const char *body, struct sk_th_resp *r);
/* POST /api/v1/activities/<aid>/purchase with headers (the identity). */
int buy_hdr(struct srv *v, uint64_t aid, const char *headers, const char *body,
            struct sk_th_resp *r);
/* The same as user uid (X-User-Id). */
int buy(struct srv *v, uint64_t aid, uint64_t uid, const char *body, struct sk_th_resp *r);
/* GET /api/v1/activities/<id>. */
int get_activity(struct srv *v, uint64_t id, struct sk_th_resp *r);

/* The body as a JSON object (the caller's, json_decref), or a test failure
 * that shows the body. */
json_t *body_obj(const char *file, int line, const struct sk_th_resp *r);
/* Integer field key of the body; a failure when absent or not one. */
long long j_int(const char *file, int line, const struct sk_th_resp *r, const char *key);
/* String field key of the body into out (cap bytes); likewise. */
void j_str(const char *file, int line, const struct sk_th_resp *r, const char *key, char *out,
           size_t cap);
#define JINT(r, key) j_int(__FILE__, __LINE__, (r), (key))
#define JSTR(r, key, out) j_str(__FILE__, __LINE__, (r), (key), (out), sizeof(out))

/* The status got must be want (a failure shows the body). */
void expect_status_at(const char *file, int line, int got, const struct sk_th_resp *r, int want);
#define EXPECT_STATUS(got, r, want) expect_status_at(__FILE__, __LINE__, (got), (r), (want))
/* The error shape: JSON {"error":code,"message":text}, application/json.
 * code NULL: any non-empty code (the contract does not name one). */
void expect_error_at(const char *file, int line, int got, const struct sk_th_resp *r, int want,
                     const char *code);
#define EXPECT_ERROR(got, r, want, code)                                                           \
    expect_error_at(__FILE__, __LINE__, (got), (r), (want), (code))

/* RFC 3339 of a wall time, whole seconds (so the echo is exact). */
void rfc3339(int64_t ms, char *buf, size_t cap);

/* A sale window around now, in the future, or in the past (one hour,
 * whole seconds). */
enum window { W_NOW, W_FUTURE, W_PAST };
void window_ms(enum window w, int64_t *start, int64_t *end);
/* The JSON of an activity create request (pay timeout 1800 s), window
 * [s, e) or w, into buf (cap bytes). */
void create_body_ms(char *buf, size_t cap, uint64_t id, long long stock, long long limit,
                    long long maxq, int64_t s, int64_t e);
void create_body(char *buf, size_t cap, uint64_t id, long long stock, long long limit,
                 long long maxq, enum window w);
/* Created over the admin API (201). */
void create_act(struct srv *v, uint64_t id, long long stock, long long limit, long long maxq,
                enum window w);
/* Created, preheated and opened: ready to sell (or to refuse by window). */
void ready_act(struct srv *v, uint64_t id, long long stock, long long limit, long long maxq,
               enum window w);
/* stock_remaining of the activity read. */
long long remaining(struct srv *v, uint64_t id);
/* The activity read says state. */
void expect_state(struct srv *v, uint64_t id, const char *state);
/* Stock and admitted units as the admin stats see them. */
void expect_stats(struct srv *v, uint64_t id, long long rem, long long admitted, long long buyers);

#endif
