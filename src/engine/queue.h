/* queue.h - the waiting room in front of a sale (docs/waiting-room.md):
 * buyers join a queue under the activity's base hash tag, are placed in a
 * random order when they joined before the start (a keyed draw from the
 * activity's seed) and in arrival order after it, and get a pass when the
 * pace (passes per second, on Redis's clock) reaches their place. A
 * purchase of such an activity needs the buyer's pass (lib/pass.lua, in the
 * admission call).
 *
 * The calls follow stock.h's convention: 0 when Redis answered (the outcome
 * is an SK_RC_* code in the result), a negative SK_E* code (details in
 * r->errstr) when it did not. Argument building and reply decoding are pure
 * and shared with the async service; the rest of this file is pure too
 * except the blocking calls at the end. */
#ifndef SK_QUEUE_H
#define SK_QUEUE_H
#include <stddef.h>
#include <stdint.h>

#include "engine/keys.h"
#include "redis/redis_conn.h"

/* Longest queue call (joins and polls of one activity in one script call). */
#define SK_QUEUE_BATCH_MAX 1024
/* Longest pass text accepted: "<expiry ms>.<32 hex digits>" is at most 48. */
#define SK_QUEUE_PASS_MAX 64

enum sk_queue_op { SK_QUEUE_JOIN = 'j', SK_QUEUE_POLL = 'p' };

/* What a queue call says about the queue (the same for every buyer in it). */
struct sk_queue_head {
    int rc;               /* SK_RC_OK, or the refusal every buyer got (UNKNOWN_ACTIVITY,
                             NO_WAITING_ROOM, ENDED, CLOSED, SOLD_OUT) */
    int64_t length;       /* buyers in the queue (places handed out, passes or not) */
    int64_t issued;       /* the first `issued` places hold a pass */
    int64_t rate;         /* passes per second */
    int64_t starts_in_ms; /* > 0: the sale starts in that many ms, nothing is drawn yet */
    int64_t segments;     /* 1, or the activity's stock segments */
    int64_t returned;     /* seats this call gave back to the pace (passes unused in time) */
    int64_t expired;      /* of them, passes buyers had fetched (the rest never were) */
    int control;          /* the emergency controls now (SK_WR_* bits of activity.h) */
};

/* Events of one answer (a bit set). */
#define SK_QUEUE_EV_ISSUED 1  /* this call handed the pass out */
#define SK_QUEUE_EV_EXPIRED 2 /* this call found the pass expired */

/* One buyer's answer. */
struct sk_queue_answer {
    int rc;              /* Q_WAITING, Q_ADMITTED, Q_USED, Q_EXPIRED, NOT_IN_QUEUE, or the
                            head's refusal */
    int64_t place;       /* 1 = the front; 0 = not known (before the start) */
    int64_t pass_exp_ms; /* Q_ADMITTED: when the pass expires (unix ms, Redis's clock) */
    char pass[SK_QUEUE_PASS_MAX];
    int events;
};

/* The queue script's ARGV for n (1..SK_QUEUE_BATCH_MAX) buyers: ops[i]
 * (SK_QUEUE_JOIN or SK_QUEUE_POLL) of users[i] with the challenge ticket
 * tickets[i] (engine/challenge.h; tickets or an entry NULL: none), into
 * buf (cap bytes, at least SK_QUEUE_ARG_BYTES(n)) and args/lens
 * (SK_QUEUE_ARGC(n) entries; a ticket is passed by reference). Returns 0
 * or SK_EINVAL. sk_queue_args: without tickets. */
#define SK_QUEUE_ARGC(n) (SK_A_QUEUE_N + SK_A_JOIN_N * (n)) /* A_QUEUE, A_JOIN */
#define SK_QUEUE_ARG_BYTES(n) (24 + (n) * (2 + 22))
int sk_queue_args_ch(uint64_t activity_id, const char *ops, const uint64_t *users,
                     const char *const *tickets, size_t n, char *buf, size_t cap, const char **args,
                     size_t *lens);
int sk_queue_args(uint64_t activity_id, const char *ops, const uint64_t *users, size_t n, char *buf,
                  size_t cap, const char **args, size_t *lens);
/* The queue script's KEYS on key set k: its SK_QUEUE_NKEYS, then, when ids
 * is not NULL (the call carries tickets), the spent key of each buyer's
 * challenge (keys.h: sk_keys_ch; a NULL entry: none). Into buf (cap bytes,
 * at least SK_QUEUE_KEY_BYTES(n)) and keys (SK_QUEUE_KEYC(n) entries).
 * Returns how many, or SK_EINVAL / SK_ENOMEM. */
#define SK_QUEUE_KEYC(n) (SK_QUEUE_NKEYS + (n))
#define SK_QUEUE_KEY_BYTES(n) ((n) * (SK_KEYS_CH_MAX + 1))
int sk_queue_keys(const struct sk_keys *k, const char *const *ids, size_t n, char *buf, size_t cap,
                  const char **keys);
/* Decodes a queue reply for n buyers. Returns 0, SK_EPROTO, or SK_ESCRIPT
 * for the answer to a malformed call (lua/lib/args.lua). */
int sk_queue_parse(const redisReply *rep, size_t n, struct sk_queue_head *h,
                   struct sk_queue_answer *a);

/* Buyers ahead of a waiting buyer, plus one (1: next in line); 0 when not
 * known (before the start, or not waiting). */
int64_t sk_queue_position(const struct sk_queue_head *h, const struct sk_queue_answer *a);
/* Estimated ms until a waiting buyer gets a pass: until the start, or
 * position / rate after it. */
int64_t sk_queue_eta_ms(const struct sk_queue_head *h, const struct sk_queue_answer *a);
/* When a waiting buyer should poll again, in ms: half the estimate, at
 * least 250 ms and at most 20 s, with a per-buyer spread of up to a tenth
 * (a second before the start, so the buyers drawn first do not all ask in
 * the same millisecond). 0 when not waiting. */
int64_t sk_queue_poll_after_ms(const struct sk_queue_head *h, const struct sk_queue_answer *a,
                               uint64_t user_id);
/* 1 when len bytes of s can be a pass (digits, '.', lowercase hex, at most
 * SK_QUEUE_PASS_MAX - 1 bytes), so it may travel to the admission call;
 * whether it is valid is the call's to say. Sets *exp_ms (may be NULL) to
 * its expiry. */
int sk_queue_pass_wellformed(const char *s, size_t len, int64_t *exp_ms);

/* The figures of a waiting room (queue_pace.lua). */
struct sk_queue_stats {
    int rc;               /* SK_RC_OK, NO_WAITING_ROOM, UNKNOWN_ACTIVITY, BAD_ARGUMENT */
    int64_t rate, ttl_s;  /* passes per second (after the call), a pass's lifetime */
    int64_t length;       /* buyers in the queue */
    int64_t issued;       /* places holding a pass */
    int64_t handed_out;   /* passes buyers have fetched */
    int64_t spent;        /* passes spent by a purchase */
    int64_t expired;      /* passes found expired unspent */
    int64_t starts_in_ms; /* > 0 before the start */
    int64_t returned;     /* seats given back to the pace */
    int control;          /* the emergency controls (SK_WR_* bits) */
};
/* Decodes a queue_pace reply. Returns 0 or SK_EPROTO. */
int sk_queue_stats_parse(const redisReply *rep, struct sk_queue_stats *st);

/* The emergency controls (queue_control.lua, docs/waiting-room.md; the
 * actions SK_QC_* are activity.h's). The script's word for an action.
 * Static. */
const char *sk_queue_control_arg(int action);

/* ---- blocking ------------------------------------------------------------ */

/* One queue call for n buyers (see sk_queue_args). */
int sk_queue_call(sk_redis *r, uint64_t activity_id, const char *ops, const uint64_t *users,
                  size_t n, struct sk_queue_head *h, struct sk_queue_answer *a);
/* The figures, and with new_rate > 0 a new pace (passes per second). */
int sk_queue_pace(sk_redis *r, uint64_t activity_id, int64_t new_rate, struct sk_queue_stats *st);
/* The keys and arguments of queue_spent.lua for user_id's pass expiring
 * at pass_exp_ms, in c (its pointers point into c: use it where it is
 * filled, do not copy it). */
struct sk_queue_spent_call {
    struct sk_keys k;
    char a[SK_A_QUEUE_SPENT_N][24];
    const char *keys[SK_K_QUEUE_SPENT_N];
    const char *args[SK_A_QUEUE_SPENT_N];
};
void sk_queue_spent_call(struct sk_queue_spent_call *c, uint64_t activity_id, uint64_t user_id,
                         int64_t pass_exp_ms);

#endif
