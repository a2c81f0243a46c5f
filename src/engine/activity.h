/* activity.h - an activity's definition, its validation, its live state
 * name, and the time formats the operator types (RFC 3339, `now`, `+10m`).
 *
 * Everything here is pure: bytes in, values out, no I/O and no clock reads
 * (callers pass "now"), so the HTTP API and the CLI share one set of rules
 * and the tests can feed it strings. */
#ifndef SK_ACTIVITY_H
#define SK_ACTIVITY_H
#include <stddef.h>
#include <stdint.h>

struct sk_stock_def;

#define SK_ACTIVITY_NAME_MAX 128 /* buffer size: names are 1..127 bytes */
#define SK_ACTIVITY_STATE_MAX 16
/* Ids and counts travel to Lua as decimal strings of at most 15 digits
 * (preheat.lua refuses longer ones, so doubles stay exact): keep below. */
#define SK_ACTIVITY_ID_MAX 999999999999999ULL
#define SK_ACTIVITY_STOCK_MAX 1000000000000LL /* 1e12 units */
#define SK_ACTIVITY_PAY_TIMEOUT_DEFAULT 1800  /* seconds */
#define SK_ACTIVITY_PAY_TIMEOUT_MAX 31536000  /* one year */
/* Rate limits (requests per second, burst) are 1..this; 0 = none. */
#define SK_ACTIVITY_RATE_MAX 1000000
/* Stock segments (docs/segments.md): 1..this, default 1 (not segmented). */
#define SK_ACTIVITY_SEGMENTS_MAX 256
#define SK_ACTIVITY_SEGMENTS_DEFAULT 1
/* Waiting room (docs/waiting-room.md): passes per second 1..this (0 = no
 * waiting room), a pass's lifetime in seconds, and the draw's secret seed
 * (lowercase hex, generated at create when not given). */
#define SK_ACTIVITY_PASS_RATE_MAX 1000000
#define SK_ACTIVITY_PASS_TTL_DEFAULT 300
#define SK_ACTIVITY_PASS_TTL_MAX 86400
#define SK_ACTIVITY_SEED_MIN 16 /* hex digits */
#define SK_ACTIVITY_SEED_MAX 64
#define SK_ACTIVITY_SEED_BYTES 16 /* a generated seed: 32 hex digits */
/* Challenges (docs/challenges.md): proof of work of 1..SK_CH_BITS_MAX bits
 * (SHA-256 leading zero bits), adaptive between a minimum and a maximum
 * with one more bit each time the load plus a step doubles; a CAPTCHA
 * provider's name (SK_CH_CAPTCHA_MAX bytes with the terminator). */
#define SK_CH_BITS_MAX 30
#define SK_CH_STEP_DEFAULT 1000
#define SK_CH_STEP_MAX 1000000000
#define SK_CH_CAPTCHA_MAX 16
/* Pre-registration and the draw (docs/fairness.md): a
 * winner's time box 1..this seconds (default 600), the draw's seed 64 hex
 * digits (32 bytes, generated at create when not given; its SHA-256 is
 * public from then on, the seed itself from the draw on). */
#define SK_ACTIVITY_BOX_MAX 86400
#define SK_ACTIVITY_BOX_DEFAULT 600
#define SK_ACTIVITY_DRAW_SEED_HEX 64
#define SK_ACTIVITY_DRAW_STATE_MAX 96
/* The waiting room's emergency controls (docs/waiting-room.md), bits of
 * wr_control: no new passes; no purchase either (everyone waits in line);
 * no new buyer joins. */
#define SK_WR_PAUSE 1
#define SK_WR_QUEUE_ALL 2
#define SK_WR_NO_JOINS 4
/* The operator's actions on them: pause admissions, queue everyone,
 * refuse new joins, resume (lifts all three). */
enum { SK_QC_PAUSE = 1, SK_QC_QUEUE_ALL, SK_QC_REFUSE_JOINS, SK_QC_RESUME };
/* Times are unix ms in [0, 9999-12-31T23:59:59.999Z]. */
#define SK_TIME_MAX_MS 253402300799999LL
/* "Not given": lets a caller tell an omitted field (default applies) from
 * an explicit 0 (refused). */
#define SK_ACTIVITY_UNSET INT64_MIN

struct sk_activity {
    uint64_t id;
    char name[SK_ACTIVITY_NAME_MAX];
    int64_t stock; /* initial stock */
    int64_t per_user_limit, max_per_order;
    int64_t start_ms, end_ms; /* unix ms, the sale window is [start, end) */
    int64_t pay_timeout_s;
    int64_t rl_per_user_per_s; /* the activity's per-user rate limit, 0 = the global one */
    int64_t rl_burst;          /* its burst; 0 with a rate = one second's worth */
    int64_t segments;          /* stock split over this many Redis hash tags, 1..256
                                  (docs/segments.md); 1 = not segmented; <= stock */
    int64_t wr_passes_per_s;   /* waiting room: passes handed out per second; 0 = none */
    int64_t wr_pass_ttl_s;     /* how long a pass may be used */
    char wr_seed[SK_ACTIVITY_SEED_MAX + 1]; /* the draw's secret (hex), "" without a waiting
                                               room; never shown to buyers */
    /* Challenge (docs/challenges.md) of the queue join, or of the purchase
     * without a waiting room: proof of work of ch_pow_min bits (0: none),
     * up to ch_pow_max under load (one more bit each time load +
     * ch_pow_step doubles; step 0: fixed), and/or a CAPTCHA of the
     * provider ch_captcha ("" none; sk_activity_captcha_valid). */
    int64_t ch_pow_min, ch_pow_max, ch_pow_step;
    char ch_captcha[SK_CH_CAPTCHA_MAX];
    int64_t wr_control; /* the waiting room's emergency controls: SK_WR_* bits, 0 = none */
    /* Pre-registration (docs/fairness.md): buyers register in
     * [reg_start_ms, reg_end_ms) and only they may join or buy; 0 0 = none.
     * reg_end_ms <= start_ms. */
    int64_t reg_start_ms, reg_end_ms;
    /* Allocation "draw" (with registration): at reg_end the registrants are
     * put in a random order from draw_seed, and the first ones get a right
     * to buy for draw_box_s seconds each, wave after wave; 0 = a race. */
    int64_t draw_box_s;
    char draw_seed[SK_ACTIVITY_DRAW_SEED_HEX + 1]; /* "" without a draw; secret until drawn */
    /* The draw as made (written by the order worker or `activity draw`,
     * ignored on insert): when (0: not yet), how many registrants, and the
     * rights handed out so far as "wave:from:to:box_start_ms:box_end_ms". */
    int64_t drawn_ms, draw_n;
    char draw_state[SK_ACTIVITY_DRAW_STATE_MAX];
    int64_t created_ms;
    int64_t stock_db;                  /* DB stock (decremented by the order worker); read from
                                          the store, ignored on insert (starts at stock) */
    char state[SK_ACTIVITY_STATE_MAX]; /* "created"|"preheated"|"open"|"closed" */
};

/* Zeroes *a, marks max_per_order, pay_timeout_s, segments and
 * wr_pass_ttl_s SK_ACTIVITY_UNSET and the state "created". */
void sk_activity_init(struct sk_activity *a);

/* Replaces unset fields by their defaults: max_per_order = per_user_limit,
 * pay_timeout_s = 1800, segments = 1, wr_pass_ttl_s = 300 with a waiting
 * room (0 without), ch_pow_max = ch_pow_min when 0, ch_pow_step =
 * SK_CH_STEP_DEFAULT when the bits may rise and 0 when they may not. A
 * missing seed is the caller's to draw (core/rand.h). */
void sk_activity_apply_defaults(struct sk_activity *a);

/* Checks every field. Returns 0, or SK_EINVAL with the first problem as one
 * human line in err (cap bytes; err may be NULL). */
int sk_activity_validate(const struct sk_activity *a, char *err, size_t cap);

/* 1 when s (len bytes) is a seed sk_activity_validate accepts: 16..64
 * lowercase hex digits. */
int sk_activity_seed_valid(const char *s, size_t len);

/* 1 when s is a CAPTCHA provider an activity may name: "turnstile",
 * "hcaptcha" or "recaptcha". */
int sk_activity_captcha_valid(const char *s);

/* 1 when the activity asks a challenge (proof of work or CAPTCHA). */
int sk_activity_has_challenge(const struct sk_activity *a);

/* What the admission and queue scripts need of the challenge, for meta
 * field `ch`: "<minimum bits>:<1 with a CAPTCHA, else 0>", or "" without
 * a challenge. Into out (cap bytes; SK_CH_SPEC_MAX suffice). */
#define SK_CH_SPEC_MAX 24
void sk_activity_ch_spec(const struct sk_activity *a, char *out, size_t cap);

/* 1 when s is one of the four stored states. */
int sk_activity_state_valid(const char *s);

/* 1 when s (len bytes) is a draw seed: exactly SK_ACTIVITY_DRAW_SEED_HEX
 * lowercase hex digits. */
int sk_activity_draw_seed_valid(const char *s, size_t len);

/* "pause", "queue_all", "refuse_joins", "resume" -> SK_QC_*, or SK_EINVAL. */
int sk_activity_control_action(const char *word);

/* The Redis-side definition used by preheat. */
void sk_activity_stock_def(const struct sk_activity *a, struct sk_stock_def *d);

/* The state a buyer sees at now_ms: "ended" once the window is over (final),
 * else "closed" while the switch is off (or nothing was preheated), else
 * "scheduled" before start, else "open". Static string. */
const char *sk_activity_live_state(int preheated, int switch_open, int64_t start_ms, int64_t end_ms,
                                   int64_t now_ms);

/* Parses len bytes of an RFC 3339 date-time: YYYY-MM-DDTHH:MM:SS, optional
 * fraction (any digits, kept to ms, truncated), then Z or +HH:MM/-HH:MM
 * ('t' and 'z' too). Calendar checked (no Feb 30, hour 24, second 60).
 * Returns 0 or SK_EINVAL. */
int sk_time_parse_rfc3339(const char *s, size_t len, int64_t *ms);

/* Longest text sk_time_format_rfc3339 writes, with the terminator. */
#define SK_TIME_RFC3339_MAX 32

/* Formats ms as UTC "2026-11-29T10:00:00Z" (".123" before Z when ms is not
 * whole seconds). Returns 0, or SK_EINVAL when ms is outside years
 * 0000..9999 or cap is too small (buf then holds ""). */
int sk_time_format_rfc3339(int64_t ms, char *buf, size_t cap);

/* A time as the operator types it: "now" (now_ms), "+<N>s|m|h|d" (base_ms
 * plus the offset; N up to 9 digits), or RFC 3339. Returns 0 or SK_EINVAL. */
int sk_time_parse_arg(const char *s, size_t len, int64_t now_ms, int64_t base_ms, int64_t *ms);

#endif
