/* bench_admission.c - `seckill-bench admission`: purchase and purchase_batch
 * driven directly against a real Redis with pipelining, next to same-run
 * reference lines (plain DECR from the same client, redis-benchmark on the
 * same script), reporting purchases/s and Redis CPU per purchase two ways:
 * INFO commandstats (the script's own time) and INFO cpu (the whole server,
 * network included). Every admitted phase is checked for oversell. The
 * same phases run once more with FCALL of the Functions library instead of
 * EVALSHA, and, on the private server, over its unix socket instead of
 * loopback TCP; the comparisons are printed at the end.
 *
 * Load model: --conns threads, each with its own blocking connection,
 * keeping --pipeline calls in flight (read one reply, append one more;
 * hiredis flushes the appended calls when it runs out of buffered replies). */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "bench/bench_int.h"
#include "bench/bench_opts.h"
#include "bench/bench_util.h"
#include "core/cli.h"
#include "core/clock.h"
#include "core/codes.h"
#include "core/error.h"
#include "engine/keys.h"
#include "engine/stock.h"
#include "redis/redis_conn.h"
#include "redis/script.h"
#include "spawn/redis_spawn.h"

/* The targets (2-core machine), Redis CPU per purchase. */
#define SK_BENCH_TARGET_BATCH_US 4.0
#define SK_BENCH_TARGET_SOLDOUT_US 2.0
#define SK_BENCH_MAX_STATS 48
#define SK_BENCH_U64 21
/* redis-benchmark settings of the reference lines (as in the notes). */
#define SK_BENCH_RB_PIPELINE "16"
#define SK_BENCH_RB_CLIENTS "50"

struct sk_bench_opts {
    const char *url; /* NULL: start a private redis-server */
    int64_t stock, users, batch, pipeline, conns, duration_s;
    int64_t rate_user, rate_ip; /* global rate limits passed with each batch, 0 = off */
    int64_t rounds;             /* the compared pairs run this many times, interleaved */
    int json;
};

enum sk_bench_kind { SK_BENCH_PURCHASE, SK_BENCH_BATCH, SK_BENCH_DECR, SK_BENCH_RB };

struct sk_bench_cmdstat {
    char name[40];
    int64_t calls, usec;
};

struct sk_bench_phase {
    const char *id;    /* JSON name */
    const char *label; /* table name */
    enum sk_bench_kind kind;
    int admit;     /* 1: every purchase should be admitted; 0: sold out; -1: not a purchase */
    int fcall;     /* FCALL of the library instead of EVALSHA */
    int unix_sock; /* over the private server's unix socket instead of TCP */
    int64_t total, batch;
    uint64_t aid;
    const char *rb_case; /* redis-benchmark: "admitted", "sold_out" or "decr" */
    int ref;             /* index of the same-case redis-benchmark line, -1 */

    /* The results, from ran on: a repeated round clears them from there. */
    int ran, cut, error;
    char note[256];
    int64_t calls, purchases, admitted, refused, errors;
    double secs, rate, rb_rps;
    double cpu_s;
    int nstats;
    struct sk_bench_cmdstat stats[SK_BENCH_MAX_STATS];
    int checked, check_ok;
    char check[256];
};

/* State shared by the worker threads of one phase. */
struct sk_bench_run {
    const struct sk_bench_opts *o;
    struct sk_bench_phase *ph;
    struct sk_keys k;
    char aid[SK_BENCH_U64];
    char decr_key[64];
    _Atomic int64_t next;
    _Atomic int stop, cut;
    int64_t deadline_us;
    pthread_barrier_t bar;
};

struct sk_bench_worker {
    struct sk_bench_run *run;
    pthread_t tid;
    sk_redis *r;
    int64_t calls, purchases, admitted, refused, errors, end_us;
    int other_rc; /* first refusal that is not the expected one, or -1 */
    char err[256];
    /* batch buffers, sized for --batch */
    struct sk_purchase *p;
    char (*ips)[SK_IP_MAX];
    struct sk_bench_call call;
};

/* The phases, in the order they run and print. */
enum {
    PH_PURCHASE,
    PH_BATCH,
    PH_SOLDOUT,
    PH_SOLDOUT_BATCH,
    PH_FCALL_PURCHASE,
    PH_FCALL_BATCH,
    PH_FCALL_SOLDOUT,
    PH_UNIX_PURCHASE,
    PH_UNIX_BATCH,
    PH_DECR,
    PH_RB_ADMIT,
    PH_RB_SOLDOUT,
    PH_RB_DECR,
    PH_COUNT
};

static int usage(FILE *f)
{
    fprintf(f,
            "usage: seckill-bench admission [options]\n"
            "\n"
            "Drives the purchase and purchase_batch scripts against Redis with pipelining and\n"
            "reports purchases/s and Redis CPU per purchase (INFO commandstats and INFO cpu),\n"
            "next to plain DECR and redis-benchmark on the same script, in the same run.\n"
            "Runs CONFIG RESETSTAT on the server; uses fresh activity ids and deletes them.\n"
            "\n"
            "options:\n"
            "  --redis URL     server to use (default: start a private redis-server on a\n"
            "                  free loopback port and stop it at the end)\n"
            "  --stock N       stock of each admitted phase; N unique users buy 1 unit each,\n"
            "                  so every call is admitted until stock runs out (default 200000)\n"
            "  --users N       purchase attempts (unique users) of each sold-out phase and\n"
            "                  calls of the DECR reference (default 300000)\n"
            "  --batch N       purchases per purchase_batch call, 1..%d (default 32)\n"
            "  --pipeline N    calls in flight per connection, 1..1024 (default 16)\n"
            "  --conns N       connections, one thread each, 1..256 (default 4)\n"
            "  --duration S    cap on each phase in seconds, 1..600 (default 5)\n"
            "  --rate-user R   purchase_batch phases pass a per-user rate limit of R/s\n"
            "                  (burst R); users are unique, so it costs but never refuses\n"
            "  --rate-ip R     same, per client IP (each purchase a distinct IP)\n"
            "  --rounds N      run the compared pairs (EVALSHA/FCALL, TCP/unix socket) N times\n"
            "                  in all, interleaved, each on a fresh activity, and compare\n"
            "                  their medians (1..15, default 1: a busy machine needs more)\n"
            "  --json          print one JSON object instead of the table\n"
            "\n"
            "exit status: 0 all checks passed, 1 a check failed or Redis failed, 2 bad usage\n",
            SK_BATCH_MAX);
    return f == stdout ? SK_EXIT_OK : SK_EXIT_USAGE;
}

/* ---- INFO helpers ---- */

static int info_text(sk_redis *r, const char *section, redisReply **out)
{
    int rc = sk_redis_cmd(r, out, "INFO %s", section);
    if (rc < 0) return rc;
    if ((*out)->type != REDIS_REPLY_STRING) {
        freeReplyObject(*out);
        *out = NULL;
        snprintf(r->errstr, sizeof r->errstr, "unexpected reply to INFO %s", section);
        return SK_EPROTO;
    }
    return 0;
}

/* Redis process CPU (user + sys) in seconds. */
static int server_cpu(sk_redis *r, double *out)
{
    char v[64];
    int rc = sk_bench_info_field(r, "cpu", "used_cpu_sys", v, sizeof v);
    if (rc < 0) return rc;
    double sys = strtod(v, NULL);
    rc = sk_bench_info_field(r, "cpu", "used_cpu_user", v, sizeof v);
    if (rc < 0) return rc;
    *out = sys + strtod(v, NULL);
    return 0;
}

/* Parses "cmdstat_NAME:calls=C,usec=U,..." lines. */
static int read_cmdstats(sk_redis *r, struct sk_bench_phase *ph)
{
    redisReply *rep;
    int rc = info_text(r, "commandstats", &rep);
    if (rc < 0) return rc;
    ph->nstats = 0;
    for (char *line = rep->str; line && *line && ph->nstats < SK_BENCH_MAX_STATS;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        char name[40];
        long long calls, usec;
        if (sscanf(line, "cmdstat_%39[^:]:calls=%lld,usec=%lld", name, &calls, &usec) == 3) {
            struct sk_bench_cmdstat *s = &ph->stats[ph->nstats++];
            snprintf(s->name, sizeof s->name, "%s", name);
            s->calls = calls;
            s->usec = usec;
        }
        line = nl ? nl + 1 : NULL;
    }
    freeReplyObject(rep);
    return 0;
}

static const struct sk_bench_cmdstat *find_stat(const struct sk_bench_phase *ph, const char *name)
{
    for (int i = 0; i < ph->nstats; i++)
        if (!strcmp(ph->stats[i].name, name)) return &ph->stats[i];
    return NULL;
}

/* Bookkeeping commands of the benchmark itself, not part of the load. */
static int is_overhead(const char *name)
{
    return !strncmp(name, "config", 6) || !strcmp(name, "info") || !strcmp(name, "ping") ||
           !strcmp(name, "client|setinfo") || !strcmp(name, "hello");
}

/* The command the phase sends (evalsha or fcall, or decr for the references). */
static const char *top_command(const struct sk_bench_phase *ph)
{
    if (ph->kind == SK_BENCH_DECR || (ph->rb_case && !strcmp(ph->rb_case, "decr"))) return "decr";
    return ph->fcall ? "fcall" : "evalsha";
}

static double cmd_us_per_purchase(const struct sk_bench_phase *ph)
{
    const struct sk_bench_cmdstat *s = find_stat(ph, top_command(ph));
    return s && ph->purchases ? (double)s->usec / (double)ph->purchases : 0;
}

static double cpu_us_per_purchase(const struct sk_bench_phase *ph)
{
    return ph->purchases ? ph->cpu_s * 1e6 / (double)ph->purchases : 0;
}

static int resetstat(sk_redis *r)
{
    redisReply *rep;
    int rc = sk_redis_cmd(r, &rep, "CONFIG RESETSTAT");
    if (rc < 0) return rc;
    rc = rep->type == REDIS_REPLY_STATUS ? 0 : SK_EPROTO;
    if (rc < 0)
        snprintf(r->errstr, sizeof r->errstr, "CONFIG RESETSTAT: %s",
                 rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply");
    freeReplyObject(rep);
    return rc;
}

/* ---- workers ---- */

static void worker_fail(struct sk_bench_worker *w, const char *what, const char *detail)
{
    if (!w->err[0]) snprintf(w->err, sizeof w->err, "%.40s: %.200s", what, detail);
    atomic_store(&w->run->stop, 1);
}

static int append_call(struct sk_bench_worker *w, int64_t first, size_t n)
{
    struct sk_bench_run *run = w->run;
    const struct sk_bench_phase *ph = run->ph;
    /* Users are numbered per phase from 1: unique, so no per-user limit hits. */
    if (ph->kind == SK_BENCH_DECR) {
        const char *argv[] = {"DECR", run->decr_key};
        return sk_redis_append(w->r, 2, argv, NULL);
    }
    const struct sk_bench_opts *o = run->o;
    for (size_t i = 0; i < n; i++) {
        int64_t u = first + (int64_t)i + 1;
        w->p[i].user_id = (uint64_t)u;
        w->p[i].quantity = 1;
        w->p[i].idem = NULL;
        w->p[i].idem_len = 0;
        w->p[i].ip = NULL;
        if (o->rate_ip > 0 && ph->kind != SK_BENCH_PURCHASE) {
            snprintf(w->ips[i], sizeof w->ips[i], "10.%d.%d.%d", (int)(u >> 16 & 255),
                     (int)(u >> 8 & 255), (int)(u & 255));
            w->p[i].ip = w->ips[i];
        }
    }
    /* The purchase phase: one buyer a call, no Idempotency-Key, no rate
     * limit; the same purchase_batch call serve makes. */
    struct sk_rate_limits rl = {0, 0, 0, 0};
    if (ph->kind != SK_BENCH_PURCHASE)
        rl = (struct sk_rate_limits){o->rate_user, o->rate_user, o->rate_ip, o->rate_ip};
    struct sk_batch_head h = {.label = run->k.label, .rl = &rl};
    int rc =
        sk_stock_batch_args_head(&h, w->p, n, w->call.buf, w->call.cap, w->call.args, w->call.lens);
    if (rc < 0) return rc;
    int nk = sk_stock_batch_keys(&run->k, &rl, w->p, n, w->call.buf + w->call.cap, w->call.kcap,
                                 w->call.keys);
    if (nk < 0) return nk;
    return sk_script_append(w->r, SK_SCRIPT_PURCHASE_BATCH, nk, w->call.keys, (int)SK_BATCH_ARGC(n),
                            w->call.args, w->call.lens);
}

static void count_rc(struct sk_bench_worker *w, int rc)
{
    int expected_refusal = w->run->ph->admit ? -1 : SK_RC_SOLD_OUT;
    if (rc == SK_RC_OK) {
        w->admitted++;
        return;
    }
    w->refused++;
    if (rc != expected_refusal && w->other_rc < 0) w->other_rc = rc;
}

static void handle_reply(struct sk_bench_worker *w, redisReply *rep, size_t n)
{
    const struct sk_bench_phase *ph = w->run->ph;
    if (rep->type == REDIS_REPLY_ERROR) {
        w->errors += (int64_t)n;
        worker_fail(w, "error reply", rep->str);
        return;
    }
    if (ph->kind == SK_BENCH_DECR) {
        if (rep->type != REDIS_REPLY_INTEGER) {
            w->errors++;
            worker_fail(w, "DECR", "unexpected reply");
            return;
        }
        w->admitted++;
        return;
    }
    if (sk_stock_batch_parse(rep, n, w->call.res, NULL) < 0) {
        w->errors += (int64_t)n;
        worker_fail(w, "purchase_batch", "unexpected reply");
        return;
    }
    for (size_t i = 0; i < n; i++)
        count_rc(w, w->call.res[i].rc);
}

/* Keeps up to --pipeline calls in flight until the phase's work is
 * claimed, the deadline passes or another worker failed. */
static void pump(struct sk_bench_worker *w)
{
    struct sk_bench_run *run = w->run;
    const struct sk_bench_phase *ph = run->ph;
    size_t depth = (size_t)run->o->pipeline;
    int64_t unit = ph->kind == SK_BENCH_BATCH ? ph->batch : 1;
    size_t *ring = calloc(depth, sizeof *ring); /* purchases in each in-flight call */
    if (!ring) {
        worker_fail(w, "pump", "out of memory");
        return;
    }
    size_t head = 0, tail = 0, inflight = 0;
    int stop = 0;
    for (;;) {
        while (!stop && inflight < depth) {
            if (atomic_load(&run->stop) || sk_bench_interrupted) {
                stop = 1;
                break;
            }
            int64_t first = atomic_fetch_add(&run->next, unit);
            if (first >= ph->total) {
                stop = 1;
                break;
            }
            size_t n = (size_t)(ph->total - first < unit ? ph->total - first : unit);
            if (append_call(w, first, n) < 0) {
                worker_fail(w, "append", w->r->errstr[0] ? w->r->errstr : "failed");
                stop = 1;
                break;
            }
            ring[tail] = n;
            tail = (tail + 1) % depth;
            inflight++;
        }
        if (!inflight) break;
        redisReply *rep;
        size_t n = ring[head];
        if (sk_redis_read(w->r, &rep) < 0) {
            for (; inflight; inflight--, head = (head + 1) % depth)
                w->errors += (int64_t)ring[head];
            worker_fail(w, "read", w->r->errstr);
            break;
        }
        head = (head + 1) % depth;
        inflight--;
        handle_reply(w, rep, n);
        freeReplyObject(rep);
        w->calls++;
        w->purchases += (int64_t)n;
        if (!stop && sk_mono_us() > run->deadline_us) {
            atomic_store(&run->cut, 1);
            stop = 1;
        }
    }
    free(ring);
}

static void *worker_main(void *arg)
{
    struct sk_bench_worker *w = arg;
    /* sk_script_append: FCALL (the library is loaded) or EVALSHA, as asked */
    w->r->fn = w->run->ph->fcall ? SK_FN_ON : SK_FN_OFF;
    int ok = sk_redis_connect(w->r) == 0;
    if (!ok) worker_fail(w, "connect", w->r->errstr);
    pthread_barrier_wait(&w->run->bar); /* all connected: main resets stats */
    pthread_barrier_wait(&w->run->bar); /* go */
    if (ok && !atomic_load(&w->run->stop)) pump(w);
    w->end_us = sk_mono_us();
    return NULL;
}

static void worker_free(struct sk_bench_worker *w)
{
    sk_redis_free(w->r);
    free(w->p);
    free(w->ips);
    sk_bench_call_free(&w->call);
}

static int worker_init(struct sk_bench_worker *w, struct sk_bench_run *run, const char *url)
{
    memset(w, 0, sizeof *w);
    w->run = run;
    w->other_rc = -1;
    char eb[200];
    if (sk_redis_new(&w->r, url, 2000, 10000, eb, sizeof eb) < 0) return SK_ENOMEM;
    w->r->pipe_window = 1; /* pump() keeps `depth` calls in flight, reading one at a time */
    size_t b = (size_t)run->o->batch;
    w->p = calloc(b, sizeof *w->p);
    w->ips = calloc(b, sizeof *w->ips);
    int rc = sk_bench_call_init(&w->call, b);
    return w->p && w->ips && rc == 0 ? 0 : SK_ENOMEM;
}

/* ---- phases ---- */

static int preheat(sk_redis *ctl, uint64_t aid, int64_t stock, char *err, size_t cap)
{
    return sk_bench_preheat_open(ctl, aid, stock, 1, 0, err, cap);
}

/* Oversell check: stock, buyers and stream agree with what the replies said. */
static int verify(sk_redis *ctl, struct sk_bench_phase *ph, int64_t initial)
{
    struct sk_stock_state st;
    int rc = sk_stock_state(ctl, ph->aid, &st);
    if (rc < 0) {
        snprintf(ph->check, sizeof ph->check, "cannot read state: %.200s", ctl->errstr);
        ph->checked = 1;
        return rc;
    }
    ph->checked = 1;
    int64_t orders = -1; /* orders in the stream (an entry per call holds several) */
    if ((rc = sk_stock_stream_orders(ctl, ph->aid, &orders)) < 0) {
        snprintf(ph->check, sizeof ph->check, "cannot read the stream: %.200s", ctl->errstr);
        return rc;
    }
    int ok = st.remaining >= 0 && orders == ph->admitted && st.buyers == ph->admitted &&
             st.held == ph->admitted && initial - st.remaining == ph->admitted && ph->errors == 0;
    if (ph->admit == 1)
        ok = ok && ph->refused == 0 && (ph->cut || (ph->admitted == initial && st.remaining == 0));
    else
        ok = ok && ph->admitted == 0 && ph->refused == ph->purchases;
    ph->check_ok = ok;
    snprintf(ph->check, sizeof ph->check,
             "%s: admitted %" PRId64 " of stock %" PRId64 ", stock left %" PRId64
             ", stream %" PRId64 ", buyers %" PRId64 ", units held %" PRId64 ", refused %" PRId64
             "%s",
             ok ? "ok" : "FAILED", ph->admitted, initial, st.remaining, orders, st.buyers, st.held,
             ph->refused, ph->cut ? " (cut by --duration)" : "");
    return 0;
}

static int run_phase(sk_redis *ctl, const struct sk_bench_opts *o, const char *url,
                     struct sk_bench_phase *ph, const char *decr_key)
{
    struct sk_bench_run run;
    memset(&run, 0, sizeof run);
    run.o = o;
    run.ph = ph;
    sk_keys_for(&run.k, ph->aid);
    snprintf(run.aid, sizeof run.aid, "%" PRIu64, ph->aid);
    snprintf(run.decr_key, sizeof run.decr_key, "%s", decr_key);
    atomic_init(&run.next, 0);
    atomic_init(&run.stop, 0);
    atomic_init(&run.cut, 0);
    int64_t initial = ph->admit == 1 ? ph->total : 0;
    int rc = 0;
    if (ph->kind != SK_BENCH_DECR &&
        (rc = preheat(ctl, ph->aid, initial, ph->note, sizeof ph->note)) < 0) {
        ph->error = 1;
        return rc;
    }

    size_t nw = (size_t)o->conns;
    struct sk_bench_worker *ws = calloc(nw, sizeof *ws);
    if (!ws) return SK_ENOMEM;
    for (size_t i = 0; i < nw && rc == 0; i++)
        rc = worker_init(&ws[i], &run, url);
    if (rc < 0) snprintf(ph->note, sizeof ph->note, "out of memory");
    if (rc < 0 || (rc = sk_bench_threads_start(&run.bar, ws, nw, sizeof *ws,
                                               offsetof(struct sk_bench_worker, tid), worker_main,
                                               ph->note, sizeof ph->note)) < 0)
        goto out;
    pthread_barrier_wait(&run.bar);
    double cpu0 = 0;
    if ((rc = resetstat(ctl)) < 0 || (rc = server_cpu(ctl, &cpu0)) < 0) {
        snprintf(ph->note, sizeof ph->note, "%s", ctl->errstr);
        atomic_store(&run.stop, 1);
    }
    int64_t t0 = sk_mono_us();
    run.deadline_us = t0 + o->duration_s * 1000000;
    pthread_barrier_wait(&run.bar);
    int64_t t1 = t0;
    for (size_t i = 0; i < nw; i++) {
        pthread_join(ws[i].tid, NULL);
        struct sk_bench_worker *w = &ws[i];
        if (w->end_us > t1) t1 = w->end_us;
        ph->calls += w->calls;
        ph->purchases += w->purchases;
        ph->admitted += w->admitted;
        ph->refused += w->refused;
        ph->errors += w->errors;
        if (w->err[0] && !ph->note[0]) snprintf(ph->note, sizeof ph->note, "%s", w->err);
        if (w->other_rc >= 0 && !ph->note[0])
            snprintf(ph->note, sizeof ph->note, "unexpected result %s", sk_rc_name(w->other_rc));
    }
    pthread_barrier_destroy(&run.bar);
    if (rc < 0) goto out;
    ph->ran = 1;
    ph->cut = atomic_load(&run.cut);
    ph->secs = (double)(t1 - t0) / 1e6;
    ph->rate = ph->secs > 0 ? (double)ph->purchases / ph->secs : 0;
    double cpu1 = 0;
    if ((rc = read_cmdstats(ctl, ph)) < 0 || (rc = server_cpu(ctl, &cpu1)) < 0) {
        snprintf(ph->note, sizeof ph->note, "%s", ctl->errstr);
        goto out;
    }
    ph->cpu_s = cpu1 - cpu0;
    if (ph->kind != SK_BENCH_DECR) rc = verify(ctl, ph, initial);
    if (ph->errors) ph->error = 1;
out:
    for (size_t i = 0; i < nw; i++)
        worker_free(&ws[i]);
    free(ws);
    if (rc < 0) ph->error = 1;
    return rc;
}

/* ---- redis-benchmark reference lines ---- */

static int rb_fail(struct sk_bench_phase *ph, int rc)
{
    ph->error = 1;
    return rc;
}

static int rb_phase(sk_redis *ctl, const struct sk_bench_opts *o, struct sk_bench_phase *ph,
                    const char *decr_key)
{
    const struct sk_redis_url *u = &ctl->url;
    char port[16], n[24], db[16], aid[SK_BENCH_U64], nkeys[8];
    /* the server ctl is on: a Sentinel URL names the master it found */
    const char *host = u->sentinel ? ctl->sn_host : u->host;
    snprintf(port, sizeof port, "%d", u->sentinel ? ctl->sn_port : u->port);
    snprintf(nkeys, sizeof nkeys, "%d", SK_PURCHASE_NKEYS + 1); /* + the one buyer's limiter */
    snprintf(n, sizeof n, "%" PRId64, ph->total);
    snprintf(db, sizeof db, "%d", u->db);
    snprintf(aid, sizeof aid, "%" PRIu64, ph->aid);
    struct sk_keys k;
    sk_keys_for(&k, ph->aid);
    char rl_key[SK_RL_KEY_MAX];
    const char *argv[48] = {"redis-benchmark",
                            u->unix_sock ? "-s" : "-h",
                            host,
                            "-p",
                            port,
                            "--dbnum",
                            db,
                            "-n",
                            n,
                            "-P",
                            SK_BENCH_RB_PIPELINE,
                            "-c",
                            SK_BENCH_RB_CLIENTS,
                            "--csv"};
    int a = 14;
    if (u->pass[0]) {
        argv[a++] = "-a";
        argv[a++] = u->pass;
        if (u->user[0]) {
            argv[a++] = "--user";
            argv[a++] = u->user;
        }
    }
    int64_t initial = 0;
    if (!strcmp(ph->rb_case, "decr")) {
        argv[a++] = "DECR";
        argv[a++] = decr_key;
    } else {
        /* __rand_int__ -> 12-digit user id in [0, 2^31): a repeat (a refusal
         * by the per-user limit) is rare at these counts, and is counted.
         * Stock headroom: redis-benchmark rounds -n up to whole pipelines,
         * and the admitted case must not run into sold out. */
        initial = ph->admit == 1 ? ph->total + 1024 : 0;
        int rc = preheat(ctl, ph->aid, initial, ph->note, sizeof ph->note);
        if (rc < 0) return rb_fail(ph, rc);
        argv[a++] = "-r";
        argv[a++] = "2147483647";
        argv[a++] = "EVALSHA";
        argv[a++] = sk_script_sha(SK_SCRIPT_PURCHASE_BATCH);
        argv[a++] = nkeys;
        sk_keys_purchase(&k, argv + a);
        a += SK_PURCHASE_NKEYS;
        /* the buyer's limiter key (keys.h) names user 0, not the random
         * one: redis-benchmark draws each __rand_int__ apart, and no rate
         * limit is on here, so the script never touches it */
        if (sk_keys_rl_user(&k, 0, rl_key, sizeof rl_key) < 0) return rb_fail(ph, SK_ENOMEM);
        argv[a++] = rl_key;
        sk_bench_rb_purchase_args(argv + a, aid);
        a += SK_BENCH_RB_ARGC;
    }
    argv[a] = NULL;
    double cpu0 = 0, cpu1 = 0;
    int rc;
    if ((rc = resetstat(ctl)) < 0 || (rc = server_cpu(ctl, &cpu0)) < 0) {
        snprintf(ph->note, sizeof ph->note, "%s", ctl->errstr);
        return rb_fail(ph, rc);
    }
    int64_t t0 = sk_mono_us();
    rc = sk_bench_redis_benchmark(argv, o->duration_s * 2000 + 5000, &sk_bench_interrupted,
                                  &ph->rb_rps, ph->note, sizeof ph->note);
    ph->secs = (double)(sk_mono_us() - t0) / 1e6;
    if (rc < 0) return rb_fail(ph, rc);
    if ((rc = read_cmdstats(ctl, ph)) < 0 || (rc = server_cpu(ctl, &cpu1)) < 0) {
        snprintf(ph->note, sizeof ph->note, "%s", ctl->errstr);
        return rb_fail(ph, rc);
    }
    ph->ran = 1;
    ph->cpu_s = cpu1 - cpu0;
    const struct sk_bench_cmdstat *s = find_stat(ph, top_command(ph));
    ph->calls = ph->purchases = s ? s->calls : 0;
    ph->rate = ph->rb_rps;
    if (strcmp(ph->rb_case, "decr") != 0) {
        struct sk_stock_state st;
        if ((rc = sk_stock_state(ctl, ph->aid, &st)) < 0) {
            snprintf(ph->note, sizeof ph->note, "%s", ctl->errstr);
            return rb_fail(ph, rc);
        }
        /* Admitted as counted by Redis itself (the orders in the stream);
         * the rest were refusals. */
        if ((rc = sk_stock_stream_orders(ctl, ph->aid, &ph->admitted)) < 0) {
            snprintf(ph->note, sizeof ph->note, "%s", ctl->errstr);
            return rb_fail(ph, rc);
        }
        ph->refused = ph->purchases - ph->admitted;
        ph->checked = 1;
        ph->check_ok =
            st.remaining >= 0 && st.held == ph->admitted && initial - st.remaining == ph->admitted;
        snprintf(ph->check, sizeof ph->check,
                 "%s: %" PRId64 " calls, admitted %" PRId64 " of stock %" PRId64
                 ", stock left %" PRId64 ", stream %" PRId64 ", units held %" PRId64 "%s",
                 ph->check_ok ? "ok" : "FAILED", ph->purchases, ph->admitted, initial, st.remaining,
                 ph->admitted, st.held,
                 ph->admit == 1 && ph->refused ? " (refused: repeated random user ids)" : "");
    }
    return 0;
}

/* ---- report ---- */

static double ratio(double a, double b)
{
    return b > 0 ? a / b : 0;
}

/* Inner commands the scripts ran, in us per purchase, largest first. */
static int inner_stats(const struct sk_bench_phase *ph, const struct sk_bench_cmdstat **out,
                       int cap)
{
    int n = 0;
    for (int i = 0; i < ph->nstats && n < cap; i++)
        if (strcmp(ph->stats[i].name, top_command(ph)) != 0 && !is_overhead(ph->stats[i].name))
            out[n++] = &ph->stats[i];
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && out[j]->usec > out[j - 1]->usec; j--) {
            const struct sk_bench_cmdstat *t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    return n;
}

static double inner_total_us(const struct sk_bench_phase *ph)
{
    const struct sk_bench_cmdstat *in[SK_BENCH_MAX_STATS];
    int n = inner_stats(ph, in, SK_BENCH_MAX_STATS);
    int64_t usec = 0;
    for (int i = 0; i < n; i++)
        usec += in[i]->usec;
    return ph->purchases ? (double)usec / (double)ph->purchases : 0;
}

struct sk_bench_summary {
    double batch_us, soldout_us, soldout_batch_us;
    int batch_met, soldout_met, checks_ok, errors;
};

static void summarize(const struct sk_bench_phase *ph, int n, struct sk_bench_summary *s)
{
    memset(s, 0, sizeof *s);
    s->checks_ok = 1;
    for (int i = 0; i < n; i++) {
        if (ph[i].checked && !ph[i].check_ok) s->checks_ok = 0;
        /* A failed reference line is reported, not fatal: ours still stand. */
        if (ph[i].error && ph[i].kind != SK_BENCH_RB) s->errors = 1;
        /* the targets are the EVALSHA-over-TCP phases' (the variants are compared apart) */
        if (!ph[i].ran || ph[i].kind == SK_BENCH_RB || ph[i].fcall || ph[i].unix_sock) continue;
        if (ph[i].kind == SK_BENCH_BATCH && ph[i].admit == 1)
            s->batch_us = cmd_us_per_purchase(&ph[i]);
        if (ph[i].kind == SK_BENCH_PURCHASE && ph[i].admit == 0)
            s->soldout_us = cmd_us_per_purchase(&ph[i]);
        if (ph[i].kind == SK_BENCH_BATCH && ph[i].admit == 0)
            s->soldout_batch_us = cmd_us_per_purchase(&ph[i]);
    }
    s->batch_met = s->batch_us > 0 && s->batch_us <= SK_BENCH_TARGET_BATCH_US;
    s->soldout_met = s->soldout_us > 0 && s->soldout_us <= SK_BENCH_TARGET_SOLDOUT_US;
}

/* ---- FCALL vs EVALSHA, unix socket vs TCP ---- */

/* Pairs of phases that differ in one thing: {reference, variant}; the
 * first NPAIRS_FCALL compare FCALL with EVALSHA, the rest the unix socket
 * with TCP. */
#define NPAIRS 5
#define NPAIRS_FCALL 3
#define SK_BENCH_MAX_ROUNDS 15
static const int pairs[NPAIRS][2] = {{PH_PURCHASE, PH_FCALL_PURCHASE},
                                     {PH_BATCH, PH_FCALL_BATCH},
                                     {PH_SOLDOUT, PH_FCALL_SOLDOUT},
                                     {PH_PURCHASE, PH_UNIX_PURCHASE},
                                     {PH_BATCH, PH_UNIX_BATCH}};

/* Each pair's figures over the rounds in which both sides ran: [pair][side][round]. */
struct sk_bench_rounds {
    int n[NPAIRS];
    double cmd[NPAIRS][2][SK_BENCH_MAX_ROUNDS], cpu[NPAIRS][2][SK_BENCH_MAX_ROUNDS],
        rate[NPAIRS][2][SK_BENCH_MAX_ROUNDS];
};
static struct sk_bench_rounds rounds;

static void rounds_add(int k, const struct sk_bench_phase *a, const struct sk_bench_phase *b)
{
    int r = rounds.n[k];
    if (r >= SK_BENCH_MAX_ROUNDS) return;
    const struct sk_bench_phase *side[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        rounds.cmd[k][i][r] = cmd_us_per_purchase(side[i]);
        rounds.cpu[k][i][r] = cpu_us_per_purchase(side[i]);
        rounds.rate[k][i][r] = side[i]->rate;
    }
    rounds.n[k]++;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static double median(const double *v, int n)
{
    double t[SK_BENCH_MAX_ROUNDS];
    if (n <= 0) return 0;
    memcpy(t, v, sizeof *t * (size_t)n);
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

/* The median ratio variant / reference over the rounds (per round, so a
 * slow round weighs on both sides alike). */
static double median_ratio(const double (*v)[SK_BENCH_MAX_ROUNDS], int n)
{
    double r[SK_BENCH_MAX_ROUNDS];
    for (int i = 0; i < n; i++)
        r[i] = v[0][i] > 0 ? v[1][i] / v[0][i] : 0;
    return median(r, n);
}

static int pair_ran(const struct sk_bench_phase *ph, const int *p)
{
    return ph[p[0]].ran && ph[p[1]].ran && ph[p[0]].purchases && ph[p[1]].purchases;
}

static void print_comparisons(const struct sk_bench_phase *ph)
{
    for (int k = 0; k < NPAIRS; k++) {
        if (k == 0)
            printf("\nFCALL vs EVALSHA, same case (Redis us per purchase: the command's own time, "
                   "INFO commandstats; the whole server, INFO cpu):\n");
        if (k == NPAIRS_FCALL)
            printf("\nunix socket vs loopback TCP, same case (EVALSHA; purchases/s and the whole "
                   "server's CPU per purchase):\n");
        const int *p = pairs[k];
        int n = rounds.n[k];
        if (!n) {
            printf("  %-28s not measured%s%s\n", ph[p[0]].label, ph[p[1]].note[0] ? ": " : "",
                   ph[p[1]].note);
            continue;
        }
        printf("  %-28s ", ph[p[0]].label);
        if (k < NPAIRS_FCALL)
            printf("evalsha %.2f  fcall %.2f  (x%.2f); server cpu %.2f vs %.2f (x%.2f)",
                   median(rounds.cmd[k][0], n), median(rounds.cmd[k][1], n),
                   median_ratio(rounds.cmd[k], n), median(rounds.cpu[k][0], n),
                   median(rounds.cpu[k][1], n), median_ratio(rounds.cpu[k], n));
        else
            printf("tcp %.0f/s  unix %.0f/s  (x%.2f); server cpu %.2f vs %.2f us (x%.2f)",
                   median(rounds.rate[k][0], n), median(rounds.rate[k][1], n),
                   median_ratio(rounds.rate[k], n), median(rounds.cpu[k][0], n),
                   median(rounds.cpu[k][1], n), median_ratio(rounds.cpu[k], n));
        printf(n > 1 ? "  [median of %d rounds]\n" : "\n", n);
    }
}

static json_t *comparisons_json(const struct sk_bench_phase *ph)
{
    json_t *c = json_object(), *f = json_array(), *u = json_array();
    for (int k = 0; k < NPAIRS; k++) {
        int n = rounds.n[k];
        if (!n) continue;
        json_t *e = json_object();
        int fc = k < NPAIRS_FCALL;
        json_object_set_new(e, "case", json_string(ph[pairs[k][0]].id));
        json_object_set_new(e, "rounds", json_integer(n));
        const char *names[2][2] = {{"evalsha", "fcall"}, {"tcp", "unix"}};
        for (int i = 0; i < 2; i++) {
            char key[48];
            snprintf(key, sizeof key, "%s_cmd_usec", names[!fc][i]);
            json_object_set_new(e, key, json_real(median(rounds.cmd[k][i], n)));
            snprintf(key, sizeof key, "%s_cpu_usec", names[!fc][i]);
            json_object_set_new(e, key, json_real(median(rounds.cpu[k][i], n)));
            snprintf(key, sizeof key, "%s_purchases_per_s", names[!fc][i]);
            json_object_set_new(e, key, json_real(median(rounds.rate[k][i], n)));
        }
        json_object_set_new(e, "cmd_ratio", json_real(median_ratio(rounds.cmd[k], n)));
        json_object_set_new(e, "cpu_ratio", json_real(median_ratio(rounds.cpu[k], n)));
        json_object_set_new(e, "rate_ratio", json_real(median_ratio(rounds.rate[k], n)));
        json_array_append_new(fc ? f : u, e);
    }
    json_object_set_new(c, "fcall_vs_evalsha", f);
    json_object_set_new(c, "unix_vs_tcp", u);
    return c;
}

static void print_table(const struct sk_bench_opts *o, const char *url, int spawned,
                        const char *version, const struct sk_bench_phase *ph, int n, int decr)
{
    char cpu[256], kernel[256];
    sk_bench_machine(cpu, sizeof cpu, kernel, sizeof kernel);
    printf("seckill-bench admission\n");
    printf("  machine: %ld cpus, %s, %s\n", sysconf(_SC_NPROCESSORS_ONLN), cpu, kernel);
    printf("  redis:   %s at %s%s\n", version, url,
           spawned ? " (private, started for this run)" : "");
    printf("  load:    %" PRId64 " connections x pipeline %" PRId64 ", batch %" PRId64
           ", stock %" PRId64 " per admitted phase, %" PRId64 " attempts per sold-out phase\n",
           o->conns, o->pipeline, o->batch, o->stock, o->users);
    printf("  redis-benchmark: -P %s -c %s\n\n", SK_BENCH_RB_PIPELINE, SK_BENCH_RB_CLIENTS);
    printf("%-44s %9s %9s %7s %10s %7s %7s %9s %9s\n", "phase", "purchases", "admitted", "secs",
           "purch/s", "xDECR", "xref", "cmd us/p", "cpu us/p");
    double decr_rate = decr >= 0 && ph[decr].ran ? ph[decr].rate : 0;
    for (int i = 0; i < n; i++) {
        const struct sk_bench_phase *p = &ph[i];
        if (i > 0 && p->kind == SK_BENCH_DECR) printf("reference lines (same run):\n");
        if (!p->ran) {
            printf("%-44s %s\n", p->label, p->note[0] ? p->note : "not run");
            continue;
        }
        double rref = p->ref >= 0 && ph[p->ref].ran ? ratio(p->rate, ph[p->ref].rate) : 0;
        char xref[16] = "-", xdecr[16] = "-", adm[24] = "-";
        if (p->admit >= 0) snprintf(adm, sizeof adm, "%" PRId64, p->admitted);
        if (rref > 0) snprintf(xref, sizeof xref, "%.2f", rref);
        if (decr_rate > 0) snprintf(xdecr, sizeof xdecr, "%.2f", ratio(p->rate, decr_rate));
        printf("%-44s %9" PRId64 " %9s %7.2f %10.0f %7s %7s %9.2f %9.2f%s\n", p->label,
               p->purchases, adm, p->secs, p->rate, xdecr, xref, cmd_us_per_purchase(p),
               cpu_us_per_purchase(p), p->cut ? "  (cut by --duration)" : "");
    }
    printf(
        "\n  purch/s: purchases per second (wall clock); a batch call carries --batch purchases\n"
        "  xDECR: ratio to plain DECR from this client; xref: ratio to redis-benchmark EVALSHA,\n"
        "  same case; cmd us/p: INFO commandstats usec of the sent command / purchases;\n"
        "  cpu us/p: INFO cpu (user+sys, whole server incl. network) / purchases\n");

    printf("\nchecks (oversell):\n");
    for (int i = 0; i < n; i++)
        if (ph[i].checked) printf("  %-44s %s\n", ph[i].label, ph[i].check);
    for (int i = 0; i < n; i++)
        if (ph[i].note[0] && ph[i].ran) printf("  %-44s note: %s\n", ph[i].label, ph[i].note);

    printf("\nRedis time inside the scripts, us per purchase (INFO commandstats):\n");
    for (int i = 0; i < n; i++) {
        const struct sk_bench_phase *p = &ph[i];
        if (!p->ran || !strcmp(top_command(p), "decr")) continue;
        const struct sk_bench_cmdstat *in[SK_BENCH_MAX_STATS];
        int k = inner_stats(p, in, SK_BENCH_MAX_STATS);
        double total = cmd_us_per_purchase(p), inner = inner_total_us(p);
        printf("  %-44s %s %.2f = commands %.2f + Lua/script overhead %.2f:", p->label,
               top_command(p), total, inner, total - inner);
        for (int j = 0; j < k; j++)
            printf(" %s %.2f", in[j]->name, (double)in[j]->usec / (double)p->purchases);
        printf("\n");
    }

    struct sk_bench_summary s;
    summarize(ph, n, &s);
    printf("\ntargets (Redis CPU per purchase, INFO commandstats):\n");
    if (s.batch_us > 0)
        printf("  batched, admitted    <= %.1f us: %.2f us  %s\n", SK_BENCH_TARGET_BATCH_US,
               s.batch_us, s.batch_met ? "MET" : "MISSED");
    else
        printf("  batched, admitted    <= %.1f us: not measured\n", SK_BENCH_TARGET_BATCH_US);
    if (s.soldout_us > 0)
        printf("  sold-out refusal     <= %.1f us: %.2f us per call  %s (batched: %.2f us)\n",
               SK_BENCH_TARGET_SOLDOUT_US, s.soldout_us, s.soldout_met ? "MET" : "MISSED",
               s.soldout_batch_us);
    else
        printf("  sold-out refusal     <= %.1f us: not measured\n", SK_BENCH_TARGET_SOLDOUT_US);
    print_comparisons(ph);
    printf("\nresult: %s\n",
           s.checks_ok && !s.errors ? "all checks passed" : "FAILED (see checks and notes above)");
}

static json_t *phase_json(const struct sk_bench_phase *p, double decr_rate,
                          const struct sk_bench_phase *ref)
{
    json_t *j = json_object();
    json_object_set_new(j, "name", json_string(p->id));
    json_object_set_new(j, "label", json_string(p->label));
    json_object_set_new(j, "source",
                        json_string(p->kind == SK_BENCH_RB ? "redis-benchmark" : "seckill"));
    json_object_set_new(j, "ran", json_boolean(p->ran));
    if (p->note[0]) json_object_set_new(j, "note", json_string(p->note));
    if (!p->ran) return j;
    json_object_set_new(j, "command", json_string(top_command(p)));
    json_object_set_new(j, "batch", json_integer(p->kind == SK_BENCH_BATCH ? p->batch : 1));
    json_object_set_new(j, "calls", json_integer(p->calls));
    json_object_set_new(j, "purchases", json_integer(p->purchases));
    json_object_set_new(j, "admitted", json_integer(p->admitted));
    json_object_set_new(j, "refused", json_integer(p->refused));
    json_object_set_new(j, "errors", json_integer(p->errors));
    json_object_set_new(j, "seconds", json_real(p->secs));
    json_object_set_new(j, "purchases_per_s", json_real(p->rate));
    json_object_set_new(j, "cut_by_duration", json_boolean(p->cut));
    json_object_set_new(j, "cmd_usec_per_purchase", json_real(cmd_us_per_purchase(p)));
    json_object_set_new(j, "server_cpu_usec_per_purchase", json_real(cpu_us_per_purchase(p)));
    if (decr_rate > 0)
        json_object_set_new(j, "ratio_to_decr", json_real(ratio(p->rate, decr_rate)));
    if (ref && ref->ran && ref->rate > 0)
        json_object_set_new(j, "ratio_to_redis_benchmark", json_real(ratio(p->rate, ref->rate)));
    json_t *cs = json_object();
    for (int i = 0; i < p->nstats; i++) {
        json_t *e = json_object();
        json_object_set_new(e, "calls", json_integer(p->stats[i].calls));
        json_object_set_new(e, "usec", json_integer(p->stats[i].usec));
        json_object_set_new(cs, p->stats[i].name, e);
    }
    json_object_set_new(j, "commandstats", cs);
    if (p->checked) {
        json_object_set_new(j, "check_ok", json_boolean(p->check_ok));
        json_object_set_new(j, "check", json_string(p->check));
    }
    return j;
}

static void print_json(const struct sk_bench_opts *o, const char *url, int spawned,
                       const char *version, const struct sk_bench_phase *ph, int n, int decr)
{
    char cpu[256], kernel[256];
    sk_bench_machine(cpu, sizeof cpu, kernel, sizeof kernel);
    json_t *root = json_object();
    json_t *m = json_object();
    json_object_set_new(m, "nproc", json_integer(sysconf(_SC_NPROCESSORS_ONLN)));
    json_object_set_new(m, "cpu", json_string(cpu));
    json_object_set_new(m, "kernel", json_string(kernel));
    json_object_set_new(root, "machine", m);
    json_t *r = json_object();
    json_object_set_new(r, "url", json_string(url));
    json_object_set_new(r, "version", json_string(version));
    json_object_set_new(r, "private", json_boolean(spawned));
    json_object_set_new(root, "redis", r);
    json_t *c = json_object();
    json_object_set_new(c, "stock", json_integer(o->stock));
    json_object_set_new(c, "users", json_integer(o->users));
    json_object_set_new(c, "batch", json_integer(o->batch));
    json_object_set_new(c, "pipeline", json_integer(o->pipeline));
    json_object_set_new(c, "conns", json_integer(o->conns));
    json_object_set_new(c, "duration_s", json_integer(o->duration_s));
    json_object_set_new(c, "redis_benchmark_pipeline", json_integer(atoi(SK_BENCH_RB_PIPELINE)));
    json_object_set_new(c, "redis_benchmark_clients", json_integer(atoi(SK_BENCH_RB_CLIENTS)));
    json_object_set_new(root, "config", c);
    double decr_rate = decr >= 0 && ph[decr].ran ? ph[decr].rate : 0;
    json_t *arr = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(
            arr, phase_json(&ph[i], decr_rate, ph[i].ref >= 0 ? &ph[ph[i].ref] : NULL));
    json_object_set_new(root, "phases", arr);
    struct sk_bench_summary s;
    summarize(ph, n, &s);
    json_t *t = json_object();
    json_object_set_new(t, "batched_usec_max", json_real(SK_BENCH_TARGET_BATCH_US));
    json_object_set_new(t, "batched_usec", json_real(s.batch_us));
    json_object_set_new(t, "batched_met", json_boolean(s.batch_met));
    json_object_set_new(t, "soldout_usec_max", json_real(SK_BENCH_TARGET_SOLDOUT_US));
    json_object_set_new(t, "soldout_usec", json_real(s.soldout_us));
    json_object_set_new(t, "soldout_batch_usec", json_real(s.soldout_batch_us));
    json_object_set_new(t, "soldout_met", json_boolean(s.soldout_met));
    json_object_set_new(root, "targets", t);
    json_object_set_new(root, "comparisons", comparisons_json(ph));
    json_object_set_new(root, "ok", json_boolean(s.checks_ok && !s.errors));
    char *txt = json_dumps(root, JSON_INDENT(2));
    if (txt) printf("%s\n", txt);
    free(txt);
    json_decref(root);
}

/* ---- command line ---- */

static int parse_opts(int argc, char **argv, struct sk_bench_opts *o, int *help)
{
    static const struct sk_bench_opt opts[] = {
        {"--stock", SK_BENCH_OPT_INT, offsetof(struct sk_bench_opts, stock), 1, 100000000, NULL},
        {"--users", SK_BENCH_OPT_INT, offsetof(struct sk_bench_opts, users), 1, 100000000, NULL},
        {"--batch", SK_BENCH_OPT_INT, offsetof(struct sk_bench_opts, batch), 1, SK_BATCH_MAX, NULL},
        {"--pipeline", SK_BENCH_OPT_INT, offsetof(struct sk_bench_opts, pipeline), 1, 1024, NULL},
        {"--conns", SK_BENCH_OPT_INT, offsetof(struct sk_bench_opts, conns), 1, 256, NULL},
        {"--duration", SK_BENCH_OPT_INT, offsetof(struct sk_bench_opts, duration_s), 1, 600, NULL},
        {"--rate-user", SK_BENCH_OPT_INT, offsetof(struct sk_bench_opts, rate_user), 0, 1000000,
         NULL},
        {"--rate-ip", SK_BENCH_OPT_INT, offsetof(struct sk_bench_opts, rate_ip), 0, 1000000, NULL},
        {"--rounds", SK_BENCH_OPT_INT, offsetof(struct sk_bench_opts, rounds), 1, 15, NULL},
        {"--json", SK_BENCH_OPT_FLAG, offsetof(struct sk_bench_opts, json), 0, 0, NULL},
        {"--redis", SK_BENCH_OPT_STR, offsetof(struct sk_bench_opts, url), 0, 0, "a URL"},
    };
    return sk_bench_opts_parse("admission", opts, sizeof opts / sizeof opts[0], argc, argv, o,
                               help);
}

/* Activity ids for this run: fresh, so an external server's data is never
 * touched; checked to be absent before use. */
static int pick_ids(sk_redis *ctl, uint64_t *base, int count)
{
    for (int attempt = 0; attempt < 8; attempt++) {
        uint64_t b =
            9000000000ULL +
            ((uint64_t)getpid() * 1000ULL + (uint64_t)sk_wall_ms()) % 1000000000ULL * 16ULL +
            (uint64_t)attempt * 7919ULL * 16ULL;
        int free_all = 1;
        for (int i = 0; i < count && free_all; i++) {
            struct sk_stock_state st;
            int rc = sk_stock_state(ctl, b + (uint64_t)i, &st);
            if (rc < 0) return rc;
            if (st.exists) free_all = 0;
        }
        if (free_all) {
            *base = b;
            return 0;
        }
    }
    snprintf(ctl->errstr, sizeof ctl->errstr, "no free activity ids for the benchmark");
    return SK_EEXIST;
}

/* Rounds 2..--rounds of the compared pairs, interleaved (reference,
 * variant, next pair, ...), each phase on a fresh activity (ids from
 * first); their figures go to rounds. Returns 1 when a repeated phase
 * failed its check or errored (printed), else 0. */
static int more_rounds(sk_redis *ctl, const struct sk_bench_opts *o,
                       const struct sk_bench_phase *ph, uint64_t first, const char *url,
                       const char *unix_url, const char *decr_key)
{
    int failed = 0;
    uint64_t next = first;
    for (int64_t r = 1; r < o->rounds && !sk_bench_interrupted; r++) {
        if (!o->json)
            fprintf(stderr,
                    "seckill: bench admission: compared pairs, round %" PRId64 " of %" PRId64
                    "...\n",
                    r + 1, o->rounds);
        for (int k = 0; k < NPAIRS && !sk_bench_interrupted; k++) {
            if (!pair_ran(ph, pairs[k])) continue;
            struct sk_bench_phase *two = calloc(2, sizeof *two);
            if (!two) return 1;
            for (int i = 0; i < 2; i++) {
                const struct sk_bench_phase *t = &ph[pairs[k][i]];
                struct sk_bench_phase *p = &two[i];
                /* the plan of the phase, none of its results */
                *p = *t;
                memset(&p->ran, 0, sizeof *p - offsetof(struct sk_bench_phase, ran));
                p->ref = -1;
                p->aid = next++;
                run_phase(ctl, o, p->unix_sock ? unix_url : url, p, decr_key);
                if (p->error || (p->checked && !p->check_ok)) {
                    fprintf(stderr, "seckill: bench admission: %s, round %" PRId64 ": %s %s\n",
                            p->label, r + 1, p->note, p->check);
                    failed = 1;
                }
            }
            if (two[0].ran && two[1].ran && !failed) rounds_add(k, &two[0], &two[1]);
            free(two);
        }
    }
    return failed;
}

/* Entry point (argv[0] is "admission"). */
int sk_bench_admission(int argc, char **argv)
{
    struct sk_bench_opts o = {.stock = 200000,
                              .users = 300000,
                              .batch = 32,
                              .pipeline = 16,
                              .conns = 4,
                              .duration_s = 5,
                              .rounds = 1};
    int help = 0;
    int urc = parse_opts(argc - 1, argv + 1, &o, &help);
    if (urc) return urc;
    if (help) return usage(stdout);

    sk_bench_catch_signals(NULL);

    struct sk_redis_spawn sp;
    memset(&sp, 0, sizeof sp);
    int spawned = 0;
    const char *url = o.url;
    if (!url) {
        if (sk_redis_spawn_start(&sp, NULL) < 0) {
            fprintf(stderr, "seckill: bench: cannot start redis-server: %s\n", sp.errstr);
            return SK_EXIT_FAIL;
        }
        spawned = 1;
        url = sp.url;
    }
    int exit_code = SK_EXIT_FAIL;
    sk_redis *ctl = NULL;
    char eb[200] = "";
    uint64_t base = 0;
    int have_ids = 0;
    /* the main phases', then two per compared pair and extra round */
    int nids = PH_COUNT + 2 * NPAIRS * (int)(o.rounds - 1);
    char decr_key[64];
    struct sk_bench_phase *ph = calloc(PH_COUNT, sizeof *ph);
    if (!ph) goto done;
    if (sk_redis_new(&ctl, url, 2000, 30000, eb, sizeof eb) < 0) {
        fprintf(stderr, "seckill: bench: bad --redis URL: %s\n", eb[0] ? eb : url);
        exit_code = SK_EXIT_USAGE;
        goto done;
    }
    char version[64] = "unknown";
    if (sk_redis_connect(ctl) < 0 || sk_bench_load_scripts(ctl) < 0 ||
        sk_bench_info_field(ctl, "server", "redis_version", version, sizeof version) < 0 ||
        pick_ids(ctl, &base, nids) < 0) {
        fprintf(stderr, "seckill: bench: %s\n", ctl->errstr);
        goto done;
    }
    have_ids = 1;
    snprintf(decr_key, sizeof decr_key, "sk:bench:decr:%" PRIu64, base);

    /* {id, label, kind, admit, total, batch, rb_case, ref, ref_of, fcall, unix} */
    const struct {
        const char *id, *label;
        enum sk_bench_kind kind;
        int admit;
        int64_t total, batch;
        const char *rb_case;
        int ref, ref_of; /* ref_of: our phase of the same case (for -n) */
        int fcall, unix_sock;
    } plan[PH_COUNT] = {
        [PH_PURCHASE] = {"purchase", "purchase, admitted", SK_BENCH_PURCHASE, 1, o.stock, 1, NULL,
                         PH_RB_ADMIT},
        [PH_BATCH] = {"purchase_batch", "purchase_batch, admitted", SK_BENCH_BATCH, 1, o.stock,
                      o.batch, NULL, PH_RB_ADMIT},
        [PH_SOLDOUT] = {"purchase_soldout", "purchase, sold out", SK_BENCH_PURCHASE, 0, o.users, 1,
                        NULL, PH_RB_SOLDOUT},
        [PH_SOLDOUT_BATCH] = {"purchase_batch_soldout", "purchase_batch, sold out", SK_BENCH_BATCH,
                              0, o.users, o.batch, NULL, PH_RB_SOLDOUT},
        [PH_FCALL_PURCHASE] = {"purchase_fcall", "purchase, admitted, FCALL", SK_BENCH_PURCHASE, 1,
                               o.stock, 1, NULL, PH_RB_ADMIT, 0, 1, 0},
        [PH_FCALL_BATCH] = {"purchase_batch_fcall", "purchase_batch, admitted, FCALL",
                            SK_BENCH_BATCH, 1, o.stock, o.batch, NULL, PH_RB_ADMIT, 0, 1, 0},
        [PH_FCALL_SOLDOUT] = {"purchase_soldout_fcall", "purchase, sold out, FCALL",
                              SK_BENCH_PURCHASE, 0, o.users, 1, NULL, PH_RB_SOLDOUT, 0, 1, 0},
        [PH_UNIX_PURCHASE] = {"purchase_unix", "purchase, admitted, unix socket", SK_BENCH_PURCHASE,
                              1, o.stock, 1, NULL, PH_RB_ADMIT, 0, 0, 1},
        [PH_UNIX_BATCH] = {"purchase_batch_unix", "purchase_batch, admitted, unix socket",
                           SK_BENCH_BATCH, 1, o.stock, o.batch, NULL, PH_RB_ADMIT, 0, 0, 1},
        [PH_DECR] = {"decr", "DECR (this client, same conns/depth)", SK_BENCH_DECR, -1, o.users, 1,
                     NULL, PH_RB_DECR},
        [PH_RB_ADMIT] = {"redis_benchmark_purchase", "redis-benchmark EVALSHA purchase, admitted",
                         SK_BENCH_RB, 1, o.stock, 1, "admitted", -1, PH_PURCHASE},
        [PH_RB_SOLDOUT] = {"redis_benchmark_purchase_soldout",
                           "redis-benchmark EVALSHA purchase, sold out", SK_BENCH_RB, 0, o.users, 1,
                           "sold_out", -1, PH_SOLDOUT},
        [PH_RB_DECR] = {"redis_benchmark_decr", "redis-benchmark DECR", SK_BENCH_RB, -1, o.users, 1,
                        "decr", -1, PH_DECR},
    };
    int have_rb = sk_bench_on_path("redis-benchmark");
    for (int i = 0; i < PH_COUNT; i++) {
        struct sk_bench_phase *p = &ph[i];
        p->id = plan[i].id;
        p->label = plan[i].label;
        p->kind = plan[i].kind;
        p->admit = plan[i].admit;
        p->total = plan[i].total;
        p->batch = plan[i].batch;
        p->rb_case = plan[i].rb_case;
        p->fcall = plan[i].fcall;
        p->unix_sock = plan[i].unix_sock;
        p->ref = have_rb ? plan[i].ref : -1;
        p->aid = base + (uint64_t)i;
    }
    if (!o.json)
        fprintf(stderr,
                "seckill: bench admission: running %d phases (each capped at %" PRId64 " s)...\n",
                PH_COUNT, o.duration_s);
    for (int i = 0; i < PH_COUNT && !sk_bench_interrupted; i++) {
        if (ph[i].kind == SK_BENCH_RB) {
            /* Size redis-benchmark's -n from our own rate in the same case,
             * so it also ends within --duration. */
            const struct sk_bench_phase *same = &ph[plan[i].ref_of];
            if (same->ran && same->rate > 0 &&
                same->rate * (double)o.duration_s < (double)ph[i].total)
                ph[i].total = (int64_t)(same->rate * (double)o.duration_s) + 1;
            if (!have_rb)
                snprintf(ph[i].note, sizeof ph[i].note, "redis-benchmark not on PATH");
            else
                rb_phase(ctl, &o, &ph[i], decr_key);
        } else if (ph[i].fcall && ctl->fn != SK_FN_ON) {
            snprintf(ph[i].note, sizeof ph[i].note, "the server has no Redis Functions");
        } else if (ph[i].unix_sock && !(spawned && sp.unix_url[0])) {
            snprintf(ph[i].note, sizeof ph[i].note,
                     "needs the private redis-server's unix socket (run without --redis)");
        } else {
            run_phase(ctl, &o, ph[i].unix_sock ? sp.unix_url : url, &ph[i], decr_key);
        }
        /* A dead or broken server makes the rest meaningless. */
        if (ph[i].error && ph[i].kind != SK_BENCH_RB) break;
    }
    for (int k = 0; k < NPAIRS; k++)
        if (pair_ran(ph, pairs[k])) rounds_add(k, &ph[pairs[k][0]], &ph[pairs[k][1]]);
    int extra_failed =
        more_rounds(ctl, &o, ph, base + PH_COUNT, url, spawned ? sp.unix_url : "", decr_key);
    if (sk_bench_interrupted) fprintf(stderr, "seckill: bench: interrupted\n");
    if (o.json)
        print_json(&o, url, spawned, version, ph, PH_COUNT, PH_DECR);
    else
        print_table(&o, url, spawned, version, ph, PH_COUNT, PH_DECR);
    struct sk_bench_summary s;
    summarize(ph, PH_COUNT, &s);
    exit_code = s.checks_ok && !s.errors && !extra_failed && !sk_bench_interrupted ? SK_EXIT_OK
                                                                                   : SK_EXIT_FAIL;

done:
    if (ctl && have_ids && ctl->a) {
        /* Leave an external server as it was (except its stats). */
        for (int i = 0; i < nids; i++)
            sk_stock_drop(ctl, base + (uint64_t)i);
        redisReply *rep;
        if (sk_redis_cmd(ctl, &rep, "DEL %s", decr_key) == 0) freeReplyObject(rep);
    }
    sk_redis_free(ctl);
    free(ph);
    if (spawned && sk_redis_spawn_stop(&sp) < 0) fprintf(stderr, "seckill: bench: %s\n", sp.errstr);
    return exit_code;
}
