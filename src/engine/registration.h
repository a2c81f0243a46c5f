/* registration.h - pre-registration (预约) and the draw's state in Redis
 * (docs/fairness.md): the arguments and replies of
 * register.lua (a buyer registers, or asks where they stand) and of
 * draw_put.lua (the draw written into Redis, its waves), pure and shared
 * with the async service, and the blocking calls of the order worker,
 * the CLI and the tests.
 *
 * The calls follow stock.h's convention: 0 when Redis answered (the
 * outcome is an SK_RC_* code in the result), a negative SK_E* code (details
 * in r->errstr) when it did not. */
#ifndef SK_REGISTRATION_H
#define SK_REGISTRATION_H
#include <stddef.h>
#include <stdint.h>

#include "engine/keys.h"
#include "engine/queue.h"
#include "engine/stock.h"
#include "redis/redis_conn.h"

enum sk_reg_op { SK_REG_REGISTER = 'r', SK_REG_STATUS = 's' };

/* A register.lua call: its KEYS and ARGV (pointers into the struct: fill
 * and use it in place, do not copy it). */
struct sk_reg_call {
    struct sk_keys k;
    char rl_user[SK_RL_KEY_MAX], rl_ip[SK_RL_KEY_MAX], ch_key[SK_KEYS_CH_MAX];
    char a[SK_A_REGISTER_N][24];
    char op[2];
    const char *keys[SK_K_REGISTER_N + 1]; /* + the challenge's spent key */
    const char *args[SK_A_REGISTER_N];
    int nkeys, nargs;
};
/* op (SK_REG_REGISTER or SK_REG_STATUS) of user_id on activity_id, with the
 * call's rate limits (NULL: none; the activity's own applies) and client
 * IP (NULL or "": none). Pure. */
void sk_reg_call_make(struct sk_reg_call *c, uint64_t activity_id, char op, uint64_t user_id,
                      const struct sk_rate_limits *rl, const char *ip);
/* Adds a checked challenge to a register call made above: its ticket
 * (engine/challenge.h: sk_challenge_ticket; kept by reference, it must
 * outlive the call) and its id, which names its spent key. Pure. */
void sk_reg_call_ticket(struct sk_reg_call *c, const char *ticket, const char *ch_id);

/* A register.lua answer. */
struct sk_reg_answer {
    int rc;              /* see register.lua */
    int registered;      /* the buyer is registered (after the call) */
    int added;           /* this call registered them */
    int64_t count;       /* registrants */
    int64_t retry_ms;    /* RATE_LIMITED: when to try again */
    int64_t place;       /* the buyer's place in the draw's order, 0: none */
    int64_t pass_exp_ms; /* Q_ADMITTED: the box's end, the pass's expiry */
    char pass[SK_QUEUE_PASS_MAX];
    int64_t box_start_ms; /* Q_ADMITTED: when the box began (or begins: the sale's start) */
    int64_t winners;      /* places holding or having held a right */
    int64_t drawn;        /* registrants in the draw, 0: not drawn */
};
/* 0, SK_EPROTO, or SK_ESCRIPT for the answer to a malformed call. Pure. */
int sk_reg_parse(const redisReply *rep, struct sk_reg_answer *a);
/* One blocking call. */
int sk_reg_call(sk_redis *r, uint64_t activity_id, char op, uint64_t user_id,
                const struct sk_rate_limits *rl, const char *ip, struct sk_reg_answer *a);

/* ---- the draw in Redis (draw_put.lua; blocking) ------------------------- */

/* The draw's state in Redis. */
struct sk_draw_redis {
    int rc;    /* OK, RECOVERING, UNKNOWN_ACTIVITY, NO_REGISTRATION, NOT_STARTED,
                  REGISTERED (not drawn), BAD_ARGUMENT */
    int64_t n; /* registrants in the draw, 0: not drawn */
    int64_t wave, from, to, box_start_ms, box_end_ms;
};

/* Redis's clock, the registration's end, the registrants and n (0: not
 * drawn yet) of activity_id ('c'); rc as above. */
int sk_draw_check(sk_redis *r, uint64_t activity_id, int *rc, int64_t *now_ms, int64_t *reg_end_ms,
                  int64_t *registrants, int64_t *drawn);
/* Every registrant of activity_id in Redis (SSCAN), into a new array *out
 * of *n (the caller frees it; NULL when none). */
int sk_draw_registrants(sk_redis *r, uint64_t activity_id, uint64_t **out, size_t *n);
/* Writes the order (order[i] is place i + 1) and finishes the draw: at
 * Redis's first draw the first wave (stock-sized, from the sale's start),
 * or the wave the database recorded (wave may be NULL). *st the state after. */
int sk_draw_put(sk_redis *r, uint64_t activity_id, const uint64_t *order, size_t n,
                int64_t drawn_ms, const char *seed_hex, const struct sk_draw_redis *wave,
                struct sk_draw_redis *st);
/* The order as Redis holds it: out[i] the user of place i + 1 (n entries,
 * the caller's; users missing are 0). */
int sk_draw_read(sk_redis *r, uint64_t activity_id, uint64_t *out, size_t n);

/* The wave as the store keeps it (sk_activity.draw_state):
 * "wave:from:to:box_start_ms:box_end_ms"; "" when not drawn. Pure. */
void sk_draw_state_format(const struct sk_draw_redis *st, char *out, size_t cap);
/* 0, or SK_EINVAL (st zeroed) for text of another shape. */
int sk_draw_state_parse(const char *s, struct sk_draw_redis *st);

#endif
