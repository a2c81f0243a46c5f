/* bench_cluster.c - `seckill-bench cluster`: admissions per second
 * of ONE hot activity on a single redis-server and on a 3-master Redis
 * Cluster with the activity's stock in 1, 3 and 8 segments
 * (docs/segments.md), same machine, same run, with the scaling ratio of
 * each cluster line to the single-Redis line.
 *
 * Every purchase is a real admission (fresh user, per-user limit 1, a
 * stock of 10^9 that never runs out): decrement, buyers hash, XADD, ledger.
 * Load model, as `seckill serve` sends it: --threads client threads, each
 * with its own client (redis:// or redis+cluster://, which routes by slot),
 * draws fresh user ids and files each under its home segment
 * (sk_seg_home); a segment's bucket that reaches --batch purchases is one
 * purchase_batch EVALSHA on that segment's keys. A thread appends --depth
 * such calls, then reads their replies (the cluster client sends a
 * pipeline at its first read, every node written before any is read, and
 * collects it whole: so both modes run in rounds of --depth calls).
 *
 * Measured per configuration, over --seconds after a warm-up: admitted
 * purchases (rc OK in the replies), each master's CPU (INFO cpu user+sys
 * deltas), this process's CPU (getrusage) and the machine's busy CPU
 * (/proc/stat). Afterwards a cheap check reads the activity back: stock +
 * held + in transit == initial and held == what the replies admitted. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hiredis.h>
#include <jansson.h>

#include "bench/bench_int.h"
#include "bench/bench_opts.h"
#include "bench/bench_util.h"
#include "core/cli.h"
#include "core/clock.h"
#include "core/codes.h"
#include "core/error.h"
#include "engine/keys.h"
#include "engine/segment.h"
#include "engine/stock.h"
#include "redis/redis_cluster.h"
#include "redis/redis_conn.h"
#include "redis/script.h"
#include "spawn/redis_spawn.h"
#include "tests/support/spawn/cluster_spawn.h"

#define CK_MASTERS 3
#define CK_MAX_SEGS 8
#define CK_STOCK 1000000000LL
#define CK_AID_BASE 9300000000ULL
/* Users of thread t are (t + 1) * CK_USER_SPAN + n: unique in a run. */
#define CK_USER_SPAN 1000000000000ULL
/* Above this many "other" busy cores in a window the report says the
 * machine was not quiet (loopback kernel work alone stays well below). */
#define CK_QUIET_CORES 0.25

enum { CK_SINGLE, CK_CL1, CK_CL3, CK_CL8, CK_NCONFIGS };

struct ck_opts {
    int64_t threads, batch, depth, seconds, warmup_ms;
    int affine;       /* thread t talks to one master only (t mod masters used) */
    const char *json; /* file, or NULL */
};

struct ck_config {
    const char *id;    /* JSON name */
    const char *label; /* table name */
    int cluster;       /* 0: the single redis-server */
    int segs;
    uint64_t aid;
    int seg_node[CK_MAX_SEGS]; /* master (spawn index) of each segment's slot */
    int nnodes;                /* servers whose CPU is read (1 or CK_MASTERS) */
    int masters_used;

    int ran, error, checked, check_ok;
    char note[256];
    char check[320];
    int64_t adm_window, adm_total;
    int64_t node_adm[CK_MASTERS];
    double secs, rate;
    double node_cpu_s[CK_MASTERS], redis_cpu_s, client_cpu_s, machine_cpu_s;
};

struct ck_ctx {
    struct ck_opts o;
    struct sk_redis_spawn single;
    struct sk_cluster_spawn cl;
    int cl_port[CK_MASTERS]; /* kept for the report after the cluster stopped */
    double loadavg;          /* 1-minute load average at the start */
    char version[64];
    char command[1024];
    struct ck_config cf[CK_NCONFIGS];
};

/* What the threads of one configuration share. */
struct ck_run {
    const struct ck_opts *o;
    const struct ck_config *cf;
    const char *url;
    struct sk_keys keys[CK_MAX_SEGS];
    atomic_int stop;
    pthread_barrier_t bar;
};

struct ck_thread {
    struct ck_run *run;
    pthread_t tid;
    int idx;
    int node; /* --affine: the only master this thread sends to, else -1 */
    sk_redis *r;
    _Atomic int64_t admitted;
    _Atomic int64_t seg_adm[CK_MAX_SEGS];
    uint64_t next_user;
    char err[256];
    struct sk_purchase *bucket; /* segs x batch */
    int64_t fill[CK_MAX_SEGS];
    int *round_seg; /* segment of each call of a round */
    struct sk_bench_call call;
};

static int usage(FILE *f)
{
    fprintf(f,
            "usage: seckill-bench cluster [options]\n"
            "\n"
            "Admissions/s of one hot activity: a single redis-server vs a %d-master Redis\n"
            "Cluster with the activity in 1, 3 and 8 stock segments, same machine, same run.\n"
            "Starts its own servers (private loopback ports, temporary directories) and\n"
            "stops them. Every purchase is admitted (fresh users, limit 1, stock 10^9).\n"
            "Reports admissions/s, the ratio to the single redis-server, Redis CPU per\n"
            "admission and the cores Redis and the client used, then checks each\n"
            "activity (stock + held == initial, held == admitted as counted).\n"
            "\n"
            "options:\n"
            "  --threads N     client threads, one client each, 1..256 (default 4)\n"
            "  --batch N       purchases per purchase_batch call, 1..%d (default 64)\n"
            "  --depth N       calls in flight per thread, 1..64 (default 4)\n"
            "  --seconds S     measured time per configuration, 1..600 (default 3)\n"
            "  --warmup-ms MS  load before measuring, 0..60000 (default 500)\n"
            "  --affine        thread t sends only to master t mod (masters used), drawing\n"
            "                  users of that master's segments: no round waits on two\n"
            "                  masters (as serve's async client, one pipeline per master);\n"
            "                  use a multiple of 3 threads for an even load\n"
            "  --json FILE     also write the results as JSON to FILE\n"
            "\n"
            "exit status: 0 measured and checked, 1 a server or a check failed, 2 bad usage\n",
            CK_MASTERS, SK_BATCH_MAX);
    return f == stdout ? SK_EXIT_OK : SK_EXIT_USAGE;
}

static int parse_opts(int argc, char **argv, struct ck_opts *o, int *help)
{
    static const struct sk_bench_opt opts[] = {
        {"--threads", SK_BENCH_OPT_INT, offsetof(struct ck_opts, threads), 1, 256, NULL},
        {"--batch", SK_BENCH_OPT_INT, offsetof(struct ck_opts, batch), 1, SK_BATCH_MAX, NULL},
        {"--depth", SK_BENCH_OPT_INT, offsetof(struct ck_opts, depth), 1, 64, NULL},
        {"--seconds", SK_BENCH_OPT_INT, offsetof(struct ck_opts, seconds), 1, 600, NULL},
        {"--warmup-ms", SK_BENCH_OPT_INT, offsetof(struct ck_opts, warmup_ms), 0, 60000, NULL},
        {"--affine", SK_BENCH_OPT_FLAG, offsetof(struct ck_opts, affine), 0, 0, NULL},
        {"--json", SK_BENCH_OPT_STR, offsetof(struct ck_opts, json), 0, 0, "a file"},
    };
    return sk_bench_opts_parse("cluster", opts, sizeof opts / sizeof opts[0], argc, argv, o, help);
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR && !sk_bench_interrupted) {
    }
}

/* The command line as this process got it (/proc/self/cmdline). */
static void own_command(char *out, size_t cap)
{
    out[0] = 0;
    FILE *f = fopen("/proc/self/cmdline", "r");
    if (!f) return;
    char buf[2048];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    size_t off = 0;
    for (size_t i = 0; i < n && off + 4 < cap;) {
        const char *arg = buf + i;
        size_t len = strlen(arg);
        int quote = !len || strpbrk(arg, " \t'\"$") != NULL;
        int w = snprintf(out + off, cap - off, "%s%s%s%s", off ? " " : "", quote ? "'" : "", arg,
                         quote ? "'" : "");
        if (w < 0 || (size_t)w >= cap - off) break;
        off += (size_t)w;
        i += len + 1;
    }
}

/* ---- client threads ---- */

static void thread_fail(struct ck_thread *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void thread_fail(struct ck_thread *t, const char *fmt, ...)
{
    if (!t->err[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(t->err, sizeof t->err, fmt, ap);
        va_end(ap);
    }
    atomic_store(&t->run->stop, 1);
}

/* Fills buckets with fresh users until one holds --batch purchases;
 * returns its segment. */
static int next_batch(struct ck_thread *t)
{
    const int segs = t->run->cf->segs;
    const int64_t b = t->run->o->batch;
    for (;;) {
        uint64_t u = (uint64_t)(t->idx + 1) * CK_USER_SPAN + ++t->next_user;
        int s = sk_seg_home(u, segs);
        if (t->node >= 0 && t->run->cf->seg_node[s] != t->node) continue; /* --affine */
        struct sk_purchase *p = &t->bucket[s * b + t->fill[s]++];
        p->user_id = u;
        p->quantity = 1;
        p->idem = NULL;
        p->idem_len = 0;
        p->ip = NULL;
        if (t->fill[s] == b) return s;
    }
}

static int append_call(struct ck_thread *t, int s)
{
    struct ck_run *run = t->run;
    size_t b = (size_t)run->o->batch;
    struct sk_batch_head h = {.label = run->keys[s].label};
    const struct sk_purchase *p = &t->bucket[(size_t)s * b];
    int rc =
        sk_stock_batch_args_head(&h, p, b, t->call.buf, t->call.cap, t->call.args, t->call.lens);
    int nk = rc < 0 ? rc
                    : sk_stock_batch_keys(&run->keys[s], NULL, p, b, t->call.buf + t->call.cap,
                                          t->call.kcap, t->call.keys);
    t->fill[s] = 0;
    if (nk < 0) return nk;
    return sk_script_append(t->r, SK_SCRIPT_PURCHASE_BATCH, nk, t->call.keys, (int)SK_BATCH_ARGC(b),
                            t->call.args, t->call.lens);
}

static void handle_reply(struct ck_thread *t, const redisReply *rep, int s)
{
    size_t b = (size_t)t->run->o->batch;
    if (rep->type == REDIS_REPLY_ERROR) {
        thread_fail(t, "error reply from purchase_batch: %.200s", rep->str);
        return;
    }
    if (sk_stock_batch_parse(rep, b, t->call.res, NULL) < 0) {
        thread_fail(t, "unexpected purchase_batch reply");
        return;
    }
    int64_t ok = 0;
    for (size_t i = 0; i < b; i++) {
        if (t->call.res[i].rc == SK_RC_OK) {
            ok++;
        } else {
            thread_fail(t,
                        "a purchase of segment %d refused: %s (every purchase should be "
                        "admitted)",
                        s, sk_rc_name(t->call.res[i].rc));
        }
    }
    atomic_fetch_add_explicit(&t->admitted, ok, memory_order_relaxed);
    atomic_fetch_add_explicit(&t->seg_adm[s], ok, memory_order_relaxed);
}

static void pump(struct ck_thread *t)
{
    struct ck_run *run = t->run;
    const int64_t depth = run->o->depth;
    while (!atomic_load(&run->stop) && !sk_bench_interrupted) {
        int64_t sent = 0;
        for (; sent < depth; sent++) {
            int s = next_batch(t);
            if (append_call(t, s) < 0) {
                thread_fail(t, "append: %s", t->r->errstr[0] ? t->r->errstr : "failed");
                break;
            }
            t->round_seg[sent] = s;
        }
        for (int64_t i = 0; i < sent; i++) {
            redisReply *rep;
            if (sk_redis_read(t->r, &rep) < 0) {
                thread_fail(t, "read: %s", t->r->errstr);
                return; /* the connection is gone: the rest will not come */
            }
            handle_reply(t, rep, t->round_seg[i]);
            freeReplyObject(rep);
        }
    }
}

static void *thread_main(void *arg)
{
    struct ck_thread *t = arg;
    redisReply *rep = NULL;
    /* connect (and, for the cluster, read the slot map) before the start */
    int ok = sk_redis_connect(t->r) == 0 && sk_redis_cmd(t->r, &rep, "PING") == 0;
    if (rep) freeReplyObject(rep);
    if (!ok) thread_fail(t, "connect: %s", t->r->errstr);
    pthread_barrier_wait(&t->run->bar);
    if (ok) pump(t);
    return NULL;
}

static void thread_free(struct ck_thread *t)
{
    sk_redis_free(t->r);
    free(t->bucket);
    free(t->round_seg);
    sk_bench_call_free(&t->call);
}

static int thread_init(struct ck_thread *t, struct ck_run *run, int idx)
{
    memset(t, 0, sizeof *t);
    t->run = run;
    t->idx = idx;
    t->node = -1;
    if (run->o->affine && run->cf->masters_used > 1) {
        /* the (idx mod used)-th master that holds a segment */
        int want = idx % run->cf->masters_used, seen = 0;
        for (int n = 0; n < run->cf->nnodes && t->node < 0; n++) {
            int holds = 0;
            for (int s = 0; s < run->cf->segs; s++)
                holds |= run->cf->seg_node[s] == n;
            if (holds && seen++ == want) t->node = n;
        }
    }
    atomic_init(&t->admitted, 0);
    for (int s = 0; s < CK_MAX_SEGS; s++)
        atomic_init(&t->seg_adm[s], 0);
    char eb[200];
    if (sk_redis_new(&t->r, run->url, 2000, 10000, eb, sizeof eb) < 0) return SK_ENOMEM;
    size_t b = (size_t)run->o->batch;
    t->bucket = calloc((size_t)run->cf->segs * b, sizeof *t->bucket);
    t->round_seg = calloc((size_t)run->o->depth, sizeof *t->round_seg);
    int rc = sk_bench_call_init(&t->call, b);
    return t->bucket && t->round_seg && rc == 0 ? 0 : SK_ENOMEM;
}

/* ---- one configuration ---- */

struct ck_snap {
    int64_t us;
    int64_t adm, node_adm[CK_MASTERS];
    double node_cpu[CK_MASTERS], self_cpu, machine_cpu;
};

static int snapshot(struct ck_config *cf, struct ck_thread *ts, size_t nt, sk_redis **nodes,
                    struct ck_snap *sn)
{
    memset(sn, 0, sizeof *sn);
    sn->us = sk_mono_us();
    for (size_t i = 0; i < nt; i++) {
        sn->adm += atomic_load_explicit(&ts[i].admitted, memory_order_relaxed);
        for (int s = 0; s < cf->segs; s++)
            sn->node_adm[cf->seg_node[s]] +=
                atomic_load_explicit(&ts[i].seg_adm[s], memory_order_relaxed);
    }
    sn->self_cpu = sk_bench_self_cpu_seconds();
    sn->machine_cpu = sk_bench_machine_cpu_seconds();
    for (int n = 0; n < cf->nnodes; n++) {
        char v[64];
        double sys, user;
        if (sk_bench_info_field(nodes[n], "cpu", "used_cpu_sys", v, sizeof v) < 0) goto fail;
        sys = strtod(v, NULL);
        if (sk_bench_info_field(nodes[n], "cpu", "used_cpu_user", v, sizeof v) < 0) goto fail;
        user = strtod(v, NULL);
        sn->node_cpu[n] = sys + user;
        continue;
    fail:
        snprintf(cf->note, sizeof cf->note, "INFO cpu of server %d: %.200s", n, nodes[n]->errstr);
        return SK_EIO;
    }
    return 0;
}

static int preheat_open(sk_redis *ctl, struct ck_config *cf)
{
    return sk_bench_preheat_open(ctl, cf->aid, CK_STOCK, cf->segs, 0, cf->note, sizeof cf->note);
}

/* stock + held + in transit == initial, and held == buyers == stream ==
 * what the replies admitted. */
static void verify(sk_redis *ctl, struct ck_config *cf)
{
    struct sk_stock_state st;
    cf->checked = 1;
    if (sk_stock_state(ctl, cf->aid, &st) < 0) {
        snprintf(cf->check, sizeof cf->check, "FAILED: cannot read the activity: %.200s",
                 ctl->errstr);
        return;
    }
    int64_t segs = st.segments > 0 ? st.segments : 1, orders = -1;
    if (sk_stock_stream_orders(ctl, cf->aid, &orders) < 0) {
        snprintf(cf->check, sizeof cf->check, "FAILED: cannot read the streams: %.200s",
                 ctl->errstr);
        return;
    }
    cf->check_ok = st.exists && segs == cf->segs &&
                   st.remaining + st.held + st.in_transit == CK_STOCK && st.held == cf->adm_total &&
                   st.buyers == cf->adm_total && orders == cf->adm_total;
    snprintf(cf->check, sizeof cf->check,
             "%s: stock %" PRId64 " + held %" PRId64 " + in transit %" PRId64 " %s initial %lld"
             " (sum over %" PRId64 " segment%s); admitted as counted %" PRId64
             " %s held, buyers %" PRId64 ", stream %" PRId64,
             cf->check_ok ? "ok" : "FAILED", st.remaining, st.held, st.in_transit,
             st.remaining + st.held + st.in_transit == CK_STOCK ? "==" : "!=", CK_STOCK, segs,
             segs == 1 ? "" : "s", cf->adm_total, st.held == cf->adm_total ? "==" : "!=", st.buyers,
             orders);
}

static int run_config(struct ck_ctx *c, struct ck_config *cf, sk_redis *ctl, sk_redis **nodes,
                      const char *url)
{
    const struct ck_opts *o = &c->o;
    int rc = preheat_open(ctl, cf);
    if (rc < 0) {
        cf->error = 1;
        return rc;
    }
    struct ck_run run;
    memset(&run, 0, sizeof run);
    run.o = o;
    run.cf = cf;
    run.url = url;
    atomic_init(&run.stop, 0);
    for (int s = 0; s < cf->segs; s++) {
        if (cf->segs == 1)
            sk_keys_for(&run.keys[s], cf->aid);
        else
            sk_keys_seg(&run.keys[s], cf->aid, s);
    }
    size_t nt = (size_t)o->threads;
    struct ck_thread *ts = calloc(nt, sizeof *ts);
    if (!ts) {
        snprintf(cf->note, sizeof cf->note, "out of memory");
        cf->error = 1;
        return SK_ENOMEM;
    }
    for (size_t i = 0; i < nt && rc == 0; i++)
        rc = thread_init(&ts[i], &run, (int)i);
    if (rc < 0) snprintf(cf->note, sizeof cf->note, "out of memory");
    if (rc < 0 ||
        (rc = sk_bench_threads_start(&run.bar, ts, nt, sizeof *ts, offsetof(struct ck_thread, tid),
                                     thread_main, cf->note, sizeof cf->note)) < 0)
        goto out;
    pthread_barrier_wait(&run.bar);
    /* warm-up, then the measured window (both cut short by a failure) */
    struct ck_snap s0, s1;
    memset(&s0, 0, sizeof s0);
    memset(&s1, 0, sizeof s1);
    for (int64_t end = sk_mono_ms() + o->warmup_ms;
         sk_mono_ms() < end && !atomic_load(&run.stop) && !sk_bench_interrupted;)
        sleep_ms(10);
    int measured = 0;
    if (!atomic_load(&run.stop) && !sk_bench_interrupted &&
        (rc = snapshot(cf, ts, nt, nodes, &s0)) == 0) {
        for (int64_t end = sk_mono_ms() + o->seconds * 1000;
             sk_mono_ms() < end && !atomic_load(&run.stop) && !sk_bench_interrupted;)
            sleep_ms(10);
        rc = snapshot(cf, ts, nt, nodes, &s1);
        measured = rc == 0;
    }
    atomic_store(&run.stop, 1);
    for (size_t i = 0; i < nt; i++) {
        pthread_join(ts[i].tid, NULL);
        cf->adm_total += atomic_load(&ts[i].admitted);
        if (ts[i].err[0] && !cf->note[0]) snprintf(cf->note, sizeof cf->note, "%s", ts[i].err);
    }
    pthread_barrier_destroy(&run.bar);
    if (cf->note[0] || sk_bench_interrupted || !measured) {
        if (!cf->note[0]) snprintf(cf->note, sizeof cf->note, "interrupted");
        rc = rc < 0 ? rc : SK_EIO;
        goto out;
    }
    cf->ran = 1;
    cf->secs = (double)(s1.us - s0.us) / 1e6;
    cf->adm_window = s1.adm - s0.adm;
    cf->rate = cf->secs > 0 ? (double)cf->adm_window / cf->secs : 0;
    for (int n = 0; n < cf->nnodes; n++) {
        cf->node_cpu_s[n] = s1.node_cpu[n] - s0.node_cpu[n];
        cf->node_adm[n] = s1.node_adm[n] - s0.node_adm[n];
        cf->redis_cpu_s += cf->node_cpu_s[n];
    }
    cf->client_cpu_s = s1.self_cpu - s0.self_cpu;
    cf->machine_cpu_s = s1.machine_cpu - s0.machine_cpu;
    verify(ctl, cf);
out:
    for (size_t i = 0; i < nt; i++)
        thread_free(&ts[i]);
    free(ts);
    if (rc < 0) cf->error = 1;
    return rc;
}

/* ---- activity ids ---- */

static int owner_of(const struct sk_cluster_map *m, const struct sk_cluster_spawn *cl,
                    const char *key)
{
    int node = sk_cluster_map_owner(m, sk_cluster_key_slot(key, strlen(key)));
    if (node < 0) return -1;
    for (int i = 0; i < cl->n; i++)
        if (m->nodes[node].port == cl->port[i]) return i;
    return -1;
}

/* An id for cf on the cluster: S=1 any; S=3 each segment on another
 * master; S=8 every master used, as evenly as 8 over 3 goes (3/3/2). */
static int place(sk_redis *ctl, const struct sk_cluster_spawn *cl, struct ck_config *cf,
                 uint64_t *next_id)
{
    const struct sk_cluster_map *m = sk_redis_cluster_map(ctl);
    if (!m || !m->loaded) {
        snprintf(cf->note, sizeof cf->note, "no cluster slot map");
        return SK_EPROTO;
    }
    for (int tries = 0; tries < 100000; tries++) {
        uint64_t id = (*next_id)++;
        int count[CK_MASTERS] = {0}, bad = 0;
        for (int s = 0; s < cf->segs && !bad; s++) {
            struct sk_keys k;
            if (cf->segs == 1)
                sk_keys_for(&k, id);
            else
                sk_keys_seg(&k, id, s);
            int o = owner_of(m, cl, k.stock);
            if (o < 0 || o >= CK_MASTERS) {
                bad = 1;
                break;
            }
            cf->seg_node[s] = o;
            count[o]++;
        }
        if (bad) continue;
        int used = 0, most = 0;
        for (int i = 0; i < CK_MASTERS; i++) {
            used += count[i] > 0;
            if (count[i] > most) most = count[i];
        }
        int want = cf->segs < CK_MASTERS ? cf->segs : CK_MASTERS;
        if (used == want && most <= (cf->segs + CK_MASTERS - 1) / CK_MASTERS) {
            cf->aid = id;
            cf->masters_used = used;
            return 0;
        }
    }
    snprintf(cf->note, sizeof cf->note, "no activity id spreads %d segments over the masters",
             cf->segs);
    return SK_ENOTFOUND;
}

/* ---- report ---- */

static double per_adm_us(double cpu_s, int64_t adm)
{
    return adm > 0 ? cpu_s * 1e6 / (double)adm : 0;
}

/* Busy cores not charged to Redis or to this process. */
static double other_cores(const struct ck_config *cf)
{
    double o = (cf->machine_cpu_s - cf->redis_cpu_s - cf->client_cpu_s) / cf->secs;
    return o > 0 ? o : 0;
}

/* One master per core: the even-spread figure (masters x 1e6 / cost) and
 * the bound set by the master with the largest share of the admissions. */
struct ck_predict {
    double us, even, share, busiest;
};

static struct ck_predict predict(const struct ck_config *cf)
{
    struct ck_predict p = {0, 0, 0, 0};
    if (!cf->ran || cf->adm_window <= 0) return p;
    p.us = per_adm_us(cf->redis_cpu_s, cf->adm_window);
    if (p.us <= 0) return p;
    int64_t most = 0;
    for (int n = 0; n < cf->nnodes; n++)
        if (cf->node_adm[n] > most) most = cf->node_adm[n];
    p.share = (double)most / (double)cf->adm_window;
    p.even = CK_MASTERS * 1e6 / p.us;
    p.busiest = p.share > 0 ? 1e6 / p.us / p.share : 0;
    if (p.busiest > p.even) p.busiest = p.even;
    return p;
}

/* A configuration that used every master ran: there is a prediction. */
static int predictable(const struct ck_ctx *c)
{
    return predict(&c->cf[CK_CL3]).us > 0 || predict(&c->cf[CK_CL8]).us > 0;
}

static int all_ok(const struct ck_ctx *c, int *nok)
{
    int ok = 1;
    *nok = 0;
    for (int i = 0; i < CK_NCONFIGS; i++) {
        const struct ck_config *cf = &c->cf[i];
        if (cf->ran && cf->checked && cf->check_ok)
            (*nok)++;
        else
            ok = 0;
    }
    return ok && !sk_bench_interrupted;
}

static void print_report(const struct ck_ctx *c)
{
    const struct ck_opts *o = &c->o;
    char cpu[256], kernel[256];
    sk_bench_machine(cpu, sizeof cpu, kernel, sizeof kernel);
    printf("seckill-bench cluster: admissions/s of one hot activity, single redis-server vs a "
           "%d-master Redis Cluster\n",
           CK_MASTERS);
    printf("  command: %s\n", c->command);
    printf("  machine: %ld cpus (nproc), %s, %s; redis-server %s; hiredis %d.%d.%d\n",
           sysconf(_SC_NPROCESSORS_ONLN), cpu, kernel, c->version, HIREDIS_MAJOR, HIREDIS_MINOR,
           HIREDIS_PATCH);
    printf("  load average at the start: %.2f (1 min)\n", c->loadavg);
    printf("  servers: single redis-server on 127.0.0.1:%d; cluster of %d masters (no replicas) "
           "on",
           c->single.port, CK_MASTERS);
    for (int i = 0; i < CK_MASTERS; i++)
        printf(" 127.0.0.1:%d", c->cl_port[i]);
    printf("; all private, no persistence, on this machine's cores with the client\n");
    printf("  load:    %" PRId64 " client threads x %" PRId64
           " purchase_batch EVALSHA calls of %" PRId64 " purchases in flight (rounds),\n"
           "           one call per home segment%s; fresh users, limit 1, stock %lld (never "
           "sold out);\n"
           "           warm-up %" PRId64 " ms, then %" PRId64 " s measured per configuration\n\n",
           o->threads, o->depth, o->batch,
           o->affine ? " (--affine: each thread sends to one master only)" : "", CK_STOCK,
           o->warmup_ms, o->seconds);

    const struct ck_config *single = &c->cf[CK_SINGLE];
    printf("%-14s %5s %7s %13s %9s %13s %12s %13s %12s %14s\n", "config", "segs", "masters",
           "admissions/s", "x single", "redis us/adm", "redis cores", "client cores", "other cores",
           "machine cores");
    for (int i = 0; i < CK_NCONFIGS; i++) {
        const struct ck_config *cf = &c->cf[i];
        if (!cf->ran) {
            printf("%-14s %5d %7s %s\n", cf->label, cf->segs, "-",
                   cf->note[0] ? cf->note : "not run");
            continue;
        }
        char ratio[16] = "-";
        if (single->ran && single->rate > 0)
            snprintf(ratio, sizeof ratio, "%.2f", cf->rate / single->rate);
        printf("%-14s %5d %7d %13.0f %9s %13.2f %12.2f %13.2f %12.2f %14.2f\n", cf->label, cf->segs,
               cf->masters_used, cf->rate, ratio, per_adm_us(cf->redis_cpu_s, cf->adm_window),
               cf->redis_cpu_s / cf->secs, cf->client_cpu_s / cf->secs, other_cores(cf),
               cf->machine_cpu_s / cf->secs);
    }
    printf("\n  admissions/s: purchases admitted (rc OK) per wall second in the measured window\n"
           "  x single: admissions/s / the single redis-server's; redis us/adm: CPU (INFO cpu\n"
           "  user+sys) of every server of the configuration / admissions; cores: CPU seconds\n"
           "  per wall second (redis: all its servers; client: this process; machine: all busy\n"
           "  CPU from /proc/stat, %ld available; other: machine - redis - client, i.e. the\n"
           "  kernel's work not charged to either, and any other process on the machine)\n",
           sysconf(_SC_NPROCESSORS_ONLN));

    double worst = 0;
    for (int i = 0; i < CK_NCONFIGS; i++)
        if (c->cf[i].ran && other_cores(&c->cf[i]) > worst) worst = other_cores(&c->cf[i]);
    if (worst > CK_QUIET_CORES)
        printf("\n  NOTE: up to %.2f cores of busy CPU were neither Redis's nor this client's\n"
               "  during a measurement (load average %.2f at the start): the machine was not\n"
               "  quiet, so the figures above are disturbed; run again on a quiet machine.\n",
               worst, c->loadavg);
    printf("\nper master (cluster):\n");
    for (int i = CK_CL1; i < CK_NCONFIGS; i++) {
        const struct ck_config *cf = &c->cf[i];
        if (!cf->ran) continue;
        printf("  %-12s activity %" PRIu64 ":\n", cf->label, cf->aid);
        for (int n = 0; n < cf->nnodes; n++) {
            char segs[64] = "";
            size_t off = 0;
            for (int s = 0; s < cf->segs; s++)
                if (cf->seg_node[s] == n && off < sizeof segs - 8)
                    off +=
                        (size_t)snprintf(segs + off, sizeof segs - off, "%s%d", off ? "," : "", s);
            printf("    127.0.0.1:%-5d segments %-7s %10.0f admissions/s  %.2f cores",
                   c->cl_port[n], off ? segs : "-", (double)cf->node_adm[n] / cf->secs,
                   cf->node_cpu_s[n] / cf->secs);
            if (cf->node_adm[n] > 0)
                printf("  %.2f us/adm", per_adm_us(cf->node_cpu_s[n], cf->node_adm[n]));
            printf("\n");
        }
    }

    printf("\ncorrectness check (each activity read back after its measurement):\n");
    for (int i = 0; i < CK_NCONFIGS; i++) {
        const struct ck_config *cf = &c->cf[i];
        if (cf->checked)
            printf("  %-12s %s\n", cf->label, cf->check);
        else if (cf->note[0])
            printf("  %-12s not checked: %s\n", cf->label, cf->note);
    }
    int nok;
    int ok = all_ok(c, &nok);
    printf("correctness check: %d of %d configurations ok\n", nok, CK_NCONFIGS);

    int cluster_ran = c->cf[CK_CL1].ran || c->cf[CK_CL3].ran || c->cf[CK_CL8].ran;
    if (single->ran && single->rate > 0 && cluster_ran) {
        printf("\nscaling vs single redis-server (%.0f admissions/s):", single->rate);
        for (int i = CK_CL1; i < CK_NCONFIGS; i++)
            if (c->cf[i].ran)
                printf(" %s %.2fx%s", c->cf[i].label, c->cf[i].rate / single->rate,
                       i + 1 < CK_NCONFIGS ? "," : "");
        printf("\n");
    }
    if (predictable(c) && single->ran && single->adm_window > 0) {
        double us1 = per_adm_us(single->redis_cpu_s, single->adm_window);
        printf("prediction: with one master per core and the client on other cores,\n"
               "  admissions/s ~= masters x 1e6 / (Redis CPU us per admission), from each\n"
               "  configuration's measured cost (ratios to the single redis-server measured "
               "here, %.0f/s):\n",
               single->rate);
        for (int i = CK_CL3; i < CK_NCONFIGS; i++) {
            const struct ck_predict pr = predict(&c->cf[i]);
            if (!pr.us) continue;
            printf("  %-12s %d x 1e6 / %.2f = %.0f/s (%.2fx)", c->cf[i].label, CK_MASTERS, pr.us,
                   pr.even, pr.even / single->rate);
            if (pr.share > 1.0 / CK_MASTERS + 0.02)
                printf(";\n  %-12s but its busiest master takes %.1f%% of the admissions and fills "
                       "its\n"
                       "  %-12s core first: 1e6 / %.2f / %.3f = %.0f/s (%.2fx)",
                       "", 100 * pr.share, "", pr.us, pr.share, pr.busiest,
                       pr.busiest / single->rate);
            printf("\n");
        }
        printf("  single redis-server alone on a core: 1e6 / %.2f = %.0f/s\n", us1,
               us1 > 0 ? 1e6 / us1 : 0);
    }
    printf("\nresult: %s\n", ok ? "ok" : "FAILED (see the notes and checks above)");
}

static json_t *config_json(const struct ck_config *cf, const struct ck_config *single)
{
    json_t *j = json_object();
    json_object_set_new(j, "id", json_string(cf->id));
    json_object_set_new(j, "label", json_string(cf->label));
    json_object_set_new(j, "cluster", json_boolean(cf->cluster));
    json_object_set_new(j, "segments", json_integer(cf->segs));
    json_object_set_new(j, "activity_id", json_integer((json_int_t)cf->aid));
    json_object_set_new(j, "ran", json_boolean(cf->ran));
    if (cf->note[0]) json_object_set_new(j, "note", json_string(cf->note));
    if (!cf->ran) return j;
    json_object_set_new(j, "masters_used", json_integer(cf->masters_used));
    json_object_set_new(j, "seconds", json_real(cf->secs));
    json_object_set_new(j, "admitted_measured", json_integer(cf->adm_window));
    json_object_set_new(j, "admitted_total", json_integer(cf->adm_total));
    json_object_set_new(j, "admissions_per_s", json_real(cf->rate));
    if (single->ran && single->rate > 0)
        json_object_set_new(j, "ratio_to_single", json_real(cf->rate / single->rate));
    json_object_set_new(j, "redis_cpu_us_per_admission",
                        json_real(per_adm_us(cf->redis_cpu_s, cf->adm_window)));
    json_object_set_new(j, "redis_cores", json_real(cf->redis_cpu_s / cf->secs));
    json_object_set_new(j, "client_cores", json_real(cf->client_cpu_s / cf->secs));
    json_object_set_new(j, "other_cores", json_real(other_cores(cf)));
    json_object_set_new(j, "machine_cores", json_real(cf->machine_cpu_s / cf->secs));
    json_t *nodes = json_array();
    for (int n = 0; n < cf->nnodes; n++) {
        json_t *e = json_object();
        json_t *segs = json_array();
        for (int s = 0; s < cf->segs && cf->cluster; s++)
            if (cf->seg_node[s] == n) json_array_append_new(segs, json_integer(s));
        json_object_set_new(e, "segments", segs);
        json_object_set_new(e, "admissions_per_s", json_real((double)cf->node_adm[n] / cf->secs));
        json_object_set_new(e, "cores", json_real(cf->node_cpu_s[n] / cf->secs));
        json_array_append_new(nodes, e);
    }
    json_object_set_new(j, "servers", nodes);
    json_object_set_new(j, "check_ok", json_boolean(cf->checked && cf->check_ok));
    json_object_set_new(j, "check", json_string(cf->check));
    return j;
}

static int write_json(const struct ck_ctx *c)
{
    char cpu[256], kernel[256];
    sk_bench_machine(cpu, sizeof cpu, kernel, sizeof kernel);
    json_t *root = json_object();
    json_object_set_new(root, "benchmark", json_string("cluster"));
    json_object_set_new(root, "command", json_string(c->command));
    json_t *m = json_object();
    json_object_set_new(m, "nproc", json_integer(sysconf(_SC_NPROCESSORS_ONLN)));
    json_object_set_new(m, "cpu", json_string(cpu));
    json_object_set_new(m, "kernel", json_string(kernel));
    json_object_set_new(m, "redis_version", json_string(c->version));
    json_object_set_new(m, "loadavg_1min_at_start", json_real(c->loadavg));
    json_object_set_new(root, "machine", m);
    json_t *cfg = json_object();
    json_object_set_new(cfg, "threads", json_integer(c->o.threads));
    json_object_set_new(cfg, "batch", json_integer(c->o.batch));
    json_object_set_new(cfg, "depth", json_integer(c->o.depth));
    json_object_set_new(cfg, "seconds", json_integer(c->o.seconds));
    json_object_set_new(cfg, "warmup_ms", json_integer(c->o.warmup_ms));
    json_object_set_new(cfg, "affine", json_boolean(c->o.affine));
    json_object_set_new(cfg, "masters", json_integer(CK_MASTERS));
    json_object_set_new(cfg, "stock", json_integer(CK_STOCK));
    json_object_set_new(root, "config", cfg);
    json_t *arr = json_array();
    for (int i = 0; i < CK_NCONFIGS; i++)
        json_array_append_new(arr, config_json(&c->cf[i], &c->cf[CK_SINGLE]));
    json_object_set_new(root, "configs", arr);
    json_t *preds = json_object();
    for (int i = CK_CL3; i < CK_NCONFIGS; i++) {
        const struct ck_predict p = predict(&c->cf[i]);
        if (!p.us) continue;
        json_t *pr = json_object();
        json_object_set_new(pr, "redis_cpu_us_per_admission", json_real(p.us));
        json_object_set_new(pr, "admissions_per_s_even", json_real(p.even));
        json_object_set_new(pr, "busiest_master_share", json_real(p.share));
        json_object_set_new(pr, "admissions_per_s_busiest_master_bound", json_real(p.busiest));
        json_object_set_new(preds, c->cf[i].id, pr);
    }
    json_object_set_new(root, "prediction_one_master_per_core", preds);
    int nok;
    json_object_set_new(root, "ok", json_boolean(all_ok(c, &nok)));
    int rc = json_dump_file(root, c->o.json, JSON_INDENT(2));
    json_decref(root);
    if (rc < 0) fprintf(stderr, "seckill: bench cluster: cannot write %s\n", c->o.json);
    return rc;
}

/* ---- main ---- */

static void setup_configs(struct ck_ctx *c)
{
    static const struct {
        const char *id, *label;
        int cluster, segs;
    } plan[CK_NCONFIGS] = {
        [CK_SINGLE] = {"single", "single redis", 0, 1},
        [CK_CL1] = {"cluster_s1", "cluster S=1", 1, 1},
        [CK_CL3] = {"cluster_s3", "cluster S=3", 1, 3},
        [CK_CL8] = {"cluster_s8", "cluster S=8", 1, 8},
    };
    for (int i = 0; i < CK_NCONFIGS; i++) {
        struct ck_config *cf = &c->cf[i];
        cf->id = plan[i].id;
        cf->label = plan[i].label;
        cf->cluster = plan[i].cluster;
        cf->segs = plan[i].segs;
        cf->nnodes = cf->cluster ? CK_MASTERS : 1;
        cf->masters_used = 1;
    }
}

/* The single redis-server's configuration. */
static int run_single(struct ck_ctx *c, uint64_t *next_id)
{
    struct ck_config *cf = &c->cf[CK_SINGLE];
    char eb[200] = "";
    sk_redis *ctl = NULL;
    int rc = sk_redis_spawn_start(&c->single, NULL);
    if (rc < 0) {
        snprintf(cf->note, sizeof cf->note, "cannot start redis-server: %.200s", c->single.errstr);
        cf->error = 1;
        return rc;
    }
    if ((rc = sk_redis_new(&ctl, c->single.url, 2000, 60000, eb, sizeof eb)) < 0 ||
        (rc = sk_redis_connect(ctl)) < 0 || (rc = sk_bench_load_scripts(ctl)) < 0 ||
        (rc = sk_bench_info_field(ctl, "server", "redis_version", c->version, sizeof c->version)) <
            0) {
        snprintf(cf->note, sizeof cf->note, "redis-server: %.200s", ctl ? ctl->errstr : eb);
        cf->error = 1;
    } else {
        cf->aid = (*next_id)++;
        cf->seg_node[0] = 0;
        sk_redis *nodes[1] = {ctl};
        rc = run_config(c, cf, ctl, nodes, c->single.url);
    }
    sk_redis_free(ctl);
    /* the port stays in the report; the server goes */
    int port = c->single.port;
    if (sk_redis_spawn_stop(&c->single) < 0)
        fprintf(stderr, "seckill: bench cluster: %s\n", c->single.errstr);
    c->single.port = port;
    return rc;
}

static int run_cluster(struct ck_ctx *c, uint64_t *next_id)
{
    const char *extra[] = {NULL};
    int rc = sk_cluster_spawn_start(&c->cl, CK_MASTERS, extra);
    if (rc < 0) {
        for (int i = CK_CL1; i < CK_NCONFIGS; i++) {
            snprintf(c->cf[i].note, sizeof c->cf[i].note, "cannot start the cluster: %.200s",
                     c->cl.errstr);
            c->cf[i].error = 1;
        }
        return rc;
    }
    for (int i = 0; i < CK_MASTERS; i++)
        c->cl_port[i] = c->cl.port[i];
    fprintf(stderr, "seckill: bench cluster: %d-master cluster up at %s\n", CK_MASTERS, c->cl.url);
    char eb[200] = "";
    sk_redis *ctl = NULL, *nodes[CK_MASTERS] = {NULL};
    if ((rc = sk_redis_new(&ctl, c->cl.url, 2000, 60000, eb, sizeof eb)) < 0 ||
        (rc = sk_redis_connect(ctl)) < 0 || (rc = sk_bench_load_scripts(ctl)) < 0) {
        snprintf(c->cf[CK_CL1].note, sizeof c->cf[CK_CL1].note, "cluster: %.200s",
                 ctl ? ctl->errstr : eb);
        c->cf[CK_CL1].error = 1;
        goto done;
    }
    for (int i = 0; i < CK_MASTERS && rc == 0; i++) {
        char url[64];
        sk_cluster_spawn_node_url(&c->cl, i, url, sizeof url);
        if ((rc = sk_redis_new(&nodes[i], url, 2000, 10000, eb, sizeof eb)) == 0)
            rc = sk_redis_connect(nodes[i]);
        if (rc < 0) {
            snprintf(c->cf[CK_CL1].note, sizeof c->cf[CK_CL1].note, "master %d: %.200s", i,
                     nodes[i] ? nodes[i]->errstr : eb);
            c->cf[CK_CL1].error = 1;
            goto done;
        }
    }
    for (int i = CK_CL1; i < CK_NCONFIGS && !sk_bench_interrupted; i++) {
        struct ck_config *cf = &c->cf[i];
        if ((rc = place(ctl, &c->cl, cf, next_id)) < 0) {
            cf->error = 1;
            break;
        }
        fprintf(stderr, "seckill: bench cluster: %s (activity %" PRIu64 ")...\n", cf->label,
                cf->aid);
        if ((rc = run_config(c, cf, ctl, nodes, c->cl.url)) < 0) break;
    }
done:
    for (int i = 0; i < CK_MASTERS; i++)
        sk_redis_free(nodes[i]);
    sk_redis_free(ctl);
    if (sk_cluster_spawn_stop(&c->cl) < 0)
        fprintf(stderr, "seckill: bench cluster: %s\n", c->cl.errstr);
    return rc;
}

/* Entry point (argv[0] is "cluster"). */
int sk_bench_cluster(int argc, char **argv)
{
    struct ck_ctx *c = calloc(1, sizeof *c);
    if (!c) return SK_EXIT_FAIL;
    c->o = (struct ck_opts){.threads = 4, .batch = 64, .depth = 4, .seconds = 3, .warmup_ms = 500};
    int help = 0;
    int urc = parse_opts(argc - 1, argv + 1, &c->o, &help);
    if (urc || help) {
        free(c);
        return urc ? urc : usage(stdout);
    }
    own_command(c->command, sizeof c->command);
    double la[1] = {0};
    if (getloadavg(la, 1) == 1) c->loadavg = la[0];
    snprintf(c->version, sizeof c->version, "unknown");
    setup_configs(c);

    sk_bench_catch_signals(NULL);

    uint64_t next_id = CK_AID_BASE + (uint64_t)(sk_wall_ms() % 1000000) * 1000;
    fprintf(stderr, "seckill: bench cluster: single redis-server (%" PRId64 " s)...\n",
            c->o.seconds);
    if (run_single(c, &next_id) == 0 && !sk_bench_interrupted) run_cluster(c, &next_id);
    if (sk_bench_interrupted) fprintf(stderr, "seckill: bench cluster: interrupted\n");
    print_report(c);
    int nok;
    int code = all_ok(c, &nok) ? SK_EXIT_OK : SK_EXIT_FAIL;
    if (c->o.json && write_json(c) < 0) code = SK_EXIT_FAIL;
    free(c);
    return code;
}
