/* load_int.h - what the files of `seckill load` share (src/load only):
 * the accepted-order records, the error and violation writers, the checks,
 * the usage text, and the state of a run shared by its engine
 * (load_engine.c) and its driver (load_run.c). The public API is load.h. */
#ifndef SK_LOAD_INT_H
#define SK_LOAD_INT_H
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "load/load.h"

/* One accepted order: its user, its units and where its id lies in the
 * records' arena. */
struct sk_load_rec {
    uint64_t uid;
    int64_t qty;
    size_t oid_off;
    uint32_t oid_len;
};

/* Accepted orders: records plus an arena of their order id bytes. Both
 * arrays belong to the struct (sk_load_rec_free). */
struct sk_load_records {
    struct sk_load_rec *v;
    size_t n, cap;
    char *arena;
    size_t alen, acap;
};

/* load_records.c: appends one order (its id bytes copied into the arena);
 * 0 or SK_ENOMEM. */
int sk_load_rec_add(struct sk_load_records *rs, uint64_t uid, int64_t qty, const char *oid,
                    size_t oid_len);
/* Appends every record of src to dst; 0 or SK_ENOMEM. */
int sk_load_rec_merge(struct sk_load_records *dst, const struct sk_load_records *src);
/* Frees both arrays and zeroes rs (rs itself stays the caller's; NULL is
 * fine). */
void sk_load_rec_free(struct sk_load_records *rs);

/* load_opts.c: formats a message into err (cap bytes; either may be 0). */
void sk_load_set_err(char *err, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The --help text on f; returns the exit status (0 on stdout, 2 else). */
int sk_load_usage(FILE *f);

/* o->path with "{id}" replaced by o->activity, into out (cap bytes). */
void sk_load_path(const struct sk_load_opts *o, char *out, size_t cap);

/* load_verify.c: records a failed check (r->ok becomes 0; the first
 * SK_LOAD_MAX_VIOLATIONS messages are kept). */
void sk_load_violation(struct sk_load_result *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The checks after a run (load.h): statuses, transport errors, order ids,
 * per-user limit, stock. contending: fresh users answered 200 or
 * sold_out (the demand). Sorts r->rec in place. */
void sk_load_verify(const struct sk_load_opts *o, struct sk_load_result *r, uint64_t contending);

/* ---- the engine (load_engine.c) and the run (load_run.c) ---- */

#define WBUF_CAP 1024 /* request line + headers + body: the path is < 512 */

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
    atomic_llong budget;       /* sends left (closed loop with --requests) */
    atomic_ullong next_fresh;  /* next fresh user index, 0-based */
    atomic_ullong next_target; /* o->targets: the next one to send */
    atomic_ullong progress;    /* answers so far, all threads */
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
    uint64_t idem_seq; /* --idempotency-keys: requests this thread keyed */
    int64_t armed_ns;
    uint64_t rng;
    int64_t end_ns;
    int warming; /* connect phase: connected sockets wait for the start */
    struct sk_load_result res;
    struct sk_load_records rec;
    uint64_t fresh_contending; /* fresh users answered 200 or sold_out */
    int oom;
};

/* The monotonic clock in ns. */
int64_t sk_load_now_ns(void);
/* sk_load_interrupt was called (since the last reset). */
int sk_load_interrupted(void);
/* Adds n to the count of an error code in r (a small table: codes are
 * few). */
void sk_load_count_code(struct sk_load_result *r, const char *code, size_t len, uint64_t n);
/* Sets w up for run with nconns connections (not yet connected); err on
 * failure. sk_load_worker_free releases what it holds (not w). */
int sk_load_worker_init(struct worker *w, struct run *run, int idx, size_t nconns, char *err,
                        size_t cap);
void sk_load_worker_free(struct worker *w);
/* The thread of worker arg: connects, waits for the start, and sends and
 * counts until the run ends. */
void *sk_load_worker_main(void *arg);

#endif
