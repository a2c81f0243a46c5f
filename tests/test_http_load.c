/* test_http_load.c - the HTTP service under load and under faults, tested
 * from outside: a real `seckill serve` process, real sockets, a real
 * redis-server (a private one wherever a fault or a command count is
 * involved).
 *
 *  1-2  4 client processes x 50 keep-alive connections buy a stock of 500
 *       (5,000 purchases from 2,000 users, with repeats and some quantity
 *       2), against 1 and 2 server processes: exactly the stock is
 *       admitted, order ids are unique, the per-user limit holds, every 200
 *       is one order in Redis (stream and ledger) with its buyer's user and
 *       quantity, every other answer is 409 sold_out or limit_exceeded.
 *  3    sold-out refusals are answered without Redis (INFO commandstats),
 *       and a release reopens the sale within a second, for exactly the
 *       units given back.
 *  4    Redis SIGSTOPped, or killed -9 and restarted (AOF appendfsync
 *       always): 503 within a bounded time, /readyz 503, no 200 that Redis
 *       did not admit, no crash, recovery afterwards.
 *  5    SIGTERM under load (1 and 2 processes): every order in Redis was
 *       answered with a 200, no unanswered request was admitted, exit 0.
 *  6    clients that close before their answer (HTTP/1.1 with a FIN or an
 *       RST, and HTTP/2 connections the server drops while their requests
 *       wait on a stopped Redis): no crash (ASan), the admission stands,
 *       stock accounting holds.
 * After each: the invariants (docs/design.md) on Redis (no oversell, per-user limit,
 * stream length == orders, stock + sum(buyers) == initial), the server's
 * log holds no sanitizer report and no restarted worker, and it exits 0 on
 * SIGTERM. Servers run with --role api, so the stream keeps every order.
 *
 * Client processes record every request in MAP_SHARED memory and never
 * call CHECK (an exit from one thread would end its process mid-load and
 * tell the test nothing): the test process checks after reaping them.
 * Every wait is bounded: alarm() in each child and test, socket timeouts,
 * deadlines on polling loops. No test sleeps to let time pass: loops poll
 * for a condition (the fault tests hold a fault for a stated duration). */
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "core/clock.h"
#include "core/codes.h"
#include "core/error.h"
#include "engine/keys.h"
#include "engine/stock.h"
#include "support/harness.h"
#include "support/http_client.h"

#define TEST_ALARM_S 150   /* a stuck test fails instead of hanging the run */
#define CLIENT_ALARM_S 120 /* a stuck client process dies */
#define RECV_TIMEOUT_S 10  /* a request nobody answers is a failure, not a hang */
#define MAX_RECS 100000    /* requests one load may record */
#define MAX_USER 200000    /* user ids the Redis checks index */
#define MAX_PROCS 8
#define MAX_THREADS 50

/* ---- what one request did ---- */

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

static void note_failure(struct load *L, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void note_failure(struct load *L, const char *fmt, ...)
{
    atomic_fetch_add(&L->errors, 1);
    int expected = 0;
    if (atomic_compare_exchange_strong(&L->msg_claimed, &expected, 1)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(L->msg, sizeof L->msg, fmt, ap);
        va_end(ap);
    }
}

/* ---- a minimal HTTP/1.1 client: no resend, ever ----
 * (tests/http_client.c resends once on a closed keep-alive connection,
 * which could buy twice and would hide exactly what tests 5 and 6 look at) */

struct hconn {
    int fd;
    int port;
};

static int hc_open(struct hconn *c, int port)
{
    c->port = port;
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0) return -1;
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct timeval tv = {RECV_TIMEOUT_S, 0};
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(c->fd, (struct sockaddr *)&a, sizeof a) < 0) {
        int e = errno;
        close(c->fd);
        c->fd = -1;
        errno = e;
        return -1;
    }
    return 0;
}

static void hc_close(struct hconn *c)
{
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
}

/* Closes with an RST instead of a FIN (SO_LINGER 0). */
static void hc_reset(struct hconn *c)
{
    struct linger lg = {1, 0};
    if (c->fd >= 0) setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    hc_close(c);
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

enum { RD_OK, RD_CLOSED, RD_TIMEOUT, RD_BAD };

struct hresp {
    int status, close;
    char body[2048];
    size_t body_len;
};

static int hc_read(int fd, struct hresp *r)
{
    char buf[4096];
    size_t len = 0;
    char *hend = NULL;
    memset(r, 0, sizeof *r);
    while (!hend) {
        if (len == sizeof buf - 1) return RD_BAD;
        ssize_t n = recv(fd, buf + len, sizeof buf - 1 - len, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return RD_TIMEOUT;
        if (n <= 0) return len == 0 ? RD_CLOSED : RD_BAD;
        len += (size_t)n;
        buf[len] = 0;
        hend = strstr(buf, "\r\n\r\n");
    }
    size_t hlen = (size_t)(hend - buf) + 4;
    *hend = 0; /* the header block alone, for the searches below */
    if (sscanf(buf, "HTTP/1.1 %d", &r->status) != 1) return RD_BAD;
    const char *cl = strcasestr(buf, "\ncontent-length:");
    if (!cl) return RD_BAD;
    long clen = strtol(cl + 16, NULL, 10);
    if (clen < 0 || (size_t)clen >= sizeof r->body) return RD_BAD;
    r->close = strcasestr(buf, "\nconnection: close") != NULL;
    size_t have = len - hlen;
    if (have > (size_t)clen) return RD_BAD; /* no pipelining: extra bytes are an error */
    memcpy(r->body, buf + hlen, have);
    while (have < (size_t)clen) {
        ssize_t n = recv(fd, r->body + have, (size_t)clen - have, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return RD_TIMEOUT;
        if (n <= 0) return RD_BAD;
        have += (size_t)n;
    }
    r->body[clen] = 0;
    r->body_len = (size_t)clen;
    return RD_OK;
}

/* The body must be the README's HTTP API JSON: an accepted purchase with its
 * order id, activity and quantity, or {"error","message"}. */
static void parse_body(const struct hresp *h, uint64_t aid, struct rec *q)
{
    json_error_t je;
    json_t *j = json_loadb(h->body, h->body_len, 0, &je);
    q->bad_body = 1;
    if (!j || !json_is_object(j)) goto out;
    if (h->status == 200) {
        json_t *st = json_object_get(j, "status"), *oid = json_object_get(j, "order_id"),
               *a = json_object_get(j, "activity_id"), *qt = json_object_get(j, "quantity");
        if (!json_is_string(st) || strcmp(json_string_value(st), "accepted") != 0) goto out;
        if (!json_is_string(oid) || strlen(json_string_value(oid)) >= sizeof q->oid) goto out;
        if (!json_is_integer(a) || (uint64_t)json_integer_value(a) != aid) goto out;
        if (!json_is_integer(qt)) goto out;
        snprintf(q->oid, sizeof q->oid, "%s", json_string_value(oid));
        q->got_qty = (int32_t)json_integer_value(qt);
    } else {
        json_t *e = json_object_get(j, "error"), *m = json_object_get(j, "message");
        if (!json_is_string(e) || !json_is_string(m)) goto out;
        snprintf(q->err, sizeof q->err, "%s", json_string_value(e));
        snprintf(q->msg, sizeof q->msg, "%s", json_string_value(m));
    }
    q->bad_body = 0;
out:
    json_decref(j);
}

/* One purchase on c (which must be open); fills q. */
static void do_purchase(struct hconn *c, uint64_t aid, struct rec *q)
{
    char req[512], body[64];
    int bl = snprintf(body, sizeof body, "{\"quantity\":%d}", q->qty);
    int n = snprintf(req, sizeof req,
                     "POST /api/v1/activities/%" PRIu64 "/purchase HTTP/1.1\r\n"
                     "Host: 127.0.0.1\r\nX-User-Id: %" PRIu32 "\r\n"
                     "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
                     aid, q->user, bl, body);
    q->t_send_us = sk_mono_us();
    if (write_all(c->fd, req, (size_t)n) < 0) {
        q->outcome = OUT_SEND_FAILED;
        q->t_done_us = sk_mono_us();
        return;
    }
    q->sent = 1;
    struct hresp h;
    int rd = hc_read(c->fd, &h);
    q->t_done_us = sk_mono_us();
    switch (rd) {
    case RD_OK:
        q->status = (int16_t)h.status;
        q->close = (uint8_t)h.close;
        parse_body(&h, aid, q);
        /* the test process polls records while the load runs: outcome last */
        atomic_thread_fence(memory_order_release);
        q->outcome = OUT_ANSWERED;
        break;
    case RD_CLOSED: q->outcome = OUT_UNANSWERED; break;
    case RD_TIMEOUT: q->outcome = OUT_TIMEOUT; break;
    default: q->outcome = OUT_BAD; break;
    }
}

/* ---- the load: client processes x threads, one keep-alive connection each ---- */

struct targ {
    struct load *L;
    int proc, thr;
};

static void *client_thread(void *arg)
{
    struct targ *t = arg;
    struct load *L = t->L;
    struct hconn c = {-1, L->port};
    if (hc_open(&c, L->port) < 0)
        note_failure(L, "proc %d thread %d: connect: %s", t->proc, t->thr, strerror(errno));
    /* Every connection is open before anyone sends: 200 live connections. */
    pthread_barrier_wait(&L->start);
    while (!atomic_load(&L->stop)) {
        size_t i = atomic_fetch_add(&L->next, 1);
        if (i >= L->n) break;
        struct rec *q = &L->recs[i];
        if (L->stream) {
            q->user = L->user_base + (uint32_t)i;
            q->qty = 1;
        }
        if (c.fd < 0) {
            atomic_fetch_add(&L->reconnects, 1);
            if (hc_open(&c, L->port) < 0) {
                q->outcome = OUT_NO_CONNECT;
                if (!atomic_load(&L->term_sent))
                    note_failure(L, "proc %d thread %d: reconnect: %s", t->proc, t->thr,
                                 strerror(errno));
                break; /* after SIGTERM the listener is gone: this client is done */
            }
        }
        do_purchase(&c, L->aid, q);
        if (q->outcome == OUT_ANSWERED) {
            atomic_fetch_add(&L->answered, 1);
            if (q->status == 200) atomic_fetch_add(&L->accepted, 1);
            if (q->status == 503) atomic_fetch_add(&L->n503, 1);
        }
        if (q->outcome == OUT_TIMEOUT || q->outcome == OUT_BAD)
            note_failure(L, "user %" PRIu32 ": %s", q->user,
                         q->outcome == OUT_TIMEOUT ? "no answer within the timeout"
                                                   : "malformed response");
        /* Connection: close, or a broken connection: the next request reconnects. */
        if (q->outcome != OUT_ANSWERED || q->close) hc_close(&c);
        if (L->think_us) {
            struct timespec ts = {0, (long)L->think_us * 1000};
            nanosleep(&ts, NULL);
        }
    }
    hc_close(&c);
    return NULL;
}

static void client_process(struct load *L, int proc) __attribute__((noreturn));
static void client_process(struct load *L, int proc)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    alarm(CLIENT_ALARM_S);
    pthread_t th[MAX_THREADS];
    struct targ ta[MAX_THREADS];
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    for (int t = 0; t < L->nthr; t++) {
        ta[t] = (struct targ){L, proc, t};
        int e = pthread_create(&th[t], &attr, client_thread, &ta[t]);
        if (e) {
            /* The barrier can no longer fill: the alarms end the load. */
            note_failure(L, "proc %d: pthread_create: %s", proc, strerror(e));
            _exit(1);
        }
    }
    for (int t = 0; t < L->nthr; t++)
        pthread_join(th[t], NULL);
    _exit(0); /* no atexit handlers, no stdio buffers inherited from the test */
}

static struct load *load_new(int port, uint64_t aid)
{
    struct load *L =
        mmap(NULL, sizeof *L, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK_MSG(L != MAP_FAILED, "mmap: %s", strerror(errno));
    L->port = port; /* anonymous memory is zeroed: counters start at 0 */
    L->aid = aid;
    return L;
}

static void load_free(struct load *L)
{
    munmap(L, sizeof *L);
}

static void load_start(struct load *L, int nproc, int nthr, pid_t *pids)
{
    CHECK(nproc <= MAX_PROCS && nthr <= MAX_THREADS && L->n <= MAX_RECS);
    L->nthr = nthr;
    pthread_barrierattr_t ba;
    pthread_barrierattr_init(&ba);
    pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
    CHECK_EQ(pthread_barrier_init(&L->start, &ba, (unsigned)(nproc * nthr)), 0);
    pthread_barrierattr_destroy(&ba);
    fflush(NULL);
    for (int p = 0; p < nproc; p++) {
        pids[p] = fork();
        CHECK_MSG(pids[p] >= 0, "fork: %s", strerror(errno));
        if (pids[p] == 0) client_process(L, p);
    }
}

static void load_wait(struct load *L, int nproc, const pid_t *pids)
{
    for (int p = 0; p < nproc; p++) {
        int st;
        while (waitpid(pids[p], &st, 0) < 0 && errno == EINTR) {
        }
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            note_failure(L, "client process %d %s %d", (int)pids[p],
                         WIFSIGNALED(st) ? "killed by signal" : "exited with",
                         WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    }
    pthread_barrier_destroy(&L->start);
}

static void check_no_client_failures(struct load *L)
{
    CHECK_MSG(atomic_load(&L->errors) == 0, "%d client failures, first: %s",
              atomic_load(&L->errors), L->msg);
}

/* ---- what the clients saw ---- */

struct tally {
    int attempted, answered, ok, units, sold_out, limit, s503, other, bad_body;
    int unanswered, send_failed, timeouts, bad, no_connect;
    int64_t first_send_us, last_done_us, max_lat_us, p50_us, p99_us;
    char other_example[160], example_503[160];
};

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static void tally_load(const struct load *L, size_t n, struct tally *t)
{
    memset(t, 0, sizeof *t);
    int64_t *lat = malloc(sizeof *lat * (n ? n : 1));
    CHECK(lat);
    size_t nl = 0;
    t->first_send_us = INT64_MAX;
    for (size_t i = 0; i < n; i++) {
        const struct rec *q = &L->recs[i];
        if (q->outcome == OUT_NONE) continue;
        t->attempted++;
        switch (q->outcome) {
        case OUT_SEND_FAILED: t->send_failed++; continue;
        case OUT_UNANSWERED: t->unanswered++; continue;
        case OUT_TIMEOUT: t->timeouts++; continue;
        case OUT_BAD: t->bad++; continue;
        case OUT_NO_CONNECT: t->no_connect++; continue;
        default: break;
        }
        t->answered++;
        if (q->t_send_us < t->first_send_us) t->first_send_us = q->t_send_us;
        if (q->t_done_us > t->last_done_us) t->last_done_us = q->t_done_us;
        lat[nl++] = q->t_done_us - q->t_send_us;
        if (q->bad_body) t->bad_body++;
        if (q->status == 200) {
            t->ok++;
            t->units += q->got_qty;
        } else if (q->status == 409 && !strcmp(q->err, "sold_out")) {
            t->sold_out++;
        } else if (q->status == 409 && !strcmp(q->err, "limit_exceeded")) {
            t->limit++;
        } else if (q->status == 503 && !strcmp(q->err, "unavailable")) {
            if (!t->s503++)
                snprintf(t->example_503, sizeof t->example_503, "user %" PRIu32 ": 503 %s", q->user,
                         q->msg);
        } else {
            if (!t->other++)
                snprintf(t->other_example, sizeof t->other_example, "user %" PRIu32 ": %d %s (%s)",
                         q->user, q->status, q->err, q->msg);
        }
    }
    if (nl) {
        qsort(lat, nl, sizeof *lat, cmp_i64);
        t->p50_us = lat[nl / 2];
        t->p99_us = lat[nl * 99 / 100];
        t->max_lat_us = lat[nl - 1];
    }
    free(lat);
}

static void print_tally(const char *what, const struct tally *t)
{
    double secs =
        t->last_done_us > t->first_send_us ? (double)(t->last_done_us - t->first_send_us) / 1e6 : 0;
    printf("    # %s: %d answered in %.3f s (%.0f req/s), latency p50 %.2f ms p99 %.2f ms "
           "max %.2f ms; 200 %d (%d units), 409 sold_out %d, 409 limit_exceeded %d, 503 %d, "
           "other %d; unanswered %d, send failed %d, refused %d\n",
           what, t->answered, secs, secs > 0 ? t->answered / secs : 0, t->p50_us / 1e3,
           t->p99_us / 1e3, t->max_lat_us / 1e3, t->ok, t->units, t->sold_out, t->limit, t->s503,
           t->other, t->unanswered, t->send_failed, t->no_connect);
    fflush(stdout);
}

/* ---- Redis: setup and what it holds ---- */

static sk_redis *redis_to(const char *url)
{
    sk_redis *r;
    char err[160];
    CHECK_MSG(sk_redis_new(&r, url, 2000, 5000, err, sizeof err) == 0, "redis %s: %s", url, err);
    return r;
}

/* Preheats aid (window opened a minute ago, closing in an hour) and opens it. */
static void open_activity(sk_redis *r, uint64_t aid, int64_t initial, int64_t limit, int64_t maxq)
{
    int64_t now = sk_wall_ms();
    struct sk_stock_def d = {.id = aid,
                             .initial = initial,
                             .per_user_limit = limit,
                             .max_per_order = maxq,
                             .start_ms = now - 60000,
                             .end_ms = now + 3600000};
    int rc;
    int64_t stock;
    CHECK_MSG(sk_stock_preheat(r, &d, 0, &rc, &stock) == 0, "preheat: %s", r->errstr);
    CHECK_EQ(rc, SK_RC_PREHEATED);
    CHECK_EQ(stock, initial);
    CHECK_MSG(sk_stock_set_open(r, aid, 1, &rc) == 0, "open: %s", r->errstr);
    CHECK_EQ(rc, SK_RC_OK);
}

static int64_t reply_int(const redisReply *rep, int *ok)
{
    *ok = 0;
    if (rep && rep->type == REDIS_REPLY_INTEGER) {
        *ok = 1;
        return rep->integer;
    }
    if (rep && rep->type == REDIS_REPLY_STRING) {
        char *end;
        errno = 0;
        long long v = strtoll(rep->str, &end, 10);
        *ok = errno == 0 && end != rep->str && *end == 0;
        return v;
    }
    return 0;
}

struct lentry {
    char oid[SK_ORDER_ID_MAX];
    uint32_t user;
    int32_t qty;
    int released;
};

/* Everything Redis holds for an activity, read after the load. */
struct view {
    int64_t stock, held_sum, xlen, max_held;
    int64_t *held; /* [MAX_USER + 1]: the buyers hash */
    struct lentry *lg;
    size_t nlg; /* ledger entries, sorted by order id */
};

static int cmp_lentry(const void *a, const void *b)
{
    return strcmp(((const struct lentry *)a)->oid, ((const struct lentry *)b)->oid);
}

static const struct lentry *ledger_find(const struct view *v, const char *oid)
{
    struct lentry key;
    snprintf(key.oid, sizeof key.oid, "%s", oid);
    return bsearch(&key, v->lg, v->nlg, sizeof *v->lg, cmp_lentry);
}

static void view_load(sk_redis *r, uint64_t aid, struct view *v)
{
    struct sk_keys k;
    sk_keys_for(&k, aid);
    memset(v, 0, sizeof *v);
    redisReply *rep;
    int ok;
    CHECK_MSG(sk_redis_cmd(r, &rep, "GET %s", k.stock) == 0, "GET: %s", r->errstr);
    v->stock = reply_int(rep, &ok);
    freeReplyObject(rep);
    CHECK_MSG(ok, "stock is not an integer");
    CHECK_MSG(sk_redis_cmd(r, &rep, "XLEN %s", k.orders) == 0, "XLEN: %s", r->errstr);
    v->xlen = reply_int(rep, &ok);
    freeReplyObject(rep);
    CHECK(ok);

    v->held = calloc(MAX_USER + 1, sizeof *v->held);
    CHECK(v->held);
    CHECK_MSG(sk_redis_cmd(r, &rep, "HGETALL %s", k.buyers) == 0, "HGETALL: %s", r->errstr);
    CHECK(rep->type == REDIS_REPLY_ARRAY && rep->elements % 2 == 0);
    for (size_t i = 0; i < rep->elements; i += 2) {
        int ok1, ok2;
        int64_t u = reply_int(rep->element[i], &ok1), h = reply_int(rep->element[i + 1], &ok2);
        CHECK_MSG(ok1 && ok2 && u >= 1 && u <= MAX_USER, "buyers hash: odd entry %s",
                  rep->element[i]->str);
        v->held[u] = h;
        v->held_sum += h;
        if (h > v->max_held) v->max_held = h;
    }
    freeReplyObject(rep);

    CHECK_MSG(sk_redis_cmd(r, &rep, "HGETALL %s", k.ledger) == 0, "HGETALL: %s", r->errstr);
    CHECK(rep->type == REDIS_REPLY_ARRAY && rep->elements % 2 == 0);
    v->nlg = rep->elements / 2;
    v->lg = calloc(v->nlg ? v->nlg : 1, sizeof *v->lg);
    CHECK(v->lg);
    for (size_t i = 0; i < v->nlg; i++) {
        const redisReply *f = rep->element[2 * i], *val = rep->element[2 * i + 1];
        CHECK(f->type == REDIS_REPLY_STRING && val->type == REDIS_REPLY_STRING);
        struct lentry *e = &v->lg[i];
        snprintf(e->oid, sizeof e->oid, "%s", f->str);
        unsigned long u;
        int qn, used = 0;
        CHECK_MSG(sscanf(val->str, "%lu:%d%n", &u, &qn, &used) == 2, "ledger %s = %s", f->str,
                  val->str);
        e->user = (uint32_t)u;
        e->qty = qn;
        e->released = strcmp(val->str + used, ":released") == 0;
        CHECK_MSG(val->str[used] == 0 || e->released, "ledger %s = %s", f->str, val->str);
    }
    freeReplyObject(rep);
    qsort(v->lg, v->nlg, sizeof *v->lg, cmp_lentry);
}

static void view_free(struct view *v)
{
    free(v->held);
    free(v->lg);
}

/* The invariants (docs/design.md) on what Redis holds: no oversell, stock + sum(buyers) == initial,
 * one stream entry per order, the per-user limit, and the buyers hash is
 * exactly the sum of each user's unreleased orders. */
static void check_invariants(const struct view *v, int64_t initial, int64_t limit)
{
    CHECK_MSG(v->stock >= 0 && v->stock <= initial, "stock %" PRId64 " outside [0, %" PRId64 "]",
              v->stock, initial);
    CHECK_MSG(v->stock + v->held_sum == initial,
              "stock %" PRId64 " + held %" PRId64 " != initial %" PRId64, v->stock, v->held_sum,
              initial);
    CHECK_MSG(v->xlen == (int64_t)v->nlg, "stream holds %" PRId64 " entries, ledger %zu orders",
              v->xlen, v->nlg);
    CHECK_MSG(v->max_held <= limit, "a user holds %" PRId64 " units, limit %" PRId64, v->max_held,
              limit);
    int64_t *sum = calloc(MAX_USER + 1, sizeof *sum);
    CHECK(sum);
    for (size_t i = 0; i < v->nlg; i++) {
        CHECK_MSG(v->lg[i].user >= 1 && v->lg[i].user <= MAX_USER, "ledger user %" PRIu32,
                  v->lg[i].user);
        if (!v->lg[i].released) sum[v->lg[i].user] += v->lg[i].qty;
    }
    for (uint32_t u = 1; u <= MAX_USER; u++)
        CHECK_MSG(sum[u] == v->held[u],
                  "user %" PRIu32 ": buyers hash %" PRId64 ", unreleased orders %" PRId64, u,
                  v->held[u], sum[u]);
    free(sum);
}

static int cmp_strp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Every 200 in recs[0..n) is a well-formed answer for the quantity asked,
 * with a unique order id that the ledger holds for the same user and
 * quantity. Returns how many ledger entries no client got a 200 for, and
 * (if extras is not NULL) a malloc'ed list of them. */
static size_t check_accepted_in_redis(const struct load *L, size_t n, const struct view *v,
                                      const struct lentry ***extras)
{
    const char **ids = malloc(sizeof *ids * (n ? n : 1));
    CHECK(ids);
    size_t nok = 0;
    for (size_t i = 0; i < n; i++) {
        const struct rec *q = &L->recs[i];
        if (q->outcome != OUT_ANSWERED || q->status != 200) continue;
        CHECK_MSG(!q->bad_body, "user %" PRIu32 ": malformed 200 body", q->user);
        CHECK_MSG(q->got_qty == q->qty, "user %" PRIu32 " asked %d, 200 says %d", q->user, q->qty,
                  q->got_qty);
        const struct lentry *e = ledger_find(v, q->oid);
        CHECK_MSG(e, "order %s (user %" PRIu32 ") answered 200 but is not in the Redis ledger",
                  q->oid, q->user);
        CHECK_MSG(e->user == q->user && e->qty == q->qty,
                  "order %s: ledger says user %" PRIu32 " qty %d, client was user %" PRIu32
                  " qty %d",
                  q->oid, e->user, e->qty, q->user, q->qty);
        ids[nok++] = q->oid;
    }
    qsort(ids, nok, sizeof *ids, cmp_strp);
    for (size_t i = 1; i < nok; i++)
        CHECK_MSG(strcmp(ids[i - 1], ids[i]) != 0, "order id %s answered twice", ids[i]);
    size_t nextra = 0;
    const struct lentry **ex = malloc(sizeof *ex * (v->nlg ? v->nlg : 1));
    CHECK(ex);
    for (size_t i = 0; i < v->nlg; i++) {
        const char *key = v->lg[i].oid;
        if (!bsearch(&key, ids, nok, sizeof *ids, cmp_strp)) ex[nextra++] = &v->lg[i];
    }
    free(ids);
    if (extras)
        *extras = ex;
    else
        free(ex);
    return nextra;
}

/* INFO commandstats "calls" of one command (0 when never called), or the
 * total of all commands but INFO and CONFIG (the test's own) with NULL. */
static int64_t cmd_calls(sk_redis *r, const char *cmd)
{
    redisReply *rep;
    CHECK_MSG(sk_redis_cmd(r, &rep, "INFO commandstats") == 0, "INFO: %s", r->errstr);
    CHECK(rep->type == REDIS_REPLY_STRING);
    int64_t total = 0;
    for (const char *p = strstr(rep->str, "cmdstat_"); p; p = strstr(p + 1, "cmdstat_")) {
        const char *name = p + 8;
        size_t nl = strcspn(name, ":");
        const char *c = strstr(name, ":calls=");
        if (!c) break;
        int64_t calls = strtoll(c + 7, NULL, 10);
        if (cmd && strlen(cmd) == nl && !strncmp(name, cmd, nl)) {
            total = calls;
            break;
        }
        if (!cmd && strncmp(name, "info:", 5) != 0 && strncmp(name, "config", 6) != 0)
            total += calls;
    }
    freeReplyObject(rep);
    return total;
}

/* ---- the server from outside ---- */

static int http_status_of(int port, const char *path, char *out, size_t cap)
{
    char req[256];
    int n =
        snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path);
    out[0] = 0;
    int st = 0;
    if (sk_th_http_raw(port, req, (size_t)n, out, cap, 2000) == 0) return 0;
    if (sscanf(out, "HTTP/1.%*d %d", &st) != 1) return 0;
    return st;
}

static int readyz(int port)
{
    char out[1024];
    return http_status_of(port, "/readyz", out, sizeof out);
}

/* A gauge or counter of /metrics (one process), -1 when absent. */
static int64_t metric(int port, const char *name)
{
    static char out[262144];
    if (http_status_of(port, "/metrics", out, sizeof out) != 200) return -1;
    char pat[128];
    snprintf(pat, sizeof pat, "\n%s ", name);
    const char *p = strstr(out, pat);
    return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

static int alive(pid_t pid)
{
    int st;
    return waitpid(pid, &st, WNOHANG) == 0;
}

/* The server's log must hold no sanitizer report and no worker crash (a
 * crash in a worker process could otherwise hide behind the supervisor's
 * restart). One exception, see serve_start: LeakSanitizer's report of
 * objects that live as long as the process (h2o config, context, loop and
 * struct sk_app are not freed at exit) shows only "Indirect leak" entries,
 * because they point at each other. A leak per request (a pending purchase
 * never freed) is a "Direct leak" and fails the test. */
static void check_server_log(const struct sk_th_serve *s)
{
    FILE *f = fopen(s->log, "r");
    if (!f) return;
    char line[1024];
    int indirect = 0;
    while (fgets(line, sizeof line, f)) {
        CHECK_MSG(!strstr(line, "ERROR: AddressSanitizer") && !strstr(line, "Direct leak") &&
                      !strstr(line, "runtime error:") && !strstr(line, "died ("),
                  "server log %s: %s", s->log, line);
        indirect += strstr(line, "Indirect leak") != NULL;
    }
    fclose(f);
    if (indirect)
        printf("    # server exit: LeakSanitizer reported %d indirect (process-lifetime) leaks\n",
               indirect);
}

/* A test that fails exits at once; the harness then SIGKILLs the server's
 * supervisor, whose worker processes (--processes N) would live on as
 * orphans holding the port (see the report). So a failing test stops its
 * server with SIGTERM on the way out. */
static struct sk_th_serve *live_server;

static void stop_live_server(void)
{
    struct sk_th_serve *s = live_server;
    if (!s || s->pid <= 0) return;
    kill(s->pid, SIGTERM);
    int64_t deadline = sk_mono_ms() + 5000;
    pid_t got;
    while ((got = waitpid(s->pid, NULL, WNOHANG)) == 0 && sk_mono_ms() < deadline) {
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (got == 0) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
    }
    s->pid = 0;
}

/* sk_th_serve_start (which waits for /healthz of one process), then until
 * the service is ready: /readyz 200 on 16 fresh connections in a row, so
 * that with SO_REUSEPORT spreading them every process has answered "ready"
 * with near certainty (a process still connecting to Redis answers 503).
 * LeakSanitizer (sanitized build only) is told not to turn its exit-time
 * report into exit code 1: check_server_log judges the report, and exit
 * code 0 after SIGTERM stays asserted. */
static void serve_start(struct sk_th_serve *s, const char *redis_url, const char *const *extra)
{
    static int hooked;
    if (!hooked++) atexit(stop_live_server);
    setenv("LSAN_OPTIONS", "exitcode=0", 1);
    /* --role api: the order worker persists and then trims the order
     * stream; here the stream must hold every admission for the checks. */
    const char *args[16] = {"--role", "api"};
    int n = 2;
    for (int i = 0; extra && extra[i] && n < 15; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    sk_th_serve_start(s, redis_url, args);
    live_server = s;
    int in_a_row = 0;
    int64_t deadline = sk_mono_ms() + 10000;
    while (in_a_row < 16) {
        in_a_row = readyz(s->port) == 200 ? in_a_row + 1 : 0;
        CHECK_MSG(sk_mono_ms() < deadline, "seckill serve not ready within 10 s (log %s)", s->log);
    }
}

static void stop_server(struct sk_th_serve *s)
{
    live_server = NULL;
    int code = sk_th_serve_stop(s, SIGTERM);
    check_server_log(s);
    CHECK_MSG(code == 0, "seckill serve exited with %d after SIGTERM (log %s)", code, s->log);
}

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

#define SALE_REQS 5000
#define SALE_USERS 2000
#define SALE_HOT 100 /* users 1..100 try 10 times each: the limit is contested */
#define SALE_HOT_REPS 10
#define SALE_STOCK 500
#define SALE_LIMIT 2

/* 5,000 purchases: every user at least once, hot users 10 times, the rest
 * at random; shuffled; a quarter ask for 2 units. Seeded: replayable. */
static void build_sale(struct load *L, uint64_t seed)
{
    uint64_t s = seed;
    static uint32_t users[SALE_REQS];
    sk_th_buyers(users, SALE_REQS, SALE_USERS, SALE_HOT, SALE_HOT_REPS, &s);
    for (size_t i = 0; i < SALE_REQS; i++)
        L->recs[i].user = users[i];
    for (size_t i = 0; i < SALE_REQS; i++)
        L->recs[i].qty = sk_th_rng(&s) % 4 == 0 ? 2 : 1;
    L->n = SALE_REQS;
}

static void sale_over_http(const char *nprocs)
{
    alarm(TEST_ALARM_S);
    uint64_t aid = sk_th_unique_id();
    sk_redis *r = redis_to(sk_th_redis_url());
    open_activity(r, aid, SALE_STOCK, SALE_LIMIT, 2);
    struct sk_th_serve s;
    const char *extra[] = {"--processes", nprocs, NULL};
    serve_start(&s, sk_th_redis_url(), extra);

    struct load *L = load_new(s.port, aid);
    build_sale(L, 42);
    pid_t pids[4];
    load_start(L, 4, 50, pids); /* 200 keep-alive connections */
    load_wait(L, 4, pids);
    check_no_client_failures(L);
    CHECK_MSG(alive(s.pid), "the server died (log %s)", s.log);
    check_server_log(&s); /* a worker restarted mid-load explains any 503 below */

    struct tally t;
    tally_load(L, L->n, &t);
    print_tally(atoi(nprocs) > 1 ? "2 server processes, 200 connections"
                                 : "1 server process, 200 connections",
                &t);
    CHECK_EQ(t.attempted, SALE_REQS);
    CHECK_MSG(t.answered == SALE_REQS, "%d unanswered, %d send failures, %d timeouts, %d bad",
              t.unanswered, t.send_failed, t.timeouts, t.bad);
    CHECK_MSG(t.other == 0 && t.s503 == 0, "%d answers not 200/409 (%d 503: %s), e.g. %s", t.other,
              t.s503, t.example_503, t.other_example);
    CHECK_EQ(t.bad_body, 0);
    CHECK_MSG(t.units == SALE_STOCK, "%d units accepted, stock %d", t.units, SALE_STOCK);
    CHECK_MSG(t.limit > 0, "the per-user limit was never contested");
    CHECK_MSG(atomic_load(&L->reconnects) == 0,
              "%d reconnects: the 200 connections were not all kept alive",
              atomic_load(&L->reconnects));

    /* the limit, from the answers alone */
    int *units = calloc(SALE_USERS + 1, sizeof *units);
    CHECK(units);
    for (size_t i = 0; i < L->n; i++)
        if (L->recs[i].status == 200) units[L->recs[i].user] += L->recs[i].got_qty;
    for (uint32_t u = 1; u <= SALE_USERS; u++)
        CHECK_MSG(units[u] <= SALE_LIMIT, "user %" PRIu32 " got %d units", u, units[u]);

    /* ...and from Redis: the 200s are exactly the orders */
    struct view v;
    view_load(r, aid, &v);
    check_invariants(&v, SALE_STOCK, SALE_LIMIT);
    CHECK_EQ(v.stock, 0);
    CHECK_MSG(v.xlen == t.ok, "stream holds %" PRId64 " orders, clients got %d 200s", v.xlen, t.ok);
    CHECK_EQ(check_accepted_in_redis(L, L->n, &v, NULL), 0);
    for (uint32_t u = 1; u <= SALE_USERS; u++)
        CHECK_MSG(v.held[u] == units[u], "user %" PRIu32 ": Redis %" PRId64 ", answers %d", u,
                  v.held[u], units[u]);
    free(units);
    view_free(&v);
    stop_server(&s);
    load_free(L);
    sk_redis_free(r);
}

SK_TEST(http_sale_admits_exactly_the_stock_over_200_keepalive_connections)
{
    sale_over_http("1");
}

SK_TEST(http_sale_with_two_processes_admits_exactly_the_stock)
{
    sale_over_http("2");
}

/* ---- 3: the sold-out fast path ---- */

static struct rec buy_one(struct hconn *c, uint64_t aid, uint32_t user, int qty)
{
    struct rec q = {.user = user, .qty = (int16_t)qty};
    if (c->fd < 0) CHECK_MSG(hc_open(c, c->port) == 0, "connect: %s", strerror(errno));
    do_purchase(c, aid, &q);
    CHECK_MSG(q.outcome == OUT_ANSWERED && !q.bad_body, "user %" PRIu32 ": outcome %d", user,
              q.outcome);
    if (q.close) hc_close(c);
    return q;
}

SK_TEST(sold_out_refusals_are_served_without_redis_calls_and_reopen_after_release)
{
    alarm(TEST_ALARM_S);
    struct sk_th_redis rs; /* private: its command counts are ours alone */
    sk_th_redis_start(&rs, NULL);
    sk_redis *r = redis_to(rs.url);
    uint64_t aid = sk_th_unique_id();
    enum { STOCK = 20, LIMIT = 2 };
    open_activity(r, aid, STOCK, LIMIT, 2);
    struct sk_th_serve s;
    serve_start(&s, rs.url, NULL); /* --role api: no order worker traffic in the counts */

    /* Sell out: 10 orders of 2, then refusals. */
    struct hconn c = {-1, s.port};
    struct rec orders[STOCK / 2];
    int nord = 0;
    for (uint32_t u = 1; u <= 15; u++) {
        struct rec q = buy_one(&c, aid, u, 2);
        if (q.status == 200) {
            CHECK(nord < STOCK / 2);
            orders[nord++] = q;
        } else {
            CHECK_MSG(q.status == 409 && !strcmp(q.err, "sold_out"), "user %" PRIu32 ": %d %s", u,
                      q.status, q.err);
        }
    }
    CHECK_EQ(nord, STOCK / 2);

    /* 2,000 more purchases from 8 connections, counted by Redis. */
    redisReply *rep;
    CHECK_MSG(sk_redis_cmd(r, &rep, "CONFIG RESETSTAT") == 0, "%s", r->errstr);
    freeReplyObject(rep);
    int64_t t0 = sk_mono_ms();
    struct load *L = load_new(s.port, aid);
    for (size_t i = 0; i < 2000; i++)
        L->recs[i] = (struct rec){.user = 1000 + (uint32_t)i, .qty = 1};
    L->n = 2000;
    pid_t pid;
    load_start(L, 1, 8, &pid);
    load_wait(L, 1, &pid);
    int64_t elapsed = sk_mono_ms() - t0;
    check_no_client_failures(L);
    int64_t evalsha = cmd_calls(r, "evalsha"), eval = cmd_calls(r, "eval"),
            get = cmd_calls(r, "get"), all = cmd_calls(r, NULL);
    struct tally t;
    tally_load(L, L->n, &t);
    print_tally("sold out, 8 connections", &t);
    printf("    # Redis during those %" PRId64 " ms: evalsha %" PRId64 ", eval %" PRId64
           ", get %" PRId64 ", all commands %" PRId64 "\n",
           elapsed, evalsha, eval, get, all);
    CHECK_MSG(t.sold_out == 2000, "%d of 2000 got 409 sold_out", t.sold_out);
    /* The re-check is one GET per 250 ms; anything more would be a Redis
     * trip per refusal. A handful of slack for the edges of the window. */
    CHECK_MSG(evalsha + eval <= 2, "%" PRId64 " admission calls for sold-out refusals",
              evalsha + eval);
    CHECK_MSG(get <= elapsed / 250 + 2, "%" PRId64 " GETs in %" PRId64 " ms", get, elapsed);
    CHECK_MSG(all <= elapsed / 250 + 4, "%" PRId64 " Redis commands in %" PRId64 " ms", all,
              elapsed);
    load_free(L);

    /* Give one 2-unit order back; the sale reopens for exactly 2 units. */
    int rc;
    int64_t given;
    CHECK_MSG(sk_stock_release(r, aid, orders[0].oid, orders[0].user, 2, &rc, &given) == 0, "%s",
              r->errstr);
    CHECK_EQ(rc, SK_RC_RELEASED);
    CHECK_EQ(given, 2);
    int64_t t_rel = sk_mono_us(), t_first = 0;
    int resold = 0, polls = 0;
    uint32_t u = 5000;
    while (resold < 2 && sk_mono_us() - t_rel < 3000000) {
        struct rec q = buy_one(&c, aid, u++, 1);
        polls++;
        if (q.status == 200) {
            if (!resold) t_first = q.t_done_us;
            resold++;
        } else {
            CHECK_MSG(q.status == 409 && !strcmp(q.err, "sold_out"), "%d %s", q.status, q.err);
            struct timespec ts = {0, 1000 * 1000}; /* a polling loop, not a timer */
            nanosleep(&ts, NULL);
        }
    }
    CHECK_MSG(resold == 2, "%d units resold within 3 s of the release", resold);
    int64_t reopen_ms = (t_first - t_rel) / 1000;
    printf("    # release -> first accepted purchase: %" PRId64 " ms (%d polls)\n", reopen_ms,
           polls);
    CHECK_MSG(reopen_ms < 1500, "the sale reopened %" PRId64 " ms after the release", reopen_ms);
    /* ...and is sold out again: nothing beyond the 2 units given back */
    for (int i = 0; i < 20; i++) {
        struct rec q = buy_one(&c, aid, u++, 1);
        CHECK_MSG(q.status == 409 && !strcmp(q.err, "sold_out"), "after resale: %d %s", q.status,
                  q.err);
    }
    hc_close(&c);

    struct view v;
    view_load(r, aid, &v);
    check_invariants(&v, STOCK, LIMIT);
    CHECK_EQ(v.stock, 0);
    CHECK_EQ(v.nlg, STOCK / 2 + 2);
    const struct lentry *e = ledger_find(&v, orders[0].oid);
    CHECK_MSG(e && e->released, "released order %s not marked in the ledger", orders[0].oid);
    CHECK_EQ(v.held[orders[0].user], 0);
    view_free(&v);
    stop_server(&s);
    sk_redis_free(r);
    sk_th_redis_stop(&rs, 1);
}

/* ---- 4: Redis stopped or killed mid-run ---- */

#define FAULT_TIMEOUT_MS "300"
#define FAULT_HOLD_MS 1500 /* long enough for several reconnect attempts (backoff 50..800 ms) */
#define FAULT_STOCK 1000000

/* Index of the first record sent after t_us with this status, or -1. */
static long first_after(const struct load *L, int64_t t_us, int status)
{
    size_t n = atomic_load(&L->next);
    if (n > L->n) n = L->n;
    long best = -1;
    for (size_t i = 0; i < n; i++) {
        const struct rec *q = &L->recs[i];
        if (q->outcome != OUT_ANSWERED || q->status != status || q->t_send_us < t_us) continue;
        if (best < 0 || q->t_done_us < L->recs[best].t_done_us) best = (long)i;
    }
    return best;
}

static int count_after(const struct load *L, int64_t t_us, int status)
{
    size_t n = atomic_load(&L->next);
    if (n > L->n) n = L->n;
    int k = 0;
    for (size_t i = 0; i < n; i++)
        k += L->recs[i].outcome == OUT_ANSWERED && L->recs[i].status == status &&
             L->recs[i].t_send_us >= t_us;
    return k;
}

/* Runs a steady purchase load (unique users, 1 unit each), breaks Redis
 * mid-run (kill_it: SIGKILL, then a restart on the same port with AOF
 * appendfsync always; else SIGSTOP, then SIGCONT), and checks what every
 * client got against what Redis holds afterwards. */
static void redis_fault_under_load(int kill_it)
{
    alarm(TEST_ALARM_S);
    const char *aof[] = {"--appendonly", "yes", "--appendfsync", "always", NULL};
    struct sk_th_redis rs;
    sk_th_redis_start(&rs, kill_it ? aof : NULL);
    sk_redis *r = redis_to(rs.url);
    uint64_t aid = sk_th_unique_id();
    open_activity(r, aid, FAULT_STOCK, 1, 1);
    struct sk_th_serve s;
    const char *extra[] = {"--redis-timeout-ms", FAULT_TIMEOUT_MS, NULL};
    serve_start(&s, rs.url, extra);
    CHECK_EQ(readyz(s.port), 200);

    struct load *L = load_new(s.port, aid);
    L->stream = 1;
    L->user_base = 1;
    L->n = MAX_RECS;
    L->think_us = 1000; /* 8 connections x ~1 request/ms: bounded records */
    pid_t pids[2];
    load_start(L, 2, 4, pids);
    CHECK_MSG(POLL_UNTIL(atomic_load(&L->accepted) >= 300, 10000), "no load");

    /* The fault. */
    int64_t t_fault = sk_mono_us();
    if (kill_it) {
        kill(rs.pid, SIGKILL);
        waitpid(rs.pid, NULL, 0);
        rs.pid = 0;
    } else {
        kill(rs.pid, SIGSTOP);
    }
    CHECK_MSG(POLL_UNTIL(first_after(L, t_fault, 503) >= 0, 5000), "no 503 within 5 s");
    long f = first_after(L, t_fault, 503);
    int64_t to_503 = (L->recs[f].t_done_us - t_fault) / 1000;
    CHECK_MSG(POLL_UNTIL(readyz(s.port) == 503, 3000), "/readyz stayed %d", readyz(s.port));
    /* Hold the fault: every request meanwhile must be answered 503 quickly. */
    CHECK(POLL_UNTIL(sk_mono_us() - t_fault >= FAULT_HOLD_MS * 1000, FAULT_HOLD_MS + 1000));
    CHECK_MSG(alive(s.pid), "the server died while Redis was down (log %s)", s.log);
    CHECK_EQ(readyz(s.port), 503);

    /* Heal. */
    int64_t t_heal = sk_mono_us();
    if (kill_it) {
        sk_th_redis_restart(&rs, aof); /* same port and directory: the AOF reloads */
        sk_redis_disconnect(r);        /* the test's own connection died with it */
    } else {
        kill(rs.pid, SIGCONT);
    }
    int64_t t_back = sk_mono_us();
    CHECK_MSG(POLL_UNTIL(first_after(L, t_back, 200) >= 0, 8000),
              "no purchase accepted within 8 s of Redis coming back");
    long b = first_after(L, t_back, 200);
    int64_t recover_ms = (L->recs[b].t_done_us - t_back) / 1000;
    CHECK_MSG(POLL_UNTIL(readyz(s.port) == 200, 5000), "/readyz stayed %d", readyz(s.port));
    int base = atomic_load(&L->accepted);
    CHECK_MSG(POLL_UNTIL(atomic_load(&L->accepted) >= base + 300, 10000), "load did not resume");
    atomic_store(&L->stop, 1);
    load_wait(L, 2, pids);
    check_no_client_failures(L);
    CHECK_MSG(alive(s.pid), "the server died (log %s)", s.log);

    size_t n = atomic_load(&L->next);
    if (n > L->n) n = L->n;
    struct tally t;
    tally_load(L, n, &t);
    print_tally(kill_it ? "redis killed -9 and restarted" : "redis SIGSTOPped", &t);
    printf("    # fault -> first 503: %" PRId64 " ms; 503s while down: %d; back -> first 200: "
           "%" PRId64 " ms (healing took %" PRId64 " ms)\n",
           to_503, count_after(L, t_fault, 503), recover_ms, (t_back - t_heal) / 1000);
    CHECK_MSG(to_503 < 2000, "first 503 only %" PRId64 " ms after the fault", to_503);
    CHECK_MSG(t.max_lat_us < 2000000, "a request waited %" PRId64 " ms", t.max_lat_us / 1000);
    CHECK_MSG(t.answered == t.attempted, "%d requests unanswered (%d closed, %d timeouts)",
              t.attempted - t.answered, t.unanswered, t.timeouts);
    CHECK_MSG(t.other == 0 && t.sold_out == 0 && t.limit == 0, "unexpected answer: %s",
              t.other_example);
    CHECK_EQ(t.bad_body, 0);

    /* Redis afterwards: every 200 is an order (with AOF always, even across
     * kill -9). An order nobody got a 200 for is allowed only for a request
     * answered 503: its purchase reached Redis before the timeout or the
     * kill and ran there (a 503 means "maybe"; the call is never resent). */
    struct view v;
    view_load(r, aid, &v);
    check_invariants(&v, FAULT_STOCK, 1);
    const struct lentry **ex;
    size_t nex = check_accepted_in_redis(L, n, &v, &ex);
    for (size_t i = 0; i < nex; i++) {
        uint32_t u = ex[i]->user;
        CHECK_MSG(u >= 1 && u - 1 < n, "order %s of unknown user %" PRIu32, ex[i]->oid, u);
        const struct rec *q = &L->recs[u - 1];
        CHECK_MSG(q->outcome == OUT_ANSWERED && q->status == 503,
                  "order %s of user %" PRIu32 " exists, but that request got %d", ex[i]->oid, u,
                  q->status);
    }
    printf("    # orders in Redis %zu = 200s %d + admitted behind a 503 %zu\n", v.nlg, t.ok, nex);
    CHECK_EQ(v.nlg, (size_t)t.ok + nex);
    free(ex);
    view_free(&v);
    stop_server(&s);
    load_free(L);
    sk_redis_free(r);
    sk_th_redis_stop(&rs, 1);
}

SK_TEST(redis_stopped_mid_run_gives_503_then_recovers)
{
    redis_fault_under_load(0);
}

SK_TEST(redis_killed_and_restarted_mid_run_gives_503_then_recovers)
{
    redis_fault_under_load(1);
}

/* ---- 5: SIGTERM under load ---- */

/* What is asserted, and why. HTTP/1.1 lets a server close an idle
 * keep-alive connection at any time; a request the client writes as the
 * server closes it (or into the accept queue of a listener being closed)
 * gets no answer and was never read, so it cannot have been admitted: a
 * client may retry it. So "every request sent before SIGTERM got an
 * answer" is not a property any server can promise. What must hold:
 *  - every order in Redis reached its client as a 200 (ledger == 200s),
 *  - no request without an answer bought anything,
 *  - requests in flight at the signal were answered (there are such
 *    requests: 64 busy connections), and the exit code is 0. */
static void sigterm_under_load(const char *nprocs)
{
    alarm(TEST_ALARM_S);
    uint64_t aid = sk_th_unique_id();
    sk_redis *r = redis_to(sk_th_redis_url());
    open_activity(r, aid, FAULT_STOCK, 1, 1);
    struct sk_th_serve s;
    const char *extra[] = {"--processes", nprocs, NULL};
    serve_start(&s, sk_th_redis_url(), extra);

    struct load *L = load_new(s.port, aid);
    L->stream = 1;
    L->user_base = 1;
    L->n = MAX_RECS;
    pid_t pids[4];
    load_start(L, 4, 16, pids); /* 64 busy connections, no pause */
    CHECK_MSG(POLL_UNTIL(atomic_load(&L->answered) >= 2000, 20000), "no load");

    atomic_store(&L->term_sent, 1); /* refused reconnects are expected from now on */
    int64_t t_term = sk_mono_us();
    kill(s.pid, SIGTERM);
    int st = 0, exited = 0;
    int64_t deadline = sk_mono_ms() + 20000;
    while (!(exited = waitpid(s.pid, &st, WNOHANG) == s.pid) && sk_mono_ms() < deadline) {
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    int64_t drain_ms = (sk_mono_us() - t_term) / 1000;
    if (!exited) {
        kill(s.pid, SIGKILL);
        waitpid(s.pid, &st, 0);
    }
    s.pid = 0;
    atomic_store(&L->stop, 1);
    load_wait(L, 4, pids);
    CHECK_MSG(exited, "seckill serve still running 20 s after SIGTERM");
    check_server_log(&s);
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    check_no_client_failures(L);

    size_t n = atomic_load(&L->next);
    if (n > L->n) n = L->n;
    struct tally t;
    tally_load(L, n, &t);
    int after = 0, in_flight = 0, unanswered_before = 0;
    for (size_t i = 0; i < n; i++) {
        const struct rec *q = &L->recs[i];
        if (q->outcome == OUT_ANSWERED && q->status == 200 && q->t_done_us > t_term) {
            after++;
            in_flight += q->t_send_us < t_term;
        }
        if (q->outcome == OUT_UNANSWERED && q->t_send_us < t_term) unanswered_before++;
    }
    print_tally(atoi(nprocs) > 1 ? "SIGTERM, 2 processes" : "SIGTERM, 1 process", &t);
    printf("    # exit %d after %" PRId64 " ms; 200s after the signal %d (%d of them in flight "
           "at the signal); unanswered %d (%d of them sent before the signal)\n",
           code, drain_ms, after, in_flight, t.unanswered, unanswered_before);
    CHECK_MSG(code == 0, "exit code %d after SIGTERM (log %s)", code, s.log);
    CHECK_MSG(t.other == 0 && t.s503 == 0 && t.sold_out == 0 && t.limit == 0,
              "unexpected answer: %s (%d 503: %s)", t.other_example, t.s503, t.example_503);
    CHECK_EQ(t.timeouts + t.bad, 0);
    CHECK_MSG(in_flight > 0, "no request in flight at SIGTERM was answered");

    struct view v;
    view_load(r, aid, &v);
    check_invariants(&v, FAULT_STOCK, 1);
    const struct lentry **ex;
    size_t nex = check_accepted_in_redis(L, n, &v, &ex);
    CHECK_MSG(nex == 0,
              "%zu orders admitted but never answered with a 200, e.g. %s of user %" PRIu32, nex,
              ex[0]->oid, ex[0]->user);
    free(ex);
    CHECK_EQ(v.nlg, (size_t)t.ok);
    for (size_t i = 0; i < n; i++) {
        const struct rec *q = &L->recs[i];
        if (q->outcome == OUT_UNANSWERED || q->outcome == OUT_SEND_FAILED)
            CHECK_MSG(v.held[q->user] == 0, "user %" PRIu32 " got no answer but holds %" PRId64,
                      q->user, v.held[q->user]);
    }
    view_free(&v);
    load_free(L);
    sk_redis_free(r);
}

SK_TEST(sigterm_during_load_answers_every_admitted_request_and_exits_0)
{
    sigterm_under_load("1");
}

SK_TEST(sigterm_during_load_with_two_processes_answers_every_admitted_request_and_exits_0)
{
    sigterm_under_load("2");
}

/* ---- 6: clients that leave before their answer ---- */

/* Open sockets of a process (from /proc/PID/fd), -1 if unknown. */
static int socket_fds(pid_t pid)
{
    char dir[64], path[320], target[64];
    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
    int n = 0;
    for (int fd = 0; fd < 4096; fd++) {
        snprintf(path, sizeof path, "%s/%d", dir, fd);
        ssize_t l = readlink(path, target, sizeof target - 1);
        if (l < 0) continue;
        target[l] = 0;
        n += strncmp(target, "socket:", 7) == 0;
    }
    return n;
}

static void send_purchase_raw(struct hconn *c, uint64_t aid, uint32_t user)
{
    char req[256];
    int n = snprintf(req, sizeof req,
                     "POST /api/v1/activities/%" PRIu64 "/purchase HTTP/1.1\r\n"
                     "Host: 127.0.0.1\r\nX-User-Id: %" PRIu32 "\r\n"
                     "Content-Length: 14\r\n\r\n{\"quantity\":1}",
                     aid, user);
    CHECK_MSG(write_all(c->fd, req, (size_t)n) == 0, "send: %s", strerror(errno));
}

/* HTTP/2 with prior knowledge. The server speaks HTTP/1.1 only (README,
 * "HTTP hardening"): the preface is refused, so none of these purchases
 * may reach the engine. (With HTTP/2 on, h2o read such connections all the
 * time and freed their requests while they waited on Redis, the path the
 * request guard of http_server.c is for; HTTP/1.1 in h2o 2.2 stops reading
 * while a request is in progress and finds a gone client only when it
 * writes the answer.) */
static void h2_frame(char *buf, size_t *len, uint8_t type, uint8_t flags, uint32_t sid,
                     const char *payload, size_t plen)
{
    unsigned char *p = (unsigned char *)buf + *len;
    p[0] = (unsigned char)(plen >> 16);
    p[1] = (unsigned char)(plen >> 8);
    p[2] = (unsigned char)plen;
    p[3] = type;
    p[4] = flags;
    p[5] = (unsigned char)((sid >> 24) & 0x7f);
    p[6] = (unsigned char)(sid >> 16);
    p[7] = (unsigned char)(sid >> 8);
    p[8] = (unsigned char)sid;
    memcpy(p + 9, payload, plen);
    *len += 9 + plen;
}

/* HPACK "literal header field without indexing, new name", no Huffman;
 * name and value shorter than 127 bytes. */
static size_t hpack_literal(char *out, const char *name, const char *value)
{
    size_t nl = strlen(name), vl = strlen(value);
    out[0] = 0;
    out[1] = (char)nl;
    memcpy(out + 2, name, nl);
    out[2 + nl] = (char)vl;
    memcpy(out + 3 + nl, value, vl);
    return 3 + nl + vl;
}

/* Opens an HTTP/2 connection and sends n purchases on streams 1, 3, ...
 * for users first_user.., without reading anything back. */
static void h2_send_purchases(struct hconn *c, int port, uint64_t aid, uint32_t first_user, int n)
{
    static char buf[65536];
    size_t len = 0;
    CHECK_MSG(hc_open(c, port) == 0, "connect: %s", strerror(errno));
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    memcpy(buf, preface, sizeof preface - 1);
    len = sizeof preface - 1;
    h2_frame(buf, &len, 0x4 /* SETTINGS */, 0, 0, "", 0);
    static const char body[] = "{\"quantity\":1}";
    for (int i = 0; i < n; i++) {
        char hb[512], path[96], user[24];
        snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", aid);
        snprintf(user, sizeof user, "%" PRIu32, first_user + (uint32_t)i);
        size_t hl = 0;
        hl += hpack_literal(hb + hl, ":method", "POST");
        hl += hpack_literal(hb + hl, ":scheme", "http");
        hl += hpack_literal(hb + hl, ":authority", "127.0.0.1");
        hl += hpack_literal(hb + hl, ":path", path);
        hl += hpack_literal(hb + hl, "x-user-id", user);
        hl += hpack_literal(hb + hl, "content-type", "application/json");
        hl += hpack_literal(hb + hl, "content-length", "14");
        CHECK(len + 2 * 9 + hl + sizeof body < sizeof buf);
        uint32_t sid = 1 + 2 * (uint32_t)i;
        h2_frame(buf, &len, 0x1 /* HEADERS */, 0x4 /* END_HEADERS */, sid, hb, hl);
        h2_frame(buf, &len, 0x0 /* DATA */, 0x1 /* END_STREAM */, sid, body, sizeof body - 1);
    }
    CHECK_MSG(write_all(c->fd, buf, len) == 0, "send: %s", strerror(errno));
}

SK_TEST(client_disconnect_before_answer_keeps_its_admission)
{
    alarm(TEST_ALARM_S);
    struct sk_th_redis rs;
    sk_th_redis_start(&rs, NULL);
    sk_redis *r = redis_to(rs.url);
    uint64_t aid = sk_th_unique_id();
    enum { STOCK = 10000, STORM = 400, HELD = 200, H2_CONNS = 4, H2_STREAMS = 50 };
    enum { HELD_USER = 10000, H2_USER = 20000, LAST_USER = 50000 };
    open_activity(r, aid, STOCK, 1, 1);
    struct sk_th_serve s;
    /* long enough that the stopped Redis below is waited for, not timed out */
    const char *extra[] = {"--redis-timeout-ms", "15000", NULL};
    serve_start(&s, rs.url, extra);

    /* A: a storm of send-and-close, half with a FIN, half with an RST.
     * Whether each is admitted depends on when the close is seen, so only
     * consistency is checked: each order is one of these users'. */
    for (uint32_t u = 1; u <= STORM; u++) {
        struct hconn c;
        CHECK_MSG(hc_open(&c, s.port) == 0, "connect: %s", strerror(errno));
        send_purchase_raw(&c, aid, u);
        if (u % 2)
            hc_reset(&c);
        else
            hc_close(&c);
    }
    CHECK_MSG(POLL_UNTIL(metric(s.port, "seckill_inflight_requests") == 0, 5000),
              "requests of gone clients still in flight: %" PRId64,
              metric(s.port, "seckill_inflight_requests"));
    CHECK_MSG(alive(s.pid), "the server died (log %s)", s.log);

    /* B: deterministic. Redis is stopped, so every purchase is surely read
     * and waiting on Redis when its client leaves (FIN or RST); the answers
     * then come back for clients that are gone. 200 over HTTP/1.1; 200 as
     * streams of 4 HTTP/2 connections, which must all be refused. */
    int fds_before = socket_fds(s.pid);
    kill(rs.pid, SIGSTOP);
    static struct hconn held[HELD];
    for (int i = 0; i < HELD; i++) {
        CHECK_MSG(hc_open(&held[i], s.port) == 0, "connect: %s", strerror(errno));
        send_purchase_raw(&held[i], aid, HELD_USER + (uint32_t)i);
    }
    struct hconn h2[H2_CONNS];
    for (int i = 0; i < H2_CONNS; i++)
        h2_send_purchases(&h2[i], s.port, aid, H2_USER + (uint32_t)(i * H2_STREAMS), H2_STREAMS);
    const int waiting = HELD; /* the HTTP/2 purchases never reach the engine */
    CHECK_MSG(POLL_UNTIL(metric(s.port, "seckill_inflight_requests") == waiting, 5000),
              "in flight %" PRId64 ", want %d", metric(s.port, "seckill_inflight_requests"),
              waiting);
    for (int i = 0; i < HELD; i++) {
        if (i % 2)
            hc_reset(&held[i]);
        else
            hc_close(&held[i]);
    }
    for (int i = 0; i < H2_CONNS; i++) {
        if (i % 2)
            hc_reset(&h2[i]);
        else
            hc_close(&h2[i]);
    }
    /* The HTTP/2 connections are closed by the server (it refused them). */
    CHECK_MSG(POLL_UNTIL(socket_fds(s.pid) <= fds_before + HELD, 3000),
              "server still holds %d sockets (%d before): it did not drop the HTTP/2 "
              "connections",
              socket_fds(s.pid), fds_before);
    int fds_left = socket_fds(s.pid); /* informational: HTTP/1.1 connections noticed? */
    kill(rs.pid, SIGCONT);
    CHECK_MSG(POLL_UNTIL(metric(s.port, "seckill_inflight_requests") == 0, 10000),
              "in flight after Redis answered: %" PRId64,
              metric(s.port, "seckill_inflight_requests"));
    CHECK_MSG(alive(s.pid), "the server died (log %s)", s.log);

    /* Still serving, and correctly. */
    struct hconn c = {-1, s.port};
    struct rec q = buy_one(&c, aid, LAST_USER, 1);
    CHECK_MSG(q.status == 200, "after the disconnects: %d %s", q.status, q.err);
    hc_close(&c);

    struct view v;
    view_load(r, aid, &v);
    check_invariants(&v, STOCK, 1);
    int storm_admitted = 0;
    for (size_t i = 0; i < v.nlg; i++) {
        uint32_t u = v.lg[i].user;
        CHECK_MSG((u >= 1 && u <= STORM) || (u >= HELD_USER && u < HELD_USER + HELD) ||
                      (u >= H2_USER && u < H2_USER + H2_CONNS * H2_STREAMS) || u == LAST_USER,
                  "order %s of a user nobody sent: %" PRIu32, v.lg[i].oid, u);
        storm_admitted += u <= STORM;
    }
    for (int i = 0; i < HELD; i++)
        CHECK_MSG(v.held[HELD_USER + i] == 1, "user %d left before the answer; order lost",
                  HELD_USER + i);
    for (int i = 0; i < H2_CONNS * H2_STREAMS; i++)
        CHECK_MSG(v.held[H2_USER + i] == 0, "HTTP/2 user %d bought: HTTP/2 must be off",
                  H2_USER + i);
    CHECK_EQ(v.held[LAST_USER], 1);
    CHECK_EQ(v.nlg, (size_t)(storm_admitted + waiting + 1));
    printf("    # storm: %d of %d send-and-close purchases admitted; held: %d of %d admitted; "
           "when Redis answered, the server had closed %d of %d HTTP/1.1 and all %d (refused) "
           "HTTP/2 connections (server sockets %d before, %d then)\n",
           storm_admitted, STORM, waiting, waiting, HELD - (fds_left - fds_before), HELD, H2_CONNS,
           fds_before, fds_left);
    view_free(&v);
    stop_server(&s);
    sk_redis_free(r);
    sk_th_redis_stop(&rs, 1);
}
