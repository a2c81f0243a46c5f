/* load_run.c - one run of `seckill load` (load.h): the request prefix,
 * the file descriptor limit, the worker threads (load_engine.c) started
 * together after their connections exist, progress while they run, and
 * the merge of what each counted into the result, then the checks
 * (load_verify.c). */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "core/clock.h"
#include "core/error.h"
#include "http/auth.h"
#include "load/load_int.h"

#define TOKEN_TTL_S 3600

/* Adds n to the count of an error code (a small table: codes are few). */
void sk_load_count_code(struct sk_load_result *r, const char *code, size_t len, uint64_t n)
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

static void merge(struct sk_load_result *r, const struct sk_load_result *p)
{
    r->sent += p->sent;
    r->completed += p->completed;
    for (int s = 0; s < 600; s++)
        r->status[s] += p->status[s];
    r->status_other += p->status_other;
    for (size_t i = 0; i < p->n_refusals; i++)
        sk_load_count_code(r, p->refusals[i].code, strlen(p->refusals[i].code), p->refusals[i].n);
    r->refusals_other += p->refusals_other;
    r->err_connect += p->err_connect;
    r->err_closed += p->err_closed;
    r->err_timeout += p->err_timeout;
    r->err_protocol += p->err_protocol;
    r->reconnects += p->reconnects;
    r->backlog_at_end += p->backlog_at_end;
    sk_hist_add(&r->latency, &p->latency);
    sk_hist_add(&r->latency_busy, &p->latency_busy);
    sk_hist_add(&r->latency_ok, &p->latency_ok);
    sk_hist_add(&r->latency_refused, &p->latency_refused);
    r->accepted += p->accepted;
    r->accepted_units += p->accepted_units;
    r->distinct_users += p->distinct_users;
    r->missing_orders += p->missing_orders;
}

static int ensure_fds(int64_t need, char *err, size_t cap)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0) return 0;
    if (rl.rlim_cur != RLIM_INFINITY && (int64_t)rl.rlim_cur >= need) return 0;
    if (rl.rlim_max != RLIM_INFINITY && (int64_t)rl.rlim_max < need) {
        sk_load_set_err(err, cap,
                        "%" PRId64 " connections need %" PRId64
                        " file descriptors; the limit is %llu",
                        need - 64, need, (unsigned long long)rl.rlim_max);
        return SK_EINVAL;
    }
    rl.rlim_cur = (rlim_t)need;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
        sk_load_set_err(err, cap, "cannot raise the file descriptor limit to %" PRId64 ": %s", need,
                        strerror(errno));
        return SK_EINVAL;
    }
    return 0;
}

static int build_prefix(struct run *run, char *err, size_t cap)
{
    const struct sk_load_opts *o = run->o;
    char path[600];
    sk_load_path(o, path, sizeof path);
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
    if (n < 0 || (size_t)n + 22 + SK_AUTH_TOKEN_MAX + 64 + 4 + run->body_len > WBUF_CAP) {
        sk_load_set_err(err, cap, "request too long (path %s)", path);
        return SK_EINVAL;
    }
    run->prefix_len = (size_t)n;
    run->order_check = o->order_check >= 0 ? o->order_check
                                           : (strlen(o->path) >= 9 &&
                                              !strcmp(o->path + strlen(o->path) - 9, "/purchase"));
    return 0;
}

/* Starts the worker threads, lets them connect, starts the clock, and
 * prints progress until every worker returned (the caller joins them).
 * Returns 0, or SK_ENOMEM when a thread could not start (err says which;
 * the started ones are released with no time left). */
static int run_workers(struct run *run, struct worker *ws, int nthreads, char *err, size_t cap)
{
    const struct sk_load_opts *o = run->o;
    int rc = 0;
    atomic_init(&run->running, nthreads);
    int started = 0;
    for (int i = 0; i < nthreads; i++) {
        if (pthread_create(&ws[i].tid, NULL, sk_load_worker_main, &ws[i]) != 0) {
            sk_load_set_err(err, cap, "cannot start thread %d", i);
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
    run->start_ns = sk_load_now_ns();
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
        int64_t t = sk_load_now_ns();
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
    return rc;
}

int sk_load_run(const struct sk_load_opts *o, struct sk_load_result *r, char *err, size_t cap)
{
    memset(r, 0, sizeof *r);
    sk_hist_init(&r->latency);
    sk_hist_init(&r->latency_busy);
    sk_hist_init(&r->latency_ok);
    sk_hist_init(&r->latency_refused);
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
        sk_load_set_err(err, cap, "out of memory");
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
    atomic_init(&run->next_target, 0);
    atomic_init(&run->progress, 0);
    run->expiry = sk_wall_ms() / 1000 + TOKEN_TTL_S;
    int nthreads = (int)o->threads;
    for (int i = 0; rc == 0 && i < nthreads; i++) {
        size_t share = (size_t)(o->connections / o->threads) +
                       ((int64_t)i < o->connections % o->threads ? 1 : 0);
        rc = sk_load_worker_init(&ws[i], run, i, share, err, cap);
        if (o->rate > 0) {
            ws[i].rate = o->rate / (double)o->threads;
            ws[i].share = o->requests > 0 ? (uint64_t)(o->requests / o->threads) +
                                                ((int64_t)i < o->requests % o->threads ? 1 : 0)
                                          : UINT64_MAX;
        }
    }
    pthread_mutex_init(&run->mu, NULL);
    pthread_cond_init(&run->cv, NULL);
    if (rc == 0) rc = run_workers(run, ws, nthreads, err, cap);
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
            if (ws[i].oom || !recs || sk_load_rec_merge(recs, &ws[i].rec) < 0) oom = 1;
        }
        sk_load_worker_free(&ws[i]);
    }
    free(ws);
    pthread_mutex_destroy(&run->mu);
    pthread_cond_destroy(&run->cv);
    free(run);
    if (rc < 0) {
        sk_load_rec_free(recs);
        free(recs);
        return rc;
    }
    r->rec = recs;
    r->elapsed_s = (double)(end - start) / 1e9;
    r->rps = r->elapsed_s > 0 ? (double)r->completed / r->elapsed_s : 0;
    if (sk_load_interrupted())
        r->stopped_by = "interrupt";
    else if (all_dead)
        r->stopped_by = "connections";
    else if (o->requests > 0 && r->sent >= (uint64_t)o->requests)
        r->stopped_by = "requests";
    sk_load_verify(o, r, contending);
    if (all_dead) sk_load_violation(r, "every connection failed (is the server up at %s?)", o->url);
    if (oom)
        sk_load_violation(r, "out of memory while recording accepted orders: checks incomplete");
    return 0;
}
