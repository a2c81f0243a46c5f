/* http_body.c - v1 request bodies through jansson, plus JSON escaping.
 *
 * jansson is the one parser that decides a body. The purchase body has a
 * fast path in front of it for its common shape, {"quantity":N}: jansson
 * (its allocations and the object it builds) was about a sixth of serve's
 * user-space instructions per purchase, counted with callgrind. The fast
 * path only says yes, for bodies jansson accepts with the same quantity;
 * anything else, every refusal included, goes to jansson (the fuzz target
 * purchase_body proves both give the same answer for every input). A byte
 * pre-scan bounds the nesting depth before jansson recurses. All jansson
 * values are released before returning; results are copied out. */
#include "http/http_body.h"

#include "engine/activity.h"

#include <ctype.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "orders/webhook_filter.h"
#include "orders/webhook_sign.h"

/* Deepest [ / { nesting outside strings. Malformed input may confuse the
 * count, but then jansson refuses it anyway; for valid JSON it is exact. */
static int nesting_depth_exceeds(const char *buf, size_t len, int max)
{
    int depth = 0, in_str = 0;
    for (size_t i = 0; i < len; i++) {
        char c = buf[i];
        if (in_str) {
            if (c == '\\')
                i++; /* skip the escaped byte, e.g. \" */
            else if (c == '"')
                in_str = 0;
        } else if (c == '"') {
            in_str = 1;
        } else if (c == '{' || c == '[') {
            if (++depth > max) return 1;
        } else if ((c == '}' || c == ']') && depth > 0) {
            depth--;
        }
    }
    return 0;
}

/* jansson's message may quote input bytes ("near '\xff'"): keep printable
 * ASCII only so err is safe to log and to escape into a reply. */
static void clean_text(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e) *s = '?';
}

/* SK_EINVAL naming the first field of obj that is none of known
 * (NULL-terminated): a typo'd field must not fall back to its default in
 * silence. where: the enclosing field ("" at the top). 0 when every field
 * is known. */
static int only_fields(json_t *obj, const char *const *known, const char *where, char *err,
                       size_t cap)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v)
    {
        (void)v;
        int ok = 0;
        for (size_t i = 0; known[i] && !ok; i++)
            ok = strcmp(key, known[i]) == 0;
        if (ok) continue;
        char name[68];
        snprintf(name, sizeof name, "%.64s", key);
        clean_text(name);
        char list[256] = "";
        for (size_t i = 0, n = 0; known[i] && n < sizeof list; i++)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", known[i]);
        if (!known[0]) snprintf(list, sizeof list, "none");
        return sk_einval(err, cap, "unknown field %s%s%s (known: %s)", where, where[0] ? "." : "",
                         name, list);
    }
    return 0;
}

/* Parses the whole body as one JSON object whose fields are among known
 * (NULL: any). On success *out holds a new reference the caller must
 * json_decref. */
static int load_object(const char *buf, size_t len, const char *const *known, json_t **out,
                       char *err, size_t cap)
{
    *out = NULL;
    /* jansson stops at a NUL and may accept what came before it */
    if (memchr(buf, 0, len)) return sk_einval(err, cap, "NUL byte in body");
    if (nesting_depth_exceeds(buf, len, SK_BODY_MAX_DEPTH))
        return sk_einval(err, cap, "JSON nested deeper than %d levels", SK_BODY_MAX_DEPTH);
    json_error_t je;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        enum json_error_code code = json_error_code(&je);
        if (code == json_error_out_of_memory) {
            if (err && cap) snprintf(err, cap, "out of memory parsing the body");
            return SK_ENOMEM;
        }
        if (code == json_error_duplicate_key)
            return sk_einval(err, cap, "duplicate key in JSON object");
        if (code == json_error_numeric_overflow)
            return sk_einval(err, cap, "number out of range at byte %d", je.position);
        clean_text(je.text);
        return sk_einval(err, cap, "invalid JSON at byte %d: %s", je.position, je.text);
    }
    int rc = !json_is_object(root) ? sk_einval(err, cap, "body must be a JSON object")
             : known               ? only_fields(root, known, "", err, cap)
                                   : 0;
    if (rc < 0) {
        json_decref(root);
        return rc;
    }
    *out = root;
    return 0;
}

/* Integer field in [lo, hi]. Returns 1 when set, 0 when absent, or
 * SK_EINVAL (wrong type, null, out of range). */
static int get_int(json_t *obj, const char *key, int64_t lo, int64_t hi, int64_t *v, char *err,
                   size_t cap)
{
    json_t *j = json_object_get(obj, key);
    if (!j) return 0;
    json_int_t x = json_is_integer(j) ? json_integer_value(j) : 0;
    if (!json_is_integer(j) || x < lo || x > hi)
        return sk_einval(err, cap, "%s must be an integer between %lld and %lld", key,
                         (long long)lo, (long long)hi);
    *v = (int64_t)x;
    return 1;
}

static int require_int(json_t *obj, const char *key, int64_t lo, int64_t hi, int64_t *v, char *err,
                       size_t cap);

/* The one integer field name of a JSON object body, in lo..hi, into
 * *out (untouched on failure); absent: dflt, or a failure when required. */
static int body_int(const char *buf, size_t len, const char *name, int64_t lo, int64_t hi,
                    int required, int64_t dflt, int64_t *out, char *err, size_t cap)
{
    json_t *root;
    const char *const known[] = {name, NULL};
    int rc = load_object(buf, len, known, &root, err, cap);
    if (rc < 0) return rc;
    int64_t v = dflt;
    rc = required ? require_int(root, name, lo, hi, &v, err, cap)
                  : get_int(root, name, lo, hi, &v, err, cap);
    json_decref(root);
    if (rc < 0) return rc;
    *out = v;
    return 0;
}

/* JSON's whitespace (RFC 8259, and jansson's lexer): past it from p. */
static const char *skip_ws(const char *p, const char *e)
{
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

int sk_body_purchase_quick(const char *buf, size_t len, int64_t *quantity)
{
    static const char key[] = "\"quantity\"";
    if (!buf) return 0;
    const char *p = skip_ws(buf, buf + len), *e = buf + len;
    if (p == e || *p++ != '{') return 0;
    p = skip_ws(p, e);
    if ((size_t)(e - p) < sizeof key - 1 || memcmp(p, key, sizeof key - 1) != 0) return 0;
    p = skip_ws(p + sizeof key - 1, e);
    if (p == e || *p++ != ':') return 0;
    p = skip_ws(p, e);
    /* a canonical integer: no sign, no leading zero; 7 digits at most
     * bound the value before the range check */
    if (p == e || *p < '1' || *p > '9') return 0;
    int64_t v = 0;
    for (int digits = 0; p < e && *p >= '0' && *p <= '9'; p++) {
        if (++digits > 7) return 0;
        v = v * 10 + (*p - '0');
    }
    if (v > SK_BODY_QUANTITY_MAX) return 0;
    p = skip_ws(p, e);
    if (p == e || *p++ != '}') return 0;
    if (skip_ws(p, e) != e) return 0;
    *quantity = v;
    return 1;
}

int sk_body_purchase_full(const char *buf, size_t len, int64_t *quantity, char *err, size_t cap)
{
    if (err && cap) err[0] = 0;
    if (len == 0) {
        *quantity = 1;
        return 0;
    }
    if (!buf) return sk_einval(err, cap, "no body");
    return body_int(buf, len, "quantity", 1, SK_BODY_QUANTITY_MAX, 0, 1, quantity, err, cap);
}

int sk_body_purchase(const char *buf, size_t len, int64_t *quantity, char *err, size_t cap)
{
    if (sk_body_purchase_quick(buf, len, quantity)) {
        if (err && cap) err[0] = 0;
        return 0;
    }
    return sk_body_purchase_full(buf, len, quantity, err, cap);
}

/* ---- admin create -------------------------------------------------------- */

static int get_time(json_t *obj, const char *key, int64_t *ms, char *err, size_t cap)
{
    json_t *j = json_object_get(obj, key);
    if (!j) return sk_einval(err, cap, "missing field %s (RFC 3339 time)", key);
    if (!json_is_string(j)) return sk_einval(err, cap, "%s must be an RFC 3339 string", key);
    if (sk_time_parse_rfc3339(json_string_value(j), json_string_length(j), ms) < 0)
        return sk_einval(err, cap,
                         "%s must be an RFC 3339 time with a zone, e.g. 2026-11-29T10:00:00Z or "
                         "2026-11-29T18:00:00+08:00",
                         key);
    if (*ms < 0 || *ms > SK_BODY_TIME_MAX_MS)
        return sk_einval(err, cap, "%s must lie between 1970 and 9999", key);
    return 0;
}

static int require_int(json_t *obj, const char *key, int64_t lo, int64_t hi, int64_t *v, char *err,
                       size_t cap)
{
    int rc = get_int(obj, key, lo, hi, v, err, cap);
    if (rc == 0)
        return sk_einval(err, cap, "missing field %s (integer between %lld and %lld)", key,
                         (long long)lo, (long long)hi);
    return rc < 0 ? rc : 0;
}

/* The optional object field key of root into *obj (NULL when absent);
 * SK_EINVAL naming the object's shape when the field is no object. */
static int optional_object(json_t *root, const char *key, const char *shape, json_t **obj,
                           char *err, size_t cap)
{
    *obj = json_object_get(root, key);
    if (*obj && !json_is_object(*obj))
        return sk_einval(err, cap, "%s must be an object %s", key, shape);
    return 0;
}

/* Optional "rate_limit": {"per_user_per_s": R, "burst": B}. */
static int parse_rate_limit(json_t *root, struct sk_activity *a, char *err, size_t cap)
{
    json_t *rl;
    int rc =
        optional_object(root, "rate_limit", "{\"per_user_per_s\":R,\"burst\":B}", &rl, err, cap);
    if (rc || !rl) return rc;
    static const char *const known[] = {"per_user_per_s", "burst", NULL};
    if (only_fields(rl, known, "rate_limit", err, cap) < 0) return SK_EINVAL;
    if (require_int(rl, "per_user_per_s", 1, SK_ACTIVITY_RATE_MAX, &a->rl_per_user_per_s, err,
                    cap) < 0 ||
        get_int(rl, "burst", 1, SK_ACTIVITY_RATE_MAX, &a->rl_burst, err, cap) < 0) {
        /* name the object, so "missing field per_user_per_s" is findable */
        char inner[160];
        snprintf(inner, sizeof inner, "%s", err ? err : "");
        a->rl_per_user_per_s = a->rl_burst = 0;
        return sk_einval(err, cap, "rate_limit: %s", inner);
    }
    if (a->rl_burst == 0) a->rl_burst = a->rl_per_user_per_s;
    return 0;
}

/* Optional "waiting_room": {"passes_per_s": R, "pass_ttl_s": T, "seed": S}. */
static int parse_waiting_room(json_t *root, struct sk_activity *a, char *err, size_t cap)
{
    json_t *wr;
    int rc = optional_object(root, "waiting_room", "{\"passes_per_s\":R,\"pass_ttl_s\":T}", &wr,
                             err, cap);
    if (rc || !wr) return rc;
    static const char *const known[] = {"passes_per_s", "pass_ttl_s", "seed", NULL};
    if (only_fields(wr, known, "waiting_room", err, cap) < 0) return SK_EINVAL;
    a->wr_pass_ttl_s = SK_ACTIVITY_PASS_TTL_DEFAULT;
    json_t *seed = json_object_get(wr, "seed");
    char inner[160] = "";
    if (require_int(wr, "passes_per_s", 1, SK_ACTIVITY_PASS_RATE_MAX, &a->wr_passes_per_s, inner,
                    sizeof inner) < 0 ||
        get_int(wr, "pass_ttl_s", 1, SK_ACTIVITY_PASS_TTL_MAX, &a->wr_pass_ttl_s, inner,
                sizeof inner) < 0) {
    } else if (seed && (!json_is_string(seed) || json_string_length(seed) > SK_ACTIVITY_SEED_MAX)) {
        snprintf(inner, sizeof inner, "seed must be a string of %d to %d hex digits",
                 SK_ACTIVITY_SEED_MIN, SK_ACTIVITY_SEED_MAX);
    } else {
        size_t n = seed ? json_string_length(seed) : 0;
        for (size_t i = 0; i < n; i++) /* kept in lower case: one seed, one spelling */
            a->wr_seed[i] = (char)tolower((unsigned char)json_string_value(seed)[i]);
        a->wr_seed[n] = 0;
        if (!seed || sk_activity_seed_valid(a->wr_seed, n)) return 0;
        snprintf(inner, sizeof inner, "seed must be a string of %d to %d hex digits",
                 SK_ACTIVITY_SEED_MIN, SK_ACTIVITY_SEED_MAX);
    }
    a->wr_passes_per_s = a->wr_pass_ttl_s = 0;
    a->wr_seed[0] = 0;
    return sk_einval(err, cap, "waiting_room: %s", inner);
}

/* Optional "challenge": {"pow_bits": N} or {"pow_bits_min": A,
 * "pow_bits_max": B, "pow_load_step": S}, and/or "captcha": "<provider>". */
static int parse_challenge_obj(json_t *ch, struct sk_activity *a, char *err, size_t cap)
{
    json_t *fixed = json_object_get(ch, "pow_bits"), *min = json_object_get(ch, "pow_bits_min");
    json_t *cp = json_object_get(ch, "captcha");
    if (fixed &&
        (min || json_object_get(ch, "pow_bits_max") || json_object_get(ch, "pow_load_step")))
        return sk_einval(err, cap,
                         "pow_bits (fixed) and pow_bits_min/pow_bits_max/pow_load_step (rising) "
                         "exclude each other");
    if (!fixed && !min &&
        (json_object_get(ch, "pow_bits_max") || json_object_get(ch, "pow_load_step")))
        return sk_einval(err, cap, "pow_bits_max and pow_load_step need pow_bits_min");
    if (!fixed && !min && !cp) return sk_einval(err, cap, "give pow_bits, pow_bits_min or captcha");
    if (get_int(ch, fixed ? "pow_bits" : "pow_bits_min", 1, SK_CH_BITS_MAX, &a->ch_pow_min, err,
                cap) < 0 ||
        get_int(ch, "pow_bits_max", 1, SK_CH_BITS_MAX, &a->ch_pow_max, err, cap) < 0 ||
        get_int(ch, "pow_load_step", 1, SK_CH_STEP_MAX, &a->ch_pow_step, err, cap) < 0)
        return SK_EINVAL;
    if (fixed) a->ch_pow_max = a->ch_pow_min;
    if (a->ch_pow_min > 0 && a->ch_pow_max == 0) a->ch_pow_max = a->ch_pow_min;
    if (a->ch_pow_max < a->ch_pow_min)
        return sk_einval(err, cap, "pow_bits_max must not be below pow_bits_min");
    if (a->ch_pow_step > 0 && a->ch_pow_max == a->ch_pow_min)
        return sk_einval(err, cap, "pow_load_step needs pow_bits_max above pow_bits_min");
    if (a->ch_pow_max > a->ch_pow_min && a->ch_pow_step == 0) a->ch_pow_step = SK_CH_STEP_DEFAULT;
    if (cp) {
        if (!json_is_string(cp) || json_string_length(cp) >= sizeof a->ch_captcha ||
            !sk_activity_captcha_valid(json_string_value(cp)))
            return sk_einval(err, cap,
                             "captcha must be \"turnstile\", \"hcaptcha\" or \"recaptcha\"");
        snprintf(a->ch_captcha, sizeof a->ch_captcha, "%s", json_string_value(cp));
    }
    return 0;
}

static int parse_challenge(json_t *root, struct sk_activity *a, char *err, size_t cap)
{
    json_t *ch;
    int rc = optional_object(root, "challenge",
                             "{\"pow_bits\":N} or {\"pow_bits_min\":A,\"pow_bits_max\":B}, "
                             "with or without \"captcha\"",
                             &ch, err, cap);
    if (rc || !ch) return rc;
    static const char *const known[] = {"pow_bits",      "pow_bits_min", "pow_bits_max",
                                        "pow_load_step", "captcha",      NULL};
    if (only_fields(ch, known, "challenge", err, cap) < 0) return SK_EINVAL;
    char inner[200] = "";
    if (parse_challenge_obj(ch, a, inner, sizeof inner) == 0) return 0;
    a->ch_pow_min = a->ch_pow_max = a->ch_pow_step = 0;
    a->ch_captcha[0] = 0;
    return sk_einval(err, cap, "challenge: %s", inner);
}

/* Optional "registration": {"start": T, "end": T}, "allocation": "race" |
 * "draw" and with a draw "draw": {"box_s": B, "seed": S}. */
static int parse_fairness(json_t *root, struct sk_activity *a, char *err, size_t cap)
{
    json_t *reg, *dr, *alloc = json_object_get(root, "allocation");
    char inner[200] = "";
    int rc = optional_object(root, "registration", "{\"start\":T,\"end\":T}", &reg, err, cap);
    if (rc) return rc;
    static const char *const reg_known[] = {"start", "end", NULL}, *const draw_known[] = {
                                                                       "box_s", "seed", NULL};
    if (reg && only_fields(reg, reg_known, "registration", err, cap) < 0) return SK_EINVAL;
    if (reg && (get_time(reg, "start", &a->reg_start_ms, inner, sizeof inner) < 0 ||
                get_time(reg, "end", &a->reg_end_ms, inner, sizeof inner) < 0)) {
        a->reg_start_ms = a->reg_end_ms = 0;
        return sk_einval(err, cap, "registration: %s", inner);
    }
    if (reg && a->reg_end_ms <= a->reg_start_ms)
        return sk_einval(err, cap, "registration: end must be after start");
    if (alloc && (!json_is_string(alloc) || (strcmp(json_string_value(alloc), "race") != 0 &&
                                             strcmp(json_string_value(alloc), "draw") != 0)))
        return sk_einval(err, cap, "allocation must be \"race\" or \"draw\"");
    int draw = alloc && !strcmp(json_string_value(alloc), "draw");
    if ((rc = optional_object(root, "draw", "{\"box_s\":B,\"seed\":S}", &dr, err, cap)) != 0)
        return rc;
    if (dr && !draw) return sk_einval(err, cap, "draw needs \"allocation\":\"draw\"");
    if (dr && only_fields(dr, draw_known, "draw", err, cap) < 0) return SK_EINVAL;
    if (!draw) return 0;
    if (!reg) return sk_einval(err, cap, "allocation draw needs registration");
    a->draw_box_s = SK_ACTIVITY_BOX_DEFAULT;
    if (dr &&
        get_int(dr, "box_s", 1, SK_ACTIVITY_BOX_MAX, &a->draw_box_s, inner, sizeof inner) < 0) {
        a->draw_box_s = 0;
        return sk_einval(err, cap, "draw: %s", inner);
    }
    json_t *seed = dr ? json_object_get(dr, "seed") : NULL;
    if (!seed) return 0;
    size_t n = json_is_string(seed) ? json_string_length(seed) : 0;
    if (n != SK_ACTIVITY_DRAW_SEED_HEX) {
        a->draw_box_s = 0;
        return sk_einval(err, cap, "draw: seed must be a string of %d hex digits",
                         SK_ACTIVITY_DRAW_SEED_HEX);
    }
    for (size_t i = 0; i < n; i++) /* kept in lower case: one seed, one spelling */
        a->draw_seed[i] = (char)tolower((unsigned char)json_string_value(seed)[i]);
    a->draw_seed[n] = 0;
    if (sk_activity_draw_seed_valid(a->draw_seed, n)) return 0;
    a->draw_box_s = 0;
    a->draw_seed[0] = 0;
    return sk_einval(err, cap, "draw: seed must be a string of %d hex digits",
                     SK_ACTIVITY_DRAW_SEED_HEX);
}

static int parse_activity(json_t *root, struct sk_activity *a, char *err, size_t cap)
{
    static const char *const known[] = {
        "id",         "name",      "stock",         "per_user_limit", "max_per_order",
        "start",      "end",       "pay_timeout_s", "segments",       "waiting_room",
        "rate_limit", "challenge", "registration",  "allocation",     "draw",
        NULL};
    if (only_fields(root, known, "", err, cap) < 0) return SK_EINVAL;
    int64_t id;
    if (require_int(root, "id", 1, SK_BODY_ID_MAX, &id, err, cap) < 0) return SK_EINVAL;
    a->id = (uint64_t)id;

    json_t *name = json_object_get(root, "name");
    if (!name) return sk_einval(err, cap, "missing field name (string)");
    if (!json_is_string(name)) return sk_einval(err, cap, "name must be a string");
    size_t nl = json_string_length(name);
    const char *nv = json_string_value(name);
    if (nl == 0 || nl >= sizeof a->name)
        return sk_einval(err, cap, "name must be 1 to %zu bytes", sizeof a->name - 1);
    for (size_t i = 0; i < nl; i++) /* names end up in logs and pages */
        if ((unsigned char)nv[i] < 0x20 || nv[i] == 0x7f)
            return sk_einval(err, cap, "name must not contain control characters");
    memcpy(a->name, nv, nl);
    a->name[nl] = 0;

    if (require_int(root, "stock", 1, SK_BODY_STOCK_MAX, &a->stock, err, cap) < 0 ||
        require_int(root, "per_user_limit", 1, SK_BODY_STOCK_MAX, &a->per_user_limit, err, cap) < 0)
        return SK_EINVAL;
    a->max_per_order = a->per_user_limit;
    /* an order larger than the per-user limit could never succeed */
    if (get_int(root, "max_per_order", 1, a->per_user_limit, &a->max_per_order, err, cap) < 0)
        return SK_EINVAL;
    a->pay_timeout_s = SK_BODY_PAY_TIMEOUT_DEFAULT;
    if (get_int(root, "pay_timeout_s", 1, SK_BODY_PAY_TIMEOUT_MAX, &a->pay_timeout_s, err, cap) < 0)
        return SK_EINVAL;
    if (get_time(root, "start", &a->start_ms, err, cap) < 0 ||
        get_time(root, "end", &a->end_ms, err, cap) < 0)
        return SK_EINVAL;
    if (a->end_ms <= a->start_ms) return sk_einval(err, cap, "end must be after start");
    a->segments = SK_ACTIVITY_SEGMENTS_DEFAULT;
    if (get_int(root, "segments", 1, SK_ACTIVITY_SEGMENTS_MAX, &a->segments, err, cap) < 0)
        return SK_EINVAL;
    if (parse_waiting_room(root, a, err, cap) < 0) return SK_EINVAL;
    if (parse_challenge(root, a, err, cap) < 0) return SK_EINVAL;
    if (parse_fairness(root, a, err, cap) < 0) return SK_EINVAL;
    return parse_rate_limit(root, a, err, cap);
}

int sk_body_activity_create(const char *buf, size_t len, struct sk_activity *out, char *err,
                            size_t cap)
{
    if (err && cap) err[0] = 0;
    memset(out, 0, sizeof *out);
    if (len == 0 || !buf) return sk_einval(err, cap, "body must be a JSON object");
    json_t *root;
    int rc = load_object(buf, len, NULL, &root, err, cap);
    if (rc < 0) return rc;
    rc = parse_activity(root, out, err, cap);
    json_decref(root);
    if (rc < 0) memset(out, 0, sizeof *out);
    return rc;
}

int sk_body_queue_pace(const char *buf, size_t len, int64_t *rate, char *err, size_t cap)
{
    if (err && cap) err[0] = 0;
    if (len == 0 || !buf) return sk_einval(err, cap, "body must be {\"passes_per_s\":R}");
    return body_int(buf, len, "passes_per_s", 1, SK_ACTIVITY_PASS_RATE_MAX, 1, 0, rate, err, cap);
}

int sk_body_queue_control(const char *buf, size_t len, int *action, char *err, size_t cap)
{
    static const char shape[] =
        "body must be {\"action\":\"pause\"|\"queue_all\"|\"refuse_joins\"|\"resume\"}";
    if (err && cap) err[0] = 0;
    if (len == 0 || !buf) return sk_einval(err, cap, "%s", shape);
    json_t *root;
    static const char *const known[] = {"action", NULL};
    int rc = load_object(buf, len, known, &root, err, cap);
    if (rc < 0) return rc;
    json_t *a = json_object_get(root, "action");
    int act = a && json_is_string(a) ? sk_activity_control_action(json_string_value(a)) : SK_EINVAL;
    json_decref(root);
    if (act < 0) return sk_einval(err, cap, "%s", shape);
    *action = act;
    return 0;
}

/* ---- webhook endpoints (admin) ------------------------------------------ */

int sk_body_wh_name_ok(const char *name, size_t len)
{
    if (len < 1 || len >= SK_BODY_WH_NAME_MAX) return 0;
    for (size_t i = 0; i < len; i++) /* name may be a path's bytes: no terminator */
        if (!isalnum((unsigned char)name[i]) && (!name[i] || !strchr("_.-", name[i]))) return 0;
    return 1;
}

/* The optional string field key into dst (cap bytes, never truncated):
 * 1 set, 0 absent, or SK_EINVAL. */
static int get_str(json_t *root, const char *key, char *dst, size_t dcap, char *err, size_t cap)
{
    json_t *j = json_object_get(root, key);
    if (!j) return 0;
    if (!json_is_string(j)) return sk_einval(err, cap, "%s must be a string", key);
    size_t n = json_string_length(j);
    if (n >= dcap) return sk_einval(err, cap, "%s is longer than %zu bytes", key, dcap - 1);
    memcpy(dst, json_string_value(j), n + 1);
    return 1;
}

/* An optional "secret": a whsec_ secret (checked; its refusal never
 * quotes it). */
static int get_secret(json_t *root, char *dst, size_t dcap, char *err, size_t cap)
{
    json_t *j = json_object_get(root, "secret");
    if (!j) return 0;
    struct sk_wh_key k;
    char why[160];
    if (!json_is_string(j) || json_string_length(j) >= dcap ||
        sk_wh_key_parse(json_string_value(j), &k, why, sizeof why) < 0)
        return sk_einval(err, cap, "secret: %s",
                         !json_is_string(j)              ? "must be a string"
                         : json_string_length(j) >= dcap ? "too long"
                                                         : why);
    memcpy(dst, json_string_value(j), json_string_length(j) + 1);
    return 1;
}

/* An http:// or https:// URL with a host, no spaces nor control bytes. */
static int url_ok(const char *u)
{
    size_t skip = !strncmp(u, "http://", 7) ? 7 : !strncmp(u, "https://", 8) ? 8 : 0;
    if (!skip || !u[skip] || u[skip] == '/' || u[skip] == ':' || u[skip] == '?') return 0;
    for (const unsigned char *c = (const unsigned char *)u; *c; c++)
        if (*c <= 0x20 || *c == 0x7f) return 0;
    return 1;
}

int sk_body_webhook_add(const char *buf, size_t len, struct sk_body_webhook *out, char *err,
                        size_t cap)
{
    static const char shape[] = "body must be {\"name\":N,\"url\":U} with optional "
                                "\"events\":[types or prefixes] and \"secret\":\"whsec_...\"";
    if (err && cap) err[0] = 0;
    memset(out, 0, sizeof *out);
    if (len == 0 || !buf) return sk_einval(err, cap, "%s", shape);
    json_t *root;
    static const char *const known[] = {"name", "url", "events", "secret", NULL};
    int rc = load_object(buf, len, known, &root, err, cap);
    if (rc < 0) return rc;
    int g = get_str(root, "name", out->name, sizeof out->name, err, cap);
    if (g <= 0)
        rc = g < 0 ? g : sk_einval(err, cap, "missing field name; %s", shape);
    else if (!sk_body_wh_name_ok(out->name, strlen(out->name)))
        rc = sk_einval(err, cap, "name: 1 to %d of A-Z a-z 0-9 _ . -", SK_BODY_WH_NAME_MAX - 1);
    g = rc ? rc : get_str(root, "url", out->url, sizeof out->url, err, cap);
    if (g <= 0)
        rc = g < 0 ? g : sk_einval(err, cap, "missing field url; %s", shape);
    else if (!url_ok(out->url))
        rc = sk_einval(err, cap, "url: an http:// or https:// URL with a host, without spaces");
    json_t *ev = rc == 0 ? json_object_get(root, "events") : NULL;
    if (ev && !json_is_array(ev))
        rc = sk_einval(err, cap, "events must be an array of event types or prefixes");
    size_t at = 0, i;
    json_t *v;
    if (ev && rc == 0) json_array_foreach(ev, i, v)
        {
            if (rc) break;
            if (!json_is_string(v) || json_string_length(v) == 0 ||
                strchr(json_string_value(v), ','))
                rc = sk_einval(err, cap, "events[%zu] must be an event type or prefix", i);
            else if (at + json_string_length(v) + 2 > sizeof out->events)
                rc = sk_einval(err, cap, "events: more than %zu bytes", sizeof out->events - 1);
            else
                at += (size_t)snprintf(out->events + at, sizeof out->events - at, "%s%s",
                                       at ? "," : "", json_string_value(v));
        }
    if (ev && rc == 0 && json_array_size(ev) == 0)
        rc = sk_einval(err, cap, "events must name at least one type, or be left out (all)");
    char why[300];
    if (rc == 0 && sk_wh_filter_check(out->events, why, sizeof why) < 0)
        rc = sk_einval(err, cap, "%s", why);
    if (rc == 0 && get_secret(root, out->secret, sizeof out->secret, err, cap) < 0) rc = SK_EINVAL;
    json_decref(root);
    if (rc < 0) memset(out, 0, sizeof *out);
    return rc < 0 ? rc : 0;
}

int sk_body_webhook_rotate(const char *buf, size_t len, char *secret, size_t scap, int64_t *keep_s,
                           char *err, size_t cap)
{
    if (err && cap) err[0] = 0;
    secret[0] = 0;
    *keep_s = SK_BODY_WH_KEEP_DEFAULT;
    if (len == 0 || !buf) return 0;
    json_t *root;
    static const char *const known[] = {"secret", "keep_previous_s", NULL};
    int rc = load_object(buf, len, known, &root, err, cap);
    if (rc < 0) return rc;
    if (get_secret(root, secret, scap, err, cap) < 0) rc = SK_EINVAL;
    if (rc == 0 && get_int(root, "keep_previous_s", 0, SK_BODY_WH_KEEP_MAX, keep_s, err, cap) < 0)
        rc = SK_EINVAL;
    json_decref(root);
    if (rc < 0) secret[0] = 0;
    return rc < 0 ? rc : 0;
}

int sk_body_webhook_replay(const char *buf, size_t len, int64_t *since_ms, char *err, size_t cap)
{
    if (err && cap) err[0] = 0;
    if (len == 0 || !buf) return sk_einval(err, cap, "body must be {\"since\":\"RFC 3339 time\"}");
    json_t *root;
    static const char *const known[] = {"since", NULL};
    int rc = load_object(buf, len, known, &root, err, cap);
    if (rc < 0) return rc;
    rc = get_time(root, "since", since_ms, err, cap);
    json_decref(root);
    return rc;
}

int sk_body_options(const char *buf, size_t len, int allow_force, int *force, char *err, size_t cap)
{
    if (err && cap) err[0] = 0;
    *force = 0;
    if (len == 0 || !buf) return 0;
    json_t *root;
    int rc = load_object(buf, len, NULL, &root, err, cap);
    if (rc < 0) {
        char inner[200];
        snprintf(inner, sizeof inner, "%s", err ? err : "");
        return sk_einval(err, cap, "%s; the body must be empty or %s", inner,
                         allow_force ? "{\"force\":true|false}" : "{}");
    }
    static const char *const with_force[] = {"force", NULL}, *const none[] = {NULL};
    rc = only_fields(root, allow_force ? with_force : none, "", err, cap);
    json_t *f = json_object_get(root, "force");
    if (rc == 0 && f && !json_is_boolean(f))
        rc = sk_einval(err, cap, "force must be true or false");
    if (rc == 0 && f) *force = json_is_true(f);
    json_decref(root);
    return rc;
}

/* ---- escaping ------------------------------------------------------------ */

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0 when the
 * bytes there are not one (overlong, surrogate, > U+10FFFF, truncated). */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t need;
    unsigned char lo = 0x80, hi = 0xbf; /* allowed range of the 2nd byte */
    if (c >= 0xc2 && c <= 0xdf)
        need = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        need = 3;
        if (c == 0xe0) lo = 0xa0; /* overlong */
        if (c == 0xed) hi = 0x9f; /* surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        need = 4;
        if (c == 0xf0) lo = 0x90; /* overlong */
        if (c == 0xf4) hi = 0x8f; /* above U+10FFFF */
    } else
        return 0;
    if (n < need || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < need; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    return need;
}

int sk_body_json_escape(const char *s, size_t len, char *out, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *u = (const unsigned char *)s;
    size_t o = 0;
    if (cap == 0) return SK_ENOMEM; /* not even room for the terminator */
    out[0] = 0;
#define PUT(str, n)                                                                                \
    do {                                                                                           \
        if (o + (n) >= cap) goto nomem;                                                            \
        memcpy(out + o, (str), (n));                                                               \
        o += (n);                                                                                  \
    } while (0)
    for (size_t i = 0; i < len;) {
        unsigned char c = u[i];
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            PUT(esc, 2);
            i++;
        } else if (c == '\n') {
            PUT("\\n", 2);
            i++;
        } else if (c == '\r') {
            PUT("\\r", 2);
            i++;
        } else if (c == '\t') {
            PUT("\\t", 2);
            i++;
        } else if (c < 0x20 || c == 0x7f || c == '<' || c == '>' || c == '&') {
            memcpy(esc, "\\u00", 4);
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            PUT(esc, 6);
            i++;
        } else if (c < 0x80) {
            PUT((const char *)u + i, 1);
            i++;
        } else {
            size_t n = utf8_seq(u + i, len - i);
            if (n == 0) {
                PUT("\\ufffd", 6);
                i++;
            } else if (n == 3 && c == 0xe2 && u[i + 1] == 0x80 &&
                       (u[i + 2] == 0xa8 || u[i + 2] == 0xa9)) {
                PUT(u[i + 2] == 0xa8 ? "\\u2028" : "\\u2029", 6); /* JS line terminators */
                i += 3;
            } else {
                PUT((const char *)u + i, n); /* valid UTF-8 passes through */
                i += n;
            }
        }
    }
#undef PUT
    if (o > INT_MAX) goto nomem; /* the length must fit the return type */
    out[o] = 0;
    return (int)o;
nomem:
    if (cap > 0) out[0] = 0;
    return SK_ENOMEM;
}

int sk_body_error_json(const char *code, const char *message, char *out, size_t cap)
{
    static const char a[] = "{\"error\":\"", b[] = "\",\"message\":\"", c[] = "\"}";
    size_t o = 0;
    if (cap > 0) out[0] = 0;
    if (cap < sizeof a) return SK_ENOMEM;
    memcpy(out, a, sizeof a - 1);
    o = sizeof a - 1;
    int n = sk_body_json_escape(code, strlen(code), out + o, cap - o);
    if (n < 0) goto nomem;
    o += (size_t)n;
    if (o + sizeof b > cap) goto nomem;
    memcpy(out + o, b, sizeof b - 1);
    o += sizeof b - 1;
    n = sk_body_json_escape(message, strlen(message), out + o, cap - o);
    if (n < 0) goto nomem;
    o += (size_t)n;
    if (o + sizeof c > cap) goto nomem;
    memcpy(out + o, c, sizeof c);
    return (int)(o + sizeof c - 1);
nomem:
    out[0] = 0;
    return SK_ENOMEM;
}
