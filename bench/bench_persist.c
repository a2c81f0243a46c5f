/* bench_persist.c - `seckill bench persist`: orders persisted per second
 * from a pre-filled Redis stream into SQLite by the order worker.
 *
 * A private redis-server (redis_spawn.h) and a fresh SQLite file per phase
 * (WAL, synchronous=FULL as shipped, in --dir). Each worker phase XADDs
 * --rows entries (the fields the admission script writes) to a fresh
 * activity's stream, then times one in-process worker run with once=1 from
 * start to drained: XREADGROUP, parse, one transaction per fetch, XACK and
 * trimming all included. The store-only phases time sk_store_orders_persist
 * alone on orders built in memory (the database's share). Per-row phases
 * (batch 1: one transaction per order) use --per-row-rows, fewer, because
 * each commit waits for an fsync. After every worker phase the result is
 * checked: one row per entry, DB stock == initial - rows, stream empty. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <sqlite3.h>

#include "activity.h"
#include "cli.h"
#include "clock.h"
#include "error.h"
#include "keys.h"
#include "log.h"
#include "order_worker.h"
#include "redis_conn.h"
#include "redis_spawn.h"
#include "store.h"

int sk_bench_persist(int argc, char **argv);

#define TARGET_SQLITE_PER_S 10000.0 /* issue 4, 2-core machine */

struct opts {
    int64_t rows, batch, per_row_rows;
    const char *dir;
};

struct ctx {
    struct opts o;
    struct sk_redis_spawn sp;
    sk_redis *r;
    char dir[512];
    int phase;
};

struct result {
    const char *name;
    int64_t batch, rows;
    double secs;
};

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("seckill: bench persist: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return SK_EXIT_FAIL;
}

/* A fresh database file for one phase, with one activity of `stock`. */
static int fresh_store(struct ctx *c, int64_t stock, char *spec, size_t cap, uint64_t *aid,
                       sk_store **st)
{
    c->phase++;
    snprintf(spec, cap, "sqlite:%s/phase%d.db", c->dir, c->phase);
    char err[512];
    if (sk_store_open(st, spec, err, sizeof err)) return fail("%s", err);
    struct sk_activity a;
    sk_activity_init(&a);
    a.id = (uint64_t)c->phase;
    snprintf(a.name, sizeof a.name, "bench persist %d", c->phase);
    a.stock = stock;
    a.per_user_limit = 1;
    a.start_ms = 0;
    a.end_ms = SK_TIME_MAX_MS;
    a.created_ms = sk_wall_ms();
    sk_activity_apply_defaults(&a);
    if (sk_store_activity_insert(*st, &a)) return fail("%s", sk_store_errstr(*st));
    *aid = a.id;
    return 0;
}

/* XADDs n order entries (aid, uid, qty 1), pipelined 1,000 deep. */
static int fill(struct ctx *c, uint64_t aid, int64_t n)
{
    struct sk_keys k;
    sk_keys_for(&k, aid);
    char aids[24];
    snprintf(aids, sizeof aids, "%" PRIu64, aid);
    redisReply *rep;
    if (sk_redis_cmd(c->r, &rep, "DEL %s %s", k.orders, k.dlq)) return fail("%s", c->r->errstr);
    freeReplyObject(rep);
    for (int64_t done = 0; done < n;) {
        int64_t m = n - done < 1000 ? n - done : 1000;
        for (int64_t i = 0; i < m; i++) {
            char uid[24];
            snprintf(uid, sizeof uid, "%" PRId64, done + i + 1);
            const char *a[] = {"XADD", k.orders, "*", "aid", aids, "uid", uid, "qty", "1"};
            if (sk_redis_append(c->r, 9, a, NULL)) return fail("%s", c->r->errstr);
        }
        for (int64_t i = 0; i < m; i++) {
            if (sk_redis_read(c->r, &rep)) return fail("%s", c->r->errstr);
            int ok = rep->type == REDIS_REPLY_STRING;
            freeReplyObject(rep);
            if (!ok) return fail("XADD refused");
        }
        done += m;
    }
    return 0;
}

static int phase_worker(struct ctx *c, int64_t rows, int64_t batch, struct result *res)
{
    char spec[600];
    uint64_t aid;
    sk_store *st;
    if (fresh_store(c, rows, spec, sizeof spec, &aid, &st)) return SK_EXIT_FAIL;
    int rc = fill(c, aid, rows);
    if (rc) {
        sk_store_close(st);
        return rc;
    }
    struct sk_worker_opts o;
    sk_worker_opts_init(&o);
    o.redis_url = c->sp.url;
    o.db_spec = spec;
    o.consumer = "bench";
    o.batch = (int)batch;
    o.once = 1;
    sk_worker *w;
    char err[512];
    if (sk_worker_new(&w, &o, err, sizeof err)) {
        sk_store_close(st);
        return fail("%s", err);
    }
    int64_t t0 = sk_mono_us();
    rc = sk_worker_run(w);
    res->secs = (double)(sk_mono_us() - t0) / 1e6;
    struct sk_worker_stats s;
    sk_worker_stats(w, &s);
    if (rc) fail("worker: %s", sk_worker_errstr(w));
    sk_worker_free(w);
    /* Check: every entry is one row, the DB stock went to 0, nothing left. */
    struct sk_order_counts cnt;
    struct sk_activity a;
    struct sk_keys k;
    sk_keys_for(&k, aid);
    redisReply *rep = NULL;
    if (!rc && (sk_store_orders_count(st, aid, &cnt) || sk_store_activity_get(st, aid, &a)))
        rc = fail("%s", sk_store_errstr(st));
    if (!rc && sk_redis_cmd(c->r, &rep, "XLEN %s", k.orders)) rc = fail("%s", c->r->errstr);
    if (!rc &&
        (cnt.orders[SK_ORDER_CREATED] != rows || a.stock_db != 0 || (int64_t)s.persisted != rows ||
         rep->type != REDIS_REPLY_INTEGER || rep->integer != 0))
        rc = fail("check failed: %" PRId64 " rows for %" PRId64 " entries, DB stock %" PRId64
                  ", stream length %lld",
                  cnt.orders[SK_ORDER_CREATED], rows, a.stock_db,
                  rep && rep->type == REDIS_REPLY_INTEGER ? rep->integer : -1);
    freeReplyObject(rep);
    sk_store_close(st);
    res->name = batch == 1 ? "worker, per row" : "worker, batched";
    res->batch = batch;
    res->rows = rows;
    return rc;
}

static int phase_store(struct ctx *c, int64_t rows, int64_t batch, struct result *res)
{
    char spec[600];
    uint64_t aid;
    sk_store *st;
    if (fresh_store(c, rows, spec, sizeof spec, &aid, &st)) return SK_EXIT_FAIL;
    struct sk_order *o = calloc((size_t)rows, sizeof *o);
    if (!o) {
        sk_store_close(st);
        return fail("out of memory");
    }
    int64_t base = sk_wall_ms();
    for (int64_t i = 0; i < rows; i++) {
        snprintf(o[i].stream_id, sizeof o[i].stream_id, "%" PRId64 "-%" PRId64, base, i);
        snprintf(o[i].order_id, sizeof o[i].order_id, "%" PRIu64 "-%s", aid, o[i].stream_id);
        o[i].activity_id = aid;
        o[i].user_id = (uint64_t)i + 1;
        o[i].quantity = 1;
        o[i].created_ms = base;
    }
    int rc = 0;
    int64_t t0 = sk_mono_us();
    for (int64_t i = 0; i < rows && !rc; i += batch) {
        size_t m = (size_t)(rows - i < batch ? rows - i : batch);
        if (sk_store_orders_persist(st, o + i, m, NULL)) rc = fail("%s", sk_store_errstr(st));
    }
    res->secs = (double)(sk_mono_us() - t0) / 1e6;
    free(o);
    sk_store_close(st);
    res->name = batch == 1 ? "store only, per row" : "store only, batched";
    res->batch = batch;
    res->rows = rows;
    return rc;
}

static const char *fs_name(const char *dir)
{
    struct statfs s;
    if (statfs(dir, &s) != 0) return "unknown";
    switch ((unsigned long)s.f_type) {
    case 0xEF53: return "ext4";
    case 0x01021994: return "tmpfs";
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    case 0x794C7630: return "overlayfs";
    default: return "other";
    }
}

static void cpu_model(char *out, size_t cap)
{
    snprintf(out, cap, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char *c = strchr(line, ':');
        if (!strncmp(line, "model name", 10) && c) {
            c += 1 + strspn(c + 1, " \t");
            c[strcspn(c, "\n")] = 0;
            snprintf(out, cap, "%s", c);
            break;
        }
    }
    fclose(f);
}

static int usage(FILE *f)
{
    fprintf(f,
            "usage: seckill bench persist [--rows N] [--batch B] [--per-row-rows M] [--dir DIR]\n"
            "  Orders persisted per second from a pre-filled stream into SQLite.\n"
            "  --rows N          entries in the stream for the batched phases (default 100000)\n"
            "  --batch B         worker batch = entries per transaction (default 500)\n"
            "  --per-row-rows M  entries for the batch-1 phases (default 5000)\n"
            "  --dir DIR         where the database files go (default $TMPDIR or /tmp)\n");
    return f == stdout ? SK_EXIT_OK : SK_EXIT_USAGE;
}

int sk_bench_persist(int argc, char **argv)
{
    struct ctx c;
    memset(&c, 0, sizeof c);
    c.o.rows = 100000;
    c.o.batch = 500;
    c.o.per_row_rows = 5000;
    const char *tmp = getenv("TMPDIR");
    c.o.dir = tmp && *tmp ? tmp : "/tmp";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(stdout);
        if (i + 1 >= argc)
            return sk_cli_usage_error("bench persist: unknown option or missing value: %s", a);
        const char *v = argv[++i];
        int64_t *t = !strcmp(a, "--rows")           ? &c.o.rows
                     : !strcmp(a, "--batch")        ? &c.o.batch
                     : !strcmp(a, "--per-row-rows") ? &c.o.per_row_rows
                                                    : NULL;
        if (t) {
            if (sk_cli_parse_i64(v, 1, t == &c.o.batch ? 10000 : 100000000, t))
                return sk_cli_usage_error("bench persist: %s: bad number '%s'", a, v);
        } else if (!strcmp(a, "--dir")) {
            c.o.dir = v;
        } else {
            return sk_cli_usage_error("bench persist: unknown option %s", a);
        }
    }
    snprintf(c.dir, sizeof c.dir, "%s/seckill-bench-persist-XXXXXX", c.o.dir);
    if (!mkdtemp(c.dir)) return fail("mkdtemp %s: %s", c.dir, strerror(errno));
    sk_log_set_level(SK_LOG_WARN); /* the worker's per-activity info lines */
    int rc = 0;
    if (sk_redis_spawn_start(&c.sp, NULL) < 0) {
        rc = fail("%s", c.sp.errstr);
        goto out;
    }
    char err[256];
    if (sk_redis_new(&c.r, c.sp.url, 1000, 10000, err, sizeof err)) {
        rc = fail("%s", err);
        goto out;
    }
    char redis_ver[64] = "?", cpu[256];
    sk_redis_info_field(c.r, "server", "redis_version", redis_ver, sizeof redis_ver);
    cpu_model(cpu, sizeof cpu);
    struct utsname un;
    uname(&un);
    printf("seckill bench persist: redis-server %s (private, no persistence), SQLite %s "
           "(WAL, synchronous=FULL) on %s (%s)\n",
           redis_ver, sqlite3_libversion(), c.o.dir, fs_name(c.dir));
    printf("  machine: %ld cpus, %s, %s %s\n\n", sysconf(_SC_NPROCESSORS_ONLN), cpu, un.sysname,
           un.release);
    printf("  %-22s %6s %9s %9s %12s\n", "phase", "batch", "rows", "seconds", "orders/s");
    fflush(stdout);
    struct result res[4];
    int (*fn[4])(struct ctx *, int64_t, int64_t, struct result *) = {phase_worker, phase_worker,
                                                                     phase_store, phase_store};
    int64_t rows[4] = {c.o.rows, c.o.per_row_rows, c.o.rows, c.o.per_row_rows};
    int64_t batch[4] = {c.o.batch, 1, c.o.batch, 1};
    for (int i = 0; i < 4 && !rc; i++) {
        rc = fn[i](&c, rows[i], batch[i], &res[i]);
        if (rc) break;
        printf("  %-22s %6" PRId64 " %9" PRId64 " %9.3f %12.0f\n", res[i].name, res[i].batch,
               res[i].rows, res[i].secs, (double)res[i].rows / res[i].secs);
        fflush(stdout);
    }
    if (!rc) {
        double batched = (double)res[0].rows / res[0].secs;
        printf("\n  worker batched: %.0f orders/s, target >= %.0f/s: %s; "
               "batched / per-row = %.1fx\n",
               batched, TARGET_SQLITE_PER_S, batched >= TARGET_SQLITE_PER_S ? "met" : "NOT met",
               batched / ((double)res[1].rows / res[1].secs));
    }
out:
    sk_redis_free(c.r);
    if (c.sp.pid && sk_redis_spawn_stop(&c.sp) < 0) fprintf(stderr, "seckill: %s\n", c.sp.errstr);
    for (int i = 1; i <= c.phase; i++) {
        static const char *const sfx[] = {"", "-wal", "-shm"};
        for (int j = 0; j < 3; j++) {
            char p[700];
            snprintf(p, sizeof p, "%s/phase%d.db%s", c.dir, i, sfx[j]);
            unlink(p);
        }
    }
    rmdir(c.dir);
    return rc;
}
