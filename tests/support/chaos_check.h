/* chaos_check.h - the verdict on a sale that went through faults: what the
 * buyers were answered (the ledger: every attempt, with its
 * Idempotency-Key) against what the database and Redis hold once the
 * faults healed and the order worker drained, read directly.
 *
 * Independent of how the faults were made (signals in test_chaos.c,
 * network partitions elsewhere): its input is the ledger, the activities,
 * and a store and a Redis handle. The promises it checks (SPEC section 7):
 *   - every 200 is an order in the database, the same user, activity and
 *     quantity, not cancelled (missing / mismatch: the database holds
 *     another order under that id, e.g. an id handed out twice by two
 *     masters; a sale judged here is shorter than its payment timeout and
 *     nobody cancels, so a cancelled 200 is one a recovery refused);
 *   - none twice: an order id answered 200 to one Idempotency-Key only, a
 *     key answered with one order id only, and no user holds more orders
 *     not cancelled of an activity than the keys they used there (a key
 *     that bought twice; of a key's two orders from the two sides of a
 *     split brain, a recovery cancels the one never answered 200); an
 *     order no 200 announced belongs to a user who had an
 *     attempt without a definite answer (503, or none), else a phantom;
 *   - no oversell (units held <= stock), no user over the limit, in the
 *     database; Redis remaining + held (+ in transit) == initial, Redis
 *     holds what the database holds, nothing fenced;
 *   - the sale resumed: an activity with stock left had a 200 after the
 *     last fault healed;
 *   - `seckill reconcile --stale-after` finds no drift;
 *   - nothing sold outside the window on Redis's clock: while a master's
 *     clock was jumped out of every activity's window (a clock jump the
 *     caller lists), no 200 came from an admission there (its order id
 *     carries that master's branch);
 *   - every answer is one the HTTP contract allows (403 `not_started` /
 *     `ended` too when the caller jumped a clock).
 * It also measures the longest time without a 200 per activity and per
 * serve process (reported, not judged). */
#ifndef SK_TEST_CHAOS_CHECK_H
#define SK_TEST_CHAOS_CHECK_H
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/stock.h"
#include "redis/redis_conn.h"
#include "store/store.h"

#define CHAOS_MAX_SERVES 8
#define CHAOS_MAX_ACTS 16

/* One attempt of a buyer, as answered. */
struct chaos_answer {
    uint64_t aid;
    uint64_t key; /* the Idempotency-Key (rendered "c<hex>"); one per intended purchase */
    uint32_t user;
    int16_t qty;     /* asked */
    int16_t status;  /* HTTP status; 0: no answer (not sent, connection lost, timed out) */
    uint8_t serve;   /* which serve process it went to (index into the caller's list) */
    uint8_t attempt; /* 1 for the first try with this key */
    uint8_t sent;    /* the request was written in full (0: it cannot have run) */
    uint8_t bad;     /* the answer broke the HTTP contract (unparseable, wrong fields) */
    char err[16];    /* "error" of a refusal ("sold_out", "unconfirmed", ...) */
    char oid[SK_ORDER_ID_MAX];    /* the order id of a 200 */
    int64_t t_send_ms, t_done_ms; /* wall clock */
};

/* The answers of a run, appended by any thread (a fixed array, no locks). */
struct chaos_ledger {
    struct chaos_answer *a;
    size_t cap;
    atomic_size_t n; /* may pass cap: those answers were not kept (chaos_ledger_full) */
};

/* Allocates room for cap answers (the caller's: chaos_ledger_free). */
void chaos_ledger_init(struct chaos_ledger *L, size_t cap);
void chaos_ledger_free(struct chaos_ledger *L);
/* A slot for one answer, or NULL when the ledger is full. */
struct chaos_answer *chaos_ledger_add(struct chaos_ledger *L);
/* 1 when answers were dropped for want of room (the run cannot be judged). */
int chaos_ledger_full(const struct chaos_ledger *L);
/* The key as the header carries it ("c" and 16 hex digits) into out (cap >= 18). */
void chaos_key_text(uint64_t key, char *out, size_t cap);

struct chaos_activity {
    uint64_t id;
    int64_t stock, limit;
};

/* A master's clock held outside every activity's window from from_ms to
 * to_ms (wall clock of the test): an admission on it meanwhile broke the
 * window. branch: the first 8 hex digits of its replication id then (the
 * branch of the order ids it hands out). */
struct chaos_clock_jump {
    char branch[16];
    int64_t from_ms, to_ms;
};

struct chaos_input {
    const struct chaos_ledger *ledger;
    const struct chaos_activity *acts;
    size_t nacts;
    int nserves;                     /* serve indexes of the ledger are 0..nserves-1 */
    const char *const *serve_names;  /* for the report, nserves entries (NULL: "serve <i>") */
    sk_store *st;                    /* the database, read directly */
    sk_redis *r;                     /* Redis, after the drain */
    const char *redis_url, *db_spec; /* for `seckill reconcile` */
    int64_t start_ms;  /* when the sale began (wall clock; report times are relative to it) */
    int64_t healed_ms; /* when the last fault healed (wall clock) */
    int stale_after_s; /* reconcile's bound (0: 30) */
    const struct chaos_clock_jump *jumps; /* Redis masters' clock jumps (may be NULL) */
    size_t njumps;
    int clock_jumped; /* some clock was jumped: window refusals are allowed answers */
};

enum chaos_finding {
    CF_MISSING,     /* a 200 whose order the database does not hold, or holds cancelled */
    CF_MISMATCH,    /* the database holds another user/activity/quantity under the id */
    CF_ID_REUSED,   /* one order id answered 200 to two keys */
    CF_KEY_TWICE,   /* one key answered two order ids, or a user holds more live orders than keys */
    CF_PHANTOM,     /* an order nobody was answered 200 for, from a user with no doubt */
    CF_OVERSOLD,    /* units held > stock, or Redis stock < 0 */
    CF_OVER_LIMIT,  /* a user holds more than the limit */
    CF_STOCK,       /* remaining + held != initial, or Redis and the DB disagree on held */
    CF_FENCED,      /* a key set still fenced after the drain */
    CF_NOT_RESUMED, /* no 200 after the last fault although stock was left */
    CF_RECONCILE,   /* `seckill reconcile` found drift */
    CF_BAD_ANSWER,  /* an answer the HTTP contract does not allow */
    CF_WINDOW,      /* a 200 admitted while its master's clock was outside the window */
    CF_COUNT
};

const char *chaos_finding_name(int f);

struct chaos_act_report {
    uint64_t id;
    int64_t stock, limit;
    long ok200, units200, refused, s503, no_answer;
    int64_t db_orders, db_units, redis_remaining, redis_held;
    int64_t gap_ms, gap_at_ms; /* longest time between two 200s, and when it began (relative) */
    int64_t last_ok_ms;        /* the last 200 (relative), -1 none */
};

struct chaos_report {
    size_t answers, keys;
    long ok200, s409, s503, no_answer, other;
    long unconfirmed, recovering, unavailable; /* 503 by error */
    long maybe_orders;                         /* orders no 200 announced, from users in doubt */
    size_t found[CF_COUNT];
    char example[CF_COUNT][320];
    /* for the first example of a kind about one user: that user's attempts
     * in the activity and their orders in the database, one per line */
    uint64_t ex_aid[CF_COUNT], ex_user[CF_COUNT];
    char detail[CF_COUNT][2048];
    /* every acknowledged order missing: when it was answered, which
     * attempt, where, and what the attempt before it was answered; a line
     * by attempt number and serve, then up to 24 of them, one per line */
    char missing[4096];
    size_t nacts;
    struct chaos_act_report act[CHAOS_MAX_ACTS];
    int nserves;
    char serve_name[CHAOS_MAX_SERVES][32];
    int64_t serve_gap_ms[CHAOS_MAX_SERVES], serve_gap_at_ms[CHAOS_MAX_SERVES];
    long serve_ok[CHAOS_MAX_SERVES];
    int ledger_full;
};

/* Runs every check (the database and Redis are only read; reconcile runs
 * without --repair). Returns 0 when the checks ran (the verdict is in
 * out: chaos_report_ok), or a negative SK_E* code when the database or
 * Redis could not be read (out->example[0] says why). */
int chaos_check(const struct chaos_input *in, struct chaos_report *out);
/* 1 when nothing was found and the ledger kept every answer. */
int chaos_report_ok(const struct chaos_report *r);
/* The first kind found and its example ("" when none), for a failure's
 * own line. Static storage, overwritten by the next call. */
const char *chaos_report_first(const struct chaos_report *r);
/* The report: counts, per activity and per serve, and one line per kind
 * found with its first example; every line starts with "    # ". */
void chaos_report_print(FILE *f, const struct chaos_report *r);

#endif
