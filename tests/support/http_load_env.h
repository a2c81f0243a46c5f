/* http_load_env.h - what the HTTP load and fault tests (test_http_load.c,
 * test_http_faults.c) share: client processes x threads buying over their
 * own keep-alive connections with a minimal HTTP/1.1 client that never
 * resends, every request recorded in MAP_SHARED memory; the tally of what
 * the clients saw; what Redis holds for the activity and its invariants;
 * the server under test started, watched and stopped from outside.
 *
 * Client processes never call CHECK (an exit from one thread would end
 * its process mid-load and tell the test nothing): they note failures in
 * the load, and the test process checks after reaping them.
 *
 * The names are short and carry no sk_th_ prefix on purpose: the tests
 * moved between the two files unchanged. Those two files and the failover
 * tests (test_sentinel.c, test_sync_replicas.c, test_functions.c) include
 * this header. */
#ifndef SK_TEST_HTTP_LOAD_ENV_H
#define SK_TEST_HTTP_LOAD_ENV_H
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "engine/stock.h"
#include "redis/redis_conn.h"
#include "support/harness.h"

#define TEST_ALARM_S 150   /* a stuck test fails instead of hanging the run */
#define CLIENT_ALARM_S 120 /* a stuck client process dies */
#define RECV_TIMEOUT_S 10  /* a request nobody answers is a failure, not a hang */
#define MAX_RECS 100000    /* requests one load may record */
#define MAX_USER 200000    /* user ids the Redis checks index */
#define MAX_PROCS 8
#define MAX_THREADS 50

/* What one request did. */
enum outcome {
    OUT_NONE = 0,    /* never attempted */
    OUT_ANSWERED,    /* a complete HTTP response */
    OUT_SEND_FAILED, /* the request could not be written completely */
    OUT_UNANSWERED,  /* fully written; the connection closed with no byte back */
    OUT_TIMEOUT,     /* nothing within RECV_TIMEOUT_S */
    OUT_BAD,         /* a partial or unparseable response */
    OUT_NO_CONNECT,  /* no connection for it (after SIGTERM: refused) */
};

struct rec {
    uint32_t user;
    int16_t qty;
    int16_t status;
    uint8_t outcome, sent, close, bad_body;
    int32_t got_qty;
    int64_t t_send_us, t_done_us; /* sk_mono_us */
    char err[24];                 /* "error" of a refusal */
    char msg[64];                 /* its "message", for failure reports */
    char oid[SK_ORDER_ID_MAX];    /* "order_id" of a 200 */
};

/* One load: shared by the test process and its client processes. */
struct load {
    pthread_barrier_t start;
    int port, nthr;
    uint64_t aid;
    int stream; /* 0: run recs[0..n) as filled in; 1: user = base + i, qty 1 */
    uint32_t user_base;
    int think_us; /* pause between a thread's requests (bounds the record count) */
    size_t n;
    atomic_size_t next;
    atomic_int stop, term_sent;
    atomic_int answered, accepted, n503, reconnects;
    atomic_int errors, msg_claimed;
    char msg[256];
    struct rec recs[MAX_RECS];
};

/* ---- a minimal HTTP/1.1 client: no resend, ever ----
 * (support/http_client.c resends once on a closed keep-alive connection,
 * which could buy twice and would hide exactly what the SIGTERM and
 * disconnect tests look at) */
struct hconn {
    int fd;
    int port;
};

/* Connects c to 127.0.0.1:port (TCP_NODELAY, RECV_TIMEOUT_S both ways):
 * 0, or -1 with errno. */
int hc_open(struct hconn *c, int port);
void hc_close(struct hconn *c);
/* Closes with an RST instead of a FIN (SO_LINGER 0). */
void hc_reset(struct hconn *c);
/* Sends all n bytes (MSG_NOSIGNAL): 0, or -1. */
int write_all(int fd, const char *p, size_t n);
/* One purchase on c (which must be open); fills q. */
void do_purchase(struct hconn *c, uint64_t aid, struct rec *q);
/* The same with an Idempotency-Key header (key NULL: none). */
void do_purchase_key(struct hconn *c, uint64_t aid, const char *key, struct rec *q);
/* Its two halves, for a test that keeps several purchases waiting: the
 * request (0, or -1 with q->outcome OUT_SEND_FAILED), then its answer. */
int send_purchase(struct hconn *c, uint64_t aid, const char *key, struct rec *q);
void read_purchase(struct hconn *c, uint64_t aid, struct rec *q);
/* One purchase as user on c, reopened when closed; a test failure unless
 * it was answered with a well-formed body. */
struct rec buy_one(struct hconn *c, uint64_t aid, uint32_t user, int qty);

/* ---- the load: client processes x threads, one keep-alive connection each ---- */

/* A zeroed load in MAP_SHARED memory (the caller's, load_free). */
struct load *load_new(int port, uint64_t aid);
void load_free(struct load *L);
/* Forks nproc client processes of nthr threads each (pids: nproc
 * entries); each thread connects, waits for all the others, then buys
 * until the records run out or L->stop. */
void load_start(struct load *L, int nproc, int nthr, pid_t *pids);
/* Reaps them; a client that did not exit 0 is a noted failure. */
void load_wait(struct load *L, int nproc, const pid_t *pids);
void check_no_client_failures(struct load *L);

/* ---- what the clients saw ---- */

struct tally {
    int attempted, answered, ok, units, sold_out, limit, s503, other, bad_body;
    int unconfirmed; /* 503 unconfirmed (--sync-replicas): admitted, not acknowledged */
    int unanswered, send_failed, timeouts, bad, no_connect;
    int64_t first_send_us, last_done_us, max_lat_us, p50_us, p99_us;
    char other_example[160], example_503[160];
};

/* Counts, by outcome and answer, recs[0..n), and the latencies. */
void tally_load(const struct load *L, size_t n, struct tally *t);
void print_tally(const char *what, const struct tally *t);

/* ---- Redis: setup and what it holds ---- */

/* A connection to url (the caller's, sk_redis_free), or a test failure. */
sk_redis *redis_to(const char *url);
/* Preheats aid (window opened a minute ago, closing in an hour) and opens it. */
void open_activity(sk_redis *r, uint64_t aid, int64_t initial, int64_t limit, int64_t maxq);
/* A private redis-server (args: its extra arguments, or NULL; the
 * caller's, sk_th_redis_stop), a connection to it (*r, the caller's,
 * sk_redis_free) and a fresh activity open on it with that stock and
 * per-user limit: returns its id. */
uint64_t private_sale(struct sk_th_redis *rs, const char *const *args, sk_redis **r,
                      int64_t initial, int64_t limit);

struct lentry {
    char oid[SK_ORDER_ID_MAX];
    uint32_t user;
    int32_t qty;
    int released;
};

/* Everything Redis holds for an activity, read after the load. */
struct view {
    int64_t stock, held_sum, max_held;
    int64_t xlen;  /* orders the stream holds (sk_th_stream_orders), not entries */
    int64_t *held; /* [MAX_USER + 1]: the buyers hash */
    struct lentry *lg;
    size_t nlg; /* ledger entries, sorted by order id */
};

/* Reads v (the caller's, view_free) from Redis. */
void view_load(sk_redis *r, uint64_t aid, struct view *v);
void view_free(struct view *v);
/* The ledger entry of order oid, or NULL. */
const struct lentry *ledger_find(const struct view *v, const char *oid);
/* The invariants (docs/design.md) on what Redis holds: no oversell, stock +
 * sum(buyers) == initial, one stream entry per order, the per-user limit,
 * and the buyers hash is exactly the sum of each user's unreleased orders. */
void check_invariants(const struct view *v, int64_t initial, int64_t limit);
/* Every 200 in recs[0..n) is a well-formed answer for the quantity asked,
 * with a unique order id that the ledger holds for the same user and
 * quantity. Returns how many ledger entries no client got a 200 for, and
 * (if extras is not NULL) a malloc'ed list of them. */
size_t check_accepted_in_redis(const struct load *L, size_t n, const struct view *v,
                               const struct lentry ***extras);
/* INFO commandstats "calls" of one command (0 when never called), or the
 * total of all commands but INFO and CONFIG (the test's own) with NULL. */
int64_t cmd_calls(sk_redis *r, const char *cmd);

/* ---- the server from outside ---- */

/* The status of GET /readyz on port (one process), 0 when no answer. */
int readyz(int port);
/* A gauge or counter of /metrics (one process), -1 when absent. */
int64_t metric(int port, const char *name);
/* 1 while the child pid runs. */
int alive(pid_t pid);
/* The server's log must hold no sanitizer report and no worker crash; a
 * LeakSanitizer report of "Indirect leak" entries only (process-lifetime
 * objects) is printed, not failed. */
void check_server_log(const struct sk_th_serve *s);
/* sk_th_serve_start with --role api (the order stream keeps every
 * admission) plus extra, then until /readyz answers 200 on 16 fresh
 * connections in a row. A test that fails on the way stops the server
 * with SIGTERM at its exit, so no worker process lives on. */
void serve_start(struct sk_th_serve *s, const char *redis_url, const char *const *extra);
/* SIGTERM: it must exit 0 with a clean log (check_server_log). */
void stop_server(struct sk_th_serve *s);

/* Polls cond until it holds or ms pass; returns whether it held. */
#define POLL_UNTIL(cond, ms)                                                                       \
    ({                                                                                             \
        int64_t dl_ = sk_mono_ms() + (ms);                                                         \
        int ok_;                                                                                   \
        while (!(ok_ = (cond)) && sk_mono_ms() < dl_) {                                            \
            struct timespec ts_ = {0, 2 * 1000 * 1000};                                            \
            nanosleep(&ts_, NULL);                                                                 \
        }                                                                                          \
        ok_;                                                                                       \
    })

#endif
