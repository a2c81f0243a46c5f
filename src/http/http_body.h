/* http_body.h - request bodies of the v1 HTTP API and JSON string escaping
 * (bytes in, values out, no I/O).
 *
 * Every parser takes (buf, len) without needing a terminator, accepts any
 * bytes (NUL, invalid UTF-8, huge numbers, deep nesting) and answers 0 or
 * SK_EINVAL with one human line in err (cap bytes, always terminated when
 * cap > 0; err may be NULL with cap 0). SK_ENOMEM only if jansson cannot
 * allocate. Nothing returned points into jansson memory: results are
 * copied into caller-owned structs, so the caller frees nothing.
 *
 * Rules shared by both bodies (the README's HTTP API): the body must be one JSON object
 * (RFC 8259 via jansson: no trailing bytes, no comments, valid UTF-8, no
 * \u0000), nested at most SK_BODY_MAX_DEPTH deep; an unknown field is
 * refused, named (a typo'd field must not take its default in silence); a
 * key appearing twice anywhere is refused (JSON parsers
 * disagree on which copy wins, so a duplicate is an attack or a bug);
 * numbers must be integers written without fraction or exponent ("1e2",
 * "2.0" are refused, consistently); null is never accepted as a value. */
#ifndef SK_HTTP_BODY_H
#define SK_HTTP_BODY_H
#include <stddef.h>
#include <stdint.h>

#define SK_BODY_MAX_DEPTH 32
#define SK_BODY_QUANTITY_MAX 1000000

/* Limits of the admin create body are activity.h's (one source). */
#include "engine/activity.h"
#define SK_BODY_ID_MAX ((long long)SK_ACTIVITY_ID_MAX)
#define SK_BODY_STOCK_MAX SK_ACTIVITY_STOCK_MAX
#define SK_BODY_PAY_TIMEOUT_DEFAULT SK_ACTIVITY_PAY_TIMEOUT_DEFAULT
#define SK_BODY_PAY_TIMEOUT_MAX SK_ACTIVITY_PAY_TIMEOUT_MAX
#define SK_BODY_TIME_MAX_MS SK_TIME_MAX_MS

/* POST /api/v1/activities/{id}/purchase. Empty body (len 0, not even
 * whitespace) or an object without "quantity" -> 1; otherwise quantity
 * must be an integer in 1..SK_BODY_QUANTITY_MAX (the activity's own
 * max_per_order is checked by the caller). sk_body_purchase_quick, then
 * sk_body_purchase_full for what it did not decide: the same answer as
 * sk_body_purchase_full alone for every input (fuzz_purchase_body). */
int sk_body_purchase(const char *buf, size_t len, int64_t *quantity, char *err, size_t cap);

/* The fast path: the one-field body {"quantity":N}, JSON whitespace around
 * its tokens, N a canonical integer in 1..SK_BODY_QUANTITY_MAX. 1 with
 * *quantity set; 0 (nothing written) for every other input, which it
 * leaves to the full parser. No allocation. */
int sk_body_purchase_quick(const char *buf, size_t len, int64_t *quantity);

/* The full parser (jansson), which alone decides every refusal. */
int sk_body_purchase_full(const char *buf, size_t len, int64_t *quantity, char *err, size_t cap);

/* POST /api/v1/activities into *out, the fields of struct sk_activity it
 * names (the rest zero):
 * - required: "id" (1..SK_BODY_ID_MAX), "name" (1..127 bytes of UTF-8, no
 *   control characters), "stock" and "per_user_limit" (1..
 *   SK_BODY_STOCK_MAX), "start" and "end" (RFC 3339 strings -> unix ms;
 *   0 <= start < end);
 * - optional: "max_per_order" (default per_user_limit; 1..per_user_limit),
 *   "pay_timeout_s" (default 1800; 1..SK_BODY_PAY_TIMEOUT_MAX), "segments"
 *   (1..SK_ACTIVITY_SEGMENTS_MAX, default 1, docs/segments.md; <= stock is
 *   sk_activity_validate's);
 * - "rate_limit": {"per_user_per_s": R, "burst": B}: R required in
 *   1..SK_ACTIVITY_RATE_MAX, B optional (default R) in the same range;
 *   both 0 when absent (the global limit applies);
 * - "waiting_room": {"passes_per_s": R, "pass_ttl_s": T, "seed": "hex"}
 *   (docs/waiting-room.md): R required in 1..SK_ACTIVITY_PASS_RATE_MAX, T
 *   optional (default SK_ACTIVITY_PASS_TTL_DEFAULT) in 1..
 *   SK_ACTIVITY_PASS_TTL_MAX, seed optional (16..64 hex digits, kept in
 *   lower case; "" = draw one); all 0 / "" when absent;
 * - "challenge" (docs/challenges.md): {"pow_bits": N} (fixed), or
 *   {"pow_bits_min": A, "pow_bits_max": B, "pow_load_step": S} (rising with
 *   the load; B default A, S default SK_CH_STEP_DEFAULT when B > A),
 *   and/or "captcha": "turnstile" | "hcaptcha" | "recaptcha"; bits in
 *   1..SK_CH_BITS_MAX; all 0 / "" when absent (sk_activity_validate judges
 *   the combination);
 * - "registration": {"start": T, "end": T} (RFC 3339; both required in it)
 *   and "allocation": "race" (default) | "draw", with "draw": {"box_s": B,
 *   "seed": "64 hex"} optional (B 1..SK_ACTIVITY_BOX_MAX, default
 *   SK_ACTIVITY_BOX_DEFAULT; seed "" = draw one) (docs/fairness.md); all
 *   0 / "" when absent.
 * On failure *out is zeroed and err names the offending field. */
int sk_body_activity_create(const char *buf, size_t len, struct sk_activity *out, char *err,
                            size_t cap);

/* POST /api/v1/activities/{id}/queue/pace (admin): {"passes_per_s": R},
 * R in 1..SK_ACTIVITY_PASS_RATE_MAX, required. */
int sk_body_queue_pace(const char *buf, size_t len, int64_t *passes_per_s, char *err, size_t cap);

/* POST /api/v1/activities/{id}/queue/control (admin): {"action": A}, A
 * one of "pause", "queue_all", "refuse_joins", "resume": *action the
 * SK_QC_* of engine/activity.h. */
int sk_body_queue_control(const char *buf, size_t len, int *action, char *err, size_t cap);

/* The webhook endpoints of an activity (admin, docs/integration.md). */
#define SK_BODY_WH_NAME_MAX 33        /* a name: 1..32 of [A-Za-z0-9_.-] */
#define SK_BODY_WH_KEEP_DEFAULT 86400 /* a rotated secret signs a day more */
#define SK_BODY_WH_KEEP_MAX (7 * 86400)
/* 1 when the len bytes at name are an endpoint's name. */
int sk_body_wh_name_ok(const char *name, size_t len);

/* POST /api/v1/activities/{id}/webhooks: {"name": N, "url": U} with
 * optional "events": ["order.paid", "activity.", "*", ...] (each checked
 * by sk_wh_filter_check; joined with ',' into events; absent: "" = all)
 * and "secret": "whsec_..." ("" when absent: the server draws one). */
struct sk_body_webhook {
    char name[SK_BODY_WH_NAME_MAX];
    char url[512];
    char events[256];
    char secret[100];
};
int sk_body_webhook_add(const char *buf, size_t len, struct sk_body_webhook *out, char *err,
                        size_t cap);
/* POST .../webhooks/{name}/rotate: empty, or {"secret": "whsec_...",
 * "keep_previous_s": S} both optional (secret "": draw one; S 0..
 * SK_BODY_WH_KEEP_MAX, default SK_BODY_WH_KEEP_DEFAULT). */
int sk_body_webhook_rotate(const char *buf, size_t len, char *secret, size_t scap, int64_t *keep_s,
                           char *err, size_t cap);
/* POST .../webhooks/{name}/replay: {"since": "RFC 3339 time"}. */
int sk_body_webhook_replay(const char *buf, size_t len, int64_t *since_ms, char *err, size_t cap);

/* The body of a route that takes no fields but an optional force
 * (preheat, DELETE of an activity; allow_force 0: open, close, pay,
 * cancel, the waiting room's join): empty, or a JSON object holding at
 * most {"force": true|false} (nothing when !allow_force). *force: its
 * value, 0 when absent. SK_EINVAL naming the unknown field, or saying what
 * the body may be. */
int sk_body_options(const char *buf, size_t len, int allow_force, int *force, char *err,
                    size_t cap);

/* Escapes len bytes of s for use between the quotes of a JSON string
 * (the quotes are not written): " \ and control bytes are escaped, so are
 * < > & U+2028 U+2029 (safe to embed in a <script> of the dashboard),
 * valid UTF-8 passes through, and each byte of invalid UTF-8 becomes
 * \ufffd, so the output is always valid JSON. Writes a terminator.
 * Returns the length written (without terminator), or SK_ENOMEM when cap
 * is too small (out then holds "" when cap > 0). 6 * len + 1 bytes always
 * suffice. */
int sk_body_json_escape(const char *s, size_t len, char *out, size_t cap);

/* The error body {"error":"<code>","message":"<escaped msg>"} into
 * out. Returns the length or SK_ENOMEM (as above). */
int sk_body_error_json(const char *code, const char *message, char *out, size_t cap);

#endif
