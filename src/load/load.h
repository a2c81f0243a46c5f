/* load.h - `seckill load`: an HTTP/1.1 load generator that also checks the
 * answers for correctness.
 *
 * Model: --threads worker threads, each with its own epoll loop and its
 * share of --connections non-blocking keep-alive connections (one request
 * in flight per connection, no pipelining). Closed loop (default): a
 * connection sends its next request as soon as the previous answer
 * arrived. Open loop (--rate R): requests are due at fixed intended times
 * (R per second in total); a due request waits for a free connection, and
 * its latency is measured from its intended send time, so a stalled server
 * cannot hide its stall by slowing the generator down (no coordinated
 * omission). The run ends at --requests answers or --duration seconds,
 * whichever comes first; both are always bounded.
 *
 * Users: ids 1..--users (shifted by --user-base). Each request either
 * takes the next fresh id or, with probability --retry-ratio, an id already
 * used (a repeat buyer).
 *
 * Checks afterwards (sk_load_run does them): every 200 carries an order id
 * and no two are equal; no user got more than --limit units; accepted
 * units never exceed --expect-stock and equal it when the demand (distinct
 * answered users x units a user may take) covers it; no 5xx (but 503
 * overloaded, a refusal by design); no 400, 401,
 * 404, 405, 413 or 431 (the run was misconfigured: auth, activity, path);
 * no transport or protocol errors. Any violation makes the result fail.
 *
 * Files: load.c (the sub-command), load_opts.c (flags), load_engine.c
 * (threads and epoll), load_records.c (accepted orders), load_verify.c
 * (checks), load_report.c (output), json_field.c (JSON lookup); answers
 * are read with the project's one response parser, core/http_resp.c. */
#ifndef SK_LOAD_H
#define SK_LOAD_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "core/histogram.h"
/* The response parser and the JSON lookup are part of this API. */
#include "core/http_resp.h"
#include "load/json_field.h"

#define SK_LOAD_MAX_CONNS 10000
#define SK_LOAD_MAX_THREADS 64
#define SK_LOAD_MAX_CODES 32
#define SK_LOAD_MAX_VIOLATIONS 16

enum sk_load_auth { SK_LOAD_AUTH_HEADER, SK_LOAD_AUTH_HMAC };

/* One request target of a run built in code (the benchmarks): a path and
 * the user it is sent as (an order poll: the order's own buyer). */
#define SK_LOAD_TARGET_PATH_MAX 128
struct sk_load_target {
    char path[SK_LOAD_TARGET_PATH_MAX];
    uint64_t user;
};

/* Options. Plain data: strings are copied in, nothing to free. */
struct sk_load_opts {
    char host[64]; /* IPv4 literal from --url ("localhost" -> 127.0.0.1) */
    int port;
    char url[128];     /* as given, for the report */
    uint64_t activity; /* substituted for "{id}" in path; 0: not given */
    char path[512];    /* template, may contain "{id}" */
    char method[16];
    int64_t connections;
    int64_t threads;
    int64_t requests; /* answers to collect; 0: bounded by duration only */
    int64_t duration_ms;
    int64_t timeout_ms; /* one request's limit; then it is a transport error */
    double rate;        /* open loop arrival rate (req/s, all threads); 0: closed loop */
    uint64_t users, user_base;
    double retry_ratio;
    int64_t quantity;
    enum sk_load_auth auth;
    char hmac_secret[256];
    int64_t expect_stock; /* -1: not given */
    int64_t limit;        /* -1: not given */
    int order_check;      /* 1: 200s must carry unique order ids; -1: auto (purchase path) */
    int json;
    int progress;       /* a line per second on stderr while it runs */
    char db[512];       /* --db: check every accepted order reached this store; "" off */
    int64_t db_wait_ms; /* how long the order pipeline may take (default 30 s) */
    int idem_keys;      /* 1: every request carries an Idempotency-Key never used before */
    /* Code only (no flag): when n_targets > 0, the requests go to the
     * targets in turn, each with its own path and user (path and the
     * users options are not used). The array is the caller's and must
     * outlive the run. */
    const struct sk_load_target *targets;
    size_t n_targets;
};

struct sk_load_code {
    char code[32];
    uint64_t n;
};

struct sk_load_records; /* accepted orders, private to src/load (load_int.h) */

/* Result of a run. The caller owns the struct; sk_load_run fills it and
 * allocates the order records it points to: free with
 * sk_load_result_free. */
struct sk_load_result {
    uint64_t sent, completed;
    double elapsed_s, rps;
    const char *stopped_by; /* "requests", "duration", "interrupt", "connections" (all failed) */
    uint64_t status[600];   /* by status code; other codes in status_other */
    uint64_t status_other;
    struct sk_load_code refusals[SK_LOAD_MAX_CODES]; /* "error" codes of non-2xx bodies */
    size_t n_refusals;
    uint64_t refusals_other; /* codes beyond the table, or non-2xx without a code */
    uint64_t err_connect, err_closed, err_timeout, err_protocol;
    uint64_t reconnects;
    uint64_t backlog_at_end;        /* open loop: due requests never sent (no free connection) */
    struct sk_hist latency;         /* microseconds, of answered requests */
    struct sk_hist latency_busy;    /* of those answered 429 or 503 (refusals to retry later),
                                       from when each was sent (open loop too): the refusal's
                                       own speed */
    struct sk_hist latency_ok;      /* of the 2xx answers (from the latency origin) */
    struct sk_hist latency_refused; /* of the 429 and 503 answers (from the latency origin) */
    uint64_t accepted, accepted_units, distinct_users;
    /* checks */
    int order_check;
    uint64_t unique_orders, duplicate_orders, missing_orders, users_over_limit;
    int db_checked; /* sk_load_check_db ran */
    uint64_t db_found, db_missing, db_mismatched;
    int64_t max_units_one_user;
    uint64_t demand_units; /* lower bound of what the answered users could take */
    int ok;
    int n_violations;
    char violations[SK_LOAD_MAX_VIOLATIONS][256];
    struct sk_load_records *rec;
};

/* Defaults: closed loop, 50 connections, 1 thread, duration 60 s, no
 * request count, timeout 10 s, 1,000,000 users, quantity 1, trusted
 * header, POST /api/v1/activities/{id}/purchase, order check auto. */
void sk_load_opts_defaults(struct sk_load_opts *o);

/* Parses the command line (argv[0] is the sub-command name and skipped).
 * Returns 0, 1 when --help was asked for, or SK_EINVAL with the reason in
 * err. */
int sk_load_parse_args(struct sk_load_opts *o, int argc, char **argv, char *err, size_t cap);

/* Checks an options struct built in code (the bench): 0 or SK_EINVAL+err. */
int sk_load_opts_check(struct sk_load_opts *o, char *err, size_t cap);

/* Runs the load and the checks. r is zeroed first. Returns 0 when the run
 * took place (r->ok tells whether every check passed), or a negative SK_E*
 * code when it could not start (err says why; no threads, fd limit). */
int sk_load_run(const struct sk_load_opts *o, struct sk_load_result *r, char *err, size_t cap);

/* With o->db set: waits (at most o->db_wait_ms) until every accepted order
 * of r is in that store, then checks each row's user and quantity against
 * the 200 that announced it; a missing or different row is a violation
 * (r->ok becomes 0). Returns 0 when the check ran, or a negative SK_E*
 * code (err says why) when the store could not be opened. */
int sk_load_check_db(const struct sk_load_opts *o, struct sk_load_result *r, char *err, size_t cap);

/* Frees what sk_load_run allocated in r (safe on a zeroed r). */
void sk_load_result_free(struct sk_load_result *r);

/* Readable summary. */
void sk_load_print(FILE *f, const struct sk_load_opts *o, const struct sk_load_result *r);

/* The result as one JSON object; a new reference the caller owns (NULL
 * when out of memory). */
json_t *sk_load_json(const struct sk_load_opts *o, const struct sk_load_result *r);

/* Asks every running sk_load_run to stop issuing and finish (a SIGINT
 * handler may call it: it only stores to a lock-free atomic). Sticky. */
void sk_load_interrupt(void);

/* `seckill load`: flags, run, report; exit 0, 1 on a violation, 2 on usage. */
int sk_cli_load(int argc, char **argv);

#endif
