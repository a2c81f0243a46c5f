/* http_load_env.c - the machinery of the HTTP load and fault tests (see
 * http_load_env.h). */
#include "support/http_load_env.h"
#include "support/fixtures.h"

#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
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
#include "core/http_resp.h"
#include "engine/keys.h"
#include "engine/stock.h"
#include "support/http_client.h"

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

int hc_open(struct hconn *c, int port)
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

void hc_close(struct hconn *c)
{
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
}

/* Closes with an RST instead of a FIN (SO_LINGER 0). */
void hc_reset(struct hconn *c)
{
    struct linger lg = {1, 0};
    if (c->fd >= 0) setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    hc_close(c);
}

int write_all(int fd, const char *p, size_t n)
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

/* One answer, read with the product's parser (core/http_resp.h), held to
 * what serve must send: HTTP/1.1, a Content-Length, nothing after it (no
 * pipelining here). */
static int hc_read(int fd, struct hresp *r)
{
    char buf[4096];
    size_t len = 0;
    int eof = 0, rc;
    struct sk_http_resp p;
    memset(r, 0, sizeof *r);
    while ((rc = sk_http_resp_parse(buf, len, eof, 0, &p)) == 0) {
        if (eof || len == sizeof buf) return RD_BAD;
        ssize_t n = recv(fd, buf + len, sizeof buf - len, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return RD_TIMEOUT;
        if (n <= 0 && len == 0) return RD_CLOSED; /* closed or reset before answering */
        if (n < 0) return RD_BAD;
        eof = n == 0;
        len += (size_t)n;
    }
    if (rc < 0 || p.consumed != len || p.body_len >= sizeof r->body) return RD_BAD;
    char head[2048];
    if (p.head_len >= sizeof head || memcmp(p.head, "HTTP/1.1 ", 9) != 0) return RD_BAD;
    memcpy(head, p.head, p.head_len);
    head[p.head_len] = 0;
    if (!strcasestr(head, "\ncontent-length:")) return RD_BAD;
    r->status = p.status;
    r->close = !p.keep_alive;
    memcpy(r->body, p.body, p.body_len);
    r->body[p.body_len] = 0;
    r->body_len = p.body_len;
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

void do_purchase(struct hconn *c, uint64_t aid, struct rec *q)
{
    do_purchase_key(c, aid, NULL, q);
}

int send_purchase(struct hconn *c, uint64_t aid, const char *key, struct rec *q)
{
    char req[600], body[64], hk[96] = "";
    int bl = snprintf(body, sizeof body, "{\"quantity\":%d}", q->qty);
    if (key) snprintf(hk, sizeof hk, "Idempotency-Key: %.64s\r\n", key);
    int n = snprintf(req, sizeof req,
                     "POST /api/v1/activities/%" PRIu64 "/purchase HTTP/1.1\r\n"
                     "Host: 127.0.0.1\r\nX-User-Id: %" PRIu32 "\r\n%s"
                     "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
                     aid, q->user, hk, bl, body);
    q->t_send_us = sk_mono_us();
    if (write_all(c->fd, req, (size_t)n) < 0) {
        q->outcome = OUT_SEND_FAILED;
        q->t_done_us = sk_mono_us();
        return -1;
    }
    q->sent = 1;
    return 0;
}

void read_purchase(struct hconn *c, uint64_t aid, struct rec *q)
{
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

void do_purchase_key(struct hconn *c, uint64_t aid, const char *key, struct rec *q)
{
    if (send_purchase(c, aid, key, q) == 0) read_purchase(c, aid, q);
}

struct rec buy_one(struct hconn *c, uint64_t aid, uint32_t user, int qty)
{
    struct rec q = {.user = user, .qty = (int16_t)qty};
    if (c->fd < 0) CHECK_MSG(hc_open(c, c->port) == 0, "connect: %s", strerror(errno));
    do_purchase(c, aid, &q);
    CHECK_MSG(q.outcome == OUT_ANSWERED && !q.bad_body, "user %" PRIu32 ": outcome %d", user,
              q.outcome);
    if (q.close) hc_close(c);
    return q;
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

struct load *load_new(int port, uint64_t aid)
{
    struct load *L =
        mmap(NULL, sizeof *L, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK_MSG(L != MAP_FAILED, "mmap: %s", strerror(errno));
    L->port = port; /* anonymous memory is zeroed: counters start at 0 */
    L->aid = aid;
    return L;
}

void load_free(struct load *L)
{
    munmap(L, sizeof *L);
}

void load_start(struct load *L, int nproc, int nthr, pid_t *pids)
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

void load_wait(struct load *L, int nproc, const pid_t *pids)
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

void check_no_client_failures(struct load *L)
{
    CHECK_MSG(atomic_load(&L->errors) == 0, "%d client failures, first: %s",
              atomic_load(&L->errors), L->msg);
}

/* ---- what the clients saw ---- */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

void tally_load(const struct load *L, size_t n, struct tally *t)
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
        } else if (q->status == 503 && !strcmp(q->err, "unconfirmed")) {
            t->unconfirmed++;
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

void print_tally(const char *what, const struct tally *t)
{
    double secs =
        t->last_done_us > t->first_send_us ? (double)(t->last_done_us - t->first_send_us) / 1e6 : 0;
    printf("    # %s: %d answered in %.3f s (%.0f req/s), latency p50 %.2f ms p99 %.2f ms "
           "max %.2f ms; 200 %d (%d units), 409 sold_out %d, 409 limit_exceeded %d, 503 %d, "
           "503 unconfirmed %d, other %d; unanswered %d, send failed %d, refused %d\n",
           what, t->answered, secs, secs > 0 ? t->answered / secs : 0, t->p50_us / 1e3,
           t->p99_us / 1e3, t->max_lat_us / 1e3, t->ok, t->units, t->sold_out, t->limit, t->s503,
           t->unconfirmed, t->other, t->unanswered, t->send_failed, t->no_connect);
    fflush(stdout);
}

/* ---- Redis: setup and what it holds ---- */

sk_redis *redis_to(const char *url)
{
    sk_redis *r;
    char err[160];
    CHECK_MSG(sk_redis_new(&r, url, 2000, 5000, err, sizeof err) == 0, "redis %s: %s", url, err);
    return r;
}

/* Preheats aid (window opened a minute ago, closing in an hour) and opens it. */
void open_activity(sk_redis *r, uint64_t aid, int64_t initial, int64_t limit, int64_t maxq)
{
    sk_th_stock_new_open(r, aid, initial, limit, maxq, 0, 60000);
}

uint64_t private_sale(struct sk_th_redis *rs, const char *const *args, sk_redis **r,
                      int64_t initial, int64_t limit)
{
    sk_th_redis_start(rs, args);
    *r = redis_to(rs->url);
    uint64_t aid = sk_th_unique_id();
    open_activity(*r, aid, initial, limit, 1);
    return aid;
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

static int cmp_lentry(const void *a, const void *b)
{
    return strcmp(((const struct lentry *)a)->oid, ((const struct lentry *)b)->oid);
}

const struct lentry *ledger_find(const struct view *v, const char *oid)
{
    struct lentry key;
    snprintf(key.oid, sizeof key.oid, "%s", oid);
    return bsearch(&key, v->lg, v->nlg, sizeof *v->lg, cmp_lentry);
}

/* A stream's order is the ledger's order of the same id: same user and
 * quantity (sk_th_stream_orders). */
static void stream_order_in_ledger(void *arg, const struct sk_order *o)
{
    const struct lentry *e = ledger_find(arg, o->order_id);
    CHECK_MSG(e, "stream order %s is not in the ledger", o->order_id);
    CHECK_MSG(e->user == o->user_id && e->qty == o->quantity,
              "stream order %s: user %" PRIu64 " qty %" PRId64 ", ledger user %" PRIu32 " qty %d",
              o->order_id, o->user_id, o->quantity, e->user, e->qty);
}

void view_load(sk_redis *r, uint64_t aid, struct view *v)
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
    /* the stream's orders, each the ledger's order of the same id */
    v->xlen = sk_th_stream_orders(r, k.orders, k.label, stream_order_in_ledger, v, NULL);
}

void view_free(struct view *v)
{
    free(v->held);
    free(v->lg);
}

/* The invariants (docs/design.md) on what Redis holds: no oversell, stock + sum(buyers) == initial,
 * one stream order per ledger order (view_load checks each matches), the per-user limit, and the
 * buyers hash is exactly the sum of each user's unreleased orders. */
void check_invariants(const struct view *v, int64_t initial, int64_t limit)
{
    CHECK_MSG(v->stock >= 0 && v->stock <= initial, "stock %" PRId64 " outside [0, %" PRId64 "]",
              v->stock, initial);
    CHECK_MSG(v->stock + v->held_sum == initial,
              "stock %" PRId64 " + held %" PRId64 " != initial %" PRId64, v->stock, v->held_sum,
              initial);
    CHECK_MSG(v->xlen == (int64_t)v->nlg, "stream holds %" PRId64 " orders, ledger %zu orders",
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
size_t check_accepted_in_redis(const struct load *L, size_t n, const struct view *v,
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
int64_t cmd_calls(sk_redis *r, const char *cmd)
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
    size_t got = sk_th_http_raw(port, req, (size_t)n, out, cap, 2000);
    if (got == 0) return 0;
    st = sk_th_http_status(out, got);
    return st;
}

int readyz(int port)
{
    char out[1024];
    return http_status_of(port, "/readyz", out, sizeof out);
}

/* A gauge or counter of /metrics (one process), -1 when absent. */
int64_t metric(int port, const char *name)
{
    static char out[262144];
    if (http_status_of(port, "/metrics", out, sizeof out) != 200) return -1;
    char pat[128];
    snprintf(pat, sizeof pat, "\n%s ", name);
    const char *p = strstr(out, pat);
    return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

int alive(pid_t pid)
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
void check_server_log(const struct sk_th_serve *s)
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
void serve_start(struct sk_th_serve *s, const char *redis_url, const char *const *extra)
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

void stop_server(struct sk_th_serve *s)
{
    live_server = NULL;
    int code = sk_th_serve_stop(s, SIGTERM);
    check_server_log(s);
    CHECK_MSG(code == 0, "seckill serve exited with %d after SIGTERM (log %s)", code, s->log);
}
