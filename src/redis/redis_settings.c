/* redis_settings.c - a Redis server's settings out of INFO and CONFIG GET,
 * and the judge of them (redis_settings.h). No I/O. */
#include "redis/redis_settings.h"

#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/num.h"

void sk_rsettings_init(struct sk_rsettings *s)
{
    memset(s, 0, sizeof *s);
    s->used_memory = s->maxmemory = s->system_memory = -1;
    s->aof_enabled = s->aof_write_ok = s->bgsave_ok = -1;
}

static int eq(const char *a, size_t alen, const char *b)
{
    return alen == strlen(b) && !memcmp(a, b, alen);
}

/* A bounded word of letters, digits, '-', '.', '_' into dst (cap bytes). */
static int word(char *dst, size_t cap, const char *v, size_t n)
{
    if (n == 0 || n >= cap) return SK_EPROTO;
    for (size_t i = 0; i < n; i++) {
        char c = v[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '.' || c == '_'))
            return SK_EPROTO;
    }
    memcpy(dst, v, n);
    dst[n] = 0;
    return 0;
}

static int bytes(int64_t *dst, const char *v, size_t n)
{
    int64_t x;
    if (sk_num_i64_range(v, n, 0, INT64_MAX, &x) < 0) return SK_EPROTO;
    *dst = x;
    return 0;
}

static int flag(int *dst, const char *v, size_t n, const char *yes, const char *no)
{
    if (eq(v, n, yes))
        *dst = 1;
    else if (eq(v, n, no))
        *dst = 0;
    else
        return SK_EPROTO;
    return 0;
}

/* One field: 1 read, 0 not one of ours, SK_EPROTO a bad value. */
static int field(struct sk_rsettings *s, const char *k, size_t kn, const char *v, size_t vn)
{
    int rc;
    if (eq(k, kn, "used_memory"))
        rc = bytes(&s->used_memory, v, vn);
    else if (eq(k, kn, "maxmemory"))
        rc = bytes(&s->maxmemory, v, vn);
    else if (eq(k, kn, "mem_not_counted_for_evict"))
        rc = bytes(&s->not_counted, v, vn);
    else if (eq(k, kn, "total_system_memory"))
        rc = bytes(&s->system_memory, v, vn);
    else if (eq(k, kn, "maxmemory_policy") || eq(k, kn, "maxmemory-policy"))
        rc = word(s->policy, sizeof s->policy, v, vn);
    else if (eq(k, kn, "role"))
        rc = word(s->role, sizeof s->role, v, vn);
    else if (eq(k, kn, "redis_version"))
        rc = word(s->version, sizeof s->version, v, vn);
    else if (eq(k, kn, "aof_enabled"))
        rc = flag(&s->aof_enabled, v, vn, "1", "0");
    else if (eq(k, kn, "appendonly"))
        rc = flag(&s->aof_enabled, v, vn, "yes", "no");
    else if (eq(k, kn, "aof_last_write_status"))
        rc = flag(&s->aof_write_ok, v, vn, "ok", "err");
    else if (eq(k, kn, "rdb_last_bgsave_status"))
        rc = flag(&s->bgsave_ok, v, vn, "ok", "err");
    else if (eq(k, kn, "appendfsync"))
        rc = word(s->appendfsync, sizeof s->appendfsync, v, vn);
    else
        return 0;
    if (rc < 0) return rc;
    s->nfields++;
    return 1;
}

int sk_rsettings_info(struct sk_rsettings *s, const char *text, size_t len)
{
    int rc = 0;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *eol = nl ? nl : end;
        const char *le = eol;
        if (le > p && le[-1] == '\r') le--;
        if (le > p && *p != '#') {
            const char *colon = memchr(p, ':', (size_t)(le - p));
            if (colon && field(s, p, (size_t)(colon - p), colon + 1, (size_t)(le - colon - 1)) < 0)
                rc = SK_EPROTO;
        }
        p = nl ? nl + 1 : end;
    }
    return rc;
}

int sk_rsettings_config(struct sk_rsettings *s, const char *name, size_t nlen, const char *val,
                        size_t vlen)
{
    /* CONFIG's names and INFO's differ for the same setting: read only
     * those of CONFIG here (maxmemory is spelt alike) */
    if (!eq(name, nlen, "maxmemory") && !eq(name, nlen, "maxmemory-policy") &&
        !eq(name, nlen, "appendonly") && !eq(name, nlen, "appendfsync"))
        return 0;
    return field(s, name, nlen, val, vlen) < 0 ? SK_EPROTO : 0;
}

static int is_text(const redisReply *r)
{
    return r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS);
}

int sk_rsettings_config_reply(struct sk_rsettings *s, const redisReply *rep)
{
    if (!rep) return SK_EPROTO;
    if (rep->type == REDIS_REPLY_ERROR) return SK_ENOTFOUND;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements % 2) return SK_EPROTO;
    int rc = 0;
    for (size_t i = 0; i + 1 < rep->elements; i += 2) {
        const redisReply *k = rep->element[i], *v = rep->element[i + 1];
        if (!is_text(k) || !is_text(v)) {
            rc = SK_EPROTO;
            continue;
        }
        if (sk_rsettings_config(s, k->str, k->len, v->str, v->len) < 0) rc = SK_EPROTO;
    }
    return rc;
}

int sk_rsettings_policy_evicts(const char *policy)
{
    if (!policy || !policy[0]) return -1; /* value: not said */
    return strcmp(policy, "noeviction") != 0;
}

int64_t sk_rsettings_free_bytes(const struct sk_rsettings *s)
{
    if (s->used_memory < 0) return -1; /* value: not said */
    int64_t cap;
    if (s->maxmemory > 0) {
        /* eviction (or, with noeviction, the OOM refusal) compares
         * used_memory less what it does not count with maxmemory */
        int64_t counted = s->used_memory - s->not_counted;
        if (counted < 0) counted = 0;
        return counted >= s->maxmemory ? 0 : s->maxmemory - counted;
    }
    if (s->maxmemory < 0 || s->system_memory <= 0) return -1; /* value: not said */
    cap = s->system_memory;
    return s->used_memory >= cap ? 0 : cap - s->used_memory;
}

int64_t sk_rsettings_orders_fit(const struct sk_rsettings *s)
{
    int64_t f = sk_rsettings_free_bytes(s);
    return f < 0 ? -1 : f / SK_RSET_ORDER_BYTES;
}

int sk_rsettings_used_pct(const struct sk_rsettings *s)
{
    if (s->maxmemory <= 0 || s->used_memory < 0) return -1; /* value: no limit, or not said */
    int64_t counted = s->used_memory - s->not_counted;
    if (counted < 0) counted = 0;
    /* no overflow: counted and maxmemory are bytes of one host */
    double pct = 100.0 * (double)counted / (double)s->maxmemory;
    return pct > 1e6 ? 1000000 : (int)pct;
}

/* Sizes in words: "512.0 MiB". */
static void human(char *out, size_t cap, int64_t b)
{
    static const char *unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(out, cap, "%lld bytes", (long long)b);
    else
        snprintf(out, cap, "%.1f %s", v, unit[u]);
}

static struct sk_rset_finding *add(struct sk_rset_verdict *v, int level, const char *setting)
{
    if (v->n >= SK_RSET_FINDINGS_MAX) return NULL;
    struct sk_rset_finding *f = &v->f[v->n++];
    f->level = level;
    f->setting = setting;
    f->why[0] = 0;
    if (level > v->level) v->level = level;
    return f;
}

static void judge_policy(const struct sk_rsettings *s, struct sk_rset_verdict *v)
{
    struct sk_rset_finding *f;
    int ev = sk_rsettings_policy_evicts(s->policy);
    if (ev < 0) {
        if ((f = add(v, SK_RSET_WARN, "maxmemory-policy")))
            snprintf(f->why, sizeof f->why,
                     "Redis did not say its maxmemory-policy (INFO and CONFIG refused), so "
                     "eviction cannot be ruled out: make sure it is noeviction");
        return;
    }
    if (!ev || !(f = add(v, SK_RSET_UNSAFE, "maxmemory-policy"))) return;
    if (!strncmp(s->policy, "volatile-", 9))
        snprintf(f->why, sizeof f->why,
                 "maxmemory-policy %s lets Redis evict the sale's keys that carry a TTL (the "
                 "rate limiters, a vanished key set's fence) when it is full: set it to "
                 "noeviction (CONFIG SET maxmemory-policy noeviction, and in redis.conf)",
                 s->policy);
    else
        snprintf(f->why, sizeof f->why,
                 "maxmemory-policy %s lets Redis evict any key of the sale (its orders, stock "
                 "and ledger) when it is full, losing acknowledged orders: set it to "
                 "noeviction (CONFIG SET maxmemory-policy noeviction, and in redis.conf)",
                 s->policy);
}

static void judge_memory(const struct sk_rsettings *s, int64_t orders, struct sk_rset_verdict *v)
{
    struct sk_rset_finding *f;
    char a[32], b[32];
    int pct = sk_rsettings_used_pct(s);
    if (pct >= SK_RSET_FULL_WARN_PCT && (f = add(v, SK_RSET_WARN, "maxmemory"))) {
        human(a, sizeof a, s->used_memory);
        human(b, sizeof b, s->maxmemory);
        snprintf(f->why, sizeof f->why,
                 "Redis is %d%% full (%s of maxmemory %s): at 100%% every purchase is refused "
                 "503 redis_full until the worker has persisted and trimmed orders; raise "
                 "maxmemory or free memory",
                 pct, a, b);
    }
    struct sk_rset_finding fit;
    if (orders > 0 && !sk_rsettings_fits(s, orders, &fit) && (f = add(v, fit.level, fit.setting)))
        *f = fit;
}

int sk_rsettings_fits(const struct sk_rsettings *s, int64_t orders, struct sk_rset_finding *f)
{
    int64_t fit = sk_rsettings_orders_fit(s);
    if (orders <= 0 || fit < 0 || orders <= fit) return 1;
    char a[32], b[32], c[32];
    int64_t want =
        orders > INT64_MAX / SK_RSET_ORDER_BYTES ? INT64_MAX : orders * SK_RSET_ORDER_BYTES;
    int64_t base = s->used_memory - s->not_counted;
    if (base < 0) base = 0;
    human(a, sizeof a, want);
    human(b, sizeof b, sk_rsettings_free_bytes(s));
    human(c, sizeof c, want > INT64_MAX - base ? INT64_MAX : base + want);
    f->level = SK_RSET_WARN;
    f->setting = s->maxmemory > 0 ? "maxmemory" : "memory";
    snprintf(f->why, sizeof f->why,
             "a stock of %lld orders needs up to %s of Redis memory (%d bytes an order until "
             "the worker persists it) and %s is free: raise maxmemory to at least %s",
             (long long)orders, a, SK_RSET_ORDER_BYTES, b, c);
    return 0;
}

static void judge_persistence(const struct sk_rsettings *s, struct sk_rset_verdict *v)
{
    struct sk_rset_finding *f;
    if ((s->bgsave_ok == 0 || s->aof_write_ok == 0) &&
        (f = add(v, SK_RSET_WARN, s->aof_write_ok == 0 ? "appendonly" : "save"))) {
        snprintf(f->why, sizeof f->why,
                 "Redis's last %s failed: while it does, Redis refuses every write (MISCONF) "
                 "and purchases get 503; free the disk of its dir and check its log",
                 s->aof_write_ok == 0 ? "AOF write" : "background save");
    }
    if (s->aof_enabled == 0 && (f = add(v, SK_RSET_NOTE, "appendonly"))) {
        snprintf(f->why, sizeof f->why,
                 "appendonly is off: a restart of Redis loses every admission since its last "
                 "snapshot, which the rollback guard puts back only from the database; set "
                 "appendonly yes with appendfsync always to lose none");
    } else if (s->aof_enabled == 1 && s->appendfsync[0] && strcmp(s->appendfsync, "always") &&
               (f = add(v, SK_RSET_NOTE, "appendfsync"))) {
        snprintf(f->why, sizeof f->why,
                 "appendfsync %s: a crash of the Redis host loses up to %s of admissions that "
                 "the worker had not persisted yet; set appendfsync always to lose none",
                 s->appendfsync, strcmp(s->appendfsync, "everysec") ? "30 s" : "a second");
    }
}

int sk_rsettings_judge(const struct sk_rsettings *s, int64_t orders, struct sk_rset_verdict *v)
{
    memset(v, 0, sizeof *v);
    judge_policy(s, v);
    judge_memory(s, orders, v);
    judge_persistence(s, v);
    /* worst first (a stable insertion sort of at most a handful) */
    for (int i = 1; i < v->n; i++)
        for (int j = i; j > 0 && v->f[j].level > v->f[j - 1].level; j--) {
            struct sk_rset_finding t = v->f[j];
            v->f[j] = v->f[j - 1];
            v->f[j - 1] = t;
        }
    return v->level;
}

const struct sk_rset_finding *sk_rsettings_worst(const struct sk_rset_verdict *v, int level)
{
    return v->n > 0 && v->f[0].level >= level ? &v->f[0] : NULL;
}
