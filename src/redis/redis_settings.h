/* redis_settings.h - what a Redis server says about the settings a sale
 * depends on (INFO's memory, persistence, replication and server fields;
 * CONFIG GET where the server allows it), read into one struct without
 * I/O, and the judge that says which of them are unsafe for a sale, and
 * why, in one sentence that names the fix.
 *
 * Read by every client on each (re)connection and again every
 * SK_RSET_REREAD_MS off the purchase path (a policy changed with CONFIG SET
 * at run time), by preheat, and by `seckill serve --check`. The rules
 * (docs/failover.md, "Redis settings a sale needs"):
 *   - maxmemory-policy must be noeviction: allkeys-* evicts any key (the
 *     order stream, the stock, the ledger), volatile-* evicts the keys that
 *     carry a TTL (the rate limiters, a vanished key set's fence); either
 *     loses what a buyer was promised. Unsafe: the activity is refused.
 *   - near maxmemory (SK_RSET_FULL_WARN_PCT), and a stock whose orders
 *     cannot fit in what is left (SK_RSET_ORDER_BYTES each): warned.
 *   - the last background save or AOF write failed (MISCONF: every write
 *     refused), no AOF, appendfsync other than always: said, with what a
 *     restart would cost. */
#ifndef SK_REDIS_SETTINGS_H
#define SK_REDIS_SETTINGS_H
#include <stddef.h>
#include <stdint.h>

#include <hiredis.h>

/* How often a client reads the settings again while connected. */
#define SK_RSET_REREAD_MS 2000

/* Bytes of Redis memory one admitted order holds for as long as the
 * activity lives (ledger entry, buyer count, Idempotency-Key record), and
 * its stream entry until the worker persisted and trimmed it: measured
 * with MEMORY USAGE on a real sale (docs/failover.md). The fit rule counts
 * both: a stream the worker cannot drain (the database down) holds every
 * order. */
#define SK_RSET_KEEP_BYTES 160
#define SK_RSET_STREAM_BYTES 120
#define SK_RSET_ORDER_BYTES (SK_RSET_KEEP_BYTES + SK_RSET_STREAM_BYTES)

/* Used memory at or above this share of maxmemory is warned about. */
#define SK_RSET_FULL_WARN_PCT 90

/* What one server said; -1 (numbers) or "" (text): not said. */
struct sk_rsettings {
    int64_t used_memory;   /* used_memory, bytes */
    int64_t maxmemory;     /* maxmemory, bytes; 0: no limit */
    int64_t not_counted;   /* mem_not_counted_for_evict (0 when not said) */
    int64_t system_memory; /* total_system_memory, bytes */
    char policy[24];       /* maxmemory-policy */
    char role[12];         /* "master", "slave" */
    char version[24];      /* redis_version */
    int aof_enabled;       /* aof_enabled: 1, 0 */
    int aof_write_ok;      /* aof_last_write_status: 1 ok, 0 err */
    int bgsave_ok;         /* rdb_last_bgsave_status: 1 ok, 0 err */
    char appendfsync[12];  /* CONFIG GET appendfsync: "always", "everysec", "no" */
    int nfields;           /* fields read so far, over every call */
};

/* Everything unknown. */
void sk_rsettings_init(struct sk_rsettings *s);

/* The text of an INFO reply (any sections, "key:value" lines, "#" section
 * heads; [text, text+len), no terminator needed) into s: the fields above
 * that it holds replace what s had. Returns 0, or SK_EPROTO when a field s
 * reads holds a value it cannot be (that field stays as it was; the rest
 * are read). */
int sk_rsettings_info(struct sk_rsettings *s, const char *text, size_t len);

/* One CONFIG GET name-value pair (maxmemory, maxmemory-policy,
 * appendonly, appendfsync; other names are ignored). Returns 0 or
 * SK_EPROTO as sk_rsettings_info. */
int sk_rsettings_config(struct sk_rsettings *s, const char *name, size_t nlen, const char *val,
                        size_t vlen);

/* A CONFIG GET reply: an array of name, value pairs. An error reply (CONFIG disabled or renamed, as
 * on managed offerings) changes nothing and returns SK_ENOTFOUND; another shape SK_EPROTO. */
int sk_rsettings_config_reply(struct sk_rsettings *s, const redisReply *rep);

/* 1 when policy lets Redis evict keys the sale needs (anything but
 * noeviction), 0 for noeviction, -1 when not said. */
int sk_rsettings_policy_evicts(const char *policy);

/* Bytes left before the server refuses writes (maxmemory, less what it
 * does not count for eviction) or, without a maxmemory, before the host's
 * memory runs out; -1 when it did not say. */
int64_t sk_rsettings_free_bytes(const struct sk_rsettings *s);

/* Orders (SK_RSET_ORDER_BYTES each) that still fit; -1 when unknown. */
int64_t sk_rsettings_orders_fit(const struct sk_rsettings *s);

/* Used memory in percent of maxmemory (0..), -1 without a maxmemory. */
int sk_rsettings_used_pct(const struct sk_rsettings *s);

/* The judge's levels, worst last. */
enum {
    SK_RSET_OK = 0,
    SK_RSET_NOTE = 1,   /* what a restart or a crash would cost: for --check */
    SK_RSET_WARN = 2,   /* the sale goes on; the operator should act */
    SK_RSET_UNSAFE = 3, /* the sale is refused until the setting is safe */
};

#define SK_RSET_FINDINGS_MAX 6

struct sk_rset_finding {
    int level;
    const char *setting; /* static: "maxmemory-policy", "maxmemory", ... */
    char why[320];       /* one sentence with the fix; no secret */
};

struct sk_rset_verdict {
    int level; /* the worst finding's, SK_RSET_OK when none */
    int n;
    struct sk_rset_finding f[SK_RSET_FINDINGS_MAX];
};

/* Judges what s says. orders: how many orders the activities this server
 * holds may still admit (their stock; 0 leaves the fit unjudged). Fills v
 * (worst first) and returns v->level. */
int sk_rsettings_judge(const struct sk_rsettings *s, int64_t orders, struct sk_rset_verdict *v);

/* The fit rule alone: 1 when orders (SK_RSET_ORDER_BYTES each) fit in
 * what s has free, or when s does not say; else 0 with the warning in *f
 * (the sentence says how much maxmemory would hold them). */
int sk_rsettings_fits(const struct sk_rsettings *s, int64_t orders, struct sk_rset_finding *f);

/* The first finding of v at level or worse, or NULL. */
const struct sk_rset_finding *sk_rsettings_worst(const struct sk_rset_verdict *v, int level);

#endif
